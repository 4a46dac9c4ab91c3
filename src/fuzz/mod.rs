//! The differential fuzzer: random programs through every engine, each held to the reference interpreter.
//!
//! [`gen`] writes a valid random program from a seed; [`check_source`] runs it through the engines (the reference
//! interpreter, the functional interpreter on the functional and on the optimized term, our plan on the C backend and
//! on the CUDA emulator, the eager and unfunctionalized plans on C) on the inputs `funcfuse run --seed 0` would
//! generate, and classifies what each did against the reference: the same outputs within the tolerance of
//! [`crate::tensor::compare_close`] (or both rejected the program), a **wrong** result (different outputs, or a result
//! where the reference raised), a **refusal** (an error where the reference ran), or a **panic**. [`reduce`] shrinks a
//! diverging program while it still diverges the same way.
//!
//! Invariant: the same seeds and engines give the same verdicts and the same reduced programs.

pub mod gen;
pub mod reduce;

use std::collections::BTreeMap;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::backend::Target;
use crate::ir::Node;
use crate::lower::Policy;
use crate::rewrite::TermAnalysis;
use crate::tensor::Tensor;

/// The engines a program is run through; the reference is always run first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Engine {
    Reference,
    /// The functional interpreter on the functionalized term.
    Functional,
    /// The functional interpreter on the optimized (saturated and extracted) term.
    Optimized,
    /// Our plan of the optimized term on the C backend.
    C,
    /// Our plan's CUDA kernels on the emulator.
    CudaEmu,
    /// The eager plan (one kernel per op) on the C backend.
    Eager,
    /// The unfunctionalized plan on the C backend.
    Unfunctionalized,
}

impl Engine {
    pub const ALL: [Engine; 7] = [
        Engine::Reference,
        Engine::Functional,
        Engine::Optimized,
        Engine::C,
        Engine::CudaEmu,
        Engine::Eager,
        Engine::Unfunctionalized,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Engine::Reference => "reference",
            Engine::Functional => "functional",
            Engine::Optimized => "optimized",
            Engine::C => "c",
            Engine::CudaEmu => "cuda-emu",
            Engine::Eager => "eager",
            Engine::Unfunctionalized => "unfunctionalized",
        }
    }

    pub fn parse(s: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.name() == s)
    }
}

/// What one engine did with a program.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Its output files (`return.npy`, `NAME.npy`, ...).
    Ran(BTreeMap<String, Tensor>),
    Error(String),
    Panic(String),
}

/// How an engine's outcome relates to the reference's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Different outputs, or outputs where the reference raised: silently wrong.
    Wrong,
    /// The process died (a signal: say a kernel's access out of bounds). Found by `funcfuse fuzz`, which checks
    /// programs in worker processes; never produced in process.
    Crash,
    /// A panic: never acceptable.
    Panic,
    /// An error where the reference ran.
    Refused,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Wrong => "wrong",
            Kind::Crash => "crash",
            Kind::Panic => "panic",
            Kind::Refused => "refused",
        }
    }

    pub fn parse(s: &str) -> Option<Kind> {
        [Kind::Wrong, Kind::Crash, Kind::Panic, Kind::Refused].into_iter().find(|k| k.name() == s)
    }
}

/// One engine's divergence from the reference.
#[derive(Clone, Debug)]
pub struct Divergence {
    pub engine: Engine,
    pub kind: Kind,
    pub detail: String,
}

/// The verdict on one program.
#[derive(Clone, Debug)]
pub struct Verdict {
    /// The reference's error, when it rejected the program.
    pub reference_error: Option<String>,
    /// Every engine that disagreed with the reference (empty: all agree).
    pub divergences: Vec<Divergence>,
}

impl Verdict {
    /// The divergence a reduction must keep: the first wrong result, else the first crash, else the first panic,
    /// else the first refusal.
    pub fn signature(&self) -> Option<&Divergence> {
        self.divergences.iter().min_by_key(|d| (d.kind, d.engine))
    }

