//! Running a plan: the host walks the term's structure (loops, branches, tuples, integers), launches a kernel for
//! every materialized node, and runs fallback ops with the functional interpreter. Buffers live on a [`Device`].
//!
//! Ownership: a kernel that writes in place may only touch a buffer nobody else holds. The planner proves that for
//! the term; the executor adds what the term cannot show: a loop's initial tensors are copied on entry when the
//! plan writes carried state in place, and a body result that aliases another (or a buffer from outside the loop)
//! is copied before the next iteration.

use std::collections::BTreeMap;
use std::rc::Rc;

use egg::{Id, Language};
use hashbrown::HashMap;

mod fallback;

use super::plan::{How, Plan};
use crate::ir::{Node, Ty};
use crate::tensor::{DType, Tensor};

/// Where buffers live and kernels run.
pub trait Device {
    type Buf: Clone;
    fn upload(&mut self, t: &Tensor) -> Result<Self::Buf, String>;
    fn download(&mut self, b: &Self::Buf, d: DType, shape: &[usize]) -> Result<Tensor, String>;
    fn alloc(&mut self, d: DType, n: usize) -> Result<Self::Buf, String>;
    /// An input the plan only reads: the device may use the caller's memory rather than a copy (the C device does,
    /// for a contiguous tensor that is its whole buffer).
    fn share(&mut self, t: &Tensor) -> Result<Self::Buf, String> {
        self.upload(t)
    }
    /// A buffer whose every element the caller writes before reading it (a kernel that covers its output): its
    /// contents need not be zero.
    fn alloc_uninit(&mut self, d: DType, n: usize) -> Result<Self::Buf, String> {
        self.alloc(d, n)
    }
    fn copy(&mut self, b: &Self::Buf, d: DType, n: usize) -> Result<Self::Buf, String>;
    /// An input the caller gave up for the run ([`execute_donated`]) and that nothing else holds, as the buffer
    /// the plan writes in place, where the device can take its memory without a copy (the C device can, for a
    /// contiguous tensor that is its whole buffer and not memory borrowed from outside); `None` where it cannot,
    /// and the input is uploaded (copied) as any other.
    fn adopt(&mut self, _t: &Tensor) -> Result<Option<Self::Buf>, String> {
        Ok(None)
    }
    /// Whether the device's buffers are host memory, which [`Device::host_view`] then shows (the C device).
    fn host_memory(&self) -> bool {
        false
    }
    /// A host tensor of `shape` over buffer `b`'s own memory, so that the host writes the buffer in place (a host
    /// sort's results); `None` where the buffers are not host memory.
    fn host_view(&mut self, _b: &Self::Buf, _d: DType, _shape: &[usize]) -> Option<Tensor> {
        None
    }
    /// The one element of a buffer of one element (a condition, an integer read by the host).
    fn item(&mut self, b: &Self::Buf, d: DType) -> Result<crate::tensor::Scalar, String> {
        self.download(b, d, &[])?.item()
    }
    /// Launches kernel `k` of the plan; `bufs[0]` is the output.
    fn launch(&mut self, k: usize, bufs: &[&Self::Buf], params: &[i64]) -> Result<(), String>;
    /// Launches kernel group `g` of the plan once: `bufs` holds each member's output and arguments in turn,
    /// `params` the mask of members to run, then each member's integers.
    fn launch_group(&mut self, g: usize, bufs: &[&Self::Buf], params: &[i64]) -> Result<(), String>;
    fn same(a: &Self::Buf, b: &Self::Buf) -> bool;
    fn sync(&mut self) -> Result<(), String> {
        Ok(())
    }
}

pub use crate::cost::Stats;

#[derive(Clone)]
enum Val<B> {
    T(B, DType, Rc<[usize]>),
    I(i64),
    B(bool),
    Tup(Rc<Vec<Val<B>>>),
    Other,
}

struct Frame<B> {
    iter: i64,
    carried: Vec<Val<B>>,
    memo: HashMap<Id, Val<B>>,
}

