//! `torch.optim`'s `Optimizer` base class, `SGD`, `Adam` and `AdamW` as classes of the file. Optimizer code
//! subclasses `Optimizer` (its `__init__(params, defaults)` makes `param_groups`, `state` and `defaults`) or wraps a
//! built-in one (`Lookahead(torch.optim.SGD(...))`), and real ports must run as written. The classes are Python source,
//! `optim.py`, converted with the file's own classes (`classes.rs`) where the file mentions one of [`OPTIM_CLASSES`]
//! (a whole word outside comments), under names no Python program can bind (`optim·NAME`: [`class_name`]), and
//! located at that first mention. A class statement whose base is `Optimizer`, `optim.Optimizer`,
//! `torch.optim.Optimizer`, `torch.optim.optimizer.Optimizer` (or `SGD`, `Adam`, `AdamW` so) gets it as its base;
//! a bare name only where the file imports it from `torch.optim` ([`base`]). Both engines call the constructor for
//! `torch.optim.NAME(...)`.
//!
//! PyTorch keeps an optimizer's per-parameter state in a `defaultdict(dict)` keyed by the tensors. Here `state` is a
//! dict keyed by tensors (as `id()` tells them apart), and a read `X.state[K]` in a file with these classes is
//! `X.state.setdefault(K, {}) if isinstance(X, optim·Optimizer) else X.state[K]` ([`state_reads`]): what the
//! `defaultdict` gives for an optimizer, and the plain read for anything else; `X.state = defaultdict(dict)`
//! (Lookahead's own state) is `X.state = {}`. `X` and `K` must be names, attributes of names or constants (they are
//! read twice); any other read stays a plain one, which raises `KeyError` rather than give a wrong value.

use ruff_python_ast as py;

use crate::diag::Span;
use crate::frontend::ast::*;

const PRELUDE: &str = include_str!("optim.py");

/// The torch.optim classes made so, by their PyTorch names.
pub const OPTIM_CLASSES: &[&str] = &["Optimizer", "SGD", "Adam", "AdamW"];

/// The name the class made for `torch.optim.NAME` has among the file's functions, if `NAME` is one of
/// [`OPTIM_CLASSES`].
pub fn class_name(name: &str) -> Option<String> {
    OPTIM_CLASSES.contains(&name).then(|| format!("optim·{name}"))
}

/// The byte offset of the first mention of one of [`OPTIM_CLASSES`] in `source`, where the file needs the classes.
pub(super) fn mention(source: &str) -> Option<usize> {
    OPTIM_CLASSES.iter().filter_map(|n| super::modules::first_mention(source, n)).min()
}

/// The statements of `optim.py`, each class renamed [`class_name`] (its base too).
pub(super) fn prelude() -> Vec<py::Stmt> {
    let parsed = ruff_python_parser::parse_module(PRELUDE).expect("optim.py parses");
    let mut body = parsed.into_syntax().body;
    for s in &mut body {
        if let py::Stmt::ClassDef(c) = s {
            let renamed = class_name(c.name.as_str()).expect("a class of OPTIM_CLASSES");
            c.name = py::Identifier::new(renamed, c.name.range);
            if let Some(args) = c.arguments.as_mut() {
                for b in args.args.iter_mut() {
                    if let py::Expr::Name(n) = b {
                        n.id = class_name(n.id.as_str()).expect("a class of OPTIM_CLASSES").into();
                    }
                }
            }
        }
    }
    body.into_iter().collect()
}

/// The names `from torch.optim import NAME [as BOUND]` (or `from torch.optim.optimizer import Optimizer`) binds to
/// one of [`OPTIM_CLASSES`]: (bound, NAME).
pub(super) fn imported(body: &[py::Stmt]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in body {
        let py::Stmt::ImportFrom(imp) = s else { continue };
        let module = imp.module.as_ref().map(|m| m.as_str()).unwrap_or("");
        for a in &imp.names {
            let name = a.name.as_str();
            let from_optim = module == "torch.optim" || (module == "torch.optim.optimizer" && name == "Optimizer");
            if from_optim && OPTIM_CLASSES.contains(&name) {
                out.push((a.asname.as_ref().unwrap_or(&a.name).to_string(), name.to_string()));
            }
        }
    }
    out
}

