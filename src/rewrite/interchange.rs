//! The Rust rewrite `loops/interchange`: a counted loop (the outer, `t`) whose body is one counted loop (the inner,
//! `j`) plus glue becomes `for j: for t:`, when the dependences computed on the term allow it. Then the inner
//! (time) loop's state-independent work can be batched over all its iterations by `loops/hoist`: an LSTM's input
//! projection of one layer for all steps is one matmul, and the recurrence keeps only `h @ w_hh`.
//!
//! Supported nest shape (anything else is left alone, with the reason in [`interchange_explained`]'s notes):
//! - both loops have literal bounds (the inner's must not depend on the outer variable); the outer's step is 1;
//! - the outer body contains exactly one loop (no `while`, no `if`) and no nested loop is inside the inner body;
//! - each value the inner loop carries is either
//!   - *slot* state: it starts as outer state `p` and the outer loop yields it back as `p` unchanged; the inner body
//!     reads it only through views whose offsets are integer expressions of the inner variable, and yields it as a
//!     chain of `assign`s through such views. Exact legality: the elements each inner iteration reads and writes
//!     are enumerated; no element may be written by two inner iterations (an output dependence) and no inner
//!     iteration may read an element another one writes (that flow or anti-dependence has direction `(<, >)` or is
//!     broken by the reordered overwrites). Then each inner iteration owns its elements, and running all outer
//!     iterations of it in a row computes the same values;
//!   - or *flowing*: its start does not read the outer loop's state (it is a function of `t` only); it flows from
//!     inner iteration `j` to `j + 1` within one `t`. After interchange it is a buffer `[T, ...]` over the outer
//!     iterations: built before the nest (row `t` is its start at `t`), and each inner iteration reads row `t` of
//!     the previous inner iteration's buffer and writes row `t` of its own;
//! - every other value the outer loop yields reads no slot state, no inner result but flowing ones, and only its own
//!   kind of outer state: it is computed after the nest by a loop over `t` that reads row `t` of the flowing
//!   buffers, in the same order as before.
//!
//! The inner body must not read the outer loop's state directly (only through the inner loop's carried values).

use egg::{Id, Language};
use hashbrown::{HashMap, HashSet};

use super::batch::lit;
use super::vectorize::MAX_ELEMENTS;
use crate::ir::{Builder, Node, OpName, Term, Ty};
use crate::tensor::DType;

type Inputs = [(String, DType, Vec<usize>)];

/// [`interchange_explained`] without the notes, as the other Rust rewrites.
pub fn interchange_loops(term: &Term, inputs: &Inputs) -> (Term, usize) {
    let (t, n, _) = interchange_explained(term, inputs);
    (t, n)
}

/// Interchanges every qualifying loop nest of `term`, innermost first; returns the new term, how many nests were
/// interchanged and, for each nest left alone, why (the dependence or the shape that stopped it).
pub fn interchange_explained(term: &Term, inputs: &Inputs) -> (Term, usize, Vec<String>) {
    let types = crate::ir::unambiguous_types(term, inputs).unwrap_or_default();
    let mut x = Interchanger {
        src: term,
        types,
        out: Builder::default(),
        memo: HashMap::new(),
        back: HashMap::new(),
        count: 0,
        why: Vec::new(),
    };
    let root = x.rebuild(term.root());
    let new = x.out.extract(root);
    if x.count == 0 {
        return (term.clone(), 0, x.why);
    }
    match crate::ir::verify(&new, inputs) {
        Ok(_) => (new, x.count, x.why),
        Err(e) => {
            x.why.push(format!("loops/interchange: the interchanged term did not verify ({e}); kept the original"));
            (term.clone(), 0, x.why)
        }
    }
}

struct Interchanger<'a> {
    src: &'a Term,
    types: Vec<Option<Ty>>,
    out: Builder,
    memo: HashMap<Id, Id>,
    /// Output node -> the source node it copies (for types).
    back: HashMap<Id, Id>,
    count: usize,
    why: Vec<String>,
}

/// The node a rewritten subterm of the inner body or of the outer glue becomes.
enum Repl {
    /// Keep the node (rebuilt from rewritten children).
    Keep,
    /// Replace it by this node.
    With(Id),
}

