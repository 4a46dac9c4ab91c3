//! `map(...)` and `itertools.product(...)` return iterators in Python: lazy (`map` calls its function when the
//! iterator is read, seeing values as they are then) and read once. Both engines build the whole list when the call
//! runs, which is the same only where the iterator is consumed at once, in full: as a `for` loop's or a
//! comprehension's iterable, an argument of a builtin that reads its argument to the end (`list`, `tuple`, `sorted`,
//! `sum`, `zip`, ...) or the value of an unpacking assignment (`q, k, v = map(f, (q, k, v))`). Anywhere else (stored
//! in a variable, returned, passed to a function) the call is refused where it is written.

use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// Builtins that read an iterable argument to its end when called.
const CONSUMERS: &[&str] = &["list", "tuple", "sorted", "sum", "min", "max", "any", "all", "zip", "enumerate", "dict"];

/// `Some(name)` if `e` is a call of a lazy iterator this module checks.
fn lazy(e: &Expr) -> Option<&'static str> {
    let ExprKind::Call { func, .. } = &e.kind else { return None };
    match &func.kind {
        ExprKind::Name(n) if n == "map" => Some("map"),
        ExprKind::Name(n) if n == "filter" => Some("filter"),
        ExprKind::Attr(m, a) if a == "product" && matches!(&m.kind, ExprKind::Name(n) if n == "itertools") => {
            Some("itertools.product")
        }
        _ => None,
    }
}

/// The spans of the lazy calls in `body` that are consumed at once.
fn consumed(body: &[Stmt], out: &mut Vec<Span>) {
    for s in body {
        match &s.kind {
            StmtKind::For { iter, body, .. } => {
                out.push(iter.span);
                consumed(body, out);
            }
            StmtKind::While { body, .. } => consumed(body, out),
            StmtKind::If { body, orelse, .. } => {
                consumed(body, out);
                consumed(orelse, out);
            }
            StmtKind::Assign { targets, value }
                if matches!(targets.as_slice(), [Expr { kind: ExprKind::Tuple(_) | ExprKind::List(_), .. }]) =>
            {
                out.push(value.span)
            }
            _ => {}
        }
    }
    visit_exprs(body, &mut |e| match &e.kind {
        ExprKind::ListComp { iter, .. } => out.push(iter.span),
        ExprKind::Call { func, args, .. } => {
            if matches!(&func.kind, ExprKind::Name(n) if CONSUMERS.contains(&n.as_str())) {
                out.extend(args.iter().map(|a| a.span));
            }
            // `xs.extend(product(a, b))` (vLLM's min-tokens penalty): a list's `extend` reads it to the end. (On
            // another object `extend` fails where it runs.)
            if matches!(&func.kind, ExprKind::Attr(_, m) if m == "extend") && args.len() == 1 {
                out.push(args[0].span);
            }
            // `f(*map(g, xs))`: starred arguments are read at once.
            out.extend(args.iter().filter_map(|a| match &a.kind {
                ExprKind::Starred(x) => Some(x.span),
                _ => None,
            }));
        }
        _ => {}
    });
}

/// Refuses, located, a lazy iterator of `f` that is not consumed at once (see the module doc). A function that binds
/// `map` or `itertools` itself is left alone (its own binding is called).
pub(super) fn check(f: &Function) -> Result<(), Diagnostic> {
    let mut local: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
    super::bound_names(&f.body, &mut local);
    if local.iter().any(|n| n == "map" || n == "filter" || n == "itertools") {
        return Ok(());
    }
    let mut ok = Vec::new();
    consumed(&f.body, &mut ok);
    let mut bad = None;
    visit_exprs(&f.body, &mut |e| {
        if let Some(name) = lazy(e) {
            if bad.is_none() && !ok.contains(&e.span) {
                bad = Some((name, e.span));
            }
        }
    });
    match bad {
        Some((name, at)) => err(
            at,
            format!(
                "`{name}(...)` returns an iterator, which Python computes as it is read and reads once; funcfuse \
                 computes it at once, which is the same only where it is consumed at once: iterate over it, unpack it \
                 or pass it to `list(...)` where it is made"
            ),
        ),
        None => Ok(()),
    }
}

/// `NAME = LAZY(...)` followed by an assignment that reads `NAME` first, once, where it is consumed at once and in full
/// (`y = CONSUMER(NAME, ...)`, `y = [e for x in NAME]`, `y = sum([e for x in NAME]) / n`), with `NAME` read
/// nowhere else unless that statement binds it anew (WaveRNN's `parameters = filter(...)` then `parameters =
/// sum([... for p in parameters]) / 1e6`): the call moves to where it is read. Nothing runs between the two, so its
/// arguments are evaluated where Python evaluates them, and it is then consumed at once.
fn inline_bound(body: &mut Vec<Stmt>, reads: &dyn Fn(&str) -> usize) {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => inline_bound(body, reads),
            StmtKind::If { body, orelse, .. } => {
                inline_bound(body, reads);
                inline_bound(orelse, reads);
            }
            _ => {}
        }
    }
    let mut i = 0;
    while i + 1 < body.len() {
        let name = match &body[i].kind {
            StmtKind::Assign { targets, value } if lazy(value).is_some() => match targets.as_slice() {
                [Expr { kind: ExprKind::Name(n), .. }] => Some(n.clone()),
                _ => None,
            },
            _ => None,
        };
        let next = &body[i + 1];
        let takes = name.as_deref().is_some_and(|n| {
            let rebinds = matches!(&next.kind, StmtKind::Assign { targets, .. }
                if matches!(targets.as_slice(), [Expr { kind: ExprKind::Name(t), .. }] if t == n));
            // Reads in the assignment's value, not its target.
            let mut once = 0;
            let mut count = |e: &Expr| once += matches!(&e.kind, ExprKind::Name(m) if m == n) as usize;
            match &next.kind {
                StmtKind::Assign { value, .. } => visit_expr(value, &mut count),
                _ => return false,
            }
            once == 1 && (reads(n) == 2 || rebinds) && read_first(next, n)
        });
        match (takes, name) {
            (true, Some(n)) => {
                let StmtKind::Assign { value, .. } = body.remove(i).kind else { unreachable!("matched above") };
                let mut value = Some(value);
                // (The moved call may read the name too, `xs = map(f, xs)`: that read is the earlier binding's.)
                let mut put = |e: &mut Expr| {
                    if matches!(&e.kind, ExprKind::Name(m) if *m == n) {
                        if let Some(v) = value.take() {
                            *e = v;
                        }
                    }
                };
                if let StmtKind::Assign { value, .. } = &mut body[i].kind {
                    visit_expr_mut(value, &mut put);
                }
            }
            _ => i += 1,
        }
    }
}

