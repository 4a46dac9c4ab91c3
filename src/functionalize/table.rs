//! The torch op table of the functionalizer, and tensor subscripts. Each op mirrors the reference interpreter's
//! (`crate::interp`) meaning; ops without a term form yet are reported, never approximated.

use std::rc::Rc;

use super::ops::{binary_op, err, unary_op, A};
use super::state::{diag, needs_static, Affine, Stop, TRef, FR, FV};
use super::Fz;
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::BinOp;
use crate::ir::{BoolLit, Node, OpName};
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Scalar, Tensor};

fn bin_of(op: BinOp) -> Option<Binary> {
    Some(match op {
        BinOp::Add => Binary::Add,
        BinOp::Sub => Binary::Sub,
        BinOp::Mul => Binary::Mul,
        BinOp::Div => Binary::Div,
        BinOp::FloorDiv => Binary::FloorDiv,
        BinOp::Mod => Binary::Rem,
        BinOp::Pow => Binary::Pow,
        BinOp::BitAnd => Binary::BitAnd,
        BinOp::BitOr => Binary::BitOr,
        BinOp::BitXor => Binary::BitXor,
        BinOp::MatMul => return None,
    })
}

/// A subscript resolved against a view: the basic-indexing view, and advanced indices into it (by position).
struct Resolved {
    view: TRef,
    adv: Vec<(usize, TRef)>,
}

