//! Tensor subscripts in the functionalizer: basic indexing composes views; integer index tensors become `index` and
//! `index_put`; boolean masks become predicated selects where the selection's size does not matter.

use super::ops::err;
use super::state::{diag, needs_static, Affine, TId, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::frontend::ast::BinOp;
use crate::interp::pyvalue::PyValue;
use crate::ir::{Node, OpName};
use crate::tensor::{DType, Scalar};
use egg::Id;

/// A subscript resolved against a view: the basic-indexing view, and advanced indices into it (by position).
pub(super) struct Resolved {
    pub view: TRef,
    pub adv: Vec<(usize, TRef)>,
}

impl<'m> Fz<'m> {
    /// `x.select(dim, i)` / `x[i]` with a static or run-time index.
    pub(super) fn select_fv(&mut self, x: &TRef, dim: i64, idx: &FV, span: Span) -> FR<FV> {
        let d = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
        let ai = match idx {
            FV::Int(i) => return self.view_fv(x, span, |t| t.select(d as i64, *i)),
            FV::DynInt(ai) => ai.clone(),
            FV::Tensor(t) => self.tensor_to_int(t, span)?,
            other => return diag(span, format!("index must be an integer, not {}", other.type_name())),
        };
        Ok(FV::Tensor(self.dyn_select(x, d, &ai, span)?))
    }

    /// Advanced read `x[idx]` with integer index tensors: `(index VALUE idx...)`.
    pub(super) fn index_read(&mut self, x: &TRef, idx: &[FV], span: Span) -> FR<FV> {
        let v = self.read(x, span)?;
        let mut args = vec![self.t.at(v)];
        for i in idx {
            args.push(match i {
                FV::None => self.t.leaf(Node::NoneLit),
                FV::Tensor(t) => {
                    let dt = self.roots[t.root].dtype;
                    if dt == DType::Bool {
                        return diag(
                            span,
                            "indexing with a boolean mask gives a data-dependent shape, which cannot be functionalized",
                        );
                    }
                    if dt.is_float() {
                        return diag(span, "tensors used as indices must be long, int, byte or bool tensors");
                    }
                    self.term_as(i, dt, span)?
                }
                other => return diag(span, format!("index entry of type {}", other.type_name())),
            });
        }
        self.fresh_op(OpName::Index, args, None, span)
    }

    /// A Python index value as an index tensor, if it is an advanced index.
    pub(super) fn index_tensor(&mut self, v: &FV, span: Span) -> FR<Option<TRef>> {
        match v {
            // A uint8 index is a mask, as PyTorch reads it (with a deprecation warning), 0-d ones included.
            FV::Tensor(t) if self.roots[t.root].dtype == DType::U8 => {
                let x = self.read(t, span)?;
                let m = self.cast(x, DType::Bool, span)?;
                Ok(Some(self.fresh(m, None, span)?))
            }
            FV::Tensor(t) if t.shape.is_empty() && self.roots[t.root].dtype != DType::Bool => Ok(None),
            FV::Tensor(t) if matches!(self.roots[t.root].dtype, DType::I8 | DType::I16) => {
                diag(span, "tensors used as indices must be long, int, byte or bool tensors")
            }
            FV::Tensor(t) => Ok(Some(t.clone())),
            // A `range` indexes as the list of its values (`t[range(n), idx]`).
            FV::Range(a, b, s) => {
                let vals: Vec<Scalar> =
                    crate::interp::value::range_values(*a, *b, *s).into_iter().map(Scalar::I).collect();
                match self.const_data(DType::I64, &[vals.len()], &vals, span)? {
                    FV::Tensor(t) => Ok(Some(t)),
                    _ => unreachable!("constant data is a tensor"),
                }
            }
            // A tuple inside the index tuple is a sequence of indices too (`x[tuple(zip(*pairs))]`, vLLM).
            FV::List(_) | FV::Tuple(_) => {
                let items = v.items().unwrap_or_default();
                let all_bool = !items.is_empty() && items.iter().all(|x| matches!(x, FV::Bool(_)));
                let vals: Vec<Scalar> = items
                    .iter()
                    .map(|x| match x {
                        FV::Bool(b) if all_bool => Ok(Scalar::B(*b)),
                        FV::Int(i) => Ok(Scalar::I(*i)),
                        _ => diag(
                            span,
                            "only lists of integers or bools known before the program runs can index a tensor",
                        ),
                    })
                    .collect::<FR<_>>()?;
                let dt = if all_bool { DType::Bool } else { DType::I64 };
                match self.const_data(dt, &[vals.len()], &vals, span)? {
                    FV::Tensor(t) => Ok(Some(t)),
                    _ => unreachable!(),
                }
            }
            _ => Ok(None),
        }
    }

    pub(super) fn resolve(&mut self, t: &TRef, idx: &FV, span: Span) -> FR<Resolved> {
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let mut consumed = 0usize;
        let mut adv_items = Vec::new();
        for it in &items {
            let ix = match it {
                FV::None | FV::Ellipsis => None,
                other => self.index_tensor(other, span)?,
            };
            consumed += match (it, &ix) {
                (FV::None | FV::Ellipsis, _) => 0,
                (_, Some(ix)) if self.roots[ix.root].dtype == DType::Bool => ix.shape.len(),
                _ => 1,
            };
            adv_items.push(ix);
        }
        if consumed > t.shape.len() {
            return diag(span, format!("too many indices for tensor of dimension {}", t.shape.len()));
        }
        let mut view = t.clone();
        let mut d = 0usize;
        let mut adv = Vec::new();
        for (it, ix) in items.iter().zip(adv_items) {
            match (it, ix) {
                (_, Some(ix)) => {
                    let width = if self.roots[ix.root].dtype == DType::Bool { ix.shape.len() } else { 1 };
                    adv.push((d, ix));
                    d += width;
                }
                (FV::Int(_) | FV::DynInt(_) | FV::Tensor(_), None) => {
                    view = match self.select_fv(&view, d as i64, it, span)? {
                        FV::Tensor(v) => v,
                        _ => unreachable!(),
                    };
                }
                (FV::Slice(a, b, c), None) => {
                    let step = c.unwrap_or(1);
                    let st = |x: &Option<Affine>| x.as_ref().map(|v| v.as_const());
                    match (st(a), st(b)) {
                        (None | Some(Some(_)), None | Some(Some(_))) => {
                            let (s, e) = (a.as_ref().and_then(|v| v.as_const()), b.as_ref().and_then(|v| v.as_const()));
                            view = self.tview(&view, |t| t.slice(d as i64, s, e, step)).map_err(err(span))?;
                        }
                        _ => {
                            let n = view.shape[d] as i64;
                            let s = a.clone().unwrap_or(Affine::constant(0));
                            let e = b.clone().unwrap_or(Affine::constant(n));
                            if s.as_const().is_some_and(|v| v < 0) || e.as_const().is_some_and(|v| v < 0) {
                                return needs_static(span, "a negative slice bound next to a loop variable");
                            }
                            view = self.dyn_slice(&view, d, &s, &e, step, false, span)?;
                        }
                    }
                    d += 1;
                }
                (FV::None, None) => {
                    view = self.tview(&view, |t| t.unsqueeze(d as i64)).map_err(err(span))?;
                    d += 1;
                }
                (FV::Ellipsis, None) => d += t.shape.len() - consumed,
                (FV::Float(_), None) => return diag(span, "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices (got float)"),
                (other, None) => return diag(span, format!("unsupported index of type {}", other.type_name())),
            }
        }
        Ok(Resolved { view, adv })
    }

    /// The advanced-index list of a resolved subscript: one entry per indexed dim of the view (`none` for plain dims).
    pub(super) fn adv_list(&self, r: &Resolved) -> Vec<FV> {
        let mut list = Vec::new();
        let mut k = 0usize;
        while k < r.view.shape.len() {
            match r.adv.iter().find(|(p, _)| *p == k) {
                Some((_, ix)) => {
                    list.push(FV::Tensor(ix.clone()));
                    k += if self.roots[ix.root].dtype == DType::Bool { ix.shape.len().max(1) } else { 1 };
                }
                None => {
                    list.push(FV::None);
                    k += 1;
                }
            }
            if r.adv.iter().all(|(p, _)| *p < k) {
                break;
            }
        }
        list
    }

    pub(super) fn tensor_getitem(&mut self, t: &TRef, idx: &FV, span: Span) -> FR<FV> {
        let idx = &*idx.tensor_index();
        if let Some(r) = self.squeezed_getitem(t, idx, span)? {
            return Ok(r);
        }
        if let Some(r) = self.masked_index_read(t, idx, span)? {
            return Ok(r);
        }
        let r = self.resolve(t, idx, span)?;
        if r.adv.is_empty() {
            return Ok(FV::Tensor(r.view));
        }
        if r.adv.len() == 1 && self.roots[r.adv[0].1.root].dtype == DType::Bool {
            let (pos, mask) = r.adv[0].clone();
            let (src, m) = (self.read(&r.view, span)?, self.read(&mask, span)?);
            return Ok(FV::Masked(Box::new(super::state::Sel::new(
                src,
                m,
                r.view.shape.clone(),
                pos,
                span,
                super::state::SelOrigin::Mask,
            ))));
        }
        let list = self.adv_list(&r);
        self.index_read(&r.view, &list, span)
    }

    /// A boolean mask over dims `pos..` of `view`, as a term broadcastable against the view.
    pub(super) fn mask_term(&mut self, view: &TRef, pos: usize, mask: &TRef, span: Span) -> FR<egg::Id> {
        for (k, &m) in mask.shape.iter().enumerate() {
            if pos + k >= view.shape.len() || view.shape[pos + k] != m {
                return diag(span, format!("The shape of the mask {} at index {k} does not match the shape of the indexed tensor {} at index {}", crate::tensor::fmt_shape(&mask.shape), crate::tensor::fmt_shape(&view.shape), pos + k));
            }
        }
        let mut shape = vec![1usize; pos];
        shape.extend(&mask.shape);
        shape.extend(std::iter::repeat_n(1, view.shape.len() - pos - mask.shape.len()));
        let m = self.read(mask, span)?;
        let m = self.reshape_value(m, &shape, span)?;
        Ok(self.t.at(m))
    }

    /// Writes `value` (a term broadcastable against `view`) into `view` where the mask at dims `pos..` holds, the old
    /// elements elsewhere: a predicated select over the view.
    pub(super) fn write_through_mask(
        &mut self,
        view: &TRef,
        pos: usize,
        mask: &TRef,
        value: egg::Id,
        span: Span,
    ) -> FR<()> {
        let m = self.mask_term(view, pos, mask, span)?;
        let v0 = self.read(view, span)?;
        let v0 = self.t.at(v0);
        let w = self.t.op(OpName::Where, vec![m, value, v0]).map_err(err(span))?;
        self.write(view, w, span)
    }

    pub(super) fn setitem(&mut self, obj: &FV, idx: &FV, v: &FV, span: Span) -> FR<()> {
        match obj {
            FV::List(l) => {
                let n = l.borrow().len() as i64;
                let i = match idx {
                    FV::Int(i) => *i,
                    FV::DynInt(_) => return needs_static(span, "assigning into a Python list at a loop variable"),
                    _ => return diag(span, "list indices must be integers"),
                };
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    return diag(span, "IndexError: list assignment index out of range");
                }
                l.borrow_mut()[k as usize] = v.clone();
                Ok(())
            }
            FV::Tensor(t) => self.tensor_setitem(t, idx, v, span),
            FV::Dict(d) => Self::dict_set(d, idx, v, span),
            m @ FV::Masked(_) => super::state::masked_use(m),
            other => diag(span, format!("'{}' object does not support item assignment", other.type_name())),
        }
    }

    pub(super) fn tensor_setitem(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<()> {
        let idx = &*idx.tensor_index();
        if self.conditional_shared(t) {
            return self.on_each_choice(t, span, &mut |s, c| s.tensor_setitem(c, idx, v, span));
        }
        if self.squeezed_setitem(t, idx, v, span)?.is_some() {
            return Ok(());
        }
        if self.mask_selection_write(t, idx, v, span)?.is_some() {
            return Ok(());
        }
        if self.masked_index_write(t, idx, v, span)?.is_some() {
            return Ok(());
        }
        if self.ranged_write(t, idx, v, span)?.is_some() {
            return Ok(());
        }
        let r = self.resolve(t, idx, span)?;
        let dt = self.roots[t.root].dtype;
        let items = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let byte = items.iter().any(|i| matches!(i, FV::Tensor(x) if self.roots[x.root].dtype == DType::U8));
        // PyTorch fills through a single mask (`masked_fill_`, boolean masks only) for any value of one element.
        let one = matches!(v, FV::Tensor(x) if x.shape.iter().product::<usize>() == 1)
            || matches!(v, FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynInt(_) | FV::DynFloat(_) | FV::DynBool(_));
        if byte && r.adv.len() == 1 && one {
            return diag(span, crate::tensor::index::BYTE_MASK_FILL);
        }
        if byte && r.adv.len() == 1 && matches!(v, FV::Masked(_)) {
            return diag(
                span,
                "assigning a selection through a uint8 mask is not supported: PyTorch raises when the selection has \
                 one element (masked_fill_ takes boolean masks only), which depends on the data; use a boolean mask",
            );
        }
        if matches!(v, FV::List(_) | FV::Tuple(_)) {
            return diag(span, format!("can't assign a {} to a torch.{}Tensor", v.type_name(), dt.name()));
        }
        if r.adv.is_empty() {
            return match v {
                // Writing a view's own value back (the setitem of `x[i] += y`) changes nothing, but is a `copy_`
                // (checked for elements sharing memory) as in the reference.
                FV::Tensor(val) if *val == r.view => self.check_inplace(&r.view, &[], true, span),
                FV::Tensor(v0) => {
                    // setitem drops the value's leading size-1 dims, then expands it to the view.
                    let mut val = v0.clone();
                    while val.shape.len() > r.view.shape.len() && val.shape[0] == 1 {
                        val = self.tview(&val, |d| d.select(0, 0)).map_err(err(span))?;
                    }
                    let sizes: Vec<i64> = r.view.shape.iter().map(|&d| d as i64).collect();
                    let e = self.tview(&val, |d| d.expand(&sizes)).map_err(err(span))?;
                    self.check_at_corners(&r.view, &[v0], span, |d, ins| {
                        crate::tensor::ops::check_setitem_overlap(d, ins[0])
                    })?;
                    let x = self.read(&e, span)?;
                    self.write(&r.view, x, span)
                }
                other => {
                    let (x, _) = self.scalar_tensor(other, Some(dt), span)?;
                    self.write(&r.view, x, span)
                }
            };
        }
        let masks: Vec<&(usize, TRef)> =
            r.adv.iter().filter(|(_, ix)| self.roots[ix.root].dtype == DType::Bool).collect();
        if !masks.is_empty() {
            // `x[mask] = v` with a scalar value is a predicated select over the view.
            if r.adv.len() != 1 {
                return diag(span, "a boolean mask together with other advanced indices is not functionalized");
            }
            let (pos, mask) = masks[0].clone();
            // `x[m] = y[m]` with the same mask over views of one shape: where(m, y, x).
            if let FV::Masked(sel) = v {
                let super::state::Sel { src, mask: m2, shape, pos: p2, .. } = sel.as_ref();
                // The same mask, unchanged since the selection was made, over a view of the same shape.
                let now = self.read(&mask, span)?;
                if *p2 != pos || *shape != r.view.shape || now != *m2 {
                    self.check_partial_write(&r.view, "masked assignment", span)?;
                    let w = self.masked_assign_selection(&r.view, pos, &mask, sel, dt, span)?;
                    return self.write_through_mask(&r.view, pos, &mask, w, span);
                }
                let (sd, _) = self.tensor_ty(*src, span)?;
                if sd != dt {
                    return diag(span, index_put_dtypes(dt, sd));
                }
                let y = self.cast(*src, dt, span)?;
                let y = self.t.at(y);
                return self.write_through_mask(&r.view, pos, &mask, y, span);
            }
            if let FV::Tensor(val) = v {
                if val.shape.iter().product::<usize>() != 1 {
                    self.check_partial_write(&r.view, "masked assignment", span)?;
                    let w = self.masked_assign_tensor(t, &r.view, pos, &mask, val, dt, span)?;
                    return self.write_through_mask(&r.view, pos, &mask, w, span);
                }
            }
            let val = match v {
                FV::Tensor(val) if val.shape.iter().product::<usize>() == 1 => self.term_as(v, dt, span).map(|x| (x, val.shape.len()))?,
                FV::Tensor(_) => return diag(span, "assigning a tensor through a boolean mask depends on how many elements are selected, which cannot be functionalized"),
                other => (self.term_as(other, dt, span)?, 0),
            };
            let val = if val.1 > 0 {
                self.reshape_value(super::state::TId { id: val.0, depth: self.t.depth() }, &[], span)?.id
            } else {
                val.0
            };
            self.check_partial_write(&r.view, "masked assignment", span)?;
            return self.write_through_mask(&r.view, pos, &mask, val, span);
        }
        if let FV::Tensor(val) = v {
            if self.roots[val.root].dtype != dt {
                return diag(span, index_put_dtypes(dt, self.roots[val.root].dtype));
            }
            self.check_inplace(t, &[val], false, span)?;
        }
        let list = self.adv_list(&r);
        if self.is_expanded_write(&r.view) && self.index_write_expanded(&r.view, &list, v, true, span)?.is_some() {
            return Ok(());
        }
        self.check_partial_write(&r.view, "indexed assignment", span)?;
        self.index_write(&r.view, &list, v, false, span)
    }

    /// `x[mask] op= y` with a scalar `y`: `where(mask, x op y, x)` over the view; `None` when not of that form.
    pub(super) fn masked_aug_assign(&mut self, t: &TRef, idx: &FV, op: BinOp, rhs: &FV, span: Span) -> FR<Option<()>> {
        let is_mask = match idx {
            FV::Tensor(m) => self.roots[m.root].dtype == DType::Bool && !m.shape.is_empty(),
            _ => false,
        };
        if !is_mask {
            return Ok(None);
        }
        let r = self.resolve(t, idx, span)?;
        let (pos, mask) = r.adv[0].clone();
        if matches!(rhs, FV::Tensor(x) if x.shape.iter().product::<usize>() != 1) {
            return diag(
                span,
                "an augmented assignment through a boolean mask with a tensor value cannot be functionalized",
            );
        }
        let Some(bin) = op.elementwise() else {
            return diag(span, "`@=` through a mask");
        };
        let full = self.elementwise(bin, &[FV::Tensor(r.view.clone()), rhs.clone()], span)?;
        let FV::Tensor(full) = full else { unreachable!() };
        let dt = self.roots[t.root].dtype;
        let fd = self.roots[full.root].dtype;
        if !dt.can_cast_from(fd) {
            return diag(
                span,
                format!("result type {} can't be cast to the desired output type {}", fd.name(), dt.name()),
            );
        }
        let new = self.term_as(&FV::Tensor(full), dt, span)?;
        self.write_through_mask(&r.view, pos, &mask, new, span)?;
        Ok(Some(()))
    }
}

impl<'m> Fz<'m> {
    /// `x[idx] = v` or `index_put_` with integer index tensors, through a view.
    pub(super) fn index_write(&mut self, view: &TRef, idx: &[FV], value: &FV, acc: bool, span: Span) -> FR<()> {
        if let FV::Tensor(v) = value {
            self.check_no_overlap(view, &[v], span)?;
        }
        let v0 = self.read(view, span)?;
        let v0 = self.t.at(v0);
        let r = self.index_put_term(view, v0, idx, value, acc, span)?;
        self.write(view, r, span)
    }

    /// `index_put_(..., accumulate=True)` through a view whose elements share memory (an `expand`): PyTorch adds
    /// every value into the memory position its element refers to, so aliases' contributions add up: the sum of the
    /// contributions over the expanded dims is added to the view with those dims reduced.
    pub(super) fn index_accumulate_expanded(&mut self, view: &TRef, idx: &[FV], value: &FV, span: Span) -> FR<()> {
        if let FV::Tensor(v) = value {
            self.check_no_overlap(view, &[v], span)?;
        }
        let dt = self.roots[view.root].dtype;
        let (expanded, base) = super::views::memory_view(view);
        let zeros = self.full(&view.shape, dt, crate::tensor::Scalar::I(0)).map_err(err(span))?;
        let zeros = self.t.at(zeros);
        let contrib = self.index_put_term(view, zeros, idx, value, true, span)?;
        let dims = self.lit_ints(&expanded);
        let keep = self.t.leaf(Node::Bool(crate::ir::BoolLit(true)));
        let sum = self.t.op(OpName::Sum, vec![contrib.id, dims, keep]).map_err(err(span))?;
        let sum = self.cast(sum, dt, span)?;
        let sum = self.t.at(sum);
        let old = self.read(&base, span)?;
        let old = self.t.at(old);
        let new = self.t.op(OpName::Add, vec![old, sum]).map_err(err(span))?;
        self.write(&base, new, span)
    }

    /// `(index_put BASE ACC VALUE INDICES...)` for a write through `view` (whose dtype the value takes).
    pub(super) fn index_put_term(
        &mut self,
        view: &TRef,
        base: Id,
        idx: &[FV],
        value: &FV,
        acc: bool,
        span: Span,
    ) -> FR<TId> {
        let dt = self.roots[view.root].dtype;
        let v0 = base;
        let val = self.term_as(value, dt, span)?;
        let b = self.t.leaf(Node::Bool(crate::ir::BoolLit(acc)));
        let mut args = vec![v0, b, val];
        for i in idx {
            args.push(match i {
                FV::None => self.t.leaf(Node::NoneLit),
                FV::Tensor(t) => {
                    if self.roots[t.root].dtype == DType::Bool {
                        return diag(
                            span,
                            "index_put_ with a boolean mask has a data-dependent shape and cannot be functionalized",
                        );
                    }
                    let x = self.read(t, span)?;
                    self.t.at(x)
                }
                other => return diag(span, format!("index entry of type {}", other.type_name())),
            });
        }
        self.t.op(OpName::IndexPut, args).map_err(err(span))
    }
}

impl<'m> Fz<'m> {
    /// Whether a write of some elements through `view` must go through [`Fz::index_write_expanded`]: its elements
    /// share memory because of an `expand` (stride-0 dims), and the memory view without them does not.
    pub(super) fn is_expanded_write(&self, view: &TRef) -> bool {
        let dt = self.roots[view.root].dtype;
        if view.alt.is_some() || view.shape.iter().any(|&n| n == 0) || !self.dummy(view, dt).has_internal_overlap() {
            return false;
        }
        let (_, base) = super::views::memory_view(view);
        !self.dummy(&base, dt).has_internal_overlap()
    }

    /// `index_put_` (or `x[idx] = v`, `setitem`) without accumulate into a view whose elements share memory (an
    /// `expand`). The reference, like PyTorch on the CPU, writes the indexing result's elements in row-major order,
    /// so each memory position keeps the value of the last element that refers to it. The same write on the memory
    /// view (the expanded dims at size 1): an index into an expanded dim becomes `zeros(n)[idx]` (0, checked against
    /// the expanded size), and the value at a non-indexed expanded dim is its last entry. The elements reaching one
    /// memory position are a product of index entries and of a whole dim, so the last of them in row-major order is
    /// the last index entry (which `index_put` keeps) with the dim's last entry. `None` where the indices are not
    /// of that form (a boolean mask), and the caller refuses.
    pub(super) fn index_write_expanded(
        &mut self,
        view: &TRef,
        idx: &[FV],
        value: &FV,
        setitem: bool,
        span: Span,
    ) -> FR<Option<()>> {
        let dt = self.roots[view.root].dtype;
        let nd = view.shape.len();
        let mut indexed = Vec::new();
        let mut bshape: Vec<usize> = Vec::new();
        for (d, i) in idx.iter().enumerate() {
            match i {
                FV::None => {}
                FV::Tensor(t) if self.roots[t.root].dtype != DType::Bool && !self.roots[t.root].dtype.is_float() => {
                    bshape = crate::tensor::ops::broadcast_shapes(&bshape, &t.shape).map_err(err(span))?;
                    indexed.push(d);
                }
                _ => return Ok(None),
            }
        }
        if indexed.is_empty() || idx.len() > nd {
            return Ok(None);
        }
        if let FV::Tensor(v) = value {
            self.check_no_overlap(view, &[v], span)?;
        }
        // Where each non-indexed dim of the view lands in the indexing result.
        let adjacent = indexed[indexed.len() - 1] - indexed[0] + 1 == indexed.len();
        let rest: Vec<usize> = (0..nd).filter(|d| !indexed.contains(d)).collect();
        let pos_of = |d: usize, k: usize| {
            if !adjacent {
                bshape.len() + k
            } else if d < indexed[0] {
                d
            } else {
                d - indexed.len() + bshape.len()
            }
        };
        let mut rshape: Vec<usize> = rest.iter().map(|&d| view.shape[d]).collect();
        let at = if adjacent { indexed[0] } else { 0 };
        rshape.splice(at..at, bshape.iter().copied());
        let (expanded, base) = super::views::memory_view(view);
        // The value, broadcast to the indexing result, at the last entry of each non-indexed expanded dim.
        let v = self.term_as(value, dt, span)?;
        let v = self.fresh(TId { id: v, depth: self.t.depth() }, None, span)?;
        let sizes: Vec<i64> = rshape.iter().map(|&n| n as i64).collect();
        let v = self
            .tview(&v, |t| {
                let mut t = t.clone();
                while setitem && t.dim() > sizes.len() && t.shape[0] == 1 {
                    t = t.select(0, 0)?;
                }
                let mut t = t.expand(&sizes)?;
                for (k, &d) in rest.iter().enumerate() {
                    if expanded.contains(&(d as i64)) {
                        t = t.narrow(pos_of(d, k) as i64, view.shape[d] as i64 - 1, 1)?;
                    }
                }
                Ok(t)
            })
            .map_err(err(span))?;
        // Indices into expanded dims, checked against the expanded size, all 0.
        let mut new_idx = idx.to_vec();
        for &d in &indexed {
            if expanded.contains(&(d as i64)) {
                let zeros = self.full(&[view.shape[d]], DType::I64, Scalar::I(0)).map_err(err(span))?;
                let zeros = self.fresh(zeros, None, span)?;
                new_idx[d] = self.index_read(&zeros, &idx[d..d + 1], span)?;
            }
        }
        let old = self.read(&base, span)?;
        let old = self.t.at(old);
        let r = self.index_put_term(&base, old, &new_idx, &FV::Tensor(v), false, span)?;
        self.write(&base, r, span)?;
        Ok(Some(()))
    }
}

/// PyTorch's error for an index write (`index_put_`, `x[idx] = t`) whose value has another dtype than the destination.
pub(super) fn index_put_dtypes(dst: DType, src: DType) -> String {
    format!(
        "Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.",
        dst.name(),
        src.name()
    )
}

/// A slice's start and stop where both are known before the program runs (each `None` where omitted); `None` where
/// one depends on a loop variable.
pub(super) fn static_bounds(a: &Option<Affine>, b: &Option<Affine>) -> Option<(Option<i64>, Option<i64>)> {
    let known = |x: &Option<Affine>| match x {
        None => Some(None),
        Some(x) => x.as_const().map(Some),
    };
    Some((known(a)?, known(b)?))
}
