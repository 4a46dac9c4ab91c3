//! Coalescing of a kernel's loops: two adjacent domain variables that every index form moves together, as one
//! row-major variable would, become one loop. A softmax over the channels of an NCHW tensor read as
//! `[H, W, anchors, classes]` loops over `i1 < 20` and `i2 < 20` at offsets `20 * i1 + i2` (input) and
//! `120 * i1 + 6 * i2` (output); as one loop of 400 the C compiler vectorizes a row of 400 pixels instead of 20.
//!
//! The merge is exact: the points run in the same order (row-major over the domain), each computes the same value
//! and stores it at the same offset, because every form's value at `(i_v, i_w)` equals its value at
//! `p = i_v * n_w + i_w`. A variable that occurs inside a division, modulo, view inverse or index load is never
//! merged (its form is not linear in it).

use super::index::{Atom, Idx};
use super::kernel::{Expr, Kernel};

/// `k` with its adjacent domain loops merged where every index form allows it (see the module doc). The merged
/// variable keeps the inner one's number, with the product of both extents; the outer one's extent becomes 1
/// (it then appears in no expression). A reduction's variables are left alone.
pub fn coalesce(k: &Kernel) -> Kernel {
    let mut k = k.clone();
    loop {
        let live: Vec<usize> = (0..k.domain.len()).filter(|&v| k.domain[v] > 1).collect();
        let Some(pair) = live.windows(2).find(|p| mergeable(&k, p[0], p[1])) else {
            return k;
        };
        let (v, w) = (pair[0], pair[1]);
        let n = (k.domain[v] * k.domain[w]) as i64;
        let f = |i: &Idx| merge(i, v, w, n);
        k.value = map_indices(&k.value, &f);
        k.store = f(&k.store);
        if let Some((d, e)) = &k.epilogue {
            k.epilogue = Some((*d, map_indices(e, &f)));
        }
        k.domain[w] *= k.domain[v];
        k.domain[v] = 1;
    }
}

/// The coefficient of loop variable `v` among `i`'s top-level terms (0 where it has none).
fn coef(i: &Idx, v: usize) -> i64 {
    i.terms.iter().find_map(|(a, &c)| matches!(a, Atom::Var(u, _) if *u == v).then_some(c)).unwrap_or(0)
}

/// Whether `i` is linear in `v` and `w` with `coef(v) = coef(w) * n_w`, neither inside a nested form.
fn allows(i: &Idx, v: usize, w: usize, nw: i64) -> bool {
    let nested = i.terms.keys().any(|a| match a {
        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => {
            x.mentions(v) || x.mentions(w)
        }
        Atom::Var(..) | Atom::Param(_) => false,
    });
    !nested && coef(i, w).checked_mul(nw) == Some(coef(i, v))
}

/// Whether every index form of `k` (store, value, epilogue) allows merging `v` into `w`.
fn mergeable(k: &Kernel, v: usize, w: usize) -> bool {
    let nw = k.domain[w] as i64;
    let mut ok = allows(&k.store, v, w, nw);
    let mut check = |i: &Idx| ok &= allows(i, v, w, nw);
    each_index(&k.value, &mut check);
    if let Some((_, e)) = &k.epilogue {
        each_index(e, &mut check);
    }
    ok
}

/// `i` with `v` merged into `w` (the merged variable of extent `n`): `w`'s term keeps its coefficient, `v`'s goes.
fn merge(i: &Idx, v: usize, w: usize, n: i64) -> Idx {
    let mut out = Idx::constant(i.c);
    for (a, &c) in &i.terms {
        match a {
            Atom::Var(u, _) if *u == v => {}
            Atom::Var(u, _) if *u == w => out = out.add(&Idx::atom(Atom::Var(w, n)).scale(c)),
            _ => out = out.add(&Idx::atom(a.clone()).scale(c)),
        }
    }
    out
}

