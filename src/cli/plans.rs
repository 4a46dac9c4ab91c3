//! `compare`, `explain` and `calibrate`: the commands that put plans side by side.

use std::path::Path;

use funcfuse::frontend;

use crate::cli::rules::UseRules;
use crate::{collect_targets, Backend, CompareArgs, Failure};

/// Work-relative figures from WORKLOADS.md: kernel launches eager -> TensorSSA in the reference work.
const THEIR_LAUNCHES: &[(&str, usize, usize)] = &[
    ("yolov3", 96, 34),
    ("ssd", 242, 103),
    ("yolact", 269, 92),
    ("fcos", 268, 73),
    ("nasrnn", 1655, 104),
    ("lstm", 10822, 1921),
    ("seq2seq", 1449, 351),
    ("attention", 323, 288),
];

pub(crate) fn compare_cmd(paths: &[String], a: &CompareArgs) -> Result<(), Failure> {
    let rules = funcfuse::rewrite::rules::to_rewrites(&a.rules.usable()?)?;
    let profile = funcfuse::cost::Profile::load_or_shipped(a.costs.as_deref()).map_err(|e| Failure(1, e))?;
    let mut which: Vec<&str> = Vec::new();
    for b in a.baselines.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        match b {
            "eager" | "unfunctionalized" => which.push(b),
            other => {
                return Err(Failure(2, format!("--baselines: unknown baseline `{other}` (eager, unfunctionalized)")))
            }
        }
    }
    which.push("ours");
    let measure = a.measure.then_some(a.runs);
    let torch: Option<serde_json::Value> = match &a.baseline_file {
        None => None,
        Some(p) => {
            let text = funcfuse::io::read_text(p).map_err(|e| Failure(1, format!("{}: {e}", p.display())))?;
            let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
                Failure(1, format!("{}: not a baseline file (JSON from scripts/torch_baseline.py): {e}", p.display()))
            })?;
            if !v["programs"].is_object() {
                return Err(Failure(1, format!("{}: no `programs` in the baseline file", p.display())));
            }
            Some(v)
        }
    };
    let torch_device = torch
        .as_ref()
        .map(|t| format!("{} {}", t["device"].as_str().unwrap_or("?"), t["torch"].as_str().unwrap_or("")));
    let mut speed_torch = Vec::new();
    let mut md = String::from("| program | plan | kernels | fallbacks | MB moved | predicted ms |");
    md.push_str(if a.measure {
        " measured ms |\n|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|\n"
    });
    let mut records = Vec::new();
    let (mut speed_eager, mut speed_unf) = (Vec::new(), Vec::new());
    let mut ratios = String::new();
    let mut failed = 0;
    let mut differ: Vec<String> = Vec::new();
    for (file, _, only) in collect_targets(paths)? {
        let shown = file.display().to_string();
        let module = match frontend::load_module(&shown) {
            Ok(m) => m,
            Err(d) => {
                failed += 1;
                outln!("FAIL {d}");
                continue;
            }
        };
        let funcs: Vec<String> = match &only {
            Some(f) => vec![f.clone()],
            None => module.programs().map(|f| f.name.clone()).collect(),
        };
        for func in funcs {
            let label = format!("{shown}::{func}");
            let rows = match funcfuse::compare::compare_program(
                &module,
                &func,
                &rules,
                &profile,
                &which,
                measure,
                a.backend.target(),
            ) {
                Ok(r) => r,
                Err(d) => {
                    failed += 1;
                    outln!("FAIL {label}: {d}");
                    records.push(serde_json::json!({ "program": label, "error": d.to_string() }));
                    continue;
                }
            };
            for r in &rows {
                if !r.agrees {
                    differ.push(format!("{label} ({})", r.plan));
                }
                let agree = if r.agrees { "" } else { " (differs from the reference!)" };
                md.push_str(&format!(
                    "| {label} | {}{agree} | {} | {} | {:.2} | {:.3} |",
                    r.plan,
                    r.kernels,
                    r.fallbacks,
                    r.bytes / 1e6,
                    r.predicted_s * 1e3
                ));
                if let Some(m) = r.measured_s {
                    md.push_str(&format!(" {:.3} |", m * 1e3));
                }
                md.push('\n');
            }
            let get = |p: &str| rows.iter().find(|r| r.plan == p);
            let mut torch_json = serde_json::Value::Null;
            if let Some(row) = torch.as_ref().and_then(|t| t["programs"].get(label.as_str())) {
                let dev = torch_device.as_deref().unwrap_or("");
                for (key, name) in [("eager_s", "PyTorch eager"), ("compile_s", "torch.compile")] {
                    let cell = match row.get(key).and_then(|v| v.as_f64()) {
                        Some(t) => format!("{:.3}", t * 1e3),
                        None => "failed".to_string(),
                    };
                    let pad = if a.measure { format!(" {cell} |") } else { String::new() };
                    md.push_str(&format!(
                        "| {label} | {name} ({dev}) | | | | {} |{pad}\n",
                        if a.measure { "" } else { &cell }
                    ));
                }
                if let (Some(t), Some(m)) =
                    (row.get("eager_s").and_then(|v| v.as_f64()), get("ours").and_then(|r| r.measured_s))
                {
                    speed_torch.push(t / m);
                }
                torch_json = row.clone();
            }
            let ours = get("ours").expect("ours is always planned");
            let time = |r: &funcfuse::compare::PlanRow| r.measured_s.unwrap_or(r.predicted_s);
            if let Some(e) = get("eager") {
                speed_eager.push(time(e) / time(ours));
                if let Some((w, them_e, them_o)) = THEIR_LAUNCHES.iter().find(|(w, _, _)| *w == func) {
                    ratios.push_str(&format!(
                        "| {w} | {} -> {} ({:.2}x) | {them_e} -> {them_o} ({:.2}x) |\n",
                        e.kernels,
                        ours.kernels,
                        e.kernels as f64 / ours.kernels.max(1) as f64,
                        *them_e as f64 / *them_o as f64
                    ));
                }
            }
            if let Some(u) = get("unfunctionalized") {
                speed_unf.push(time(u) / time(ours));
            }
            outln!(
                "{label}: {}",
                rows.iter()
                    .map(|r| format!(
                        "{} {} kernels {:.3} ms",
                        r.plan,
                        r.kernels,
                        r.measured_s.unwrap_or(r.predicted_s) * 1e3
                    ))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut rec = funcfuse::compare::rows_json(&label, &rows);
            if !torch_json.is_null() {
                rec["pytorch"] = torch_json;
            }
            records.push(rec);
        }
    }
    let what = if a.measure { "measured" } else { "predicted" };
    let g = |xs: &[f64]| funcfuse::compare::geomean(xs);
    let mut summary = String::new();
    if !speed_eager.is_empty() {
        summary.push_str(&format!("geometric-mean speedup of ours over eager ({what}): {:.2}x\n", g(&speed_eager)));
    }
    if !speed_unf.is_empty() {
        summary.push_str(&format!(
            "geometric-mean speedup of ours over unfunctionalized ({what}): {:.2}x\n",
            g(&speed_unf)
        ));
    }
    if !speed_torch.is_empty() {
        summary.push_str(&format!(
            "geometric-mean speedup of ours over PyTorch eager ({}, measured on the machines the files came from): {:.2}x over {} programs\n",
            torch_device.as_deref().unwrap_or(""),
            g(&speed_torch),
            speed_torch.len()
        ));
    }
    if !ratios.is_empty() {
        md.push_str("\n| workload | kernels eager -> ours | reference work (TensorSSA) |\n|---|---|---|\n");
        md.push_str(&ratios);
    }
    md.push('\n');
    md.push_str(&summary);
    out!("{summary}");
    std::fs::create_dir_all(&a.out).map_err(|e| Failure(1, format!("{}: {e}", a.out.display())))?;
    let report = serde_json::json!({
        "profile": profile.to_json(),
        "measured": a.measure,
        "programs": records,
        "geomean_speedup_over_eager": if speed_eager.is_empty() { None } else { Some(g(&speed_eager)) },
        "geomean_speedup_over_unfunctionalized": if speed_unf.is_empty() { None } else { Some(g(&speed_unf)) },
    });
    let write = |name: &str, text: String| {
        std::fs::write(a.out.join(name), text).map_err(|e| Failure(1, format!("{}: {e}", a.out.join(name).display())))
    };
    write("compare.json", serde_json::to_string_pretty(&report).unwrap_or_default() + "\n")?;
    write("compare.md", md)?;
    outln!("report in {}", a.out.join("compare.md").display());
    if !differ.is_empty() {
        outln!("{} plans differ from the reference: {}", differ.len(), differ.join(", "));
    }
    if failed > 0 || !differ.is_empty() {
        return Err(Failure(1, format!("{failed} programs failed, {} plans differ from the reference", differ.len())));
    }
    Ok(())
}

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
