//! Random instances of a rule's variables, drawn to expose what rules get wrong: special and extreme values, ties,
//! every dtype the runtime has, storages and views of many ranks and sizes.
//!
//! - Values come from a palette per instance: a few special floats (NaN, ±inf, ±0, huge, tiny and subnormal, values
//!   that cancel, 2^24 + 1) or integers (negative, near 2^30, 2^31, 2^53, the i64 extremes) beside ordinary ones, so
//!   that extremes meet in one position and two variables tie often. A quarter of instances use ordinary values
//!   alone. A rule marked `@real` gets tame values only (floats in [-4, 4], small integers).
//! - Dtypes: one per instance (f32, f64, i64, i32, bool) that most tensors share, the others drawn on their own; a
//!   `where` condition is mostly bool. (f16 and bf16 are not drawn: the runtime does not compute in them.)
//! - Storages of rank 1 to 5, mostly small, sometimes crossing 16 and 64 elements, and at least as large as the
//!   rule's literal views need; views of rank 0 to 4 with sizes from 0 up, strides negative, zero and past one, and
//!   views derived from one another (the same, shifted, permuted, narrowed) so that overlap conditions hold and fail.

use std::collections::BTreeMap;

use egg::{ENodeOrVar, Var};

use super::{Kind, Rng, Rule};
use crate::ir::{Node, OpName, Term};
use crate::tensor::{DType, Scalar, Tensor};

/// One instance: what each variable stands for, and the inputs the terms read.
pub struct Instance {
    pub bind: BTreeMap<Var, Term>,
    pub inputs: Vec<(String, DType, Vec<usize>)>,
    pub values: BTreeMap<String, Tensor>,
}

pub(super) type View = (Vec<usize>, Vec<i64>, i64);

pub(super) fn view_term(shape: &[usize], strides: &[i64], offset: i64) -> Term {
    let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let st: Vec<String> = strides.iter().map(|d| d.to_string()).collect();
    format!("(view (list {}) (list {}) {offset})", s.join(" "), st.join(" ")).parse().expect("a view term")
}

pub(super) fn int_term(i: i64) -> Term {
    i.to_string().parse().expect("an int term")
}

pub(super) fn input_term(name: &str) -> Term {
    format!("(input %{name})").parse().expect("an input term")
}

/// The lowest and highest offsets a view reaches from offset 0 (none for an empty view).
pub(super) fn reach(shape: &[usize], strides: &[i64]) -> Option<(i64, i64)> {
    if shape.contains(&0) {
        return None;
    }
    let (mut lo, mut hi) = (0i64, 0i64);
    for (&d, &s) in shape.iter().zip(strides) {
        let r = (d as i64 - 1).saturating_mul(s);
        if r < 0 {
            lo = lo.saturating_add(r);
        } else {
            hi = hi.saturating_add(r);
        }
    }
    Some((lo, hi))
}

const FLOATS: &[f64] = &[
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    2.0,
    -3.0,
    100.0,
    -100.0,
    1e8,
    -1e8,
    16777217.0,
    2e19,
    -2e19,
    1e30,
    -1e30,
    3e38,
    1e-30,
    1e-40,
    -1e-40,
    1e-45,
    5e-324,
    1e-8,
    0.1,
];

const INTS: &[i64] = &[
    0,
    1,
    -1,
    2,
    -2,
    3,
    -3,
    7,
    -7,
    100,
    -100,
    16777217,
    (1 << 30) - 1,
    1 << 30,
    -(1 << 30),
    (1 << 31) - 1,
    -(1 << 31),
    1 << 31,
    1 << 53,
    (1 << 53) + 1,
    -(1 << 53) - 1,
    i64::MAX,
    i64::MIN,
    i64::MAX - 1,
];

/// Draws instances of one rule direction.
pub(super) struct Drawer<'a> {
    kinds: &'a BTreeMap<Var, Kind>,
    /// The storage the rule's literal views need (elements).
    need: usize,
    real: bool,
    /// The left side multiplies matrices: value tensors are mostly matrices (sometimes batches of them, or vectors)
    /// whose dims come from two or three sizes the instance shares, so that products type-check and shape conditions
    /// hold and fail.
    matmul: bool,
}

