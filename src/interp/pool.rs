//! `F.max_pool1d`/`2d`/`3d` and `F.avg_pool1d`/`2d`/`3d`, for both engines: the arguments and PyTorch's checks
//! ([`layout`]), shared, and the reference interpreter's computation ([`pool`]), which `crate::functionalize::pool`
//! builds as terms the same way: the input padded (with the dtype's lowest value for a maximum, zeros for an
//! average), then the kernel's strided windows over the last one, two or three dims folded in kernel order (a
//! NaN-propagating maximum, or a sum divided by the kernel's size or `divisor_override`).

use super::args::{int_list, AResult, Args};
use super::torch_ops::t;
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Scalar, Tensor};

/// A pool's windows: per spatial dim (the input's last `k.len()` dims) the kernel size, stride, padding and
/// dilation, and the output size; whether it is an average (else a maximum), and its divisor.
pub(crate) struct Pool {
    pub k: Vec<i64>,
    pub s: Vec<i64>,
    pub p: Vec<i64>,
    pub d: Vec<i64>,
    pub out: Vec<i64>,
    pub avg: bool,
    pub divisor: i64,
}

impl Pool {
    /// Every kernel offset, per spatial dim, in kernel order (the last dim fastest).
    pub fn offsets(&self) -> Vec<Vec<i64>> {
        let mut all = vec![Vec::new()];
        for (&k, &d) in self.k.iter().zip(&self.d) {
            all = all
                .into_iter()
                .flat_map(|o: Vec<i64>| (0..k).map(move |i| [o.clone(), vec![i * d]].concat()))
                .collect();
        }
        all
    }
}

/// A pool's arguments as given (sizes as lists of one int or one per spatial dim), before PyTorch's checks.
pub(crate) struct PoolArgs {
    pub kernel: Vec<i64>,
    pub stride: Option<Vec<i64>>,
    pub padding: Vec<i64>,
    pub dilation: Vec<i64>,
    pub ceil_mode: bool,
    pub return_indices: bool,
    pub count_include_pad: bool,
    pub divisor_override: Option<i64>,
}

/// The position and keyword of each argument of pooling function `name` after `input` and `kernel_size`: stride,
/// padding, dilation, ceil_mode, return_indices, count_include_pad, divisor_override (`None` where it has none).
pub(crate) fn positions(name: &str) -> [Option<(usize, &'static str)>; 7] {
    let avg = name.starts_with("avg");
    let at = |i: usize, k: &'static str| Some((i, k));
    if avg {
        let divisor = if name != "avg_pool1d" { at(6, "divisor_override") } else { None };
        [at(2, "stride"), at(3, "padding"), None, None, at(4, "ceil_mode"), at(5, "count_include_pad"), divisor]
    } else {
        [at(2, "stride"), at(3, "padding"), at(4, "dilation"), at(5, "ceil_mode"), at(6, "return_indices"), None, None]
    }
}

/// The lowest value of a dtype, the padding of a maximum (which never wins a window).
pub(crate) fn pad_value(d: DType) -> Scalar {
    match d {
        DType::I64 => Scalar::I(i64::MIN),
        DType::I32 => Scalar::I(i32::MIN as i64),
        DType::I16 => Scalar::I(i16::MIN as i64),
        DType::I8 => Scalar::I(i8::MIN as i64),
        DType::U8 => Scalar::I(0),
        _ => Scalar::F(f64::NEG_INFINITY),
    }
}

/// The windows of pooling function `name` (`max_pool1d`/`2d`/`3d`, `avg_pool1d`/`2d`/`3d`) over an input of `shape`
/// and `dtype`, with PyTorch's checks and messages; what funcfuse does not compute (`ceil_mode`, `return_indices`,
/// an average of integers, `count_include_pad=False` with padding) is refused by name.
pub(crate) fn layout(name: &str, shape: &[usize], dtype: DType, a: PoolArgs) -> AResult<Pool> {
    let avg = name.starts_with("avg");
    let nd: usize = if name.ends_with("1d") {
        1
    } else if name.ends_with("3d") {
        3
    } else {
        2
    };
    if a.ceil_mode || a.return_indices {
        return Err(format!("{name} with ceil_mode=True or return_indices=True is not supported"));
    }
    if dtype == DType::Bool {
        return Err(format!("\"{name}\" not implemented for 'Bool'"));
    }
    if nd == 1 && !avg && !dtype.is_float() {
        return Err(format!("\"max_pool1d_impl\" not implemented for '{}'", dtype.name()));
    }
    if avg && !dtype.is_float() {
        return Err(format!("{name} of an integer tensor (a truncated average) is not supported"));
    }
    if !(nd + 1..=nd + 2).contains(&shape.len()) || shape.contains(&0) {
        return Err(match (nd, avg) {
            (1, true) => format!("Expected 2 to 3 dimensions, but got {}-dimensional tensor for argument #1 'self' (while checking arguments for avg_pool1d)", shape.len()),
            (1, false) => format!("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:{:?}", shape),
            (2, _) => "non-empty 3D or 4D (batch mode) tensor expected for input".into(),
            _ => "non-empty 4D or 5D (batch mode) tensor expected for input".into(),
        });
    }
    let per_dim = |v: Vec<i64>, what: &str| -> AResult<Vec<i64>> {
        match v.len() {
            1 => Ok(vec![v[0]; nd]),
            n if n == nd && nd > 1 => Ok(v),
            _ if nd == 1 => Err(format!("{name}: {what} must be a single int, or a tuple of one int")),
            _ => {
                let count = ["", "", "two", "three"][nd];
                let either = match (avg && nd == 3, what) {
                    (true, "stride") => "be omitted, ",
                    (true, _) => "be ",
                    _ => "either be ",
                };
                Err(format!("{name}: {what} must {either}a single int, or a tuple of {count} ints"))
            }
        }
    };
    let k = per_dim(a.kernel, "kernel_size")?;
    let s = match a.stride {
        Some(v) if !v.is_empty() => per_dim(v, "stride")?,
        _ => k.clone(),
    };
    let (p, d) = (per_dim(a.padding, "padding")?, per_dim(a.dilation, "dilation")?);
    if s.contains(&0) {
        return Err("stride should not be zero".into());
    }
    if k.iter().any(|&v| v <= 0) || s.iter().any(|&v| v < 0) || d.iter().any(|&v| v <= 0) || p.iter().any(|&v| v < 0) {
        return Err(format!(
            "{name}: kernel_size, stride and dilation must be greater than zero, padding non-negative"
        ));
    }
    for i in 0..nd {
        if p[i] > (d[i] * (k[i] - 1) + 1) / 2 {
            return Err(format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                p[i], k[i], d[i]
            ));
        }
    }
    if avg && !a.count_include_pad && p.iter().any(|&v| v != 0) {
        return Err(format!("{name} with count_include_pad=False and padding is not supported"));
    }
    let divisor = match a.divisor_override {
        Some(0) => return Err("divisor must be not zero".into()),
        Some(v) => v,
        None => k.iter().product(),
    };
    let n = shape.len();
    let sizes: Vec<i64> = shape[n - nd..].iter().map(|&v| v as i64).collect();
    let out: Vec<i64> = (0..nd).map(|i| (sizes[i] + 2 * p[i] - d[i] * (k[i] - 1) - 1).div_euclid(s[i]) + 1).collect();
    if out.iter().any(|&o| o < 1) {
        if nd == 1 && !avg {
            return Err(format!("max_pool1d() Invalid computed output size: {}", out[0]));
        }
        if nd == 3 && avg {
            let (i, k) = (&sizes, &k);
            return Err(format!(
                "input image (T: {} H: {} W: {}) smaller than kernel size (kT: {} kH: {} kW: {})",
                i[0], i[1], i[2], k[0], k[1], k[2]
            ));
        }
        let (sizes, out) =
            if nd == 1 { ([&[1], &sizes[..]].concat(), [&[1], &out[..]].concat()) } else { (sizes, out) };
        let c = shape[n - nd - 1];
        let dims = |v: &[i64]| v.iter().map(|x| x.max(&0).to_string()).collect::<Vec<_>>().join("x");
        return Err(format!(
            "Given input size: ({c}x{}). Calculated output size: ({c}x{}). Output size is too small",
            dims(&sizes),
            dims(&out)
        ));
    }
    Ok(Pool { k, s, p, d, out, avg, divisor })
}

