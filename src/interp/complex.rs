//! Complex tensors, alike in both engines: a complex tensor is held as its real view (`torch.view_as_real`: the same
//! elements with a last dim of 2, real then imaginary part), and each complex op is the real ops on that view that
//! compute it, run through the engine's own calls (so the functional engine records them as terms). llama's rotary
//! embedding (`torch.polar`, `torch.view_as_complex`, a complex product, `torch.view_as_real`) is the code this is
//! for; other uses are refused with what is supported.

use super::pyvalue::{Made, Py, PyValue};
use super::pywalk::{Callee, Walk};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::{BinOp, UnaryOp};
use crate::tensor::DType;

const SUPPORTED: &str = "complex tensors are supported as `torch.polar`, `torch.complex` and `torch.view_as_complex` \
    make them, in `*`, `+`, `-` among them (and `*` by real tensors and numbers), basic and advanced indexing, \
    `reshape`/`view`/`unsqueeze`, `.shape`, `.ndim`, `size()`, `dim()`, `.real`, `.imag`, and `torch.view_as_real`";

/// Refusals of what a complex tensor cannot do here, for the engines' own checks (truth tests, comparisons).
pub fn refusal(what: &str) -> String {
    format!("{what} is not supported: {SUPPORTED}")
}

/// The torch functions that make or take complex tensors.
const TORCH_COMPLEX: &[&str] = &["polar", "view_as_complex", "view_as_real", "complex"];

fn fail<E: From<Diagnostic>>(m: impl Into<String>, span: Span) -> E {
    Diagnostic::new(m).at(span).into()
}

fn unsupported<E: From<Diagnostic>>(what: &str, span: Span) -> E {
    fail(refusal(what), span)
}

fn torch<'m, W: Walk<'m>>(w: &mut W, name: &str, args: Vec<W::V>, span: Span) -> Result<W::V, W::Err> {
    w.call_value(W::V::torch_function(name), args, span, &format!("torch.{name}"))
}

/// Whether a call is one this module answers: a method of a complex tensor, a torch function that makes or takes
/// complex tensors, or a torch function or tensor method given one (refused).
pub fn involves<V: PyValue>(callee: &Callee<'_, V>, pos: &[V], kw: &[(String, V)]) -> bool {
    let Callee::Method(o, name) = callee else { return false };
    o.complex_of().is_some()
        || (matches!(o.py(), Py::Module("torch")) && TORCH_COMPLEX.contains(&name.as_str()))
        || pos.iter().chain(kw.iter().map(|(_, v)| v)).any(|v| v.complex_of().is_some())
}

