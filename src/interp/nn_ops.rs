//! More ops detection, LLM and activation code uses, written with the runtime's ops exactly as
//! `crate::functionalize::nn_ops` builds them as terms: `isnan`/`isinf`/`isfinite`, `nan_to_num`, `hardswish`,
//! `hardsigmoid`, `relu6`, `mish`, `F.pad` (constant), pooling (`super::pool`),
//! `repeat_interleave` (an int count) and `baddbmm`.

use super::args::{to_int, AResult, Args};
use super::torch_ops::{t, UNKNOWN_OP};
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand, Unary};
use crate::tensor::views::wrap_dim;
use crate::tensor::{reduce, DType, Scalar, Tensor};

fn bin(op: Binary, x: &Tensor, y: Operand) -> AResult<Tensor> {
    ops::binary(op, &Operand::T(x.clone()), &y)
}

fn f(v: f64) -> Operand {
    Operand::S(Scalar::F(v))
}

fn tt(x: &Tensor) -> Operand {
    Operand::T(x.clone())
}

fn float_only(op: &str, x: &Tensor) -> AResult<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(format!("\"{op}\" not implemented for '{}'", x.dtype().name()))
    }
}

/// The largest finite value of a float dtype (`nan_to_num`'s default for +inf).
pub(crate) fn float_max(d: DType) -> f64 {
    if d == DType::F32 {
        f32::MAX as f64
    } else {
        f64::MAX
    }
}

/// `F.pad`'s layout in constant mode: the output shape, and per dim where the input's kept part goes in the output,
/// where it starts in the input and its length (a negative pad crops that side).
pub(crate) struct PadLayout {
    pub shape: Vec<usize>,
    pub dst: Vec<usize>,
    pub src: Vec<usize>,
    pub len: Vec<usize>,
}

pub(crate) fn pad_layout(shape: &[usize], pad: &[i64]) -> Result<PadLayout, String> {
    if pad.len() % 2 != 0 {
        return Err("Padding length must be divisible by 2".into());
    }
    if pad.len() / 2 > shape.len() {
        return Err("Padding length should be less than or equal to two times the input dimension".into());
    }
    let (mut dst, mut src) = (vec![0; shape.len()], vec![0; shape.len()]);
    let (mut out, mut len) = (shape.to_vec(), shape.to_vec());
    for (i, lr) in pad.chunks(2).enumerate() {
        let d = shape.len() - 1 - i;
        let (n, l, r) = (shape[d] as i64, lr[0], lr[1]);
        // What is kept of the input (never more than the output): PyTorch narrows the input to it.
        let kept = n + l.min(0) + r.min(0);
        if kept < 0 {
            return Err("narrow(): length must be non-negative.".into());
        }
        out[d] = (n + l + r) as usize;
        dst[d] = l.max(0) as usize;
        src[d] = (-l).max(0) as usize;
        len[d] = kept as usize;
    }
    Ok(PadLayout { shape: out, dst, src, len })
}

