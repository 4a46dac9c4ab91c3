//! `compare`: the plans of each program side by side, with PyTorch's times (from a baseline file, or measured in
//! this run with `--torch PYTHON`) and the program's roofline bound.

use serde_json::{json, Value};

use crate::{collect_targets, Backend, CompareArgs, Failure};

/// Work-relative figures from docs/workloads-and-targets.md: kernel launches eager -> TensorSSA in the reference work.
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

/// Where PyTorch's times come from.
enum Torch {
    Absent,
    /// A file from `scripts/torch_baseline.py`, and its device line.
    File(Value, String),
    /// A worker timing each program just before our plans of it.
    Live(funcfuse::torch::Worker, bool),
}

fn load_baseline_file(p: &std::path::Path) -> Result<Value, Failure> {
    let text = funcfuse::io::read_text(p).map_err(|e| Failure(1, format!("{}: {e}", p.display())))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| {
        Failure(1, format!("{}: not a baseline file (JSON from scripts/torch_baseline.py): {e}", p.display()))
    })?;
    if !v["programs"].is_object() {
        return Err(Failure(1, format!("{}: no `programs` in the baseline file", p.display())));
    }
    Ok(v)
}

/// A table cell's text: one line, no `|`.
fn cell_text(s: &str) -> String {
    s.lines().next().unwrap_or("").replace('|', "\\|")
}

