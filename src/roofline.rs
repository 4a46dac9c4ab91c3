//! The roofline bound of a program: the least time any implementation could take on a machine with the cost
//! profile's bandwidth and transcendental rate.
//!
//! - Minimum bytes: every input tensor read once and every output (returned tensor or final value of a mutated
//!   parameter) written once, at their dtypes' sizes. Intermediate buffers, re-reads and loops add nothing.
//! - Minimum transcendental work: an estimate from plans, the least of ours and the eager plan's (one kernel per
//!   op, so each op once per element of its result; ours may compute a fused producer in several kernels). In a
//!   plan, each transcendental op of a kernel's expression (exp,
//!   log, log1p, expm1, sigmoid, tanh, sin, cos, erf, silu, gelu, pow, atan2) counts once per distinct element it
//!   computes: the product of the extents of the loop variables its operands depend on (so a producer fused into
//!   a broadcasting consumer counts at its own size, and one inside a reduction at the reduced input's size), times
//!   how often the kernel runs ([`crate::lower::estimate::run_counts`]). An elementwise kernel is also counted per piece of
//!   its specialized domain, where the arms of a select count only where they are taken (conditions on loop
//!   variables), and the smaller count is kept ([`crate::lower::class::transcendentals`]). Ops the host runs (fallbacks) are not counted; an op that two kernels both compute counts twice.
//! - The bound is `max(bytes / stream_bytes_per_s, transcendentals * transcendental_s)`: memory and arithmetic overlap, and
//!   launches cost nothing.

use crate::cost::Profile;
use crate::lower::class::transcendentals;
use crate::lower::{How, Plan};
use crate::tensor::DType;

/// A program's roofline figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Roofline {
    /// Every input read once, every output written once.
    pub bytes: f64,
    /// Transcendental elements computed, counted at their own sizes: the least of the plans given.
    pub transcendentals: f64,
    /// The lower-bound time under the profile, in seconds.
    pub bound_s: f64,
}

/// The bound for `bytes` moved and `transcendentals` computed.
pub fn bound(profile: &Profile, bytes: f64, transcendentals: f64) -> f64 {
    (bytes / profile.stream_bytes_per_s).max(transcendentals * profile.transcendental_s)
}

/// Bytes of tensors given as (dtype, shape).
pub fn tensor_bytes<'a>(tensors: impl IntoIterator<Item = (DType, &'a [usize])>) -> f64 {
    tensors.into_iter().map(|(d, s)| d.size() as f64 * s.iter().product::<usize>() as f64).sum()
}

/// The roofline of a program whose inputs and outputs are given as (dtype, shape), with its transcendental work
/// the least that any of `plans` computes (ours, and the eager plan: ours may compute a fused producer in two
/// kernels, a softmax's `exp` in its sum and in each reduction reading it, which is not the program's minimum).
pub fn roofline<'a>(
    profile: &Profile,
    inputs: impl IntoIterator<Item = (DType, &'a [usize])>,
    outputs: impl IntoIterator<Item = (DType, &'a [usize])>,
    plans: &[&Plan],
) -> Roofline {
    let bytes = tensor_bytes(inputs) + tensor_bytes(outputs);
    let transcendentals = plans.iter().map(|p| plan_transcendentals(p)).reduce(f64::min).unwrap_or(0.0);
    Roofline { bytes, transcendentals, bound_s: bound(profile, bytes, transcendentals) }
}

/// Transcendental elements a plan's kernels compute, weighted by how often each runs.
pub fn plan_transcendentals(plan: &Plan) -> f64 {
    let times = crate::lower::estimate::run_counts(plan);
    plan.how
        .iter()
        .enumerate()
        .map(|(i, how)| match how {
            How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => times[i] * transcendentals(&plan.kernels[*k]),
            _ => 0.0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bound_is_the_larger_of_memory_and_transcendental_time() {
        let p = Profile {
            backend: "c".into(),
            launch_s: 1e-6,
            bytes_per_s: 1e9,
            ops_per_s: 1e9,
            transcendental_s: 1e-9,
            stream_bytes_per_s: 1e9,
            classes: None,
            info: serde_json::Value::Null,
        };
        assert_eq!(bound(&p, 4e6, 1e3), 4e-3);
        assert_eq!(bound(&p, 4e3, 1e7), 1e-2);
        assert_eq!(tensor_bytes([(DType::F32, &[2usize, 3][..]), (DType::Bool, &[5usize][..])]), 29.0);
    }
}
