//! Creation ops: `zeros`, `ones`, `full`, `*_like`, `new_*`, `arange`, `linspace`, `tensor`, `eye`, `meshgrid`.

use super::args::{int_list, AResult, Args};
use super::torch_ops::{check_int_data, fill_value, flatten_data, t, tensor_list, tensors, DataKind, UNKNOWN_OP};
use super::value::Value;
use crate::tensor::{DType, Scalar, Tensor};

/// The dtype a creation op gives a Python fill value.
fn creation_dtype(a: &Args, value: Option<Scalar>) -> AResult<DType> {
    Ok(match a.dtype(99, "dtype")? {
        Some(d) => d,
        None => value.map(|s| s.default_dtype()).unwrap_or(DType::F32),
    })
}

/// The shape a creation op `name` makes from `sizes`, with PyTorch's error for a negative size (`zeros` words it
/// its own way).
pub(crate) fn shape_of(name: &str, sizes: &[i64]) -> AResult<Vec<usize>> {
    match sizes.iter().find(|&&d| d < 0) {
        Some(_) if name == "zeros" => Err("zeros: Dimension size must be non-negative.".into()),
        Some(d) => Err(format!("Trying to create tensor with negative dimension {d}: {:?}", sizes)),
        None => Ok(sizes.iter().map(|&d| d as usize).collect()),
    }
}

/// A count argument of `linspace` (`steps`) or `eye` (`n`, `m`), with PyTorch's error when it is negative.
pub(crate) fn count_arg(name: &str, arg: &str, v: i64) -> AResult<usize> {
    match (name, v < 0) {
        (_, false) => Ok(v as usize),
        ("linspace", true) => Err("number of steps must be non-negative".into()),
        (_, true) => Err(format!("{arg} must be greater or equal to 0, got {v}")),
    }
}

/// A creation op, or the unknown-op error when `name` is none of them.
/// `torch.Tensor(data)`, the legacy constructor, is `torch.tensor(data)` in the default dtype (float32) when `data`
/// is a list or tuple; its other forms (sizes: uninitialized memory; a tensor: an alias or an error by dtype) are
/// refused. Shared by both engines.
pub(crate) fn legacy_tensor_check(n_pos: usize, first_is_seq: bool, n_kw: usize) -> Result<(), String> {
    if n_pos == 1 && first_is_seq && n_kw == 0 {
        Ok(())
    } else {
        Err("torch.Tensor(...) is supported only with a list or tuple of numbers (`torch.Tensor([1e10])`); use \
             torch.tensor, torch.zeros or torch.empty"
            .into())
    }
}

