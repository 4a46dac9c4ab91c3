//! Rewrites of a term before planning: softmax spelled as the ops it is, a max's values read at indices nothing
//! else reads as the reduction to them, and loop bodies copied per loop.

use egg::{Id, Language};

use crate::ir::{Node, OpName, Term};

/// The term with softmax and log-softmax spelled as the reductions and elementwise ops they are (a max, a sum of
/// exponentials, a division), so that they fuse like any other ops instead of running on the host; `None` where the
/// term has neither. `types` are the term's node types (`node_types` of an unshared term). Over an empty input the
/// result is that empty input itself: PyTorch's softmax of no elements is an empty tensor, while the max it is spelled
/// with would raise over a zero-length dim (fuzz seed 57553).
///
/// Also: a max's (or min's) values read at indices that nothing else reads, `gather(x, d, max_idx(x, d, true))` (the
/// frontend's form of `x.max(d)`, whose indices a program often drops: `x.max(-1)[0]`), is the one reduction to the
/// values, `max_val(x, d, true)`, which fuses into its reader as the gather does not.
pub(super) fn decompose(term: &Term, types: &[Option<crate::ir::Ty>]) -> Option<Term> {
    use crate::ir::Ty;
    let nodes = term.as_ref();
    let mut uses = vec![0usize; nodes.len()];
    for n in nodes {
        for &c in n.children() {
            uses[usize::from(c)] += 1;
        }
    }
    // The reduction to values that `gather(args...)` is, where it reads a max's or min's indices alone.
    let values_only = |args: &[Id]| extremum_values(nodes, args).filter(|_| uses[usize::from(args[2])] == 1);
    let gathers_values = |n: &Node| matches!(n, Node::Op(OpName::Gather, a) if values_only(a).is_some());
    if !nodes.iter().any(|n| matches!(n, Node::Op(OpName::Softmax | OpName::LogSoftmax, _)) || gathers_values(n)) {
        return None;
    }
    let empty = |x: Id| matches!(&types[usize::from(x)], Some(Ty::Tensor(_, s)) if s.contains(&0));
    let mut b = crate::ir::Builder::default();
    let mut map: Vec<Id> = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let n = node.clone().map_children(|c| map[usize::from(c)]);
        let id = match (node, &n) {
            (Node::Op(OpName::Softmax | OpName::LogSoftmax, old), _)
                if empty(old[0]) && types[i] == types[usize::from(old[0])] =>
            {
                map[usize::from(old[0])]
            }
            (Node::Op(OpName::Gather, old), Node::Op(_, args)) if values_only(old).is_some() => {
                let keep = b.add(Node::Bool(crate::ir::BoolLit(true)));
                b.op(values_only(old).expect("checked"), vec![args[0], args[1], keep])
            }
            (_, Node::Op(op @ (OpName::Softmax | OpName::LogSoftmax), args)) => {
                let (x, d) = (args[0], args[1]);
                let dims = b.add(Node::List(vec![d].into()));
                let keep = b.add(Node::Bool(crate::ir::BoolLit(true)));
                let m = b.op(OpName::Amax, vec![x, dims, keep]);
                let shifted = b.op(OpName::Sub, vec![x, m]);
                let e = b.op(OpName::Exp, vec![shifted]);
                let total = b.op(OpName::Sum, vec![e, dims, keep]);
                if *op == OpName::Softmax {
                    b.op(OpName::Div, vec![e, total])
                } else {
                    let l = b.op(OpName::Log, vec![total]);
                    b.op(OpName::Sub, vec![shifted, l])
                }
            }
            _ => b.add(n),
        };
        map.push(id);
    }
    let root = map[usize::from(term.root())];
    Some(b.extract(root))
}

/// `max_val` or `min_val` where `gather(x, d, idx)` (its arguments `args`) reads a max's or min's own indices,
/// `idx = max_idx(x, d, true)` (or `min_idx`): the values of that max, read at indices in range by construction.
pub(super) fn extremum_values(nodes: &[Node], args: &[Id]) -> Option<OpName> {
    let Node::Op(op, ia) = &nodes[usize::from(*args.get(2)?)] else { return None };
    let values = match op {
        OpName::MaxIdx => OpName::MaxVal,
        OpName::MinIdx => OpName::MinVal,
        _ => return None,
    };
    let keep = matches!(nodes[usize::from(ia[2])], Node::Bool(crate::ir::BoolLit(true)));
    let same_dim = nodes[usize::from(ia[1])] == nodes[usize::from(args[1])];
    (ia[0] == args[0] && same_dim && keep).then_some(values)
}

