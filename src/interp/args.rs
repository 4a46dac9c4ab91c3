//! Call arguments: positional and keyword values, looked up by position or name as Python binds them.

use std::cell::RefCell;

use super::pyvalue::{Py, PyValue};
use super::value::Value;
use crate::diag::Span;
use crate::tensor::{DType, Tensor};

/// Call arguments of either engine (`V` is its value type): positional and keyword values, looked up by position
/// or name as Python binds them. The reference interpreter's are [`Args`], the functionalizer's `CallArgs<FV>`; each
/// adds its own conversions (ints known only at run time are the functionalizer's).
pub struct CallArgs<V> {
    pub pos: Vec<V>,
    pub kw: Vec<(String, V)>,
    pub span: Span,
    /// The name of the called function or method, for messages.
    pub name: String,
    /// Which keyword arguments the op has looked up: one it never looked up was not understood, and is reported
    /// rather than ignored ([`CallArgs::unexpected`]).
    used: RefCell<Vec<bool>>,
}

/// The reference interpreter's call arguments.
pub type Args = CallArgs<Value>;

pub type AResult<T> = Result<T, String>;

impl<V: PyValue> CallArgs<V> {
    pub fn new(pos: Vec<V>, kw: Vec<(String, V)>, span: Span, name: String) -> Self {
        let mut kw = kw;
        crate::interp::compat::numpy_aliases(&mut kw);
        Self::builtin(pos, kw, span, name)
    }

    /// The arguments of a Python builtin: keywords as written (`dict(axis=1)` keeps its key; only torch ops take
    /// NumPy's aliases).
    pub fn builtin(pos: Vec<V>, kw: Vec<(String, V)>, span: Span, name: String) -> Self {
        let used = RefCell::new(vec![false; kw.len()]);
        CallArgs { pos, kw, span, name, used }
    }

    /// The keyword argument `name`, marked as looked up.
    pub(crate) fn keyword(&self, name: &str) -> Option<&V> {
        let k = self.kw.iter().position(|(k, _)| k == name)?;
        self.used.borrow_mut()[k] = true;
        Some(&self.kw[k].1)
    }

    /// The first keyword argument the call was given that the op never looked up, if any.
    pub fn unexpected(&self) -> Option<&str> {
        let used = self.used.borrow();
        self.kw.iter().zip(used.iter()).find(|(_, &u)| !u).map(|((k, _), _)| k.as_str())
    }

    /// The argument at position `i` or with keyword `name`.
    pub fn get(&self, i: usize, name: &str) -> Option<&V> {
        if let Some(v) = self.keyword(name) {
            return Some(v);
        }
        self.pos.get(i)
    }

    /// Like [`CallArgs::get`], treating an explicit `None` as absent.
    pub fn opt(&self, i: usize, name: &str) -> Option<&V> {
        self.get(i, name).filter(|v| !matches!(v.py(), Py::None))
    }

    /// A bool argument (an int stands for one), `default` when absent.
    pub fn bool_arg(&self, i: usize, name: &str, default: bool) -> AResult<bool> {
        match self.opt(i, name).map(|v| (v, v.py())) {
            Some((_, Py::Bool(b))) => Ok(b),
            Some((_, Py::Int(v))) => Ok(v != 0),
            Some((other, _)) => {
                Err(format!("{}(): argument '{}' must be bool, not {}", self.name, name, other.type_name()))
            }
            None => Ok(default),
        }
    }

    /// A dtype argument: a `torch.dtype`, or Python's `int`, `float` and `bool` standing for int64, float64 and bool.
    pub fn dtype_arg(&self, i: usize, name: &str) -> AResult<Option<DType>> {
        let Some(v) = self.opt(i, name) else { return Ok(None) };
        match v.py() {
            Py::DType(d) => Ok(Some(d)),
            // Python's types stand for dtypes (`dtype=int` is torch.int64, float torch.float64, bool torch.bool).
            Py::Module("int") => Ok(Some(DType::I64)),
            Py::Module("float") => Ok(Some(DType::F64)),
            Py::Module("bool") => Ok(Some(DType::Bool)),
            Py::Str(s) if crate::tensor::unsupported_torch_dtype(s).is_some() => {
                Err(crate::tensor::unsupported_torch_dtype(s).expect("checked"))
            }
            _ => Err(format!("{}(): argument '{}' must be torch.dtype, not {}", self.name, name, v.type_name())),
        }
    }
}

