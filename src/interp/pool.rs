//! `F.max_pool1d`/`max_pool2d` and `F.avg_pool1d`/`avg_pool2d`, for both engines: the arguments and PyTorch's checks
//! ([`layout`]), shared, and the reference interpreter's computation ([`pool`]), which
//! `crate::functionalize::pool` builds as terms the same way: the input padded (with the dtype's lowest value for a
//! maximum, zeros for an average), then the kernel's strided windows folded in kernel order (a NaN-propagating
//! maximum, or a sum divided by the kernel's size or `divisor_override`). A 1-d pool is the 2-d pool of the input
//! with a height of one (`unsqueeze(-2)`), as PyTorch computes it.

use super::args::{int_list, AResult, Args};
use super::torch_ops::t;
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Scalar, Tensor};

/// A pool's windows: per spatial dim (height, width) the kernel size, stride, padding and dilation, and the output
/// size; whether it is an average (else a maximum), its divisor, and whether the input has no height dim (1-d).
pub(crate) struct Pool2d {
    pub k: [i64; 2],
    pub s: [i64; 2],
    pub p: [i64; 2],
    pub d: [i64; 2],
    pub out: [i64; 2],
    pub avg: bool,
    pub divisor: i64,
    pub one_d: bool,
}

/// A pool's arguments as given (sizes as lists of one or two ints), before PyTorch's checks.
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
        let divisor = if name == "avg_pool2d" { at(6, "divisor_override") } else { None };
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

