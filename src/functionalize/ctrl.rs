//! Statements and control flow: assignment, loops (symbolic, or unrolled when they must be), data-dependent `if`
//! and `while`, and inlined helper calls.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::expr::Cond;
use super::state::{diag, needs_static, Affine, LoopFrame, Root, Stop, Sym, TId, TIdKey, TRef, FR, FV};
use super::{Env, Fz, UNROLL_LIMIT};
use crate::diag::Span;
use crate::frontend::ast::*;
use crate::ir::{Node, Ty};
use crate::tensor::DType;

pub(super) enum Flow {
    Normal,
    Break,
    Continue,
    Return(FV),
}

/// Everything a discarded pass may change: bindings, root versions and list contents.
pub(super) struct Snap {
    pub env: Env,
    pub roots: Vec<Root>,
    pub lists: Vec<(Rc<RefCell<Vec<FV>>>, Vec<FV>)>,
}

/// How a value is carried around a loop.
#[derive(Clone, Debug)]
enum Carry {
    /// A root buffer written in the body: its version.
    Root(usize),
    /// A name rebound to a tensor value made in the body.
    Value(String, DType, Vec<usize>),
    /// A name rebound to a run-time Python number.
    Number(String, DType),
    /// A name rebound to a view of an outer root that moves with the iteration.
    View(String),
}

fn count_names_expr(e: &Expr, out: &mut HashMap<String, usize>) {
    match &e.kind {
        ExprKind::Name(n) => *out.entry(n.clone()).or_default() += 1,
        ExprKind::Bin(_, a, b) => {
            count_names_expr(a, out);
            count_names_expr(b, out);
        }
        ExprKind::Unary(_, a) | ExprKind::Attr(a, _) => count_names_expr(a, out),
        ExprKind::Compare(a, rest) => {
            count_names_expr(a, out);
            rest.iter().for_each(|(_, x)| count_names_expr(x, out));
        }
        ExprKind::BoolOp(_, xs) | ExprKind::Tuple(xs) | ExprKind::List(xs) => {
            xs.iter().for_each(|x| count_names_expr(x, out))
        }
        ExprKind::Call { func, args, kwargs } => {
            count_names_expr(func, out);
            args.iter().for_each(|x| count_names_expr(x, out));
            kwargs.iter().for_each(|(_, x)| count_names_expr(x, out));
        }
        ExprKind::Subscript(a, b) => {
            count_names_expr(a, out);
            count_names_expr(b, out);
        }
        ExprKind::Slice(a, b, c) => [a, b, c].iter().filter_map(|x| x.as_ref()).for_each(|x| count_names_expr(x, out)),
        ExprKind::IfExp { test, body, orelse } => [test, body, orelse].iter().for_each(|x| count_names_expr(x, out)),
        ExprKind::ListComp { elt, target, iter, conds } => {
            count_names_expr(elt, out);
            count_names_expr(target, out);
            count_names_expr(iter, out);
            conds.iter().for_each(|x| count_names_expr(x, out));
        }
        _ => {}
    }
}

fn count_names(body: &[Stmt], out: &mut HashMap<String, usize>) {
    for s in body {
        match &s.kind {
            StmtKind::Assign { targets, value } => {
                targets.iter().for_each(|t| count_names_expr(t, out));
                count_names_expr(value, out);
            }
            StmtKind::AugAssign { target, value, .. } => {
                count_names_expr(target, out);
                count_names_expr(value, out);
            }
            StmtKind::Expr(e) => count_names_expr(e, out),
            StmtKind::Return(Some(e)) => count_names_expr(e, out),
            StmtKind::For { target, iter, body } => {
                count_names_expr(target, out);
                count_names_expr(iter, out);
                count_names(body, out);
            }
            StmtKind::While { test, body } => {
                count_names_expr(test, out);
                count_names(body, out);
            }
            StmtKind::If { test, body, orelse } => {
                count_names_expr(test, out);
                count_names(body, out);
                count_names(orelse, out);
            }
            StmtKind::Assert { test, .. } => count_names_expr(test, out),
            _ => {}
        }
    }
}

