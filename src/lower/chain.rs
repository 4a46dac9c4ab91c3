//! Multi-output kernels: elementwise kernels and small reductions over one iteration domain that the executor
//! would launch one after another in the same scope become one launch (a chained group, `Plan::chained`) that runs the members in order at
//! each point. A later member may read what an earlier one wrote (nasrnn's `h_new` reads `c_new`; lstm's writes of
//! `state_c[j]` and `state_h[j]` read the cell `c`), and an earlier member may read the old value of a buffer that a
//! later one writes in place, but only at the point being computed: every load of a buffer some other member writes
//! must be at that member's store position for the same point. Then running the members point by point (one thread
//! per point, in order: CUDA and the emulator) computes exactly what launching them one after another does (the C
//! backend still calls them one after another, which needs no condition). A reduction reads other points of what it
//! folds, so it only folds buffers no member writes; its readers in the chain read it at their own point (seq2seq's
//! logits and `out[t] = logits`; a softmax's max and the sum of `exp(x - max)`). In a chain with a reduction every
//! member is [`Kernel::flat`]: on CUDA each point is one thread's, which folds the reduction there serially.
//!
//! Members are fresh buffers or in-place writes whose ordering constraints the launch keeps: no `Plan::before`
//! list names them, and no operand a member takes from outside the chain depends on another member (it would have
//! to run between them). Like a group's, members are computed unconditionally in the same scope, so launching them
//! together computes nothing a run would not.

use egg::{Id, Language};

use super::exec::{copies_loop_state, written_base};
use super::group::{reaches, scopes, MAX_MEMBERS};
use super::index::{Atom, Idx};
use super::kernel::Expr;
use super::plan::{How, Plan, Policy};
use crate::ir::Node;

/// What a chain member writes: the buffer (an alias key, [`alias_key`]) and the store position, its launch
/// parameters replaced by the integer nodes they are (so that positions compare across kernels).
struct Write {
    key: Option<Id>,
    at: Option<Idx>,
}

/// The buffer identity of node `n`'s value, where the plan proves which buffer it is: a fresh kernel output, an
/// input, a fallback's result, loop state the executor copies on entry (so no two slots share a buffer), or, for an
/// in-place write, its base's. `None`: unknown (it may be any buffer).
fn alias_key(plan: &Plan, n: Id, copies: bool) -> Option<Id> {
    match plan.how[usize::from(n)] {
        How::Kernel(_) | How::CopyInPlace(_) | How::Fallback | How::Input => Some(n),
        How::InPlace(_) => alias_key(plan, written_base(&plan.term, n)?, copies),
        How::Host if copies && matches!(plan.term[n], Node::Carried(_)) => Some(n),
        _ => None,
    }
}

fn may_alias(a: Option<Id>, b: Option<Id>) -> bool {
    a.is_none() || b.is_none() || a == b
}

/// The range of the integer a launch parameter is, where it is a counted loop's index with literal bounds.
type Ranges = hashbrown::HashMap<Id, (i64, i64)>;

/// The range of every loop index (`iter`) whose loop has literal bounds and step 1. After `unshare` each loop body's
/// nodes are its own, so an `iter` node names one loop: the one `d` loops out from where it occurs.
fn iter_ranges(plan: &Plan) -> Ranges {
    let term = &plan.term;
    let mut out = Ranges::new();
    let mut seen = hashbrown::HashSet::new();
    let mut stack: Vec<(Id, Vec<Option<(i64, i64)>>)> = vec![(term.root(), Vec::new())];
    while let Some((n, loops)) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        match &term[n] {
            Node::Iter(d) => {
                let r = lit(term, *d).and_then(|d| loops.len().checked_sub(1 + d as usize)).and_then(|i| loops[i]);
                if let Some(r) = r {
                    out.insert(n, r);
                }
            }
            Node::Loop([a, b, st, init, body]) => {
                let r = match (lit(term, *a), lit(term, *b), lit(term, *st)) {
                    (Some(a), Some(b), Some(1)) if a < b => Some((a, b - 1)),
                    _ => None,
                };
                let mut inner = loops.clone();
                inner.push(r);
                stack.extend([*a, *b, *st, *init].map(|c| (c, loops.clone())));
                stack.push((*body, inner));
            }
            Node::While([init, cond, body]) => {
                let mut inner = loops.clone();
                inner.push(None);
                stack.push((*init, loops.clone()));
                stack.extend([(*cond, inner.clone()), (*body, inner)]);
            }
            node => stack.extend(node.children().iter().map(|&c| (c, loops.clone()))),
        }
    }
    out
}

