//! Lambdas that read local variables of the function they are written in (closures), as Adan's and many optimizers'
//! `lambda` helpers do. `Cx::lambda` converts each `lambda` in a function to a top-level helper
//! `_<lambda>@LINE:COL` and writes `<closure>(HELPER)` where the lambda was; this module gives each such value its
//! captures (the enclosing scopes' locals the lambda reads, as keyword-only parameters of the helper and keywords of
//! the `<closure>` call, as `closure` does for nested `def`s), or refuses, located, where capturing the values when
//! the lambda is evaluated could differ from Python's reading them when it is called.
//!
//! A lambda bound by a statement `NAME = lambda ...` of the top-level function is a nested `def NAME` for every
//! purpose (it moves to the nested functions and `closure::close_over` checks it). Any other lambda (a call argument,
//! one inside a nested `def` or another lambda) is exact when no variable it captures from the scope it is written
//! in is assigned by the statement that evaluates it, by a later statement, or in a loop around it.

use super::bound_names;
use super::closure::{bindings, free_names, Nested};
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// Where a lambda's `<closure>(HELPER)` is written.
#[derive(Clone, Copy, PartialEq)]
enum Unit {
    Top,
    Nested(usize),
    Lambda(usize),
    /// In a parameter's default (or an annotation): evaluated where the function is defined.
    Elsewhere,
}

/// Whether `e` is the `<closure>(HELPER)` a lambda named `helper` became.
fn is_placeholder(e: &Expr, helper: &str) -> bool {
    match &e.kind {
        ExprKind::Call { func, args, .. } => {
            matches!(&func.kind, ExprKind::Name(n) if n == MAKE_CLOSURE)
                && matches!(args.as_slice(), [Expr { kind: ExprKind::Name(h), .. }] if h == helper)
        }
        _ => false,
    }
}

fn contains_placeholder(body: &[Stmt], helper: &str) -> bool {
    let mut found = false;
    visit_exprs(body, &mut |e| found |= is_placeholder(e, helper));
    found
}

/// The locals a function declares: parameters, `*args` and the names its body binds.
fn own_locals(g: &Function) -> Vec<String> {
    let mut own = g.param_names();
    bound_names(&g.body, &mut own);
    own
}

/// The innermost statement of `body` whose own expressions (not those of the blocks it holds) contain the
/// placeholder of `helper`, with the spans of the loops around it.
fn statement_of(body: &[Stmt], helper: &str, loops: &mut Vec<Span>) -> Option<(Span, Vec<Span>)> {
    for s in body {
        let inner: Vec<&[Stmt]> = match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => vec![body],
            StmtKind::If { body, orelse, .. } => vec![body, orelse],
            _ => vec![],
        };
        let is_loop = matches!(s.kind, StmtKind::For { .. } | StmtKind::While { .. });
        for b in inner {
            if is_loop {
                loops.push(s.span);
            }
            let found = statement_of(b, helper, loops);
            if is_loop {
                loops.pop();
            }
            if found.is_some() {
                return found;
            }
        }
        if contains_placeholder(std::slice::from_ref(s), helper) {
            return Some((s.span, loops.clone()));
        }
    }
    None
}

