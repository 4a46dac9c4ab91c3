//! A data-dependent `if`: both arms run from the same state, and what they leave different becomes one `if` term.

use super::ctrl::Flow;
use super::state::{diag, needs_static, Affine, Root, Sym, TId, TIdKey, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::Span;
use crate::frontend::ast::*;
use crate::ir::Node;
use crate::tensor::DType;

/// Whether `v` holds a view of root `r` (directly, or in a tuple or list).
fn refers_to(v: &FV, r: usize) -> bool {
    match v {
        FV::Tensor(t) => t.root == r,
        FV::Tuple(xs) | FV::Named(xs, _) => xs.iter().any(|x| refers_to(x, r)),
        FV::List(xs) => xs.borrow().iter().any(|x| refers_to(x, r)),
        _ => false,
    }
}

/// Whether `name` is the only way to reach root `r` in `env`: no other name or list views it and the caller does not
/// see it (not a parameter). Then the arm's value of `name` may be copied into a fresh root without losing an alias.
fn only_name(env: &Env, name: &str, r: usize, roots: &[Root]) -> bool {
    roots[r].param.is_none() && env.iter().all(|(k, v)| k == name || !refers_to(v, r))
}

impl<'m> Fz<'m> {
    /// A data-dependent `if`: both arms run from the same state; what differs becomes an `if` term.
    pub(super) fn dyn_if(
        &mut self,
        env: &mut Env,
        cond: TId,
        body: &'m [Stmt],
        orelse: &'m [Stmt],
        span: Span,
    ) -> FR<Flow> {
        let snap = self.snapshot(env);
        let arm = |this: &mut Self, env: &mut Env, stmts: &'m [Stmt]| -> FR<(Env, Vec<Root>)> {
            match this.block(env, stmts)? {
                Flow::Normal => Ok((env.clone(), this.roots.clone())),
                Flow::Return(_) => diag(span, "`return` inside an `if` on a run-time value is not supported"),
                _ => {
                    this.exit_under_dyn_if = true;
                    diag(span, "`break` or `continue` inside an `if` on a run-time value is not supported here")
                }
            }
        };
        let (env1, roots1) = arm(self, env, body)?;
        for (l, items) in &snap.lists {
            if l.borrow().len() != items.len() {
                return diag(span, "a list changed inside an `if` on a run-time value is not supported");
            }
        }
        // The second arm starts from the same state, but its new roots are numbered after the first arm's.
        self.restore(env, &snap);
        let n0 = snap.roots.len();
        self.roots = roots1.clone();
        self.roots[..n0].clone_from_slice(&snap.roots);
        let (env2, roots2) = arm(self, env, orelse)?;
        for (l, items) in &snap.lists {
            if l.borrow().len() != items.len() {
                return diag(span, "a list changed inside an `if` on a run-time value is not supported");
            }
        }
        // Components: root versions that differ, then names that differ.
        let mut then_parts = Vec::new();
        let mut else_parts = Vec::new();
        enum Merge {
            Root(usize),
            Value(String, DType, Vec<usize>),
            Offset(String, TRef),
            Number(String, DType),
        }
        let mut merges = Vec::new();
        for i in 0..n0 {
            if roots1[i].version != snap.roots[i].version || roots2[i].version != snap.roots[i].version {
                then_parts.push(self.t.at(roots1[i].version));
                else_parts.push(self.t.at(roots2[i].version));
                merges.push(Merge::Root(i));
            }
        }
        let mut names: Vec<&String> = env1.keys().filter(|k| env2.contains_key(*k)).collect();
        names.sort();
        let mut merged_env = snap.env.clone();
        for name in names {
            let (v1, v2) = (&env1[name], &env2[name]);
            if v1.same(v2) {
                merged_env.insert(name.clone(), v1.clone());
                continue;
            }
            match (v1, v2) {
                (FV::Tensor(a), FV::Tensor(b))
                    if a.root == b.root && a.root < n0 && a.shape == b.shape && a.strides == b.strides =>
                {
                    then_parts.push(self.affine_term(&a.off));
                    else_parts.push(self.affine_term(&b.off));
                    merges.push(Merge::Offset(name.clone(), a.clone()));
                }
                (FV::Tensor(a), FV::Tensor(b))
                    if (a.root >= n0 && b.root >= n0)
                        || (only_name(&env1, name, a.root, &roots1) && only_name(&env2, name, b.root, &roots2)) =>
                {
                    let (da, db) = (roots1[a.root].dtype, roots2[b.root].dtype);
                    if da != db || a.shape != b.shape {
                        return needs_static(span, format!("`{name}` gets tensors of different types in the two arms of an `if` on a run-time value"));
                    }
                    self.roots = roots1.clone();
                    let ta = self.read(a, span)?;
                    then_parts.push(self.t.at(ta));
                    self.roots = roots2.clone();
                    let tb = self.read(b, span)?;
                    else_parts.push(self.t.at(tb));
                    merges.push(Merge::Value(name.clone(), da, a.shape.clone()));
                }
                (FV::Tensor(_), FV::Tensor(_)) => {
                    return needs_static(span, format!("`{name}` is bound to views of different tensors in the two arms of an `if` on a run-time value"));
                }
                (x, y) if matches!(x, FV::Int(_) | FV::DynInt(_)) && matches!(y, FV::Int(_) | FV::DynInt(_)) => {
                    then_parts.push(self.int_term(x));
                    else_parts.push(self.int_term(y));
                    merges.push(Merge::Number(name.clone(), DType::I64));
                }
                (x, y)
                    if matches!(x, FV::Float(_) | FV::DynFloat(_) | FV::Int(_))
                        && matches!(y, FV::Float(_) | FV::DynFloat(_) | FV::Int(_)) =>
                {
                    let a = self.scalar_tensor(x, Some(DType::F64), span)?.0;
                    let b = self.scalar_tensor(y, Some(DType::F64), span)?.0;
                    then_parts.push(self.t.at(a));
                    else_parts.push(self.t.at(b));
                    merges.push(Merge::Number(name.clone(), DType::F64));
                }
                (x, y) if matches!(x, FV::Bool(_) | FV::DynBool(_)) && matches!(y, FV::Bool(_) | FV::DynBool(_)) => {
                    let a = self.dyn_bool_of(x, span)?;
                    let b = self.dyn_bool_of(y, span)?;
                    then_parts.push(self.t.at(a));
                    else_parts.push(self.t.at(b));
                    merges.push(Merge::Number(name.clone(), DType::Bool));
                }
                _ => {
                    return needs_static(
                        span,
                        format!(
                            "`{name}` gets values of different kinds in the two arms of an `if` on a run-time value"
                        ),
                    )
                }
            }
        }
        self.roots = roots2.clone();
        self.roots[..n0].clone_from_slice(&snap.roots);
        let th = self.t.add(Node::Tuple(then_parts.into())).map_err(Self::tyerr(span))?;
        let el = self.t.add(Node::Tuple(else_parts.into())).map_err(Self::tyerr(span))?;
        let c = self.t.at(cond);
        let node = self.t.add(Node::If([c, th.id, el.id])).map_err(Self::tyerr(span))?;
        for (j, m) in merges.into_iter().enumerate() {
            let jj = self.t.leaf(Node::Int(j as i64));
            let g = self.t.add(Node::Get([node.id, jj])).map_err(Self::tyerr(span))?;
            match m {
                Merge::Root(i) => {
                    self.roots[i].version = g;
                    self.roots[i].written = roots1[i].written || roots2[i].written;
                }
                Merge::Value(name, d, s) => {
                    let root = self.new_root(g, d, s, None);
                    merged_env.insert(name, FV::Tensor(self.natural_view(root)));
                }
                Merge::Offset(name, mut tr) => {
                    tr.off = Affine::sym(Sym::Opaque(TIdKey::of(g)));
                    merged_env.insert(name, FV::Tensor(tr));
                }
                Merge::Number(name, DType::I64) => {
                    merged_env.insert(name, FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(g)))));
                }
                Merge::Number(name, DType::Bool) => {
                    merged_env.insert(name, FV::DynBool(g));
                }
                Merge::Number(name, _) => {
                    merged_env.insert(name, FV::DynFloat(g));
                }
            }
        }
        *env = merged_env;
        Ok(Flow::Normal)
    }
}