fn lit(term: &crate::ir::Term, id: Id) -> Option<i64> {
    match term[id] {
        Node::Int(i) => Some(i),
        _ => None,
    }
}

/// The range of a canonical form whose atoms are loop variables and parameters of known range.
fn range_of(at: &Idx, ranges: &Ranges) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (at.c, at.c);
    for (a, &k) in &at.terms {
        let (l, h) = match a {
            Atom::Var(_, n) => (0, n - 1),
            Atom::Param(p) => *ranges.get(&Id::from(p & ((1 << 40) - 1)))?,
            _ => return None,
        };
        lo += if k > 0 { k * l } else { k * h };
        hi += if k > 0 { k * h } else { k * l };
    }
    Some((lo, hi))
}

/// `at` with kernel parameter `k` replaced by a parameter named by its integer node (offset past any kernel's own
/// numbering), and a division or modulo by `m` of a form known to lie in `[0, m)` (a loop index read through the
/// flat offset of the buffer it indexes) simplified; `None` where it has a view inverse or a run-time index load
/// (kernel-local, not compared).
fn canon(at: &Idx, params: &[Id], ranges: &Ranges) -> Option<Idx> {
    let mut out = Idx::constant(at.c);
    for (a, &k) in &at.terms {
        let form = match a {
            // A dim of extent 1 is always 0 (so `[1]` and `[]` store at one position).
            Atom::Var(_, 1) => Idx::constant(0),
            Atom::Var(..) => Idx::atom(a.clone()),
            Atom::Param(p) => Idx::atom(Atom::Param(1 << 40 | usize::from(*params.get(*p)?))),
            Atom::Div(x, d) => {
                let x = canon(x, params, ranges)?;
                match range_of(&x, ranges) {
                    Some((lo, hi)) if lo >= 0 && hi < *d => Idx::constant(0),
                    _ => Idx::atom(Atom::Div(Box::new(x), *d)),
                }
            }
            Atom::Mod(x, m) => {
                let x = canon(x, params, ranges)?;
                match range_of(&x, ranges) {
                    Some((lo, hi)) if lo >= 0 && hi < *m => x,
                    _ => Idx::atom(Atom::Mod(Box::new(x), *m)),
                }
            }
            Atom::ViewInv(..) | Atom::Load(..) => return None,
        };
        out = out.add(&form.scale(k));
    }
    Some(out)
}

/// Every buffer read of a kernel expression: (argument, position), `None` for a position read at run time.
fn loads(e: &Expr, out: &mut Vec<(usize, Option<Idx>)>) {
    match e {
        Expr::Load { arg, at, .. } => out.push((*arg, Some(at.clone()))),
        Expr::Gather { arg, index, .. } => {
            out.push((*arg, None));
            loads(index, out);
        }
        // A dot reads a row or column: other points' elements.
        Expr::Dot(d) => {
            for (arg, at, _) in d.reads() {
                out.push((arg, None));
                idx_loads(at, out);
            }
        }
        // A pre's element: its reads are the pre's (see `reads_only_own_point`).
        Expr::Const(..) | Expr::Acc(_) | Expr::Local { .. } => {}
        Expr::Index(at) | Expr::NonNeg(at) => idx_loads(at, out),
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => loads(a, out),
        Expr::Binary(_, _, _, a, b) => {
            loads(a, out);
            loads(b, out);
        }
        Expr::Where(c, a, b) => {
            loads(c, out);
            loads(a, out);
            loads(b, out);
        }
    }
    if let Expr::Load { at, .. } | Expr::Gather { at, .. } = e {
        idx_loads(at, out);
    }
}

/// The index buffers a position reads (`Atom::Load`), at run-time positions.
fn idx_loads(at: &Idx, out: &mut Vec<(usize, Option<Idx>)>) {
    for a in at.terms.keys() {
        match a {
            Atom::Load(arg, x, _, _) => {
                out.push((*arg, None));
                idx_loads(x, out);
            }
            Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) => idx_loads(x, out),
            Atom::Var(..) | Atom::Param(_) => {}
        }
    }
}

