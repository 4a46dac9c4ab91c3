//! A data-dependent `if`: both arms run from the same state, and what they leave different becomes one `if` term.

use std::rc::Rc;

use egg::Id;

use super::ctrl::{Flow, Snap};
use super::entries::{Containers, Entries, ENTRY};
use super::state::{diag, needs_static, Affine, Root, Sym, TId, TIdKey, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::Span;
use crate::frontend::ast::*;
use crate::ir::{Node, Ty};
use crate::tensor::DType;

/// Whether `v` holds a view of root `r` (directly, or in a tuple, list or dict) through which an alias can show: a
/// view of no elements reads nothing of `r` and writes nothing into it (fuzz seed 142187: `w = t[2:].t()[2:1]`
/// beside `t` in a `while` loop made `t` a conditional view).
pub(super) fn refers_to(v: &FV, r: usize) -> bool {
    refers_in(v, r, &mut Vec::new())
}

/// [`refers_to`], each list and dict visited once (`seen`: their addresses; a container may hold itself).
fn refers_in(v: &FV, r: usize, seen: &mut Vec<usize>) -> bool {
    match v {
        FV::Tensor(t) => !t.shape.contains(&0) && t.roots().contains(&r),
        FV::Tuple(xs) | FV::Named(xs, _) => xs.iter().any(|x| refers_in(x, r, seen)),
        FV::List(xs) if super::state::first_visit(seen, Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().any(|x| refers_in(x, r, seen))
        }
        FV::Dict(xs) if super::state::first_visit(seen, Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().any(|(_, x)| refers_in(x, r, seen))
        }
        _ => false,
    }
}

/// Whether `name` is the only way to reach root `r` in `env`: no other name or list views it and the caller does not
/// see it (not a parameter, nor, inside a helper, a tensor from before the helper was called: its callers may hold it).
/// Then the arm's value of `name` may be copied into a fresh root without losing an alias. A returned value
/// (`%return.K`) outlives the function's other names, so only the other parts of the returned value count for it.
/// Names bound in one arm only do not outlive the `if` (`other` is the other arm's bindings), so they do not count.
fn only_name(env: &Env, other: &Env, name: &str, r: usize, roots: &[Root], in_helper_before_if: bool) -> bool {
    // A name unreadable in the other arm (poisoned) is unreadable after the `if` too.
    let counts = |k: &str| {
        other.get(k).is_some_and(|v| !matches!(v, FV::Poisoned(..))) && (!name.starts_with(RET) || k.starts_with(RET))
    };
    roots[r].param.is_none()
        && !in_helper_before_if
        && env.iter().all(|(k, v)| k == name || !counts(k) || !refers_to(v, r))
}

/// Something an arm made that a conditional view merged after the `if` refers to: a root (its index, the merge slot
/// holding its value, dtype and shape), or the condition of a view an inner `if` chose (the term and its slot).
enum Made {
    Root(usize, usize, DType, Vec<usize>),
    Cond(TId, usize),
}

/// `t` with its roots and conditions replaced as `roots` and `conds` say.
fn map_chain(t: &TRef, roots: &[(usize, usize)], conds: &[(TId, TId)]) -> TRef {
    let mut out = t.primary();
    if let Some(&(_, r)) = roots.iter().find(|(q, _)| *q == t.root) {
        out.root = r;
    }
    out.alt = t.alt.as_ref().map(|alt| {
        let c = conds.iter().find(|(c, _)| *c == alt.0).map_or(alt.0, |&(_, n)| n);
        Rc::new((c, map_chain(&alt.1, roots, conds)))
    });
    out
}

/// Why a name bound in one arm only of an `if` on a run-time value cannot be read after it.
const ONE_ARM: &str = "is bound in one arm only of an `if` on a run-time value";
/// Why a name is unreadable after an `if` on a run-time value whose arms both return (nothing can read it).
const AFTER_RETURN: &str = "is read after a `return`";
/// Why a name is unreadable after an `if` on a run-time value that leaves it different selections of data-dependent
/// length in its two arms.
const SELECTIONS: &str = "holds selections of data-dependent length that differ between the arms of an `if` on a \
                          run-time value";

/// The prefix of the names that carry a returned value through the merge of an `if`'s arms.
const RET: &str = "%return.";

/// The structure of a returned value: tuples (and named tuples) of leaves, each carried by a name `%return.K`.
#[derive(PartialEq)]
pub(super) enum Ret {
    Leaf,
    Tuple(Vec<Ret>, Option<&'static [&'static str]>),
}

