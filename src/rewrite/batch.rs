//! Batching of a counted loop's body: a term computed in every iteration of a loop with literal bounds, rewritten as
//! one term over all iterations at once, with the iteration as a new leading dim. Shared by `loops/vectorize` (whole
//! loops whose iterations are independent) and `loops/hoist` (the part of a body that does not read carried state).
//!
//! Views must have offsets affine in the loop variable. Elementwise ops, casts, clamps, reductions (dims shifted by
//! one) and matmuls batch; anything else does not. References to enclosing loops shift down by one, as the batched
//! term lives outside the loop.

use egg::{Id, Language};
use hashbrown::HashMap;

use crate::ir::{Builder, Node, OpClass, OpName};
use crate::tensor::DType;

use super::vectorize::MAX_ELEMENTS;

/// A view `(view SHAPE STRIDES c0 + c1 * i + sym)` with literal shape and strides, where `sym` is a sum of
/// integer terms (with coefficients) that do not change inside this loop, such as enclosing loops' variables.
#[derive(Clone, Debug)]
pub(super) struct AffView {
    pub(super) shape: Vec<i64>,
    pub(super) strides: Vec<i64>,
    pub(super) c0: i64,
    pub(super) c1: i64,
    pub(super) sym: Vec<(Id, i64)>,
}

/// `c0 + c1 * i + sum(k * term)`.
pub(super) type Affine = (i64, i64, Vec<(Id, i64)>);

fn scale(a: Affine, k: i64) -> Option<Affine> {
    let sym = a.2.into_iter().map(|(t, c)| Some((t, c.checked_mul(k)?))).collect::<Option<_>>()?;
    Some((a.0.checked_mul(k)?, a.1.checked_mul(k)?, sym))
}

fn sum(a: Affine, b: Affine) -> Option<Affine> {
    let mut sym: std::collections::BTreeMap<Id, i64> = a.2.into_iter().collect();
    for (t, c) in b.2 {
        *sym.entry(t).or_insert(0) += c;
    }
    Some((a.0.checked_add(b.0)?, a.1.checked_add(b.1)?, sym.into_iter().filter(|&(_, c)| c != 0).collect()))
}

/// A batched value: loop-invariant (already shifted out of the loop), or per-iteration with its per-iteration shape.
#[derive(Clone, Debug)]
pub(super) enum B {
    Inv(Id),
    Bat(Id, Vec<usize>),
}

pub(super) struct Batch<'b> {
    pub(super) b: &'b mut Builder,
    pub(super) inputs: &'b [(String, DType, Vec<usize>)],
    pub(super) init: Id,
    pub(super) body: Vec<Id>,
    /// Iteration values: iteration t runs with i = start + step * t.
    pub(super) start: i64,
    pub(super) step: i64,
    pub(super) n: usize,
    /// Element offset -> iteration writing it, per carried value.
    pub(super) written: Vec<HashMap<i64, usize>>,
    /// The symbolic part of the offsets of the views of each carried value.
    pub(super) bases: Vec<Option<Vec<(Id, i64)>>>,
    pub(super) enumerated: usize,
    pub(super) memo: HashMap<Id, Option<B>>,
    pub(super) refs: HashMap<(Id, i64), bool>,
    pub(super) shifted: HashMap<(Id, i64), Id>,
    pub(super) state_refs: HashMap<(Id, i64), bool>,
    /// Why the loop does not batch: the first refusal's reason (`explain` prints it for a loop that stayed).
    pub(super) why: Option<String>,
}

/// Why `try_new` refuses a loop `[start, end, step, init, body]`; `None` when it would not.
pub(super) fn shape_refusal(b: &Builder, ch: [Id; 5]) -> Option<String> {
    let [start, end, step, _, body] = ch;
    Some(match (lit(b, start), lit(b, end), lit(b, step)) {
        (Some(_), Some(_), Some(s)) if s <= 0 => format!("its step ({s}) is not positive"),
        (Some(a), Some(e), Some(_)) if e <= a => "it runs no iteration".into(),
        (Some(_), Some(_), Some(_)) if !matches!(b.node(body), Node::Tuple(_)) => {
            "its body is not a tuple of carried values".into()
        }
        (Some(_), Some(_), Some(_)) => return None,
        _ => "its bounds are computed at run time (from an int argument or data), so its iterations cannot be \
              enumerated when optimizing"
            .into(),
    })
}

