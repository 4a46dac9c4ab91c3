//! Values that are a Python number or a 0-d tensor depending on the data: a name bound to a number in one arm of an
//! `if` on a run-time value and to a 0-d tensor in the other (pytorch-lamb's `trust_ratio = 1 if ... else w / g`),
//! or Python's `min`/`max` of 0-d tensors and numbers (FAdam's `min(rms, 1)`). Such a value is a 0-d tensor here,
//! its root marked with the number's kind (`Root::number`). A Python number and a 0-d tensor promote differently
//! (`idx_i64 * 2` is int64, `idx_i64 * tensor(2.0)` float32), so every elementwise op over such a value checks that
//! its result has one dtype whichever it is, and refuses otherwise; a result that would be a Python number again
//! (`-lr * trust_ratio`) carries the mark on. Also the other way: a 0-d integer tensor's value as a Python int known
//! only at run time (`run_time_int`), the `i + n` of one and a constant kept affine.

use super::ops::err;
use super::state::{diag, Affine, Sym, TIdKey, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Kind, Scalar};

/// The kind of a Python number (known now or at run time).
pub(super) fn number_kind(n: &FV) -> Kind {
    match n {
        FV::Bool(_) | FV::DynBool(_) => Kind::Bool,
        FV::Int(_) | FV::DynInt(_) => Kind::Int,
        _ => Kind::Float,
    }
}

impl<'m> Fz<'m> {
    /// The number kind a tensor operand may stand for (any of its choices, for a conditional view).
    fn stands_for(&self, a: &FV) -> Option<Kind> {
        match a {
            FV::Tensor(t) => t.choices().iter().find_map(|c| self.roots[c.root].number),
            _ => None,
        }
    }

    /// For `op` over `args` (`operands` their stand-ins, `out` the result dtype with every operand a tensor): where
    /// an operand may stand for a Python number, refuses a result dtype that depends on which it is; `Some(kind)`
    /// where every tensor operand may be such a number, so the result is one too (of that kind).
    pub(super) fn check_number_or_tensor(
        &self,
        op: Binary,
        args: &[FV],
        operands: &[Operand],
        out: DType,
        span: Span,
    ) -> FR<Option<Kind>> {
        let kinds: Vec<Option<Kind>> = args.iter().map(|a| self.stands_for(a)).collect();
        if kinds.iter().all(Option::is_none) {
            return Ok(None);
        }
        let others = args.iter().zip(&kinds).any(|(a, k)| matches!(a, FV::Tensor(_)) && k.is_none());
        if !others {
            let most = kinds.iter().zip(args).map(|(k, a)| k.unwrap_or_else(|| number_kind(a))).max();
            return Ok(Some(match (out, most) {
                (DType::Bool, _) => Kind::Bool,
                (_, Some(Kind::Float)) => Kind::Float,
                _ if op == Binary::Div => Kind::Float,
                _ => Kind::Int,
            }));
        }
        let as_numbers: Vec<Operand> = operands
            .iter()
            .zip(&kinds)
            .map(|(o, k)| match k {
                Some(Kind::Bool) => Operand::S(Scalar::B(false)),
                Some(Kind::Int) => Operand::S(Scalar::I(0)),
                Some(Kind::Float) => Operand::S(Scalar::F(0.0)),
                None => o.clone(),
            })
            .collect();
        let refs: Vec<&Operand> = as_numbers.iter().collect();
        let other = if refs.len() == 2 {
            ops::binary_dtypes(op, refs[0], refs[1]).map(|(_, o)| o).map_err(|m| diag::<()>(span, m).unwrap_err())?
        } else {
            ops::result_type(&refs)
        };
        if other != out {
            return diag(
                span,
                format!(
                    "an operand is a Python number or a 0-d tensor depending on the data (bound so by an `if` on a \
                     run-time value, or picked by `min`/`max`), and the result's dtype would differ: {} with the \
                     number, {} with the tensor",
                    other.name(),
                    out.name()
                ),
            );
        }
        Ok(None)
    }
}

impl<'m> Fz<'m> {
    /// The Python int a 0-d integer tensor term holds when the program runs.
    pub(super) fn run_time_int(&mut self, v: super::state::TId, span: Span) -> FR<FV> {
        if let Some(Scalar::I(i)) = self.constant_scalar(v) {
            return Ok(FV::Int(i));
        }
        // `i + n`, `i - n`, `n + i` of an integer term `i` and a constant `n` (TransformerEngine's staggered
        // `freqs[i : i + n] for i in start_positions`): `i`'s run-time int plus `n`, so that a slice between them
        // has a static length.
        let at = |id| super::state::TId { id, depth: v.depth };
        if let Node::Op(op @ (OpName::Add | OpName::Sub), args) = self.t.b.node(v.id).clone() {
            if let [a, b] = args.as_slice() {
                let (ca, cb) = (self.constant_scalar(at(*a)), self.constant_scalar(at(*b)));
                let var_and_constant = match (ca, cb, op) {
                    (None, Some(Scalar::I(c)), OpName::Sub) => Some((*a, -c)),
                    (None, Some(Scalar::I(c)), _) => Some((*a, c)),
                    (Some(Scalar::I(c)), None, OpName::Add) => Some((*b, c)),
                    _ => None,
                };
                if let Some((var, c)) = var_and_constant {
                    let (dt, shape) = self.tensor_ty(at(var), span)?;
                    if shape.is_empty() && !dt.is_float() && dt != DType::Bool {
                        if let FV::DynInt(x) = self.run_time_int(at(var), span)? {
                            return Ok(FV::DynInt(x.add(&Affine::constant(c))));
                        }
                    }
                }
            }
        }
        let x = self.t.at(v);
        let e = self.t.op(OpName::ToInt, vec![x]).map_err(err(span))?;
        Ok(FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(e)))))
    }
}
