//! The op table: `torch.NAME(...)`, `F.NAME(...)` and `tensor.NAME(...)` share one implementation per op, with the
//! tensor as the first positional argument. In-place methods (`NAME_`) run the out-of-place op and write the result
//! back after PyTorch's overlap, dtype and shape checks.

use super::args::{int_list, to_int, AResult, Args};
use super::calls::shape_value;
use super::exec::{operand, Interp};
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand, Unary};
use crate::tensor::{index, reduce, DType, Scalar, Tensor};

/// The start of the error for an op the table does not know; callers turn it into a located "unsupported" message.
pub(super) const UNKNOWN_OP: &str = "unknown op: ";

/// In-place methods that PyTorch does not check for internal overlap (they are not TensorIterator ops).
pub(crate) const UNCHECKED_INPLACE: &[&str] = &["fill_", "zero_", "masked_fill_", "triu_", "tril_", "index_put_"];

pub(crate) fn unary_op(name: &str) -> Option<Unary> {
    use Unary::*;
    Some(match name {
        "neg" | "negative" => Neg,
        "abs" | "absolute" => Abs,
        "relu" => Relu,
        "exp" => Exp,
        "log" => Log,
        "log1p" => Log1p,
        "expm1" => Expm1,
        "sqrt" => Sqrt,
        "rsqrt" => Rsqrt,
        "sigmoid" => Sigmoid,
        "tanh" => Tanh,
        "sin" => Sin,
        "cos" => Cos,
        "floor" => Floor,
        "ceil" => Ceil,
        "round" => Round,
        "trunc" => Trunc,
        "sign" => Sign,
        "logical_not" => LogicalNot,
        "bitwise_not" => BitNot,
        "reciprocal" => Reciprocal,
        "square" => Square,
        "erf" => Erf,
        "silu" => Silu,
        "gelu" => Gelu,
        _ => return None,
    })
}

pub(crate) fn binary_op(name: &str) -> Option<Binary> {
    use Binary::*;
    Some(match name {
        "add" => Add,
        "sub" | "subtract" => Sub,
        "mul" | "multiply" => Mul,
        "div" | "divide" | "true_divide" => Div,
        "floor_divide" => FloorDiv,
        "remainder" => Rem,
        "fmod" => Fmod,
        "pow" => Pow,
        "maximum" => Maximum,
        "minimum" => Minimum,
        "atan2" => Atan2,
        "eq" => Eq,
        "ne" | "not_equal" => Ne,
        "lt" | "less" => Lt,
        "le" | "less_equal" => Le,
        "gt" | "greater" => Gt,
        "ge" | "greater_equal" => Ge,
        "bitwise_and" => BitAnd,
        "bitwise_or" => BitOr,
        "bitwise_xor" => BitXor,
        "bitwise_left_shift" => Shl,
        "bitwise_right_shift" => Shr,
        _ => return None,
    })
}

pub(super) fn operand_arg(a: &Args, i: usize, name: &str) -> AResult<Operand> {
    let v = a.req(i, name)?;
    operand(v)
        .ok_or_else(|| format!("{}(): argument '{}' must be Tensor or Number, not {}", a.name, name, v.type_name()))
}

pub(super) fn tensor_list(a: &Args, i: usize, name: &str) -> AResult<Vec<Tensor>> {
    let v = a.req(i, name)?;
    let items =
        v.items().ok_or_else(|| format!("{}(): argument '{}' must be a tuple or list of Tensors", a.name, name))?;
    items
        .into_iter()
        .map(|x| match x {
            Value::Tensor(t) => Ok(t),
            other => Err(format!(
                "{}(): expected Tensor as element of argument '{}', but got {}",
                a.name,
                name,
                other.type_name()
            )),
        })
        .collect()
}

pub(super) fn t(v: Tensor) -> AResult<Value> {
    Ok(Value::Tensor(v))
}

