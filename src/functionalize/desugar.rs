//! Ops the functionalizer spells with terms it already has, the same compositions the reference interpreter
//! computes (`crate::interp::more_ops`; written twice on purpose, as terms here and as values there, so that the
//! engines agree by computing the same formula): `lerp`, `addcmul`/`addcdiv`, `softplus`, `logsigmoid`, `atan`,
//! vector norms, `einsum` (permutes, sums and batched matmuls), `index_copy`/`index_add` (a `scatter` with the index
//! expanded along the source), `new_tensor`, and division rounding toward zero. The e-graph, the planner and the
//! kernels get them for free.

use std::rc::Rc;

use super::ops::{err, A};
use super::state::{diag, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::frontend::ast::{Expr, ExprKind};
use crate::interp::torch_ops::cname;
use crate::ir::{BoolLit, Node, OpName};
use crate::tensor::einsum::{self, Step};
use crate::tensor::ops::{self, Binary, Unary};
use crate::tensor::views::wrap_dim;
use crate::tensor::DType;

/// A tuple of ints, as ops take sizes.
pub(super) fn ints(v: &[i64]) -> FV {
    FV::Tuple(Rc::new(v.iter().map(|&i| FV::Int(i)).collect()))
}

impl<'m> Fz<'m> {
    /// `torch.NAME(pos...)` with positional arguments only.
    pub(super) fn call_op(&mut self, name: &str, pos: Vec<FV>, span: Span) -> FR<FV> {
        self.torch(name, &A::new(pos, vec![], span, name.into()), false)
    }

    fn as_tensor(v: FV, span: Span) -> FR<TRef> {
        match v {
            FV::Tensor(t) => Ok(t),
            other => diag(span, format!("expected a tensor, got {}", other.type_name())),
        }
    }

    fn float_input(&self, op: &str, x: &TRef, span: Span) -> FR<()> {
        let d = self.roots[x.root].dtype;
        if d.is_float() {
            Ok(())
        } else {
            diag(span, format!("\"{op}\" not implemented for '{}'", d.name()))
        }
    }

    /// Whether `v < 0`: a static bool for a number known now, else a bool tensor.
    fn is_negative(&mut self, v: &FV, span: Span) -> FR<FV> {
        match v {
            FV::Int(i) => Ok(FV::Bool(*i < 0)),
            FV::Float(f) => Ok(FV::Bool(*f < 0.0)),
            FV::Bool(_) => Ok(FV::Bool(false)),
            other => self.elementwise(Binary::Lt, &[other.clone(), FV::Int(0)], span),
        }
    }

    /// `x / y` rounded toward zero (`rounding_mode='trunc'`): `trunc(x / y)` for floats; for integers `x // y`
    /// plus one where the remainder is nonzero and the signs differ, exact for every i64.
    /// `torch.isin(elements, test_elements, *, assume_unique=False, invert=False)`: every element compared with
    /// every test element (`elements[..., None] == test_elements.flatten()`), then `any` over the last dim; the
    /// reference interpreter's `more_ops::isin` computes the same.
    fn isin(&mut self, a: &A, span: Span) -> FR<FV> {
        let e = self.operand_fv(a, 0, "elements")?;
        let test = self.operand_fv(a, 1, "test_elements")?;
        a.bool_or(2, "assume_unique", false)?;
        let invert = a.bool_or(3, "invert", false)?;
        let hit = match (&e, &test) {
            (_, FV::Tensor(t)) => {
                let flat = self.call_op("reshape", vec![FV::Tensor(t.clone()), ints(&[-1])], span)?;
                let e = match e {
                    FV::Tensor(x) => FV::Tensor(self.tview(&x, |v| v.unsqueeze(-1)).map_err(err(span))?),
                    scalar => scalar,
                };
                let eq = self.elementwise(Binary::Eq, &[e, flat], span)?;
                self.call_op("any", vec![eq, FV::Int(-1)], span)?
            }
            (FV::Tensor(_), scalar) => self.elementwise(Binary::Eq, &[e.clone(), scalar.clone()], span)?,
            _ => return diag(span, "isin(): at least one of elements and test_elements must be a tensor"),
        };
        if invert {
            self.unary(Unary::LogicalNot, &hit, span)
        } else {
            Ok(hit)
        }
    }

    /// `F.scaled_dot_product_attention`, as the reference interpreter's `more_ops::sdpa` computes it: a row whose
    /// scores are all `-inf` gives zeros.
    fn sdpa(&mut self, a: &A, span: Span) -> FR<FV> {
        let (q, k, v) = (a.tensor(0, "query")?, a.tensor(1, "key")?, a.tensor(2, "value")?);
        let mask = match a.opt(3, "attn_mask") {
            None | Some(FV::None) => None,
            Some(FV::Tensor(m)) => Some(m.clone()),
            Some(other) => {
                return diag(
                    span,
                    format!("scaled_dot_product_attention(): attn_mask must be a Tensor, not {}", other.type_name()),
                )
            }
        };
        let number = |i: usize, n: &str| -> FR<Option<f64>> {
            match a.opt(i, n) {
                None | Some(FV::None) => Ok(None),
                Some(x) => match a.number(x) {
                    Some(x) => Ok(Some(x.to_f64())),
                    None => {
                        diag(span, format!("scaled_dot_product_attention(): {n} must be known before the program runs"))
                    }
                },
            }
        };
        let (dropout, scale) = (number(4, "dropout_p")?, number(6, "scale")?);
        let causal = a.bool_or(5, "is_causal", false)?;
        let gqa = a.bool_or(7, "enable_gqa", false)?;
        crate::interp::more_ops::sdpa_options(dropout, causal, mask.is_some(), gqa).map_err(err(span))?;
        if q.shape.len() < 2 || k.shape.len() < 2 || v.shape.len() < 2 {
            return diag(span, "scaled_dot_product_attention(): query, key and value need at least 2 dims");
        }
        let e = *q.shape.last().expect("2 dims");
        let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
        let kt = self.tview(&k, |t| t.transpose(-2, -1)).map_err(err(span))?;
        let scores = self.matmul(&FV::Tensor(q.clone()), &FV::Tensor(kt), span)?;
        let scores = self.elementwise(Binary::Mul, &[scores, FV::Float(scale)], span)?;
        let (l, s_len) = (q.shape[q.shape.len() - 2], k.shape[k.shape.len() - 2]);
        let keep = if causal {
            let ones = self.full(&[l, s_len], DType::Bool, crate::tensor::Scalar::B(true)).map_err(err(span))?;
            let ones = FV::Tensor(self.fresh(ones, None, span)?);
            Some(self.call_op("tril", vec![ones], span)?)
        } else {
            mask.clone().filter(|m| self.roots[m.root].dtype == DType::Bool).map(FV::Tensor)
        };
        let scores = match (keep, &mask) {
            (Some(keep), _) => self.call_op("where", vec![keep, scores, FV::Float(f64::NEG_INFINITY)], span)?,
            (None, Some(m)) => self.elementwise(Binary::Add, &[scores, FV::Tensor(m.clone())], span)?,
            (None, None) => scores,
        };
        let p = self.call_op("softmax", vec![scores.clone(), FV::Int(-1)], span)?;
        let out = self.matmul(&p, &FV::Tensor(v), span)?;
        let top =
            self.torch("amax", &A::new(vec![scores, FV::Int(-1), FV::Bool(true)], vec![], span, "amax".into()), false)?;
        let live = self.elementwise(Binary::Ne, &[top, FV::Float(f64::NEG_INFINITY)], span)?;
        self.call_op("where", vec![live, out, FV::Float(0.0)], span)
    }

    /// The input, target and reduction of a loss, checked as the reference interpreter checks them
    /// (`more_ops::loss_check`).
    fn loss_args(
        &mut self,
        a: &A,
        name: &str,
        kernel: Option<&str>,
        keywords: &str,
        span: Span,
    ) -> FR<(TRef, TRef, &'static str)> {
        let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "target")?);
        let (reduction, legacy) = crate::interp::more_ops::loss_keywords(a);
        let dtypes = (self.roots[x.root].dtype, self.roots[y.root].dtype);
        let shapes = (&x.shape[..], &y.shape[..]);
        let r =
            crate::interp::more_ops::loss_check(name, kernel, keywords, a.pos.len(), legacy, shapes, dtypes, reduction)
                .map_err(err(span))?;
        Ok((x, y, r))
    }

    /// `l1_loss`, `mse_loss` and `smooth_l1_loss`, as the reference interpreter's `more_ops::pointwise_loss`
    /// computes them (its argument checks included).
    fn pointwise_loss(&mut self, name: &str, a: &A, span: Span) -> FR<FV> {
        let (x, y, reduction) = self.loss_args(a, name, None, "size_average, reduce and reduction", span)?;
        let d = self.elementwise(Binary::Sub, &[FV::Tensor(x), FV::Tensor(y)], span)?;
        let loss = match name {
            "l1_loss" => self.unary(Unary::Abs, &d, span)?,
            "mse_loss" => self.elementwise(Binary::Mul, &[d.clone(), d], span)?,
            _ => {
                let beta = match a.opt(usize::MAX, "beta") {
                    None => 1.0,
                    Some(v) => match a.number(v) {
                        Some(b) => b.to_f64(),
                        None => return diag(span, "smooth_l1_loss(): beta must be known before the program runs"),
                    },
                };
                if beta < 0.0 {
                    return diag(span, "smooth_l1_loss does not support negative values for beta.");
                }
                let z = self.unary(Unary::Abs, &d, span)?;
                if beta == 0.0 {
                    z
                } else {
                    let small = self.elementwise(Binary::Lt, &[z.clone(), FV::Float(beta)], span)?;
                    let half_z = self.elementwise(Binary::Mul, &[FV::Float(0.5), z.clone()], span)?;
                    let q = self.elementwise(Binary::Mul, &[half_z, z.clone()], span)?;
                    let q = self.elementwise(Binary::Div, &[q, FV::Float(beta)], span)?;
                    let l = self.elementwise(Binary::Sub, &[z, FV::Float(0.5 * beta)], span)?;
                    self.call_op("where", vec![small, q, l], span)?
                }
            }
        };
        match reduction {
            "none" => Ok(loss),
            r => self.call_op(r, vec![loss], span),
        }
    }

    /// `binary_cross_entropy_with_logits`, as PyTorch computes it (the reference interpreter's `more_ops` has the
    /// same formula): (1 - y) * x - log_sigmoid(x) [* ((pos_weight - 1) * y + 1)] [* weight], then the reduction.
    fn bce_with_logits(&mut self, a: &A, span: Span) -> FR<FV> {
        let name = "binary_cross_entropy_with_logits";
        let (x, y, reduction) =
            self.loss_args(a, name, Some("log_sigmoid_cpu"), "weight, reduction and pos_weight", span)?;
        let (xv, yv) = (FV::Tensor(x), FV::Tensor(y));
        let ab = self.unary(Unary::Abs, &xv, span)?;
        let neg = self.unary(Unary::Neg, &ab, span)?;
        let e = self.unary(Unary::Exp, &neg, span)?;
        let l1p = self.unary(Unary::Log1p, &e, span)?;
        let min0 = self.elementwise(Binary::Minimum, &[xv.clone(), FV::Float(0.0)], span)?;
        let mut log_sig = self.elementwise(Binary::Sub, &[min0, l1p], span)?;
        if let Some(pw) = a.opt(usize::MAX, "pos_weight").cloned() {
            let FV::Tensor(_) = pw else { return diag(span, format!("{name}(): pos_weight must be a Tensor")) };
            let pm1 = self.elementwise(Binary::Sub, &[pw, FV::Int(1)], span)?;
            let scaled = self.elementwise(Binary::Mul, &[pm1, yv.clone()], span)?;
            let lw = self.elementwise(Binary::Add, &[scaled, FV::Int(1)], span)?;
            log_sig = self.elementwise(Binary::Mul, &[log_sig, lw], span)?;
        }
        let one_minus = self.elementwise(Binary::Sub, &[FV::Int(1), yv], span)?;
        let lin = self.elementwise(Binary::Mul, &[one_minus, xv], span)?;
        let mut loss = self.elementwise(Binary::Sub, &[lin, log_sig], span)?;
        if let Some(w) = a.opt(usize::MAX, "weight").cloned() {
            let FV::Tensor(_) = w else { return diag(span, format!("{name}(): weight must be a Tensor")) };
            loss = self.elementwise(Binary::Mul, &[loss, w], span)?;
        }
        match reduction {
            "none" => Ok(loss),
            r => self.call_op(r, vec![loss], span),
        }
    }

    pub(super) fn trunc_div(&mut self, x: FV, y: FV, span: Span) -> FR<FV> {
        let (ox, oy) = (self.dummy_operand(&x)?, self.dummy_operand(&y)?);
        let (c, _) = ops::binary_dtypes(Binary::Add, &ox, &oy).map_err(err(span))?;
        if c.is_float() {
            let d = self.elementwise(Binary::Div, &[x, y], span)?;
            return self.unary(Unary::Trunc, &d, span);
        }
        let q = self.elementwise(Binary::FloorDiv, &[x.clone(), y.clone()], span)?;
        let r = self.elementwise(Binary::Fmod, &[x.clone(), y.clone()], span)?;
        let nz = self.elementwise(Binary::Ne, &[r, FV::Int(0)], span)?;
        let (sx, sy) = (self.is_negative(&x, span)?, self.is_negative(&y, span)?);
        let sg = self.elementwise(Binary::BitXor, &[sx, sy], span)?;
        let adj = self.elementwise(Binary::BitAnd, &[nz, sg], span)?;
        self.elementwise(Binary::Add, &[q, adj], span)
    }

    /// The vector `p`-norm over `dims` (all when empty), with PyTorch's special cases for p = 0, 1, 2, +-inf.
    fn vector_norm(&mut self, x: TRef, p: f64, dims: &[i64], keep: bool, span: Span) -> FR<FV> {
        let dt = self.roots[x.root].dtype;
        if !dt.is_float() {
            return diag(
                span,
                format!("linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}", dt.name()),
            );
        }
        let xv = FV::Tensor(x.clone());
        if p == 2.0 {
            let sq = Self::as_tensor(self.elementwise(Binary::Mul, &[xv.clone(), xv], span)?, span)?;
            let s = self.reduce_op(OpName::Sum, &sq, dims, keep, None, span)?;
            return self.unary(Unary::Sqrt, &s, span);
        }
        if p == 0.0 {
            let nz = self.elementwise(Binary::Ne, &[xv, FV::Int(0)], span)?;
            let nz = Self::as_tensor(self.call_op("to", vec![nz, FV::DType(dt)], span)?, span)?;
            return self.reduce_op(OpName::Sum, &nz, dims, keep, None, span);
        }
        let ab = Self::as_tensor(self.unary(Unary::Abs, &xv, span)?, span)?;
        if p.is_infinite() {
            let op = if p > 0.0 { OpName::Amax } else { OpName::Amin };
            return self.reduce_op(op, &ab, dims, keep, None, span);
        }
        if p == 1.0 {
            return self.reduce_op(OpName::Sum, &ab, dims, keep, None, span);
        }
        let pw = Self::as_tensor(self.elementwise(Binary::Pow, &[FV::Tensor(ab), FV::Float(p)], span)?, span)?;
        let s = self.reduce_op(OpName::Sum, &pw, dims, keep, None, span)?;
        self.elementwise(Binary::Pow, &[s, FV::Float(1.0 / p)], span)
    }

    fn norm_p(&self, v: Option<&FV>, op: &str, span: Span) -> FR<f64> {
        match v {
            None => Ok(2.0),
            Some(FV::Str(s)) if s.as_ref() == "fro" => Ok(2.0),
            Some(FV::Str(s)) => diag(span, format!("{op}(): p='{s}' (a matrix norm) is not supported; use a number")),
            Some(FV::Int(i)) => Ok(*i as f64),
            Some(FV::Float(f)) => Ok(*f),
            Some(_) => diag(span, format!("{op}(): p must be a number known before the program runs")),
        }
    }

    fn einsum(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let tensor = |v| if let FV::Tensor(t) = v { Some(t) } else { None };
        let (eq, mut slots) =
            crate::interp::pyvalue::einsum_operands(a.req(0, "equation")?, &a.pos, tensor).map_err(err(span))?;
        let shapes: Vec<Vec<usize>> = slots.iter().map(|x| x.shape.clone()).collect();
        for step in einsum::plan(&eq, &shapes).map_err(err(span))? {
            match step {
                Step::Prep { slot, expand, sum, perm, reshape } => {
                    let mut x = slots[slot].clone();
                    if let Some(e) = expand {
                        x = self.tview(&x, |t| t.expand(&e)).map_err(err(span))?;
                    }
                    if !sum.is_empty() {
                        x = Self::as_tensor(self.reduce_op(OpName::Sum, &x, &sum, false, None, span)?, span)?;
                    }
                    if !einsum::is_identity(&perm) {
                        x = self.tview(&x, |t| t.permute(&perm)).map_err(err(span))?;
                    }
                    if let Some(r) = reshape {
                        x = Self::as_tensor(self.call_op("reshape", vec![FV::Tensor(x), ints(&r)], span)?, span)?;
                    }
                    slots[slot] = x;
                }
                Step::Matmul { a: i, b: j, reshape } => {
                    let (di, dj) = (self.roots[slots[i].root].dtype, self.roots[slots[j].root].dtype);
                    if di != dj {
                        return diag(
                            span,
                            format!("einsum(): operands must have the same dtype, got {} and {}", di.name(), dj.name()),
                        );
                    }
                    let m = self.matmul(&FV::Tensor(slots[i].clone()), &FV::Tensor(slots[j].clone()), span)?;
                    slots[i] = Self::as_tensor(self.call_op("reshape", vec![m, ints(&reshape)], span)?, span)?;
                }
            }
        }
        Ok(FV::Tensor(slots.swap_remove(0)))
    }

    /// `cosine_similarity`, as the reference interpreter (`more_ops`) and PyTorch compute it: each input over its
    /// 2-norm along `dim` clamped below at eps, then the product summed along `dim`.
    fn cosine_similarity(&mut self, a: &A, span: Span) -> FR<FV> {
        let (x, y) = (a.tensor(0, "x1")?, a.tensor(1, "x2")?);
        let (dx, dy) = (self.roots[x.root].dtype, self.roots[y.root].dtype);
        crate::interp::more_ops::cosine_check(dx, dy, &x.shape, &y.shape).map_err(|m| err(span)(m))?;
        let dim = a.int_or(2, "dim", 1)?;
        let eps = a.opt(3, "eps").and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(1e-8);
        let mut units = Vec::new();
        for v in [x, y] {
            let n = self.vector_norm(v.clone(), 2.0, &[dim], true, span)?;
            let n = self.elementwise(Binary::Maximum, &[n, FV::Float(eps)], span)?;
            units.push(self.elementwise(Binary::Div, &[FV::Tensor(v), n], span)?);
        }
        let prod = Self::as_tensor(self.elementwise(Binary::Mul, &units, span)?, span)?;
        self.reduce_op(OpName::Sum, &prod, &[dim], false, None, span)
    }

    /// `logsigmoid`: min(x, 0) - log1p(exp(-|x|)), as the reference interpreter and PyTorch's CPU kernel compute it.
    fn log_sigmoid(&mut self, a: &A, span: Span) -> FR<FV> {
        let x = a.tensor(0, "input")?;
        self.float_input("log_sigmoid_cpu", &x, span)?;
        let xv = FV::Tensor(x);
        let ab = self.unary(Unary::Abs, &xv, span)?;
        let neg = self.unary(Unary::Neg, &ab, span)?;
        let e = self.unary(Unary::Exp, &neg, span)?;
        let l1p = self.unary(Unary::Log1p, &e, span)?;
        let min0 = self.elementwise(Binary::Minimum, &[xv, FV::Float(0.0)], span)?;
        self.elementwise(Binary::Sub, &[min0, l1p], span)
    }

    /// `lerp`: PyTorch's two formulas, `start + weight * (end - start)` where |weight| < 0.5, else
    /// `end - (end - start) * (1 - weight)`.
    fn lerp(&mut self, a: &A, span: Span) -> FR<FV> {
        let s = a.tensor(0, "input")?;
        let e = a.tensor(1, "end")?;
        self.float_input("lerp_kernel_scalar", &s, span)?;
        let dt = self.roots[s.root].dtype;
        if self.roots[e.root].dtype != dt {
            let ed = self.roots[e.root].dtype;
            return diag(span, format!("expected dtype {} for `end` but got dtype {}", cname(dt), cname(ed)));
        }
        let (sv, ev) = (FV::Tensor(s), FV::Tensor(e));
        let diff = self.elementwise(Binary::Sub, &[ev.clone(), sv.clone()], span)?;
        let w = a.req(2, "weight")?.clone();
        if let Some(w) = a.number(&w) {
            let w = crate::interp::more_ops::round_to(dt, w.to_f64());
            return if w.abs() < 0.5 {
                let step = self.elementwise(Binary::Mul, &[FV::Float(w), diff], span)?;
                self.elementwise(Binary::Add, &[sv, step], span)
            } else {
                let om = crate::interp::more_ops::round_to(dt, 1.0 - w);
                let step = self.elementwise(Binary::Mul, &[diff, FV::Float(om)], span)?;
                self.elementwise(Binary::Sub, &[ev, step], span)
            };
        }
        let w = match w {
            FV::Tensor(w) if self.roots[w.root].dtype != dt => {
                let wd = self.roots[w.root].dtype;
                return diag(span, format!("expected dtype {} for `weight` but got dtype {}", cname(dt), cname(wd)));
            }
            FV::Tensor(w) => FV::Tensor(w),
            FV::DynFloat(_) | FV::DynInt(_) => {
                let (t, _) = self.scalar_tensor(&w, Some(dt), span)?;
                FV::Tensor(self.fresh(t, None, span)?)
            }
            other => {
                return diag(
                    span,
                    format!("lerp(): argument 'weight' must be Tensor or Number, not {}", other.type_name()),
                )
            }
        };
        let aw = self.unary(Unary::Abs, &w, span)?;
        let small = self.elementwise(Binary::Lt, &[aw, FV::Float(0.5)], span)?;
        let st = self.elementwise(Binary::Mul, &[w.clone(), diff.clone()], span)?;
        let lo = self.elementwise(Binary::Add, &[sv, st], span)?;
        let om = self.elementwise(Binary::Sub, &[FV::Int(1), w], span)?;
        let st = self.elementwise(Binary::Mul, &[diff, om], span)?;
        let hi = self.elementwise(Binary::Sub, &[ev, st], span)?;
        self.call_op("where", vec![small, lo, hi], span)
    }

    /// `addcmul` and `addcdiv`: `input + value * tensor1 OP tensor2`.
    fn addc(&mut self, name: &str, a: &A, span: Span) -> FR<FV> {
        let x = self.operand_fv(a, 0, "input")?;
        // PyTorch's deprecated overload `addcmul(input, value, tensor1, tensor2)`, as older optimizers write it.
        // `value` is a Number, which a 0-d tensor converts to; in the current overload it is keyword-only.
        let number = |v: &FV| match v {
            FV::Tensor(t) => t.shape.is_empty(),
            other => matches!(other, FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynFloat(_) | FV::DynInt(_)),
        };
        let old = a.pos.len() == 4 && number(&a.pos[1]);
        if a.pos.len() > 3 && !old {
            return diag(span, format!("{name}() takes 3 positional arguments but {} were given", a.pos.len()));
        }
        let (at, value) = if old { (2, a.pos.get(1).cloned()) } else { (1, a.keyword("value").cloned()) };
        if let Some(v) = value.as_ref().filter(|v| !number(v)) {
            let shown = crate::interp::pyvalue::PyValue::type_name(v);
            return diag(span, format!("{name}(): argument 'value' must be Number, not {shown}"));
        }
        let p = a.tensor(at, "tensor1")?;
        let q = a.tensor(at + 1, "tensor2")?;
        if name == "addcdiv" && !self.roots[p.root].dtype.is_float() && !self.roots[q.root].dtype.is_float() {
            return diag(span, "Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.");
        }
        // PyTorch's order: self + value * tensor1 OP tensor2.
        let scaled = match value {
            Some(v) => self.elementwise(Binary::Mul, &[v, FV::Tensor(p)], span)?,
            None => FV::Tensor(p),
        };
        let op = if name == "addcmul" { Binary::Mul } else { Binary::Div };
        let r = self.elementwise(op, &[scaled, FV::Tensor(q)], span)?;
        self.elementwise(Binary::Add, &[x, r], span)
    }

    /// `softplus`: `log1p(exp(beta * x)) / beta`, or `x` where `beta * x` is over the threshold.
    fn softplus(&mut self, a: &A, span: Span) -> FR<FV> {
        let x = a.tensor(0, "input")?;
        self.float_input("softplus_cpu", &x, span)?;
        let num = |v: Option<&FV>, d: f64| v.and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(d);
        let beta = num(a.opt(1, "beta"), 1.0);
        let thr = num(a.opt(2, "threshold"), 20.0);
        let xv = FV::Tensor(x);
        let xb =
            if beta == 1.0 { xv.clone() } else { self.elementwise(Binary::Mul, &[xv.clone(), FV::Float(beta)], span)? };
        let big = self.elementwise(Binary::Gt, &[xb.clone(), FV::Float(thr)], span)?;
        let ex = self.unary(Unary::Exp, &xb, span)?;
        let mut sp = self.unary(Unary::Log1p, &ex, span)?;
        if beta != 1.0 {
            sp = self.elementwise(Binary::Div, &[sp, FV::Float(beta)], span)?;
        }
        self.call_op("where", vec![big, xv, sp], span)
    }

    /// `index_copy` and `index_add`: a scatter along one dim, checked as PyTorch checks it.
    fn index_along(&mut self, name: &str, a: &A, span: Span) -> FR<FV> {
        let x = a.tensor(0, "input")?;
        let d = wrap_dim(a.int(1, "dim")?, x.shape.len().max(1)).map_err(err(span))?;
        let ix = a.tensor(2, "index")?;
        let src = a.tensor(3, "source")?;
        let (xd, id, sd) = (self.roots[x.root].dtype, self.roots[ix.root].dtype, self.roots[src.root].dtype);
        let view = crate::tensor::index::check_index_along(name, &x.shape, xd, d, &ix.shape, id, &src.shape, sd)
            .map_err(err(span))?;
        let sizes: Vec<i64> = src.shape.iter().map(|&n| n as i64).collect();
        let mut src = FV::Tensor(src);
        if name == "index_add" {
            if let Some(al) = a.opt(4, "alpha").cloned() {
                src = self.elementwise(Binary::Mul, &[src, al], span)?;
            }
        }
        let idx = self.tview(&ix, |t| t.view(&view)?.expand(&sizes)).map_err(err(span))?;
        let xt = self.term_as(&FV::Tensor(x.clone()), xd, span)?;
        let it = self.term_as(&FV::Tensor(idx), DType::I64, span)?;
        let st = self.term_as(&src, xd, span)?;
        let dd = self.t.leaf(Node::Int(d as i64));
        let add = self.t.leaf(Node::Bool(BoolLit(name == "index_add")));
        self.fresh_op(OpName::Scatter, vec![xt, dd, it, st, add], None, span)
    }

    /// `bincount(input, weights, minlength)`: a scatter-add into `minlength` bins, which must be given (known
    /// before the program runs). PyTorch makes `max(input) + 1` bins where a value reaches `minlength`: that shape
    /// depends on the data, so such a value is an error when the program runs (the scatter's index check), never
    /// a silently smaller result.
    fn bincount(&mut self, a: &A, span: Span) -> FR<FV> {
        let x = a.tensor(0, "input")?;
        let w = match a.opt(1, "weights") {
            None | Some(FV::None) => None,
            Some(_) => Some(a.tensor(1, "weights")?),
        };
        let minlength = a.int_or(2, "minlength", 0)?;
        let wt = w.as_ref().map(|w| (self.roots[w.root].dtype, w.shape.as_slice()));
        let dtype = crate::tensor::index::check_bincount(self.roots[x.root].dtype, &x.shape, wt, minlength)
            .map_err(err(span))?;
        if minlength == 0 {
            return diag(
                span,
                "`bincount` without `minlength` makes max(input) + 1 bins, a number that depends on the data (a \
                 data-dependent output shape): the functional and optimized engines need `minlength`, with every \
                 value below it (the reference engine runs it)",
            );
        }
        let bins = self.full(&[minlength as usize], dtype, crate::tensor::Scalar::I(0)).map_err(err(span))?;
        if x.shape[0] == 0 {
            return Ok(FV::Tensor(self.fresh(bins, None, span)?));
        }
        let bins = self.t.at(bins);
        let src = match w {
            Some(w) => self.term_as(&FV::Tensor(w), dtype, span)?,
            None => {
                let ones = self.full(&x.shape, dtype, crate::tensor::Scalar::I(1)).map_err(err(span))?;
                self.t.at(ones)
            }
        };
        let it = self.term_as(&FV::Tensor(x), DType::I64, span)?;
        let dim = self.t.leaf(Node::Int(0));
        let add = self.t.leaf(Node::Bool(BoolLit(true)));
        self.fresh_op(OpName::Scatter, vec![bins, dim, it, src, add], None, span)
    }

    /// `searchsorted`: for each value, how many boundaries of its row are below it (`right`: at most it), as the
    /// reference computes it (`crate::interp::more_ops`): `(b.unsqueeze(-2) < v.unsqueeze(-1)).sum(-1)`.
    fn searchsorted(&mut self, a: &A, span: Span) -> FR<FV> {
        let b = a.tensor(0, "sorted_sequence")?;
        let v = match a.req(1, "input")? {
            FV::Tensor(t) => FV::Tensor(t.clone()),
            other => {
                let other = other.clone();
                let (t, _) = self.scalar_tensor(&other, None, span)?;
                FV::Tensor(self.fresh(t, None, span)?)
            }
        };
        let FV::Tensor(vt) = &v else { return diag(span, "internal: searchsorted input") };
        let right = match a.opt(99, "right") {
            None => None,
            Some(r) => Some(a.number(r).ok_or_else(|| {
                super::state::Stop::NeedsStatic(span, "searchsorted(right=) known only at run time".into())
            })?),
        };
        let side = a.opt(99, "side").map(|s| match s {
            FV::Str(x) => crate::interp::value::Value::Str(x.clone()),
            FV::None => crate::interp::value::Value::None,
            _ => crate::interp::value::Value::Int(0),
        });
        let right = crate::interp::more_ops::searchsorted_side(right, side.as_ref()).map_err(err(span))?;
        if a.opt(99, "sorter").is_some_and(|s| !matches!(s, FV::None)) {
            return diag(span, "searchsorted(sorter=) is not supported");
        }
        crate::interp::more_ops::searchsorted_check(&b.shape, &vt.shape).map_err(err(span))?;
        let op = if right { Binary::Le } else { Binary::Lt };
        let cmp = if vt.shape.is_empty() {
            self.elementwise(op, &[FV::Tensor(b), v], span)?
        } else {
            let bu = self.method("unsqueeze", span, vec![FV::Tensor(b), FV::Int(-2)])?;
            let vu = self.method("unsqueeze", span, vec![v, FV::Int(-1)])?;
            self.elementwise(op, &[bu, vu], span)?
        };
        let counts = self.method("sum", span, vec![cmp, FV::Int(-1)])?;
        match a.opt(99, "out_int32").and_then(|v| a.number(v)) {
            Some(s) if s.to_f64() != 0.0 => self.method("to", span, vec![counts, FV::DType(DType::I32)]),
            _ => Ok(counts),
        }
    }

    pub(super) fn desugared(&mut self, name: &str, a: &A, _method: bool) -> FR<FV> {
        let span = a.span;
        match name {
            "lerp" => self.lerp(a, span),
            "searchsorted" => self.searchsorted(a, span),
            "addcmul" | "addcdiv" => self.addc(name, a, span),
            "softplus" => self.softplus(a, span),
            "cosine_similarity" => self.cosine_similarity(a, span),
            "logsigmoid" => self.log_sigmoid(a, span),
            "binary_cross_entropy_with_logits" => self.bce_with_logits(a, span),
            "cross_entropy" | "nll_loss" | "kl_div" => self.loss(name, a, span),
            "isclose" | "allclose" => self.isclose(name, a, span),
            "atan" | "arctan" => {
                let x = a.tensor(0, "input")?;
                self.elementwise(Binary::Atan2, &[FV::Tensor(x), FV::Int(1)], span)
            }
            "matrix_exp" => {
                let x = a.tensor(0, "A")?;
                let d = self.roots[x.root].dtype;
                crate::tensor::linalg::matrix_exp_check(d, &x.shape).map_err(err(span))?;
                let xt = self.term_as(&FV::Tensor(x.clone()), d, span)?;
                self.fresh_op(OpName::MatrixExp, vec![xt], None, span)
            }
            "vector_norm" | "norm" => {
                // `dtype=`: the input is cast to it first.
                let x = match a.dtype(4, "dtype")? {
                    Some(d) => match self.method("to", span, vec![FV::Tensor(a.tensor(0, "input")?), FV::DType(d)])? {
                        FV::Tensor(x) => x,
                        _ => return diag(span, "internal: a cast that is not a tensor"),
                    },
                    None => a.tensor(0, "input")?,
                };
                let p = self.norm_p(a.opt(1, if name == "norm" { "p" } else { "ord" }), name, span)?;
                let dims = a.dims(2, "dim")?.unwrap_or_default();
                let keep = a.bool_or(3, "keepdim", false)?;
                self.vector_norm(x, p, &dims, keep, span)
            }
            "linalg_norm" => {
                let x = a.tensor(0, "input")?;
                let dims = a.dims(2, "dim")?;
                let ord = match a.opt(1, "ord") {
                    None => None,
                    Some(FV::Str(s)) => Some(crate::interp::value::Value::Str(s.clone())),
                    Some(v) => match a.number(v) {
                        Some(n) => Some(crate::interp::value::Value::from_scalar(n)),
                        None => return diag(span, "linalg.norm(): ord must be known before the program runs"),
                    },
                };
                let p = crate::interp::more_ops::linalg_norm_p(ord.as_ref(), x.shape.len(), dims.as_deref())
                    .map_err(err(span))?;
                let keep = a.bool_or(3, "keepdim", false)?;
                self.vector_norm(x, p, &dims.unwrap_or_default(), keep, span)
            }
            "einsum" => self.einsum(a),
            "outer" | "ger" => {
                let x = a.tensor(0, "input")?;
                let y = a.tensor(1, "vec2")?;
                let xc = self.tview(&x, |t| t.unsqueeze(1)).map_err(err(span))?;
                let yr = self.tview(&y, |t| t.unsqueeze(0)).map_err(err(span))?;
                self.elementwise(Binary::Mul, &[FV::Tensor(xc), FV::Tensor(yr)], span)
            }
            "hypot" => {
                let x = self.operand_fv(a, 0, "input")?;
                let y = self.operand_fv(a, 1, "other")?;
                let xx = self.elementwise(Binary::Mul, &[x.clone(), x], span)?;
                let yy = self.elementwise(Binary::Mul, &[y.clone(), y], span)?;
                let s = self.elementwise(Binary::Add, &[xx, yy], span)?;
                self.unary(Unary::Sqrt, &s, span)
            }
            "log2" | "log10" => {
                let l = self.unary(Unary::Log, &FV::Tensor(a.tensor(0, "input")?), span)?;
                let k = if name == "log2" { std::f64::consts::LN_2 } else { std::f64::consts::LN_10 };
                self.elementwise(Binary::Div, &[l, FV::Float(k)], span)
            }
            "leaky_relu" => {
                let x = a.tensor(0, "input")?;
                self.float_input("leaky_relu_cpu", &x, span)?;
                let slope = a.opt(1, "negative_slope").and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(0.01);
                let pos = self.elementwise(Binary::Gt, &[FV::Tensor(x.clone()), FV::Int(0)], span)?;
                let neg = self.elementwise(Binary::Mul, &[FV::Tensor(x.clone()), FV::Float(slope)], span)?;
                self.call_op("where", vec![pos, FV::Tensor(x), neg], span)
            }
            "elu" => {
                let x = a.tensor(0, "input")?;
                self.float_input("elu_cpu", &x, span)?;
                let alpha = match a.opt(1, "alpha") {
                    None => 1.0,
                    Some(v) => a.number(v).map(|s| s.to_f64()).ok_or_else(|| {
                        super::state::Stop::Diag(
                            crate::diag::Diagnostic::new("elu(): alpha must be a number known before the program runs")
                                .at(span),
                        )
                    })?,
                };
                let pos = self.elementwise(Binary::Gt, &[FV::Tensor(x.clone()), FV::Int(0)], span)?;
                let e = self.unary(Unary::Expm1, &FV::Tensor(x.clone()), span)?;
                let neg = self.elementwise(Binary::Mul, &[e, FV::Float(alpha)], span)?;
                self.call_op("where", vec![pos, FV::Tensor(x), neg], span)
            }
            "dropout" => {
                crate::interp::compat::dropout(a).map_err(err(span))?;
                Ok(FV::Tensor(a.tensor(0, "input")?))
            }
            "index_copy" | "index_add" => self.index_along(name, a, span),
            "bincount" => self.bincount(a, span),
            "isin" => self.isin(a, span),
            "l1_loss" | "mse_loss" | "smooth_l1_loss" => self.pointwise_loss(name, a, span),
            "scaled_dot_product_attention" => self.sdpa(a, span),
            "new_tensor" => {
                let x = a.tensor(0, "self")?;
                let dt = a.dtype(99, "dtype")?.unwrap_or(self.roots[x.root].dtype);
                let data = a.req(1, "data")?.clone();
                self.creation("tensor", &A::new(vec![data, FV::DType(dt)], vec![], span, "new_tensor".into()), false)
            }
            _ => self.nn_ops(name, a),
        }
    }
}

