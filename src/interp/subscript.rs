//! Tensor subscripts: basic indexing (a view) and advanced indexing (a copy, or `index_put_` on assignment),
//! following PyTorch's `__getitem__`/`__setitem__`.

use super::args::{to_int, AResult};
use super::pyvalue::PyValue;
use super::value::Value;
use crate::tensor::index;
use crate::tensor::ops;
use crate::tensor::{DType, Scalar, Tensor};

/// A subscript resolved against a tensor: the basic-indexing view and, if any, the advanced indices into that view.
struct Resolved {
    view: Tensor,
    adv: Option<Vec<Option<Tensor>>>,
    /// Whether the advanced index is one boolean mask and nothing else: PyTorch then assigns a 0-d value with
    /// `masked_fill_`, which casts it (with index tensors besides, `x[m, i[m]] = tensor(1)`, the dtypes must match).
    has_mask: bool,
    /// Whether that mask is a uint8 one: PyTorch's `masked_fill_` refuses it, so a 0-d value cannot be assigned.
    byte_mask: bool,
}

/// A Python index value turned into an index tensor, if it is an advanced index.
fn as_index_tensor(v: &Value) -> AResult<Option<Tensor>> {
    match v {
        // A uint8 index is a mask, as PyTorch reads it (with a deprecation warning), 0-d ones included.
        Value::Tensor(t) if t.dtype() == DType::U8 => Ok(Some(t.to_dtype(DType::Bool)?)),
        Value::Tensor(t) if t.dim() == 0 && t.dtype() != DType::Bool => Ok(None),
        Value::Tensor(t) if matches!(t.dtype(), DType::I8 | DType::I16) => {
            Err("tensors used as indices must be long, int, byte or bool tensors".into())
        }
        Value::Tensor(t) => Ok(Some(t.clone())),
        // A tuple inside the index tuple is a sequence of indices too (`x[tuple(zip(*pairs))]`, vLLM).
        Value::List(_) | Value::Tuple(_) => {
            let mut shape = Vec::new();
            let mut vals = Vec::new();
            super::torch_ops::flatten_data(v, &mut shape, 0, &mut vals, &mut Default::default())?;
            let all_bool = !vals.is_empty() && vals.iter().all(|x| matches!(x, Scalar::B(_)));
            if vals.iter().any(|x| matches!(x, Scalar::F(_))) {
                return Err("tensors used as indices must be long, int, byte or bool tensors".into());
            }
            let dt = if all_bool { DType::Bool } else { DType::I64 };
            Ok(Some(Tensor::from_scalars(dt, &shape, &vals)?))
        }
        // A `range` indexes as the list of its values (`t[range(n), idx]`).
        Value::Range(a, b, s) => {
            let vals: Vec<Scalar> = super::value::range_values(*a, *b, *s).into_iter().map(Scalar::I).collect();
            Ok(Some(Tensor::from_scalars(DType::I64, &[vals.len()], &vals)?))
        }
        Value::Bool(_) => Err("indexing with a Python bool is not supported".into()),
        _ => Ok(None),
    }
}

