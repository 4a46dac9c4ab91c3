//! Planning: which nodes of a term become buffers, which fuse into the kernels that read them, and the kernels.
//!
//! Every tensor node gets a [`How`]. Structure (inputs, loops, ifs, tuples, carried state) is run by the host;
//! reductions and matmuls are reduction kernels whose input expressions are fused in (prologues); ops the kernels do
//! not cover (sorts, gathers, advanced indexing) run on the host with the functional interpreter's implementation.
//! Everything else is an expression that fuses into its consumers unless a [`Policy`] or sharing makes it a
//! buffer. An `assign` fuses as a predicated select over its buffer, or, where its old buffer is provably dead,
//! writes only the view's elements in place.

use egg::{Id, Language};

use super::index::{contiguous, ravel, unravel, Atom, Idx};
use super::kernel::{binary_supported, Expr, Kernel, RedOp, Reduction};
use crate::ir::{binary_of, dependent_nodes, node_types, unary_of, Node, OpName, Term, Ty};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// Which fusion the plan may do.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    /// Ours: fuse everything the kernel IR can express, across views and view-scatters.
    Fused,
    /// One kernel per source op, as PyTorch eager launches them (views are free).
    Eager,
    /// Fusion only inside mutation-free regions: every write through a view is its own kernel, and what it writes
    /// is materialized first (as TorchScript's fusers do).
    Unfunctionalized,
}

/// How a node is computed.
#[derive(Clone, Debug, PartialEq)]
pub enum How {
    /// Not a tensor, or structure the host runs (tuples, loops, carried state, literals, integers).
    Host,
    /// An input buffer.
    Input,
    /// Fused into the kernels that read it.
    Inline,
    /// Kernel k writes a fresh buffer.
    Kernel(usize),
    /// Kernel k writes the assign's view in place into its base's buffer (arg `base`).
    InPlace(usize),
    /// A copy of the base buffer, then kernel k writes the view in place into the copy.
    CopyInPlace(usize),
    /// The functional interpreter's implementation of the op, on the host.
    Fallback,
}

/// A kernel's launch: the nodes whose buffers it reads and the integer nodes it takes as parameters.
#[derive(Clone, Debug)]
pub struct Launch {
    pub node: Id,
    pub args: Vec<Id>,
    pub params: Vec<Id>,
}

pub struct Plan {
    pub term: Term,
    pub inputs: Vec<(String, DType, Vec<usize>)>,
    pub how: Vec<How>,
    pub types: Vec<Option<Ty>>,
    pub kernels: Vec<Kernel>,
    pub launches: Vec<Launch>,
    pub policy: Policy,
    /// Per node: does it depend on a loop's variable or state (else the executor computes it once).
    pub dependent: Vec<bool>,
    /// For an in-place write: the readers of its old buffer the executor runs first.
    pub before: hashbrown::HashMap<Id, Vec<Id>>,
}

impl Plan {
    pub fn tensor(&self, id: Id) -> Option<(DType, &[usize])> {
        match &self.types[usize::from(id)] {
            Some(Ty::Tensor(d, s)) => Some((*d, s)),
            _ => None,
        }
    }
}

/// Plans `term` under `policy`.
pub fn plan(term: &Term, inputs: &[(String, DType, Vec<usize>)], policy: Policy) -> Result<Plan, String> {
    let term = &unshare(&decompose(term));
    let types = node_types(term, inputs)?;
    let n = term.as_ref().len();
    let mut users: Vec<Vec<Id>> = vec![Vec::new(); n];
    for (i, node) in term.as_ref().iter().enumerate() {
        if types[i].is_none() {
            continue;
        }
        let mut seen = Vec::new();
        for &c in node.children() {
            if !seen.contains(&c) {
                users[usize::from(c)].push(Id::from(i));
                seen.push(c);
            }
        }
    }
    let dependent = dependent_nodes(term);
    let mut p = Planner { term, types, users, dependent, how: vec![How::Host; n], policy, before: Default::default() };
    p.classify();
    let mut plan = Plan {
        term: term.clone(),
        inputs: inputs.to_vec(),
        how: p.how.clone(),
        types: p.types.clone(),
        kernels: Vec::new(),
        launches: Vec::new(),
        policy,
        dependent: dependent_nodes(term),
        before: p.before.clone(),
    };
    for i in 0..n {
        let id = Id::from(i);
        if matches!(p.how[i], How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_)) {
            let mut kb = KernelBuilder::default();
            let k = plan.kernels.len();
            let kernel = p.kernel(&mut kb, id, format!("k{k}"))?;
            plan.how[i] = match p.how[i] {
                How::Kernel(_) => How::Kernel(k),
                How::InPlace(_) => How::InPlace(k),
                _ => How::CopyInPlace(k),
            };
            plan.kernels.push(kernel);
            plan.launches.push(Launch { node: id, args: kb.args, params: kb.params });
        }
    }
    Ok(plan)
}

