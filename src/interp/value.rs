//! Runtime values of the reference interpreter: Python objects as the supported subset needs them.

use std::cell::RefCell;
use std::rc::Rc;

use crate::tensor::{Scalar, Tensor};

super::pyvalue::py_values! {
    /// A Python value as the reference interpreter holds it: tensors are data, everything is known.
    pub enum Value {
        tensor: Tensor,
        slice_bound: i64,
    }
    name: |_: &Value| unreachable!("every reference value has a Python kind")
}

impl Value {
    pub fn type_name(&self) -> &'static str {
        super::pyvalue::PyValue::type_name(self)
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(RefCell::new(items)))
    }

    pub fn tuple(items: Vec<Value>) -> Value {
        Value::Tuple(Rc::new(items))
    }

    /// A Python number as a tensor scalar operand.
    pub fn as_scalar(&self) -> Option<Scalar> {
        match self {
            Value::Bool(b) => Some(Scalar::B(*b)),
            Value::Int(i) => Some(Scalar::I(*i)),
            Value::Float(f) => Some(Scalar::F(*f)),
            _ => None,
        }
    }

    /// What an argument PyTorch reads as a Number holds: a Python number, or the element of a 0-d tensor.
    pub fn as_number(&self) -> Option<Scalar> {
        match self {
            Value::Tensor(t) if t.shape.is_empty() => t.item().ok(),
            other => other.as_scalar(),
        }
    }

    pub fn from_scalar(s: Scalar) -> Value {
        match s {
            Scalar::B(b) => Value::Bool(b),
            Scalar::I(i) => Value::Int(i),
            Scalar::F(f) => Value::Float(f),
        }
    }

    /// Elements of a sequence value (tuple, list, named tuple), if it is one.
    pub fn items(&self) -> Option<Vec<Value>> {
        super::pyvalue::PyValue::items(self)
    }
}

/// The positions a Python slice `[start:stop:step]` picks from a sequence of length `n`, in order, as
/// `slice.indices` computes them: negative bounds count from the end, out-of-range bounds are clamped, omitted bounds
/// default by the step's sign (so `[::-1]` reverses and `[-2:0:-3]` walks backwards), and a zero step is an error.
pub fn slice_positions(n: i64, start: Option<i64>, stop: Option<i64>, step: Option<i64>) -> Result<Vec<usize>, String> {
    let step = step.unwrap_or(1);
    if step == 0 {
        return Err("slice step cannot be zero".into());
    }
    // A bound is first shifted by `n` if negative, then clamped to [0, n] for a positive step and [-1, n - 1] for
    // a negative one (-1 meaning "before the first element").
    let (lo, hi) = if step > 0 { (0, n) } else { (-1, n - 1) };
    let clamp = |v: i64| {
        let v = if v < 0 { v.saturating_add(n) } else { v };
        v.clamp(lo, hi)
    };
    let s = start.map_or(if step > 0 { 0 } else { n - 1 }, clamp);
    let e = stop.map_or(if step > 0 { n } else { -1 }, clamp);
    let mut out = Vec::new();
    let mut i = s;
    while (step > 0 && i < e) || (step < 0 && i > e) {
        out.push(i as usize);
        i = match i.checked_add(step) {
            Some(j) => j,
            None => break,
        };
    }
    Ok(out)
}

/// The values of `range(a, b, s)` (`s` nonzero).
pub fn range_values(a: i64, b: i64, s: i64) -> Vec<i64> {
    let mut out = Vec::new();
    let mut i = a;
    while (s > 0 && i < b) || (s < 0 && i > b) {
        out.push(i);
        i = match i.checked_add(s) {
            Some(n) => n,
            None => break,
        };
    }
    out
}
