//! `fuzz`: random programs through every engine, each held to the reference interpreter.

use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use std::io::{BufRead, Write};
use std::process::{Command, Stdio};

use egg::Rewrite;
use funcfuse::fuzz::{self, Divergence, Engine, Kind, Summary, Verdict};
use funcfuse::ir::Node;
use funcfuse::rewrite::TermAnalysis;

use super::rules::UseRules;
use crate::Failure;

/// A worker that prints no verdict for this long is killed, and its seeds are checked again one process each (a
/// batch of programs takes seconds: each engine's run of a program has a 5 s limit, and compiling a batch's kernels
/// takes a few seconds more). `FUNCFUSE_FUZZ_SILENCE_S` sets it (for the tests).
fn worker_silence() -> std::time::Duration {
    let s = std::env::var("FUNCFUSE_FUZZ_SILENCE_S").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    std::time::Duration::from_secs(s)
}

/// Off a terminal (CI logs, long runs piped to a file), progress is one line per this many programs.
const PROGRESS_EVERY: usize = 100;

#[derive(clap::Args)]
pub(crate) struct FuzzArgs {
    /// The first seed; programs are generated from seeds SEED, SEED+1, ...
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// How many programs to generate and check.
    #[arg(long, default_value_t = 100)]
    count: u64,
    /// The engines to run besides the reference, comma-separated: functional, optimized, c, cuda-emu, eager,
    /// unfunctionalized (all by default).
    #[arg(long, value_name = "LIST")]
    engines: Option<String>,
    /// Write every diverging program (reduced, and as generated) and its verdict into DIR.
    #[arg(long, value_name = "DIR")]
    keep: Option<PathBuf>,
    /// Report diverging programs as generated, without reducing them.
    #[arg(long)]
    no_reduce: bool,
    /// Print every generated program's text to standard output and check nothing.
    #[arg(long)]
    print: bool,
    /// Write every generated program into DIR as fuzz_SEED.py and check nothing (for scripts/diff_torch.py, which
    /// runs them in PyTorch against the reference interpreter).
    #[arg(long, value_name = "DIR")]
    write: Option<PathBuf>,
    /// Worker processes run side by side (default: all cores). The verdicts do not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    /// Check the seeds in this process and print each verdict as a line of JSON (what the worker processes of a
    /// `fuzz` run do).
    #[arg(long, hide = true)]
    worker: bool,
    /// The rules the optimized engines saturate with (the shipped ones by default): `--rules` files are checked
    /// first, as for `optimize`, unless `--unchecked-rules` (then the fuzzer tests them as they are).
    #[command(flatten)]
    rules: UseRules,
}

fn parse_engines(list: Option<&str>) -> Result<Vec<Engine>, Failure> {
    let Some(list) = list else { return Ok(Engine::ALL.to_vec()) };
    let mut out = vec![Engine::Reference];
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let e = Engine::parse(name).ok_or_else(|| {
            let all: Vec<&str> = Engine::ALL.iter().map(|e| e.name()).collect();
            Failure(2, format!("--engines: unknown engine `{name}` ({})", all.join(", ")))
        })?;
        if !out.contains(&e) {
            out.push(e);
        }
    }
    Ok(out)
}

