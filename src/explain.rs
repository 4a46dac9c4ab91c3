//! The text of `funcfuse explain` (also returned by the Python package's `funcfuse.explain`): what the optimizer did
//! to one program and its plan against the baselines, predicted with one cost profile.

use std::fmt::Write;

use crate::lower::estimate::{plan_estimate, Estimate};
use crate::lower::{How, Plan};
use crate::optimize::ProgramResult;
use crate::pipeline::Session;

/// The three plans of a program (eager, unfunctionalized, ours, as in [`crate::pipeline::PLANS`]), planned for the
/// session's profile, with their predicted figures.
pub fn plans(r: &ProgramResult, session: &Session) -> Result<Vec<(&'static str, Plan, Estimate)>, String> {
    let plans = session.plans(r, None)?;
    Ok(plans
        .into_iter()
        .map(|(name, _, p)| {
            let e = plan_estimate(&p, &session.profile);
            (name, p, e)
        })
        .collect())
}

/// The explanation: term sizes, the e-graph, rules fired, extraction's candidates and the plans' predicted figures.
/// `which` names the profile the figures come from (`the shipped CPU profile`).
pub fn text(target: &str, r: &ProgramResult, plans: &[(&'static str, Plan, Estimate)], which: &str) -> String {
    let mut s = String::new();
    let (f, o) = (crate::ir::term_stats(&r.functional.term), crate::ir::term_stats(&r.optimized.term));
    let _ = writeln!(s, "{target}");
    let _ = writeln!(
        s,
        "  term: {} -> {} nodes, loops {} -> {}, accesses {} -> {}, assigns {} -> {}",
        f.nodes, o.nodes, f.loops, o.loops, f.accesses, o.accesses, f.assigns, o.assigns
    );
    let _ = writeln!(
        s,
        "  e-graph: {} nodes, {} classes, {} iterations, {}",
        r.optimized.egraph_nodes, r.optimized.egraph_classes, r.optimized.iterations, r.optimized.stop_reason
    );
    if r.optimized.fired.is_empty() {
        let _ = writeln!(s, "  no rule fired");
    }
    for (rule, n) in &r.optimized.fired {
        let what =
            crate::rewrite::saturate::RUST_REWRITES.iter().find(|(k, _)| *k == rule).map(|(_, w)| format!(" ({w})"));
        let _ = writeln!(s, "  fired {n:>4} x {rule}{}", what.unwrap_or_default());
    }
    for (rule, n) in &r.optimized.rejected {
        let _ = writeln!(s, "  not kept: {rule} applied in {n} place(s), but the cost model predicted its plan slower");
    }
    for note in &r.optimized.notes {
        let _ = writeln!(s, "  {note}");
    }
    for why in crate::rewrite::vectorize::why_loops_stay(&r.optimized.term, &r.functional.inputs) {
        let _ = writeln!(s, "  {why}");
    }
    // Extraction decides by `lower::estimate::decision_cost`: the predicted time below, or with a profile of three
    // numbers only, the planning cost; labelled as such.
    let by = r.optimized.decided_by;
    let _ = writeln!(s, "  extraction: chose `{}` by {by} among:", r.optimized.chosen);
    for (name, cost) in &r.optimized.candidates {
        let _ = writeln!(s, "    {name:<11} {by} {:.4} ms", cost * 1e3);
    }
    let _ = writeln!(s, "  search: {}", r.optimized.search);
    let _ = writeln!(s, "  plans (predicted with {which}):");
    for (name, p, e) in plans {
        let fallbacks = p.how.iter().filter(|h| **h == How::Fallback).count();
        let in_place = p.how.iter().filter(|h| matches!(h, How::InPlace(_))).count();
        let _ = writeln!(
            s,
            "    {name:<17} {:>8.0} launches {:>10.3} MB {:>9.4} ms  ({} kernels, {in_place} in place, {fallbacks} host fallbacks)",
            e.launches,
            e.bytes / 1e6,
            e.seconds * 1e3,
            p.kernels.len()
        );
    }
    if let Some((_, p, _)) = plans.iter().find(|(n, _, _)| *n == "ours") {
        // Why each kernel boundary of our plan is there (the planner's reason for a buffer).
        let _ = writeln!(s, "  ours, why each kernel is a buffer of its own:");
        for (k, l) in p.launches.iter().enumerate() {
            let (i, why) = (usize::from(l.node), &p.why[k]);
            let op = match &p.term[l.node] {
                crate::ir::Node::Op(op, _) => op.to_string(),
                other => other.to_string(),
            };
            let _ = writeln!(s, "    k{k} (${i} {op}): {why}");
        }
        if !p.groups.is_empty() || !p.merge_notes.is_empty() {
            let _ = writeln!(s, "  ours, kernels launched together:");
        }
        for (g, members) in p.groups.iter().enumerate() {
            let names: Vec<String> = members.iter().map(|m| format!("k{m}")).collect();
            let how = if p.chained[g] {
                "one multi-output kernel over one domain, run in order at each point (each reads what another writes only at the point it computes)"
            } else {
                "independent kernels in one launch"
            };
            let _ = writeln!(s, "    g{g} = {}: {how}", names.join(", "));
        }
        for note in &p.merge_notes {
            let _ = writeln!(s, "    not merged: {note}");
        }
        if !p.dot_notes.is_empty() {
            let _ = writeln!(s, "  ours, reductions fused into their readers (a matmul as dot products per output element, a small value computed before their loop nest):");
        }
        for note in &p.dot_notes {
            let _ = writeln!(s, "    {note}");
        }
        // Python's scalars the host evaluates (`lower/host.rs`): 0-d comparisons and logical ops planned on the host.
        let host: Vec<String> = (0..p.how.len())
            .filter(|&i| p.how[i] == crate::lower::How::Host)
            .filter_map(|i| match &p.term[egg::Id::from(i)] {
                crate::ir::Node::Op(op, _) if crate::lower::host_scalar_op(*op) => Some(format!("${i} {op}")),
                _ => None,
            })
            .collect();
        if !host.is_empty() {
            let _ = writeln!(s, "  ours, Python scalars the host evaluates (no kernel): {}", host.join(", "));
        }
    }
    if let Some((_, _, ours)) = plans.iter().find(|(n, _, _)| *n == "ours") {
        for (name, _, e) in plans.iter().filter(|(n, _, _)| *n != "ours") {
            let _ = writeln!(
                s,
                "  ours vs {name}: {:.2}x fewer launches, {:.2}x fewer bytes, {:.2}x predicted speedup",
                e.launches / ours.launches.max(1.0),
                e.bytes / ours.bytes.max(1.0),
                e.seconds / ours.seconds.max(1e-12)
            );
        }
    }
    s
}

/// The explanation as data: the program's `report.json` record (what `optimize` writes for it), plans included.
pub fn record(target: &str, r: &ProgramResult, plans: &[(&'static str, Plan, Estimate)]) -> serde_json::Value {
    let mut record = crate::optimize::record(target, r);
    let figures: serde_json::Map<String, serde_json::Value> = plans
        .iter()
        .map(|(name, _, e)| {
            let v = serde_json::json!({ "kernels": e.launches.round(), "bytes": e.bytes.round(), "predicted_s": e.seconds });
            (name.to_string(), v)
        })
        .collect();
    record["plans"] = serde_json::Value::Object(figures);
    record
}

/// `explain --measure`: each distinct extraction candidate's decision cost (`by` names it), the prediction for what
/// its checked run did, and its measured time on the C backend, in predicted order (candidates whose term equals an
/// earlier one are not run again).
pub fn measured_text(tried: &[crate::autotune::Tried], runs: usize, by: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "  candidates measured on the C backend (random inputs, median of {runs} runs):");
    for t in tried {
        let note = if t.agrees { "" } else { "  (outputs differ from the first candidate's!)" };
        let _ = writeln!(
            s,
            "    {:<11} {by} {:.4} ms, predicted for its run {:.4} ms, measured {:.4} ms{note}",
            t.candidate,
            t.predicted_s * 1e3,
            t.predicted_class_s * 1e3,
            t.measured_s * 1e3
        );
    }
    s
}
