//! `fuzz`: random programs through every engine, each held to the reference interpreter.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use funcfuse::fuzz::{self, Engine, Summary, Verdict};

use crate::Failure;

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
    /// Worker threads (default: all cores). The verdicts do not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
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
    if let Some(dir) = &a.keep {
        std::fs::create_dir_all(dir).map_err(|e| Failure(1, format!("{}: cannot create: {e}", dir.display())))?;
    }
    // Panics are caught and reported per program; the default hook would print each one mid-progress.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let jobs = a.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let diverged = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<(String, Verdict)>>> = Mutex::new(vec![None; seeds.len()]);
    let tty = std::io::stderr().is_terminal();
    let failure: Mutex<Option<Failure>> = Mutex::new(None);
    // Seeds go to the threads in batches whose kernels compile together (`fuzz::check_seeds`).
    let per = fuzz::SEEDS_PER_BATCH.min(seeds.len().div_ceil(jobs)).max(1);
    let chunks: Vec<&[u64]> = seeds.chunks(per).collect();
    std::thread::scope(|s| {
        for _ in 0..jobs.min(chunks.len()) {
            s.spawn(|| {
                let rules = match fuzz::shipped_rewrites() {
                    Ok(r) => r,
                    Err(d) => {
                        *failure.lock().unwrap() = Some(Failure(1, d.to_string()));
                        return;
                    }
                };
                loop {
                    let c = next.fetch_add(1, Ordering::SeqCst);
                    let Some(chunk) = chunks.get(c) else { break };
                    for (j, r) in fuzz::check_seeds(chunk, &engines, &rules).into_iter().enumerate() {
                        let i = c * per + j;
                        if let Some(sig) = r.1.signature() {
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
                        results.lock().unwrap()[i] = Some(r);
                        let d = done.fetch_add(1, Ordering::SeqCst) + 1;
                        if tty {
                            eprint!("\rfuzz: {d}/{} programs checked", seeds.len());
                        } else if d % PROGRESS_EVERY == 0 && d < seeds.len() {
                            eprintln!("fuzz: {d}/{} programs checked", seeds.len());
                        }
                    }
                }
            });
        }
    });
    if tty {
        eprintln!();
    }
    if let Some(f) = failure.into_inner().unwrap() {
        std::panic::set_hook(hook);
        return Err(f);
    }
    let rules = fuzz::shipped_rewrites()?;
    let mut summary = Summary::default();
    for (seed, r) in seeds.iter().zip(results.into_inner().unwrap()) {
        let (source, verdict) = r.expect("every seed was checked");
        summary.add(&verdict);
        let Some(sig) = verdict.signature() else { continue };
        let name = fuzz::program_name(*seed);
        let (reduced, rv) = if a.no_reduce {
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
