//! Helpers shared by the integration tests: corpus discovery, golden loading and tolerant comparison, and running
//! the built binary.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use funcfuse::backend::{many, Loaded, Target};
use funcfuse::frontend::{self, Module};
use funcfuse::functionalize::Functional;
use funcfuse::interp::{self, RunOutput, ScalarArg};
use funcfuse::io;
use funcfuse::lower::{Plan, Policy};
use funcfuse::tensor::Tensor;

pub const CORPUS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/corpus");

/// One corpus program: its file (relative to the corpus), its function and where its goldens live.
#[derive(Clone)]
pub struct Program {
    pub file: PathBuf,
    pub rel: String,
    pub func: String,
    pub golden_dir: PathBuf,
}

impl Program {
    pub fn label(&self) -> String {
        format!("{}::{}", self.rel, self.func)
    }
}

fn py_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for e in entries {
        if e.is_dir() {
            if e.file_name().is_some_and(|n| n != "goldens") {
                py_files(&e, out);
            }
        } else if e.extension().is_some_and(|x| x == "py") {
            out.push(e);
        }
    }
}

/// Every program of every corpus file, in a stable order.
pub fn corpus_programs() -> Vec<Program> {
    let root = Path::new(CORPUS);
    let mut files = Vec::new();
    py_files(root, &mut files);
    let mut out = Vec::new();
    for file in files {
        let rel_path = file.strip_prefix(root).unwrap().with_extension("");
        let rel = rel_path.to_string_lossy().to_string();
        let module =
            frontend::load_module(file.to_str().unwrap()).unwrap_or_else(|d| panic!("corpus file does not parse: {d}"));
        // A function outside the subset fails alone when the file loads; in the corpus, that is a defect.
        if let Some(f) = module.failed.first() {
            panic!("corpus function `{}` does not convert: {}", f.name, f.error);
        }
        for f in module.programs() {
            out.push(Program {
                file: file.clone(),
                rel: rel.clone(),
                func: f.name.clone(),
                golden_dir: root.join("goldens").join(&rel_path).join(&f.name),
            });
        }
    }
    out
}

pub fn load(p: &Program) -> Module {
    frontend::load_module(p.file.to_str().unwrap()).unwrap()
}

/// The seeded inputs `funcfuse run --seed` would generate for a program.
pub fn seeded_inputs(module: &Module, func: &str, seed: u64) -> BTreeMap<String, Tensor> {
    let f = module.function(func).unwrap();
    interp::tensor_params(f)
        .unwrap()
        .into_iter()
        .enumerate()
        .map(|(i, (name, dtype, shape))| (name, io::random_input(seed, i, dtype, &shape).unwrap()))
        .collect()
}

pub fn run_reference(module: &Module, func: &str, inputs: &BTreeMap<String, Tensor>) -> Result<RunOutput, String> {
    // Inputs are copied so that a program's in-place writes never reach the caller's map.
    let fresh: BTreeMap<String, Tensor> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    interp::run_program(module, func, &fresh, &BTreeMap::<String, ScalarArg>::new()).map_err(|d| d.to_string())
}

/// The files a run writes, by name, as `funcfuse run` names them.
pub fn output_files(out: &RunOutput) -> BTreeMap<String, Tensor> {
    out.files()
}

/// Tolerances for comparing against PyTorch: f32 rtol 1e-5, atol 1e-6; f64 rtol 1e-9, atol 1e-12; others exact.
pub fn compare(what: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    funcfuse::tensor::compare_close(what, got, want)
}

