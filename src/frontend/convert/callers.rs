//! Functions that name what failed: a function that names a failed function fails too (located at the name), and a
//! name that cannot be used (an unsupported import, a class that failed) fails where it is read when that may not
//! happen on every call.

use super::{bound_names, classes, numpy};
use crate::diag::Diagnostic;
use crate::frontend::ast::*;

/// Moves every function that names a failed function, directly or through others, to `failed`, with a message at
/// its first such reference that gives the original error; a method of one of `classes` becomes one that fails with
/// that message where it is called (so that its class's instances are made with it: no `AttributeError` where Python
/// has the method). A name that is `unusable` (an unsupported import, a class that failed) fails where it is read,
/// not the whole function ([`defer_unusable`]).
pub(super) fn fail_callers(
    path: &str,
    functions: &mut Vec<Function>,
    failed: &mut Vec<FailedFunction>,
    unusable: &mut Vec<FailedFunction>,
    never_instances: &[String],
    classes: &[(String, Option<String>)],
) {
    // (A method that failed a check after the classes settled, `iterators::check_all`'s, say.)
    classes::stub_failed_methods(&|c| classes.iter().any(|(k, _)| k == c), functions, failed);
    // A subclass of a class that cannot be used cannot be used either (it would lack what failed).
    while let Some((c, b)) = classes.iter().find_map(|(c, b)| {
        let b = unusable.iter().find(|u| Some(&u.name) == b.as_ref())?;
        (!unusable.iter().any(|u| u.name == *c)).then(|| (c.clone(), b.clone()))
    }) {
        let error = Diagnostic::new(format!("`{}` cannot be used: {}", b.name, b.error)).at(b.span).in_file(path);
        unusable.push(FailedFunction { name: c, span: b.span, error });
    }
    defer_unusable(functions, unusable, never_instances);
    loop {
        let mut hit = None;
        'funcs: for (i, f) in functions.iter().enumerate() {
            let mut refs = Vec::new();
            visit_exprs(&f.body, &mut |e| {
                if let ExprKind::Name(n) = &e.kind {
                    refs.push((n.clone(), e.span));
                }
            });
            // Names the function binds are local everywhere in it (Python's scoping): they do not name functions.
            let mut local: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
            bound_names(&f.body, &mut local);
            for (n, span) in refs {
                if local.contains(&n) {
                    continue;
                }
                if let Some(bad) = failed.iter().chain(unusable.iter()).find(|g| g.name == n) {
                    let msg = format!("`{n}` cannot be used: {}", bad.error);
                    hit = Some((i, Diagnostic::new(msg).at(span).in_file(path)));
                    break 'funcs;
                }
            }
        }
        let Some((i, error)) = hit else { return };
        // A method that cannot be used fails where it is called (`classes::method_stub`).
        if functions[i].name.split_once("::").is_some_and(|(c, _)| classes.iter().any(|(k, _)| k == c)) {
            let f = &mut functions[i];
            *f = classes::method_stub(&f.name, f.span, &error);
            continue;
        }
        let f = functions.remove(i);
        failed.push(FailedFunction { name: f.name, span: f.span, error });
    }
}

/// Makes each read of an `unusable` name in `functions` (one they do not bind themselves) under an `if` or in a
/// loop a refusal with its error where it is evaluated: code that reaches it only on a path it does not take
/// (torchMoji's `PackedSequence(...)` for packed input, whisper's `Categorical(...)` for sampling at a temperature)
/// runs. A read every call makes still fails the function while the file converts. `isinstance(x, N)` of a class
/// in `never_instances` (one no value a program can make is an instance of) is False.
fn defer_unusable(functions: &mut [Function], unusable: &[FailedFunction], never_instances: &[String]) {
    for f in functions.iter_mut() {
        let mut local: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
        bound_names(&f.body, &mut local);
        let bad = |n: &str| !local.iter().any(|l| l == n) && unusable.iter().any(|u| u.name == n);
        visit_exprs_mut(&mut f.body, &mut |e| {
            let ExprKind::Call { func, args, kwargs } = &e.kind else { return };
            let class = match (&func.kind, args.as_slice(), kwargs.is_empty()) {
                (ExprKind::Name(i), [_, c], true) if i == "isinstance" => c,
                _ => return,
            };
            if matches!(&class.kind, ExprKind::Name(n) if bad(n) && never_instances.contains(n)) {
                e.kind = ExprKind::Bool(false);
            }
        });
        conditional_exprs(&mut f.body, false, &mut |e| {
            let ExprKind::Name(n) = &e.kind else { return };
            if let Some(u) = unusable.iter().find(|u| u.name == *n).filter(|_| bad(n)) {
                let why = Diagnostic::new(format!("`{n}` cannot be used: {}", u.error)).at(e.span);
                *e = numpy::refusal(why, e.span);
            }
        });
    }
}

/// Whether a statement of `body` returns or raises, at any depth.
fn leaves(body: &[Stmt]) -> bool {
    body.iter().any(|s| match &s.kind {
        StmtKind::Return(_) | StmtKind::Raise(_) => true,
        StmtKind::If { body, orelse, .. } => leaves(body) || leaves(orelse),
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => leaves(body),
        _ => false,
    })
}

/// Visits (as [`visit_exprs_mut`]) the expressions of `body` that may not be evaluated on every call: those under an
/// `if` or in a loop's body, and those after an `if` or loop that may return or raise (`conditional` where `body` is
/// one of those already).
fn conditional_exprs(body: &mut [Stmt], mut conditional: bool, f: &mut dyn FnMut(&mut Expr)) {
    for s in body {
        let may_exit = matches!(&s.kind, StmtKind::If { .. } | StmtKind::For { .. } | StmtKind::While { .. })
            && leaves(std::slice::from_ref(s));
        match &mut s.kind {
            StmtKind::If { test, body, orelse } => {
                if conditional {
                    visit_expr_mut(test, f);
                }
                conditional_exprs(body, true, f);
                conditional_exprs(orelse, true, f);
            }
            StmtKind::For { target, iter, body } => {
                if conditional {
                    visit_expr_mut(target, f);
                    visit_expr_mut(iter, f);
                }
                conditional_exprs(body, true, f);
            }
            StmtKind::While { test, body } => {
                if conditional {
                    visit_expr_mut(test, f);
                }
                conditional_exprs(body, true, f);
            }
            _ if conditional => visit_exprs_mut(std::slice::from_mut(s), f),
            _ => {}
        }
        conditional |= may_exit;
    }
}
