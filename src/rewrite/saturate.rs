//! Saturation and extraction: the functional term goes into the e-graph, the rules run within limits that are always
//! honoured, and the smallest term (weighted size, until the cost model exists) is extracted. The functional term
//! itself is always a valid answer: extraction can only pick it or something proven equal to it.

use std::collections::BTreeMap;
use std::time::Duration;

use egg::{AstSize, Rewrite, Runner, StopReason};

use super::analysis::TermAnalysis;
use crate::functionalize::Functional;
use crate::ir::{verify, Node, Term};

/// Limits of one saturation.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub iterations: usize,
    pub nodes: usize,
    pub time: Duration,
    /// How much extraction's search may plan and price ([`crate::extract::Budget`]).
    pub search: crate::extract::Budget,
    /// Whether rewrites that hold in real arithmetic only may apply (`--fast-math`): the Rust rewrite
    /// `matmul/reassociate` runs only then (the `@real` text rules are left out of the rule set otherwise).
    pub fast_math: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            iterations: 30,
            nodes: 50_000,
            time: Duration::from_millis(500),
            search: Default::default(),
            fast_math: false,
        }
    }
}

/// The extractors whose terms are extraction's candidates, in the order they are priced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extractor {
    /// The smallest term (egg's `AstSize`).
    Size,
    /// The fusion-friendly term (`FusionCost`: reading through a view of a computed elementwise value costs more).
    Fusion,
    /// The DAG-aware extraction ([`crate::extract::dag_choice`]), for e-graphs of moderate size.
    Dag,
    /// The functional term, as functionalization made it.
    Functional,
    /// Extraction's search over the e-graph's choices ([`crate::extract::plan_search`]), where it found a cheaper
    /// term than the others.
    Search,
}

impl Extractor {
    /// The name reports and logs give it.
    pub fn name(self) -> &'static str {
        match self {
            Extractor::Size => "size",
            Extractor::Fusion => "fusion",
            Extractor::Dag => "dag",
            Extractor::Functional => "functional",
            Extractor::Search => "search",
        }
    }
}

impl std::fmt::Display for Extractor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.name())
    }
}

/// What one optimization did.
#[derive(Clone, Debug)]
pub struct Optimized {
    pub term: Term,
    pub iterations: usize,
    pub egraph_nodes: usize,
    pub egraph_classes: usize,
    pub stop_reason: String,
    /// How often each rule fired, by name.
    pub fired: BTreeMap<String, usize>,
    /// Unions of classes of different types (a rule that is not sound); empty when all is well.
    pub conflicts: Vec<String>,
    /// The candidate terms extraction chose among, with their plans' decision costs in seconds
    /// ([`crate::lower::estimate::decision_cost`]); `term` is the cheapest, the first on ties.
    pub candidates: Vec<(Extractor, f64)>,
    /// What those costs are ([`crate::lower::estimate::decision_label`]: `predicted time` or `planning cost`).
    pub decided_by: &'static str,
    pub chosen: Extractor,
    /// Every candidate term, in the order of `candidates` (for autotuning, [`crate::autotune`]).
    pub alternatives: Vec<(Extractor, Term)>,
    /// Rust rewrites that applied but whose result the cost model predicted slower, with how many places.
    pub rejected: BTreeMap<String, usize>,
    /// Why loop nests were left as they are (the dependence or shape that stopped `loops/interchange`).
    pub notes: Vec<String>,
    /// What extraction's search over the e-graph did ([`crate::extract::plan_search`]).
    pub search: crate::extract::SearchStats,
    fusion_term: Option<Term>,
    dag_term: Option<Term>,
}

/// A tree cost that counts nodes and penalizes reading through a view of a computed elementwise value, so that
/// views move to the operands and the value fuses into whatever reads it, and predicated selects over whole
/// buffers (`inview`), so that writes through views (which can go in place) are kept.
struct FusionCost;

#[derive(Clone, Debug, PartialEq)]
struct FCost {
    total: f64,
    elementwise: bool,
}

impl PartialOrd for FCost {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        self.total.partial_cmp(&o.total)
    }
}

impl egg::CostFunction<Node> for FusionCost {
    type Cost = FCost;
    fn cost<C: FnMut(egg::Id) -> FCost>(&mut self, enode: &Node, mut costs: C) -> FCost {
        use egg::Language;
        let mut total = 1.0;
        for &c in enode.children() {
            total += costs(c).total;
        }
        if let Node::Access([x, _]) = enode {
            if costs(*x).elementwise {
                total += 30.0;
            }
        }
        // A predicated select over the whole buffer cannot write in place: keep the view write where there is one.
        if matches!(enode, Node::Op(crate::ir::OpName::InView, _)) {
            total += 30.0;
        }
        let elementwise = matches!(enode, Node::Op(op, _) if op.is_elementwise());
        FCost { total, elementwise }
    }
}

