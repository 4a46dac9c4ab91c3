//! Index arithmetic of kernels: affine forms over loop variables and launch parameters, with floor division and
//! modulo where a layout needs them, simplified so that common layouts need none.
//!
//! `Idx` is `c + sum(k * atom)`. Atoms are a loop variable (with its extent), a launch parameter (an integer term,
//! such as an offset that moves with a host loop), or a division / modulo of another form. Division by `C` of
//! `C * q + r` where `r` is known to lie in `[0, C)` is `q` (and the modulo is `r`), which removes the div/mod of
//! every view whose strides nest; what remains is rendered as C. A sum `k * m * (x / m) + k * (x % m)` is `k * x`
//! again (`Idx::add` recombines it), so a position unravelled into dims and ravelled back needs no division.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::fmt::Write;

/// The C integer type index arithmetic is rendered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    /// `int64_t`: any size.
    I64,
    /// `int` (32-bit), divisions and modulos of non-negative values as `unsigned` ones: for kernels whose every
    /// index value fits (see [`Idx::fits_i32`]); the variables must be declared `int` by the caller.
    I32,
}

thread_local! {
    static WIDTH: Cell<Width> = const { Cell::new(Width::I64) };
}

/// Runs `f` with [`Idx::render`] rendering in width `w` on this thread (restored afterwards, also on a panic), so
/// that renderers shared with the C backend (expressions, loop bodies) render a CUDA kernel's indices in the width
/// the CUDA layout chose for it without a width parameter on each of them.
pub fn with_width<R>(w: Width, f: impl FnOnce() -> R) -> R {
    struct Restore(Width);
    impl Drop for Restore {
        fn drop(&mut self) {
            WIDTH.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(WIDTH.with(|c| c.replace(w)));
    f()
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Atom {
    /// Loop variable `k` of the kernel, in `[0, extent)`.
    Var(usize, i64),
    /// Launch parameter `k` (an integer computed by the host), of unknown range.
    Param(usize),
    /// Floor division by a positive constant.
    Div(Box<Idx>, i64),
    /// Modulo (non-negative for non-negative operands) by a positive constant.
    Mod(Box<Idx>, i64),
    /// `vi<k>(x)`: the row-major position, within the shape of the kernel's view helper k (of n elements), of the
    /// element at offset x from the view's start; -1 when the view does not reach it.
    ViewInv(usize, Box<Idx>, i64),
    /// An index read at run time: element `at` of argument buffer `arg` (an integer index tensor), in
    /// `[-extent, extent)` where `wraps` (a negative index counts from the end), else in `[0, extent)`. The executor
    /// checks the index buffer's values before the launch, so the form lies in `[0, extent)`.
    Load(usize, Box<Idx>, i64, bool),
}

/// The ops a view inverse (`vi<k>(x)`) counts as in the cost model ([`Idx::ops`]). Uncounted, a kernel that writes a
/// buffer through a view and reads it back through the same view (`(p.t() * 3 - 7).contiguous()` as PyTorch lays
/// it out: the product keeps `p.t()`'s strides) was predicted cheaper than the kernel that reads `p.t()` directly
/// (its class, gather, prices no bytes), and ran 9.1 ms against 0.6 over [3000, 450] (one thread): about 7 ns per
/// element for its view inverses, where a simple op is priced near 0.1 ns.
pub const VIEW_INVERSE_OPS: usize = 16;

/// `c + sum(k * atom)`, with no zero coefficients and atoms sorted.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Idx {
    pub c: i64,
    pub terms: BTreeMap<Atom, i64>,
}

impl Idx {
    pub fn constant(c: i64) -> Idx {
        Idx { c, terms: BTreeMap::new() }
    }

    pub fn atom(a: Atom) -> Idx {
        let mut terms = BTreeMap::new();
        terms.insert(a, 1);
        Idx { c: 0, terms }
    }

    pub fn var(k: usize, extent: usize) -> Idx {
        if extent == 1 {
            return Idx::constant(0);
        }
        Idx::atom(Atom::Var(k, extent as i64))
    }

    pub fn add(&self, o: &Idx) -> Idx {
        let mut r = self.clone();
        r.c += o.c;
        for (a, k) in &o.terms {
            *r.terms.entry(a.clone()).or_insert(0) += k;
        }
        r.terms.retain(|_, k| *k != 0);
        r.recombine()
    }

    /// `k * m * floor(x / m) + k * (x mod m)` is `k * x` (floor division and a remainder in `[0, m)`): a position
    /// unravelled into dims and ravelled back (a reshape read at its own row-major position) is the position.
    fn recombine(mut self) -> Idx {
        let mods: Vec<(Idx, i64, i64)> = self
            .terms
            .iter()
            .filter_map(|(a, &k)| match a {
                Atom::Mod(x, m) => Some(((**x).clone(), *m, k)),
                _ => None,
            })
            .collect();
        for (x, m, k) in mods {
            let div = Atom::Div(Box::new(x.clone()), m);
            if k.checked_mul(m).is_some_and(|km| self.terms.get(&div) == Some(&km)) {
                self.terms.remove(&div);
                self.terms.remove(&Atom::Mod(Box::new(x.clone()), m));
                return self.add(&x.scale(k));
            }
        }
        self
    }

    /// The ops the cost model counts for computing this position: [`VIEW_INVERSE_OPS`] per view inverse in it
    /// (nested ones included). Sums, products, divisions and remainders by constants count nothing: they are
    /// strength-reduced and vectorize; a view inverse is a call with a division and a branch per dim of its view.
    pub fn ops(&self) -> usize {
        self.terms
            .keys()
            .map(|a| match a {
                Atom::Var(..) | Atom::Param(_) => 0,
                Atom::Div(x, _) | Atom::Mod(x, _) | Atom::Load(_, x, _, _) => x.ops(),
                Atom::ViewInv(_, x, _) => VIEW_INVERSE_OPS + x.ops(),
            })
            .sum()
    }

    pub fn scale(&self, k: i64) -> Idx {
        if k == 0 {
            return Idx::constant(0);
        }
        Idx { c: self.c * k, terms: self.terms.iter().map(|(a, c)| (a.clone(), c * k)).collect() }
    }

    pub fn as_const(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.c)
    }

    /// The range of values, where every atom's is known.
    pub fn range(&self) -> Option<(i64, i64)> {
        let (mut lo, mut hi) = (self.c, self.c);
        for (a, &k) in &self.terms {
            let (alo, ahi) = match a {
                Atom::Var(_, n) => (0, n - 1),
                Atom::Param(_) => return None,
                Atom::Div(x, d) => {
                    let (l, h) = x.range()?;
                    (l.div_euclid(*d), h.div_euclid(*d))
                }
                Atom::Mod(x, m) => match x.range() {
                    Some((l, h)) if l >= 0 && h < *m => (l, h),
                    _ => (0, m - 1),
                },
                Atom::ViewInv(_, _, n) => (-1, n - 1),
                Atom::Load(_, _, n, _) => (0, n - 1),
            };
            if k > 0 {
                lo += k * alo;
                hi += k * ahi;
            } else {
                lo += k * ahi;
                hi += k * alo;
            }
        }
        Some((lo, hi))
    }

    /// Splits into `d * q + r`, with `r` the terms whose coefficients `d` does not divide (and the constant's
    /// remainder).
    fn split(&self, d: i64) -> (Idx, Idx) {
        let mut q = Idx::constant(self.c.div_euclid(d));
        let mut r = Idx::constant(self.c.rem_euclid(d));
        for (a, &k) in &self.terms {
            if k % d == 0 {
                q.terms.insert(a.clone(), k / d);
            } else {
                r.terms.insert(a.clone(), k);
            }
        }
        (q, r)
    }

    /// `floor(self / d)` for `d > 0`.
    pub fn div(&self, d: i64) -> Idx {
        if d == 1 {
            return self.clone();
        }
        let (q, r) = self.split(d);
        match r.range() {
            Some((lo, hi)) if lo >= 0 && hi < d => return q,
            Some((lo, hi)) if lo.div_euclid(d) == hi.div_euclid(d) => return q.add(&Idx::constant(lo.div_euclid(d))),
            _ => {}
        }
        if let Some((y, g, _)) = r.nest(d) {
            return q.add(&y.div(d / g));
        }
        q.add(&Idx::atom(Atom::Div(Box::new(r), d)))
    }

    /// `self mod m` for `m > 0` (the result is in `[0, m)`).
    pub fn modulo(&self, m: i64) -> Idx {
        if m == 1 {
            return Idx::constant(0);
        }
        let (_, r) = self.split(m);
        match r.range() {
            Some((lo, hi)) if lo >= 0 && hi < m => return r,
            Some((lo, hi)) if lo.div_euclid(m) == hi.div_euclid(m) => {
                return r.add(&Idx::constant(-lo.div_euclid(m) * m))
            }
            _ => {}
        }
        if let Some((y, g, low)) = r.nest(m) {
            return y.modulo(m / g).scale(g).add(&low);
        }
        Idx::atom(Atom::Mod(Box::new(r), m))
    }

    /// `g * y + low` with `g` a proper divisor of `d` and `low` in `[0, g)`, where such a split exists (the
    /// flattened index of a view that merges dims: `85 * i + j` with `j < 85`). Then `floor(self / d)` is
    /// `floor(y / (d / g))` and `self mod d` is `g * (y mod (d / g)) + low`.
    fn nest(&self, d: i64) -> Option<(Idx, i64, Idx)> {
        let mut gs: Vec<i64> = self.terms.values().map(|&k| gcd(k.abs(), d)).filter(|&g| g > 1 && g < d).collect();
        gs.sort_unstable_by(|a, b| b.cmp(a));
        gs.dedup();
        for g in gs {
            let (y, low) = self.split(g);
            if matches!(low.range(), Some((lo, hi)) if lo >= 0 && hi < g) {
                return Some((y, g, low));
            }
        }
        None
    }

    /// Whether loop variable `v` occurs in the form, inside divisions, modulos and view inverses included.
    pub fn mentions(&self, v: usize) -> bool {
        self.terms.keys().any(|a| match a {
            Atom::Var(u, _) => *u == v,
            Atom::Param(_) => false,
            Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => x.mentions(v),
        })
    }

    /// The form with every loop variable replaced by `f(variable)`, divisions and modulos simplified again.
    pub fn subst(&self, f: &dyn Fn(usize) -> Idx) -> Idx {
        let mut out = Idx::constant(self.c);
        for (a, &k) in &self.terms {
            let v = match a {
                Atom::Var(v, _) => f(*v),
                Atom::Param(_) => Idx::atom(a.clone()),
                Atom::Div(x, d) => x.subst(f).div(*d),
                Atom::Mod(x, m) => x.subst(f).modulo(*m),
                Atom::ViewInv(h, x, n) => Idx::atom(Atom::ViewInv(*h, Box::new(x.subst(f)), *n)),
                Atom::Load(b, x, n, w) => Idx::atom(Atom::Load(*b, Box::new(x.subst(f)), *n, *w)),
            };
            out = out.add(&v.scale(k));
        }
        out
    }

    /// Whether every value this form and its sub-forms (division, modulo and view-inverse operands) compute fits in
    /// a 32-bit `int`, in any order of adding its terms: the constant's and every term's largest magnitude sum to at
    /// most `i32::MAX`. False where a parameter (of unknown range) occurs.
    pub fn fits_i32(&self) -> bool {
        let mut total = i128::from(self.c.unsigned_abs());
        for (a, &k) in &self.terms {
            let bound: i128 = match a {
                Atom::Var(_, n) => i128::from((n - 1).max(0)),
                Atom::Param(_) => return false,
                Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _)
                    if !x.fits_i32() =>
                {
                    return false
                }
                Atom::Div(x, d) => match x.range() {
                    Some((lo, hi)) => {
                        i128::from(lo.div_euclid(*d).unsigned_abs().max(hi.div_euclid(*d).unsigned_abs()))
                    }
                    None => return false,
                },
                Atom::Mod(_, m) => i128::from(m - 1),
                Atom::ViewInv(_, _, n) => i128::from((n - 1).max(1)),
                Atom::Load(_, _, n, _) => i128::from((n - 1).max(0)),
            };
            total += i128::from(k.unsigned_abs()) * bound;
            if total > i128::from(i32::MAX) {
                return false;
            }
        }
        true
    }

    /// The form as a C expression, in the width set by [`with_width`] (`int64_t` by default); variables are
    /// `i0, i1, ...`, parameters `p[0], p[1], ...`.
    pub fn render(&self) -> String {
        self.render_as(WIDTH.with(|c| c.get()))
    }

    /// The form as a C expression of width `w`.
    pub fn render_as(&self, w: Width) -> String {
        let mut s = String::new();
        for (a, &k) in &self.terms {
            let non_neg = |x: &Idx| matches!(x.range(), Some((lo, _)) if lo >= 0);
            let atom = match (a, w) {
                (Atom::Var(v, _), _) => format!("i{v}"),
                (Atom::Param(p), _) => format!("p[{p}]"),
                (Atom::Div(x, d), Width::I32) if non_neg(x) => format!("(int)((unsigned){} / {d}u)", x.render_as(w)),
                (Atom::Mod(x, m), Width::I32) if non_neg(x) => format!("(int)((unsigned){} % {m}u)", x.render_as(w)),
                (Atom::Div(x, d), Width::I32) => format!("ff_div32({}, {d})", x.render_as(w)),
                (Atom::Mod(x, m), Width::I32) => format!("ff_mod32({}, {m})", x.render_as(w)),
                (Atom::Div(x, d), Width::I64) => format!("ff_div({}, {d})", x.render_as(w)),
                (Atom::Mod(x, m), Width::I64) => format!("ff_mod({}, {m})", x.render_as(w)),
                (Atom::ViewInv(k, x, _), _) => format!("vi{k}({})", x.render_as(w)),
                (Atom::Load(b, x, n, wraps), _) => {
                    let v = format!("(int64_t)a{b}[{}]", x.render_as(w));
                    let v = if *wraps { format!("ff_wrap({v}, {n})") } else { format!("({v})") };
                    if w == Width::I32 {
                        format!("(int){v}")
                    } else {
                        v
                    }
                }
            };
            if !s.is_empty() {
                s.push_str(" + ");
            }
            if k == 1 {
                s.push_str(&atom);
            } else {
                let _ = write!(s, "{k}*{atom}");
            }
        }
        if s.is_empty() {
            return format!("{}", self.c);
        }
        if self.c != 0 {
            let _ = write!(s, " + {}", self.c);
        }
        format!("({s})")
    }
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Row-major strides of a shape.
pub fn contiguous(shape: &[usize]) -> Vec<i64> {
    let mut st = vec![1i64; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        st[k] = st[k + 1] * shape[k + 1] as i64;
    }
    st
}

/// The multi-index of row-major position `lin` in `shape`.
pub fn unravel(lin: &Idx, shape: &[usize]) -> Vec<Idx> {
    if shape.contains(&0) {
        // An empty shape has no position to unravel (and row-major strides of 0 to divide by): no kernel point
        // reaches it, so any index will do.
        return vec![Idx::constant(0); shape.len()];
    }
    let st = contiguous(shape);
    shape.iter().zip(&st).map(|(&n, &s)| if n == 1 { Idx::constant(0) } else { lin.div(s).modulo(n as i64) }).collect()
}

/// The row-major position of a multi-index in `shape`.
pub fn ravel(idx: &[Idx], shape: &[usize]) -> Idx {
    let st = contiguous(shape);
    idx.iter().zip(&st).fold(Idx::constant(0), |acc, (i, &s)| acc.add(&i.scale(s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_layouts_need_no_division() {
        // A [4, 6] tensor read as [6, 4] through a transpose: position of (i0, i1) is i1 * 6 + i0.
        let lin = Idx::var(1, 4).scale(6).add(&Idx::var(0, 6));
        let idx = unravel(&lin, &[4, 6]);
        assert_eq!(idx[0], Idx::var(1, 4));
        assert_eq!(idx[1], Idx::var(0, 6));
        // A parameter that moves by whole rows divides exactly.
        let row = Idx::atom(Atom::Param(0)).scale(512).add(&Idx::var(0, 512));
        assert_eq!(row.div(512), Idx::atom(Atom::Param(0)));
        assert_eq!(row.modulo(512), Idx::var(0, 512));
    }

    #[test]
    fn merged_dims_divide_by_their_factor() {
        // [300, 85] flattened: (85 * i + j) / 850 is i / 10, and its modulo 850 is 85 * (i mod 10) + j.
        let lin = Idx::var(0, 300).scale(85).add(&Idx::var(1, 85));
        assert_eq!(lin.div(850), Idx::var(0, 300).div(10));
        assert_eq!(lin.modulo(850), Idx::var(0, 300).modulo(10).scale(85).add(&Idx::var(1, 85)));
        // A range within one period: (i + 40) mod 40 for i < 40 is i, and (i + 45) mod 40 for i < 30 is i + 5.
        assert_eq!(Idx::var(0, 40).add(&Idx::constant(40)).modulo(40), Idx::var(0, 40));
        assert_eq!(Idx::var(0, 30).add(&Idx::constant(45)).modulo(40), Idx::var(0, 30).add(&Idx::constant(5)));
        // Substituting i = 10 * h + l (a delinearized loop) removes the division.
        let sub = Idx::var(0, 300).div(10).subst(&|_| Idx::var(0, 30).scale(10).add(&Idx::var(1, 10)));
        assert_eq!(sub, Idx::var(0, 30));
    }

    #[test]
    fn a_position_unravelled_and_ravelled_back_is_the_position() {
        // [6, 4] read as [2, 12]: point (a, b) of [6, 4] is position p = 4a + b; as [2, 12] it is (p / 12, p % 12),
        // and 12 * (p / 12) + p % 12 is p again.
        let p = Idx::var(0, 6).scale(4).add(&Idx::var(1, 4));
        let back = ravel(&unravel(&p, &[2, 12]), &[2, 12]);
        assert_eq!(back, p);
        // Different multiples do not recombine.
        let q = Idx::var(0, 50).div(12).scale(11).add(&Idx::var(0, 50).modulo(12));
        assert!(q.terms.len() == 2, "{}", q.render());
    }

    #[test]
    fn what_cannot_be_simplified_stays_a_division() {
        let lin = Idx::var(0, 10);
        assert_eq!(lin.div(3).render(), "(ff_div((i0), 3))");
        assert_eq!(lin.modulo(3).render(), "(ff_mod((i0), 3))");
    }

    #[test]
    fn thirty_two_bit_forms_fit_in_any_order_of_their_terms() {
        let (a, b) = (Idx::var(0, 1 << 16), Idx::var(1, 1 << 15));
        // 32768 * i0 + i1 is 2^31 - 1 at most: fits; one more does not.
        assert!(a.scale(1 << 15).add(&b).fits_i32());
        assert!(!a.scale(1 << 15).add(&b).add(&Idx::constant(1)).fits_i32());
        // The range is small but a partial sum is not: 2^30 * (i0 - i1) would overflow on the way.
        let (c, d) = (Idx::var(0, 4), Idx::var(1, 4));
        assert!(!c.scale(1 << 29).add(&d.scale(-(1 << 29))).fits_i32());
        assert!(c.scale(1 << 28).add(&d.scale(-(1 << 28))).fits_i32());
        // Parameters have no known range.
        assert!(!Idx::atom(Atom::Param(0)).fits_i32());
        // Divisions of non-negative forms are unsigned, of possibly negative ones floor divisions.
        let i = Idx::var(0, 10);
        assert_eq!(i.div(3).render_as(Width::I32), "((int)((unsigned)(i0) / 3u))");
        let diff = i.add(&Idx::var(1, 10).scale(-1));
        assert_eq!(diff.modulo(3).render_as(Width::I32), "(ff_mod32((i0 + -1*i1), 3))");
        assert_eq!(diff.div(3).render_as(Width::I32), "(ff_div32((i0 + -1*i1), 3))");
        assert_eq!(with_width(Width::I32, || i.div(3).render()), "((int)((unsigned)(i0) / 3u))");
        assert_eq!(i.div(3).render(), "(ff_div((i0), 3))");
    }
}