impl Interchanger<'_> {
    fn rebuild(&mut self, id: Id) -> Id {
        if let Some(&n) = self.memo.get(&id) {
            return n;
        }
        let node = self.src[id].clone().map_children(|c| self.rebuild(c));
        let new = match &node {
            Node::Loop(ch) => match self.nest(*ch) {
                Ok(Some(t)) => {
                    self.count += 1;
                    t
                }
                Ok(None) => self.out.add(node),
                Err(why) => {
                    self.why.push(why);
                    self.out.add(node)
                }
            },
            _ => self.out.add(node),
        };
        self.back.entry(new).or_insert(id);
        self.memo.insert(id, new);
        new
    }

    /// The loop `ch` interchanged with its nested loop; Ok(None) when it has none, Err(why) when it stays.
    fn nest(&mut self, ch: [Id; 5]) -> Result<Option<Id>, String> {
        let [a0, e0, s0, init_o, body_o] = ch;
        let b = &self.out;
        let Node::Tuple(items) = b.node(body_o) else { return Ok(None) };
        let items = items.to_vec();
        // The control nodes of the outer body, in its own context.
        let (mut loops, mut whiles, mut ifs) = (Vec::new(), 0, 0);
        let mut seen = HashSet::new();
        for &it in &items {
            control(b, it, &mut seen, &mut loops, &mut whiles, &mut ifs);
        }
        if loops.is_empty() && whiles == 0 {
            return Ok(None);
        }
        let range = |a: Id, e: Id| match (lit(b, a), lit(b, e)) {
            (Some(a), Some(e)) => format!("[{a}, {e})"),
            _ => "(bounds not literal)".to_string(),
        };
        let here = format!("loops/interchange: the loop over {} stays", range(a0, e0));
        if whiles > 0 {
            return Err(format!("{here}: its body has a `while` loop, whose trip count is not known"));
        }
        if loops.len() > 1 || ifs > 0 {
            return Err(format!(
                "{here}: its body is not one counted loop plus glue ({} loops, {ifs} ifs)",
                loops.len()
            ));
        }
        let inner = loops[0];
        let Node::Loop([a1, e1, s1, init_i, body_i]) = b.node(inner).clone() else { unreachable!() };
        let here = format!("{here} outside the loop over {}", range(a1, e1));
        if [a1, e1, s1].iter().any(|&c| refs_level(b, c, 0)) {
            return Err(format!("{here}: the inner loop's bounds depend on the outer loop"));
        }
        let (Some(ta), Some(te), Some(ts)) = (lit(b, a0), lit(b, e0), lit(b, s0)) else {
            return Err(format!("{here}: the outer loop's bounds are not literals"));
        };
        let (Some(ja), Some(je), Some(js)) = (lit(b, a1), lit(b, e1), lit(b, s1)) else {
            return Err(format!("{here}: the inner loop's bounds are not literals"));
        };
        if ts != 1 || js <= 0 {
            return Err(format!("{here}: a loop steps by other than 1 (outer) or backwards (inner)"));
        }
        if te <= ta || je <= ja {
            return Ok(None);
        }
        let n_t = (te - ta) as usize;
        let js_list: Vec<i64> = (ja..je).step_by(js as usize).collect();
        let (Node::Tuple(inits), Node::Tuple(bitems)) = (b.node(init_i).clone(), b.node(body_i).clone()) else {
            return Err(format!("{here}: the inner loop's state is not a tuple"));
        };
        let (inits, bitems) = (inits.to_vec(), bitems.to_vec());
        // Slot state: inner value m starts as outer state p, which the outer loop yields back unchanged.
        let mut slot_of_inner: Vec<Option<usize>> = vec![None; inits.len()];
        let mut slot_of_outer: Vec<Option<usize>> = vec![None; items.len()];
        for (m, &x) in inits.iter().enumerate() {
            if let Node::Carried([d, p]) = b.node(x) {
                let (Some(0), Some(p)) = (lit(b, *d), lit(b, *p)) else { continue };
                let p = p as usize;
                let back = matches!(b.node(items[p]), Node::Get([l, k]) if *l == inner && lit(b, *k) == Some(m as i64));
                if back && slot_of_outer[p].is_none() {
                    slot_of_inner[m] = Some(p);
                    slot_of_outer[p] = Some(m);
                }
            }
        }
        // Flowing values start from a function of t: not from the outer state (the value would flow from one
        // outer iteration to the next through the inner loop).
        for (m, &x) in inits.iter().enumerate() {
            if slot_of_inner[m].is_none() && refs_state(b, x, 0) {
                return Err(format!(
                    "{here}: inner value {m} starts from the outer loop's state, so it flows from one outer iteration \
                     to the next through the inner loop (a dependence with direction (<, >))"
                ));
            }
        }
        // The glue after the inner loop: only flowing results and its own kind of outer state.
        for (p, &it) in items.iter().enumerate() {
            if slot_of_outer[p].is_some() {
                continue;
            }
            let mut bad = None;
            glue_refs(b, it, inner, &slot_of_inner, &slot_of_outer, &mut HashSet::new(), &mut bad);
            if let Some(why) = bad {
                return Err(format!("{here}: outer value {p} {why}"));
            }
        }
        // The inner body: no loops, no reads of the outer state, slot state read and written per inner iteration.
        let mut acc = Access { slot: &slot_of_inner, reads: vec![Vec::new(); inits.len()], bad: None };
        let mut seen = HashSet::new();
        let mut writes_of: Vec<(usize, Vec<Id>)> = Vec::new();
        for (m, &it) in bitems.iter().enumerate() {
            if slot_of_inner[m].is_some() {
                let mut x = it;
                let mut writes = Vec::new();
                while let Node::Assign([base, w, v]) = b.node(x).clone() {
                    writes.push(w);
                    acc.walk(b, w, &mut seen);
                    acc.walk(b, v, &mut seen);
                    x = base;
                }
                if !matches!(b.node(x), Node::Carried([d, k]) if lit(b, *d) == Some(0) && lit(b, *k) == Some(m as i64))
                {
                    return Err(format!("{here}: inner value {m} (outer state) is not yielded as writes onto itself"));
                }
                writes_of.push((m, writes));
            } else {
                acc.walk(b, it, &mut seen);
            }
        }
        if let Some(why) = acc.bad.take() {
            return Err(format!("{here}: {why}"));
        }
        // Each inner iteration owns the elements of slot state it writes; no other iteration touches them.
        for (m, writes) in &writes_of {
            acc.check_owned(b, *m, writes, &js_list).map_err(|e| format!("{here}: {e}"))?;
        }
        // Types of the flowing values, for their buffers over t.
        let src_inner = self.back.get(&inner).copied();
        let ty = src_inner.and_then(|i| self.types.get(usize::from(i)).cloned().flatten());
        let Some(Ty::Tuple(tys)) = ty else {
            return Err(format!("{here}: the inner loop's state type is not known"));
        };
        let flows: Vec<usize> = (0..inits.len()).filter(|&m| slot_of_inner[m].is_none()).collect();
        let mut flow_ty = Vec::new();
        for &m in &flows {
            match tys.get(m) {
                Some(Ty::Tensor(d, s)) => flow_ty.push((*d, s.clone())),
                _ => return Err(format!("{here}: inner value {m} flows between inner iterations but is not a tensor")),
            }
        }
        Ok(Some(self.build(Nest {
            bounds: (a0, e0, a1, e1, s1),
            ta,
            n_t,
            init_o,
            items,
            inner,
            inits,
            bitems,
            slot_of_inner,
            slot_of_outer,
            flows,
            flow_ty,
        })))
    }

    fn build(&mut self, n: Nest) -> Id {
        let b = &mut self.out;
        let (a0, e0, a1, e1, s1) = n.bounds;
        let one = b.int(1);
        let slots: Vec<usize> = (0..n.inits.len()).filter(|&m| n.slot_of_inner[m].is_some()).collect();
        let ns = slots.len();
        let slot_idx: HashMap<usize, usize> = slots.iter().enumerate().map(|(s, &m)| (m, s)).collect();
        let flow_idx: HashMap<usize, usize> = n.flows.iter().enumerate().map(|(f, &m)| (m, f)).collect();
        let outer_init = |b: &mut Builder, p: usize| match b.node(n.init_o) {
            Node::Tuple(xs) => xs[p],
            _ => {
                let p = b.int(p as i64);
                b.add(Node::Get([n.init_o, p]))
            }
        };
        // 1. The flowing values' starts for every t, as buffers [T, ...].
        let mut xbufs = Vec::new();
        if !n.flows.is_empty() {
            let mut zeros = Vec::new();
            let mut ys = Vec::new();
            for (f, &m) in n.flows.iter().enumerate() {
                let (d, shape) = &n.flow_ty[f];
                let full: Vec<usize> = std::iter::once(n.n_t).chain(shape.iter().copied()).collect();
                zeros.push(zeros_of(b, &full, *d));
                let (dd, k) = (b.int(0), b.int(f as i64));
                let buf = b.add(Node::Carried([dd, k]));
                let v = super::hoist::row_view(b, shape, n.ta);
                ys.push(b.add(Node::Assign([buf, v, n.inits[m]])));
            }
            let (zi, yi) = (b.add(Node::Tuple(zeros.into())), b.add(Node::Tuple(ys.into())));
            let pre = b.add(Node::Loop([a0, e0, one, zi, yi]));
            for f in 0..n.flows.len() {
                let k = b.int(f as i64);
                xbufs.push(b.add(Node::Get([pre, k])));
            }
        }
        // 2. The nest: for j (carrying the slot states and the flowing buffers): for t.
        let mut init_j = Vec::new();
        for &m in &slots {
            init_j.push(outer_init(b, n.slot_of_inner[m].unwrap()));
        }
        init_j.extend(&xbufs);
        let mut init_t = Vec::new();
        for k in 0..ns + n.flows.len() {
            let (d, k) = (b.int(0), b.int(k as i64));
            init_t.push(b.add(Node::Carried([d, k])));
        }
        let mut memo = HashMap::new();
        let mut ys = Vec::new();
        for (m, &it) in n.bitems.iter().enumerate() {
            let v = rewrite(b, it, &mut memo, &mut |b: &mut Builder, node: &Node| match node {
                Node::Iter(d) => match lit(b, *d) {
                    Some(0) => Repl::With(iter(b, 1)),
                    Some(1) => Repl::With(iter(b, 0)),
                    _ => Repl::Keep,
                },
                Node::Carried([d, k]) if lit(b, *d) == Some(0) => {
                    let k = lit(b, *k).unwrap() as usize;
                    if let Some(&s) = slot_idx.get(&k) {
                        Repl::With(carried(b, 0, s))
                    } else {
                        let f = flow_idx[&k];
                        let buf = carried(b, 1, ns + f);
                        let v = super::hoist::row_view(b, &n.flow_ty[f].1, n.ta);
                        Repl::With(b.add(Node::Access([buf, v])))
                    }
                }
                _ => Repl::Keep,
            });
            if let Some(&f) = flow_idx.get(&m) {
                let buf = carried(b, 0, ns + f);
                let w = super::hoist::row_view(b, &n.flow_ty[f].1, n.ta);
                ys.push((ns + f, b.add(Node::Assign([buf, w, v]))));
            } else {
                ys.push((slot_idx[&m], v));
            }
        }
        ys.sort_by_key(|&(k, _)| k);
        let body_t = b.add(Node::Tuple(ys.into_iter().map(|(_, v)| v).collect()));
        let init_t = b.add(Node::Tuple(init_t.into()));
        let tloop = b.add(Node::Loop([a0, e0, one, init_t, body_t]));
        let mut body_j = Vec::new();
        for k in 0..ns + n.flows.len() {
            let k = b.int(k as i64);
            body_j.push(b.add(Node::Get([tloop, k])));
        }
        let (init_j, body_j) = (b.add(Node::Tuple(init_j.into())), b.add(Node::Tuple(body_j.into())));
        let nest = b.add(Node::Loop([a1, e1, s1, init_j, body_j]));
        // 3. The glue after the inner loop, for every t in order, reading the flowing buffers' rows.
        let posts: Vec<usize> = (0..n.items.len()).filter(|&p| n.slot_of_outer[p].is_none()).collect();
        let post_idx: HashMap<usize, usize> = posts.iter().enumerate().map(|(q, &p)| (p, q)).collect();
        let mut post = None;
        if !posts.is_empty() {
            let mut rows = HashMap::new();
            for (f, &m) in n.flows.iter().enumerate() {
                let k = b.int((ns + f) as i64);
                let y = b.add(Node::Get([nest, k]));
                let y = super::hoist::shift_up(b, y, 0, &mut HashMap::new());
                let v = super::hoist::row_view(b, &n.flow_ty[f].1, n.ta);
                rows.insert(m, b.add(Node::Access([y, v])));
            }
            let mut memo = HashMap::new();
            let mut ys = Vec::new();
            let mut inits = Vec::new();
            for &p in &posts {
                inits.push(outer_init(b, p));
                ys.push(rewrite(b, n.items[p], &mut memo, &mut |b: &mut Builder, node: &Node| match node {
                    Node::Get([l, k]) if *l == n.inner => Repl::With(rows[&(lit(b, *k).unwrap() as usize)]),
                    Node::Carried([d, k]) if lit(b, *d) == Some(0) => {
                        Repl::With(carried(b, 0, post_idx[&(lit(b, *k).unwrap() as usize)]))
                    }
                    _ => Repl::Keep,
                }));
            }
            let (i, y) = (b.add(Node::Tuple(inits.into())), b.add(Node::Tuple(ys.into())));
            post = Some(b.add(Node::Loop([a0, e0, one, i, y])));
        }
        // 4. The outer loop's results.
        let mut res = Vec::new();
        for p in 0..n.items.len() {
            let (l, k) = match n.slot_of_outer[p] {
                Some(m) => (nest, slot_idx[&m]),
                None => (post.unwrap(), post_idx[&p]),
            };
            let k = b.int(k as i64);
            res.push(b.add(Node::Get([l, k])));
        }
        b.add(Node::Tuple(res.into()))
    }
}

