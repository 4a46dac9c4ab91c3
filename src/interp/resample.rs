//! `F.interpolate` (`nearest`, `nearest-exact`, `linear`, `bilinear`, `trilinear`), shared by the reference
//! interpreter and the functionalizer: the arguments are checked as PyTorch's Python wrapper checks them, and the
//! result is planned as one gather per spatial dim (two gathers and their weights for the linear modes), from the
//! last spatial dim to the first. PyTorch's CPU kernel computes the same sums in the same order (the innermost dim's
//! pair first, each weighted in the input's precision), with the source indices and weights computed as here: in
//! `f32` for `f32` input (PyTorch's `opmath` type), in `f64` for `f64`.

use super::value::Value;

/// One spatial dim's resampling: the output takes, at each position `o`, the input at `i0[o]` (nearest), or
/// `x[i0[o]] * w0[o] + x[i1[o]] * w1[o]` (linear).
pub struct Axis {
    pub dim: usize,
    pub i0: Vec<i64>,
    /// The second source and both weights, for the linear modes.
    pub linear: Option<(Vec<i64>, Vec<f64>, Vec<f64>)>,
}

/// `F.interpolate`'s arguments after the input.
pub struct Request<'a> {
    pub size: Option<&'a Value>,
    pub scale_factor: Option<&'a Value>,
    pub mode: Option<&'a Value>,
    pub align_corners: Option<&'a Value>,
    pub recompute_scale_factor: Option<&'a Value>,
    pub antialias: Option<&'a Value>,
}

fn opt_bool(v: Option<&Value>, name: &str) -> Result<Option<bool>, String> {
    match v {
        None | Some(Value::None) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(format!("interpolate(): argument '{name}' must be bool, not {}", other.type_name())),
    }
}

/// A size or scale given as one number or one per spatial dim, as Python's wrapper words a count mismatch.
fn per_dim<T: Copy>(
    v: &Value,
    n: usize,
    spatial: &[usize],
    what: (&str, &str),
    one: impl Fn(&Value) -> Option<T>,
) -> Result<Vec<T>, String> {
    if let Some(x) = one(v) {
        return Ok(vec![x; n]);
    }
    let items = match v {
        Value::Tuple(xs) => xs.as_ref().clone(),
        Value::List(xs) => xs.borrow().clone(),
        other => {
            return Err(format!(
                "interpolate(): argument '{}' must be a number or a sequence, not {}",
                what.0,
                other.type_name()
            ))
        }
    };
    if items.len() != n {
        let shown: Vec<String> = items.iter().map(super::pyfmt::py_repr).collect();
        let shown = if matches!(v, Value::Tuple(_)) {
            format!("({}{})", shown.join(", "), if shown.len() == 1 { "," } else { "" })
        } else {
            format!("[{}]", shown.join(", "))
        };
        let (a, b, c, d) = match what.1 {
            "o" => ("output", "output size of", "output size", "o"),
            _ => ("scale_factor", "scale_factor of shape", "scale_factor", "s"),
        };
        return Err(format!(
            "ValueError: Input and {a} must have the same number of spatial dimensions, but got input with spatial \
             dimensions of {spatial:?} and {b} {shown}. Please provide input tensor in (N, C, d1, d2, ...,dK) format \
             and {c} in ({d}1, {d}2, ...,{d}K) format."
        ));
    }
    items.iter().map(|x| one(x).ok_or_else(|| format!("interpolate(): {} must hold numbers", what.0))).collect()
}