pub(super) fn creation_op(name: &str, a: &Args, method: bool) -> AResult<Value> {
    if name == "Tensor" {
        let seq = matches!(a.pos.first(), Some(Value::List(_) | Value::Tuple(_)));
        legacy_tensor_check(a.pos.len(), seq, a.kw.len())?;
        let b = Args::new(vec![a.pos[0].clone(), Value::DType(DType::F32)], vec![], a.span, "Tensor".into());
        return creation_op("tensor", &b, false);
    }
    match name {
        "zeros" | "ones" | "empty" | "full" => {
            if method {
                return Err(format!("{UNKNOWN_OP}{name}"));
            }
            let (sizes, value) = if name == "full" {
                let v = fill_value(a.req(1, "fill_value")?, "full")?;
                (int_list(a.req(0, "size")?)?, v)
            } else {
                (a.sizes(0, "size")?, Scalar::I(if name == "ones" { 1 } else { 0 }))
            };
            let dt = if name == "full" { creation_dtype(a, Some(value))? } else { creation_dtype(a, None)? };
            t(Tensor::full(dt, &shape_of(name, &sizes)?, value)?)
        }
        "scalar_tensor" if !method => {
            // `torch.full((), s)` in the default dtype (float32) whatever the kind of `s`; a 0-d tensor is a number.
            let v = match a.req(0, "s")? {
                Value::Tensor(x) if x.dim() == 0 => x.item()?,
                v => v.as_scalar().filter(|_| !matches!(v, Value::Tensor(_))).ok_or_else(|| {
                    format!("scalar_tensor(): argument 's' (position 1) must be Number, not {}", v.type_name())
                })?,
            };
            t(Tensor::full(a.dtype(99, "dtype")?.unwrap_or(DType::F32), &[], v)?)
        }
        "zeros_like" | "ones_like" | "empty_like" | "full_like" | "rand_like" => {
            let x = a.tensor(0, "input")?;
            let value = match name {
                "ones_like" => Scalar::I(1),
                "full_like" => fill_value(a.req(1, "fill_value")?, "full_like")?,
                "rand_like" => return Err(format!("{UNKNOWN_OP}{name}")),
                _ => Scalar::I(0),
            };
            let dt = a.dtype(99, "dtype")?.unwrap_or(x.dtype());
            let out = Tensor::empty_like_layout(&x, dt)?;
            out.write_scalars(&vec![value; out.numel()]);
            t(out)
        }
        "arange" => arange(a),
        "range" => torch_range(a),
        "linspace" => {
            let s = a.req(0, "start")?.as_number().ok_or("linspace(): start must be a number")?.to_f64();
            let e = a.req(1, "end")?.as_number().ok_or("linspace(): end must be a number")?.to_f64();
            let n = count_arg(name, "steps", a.int(2, "steps")?)?.min(crate::tensor::MAX_ELEMENTS);
            let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
            t(Tensor::from_f64(dt, &[n], &linspace_values(s, e, n))?)
        }
        "tensor" | "as_tensor" => tensor_of(a),
        "meshgrid" => meshgrid(a),
        "new_zeros" | "new_ones" | "new_empty" | "new_full" => {
            let x = a.tensor(0, "self")?;
            let (sizes, value) = if name == "new_full" {
                (int_list(a.req(1, "size")?)?, fill_value(a.req(2, "fill_value")?, "new_full")?)
            } else {
                (a.sizes(1, "size")?, Scalar::I(if name == "new_ones" { 1 } else { 0 }))
            };
            let dt = a.dtype(99, "dtype")?.unwrap_or(x.dtype());
            t(Tensor::full(dt, &shape_of(name, &sizes)?, value)?)
        }
        // The legacy `x.new(2, 3)` (uninitialized: zeros here), `x.new([data])` and `x.new()` (no elements).
        "new" if method => {
            crate::tensor::legacy_new_check(a.kw.len(), a.pos.len(), |i| match &a.pos[i] {
                Value::List(_) => Some(true),
                Value::Tuple(_) | Value::Tensor(_) => None,
                _ => Some(false),
            })?;
            match a.pos.get(1) {
                Some(Value::List(_)) => creation_op("new_tensor", a, true),
                None => t(Tensor::zeros(a.tensor(0, "self")?.dtype(), &[0])?),
                Some(_) => creation_op("new_empty", a, true),
            }
        }
        "new_tensor" => {
            let x = a.tensor(0, "self")?;
            let data = a.req(1, "data")?;
            let (shape, vals, kind) = data_of(data)?;
            let dt = kind.resolve(Some(a.dtype(99, "dtype")?.unwrap_or(x.dtype())))?;
            if !matches!(data, Value::Tensor(_)) {
                check_int_data(dt, &vals)?;
            }
            t(Tensor::from_scalars(dt, &shape, &vals)?)
        }
        "eye" => {
            let n = count_arg(name, "n", a.int(0, "n")?)?;
            let m = a.opt_int(1, "m")?.map(|m| count_arg(name, "m", m)).transpose()?.unwrap_or(n);
            let out = Tensor::zeros(creation_dtype(a, None)?, &[n, m])?;
            let d = out.diagonal(0, 0, 1)?;
            d.write_scalars(&vec![Scalar::I(1); d.numel()]);
            t(out)
        }
        "diag" => {
            let x = a.tensor(0, "input")?;
            let k = a.int_or(1, "diagonal", 0)?;
            match x.dim() {
                1 => {
                    let n = x.shape[0] + k.unsigned_abs() as usize;
                    let out = Tensor::zeros(x.dtype(), &[n, n])?;
                    out.diagonal(k, 0, 1)?.write_scalars(&x.scalars());
                    t(out)
                }
                2 => t(x.diagonal(k, 0, 1)?.contiguous_copy()),
                _ => Err("diag(): Supports 1D or 2D tensors. Got ".to_string() + &x.dim().to_string() + "D"),
            }
        }
        _ => super::extra_ops::extra_op(name, a),
    }
}