/// The indices of the nonzero elements of `x`: one row per element (`[n, dim]`), or with `as_tuple` one 1-D tensor
/// per dimension.
fn nonzero(x: &Tensor, as_tuple: bool) -> AResult<Value> {
    let vals = x.scalars();
    let strides = crate::tensor::contiguous_strides(&x.shape);
    let d = x.dim();
    let mut cols: Vec<Vec<Scalar>> = vec![Vec::new(); d];
    let mut n = 0;
    for (i, v) in vals.iter().enumerate() {
        if v.to_bool() {
            n += 1;
            for (k, col) in cols.iter_mut().enumerate() {
                col.push(Scalar::I(((i as isize / strides[k]) as usize % x.shape[k]) as i64));
            }
        }
    }
    if as_tuple {
        // A 0-dim input counts as 1-D, as PyTorch's does.
        if d == 0 {
            return tensors(vec![Tensor::from_scalars(DType::I64, &[n], &vec![Scalar::I(0); n])?]);
        }
        return tensors(cols.iter().map(|c| Tensor::from_scalars(DType::I64, &[n], c)).collect::<AResult<_>>()?);
    }
    let rows: Vec<Scalar> = (0..n).flat_map(|r| cols.iter().map(move |c| c[r])).collect();
    t(Tensor::from_scalars(DType::I64, &[n, d], &rows)?)
}

pub(super) fn tensors(v: Vec<Tensor>) -> AResult<Value> {
    Ok(Value::tuple(v.into_iter().map(Value::Tensor).collect()))
}

/// A fill value: a Python number or a 0-dim tensor.
pub(super) fn fill_value(v: &Value, what: &str) -> AResult<Scalar> {
    match v {
        Value::Tensor(t) if t.dim() == 0 => t.item(),
        Value::Tensor(t) => {
            Err(format!("{what} only supports 0-dimension value tensor but got tensor with {} dimensions.", t.dim()))
        }
        other => other.as_scalar().ok_or_else(|| format!("{what}: value must be a number, not {}", other.type_name())),
    }
}

/// One sequence of nested data for `torch.tensor`, `len` items at `depth`: the first at a depth sets that dim's length,
/// every later one must have it (both engines).
pub(crate) fn nested_len(shape: &mut Vec<usize>, depth: usize, len: usize) -> Result<(), String> {
    if shape.len() == depth {
        shape.push(len);
    } else if shape[depth] != len {
        return Err(format!("expected sequence of length {} at dim {} (got {})", shape[depth], depth, len));
    }
    Ok(())
}

/// What nested data says of the dtype `torch.tensor` gives it: PyTorch's `promote_types` over the items (a
/// tensor's dtype, `bool`, `int64` for an int, the default `float32` for a float), and whether a floating-point
/// tensor is among them (which cannot go into an integer dtype: PyTorch converts it as an index, and raises).
#[derive(Default)]
pub(crate) struct DataKind {
    pub dtype: Option<DType>,
    pub float_tensor: bool,
}

impl DataKind {
    pub fn add(&mut self, d: DType, tensor: bool) {
        self.dtype = Some(self.dtype.map_or(d, |c| DType::promote(c, d)));
        self.float_tensor |= tensor && d.is_float();
    }

    /// The dtype of the new tensor: `given`, or the inferred one (`float32` for no items).
    pub fn resolve(&self, given: Option<DType>) -> Result<DType, String> {
        match given {
            Some(d) if self.float_tensor && !d.is_float() => {
                Err("only integer tensors of a single element can be converted to an index".into())
            }
            Some(d) => Ok(d),
            None => Ok(self.dtype.unwrap_or(DType::F32)),
        }
    }
}

/// PyTorch's check of an integer stored by `torch.tensor` into an integer dtype: a signed one must hold it; `uint8`
/// takes -255..=255 (a negative value wraps).
pub(crate) fn check_int_data(dt: DType, vals: &[Scalar]) -> Result<(), String> {
    let (lo, hi) = match dt {
        DType::U8 => (-255, 255),
        DType::I8 => (i8::MIN.into(), i8::MAX.into()),
        DType::I16 => (i16::MIN.into(), i16::MAX.into()),
        DType::I32 => (i32::MIN.into(), i32::MAX.into()),
        _ => return Ok(()),
    };
    match vals.iter().find(|v| matches!(v, Scalar::I(i) if *i < lo || *i > hi)) {
        Some(_) => Err(format!(
            "value cannot be converted to type {} without overflow",
            dt.torch_name().trim_start_matches("torch.")
        )),
        None => Ok(()),
    }
}