pub struct Executor<'p, D: Device> {
    plan: &'p Plan,
    dev: &'p mut D,
    /// Per node: its value, where it does not depend on a loop (those live in their frame's memo).
    global: Vec<Option<Val<D::Buf>>>,
    frames: Vec<Frame<D::Buf>>,
    /// Memos of frames popped, emptied, for the next frames to reuse (a loop of many short iterations would
    /// otherwise grow a fresh table in every one).
    spare: Vec<HashMap<Id, Val<D::Buf>>>,
    dependent: &'p [bool],
    pub stats: Stats,
    copy_loop_state: bool,
    /// Groups whose members' operands are being computed: a member needed meanwhile (two groups each reading a
    /// member of the other) is launched alone rather than by launching its group again, which would recurse forever.
    launching: Vec<usize>,
    /// What every run needs of the plan ([`Plan::facts`]).
    facts: &'p super::plan::RunFacts,
    /// Whether the caller gave its inputs up for the run ([`execute_donated`]).
    donated: bool,
    /// With [`execute_profiled`]: every launch, copy and fallback, timed, in the order they ran.
    timing: Option<Vec<Launched>>,
}

/// What a timed step of a run was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Site {
    /// Kernel `k` of the plan, launched alone.
    Kernel(usize),
    /// Kernel group `g`, launched once for its pending members.
    Group(usize),
    /// A buffer copy the executor made (loop state, copy before writing in place).
    Copy,
    /// The host fallback computing this node.
    Fallback(usize),
}

/// One timed step of a profiled run: its wall time (the device synchronized before and after) and the bytes it
/// moved (the same estimate as [`Stats::bytes`]).
#[derive(Clone, Copy, Debug)]
pub struct Launched {
    pub site: Site,
    pub seconds: f64,
    pub bytes: f64,
}

type R<T> = Result<T, String>;

/// Whether the executor copies loop state (entry state, and state a body passes along or yields twice): where a
/// kernel writes in place into a loop's carried value.
pub fn copies_loop_state(plan: &Plan) -> bool {
    plan.launches
        .iter()
        .any(|l| written_base(&plan.term, l.node).is_some_and(|x| matches!(plan.term[x], Node::Carried(_))))
}

/// Whether inputs are shared with the caller (not copied): only where no kernel writes in place into a buffer it
/// did not make itself; then no write can reach an input's memory, whatever passes it along (a branch, a loop).
pub fn shares_inputs(plan: &Plan) -> bool {
    plan.how.iter().enumerate().all(|(i, h)| match (h, written_base(&plan.term, Id::from(i))) {
        (How::InPlace(_), Some(x)) => {
            matches!(plan.how[usize::from(x)], How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_))
        }
        _ => true,
    })
}

/// Runs `plan` on `dev` with `inputs`; returns the outputs (the root tuple's tensors) and what ran.
pub fn execute<D: Device>(plan: &Plan, dev: &mut D, inputs: &BTreeMap<String, Tensor>) -> R<(Vec<Tensor>, Stats)> {
    execute_with(plan, dev, inputs, false, false).map(|(t, s, _)| (t, s))
}

/// [`execute`] with inputs the caller gives up: an input tensor that nothing but `inputs` holds is the buffer a
/// kernel may write in place ([`Device::adopt`]), not copied first, as PyTorch writes into the tensors it is given.
/// Its elements are unspecified after the run (the outputs hold what the program leaves in its parameters).
pub fn execute_donated<D: Device>(
    plan: &Plan,
    dev: &mut D,
    inputs: &mut BTreeMap<String, Tensor>,
) -> R<(Vec<Tensor>, Stats)> {
    execute_with(plan, dev, inputs, false, true).map(|(t, s, _)| (t, s))
}

/// [`execute`], timing every launch, copy and fallback (the device is synchronized around each, so the run is
/// slower than an untimed one); returns them in the order they ran.
pub fn execute_profiled<D: Device>(
    plan: &Plan,
    dev: &mut D,
    inputs: &BTreeMap<String, Tensor>,
) -> R<(Vec<Tensor>, Stats, Vec<Launched>)> {
    execute_with(plan, dev, inputs, true, false)
}