/// The windows of pooling function `name` (`max_pool1d`, `max_pool2d`, `avg_pool1d`, `avg_pool2d`) over an input of
/// `shape` and `dtype`, with PyTorch's checks and messages; what funcfuse does not compute (`ceil_mode`,
/// `return_indices`, an average of integers, `count_include_pad=False` with padding) is refused by name.
pub(crate) fn layout(name: &str, shape: &[usize], dtype: DType, a: PoolArgs) -> AResult<Pool2d> {
    let (avg, one_d) = (name.starts_with("avg"), name.ends_with("1d"));
    if a.ceil_mode || a.return_indices {
        return Err(format!("{name} with ceil_mode=True or return_indices=True is not supported"));
    }
    if dtype == DType::Bool {
        return Err(format!("\"{name}\" not implemented for 'Bool'"));
    }
    if avg && !dtype.is_float() {
        return Err(format!("{name} of an integer tensor (a truncated average) is not supported"));
    }
    let dims = if one_d { 2..=3 } else { 3..=4 };
    if !dims.contains(&shape.len()) || shape.contains(&0) {
        return Err(match (one_d, avg) {
            (false, _) => "non-empty 3D or 4D (batch mode) tensor expected for input".into(),
            (true, true) => format!("Expected 2 to 3 dimensions, but got {}-dimensional tensor for argument #1 'self' (while checking arguments for avg_pool1d)", shape.len()),
            (true, false) => format!("max_pool1d: Expected 2D or 3D (batch mode) tensor with optional 0 dim batch size for input, but got:{:?}", shape),
        });
    }
    let two = |v: Vec<i64>, what: &str| -> AResult<[i64; 2]> {
        match (one_d, v.as_slice()) {
            (true, [a]) => Ok([1, *a]),
            (false, [a]) => Ok([*a, *a]),
            (false, [a, b]) => Ok([*a, *b]),
            (true, _) => Err(format!("{name}: {what} must be a single int, or a tuple of one int")),
            (false, _) => Err(format!("{name}: {what} must either be a single int, or a tuple of two ints")),
        }
    };
    let k = two(a.kernel, "kernel_size")?;
    let s = match a.stride {
        Some(v) if !v.is_empty() => two(v, "stride")?,
        _ => k,
    };
    let (p, d) = (
        if one_d { [0, two(a.padding, "padding")?[1]] } else { two(a.padding, "padding")? },
        two(a.dilation, "dilation")?,
    );
    if s.contains(&0) {
        return Err("stride should not be zero".into());
    }
    if k.iter().any(|&v| v <= 0) || s.iter().any(|&v| v < 0) || d.iter().any(|&v| v <= 0) || p.iter().any(|&v| v < 0) {
        return Err(format!(
            "{name}: kernel_size, stride and dilation must be greater than zero, padding non-negative"
        ));
    }
    for i in 0..2 {
        if p[i] > (d[i] * (k[i] - 1) + 1) / 2 {
            return Err(format!(
                "pad should be at most half of effective kernel size, but got pad={}, kernel_size={} and dilation={}",
                p[i], k[i], d[i]
            ));
        }
    }
    if avg && !a.count_include_pad && p != [0, 0] {
        return Err(format!("{name} with count_include_pad=False and padding is not supported"));
    }
    let divisor = match a.divisor_override {
        Some(0) => return Err("divisor must be not zero".into()),
        Some(v) => v,
        None => k[0] * k[1],
    };
    let n = shape.len();
    let (h, w) = (if one_d { 1 } else { shape[n - 2] as i64 }, shape[n - 1] as i64);
    let size = |len: i64, i: usize| (len + 2 * p[i] - d[i] * (k[i] - 1) - 1).div_euclid(s[i]) + 1;
    let out = [size(h, 0), size(w, 1)];
    if out[0] < 1 || out[1] < 1 {
        let c = shape[n - if one_d { 2 } else { 3 }];
        return Err(format!(
            "Given input size: ({c}x{h}x{w}). Calculated output size: ({c}x{}x{}). Output size is too small",
            out[0].max(0),
            out[1].max(0)
        ));
    }
    Ok(Pool2d { k, s, p, d, out, avg, divisor, one_d })
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

/// `F.max_pool1d`, `max_pool2d`, `avg_pool1d` or `avg_pool2d`, as the module doc says.
pub(super) fn pool(name: &str, a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let pool = layout(name, &x.shape, x.dtype(), args(name, a)?)?;
    let x = if pool.one_d { x.unsqueeze(-2)? } else { x };
    let n = x.shape.len();
    let mut padded = x.clone();
    if pool.p != [0, 0] {
        let mut shape = x.shape.clone();
        shape[n - 2] += 2 * pool.p[0] as usize;
        shape[n - 1] += 2 * pool.p[1] as usize;
        let fill = if pool.avg { Scalar::F(0.0) } else { pad_value(x.dtype()) };
        padded = Tensor::full(x.dtype(), &shape, fill)?;
        let view = padded.narrow(-2, pool.p[0], x.shape[n - 2] as i64)?.narrow(-1, pool.p[1], x.shape[n - 1] as i64)?;
        ops::write_result(&view, &x, false)?;
    }
    let fold = if pool.avg { Binary::Add } else { Binary::Maximum };
    let mut acc: Option<Tensor> = None;
    for i in 0..pool.k[0] {
        for j in 0..pool.k[1] {
            let (r0, c0) = (i * pool.d[0], j * pool.d[1]);
            let win = padded.slice(-2, Some(r0), Some(r0 + pool.s[0] * (pool.out[0] - 1) + 1), pool.s[0])?.slice(
                -1,
                Some(c0),
                Some(c0 + pool.s[1] * (pool.out[1] - 1) + 1),
                pool.s[1],
            )?;
            acc = Some(match acc {
                None => win.contiguous_copy(),
                Some(m) => ops::binary(fold, &Operand::T(m), &Operand::T(win))?,
            });
        }
    }
    let mut r = acc.ok_or(format!("{name}: an empty kernel"))?;
    if pool.avg {
        r = ops::binary(Binary::Div, &Operand::T(r), &Operand::S(Scalar::I(pool.divisor)))?;
    }
    t(if pool.one_d { r.squeeze(Some(&[-2]))? } else { r })
}