/// A call [`involves`] accepts.
pub fn call<'m, W: Walk<'m>>(
    w: &mut W,
    callee: &Callee<'_, W::V>,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: Span,
) -> Result<W::V, W::Err> {
    let Callee::Method(o, name) = callee else { unreachable!("`involves` accepts methods only") };
    if let Some(inner) = o.complex_of() {
        return method(w, o, inner.clone(), name, pos, kw, span);
    }
    if !matches!(o.py(), Py::Module("torch")) || !TORCH_COMPLEX.contains(&name.as_str()) {
        return Err(unsupported(&format!("`{name}` of a complex tensor"), span));
    }
    let arg = |i: usize, k: &str| pos.get(i).or_else(|| kw.iter().find(|(n, _)| n == k).map(|(_, v)| v)).cloned();
    let (a, b) = match name.as_str() {
        "polar" => (arg(0, "abs"), arg(1, "angle")),
        "complex" => (arg(0, "real"), arg(1, "imag")),
        _ => (arg(0, "input"), None),
    };
    let Some(a) = a else { return Err(fail(format!("torch.{name}() missing an argument"), span)) };
    match name.as_str() {
        "view_as_real" => {
            a.complex_of().cloned().ok_or_else(|| fail("view_as_real is only supported for complex tensors", span))
        }
        "view_as_complex" => {
            float_dtype(w, &a, name, span)?;
            let shape = shape_of(w, &a, span)?;
            if shape.last() != Some(&2) {
                return Err(fail("Tensor must have a last dimension of size 2", span));
            }
            Ok(W::V::make_complex(a))
        }
        _ => {
            let Some(b) = b else { return Err(fail(format!("torch.{name}() missing an argument"), span)) };
            let (da, db) = (float_dtype(w, &a, name, span)?, float_dtype(w, &b, name, span)?);
            if da != db {
                return Err(fail(
                    format!(
                        "Expected object of scalar type {} but got scalar type {} for second argument",
                        da.name(),
                        db.name()
                    ),
                    span,
                ));
            }
            let (re, im) = if name.as_str() == "polar" {
                let (c, s) = (torch(w, "cos", vec![b.clone()], span)?, torch(w, "sin", vec![b], span)?);
                (w.binop(&a, BinOp::Mul, &c, span)?, w.binop(&a, BinOp::Mul, &s, span)?)
            } else {
                // `torch.complex` broadcasts its parts to one shape.
                let (sa, sb) = (shape_of(w, &a, span)?, shape_of(w, &b, span)?);
                let to = |s: &[i64]| -> Vec<usize> { s.iter().map(|&d| d as usize).collect() };
                let shape =
                    crate::tensor::ops::broadcast_shapes(&to(&sa), &to(&sb)).map_err(|m| fail::<W::Err>(m, span))?;
                let sizes = W::V::make(Made::Tuple(shape.iter().map(|&d| W::V::make(Made::Int(d as i64))).collect()));
                (
                    torch(w, "broadcast_to", vec![a, sizes.clone()], span)?,
                    torch(w, "broadcast_to", vec![b, sizes], span)?,
                )
            };
            join(w, re, im, span)
        }
    }
}

/// The float dtype of a tensor argument (complex tensors are made from float32 or float64 ones only).
fn float_dtype<'m, W: Walk<'m>>(w: &mut W, v: &W::V, name: &str, span: Span) -> Result<DType, W::Err> {
    if !matches!(v.py(), Py::Tensor) {
        return Err(fail(format!("torch.{name}(): expected a tensor, not {}", v.type_name()), span));
    }
    match w.attribute(v, "dtype", span)?.py() {
        Py::DType(d @ (DType::F32 | DType::F64)) => Ok(d),
        Py::DType(d) => Err(fail(
            format!(
                "torch.{name}() of a {} tensor: complex tensors here are made of float32 or float64 parts",
                d.torch_name()
            ),
            span,
        )),
        _ => Err(fail(format!("torch.{name}(): expected a tensor"), span)),
    }
}

/// A tensor's shape, every size known.
fn shape_of<'m, W: Walk<'m>>(w: &mut W, v: &W::V, span: Span) -> Result<Vec<i64>, W::Err> {
    let s = w.attribute(v, "shape", span)?;
    let items = s.items().unwrap_or_default();
    items
        .iter()
        .map(|d| match d.py() {
            Py::Int(i) => Ok(i),
            _ => Err(unsupported("a complex tensor of a size known only at run time", span)),
        })
        .collect()
}

/// The complex tensor of parts `re` and `im`.
fn join<'m, W: Walk<'m>>(w: &mut W, re: W::V, im: W::V, span: Span) -> Result<W::V, W::Err> {
    let parts = W::V::make(Made::List(vec![re, im]));
    Ok(W::V::make_complex(torch(w, "stack", vec![parts, W::V::make(Made::Int(-1))], span)?))
}

/// Part `k` (0 real, 1 imaginary) of a complex tensor's real view: a view, as `.real` and `.imag` are.
fn part<'m, W: Walk<'m>>(w: &mut W, inner: &W::V, k: i64, span: Span) -> Result<W::V, W::Err> {
    let idx = W::V::make(Made::Tuple(vec![W::V::make(Made::Ellipsis), W::V::make(Made::Int(k))]));
    w.getitem(inner, &idx, span)
}

