//! `break` and `continue` under an `if` on a run-time value, rewritten into flags that guard the rest of the loop;
//! `return` under such an `if`, lifted to the end of its path (a `for` over a list or tuple display that holds a
//! `return` is unrolled first, so that its returns can be lifted).
//!
//! A functional loop has no early exit, so a loop whose body may leave it at a data-dependent point becomes a loop
//! that carries two flags: `broken` (set by `break`, and from then on every iteration does nothing) and `skipped`
//! (set by `continue`, and the rest of this iteration does nothing). Statements after a point that may exit run under
//! `if not broken: if not skipped:`. A `while` loop tests `broken` first, as a leading `if broken: break`, which the
//! functionalizer turns into its condition. The flags are static Python bools wherever the conditions are, so a loop
//! that is unrolled anyway unrolls as before.
//!
//! The rewrite is applied only when functionalizing the program as written ran into such an exit, and only to the
//! source the functionalizer sees; the reference interpreter runs the program as written. Spans are kept, so errors
//! still point at the user's code. Flag names are not Python identifiers, so they never meet a user's name.

use crate::diag::Span;
use crate::frontend::ast::*;

/// The module with every `return` under an `if` lifted to the end of its path (`lift_returns`), and every loop
/// that exits under an `if` rewritten into flags.
pub(super) fn desugar(module: &Module) -> Module {
    let mut m = module.clone();
    let mut n = 0;
    for f in &mut m.functions {
        let mut body = std::mem::take(&mut f.body);
        if returns_in_literal_loop(&body) {
            body = unroll_literal_loops(body, &mut n);
        }
        if returns_under_if(&body, false) {
            let span = body.last().map(|s| s.span).unwrap_or(f.span);
            let mut with_end = body.clone();
            with_end.push(Stmt { kind: StmtKind::Return(None), span });
            // Past the budget the function stays as written (and its `return` under a run-time `if` is reported).
            let mut budget = LIFT_BUDGET;
            if let Some(lifted) = lift_returns(with_end, &mut budget) {
                body = lifted;
            }
        }
        f.body = block(body, &mut n);
    }
    m
}

/// The most iterations of a `while` loop that [`counted_while`] makes a `for` loop: the `for` runs them all, each
/// after a `break` doing nothing but test the flag (on a GPU a read of it by the host), where the `while` term stops.
const COUNTED_WHILE_MAX: i64 = 64;

