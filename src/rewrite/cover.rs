//! The Rust rewrite `scatter/cover-cat`: a chain of `assign`s whose views are slices (or selects) of one axis that
//! together cover the whole buffer becomes one `cat` of the assigned values; the buffer's old contents are dead.
//!
//! `x = zeros(n, 2); x[:, 0] = a; x[:, 1] = b` is `cat([a[:, None], b[:, None]], 1)`: one kernel writing each element
//! once instead of a fill and two scatters. Values are cast to the buffer's dtype and broadcast to their slice's
//! shape (through a stride-0 `access`) as `copy_` would. Only chains outside loops are rewritten (their types are
//! static there); the slices must not overlap and must tile the axis exactly.

use egg::{Id, Language};
use hashbrown::HashMap;

use crate::ir::{top_level_types, Builder, Node, OpName, Term, Ty};
use crate::tensor::DType;

/// Rewrites every covering chain of `term`; returns the new term and how many chains became a `cat`.
pub fn cover_cat(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> (Term, usize) {
    let Ok(types) = top_level_types(term, inputs) else { return (term.clone(), 0) };
    let mut c = Cover { src: term, types, out: Builder::default(), memo: HashMap::new(), count: 0 };
    let root = c.rebuild(term.root());
    (c.out.extract(root), c.count)
}

struct Cover<'a> {
    src: &'a Term,
    types: HashMap<Id, Ty>,
    out: Builder,
    memo: HashMap<Id, Id>,
    count: usize,
}

fn contiguous(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * shape[k + 1] as i64;
    }
    st
}

impl Cover<'_> {
    fn rebuild(&mut self, id: Id) -> Id {
        if let Some(&n) = self.memo.get(&id) {
            return n;
        }
        let new = match self.try_cat(id) {
            Some(n) => {
                self.count += 1;
                n
            }
            None => {
                let node = self.src[id].clone().map_children(|c| self.rebuild(c));
                self.out.add(node)
            }
        };
        self.memo.insert(id, new);
        new
    }

    fn lits(&self, id: Id) -> Option<Vec<i64>> {
        match &self.src[id] {
            Node::List(items) => items
                .iter()
                .map(|&c| match self.src[c] {
                    Node::Int(i) => Some(i),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    }

    fn tensor(&self, id: Id) -> Option<(DType, Vec<usize>)> {
        match self.types.get(&id)? {
            Ty::Tensor(d, s) => Some((*d, s.clone())),
            _ => None,
        }
    }

    fn try_cat(&mut self, id: Id) -> Option<Id> {
        let Node::Assign(_) = self.src[id] else { return None };
        let (dtype, shape) = self.tensor(id)?;
        let full = contiguous(&shape);
        // The chain's links, innermost first, each as (start, len, is_select, value).
        let mut links = Vec::new();
        let mut x = id;
        let mut axis = None;
        while let Node::Assign([base, v, y]) = self.src[x] {
            let Node::View([s, st, off]) = self.src[v] else { return None };
            let (vs, vst) = (self.lits(s)?, self.lits(st)?);
            let Node::Int(off) = self.src[off] else { return None };
            let (d, start, len, select) = self.slice_of(&shape, &full, &vs, &vst, off)?;
            if *axis.get_or_insert(d) != d {
                return None;
            }
            links.push((start, len, select, y));
            // Tiles that do not overlap number at most the axis' length: a longer chain cannot be a cover (and
            // walking it from every link would cost the square of its length).
            if links.len() > shape[d] {
                return None;
            }
            x = base;
        }
        let d = axis?;
        if links.len() < 2 {
            return None;
        }
        // The last write to each element wins: with tiles that do not overlap, order is free.
        links.sort_by_key(|l| l.0);
        let mut next = 0;
        for &(start, len, _, _) in &links {
            if start != next {
                return None;
            }
            next += len;
        }
        if next != shape[d] as i64 {
            return None;
        }
        let mut parts = vec![self.out.int(d as i64)];
        for (_, len, select, y) in links {
            let mut part_shape = shape.clone();
            part_shape[d] = len as usize;
            let (yd, ys) = self.tensor(y)?;
            let mut value = self.rebuild(y);
            if yd != dtype {
                let dt = self.out.add(Node::DType(dtype));
                value = self.out.op(OpName::Cast, vec![dt, value]);
            }
            let mut sliced = part_shape.clone();
            if select {
                sliced.remove(d);
            }
            if ys != sliced {
                // Broadcast as copy_ does: a stride-0 read of the (contiguous) value.
                let pad = sliced.len().checked_sub(ys.len())?;
                let ys_strides = contiguous(&ys);
                let mut strides = vec![0i64; sliced.len()];
                for k in 0..ys.len() {
                    if ys[k] == sliced[pad + k] {
                        strides[pad + k] = ys_strides[k];
                    } else if ys[k] != 1 {
                        return None;
                    }
                }
                let (s, st, o) = (self.out.ints(&to_i64(&sliced)), self.out.ints(&strides), self.out.int(0));
                let view = self.out.add(Node::View([s, st, o]));
                value = self.out.add(Node::Access([value, view]));
            }
            if select {
                let l = self.out.ints(&to_i64(&part_shape));
                value = self.out.op(OpName::Reshape, vec![value, l]);
            }
            parts.push(value);
        }
        Some(self.out.op(OpName::Cat, parts))
    }

    /// The view as a slice `[start, start + len)` (or a select, len 1) of one axis of a contiguous buffer.
    fn slice_of(
        &self,
        shape: &[usize],
        full: &[i64],
        vs: &[i64],
        vst: &[i64],
        off: i64,
    ) -> Option<(usize, i64, i64, bool)> {
        for d in 0..shape.len() {
            if full[d] == 0 || off % full[d] != 0 {
                continue;
            }
            let start = off / full[d];
            let same = |skip: bool| {
                let (mut s, mut st) = (to_i64(shape), full.to_vec());
                if skip {
                    s.remove(d);
                    st.remove(d);
                }
                (s, st)
            };
            // A slice keeps every dim, with the axis shorter.
            let (mut s, st) = same(false);
            if vs.len() == s.len() && vst == st {
                let len = vs[d];
                s[d] = len;
                if vs == s && len > 0 && start + len <= shape[d] as i64 {
                    return Some((d, start, len, false));
                }
            }
            // A select drops the axis.
            let (s, st) = same(true);
            if vs == s && vst == st && start < shape[d] as i64 {
                return Some((d, start, 1, true));
            }
        }
        None
    }
}

fn to_i64(s: &[usize]) -> Vec<i64> {
    s.iter().map(|&d| d as i64).collect()
}
