//! Statements and control flow: assignment, loops (symbolic, or unrolled when they must be), data-dependent `if`
//! and `while`, and inlined helper calls.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use super::branch::Arm;
use super::carry::Carry;
use super::expr::Cond;
use super::state::{diag, needs_static, Affine, LoopFrame, Root, Stop, Sym, TRef, FR, FV};
use super::{Env, Fz, UNROLL_LIMIT};
use crate::interp::{pyvalue, pywalk};

/// How many leading iterations of a `for` loop are peeled, at most, where a name's aliasing differs between the
/// first iteration and the rest (a view on entry, a fresh tensor afterwards); past that the loop is unrolled.
const PEEL_LIMIT: usize = 2;
use crate::diag::Span;
use crate::frontend::ast::*;
use crate::ir::{Node, Ty};

pub(super) type Flow = crate::interp::pyvalue::Flow<FV>;

/// Everything a discarded pass may change: bindings, root versions and list contents.
pub(super) struct Snap {
    pub env: Env,
    pub roots: Vec<Root>,
    pub lists: Vec<(Rc<RefCell<Vec<FV>>>, Vec<FV>)>,
    /// The dicts reachable from the bindings, with their entries.
    pub dicts: Vec<DictSnap>,
    /// The open scopes' checks (see [`super::checks`]).
    pub checks: Vec<Vec<super::state::TId>>,
}

pub(super) fn count_names_expr(e: &Expr, out: &mut HashMap<String, usize>) {
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

pub(super) fn count_names(body: &[Stmt], out: &mut HashMap<String, usize>) {
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
            StmtKind::Delete(targets) => targets.iter().for_each(|t| count_names_expr(t, out)),
            _ => {}
        }
    }
}

type DictSnap = (Rc<RefCell<Vec<(FV, FV)>>>, Vec<(FV, FV)>);

fn lists_in(v: &FV, out: &mut Vec<(Rc<RefCell<Vec<FV>>>, Vec<FV>)>, dicts: &mut Vec<DictSnap>) {
    match v {
        FV::List(l) => {
            if out.iter().any(|(x, _)| Rc::ptr_eq(x, l)) {
                return;
            }
            let items = l.borrow().clone();
            out.push((l.clone(), items.clone()));
            items.iter().for_each(|i| lists_in(i, out, dicts));
        }
        FV::Tuple(items) | FV::Named(items, _) => items.iter().for_each(|i| lists_in(i, out, dicts)),
        FV::Dict(d) => {
            if dicts.iter().any(|(x, _)| Rc::ptr_eq(x, d)) {
                return;
            }
            let items = d.borrow().clone();
            dicts.push((d.clone(), items.clone()));
            items.iter().for_each(|(_, i)| lists_in(i, out, dicts));
        }
        _ => {}
    }
}

/// The entries of a snapshot's lists and dicts at one moment ([`Snap::containers_now`]).
pub(super) type ContainerState = (Vec<Vec<FV>>, Vec<Vec<(FV, FV)>>);

impl Snap {
    /// The entries of the lists and dicts reachable at the snapshot, as they are now.
    pub(super) fn containers_now(&self) -> ContainerState {
        let lists = self.lists.iter().map(|(l, _)| l.borrow().clone()).collect();
        (lists, self.dicts.iter().map(|(d, _)| d.borrow().clone()).collect())
    }

    /// Puts back the entries `containers_now` took.
    pub(super) fn set_containers(&self, state: &ContainerState) {
        for ((l, _), items) in self.lists.iter().zip(&state.0) {
            *l.borrow_mut() = items.clone();
        }
        for ((d, _), items) in self.dicts.iter().zip(&state.1) {
            *d.borrow_mut() = items.clone();
        }
    }

    /// Whether a list or dict reachable at the snapshot changed since (length or an element's binding).
    pub(super) fn containers_changed(&self) -> bool {
        let lists = self.lists.iter().any(|(l, items)| {
            let now = l.borrow();
            now.len() != items.len() || now.iter().zip(items).any(|(a, b)| !a.same(b))
        });
        lists
            || self.dicts.iter().any(|(d, items)| {
                let now = d.borrow();
                now.len() != items.len() || now.iter().zip(items).any(|(a, b)| !a.0.same(&b.0) || !a.1.same(&b.1))
            })
    }
}