/// Why: a `while` loop that may `break` on a run-time value becomes a `while` term, whose counter is a run-time
/// value, so a view chosen by an `if` on the counter is refused; as a `for` loop the counter stays known in every
/// iteration (fuzz seeds 102541, 171808, 185586, 192565, 198693).
///
/// What: `k` and `range(k, E, S)`, a `for` loop over which is exactly the loop `while k < E: A; k += S; B` (after
/// `before`, whose last statement that binds `k` is `k = INT`), where `E` and `S` are int literals, `S` at least 1,
/// at most [`COUNTED_WHILE_MAX`] steps from `k` to `E`, `A` and `B` do not rebind `k`, and `A` has no `continue` of
/// this loop (which would skip the step); with `<=`, `range(k, E + 1, S)`. The body keeps its step: the `for` rebinds
/// `k` to the value the `while` reaches at each iteration's start, and after the loop `k` is what the `while` leaves
/// (the last step taken, or `k` as it was before a `break` in `A`, or before no iteration).
fn counted_while(before: &[Stmt], test: &Expr, body: &[Stmt]) -> Option<(String, Expr)> {
    let ExprKind::Compare(lhs, ops) = &test.kind else { return None };
    let (ExprKind::Name(k), [(op @ (CmpOp::Lt | CmpOp::Le), end)]) = (&lhs.kind, ops.as_slice()) else { return None };
    let ExprKind::Int(last) = end.kind else { return None };
    // The statement that last bound `k` before the loop.
    let binds_k = |st: &Stmt| {
        let mut b = Vec::new();
        bound_names(std::slice::from_ref(st), &mut b);
        b.contains(k)
    };
    let prev = before.iter().rev().find(|st| binds_k(st))?;
    let StmtKind::Assign { targets, value: Expr { kind: ExprKind::Int(first), .. } } = &prev.kind else {
        return None;
    };
    if !matches!(targets.as_slice(), [Expr { kind: ExprKind::Name(n), .. }] if n == k) {
        return None;
    }
    // The step: one statement of the body's top level.
    let step_of = |st: &Stmt| match &st.kind {
        StmtKind::AugAssign { target, op: BinOp::Add, value: Expr { kind: ExprKind::Int(step), .. } } => {
            matches!(&target.kind, ExprKind::Name(n) if n == k).then_some(*step)
        }
        _ => None,
    };
    let at = body.iter().position(|st| step_of(st).is_some())?;
    let step = step_of(&body[at])?;
    let mut bound = Vec::new();
    bound_names(&body[..at], &mut bound);
    bound_names(&body[at + 1..], &mut bound);
    if step < 1 || bound.contains(k) || continues(&body[..at]) {
        return None;
    }
    // The exclusive end, and the iterations, in 128 bits (literals may be anywhere in i64).
    let end = i128::from(last) + i128::from(*op == CmpOp::Le);
    let trips = ((end - i128::from(*first)).max(0) + i128::from(step) - 1) / i128::from(step);
    if trips > i128::from(COUNTED_WHILE_MAX) {
        return None;
    }
    let span = test.span;
    let int = |v: i64| Expr { kind: ExprKind::Int(v), span };
    let args = vec![name(k, span), int(i64::try_from(end).ok()?), int(step)];
    Some((
        k.clone(),
        Expr { kind: ExprKind::Call { func: Box::new(name("range", span)), args, kwargs: Vec::new() }, span },
    ))
}

/// Whether `stmts` hold a `continue` of the enclosing loop (not of an inner one).
fn continues(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Continue => true,
        StmtKind::If { body, orelse, .. } => continues(body) || continues(orelse),
        _ => false,
    })
}

/// Whether some function of `module` has a loop that may leave an iteration under an `if` (which [`desugar`] turns
/// into flags, wherever the condition is known only at run time).
pub(super) fn has_exits_under_if(module: &Module) -> bool {
    fn any(stmts: &[Stmt]) -> bool {
        stmts.iter().any(|s| match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => exits_under_if(body, false) || any(body),
            StmtKind::If { body, orelse, .. } => any(body) || any(orelse),
            _ => false,
        })
    }
    module.functions.iter().any(|f| any(&f.body))
}

/// Whether `stmts` hold a `return` inside an `if` (outside loops), or anywhere outside loops when `under_if` holds.
fn returns_under_if(stmts: &[Stmt], under_if: bool) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => under_if,
        StmtKind::If { body, orelse, .. } => returns_under_if(body, true) || returns_under_if(orelse, true),
        _ => false,
    })
}

/// A statement list in which every `return` ends its path: the statements after an `if` that may return are moved
/// into both of its arms (and dropped after a `return`), so that an `if` on a run-time value either returns from
/// both arms, where the functionalizer merges the two returned values, or from neither. Statements are copied into
/// both arms, so code after a chain of such `if`s doubles with each: `budget` bounds the statements copied (None
/// past it).
fn lift_returns(stmts: Vec<Stmt>, budget: &mut usize) -> Option<Vec<Stmt>> {
    let mut out = Vec::new();
    let mut it = stmts.into_iter();
    while let Some(s) = it.next() {
        let span = s.span;
        match s.kind {
            StmtKind::Return(_) => {
                out.push(s);
                return Some(out);
            }
            StmtKind::If { test, mut body, mut orelse }
                if returns_under_if(&body, true) || returns_under_if(&orelse, true) =>
            {
                let rest: Vec<Stmt> = it.collect();
                *budget = budget.checked_sub(rest.len())?;
                body.extend(rest.iter().cloned());
                orelse.extend(rest);
                let (body, orelse) = (lift_returns(body, budget)?, lift_returns(orelse, budget)?);
                out.push(Stmt { kind: StmtKind::If { test, body, orelse }, span });
                return Some(out);
            }
            kind => out.push(Stmt { kind, span }),
        }
    }
    Some(out)
}

