//! Saturation and extraction: the functional term goes into the e-graph, the rules run within limits that are always
//! honoured, and the smallest term (weighted size, until the cost model exists) is extracted. The functional term
//! itself is always a valid answer: extraction can only pick it or something proven equal to it.

use std::collections::BTreeMap;
use std::time::Duration;

use egg::{AstSize, Extractor, Rewrite, Runner, StopReason};

use super::analysis::TermAnalysis;
use crate::functionalize::Functional;
use crate::ir::{verify, Node, Term};

/// Limits of one saturation.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub iterations: usize,
    pub nodes: usize,
    pub time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits { iterations: 30, nodes: 50_000, time: Duration::from_millis(500) }
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
}

pub fn optimize(f: &Functional, rules: &[Rewrite<Node, TermAnalysis>], limits: Limits) -> Result<Optimized, String> {
    let runner = Runner::<Node, TermAnalysis>::new(TermAnalysis::new(&f.inputs))
        .with_iter_limit(limits.iterations)
        .with_node_limit(limits.nodes)
        .with_time_limit(limits.time)
        .with_expr(&f.term)
        .run(rules);
    let root = runner.roots[0];
    let extractor = Extractor::new(&runner.egraph, AstSize);
    let (_, term) = extractor.find_best(root);
    verify(&term, &f.inputs).map_err(|e| format!("the extracted term does not verify: {e}"))?;
    let mut fired = BTreeMap::new();
    for it in &runner.iterations {
        for (name, n) in &it.applied {
            *fired.entry(name.to_string()).or_insert(0) += n;
        }
    }
    let stop_reason = match &runner.stop_reason {
        Some(StopReason::Saturated) => "saturated".to_string(),
        Some(StopReason::IterationLimit(n)) => format!("iteration limit ({n})"),
        Some(StopReason::NodeLimit(n)) => format!("node limit ({n})"),
        Some(StopReason::TimeLimit(t)) => format!("time limit ({t:.3} s)"),
        Some(StopReason::Other(s)) => s.clone(),
        None => "not stopped".to_string(),
    };
    Ok(Optimized {
        term,
        iterations: runner.iterations.len(),
        egraph_nodes: runner.egraph.total_size(),
        egraph_classes: runner.egraph.number_of_classes(),
        stop_reason,
        fired,
        conflicts: runner.egraph.analysis.conflicts.clone(),
    })
}
