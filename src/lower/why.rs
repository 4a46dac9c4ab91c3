//! Why a node is a buffer of its own rather than fused into its readers: the planner records the reason when it
//! materializes a node ([`Why`]), and `explain` prints it for every kernel of our plan (issue #20's "why not": a
//! cost-model choice with both figures, or the constraint that forces the boundary).

use egg::{Id, Language};

use super::plan::{How, Planner};
use crate::ir::{Node, OpName};

/// What one transcendental op (exp, log, tanh, sigmoid, erf, pow, sin, cos...) costs in arithmetic ops when the
/// planner weighs recomputing a value against storing it: about what a vectorized f32 `exp` costs against an add.
const TRANSCENDENTAL_OPS: i64 = 8;

fn transcendental(op: OpName) -> bool {
    op.transcendental()
}

/// Why the planner made a node a buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Why {
    Reduction,
    Scatter,
    /// Read by the host: a program output, loop state, a condition, an integer, a host fallback's operand.
    Host,
    /// Read by this many kernels; recomputing it in each costs (first) more than storing it once (second), seconds.
    Shared(usize, f64, f64),
    /// A shared write through a view into a buffer, planned stored so that it can go in place.
    StoredWrite,
    Hoisted,
    Policy,
    MatmulOperand,
    Gathered,
    TooBig,
}

impl Why {
    /// The reason for node `id`, in words.
    fn text(self, p: &Planner, id: Id) -> String {
        match self {
            Why::Reduction => {
                let users = &p.users[usize::from(id)];
                let shape = p.tensor(id).map(|(_, s)| s);
                let reader = match users.as_slice() {
                    [u] if p.tensor(*u).map(|(_, s)| s) != shape => "its one reader has another shape",
                    [_] => "its one reader is not an elementwise kernel reading it at its own point",
                    _ => "it has several readers",
                };
                format!("a reduction, not fused as its reader's prologue: {reader}")
            }
            Why::Scatter => "a write through index tensors: a scatter kernel".into(),
            Why::Host => "read by the host (an output, loop state, a condition, an integer, a host fallback)".into(),
            Why::Shared(n, r, s) => format!(
                "read by {n} kernels: recomputing it in each costs {:.2} us, storing it once {:.2} us (planning cost)",
                r * 1e6,
                s * 1e6
            ),
            Why::StoredWrite => {
                "a write through a view read by several kernels: stored, so it goes in place (planned both ways, \
                 this priced cheaper)"
                    .into()
            }
            Why::Hoisted => "computed once before the loop that reads it".into(),
            Why::Policy => "the baseline's policy (a kernel per op)".into(),
            Why::MatmulOperand => "a matmul operand that is computed, not read (a matmul reads each element many \
                                   times)"
                .into(),
            Why::Gathered => "read at run-time positions (a gather's table or an index tensor)".into(),
            Why::TooBig => "too large an expression to recompute inside its readers".into(),
        }
    }
}

