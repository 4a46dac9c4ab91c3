//! Counts known only when the program runs, beyond `torch.where(condition)`'s index lists (`selections.rs`):
//! `topk` with a `k` from tensor data is a selection of the sorted line by the mask `position < k`, made after a
//! run-time check of PyTorch's range for `k`.

use super::ops::err;
use super::state::{diag, Sel, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::tensor::ops::Binary;
use crate::tensor::DType;

impl<'m> Fz<'m> {
    /// Whether `k` is a `topk` size known only at run time: a Python int from data or a 0-d integer tensor.
    pub(super) fn run_time_count(&self, k: &FV) -> bool {
        match k {
            FV::DynInt(_) => true,
            FV::Tensor(t) => {
                let d = self.roots[t.root].dtype;
                t.shape.is_empty() && !d.is_float() && d != DType::Bool
            }
            _ => false,
        }
    }

    /// `topk(x, k, dim=d)` with a run-time `k`, given the whole sorted line's values and indices (`vals`, `idx`, in
    /// topk's order): both as selections along `d` by `position < k`. Raises where PyTorch does (`k` outside
    /// `0..=n`).
    pub(super) fn topk_run_time(
        &mut self,
        shape: &[usize],
        d: usize,
        vals: &FV,
        idx: &FV,
        k: &FV,
        span: Span,
    ) -> FR<FV> {
        let n = shape[d] as i64;
        for (op, bound) in [(Binary::Ge, 0), (Binary::Le, n)] {
            let ok = self.elementwise(op, &[k.clone(), FV::Int(bound)], span)?;
            self.assert_true(&ok, "selected index k out of range", span)?;
        }
        let grid = self.grid(&[shape[d]], 0, span)?;
        let grid = FV::Tensor(self.fresh(grid, None, span)?);
        let FV::Tensor(mask) = self.elementwise(Binary::Lt, &[grid, k.clone()], span)? else {
            unreachable!("a tensor compared with a number is a tensor")
        };
        let mask = self.read(&mask, span)?;
        let mut out = Vec::new();
        for v in [vals, idx] {
            let FV::Tensor(t) = v else { unreachable!("sorts give tensors") };
            let src = self.read(t, span)?;
            out.push(FV::Masked(Box::new(Sel::new(
                src,
                mask,
                shape.to_vec(),
                d,
                span,
                super::state::SelOrigin::RunTimeK,
            ))));
        }
        Ok(FV::Named(std::rc::Rc::new(out), &["values", "indices"]))
    }

    /// A run-time check that `cond` (a bool, a 0-d bool tensor or a run-time bool) holds; where it is known false,
    /// PyTorch's error `message` now.
    pub(super) fn assert_true(&mut self, cond: &FV, message: &str, span: Span) -> FR<()> {
        match cond {
            FV::Bool(true) => Ok(()),
            FV::Bool(false) => diag(span, message),
            FV::DynBool(t) => self.runtime_assert(*t, span),
            FV::Tensor(t) => {
                let c = self.read(t, span)?;
                self.runtime_assert(c, span)
            }
            other => unreachable!("a comparison gave a {}", other.type_name()),
        }
    }
}

impl<'m> Fz<'m> {
    /// `x[mask] = v` (the mask at dim `pos` of `view`, a view of `base`) with a tensor value of several elements:
    /// the value's rows go to the mask's positions in order, which the position's rank among the selected ones
    /// (a cumulative count) picks, after a run-time check that the value has as many rows as the mask selects
    /// (PyTorch's shape error otherwise; a value of one row is broadcast). Returns the value at every position of the
    /// view (the caller writes it where the mask holds, `write_through_mask`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn masked_assign_tensor(
        &mut self,
        base: &TRef,
        view: &TRef,
        pos: usize,
        mask: &TRef,
        val: &TRef,
        dt: DType,
        span: Span,
    ) -> FR<egg::Id> {
        let vd = self.roots[val.root].dtype;
        if vd != dt {
            return diag(span, super::subscript::index_put_dtypes(dt, vd));
        }
        let md = mask.shape.len();
        let rest = view.shape[pos + md..].to_vec();
        let rank = pos + 1 + rest.len();
        let mut v = val.clone();
        while v.shape.len() > rank && v.shape[0] == 1 {
            v = self.tview(&v, |d| d.select(0, 0)).map_err(err(span))?;
        }
        if v.shape.len() != rank || v.shape[..pos] != view.shape[..pos] || v.shape[pos + 1..] != rest[..] {
            return diag(
                span,
                "assigning a tensor through a boolean mask is supported for a value of the selection's shape (its \
                 rows, one per selected position, then the dims after the mask)",
            );
        }
        self.check_at_corners(base, &[val], span, |d, ins| crate::tensor::ops::check_overlap(d, ins, false))?;
        let rows = v.shape[pos] as i64;
        let m = FV::Tensor(mask.clone());
        if rows != 1 {
            let count = self.call_op("sum", vec![m.clone()], span)?;
            let same = self.elementwise(Binary::Eq, &[count, FV::Int(rows)], span)?;
            self.assert_true(&same, "shape mismatch: value tensor cannot be broadcast to indexing result", span)?;
        }
        // Each position's rank among the selected ones (clamped: the others read some row, then are not written).
        let flat = self.call_op("flatten", vec![m], span)?;
        let cum = self.call_op("cumsum", vec![flat, FV::Int(0)], span)?;
        let at = self.elementwise(Binary::Sub, &[cum, FV::Int(1)], span)?;
        let at = self.call_op("clamp", vec![at, FV::Int(0), FV::Int(rows - 1)], span)?;
        let dims = mask.shape.iter().map(|&n| FV::Int(n as i64)).collect();
        let at = self.call_op("reshape", vec![at, FV::Tuple(std::rc::Rc::new(dims))], span)?;
        let mut idx = vec![FV::None; pos];
        idx.push(at);
        let picked = self.index_read(&v, &idx, span)?;
        let picked = self.term_as(&picked, dt, span)?;
        Ok(picked)
    }
}

