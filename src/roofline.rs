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
//!   variables), and the smaller count is kept ([`kernel_transcendentals`]). Ops the host runs (fallbacks) are not counted; an op that two kernels both compute counts twice.
//! - The bound is `max(bytes / stream_bytes_per_s, transcendentals * transcendental_s)`: memory and arithmetic overlap, and
//!   launches cost nothing.

use std::collections::BTreeSet;

use crate::cost::Profile;
use crate::lower::index::{Atom, Idx};
use crate::lower::kernel::{Expr, Kernel};
use crate::lower::{How, Plan};
use crate::tensor::ops::Binary;
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
            How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                times[i] * kernel_transcendentals(&plan.kernels[*k])
            }
            _ => 0.0,
        })
        .sum()
}

/// Transcendental elements one launch of a kernel computes, each op counted at the size of what it depends on. An
/// elementwise kernel also counts piece by piece ([`crate::lower::specialize::pieces`]: the boxes of its domain in
/// which its selects are decided, so that a select counts only the arm each element takes) and the smaller count is
/// kept: the whole domain counts every arm of a select, the pieces count a broadcast operand once per piece.
pub fn kernel_transcendentals(k: &Kernel) -> f64 {
    let mut total = 0.0;
    count(&k.value, &BTreeSet::new(), &mut total);
    if let Some(pieces) = crate::lower::specialize::pieces(k) {
        let mut by_piece = 0.0;
        for p in &pieces {
            count(&p.value, &BTreeSet::new(), &mut by_piece);
        }
        return total.min(by_piece);
    }
    if let Some((_, e)) = &k.epilogue {
        // The reduced value varies over every output dim.
        let domain: BTreeSet<(usize, i64)> =
            k.domain.iter().enumerate().filter(|(_, &n)| n > 1).map(|(v, &n)| (v, n as i64)).collect();
        count(e, &domain, &mut total);
    }
    total
}

fn is_transcendental(e: &Expr) -> bool {
    match e {
        Expr::Unary(op, _, _) => crate::ir::OpName::of_unary(*op).transcendental(),
        // A power by a small integer constant is a few multiplications.
        Expr::Binary(Binary::Pow, _, _, _, b) => !matches!(**b, Expr::Const(c, _) if c == c.trunc() && c.abs() <= 4.0),
        Expr::Binary(Binary::Atan2, ..) => true,
        _ => false,
    }
}

/// Adds the transcendental elements of `e`'s subtree to `total`; returns the loop variables (with extents) `e`
/// depends on. `acc` is what [`Expr::Acc`] depends on.
fn count(e: &Expr, acc: &BTreeSet<(usize, i64)>, total: &mut f64) -> BTreeSet<(usize, i64)> {
    let mut vars = BTreeSet::new();
    match e {
        Expr::Load { at, .. } | Expr::Index(at) | Expr::NonNeg(at) => idx_vars(at, &mut vars),
        Expr::Const(..) => {}
        Expr::Acc(_) => vars.extend(acc.iter().copied()),
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => vars = count(a, acc, total),
        Expr::Binary(_, _, _, a, b) => {
            vars = count(a, acc, total);
            vars.extend(count(b, acc, total));
        }
        Expr::Where(c, a, b) => {
            vars = count(c, acc, total);
            vars.extend(count(a, acc, total));
            vars.extend(count(b, acc, total));
        }
        Expr::Gather { at, index, .. } => {
            idx_vars(at, &mut vars);
            vars.extend(count(index, acc, total));
        }
        Expr::Dot(d) => {
            idx_vars(&d.a_at, &mut vars);
            idx_vars(&d.b_at, &mut vars);
        }
    }
    if is_transcendental(e) {
        *total += vars.iter().map(|&(_, n)| n as f64).product::<f64>();
    }
    vars
}

fn idx_vars(i: &Idx, out: &mut BTreeSet<(usize, i64)>) {
    for a in i.terms.keys() {
        atom_vars(a, out);
    }
}

fn atom_vars(a: &Atom, out: &mut BTreeSet<(usize, i64)>) {
    match a {
        Atom::Var(v, n) => {
            out.insert((*v, *n));
        }
        Atom::Param(_) => {}
        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => idx_vars(x, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::ops::Unary;

    fn load(vars: &[(usize, usize)]) -> Expr {
        let mut at = Idx::constant(0);
        for &(v, n) in vars {
            at = at.add(&Idx::var(v, n));
        }
        Expr::Load { arg: 1, at, dtype: DType::F32 }
    }

    fn kernel(domain: Vec<usize>, value: Expr) -> Kernel {
        Kernel {
            name: "k".into(),
            domain,
            reduce: None,
            value,
            epilogue: None,
            store: Idx::constant(0),
            out_dtype: DType::F32,
            args: vec![DType::F32, DType::F32],
            params: 0,
            views: Vec::new(),
            in_place: false,
        }
    }

    #[test]
    fn a_transcendental_counts_at_the_size_of_what_it_reads() {
        // exp of a row vector broadcast over 8 rows: 16 exps, not 128; the add counts nothing.
        let e = Expr::Unary(Unary::Exp, DType::F32, Box::new(load(&[(1, 16)])));
        let add = Expr::Binary(Binary::Add, DType::F32, DType::F32, Box::new(e), Box::new(load(&[(0, 8), (1, 16)])));
        assert_eq!(kernel_transcendentals(&kernel(vec![8, 16], add.clone())), 16.0);
        // tanh over the sum: every point.
        let t = Expr::Unary(Unary::Tanh, DType::F32, Box::new(add));
        assert_eq!(kernel_transcendentals(&kernel(vec![8, 16], t)), 16.0 + 128.0);
        // x ** 2 is not transcendental, x ** 0.5 is.
        let sq = |c: f64| {
            Expr::Binary(
                Binary::Pow,
                DType::F32,
                DType::F32,
                Box::new(load(&[(0, 8)])),
                Box::new(Expr::Const(c, DType::F32)),
            )
        };
        assert_eq!(kernel_transcendentals(&kernel(vec![8], sq(2.0))), 0.0);
        assert_eq!(kernel_transcendentals(&kernel(vec![8], sq(0.5))), 8.0);
    }

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