/// Whether two views have one shape and address their elements alike: strides may differ only where they never
/// multiply an index other than 0 (dims of size 1, or a view of no elements).
fn same_layout(a: &TRef, b: &TRef) -> bool {
    a.shape == b.shape
        && (a.shape.contains(&0)
            || a.shape.iter().zip(a.strides.iter().zip(&b.strides)).all(|(&n, (x, y))| n == 1 || x == y))
}

fn flatten(v: &FV, env: &mut Env, k: &mut usize) -> Ret {
    match v {
        FV::Tuple(xs) => Ret::Tuple(xs.iter().map(|x| flatten(x, env, k)).collect(), None),
        FV::Named(xs, fields) => Ret::Tuple(xs.iter().map(|x| flatten(x, env, k)).collect(), Some(fields)),
        _ => {
            env.insert(format!("{RET}{k}"), v.clone());
            *k += 1;
            Ret::Leaf
        }
    }
}

fn rebuild(r: &Ret, env: &mut Env, k: &mut usize) -> FV {
    match r {
        Ret::Leaf => {
            let v = env.get(&format!("{RET}{k}")).cloned().unwrap_or(FV::Poisoned(ONE_ARM, None));
            *k += 1;
            v
        }
        Ret::Tuple(items, None) => FV::Tuple(Rc::new(items.iter().map(|i| rebuild(i, env, k)).collect())),
        Ret::Tuple(items, Some(f)) => FV::Named(Rc::new(items.iter().map(|i| rebuild(i, env, k)).collect()), f),
    }
}

/// Why a name the arms of an `if` on a run-time value bind differently cannot be read after it (`FV::Poisoned`).
const DIFFERENT_TYPES: &str = "gets tensors of different types in the two arms of an `if` on a run-time value";
const NUMBER_OR_TENSOR: &str = "is a number in one arm of an `if` on a run-time value and a tensor in the other, \
    which later code could tell apart (a number of a kind above the tensor's dtype, or a tensor reachable by other names)";
const DIFFERENT_VIEWS: &str = "is bound to views of different shapes or dtypes in the two arms of an `if` on a run-time value (a shape decided by data)";

/// What one arm of an `if` on a run-time value leaves: its bindings, its roots, and the structure of what it
/// returned.
pub(super) type ArmEnd = (Env, Vec<Root>, Option<Ret>);

/// What a slot of the `if` term merges after it.
enum Merge {
    Root(usize),
    Value(String, DType, Vec<usize>),
    Offset(String, TRef, Affine),
    Number(String, DType),
    /// A name that is a Python number of this kind in one arm and a 0-d tensor of this dtype in the other.
    NumberOrTensor(String, DType, crate::tensor::Kind),
    /// A conditional view: the arms' views, and for each arm made in it, the merge slot of its root.
    CondView(String, TRef, TRef, [Vec<Made>; 2]),
    /// A slot read by a `CondView`.
    Placeholder,
}

/// The `if` term being built: each slot's term in the then arm and in the else arm, and what the slots merge (a
/// `CondView` has no slot of its own).
#[derive(Default)]
struct Parts {
    then: Vec<Id>,
    els: Vec<Id>,
    merges: Vec<Merge>,
}

impl Parts {
    fn push(&mut self, then: Id, els: Id, merge: Merge) {
        self.then.push(then);
        self.els.push(els);
        self.merges.push(merge);
    }
}

/// What an arm of an `if` on a run-time value runs: its statements, or the rest of an unrolled loop whose `break`
/// flag (`flag`, from `exits.rs`) may have been set by then: the loop goes on, the flag known to be false, over the
/// remaining `items` (each bound to `target`, then `body`), so that the iterations after a data-dependent `break`
/// run inside the arm where it did not happen, with the values that path left (`prev = cur` stays a number).
#[derive(Clone)]
pub(super) enum Arm<'m> {
    Stmts(&'m [Stmt]),
    LoopRest { target: &'m Expr, items: Vec<FV>, body: &'m [Stmt], flag: String },
}