impl<'m> Fz<'m> {
    /// `x[b] = y[a]`: a selection by mask `a` assigned through another mask `b` (at dim `pos` of `view`). The j-th
    /// row `a` selects goes to the j-th position `b` selects: the stable sort of `~a` lists `a`'s positions in order,
    /// and each position of `b` reads the one of its rank, after a run-time check that `a` selects as many rows as
    /// `b` (or one, which is broadcast). Returns the value at every position of the view, as `masked_assign_tensor`.
    pub(super) fn masked_assign_selection(
        &mut self,
        view: &TRef,
        pos: usize,
        mask: &TRef,
        sel: &Sel,
        dt: DType,
        span: Span,
    ) -> FR<egg::Id> {
        let (sd, _) = self.tensor_ty(sel.src, span)?;
        let (amask, _) = self.tensor_ty(sel.mask, span)?;
        if sd != dt {
            return diag(span, super::subscript::index_put_dtypes(dt, sd));
        }
        let ashape = self.sel_dims(sel, span)?.0;
        let (bd, ad) = (mask.shape.len(), ashape.len());
        let rest = &view.shape[pos + bd..];
        if amask != DType::Bool
            || sel.pos != pos
            || sel.shape[..pos] != view.shape[..pos]
            || sel.shape[pos + ad..] != *rest
        {
            return diag(
                span,
                "assigning a boolean-mask selection through a different mask is supported where the dims before and \
                 after the two masks agree",
            );
        }
        let na = ashape.iter().product::<usize>();
        let a = FV::Tensor(self.fresh(sel.mask, None, span)?);
        let b = FV::Tensor(mask.clone());
        let (ca, cb) = (self.call_op("sum", vec![a.clone()], span)?, self.call_op("sum", vec![b.clone()], span)?);
        let same = self.elementwise(Binary::Eq, &[ca.clone(), cb], span)?;
        let one = self.elementwise(Binary::Eq, &[ca.clone(), FV::Int(1)], span)?;
        let ok = self.elementwise(Binary::BitOr, &[same, one], span)?;
        self.assert_true(&ok, "shape mismatch: value tensor cannot be broadcast to indexing result", span)?;
        // a's selected positions in order, then each position of b's rank among b's selected ones.
        let a_flat = self.call_op("flatten", vec![a], span)?;
        let key = self.call_op("logical_not", vec![a_flat], span)?;
        let key = self.call_op("long", vec![key], span)?;
        // (stable: the selected positions keep their order)
        let kw = vec![("dim".to_string(), FV::Int(0)), ("stable".to_string(), FV::Bool(true))];
        let order = self.torch("argsort", &super::ops::A::new(vec![key], kw, span, "argsort".into()), false)?;
        let b_flat = self.call_op("flatten", vec![b], span)?;
        let cum = self.call_op("cumsum", vec![b_flat, FV::Int(0)], span)?;
        let at = self.elementwise(Binary::Sub, &[cum, FV::Int(1)], span)?;
        // Below a's count (one row selected: always that row, broadcast), and at least 0 (no row selected).
        let last = self.elementwise(Binary::Sub, &[ca, FV::Int(1)], span)?;
        let at = self.elementwise(Binary::Minimum, &[at, last], span)?;
        let at = self.call_op("clamp", vec![at, FV::Int(0), FV::Int(na.max(1) as i64 - 1)], span)?;
        let FV::Tensor(order) = order else { unreachable!("argsort gives a tensor") };
        let from = self.index_read(&order, &[at], span)?;
        // The selection's values with a's dims flattened, read at those positions, b's dims restored.
        let mut flat_shape = sel.shape[..pos].to_vec();
        flat_shape.push(na);
        flat_shape.extend_from_slice(rest);
        let src = self.reshape_value(sel.src, &flat_shape, span)?;
        let src = self.fresh(src, None, span)?;
        let mut idx = vec![FV::None; pos];
        idx.push(from);
        let FV::Tensor(picked) = self.index_read(&src, &idx, span)? else { unreachable!("a gather gives a tensor") };
        let picked = self.read(&picked, span)?;
        let mut out_shape = view.shape[..pos].to_vec();
        out_shape.extend_from_slice(&mask.shape);
        out_shape.extend_from_slice(rest);
        let picked = self.reshape_value(picked, &out_shape, span)?;
        let picked = self.t.at(picked);
        Ok(picked)
    }
}

