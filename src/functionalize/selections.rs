//! Index lists whose length depends on the data, and the row-wise work done with them: `torch.where(condition)`
//! (and `nonzero(as_tuple=True)`) gives one list per dim of the condition, each a selection ([`FV::Masked`]) of the
//! condition's coordinate grid by the condition. The Hugging Face mixture-of-experts loop is the model:
//!
//! ```python
//! idx, top_x = torch.where(expert_mask[e])          # two selections of the [top_k, tokens] grid
//! x_e = hidden[None, top_x].reshape(-1, hidden_dim)  # a gather: a selection of the gathered rows
//! y_e = mlp(x_e) * routing_weights[top_x, idx, None] # row-wise ops and a gather: selections
//! out.index_add_(0, top_x, y_e)                      # only the selected rows are added
//! ```
//!
//! Everything is computed at every position of the condition and is meaningful where the condition holds, as for
//! boolean-mask selections (`masked.rs`): a gather reads index 0 at the other positions (a valid row, so nothing
//! there can fail), row-wise ops (pointwise ops, casts, `linear`/`matmul` by a fixed matrix, reductions and
//! softmaxes over the rows' own dims, reshapes that keep the selected dim) never mix positions, and `index_add_`
//! adds `-0.0` (the identity of floating-point addition, `-0.0` included) or integer 0 at the other positions.
//! What would depend on how many positions are selected (a reduction over the selected dim, broadcasting against
//! it, its size used as a number other than in comparisons) is refused, located at the selection. Writes,
//! `index_add_`/`index_put_` and in-place ops at such lists are in `list_writes.rs`.

