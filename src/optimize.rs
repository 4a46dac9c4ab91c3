//! One program's optimization (functionalize, saturate, extract: [`crate::pipeline::Session::optimize`]) and its record.
//!
//! Records are deterministic (no times in them) so that the same input gives byte-identical output; times are
//! reported separately.

use std::collections::BTreeMap;

use serde_json::{json, Value};

use crate::diag::Diagnostic;
use crate::frontend::Module;
use crate::ir::{display_dag, term_stats, Node, TermStats};
use crate::pipeline::Session;
use crate::rewrite::saturate::Limits;
use crate::rewrite::TermAnalysis;

pub use crate::pipeline::ProgramResult;

/// Functionalizes and optimizes program `func` of `module` with `rules`, extracting by `profile`
/// ([`crate::pipeline::Session::optimize`] with these).
pub fn optimize_program(
    module: &Module,
    func: &str,
    rules: &[egg::Rewrite<Node, TermAnalysis>],
    limits: Limits,
    profile: &crate::cost::Profile,
) -> Result<ProgramResult, Diagnostic> {
    optimize_program_with(module, func, &BTreeMap::new(), rules, limits, profile)
}

/// [`optimize_program`] with scalar parameters given values (others take their defaults).
pub fn optimize_program_with(
    module: &Module,
    func: &str,
    scalars: &BTreeMap<String, crate::interp::ScalarArg>,
    rules: &[egg::Rewrite<Node, TermAnalysis>],
    limits: Limits,
    profile: &crate::cost::Profile,
) -> Result<ProgramResult, Diagnostic> {
    let mut session = Session::new(rules, profile.clone(), crate::backend::Target::C);
    session.limits = limits;
    session.optimize(module, func, scalars)
}

fn stats_json(s: &TermStats) -> Value {
    json!({ "nodes": s.nodes, "loops": s.loops, "accesses": s.accesses, "assigns": s.assigns, "ifs": s.ifs })
}

/// The deterministic JSON record of a program's optimization.
pub fn record(program: &str, r: &ProgramResult) -> Value {
    json!({
        "program": program,
        "status": "ok",
        "functional": stats_json(&term_stats(&r.functional.term)),
        "optimized": stats_json(&term_stats(&r.optimized.term)),
        "egraph": { "nodes": r.optimized.egraph_nodes, "classes": r.optimized.egraph_classes },
        "iterations": r.optimized.iterations,
        "stop_reason": r.optimized.stop_reason,
        "rules_fired": r.optimized.fired,
        "conflicts": r.optimized.conflicts,
        "extraction": {
            "chosen": r.optimized.chosen.name(),
            "predicted_s": r.optimized.candidates.iter().map(|(n, c)| (n.name().to_string(), json!(c))).collect::<serde_json::Map<_, _>>(),
            "search": {
                "priced": r.optimized.search.priced,
                "improvements": r.optimized.search.improvements,
                "budget_spent": r.optimized.search.budget_spent,
            },
        },
    })
}

/// The record of a program that failed, with its error.
pub fn failure_record(program: &str, error: &str) -> Value {
    json!({ "program": program, "status": "failed", "error": error })
}

/// The term texts written next to a record.
pub fn term_texts(r: &ProgramResult) -> (String, String) {
    (display_dag(&r.functional.term), display_dag(&r.optimized.term))
}
