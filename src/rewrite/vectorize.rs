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
    let mut v = Vectorizer { src: term, out: Builder::default(), memo: HashMap::new(), count: 0, inputs, kept: None };
    let root = v.rebuild(term.root());
    (v.out.extract(root), v.count)
}

/// For each counted loop of `term` that does not vectorize, why (`explain`'s "why not"): the range it runs over and
/// the first dependence or construct that keeps it, in term order.
pub fn why_loops_stay(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> Vec<String> {
    let mut v =
        Vectorizer { src: term, out: Builder::default(), memo: HashMap::new(), count: 0, inputs, kept: Some(vec![]) };
    v.rebuild(term.root());
    v.kept.unwrap_or_default()
}

struct Vectorizer<'a> {
    src: &'a Term,
    out: Builder,
    memo: HashMap<Id, Id>,
    count: usize,
    inputs: &'a [(String, DType, Vec<usize>)],
    /// When asked: why each loop that stayed did.
    kept: Option<Vec<String>>,
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
            Node::Loop(ch) => {
                let (done, why) = match Batch::try_new(&mut self.out, *ch, self.inputs) {
                    Some(mut b) => {
                        let done = b.run();
                        (done, b.why.take())
                    }
                    None => (None, super::batch::shape_refusal(&self.out, *ch)),
                };
                match done {
                    Some(t) => {
                        self.count += 1;
                        t
                    }
                    None => {
                        if let Some(kept) = &mut self.kept {
                            let range = |x: Id| match self.out.node(x) {
                                Node::Int(v) => v.to_string(),
                                _ => "?".into(),
                            };
                            let why = why.unwrap_or_else(|| "its body does not batch across iterations".into());
                            kept.push(format!(
                                "the loop over range({}, {}, {}) stayed: {why}",
                                range(ch[0]),
                                range(ch[1]),
                                range(ch[2])
                            ));
                        }
                        self.out.add(node)
                    }
                }
            }
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
                let Some(view) = self.view(w) else {
                    return self.refuse(|| format!("carried value {j} is written through a view whose offset is not affine in the loop variable"));
                };
                links.push((view, v));
                x = base;
            }
            if !self.is_carried(x, j) {
                return self.refuse(|| {
                    format!(
                        "carried value {j} is replaced by a value computed from the previous iteration's state, not \
                         written into it through views (a recurrence: each iteration needs the one before)"
                    )
                });
            }
            links.reverse();
            for (w, _) in &links {
                if !self.same_base(j, w) {
                    return self.refuse(|| format!("carried value {j} is written through views of another base"));
                }
                for t in 0..self.n {
                    let Some(offsets) = self.offsets(w, t) else {
                        return self.refuse(|| {
                            format!("its writes touch more than {MAX_ELEMENTS} elements to check for overlap")
                        });
                    };
                    for off in offsets {
                        let first = *self.written[j].entry(off).or_insert(t);
                        if first != t {
                            return self.refuse(|| {
                                format!(
                                    "iterations {first} and {t} both write element {off} of carried value {j}, so \
                                     the order of the writes matters"
                                )
                            });
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