use super::ops::{err, A};
use super::state::{diag, masked_use, TId, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::ops::Binary;
use crate::tensor::views::wrap_dim;
use crate::tensor::{DType, Scalar};
use std::rc::Rc;

/// A selection's parts: the values over the whole view, the mask, the view's shape, the mask's first dim in it,
/// and where the selection was made (`masked.rs`).
pub(super) type Sel = super::masked::Sel;

/// Pointwise ops a selection passes through as its own method, `torch.NAME` or `F.NAME`: the result has the
/// selection's shape and each element depends only on its own position (casts, activations, clamps).
const POINTWISE: &[&str] = &[
    "atan",
    "arctan",
    "asin",
    "arcsin",
    "acos",
    "arccos",
    "tan",
    "sinh",
    "cosh",
    "log2",
    "log10",
    "exp2",
    "deg2rad",
    "rad2deg",
    "frac",
    "zeros_like",
    "ones_like",
    "full_like",
    "empty_like",
    "to",
    "float",
    "double",
    "half",
    "long",
    "int",
    "short",
    "char",
    "byte",
    "bool",
    "type",
    "type_as",
    "clone",
    "contiguous",
    "detach",
    "clamp",
    "clip",
    "clamp_min",
    "clamp_max",
    "relu",
    "silu",
    "gelu",
    "sigmoid",
    "tanh",
    "softplus",
    "leaky_relu",
    "elu",
    "relu6",
    "hardtanh",
    "hardswish",
    "hardsigmoid",
    "mish",
    "logsigmoid",
    "nan_to_num",
    "square",
    "abs",
];

/// Ops along given dims (`dim` first after the input): row-wise where no given dim is the selected one.
const ALONG: &[&str] = &[
    "softmax",
    "log_softmax",
    "sum",
    "mean",
    "amax",
    "amin",
    "max",
    "min",
    "argmax",
    "argmin",
    "prod",
    "cumsum",
    "cumprod",
    "logsumexp",
    "all",
    "any",
];

/// A subscript's items, and the first selection among them.
pub(super) fn index_items(idx: &FV) -> (Vec<FV>, Option<Sel>) {
    let items: Vec<FV> = match idx {
        FV::Tuple(v) => v.as_ref().clone(),
        other => vec![other.clone()],
    };
    let first = items.iter().find_map(|x| match x {
        FV::Masked(s) => Some(s.as_ref().clone()),
        _ => None,
    });
    (items, first)
}

impl<'m> Fz<'m> {
    /// `torch.where(condition)`: per dim of the condition, the selection of its coordinates where it holds.
    pub(super) fn where_indices(&mut self, cond: &TRef, span: Span) -> FR<FV> {
        if cond.shape.is_empty() {
            let why = super::python::data_dependent("where", 1, 0, false).expect("where with one argument");
            return diag(span, why);
        }
        let m = if self.roots[cond.root].dtype == DType::Bool {
            self.read(cond, span)?
        } else {
            match self.elementwise(Binary::Ne, &[FV::Tensor(cond.clone()), FV::Int(0)], span)? {
                FV::Tensor(t) => self.read(&t, span)?,
                _ => unreachable!("a tensor compared with a number"),
            }
        };
        let mut out = Vec::new();
        for d in 0..cond.shape.len() {
            let g = self.grid(&cond.shape, d, span)?;
            out.push(FV::Masked(Box::new(Sel::new(
                g,
                m,
                cond.shape.clone(),
                0,
                span,
                super::state::SelOrigin::Listed,
            ))));
        }
        Ok(FV::Tuple(Rc::new(out)))
    }

    /// `torch.where(c)`, `torch.nonzero(c, as_tuple=True)`, `c.nonzero(as_tuple=True)` (`method`: the last form;
    /// else `torch_call`: from `torch`); `None` for any other call.
    pub(super) fn where_call(
        &mut self,
        method: bool,
        torch_call: bool,
        name: &str,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let as_tuple = matches!(kw, [(k, FV::Bool(true))] if k == "as_tuple");
        // `nonzero()` (`as_tuple=False`), `argwhere`: the lists stacked into [N, ndim], as mmdetection's
        // `(labels > 0).nonzero().squeeze(1)` takes them.
        let as_rows = kw.is_empty() || matches!(kw, [(k, FV::Bool(false))] if k == "as_tuple");
        if let ("nonzero" | "argwhere", [FV::Tensor(c)], true) = (name, pos, as_rows && (torch_call || method)) {
            if c.shape.is_empty() {
                return Ok(None);
            }
            let lists = self.where_indices(c, span)?;
            let list = FV::List(Rc::new(std::cell::RefCell::new(lists.items().unwrap_or_default())));
            return self.masked_join("stack", &[list, FV::Int(1)], &[], span);
        }
        match (name, pos, kw.is_empty()) {
            ("where", [FV::Tensor(c)], true) | ("nonzero", [FV::Tensor(c)], false)
                if (torch_call && name == "where") || ((torch_call || method) && as_tuple) =>
            {
                Ok(Some(self.where_indices(c, span)?))
            }
            _ => Ok(None),
        }
    }

    /// The int64 coordinate along dim `d` at every position of `shape`.
    pub(super) fn grid(&mut self, shape: &[usize], d: usize, span: Span) -> FR<TId> {
        let args = vec![
            self.t.leaf(Node::DType(DType::I64)),
            self.t.leaf(Node::Int(0)),
            self.t.leaf(Node::Int(1)),
            self.t.leaf(Node::Int(shape[d] as i64)),
        ];
        let ar = self.t.op(OpName::Arange, args).map_err(Self::tyerr(span))?;
        let mut one = vec![1; shape.len()];
        one[d] = shape[d];
        let ar = self.reshape_value(ar, &one, span)?;
        let ar = self.fresh(ar, None, span)?;
        let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
        let full = self.tview(&ar, |t| t.expand(&sizes)).map_err(err(span))?;
        self.read(&full, span)
    }

    /// The mask's shape, and the number of dims after the mask's in the selection's view.
    pub(super) fn sel_dims(&mut self, sel: &Sel, span: Span) -> FR<(Vec<usize>, usize)> {
        let (_, mshape) = self.tensor_ty(sel.mask, span)?;
        let after = sel.shape.len() - sel.pos - mshape.len();
        Ok((mshape, after))
    }

    /// `where(mask, values, fill)` over a selection's view: its values where the mask holds, `fill` elsewhere.
    pub(super) fn sel_filled(&mut self, sel: &Sel, fill: Scalar, span: Span) -> FR<TId> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        let mut bshape = vec![1; sel.pos];
        bshape.extend(&mshape);
        bshape.extend(std::iter::repeat_n(1, after));
        let mb = self.reshape_value(sel.mask, &bshape, span)?;
        let (dt, _) = self.tensor_ty(sel.src, span)?;
        let fill = self.full(&[], dt, fill).map_err(Self::tyerr(span))?;
        let (mt, st, ft) = (self.t.at(mb), self.t.at(sel.src), self.t.at(fill));
        self.t.op(OpName::Where, vec![mt, st, ft]).map_err(Self::tyerr(span))
    }

    /// The selection made again from `r`, a result computed over `like`'s whole view whose mask dims now start at
    /// `pos` (a view of `like` where `view`); `None` where `r` does not keep them there.
    pub(super) fn reselect(&mut self, like: &Sel, r: &FV, pos: usize, view: bool, span: Span) -> FR<Option<FV>> {
        let FV::Tensor(r) = r else { return Ok(None) };
        let (mshape, _) = self.sel_dims(like, span)?;
        if r.shape.len() < pos + mshape.len() || r.shape[pos..pos + mshape.len()] != mshape[..] {
            return Ok(None);
        }
        let v = self.read(r, span)?;
        Ok(Some(FV::Masked(Box::new(like.with(v, r.shape.clone(), pos, view)))))
    }

    /// A dim of the selection as PyTorch sees it (its selected dim one dim at `pos`) as a dim of its view; `None`
    /// for the selected dim.
    pub(super) fn view_dim(&mut self, sel: &Sel, d: i64, span: Span) -> FR<Option<usize>> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        let d = wrap_dim(d, sel.pos + 1 + after).map_err(err(span))?;
        Ok(match d.cmp(&sel.pos) {
            std::cmp::Ordering::Less => Some(d),
            std::cmp::Ordering::Equal => None,
            std::cmp::Ordering::Greater => Some(d + mshape.len() - 1),
        })
    }

    /// `x[i, j, ...]` where some indices are selections (made by one mask, each over the mask alone): a gather of
    /// every position of the mask, index 0 where it does not hold. `None` where no index is a selection.
    pub(super) fn masked_index_read(&mut self, t: &TRef, idx: &FV, span: Span) -> FR<Option<FV>> {
        let idx = &self.mask_items_as_lists(idx, span)?;
        let (items, first) = index_items(idx);
        let Some(first) = first else { return Ok(None) };
        let (_, after0) = self.sel_dims(&first, span)?;
        let mut dense = Vec::with_capacity(items.len());
        for it in &items {
            match it {
                FV::Masked(s) => {
                    let (_, after) = self.sel_dims(s, span)?;
                    if s.mask != first.mask || s.pos != 0 || after != after0 {
                        return diag(
                            span,
                            "indexing with index lists of data-dependent length made by different masks (or of \
                             different ranks): how they broadcast depends on the data",
                        );
                    }
                    let (dt, _) = self.tensor_ty(s.src, span)?;
                    if dt.is_float() || dt == DType::Bool {
                        return diag(span, "tensors used as indices must be long, int, byte or bool tensors");
                    }
                    let d = self.sel_filled(s, Scalar::I(0), span)?;
                    dense.push(FV::Tensor(self.fresh(d, None, span)?));
                }
                // An index tensor broadcasts against the selections' shape as PyTorch sees it (`[n, after...]`):
                // where nothing of it meets the selected dim but ones, its broadcast does not depend on `n`
                // (chameleon's `logits[torch.where(m)[0].unsqueeze(1), token_ids] = -inf`).
                FV::Tensor(x)
                    if !x.shape.is_empty()
                        && !(x.shape.len() <= after0 || (x.shape.len() == after0 + 1 && x.shape[0] == 1)) =>
                {
                    return diag(
                        span,
                        "an index tensor next to an index list of data-dependent length: how they broadcast \
                         depends on the data",
                    )
                }
                FV::List(_) => return diag(span, "a list index next to an index list of data-dependent length"),
                other => dense.push(other.clone()),
            }
        }
        let r = self.resolve(t, &FV::Tuple(Rc::new(dense)), span)?;
        for (p, _) in &r.adv {
            if r.view.shape[*p] == 0 {
                return diag(span, "an index list of data-dependent length into a dim of size 0");
            }
        }
        let list = self.adv_list(&r);
        let placed: Vec<usize> = (0..list.len()).filter(|&k| !matches!(list[k], FV::None)).collect();
        let adjacent = placed.windows(2).all(|w| w[1] == w[0] + 1);
        let pos = if adjacent { placed[0] } else { 0 };
        let v = self.index_read(&r.view, &list, span)?;
        match self.reselect(&first, &v, pos, false, span)? {
            Some(v) => Ok(Some(v)),
            None => masked_use(&FV::Masked(Box::new(first))),
        }
    }

    /// A selection's attribute: `shape` (its selected dim a number known at run time), `dtype`, `ndim`.
    pub(super) fn masked_attribute(&mut self, sel: &Sel, name: &str, span: Span) -> FR<Option<FV>> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        Ok(Some(match name {
            "dtype" => FV::DType(self.tensor_ty(sel.src, span)?.0),
            "ndim" => FV::Int((sel.pos + 1 + after) as i64),
            "shape" => {
                let m = FV::Tensor(self.fresh(sel.mask, None, span)?);
                let count = self.torch("sum", &A::new(vec![m], vec![], span, "sum".into()), true)?;
                let FV::Tensor(count) = count else { return Ok(None) };
                let count = self.read(&count, span)?;
                let mut dims: Vec<FV> = sel.shape[..sel.pos].iter().map(|&n| FV::Int(n as i64)).collect();
                dims.push(self.run_time_int(count, span)?);
                dims.extend(sel.shape[sel.pos + mshape.len()..].iter().map(|&n| FV::Int(n as i64)));
                FV::Tuple(Rc::new(dims))
            }
            _ => return Ok(None),
        }))
    }

    /// The row-wise calls on a selection `sel` (the first argument, or the receiver): pointwise ops, ops along
    /// other dims, `linear`/`matmul` by a fixed matrix, reshapes keeping the selected dim. `None` for others.
    pub(super) fn lifted_call(
        &mut self,
        name: &str,
        sel: &Sel,
        rest: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let bin = match name {
            "add" => Some(Binary::Add),
            "sub" => Some(Binary::Sub),
            "mul" => Some(Binary::Mul),
            "div" => Some(Binary::Div),
            "maximum" | "max" => Some(Binary::Maximum),
            "minimum" | "min" => Some(Binary::Minimum),
            "eq" => Some(Binary::Eq),
            "ne" => Some(Binary::Ne),
            "lt" => Some(Binary::Lt),
            "le" => Some(Binary::Le),
            "gt" => Some(Binary::Gt),
            "ge" => Some(Binary::Ge),
            "atan2" => Some(Binary::Atan2),
            "pow" => Some(Binary::Pow),
            "floor_divide" => Some(Binary::FloorDiv),
            "remainder" => Some(Binary::Rem),
            "fmod" => Some(Binary::Fmod),
            _ => None,
        };
        // Binary ops with another selection, a tensor or a number (`torch.min(a, b)` of two tensors only).
        if let (Some(op), [other], true) = (bin, rest, kw.is_empty()) {
            let two_tensors = matches!(other, FV::Tensor(_) | FV::Masked(_));
            if two_tensors || !matches!(name, "max" | "min") {
                return Ok(Some(self.elementwise(op, &[FV::Masked(Box::new(sel.clone())), other.clone()], span)?));
            }
        }
        if matches!(
            name,
            "l1_loss" | "mse_loss" | "smooth_l1_loss" | "binary_cross_entropy_with_logits" | "cross_entropy"
        ) {
            return self.masked_loss(name, sel, rest, kw, span);
        }
        if rest.iter().chain(kw.iter().map(|(_, v)| v)).any(|v| super::state::find_masked(v).is_some()) {
            return Ok(None);
        }
        let (_, after) = self.sel_dims(sel, span)?;
        let x = FV::Tensor(self.fresh(sel.src, None, span)?);
        let call = |s: &mut Self, op: &str, rest: Vec<FV>, kw: Vec<(String, FV)>| -> FR<FV> {
            let a = A::new([vec![x.clone()], rest].concat(), kw, span, op.into());
            let r = s.torch(op, &a, true)?;
            a.check_keywords(op)?;
            Ok(r)
        };
        // Tensor arguments broadcast against the rows only (`clamp(min=t)`), but give only a dtype to `to`.
        let reaches = |v: &FV| matches!(v, FV::Tensor(t) if t.shape.len() > after);
        let args_reach = rest.iter().chain(kw.iter().map(|(_, v)| v)).any(reaches);
        if POINTWISE.contains(&name) {
            if args_reach && !matches!(name, "to" | "type_as") {
                return Ok(None);
            }
            let r = call(self, name, rest.to_vec(), kw.to_vec())?;
            return match r {
                FV::Tensor(ref t) if t.shape == sel.shape => self.reselect(sel, &r, sel.pos, false, span),
                _ => Ok(None),
            };
        }
        if matches!(name, "linear" | "matmul" | "mm") {
            let w = rest.first().or_else(|| kw.iter().find(|(k, _)| k == "weight" || k == "other").map(|(_, v)| v));
            let bias = rest.get(1).or_else(|| kw.iter().find(|(k, _)| k == "bias").map(|(_, v)| v));
            let ok = match w {
                Some(FV::Tensor(w)) => after >= 1 && w.shape.len() <= 2 && (name != "mm" || sel.pos + after == 1),
                _ => false,
            } && !matches!(bias, Some(FV::Tensor(b)) if b.shape.len() > 1);
            if !ok {
                return Ok(None);
            }
            let op = if name == "mm" { "matmul" } else { name };
            let r = call(self, op, rest.to_vec(), kw.to_vec())?;
            return self.reselect(sel, &r, sel.pos, false, span);
        }
        if let Some(r) = self.masked_method(name, sel, rest, kw, span)? {
            return Ok(Some(r));
        }
        if matches!(name, "reshape" | "view") {
            return self.masked_reshape(sel, rest, kw, &x, span);
        }
        if matches!(name, "squeeze" | "unsqueeze") && kw.is_empty() {
            return self.masked_squeeze(name, sel, rest, span);
        }
        if !ALONG.contains(&name) {
            return Ok(None);
        }
        // The dims, given as the first argument or `dim=`; every one must be the rows' own.
        let (mut rest, mut kw) = (rest.to_vec(), kw.to_vec());
        let keep = |v: &FV| matches!(v, FV::Bool(true));
        let keepdim = kw.iter().any(|(k, v)| k == "keepdim" && keep(v)) || rest.get(1).is_some_and(keep);
        let slot = match kw.iter_mut().find(|(k, _)| k == "dim") {
            Some((_, v)) => v,
            None => match rest.first_mut() {
                Some(v) => v,
                None => return Ok(None),
            },
        };
        let dims: Vec<i64> = match slot {
            FV::Int(d) => vec![*d],
            FV::Tuple(ds) if ds.iter().all(|d| matches!(d, FV::Int(_))) => {
                ds.iter().map(|d| if let FV::Int(d) = d { *d } else { 0 }).collect()
            }
            _ => return Ok(None),
        };
        let mut mapped = Vec::new();
        for d in &dims {
            match self.view_dim(sel, *d, span)? {
                Some(v) => mapped.push(v),
                None => return Ok(None),
            }
        }
        let before = mapped.iter().filter(|&&v| v < sel.pos).count();
        *slot = match slot {
            FV::Int(_) => FV::Int(mapped[0] as i64),
            _ => FV::Tuple(Rc::new(mapped.iter().map(|&v| FV::Int(v as i64)).collect())),
        };
        let reduces = !matches!(name, "softmax" | "log_softmax" | "cumsum" | "cumprod");
        let pos = if reduces && !keepdim { sel.pos - before } else { sel.pos };
        let r = call(self, name, rest, kw)?;
        match r {
            FV::Named(items, names) => {
                let mut out = Vec::new();
                for it in items.iter() {
                    match self.reselect(sel, it, pos, false, span)? {
                        Some(v) => out.push(v),
                        None => return Ok(None),
                    }
                }
                Ok(Some(FV::Named(Rc::new(out), names)))
            }
            r => self.reselect(sel, &r, pos, false, span),
        }
    }

    /// `sel.reshape(*shape)` / `view`: the dims before the selected one may regroup (same product), the selected dim
    /// is `-1`, and the dims after it stay as they are.
    fn masked_reshape(&mut self, sel: &Sel, rest: &[FV], kw: &[(String, FV)], x: &FV, span: Span) -> FR<Option<FV>> {
        if !kw.is_empty() {
            return Ok(None);
        }
        let items: Vec<FV> = match rest {
            [FV::Tuple(t)] => t.as_ref().clone(),
            [FV::List(l)] => l.borrow().clone(),
            other => other.to_vec(),
        };
        let mut sizes = Vec::new();
        for it in &items {
            match it {
                FV::Int(n) => sizes.push(*n),
                _ => return Ok(None),
            }
        }
        let (mshape, _) = self.sel_dims(sel, span)?;
        let Some(k) = sizes.iter().position(|&n| n == -1) else { return Ok(None) };
        let post = &sel.shape[sel.pos + mshape.len()..];
        let pre: usize = sel.shape[..sel.pos].iter().product();
        let newpre = &sizes[..k];
        // The dims after the selected one may regroup among themselves (`[N, 1] -> [N]`).
        let tail = &sizes[k + 1..];
        let post_n: usize = post.iter().product();
        if tail.iter().any(|&n| n < 0)
            || tail.iter().product::<i64>() as usize != post_n
            || newpre.iter().any(|&n| n < 0)
        {
            return Ok(None);
        }
        if newpre.iter().product::<i64>() as usize != pre {
            return Ok(None);
        }
        let mut shape: Vec<usize> = newpre.iter().map(|&n| n as usize).collect();
        shape.extend(&mshape);
        shape.extend(tail.iter().map(|&n| n as usize));
        let FV::Tensor(t) = x else { return Ok(None) };
        let v = self.read(t, span)?;
        let v = self.reshape_value(v, &shape, span)?;
        Ok(Some(FV::Masked(Box::new(sel.with(v, shape, k, true)))))
    }
}