/// Whether a `for` over a list or tuple display (outside other loops) holds a `return`.
fn returns_in_literal_loop(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::For { iter, body, .. } => literal_items(iter).is_some() && returns_anywhere(body),
        StmtKind::If { body, orelse, .. } => returns_in_literal_loop(body) || returns_in_literal_loop(orelse),
        _ => false,
    })
}

fn returns_anywhere(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Return(_) => true,
        StmtKind::If { body, orelse, .. } => returns_anywhere(body) || returns_anywhere(orelse),
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => returns_anywhere(body),
        _ => false,
    })
}

/// Whether `stmts` hold a `break` or `continue` of the enclosing loop (not of an inner one).
fn exits_loop(stmts: &[Stmt]) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Break | StmtKind::Continue => true,
        StmtKind::If { body, orelse, .. } => exits_loop(body) || exits_loop(orelse),
        _ => false,
    })
}

/// The number of items of a list or tuple display without `*` items (at most `MAX_UNROLL`).
fn literal_items(e: &Expr) -> Option<usize> {
    match &e.kind {
        ExprKind::List(xs) | ExprKind::Tuple(xs)
            if xs.len() <= MAX_UNROLL && !xs.iter().any(|x| matches!(x.kind, ExprKind::Starred(_))) =>
        {
            Some(xs.len())
        }
        _ => None,
    }
}

/// The most items of a `for` over a display that `unroll_literal_loops` unrolls.
const MAX_UNROLL: usize = 64;

/// Each `for` (outside other loops) over a list or tuple display whose body holds a `return`, unrolled, so that
/// `lift_returns` can lift the return (AdamP's `for view_func in [self._channel_view, self._layer_view]:` with a
/// `return` under an `if` on a run-time value): `for x in [a, b]: body` becomes `%items = [a, b]`, then
/// `x = %items[0]`, body, `x = %items[1]`, body. The display is evaluated once, before the first iteration, as
/// Python does, and the target is bound as the loop binds it. A body that may `break` or `continue` stays a loop.
fn unroll_literal_loops(stmts: Vec<Stmt>, n: &mut usize) -> Vec<Stmt> {
    let mut out = Vec::new();
    for s in stmts {
        let span = s.span;
        match s.kind {
            StmtKind::For { target, iter, body }
                if literal_items(&iter).is_some() && returns_anywhere(&body) && !exits_loop(&body) =>
            {
                let count = literal_items(&iter).unwrap_or(0);
                let body = unroll_literal_loops(body, n);
                *n += 1;
                let items = format!("%items{n}");
                out.push(Stmt { kind: StmtKind::Assign { targets: vec![name(&items, span)], value: iter }, span });
                for k in 0..count {
                    let at = Expr { kind: ExprKind::Int(k as i64), span };
                    let value = Expr { kind: ExprKind::Subscript(Box::new(name(&items, span)), Box::new(at)), span };
                    out.push(Stmt { kind: StmtKind::Assign { targets: vec![target.clone()], value }, span });
                    out.extend(body.iter().cloned());
                }
            }
            StmtKind::If { test, body, orelse } => {
                let (body, orelse) = (unroll_literal_loops(body, n), unroll_literal_loops(orelse, n));
                out.push(Stmt { kind: StmtKind::If { test, body, orelse }, span })
            }
            kind => out.push(Stmt { kind, span }),
        }
    }
    out
}

/// The most statements `lift_returns` copies for one function.
const LIFT_BUDGET: usize = 20_000;

