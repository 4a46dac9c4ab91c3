//! `torch._foreach_NAME(tensors, ...)` as torch.optim's foreach paths use it: the per-tensor op `NAME` (a tensor
//! method, in place when `NAME` ends in `_`) over the tensors of a list, each other argument that is a list or tuple
//! taken element by element and any other value passed to every call. Both engines bind the calls here.

use super::pyvalue::{Py, PyValue};

/// One call of the per-tensor op: its positional arguments (the tensor first) and keyword arguments.
pub(crate) type Call<V> = (Vec<V>, Vec<(String, V)>);

/// The per-tensor method of `_foreach_NAME` and its calls, one per tensor of the first argument, after PyTorch's
/// checks that the first argument is a sequence of tensors and that every list argument has as many elements.
pub(crate) fn foreach_calls<V: PyValue>(
    name: &str,
    pos: &[V],
    kw: &[(String, V)],
) -> Result<(String, Vec<Call<V>>), String> {
    let items = V::items;
    let is_tensor = |v: &V| matches!(v.py(), Py::Tensor);
    let type_name = V::type_name;
    let method = name.strip_prefix("_foreach_").unwrap_or(name).to_string();
    let first = pos.first().ok_or_else(|| format!("{name}() missing required argument 'self' (pos 1)"))?;
    let tensors = match items(first) {
        Some(ts) if ts.iter().all(&is_tensor) => ts,
        _ => {
            return Err(format!(
                "{name}(): argument 'self' (position 1) must be tuple of Tensors, not {}",
                type_name(first)
            ))
        }
    };
    let n = tensors.len();
    let spread = |v: &V| -> Result<Option<Vec<V>>, String> {
        match items(v) {
            None => Ok(None),
            Some(xs) if xs.len() == n => Ok(Some(xs)),
            Some(xs) if xs.iter().all(&is_tensor) => {
                Err(format!("Tensor lists must have the same number of tensors, got {n} and {}", xs.len()))
            }
            Some(xs) => {
                Err(format!("Tensor list must have same number of elements as scalar list, got {n} and {}", xs.len()))
            }
        }
    };
    // `_foreach_addcmul(self, tensor1, tensor2, value)` takes `value` positionally, where the per-tensor op takes
    // it as a keyword only.
    let (pos, value) = match (method.trim_end_matches('_'), pos.len()) {
        ("addcmul" | "addcdiv", 4) if !is_tensor(&pos[3]) => (&pos[..3], Some(("value".to_string(), pos[3].clone()))),
        _ => (pos, None),
    };
    let rest: Vec<(V, Option<Vec<V>>)> =
        pos[1..].iter().map(|v| Ok((v.clone(), spread(v)?))).collect::<Result<_, String>>()?;
    let kws: Vec<(String, V, Option<Vec<V>>)> =
        kw.iter().cloned().chain(value).map(|(k, v)| Ok((k, v.clone(), spread(&v)?))).collect::<Result<_, String>>()?;
    let pick = |i: usize, v: &V, s: &Option<Vec<V>>| s.as_ref().map(|s| s[i].clone()).unwrap_or_else(|| v.clone());
    let calls = tensors
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let mut p = vec![t];
            p.extend(rest.iter().map(|(v, s)| pick(i, v, s)));
            (p, kws.iter().map(|(k, v, s)| (k.clone(), pick(i, v, s))).collect())
        })
        .collect();
    Ok((method, calls))
}
