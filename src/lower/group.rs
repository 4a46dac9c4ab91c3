//! Horizontal fusion: kernels that one launch reads, that do not depend on each other, become a group that the
//! executor launches once (on CUDA one grid whose third dimension picks the member; in C one call). Members are
//! fresh buffers that no in-place ordering constraint involves, and are computed unconditionally in the same scope
//! (the program, or one loop body: reached from its root without entering a branch): whenever one member is
//! needed, all are, so launching them together computes nothing a run would not. A launch's mask says which
//! members still need computing (all of them, unless a member was computed by some other way first).

use egg::{Id, Language};

use super::plan::{How, Plan, Policy};
use crate::ir::Node;

/// At most this many kernels in one group.
pub const MAX_MEMBERS: usize = 8;

/// The nodes [`reaches`] may visit while one plan's kernels are chained and grouped ([`reset_reach_budget`]): past
/// it, every pair counts as dependent, so no more kernels join a chain or a group. Chaining asks for many pairs, and on
/// an unrolled 784-step recurrence (60k nodes, 11k kernels) the walks took minutes; normal plans stay far below.
const REACH_BUDGET: u64 = 20_000_000;

thread_local! {
    /// [`reaches`]' state on this thread: the number of the current walk, each node's last walk (marks, not a set:
    /// hashing the visits was most of the time), and the visits left of [`REACH_BUDGET`].
    static SEEN: std::cell::RefCell<(u32, Vec<u32>, u64)> = const { std::cell::RefCell::new((0, Vec::new(), 0)) };
}

/// Gives [`reaches`] its whole budget again, before a plan's kernels are chained and grouped (on this thread).
pub(super) fn reset_reach_budget() {
    SEEN.with(|cell| cell.borrow_mut().2 = REACH_BUDGET);
}

/// Whether `to` is reachable from `from` through children (nodes have smaller ids than their users, so the walk
/// stops below `to`); conservatively true past a budget of visited nodes, per walk and per plan.
pub(super) fn reaches(plan: &Plan, from: Id, to: Id) -> bool {
    SEEN.with(|cell| {
        let (walk, seen, left) = &mut *cell.borrow_mut();
        if *left == 0 {
            return true;
        }
        if seen.len() < plan.term.as_ref().len() {
            seen.resize(plan.term.as_ref().len(), 0);
        }
        *walk = walk.wrapping_add(1);
        if *walk == 0 {
            seen.iter_mut().for_each(|s| *s = 0);
            *walk = 1;
        }
        let mut visited = 0usize;
        let mut stack = vec![from];
        while let Some(c) = stack.pop() {
            if c == to {
                return true;
            }
            let i = usize::from(c);
            if c < to || seen[i] == *walk {
                continue;
            }
            seen[i] = *walk;
            visited += 1;
            *left = left.saturating_sub(1);
            if visited > 50_000 || *left == 0 {
                return true;
            }
            stack.extend(plan.term[c].children().iter().copied());
        }
        false
    })
}

/// [`reaches`], where a kernel of a group other than `own` also leads to that group's other members (launching one
/// launches all, after the inputs of each), and an in-place write to the readers of its buffer that run before it
/// (`Plan::before`).
fn reaches_grouped(plan: &Plan, from: Id, to: Id, own: usize) -> bool {
    let mut seen = hashbrown::HashSet::new();
    let mut stack = vec![from];
    while let Some(c) = stack.pop() {
        if c == to {
            return true;
        }
        if !seen.insert(c) {
            continue;
        }
        if seen.len() > 50_000 {
            return true;
        }
        // Any kernel, in-place ones included (fuzz seed 178147: `k7`, a write into `c` in place, was grouped with
        // `k0`; `k7` needed the earlier in-place write `k6` of `c`, grouped with a reader of `k0`'s result, so the
        // launch of `k7`'s group ran `k0` twice).
        if let How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) = plan.how[usize::from(c)] {
            if let Some(g) = plan.group_of.get(k).copied().flatten().filter(|&g| g != own) {
                stack.extend(plan.groups[g].iter().map(|&m| plan.launches[m].node));
            }
        }
        // An in-place write runs after the readers of the buffer it overwrites (fuzz seed 214204: the group of
        // `d.clamp_` and a later write into `a` needed the in-place `a.view(9).add_`, which had to wait for the
        // `cat` that read `a` before it and needed `d.clamp_`: the `cat` read `a` already written).
        if let Some(readers) = plan.before.get(&c) {
            stack.extend(readers.iter().copied());
        }
        // Below `to`, children cannot lead to it (they have smaller ids), but another group's member may.
        if c > to {
            stack.extend(plan.term[c].children().iter().copied());
        }
    }
    false
}