impl<'m> Fz<'m> {
    pub(super) fn torch(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        let span = a.span;
        if let Some(u) = unary_op(name) {
            let x = FV::Tensor(a.tensor(0, "input")?);
            return self.unary(u, &x, span);
        }
        if let Some(b) = binary_op(name) {
            let x = self.operand_fv(a, 0, "input")?;
            let mut y = self.operand_fv(a, 1, "other")?;
            if let Some(alpha) = a.opt(2, "alpha").cloned() {
                y = self.elementwise(Binary::Mul, &[y, alpha], span)?;
            }
            if b == Binary::Div {
                if let Some(FV::Str(mode)) = a.opt(2, "rounding_mode") {
                    return match mode.as_ref() {
                        "floor" => self.elementwise(Binary::FloorDiv, &[x, y], span),
                        _ => diag(span, "div(rounding_mode='trunc') is not functionalized yet"),
                    };
                }
            }
            return self.elementwise(b, &[x, y], span);
        }
        let dims_kw = |a: &A| a.dims(1, "dim");
        match name {
            "logical_and" | "logical_or" | "logical_xor" => {
                let x = self.operand_fv(a, 0, "input")?;
                let y = self.operand_fv(a, 1, "other")?;
                let x = self.elementwise(Binary::Ne, &[x, FV::Int(0)], span)?;
                let y = self.elementwise(Binary::Ne, &[y, FV::Int(0)], span)?;
                let op = match name {
                    "logical_and" => Binary::BitAnd,
                    "logical_or" => Binary::BitOr,
                    _ => Binary::BitXor,
                };
                self.elementwise(op, &[x, y], span)
            }
            "clamp" | "clip" | "clamp_min" | "clamp_max" => {
                let x = a.tensor(0, "input")?;
                let (lo, hi) = match name {
                    "clamp_min" => (a.opt(1, "min").cloned(), None),
                    "clamp_max" => (None, a.opt(1, "max").cloned()),
                    _ => (a.opt(1, "min").cloned(), a.opt(2, "max").cloned()),
                };
                if lo.is_none() && hi.is_none() {
                    return diag(
                        span,
                        "torch.clamp: At least one of 'min' or 'max' must not be None",
                    );
                }
                let mut ops_ = vec![self.dummy_operand(&FV::Tensor(x.clone()))?];
                for b in lo.iter().chain(hi.iter()) {
                    ops_.push(self.dummy_operand(b)?);
                }
                let refs: Vec<&Operand> = ops_.iter().collect();
                let dt = ops::result_type(&refs);
                let xt = self.term_as(&FV::Tensor(x.clone()), dt, span)?;
                let none = self.t.leaf(Node::NoneLit);
                let l = match &lo {
                    Some(v) => self.term_as(v, dt, span)?,
                    None => none,
                };
                let h = match &hi {
                    Some(v) => self.term_as(v, dt, span)?,
                    None => none,
                };
                self.fresh_op(OpName::Clamp, vec![xt, l, h], Some(&x), span)
            }
            "where" => {
                let c = a.tensor(0, "condition")?;
                if self.roots[c.root].dtype != DType::Bool {
                    return diag(span, format!("where expected condition to be a boolean tensor, but got a tensor with dtype {}", self.roots[c.root].dtype.name()));
                }
                let x = self.operand_fv(a, 1, "input")?;
                let y = self.operand_fv(a, 2, "other")?;
                let (ox, oy) = (self.dummy_operand(&x)?, self.dummy_operand(&y)?);
                let dt = ops::result_type(&[&ox, &oy]);
                let ct = self.term_as(&FV::Tensor(c.clone()), DType::Bool, span)?;
                let xt = self.term_as(&x, dt, span)?;
                let yt = self.term_as(&y, dt, span)?;
                let layout = self.layout_operand(&[FV::Tensor(c), x, y], span)?;
                self.fresh_op(OpName::Where, vec![ct, xt, yt], layout.as_ref(), span)
            }
            "masked_fill" => {
                let x = a.tensor(0, "input")?;
                let m = a.tensor(1, "mask")?;
                if self.roots[m.root].dtype != DType::Bool {
                    return diag(span, "masked_fill_ only supports boolean masks");
                }
                let dt = self.roots[x.root].dtype;
                let v = match a.req(2, "value")?.clone() {
                    FV::Tensor(t) if !t.shape.is_empty() => {
                        return diag(span, format!("masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {} dimension(s).", t.shape.len()))
                    }
                    other => self.term_as(&other, dt, span)?,
                };
                let mt = self.term_as(&FV::Tensor(m.clone()), DType::Bool, span)?;
                let xt = self.term_as(&FV::Tensor(x.clone()), dt, span)?;
                let layout = self.layout_operand(&[FV::Tensor(m), FV::Tensor(x)], span)?;
                self.fresh_op(OpName::Where, vec![mt, v, xt], layout.as_ref(), span)
            }
            "triu" | "tril" => {
                let x = a.tensor(0, "input")?;
                let k = a.int_or(1, "diagonal", 0)?;
                let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
                let kk = self.t.leaf(Node::Int(k));
                self.fresh_op(
                    if name == "triu" {
                        OpName::Triu
                    } else {
                        OpName::Tril
                    },
                    vec![xt, kk],
                    None,
                    span,
                )
            }
            "softmax" | "log_softmax" | "cumsum" => {
                let x = a.tensor(0, "input")?;
                let dim = a.int(1, "dim")?;
                let dt = a.dtype(2, "dtype")?.unwrap_or(self.roots[x.root].dtype);
                let xt = self.term_as(&FV::Tensor(x), dt, span)?;
                let d = self.t.leaf(Node::Int(dim));
                let op = match name {
                    "softmax" => OpName::Softmax,
                    "log_softmax" => OpName::LogSoftmax,
                    _ => OpName::Cumsum,
                };
                self.fresh_op(op, vec![xt, d], None, span)
            }
            "sum" | "mean" | "nansum" => {
                let x = a.tensor(0, "input")?;
                let dims = dims_kw(a)?.unwrap_or_default();
                let keep = a.bool_or(2, "keepdim", false)?;
                let dt = a.dtype(3, "dtype")?;
                self.reduce_op(
                    if name == "mean" {
                        OpName::Mean
                    } else {
                        OpName::Sum
                    },
                    &x,
                    &dims,
                    keep,
                    dt,
                    span,
                )
            }
            "prod" => {
                let x = a.tensor(0, "input")?;
                let dims = a.opt_int(1, "dim")?.map(|d| vec![d]).unwrap_or_default();
                self.reduce_op(
                    OpName::Prod,
                    &x,
                    &dims,
                    a.bool_or(2, "keepdim", false)?,
                    None,
                    span,
                )
            }
            "amax" | "amin" | "any" | "all" => {
                let x = a.tensor(0, "input")?;
                let dims = dims_kw(a)?.unwrap_or_default();
                let op = match name {
                    "amax" => OpName::Amax,
                    "amin" => OpName::Amin,
                    "any" => OpName::Any,
                    _ => OpName::All,
                };
                self.reduce_op(op, &x, &dims, a.bool_or(2, "keepdim", false)?, None, span)
            }
            "max" | "min" => {
                let x = a.tensor(0, "input")?;
                let is_max = name == "max";
                match a.opt(1, "dim").cloned() {
                    None => {
                        if x.shape.iter().product::<usize>() == 0 {
                            return diag(span, format!("{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."));
                        }
                        self.reduce_op(
                            if is_max { OpName::Amax } else { OpName::Amin },
                            &x,
                            &[],
                            false,
                            None,
                            span,
                        )
                    }
                    Some(FV::Tensor(o)) => self.elementwise(
                        if is_max {
                            Binary::Maximum
                        } else {
                            Binary::Minimum
                        },
                        &[FV::Tensor(x), FV::Tensor(o)],
                        span,
                    ),
                    Some(d) => {
                        let dim = a.int_of(&d, "dim")?;
                        let keep = a.bool_or(2, "keepdim", false)?;
                        let xt =
                            self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
                        let (dd, kk) = (
                            self.t.leaf(Node::Int(dim)),
                            self.t.leaf(Node::Bool(BoolLit(keep))),
                        );
                        let (vo, io) = if is_max {
                            (OpName::MaxVal, OpName::MaxIdx)
                        } else {
                            (OpName::MinVal, OpName::MinIdx)
                        };
                        let v = self.fresh_op(vo, vec![xt, dd, kk], None, span)?;
                        let i = self.fresh_op(io, vec![xt, dd, kk], None, span)?;
                        Ok(FV::Named(Rc::new(vec![v, i]), &["values", "indices"]))
                    }
                }
            }
            "argmax" | "argmin" => {
                let x = a.tensor(0, "input")?;
                let keep = a.bool_or(2, "keepdim", false)?;
                let op = if name == "argmax" {
                    OpName::MaxIdx
                } else {
                    OpName::MinIdx
                };
                let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
                match a.opt_int(1, "dim")? {
                    Some(d) => {
                        let (dd, kk) = (
                            self.t.leaf(Node::Int(d)),
                            self.t.leaf(Node::Bool(BoolLit(keep))),
                        );
                        self.fresh_op(op, vec![xt, dd, kk], None, span)
                    }
                    None => {
                        let n: usize = x.shape.iter().product();
                        let flat = self.reshape_value(
                            super::state::TId {
                                id: xt,
                                depth: self.t.depth(),
                            },
                            &[n],
                            span,
                        )?;
                        let flat = self.t.at(flat);
                        let (dd, kk) = (
                            self.t.leaf(Node::Int(0)),
                            self.t.leaf(Node::Bool(BoolLit(false))),
                        );
                        let r = self.t.op(op, vec![flat, dd, kk]).map_err(err(span))?;
                        let r = if keep {
                            self.reshape_value(r, &vec![1; x.shape.len()], span)?
                        } else {
                            r
                        };
                        Ok(FV::Tensor(self.fresh(r, None, span)?))
                    }
                }
            }
            "matmul" | "mm" | "bmm" | "mv" | "dot" => {
                let x = FV::Tensor(a.tensor(0, "input")?);
                let y = FV::Tensor(a.tensor(1, "other")?);
                self.matmul(&x, &y, span)
            }
            "linear" => {
                let x = FV::Tensor(a.tensor(0, "input")?);
                let w = a.tensor(1, "weight")?;
                let wt = self.tview(&w, |d| d.t()).map_err(err(span))?;
                let y = self.matmul(&x, &FV::Tensor(wt), span)?;
                match a.opt(2, "bias").cloned() {
                    Some(b) => self.elementwise(Binary::Add, &[y, b], span),
                    None => Ok(y),
                }
            }
            "cat" | "concat" | "concatenate" | "stack" => {
                let items = a.req(0, "tensors")?.items().ok_or_else(|| {
                    Stop::Diag(
                        Diagnostic::new(format!("{name}() expects a list of tensors")).at(span),
                    )
                })?;
                let mut ts = Vec::new();
                for it in items {
                    match it {
                        FV::Tensor(t) => ts.push(t),
                        other => {
                            return diag(
                                span,
                                format!("{name}(): expected Tensor, got {}", other.type_name()),
                            )
                        }
                    }
                }
                if ts.is_empty() {
                    return diag(
                        span,
                        format!("{name}() expects a non-empty list of Tensors"),
                    );
                }
                let mut dim = a.int_or(1, "dim", 0)?;
                if name == "stack" {
                    for t in &ts {
                        if t.shape != ts[0].shape {
                            return diag(span, format!("stack expects each tensor to be equal size, but got {} at entry 0 and {}", crate::tensor::fmt_shape(&ts[0].shape), crate::tensor::fmt_shape(&t.shape)));
                        }
                    }
                    let nd = ts[0].shape.len();
                    dim = crate::tensor::views::wrap_dim(dim, nd + 1).map_err(err(span))? as i64;
                    ts = ts
                        .iter()
                        .map(|t| self.tview(t, |d| d.unsqueeze(dim)))
                        .collect::<Result<_, _>>()
                        .map_err(err(span))?;
                }
                for (i, t) in ts.iter().enumerate() {
                    if t.shape.is_empty() {
                        return diag(
                            span,
                            format!(
                                "zero-dimensional tensor (at position {i}) cannot be concatenated"
                            ),
                        );
                    }
                }
                let dummies: Vec<Operand> = ts
                    .iter()
                    .map(|t| self.dummy_operand(&FV::Tensor(t.clone())))
                    .collect::<FR<_>>()?;
                let refs: Vec<&Operand> = dummies.iter().collect();
                let dt = ops::result_type(&refs);
                let parts: Vec<&TRef> = ts
                    .iter()
                    .filter(|t| !(t.shape.len() == 1 && t.shape[0] == 0))
                    .collect();
                if parts.is_empty() {
                    let r = self.full(&[0], dt, Scalar::I(0)).map_err(err(span))?;
                    return Ok(FV::Tensor(self.fresh(r, None, span)?));
                }
                let dd =
                    crate::tensor::views::wrap_dim(dim, parts[0].shape.len()).map_err(err(span))?;
                let mut args = vec![self.t.leaf(Node::Int(dd as i64))];
                for p in parts {
                    args.push(self.term_as(&FV::Tensor(p.clone()), dt, span)?);
                }
                self.fresh_op(OpName::Cat, args, None, span)
            }
            "clone" => {
                let x = a.tensor(0, "input")?;
                let v = self.read(&x, span)?;
                Ok(FV::Tensor(self.fresh(v, Some(&x), span)?))
            }
            "contiguous" => {
                let x = a.tensor(0, "input")?;
                if x.strides == crate::tensor::contiguous_strides(&x.shape)
                    || x.shape.iter().filter(|&&d| d != 1).count() <= 1
                {
                    return Ok(FV::Tensor(x));
                }
                let v = self.read(&x, span)?;
                Ok(FV::Tensor(self.fresh(v, None, span)?))
            }
            "detach" | "cpu" => Ok(FV::Tensor(a.tensor(0, "input")?)),
            "float" | "double" | "long" | "int" | "bool" | "to" | "type_as" => {
                let x = a.tensor(0, "input")?;
                let dt = match name {
                    "float" => DType::F32,
                    "double" => DType::F64,
                    "long" => DType::I64,
                    "int" => DType::I32,
                    "bool" => DType::Bool,
                    "type_as" => self.roots[a.tensor(1, "other")?.root].dtype,
                    _ => match a.opt(1, "dtype") {
                        Some(FV::DType(d)) => *d,
                        Some(FV::Tensor(o)) => self.roots[o.root].dtype,
                        _ => {
                            return diag(
                                span,
                                format!("{name}(): only a dtype argument is supported"),
                            )
                        }
                    },
                };
                if dt == self.roots[x.root].dtype {
                    return Ok(FV::Tensor(x));
                }
                let v = self.read(&x, span)?;
                let v = self.cast(v, dt, span)?;
                Ok(FV::Tensor(self.fresh(v, Some(&x), span)?))
            }
            "view" | "reshape" | "view_as" | "reshape_as" | "flatten" => {
                let x = a.tensor(0, "input")?;
                let sizes = match name {
                    "view_as" | "reshape_as" => a
                        .tensor(1, "other")?
                        .shape
                        .iter()
                        .map(|&d| d as i64)
                        .collect(),
                    "flatten" => {
                        let d = Tensor::zeros(DType::F32, &[])?.restride(
                            x.shape.clone(),
                            crate::tensor::contiguous_strides(&x.shape),
                            0,
                        );
                        let f = d
                            .flatten(a.int_or(1, "start_dim", 0)?, a.int_or(2, "end_dim", -1)?)
                            .map_err(err(span))?;
                        f.shape.iter().map(|&s| s as i64).collect()
                    }
                    _ => a.sizes(1, "shape")?,
                };
                match self.tview(&x, |d| d.view(&sizes)) {
                    Ok(v) => Ok(FV::Tensor(v)),
                    Err(e) if name.starts_with("view") => diag(span, e),
                    Err(_) => {
                        let shape =
                            crate::tensor::views::infer_shape(&sizes, x.shape.iter().product())
                                .map_err(err(span))?;
                        let v = self.read(&x, span)?;
                        let r = self.reshape_value(v, &shape, span)?;
                        Ok(FV::Tensor(self.fresh(r, None, span)?))
                    }
                }
            }
            "t" => self.view_fv(&a.tensor(0, "input")?, span, |d| d.t()),
            "transpose" | "swapaxes" | "swapdims" => {
                let (x, p, q) = (a.tensor(0, "input")?, a.int(1, "dim0")?, a.int(2, "dim1")?);
                self.view_fv(&x, span, |d| d.transpose(p, q))
            }
            "permute" => {
                let (x, dims) = (a.tensor(0, "input")?, a.sizes(1, "dims")?);
                self.view_fv(&x, span, |d| d.permute(&dims))
            }
            "unsqueeze" => {
                let (x, dim) = (a.tensor(0, "input")?, a.int(1, "dim")?);
                self.view_fv(&x, span, |d| d.unsqueeze(dim))
            }
            "squeeze" => {
                let (x, dims) = (a.tensor(0, "input")?, dims_kw(a)?);
                self.view_fv(&x, span, |d| d.squeeze(dims.as_deref()))
            }
            "expand" | "expand_as" | "broadcast_to" => {
                let x = a.tensor(0, "input")?;
                let sizes = if name == "expand_as" {
                    a.tensor(1, "other")?
                        .shape
                        .iter()
                        .map(|&d| d as i64)
                        .collect()
                } else {
                    a.sizes(1, "size")?
                };
                self.view_fv(&x, span, |d| d.expand(&sizes))
            }
            "narrow" => {
                let x = a.tensor(0, "input")?;
                let dim = a.int(1, "dim")?;
                let len = a.int(3, "length")?;
                match a.req(2, "start")?.clone() {
                    FV::DynInt(s) => {
                        let d = crate::tensor::views::wrap_dim(dim, x.shape.len())
                            .map_err(err(span))?;
                        Ok(FV::Tensor(self.dyn_slice(
                            &x,
                            d,
                            &s,
                            &s.add(&Affine::constant(len)),
                            1,
                            span,
                        )?))
                    }
                    s => {
                        let s = a.int_of(&s, "start")?;
                        self.view_fv(&x, span, |d| d.narrow(dim, s, len))
                    }
                }
            }
            "select" => {
                let x = a.tensor(0, "input")?;
                let dim = a.int(1, "dim")?;
                let idx = a.req(2, "index")?.clone();
                self.select_fv(&x, dim, &idx, span)
            }
            "diagonal" => {
                let x = a.tensor(0, "input")?;
                let (o, d1, d2) = (
                    a.int_or(1, "offset", 0)?,
                    a.int_or(2, "dim1", 0)?,
                    a.int_or(3, "dim2", 1)?,
                );
                self.view_fv(&x, span, |d| d.diagonal(o, d1, d2))
            }
            "unbind" | "chunk" | "split" => {
                let x = a.tensor(0, "input")?;
                let d = Tensor::zeros(DType::F32, &[])?.restride(
                    x.shape.clone(),
                    crate::tensor::contiguous_strides(&x.shape),
                    0,
                );
                let pieces: Vec<Tensor> = match name {
                    "unbind" => d.unbind(a.int_or(1, "dim", 0)?),
                    "chunk" => d.chunk(a.int(1, "chunks")?, a.int_or(2, "dim", 0)?),
                    _ => {
                        let dim = a.int_or(2, "dim", 0)?;
                        match a.req(1, "split_size_or_sections")?.items() {
                            Some(items) => d.split_sizes(
                                &items
                                    .iter()
                                    .map(|v| a.int_of(v, "split"))
                                    .collect::<FR<Vec<_>>>()?,
                                dim,
                            ),
                            None => d.split_even(a.int(1, "split_size")?, dim),
                        }
                    }
                }
                .map_err(err(span))?;
                // Each piece is the same view operation applied to `x` itself.
                let dim = match name {
                    "unbind" => a.int_or(1, "dim", 0)?,
                    "chunk" => a.int_or(2, "dim", 0)?,
                    _ => a.int_or(2, "dim", 0)?,
                };
                let dd = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
                let mut out = Vec::new();
                let mut start = 0i64;
                for p in pieces {
                    if name == "unbind" {
                        out.push(FV::Tensor(
                            self.tview(&x, |t| t.select(dd as i64, start))
                                .map_err(err(span))?,
                        ));
                        start += 1;
                    } else {
                        let len = p.shape[dd] as i64;
                        out.push(FV::Tensor(
                            self.tview(&x, |t| t.narrow(dd as i64, start, len))
                                .map_err(err(span))?,
                        ));
                        start += len;
                    }
                }
                Ok(FV::Tuple(Rc::new(out)))
            }
            "repeat" => {
                let x = a.tensor(0, "input")?;
                let reps = a.sizes(1, "repeats")?;
                if reps.len() < x.shape.len() {
                    return diag(span, "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor");
                }
                let lead = reps.len() - x.shape.len();
                let mut shape = vec![1i64; lead];
                shape.extend(x.shape.iter().map(|&d| d as i64));
                let (mut inter, mut target, mut fin) = (Vec::new(), Vec::new(), Vec::new());
                for (k, &r) in reps.iter().enumerate() {
                    inter.extend([1, shape[k]]);
                    target.extend([r, shape[k]]);
                    fin.push((r * shape[k]) as usize);
                }
                let v = self.read(&x, span)?;
                let v = self.reshape_value(
                    v,
                    &inter.iter().map(|&d| d as usize).collect::<Vec<_>>(),
                    span,
                )?;
                let base = self.fresh(v, None, span)?;
                let e = self
                    .tview(&base, |d| d.expand(&target))
                    .map_err(err(span))?;
                let ev = self.read(&e, span)?;
                let r = self.reshape_value(ev, &fin, span)?;
                Ok(FV::Tensor(self.fresh(r, None, span)?))
            }
            "item" => {
                let x = a.tensor(0, "input")?;
                self.item(&x, span)
            }
            "numel" | "nelement" => Ok(FV::Int(
                a.tensor(0, "input")?.shape.iter().product::<usize>() as i64,
            )),
            "dim" | "ndimension" => Ok(FV::Int(a.tensor(0, "input")?.shape.len() as i64)),
            "size" => {
                let x = a.tensor(0, "input")?;
                match a.opt_int(1, "dim")? {
                    None => Ok(FV::Tuple(Rc::new(
                        x.shape.iter().map(|&d| FV::Int(d as i64)).collect(),
                    ))),
                    Some(d) => Ok(FV::Int(
                        x.shape
                            [crate::tensor::views::wrap_dim(d, x.shape.len()).map_err(err(span))?]
                            as i64,
                    )),
                }
            }
            "is_floating_point" => Ok(FV::Bool(
                self.roots[a.tensor(0, "input")?.root].dtype.is_float(),
            )),
            "index_select" | "embedding" => {
                let (x, d, ix) = if name == "embedding" {
                    (a.tensor(1, "weight")?, 0, a.tensor(0, "input")?)
                } else {
                    let x = a.tensor(0, "input")?;
                    let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len())
                        .map_err(err(span))?;
                    (x, d, a.tensor(2, "index")?)
                };
                let mut idx = vec![FV::None; d];
                idx.push(FV::Tensor(ix));
                self.index_read(&x, &idx, span)
            }
            "var" | "std" => {
                let x = a.tensor(0, "input")?;
                let dims = dims_kw(a)?.unwrap_or_default();
                let keep = a.bool_or(3, "keepdim", false)?;
                let correction = match (a.opt(99, "correction"), a.opt(2, "unbiased")) {
                    (Some(c), _) => a.int_of(c, "correction")?,
                    (None, Some(FV::Bool(false))) => 0,
                    _ => 1,
                };
                let mean = self.reduce_op(OpName::Mean, &x, &dims, true, None, span)?;
                let diff = self.elementwise(Binary::Sub, &[FV::Tensor(x.clone()), mean], span)?;
                let sq = self.elementwise(Binary::Mul, &[diff.clone(), diff], span)?;
                let FV::Tensor(sq) = sq else { unreachable!() };
                let s = self.reduce_op(OpName::Sum, &sq, &dims, keep, None, span)?;
                let FV::Tensor(st) = &s else { unreachable!() };
                let n = (x.shape.iter().product::<usize>()
                    / st.shape.iter().product::<usize>().max(1)) as i64;
                let v = self.elementwise(
                    Binary::Div,
                    &[s, FV::Float((n - correction).max(0) as f64)],
                    span,
                )?;
                if name == "std" {
                    self.unary(ops::Unary::Sqrt, &v, span)
                } else {
                    Ok(v)
                }
            }
            "normalize" => {
                let x = a.tensor(0, "input")?;
                let p = a
                    .opt(1, "p")
                    .and_then(|v| a.number(v))
                    .map(|s| s.to_f64())
                    .unwrap_or(2.0);
                let dim = a.int_or(2, "dim", 1)?;
                let eps = a
                    .opt(3, "eps")
                    .and_then(|v| a.number(v))
                    .map(|s| s.to_f64())
                    .unwrap_or(1e-12);
                let ab = self.unary(ops::Unary::Abs, &FV::Tensor(x.clone()), span)?;
                let pw = self.elementwise(Binary::Pow, &[ab, FV::Float(p)], span)?;
                let FV::Tensor(pw) = pw else { unreachable!() };
                let s = self.reduce_op(OpName::Sum, &pw, &[dim], true, None, span)?;
                let n = self.elementwise(Binary::Pow, &[s, FV::Float(1.0 / p)], span)?;
                let n = self.torch(
                    "clamp",
                    &A {
                        pos: vec![n, FV::Float(eps)],
                        kw: vec![],
                        span,
                        name: "clamp".into(),
                    },
                    false,
                )?;
                self.elementwise(Binary::Div, &[FV::Tensor(x), n], span)
            }
            "norm" => {
                let x = a.tensor(0, "input")?;
                let p = a
                    .opt(1, "p")
                    .and_then(|v| a.number(v))
                    .map(|s| s.to_f64())
                    .unwrap_or(2.0);
                let dims = a.dims(2, "dim")?.unwrap_or_default();
                let keep = a.bool_or(3, "keepdim", false)?;
                let ab = self.unary(ops::Unary::Abs, &FV::Tensor(x), span)?;
                let pw = self.elementwise(Binary::Pow, &[ab, FV::Float(p)], span)?;
                let FV::Tensor(pw) = pw else { unreachable!() };
                let s = self.reduce_op(OpName::Sum, &pw, &dims, keep, None, span)?;
                self.elementwise(Binary::Pow, &[s, FV::Float(1.0 / p)], span)
            }
            "logsumexp" => {
                let x = a.tensor(0, "input")?;
                let dims = a.dims(1, "dim")?.unwrap_or_default();
                let keep = a.bool_or(2, "keepdim", false)?;
                let m = self.reduce_op(OpName::Amax, &x, &dims, true, None, span)?;
                // An infinite maximum is replaced by 0, as PyTorch does, so that inf - inf never appears.
                let inf = self.unary(ops::Unary::Abs, &m, span)?;
                let is_inf =
                    self.elementwise(Binary::Eq, &[inf, FV::Float(f64::INFINITY)], span)?;
                let m = self.torch(
                    "where",
                    &A {
                        pos: vec![is_inf, FV::Float(0.0), m],
                        kw: vec![],
                        span,
                        name: "where".into(),
                    },
                    false,
                )?;
                let d = self.elementwise(Binary::Sub, &[FV::Tensor(x), m.clone()], span)?;
                let e = self.unary(ops::Unary::Exp, &d, span)?;
                let FV::Tensor(e) = e else { unreachable!() };
                let s = self.reduce_op(OpName::Sum, &e, &dims, true, None, span)?;
                let l = self.unary(ops::Unary::Log, &s, span)?;
                let r = self.elementwise(Binary::Add, &[l, m], span)?;
                if keep {
                    return Ok(r);
                }
                let FV::Tensor(r) = r else { unreachable!() };
                let sq: Option<Vec<i64>> = if dims.is_empty() {
                    None
                } else {
                    Some(dims.clone())
                };
                let v = self
                    .tview(&r, |t| {
                        t.squeeze(Some(
                            sq.as_deref()
                                .unwrap_or(&(0..t.dim() as i64).collect::<Vec<_>>()),
                        ))
                    })
                    .map_err(err(span))?;
                Ok(FV::Tensor(v))
            }
            "flip" => {
                let x = a.tensor(0, "input")?;
                let mut v = x.clone();
                for d in a.sizes(1, "dims")? {
                    let d = crate::tensor::views::wrap_dim(d, x.shape.len()).map_err(err(span))?;
                    let n = v.shape[d];
                    if n > 1 {
                        v.off = v
                            .off
                            .add(&Affine::constant((n as i64 - 1) * v.strides[d] as i64));
                        v.strides[d] = -v.strides[d];
                    }
                }
                let r = self.read(&v, span)?;
                Ok(FV::Tensor(self.fresh(r, None, span)?))
            }
            "roll" => {
                let x = a.tensor(0, "input")?;
                let shifts = a.int_list(a.req(1, "shifts")?)?;
                let Some(dims) = a.opt(2, "dims").cloned() else {
                    return diag(span, "roll() without dims is not functionalized yet");
                };
                let dims = a.int_list(&dims)?;
                let mut cur = FV::Tensor(x.clone());
                for (s, d) in shifts.iter().zip(dims) {
                    let FV::Tensor(c) = cur.clone() else {
                        unreachable!()
                    };
                    let d =
                        crate::tensor::views::wrap_dim(d, c.shape.len()).map_err(err(span))? as i64;
                    let n = c.shape[d as usize] as i64;
                    if n == 0 {
                        continue;
                    }
                    let s = s.rem_euclid(n);
                    let p1 = self
                        .tview(&c, |t| t.narrow(d, n - s, s))
                        .map_err(err(span))?;
                    let p2 = self
                        .tview(&c, |t| t.narrow(d, 0, n - s))
                        .map_err(err(span))?;
                    let list = FV::List(Rc::new(std::cell::RefCell::new(vec![
                        FV::Tensor(p1),
                        FV::Tensor(p2),
                    ])));
                    cur = self.torch(
                        "cat",
                        &A {
                            pos: vec![list, FV::Int(d)],
                            kw: vec![],
                            span,
                            name: "cat".into(),
                        },
                        false,
                    )?;
                }
                let FV::Tensor(c) = cur else { unreachable!() };
                if c.root == x.root {
                    let v = self.read(&c, span)?;
                    return Ok(FV::Tensor(self.fresh(v, None, span)?));
                }
                Ok(FV::Tensor(c))
            }
            "fill_diagonal" => {
                let x = a.tensor(0, "input")?;
                let v = a.req(1, "fill_value")?.clone();
                let c = self.torch(
                    "clone",
                    &A {
                        pos: vec![FV::Tensor(x)],
                        kw: vec![],
                        span,
                        name: "clone".into(),
                    },
                    true,
                )?;
                let FV::Tensor(c) = c else { unreachable!() };
                let d = self.tview(&c, |t| t.diagonal(0, 0, 1)).map_err(err(span))?;
                let dt = self.roots[c.root].dtype;
                let (val, _) = self.scalar_tensor(&v, Some(dt), span)?;
                self.write(&d, val, span)?;
                Ok(FV::Tensor(c))
            }
            "diag" => {
                let x = a.tensor(0, "input")?;
                let k = a.int_or(1, "diagonal", 0)?;
                let dt = self.roots[x.root].dtype;
                match x.shape.len() {
                    1 => {
                        let n = x.shape[0] + k.unsigned_abs() as usize;
                        let z = self.full(&[n, n], dt, Scalar::I(0)).map_err(err(span))?;
                        let out = self.fresh(z, None, span)?;
                        let d = self
                            .tview(&out, |t| t.diagonal(k, 0, 1))
                            .map_err(err(span))?;
                        let v = self.read(&x, span)?;
                        self.write(&d, v, span)?;
                        self.roots[out.root].written = false;
                        Ok(FV::Tensor(out))
                    }
                    2 => {
                        let d = self.tview(&x, |t| t.diagonal(k, 0, 1)).map_err(err(span))?;
                        let v = self.read(&d, span)?;
                        Ok(FV::Tensor(self.fresh(v, None, span)?))
                    }
                    n => diag(span, format!("diag(): Supports 1D or 2D tensors. Got {n}D")),
                }
            }
            "index_add" | "index_fill" => {
                let x = a.tensor(0, "input")?;
                let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len())
                    .map_err(err(span))?;
                let ix = a.tensor(2, "index")?;
                let src = a
                    .req(
                        3,
                        if name == "index_fill" {
                            "value"
                        } else {
                            "source"
                        },
                    )?
                    .clone();
                let c = self.torch(
                    "clone",
                    &A {
                        pos: vec![FV::Tensor(x)],
                        kw: vec![],
                        span,
                        name: "clone".into(),
                    },
                    true,
                )?;
                let FV::Tensor(c) = c else { unreachable!() };
                let mut idx = vec![FV::None; d];
                idx.push(FV::Tensor(ix));
                self.index_write(&c, &idx, &src, name == "index_add", span)?;
                self.roots[c.root].written = false;
                Ok(FV::Tensor(c))
            }
            _ => self.creation(name, a, method),
        }
    }

    /// `x.select(dim, i)` / `x[i]` with a static or run-time index.
    fn select_fv(&mut self, x: &TRef, dim: i64, idx: &FV, span: Span) -> FR<FV> {
        let d = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
        let ai = match idx {
            FV::Int(i) => return self.view_fv(x, span, |t| t.select(d as i64, *i)),
            FV::DynInt(ai) => ai.clone(),
            FV::Tensor(t) => self.tensor_to_int(t, span)?,
            other => {
                return diag(
                    span,
                    format!("index must be an integer, not {}", other.type_name()),
                )
            }
        };
        Ok(FV::Tensor(self.dyn_select(x, d, &ai, span)?))
    }

    /// Advanced read `x[idx]` with integer index tensors: `(index VALUE idx...)`.
    fn index_read(&mut self, x: &TRef, idx: &[FV], span: Span) -> FR<FV> {
        let v = self.read(x, span)?;
        let mut args = vec![self.t.at(v)];
        for i in idx {
            args.push(match i {
                FV::None => self.t.leaf(Node::NoneLit),
                FV::Tensor(t) => {
                    let dt = self.roots[t.root].dtype;
                    if dt == DType::Bool {
                        return diag(span, "indexing with a boolean mask gives a data-dependent shape, which cannot be functionalized");
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
    fn index_tensor(&mut self, v: &FV, span: Span) -> FR<Option<TRef>> {
        match v {
            FV::Tensor(t) if t.shape.is_empty() && self.roots[t.root].dtype != DType::Bool => {
                Ok(None)
            }
            FV::Tensor(t) => Ok(Some(t.clone())),
            FV::List(_) => {
                let items = v.items().unwrap_or_default();
                let all_bool = !items.is_empty() && items.iter().all(|x| matches!(x, FV::Bool(_)));
                let vals: Vec<Scalar> = items
                    .iter()
                    .map(|x| match x {
                        FV::Bool(b) if all_bool => Ok(Scalar::B(*b)),
                        FV::Int(i) => Ok(Scalar::I(*i)),
                        _ => diag(span, "only lists of integers or bools known before the program runs can index a tensor"),
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

    fn resolve(&mut self, t: &TRef, idx: &FV, span: Span) -> FR<Resolved> {
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
            return diag(
                span,
                format!("too many indices for tensor of dimension {}", t.shape.len()),
            );
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
                            view = self.dyn_slice(&view, d, &s, &e, step, span)?;
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
    fn adv_list(&self, r: &Resolved) -> Vec<FV> {
        let mut list = Vec::new();
        let mut k = 0usize;
        while k < r.view.shape.len() {
            match r.adv.iter().find(|(p, _)| *p == k) {
                Some((_, ix)) => {
                    list.push(FV::Tensor(ix.clone()));
                    k += if self.roots[ix.root].dtype == DType::Bool {
                        ix.shape.len().max(1)
                    } else {
                        1
                    };
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
        let r = self.resolve(t, idx, span)?;
        if r.adv.is_empty() {
            return Ok(FV::Tensor(r.view));
        }
        let list = self.adv_list(&r);
        self.index_read(&r.view, &list, span)
    }

    /// A boolean mask over dims `pos..` of `view`, as a term broadcastable against the view.
    fn mask_term(&mut self, view: &TRef, pos: usize, mask: &TRef, span: Span) -> FR<egg::Id> {
        for (k, &m) in mask.shape.iter().enumerate() {
            if pos + k >= view.shape.len() || view.shape[pos + k] != m {
                return diag(span, format!("The shape of the mask {} at index {k} does not match the shape of the indexed tensor {} at index {}", crate::tensor::fmt_shape(&mask.shape), crate::tensor::fmt_shape(&view.shape), pos + k));
            }
        }
        let mut shape = vec![1usize; pos];
        shape.extend(&mask.shape);
        shape.extend(std::iter::repeat_n(
            1,
            view.shape.len() - pos - mask.shape.len(),
        ));
        let m = self.read(mask, span)?;
        let m = self.reshape_value(m, &shape, span)?;
        Ok(self.t.at(m))
    }

    pub(super) fn setitem(&mut self, obj: &FV, idx: &FV, v: &FV, span: Span) -> FR<()> {
        match obj {
            FV::List(l) => {
                let n = l.borrow().len() as i64;
                let i = match idx {
                    FV::Int(i) => *i,
                    FV::DynInt(_) => {
                        return needs_static(
                            span,
                            "assigning into a Python list at a loop variable",
                        )
                    }
                    _ => return diag(span, "list indices must be integers"),
                };
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    return diag(span, "list assignment index out of range");
                }
                l.borrow_mut()[k as usize] = v.clone();
                Ok(())
            }
            FV::Tensor(t) => self.tensor_setitem(t, idx, v, span),
            other => diag(
                span,
                format!(
                    "'{}' object does not support item assignment",
                    other.type_name()
                ),
            ),
        }
    }

    fn tensor_setitem(&mut self, t: &TRef, idx: &FV, v: &FV, span: Span) -> FR<()> {
        let r = self.resolve(t, idx, span)?;
        let dt = self.roots[t.root].dtype;
        if matches!(v, FV::List(_) | FV::Tuple(_)) {
            return diag(
                span,
                format!(
                    "can't assign a {} to a torch.{}Tensor",
                    v.type_name(),
                    dt.name()
                ),
            );
        }
        if r.adv.is_empty() {
            return match v {
                // Writing a view's own value back (the setitem of `x[i] += y`) changes nothing.
                FV::Tensor(val) if *val == r.view => Ok(()),
                FV::Tensor(val) => {
                    // setitem drops the value's leading size-1 dims, then expands it to the view.
                    let mut val = val.clone();
                    while val.shape.len() > r.view.shape.len() && val.shape[0] == 1 {
                        val = self.tview(&val, |d| d.select(0, 0)).map_err(err(span))?;
                    }
                    let sizes: Vec<i64> = r.view.shape.iter().map(|&d| d as i64).collect();
                    let e = self.tview(&val, |d| d.expand(&sizes)).map_err(err(span))?;
                    self.check_inplace(&r.view, &[&val], true, span)?;
                    let x = self.read(&e, span)?;
                    self.write(&r.view, x, span)
                }
                other => {
                    let (x, _) = self.scalar_tensor(other, Some(dt), span)?;
                    self.write(&r.view, x, span)
                }
            };
        }
        let masks: Vec<&(usize, TRef)> = r
            .adv
            .iter()
            .filter(|(_, ix)| self.roots[ix.root].dtype == DType::Bool)
            .collect();
        if !masks.is_empty() {
            // `x[mask] = v` with a scalar value is a predicated select over the view.
            if r.adv.len() != 1 {
                return diag(
                    span,
                    "a boolean mask together with other advanced indices is not functionalized",
                );
            }
            let (pos, mask) = masks[0].clone();
            let val = match v {
                FV::Tensor(val) if val.shape.iter().product::<usize>() == 1 => self.term_as(v, dt, span).map(|x| (x, val.shape.len()))?,
                FV::Tensor(_) => return diag(span, "assigning a tensor through a boolean mask depends on how many elements are selected, which cannot be functionalized"),
                other => (self.term_as(other, dt, span)?, 0),
            };
            let val = if val.1 > 0 {
                self.reshape_value(
                    super::state::TId {
                        id: val.0,
                        depth: self.t.depth(),
                    },
                    &[],
                    span,
                )?
                .id
            } else {
                val.0
            };
            let m = self.mask_term(&r.view, pos, &mask, span)?;
            let v0 = self.read(&r.view, span)?;
            let v0 = self.t.at(v0);
            let w = self
                .t
                .op(OpName::Where, vec![m, val, v0])
                .map_err(err(span))?;
            return self.write(&r.view, w, span);
        }
        if let FV::Tensor(val) = v {
            if self.roots[val.root].dtype != dt {
                return diag(span, format!("Index put requires the source and destination dtypes match, got {} for the destination and {} for the source.", dt.name(), self.roots[val.root].dtype.name()));
            }
            self.check_inplace(t, &[val], false, span)?;
        }
        let list = self.adv_list(&r);
        self.index_write(&r.view, &list, v, false, span)
    }

    /// `x[mask] op= y` with a scalar `y`: `where(mask, x op y, x)` over the view; `None` when not of that form.
    pub(super) fn masked_aug_assign(
        &mut self,
        t: &TRef,
        idx: &FV,
        op: BinOp,
        rhs: &FV,
        span: Span,
    ) -> FR<Option<()>> {
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
            return diag(span, "an augmented assignment through a boolean mask with a tensor value cannot be functionalized");
        }
        let Some(bin) = bin_of(op) else {
            return diag(span, "`@=` through a mask");
        };
        let full = self.elementwise(bin, &[FV::Tensor(r.view.clone()), rhs.clone()], span)?;
        let FV::Tensor(full) = full else {
            unreachable!()
        };
        let dt = self.roots[t.root].dtype;
        let fd = self.roots[full.root].dtype;
        if !dt.can_cast_from(fd) {
            return diag(
                span,
                format!(
                    "result type {} can't be cast to the desired output type {}",
                    fd.name(),
                    dt.name()
                ),
            );
        }
        let m = self.mask_term(&r.view, pos, &mask, span)?;
        let new = self.term_as(&FV::Tensor(full), dt, span)?;
        let v0 = self.read(&r.view, span)?;
        let v0 = self.t.at(v0);
        let w = self
            .t
            .op(OpName::Where, vec![m, new, v0])
            .map_err(err(span))?;
        self.write(&r.view, w, span)?;
        Ok(Some(()))
    }

    fn creation(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        let span = a.span;
        match name {
            "zeros" | "ones" | "empty" | "full" | "new_zeros" | "new_ones" | "new_empty"
            | "new_full" => {
                let is_new = name.starts_with("new_");
                if method && !is_new {
                    return diag(span, format!("unsupported tensor method `.{name}()`"));
                }
                let base = if is_new { 1 } else { 0 };
                let full = name.ends_with("full");
                let (sizes, value) = if full {
                    let v = a.req(base + 1, "fill_value")?.clone();
                    let v = a.number(&v).ok_or_else(|| {
                        Stop::NeedsStatic(span, "a fill value known only at run time".into())
                    })?;
                    (a.int_list(a.req(base, "size")?)?, v)
                } else {
                    (
                        a.sizes(base, "size")?,
                        Scalar::I(if name.ends_with("ones") { 1 } else { 0 }),
                    )
                };
                let default = if is_new {
                    self.roots[a.tensor(0, "self")?.root].dtype
                } else if full {
                    value.default_dtype()
                } else {
                    DType::F32
                };
                let dt = a.dtype(99, "dtype")?.unwrap_or(default);
                let shape: Vec<usize> = sizes.iter().map(|&d| d.max(0) as usize).collect();
                let r = self.full(&shape, dt, value).map_err(err(span))?;
                Ok(FV::Tensor(self.fresh(r, None, span)?))
            }
            "zeros_like" | "ones_like" | "empty_like" | "full_like" => {
                let x = a.tensor(0, "input")?;
                let value = match name {
                    "ones_like" => Scalar::I(1),
                    "full_like" => a.number(a.req(1, "fill_value")?).ok_or_else(|| {
                        Stop::NeedsStatic(span, "a fill value known only at run time".into())
                    })?,
                    _ => Scalar::I(0),
                };
                let dt = a.dtype(99, "dtype")?.unwrap_or(self.roots[x.root].dtype);
                let r = self.full(&x.shape, dt, value).map_err(err(span))?;
                Ok(FV::Tensor(self.fresh(r, Some(&x), span)?))
            }
            "arange" => {
                let nums: Vec<Scalar> = a
                    .pos
                    .iter()
                    .map(|v| {
                        a.number(v).ok_or_else(|| {
                            Stop::NeedsStatic(span, "arange bounds known only at run time".into())
                        })
                    })
                    .collect::<FR<_>>()?;
                let (start, end, step) = match nums.as_slice() {
                    [e] => (Scalar::I(0), *e, Scalar::I(1)),
                    [s, e] => (
                        *s,
                        *e,
                        a.get(2, "step")
                            .and_then(|v| a.number(v))
                            .unwrap_or(Scalar::I(1)),
                    ),
                    [s, e, st] => (*s, *e, *st),
                    _ => return diag(span, "arange() needs 1 to 3 numbers"),
                };
                let all_int = [start, end, step]
                    .iter()
                    .all(|s| !matches!(s, Scalar::F(_)));
                let dt =
                    a.dtype(99, "dtype")?
                        .unwrap_or(if all_int { DType::I64 } else { DType::F32 });
                let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
                if st == 0.0 {
                    return diag(span, "step must be nonzero");
                }
                if (st > 0.0 && e < s) || (st < 0.0 && e > s) {
                    return diag(
                        span,
                        "upper bound and lower bound inconsistent with step sign",
                    );
                }
                let n = ((e - s) / st).ceil().max(0.0) as i64;
                let d = self.t.leaf(Node::DType(dt));
                let lit = |x: Scalar| {
                    if all_int {
                        Node::Int(x.to_i64_trunc())
                    } else {
                        Node::Float(crate::ir::FloatLit(x.to_f64()))
                    }
                };
                let (ls, lst) = (self.t.leaf(lit(start)), self.t.leaf(lit(step)));
                let nn = self.t.leaf(Node::Int(n));
                self.fresh_op(OpName::Arange, vec![d, ls, lst, nn], None, span)
            }
            "tensor" | "as_tensor" => {
                let v = a.req(0, "data")?.clone();
                if let FV::Tensor(t) = &v {
                    let x = self.read(t, span)?;
                    let dt = a.dtype(1, "dtype")?.unwrap_or(self.roots[t.root].dtype);
                    let x = self.cast(x, dt, span)?;
                    return Ok(FV::Tensor(self.fresh(x, None, span)?));
                }
                let mut shape = Vec::new();
                let mut flat = Vec::new();
                flatten_fv(&v, &mut shape, 0, &mut flat).map_err(err(span))?;
                let statics: Option<Vec<Scalar>> = flat.iter().map(|x| a.number(x)).collect();
                let kinds = flat.iter().map(|x| match x {
                    FV::Bool(_) | FV::DynBool(_) => 0,
                    FV::Int(_) | FV::DynInt(_) => 1,
                    _ => 2,
                });
                let inferred = match kinds.max() {
                    Some(0) => DType::Bool,
                    Some(1) => DType::I64,
                    _ => DType::F32,
                };
                let dt = a.dtype(1, "dtype")?.unwrap_or(inferred);
                match statics {
                    Some(vals) => self.const_data(dt, &shape, &vals, span),
                    None => {
                        let mut parts = vec![self.t.leaf(Node::Int(0))];
                        for x in &flat {
                            let (t, _) = self.scalar_tensor(x, Some(dt), span)?;
                            let t = self.reshape_value(t, &[1], span)?;
                            parts.push(self.t.at(t));
                        }
                        let c = self.t.op(OpName::Cat, parts).map_err(err(span))?;
                        let c = self.reshape_value(c, &shape, span)?;
                        Ok(FV::Tensor(self.fresh(c, None, span)?))
                    }
                }
            }
            "meshgrid" => {
                let ts: Vec<TRef> = if a.pos.len() == 1 && a.pos[0].items().is_some() {
                    a.pos[0]
                        .items()
                        .unwrap_or_default()
                        .into_iter()
                        .filter_map(|v| if let FV::Tensor(t) = v { Some(t) } else { None })
                        .collect()
                } else {
                    a.pos
                        .iter()
                        .filter_map(|v| {
                            if let FV::Tensor(t) = v {
                                Some(t.clone())
                            } else {
                                None
                            }
                        })
                        .collect()
                };
                let ij = !matches!(a.opt(99, "indexing"), Some(FV::Str(s)) if s.as_ref() == "xy");
                let mut sizes: Vec<i64> = ts
                    .iter()
                    .map(|t| t.shape.iter().product::<usize>() as i64)
                    .collect();
                if !ij && sizes.len() >= 2 {
                    sizes.swap(0, 1);
                }
                let n = ts.len();
                let mut out = Vec::new();
                for (k, x) in ts.iter().enumerate() {
                    let pos = if !ij && n >= 2 && k < 2 { 1 - k } else { k };
                    let mut shape = vec![1i64; n];
                    shape[pos] = x.shape.iter().product::<usize>() as i64;
                    let v = self
                        .tview(x, |d| d.view(&shape)?.expand(&sizes))
                        .map_err(err(span))?;
                    out.push(FV::Tensor(v));
                }
                Ok(FV::Tuple(Rc::new(out)))
            }
            "linspace" => {
                let s = a
                    .number(a.req(0, "start")?)
                    .ok_or_else(|| {
                        Stop::NeedsStatic(span, "linspace bounds known only at run time".into())
                    })?
                    .to_f64();
                let e = a
                    .number(a.req(1, "end")?)
                    .ok_or_else(|| {
                        Stop::NeedsStatic(span, "linspace bounds known only at run time".into())
                    })?
                    .to_f64();
                let n = a.int(2, "steps")?.max(0) as usize;
                let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
                let step = if n > 1 { (e - s) / (n - 1) as f64 } else { 0.0 };
                let vals: Vec<Scalar> = (0..n)
                    .map(|i| {
                        Scalar::F(if i < n / 2 {
                            s + step * i as f64
                        } else {
                            e - step * (n - 1 - i) as f64
                        })
                    })
                    .collect();
                self.const_data(dt, &[n], &vals, span)
            }
            "eye" => {
                let n = a.int(0, "n")?.max(0) as usize;
                let m = a.opt_int(1, "m")?.map(|m| m.max(0) as usize).unwrap_or(n);
                let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
                let vals: Vec<Scalar> = (0..n * m)
                    .map(|k| Scalar::I((k / m.max(1) == k % m.max(1)) as i64))
                    .collect();
                self.const_data(dt, &[n, m], &vals, span)
            }
            _ => diag(
                span,
                format!("`{name}` is not supported by the functionalizer yet"),
            ),
        }
    }
}

impl A {
    fn int_list(&self, v: &FV) -> FR<Vec<i64>> {
        match v.items() {
            Some(items) => items.iter().map(|x| self.int_of(x, "size")).collect(),
            None => Ok(vec![self.int_of(v, "size")?]),
        }
    }
}

fn flatten_fv(
    v: &FV,
    shape: &mut Vec<usize>,
    depth: usize,
    out: &mut Vec<FV>,
) -> Result<(), String> {
    match v {
        FV::List(_) | FV::Tuple(_) => {
            let items = v.items().unwrap_or_default();
            if shape.len() == depth {
                shape.push(items.len());
            } else if shape[depth] != items.len() {
                return Err(format!(
                    "expected sequence of length {} at dim {} (got {})",
                    shape[depth],
                    depth,
                    items.len()
                ));
            }
            for it in &items {
                flatten_fv(it, shape, depth + 1, out)?;
            }
            Ok(())
        }
        FV::Tensor(_) => {
            Err("torch.tensor of a list of tensors is not functionalized; use torch.stack".into())
        }
        other => {
            out.push(other.clone());
            Ok(())
        }
    }
}
