//! Specialization of an elementwise kernel's loop nest: the domain is cut into boxes ("pieces") in each of which
//! every condition on the loop variables is decided, and merged dims are split back into loops, so that each
//! element evaluates only its own expression and index arithmetic needs no division.
//!
//! A write through a view is planned as a predicated select over its buffer (`where(i4 < 2, f(x), x)`); a `cat`
//! selects among its operands by position; a flattened view divides its position by the merged dims' sizes. Here,
//! a condition that compares an affine form of one loop variable with a constant splits that variable's range where
//! the condition changes; in each piece the condition is a constant and its select folds away. A division or modulo
//! of a variable by a factor of its extent splits the variable into two loops (`i = 10 * h + l`), after which it
//! simplifies ([`Idx::subst`]). Both repeat until nothing changes or the budget of pieces is spent. Every piece
//! computes exactly what the kernel computes at its points, and the pieces cover the domain once.

use super::index::{Atom, Idx};
use super::kernel::{Expr, Kernel};
use crate::tensor::ops::{Binary, Unary};
use crate::tensor::DType;

/// One box of a kernel's domain: a loop nest over variables `0..extents.len()` (outermost first), storing `value`
/// at `store`. A variable of extent 1 appears in no expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Piece {
    pub extents: Vec<usize>,
    pub value: Expr,
    pub store: Idx,
    /// A reduction's extents: its variables follow the piece's own (`extents.len()..`), and only the piece's
    /// are split.
    pub reduce: Vec<usize>,
    /// A reduction's epilogue, as in [`Kernel::epilogue`].
    pub epilogue: Option<Expr>,
}

impl Piece {
    /// The kernel that computes this piece alone (same arguments, output and views; the piece's loop nest).
    pub fn kernel(&self, k: &Kernel) -> Kernel {
        let mut out = k.clone();
        out.domain = self.extents.clone();
        out.value = self.value.clone();
        out.store = self.store.clone();
        if let (Some((d, _)), Some(e)) = (&k.epilogue, &self.epilogue) {
            out.epilogue = Some((*d, e.clone()));
        }
        out
    }
}

/// `k` with domain variable `v` cut into runs of at most `run` values, one kernel each (the same arguments, output
/// and reduction; each run's variable counts from 0 and reads and stores at its offset): the C backend's long rows.
pub fn runs(k: &Kernel, v: usize, run: usize) -> Vec<Kernel> {
    let p = Piece {
        extents: k.domain.clone(),
        value: k.value.clone(),
        store: k.store.clone(),
        reduce: k.reduce.as_ref().map_or(Vec::new(), |r| r.extents.clone()),
        epilogue: k.epilogue.as_ref().map(|(_, e)| e.clone()),
    };
    let n = k.domain[v];
    (0..n).step_by(run.max(1)).map(|lo| restrict(&p, v, lo, (lo + run).min(n)).kernel(k)).collect()
}

/// At most this many pieces per kernel (each is a loop nest in the source). A `cat` of a recurrence's 100 steps
/// (the ESN's `torch.cat` of its states) is 100 pieces, each a copy; under the budget (24 before) it stayed one
/// nest that tried every operand's position per element: 2.0 ms for 200000 elements, 0.24 ms in pieces.
const MAX_PIECES: usize = 128;
/// At most this many refinements of one piece.
const MAX_DEPTH: usize = 16;

/// The pieces of a kernel, or `None` for an empty domain. A reduction's pieces split its output domain only.
pub fn pieces(k: &Kernel) -> Option<Vec<Piece>> {
    let reduce = k.reduce.as_ref().map_or(Vec::new(), |r| r.extents.clone());
    if k.domain.contains(&0) || reduce.contains(&0) {
        return None;
    }
    let first = Piece {
        extents: k.domain.clone(),
        value: simplify(&k.value),
        store: k.store.clone(),
        reduce,
        epilogue: k.epilogue.as_ref().map(|(_, e)| simplify(e)),
    };
    let mut out = Vec::new();
    refine(first, 0, &mut (MAX_PIECES - 1), &mut out);
    Some(out)
}

/// Refines `p` into `out`; `spare` is how many more pieces the kernel may have.
fn refine(p: Piece, depth: usize, spare: &mut usize, out: &mut Vec<Piece>) {
    if depth < MAX_DEPTH {
        if let Some((v, cuts)) = split_points(&p) {
            if cuts.len() <= *spare {
                *spare -= cuts.len();
                let mut lo = 0;
                for &hi in cuts.iter().chain(std::iter::once(&p.extents[v])) {
                    refine(restrict(&p, v, lo, hi), depth + 1, spare, out);
                    lo = hi;
                }
                return;
            }
        } else if let Some((v, d)) = delinearize_candidate(&p) {
            refine(delinearize(&p, v, d), depth + 1, spare, out);
            return;
        }
    }
    out.push(p);
}