/// `a OP b` where either is complex.
pub fn binop<'m, W: Walk<'m>>(w: &mut W, a: &W::V, op: BinOp, b: &W::V, span: Span) -> Result<W::V, W::Err> {
    let real_operand = |v: &W::V| matches!(v.py(), Py::Tensor | Py::Int(_) | Py::Float | Py::Bool(_));
    match (a.complex_of().cloned(), b.complex_of().cloned(), op) {
        (Some(x), Some(y), BinOp::Mul) => {
            let (ar, ai, br, bi) =
                (part(w, &x, 0, span)?, part(w, &x, 1, span)?, part(w, &y, 0, span)?, part(w, &y, 1, span)?);
            let (rr, ii) = (w.binop(&ar, BinOp::Mul, &br, span)?, w.binop(&ai, BinOp::Mul, &bi, span)?);
            let (ri, ir) = (w.binop(&ar, BinOp::Mul, &bi, span)?, w.binop(&ai, BinOp::Mul, &br, span)?);
            let re = w.binop(&rr, BinOp::Sub, &ii, span)?;
            let im = w.binop(&ri, BinOp::Add, &ir, span)?;
            join(w, re, im, span)
        }
        (Some(x), Some(y), BinOp::Add | BinOp::Sub) => {
            let (ar, ai, br, bi) =
                (part(w, &x, 0, span)?, part(w, &x, 1, span)?, part(w, &y, 0, span)?, part(w, &y, 1, span)?);
            let (re, im) = (w.binop(&ar, op, &br, span)?, w.binop(&ai, op, &bi, span)?);
            join(w, re, im, span)
        }
        // PyTorch makes the real operand a complex one (imaginary part 0) and multiplies in full, which decides
        // infinities and NaNs (inf * 2 has a NaN imaginary part).
        (Some(x), None, BinOp::Mul) if real_operand(b) => real_product(w, &x, b, span),
        (None, Some(x), BinOp::Mul) if real_operand(a) => real_product(w, &x, a, span),
        _ => {
            let other = if a.complex_of().is_some() { b } else { a };
            let other = if other.complex_of().is_some() { "complex tensor" } else { other.type_name() };
            Err(unsupported(&format!("`{}` of a complex tensor and a {other}", op.symbol()), span))
        }
    }
}

/// `c * r` for a real tensor or number `r`, as `c * complex(r, 0)`.
fn real_product<'m, W: Walk<'m>>(w: &mut W, x: &W::V, r: &W::V, span: Span) -> Result<W::V, W::Err> {
    let (xr, xi) = (part(w, x, 0, span)?, part(w, x, 1, span)?);
    let zero = W::V::make(Made::Float(0.0));
    let (rr, iz) = (w.binop(&xr, BinOp::Mul, r, span)?, w.binop(&xi, BinOp::Mul, &zero, span)?);
    let (rz, ir) = (w.binop(&xr, BinOp::Mul, &zero, span)?, w.binop(&xi, BinOp::Mul, r, span)?);
    let re = w.binop(&rr, BinOp::Sub, &iz, span)?;
    let im = w.binop(&rz, BinOp::Add, &ir, span)?;
    join(w, re, im, span)
}

/// `-c` (`+c` is `c`).
pub fn unop<'m, W: Walk<'m>>(w: &mut W, op: UnaryOp, v: &W::V, span: Span) -> Result<W::V, W::Err> {
    let inner = v.complex_of().cloned().expect("a complex operand");
    match op {
        UnaryOp::Neg => Ok(W::V::make_complex(w.unop(UnaryOp::Neg, &inner, span)?)),
        UnaryOp::Pos => Ok(v.clone()),
        _ => Err(unsupported("this unary operator on a complex tensor", span)),
    }
}

/// `c[idx]`: the real view indexed alike, its last dim (the parts) kept whole.
pub fn getitem<'m, W: Walk<'m>>(w: &mut W, c: &W::V, idx: &W::V, span: Span) -> Result<W::V, W::Err> {
    let inner = c.complex_of().cloned().expect("a complex tensor");
    let mut items = match idx.py() {
        Py::Tuple(v) => v.to_vec(),
        _ => vec![idx.clone()],
    };
    items.push(W::V::full_slice());
    let r = w.getitem(&inner, &W::V::make(Made::Tuple(items)), span)?;
    Ok(W::V::make_complex(r))
}

