//! Planning: which nodes of a term become buffers, which fuse into the kernels that read them, and the kernels.
//!
//! Every tensor node gets a [`How`]. Structure (inputs, loops, ifs, tuples, carried state) is run by the host;
//! reductions and matmuls are reduction kernels whose input expressions are fused in (prologues); ops the kernels do
//! not cover (sorts, gathers, advanced indexing) run on the host with the functional interpreter's implementation.
//! Everything else is an expression that fuses into its consumers unless a [`Policy`] or sharing makes it a
//! buffer. An `assign` fuses as a predicated select over its buffer, or, where its old buffer is provably dead,
//! writes only the view's elements in place.

use egg::{Id, Language};

use super::fuse::{compute_dtype, KernelBuilder};
use super::kernel::{binary_supported, Kernel};
use super::prepare::{decompose, elide_whole_writes, unshare};
use super::why::Why;
use crate::ir::{dependent_nodes, node_types, Node, OpName, Term, Ty};
pub(super) use crate::ir::{lit, lits};
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

/// How a node is computed. `K` numbers the kernels: a plan's are `usize`, indices into `Plan::kernels`; while the
/// planner decides, no kernel is numbered yet (`How<()>`), and the kernels are numbered in node order once it has.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum How<K = usize> {
    /// Not a tensor, or structure the host runs (tuples, loops, carried state, literals, integers).
    Host,
    /// An input buffer.
    Input,
    /// Fused into the kernels that read it.
    Inline,
    /// Kernel k writes a fresh buffer.
    Kernel(K),
    /// Kernel k writes the assign's view in place into its base's buffer (arg `base`).
    InPlace(K),
    /// A copy of the base buffer, then kernel k writes the view in place into the copy.
    CopyInPlace(K),
    /// The functional interpreter's implementation of the op, on the host.
    Fallback,
}

impl How {
    /// The planner's decisions with their kernels numbered in node order.
    fn number(decided: &[How<()>]) -> Vec<How> {
        let mut next = 0;
        let mut number = || {
            next += 1;
            next - 1
        };
        decided
            .iter()
            .map(|h| match h {
                How::Host => How::Host,
                How::Input => How::Input,
                How::Inline => How::Inline,
                How::Fallback => How::Fallback,
                How::Kernel(()) => How::Kernel(number()),
                How::InPlace(()) => How::InPlace(number()),
                How::CopyInPlace(()) => How::CopyInPlace(number()),
            })
            .collect()
    }
}

/// A kernel's launch: the nodes whose buffers it reads and the integer nodes it takes as parameters.
#[derive(Clone, Debug)]
pub struct Launch {
    pub node: Id,
    pub args: Vec<Id>,
    pub params: Vec<Id>,
    /// Index buffers the kernel gathers or scatters with, and the range each must lie in: the executor checks them
    /// first.
    pub checks: Vec<IndexCheck>,
}

/// An index buffer a kernel reads positions from: its values must lie in `[-extent, extent)` where negative indices
/// wrap (advanced indexing), else in `[0, extent)` (scatter, index_copy); `dim` names the indexed dim in the error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexCheck {
    pub node: Id,
    pub extent: i64,
    pub dim: usize,
    pub wraps: bool,
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
    /// Independent kernels launched together (kernel indices), and each kernel's group.
    pub groups: Vec<Vec<usize>>,
    pub group_of: Vec<Option<usize>>,
    /// Per group: whether it is a chain (a multi-output kernel, `chain.rs`): members over one domain run in order at
    /// each point, a later one reading what an earlier one wrote there; else its members are independent.
    pub chained: Vec<bool>,
    /// Why kernels of one domain and scope were not merged into one launch (`explain`).
    pub merge_notes: Vec<String>,
    /// Each kernel's cost class, transcendental elements and ops per launch ([`super::class::classify`]), computed
    /// when first asked and kept: classifying walks expression trees, too slow to repeat on every run.
    pub classes: std::sync::OnceLock<Vec<super::class::Work>>,
    /// What every run needs to know of the plan and no run changes ([`RunFacts`]), computed on the first run.
    pub facts: std::sync::OnceLock<RunFacts>,
    /// Per kernel: why its node is a buffer of its own rather than fused into its readers (`explain`'s "why not").
    pub why: Vec<String>,
    /// Per matmul: whether it is computed as dot products in its readers, and why not (`dots.rs`).
    pub dot_notes: Vec<String>,
    /// The sorts the host computes, each with its sibling output and the part of each line that is read.
    pub host_sorts: hashbrown::HashMap<Id, super::sorts::HostSort>,
}