/// Whether `v` holds (itself, or inside a list, tuple or named tuple) the view `t`: possibly the same Python
/// object, whose shape an in-place shape change would change too.
impl<'m> Fz<'m> {
    /// `X.squeeze_(...)` / `X.unsqueeze_(...)`: a local name `X` is rebound to the new view, a temporary's value
    /// changes only (every other view keeps its shape), refused as the reference interpreter refuses it
    /// (`crate::interp::more_ops`).
    pub(super) fn shape_inplace(&mut self, env: &mut super::Env, obj: &Expr, name: &str, a: A) -> FR<FV> {
        let span = a.span;
        let base = &name[..name.len() - 1];
        let local = match &obj.kind {
            ExprKind::Name(n) => Some(n),
            _ => None,
        };
        let same = |x: &FV, y: &FV| matches!((x, y), (FV::Tensor(x), FV::Tensor(y)) if x == y);
        let target = crate::interp::pyvalue::shape_inplace_target(
            name,
            local,
            a.pos.first(),
            self.depth_calls,
            env,
            &self.consts,
            same,
        )
        .map_err(super::args::err(span))?;
        let r = self.torch(base, &a, true)?;
        // A program parameter's own object: the caller's tensor changes shape (see `Fz::param_objects`).
        if let (FV::Tensor(new), FV::Tensor(old), 1) = (&r, &target, self.depth_calls) {
            let at = crate::interp::pyvalue::param_object_target(&self.param_objects, name, local, |o| o == old)
                .map_err(super::args::err(span))?;
            if let Some(i) = at {
                // Changed once in a loop body, it would change on every iteration: the loop is unrolled instead.
                if !self.t.frames.is_empty() {
                    return super::state::needs_static(span, format!("`{name}` on a program parameter in a loop"));
                }
                if self.dyn_depth > 0 || self.t.arms > 0 {
                    return diag(
                        span,
                        format!("`{name}` on a program parameter under an `if` on a run-time value is not supported (the caller's tensor would change shape in one arm only)"),
                    );
                }
                (self.param_objects[i].object, self.param_objects[i].reshaped) = (new.clone(), true);
            }
        }
        a.check_keywords(&format!("Tensor.{name}"))?;
        if let Some(n) = local {
            env.insert(n.clone(), r.clone());
        }
        Ok(r)
    }
}
