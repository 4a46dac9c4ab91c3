//! Writes and in-place updates at the index lists of `torch.where(condition)` (see `selections.rs`): `index_add_`
//! and `index_put_` at them, `x[i, ...] = v` and `x[i] op= v`, and in-place ops on a gathered selection bound to a
//! name. Each computes at every position of the condition: additions add `-0.0` (integer 0) where it does not hold,
//! and writes go to one extra row, dropped after.

use super::ops::{err, A};
use super::selections::Sel;
use super::state::{diag, masked_use, TId, TRef, FR, FV};
use super::Env;
use super::Fz;
use crate::diag::Span;
use crate::frontend::ast::{Expr, ExprKind};
use crate::ir::OpName;
use crate::tensor::ops::Binary;
use crate::tensor::views::wrap_dim;
use crate::tensor::{DType, Scalar};
use std::rc::Rc;

impl<'m> Fz<'m> {
    /// `x.index_add_(dim, index, source)` (or `index_add`, `torch.index_add`) with an index list of data-dependent
    /// length and a source selected by the same mask: every position of the mask adds its row, those where the
    /// mask does not hold add `-0.0` (0 for integers) to row 0.
    pub(super) fn masked_index_add(
        &mut self,
        name: &str,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let a = A::new(pos.to_vec(), kw.to_vec(), span, name.into());
        let (Ok(FV::Tensor(x)), Ok(FV::Masked(ix)), Ok(FV::Masked(src))) =
            (a.req(0, "input").cloned(), a.req(2, "index").cloned(), a.req(3, "source").cloned())
        else {
            return Ok(None);
        };
        let d = wrap_dim(a.int(1, "dim")?, x.shape.len().max(1)).map_err(err(span))?;
        let (mshape, after) = self.sel_dims(&ix, span)?;
        let (_, safter) = self.sel_dims(&src, span)?;
        if ix.pos != 0 || after != 0 || src.mask != ix.mask || src.pos != d || safter + d + 1 != x.shape.len().max(1) {
            return diag(
                span,
                "index_add_ with an index list of data-dependent length takes a source selected by the same mask, \
                 its selected dim at `dim`: otherwise their lengths match only depending on the data",
            );
        }
        if x.shape.get(d).is_some_and(|&n| n == 0) {
            return diag(span, "an index list of data-dependent length into a dim of size 0");
        }
        // A float source is scaled first (PyTorch adds `alpha * source`), so that the other positions add -0.0; an
        // integer one takes `alpha` as PyTorch does (cast to an integer).
        let mut s = FV::Masked(src);
        let mut alpha = a.opt(4, "alpha").cloned();
        let (sd, _) = if let FV::Masked(m) = &s { self.tensor_ty(m.src, span)? } else { unreachable!() };
        if let (Some(al), true) = (alpha.clone(), sd.is_float()) {
            s = self.elementwise(Binary::Mul, &[s, al], span)?;
            alpha = None;
        }
        let FV::Masked(src) = s else { return masked_use(&s) };
        let n: usize = mshape.iter().product();
        let i = self.sel_filled(&ix, Scalar::I(0), span)?;
        let i = self.reshape_value(i, &[n], span)?;
        let (sd, _) = self.tensor_ty(src.src, span)?;
        let zero = if sd.is_float() { Scalar::F(-0.0) } else { Scalar::I(0) };
        let v = self.sel_filled(&src, zero, span)?;
        let mut vshape = src.shape[..d].to_vec();
        vshape.push(n);
        vshape.extend(&src.shape[d + mshape.len()..]);
        let v = self.reshape_value(v, &vshape, span)?;
        let (i, v) = (FV::Tensor(self.fresh(i, None, span)?), FV::Tensor(self.fresh(v, None, span)?));
        let kw: Vec<(String, FV)> = alpha.map(|al| ("alpha".to_string(), al)).into_iter().collect();
        let args = A::new(vec![FV::Tensor(x), FV::Int(d as i64), i, v], kw, span, name.into());
        Ok(Some(match name {
            "index_add_" => self.inplace(name, &args)?,
            _ => self.torch("index_add", &args, false)?,
        }))
    }
}