pub(crate) fn fuzz_cmd(a: &FuzzArgs) -> Result<(), Failure> {
    let seeds: Vec<u64> = (0..a.count).map(|k| a.seed.wrapping_add(k)).collect();
    if a.print {
        for &s in &seeds {
            outln!("# seed {s}\n{}", fuzz::gen::generate(s));
        }
        return Ok(());
    }
    if let Some(dir) = &a.write {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: cannot create: {e}", dir.display())))?;
        for &s in &seeds {
            let path = dir.join(format!("{}.py", fuzz::program_name(s)));
            std::fs::write(&path, fuzz::gen::generate(s))
                .map_err(|e| Failure(1, format!("{}: {e}", path.display())))?;
        }
        outln!("wrote {} programs into {}", seeds.len(), dir.display());
        return Ok(());
    }
    let engines = parse_engines(a.engines.as_deref())?;
    let rules = to_rewrites(&a.rules.usable()?)?;
    if let Some(dir) = &a.keep {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: cannot create: {e}", dir.display())))?;
    }
    if a.worker {
        return worker(&seeds, &engines, &rules);
    }
    let verdicts = check_all(&seeds, &engines, a)?;
    // Panics while reducing are caught and reported per program; the default hook would print each one.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut summary = Summary::default();
    for (seed, verdict) in seeds.iter().zip(verdicts) {
        summary.add(&verdict);
        let Some(sig) = verdict.signature() else { continue };
        let source = fuzz::gen::generate(*seed);
        let name = fuzz::program_name(*seed);
        // The reducer checks its candidates in this process, where a crash would end the run.
        let (reduced, rv) = if a.no_reduce || sig.kind == Kind::Crash {
            (source.clone(), None)
        } else {
            // A panic while reducing (in a candidate the engines do not guard) keeps the program as generated.
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                fuzz::reduce::reduce(&source, &name, sig, &engines, &rules)
            }))
            .unwrap_or_else(|p| {
                let why =
                    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
                eprintln!("fuzz: seed {seed}: the reducer panicked ({}); kept as generated", why.unwrap_or_default());
                (source.clone(), None)
            })
        };
        let shown = rv.as_ref().unwrap_or(&verdict);
        outln!(
            "seed {seed}: {} {} ({} lines reduced to {})",
            sig.engine.name(),
            sig.kind.name(),
            source.lines().count(),
            reduced.lines().count()
        );
        for d in &shown.divergences {
            outln!("  {} {}: {}", d.engine.name(), d.kind.name(), d.detail.lines().next().unwrap_or(""));
        }
        if let Some(dir) = &a.keep {
            let write = |file: String, text: &str| {
                std::fs::write(dir.join(&file), text)
                    .map_err(|e| Failure(1, format!("{}: {e}", dir.join(&file).display())))
            };
            write(format!("{name}.py"), &reduced)?;
            write(format!("{name}.orig.py"), &source)?;
            let mut report = String::new();
            if let Some(e) = &shown.reference_error {
                report.push_str(&format!("reference raised: {e}\n"));
            }
            for d in &shown.divergences {
                report.push_str(&format!("{} {}: {}\n", d.engine.name(), d.kind.name(), d.detail));
            }
            write(format!("{name}.txt"), &report)?;
        }
    }
    std::panic::set_hook(hook);
    let names: Vec<&str> = engines.iter().map(|e| e.name()).collect();
    outln!("fuzz: seeds {}..{}, engines {}: {summary}", a.seed, a.seed.wrapping_add(a.count), names.join(","));
    if summary.diverged() > 0 {
        return Err(Failure(
            1,
            format!("fuzz: {} of {} programs diverge from the reference", summary.diverged(), summary.programs),
        ));
    }
    Ok(())
}

/// Checks `seeds` in `--jobs` worker processes side by side, saying each divergence as it is found and the progress;
/// the verdicts in seed order.
fn check_all(seeds: &[u64], engines: &[Engine], a: &FuzzArgs) -> Result<Vec<Verdict>, Failure> {
    // The workers take the rules as checked here.
    let mut ra: Vec<String> =
        a.rules.paths.dirs.iter().flat_map(|d| ["--rules".into(), d.display().to_string()]).collect();
    ra.push("--unchecked-rules".into());
    if a.rules.paths.only_rules {
        ra.push("--only-rules".into());
    }
    if a.rules.fast_math {
        ra.push("--fast-math".into());
    }
    let ra = &ra;
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let diverged = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Verdict>>> = Mutex::new(vec![None; seeds.len()]);
    let tty = std::io::stderr().is_terminal();
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    // Seeds go to the worker processes in batches whose kernels compile together (`fuzz::check_seeds`).
    let per = fuzz::SEEDS_PER_BATCH.min(seeds.len().div_ceil(jobs)).max(1);
    let chunks: Vec<&[u64]> = seeds.chunks(per).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(chunks.len()) {
            s.spawn(|| loop {
                let c = next.fetch_add(1, Ordering::SeqCst);
                let Some(chunk) = chunks.get(c) else { break };
                let verdicts = match check_isolated(chunk, engines, ra) {
                    Ok(v) => v,
                    Err(f) => {
                        *failure.lock().unwrap() = Some(f);
                        next.store(chunks.len(), Ordering::SeqCst);
                        break;
                    }
                };
                for (j, v) in verdicts.into_iter().enumerate() {
                    let i = c * per + j;
                    if let Some(sig) = v.signature() {
                        // Said at once (reduction comes at the end), so a long run shows what it finds as it goes.
                        let bad = diverged.fetch_add(1, Ordering::SeqCst) + 1;
                        eprintln!(
                            "{}fuzz: seed {}: {} {} (divergence {bad})",
                            if tty { "\r" } else { "" },
                            seeds[i],
                            sig.engine.name(),
                            sig.kind.name()
                        );
                    }
                    results.lock().unwrap()[i] = Some(v);
                    let d = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if tty {
                        eprint!("\rfuzz: {d}/{} programs checked", seeds.len());
                    } else if d % PROGRESS_EVERY == 0 && d < seeds.len() {
                        eprintln!("fuzz: {d}/{} programs checked", seeds.len());
                    }
                }
            });
        }
    });
    if tty {
        eprintln!();
    }
    if let Some(f) = failure.into_inner().unwrap() {
        return Err(f);
    }
    Ok(results.into_inner().unwrap().into_iter().map(|r| r.expect("every seed was checked")).collect())
}

