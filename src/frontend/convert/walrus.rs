//! Assignment expressions in `if` tests (`if (bias := cache.get("bias")) is not None and bias.shape[-1] >= n:`, as
//! OLMo writes its caches). The converter makes `NAME := VALUE` a call of [`WALRUS`]; here, in each `if` (an `elif`
//! is an `if` in the `else` block), a test `A and B` becomes `if A: (if B: BODY else: ELSE) else: ELSE` and `A or B`
//! becomes `if A: BODY else: (if B: BODY else: ELSE)`, which is Python's order of evaluation, until each test's
//! assignments are where the test starts evaluating (the test itself, the left of a comparison, the operand of
//! `not`): each such `NAME := VALUE` is the statement `NAME = VALUE` before the `if`, and `NAME` in the test. An
//! assignment expression anywhere else (a `while` test, an argument, a comprehension) is refused where it is.

use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;

/// The function a converted `NAME := VALUE` calls, with `NAME` as a string and `VALUE` (not a Python name).
pub(super) const WALRUS: &str = "<walrus>";

/// `NAME := VALUE` as the converter writes it.
pub(super) fn walrus(target: String, value: Expr, span: Span) -> ExprKind {
    let func = Box::new(Expr { kind: ExprKind::Name(WALRUS.into()), span });
    ExprKind::Call { func, args: vec![Expr { kind: ExprKind::Str(target), span }, value], kwargs: vec![] }
}

/// The name an assignment expression binds (Python's grammar allows only a name there).
pub(super) fn name_of(target: &ruff_python_ast::Expr) -> String {
    target.as_name_expr().map_or(String::new(), |n| n.id.to_string())
}

fn is_walrus(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Call { func, .. } if matches!(&func.kind, ExprKind::Name(n) if n == WALRUS))
}

fn has_walrus(e: &Expr) -> bool {
    let mut found = false;
    visit_expr(e, &mut |x| found |= is_walrus(x));
    found
}

/// A function's converted body with the assignment expressions of its `if` tests rewritten; any other refused.
pub(super) fn hoisted(mut body: Vec<Stmt>) -> Result<Vec<Stmt>, Diagnostic> {
    hoist(&mut body);
    match first_expr(&body, is_walrus) {
        Some(stray) => Err(Diagnostic::new(
            "assignment expressions (`:=`) are supported only where an `if` test starts evaluating (`if (x := f()) \
             is not None and ...:`)",
        )
        .at(stray.span)),
        None => Ok(body),
    }
}

fn hoist(body: &mut Vec<Stmt>) {
    let mut i = 0;
    while i < body.len() {
        let (mut before, span) = (Vec::new(), body[i].span);
        if let StmtKind::If { test, body: yes, orelse } = &mut body[i].kind {
            if has_walrus(test) {
                split(test, yes, orelse, span);
                leading(test, &mut before);
            }
        }
        match &mut body[i].kind {
            StmtKind::If { body: yes, orelse, .. } => {
                hoist(yes);
                hoist(orelse);
            }
            StmtKind::For { body: inner, .. } | StmtKind::While { body: inner, .. } => hoist(inner),
            _ => {}
        }
        let n = before.len();
        body.splice(i..i, before);
        i += n + 1;
    }
}

/// `if A and B ...` / `if A or B ...` with an assignment expression past `A`: the nested `if`s that evaluate as
/// Python does, so that each test starts with its own assignments.
fn split(test: &mut Expr, yes: &mut Vec<Stmt>, orelse: &mut Vec<Stmt>, span: Span) {
    let ExprKind::BoolOp(and, xs) = &mut test.kind else { return };
    if xs.len() < 2 || !xs[1..].iter().any(has_walrus) {
        return;
    }
    let and = *and;
    let rest: Vec<Expr> = xs.drain(1..).collect();
    let first = xs.pop().expect("one operand left");
    let rest = match rest.len() {
        1 => rest.into_iter().next().expect("one"),
        _ => Expr { kind: ExprKind::BoolOp(and, rest), span: test.span },
    };
    *test = first;
    let inner = |yes: Vec<Stmt>, no: Vec<Stmt>| {
        vec![Stmt { kind: StmtKind::If { test: rest.clone(), body: yes, orelse: no }, span }]
    };
    if and {
        let nested = inner(std::mem::take(yes), orelse.clone());
        *yes = nested;
    } else {
        let nested = inner(yes.clone(), std::mem::take(orelse));
        *orelse = nested;
    }
}

/// Each `NAME := VALUE` where `e` starts evaluating, replaced by `NAME` after the statement `NAME = VALUE` put in
/// `out` (in evaluation order).
fn leading(e: &mut Expr, out: &mut Vec<Stmt>) {
    let walrus = is_walrus(e);
    match &mut e.kind {
        ExprKind::Call { args, .. } if walrus => {
            let [Expr { kind: ExprKind::Str(n), .. }, value] = args.as_mut_slice() else { return };
            let (n, mut value) = (n.clone(), value.clone());
            leading(&mut value, out);
            let span = e.span;
            out.push(Stmt {
                kind: StmtKind::Assign { targets: vec![Expr { kind: ExprKind::Name(n.clone()), span }], value },
                span,
            });
            e.kind = ExprKind::Name(n);
        }
        ExprKind::Compare(a, _) => leading(a, out),
        ExprKind::Unary(UnaryOp::Not, a) => leading(a, out),
        ExprKind::BoolOp(_, xs) => {
            if let Some(x) = xs.first_mut() {
                leading(x, out)
            }
        }
        _ => {}
    }
}