impl<'m> Fz<'m> {
    pub(super) fn snapshot(&self, env: &Env) -> Snap {
        let (mut lists, mut dicts) = (Vec::new(), Vec::new());
        env.values().for_each(|v| lists_in(v, &mut lists, &mut dicts));
        Snap { env: env.clone(), roots: self.roots.clone(), lists, dicts, checks: self.t.scopes.clone() }
    }

    pub(super) fn restore(&mut self, env: &mut Env, snap: &Snap) {
        *env = snap.env.clone();
        self.roots = snap.roots.clone();
        self.t.scopes = snap.checks.clone();
        for (l, items) in &snap.lists {
            *l.borrow_mut() = items.clone();
        }
        for (d, items) in &snap.dicts {
            *d.borrow_mut() = items.clone();
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
        crate::interp::grads::bind(&self.grads, &mut env);
        let mut held = Vec::new();
        for v in env.values() {
            super::list_writes::selection_objects(v, &mut held);
        }
        self.entry_selections.push(held);
        self.depth_calls += 1;
        let base = std::mem::replace(&mut self.call_base, self.roots.len());
        let flow = self.block(&mut env, &f.body);
        self.call_base = base;
        self.depth_calls -= 1;
        self.entry_selections.pop();
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

    /// One statement. It mirrors the reference interpreter's statement executor (`interp/exec.rs`) on purpose: there
    /// a loop runs and an `if` takes one arm; here a loop becomes a `loop` term (or unrolls) and an `if` on a
    /// run-time value runs both arms and merges them.
    fn stmt(&mut self, env: &mut Env, s: &'m Stmt) -> FR<Flow> {
        pyvalue::exec(self, env, s)
    }

    /// The statements whose walk differs from the reference interpreter's (see `pyvalue::Exec::exec_other`).
    fn stmt_other(&mut self, env: &mut Env, s: &'m Stmt) -> FR<Flow> {
        match &s.kind {
            StmtKind::If { test, body, orelse } => {
                if let Some(caught) = crate::frontend::ast::try_catches(test) {
                    return self.try_stmt(env, &caught, body, orelse, s.span);
                }
                let c = self.expr(env, test)?;
                return match self.cond(&c, test.span)? {
                    Cond::Static(true) => self.block(env, body),
                    Cond::Static(false) => self.block(env, orelse),
                    Cond::Dyn(t) => self.dyn_if(env, t, Arm::Stmts(body), Arm::Stmts(orelse), s.span),
                };
            }
            StmtKind::For { target, iter, body } => return self.for_stmt(env, target, iter, body, s.span),
            StmtKind::While { test, body } => return self.while_stmt(env, test, body, s.span),
            StmtKind::Assert { test, msg } => {
                let c = self.expr(env, test)?;
                let c = self.cond(&c, test.span)?;
                if let Cond::Dyn(t) = c {
                    self.runtime_assert(t, s.span)?;
                }
                if let Cond::Static(false) = c {
                    // The message is evaluated only when the assertion fails, as Python does.
                    let m = match msg {
                        Some(m) => {
                            let v = self.expr(env, m)?;
                            format!("AssertionError: {}", self.fv_str(&v))
                        }
                        None => "AssertionError".to_string(),
                    };
                    return diag(s.span, m);
                }
            }
            StmtKind::Raise(exc) => return Err(self.raise(env, exc, s.span)),
            StmtKind::Delete(targets) => {
                // A loop processed once for every iteration carries the names its body binds, not those it unbinds:
                // unrolled, each iteration's `del` is seen.
                if !self.t.frames.is_empty() {
                    return needs_static(s.span, "`del` in a loop");
                }
                pyvalue::delete_names(env, targets)?;
            }
            _ => unreachable!("pyvalue::exec runs the other statements"),
        }
        Ok(Flow::Normal)
    }

    pub(super) fn assign(&mut self, env: &mut Env, target: &'m Expr, v: FV) -> FR<()> {
        pyvalue::assign(self, env, target, v)
    }

    fn aug_assign(&mut self, env: &mut Env, target: &'m Expr, op: BinOp, value: &'m Expr, span: Span) -> FR<()> {
        match &target.kind {
            ExprKind::Name(n) => {
                let cur = self.lookup(env, n, target.span)?;
                let rhs = self.expr(env, value)?;
                if let FV::Masked(sel) = &cur {
                    self.sole_holder(env, sel, span)?;
                }
                // A squeezed list's other holders would keep the old values (it is rebound, not changed).
                if let FV::Squeezed(sel) = &cur {
                    return super::squeezed::squeezed_use(sel);
                }
                let new = self.inplace_binop(&cur, op, &rhs, span)?;
                env.insert(n.clone(), new);
                Ok(())
            }
            ExprKind::Subscript(obj, idx) => {
                let o = self.expr(env, obj)?;
                let i = self.expr(env, idx)?;
                let rhs = self.expr(env, value)?;
                if let FV::Tensor(t) = &o {
                    if let FV::Masked(_) = rhs {
                        // `x[m] op= y[m]`: the selection `x[m]` updated in place, then written back through `m`.
                        let cur = self.getitem(&o, &i, target.span)?;
                        let dt = self.roots[t.root].dtype;
                        let new = self.masked_update(&cur, op, &rhs, dt, span)?;
                        return self.setitem(&o, &i, &new, span);
                    }
                    if let Some(r) = self.masked_aug_assign(t, &i, op, &rhs, span)? {
                        return Ok(r);
                    }
                }
                let cur = self.getitem(&o, &i, target.span)?;
                if let (FV::Squeezed(sel), FV::Tensor(_)) = (&cur, &o) {
                    let new = self.squeezed_update(sel, op, &rhs, span)?;
                    return self.setitem(&o, &i, &new, span);
                }
                // A selection held by a list or dict entry is rebound there: nothing else may hold it.
                if let (FV::Masked(sel), false) = (&cur, matches!(o, FV::Tensor(_))) {
                    self.sole_holder(env, sel, span)?;
                }
                if let (FV::Squeezed(sel), false) = (&cur, matches!(o, FV::Tensor(_))) {
                    return super::squeezed::squeezed_use(sel);
                }
                let new = self.inplace_binop(&cur, op, &rhs, span)?;
                self.setitem(&o, &i, &new, span)
            }
            // `p.data -= x`: in place on the tensor `p.data` is; setting `p.data` back to it changes nothing.
            ExprKind::Attr(_, a) if a == "data" || a == "grad" => {
                crate::interp::grads::aug_assign(self, env, target, op, value, span)
            }
            // `self.n += 1` on an object: its attribute, as a dict entry (`crate::interp::objects`).
            ExprKind::Attr(obj, a) => {
                match pyvalue::aug_assign_attribute(self, env, obj, a, op, value, span, target.span)? {
                    Some(()) => Ok(()),
                    None => diag(target.span, "unsupported target of augmented assignment"),
                }
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
            FV::Dict(_) if op == BinOp::Add && crate::interp::objects::module_sequence_items(a).is_some() => {
                let Some(FV::List(l)) = crate::interp::objects::module_sequence_items(a) else { unreachable!() };
                let extra = self.iterate(b, span)?;
                l.borrow_mut().extend(extra);
                Ok(a.clone())
            }
            FV::Masked(s) => {
                // `x[i] op= v` through index lists: the gathered copy updated, keeping its dtype.
                let (dt, _) = self.tensor_ty(s.src, span)?;
                self.masked_update(a, op, b, dt, span)
            }
            // Only `x[p] op= v` updates a squeezed value, written back (`squeezed_update`); on a name, an
            // attribute or an entry, its other holders would keep the old values.
            FV::Squeezed(s) => super::squeezed::squeezed_use(s),
            _ => self.binop(a, op, b, span),
        }
    }

    fn for_stmt(&mut self, env: &mut Env, target: &'m Expr, iter: &'m Expr, body: &'m [Stmt], span: Span) -> FR<Flow> {
        let it = self.expr(env, iter)?;
        let FV::Range(mut a, b, s) = it else {
            let items = self.iterate(&it, iter.span)?;
            return self.unrolled(env, target, items, body, span);
        };
        // In 128 bits: a range may span all of i64 (its length then saturates, which no loop reaches).
        let mut n = if (s > 0 && a < b) || (s < 0 && a > b) {
            let len = ((b as i128 - a as i128).abs() - 1) / (s as i128).abs() + 1;
            len.min(i64::MAX as i128) as i64
        } else {
            0
        };
        let mut peeled = 0;
        loop {
            if n <= 1 {
                return self.unrolled(env, target, (0..n).map(|k| FV::Int(a + k * s)).collect(), body, span);
            }
            let ExprKind::Name(var) = &target.kind else {
                return self.unrolled_limited(env, target, a, s, n, body, span, "a loop target that is not a name");
            };
            let snap = self.snapshot(env);
            // What `id()` and `nn.Parameter` recorded in an attempt that is undone is undone too.
            let (ids, parameters) = (self.ids.len(), self.parameters.clone());
            match self.symbolic_for(env, var, (a, b, s, n), body, &snap, span) {
                Ok(None) => return Ok(Flow::Normal),
                Ok(Some(name)) if peeled == PEEL_LIMIT => {
                    let why = format!("`{name}` enters every iteration as a view of a tensor the loop writes");
                    return self.unrolled_limited(env, target, a, s, n, body, span, &why);
                }
                Ok(Some(_)) => {
                    // The first iteration sees aliasing the later ones do not: run it on its own, then the rest.
                    peeled += 1;
                    self.assign(env, target, FV::Int(a))?;
                    match self.block(env, body)? {
                        Flow::Normal | Flow::Continue => {}
                        Flow::Break => return Ok(Flow::Normal),
                        Flow::Return(v) => return Ok(Flow::Return(v)),
                    }
                    a += s;
                    n -= 1;
                }
                Err(Stop::NeedsStatic(at, why)) => {
                    self.restore(env, &snap);
                    self.ids.truncate(ids);
                    self.parameters = parameters;
                    let why = format!("{why} (at {}:{})", at.line, at.col);
                    return self.unrolled_limited(env, target, a, s, n, body, span, &why);
                }
                Err(e) => return Err(e),
            }
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
        self.unrolled(env, target, (0..n).map(|k| FV::Int(a + k * s)).collect(), body, span)
    }

    /// A loop run item by item. A loop with a `break` under an `if` on a run-time value (its body guarded by the
    /// flag `exits.rs` made) goes on, once the flag may be set, as an `if` on the flag whose other arm runs the
    /// remaining iterations (`Arm::LoopRest`).
    pub(super) fn unrolled(
        &mut self,
        env: &mut Env,
        target: &'m Expr,
        items: Vec<FV>,
        body: &'m [Stmt],
        span: Span,
    ) -> FR<Flow> {
        let flag = match body {
            [Stmt { kind: StmtKind::If { test, orelse, .. }, .. }] if orelse.is_empty() => match &test.kind {
                ExprKind::Unary(UnaryOp::Not, f) => match &f.kind {
                    ExprKind::Name(n) if n.starts_with("%broken") => Some(n.clone()),
                    _ => None,
                },
                _ => None,
            },
            _ => None,
        };
        let mut nest = flag.is_some();
        for (k, item) in items.iter().enumerate() {
            pywalk::assign(self, env, target, item.clone())?;
            match self.block(env, body)? {
                Flow::Break => break,
                Flow::Return(v) => return Ok(Flow::Return(v)),
                _ => {}
            }
            let (Some(f), true) = (&flag, nest && k + 1 < items.len()) else { continue };
            let Some(FV::DynBool(broken)) = env.get(f).cloned() else { continue };
            // Where the nested form cannot be functionalized (a value the two arms leave differently), the
            // iterations go on one after another, each guarded by the flag, as before.
            let snap = self.snapshot(env);
            let rest = Arm::LoopRest { target, items: items[k + 1..].to_vec(), body, flag: f.clone() };
            match self.dyn_if(env, broken, Arm::Stmts(&[]), rest, span) {
                Ok(flow) => return Ok(flow),
                Err(_) => {
                    self.restore(env, &snap);
                    nest = false;
                }
            }
        }
        Ok(Flow::Normal)
    }

    fn symbolic_for(
        &mut self,
        env: &mut Env,
        var: &str,
        (a, b, s, n): (i64, i64, i64, i64),
        body: &'m [Stmt],
        snap: &Snap,
        span: Span,
    ) -> FR<Option<String>> {
        let level = self.t.depth();
        let last = (a as i128 + (n as i128 - 1) * s as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64;
        // Pass 1: find what the body changes.
        self.t.frames.push(LoopFrame {
            range: Some((a.min(last), a.max(last))),
            step: s.unsigned_abs().max(1) as i64,
            carried: vec![],
            arms: self.t.arms,
        });
        let carries = self.discover(env, snap, body, None, Some(var), level, span);
        self.t.frames.pop();
        self.restore(env, snap);
        let carries = carries?;
        if let Some(name) = self.aliased_on_entry(snap, &carries, body) {
            return Ok(Some(name));
        }
        // Pass 2: the body over the carried state.
        let mut tys: Vec<Ty> = carries.iter().map(|c| self.carry_ty(c)).filter(|t| *t != Ty::None).collect();
        let mut init = self.carried_terms(env, &carries, true, span)?;
        self.t.frames.push(LoopFrame {
            range: Some((a.min(last), a.max(last))),
            step: s.unsigned_abs().max(1) as i64,
            carried: tys.clone(),
            arms: self.t.arms,
        });
        self.t.open_scope();
        let result = (|| -> FR<(egg::Id, HashMap<String, TRef>, bool)> {
            self.bind_carried(env, &carries, span)?;
            env.insert(var.to_string(), FV::DynInt(Affine::sym(Sym::Loop(level))));
            match self.block(env, body)? {
                Flow::Normal => {}
                _ => return needs_static(span, "`break`, `continue` or `return` inside the loop"),
            }
            self.check_only_carried_written(snap, &carries, span)?;
            let views = self.moving_views(env, snap, &carries, level, last, span)?;
            let mut parts = self.carried_terms(env, &carries, false, span)?;
            let checks = self.checks_carried(&mut parts, &[], &mut tys, &mut init, span)?;
            let body_t = self.t.add(Node::Tuple(parts.into())).map_err(Self::tyerr(span))?;
            if self.t.ty(body_t.id).map_err(Self::tyerr(span))? != Ty::Tuple(tys.clone()) {
                return needs_static(span, "a value that changes type around the loop");
            }
            Ok((body_t.id, views, checks))
        })();
        self.t.frames.pop();
        let (body_id, views, checks) = result?;
        let init_t = self.t.add(Node::Tuple(init.into())).map_err(Self::tyerr(span))?;
        let (ia, ib, is) = (self.t.leaf(Node::Int(a)), self.t.leaf(Node::Int(b)), self.t.leaf(Node::Int(s)));
        let lp = self.t.add(Node::Loop([ia, ib, is, init_t.id, body_id])).map_err(Self::tyerr(span))?;
        if checks {
            self.t.note_check(lp);
        }
        self.bind_after(env, snap, &carries, lp, &views, span)?;
        env.insert(var.to_string(), FV::Int(last));
        Ok(None)
    }

    /// The condition of one more iteration: `test`, and not the guard of a leading `if GUARD: break`.
    pub(super) fn loop_cond(&mut self, env: &mut Env, test: &'m Expr, guard: Option<&'m Expr>) -> FR<Cond> {
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
                    // Inside a loop kept symbolic, a condition may be known only at run time because it reads the
                    // loop's variable (AllenNLP's `while batch_lengths[i] <= index` over Python ints, `index` from
                    // the timestep): the refusal goes to that loop, which unrolls, making the condition known.
                    let in_loop = !self.t.frames.is_empty();
                    self.symbolic_while(env, test, guard, rest, span).map_err(|e| match e {
                        Stop::NeedsStatic(at, why) if !in_loop => Stop::Diag(
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
        self.t.frames.push(LoopFrame { range: None, step: 1, carried: vec![], arms: self.t.arms });
        let carries = self.discover(env, &snap, body, Some((test, guard)), None, level, span);
        self.t.frames.pop();
        self.restore(env, &snap);
        let carries = self.settle_carries(env, &snap, body, Some((test, guard)), carries?, level, span)?;
        if let Some(name) = self.aliased_on_entry(&snap, &carries, body) {
            let why = format!("`{name}` enters the loop as a view of a tensor the loop writes, and is a new tensor in later iterations");
            return needs_static(span, why);
        }
        let mut tys: Vec<Ty> = carries.iter().map(|c| self.carry_ty(c)).filter(|t| *t != Ty::None).collect();
        let mut init = self.carried_terms(env, &carries, true, span)?;
        self.t.frames.push(LoopFrame { range: None, step: 1, carried: tys.clone(), arms: self.t.arms });
        self.t.open_scope();
        let result = (|| -> FR<(egg::Id, egg::Id, HashMap<String, TRef>, bool)> {
            self.bind_carried(env, &carries, span)?;
            let cond = match self.loop_cond(env, test, guard)? {
                Cond::Dyn(t) => self.t.at(t),
                Cond::Static(b) => {
                    let t = self.scalar_tensor(&FV::Bool(b), None, span)?.0;
                    self.t.at(t)
                }
            };
            self.dyn_depth += 1;
            let flow = self.block(env, body);
            self.dyn_depth -= 1;
            match flow? {
                Flow::Normal => {}
                _ => return needs_static(span, "`break`, `continue` or `return` inside a data-dependent loop"),
            }
            self.check_only_carried_written(&snap, &carries, span)?;
            if carries.iter().any(|c| matches!(c, Carry::View(_))) {
                return needs_static(span, "a view rebound inside a data-dependent loop");
            }
            let mut parts = self.carried_terms(env, &carries, false, span)?;
            // The condition runs every iteration too: what it reaches is checked.
            let checks = self.checks_carried(&mut parts, &[cond], &mut tys, &mut init, span)?;
            let body_t = self.t.add(Node::Tuple(parts.into())).map_err(Self::tyerr(span))?;
            if self.t.ty(body_t.id).map_err(Self::tyerr(span))? != Ty::Tuple(tys.clone()) {
                return needs_static(span, "a value that changes type around the loop");
            }
            Ok((cond, body_t.id, HashMap::new(), checks))
        })();
        self.t.frames.pop();
        let (cond, body_id, views, checks) = result?;
        let init_t = self.t.add(Node::Tuple(init.into())).map_err(Self::tyerr(span))?;
        let w = self.t.add(Node::While([init_t.id, cond, body_id])).map_err(Self::tyerr(span))?;
        if checks {
            self.t.note_check(w);
        }
        self.bind_after(env, &snap, &carries, w, &views, span)
    }
}

impl<'m> Fz<'m> {
    /// `try: BODY except CAUGHT: HANDLER` (the `if` [`crate::frontend::ast::TRY_MARKER`] makes of it): BODY, and
    /// HANDLER where it raised one of CAUGHT, as Python runs them. Only where BODY computes nothing at run time, so
    /// that every error it can raise is known here; a tensor computation's errors are known only when it runs.
    fn try_stmt(
        &mut self,
        env: &mut Env,
        caught: &[&str],
        body: &'m [Stmt],
        handler: &'m [Stmt],
        span: Span,
    ) -> FR<Flow> {
        let before = self.t.made;
        let r = self.block(env, body);
        if self.t.made != before {
            // Asks for the enclosing loop to be unrolled (the body may be Python arithmetic on its variable, known
            // then); at the top level this is the refusal.
            return needs_static(
                span,
                format!(
                    "`try`/`except {}` is supported only around Python arithmetic; this body computes with tensors, whose errors are known only when the program runs",
                    caught.join(", ")
                ),
            );
        }
        let r = match r {
            Err(Stop::Diag(d)) if crate::frontend::ast::error_caught(caught, &d.message) => self.block(env, handler),
            r => r,
        };
        match r {
            Err(Stop::Diag(mut d)) if caught.contains(&crate::frontend::ast::FINALLY_MARK) => {
                d.message = crate::frontend::ast::escaped_finally(&d.message);
                Err(Stop::Diag(d))
            }
            r => r,
        }
    }
}

/// The functionalizer's side of the statement walk both engines share.
impl<'m> pyvalue::Exec<'m> for Fz<'m> {
    fn binding(&mut self, n: &str) {
        if self.depth_calls == 1 {
            pyvalue::param_name_bound(&mut self.param_objects, n);
        }
    }
    fn expression_statement(&mut self, e: &'m Expr) {
        self.statement = Some(e.span);
    }
    /// `sel[mask] = v` into a selection bound to a name rebinds the name (`list_writes::masked_setitem`).
    fn setitem_named(&mut self, env: &mut Env, name: &str, o: &FV, idx: &FV, v: &FV, span: Span) -> Option<FR<()>> {
        let FV::Masked(sel) = o else { return None };
        Some(self.masked_setitem(env, name, sel, idx, v, span))
    }
    fn aug_assign(&mut self, env: &mut Env, target: &'m Expr, op: BinOp, value: &'m Expr, span: Span) -> FR<()> {
        Fz::aug_assign(self, env, target, op, value, span)
    }
    fn setitem(&mut self, obj: &FV, idx: &FV, v: &FV, span: Span) -> FR<()> {
        Fz::setitem(self, obj, idx, v, span)
    }
    fn unpack(&mut self, v: &FV, span: Span) -> FR<Vec<FV>> {
        match v {
            FV::DynInt(_) | FV::DynFloat(_) => diag(span, "cannot unpack a number"),
            other => self.iterate(other, span),
        }
    }
    fn exec_other(&mut self, env: &mut Env, s: &'m Stmt) -> FR<Flow> {
        Fz::stmt_other(self, env, s)
    }
    fn block(&mut self, env: &mut Env, body: &'m [Stmt]) -> FR<Flow> {
        Fz::block(self, env, body)
    }
    fn inplace_binop(&mut self, a: FV, op: BinOp, b: FV, span: Span) -> FR<FV> {
        Fz::inplace_binop(self, &a, op, &b, span)
    }
}
