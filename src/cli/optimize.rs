//! `optimize`: a batch of programs on all cores, each program's outputs in its own folder, and the batch's reports
//! (`report.json`, `report.md`, `report.html`).

use crate::{collect_targets, Backend, Failure, OptimizeArgs};

pub(crate) fn optimize_cmd(paths: &[String], a: &OptimizeArgs) -> Result<(), Failure> {
    let defs = a.rules.usable()?;
    funcfuse::rewrite::rules::to_rewrites(&defs)?;
    let out = &a.out;
    let profile = funcfuse::cost::Profile::load_or_shipped(a.costs.as_deref()).map_err(|e| Failure(1, e))?;
    // Every program, in a stable order; a file that does not parse is one failed entry.
    let mut tasks = Vec::new();
    let mut entries: Vec<Result<usize, (String, String)>> = Vec::new();
    for (file, rel, only) in collect_targets(paths)? {
        let shown = file.display().to_string();
        let funcs: Vec<String> = match (&only, crate::cli::load_module(&shown)) {
            (_, Err(d)) => {
                entries.push(Err((shown.clone(), d.to_string())));
                continue;
            }
            (Some(f), Ok(_)) => vec![f.clone()],
            (None, Ok(m)) => m.program_names(),
        };
        for func in funcs {
            let dir = out.join(rel.with_extension("")).join(&func);
            entries.push(Ok(tasks.len()));
            tasks.push(funcfuse::batch::Task { file: file.clone(), dir, func });
        }
    }
    let opts = funcfuse::batch::Options {
        // Autotuning measures: one program at a time, so that programs do not slow each other's timings.
        jobs: if a.autotune > 0 {
            1
        } else {
            a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        },
        time_limit: std::time::Duration::from_secs_f64(a.time_limit),
        kernels: match a.backend {
            Backend::C => funcfuse::batch::Kernels::C,
            Backend::Cuda | Backend::CudaEmu => funcfuse::batch::Kernels::Cuda(funcfuse::backend::cuda::DEFAULT_ARCH),
        },
        profile,
        autotune: a.autotune,
        fast_math: a.rules.fast_math,
    };
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    let outcomes = funcfuse::batch::run(&tasks, &defs, &opts, |done, total, label, o| {
        if tty {
            let w = 30;
            let filled = done * w / total.max(1);
            eprint!("\r[{}{}] {done}/{total} {:<60.60}", "=".repeat(filled), " ".repeat(w - filled), label);
            if done == total {
                eprintln!();
            }
        } else {
            let extra = match o {
                funcfuse::batch::Outcome::Failed { error } => format!(": {}", error.lines().next().unwrap_or("")),
                funcfuse::batch::Outcome::Ok { timings, .. } => format!(" ({:.1} ms)", timings.total() * 1e3),
                _ => String::new(),
            };
            eprintln!("[{done}/{total}] {} {label}{extra}", o.status());
        }
    });
    let mut records = Vec::new();
    let mut timings = Vec::new();
    let mut links: Vec<Option<String>> = Vec::new();
    let (mut ok, mut failed, mut timed_out) = (0, 0, 0);
    for e in &entries {
        match e {
            Err((file, error)) => {
                failed += 1;
                records.push(funcfuse::optimize::failure_record(file, error));
                timings.push(None);
                links.push(None);
            }
            Ok(i) => {
                let task = &tasks[*i];
                match &outcomes[*i] {
                    funcfuse::batch::Outcome::Ok { record, files, timings: t } => {
                        ok += 1;
                        std::fs::create_dir_all(&task.dir)
                            .map_err(|e| Failure(1, format!("{}: {e}", task.dir.display())))?;
                        for (name, text) in files {
                            let p = task.dir.join(name);
                            std::fs::write(&p, text).map_err(|e| Failure(1, format!("{}: {e}", p.display())))?;
                        }
                        records.push(record.clone());
                        timings.push(Some(*t));
                        let rel = task.dir.strip_prefix(out).ok().map(|p| p.to_string_lossy().replace('\\', "/"));
                        links.push(rel);
                    }
                    funcfuse::batch::Outcome::Failed { error } => {
                        failed += 1;
                        records.push(funcfuse::optimize::failure_record(&task.label(), error));
                        timings.push(None);
                        links.push(None);
                    }
                    funcfuse::batch::Outcome::TimedOut => {
                        timed_out += 1;
                        let mut r = funcfuse::optimize::failure_record(
                            &task.label(),
                            &format!("exceeded the time limit of {} s", a.time_limit),
                        );
                        r["status"] = "timed out".into();
                        records.push(r);
                        timings.push(None);
                        links.push(None);
                    }
                }
            }
        }
    }
    std::fs::create_dir_all(out).map_err(|e| Failure(1, format!("{}: {e}", out.display())))?;
    let report = serde_json::json!({ "ok": ok, "failed": failed, "timed_out": timed_out, "programs": records });
    let write = |name: &str, text: String| {
        std::fs::write(out.join(name), text).map_err(|e| Failure(1, format!("{}: {e}", out.join(name).display())))
    };
    write("report.json", serde_json::to_string_pretty(&report).unwrap_or_default() + "\n")?;
    write("report.md", funcfuse::report::markdown(&records))?;
    write("report.html", funcfuse::report::html(&records, &timings, &links))?;
    let slowest =
        records.iter().zip(&timings).filter_map(|(r, t)| t.map(|t| (t.total(), r))).max_by(|a, b| a.0.total_cmp(&b.0));
    if let Some((s, r)) = slowest {
        let all: f64 = timings.iter().flatten().map(|t| t.total()).sum();
        eprintln!(
            "optimization time: {:.2} s over {ok} programs (per program in report.html), slowest {} ({:.1} ms)",
            all,
            r["program"].as_str().unwrap_or(""),
            s * 1e3
        );
    }
    outln!(
        "{ok} programs optimized, {failed} failed, {timed_out} timed out; report in {}",
        out.join("report.md").display()
    );
    if failed + timed_out > 0 {
        return Err(Failure(1, format!("{} programs did not optimize (recorded in the report)", failed + timed_out)));
    }
    Ok(())
}