/// The arguments of pooling function `name` from the reference interpreter's call.
fn args(name: &str, a: &Args) -> AResult<PoolArgs> {
    let [stride, padding, dilation, ceil, indices, include_pad, divisor] = positions(name);
    let given = |at: Option<(usize, &str)>| at.and_then(|(i, k)| a.opt(i, k)).filter(|v| !matches!(v, Value::None));
    let list = |at, default: i64| given(at).map(int_list).transpose().map(|v| v.unwrap_or(vec![default]));
    let flag = |at: Option<(usize, &str)>, default| at.map_or(Ok(default), |(i, k)| a.bool_or(i, k, default));
    Ok(PoolArgs {
        kernel: int_list(a.req(1, "kernel_size")?)?,
        stride: given(stride).map(int_list).transpose()?,
        padding: list(padding, 0)?,
        dilation: list(dilation, 1)?,
        ceil_mode: flag(ceil, false)?,
        return_indices: flag(indices, false)?,
        count_include_pad: flag(include_pad, true)?,
        divisor_override: given(divisor).map(super::args::to_int).transpose()?,
    })
}

/// `F.max_pool1d`/`2d`/`3d` or `F.avg_pool1d`/`2d`/`3d`, as the module doc says.
pub(super) fn pool(name: &str, a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let pool = layout(name, &x.shape, x.dtype(), args(name, a)?)?;
    let (n, nd) = (x.shape.len(), pool.k.len());
    let mut padded = x.clone();
    if pool.p.iter().any(|&v| v != 0) {
        let mut shape = x.shape.clone();
        for i in 0..nd {
            shape[n - nd + i] += 2 * pool.p[i] as usize;
        }
        let fill = if pool.avg { Scalar::F(0.0) } else { pad_value(x.dtype()) };
        padded = Tensor::full(x.dtype(), &shape, fill)?;
        let mut view = padded.clone();
        for i in 0..nd {
            view = view.narrow((n - nd + i) as i64, pool.p[i], x.shape[n - nd + i] as i64)?;
        }
        ops::write_result(&view, &x, false)?;
    }
    let fold = if pool.avg { Binary::Add } else { Binary::Maximum };
    let mut acc: Option<Tensor> = None;
    for o in pool.offsets() {
        let mut win = padded.clone();
        for i in 0..nd {
            let (d, s) = ((n - nd + i) as i64, pool.s[i]);
            win = win.slice(d, Some(o[i]), Some(o[i] + s * (pool.out[i] - 1) + 1), s)?;
        }
        acc = Some(match acc {
            None => win.contiguous_copy(),
            Some(m) => ops::binary(fold, &Operand::T(m), &Operand::T(win))?,
        });
    }
    let mut r = acc.ok_or(format!("{name}: an empty kernel"))?;
    if pool.avg {
        r = ops::binary(Binary::Div, &Operand::T(r), &Operand::S(Scalar::I(pool.divisor)))?;
    }
    t(r)
}
