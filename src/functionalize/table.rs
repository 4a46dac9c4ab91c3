//! The torch op table of the functionalizer, and tensor subscripts. Each op mirrors the reference interpreter's
//! (`crate::interp`) meaning; ops without a term form yet are reported, never approximated.

use std::rc::Rc;

use super::ops::{err, A};
use super::state::{diag, Affine, Stop, TRef, FR, FV};
use super::Fz;
use crate::diag::Diagnostic;
use crate::interp::torch_ops::{binary_op, unary_op};
use crate::ir::{BoolLit, Node, OpName};
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Scalar, Tensor};

impl<'m> Fz<'m> {
    pub(super) fn torch(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        let span = a.span;
        // `arange`, `linspace` read every argument as a number, the others their arguments after `self`.
        let from = usize::from(!matches!(name, "arange" | "linspace"));
        if SIZE_TAKERS.contains(&name) || from == 0 {
            if let Some(folded) = self.constant_sizes(a, from) {
                let r = self.torch(name, &folded, method)?;
                // The caller checks the keywords it gave were all read: those the op read of its copy were.
                if let Some(k) = folded.unexpected() {
                    return diag(span, format!("unexpected keyword argument '{k}' for {}", a.name));
                }
                a.kw.iter().for_each(|(k, _)| {
                    a.keyword(k);
                });
                return Ok(r);
            }
        }
        let approximate = || {
            a.opt(1, "approximate").map(|v| match v {
                FV::Str(s) => Some(s.as_ref()),
                _ => None,
            })
        };
        if name == "gelu" && crate::interp::compat::gelu_tanh(approximate()).map_err(err(span))? {
            // PyTorch's tanh approximation, in its kernel's order.
            let x = FV::Tensor(a.tensor(0, "input")?);
            let (k_beta, k_kappa) = crate::interp::compat::GELU_TANH;
            let sq = self.elementwise(Binary::Mul, &[x.clone(), x.clone()], span)?;
            let cube = self.elementwise(Binary::Mul, &[sq, x.clone()], span)?;
            let k = self.elementwise(Binary::Mul, &[cube, FV::Float(k_kappa)], span)?;
            let inner = self.elementwise(Binary::Add, &[x.clone(), k], span)?;
            let scaled = self.elementwise(Binary::Mul, &[inner, FV::Float(k_beta)], span)?;
            let th = self.unary(ops::Unary::Tanh, &scaled, span)?;
            let one_plus = self.elementwise(Binary::Add, &[th, FV::Float(1.0)], span)?;
            let half = self.elementwise(Binary::Mul, &[x, FV::Float(0.5)], span)?;
            return self.elementwise(Binary::Mul, &[half, one_plus], span);
        }
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
                        "trunc" => self.trunc_div(x, y, span),
                        other => diag(
                            span,
                            format!(
                                "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '{other}'"
                            ),
                        ),
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
                    return diag(span, "torch.clamp: At least one of 'min' or 'max' must not be None");
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
                // PyTorch takes a uint8 condition as a boolean one.
                if !matches!(self.roots[c.root].dtype, DType::Bool | DType::U8) {
                    return diag(
                        span,
                        format!(
                            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
                            self.roots[c.root].dtype.name()
                        ),
                    );
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
                self.fresh_op(if name == "triu" { OpName::Triu } else { OpName::Tril }, vec![xt, kk], None, span)
            }
            "softmax" | "log_softmax" | "cumsum" | "cumprod" => {
                let x = a.tensor(0, "input")?;
                let implicit = crate::interp::torch_ops::implicit_softmax_dim(&a.name, x.shape.len())
                    .filter(|_| name.ends_with("softmax") && matches!(a.opt(1, "dim"), None | Some(FV::None)));
                let dim = match implicit {
                    Some(d) => d,
                    None => a.int(1, "dim")?,
                };
                let given = a.dtype(2, "dtype")?;
                let dt = given.unwrap_or(self.roots[x.root].dtype);
                let xt = self.term_as(&FV::Tensor(x), dt, span)?;
                let d = self.t.leaf(Node::Int(dim));
                let op = match name {
                    "softmax" => OpName::Softmax,
                    "log_softmax" => OpName::LogSoftmax,
                    "cumprod" => OpName::Cumprod,
                    _ => OpName::Cumsum,
                };
                match given {
                    // Integer scans accumulate in int64; `dtype=torch.int8` wraps the results into it, which
                    // accumulating in that dtype gives too (wrap-around is arithmetic modulo 2^bits).
                    Some(g) if !g.is_float() && g != DType::I64 && matches!(op, OpName::Cumsum | OpName::Cumprod) => {
                        let r = self.t.op(op, vec![xt, d]).map_err(Self::tyerr(span))?;
                        let r = self.cast(r, g, span)?;
                        Ok(FV::Tensor(self.fresh(r, None, span)?))
                    }
                    _ => self.fresh_op(op, vec![xt, d], None, span),
                }
            }
            "sum" | "mean" | "nansum" => {
                let x = a.tensor(0, "input")?;
                let dims = dims_kw(a)?.unwrap_or_default();
                let keep = a.bool_or(2, "keepdim", false)?;
                let dt = a.dtype(3, "dtype")?;
                self.reduce_op(if name == "mean" { OpName::Mean } else { OpName::Sum }, &x, &dims, keep, dt, span)
            }
            "prod" => {
                let x = a.tensor(0, "input")?;
                let dims = a.opt_int(1, "dim")?.map(|d| vec![d]).unwrap_or_default();
                self.reduce_op(OpName::Prod, &x, &dims, a.bool_or(2, "keepdim", false)?, None, span)
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
                        self.reduce_op(if is_max { OpName::Amax } else { OpName::Amin }, &x, &[], false, None, span)
                    }
                    Some(FV::Tensor(o)) => self.elementwise(
                        if is_max { Binary::Maximum } else { Binary::Minimum },
                        &[FV::Tensor(x), FV::Tensor(o)],
                        span,
                    ),
                    Some(d) => {
                        let dim = a.int_of(&d, "dim")?;
                        let keep = a.bool_or(2, "keepdim", false)?;
                        let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
                        let (vo, io) =
                            if is_max { (OpName::MaxVal, OpName::MaxIdx) } else { (OpName::MinVal, OpName::MinIdx) };
                        if x.shape.is_empty() {
                            let (dd, kk) = (self.t.leaf(Node::Int(dim)), self.t.leaf(Node::Bool(BoolLit(keep))));
                            let v = self.fresh_op(vo, vec![xt, dd, kk], None, span)?;
                            let i = self.fresh_op(io, vec![xt, dd, kk], None, span)?;
                            return Ok(FV::Named(Rc::new(vec![v, i]), &["values", "indices"]));
                        }
                        // One pass finds the indices; the values are read there (`gather`, which computes a fused
                        // table only at those elements), as PyTorch's values are the elements at its indices.
                        let (dd, kk) = (self.t.leaf(Node::Int(dim)), self.t.leaf(Node::Bool(BoolLit(true))));
                        let i = self.t.op(io, vec![xt, dd, kk]).map_err(err(span))?;
                        let it = self.t.at(i);
                        let v = self.t.op(OpName::Gather, vec![xt, dd, it]).map_err(err(span))?;
                        let d = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
                        let mut out = x.shape.clone();
                        if keep {
                            out[d] = 1;
                        } else {
                            out.remove(d);
                        }
                        let (v, i) = (self.reshape_value(v, &out, span)?, self.reshape_value(i, &out, span)?);
                        let v = FV::Tensor(self.fresh(v, None, span)?);
                        let i = FV::Tensor(self.fresh(i, None, span)?);
                        Ok(FV::Named(Rc::new(vec![v, i]), &["values", "indices"]))
                    }
                }
            }
            "argmax" | "argmin" => {
                let x = a.tensor(0, "input")?;
                let keep = a.bool_or(2, "keepdim", false)?;
                let op = if name == "argmax" { OpName::MaxIdx } else { OpName::MinIdx };
                let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
                match a.opt_int(1, "dim")? {
                    Some(d) => {
                        let (dd, kk) = (self.t.leaf(Node::Int(d)), self.t.leaf(Node::Bool(BoolLit(keep))));
                        self.fresh_op(op, vec![xt, dd, kk], None, span)
                    }
                    None => {
                        let n: usize = x.shape.iter().product();
                        let flat =
                            self.reshape_value(super::state::TId { id: xt, depth: self.t.depth() }, &[n], span)?;
                        let flat = self.t.at(flat);
                        let (dd, kk) = (self.t.leaf(Node::Int(0)), self.t.leaf(Node::Bool(BoolLit(false))));
                        let r = self.t.op(op, vec![flat, dd, kk]).map_err(err(span))?;
                        let r = if keep { self.reshape_value(r, &vec![1; x.shape.len()], span)? } else { r };
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
                    Stop::Diag(Diagnostic::new(format!("{name}() expects a list of tensors")).at(span))
                })?;
                let mut ts = Vec::new();
                for it in items {
                    match it {
                        FV::Tensor(t) => ts.push(t),
                        other => return diag(span, format!("{name}(): expected Tensor, got {}", other.type_name())),
                    }
                }
                if ts.is_empty() {
                    return diag(span, format!("{name}() expects a non-empty list of Tensors"));
                }
                let mut dim = a.int_or(1, "dim", 0)?;
                if name == "stack" {
                    for t in &ts {
                        if t.shape != ts[0].shape {
                            return diag(
                                span,
                                format!(
                                    "stack expects each tensor to be equal size, but got {} at entry 0 and {}",
                                    crate::tensor::fmt_shape(&ts[0].shape),
                                    crate::tensor::fmt_shape(&t.shape)
                                ),
                            );
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
                        return diag(span, format!("zero-dimensional tensor (at position {i}) cannot be concatenated"));
                    }
                }
                let dummies: Vec<Operand> =
                    ts.iter().map(|t| self.dummy_operand(&FV::Tensor(t.clone()))).collect::<FR<_>>()?;
                let refs: Vec<&Operand> = dummies.iter().collect();
                let dt = ops::result_type(&refs);
                let parts: Vec<&TRef> = ts.iter().filter(|t| !(t.shape.len() == 1 && t.shape[0] == 0)).collect();
                if parts.is_empty() {
                    let r = self.full(&[0], dt, Scalar::I(0)).map_err(err(span))?;
                    return Ok(FV::Tensor(self.fresh(r, None, span)?));
                }
                let dd = crate::tensor::views::wrap_dim(dim, parts[0].shape.len()).map_err(err(span))?;
                let mut args = vec![self.t.leaf(Node::Int(dd as i64))];
                for p in parts {
                    args.push(self.term_as(&FV::Tensor(p.clone()), dt, span)?);
                }
                self.fresh_op(OpName::Cat, args, None, span)
            }
            "clone" => {
                let x = a.tensor(0, "input")?;
                let layout = match a.opt(99, "memory_format") {
                    Some(FV::Str(f)) if &**f == "torch.contiguous_format" => None,
                    Some(_) => {
                        return diag(
                            span,
                            "clone(): memory_format must be torch.contiguous_format or torch.preserve_format",
                        )
                    }
                    None => Some(&x),
                };
                let v = self.read(&x, span)?;
                Ok(FV::Tensor(self.fresh(v, layout, span)?))
            }
            "contiguous" => {
                let x = a.tensor(0, "input")?;
                // PyTorch's test, on a stand-in with the view's strides: strides of size-1 dims do not count,
                // so a contiguous view is returned itself (writes through it reach the caller's tensor).
                let contiguous: Vec<bool> =
                    x.choices().iter().map(|c| self.dummy(c, self.roots[c.root].dtype).is_contiguous()).collect();
                if contiguous.iter().any(|&c| c != contiguous[0]) {
                    return super::state::needs_static(span, "`.contiguous()` of a view chosen by an `if` on a run-time value that is contiguous in one arm only (an alias in one, a copy in the other)");
                }
                if contiguous[0] {
                    return Ok(FV::Tensor(x));
                }
                let v = self.read(&x, span)?;
                Ok(FV::Tensor(self.fresh(v, None, span)?))
            }
            "detach" | "cpu" | "conj" | "resolve_conj" | "resolve_neg" => Ok(FV::Tensor(a.tensor(0, "input")?)),
            "type" if a.opt(1, "dtype").is_none() => {
                let x = a.tensor(0, "input")?;
                Ok(FV::Str(self.roots[x.root].dtype.legacy_type_name().into()))
            }
            "float" | "double" | "half" | "bfloat16" | "long" | "int" | "short" | "char" | "byte" | "bool" | "to"
            | "type" | "type_as" => {
                let x = a.tensor(0, "input")?;
                let dt = match name {
                    m if DType::of_method(m).is_some() => DType::of_method(m).expect("checked"),
                    "type_as" => self.roots[a.tensor(1, "other")?.root].dtype,
                    _ => match a.opt(1, "dtype") {
                        Some(FV::DType(d)) => *d,
                        Some(FV::Tensor(o)) => self.roots[o.root].dtype,
                        Some(FV::Str(s)) if name == "type" => match DType::from_legacy_type_name(s) {
                            Some(d) => d,
                            None => return diag(span, crate::interp::python::unknown_legacy_type(s)),
                        },
                        // `.to(device)` with the device taken out (`python::strip_device`): the tensor itself.
                        None if name == "to" => self.roots[x.root].dtype,
                        Some(FV::Str(s)) if crate::tensor::unsupported_torch_dtype(s).is_some() => {
                            return diag(span, crate::tensor::unsupported_torch_dtype(s).expect("checked"))
                        }
                        _ => return diag(span, format!("{name}(): only a dtype argument is supported")),
                    },
                };
                if dt == self.roots[x.root].dtype {
                    return Ok(FV::Tensor(x));
                }
                let v = self.read(&x, span)?;
                let v = self.cast(v, dt, span)?;
                Ok(FV::Tensor(self.fresh(v, Some(&x), span)?))
            }
            "view" | "reshape" | "view_as" | "reshape_as" | "flatten" | "ravel" => {
                let x = a.tensor(0, "input")?;
                let sizes = match name {
                    "view_as" | "reshape_as" => a.tensor(1, "other")?.shape.iter().map(|&d| d as i64).collect(),
                    "flatten" => {
                        let d = Tensor::zeros(DType::F32, &[])?.restride(
                            x.shape.clone(),
                            crate::tensor::contiguous_strides(&x.shape),
                            0,
                        );
                        let f =
                            d.flatten(a.int_or(1, "start_dim", 0)?, a.int_or(2, "end_dim", -1)?).map_err(err(span))?;
                        f.shape.iter().map(|&s| s as i64).collect()
                    }
                    "ravel" => vec![-1],
                    _ => a.sizes(1, "shape")?,
                };
                // `ravel` views only a contiguous tensor (`contiguous().view(-1)`); any other it copies.
                let view = |d: &Tensor| {
                    if name == "ravel" && !d.is_contiguous() {
                        Err("not contiguous".to_string())
                    } else {
                        d.view(&sizes)
                    }
                };
                match self.tview(&x, view) {
                    Ok(v) => Ok(FV::Tensor(v)),
                    Err(e) if name.starts_with("view") => diag(span, e),
                    Err(_) if x.choices().iter().any(|c| self.tview(c, view).is_ok()) => super::state::needs_static(
                        span,
                        format!("`{name}` of a view chosen by an `if` on a run-time value that is a view in one arm and a copy in the other"),
                    ),
                    Err(_) => {
                        let shape =
                            crate::tensor::views::infer_shape(&sizes, x.shape.iter().product()).map_err(err(span))?;
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
            "movedim" | "moveaxis" => {
                let x = a.tensor(0, "input")?;
                let (src, dst) =
                    (a.dims(1, "source")?.unwrap_or_default(), a.dims(2, "destination")?.unwrap_or_default());
                let perm = crate::tensor::views::movedim_perm(x.shape.len(), &src, &dst).map_err(err(span))?;
                self.view_fv(&x, span, |d| d.permute(&perm))
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
                    a.tensor(1, "other")?.shape.iter().map(|&d| d as i64).collect()
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
                        let d = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
                        Ok(FV::Tensor(self.dyn_slice(&x, d, &s, &s.add(&Affine::constant(len)), 1, true, span)?))
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
            "unfold" if a.name == "unfold" => {
                let x = a.tensor(0, "input")?;
                let (d, size, step) = (a.int(1, "dimension")?, a.int(2, "size")?, a.int(3, "step")?);
                self.view_fv(&x, span, |t| t.unfold(d, size, step))
            }
            "diagonal" => {
                let x = a.tensor(0, "input")?;
                let (o, d1, d2) = (a.int_or(1, "offset", 0)?, a.int_or(2, "dim1", 0)?, a.int_or(3, "dim2", 1)?);
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
                        let s = a.req(1, "split_size_or_sections")?;
                        match s.items() {
                            Some(items) => {
                                d.split_sizes(&items.iter().map(|v| a.int_of(v, "split")).collect::<FR<Vec<_>>>()?, dim)
                            }
                            None => d.split_even(a.int_of(s, "split_size")?, dim),
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
                        out.push(FV::Tensor(self.tview(&x, |t| t.select(dd as i64, start)).map_err(err(span))?));
                        start += 1;
                    } else {
                        let len = p.shape[dd] as i64;
                        out.push(FV::Tensor(self.tview(&x, |t| t.narrow(dd as i64, start, len)).map_err(err(span))?));
                        start += len;
                    }
                }
                Ok(FV::Tuple(Rc::new(out)))
            }
            // `tile` is `repeat` with ones put before fewer repeats than dims.
            "repeat" | "tile" => {
                let x = a.tensor(0, "input")?;
                let mut reps = a.sizes(1, if name == "tile" { "dims" } else { "repeats" })?;
                if name == "tile" && reps.len() < x.shape.len() {
                    reps.splice(0..0, std::iter::repeat_n(1, x.shape.len() - reps.len()));
                }
                if reps.len() < x.shape.len() {
                    return diag(
                        span,
                        "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor",
                    );
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
                let v = self.reshape_value(v, &inter.iter().map(|&d| d as usize).collect::<Vec<_>>(), span)?;
                let base = self.fresh(v, None, span)?;
                let e = self.tview(&base, |d| d.expand(&target)).map_err(err(span))?;
                let ev = self.read(&e, span)?;
                let r = self.reshape_value(ev, &fin, span)?;
                Ok(FV::Tensor(self.fresh(r, None, span)?))
            }
            "item" => {
                let x = a.tensor(0, "input")?;
                self.item(&x, span)
            }
            "tolist" => {
                let x = a.tensor(0, "input")?;
                self.tolist(&x, span)
            }
            "numel" | "nelement" => Ok(FV::Int(a.tensor(0, "input")?.shape.iter().product::<usize>() as i64)),
            "_shape_as_tensor" => {
                let x = a.tensor(0, "input")?;
                let dims: Vec<Scalar> = x.shape.iter().map(|&n| Scalar::I(n as i64)).collect();
                self.const_data(DType::I64, &[dims.len()], &dims, a.span)
            }
            "dim" | "ndimension" => Ok(FV::Int(a.tensor(0, "input")?.shape.len() as i64)),
            "size" => {
                let x = a.tensor(0, "input")?;
                match a.opt_int(1, "dim")? {
                    None => Ok(FV::Tuple(Rc::new(x.shape.iter().map(|&d| FV::Int(d as i64)).collect()))),
                    Some(d) => Ok(FV::Int(
                        x.shape[crate::tensor::views::wrap_dim(d, x.shape.len()).map_err(err(span))?] as i64,
                    )),
                }
            }
            "is_floating_point" => Ok(FV::Bool(self.roots[a.tensor(0, "input")?.root].dtype.is_float())),
            "is_complex" => {
                a.tensor(0, "input")?;
                Ok(FV::Bool(false))
            }
            "is_tensor" => Ok(FV::Bool(matches!(a.req(0, "obj")?, FV::Tensor(_)))),
            "index_select" | "embedding" => {
                let (x, d, ix) = if name == "embedding" {
                    // Without gradients `padding_idx` and the rest change nothing; `max_norm` rescales the
                    // weight's rows in place.
                    for (i, n) in [(2, "padding_idx"), (4, "norm_type"), (5, "scale_grad_by_freq"), (6, "sparse")] {
                        a.opt(i, n);
                    }
                    if !matches!(a.opt(3, "max_norm"), None | Some(FV::None)) {
                        return diag(span, "embedding(max_norm=...) rescales the weight in place: not supported");
                    }
                    (a.tensor(1, "weight")?, 0, a.tensor(0, "input")?)
                } else {
                    let x = a.tensor(0, "input")?;
                    let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len()).map_err(err(span))?;
                    (x, d, a.tensor(2, "index")?)
                };
                let op = if name == "embedding" { "embedding" } else { "index_select" };
                crate::tensor::index::check_select_index(op, self.roots[ix.root].dtype).map_err(err(span))?;
                let mut idx = vec![FV::None; d];
                idx.push(FV::Tensor(ix));
                self.index_read(&x, &idx, span)
            }
            _ => self.composite(name, a, method),
        }
    }
}

/// Ops whose arguments after the first are sizes, read as ints (`__index__`).
const SIZE_TAKERS: &[&str] =
    &["view", "reshape", "expand", "repeat", "new_zeros", "new_ones", "new_empty", "narrow", "unflatten", "tile"];

impl Fz<'_> {
    /// The arguments (from position `from` on) of a size-taking op with every one-element integer tensor made from literals alone (its value
    /// known now: [`Fz::constant_scalar`]) read as the int it is; `None` where there is none.
    fn constant_sizes(&mut self, a: &A, from: usize) -> Option<A> {
        let mut changed = false;
        let mut fold = |fz: &mut Self, v: &FV| -> FV {
            let FV::Tensor(t) = v else { return v.clone() };
            if fz.roots[t.root].dtype.is_float() || t.shape.iter().product::<usize>() != 1 {
                return v.clone();
            }
            let Ok(term) = fz.read(t, a.span) else { return v.clone() };
            match fz.constant_scalar(term) {
                Some(crate::tensor::Scalar::I(i)) => {
                    changed = true;
                    FV::Int(i)
                }
                _ => v.clone(),
            }
        };
        let mut pos: Vec<FV> = a.pos.iter().take(from).cloned().collect();
        for v in a.pos.iter().skip(from) {
            pos.push(match v {
                FV::Tuple(items) => FV::Tuple(std::rc::Rc::new(items.iter().map(|x| fold(self, x)).collect())),
                v => fold(self, v),
            });
        }
        let kw = a.kw.iter().map(|(k, v)| (k.clone(), fold(self, v))).collect();
        changed.then(|| A::new(pos, kw, a.span, a.name.clone()))
    }
}