/// `torch.arange`: the values from `start` by `step` below `end`, integers where every bound is one.
fn arange(a: &Args) -> AResult<Value> {
    let num = |v: &Value| bound_number("arange", v);
    let (s, e, st) = arange_bind(&a.pos, |k| a.get(usize::MAX, k))?;
    let start = s.map(num).transpose()?.unwrap_or(Scalar::I(0));
    let (end, step) = (num(e)?, st.map(num).transpose()?.unwrap_or(Scalar::I(1)));
    let all_int = [start, end, step].iter().all(|s| !matches!(s, Scalar::F(_)));
    let dt = a.dtype(99, "dtype")?.unwrap_or(if all_int { DType::I64 } else { DType::F32 });
    let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
    let n = arange_len(s, e, st)?;
    if !n.is_finite() || n > crate::tensor::MAX_ELEMENTS as f64 {
        return Err(format!("arange(): {n} elements is more than this interpreter allows"));
    }
    let n = n as usize;
    let vals: Vec<Scalar> = (0..n)
        .map(|i| {
            if all_int {
                Scalar::I(start.to_i64_trunc() + i as i64 * step.to_i64_trunc())
            } else {
                Scalar::F(s + i as f64 * st)
            }
        })
        .collect();
    t(Tensor::from_scalars(dt, &[n], &vals)?)
}

/// `torch.tensor`/`as_tensor`: the nested data's numbers in a new tensor, its dtype PyTorch's promotion over the items.
fn tensor_of(a: &Args) -> AResult<Value> {
    let v = a.req(0, "data")?;
    let (shape, vals, kind) = data_of(v)?;
    let dt = kind.resolve(a.dtype(1, "dtype")?)?;
    if !matches!(v, Value::Tensor(_)) {
        check_int_data(dt, &vals)?;
    }
    t(Tensor::from_scalars(dt, &shape, &vals)?)
}

/// The shape, numbers and kind of `torch.tensor`'s nested data.
fn data_of(v: &Value) -> AResult<(Vec<usize>, Vec<Scalar>, DataKind)> {
    let (mut shape, mut vals, mut kind) = (Vec::new(), Vec::new(), DataKind::default());
    flatten_data(v, &mut shape, 0, &mut vals, &mut kind)?;
    Ok((shape, vals, kind))
}

/// `torch.meshgrid`: each input viewed along its own dim and expanded to the grid (`indexing='ij'` unless `'xy'`).
fn meshgrid(a: &Args) -> AResult<Value> {
    let ts = if a.pos.len() == 1 && a.pos[0].items().is_some() {
        tensor_list(a, 0, "tensors")?
    } else {
        a.pos
            .iter()
            .map(|v| match v {
                Value::Tensor(t) => Ok(t.clone()),
                _ => Err("meshgrid expects tensors".to_string()),
            })
            .collect::<AResult<_>>()?
    };
    let ij = match a.opt(99, "indexing") {
        Some(Value::Str(s)) if s.as_ref() == "xy" => false,
        _ => true,
    };
    let numels: Vec<usize> = ts.iter().map(|t| t.numel()).collect();
    let (views, sizes) = crate::tensor::views::meshgrid_shapes(&numels, ij);
    let mut out = Vec::new();
    for (x, shape) in ts.iter().zip(views) {
        out.push(x.reshape(&shape)?.expand(&sizes)?);
    }
    tensors(out)
}

/// The deprecated `torch.range(start, end, step=1)`'s arguments (by position or keyword) and length: its `end` is
/// included, so it has floor((end - start) / step) + 1 elements (PyTorch's errors for a zero step or one of the
/// wrong sign).
pub(crate) fn range_args<'v, V>(
    pos: &'v [V],
    kw: impl Fn(&str) -> Option<&'v V>,
) -> Result<[Option<&'v V>; 3], String> {
    if pos.len() > 3 {
        return Err(format!("range() takes from 2 to 3 positional arguments but {} were given", pos.len()));
    }
    let slot = |i: usize, k: &str| match (pos.get(i), kw(k)) {
        (Some(_), Some(_)) => Err("range() received an invalid combination of arguments".to_string()),
        (p, k) => Ok(p.or(k)),
    };
    let (start, end, step) = (slot(0, "start")?, slot(1, "end")?, slot(2, "step")?);
    if start.is_none() || end.is_none() {
        return Err("range() received an invalid combination of arguments".into());
    }
    Ok([start, end, step])
}