pub(super) fn nn_op(name: &str, a: &Args) -> AResult<Value> {
    match name {
        "isnan" => {
            let x = a.tensor(0, "input")?;
            t(bin(Binary::Ne, &x, tt(&x))?)
        }
        "isinf" => t(bin(Binary::Eq, &ops::unary(Unary::Abs, &a.tensor(0, "input")?)?, f(f64::INFINITY))?),
        "isfinite" => {
            let x = a.tensor(0, "input")?;
            let not_nan = bin(Binary::Eq, &x, tt(&x))?;
            let not_inf = bin(Binary::Ne, &ops::unary(Unary::Abs, &x)?, f(f64::INFINITY))?;
            t(bin(Binary::BitAnd, &not_nan, tt(&not_inf))?)
        }
        "nan_to_num" => {
            let x = a.tensor(0, "input")?;
            let num =
                |i: usize, k: &str, d: f64| a.opt(i, k).and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(d);
            let (nan, pinf) = (num(1, "nan", 0.0), num(2, "posinf", float_max(x.dtype())));
            let ninf = num(3, "neginf", -float_max(x.dtype()));
            if !x.dtype().is_float() {
                return t(x.contiguous_copy());
            }
            let r = ops::where_(&bin(Binary::Eq, &x, f(f64::NEG_INFINITY))?, &f(ninf), &tt(&x))?;
            let r = ops::where_(&bin(Binary::Eq, &x, f(f64::INFINITY))?, &f(pinf), &tt(&r))?;
            t(ops::where_(&bin(Binary::Ne, &x, tt(&x))?, &f(nan), &tt(&r))?)
        }
        "hardswish" | "hardsigmoid" => {
            let x = a.tensor(0, "input")?;
            float_only(&format!("{name}_cpu"), &x)?;
            let c = ops::clamp(&bin(Binary::Add, &x, f(3.0))?, Some(&f(0.0)), Some(&f(6.0)))?;
            let c = if name == "hardswish" { bin(Binary::Mul, &x, tt(&c))? } else { c };
            t(bin(Binary::Div, &c, f(6.0))?)
        }
        "relu6" => t(ops::clamp(&a.tensor(0, "input")?, Some(&f(0.0)), Some(&f(6.0)))?),
        "mish" => {
            let x = a.tensor(0, "input")?;
            float_only("mish_cpu", &x)?;
            let sp = ops::unary(Unary::Log1p, &ops::unary(Unary::Exp, &x)?)?;
            t(bin(Binary::Mul, &x, tt(&ops::unary(Unary::Tanh, &sp)?))?)
        }
        "max_pool1d" | "max_pool2d" | "max_pool3d" | "avg_pool1d" | "avg_pool2d" | "avg_pool3d" => {
            super::pool::pool(name, a)
        }
        "conv1d" | "conv2d" | "conv3d" => super::conv::conv(name, super::conv::conv_spatial(name).unwrap_or(2), a),
        "interpolate" => super::resample::interpolate(a),
        "pad" => {
            let x = a.tensor(0, "input")?;
            let pad = super::args::int_list(a.req(1, "pad")?)?;
            if let Some(Value::Str(m)) = a.opt(2, "mode") {
                if m.as_ref() != "constant" {
                    return Err(format!("F.pad(mode='{m}') is not supported; only mode='constant'"));
                }
            }
            let value = a.opt(3, "value").and_then(|v| v.as_scalar()).unwrap_or(Scalar::I(0));
            let p = pad_layout(&x.shape, &pad)?;
            let out = Tensor::full(x.dtype(), &p.shape, value)?;
            let (mut view, mut kept) = (out.clone(), x.clone());
            for d in 0..x.shape.len() {
                view = view.narrow(d as i64, p.dst[d] as i64, p.len[d] as i64)?;
                kept = kept.narrow(d as i64, p.src[d] as i64, p.len[d] as i64)?;
            }
            ops::write_result(&view, &kept, false)?;
            t(out)
        }
        "repeat_interleave" => {
            let x = a.tensor(0, "input")?;
            let r = match a.req(1, "repeats")? {
                Value::Int(r) if *r >= 0 => *r,
                Value::Int(_) => return Err("repeat_interleave: repeats can not be negative".into()),
                _ => {
                    return Err(
                        "repeat_interleave with a tensor of repeats has a data-dependent shape; pass an int".into()
                    )
                }
            };
            let (x, d) = match a.opt_int(2, "dim")? {
                Some(d) => {
                    let d = wrap_dim(d, x.dim().max(1))?;
                    (x, d)
                }
                None => (x.reshape(&[-1])?, 0),
            };
            let x = if x.dim() == 0 { x.reshape(&[1])? } else { x };
            let mut sizes: Vec<i64> = x.shape.iter().map(|&n| n as i64).collect();
            let mut merged = sizes.clone();
            merged[d] *= r;
            sizes.insert(d + 1, r);
            t(x.unsqueeze(d as i64 + 1)?.expand(&sizes)?.reshape(&merged)?)
        }
        "baddbmm" => {
            let m = reduce::matmul(&a.tensor(1, "batch1")?, &a.tensor(2, "batch2")?)?;
            let beta = a.opt(3, "beta").and_then(|v| v.as_scalar()).unwrap_or(Scalar::I(1));
            let alpha = a.opt(4, "alpha").and_then(|v| v.as_scalar()).unwrap_or(Scalar::I(1));
            t(add_scaled(&a.tensor(0, "input")?, beta, &m, alpha)?)
        }
        "layer_norm" | "rms_norm" => {
            let x = a.tensor(0, "input")?;
            let ns = match a.req(1, "normalized_shape")?.items() {
                Some(items) => items.iter().map(super::args::to_int).collect::<AResult<Vec<i64>>>()?,
                None => {
                    return Err(format!("{name}(): argument 'normalized_shape' (position 2) must be tuple of ints"))
                }
            };
            let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
                None => Ok(None),
                Some(Value::Tensor(t)) => Ok(Some(t.clone())),
                Some(o) => Err(format!("{name}(): argument '{k}' must be Tensor, not {}", o.type_name())),
            };
            let ln = name == "layer_norm";
            let w = tensor_at(2, "weight")?;
            let b = if ln { tensor_at(3, "bias")? } else { None };
            let eps = match a.opt(if ln { 4 } else { 3 }, "eps") {
                Some(v) => v.as_scalar().ok_or_else(|| format!("{name}(): argument 'eps' must be float"))?.to_f64(),
                None => norm_eps(name, x.dtype()),
            };
            norm_param_dtypes(name, x.dtype(), [&w, &b].iter().filter_map(|t| t.as_ref().map(|t| t.dtype())))?;
            let shape_of = |t: &Option<Tensor>| t.as_ref().map(|t| t.shape.clone());
            let dims = norm_dims(name, &x.shape, x.dtype(), &ns, shape_of(&w).as_deref(), shape_of(&b).as_deref())?;
            let (y, sq_src) = if ln {
                let m = reduce::mean(&x, Some(&dims), true, None)?;
                let d = bin(Binary::Sub, &x, tt(&m))?;
                (d.clone(), d)
            } else {
                (x.clone(), x.clone())
            };
            let var = reduce::mean(&bin(Binary::Mul, &sq_src, tt(&sq_src))?, Some(&dims), true, None)?;
            let r = ops::unary(Unary::Rsqrt, &bin(Binary::Add, &var, f(eps))?)?;
            let mut y = bin(Binary::Mul, &y, tt(&r))?;
            if let Some(w) = w {
                y = bin(Binary::Mul, &y, tt(&w))?;
            }
            if let Some(b) = b {
                y = bin(Binary::Add, &y, tt(&b))?;
            }
            t(if y.dtype() == x.dtype() { y } else { y.to_dtype(x.dtype())? })
        }
        "group_norm" => group_norm(a),
        // `torch.batch_norm` takes its arguments in another order: only `F.batch_norm` is this.
        "batch_norm" if a.name == "torch.nn.functional.batch_norm" => batch_norm(a),
        "cdist" => cdist(a),
        "one_hot" => one_hot(a),
        _ => Err(format!("{UNKNOWN_OP}{name}")),
    }
}

