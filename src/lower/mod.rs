//! Lowering: an extracted term becomes a plan (host structure plus kernels in one kernel IR) that a backend runs.
//!
//! `plan` decides what fuses; `exec` runs a plan on any [`exec::Device`] (the C backend, the CUDA backend), with
//! host loops, branches and fallbacks, counting launches and bytes.

pub mod exec;
pub mod index;
pub mod kernel;
pub mod plan;

pub use plan::{plan, How, Plan, Policy};

use std::collections::BTreeMap;

use crate::diag::Diagnostic;
use crate::functionalize::Functional;
use crate::interp::RunOutput;
use crate::tensor::Tensor;

/// Plans `f`'s term under `policy` and runs it on the C backend; returns the outputs and what ran.
pub fn run_c(
    f: &Functional,
    policy: Policy,
    inputs: &BTreeMap<String, Tensor>,
) -> Result<(RunOutput, exec::Stats), Diagnostic> {
    let p = plan(&f.term, &f.inputs, policy).map_err(|e| Diagnostic::new(format!("planning failed: {e}")))?;
    let mut dev = crate::backend::c::CDevice::new(&p).map_err(Diagnostic::new)?;
    let mut stats = exec::Stats::default();
    let out = crate::functionalize::run_with(f, inputs, |_, inputs| {
        let (t, s) = exec::execute(&p, &mut dev, inputs)?;
        stats = s;
        Ok(t)
    })?;
    Ok((out, stats))
}
