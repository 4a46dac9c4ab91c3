//! Kernel classes: what a run did, split by the kind of work, so that a profile can price each kind at its own
//! measured rates (issue #17). `lower/class.rs` classifies each kernel; the executor adds each launch to its class
//! ([`super::Stats::by_class`]).

/// The classes, in the order of [`super::Stats::by_class`] and of a profile's `classes`.
pub const CLASSES: [&str; 8] =
    ["elementwise", "transcendental", "gather", "reduction", "matmul", "copy", "fallback", "run"];
pub const ELEMENTWISE: usize = 0;
pub const TRANSCENDENTAL: usize = 1;
pub const GATHER: usize = 2;
pub const REDUCTION: usize = 3;
pub const MATMUL: usize = 4;
/// Buffer copies the executor makes (loop state, copy-in-place).
pub const COPY: usize = 5;
/// Ops the host's functional interpreter runs.
pub const FALLBACK: usize = 6;
/// Once per run: the input uploads and output downloads, and the run's fixed cost.
pub const RUN: usize = 7;
pub const N: usize = CLASSES.len();

/// The features one class accumulates over a run; a class's predicted time is linear in them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClassStats {
    pub launches: f64,
    pub bytes: f64,
    pub ops: f64,
    pub transcendentals: f64,
}

/// The feature names, in the order of [`ClassStats::features`] and of a class's coefficients.
pub const FEATURES: [&str; 4] = ["launch_s", "s_per_byte", "s_per_op", "s_per_transcendental"];

impl ClassStats {
    pub fn features(&self) -> [f64; 4] {
        [self.launches, self.bytes, self.ops, self.transcendentals]
    }

    pub fn add(&mut self, o: &ClassStats) {
        self.launches += o.launches;
        self.bytes += o.bytes;
        self.ops += o.ops;
        self.transcendentals += o.transcendentals;
    }
}
