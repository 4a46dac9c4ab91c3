//! The host's part of a run: ops no kernel computes (fallbacks), run with the functional interpreter's
//! implementation, and sorts.

use std::collections::BTreeMap;
use std::rc::Rc;

use egg::{Id, Language};

use super::{Device, Executor, Val, R};
use crate::ir::{eval_program, Builder, Node, Ty};
use crate::tensor::{DType, Tensor};

impl<D: Device> Executor<'_, D> {
    /// The sub-term at `id` (a view, a list of dims) copied for a fallback's own term, with every integer in it
    /// evaluated here: an integer may read a loop's index or carried state, which the copy, outside the loop, has not
    /// (fuzz seed 4212: a write into a view whose offset is `2 - i`).
    fn copy_with_ints(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>, b: &mut Builder) -> R<Id> {
        let node = self.plan.term[id].clone();
        if matches!(self.plan.types[usize::from(id)], Some(Ty::Int)) && !matches!(node, Node::Int(_)) {
            let v = self.int(id, inputs)?;
            return Ok(b.int(v));
        }
        let mut kids = Vec::new();
        for &c in node.children() {
            kids.push(self.copy_with_ints(c, inputs, b)?);
        }
        let mut it = kids.into_iter();
        Ok(b.add(node.map_children(|_| it.next().expect("one new child per child"))))
    }

    /// Runs one op with the functional interpreter: its tensor operands are downloaded, the op is evaluated as a
    /// one-node term, and the result is uploaded.
    pub(super) fn fallback(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let plan = self.plan;
        if let Some(&sort) = plan.host_sorts.get(&id) {
            return self.sort(id, sort, inputs);
        }
        if let Node::Op(op @ (crate::ir::OpName::Cumsum | crate::ir::OpName::Cumprod), args) = &plan.term[id] {
            return self.scan(*op, args[0], args[1], inputs);
        }
        let mut b = Builder::default();
        let mut tensors = BTreeMap::new();
        let node = plan.term[id].clone();
        let mut kids = Vec::new();
        for (k, &c) in node.children().iter().enumerate() {
            let new = match &plan.types[usize::from(c)] {
                Some(Ty::Tensor(..)) => {
                    let (buf, d, s) = self.tensor(c, inputs)?;
                    let name = format!("a{k}");
                    let t = self.dev.download(&buf, d, &s)?;
                    self.stats.bytes += (t.numel() * d.size()) as f64;
                    self.stats.class(crate::cost::class::FALLBACK, 0.0, (t.numel() * d.size()) as f64, 0.0, 0.0);
                    tensors.insert(name.clone(), t);
                    let n = b.add(Node::Name(crate::ir::ParamName(name)));
                    b.add(Node::Input(n))
                }
                Some(Ty::Int) => {
                    let v = self.int(c, inputs)?;
                    b.int(v)
                }
                _ => self.copy_with_ints(c, inputs, &mut b)?,
            };
            kids.push(new);
        }
        // A result with no elements computes nothing (fuzz seed 4212's write into an empty view): its operands are
        // computed (their errors are the program's), the op is not evaluated.
        if let Some(Ty::Tensor(d, shape)) = &plan.types[usize::from(id)] {
            if shape.contains(&0) {
                self.count_host_op(0.0);
                let t = Tensor::zeros(*d, shape)?;
                return Ok(Val::T(self.hand_over(&t)?, *d, shape.clone().into()));
            }
        }
        let mut it = kids.into_iter();
        let n = node.map_children(|_| it.next().expect("one new child per child"));
        let root = b.add(n);
        let tup = b.add(Node::Tuple(vec![root].into()));
        let term = b.extract(tup);
        let out = eval_program(&term, &tensors).map_err(|e| e.0)?;
        let t = out.into_iter().next().ok_or("a fallback op gave nothing")?;
        self.stats.fallbacks += 1;
        self.stats.launches += 1;
        self.stats.bytes += (t.numel() * t.dtype().size()) as f64;
        self.stats.class(crate::cost::class::FALLBACK, 1.0, (t.numel() * t.dtype().size()) as f64, 0.0, 0.0);
        let (d, s) = (t.dtype(), t.shape.clone());
        Ok(Val::T(self.dev.upload(&t)?, d, s.into()))
    }

    /// `cumsum`/`cumprod` on the host, by the reference's own kernel (`reduce::cumsum`, as the one-node term of
    /// [`Executor::fallback`] would evaluate it, without building one: on small tensors that was most of the time).
    fn scan(&mut self, op: crate::ir::OpName, x: Id, dim: Id, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let (buf, d, s) = self.tensor(x, inputs)?;
        let dim = self.int(dim, inputs)?;
        let x = self.dev.download(&buf, d, &s)?;
        let out = match op {
            crate::ir::OpName::Cumsum => crate::tensor::reduce::cumsum(&x, dim, None)?,
            _ => crate::tensor::reduce::cumprod(&x, dim, None)?,
        };
        self.count_host_op((x.numel() * d.size() + out.numel() * out.dtype().size()) as f64);
        let (od, shape) = (out.dtype(), out.shape.clone());
        Ok(Val::T(self.hand_over(&out)?, od, shape.into()))
    }

    /// One op the host ran, moving `bytes` in all (its reads and writes), in the run's counts.
    fn count_host_op(&mut self, bytes: f64) {
        self.stats.fallbacks += 1;
        self.stats.launches += 1;
        self.stats.bytes += bytes;
        self.stats.class(crate::cost::class::FALLBACK, 1.0, bytes, 0.0, 0.0);
    }

    /// A fresh tensor that nothing else holds, as a device buffer: a device that can take its memory (the C
    /// device) does so rather than copying it.
    fn hand_over(&mut self, t: &Tensor) -> R<D::Buf> {
        match self.dev.adopt(t)? {
            Some(b) => Ok(b),
            None => self.dev.upload(t),
        }
    }

    /// A sort on the host ([`crate::lower::sorts`]): both outputs at once (the sibling's is remembered for its own
    /// evaluation), and only the leading part of each line that is read.
    fn sort(
        &mut self,
        id: Id,
        sort: crate::lower::sorts::HostSort,
        inputs: &BTreeMap<String, Tensor>,
    ) -> R<Val<D::Buf>> {
        let Node::Op(op, args) = &self.plan.term[id] else { return Err(format!("node {id} is not a sort")) };
        let (buf, d, s) = self.tensor(args[0], inputs)?;
        let (dim, descending) = (self.int(args[1], inputs)?, self.int(args[2], inputs)? != 0);
        let ties = crate::tensor::ties::Ties::from_code(self.int(args[3], inputs)?, self.int(args[4], inputs)?)?;
        let x = self.dev.download(&buf, d, &s)?;
        // Along the last dim on a device whose buffers are host memory, the results go straight into buffers of
        // its own, uninitialized: nothing reads past the prefix (`sorts.rs`), so no full-size zeroing.
        let last = crate::tensor::views::wrap_dim(dim, x.dim()).is_ok_and(|d| d + 1 >= x.dim());
        let (values, indices, bufs) = if last && self.dev.host_memory() {
            let (vb, ib) = (self.dev.alloc_uninit(d, x.numel())?, self.dev.alloc_uninit(DType::I64, x.numel())?);
            let views = (self.dev.host_view(&vb, d, &s), self.dev.host_view(&ib, DType::I64, &s));
            let (Some(v), Some(i)) = views else { return Err("a host-memory device gave no host view".into()) };
            crate::tensor::index::sort_prefix_into(&x, descending, sort.prefix, ties, &v, &i)?;
            (v, i, Some((vb, ib)))
        } else {
            let (v, i) = crate::tensor::index::sort_prefix(&x, dim, descending, sort.prefix, ties)?;
            (v, i, None)
        };
        let bytes = (x.numel() * d.size()) as f64;
        let (value_bytes, index_bytes) = ((values.numel() * d.size()) as f64, (indices.numel() * 8) as f64);
        // What is uploaded: this node's output, and its sibling's where there is one.
        let written = match (op, sort.sibling) {
            (_, Some(_)) => value_bytes + index_bytes,
            (crate::ir::OpName::SortVal, None) => value_bytes,
            _ => index_bytes,
        };
        self.count_host_op(bytes + written);
        let shape: Rc<[usize]> = values.shape.clone().into();
        let is_val = *op == crate::ir::OpName::SortVal;
        let (mine, other) =
            if is_val { ((values, d), (indices, DType::I64)) } else { ((indices, DType::I64), (values, d)) };
        let (mine_b, other_b) = match bufs {
            Some((vb, ib)) if is_val => (vb, Some(ib)),
            Some((vb, ib)) => (ib, Some(vb)),
            None => (self.hand_over(&mine.0)?, None),
        };
        if let Some(sibling) = sort.sibling {
            let b = match other_b {
                Some(b) => b,
                None => self.hand_over(&other.0)?,
            };
            self.remember(sibling, Val::T(b, other.1, shape.clone()));
        }
        Ok(Val::T(mine_b, mine.1, shape))
    }
}