/// `fuzz --worker`: checks `seeds` in this process, in batches, and prints one JSON line per seed as it is judged:
/// `{"seed": S, "verdict": ...}` ([`Verdict::to_json`]). A crash loses only the lines not yet printed.
fn worker(seeds: &[u64], engines: &[Engine], rules: &[Rewrite<Node, TermAnalysis>]) -> Result<(), Failure> {
    // Panics are caught and reported per program; the default hook would print each one.
    std::panic::set_hook(Box::new(|_| {}));
    let mut out = std::io::stdout().lock();
    // For the tests of crash isolation: `SEED:ENGINE` aborts this worker when it checks SEED with ENGINE, and
    // `SEED:ENGINE:hang` makes it hang there.
    let die_at = std::env::var("FUNCFUSE_FUZZ_DIE_AT").ok().and_then(|v| {
        let mut parts = v.split(':');
        let (seed, engine) = (parts.next()?.parse::<u64>().ok()?, Engine::parse(parts.next()?)?);
        Some((seed, engine, parts.next() == Some("hang")))
    });
    for batch in seeds.chunks(fuzz::SEEDS_PER_BATCH) {
        if let Some((_, _, hang)) = die_at.filter(|(s, e, _)| batch.contains(s) && engines.contains(e)) {
            while hang {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            }
            std::process::abort();
        }
        for (seed, (_, v)) in batch.iter().zip(fuzz::check_seeds(batch, engines, rules)) {
            let line = serde_json::json!({"seed": seed, "verdict": v.to_json()});
            writeln!(out, "{line}").and_then(|()| out.flush()).map_err(|e| Failure(1, format!("fuzz worker: {e}")))?;
        }
    }
    Ok(())
}