fn execute_with<D: Device>(
    plan: &Plan,
    dev: &mut D,
    inputs: &BTreeMap<String, Tensor>,
    profile: bool,
    donated: bool,
) -> R<(Vec<Tensor>, Stats, Vec<Launched>)> {
    let facts = plan.facts();
    let mut ex = Executor {
        facts,
        donated,
        plan,
        dev,
        global: vec![None; plan.how.len()],
        frames: Vec::new(),
        spare: Vec::new(),
        dependent: &plan.dependent,
        stats: Stats::default(),
        copy_loop_state: facts.copies_loop_state,
        launching: Vec::new(),
        timing: profile.then(Vec::new),
    };
    let root = plan.term.root();
    let out = ex.eval(root, inputs)?;
    let Val::Tup(items) = out else { return Err("a plan's root must be a tuple".into()) };
    let mut tensors = Vec::new();
    ex.stats.class(crate::cost::class::RUN, 1.0, 0.0, 0.0, 0.0);
    for v in items.iter() {
        tensors.push(match v {
            Val::T(b, d, s) => {
                let bytes = (s.iter().product::<usize>() * d.size()) as f64;
                ex.stats.class(crate::cost::class::RUN, 0.0, bytes, 0.0, 0.0);
                ex.dev.download(b, *d, s)?
            }
            Val::I(i) => Tensor::scalar(DType::I64, crate::tensor::Scalar::I(*i))?,
            _ => return Err("a program output is not a tensor".into()),
        });
    }
    ex.dev.sync()?;
    Ok((tensors, ex.stats, ex.timing.unwrap_or_default()))
}