impl<'m> Fz<'m> {
    /// `sel[...]` with basic indices that leave the selected dim whole (`sel[:, 1]`, `sel[..., :4]`, `sel[:, None]`).
    pub(super) fn masked_getitem(&mut self, sel: &Sel, idx: &FV, span: Span) -> FR<Option<FV>> {
        // `sel[m]` with `m` a boolean selection over the same positions (`xkis2[mask]` in torchvision's GIoU): a
        // selection where both masks hold, its values those of `sel`; a new tensor, as in PyTorch.
        if let FV::Masked(m) = idx {
            let (md, _) = self.tensor_ty(m.src, span)?;
            let (_, after) = self.sel_dims(sel, span)?;
            if md != DType::Bool
                || m.mask != sel.mask
                || m.pos != 0
                || sel.pos != 0
                || m.shape != sel.shape
                || after != 0
            {
                return Ok(None);
            }
            let both = self.sel_filled(m, Scalar::B(false), span)?;
            return Ok(Some(FV::Masked(Box::new(Sel { mask: both, obj: both, ..sel.clone() }))));
        }
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let (mshape, after) = self.sel_dims(sel, span)?;
        let rank = sel.pos + 1 + after;
        let named = items.iter().filter(|x| !matches!(x, FV::None | FV::Ellipsis)).count();
        if named > rank || items.iter().filter(|x| matches!(x, FV::Ellipsis)).count() > 1 {
            return Ok(None);
        }
        let full = |x: &FV| matches!(x, FV::Slice(None, None, None));
        let (mut dense, mut d, mut pos) = (Vec::new(), 0usize, sel.pos);
        for it in &items {
            match it {
                FV::Ellipsis => {
                    for _ in 0..rank - named {
                        if d == sel.pos {
                            dense.extend(std::iter::repeat_n(FV::Slice(None, None, None), mshape.len()));
                        } else {
                            dense.push(FV::Slice(None, None, None));
                        }
                        d += 1;
                    }
                }
                FV::None => {
                    if d <= sel.pos {
                        pos += 1;
                    }
                    dense.push(FV::None);
                }
                x if d == sel.pos => {
                    if !full(x) {
                        return Ok(None);
                    }
                    dense.extend(std::iter::repeat_n(FV::Slice(None, None, None), mshape.len()));
                    d += 1;
                }
                FV::Int(_) | FV::Slice(..) => {
                    if d < sel.pos && matches!(it, FV::Int(_)) {
                        pos -= 1;
                    }
                    dense.push(it.clone());
                    d += 1;
                }
                _ => return Ok(None),
            }
        }
        let x = self.fresh(sel.src, None, span)?;
        let r = self.tensor_getitem(&x, &FV::Tuple(Rc::new(dense)), span)?;
        self.reselect(sel, &r, pos, true, span)
    }

