//! The device switch: which backend runs a plan ([`Target`]), a plan's kernels compiled and loaded there
//! ([`Loaded`]), and planning plus running a functional term's outputs in one call ([`run_on`]).

use std::collections::BTreeMap;

use crate::diag::Diagnostic;
use crate::functionalize::Functional;
use crate::interp::RunOutput;
use crate::lower::exec;
use crate::lower::{plan, Plan, Policy};
use crate::tensor::Tensor;

/// The backends a plan runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    C,
    Cuda,
    /// The CUDA kernels run by the emulator on the CPU (for checking them without a GPU).
    CudaEmu,
}

/// A plan's kernels compiled and loaded on a backend.
pub enum Loaded {
    C(super::c::CDevice),
    Cuda(super::cuda::CudaDevice),
}

impl Loaded {
    pub fn new(p: &Plan, target: Target) -> Result<Loaded, String> {
        Ok(match target {
            Target::C => Loaded::C(super::c::CDevice::new(p)?),
            Target::Cuda => Loaded::Cuda(super::cuda::CudaDevice::new(p)?),
            Target::CudaEmu => Loaded::C(super::c::CDevice::emulated(p)?),
        })
    }

    /// [`Loaded::run`] with inputs the caller gives up ([`exec::execute_donated`]): an input that nothing else
    /// holds may be written in place rather than copied first, as PyTorch writes into the tensors it is given; its
    /// contents are unspecified after the run.
    pub fn run_donated(
        &mut self,
        p: &Plan,
        inputs: &mut BTreeMap<String, Tensor>,
    ) -> Result<(Vec<Tensor>, exec::Stats), String> {
        match self {
            Loaded::C(d) => exec::execute_donated(p, d, inputs),
            Loaded::Cuda(d) => exec::execute_donated(p, d, inputs),
        }
    }

    /// Runs the plan (synchronized: its outputs are back on the host when this returns).
    pub fn run(&mut self, p: &Plan, inputs: &BTreeMap<String, Tensor>) -> Result<(Vec<Tensor>, exec::Stats), String> {
        let t = std::time::Instant::now();
        let r = match self {
            Loaded::C(d) => exec::execute(p, d, inputs),
            Loaded::Cuda(d) => exec::execute(p, d, inputs),
        };
        if let Ok((_, s)) = &r {
            crate::log::log(crate::log::Stage::Run, || {
                let ms = t.elapsed().as_secs_f64() * 1e3;
                format!(
                    "{} launches ({} copies), {} host fallbacks, {:.3} MB, in {ms:.3} ms",
                    s.launches,
                    s.copies,
                    s.fallbacks,
                    s.bytes / 1e6
                )
            });
        }
        r
    }

    /// [`Loaded::run`], timing every launch, copy and fallback ([`exec::execute_profiled`]).
    pub fn run_profiled(
        &mut self,
        p: &Plan,
        inputs: &BTreeMap<String, Tensor>,
    ) -> Result<(Vec<Tensor>, exec::Stats, Vec<exec::Launched>), String> {
        match self {
            Loaded::C(d) => exec::execute_profiled(p, d, inputs),
            Loaded::Cuda(d) => exec::execute_profiled(p, d, inputs),
        }
    }
}

/// Plans `f`'s term under `policy` and runs it on the C backend; returns the outputs and what ran.
pub fn run_c(
    f: &Functional,
    policy: Policy,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<(RunOutput, exec::Stats), Diagnostic> {
    run_on(f, policy, Target::C, inputs)
}

/// Plans `f`'s term under `policy` and runs it on `target`; returns the outputs and what ran.
pub fn run_on(
    f: &Functional,
    policy: Policy,
    target: Target,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<(RunOutput, exec::Stats), Diagnostic> {
    let p = plan_for_run(f, policy)?;
    let mut dev = Loaded::new(&p, target).map_err(Diagnostic::new)?;
    run_loaded(f, &p, &mut dev, inputs)
}

/// Plans `f`'s term under `policy`, with [`run_on`]'s error.
pub fn plan_for_run(f: &Functional, policy: Policy) -> Result<Plan, Diagnostic> {
    plan(&f.term, &f.inputs, policy).map_err(|e| Diagnostic::new(format!("planning failed: {e}")))
}

/// Runs plan `p` of `f`'s term, its kernels loaded in `dev` (by [`Loaded::new`] or a batch,
/// [`super::many::Compiled`]); returns the outputs and what ran.
pub fn run_loaded(
    f: &Functional,
    p: &Plan,
    dev: &mut Loaded,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<(RunOutput, exec::Stats), Diagnostic> {
    let mut stats = exec::Stats::default();
    let out = crate::functionalize::run_with(f, inputs, |_, inputs| {
        let (t, s) = dev.run(p, inputs)?;
        stats = s;
        Ok(t)
    })?;
    Ok((out, stats))
}
