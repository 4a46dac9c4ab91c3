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

/// Whether `to` is reachable from `from` through children (nodes have smaller ids than their users, so the walk
/// stops below `to`); conservatively true past a budget of visited nodes.
pub(super) fn reaches(plan: &Plan, from: Id, to: Id) -> bool {
    let mut seen = hashbrown::HashSet::new();
    let mut stack = vec![from];
    while let Some(c) = stack.pop() {
        if c == to {
            return true;
        }
        if c < to || !seen.insert(c) {
            continue;
        }
        if seen.len() > 50_000 {
            return true;
        }
        stack.extend(plan.term[c].children().iter().copied());
    }
    false
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