/// The output shape and the per-dim plan of `F.interpolate` on an input of `shape` (`float64` says its dtype is
/// `f64`, else `f32`), or the error: Python's (prefixed with its class) or funcfuse's refusal.
pub fn plan(shape: &[usize], float64: bool, r: &Request) -> Result<(Vec<usize>, Vec<Axis>), String> {
    let mode = match r.mode {
        None => "nearest".to_string(),
        Some(Value::Str(m)) => m.to_string(),
        Some(other) => return Err(format!("interpolate(): argument 'mode' must be str, not {}", other.type_name())),
    };
    let size = r.size.filter(|v| !matches!(v, Value::None));
    let scale = r.scale_factor.filter(|v| !matches!(v, Value::None));
    let align = opt_bool(r.align_corners, "align_corners")?;
    let recompute = opt_bool(r.recompute_scale_factor, "recompute_scale_factor")?;
    if opt_bool(r.antialias, "antialias")? == Some(true) {
        return Err("F.interpolate(antialias=True) is not supported by funcfuse".into());
    }
    let linear = match mode.as_str() {
        "nearest" | "nearest-exact" => {
            if align.is_some() {
                return Err("ValueError: align_corners option can only be set with the interpolating modes: linear | bilinear | bicubic | trilinear".into());
            }
            false
        }
        "linear" | "bilinear" | "trilinear" => true,
        "bicubic" | "area" | "lanczos" => {
            return Err(format!("F.interpolate(mode='{mode}') is not supported by funcfuse (nearest, nearest-exact, linear, bilinear and trilinear are)"))
        }
        other => return Err(format!("NotImplementedError: Input Error: Only 3D, 4D and 5D input Tensors supported (got {}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {other})", shape.len())),
    };
    let rank = shape.len();
    let needs = match mode.as_str() {
        "linear" => Some(3),
        "bilinear" => Some(4),
        "trilinear" => Some(5),
        _ => None,
    };
    if !(3..=5).contains(&rank) || needs.is_some_and(|n| n != rank) {
        return Err(match needs {
            Some(n) if (3..=5).contains(&rank) => {
                format!("NotImplementedError: Got {rank}D input, but {mode} mode needs {n}D input")
            }
            _ => format!("NotImplementedError: Input Error: Only 3D, 4D and 5D input Tensors supported (got {rank}D) for the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | nearest-exact (got {mode})"),
        });
    }
    let spatial = &shape[2..];
    let n = spatial.len();
    let (out, scales): (Vec<usize>, Option<Vec<f64>>) = match (size, scale) {
        (Some(_), Some(_)) => return Err("ValueError: only one of size or scale_factor should be defined".into()),
        (None, None) => return Err("ValueError: either size or scale_factor should be defined".into()),
        (Some(s), None) => {
            if recompute == Some(true) {
                return Err("ValueError: recompute_scale_factor is not meaningful with an explicit size.".into());
            }
            let int = |v: &Value| if let Value::Int(i) = v { Some(*i) } else { None };
            let sizes = per_dim(s, n, spatial, ("output size", "o"), int)?;
            if let Some(bad) = sizes.iter().find(|&&s| s <= 0) {
                return Err(format!("Input and output sizes should be greater than 0, but got output size {bad}"));
            }
            (sizes.iter().map(|&s| s as usize).collect(), None)
        }
        (None, Some(s)) => {
            let num = |v: &Value| match v {
                Value::Int(i) => Some(*i as f64),
                Value::Float(f) => Some(*f),
                _ => None,
            };
            let f = per_dim(s, n, spatial, ("scale_factor", "s"), num)?;
            let out: Vec<usize> =
                spatial.iter().zip(&f).map(|(&i, &k)| (i as f64 * k).floor().max(0.0) as usize).collect();
            if out.contains(&0) {
                return Err("Input and output sizes should be greater than 0".into());
            }
            (out, if recompute == Some(true) { None } else { Some(f) })
        }
    };
    let mut shape_out = shape[..2].to_vec();
    shape_out.extend(&out);
    let align = align.unwrap_or(false);
    let mut axes = Vec::new();
    for k in (0..n).rev() {
        let s = scales.as_ref().map(|v| v[k]);
        let (i, o) = (spatial[k] as i64, out[k] as i64);
        let axis = if !linear {
            let idx = (0..o).map(|d| nearest(&mode, d, i, o, s)).collect();
            Axis { dim: 2 + k, i0: idx, linear: None }
        } else if float64 {
            linear_axis::<f64>(2 + k, i, o, s, align)
        } else {
            linear_axis::<f32>(2 + k, i, o, s, align)
        };
        axes.push(axis);
    }
    Ok((shape_out, axes))
}

/// PyTorch's `compute_scales_value`: the inverse of a given positive scale, else `input / output`.
fn scale_value(scale: Option<f64>, input: i64, output: i64) -> f64 {
    match scale {
        Some(s) if s > 0.0 => 1.0 / s,
        _ => input as f64 / output as f64,
    }
}

fn nearest(mode: &str, d: i64, input: i64, output: i64, scale: Option<f64>) -> i64 {
    let s = scale_value(scale, input, output) as f32;
    if mode == "nearest-exact" {
        // `floorf((dst_index + 0.5) * scale)`: the product in double, rounded to float.
        return ((((d as f64 + 0.5) * s as f64) as f32).floor() as i64).min(input - 1);
    }
    if output == input {
        d
    } else if output == 2 * input {
        d >> 1
    } else {
        (((d as f32) * s).floor() as i64).min(input - 1)
    }
}