pub(super) fn lit(b: &Builder, id: Id) -> Option<i64> {
    match b.node(id) {
        Node::Int(i) => Some(*i),
        _ => None,
    }
}

pub(super) fn lits(b: &Builder, id: Id) -> Option<Vec<i64>> {
    match b.node(id) {
        Node::List(items) => items.iter().map(|&c| lit(b, c)).collect(),
        _ => None,
    }
}

impl<'b> Batch<'b> {
    pub(super) fn try_new(b: &'b mut Builder, ch: [Id; 5], inputs: &'b [(String, DType, Vec<usize>)]) -> Option<Self> {
        let [start, end, step, init, body] = ch;
        let (start, end, step) = (lit(b, start)?, lit(b, end)?, lit(b, step)?);
        if step <= 0 || end <= start {
            return None;
        }
        // In 128 bits (a range can span all of i64); a loop longer than any axis cannot become slices.
        let n = (end as i128 - start as i128 + step as i128 - 1) / step as i128;
        let n = usize::try_from(n).ok().filter(|&n| n <= 1 << 32)?;
        let Node::Tuple(items) = b.node(body) else { return None };
        let body = items.to_vec();
        let k = body.len();
        Some(Batch {
            b,
            inputs,
            init,
            body,
            start,
            step,
            n,
            written: vec![HashMap::new(); k],
            bases: vec![None; k],
            enumerated: 0,
            memo: HashMap::new(),
            refs: HashMap::new(),
            shifted: HashMap::new(),
            state_refs: HashMap::new(),
            why: None,
        })
    }

    /// Refuses the loop for `why` (the first reason given is kept).
    pub(super) fn refuse<T>(&mut self, why: impl FnOnce() -> String) -> Option<T> {
        if self.why.is_none() {
            self.why = Some(why());
        }
        None
    }

    pub(super) fn is_carried(&self, id: Id, j: usize) -> bool {
        matches!(self.b.node(id), Node::Carried([d, k]) if lit(self.b, *d) == Some(0) && lit(self.b, *k) == Some(j as i64))
    }

    pub(super) fn init_item(&mut self, j: usize) -> Id {
        match self.b.node(self.init) {
            Node::Tuple(items) => items[j],
            _ => {
                let jj = self.b.int(j as i64);
                self.b.add(Node::Get([self.init, jj]))
            }
        }
    }