/// Nested Python lists of numbers and one-element tensors for `torch.tensor` (data that is a tensor itself: its
/// elements), their kinds added to `kind`.
pub(super) fn flatten_data(
    v: &Value,
    shape: &mut Vec<usize>,
    depth: usize,
    out: &mut Vec<Scalar>,
    kind: &mut DataKind,
) -> AResult<()> {
    match v {
        Value::List(_) | Value::Tuple(_) | Value::Range(..) => {
            let items = match v {
                Value::Range(a, b, s) => super::value::range_values(*a, *b, *s).into_iter().map(Value::Int).collect(),
                _ => v.items().unwrap_or_default(),
            };
            nested_len(shape, depth, items.len())?;
            for it in &items {
                flatten_data(it, shape, depth + 1, out, kind)?;
            }
            Ok(())
        }
        // A copy, cast to a given dtype as `.to` casts.
        Value::Tensor(t) if depth == 0 => {
            shape.extend(&t.shape);
            out.extend(t.scalars());
            kind.add(t.dtype(), false);
            Ok(())
        }
        other => {
            if depth < shape.len() {
                return Err(format!("expected sequence at dim {depth}"));
            }
            match other {
                Value::Tensor(t) if t.numel() != 1 => {
                    return Err("only one element tensors can be converted to Python scalars".into())
                }
                Value::Tensor(t) => {
                    out.extend(t.scalars());
                    kind.add(t.dtype(), true);
                }
                _ => {
                    let s =
                        other.as_scalar().ok_or_else(|| format!("Could not infer dtype of {}", other.type_name()))?;
                    kind.add(s.default_dtype(), false);
                    out.push(s);
                }
            }
            Ok(())
        }
    }
}

impl<'m> Interp<'m> {
    /// A method call `self.NAME(...)`, `self` being `a.pos[0]`.
    pub(super) fn tensor_method(&mut self, name: &str, a: &Args) -> AResult<Value> {
        if name.ends_with('_') && !name.ends_with("__") {
            return self.inplace(name, a);
        }
        self.torch_op(name, a, true)
    }

    fn inplace(&mut self, name: &str, a: &Args) -> AResult<Value> {
        if super::extra_ops::METADATA_INPLACE.contains(&name) {
            return Err(format!(
                "`{name}` changes a tensor's shape in place, which is not supported; rebind instead (`x = x.{}(...)`)",
                &name[..name.len() - 1]
            ));
        }
        let dst = a.tensor(0, "self")?;
        match name {
            "copy_" => {
                let src = match a.req(1, "src")? {
                    Value::Tensor(s) => s.clone(),
                    other => Tensor::scalar(dst.dtype(), fill_value(other, "copy_")?)?,
                };
                ops::check_overlap(&dst, &[&src], true)?;
                ops::write_result(&dst, &src, false)?;
            }
            "fill_" => {
                let v = a.req(1, "value")?;
                // PyTorch fills from a tensor with `copy_`, which checks that no two elements written share memory
                // (from a number it does not check).
                if matches!(v, Value::Tensor(_)) {
                    ops::check_overlap(&dst, &[], true)?;
                }
                let s = fill_value(v, "fill_")?;
                dst.write_scalars(&vec![s; dst.numel()]);
            }
            "zero_" => dst.write_scalars(&vec![Scalar::I(0); dst.numel()]),
            "index_put_" => {
                let idx =
                    a.req(1, "indices")?.items().ok_or("index_put_(): argument 'indices' must be tuple of Tensors")?;
                let idx: Vec<Option<Tensor>> = idx
                    .into_iter()
                    .map(|v| match v {
                        Value::Tensor(t) => Ok(Some(t)),
                        Value::None => Ok(None),
                        other => Err(format!("index_put_(): indices must be Tensors, not {}", other.type_name())),
                    })
                    .collect::<AResult<_>>()?;
                let values = match a.req(2, "values")? {
                    Value::Tensor(v) => v.clone(),
                    other => {
                        return Err(format!(
                            "index_put_(): argument 'values' (position 2) must be Tensor, not {}",
                            other.type_name()
                        ))
                    }
                };
                if values.dtype() != dst.dtype() {
                    return Err(format!(
                        "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
                        dst.dtype().name(),
                        values.dtype().name()
                    ));
                }
                ops::check_overlap(&dst, &[&values], false)?;
                index::index_put(&dst, &idx, &values, a.bool_or(3, "accumulate", false)?)?;
            }
            _ => {
                let base = &name[..name.len() - 1];
                if matches!(base, "masked_fill") {
                    if let Value::Tensor(m) = a.req(1, "mask")? {
                        let b = ops::broadcast_shapes(&dst.shape, &m.shape)?;
                        if b != dst.shape {
                            return Err(format!(
                                "output with shape {} doesn't match the broadcast shape {}",
                                crate::tensor::fmt_shape(&dst.shape),
                                crate::tensor::fmt_shape(&b)
                            ));
                        }
                    }
                }
                let r = match self.torch_op(base, a, true)? {
                    Value::Tensor(r) => r,
                    _ => return Err(format!("{UNKNOWN_OP}{name}")),
                };
                let inputs: Vec<Tensor> = a.tensors().into_iter().cloned().collect();
                let refs: Vec<&Tensor> = inputs.iter().collect();
                ops::check_overlap(&dst, &refs, !UNCHECKED_INPLACE.contains(&name))?;
                match (base, a.req(1, "mask")) {
                    // Through an expanded view, PyTorch writes the value at the masked elements only: a memory
                    // position is filled when any element referring to it is masked (writing the whole result back
                    // would let an unmasked alias put the old value back).
                    ("masked_fill", Ok(Value::Tensor(m))) if dst.has_internal_overlap() => {
                        let v = match a.req(2, "value")? {
                            Value::Tensor(t) => t.item()?,
                            other => fill_value(other, "masked_fill_")?,
                        }
                        .cast(dst.dtype());
                        let sizes: Vec<i64> = dst.shape.iter().map(|&d| d as i64).collect();
                        let value = Tensor::scalar(dst.dtype(), v)?;
                        index::index_put(&dst, &[Some(m.expand(&sizes)?)], &value, false)?;
                    }
                    _ => ops::write_result(&dst, &r, true)?,
                }
            }
        }
        self.mark_written(&dst);
        Ok(Value::Tensor(dst))
    }

