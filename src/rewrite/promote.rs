//! The Rust rewrite `loops/promote`: a counted loop that carries a buffer but, in every iteration, only reads it
//! through one view fixed for the whole loop and writes it back through that same view carries the view's region
//! instead; the buffer is read through the view once before the loop and written through it once after. This is
//! scalar replacement (register promotion) of a loop-invariant access: after `loops/interchange`, an LSTM layer's
//! time loop carries the whole `[layers, 1, hidden]` state stack to read and write row `j`; promoted, it carries
//! row `j`, and each step computes a fresh state from the previous one instead of overwriting the buffer its own
//! matmul reads (which is what kept the step's matmul out of the cell kernel, `lower/dots.rs`).
//!
//! Slot `k` of a loop `for i in range(a, e, s)` is promoted when, in the loop's body (a tuple, one item per slot):
//! - the item of slot `k` is `assign(carried k, v, x)`, with `x` of exactly the view's shape and the buffer's dtype
//!   (no broadcast, no cast: `x` is the region's next value as it is);
//! - `v` is a view with literal shape and strides whose elements do not overlap (so reading the region back through
//!   `v` gives `x`), and it does not depend on the loop's own variable or state (it may depend on enclosing loops);
//! - every other use of `carried k` in the body is `access(carried k, v)` with that same view, no nested loop
//!   refers to it, and the written buffer `assign(carried k, v, x)` is only the slot's next value (nothing else in
//!   the body reads the whole buffer after the write: not `acc = acc + h`, not `out[t] = h`);
//! - the loop runs at least once (literal bounds): the view is then read in the first iteration anyway, so reading it
//!   before the loop raises no error the loop would not raise.
//!
//! Then the state outside the region is never read nor changed by the loop, and the region after iteration `i` is
//! what iteration `i` yielded: the loop's result for slot `k` is `assign(start, v, region)`, exactly.

use egg::{Id, Language};
use hashbrown::{HashMap, HashSet};

use super::hoist::shift;
use crate::ir::{lit, lits, Builder, Node, Term, Ty};
use crate::tensor::DType;

type Inputs = [(String, DType, Vec<usize>)];

/// Promotes every qualifying slot of every counted loop of `term` (each loop judged as written in `term`, in one
/// pass); returns the new term and how many slots were promoted (the original term and 0 where nothing qualified,
/// or where the result would not verify).
pub fn promote_views(term: &Term, inputs: &Inputs) -> (Term, usize) {
    let Some(types) = crate::ir::unambiguous_types(term, inputs) else { return (term.clone(), 0) };
    let mut p = Promoter { src: term, types, out: Builder::default(), memo: HashMap::new(), count: 0 };
    let root = p.rebuild(term.root());
    if p.count == 0 {
        return (term.clone(), 0);
    }
    let new = p.out.extract(root);
    match crate::ir::verify(&new, inputs) {
        Ok(_) => (new, p.count),
        Err(_) => (term.clone(), 0),
    }
}

struct Promoter<'a> {
    src: &'a Term,
    types: Vec<Option<Ty>>,
    out: Builder,
    /// Source node -> the node that replaces it.
    memo: HashMap<Id, Id>,
    count: usize,
}

/// A promotable slot: its index, and its view in the source term.
struct Slot {
    k: usize,
    view: Id,
}