/// Compares a run's outputs with the stored PyTorch goldens of `p`: the same files, each within tolerance.
///
/// A compiled plan reports every parameter an `if` on data may write, PyTorch (its version counter) only those
/// written: for a plan (`inputs` given), a parameter file only the run wrote must hold that parameter's input
/// unchanged. The reference interpreter (`None`) must write exactly the files PyTorch wrote.
pub fn check_goldens(p: &Program, out: &RunOutput, inputs: Option<&BTreeMap<String, Tensor>>) -> Result<(), String> {
    let dir = &p.golden_dir;
    if !dir.join("meta.json").exists() {
        return Err(format!("no goldens in {} (run scripts/make_goldens.py)", dir.display()));
    }
    let mut want = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "npy") {
            want.insert(
                path.file_name().unwrap().to_string_lossy().to_string(),
                io::read_npy(&path).map_err(|d| d.to_string())?,
            );
        }
    }
    let got = output_files(out);
    let none = BTreeMap::new();
    let inputs = inputs.unwrap_or(&none);
    let unwritten = |k: &String| !want.contains_key(k) && inputs.contains_key(k.trim_end_matches(".npy"));
    let gk: Vec<&String> = got.keys().filter(|k| !unwritten(k)).collect();
    let wk: Vec<&String> = want.keys().collect();
    if gk != wk {
        return Err(format!("output files {gk:?} but PyTorch wrote {wk:?}"));
    }
    for (name, t) in got.iter().filter(|(k, _)| unwritten(k)) {
        compare(&format!("{name} (PyTorch did not write it)"), t, &inputs[name.trim_end_matches(".npy")])?;
    }
    for (name, w) in &want {
        compare(name, &got[name], w)?;
    }
    Ok(())
}

/// The golden seed and, where stored, the golden inputs (which must equal our generator's).
pub fn golden_inputs(p: &Program, module: &Module) -> Result<BTreeMap<String, Tensor>, String> {
    let meta: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(p.golden_dir.join("meta.json")).map_err(|e| format!("meta.json: {e}"))?,
    )
    .map_err(|e| e.to_string())?;
    let seed = meta["seed"].as_u64().ok_or("meta.json: no seed")?;
    let inputs = seeded_inputs(module, &p.func, seed);
    if meta["inputs_stored"].as_bool() == Some(true) {
        for (name, t) in &inputs {
            let stored =
                io::read_npy(&p.golden_dir.join("inputs").join(format!("{name}.npy"))).map_err(|d| d.to_string())?;
            compare(&format!("generated input {name}"), t, &stored)?;
        }
    }
    Ok(inputs)
}

/// Functionalizes a program, verifies its term, runs it with the functional interpreter and compares the outputs with
/// the reference interpreter's on the same inputs.
pub fn check_functional(module: &Module, func: &str, inputs: &BTreeMap<String, Tensor>) -> Result<(), String> {
    let f = funcfuse::functionalize::functionalize(module, func, &BTreeMap::new()).map_err(|d| d.to_string())?;
    funcfuse::ir::verify(&f.term, &f.inputs).map_err(|e| format!("the term does not verify: {e}"))?;
    let want = run_reference(module, func, inputs)?;
    let fresh: BTreeMap<String, Tensor> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let got = funcfuse::functionalize::run_functional(&f, &fresh).map_err(|d| d.to_string())?;
    let (g, w) = (output_files(&got), output_files(&want));
    // A parameter the functional engine reports as written (it may have been, under an `if` on a run-time value)
    // and the reference does not (it was not, this time) must hold its input; and the other way round.
    for name in w.keys().chain(g.keys().filter(|k| !w.contains_key(*k))) {
        let input = inputs.get(name.trim_end_matches(".npy"));
        match (g.get(name), w.get(name), input) {
            (Some(x), Some(y), _) => compare(name, x, y)?,
            (Some(x), None, Some(i)) => compare(&format!("{name} (unwritten by the reference)"), x, i)?,
            (None, Some(y), Some(i)) => compare(&format!("{name} (unwritten by the functional engine)"), i, y)?,
            _ => {
                let (gk, wk) = (g.keys().collect::<Vec<_>>(), w.keys().collect::<Vec<_>>());
                return Err(format!("functional outputs {gk:?} but the reference wrote {wk:?}"));
            }
        }
    }
    Ok(())
}