    /// The verdict as JSON, as a `fuzz` worker process reports it to its parent ([`Verdict::from_json`]).
    pub fn to_json(&self) -> serde_json::Value {
        let divergences: Vec<serde_json::Value> = self
            .divergences
            .iter()
            .map(|d| serde_json::json!({"engine": d.engine.name(), "kind": d.kind.name(), "detail": d.detail}))
            .collect();
        serde_json::json!({"reference_error": self.reference_error, "divergences": divergences})
    }

    /// The verdict [`Verdict::to_json`] wrote; `None` when `v` is not one.
    pub fn from_json(v: &serde_json::Value) -> Option<Verdict> {
        let reference_error = match &v["reference_error"] {
            serde_json::Value::Null => None,
            e => Some(e.as_str()?.to_string()),
        };
        let divergences = v["divergences"]
            .as_array()?
            .iter()
            .map(|d| {
                Some(Divergence {
                    engine: Engine::parse(d["engine"].as_str()?)?,
                    kind: Kind::parse(d["kind"].as_str()?)?,
                    detail: d["detail"].as_str()?.to_string(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        Some(Verdict { reference_error, divergences })
    }
}

impl Divergence {
    /// Whether `other` is the same divergence for a reduction: the same engine and kind, and for a refusal the same
    /// message up to its location and numbers (a reduction that swaps one refusal for another, say an unbound name
    /// for the error it was reduced from, has lost the divergence).
    pub fn same_as(&self, other: &Divergence) -> bool {
        fn class(detail: &str) -> String {
            // `FILE.py:LINE:COL: message`: the message, with digit runs as `N` (shrinking shapes changes them).
            let msg = detail.split_once(".py:").and_then(|(_, r)| r.splitn(3, ':').nth(2)).unwrap_or(detail);
            let mut out = String::new();
            for c in msg.chars() {
                if !c.is_ascii_digit() {
                    out.push(c);
                } else if !out.ends_with('N') {
                    out.push('N');
                }
            }
            out
        }
        (self.engine, self.kind) == (other.engine, other.kind)
            && (self.kind != Kind::Refused || class(&self.detail) == class(&other.detail))
    }
}

/// The name of the program [`gen::generate`] writes for `seed`.
pub fn program_name(seed: u64) -> String {
    format!("fuzz_{seed}")
}

fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "panic".to_string())
}

/// The wall-clock limit of one engine's run of one program. Generated programs are small and take milliseconds; a
/// program that loops forever (the reducer can delete a `while` loop's counter step) errs with "time limit exceeded"
/// on every engine, and so counts as rejected by every engine instead of stopping the run.
const ENGINE_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

fn guarded(f: impl FnOnce() -> Result<BTreeMap<String, Tensor>, String>) -> Outcome {
    match catch_unwind(AssertUnwindSafe(|| crate::limits::with_deadline(Some(ENGINE_TIME_LIMIT), f))) {
        Ok(Ok(files)) => Outcome::Ran(files),
        Ok(Err(e)) => Outcome::Error(e),
        Err(p) => Outcome::Panic(panic_text(&*p)),
    }
}

/// Runs program `func` of the module in `source` through `engines` and compares each with the reference.
/// `rules` are the rewrites the optimized engines saturate with.
pub fn check_source(
    path: &str,
    source: &str,
    func: &str,
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> Verdict {
    check_sources(&[(path, source, func)], engines, rules).pop().expect("one verdict per program")
}

/// [`check_source`] for each of `programs` (path, source, function), their C kernels compiled together: every
/// plan the C backend runs in one library, every plan the emulator runs in another ([`crate::backend::many`]).
/// The verdicts are [`check_source`]'s, one per program, in order.
pub fn check_sources(
    programs: &[(&str, &str, &str)],
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> Vec<Verdict> {
    let prepared: Vec<Result<Prepared, Verdict>> =
        programs.iter().map(|(path, source, func)| prepare(path, source, func, engines, rules)).collect();
    // Each plan's place in its backend's batch, by program and engine.
    let (mut c, mut emu) = (Vec::new(), Vec::new());
    let mut place: BTreeMap<(usize, Engine), usize> = BTreeMap::new();
    for (i, p) in prepared.iter().enumerate() {
        for (engine, plan) in p.iter().flat_map(|p| &p.plans) {
            if let Ok(plan) = plan {
                let batch = if *engine == Engine::CudaEmu { &mut emu } else { &mut c };
                place.insert((i, *engine), batch.len());
                batch.push(plan);
            }
        }
    }
    // A panic while rendering or compiling a batch: each plan then loads on its own, where its engine reports it.
    let compiled = catch_unwind(AssertUnwindSafe(|| {
        crate::backend::many::compile_all(&[(c.clone(), Target::C), (emu.clone(), Target::CudaEmu)])
    }))
    .ok();
    let device = |i: usize, engine: Engine, plan: &crate::lower::Plan| {
        let target = if engine == Engine::CudaEmu { Target::CudaEmu } else { Target::C };
        match (&compiled, place.get(&(i, engine))) {
            (Some(batches), Some(&at)) => batches[usize::from(target == Target::CudaEmu)].device(at),
            _ => crate::backend::Loaded::new(plan, target),
        }
    };
    prepared
        .into_iter()
        .enumerate()
        .map(|(i, p)| match p {
            Ok(p) => p.finish(engines, &|engine, plan| device(i, engine, plan)),
            Err(v) => v,
        })
        .collect()
}

type Caught<T> = std::thread::Result<T>;

/// A program parsed, run by the reference, functionalized, optimized and planned: all but running its plans.
struct Prepared {
    inputs: BTreeMap<String, Tensor>,
    reference: Outcome,
    functional: Caught<Result<crate::functionalize::Functional, String>>,
    optimized: Option<Caught<Result<crate::functionalize::Functional, String>>>,
    /// Per engine that runs a plan: its plan, or what planning did instead.
    plans: Vec<(Engine, Result<crate::lower::Plan, Outcome>)>,
}

/// The engines that run a plan on a backend, and the plan's policy.
fn policy_of(engine: Engine) -> Option<Policy> {
    match engine {
        Engine::C | Engine::CudaEmu => Some(Policy::Fused),
        Engine::Eager => Some(Policy::Eager),
        Engine::Unfunctionalized => Some(Policy::Unfunctionalized),
        Engine::Reference | Engine::Functional | Engine::Optimized => None,
    }
}

/// Everything of [`check_source`] before the plans run; `Err`: the verdict already (the program did not parse).
fn prepare(
    path: &str,
    source: &str,
    func: &str,
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> Result<Prepared, Verdict> {
    let rejected = |d: crate::Diagnostic| Verdict { reference_error: Some(d.to_string()), divergences: Vec::new() };
    let module = crate::frontend::parse_module(path, source).map_err(rejected)?;
    let f = module.get(func).map_err(rejected)?;
    let inputs: BTreeMap<String, Tensor> = crate::interp::tensor_params(f)
        .map_err(rejected)?
        .iter()
        .enumerate()
        .filter_map(|(i, (n, d, s))| crate::io::random_input(0, i, *d, s).ok().map(|t| (n.clone(), t)))
        .collect();
    let fresh = || fresh_copy(&inputs);
    let reference = guarded(|| {
        crate::interp::run_program(&module, func, &fresh(), &BTreeMap::new())
            .map(|o| o.files())
            .map_err(|d| d.to_string())
    });
    // Functionalization and optimization are shared by the engines after the reference.
    let functional = catch_unwind(AssertUnwindSafe(|| {
        crate::functionalize::functionalize(&module, func, &BTreeMap::new()).map_err(|d| d.to_string())
    }));
    let needs_opt = engines.iter().any(|e| matches!(e, Engine::Optimized | Engine::C | Engine::CudaEmu));
    let optimized = match &functional {
        Ok(Ok(f)) if needs_opt => Some(catch_unwind(AssertUnwindSafe(|| {
            crate::rewrite::saturate::optimize(f, rules, Default::default()).map(|o| {
                let mut g = f.clone();
                g.term = o.term;
                g
            })
        }))),
        _ => None,
    };
    let mut plans = Vec::new();
    for &engine in engines {
        let Some(policy) = policy_of(engine) else { continue };
        let term = if policy == Policy::Fused { optimized.as_ref().and_then(|o| o.as_ref().ok()) } else { None };
        let f = match (&functional, term) {
            (Ok(Ok(f)), None) if policy != Policy::Fused => f,
            (_, Some(Ok(g))) => g,
            _ => continue,
        };
        let planned = catch_unwind(AssertUnwindSafe(|| {
            crate::limits::with_deadline(Some(ENGINE_TIME_LIMIT), || {
                crate::backend::plan_for_run(f, policy).map_err(|d| d.to_string())
            })
        }));
        plans.push((
            engine,
            match planned {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err(Outcome::Error(e)),
                Err(p) => Err(Outcome::Panic(panic_text(&*p))),
            },
        ));
    }
    Ok(Prepared { inputs, reference, functional, optimized, plans })
}

fn fresh_copy(inputs: &BTreeMap<String, Tensor>) -> BTreeMap<String, Tensor> {
    inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect()
}

impl Prepared {
    /// Runs the engines (`device`: a plan's kernels, loaded for an engine) and judges each against the reference.
    fn finish(
        &self,
        engines: &[Engine],
        device: &dyn Fn(Engine, &crate::lower::Plan) -> Result<crate::backend::Loaded, String>,
    ) -> Verdict {
        let fresh = || fresh_copy(&self.inputs);
        let mut out = Verdict { reference_error: None, divergences: Vec::new() };
        let want = match &self.reference {
            Outcome::Ran(files) => Some(files),
            Outcome::Error(e) => {
                out.reference_error = Some(e.clone());
                None
            }
            Outcome::Panic(p) => {
                out.divergences.push(Divergence { engine: Engine::Reference, kind: Kind::Panic, detail: p.clone() });
                return out;
            }
        };
        let run_plan = |engine: Engine, f: &crate::functionalize::Functional| -> Outcome {
            match self.plans.iter().find(|(e, _)| *e == engine).map(|(_, p)| p) {
                Some(Ok(plan)) => guarded(|| {
                    let mut dev = device(engine, plan)?;
                    crate::backend::run_loaded(f, plan, &mut dev, &fresh())
                        .map(|o| o.0.files())
                        .map_err(|d| d.to_string())
                }),
                Some(Err(outcome)) => outcome.clone(),
                None => Outcome::Error("not planned".into()),
            }
        };
        for &engine in engines {
            if engine == Engine::Reference {
                continue;
            }
            let outcome = match (&self.functional, engine) {
                (Err(p), _) => Outcome::Panic(format!("functionalize: {}", panic_text(&**p))),
                (Ok(Err(e)), _) => Outcome::Error(e.clone()),
                (Ok(Ok(f)), Engine::Functional) => guarded(|| {
                    crate::functionalize::run_functional(f, &fresh()).map(|o| o.files()).map_err(|d| d.to_string())
                }),
                (Ok(Ok(f)), Engine::Eager | Engine::Unfunctionalized) => run_plan(engine, f),
                (Ok(Ok(_)), _) => match self.optimized.as_ref() {
                    None => Outcome::Error("not optimized".into()),
                    Some(Err(p)) => Outcome::Panic(format!("saturate: {}", panic_text(&**p))),
                    Some(Ok(Err(e))) => Outcome::Error(e.clone()),
                    Some(Ok(Ok(g))) if engine == Engine::Optimized => guarded(|| {
                        crate::functionalize::run_functional(g, &fresh()).map(|o| o.files()).map_err(|d| d.to_string())
                    }),
                    Some(Ok(Ok(g))) => run_plan(engine, g),
                },
            };
            if let Some(d) = judge(engine, want, &outcome, &self.inputs) {
                out.divergences.push(d);
            }
        }
        out
    }
}

/// Compares one engine's outcome with the reference's files (`None`: the reference raised).
///
/// The reference reports a parameter as written when a write to it ran (PyTorch's version counter); the compiled
/// engines report every parameter that may be written, since a write under a data-dependent `if` is decided at run
/// time. A parameter file only one side wrote must therefore hold the parameter's input unchanged.
fn judge(
    engine: Engine,
    want: Option<&BTreeMap<String, Tensor>>,
    got: &Outcome,
    inputs: &BTreeMap<String, Tensor>,
) -> Option<Divergence> {
    let d = |kind, detail: String| Some(Divergence { engine, kind, detail });
    match (want, got) {
        (_, Outcome::Panic(p)) => d(Kind::Panic, p.clone()),
        (None, Outcome::Error(_)) => None,
        (None, Outcome::Ran(files)) => {
            d(Kind::Wrong, format!("ran (wrote {:?}) where the reference raised", files.keys().collect::<Vec<_>>()))
        }
        (Some(_), Outcome::Error(e)) => d(Kind::Refused, e.clone()),
        (Some(w), Outcome::Ran(g)) => {
            let unchanged = |file: &str| inputs.get(file.trim_end_matches(".npy"));
            for name in w.keys().chain(g.keys().filter(|k| !w.contains_key(*k))) {
                let (got, want) = match (g.get(name), w.get(name), unchanged(name)) {
                    (Some(x), Some(y), _) => (x, y),
                    (Some(x), None, Some(input)) => (x, input),
                    (None, Some(y), Some(input)) => (input, y),
                    _ => {
                        return d(
                            Kind::Wrong,
                            format!(
                                "wrote {:?} but the reference wrote {:?}",
                                g.keys().collect::<Vec<_>>(),
                                w.keys().collect::<Vec<_>>()
                            ),
                        )
                    }
                };
                if let Err(e) = crate::tensor::compare_close(name, got, want) {
                    return d(Kind::Wrong, e);
                }
            }
            None
        }
    }
}

/// The shipped rules as rewrites, for [`check_source`].
pub fn shipped_rewrites() -> Result<Vec<egg::Rewrite<Node, TermAnalysis>>, crate::Diagnostic> {
    crate::rewrite::rules::to_rewrites(&crate::rewrite::rules::shipped()?)
}

/// Generates and checks the program of `seed`.
pub fn check_seed(seed: u64, engines: &[Engine], rules: &[egg::Rewrite<Node, TermAnalysis>]) -> (String, Verdict) {
    let source = gen::generate(seed);
    let name = program_name(seed);
    let v = check_source(&format!("{name}.py"), &source, &name, engines, rules);
    (source, v)
}

/// [`check_seed`] for each of `seeds`, their kernels compiled together ([`check_sources`]): in seed order.
pub fn check_seeds(
    seeds: &[u64],
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> Vec<(String, Verdict)> {
    let sources: Vec<(String, String, String)> = seeds
        .iter()
        .map(|&seed| (format!("{}.py", program_name(seed)), gen::generate(seed), program_name(seed)))
        .collect();
    let programs: Vec<(&str, &str, &str)> =
        sources.iter().map(|(path, src, name)| (path.as_str(), src.as_str(), name.as_str())).collect();
    let verdicts = check_sources(&programs, engines, rules);
    sources.into_iter().map(|(_, src, _)| src).zip(verdicts).collect()
}

/// Seeds whose programs [`check_seeds`] is best given at once: small enough that the threads share the work
/// evenly, large enough that a C library holds many programs' kernels.
pub const SEEDS_PER_BATCH: usize = 10;

/// Counts over a batch of verdicts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    pub programs: usize,
    /// Every engine ran the program and matched the reference.
    pub agree: usize,
    /// The reference rejected the program and so did every engine.
    pub rejected: usize,
    /// Programs with at least one wrong result, panic or refusal.
    pub wrong: usize,
    /// Programs whose check killed the process (only `funcfuse fuzz`'s worker processes see these).
    pub crashes: usize,
    pub panics: usize,
    pub refused: usize,
}

impl Summary {
    pub fn add(&mut self, v: &Verdict) {
        self.programs += 1;
        match v.signature().map(|d| d.kind) {
            None if v.reference_error.is_some() => self.rejected += 1,
            None => self.agree += 1,
            Some(Kind::Wrong) => self.wrong += 1,
            Some(Kind::Crash) => self.crashes += 1,
            Some(Kind::Panic) => self.panics += 1,
            Some(Kind::Refused) => self.refused += 1,
        }
    }

    pub fn diverged(&self) -> usize {
        self.wrong + self.crashes + self.panics + self.refused
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "{} programs: {} agree, {} rejected by every engine, {} diverge ({} wrong, {} crashed, {} panics, {} refused)",
            self.programs,
            self.agree,
            self.rejected,
            self.diverged(),
            self.wrong,
            self.crashes,
            self.panics,
            self.refused
        )
    }
}