/// Dissolves the groups (chained or sibling) whose members need one another through other groups: each group was
/// formed with its members independent, but launching a group computes all its members, so a member whose inputs
/// need a group holding a kernel that needs another member would run that member twice (vLLM's grouped_topk: `k0`
/// chained with `k16`, whose inputs needed the chain of `k4` and `k14`, and `k4` needed `k0`). Groups dissolved
/// earlier no longer count for the later ones.
pub(super) fn drop_entangled_groups(plan: &mut Plan) {
    let mut keep = vec![true; plan.groups.len()];
    for g in 0..plan.groups.len() {
        let nodes: Vec<Id> = plan.groups[g].iter().map(|&m| plan.launches[m].node).collect();
        // What the host computes before the launch: each member's inputs other than the group's own (a chain's
        // later member reads an earlier one in the launch), its bounds checks, its parameters, and the buffer an
        // in-place member writes into (fuzz seed 168522: `r = v.sum(0)` then `r.zero_()` chained with the write
        // of `v` that the sum reads: the sum ran before that write).
        let before: Vec<Id> = plan.groups[g]
            .iter()
            .flat_map(|&m| {
                let l = &plan.launches[m];
                let base = match plan.how[usize::from(l.node)] {
                    How::InPlace(_) | How::CopyInPlace(_) => super::exec::written_base(&plan.term, l.node),
                    _ => None,
                };
                l.args
                    .iter()
                    .copied()
                    .chain(l.checks.iter().map(|c| c.node))
                    .chain(l.params.iter().copied())
                    .chain(base)
            })
            .filter(|x| !nodes.contains(x))
            .collect();
        let entangled = before.iter().any(|&x| nodes.iter().any(|&b| reaches_grouped(plan, x, b, g)));
        if entangled {
            keep[g] = false;
            for &m in &plan.groups[g] {
                plan.group_of[m] = None;
            }
        }
    }
    if keep.iter().all(|&k| k) {
        return;
    }
    let (groups, chained) = (std::mem::take(&mut plan.groups), std::mem::take(&mut plan.chained));
    for ((members, c), _) in groups.into_iter().zip(chained).zip(&keep).filter(|(_, &k)| k) {
        let g = plan.groups.len();
        for &m in &members {
            plan.group_of[m] = Some(g);
        }
        plan.groups.push(members);
        plan.chained.push(c);
    }
}

/// Per node, the scope that computes it whenever it runs: the root, a loop body, or a while loop (its condition
/// and body); `None` for nodes reached only through a branch's arms.
pub(super) fn scopes(plan: &Plan) -> Vec<Option<Id>> {
    scopes_of(&plan.term)
}

/// [`scopes`] of a term.
pub(super) fn scopes_of(term: &crate::ir::Term) -> Vec<Option<Id>> {
    let mut scope = vec![None; term.as_ref().len()];
    let mut stack = vec![(term.root(), term.root())];
    while let Some((n, s)) = stack.pop() {
        if scope[usize::from(n)].is_some() {
            continue;
        }
        scope[usize::from(n)] = Some(s);
        match &term[n] {
            Node::If([c, _, _]) => stack.push((*c, s)),
            Node::Loop([a, b, st, init, body]) => {
                stack.extend([(*a, s), (*b, s), (*st, s), (*init, s), (*body, *body)]);
            }
            Node::While([init, cond, body]) => stack.extend([(*init, s), (*cond, n), (*body, *body)]),
            node => stack.extend(node.children().iter().map(|&c| (c, s))),
        }
    }
    scope
}

/// Forms the groups of `plan` (ours only: the baselines launch what eager and the unfunctionalized fusers do).
pub(super) fn group_siblings(plan: &mut Plan) {
    if plan.policy != Policy::Fused {
        return;
    }
    let pinned: hashbrown::HashSet<Id> =
        plan.before.iter().flat_map(|(k, v)| std::iter::once(*k).chain(v.iter().copied())).collect();
    let scope = scopes(plan);
    for l in 0..plan.launches.len() {
        let consumer = plan.launches[l].node;
        let mut members: Vec<usize> = Vec::new();
        for &a in &plan.launches[l].args {
            let How::Kernel(k) = plan.how[usize::from(a)] else { continue };
            if members.len() == MAX_MEMBERS
                || members.contains(&k)
                || plan.group_of[k].is_some()
                || pinned.contains(&a)
                || plan.dependent[usize::from(a)] != plan.dependent[usize::from(consumer)]
                || scope[usize::from(a)].is_none()
                || members.first().is_some_and(|&m| scope[usize::from(plan.launches[m].node)] != scope[usize::from(a)])
            {
                continue;
            }
            let independent = members.iter().all(|&m| {
                let b = plan.launches[m].node;
                !reaches(plan, a, b) && !reaches(plan, b, a)
            });
            if independent {
                members.push(k);
            }
        }
        if members.len() >= 2 {
            let g = plan.groups.len();
            for &m in &members {
                plan.group_of[m] = Some(g);
            }
            plan.groups.push(members);
            plan.chained.push(false);
        }
    }
}