impl<D: Device> Executor<'_, D> {
    fn eval(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let dep = self.dependent[usize::from(id)];
        let cached =
            if dep { self.frames.last().and_then(|f| f.memo.get(&id)) } else { self.global[usize::from(id)].as_ref() };
        if let Some(v) = cached {
            return Ok(v.clone());
        }
        let v = self.compute(id, inputs)?;
        self.remember(id, v.clone());
        Ok(v)
    }

    fn remember(&mut self, id: Id, v: Val<D::Buf>) {
        if self.dependent[usize::from(id)] {
            if let Some(f) = self.frames.last_mut() {
                f.memo.insert(id, v);
            }
        } else {
            self.global[usize::from(id)] = Some(v);
        }
    }

    fn computed(&self, id: Id) -> bool {
        if self.dependent[usize::from(id)] {
            self.frames.last().is_some_and(|f| f.memo.contains_key(&id))
        } else {
            self.global[usize::from(id)].is_some()
        }
    }

    fn int(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<i64> {
        match self.eval(id, inputs)? {
            Val::I(i) => Ok(i),
            Val::B(b) => Ok(b as i64),
            _ => Err(format!("expected an integer at node {id}")),
        }
    }

    /// An operand of a host scalar (`host.rs`), a 0-d boolean or integer, as an integer: a host integer read
    /// through `itensor` and a literal `full` where they are, any other value as it is (a 0-d buffer downloaded).
    fn scalar(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<i64> {
        match &self.plan.term[id] {
            Node::Op(crate::ir::OpName::ITensor, a) => return self.int(a[0], inputs),
            Node::Op(crate::ir::OpName::Full, a) if self.plan.how[usize::from(id)] == How::Inline => {
                return match &self.plan.term[a[2]] {
                    Node::Int(i) => Ok(*i),
                    Node::Bool(b) => Ok(i64::from(b.0)),
                    other => Err(format!("internal: a host scalar reads `full` of {other}")),
                };
            }
            _ => {}
        }
        Ok(match self.eval(id, inputs)? {
            Val::T(b, d, _) => {
                let item = self.dev.item(&b, d)?;
                if d == DType::Bool {
                    i64::from(item.to_bool())
                } else {
                    item.to_i64_trunc()
                }
            }
            Val::B(b) => i64::from(b),
            Val::I(i) => i,
            _ => return Err(format!("internal: a host scalar reads node {id}, not a scalar")),
        })
    }

    fn tensor(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<(D::Buf, DType, Rc<[usize]>)> {
        match self.eval(id, inputs)? {
            Val::T(b, d, s) => Ok((b, d, s)),
            _ => Err(format!("expected a tensor at node {id}")),
        }
    }

    fn truth(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<bool> {
        Ok(match self.eval(id, inputs)? {
            Val::T(b, d, _) => self.dev.item(&b, d)?.to_bool(),
            Val::B(b) => b,
            Val::I(i) => i != 0,
            _ => return Err("a condition that is not a tensor or a bool".into()),
        })
    }

    fn frame(&self, d: i64) -> R<&Frame<D::Buf>> {
        let n = self.frames.len() as i64;
        if d < 0 || d >= n {
            return Err(format!("loop reference {d} outside of {n} loops"));
        }
        Ok(&self.frames[(n - 1 - d) as usize])
    }

    fn compute(&mut self, id: Id, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let plan = self.plan;
        match plan.how[usize::from(id)].clone() {
            How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => return self.launch(id, k, inputs),
            How::Fallback if self.timing.is_some() => {
                // The operands first, so that the time is the fallback's own.
                for c in plan.term[id].children().to_vec() {
                    if matches!(plan.types[usize::from(c)], Some(Ty::Tensor(..))) {
                        self.tensor(c, inputs)?;
                    }
                }
                let (t, bytes) = (self.start()?, self.stats.bytes);
                let v = self.fallback(id, inputs)?;
                self.finish(t, Site::Fallback(usize::from(id)), self.stats.bytes - bytes)?;
                return Ok(v);
            }
            How::Fallback => return self.fallback(id, inputs),
            How::Inline => return Err(format!("internal: node {id} was fused but is read by the host")),
            How::Input | How::Host => {}
        }
        let node = plan.term[id].clone();
        Ok(match node {
            Node::Int(i) => Val::I(i),
            Node::Bool(b) => Val::B(b.0),
            Node::Input(n) => self.input(id, n, inputs)?,
            Node::Tuple(items) => {
                Val::Tup(Rc::new(items.iter().map(|&c| self.eval(c, inputs)).collect::<R<Vec<_>>>()?))
            }
            Node::Get([t, j]) => {
                let j = self.int(j, inputs)? as usize;
                match self.eval(t, inputs)? {
                    Val::Tup(items) => items.get(j).cloned().ok_or("get past the end of a tuple")?,
                    _ => return Err("get of a non-tuple".into()),
                }
            }
            Node::Iter(d) => {
                let d = self.int(d, inputs)?;
                Val::I(self.frame(d)?.iter)
            }
            Node::Carried([d, j]) => {
                let (d, j) = (self.int(d, inputs)?, self.int(j, inputs)? as usize);
                self.frame(d)?.carried.get(j).cloned().ok_or("carried past the end")?
            }
            Node::Op(op, args) => {
                use crate::ir::OpName::*;
                match op {
                    IAdd | ISub | IMul | IFloorDiv | IMod => {
                        let (a, b) = (self.int(args[0], inputs)?, self.int(args[1], inputs)?);
                        // Python ints do not wrap: a result outside 64 bits is an error.
                        let fits = |r: Option<i64>| r.ok_or_else(|| crate::ir::RUNTIME_INT_OVERFLOW.to_string());
                        Val::I(match op {
                            IAdd => fits(a.checked_add(b))?,
                            ISub => fits(a.checked_sub(b))?,
                            IMul => fits(a.checked_mul(b))?,
                            _ if b == 0 => return Err("integer division by zero".into()),
                            IFloorDiv => fits(a.checked_div_euclid(b))? - i64::from(b < 0 && a.rem_euclid(b) != 0),
                            _ => a - b * (a.div_euclid(b) - i64::from(b < 0 && a.rem_euclid(b) != 0)),
                        })
                    }
                    IIndex | ISlice | INarrow => {
                        let vals = args.iter().map(|&a| self.int(a, inputs)).collect::<R<Vec<i64>>>()?;
                        Val::I(crate::ir::run_time_start(op, &vals)?)
                    }
                    After => {
                        self.eval(args[0], inputs)?;
                        self.eval(args[1], inputs)?
                    }
                    Raise => return Err(crate::ir::RAISES.into()),
                    Fallback => {
                        return Err(crate::ir::fallback_message(self.int(args[0], inputs)?, self.int(args[1], inputs)?))
                    }
                    Eq | Ne | Lt | Le | Gt | Ge | BitAnd | BitOr | BitXor | LogicalNot => {
                        let vals = args.iter().map(|&a| self.scalar(a, inputs)).collect::<R<Vec<i64>>>()?;
                        Val::B(super::host::host_scalar(op, &vals)?)
                    }
                    ToInt => {
                        let (b, d, _) = self.tensor(args[0], inputs)?;
                        Val::I(self.dev.item(&b, d)?.to_i64_trunc())
                    }
                    _ => return Err(format!("internal: `{op}` has no plan")),
                }
            }
            Node::If([c, a, b]) => {
                let arm = if self.truth(c, inputs)? { a } else { b };
                self.eval(arm, inputs)?
            }
            Node::Loop([a, b, s, init, body]) => {
                let (start, end, step) = (self.int(a, inputs)?, self.int(b, inputs)?, self.int(s, inputs)?);
                if step == 0 {
                    return Err("range() arg 3 must not be zero".into());
                }
                let mut state = self.entry_state(init, inputs)?;
                let mut i = start;
                while (step > 0 && i < end) || (step < 0 && i > end) {
                    crate::limits::check()?;
                    let memo = self.spare.pop().unwrap_or_default();
                    self.frames.push(Frame { iter: i, carried: state, memo });
                    let r = self.eval(body, inputs);
                    self.pop_frame();
                    state = self.next_state(r?, body)?;
                    match i.checked_add(step) {
                        Some(next) => i = next,
                        None => break,
                    }
                }
                Val::Tup(Rc::new(state))
            }
            Node::While([init, cond, body]) => {
                let mut state = self.entry_state(init, inputs)?;
                let mut n = 0usize;
                loop {
                    crate::limits::check()?;
                    let memo = self.spare.pop().unwrap_or_default();
                    self.frames.push(Frame { iter: n as i64, carried: state.clone(), memo });
                    let go = self.truth(cond, inputs);
                    let r = match go {
                        Ok(true) => Some(self.eval(body, inputs)),
                        Ok(false) => None,
                        Err(e) => Some(Err(e)),
                    };
                    self.pop_frame();
                    match r {
                        None => break,
                        Some(r) => state = self.next_state(r?, body)?,
                    }
                    n += 1;
                    if n as u64 > crate::limits::MAX_WHILE_ITERATIONS {
                        return Err("a while loop ran past its iteration limit".into());
                    }
                }
                Val::Tup(Rc::new(state))
            }
            _ => Val::Other,
        })
    }

    /// Input node `id` (of name node `n`): the caller's tensor, checked against the plan's type, shared, adopted or
    /// copied ([`RunFacts::shares_inputs`](super::plan::RunFacts), [`execute_donated`]).
    fn input(&mut self, id: Id, n: Id, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let Node::Name(name) = &self.plan.term[n] else { return Err("input of a non-name".into()) };
        let constant;
        let t = match inputs.get(&name.0) {
            Some(t) => t,
            None => {
                constant = crate::ir::consts::tensor(&name.0).ok_or_else(|| format!("no input named {}", name.0))?;
                &constant
            }
        };
        // The kernels index the input by the plan's shape: any other would read past its buffer.
        match self.plan.tensor(id) {
            Some((d, s)) if d == t.dtype() && s == &t.shape[..] => {}
            Some((d, s)) => {
                return Err(format!("input `{}` is {}{:?}; the plan takes {d}{s:?}", name.0, t.dtype(), t.shape))
            }
            None => return Err(format!("internal: input `{}` is not a tensor in the plan", name.0)),
        }
        // Donated, and held by nothing but the caller's map: the plan may write into it.
        let adopted = if self.donated && !self.facts.shares_inputs && Rc::strong_count(&t.buf) == 1 {
            self.dev.adopt(t)?
        } else {
            None
        };
        let b = match adopted {
            Some(b) => b,
            None if self.facts.shares_inputs => self.dev.share(t)?,
            None => {
                self.stats.class(crate::cost::class::RUN, 0.0, (t.numel() * t.dtype().size()) as f64, 0.0, 0.0);
                self.dev.upload(t)?
            }
        };
        Ok(Val::T(b, t.dtype(), t.shape.clone().into()))
    }

    /// Pops the innermost frame, keeping its memo's table for the next frame.
    fn pop_frame(&mut self) {
        if let Some(mut f) = self.frames.pop() {
            f.memo.clear();
            self.spare.push(f.memo);
        }
    }

    fn kernel_class(&mut self, k: usize) -> (usize, f64) {
        let w = self.plan.class_of(k);
        (w.class, w.transcendentals)
    }

    /// `v` in a buffer of its own: a copy, counted as one. A tensor of no elements is shared, as the estimate
    /// (`estimate::plan_stats`, which counts copies of some bytes only) assumes: nothing can be written into it.
    fn own(&mut self, v: &Val<D::Buf>) -> R<Val<D::Buf>> {
        Ok(match v {
            Val::T(_, _, s) if s.contains(&0) => v.clone(),
            Val::T(b, d, s) => {
                self.stats.launches += 1;
                self.stats.copies += 1;
                let n = s.iter().product::<usize>();
                self.stats.bytes += 2.0 * (n * d.size()) as f64;
                self.stats.class(crate::cost::class::COPY, 1.0, 2.0 * (n * d.size()) as f64, 0.0, 0.0);
                let t = self.start()?;
                let copied = self.dev.copy(b, *d, n)?;
                self.finish(t, Site::Copy, 2.0 * (n * d.size()) as f64)?;
                Val::T(copied, *d, s.clone())
            }
            other => other.clone(),
        })
    }

    fn entry_state(&mut self, init: Id, inputs: &BTreeMap<String, Tensor>) -> R<Vec<Val<D::Buf>>> {
        let Val::Tup(items) = self.eval(init, inputs)? else { return Err("a loop's state is not a tuple".into()) };
        let mut out = Vec::new();
        for v in items.iter() {
            out.push(if self.copy_loop_state { self.own(v)? } else { v.clone() });
        }
        Ok(out)
    }

    fn next_state(&mut self, v: Val<D::Buf>, body: Id) -> R<Vec<Val<D::Buf>>> {
        let Val::Tup(items) = v else { return Err("a loop body did not yield a tuple".into()) };
        let mut out: Vec<Val<D::Buf>> = Vec::new();
        let body_items: Vec<Id> = match &self.plan.term[body] {
            Node::Tuple(ids) => ids.to_vec(),
            _ => Vec::new(),
        };
        for (j, v) in items.iter().enumerate() {
            let aliased = match v {
                Val::T(b, ..) => out.iter().any(|o| matches!(o, Val::T(c, ..) if D::same(b, c))),
                _ => false,
            };
            let outer = body_items.get(j).is_some_and(|&n| !self.dependent[usize::from(n)]);
            out.push(if self.copy_loop_state && (aliased || outer) { self.own(v)? } else { v.clone() });
        }
        Ok(out)
    }

    fn launch(&mut self, id: Id, k: usize, inputs: &BTreeMap<String, Tensor>) -> R<Val<D::Buf>> {
        let plan = self.plan;
        if let Some(g) = plan.group_of.get(k).copied().flatten() {
            let pending: Vec<usize> =
                plan.groups[g].iter().copied().filter(|&m| m == k || !self.computed(plan.launches[m].node)).collect();
            if pending.len() > 1 && !self.launching.contains(&g) {
                self.launching.push(g);
                let r = self.launch_group(g, k, &pending, inputs);
                self.launching.retain(|&x| x != g);
                return r;
            }
        }
        if let Some(first) = plan.before.get(&id) {
            for &f in first {
                self.eval(f, inputs)?;
            }
        }
        let (bufs, params) = self.operands(&plan.launches[k], inputs)?;
        let (d, shape) = plan.tensor(id).ok_or("a kernel of a non-tensor")?;
        let shape: Rc<[usize]> = shape.into();
        let out = match (&plan.how[usize::from(id)], written_base(&plan.term, id)) {
            (How::InPlace(_), Some(x)) => self.tensor(x, inputs)?.0,
            (How::CopyInPlace(_), Some(x)) => {
                let v = self.eval(x, inputs)?;
                match self.own(&v)? {
                    Val::T(b, ..) => b,
                    _ => return Err("assign to a non-tensor".into()),
                }
            }
            _ => self.fresh(k, d, shape.iter().product())?,
        };
        let mut refs: Vec<&D::Buf> = vec![&out];
        refs.extend(bufs.iter().map(|(b, _, _)| b));
        let t = self.start()?;
        self.dev.launch(k, &refs, &params)?;
        self.stats.launches += 1;
        let (bytes, ops) = self.facts.traffic[k];
        self.finish(t, Site::Kernel(k), bytes)?;
        self.stats.bytes += bytes;
        self.stats.flops += ops;
        let (c, trans) = self.kernel_class(k);
        self.stats.class(c, 1.0, bytes, ops, trans);
        Ok(Val::T(out, d, shape))
    }

    /// When profiling: the device synchronized, the clock started.
    fn start(&mut self) -> R<Option<std::time::Instant>> {
        if self.timing.is_none() {
            return Ok(None);
        }
        self.dev.sync()?;
        Ok(Some(std::time::Instant::now()))
    }

    /// When profiling: the device synchronized, the step since `start` recorded.
    fn finish(&mut self, start: Option<std::time::Instant>, site: Site, bytes: f64) -> R<()> {
        let Some(t) = start else { return Ok(()) };
        self.dev.sync()?;
        let seconds = t.elapsed().as_secs_f64();
        if let Some(v) = &mut self.timing {
            v.push(Launched { site, seconds, bytes });
        }
        Ok(())
    }

    /// A fresh output buffer of `n` elements for kernel `k`: zeroed unless the kernel writes all of it.
    fn fresh(&mut self, k: usize, d: DType, n: usize) -> R<D::Buf> {
        if self.facts.covers[k] {
            self.dev.alloc_uninit(d, n)
        } else {
            self.dev.alloc(d, n)
        }
    }

    /// A launch's buffers and integers, its gathers' indices checked.
    #[allow(clippy::type_complexity)]
    fn operands(
        &mut self,
        launch: &super::plan::Launch,
        inputs: &BTreeMap<String, Tensor>,
    ) -> R<(Vec<(D::Buf, DType, Rc<[usize]>)>, Vec<i64>)> {
        self.check_indices(launch, inputs)?;
        let mut bufs = Vec::new();
        for &a in &launch.args {
            bufs.push(self.tensor(a, inputs)?);
        }
        let mut params = Vec::new();
        for &p in &launch.params {
            params.push(self.int(p, inputs)?);
        }
        Ok((bufs, params))
    }

    /// A chain member's buffers and integers ([`Executor::operands`]), where an operand written by an earlier
    /// member of the same launch (`earlier`) is that member's buffer.
    #[allow(clippy::type_complexity)]
    fn chain_operands(
        &mut self,
        launch: &super::plan::Launch,
        earlier: &[(Id, D::Buf)],
        inputs: &BTreeMap<String, Tensor>,
    ) -> R<(Vec<(D::Buf, DType, Rc<[usize]>)>, Vec<i64>)> {
        self.check_indices(launch, inputs)?;
        let mut bufs = Vec::new();
        for &a in &launch.args {
            match earlier.iter().find(|(n, _)| *n == a) {
                Some((_, b)) => {
                    let (d, s) = self.plan.tensor(a).ok_or("a kernel of a non-tensor")?;
                    bufs.push((b.clone(), d, Rc::from(s)));
                }
                None => bufs.push(self.tensor(a, inputs)?),
            }
        }
        let mut params = Vec::new();
        for &p in &launch.params {
            params.push(self.int(p, inputs)?);
        }
        Ok((bufs, params))
    }

    /// A gather's indices must lie in `[-extent, extent)`, as PyTorch requires (a kernel cannot report it).
    fn check_indices(&mut self, launch: &super::plan::Launch, inputs: &BTreeMap<String, Tensor>) -> R<()> {
        for c in &launch.checks {
            let (b, d, s) = self.tensor(c.node, inputs)?;
            let t = self.dev.download(&b, d, &s)?;
            let (lo, extent) = (if c.wraps { -c.extent } else { 0 }, c.extent);
            if let Some(bad) = t.scalars().iter().map(|v| v.to_i64_trunc()).find(|&i| i < lo || i >= extent) {
                return Err(format!("index {bad} is out of bounds for dimension {} with size {extent}", c.dim));
            }
        }
        Ok(())
    }

    /// Launches the pending members of group `g` at once (members have fresh outputs and no ordering constraints;
    /// the planner made them independent of each other); returns kernel `k`'s value and remembers the others'.
    fn launch_group(
        &mut self,
        g: usize,
        k: usize,
        pending: &[usize],
        inputs: &BTreeMap<String, Tensor>,
    ) -> R<Val<D::Buf>> {
        let plan = self.plan;
        let chained = plan.chained.get(g).copied().unwrap_or(false);
        let mut members: Vec<Option<Member<D::Buf>>> = Vec::new();
        let mut mask = 0i64;
        for (j, &m) in plan.groups[g].iter().enumerate() {
            // A member computed alone while an earlier member's operands were computed is not computed again.
            if !pending.contains(&m) || (m != k && self.computed(plan.launches[m].node)) {
                members.push(None);
                continue;
            }
            mask |= 1 << j;
            let launch = &plan.launches[m];
            let (bufs, params) = if chained {
                // A chain member reads what earlier members of the launch write: their buffers, not evaluated.
                let earlier: Vec<(Id, D::Buf)> = (0..j)
                    .filter_map(|i| members[i].as_ref().map(|mb| (plan.launches[plan.groups[g][i]].node, mb.0.clone())))
                    .collect();
                self.chain_operands(launch, &earlier, inputs)?
            } else {
                self.operands(launch, inputs)?
            };
            let (d, shape) = plan.tensor(launch.node).ok_or("a kernel of a non-tensor")?;
            let out = match (&plan.how[usize::from(launch.node)], written_base(&plan.term, launch.node)) {
                (How::InPlace(_), Some(x)) if chained => self.tensor(x, inputs)?.0,
                _ => self.fresh(m, d, shape.iter().product())?,
            };
            members.push(Some((out, d, Rc::<[usize]>::from(shape), bufs, params)));
        }
        let filler = members.iter().flatten().next().map(|m| m.0.clone()).ok_or("an empty kernel group")?;
        let before = self.stats.bytes;
        let mut refs: Vec<&D::Buf> = Vec::new();
        let mut params = vec![mask];
        for (j, &m) in plan.groups[g].iter().enumerate() {
            let kernel = &plan.kernels[m];
            match &members[j] {
                Some((out, _, _, bufs, ps)) => {
                    refs.push(out);
                    refs.extend(bufs.iter().map(|(b, _, _)| b));
                    params.extend(ps);
                    let (bytes, ops) = self.facts.traffic[m];
                    self.stats.bytes += bytes;
                    self.stats.flops += ops;
                    let (c, trans) = self.kernel_class(m);
                    self.stats.class(c, 0.0, bytes, ops, trans);
                }
                None => {
                    refs.extend(std::iter::repeat_n(&filler, kernel.args.len()));
                    params.extend(std::iter::repeat_n(0, kernel.params));
                }
            }
        }
        let t = self.start()?;
        self.dev.launch_group(g, &refs, &params)?;
        self.stats.launches += 1;
        self.finish(t, Site::Group(g), self.stats.bytes - before)?;
        let (c, _) = self.kernel_class(plan.groups[g][0]);
        self.stats.class(c, 1.0, 0.0, 0.0, 0.0);
        let mut result = None;
        for (j, &m) in plan.groups[g].iter().enumerate() {
            if let Some((out, d, shape, _, _)) = members[j].take() {
                let v = Val::T(out, d, shape);
                if m == k {
                    result = Some(v);
                } else {
                    self.remember(plan.launches[m].node, v);
                }
            }
        }
        result.ok_or_else(|| "a kernel group without its kernel".into())
    }
}

/// A group member about to launch: its output, dtype and shape, its argument buffers and its integers.
type Member<B> = (B, DType, Rc<[usize]>, Vec<(B, DType, Rc<[usize]>)>, Vec<i64>);

/// The base buffer a node writes into, where it is a write (an `assign` through a view, or a scatter through index
/// tensors: `index_put`, `scatter`).
pub fn written_base(term: &crate::ir::Term, id: Id) -> Option<Id> {
    match &term[id] {
        Node::Assign([x, _, _]) => Some(*x),
        Node::Op(crate::ir::OpName::IndexPut | crate::ir::OpName::Scatter, args) => args.first().copied(),
        _ => None,
    }
}