/// Gives every lambda of the top-level function `f` its captures (see the module's comment). Lambdas bound by a
/// statement of `f` move to `nested`, for `closure::close_over`, which runs after this.
pub(super) fn close_lambdas(
    f: &mut Function,
    nested: &mut Vec<Nested>,
    lambdas: &mut Vec<Function>,
) -> Result<(), Diagnostic> {
    let units = lambda_units(f, nested, lambdas);
    let top = own_locals(f);
    let nested_locals: Vec<Vec<String>> = nested.iter().map(|n| own_locals(&n.func)).collect();
    // The locals visible where each lambda is written: its unit's own and those of the units around it.
    let visible = |mut u: Unit, lambdas: &[Function]| -> Vec<String> {
        let mut out = Vec::new();
        loop {
            match u {
                Unit::Top | Unit::Elsewhere => {
                    out.extend(top.iter().cloned());
                    return out;
                }
                Unit::Nested(i) => {
                    out.extend(nested_locals[i].iter().cloned());
                    out.extend(top.iter().cloned());
                    return out;
                }
                Unit::Lambda(k) => {
                    out.extend(own_locals(&lambdas[k]));
                    u = units[k];
                }
            }
        }
    };
    let mut moved = vec![false; lambdas.len()];
    for j in 0..lambdas.len() {
        let visible_here = visible(units[j], lambdas);
        let helper = lambdas[j].name.clone();
        // A default that reads a local is evaluated when the lambda is made (`lambda x, f=f: ...` freezes a loop
        // variable): its value becomes a capture, `default_capture(param)`, that the default then reads. A lambda
        // that becomes a nested `def` or sits in another default keeps the refusal.
        let inline = !matches!(units[j], Unit::Elsewhere)
            && !(units[j] == Unit::Top && bound_by_statement(&f.body, &helper).is_some());
        let frozen = freeze_defaults(&mut lambdas[j], &visible_here, inline, &f.name)?;
        let l = &lambdas[j];
        let captures: Vec<(String, Span)> =
            free_names(l).into_iter().filter(|(x, _)| visible_here.contains(x)).collect();
        if let (Unit::Elsewhere, Some((c, at))) = (units[j], captures.first()) {
            return err(*at, format!("a lambda in a default of a nested function reads `{c}`, a local variable of `{}`: not supported; pass it as an argument", f.name));
        }
        if captures.is_empty() && frozen.is_empty() {
            // Not a closure: the helper itself, as a lambda that reads only globals always was.
            let replace = &mut |e: &mut Expr| {
                if is_placeholder(e, &helper) {
                    e.kind = ExprKind::Name(helper.clone());
                }
            };
            match units[j] {
                Unit::Top => visit_exprs_mut(&mut f.body, replace),
                Unit::Nested(i) => visit_exprs_mut(&mut nested[i].func.body, replace),
                Unit::Lambda(k) => visit_exprs_mut(&mut lambdas[k].body, replace),
                Unit::Elsewhere => {} // `<closure>(HELPER)` without captures: the helper itself when called
            }
            continue;
        }
        if units[j] == Unit::Top {
            if let Some((name, at)) = bound_by_statement(&f.body, &helper) {
                let mut func = lambdas[j].clone();
                func.span = at;
                nested.push(Nested { name, func });
                moved[j] = true;
                continue;
            }
        }
        // An inline lambda: what it captures from its own unit must not be assigned from its statement on.
        let (unit_body, unit_locals): (&[Stmt], Vec<String>) = match units[j] {
            Unit::Top => (&f.body, top.clone()),
            Unit::Nested(i) => (&nested[i].func.body, nested_locals[i].clone()),
            Unit::Lambda(k) => (&lambdas[k].body, own_locals(&lambdas[k])),
            Unit::Elsewhere => unreachable!("refused above"),
        };
        captures_not_reassigned(unit_body, &unit_locals, &helper, &captures, l.span)?;
        let mut kwargs: Vec<(String, Expr)> =
            captures.iter().map(|(c, _)| (c.clone(), Expr { kind: ExprKind::Name(c.clone()), span: l.span })).collect();
        let span = l.span;
        for (c, _) in &captures {
            lambdas[j].params.push(Param { name: c.clone(), ann: None, default: None, span });
        }
        for (c, value) in frozen {
            lambdas[j].params.push(Param { name: c.clone(), ann: None, default: None, span });
            kwargs.push((c, value));
        }
        let fill = &mut |e: &mut Expr| {
            if is_placeholder(e, &helper) {
                if let ExprKind::Call { kwargs: kw, .. } = &mut e.kind {
                    *kw = kwargs.clone();
                }
            }
        };
        match units[j] {
            Unit::Top => visit_exprs_mut(&mut f.body, fill),
            Unit::Nested(i) => visit_exprs_mut(&mut nested[i].func.body, fill),
            Unit::Lambda(k) => visit_exprs_mut(&mut lambdas[k].body, fill),
            Unit::Elsewhere => unreachable!("refused above"),
        }
    }
    let mut j = 0;
    lambdas.retain(|_| {
        j += 1;
        !moved[j - 1]
    });
    Ok(())
}