/// `F.group_norm`: the input as `[N, G, rest]`, the biased variance over `rest`, `rsqrt(var + eps)`, back to the
/// input's shape, then the per-channel weight and bias.
fn group_norm(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let g = a.int(1, "num_groups")?;
    let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
        None | Some(Value::None) => Ok(None),
        Some(Value::Tensor(t)) => Ok(Some(t.clone())),
        Some(o) => Err(format!("group_norm(): argument '{k}' must be Tensor, not {}", o.type_name())),
    };
    let (w, b) = (tensor_at(2, "weight")?, tensor_at(3, "bias")?);
    let eps = match a.opt(4, "eps") {
        Some(v) => v.as_scalar().ok_or("group_norm(): argument 'eps' must be float")?.to_f64(),
        None => 1e-5,
    };
    let shape_of = |t: &Option<Tensor>| t.as_ref().map(|t| t.shape.clone());
    let ps: Vec<DType> = [&w, &b].iter().filter_map(|t| t.as_ref().map(|t| t.dtype())).collect();
    let (grouped, param) =
        group_norm_shapes(&x.shape, x.dtype(), g, shape_of(&w).as_deref(), shape_of(&b).as_deref(), &ps)?;
    let xg = x.reshape(&grouped)?;
    let m = reduce::mean(&xg, Some(&[2]), true, None)?;
    let d = bin(Binary::Sub, &xg, tt(&m))?;
    let var = reduce::mean(&bin(Binary::Mul, &d, tt(&d))?, Some(&[2]), true, None)?;
    let r = ops::unary(Unary::Rsqrt, &bin(Binary::Add, &var, f(eps))?)?;
    let shape: Vec<i64> = x.shape.iter().map(|&s| s as i64).collect();
    let mut y = bin(Binary::Mul, &d, tt(&r))?.reshape(&shape)?;
    if let Some(w) = w {
        y = bin(Binary::Mul, &y, tt(&w.reshape(&param)?))?;
    }
    if let Some(b) = b {
        y = bin(Binary::Add, &y, tt(&b.reshape(&param)?))?;
    }
    t(if y.dtype() == x.dtype() { y } else { y.to_dtype(x.dtype())? })
}