impl Promoter<'_> {
    fn rebuild(&mut self, id: Id) -> Id {
        if let Some(&n) = self.memo.get(&id) {
            return n;
        }
        let src = self.src[id].clone();
        let slots = match &src {
            Node::Loop(ch) => self.promotable(*ch),
            _ => Vec::new(),
        };
        let node = src.map_children(|c| self.rebuild(c));
        let new = match node {
            // A promoted loop is a tuple of its results: a `get` of any tuple reads its item directly.
            Node::Get([t, i]) => match (self.out.node(t), self.out.node(i)) {
                (Node::Tuple(xs), &Node::Int(i)) if (i as usize) < xs.len() => xs[i as usize],
                _ => self.out.add(node),
            },
            Node::Loop(ch) if !slots.is_empty() => {
                self.count += slots.len();
                self.promote(ch, &slots)
            }
            _ => self.out.add(node),
        };
        self.memo.insert(id, new);
        new
    }

    /// The slots of the source loop `ch` that can carry their view's region instead of the whole buffer.
    fn promotable(&self, ch: [Id; 5]) -> Vec<Slot> {
        let t = self.src;
        let [start, end, step, _, body] = ch;
        let runs = match (lit(t, start), lit(t, end), lit(t, step)) {
            (Some(a), Some(e), Some(s)) => (s > 0 && a < e) || (s < 0 && a > e),
            _ => false,
        };
        let Node::Tuple(items) = &t[body] else { return Vec::new() };
        if !runs {
            return Vec::new();
        }
        let mut slots = Vec::new();
        for (k, &item) in items.iter().enumerate() {
            let Node::Assign([c, v, x]) = t[item] else { continue };
            let own = matches!(t[c], Node::Carried([d, j]) if lit(t, d) == Some(0) && lit(t, j) == Some(k as i64));
            if !own || !self.region_is_value(v, x, item) || refs_own_loop(t, v) {
                continue;
            }
            let access = t.as_ref().iter().position(|n| *n == Node::Access([c, v])).map(Id::from);
            let uses = Uses { t, slot: k, access, x, seen: HashSet::new() };
            if uses.only_through_view(items) {
                slots.push(Slot { k, view: v });
            }
        }
        slots
    }

    /// Whether `v` is a view whose elements do not overlap and `x` has exactly its shape and the dtype of `assign`
    /// (`item`), so that reading the region back through `v` gives `x` itself.
    fn region_is_value(&self, v: Id, x: Id, item: Id) -> bool {
        let t = self.src;
        let Node::View([shape, strides, _]) = t[v] else { return false };
        let (Some(shape), Some(strides)) = (lits(t, shape), lits(t, strides)) else { return false };
        if shape.iter().any(|&n| n < 0) {
            return false;
        }
        let shape: Vec<usize> = shape.iter().map(|&n| n as usize).collect();
        let strides: Vec<isize> = strides.iter().map(|&s| s as isize).collect();
        if !crate::ir::geometry::no_overlap(&shape, &strides) {
            return false;
        }
        match (&self.types[usize::from(x)], &self.types[usize::from(item)]) {
            (Some(Ty::Tensor(dx, sx)), Some(Ty::Tensor(db, _))) => dx == db && *sx == shape,
            _ => false,
        }
    }

    /// The loop `ch` (rebuilt) with `slots` carrying their regions, as the tuple of its results.
    fn promote(&mut self, ch: [Id; 5], slots: &[Slot]) -> Id {
        let [a, e, s, init, body] = ch;
        let b = &mut self.out;
        let Node::Tuple(items) = b.node(body).clone() else { unreachable!("a promotable loop's body is a tuple") };
        let n = items.len();
        let mut inits: Vec<Id> = match b.node(init) {
            Node::Tuple(xs) if xs.len() == n => xs.to_vec(),
            _ => (0..n)
                .map(|j| {
                    let j = b.int(j as i64);
                    b.add(Node::Get([init, j]))
                })
                .collect(),
        };
        let starts = inits.clone();
        let mut repl = HashMap::new();
        let mut outside = HashMap::new();
        let mut ys = items.to_vec();
        for slot in slots {
            let v = self.memo[&slot.view];
            let b = &mut self.out;
            let (zero, k) = (b.int(0), b.int(slot.k as i64));
            let carried = b.add(Node::Carried([zero, k]));
            let read = b.add(Node::Access([carried, v]));
            repl.insert(read, carried);
            let Node::Assign([_, _, x]) = *b.node(items[slot.k]) else {
                unreachable!("a promoted slot yields an assign")
            };
            ys[slot.k] = x;
            let v_out = shift(b, v, 0, -1, &mut HashMap::new());
            inits[slot.k] = b.add(Node::Access([starts[slot.k], v_out]));
            outside.insert(slot.k, v_out);
        }
        let mut memo = HashMap::new();
        let ys: Vec<Id> = ys.iter().map(|&y| replace(&mut self.out, y, &repl, &mut memo)).collect();
        let b = &mut self.out;
        let (init, body) = (b.add(Node::Tuple(inits.into())), b.add(Node::Tuple(ys.into())));
        let lp = b.add(Node::Loop([a, e, s, init, body]));
        let results: Vec<Id> = (0..n)
            .map(|j| {
                let jj = b.int(j as i64);
                let got = b.add(Node::Get([lp, jj]));
                match outside.get(&j) {
                    Some(&v) => b.add(Node::Assign([starts[j], v, got])),
                    None => got,
                }
            })
            .collect();
        b.add(Node::Tuple(results.into()))
    }
}