fn lists_in(v: &FV, out: &mut Vec<(Rc<RefCell<Vec<FV>>>, Vec<FV>)>) {
    match v {
        FV::List(l) => {
            if out.iter().any(|(x, _)| Rc::ptr_eq(x, l)) {
                return;
            }
            let items = l.borrow().clone();
            out.push((l.clone(), items.clone()));
            items.iter().for_each(|i| lists_in(i, out));
        }
        FV::Tuple(items) | FV::Named(items, _) => items.iter().for_each(|i| lists_in(i, out)),
        _ => {}
    }
}

fn mentions(e: &Expr, name: &str) -> bool {
    let mut m = HashMap::new();
    count_names_expr(e, &mut m);
    m.contains_key(name)
}

/// Whether the first statement of `body` that mentions `name` assigns it (at the top level) without reading it.
fn assigned_before_read(name: &str, body: &[Stmt]) -> bool {
    for s in body {
        let mut m = HashMap::new();
        count_names(std::slice::from_ref(s), &mut m);
        if !m.contains_key(name) {
            continue;
        }
        return match &s.kind {
            StmtKind::Assign { targets, value } => {
                !mentions(value, name)
                    && targets.iter().any(|t| match &t.kind {
                        ExprKind::Name(n) => n == name,
                        ExprKind::Tuple(ts) | ExprKind::List(ts) => {
                            ts.iter().any(|x| matches!(&x.kind, ExprKind::Name(n) if n == name))
                        }
                        _ => false,
                    })
            }
            _ => false,
        };
    }
    false
}

/// Substitutes a loop variable by a value in an affine form.
fn subst(a: &Affine, level: usize, value: i64) -> Affine {
    let mut out = Affine::constant(a.c);
    for (s, k) in &a.terms {
        match s {
            Sym::Loop(l) if *l == level => out = out.add(&Affine::constant(k * value)),
            other => out = out.add(&Affine { c: 0, terms: vec![(other.clone(), *k)] }),
        }
    }
    out
}

impl<'m> Fz<'m> {
    pub(super) fn snapshot(&self, env: &Env) -> Snap {
        let mut lists = Vec::new();
        env.values().for_each(|v| lists_in(v, &mut lists));
        Snap { env: env.clone(), roots: self.roots.clone(), lists }
    }

    pub(super) fn restore(&mut self, env: &mut Env, snap: &Snap) {
        *env = snap.env.clone();
        self.roots = snap.roots.clone();
        for (l, items) in &snap.lists {
            *l.borrow_mut() = items.clone();
        }
    }

    /// Runs a function body (a program or an inlined helper) in `env`; returns its value.
    pub(super) fn call_body(&mut self, f: &'m Function, mut env: Env) -> FR<FV> {
        if self.depth_calls >= 64 {
            return diag(f.span, "call depth exceeds 64 (recursion is not supported)");
        }
        if !self.fn_names.contains_key(&f.name) {
            let mut counts = HashMap::new();
            count_names(&f.body, &mut counts);
            self.fn_names.insert(f.name.clone(), counts);
        }
        self.fn_stack.push(f.name.clone());
        self.depth_calls += 1;
        let flow = self.block(&mut env, &f.body);
        self.depth_calls -= 1;
        self.fn_stack.pop();
        match flow? {
            Flow::Return(v) => Ok(v),
            _ => Ok(FV::None),
        }
    }