    /// An integer term as `c0 + c1 * i + sym`, where `i` is this loop's variable.
    pub(super) fn affine(&mut self, id: Id) -> Option<Affine> {
        if !self.uses_loop(id, 0) {
            return Some(match self.b.node(id) {
                Node::Int(c) => (*c, 0, vec![]),
                _ => (0, 0, vec![(self.shift(id, 0), 1)]),
            });
        }
        match self.b.node(id).clone() {
            Node::Iter(_) => Some((0, 1, vec![])),
            Node::Op(op @ (OpName::IAdd | OpName::ISub | OpName::IMul), args) => {
                let (a, c) = (self.affine(args[0])?, self.affine(args[1])?);
                match op {
                    OpName::IAdd => sum(a, c),
                    OpName::ISub => sum(a, scale(c, -1)?),
                    _ if a.1 == 0 && a.2.is_empty() => scale(c, a.0),
                    _ if c.1 == 0 && c.2.is_empty() => scale(a, c.0),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    pub(super) fn view(&mut self, id: Id) -> Option<AffView> {
        let Node::View([s, st, off]) = self.b.node(id).clone() else { return None };
        let (c0, c1, sym) = self.affine(off)?;
        Some(AffView { shape: lits(self.b, s)?, strides: lits(self.b, st)?, c0, c1, sym })
    }

    /// Views of one carried value are compared by their offsets relative to a symbolic part they must share.
    pub(super) fn same_base(&mut self, k: usize, w: &AffView) -> bool {
        self.bases[k].get_or_insert_with(|| w.sym.clone()) == &w.sym
    }

    /// The element offsets view `w` touches in iteration `t`; None past the enumeration budget.
    pub(super) fn offsets(&mut self, w: &AffView, t: usize) -> Option<Vec<i64>> {
        let numel: i64 = w.shape.iter().product();
        self.enumerated += numel as usize;
        if self.enumerated > MAX_ELEMENTS {
            return None;
        }
        let i = self.start + self.step * t as i64;
        let mut out = vec![w.c0 + w.c1 * i];
        for (&d, &s) in w.shape.iter().zip(&w.strides) {
            out = out.iter().flat_map(|&o| (0..d).map(move |k| o + k * s)).collect();
        }
        Some(out)
    }

    pub(super) fn batched_view(&mut self, w: &AffView) -> Id {
        let shape: Vec<i64> = std::iter::once(self.n as i64).chain(w.shape.iter().copied()).collect();
        let strides: Vec<i64> = std::iter::once(w.c1 * self.step).chain(w.strides.iter().copied()).collect();
        let (s, st) = (self.b.ints(&shape), self.b.ints(&strides));
        let mut off = self.b.int(w.c0 + w.c1 * self.start);
        for &(t, k) in &w.sym {
            let k = self.b.int(k);
            let term = self.b.op(OpName::IMul, vec![k, t]);
            off = self.b.op(OpName::IAdd, vec![off, term]);
        }
        self.b.add(Node::View([s, st, off]))
    }

    /// Does `id` (seen `d` loops below this one) use this loop's variable or state?
    pub(super) fn uses_loop(&mut self, id: Id, d: i64) -> bool {
        if let Some(&r) = self.refs.get(&(id, d)) {
            return r;
        }
        let node = self.b.node(id).clone();
        let r = match &node {
            Node::Iter(x) => lit(self.b, *x) == Some(d),
            Node::Carried([x, _]) => lit(self.b, *x) == Some(d),
            Node::Loop([a, e, s, init, body]) => {
                [*a, *e, *s, *init].iter().any(|&c| self.uses_loop(c, d)) || self.uses_loop(*body, d + 1)
            }
            Node::While([init, cond, body]) => {
                self.uses_loop(*init, d) || self.uses_loop(*cond, d + 1) || self.uses_loop(*body, d + 1)
            }
            other => other.children().to_vec().into_iter().any(|c| self.uses_loop(c, d)),
        };
        self.refs.insert((id, d), r);
        r
    }

    /// Does `id` (seen `d` loops below this one) read this loop's carried state? In a pure term this is every way
    /// a value can depend on the state: an in-place write onto it is an `assign` on a `carried`.
    pub(super) fn uses_state(&mut self, id: Id, d: i64) -> bool {
        if let Some(&r) = self.state_refs.get(&(id, d)) {
            return r;
        }
        let node = self.b.node(id).clone();
        let r = match &node {
            Node::Carried([x, _]) => lit(self.b, *x) == Some(d),
            Node::Loop([a, e, s, init, body]) => {
                [*a, *e, *s, *init].iter().any(|&c| self.uses_state(c, d)) || self.uses_state(*body, d + 1)
            }
            Node::While([init, cond, body]) => {
                self.uses_state(*init, d) || self.uses_state(*cond, d + 1) || self.uses_state(*body, d + 1)
            }
            other => other.children().to_vec().into_iter().any(|c| self.uses_state(c, d)),
        };
        self.state_refs.insert((id, d), r);
        r
    }

    /// `id`, which does not use this loop, rewritten for the context outside it: references to loops enclosing
    /// this one drop by one level.
    pub(super) fn shift(&mut self, id: Id, d: i64) -> Id {
        if let Some(&r) = self.shifted.get(&(id, d)) {
            return r;
        }
        let node = self.b.node(id).clone();
        let r = match &node {
            Node::Iter(x) | Node::Carried([x, _]) if lit(self.b, *x).is_some_and(|x| x > d) => {
                let lower = self.b.int(lit(self.b, *x).unwrap() - 1);
                match node {
                    Node::Iter(_) => self.b.add(Node::Iter(lower)),
                    Node::Carried([_, j]) => self.b.add(Node::Carried([lower, j])),
                    _ => unreachable!(),
                }
            }
            Node::Loop([a, e, s, init, body]) => {
                let ch = [self.shift(*a, d), self.shift(*e, d), self.shift(*s, d), self.shift(*init, d)];
                let body = self.shift(*body, d + 1);
                self.b.add(Node::Loop([ch[0], ch[1], ch[2], ch[3], body]))
            }
            Node::While([init, cond, body]) => {
                let init = self.shift(*init, d);
                let (cond, body) = (self.shift(*cond, d + 1), self.shift(*body, d + 1));
                self.b.add(Node::While([init, cond, body]))
            }
            _ if node.children().is_empty() => id,
            _ => {
                let n = node.map_children(|c| self.shift(c, d));
                self.b.add(n)
            }
        };
        self.shifted.insert((id, d), r);
        r
    }

    /// The static shape of a loop-invariant tensor, where it is evident.
    pub(super) fn shape_of(&self, id: Id) -> Option<Vec<usize>> {
        let b = &*self.b;
        match b.node(id) {
            Node::Access([_, v]) => match b.node(*v) {
                Node::View([s, _, _]) => lits(b, *s).map(|s| s.into_iter().map(|d| d as usize).collect()),
                _ => None,
            },
            Node::Input(name) => match b.node(*name) {
                Node::Name(n) => match self.inputs.iter().find(|(k, _, _)| *k == n.0) {
                    Some((_, _, s)) => Some(s.clone()),
                    None => crate::ir::consts::type_of(&n.0).map(|(_, s)| s),
                },
                _ => None,
            },
            Node::Op(OpName::Full, args) => lits(b, args[0]).map(|s| s.into_iter().map(|d| d as usize).collect()),
            Node::Op(OpName::Cast, args) => self.shape_of(args[1]),
            Node::Op(OpName::Clamp, args) => self.shape_of(args[0]),
            Node::Op(op, args) if op.class() == OpClass::Unary => self.shape_of(args[0]),
            Node::Op(op, args) if op.class() == OpClass::Binary || *op == OpName::Where => {
                let mut out = Vec::new();
                for &a in args.iter() {
                    out = crate::tensor::ops::broadcast_shapes(&out, &self.shape_of(a)?).ok()?;
                }
                Some(out)
            }
            _ => None,
        }
    }

    /// A batched value of per-iteration shape `shape` with ones inserted after the iteration dim, up to `rank`.
    pub(super) fn lift(&mut self, id: Id, shape: &[usize], rank: usize) -> Option<Id> {
        if shape.len() >= rank {
            return Some(id);
        }
        let mut to = vec![self.n as i64];
        to.extend(std::iter::repeat_n(1, rank - shape.len()));
        to.extend(shape.iter().map(|&d| d as i64));
        let l = self.b.ints(&to);
        Some(self.b.op(OpName::Reshape, vec![id, l]))
    }

    pub(super) fn batch(&mut self, id: Id) -> Option<B> {
        if let Some(r) = self.memo.get(&id) {
            return r.clone();
        }
        let r = self.batch_uncached(id);
        self.memo.insert(id, r.clone());
        r
    }

    pub(super) fn batch_uncached(&mut self, id: Id) -> Option<B> {
        if !self.uses_loop(id, 0) {
            return Some(B::Inv(self.shift(id, 0)));
        }
        let node = self.b.node(id).clone();
        match node {
            Node::Access([x, v]) => {
                let w = self.view(v)?;
                let view = self.batched_view(&w);
                let shape = w.shape.iter().map(|&d| d as usize).collect();
                // An enclosing loop's state is invariant here, like any value computed outside this loop.
                let own = matches!(self.b.node(x), Node::Carried([d, _]) if lit(self.b, *d) == Some(0));
                let src = if let (true, Node::Carried([_, k])) = (own, self.b.node(x).clone()) {
                    let k = lit(self.b, k)? as usize;
                    if k >= self.bases.len() || !self.same_base(k, &w) {
                        return self.refuse(|| format!("carried value {k} is read through views of another base"));
                    }
                    for t in 0..self.n {
                        for off in self.offsets(&w, t)? {
                            if let Some(wt) = self.written.get(k)?.get(&off).copied().filter(|&wt| wt < t) {
                                return self.refuse(|| {
                                    format!(
                                        "iteration {t} reads element {off} of carried value {k}, which iteration \
                                         {wt} wrote (a dependence between iterations)"
                                    )
                                });
                            }
                        }
                    }
                    self.init_item(k)
                } else if !self.uses_loop(x, 0) {
                    self.shift(x, 0)
                } else {
                    return self.refuse(|| "it reads through views of a value each iteration computes anew".into());
                };
                Some(B::Bat(self.b.add(Node::Access([src, view])), shape))
            }
            // The loop variable as a tensor: one entry per iteration.
            Node::Op(OpName::ITensor, args) => {
                let (c0, c1, sym) = self.affine(args[0])?;
                if !sym.is_empty() {
                    return None;
                }
                let d = self.b.add(Node::DType(DType::I64));
                let (a, s, n) =
                    (self.b.int(c0 + c1 * self.start), self.b.int(c1 * self.step), self.b.int(self.n as i64));
                Some(B::Bat(self.b.op(OpName::Arange, vec![d, a, s, n]), vec![]))
            }
            Node::Op(op, args) => {
                let r = self.batch_op(op, &args);
                if r.is_none() {
                    return self.refuse(|| format!("`{op}` in its body does not batch across iterations"));
                }
                r
            }
            other => self.refuse(|| format!("`{other}` in its body does not batch across iterations")),
        }
    }

    pub(super) fn batch_op(&mut self, op: OpName, args: &[Id]) -> Option<B> {
        use OpName::*;
        if op.is_elementwise() {
            let first = usize::from(op == Cast);
            let mut parts = Vec::new();
            for &a in &args[first..] {
                parts.push(self.batch(a)?);
            }
            // The per-iteration result rank: every batched operand is lifted to it.
            let mut rank = 0;
            for (p, &a) in parts.iter().zip(&args[first..]) {
                rank = rank.max(match p {
                    B::Bat(_, s) => s.len(),
                    B::Inv(_) if matches!(self.b.node(a), Node::NoneLit) => 0,
                    B::Inv(_) => self.shape_of(a)?.len(),
                });
            }
            let mut shape = Vec::new();
            let mut ids = args[..first].to_vec();
            for (p, &a) in parts.iter().zip(&args[first..]) {
                match p {
                    B::Bat(id, s) => {
                        shape = crate::tensor::ops::broadcast_shapes(&shape, s).ok()?;
                        ids.push(self.lift(*id, s, rank)?);
                    }
                    B::Inv(id) => {
                        if !matches!(self.b.node(a), Node::NoneLit) {
                            shape = crate::tensor::ops::broadcast_shapes(&shape, &self.shape_of(a)?).ok()?;
                        }
                        ids.push(*id);
                    }
                }
            }
            return Some(B::Bat(self.b.op(op, ids), shape));
        }
        if op == Matmul {
            return self.batch_matmul(args);
        }
        let B::Bat(x, s) = self.batch(args[0])? else { return None };
        let rank = s.len() as i64;
        // A dim of the per-iteration value, as a dim of the batched one.
        let wrap = |d: i64| {
            if d >= 0 && d < rank {
                Some(d + 1)
            } else if d < 0 && d >= -rank {
                Some(d)
            } else {
                None
            }
        };
        let keep = |b: &Builder, k: Id| matches!(b.node(k), Node::Bool(x) if x.0);
        match op {
            _ if op.is_reduction() => {
                let dims = match op {
                    MaxVal | MaxIdx | MinVal | MinIdx => vec![lit(self.b, args[1])?],
                    _ => lits(self.b, args[1])?,
                };
                if dims.is_empty() || rank == 0 {
                    return None;
                }
                let mut wrapped = Vec::new();
                for &d in &dims {
                    wrapped.push(wrap(d)?);
                }
                let mut shape = Vec::new();
                for (k, &len) in s.iter().enumerate() {
                    let reduced = dims.iter().any(|&d| (d.rem_euclid(rank)) as usize == k);
                    if !reduced {
                        shape.push(len);
                    } else if keep(self.b, args[2]) {
                        shape.push(1);
                    }
                }
                let dims = match op {
                    MaxVal | MaxIdx | MinVal | MinIdx => self.b.int(wrapped[0]),
                    _ => self.b.ints(&wrapped),
                };
                Some(B::Bat(self.b.op(op, vec![x, dims, args[2]]), shape))
            }
            Softmax | LogSoftmax | Cumsum | Cumprod => {
                let d = self.b.int(wrap(lit(self.b, args[1])?)?);
                Some(B::Bat(self.b.op(op, vec![x, d]), s))
            }
            // A row-major reshape of each iteration's value is one of the batched value, behind its first dim.
            Reshape => {
                let to = lits(self.b, args[1])?;
                if to.iter().any(|&d| d < 0) || to.iter().product::<i64>() != s.iter().product::<usize>() as i64 {
                    return None;
                }
                let mut all = vec![self.n as i64];
                all.extend(&to);
                let l = self.b.ints(&all);
                Some(B::Bat(self.b.op(op, vec![x, l]), to.iter().map(|&d| d as usize).collect()))
            }
            // A max's values read at its indices: both carry the iteration dim (a fixed index would need one).
            Gather => {
                let B::Bat(i, is) = self.batch(args[2])? else { return None };
                if is.len() != s.len() {
                    return None;
                }
                let d = self.b.int(wrap(lit(self.b, args[1])?)?);
                Some(B::Bat(self.b.op(op, vec![x, d, i]), is))
            }
            _ => None,
        }
    }

    /// `a @ b` per iteration as one (batched) matmul: a batched operand's iteration dim becomes a batch dim, which
    /// is right unless it would be read as a matrix dim (a batched vector on the right, or beside a batched `b`).
    pub(super) fn batch_matmul(&mut self, args: &[Id]) -> Option<B> {
        let (a, b) = (self.batch(args[0])?, self.batch(args[1])?);
        let shape = |me: &Self, p: &B, id: Id| match p {
            B::Bat(_, s) => Some(s.clone()),
            B::Inv(_) => me.shape_of(id),
        };
        let (sa, sb) = (shape(self, &a, args[0])?, shape(self, &b, args[1])?);
        match (&a, &b) {
            (_, B::Bat(..)) if sb.len() < 2 => return None,
            (B::Bat(..), B::Bat(..)) if sa.len() < 2 => return None,
            _ => {}
        }
        let out = crate::ir::matmul_shape(&sa, &sb).ok()?;
        // The iteration dim must lead the result's batch dims: a batched matrix with fewer batch dims than the
        // result gets ones after it (else it would line up with the other operand's own batch dims); a batched
        // vector on the left is read as a matrix only beside a matrix.
        if matches!(a, B::Bat(..)) && sa.len() < 2 && sb.len() > 2 {
            return None;
        }
        let mut ids = Vec::new();
        for (p, s) in [(&a, &sa), (&b, &sb)] {
            ids.push(match p {
                B::Bat(id, _) if s.len() >= 2 => self.lift(*id, s, out.len())?,
                B::Bat(id, _) | B::Inv(id) => *id,
            });
        }
        Some(B::Bat(self.b.op(OpName::Matmul, ids), out))
    }
}