impl<'m> Fz<'m> {
    /// `x[i, ...] = v` with index lists of data-dependent length (as in `masked_index_read`): an `index_put` of every
    /// position of the mask into `x` with one more row along the first listed dim, where the positions the mask does
    /// not hold write (and that row is then dropped). The value there is the gather `x[i, ...]` at index 0, which
    /// also raises PyTorch's error for a selected index out of range. `None` where no index is a selection.
    pub(super) fn masked_index_write(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<Option<()>> {
        let idx = &self.mask_items_as_lists(idx, span)?;
        let (items, first) = super::selections::index_items(idx);
        let Some(first) = first else { return Ok(None) };
        // The unselected positions go to an extra row along the first index tensor's dim, which must be a list's.
        let listed = |it: &&FV| matches!(it, FV::Masked(_)) || matches!(it, FV::Tensor(t) if !t.shape.is_empty());
        if !matches!(items.iter().find(listed), Some(FV::Masked(_))) {
            return diag(
                span,
                "a write indexed by an index tensor before an index list of data-dependent length is not supported \
                 (index the list's dim first)",
            );
        }
        // Into an expanded view (elements sharing memory) the positions do not write one element each.
        if self.some_choice_shares_memory(t) {
            return diag(
                span,
                "a write at an index list of data-dependent length into a tensor whose elements share memory (an \
                 `expand`) cannot be functionalized",
            );
        }
        // The gather at every position (index 0 where the mask does not hold): its shape, and the bounds check.
        let FV::Masked(old) = self.masked_index_read(t, idx, span)?.expect("an index is a selection") else {
            unreachable!("a gather by index lists is a selection")
        };
        let dt = self.roots[t.root].dtype;
        let (mshape, after) = self.sel_dims(&old, span)?;
        let value = match v {
            FV::Masked(s) => {
                let (_, safter) = self.sel_dims(s, span)?;
                if s.mask != old.mask || safter != after {
                    return masked_use(v);
                }
                let (sd, _) = self.tensor_ty(s.src, span)?;
                if sd != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, sd));
                }
                s.src
            }
            FV::Tensor(x) if x.shape.len() <= after => {
                if self.roots[x.root].dtype != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, self.roots[x.root].dtype));
                }
                // As `index_put_`: the value must not overlap the written tensor.
                self.check_inplace(t, &[x], false, span)?;
                self.read(x, span)?
            }
            FV::Tensor(_) | FV::List(_) | FV::Tuple(_) => return masked_use(&FV::Masked(Box::new(first))),
            number => self.scalar_tensor(number, Some(dt), span)?.0,
        };
        // The value broadcast to the gather's shape where the mask holds, the gathered element elsewhere.
        let mut bshape = vec![1; old.pos];
        bshape.extend(&mshape);
        bshape.extend(std::iter::repeat_n(1, after));
        let mb = self.reshape_value(old.mask, &bshape, span)?;
        let (mt, vt, ot) = (self.t.at(mb), self.t.at(value), self.t.at(old.src));
        let put = self.t.op(OpName::Where, vec![mt, vt, ot]).map_err(Self::tyerr(span))?;
        let put = FV::Tensor(self.fresh(put, None, span)?);
        // The index tensors: the first listed dim's sends the other positions to the extra row.
        let mut dense = Vec::with_capacity(items.len());
        let mut padded_dim = None;
        for it in &items {
            match it {
                FV::Masked(s) => {
                    let d = self.sel_filled(s, Scalar::I(0), span)?;
                    dense.push(FV::Tensor(self.fresh(d, None, span)?));
                }
                other => dense.push(other.clone()),
            }
        }
        let r = self.resolve(t, &FV::Tuple(Rc::new(dense)), span)?;
        let mut list = self.adv_list(&r);
        for (k, item) in list.iter_mut().enumerate() {
            let FV::Tensor(_) = item else { continue };
            if padded_dim.is_some() {
                continue;
            }
            let n = r.view.shape[k] as i64;
            // Where the mask holds: the index wrapped as PyTorch wraps it; elsewhere the extra row.
            let s = first.clone();
            let src = FV::Tensor(self.fresh(s.src, None, span)?);
            let neg = self.elementwise(Binary::Lt, &[src.clone(), FV::Int(0)], span)?;
            let up = self.elementwise(Binary::Add, &[src.clone(), FV::Int(n)], span)?;
            let wrapped = self.call_op("where", vec![neg, up, src], span)?;
            let FV::Tensor(w) = wrapped else { unreachable!("where of tensors") };
            let w = self.read(&w, span)?;
            let sel = s.with(w, s.shape.clone(), s.pos, false);
            let d = self.sel_filled(&sel, Scalar::I(n), span)?;
            *item = FV::Tensor(self.fresh(d, None, span)?);
            padded_dim = Some(k);
        }
        let k = padded_dim.expect("an indexed dim");
        let mut pad_shape = r.view.shape.clone();
        pad_shape[k] = 1;
        let pad = self.full(&pad_shape, dt, Scalar::I(0)).map_err(Self::tyerr(span))?;
        let (cur, pad) = (FV::Tensor(r.view.clone()), FV::Tensor(self.fresh(pad, None, span)?));
        let cat = A::new(
            vec![FV::List(Rc::new(std::cell::RefCell::new(vec![cur, pad]))), FV::Int(k as i64)],
            vec![],
            span,
            "cat".into(),
        );
        let FV::Tensor(padded) = self.torch("cat", &cat, false)? else { unreachable!("cat of tensors") };
        let base = self.read(&padded, span)?;
        let base = self.t.at(base);
        let new = self.index_put_term(&padded, base, &list, &put, false, span)?;
        let new = self.fresh(new, None, span)?;
        let n = r.view.shape[k] as i64;
        let kept = self.tview(&new, |x| x.slice(k as i64, Some(0), Some(n), 1)).map_err(err(span))?;
        let kept = self.read(&kept, span)?;
        self.write(&r.view, kept, span)?;
        Ok(Some(()))
    }
}