    pub(super) fn block(&mut self, env: &mut Env, body: &'m [Stmt]) -> FR<Flow> {
        for s in body {
            match self.stmt(env, s)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn stmt(&mut self, env: &mut Env, s: &'m Stmt) -> FR<Flow> {
        match &s.kind {
            StmtKind::Assign { targets, value } => {
                let v = self.expr(env, value)?;
                for t in targets {
                    self.assign(env, t, v.clone())?;
                }
            }
            StmtKind::AugAssign { target, op, value } => self.aug_assign(env, target, *op, value, s.span)?,
            StmtKind::Expr(e) => {
                self.expr(env, e)?;
            }
            StmtKind::Return(e) => {
                let v = match e {
                    Some(e) => self.expr(env, e)?,
                    None => FV::None,
                };
                return Ok(Flow::Return(v));
            }
            StmtKind::If { test, body, orelse } => {
                let c = self.expr(env, test)?;
                return match self.cond(&c, test.span)? {
                    Cond::Static(true) => self.block(env, body),
                    Cond::Static(false) => self.block(env, orelse),
                    Cond::Dyn(t) => self.dyn_if(env, t, body, orelse, s.span),
                };
            }
            StmtKind::For { target, iter, body } => return self.for_stmt(env, target, iter, body, s.span),
            StmtKind::While { test, body } => return self.while_stmt(env, test, body, s.span),
            StmtKind::Assert { test, .. } => {
                let c = self.expr(env, test)?;
                if let Cond::Static(false) = self.cond(&c, test.span)? {
                    return diag(s.span, "AssertionError");
                }
            }
            StmtKind::Pass => {}
            StmtKind::Break => return Ok(Flow::Break),
            StmtKind::Continue => return Ok(Flow::Continue),
        }
        Ok(Flow::Normal)
    }

    pub(super) fn assign(&mut self, env: &mut Env, target: &'m Expr, v: FV) -> FR<()> {
        match &target.kind {
            ExprKind::Name(n) => {
                env.insert(n.clone(), v);
                Ok(())
            }
            ExprKind::Tuple(ts) | ExprKind::List(ts) => {
                let items = match &v {
                    FV::DynInt(_) | FV::DynFloat(_) => return diag(target.span, "cannot unpack a number"),
                    other => self.iterate(other, target.span)?,
                };
                if items.len() != ts.len() {
                    return diag(
                        target.span,
                        format!("cannot unpack {} values into {} targets", items.len(), ts.len()),
                    );
                }
                for (t, item) in ts.iter().zip(items) {
                    self.assign(env, t, item)?;
                }
                Ok(())
            }
            ExprKind::Subscript(obj, idx) => {
                let o = self.expr(env, obj)?;
                let i = self.expr(env, idx)?;
                self.setitem(&o, &i, &v, target.span)
            }
            _ => diag(target.span, "unsupported assignment target"),
        }
    }

    fn aug_assign(&mut self, env: &mut Env, target: &'m Expr, op: BinOp, value: &'m Expr, span: Span) -> FR<()> {
        match &target.kind {
            ExprKind::Name(n) => {
                let cur = self.lookup(env, n, target.span)?;
                let rhs = self.expr(env, value)?;
                let new = self.inplace_binop(&cur, op, &rhs, span)?;
                env.insert(n.clone(), new);
                Ok(())
            }
            ExprKind::Subscript(obj, idx) => {
                let o = self.expr(env, obj)?;
                let i = self.expr(env, idx)?;
                let rhs = self.expr(env, value)?;
                if let FV::Tensor(t) = &o {
                    if let Some(r) = self.masked_aug_assign(t, &i, op, &rhs, span)? {
                        return Ok(r);
                    }
                }
                let cur = self.getitem(&o, &i, target.span)?;
                let new = self.inplace_binop(&cur, op, &rhs, span)?;
                self.setitem(&o, &i, &new, span)
            }
            _ => diag(target.span, "unsupported target of augmented assignment"),
        }
    }

    /// `a op= b`: in place for tensors, a new value for numbers.
    fn inplace_binop(&mut self, a: &FV, op: BinOp, b: &FV, span: Span) -> FR<FV> {
        match a {
            FV::Tensor(t) => {
                let r = self.binop(a, op, b, span)?;
                let FV::Tensor(r) = r else {
                    return diag(span, "in-place operator produced a non-tensor");
                };
                let inputs: Vec<&TRef> = match b {
                    FV::Tensor(bt) => vec![t, bt],
                    _ => vec![t],
                };
                self.check_inplace(t, &inputs, true, span)?;
                self.write_result(t, &r, true, span)?;
                Ok(a.clone())
            }
            FV::List(l) if op == BinOp::Add => {
                let extra = self.iterate(b, span)?;
                l.borrow_mut().extend(extra);
                Ok(a.clone())
            }
            _ => self.binop(a, op, b, span),
        }
    }

    fn for_stmt(&mut self, env: &mut Env, target: &'m Expr, iter: &'m Expr, body: &'m [Stmt], span: Span) -> FR<Flow> {
        let it = self.expr(env, iter)?;
        let FV::Range(a, b, s) = it else {
            let items = self.iterate(&it, iter.span)?;
            return self.unrolled(env, target, items.into_iter(), body);
        };
        let n = if (s > 0 && a < b) || (s < 0 && a > b) { ((b - a).abs() - 1) / s.abs() + 1 } else { 0 };
        if n <= 1 {
            return self.unrolled(env, target, (0..n).map(|k| FV::Int(a + k * s)), body);
        }
        let ExprKind::Name(var) = &target.kind else {
            return self.unrolled_limited(env, target, a, s, n, body, span, "a loop target that is not a name");
        };
        let snap = self.snapshot(env);
        match self.symbolic_for(env, var, (a, b, s, n), body, &snap, span) {
            Ok(()) => Ok(Flow::Normal),
            Err(Stop::NeedsStatic(at, why)) => {
                self.restore(env, &snap);
                let why = format!("{why} (at {}:{})", at.line, at.col);
                self.unrolled_limited(env, target, a, s, n, body, span, &why)
            }
            Err(e) => Err(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn unrolled_limited(
        &mut self,
        env: &mut Env,
        target: &'m Expr,
        a: i64,
        s: i64,
        n: i64,
        body: &'m [Stmt],
        span: Span,
        why: &str,
    ) -> FR<Flow> {
        if n > UNROLL_LIMIT {
            return diag(span, format!("this loop cannot stay a loop ({why}) and has {n} iterations, more than the {UNROLL_LIMIT} that are unrolled"));
        }
        self.unrolled(env, target, (0..n).map(|k| FV::Int(a + k * s)), body)
    }

    fn unrolled(
        &mut self,
        env: &mut Env,
        target: &'m Expr,
        items: impl Iterator<Item = FV>,
        body: &'m [Stmt],
    ) -> FR<Flow> {
        for item in items {
            self.assign(env, target, item)?;
            match self.block(env, body)? {
                Flow::Break => break,
                Flow::Return(v) => return Ok(Flow::Return(v)),
                _ => {}
            }
        }
        Ok(Flow::Normal)
    }

    /// Names first bound inside a loop body are carried only if the function uses them outside the body.
    fn used_outside(&self, name: &str, body: &[Stmt]) -> bool {
        let total =
            self.fn_stack.last().and_then(|f| self.fn_names.get(f)).and_then(|m| m.get(name)).copied().unwrap_or(0);
        let mut inner = HashMap::new();
        count_names(body, &mut inner);
        total > inner.get(name).copied().unwrap_or(0)
    }

    /// What a loop body changes, found by running it once from the current state (the terms are discarded).
    fn discover(
        &mut self,
        env: &mut Env,
        snap: &Snap,
        body: &'m [Stmt],
        extra: Option<(&'m Expr, Option<&'m Expr>)>,
        var: Option<&str>,
        level: usize,
        span: Span,
    ) -> FR<Vec<Carry>> {
        if let Some(v) = var {
            env.insert(v.to_string(), FV::DynInt(Affine::sym(Sym::Loop(level))));
        }
        if let Some((test, guard)) = extra {
            self.loop_cond(env, test, guard)?;
        }
        match self.block(env, body)? {
            Flow::Normal => {}
            _ => return needs_static(span, "`break`, `continue` or `return` inside the loop"),
        }
        let mut carries = Vec::new();
        for (i, r) in snap.roots.iter().enumerate() {
            if self.roots[i].version != r.version {
                carries.push(Carry::Root(i));
            }
        }
        for (l, items) in &snap.lists {
            let now = l.borrow();
            if now.len() != items.len() || now.iter().zip(items).any(|(a, b)| !a.same(b)) {
                return needs_static(span, "a list that changes inside the loop");
            }
        }
        let mut names: Vec<&String> = env.keys().collect();
        names.sort();
        let mut seen_roots = Vec::new();
        for name in names {
            if Some(name.as_str()) == var {
                continue;
            }
            let v1 = &env[name];
            let before = snap.env.get(name);
            if before.is_some_and(|v0| v0.same(v1)) {
                continue;
            }
            // A name the body always assigns before reading, and that nothing after the loop reads, is local to one
            // iteration: it need not be carried.
            if !self.used_outside(name, body) && (before.is_none() || assigned_before_read(name, body)) {
                continue;
            }
            match v1 {
                FV::Tensor(t) if t.root >= snap.roots.len() => {
                    if seen_roots.contains(&t.root) {
                        return needs_static(span, "two names that alias one tensor made in the loop");
                    }
                    seen_roots.push(t.root);
                    carries.push(Carry::Value(name.clone(), self.roots[t.root].dtype, t.shape.clone()));
                }
                FV::Tensor(_) => carries.push(Carry::View(name.clone())),
                FV::Int(_) | FV::DynInt(_) => carries.push(Carry::Number(name.clone(), DType::I64)),
                FV::Float(_) | FV::DynFloat(_) => carries.push(Carry::Number(name.clone(), DType::F64)),
                FV::Bool(_) | FV::DynBool(_) => carries.push(Carry::Number(name.clone(), DType::Bool)),
                other => {
                    return needs_static(span, format!("`{name}` becomes a {} inside the loop", other.type_name()))
                }
            }
        }
        Ok(carries)
    }

    /// The type a carried value has in the loop state.
    fn carry_ty(&self, c: &Carry) -> Ty {
        match c {
            Carry::Root(r) => Ty::Tensor(self.roots[*r].dtype, self.roots[*r].shape.clone()),
            Carry::Value(_, d, s) => Ty::Tensor(*d, s.clone()),
            Carry::Number(_, DType::I64) => Ty::Int,
            Carry::Number(_, d) => Ty::Tensor(*d, vec![]),
            Carry::View(_) => Ty::None,
        }
    }

    /// Binds the carried state inside the loop: versions and names become `(carried 0 j)`.
    fn bind_carried(&mut self, env: &mut Env, carries: &[Carry], span: Span) -> FR<()> {
        let mut j = 0;
        for c in carries {
            if let Carry::View(name) = c {
                env.insert(name.clone(), FV::Poisoned);
                continue;
            }
            let d0 = self.t.leaf(Node::Int(0));
            let jj = self.t.leaf(Node::Int(j));
            let id = self.t.add(Node::Carried([d0, jj])).map_err(Self::tyerr(span))?;
            j += 1;
            match c {
                Carry::Root(r) => self.roots[*r].version = id,
                Carry::Value(name, d, s) => {
                    let root = self.new_root(id, *d, s.clone(), None);
                    env.insert(name.clone(), FV::Tensor(self.natural_view(root)));
                }
                Carry::Number(name, DType::I64) => {
                    env.insert(name.clone(), FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(id)))));
                }
                Carry::Number(name, DType::Bool) => {
                    env.insert(name.clone(), FV::DynBool(id));
                }
                Carry::Number(name, _) => {
                    env.insert(name.clone(), FV::DynFloat(id));
                }
                Carry::View(_) => unreachable!(),
            }
        }
        Ok(())
    }

    /// The terms of the carried values now (at the end of the body, or before the loop for its initial state).
    fn carried_terms(&mut self, env: &Env, carries: &[Carry], before_loop: bool, span: Span) -> FR<Vec<egg::Id>> {
        let mut out = Vec::new();
        for c in carries {
            let t = match c {
                Carry::View(_) => continue,
                Carry::Root(r) => self.roots[*r].version,
                Carry::Value(name, d, s) => match env.get(name) {
                    Some(FV::Tensor(t)) if self.roots[t.root].dtype == *d && t.shape == *s => self.read(t, span)?,
                    Some(FV::Tensor(_)) => {
                        return needs_static(span, format!("`{name}` changes shape or dtype around the loop"))
                    }
                    None if before_loop => self.full(s, *d, crate::tensor::Scalar::I(0)).map_err(Self::tyerr(span))?,
                    _ => return needs_static(span, format!("`{name}` changes kind around the loop")),
                },
                Carry::Number(name, d) => match env.get(name) {
                    Some(v @ (FV::Int(_) | FV::DynInt(_) | FV::Bool(_))) if *d == DType::I64 => {
                        let e = self.int_term(v);
                        out.push(e);
                        continue;
                    }
                    Some(
                        v
                        @ (FV::Int(_) | FV::DynInt(_) | FV::Float(_) | FV::DynFloat(_) | FV::Bool(_) | FV::DynBool(_)),
                    ) if *d != DType::I64 => {
                        if *d == DType::Bool && !matches!(v, FV::Bool(_) | FV::DynBool(_)) {
                            return needs_static(span, format!("`{name}` changes type around the loop"));
                        }
                        self.scalar_tensor(v, Some(*d), span)?.0
                    }
                    None if before_loop => {
                        let z = if *d == DType::I64 {
                            FV::Int(0)
                        } else if *d == DType::Bool {
                            FV::Bool(false)
                        } else {
                            FV::Float(0.0)
                        };
                        if *d == DType::I64 {
                            let e = self.int_term(&z);
                            out.push(e);
                            continue;
                        }
                        self.scalar_tensor(&z, Some(*d), span)?.0
                    }
                    _ => return needs_static(span, format!("`{name}` changes type around the loop")),
                },
            };
            out.push(self.t.at(t));
        }
        Ok(out)
    }

    /// Rebinds the state after a loop (or while) term: versions, names and moving views.
    fn bind_after(
        &mut self,
        env: &mut Env,
        snap: &Snap,
        carries: &[Carry],
        node: TId,
        views: &HashMap<String, TRef>,
        span: Span,
    ) -> FR<()> {
        let mut keep = snap.env.clone();
        let mut j = 0i64;
        for c in carries {
            if let Carry::View(name) = c {
                if let Some(tr) = views.get(name) {
                    keep.insert(name.clone(), FV::Tensor(tr.clone()));
                }
                continue;
            }
            let jj = self.t.leaf(Node::Int(j));
            let at = self.t.at(node);
            let g = self.t.add(Node::Get([at, jj])).map_err(Self::tyerr(span))?;
            j += 1;
            match c {
                Carry::Root(r) => {
                    self.roots[*r].version = g;
                    self.roots[*r].written = true;
                }
                Carry::Value(name, d, s) => {
                    let root = self.new_root(g, *d, s.clone(), None);
                    keep.insert(name.clone(), FV::Tensor(self.natural_view(root)));
                }
                Carry::Number(name, DType::I64) => {
                    keep.insert(name.clone(), FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(g)))));
                }
                Carry::Number(name, DType::Bool) => {
                    keep.insert(name.clone(), FV::DynBool(g));
                }
                Carry::Number(name, _) => {
                    keep.insert(name.clone(), FV::DynFloat(g));
                }
                Carry::View(_) => unreachable!(),
            }
        }
        *env = keep;
        Ok(())
    }

    fn symbolic_for(
        &mut self,
        env: &mut Env,
        var: &str,
        (a, b, s, n): (i64, i64, i64, i64),
        body: &'m [Stmt],
        snap: &Snap,
        span: Span,
    ) -> FR<()> {
        let level = self.t.depth();
        let last = a + (n - 1) * s;
        // Pass 1: find what the body changes.
        self.t.frames.push(LoopFrame { range: Some((a.min(last), a.max(last))), carried: vec![] });
        let carries = self.discover(env, snap, body, None, Some(var), level, span);
        self.t.frames.pop();
        self.restore(env, snap);
        let carries = carries?;
        // Pass 2: the body over the carried state.
        let tys: Vec<Ty> = carries.iter().map(|c| self.carry_ty(c)).filter(|t| *t != Ty::None).collect();
        let init = self.carried_terms(env, &carries, true, span)?;
        self.t.frames.push(LoopFrame { range: Some((a.min(last), a.max(last))), carried: tys.clone() });
        let result = (|| -> FR<(egg::Id, HashMap<String, TRef>)> {
            self.bind_carried(env, &carries, span)?;
            env.insert(var.to_string(), FV::DynInt(Affine::sym(Sym::Loop(level))));
            match self.block(env, body)? {
                Flow::Normal => {}
                _ => return needs_static(span, "`break`, `continue` or `return` inside the loop"),
            }
            self.check_only_carried_written(snap, &carries, span)?;
            let views = self.moving_views(env, snap, &carries, level, last, span)?;
            let parts = self.carried_terms(env, &carries, false, span)?;
            let body_t = self.t.add(Node::Tuple(parts.into())).map_err(Self::tyerr(span))?;
            if self.t.ty(body_t.id).map_err(Self::tyerr(span))? != Ty::Tuple(tys.clone()) {
                return needs_static(span, "a value that changes type around the loop");
            }
            Ok((body_t.id, views))
        })();
        self.t.frames.pop();
        let (body_id, views) = result?;
        let init_t = self.t.add(Node::Tuple(init.into())).map_err(Self::tyerr(span))?;
        let (ia, ib, is) = (self.t.leaf(Node::Int(a)), self.t.leaf(Node::Int(b)), self.t.leaf(Node::Int(s)));
        let lp = self.t.add(Node::Loop([ia, ib, is, init_t.id, body_id])).map_err(Self::tyerr(span))?;
        self.bind_after(env, snap, &carries, lp, &views, span)?;
        env.insert(var.to_string(), FV::Int(last));
        Ok(())
    }

    /// A body may write only the roots found in the first pass.
    fn check_only_carried_written(&self, snap: &Snap, carries: &[Carry], span: Span) -> FR<()> {
        for (i, r) in snap.roots.iter().enumerate() {
            let carried = carries.iter().any(|c| matches!(c, Carry::Root(k) if *k == i));
            if !carried && self.roots[i].version != r.version {
                return needs_static(span, "a loop body whose writes differ between iterations");
            }
        }
        Ok(())
    }

    /// Views of outer roots rebound per iteration: after the loop they are the last iteration's view.
    fn moving_views(
        &mut self,
        env: &Env,
        snap: &Snap,
        carries: &[Carry],
        level: usize,
        last: i64,
        span: Span,
    ) -> FR<HashMap<String, TRef>> {
        let mut out = HashMap::new();
        for c in carries {
            if let Carry::View(name) = c {
                match env.get(name) {
                    Some(FV::Tensor(t)) if t.root < snap.roots.len() => {
                        let mut t2 = t.clone();
                        t2.off = subst(&t.off, level, last);
                        if t2.off.terms.iter().any(|(s, _)| matches!(s, Sym::Opaque(_))) {
                            return needs_static(
                                span,
                                format!("`{name}` ends the loop as a view at a run-time offset"),
                            );
                        }
                        out.insert(name.clone(), t2);
                    }
                    _ => return needs_static(span, format!("`{name}` ends the loop bound to a value made inside it")),
                }
            }
        }
        Ok(out)
    }

    /// The condition of one more iteration: `test`, and not the guard of a leading `if GUARD: break`.
    fn loop_cond(&mut self, env: &mut Env, test: &'m Expr, guard: Option<&'m Expr>) -> FR<Cond> {
        let c = self.expr(env, test)?;
        let c = match self.cond(&c, test.span)? {
            Cond::Static(false) => return Ok(Cond::Static(false)),
            c => c,
        };
        let Some(g) = guard else { return Ok(c) };
        let gv = self.expr(env, g)?;
        let stop = self.cond(&gv, g.span)?;
        Ok(match (c, stop) {
            (_, Cond::Static(true)) => Cond::Static(false),
            (c, Cond::Static(false)) => c,
            (c, Cond::Dyn(s)) => {
                let x = self.t.at(s);
                let not_s = self.t.op(crate::ir::OpName::LogicalNot, vec![x]).map_err(Self::tyerr(g.span))?;
                match c {
                    Cond::Static(_) => Cond::Dyn(not_s),
                    Cond::Dyn(t) => {
                        let r = self.elementwise(
                            crate::tensor::ops::Binary::BitAnd,
                            &[FV::DynBool(t), FV::DynBool(not_s)],
                            g.span,
                        )?;
                        Cond::Dyn(self.dyn_bool_of(&r, g.span)?)
                    }
                }
            }
        })
    }

    fn while_stmt(&mut self, env: &mut Env, test: &'m Expr, body: &'m [Stmt], span: Span) -> FR<Flow> {
        // `while ...: if GUARD: break; REST` is `while ... and not GUARD: REST`.
        let (guard, rest) = match body.first().map(|s| &s.kind) {
            Some(StmtKind::If { test: g, body: b, orelse })
                if orelse.is_empty() && matches!(b.as_slice(), [Stmt { kind: StmtKind::Break, .. }]) =>
            {
                (Some(g), &body[1..])
            }
            _ => (None, body),
        };
        let mut n = 0i64;
        loop {
            match self.loop_cond(env, test, guard)? {
                Cond::Static(false) => return Ok(Flow::Normal),
                Cond::Static(true) => {
                    n += 1;
                    if n > UNROLL_LIMIT {
                        return diag(span, format!("a `while` loop on values known before it runs is unrolled, and this one exceeds {UNROLL_LIMIT} iterations"));
                    }
                    match self.block(env, rest)? {
                        Flow::Break => return Ok(Flow::Normal),
                        Flow::Return(v) => return Ok(Flow::Return(v)),
                        _ => {}
                    }
                }
                Cond::Dyn(_) => {
                    self.symbolic_while(env, test, guard, rest, span).map_err(|e| match e {
                        Stop::NeedsStatic(at, why) => Stop::Diag(
                            crate::diag::Diagnostic::new(format!(
                                "cannot functionalize this data-dependent `while` loop: {why} (at {}:{})",
                                at.line, at.col
                            ))
                            .at(span),
                        ),
                        other => other,
                    })?;
                    return Ok(Flow::Normal);
                }
            }
        }
    }

    fn symbolic_while(
        &mut self,
        env: &mut Env,
        test: &'m Expr,
        guard: Option<&'m Expr>,
        body: &'m [Stmt],
        span: Span,
    ) -> FR<()> {
        let level = self.t.depth();
        let snap = self.snapshot(env);
        self.t.frames.push(LoopFrame { range: None, carried: vec![] });
        let carries = self.discover(env, &snap, body, Some((test, guard)), None, level, span);
        self.t.frames.pop();
        self.restore(env, &snap);
        let carries = carries?;
        let tys: Vec<Ty> = carries.iter().map(|c| self.carry_ty(c)).filter(|t| *t != Ty::None).collect();
        let init = self.carried_terms(env, &carries, true, span)?;
        self.t.frames.push(LoopFrame { range: None, carried: tys.clone() });
        let result = (|| -> FR<(egg::Id, egg::Id, HashMap<String, TRef>)> {
            self.bind_carried(env, &carries, span)?;
            let cond = match self.loop_cond(env, test, guard)? {
                Cond::Dyn(t) => self.t.at(t),
                Cond::Static(b) => {
                    let t = self.scalar_tensor(&FV::Bool(b), None, span)?.0;
                    self.t.at(t)
                }
            };
            match self.block(env, body)? {
                Flow::Normal => {}
                _ => return needs_static(span, "`break`, `continue` or `return` inside a data-dependent loop"),
            }
            self.check_only_carried_written(&snap, &carries, span)?;
            if carries.iter().any(|c| matches!(c, Carry::View(_))) {
                return needs_static(span, "a view rebound inside a data-dependent loop");
            }
            let parts = self.carried_terms(env, &carries, false, span)?;
            let body_t = self.t.add(Node::Tuple(parts.into())).map_err(Self::tyerr(span))?;
            if self.t.ty(body_t.id).map_err(Self::tyerr(span))? != Ty::Tuple(tys.clone()) {
                return needs_static(span, "a value that changes type around the loop");
            }
            Ok((cond, body_t.id, HashMap::new()))
        })();
        self.t.frames.pop();
        let (cond, body_id, views) = result?;
        let init_t = self.t.add(Node::Tuple(init.into())).map_err(Self::tyerr(span))?;
        let w = self.t.add(Node::While([init_t.id, cond, body_id])).map_err(Self::tyerr(span))?;
        self.bind_after(env, &snap, &carries, w, &views, span)
    }
}