/// The most elements a reduction in a chain folds per point, and in all: on CUDA one thread folds each point's
/// serially, which for a long fold costs more than the launch it saves (six sums of 3000 terms keep their block
/// reductions), and a large matmul keeps its tiled layout and launches alone.
const MAX_MEMBER_FOLD: usize = 512;
const MAX_MEMBER_WORK: usize = 1 << 20;

/// Whether kernel `k` may be a chain member at all: elementwise, or a small reduction ([`MAX_MEMBER_FOLD`],
/// [`MAX_MEMBER_WORK`]), points independent of each other (not a scatter, not accumulating),
/// computed unconditionally, with no in-place ordering constraint.
fn candidate(plan: &Plan, k: usize, pinned: &hashbrown::HashSet<Id>, scope: &[Option<Id>]) -> bool {
    let kernel = &plan.kernels[k];
    let node = plan.launches[k].node;
    matches!(plan.how[usize::from(node)], How::Kernel(_) | How::InPlace(_))
        && kernel.reduce.as_ref().is_none_or(|r| {
            let fold = r.extents.iter().product::<usize>();
            fold <= MAX_MEMBER_FOLD && fold * kernel.domain.iter().product::<usize>() <= MAX_MEMBER_WORK
        })
        && (kernel.epilogue.is_none() || kernel.reduce.is_some())
        && !kernel.ordered()
        && kernel.views.is_empty()
        && !pinned.contains(&node)
        && scope[usize::from(node)].is_some()
}

/// Why kernel `k` cannot join `chain` (in order), or `None` when it can.
fn refuse(plan: &Plan, chain: &[usize], k: usize, copies: bool, ranges: &Ranges) -> Option<String> {
    let nodes: Vec<Id> = chain.iter().map(|&m| plan.launches[m].node).collect();
    let launch = &plan.launches[k];
    // The host reads index buffers (bounds checks) and integers before the launch: none may be a member or need one.
    for c in launch.checks.iter().map(|c| c.node).chain(launch.params.iter().copied()) {
        if let Some(&m) = nodes.iter().find(|&&m| reaches(plan, c, m)) {
            return Some(format!("the host reads ${c} before its launch, which needs ${m} of the chain first"));
        }
    }
    for &a in launch.args.iter().filter(|a| !nodes.contains(a)) {
        if let Some(&m) = nodes.iter().find(|&&m| reaches(plan, a, m)) {
            return Some(format!("it reads ${a}, which needs ${m} of the chain first"));
        }
    }
    let members: Vec<usize> = chain.iter().copied().chain(std::iter::once(k)).collect();
    let writes: Vec<Write> = members.iter().map(|&m| write_of(plan, m, copies, ranges)).collect();
    for (i, &m) in members.iter().enumerate() {
        for (j, w) in writes.iter().enumerate() {
            // Only pairs involving the new member: the chain's own pairs were checked when they joined.
            if i == j || (i + 1 != members.len() && j + 1 != members.len()) {
                continue;
            }
            if may_alias(writes[i].key, w.key) {
                return Some(format!(
                    "{} and {} may write the same buffer",
                    plan.kernels[m].name, plan.kernels[members[j]].name
                ));
            }
            if let Some(why) = reads_only_own_point(plan, m, w, members[j], (copies, ranges)) {
                return Some(why);
            }
        }
    }
    None
}

fn write_of(plan: &Plan, m: usize, copies: bool, ranges: &Ranges) -> Write {
    let launch = &plan.launches[m];
    Write { key: alias_key(plan, launch.node, copies), at: canon(&plan.kernels[m].store, &launch.params, ranges) }
}