/// Whether `stmts` contain a `break` or `continue` of the enclosing loop (not of an inner loop) inside an `if`, or
/// anywhere when `under_if` already holds.
fn exits_under_if(stmts: &[Stmt], under_if: bool) -> bool {
    stmts.iter().any(|s| match &s.kind {
        StmtKind::Break | StmtKind::Continue => under_if,
        StmtKind::If { body, orelse, .. } => exits_under_if(body, true) || exits_under_if(orelse, true),
        _ => false,
    })
}

fn name(n: &str, span: Span) -> Expr {
    Expr { kind: ExprKind::Name(n.to_string()), span }
}

fn set(flag: &str, value: bool, span: Span) -> Stmt {
    Stmt {
        kind: StmtKind::Assign { targets: vec![name(flag, span)], value: Expr { kind: ExprKind::Bool(value), span } },
        span,
    }
}

/// `if not flag: body`.
fn unless(flag: &str, body: Vec<Stmt>, span: Span) -> Stmt {
    let test = Expr { kind: ExprKind::Unary(UnaryOp::Not, Box::new(name(flag, span))), span };
    Stmt { kind: StmtKind::If { test, body, orelse: Vec::new() }, span }
}

/// Rewrites the loops of a statement list (recursively).
fn block(stmts: Vec<Stmt>, n: &mut usize) -> Vec<Stmt> {
    let mut out: Vec<Stmt> = Vec::new();
    for s in stmts {
        let span = s.span;
        let kind = match s.kind {
            StmtKind::While { test, body } if exits_under_if(&body, false) => match counted_while(&out, &test, &body) {
                Some((k, iter)) => StmtKind::For { target: name(&k, span), iter, body },
                None => StmtKind::While { test, body },
            },
            kind => kind,
        };
        match kind {
            StmtKind::For { target, iter, body } if exits_under_if(&body, false) => {
                let (brk, skp) = flags(n);
                out.push(set(&brk, false, span));
                // The target is bound only while the loop runs: after a `break` it keeps the value it broke at
                // (`for i in range(4): if x[i] > 0: break` left `i` at 3, not where it broke).
                let item = format!("%item{n}");
                let at = target.span;
                let bind = Stmt { kind: StmtKind::Assign { targets: vec![target], value: name(&item, at) }, span: at };
                let mut inner = vec![bind, set(&skp, false, span)];
                inner.extend(guard(block(body, n), &brk, &skp));
                let body = vec![unless(&brk, inner, span)];
                out.push(Stmt { kind: StmtKind::For { target: name(&item, at), iter, body }, span });
            }
            StmtKind::While { test, body } if exits_under_if(&body, false) => {
                let (brk, skp) = flags(n);
                out.push(set(&brk, false, span));
                let leave = Stmt {
                    kind: StmtKind::If {
                        test: name(&brk, span),
                        body: vec![Stmt { kind: StmtKind::Break, span }],
                        orelse: Vec::new(),
                    },
                    span,
                };
                let mut body2 = vec![leave, set(&skp, false, span)];
                body2.extend(guard(block(body, n), &brk, &skp));
                out.push(Stmt { kind: StmtKind::While { test, body: body2 }, span });
            }
            StmtKind::For { target, iter, body } => {
                out.push(Stmt { kind: StmtKind::For { target, iter, body: block(body, n) }, span })
            }
            StmtKind::While { test, body } => {
                out.push(Stmt { kind: StmtKind::While { test, body: block(body, n) }, span })
            }
            StmtKind::If { test, body, orelse } => {
                out.push(Stmt { kind: StmtKind::If { test, body: block(body, n), orelse: block(orelse, n) }, span })
            }
            kind => out.push(Stmt { kind, span }),
        }
    }
    out
}

fn flags(n: &mut usize) -> (String, String) {
    *n += 1;
    (format!("%broken{n}"), format!("%skipped{n}"))
}

