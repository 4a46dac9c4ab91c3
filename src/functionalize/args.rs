//! Call arguments in the functionalizer: positional and keyword values looked up as Python binds them, with the
//! messages of PyTorch's argument parser (and ours for values known only when the program runs).

use super::state::{diag, needs_static, Stop, Sym, TRef, FR, FV};
use crate::diag::{Diagnostic, Span};
use crate::tensor::{DType, Scalar};

/// The functionalizer's call arguments (`crate::interp::args::CallArgs`, shared with the reference interpreter).
pub(super) type A = crate::interp::args::CallArgs<FV>;

pub(super) fn err(span: Span) -> impl Fn(String) -> Stop {
    move |m| Stop::Diag(Diagnostic::new(m).at(span))
}

impl A {
    /// The tensors given as arguments, positional then keyword.
    pub(super) fn tensors(&self) -> Vec<&TRef> {
        let all = self.pos.iter().chain(self.kw.iter().map(|(_, v)| v));
        all.filter_map(|v| if let FV::Tensor(t) = v { Some(t) } else { None }).collect()
    }
    /// Rejects a keyword argument the op never looked up (so did not understand), instead of ignoring it.
    pub(super) fn check_keywords(&self, callee: &str) -> FR<()> {
        match self.unexpected() {
            Some(k) => diag(self.span, format!("unexpected keyword argument '{k}' for {callee}")),
            None => Ok(()),
        }
    }
    pub(super) fn req(&self, i: usize, name: &str) -> FR<&FV> {
        self.get(i, name).ok_or_else(|| {
            Stop::Diag(Diagnostic::new(format!("{}() missing required argument '{name}'", self.name)).at(self.span))
        })
    }
    pub(super) fn tensor(&self, i: usize, name: &str) -> FR<TRef> {
        match self.req(i, name)? {
            FV::Tensor(t) => Ok(t.clone()),
            other => {
                diag(self.span, format!("{}(): argument '{name}' must be Tensor, not {}", self.name, other.type_name()))
            }
        }
    }
    pub(super) fn int_of(&self, v: &FV, name: &str) -> FR<i64> {
        match v {
            FV::Int(i) => Ok(*i),
            FV::Bool(b) => Ok(*b as i64),
            FV::DynInt(a) if a.terms.iter().any(|(s, _)| matches!(s, Sym::Opaque(_))) => self.from_data(name),
            FV::DynInt(_) => {
                needs_static(self.span, format!("{}(): argument '{name}' depends on a loop variable", self.name))
            }
            FV::Tensor(_) | FV::DynFloat(_) | FV::DynBool(_) => self.from_data(name),
            other => {
                diag(self.span, format!("{}(): argument '{name}' must be int, not {}", self.name, other.type_name()))
            }
        }
    }
    /// The refusal of an int argument whose value comes from tensor data.
    fn from_data<T>(&self, name: &str) -> FR<T> {
        let why = if matches!(name, "size" | "sizes" | "shape" | "length" | "end" | "steps" | "chunks" | "repeats")
            || name.contains("size")
        {
            "so the result's shape depends on the data"
        } else {
            "known only when the program runs"
        };
        diag(
            self.span,
            format!(
                "{}(): argument '{name}' comes from tensor data, {why}: the functional and optimized engines need \
                 it known before the program runs (the reference engine runs it)",
                self.name
            ),
        )
    }
    pub(super) fn int(&self, i: usize, name: &str) -> FR<i64> {
        self.int_of(self.req(i, name)?, name)
    }
    pub(super) fn int_or(&self, i: usize, name: &str, d: i64) -> FR<i64> {
        match self.opt(i, name) {
            Some(v) => self.int_of(v, name),
            None => Ok(d),
        }
    }
    pub(super) fn opt_int(&self, i: usize, name: &str) -> FR<Option<i64>> {
        match self.opt(i, name) {
            Some(v) => Ok(Some(self.int_of(v, name)?)),
            None => Ok(None),
        }
    }
    pub(super) fn bool_or(&self, i: usize, name: &str, d: bool) -> FR<bool> {
        self.bool_arg(i, name, d).map_err(err(self.span))
    }
    pub(super) fn dtype(&self, i: usize, name: &str) -> FR<Option<DType>> {
        self.dtype_arg(i, name).map_err(err(self.span))
    }
    pub(super) fn dims(&self, i: usize, name: &str) -> FR<Option<Vec<i64>>> {
        match self.opt(i, name) {
            None => Ok(None),
            Some(v) => match v.items() {
                Some(items) => Ok(Some(items.iter().map(|x| self.int_of(x, name)).collect::<FR<_>>()?)),
                None => Ok(Some(vec![self.int_of(v, name)?])),
            },
        }
    }
    pub(super) fn sizes(&self, start: usize, name: &str) -> FR<Vec<i64>> {
        let rest = if self.pos.len() > start { &self.pos[start..] } else { &[] };
        if rest.is_empty() {
            if let Some(v) = self.keyword(name) {
                return match v.items() {
                    Some(items) => items.iter().map(|x| self.int_of(x, name)).collect(),
                    None => Ok(vec![self.int_of(v, name)?]),
                };
            }
            return diag(self.span, format!("{}() missing 1 required positional arguments: \"{name}\"", self.name));
        }
        if rest.len() == 1 {
            if let Some(items) = rest[0].items() {
                return items.iter().map(|x| self.int_of(x, name)).collect();
            }
        }
        rest.iter().map(|x| self.int_of(x, name)).collect()
    }
    pub(super) fn number(&self, v: &FV) -> Option<Scalar> {
        match v {
            FV::Bool(b) => Some(Scalar::B(*b)),
            FV::Int(i) => Some(Scalar::I(*i)),
            FV::Float(f) => Some(Scalar::F(*f)),
            _ => None,
        }
    }
}
