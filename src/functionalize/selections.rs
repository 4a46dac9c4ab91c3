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
use super::Fz;
use crate::diag::Span;
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
            out.push(FV::Masked(Box::new((g, m, cond.shape.clone(), 0, span, true))));
        }
        Ok(FV::Tuple(Rc::new(out)))
    }

    /// `torch.where(c)`, `torch.nonzero(c, as_tuple=True)`, `c.nonzero(as_tuple=True)` (`torch_call`: from
    /// `torch`); `None` for any other call.
    pub(super) fn where_call(
        &mut self,
        torch_call: bool,
        name: &str,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let as_tuple = matches!(kw, [(k, FV::Bool(true))] if k == "as_tuple");
        match (name, pos, kw.is_empty()) {
            ("where", [FV::Tensor(c)], true) | ("nonzero", [FV::Tensor(c)], false)
                if torch_call && (name == "where" || as_tuple) =>
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
        let (_, mshape) = self.tensor_ty(sel.1, span)?;
        let after = sel.2.len() - sel.3 - mshape.len();
        Ok((mshape, after))
    }

    /// `where(mask, values, fill)` over a selection's view: its values where the mask holds, `fill` elsewhere.
    fn sel_filled(&mut self, sel: &Sel, fill: Scalar, span: Span) -> FR<TId> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        let mut bshape = vec![1; sel.3];
        bshape.extend(&mshape);
        bshape.extend(std::iter::repeat_n(1, after));
        let mb = self.reshape_value(sel.1, &bshape, span)?;
        let (dt, _) = self.tensor_ty(sel.0, span)?;
        let fill = self.full(&[], dt, fill).map_err(Self::tyerr(span))?;
        let (mt, st, ft) = (self.t.at(mb), self.t.at(sel.0), self.t.at(fill));
        self.t.op(OpName::Where, vec![mt, st, ft]).map_err(Self::tyerr(span))
    }

    /// The selection made again from `r`, a result computed over `like`'s whole view whose mask dims now start at
    /// `pos`; `None` where `r` does not keep them there.
    fn reselect(&mut self, like: &Sel, r: &FV, pos: usize, span: Span) -> FR<Option<FV>> {
        let FV::Tensor(r) = r else { return Ok(None) };
        let (mshape, _) = self.sel_dims(like, span)?;
        if r.shape.len() < pos + mshape.len() || r.shape[pos..pos + mshape.len()] != mshape[..] {
            return Ok(None);
        }
        let v = self.read(r, span)?;
        Ok(Some(FV::Masked(Box::new((v, like.1, r.shape.clone(), pos, like.4, like.5)))))
    }

    /// A dim of the selection as PyTorch sees it (its selected dim one dim at `pos`) as a dim of its view; `None`
    /// for the selected dim.
    fn view_dim(&mut self, sel: &Sel, d: i64, span: Span) -> FR<Option<usize>> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        let d = wrap_dim(d, sel.3 + 1 + after).map_err(err(span))?;
        Ok(match d.cmp(&sel.3) {
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
                    if s.1 != first.1 || s.3 != 0 || after != after0 {
                        return diag(
                            span,
                            "indexing with index lists of data-dependent length made by different masks (or of \
                             different ranks): how they broadcast depends on the data",
                        );
                    }
                    let (dt, _) = self.tensor_ty(s.0, span)?;
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
        match self.reselect(&first, &v, pos, span)? {
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
        if ix.3 != 0 || after != 0 || src.1 != ix.1 || src.3 != d || safter + d + 1 != x.shape.len().max(1) {
            return diag(
                span,
                "index_add_ with an index list of data-dependent length takes a source selected by the same mask, \
                 its selected dim at `dim`: otherwise their lengths match only depending on the data",
            );
        }
        if x.shape.get(d).is_some_and(|&n| n == 0) {
            return diag(span, "an index list of data-dependent length into a dim of size 0");
        }
        let mut s = FV::Masked(src);
        if let Some(al) = a.opt(4, "alpha").cloned() {
            s = self.elementwise(Binary::Mul, &[s, al], span)?;
        }
        let FV::Masked(src) = s else { return masked_use(&s) };
        let n: usize = mshape.iter().product();
        let i = self.sel_filled(&ix, Scalar::I(0), span)?;
        let i = self.reshape_value(i, &[n], span)?;
        let (sd, _) = self.tensor_ty(src.0, span)?;
        let zero = if sd.is_float() { Scalar::F(-0.0) } else { Scalar::I(0) };
        let v = self.sel_filled(&src, zero, span)?;
        let mut vshape = src.2[..d].to_vec();
        vshape.push(n);
        vshape.extend(&src.2[d + mshape.len()..]);
        let v = self.reshape_value(v, &vshape, span)?;
        let (i, v) = (FV::Tensor(self.fresh(i, None, span)?), FV::Tensor(self.fresh(v, None, span)?));
        let args = A::new(vec![FV::Tensor(x), FV::Int(d as i64), i, v], vec![], span, name.into());
        Ok(Some(match name {
            "index_add_" => self.inplace(name, &args)?,
            _ => self.torch("index_add", &args, false)?,
        }))
    }

    /// A selection's attribute: `shape` (its selected dim a number known at run time), `dtype`, `ndim`.
    pub(super) fn masked_attribute(&mut self, sel: &Sel, name: &str, span: Span) -> FR<Option<FV>> {
        let (mshape, after) = self.sel_dims(sel, span)?;
        Ok(Some(match name {
            "dtype" => FV::DType(self.tensor_ty(sel.0, span)?.0),
            "ndim" => FV::Int((sel.3 + 1 + after) as i64),
            "shape" => {
                let m = FV::Tensor(self.fresh(sel.1, None, span)?);
                let count = self.torch("sum", &A::new(vec![m], vec![], span, "sum".into()), true)?;
                let FV::Tensor(count) = count else { return Ok(None) };
                let count = self.read(&count, span)?;
                let mut dims: Vec<FV> = sel.2[..sel.3].iter().map(|&n| FV::Int(n as i64)).collect();
                dims.push(self.run_time_int(count, span)?);
                dims.extend(sel.2[sel.3 + mshape.len()..].iter().map(|&n| FV::Int(n as i64)));
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
        if rest.iter().chain(kw.iter().map(|(_, v)| v)).any(|v| super::state::find_masked(v).is_some()) {
            return Ok(match (name, rest) {
                ("add" | "sub" | "mul" | "div" | "maximum" | "minimum", [other]) if kw.is_empty() => {
                    let op = match name {
                        "add" => Binary::Add,
                        "sub" => Binary::Sub,
                        "mul" => Binary::Mul,
                        "div" => Binary::Div,
                        "maximum" => Binary::Maximum,
                        _ => Binary::Minimum,
                    };
                    Some(self.elementwise(op, &[FV::Masked(Box::new(sel.clone())), other.clone()], span)?)
                }
                _ => None,
            });
        }
        let (mshape, after) = self.sel_dims(sel, span)?;
        let x = FV::Tensor(self.fresh(sel.0, None, span)?);
        let call = |s: &mut Self, op: &str, rest: Vec<FV>, kw: Vec<(String, FV)>| -> FR<FV> {
            let a = A::new([vec![x.clone()], rest].concat(), kw, span, op.into());
            let r = s.torch(op, &a, true)?;
            a.check_keywords(op)?;
            Ok(r)
        };
        if POINTWISE.contains(&name) {
            let r = call(self, name, rest.to_vec(), kw.to_vec())?;
            return match r {
                FV::Tensor(ref t) if t.shape == sel.2 => self.reselect(sel, &r, sel.3, span),
                _ => Ok(None),
            };
        }
        if matches!(name, "linear" | "matmul" | "mm") {
            let w = rest.first().or_else(|| kw.iter().find(|(k, _)| k == "weight" || k == "other").map(|(_, v)| v));
            let ok = match w {
                Some(FV::Tensor(w)) => after >= 1 && w.shape.len() <= 2 && (name != "mm" || sel.3 + after == 1),
                _ => false,
            };
            if !ok {
                return Ok(None);
            }
            let op = if name == "mm" { "matmul" } else { name };
            let r = call(self, op, rest.to_vec(), kw.to_vec())?;
            return self.reselect(sel, &r, sel.3, span);
        }
        if matches!(name, "reshape" | "view") {
            return self.masked_reshape(sel, rest, kw, &x, span);
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
        let before = mapped.iter().filter(|&&v| v < sel.3).count();
        *slot = match slot {
            FV::Int(_) => FV::Int(mapped[0] as i64),
            _ => FV::Tuple(Rc::new(mapped.iter().map(|&v| FV::Int(v as i64)).collect())),
        };
        let reduces = !matches!(name, "softmax" | "log_softmax" | "cumsum" | "cumprod");
        let pos = if reduces && !keepdim { sel.3 - before } else { sel.3 };
        let _ = mshape;
        let r = call(self, name, rest, kw)?;
        match r {
            FV::Named(items, names) => {
                let mut out = Vec::new();
                for it in items.iter() {
                    match self.reselect(sel, it, pos, span)? {
                        Some(v) => out.push(v),
                        None => return Ok(None),
                    }
                }
                Ok(Some(FV::Named(Rc::new(out), names)))
            }
            r => self.reselect(sel, &r, pos, span),
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
        let post = &sel.2[sel.3 + mshape.len()..];
        let pre: usize = sel.2[..sel.3].iter().product();
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
        Ok(Some(FV::Masked(Box::new((v, sel.1, shape, k, sel.4, sel.5)))))
    }
}
