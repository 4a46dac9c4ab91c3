//! Building kernels by fusion: the value of a node at a multi-index, with every fused operand inlined and every
//! buffer read through an index form; view-scatters as predicated selects; reductions and matmuls with their
//! prologues.

use egg::Id;

use super::index::{contiguous, ravel, unravel, Atom, Idx};
use super::kernel::{Dot, Expr, Kernel, RedOp, Reduction};
use super::plan::{lit, lits, How, IndexCheck, Planner};
use crate::ir::{Node, OpName};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

#[derive(Default)]
pub(super) struct KernelBuilder {
    pub(super) args: Vec<Id>,
    pub(super) params: Vec<Id>,
    pub(super) views: Vec<(Vec<usize>, Vec<i64>)>,
    pub(super) arg_dtypes: Vec<DType>,
    /// While building an epilogue: the reduction whose value it reads (as `red`, at the kernel's own point).
    acc: Option<Id>,
    /// Index buffers of gathers and scatters and the ranges they must lie in.
    pub(super) checks: Vec<IndexCheck>,
    /// The small values the kernel computes before its nest ([`Kernel::pre`]), in order, with their nodes.
    pres: Vec<(Id, Kernel)>,
}

impl KernelBuilder {
    pub(super) fn arg(&mut self, id: Id, d: DType) -> usize {
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

    pub(super) fn check(&mut self, c: IndexCheck) {
        if !self.checks.contains(&c) {
            self.checks.push(c);
        }
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
    /// An integer term as an index form over launch parameters.
    pub(super) fn int_form(&self, kb: &mut KernelBuilder, id: Id) -> Idx {
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
    pub(super) fn expr(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let (dtype, shape) = self.tensor(id).ok_or("expected a tensor")?;
        if kb.acc == Some(id) {
            if idx != own_point(&shape).as_slice() {
                return Err("an epilogue reads its reduction at another point".into());
            }
            return Ok(Expr::Acc(dtype));
        }
        if self.how[usize::from(id)] != How::Inline {
            let arg = kb.arg(id, dtype);
            return Ok(Expr::Load { arg, at: ravel(idx, &shape), dtype });
        }
        if self.pres.contains(&id) {
            let slot = self.pre(kb, id)?;
            return Ok(Expr::Local { slot, at: ravel(idx, &shape), dtype });
        }
        self.inline(kb, id, idx, dtype, &shape)
    }

    /// The slot of small value `id` among the kernel's pres, built (after the pres it reads) where it is new.
    fn pre(&self, kb: &mut KernelBuilder, id: Id) -> Result<usize, String> {
        if let Some(slot) = kb.pres.iter().position(|(n, _)| *n == id) {
            return Ok(slot);
        }
        let k = self.kernel_of(kb, id, format!("pre{}", kb.pres.len()))?.without_empty_reduction();
        kb.pres.push((id, k));
        Ok(kb.pres.len() - 1)
    }

    pub(super) fn operand(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let (_, s) = self.tensor(id).ok_or("expected a tensor operand")?;
        self.expr(kb, id, &broadcast(idx, &s))
    }

    /// Whether `v` is a view of no elements: a write through it changes nothing, and its value `y` has no element
    /// to read. PyTorch computes the value first, so the bounds checks of its run-time indices are collected all the
    /// same (fuzz seed 162609: `e.copy_(a[idx[2].item()])` with `e` empty raised nowhere in the fused plan); the
    /// expression itself is dropped (a value the builder cannot express adds no check). The view's own run-time
    /// indices are checked as well, as [`Self::membership`] does (fuzz seed 260456: `e.select(2, k)` of an empty
    /// `e`, with `k` out of range, raised nowhere in the C plan).
    fn writes_nothing(&self, kb: &mut KernelBuilder, v: Id, y: Id) -> bool {
        let Some((vs, _, off)) = self.view_parts(v).filter(|(vs, _, _)| vs.contains(&0)) else { return false };
        let _ = self.int_form(kb, off);
        let _ = self.operand(kb, y, &vec![Idx::constant(0); vs.len()]);
        true
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
                let (_, st, off) = self.view_parts(v).ok_or("view")?;
                let mut o = self.int_form(kb, off);
                for (i, &s) in idx.iter().zip(&st) {
                    o = o.add(&i.scale(s));
                }
                let (_, xs) = self.tensor(x).ok_or("access base")?;
                self.expr(kb, x, &unravel(&o, &xs))?
            }
            Node::Assign([x, v, y]) => {
                if self.writes_nothing(kb, v, y) {
                    return self.expr(kb, x, idx);
                }
                let (cond, vidx) = self.membership(kb, v, idx, shape)?;
                let value = self.operand(kb, y, &vidx)?;
                let value = if value.dtype() == dtype { value } else { Expr::Cast(dtype, Box::new(value)) };
                Expr::Where(Box::new(cond), Box::new(value), Box::new(self.expr(kb, x, idx)?))
            }
            Node::Op(op, args) if op.unary().is_some() => {
                Expr::Unary(op.unary().expect("unary"), dtype, Box::new(self.operand(kb, args[0], idx)?))
            }
            Node::Op(op, args) if op.binary().is_some() => {
                let b = op.binary().expect("binary");
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
            Node::Op(Index, args) if args.len() == 2 && self.tensor(args[1]).is_some() => {
                let (xd, xs) = self.tensor(args[0]).ok_or("gather table")?;
                let (_, is) = self.tensor(args[1]).ok_or("gather index")?;
                if self.how[usize::from(args[0])] == How::Inline || self.how[usize::from(args[1])] == How::Inline {
                    return Err("a gather's table and index must be buffers".into());
                }
                let index = self.expr(kb, args[1], &idx[..is.len()])?;
                let mut at = vec![Idx::constant(0)];
                at.extend(idx[is.len()..].iter().cloned());
                let arg = kb.arg(args[0], xd);
                kb.check(IndexCheck { node: args[1], extent: xs[0] as i64, dim: 0, wraps: true });
                Expr::Gather {
                    arg,
                    at: ravel(&at, &xs),
                    index: Box::new(index),
                    stride: contiguous(&xs)[0],
                    extent: xs[0] as i64,
                    dtype: xd,
                }
            }
            Node::Op(Index, _) => self.multi_gather(kb, id, idx)?,
            Node::Op(Gather, _) => self.gather(kb, id, idx)?,
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
            Node::Op(Matmul, args) => self.dot(kb, args[0], args[1], idx)?,
            other => return Err(format!("`{other}` cannot be fused")),
        })
    }

    /// A matmul's element at `idx`, computed where it is read ([`Dot`]): both operands f32 reads of buffers whose
    /// positions step by a constant along the reduction (a row of a gather's table too, at a position that reads the
    /// index buffer). A left operand that is a fused `cat` along the reduction (`cat([x, h], 1) @ w`) is a sum of
    /// one dot per piece, each with the rows of `b` the piece meets.
    fn dot(&self, kb: &mut KernelBuilder, a: Id, b: Id, idx: &[Idx]) -> Result<Expr, String> {
        let (_, sa) = self.tensor(a).ok_or("matmul")?;
        let last = sa.len() - 1;
        let pieces = match &self.term[a] {
            Node::Op(OpName::Cat, args)
                if self.how[usize::from(a)] == How::Inline && lit(self.term, args[0]) == Some(last as i64) =>
            {
                args[1..].to_vec()
            }
            _ => vec![a],
        };
        let mut sum: Option<Expr> = None;
        let mut from = 0;
        for p in pieces {
            let (_, sp) = self.tensor(p).ok_or("matmul")?;
            let dot = self.dot_piece(kb, (p, &sp), b, idx, from)?;
            from += sp[last];
            let f = DType::F32;
            sum = Some(match sum {
                None => dot,
                Some(s) => Expr::Binary(Binary::Add, f, f, Box::new(s), Box::new(dot)),
            });
        }
        sum.ok_or_else(|| "an empty cat".into())
    }

    /// The dot of operand `a` (of shape `sa`) with the rows `from..` of `b` at `idx`.
    fn dot_piece(
        &self,
        kb: &mut KernelBuilder,
        (a, sa): (Id, &[usize]),
        b: Id,
        idx: &[Idx],
        from: usize,
    ) -> Result<Expr, String> {
        const K: usize = usize::MAX >> 1;
        let (_, sb) = self.tensor(b).ok_or("matmul")?;
        let len = sa[sa.len() - 1];
        let (ia, _) = matmul_indices(idx, sa, &sb, Idx::var(K, len));
        let (_, ib) = matmul_indices(idx, sa, &sb, Idx::var(K, len).add(&Idx::constant(from as i64)));
        let split = |e: Expr| -> Result<(usize, Idx, i64), String> {
            let (arg, mut at) = match e {
                Expr::Load { arg, at, dtype: DType::F32 } => (arg, at),
                // A row of a gather's table: its index read where the position is.
                Expr::Gather { arg, at, index, stride, extent, dtype: DType::F32 } => match *index {
                    Expr::Load { arg: i, at: ix, dtype: DType::I64 | DType::I32 } => {
                        let row = Idx::atom(Atom::Load(i, Box::new(ix), extent, true));
                        (arg, at.add(&row.scale(stride)))
                    }
                    _ => return Err("a fused matmul's gathered operand must read its index from a buffer".into()),
                },
                _ => return Err("a fused matmul's operands must be f32 reads of buffers".into()),
            };
            let step = at.terms.remove(&Atom::Var(K, len as i64)).unwrap_or(0);
            if at.mentions(K) {
                return Err("a fused matmul's operand must step by a constant along the reduction".into());
            }
            Ok((arg, at, step))
        };
        let (a, a_at, a_step) = split(self.expr(kb, a, &ia)?)?;
        let (b, b_at, b_step) = split(self.expr(kb, b, &ib)?)?;
        Ok(Expr::Dot(Box::new(Dot { a, a_at, a_step, b, b_at, b_step, len })))
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
        if vs.contains(&0) || shape.contains(&0) {
            // An empty view holds no element; its size-0 dims must not be taken for size-1 ones. Its offset's
            // run-time indices are still bounds-checked, as PyTorch checks them taking the view (fuzz seed 175197:
            // `d.narrow(1, 3, 0)[idx[1].item()].sigmoid_()` raised nowhere in the fused plan).
            let _ = self.int_form(kb, off);
            return Ok((Expr::Const(0.0, DType::Bool), vec![Idx::constant(0); vs.len()]));
        }
        let off = self.int_form(kb, off);
        if let Some(r) = box_membership(&vs, &st, &off, idx, shape) {
            return Ok(r);
        }
        let at = ravel(idx, shape).add(&off.scale(-1));
        let h = kb.view(&vs, &st);
        let j = Idx::atom(Atom::ViewInv(h, Box::new(at), vs.iter().product::<usize>() as i64));
        Ok((Expr::NonNeg(j.clone()), unravel(&j, &vs)))
    }

    /// Whether the view `v` of an `assign` into base `x` names every element of `x` exactly once (its offsets are
    /// `0..numel` in some order), so that the write needs none of the base's values. Only for a base that loses
    /// nothing unread, an input or a fill: any other base could hold a check that must still raise (an index out of
    /// range), in a kernel or host step that nothing else would run, or fused into the write, where the select over
    /// the buffer keeps it.
    fn covering_view(&self, x: Id, v: Id) -> bool {
        if self.how[usize::from(x)] != How::Input && !matches!(self.term[x], Node::Op(OpName::Full, _)) {
            return false;
        }
        let (Some((_, xs)), Some((vs, st, off))) = (self.tensor(x), self.view_parts(v)) else { return false };
        let Node::Int(off) = self.term[off] else { return false };
        let strides: Vec<isize> = st.iter().map(|&s| s as isize).collect();
        vs.iter().product::<usize>() == xs.iter().product::<usize>()
            && crate::ir::geometry::is_permutation(&vs, &strides, off)
    }

    /// The kernel that materializes node `id`, with the small values it reads as its pres (which read its
    /// arguments, and none its output: `pre.rs` refuses a pre over a buffer written in place).
    pub(super) fn kernel(&self, kb: &mut KernelBuilder, id: Id, name: String) -> Result<Kernel, String> {
        let mut k = self.kernel_of(kb, id, name)?;
        k.pre = std::mem::take(&mut kb.pres)
            .into_iter()
            .map(|(_, p)| {
                let args = std::iter::once(p.out_dtype).chain(k.args[1..].iter().copied()).collect();
                Kernel { args, params: k.params, views: k.views.clone(), ..p }
            })
            .collect();
        Ok(k)
    }

    /// The kernel that materializes node `id`, its pres left in `kb`.
    fn kernel_of(&self, kb: &mut KernelBuilder, id: Id, name: String) -> Result<Kernel, String> {
        let (dtype, shape) = self.tensor(id).ok_or("a kernel of a non-tensor")?;
        if let Some(&r) = self.epilogue.get(&id) {
            let mut k = self.kernel_of(kb, r, name)?;
            let (rd, rs) = self.tensor(r).ok_or("a reduction of a non-tensor")?;
            kb.acc = Some(r);
            // The kernel's points are the reduction's; a reader of another shape with as many elements (a reshape
            // of it, `ctx = (attn @ memory).unsqueeze(0)`) is evaluated at the point of the same row-major position,
            // which is where both store.
            let at = if rs == shape { own_point(&shape) } else { unravel(&ravel(&own_point(&rs), &rs), &shape) };
            let e = self.inline(kb, id, &at, dtype, &shape);
            kb.acc = None;
            k.epilogue = Some((rd, e?));
            k.out_dtype = dtype;
            k.args = std::iter::once(dtype).chain(kb.arg_dtypes.iter().copied()).collect();
            k.params = kb.params.len();
            k.views = kb.views.clone();
            return Ok(k);
        }
        let vars = |shape: &[usize], from: usize| -> Vec<Idx> {
            shape.iter().enumerate().map(|(k, &n)| Idx::var(from + k, n)).collect()
        };
        let mut k = Kernel {
            name,
            domain: shape.clone(),
            reduce: None,
            value: Expr::Const(0.0, dtype),
            epilogue: None,
            store: ravel(&vars(&shape, 0), &shape),
            out_dtype: dtype,
            args: Vec::new(),
            params: 0,
            views: Vec::new(),
            in_place: false,
            flat: false,
            pre: Vec::new(),
        };
        let how = self.how[usize::from(id)].clone();
        // A write into its base's buffer, or into a fresh buffer that the view writes whole: the kernel runs over the
        // view and stores through it (for a fresh buffer, with no select over the buffer, which would recover each
        // element's view index by divisions).
        let through_view = match (&self.term[id], &how) {
            (Node::Assign(_), How::InPlace(_) | How::CopyInPlace(_)) => true,
            (Node::Assign([x, v, _]), How::Kernel(_)) => self.covering_view(*x, *v),
            _ => false,
        };
        match (&self.term[id], how) {
            (Node::Assign([x, v, y]), _) if through_view => {
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
                k.in_place = !matches!(how, How::Kernel(_));
            }
            (Node::Op(OpName::IndexPut | OpName::Scatter, _), How::InPlace(_) | How::CopyInPlace(_)) => {
                self.scatter_kernel(kb, id, &mut k)?;
            }
            (Node::Op(OpName::Matmul, args), _) => {
                let (a, b) = (args[0], args[1]);
                let (_, sa) = self.tensor(a).ok_or("matmul")?;
                let (_, sb) = self.tensor(b).ok_or("matmul")?;
                let kdim = sa[sa.len() - 1];
                let (ia, ib) = matmul_indices(&vars(&shape, 0), &sa, &sb, Idx::var(shape.len(), kdim));
                let (ea, eb) = (self.expr(kb, a, &ia)?, self.expr(kb, b, &ib)?);
                // f32 operands multiply in f32 (and the C backend sums f32 in lanes, as PyTorch's CPU kernels do);
                // others in double, where a product of two floats is exact.
                let f = if (ea.dtype(), eb.dtype()) == (DType::F32, DType::F32) { DType::F32 } else { DType::F64 };
                k.value = Expr::Binary(Binary::Mul, f, f, Box::new(ea), Box::new(eb));
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

/// The positions a matmul of operands of shapes `sa` and `sb` reads for its output element `out`, at reduction
/// index `red`.
fn matmul_indices(out: &[Idx], sa: &[usize], sb: &[usize], red: Idx) -> (Vec<Idx>, Vec<Idx>) {
    let nb = out.len() - usize::from(sa.len() > 1) - usize::from(sb.len() > 1);
    let batch = &out[..nb];
    let mut ia = broadcast(batch, &sa[..sa.len().saturating_sub(2)]);
    if sa.len() > 1 {
        ia.push(out[nb].clone());
    }
    ia.push(red.clone());
    let mut ib = broadcast(batch, &sb[..sb.len().saturating_sub(2)]);
    ib.push(red);
    if sb.len() > 1 {
        ib.push(out[out.len() - 1].clone());
    }
    (ia, ib)
}

/// The multi-index of a kernel's own point over a domain of `shape` (its first variables).
fn own_point(shape: &[usize]) -> Vec<Idx> {
    shape.iter().enumerate().map(|(k, &n)| Idx::var(k, n)).collect()
}

/// The dtype a binary op computes in, for operands of dtype `d` (true division of integers computes in floats).
pub(super) fn compute_dtype(b: Binary, d: DType) -> DType {
    match b {
        Binary::Div | Binary::Atan2 if !d.is_float() => DType::F32,
        _ => d,
    }
}