/// The term with softmax and log-softmax spelled as the reductions and elementwise ops they are (a max, a sum of
/// exponentials, a division), so that they fuse like any other ops instead of running on the host.
fn decompose(term: &Term) -> Term {
    let mut b = crate::ir::Builder::default();
    let mut map: Vec<Id> = Vec::with_capacity(term.as_ref().len());
    for node in term.as_ref() {
        let n = node.clone().map_children(|c| map[usize::from(c)]);
        let id = match &n {
            Node::Op(op @ (OpName::Softmax | OpName::LogSoftmax), args) => {
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
    b.extract(root)
}

/// The term with every node that depends on a loop's variable or state copied per loop that runs it, so that each
/// node has one type (two loops may share a body node while carrying state of different shapes).
fn unshare(term: &Term) -> Term {
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

struct Planner<'a> {
    term: &'a Term,
    types: Vec<Option<Ty>>,
    users: Vec<Vec<Id>>,
    dependent: Vec<bool>,
    how: Vec<How>,
    policy: Policy,
    /// For an in-place write: materialized readers of its base that must run before it.
    before: hashbrown::HashMap<Id, Vec<Id>>,
}

#[derive(Default)]
struct KernelBuilder {
    args: Vec<Id>,
    params: Vec<Id>,
    views: Vec<(Vec<usize>, Vec<i64>)>,
    arg_dtypes: Vec<DType>,
}

impl KernelBuilder {
    fn arg(&mut self, id: Id, d: DType) -> usize {
        if let Some(k) = self.args.iter().position(|&a| a == id) {
            return k + 1;
        }
        self.args.push(id);
        self.arg_dtypes.push(d);
        self.args.len()
    }

    fn param(&mut self, id: Id) -> Idx {
        let k = match self.params.iter().position(|&a| a == id) {
            Some(k) => k,
            None => {
                self.params.push(id);
                self.params.len() - 1
            }
        };
        Idx::atom(Atom::Param(k))
    }

    fn view(&mut self, shape: &[usize], strides: &[i64]) -> usize {
        let v = (shape.to_vec(), strides.to_vec());
        match self.views.iter().position(|x| *x == v) {
            Some(k) => k,
            None => {
                self.views.push(v);
                self.views.len() - 1
            }
        }
    }
}

fn lits(term: &Term, id: Id) -> Option<Vec<i64>> {
    match &term[id] {
        Node::List(items) => items
            .iter()
            .map(|&c| match term[c] {
                Node::Int(i) => Some(i),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

fn lit(term: &Term, id: Id) -> Option<i64> {
    match term[id] {
        Node::Int(i) => Some(i),
        _ => None,
    }
}

/// Whether a view's dims nest (so that its inverse is a chain of divisions).
fn nests(shape: &[usize], strides: &[i64]) -> bool {
    let mut dims: Vec<(i64, i64)> =
        shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (n as i64, s)).collect();
    if dims.iter().any(|&(_, s)| s <= 0) {
        return false;
    }
    dims.sort_by_key(|&(_, s)| s);
    let mut reach = 0;
    dims.iter().all(|&(n, s)| {
        let ok = s > reach;
        reach += (n - 1) * s;
        ok
    })
}

/// Membership in a view that is a box of a contiguous buffer: each view dim of size > 1 steps along its own
/// buffer dim (stride = step * that dim's stride). Returns the condition and the index within the view.
fn box_membership(vs: &[usize], st: &[i64], off: &Idx, idx: &[Idx], shape: &[usize]) -> Option<(Expr, Vec<Idx>)> {
    let cs = contiguous(shape);
    let mut owner: Vec<Option<(usize, i64)>> = vec![None; shape.len()];
    let mut vidx = vec![Idx::constant(0); vs.len()];
    let mut which = vec![None; vs.len()];
    for k in 0..vs.len() {
        if vs[k] <= 1 {
            continue;
        }
        let d = (0..shape.len())
            .rev()
            .find(|&d| shape[d] > 1 && st[k] >= cs[d] && st[k] % cs[d] == 0 && st[k] / cs[d] < shape[d] as i64)?;
        if owner[d].is_some() {
            return None;
        }
        owner[d] = Some((k, st[k] / cs[d]));
        which[k] = Some(d);
    }
    // The view's start, per buffer dim; each view dim must stay inside its buffer dim (else it wraps into the
    // next one, which only the inverse handles).
    let start = unravel(off, shape);
    for d in 0..shape.len() {
        if let Some((k, step)) = owner[d] {
            match start[d].range() {
                Some((lo, hi)) if lo >= 0 && hi + (vs[k] as i64 - 1) * step < shape[d] as i64 => {}
                _ => return None,
            }
        }
    }
    let mut cond: Option<Expr> = None;
    let mut and = |c: Expr| {
        cond = Some(match cond.take() {
            None => c,
            Some(prev) => Expr::Binary(Binary::BitAnd, DType::Bool, DType::Bool, Box::new(prev), Box::new(c)),
        })
    };
    let cmp = |b: Binary, i: Idx, c: i64| {
        Expr::Binary(b, DType::I64, DType::Bool, Box::new(Expr::Index(i)), Box::new(Expr::Const(c as f64, DType::I64)))
    };
    for d in 0..shape.len() {
        let r = idx[d].add(&start[d].scale(-1));
        match owner[d] {
            None if shape[d] == 1 => {}
            None => and(cmp(Binary::Eq, r, 0)),
            Some((k, step)) => {
                if r.range().is_none_or(|(lo, _)| lo < 0) {
                    and(cmp(Binary::Ge, r.clone(), 0));
                }
                if step > 1 {
                    and(cmp(Binary::Eq, r.modulo(step), 0));
                }
                let q = r.div(step);
                if q.range().is_none_or(|(_, hi)| hi >= vs[k] as i64) {
                    and(cmp(Binary::Lt, q.clone(), vs[k] as i64));
                }
                vidx[k] = q;
            }
        }
    }
    Some((cond.unwrap_or(Expr::Const(1.0, DType::Bool)), vidx))
}

/// The index of an operand of shape `from` broadcast to a result indexed by `idx` (right-aligned).
fn broadcast(idx: &[Idx], from: &[usize]) -> Vec<Idx> {
    let pad = idx.len() - from.len();
    from.iter().enumerate().map(|(k, &n)| if n == 1 { Idx::constant(0) } else { idx[pad + k].clone() }).collect()
}

impl Planner<'_> {
    fn tensor(&self, id: Id) -> Option<(DType, Vec<usize>)> {
        match &self.types[usize::from(id)] {
            Some(Ty::Tensor(d, s)) => Some((*d, s.clone())),
            _ => None,
        }
    }

    /// Whether the kernel IR can compute this node as an expression of its operands.
    fn expressible(&self, id: Id) -> bool {
        use OpName::*;
        match &self.term[id] {
            Node::Access([_, v]) => self.view_parts(*v).is_some(),
            Node::Assign([_, v, _]) => self.view_parts(*v).is_some_and(|(s, st, _)| nests(&s, &st)),
            Node::Op(op, args) => match op {
                _ if unary_of(*op).is_some() => true,
                _ if binary_of(*op).is_some() => {
                    let b = binary_of(*op).expect("a binary op");
                    let (da, _) = self.tensor(args[0]).expect("typed");
                    binary_supported(b, compute_dtype(b, da))
                }
                Where | Clamp | Cast | Full | Reshape | Cat | ITensor => true,
                Triu | Tril => lit(self.term, args[1]).is_some(),
                Arange => args[1..3].iter().all(|&a| matches!(self.term[a], Node::Int(_) | Node::Float(_))),
                InView => self.view_parts(args[1]).is_some_and(|(s, st, _)| nests(&s, &st)),
                _ => false,
            },
            _ => false,
        }
    }

    fn reduction(&self, id: Id) -> bool {
        use OpName::*;
        matches!(
            &self.term[id],
            Node::Op(Sum | Mean | Prod | Amax | Amin | Any | All | MaxVal | MaxIdx | MinVal | MinIdx | Matmul, _)
        )
    }

    /// (shape, strides, offset term) of a view node with literal shape and strides.
    fn view_parts(&self, v: Id) -> Option<(Vec<usize>, Vec<i64>, Id)> {
        let Node::View([s, st, off]) = self.term[v] else { return None };
        Some((lits(self.term, s)?.into_iter().map(|d| d as usize).collect(), lits(self.term, st)?, off))
    }

    fn cheap(&self, id: Id) -> bool {
        match &self.term[id] {
            Node::Op(OpName::Full | OpName::ITensor | OpName::Arange, _) => true,
            Node::Access([x, _]) => matches!(self.how[usize::from(*x)], How::Input | How::Host | How::Kernel(_)),
            _ => false,
        }
    }

    fn classify(&mut self) {
        let n = self.term.as_ref().len();
        for i in 0..n {
            let id = Id::from(i);
            if self.tensor(id).is_none() {
                continue;
            }
            self.how[i] = match &self.term[id] {
                Node::Input(_) => How::Input,
                Node::Op(..) if self.reduction(id) => How::Kernel(0),
                Node::Op(..) | Node::Access(_) | Node::Assign(_) if self.expressible(id) => How::Inline,
                Node::Op(..) | Node::Access(_) | Node::Assign(_) => How::Fallback,
                _ => How::Host,
            };
        }
        // Materialize, in order (children before users): what the host needs as a buffer, what several kernels
        // would each recompute, what a loop would recompute in every iteration, and what the policy says.
        for i in 0..n {
            let id = Id::from(i);
            if self.how[i] != How::Inline {
                continue;
            }
            let users = &self.users[i];
            let host_user = users.iter().any(|&u| {
                matches!(self.how[usize::from(u)], How::Host | How::Fallback)
                    || matches!(self.term[u], Node::Op(OpName::ToInt, _))
            });
            let shared = users.len() > 1 && !self.cheap(id) && self.recompute_costs_more(id, users.len());
            let hoisted =
                !self.dependent[i] && users.iter().any(|&u| self.dependent[usize::from(u)]) && !self.cheap(id);
            let policy = match self.policy {
                Policy::Fused => false,
                Policy::Eager => !matches!(&self.term[id], Node::Access(_) | Node::Op(OpName::Reshape, _)),
                Policy::Unfunctionalized => {
                    matches!(self.term[id], Node::Assign(_))
                        || (!matches!(&self.term[id], Node::Access(_) | Node::Op(OpName::Reshape, _))
                            && users.iter().any(|&u| matches!(self.term[u], Node::Assign([_, _, y]) if y == id)))
                }
            };
            // A matmul reads each operand element once per row or column of the other: only pure reads fuse in.
            let matmul_operand =
                users.iter().any(|&u| matches!(self.term[u], Node::Op(OpName::Matmul, _))) && !self.pure_read(id);
            if host_user || shared || hoisted || policy || matmul_operand || self.too_big(id) {
                self.how[i] = How::Kernel(0);
            }
        }
        // Assigns that are buffers write in place where their base is a dead buffer. Otherwise ours writes the
        // whole new buffer as a predicated select; the baselines copy the base and write into the copy (as a
        // clone and an in-place op would), which needs the base as a buffer.
        if self.policy != Policy::Fused {
            // The baselines write through views into buffers: a fused base becomes one first.
            for i in (0..n).rev() {
                if let (How::Kernel(_), Node::Assign([x, _, _])) = (&self.how[i], &self.term[Id::from(i)]) {
                    if self.how[usize::from(*x)] == How::Inline {
                        self.how[usize::from(*x)] = How::Kernel(0);
                    }
                }
            }
        }
        for i in (0..n).rev() {
            let id = Id::from(i);
            if let (How::Kernel(_), Node::Assign([x, _, _])) = (&self.how[i], &self.term[id]) {
                let x = *x;
                let dead = if self.how[usize::from(x)] != How::Inline { self.dead_after(x, id) } else { None };
                if let Some(first) = dead {
                    self.how[i] = How::InPlace(0);
                    if !first.is_empty() {
                        self.before.insert(id, first);
                    }
                } else if self.policy != Policy::Fused {
                    self.how[i] = How::CopyInPlace(0);
                    if self.how[usize::from(x)] == How::Inline {
                        self.how[usize::from(x)] = How::Kernel(0);
                    }
                }
            }
        }
    }

    /// Whether computing a shared value in each of its `users` kernels costs more than one kernel that stores it
    /// (a launch, a write and a read per user), by the shipped cost profile.
    fn recompute_costs_more(&self, id: Id, users: usize) -> bool {
        let p = crate::cost::Profile::shipped_c();
        let (d, shape) = self.tensor(id).expect("a tensor");
        let n = shape.iter().product::<usize>() as f64;
        let mut ops = 0i64;
        fn count(pl: &Planner, id: Id, ops: &mut i64) {
            *ops += 1;
            if *ops > 1000 || pl.how[usize::from(id)] != How::Inline {
                return;
            }
            for &c in pl.term[id].children() {
                count(pl, c, ops);
            }
        }
        count(self, id, &mut ops);
        let recompute = (users - 1) as f64 * n * ops as f64 / p.ops_per_s;
        let store = p.launch_s + (1 + users) as f64 * n * d.size() as f64 / p.bytes_per_s;
        recompute > store
    }

    /// Whether a fused node only reads (through views, reshapes and casts) a buffer or a constant.
    fn pure_read(&self, id: Id) -> bool {
        if self.how[usize::from(id)] != How::Inline {
            return true;
        }
        match &self.term[id] {
            Node::Access([x, _]) => self.pure_read(*x),
            Node::Op(OpName::Reshape, args) => self.pure_read(args[0]),
            Node::Op(OpName::Cast, args) => self.pure_read(args[1]),
            Node::Op(OpName::Full, _) => true,
            _ => false,
        }
    }

    /// Whether an inlined expression would grow past what one kernel should recompute.
    fn too_big(&self, id: Id) -> bool {
        fn size(p: &Planner, id: Id, budget: &mut i64) {
            *budget -= 1;
            if *budget < 0 || p.how[usize::from(id)] != How::Inline {
                return;
            }
            for &c in p.term[id].children() {
                size(p, c, budget);
            }
        }
        let mut budget = 200;
        size(self, id, &mut budget);
        budget < 0
    }

    /// Whether buffer `x` is dead once `assign` runs: x is a buffer this plan owns, and every other reader of it
    /// is a materialized node that `assign` waits for (or feeds only such nodes).
    fn dead_after(&self, x: Id, assign: Id) -> Option<Vec<Id>> {
        if !matches!(self.how[usize::from(x)], How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_))
            && !matches!(self.term[x], Node::Carried(_) | Node::Input(_))
        {
            return None;
        }
        let mut deps = vec![false; self.term.as_ref().len()];
        let mut stack: Vec<Id> = self.term[assign].children().to_vec();
        while let Some(c) = stack.pop() {
            if !std::mem::replace(&mut deps[usize::from(c)], true) {
                // Loop bodies are run by their loop: a body's nodes are not done before the loop is.
                if !matches!(self.term[c], Node::Loop(_) | Node::While(_)) {
                    stack.extend(self.term[c].children().iter().copied());
                }
            }
        }
        fn safe(p: &Planner, c: Id, assign: Id, deps: &[bool], depth: usize) -> bool {
            if c == assign || !deps[usize::from(c)] || depth > 64 {
                return false;
            }
            match p.how[usize::from(c)] {
                How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_) | How::Fallback => true,
                How::Inline => p.users[usize::from(c)].iter().all(|&u| safe(p, u, assign, deps, depth + 1)),
                _ => matches!(p.term[c], Node::Op(OpName::ToInt, _)),
            }
        }
        // A read of x fused into this very kernel is safe where each point reads only what it writes (the same
        // view, through elementwise ops of the view's shape) or what no point writes (a disjoint view).
        let Node::Assign([_, w, _]) = self.term[assign] else { return None };
        let wshape = self.view_parts(w).map(|(s, _, _)| s);
        fn reaches(
            p: &Planner,
            c: Id,
            assign: Id,
            deps: &[bool],
            same: bool,
            ws: &Option<Vec<usize>>,
            depth: usize,
        ) -> bool {
            p.users[usize::from(c)].iter().all(|&v| {
                if v == assign {
                    return true;
                }
                let elementwise = matches!(&p.term[v], Node::Op(op, _) if crate::ir::is_unary(*op) || crate::ir::is_binary(*op)
                    || matches!(op, OpName::Where | OpName::Clamp | OpName::Cast));
                let shape_ok = p.tensor(v).map(|(_, s)| s) == *ws;
                if depth < 64 && deps[usize::from(v)] && p.how[usize::from(v)] == How::Inline && (!same || (elementwise && shape_ok)) {
                    reaches(p, v, assign, deps, same, ws, depth + 1)
                } else {
                    safe(p, v, assign, deps, depth + 1)
                }
            })
        }
        let mut first = Vec::new();
        let ok = self.users[usize::from(x)].iter().all(|&u| {
            if u == assign {
                return true;
            }
            if let (Node::Access([_, r]), How::Inline) = (&self.term[u], &self.how[usize::from(u)]) {
                match self.relation(*r, w) {
                    Some(same) if deps[usize::from(u)] => return reaches(self, u, assign, &deps, same, &wshape, 0),
                    _ => {}
                }
            }
            safe(self, u, assign, &deps, 0) || self.run_first(u, x, assign, &mut first)
        });
        ok.then_some(first)
    }

    /// Outside loops, a reader of `x` that the write does not wait for can be run before it: the materialized
    /// nodes that `u` feeds (through fused nodes) are added to `first`, if none of them needs the write itself.
    fn run_first(&self, u: Id, x: Id, assign: Id, first: &mut Vec<Id>) -> bool {
        if self.dependent[usize::from(assign)] {
            return false;
        }
        let mut frontier = Vec::new();
        let mut stack = vec![u];
        let mut seen = hashbrown::HashSet::new();
        while let Some(c) = stack.pop() {
            if c == assign || self.dependent[usize::from(c)] || seen.len() > 10_000 {
                return false;
            }
            if !seen.insert(c) {
                continue;
            }
            match self.how[usize::from(c)] {
                How::Inline => stack.extend(self.users[usize::from(c)].iter().copied()),
                How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_) | How::Fallback => {
                    if matches!(self.term[c], Node::Assign([b, _, _]) if b == x) {
                        return false;
                    }
                    frontier.push(c);
                }
                _ => return false,
            }
        }
        // None of them may depend on the write.
        for &f in &frontier {
            let mut stack = self.term[f].children().to_vec();
            let mut seen = hashbrown::HashSet::new();
            while let Some(c) = stack.pop() {
                if c == assign {
                    return false;
                }
                if seen.insert(c) {
                    stack.extend(self.term[c].children().iter().copied());
                }
            }
        }
        first.extend(frontier);
        true
    }

    /// How view `r` relates to view `w` (literal shapes and strides, offsets differing by a constant): `Some(true)`
    /// when they are the same view, `Some(false)` when they share no element, `None` otherwise.
    fn relation(&self, r: Id, w: Id) -> Option<bool> {
        let (rs, rst, roff) = self.view_parts(r)?;
        let (ws, wst, woff) = self.view_parts(w)?;
        let mut kb = KernelBuilder::default();
        let d = self.int_form(&mut kb, roff).add(&self.int_form(&mut kb, woff).scale(-1)).as_const()?;
        if rs == ws && rst == wst && d == 0 {
            return Some(true);
        }
        let (rt, wt): (Vec<isize>, Vec<isize>) =
            (rst.iter().map(|&x| x as isize).collect(), wst.iter().map(|&x| x as isize).collect());
        crate::rewrite::rules::disjoint(&ws, &wt, &rs, &rt, d).then_some(false)
    }

    /// An integer term as an index form over launch parameters.
    fn int_form(&self, kb: &mut KernelBuilder, id: Id) -> Idx {
        match &self.term[id] {
            Node::Int(c) => Idx::constant(*c),
            Node::Op(op @ (OpName::IAdd | OpName::ISub | OpName::IMul), args) => {
                let (a, b) = (self.int_form(kb, args[0]), self.int_form(kb, args[1]));
                match op {
                    OpName::IAdd => a.add(&b),
                    OpName::ISub => a.add(&b.scale(-1)),
                    _ => match (a.as_const(), b.as_const()) {
                        (Some(k), _) => b.scale(k),
                        (_, Some(k)) => a.scale(k),
                        _ => kb.param(id),
                    },
                }
            }
            _ => kb.param(id),
        }
    }

    /// The value of node `id` at multi-index `idx` of its shape.
    fn expr(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let (dtype, shape) = self.tensor(id).ok_or("expected a tensor")?;
        if self.how[usize::from(id)] != How::Inline {
            let arg = kb.arg(id, dtype);
            return Ok(Expr::Load { arg, at: ravel(idx, &shape), dtype });
        }
        self.inline(kb, id, idx, dtype, &shape)
    }

    fn operand(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let (_, s) = self.tensor(id).ok_or("expected a tensor operand")?;
        self.expr(kb, id, &broadcast(idx, &s))
    }

    fn inline(
        &self,
        kb: &mut KernelBuilder,
        id: Id,
        idx: &[Idx],
        dtype: DType,
        shape: &[usize],
    ) -> Result<Expr, String> {
        use OpName::*;
        Ok(match self.term[id].clone() {
            Node::Access([x, v]) => {
                let (vs, st, off) = self.view_parts(v).ok_or("view")?;
                let mut o = self.int_form(kb, off);
                for (i, &s) in idx.iter().zip(&st) {
                    o = o.add(&i.scale(s));
                }
                let _ = vs;
                let (_, xs) = self.tensor(x).ok_or("access base")?;
                self.expr(kb, x, &unravel(&o, &xs))?
            }
            Node::Assign([x, v, y]) => {
                let (cond, vidx) = self.membership(kb, v, idx, shape)?;
                let value = self.operand(kb, y, &vidx)?;
                let value = if value.dtype() == dtype { value } else { Expr::Cast(dtype, Box::new(value)) };
                Expr::Where(Box::new(cond), Box::new(value), Box::new(self.expr(kb, x, idx)?))
            }
            Node::Op(op, args) if unary_of(op).is_some() => {
                Expr::Unary(unary_of(op).expect("unary"), dtype, Box::new(self.operand(kb, args[0], idx)?))
            }
            Node::Op(op, args) if binary_of(op).is_some() => {
                let b = binary_of(op).expect("binary");
                let (da, _) = self.tensor(args[0]).ok_or("operand")?;
                let (l, r) = (self.operand(kb, args[0], idx)?, self.operand(kb, args[1], idx)?);
                Expr::Binary(b, compute_dtype(b, da), dtype, Box::new(l), Box::new(r))
            }
            Node::Op(Where, args) => Expr::Where(
                Box::new(self.operand(kb, args[0], idx)?),
                Box::new(self.operand(kb, args[1], idx)?),
                Box::new(self.operand(kb, args[2], idx)?),
            ),
            Node::Op(Clamp, args) => {
                let mut e = self.operand(kb, args[0], idx)?;
                for (k, b) in [(1, Binary::Maximum), (2, Binary::Minimum)] {
                    if self.tensor(args[k]).is_some() {
                        let bound = self.operand(kb, args[k], idx)?;
                        e = Expr::Binary(b, dtype, dtype, Box::new(e), Box::new(bound));
                    }
                }
                e
            }
            Node::Op(Cast, args) => Expr::Cast(dtype, Box::new(self.operand(kb, args[1], idx)?)),
            Node::Op(Full, args) => {
                let v = match self.term[args[2]] {
                    Node::Int(i) => i as f64,
                    Node::Float(f) => f.0,
                    Node::Bool(b) => b.0 as u8 as f64,
                    _ => return Err("full of a non-literal".into()),
                };
                Expr::Const(v, dtype)
            }
            Node::Op(ITensor, args) => Expr::Index(self.int_form(kb, args[0])),
            Node::Op(Arange, args) => match (&self.term[args[1]], &self.term[args[2]]) {
                (Node::Int(a), Node::Int(s)) => {
                    Expr::Cast(dtype, Box::new(Expr::Index(idx[0].scale(*s).add(&Idx::constant(*a)))))
                }
                (a, s) => {
                    let num = |n: &Node| match n {
                        Node::Int(i) => *i as f64,
                        Node::Float(f) => f.0,
                        _ => 0.0,
                    };
                    let i = Expr::Cast(DType::F64, Box::new(Expr::Index(idx[0].clone())));
                    let f = DType::F64;
                    let step = Expr::Binary(Binary::Mul, f, f, Box::new(i), Box::new(Expr::Const(num(s), f)));
                    let v = Expr::Binary(Binary::Add, f, f, Box::new(Expr::Const(num(a), f)), Box::new(step));
                    Expr::Cast(dtype, Box::new(v))
                }
            },
            Node::Op(Reshape, args) => {
                let (_, xs) = self.tensor(args[0]).ok_or("reshape")?;
                self.expr(kb, args[0], &unravel(&ravel(idx, shape), &xs))?
            }
            Node::Op(InView, args) => self.membership(kb, args[1], idx, shape)?.0,
            Node::Op(op @ (Triu | Tril), args) => {
                let k = lit(self.term, args[1]).ok_or("triangle")?;
                let r = idx.len();
                let diff = Expr::Index(idx[r - 1].add(&idx[r - 2].scale(-1)));
                let b = if op == Triu { Binary::Ge } else { Binary::Le };
                let cond = Expr::Binary(
                    b,
                    DType::I64,
                    DType::Bool,
                    Box::new(diff),
                    Box::new(Expr::Const(k as f64, DType::I64)),
                );
                let x = self.expr(kb, args[0], idx)?;
                Expr::Where(Box::new(cond), Box::new(x), Box::new(Expr::Const(0.0, dtype)))
            }
            Node::Op(Cat, args) => {
                let d = crate::tensor::views::wrap_dim(lit(self.term, args[0]).ok_or("cat dim")?, shape.len())?;
                let mut parts = Vec::new();
                let mut start = 0i64;
                for &a in &args[1..] {
                    let (_, s) = self.tensor(a).ok_or("cat part")?;
                    let mut at = idx.to_vec();
                    at[d] = idx[d].add(&Idx::constant(-start));
                    parts.push((start + s[d] as i64, self.expr(kb, a, &at)?));
                    start += s[d] as i64;
                }
                let (_, mut e) = parts.pop().ok_or("empty cat")?;
                while let Some((end, p)) = parts.pop() {
                    let c = Expr::Binary(
                        Binary::Lt,
                        DType::I64,
                        DType::Bool,
                        Box::new(Expr::Index(idx[d].clone())),
                        Box::new(Expr::Const(end as f64, DType::I64)),
                    );
                    e = Expr::Where(Box::new(c), Box::new(p), Box::new(e));
                }
                e
            }
            other => return Err(format!("`{other}` cannot be fused")),
        })
    }

    /// Whether the element at multi-index `idx` of a buffer of shape `shape` is in view `v`, and if so its
    /// multi-index within the view. A view that is a box of the buffer (each of its dims steps along one buffer dim)
    /// is tested per dim with comparisons; any other (nesting) view by its inverse, a chain of divisions.
    fn membership(
        &self,
        kb: &mut KernelBuilder,
        v: Id,
        idx: &[Idx],
        shape: &[usize],
    ) -> Result<(Expr, Vec<Idx>), String> {
        let (vs, st, off) = self.view_parts(v).ok_or("view")?;
        let off = self.int_form(kb, off);
        if let Some(r) = box_membership(&vs, &st, &off, idx, shape) {
            return Ok(r);
        }
        let at = ravel(idx, shape).add(&off.scale(-1));
        let h = kb.view(&vs, &st);
        let j = Idx::atom(Atom::ViewInv(h, Box::new(at), vs.iter().product::<usize>() as i64));
        Ok((Expr::NonNeg(j.clone()), unravel(&j, &vs)))
    }

    /// The kernel that materializes node `id`.
    fn kernel(&self, kb: &mut KernelBuilder, id: Id, name: String) -> Result<Kernel, String> {
        let (dtype, shape) = self.tensor(id).ok_or("a kernel of a non-tensor")?;
        let vars = |shape: &[usize], from: usize| -> Vec<Idx> {
            shape.iter().enumerate().map(|(k, &n)| Idx::var(from + k, n)).collect()
        };
        let mut k = Kernel {
            name,
            domain: shape.clone(),
            reduce: None,
            value: Expr::Const(0.0, dtype),
            store: ravel(&vars(&shape, 0), &shape),
            out_dtype: dtype,
            args: Vec::new(),
            params: 0,
            views: Vec::new(),
            in_place: false,
        };
        let how = self.how[usize::from(id)].clone();
        match (&self.term[id], how) {
            (Node::Assign([x, v, y]), How::InPlace(_) | How::CopyInPlace(_)) => {
                let (vs, st, off) =
                    self.view_parts(*v).ok_or("an in-place write through a view without literal strides")?;
                let (xd, _) = self.tensor(*x).ok_or("assign base")?;
                let idx = vars(&vs, 0);
                let mut store = self.int_form(kb, off);
                for (i, &s) in idx.iter().zip(&st) {
                    store = store.add(&i.scale(s));
                }
                let value = self.operand(kb, *y, &idx)?;
                k.value = if value.dtype() == xd { value } else { Expr::Cast(xd, Box::new(value)) };
                k.domain = vs;
                k.store = store;
                k.in_place = true;
            }
            (Node::Op(OpName::Matmul, args), _) => {
                let (a, b) = (args[0], args[1]);
                let (_, sa) = self.tensor(a).ok_or("matmul")?;
                let (_, sb) = self.tensor(b).ok_or("matmul")?;
                let kdim = sa[sa.len() - 1];
                let out = vars(&shape, 0);
                let red = Idx::var(shape.len(), kdim);
                let nb = shape.len() - usize::from(sa.len() > 1) - usize::from(sb.len() > 1);
                let batch = &out[..nb];
                let mut ia = broadcast(batch, &sa[..sa.len().saturating_sub(2)]);
                if sa.len() > 1 {
                    ia.push(out[nb].clone());
                }
                ia.push(red.clone());
                let mut ib = broadcast(batch, &sb[..sb.len().saturating_sub(2)]);
                ib.push(red);
                if sb.len() > 1 {
                    ib.push(out[shape.len() - 1].clone());
                }
                let (ea, eb) = (self.expr(kb, a, &ia)?, self.expr(kb, b, &ib)?);
                k.value = Expr::Binary(Binary::Mul, DType::F64, DType::F64, Box::new(ea), Box::new(eb));
                k.reduce = Some(Reduction { op: RedOp::Sum, extents: vec![kdim] });
            }
            (Node::Op(op, args), _) if self.reduction(id) => {
                use OpName::*;
                let x = args[0];
                let (_, xs) = self.tensor(x).ok_or("reduction input")?;
                let dims: Vec<usize> = match op {
                    MaxVal | MaxIdx | MinVal | MinIdx => {
                        if xs.is_empty() {
                            vec![]
                        } else {
                            vec![crate::tensor::views::wrap_dim(lit(self.term, args[1]).ok_or("dim")?, xs.len())?]
                        }
                    }
                    _ => {
                        let ds = lits(self.term, args[1]).ok_or("dims")?;
                        if ds.is_empty() {
                            (0..xs.len()).collect()
                        } else {
                            ds.iter().map(|&d| crate::tensor::views::wrap_dim(d, xs.len())).collect::<Result<_, _>>()?
                        }
                    }
                };
                let keep = matches!(self.term[args[2]], Node::Bool(b) if b.0);
                let out = vars(&shape, 0);
                let (mut oi, mut ri) = (0, 0);
                let mut xidx = Vec::new();
                let mut extents = Vec::new();
                for (d, &n) in xs.iter().enumerate() {
                    if dims.contains(&d) {
                        xidx.push(Idx::var(shape.len() + ri, n));
                        extents.push(n);
                        ri += 1;
                        if keep {
                            oi += 1;
                        }
                    } else {
                        xidx.push(out[oi].clone());
                        oi += 1;
                    }
                }
                k.value = self.expr(kb, x, &xidx)?;
                let rop = match op {
                    Sum => RedOp::Sum,
                    Mean => RedOp::Mean,
                    Prod => RedOp::Prod,
                    Amax | MaxVal => RedOp::Max,
                    Amin | MinVal => RedOp::Min,
                    Any => RedOp::Any,
                    All => RedOp::All,
                    MaxIdx => RedOp::ArgMax,
                    _ => RedOp::ArgMin,
                };
                k.reduce = Some(Reduction { op: rop, extents });
            }
            _ => {
                k.value = self.inline(kb, id, &vars(&shape, 0), dtype, &shape)?;
            }
        }
        k.args = std::iter::once(dtype).chain(kb.arg_dtypes.iter().copied()).collect();
        k.params = kb.params.len();
        k.views = kb.views.clone();
        Ok(k)
    }
}

/// The dtype a binary op computes in, for operands of dtype `d` (true division of integers computes in floats).
fn compute_dtype(b: Binary, d: DType) -> DType {
    match b {
        Binary::Div | Binary::Atan2 if !d.is_float() => DType::F32,
        _ => d,
    }
}

/// `n` row-major strides, for callers outside this module.
pub fn strides_of(shape: &[usize]) -> Vec<i64> {
    contiguous(shape)
}

impl Plan {
    /// One line per node that is not fused: how it is computed, with its kernel's domain (the plan's text form).
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (i, how) in self.how.iter().enumerate() {
            let node = &self.term[Id::from(i)];
            let shown = match node {
                Node::Op(op, _) => op.to_string(),
                other => other.to_string(),
            };
            let ty = self.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
            let _ = match how {
                How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                    let kernel = &self.kernels[*k];
                    let what = match how {
                        How::InPlace(_) => "in place",
                        How::CopyInPlace(_) => "copy, then in place",
                        _ => "new buffer",
                    };
                    let red = kernel.reduce.as_ref().map(|r| format!(" reducing {:?} over {:?}", r.op, r.extents));
                    writeln!(
                        s,
                        "${i} = {shown} {ty}: kernel {} ({what}) over {:?}{}, reads {:?}",
                        kernel.name,
                        kernel.domain,
                        red.unwrap_or_default(),
                        self.launches[*k].args.iter().map(|a| format!("${a}")).collect::<Vec<_>>()
                    )
                }
                How::Fallback => writeln!(s, "${i} = {shown} {ty}: host fallback"),
                How::Input => writeln!(s, "${i} = {shown} {ty}: input"),
                _ => Ok(()),
            };
        }
        s
    }
}