/// Where each lambda of `f` is written: in `f`'s body, a nested function's, another lambda's, or elsewhere (a default
/// of a nested function). A lambda is converted (and pushed) before a lambda it is written in.
fn lambda_units(f: &Function, nested: &[Nested], lambdas: &[Function]) -> Vec<Unit> {
    let mut units = Vec::with_capacity(lambdas.len());
    for l in lambdas.iter() {
        let unit = if contains_placeholder(&f.body, &l.name) {
            Unit::Top
        } else if let Some(i) = nested.iter().position(|n| contains_placeholder(&n.func.body, &l.name)) {
            Unit::Nested(i)
        } else if let Some(k) = lambdas.iter().position(|m| contains_placeholder(&m.body, &l.name)) {
            Unit::Lambda(k)
        } else {
            Unit::Elsewhere
        };
        units.push(unit);
    }
    units
}

/// A default of `lambda` that reads a local (one of `visible`) is evaluated when the lambda is made (`lambda x, f=f:
/// ...` freezes a loop variable): its value becomes a capture, `default_capture(param)`, that the default then reads;
/// the captures and their values are returned. A lambda that is not `inline` (it becomes a nested `def` or sits in
/// another default) keeps the refusal.
fn freeze_defaults(
    lambda: &mut Function,
    visible: &[String],
    inline: bool,
    fname: &str,
) -> Result<Vec<(String, Expr)>, Diagnostic> {
    let mut frozen: Vec<(String, Expr)> = Vec::new();
    for p in lambda.params.iter_mut() {
        if let Some(d) = &p.default {
            let mut hit = None;
            visit_expr(d, &mut |e| {
                if let ExprKind::Name(x) = &e.kind {
                    if hit.is_none() && visible.contains(x) {
                        hit = Some((x.clone(), e.span));
                    }
                }
            });
            match hit {
                Some((x, at)) if !inline => {
                    return err(at, format!("a default of a lambda reads `{x}`, a local variable of `{fname}`: not supported; pass it as an argument"));
                }
                Some(_) => {
                    let name = default_capture(&p.name);
                    let span = d.span;
                    frozen.push((name.clone(), d.clone()));
                    p.default = Some(Expr { kind: ExprKind::Name(name), span });
                }
                None => {}
            }
        }
    }
    Ok(frozen)
}

/// An inline lambda's captures from its own unit (`unit_body`, whose locals are `unit_locals`) must not be assigned
/// from the statement that evaluates it on, nor by a loop around it: the lambda would see the new value.
fn captures_not_reassigned(
    unit_body: &[Stmt],
    unit_locals: &[String],
    helper: &str,
    captures: &[(String, Span)],
    lambda_span: Span,
) -> Result<(), Diagnostic> {
    if let Some((stmt, loops)) = statement_of(unit_body, helper, &mut Vec::new()) {
        let mut binds = Vec::new();
        bindings(unit_body, &mut Vec::new(), &mut binds);
        for (c, _) in captures.iter().filter(|(c, _)| unit_locals.contains(c)) {
            for (b, at, around) in &binds {
                if b != c {
                    continue;
                }
                if *at >= stmt {
                    return err(*at, format!(
                        "`{c}` is assigned here, on or after line {} where a lambda that reads it is evaluated: the lambda would see the new value when it runs, which is not supported; assign it before, or pass it as an argument",
                        stmt.line
                    ));
                }
                if around.iter().any(|x| loops.contains(x)) {
                    return err(lambda_span, format!(
                        "this lambda reads `{c}`, which the loop around it assigns (line {}): a lambda called in a later iteration would see the new value, which is not supported; pass `{c}` as an argument",
                        at.line
                    ));
                }
            }
        }
    }
    Ok(())
}

/// `NAME = <closure>(HELPER)`, a statement anywhere in `body`: the name and the statement's span.
fn bound_by_statement(body: &[Stmt], helper: &str) -> Option<(String, Span)> {
    for s in body {
        match &s.kind {
            StmtKind::Assign { targets, value } if is_placeholder(value, helper) => {
                if let [Expr { kind: ExprKind::Name(n), .. }] = targets.as_slice() {
                    return Some((n.clone(), s.span));
                }
            }
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                if let Some(b) = bound_by_statement(body, helper) {
                    return Some(b);
                }
            }
            StmtKind::If { body, orelse, .. } => {
                if let Some(b) = bound_by_statement(body, helper).or_else(|| bound_by_statement(orelse, helper)) {
                    return Some(b);
                }
            }
            _ => {}
        }
    }
    None
}