/// `F.group_norm`'s checks, as PyTorch makes them: the shape the input is normalized in (`[N, G, rest]`) and the
/// shape the weight and bias broadcast in (`[C, 1, ...]`).
pub(crate) fn group_norm_shapes(
    x: &[usize],
    dt: DType,
    g: i64,
    w: Option<&[usize]>,
    b: Option<&[usize]>,
    params: &[DType],
) -> AResult<(Vec<i64>, Vec<i64>)> {
    let fs = crate::tensor::fmt_shape;
    if x.len() < 2 {
        return Err(format!("Expected at least 2 dimensions for input tensor but received {}", x.len()));
    }
    if !dt.is_float() {
        return Err(format!("\"GroupNormKernelImpl\" not implemented for '{}'", dt.name()));
    }
    let c = x[1] as i64;
    if g <= 0 || c % g != 0 {
        return Err(format!(
            "Expected number of channels in input to be divisible by num_groups, but got input of shape {} and num_groups={g}",
            fs(x)
        ));
    }
    for (k, s) in [("weight", w), ("bias", b)] {
        if let Some(s) = s {
            if s.len() != 1 || s[0] as i64 != c {
                return Err(format!(
                    "Expected {k} to be a vector of size equal to the number of channels in input, but got {k} of shape {} and input of shape {}",
                    fs(s),
                    fs(x)
                ));
            }
        }
    }
    if let Some(p) = params.iter().find(|&&p| p != dt) {
        let _ = p;
        return Err(format!("mixed dtype (CPU): expect parameter to have scalar type of {}", dt.name()));
    }
    let param = std::iter::once(c).chain(std::iter::repeat_n(1, x.len() - 2)).collect();
    Ok((vec![x[0] as i64, g, -1], param))
}

/// `eps` of `F.layer_norm` (1e-5) and `F.rms_norm` (the machine epsilon of the input's dtype) when not given.
pub(crate) fn norm_eps(name: &str, d: DType) -> f64 {
    match (name, d) {
        ("layer_norm", _) => 1e-5,
        (_, DType::F64) => f64::EPSILON,
        _ => f32::EPSILON as f64,
    }
}

/// PyTorch's CPU `layer_norm` takes a weight and bias only of the input's dtype (`rms_norm` takes any float
/// weight and gives the input's dtype, which the callers ensure with a final cast).
pub(crate) fn norm_param_dtypes(name: &str, x: DType, params: impl Iterator<Item = DType>) -> Result<(), String> {
    for p in params {
        if name == "layer_norm" && p != x {
            return Err(if x == DType::F32 {
                "mixed dtype (CPU): expect parameter to have scalar type of Float".into()
            } else {
                "mixed dtype (CPU): all inputs must share same datatype.".into()
            });
        }
    }
    Ok(())
}