/// Saturates a program's functional term with the shipped rules, extracts the smallest term, and checks that it
/// still matches the reference interpreter (and that no rule merged classes of different types).
pub fn check_optimized(module: &Module, func: &str, inputs: &BTreeMap<String, Tensor>) -> Result<(), String> {
    let mut f = funcfuse::functionalize::functionalize(module, func, &BTreeMap::new()).map_err(|d| d.to_string())?;
    let defs = funcfuse::rewrite::rules::load_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("rules"))
        .map_err(|d| d.to_string())?;
    let rules = funcfuse::rewrite::rules::to_rewrites(&defs).map_err(|d| d.to_string())?;
    let o = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default())?;
    if !o.conflicts.is_empty() {
        return Err(format!("unsound rewrites: {:?}", o.conflicts));
    }
    f.term = o.term;
    let want = run_reference(module, func, inputs)?;
    let fresh: BTreeMap<String, Tensor> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let got = funcfuse::functionalize::run_functional(&f, &fresh).map_err(|d| d.to_string())?;
    let (g, w) = (output_files(&got), output_files(&want));
    for (name, t) in &w {
        compare(name, g.get(name).ok_or(format!("no {name}"))?, t)?;
    }
    Ok(())
}

/// Functionalizes and optimizes a program (the shipped rules), for the plan checks.
pub fn optimized(module: &Module, func: &str) -> Result<funcfuse::functionalize::Functional, String> {
    let mut f = funcfuse::functionalize::functionalize(module, func, &BTreeMap::new()).map_err(|d| d.to_string())?;
    let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().map_err(|d| d.to_string())?)
        .map_err(|d| d.to_string())?;
    f.term = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default())?.term;
    Ok(f)
}

/// Runs a program's plan under `policy` on the C backend and compares it with the reference engine.
pub fn check_plan(
    module: &Module,
    func: &str,
    inputs: &BTreeMap<String, Tensor>,
    policy: funcfuse::lower::Policy,
) -> Result<funcfuse::lower::exec::Stats, String> {
    check_plan_on(module, func, inputs, policy, funcfuse::backend::Target::C)
}

/// Runs a program's plan under `policy` on `target` and compares it with the reference engine.
pub fn check_plan_on(
    module: &Module,
    func: &str,
    inputs: &BTreeMap<String, Tensor>,
    policy: funcfuse::lower::Policy,
    target: funcfuse::backend::Target,
) -> Result<funcfuse::lower::exec::Stats, String> {
    let f = if policy == funcfuse::lower::Policy::Fused {
        optimized(module, func)?
    } else {
        funcfuse::functionalize::functionalize(module, func, &BTreeMap::new()).map_err(|d| d.to_string())?
    };
    let fresh: BTreeMap<String, Tensor> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let (got, stats) = funcfuse::backend::run_on(&f, policy, target, &fresh).map_err(|d| d.to_string())?;
    let want = run_reference(module, func, inputs)?;
    let (g, w) = (output_files(&got), output_files(&want));
    for (name, t) in &w {
        compare(name, g.get(name).ok_or(format!("no {name}"))?, t)?;
    }
    let plan = funcfuse::lower::plan(&f.term, &f.inputs, policy)?;
    check_estimate(&plan, &stats)?;
    Ok(stats)
}

/// The plans of every program of a corpus file, their C kernels compiled together (`funcfuse::backend::many`): one
/// library for the C backend (each program's eager, unfunctionalized and optimized plans) and one for the CUDA
/// emulator (the optimized plans), built at once by two compiler processes. Made by the first test of the file
/// that asks ([`file_batch`]) and shared by the rest: two libraries per file rather than four per program.
pub struct FileBatch {
    /// Per program: its terms and plans, or why it has none.
    programs: BTreeMap<String, Result<Planned, String>>,
    c: many::Compiled,
    emu: many::Compiled,
    /// Where each plan (program, policy's index in [`POLICIES`]) is in `c`, and each of ours in `emu`.
    c_at: BTreeMap<(String, usize), usize>,
    emu_at: BTreeMap<String, usize>,
}

/// A program's functional and optimized terms, and its plan per policy of [`POLICIES`] (or why there is none).
struct Planned {
    functional: Functional,
    optimized: Functional,
    plans: Vec<Result<Plan, String>>,
}

/// The policies of a corpus program's plans, in the order of the file's C library.
const POLICIES: [Policy; 3] = [Policy::Eager, Policy::Unfunctionalized, Policy::Fused];