/// The class of [`OPTIM_CLASSES`] a class statement's base `e` names, renamed: `torch.optim.NAME`,
/// `torch.optim.optimizer.Optimizer`, `optim.NAME`, or a name `imported` from torch.optim.
pub(super) fn base(e: &py::Expr, imported: &[(String, String)]) -> Option<String> {
    let mut parts = Vec::new();
    let mut cur = e;
    while let py::Expr::Attribute(a) = cur {
        parts.push(a.attr.as_str());
        cur = &a.value;
    }
    let py::Expr::Name(n) = cur else { return None };
    parts.push(n.id.as_str());
    parts.reverse();
    let name = match parts.as_slice() {
        [bound] => imported.iter().find(|(b, _)| b == bound).map(|(_, n)| n.as_str())?,
        ["optim", name] | ["torch", "optim", name] => name,
        ["torch", "optim", "optimizer", "Optimizer"] => "Optimizer",
        _ => return None,
    };
    class_name(name)
}

/// After the file's functions converted: the functions of `optim.py` (named `optim·...`) located at `at`, and their
/// `_refused(message)` calls made funcfuse's refusal ([`REFUSED`]).
pub(super) fn settle(functions: &mut [Function], at: Span) {
    for f in functions.iter_mut().filter(|f| f.name.starts_with("optim·")) {
        f.span = at;
        f.params.iter_mut().for_each(|p| {
            p.span = at;
            if let Some(d) = &mut p.default {
                visit_expr_mut(d, &mut |e| e.span = at);
            }
        });
        relocate(&mut f.body, at);
        visit_exprs_mut(&mut f.body, &mut |e| {
            e.span = at;
            if matches!(&e.kind, ExprKind::Name(n) if n == "_refused") {
                e.kind = ExprKind::Name(REFUSED.into());
            }
        });
    }
}

fn relocate(body: &mut [Stmt], at: Span) {
    for s in body {
        s.span = at;
        match &mut s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => relocate(body, at),
            StmtKind::If { body, orelse, .. } => {
                relocate(body, at);
                relocate(orelse, at);
            }
            _ => {}
        }
    }
}

/// In a function of a file with these classes: each read `X.state[K]` the `defaultdict(dict)` read of an optimizer's
/// state, and `X.state = defaultdict(dict)` a plain dict (see the module's documentation).
pub(super) fn state_reads(func: &mut Function) {
    block(&mut func.body);
    visit_exprs_mut(&mut func.body, &mut expand);
}

fn block(body: &mut [Stmt]) {
    for s in body {
        match &mut s.kind {
            StmtKind::Assign { targets, value } => {
                let state_target = targets.iter().all(|t| matches!(&t.kind, ExprKind::Attr(_, a) if a == "state"));
                if state_target && is_defaultdict_of_dict(value) {
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
                block(body);
            }
            StmtKind::While { test, body } => {
                visit_expr_mut(test, &mut read);
                block(body);
            }
            StmtKind::If { test, body, orelse } => {
                visit_expr_mut(test, &mut read);
                block(body);
                block(orelse);
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
    if a != "state" || !pure(owner) || !pure(key) {
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
    let optimizer = at(ExprKind::Name(class_name("Optimizer").expect("a class")));
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

fn is_defaultdict_of_dict(e: &Expr) -> bool {
    let ExprKind::Call { func, args, kwargs } = &e.kind else { return false };
    let named = match &func.kind {
        ExprKind::Name(n) => n == "defaultdict",
        ExprKind::Attr(m, a) => a == "defaultdict" && matches!(&m.kind, ExprKind::Name(n) if n == "collections"),
        _ => false,
    };
    named && kwargs.is_empty() && matches!(args.as_slice(), [Expr { kind: ExprKind::Name(f), .. }] if f == "dict")
}
