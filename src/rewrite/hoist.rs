//! The Rust rewrite `loops/hoist`: loop fission of a counted loop into the part of its body that does not read the
//! carried state, computed before the loop for all iterations at once, and the recurrence, which reads one row of it.
//!
//! A loop qualifies when its bounds are literals and its step is 1. In its body (not in nested loops, nor in the arms
//! of an `if`, which may not run), a maximal subterm that uses the loop variable `(iter 0)` but not the carried state
//! `(carried 0 j)` (nor, as the term is pure, anything computed from it: an in-place write onto the state is an
//! `assign` on a `carried`) is a candidate. One that does real work (a matmul, a reduction, a transcendental
//! function) and batches (see [`super::batch`]: views affine in the loop variable, elementwise ops, reductions,
//! matmuls) becomes one value `H` of shape `[n] + shape` over the `n` iterations, and the body reads row
//! `(iter 0) - start` of it through an `access`. Where `H` uses no loop at all, the body reads it directly and the
//! plan computes it once, before the loop (a node that depends on no loop is materialized outside them all). Where it
//! reads an enclosing loop (a layer loop around a time loop), it enters the loop as extra carried state passed through
//! unchanged, so it is computed once per iteration of the enclosing loop, before this one. Subterms that use neither
//! the loop variable nor the state are left as they are: the plan computes them once already.
//!
//! Whether the result is kept is the cost model's decision (`saturate::optimize_for` plans both terms).

use egg::{Id, Language};
use hashbrown::{HashMap, HashSet};

use super::batch::{lit, Batch, B};
use crate::ir::{Builder, Node, OpName, Term};
use crate::tensor::DType;

/// Rewrites every qualifying loop of `term`, innermost first; returns the new term and how many subterms were
/// hoisted out of loops.
pub fn hoist_loops(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> (Term, usize) {
    let mut h = Hoister { src: term, out: Builder::default(), memo: HashMap::new(), count: 0, inputs };
    let root = h.rebuild(term.root());
    (h.out.extract(root), h.count)
}

struct Hoister<'a> {
    src: &'a Term,
    out: Builder,
    memo: HashMap<Id, Id>,
    count: usize,
    inputs: &'a [(String, DType, Vec<usize>)],
}

/// Does `op` do enough work per element that computing it for all iterations in one kernel is worth a buffer?
fn expensive(op: OpName) -> bool {
    use OpName::*;
    matches!(
        op,
        Matmul
            | Sum
            | Mean
            | Prod
            | Amax
            | Amin
            | MaxVal
            | MinVal
            | Softmax
            | LogSoftmax
            | Cumsum
            | Exp
            | Log
            | Log1p
            | Expm1
            | Sigmoid
            | Tanh
            | Sin
            | Cos
            | Erf
            | Pow
            | Atan2
    )
}

