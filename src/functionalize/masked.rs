//! Boolean-mask selections (`y[m]`, [`FV::Masked`]) used where the result does not depend on how many elements
//! were selected: elementwise arithmetic between selections made with one mask over views of one shape and Python
//! numbers (`(b[m] - a[m]) * (d[m] - c[m])`, fvcore's GIoU loss), elementwise unary ops, and `sum`/`mean` of a
//! selection. The arithmetic runs over the whole views and stays a selection, which `x[m] = ...` (a predicated
//! select, `subscript`) or a reduction consumes: at the selected positions the values are the selection's, and the
//! other positions are never read. Ops that can raise on some value (integer floor division, remainder and powers)
//! are refused: over the whole view they could raise where the selection would not. A write indexed by the mask and
//! by selections made with it (`x[m, i[m]] = v`) is an `index_put` over every position of the mask
//! ([`Fz::mask_selection_write`]).

use super::state::{diag, masked_use, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;

use crate::frontend::ast::BinOp;
use crate::interp::pyvalue::Callee;
use crate::ir::{Node, OpName};
use crate::tensor::ops::Binary;
use crate::tensor::{DType, Scalar};

pub(super) use super::state::Sel;

impl<'m> Fz<'m> {
    /// `op` over `args`, at least one of them a selection (see the module doc).
    pub(super) fn masked_elementwise(&mut self, op: Binary, args: &[FV], span: Span) -> FR<FV> {
        let (sel, mlen, after, whole) = self.masked_operands(args, span)?;
        let r = self.elementwise(op, &whole, span)?;
        let FV::Tensor(r) = r else { return masked_use(&FV::Masked(Box::new(sel))) };
        // Integer division by a nonzero number, or a power with a non-negative one, cannot raise.
        let safe = match (op, args.last()) {
            (Binary::FloorDiv | Binary::Rem | Binary::Fmod, Some(FV::Int(d))) => *d != 0,
            (Binary::Pow, Some(FV::Int(e))) => *e >= 0,
            _ => false,
        };
        if matches!(op, Binary::FloorDiv | Binary::Rem | Binary::Fmod | Binary::Pow)
            && !self.roots[r.root].dtype.is_float()
            && !safe
        {
            return masked_use(&FV::Masked(Box::new(sel)));
        }
        let v = self.read(&r, span)?;
        let pos = r.shape.len() - mlen - after;
        Ok(FV::Masked(Box::new(sel.with(v, r.shape.clone(), pos, false))))
    }

    /// The operands of an elementwise op among which are selections, each over its whole view: selections by one
    /// mask broadcast against each other where their mask dims line up (as many dims after them), and against
    /// tensors that reach no further than those dims. Returns the first selection, its mask's rank, the number of
    /// dims after it, and the operands.
    fn masked_operands(&mut self, args: &[FV], span: Span) -> FR<(Sel, usize, usize, Vec<FV>)> {
        let mut first: Option<(Sel, usize, usize)> = None;
        for a in args {
            if let FV::Masked(sel) = a {
                let (_, mshape) = self.tensor_ty(sel.mask, span)?;
                let after = sel.shape.len() - sel.pos - mshape.len();
                match &first {
                    None => first = Some((sel.as_ref().clone(), mshape.len(), after)),
                    Some((f, _, fa)) if f.mask == sel.mask && *fa == after => {}
                    Some(_) => return masked_use(a),
                }
            }
        }
        let (sel, mlen, after) = first.expect("called with a selection");
        let mut whole = Vec::with_capacity(args.len());
        for a in args {
            match a {
                FV::Masked(s) => whole.push(FV::Tensor(self.fresh(s.src, None, span)?)),
                // A tensor broadcast against a selection's data-dependent length: not expressible.
                // (A leading size-1 dim more lines up with the selected dim, as it does in PyTorch.)
                FV::Tensor(t) if t.shape.len() > after + 1 || (t.shape.len() == after + 1 && t.shape[0] != 1) => {
                    return masked_use(&FV::Masked(Box::new(sel)))
                }
                other => whole.push(other.clone()),
            }
        }
        Ok((sel, mlen, after, whole))
    }

    /// `torch.where(c, a, b)` where some of them are selections (by one mask, as `masked_operands` allows).
    pub(super) fn masked_where(&mut self, args: &[FV], span: Span) -> FR<FV> {
        let (sel, mlen, after, whole) = self.masked_operands(args, span)?;
        let r = self.call_op("where", whole, span)?;
        let FV::Tensor(r) = r else { return masked_use(&FV::Masked(Box::new(sel))) };
        let v = self.read(&r, span)?;
        let pos = r.shape.len() - mlen - after;
        Ok(FV::Masked(Box::new(sel.with(v, r.shape.clone(), pos, false))))
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
        let r = *r;
        if let FV::Masked(c) = cur {
            if c.shape != r.shape {
                return diag(
                    span,
                    format!(
                        "output with shape {} doesn't match the broadcast shape {}",
                        crate::tensor::fmt_shape(&c.shape),
                        crate::tensor::fmt_shape(&r.shape)
                    ),
                );
            }
        }
        let (rd, _) = self.tensor_ty(r.src, span)?;
        if !dt.can_cast_from(rd) {
            return diag(
                span,
                format!("result type {} can't be cast to the desired output type {}", rd.name(), dt.name()),
            );
        }
        let v = self.cast(r.src, dt, span)?;
        Ok(FV::Masked(Box::new(r.with(v, r.shape.clone(), r.pos, false))))
    }

    /// A call given a selection `m` among its arguments: `torch.exp(y[m])`, `torch.sum(y[m])` where `masked_call`
    /// supports it, else the refusal located at the selection.
    pub(super) fn torch_call_on_masked(
        &mut self,
        callee: &Callee<FV>,
        pos: &[FV],
        kw: &[(String, FV)],
        m: FV,
        span: Span,
    ) -> FR<FV> {
        match callee {
            Callee::Method(FV::Tensor(t), name) if name.as_str() == "index_put_" => {
                if let Some(r) = self.masked_index_put(name, t, pos, kw, span)? {
                    return Ok(r);
                }
            }
            Callee::Method(FV::Tensor(t), name) if matches!(name.as_str(), "index_add_" | "index_add") => {
                let all = [vec![FV::Tensor(t.clone())], pos.to_vec()].concat();
                if let Some(r) = self.masked_index_add(name, &all, kw, span)? {
                    return Ok(r);
                }
            }
            Callee::Method(FV::Masked(sel), name) => {
                if let Some(r) = self.masked_call(name, sel, pos, kw, span)? {
                    return Ok(r);
                }
            }
            _ => {}
        }
        let op = match callee {
            Callee::Method(FV::Module("torch" | "torch.nn.functional"), name) => Some(name.as_str()),
            Callee::Value(FV::Func(f)) => f.strip_prefix("torch.").and_then(|f| f.rsplit('.').next()),
            _ => None,
        };
        if let Some(name @ ("stack" | "cat" | "concat" | "concatenate")) = op {
            let name = if name == "stack" { "stack" } else { "cat" };
            if let Some(r) = self.masked_join(name, pos, kw, span)? {
                return Ok(r);
            }
        }
        if let (Some("where"), 3, true) = (op, pos.len(), kw.is_empty()) {
            return self.masked_where(pos, span);
        }
        if op == Some("index_add") {
            if let Some(r) = self.masked_index_add("index_add", pos, kw, span)? {
                return Ok(r);
            }
        }
        if let (Some(name), Some(FV::Masked(sel))) = (op, pos.first()) {
            let sel = sel.as_ref().clone();
            if let Some(r) = self.masked_call(name, &sel, &pos[1..], kw, span)? {
                return Ok(r);
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
        let plain = crate::interp::torch_ops::unary_op(name).is_some() || matches!(name, "sum" | "mean");
        if !rest.is_empty() || !kw.is_empty() || !plain {
            return self.lifted_call(name, sel, rest, kw, span);
        }
        let Sel { src, mask: m, shape, pos, .. } = sel.clone();
        if let Some(u) = crate::interp::torch_ops::unary_op(name) {
            let x = FV::Tensor(self.fresh(src, None, span)?);
            let FV::Tensor(r) = self.unary(u, &x, span)? else { return Ok(None) };
            let v = self.read(&r, span)?;
            return Ok(Some(FV::Masked(Box::new(sel.with(v, shape, pos, false)))));
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

impl<'m> Fz<'m> {
    /// `x[m, i[m], ...] = v`: a boolean mask over `x`'s leading dims, then index tensors selected by the same mask
    /// (torchvision FCOS's `gt_classes_targets[fg, classes[fg]] = 1.0`). Each position where the mask holds writes
    /// the element (or row) its selections index, and no two positions write the same one, so the write is an
    /// `index_put` over every position of the mask: where it holds, the selections' indices and the value; elsewhere
    /// index 0 and the element's own value. `None` where the subscript is not of that form.
    pub(super) fn mask_selection_write(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<Option<()>> {
        let FV::Tuple(items) = idx else { return Ok(None) };
        let Some(FV::Tensor(mask)) = items.first() else { return Ok(None) };
        let k = mask.shape.len();
        let is_index = |d: DType| d != DType::Bool && !d.is_float();
        if self.roots[mask.root].dtype != DType::Bool || k == 0 || t.shape.len() < k || t.shape[..k] != mask.shape[..] {
            return Ok(None);
        }
        // Into an expanded view (elements sharing memory) the write is not one per element: the general path refuses.
        if self.some_choice_shares_memory(t) {
            return Ok(None);
        }
        let m = self.read(mask, span)?;
        let mut sels = Vec::new();
        for it in &items[1..] {
            match it {
                FV::Masked(sel) if sel.mask == m && sel.shape == mask.shape && sel.pos == 0 => {
                    let (d, _) = self.tensor_ty(sel.src, span)?;
                    if !is_index(d) {
                        return Ok(None);
                    }
                    sels.push((sel.src, d));
                }
                _ => return Ok(None),
            }
        }
        let (j, dt) = (sels.len(), self.roots[t.root].dtype);
        if j == 0 || k + j > t.shape.len() || t.shape[k..k + j].contains(&0) {
            return Ok(None);
        }
        // Per position of the mask: its own coordinates, then the selections' indices (0 where it does not hold).
        let mut list = Vec::new();
        for d in 0..k {
            let n = mask.shape[d] as i64;
            let args = vec![
                self.t.leaf(Node::DType(DType::I64)),
                self.t.leaf(Node::Int(0)),
                self.t.leaf(Node::Int(1)),
                self.t.leaf(Node::Int(n)),
            ];
            let ar = self.t.op(OpName::Arange, args).map_err(Self::tyerr(span))?;
            let mut shape = vec![1; k];
            shape[d] = mask.shape[d];
            let ar = self.reshape_value(ar, &shape, span)?;
            list.push(FV::Tensor(self.fresh(ar, None, span)?));
        }
        for (src, d) in sels {
            let zero = self.full(&[], d, Scalar::I(0)).map_err(Self::tyerr(span))?;
            let (mi, s, z) = (self.t.at(m), self.t.at(src), self.t.at(zero));
            let w = self.t.op(OpName::Where, vec![mi, s, z]).map_err(Self::tyerr(span))?;
            list.push(FV::Tensor(self.fresh(w, None, span)?));
        }
        let rest = t.shape.len() - k - j;
        let widened = |shape: &[usize]| [shape, &vec![1; rest][..]].concat();
        let value = match v {
            // A selection's values are one per position where the mask holds; against written rows (`rest` > 0) PyTorch
            // would broadcast them along the rows' last dim, whose match with their count depends on the data.
            FV::Masked(sel) if sel.mask == m && sel.shape == mask.shape && sel.pos == 0 && rest == 0 => {
                let (d, _) = self.tensor_ty(sel.src, span)?;
                if d != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, d));
                }
                sel.src
            }
            FV::Tensor(x) if x.shape.iter().product::<usize>() == 1 => {
                // As `index_put_`: the value's dtype must be the destination's, and it must not overlap it.
                if self.roots[x.root].dtype != dt {
                    return diag(span, super::subscript::index_put_dtypes(dt, self.roots[x.root].dtype));
                }
                self.check_inplace(t, &[x], false, span)?;
                let x = self.read(x, span)?;
                let x = self.reshape_value(x, &[], span)?;
                self.cast(x, dt, span)?
            }
            FV::Tensor(_) | FV::Masked(_) => {
                return diag(
                    span,
                    "a write indexed by a boolean mask and selections made with it takes a number, a one-element \
                     tensor, or (where it writes single elements) a selection by the same mask: this value's match \
                     with the number of positions the mask selects depends on the data",
                )
            }
            number => self.scalar_tensor(number, Some(dt), span)?.0,
        };
        let FV::Tensor(old) = self.index_read(t, &list, span)? else { return Ok(None) };
        let old = self.read(&old, span)?;
        let holds = self.reshape_value(m, &widened(&mask.shape), span)?;
        let (h, x, o) = (self.t.at(holds), self.t.at(value), self.t.at(old));
        let new = self.t.op(OpName::Where, vec![h, x, o]).map_err(Self::tyerr(span))?;
        let new = FV::Tensor(self.fresh(new, None, span)?);
        self.index_write(t, &list, &new, false, span)?;
        Ok(Some(()))
    }
}
