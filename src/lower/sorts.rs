//! Sorts on the host. `sort`, `argsort` and `topk` become `sort_val` and `sort_idx` nodes (the values and the
//! indices of one sort) that no kernel computes: the executor sorts on the host. This pass lets it do the least
//! work there: both outputs of one sort from a single sort, and, where every reader takes only a leading part of
//! each line (`topk` is `sort(x)[..., :k]`), only that part, selected in linear time and then sorted
//! ([`crate::tensor::index::sort_prefix`]). The positions after it are never read: they are zero, or, where the
//! C device's sort writes straight into its own buffers ([`crate::tensor::index::sort_prefix_into`]), unspecified.

use egg::Id;
use hashbrown::HashMap;

use crate::ir::{Node, OpName, Term, Ty};

/// A sort the host computes: the node of its other output (values or indices) over the same operand, dim and
/// order, if the term has one, and how many leading positions of each line the readers of both read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HostSort {
    pub sibling: Option<Id>,
    pub prefix: usize,
}

/// Views with more elements than this are not walked: their readers count as reading whole lines.
const WALK_LIMIT: usize = 1 << 16;

/// Every `sort_val` and `sort_idx` node of `term` with its [`HostSort`]; `users` are each node's readers.
pub fn host_sorts(term: &Term, types: &[Option<Ty>], users: &[Vec<Id>]) -> HashMap<Id, HostSort> {
    let mut by_args: HashMap<&[Id], Vec<Id>> = HashMap::new();
    for (i, node) in term.as_ref().iter().enumerate() {
        if let Node::Op(OpName::SortVal | OpName::SortIdx, args) = node {
            by_args.entry(&args[..]).or_default().push(Id::from(i));
        }
    }
    let mut out = HashMap::new();
    for nodes in by_args.values() {
        for &n in nodes {
            let Node::Op(op, _) = &term[n] else { continue };
            let sibling = nodes.iter().copied().find(|&m| matches!(&term[m], Node::Op(o, _) if o != op));
            let prefix = nodes.iter().map(|&m| read_prefix(term, types, users, m)).max().unwrap_or(usize::MAX);
            out.insert(n, HostSort { sibling, prefix });
        }
    }
    out
}

/// How many leading positions along the sorted dim the readers of sort node `n` read: the greatest position an
/// `access` through a literal view reaches, plus one; `usize::MAX` (whole lines) where a reader is anything else.
fn read_prefix(term: &Term, types: &[Option<Ty>], users: &[Vec<Id>], n: Id) -> usize {
    let Node::Op(_, args) = &term[n] else { return usize::MAX };
    let (Some(Ty::Tensor(_, shape)), Node::Int(dim)) = (&types[usize::from(n)], &term[args[1]]) else {
        return usize::MAX;
    };
    let rank = shape.len() as i64;
    let d = if *dim < 0 { dim + rank } else { *dim };
    if d < 0 || d >= rank {
        return usize::MAX;
    }
    let d = d as usize;
    // The sort's output is contiguous: position `p` along `d` is `(offset / step) % shape[d]`.
    let step: usize = shape[d + 1..].iter().product();
    let mut prefix = 0;
    for &u in &users[usize::from(n)] {
        let Node::Access([x, v]) = term[u] else { return usize::MAX };
        if x != n {
            return usize::MAX;
        }
        match furthest_position(term, v, step.max(1), shape[d]) {
            Some(p) => prefix = prefix.max(p),
            None => return usize::MAX,
        }
    }
    prefix
}

/// One past the greatest position along a dim of `extent` positions `step` elements apart that view `v` (literal
/// shape, strides and offset, at most [`WALK_LIMIT`] distinct offsets) reaches in a contiguous buffer; 0 for an empty view.
fn furthest_position(term: &Term, v: Id, step: usize, extent: usize) -> Option<usize> {
    let Node::View([s, st, off]) = term[v] else { return None };
    let shape = super::plan::lits(term, s)?;
    let strides = super::plan::lits(term, st)?;
    let Node::Int(offset) = term[off] else { return None };
    if shape.iter().any(|&n| n <= 0) {
        return Some(0);
    }
    if shape.len() != strides.len() {
        return None;
    }
    // A dim of stride 0 (a broadcast: effdet's top-k indices expanded over 20 classes) or of one element moves no
    // offset: only the others are walked.
    let (shape, strides): (Vec<i64>, Vec<i64>) =
        shape.iter().zip(&strides).filter(|&(&n, &st)| n > 1 && st != 0).map(|(&n, &st)| (n, st)).unzip();
    let count = shape.iter().try_fold(1usize, |acc, &n| acc.checked_mul(n as usize))?;
    if count > WALK_LIMIT {
        return None;
    }
    let mut index = vec![0i64; shape.len()];
    let mut furthest = 0;
    for _ in 0..count {
        let o = offset + index.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>();
        if o < 0 {
            return None;
        }
        furthest = furthest.max((o as usize / step) % extent.max(1) + 1);
        for k in (0..index.len()).rev() {
            index[k] += 1;
            if index[k] < shape[k] {
                break;
            }
            index[k] = 0;
        }
    }
    Some(furthest)
}
