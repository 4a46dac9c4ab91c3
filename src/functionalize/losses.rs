//! Classification losses as terms: `cross_entropy` (class indices or class probabilities), `nll_loss` and
//! `kl_div`, the compositions the reference interpreter computes (`crate::interp::losses`, which also checks the
//! options both engines accept).

use super::ops::{err, A};
use super::state::{diag, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::interp::losses::{close_checks, form, options, slots, spelled, Form, Given};
use crate::tensor::DType;

impl<'m> Fz<'m> {
    /// `cross_entropy`, `nll_loss` or `kl_div`.
    pub(super) fn loss(&mut self, name: &str, a: &A, span: Span) -> FR<FV> {
        spelled(name, &a.name).map_err(err(span))?;
        let at = slots(name);
        let reduction_arg = a.opt(at.reduction, "reduction").cloned();
        let given = Given {
            weight: a.opt(at.weight, "weight").is_some(),
            smoothing: !matches!(a.opt(at.smoothing, "label_smoothing"), None | Some(FV::Float(0.0) | FV::Int(0))),
            reduction: reduction_arg.as_ref().map(|v| match v {
                FV::Str(s) => Ok(&**s),
                other => Err(other.type_name()),
            }),
            legacy: crate::interp::losses::legacy_reduction(
                a.opt(at.size_average, "size_average"),
                a.opt(at.reduce, "reduce"),
            ),
        };
        let reduction = options(name, &given).map_err(err(span))?;
        let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "target")?);
        let dx = self.roots[x.root].dtype;
        let form = form(name, (&x.shape, dx), (&y.shape, self.roots[y.root].dtype)).map_err(err(span))?;
        let (xv, yv) = (FV::Tensor(x.clone()), FV::Tensor(y.clone()));
        let (d, probabilities) = match form {
            Form::Probabilities(d) => (d, true),
            Form::Indices(d) => (d, false),
            Form::KlDiv => {
                let n = x.shape.first().copied().unwrap_or(1) as f64;
                return self.kl_div(xv, yv, n, reduction, a.bool_or(5, "log_target", false)?, span);
            }
        };
        let logp = if name == "cross_entropy" { self.call_op("log_softmax", vec![xv, FV::Int(d)], span)? } else { xv };
        if probabilities {
            let p = self.call_op("mul", vec![logp, yv], span)?;
            let s = self.call_op("sum", vec![p, FV::Int(d)], span)?;
            let l = self.call_op("neg", vec![s], span)?;
            return self.reduced(l, reduction, None, span);
        }
        let ignore = a.int_or(4, "ignore_index", -100)?;
        let (logp, yv) = if d == 0 {
            (
                self.call_op("unsqueeze", vec![logp, FV::Int(0)], span)?,
                self.call_op("unsqueeze", vec![yv, FV::Int(0)], span)?,
            )
        } else {
            (logp, yv)
        };
        let skip = self.call_op("eq", vec![yv.clone(), FV::Int(ignore)], span)?;
        let safe = self.call_op("where", vec![skip.clone(), FV::Int(0), yv], span)?;
        let col = self.call_op("unsqueeze", vec![safe, FV::Int(1)], span)?;
        let picked = self.call_op("gather", vec![logp, FV::Int(1), col], span)?;
        let picked = self.call_op("squeeze", vec![picked, FV::Int(1)], span)?;
        let neg = self.call_op("neg", vec![picked], span)?;
        let l = self.call_op("where", vec![skip.clone(), FV::Float(0.0), neg], span)?;
        let kept = self.call_op("where", vec![skip, FV::Float(0.0), FV::Float(1.0)], span)?;
        let kept = if dx == DType::F32 { kept } else { self.cast_to(kept, dx, span)? };
        let count = self.call_op("sum", vec![kept], span)?;
        let out = self.reduced(l, reduction, Some(count), span)?;
        if d == 0 && reduction == "none" {
            return self.call_op("squeeze", vec![out, FV::Int(0)], span);
        }
        Ok(out)
    }

    /// `isclose` and `allclose` (a Python bool known when the program runs), as `interp::more_ops` computes them.
    pub(super) fn isclose(&mut self, name: &str, a: &A, span: Span) -> FR<FV> {
        let x = a.tensor(0, "input")?;
        let y = a.req(1, "other")?.clone();
        let num = |i: usize, n: &str, d: f64| match a.opt(i, n) {
            None => Ok(d),
            Some(FV::Float(v)) => Ok(*v),
            Some(FV::Int(v)) => Ok(*v as f64),
            Some(_) => diag(span, format!("{name}(): argument '{n}' must be a number")),
        };
        let (rtol, atol) = (num(2, "rtol", 1e-5)?, num(3, "atol", 1e-8)?);
        spelled(name, &a.name).map_err(err(span))?;
        let other = match &y {
            FV::Tensor(t) => Some(self.roots[t.root].dtype),
            _ => None,
        };
        close_checks(name, self.roots[x.root].dtype, other, rtol, atol).map_err(err(span))?;
        let equal_nan = a.bool_or(4, "equal_nan", false)?;
        let xv = FV::Tensor(x);
        let mut close = self.call_op("eq", vec![xv.clone(), y.clone()], span)?;
        if equal_nan {
            let nx = self.call_op("ne", vec![xv.clone(), xv.clone()], span)?;
            let ny = self.call_op("ne", vec![y.clone(), y.clone()], span)?;
            let both = self.call_op("logical_and", vec![nx, ny], span)?;
            close = self.call_op("logical_or", vec![close, both], span)?;
        }
        let ry = self.call_op("mul", vec![FV::Float(rtol), y.clone()], span)?;
        let ry = self.call_op("abs", vec![ry], span)?;
        let allowed = self.call_op("add", vec![FV::Float(atol), ry], span)?;
        let d = self.call_op("sub", vec![xv, y], span)?;
        let e = self.call_op("abs", vec![d], span)?;
        let finite = self.call_op("lt", vec![e.clone(), FV::Float(f64::INFINITY)], span)?;
        let le = self.call_op("le", vec![e, allowed], span)?;
        let within = self.call_op("logical_and", vec![finite, le], span)?;
        close = self.call_op("logical_or", vec![close, within], span)?;
        if name == "allclose" {
            let all = self.call_op("all", vec![close], span)?;
            let FV::Tensor(t) = all else { return diag(span, "allclose(): expected a tensor") };
            return self.item(&t, span);
        }
        Ok(close)
    }

    /// `kl_div` of input `xv` and target `yv` (`n`: the input's first dim, which `batchmean` divides by).
    fn kl_div(&mut self, xv: FV, yv: FV, n: f64, reduction: &str, log_target: bool, span: Span) -> FR<FV> {
        let l = if log_target {
            let e = self.call_op("exp", vec![yv.clone()], span)?;
            let d = self.call_op("sub", vec![yv, xv], span)?;
            self.call_op("mul", vec![e, d], span)?
        } else {
            let zero = self.call_op("eq", vec![yv.clone(), FV::Float(0.0)], span)?;
            let lg = self.call_op("log", vec![yv.clone()], span)?;
            let ylogy = self.call_op("mul", vec![yv.clone(), lg], span)?;
            let ylogy = self.call_op("where", vec![zero, FV::Float(0.0), ylogy], span)?;
            let yx = self.call_op("mul", vec![yv, xv], span)?;
            self.call_op("sub", vec![ylogy, yx], span)?
        };
        match reduction {
            "batchmean" => {
                let total = self.call_op("sum", vec![l], span)?;
                self.call_op("div", vec![total, FV::Float(n)], span)
            }
            r => self.reduced(l, r, None, span),
        }
    }

    fn reduced(&mut self, l: FV, reduction: &str, count: Option<FV>, span: Span) -> FR<FV> {
        match (reduction, count) {
            ("none", _) => Ok(l),
            ("sum", _) => self.call_op("sum", vec![l], span),
            (_, Some(n)) => {
                let total = self.call_op("sum", vec![l], span)?;
                self.call_op("div", vec![total, n], span)
            }
            (_, None) => self.call_op("mean", vec![l], span),
        }
    }

    fn cast_to(&mut self, v: FV, d: DType, span: Span) -> FR<FV> {
        let a = A::new(vec![v, FV::DType(d)], vec![], span, "to".into());
        self.torch("to", &a, true)
    }
}
