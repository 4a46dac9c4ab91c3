//! `explain` and `calibrate` (`compare` is in `compare.rs`).

use std::path::Path;

use funcfuse::frontend;

use crate::cli::rules::UseRules;
use crate::{Backend, Failure};

pub(crate) fn explain_cmd(
    target: &str,
    rules: &UseRules,
    dump: Option<&str>,
    dot: Option<&Path>,
    costs: Option<&Path>,
) -> Result<(), Failure> {
    let (file, func) = target
        .split_once("::")
        .ok_or_else(|| Failure(2, format!("`{target}`: name a program as FILE.py::FUNCTION")))?;
    let module = frontend::load_module(file)?;
    let rewrites = funcfuse::rewrite::rules::to_rewrites(&rules.usable()?)?;
    let profile = funcfuse::cost::Profile::load_or_shipped(costs).map_err(|e| Failure(1, e))?;
    let r = funcfuse::optimize::optimize_program(&module, func, &rewrites, Default::default(), &profile)?;
    let inputs = &r.functional.inputs;
    let mut plans = Vec::new();
    for (name, policy) in funcfuse::compare::PLANS {
        let term = if *policy == funcfuse::lower::Policy::Fused { &r.optimized.term } else { &r.functional.term };
        let p = funcfuse::lower::plan_for(term, inputs, *policy, &profile)
            .map_err(|e| Failure(1, format!("{name} plan: {e}")))?;
        let e = funcfuse::cost::plan_estimate(&p, &profile);
        plans.push((*name, p, e));
    }
    let ours = &plans[2].1;
    match dump {
        None => {}
        Some("functional") => {
            out!("{}", funcfuse::ir::display_dag(&r.functional.term));
            return Ok(());
        }
        Some("optimized") => {
            out!("{}", funcfuse::ir::display_dag(&r.optimized.term));
            return Ok(());
        }
        Some("plan") => {
            out!("{}", ours.describe());
            return Ok(());
        }
        Some("c") => {
            out!("{}", funcfuse::backend::c::render(ours));
            return Ok(());
        }
        Some("cuda") => {
            out!("{}", funcfuse::backend::cuda::render(ours));
            return Ok(());
        }
        Some(other) => {
            return Err(Failure(2, format!("--dump {other}: expected functional, optimized, plan, c or cuda")))
        }
    }
    if let Some(dir) = dot {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: {e}", dir.display())))?;
        let runner = egg::Runner::<funcfuse::ir::Node, funcfuse::rewrite::TermAnalysis>::new(
            funcfuse::rewrite::TermAnalysis::new(inputs),
        )
        .with_iter_limit(30)
        .with_node_limit(50_000)
        .with_scheduler(funcfuse::rewrite::schedule::Capped::new(50_000))
        .with_time_limit(std::time::Duration::from_millis(500))
        .with_expr(&r.functional.term)
        .run(&rewrites);
        for (name, text) in [("egraph.dot", runner.egraph.dot().to_string()), ("plan.dot", ours.dot())] {
            let p = dir.join(name);
            std::fs::write(&p, text).map_err(|e| Failure(1, format!("{}: {e}", p.display())))?;
            let svg = p.with_extension("svg");
            let rendered = std::process::Command::new("dot").arg("-Tsvg").arg(&p).arg("-o").arg(&svg).status();
            match rendered {
                Ok(s) if s.success() => outln!("wrote {} and {}", p.display(), svg.display()),
                _ => outln!("wrote {} (Graphviz `dot` not found: no .svg)", p.display()),
            }
        }
    }
    let (f, o) = (funcfuse::ir::term_stats(&r.functional.term), funcfuse::ir::term_stats(&r.optimized.term));
    outln!("{target}");
    outln!(
        "  term: {} -> {} nodes, loops {} -> {}, accesses {} -> {}, assigns {} -> {}",
        f.nodes,
        o.nodes,
        f.loops,
        o.loops,
        f.accesses,
        o.accesses,
        f.assigns,
        o.assigns
    );
    outln!(
        "  e-graph: {} nodes, {} classes, {} iterations, {}",
        r.optimized.egraph_nodes,
        r.optimized.egraph_classes,
        r.optimized.iterations,
        r.optimized.stop_reason
    );
    if r.optimized.fired.is_empty() {
        outln!("  no rule fired");
    }
    for (rule, n) in &r.optimized.fired {
        let what =
            funcfuse::rewrite::saturate::RUST_REWRITES.iter().find(|(k, _)| *k == rule).map(|(_, w)| format!(" ({w})"));
        outln!("  fired {n:>4} x {rule}{}", what.unwrap_or_default());
    }
    for (rule, n) in &r.optimized.rejected {
        outln!("  not kept: {rule} applied in {n} place(s), but the cost model predicted its plan slower");
    }
    outln!("  extraction: chose `{}` among:", r.optimized.chosen);
    for (name, cost) in &r.optimized.candidates {
        outln!("    {name:<11} predicted {:.4} ms", cost * 1e3);
    }
    let which =
        if costs.is_some() { format!("the {} profile", profile.backend) } else { "the shipped CPU profile".into() };
    outln!("  plans (predicted with {which}):");
    for (name, p, e) in &plans {
        let fallbacks = p.how.iter().filter(|h| **h == funcfuse::lower::How::Fallback).count();
        let in_place = p.how.iter().filter(|h| matches!(h, funcfuse::lower::How::InPlace(_))).count();
        outln!(
            "    {name:<17} {:>8.0} launches {:>10.3} MB {:>9.4} ms  ({} kernels, {in_place} in place, {fallbacks} host fallbacks)",
            e.launches,
            e.bytes / 1e6,
            e.seconds * 1e3,
            p.kernels.len()
        );
    }
    let ours_e = plans[2].2;
    for (name, _, e) in &plans[..2] {
        outln!(
            "  ours vs {name}: {:.2}x fewer launches, {:.2}x fewer bytes, {:.2}x predicted speedup",
            e.launches / ours_e.launches.max(1.0),
            e.bytes / ours_e.bytes.max(1.0),
            e.seconds / ours_e.seconds.max(1e-12)
        );
    }
    Ok(())
}

pub(crate) fn calibrate_cmd(backend: Backend, out: &Path) -> Result<(), Failure> {
    let p = funcfuse::cost::calibrate(backend.target()).map_err(|e| Failure(1, e))?;
    let text = serde_json::to_string_pretty(&p.to_json()).unwrap_or_default() + "\n";
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: {e}", dir.display())))?;
    }
    std::fs::write(out, &text).map_err(|e| Failure(1, format!("{}: {e}", out.display())))?;
    out!("{text}");
    Ok(())
}