/// The Rust rewrites, by name, with what they do; reported beside the text rules.
pub const RUST_REWRITES: &[(&str, &str)] = &[
    (
        "loops/interchange",
        "a counted loop around one counted loop becomes the inner loop around the outer one, where dependences allow",
    ),
    ("loops/vectorize", "a loop whose iterations are independent becomes slice-wide operations over all of them"),
    (
        "loops/hoist",
        "work in a counted loop that reads no carried state is done for all iterations before the loop (fission)",
    ),
    (
        "loops/promote",
        "a loop that reads and writes carried state only through one view fixed for the loop carries the view's region",
    ),
    (
        "matmul/reassociate",
        "a matrix times a product that is a vector, a @ (x @ w), becomes (a @ w.T) @ x, which a loop computes once where a and w are fixed (--fast-math: products grouped otherwise round otherwise)",
    ),
    ("scatter/cover-cat", "assigns through slices of one axis that together cover a buffer become one cat"),
    ("views/compose", "a read through a view of a read through a view is one read through the composed view"),
];

/// A Rust rewrite: the term rewritten, and how many places it changed.
type RustRewrite = fn(&Term, &[(String, crate::tensor::DType, Vec<usize>)]) -> (Term, usize);

/// A Rust rewrite of the phase after the first saturation, in order. `priced`: kept only where the cost profile
/// predicts the plan cheaper (fission trades per-iteration kernels for a batched kernel and a buffer; a reassociated
/// product may do more work). `real`: holds in real arithmetic only (products grouped otherwise round otherwise),
/// so it runs with fast math alone, like the `@real` text rules.
struct Pass {
    name: &'static str,
    run: RustRewrite,
    priced: bool,
    real: bool,
}

const PASSES: [Pass; 6] = [
    Pass { name: "views/compose", run: super::compose::compose_views, priced: false, real: false },
    Pass { name: "loops/vectorize", run: super::vectorize::vectorize_loops, priced: false, real: false },
    Pass { name: "matmul/reassociate", run: super::reassoc::reassociate, priced: true, real: true },
    Pass { name: "loops/hoist", run: super::hoist::hoist_loops, priced: true, real: false },
    Pass { name: "loops/promote", run: super::promote::promote_views, priced: false, real: false },
    Pass { name: "scatter/cover-cat", run: super::cover::cover_cat, priced: false, real: false },
];

/// Saturates and extracts in phases: the text rules, then the Rust rewrites on the extracted term, then the text
/// rules again on what they produced. Each phase gets half of what is left of the time limit.
pub fn optimize(f: &Functional, rules: &[Rewrite<Node, TermAnalysis>], limits: Limits) -> Result<Optimized, String> {
    optimize_for(f, rules, limits, &crate::cost::Profile::shipped_c())
}

/// [`optimize`], extracting the candidate whose plan `profile` predicts cheapest.
pub fn optimize_for(
    f: &Functional,
    rules: &[Rewrite<Node, TermAnalysis>],
    limits: Limits,
    profile: &crate::cost::Profile,
) -> Result<Optimized, String> {
    let t = std::time::Instant::now();
    // Pricing candidates plans each of them: only the plans used afterwards are logged.
    let o = crate::log::quietly(crate::log::Stage::Plan, || saturate_and_extract(f, rules, limits, profile))?;
    crate::log::log(crate::log::Stage::Saturate, || {
        let fired: usize = o.fired.values().sum();
        let candidates: Vec<String> = o.candidates.iter().map(|(n, c)| format!("{n} {:.4} ms", c * 1e3)).collect();
        format!(
            "{} iterations ({}), {} e-nodes, {} rule applications; extraction chose `{}` among {} (search {}); in {:.2} ms",
            o.iterations,
            o.stop_reason,
            o.egraph_nodes,
            fired,
            o.chosen,
            candidates.join(", "),
            o.search,
            t.elapsed().as_secs_f64() * 1e3
        )
    });
    Ok(o)
}

