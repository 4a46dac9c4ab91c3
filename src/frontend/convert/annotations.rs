//! Type annotations: `f32[64, 512]`, `int`, `tuple[...]`; what a helper writes for itself (`Tensor`,
//! `Optional[...]`, `float | None`) is opaque.

use ruff_python_ast as py;

use super::Cx;
use crate::diag::{err, Diagnostic};
use crate::frontend::ast::TypeAnn;
use crate::tensor::DType;

impl Cx {
    pub(super) fn annotation(&self, e: &py::Expr) -> Result<TypeAnn, Diagnostic> {
        let span = self.sp(e);
        match e {
            py::Expr::Name(n) => match n.id.as_str() {
                "int" => Ok(TypeAnn::Int),
                "float" => Ok(TypeAnn::Float),
                "bool" => Ok(TypeAnn::Bool),
                "Tensor" | "str" | "Any" | "list" | "dict" | "tuple" => Ok(TypeAnn::Opaque),
                d if DType::from_annotation(d).is_some() => err(
                    span,
                    format!("tensor annotation `{d}` needs a shape, e.g. `{d}[4, 8]` (or `{d}[()]` for 0-dim)"),
                ),
                // A class the file or a library defines (`model: Module`, `config: LlamaConfig`): a helper's
                // annotation is read by nobody here; a program's parameters need a tensor or number annotation.
                other if !dtype_like(other) => Ok(TypeAnn::Opaque),
                other => err(span, format!("unsupported annotation `{other}`")),
            },
            py::Expr::Attribute(_) => Ok(TypeAnn::Opaque),
            // `float | None`: a helper's union, read by nobody here (a program's parameters need one type).
            py::Expr::BinOp(b) if matches!(b.op, py::Operator::BitOr) => {
                self.annotation(&b.left)?;
                self.annotation(&b.right)?;
                Ok(TypeAnn::Opaque)
            }
            py::Expr::NoneLiteral(_) => Ok(TypeAnn::Tuple(vec![])),
            py::Expr::Subscript(s) => {
                let base = match s.value.as_ref() {
                    py::Expr::Name(n) => n.id.to_string(),
                    _ => return err(span, "unsupported annotation"),
                };
                let items: Vec<&py::Expr> = match s.slice.as_ref() {
                    py::Expr::Tuple(t) => t.elts.iter().collect(),
                    other => vec![other],
                };
                if let Some(dtype) = DType::from_annotation(&base) {
                    let mut shape = Vec::new();
                    for it in items {
                        match it {
                            py::Expr::NumberLiteral(py::ExprNumberLiteral { value: py::Number::Int(i), .. }) => {
                                match i.as_u64() {
                                    Some(v) => shape.push(v as usize),
                                    None => return err(self.sp(it), "tensor dimension must be a non-negative integer"),
                                }
                            }
                            _ => {
                                return err(
                                    self.sp(it),
                                    "tensor dimension must be an integer literal (static shapes only)",
                                )
                            }
                        }
                    }
                    return Ok(TypeAnn::Tensor { dtype, shape });
                }
                match base.as_str() {
                    "tuple" | "Tuple" => {
                        let mut elems = Vec::new();
                        for it in items {
                            if matches!(it, py::Expr::EllipsisLiteral(_)) {
                                return Ok(TypeAnn::Opaque);
                            }
                            elems.push(self.annotation(it)?);
                        }
                        Ok(TypeAnn::Tuple(elems))
                    }
                    "list" | "List" | "Optional" | "Union" | "dict" | "Dict" | "Sequence" => Ok(TypeAnn::Opaque),
                    // `Callable[...]`, `Iterable[...]`, `Mapping[...]`, a generic class: opaque, as above.
                    other if !dtype_like(other) => Ok(TypeAnn::Opaque),
                    other => err(span, format!("unsupported annotation `{other}[...]`; tensors are written like `f32[4, 8]` with dtype f32, f64, f16, bf16, i64, i32 or bool")),
                }
            }
            // A forward reference (`"LlamaConfig"`), as `from __future__ import annotations` makes every annotation.
            py::Expr::StringLiteral(_) => Ok(TypeAnn::Opaque),
            _ => err(span, "unsupported annotation"),
        }
    }
}

/// Whether a name looks like a tensor dtype (`f32`, `i64`, `u8`, ...) that is not one: a typo, better reported.
fn dtype_like(name: &str) -> bool {
    let mut c = name.chars();
    matches!(c.next(), Some('f' | 'i' | 'u' | 'b')) && name.len() > 1 && c.all(|c| c.is_ascii_digit())
}