/// The arithmetic PyTorch's linear kernels do in the input's precision.
trait Real: Copy + PartialOrd {
    fn of(x: f64) -> Self;
    fn of_int(x: i64) -> Self;
    fn add(self, o: Self) -> Self;
    fn sub(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn div(self, o: Self) -> Self;
    /// `floorf`, which PyTorch applies whatever the precision.
    fn floor_int(self) -> i64;
    fn wide(self) -> f64;
}

macro_rules! real {
    ($t:ty) => {
        impl Real for $t {
            fn of(x: f64) -> Self {
                x as $t
            }
            fn of_int(x: i64) -> Self {
                x as $t
            }
            fn add(self, o: Self) -> Self {
                self + o
            }
            fn sub(self, o: Self) -> Self {
                self - o
            }
            fn mul(self, o: Self) -> Self {
                self * o
            }
            fn div(self, o: Self) -> Self {
                self / o
            }
            fn floor_int(self) -> i64 {
                (self as f32).floor() as i64
            }
            fn wide(self) -> f64 {
                self as f64
            }
        }
    };
}
real!(f32);
real!(f64);

/// PyTorch's `compute_source_index_and_lambda` for each output position.
fn linear_axis<T: Real>(dim: usize, input: i64, output: i64, scale: Option<f64>, align: bool) -> Axis {
    let ratio: T = if align {
        if output > 1 {
            T::of_int(input - 1).div(T::of_int(output - 1))
        } else {
            T::of(0.0)
        }
    } else {
        T::of(scale_value(scale, input, output))
    };
    let (mut i0, mut i1, mut w0, mut w1) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for d in 0..output {
        if output == input {
            i0.push(d);
            i1.push(d);
            w0.push(1.0);
            w1.push(0.0);
            continue;
        }
        let src = if align {
            ratio.mul(T::of_int(d))
        } else {
            let s = ratio.mul(T::of_int(d).add(T::of(0.5))).sub(T::of(0.5));
            if s < T::of(0.0) {
                T::of(0.0)
            } else {
                s
            }
        };
        let k = src.floor_int().min(input - 1);
        let mut l1 = src.sub(T::of_int(k));
        if l1 < T::of(0.0) {
            l1 = T::of(0.0);
        }
        if l1 > T::of(1.0) {
            l1 = T::of(1.0);
        }
        i0.push(k);
        i1.push(k + i64::from(k < input - 1));
        w0.push(T::of(1.0).sub(l1).wide());
        w1.push(l1.wide());
    }
    Axis { dim, i0, linear: Some((i1, w0, w1)) }
}

/// The arguments of `F.interpolate(input, size, scale_factor, mode, align_corners, recompute_scale_factor,
/// antialias)` after the input, from an engine's lookup by position and name.
pub fn request<'a>(opt: impl Fn(usize, &str) -> Option<&'a Value>) -> Request<'a> {
    Request {
        size: opt(1, "size"),
        scale_factor: opt(2, "scale_factor"),
        mode: opt(3, "mode"),
        align_corners: opt(4, "align_corners"),
        recompute_scale_factor: opt(5, "recompute_scale_factor"),
        antialias: opt(6, "antialias"),
    }
}

/// PyTorch upsamples floating-point tensors only.
pub fn check_dtype(d: crate::tensor::DType) -> Result<(), String> {
    if d.is_float() {
        Ok(())
    } else {
        Err(format!(
            "NotImplementedError: F.interpolate of a {} tensor: PyTorch upsamples floating-point tensors only",
            d.name()
        ))
    }
}

/// The reference interpreter's `F.interpolate`.
pub(super) fn interpolate(a: &super::args::Args) -> super::args::AResult<Value> {
    use crate::tensor::ops::{binary, Binary, Operand};
    use crate::tensor::{index, Buf, DType, Tensor};
    let x = a.tensor(0, "input")?;
    check_dtype(x.dtype())?;
    let (_, axes) = plan(&x.shape, x.dtype() == DType::F64, &request(|i, n| a.opt(i, n)))?;
    let mut y = x;
    for ax in axes {
        let pick = |y: &Tensor, idx: &[i64]| {
            let mut at: Vec<Option<Tensor>> = vec![None; ax.dim];
            at.push(Some(Tensor::from_buf(Buf::I64(idx.iter().copied().collect()), vec![idx.len()])));
            index::index(y, &at)
        };
        let Some((i1, w0, w1)) = &ax.linear else {
            y = pick(&y, &ax.i0)?;
            continue;
        };
        let mut wshape = vec![w0.len()];
        wshape.resize(y.dim() - ax.dim, 1);
        let weight = |w: &[f64]| {
            let buf = match y.dtype() {
                DType::F64 => Buf::F64(w.iter().copied().collect()),
                _ => Buf::F32(w.iter().map(|&v| v as f32).collect()),
            };
            Operand::T(Tensor::from_buf(buf, wshape.clone()))
        };
        let a0 = binary(Binary::Mul, &Operand::T(pick(&y, &ax.i0)?), &weight(w0))?;
        let a1 = binary(Binary::Mul, &Operand::T(pick(&y, i1)?), &weight(w1))?;
        y = binary(Binary::Add, &Operand::T(a0), &Operand::T(a1))?;
    }
    Ok(Value::Tensor(y))
}
