//! Generator functions (`def params(model): for name, p in model.items(): yield name, p`, as ema-pytorch and
//! stable-baselines3 write their helpers), where running the body to its end at the call gives what iterating it
//! lazily gives: the function returns the list of what it yields. `yield v` is `GEN.append(v)` on the list
//! ([`GENERATED`], made first), `yield from xs` is `GEN.extend(xs)`, and a bare `return` (or the end) returns the
//! list.
//!
//! Running the body at once differs from running it between the consumer's steps where the two interact: the body
//! computes on values the consumer changes in place, or the body changes what the consumer reads, or the consumer
//! stops early (an infinite generator, effects or errors after the last item taken). So the body may call only what
//! has no effects and computes nothing from tensors' data: Python's builtins of [`PURE`], the dict and string
//! methods of [`PURE_METHODS`], and nothing else (no torch function, no function or method of the program); it may
//! use no operator but `not`, `in` and `is` (`if name not in skipped`), and may not write through a subscript or an
//! attribute. Its values are then references to objects (and views of them) that the consumer sees as they are when
//! it reads them, as it would lazily. Anything else is refused, at the first offending call, operator or write.

use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;

/// The list a generator function's yields go to (not a Python name, so it meets none).
pub(super) const GENERATED: &str = "<yielded>";

/// The builtins a generator's body may call (none reads a tensor's data or runs the program's code).
/// (`zip_longest` as imported from itertools: a function of the file by that name would be taken too; an exception's
/// constructor, `ValueError(...)`, which a `raise` calls.)
const PURE: &[&str] =
    &["len", "range", "zip", "enumerate", "isinstance", "list", "tuple", "reversed", "hasattr", "dict", "zip_longest"];

/// The `itertools` functions a generator's body may call, by either name (they combine what they are given).
const ITERTOOLS: &[&str] = &["product", "chain", "zip_longest"];

/// The methods a generator's body may call (of dicts, lists and strings, reading).
const PURE_METHODS: &[&str] =
    &["items", "keys", "values", "get", "index", "count", "startswith", "endswith", "split", "format", "join"];

/// `yield v` (`from`: `yield from v`) as the expression that puts `v` on the generated list.
pub(super) fn yield_expr(value: Option<Expr>, from: bool, span: Span) -> ExprKind {
    let list = Expr { kind: ExprKind::Name(GENERATED.into()), span };
    let method = if from { "extend" } else { "append" };
    let func = Expr { kind: ExprKind::Attr(Box::new(list), method.into()), span };
    let value = value.unwrap_or(Expr { kind: ExprKind::NoneLit, span });
    ExprKind::Call { func: Box::new(func), args: vec![value], kwargs: vec![] }
}

/// Whether `e` is the call [`yield_expr`] makes.
pub(super) fn is_yield(e: &Expr) -> bool {
    matches!(&e.kind, ExprKind::Call { func, .. }
        if matches!(&func.kind, ExprKind::Attr(l, _) if matches!(&l.kind, ExprKind::Name(n) if n == GENERATED)))
}

/// A converted function's body: as it is where it yields nothing; else checked (see the module's documentation) and
/// made to build and return the list of what it yields.
pub(super) fn finish(mut body: Vec<Stmt>, span: Span) -> Result<Vec<Stmt>, Diagnostic> {
    if first_expr(&body, is_yield).is_none() {
        return Ok(body);
    }
    let refuse = |at: Span, what: &str| {
        let m = format!(
            "a generator function whose body {what} is not supported (it runs to its end when called, which gives \
             what lazy iteration gives only where the body has no effects and computes nothing from tensors)"
        );
        Err(Diagnostic::new(m).at(at))
    };
    let mut bad: Option<(Span, String)> = None;
    visit_exprs(&body, &mut |e| {
        let computes = match &e.kind {
            ExprKind::Bin(..) => true,
            ExprKind::Unary(op, _) => *op != UnaryOp::Not,
            ExprKind::Compare(_, rest) => {
                rest.iter().any(|(op, _)| !matches!(op, CmpOp::In | CmpOp::NotIn | CmpOp::Is | CmpOp::IsNot))
            }
            _ => false,
        };
        if computes && bad.is_none() {
            bad = Some((e.span, "computes with an operator (but `not`, `in` and `is`)".into()));
        }
        let ExprKind::Call { func, .. } = &e.kind else { return };
        let ok = is_yield(e)
            || match &func.kind {
                ExprKind::Name(n) => PURE.contains(&n.as_str()) || n.ends_with("Error") || n == "Exception",
                ExprKind::Attr(o, m) if matches!(&o.kind, ExprKind::Name(i) if i == "itertools") => {
                    ITERTOOLS.contains(&m.as_str())
                }
                ExprKind::Attr(_, m) => PURE_METHODS.contains(&m.as_str()),
                _ => false,
            };
        if !ok && bad.is_none() {
            let shown = match &func.kind {
                ExprKind::Name(n) => format!("calls `{n}`"),
                ExprKind::Attr(o, m) => match &o.kind {
                    ExprKind::Name(n) => format!("calls `{n}.{m}`"),
                    _ => format!("calls `.{m}(...)`"),
                },
                _ => "calls a computed function".into(),
            };
            bad = Some((e.span, shown));
        }
    });
    if let Some((at, what)) = bad {
        return refuse(at, &what);
    }
    if let Some(at) = writes_through(&body) {
        return refuse(at, "writes through a subscript or an attribute");
    }
    returns(&mut body)?;
    let list = |span| Expr { kind: ExprKind::Name(GENERATED.into()), span };
    let make = Stmt {
        kind: StmtKind::Assign { targets: vec![list(span)], value: Expr { kind: ExprKind::List(vec![]), span } },
        span,
    };
    body.insert(0, make);
    body.push(Stmt { kind: StmtKind::Return(Some(list(span))), span });
    Ok(body)
}

/// A bare `return` returns the list; `return v` (the generator's `StopIteration` value) is refused.
fn returns(body: &mut [Stmt]) -> Result<(), Diagnostic> {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::Return(None) => {
                s.kind = StmtKind::Return(Some(Expr { kind: ExprKind::Name(GENERATED.into()), span: s.span }))
            }
            StmtKind::Return(Some(_)) => {
                return Err(Diagnostic::new("`return VALUE` in a generator function is not supported").at(s.span))
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => returns(body)?,
            StmtKind::If { body, orelse, .. } => {
                returns(body)?;
                returns(orelse)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Where `body` first assigns through a subscript or an attribute, or augments anything but a name.
fn writes_through(body: &[Stmt]) -> Option<Span> {
    for s in body {
        let found = match &s.kind {
            StmtKind::Assign { targets, .. } => targets.iter().any(|t| !plain_target(t)),
            StmtKind::AugAssign { target, .. } => !matches!(target.kind, ExprKind::Name(_)),
            StmtKind::For { target, body, .. } => !plain_target(target) || writes_through(body).is_some(),
            StmtKind::While { body, .. } => writes_through(body).is_some(),
            StmtKind::If { body, orelse, .. } => writes_through(body).is_some() || writes_through(orelse).is_some(),
            _ => false,
        };
        if found {
            return Some(s.span);
        }
    }
    None
}

/// A target that binds names only (`a`, `a, (b, c)`, `*rest`).
fn plain_target(t: &Expr) -> bool {
    match &t.kind {
        ExprKind::Name(_) => true,
        ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter().all(plain_target),
        ExprKind::Starred(x) => plain_target(x),
        _ => false,
    }
}