pub(crate) fn compare_cmd(paths: &[String], a: &CompareArgs) -> Result<(), Failure> {
    let rules = funcfuse::rewrite::rules::to_rewrites(&a.rules.usable()?)?;
    let profile = funcfuse::cost::Profile::load_or_shipped(a.costs.as_deref()).map_err(|e| Failure(1, e))?;
    let session = funcfuse::pipeline::Session::new(&rules, profile.clone(), a.backend.target());
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
    let mut torch = match (&a.baseline_file, &a.torch) {
        (Some(p), _) => {
            let v = load_baseline_file(p)?;
            let dev = format!("{} {}", v["device"].as_str().unwrap_or("?"), v["torch"].as_str().unwrap_or(""));
            Torch::File(v, dev)
        }
        (None, Some(python)) => {
            let device = if matches!(a.backend, Backend::Cuda) { "cuda" } else { "cpu" };
            Torch::Live(funcfuse::torch::Worker::new(python, device).map_err(|e| Failure(1, e))?, !a.no_torch_compile)
        }
        (None, None) => Torch::Absent,
    };
    let mut md = String::from("| program | plan | kernels | fallbacks | MB moved | predicted ms |");
    md.push_str(if a.measure {
        " measured ms |\n|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|\n"
    });
    let mut records = Vec::new();
    let (mut speed_eager, mut speed_unf) = (Vec::new(), Vec::new());
    let (mut speed_torch, mut speed_compile, mut over_bound) = (Vec::new(), Vec::new(), Vec::new());
    let mut torch_dev = String::new();
    let mut ratios = String::new();
    let mut roof = String::new();
    let mut failed = 0;
    let mut differ: Vec<String> = Vec::new();
    // (predicted, measured) seconds of every plan that ran timed, for the prediction line.
    let mut predictions: Vec<(f64, f64)> = Vec::new();
    for (file, _, only) in collect_targets(paths)? {
        let shown = file.display().to_string();
        let module = match crate::cli::load_module(&shown) {
            Ok(m) => m,
            Err(d) => {
                failed += 1;
                outln!("FAIL {d}");
                continue;
            }
        };
        let funcs: Vec<String> = match &only {
            Some(f) => vec![f.clone()],
            None => module.program_names(),
        };
        for func in funcs {
            let label = format!("{shown}::{func}");
            // PyTorch first, then our plans of the same program: the ratios come from one sitting.
            let live = match &mut torch {
                Torch::Live(w, compile) => Some(w.time(&shown, &func, a.runs, *compile)),
                _ => None,
            };
            let c = match funcfuse::compare::compare_program(
                &module, &func, &session, &which, measure, a.profile, a.autotune,
            ) {
                Ok(r) => r,
                Err(d) => {
                    failed += 1;
                    outln!("FAIL {label}: {d}");
                    records.push(json!({ "program": label, "error": d.to_string() }));
                    continue;
                }
            };
            let rows = &c.rows;
            for r in rows {
                if let Some(m) = r.measured_s.filter(|m| *m > 0.0) {
                    predictions.push((r.predicted_s, m));
                }
                if !r.agrees {
                    differ.push(format!("{label} ({})", r.plan));
                }
                let agree = if r.agrees { "" } else { " (differs from the reference!)" };
                md.push_str(&format!(
                    "| {label} | {}{agree} | {}{} | {} | {:.2} | {:.3} |",
                    r.plan,
                    r.kernels,
                    ran_otherwise(r),
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
            let ours = get("ours").expect("ours is always planned");
            // PyTorch's row of this program: from the file, or the worker's answer (checked to use our inputs).
            let torch_row: Option<Value> = match (&torch, live) {
                (Torch::File(t, dev), _) => {
                    torch_dev = dev.clone();
                    t["programs"].get(label.as_str()).cloned()
                }
                (Torch::Live(w, compile), Some(answer)) => {
                    let device = if matches!(a.backend, Backend::Cuda) { "cuda" } else { "cpu" };
                    torch_dev = match &w.version {
                        Some(v) => format!("{device} {v}, this run"),
                        None => format!("{device}, this run"),
                    };
                    let mut row = match answer {
                        Ok(v) => match funcfuse::torch::check_inputs(&v, &c.inputs) {
                            Ok(()) => v,
                            Err(why) => json!({ "error": format!("not comparable: {why}") }),
                        },
                        Err(why) => json!({ "error": format!("not timed: {why}") }),
                    };
                    if let Some(o) = row.as_object_mut() {
                        o.remove("inputs");
                        o.insert("measured_in_this_run".into(), json!(true));
                        if !*compile {
                            o.insert("compile_skipped".into(), json!(true));
                        }
                    }
                    Some(row)
                }
                _ => None,
            };
            let mut torch_line = Vec::new();
            if let Some(row) = &torch_row {
                let keys =
                    [("eager_s", "eager_error", "PyTorch eager"), ("compile_s", "compile_error", "torch.compile")];
                for (key, err, name) in keys {
                    let (plan, cell) = match row.get(key).and_then(Value::as_f64) {
                        Some(t) => {
                            let mine = ours.measured_s.filter(|m| *m > 0.0).map(|m| t / m);
                            match (key, mine) {
                                ("eager_s", Some(s)) => speed_torch.push(s),
                                (_, Some(s)) => speed_compile.push(s),
                                _ => {}
                            }
                            torch_line.push(format!("{name} {:.3} ms", t * 1e3));
                            (format!("{name} ({torch_dev})"), format!("{:.3}", t * 1e3))
                        }
                        None if key == "compile_s" && row["compile_skipped"] == json!(true) => {
                            torch_line.push(format!("{name} not run (--no-torch-compile)"));
                            (format!("{name} ({torch_dev}; not run: --no-torch-compile)"), String::new())
                        }
                        None => {
                            match (row.get(err).and_then(Value::as_str), row.get("error").and_then(Value::as_str)) {
                                (Some(why), _) => {
                                    torch_line.push(format!("{name} failed: {}", cell_text(why)));
                                    (format!("{name} ({torch_dev}; failed: {})", cell_text(why)), "failed".into())
                                }
                                // The whole row: not timed, or not comparable.
                                (None, Some(why)) => {
                                    (format!("{name} ({torch_dev}; {})", cell_text(why)), "failed".into())
                                }
                                (None, None) => (format!("{name} ({torch_dev})"), "failed".into()),
                            }
                        }
                    };
                    let pad = if a.measure { format!(" {cell} |") } else { String::new() };
                    md.push_str(&format!("| {label} | {plan} | | | | {} |{pad}\n", if a.measure { "" } else { &cell }));
                }
            }
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
                    .map(|r| {
                        let time = match r.measured_s {
                            Some(m) => format!("{:.3} ms measured ({:.3} predicted)", m * 1e3, r.predicted_s * 1e3),
                            None => format!("{:.3} ms predicted", r.predicted_s * 1e3),
                        };
                        format!("{} {} kernels {time}{}", r.plan, r.kernels, ran_otherwise(r))
                    })
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if matches!(torch, Torch::Live(..)) {
                let whole = torch_row.as_ref().and_then(|r| r.get("error")).and_then(Value::as_str);
                outln!("  PyTorch: {}", whole.map(cell_text).unwrap_or_else(|| torch_line.join(", ")));
            }
            let rl = &c.roofline;
            let factor = ours.measured_s.filter(|_| rl.bound_s > 0.0).map(|m| m / rl.bound_s);
            if let Some(f) = factor {
                over_bound.push(f);
            }
            roof.push_str(&format!(
                "| {label} | {:.3} | {:.3} | {:.4} |{}\n",
                rl.bytes / 1e6,
                rl.transcendentals / 1e6,
                rl.bound_s * 1e3,
                match (ours.measured_s, factor) {
                    (Some(m), Some(f)) => format!(" {:.3} | {f:.1}x |", m * 1e3),
                    (Some(m), None) => format!(" {:.3} | |", m * 1e3),
                    _ => String::new(),
                }
            ));
            outln!(
                "  roofline: {:.3} MB, {:.3} M transcendentals, bound {:.4} ms{}",
                rl.bytes / 1e6,
                rl.transcendentals / 1e6,
                rl.bound_s * 1e3,
                factor.map(|f| format!("; ours at {f:.1}x the bound")).unwrap_or_default()
            );
            let mut rec = funcfuse::compare::rows_json(&label, rows, rl);
            if let Some(row) = torch_row {
                rec["pytorch"] = row;
            }
            if let Some(prof) = &c.profile {
                outln!("  profile of ours (median of {} profiled runs; each step synchronized and timed):", a.runs);
                for line in funcfuse::lower::profile::table(prof).lines() {
                    outln!("    {line}");
                }
                rec["profile"] = prof
                    .iter()
                    .map(
                        |r| json!({ "ms": r.median_s * 1e3, "launches": r.launches, "bytes": r.bytes, "what": r.what }),
                    )
                    .collect();
            }
            if let Some(t) = &c.autotune {
                outln!(
                    "  autotune: kept `{}` (model chose `{}`)",
                    t["chosen"].as_str().unwrap_or("?"),
                    t["model_choice"].as_str().unwrap_or("?")
                );
                rec["autotune"] = t.clone();
            }
            records.push(rec);
        }
    }
    let what = if a.measure { "measured" } else { "predicted" };
    let g = |xs: &[f64]| funcfuse::compare::geomean(xs);
    let mut summary = String::new();
    let quality = funcfuse::compare::prediction_quality(&predictions);
    if let Some((e, s)) = quality {
        summary.push_str(&format!(
            "prediction: median error {:.1}%, spearman {s:.2} over {} plans\n",
            e * 100.0,
            predictions.len()
        ));
    }
    if !speed_eager.is_empty() {
        summary.push_str(&format!("geometric-mean speedup of ours over eager ({what}): {:.2}x\n", g(&speed_eager)));
    }
    if !speed_unf.is_empty() {
        summary.push_str(&format!(
            "geometric-mean speedup of ours over unfunctionalized ({what}): {:.2}x\n",
            g(&speed_unf)
        ));
    }
    let source = match &torch {
        Torch::Live(..) => "",
        _ => ", measured on the machines the files came from",
    };
    for (xs, name) in [(&speed_torch, "PyTorch eager"), (&speed_compile, "torch.compile")] {
        if !xs.is_empty() {
            summary.push_str(&format!(
                "geometric-mean speedup of ours over {name} ({torch_dev}{source}): {:.2}x over {} programs\n",
                g(xs),
                xs.len()
            ));
        }
    }
    if !over_bound.is_empty() {
        summary.push_str(&format!(
            "geometric mean of ours / roofline bound (measured): {:.1}x over {} programs\n",
            g(&over_bound),
            over_bound.len()
        ));
    }
    if !ratios.is_empty() {
        md.push_str("\n| workload | kernels eager -> ours | reference work (TensorSSA) |\n|---|---|---|\n");
        md.push_str(&ratios);
    }
    if !roof.is_empty() {
        md.push_str(&format!(
            "\nRoofline: the least time any implementation could take under the cost profile: max(bytes / {:.2} GB/s, \
             transcendental elements x {:.2} ns). Bytes: every input read once, every output written once; \
             transcendentals: estimated from our plan. `ours / bound` is our measured time over the bound \
             (3.0x: ours at 3 times the bound).\n\n",
            profile.stream_bytes_per_s / 1e9,
            profile.transcendental_s * 1e9
        ));
        md.push_str("| program | min MB (inputs + outputs) | M transcendentals | bound ms |");
        md.push_str(if a.measure {
            " ours measured ms | ours / bound |\n|---|---|---|---|---|---|\n"
        } else {
            "\n|---|---|---|---|\n"
        });
        md.push_str(&roof);
    }
    md.push('\n');
    md.push_str(&summary);
    out!("{summary}");
    std::fs::create_dir_all(&a.out).map_err(|e| Failure(1, format!("{}: {e}", a.out.display())))?;
    let opt = |xs: &[f64]| if xs.is_empty() { None } else { Some(g(xs)) };
    let report = json!({
        "profile": profile.to_json(),
        "measured": a.measure,
        "pytorch": match &torch {
            Torch::Absent => Value::Null,
            Torch::File(..) => json!({ "source": "file", "device": torch_dev }),
            Torch::Live(..) => json!({ "source": "this run", "device": torch_dev }),
        },
        "programs": records,
        "geomean_speedup_over_eager": opt(&speed_eager),
        "geomean_speedup_over_unfunctionalized": opt(&speed_unf),
        "geomean_speedup_over_pytorch_eager": opt(&speed_torch),
        "geomean_speedup_over_torch_compile": opt(&speed_compile),
        "geomean_ours_over_bound": opt(&over_bound),
        "prediction": quality.map(|(e, s)| json!({
            "median_error": e,
            "spearman": s,
            "plans": predictions.len(),
        })),
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
    let mut problems = Vec::new();
    if failed > 0 || !differ.is_empty() {
        problems.push(format!("{failed} programs failed, {} plans differ from the reference", differ.len()));
    }
    if let Torch::Live(w, _) = &torch {
        if let Some(why) = w.unavailable() {
            problems.push(format!("PyTorch was not timed: {why}"));
        }
    }
    if !problems.is_empty() {
        return Err(Failure(1, problems.join("\n")));
    }
    Ok(())
}

/// Beside a plan's predicted launches: what its checked run launched, where that differs (the run took a path the
/// estimate assumed otherwise: a `while`'s trips, an `if` arm, computed loop bounds).
fn ran_otherwise(r: &funcfuse::compare::PlanRow) -> String {
    if r.ran_otherwise() {
        format!(" (this run: {})", r.stats.launches)
    } else {
        String::new()
    }
}