impl Plan {
    /// The plan as a Graphviz graph: buffers (inputs, kernels, fallbacks) and which kernels read which.
    pub fn dot(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("digraph plan {\n  rankdir=TB;\n  node [fontname=\"sans-serif\", fontsize=10];\n");
        for (i, how) in self.how.iter().enumerate() {
            let ty = self.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
            let (label, shape) = match how {
                How::Input => (format!("{}\\n{ty}", self.term[Id::from(i)]), "ellipse"),
                How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                    let what = match how {
                        How::InPlace(_) => " (in place)",
                        How::CopyInPlace(_) => " (copy + in place)",
                        _ => "",
                    };
                    (format!("{}{what}\\n{ty}", self.kernels[*k].name), "box")
                }
                How::Fallback => (format!("host: {}\\n{ty}", self.term[Id::from(i)]), "octagon"),
                _ => continue,
            };
            let _ = writeln!(s, "  n{i} [label=\"{}\", shape={shape}];", label.replace('"', "'"));
        }
        for l in &self.launches {
            for a in &l.args {
                let _ = writeln!(s, "  n{} -> n{};", usize::from(*a), usize::from(l.node));
            }
            if let Node::Assign([x, _, _]) = self.term[l.node] {
                if matches!(self.how[usize::from(l.node)], How::InPlace(_) | How::CopyInPlace(_)) {
                    let _ = writeln!(
                        s,
                        "  n{} -> n{} [style=dashed, label=\"base\"];",
                        usize::from(x),
                        usize::from(l.node)
                    );
                }
            }
        }
        s.push_str("}\n");
        s
    }
}