impl Planner<'_> {
    /// Makes `id` a kernel for `why` (the first reason given is kept).
    pub(super) fn materialize(&mut self, id: Id, why: Why) -> How<()> {
        let w = &mut self.why[usize::from(id)];
        if w.is_none() {
            *w = Some(why);
        }
        How::Kernel(())
    }

    /// What computing a value inline in its readers costs against one kernel that stores it (a launch, a write
    /// and a read per user), by the planner's cost profile, as `(recompute, store)` seconds; `None` where no reader
    /// recomputes more than the value's own elements. Inline, each reader computes it once per element
    /// it reads: several readers each pay for all of it, and a reader that broadcasts it (a larger shape) pays once
    /// per element of its own. Transcendental ops count as [`TRANSCENDENTAL_OPS`] ops.
    pub(super) fn recompute_vs_store(&self, id: Id) -> Option<(f64, f64)> {
        let users = &self.users[usize::from(id)];
        let p = &self.profile;
        let (d, shape) = self.tensor(id).expect("a tensor");
        let n = shape.iter().product::<usize>() as f64;
        // A write of it through a view (`state[j] = h`) reads it at the view's elements, not the whole buffer's.
        // A cat reads each of its pieces once per element, in its own slice of the result.
        let reads = |u: Id| match &self.term[u] {
            Node::Assign([x, v, y]) if *y == id && *x != id => self.view_parts(*v).map(|(s, _, _)| s.iter().product()),
            Node::Op(OpName::Cat, args) if args[1..].contains(&id) => {
                Some(args[1..].iter().filter(|&&a| a == id).count() * shape.iter().product::<usize>())
            }
            _ => self.tensor(u).map(|(_, s)| s.iter().product::<usize>()),
        };
        // A gather reads its table at its own elements only (a max's values at its indices).
        let points: f64 = users
            .iter()
            .map(|&u| match &self.term[u] {
                Node::Op(OpName::Gather, a) if a[0] == id && a[2] != id => reads(u).map_or(n, |s| s as f64),
                _ => reads(u).map_or(n, |s| (s as f64).max(n)),
            })
            .sum();
        if points <= n {
            return None;
        }
        // The ops of one element, inline, as (with `by_piece`, whole): a cat's element is one of its pieces' (the
        // C backend's pieces compute only that one), so `by_piece` weighs each piece by the share of elements it
        // computes; whole, every piece counts.
        fn count(pl: &Planner, id: Id, budget: &mut i64, heavy: &mut bool) -> (f64, f64) {
            *budget -= 1;
            let own = match pl.term[id] {
                Node::Op(op, _) if transcendental(op) => {
                    *heavy = true;
                    TRANSCENDENTAL_OPS as f64
                }
                _ => 1.0,
            };
            if *budget < 0 || pl.how[usize::from(id)] != How::Inline {
                return (own, own);
            }
            let numel = |x: Id| pl.tensor(x).map_or(1.0, |(_, s)| s.iter().product::<usize>() as f64);
            let whole = numel(id).max(1.0);
            let (mut by_piece, mut all) = (own, own);
            for (j, &c) in pl.term[id].children().iter().enumerate() {
                let (p, w) = count(pl, c, budget, heavy);
                let share = match &pl.term[id] {
                    Node::Op(OpName::Cat, args) if j > 0 && args.len() > 2 => numel(c) / whole,
                    _ => 1.0,
                };
                by_piece += share * p;
                all += w;
            }
            (by_piece, all)
        }
        let mut heavy = false;
        let (by_piece, all) = count(self, id, &mut 1000, &mut heavy);
        let ops = if self.by_piece { by_piece } else { all };
        // Broadcasting readers weigh in only for transcendental work: cheap arithmetic recomputed per element
        // costs less than the profile's figures say (it vectorizes, and the loads hit the cache).
        let points = if heavy { points } else { users.len() as f64 * n };
        if points <= n {
            return None;
        }
        let store = p.launch_s + (1 + users.len()) as f64 * n * d.size() as f64 / p.bytes_per_s;
        let recompute = (points - n) * ops / p.ops_per_s;
        // Where pricing cats by their pieces decides this value the other way, the plan is also made without it.
        if self.by_piece && ((points - n) * all / p.ops_per_s > store) != (recompute > store) {
            self.priced_by_piece.set(true);
        }
        Some((recompute, store))
    }
}

/// Why kernel node `id` is a buffer: the planner's recorded reason, else what its kind or its readers require.
pub(super) fn kernel_reason(p: &Planner, id: Id) -> String {
    if let Some(w) = p.why[usize::from(id)] {
        return w.text(p, id);
    }
    let users = &p.users[usize::from(id)];
    match &p.term[id] {
        Node::Assign(_) => "a write through a view: in place where its base is dead, else into a copy".into(),
        _ if users.iter().any(
            |&u| matches!(&p.term[u], Node::Op(OpName::IndexPut | OpName::Scatter, a) if a.first() == Some(&id)),
        ) =>
        {
            "the buffer a scatter kernel writes into".into()
        }
        _ if users.iter().any(|&u| matches!(&p.term[u], Node::Assign([x, _, _]) if *x == id)) => {
            "the buffer a write through a view goes into".into()
        }
        _ => "read as a buffer by its readers".into(),
    }
}