/// The objects of the selections `v` reaches (itself, through containers and closures' captured values).
pub(super) fn selection_objects(v: &FV, out: &mut Vec<TId>) {
    objects_in(v, out, &mut Vec::new());
}

/// [`selection_objects`], each list and dict visited once (`seen`: their addresses; a container may hold itself).
fn objects_in(v: &FV, out: &mut Vec<TId>, seen: &mut Vec<usize>) {
    use super::state::first_visit;
    match v {
        FV::Masked(s) | FV::Squeezed(s) => out.push(s.obj),
        FV::Tuple(xs) | FV::Named(xs, _) => xs.iter().for_each(|x| objects_in(x, out, seen)),
        FV::List(xs) if first_visit(seen, std::rc::Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().for_each(|x| objects_in(x, out, seen))
        }
        FV::Dict(xs) if first_visit(seen, std::rc::Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().for_each(|(_, x)| objects_in(x, out, seen))
        }
        FV::Closure(_, kw) => kw.iter().for_each(|(_, x)| objects_in(x, out, seen)),
        _ => {}
    }
}

impl<'m> Fz<'m> {
    /// An in-place op on the selection `sel` held by a name: PyTorch changes the tensor, so every holder of it (and
    /// of its views) sees the change. The name alone is rebound, so it must be the only holder: no other name,
    /// container, view or caller reaches the object.
    pub(super) fn sole_holder(&mut self, env: &Env, sel: &Sel, span: Span) -> FR<()> {
        let mut held = Vec::new();
        for v in env.values() {
            selection_objects(v, &mut held);
        }
        let holders = held.iter().filter(|o| **o == sel.obj).count();
        if holders > 1 || self.entry_selections.iter().flatten().any(|o| *o == sel.obj) {
            return diag(
                span,
                "an in-place op on a selection of data-dependent length that another name, a container, a view of \
                 it or a calling function also holds: the functional and optimized engines update only this name \
                 (the reference engine runs it)",
            );
        }
        Ok(())
    }

