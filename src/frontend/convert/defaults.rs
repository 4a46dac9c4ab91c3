//! Mutable default arguments. Python evaluates a default once, when the `def` runs, so a list or dict default that a
//! call changes is seen changed by the next call (`def f(x, seen=[]): seen.append(x)`); both engines evaluate a
//! default at each call instead. A function whose list, dict or set default may be changed or kept beyond the call
//! (a mutating method, a write into it, `+=`, bound to another name or an attribute, returned, passed to a function
//! of the program) is refused, located at that use; one that only reads it (iterates, indexes, passes it to torch or
//! a builtin: `x.permute(dims)`, `len(dims)`) runs, and is the same either way.

use crate::diag::{err, Diagnostic};
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

/// Builtins that only read an argument (or copy it).
const READING: &[&str] = &[
    "len",
    "list",
    "tuple",
    "sorted",
    "sum",
    "min",
    "max",
    "enumerate",
    "zip",
    "iter",
    "reversed",
    "set",
    "dict",
    "any",
    "all",
    "isinstance",
    "range",
    "str",
    "int",
    "float",
    "bool",
    "print",
    "map",
    "filter",
    "repr",
    "id",
    "type",
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

/// Refuses `f` where it may change or keep one of its mutable defaults (see the module's documentation).
pub(super) fn check(f: &Function) -> Result<(), Diagnostic> {
    for p in f.params.iter().filter(|p| p.default.as_ref().is_some_and(mutable)) {
        if let Some(at) = risky_use(&f.body, &p.name) {
            return err(
                at,
                format!(
                    "the default of `{}` is a list, dict or set this function may change or keep: Python makes it \
                     once and shares it between calls, funcfuse makes it at each call; default to None and make \
                     it in the body",
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

/// The first use in `body` of the name `n` that may change the object it names or keep it beyond the call.
fn risky_use(body: &[Stmt], n: &str) -> Option<crate::diag::Span> {
    let mut found = None;
    for s in body {
        let hit = match &s.kind {
            StmtKind::Assign { targets, value } => {
                // `n = ...` rebinds (fine); `o.a = n`, `l[i] = n`, `m = n` keep it; `n[i] = v` changes it.
                let stores = targets.iter().any(|t| matches!(&t.kind, ExprKind::Subscript(b, _) if is(b, n)));
                let kept = targets.iter().any(|t| !is(t, n)) && holds(value, n);
                stores || kept
            }
            StmtKind::AugAssign { target, value, .. } => {
                is(target, n) || matches!(&target.kind, ExprKind::Subscript(b, _) if is(b, n)) || holds(value, n)
            }
            StmtKind::Delete(targets) => {
                targets.iter().any(|t| matches!(&t.kind, ExprKind::Subscript(b, _) if is(b, n)))
            }
            StmtKind::Return(Some(v)) => holds(v, n),
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                found = found.or(risky_use(body, n));
                false
            }
            StmtKind::If { body, orelse, .. } => {
                found = found.or(risky_use(body, n)).or(risky_use(orelse, n));
                false
            }
            _ => false,
        };
        if hit {
            found = found.or(Some(s.span));
        }
        visit_exprs(std::slice::from_ref(s), &mut |e| {
            if found.is_none() && risky_call(e, n) {
                found = Some(e.span);
            }
        });
        if found.is_some() {
            return found;
        }
    }
    found
}

/// Whether `e` is the name `n`, or a display or starred item that holds it as it is.
fn holds(e: &Expr, n: &str) -> bool {
    match &e.kind {
        ExprKind::Name(m) => m == n,
        ExprKind::List(xs) | ExprKind::Tuple(xs) => xs.iter().any(|x| holds(x, n)),
        ExprKind::Dict(kv) => kv.iter().any(|(k, v)| holds(k, n) || holds(v, n)),
        ExprKind::IfExp { body, orelse, .. } => holds(body, n) || holds(orelse, n),
        ExprKind::BoolOp(_, xs) => xs.iter().any(|x| holds(x, n)),
        ExprKind::Starred(x) => holds(x, n),
        _ => false,
    }
}

/// Whether call `e` may change `n` or keep it: a mutating method of it, or `n` itself an argument of a function of
/// the program (a plain name that is no reading builtin), or of a mutating method of another object (`l.append(n)`).
fn risky_call(e: &Expr, n: &str) -> bool {
    let ExprKind::Call { func, args, kwargs } = &e.kind else { return false };
    let passed = args.iter().chain(kwargs.iter().map(|(_, v)| v)).any(|a| holds(a, n));
    match &func.kind {
        ExprKind::Attr(o, m) if is(o, n) => MUTATING.contains(&m.as_str()),
        ExprKind::Attr(_, m) => passed && MUTATING.contains(&m.as_str()),
        ExprKind::Name(f) => passed && !READING.contains(&f.as_str()),
        _ => passed,
    }
}