impl Plan {
    /// What the executor needs on every run ([`Plan::facts`]).
    pub fn facts(&self) -> &RunFacts {
        self.facts.get_or_init(|| RunFacts::of(self))
    }

    /// Kernel `k`'s cost class, transcendental elements and ops per launch ([`Plan::classes`]).
    pub fn class_of(&self, k: usize) -> super::class::Work {
        self.classes.get_or_init(|| self.kernels.iter().map(super::class::classify).collect())[k]
    }

    /// The bytes kernel `k` moves in one launch ([`Kernel::traffic`] over its arguments' planned sizes) and the
    /// ops it computes ([`super::class::Work::ops`]: its pieces' where fewer).
    pub fn traffic(&self, k: usize) -> (f64, f64) {
        let numel = |id: Id| self.tensor(id).map_or(1, |(_, s)| s.iter().product::<usize>());
        let (bytes, _) = self.kernels[k].traffic(self.launches[k].args.iter().map(|&a| numel(a)));
        (bytes, self.class_of(k).ops)
    }

    pub fn tensor(&self, id: Id) -> Option<(DType, &[usize])> {
        match &self.types[usize::from(id)] {
            Some(Ty::Tensor(d, s)) => Some((*d, s)),
            _ => None,
        }
    }
}

/// Facts of a plan that the executor reads on every run, kept so that a run does not walk the plan to find them
/// again: for small plans that walk costs more than the kernels.
#[derive(Debug)]
pub struct RunFacts {
    /// Per kernel: whether it writes every element of its fresh output ([`Kernel::covers`], over a domain of the
    /// output's size), which then need not be zeroed.
    pub covers: Vec<bool>,
    /// [`super::exec::copies_loop_state`].
    pub copies_loop_state: bool,
    /// [`super::exec::shares_inputs`].
    pub shares_inputs: bool,
    /// Per kernel: the bytes it moves and the ops it computes in one launch ([`Plan::traffic`]: the bytes over its
    /// arguments' sizes, which the term's types fix, and the ops its pieces compute).
    pub traffic: Vec<(f64, f64)>,
}

impl RunFacts {
    fn of(plan: &Plan) -> RunFacts {
        let numel = |id: Id| plan.tensor(id).map_or(0, |(_, s)| s.iter().product::<usize>());
        RunFacts {
            covers: plan
                .kernels
                .iter()
                .zip(&plan.launches)
                .map(|(k, l)| {
                    k.covers() && plan.tensor(l.node).is_some() && numel(l.node) == k.domain.iter().product::<usize>()
                })
                .collect(),
            copies_loop_state: super::exec::copies_loop_state(plan),
            shares_inputs: super::exec::shares_inputs(plan),
            traffic: (0..plan.kernels.len()).map(|k| plan.traffic(k)).collect(),
        }
    }
}

/// Plans `term` under `policy`, deciding by the shipped CPU cost profile (see [`plan_for`]).
pub fn plan(term: &Term, inputs: &[(String, DType, Vec<usize>)], policy: Policy) -> Result<Plan, String> {
    plan_for(term, inputs, policy, &crate::cost::Profile::shipped_c())
}

/// Plans `term` under `policy`, deciding by `profile` whether a shared value is stored or recomputed in each
/// reader. Ours is planned again where a choice arose ([`Choices`]): where it has shared writes through views into
/// buffers, once recomputing them in their readers (as predicated selects) and once storing them (so they can go in
/// place); where pricing a `cat` by the piece each element computes decided a value, once without that; and with
/// and without matmuls as dot products in their readers. The plan `profile` predicts cheaper wins.
pub fn plan_for(
    term: &Term,
    inputs: &[(String, DType, Vec<usize>)],
    policy: Policy,
    profile: &crate::cost::Profile,
) -> Result<Plan, String> {
    crate::limits::check()?;
    let t = std::time::Instant::now();
    let plan = plan_chosen(term, inputs, policy, profile)?;
    crate::log::log(crate::log::Stage::Plan, || {
        let fallbacks = plan.how.iter().filter(|h| matches!(h, How::Fallback)).count();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        format!("{policy:?}: {} kernels, {fallbacks} host fallbacks, in {ms:.2} ms", plan.kernels.len())
    });
    Ok(plan)
}