impl<'m> Fz<'m> {
    /// A data-dependent `if`: both arms run from the same state; what differs becomes an `if` term.
    pub(super) fn joined_if(
        &mut self,
        env: &mut Env,
        cond: TId,
        body: Arm<'m>,
        orelse: Arm<'m>,
        span: Span,
    ) -> FR<Flow> {
        let snap = self.snapshot(env);
        let containers = Containers::of(&snap.env);
        let ((mut env1, roots1, ret1), made1, (mut env2, roots2, ret2), made2, entries1) =
            match self.run_arms(env, cond, body, orelse, &snap, &containers, span)? {
                Ok(arms) => arms,
                Err(flow) => return Ok(flow),
            };
        let ret = self.merged_return(ret1, ret2, span)?;
        // Entries the arms set differently merge as names do.
        let entries = containers.split(&entries1, &containers.now(), &mut env1, &mut env2);
        let entries = entries.or_else(|m| needs_static(span, m))?;
        // Components: root versions that differ, then names that differ.
        let mut parts = Parts::default();
        let n0 = snap.roots.len();
        for i in 0..n0 {
            if roots1[i].version != snap.roots[i].version || roots2[i].version != snap.roots[i].version {
                let (th, el) = (self.t.at(roots1[i].version), self.t.at(roots2[i].version));
                parts.push(th, el, Merge::Root(i));
            }
        }
        let arms = [(&env1, &roots1), (&env2, &roots2)];
        let mut merged_env = self.merge_names(&snap, arms, ret.is_some(), &mut parts, span)?;
        self.roots = roots2.clone();
        self.roots[..n0].clone_from_slice(&snap.roots);
        let (node, gets) = self.if_term(cond, &mut parts, [&made1, &made2], span)?;
        self.bind_merges(parts.merges, node, &gets, cond, [&roots1, &roots2], &mut merged_env, span)?;
        containers.write_back(&entries, &mut merged_env).or_else(|m| needs_static(span, m))?;
        match ret {
            None => {
                *env = merged_env;
                Ok(Flow::Normal)
            }
            Some(shape) => {
                let v = rebuild(&shape, &mut merged_env, &mut 0);
                merged_env.retain(|k, _| !k.starts_with(RET));
                *env = merged_env;
                Ok(Flow::Return(v))
            }
        }
    }

    /// Runs one arm of an `if` on a run-time value: its bindings and roots, and what it returns. A returned value
    /// joins the merge as names (`%return.K`, one per tensor or number in it), so it is merged as bindings are.
    pub(super) fn run_arm(&mut self, env: &mut Env, arm: &Arm<'m>, span: Span) -> FR<ArmEnd> {
        // A `raise` in an arm fails the arm, which then raises only when it runs (see `checks.rs`).
        self.t.arms += 1;
        let flow = match arm {
            Arm::Stmts(stmts) => self.block(env, stmts),
            Arm::LoopRest { target, items, body, flag } => {
                env.insert(flag.clone(), FV::Bool(false));
                // The loop's own item name (`exits.rs`' `%itemN`) is dead after the loop: it keeps its value here,
                // so that the arms need not merge it.
                let item = match &target.kind {
                    ExprKind::Name(n) => env.get(n).cloned().map(|v| (n.clone(), v)),
                    _ => None,
                };
                let flow = self.unrolled(env, target, items.clone(), body, span);
                if let Some((n, v)) = item {
                    env.insert(n, v);
                }
                flow
            }
        };
        self.t.arms -= 1;
        match flow? {
            Flow::Normal => Ok((env.clone(), self.roots.clone(), None)),
            Flow::Return(v) => {
                let mut e = env.clone();
                let shape = flatten(&v, &mut e, &mut 0);
                Ok((e, self.roots.clone(), Some(shape)))
            }
            _ => {
                self.exit_under_dyn_if = true;
                diag(span, "`break` or `continue` inside an `if` on a run-time value is not supported here")
            }
        }
    }

    /// Runs both arms from the state `snap`, each with the checks it made. Where one arm fails with an error PyTorch
    /// raises too (a shape error, an index known to be out of range), it raises only if it runs: the other arm's
    /// state goes on, under a check that raises when the failing arm is chosen, and that is the `if`'s flow (`Err`).
    /// The first arm's entries of `containers` come with them (the second's are those left in place).
    #[allow(clippy::type_complexity, clippy::too_many_arguments)]
    fn run_arms(
        &mut self,
        env: &mut Env,
        cond: TId,
        body: Arm<'m>,
        orelse: Arm<'m>,
        snap: &Snap,
        containers: &Containers,
        span: Span,
    ) -> FR<Result<(ArmEnd, Vec<TId>, ArmEnd, Vec<TId>, Vec<Entries>), Flow>> {
        self.t.open_scope();
        let r1 = super::checks::raising_arm(self.run_arm(env, &body, span))?;
        let made1 = self.t.take_scope();
        let after1 = snap.containers_now();
        let entries1 = containers.now();
        // The second arm starts from the same state, but its new roots are numbered after the first arm's.
        let roots_after1 = self.roots.clone();
        self.restore(env, snap);
        let n0 = snap.roots.len();
        self.roots = roots_after1;
        self.roots[..n0].clone_from_slice(&snap.roots);
        self.t.open_scope();
        let r2 = super::checks::raising_arm(self.run_arm(env, &orelse, span))?;
        let made2 = self.t.take_scope();
        match (r1, r2) {
            (Ok(a), Ok(b)) => Ok(Ok((a, made1, b, made2, entries1))),
            (Err(d), Err(_)) => Err(super::state::Stop::Diag(d)),
            // The lists and dicts hold what the arm that goes on left in them (fuzz seed 323810).
            (Err(_), Ok(b)) => self.one_arm_raises(env, cond, true, b, &made2, span).map(Err),
            (Ok(a), Err(_)) => {
                self.restore(env, snap);
                snap.set_containers(&after1);
                self.one_arm_raises(env, cond, false, a, &made1, span).map(Err)
            }
        }
    }