    /// `name.op_(...)` on a selection bound to `name`, for the ops a selection supports out of place
    /// (`x1.clamp_(min=0)`, detectron2's box clipping): the name is rebound to the result, in the selection's dtype.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn masked_inplace(
        &mut self,
        env: &mut Env,
        obj: &Expr,
        name: &str,
        sel: &Sel,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let Some(base) = name.strip_suffix('_').filter(|b| !b.ends_with('_') && !b.is_empty()) else {
            return Ok(None);
        };
        // On an arithmetic operator's result nothing else holds it (a call may return its argument or a view of
        // it). On a name, only as a statement of its own: an operand read earlier in the same expression would
        // keep the old values (`a + a.mul_(2)`).
        let n =
            match &obj.kind {
                ExprKind::Name(n) if self.statement == Some(span) => Some(n),
                ExprKind::Bin(..) => None,
                _ => return diag(
                    span,
                    "an in-place op on a selection of data-dependent length is supported as a statement of its own on \
                     a name (`x1.clamp_(min=0)`) or on an arithmetic result; here its other holders or operands read \
                     before it could keep the old values (the reference engine runs it)",
                ),
            };
        let me = FV::Masked(Box::new(sel.clone()));
        // The op out of place (`lifted_call` takes binary ops with another selection, and refuses others).
        let r = self.masked_call(base, sel, pos, kw, span)?;
        let Some(FV::Masked(new)) = r else { return masked_use(&me) };
        if new.shape != sel.shape || new.pos != sel.pos {
            return masked_use(&me);
        }
        if n.is_some() {
            self.sole_holder(env, sel, span)?;
        }
        let (dt, _) = self.tensor_ty(sel.src, span)?;
        let (nd, _) = self.tensor_ty(new.src, span)?;
        if !dt.can_cast_from(nd) {
            return diag(
                span,
                format!("result type {} can't be cast to the desired output type {}", nd.name(), dt.name()),
            );
        }
        let v = self.cast(new.src, dt, span)?;
        let updated = FV::Masked(Box::new(Sel { src: v, ..sel.clone() }));
        if let Some(n) = n {
            env.insert(n.clone(), updated.clone());
        }
        Ok(Some(updated))
    }
}

impl<'m> Fz<'m> {
    /// `x.index_put_(indices, values, accumulate)` where the indices hold index lists
    /// of data-dependent length: a write as `x[indices] = values` (`masked_index_write`), or with `accumulate` an
    /// `index_put` that adds `-0.0` (integer 0) at the positions the mask does not hold.
    pub(super) fn masked_index_put(
        &mut self,
        name: &str,
        t: &TRef,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let a = A::new(pos.to_vec(), kw.to_vec(), span, name.into());
        let (Ok(idx), Ok(v)) = (a.req(0, "indices").cloned(), a.req(1, "values").cloned()) else { return Ok(None) };
        let accumulate = a.bool_or(2, "accumulate", false)?;
        if !matches!(v, FV::Tensor(_) | FV::Masked(_)) {
            let what = v.type_name();
            return diag(span, format!("{name}(): argument 'values' (position 2) must be Tensor, not {what}"));
        }
        let items = match &idx {
            FV::Tuple(_) => idx.clone(),
            FV::List(l) => FV::Tuple(Rc::new(l.borrow().clone())),
            _ => return Ok(None),
        };
        // PyTorch's indices are tensors only (no `None`, ints or `...`).
        if let Some(k) =
            items.items().unwrap_or_default().iter().position(|x| !matches!(x, FV::Tensor(_) | FV::Masked(_)))
        {
            let what = items.items().unwrap_or_default()[k].type_name();
            return diag(span, format!("expected Tensor as element {k} in argument 0, but got {what}"));
        }
        if accumulate && self.some_choice_shares_memory(t) {
            return diag(
                span,
                "index_put_ with accumulate=True at an index list of data-dependent length into a tensor whose \
                 elements share memory (an `expand`) cannot be functionalized",
            );
        }
        let target = t.clone();
        if !accumulate {
            return Ok(self.masked_index_write(&target, &items, &v, span)?.map(|()| FV::Tensor(target)));
        }
        let (list, first) = super::selections::index_items(&items);
        let Some(first) = first else { return Ok(None) };
        let mut dense = Vec::new();
        for it in list.iter() {
            match it {
                FV::Masked(s) if s.mask == first.mask && s.pos == 0 && s.shape == first.shape => {
                    let d = self.sel_filled(s, Scalar::I(0), span)?;
                    dense.push(FV::Tensor(self.fresh(d, None, span)?));
                }
                _ => return masked_use(&FV::Masked(Box::new(first))),
            }
        }
        let r = self.resolve(&target, &FV::Tuple(Rc::new(dense)), span)?;
        if r.adv.iter().any(|(p, _)| r.view.shape[*p] == 0) {
            return diag(span, "an index list of data-dependent length into a dim of size 0");
        }
        // The dims each position writes whole, after the indexed ones.
        let rest = r.view.shape.len() - r.adv.len();
        let (mshape, _) = self.sel_dims(&first, span)?;
        let dt = self.roots[t.root].dtype;
        let zero = if dt.is_float() { Scalar::F(-0.0) } else { Scalar::I(0) };
        let vals = match &v {
            FV::Masked(s) if s.mask == first.mask && s.pos == 0 && self.sel_dims(s, span)?.1 == rest => {
                let (sd, _) = self.tensor_ty(s.src, span)?;
                if sd != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, sd));
                }
                self.sel_filled(s, zero, span)?
            }
            FV::Tensor(x) if x.shape.iter().product::<usize>() == 1 && x.shape.len() <= rest => {
                if self.roots[x.root].dtype != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, self.roots[x.root].dtype));
                }
                self.check_inplace(t, &[x], false, span)?;
                let x = self.read(x, span)?;
                let x = self.reshape_value(x, &[], span)?;
                let mut shape = mshape.clone();
                shape.extend(std::iter::repeat_n(1, rest));
                let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
                let x = self.fresh(x, None, span)?;
                let x = self.tview(&x, |t| t.expand(&sizes)).map_err(err(span))?;
                let x = self.read(&x, span)?;
                self.sel_filled(&Sel::new(x, first.mask, shape, 0, first.at, first.origin), zero, span)?
            }
            _ => return masked_use(&FV::Masked(Box::new(first))),
        };
        let vals = FV::Tensor(self.fresh(vals, None, span)?);
        let list = self.adv_list(&r);
        self.index_write(&r.view, &list, &vals, true, span)?;
        Ok(Some(FV::Tensor(target)))
    }
}

