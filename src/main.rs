//! The `funcfuse` command line: argument parsing and file I/O around the library's stages.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};

use funcfuse::diag::Diagnostic;
use funcfuse::frontend;
use funcfuse::interp::{self, ScalarArg};
use funcfuse::io;
use funcfuse::pipeline::Session;
use funcfuse::tensor::Tensor;

/// Writes to stdout; a closed pipe (`funcfuse list | head`) ends the output quietly instead of panicking.
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout().lock(), $($t)*);
    }};
}

mod cli;

use cli::compare::compare_cmd;
use cli::optimize::optimize_cmd;
use cli::plans::{calibrate_cmd, explain_cmd};
use cli::rules::{RuleArgs, UseRules};

#[derive(Parser)]
#[command(name = "funcfuse", version, about = "An e-graph optimizer for imperative PyTorch-style tensor programs")]
struct Cli {
    /// Log each stage (parse, functionalize, saturate, plan, compile, run) to stderr, as FUNCFUSE_LOG=all does;
    /// FUNCFUSE_LOG=STAGE,... logs only those stages.
    #[arg(long, short = 'v', global = true)]
    verbose: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run one program and write its outputs as .npy files.
    Run(RunArgs),
    /// Optimize programs in parallel: functionalize, saturate, extract, plan; write terms, plans, kernels and reports.
    Optimize {
        /// Programs (FILE.py::FUNC), files or directories (searched recursively for *.py).
        #[arg(required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        args: OptimizeArgs,
    },
    /// Functionalize a program and print its pure term.
    Functionalize {
        /// The program, as FILE.py::FUNCTION.
        target: String,
        /// A scalar parameter, as NAME=VALUE (repeatable).
        #[arg(long = "arg", value_name = "NAME=VALUE")]
        args: Vec<String>,
        /// `dag` (one numbered line per shared node) or `sexp` (one s-expression; can be large).
        #[arg(long, default_value = "dag")]
        format: String,
    },
    /// Work with rule files: `rules check` tests every rule on random instances.
    Rules {
        #[command(subcommand)]
        cmd: RulesCmd,
    },
    /// Plan each program as the baselines and as ours, run them, and report kernels, bytes and times side by side,
    /// with each program's roofline bound (its least bytes and transcendentals at the cost profile's rates).
    Compare {
        /// Programs (FILE.py::FUNC), files or directories.
        #[arg(required = true)]
        paths: Vec<String>,
        #[command(flatten)]
        args: CompareArgs,
    },
    /// Explain one program's optimization: rules fired, extraction candidates, and its plan against the baselines.
    Explain {
        /// The program, as FILE.py::FUNCTION.
        target: String,
        #[command(flatten)]
        rules: UseRules,
        /// Print one stage's text form instead: functional, optimized, plan, c, cuda.
        #[arg(long, value_name = "STAGE")]
        dump: Option<String>,
        /// Write egraph.dot and plan.dot into DIR (and .svg files where Graphviz `dot` is installed).
        #[arg(long, value_name = "DIR")]
        dot: Option<PathBuf>,
        /// A cost profile (JSON from `calibrate`) to extract, plan and predict by; the shipped CPU profile by default.
        #[arg(long)]
        costs: Option<PathBuf>,
        /// Also run every distinct extraction candidate on the C backend (on random inputs, the median of RUNS timed
        /// runs after a checked one) and print its measured time beside its predicted cost.
        #[arg(long, value_name = "RUNS", num_args = 0..=1, default_missing_value = "7")]
        measure: Option<usize>,
    },
    /// Measure a cost profile of a backend and write it as JSON: launch overhead, bandwidth and throughput, and per
    /// kernel class (elementwise, transcendental, gather, reduction, matmul, copy, fallback, run) the costs fitted to
    /// measured runs of the calibration kernels (and of --from programs and --from-records measurements). Times are
    /// measurements: two calibrations differ.
    Calibrate {
        #[arg(long, value_enum, default_value = "c")]
        backend: Backend,
        #[arg(long)]
        out: PathBuf,
        /// Programs (FILE.py::FUNC), files or directories whose plans (eager, unfunctionalized, ours) are also run and
        /// fitted to, e.g. the corpus (repeatable).
        #[arg(long = "from", value_name = "PATHS", num_args = 1..)]
        from: Vec<String>,
        /// Directories of earlier measurements (compare.json from `compare --measure`, record.json from `optimize
        /// --autotune`) fitted to as well (repeatable).
        #[arg(long = "from-records", value_name = "DIR")]
        from_records: Vec<PathBuf>,
        /// Timed runs per plan (after one warm-up run); the median is fitted.
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// Generate random programs and run each through every engine against the reference interpreter; diverging
    /// programs are reduced and reported (exit status 1 if any).
    Fuzz(cli::fuzz::FuzzArgs),
    /// List the programs (top-level functions not starting with `_`) of program files, with their signatures.
    List {
        /// Program files or directories (searched recursively for *.py).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
    /// List the PyTorch operations funcfuse runs, one per line: every name of PyTorch's API is called in a probe
    /// program, and those both engines implement are listed (docs/OPS.md is this list).
    Ops {
        /// Print docs/OPS.md's Markdown instead.
        #[arg(long)]
        markdown: bool,
    },
}

#[derive(Subcommand)]
enum RulesCmd {
    /// Instantiate both sides of every rule on random shapes, values and views, run them in the functional
    /// interpreter, and print a counterexample for every rule whose sides differ (exit 1).
    Check {
        #[command(flatten)]
        rules: RuleArgs,
        /// Instances per rule on which its conditions must hold (draws go on past invalid ones, within a budget).
        #[arg(long, default_value_t = cli::rules::SAMPLES)]
        samples: usize,
    },
    /// List the rules (text rules and Rust rewrites) with where each is defined.
    List {
        #[command(flatten)]
        rules: RuleArgs,
    },
}

#[derive(clap::Args)]
struct OptimizeArgs {
    #[command(flatten)]
    rules: UseRules,
    /// The backend to render kernels for (`cuda` also compile-checks them with NVRTC; no GPU needed).
    #[arg(long, value_enum, default_value = "c")]
    backend: Backend,
    /// A cost profile (JSON from `calibrate`): extraction, planning and the predicted figures follow it; the shipped
    /// CPU profile by default.
    #[arg(long)]
    costs: Option<PathBuf>,
    /// Programs optimized at once (default: all cores). The output does not depend on it.
    #[arg(long)]
    jobs: Option<usize>,
    /// Seconds one program may take (above 0, at most 1000000); past it, its work stops, it is recorded as timed
    /// out and the batch goes on.
    #[arg(long, default_value_t = funcfuse::limits::OPTIMIZE_TIME_LIMIT_S, value_parser = funcfuse::limits::parse_time_limit, allow_negative_numbers = true)]
    time_limit: f64,
    /// Where to write `<file>/<func>/{functional.term,optimized.term,plan.txt,kernels.c,record.json}` and
    /// report.json, report.md, report.html.
    #[arg(long, default_value = "out/optimize")]
    out: PathBuf,
    /// Measure the K candidate plans extraction predicts cheapest on the backend (one program at a time) and keep
    /// the fastest; record.json's `autotune` lists each tried plan's predicted and measured time. Off by default:
    /// with it the chosen plan depends on measurements, so outputs may differ from run to run.
    #[arg(long, value_name = "K", default_value_t = 0)]
    autotune: usize,
}

#[derive(clap::Args)]
struct CompareArgs {
    /// Baseline plans to compare against, comma-separated.
    #[arg(long, default_value = "eager,unfunctionalized")]
    baselines: String,
    /// Run every plan and report its measured median time (else times are predicted by the cost profile).
    #[arg(long)]
    measure: bool,
    /// Timed runs per plan with --measure (after one warm-up run).
    #[arg(long, default_value_t = 15)]
    runs: usize,
    /// A cost profile (JSON from `calibrate`): extraction, planning and predictions follow it; the shipped CPU
    /// profile by default.
    #[arg(long)]
    costs: Option<PathBuf>,
    /// The backend plans run on.
    #[arg(long, value_enum, default_value = "c")]
    backend: Backend,
    /// Timings of PyTorch eager and torch.compile from `scripts/torch_baseline.py`, shown beside our plans.
    #[arg(long, value_name = "FILE")]
    baseline_file: Option<PathBuf>,
    /// Time PyTorch eager and torch.compile in this run with PYTHON (an interpreter that has torch), program by
    /// program just before our plans, on the same seed-0 inputs, one thread (OMP_NUM_THREADS=1 and
    /// MKL_NUM_THREADS=1 unless set), the median of --runs runs. Needs --measure. Where PyTorch cannot time a program
    /// its rows say why and the rest runs (the exit status does not change); a PYTHON that cannot start or lacks torch
    /// makes the exit status 1.
    #[arg(long, value_name = "PYTHON", requires = "measure", conflicts_with = "baseline_file")]
    torch: Option<String>,
    /// With --torch: time PyTorch eager only, not torch.compile (which compiles for minutes on loop-heavy programs).
    #[arg(long, requires = "torch")]
    no_torch_compile: bool,
    /// With --measure: run our plan --runs more times with every kernel launch, copy and host fallback synchronized
    /// and timed, and print (and put in compare.json) each one's median ms per run, share, launches, MB and what it
    /// computes, most expensive first.
    #[arg(long, requires = "measure")]
    profile: bool,
    #[command(flatten)]
    rules: UseRules,
    /// Where to write compare.md and compare.json.
    #[arg(long, default_value = "out/compare")]
    out: PathBuf,
    /// Measure the K candidate plans of ours that extraction predicts cheapest and keep the fastest (see `optimize
    /// --autotune`); compare.json's `autotune` lists them. Off by default: the plan then depends on measurements.
    #[arg(long, value_name = "K", default_value_t = 0)]
    autotune: usize,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Engine {
    /// The source program with PyTorch's exact aliasing semantics.
    Reference,
    /// The functionalized term, run by the functional interpreter.
    Functional,
    /// The optimized plan, run on --backend.
    Optimized,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Backend {
    C,
    Cuda,
    /// The CUDA kernels, run on the CPU by an emulator of CUDA's execution model (for checking, not speed).
    CudaEmu,
}

impl Backend {
    pub(crate) fn target(self) -> funcfuse::backend::Target {
        match self {
            Backend::C => funcfuse::backend::Target::C,
            Backend::Cuda => funcfuse::backend::Target::Cuda,
            Backend::CudaEmu => funcfuse::backend::Target::CudaEmu,
        }
    }
}

#[derive(clap::Args)]
struct RunArgs {
    /// The program, as FILE.py::FUNCTION; or a file or directory to run every program in it.
    target: String,
    /// A folder with NAME.npy for every tensor parameter; without it, inputs are random from --seed.
    #[arg(long)]
    inputs: Option<PathBuf>,
    /// A scalar parameter, as NAME=VALUE (repeatable).
    #[arg(long = "arg", value_name = "NAME=VALUE")]
    args: Vec<String>,
    /// Seed of the random inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[arg(long, value_enum, default_value = "optimized")]
    engine: Engine,
    #[arg(long, value_enum, default_value = "c")]
    backend: Backend,
    /// Where to write return*.npy, NAME.npy for mutated parameters, and inputs/ when they were generated.
    #[arg(long)]
    output: PathBuf,
    /// Seconds the whole run may take (above 0, at most 1000000): interpreter loops, optimization and kernel
    /// execution stop past it with "time limit exceeded" (exit status 1).
    #[arg(long, default_value_t = funcfuse::limits::RUN_TIME_LIMIT_S, value_parser = funcfuse::limits::parse_time_limit, allow_negative_numbers = true)]
    time_limit: f64,
    /// The rules the optimized engine uses.
    #[command(flatten)]
    rules: UseRules,
    /// A cost profile (JSON from `calibrate`) the optimized engine extracts and plans by; the shipped CPU profile by
    /// default.
    #[arg(long)]
    costs: Option<PathBuf>,
}

/// A failure and its exit status: 1 when the program failed, 2 for bad usage.
struct Failure(u8, String);

impl From<Diagnostic> for Failure {
    fn from(d: Diagnostic) -> Self {
        Failure(1, d.to_string())
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.verbose {
        funcfuse::log::enable_all();
    }
    // Every stage recurses over the program's structure: run the command on a stack sized for the documented limits
    // (`funcfuse::limits`), not the main thread's 8 MB.
    let result = match funcfuse::limits::on_big_stack(move || command(cli.cmd)) {
        Ok(r) => r,
        Err(e) => Err(Failure(
            1,
            format!("cannot start a thread with a {} MB stack: {e}", funcfuse::limits::STACK_BYTES >> 20),
        )),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure(code, msg)) => {
            eprintln!("{msg}");
            ExitCode::from(code)
        }
    }
}

fn command(cmd: Cmd) -> Result<(), Failure> {
    match cmd {
        Cmd::Run(a) => run(a),
        Cmd::List { paths } => list(&paths),
        Cmd::Ops { markdown } => {
            let probed = funcfuse::ops_doc::probe_all();
            if markdown {
                out!("{}", funcfuse::ops_doc::markdown(&probed));
            } else {
                probed.iter().filter(|p| p.supported).for_each(|p| outln!("{}", p.full));
            }
            Ok(())
        }
        Cmd::Functionalize { target, args, format } => functionalize_cmd(&target, &args, &format),
        Cmd::Optimize { paths, args } => optimize_cmd(&paths, &args),
        Cmd::Compare { paths, args } => compare_cmd(&paths, &args),
        Cmd::Explain { target, rules, dump, dot, costs, measure } => {
            explain_cmd(&target, &rules, dump.as_deref(), dot.as_deref(), costs.as_deref(), measure)
        }
        Cmd::Calibrate { backend, out, from, from_records, runs } => {
            calibrate_cmd(backend, &out, &from, &from_records, runs)
        }
        Cmd::Fuzz(a) => cli::fuzz::fuzz_cmd(&a),
        Cmd::Rules { cmd: RulesCmd::Check { rules, samples } } => cli::rules::rules_check(&rules, samples),
        Cmd::Rules { cmd: RulesCmd::List { rules } } => cli::rules::rules_list(&rules),
    }
}

fn parse_arg(s: &str) -> Result<(String, ScalarArg), Failure> {
    let (name, value) = s.split_once('=').ok_or_else(|| Failure(2, format!("--arg `{s}`: expected NAME=VALUE")))?;
    let v = match value {
        "True" | "true" => ScalarArg::Bool(true),
        "False" | "false" => ScalarArg::Bool(false),
        v => match v.parse::<i64>() {
            Ok(i) => ScalarArg::Int(i),
            Err(_) => match v.parse::<f64>() {
                Ok(f) => ScalarArg::Float(f),
                Err(_) => return Err(Failure(2, format!("--arg {name}: `{v}` is not a number or a bool"))),
            },
        },
    };
    Ok((name.to_string(), v))
}

/// Every `--arg NAME=VALUE` must name a scalar parameter of the program (an unknown name was silently ignored).
fn check_scalar_args(f: &frontend::ast::Function, scalars: &BTreeMap<String, ScalarArg>) -> Result<(), Failure> {
    let tensors: Vec<String> =
        interp::tensor_params(f).map(|ps| ps.into_iter().map(|p| p.0).collect()).unwrap_or_default();
    let scalar_names: Vec<&str> =
        f.params.iter().map(|p| p.name.as_str()).filter(|n| !tensors.iter().any(|t| t == n)).collect();
    for name in scalars.keys() {
        if tensors.contains(name) {
            return Err(Failure(
                2,
                format!("--arg {name}: `{name}` is a tensor parameter of `{}`; give it with --inputs", f.name),
            ));
        }
        if !scalar_names.contains(&name.as_str()) {
            let known = if scalar_names.is_empty() { "none".to_string() } else { scalar_names.join(", ") };
            let hint = f
                .params
                .iter()
                .find(|p| p.name.eq_ignore_ascii_case(name))
                .map(|p| format!("; did you mean `{}`?", p.name))
                .unwrap_or_default();
            return Err(Failure(
                2,
                format!(
                    "--arg {name}: `{}` has no scalar parameter `{name}` (its scalar parameters: {known}){hint}",
                    f.name
                ),
            ));
        }
    }
    Ok(())
}

fn run(a: RunArgs) -> Result<(), Failure> {
    let limit = std::time::Duration::from_secs_f64(a.time_limit);
    funcfuse::limits::with_deadline(Some(limit), || run_all(&a))
}

fn run_all(a: &RunArgs) -> Result<(), Failure> {
    let mut scalars = BTreeMap::new();
    for s in &a.args {
        let (k, v) = parse_arg(s)?;
        scalars.insert(k, v);
    }
    // User rules and the cost profile are checked before anything runs (the optimized engine alone uses them).
    let (rules, profile) = match a.engine {
        Engine::Optimized => (
            funcfuse::rewrite::rules::to_rewrites(&a.rules.usable()?)?,
            funcfuse::cost::Profile::load_or_shipped(a.costs.as_deref()).map_err(|e| Failure(1, e))?,
        ),
        _ => (Vec::new(), funcfuse::cost::Profile::shipped_c()),
    };
    let session = Session::new(&rules, profile, a.backend.target()).fast_math(a.rules.fast_math);
    match a.target.split_once("::") {
        Some((file, func)) => {
            let module = crate::cli::load_module(file)?;
            run_one(&module, func, a, &scalars, &a.output, &session)
        }
        None => run_batch(a, &scalars, &session),
    }
}

/// `run PATH` without `::FUNC`: every program under PATH, each into `OUTPUT/<file without .py>/<FUNC>/`.
fn run_batch(a: &RunArgs, scalars: &BTreeMap<String, ScalarArg>, session: &Session) -> Result<(), Failure> {
    if a.inputs.is_some() {
        return Err(Failure(2, "--inputs needs a single program (FILE.py::FUNC)".into()));
    }
    let root = PathBuf::from(&a.target);
    let mut files = Vec::new();
    collect_py(&root, &mut files)?;
    let (mut ok, mut failed) = (0, 0);
    for file in files {
        let shown = file.display().to_string();
        let rel = if root.is_dir() {
            file.strip_prefix(&root).unwrap_or(&file)
        } else {
            file.file_name().map(Path::new).unwrap_or(&file)
        };
        let module = match crate::cli::load_module(&shown) {
            Ok(m) => m,
            Err(d) => {
                failed += 1;
                eprintln!("FAIL {d}");
                continue;
            }
        };
        for name in module.program_names() {
            let Ok(f) = module.get(&name) else {
                failed += 1;
                outln!("FAIL {shown}::{name}: {}", module.get(&name).err().map(|d| d.to_string()).unwrap_or_default());
                continue;
            };
            let out = a.output.join(rel.with_extension("")).join(&f.name);
            let start = std::time::Instant::now();
            // Scalar arguments apply to the programs that have such a parameter.
            let mine: BTreeMap<String, ScalarArg> = scalars
                .iter()
                .filter(|(k, _)| f.params.iter().any(|p| p.name == **k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            match run_one(&module, &f.name, a, &mine, &out, session) {
                Ok(()) => {
                    ok += 1;
                    outln!("ok   {shown}::{} ({} ms)", f.name, start.elapsed().as_millis());
                }
                Err(Failure(_, m)) => {
                    failed += 1;
                    outln!("FAIL {shown}::{}: {m}", f.name);
                }
            }
        }
    }
    outln!("{ok} programs ran, {failed} failed; outputs in {}", a.output.display());
    if failed > 0 {
        return Err(Failure(1, format!("{failed} programs failed")));
    }
    Ok(())
}

fn run_one(
    module: &frontend::Module,
    func: &str,
    a: &RunArgs,
    scalars: &BTreeMap<String, ScalarArg>,
    output: &Path,
    session: &Session,
) -> Result<(), Failure> {
    let file = &module.path;
    let f = module.get(func).map_err(|d| match d.span {
        Some(_) => Failure::from(d),
        None => Failure(1, format!("{file}: no function `{func}`")),
    })?;
    let params = interp::tensor_params(f).map_err(|d| d.in_file(file))?;
    check_scalar_args(f, scalars)?;
    std::fs::create_dir_all(output).map_err(|e| Failure(1, format!("{}: cannot create: {e}", output.display())))?;
    let mut inputs = BTreeMap::new();
    match &a.inputs {
        Some(dir) if !dir.is_dir() => {
            return Err(Failure(
                2,
                format!("--inputs {}: not a folder (it holds NAME.npy for every tensor parameter)", dir.display()),
            ))
        }
        Some(dir) => {
            for (name, _, _) in &params {
                let path = dir.join(format!("{name}.npy"));
                if !path.exists() {
                    return Err(Failure(
                        1,
                        format!("{}: missing input file for tensor parameter `{name}`", path.display()),
                    ));
                }
                inputs.insert(name.clone(), io::read_npy(&path)?);
            }
        }
        None => {
            let dir = output.join("inputs");
            std::fs::create_dir_all(&dir).map_err(|e| Failure(1, format!("{}: cannot create: {e}", dir.display())))?;
            for (i, (name, dtype, shape)) in params.iter().enumerate() {
                let t = io::random_input(a.seed, i, *dtype, shape)?;
                io::write_npy(&dir.join(format!("{name}.npy")), &t)?;
                inputs.insert(name.clone(), t);
            }
        }
    }
    let ran = match a.engine {
        Engine::Functional => {
            let f = session.functionalize(module, func, scalars)?;
            funcfuse::functionalize::run_functional(&f, &inputs)
        }
        Engine::Optimized => {
            let mut f = session.functionalize(module, func, scalars)?;
            f.term = session.saturate(&f, file)?.term;
            session.run(&f, funcfuse::lower::Policy::Fused, &inputs).map(|r| r.0)
        }
        Engine::Reference => Ok(interp::run_program(module, func, &inputs, scalars)?),
    };
    let out = match ran {
        Ok(out) => out,
        // A plan specialized to one arm of an `if` met the other: the reference interpreter runs the program.
        Err(d) if d.message.contains(funcfuse::ir::FALLBACK) => {
            eprintln!("note: {file}::{func}: {}; ran it on the reference engine", d.message);
            interp::run_program(module, func, &inputs, scalars)?
        }
        Err(d) => return Err(interp::locate(module, func, &inputs, scalars, d).into()),
    };
    write_outputs(output, &out.returns, out.returns_tuple, &out.mutated)
}

/// Every (file, output folder, function) named by the paths, in a stable order. The output folder is the file's path
/// below the directory given (or its name), without `.py`.
fn collect_targets(paths: &[String]) -> Result<Vec<(PathBuf, PathBuf, Option<String>)>, Failure> {
    let mut targets: Vec<(PathBuf, PathBuf, Option<String>)> = Vec::new();
    let name_of = |f: &Path| f.file_name().map(PathBuf::from).unwrap_or_default();
    for p in paths {
        match p.split_once("::") {
            Some((f, func)) => targets.push((PathBuf::from(f), name_of(Path::new(f)), Some(func.to_string()))),
            None => {
                let root = Path::new(p);
                let mut files = Vec::new();
                collect_py(root, &mut files)?;
                for f in files {
                    let rel = if root.is_dir() {
                        f.strip_prefix(root).map(Path::to_path_buf).unwrap_or_else(|_| name_of(&f))
                    } else {
                        name_of(&f)
                    };
                    targets.push((f, rel, None));
                }
            }
        }
    }
    Ok(targets)
}

fn functionalize_cmd(target: &str, args: &[String], format: &str) -> Result<(), Failure> {
    let (file, func) = target
        .split_once("::")
        .ok_or_else(|| Failure(2, format!("`{target}`: name a program as FILE.py::FUNCTION")))?;
    let module = crate::cli::load_module(file)?;
    let mut scalars = BTreeMap::new();
    for s in args {
        let (k, v) = parse_arg(s)?;
        scalars.insert(k, v);
    }
    if let Some(fd) = module.function(func) {
        check_scalar_args(fd, &scalars)?;
    }
    let f = funcfuse::functionalize::functionalize(&module, func, &scalars)?;
    let stats = funcfuse::ir::term_stats(&f.term);
    outln!(
        "; {file}::{func}: {} nodes, {} loops, {} accesses, {} assigns, {} ifs",
        stats.nodes,
        stats.loops,
        stats.accesses,
        stats.assigns,
        stats.ifs
    );
    let outs: Vec<String> = f
        .outputs
        .iter()
        .map(|o| match o {
            funcfuse::functionalize::Output::Return(k) => format!("return {k}"),
            funcfuse::functionalize::Output::Mutated(n) => format!("final {n}"),
        })
        .collect();
    outln!("; outputs: ({})", outs.join(", "));
    match format {
        "dag" => out!("{}", funcfuse::ir::display_dag(&f.term)),
        "sexp" => outln!("{}", f.term),
        other => return Err(Failure(2, format!("--format {other}: expected dag or sexp"))),
    }
    Ok(())
}

fn write_outputs(dir: &Path, returns: &[Tensor], tuple: bool, mutated: &[(String, Tensor)]) -> Result<(), Failure> {
    if tuple {
        for (i, t) in returns.iter().enumerate() {
            io::write_npy(&dir.join(format!("return.{i}.npy")), t)?;
        }
    } else if let Some(t) = returns.first() {
        io::write_npy(&dir.join("return.npy"), t)?;
    }
    for (name, t) in mutated {
        io::write_npy(&dir.join(format!("{name}.npy")), t)?;
    }
    Ok(())
}

/// The `*.py` files under `path` (itself, if a file), sorted. Below the path given, links to directories are not
/// followed (two links to `.` would make the walk exponential) and only regular files (or links to them) count.
fn collect_py(path: &Path, out: &mut Vec<PathBuf>) -> Result<(), Failure> {
    if path.is_dir() {
        let mut entries: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Failure(1, format!("{}: {e}", path.display())))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for e in entries {
            let Ok(own) = std::fs::symlink_metadata(&e) else { continue };
            if own.is_dir() {
                collect_py(&e, out)?;
            } else if e.extension().is_some_and(|x| x == "py") && e.metadata().is_ok_and(|m| m.is_file()) {
                out.push(e);
            }
        }
        Ok(())
    } else if path.exists() {
        out.push(path.to_path_buf());
        Ok(())
    } else {
        Err(Failure(1, format!("{}: no such file or directory", path.display())))
    }
}

fn list(paths: &[PathBuf]) -> Result<(), Failure> {
    let mut files = Vec::new();
    for p in paths {
        collect_py(p, &mut files)?;
    }
    for file in files {
        let shown = file.display().to_string();
        let module = crate::cli::load_module(&shown)?;
        for name in module.program_names() {
            // A function outside the subset is listed as failed, with its own located message.
            let f = match module.get(&name) {
                Ok(f) => f,
                Err(d) => {
                    outln!("{shown}::{name}: failed: {d}");
                    continue;
                }
            };
            let params: Vec<String> = f
                .params
                .iter()
                .map(|p| match &p.ann {
                    Some(funcfuse::frontend::ast::TypeAnn::Tensor { dtype, shape }) => {
                        format!("{}: {}{}", p.name, dtype.annotation(), funcfuse::tensor::fmt_shape(shape))
                    }
                    Some(other) => format!("{}: {:?}", p.name, other).to_lowercase(),
                    None => p.name.clone(),
                })
                .collect();
            outln!("{shown}::{}({})", f.name, params.join(", "));
        }
    }
    Ok(())
}
