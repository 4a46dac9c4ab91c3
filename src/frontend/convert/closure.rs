//! Nested `def`s (closures): each becomes a top-level helper `_<def NAME>@LINE:COL` whose extra keyword-only
//! parameters are the enclosing function's locals it reads (its captures), and the `def` statement becomes
//! `NAME = <closure>(_<def NAME>@LINE:COL, c1=c1, ...)`, a function value that holds the captured values and passes
//! them on each call.
//!
//! Python's closures read a captured variable when they run, not when they are defined. Capturing the value at the
//! `def` is the same only when the variable is not assigned again after it: that is checked here, and anything else
//! is refused where it happens (an assignment after the `def`, a `def` in a loop that assigns what it reads, a
//! default that reads a local, a nested function that calls itself, `nonlocal`, a `def` inside a nested `def`).

use super::bound_names;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// A nested `def` converted to a top-level helper, before its captures are known.
pub(super) struct Nested {
    /// The name the `def` binds in the enclosing function.
    pub name: String,
    pub func: Function,
}

/// The top-level name of the helper a nested `def NAME` at `span` becomes.
pub(super) fn lifted_name(name: &str, span: Span) -> String {
    format!("_<def {name}>@{}:{}", span.line, span.col)
}

/// The statement that replaces a nested `def`: `NAME = <closure>(HELPER)` (captures are filled in by [`close_over`]).
pub(super) fn placeholder(name: &str, helper: &str, span: Span) -> StmtKind {
    let name_expr = |n: &str| Expr { kind: ExprKind::Name(n.to_string()), span };
    StmtKind::Assign {
        targets: vec![name_expr(name)],
        value: Expr {
            kind: ExprKind::Call {
                func: Box::new(name_expr(MAKE_CLOSURE)),
                args: vec![name_expr(helper)],
                kwargs: vec![],
            },
            span,
        },
    }
}

/// Every binding of a name in `body`: the name, the binding statement's span and the spans of the loops around it.
pub(super) fn bindings(body: &[Stmt], loops: &mut Vec<Span>, out: &mut Vec<(String, Span, Vec<Span>)>) {
    for s in body {
        let mut names = Vec::new();
        match &s.kind {
            StmtKind::Assign { .. } | StmtKind::AugAssign { .. } => bound_names(std::slice::from_ref(s), &mut names),
            StmtKind::For { target, .. } => {
                let t = Stmt {
                    span: s.span,
                    kind: StmtKind::Assign { targets: vec![target.clone()], value: target.clone() },
                };
                bound_names(std::slice::from_ref(&t), &mut names);
            }
            _ => {}
        }
        // A `for` loop's target is assigned on every iteration: it binds inside the loop, not before it.
        let mut around = loops.clone();
        if matches!(s.kind, StmtKind::For { .. }) {
            around.push(s.span);
        }
        for n in names {
            out.push((n, s.span, around.clone()));
        }
        match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                loops.push(s.span);
                bindings(body, loops, out);
                loops.pop();
            }
            StmtKind::If { body, orelse, .. } => {
                bindings(body, loops, out);
                bindings(orelse, loops, out);
            }
            _ => {}
        }
    }
    // Comprehension targets bind too (conservatively, where the comprehension's statement is).
    for s in body {
        visit_exprs(std::slice::from_ref(s), &mut |e| {
            if let ExprKind::ListComp { target, .. } = &e.kind {
                let t = Stmt {
                    span: s.span,
                    kind: StmtKind::Assign { targets: vec![(**target).clone()], value: (**target).clone() },
                };
                let mut names = Vec::new();
                bound_names(std::slice::from_ref(&t), &mut names);
                out.extend(names.into_iter().map(|n| (n, s.span, loops.clone())));
            }
        });
    }
}

/// The names `g` reads that are not its own locals, in order of first read, with where each is first read.
pub(super) fn free_names(g: &Function) -> Vec<(String, Span)> {
    let mut own = g.param_names();
    bound_names(&g.body, &mut own);
    let mut free: Vec<(String, Span)> = Vec::new();
    visit_exprs(&g.body, &mut |e| {
        if let ExprKind::Name(n) = &e.kind {
            if !own.contains(n) && !free.iter().any(|(m, _)| m == n) {
                free.push((n.clone(), e.span));
            }
        }
    });
    free
}

