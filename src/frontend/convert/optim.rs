//! torch.optim's per-parameter state. PyTorch keeps an optimizer's state in a `defaultdict(dict)` keyed by the
//! tensors; here (`optim.py`, a prelude: `prelude.rs`) `state` is a dict keyed by tensors (as `id()` tells them
//! apart), and a read `X.state[K]` in a file with these classes is `X.state.setdefault(K, {}) if isinstance(X,
//! optim·Optimizer) else X.state[K]` ([`state_reads`]): what the `defaultdict` gives for an optimizer, and the plain
//! read for anything else; `X.state = defaultdict(dict)` in a method of an optimizer class (Lookahead's own state) is
//! `X.state = {}` (elsewhere it stays the `defaultdict` the conversion refuses). `X` must be a name,
//! an attribute of one or a constant (it is read twice); `K` is read once, whatever it is (SGDHD's
//! `self.state[self._params[0]]`); any other read stays a plain one, which raises `KeyError` rather than give a wrong
//! value.

use super::prelude::class_name;
use crate::frontend::ast::*;

/// In a function of a file with these classes: each read `X.state[K]` the `defaultdict(dict)` read of an optimizer's
/// state, and `X.state = defaultdict(dict)` a plain dict (see the module's documentation).
pub(super) fn state_reads(func: &mut Function, method_of_optimizer: bool) {
    block(&mut func.body, method_of_optimizer);
    visit_exprs_mut(&mut func.body, &mut expand);
}

/// The classes (by name) whose bases reach torch.optim's `Optimizer`: in their methods only, `X.state =
/// defaultdict(dict)` is the plain dict the state reads make a `defaultdict` of.
pub(super) fn subclasses(classes: &std::collections::HashMap<String, super::classes::Class>) -> Vec<String> {
    let optimizer = class_name("torch.optim", "Optimizer").expect("a class");
    let reaches = |c: &str| {
        let mut cur = Some(c.to_string());
        for _ in 0..=classes.len() {
            match cur {
                Some(k) if k == optimizer => return true,
                Some(k) => cur = classes.get(&k).and_then(|c| c.base.clone()),
                None => return false,
            }
        }
        false
    };
    let mut out: Vec<String> = classes.keys().filter(|c| reaches(c)).cloned().collect();
    out.sort();
    out
}

fn block(body: &mut [Stmt], method_of_optimizer: bool) {
    for s in body {
        match &mut s.kind {
            StmtKind::Assign { targets, value } => {
                let state_target = targets.iter().all(|t| matches!(&t.kind, ExprKind::Attr(_, a) if a == "state"));
                if method_of_optimizer && state_target && is_defaultdict_of_dict(value) {
                    value.kind = ExprKind::Dict(vec![]);
                }
                targets.iter_mut().for_each(target);
                visit_expr_mut(value, &mut read);
            }
            StmtKind::AugAssign { target: t, value, .. } => {
                target(t);
                visit_expr_mut(value, &mut read);
            }
            StmtKind::Delete(ts) => ts.iter_mut().for_each(target),
            StmtKind::For { target: t, iter, body } => {
                target(t);
                visit_expr_mut(iter, &mut read);
                block(body, method_of_optimizer);
            }
            StmtKind::While { test, body } => {
                visit_expr_mut(test, &mut read);
                block(body, method_of_optimizer);
            }
            StmtKind::If { test, body, orelse } => {
                visit_expr_mut(test, &mut read);
                block(body, method_of_optimizer);
                block(orelse, method_of_optimizer);
            }
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) | StmtKind::Raise(Some(e)) => visit_expr_mut(e, &mut read),
            StmtKind::Assert { test, msg } => {
                visit_expr_mut(test, &mut read);
                if let Some(m) = msg {
                    visit_expr_mut(m, &mut read);
                }
            }
            StmtKind::Return(None) | StmtKind::Raise(None) | StmtKind::Pass | StmtKind::Break | StmtKind::Continue => {}
        }
    }
}

/// An assignment target: its own subscript is a store, what it subscripts or reads an attribute of is read.
fn target(t: &mut Expr) {
    match &mut t.kind {
        ExprKind::Subscript(obj, idx) => {
            visit_expr_mut(obj, &mut read);
            visit_expr_mut(idx, &mut read);
        }
        ExprKind::Attr(obj, _) => visit_expr_mut(obj, &mut read),
        ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter_mut().for_each(target),
        ExprKind::Starred(x) => target(x),
        _ => {}
    }
}

/// The callee a read `X.state[K]` becomes first (`STATE_READ(X, K)`), before [`expand`] makes it the read: a
/// rewrite in one walk would visit the plain read it keeps again.
const STATE_READ: &str = "·state_read";

/// One expression read: `X.state[K]` marked as [`STATE_READ`]`(X, K)`.
fn read(e: &mut Expr) {
    let ExprKind::Subscript(obj, key) = &e.kind else { return };
    let ExprKind::Attr(owner, a) = &obj.kind else { return };
    if a != "state" || !pure(owner) {
        return;
    }
    let func = Box::new(Expr { kind: ExprKind::Name(STATE_READ.into()), span: e.span });
    e.kind = ExprKind::Call { func, args: vec![(**owner).clone(), (**key).clone()], kwargs: vec![] };
}

/// `STATE_READ(X, K)` as `X.state.setdefault(K, {}) if isinstance(X, optim·Optimizer) else X.state[K]`.
fn expand(e: &mut Expr) {
    let ExprKind::Call { func, args, .. } = &e.kind else { return };
    let (ExprKind::Name(f), [owner, key]) = (&func.kind, args.as_slice()) else { return };
    if f != STATE_READ {
        return;
    }
    let span = e.span;
    let at = |kind| Expr { kind, span };
    let call = |func: Expr, args| at(ExprKind::Call { func: Box::new(func), args, kwargs: vec![] });
    let state = || Box::new(at(ExprKind::Attr(Box::new(owner.clone()), "state".into())));
    let optimizer = at(ExprKind::Name(class_name("torch.optim", "Optimizer").expect("a class")));
    let is_optimizer = call(at(ExprKind::Name("isinstance".into())), vec![owner.clone(), optimizer]);
    let entry = call(at(ExprKind::Attr(state(), "setdefault".into())), vec![key.clone(), at(ExprKind::Dict(vec![]))]);
    let plain = at(ExprKind::Subscript(state(), Box::new(key.clone())));
    e.kind = ExprKind::IfExp { test: Box::new(is_optimizer), body: Box::new(entry), orelse: Box::new(plain) };
}

/// A name, an attribute of one, or a constant: an expression read twice with the same value.
fn pure(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(_) | ExprKind::Int(_) | ExprKind::Str(_) => true,
        ExprKind::Attr(o, _) => pure(o),
        _ => false,
    }
}

/// `defaultdict(dict)` (`super::defaultdict` reads the call).
fn is_defaultdict_of_dict(e: &Expr) -> bool {
    matches!(super::defaultdict::made(e), Some(Ok(Some(f))) if matches!(&f.kind, ExprKind::Name(n) if n == "dict"))
}
