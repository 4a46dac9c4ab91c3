//! The `out=` keyword argument: which `torch.*` functions take it, and the checks PyTorch makes before writing a
//! result into it. Both the reference interpreter and the functionalizer route `out=` through here, so the engines
//! accept and reject the same calls.
//!
//! With `out=`, PyTorch computes the op's result and writes it through `out`'s view (every alias of `out` sees the
//! write), then returns `out` itself. We support the functions below; any other function given `out=` reports it as
//! an unexpected keyword argument, never ignores it. PyTorch would resize an `out` of another shape (silently when it
//! has no elements, with a deprecation warning otherwise); resizing changes a tensor's shape in place, which we do not
//! support (as with `t_` or `resize_`), so a shape mismatch is an error instead.

use crate::tensor::{fmt_shape, DType};

/// How a function writes into `out`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutKind {
    /// An elementwise (TensorIterator) op: the result is cast to `out`'s dtype where PyTorch's casting rules allow,
    /// and `out` may be exactly one of the inputs (but not partially overlap one).
    Elementwise,
    /// Any other op (matmuls, concatenation, reductions): `out` must have the result's dtype and must not overlap an
    /// input at all.
    Other,
}

const ELEMENTWISE: &[&str] = &[
    "abs",
    "absolute",
    "neg",
    "negative",
    "exp",
    "expm1",
    "log",
    "log1p",
    "log2",
    "log10",
    "sqrt",
    "rsqrt",
    "sigmoid",
    "tanh",
    "sin",
    "cos",
    "floor",
    "ceil",
    "round",
    "trunc",
    "sign",
    "reciprocal",
    "square",
    "erf",
    "logical_not",
    "bitwise_not",
    "add",
    "sub",
    "subtract",
    "mul",
    "multiply",
    "div",
    "divide",
    "true_divide",
    "floor_divide",
    "remainder",
    "fmod",
    "pow",
    "atan2",
    "atan",
    "arctan",
    "hypot",
    "maximum",
    "minimum",
    "eq",
    "ne",
    "not_equal",
    "lt",
    "less",
    "le",
    "less_equal",
    "gt",
    "greater",
    "ge",
    "greater_equal",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bitwise_and",
    "bitwise_or",
    "bitwise_xor",
    "bitwise_left_shift",
    "bitwise_right_shift",
    "clamp",
    "clip",
    "clamp_min",
    "clamp_max",
    "where",
    "lerp",
    "addcmul",
    "addcdiv",
    "nan_to_num",
];

const OTHER: &[&str] = &[
    "matmul",
    "mm",
    "bmm",
    "mv",
    "dot",
    "outer",
    "ger",
    "addmm",
    "cat",
    "concat",
    "concatenate",
    "stack",
    "arange",
    "eye",
    "argmax",
    "argmin",
];

/// Reductions that take `out=` only in their overload with a `dim` argument (at position 1).
const WITH_DIM: &[&str] = &["sum", "mean", "amax", "amin", "cumsum", "cumprod", "logsumexp"];

/// How `torch.NAME` writes into `out=`, or `None` if it takes no `out=` (then the argument is unexpected).
/// `has_dim` says whether the call passes a `dim` (positionally or by keyword), `binary` whether its second
/// positional argument is a tensor (`torch.max(a, b, out=a)` is `maximum`).
pub fn out_kind(name: &str, has_dim: bool, binary: bool) -> Option<OutKind> {
    if ELEMENTWISE.contains(&name) || (matches!(name, "max" | "min") && binary) {
        Some(OutKind::Elementwise)
    } else if OTHER.contains(&name) || (WITH_DIM.contains(&name) && has_dim) {
        Some(OutKind::Other)
    } else {
        None
    }
}

/// Checks that a result of `dtype` and `shape` can be written into `out` (of `out_dtype`, `out_shape`) by `name`.
pub fn check_out(
    name: &str,
    kind: OutKind,
    dtype: DType,
    shape: &[usize],
    out_dtype: DType,
    out_shape: &[usize],
) -> Result<(), String> {
    match kind {
        OutKind::Elementwise if !out_dtype.can_cast_from(dtype) => {
            return Err(format!(
                "result type {} can't be cast to the desired output type {}",
                dtype.name(),
                out_dtype.name()
            ))
        }
        OutKind::Other if out_dtype != dtype => {
            return Err(format!(
                "{name}(): expected out= to have dtype {} (the result's), but got {}",
                dtype.name(),
                out_dtype.name()
            ))
        }
        _ => {}
    }
    if shape != out_shape {
        return Err(format!(
            "{name}(): out= has shape {} but the result has shape {}; resizing out= is not supported (it changes a tensor's shape in place), pass an out of the result's shape or assign the result instead",
            fmt_shape(out_shape),
            fmt_shape(shape)
        ));
    }
    Ok(())
}

/// Whether `out=` may be exactly (the same view of) an input of the non-elementwise op `name`: the scans, whose
/// element `i` reads input elements up to `i` only, which PyTorch's kernel reads before it writes element `i`, so
/// the result is the scan of the old values (vLLM's sampler writes `torch.cumsum(p, dim=-1, out=p)`). Any other
/// overlap stays refused.
pub fn out_may_be_input(name: &str) -> bool {
    matches!(name, "cumsum" | "cumprod")
}

/// The error for an `out=` that overlaps an input of a non-elementwise op.
pub fn overlap_error(name: &str) -> String {
    format!("{name}(): out= overlaps an input, which is not supported; clone() the input first")
}
