//! The Rust rewrite `views/compose`: a read through a view of a read through a view is one read through the
//! composed view, `access(access(x, v), w) = access(x, v∘w)`, when the composition is itself a strided view.
//!
//! The inner read is a row-major tensor of `v`'s shape, so `w`'s element offsets are positions in it; each maps to
//! an offset of `x` through `v`. The composition is found by enumerating those offsets (views up to
//! [`MAX_ELEMENTS`]) and fitting one stride per dim of `w`; where no strides fit every element (a `w` that crosses
//! `v`'s rows unevenly) the reads stay two. `w`'s offset must be a literal; `v`'s may move with loops.

use crate::ir::{Builder, Node, OpName, Term};
use crate::tensor::DType;
use egg::{Id, Language};

pub const MAX_ELEMENTS: usize = 1 << 20;

/// Composes every read of a read; returns the new term and how many were composed.
pub fn compose_views(term: &Term, _inputs: &[(String, DType, Vec<usize>)]) -> (Term, usize) {
    let mut b = Builder::default();
    let mut map: Vec<Id> = Vec::with_capacity(term.as_ref().len());
    let mut count = 0;
    for node in term.as_ref() {
        let n = node.clone().map_children(|c| map[usize::from(c)]);
        let id = match compose(&mut b, &n) {
            Some(id) => {
                count += 1;
                id
            }
            None => b.add(n),
        };
        map.push(id);
    }
    let root = map[usize::from(term.root())];
    (b.extract(root), count)
}

fn lits(b: &Builder, id: Id) -> Option<Vec<i64>> {
    match b.node(id) {
        Node::List(items) => items
            .iter()
            .map(|&c| match b.node(c) {
                Node::Int(i) => Some(*i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn offsets(shape: &[i64], strides: &[i64], base: i64) -> Vec<i64> {
    let mut out = vec![base];
    for (&d, &s) in shape.iter().zip(strides) {
        out = out.iter().flat_map(|&o| (0..d).map(move |k| o + k * s)).collect();
    }
    out
}

fn compose(b: &mut Builder, n: &Node) -> Option<Id> {
    let Node::Access([inner, w]) = n else { return None };
    let Node::Access([x, v]) = b.node(*inner).clone() else { return None };
    let Node::View([vs, vst, voff]) = b.node(v).clone() else { return None };
    let Node::View([ws, wst, woff]) = b.node(*w).clone() else { return None };
    let (vs, vst, ws, wst) = (lits(b, vs)?, lits(b, vst)?, lits(b, ws)?, lits(b, wst)?);
    let Node::Int(woff) = *b.node(woff) else { return None };
    let numel: i64 = ws.iter().product();
    if numel <= 0 || numel as usize > MAX_ELEMENTS {
        return None;
    }
    // Position in the inner (row-major, shape vs) tensor -> offset in x, relative to v's offset.
    let vcont: Vec<i64> = {
        let mut st = vec![1i64; vs.len()];
        for k in (0..vs.len().saturating_sub(1)).rev() {
            st[k] = st[k + 1] * vs[k + 1];
        }
        st
    };
    let inner_numel: i64 = vs.iter().product();
    let to_x = |p: i64| -> Option<i64> {
        if p < 0 || p >= inner_numel {
            return None;
        }
        Some(vs.iter().zip(&vcont).zip(&vst).map(|((&n, &c), &s)| (p / c) % n * s).sum())
    };
    let got: Vec<i64> = offsets(&ws, &wst, woff).into_iter().map(to_x).collect::<Option<_>>()?;
    let base = got[0];
    let mut strides = Vec::new();
    let mut step = numel;
    for &d in &ws {
        step /= d.max(1);
        strides.push(if d > 1 { got[step as usize] - base } else { 0 });
    }
    if offsets(&ws, &strides, base) != got {
        return None;
    }
    let (s, st, bo) = (b.ints(&ws), b.ints(&strides), b.int(base));
    let off = if base == 0 { voff } else { b.op(OpName::IAdd, vec![voff, bo]) };
    let view = b.add(Node::View([s, st, off]));
    Some(b.add(Node::Access([x, view])))
}