    /// `torch.stack(sels, dim)` / `torch.cat(sels, dim)` of selections by one mask, along a dim of their rows.
    pub(super) fn masked_join(&mut self, name: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<Option<FV>> {
        let a = A::new(pos.to_vec(), kw.to_vec(), span, name.into());
        let Ok(items) = a.req(0, "tensors").map(|v| v.items().unwrap_or_default()) else { return Ok(None) };
        let mut sels = Vec::new();
        for it in &items {
            match it {
                FV::Masked(s) => sels.push(s.as_ref().clone()),
                _ => return Ok(None),
            }
        }
        let Some(first) = sels.first().cloned() else { return Ok(None) };
        let (mshape, after) = self.sel_dims(&first, span)?;
        for s in &sels {
            let (_, sa) = self.sel_dims(s, span)?;
            if s.mask != first.mask || s.pos != first.pos || sa != after {
                return Ok(None);
            }
        }
        let d = a.int_or(1, "dim", 0)?;
        let (dense_dim, pos) = if name == "stack" {
            let d = wrap_dim(d, first.pos + 2 + after).map_err(err(span))?;
            if d <= first.pos {
                (d, first.pos + 1)
            } else {
                (d + mshape.len() - 1, first.pos)
            }
        } else {
            match self.view_dim(&first, d, span)? {
                Some(v) => (v, first.pos),
                None => return Ok(None),
            }
        };
        let mut dense = Vec::new();
        for s in &sels {
            dense.push(FV::Tensor(self.fresh(s.src, None, span)?));
        }
        let list = FV::List(Rc::new(std::cell::RefCell::new(dense)));
        let r = self.torch(name, &A::new(vec![list, FV::Int(dense_dim as i64)], vec![], span, name.into()), false)?;
        self.reselect(&first, &r, pos, false, span)
    }

    /// `sel.unsqueeze(d)` / `sel.squeeze(d)` at a dim other than the selected one.
    fn masked_squeeze(&mut self, name: &str, sel: &Sel, rest: &[FV], span: Span) -> FR<Option<FV>> {
        let [FV::Int(d)] = rest else { return Ok(None) };
        let (mshape, after) = self.sel_dims(sel, span)?;
        let x = self.fresh(sel.src, None, span)?;
        let (dense, pos) = if name == "unsqueeze" {
            let d = wrap_dim(*d, sel.pos + 2 + after).map_err(err(span))?;
            if d <= sel.pos {
                (d, sel.pos + 1)
            } else {
                (d + mshape.len() - 1, sel.pos)
            }
        } else {
            match self.view_dim(sel, *d, span)? {
                Some(v) if x.shape[v] == 1 && v < sel.pos => (v, sel.pos - 1),
                Some(v) => (v, sel.pos),
                None => return Ok(None),
            }
        };
        let r = self.view_fv(&x, span, |t| {
            if name == "unsqueeze" {
                t.unsqueeze(dense as i64)
            } else {
                t.squeeze(Some(&[dense as i64]))
            }
        })?;
        self.reselect(sel, &r, pos, true, span)
    }
}

impl<'m> Fz<'m> {
    /// A loss between a selection and a target selected by the same mask (torchvision's `fastrcnn_loss`: smooth L1
    /// on the positive proposals' boxes): per position (`reduction="none"`) over the whole view, then summed or
    /// averaged over the selection. `cross_entropy` takes rows of class scores selected by a 1-d mask and their
    /// targets, the other positions' targets replaced by `ignore_index` (so none can be out of range); its mean
    /// divides by the number of selected targets that are not `ignore_index`, as PyTorch's does. Weights are
    /// refused.
    fn masked_loss(&mut self, name: &str, sel: &Sel, rest: &[FV], kw: &[(String, FV)], span: Span) -> FR<Option<FV>> {
        let target = match (rest, kw.iter().find(|(k, _)| k == "target")) {
            ([t], None) => t.clone(),
            ([], Some((_, t))) => t.clone(),
            _ => return Ok(None),
        };
        let FV::Masked(tg) = &target else { return Ok(None) };
        let allowed = ["reduction", "target", "beta", "ignore_index", "label_smoothing"];
        if kw.iter().any(|(k, _)| !allowed.contains(&k.as_str())) {
            return Ok(None);
        }
        let reduction = match kw.iter().find(|(k, _)| k == "reduction") {
            None => "mean".to_string(),
            Some((_, FV::Str(s))) => s.to_string(),
            Some(_) => return Ok(None),
        };
        let (mshape, after) = self.sel_dims(sel, span)?;
        let (_, tafter) = self.sel_dims(tg, span)?;
        if tg.mask != sel.mask || tg.pos != sel.pos || !matches!(reduction.as_str(), "none" | "sum" | "mean") {
            return Ok(None);
        }
        let ce = name == "cross_entropy";
        let ignore = match kw.iter().find(|(k, _)| k == "ignore_index") {
            None => -100,
            Some((_, FV::Int(i))) => *i,
            Some(_) => return Ok(None),
        };
        if ce && (sel.pos != 0 || mshape.len() != 1 || after != 1 || tafter != 0) || !ce && tg.shape != sel.shape {
            return Ok(None);
        }
        let x = FV::Tensor(self.fresh(sel.src, None, span)?);
        let t = if ce { self.sel_filled(tg, Scalar::I(ignore), span)? } else { tg.src };
        let t = FV::Tensor(self.fresh(t, None, span)?);
        let mut kw2: Vec<(String, FV)> =
            kw.iter().filter(|(k, _)| k != "reduction" && k != "target").cloned().collect();
        kw2.push(("reduction".into(), FV::Str("none".into())));
        let full = format!("torch.nn.functional.{name}");
        let a = A::new(vec![x, t], kw2, span, full.clone());
        let per = self.torch(name, &a, false)?;
        a.check_keywords(&full)?;
        let Some(FV::Masked(per)) = self.reselect(sel, &per, sel.pos, false, span)? else { return Ok(None) };
        if reduction == "none" {
            return Ok(Some(FV::Masked(per)));
        }
        if reduction == "sum" || !ce {
            return self.masked_call(&reduction, &per, &[], &[], span);
        }
        // Cross entropy's mean: over the selected targets that are not ignored.
        let total = self.masked_call("sum", &per, &[], &[], span)?.expect("a sum of a selection");
        let tgt = FV::Masked(Box::new(tg.as_ref().clone()));
        let counted = self.elementwise(Binary::Ne, &[tgt, FV::Int(ignore)], span)?;
        let FV::Masked(counted) = counted else { return Ok(None) };
        let n = self.masked_call("sum", &counted, &[], &[], span)?.expect("a sum of a selection");
        let (dt, _) = self.tensor_ty(per.src, span)?;
        let FV::Tensor(n) = n else { return Ok(None) };
        let n = self.read(&n, span)?;
        let n = self.cast(n, dt, span)?;
        let n = FV::Tensor(self.fresh(n, None, span)?);
        Ok(Some(self.elementwise(Binary::Div, &[total, n], span)?))
    }
}

impl<'m> Fz<'m> {
    /// `sel.unbind(d)`, `sel.chunk(k, d)`, `sel.split(size, d)` along a dim of the rows: a tuple of selections.
    fn masked_split(&mut self, name: &str, sel: &Sel, rest: &[FV], kw: &[(String, FV)], span: Span) -> FR<Option<FV>> {
        let dim_at = if name == "unbind" { 0 } else { 1 };
        let d = match (rest.get(dim_at), kw.iter().find(|(k, _)| k == "dim")) {
            (Some(FV::Int(d)), None) | (None, Some((_, FV::Int(d)))) => *d,
            (None, None) => 0,
            _ => return Ok(None),
        };
        if kw.iter().any(|(k, _)| k != "dim") || rest.len() > dim_at + 1 || rest.len() < dim_at {
            return Ok(None);
        }
        let Some(vd) = self.view_dim(sel, d, span)? else { return Ok(None) };
        let x = FV::Tensor(self.fresh(sel.src, None, span)?);
        let mut args = vec![x];
        args.extend(rest[..dim_at].iter().cloned());
        args.push(FV::Int(vd as i64));
        let a = A::new(args, vec![], span, name.into());
        let r = self.torch(name, &a, true)?;
        let items = r.items().unwrap_or_default();
        let pos = if name == "unbind" && vd < sel.pos { sel.pos - 1 } else { sel.pos };
        let mut out = Vec::new();
        for it in &items {
            match self.reselect(sel, it, pos, true, span)? {
                Some(v) => out.push(v),
                None => return Ok(None),
            }
        }
        Ok(Some(FV::Tuple(Rc::new(out))))
    }
}

impl<'m> Fz<'m> {
    /// A selection's methods that describe it or split it: `is_floating_point`, `dim`, `numel` and `size` (the
    /// selected dim's length a run-time number), `unbind`/`chunk`/`split` along the rows.
    fn masked_method(&mut self, name: &str, sel: &Sel, rest: &[FV], kw: &[(String, FV)], span: Span) -> FR<Option<FV>> {
        let (_, after) = self.sel_dims(sel, span)?;
        match (name, rest, kw.is_empty()) {
            ("is_floating_point", [], true) => return Ok(Some(FV::Bool(self.tensor_ty(sel.src, span)?.0.is_float()))),
            ("dim" | "ndimension", [], true) => return Ok(Some(FV::Int((sel.pos + 1 + after) as i64))),
            ("numel" | "nelement", [], true) => {
                let FV::Tuple(dims) = self.masked_attribute(sel, "shape", span)?.expect("a shape") else {
                    unreachable!("a tuple")
                };
                let mut n = FV::Int(1);
                for d in dims.iter() {
                    n = self.elementwise(Binary::Mul, &[n, d.clone()], span)?;
                }
                return Ok(Some(n));
            }
            ("size", [FV::Int(d)], true) => {
                let FV::Tuple(dims) = self.masked_attribute(sel, "shape", span)?.expect("a shape") else {
                    unreachable!("a tuple")
                };
                let d = wrap_dim(*d, dims.len()).map_err(err(span))?;
                return Ok(Some(dims[d].clone()));
            }
            ("unbind" | "chunk" | "split", ..) => return self.masked_split(name, sel, rest, kw, span),
            _ => {}
        }
        Ok(None)
    }
}