fn saturate_and_extract(
    f: &Functional,
    rules: &[Rewrite<Node, TermAnalysis>],
    limits: Limits,
    profile: &crate::cost::Profile,
) -> Result<Optimized, String> {
    let start = std::time::Instant::now();
    let mut out = Optimized {
        term: f.term.clone(),
        iterations: 0,
        egraph_nodes: 0,
        egraph_classes: 0,
        stop_reason: String::new(),
        fired: BTreeMap::new(),
        conflicts: Vec::new(),
        candidates: Vec::new(),
        decided_by: crate::lower::estimate::decision_label(profile),
        chosen: Extractor::Functional,
        alternatives: Vec::new(),
        rejected: BTreeMap::new(),
        notes: Vec::new(),
        search: Default::default(),
        fusion_term: None,
        dag_term: None,
    };
    let phase = |out: &mut Optimized| -> Result<Searchable, String> {
        crate::limits::check()?;
        let left = limits.time.saturating_sub(start.elapsed());
        saturate(out, &f.inputs, rules, Limits { time: left / 2, ..limits })
    };
    let mut graph = phase(&mut out)?;
    let mut changed = false;
    crate::limits::check()?;
    let (swapped, n, notes) = super::interchange::interchange_explained(&out.term, &f.inputs);
    out.notes = notes;
    if n > 0 {
        // Interchange pays off through what it enables (a layer's input projection batched over all steps): the
        // cost model compares both loop orders after the loop rewrites that follow.
        let follow = |t: &Term| {
            let t = super::vectorize::vectorize_loops(t, &f.inputs).0;
            super::hoist::hoist_loops(&t, &f.inputs).0
        };
        if cheaper(&follow(&swapped), &follow(&out.term), &f.inputs, profile) {
            out.term = swapped;
            out.fired.insert("loops/interchange".to_string(), n);
            changed = true;
        } else {
            out.rejected.insert("loops/interchange".to_string(), n);
        }
    }
    for &Pass { name, run, priced, real } in &PASSES {
        crate::limits::check()?;
        if real && !limits.fast_math {
            continue;
        }
        let (term, n) = run(&out.term, &f.inputs);
        if n > 0 {
            verify(&term, &f.inputs).map_err(|e| format!("{name} produced a term that does not verify: {e}"))?;
            if priced && !cheaper(&term, &out.term, &f.inputs, profile) {
                out.rejected.insert(name.to_string(), n);
                continue;
            }
            out.term = term;
            out.fired.insert(name.to_string(), n);
            changed = true;
        }
    }
    if changed {
        graph = phase(&mut out)?;
    }
    // Extraction: the smallest term, the fusion-friendly term and the functional term, planned and costed.
    let fused = out.fusion_term.take();
    let mut cands: Vec<(Extractor, Term)> = vec![(Extractor::Size, out.term.clone())];
    if let Some(t) = fused {
        cands.push((Extractor::Fusion, t));
    }
    if let Some(t) = out.dag_term.take() {
        cands.push((Extractor::Dag, t));
    }
    cands.push((Extractor::Functional, f.term.clone()));
    let mut best: Option<(f64, usize)> = None;
    for (k, (name, t)) in cands.iter().enumerate() {
        let cost = match crate::lower::plan_for(t, &f.inputs, crate::lower::Policy::Fused, profile) {
            Ok(p) => crate::lower::estimate::decision_cost(&p, profile),
            Err(_) => f64::INFINITY,
        };
        // A candidate that could not be planned in time is not a candidate: the whole optimization is out of time.
        crate::limits::check()?;
        out.candidates.push((*name, cost));
        if best.is_none_or(|(c, _)| cost < c) {
            best = Some((cost, k));
        }
    }
    // The search: from the fixed extractors' choices, other choices of the last e-graph, each planned and priced.
    if let Some(sg) = graph {
        let seeds: Vec<(crate::extract::Choice, f64)> = sg
            .seeds
            .into_iter()
            .filter_map(|(name, c)| out.candidates.iter().find(|(n, _)| *n == name).map(|(_, p)| (c, *p)))
            .collect();
        let price = |t: &Term| -> Option<f64> {
            crate::limits::check().ok()?;
            verify(t, &f.inputs).ok()?;
            let p = crate::lower::plan_for(t, &f.inputs, crate::lower::Policy::Fused, profile).ok()?;
            Some(crate::lower::estimate::decision_cost(&p, profile))
        };
        let found = crate::extract::plan_search(&sg.graph, sg.root, &seeds, limits.search, price);
        crate::limits::check()?;
        if let Some((choice, cost, stats)) = found {
            out.search = stats;
            if stats.improvements > 0 {
                out.candidates.push((Extractor::Search, cost));
                cands.push((Extractor::Search, crate::extract::build(&sg.graph, &choice, sg.root)));
                if best.is_none_or(|(c, _)| cost < c) {
                    best = Some((cost, cands.len() - 1));
                }
            }
        }
    }
    let (_, k) = best.expect("at least the functional term");
    out.chosen = cands[k].0;
    out.term = cands[k].1.clone();
    out.alternatives = cands;
    Ok(out)
}