fn plan_chosen(
    term: &Term,
    inputs: &[(String, DType, Vec<usize>)],
    policy: Policy,
    profile: &crate::cost::Profile,
) -> Result<Plan, String> {
    let prepared = Prepared::new(term, inputs)?;
    crate::limits::check()?;
    let cost = |p: &Plan| super::estimate::decision_cost(p, profile);
    let first = Choices { store_writes: false, dots: true, by_piece: true };
    let (plan, arose) = plan_with(&prepared, inputs, policy, profile, first)?;
    let mut best = (plan, first);
    // Each choice that arose is planned the other way too, the cheaper plan kept.
    let flips = [
        (arose.store_writes, Choices { store_writes: true, ..first }),
        (arose.by_piece, Choices { by_piece: false, ..first }),
    ];
    for (arose, choices) in flips {
        if arose {
            crate::limits::check()?;
            let choices = Choices { store_writes: choices.store_writes || best.1.store_writes, ..choices };
            let (plan, _) = plan_with(&prepared, inputs, policy, profile, choices)?;
            if cost(&plan) < cost(&best.0) {
                best = (plan, choices);
            }
        }
    }
    let (chosen, choices) = best;
    let without = || plan_with(&prepared, inputs, policy, profile, Choices { dots: false, ..choices }).map(|(p, _)| p);
    super::dots::keep_cheaper(chosen, without, &cost)
}

/// The choices a plan is made with. Where one arises (some node would be planned differently), the planner plans
/// it both ways and keeps the plan that prices cheaper ([`plan_chosen`]).
#[derive(Clone, Copy, Debug, Default)]
struct Choices {
    /// Store shared writes through views into buffers, rather than recompute them in each reader.
    store_writes: bool,
    /// Compute matmuls as dot products in their readers and small reductions before their readers' nests.
    dots: bool,
    /// Price an inline `cat` recomputed in its readers by the piece each element reads, rather than by all of its
    /// pieces ([`Planner::recompute_vs_store`]). Each element computes one piece, but where the pieces do not come
    /// apart (`specialize.rs`'s budget) every element computes every piece.
    by_piece: bool,
}

/// What planning needs of a term, whatever it decides: the term spelled out and unshared, its types, each node's
/// readers, and which nodes depend on a loop.
struct Prepared {
    term: Term,
    types: Vec<Option<Ty>>,
    users: Vec<Vec<Id>>,
    dependent: Vec<bool>,
}

