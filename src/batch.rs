//! Batch optimization: many programs on several threads, each under a time limit, one failure never stopping the
//! rest; outputs are gathered in program order so that they are byte-identical whatever the number of jobs.
//!
//! Per program (one [`crate::pipeline::Session`] each) it functionalizes, saturates and extracts, plans ours and both
//! baselines (predicting each plan's launches, bytes and time from the cost profile, without running anything), and
//! renders the kernels.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::cost::Profile;
use crate::lower::estimate::plan_estimate;
use crate::lower::Policy;
use crate::pipeline::Session;
use crate::rewrite::rules::RuleDef;

/// One program to optimize: its file, the output folder below the batch's, and its name.
#[derive(Clone, Debug)]
pub struct Task {
    pub file: PathBuf,
    pub dir: PathBuf,
    pub func: String,
}

impl Task {
    pub fn label(&self) -> String {
        format!("{}::{}", self.file.display(), self.func)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    C,
    /// CUDA C, compile-checked with NVRTC for this architecture.
    Cuda(&'static str),
}

#[derive(Clone, Debug)]
pub struct Options {
    pub jobs: usize,
    pub time_limit: Duration,
    pub kernels: Kernels,
    pub profile: Profile,
    /// Candidates to measure per program (`optimize --autotune K`; 0: off, the model alone chooses).
    pub autotune: usize,
    /// Rewrites that hold in real arithmetic only may apply (`--fast-math`, [`crate::pipeline::Session::fast_math`]).
    pub fast_math: bool,
}

/// Seconds spent per stage (not part of any deterministic output).
#[derive(Clone, Copy, Debug, Default)]
pub struct Timings {
    pub functionalize: f64,
    pub saturate: f64,
    pub plan: f64,
    pub render: f64,
}

impl Timings {
    /// The program's whole optimization time, every stage together.
    pub fn total(&self) -> f64 {
        self.functionalize + self.saturate + self.plan + self.render
    }
}

/// What happened to one program.
#[derive(Clone, Debug)]
pub enum Outcome {
    Ok { record: Value, files: Vec<(String, String)>, timings: Timings },
    Failed { error: String },
    TimedOut,
}

impl Outcome {
    pub fn status(&self) -> &'static str {
        match self {
            Outcome::Ok { .. } => "ok",
            Outcome::Failed { .. } => "failed",
            Outcome::TimedOut => "timed out",
        }
    }
}

/// Timed runs per autotuned candidate (after one checked run); the median counts.
pub const AUTOTUNE_RUNS: usize = 5;

/// Optimizes one program; the files it writes and its record.
pub fn optimize_one(task: &Task, defs: &[RuleDef], opts: &Options) -> Result<Outcome, String> {
    let target = match opts.kernels {
        Kernels::C => crate::backend::Target::C,
        Kernels::Cuda(_) => crate::backend::Target::Cuda,
    };
    let rules = crate::rewrite::rules::to_rewrites(defs).map_err(|d| d.to_string())?;
    let session = Session::new(&rules, opts.profile.clone(), target).fast_math(opts.fast_math);
    let module = Session::load(&task.file.display().to_string()).map_err(|d| d.to_string())?;
    let mut r = session.optimize(&module, &task.func, &BTreeMap::new()).map_err(|d| d.to_string())?;
    let tuned = if opts.autotune > 0 {
        let model = r.optimized.chosen;
        Some((
            model,
            crate::autotune::autotune(
                &r.functional,
                &mut r.optimized,
                opts.autotune,
                AUTOTUNE_RUNS,
                &session.profile,
                session.target,
            )?,
        ))
    } else {
        None
    };
    let mut record = crate::optimize::record(&task.label(), &r);
    if let Some((model, tried)) = tuned {
        record["autotune"] = crate::autotune::record_json(model, r.optimized.chosen, &tried);
    }
    let (ft, ot) = crate::optimize::term_texts(&r);
    let mut files = vec![("functional.term".to_string(), ft), ("optimized.term".to_string(), ot)];
    let t = Instant::now();
    let mut plans = serde_json::Map::new();
    let mut ours = None;
    for (name, policy, p) in session.plans(&r, None)? {
        let e = plan_estimate(&p, &session.profile);
        plans.insert(
            name.to_string(),
            json!({ "kernels": e.launches.round(), "bytes": e.bytes.round(), "predicted_s": e.seconds }),
        );
        if policy == Policy::Fused {
            ours = Some(p);
        }
    }
    record["plans"] = Value::Object(plans);
    let ours = ours.expect("ours is planned");
    let plan_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    files.push(("plan.txt".to_string(), ours.describe()));
    match opts.kernels {
        Kernels::C => files.push(("kernels.c".to_string(), crate::backend::c::render(&ours))),
        Kernels::Cuda(arch) => {
            let src = crate::backend::cuda::render(&ours);
            crate::backend::cuda::compile(&src, arch)?;
            files.push(("kernels.cu".to_string(), src));
        }
    }
    let render_s = t.elapsed().as_secs_f64();
    files.push(("record.json".to_string(), serde_json::to_string_pretty(&record).unwrap_or_default() + "\n"));
    let timings = Timings {
        functionalize: r.functionalize_time.as_secs_f64(),
        saturate: r.saturate_time.as_secs_f64(),
        plan: plan_s,
        render: render_s,
    };
    Ok(Outcome::Ok { record, files, timings })
}

/// Runs every task on `opts.jobs` threads, each program in its own thread (with a [`crate::limits::STACK_BYTES`]
/// stack) under `opts.time_limit`: a program past it is recorded as timed out, and its thread stops at its next
/// deadline check (each statement functionalized, each rule application, each kernel planned). `progress(done, total, label)` is called as
/// programs finish. Outcomes come back in task order.
pub fn run(
    tasks: &[Task],
    defs: &[RuleDef],
    opts: &Options,
    mut progress: impl FnMut(usize, usize, &str, &Outcome),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> = Mutex::new(vec![None; tasks.len()]);
    let (tx, rx) = mpsc::channel::<usize>();
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1) {
            let tx = tx.clone();
            let (next, results) = (&next, &results);
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= tasks.len() {
                    break;
                }
                let (task, defs, o) = (tasks[i].clone(), defs.to_vec(), opts.clone());
                let (done_tx, done_rx) = mpsc::channel();
                // The program's thread stops its own work at the deadline (`crate::limits`): a timed-out program
                // does not run on in the background holding its memory.
                let spawned = std::thread::Builder::new().stack_size(crate::limits::STACK_BYTES).spawn(move || {
                    let out = crate::limits::with_deadline(Some(o.time_limit), || {
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                            match optimize_one(&task, &defs, &o) {
                                Err(_) if crate::limits::expired() => Ok(Outcome::TimedOut),
                                r => r,
                            }
                        }))
                    });
                    let _ = done_tx.send(out);
                });
                let outcome = match spawned {
                    Err(e) => Outcome::Failed { error: format!("cannot start a thread: {e}") },
                    Ok(_) => match done_rx.recv_timeout(opts.time_limit) {
                        Ok(Ok(Ok(o))) => o,
                        Ok(Ok(Err(e))) => Outcome::Failed { error: e },
                        Ok(Err(_)) => Outcome::Failed { error: "internal error (a panic); please report it".into() },
                        Err(_) => Outcome::TimedOut,
                    },
                };
                results.lock().expect("no poisoned lock")[i] = Some(outcome);
                let _ = tx.send(i);
            });
        }
        drop(tx);
        let mut done = 0;
        for i in rx {
            done += 1;
            let guard = results.lock().expect("no poisoned lock");
            if let Some(o) = &guard[i] {
                progress(done, tasks.len(), &tasks[i].label(), o);
            }
        }
    });
    results.into_inner().expect("no poisoned lock").into_iter().map(|o| o.unwrap_or(Outcome::TimedOut)).collect()
}