/// Substitutes every domain variable `u` of `p` by `f(u)` in its value, store and epilogue (a reduction's
/// variables move to follow the new `extents`), and simplifies.
fn substitute(p: &Piece, extents: Vec<usize>, f: &dyn Fn(usize) -> Idx) -> Piece {
    let (old, new) = (p.extents.len(), extents.len());
    let g = |u: usize| if u < old { f(u) } else { Idx::var(u - old + new, p.reduce[u - old]) };
    Piece {
        value: simplify(&subst_expr(&p.value, &g)),
        store: p.store.subst(&g),
        epilogue: p.epilogue.as_ref().map(|e| simplify(&subst_expr(e, &g))),
        reduce: p.reduce.clone(),
        extents,
    }
}

/// `p` with variable `v` restricted to `[lo, hi)`.
fn restrict(p: &Piece, v: usize, lo: usize, hi: usize) -> Piece {
    let mut extents = p.extents.clone();
    extents[v] = hi - lo;
    let f = |u: usize| {
        if u == v {
            Idx::var(v, hi - lo).add(&Idx::constant(lo as i64))
        } else {
            Idx::var(u, p.extents[u])
        }
    };
    substitute(p, extents.clone(), &f)
}

/// `p` with variable `v` (of extent `n`, a multiple of `d`) split into an outer variable of extent `n / d` and an
/// inner one of extent `d`: `v = d * outer + inner`.
fn delinearize(p: &Piece, v: usize, d: usize) -> Piece {
    let n = p.extents[v];
    let mut extents = p.extents.clone();
    extents[v] = n / d;
    extents.insert(v + 1, d);
    let f = |u: usize| match u.cmp(&v) {
        std::cmp::Ordering::Less => Idx::var(u, p.extents[u]),
        std::cmp::Ordering::Equal => Idx::var(v, n / d).scale(d as i64).add(&Idx::var(v + 1, d)),
        std::cmp::Ordering::Greater => Idx::var(u + 1, p.extents[u]),
    };
    substitute(p, extents.clone(), &f)
}

/// The outermost variable that a condition of `p` splits, with the points (in `(0, extent)`, increasing) where
/// the condition changes.
fn split_points(p: &Piece) -> Option<(usize, Vec<usize>)> {
    let mut found: Vec<(usize, usize)> = Vec::new();
    let mut see = |d: &Idx, op: Binary| {
        let [(Atom::Var(v, n), &k)] = d.terms.iter().collect::<Vec<_>>()[..] else { return };
        if *v >= p.extents.len() {
            return;
        }
        let holds = |x: i64| compare(op, k * x + d.c);
        let first = holds(0);
        // The condition on an affine form of one variable is monotone (or, for == and !=, true at one point).
        let mut cuts = Vec::new();
        if matches!(op, Binary::Eq | Binary::Ne) {
            if (-d.c) % k == 0 {
                let x = -d.c / k;
                cuts.extend([x, x + 1]);
            }
        } else {
            let t = (-d.c) as f64 / k as f64;
            let c = t.floor() as i64;
            cuts.extend((c - 1..=c + 2).filter(|&x| x > 0 && x < *n && holds(x) != first && holds(x - 1) == first));
        }
        found.extend(cuts.into_iter().filter(|&x| x > 0 && x < *n).map(|x| (*v, x as usize)));
    };
    conditions(&p.value, &mut see);
    if let Some(e) = &p.epilogue {
        conditions(e, &mut see);
    }
    let v = found.iter().map(|&(v, _)| v).min()?;
    let mut cuts: Vec<usize> = found.into_iter().filter(|&(u, _)| u == v).map(|(_, x)| x).collect();
    cuts.sort_unstable();
    cuts.dedup();
    Some((v, cuts))
}

fn compare(op: Binary, x: i64) -> bool {
    match op {
        Binary::Lt => x < 0,
        Binary::Le => x <= 0,
        Binary::Gt => x > 0,
        Binary::Ge => x >= 0,
        Binary::Eq => x == 0,
        Binary::Ne => x != 0,
        _ => unreachable!("not a comparison"),
    }
}