impl Hoister<'_> {
    fn rebuild(&mut self, id: Id) -> Id {
        if let Some(&n) = self.memo.get(&id) {
            return n;
        }
        let node = self.src[id].clone().map_children(|c| self.rebuild(c));
        let new = match &node {
            Node::Loop(ch) => match self.hoist(*ch) {
                Some((t, n)) => {
                    self.count += n;
                    t
                }
                None => self.out.add(node),
            },
            _ => self.out.add(node),
        };
        self.memo.insert(id, new);
        new
    }

    /// The loop `ch` with its state-independent work hoisted, and how many subterms moved; None if nothing moved.
    fn hoist(&mut self, ch: [Id; 5]) -> Option<(Id, usize)> {
        let [start, _, step, init, body] = ch;
        let b = &self.out;
        // The row of iteration i is i - start: with another step, the row index is not affine in the loop variable.
        if lit(b, step)? != 1 {
            return None;
        }
        let start_v = lit(b, start)?;
        let Node::Tuple(items) = b.node(body) else { return None };
        let items = items.to_vec();
        let mut batch = Batch::try_new(&mut self.out, ch, self.inputs)?;
        let mut seen = HashSet::new();
        let mut found = Vec::new();
        for &item in &items {
            collect(&mut batch, item, &mut seen, &mut found);
        }
        drop(batch);
        if found.is_empty() {
            return None;
        }
        let mut repl = HashMap::new();
        let mut up = HashMap::new();
        // A batched value that reads an enclosing loop's variable or state would be computed in every iteration of
        // this loop if read from its body (the plan computes once only what depends on no loop at all): it enters
        // the loop as extra state instead, passed through unchanged.
        let mut extra = Vec::new();
        for (c, h, shape) in &found {
            let h = if free_refs(&self.out, *h, 0, &mut HashMap::new()) {
                let (d, j) = (self.out.int(0), self.out.int((items.len() + extra.len()) as i64));
                extra.push(*h);
                self.out.add(Node::Carried([d, j]))
            } else {
                shift_up(&mut self.out, *h, 0, &mut up)
            };
            let read = row(&mut self.out, h, shape, start_v);
            repl.insert(*c, read);
        }
        let mut memo = HashMap::new();
        let mut body = subst(&mut self.out, body, &repl, &mut memo);
        let mut init = init;
        if !extra.is_empty() {
            let k = items.len();
            let mut inits: Vec<Id> = match self.out.node(init) {
                Node::Tuple(xs) if xs.len() == k => xs.to_vec(),
                _ => (0..k)
                    .map(|j| {
                        let j = self.out.int(j as i64);
                        self.out.add(Node::Get([init, j]))
                    })
                    .collect(),
            };
            inits.extend(&extra);
            let Node::Tuple(ys) = self.out.node(body).clone() else { return None };
            let mut ys = ys.to_vec();
            for j in k..k + extra.len() {
                let (d, j) = (self.out.int(0), self.out.int(j as i64));
                ys.push(self.out.add(Node::Carried([d, j])));
            }
            init = self.out.add(Node::Tuple(inits.into()));
            body = self.out.add(Node::Tuple(ys.into()));
        }
        let [a, e, s, _, _] = ch;
        Some((self.out.add(Node::Loop([a, e, s, init, body])), found.len()))
    }
}

/// Finds the maximal subterms below `id` that use the loop but not its state and are worth hoisting, batched:
/// (subterm, batched value outside the loop, per-iteration shape).
fn collect(b: &mut Batch, id: Id, seen: &mut HashSet<Id>, found: &mut Vec<(Id, Id, Vec<usize>)>) {
    if !seen.insert(id) {
        return;
    }
    let node = b.b.node(id).clone();
    // A nested loop's body sees this loop one level up; an `if` arm may not run (it might raise where unguarded).
    if matches!(node, Node::Loop(_) | Node::While(_) | Node::If(_)) || !b.uses_loop(id, 0) {
        return;
    }
    if !b.uses_state(id, 0) && worth(b.b, id, &mut HashMap::new()) {
        if let Some(B::Bat(h, shape)) = b.batch(id) {
            found.push((id, h, shape));
            return;
        }
    }
    for c in node.children().to_vec() {
        collect(b, c, seen, found);
    }
}

/// Whether the tensor term `id` does expensive work in this loop level.
fn worth(b: &Builder, id: Id, memo: &mut HashMap<Id, bool>) -> bool {
    if let Some(&r) = memo.get(&id) {
        return r;
    }
    let r = match b.node(id) {
        Node::Loop(_) | Node::While(_) | Node::If(_) => false,
        Node::Op(op, _) if expensive(*op) => true,
        other => other.children().to_vec().into_iter().any(|c| worth(b, c, memo)),
    };
    memo.insert(id, r);
    r
}

/// Row `(iter 0) - start` of `h` (shape `[n] + shape`, read as contiguous), as a read of per-iteration shape.
fn row(b: &mut Builder, h: Id, shape: &[usize], start: i64) -> Id {
    let view = row_view(b, shape, start);
    b.add(Node::Access([h, view]))
}

/// The view of row `(iter 0) - start` of a contiguous buffer `[n] + shape`.
pub(super) fn row_view(b: &mut Builder, shape: &[usize], start: i64) -> Id {
    let mut strides = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1] as i64;
    }
    let numel: i64 = shape.iter().map(|&d| d as i64).product();
    let zero = b.int(0);
    let mut off = b.add(Node::Iter(zero));
    if start != 0 {
        let s = b.int(start);
        off = b.op(OpName::ISub, vec![off, s]);
    }
    if numel != 1 {
        let k = b.int(numel);
        off = b.op(OpName::IMul, vec![k, off]);
    }
    let dims: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
    let (s, st) = (b.ints(&dims), b.ints(&strides));
    b.add(Node::View([s, st, off]))
}

