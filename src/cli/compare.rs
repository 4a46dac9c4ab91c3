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
    let session =
        funcfuse::pipeline::Session::new(&rules, profile.clone(), a.backend.target()).fast_math(a.rules.fast_math);
    let which = baselines(&a.baselines)?;
    let measure = a.measure.then_some(a.runs);
    let mut torch = open_torch(a)?;
    let mut t = Tally::new(a.measure);
    for (file, _, only) in collect_targets(paths)? {
        let shown = file.display().to_string();
        let module = match crate::cli::load_module(&shown) {
            Ok(m) => m,
            Err(d) => {
                t.failed += 1;
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
            match funcfuse::compare::compare_program(&module, &func, &session, &which, measure, a.profile, a.autotune) {
                Ok(c) => t.program(&label, &func, &c, &torch, live, a),
                Err(d) => {
                    t.failed += 1;
                    outln!("FAIL {label}: {d}");
                    t.records.push(json!({ "program": label, "error": d.to_string() }));
                }
            }
        }
    }
    t.finish(&torch, &profile, a)
}

/// The plans `--baselines` names, then ours.
fn baselines(list: &str) -> Result<Vec<&'static str>, Failure> {
    let mut which = Vec::new();
    for b in list.split(',').map(str::trim).filter(|b| !b.is_empty()) {
        match b {
            "eager" => which.push("eager"),
            "unfunctionalized" => which.push("unfunctionalized"),
            other => {
                return Err(Failure(2, format!("--baselines: unknown baseline `{other}` (eager, unfunctionalized)")))
            }
        }
    }
    which.push("ours");
    Ok(which)
}

fn open_torch(a: &CompareArgs) -> Result<Torch, Failure> {
    Ok(match (&a.baseline_file, &a.torch) {
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
    })
}

/// What `compare` gathers over the programs: the markdown table, the JSON records, the ratios for the summary.
struct Tally {
    md: String,
    records: Vec<Value>,
    speed_eager: Vec<f64>,
    speed_unf: Vec<f64>,
    speed_torch: Vec<f64>,
    speed_compile: Vec<f64>,
    over_bound: Vec<f64>,
    torch_dev: String,
    /// Rows of the launch-ratio table (workloads with a reference figure).
    ratios: String,
    /// Rows of the roofline table.
    roof: String,
    failed: usize,
    differ: Vec<String>,
    /// (predicted, measured) seconds of every plan that ran timed, for the prediction line.
    predictions: Vec<(f64, f64)>,
}

impl Tally {
    fn new(measure: bool) -> Tally {
        let mut md = String::from("| program | plan | kernels | fallbacks | MB moved | predicted ms |");
        md.push_str(if measure {
            " measured ms |\n|---|---|---|---|---|---|---|\n"
        } else {
            "\n|---|---|---|---|---|---|\n"
        });
        Tally {
            md,
            records: Vec::new(),
            speed_eager: Vec::new(),
            speed_unf: Vec::new(),
            speed_torch: Vec::new(),
            speed_compile: Vec::new(),
            over_bound: Vec::new(),
            torch_dev: String::new(),
            ratios: String::new(),
            roof: String::new(),
            failed: 0,
            differ: Vec::new(),
            predictions: Vec::new(),
        }
    }