struct Nest {
    bounds: (Id, Id, Id, Id, Id),
    ta: i64,
    n_t: usize,
    init_o: Id,
    items: Vec<Id>,
    inner: Id,
    inits: Vec<Id>,
    bitems: Vec<Id>,
    slot_of_inner: Vec<Option<usize>>,
    slot_of_outer: Vec<Option<usize>>,
    flows: Vec<usize>,
    flow_ty: Vec<(DType, Vec<usize>)>,
}

fn iter(b: &mut Builder, d: i64) -> Id {
    let d = b.int(d);
    b.add(Node::Iter(d))
}

fn carried(b: &mut Builder, d: i64, k: usize) -> Id {
    let (d, k) = (b.int(d), b.int(k as i64));
    b.add(Node::Carried([d, k]))
}

fn zeros_of(b: &mut Builder, shape: &[usize], dtype: DType) -> Id {
    let s = b.ints(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
    let d = b.add(Node::DType(dtype));
    let v = match crate::tensor::Scalar::I(0).cast(dtype) {
        crate::tensor::Scalar::I(i) => Node::Int(i),
        crate::tensor::Scalar::F(f) => Node::Float(crate::ir::FloatLit(f)),
        crate::tensor::Scalar::B(x) => Node::Bool(crate::ir::BoolLit(x)),
    };
    let v = b.add(v);
    b.op(OpName::Full, vec![s, d, v])
}

/// `id` (a term without loops below, but for the inner loop of the glue, which `f` replaces) with `f` applied.
fn rewrite(b: &mut Builder, id: Id, memo: &mut HashMap<Id, Id>, f: &mut dyn FnMut(&mut Builder, &Node) -> Repl) -> Id {
    if let Some(&r) = memo.get(&id) {
        return r;
    }
    let node = b.node(id).clone();
    let r = match f(b, &node) {
        Repl::With(x) => x,
        Repl::Keep if node.children().is_empty() => id,
        Repl::Keep => {
            let n = node.map_children(|c| rewrite(b, c, memo, f));
            b.add(n)
        }
    };
    memo.insert(id, r);
    r
}

/// The loops, `while`s and `if`s of one loop body's own context (not inside nested loop bodies).
fn control(b: &Builder, id: Id, seen: &mut HashSet<Id>, loops: &mut Vec<Id>, whiles: &mut usize, ifs: &mut usize) {
    if !seen.insert(id) {
        return;
    }
    let node = b.node(id);
    match node {
        Node::Loop([a, e, s, init, _]) => {
            loops.push(id);
            for c in [*a, *e, *s, *init] {
                control(b, c, seen, loops, whiles, ifs);
            }
        }
        Node::While([init, _, _]) => {
            *whiles += 1;
            control(b, *init, seen, loops, whiles, ifs);
        }
        _ => {
            if matches!(node, Node::If(_)) {
                *ifs += 1;
            }
            for &c in node.children() {
                control(b, c, seen, loops, whiles, ifs);
            }
        }
    }
}

/// Whether `id` reads loop level `d`'s variable or state (levels counted from `id`'s context).
fn refs_level(b: &Builder, id: Id, d: i64) -> bool {
    walk_refs(b, id, d, true)
}

/// Whether `id` reads loop level `d`'s carried state.
fn refs_state(b: &Builder, id: Id, d: i64) -> bool {
    walk_refs(b, id, d, false)
}

fn walk_refs(b: &Builder, id: Id, d: i64, vars: bool) -> bool {
    match b.node(id) {
        Node::Iter(x) => vars && lit(b, *x) == Some(d),
        Node::Carried([x, _]) => lit(b, *x) == Some(d),
        Node::Loop([a, e, s, init, body]) => {
            [*a, *e, *s, *init].iter().any(|&c| walk_refs(b, c, d, vars)) || walk_refs(b, *body, d + 1, vars)
        }
        Node::While([init, cond, body]) => {
            walk_refs(b, *init, d, vars) || walk_refs(b, *cond, d + 1, vars) || walk_refs(b, *body, d + 1, vars)
        }
        other => other.children().iter().any(|&c| walk_refs(b, c, d, vars)),
    }
}

/// Checks the glue after the inner loop: it may read flowing inner results and outer state that is not slot state.
fn glue_refs(
    b: &Builder,
    id: Id,
    inner: Id,
    slot_of_inner: &[Option<usize>],
    slot_of_outer: &[Option<usize>],
    seen: &mut HashSet<Id>,
    bad: &mut Option<String>,
) {
    if bad.is_some() || !seen.insert(id) {
        return;
    }
    match b.node(id) {
        Node::Get([l, k]) if *l == inner => {
            let m = lit(b, *k).unwrap_or(-1);
            if m < 0 || slot_of_inner.get(m as usize).is_none_or(|s| s.is_some()) {
                *bad =
                    Some(format!("reads the inner loop's value {m}, outer state that is written per inner iteration"));
            }
        }
        _ if id == inner => *bad = Some("reads the inner loop's whole result".into()),
        Node::Carried([d, k]) if lit(b, *d) == Some(0) => {
            let k = lit(b, *k).unwrap_or(-1);
            if k < 0 || slot_of_outer.get(k as usize).is_none_or(|s| s.is_some()) {
                *bad = Some(format!(
                    "reads outer state {k}, which the inner loop writes: interchange would change which writes it sees"
                ));
            }
        }
        node => {
            for &c in node.children() {
                glue_refs(b, c, inner, slot_of_inner, slot_of_outer, seen, bad);
            }
        }
    }
}

/// The inner body's reads of slot state, per slot value (the views they go through).
struct Access<'s> {
    slot: &'s [Option<usize>],
    reads: Vec<Vec<Id>>,
    bad: Option<String>,
}