/// Whether `id` (seen `d` loops down) refers to a loop enclosing it.
fn free_refs(b: &Builder, id: Id, d: i64, memo: &mut HashMap<(Id, i64), bool>) -> bool {
    if let Some(&r) = memo.get(&(id, d)) {
        return r;
    }
    let r = match b.node(id) {
        Node::Iter(x) | Node::Carried([x, _]) => lit(b, *x).is_none_or(|x| x >= d),
        Node::Loop([a, e, s, init, body]) => {
            [*a, *e, *s, *init].iter().any(|&c| free_refs(b, c, d, memo)) || free_refs(b, *body, d + 1, memo)
        }
        Node::While([init, cond, body]) => {
            free_refs(b, *init, d, memo) || free_refs(b, *cond, d + 1, memo) || free_refs(b, *body, d + 1, memo)
        }
        other => other.children().to_vec().into_iter().any(|c| free_refs(b, c, d, memo)),
    };
    memo.insert((id, d), r);
    r
}

/// `id`, a term of the context outside a loop, rewritten for its body: references to enclosing loops (seen `d`
/// loops down) rise by one level.
pub(super) fn shift_up(b: &mut Builder, id: Id, d: i64, memo: &mut HashMap<(Id, i64), Id>) -> Id {
    shift(b, id, d, 1, memo)
}

/// `id` with every reference to a loop at level `d` or above (seen `d` loops down) moved `delta` levels: +1 takes a
/// term of a loop's context into its body, -1 takes a term of a body that does not use its own loop (no reference at
/// level `d` itself) out of it.
pub(super) fn shift(b: &mut Builder, id: Id, d: i64, delta: i64, memo: &mut HashMap<(Id, i64), Id>) -> Id {
    if let Some(&r) = memo.get(&(id, d)) {
        return r;
    }
    let node = b.node(id).clone();
    let r = match &node {
        Node::Iter(x) | Node::Carried([x, _]) if lit(b, *x).is_some_and(|x| x >= d) => {
            let level = b.int(lit(b, *x).unwrap() + delta);
            match node {
                Node::Iter(_) => b.add(Node::Iter(level)),
                Node::Carried([_, j]) => b.add(Node::Carried([level, j])),
                _ => unreachable!(),
            }
        }
        Node::Loop([a, e, s, init, body]) => {
            let ch = [shift(b, *a, d, delta, memo), shift(b, *e, d, delta, memo), shift(b, *s, d, delta, memo)];
            let init = shift(b, *init, d, delta, memo);
            let body = shift(b, *body, d + 1, delta, memo);
            b.add(Node::Loop([ch[0], ch[1], ch[2], init, body]))
        }
        Node::While([init, cond, body]) => {
            let init = shift(b, *init, d, delta, memo);
            let (cond, body) = (shift(b, *cond, d + 1, delta, memo), shift(b, *body, d + 1, delta, memo));
            b.add(Node::While([init, cond, body]))
        }
        _ if node.children().is_empty() => id,
        _ => {
            let n = node.map_children(|c| shift(b, c, d, delta, memo));
            b.add(n)
        }
    };
    memo.insert((id, d), r);
    r
}

/// The body `id` with the hoisted subterms replaced by their rows; nested loops are left alone (the same node there
/// means something else: its `iter 0` is the nested loop's variable).
fn subst(b: &mut Builder, id: Id, repl: &HashMap<Id, Id>, memo: &mut HashMap<Id, Id>) -> Id {
    if let Some(&r) = repl.get(&id).or_else(|| memo.get(&id)) {
        return r;
    }
    let node = b.node(id).clone();
    let r = if matches!(node, Node::Loop(_) | Node::While(_)) || node.children().is_empty() {
        id
    } else {
        let n = node.map_children(|c| subst(b, c, repl, memo));
        b.add(n)
    };
    memo.insert(id, r);
    r
}
