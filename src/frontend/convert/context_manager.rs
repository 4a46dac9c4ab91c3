//! `@contextlib.contextmanager` generator functions (pytorch_ema's `with ema.average_parameters():`, LitEma's
//! `ema_scope`): a body that yields once, at its top level (a `try: yield ... finally: ...` counts, as `try` without
//! handlers is its body then its `finally`), is split there. The call runs what comes before the `yield` and returns
//! a `_GeneratorContextManager` (`contextlib.py`, a prelude) holding the yielded value and a closure of what comes
//! after, which `__exit__` runs. `with f(...) as v:` (`sugar::with_block`) then runs the code before the `yield`,
//! binds `v`, runs the block and then the code after, as Python does. Python runs the code before the `yield` at
//! `__enter__`, not at the call: the same wherever the manager is entered where it is made (`with f(...)`), which is
//! how these functions are used. An error in the block fails the program (Python would hand it to the generator).

use super::closure;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// The class of `contextlib.py` a manager function returns.
pub(super) const MANAGER: &str = "contextlib·_GeneratorContextManager";

/// Whether a decorator is `@contextmanager` or `@contextlib.contextmanager`.
pub(super) fn is_decorator(e: &ruff_python_ast::Expr) -> bool {
    use ruff_python_ast::Expr as E;
    match e {
        E::Name(n) => n.id.as_str() == "contextmanager",
        E::Attribute(a) => {
            a.attr.as_str() == "contextmanager" && matches!(&*a.value, E::Name(n) if n.id == "contextlib")
        }
        _ => false,
    }
}

/// A manager function's converted body, split at its `yield` (see the module's documentation); the code after it
/// becomes a nested function for `nested`.
pub(super) fn split(
    mut body: Vec<Stmt>,
    span: Span,
    nested: &mut Vec<closure::Nested>,
) -> Result<Vec<Stmt>, Diagnostic> {
    let refuse = |at: Span| {
        err(
            at,
            "a `@contextmanager` function is supported where it yields once, at the top level of its body or of a \
             `try: ... finally:` there (not in a loop, an `if` or a `try` with `except`), and returns nothing before",
        )
    };
    let top = body.iter().position(|s| matches!(&s.kind, StmtKind::Expr(e) if super::generators::is_yield(e)));
    let Some(at) = top else {
        let first = first_expr(&body, super::generators::is_yield).map_or(span, |e| e.span);
        return refuse(first);
    };
    let after = body.split_off(at + 1);
    let Some(Stmt { kind: StmtKind::Expr(yielded), span: yield_at }) = body.pop() else { unreachable!() };
    if let Some(e) = first_expr(&body, super::generators::is_yield).or(first_expr(&after, super::generators::is_yield))
    {
        return refuse(e.span);
    }
    let mut early = None;
    super::sugar::visit_stmts(&body, &mut |s| {
        if early.is_none() && matches!(s.kind, StmtKind::Return(_)) {
            early = Some(s.span);
        }
    });
    if let Some(at) = early {
        return refuse(at);
    }
    let ExprKind::Call { mut args, .. } = yielded.kind else { unreachable!() };
    let value = args.pop().expect("a yield has its value");
    let exit = "<contextmanager exit>";
    let helper = closure::lifted_name(exit, yield_at);
    let at = |kind| Expr { kind, span: yield_at };
    let func = Function {
        name: helper.clone(),
        params: vec![],
        vararg: None,
        kwarg: None,
        returns: None,
        body: after,
        span: yield_at,
    };
    nested.push(closure::Nested { name: exit.into(), func });
    body.push(Stmt { kind: closure::placeholder(exit, &helper, yield_at), span: yield_at });
    let made = at(ExprKind::Call {
        func: Box::new(at(ExprKind::Name(MANAGER.into()))),
        args: vec![value, at(ExprKind::Name(exit.into()))],
        kwargs: vec![],
    });
    body.push(Stmt { kind: StmtKind::Return(Some(made)), span: yield_at });
    Ok(body)
}
