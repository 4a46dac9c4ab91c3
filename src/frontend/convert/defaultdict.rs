//! `collections.defaultdict` bound to a name of a function (`groups = defaultdict(list)`, then
//! `groups[label].append(box)`, `counts[k] += 1`): the name holds a plain dict, and each read `NAME[k]` is
//! `NAME.setdefault(k, FACTORY())`, which is what a `defaultdict` does on a missing key (and nothing on a present
//! one). `NAME[k] op= v` first runs `NAME.setdefault(k, FACTORY())`, then the plain `NAME[k] op= v`; `NAME[k] = v`
//! stays a plain store. The factories Python code writes are made directly (`list` is `[]`, `int` is `0`, `float`
//! is `0.0`, `dict` is `{}`, `tuple` is `()`, `str` is `""`, `bool` is `False`); any other, `set` too, is called.
//! The index `k` of an augmented assignment is evaluated twice, so it must not call a method that changes its object
//! (`append`, `pop`, an in-place tensor op, ...).
//!
//! Where the dict goes elsewhere (passed to a helper, returned, stored in a list), it is a plain dict there: a read
//! of a missing key raises `KeyError`, never a wrong value. A `defaultdict` made anywhere else (an attribute
//! `self.d = defaultdict(list)`, an argument), or a name bound both to one and to something else, is refused.

use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;

/// Whether `e` names `defaultdict` (`defaultdict`, `collections.defaultdict`).
fn is_defaultdict(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Name(n) => n == "defaultdict",
        ExprKind::Attr(m, a) => a == "defaultdict" && matches!(&m.kind, ExprKind::Name(n) if n == "collections"),
        _ => false,
    }
}

/// `defaultdict(...)`'s factory where `e` is such a call (`Some(None)`: no factory, a plain dict).
pub(super) fn made(e: &Expr) -> Option<Result<Option<&Expr>, Diagnostic>> {
    let ExprKind::Call { func, args, kwargs } = &e.kind else { return None };
    if !is_defaultdict(func) {
        return None;
    }
    Some(match (args.as_slice(), kwargs.is_empty()) {
        ([], true) => Ok(None),
        ([f], true) if !matches!(f.kind, ExprKind::Starred(_)) => Ok(Some(f)),
        _ => Err(Diagnostic::new("`defaultdict(...)`: funcfuse supports one argument, the default factory").at(e.span)),
    })
}

/// `NAME.setdefault(k, FACTORY())` at `span`: the value a `defaultdict`'s read of `k` gives. The factories Python
/// code writes make their value directly (`list` is `[]`); any other is called.
fn setdefault(obj: &Expr, k: &Expr, factory: &Expr, span: Span) -> Expr {
    let at = |kind| Expr { kind, span };
    let made = match &factory.kind {
        ExprKind::Name(n) => match n.as_str() {
            "list" => Some(ExprKind::List(vec![])),
            "int" => Some(ExprKind::Int(0)),
            "float" => Some(ExprKind::Float(0.0)),
            "dict" => Some(ExprKind::Dict(vec![])),
            "tuple" => Some(ExprKind::Tuple(vec![])),
            "str" => Some(ExprKind::Str(String::new())),
            "bool" => Some(ExprKind::Bool(false)),
            _ => None,
        },
        _ => None,
    };
    let call = || ExprKind::Call { func: Box::new(factory.clone()), args: vec![], kwargs: vec![] };
    let default = at(made.unwrap_or_else(call));
    let func = Box::new(at(ExprKind::Attr(Box::new(obj.clone()), "setdefault".into())));
    at(ExprKind::Call { func, args: vec![k.clone(), default], kwargs: vec![] })
}

/// Rewrites the `defaultdict`s of a function's `body` (see the module's documentation).
pub(super) fn rewrite(body: &mut Vec<Stmt>) -> Result<(), Diagnostic> {
    let mut bound = Vec::new();
    bindings(body, &mut bound);
    for (n, at, _) in bound.iter().filter(|(n, _, dd)| !dd && bound.iter().any(|(m, _, d)| *d && m == n)) {
        let m = format!("`{n}` is bound both to a `defaultdict` and to another value; give each its own name");
        return Err(Diagnostic::new(m).at(*at));
    }
    let mut factories: Vec<(String, Option<Expr>)> = Vec::new();
    find(body, &mut factories)?;
    let dicts: Vec<(String, Expr)> = factories.into_iter().filter_map(|(n, f)| Some((n, f?))).collect();
    if !dicts.is_empty() {
        reads(body, &dicts)?;
    }
    match first_expr(body, |e| matches!(&e.kind, ExprKind::Call { func, .. } if is_defaultdict(func))) {
        Some(stray) => Err(Diagnostic::new(
            "`defaultdict(...)` is supported only bound to a name (`groups = defaultdict(list)`), not made here",
        )
        .at(stray.span)),
        None => Ok(()),
    }
}