fn shape_str<T: std::fmt::Display>(s: &[T]) -> String {
    format!("[{}]", s.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// The dims `F.layer_norm`/`F.rms_norm` normalize over (the last `normalized_shape.len()`), after PyTorch's checks
/// of the input's dtype and trailing shape and of the weight's and bias's shapes, with PyTorch's messages.
pub(crate) fn norm_dims(
    name: &str,
    x: &[usize],
    dt: DType,
    ns: &[i64],
    weight: Option<&[usize]>,
    bias: Option<&[usize]>,
) -> Result<Vec<i64>, String> {
    if !dt.is_float() {
        let kernel = if name == "layer_norm" { "LayerNormKernelImpl" } else { "rms_norm" };
        return Err(format!("\"{kernel}\" not implemented for '{}'", dt.name()));
    }
    if ns.is_empty() {
        return Err("Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element, but got normalized_shape = []".into());
    }
    let k = ns.len();
    let tail_ok = x.len() >= k && x[x.len() - k..].iter().zip(ns).all(|(&a, &b)| a as i64 == b);
    if !tail_ok {
        let star = if name == "layer_norm" { "*, " } else { "*" };
        let inner = shape_str(ns);
        return Err(format!(
            "Given normalized_shape={}, expected input with shape [{star}{}], but got input of size{}",
            inner,
            &inner[1..inner.len() - 1],
            shape_str(x)
        ));
    }
    for (what, s) in [("weight", weight), ("bias", bias)] {
        if let Some(s) = s {
            if s.len() != k || s.iter().zip(ns).any(|(&a, &b)| a as i64 != b) {
                return Err(format!(
                    "Expected {what} to be of same shape as normalized_shape, but got {what} of shape {} and normalized_shape = {}",
                    shape_str(s),
                    shape_str(ns)
                ));
            }
        }
    }
    Ok((1..=k as i64).rev().map(|i| -i).collect())
}

/// `beta * input + alpha * m` as `addmm`/`baddbmm` compute it: with `beta == 0` the input is ignored (NaN and inf
/// in it do not propagate), a factor of 1 is not applied.
pub(crate) fn add_scaled(input: &Tensor, beta: Scalar, m: &Tensor, alpha: Scalar) -> AResult<Tensor> {
    let prod = if alpha.to_f64() == 1.0 { m.clone() } else { bin(Binary::Mul, m, Operand::S(alpha))? };
    if beta.to_f64() == 0.0 {
        ops::broadcast_shapes(&input.shape, &prod.shape)?;
        return Ok(prod);
    }
    let bias = if beta.to_f64() == 1.0 { input.clone() } else { bin(Binary::Mul, input, Operand::S(beta))? };
    bin(Binary::Add, &bias, tt(&prod))
}

/// The channel count of `F.batch_norm`'s input after PyTorch's checks, or the reason it is refused: the running mean
/// and variance (required in evaluation mode) and the weight and bias, when given, must be float tensors of the
/// input's dtype with one element per channel (dim 1); in training mode each channel needs more than one value.
pub(crate) fn batch_norm_channels(
    x: (&[usize], DType),
    training: bool,
    params: [(&str, Option<(&[usize], DType)>); 4],
) -> Result<usize, String> {
    if !x.1.is_float() {
        return Err(format!("\"batch_norm\" not implemented for '{}'", x.1.name()));
    }
    if x.0.len() < 2 {
        return Err(format!("batch_norm(): expected 2D or more input (got {}D input)", x.0.len()));
    }
    let c = x.0[1];
    if training && x.0.iter().product::<usize>() / c.max(1) <= 1 {
        return Err(format!(
            "Expected more than 1 value per channel when training, got input size torch.Size([{}])",
            x.0.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ")
        ));
    }
    for (i, (what, p)) in params.iter().enumerate() {
        match p {
            None if i < 2 && !training => return Err(format!("{what} must be defined in evaluation mode")),
            None => {}
            Some((shape, d)) => {
                if *d != x.1 {
                    return Err(format!(
                        "batch_norm(): {what} of dtype {} with an input of dtype {}: mixed dtypes are not supported",
                        d.name(),
                        x.1.name()
                    ));
                }
                if shape.iter().product::<usize>() != c || shape.len() != 1 {
                    return Err(format!("{what} should contain {c} elements not {}", shape.iter().product::<usize>()));
                }
            }
        }
    }
    Ok(c)
}

/// `F.batch_norm` as PyTorch's CPU kernel computes it: per channel `alpha = weight / sqrt(var + eps)` (`1 / sqrt(var +
/// eps)` without a weight) and `beta = bias - mean * alpha` (`0 - mean * alpha`), then `x * alpha + beta` with the
/// channel on dim 1. In evaluation mode `mean` and `var` are the running statistics; in training mode (`training=True`)
/// they are the batch's, per channel over every other dim (the variance biased), and the running statistics, where
/// given, are updated in place: `momentum * batch + (1 - momentum) * running`, the variance unbiased (`* n / (n - 1)`).
fn batch_norm(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
        None => Ok(None),
        Some(Value::Tensor(t)) => Ok(Some(t.clone())),
        Some(o) => Err(format!("batch_norm(): argument '{k}' must be Tensor, not {}", o.type_name())),
    };
    let ps =
        [tensor_at(1, "running_mean")?, tensor_at(2, "running_var")?, tensor_at(3, "weight")?, tensor_at(4, "bias")?];
    let training = match a.opt(5, "training") {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(o) => return Err(format!("batch_norm(): argument 'training' must be bool, not {}", o.type_name())),
    };
    let number = |i: usize, k: &str, default: f64| match a.opt(i, k) {
        Some(v) => Ok(v
            .as_scalar()
            .ok_or(format!("batch_norm(): argument '{k}' must be float, not {}", v.type_name()))?
            .to_f64()),
        None => Ok::<f64, String>(default),
    };
    let momentum = number(6, "momentum", 0.1)?;
    let eps = number(7, "eps", 1e-5)?;
    let names = ["running_mean", "running_var", "weight", "bias"];
    let info: Vec<Option<(&[usize], DType)>> =
        ps.iter().map(|p| p.as_ref().map(|t| (&t.shape[..], t.dtype()))).collect();
    let c = batch_norm_channels(
        (&x.shape, x.dtype()),
        training,
        [(names[0], info[0]), (names[1], info[1]), (names[2], info[2]), (names[3], info[3])],
    )?;
    let [running_mean, running_var, w, b] = ps;
    let mut view = vec![1i64; x.dim()];
    view[1] = c as i64;
    let (mean, var) = if training {
        let dims: Vec<i64> = (0..x.dim() as i64).filter(|&d| d != 1).collect();
        let mean = reduce::mean(&x, Some(&dims), false, None)?;
        let centered = bin(Binary::Sub, &x, tt(&mean.reshape(&view)?))?;
        let var = reduce::mean(&bin(Binary::Mul, &centered, tt(&centered))?, Some(&dims), false, None)?;
        let n = (x.numel() / c) as f64;
        for (running, batch, scale) in [(&running_mean, &mean, 1.0), (&running_var, &var, n / (n - 1.0))] {
            if let Some(r) = running {
                let batch = bin(Binary::Mul, batch, f(scale * momentum))?;
                let kept = bin(Binary::Mul, r, f(1.0 - momentum))?;
                ops::write_result(r, &bin(Binary::Add, &batch, tt(&kept))?, false)?;
            }
        }
        (mean, var)
    } else {
        (running_mean.expect("checked"), running_var.expect("checked"))
    };
    let sd = ops::unary(Unary::Sqrt, &bin(Binary::Add, &var, f(eps))?)?;
    let invstd = ops::binary(Binary::Div, &f(1.0), &tt(&sd))?;
    let alpha = match &w {
        Some(w) => bin(Binary::Mul, &invstd, tt(w))?,
        None => invstd,
    };
    let ma = bin(Binary::Mul, &mean, tt(&alpha))?;
    let beta = match &b {
        Some(b) => bin(Binary::Sub, b, tt(&ma))?,
        None => ops::binary(Binary::Sub, &f(0.0), &tt(&ma))?,
    };
    let y = bin(Binary::Mul, &x, tt(&alpha.reshape(&view)?))?;
    t(bin(Binary::Add, &y, tt(&beta.reshape(&view)?))?)
}

/// `torch.cdist`'s checks and what funcfuse supports of it: float inputs of one dtype, of at least 2 dims with equal
/// leading (batch) dims and as many columns, and `p >= 0`. With `p=2` over more than 25 rows of either input PyTorch
/// switches to a matrix-product formula whose rounding is not reproduced: refused.
pub(crate) fn cdist_check(x1: (&[usize], DType), x2: (&[usize], DType), p: f64) -> Result<(), String> {
    for (i, (shape, d)) in [x1, x2].iter().enumerate() {
        if shape.len() < 2 {
            return Err(format!("cdist only supports at least 2D tensors, X{} got: {}D", i + 1, shape.len()));
        }
        if !d.is_float() {
            return Err(format!("cdist only supports floating-point dtypes, X{} got: {}", i + 1, d.name()));
        }
    }
    let (n1, n2) = (x1.0.len(), x2.0.len());
    if x1.0[n1 - 1] != x2.0[n2 - 1] {
        return Err(format!(
            "X1 and X2 must have the same number of columns. X1: {} X2: {}",
            x1.0[n1 - 1],
            x2.0[n2 - 1]
        ));
    }
    if x1.1 != x2.1 {
        return Err(format!(
            "cdist(): X1 of dtype {} and X2 of dtype {}: mixed dtypes are not supported",
            x1.1.name(),
            x2.1.name()
        ));
    }
    if x1.0[..n1 - 2] != x2.0[..n2 - 2] {
        return Err("cdist() with batch dims that differ (broadcast) is not supported".into());
    }
    if p.is_nan() || p < 0.0 {
        return Err("cdist only supports non-negative p values".into());
    }
    if p == 2.0 && (x1.0[n1 - 2] > 25 || x2.0[n2 - 2] > 25) {
        return Err("torch.cdist with p=2 over more than 25 rows computes through a matrix product whose rounding funcfuse does not reproduce: not supported; write the distances as ((x1[..., :, None] - x2[..., None, :]) ** 2).sum(-1).sqrt()".into());
    }
    Ok(())
}

/// `torch.cdist(x1, x2, p)`: the differences of every pair of rows, then PyTorch's per-`p` reduction over the
/// columns (a count of nonzero differences for 0, the sum of absolute values for 1, the square root of the sum of
/// squares for 2, the maximum for infinity, else the `1/p`-th power of the sum of `p`-th powers).
fn cdist(a: &Args) -> AResult<Value> {
    let (x1, x2) = (a.tensor(0, "x1")?, a.tensor(1, "x2")?);
    let p = match a.opt(2, "p") {
        Some(v) => v.as_scalar().ok_or("cdist(): argument 'p' must be float")?.to_f64(),
        None => 2.0,
    };
    if a.opt(3, "compute_mode").is_some() {
        return Err("cdist(): compute_mode is not supported".into());
    }
    cdist_check((&x1.shape, x1.dtype()), (&x2.shape, x2.dtype()), p)?;
    let d = bin(Binary::Sub, &x1.unsqueeze(-2)?, tt(&x2.unsqueeze(-3)?))?;
    let ad = ops::unary(Unary::Abs, &d)?;
    let last = Some(&[-1i64][..]);
    // No columns: every distance is 0, also for p = inf (an empty max would raise).
    let no_columns = x1.shape.last() == Some(&0);
    let r = if p == 0.0 {
        // PyTorch's min(ceil(|d|), 1): a NaN difference gives NaN, not a count.
        let nz = bin(Binary::Minimum, &ops::unary(Unary::Ceil, &ad)?, f(1.0))?;
        reduce::sum(&nz, last, false, None)?
    } else if p == 1.0 || (p.is_infinite() && no_columns) {
        reduce::sum(&ad, last, false, None)?
    } else if p == 2.0 {
        ops::unary(Unary::Sqrt, &reduce::sum(&bin(Binary::Mul, &d, tt(&d))?, last, false, None)?)?
    } else if p.is_infinite() {
        reduce::amax(&ad, last, false, true)?
    } else {
        let s = reduce::sum(&bin(Binary::Pow, &ad, f(p))?, last, false, None)?;
        bin(Binary::Pow, &s, f(1.0 / p))?
    };
    t(r)
}

/// `F.one_hot(tensor, num_classes=-1)`: an int64 tensor with a trailing dim of `num_classes` (the largest value plus
/// one where -1), 1 at each value's position; PyTorch's errors, in its order, for other dtypes, an empty input
/// without a number of classes, and values out of range.
fn one_hot(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "tensor")?;
    let classes = match a.opt(1, "num_classes") {
        None => -1,
        Some(v) => to_int(v)?,
    };
    let mut shape = x.shape.clone();
    if let Some(c) = one_hot_static(x.dtype(), x.numel(), classes)? {
        shape.push(c);
        return t(Tensor::from_scalars(DType::I64, &shape, &[])?);
    }
    let vals: Vec<i64> = x.scalars().iter().map(|s| s.to_i64_trunc()).collect();
    let max = vals.iter().copied().max().unwrap_or(0);
    if vals.iter().any(|&v| v < 0) {
        return Err("Class values must be non-negative.".into());
    }
    let c = match classes {
        -1 => max + 1,
        c if c > max => c,
        _ => return Err("Class values must be smaller than num_classes.".into()),
    } as usize;
    let mut out = vec![Scalar::I(0); vals.len() * c];
    for (i, &v) in vals.iter().enumerate() {
        out[i * c + v as usize] = Scalar::I(1);
    }
    shape.push(c);
    t(Tensor::from_scalars(DType::I64, &shape, &out)?)
}

/// `one_hot`'s checks that do not depend on the values (the input's dtype; an empty input's number of classes):
/// `Some(classes)` where the input is empty (the result is too), `None` where the values decide the rest.
pub(crate) fn one_hot_static(d: DType, numel: usize, classes: i64) -> Result<Option<usize>, String> {
    if d != DType::I64 {
        return Err("one_hot is only applicable to index tensor of type LongTensor.".into());
    }
    match numel {
        0 if classes <= 0 => Err("Can not infer total number of classes from empty tensor.".into()),
        0 => Ok(Some(classes as usize)),
        _ => Ok(None),
    }
}