/// Fills in the captures of each nested `def` of `f` (its placeholder's keywords and the helper's keyword-only
/// parameters), or refuses, located, what capturing values at the `def` would get wrong.
pub(super) fn close_over(f: &mut Function, nested: &mut [Nested]) -> Result<(), Diagnostic> {
    let mut local = f.param_names();
    bound_names(&f.body, &mut local);
    let mut binds = Vec::new();
    bindings(&f.body, &mut Vec::new(), &mut binds);
    let others: Vec<(String, Vec<String>)> =
        nested.iter().map(|n| (n.name.clone(), free_names(&n.func).into_iter().map(|(x, _)| x).collect())).collect();
    for n in nested.iter_mut() {
        let g = &mut n.func;
        let def_span = g.span;
        for p in &g.params {
            if let Some(d) = &p.default {
                let mut hit = None;
                visit_expr(d, &mut |e| {
                    if let ExprKind::Name(x) = &e.kind {
                        if hit.is_none() && local.contains(x) {
                            hit = Some((x.clone(), e.span));
                        }
                    }
                });
                if let Some((x, at)) = hit {
                    return err(at, format!("a default of nested function `{}` reads `{x}`, a local variable of `{}`: not supported; pass it as an argument", n.name, f.name));
                }
            }
        }
        let captures: Vec<(String, Span)> = free_names(g).into_iter().filter(|(x, _)| local.contains(x)).collect();
        let def_loops = binds.iter().find(|(_, s, _)| *s == def_span).map(|b| b.2.clone()).unwrap_or_default();
        for (c, read_at) in &captures {
            if *c == n.name {
                return err(*read_at, format!("nested function `{c}` calls itself (recursion is not supported)"));
            }
            for (b, at, loops) in &binds {
                if b != c || *at == def_span && *b == n.name {
                    continue;
                }
                if *at > def_span {
                    return err(*at, format!(
                        "`{c}` is assigned here, after nested function `{}` (line {}) that reads it is defined: the function would see the new value when it runs, which is not supported; assign it before the `def`",
                        n.name, def_span.line
                    ));
                }
                if loops.iter().any(|l| def_loops.contains(l))
                    && !called_in_its_iteration(f, nested_reads(&others, &n.name), &n.name, def_span, &def_loops)
                {
                    return err(def_span, format!(
                        "nested function `{}` is defined in a loop that assigns `{c}`, which it reads (line {}), and is used otherwise than called later in the same iteration: not supported; define it outside the loop and pass `{c}` as an argument",
                        n.name, at.line
                    ));
                }
            }
        }
        let kwargs: Vec<(String, Expr)> = captures
            .iter()
            .map(|(c, _)| (c.clone(), Expr { kind: ExprKind::Name(c.clone()), span: def_span }))
            .collect();
        for (c, _) in &captures {
            g.params.push(Param { name: c.clone(), ann: None, default: None, span: def_span });
        }
        fill(&mut f.body, def_span, &kwargs);
    }
    Ok(())
}

/// Sets the keywords of the placeholder at `at` (see [`placeholder`]).
fn fill(body: &mut [Stmt], at: Span, kwargs: &[(String, Expr)]) {
    for s in body {
        match &mut s.kind {
            StmtKind::Assign { value: Expr { kind: ExprKind::Call { func, kwargs: kw, .. }, .. }, .. }
                if s.span == at && matches!(&func.kind, ExprKind::Name(n) if n == MAKE_CLOSURE) =>
            {
                *kw = kwargs.to_vec();
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => fill(body, at, kwargs),
            StmtKind::If { body, orelse, .. } => {
                fill(body, at, kwargs);
                fill(orelse, at, kwargs);
            }
            _ => {}
        }
    }
}

/// Whether another nested function than `name` reads `name` (takes the closure as a value).
fn nested_reads(others: &[(String, Vec<String>)], name: &str) -> bool {
    others.iter().any(|(o, free)| o != name && free.iter().any(|x| x == name))
}

/// A closure defined in a loop that assigns what it captures is still exact when the `def` is a statement of the
/// innermost loop's body itself and the function is only called, after the `def`, within that body: every call
/// then runs the closure made earlier in the same iteration, after which nothing it captured is assigned (checked
/// separately). `read_elsewhere`: another nested function reads it.
fn called_in_its_iteration(f: &Function, read_elsewhere: bool, name: &str, def_span: Span, loops: &[Span]) -> bool {
    let Some(inner) = loops.last() else { return false };
    let Some(body) = loop_body(&f.body, *inner) else { return false };
    if read_elsewhere || !body.iter().any(|s| s.span == def_span) {
        return false;
    }
    // Reads of `name` in the whole function, and the calls of it after the `def` in the loop's body.
    let is_read = |e: &Expr| matches!(&e.kind, ExprKind::Name(n) if n == name);
    let (mut reads, mut calls) = (0, 0);
    visit_exprs(&f.body, &mut |e| {
        if is_read(e) {
            reads += 1;
        }
    });
    // The placeholder's target (`name = <closure>(...)`) is the one read that is not a call.
    let targets = 1;
    visit_exprs(body, &mut |e| {
        if let ExprKind::Call { func, .. } = &e.kind {
            if is_read(func) && e.span > def_span {
                calls += 1;
            }
        }
    });
    reads == calls + targets
}

/// The body of the loop statement at `at`, searched in `body`.
fn loop_body(body: &[Stmt], at: Span) -> Option<&[Stmt]> {
    for s in body {
        match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                if s.span == at {
                    return Some(body);
                }
                if let Some(b) = loop_body(body, at) {
                    return Some(b);
                }
            }
            StmtKind::If { body, orelse, .. } => {
                if let Some(b) = loop_body(body, at).or_else(|| loop_body(orelse, at)) {
                    return Some(b);
                }
            }
            _ => {}
        }
    }
    None
}
