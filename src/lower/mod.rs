//! Lowering: an extracted term becomes a plan (host structure plus kernels in one kernel IR) that a backend runs.
//!
//! `plan` decides what fuses; `exec` runs a plan on any [`exec::Device`] (the C backend, the CUDA backend), with
//! host loops, branches and fallbacks, counting launches and bytes.

pub mod exec;
mod fuse;
pub mod group;
pub mod index;
pub mod kernel;
mod order;
pub mod plan;
mod prepare;
pub mod profile;
mod scatter;
mod show;
pub mod specialize;

pub use plan::{plan, plan_for, How, Plan, Policy};

use std::collections::BTreeMap;

use crate::diag::Diagnostic;
use crate::functionalize::Functional;
use crate::interp::RunOutput;
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
    C(crate::backend::c::CDevice),
    Cuda(crate::backend::cuda::CudaDevice),
}

impl Loaded {
    pub fn new(p: &Plan, target: Target) -> Result<Loaded, String> {
        Ok(match target {
            Target::C => Loaded::C(crate::backend::c::CDevice::new(p)?),
            Target::Cuda => Loaded::Cuda(crate::backend::cuda::CudaDevice::new(p)?),
            Target::CudaEmu => Loaded::C(crate::backend::c::CDevice::emulated(p)?),
        })
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
    let p = plan(&f.term, &f.inputs, policy).map_err(|e| Diagnostic::new(format!("planning failed: {e}")))?;
    let mut dev = Loaded::new(&p, target).map_err(Diagnostic::new)?;
    let mut stats = exec::Stats::default();
    let out = crate::functionalize::run_with(f, inputs, |_, inputs| {
        let (t, s) = dev.run(&p, inputs)?;
        stats = s;
        Ok(t)
    })?;
    Ok((out, stats))
}