impl<'m> Fz<'m> {
    /// `name[m] = v` where `name` holds a selection and `m` is a boolean selection over the same positions (a
    /// comparison of selections by the same mask, torchvision's GIoU loss on the foreground boxes): the selection
    /// takes `v` where `m` holds (a `where` over the whole view), and the name is rebound, as the sole holder.
    pub(super) fn masked_setitem(
        &mut self,
        env: &mut Env,
        name: &str,
        sel: &Sel,
        idx: &FV,
        v: &FV,
        span: Span,
    ) -> FR<()> {
        let me = FV::Masked(Box::new(sel.clone()));
        let FV::Masked(m) = idx else { return masked_use(&me) };
        let (md, _) = self.tensor_ty(m.src, span)?;
        if md != DType::Bool || m.mask != sel.mask || m.pos != sel.pos || m.shape != sel.shape {
            return masked_use(&me);
        }
        self.sole_holder(env, sel, span)?;
        let (dt, _) = self.tensor_ty(sel.src, span)?;
        let narrowed = self.sel_filled(m, Scalar::B(false), span)?;
        let value = match v {
            // A selection by the same positions, narrowed by `m` (`x[m]` of a selection, `masked_getitem`).
            FV::Masked(s) if s.shape == sel.shape && s.pos == sel.pos && s.mask == narrowed => {
                let (sd, _) = self.tensor_ty(s.src, span)?;
                if sd != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, sd));
                }
                s.src
            }
            FV::Tensor(x) if x.shape.iter().product::<usize>() == 1 => {
                let x = self.read(x, span)?;
                let x = self.reshape_value(x, &[], span)?;
                self.cast(x, dt, span)?
            }
            FV::Tensor(_) | FV::Masked(_) => return masked_use(&me),
            number => self.scalar_tensor(number, Some(dt), span)?.0,
        };
        let (mt, vt, ot) = (self.t.at(m.src), self.t.at(value), self.t.at(sel.src));
        let w = self.t.op(OpName::Where, vec![mt, vt, ot]).map_err(Self::tyerr(span))?;
        env.insert(name.to_string(), FV::Masked(Box::new(Sel { src: w, ..sel.clone() })));
        Ok(())
    }
}
