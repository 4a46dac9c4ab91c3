//! The Rust rewrite `loops/vectorize`: a counted loop whose iterations are independent becomes slice-wide operations
//! over all of its iterations at once, with the iteration as a new leading dim of every view.
//!
//! A loop qualifies when its bounds are literals and its body yields, for each carried value, either that value
//! unchanged or a chain of `assign`s onto it whose values read the carried state only through `access`es. Views
//! must have offsets affine in the loop variable. Then, with every element a view touches enumerated per iteration
//! (exactly, up to [`MAX_ELEMENTS`] elements):
//! - no element is written by two different iterations (so the order of the writes does not matter), and
//! - no element is read by an iteration after an earlier iteration wrote it (so every read sees the value from
//!   before the loop: a prefix sum `y[i] += y[i - 1]` stays a loop).
//!
//! The batched form reads the state from before the loop through views with a leading dim of one entry per
//! iteration, and writes each chain as one `assign` per link. Elementwise ops, casts, clamps and reductions (dims
//! shifted by one) batch; anything else in the body keeps the loop. References to enclosing loops shift down by one,
//! as the loop level disappears.

use egg::{Id, Language};
use hashbrown::HashMap;

use super::batch::{Batch, B};
use crate::ir::{Builder, Node, Term};
use crate::tensor::DType;

/// Element offsets enumerated per loop, at most.
pub const MAX_ELEMENTS: usize = 1 << 22;

/// Rewrites every qualifying loop of `term`, innermost first; returns the new term and how many loops became
/// loop-free.
pub fn vectorize_loops(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> (Term, usize) {
    let mut v = Vectorizer { src: term, out: Builder::default(), memo: HashMap::new(), count: 0, inputs };
    let root = v.rebuild(term.root());
    (v.out.extract(root), v.count)
}

struct Vectorizer<'a> {
    src: &'a Term,
    out: Builder,
    memo: HashMap<Id, Id>,
    count: usize,
    inputs: &'a [(String, DType, Vec<usize>)],
}

impl Vectorizer<'_> {
    /// Copies `id` into the output, vectorizing the loops below it; the copy means what `id` means, wherever it is.
    fn rebuild(&mut self, id: Id) -> Id {
        if let Some(&n) = self.memo.get(&id) {
            return n;
        }
        let node = self.src[id].clone().map_children(|c| self.rebuild(c));
        let new = match &node {
            Node::Get([t, j]) => match (self.out.node(*t).clone(), self.out.node(*j).clone()) {
                (Node::Tuple(items), Node::Int(j)) if (j as usize) < items.len() => items[j as usize],
                _ => self.out.add(node),
            },
            Node::Loop(ch) => match Batch::try_new(&mut self.out, *ch, self.inputs).and_then(|mut b| b.run()) {
                Some(t) => {
                    self.count += 1;
                    t
                }
                None => self.out.add(node),
            },
            _ => self.out.add(node),
        };
        self.memo.insert(id, new);
        new
    }
}

impl Batch<'_> {
    fn run(&mut self) -> Option<Id> {
        // The chain of writes yielded for each carried value, outermost last.
        let mut chains = Vec::new();
        for (j, &item) in self.body.clone().iter().enumerate() {
            let mut links = Vec::new();
            let mut x = item;
            while let Node::Assign([base, w, v]) = self.b.node(x).clone() {
                links.push((self.view(w)?, v));
                x = base;
            }
            if !self.is_carried(x, j) {
                return None;
            }
            links.reverse();
            for (w, _) in &links {
                if !self.same_base(j, w) {
                    return None;
                }
                for t in 0..self.n {
                    for off in self.offsets(w, t)? {
                        if *self.written[j].entry(off).or_insert(t) != t {
                            return None;
                        }
                    }
                }
            }
            chains.push(links);
        }
        let mut results = Vec::new();
        for (j, links) in chains.into_iter().enumerate() {
            let mut acc = self.init_item(j);
            for (w, v) in links {
                let view = self.batched_view(&w);
                let value = match self.batch(v)? {
                    B::Inv(id) => id,
                    B::Bat(id, shape) => self.lift(id, &shape, w.shape.len())?,
                };
                acc = self.b.add(Node::Assign([acc, view, value]));
            }
            results.push(acc);
        }
        Some(self.b.add(Node::Tuple(results.into())))
    }
}