/// The term with every node that depends on a loop's variable or state copied per loop that runs it, so that each
/// node has one type (two loops may share a body node while carrying state of different shapes).
pub(super) fn unshare(term: &Term) -> Term {
    fn go(
        term: &Term,
        dep: &[bool],
        id: Id,
        ctx: &mut Vec<Id>,
        memo: &mut hashbrown::HashMap<(Id, Vec<Id>), Id>,
        out: &mut Term,
    ) -> Id {
        let key = (id, if dep[usize::from(id)] { ctx.clone() } else { Vec::new() });
        if let Some(&n) = memo.get(&key) {
            return n;
        }
        let node = term[id].clone();
        let new = match node {
            Node::Loop([a, b, s, init, body]) => {
                let ch = [a, b, s, init].map(|c| go(term, dep, c, ctx, memo, out));
                ctx.push(id);
                let body = go(term, dep, body, ctx, memo, out);
                ctx.pop();
                Node::Loop([ch[0], ch[1], ch[2], ch[3], body])
            }
            Node::While([init, cond, body]) => {
                let init = go(term, dep, init, ctx, memo, out);
                ctx.push(id);
                let (cond, body) = (go(term, dep, cond, ctx, memo, out), go(term, dep, body, ctx, memo, out));
                ctx.pop();
                Node::While([init, cond, body])
            }
            n => n.map_children(|c| go(term, dep, c, ctx, memo, out)),
        };
        let n = out.add(new);
        memo.insert(key, n);
        n
    }
    // Inside a body, a node depends on its loop when it uses any loop variable or state.
    let nodes = term.as_ref();
    let mut dep = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        dep[i] = match n {
            Node::Iter(_) | Node::Carried(_) => true,
            _ => n.children().iter().any(|&c| dep[usize::from(c)]),
        };
    }
    let mut out = Term::default();
    go(term, &dep, term.root(), &mut Vec::new(), &mut hashbrown::HashMap::new(), &mut out);
    out
}

/// The term with every write of a whole buffer by a scatter into that same buffer (`assign(x, all of x,
/// index_put(x, ...))`, which a mutated input's write-back of `x[:, :, pos] = v` is) spelled as the scatter itself:
/// its value is the scatter's, and then nothing else reads the base, so the scatter can go in place. `None` where
/// no such write occurs.
pub(super) fn elide_whole_writes(term: &Term, types: &[Option<crate::ir::Ty>]) -> Option<Term> {
    use crate::ir::Ty;
    let nodes = term.as_ref();
    let whole = |x: Id, v: Id| -> bool {
        let Some(Ty::Tensor(_, s)) = &types[usize::from(x)] else { return false };
        let Node::View([vs, vst, off]) = &nodes[usize::from(v)] else { return false };
        let ints = |id: Id| -> Option<Vec<i64>> {
            match &nodes[usize::from(id)] {
                Node::List(items) => items
                    .iter()
                    .map(|&c| match nodes[usize::from(c)] {
                        Node::Int(i) => Some(i),
                        _ => None,
                    })
                    .collect(),
                _ => None,
            }
        };
        let (Some(vs), Some(vst)) = (ints(*vs), ints(*vst)) else { return false };
        let cs = super::index::contiguous(s);
        matches!(nodes[usize::from(*off)], Node::Int(0))
            && vs.len() == s.len()
            && vs.iter().zip(s).all(|(&a, &b)| a == b as i64)
            && (0..s.len()).all(|d| s[d] <= 1 || vst[d] == cs[d])
    };
    let elide = |i: usize| -> Option<Id> {
        let Node::Assign([x, v, y]) = nodes[i] else { return None };
        let Node::Op(OpName::IndexPut | OpName::Scatter, args) = &nodes[usize::from(y)] else { return None };
        (args.first() == Some(&x) && types[usize::from(x)] == types[usize::from(y)] && whole(x, v)).then_some(y)
    };
    if !(0..nodes.len()).any(|i| elide(i).is_some()) {
        return None;
    }
    let mut b = crate::ir::Builder::default();
    let mut map: Vec<Id> = Vec::with_capacity(nodes.len());
    for (i, node) in nodes.iter().enumerate() {
        let id = match elide(i) {
            Some(y) => map[usize::from(y)],
            None => b.add(node.clone().map_children(|c| map[usize::from(c)])),
        };
        map.push(id);
    }
    Some(b.extract(map[usize::from(term.root())]))
}
