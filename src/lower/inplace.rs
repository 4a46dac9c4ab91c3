//! The planner's in-place decisions: whether a buffer is dead once a write through a view of it runs (so the write
//! goes in place, over the view's elements only), which readers must run before that write, and how a fused read of
//! the buffer relates to the written view.
//!
//! A write goes in place where every other reader of its base is a materialized node the write waits for (or feeds
//! only such nodes), a read fused into the writing kernel itself reads only what each point writes or what no point
//! writes, no loop nested in the base's loop body may read it after the write, and a write in a loop body does not go
//! into a buffer computed once for every iteration. Outside loops, a reader the write does not wait for is run first
//! ([`Planner::run_first`]) where none of what it feeds needs the write, and it is not a node that only an `if`'s arm
//! computes.

use egg::{Id, Language};

use super::fuse::KernelBuilder;
use super::group::scopes_of;
use super::plan::{lit, How, Planner};
use crate::ir::{Node, OpName};

impl Planner<'_> {
    /// Whether buffer `x` is dead once `assign` runs: x is a buffer this plan owns, and every other reader of it
    /// is a materialized node that `assign` waits for (or feeds only such nodes).
    pub(super) fn dead_after(&self, x: Id, assign: Id) -> Option<Vec<Id>> {
        if !matches!(self.how[usize::from(x)], How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_))
            && !matches!(self.term[x], Node::Carried(_) | Node::Input(_))
        {
            return None;
        }
        // A buffer that no loop's state reaches is computed once and kept for every iteration (the executor's global
        // memo), so a write in a loop body must not go into it: the next iteration reads it again (fuzz seed 328871:
        // the eager plan accumulated into a loop-invariant `zeros` across iterations).
        if self.dependent[usize::from(assign)] && !self.dependent[usize::from(x)] {
            return None;
        }
        let mut deps = vec![false; self.term.as_ref().len()];
        let mut stack: Vec<Id> = self.term[assign].children().to_vec();
        while let Some(c) = stack.pop() {
            if !std::mem::replace(&mut deps[usize::from(c)], true) {
                match self.term[c] {
                    // Loop bodies and `if` arms are not done before (seed 215892: an arm's copy read a written buffer).
                    Node::Loop(_) | Node::While(_) => {}
                    Node::If([cond, _, _]) => stack.push(cond),
                    _ => stack.extend(self.term[c].children().iter().copied()),
                }
            }
        }
        // A loop nested in x's loop body reads x as `(carried 1 j)` (deeper: `carried 2 j`, ...), another node than
        // x, so it is not among x's users: the write must not go in place while such a loop may run after it.
        if let Node::Carried([_, j]) = self.term[x] {
            let j = lit(&self.term, j);
            let nested_reader = (0..self.term.as_ref().len()).map(Id::from).any(|c| {
                matches!(self.term[c], Node::Loop(_) | Node::While(_))
                    && !deps[usize::from(c)]
                    && self.reads_outer_state(c, j)
            });
            (!nested_reader).then_some(())?;
        }
        // (`safe` and `reaches` remember what they found per node and depth: the paths through a graph's users
        // multiply, and held-out round 37's attention decoder took minutes walking each again)
        type Memo = hashbrown::HashMap<(Id, usize), bool>;
        fn safe(p: &Planner, c: Id, assign: Id, deps: &[bool], depth: usize, memo: &mut Memo) -> bool {
            if c == assign || !deps[usize::from(c)] || depth > 64 {
                return false;
            }
            if let Some(&r) = memo.get(&(c, depth)) {
                return r;
            }
            let r = match p.how[usize::from(c)] {
                How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_) | How::Fallback => true,
                How::Inline => p.users[usize::from(c)].iter().all(|&u| safe(p, u, assign, deps, depth + 1, memo)),
                _ => matches!(p.term[c], Node::Op(OpName::ToInt, _)),
            };
            memo.insert((c, depth), r);
            r
        }
        // A read of x fused into this very kernel is safe where each point reads only what it writes (the same
        // view, through elementwise ops of the view's shape) or what no point writes (a disjoint view).
        // A scatter (no view) takes no fused read of x as safe.
        let w = match self.term[assign] {
            Node::Assign([_, w, _]) => Some(w),
            _ => None,
        };
        let wshape = w.and_then(|w| self.view_parts(w)).map(|(s, _, _)| s);
        #[allow(clippy::too_many_arguments)]
        fn reaches(
            p: &Planner,
            c: Id,
            assign: Id,
            deps: &[bool],
            same: bool,
            ws: &Option<Vec<usize>>,
            depth: usize,
            memo: &mut (Memo, Memo),
        ) -> bool {
            if let Some(&r) = memo.0.get(&(c, depth)) {
                return r;
            }
            let r = p.users[usize::from(c)].iter().all(|&v| {
                if v == assign {
                    return true;
                }
                let elementwise = matches!(&p.term[v], Node::Op(op, _) if op.is_elementwise());
                let shape_ok = p.tensor(v).map(|(_, s)| s) == *ws;
                if depth < 64
                    && deps[usize::from(v)]
                    && p.how[usize::from(v)] == How::Inline
                    && (!same || (elementwise && shape_ok))
                {
                    reaches(p, v, assign, deps, same, ws, depth + 1, memo)
                } else {
                    safe(p, v, assign, deps, depth + 1, &mut memo.1)
                }
            });
            memo.0.insert((c, depth), r);
            r
        }
        let mut first = Vec::new();
        // (one memo per `same`: `reaches` follows other users for a read of the same view than of a disjoint one)
        let mut memos: [(Memo, Memo); 2] = Default::default();
        let mut safe_memo = Memo::new();
        let ok = self.users[usize::from(x)].iter().all(|&u| {
            if u == assign {
                return true;
            }
            if let (Node::Access([_, r]), How::Inline, Some(w)) = (&self.term[u], &self.how[usize::from(u)], w) {
                match self.relation(*r, w) {
                    Some(same) if deps[usize::from(u)] => {
                        return reaches(self, u, assign, &deps, same, &wshape, 0, &mut memos[usize::from(same)]);
                    }
                    _ => {}
                }
            }
            safe(self, u, assign, &deps, 0, &mut safe_memo) || self.run_first(u, x, assign, &mut first)
        });
        ok.then_some(first)
    }

    /// Whether the body of loop `l` reads the state of a loop around it (a `(carried K j)` with K at least 1 more
    /// than the loops between; `j` None: any slot). Conservative: any such `carried` in the body counts.
    fn reads_outer_state(&self, l: Id, j: Option<i64>) -> bool {
        let mut stack: Vec<Id> = self.term[l].children().to_vec();
        let mut seen = hashbrown::HashSet::new();
        while let Some(c) = stack.pop() {
            if !seen.insert(c) {
                continue;
            }
            if let Node::Carried([d, k]) = self.term[c] {
                let (d, k) = (lit(&self.term, d), lit(&self.term, k));
                if d.is_none_or(|d| d >= 1) && (j.is_none() || k.is_none() || k == j) {
                    return true;
                }
            }
            stack.extend(self.term[c].children().iter().copied());
        }
        false
    }

    /// Outside loops, a reader of `x` that the write does not wait for can be run before it: the materialized
    /// nodes that `u` feeds (through fused nodes) are added to `first`, if none of them needs the write itself.
    fn run_first(&self, u: Id, x: Id, assign: Id, first: &mut Vec<Id>) -> bool {
        if self.dependent[usize::from(assign)] {
            return false;
        }
        let mut frontier = Vec::new();
        let mut stack = vec![u];
        let mut seen = hashbrown::HashSet::new();
        let arm = self.arm_only.get_or_init(|| scopes_of(self.term).iter().map(Option::is_none).collect());
        while let Some(c) = stack.pop() {
            if c == assign || self.dependent[usize::from(c)] || arm[usize::from(c)] || seen.len() > 10_000 {
                return false;
            }
            if !seen.insert(c) {
                continue;
            }
            match self.how[usize::from(c)] {
                How::Inline => stack.extend(self.users[usize::from(c)].iter().copied()),
                How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_) | How::Fallback => {
                    if matches!(self.term[c], Node::Assign([b, _, _]) if b == x) {
                        return false;
                    }
                    frontier.push(c);
                }
                _ => return false,
            }
        }
        // None of them may depend on the write.
        for &f in &frontier {
            let mut stack = self.term[f].children().to_vec();
            let mut seen = hashbrown::HashSet::new();
            while let Some(c) = stack.pop() {
                if c == assign {
                    return false;
                }
                if seen.insert(c) {
                    stack.extend(self.term[c].children().iter().copied());
                }
            }
        }
        first.extend(frontier);
        true
    }

    /// How view `r` relates to view `w` (literal shapes and strides, offsets differing by a constant): `Some(true)`
    /// when they are the same view, `Some(false)` when they share no element, `None` otherwise.
    fn relation(&self, r: Id, w: Id) -> Option<bool> {
        let (rs, rst, roff) = self.view_parts(r)?;
        let (ws, wst, woff) = self.view_parts(w)?;
        let mut kb = KernelBuilder::default();
        let d = self.int_form(&mut kb, roff).add(&self.int_form(&mut kb, woff).scale(-1)).as_const()?;
        if rs == ws && rst == wst && d == 0 {
            return Some(true);
        }
        let (rt, wt): (Vec<isize>, Vec<isize>) =
            (rst.iter().map(|&x| x as isize).collect(), wst.iter().map(|&x| x as isize).collect());
        crate::ir::geometry::disjoint(&ws, &wt, &rs, &rt, d).then_some(false)
    }
}
