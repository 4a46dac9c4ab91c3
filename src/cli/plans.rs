//! `explain` and `calibrate` (`compare` is in `compare.rs`).

use std::path::Path;

use funcfuse::pipeline::Session;

use crate::cli::rules::UseRules;
use crate::{Backend, Failure};

pub(crate) fn explain_cmd(
    target: &str,
    rules: &UseRules,
    dump: Option<&str>,
    dot: Option<&Path>,
    costs: Option<&Path>,
    measure: Option<usize>,
) -> Result<(), Failure> {
    let (file, func) = target
        .split_once("::")
        .ok_or_else(|| Failure(2, format!("`{target}`: name a program as FILE.py::FUNCTION")))?;
    let module = crate::cli::load_module(file)?;
    let rewrites = funcfuse::rewrite::rules::to_rewrites(&rules.usable()?)?;
    let profile = funcfuse::cost::Profile::load_or_shipped(costs).map_err(|e| Failure(1, e))?;
    let session = Session::new(&rewrites, profile, funcfuse::backend::Target::C).fast_math(rules.fast_math);
    let r = session.optimize(&module, func, &Default::default())?;
    let inputs = &r.functional.inputs;
    let plans = funcfuse::explain::plans(&r, &session).map_err(|e| Failure(1, e))?;
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
        .run(session.rules);
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
    let which = match costs {
        Some(_) => format!("the {} profile", session.profile.backend),
        None => "the shipped CPU profile".into(),
    };
    out!("{}", funcfuse::explain::text(target, &r, &plans, &which));
    if let Some(runs) = measure {
        let mut o = r.optimized.clone();
        let tried = funcfuse::autotune::autotune(
            &r.functional,
            &mut o,
            usize::MAX,
            runs.max(1),
            &session.profile,
            session.target,
        )
        .map_err(|e| Failure(1, format!("{target}: measuring the candidates: {e}")))?;
        out!("{}", funcfuse::explain::measured_text(&tried, runs.max(1), r.optimized.decided_by));
    }
    Ok(())
}

pub(crate) fn calibrate_cmd(
    backend: Backend,
    out: &Path,
    from: &[String],
    from_records: &[std::path::PathBuf],
    runs: usize,
) -> Result<(), Failure> {
    use funcfuse::calibrate as cal;
    if runs == 0 {
        return Err(Failure(2, "--runs must be at least 1".into()));
    }
    // Records first: a bad directory is a usage error found before minutes of measuring.
    let mut samples = Vec::new();
    let mut sources = vec![serde_json::json!("calibration kernels")];
    for d in from_records {
        let s = cal::record_samples(d).map_err(|e| Failure(2, e))?;
        sources.push(serde_json::json!(format!("{} ({} records)", d.display(), s.len())));
        samples.extend(s);
    }
    let targets = if from.is_empty() { Vec::new() } else { crate::collect_targets(from)? };
    let target = backend.target();
    let base = funcfuse::calibrate::calibrate(target).map_err(|e| Failure(1, e))?;
    let rules = funcfuse::rewrite::rules::to_rewrites(
        &funcfuse::rewrite::rules::shipped().map_err(|d| Failure(1, d.to_string()))?,
    )?;
    let session = Session::new(&rules, base, target);
    samples.extend(cal::kernel_samples(&session, runs).map_err(|e| Failure(1, e))?);
    let mut failed = 0;
    let (mut modules, mut programs) = (Vec::new(), Vec::new());
    for (file, _, only) in targets {
        let shown = file.display().to_string();
        match funcfuse::frontend::load_module(&shown) {
            Ok(module) => {
                let funcs = only.map_or_else(|| module.program_names(), |f| vec![f]);
                programs.extend(funcs.into_iter().map(|f| (modules.len(), f)));
                modules.push(module);
            }
            Err(d) => {
                failed += 1;
                eprintln!("calibrate: skipped {d}");
            }
        }
    }
    // Every program's kernels are compiled (and run once) before any is timed: a plan timed right after its
    // kernels were compiled measures slower than it runs later, and those times would skew the fit.
    for (m, f) in &programs {
        let _ = cal::program_samples(&modules[*m], f, &session, 1);
    }
    for (m, f) in &programs {
        let module = &modules[*m];
        match cal::program_samples(module, f, &session, runs) {
            Ok(s) => samples.extend(s),
            Err(d) => {
                failed += 1;
                eprintln!("calibrate: skipped {}::{f}: {d}", module.path);
            }
        }
    }
    if !from.is_empty() {
        sources.push(serde_json::json!(format!("{} ({failed} programs skipped)", from.join(" "))));
    }
    let p = cal::fitted(&session.profile, &samples, serde_json::Value::from(sources));
    let text = serde_json::to_string_pretty(&p.to_json()).unwrap_or_default() + "\n";
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: {e}", dir.display())))?;
    }
    std::fs::write(out, &text).map_err(|e| Failure(1, format!("{}: {e}", out.display())))?;
    out!("{text}");
    Ok(())
}