    /// One op of the table; `method` tells whether `a.pos[0]` is the receiver of a method call.
    pub(super) fn torch_op(&mut self, name: &str, a: &Args, method: bool) -> AResult<Value> {
        if a.name == "torch.nn.functional.batch_norm" && matches!(a.opt(5, "training"), Some(Value::Bool(true))) {
            // Training mode writes the running statistics in place (`nn_ops::batch_norm`).
            let r = super::more_ops::more_op(name, a)?;
            for (i, k) in [(1, "running_mean"), (2, "running_var")] {
                if let Some(Value::Tensor(t)) = a.opt(i, k) {
                    self.mark_written(t);
                }
            }
            return Ok(r);
        }
        if name == "gelu"
            && super::compat::gelu_tanh(a.opt(1, "approximate").map(|v| match v {
                Value::Str(s) => Some(s.as_ref()),
                _ => None,
            }))?
        {
            // PyTorch's tanh approximation, in its kernel's order.
            let x = a.tensor(0, "input")?;
            let (k_beta, k_kappa) = super::compat::GELU_TANH;
            let mul = |p: &Tensor, q: Operand| ops::binary(Binary::Mul, &Operand::T(p.clone()), &q);
            let cube = mul(&mul(&x, Operand::T(x.clone()))?, Operand::T(x.clone()))?;
            let inner = ops::binary(
                Binary::Add,
                &Operand::T(x.clone()),
                &Operand::T(mul(&cube, Operand::S(Scalar::F(k_kappa)))?),
            )?;
            let th = ops::unary(Unary::Tanh, &mul(&inner, Operand::S(Scalar::F(k_beta)))?)?;
            let one_plus = ops::binary(Binary::Add, &Operand::T(th), &Operand::S(Scalar::F(1.0)))?;
            return t(mul(&mul(&x, Operand::S(Scalar::F(0.5)))?, Operand::T(one_plus))?);
        }
        if let Some(u) = unary_op(name) {
            return t(ops::unary(u, &a.tensor(0, "input")?)?);
        }
        if let Some(b) = binary_op(name) {
            let x = operand_arg(a, 0, "input")?;
            let mut y = operand_arg(a, 1, "other")?;
            if let Some(alpha) = a.opt(2, "alpha") {
                let al = operand(alpha).ok_or("alpha must be a number")?;
                y = Operand::T(ops::binary(Binary::Mul, &y, &al)?);
            }
            if b == Binary::Div {
                if let Some(Value::Str(mode)) = a.opt(2, "rounding_mode") {
                    let q = match mode.as_ref() {
                        "floor" => ops::binary(Binary::FloorDiv, &x, &y)?,
                        "trunc" => super::more_ops::trunc_div(&x, &y)?,
                        other => {
                            return Err(format!(
                                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
                            ))
                        }
                    };
                    return t(q);
                }
            }
            return t(ops::binary(b, &x, &y)?);
        }
        let dims_kw = |a: &Args| a.dims(1, "dim");
        match name {
            "logical_and" | "logical_or" | "logical_xor" => {
                let x = ops::binary(Binary::Ne, &operand_arg(a, 0, "input")?, &Operand::S(Scalar::I(0)))?;
                let y = ops::binary(Binary::Ne, &operand_arg(a, 1, "other")?, &Operand::S(Scalar::I(0)))?;
                let op = match name {
                    "logical_and" => Binary::BitAnd,
                    "logical_or" => Binary::BitOr,
                    _ => Binary::BitXor,
                };
                t(ops::binary(op, &Operand::T(x), &Operand::T(y))?)
            }
            "clamp" | "clip" => {
                let x = a.tensor(0, "input")?;
                let lo =
                    a.opt(1, "min").map(|v| operand(v).ok_or("clamp: min must be a number or tensor")).transpose()?;
                let hi =
                    a.opt(2, "max").map(|v| operand(v).ok_or("clamp: max must be a number or tensor")).transpose()?;
                t(ops::clamp(&x, lo.as_ref(), hi.as_ref())?)
            }
            "clamp_min" => t(ops::clamp(&a.tensor(0, "input")?, Some(&operand_arg(a, 1, "min")?), None)?),
            "clamp_max" => t(ops::clamp(&a.tensor(0, "input")?, None, Some(&operand_arg(a, 1, "max")?))?),
            // `torch.where(condition)` is `nonzero(condition, as_tuple=True)`.
            "where" if a.pos.len() == 1 && a.kw.is_empty() => nonzero(&a.tensor(0, "condition")?, true),
            "where" => {
                let c = a.tensor(0, "condition")?;
                t(ops::where_(&c, &operand_arg(a, 1, "input")?, &operand_arg(a, 2, "other")?)?)
            }
            "masked_fill" => {
                let x = a.tensor(0, "input")?;
                let m = a.tensor(1, "mask")?;
                if m.dtype() != DType::Bool {
                    return Err(format!(
                        "masked_fill_ only supports boolean masks, but got mask with dtype {}",
                        cname(m.dtype())
                    ));
                }
                let v = match a.req(2, "value")? {
                    Value::Tensor(v) if v.dim() != 0 => {
                        return Err(format!(
                        "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).",
                        v.dim()
                    ))
                    }
                    other => fill_value(other, "masked_fill_")?.cast(x.dtype()),
                };
                let dt = x.dtype();
                t(ops::map_n(&[&Operand::T(m), &Operand::T(x)], dt, dt, |s| Ok(if s[0].to_bool() { v } else { s[1] }))?)
            }
            "triu" | "tril" => {
                let x = a.tensor(0, "input")?;
                t(reduce::triangle(&x, a.int_or(1, "diagonal", 0)?, name == "triu")?)
            }
            "softmax" | "log_softmax" => {
                let x = a.tensor(0, "input")?;
                let dim = match a.get(1, "dim") {
                    Some(d) if !matches!(d, Value::None) => to_int(d)?,
                    _ => implicit_softmax_dim(&a.name, x.dim())
                        .ok_or_else(|| format!("{name}() missing 1 required positional arguments: \"dim\""))?,
                };
                t(reduce::softmax(&x, dim, a.dtype(2, "dtype")?, name == "log_softmax")?)
            }
            "cumsum" => t(reduce::cumsum(&a.tensor(0, "input")?, a.int(1, "dim")?, a.dtype(2, "dtype")?)?),
            "cumprod" => t(reduce::cumprod(&a.tensor(0, "input")?, a.int(1, "dim")?, a.dtype(2, "dtype")?)?),
            "sum" | "mean" | "nansum" => {
                let x = a.tensor(0, "input")?;
                let dims = dims_kw(a)?;
                let keep = a.bool_or(2, "keepdim", false)?;
                let dt = a.dtype(3, "dtype")?;
                t(if name == "mean" {
                    reduce::mean(&x, dims.as_deref(), keep, dt)?
                } else {
                    reduce::sum(&x, dims.as_deref(), keep, dt)?
                })
            }
            "prod" => {
                let x = a.tensor(0, "input")?;
                let d = a.opt_int(1, "dim")?;
                t(reduce::prod(&x, d.map(|d| vec![d]).as_deref(), a.bool_or(2, "keepdim", false)?)?)
            }
            "max" | "min" => {
                let x = a.tensor(0, "input")?;
                let is_max = name == "max";
                match a.opt(1, "dim") {
                    None => t(reduce::max_all(&x, is_max)?),
                    Some(Value::Tensor(o)) => {
                        let op = if is_max { Binary::Maximum } else { Binary::Minimum };
                        t(ops::binary(op, &Operand::T(x), &Operand::T(o.clone()))?)
                    }
                    Some(d) => {
                        let (v, i) = reduce::max_dim(&x, to_int(d)?, a.bool_or(2, "keepdim", false)?, is_max)?;
                        Ok(Value::Named(
                            std::rc::Rc::new(vec![Value::Tensor(v), Value::Tensor(i)]),
                            &["values", "indices"],
                        ))
                    }
                }
            }
            "amax" | "amin" => t(reduce::amax(
                &a.tensor(0, "input")?,
                dims_kw(a)?.as_deref(),
                a.bool_or(2, "keepdim", false)?,
                name == "amax",
            )?),
            "argmax" | "argmin" => t(reduce::argmax(
                &a.tensor(0, "input")?,
                a.opt_int(1, "dim")?,
                a.bool_or(2, "keepdim", false)?,
                name == "argmax",
            )?),
            "any" | "all" => t(reduce::any_all(
                &a.tensor(0, "input")?,
                dims_kw(a)?.as_deref(),
                a.bool_or(2, "keepdim", false)?,
                name == "all",
            )?),
            "matmul" => t(reduce::matmul(&a.tensor(0, "input")?, &a.tensor(1, "other")?)?),
            "mm" => {
                let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "mat2")?);
                if x.dim() != 2 {
                    return Err(format!("mm: self must be a matrix, got {}-D tensor", x.dim()));
                }
                if y.dim() != 2 {
                    return Err(format!("mm: mat2 must be a matrix, got {}-D tensor", y.dim()));
                }
                t(reduce::matmul(&x, &y)?)
            }
            "bmm" => {
                let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "mat2")?);
                if x.dim() != 3 {
                    return Err("batch1 must be a 3D tensor".into());
                }
                if y.dim() != 3 {
                    return Err("batch2 must be a 3D tensor".into());
                }
                if y.shape[0] != x.shape[0] || y.shape[1] != x.shape[2] {
                    return Err(format!(
                        "Expected size for first two dimensions of batch2 tensor to be: [{}, {}] but got: [{}, {}].",
                        x.shape[0], x.shape[2], y.shape[0], y.shape[1]
                    ));
                }
                t(reduce::matmul(&x, &y)?)
            }
            "mv" | "dot" => t(reduce::matmul(&a.tensor(0, "input")?, &a.tensor(1, "other")?)?),
            "linear" => {
                let x = a.tensor(0, "input")?;
                let w = a.tensor(1, "weight")?;
                let y = reduce::matmul(&x, &w.t()?)?;
                match a.opt(2, "bias") {
                    Some(Value::Tensor(b)) => t(ops::binary(Binary::Add, &Operand::T(y), &Operand::T(b.clone()))?),
                    _ => t(y),
                }
            }
            "cat" | "concat" | "concatenate" => t(reduce::cat(&tensor_list(a, 0, "tensors")?, a.int_or(1, "dim", 0)?)?),
            "stack" => t(reduce::stack(&tensor_list(a, 0, "tensors")?, a.int_or(1, "dim", 0)?)?),
            "clone" => {
                let x = a.tensor(0, "input")?;
                match a.get(99, "memory_format") {
                    // `clone(memory_format=torch.contiguous_format)` (torch.optim's LBFGS): a row-major copy.
                    Some(Value::Str(f)) if &**f == "torch.contiguous_format" => t(x.contiguous_copy()),
                    Some(_) => {
                        Err("clone(): memory_format must be torch.contiguous_format or torch.preserve_format".into())
                    }
                    None => t(x.clone_like_layout(x.dtype())?),
                }
            }
            "contiguous" => {
                let x = a.tensor(0, "input")?;
                t(if x.is_contiguous() { x } else { x.contiguous_copy() })
            }
            "detach" => {
                let x = a.tensor(0, "input")?;
                t(x.restride(x.shape.clone(), x.strides.clone(), x.offset))
            }
            "type" if a.opt(1, "dtype").is_none() => {
                Ok(Value::Str(a.tensor(0, "input")?.dtype().legacy_type_name().into()))
            }
            "float" | "double" | "half" | "bfloat16" | "long" | "int" | "short" | "char" | "byte" | "bool" | "to"
            | "type" | "type_as" => {
                let x = a.tensor(0, "input")?;
                let dt = match name {
                    m if DType::of_method(m).is_some() => DType::of_method(m).expect("checked"),
                    "type_as" => a.tensor(1, "other")?.dtype(),
                    _ => match a.opt(1, "dtype") {
                        Some(Value::DType(d)) => *d,
                        Some(Value::Tensor(o)) => o.dtype(),
                        Some(Value::Str(s)) if name == "type" => {
                            DType::from_legacy_type_name(s).ok_or_else(|| super::python::unknown_legacy_type(s))?
                        }
                        // `.to(device)` with the device taken out (`python::strip_device`): the tensor itself.
                        None if name == "to" => x.dtype(),
                        Some(Value::Str(s)) if crate::tensor::unsupported_torch_dtype(s).is_some() => {
                            return Err(crate::tensor::unsupported_torch_dtype(s).expect("checked"))
                        }
                        _ => return Err(format!("{name}(): only a dtype argument is supported")),
                    },
                };
                t(if dt == x.dtype() { x } else { x.clone_like_layout(dt)? })
            }
            "view" | "reshape" => {
                let x = a.tensor(0, "input")?;
                if let Some(Value::DType(_)) = a.pos.get(1) {
                    return Err("view(dtype) is not supported".into());
                }
                let sizes = a.sizes(1, "shape")?;
                t(if name == "view" { x.view(&sizes)? } else { x.reshape(&sizes)? })
            }
            "view_as" | "reshape_as" => {
                let x = a.tensor(0, "input")?;
                let o = a.tensor(1, "other")?;
                let sizes: Vec<i64> = o.shape.iter().map(|&d| d as i64).collect();
                t(if name == "view_as" { x.view(&sizes)? } else { x.reshape(&sizes)? })
            }
            "flatten" => {
                let x = a.tensor(0, "input")?;
                t(x.flatten(a.int_or(1, "start_dim", 0)?, a.int_or(2, "end_dim", -1)?)?)
            }
            // `ravel` is `contiguous().view(-1)`: a view of a contiguous tensor, else a copy, even where a view would
            // do (`x[::2].ravel()`); a 0-d tensor gives one element.
            "ravel" => {
                let x = a.tensor(0, "input")?;
                t(if x.is_contiguous() { x.view(&[-1])? } else { x.contiguous_copy().view(&[-1])? })
            }
            "t" => t(a.tensor(0, "input")?.t()?),
            "transpose" | "swapaxes" | "swapdims" => {
                t(a.tensor(0, "input")?.transpose(a.int(1, "dim0")?, a.int(2, "dim1")?)?)
            }
            "permute" => t(a.tensor(0, "input")?.permute(&a.sizes(1, "dims")?)?),
            "movedim" | "moveaxis" => {
                let x = a.tensor(0, "input")?;
                let (src, dst) =
                    (a.dims(1, "source")?.unwrap_or_default(), a.dims(2, "destination")?.unwrap_or_default());
                t(x.permute(&crate::tensor::views::movedim_perm(x.dim(), &src, &dst)?)?)
            }
            "unsqueeze" => t(a.tensor(0, "input")?.unsqueeze(a.int(1, "dim")?)?),
            "squeeze" => t(a.tensor(0, "input")?.squeeze(dims_kw(a)?.as_deref())?),
            "expand" => t(a.tensor(0, "input")?.expand(&a.sizes(1, "size")?)?),
            "expand_as" => {
                let o = a.tensor(1, "other")?;
                t(a.tensor(0, "input")?.expand(&o.shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?)
            }
            "broadcast_to" => t(a.tensor(0, "input")?.expand(&int_list(a.req(1, "size")?)?)?),
            "narrow" => t(a.tensor(0, "input")?.narrow(a.int(1, "dim")?, a.int(2, "start")?, a.int(3, "length")?)?),
            "select" => t(a.tensor(0, "input")?.select(a.int(1, "dim")?, a.int(2, "index")?)?),
            "diagonal" => t(a.tensor(0, "input")?.diagonal(
                a.int_or(1, "offset", 0)?,
                a.int_or(2, "dim1", 0)?,
                a.int_or(3, "dim2", 1)?,
            )?),
            // `Tensor.unfold` (torch.nn.functional.unfold is another operation, not routed here).
            "unfold" if a.name == "unfold" => {
                t(a.tensor(0, "input")?.unfold(a.int(1, "dimension")?, a.int(2, "size")?, a.int(3, "step")?)?)
            }
            "unbind" => tensors(a.tensor(0, "input")?.unbind(a.int_or(1, "dim", 0)?)?),
            "chunk" => tensors(a.tensor(0, "input")?.chunk(a.int(1, "chunks")?, a.int_or(2, "dim", 0)?)?),
            "split" => {
                let x = a.tensor(0, "input")?;
                let dim = a.int_or(2, "dim", 0)?;
                let s = a.req(1, "split_size_or_sections")?;
                tensors(match s.items() {
                    Some(_) => x.split_sizes(&int_list(s)?, dim)?,
                    None => x.split_even(to_int(s)?, dim)?,
                })
            }
            // `tile` is `repeat` with ones put before fewer repeats than dims.
            "repeat" | "tile" => {
                let x = a.tensor(0, "input")?;
                let mut reps = a.sizes(1, if name == "tile" { "dims" } else { "repeats" })?;
                if name == "tile" && reps.len() < x.dim() {
                    reps.splice(0..0, std::iter::repeat_n(1, x.dim() - reps.len()));
                }
                if reps.len() < x.dim() {
                    return Err(
                        "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
                            .into(),
                    );
                }
                // Tile: view x as [1, s0, 1, s1, ...], expand to [r0, s0, r1, s1, ...], then merge pairs.
                let lead = reps.len() - x.dim();
                let mut shape = vec![1usize; lead];
                shape.extend(&x.shape);
                let base = x.reshape(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>())?;
                let mut inter = Vec::new();
                let mut target = Vec::new();
                let mut fin = Vec::new();
                for (k, &r) in reps.iter().enumerate() {
                    inter.push(1);
                    inter.push(shape[k] as i64);
                    target.push(r);
                    target.push(shape[k] as i64);
                    fin.push(r * shape[k] as i64);
                }
                let e = base.reshape(&inter)?.expand(&target)?;
                t(e.contiguous_copy().reshape(&fin)?)
            }
            "item" => Ok(Value::from_scalar(a.tensor(0, "input")?.item()?)),
            "numel" | "nelement" => Ok(Value::Int(a.tensor(0, "input")?.numel() as i64)),
            // `torch.onnx.operators.shape_as_tensor`
            "_shape_as_tensor" => {
                let x = a.tensor(0, "input")?;
                let dims: Vec<Scalar> = x.shape.iter().map(|&n| Scalar::I(n as i64)).collect();
                t(Tensor::from_scalars(DType::I64, &[dims.len()], &dims)?)
            }
            "dim" | "ndimension" => Ok(Value::Int(a.tensor(0, "input")?.dim() as i64)),
            "size" => {
                let x = a.tensor(0, "input")?;
                match a.opt_int(1, "dim")? {
                    None => Ok(shape_value(&x)),
                    Some(d) => Ok(Value::Int(x.shape[crate::tensor::views::wrap_dim(d, x.dim())?] as i64)),
                }
            }
            "is_floating_point" => Ok(Value::Bool(a.tensor(0, "input")?.dtype().is_float())),
            "is_complex" => {
                a.tensor(0, "input")?;
                Ok(Value::Bool(false))
            }
            "nonzero" => nonzero(&a.tensor(0, "input")?, a.bool_or(99, "as_tuple", false)?),
            "index_select" => {
                let x = a.tensor(0, "input")?;
                let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.dim())?;
                let ix = a.tensor(2, "index")?;
                index::check_select_index("index_select", ix.dtype())?;
                let mut idx: Vec<Option<Tensor>> = vec![None; d];
                idx.push(Some(ix));
                t(index::index(&x, &idx)?)
            }
            _ => super::creation::creation_op(name, a, method),
        }
    }
}

pub(crate) fn cname(d: DType) -> &'static str {
    match d {
        DType::I64 => "long int",
        DType::I32 => "int",
        DType::I16 => "short int",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::F32 => "float",
        DType::F64 => "double",
        DType::Bool => "bool",
        _ => "half",
    }
}

/// `F.softmax` and `F.log_softmax` without `dim` (or with `dim=None`, as `nn.Softmax()` passes it): PyTorch's legacy
/// implicit dim (with a deprecation warning), 0 for inputs of 0, 1 or 3 dims, else 1. `None` for `torch.softmax` and
/// the method, which need a dim (both engines).
pub(crate) fn implicit_softmax_dim(call: &str, ndim: usize) -> Option<i64> {
    call.starts_with("torch.nn.functional.").then_some(if matches!(ndim, 0 | 1 | 3) { 0 } else { 1 })
}