impl FileBatch {
    fn new(file: &Path) -> FileBatch {
        let funcs: Vec<String> = match frontend::load_module(file.to_str().unwrap()) {
            Ok(m) => m.programs().map(|f| f.name.clone()).collect(),
            Err(_) => Vec::new(),
        };
        // Functionalized, optimized and planned on every core (the file's other tests wait for this one).
        let next = AtomicUsize::new(0);
        let programs: Mutex<BTreeMap<String, Result<Planned, String>>> = Mutex::default();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get()).min(funcs.len().max(1));
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    let module = frontend::load_module(file.to_str().unwrap()).unwrap();
                    while let Some(func) = funcs.get(next.fetch_add(1, Ordering::SeqCst)) {
                        let planned = Planned::new(&module, func);
                        programs.lock().unwrap().insert(func.clone(), planned);
                    }
                });
            }
        });
        let programs = programs.into_inner().unwrap();
        let (mut c_plans, mut emu_plans) = (Vec::new(), Vec::new());
        let (mut c_at, mut emu_at) = (BTreeMap::new(), BTreeMap::new());
        for func in &funcs {
            let Ok(p) = &programs[func] else { continue };
            for (i, plan) in p.plans.iter().enumerate() {
                let Ok(plan) = plan else { continue };
                c_at.insert((func.clone(), i), c_plans.len());
                c_plans.push(plan);
                if POLICIES[i] == Policy::Fused {
                    emu_at.insert(func.clone(), emu_plans.len());
                    emu_plans.push(plan);
                }
            }
        }
        let mut libs = many::compile_all(&[(c_plans, Target::C), (emu_plans, Target::CudaEmu)]).into_iter();
        let (c, emu) = (libs.next().unwrap(), libs.next().unwrap());
        FileBatch { programs, c, emu, c_at, emu_at }
    }

    /// Program `func`'s term for `policy` (ours: the optimized term), its plan, and a device running its kernels on
    /// `target` (the C backend, or for ours also the emulator).
    pub fn plan(&self, func: &str, policy: Policy, target: Target) -> Result<(&Functional, &Plan, Loaded), String> {
        let p = self.programs.get(func).ok_or(format!("no program {func}"))?.as_ref().map_err(|e| e.clone())?;
        let i = POLICIES.iter().position(|&q| q == policy).unwrap();
        let plan = p.plans[i].as_ref().map_err(|e| e.clone())?;
        let key = (func.to_string(), i);
        let dev = match target {
            Target::C => self.c.device(self.c_at[&key])?,
            Target::CudaEmu if policy == Policy::Fused => self.emu.device(self.emu_at[func])?,
            _ => return Err(format!("a file's batch has no {policy:?} plan for {target:?}")),
        };
        Ok((if policy == Policy::Fused { &p.optimized } else { &p.functional }, plan, dev))
    }
}

impl Planned {
    fn new(module: &Module, func: &str) -> Result<Planned, String> {
        let functional =
            funcfuse::functionalize::functionalize(module, func, &BTreeMap::new()).map_err(|d| d.to_string())?;
        let optimized = optimized(module, func)?;
        let plans = POLICIES
            .iter()
            .map(|&policy| {
                let f = if policy == Policy::Fused { &optimized } else { &functional };
                funcfuse::lower::plan(&f.term, &f.inputs, policy)
            })
            .collect();
        Ok(Planned { functional, optimized, plans })
    }
}

/// The [`FileBatch`] of corpus file `file`, made once per test binary.
pub fn file_batch(file: &Path) -> Arc<FileBatch> {
    static BATCHES: OnceLock<Mutex<BTreeMap<PathBuf, Arc<OnceLock<Arc<FileBatch>>>>>> = OnceLock::new();
    let cell = BATCHES.get_or_init(Default::default).lock().unwrap().entry(file.to_path_buf()).or_default().clone();
    cell.get_or_init(|| Arc::new(FileBatch::new(file))).clone()
}