impl Prepared {
    fn new(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> Result<Prepared, String> {
        let term = unshare(term);
        let types = node_types(&term, inputs)?;
        let (term, types) = match decompose(&term, &types) {
            Some(t) => {
                let t = unshare(&t);
                let types = node_types(&t, inputs)?;
                (t, types)
            }
            None => (term, types),
        };
        let (term, types) = match elide_whole_writes(&term, &types) {
            Some(t) => {
                let t = unshare(&t);
                let types = node_types(&t, inputs)?;
                (t, types)
            }
            None => (term, types),
        };
        let mut users: Vec<Vec<Id>> = vec![Vec::new(); term.as_ref().len()];
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
        let dependent = dependent_nodes(&term);
        Ok(Prepared { term, types, users, dependent })
    }
}

/// Plans a prepared term; `store_writes` stores shared writes into buffers. Also says whether that choice arose.
fn plan_with(
    prepared: &Prepared,
    inputs: &[(String, DType, Vec<usize>)],
    policy: Policy,
    profile: &crate::cost::Profile,
    choices: Choices,
) -> Result<(Plan, Choices), String> {
    let Choices { store_writes, dots, by_piece } = choices;
    let term = &prepared.term;
    let n = term.as_ref().len();
    let mut p = Planner {
        term,
        types: &prepared.types,
        users: &prepared.users,
        dependent: &prepared.dependent,
        how: vec![How::Host; n],
        policy,
        before: Default::default(),
        arm_only: Default::default(),
        epilogue: Default::default(),
        store_writes,
        by_piece,
        alternative: false,
        priced_by_piece: Default::default(),
        profile: profile.clone(),
        why: vec![None; n],
        dot_notes: Vec::new(),
        host_scalars: Default::default(),
        pres: Default::default(),
    };
    p.host_scalars = p.host_scalars();
    p.classify();
    crate::limits::check()?;
    p.gather_tables();
    if policy == Policy::Fused {
        p.fuse_epilogues();
        if dots {
            let scopes = super::group::scopes_of(term);
            p.fuse_dots(&scopes);
            p.fuse_pres(&scopes);
        }
    }
    let mut plan = Plan {
        term: term.clone(),
        inputs: inputs.to_vec(),
        how: How::number(&p.how),
        types: prepared.types.clone(),
        kernels: Vec::new(),
        launches: Vec::new(),
        policy,
        dependent: prepared.dependent.clone(),
        before: p.before.clone(),
        groups: Vec::new(),
        group_of: Vec::new(),
        chained: Vec::new(),
        merge_notes: Vec::new(),
        classes: Default::default(),
        facts: Default::default(),
        why: Vec::new(),
        dot_notes: p.dot_notes.clone(),
        host_sorts: super::sorts::host_sorts(term, &prepared.types, &prepared.users),
    };
    for i in 0..n {
        let id = Id::from(i);
        if let How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) = plan.how[i] {
            crate::limits::check()?;
            debug_assert_eq!(k, plan.kernels.len(), "kernels are numbered in node order");
            let mut kb = KernelBuilder::default();
            let kernel = p.kernel(&mut kb, id, format!("k{k}"))?.without_empty_reduction();
            plan.kernels.push(kernel);
            plan.why.push(super::why::kernel_reason(&p, id));
            plan.launches.push(Launch { node: id, args: kb.args, params: kb.params, checks: kb.checks });
        }
    }
    plan.group_of = vec![None; plan.kernels.len()];
    super::group::reset_reach_budget();
    plan.merge_notes = super::chain::chain_kernels(&mut plan);
    super::group::group_siblings(&mut plan);
    super::group::drop_entangled_groups(&mut plan);
    let arose = Choices { store_writes: p.alternative, dots: false, by_piece: p.priced_by_piece.get() };
    Ok((plan, arose))
}

pub(super) struct Planner<'a> {
    pub(super) term: &'a Term,
    pub(super) types: &'a [Option<Ty>],
    pub(super) users: &'a [Vec<Id>],
    pub(super) dependent: &'a [bool],
    pub(super) how: Vec<How<()>>,
    pub(super) policy: Policy,
    /// For an in-place write: materialized readers of its base that must run before it.
    pub(super) before: hashbrown::HashMap<Id, Vec<Id>>,
    /// Per node: whether only an `if`'s arm computes it (no write waits for it outside the arm). Made when asked.
    pub(super) arm_only: std::cell::OnceCell<Vec<bool>>,
    /// Kernels that compute a reduction (value) and then their own elementwise expression over it (key).
    pub(super) epilogue: hashbrown::HashMap<Id, Id>,
    /// Store shared writes through views into buffers (rather than recompute them in each reader).
    store_writes: bool,
    /// Whether some node would be planned differently with `store_writes` flipped.
    alternative: bool,
    /// [`Choices::by_piece`].
    pub(super) by_piece: bool,
    /// Whether pricing a `cat` by its pieces decided some value the other way than pricing it whole would.
    pub(super) priced_by_piece: std::cell::Cell<bool>,
    /// The cost profile decisions are made by.
    pub(super) profile: crate::cost::Profile,
    /// Per node: why it is a buffer rather than fused into its readers ([`super::why`]), where the planner chose.
    pub(super) why: Vec<Option<Why>>,
    /// Per matmul considered: whether it was fused into its readers as dot products, and why not (`dots.rs`).
    pub(super) dot_notes: Vec<String>,
    /// The 0-d comparisons and logical ops the host evaluates as Python does (`host.rs`).
    pub(super) host_scalars: hashbrown::HashSet<Id>,
    /// Small reductions computed by each kernel that reads them, before its loop nest ([`super::kernel::Kernel::pre`],
    /// `pre.rs`); planned [`How::Inline`].
    pub(super) pres: hashbrown::HashSet<Id>,
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

