//! What a kernel's work is, for the cost model and the roofline: its class ([`crate::cost::class::CLASSES`],
//! priced class by class by a profile) and the transcendental elements one launch computes.

use std::collections::BTreeSet;

use super::index::{Atom, Idx};
use super::kernel::{Expr, Kernel, RedOp};
use crate::cost::class::{ELEMENTWISE, GATHER, MATMUL, REDUCTION, TRANSCENDENTAL};
use crate::tensor::ops::Binary;

/// What one launch of a kernel does, as the cost model counts it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Work {
    /// Its class ([`crate::cost::class::CLASSES`]).
    pub class: usize,
    /// The transcendental elements it computes ([`transcendentals`]).
    pub transcendentals: f64,
    /// The ops it computes: [`Kernel::traffic`]'s count, or where fewer, the pieces' ([`ops`]).
    pub ops: f64,
}

/// A kernel's class, the transcendental elements and the ops one launch computes.
pub fn classify(k: &Kernel) -> Work {
    let pieces = super::specialize::pieces(k);
    let trans = transcendentals_of(k, pieces.as_deref());
    let ops = ops(k, pieces.as_deref());
    let class = match &k.reduce {
        Some(r) if r.op == RedOp::Sum && is_product(&k.value) && k.domain.iter().product::<usize>() > 1 => MATMUL,
        Some(_) => REDUCTION,
        None if has_gather(&k.value) || !k.views.is_empty() => GATHER,
        // A matmul fused into its reader: the dots are the kernel's work.
        None if has_dot(&k.value) => MATMUL,
        None if trans > 0.0 => TRANSCENDENTAL,
        None => ELEMENTWISE,
    };
    Work { class, transcendentals: trans, ops }
}

/// The ops one launch of `k` computes, counted as [`Kernel::traffic`] does (each op of the value once per point,
/// the epilogue's once per output, each pre once), or piece by piece where that is fewer: over its whole domain a
/// select counts every arm at every point, but each piece computes only the arms its points take (a reduction's
/// pieces split its output domain). A `cat` of several levels, or a buffer written through several views, is a
/// chain of selects that its pieces take apart. An ordered kernel (a scatter) is not rendered by pieces: its count
/// is the whole domain's. Nor is any kernel on CUDA, where this count is too low where selects remain.
fn ops(k: &Kernel, pieces: Option<&[super::specialize::Piece]>) -> f64 {
    let (_, whole) = k.traffic(std::iter::empty());
    // An ordered kernel runs as one nest (`c::render_kernel`), every arm at every point.
    let Some(ps) = pieces.filter(|_| !k.ordered()) else { return whole };
    let pre: f64 = k.pre.iter().map(|p| p.traffic(std::iter::empty()).1).sum();
    let by_piece: f64 = ps
        .iter()
        .map(|p| {
            let outputs = p.extents.iter().product::<usize>() as f64;
            let points = outputs * p.reduce.iter().product::<usize>() as f64;
            points * p.value.counts().1 as f64 + p.epilogue.as_ref().map_or(0.0, |e| outputs * e.counts().1 as f64)
        })
        .sum();
    whole.min(by_piece + pre)
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
        Expr::Load { .. } | Expr::Local { .. } | Expr::Gather { .. } | Expr::Dot(_) => true,
        Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => false,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => loads(a),
        Expr::Binary(_, _, _, a, b) => loads(a) || loads(b),
        Expr::Where(c, a, b) => loads(c) || loads(a) || loads(b),
    }
}

fn has_dot(e: &Expr) -> bool {
    let mut dots = Vec::new();
    super::kernel::dot_reads(e, &mut dots);
    !dots.is_empty()
}

/// Whether `e` reads a buffer at positions read from another (`Expr::Gather`, or a load whose position holds an
/// [`Atom::Load`]: `torch.gather` and gathers with several index tensors).
fn has_gather(e: &Expr) -> bool {
    match e {
        Expr::Gather { .. } => true,
        Expr::Load { at, .. } => loads_index(at),
        Expr::Dot(_) | Expr::Local { .. } | Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => false,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => has_gather(a),
        Expr::Binary(_, _, _, a, b) => has_gather(a) || has_gather(b),
        Expr::Where(c, a, b) => has_gather(c) || has_gather(a) || has_gather(b),
    }
}

/// Transcendental elements one launch of a kernel computes, each op counted at the size of what it depends on. An
/// elementwise kernel also counts piece by piece ([`super::specialize::pieces`]: the boxes of its domain in
/// which its selects are decided, so that a select counts only the arm each element takes) and the smaller count is
/// kept: the whole domain counts every arm of a select, the pieces count a broadcast operand once per piece.
pub fn transcendentals(k: &Kernel) -> f64 {
    transcendentals_of(k, super::specialize::pieces(k).as_deref())
}

/// [`transcendentals`], given the kernel's pieces.
fn transcendentals_of(k: &Kernel, pieces: Option<&[super::specialize::Piece]>) -> f64 {
    // Each pre once per launch (as the C backend computes it).
    let mut total: f64 = k.pre.iter().map(transcendentals).sum();
    count(&k.value, &BTreeSet::new(), &mut total);
    if let Some(pieces) = pieces {
        let mut by_piece: f64 = k.pre.iter().map(transcendentals).sum();
        for p in pieces {
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
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Index(at) | Expr::NonNeg(at) => idx_vars(at, &mut vars),
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

fn loads_index(i: &Idx) -> bool {
    i.terms.keys().any(|a| match a {
        Atom::Load(..) => true,
        Atom::Var(..) | Atom::Param(_) => false,
        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) => loads_index(x),
    })
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
    use crate::tensor::DType;

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
            flat: false,
            pre: Vec::new(),
        }
    }

    #[test]
    fn a_transcendental_counts_at_the_size_of_what_it_reads() {
        // exp of a row vector broadcast over 8 rows: 16 exps, not 128; the add counts nothing.
        let e = Expr::Unary(Unary::Exp, DType::F32, Box::new(load(&[(1, 16)])));
        let add = Expr::Binary(Binary::Add, DType::F32, DType::F32, Box::new(e), Box::new(load(&[(0, 8), (1, 16)])));
        assert_eq!(transcendentals(&kernel(vec![8, 16], add.clone())), 16.0);
        // tanh over the sum: every point.
        let t = Expr::Unary(Unary::Tanh, DType::F32, Box::new(add));
        assert_eq!(transcendentals(&kernel(vec![8, 16], t)), 16.0 + 128.0);
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
        assert_eq!(transcendentals(&kernel(vec![8], sq(2.0))), 0.0);
        assert_eq!(transcendentals(&kernel(vec![8], sq(0.5))), 8.0);
    }
}
