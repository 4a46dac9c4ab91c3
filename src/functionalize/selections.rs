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
//! it, its size used as a number other than in comparisons) is refused, located at the selection.

use super::ops::{err, A};
use super::state::{diag, masked_use, TId, TRef, FR, FV};
use super::Env;
use super::Fz;
use crate::diag::Span;
use crate::frontend::ast::{Expr, ExprKind};
use crate::ir::{Node, OpName};
use crate::tensor::ops::Binary;
use crate::tensor::views::wrap_dim;
use crate::tensor::{DType, Scalar};
use std::rc::Rc;

/// A selection's parts: the values over the whole view, the mask, the view's shape, the mask's first dim in it,
/// and where the selection was made (`masked.rs`).
type Sel = super::masked::Sel;

/// Pointwise ops a selection passes through as its own method, `torch.NAME` or `F.NAME`: the result has the
/// selection's shape and each element depends only on its own position (casts, activations, clamps).
const POINTWISE: &[&str] = &[
    "to",
    "float",
    "double",
    "half",
    "long",
    "int",
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
            out.push(FV::Masked(Box::new(Sel::new(g, m, cond.shape.clone(), 0, span, true))));
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
    fn grid(&mut self, shape: &[usize], d: usize, span: Span) -> FR<TId> {
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
    fn sel_dims(&mut self, sel: &Sel, span: Span) -> FR<(Vec<usize>, usize)> {
        let (_, mshape) = self.tensor_ty(sel.mask, span)?;
        let after = sel.shape.len() - sel.pos - mshape.len();
        Ok((mshape, after))
    }

    /// `where(mask, values, fill)` over a selection's view: its values where the mask holds, `fill` elsewhere.
    fn sel_filled(&mut self, sel: &Sel, fill: Scalar, span: Span) -> FR<TId> {
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
    fn reselect(&mut self, like: &Sel, r: &FV, pos: usize, view: bool, span: Span) -> FR<Option<FV>> {
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
    fn view_dim(&mut self, sel: &Sel, d: i64, span: Span) -> FR<Option<usize>> {
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
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let Some(first) = items.iter().find_map(|x| match x {
            FV::Masked(s) => Some(s.as_ref().clone()),
            _ => None,
        }) else {
            return Ok(None);
        };
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
                FV::Tensor(x) if !x.shape.is_empty() => {
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
            _ => None,
        };
        // Binary ops with another selection, a tensor or a number (`torch.min(a, b)` of two tensors only).
        if let (Some(op), [other], true) = (bin, rest, kw.is_empty()) {
            let two_tensors = matches!(other, FV::Tensor(_) | FV::Masked(_));
            if two_tensors || !matches!(name, "max" | "min") {
                return Ok(Some(self.elementwise(op, &[FV::Masked(Box::new(sel.clone())), other.clone()], span)?));
            }
        }
        if rest.iter().chain(kw.iter().map(|(_, v)| v)).any(|v| super::state::find_masked(v).is_some()) {
            return Ok(None);
        }
        let (mshape, after) = self.sel_dims(sel, span)?;
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
        let _ = mshape;
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
        let (mshape, after) = self.sel_dims(sel, span)?;
        let Some(k) = sizes.iter().position(|&n| n == -1) else { return Ok(None) };
        let post = &sel.shape[sel.pos + mshape.len()..];
        let pre: usize = sel.shape[..sel.pos].iter().product();
        let newpre = &sizes[..k];
        let tail: Vec<i64> = post.iter().map(|&n| n as i64).collect();
        if sizes[k + 1..] != tail[..] || sizes.len() - k - 1 != after || newpre.iter().any(|&n| n < 0) {
            return Ok(None);
        }
        if newpre.iter().product::<i64>() as usize != pre {
            return Ok(None);
        }
        let mut shape: Vec<usize> = newpre.iter().map(|&n| n as usize).collect();
        shape.extend(&mshape);
        shape.extend(post);
        let FV::Tensor(t) = x else { return Ok(None) };
        let v = self.read(t, span)?;
        let v = self.reshape_value(v, &shape, span)?;
        Ok(Some(FV::Masked(Box::new(sel.with(v, shape, k, true)))))
    }
}

impl<'m> Fz<'m> {
    /// `x[i, ...] = v` with index lists of data-dependent length (as in `masked_index_read`): an `index_put` of every
    /// position of the mask into `x` with one more row along the first listed dim, where the positions the mask does
    /// not hold write (and that row is then dropped). The value there is the gather `x[i, ...]` at index 0, which
    /// also raises PyTorch's error for a selected index out of range. `None` where no index is a selection.
    pub(super) fn masked_index_write(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<Option<()>> {
        let items: Vec<FV> = match idx {
            FV::Tuple(v) => v.as_ref().clone(),
            other => vec![other.clone()],
        };
        let Some(first) = items.iter().find_map(|x| match x {
            FV::Masked(s) => Some(s.as_ref().clone()),
            _ => None,
        }) else {
            return Ok(None);
        };
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
            let s = items.iter().find_map(|x| match x {
                FV::Masked(s) => Some(s.as_ref().clone()),
                _ => None,
            });
            let s = s.expect("a selection");
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

impl<'m> Fz<'m> {
    /// `sel[...]` with basic indices that leave the selected dim whole (`sel[:, 1]`, `sel[..., :4]`, `sel[:, None]`).
    pub(super) fn masked_getitem(&mut self, sel: &Sel, idx: &FV, span: Span) -> FR<Option<FV>> {
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

/// The objects of the selections `v` reaches (itself, through containers and closures' captured values).
pub(super) fn selection_objects(v: &FV, out: &mut Vec<TId>) {
    match v {
        FV::Masked(s) => out.push(s.obj),
        FV::Tuple(xs) | FV::Named(xs, _) => xs.iter().for_each(|x| selection_objects(x, out)),
        FV::List(xs) => xs.borrow().iter().for_each(|x| selection_objects(x, out)),
        FV::Dict(xs) => xs.borrow().iter().for_each(|(_, x)| selection_objects(x, out)),
        FV::Closure(_, kw) => kw.iter().for_each(|(_, x)| selection_objects(x, out)),
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
        let ExprKind::Name(n) = &obj.kind else { return masked_use(&FV::Masked(Box::new(sel.clone()))) };
        let me = FV::Masked(Box::new(sel.clone()));
        let r = match (base, pos) {
            ("add" | "sub" | "mul" | "div", [other]) if kw.is_empty() => {
                let op = match base {
                    "add" => Binary::Add,
                    "sub" => Binary::Sub,
                    "mul" => Binary::Mul,
                    _ => Binary::Div,
                };
                Some(self.elementwise(op, &[me.clone(), other.clone()], span)?)
            }
            _ => match pos.iter().chain(kw.iter().map(|(_, v)| v)).any(|v| super::state::find_masked(v).is_some()) {
                true => None,
                false => self.masked_call(base, sel, pos, kw, span)?,
            },
        };
        let Some(FV::Masked(new)) = r else { return masked_use(&me) };
        if new.shape != sel.shape || new.pos != sel.pos {
            return masked_use(&me);
        }
        self.sole_holder(env, sel, span)?;
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
        env.insert(n.clone(), updated.clone());
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
        let target = t.clone();
        if !accumulate {
            return Ok(self.masked_index_write(&target, &items, &v, span)?.map(|()| FV::Tensor(target)));
        }
        let FV::Tuple(list) = &items else { unreachable!("made a tuple") };
        let Some(first) = list.iter().find_map(|x| match x {
            FV::Masked(s) => Some(s.as_ref().clone()),
            _ => None,
        }) else {
            return Ok(None);
        };
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
                let x = self.read(x, span)?;
                let x = self.reshape_value(x, &[], span)?;
                let mut shape = mshape.clone();
                shape.extend(std::iter::repeat_n(1, rest));
                let sizes: Vec<i64> = shape.iter().map(|&n| n as i64).collect();
                let x = self.fresh(x, None, span)?;
                let x = self.tview(&x, |t| t.expand(&sizes)).map_err(err(span))?;
                let x = self.read(&x, span)?;
                self.sel_filled(&Sel::new(x, first.mask, shape, 0, first.at, first.listed), zero, span)?
            }
            _ => return masked_use(&FV::Masked(Box::new(first))),
        };
        let vals = FV::Tensor(self.fresh(vals, None, span)?);
        let list = self.adv_list(&r);
        self.index_write(&r.view, &list, &vals, true, span)?;
        Ok(Some(FV::Tensor(target)))
    }
}