/// Calls `f(a - b, op)` for every comparison `a op b` of integer indices in `e`, and `f(i, >=)` for `NonNeg(i)`.
fn conditions(e: &Expr, f: &mut dyn FnMut(&Idx, Binary)) {
    match e {
        Expr::Binary(op, compute, _, a, b) if is_comparison(*op) && !compute.is_float() => {
            if let (Some(x), Some(y)) = (as_idx(a), as_idx(b)) {
                f(&x.add(&y.scale(-1)), *op);
            }
        }
        Expr::NonNeg(i) => f(i, Binary::Ge),
        _ => {}
    }
    for c in children(e) {
        conditions(c, f);
    }
}

/// A variable to split into two loops, and the factor: the innermost one whose division or modulo by a proper
/// divisor of its extent appears in `p`.
fn delinearize_candidate(p: &Piece) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    let mut see = |i: &Idx| {
        atoms(i, &mut |a| {
            let (Atom::Div(x, d) | Atom::Mod(x, d)) = a else { return };
            for (b, &k) in &x.terms {
                if let Atom::Var(v, n) = b {
                    let domain = *v < p.extents.len();
                    if domain && k == 1 && *d > 1 && *d < *n && n % d == 0 && best.is_none_or(|(u, _)| *v > u) {
                        best = Some((*v, *d as usize));
                    }
                }
            }
        })
    };
    see(&p.store);
    indices(&p.value, &mut see);
    if let Some(e) = &p.epilogue {
        indices(e, &mut see);
    }
    best
}

/// Every atom of `i`, nested ones included.
fn atoms(i: &Idx, f: &mut dyn FnMut(&Atom)) {
    for a in i.terms.keys() {
        f(a);
        match a {
            Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => atoms(x, f),
            Atom::Var(..) | Atom::Param(_) => {}
        }
    }
}

/// Every index form in `e`.
fn indices(e: &Expr, f: &mut dyn FnMut(&Idx)) {
    match e {
        Expr::Load { at, .. } | Expr::Local { at, .. } | Expr::Gather { at, .. } => f(at),
        Expr::Index(i) | Expr::NonNeg(i) => f(i),
        Expr::Dot(d) => {
            f(&d.a_at);
            f(&d.b_at);
        }
        _ => {}
    }
    for c in children(e) {
        indices(c, f);
    }
}

fn children(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::Load { .. }
        | Expr::Local { .. }
        | Expr::Dot(_)
        | Expr::Const(..)
        | Expr::Index(_)
        | Expr::NonNeg(_)
        | Expr::Acc(_) => vec![],
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => vec![a],
        Expr::Gather { index, .. } => vec![index],
        Expr::Binary(_, _, _, a, b) => vec![a, b],
        Expr::Where(c, a, b) => vec![c, a, b],
    }
}

fn is_comparison(op: Binary) -> bool {
    matches!(op, Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge | Binary::Eq | Binary::Ne)
}

/// `e` as an index form, where it is one: an index, an integer constant, or an integer cast of one.
fn as_idx(e: &Expr) -> Option<Idx> {
    match e {
        Expr::Index(i) => Some(i.clone()),
        Expr::Const(v, d) if !d.is_float() && *d != DType::Bool => Some(Idx::constant(*v as i64)),
        Expr::Cast(d, a) if matches!(d, DType::I64) => as_idx(a),
        _ => None,
    }
}

fn subst_expr(e: &Expr, f: &dyn Fn(usize) -> Idx) -> Expr {
    let s = |a: &Expr| Box::new(subst_expr(a, f));
    match e {
        Expr::Load { arg, at, dtype } => Expr::Load { arg: *arg, at: at.subst(f), dtype: *dtype },
        Expr::Local { slot, at, dtype } => Expr::Local { slot: *slot, at: at.subst(f), dtype: *dtype },
        Expr::Dot(d) => Expr::Dot(Box::new(d.map(&mut |i| i.subst(f)))),
        Expr::Const(..) | Expr::Acc(_) => e.clone(),
        Expr::Index(i) => Expr::Index(i.subst(f)),
        Expr::NonNeg(i) => Expr::NonNeg(i.subst(f)),
        Expr::Unary(op, d, a) => Expr::Unary(*op, *d, s(a)),
        Expr::Binary(op, c, d, a, b) => Expr::Binary(*op, *c, *d, s(a), s(b)),
        Expr::Where(c, a, b) => Expr::Where(s(c), s(a), s(b)),
        Expr::Cast(d, a) => Expr::Cast(*d, s(a)),
        Expr::Gather { arg, at, index, stride, extent, dtype } => Expr::Gather {
            arg: *arg,
            at: at.subst(f),
            index: s(index),
            stride: *stride,
            extent: *extent,
            dtype: *dtype,
        },
    }
}

