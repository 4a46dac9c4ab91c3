//! Class-level values read through the class and a dataclass's inherited fields (`classes.rs` calls these).
//!
//! `C.NAME` of a class-level value (`Cfg.ALPHA`; `cfg = Cfg; cfg.ALPHA`, which the engines read through
//! `pywalk::attribute_of`) is the function `C::#NAME`, made for a value no program can change in place: making it
//! again at each read is then Python's one value. A base's values the class does not define again are the base's.

use ruff_python_ast as py;
use std::collections::HashMap;

use super::classes::{function, local_names, name, stmt, Class};
use crate::diag::Span;
use crate::frontend::ast::*;

/// The functions `C::#NAME` of class `cname` (base `base`, class-level values `attrs`).
pub(super) fn getters(
    cname: &str,
    base: Option<&str>,
    attrs: &[(String, Expr)],
    functions: &mut Vec<Function>,
    span: Span,
) {
    // `C.NAME` read through the class (`cfg = Config; cfg.ALPHA`, `Anchors.SIZES`): the function `C::#NAME`
    // ([`class_attr_reads`]), for a value no program can change in place (it is made at each read).
    for (n, e) in attrs.iter().filter(|(_, e)| unchangeable(e)) {
        let body = vec![stmt(StmtKind::Return(Some(e.clone())), e.span)];
        functions.push(function(format!("{cname}::#{n}"), vec![], body, e.span));
    }
    // (a base's that the class does not define again: the base's, read through its own)
    if let Some(b) = base {
        let inherited: Vec<String> = functions
            .iter()
            .filter_map(|f| f.name.strip_prefix(&format!("{b}::#")).map(String::from))
            .filter(|n| !attrs.iter().any(|(a, _)| a == n))
            .collect();
        for n in inherited {
            let call = Expr {
                kind: ExprKind::Call {
                    func: Box::new(name(&format!("{b}::#{n}"), span)),
                    args: vec![],
                    kwargs: vec![],
                },
                span,
            };
            functions.push(function(
                format!("{cname}::#{n}"),
                vec![],
                vec![stmt(StmtKind::Return(Some(call)), span)],
                span,
            ));
        }
    }
}

/// Whether a class-level value is one a program cannot change in place, so that making it again at each read
/// through the class is Python's one value: numbers, strings, None, names, attributes, tuples and arithmetic of
/// those, and calls of `math`'s or numpy's functions on them (not a list, a dict or another call).
fn unchangeable(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Float(_) | ExprKind::Bool(_) | ExprKind::Str(_) | ExprKind::NoneLit => true,
        ExprKind::Name(_) | ExprKind::Attr(..) => true,
        ExprKind::Tuple(xs) => xs.iter().all(unchangeable),
        ExprKind::Bin(_, a, b) => unchangeable(a) && unchangeable(b),
        ExprKind::Unary(_, a) => unchangeable(a),
        // A number from `math` or numpy (`CLIP = np.log(1000. / 16)`).
        ExprKind::Call { func, args, kwargs } => {
            matches!(&func.kind, ExprKind::Attr(m, _) if matches!(&m.kind, ExprKind::Name(m) if ["math", "np", "numpy"].contains(&m.as_str())))
                && args.iter().all(unchangeable)
                && kwargs.is_empty()
        }
        _ => false,
    }
}

/// Each read `C.NAME` of a class-level value through the class (`C` a class of the file not bound locally, `NAME`
/// its own or a base's, [`unchangeable`]) as the call `C::#NAME()` (a base's calls the base's). A class that
/// a program assigns attributes to (`C.NAME = v`) keeps its reads as they are.
pub(super) fn class_attr_reads(classes: &HashMap<String, Class>, functions: &mut [Function]) {
    let have: std::collections::HashSet<String> =
        functions.iter().filter(|f| f.name.contains("::#")).map(|f| f.name.clone()).collect();
    if have.is_empty() {
        return;
    }
    let mut written = std::collections::HashSet::new();
    for f in functions.iter() {
        super::sugar::visit_stmts(&f.body, &mut |s| {
            let targets: Vec<&Expr> = match &s.kind {
                StmtKind::Assign { targets, .. } => targets.iter().collect(),
                StmtKind::AugAssign { target, .. } => vec![target],
                _ => vec![],
            };
            for t in targets {
                if let ExprKind::Attr(o, _) = &t.kind {
                    if let ExprKind::Name(c) = &o.kind {
                        written.insert(c.clone());
                    }
                }
            }
        });
    }
    let defining = |c: &str, n: &str| Some(format!("{c}::#{n}")).filter(|g| have.contains(g));
    for f in functions.iter_mut() {
        let local = local_names(f);
        visit_exprs_mut(&mut f.body, &mut |e| {
            let ExprKind::Attr(obj, n) = &e.kind else { return };
            let ExprKind::Name(c) = &obj.kind else { return };
            if local.contains(c) || written.contains(c) || !classes.contains_key(c) {
                return;
            }
            if let Some(getter) = defining(c, n) {
                let span = e.span;
                e.kind = ExprKind::Call { func: Box::new(name(&getter, span)), args: vec![], kwargs: vec![] };
            }
        });
    }
}

/// A dataclass's fields as its `__init__` takes them: those of its dataclass bases first, the outermost base's
/// first, then its own; a field a subclass declares again keeps its place and takes the new default (Python's
/// `dataclasses`).
pub(super) fn dataclass_fields(cname: &str, classes: &HashMap<String, Class>) -> Vec<(String, Option<py::Expr>, Span)> {
    let mut chain = Vec::new();
    let mut cur = Some(cname.to_string());
    while let Some(c) = cur.and_then(|c| classes.get(&c)) {
        if c.dataclass {
            chain.push(c);
        }
        cur = c.base.clone();
        if chain.len() > classes.len() {
            break;
        }
    }
    let mut out: Vec<(String, Option<py::Expr>, Span)> = Vec::new();
    for c in chain.iter().rev() {
        for f in &c.fields {
            match out.iter_mut().find(|o| o.0 == f.0) {
                Some(o) => *o = f.clone(),
                None => out.push(f.clone()),
            }
        }
    }
    out
}