    /// The structure of the value both arms return (they must agree), or `None` where neither returns.
    fn merged_return(&mut self, ret1: Option<Ret>, ret2: Option<Ret>, span: Span) -> FR<Option<Ret>> {
        match (ret1, ret2) {
            (None, None) => Ok(None),
            (Some(a), Some(b)) if a == b => Ok(Some(a)),
            (Some(_), Some(_)) => {
                needs_static(span, "the two arms of an `if` on a run-time value return values of different kinds")
            }
            _ => {
                // Only the desugared program (`exits::lift_returns`) has returns in both arms.
                self.exit_under_dyn_if = true;
                diag(
                    span,
                    "`return` under an `if` on a run-time value is supported outside loops only (break, and return after the loop), and after at most about 20,000 statements copied by lifting returns",
                )
            }
        }
    }

    /// The bindings after the `if`: names the arms left alike keep their value, the others get a slot of the `if`
    /// term in `parts` (bound by [`Self::bind_merges`]) or are left unreadable.
    fn merge_names(
        &mut self,
        snap: &Snap,
        arms: [(&Env, &Vec<Root>); 2],
        returns: bool,
        parts: &mut Parts,
        span: Span,
    ) -> FR<Env> {
        let (env1, env2) = (arms[0].0, arms[1].0);
        let mut names: Vec<&String> = env1.keys().filter(|k| env2.contains_key(*k)).collect();
        names.sort();
        let mut merged_env = snap.env.clone();
        // A name bound in one arm only is unbound after the `if` when the other arm ran: reading it is refused (in a
        // loop, that unrolls the loop, where a condition on the loop variable becomes static).
        for (k, _) in env1.iter().chain(env2.iter()) {
            if !(env1.contains_key(k) && env2.contains_key(k)) && !k.starts_with(RET) {
                merged_env.insert(k.clone(), FV::Poisoned(ONE_ARM, Some(span)));
            }
        }
        for name in names {
            let (v1, v2) = (&env1[name], &env2[name]);
            if v1.same(v2) {
                merged_env.insert(name.clone(), v1.clone());
                continue;
            }
            // Both arms returned: the function's own names are never read again (only the returned value, the
            // written tensors and the containers merge), so they need not have one kind.
            if returns && !name.starts_with(RET) && !name.starts_with(ENTRY) {
                merged_env.insert(name.clone(), FV::Poisoned(AFTER_RETURN, Some(span)));
                continue;
            }
            let poisoned = match (v1, v2) {
                // Unreadable in one arm: unreadable after the `if` too (only reading it is refused).
                (FV::Poisoned(why, _), _) | (_, FV::Poisoned(why, _)) => Some(*why),
                // Not merged (which positions each holds differs): unreadable after the `if`.
                (FV::Masked(_) | FV::Squeezed(_), _) | (_, FV::Masked(_) | FV::Squeezed(_))
                    if !name.starts_with(RET) =>
                {
                    Some(SELECTIONS)
                }
                (FV::Tensor(a), FV::Tensor(b)) => {
                    self.merge_tensors(name, a, b, snap.roots.len(), arms, parts, span)?
                }
                (FV::Tensor(t), n) | (n, FV::Tensor(t)) if t.shape.is_empty() && Self::is_number(n) => {
                    let tensor_first = matches!(v1, FV::Tensor(_));
                    self.merge_number_and_scalar_tensor(name, t, n, tensor_first, snap.roots.len(), arms, parts, span)?
                }
                _ => self.merge_numbers(name, v1, v2, parts, span).map(|()| None)?,
            };
            if let Some(why) = poisoned {
                merged_env.insert(name.clone(), FV::Poisoned(why, Some(span)));
            }
        }
        Ok(merged_env)
    }