    /// One program's rows, lines on standard output and record.
    fn program(
        &mut self,
        label: &str,
        func: &str,
        c: &funcfuse::compare::Compared,
        torch: &Torch,
        live: Option<Result<Value, String>>,
        a: &CompareArgs,
    ) {
        let rows = &c.rows;
        self.plan_rows(label, rows);
        let get = |p: &str| rows.iter().find(|r| r.plan == p);
        let ours = get("ours").expect("ours is always planned");
        let torch_row = self.torch_row(label, torch, live, c, a);
        let torch_line = match &torch_row {
            Some(row) => self.torch_rows(label, row, ours, a.measure),
            None => Vec::new(),
        };
        let time = |r: &funcfuse::compare::PlanRow| r.measured_s.unwrap_or(r.predicted_s);
        if let Some(e) = get("eager") {
            self.speed_eager.push(time(e) / time(ours));
            if let Some((w, them_e, them_o)) = THEIR_LAUNCHES.iter().find(|(w, _, _)| *w == func) {
                self.ratios.push_str(&format!(
                    "| {w} | {} -> {} ({:.2}x) | {them_e} -> {them_o} ({:.2}x) |\n",
                    e.kernels,
                    ours.kernels,
                    e.kernels as f64 / ours.kernels.max(1) as f64,
                    *them_e as f64 / *them_o as f64
                ));
            }
        }
        if let Some(u) = get("unfunctionalized") {
            self.speed_unf.push(time(u) / time(ours));
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
        self.roofline(label, ours, &c.roofline);
        let mut rec = funcfuse::compare::rows_json(label, rows, &c.roofline);
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
                .map(|r| json!({ "ms": r.median_s * 1e3, "launches": r.launches, "bytes": r.bytes, "what": r.what }))
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
        self.records.push(rec);
    }

    /// The table's row of each plan of one program.
    fn plan_rows(&mut self, label: &str, rows: &[funcfuse::compare::PlanRow]) {
        for r in rows {
            if let Some(m) = r.measured_s.filter(|m| *m > 0.0) {
                self.predictions.push((r.predicted_s, m));
            }
            if !r.agrees {
                self.differ.push(format!("{label} ({})", r.plan));
            }
            let agree = if r.agrees { "" } else { " (differs from the reference!)" };
            self.md.push_str(&format!(
                "| {label} | {}{agree} | {}{} | {} | {:.2} | {:.3} |",
                r.plan,
                r.kernels,
                ran_otherwise(r),
                r.fallbacks,
                r.bytes / 1e6,
                r.predicted_s * 1e3
            ));
            if let Some(m) = r.measured_s {
                self.md.push_str(&format!(" {:.3} |", m * 1e3));
            }
            self.md.push('\n');
        }
    }

    /// PyTorch's row of this program: from the file, or the worker's answer (checked to use our inputs).
    fn torch_row(
        &mut self,
        label: &str,
        torch: &Torch,
        live: Option<Result<Value, String>>,
        c: &funcfuse::compare::Compared,
        a: &CompareArgs,
    ) -> Option<Value> {
        match (torch, live) {
            (Torch::File(t, dev), _) => {
                self.torch_dev = dev.clone();
                t["programs"].get(label).cloned()
            }
            (Torch::Live(w, compile), Some(answer)) => {
                let device = if matches!(a.backend, Backend::Cuda) { "cuda" } else { "cpu" };
                self.torch_dev = match &w.version {
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
        }
    }

    /// The table's rows of PyTorch eager and torch.compile for one program; returns their figures for the line
    /// on standard output.
    fn torch_rows(
        &mut self,
        label: &str,
        row: &Value,
        ours: &funcfuse::compare::PlanRow,
        measure: bool,
    ) -> Vec<String> {
        let dev = &self.torch_dev;
        let mut line = Vec::new();
        let keys = [("eager_s", "eager_error", "PyTorch eager"), ("compile_s", "compile_error", "torch.compile")];
        for (key, err, name) in keys {
            let (plan, cell) = match row.get(key).and_then(Value::as_f64) {
                Some(t) => {
                    let mine = ours.measured_s.filter(|m| *m > 0.0).map(|m| t / m);
                    match (key, mine) {
                        ("eager_s", Some(s)) => self.speed_torch.push(s),
                        (_, Some(s)) => self.speed_compile.push(s),
                        _ => {}
                    }
                    line.push(format!("{name} {:.3} ms", t * 1e3));
                    (format!("{name} ({dev})"), format!("{:.3}", t * 1e3))
                }
                None if key == "compile_s" && row["compile_skipped"] == json!(true) => {
                    line.push(format!("{name} not run (--no-torch-compile)"));
                    (format!("{name} ({dev}; not run: --no-torch-compile)"), String::new())
                }
                None => match (row.get(err).and_then(Value::as_str), row.get("error").and_then(Value::as_str)) {
                    (Some(why), _) => {
                        line.push(format!("{name} failed: {}", cell_text(why)));
                        (format!("{name} ({dev}; failed: {})", cell_text(why)), "failed".into())
                    }
                    // The whole row: not timed, or not comparable.
                    (None, Some(why)) => (format!("{name} ({dev}; {})", cell_text(why)), "failed".into()),
                    (None, None) => (format!("{name} ({dev})"), "failed".into()),
                },
            };
            let pad = if measure { format!(" {cell} |") } else { String::new() };
            self.md.push_str(&format!("| {label} | {plan} | | | | {} |{pad}\n", if measure { "" } else { &cell }));
        }
        line
    }

    /// One program's roofline row and line.
    fn roofline(&mut self, label: &str, ours: &funcfuse::compare::PlanRow, rl: &funcfuse::roofline::Roofline) {
        let factor = ours.measured_s.filter(|_| rl.bound_s > 0.0).map(|m| m / rl.bound_s);
        if let Some(f) = factor {
            self.over_bound.push(f);
        }
        self.roof.push_str(&format!(
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
    }

    /// The summary's lines: prediction quality and geometric-mean speedups.
    fn summary(&self, torch: &Torch, measure: bool) -> String {
        let what = if measure { "measured" } else { "predicted" };
        let g = |xs: &[f64]| funcfuse::compare::geomean(xs);
        let mut summary = String::new();
        if let Some((e, s)) = funcfuse::compare::prediction_quality(&self.predictions) {
            summary.push_str(&format!(
                "prediction: median error {:.1}%, spearman {s:.2} over {} plans\n",
                e * 100.0,
                self.predictions.len()
            ));
        }
        if !self.speed_eager.is_empty() {
            summary.push_str(&format!(
                "geometric-mean speedup of ours over eager ({what}): {:.2}x\n",
                g(&self.speed_eager)
            ));
        }
        if !self.speed_unf.is_empty() {
            summary.push_str(&format!(
                "geometric-mean speedup of ours over unfunctionalized ({what}): {:.2}x\n",
                g(&self.speed_unf)
            ));
        }
        let source = match torch {
            Torch::Live(..) => "",
            _ => ", measured on the machines the files came from",
        };
        for (xs, name) in [(&self.speed_torch, "PyTorch eager"), (&self.speed_compile, "torch.compile")] {
            if !xs.is_empty() {
                summary.push_str(&format!(
                    "geometric-mean speedup of ours over {name} ({}{source}): {:.2}x over {} programs\n",
                    self.torch_dev,
                    g(xs),
                    xs.len()
                ));
            }
        }
        if !self.over_bound.is_empty() {
            summary.push_str(&format!(
                "geometric mean of ours / roofline bound (measured): {:.1}x over {} programs\n",
                g(&self.over_bound),
                self.over_bound.len()
            ));
        }
        summary
    }

    /// Prints the summary, writes compare.md and compare.json, and fails when a program failed, a plan differs
    /// from the reference or PyTorch could not be timed.
    fn finish(mut self, torch: &Torch, profile: &funcfuse::cost::Profile, a: &CompareArgs) -> Result<(), Failure> {
        let summary = self.summary(torch, a.measure);
        if !self.ratios.is_empty() {
            self.md.push_str("\n| workload | kernels eager -> ours | reference work (TensorSSA) |\n|---|---|---|\n");
            self.md.push_str(&self.ratios);
        }
        if !self.roof.is_empty() {
            self.md.push_str(&format!(
                "\nRoofline: the least time any implementation could take under the cost profile: max(bytes / {:.2} \
                 GB/s, transcendental elements x {:.2} ns). Bytes: every input read once, every output written \
                 once; transcendentals: estimated from our plan. `ours / bound` is our measured time over the bound \
                 (3.0x: ours at 3 times the bound).\n\n",
                profile.stream_bytes_per_s / 1e9,
                profile.transcendental_s * 1e9
            ));
            self.md.push_str("| program | min MB (inputs + outputs) | M transcendentals | bound ms |");
            self.md.push_str(if a.measure {
                " ours measured ms | ours / bound |\n|---|---|---|---|---|---|\n"
            } else {
                "\n|---|---|---|---|\n"
            });
            self.md.push_str(&self.roof);
        }
        self.md.push('\n');
        self.md.push_str(&summary);
        out!("{summary}");
        std::fs::create_dir_all(&a.out).map_err(|e| Failure(1, format!("{}: {e}", a.out.display())))?;
        let opt = |xs: &[f64]| if xs.is_empty() { None } else { Some(funcfuse::compare::geomean(xs)) };
        let quality = funcfuse::compare::prediction_quality(&self.predictions);
        let report = json!({
            "profile": profile.to_json(),
            "measured": a.measure,
            "pytorch": match torch {
                Torch::Absent => Value::Null,
                Torch::File(..) => json!({ "source": "file", "device": self.torch_dev }),
                Torch::Live(..) => json!({ "source": "this run", "device": self.torch_dev }),
            },
            "programs": self.records,
            "geomean_speedup_over_eager": opt(&self.speed_eager),
            "geomean_speedup_over_unfunctionalized": opt(&self.speed_unf),
            "geomean_speedup_over_pytorch_eager": opt(&self.speed_torch),
            "geomean_speedup_over_torch_compile": opt(&self.speed_compile),
            "geomean_ours_over_bound": opt(&self.over_bound),
            "prediction": quality.map(|(e, s)| json!({
                "median_error": e,
                "spearman": s,
                "plans": self.predictions.len(),
            })),
        });
        let write = |name: &str, text: String| {
            std::fs::write(a.out.join(name), text)
                .map_err(|e| Failure(1, format!("{}: {e}", a.out.join(name).display())))
        };
        write("compare.json", serde_json::to_string_pretty(&report).unwrap_or_default() + "\n")?;
        write("compare.md", self.md)?;
        outln!("report in {}", a.out.join("compare.md").display());
        let differ = &self.differ;
        if !differ.is_empty() {
            outln!("{} plans differ from the reference: {}", differ.len(), differ.join(", "));
        }
        let mut problems = Vec::new();
        if self.failed > 0 || !differ.is_empty() {
            problems.push(format!("{} programs failed, {} plans differ from the reference", self.failed, differ.len()));
        }
        if let Torch::Live(w, _) = torch {
            if let Some(why) = w.unavailable() {
                problems.push(format!("PyTorch was not timed: {why}"));
            }
        }
        if !problems.is_empty() {
            return Err(Failure(1, problems.join("\n")));
        }
        Ok(())
    }
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