impl<'m> Fz<'m> {
    /// An index with index lists of data-dependent length (`x[i, m]` with `i` made from `m`'s selection) where a
    /// boolean mask item is the lists' own mask: the mask as its `torch.where` lists, which PyTorch's indexing turns
    /// it into, so that every index is a list of one mask. Other indices are returned as they are.
    pub(super) fn mask_items_as_lists(&mut self, idx: &FV, span: Span) -> FR<FV> {
        let (items, first) = super::selections::index_items(idx);
        let Some(first) = first else { return Ok(idx.clone()) };
        let mut out = Vec::with_capacity(items.len());
        let mut changed = false;
        for it in items {
            if let FV::Tensor(m) = &it {
                if self.roots[m.root].dtype == DType::Bool && !m.shape.is_empty() && self.read(m, span)? == first.mask {
                    let FV::Tuple(lists) = self.where_indices(m, span)? else { unreachable!("where gives a tuple") };
                    out.extend(lists.iter().cloned());
                    changed = true;
                    continue;
                }
            }
            out.push(it);
        }
        Ok(if changed { FV::Tuple(std::rc::Rc::new(out)) } else { idx.clone() })
    }
}

impl<'m> Fz<'m> {
    /// `x[..., a:b] = v` where the slice's length is known only at run time (a sequence mask from lengths:
    /// `m[i, :lens[i]] = 1`) and `v` is one number: the whole dim is written, `v` where the position lies in the
    /// slice as Python clamps it, the old value elsewhere. `None` where this is not such a write (the items before
    /// the slice must be integers or slices, none after it may be an index tensor, the step must be 1).
    pub(super) fn ranged_write(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<Option<()>> {
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let run_time = |it: &FV| match it {
            FV::Slice(a, b, step) => {
                let len = match (a, b) {
                    (Some(a), Some(b)) => b.add(&a.neg()).as_const(),
                    (None, Some(b)) => b.as_const(),
                    (Some(a), None) => a.as_const(),
                    (None, None) => Some(0),
                };
                len.is_none() && step.unwrap_or(1) == 1
            }
            _ => false,
        };
        let Some(k) = items.iter().position(run_time) else { return Ok(None) };
        let number =
            matches!(v, FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynInt(_) | FV::DynFloat(_) | FV::DynBool(_))
                || matches!(v, FV::Tensor(x) if x.shape.is_empty());
        if !number || !items[..k].iter().all(|it| matches!(it, FV::Int(_) | FV::DynInt(_) | FV::Slice(..))) {
            return Ok(None);
        }
        let dim = items[..k].iter().filter(|it| matches!(it, FV::Slice(..))).count();
        let FV::Slice(a, b, _) = items[k].clone() else { unreachable!("found as a slice") };
        let mut whole = items.clone();
        whole[k] = FV::Slice(None, None, None);
        let r = self.resolve(t, &FV::Tuple(std::rc::Rc::new(whole)), span)?;
        if !r.adv.is_empty() {
            return Ok(None);
        }
        let n = r.view.shape[dim] as i64;
        // A bound as Python clamps it: negative from the end, then within 0..=n.
        let mut bound = |x: Option<super::state::Affine>, dflt: i64| -> FR<FV> {
            let Some(x) = x else { return Ok(FV::Int(dflt)) };
            let (b, _) = self.scalar_tensor(&FV::DynInt(x), Some(DType::I64), span)?;
            let b = FV::Tensor(self.fresh(b, None, span)?);
            let neg = self.elementwise(Binary::Lt, &[b.clone(), FV::Int(0)], span)?;
            let up = self.elementwise(Binary::Add, &[b.clone(), FV::Int(n)], span)?;
            let w = self.call_op("where", vec![neg, up, b], span)?;
            self.call_op("clamp", vec![w, FV::Int(0), FV::Int(n)], span)
        };
        let (lo, hi) = (bound(a, 0)?, bound(b, n)?);
        let grid = self.grid(&[r.view.shape[dim]], 0, span)?;
        let grid = FV::Tensor(self.fresh(grid, None, span)?);
        let ge = self.elementwise(Binary::Ge, &[grid.clone(), lo], span)?;
        let lt = self.elementwise(Binary::Lt, &[grid, hi], span)?;
        let inside = self.elementwise(Binary::BitAnd, &[ge, lt], span)?;
        let mut dims = vec![FV::Int(1); r.view.shape.len()];
        dims[dim] = FV::Int(n);
        let inside = self.call_op("reshape", vec![inside, FV::Tuple(std::rc::Rc::new(dims))], span)?;
        let dt = self.roots[t.root].dtype;
        let (val, _) = self.scalar_tensor(v, Some(dt), span)?;
        let val = FV::Tensor(self.fresh(val, None, span)?);
        self.check_partial_write(&r.view, "an assignment through a slice of run-time length", span)?;
        let FV::Tensor(new) = self.call_op("where", vec![inside, val, FV::Tensor(r.view.clone())], span)? else {
            unreachable!("where of tensors is a tensor")
        };
        let new = self.read(&new, span)?;
        self.write(&r.view, new, span)?;
        Ok(Some(()))
    }
}
