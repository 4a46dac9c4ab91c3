//! Less common ops: gathers and scatters, sorting, statistics, flips and rolls, and a few `torch.nn.functional`
//! helpers. Each is built from the tensor runtime's primitives.

use crate::tensor::ties::Ties;
use std::rc::Rc;

use super::args::{int_list, to_int, AResult, Args};
use super::torch_ops::{operand_arg, t};
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand, Unary};
use crate::tensor::views::wrap_dim;
use crate::tensor::{index, reduce, DType, Scalar, Tensor};

/// In-place ops that change a tensor's shape or strides: our values share metadata by copy, so they are refused.
pub(super) const METADATA_INPLACE: &[&str] =
    &["t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "as_strided_", "swapdims_", "swapaxes_"];

/// PyTorch's `sort`/`argsort` take `stable=` only in the signature whose `dim` and `descending` are keyword-only:
/// `torch.sort(x, 0, stable=True)` is an error there, so it is one here (`positional` counts the tensor itself).
pub(crate) fn stable_keywords_only(name: &str, positional: usize, stable: bool) -> AResult<()> {
    if stable && positional > 1 {
        let op = name.rsplit('.').next().unwrap_or(name);
        return Err(format!(
            "{op}() received an invalid combination of arguments: with stable=, dim and descending are keyword-only \
             (write {op}(x, dim=..., descending=..., stable=True))"
        ));
    }
    Ok(())
}

/// `sort`'s and `argsort`'s `stable=` (keyword-only dims with it): the order of ties, PyTorch's unstable sort's
/// without it (`tensor::ties`).
fn stable_arg(a: &Args) -> AResult<Ties> {
    let stable = a.bool_or(99, "stable", false)?;
    stable_keywords_only(&a.name, a.pos.len(), a.kw.iter().any(|(k, _)| k == "stable"))?;
    Ok(if stable { Ties::Stable } else { Ties::Sort })
}

/// PyTorch's sort of lines along which the input does not move (stride 0: an expanded dim) gives `0, 1, 2, ...`:
/// its kernel returns them in order before sorting anything.
fn along_stride_zero(x: &Tensor, dim: i64, ties: Ties) -> AResult<Ties> {
    let d = wrap_dim(dim, x.dim())?;
    Ok(if x.dim() > 0 && x.strides[d] == 0 { Ties::Stable } else { ties })
}

fn named(values: Tensor, indices: Tensor) -> Value {
    Value::Named(Rc::new(vec![Value::Tensor(values), Value::Tensor(indices)]), &["values", "indices"])
}

fn var(x: &Tensor, a: &Args) -> AResult<Tensor> {
    let dims = a.dims(1, "dim")?;
    let keep = a.bool_or(3, "keepdim", false)?;
    let correction = match (a.opt(99, "correction"), a.opt(2, "unbiased")) {
        (Some(c), _) => to_int(c)?,
        (None, Some(Value::Bool(false))) => 0,
        _ => 1,
    };
    let mean = reduce::mean(x, dims.as_deref(), true, None)?;
    let diff = ops::binary(Binary::Sub, &Operand::T(x.clone()), &Operand::T(mean))?;
    let sq = ops::binary(Binary::Mul, &Operand::T(diff.clone()), &Operand::T(diff))?;
    let s = reduce::sum(&sq, dims.as_deref(), keep, None)?;
    let n = (x.numel() / s.numel().max(1)) as i64;
    let denom = (n - correction).max(0) as f64;
    ops::binary(Binary::Div, &Operand::T(s), &Operand::S(Scalar::F(denom)))
}

pub(super) fn extra_op(name: &str, a: &Args) -> AResult<Value> {
    let bin = |op: Binary, x: Operand, y: Operand| ops::binary(op, &x, &y);
    match name {
        "gather" => gather(a),
        "take_along_dim" => take_along_dim(a),
        "scatter" | "scatter_add" => scatter_op(name, a),
        "index_fill" => {
            let x = a.tensor(0, "input")?.contiguous_copy();
            let d = wrap_dim(a.int(1, "dim")?, x.dim())?;
            let ix = a.tensor(2, "index")?;
            let mut idx: Vec<Option<Tensor>> = vec![None; d];
            idx.push(Some(ix));
            let src = match a.req(3, "value")? {
                Value::Tensor(s) => s.clone(),
                v => Tensor::scalar(x.dtype(), v.as_scalar().ok_or("index_fill(): value must be a number or tensor")?)?,
            };
            index::index_put(&x, &idx, &src, false)?;
            t(x)
        }
        "masked_select" => {
            let x = a.tensor(0, "input")?;
            let m = a.tensor(1, "mask")?;
            let shape = ops::broadcast_shapes(&x.shape, &m.shape)?;
            let xv = x.broadcast_to(&shape)?.scalars();
            let mv = m.broadcast_to(&shape)?.scalars();
            let vals: Vec<Scalar> = xv.into_iter().zip(mv).filter(|(_, k)| k.to_bool()).map(|(v, _)| v).collect();
            t(Tensor::from_scalars(x.dtype(), &[vals.len()], &vals)?)
        }
        "sort" => {
            let x = a.tensor(0, "input")?;
            let dim = a.int_or(1, "dim", -1)?;
            let ties = along_stride_zero(&x, dim, stable_arg(a)?)?;
            let (v, i) = index::sort(&x, dim, a.bool_or(2, "descending", false)?, ties)?;
            Ok(named(v, i))
        }
        "argsort" => {
            let x = a.tensor(0, "input")?;
            let dim = a.int_or(1, "dim", -1)?;
            let ties = along_stride_zero(&x, dim, stable_arg(a)?)?;
            t(index::sort(&x, dim, a.bool_or(2, "descending", false)?, ties)?.1)
        }
        "topk" => {
            let x = a.tensor(0, "input")?;
            let k = a.int(1, "k")?;
            let dim = a.int_or(2, "dim", -1)?;
            let largest = a.bool_or(3, "largest", true)?;
            let sorted = a.bool_or(4, "sorted", true)?;
            let d = wrap_dim(dim, x.dim())?;
            if k < 0 || (x.dim() > 0 && k as usize > x.shape[d]) {
                return Err("selected index k out of range".into());
            }
            let (v, i) = index::sort(&x, dim, largest, Ties::TopK { k: k as usize, sorted })?;
            Ok(named(v.narrow(d as i64, 0, k)?.contiguous_copy(), i.narrow(d as i64, 0, k)?.contiguous_copy()))
        }
        "flip" => flip(a),
        "roll" => roll(a),
        "diff" => diff(a),
        "outer" | "ger" => {
            let x = a.tensor(0, "input")?;
            let y = a.tensor(1, "vec2")?;
            t(bin(Binary::Mul, Operand::T(x.unsqueeze(1)?), Operand::T(y.unsqueeze(0)?))?)
        }
        "addmm" => {
            let m = reduce::matmul(&a.tensor(1, "mat1")?, &a.tensor(2, "mat2")?)?;
            let beta = a.opt(3, "beta").and_then(|v| v.as_scalar()).unwrap_or(Scalar::I(1));
            let alpha = a.opt(4, "alpha").and_then(|v| v.as_scalar()).unwrap_or(Scalar::I(1));
            t(super::nn_ops::add_scaled(&a.tensor(0, "input")?, beta, &m, alpha)?)
        }
        "hypot" => {
            let x = operand_arg(a, 0, "input")?;
            let y = operand_arg(a, 1, "other")?;
            let s = bin(
                Binary::Add,
                Operand::T(bin(Binary::Mul, x.clone(), x)?),
                Operand::T(bin(Binary::Mul, y.clone(), y)?),
            )?;
            t(ops::unary(Unary::Sqrt, &s)?)
        }
        "log2" | "log10" => {
            let l = ops::unary(Unary::Log, &a.tensor(0, "input")?)?;
            let k = if name == "log2" { std::f64::consts::LN_2 } else { std::f64::consts::LN_10 };
            t(bin(Binary::Div, Operand::T(l), Operand::S(Scalar::F(k)))?)
        }
        "var" | "std" => {
            let x = a.tensor(0, "input")?;
            let v = var(&x, a)?;
            t(if name == "std" { ops::unary(Unary::Sqrt, &v)? } else { v })
        }
        "logsumexp" => logsumexp(a),
        "logcumsumexp" => logcumsumexp(a),
        "leaky_relu" => {
            let x = a.tensor(0, "input")?;
            if !x.dtype().is_float() {
                return Err(format!("\"leaky_relu_cpu\" not implemented for '{}'", x.dtype().name()));
            }
            let slope = a.opt(1, "negative_slope").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(0.01);
            let pos = bin(Binary::Gt, Operand::T(x.clone()), Operand::S(Scalar::I(0)))?;
            let neg = bin(Binary::Mul, Operand::T(x.clone()), Operand::S(Scalar::F(slope)))?;
            t(ops::where_(&pos, &Operand::T(x), &Operand::T(neg))?)
        }
        // PyTorch's vectorized CPU kernel: `x > 0 ? x : alpha * expm1(x)`.
        "elu" => {
            let x = a.tensor(0, "input")?;
            if !x.dtype().is_float() {
                return Err(format!("\"elu_cpu\" not implemented for '{}'", x.dtype().name()));
            }
            let alpha = a.opt(1, "alpha").map(|v| v.as_scalar().ok_or("elu(): alpha must be a number")).transpose()?;
            let alpha = alpha.map_or(1.0, |s| s.to_f64());
            let pos = bin(Binary::Gt, Operand::T(x.clone()), Operand::S(Scalar::I(0)))?;
            let neg = bin(Binary::Mul, Operand::T(ops::unary(Unary::Expm1, &x)?), Operand::S(Scalar::F(alpha)))?;
            t(ops::where_(&pos, &Operand::T(x), &Operand::T(neg))?)
        }
        "normalize" => normalize(a),
        "embedding" => {
            for (i, n) in [(2, "padding_idx"), (4, "norm_type"), (5, "scale_grad_by_freq"), (6, "sparse")] {
                a.opt(i, n);
            }
            if !matches!(a.opt(3, "max_norm"), None | Some(Value::None)) {
                return Err("embedding(max_norm=...) rescales the weight in place: not supported".into());
            }
            let idx = a.tensor(0, "input")?;
            let w = a.tensor(1, "weight")?;
            index::check_select_index("embedding", idx.dtype())?;
            t(index::index(&w, &[Some(idx)])?)
        }
        "dropout" => {
            super::compat::dropout(a)?;
            t(a.tensor(0, "input")?)
        }
        "tolist" => Ok(to_list(&a.tensor(0, "input")?)),
        "is_contiguous" => Ok(Value::Bool(a.tensor(0, "input")?.is_contiguous())),
        // No tensor here is complex or has its conjugate or negative bit set: each is the tensor itself.
        "cpu" | "conj" | "resolve_conj" | "resolve_neg" => t(a.tensor(0, "input")?),
        "Size" => Ok(Value::tuple(int_list(a.req(0, "sizes")?)?.into_iter().map(Value::Int).collect())),
        "is_tensor" => Ok(Value::Bool(matches!(a.req(0, "obj")?, Value::Tensor(_)))),
        "fill_diagonal" => {
            let x = a.tensor(0, "input")?.contiguous_copy();
            let v = a.req(1, "fill_value")?.as_scalar().ok_or("fill_diagonal_(): value must be a number")?;
            let d = x.diagonal(0, 0, 1)?;
            d.write_scalars(&vec![v; d.numel()]);
            t(x)
        }
        _ => super::more_ops::more_op(name, a),
    }
}

/// `take_along_dim`: both operands expanded (or flattened) as PyTorch does, negative indices wrapped, then `gather`.
fn take_along_dim(a: &Args) -> AResult<Value> {
    let bin = |op: Binary, x: Operand, y: Operand| ops::binary(op, &x, &y);
    let (x, idx) = (a.tensor(0, "input")?, a.tensor(1, "indices")?);
    let dim = match a.opt(2, "dim") {
        None | Some(Value::None) => None,
        Some(v) => Some(to_int(v)?),
    };
    let (x, idx, d) = match super::compat::take_along_dim_plan(&x.shape, &idx.shape, idx.dtype(), dim)? {
        Some((xs, is, d)) => (x.expand(&xs)?, idx.expand(&is)?, d),
        None => (x.reshape(&[-1])?, idx.reshape(&[-1])?, 0),
    };
    // Negative indices count from the end, as PyTorch's take_along_dim wraps them (gather does not).
    let n = Operand::S(Scalar::I(x.shape.get(d as usize).copied().unwrap_or(1) as i64));
    let neg = bin(Binary::Lt, Operand::T(idx.clone()), Operand::S(Scalar::I(0)))?;
    let wrapped = bin(Binary::Add, Operand::T(idx.clone()), n)?;
    let idx = ops::where_(&neg, &Operand::T(wrapped), &Operand::T(idx))?;
    let g = Args::new(vec![Value::Tensor(x), Value::Int(d), Value::Tensor(idx)], vec![], a.span, "gather".into());
    extra_op("gather", &g)
}

/// `torch.gather(input, dim, index)`: the input's element at each index position, its coordinate along `dim` read
/// from `index`.
fn gather(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let d = wrap_dim(a.int(1, "dim")?, x.dim())?;
    let idx = a.tensor(2, "index")?;
    index::check_along_dim_index("gather", idx.dtype())?;
    let offs = index::along_dim_offsets(&x, d, &idx)?;
    let b = x.buf.borrow();
    let vals: Vec<Scalar> = offs.iter().map(|&o| b.get(o)).collect();
    t(Tensor::from_scalars(x.dtype(), &idx.shape, &vals)?)
}

/// `scatter`/`scatter_add`: a copy of the input with `src` (a tensor, or a value) written (or added, for `reduce='add'`)
/// at the `index`ed positions along `dim`.
fn scatter_op(name: &str, a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?.contiguous_copy();
    let d = wrap_dim(a.int(1, "dim")?, x.dim())?;
    let idx = a.tensor(2, "index")?;
    index::check_along_dim_index("scatter", idx.dtype())?;
    let offs = index::along_dim_offsets(&x, d, &idx)?;
    let src: Vec<Scalar> = match a.opt(3, "src").or(a.opt(3, "value")) {
        Some(Value::Tensor(s)) => {
            let n = idx.numel();
            let sl = (0..s.dim()).try_fold(s.clone(), |acc, k| acc.narrow(k as i64, 0, idx.shape[k] as i64))?;
            let v = sl.scalars();
            if v.len() != n {
                return Err("scatter(): src is smaller than index".into());
            }
            v
        }
        Some(v) => {
            vec![v.as_scalar().ok_or("scatter(): value must be a number")?; idx.numel()]
        }
        None => return Err("scatter() missing argument 'src'".into()),
    };
    let add = name == "scatter_add" || matches!(a.opt(4, "reduce"), Some(Value::Str(s)) if s.as_ref() == "add");
    index::scatter_values(&x, &offs, src, add);
    t(x)
}

/// `flip`: a copy with the given dims reversed.
fn flip(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let dims = a.sizes(1, "dims")?;
    let mut v = x.clone();
    for d in dims {
        let d = wrap_dim(d, x.dim())?;
        let n = v.shape.get(d).copied().unwrap_or(1);
        if n > 1 {
            let mut strides = v.strides.clone();
            let off = (v.offset as isize + (n as isize - 1) * strides[d]) as usize;
            strides[d] = -strides[d];
            v = v.restride(v.shape.clone(), strides, off);
        }
    }
    t(v.contiguous_copy())
}

/// `roll`: each element moved `shifts` places along its dim, wrapping around (the flattened tensor without `dims`).
fn roll(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let shifts = int_list(a.req(1, "shifts")?)?;
    let dims = match a.opt(2, "dims") {
        Some(d) => int_list(d)?,
        None => {
            let flat = x.reshape(&[-1])?;
            let n = flat.numel() as i64;
            let s = if n > 0 { shifts[0].rem_euclid(n) } else { 0 };
            let parts = [flat.narrow(0, n - s, s)?, flat.narrow(0, 0, n - s)?];
            return t(reduce::cat(&parts, 0)?.reshape(&x.shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?);
        }
    };
    let mut v = x.clone();
    for (s, d) in shifts.iter().zip(dims) {
        if x.dim() == 0 {
            return Err(format!("Dimension specified as {d} but tensor has no dimensions"));
        }
        let d = wrap_dim(d, x.dim())? as i64;
        let n = v.shape[d as usize] as i64;
        if n == 0 {
            continue;
        }
        let s = s.rem_euclid(n);
        v = reduce::cat(&[v.narrow(d, n - s, s)?, v.narrow(d, 0, n - s)?], d)?;
    }
    t(v.contiguous_copy())
}

/// `diff(input, n, dim, prepend, append)`: `n` times, each element minus the one before along `dim` (for bools,
/// whether they differ), after `prepend` and `append` are concatenated along it.
fn diff(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let (n, d) = diff_args(x.dim(), a.int_or(1, "n", 1)?, a.int_or(2, "dim", -1)?)?;
    let mut parts = Vec::new();
    for (i, name) in [(3, "prepend"), (99, "input"), (4, "append")] {
        match (name, a.opt(i, name)) {
            ("input", _) => parts.push(x.clone()),
            (_, Some(Value::Tensor(p))) => parts.push(p.clone()),
            (_, Some(v)) => return Err(format!("diff(): argument '{name}' must be Tensor, not {}", v.type_name())),
            (_, None) => {}
        }
    }
    let mut v = if parts.len() > 1 { reduce::cat(&parts, d)? } else { x };
    for _ in 0..n {
        let len = v.shape[d as usize] as i64;
        if len == 0 {
            break;
        }
        let (hi, lo) = (Operand::T(v.narrow(d, 1, len - 1)?), Operand::T(v.narrow(d, 0, len - 1)?));
        v = ops::binary(if v.dtype() == crate::tensor::DType::Bool { Binary::Ne } else { Binary::Sub }, &hi, &lo)?;
    }
    t(v.contiguous_copy())
}

/// `diff`'s order and dim (wrapped), with PyTorch's errors; order 0 (the input itself) is refused.
pub(crate) fn diff_args(ndim: usize, n: i64, dim: i64) -> AResult<(i64, i64)> {
    if ndim == 0 {
        return Err("diff expects input to be at least one-dimensional".into());
    }
    if n < 0 {
        return Err(format!("order must be non-negative but got {n}"));
    }
    if n == 0 {
        return Err("diff() with n=0 is not supported".into());
    }
    Ok((n, wrap_dim(dim, ndim)? as i64))
}

/// `logsumexp`: the maximum subtracted before `exp` and added back after `log` (an infinite maximum counts as 0).
fn logsumexp(a: &Args) -> AResult<Value> {
    let bin = |op: Binary, x: Operand, y: Operand| ops::binary(op, &x, &y);
    let x = a.tensor(0, "input")?;
    let dims = a.dims(1, "dim")?;
    let keep = a.bool_or(2, "keepdim", false)?;
    if x.numel() == 0 {
        // No max to subtract (it would raise over a zero-length dim): the sum of no exponentials is 0 and
        // its log -inf, as PyTorch gives.
        let e = ops::unary(Unary::Exp, &x)?;
        return t(ops::unary(Unary::Log, &reduce::sum(&e, dims.as_deref(), keep, None)?)?);
    }
    let m = reduce::amax(&x, dims.as_deref(), true, true)?;
    let m = ops::map_n(&[&Operand::T(m.clone())], m.dtype(), m.dtype(), |v| {
        Ok(if v[0].to_f64().is_infinite() { Scalar::F(0.0) } else { v[0] })
    })?;
    let e = ops::unary(Unary::Exp, &bin(Binary::Sub, Operand::T(x), Operand::T(m.clone()))?)?;
    let s = ops::unary(Unary::Log, &reduce::sum(&e, dims.as_deref(), true, None)?)?;
    let r = bin(Binary::Add, Operand::T(s), Operand::T(m))?;
    t(if keep { r } else { r.squeeze(dims.as_deref().or(Some(&[])))? })
}

/// `logcumsumexp(x, dim)`: element `i` along `dim` is the `logsumexp` of the elements up to `i` (the later ones
/// masked to -inf), as the functionalizer builds it (see `compat::LOGCUMSUMEXP_MAX`).
fn logcumsumexp(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let d = wrap_dim(a.int(1, "dim")?, x.dim().max(1))?;
    if x.dim() == 0 {
        super::compat::logcumsumexp_check(x.dtype(), 1)?;
        return t(x.contiguous_copy());
    }
    let n = x.shape[d];
    super::compat::logcumsumexp_check(x.dtype(), n)?;
    let last = x.dim() as i64 - 1;
    let xm = x.transpose(d as i64, last)?;
    let mut sizes: Vec<i64> = xm.shape.iter().map(|&s| s as i64).collect();
    sizes.insert(sizes.len() - 1, n as i64);
    let rows = xm.unsqueeze(-2)?.expand(&sizes)?;
    let idx: Vec<Scalar> = (0..n as i64).map(Scalar::I).collect();
    let col = Tensor::from_scalars(DType::I64, &[n, 1], &idx)?;
    let row = Tensor::from_scalars(DType::I64, &[1, n], &idx)?;
    let upto = ops::binary(Binary::Ge, &Operand::T(col), &Operand::T(row))?;
    let masked = ops::where_(&upto, &Operand::T(rows), &Operand::S(Scalar::F(f64::NEG_INFINITY)))?;
    let l = Args::new(vec![Value::Tensor(masked), Value::Int(-1)], vec![], a.span, "logsumexp".into());
    let Value::Tensor(r) = logsumexp(&l)? else { unreachable!("logsumexp makes a tensor") };
    t(r.transpose(d as i64, last)?.contiguous_copy())
}

/// `F.normalize`: `x` over its `p`-norm along `dim`, the norm clamped below by `eps`.
fn normalize(a: &Args) -> AResult<Value> {
    let bin = |op: Binary, x: Operand, y: Operand| ops::binary(op, &x, &y);
    let x = a.tensor(0, "input")?;
    let p = a.opt(1, "p").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(2.0);
    let dim = a.int_or(2, "dim", 1)?;
    let eps = a.opt(3, "eps").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(1e-12);
    let ab = ops::unary(Unary::Abs, &x)?;
    let pw = bin(Binary::Pow, Operand::T(ab), Operand::S(Scalar::F(p)))?;
    let n = bin(Binary::Pow, Operand::T(reduce::sum(&pw, Some(&[dim]), true, None)?), Operand::S(Scalar::F(1.0 / p)))?;
    let n = ops::clamp(&n, Some(&Operand::S(Scalar::F(eps))), None)?;
    t(bin(Binary::Div, Operand::T(x), Operand::T(n))?)
}

fn to_list(x: &Tensor) -> Value {
    if x.dim() == 0 {
        return Value::from_scalar(x.item().unwrap_or(Scalar::I(0)));
    }
    let rows = x.unbind(0).unwrap_or_default();
    Value::list(rows.iter().map(to_list).collect())
}