impl Access<'_> {
    fn walk(&mut self, b: &Builder, id: Id, seen: &mut HashSet<Id>) {
        if self.bad.is_some() || !seen.insert(id) {
            return;
        }
        let node = b.node(id);
        match node {
            Node::Loop(_) | Node::While(_) => self.bad = Some("the inner body has a loop of its own".into()),
            Node::Carried([d, k]) => match (lit(b, *d), lit(b, *k)) {
                (Some(0), Some(k)) if self.slot.get(k as usize).is_some_and(|s| s.is_some()) => {
                    self.bad =
                        Some(format!("inner value {k} (outer state) is used other than read or written through views"))
                }
                (Some(0), _) => {}
                (Some(1), _) => self.bad = Some("the inner body reads the outer loop's state directly".into()),
                _ => {}
            },
            Node::Access([x, v])
                if matches!(b.node(*x), Node::Carried([d, k])
                if lit(b, *d) == Some(0) && lit(b, *k).is_some_and(|k| self.slot.get(k as usize).is_some_and(|s| s.is_some()))) =>
            {
                let Node::Carried([_, k]) = b.node(*x) else { unreachable!() };
                self.reads[lit(b, *k).unwrap() as usize].push(*v);
                self.walk(b, *v, seen);
            }
            _ => {
                for &c in node.children() {
                    self.walk(b, c, seen);
                }
            }
        }
    }

    /// Every element of slot value `m` that inner iteration `j` writes is written by no other iteration and read by
    /// no other iteration.
    fn check_owned(&self, b: &Builder, m: usize, writes: &[Id], js: &[i64]) -> Result<(), String> {
        let mut budget = MAX_ELEMENTS;
        let mut owner: HashMap<i64, i64> = HashMap::new();
        for &j in js {
            for &w in writes {
                for off in offsets(b, w, j, &mut budget).map_err(|e| format!("inner value {m}: {e}"))? {
                    let o = *owner.entry(off).or_insert(j);
                    if o != j {
                        return Err(format!(
                            "inner iterations {o} and {j} both write element {off} of inner value {m} (an output \
                             dependence)"
                        ));
                    }
                }
            }
        }
        for &j in js {
            for &r in &self.reads[m] {
                for off in offsets(b, r, j, &mut budget).map_err(|e| format!("inner value {m}: {e}"))? {
                    if let Some(&o) = owner.get(&off) {
                        if o != j {
                            return Err(format!(
                                "inner iteration {j} reads element {off} of inner value {m}, which inner iteration \
                                 {o} writes (a dependence across inner iterations through outer state: interchange \
                                 would reorder it)"
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// The element offsets view `v` touches at inner iteration `j`.
fn offsets(b: &Builder, v: Id, j: i64, budget: &mut usize) -> Result<Vec<i64>, String> {
    let Node::View([s, st, off]) = b.node(v) else { return Err("a view is not a literal view".into()) };
    let (Some(shape), Some(strides)) = (super::batch::lits(b, *s), super::batch::lits(b, *st)) else {
        return Err("a view's shape or strides are not literals".into());
    };
    let o = eval_int(b, *off, j).ok_or("a view's offset is not an integer expression of the inner loop's variable")?;
    let numel: i64 = shape.iter().product();
    *budget = budget.checked_sub(numel.max(0) as usize).ok_or("too many elements to enumerate")?;
    let mut out = vec![o];
    for (&d, &s) in shape.iter().zip(&strides) {
        out = out.iter().flat_map(|&o| (0..d).map(move |k| o + k * s)).collect();
    }
    Ok(out)
}

fn eval_int(b: &Builder, id: Id, j: i64) -> Option<i64> {
    match b.node(id) {
        Node::Int(c) => Some(*c),
        Node::Iter(d) if lit(b, *d) == Some(0) => Some(j),
        Node::Op(op @ (OpName::IAdd | OpName::ISub | OpName::IMul), args) if args.len() == 2 => {
            let (x, y) = (eval_int(b, args[0], j)?, eval_int(b, args[1], j)?);
            match op {
                OpName::IAdd => x.checked_add(y),
                OpName::ISub => x.checked_sub(y),
                _ => x.checked_mul(y),
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notes(src: &str) -> (usize, Vec<String>) {
        let term: Term = src.parse().unwrap();
        crate::ir::verify(&term, &[]).unwrap();
        let (_, n, why) = interchange_explained(&term, &[]);
        (n, why)
    }

    #[test]
    fn inner_bounds_that_depend_on_the_outer_variable_stop_it() {
        let inner = "(loop 0 (iter 0) 1 (tuple (carried 0 0)) (tuple (assign (carried 0 0) (view (list 1) (list 1) \
                     (iter 0)) (full (list) f32 1.0))))";
        let (n, why) = notes(&format!("(loop 0 4 1 (tuple (full (list 4) f32 0.0)) (tuple (get {inner} 0)))"));
        assert_eq!(n, 0);
        assert!(why.iter().any(|w| w.contains("the inner loop's bounds depend on the outer loop")), "{why:?}");
        // The same nest with literal bounds interchanges.
        let inner = inner.replace("(loop 0 (iter 0) 1", "(loop 0 4 1");
        let (n, why) = notes(&format!("(loop 0 4 1 (tuple (full (list 4) f32 0.0)) (tuple (get {inner} 0)))"));
        assert_eq!((n, why.len()), (1, 0), "{why:?}");
    }

    #[test]
    fn two_inner_iterations_writing_one_element_stop_it() {
        let inner = "(loop 0 3 1 (tuple (carried 0 0)) (tuple (assign (carried 0 0) (view (list 1) (list 1) 0) \
                     (full (list) f32 1.0))))";
        let (n, why) = notes(&format!("(loop 0 4 1 (tuple (full (list 4) f32 0.0)) (tuple (get {inner} 0)))"));
        assert_eq!(n, 0);
        assert!(why.iter().any(|w| w.contains("output dependence")), "{why:?}");
    }
}