/// A loop body with its exits turned into flags: `break` sets `brk`, `continue` sets `skp`, and what follows a
/// statement that may exit runs only if neither is set.
fn guard(stmts: Vec<Stmt>, brk: &str, skp: &str) -> Vec<Stmt> {
    let mut out = Vec::new();
    let mut it = stmts.into_iter();
    while let Some(s) = it.next() {
        let span = s.span;
        match s.kind {
            StmtKind::Break => {
                out.push(set(brk, true, span));
                return out;
            }
            StmtKind::Continue => {
                out.push(set(skp, true, span));
                return out;
            }
            StmtKind::If { test, body, orelse } if exits_under_if(&body, true) || exits_under_if(&orelse, true) => {
                out.push(Stmt {
                    kind: StmtKind::If { test, body: guard(body, brk, skp), orelse: guard(orelse, brk, skp) },
                    span,
                });
                let rest = guard(it.collect(), brk, skp);
                if !rest.is_empty() {
                    let at = rest[0].span;
                    out.push(unless(brk, vec![unless(skp, rest, at)], at));
                }
                return out;
            }
            kind => out.push(Stmt { kind, span }),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kinds of the top-level loops of `f` in `src` after [`desugar`]: "for" or "while".
    fn loops(src: &str) -> Vec<&'static str> {
        let m = crate::frontend::parse_module("t.py", src).unwrap();
        let d = desugar(&m);
        let f = d.functions.iter().find(|f| f.name == "f").unwrap();
        f.body
            .iter()
            .filter_map(|s| match &s.kind {
                StmtKind::For { .. } => Some("for"),
                StmtKind::While { .. } => Some("while"),
                _ => None,
            })
            .collect()
    }

    fn program(before: &str, test: &str, body: &str) -> String {
        format!("def f(x: f32[4], n: int = 3):\n{before}    while {test}:\n{body}    return x\n")
    }

    #[test]
    fn counted_while_loops_that_break_on_data_become_for_loops() {
        let brk = "        if x.sum() > 0.0:\n            break\n";
        let cases = [
            // (before, test, body, expected)
            ("    k = 0\n", "k < 3", format!("{brk}        k += 1\n"), "for"),
            ("    k = 1\n", "k <= 4", format!("        k += 2\n{brk}"), "for"),
            ("    k = 0\n    y = x\n", "k < 3", format!("{brk}        x[k] += 1.0\n        k += 1\n"), "for"),
            (
                "    k = 0\n    y = x\n",
                "k < 3",
                format!("        if x.sum() > 1.0:\n            continue\n{brk}        k += 1\n"),
                "while",
            ),
            (
                "    k = 0\n",
                "k < 3",
                format!("{brk}        k += 1\n        if x.sum() > 1.0:\n            continue\n"),
                "for",
            ),
            ("    k = 0\n", "k < 3", format!("{brk}        k += 1\n        k = k * 2\n"), "while"),
            (
                "    k = 0\n",
                "k < 3",
                format!("        if x.sum() < 0.0:\n            k += 1\n{brk}        k += 1\n"),
                "while",
            ),
            ("    k = 0\n", "k < 3", format!("{brk}        if x.sum() < 0.0:\n            k += 1\n"), "while"),
            ("    k = 0.0\n", "k < 3", format!("{brk}        k += 1\n"), "while"),
            ("    k = 0\n    k = n\n", "k < 3", format!("{brk}        k += 1\n"), "while"),
            ("    k = 0\n", "k < n", format!("{brk}        k += 1\n"), "while"),
            ("    k = 0\n", "k < 3", format!("{brk}        k += 0\n"), "while"),
            ("    k = 0\n", "k < 65", format!("{brk}        k += 1\n"), "while"),
            ("    k = 0\n", "k < 64", format!("{brk}        k += 1\n"), "for"),
            ("    k = 0\n", "k > -3", format!("{brk}        k -= 1\n"), "while"),
            // No break on data: the loop is not rewritten at all.
            ("    k = 0\n", "k < 3", "        x += 1.0\n        k += 1\n".to_string(), "while"),
        ];
        for (before, test, body, want) in cases {
            let src = program(before, test, &body);
            assert_eq!(loops(&src), vec![want], "{src}");
        }
    }
}