/// A boolean constant, where `e` is one.
fn as_bool(e: &Expr) -> Option<bool> {
    match e {
        Expr::Const(v, DType::Bool) => Some(*v != 0.0),
        _ => None,
    }
}

fn boolean(b: bool) -> Expr {
    Expr::Const(b as u8 as f64, DType::Bool)
}

/// Folds what the loop variables' ranges decide: comparisons of indices, `NonNeg`, boolean and/or/not of
/// constants, and selects on a constant.
fn simplify(e: &Expr) -> Expr {
    match e {
        Expr::NonNeg(i) => match i.range() {
            Some((lo, _)) if lo >= 0 => boolean(true),
            Some((_, hi)) if hi < 0 => boolean(false),
            _ => e.clone(),
        },
        Expr::Binary(op, compute, out, a, b) => {
            let (a, b) = (simplify(a), simplify(b));
            if is_comparison(*op) && !compute.is_float() {
                if let (Some(x), Some(y)) = (as_idx(&a), as_idx(&b)) {
                    if let Some((lo, hi)) = x.add(&y.scale(-1)).range() {
                        if compare(*op, lo) == compare(*op, hi) && monotone_between(*op, lo, hi) {
                            return boolean(compare(*op, lo));
                        }
                    }
                }
            }
            if *out == DType::Bool && *compute == DType::Bool {
                match (op, as_bool(&a), as_bool(&b)) {
                    (Binary::BitAnd | Binary::Mul | Binary::Minimum, Some(false), _)
                    | (Binary::BitAnd | Binary::Mul | Binary::Minimum, _, Some(false)) => return boolean(false),
                    (Binary::BitAnd | Binary::Mul | Binary::Minimum, Some(true), _) => return b,
                    (Binary::BitAnd | Binary::Mul | Binary::Minimum, _, Some(true)) => return a,
                    (Binary::BitOr | Binary::Add | Binary::Maximum, Some(true), _)
                    | (Binary::BitOr | Binary::Add | Binary::Maximum, _, Some(true)) => return boolean(true),
                    (Binary::BitOr | Binary::Add | Binary::Maximum, Some(false), _) => return b,
                    (Binary::BitOr | Binary::Add | Binary::Maximum, _, Some(false)) => return a,
                    _ => {}
                }
            }
            Expr::Binary(*op, *compute, *out, Box::new(a), Box::new(b))
        }
        Expr::Unary(Unary::LogicalNot, d, a) => {
            let a = simplify(a);
            match as_bool(&a) {
                Some(v) if *d == DType::Bool => boolean(!v),
                _ => Expr::Unary(Unary::LogicalNot, *d, Box::new(a)),
            }
        }
        Expr::Where(c, a, b) => {
            let c = simplify(c);
            match as_bool(&c) {
                Some(v) => {
                    let want = a.dtype();
                    let pick = simplify(if v { a } else { b });
                    if pick.dtype() == want {
                        pick
                    } else {
                        Expr::Cast(want, Box::new(pick))
                    }
                }
                None => Expr::Where(Box::new(c), Box::new(simplify(a)), Box::new(simplify(b))),
            }
        }
        Expr::Cast(DType::Bool, a) => {
            let a = simplify(a);
            match a {
                Expr::Const(v, _) => boolean(v != 0.0),
                _ => Expr::Cast(DType::Bool, Box::new(a)),
            }
        }
        Expr::Unary(op, d, a) => Expr::Unary(*op, *d, Box::new(simplify(a))),
        Expr::Cast(d, a) => Expr::Cast(*d, Box::new(simplify(a))),
        Expr::Gather { arg, at, index, stride, extent, dtype } => Expr::Gather {
            arg: *arg,
            at: at.clone(),
            index: Box::new(simplify(index)),
            stride: *stride,
            extent: *extent,
            dtype: *dtype,
        },
        Expr::Load { .. } | Expr::Local { .. } | Expr::Dot(_) | Expr::Const(..) | Expr::Index(_) | Expr::Acc(_) => {
            e.clone()
        }
    }
}