    /// How the text of an error names `name` (a returned value has none).
    fn shown(name: &str) -> String {
        if name.starts_with(RET) {
            "the returned value".to_string()
        } else if let Some(label) = name.strip_prefix(ENTRY) {
            format!("an entry of a list or dict (in `{}`)", label.split('.').next().unwrap_or(label))
        } else {
            format!("`{name}`")
        }
    }

    /// Merges a name bound to different tensors in the two arms (`n0` roots existed before the `if`): a view of one
    /// root at two offsets, a fresh value, or a conditional view. `Some(why)` where the name is unreadable after.
    #[allow(clippy::too_many_arguments)]
    fn merge_tensors(
        &mut self,
        name: &String,
        a: &TRef,
        b: &TRef,
        n0: usize,
        arms: [(&Env, &Vec<Root>); 2],
        parts: &mut Parts,
        span: Span,
    ) -> FR<Option<&'static str>> {
        let ((env1, roots1), (env2, roots2)) = (arms[0], arms[1]);
        // In a helper, a tensor made before it was called may have names in its callers.
        let caller_base = if self.depth_calls > 1 { self.call_base.min(n0) } else { 0 };
        let in_helper = |r: usize| r < caller_base;
        if a.root == b.root && a.root < n0 && same_layout(a, b) && a.alt.is_none() && b.alt.is_none() {
            let (th, el) = (self.affine_term(&a.off), self.affine_term(&b.off));
            parts.push(th, el, Merge::Offset(name.clone(), a.clone(), b.off.clone()));
        } else if a.shape.contains(&0) && a.shape == b.shape && roots1[a.root].dtype == roots2[b.root].dtype {
            // Empty tensors of one type hold nothing to alias: whichever the arms chose, a read gives an empty
            // tensor and a write writes nothing (fuzz seed 30690: an empty view or a fresh empty tensor).
            let dt = roots1[a.root].dtype;
            let z = self.full(&a.shape, dt, crate::tensor::Scalar::I(0)).map_err(Self::tyerr(span))?;
            let z = self.t.at(z);
            parts.push(z, z, Merge::Value(name.clone(), dt, a.shape.clone()));
        } else if a.alt.is_none()
            && b.alt.is_none()
            && only_name(env1, env2, name, a.root, roots1, in_helper(a.root))
            && only_name(env2, env1, name, b.root, roots2, in_helper(b.root))
        {
            let (da, db) = (roots1[a.root].dtype, roots2[b.root].dtype);
            if da != db || a.shape != b.shape {
                if !name.starts_with(RET) {
                    return Ok(Some(DIFFERENT_TYPES));
                }
                let (ta, tb) = (Ty::Tensor(da, a.shape.clone()), Ty::Tensor(db, b.shape.clone()));
                return needs_static(
                    span,
                    format!("{} {DIFFERENT_TYPES}: {ta} in one, {tb} in the other", Self::shown(name)),
                );
            }
            self.roots = roots1.clone();
            let ta = self.read(a, span)?;
            let th = self.t.at(ta);
            self.roots = roots2.clone();
            let tb = self.read(b, span)?;
            let el = self.t.at(tb);
            parts.push(th, el, Merge::Value(name.clone(), da, a.shape.clone()));
        } else {
            // A conditional view: later reads choose, later writes update both roots under the predicate.
            let (da, db) = (roots1[a.root].dtype, roots2[b.root].dtype);
            // The views may differ in strides and offset (each is read and written as its own view; see
            // `views.rs`), not in shape: a shape decided by data is not static.
            // Such a name is refused where it is read (fuzz seeds 33667, 70491, 72836, 74333: names never
            // read again, a loop's target or a value rebound in each iteration).
            if da != db || a.shape != b.shape {
                if !name.starts_with(RET) {
                    return Ok(Some(DIFFERENT_VIEWS));
                }
                let (ta, tb) = (Ty::Tensor(da, a.shape.clone()), Ty::Tensor(db, b.shape.clone()));
                return needs_static(
                    span,
                    format!("{} {DIFFERENT_VIEWS}: {ta} in one, {tb} in the other", Self::shown(name)),
                );
            }
            let made = self.made_in_arms(name, a, b, n0, arms, parts, span)?;
            parts.merges.push(Merge::CondView(name.clone(), a.clone(), b.clone(), made));
        }
        Ok(None)
    }

    /// What each arm's view of a conditional view refers to that the arm made: tensors (which join the merge as
    /// wholes, the other arm filling them with zeros that no read can see) and, for a view an inner `if` chose, its
    /// conditions (the other arm's stand-in is never read either).
    #[allow(clippy::too_many_arguments)]
    fn made_in_arms(
        &mut self,
        name: &String,
        a: &TRef,
        b: &TRef,
        n0: usize,
        arms: [(&Env, &Vec<Root>); 2],
        parts: &mut Parts,
        span: Span,
    ) -> FR<[Vec<Made>; 2]> {
        let ((env1, roots1), (env2, roots2)) = (arms[0], arms[1]);
        let mut made: [Vec<Made>; 2] = [Vec::new(), Vec::new()];
        for (k, (t, env_k, other, roots_k)) in
            [(a, env1, env2, roots1), (b, env2, env1, roots2)].into_iter().enumerate()
        {
            for r in t.roots() {
                if r < n0 || made[k].iter().any(|m| matches!(m, Made::Root(q, ..) if *q == r)) {
                    continue;
                }
                if !only_name(env_k, other, name, r, roots_k, false) {
                    return needs_static(span, format!("{} is bound to a tensor made in one arm of an `if` on a run-time value and also reachable otherwise", Self::shown(name)));
                }
                let r_ = &roots_k[r];
                let v = self.t.at(r_.version);
                let zeros = self.full(&r_.shape, r_.dtype, crate::tensor::Scalar::I(0)).map_err(Self::tyerr(span))?;
                let zeros = self.t.at(zeros);
                let (th, el) = if k == 0 { (v, zeros) } else { (zeros, v) };
                parts.push(th, el, Merge::Placeholder);
                made[k].push(Made::Root(r, parts.then.len() - 1, r_.dtype, r_.shape.clone()));
            }
            let mut c = t;
            while let Some(alt) = &c.alt {
                let (d, sh) = self.tensor_ty(alt.0, span)?;
                let v = self.t.at(alt.0);
                let zeros = self.full(&sh, d, crate::tensor::Scalar::I(0)).map_err(Self::tyerr(span))?;
                let zeros = self.t.at(zeros);
                let (th, el) = if k == 0 { (v, zeros) } else { (zeros, v) };
                parts.push(th, el, Merge::Placeholder);
                made[k].push(Made::Cond(alt.0, parts.then.len() - 1));
                c = &alt.1;
            }
        }
        Ok(made)
    }

    fn is_number(v: &FV) -> bool {
        matches!(v, FV::Int(_) | FV::DynInt(_) | FV::Float(_) | FV::DynFloat(_) | FV::Bool(_) | FV::DynBool(_))
    }

    /// Merges a name bound to a Python number in one arm and to a 0-d tensor in the other (`trust_ratio = 1` or
    /// `w_norm / g_norm`, as optimizers guard a division) as a fresh 0-d tensor of the tensor's dtype, its root
    /// marked with the number's kind so that every elementwise op over it checks that its result's dtype is the same
    /// either way (`numbers.rs`). The number's kind must not be above the dtype's (a bool, an int into an integer or
    /// float tensor, a float into a float tensor: the value fits), and the tensor must be reachable by that name
    /// only, as for any fresh value merged. `Some(why)` where the name is unreadable after the `if`.
    #[allow(clippy::too_many_arguments)]
    fn merge_number_and_scalar_tensor(
        &mut self,
        name: &String,
        t: &TRef,
        n: &FV,
        tensor_first: bool,
        n0: usize,
        arms: [(&Env, &Vec<Root>); 2],
        parts: &mut Parts,
        span: Span,
    ) -> FR<Option<&'static str>> {
        let k = if tensor_first { 0 } else { 1 };
        let ((env_t, roots_t), (env_n, _)) = (arms[k], arms[1 - k]);
        let d = roots_t[t.root].dtype;
        let fits = match n {
            FV::Bool(_) | FV::DynBool(_) => true,
            FV::Int(_) | FV::DynInt(_) => d != DType::Bool,
            _ => d.is_float(),
        };
        let helper = self.depth_calls > 1 && t.root < self.call_base.min(n0);
        if !fits || t.alt.is_some() || !only_name(env_t, env_n, name, t.root, roots_t, helper) {
            if !name.starts_with(RET) {
                return Ok(Some(NUMBER_OR_TENSOR));
            }
            return needs_static(span, format!("{} {NUMBER_OR_TENSOR}", Self::shown(name)));
        }
        self.roots = roots_t.clone();
        let tv = self.read(t, span)?;
        let tv = self.t.at(tv);
        let nv = self.scalar_tensor(n, Some(d), span)?.0;
        let nv = self.t.at(nv);
        let (th, el) = if tensor_first { (tv, nv) } else { (nv, tv) };
        parts.push(th, el, Merge::NumberOrTensor(name.clone(), d, super::numbers::number_kind(n)));
        Ok(None)
    }

    /// Merges a name bound to different numbers (or booleans) in the two arms into a slot of the `if` term.
    fn merge_numbers(&mut self, name: &String, x: &FV, y: &FV, parts: &mut Parts, span: Span) -> FR<()> {
        let int = |v: &FV| matches!(v, FV::Int(_) | FV::DynInt(_));
        let float = |v: &FV| matches!(v, FV::Float(_) | FV::DynFloat(_) | FV::Int(_));
        let boolean = |v: &FV| matches!(v, FV::Bool(_) | FV::DynBool(_));
        if int(x) && int(y) {
            let (th, el) = (self.int_term(x), self.int_term(y));
            parts.push(th, el, Merge::Number(name.clone(), DType::I64));
        } else if float(x) && float(y) {
            let a = self.scalar_tensor(x, Some(DType::F64), span)?.0;
            let b = self.scalar_tensor(y, Some(DType::F64), span)?.0;
            let (th, el) = (self.t.at(a), self.t.at(b));
            parts.push(th, el, Merge::Number(name.clone(), DType::F64));
        } else if boolean(x) && boolean(y) {
            let a = self.dyn_bool_of(x, span)?;
            let b = self.dyn_bool_of(y, span)?;
            let (th, el) = (self.t.at(a), self.t.at(b));
            parts.push(th, el, Merge::Number(name.clone(), DType::Bool));
        } else {
            return needs_static(
                span,
                format!(
                    "{} gets values of different kinds in the two arms of an `if` on a run-time value",
                    Self::shown(name)
                ),
            );
        }
        Ok(())
    }

    /// The `if` term over the arms' tuples of parts, and one `get` per slot (a `CondView` has none of its own).
    /// Each arm's checks that its parts do not reach go on an extra integer part, run only with that arm.
    fn if_term(&mut self, cond: TId, parts: &mut Parts, made: [&[TId]; 2], span: Span) -> FR<(TId, Vec<TId>)> {
        let (dead1, dead2) = (self.t.unreached(made[0], &parts.then), self.t.unreached(made[1], &parts.els));
        if !dead1.is_empty() || !dead2.is_empty() {
            let zero = self.t.leaf(Node::Int(0));
            parts.then.push(self.t.after_checks(&dead1, zero).map_err(Self::tyerr(span))?);
            parts.els.push(self.t.after_checks(&dead2, zero).map_err(Self::tyerr(span))?);
        }
        let th = self.t.add(Node::Tuple(std::mem::take(&mut parts.then).into())).map_err(Self::tyerr(span))?;
        let el = self.t.add(Node::Tuple(std::mem::take(&mut parts.els).into())).map_err(Self::tyerr(span))?;
        let c = self.t.at(cond);
        let node = self.t.add(Node::If([c, th.id, el.id])).map_err(Self::tyerr(span))?;
        if !made[0].is_empty() || !made[1].is_empty() {
            self.t.note_check(node);
        }
        let mut gets = Vec::new();
        for j in 0..parts.merges.iter().filter(|m| !matches!(m, Merge::CondView(..))).count() {
            let jj = self.t.leaf(Node::Int(j as i64));
            gets.push(self.t.add(Node::Get([node.id, jj])).map_err(Self::tyerr(span))?);
        }
        Ok((node, gets))
    }

    /// Binds what each slot of the `if` term merges: root versions, fresh values, offsets, numbers and conditional
    /// views (whose tensors and conditions made in an arm are replaced by their slots).
    #[allow(clippy::too_many_arguments)]
    fn bind_merges(
        &mut self,
        merges: Vec<Merge>,
        node: TId,
        gets: &[TId],
        cond: TId,
        roots: [&Vec<Root>; 2],
        merged_env: &mut Env,
        span: Span,
    ) -> FR<()> {
        let mut slot = 0;
        for m in merges {
            let g = gets.get(slot).copied().unwrap_or(node);
            if !matches!(m, Merge::CondView(..)) {
                slot += 1;
            }
            match m {
                Merge::Placeholder => {}
                Merge::CondView(name, a, b, made) => {
                    // Each arm's view, its tensors and conditions made in the arm replaced by the merge's slots.
                    let mut remap = |t: &TRef, made: &[Made]| -> TRef {
                        let mut roots = Vec::new();
                        let mut conds = Vec::new();
                        for m in made {
                            match m {
                                Made::Root(r, j, d, s) => {
                                    roots.push((*r, self.new_root(gets[*j], *d, s.clone(), None)))
                                }
                                Made::Cond(c, j) => conds.push((*c, gets[*j])),
                            }
                        }
                        map_chain(t, &roots, &conds)
                    };
                    let a = remap(&a, &made[0]);
                    let b = remap(&b, &made[1]);
                    let tr = self.choose_view(cond, a, b, span)?;
                    merged_env.insert(name, FV::Tensor(tr));
                }
                Merge::Root(i) => {
                    self.roots[i].version = g;
                    self.roots[i].written = roots[0][i].written || roots[1][i].written;
                }
                Merge::Value(name, d, s) => {
                    let root = self.new_root(g, d, s, None);
                    merged_env.insert(name, FV::Tensor(self.natural_view(root)));
                }
                Merge::NumberOrTensor(name, d, kind) => {
                    let root = self.new_root(g, d, Vec::new(), None);
                    self.roots[root].number = Some(kind);
                    merged_env.insert(name, FV::Tensor(self.natural_view(root)));
                }
                Merge::Offset(name, mut tr, other) => {
                    if let (Some(x), Some(y)) = (tr.off.as_const(), other.as_const()) {
                        self.offset_choices.insert(TIdKey::of(g), vec![x, y]);
                    }
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
        Ok(())
    }

    /// The conditional view `cond ? a : b`, where either may be a conditional view itself (a name an inner or an
    /// earlier `if` chose, fuzz seed 100645). A chain `c1 ? v1 : (c2 ? v2 : ... vn)` under `cond` becomes
    /// `cond & c1 ? v1 : (cond & c2 ? v2 : ... (cond ? vn : b))`: the first condition that holds chooses, as before.
    fn choose_view(&mut self, cond: TId, a: TRef, b: TRef, span: Span) -> FR<TRef> {
        let Some(alt) = a.alt.clone() else {
            return Ok(TRef { alt: Some(Rc::new((cond, b))), ..a });
        };
        if b.alt.is_none() {
            let c = self.t.at(cond);
            let not = self.t.op(crate::ir::OpName::LogicalNot, vec![c]).map_err(Self::tyerr(span))?;
            return Ok(TRef { alt: Some(Rc::new((not, a))), ..b });
        }
        let (c, c1) = (self.t.at(cond), self.t.at(alt.0));
        let both = self.t.op(crate::ir::OpName::BitAnd, vec![c, c1]).map_err(Self::tyerr(span))?;
        let rest = self.choose_view(cond, alt.1.clone(), b, span)?;
        Ok(TRef { alt: Some(Rc::new((both, rest))), ..a.primary() })
    }

    /// The rest of an `if` on a run-time value of which one arm fails: the other arm's state goes on, and a check
    /// raises where the failing arm is chosen. `made_ok` are the checks the other arm made.
    fn one_arm_raises(
        &mut self,
        env: &mut Env,
        cond: TId,
        then_raises: bool,
        ok: ArmEnd,
        made_ok: &[TId],
        span: Span,
    ) -> FR<Flow> {
        let raise = self.t.op(crate::ir::OpName::Raise, vec![]).map_err(Self::tyerr(span))?.id;
        self.one_arm_fails(env, cond, then_raises, ok, made_ok, raise, span)
    }

    /// The rest of an `if` on a run-time value of which one arm does not go on: the other arm's state goes on, and
    /// `fail` (`raise`, or `fallback` where the plan is specialized) is evaluated where the failing arm is chosen.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn one_arm_fails(
        &mut self,
        env: &mut Env,
        cond: TId,
        then_fails: bool,
        (ok_env, ok_roots, ret): ArmEnd,
        made_ok: &[TId],
        fail: Id,
        span: Span,
    ) -> FR<Flow> {
        self.roots = ok_roots;
        // The arm's values go on unconditionally; those of its checks later code does not run are checked at the
        // end of the enclosing scope.
        for &t in made_ok {
            self.t.note_check(t);
        }
        let zero = self.t.leaf(Node::Int(0));
        let (a, b) = if then_fails { (fail, zero) } else { (zero, fail) };
        let th = self.t.add(Node::Tuple(vec![a].into())).map_err(Self::tyerr(span))?;
        let el = self.t.add(Node::Tuple(vec![b].into())).map_err(Self::tyerr(span))?;
        let c = self.t.at(cond);
        let node = self.t.add(Node::If([c, th.id, el.id])).map_err(Self::tyerr(span))?;
        self.t.note_check(node);
        let mut merged = ok_env;
        match ret {
            None => {
                *env = merged;
                Ok(Flow::Normal)
            }
            Some(shape) => {
                let v = rebuild(&shape, &mut merged, &mut 0);
                merged.retain(|k, _| !k.starts_with(RET));
                *env = merged;
                Ok(Flow::Return(v))
            }
        }
    }
}