fn resolve(t: &Tensor, idx: &Value) -> AResult<Resolved> {
    let items: Vec<Value> = match idx {
        Value::Tuple(v) => v.as_ref().clone(),
        other => vec![other.clone()],
    };
    // Dims consumed by each item, to expand `...`.
    let mut consumed = 0usize;
    for it in &items {
        consumed += match it {
            Value::None | Value::Ellipsis => 0,
            other => match as_index_tensor(other)? {
                Some(ix) if ix.dtype() == DType::Bool => ix.dim(),
                _ => 1,
            },
        };
    }
    if consumed > t.dim() {
        return Err(format!("too many indices for tensor of dimension {}", t.dim()));
    }
    let mut view = t.clone();
    let mut d = 0usize;
    let mut adv: Vec<(usize, Tensor)> = Vec::new();
    let mut seen_ellipsis = false;
    let mut byte = false;
    for it in &items {
        match it {
            Value::Int(_) => {
                view = view.select(d as i64, to_int(it)?)?;
            }
            Value::Tensor(ix) if ix.dim() == 0 && !matches!(ix.dtype(), DType::Bool | DType::U8) => {
                if ix.dtype().is_float() {
                    return Err("tensors used as indices must be long, int, byte or bool tensors".into());
                }
                view = view.select(d as i64, to_int(it)?)?;
            }
            Value::Slice(a, b, c) => {
                view = view.slice(d as i64, *a, *b, c.unwrap_or(1))?;
                d += 1;
            }
            Value::None => {
                view = view.unsqueeze(d as i64)?;
                d += 1;
            }
            Value::Ellipsis => {
                if seen_ellipsis {
                    return Err("an index can only have a single ellipsis ('...')".into());
                }
                seen_ellipsis = true;
                d += t.dim() - consumed;
            }
            Value::Float(_) => {
                return Err("only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got float)".into())
            }
            other => match as_index_tensor(other)? {
                Some(ix) => {
                    byte |= matches!(other, Value::Tensor(t) if t.dtype() == DType::U8);
                    let width = if ix.dtype() == DType::Bool { ix.dim() } else { 1 };
                    adv.push((d, ix));
                    d += width;
                }
                None => return Err(format!("unsupported index of type {}", other.type_name())),
            },
        }
    }
    if adv.is_empty() {
        return Ok(Resolved { view, adv: None, has_mask: false, byte_mask: false });
    }
    let has_mask = adv.len() == 1 && adv[0].1.dtype() == DType::Bool;
    let mut list = Vec::new();
    let mut k = 0usize;
    while k < view.dim() {
        match adv.iter().find(|(p, _)| *p == k) {
            Some((_, ix)) => {
                list.push(Some(ix.clone()));
                k += if ix.dtype() == DType::Bool { ix.dim().max(1) } else { 1 };
            }
            None => {
                list.push(None);
                k += 1;
            }
        }
    }
    Ok(Resolved { view, adv: Some(list), has_mask, byte_mask: has_mask && byte })
}

/// `t[idx]`.
pub fn getitem(t: &Tensor, idx: &Value) -> AResult<Tensor> {
    let r = resolve(t, &idx.tensor_index())?;
    match r.adv {
        None => Ok(r.view),
        Some(adv) => index::index(&r.view, &adv),
    }
}

/// Drops leading size-1 dims of a value assigned by `__setitem__`, as PyTorch does.
fn strip_leading_ones(v: &Tensor, target_dim: usize) -> AResult<Tensor> {
    let mut v = v.clone();
    while v.dim() > target_dim && v.shape[0] == 1 {
        v = v.select(0, 0)?;
    }
    Ok(v)
}

/// `t[idx] = value`.
pub fn setitem(t: &Tensor, idx: &Value, value: &Value) -> AResult<()> {
    let r = resolve(t, &idx.tensor_index())?;
    match (&r.adv, value) {
        (_, Value::List(_) | Value::Tuple(_)) => {
            Err(format!("can't assign a {} to a torch.{}Tensor", value.type_name(), t.dtype().name()))
        }
        (None, Value::Tensor(v)) => {
            let v2 = strip_leading_ones(v, r.view.dim())?;
            let sizes: Vec<i64> = r.view.shape.iter().map(|&d| d as i64).collect();
            let expanded = v2.expand(&sizes)?;
            ops::check_setitem_overlap(&r.view, v)?;
            let vals = expanded.scalars();
            r.view.write_scalars(&vals);
            Ok(())
        }
        (None, other) => {
            let s = other.as_scalar().ok_or_else(|| format!("can't assign a {} to a tensor", other.type_name()))?;
            let n = r.view.numel();
            r.view.write_scalars(&vec![s; n]);
            Ok(())
        }
        // PyTorch fills through the mask (`masked_fill_`) for any value of one element.
        (Some(_), Value::Tensor(v)) if r.byte_mask && v.numel() == 1 => Err(index::BYTE_MASK_FILL.into()),
        (Some(_), v) if r.byte_mask && !matches!(v, Value::Tensor(_)) => Err(index::BYTE_MASK_FILL.into()),
        (Some(adv), Value::Tensor(v)) => {
            if v.dtype() != t.dtype() && !(r.has_mask && v.dim() == 0) {
                return Err(format!(
                    "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
                    t.dtype().name(),
                    v.dtype().name()
                ));
            }
            ops::check_overlap(t, &[v], false)?;
            let v2 = strip_leading_ones(v, 0)?;
            index::index_put(&r.view, adv, &v2, false)
        }
        (Some(adv), other) => {
            let s = other.as_scalar().ok_or_else(|| format!("can't assign a {} to a tensor", other.type_name()))?;
            let v = Tensor::scalar(t.dtype(), s)?;
            index::index_put(&r.view, adv, &v, false)
        }
    }
}