/// `torch.range`'s start, end and step as it computes with them: cast to an integer dtype first (toward zero).
pub(crate) fn range_bounds(dt: DType, v: [f64; 3]) -> [f64; 3] {
    if dt.is_float() {
        v
    } else {
        v.map(f64::trunc)
    }
}

/// [`range_args`]' number of elements.
pub(crate) fn range_len(start: f64, end: f64, step: f64) -> Result<f64, String> {
    arange_len(start, end, step)?;
    Ok(((end - start) / step).floor() + 1.0)
}

/// A bound of `arange` or `range` (`op`): a number, or a one-element tensor's.
fn bound_number(op: &str, v: &Value) -> AResult<Scalar> {
    match v {
        Value::Tensor(t) if t.numel() == 1 => t.item(),
        o => o.as_scalar().ok_or_else(|| format!("{op}(): arguments must be numbers, not {}", o.type_name())),
    }
}

/// `torch.range(start, end, step=1)` (see [`range_args`]): the default float dtype unless `dtype=` says otherwise.
fn torch_range(a: &Args) -> AResult<Value> {
    let num = |v: &Value| bound_number("range", v);
    let [s, e, st] = range_args(&a.pos, |k| a.get(usize::MAX, k))?;
    let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
    let (s, e) = (num(s.expect("checked"))?.to_f64(), num(e.expect("checked"))?.to_f64());
    let st = st.map(num).transpose()?.map_or(1.0, |v| v.to_f64());
    let [s, e, st] = range_bounds(dt, [s, e, st]);
    let n = range_len(s, e, st)?;
    if !n.is_finite() || n > crate::tensor::MAX_ELEMENTS as f64 {
        return Err(format!("range(): {n} elements is more than this interpreter allows"));
    }
    let vals: Vec<Scalar> = (0..n as usize).map(|i| Scalar::F(s + i as f64 * st)).collect();
    t(Tensor::from_scalars(dt, &[n as usize], &vals)?)
}

/// The number of values `arange` gives from `start` by `step` below `end`, after PyTorch's checks of the step (both
/// engines; each bounds the count as it can hold it).
pub(crate) fn arange_len(start: f64, end: f64, step: f64) -> Result<f64, String> {
    if step == 0.0 {
        return Err("step must be nonzero".into());
    }
    if (step > 0.0 && end < start) || (step < 0.0 && end > start) {
        return Err("upper bound and lower bound inconsistent with step sign".into());
    }
    Ok(((end - start) / step).ceil().max(0.0))
}

/// `linspace`'s `n` values from `start` to `end`: as PyTorch computes them, the first half stepping up from `start`
/// and the second half stepping down from `end` (both engines).
pub(crate) fn linspace_values(start: f64, end: f64, n: usize) -> Vec<f64> {
    let step = if n > 1 { (end - start) / (n - 1) as f64 } else { 0.0 };
    let half = n / 2;
    (0..n).map(|i| if i < half { start + step * i as f64 } else { end - step * (n - 1 - i) as f64 }).collect()
}

/// `torch.arange`'s bounds bound as PyTorch's parser binds them: `(end)` alone, or `(start, end[, step])` with each
/// given by position or by keyword (`arange(end=w)`, `arange(1, end=5)`, `arange(start=0, end=5, step=2)`).
pub(crate) fn arange_bind<'v, V>(
    pos: &'v [V],
    kw: impl Fn(&str) -> Option<&'v V>,
) -> Result<(Option<&'v V>, &'v V, Option<&'v V>), String> {
    let (ks, ke, kst) = (kw("start"), kw("end"), kw("step"));
    let invalid = || "arange() received an invalid combination of arguments".to_string();
    match (pos, ks, ke, kst) {
        ([e], None, None, None) | ([], None, Some(e), None) => return Ok((None, e, None)),
        _ if pos.len() > 3 => {
            return Err(format!("arange() takes from 1 to 3 positional arguments but {} were given", pos.len()))
        }
        _ => {}
    }
    let slot = |i: usize, k: Option<&'v V>| match (pos.get(i), k) {
        (Some(_), Some(_)) => Err(invalid()),
        (p, k) => Ok(p.or(k)),
    };
    let (start, end, step) = (slot(0, ks)?, slot(1, ke)?, slot(2, kst)?);
    match (start, end) {
        (Some(s), Some(e)) => Ok((Some(s), e, step)),
        (Some(_), None) if step.is_none() => Err("arange() missing 1 required positional arguments: \"end\"".into()),
        _ => Err(invalid()),
    }
}