impl<'a> Drawer<'a> {
    pub(super) fn new(rule: &'a Rule) -> Self {
        let matmul = rule.lhs.ast.as_ref().iter().any(|n| matches!(n, ENodeOrVar::ENode(Node::Op(OpName::Matmul, _))));
        Drawer { kinds: &rule.kinds, need: literal_need(&rule.lhs.ast), real: rule.real, matmul }
    }

    pub(super) fn draw(&self, rng: &mut Rng) -> Instance {
        let storage = self.storage(rng);
        let numel: usize = storage.iter().product();
        let mut views: Vec<View> = Vec::new();
        let mut bind = BTreeMap::new();
        for (v, _) in self.kinds.iter().filter(|(_, k)| **k == Kind::View) {
            let view = if !views.is_empty() && rng.pct(55) {
                let prev = rng.pick(&views);
                derived(&prev, numel, rng)
            } else {
                random_view(numel, rng)
            };
            bind.insert(*v, view_term(&view.0, &view.1, view.2));
            views.push(view);
        }
        let dtype = self.dtype(rng);
        let palette = Palette::new(rng, self.real);
        let mut inputs = Vec::new();
        let mut values = BTreeMap::new();
        // Shapes of the value tensors drawn so far: later ones often take one, so that `same_shape` holds.
        let mut shapes: Vec<Vec<usize>> = Vec::new();
        let sizes: Vec<usize> =
            if self.matmul { (0..2 + rng.below(2)).map(|_| matrix_size(rng)).collect() } else { Vec::new() };
        // Half the instances of a matmul rule multiply matrices alone.
        let matrices_only = self.matmul && rng.pct(50);
        for (k, (v, kind)) in self.kinds.iter().enumerate() {
            match *kind {
                Kind::View => {}
                Kind::Int => {
                    let i = if self.real || rng.pct(85) {
                        if rng.pct(50) {
                            rng.range(0, numel as i64)
                        } else {
                            rng.range(-3, 3)
                        }
                    } else {
                        rng.pick(INTS)
                    };
                    bind.insert(*v, int_term(i));
                }
                Kind::Tensor { base, cond } => {
                    let shape = if base {
                        if rng.pct(85) {
                            storage.clone()
                        } else {
                            self.storage(rng)
                        }
                    } else if self.matmul && rng.pct(90) {
                        // Mostly matrices; batches of them and vectors, which multiply by other rules.
                        let rank = match rng.below(20) {
                            _ if matrices_only => 2,
                            0..=13 => 2,
                            14..=16 => 3,
                            _ => 1,
                        };
                        (0..rank).map(|_| rng.pick(&sizes)).collect()
                    } else if !shapes.is_empty() && rng.pct(60) {
                        rng.pick(&shapes)
                    } else {
                        value_shape(&storage, &views, rng)
                    };
                    if !base {
                        shapes.push(shape.clone());
                    }
                    let d = if cond && rng.pct(75) {
                        DType::Bool
                    } else if rng.pct(75) {
                        dtype
                    } else {
                        self.dtype(rng)
                    };
                    let name = format!("t{k}");
                    let t = palette.tensor(d, &shape, rng);
                    values.insert(name.clone(), t);
                    bind.insert(*v, input_term(&name));
                    inputs.push((name, d, shape));
                }
            }
        }
        Instance { bind, inputs, values }
    }

    fn dtype(&self, rng: &mut Rng) -> DType {
        match rng.below(20) {
            0..=6 => DType::F32,
            7..=9 => DType::F64,
            10..=13 => DType::I64,
            14..=16 => DType::I32,
            _ => DType::Bool,
        }
    }