/// Whether the view `v` refers to the loop it is in (its variable or state, level 0), or holds a loop.
fn refs_own_loop(t: &Term, v: Id) -> bool {
    match &t[v] {
        Node::Iter(x) | Node::Carried([x, _]) => lit(t, *x).is_none_or(|x| x == 0),
        Node::Loop(_) | Node::While(_) => true,
        n => n.children().iter().any(|&c| refs_own_loop(t, c)),
    }
}

/// The uses of one slot's state in a loop body.
struct Uses<'t> {
    t: &'t Term,
    slot: usize,
    /// `access(carried slot, v)`, where the term has it.
    access: Option<Id>,
    /// The written value: the slot's item is `assign(carried slot, v, x)`.
    x: Id,
    seen: HashSet<(Id, i64)>,
}

impl Uses<'_> {
    /// Whether the body's items use the slot's state only through the view and the slot's own item writes it
    /// back. The written buffer (the slot's item) may stand nowhere else: another item, or a nested loop's start,
    /// holding it uses the whole buffer after the write (`acc = acc + h`, `out[t] = h`), which `clean` finds.
    fn only_through_view(mut self, items: &[Id]) -> bool {
        let (slot, x) = (self.slot, self.x);
        items.iter().enumerate().all(|(j, &i)| if j == slot { self.clean(x, 0) } else { self.clean(i, 0) })
    }

    /// Whether `id`, seen `d` loops below the loop, uses the slot's state only through the view.
    fn clean(&mut self, id: Id, d: i64) -> bool {
        if !self.seen.insert((id, d)) {
            return true;
        }
        if d == 0 && Some(id) == self.access {
            return true;
        }
        let t = self.t;
        match &t[id] {
            Node::Carried([x, j]) => !(lit(t, *x) == Some(d) && lit(t, *j) == Some(self.slot as i64)),
            Node::Loop([a, e, s, init, body]) => {
                [*a, *e, *s, *init].iter().all(|&c| self.clean(c, d)) && self.clean(*body, d + 1)
            }
            Node::While([init, cond, body]) => {
                self.clean(*init, d) && self.clean(*cond, d + 1) && self.clean(*body, d + 1)
            }
            n => n.children().to_vec().into_iter().all(|c| self.clean(c, d)),
        }
    }
}

/// `id` (in a loop body) with the nodes of `repl` replaced, in this loop's context only: a nested loop's bounds and
/// start are replaced, its body is not (the same node there means something else).
fn replace(b: &mut Builder, id: Id, repl: &HashMap<Id, Id>, memo: &mut HashMap<Id, Id>) -> Id {
    if let Some(&r) = repl.get(&id).or_else(|| memo.get(&id)) {
        return r;
    }
    let node = b.node(id).clone();
    let r = match node {
        Node::Loop([a, e, s, init, body]) => {
            let ch = [a, e, s, init].map(|c| replace(b, c, repl, memo));
            b.add(Node::Loop([ch[0], ch[1], ch[2], ch[3], body]))
        }
        Node::While([init, cond, body]) => {
            let init = replace(b, init, repl, memo);
            b.add(Node::While([init, cond, body]))
        }
        n if n.children().is_empty() => id,
        n => {
            let n = n.map_children(|c| replace(b, c, repl, memo));
            b.add(n)
        }
    };
    memo.insert(id, r);
    r
}