impl Args {
    /// The tensors given as arguments, positional then keyword.
    pub fn tensors(&self) -> Vec<&Tensor> {
        let all = self.pos.iter().chain(self.kw.iter().map(|(_, v)| v));
        all.filter_map(|v| if let Value::Tensor(t) = v { Some(t) } else { None }).collect()
    }

    pub fn bool_or(&self, i: usize, name: &str, default: bool) -> AResult<bool> {
        self.bool_arg(i, name, default)
    }

    pub fn dtype(&self, i: usize, name: &str) -> AResult<Option<DType>> {
        self.dtype_arg(i, name)
    }

    pub fn req(&self, i: usize, name: &str) -> AResult<&Value> {
        self.get(i, name).ok_or_else(|| format!("{}() missing required argument '{}' (pos {})", self.name, name, i + 1))
    }

    pub fn tensor(&self, i: usize, name: &str) -> AResult<Tensor> {
        match self.req(i, name)? {
            Value::Tensor(t) => Ok(t.clone()),
            other => Err(format!("{}(): argument '{}' must be Tensor, not {}", self.name, name, other.type_name())),
        }
    }

    pub fn int(&self, i: usize, name: &str) -> AResult<i64> {
        to_int(self.req(i, name)?).map_err(|e| format!("{}(): argument '{}' {}", self.name, name, e))
    }

    pub fn int_or(&self, i: usize, name: &str, default: i64) -> AResult<i64> {
        match self.opt(i, name) {
            Some(v) => to_int(v).map_err(|e| format!("{}(): argument '{}' {}", self.name, name, e)),
            None => Ok(default),
        }
    }

    pub fn opt_int(&self, i: usize, name: &str) -> AResult<Option<i64>> {
        match self.opt(i, name) {
            Some(v) => Ok(Some(to_int(v).map_err(|e| format!("{}(): argument '{}' {}", self.name, name, e))?)),
            None => Ok(None),
        }
    }

    /// A dims argument: one int, or a tuple/list of ints.
    pub fn dims(&self, i: usize, name: &str) -> AResult<Option<Vec<i64>>> {
        match self.opt(i, name) {
            None => Ok(None),
            Some(v) => match v.items() {
                Some(items) => Ok(Some(items.iter().map(to_int).collect::<AResult<_>>()?)),
                None => Ok(Some(vec![to_int(v)?])),
            },
        }
    }

    /// A size given either as varargs from position `start` (`zeros(2, 3)`) or as one sequence (`zeros((2, 3))`).
    pub fn sizes(&self, start: usize, name: &str) -> AResult<Vec<i64>> {
        let rest = if self.pos.len() > start { &self.pos[start..] } else { &[] };
        if rest.is_empty() {
            if let Some(v) = self.keyword(name) {
                return int_list(v);
            }
            return Err(format!("{}() missing 1 required positional arguments: \"{name}\"", self.name));
        }
        if rest.len() == 1 {
            if let Some(items) = rest[0].items() {
                return items.iter().map(to_int).collect();
            }
        }
        rest.iter()
            .enumerate()
            .map(|(k, v)| {
                to_int(v).map_err(|_| {
                    format!(
                        "{}(): argument '{}' failed to unpack the object at pos {} with error \"type must be tuple of ints,but got {}\"",
                        self.name,
                        name,
                        k + 1,
                        v.type_name()
                    )
                })
            })
            .collect()
    }
}

/// Python's `__index__`: ints, bools and one-element integer tensors.
pub fn to_int(v: &Value) -> AResult<i64> {
    match v {
        Value::Int(i) => Ok(*i),
        Value::Bool(b) => Ok(*b as i64),
        Value::Tensor(t) if !t.dtype().is_float() && t.numel() == 1 => Ok(t.item()?.to_i64_trunc()),
        Value::Tensor(_) => Err("only integer tensors of a single element can be converted to an index".into()),
        other => Err(format!("must be int, not {}", other.type_name())),
    }
}

pub fn int_list(v: &Value) -> AResult<Vec<i64>> {
    match v.items() {
        Some(items) => items.iter().map(to_int).collect(),
        None => Ok(vec![to_int(v)?]),
    }
}