    fn storage(&self, rng: &mut Rng) -> Vec<usize> {
        if self.need > 1 && rng.pct(60) {
            let n = self.need + rng.below(3) as usize;
            return match rng.below(3) {
                0 => vec![n],
                1 => vec![2, n.div_ceil(2)],
                _ => vec![n.div_ceil(4), 4],
            };
        }
        match rng.below(20) {
            0..=11 => (0..1 + rng.below(3)).map(|_| 1 + rng.below(4) as usize).collect(),
            12..=14 => (0..4 + rng.below(2)).map(|_| 1 + rng.below(3) as usize).collect(),
            15..=16 => vec![rng.pick(&[15, 16, 17, 33, 63, 64, 65, 70])],
            _ => rng.pick(&[vec![4, 17], vec![2, 33], vec![3, 5, 7], vec![17, 4], vec![2, 2, 17], vec![9, 9]]),
        }
    }
}

/// The most elements a literal view of the left side reaches (with its literal offset where it has one).
fn literal_need(ast: &egg::RecExpr<ENodeOrVar<Node>>) -> usize {
    let ints = |id: egg::Id| -> Option<Vec<i64>> {
        match &ast[id] {
            ENodeOrVar::ENode(Node::List(items)) => items
                .iter()
                .map(|&c| match &ast[c] {
                    ENodeOrVar::ENode(Node::Int(i)) => Some(*i),
                    _ => None,
                })
                .collect(),
            _ => None,
        }
    };
    let mut need = 0usize;
    for n in ast.as_ref() {
        let ENodeOrVar::ENode(Node::View([s, st, off])) = n else { continue };
        let (Some(s), Some(st)) = (ints(*s), ints(*st)) else { continue };
        if s.len() != st.len() || s.iter().any(|&d| d < 0) {
            continue;
        }
        let shape: Vec<usize> = s.iter().map(|&d| d as usize).collect();
        let Some((lo, hi)) = reach(&shape, &st) else { continue };
        let off = match &ast[*off] {
            ENodeOrVar::ENode(Node::Int(i)) => (*i).max(0),
            _ => 0,
        };
        let span = hi.saturating_sub(lo).saturating_add(off).saturating_add(1);
        need = need.max(span.clamp(0, 1 << 12) as usize);
    }
    need
}

/// A random view of a storage of `numel` elements (in bounds where the draw allows).
pub(super) fn random_view(numel: usize, rng: &mut Rng) -> View {
    for _ in 0..20 {
        let rank = match rng.below(20) {
            0..=1 => 0,
            2..=8 => 1,
            9..=14 => 2,
            15..=17 => 3,
            _ => 4,
        };
        let shape: Vec<usize> = (0..rank)
            .map(|_| match rng.below(40) {
                0 => 0,
                1..=3 => rng.pick(&[5, 8, 16, 17]),
                _ => 1 + rng.below(3) as usize,
            })
            .collect();
        let strides: Vec<i64> = if rng.pct(25) {
            // Row-major strides: a view that does not overlap itself.
            let mut st = vec![0i64; rank];
            let mut acc = 1i64;
            for k in (0..rank).rev() {
                st[k] = if rng.pct(20) { -acc } else { acc };
                acc *= shape[k].max(1) as i64;
            }
            st
        } else {
            (0..rank)
                .map(|_| match rng.below(10) {
                    0..=1 => rng.range(-3, -1),
                    2 => 0,
                    _ => rng.range(1, 4),
                })
                .collect()
        };
        if let Some(v) = placed(&shape, &strides, numel, rng) {
            return v;
        }
    }
    (vec![1], vec![1], 0)
}

/// The view with an offset that keeps it inside `numel` elements, if one does.
fn placed(shape: &[usize], strides: &[i64], numel: usize, rng: &mut Rng) -> Option<View> {
    match reach(shape, strides) {
        None => Some((shape.to_vec(), strides.to_vec(), rng.range(0, numel as i64 - 1))),
        Some((lo, hi)) => {
            let (first, last) = (-lo, numel as i64 - 1 - hi);
            (first <= last).then(|| (shape.to_vec(), strides.to_vec(), rng.range(first, last)))
        }
    }
}

