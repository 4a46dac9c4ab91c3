//! What a loop carries: discovering the state a body changes, binding it to `(carried 0 j)`, and rebinding names
//! after the loop term.

use std::collections::HashMap;

use super::ctrl::{count_names, count_names_expr, Flow, Snap};
use super::state::{needs_static, Affine, Sym, TId, TIdKey, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::Span;
use crate::frontend::ast::*;
use crate::ir::{Node, Ty};
use crate::tensor::DType;

/// How a value is carried around a loop.
#[derive(Clone, Debug)]
pub(super) enum Carry {
    /// A root buffer written in the body: its version.
    Root(usize),
    /// A name rebound to a tensor value made in the body.
    Value(String, DType, Vec<usize>),
    /// A name rebound to a run-time Python number.
    Number(String, DType),
    /// A name rebound to a view of an outer root that moves with the iteration.
    View(String),
}

fn mentions(e: &Expr, name: &str) -> bool {
    let mut m = HashMap::new();
    count_names_expr(e, &mut m);
    m.contains_key(name)
}

/// Whether `body` mentions `name` and no path through it reads `name` before assigning it: the value `name` has
/// when `body` starts is never read there (a name each arm of a run-time `if`, or an inner loop, binds afresh).
fn assigned_before_read(name: &str, body: &[Stmt]) -> bool {
    let mut m = HashMap::new();
    count_names(body, &mut m);
    m.contains_key(name) && !reads_first(name, body).0
}

/// Whether some path through `stmts` may read `name` before assigning it, and whether every path assigns it.
/// Conservative: a statement that mentions `name` in any other way counts as a read.
fn reads_first(name: &str, stmts: &[Stmt]) -> (bool, bool) {
    for s in stmts {
        let mut m = HashMap::new();
        count_names(std::slice::from_ref(s), &mut m);
        if !m.contains_key(name) {
            continue;
        }
        match &s.kind {
            StmtKind::Assign { targets, value } if !mentions(value, name) => {
                // A target that mentions `name` only as a plain name (alone or as an element of a tuple).
                let is_name = |x: &Expr| matches!(&x.kind, ExprKind::Name(n) if n == name);
                let plain = |t: &Expr| match &t.kind {
                    ExprKind::Tuple(ts) | ExprKind::List(ts) => ts.iter().all(|x| is_name(x) || !mentions(x, name)),
                    _ => is_name(t),
                };
                if targets.iter().any(plain) && targets.iter().all(|t| plain(t) || !mentions(t, name)) {
                    return (false, true);
                }
                return (true, false);
            }
            StmtKind::If { test, body, orelse } if !mentions(test, name) => {
                let (r1, w1) = reads_first(name, body);
                let (r2, w2) = reads_first(name, orelse);
                if r1 || r2 {
                    return (true, false);
                }
                if w1 && w2 {
                    return (false, true);
                }
            }
            // A loop may run no iteration: it never assigns for sure.
            StmtKind::While { test, body } if !mentions(test, name) => {
                if reads_first(name, body).0 {
                    return (true, false);
                }
            }
            // A `for` loop's iterations each read `name` only after assigning it (fuzz seeds 39312, 39723).
            StmtKind::For { target, iter, body } if !mentions(iter, name) && !mentions(target, name) => {
                if reads_first(name, body).0 {
                    return (true, false);
                }
            }
            _ => return (true, false),
        }
    }
    (false, false)
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
    /// Names first bound inside a loop body are carried only if the function uses them outside the body.
    pub(super) fn used_outside(&self, name: &str, body: &[Stmt]) -> bool {
        let total =
            self.fn_stack.last().and_then(|f| self.fn_names.get(f)).and_then(|m| m.get(name)).copied().unwrap_or(0);
        let mut inner = HashMap::new();
        count_names(body, &mut inner);
        total > inner.get(name).copied().unwrap_or(0)
    }

    /// What a loop body changes, found by running it once from the current state (the terms are discarded).
    pub(super) fn discover(
        &mut self,
        env: &mut Env,
        snap: &Snap,
        body: &'m [Stmt],
        extra: Option<(&'m Expr, Option<&'m Expr>)>,
        var: Option<&str>,
        level: usize,
        span: Span,
    ) -> FR<Vec<Carry>> {
        self.t.discovering += 1;
        let r = self.discover_once(env, snap, body, extra, var, level, span);
        self.t.discovering -= 1;
        r
    }

    #[allow(clippy::too_many_arguments)]
    fn discover_once(
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
        if snap.containers_changed() {
            return needs_static(span, "a list or dict that changes inside the loop");
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
                FV::Tensor(t) if t.alt.is_some() => {
                    return needs_static(
                        span,
                        format!("`{name}` is bound inside the loop to a view chosen by an `if` on a run-time value"),
                    )
                }
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

    /// A data-dependent loop's carried state, to a fixed point. `discover` runs the body once from the values before
    /// the loop, where a number the loop carries is still known (`k` in `while ...: if k == 2: x.add_(1); k += 1`),
    /// so writes under a test of it may not run; the loop itself sees it at run time. The body is run again with the
    /// state found so far carried, until that finds nothing more (the terms are discarded).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle_carries(
        &mut self,
        env: &mut Env,
        snap: &Snap,
        body: &'m [Stmt],
        extra: Option<(&'m Expr, Option<&'m Expr>)>,
        mut carries: Vec<Carry>,
        level: usize,
        span: Span,
    ) -> FR<Vec<Carry>> {
        let key = |c: &Carry| format!("{c:?}");
        for _ in 0..4 {
            if carries.iter().any(|c| matches!(c, Carry::View(_))) {
                break;
            }
            let tys: Vec<Ty> = carries.iter().map(|c| self.carry_ty(c)).filter(|t| *t != Ty::None).collect();
            self.t.frames.push(super::state::LoopFrame { range: None, step: 1, carried: tys, arms: self.t.arms });
            self.t.open_scope();
            let more = self
                .bind_carried(env, &carries, span)
                .and_then(|()| self.discover(env, snap, body, extra, None, level, span));
            self.t.take_scope();
            self.t.frames.pop();
            self.restore(env, snap);
            let new: Vec<Carry> = more?.into_iter().filter(|c| !carries.iter().any(|k| key(k) == key(c))).collect();
            if new.is_empty() {
                break;
            }
            carries.extend(new);
            // Roots first, by index; then names, by name (the order `discover` gives).
            carries.sort_by_key(|c| match c {
                Carry::Root(r) => (0, *r, String::new()),
                Carry::Value(n, ..) | Carry::Number(n, _) | Carry::View(n) => (1, 0, n.clone()),
            });
            carries.dedup_by(|a, b| match (a, b) {
                (
                    Carry::Value(x, ..) | Carry::Number(x, _) | Carry::View(x),
                    Carry::Value(y, ..) | Carry::Number(y, _) | Carry::View(y),
                ) => x == y,
                _ => false,
            });
        }
        Ok(carries)
    }

    /// The type a carried value has in the loop state.
    pub(super) fn carry_ty(&self, c: &Carry) -> Ty {
        match c {
            Carry::Root(r) => Ty::Tensor(self.roots[*r].dtype, self.roots[*r].shape.clone()),
            Carry::Value(_, d, s) => Ty::Tensor(*d, s.clone()),
            Carry::Number(_, DType::I64) => Ty::Int,
            Carry::Number(_, d) => Ty::Tensor(*d, vec![]),
            Carry::View(_) => Ty::None,
        }
    }

    /// Binds the carried state inside the loop: versions and names become `(carried 0 j)`.
    pub(super) fn bind_carried(&mut self, env: &mut Env, carries: &[Carry], span: Span) -> FR<()> {
        let mut j = 0;
        for c in carries {
            if let Carry::View(name) = c {
                env.insert(name.clone(), FV::Poisoned("is rebound to a different view on every iteration", None));
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
    pub(super) fn carried_terms(
        &mut self,
        env: &Env,
        carries: &[Carry],
        before_loop: bool,
        span: Span,
    ) -> FR<Vec<egg::Id>> {
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
    pub(super) fn bind_after(
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

    /// A body may write only the roots found in the first pass.
    pub(super) fn check_only_carried_written(&self, snap: &Snap, carries: &[Carry], span: Span) -> FR<()> {
        for (i, r) in snap.roots.iter().enumerate() {
            let carried = carries.iter().any(|c| matches!(c, Carry::Root(k) if *k == i));
            if !carried && self.roots[i].version != r.version {
                return needs_static(span, "a loop body whose writes differ between iterations");
            }
        }
        Ok(())
    }

    /// Views of outer roots rebound per iteration: after the loop they are the last iteration's view.
    pub(super) fn moving_views(
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
}

impl<'m> Fz<'m> {
    /// A name carried as a tensor made in the body whose value on entry is a view of a root that the body writes
    /// and that something else can see (a parameter, another live name, or a caller of the helper being inlined).
    /// In the first iteration the body's writes through that name, or through the other names, reach both; in
    /// later iterations the name holds a fresh tensor. The loop state, which treats every iteration alike, would
    /// copy the entry value and lose that aliasing, so the first iteration must run on its own (peeled).
    pub(super) fn aliased_on_entry(&self, snap: &Snap, carries: &[Carry], body: &[Stmt]) -> Option<String> {
        for c in carries {
            let Carry::Value(name, ..) = c else { continue };
            let Some(FV::Tensor(t)) = snap.env.get(name) else { continue };
            if t.alt.is_some() {
                return Some(name.clone());
            }
            if !carries.iter().any(|c| matches!(c, Carry::Root(r) if *r == t.root)) {
                continue;
            }
            // Names the body assigns before reading, and that nothing after the loop reads, are dead on entry.
            let live = |n: &str| self.used_outside(n, body) || !assigned_before_read(n, body);
            let seen_elsewhere = self.roots[t.root].param.is_some()
                || self.depth_calls > 1
                || snap.env.iter().any(|(n, v)| n != name && live(n) && super::branch::refers_to(v, t.root));
            if seen_elsewhere {
                return Some(name.clone());
            }
        }
        None
    }
}
