//! Kernel classes: what a run did, split by the kind of work, so that a profile can price each kind at its own
//! measured rates (issue #17). The executor adds each launch to its class ([`crate::lower::exec::Stats::by_class`]).

use crate::lower::kernel::{Expr, Kernel, RedOp};
use crate::tensor::ops::Binary;

/// The classes, in the order of [`crate::lower::exec::Stats::by_class`] and of a profile's `classes`.
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

/// A kernel's class and the transcendental elements one launch computes.
pub fn classify(k: &Kernel) -> (usize, f64) {
    let trans = crate::roofline::kernel_transcendentals(k);
    let class = match &k.reduce {
        Some(r) if r.op == RedOp::Sum && is_product(&k.value) && k.domain.iter().product::<usize>() > 1 => MATMUL,
        Some(_) => REDUCTION,
        None if has_gather(&k.value) || !k.views.is_empty() => GATHER,
        // A matmul fused into its reader: the dots are the kernel's work.
        None if has_dot(&k.value) => MATMUL,
        None if trans > 0.0 => TRANSCENDENTAL,
        None => ELEMENTWISE,
    };
    (class, trans)
}

/// A product of two operands that both load (a matmul's or a GEMV's inner term, under casts).
fn is_product(e: &Expr) -> bool {
    match e {
        Expr::Cast(_, a) => is_product(a),
        Expr::Binary(Binary::Mul, _, _, a, b) => loads(a) && loads(b),
        _ => false,
    }
}

fn loads(e: &Expr) -> bool {
    match e {
        Expr::Load { .. } | Expr::Gather { .. } | Expr::Dot(_) => true,
        Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => false,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => loads(a),
        Expr::Binary(_, _, _, a, b) => loads(a) || loads(b),
        Expr::Where(c, a, b) => loads(c) || loads(a) || loads(b),
    }
}

fn has_dot(e: &Expr) -> bool {
    let mut dots = Vec::new();
    crate::lower::kernel::dot_reads(e, &mut dots);
    !dots.is_empty()
}

fn has_gather(e: &Expr) -> bool {
    match e {
        Expr::Gather { .. } => true,
        Expr::Load { .. } | Expr::Dot(_) | Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => false,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => has_gather(a),
        Expr::Binary(_, _, _, a, b) => has_gather(a) || has_gather(b),
        Expr::Where(c, a, b) => has_gather(c) || has_gather(a) || has_gather(b),
    }
}