/// Records every `NAME = defaultdict(F)` of `body` and makes its value `{}`; refuses a name bound to a
/// `defaultdict` and to anything else, or to two with different factories.
fn find(body: &mut [Stmt], factories: &mut Vec<(String, Option<Expr>)>) -> Result<(), Diagnostic> {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::Assign { targets, value } => {
                let Some(factory) = made(value) else { continue };
                let factory = factory?.cloned();
                let [Expr { kind: ExprKind::Name(n), .. }] = targets.as_slice() else { continue };
                let shown = |f: &Option<Expr>| f.as_ref().map(|f| format!("{:?}", f.kind));
                match factories.iter().find(|(m, _)| m == n) {
                    Some((_, f)) if shown(f) != shown(&factory) => {
                        let m = format!("`{n}` is bound to two `defaultdict`s with different factories");
                        return Err(Diagnostic::new(m).at(value.span));
                    }
                    Some(_) => {}
                    None => factories.push((n.clone(), factory)),
                }
                value.kind = ExprKind::Dict(vec![]);
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => find(body, factories)?,
            StmtKind::If { body, orelse, .. } => {
                find(body, factories)?;
                find(orelse, factories)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Every name `body` binds, with whether that binding is `NAME = defaultdict(...)`.
fn bindings(body: &[Stmt], out: &mut Vec<(String, Span, bool)>) {
    fn names(t: &Expr, out: &mut Vec<(String, Span, bool)>) {
        match &t.kind {
            ExprKind::Name(n) => out.push((n.clone(), t.span, false)),
            ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter().for_each(|x| names(x, out)),
            ExprKind::Starred(x) => names(x, out),
            _ => {}
        }
    }
    for s in body {
        match &s.kind {
            StmtKind::Assign { targets, value } => match (targets.as_slice(), made(value)) {
                ([Expr { kind: ExprKind::Name(n), span }], Some(_)) => out.push((n.clone(), *span, true)),
                _ => targets.iter().for_each(|t| names(t, out)),
            },
            StmtKind::AugAssign { target, .. } => names(target, out),
            StmtKind::For { target, body, .. } => {
                names(target, out);
                bindings(body, out);
            }
            StmtKind::While { body, .. } => bindings(body, out),
            StmtKind::If { body, orelse, .. } => {
                bindings(body, out);
                bindings(orelse, out);
            }
            _ => {}
        }
    }
}

/// Whether evaluating `k` twice may differ from evaluating it once: it calls a method that changes its object.
fn changes_something(k: &Expr) -> bool {
    let mut found = false;
    visit_expr(k, &mut |e| {
        if let ExprKind::Call { func, .. } = &e.kind {
            if let ExprKind::Attr(_, m) = &func.kind {
                let mutating =
                    ["append", "pop", "extend", "insert", "update", "clear", "remove", "popitem", "setdefault"];
                found |= m.ends_with('_') || mutating.contains(&m.as_str());
            }
        }
    });
    found
}

/// `NAME[k]` read anywhere in `e` (not as a store target) as `NAME.setdefault(k, FACTORY())`.
fn in_expr(e: &mut Expr, dicts: &[(String, Expr)]) {
    visit_expr_mut(e, &mut |x| {
        let ExprKind::Subscript(obj, k) = &x.kind else { return };
        let ExprKind::Name(n) = &obj.kind else { return };
        let Some((_, factory)) = dicts.iter().find(|(m, _)| m == n) else { return };
        x.kind = setdefault(obj, k, factory, x.span).kind;
    });
}

/// A store target: `NAME[k]` stays (its `k` is read), anything else is read as an expression.
fn in_target(t: &mut Expr, dicts: &[(String, Expr)]) {
    match &mut t.kind {
        ExprKind::Subscript(obj, k) if matches!(&obj.kind, ExprKind::Name(n) if dicts.iter().any(|(m, _)| m == n)) => {
            in_expr(k, dicts)
        }
        ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter_mut().for_each(|x| in_target(x, dicts)),
        _ => in_expr(t, dicts),
    }
}

/// Rewrites the reads of the `dicts` (name and factory) in `body`.
fn reads(body: &mut Vec<Stmt>, dicts: &[(String, Expr)]) -> Result<(), Diagnostic> {
    let mut i = 0;
    while i < body.len() {
        let span = body[i].span;
        let mut before = None;
        match &mut body[i].kind {
            StmtKind::Assign { targets, value } => {
                targets.iter_mut().for_each(|t| in_target(t, dicts));
                in_expr(value, dicts);
            }
            StmtKind::AugAssign { target, value, .. } => {
                if let ExprKind::Subscript(obj, k) = &target.kind {
                    if let ExprKind::Name(n) = &obj.kind {
                        if let Some((_, factory)) = dicts.iter().find(|(m, _)| m == n) {
                            if changes_something(k) {
                                let m = "`NAME[k] op= v` on a `defaultdict` whose key `k` calls a method that changes \
                                         its object is not supported; compute the key first";
                                return Err(Diagnostic::new(m).at(k.span));
                            }
                            before = Some(Stmt { kind: StmtKind::Expr(setdefault(obj, k, factory, span)), span });
                        }
                    }
                }
                in_target(target, dicts);
                in_expr(value, dicts);
            }
            StmtKind::For { target, iter, body } => {
                in_target(target, dicts);
                in_expr(iter, dicts);
                reads(body, dicts)?;
            }
            StmtKind::While { test, body } => {
                in_expr(test, dicts);
                reads(body, dicts)?;
            }
            StmtKind::If { test, body, orelse } => {
                in_expr(test, dicts);
                reads(body, dicts)?;
                reads(orelse, dicts)?;
            }
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) | StmtKind::Raise(Some(e)) => in_expr(e, dicts),
            StmtKind::Assert { test, msg } => {
                in_expr(test, dicts);
                msg.iter_mut().for_each(|m| in_expr(m, dicts));
            }
            StmtKind::Delete(_)
            | StmtKind::Return(None)
            | StmtKind::Raise(None)
            | StmtKind::Pass
            | StmtKind::Break
            | StmtKind::Continue => {}
        }
        if let Some(s) = before {
            body.insert(i, s);
            i += 1;
        }
        i += 1;
    }
    Ok(())
}
