//! Python comparisons both engines decide by the values' kinds: identity (`is`) and the equality of strings, dtypes,
//! devices, types and functions of the file.

use super::pyvalue::{Py, PyValue};
use crate::frontend::ast::CmpOp;

/// `a is b` / `a is not b` where Python's identity is decided by the kinds (None, bools) or by the object (lists,
/// dicts, instances); `same_tensor` says whether two tensors are the same one. An error for other kinds (numbers,
/// strings: CPython's caching decides), which no program here compares by identity.
pub fn identity<V: PyValue>(a: &V, op: CmpOp, b: &V, same_tensor: impl Fn(&V, &V) -> bool) -> Result<bool, String> {
    let same = match (a.py(), b.py()) {
        (Py::None, Py::None) => true,
        (Py::None, _) | (_, Py::None) => false,
        (Py::Bool(x), Py::Bool(y)) => x == y,
        (Py::Tensor, Py::Tensor) => same_tensor(a, b),
        // Types and modules are one object each (`type(x) is torch.Tensor`).
        (Py::Module(x), Py::Module(y)) => x == y,
        (Py::Module(_), _) | (_, Py::Module(_)) => false,
        (Py::Function(None), Py::Function(None)) if a.function_name().is_some() && b.function_name().is_some() => {
            a.function_name() == b.function_name()
        }
        // Lists, dicts and objects (held as dicts) are one object each (MoCo's `enc is model.encoder_q`).
        (Py::List(x), Py::List(y)) => std::ptr::eq(x, y),
        (Py::Dict(x), Py::Dict(y)) => std::ptr::eq(x, y),
        (Py::List(_) | Py::Dict(_), _) | (_, Py::List(_) | Py::Dict(_)) => false,
        _ => return Err("`is` is only supported for None, bools, tensors, types, lists, dicts and objects".into()),
    };
    Ok(same == (op == CmpOp::Is))
}

/// Equality of values compared by kind: strings, dtypes, devices, types (modules), functions of the file (classes)
/// and None (a string is never a dtype or a device). None where the kinds are not these.
pub fn kind_eq<V: PyValue>(a: &V, b: &V) -> Option<bool> {
    match (a.py(), b.py()) {
        (Py::Str(x), Py::Str(y)) => Some(x == y),
        (Py::DType(x), Py::DType(y)) => Some(x == y),
        (Py::Device, Py::Device) | (Py::None, Py::None) => Some(true),
        (Py::Module(x), Py::Module(y)) => Some(x == y),
        // Functions of the file, classes among them (`type(o) == C`): one object per name.
        (Py::Function(None), Py::Function(None)) => Some(a.function_name() == b.function_name()),
        (Py::Function(None), Py::Module(_) | Py::Str(_) | Py::DType(_) | Py::Device | Py::None)
        | (Py::Module(_) | Py::Str(_) | Py::DType(_) | Py::Device | Py::None, Py::Function(None)) => Some(false),
        (Py::Module(_), Py::Str(_) | Py::DType(_) | Py::Device | Py::None)
        | (Py::Str(_) | Py::DType(_) | Py::Device | Py::None, Py::Module(_)) => Some(false),
        (Py::Str(_) | Py::DType(_) | Py::Device, Py::Str(_) | Py::DType(_) | Py::Device) => Some(false),
        _ => None,
    }
}
