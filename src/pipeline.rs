//! The stages of the pipeline as one session: what a command chose (rules, saturation limits, cost profile, backend)
//! held once, and each stage a method, so that `run`, `optimize` (and its batch), `compare`, `explain`, `calibrate`
//! and the Python package follow the same chain instead of each rebuilding it.
//!
//! The chain is parse ([`Session::load`]) -> functionalize ([`Session::functionalize`]) -> saturate and extract
//! ([`Session::saturate`], both in [`Session::optimize`]) -> plan ([`Session::plan`]; the three plans compared,
//! [`Session::plans`]) -> run ([`Session::load_plan`], [`Session::run`]). The invariants between the stages are listed
//! in the crate's documentation (`lib.rs`).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::backend::{Loaded, Target};
use crate::cost::Profile;
use crate::diag::Diagnostic;
use crate::frontend::Module;
use crate::functionalize::{functionalize, Functional};
use crate::interp::{RunOutput, ScalarArg};
use crate::ir::Node;
use crate::lower::exec::Stats;
use crate::lower::{Plan, Policy};
use crate::rewrite::saturate::{Limits, Optimized};
use crate::rewrite::TermAnalysis;
use crate::tensor::{DType, Tensor};

/// The rewrites saturation applies.
pub type Rewrites = [egg::Rewrite<Node, TermAnalysis>];

/// The plans compared, in the order they are reported: the two baselines (from the functional term) and ours (from
/// the optimized term).
pub const PLANS: &[(&str, Policy)] =
    &[("eager", Policy::Eager), ("unfunctionalized", Policy::Unfunctionalized), ("ours", Policy::Fused)];

/// Everything one program's optimization produced: the functional term, what saturation and extraction made of it,
/// and the time each took (not part of any deterministic output).
pub struct ProgramResult {
    pub functional: Functional,
    pub optimized: Optimized,
    pub functionalize_time: Duration,
    pub saturate_time: Duration,
}

/// What one command optimizes with: the rules, the saturation limits, the cost profile extraction and planning
/// follow, and the backend plans run on. The rules are borrowed: a command converts its rule files once
/// ([`crate::rewrite::rules::to_rewrites`]) and may hold several sessions over them.
pub struct Session<'r> {
    pub rules: &'r Rewrites,
    pub limits: Limits,
    pub profile: Profile,
    pub target: Target,
}

impl<'r> Session<'r> {
    /// A session with the default saturation limits.
    pub fn new(rules: &'r Rewrites, profile: Profile, target: Target) -> Session<'r> {
        Session { rules, limits: Limits::default(), profile, target }
    }

    /// The session with rewrites that hold in real arithmetic only allowed or not (`--fast-math`,
    /// [`Limits::fast_math`]).
    pub fn fast_math(mut self, on: bool) -> Session<'r> {
        self.limits.fast_math = on;
        self
    }

    /// Parse: a program file into its module (functions outside the subset are kept with their located errors).
    pub fn load(path: &str) -> Result<Module, Diagnostic> {
        crate::frontend::load_module(path)
    }

    /// Functionalize: program `func` of `module`, scalar parameters given values (others take their defaults).
    pub fn functionalize(
        &self,
        module: &Module,
        func: &str,
        scalars: &BTreeMap<String, ScalarArg>,
    ) -> Result<Functional, Diagnostic> {
        functionalize(module, func, scalars)
    }

    /// Saturate and extract: the candidate whose plan the session's profile predicts cheapest.
    pub fn saturate(&self, f: &Functional, file: &str) -> Result<Optimized, Diagnostic> {
        crate::rewrite::saturate::optimize_for(f, self.rules, self.limits, &self.profile)
            .map_err(|m| Diagnostic::new(m).in_file(file))
    }

    /// Functionalize, then saturate and extract, timing both.
    pub fn optimize(
        &self,
        module: &Module,
        func: &str,
        scalars: &BTreeMap<String, ScalarArg>,
    ) -> Result<ProgramResult, Diagnostic> {
        let t0 = Instant::now();
        let functional = self.functionalize(module, func, scalars)?;
        let t1 = Instant::now();
        let optimized = self.saturate(&functional, &module.path)?;
        Ok(ProgramResult { functional, optimized, functionalize_time: t1 - t0, saturate_time: t1.elapsed() })
    }

    /// Plan: `term` (over tensor parameters `inputs`) under `policy`, deciding by the session's profile.
    pub fn plan(
        &self,
        term: &crate::ir::Term,
        inputs: &[(String, DType, Vec<usize>)],
        policy: Policy,
    ) -> Result<Plan, String> {
        crate::lower::plan_for(term, inputs, policy, &self.profile)
    }

    /// The plans of [`PLANS`] named in `which` (all of them for `None`), in that order: the baselines from the
    /// functional term, ours from the optimized one. A failure names the plan (`eager plan: ...`).
    pub fn plans(
        &self,
        r: &ProgramResult,
        which: Option<&[&str]>,
    ) -> Result<Vec<(&'static str, Policy, Plan)>, String> {
        let mut out = Vec::new();
        for (name, policy) in PLANS {
            if which.is_some_and(|w| !w.contains(name)) {
                continue;
            }
            let term = if *policy == Policy::Fused { &r.optimized.term } else { &r.functional.term };
            let p = self.plan(term, &r.functional.inputs, *policy).map_err(|e| format!("{name} plan: {e}"))?;
            out.push((*name, *policy, p));
        }
        Ok(out)
    }

    /// Compile and load a plan's kernels on the session's backend.
    pub fn load_plan(&self, p: &Plan) -> Result<Loaded, String> {
        Loaded::new(p, self.target)
    }

    /// Run: plans `f`'s term under `policy` and runs it on the session's backend with `inputs` (each parameter's
    /// final contents and the returns, as the reference engine reports them); also what ran.
    pub fn run(
        &self,
        f: &Functional,
        policy: Policy,
        inputs: &BTreeMap<String, Tensor>,
    ) -> Result<(RunOutput, Stats), Diagnostic> {
        let p = self.plan(&f.term, &f.inputs, policy).map_err(|e| Diagnostic::new(format!("planning failed: {e}")))?;
        let mut dev = self.load_plan(&p).map_err(Diagnostic::new)?;
        let mut stats = Stats::default();
        let out = crate::functionalize::run_with(f, inputs, |_, inputs| {
            let (t, s) = dev.run(&p, inputs)?;
            stats = s;
            Ok(t)
        })?;
        Ok((out, stats))
    }
}