/// Whether `x op 0` has the same truth over all of `[lo, hi]` when it has it at both ends (`!=` and `==` do not
/// when 0 lies strictly inside).
fn monotone_between(op: Binary, lo: i64, hi: i64) -> bool {
    !matches!(op, Binary::Eq | Binary::Ne) || lo > 0 || hi < 0 || lo == hi
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn load(at: Idx) -> Expr {
        Expr::Load { arg: 1, at, dtype: DType::F32 }
    }

    /// A one-output elementwise f32 kernel over `domain` (shared with `coalesce`'s tests).
    pub(in crate::lower) fn kernel(domain: Vec<usize>, value: Expr, store: Idx) -> Kernel {
        Kernel {
            name: "k0".into(),
            domain,
            reduce: None,
            value,
            epilogue: None,
            store,
            out_dtype: DType::F32,
            args: vec![DType::F32, DType::F32],
            params: 0,
            views: vec![],
            in_place: false,
            flat: false,
            pre: Vec::new(),
        }
    }

    #[test]
    fn a_write_through_a_slice_computes_only_its_elements() {
        // where(i1 < 2, exp(x), x) over [4, 85]: two pieces, neither with a select.
        let at = Idx::var(0, 4).scale(85).add(&Idx::var(1, 85));
        let cond = Expr::Binary(
            Binary::Lt,
            DType::I64,
            DType::Bool,
            Box::new(Expr::Index(Idx::var(1, 85))),
            Box::new(Expr::Const(2.0, DType::I64)),
        );
        let value = Expr::Where(
            Box::new(cond),
            Box::new(Expr::Unary(Unary::Exp, DType::F32, Box::new(load(at.clone())))),
            Box::new(load(at.clone())),
        );
        let ps = pieces(&kernel(vec![4, 85], value, at)).unwrap();
        assert_eq!(ps.len(), 2);
        assert_eq!(ps[0].extents, vec![4, 2]);
        assert_eq!(ps[1].extents, vec![4, 83]);
        assert!(matches!(ps[0].value, Expr::Unary(Unary::Exp, ..)));
        let second = Idx::var(0, 4).scale(85).add(&Idx::var(1, 83)).add(&Idx::constant(2));
        assert_eq!(ps[1].value, load(second.clone()));
        assert_eq!(ps[1].store, second);
    }

    #[test]
    fn a_flattened_view_becomes_loops_without_division() {
        // [300] read through a [3, 10, 10] layout permuted: x[(i / 100) * 7 + ((i / 10) % 10) * 50 + i % 10].
        let i = Idx::var(0, 300);
        let at = i.div(100).scale(7).add(&i.div(10).modulo(10).scale(50)).add(&i.modulo(10));
        let ps = pieces(&kernel(vec![300], load(at), Idx::var(0, 300))).unwrap();
        assert_eq!(ps.len(), 1);
        assert_eq!(ps[0].extents, vec![3, 10, 10]);
        let Expr::Load { at, .. } = &ps[0].value else { panic!("{:?}", ps[0].value) };
        assert!(at.terms.keys().all(|a| matches!(a, Atom::Var(..))), "{}", at.render());
        assert_eq!(ps[0].store.render(), "(100*i0 + 10*i1 + i2)");
    }

    #[test]
    fn an_equality_splits_out_one_point_and_the_budget_bounds_the_pieces() {
        let eq = |x: i64| {
            Expr::Binary(
                Binary::Eq,
                DType::I64,
                DType::Bool,
                Box::new(Expr::Index(Idx::var(0, 100))),
                Box::new(Expr::Const(x as f64, DType::I64)),
            )
        };
        let one =
            Expr::Where(Box::new(eq(7)), Box::new(Expr::Const(1.0, DType::F32)), Box::new(load(Idx::var(0, 100))));
        let ps = pieces(&kernel(vec![100], one, Idx::var(0, 100))).unwrap();
        assert_eq!(ps.iter().map(|p| p.extents[0]).collect::<Vec<_>>(), vec![7, 1, 92]);
        assert_eq!(ps[1].value, Expr::Const(1.0, DType::F32));
        // A hundred equalities would make 201 pieces: the budget stops the splitting, and every point is still
        // covered once.
        let mut many = load(Idx::var(0, 100));
        for x in 0..100 {
            many = Expr::Where(Box::new(eq(x)), Box::new(Expr::Const(x as f64, DType::F32)), Box::new(many));
        }
        let ps = pieces(&kernel(vec![100], many, Idx::var(0, 100))).unwrap();
        assert!(ps.len() <= MAX_PIECES, "{} pieces", ps.len());
        assert_eq!(ps.iter().map(|p| p.extents[0]).sum::<usize>(), 100);
    }
}