impl Planner<'_> {
    pub(super) fn tensor(&self, id: Id) -> Option<(DType, Vec<usize>)> {
        match &self.types[usize::from(id)] {
            Some(Ty::Tensor(d, s)) => Some((*d, s.clone())),
            _ => None,
        }
    }

    /// An integer `//`, `%` (remainder) or `fmod` by a constant other than 0 and -1: no division by zero to raise,
    /// no overflow (`INT64_MIN // -1`), so a kernel computes it (a beam search's `idx // vocab`).
    fn integer_division_by_constant(&self, b: crate::tensor::ops::Binary, compute: DType, divisor: Id) -> bool {
        use crate::tensor::ops::Binary::*;
        if !matches!(b, FloorDiv | Rem | Fmod) || !matches!(compute, DType::I64 | DType::I32) {
            return false;
        }
        let value = match &self.term[divisor] {
            Node::Int(i) => Some(*i),
            Node::Op(OpName::Full, a) if a.len() == 3 => lit(self.term, a[2]),
            _ => None,
        };
        value.is_some_and(|v| v != 0 && v != -1)
    }

    /// Whether the kernel IR can compute this node as an expression of its operands.
    fn expressible(&self, id: Id) -> bool {
        use OpName::*;
        match &self.term[id] {
            Node::Access([_, v]) => self.view_parts(*v).is_some(),
            Node::Assign([_, v, _]) => self.view_parts(*v).is_some_and(|(s, st, _)| nests(&s, &st)),
            Node::Op(op, args) => match op {
                _ if op.unary().is_some() => true,
                _ if op.binary().is_some() => {
                    let b = op.binary().expect("a binary op");
                    let (da, _) = self.tensor(args[0]).expect("typed");
                    let compute = compute_dtype(b, da);
                    binary_supported(b, compute) || self.integer_division_by_constant(b, compute, args[1])
                }
                Where | Clamp | Cast | Full | Reshape | Cat | ITensor => true,
                Triu | Tril => lit(self.term, args[1]).is_some(),
                Arange => args[1..3].iter().all(|&a| matches!(self.term[a], Node::Int(_) | Node::Float(_))),
                InView => self.view_parts(args[1]).is_some_and(|(s, st, _)| nests(&s, &st)),
                // x[i] with one integer index tensor: a gather along x's first dim; with several (or slices
                // before them), a load at the position the index buffers give.
                Index => {
                    (args.len() == 2
                        && self.tensor(args[0]).is_some_and(|(_, s)| !s.is_empty())
                        && self.tensor(args[1]).is_some_and(|(d, _)| !d.is_float() && d != DType::Bool))
                        || self.multi_gather_form(id)
                }
                Gather => self.gather_form(id),
                _ => false,
            },
            _ => false,
        }
    }

    pub(super) fn reduction(&self, id: Id) -> bool {
        matches!(&self.term[id], Node::Op(op, _) if op.is_reduction() || *op == OpName::Matmul)
    }

    /// (shape, strides, offset term) of a view node with literal shape and strides.
    pub(super) fn view_parts(&self, v: Id) -> Option<(Vec<usize>, Vec<i64>, Id)> {
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
                _ if self.host_scalars.contains(&id) => How::Host,
                Node::Input(_) => How::Input,
                // The host evaluates E for its checks, then yields V's buffer as it is.
                Node::Op(OpName::After, _) => How::Host,
                Node::Op(..) if self.reduction(id) => self.materialize(id, Why::Reduction),
                // A write through index tensors: a scatter kernel, in place or into a copy of its base (below).
                Node::Op(..) if self.scatter_form(id) => self.materialize(id, Why::Scatter),
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
            // A host scalar reads an `itensor` or a literal `full` where it is (`host.rs`), no buffer.
            let literal = self.host_literal(id);
            if literal && !users.is_empty() && users.iter().all(|u| self.host_scalars.contains(u)) {
                continue;
            }
            let host_user = users.iter().any(|&u| {
                (matches!(self.how[usize::from(u)], How::Host | How::Fallback)
                    && !(literal && self.host_scalars.contains(&u)))
                    || matches!(self.term[u], Node::Op(OpName::ToInt, _))
            });
            // A shared write through a view into a buffer, stored, can go in place (only its view's elements);
            // recomputed, it is a select over the whole buffer in every reader, and chains of such writes (a cache
            // written step by step) nest ever deeper. Which is cheaper shows in the whole plan: both are planned.
            let into_buffer = self.policy == Policy::Fused
                && matches!(self.term[id], Node::Assign([x, _, _]) if self.how[usize::from(x)] != How::Inline);
            let figures = if self.cheap(id) { None } else { Some(self.recompute_vs_store(id)) };
            let recompute = figures.flatten().filter(|(r, s)| r > s);
            let shared = figures.is_some() && {
                self.alternative |= into_buffer && recompute.is_none();
                recompute.is_some() || (into_buffer && self.store_writes)
            };
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
            // An indexing read reads its table at run-time positions and checks its indices on the host: both are
            // buffers. So are a scatter kernel's and a gather's indices (a scatter's base is a buffer it writes, its
            // value may fuse in; `torch.gather`'s table may be an expression computed at the gathered positions
            // only, where it builds: `Planner::gather_tables`).
            let gathered = users.iter().any(|&u| {
                matches!(self.term[u], Node::Op(OpName::Index, _))
                    || (self.how[usize::from(u)] != How::Fallback && self.index_operand_of(id, u))
            });
            // A matmul reads each operand element once per row or column of the other: only pure reads fuse in.
            let matmul_operand =
                users.iter().any(|&u| matches!(self.term[u], Node::Op(OpName::Matmul, _))) && !self.pure_read(id);
            let why = [
                (host_user, Why::Host),
                (shared, recompute.map_or(Why::StoredWrite, |(r, s)| Why::Shared(users.len(), r, s))),
                (hoisted, Why::Hoisted),
                (policy, Why::Policy),
                (matmul_operand, Why::MatmulOperand),
                (gathered, Why::Gathered),
            ]
            .into_iter()
            .find(|(b, _)| *b)
            .map(|(_, w)| w)
            .or_else(|| self.too_big(id).then_some(Why::TooBig));
            if let Some(w) = why {
                self.how[i] = self.materialize(id, w);
            }
        }
        // Assigns that are buffers write in place where their base is a dead buffer. Otherwise ours writes the whole
        // new buffer as a predicated select (or, where the view names every element once and the base is an input
        // or a fill, over the view: `fuse.rs::covering_view`); the baselines copy the base and write into the copy (as a clone and an
        // in-place op would). A scatter kernel writes into its base's buffer (in place where it is dead, else into a
        // copy). Both need the base as a buffer.
        for i in 0..n {
            if let (How::Kernel(_), Node::Op(OpName::IndexPut | OpName::Scatter, args)) =
                (&self.how[i], &self.term[Id::from(i)])
            {
                if self.how[usize::from(args[0])] == How::Inline {
                    self.how[usize::from(args[0])] = How::Kernel(());
                }
            }
        }
        if self.policy != Policy::Fused {
            // The baselines write through views into buffers: a fused base becomes one first.
            for i in (0..n).rev() {
                if let (How::Kernel(_), Node::Assign([x, _, _])) = (&self.how[i], &self.term[Id::from(i)]) {
                    if self.how[usize::from(*x)] == How::Inline {
                        self.how[usize::from(*x)] = How::Kernel(());
                    }
                }
            }
        }
        for i in (0..n).rev() {
            let id = Id::from(i);
            if let (How::Kernel(_), Node::Op(OpName::IndexPut | OpName::Scatter, args)) = (&self.how[i], &self.term[id])
            {
                let x = args[0];
                // A scatter that also reads its base as its value or index (`m.scatter(1, i, m)`) reads elements
                // other points overwrite: it writes into a copy.
                let dead = if args[1..].contains(&x) { None } else { self.dead_after(x, id) };
                if let Some(first) = dead.filter(|f| !super::order::would_cycle(self.term, &self.before, id, f)) {
                    self.how[i] = How::InPlace(());
                    self.before.extend((!first.is_empty()).then_some((id, first)));
                } else {
                    self.how[i] = How::CopyInPlace(());
                }
                continue;
            }
            if let (How::Kernel(_), Node::Assign([x, _, _])) = (&self.how[i], &self.term[id]) {
                let x = *x;
                let dead = if self.how[usize::from(x)] != How::Inline { self.dead_after(x, id) } else { None };
                if let Some(first) = dead.filter(|f| !super::order::would_cycle(self.term, &self.before, id, f)) {
                    self.how[i] = How::InPlace(());
                    self.before.extend((!first.is_empty()).then_some((id, first)));
                } else if self.policy != Policy::Fused {
                    self.how[i] = How::CopyInPlace(());
                    if self.how[usize::from(x)] == How::Inline {
                        self.how[usize::from(x)] = How::Kernel(());
                    }
                }
            }
        }
    }

    /// Reductions (matmuls included) whose only reader is one elementwise kernel of as many elements, reading each
    /// element at its own row-major position (the same shape, or a reshape of it), become that kernel's epilogue
    /// host: the kernel reduces, then applies its expression to the reduced value (a matmul with its bias and
    /// activation is one kernel, one write).
    fn fuse_epilogues(&mut self) {
        let pinned: hashbrown::HashSet<Id> = self.before.values().flatten().copied().collect();
        for i in 0..self.term.as_ref().len() {
            let e = Id::from(i);
            if self.how[i] != How::Kernel(()) || self.reduction(e) || self.tensor(e).is_none() {
                continue;
            }
            let numel = self.tensor(e).map(|(_, s)| s.iter().product::<usize>());
            // The reductions this kernel reads through fused nodes that nothing else reads.
            let mut stack: Vec<Id> = self.term[e].children().to_vec();
            let mut found = None;
            while let Some(c) = stack.pop() {
                let ci = usize::from(c);
                if self.users[ci].len() != 1 || self.tensor(c).is_none() {
                    continue;
                }
                match self.how[ci] {
                    How::Inline => stack.extend(self.term[c].children().iter().copied()),
                    How::Kernel(_)
                        if self.reduction(c)
                            && self.tensor(c).map(|(_, s)| s.iter().product::<usize>()) == numel
                            && self.dependent[ci] == self.dependent[i]
                            && !pinned.contains(&c) =>
                    {
                        found = Some(c);
                        break;
                    }
                    _ => {}
                }
            }
            let Some(r) = found else { continue };
            self.how[usize::from(r)] = How::Inline;
            self.epilogue.insert(e, r);
            // The kernel must read the reduction only at its own point (its own row-major position where the
            // shapes differ); else the reduction stays a kernel.
            if self.kernel(&mut KernelBuilder::default(), e, String::new()).is_err() {
                self.how[usize::from(r)] = How::Kernel(());
                self.epilogue.remove(&e);
            }
        }
    }

    /// Each gather kernel whose table is an expression (fused in) must build with it there, its positions read
    /// at run time (`Planner::gather`); where it does not, the table is a buffer of its own.
    fn gather_tables(&mut self) {
        for i in 0..self.term.as_ref().len() {
            let Node::Op(OpName::Gather, args) = &self.term[Id::from(i)] else { continue };
            let table = args[0];
            if self.how[i] != How::Kernel(()) || self.how[usize::from(table)] != How::Inline {
                continue;
            }
            if self.kernel(&mut KernelBuilder::default(), Id::from(i), String::new()).is_err() {
                self.how[usize::from(table)] = self.materialize(table, Why::Gathered);
            }
        }
    }

    /// Whether a fused node only reads (through views, reshapes, casts and cats, or a row of a gather's table) a
    /// buffer or a constant.
    fn pure_read(&self, id: Id) -> bool {
        if self.how[usize::from(id)] != How::Inline {
            return true;
        }
        match &self.term[id] {
            Node::Access([x, _]) => self.pure_read(*x),
            Node::Op(OpName::Reshape, args) => self.pure_read(args[0]),
            Node::Op(OpName::Cast, args) => self.pure_read(args[1]),
            // Each element of a cat is one of its pieces' elements, read where it is.
            Node::Op(OpName::Cat, args) => args[1..].iter().all(|&a| self.pure_read(a)),
            // A row of a table at an index read from a buffer (an embedding lookup).
            Node::Op(OpName::Index, args) if args.len() == 2 => self.pure_read(args[0]),
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
}
