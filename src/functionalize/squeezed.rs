//! `.squeeze()` without a dim of a selection of data-dependent length ([`FV::Squeezed`]): mmdetection's assigners
//! write `pos_inds = torch.nonzero(gt_inds > 0, as_tuple=False).squeeze()` and then `labels[pos_inds] =
//! gt_labels[gt_inds[pos_inds] - 1]`. PyTorch's result is `[n]` unless exactly one element is selected, when it is
//! 0-d: its rank depends on the data. It is the selection with its size-one dims dropped, marked so, and usable
//! only where the two ranks give the same elements: as an index (reading or writing; one element read through a
//! 0-d index loses the dim the list gives, which the mark keeps on the result), in elementwise arithmetic with
//! numbers and selections marked the same way, in pointwise methods and casts, in `numel()` and in whole `sum()`
//! or `mean()`. Everything else (its shape, `len`, `cat`, reductions along a dim, returning it...) is refused,
//! located where it was squeezed.

use std::rc::Rc;

use super::state::{diag, Sel, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::frontend::ast::{BinOp, CmpOp};

/// Methods a marked selection takes without arguments, elementwise (besides the unary ops).
const POINTWISE: &[&str] = &["float", "double", "long", "int", "bool", "clone", "detach", "contiguous"];
/// Methods a marked selection takes with numbers as arguments, elementwise.
const WITH_NUMBERS: &[&str] = &[
    "clamp",
    "clamp_min",
    "clamp_max",
    "clip",
    "add",
    "sub",
    "mul",
    "div",
    "eq",
    "ne",
    "gt",
    "ge",
    "lt",
    "le",
    "pow",
    "fmod",
    "remainder",
];

/// The refusal of a marked selection used where its data-dependent rank shows (see the module doc).
pub(super) fn squeezed_use<T>(sel: &Sel) -> FR<T> {
    diag(
        sel.at,
        "`.squeeze()` without a dim of an index list or selection of data-dependent length gives a 0-d tensor where \
         exactly one element is selected, so its rank depends on the data: the functional and optimized engines \
         take it only as an index, in elementwise arithmetic with numbers, in pointwise methods, `numel()` and \
         whole `sum()`/`mean()` (the reference engine runs it); squeeze a given dim instead (`.squeeze(1)`)",
    )
}

/// A marked selection in `v` (itself, or in a tuple, list or dict), if any.
pub(super) fn find_squeezed(v: &FV) -> Option<Sel> {
    super::state::find_in(v, &|x| matches!(x, FV::Squeezed(_)), &mut Vec::new()).and_then(|x| find_one(&x))
}

/// A marked selection as the selection it marks; any other value as itself.
fn unmarked(v: &FV) -> FV {
    match v {
        FV::Squeezed(s) => FV::Masked(s.clone()),
        other => other.clone(),
    }
}

/// A result computed from marked selections, marked again where it is a selection (by the same mask).
fn marked(r: FV) -> FV {
    match r {
        FV::Masked(s) => FV::Squeezed(s),
        other => other,
    }
}

impl<'m> Fz<'m> {
    /// `sel.squeeze()`: the selection with the size-one dims around its selected dim dropped, marked.
    pub(super) fn squeeze_selection(&mut self, sel: &Sel, span: Span) -> FR<FV> {
        let (mshape, _) = self.sel_dims(sel, span)?;
        let x = self.fresh(sel.src, None, span)?;
        let mask_dims = sel.pos..sel.pos + mshape.len();
        let dims: Vec<i64> =
            (0..x.shape.len()).filter(|d| !mask_dims.contains(d) && x.shape[*d] == 1).map(|d| d as i64).collect();
        let pos = sel.pos - dims.iter().filter(|&&d| (d as usize) < sel.pos).count();
        let r = self.view_fv(&x, span, |t| t.squeeze(Some(&dims)))?;
        match self.reselect(sel, &r, pos, true, span)? {
            Some(FV::Masked(s)) => Ok(FV::Squeezed(s)),
            _ => squeezed_use(sel),
        }
    }

    /// A method of a marked selection (see the module doc).
    pub(super) fn squeezed_call(
        &mut self,
        name: &str,
        sel: &Sel,
        rest: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<FV> {
        let numbers = |vs: &[FV]| vs.iter().all(|v| matches!(v, FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::None));
        let to_dtype = name == "to" && kw.is_empty() && matches!(rest, [FV::DType(_)]);
        let ok = match (name, rest.is_empty() && kw.is_empty()) {
            ("numel" | "nelement" | "sum" | "mean", true) => true,
            (_, true) => crate::interp::torch_ops::unary_op(name).is_some() || POINTWISE.contains(&name),
            _ => {
                to_dtype
                    || (WITH_NUMBERS.contains(&name)
                        && numbers(rest)
                        && kw
                            .iter()
                            .all(|(k, v)| matches!(k.as_str(), "min" | "max" | "alpha") && numbers(&[v.clone()])))
            }
        };
        if !ok {
            return squeezed_use(sel);
        }
        match self.masked_call(name, sel, rest, kw, span)? {
            Some(r) => Ok(marked(r)),
            None => squeezed_use(sel),
        }
    }

    /// `a OP b` where one is marked: with numbers (or 0-d tensors) and selections marked by the same mask.
    pub(super) fn squeezed_binop(&mut self, a: &FV, op: BinOp, b: &FV, span: Span) -> FR<Option<FV>> {
        let Some((x, y)) = self.unmarked_operands(a, b, op == BinOp::MatMul)? else { return Ok(None) };
        Ok(Some(marked(self.binop(&x, op, &y, span)?)))
    }

    /// `a < b` (and the other comparisons) where one is marked, as [`Self::squeezed_binop`].
    pub(super) fn squeezed_compare(&mut self, a: &FV, op: CmpOp, b: &FV, span: Span) -> FR<Option<FV>> {
        let Some((x, y)) = self.unmarked_operands(a, b, false)? else { return Ok(None) };
        Ok(Some(marked(self.compare(&x, op, &y, span)?)))
    }

    /// The operands of an elementwise op where one is marked, each selection as itself (`None` where neither is):
    /// the other must be a number, a 0-d tensor or a selection marked by the same mask; `refused` refuses anyway.
    fn unmarked_operands(&mut self, a: &FV, b: &FV, refused: bool) -> FR<Option<(FV, FV)>> {
        let (sa, sb) = (find_one(a), find_one(b));
        let Some(sel) = sa.clone().or(sb.clone()) else { return Ok(None) };
        let plain = |v: &FV| match v {
            FV::Squeezed(_) => Some(unmarked(v)),
            FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynInt(_) | FV::DynFloat(_) | FV::DynBool(_) => {
                Some(v.clone())
            }
            FV::Tensor(t) if t.shape.is_empty() => Some(v.clone()),
            _ => None,
        };
        let same_mask = [&sa, &sb].iter().all(|s| s.as_ref().is_none_or(|s| s.mask == sel.mask));
        let (Some(x), Some(y), true, false) = (plain(a), plain(b), same_mask, refused) else {
            return squeezed_use(&sel);
        };
        Ok(Some((x, y)))
    }

    /// `x[p] op= v`: the gathered copy `sel` updated as a selection is (keeping its dtype), marked.
    pub(super) fn squeezed_update(&mut self, sel: &Sel, op: BinOp, v: &FV, span: Span) -> FR<FV> {
        let v = match v {
            FV::Squeezed(s) if s.mask != sel.mask => return squeezed_use(sel),
            FV::Masked(_) => return squeezed_use(sel),
            other => unmarked(other),
        };
        let (dt, _) = self.tensor_ty(sel.src, span)?;
        let r = self.masked_update(&FV::Masked(Box::new(sel.clone())), op, &v, dt, span)?;
        Ok(marked(r))
    }

    /// An index holding marked selections, each made a selection again, for `x[i]` and `x[i] = v`: every selection
    /// among its items must be marked, and no other index tensor may have dims (a 0-d list next to one would
    /// broadcast otherwise than `[n]` does). `None` where it holds none.
    pub(super) fn unsqueezed_index(&mut self, idx: &FV) -> FR<Option<FV>> {
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let Some(sel) = items.iter().find_map(find_one) else { return Ok(None) };
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            match it {
                FV::Squeezed(s) => out.push(FV::Masked(s)),
                FV::Masked(_) => return squeezed_use(&sel),
                FV::Tensor(t) if !t.shape.is_empty() => return squeezed_use(&sel),
                other => out.push(other),
            }
        }
        Ok(Some(FV::Tuple(Rc::new(out))))
    }

    /// `x[i]` with marked selections in the index: the gather of the selections, marked.
    pub(super) fn squeezed_getitem(&mut self, t: &super::state::TRef, idx: &FV, span: Span) -> FR<Option<FV>> {
        let Some(idx) = self.unsqueezed_index(idx)? else { return Ok(None) };
        match self.masked_index_read(t, &idx, span)? {
            Some(r) => Ok(Some(marked(r))),
            None => Ok(None),
        }
    }

    /// `x[i] = v` with marked selections in the index (and maybe the value).
    pub(super) fn squeezed_setitem(&mut self, t: &super::state::TRef, idx: &FV, v: &FV, span: Span) -> FR<Option<()>> {
        let Some(idx) = self.unsqueezed_index(idx)? else { return Ok(None) };
        self.masked_index_write(t, &idx, &unmarked(v), span)
    }
}

/// The marked selection `v` is, if it is one.
fn find_one(v: &FV) -> Option<Sel> {
    match v {
        FV::Squeezed(s) => Some(s.as_ref().clone()),
        _ => None,
    }
}
