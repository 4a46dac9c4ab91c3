//! `torch.distributions.Categorical(logits=NAME).entropy()`, as Hugging Face's `EtaLogitsWarper` and policy-gradient
//! code write it, rewritten into the tensor ops PyTorch's `Categorical` runs (torch/distributions/categorical.py):
//! the constructor normalizes the logits, `logits - logits.logsumexp(-1, keepdim=True)`; `probs` is their softmax;
//! `entropy()` is `-(clamp(logits, min=finfo(dtype).min) * probs).sum(-1)`. The logits must be a name, so that
//! reading it twice is reading one value. Every other use of `torch.distributions` is left to the engines, which
//! refuse it (an unsupported attribute).
//!
//! What is not reproduced: the constructor's argument validation (PyTorch raises `ValueError` for NaN logits or
//! logits of no dims; here NaN logits give a NaN entropy and 0-d logits the reduction's error).

use crate::diag::Span;
use crate::frontend::ast::*;

/// Rewrites every `torch.distributions.Categorical(logits=NAME).entropy()` in `body`.
pub(super) fn categorical_entropy(body: &mut [Stmt]) {
    visit_exprs_mut(body, &mut |e| {
        if let Some(logits) = entropy_of(e) {
            *e = entropy(&logits, e.span);
        }
    });
}

/// The logits' name, where `e` is `torch.distributions.Categorical(logits=NAME).entropy()`.
fn entropy_of(e: &Expr) -> Option<String> {
    let ExprKind::Call { func, args, kwargs } = &e.kind else { return None };
    let ExprKind::Attr(made, method) = &func.kind else { return None };
    if method != "entropy" || !args.is_empty() || !kwargs.is_empty() {
        return None;
    }
    let ExprKind::Call { func: ctor, args, kwargs } = &made.kind else { return None };
    if !args.is_empty() || !is_attr_path(ctor, &["torch", "distributions", "Categorical"]) {
        return None;
    }
    match kwargs.as_slice() {
        [(k, Expr { kind: ExprKind::Name(n), .. })] if k == "logits" => Some(n.clone()),
        _ => None,
    }
}

/// Whether `e` is the dotted path `names` (`torch.distributions.Categorical`).
fn is_attr_path(e: &Expr, names: &[&str]) -> bool {
    match (&e.kind, names) {
        (ExprKind::Name(n), [only]) => n == only,
        (ExprKind::Attr(v, a), [rest @ .., last]) => a == last && is_attr_path(v, rest),
        _ => false,
    }
}

/// `-(torch.clamp(L, min=torch.finfo(L.dtype).min) * torch.softmax(L, dim=-1)).sum(-1)` with
/// `L = NAME - NAME.logsumexp(-1, keepdim=True)`, every node at `span` (the user's call).
fn entropy(name: &str, span: Span) -> Expr {
    let e = |kind| Expr { kind, span };
    let name_e = || e(ExprKind::Name(name.to_string()));
    let torch = |attr: &str| e(ExprKind::Attr(Box::new(e(ExprKind::Name("torch".into()))), attr.into()));
    let call = |func: Expr, args: Vec<Expr>, kwargs: Vec<(String, Expr)>| {
        e(ExprKind::Call { func: Box::new(func), args, kwargs })
    };
    let method = |recv: Expr, m: &str| e(ExprKind::Attr(Box::new(recv), m.into()));
    let minus_one = || e(ExprKind::Unary(UnaryOp::Neg, Box::new(e(ExprKind::Int(1)))));
    let normalized = || {
        let lse =
            call(method(name_e(), "logsumexp"), vec![minus_one()], vec![("keepdim".into(), e(ExprKind::Bool(true)))]);
        e(ExprKind::Bin(BinOp::Sub, Box::new(name_e()), Box::new(lse)))
    };
    let min_real = method(call(torch("finfo"), vec![method(name_e(), "dtype")], vec![]), "min");
    let clamped = call(torch("clamp"), vec![normalized()], vec![("min".into(), min_real)]);
    let probs = call(torch("softmax"), vec![normalized()], vec![("dim".into(), minus_one())]);
    let p_log_p = e(ExprKind::Bin(BinOp::Mul, Box::new(clamped), Box::new(probs)));
    let sum = call(method(p_log_p, "sum"), vec![minus_one()], vec![]);
    e(ExprKind::Unary(UnaryOp::Neg, Box::new(sum)))
}
