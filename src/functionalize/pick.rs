//! Picking from a Python list, tuple or dict by an int known only when the program runs: DoLa's
//! `layers[int(js_divs.argmax().item())]`, then `logits_by_layer[layer]`. Outside loops nothing would unroll to make
//! the int known, so the pick is a choice made when the program runs: one condition per entry (the int equals its
//! index or key), a check that one of them holds (Python's `IndexError`/`KeyError`), and the entries chosen by them
//! (numbers as a run-time number, tensors of one shape and dtype as a conditional view, so that a write through the
//! result writes into the tensor picked, as in Python). Inside a loop the loop is unrolled instead, where a loop
//! variable is known.

use std::rc::Rc;

use super::expr::binop_name;
use super::state::{needs_static, TId, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::tensor::ops::Binary;
use crate::tensor::{DType, Scalar};

impl<'m> Fz<'m> {
    /// `items[idx]` of a list or tuple with a run-time int `idx` (negative indices count from the end).
    pub(super) fn pick_item(&mut self, items: &[FV], idx: &FV, span: Span) -> FR<FV> {
        let n = items.len() as i64;
        let entries: Vec<(Vec<i64>, FV)> =
            items.iter().enumerate().map(|(k, v)| (vec![k as i64, k as i64 - n], v.clone())).collect();
        self.pick(
            &entries,
            idx,
            "indexing a Python sequence with an integer known only when the program runs (a loop variable, `.item()`)",
            span,
        )
    }

    /// `d[idx]` of a dict with a run-time int `idx`: only its int, bool and integral float keys can equal it.
    pub(super) fn pick_entry(&mut self, d: &[(FV, FV)], idx: &FV, span: Span) -> FR<FV> {
        let entries: Vec<(Vec<i64>, FV)> = d
            .iter()
            .filter_map(|(k, v)| match k {
                FV::Int(i) => Some((vec![*i], v.clone())),
                FV::Bool(b) => Some((vec![i64::from(*b)], v.clone())),
                // `1.0 == 1` in Python, and so are their hashes.
                FV::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Some((vec![*f as i64], v.clone())),
                _ => None,
            })
            .collect();
        let refusal =
            "a dict looked up by an int known only when the program runs, in a loop, or whose values are not \
                       all numbers of one kind or all tensors of one shape and dtype";
        self.pick(&entries, idx, refusal, span)
    }

    /// The entry whose keys hold the run-time int `idx`, under a check that one does; `refusal` where the entries are
    /// neither all numbers nor all tensors of one shape and dtype, or in a loop (which unrolls).
    fn pick(&mut self, entries: &[(Vec<i64>, FV)], idx: &FV, refusal: &str, span: Span) -> FR<FV> {
        let values: Vec<&FV> = entries.iter().map(|(_, v)| v).collect();
        let kind = self.pick_kind(&values);
        let Some(kind) = kind.filter(|_| self.t.frames.is_empty() && !entries.is_empty()) else {
            return needs_static(span, refusal);
        };
        let (i, _) = self.scalar_tensor(idx, Some(DType::I64), span)?;
        let mut conds = Vec::new();
        for (keys, _) in entries {
            let mut c: Option<TId> = None;
            for &k in keys {
                let key = self.full(&[], DType::I64, Scalar::I(k)).map_err(Self::tyerr(span))?;
                let (a, b) = (self.t.at(i), self.t.at(key));
                let eq = self.t.op(binop_name(Binary::Eq), vec![a, b]).map_err(Self::tyerr(span))?;
                c = Some(match c {
                    None => eq,
                    Some(c) => self.or(c, eq, span)?,
                });
            }
            conds.push(c.expect("every entry has a key"));
        }
        let mut any = conds[0];
        for &c in &conds[1..] {
            any = self.or(any, c, span)?;
        }
        self.runtime_assert(any, span)?;
        let last = entries.len() - 1;
        match kind {
            None => {
                // Tensors: the last entry unless an earlier one's condition holds.
                let FV::Tensor(mut best) = entries[last].1.clone() else { unreachable!("all tensors") };
                for k in (0..last).rev() {
                    let FV::Tensor(t) = &entries[k].1 else { unreachable!("all tensors") };
                    best = TRef { alt: Some(Rc::new((conds[k], best))), ..t.clone() };
                }
                Ok(FV::Tensor(best))
            }
            Some(d) => {
                let mut best = self.scalar_tensor(&entries[last].1, Some(d), span)?.0;
                for k in (0..last).rev() {
                    let v = self.scalar_tensor(&entries[k].1, Some(d), span)?.0;
                    let (c, v, b) = (self.t.at(conds[k]), self.t.at(v), self.t.at(best));
                    best = self.t.op(crate::ir::OpName::Where, vec![c, v, b]).map_err(Self::tyerr(span))?;
                }
                match d {
                    DType::I64 => self.run_time_int(best, span),
                    DType::Bool => Ok(FV::DynBool(best)),
                    _ => Ok(FV::DynFloat(best)),
                }
            }
        }
    }

    /// What a pick from `values` gives: `Some(None)` a tensor (all are tensors of one shape and dtype, none itself
    /// chosen by an `if`), `Some(Some(dtype))` a number of that dtype (all are numbers of one kind), `None` neither.
    fn pick_kind(&self, values: &[&FV]) -> Option<Option<DType>> {
        // Numbers of one kind only: a pick of an int or a float by data would be a value whose type the data decides.
        if values.iter().all(|v| matches!(v, FV::Bool(_) | FV::DynBool(_))) {
            return Some(Some(DType::Bool));
        }
        if values.iter().all(|v| matches!(v, FV::Int(_) | FV::DynInt(_))) {
            return Some(Some(DType::I64));
        }
        if values.iter().all(|v| matches!(v, FV::Float(_) | FV::DynFloat(_))) {
            return Some(Some(DType::F64));
        }
        let FV::Tensor(first) = values.first()? else { return None };
        let ty = |t: &TRef| (self.roots[t.root].dtype, t.shape.clone());
        values.iter().all(|v| matches!(v, FV::Tensor(t) if t.alt.is_none() && ty(t) == ty(first))).then_some(None)
    }

    fn or(&mut self, a: TId, b: TId, span: Span) -> FR<TId> {
        let (a, b) = (self.t.at(a), self.t.at(b));
        self.t.op(binop_name(Binary::BitOr), vec![a, b]).map_err(Self::tyerr(span))
    }
}