/// [`check_plan_on`] for a corpus program, its plan and kernels from its file's batch ([`file_batch`]).
pub fn check_corpus_plan(
    p: &Program,
    module: &Module,
    inputs: &BTreeMap<String, Tensor>,
    policy: Policy,
    target: Target,
) -> Result<funcfuse::lower::exec::Stats, String> {
    let batch = file_batch(&p.file);
    let (f, plan, mut dev) = batch.plan(&p.func, policy, target)?;
    let fresh: BTreeMap<String, Tensor> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let bits = |ts: &BTreeMap<String, Tensor>| -> Vec<Vec<u64>> {
        ts.values().map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect()).collect()
    };
    let given = bits(&fresh);
    let (got, stats) = funcfuse::backend::run_loaded(f, plan, &mut dev, &fresh).map_err(|d| d.to_string())?;
    // Inputs a plan only reads are used in place, not copied (`Device::share`): no plan may write into the
    // caller's tensors, parameters it mutates included (their new values are outputs).
    if bits(&fresh) != given {
        return Err(format!("the {policy:?} plan wrote into the caller's inputs"));
    }
    let want = run_reference(module, &p.func, inputs)?;
    let (g, w) = (output_files(&got), output_files(&want));
    for (name, t) in &w {
        compare(name, g.get(name).ok_or(format!("no {name}"))?, t)?;
    }
    check_estimate(plan, &stats)?;
    Ok(stats)
}

/// Where a plan's run can take one path only (no `if`, no `while`, loop bounds literal), the figures predicted
/// without running it ([`funcfuse::lower::estimate::plan_stats`]) are exactly what the run counted: every command
/// prints the estimate, so this is what makes `explain`, `compare` and the reports agree with a run.
pub fn check_estimate(plan: &funcfuse::lower::Plan, run: &funcfuse::lower::exec::Stats) -> Result<(), String> {
    use funcfuse::ir::Node;
    let one_path = plan.term.as_ref().iter().all(|n| match n {
        Node::If(_) | Node::While(_) => false,
        Node::Loop([a, b, s, _, _]) => [a, b, s].iter().all(|x| matches!(plan.term[**x], Node::Int(_))),
        _ => true,
    });
    if !one_path {
        return Ok(());
    }
    let (est, _) = funcfuse::lower::estimate::plan_stats(plan);
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let same = est.launches == run.launches
        && est.copies == run.copies
        && est.fallbacks == run.fallbacks
        && close(est.bytes, run.bytes)
        && close(est.flops, run.flops)
        && est
            .by_class
            .iter()
            .zip(&run.by_class)
            .all(|(e, r)| e.features().iter().zip(r.features()).all(|(x, y)| close(*x, y)));
    if same {
        Ok(())
    } else {
        Err(format!("the plan's estimate differs from what its run counted:\nestimate {est:?}\nrun      {run:?}"))
    }
}

/// What one run of the `funcfuse` binary gave.
#[derive(Debug)]
pub struct Outcome {
    /// The exit status; a signal (a stack overflow's abort, a segfault) has none and is -1, which fails every
    /// status assertion.
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

/// The built binary, to be given arguments and environment.
pub fn binary() -> std::process::Command {
    std::process::Command::new(env!("CARGO_BIN_EXE_funcfuse"))
}

/// Runs `cmd` (from [`binary`]); a panic or a stack overflow fails the test.
pub fn run_binary(cmd: &mut std::process::Command) -> Outcome {
    let out = cmd.output().expect("the binary runs");
    let o = Outcome {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
    };
    assert!(!o.stderr.contains("panicked") && !o.stderr.contains("overflowed"), "funcfuse crashed: {}", o.stderr);
    o
}

/// Writes `src` (after the usual header) as `prog.py` in `dir`; its path.
pub fn program(dir: &Path, src: &str) -> String {
    let p = dir.join("prog.py");
    std::fs::write(&p, format!("from __future__ import annotations\nimport torch\n\n{src}")).unwrap();
    p.to_string_lossy().to_string()
}

/// A fresh scratch folder `group/name` under the test target folder.
pub fn scratch(group: &str, name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(group).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
