//! Mutable default arguments. Python evaluates a default once, when the `def` runs, so a list or dict default that a
//! call changes is seen changed by the next call (`def f(x, seen=[]): seen.append(x)`); both engines evaluate a
//! default at each call instead. A function that changes its list, dict or set default itself (a mutating method,
//! a write into it, `+=`, `del`) is refused, located at that change; one that reads it or keeps it (`self.anchors =
//! anchors`, as detection heads' constructors do) runs. Known gap: a default changed through another name, an
//! attribute or a function it is passed to (`self.anchors.append(...)` in another method, with two instances made
//! from the default) is not seen.

use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// Methods of lists, dicts and sets that change them.
const MUTATING: &[&str] = &[
    "append",
    "extend",
    "insert",
    "pop",
    "remove",
    "clear",
    "update",
    "setdefault",
    "popitem",
    "add",
    "discard",
    "sort",
    "reverse",
];

/// Whether a default is a fresh mutable object: a list, dict or set display, or `list()`/`dict()`/`set()`.
fn mutable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::List(_) | ExprKind::Dict(_) => true,
        ExprKind::Call { func, .. } => {
            matches!(&func.kind, ExprKind::Name(n) if matches!(n.as_str(), "list" | "dict" | "set"))
        }
        _ => false,
    }
}

/// Refuses `f` where it changes one of its mutable defaults (see the module's documentation).
pub(super) fn check(f: &Function) -> Result<(), Diagnostic> {
    for p in f.params.iter().filter(|p| p.default.as_ref().is_some_and(mutable)) {
        if let Some(at) = change(&f.body, &p.name) {
            return err(
                at,
                format!(
                    "the default of `{}` is a list, dict or set this function changes: Python makes it once and \
                     shares it between calls, funcfuse makes it at each call; default to None and make it in the \
                     body",
                    p.name
                ),
            );
        }
    }
    Ok(())
}

fn is(e: &Expr, n: &str) -> bool {
    matches!(&e.kind, ExprKind::Name(m) if m == n)
}

/// Whether `t` (an assignment target) writes into the object `n` names (`n[i] = v`).
fn into(t: &Expr, n: &str) -> bool {
    matches!(&t.kind, ExprKind::Subscript(b, _) if is(b, n))
}

/// The first statement or call in `body` that changes the object the name `n` names.
fn change(body: &[Stmt], n: &str) -> Option<Span> {
    for s in body {
        let nested = match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => change(body, n),
            StmtKind::If { body, orelse, .. } => change(body, n).or_else(|| change(orelse, n)),
            _ => None,
        };
        if nested.is_some() {
            return nested;
        }
        let writes = match &s.kind {
            StmtKind::Assign { targets, .. } | StmtKind::Delete(targets) => targets.iter().any(|t| into(t, n)),
            // `n += [x]` extends the list in place.
            StmtKind::AugAssign { target, .. } => is(target, n) || into(target, n),
            _ => false,
        };
        if writes {
            return Some(s.span);
        }
        let mut found = None;
        let flat = match &s.kind {
            StmtKind::For { .. } | StmtKind::While { .. } | StmtKind::If { .. } => None,
            _ => Some(std::slice::from_ref(s)),
        };
        visit_exprs(flat.unwrap_or(&[]), &mut |e| {
            let ExprKind::Call { func, .. } = &e.kind else { return };
            if matches!(&func.kind, ExprKind::Attr(o, m) if is(o, n) && MUTATING.contains(&m.as_str())) {
                found = found.or(Some(e.span));
            }
        });
        if found.is_some() {
            return found;
        }
    }
    None
}
