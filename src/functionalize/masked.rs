//! Boolean-mask selections (`y[m]`, [`FV::Masked`]) used where the result does not depend on how many elements
//! were selected: elementwise arithmetic between selections made with one mask over views of one shape and Python
//! numbers (`(b[m] - a[m]) * (d[m] - c[m])`, fvcore's GIoU loss), elementwise unary ops, and `sum`/`mean` of a
//! selection. The arithmetic runs over the whole views and stays a selection, which `x[m] = ...` (a predicated
//! select, `subscript`) or a reduction consumes: at the selected positions the values are the selection's, and the
//! other positions are never read. Ops that can raise on some value (integer floor division, remainder and powers)
//! are refused: over the whole view they could raise where the selection would not.

use super::state::{diag, masked_use, FR, FV};
use super::Fz;
use crate::diag::Span;

use crate::frontend::ast::{BinOp, Expr, ExprKind};
use crate::ir::OpName;
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// What a selection holds: the selected-from value, the mask's value, the view's shape, the mask's position and
/// where the selection was made.
pub(super) type Sel = (super::state::TId, super::state::TId, Vec<usize>, usize, Span);

impl<'m> Fz<'m> {
    /// `op` over `args`, at least one of them a selection (see the module doc).
    pub(super) fn masked_elementwise(&mut self, op: Binary, args: &[FV], span: Span) -> FR<FV> {
        let mut first: Option<Sel> = None;
        let mut whole = Vec::with_capacity(args.len());
        for a in args {
            match a {
                FV::Masked(sel) => {
                    let (src, m, shape, pos, _) = sel.as_ref();
                    match &first {
                        None => first = Some(sel.as_ref().clone()),
                        Some(f) if f.1 == *m && f.2 == *shape && f.3 == *pos => {}
                        Some(_) => return masked_use(a),
                    }
                    whole.push(FV::Tensor(self.fresh(*src, None, span)?));
                }
                // A tensor broadcast against a selection's data-dependent length: not expressible.
                FV::Tensor(_) => return masked_use(args.iter().find(|x| matches!(x, FV::Masked(_))).expect("one")),
                other => whole.push(other.clone()),
            }
        }
        let sel = first.expect("called with a selection");
        let r = self.elementwise(op, &whole, span)?;
        let FV::Tensor(r) = r else { return masked_use(&FV::Masked(Box::new(sel))) };
        if matches!(op, Binary::FloorDiv | Binary::Rem | Binary::Fmod | Binary::Pow)
            && !self.roots[r.root].dtype.is_float()
        {
            return masked_use(&FV::Masked(Box::new(sel)));
        }
        let v = self.read(&r, span)?;
        Ok(FV::Masked(Box::new((v, sel.1, sel.2, sel.3, sel.4))))
    }

    /// `cur op= rhs` where both are selections (`x[m] /= y[m]`): PyTorch updates the copy `x[m]` in place, so the
    /// result keeps `x`'s dtype, and a result type it cannot be cast to is PyTorch's error.
    pub(super) fn masked_update(&mut self, cur: &FV, op: BinOp, rhs: &FV, dt: DType, span: Span) -> FR<FV> {
        let Some(bin) = op.elementwise() else {
            return masked_use(rhs);
        };
        let FV::Masked(r) = self.masked_elementwise(bin, &[cur.clone(), rhs.clone()], span)? else {
            return masked_use(rhs);
        };
        let (v, m, shape, pos, at) = *r;
        let (rd, _) = self.tensor_ty(v, span)?;
        if !dt.can_cast_from(rd) {
            return diag(
                span,
                format!("result type {} can't be cast to the desired output type {}", rd.name(), dt.name()),
            );
        }
        let v = self.cast(v, dt, span)?;
        Ok(FV::Masked(Box::new((v, m, shape, pos, at))))
    }

    /// A call given a selection `m` among its arguments: `torch.exp(y[m])`, `torch.sum(y[m])` where `masked_call`
    /// supports it, else the refusal located at the selection.
    pub(super) fn torch_call_on_masked(
        &mut self,
        env: &mut super::Env,
        func: &'m Expr,
        pos: &[FV],
        kw: &[(String, FV)],
        m: FV,
        span: Span,
    ) -> FR<FV> {
        if let (ExprKind::Attr(obj, name), Some(FV::Masked(sel))) = (&func.kind, pos.first()) {
            if matches!(self.expr(env, obj)?, FV::Module("torch")) {
                let sel = sel.as_ref().clone();
                if let Some(r) = self.masked_call(name, &sel, &pos[1..], kw, span)? {
                    return Ok(r);
                }
            }
        }
        masked_use(&m)
    }

    /// `torch.NAME(sel, ...)` or `sel.NAME(...)` for the ops a selection supports: `Some(result)`, else `None`
    /// (the caller refuses, located at the selection).
    pub(super) fn masked_call(
        &mut self,
        name: &str,
        sel: &Sel,
        rest: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        if !rest.is_empty() || !kw.is_empty() {
            return Ok(None);
        }
        let (src, m, shape, pos, at) = sel.clone();
        if let Some(u) = crate::interp::torch_ops::unary_op(name) {
            let x = FV::Tensor(self.fresh(src, None, span)?);
            let FV::Tensor(r) = self.unary(u, &x, span)? else { return Ok(None) };
            let v = self.read(&r, span)?;
            return Ok(Some(FV::Masked(Box::new((v, m, shape, pos, at)))));
        }
        if !matches!(name, "sum" | "mean") {
            return Ok(None);
        }
        let (dt, _) = self.tensor_ty(src, span)?;
        if name == "mean" && !dt.is_float() {
            return Ok(None);
        }
        // The mask broadcast against the view: its dims sit at `pos..`, ones around them.
        let (_, mshape) = self.tensor_ty(m, span)?;
        let mut bshape = vec![1; shape.len()];
        bshape[pos..pos + mshape.len()].copy_from_slice(&mshape);
        let mb = self.reshape_value(m, &bshape, span)?;
        let zero = self.full(&[], dt, crate::tensor::Scalar::I(0)).map_err(Self::tyerr(span))?;
        let (mt, st, zt) = (self.t.at(mb), self.t.at(src), self.t.at(zero));
        let kept = self.t.op(OpName::Where, vec![mt, st, zt]).map_err(Self::tyerr(span))?;
        let kept = FV::Tensor(self.fresh(kept, None, span)?);
        let total = self.torch("sum", &super::ops::A::new(vec![kept], vec![], span, "sum".into()), true)?;
        if name == "sum" {
            return Ok(Some(total));
        }
        // mean: the sum over the number of selected elements (each true mask element selects every position of the
        // dims before and after the mask's).
        let per: usize = shape[..pos].iter().product::<usize>() * shape[pos + mshape.len()..].iter().product::<usize>();
        let mask = FV::Tensor(self.fresh(m, None, span)?);
        let count = self.torch("sum", &super::ops::A::new(vec![mask], vec![], span, "sum".into()), true)?;
        let count = self.elementwise(Binary::Mul, &[count, FV::Int(per as i64)], span)?;
        let count = match count {
            FV::Tensor(c) => {
                let v = self.read(&c, span)?;
                let v = self.cast(v, dt, span)?;
                FV::Tensor(self.fresh(v, None, span)?)
            }
            other => other,
        };
        Ok(Some(self.elementwise(Binary::Div, &[total, count], span)?))
    }
}