/// Why member `m` reads buffer `w` (written by kernel `writer`) elsewhere than at the point being computed, if it
/// does. A fresh output is allocated when the chain launches, so only a read of that node itself reads it: any other
/// node the member reads exists before the launch (`refuse` keeps out operands that need a member).
fn reads_only_own_point(plan: &Plan, m: usize, w: &Write, writer: usize, ctx: (bool, &Ranges)) -> Option<String> {
    let (copies, ranges) = ctx;
    let launch = &plan.launches[m];
    let fresh = matches!(plan.how[usize::from(plan.launches[writer].node)], How::Kernel(_))
        .then_some(plan.launches[writer].node);
    let writer = &plan.kernels[writer];
    let mut reads = Vec::new();
    loads(&plan.kernels[m].value, &mut reads);
    // A reduction's epilogue reads at the point it stores (and other points, through views).
    if let Some((_, e)) = &plan.kernels[m].epilogue {
        loads(e, &mut reads);
    }
    idx_loads(&plan.kernels[m].store, &mut reads);
    // A pre reads every element it folds, before the member's first point.
    for p in &plan.kernels[m].pre {
        let mut pre_reads = Vec::new();
        loads(&p.value, &mut pre_reads);
        reads.extend(pre_reads.into_iter().map(|(arg, _)| (arg, None)));
    }
    for (arg, at) in reads {
        let node = if arg == 0 { launch.node } else { launch.args[arg - 1] };
        if !may_alias(alias_key(plan, node, copies), w.key) || fresh.is_some_and(|f| f != node) {
            continue;
        }
        let same = match (at.as_ref().and_then(|at| canon(at, &launch.params, ranges)), &w.at) {
            (Some(r), Some(s)) => r == *s,
            _ => false,
        };
        if !same {
            return Some(format!(
                "{} reads ${node}, which {} writes, at another point than the one it computes",
                plan.kernels[m].name, writer.name
            ));
        }
    }
    None
}

/// Forms the chained groups of `plan` (ours only), before [`super::group::group_siblings`] groups what remains;
/// returns, for `explain`, why kernels of one domain and scope were not chained.
/// How many of the latest chains a kernel may join (see [`chain_kernels`]); every corpus plan has fewer.
const CHAIN_WINDOW: usize = 256;

/// At most this many notes of why kernels were not merged (`explain`), for plans of thousands of kernels.
const MAX_NOTES: usize = 2_000;

pub(super) fn chain_kernels(plan: &mut Plan) -> Vec<String> {
    let mut notes = Vec::new();
    if plan.policy != Policy::Fused {
        return notes;
    }
    let pinned: hashbrown::HashSet<Id> =
        plan.before.iter().flat_map(|(k, v)| std::iter::once(*k).chain(v.iter().copied())).collect();
    let scope = scopes(plan);
    let copies = copies_loop_state(plan);
    let ranges = iter_ranges(plan);
    let mut chains: Vec<Vec<usize>> = Vec::new();
    for k in 0..plan.kernels.len() {
        if !candidate(plan, k, &pinned, &scope) {
            continue;
        }
        let node = plan.launches[k].node;
        let mut joined = false;
        // The last `CHAIN_WINDOW` chains only (each in the order made): a plan of thousands of kernels over one
        // domain (an unrolled recurrence) would otherwise try every earlier chain for every kernel.
        let window = chains.len().saturating_sub(CHAIN_WINDOW);
        for chain in chains[window..].iter_mut() {
            let first = plan.launches[chain[0]].node;
            if chain.len() == MAX_MEMBERS
                || scope[usize::from(first)] != scope[usize::from(node)]
                || plan.dependent[usize::from(first)] != plan.dependent[usize::from(node)]
                || !same_points(&plan.kernels[chain[0]].domain, &plan.kernels[k].domain)
            {
                continue;
            }
            match refuse(plan, chain, k, copies, &ranges) {
                None => {
                    chain.push(k);
                    joined = true;
                    break;
                }
                Some(why) if notes.len() < MAX_NOTES => {
                    notes.push(format!("{} not merged with {}: {why}", plan.kernels[k].name, names(plan, chain)))
                }
                Some(_) => {}
            }
        }
        if !joined {
            chains.push(vec![k]);
        }
    }
    for chain in chains.into_iter().filter(|c| c.len() >= 2) {
        let g = plan.groups.len();
        let folds = chain.iter().any(|&m| plan.kernels[m].reduce.is_some());
        for &m in &chain {
            plan.group_of[m] = Some(g);
            plan.kernels[m].flat = folds;
        }
        plan.groups.push(chain);
        plan.chained.push(true);
    }
    notes
}

/// Whether two domains are one iteration space: equal, or both a single point (`[1]` and `[]`).
fn same_points(a: &[usize], b: &[usize]) -> bool {
    a == b || (a.iter().product::<usize>() == 1 && b.iter().product::<usize>() == 1)
}

fn names(plan: &Plan, chain: &[usize]) -> String {
    chain.iter().map(|&m| plan.kernels[m].name.as_str()).collect::<Vec<_>>().join(", ")
}