/// Calls `f` on every index form of `e` (loads, gathers, index values, view tests).
fn each_index(e: &Expr, f: &mut dyn FnMut(&Idx)) {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } => f(at),
        Expr::Dot(d) => {
            f(&d.a_at);
            f(&d.b_at);
        }
        Expr::Gather { at, index, .. } => {
            f(at);
            each_index(index, f);
        }
        Expr::Index(i) | Expr::NonNeg(i) => f(i),
        Expr::Const(..) | Expr::Acc(_) => {}
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => each_index(a, f),
        Expr::Binary(_, _, _, a, b) => {
            each_index(a, f);
            each_index(b, f);
        }
        Expr::Where(c, a, b) => {
            each_index(c, f);
            each_index(a, f);
            each_index(b, f);
        }
    }
}

/// `e` with every index form `i` replaced by `f(i)`.
fn map_indices(e: &Expr, f: &dyn Fn(&Idx) -> Idx) -> Expr {
    let m = |a: &Expr| Box::new(map_indices(a, f));
    match e {
        Expr::Load { arg, at, dtype } => Expr::Load { arg: *arg, at: f(at), dtype: *dtype },
        Expr::Local { slot, at, dtype } => Expr::Local { slot: *slot, at: f(at), dtype: *dtype },
        Expr::Gather { arg, at, index, stride, extent, dtype } => {
            Expr::Gather { arg: *arg, at: f(at), index: m(index), stride: *stride, extent: *extent, dtype: *dtype }
        }
        Expr::Dot(d) => Expr::Dot(Box::new(d.map(&mut |i| f(i)))),
        Expr::Index(i) => Expr::Index(f(i)),
        Expr::NonNeg(i) => Expr::NonNeg(f(i)),
        Expr::Const(..) | Expr::Acc(_) => e.clone(),
        Expr::Unary(op, d, a) => Expr::Unary(*op, *d, m(a)),
        Expr::Cast(d, a) => Expr::Cast(*d, m(a)),
        Expr::Binary(op, c, d, a, b) => Expr::Binary(*op, *c, *d, m(a), m(b)),
        Expr::Where(c, a, b) => Expr::Where(m(c), m(a), m(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lower::specialize::tests::kernel;
    use crate::tensor::DType;

    fn lin(terms: &[(usize, usize, i64)]) -> Idx {
        terms.iter().fold(Idx::constant(0), |acc, &(v, n, c)| acc.add(&Idx::var(v, n).scale(c)))
    }

    #[test]
    fn pixels_of_a_permuted_tensor_become_one_loop() {
        // [20, 20, 6]: input at 20*i0 + i1 + 400*i2, output at 120*i0 + 6*i1 + i2.
        let value = Expr::Load { arg: 1, at: lin(&[(0, 20, 20), (1, 20, 1), (2, 6, 400)]), dtype: DType::F32 };
        let k = coalesce(&kernel(vec![20, 20, 6], value, lin(&[(0, 20, 120), (1, 20, 6), (2, 6, 1)])));
        assert_eq!(k.domain, vec![1, 400, 6]);
        assert_eq!(k.store, lin(&[(1, 400, 6), (2, 6, 1)]));
        let Expr::Load { at, .. } = &k.value else { panic!("a load") };
        assert_eq!(*at, lin(&[(1, 400, 1), (2, 6, 400)]));
    }

    #[test]
    fn a_contiguous_nest_becomes_one_loop_and_a_transpose_stays() {
        let value = Expr::Load { arg: 1, at: lin(&[(0, 4, 12), (1, 3, 4), (2, 4, 1)]), dtype: DType::F32 };
        let k = coalesce(&kernel(vec![4, 3, 4], value, lin(&[(0, 4, 12), (1, 3, 4), (2, 4, 1)])));
        assert_eq!(k.domain, vec![1, 1, 48]);
        // A transpose: the input moves by 1 along i0, 4 along i1: no pair is mergeable.
        let value = Expr::Load { arg: 1, at: lin(&[(0, 4, 1), (1, 3, 4)]), dtype: DType::F32 };
        let k = coalesce(&kernel(vec![4, 3], value, lin(&[(0, 4, 3), (1, 3, 1)])));
        assert_eq!(k.domain, vec![4, 3]);
    }

    #[test]
    fn a_variable_inside_a_division_is_not_merged() {
        let i = lin(&[(0, 4, 3), (1, 3, 1)]);
        let value = Expr::Index(i.div(2));
        let k = coalesce(&kernel(vec![4, 3], value.clone(), i));
        assert_eq!(k.domain, vec![4, 3]);
        assert_eq!(k.value, value);
    }
}