/// The outcome of a worker process that checks `seeds` on `engines` with rules `ra` (its `--rules` arguments): the
/// verdicts it printed, and why it died when it did (a signal, or an exit status other than success).
fn run_worker(
    seeds: &[u64],
    engines: &[Engine],
    ra: &[String],
) -> Result<(BTreeMap<u64, Verdict>, Option<String>), Failure> {
    let exe = std::env::current_exe().map_err(|e| Failure(1, format!("fuzz: cannot find this program: {e}")))?;
    let list: Vec<&str> = engines.iter().filter(|e| **e != Engine::Reference).map(|e| e.name()).collect();
    let first = seeds.first().copied().unwrap_or(0);
    let mut child = Command::new(exe)
        .args(["fuzz", "--worker", "--seed", &first.to_string(), "--count", &seeds.len().to_string()])
        .args(["--engines", &list.join(",")])
        .args(ra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Failure(1, format!("fuzz: cannot start a worker process: {e}")))?;
    let mut got = BTreeMap::new();
    let stdout = child.stdout.take().expect("stdout is piped");
    // Lines come through a thread, so that a worker silent for too long (a kernel that never ends: the engines' time
    // limits cannot stop compiled code) is killed instead of stalling the run.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (silence, mut hung) = (worker_silence(), false);
    let bad_line = loop {
        match rx.recv_timeout(silence) {
            Ok(line) => {
                let parsed: Option<(u64, Verdict)> = serde_json::from_str::<serde_json::Value>(&line)
                    .ok()
                    .and_then(|v| Some((v["seed"].as_u64()?, Verdict::from_json(&v["verdict"])?)));
                match parsed {
                    Some((seed, v)) => drop(got.insert(seed, v)),
                    None => break Some(line),
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                hung = true;
                break None;
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break None,
        }
    };
    if hung || bad_line.is_some() {
        let _ = child.kill();
    }
    let status = child.wait().map_err(|e| Failure(1, format!("fuzz: a worker process: {e}")))?;
    let _ = reader.join();
    if let Some(line) = bad_line {
        return Err(Failure(1, format!("fuzz: a worker wrote `{line}`, not a verdict")));
    }
    let why = match hung {
        true => Some(format!("the process gave no verdict for {} s and was killed", silence.as_secs())),
        false => died(status),
    };
    Ok((got, why))
}

/// Why a process with exit status `status` died, `None` when it succeeded.
fn died(status: std::process::ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt;
    if status.success() {
        return None;
    }
    Some(match status.signal() {
        Some(sig) => {
            let name = match sig {
                libc::SIGSEGV => " (SIGSEGV)",
                libc::SIGBUS => " (SIGBUS)",
                libc::SIGFPE => " (SIGFPE)",
                libc::SIGILL => " (SIGILL)",
                libc::SIGABRT => " (SIGABRT)",
                libc::SIGKILL => " (SIGKILL)",
                _ => "",
            };
            format!("the process died of signal {sig}{name}")
        }
        None => format!("the process exited with {status}"),
    })
}

/// Checks `chunk` in a worker process. Where the worker dies, each seed it did not report is checked again in a
/// process of its own, and a seed whose process dies again is judged a crash of the first engine that kills a
/// process running the reference and it alone.
fn check_isolated(chunk: &[u64], engines: &[Engine], ra: &[String]) -> Result<Vec<Verdict>, Failure> {
    let (mut got, why) = run_worker(chunk, engines, ra)?;
    if let Some(why) = why {
        let missing: Vec<u64> = chunk.iter().copied().filter(|s| !got.contains_key(s)).collect();
        let mut reproduced = false;
        for &seed in &missing {
            let (mut one, again) = run_worker(&[seed], engines, ra)?;
            let v = match (one.remove(&seed), again) {
                (Some(v), _) => v,
                (None, again) => {
                    reproduced = true;
                    crashed(seed, engines, ra, again.unwrap_or_else(|| why.clone()))?
                }
            };
            got.insert(seed, v);
        }
        if !reproduced {
            eprintln!(
                "fuzz: the worker checking seeds {}..={} failed ({why}) but none of its seeds does alone",
                chunk[0],
                chunk[chunk.len() - 1]
            );
        }
    }
    chunk
        .iter()
        .map(|s| got.remove(s).ok_or_else(|| Failure(1, format!("fuzz: no worker reported seed {s}"))))
        .collect()
}

/// The verdict on a seed whose check kills its process: a crash of the first engine that kills it run alone with
/// the reference (the reference itself when it kills a process alone; the last engine, said so, when none does).
fn crashed(seed: u64, engines: &[Engine], ra: &[String], why: String) -> Result<Verdict, Failure> {
    let (alone, reference_died) = run_worker(&[seed], &[Engine::Reference], ra)?;
    let reference_error = alone.get(&seed).and_then(|v| v.reference_error.clone());
    let mut culprit = reference_died.is_some().then_some(Engine::Reference);
    for &e in engines.iter().filter(|e| **e != Engine::Reference) {
        if culprit.is_none() && run_worker(&[seed], &[Engine::Reference, e], ra)?.1.is_some() {
            culprit = Some(e);
        }
    }
    let (engine, detail) = match culprit {
        Some(e) => (e, why),
        None => (*engines.last().unwrap_or(&Engine::Reference), format!("{why}; no engine alone kills it")),
    };
    Ok(Verdict { reference_error, divergences: vec![Divergence { engine, kind: Kind::Crash, detail }] })
}

fn to_rewrites(defs: &[funcfuse::rewrite::rules::RuleDef]) -> Result<Vec<Rewrite<Node, TermAnalysis>>, Failure> {
    Ok(funcfuse::rewrite::rules::to_rewrites(defs)?)
}