/// A view made from another: the same, shifted, permuted, narrowed in one dim, or one dim's stride changed.
fn derived(prev: &View, numel: usize, rng: &mut Rng) -> View {
    let (s, st, off) = prev.clone();
    let made = match rng.below(6) {
        0 | 1 => return prev.clone(),
        2 => placed(&s, &st, numel, rng),
        3 if s.len() >= 2 => {
            let (mut s2, mut st2) = (s.clone(), st.clone());
            s2.reverse();
            st2.reverse();
            placed(&s2, &st2, numel, rng)
        }
        4 if !s.is_empty() => {
            let k = rng.below(s.len() as u64) as usize;
            let mut s2 = s.clone();
            s2[k] = rng.below(s[k] as u64 + 2) as usize;
            placed(&s2, &st, numel, rng).or(Some((s2, st.clone(), off)))
        }
        _ if !s.is_empty() => {
            let k = rng.below(s.len() as u64) as usize;
            let mut st2 = st.clone();
            st2[k] = rng.range(-2, 3);
            placed(&s, &st2, numel, rng)
        }
        _ => None,
    };
    made.unwrap_or_else(|| random_view(numel, rng))
}

/// The shape of a value tensor: a view's shape, one that broadcasts to it, no dims, the storage, or another.
fn value_shape(storage: &[usize], views: &[View], rng: &mut Rng) -> Vec<usize> {
    let view = if views.is_empty() { None } else { Some(rng.pick(views).0) };
    match (rng.below(10), view) {
        (0..=3, Some(s)) => s,
        (4, Some(s)) => {
            // Broadcastable to the view: some dims 1, maybe fewer leading dims.
            let drop = rng.below(s.len() as u64 + 1) as usize;
            s[drop..].iter().map(|&d| if rng.pct(50) { 1 } else { d }).collect()
        }
        (5, _) => vec![],
        (6 | 7, _) => storage.to_vec(),
        _ => (0..rng.below(4)).map(|_| 1 + rng.below(3) as usize).collect(),
    }
}

/// One dim of the matrices of a rule that multiplies them: mostly small, sometimes empty or past a vector width.
fn matrix_size(rng: &mut Rng) -> usize {
    match rng.below(20) {
        0 => 0,
        1 => rng.pick(&[5, 8, 17]),
        _ => 1 + rng.below(4) as usize,
    }
}

/// The values of one instance: special values shared by its tensors, beside ordinary ones.
struct Palette {
    floats: Vec<f64>,
    ints: Vec<i64>,
    /// Percent of elements taken from the palette (0: ordinary values alone).
    share: u64,
    real: bool,
}

impl Palette {
    fn new(rng: &mut Rng, real: bool) -> Self {
        let mut floats: Vec<f64> = (0..4).map(|_| rng.pick(FLOATS)).collect();
        floats.push(uniform(rng));
        let ints: Vec<i64> = (0..4).map(|_| rng.pick(INTS)).collect();
        let share = if real || rng.pct(25) { 0 } else { rng.pick(&[20, 40, 60]) };
        Palette { floats, ints, share, real }
    }

    fn tensor(&self, d: DType, shape: &[usize], rng: &mut Rng) -> Tensor {
        let n: usize = shape.iter().product();
        let vals: Vec<Scalar> = (0..n).map(|_| self.scalar(d, rng)).collect();
        Tensor::from_scalars(d, shape, &vals).expect("a small tensor")
    }

    fn scalar(&self, d: DType, rng: &mut Rng) -> Scalar {
        let special = rng.pct(self.share);
        match d {
            DType::Bool => Scalar::B(rng.pct(50)),
            DType::I64 | DType::I32 => {
                let i = if special { rng.pick(&self.ints) } else { rng.range(-9, 9) };
                Scalar::I(if d == DType::I32 { i as i32 as i64 } else { i })
            }
            _ => {
                let f = if special {
                    rng.pick(&self.floats)
                } else if self.real {
                    if rng.pct(20) {
                        rng.range(-2, 2) as f64
                    } else {
                        4.0 * uniform(rng)
                    }
                } else if rng.pct(10) {
                    rng.range(-3, 3) as f64
                } else {
                    uniform(rng)
                };
                Scalar::F(f)
            }
        }
    }
}

/// Uniform in [-1, 1).
fn uniform(rng: &mut Rng) -> f64 {
    (rng.next() >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}