/// Whether `new`'s plan is predicted cheaper than `old`'s (a term that cannot be planned is not).
fn cheaper(
    new: &Term,
    old: &Term,
    inputs: &[(String, crate::tensor::DType, Vec<usize>)],
    profile: &crate::cost::Profile,
) -> bool {
    let cost = |t: &Term| match crate::lower::plan_for(t, inputs, crate::lower::Policy::Fused, profile) {
        Ok(p) => crate::lower::estimate::decision_cost(&p, profile),
        Err(_) => f64::INFINITY,
    };
    cost(new) < cost(old)
}

/// One phase: saturates `out.term` with `rules` and extracts the best term back into it, adding to the counts.
fn saturate(
    out: &mut Optimized,
    inputs: &[(String, crate::tensor::DType, Vec<usize>)],
    rules: &[Rewrite<Node, TermAnalysis>],
    limits: Limits,
) -> Result<Searchable, String> {
    let runner = Runner::<Node, TermAnalysis>::new(TermAnalysis::new(inputs))
        .with_iter_limit(limits.iterations)
        .with_node_limit(limits.nodes)
        .with_scheduler(super::schedule::Capped::new(limits.nodes))
        // The caller's deadline (a batch's per-program limit, `run --time-limit`) bounds saturation too.
        .with_time_limit(crate::limits::remaining().map_or(limits.time, |r| r.min(limits.time)))
        .with_expr(&out.term)
        .run(rules);
    crate::limits::check()?;
    let root = runner.roots[0];
    let extractor = crate::extract::TreeExtractor::new(&runner.egraph, AstSize);
    let (_, term) = extractor.find_best(root);
    crate::limits::check()?;
    verify(&term, inputs).map_err(|e| format!("the extracted term does not verify: {e}"))?;
    let mut seeds = vec![(Extractor::Size, extractor.choice())];
    let fusion = crate::extract::TreeExtractor::new(&runner.egraph, FusionCost);
    let (_, fused) = fusion.find_best(root);
    if verify(&fused, inputs).is_ok() {
        out.fusion_term = Some(fused);
        seeds.push((Extractor::Fusion, fusion.choice()));
    }
    // The DAG-aware search costs a DAG walk per alternative node: only for e-graphs of moderate size.
    if runner.egraph.number_of_classes() <= crate::extract::MAX_CLASSES {
        crate::limits::check()?;
        let choice = crate::extract::dag_choice(&runner.egraph, root, 4);
        crate::extract::check(&runner.egraph, &choice, root).map_err(|e| format!("DAG extraction: {e}"))?;
        let dag = crate::extract::build(&runner.egraph, &choice, root);
        if verify(&dag, inputs).is_ok() {
            out.dag_term = Some(dag);
            seeds.push((Extractor::Dag, choice));
        }
    }
    for it in &runner.iterations {
        for (name, n) in &it.applied {
            *out.fired.entry(name.to_string()).or_insert(0) += n;
        }
    }
    let stop_reason = match &runner.stop_reason {
        Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(_)) => "time limit".to_string(),
        Some(StopReason::Other(s)) => s.clone(),
        None => "not stopped".to_string(),
    };
    out.term = term;
    out.iterations += runner.iterations.len();
    out.egraph_nodes = out.egraph_nodes.max(runner.egraph.total_size());
    out.egraph_classes = out.egraph_classes.max(runner.egraph.number_of_classes());
    out.stop_reason =
        if out.stop_reason.is_empty() { stop_reason } else { format!("{}; {stop_reason}", out.stop_reason) };
    out.conflicts.extend(runner.egraph.analysis.conflicts.iter().cloned());
    let small = runner.egraph.number_of_classes() <= crate::extract::MAX_CLASSES;
    Ok(small.then(|| SearchGraph { graph: runner.egraph, root, seeds }))
}

/// The e-graph of the last saturation, kept for extraction's search: its root and the choices the fixed extractors
/// made (by extractor, as in [`Optimized::candidates`]). `None` for e-graphs too large to search.
type Searchable = Option<SearchGraph>;

struct SearchGraph {
    graph: super::TermGraph,
    root: egg::Id,
    seeds: Vec<(Extractor, crate::extract::Choice)>,
}