/// `c.name`.
pub fn attribute<'m, W: Walk<'m>>(w: &mut W, c: &W::V, name: &str, span: Span) -> Result<W::V, W::Err> {
    let inner = c.complex_of().cloned().expect("a complex tensor");
    match name {
        "shape" => {
            let s = shape_of(w, &inner, span)?;
            Ok(W::V::make(Made::Tuple(s[..s.len() - 1].iter().map(|&d| W::V::make(Made::Int(d))).collect())))
        }
        "ndim" => Ok(W::V::make(Made::Int(shape_of(w, &inner, span)?.len() as i64 - 1))),
        "real" => part(w, &inner, 0, span),
        "imag" => part(w, &inner, 1, span),
        "device" => Ok(W::V::make(Made::Device)),
        _ => Err(unsupported(&format!("`.{name}` of a complex tensor"), span)),
    }
}

/// `c.name(...)`.
fn method<'m, W: Walk<'m>>(
    w: &mut W,
    c: &W::V,
    inner: W::V,
    name: &str,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: Span,
) -> Result<W::V, W::Err> {
    let int = |v: &W::V| match v.py() {
        Py::Int(i) => Ok(i),
        _ => Err(fail::<W::Err>(format!("{name}(): expected an int, not {}", v.type_name()), span)),
    };
    let ndim = shape_of(w, &inner, span)?.len() as i64 - 1;
    match name {
        "reshape" | "view" if kw.is_empty() && !pos.is_empty() => {
            let mut sizes = match (pos.len(), pos[0].items()) {
                (1, Some(items)) => items,
                _ => pos.to_vec(),
            };
            sizes.push(W::V::make(Made::Int(2)));
            let r = torch(w, "reshape", vec![inner, W::V::make(Made::Tuple(sizes))], span)?;
            Ok(W::V::make_complex(r))
        }
        "unsqueeze" if kw.is_empty() && pos.len() == 1 => {
            let d = int(&pos[0])?;
            if d < -(ndim + 1) || d > ndim {
                return Err(fail(
                    format!(
                        "Dimension out of range (expected to be in range of [{}, {ndim}], but got {d})",
                        -(ndim + 1)
                    ),
                    span,
                ));
            }
            let d = if d < 0 { d - 1 } else { d };
            Ok(W::V::make_complex(torch(w, "unsqueeze", vec![inner, W::V::make(Made::Int(d))], span)?))
        }
        "size" | "dim" | "ndimension" if kw.is_empty() => {
            let shape = attribute(w, c, "shape", span)?;
            match (name, pos) {
                ("size", []) => Ok(shape),
                ("size", [i]) => {
                    let i = int(i)?;
                    let k = if i < 0 { i + ndim } else { i };
                    if k < 0 || k >= ndim {
                        return Err(fail(
                            format!(
                                "Dimension out of range (expected to be in range of [{}, {}], but got {i})",
                                -ndim,
                                ndim - 1
                            ),
                            span,
                        ));
                    }
                    Ok(shape.items().expect("a shape is a tuple")[k as usize].clone())
                }
                (_, []) => Ok(W::V::make(Made::Int(ndim))),
                _ => Err(unsupported(&format!("`{name}` with these arguments"), span)),
            }
        }
        // Programs run on the CPU: moving there changes nothing (a dtype is refused: no conversion is kept).
        "to" | "cpu"
            if pos.iter().chain(kw.iter().map(|(_, v)| v)).all(|v| match v.py() {
                Py::Device => true,
                Py::Str(s) => s.as_ref() == "cpu",
                _ => false,
            }) =>
        {
            Ok(c.clone())
        }
        "mul" if kw.is_empty() && pos.len() == 1 => binop(w, c, BinOp::Mul, &pos[0], span),
        _ => Err(unsupported(&format!("`.{name}()` of a complex tensor"), span)),
    }
}