/// Builtins of [`CONSUMERS`] that read their argument to its end whatever it holds (`any`, `all` and `zip` may stop
/// early, where Python's lazy iterator would not have computed the rest).
const READ_IN_FULL: &[&str] = &["list", "tuple", "sorted", "sum", "min", "max", "enumerate", "dict"];

/// Whether statement `s` evaluates its read of `name` before anything else, where it is consumed at once and in full
/// (the forms [`inline_bound`] takes: an assignment; not a `for`, whose body runs between the items Python computes
/// and may change what they read, or leave early).
fn read_first(s: &Stmt, name: &str) -> bool {
    fn leftmost(e: &Expr, name: &str) -> bool {
        let is = |e: &Expr| matches!(&e.kind, ExprKind::Name(n) if n == name);
        match &e.kind {
            ExprKind::ListComp { iter, .. } => is(iter),
            ExprKind::Bin(_, l, _) => leftmost(l, name),
            ExprKind::Call { func, args, .. } => {
                matches!(&func.kind, ExprKind::Name(n) if READ_IN_FULL.contains(&n.as_str()))
                    && args.first().is_some_and(|a| is(a) || leftmost(a, name))
            }
            _ => false,
        }
    }
    match &s.kind {
        StmtKind::Assign { targets, value } if matches!(targets.as_slice(), [Expr { kind: ExprKind::Name(_), .. }]) => {
            leftmost(value, name)
        }
        _ => false,
    }
}

/// [`check`] on every function of a module (after `imports::qualify`, so a qualified `itertools.product` is seen): a
/// function that fails it moves to `failed`.
pub(super) fn check_all(path: &str, functions: &mut Vec<Function>, failed: &mut Vec<FailedFunction>) {
    let mut k = 0;
    while k < functions.len() {
        let f = &functions[k];
        let mut names = Vec::new();
        visit_exprs(&f.body, &mut |e| {
            if let ExprKind::Name(n) = &e.kind {
                names.push(n.clone());
            }
        });
        // (Every mention counts, the binding's too: a name bound and read once is mentioned twice.)
        inline_bound(&mut functions[k].body, &|n| names.iter().filter(|m| *m == n).count());
        match check(&functions[k]) {
            Ok(()) => {
                let mut local: Vec<String> = functions[k].params.iter().map(|p| p.name.clone()).collect();
                super::bound_names(&functions[k].body, &mut local);
                let free = |n: &str| !local.iter().any(|l| l == n);
                visit_exprs_mut(&mut functions[k].body, &mut |e| as_comprehension(e, &free));
                k += 1
            }
            Err(d) => {
                let f = functions.remove(k);
                failed.push(FailedFunction { name: f.name, span: f.span, error: d.in_file(path) });
            }
        }
    }
}

/// Builtins that `map` may take as its function by name (`map(int, line.split())`): called as the comprehension's
/// element, where the engines call them as builtins (a builtin type is not a function value here).
const MAPPED_BUILTINS: &[&str] = &["int", "float", "str", "bool", "abs", "len", "round"];

/// Calls consumed at once (see [`check`]) as the lists both engines build as comprehensions: `filter(f, xs)` as
/// `[v for v in xs if f(v)]` (`filter(None, xs)`: `if v`), and `map(B, xs)` of a builtin `B` of [`MAPPED_BUILTINS`]
/// as `[B(v) for v in xs]`. `free(name)`: the function does not bind `name` itself.
fn as_comprehension(e: &mut Expr, free: &dyn Fn(&str) -> bool) {
    let ExprKind::Call { func, args, kwargs } = &e.kind else { return };
    let ExprKind::Name(f) = &func.kind else { return };
    if args.len() != 2 || !kwargs.is_empty() || args.iter().any(|a| matches!(a.kind, ExprKind::Starred(_))) {
        return;
    }
    let span = e.span;
    let item = Expr { kind: ExprKind::Name("__comprehension_item".into()), span };
    let call = |g: &Expr| Expr {
        kind: ExprKind::Call { func: Box::new(g.clone()), args: vec![item.clone()], kwargs: vec![] },
        span,
    };
    let (elt, conds) = match (f.as_str(), &args[0].kind) {
        ("filter", ExprKind::NoneLit) if free("filter") => (item.clone(), vec![item.clone()]),
        ("filter", _) if free("filter") => (item.clone(), vec![call(&args[0])]),
        ("map", ExprKind::Name(b)) if free("map") && free(b) && MAPPED_BUILTINS.contains(&b.as_str()) => {
            (call(&args[0]), vec![])
        }
        _ => return,
    };
    e.kind = ExprKind::ListComp { elt: Box::new(elt), target: Box::new(item), iter: Box::new(args[1].clone()), conds };
}
