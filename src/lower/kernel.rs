//! The kernel IR shared by every backend, and the C expression syntax both renderers use for it.
//!
//! A kernel is a loop nest over its domain (one variable per output dim); each point stores one element computed
//! by an expression tree of loads through index forms, constants and elementwise ops. A reduction kernel adds
//! inner variables and folds the expression over them (sum, prod, max, min, any, all, argmax, argmin), so that
//! matmuls (a sum of products) and reductions take their fused prologues. Arithmetic follows the reference
//! interpreter: each op computes in `double` (or `int64_t`) and rounds to its result dtype.

use std::fmt::Write;

use super::index::{contiguous, Atom, Idx};
use crate::tensor::ops::{Binary, Unary};
use crate::tensor::DType;

/// A scalar expression at one point of a kernel's domain.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// Element `at` of argument buffer `arg`.
    Load {
        arg: usize,
        at: Idx,
        dtype: DType,
    },
    Const(f64, DType),
    /// An index as an `i64` value (arange).
    Index(Idx),
    /// Whether an index is non-negative (a view helper's answer for "this element is in the view").
    NonNeg(Idx),
    Unary(Unary, DType, Box<Expr>),
    Binary(Binary, DType, DType, Box<Expr>, Box<Expr>),
    Where(Box<Expr>, Box<Expr>, Box<Expr>),
    Cast(DType, Box<Expr>),
    /// In a reduction kernel's epilogue: the reduced value at this point (`red`), of the reduction's dtype.
    Acc(DType),
    /// `x[i]` along x's first dim at a run-time index: element `at + wrap(index) * stride` of buffer `arg`, where a
    /// negative index counts from the end of the `extent`. The executor checks the index buffer's bounds first.
    Gather {
        arg: usize,
        at: Idx,
        index: Box<Expr>,
        stride: i64,
        extent: i64,
        dtype: DType,
    },
    /// A matmul's element computed where it is read (the matmul fused into its reader, [`Dot`]): f32.
    Dot(Box<Dot>),
    /// Element `at` of the small value [`Kernel::pre`]`[slot]`, which the kernel computes before its loop nest
    /// (into the local array `fv<slot>`).
    Local {
        slot: usize,
        at: Idx,
        dtype: DType,
    },
}

/// At most this many points has a kernel with dot products (the C backend computes each dot at every point of a
/// kernel piece before its nest, into arrays on the stack).
pub const MAX_DOT_POINTS: usize = 2048;

/// The dot product `sum over k < len of a[a_at + k * a_step] * b[b_at + k * b_step]` of f32 argument buffers `a`
/// and `b`: each product rounded to f32, product k added in f32 to partial sum k % 4, and the partial sums combined
/// as `(s0 + s1) + (s2 + s3)`, exactly as the C backend's row layout sums a matmul's output (the same bits).
#[derive(Clone, Debug, PartialEq)]
pub struct Dot {
    pub a: usize,
    pub a_at: Idx,
    pub a_step: i64,
    pub b: usize,
    pub b_at: Idx,
    pub b_step: i64,
    pub len: usize,
}

impl Dot {
    /// The two reads as (argument, position of the first element, step).
    pub fn reads(&self) -> [(usize, &Idx, i64); 2] {
        [(self.a, &self.a_at, self.a_step), (self.b, &self.b_at, self.b_step)]
    }

    /// The dot with both positions mapped by `f`.
    pub fn map(&self, f: &mut dyn FnMut(&Idx) -> Idx) -> Dot {
        Dot { a_at: f(&self.a_at), b_at: f(&self.b_at), ..self.clone() }
    }
}

impl Expr {
    pub fn dtype(&self) -> DType {
        match self {
            Expr::Load { dtype, .. }
            | Expr::Const(_, dtype)
            | Expr::Cast(dtype, _)
            | Expr::Acc(dtype)
            | Expr::Local { dtype, .. }
            | Expr::Gather { dtype, .. } => *dtype,
            Expr::Dot(_) => DType::F32,
            Expr::Index(_) => DType::I64,
            Expr::NonNeg(_) => DType::Bool,
            Expr::Unary(_, d, _) => *d,
            Expr::Binary(_, _, out, _, _) => *out,
            Expr::Where(_, a, _) => a.dtype(),
        }
    }

    /// Pushes the argument of every buffer read in `self` (loads, gathers, dots; index loads not included).
    pub fn loaded_args(&self, out: &mut Vec<usize>) {
        match self {
            Expr::Load { arg, .. } => out.push(*arg),
            Expr::Gather { arg, index, .. } => {
                out.push(*arg);
                index.loaded_args(out);
            }
            Expr::Dot(d) => out.extend([d.a, d.b]),
            Expr::Unary(_, _, a) | Expr::Cast(_, a) => a.loaded_args(out),
            Expr::Binary(_, _, _, a, b) => {
                a.loaded_args(out);
                b.loaded_args(out);
            }
            Expr::Where(c, a, b) => {
                c.loaded_args(out);
                a.loaded_args(out);
                b.loaded_args(out);
            }
            Expr::Local { .. } | Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => {}
        }
    }

    /// Loads and arithmetic ops, for the cost model.
    pub fn counts(&self) -> (usize, usize) {
        match self {
            Expr::Load { at, .. } | Expr::Local { at, .. } => (1, at.ops()),
            // One op per product, as a matmul kernel counts its `a * b` per point (the add of its reduction is
            // not counted): a dot is priced at the matmul class's fitted rate, so its ops must be the same unit.
            Expr::Dot(d) => (2 * d.len, d.len),
            Expr::Index(i) | Expr::NonNeg(i) => (0, i.ops()),
            Expr::Const(..) | Expr::Acc(_) => (0, 0),
            Expr::Unary(_, _, a) | Expr::Cast(_, a) => {
                let (l, o) = a.counts();
                (l, o + 1)
            }
            Expr::Gather { index, .. } => {
                let (l, o) = index.counts();
                (l + 1, o + 1)
            }
            Expr::Binary(_, _, _, a, b) => {
                let ((la, oa), (lb, ob)) = (a.counts(), b.counts());
                (la + lb, oa + ob + 1)
            }
            Expr::Where(c, a, b) => {
                let ((lc, oc), (la, oa), (lb, ob)) = (c.counts(), a.counts(), b.counts());
                (lc + la + lb, oc + oa + ob + 1)
            }
        }
    }
}

/// How a reduction kernel folds its inner loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RedOp {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    Any,
    All,
    ArgMax,
    ArgMin,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Reduction {
    pub op: RedOp,
    /// Extents of the inner variables, which follow the domain's.
    pub extents: Vec<usize>,
}

/// One kernel: `out[store] = value` at every point of `domain` (folded over the reduction's variables, then
/// passed through the epilogue where there is one).
#[derive(Clone, Debug, PartialEq)]
pub struct Kernel {
    pub name: String,
    pub domain: Vec<usize>,
    pub reduce: Option<Reduction>,
    pub value: Expr,
    /// For a reduction: the elementwise consumer fused after it (a matmul's bias and activation), as the dtype of
    /// the reduced value and an expression that reads it as [`Expr::Acc`]. Its loads index by the domain only.
    pub epilogue: Option<(DType, Expr)>,
    pub store: Idx,
    pub out_dtype: DType,
    /// Dtypes of the argument buffers the value loads (argument 0 is the output).
    pub args: Vec<DType>,
    pub params: usize,
    /// Views whose inverse the kernel computes (`vi<k>`): shape and strides.
    pub views: Vec<(Vec<usize>, Vec<i64>)>,
    /// True when the output buffer is an input's buffer updated in place (an `assign` whose old value is dead).
    pub in_place: bool,
    /// Set on the members of a chain that holds a reduction (`chain.rs`): on CUDA and the emulator every member maps
    /// one point to one thread (the flat layout, a reduction folded serially by that thread), so that the thread that
    /// computes the reduction at a point is the one that runs the later members there.
    pub flat: bool,
    /// Small values the kernel reads at any of their elements, computed before its loop nest, in order (a later one
    /// may read an earlier one): pre `s` stores into the local array `fv<s>` (on CUDA a shared array each block
    /// computes), and the value reads it as [`Expr::Local`]. Each reads the kernel's own arguments (never argument 0)
    /// and has its own loop variables. `lower/pre.rs` decides which reductions are computed so.
    pub pre: Vec<Kernel>,
}

impl Kernel {
    /// The kernel with a reduction over no elements (an extent of 0) replaced by its identity at every point (a sum
    /// is 0, a product 1, `any` false, `all` true, a mean NaN), through the epilogue where there is one: the
    /// backends' loop nests treat extents of 0 and 1 alike (fuzz seed 146116: a sum over a `[0, 20]` view read
    /// element 0 of an empty buffer). PyTorch refuses max, min and their args of nothing before a kernel runs.
    pub fn without_empty_reduction(mut self) -> Kernel {
        let Some(red) = &self.reduce else { return self };
        if !red.extents.contains(&0) {
            return self;
        }
        let identity = match red.op {
            RedOp::Sum | RedOp::Any => 0.0,
            RedOp::Prod | RedOp::All => 1.0,
            RedOp::Mean | RedOp::Max | RedOp::Min | RedOp::ArgMax | RedOp::ArgMin => f64::NAN,
        };
        let reduced = self.epilogue.as_ref().map_or(self.out_dtype, |(d, _)| *d);
        let value = Expr::Const(identity, reduced);
        self.value = match self.epilogue.take() {
            Some((_, e)) => replace_acc(&e, &value),
            None if reduced == self.out_dtype => value,
            None => Expr::Cast(self.out_dtype, Box::new(value)),
        };
        self.reduce = None;
        self
    }

    pub fn points(&self) -> usize {
        self.domain.iter().product::<usize>() * self.reduce.as_ref().map_or(1, |r| r.extents.iter().product())
    }

    /// Whether the kernel writes every element of a fresh output buffer of its domain's size: not in place, and
    /// storing each point at its own position, row-major or in another order (a write through a view that names
    /// every element once).
    pub fn covers(&self) -> bool {
        if self.in_place {
            return false;
        }
        let vars: Vec<Idx> = self.domain.iter().enumerate().map(|(v, &n)| Idx::var(v, n)).collect();
        if self.store == super::index::ravel(&vars, &self.domain) {
            return true;
        }
        let mut strides = vec![0isize; self.domain.len()];
        for (a, &coef) in &self.store.terms {
            match a {
                super::index::Atom::Var(v, _) if *v < strides.len() => strides[*v] = coef as isize,
                _ => return false,
            }
        }
        crate::ir::geometry::is_permutation(&self.domain, &strides, self.store.c)
    }

    /// Whether the kernel's points must run one after another, in row-major order: a scatter, whose positions come
    /// from index buffers (duplicates: the last write wins, as in the reference), or an accumulating one (it reads
    /// its own output: `old + value`).
    pub fn ordered(&self) -> bool {
        let scatters = self.store.terms.keys().any(|a| matches!(a, super::index::Atom::Load(..)));
        fn reads(e: &Expr) -> bool {
            match e {
                Expr::Load { arg: 0, .. } | Expr::Gather { arg: 0, .. } => true,
                Expr::Dot(d) => d.a == 0 || d.b == 0,
                Expr::Unary(_, _, a) | Expr::Cast(_, a) => reads(a),
                Expr::Gather { index, .. } => reads(index),
                Expr::Binary(_, _, _, a, b) => reads(a) || reads(b),
                Expr::Where(c, a, b) => reads(c) || reads(a) || reads(b),
                _ => false,
            }
        }
        self.in_place && (scatters || reads(&self.value))
    }

    /// Bytes moved and arithmetic ops of one launch, given the element counts of its argument buffers (after the
    /// output): the output is written once, each argument read at most once per point.
    pub fn traffic(&self, arg_numels: impl IntoIterator<Item = usize>) -> (f64, f64) {
        let points = self.points() as f64;
        let mut bytes = self.domain.iter().product::<usize>() as f64 * self.out_dtype.size() as f64;
        let mut dots = Vec::new();
        dot_reads(&self.value, &mut dots);
        // What a pre reads, it reads whole (the pre's points may be more than the kernel's).
        let mut whole = Vec::new();
        for p in &self.pre {
            p.value.loaded_args(&mut whole);
        }
        for (a, (n, d)) in arg_numels.into_iter().zip(&self.args[1..]).enumerate() {
            // An argument a dot reads: `len` elements per point (each read once where the points cover it).
            let per_point: usize = dots.iter().filter(|(arg, _)| *arg == a + 1).map(|(_, len)| len).sum();
            let read = if whole.contains(&(a + 1)) {
                n as f64
            } else {
                (points * per_point.max(1) as f64).min(n as f64).min(self.footprint(a + 1).unwrap_or(f64::INFINITY))
            };
            bytes += read * d.size() as f64;
        }
        let outputs = self.domain.iter().product::<usize>() as f64;
        let epilogue = self.epilogue.as_ref().map_or(0.0, |(_, e)| outputs * e.counts().1 as f64);
        // Each pre once per launch (the C backend's count; a CUDA thread computes each): its reads are of the
        // kernel's arguments, counted above.
        let pre: f64 = self.pre.iter().map(|p| p.traffic(std::iter::empty()).1).sum();
        (bytes, points * self.value.counts().1 as f64 + epilogue + pre)
    }
}

impl Kernel {
    /// At most how many distinct elements of argument `arg` the kernel's loads read: per load, the product of the
    /// extents of the loop variables its position mentions (a position is a function of them), summed; `None` where
    /// a gather or a dot reads it. A matmul reading one slice `W[d]` of a stacked weight reads that slice, not the
    /// buffer: priced as the buffer, a plan that hoists a stacked weight's scaling out of a loop looked 2.4 times
    /// dearer in matmul bytes than one that recomputes the scaled slice every iteration (rhn).
    fn footprint(&self, arg: usize) -> Option<f64> {
        let extents: Vec<usize> =
            self.domain.iter().chain(self.reduce.iter().flat_map(|r| r.extents.iter())).copied().collect();
        let mut total = 0.0;
        let mut walk = |e: &Expr| -> Option<()> {
            let mut stack = vec![e];
            while let Some(e) = stack.pop() {
                match e {
                    Expr::Load { arg: a, at, .. } if *a == arg => {
                        let combos: f64 =
                            (0..extents.len()).filter(|&v| at.mentions(v)).map(|v| extents[v] as f64).product();
                        total += combos;
                    }
                    Expr::Gather { arg: a, .. } if *a == arg => return None,
                    Expr::Dot(d) if d.a == arg || d.b == arg => return None,
                    Expr::Gather { index, .. } => stack.push(index),
                    Expr::Unary(_, _, x) | Expr::Cast(_, x) => stack.push(x),
                    Expr::Binary(_, _, _, x, y) => stack.extend([&**x, &**y]),
                    Expr::Where(c, x, y) => stack.extend([&**c, &**x, &**y]),
                    _ => {}
                }
            }
            Some(())
        };
        walk(&self.value)?;
        if let Some((_, e)) = &self.epilogue {
            walk(e)?;
        }
        Some(total)
    }
}

/// The (argument, length) of every read of the dots in `e`.
pub fn dot_reads(e: &Expr, out: &mut Vec<(usize, usize)>) {
    match e {
        Expr::Dot(d) => out.extend(d.reads().map(|(arg, _, _)| (arg, d.len))),
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => dot_reads(a, out),
        Expr::Gather { index, .. } => dot_reads(index, out),
        Expr::Binary(_, _, _, a, b) => {
            dot_reads(a, out);
            dot_reads(b, out);
        }
        Expr::Where(c, a, b) => {
            dot_reads(c, out);
            dot_reads(a, out);
            dot_reads(b, out);
        }
        Expr::Load { .. } | Expr::Local { .. } | Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => {}
    }
}

pub fn c_type(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "int64_t",
        DType::I32 => "int32_t",
        DType::I16 => "int16_t",
        DType::I8 => "int8_t",
        DType::U8 | DType::Bool => "uint8_t",
        DType::F16 | DType::BF16 => "float",
    }
}

/// Helpers every kernel source starts with (valid C and CUDA C; `FF_FN` is `static inline` or `__device__`).
pub const PRELUDE: &str = r#"
#ifdef FF_VMATH
#define FF_SELF(c, a, b) ff__self((c), (a), (b))
#define FF_SELD(c, a, b) ff__seld((c), (a), (b))
#else
#define FF_SELF(c, a, b) ((c) ? (a) : (b))
#define FF_SELD(c, a, b) ((c) ? (a) : (b))
#endif
FF_FN int64_t ff_div(int64_t a, int64_t b) { int64_t q = a / b; return q - (int64_t)((a % b != 0) & ((a < 0) != (b < 0))); }
FF_FN int64_t ff_mod(int64_t a, int64_t b) { int64_t r = a % b; return r + (b & -(int64_t)((r != 0) & ((r < 0) != (b < 0)))); }
FF_FN double ff_floordiv(double a, double b) {
  if (b == 0.0) return a / b;
  double m = fmod(a, b), d = (a - m) / b;
  if (m != 0.0 && ((b < 0.0) != (m < 0.0))) d -= 1.0;
  if (d != 0.0) { double fl = floor(d); return (d - fl > 0.5) ? fl + 1.0 : fl; }
  return copysign(0.0, a / b);
}
FF_FN double ff_rem(double a, double b) { double m = fmod(a, b); if (m != 0.0 && ((b < 0.0) != (m < 0.0))) m += b; return m; }
FF_FN double ff_max(double a, double b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
FF_FN double ff_min(double a, double b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
FF_FN double ff_relu(double a) { return (a != a) ? a : (a > 0.0 ? a : 0.0); }
FF_FN double ff_sign(double a) { return a > 0.0 ? 1.0 : (a < 0.0 ? -1.0 : a); }
FF_FN double ff_sigmoid(double a) { return 1.0 / (1.0 + exp(-a)); }
FF_FN float ff_maxf(float a, float b) { return (a != a || b != b) ? NAN : (a > b ? a : b); }
FF_FN float ff_minf(float a, float b) { return (a != a || b != b) ? NAN : (a < b ? a : b); }
FF_FN float ff_reluf(float a) { return (a != a) ? a : (a > 0.0f ? a : 0.0f); }
FF_FN float ff_signf(float a) { return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : a); }
#ifndef FF_VMATH
FF_FN float ff_expf(float a) { return expf(a); }
FF_FN float ff_expm1f(float a) { return expm1f(a); }
FF_FN float ff_logf(float a) { return logf(a); }
FF_FN float ff_log1pf(float a) { return log1pf(a); }
FF_FN float ff_tanhf(float a) { return tanhf(a); }
FF_FN float ff_erff(float a) { return erff(a); }
FF_FN float ff_sinf(float a) { return sinf(a); }
FF_FN float ff_cosf(float a) { return cosf(a); }
FF_FN float ff_sigmoidf(float a) { return 1.0f / (1.0f + expf(-a)); }
#endif
FF_FN float ff_sin32(float a) { return fabsf(a) < 0x1p30f ? ff_sinf(a) : sinf(a); }
FF_FN float ff_cos32(float a) { return fabsf(a) < 0x1p30f ? ff_cosf(a) : cosf(a); }
FF_FN int64_t ff_imax(int64_t a, int64_t b) { return a > b ? a : b; }
FF_FN int64_t ff_imin(int64_t a, int64_t b) { return a < b ? a : b; }
FF_FN int64_t ff_wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i; }
FF_FN int32_t ff_f2i32(double a) { return (a > -2147483649.0 && a < 2147483648.0) ? (int32_t)a : (int32_t)(-2147483647 - 1); }
FF_FN float ff_dotf(const float* a, int64_t sa, const float* b, int64_t sb, int64_t n) {
  float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f; int64_t k = 0;
  for (; k + 4 <= n; k += 4) {
    s0 += a[k * sa] * b[k * sb]; s1 += a[(k + 1) * sa] * b[(k + 1) * sb];
    s2 += a[(k + 2) * sa] * b[(k + 2) * sb]; s3 += a[(k + 3) * sa] * b[(k + 3) * sb];
  }
  if (k < n) s0 += a[k * sa] * b[k * sb];
  if (k + 1 < n) s1 += a[(k + 1) * sa] * b[(k + 1) * sb];
  if (k + 2 < n) s2 += a[(k + 2) * sa] * b[(k + 2) * sb];
  return (s0 + s1) + (s2 + s3);
}
"#;

/// The C expression of `e`, of the C type of its dtype.
pub fn render(e: &Expr, args: &str) -> String {
    match e {
        Expr::Load { arg, at, .. } => format!("{args}{arg}[{}]", at.render()),
        Expr::Const(v, d) => match d {
            DType::F32 | DType::F64 | DType::F16 | DType::BF16 => {
                if v.is_nan() {
                    "NAN".into()
                } else if v.is_infinite() {
                    if *v > 0.0 {
                        "INFINITY".into()
                    } else {
                        "(-INFINITY)".into()
                    }
                } else {
                    format!("(({}){v:?})", c_type(*d))
                }
            }
            DType::Bool => format!("((uint8_t){})", (*v != 0.0) as u8),
            _ => format!("(({}){})", c_type(*d), *v as i64),
        },
        Expr::Index(i) => i.render(),
        Expr::Acc(_) => "red".into(),
        Expr::Local { slot, at, .. } => format!("fv{slot}[{}]", at.render()),
        Expr::Dot(d) => format!(
            "ff_dotf({args}{} + ({}), {}, {args}{} + ({}), {}, {})",
            d.a,
            d.a_at.render(),
            d.a_step,
            d.b,
            d.b_at.render(),
            d.b_step,
            d.len
        ),
        Expr::Gather { arg, at, index, stride, extent, .. } => {
            format!("{args}{arg}[{} + ff_wrap((int64_t)({}), {extent}) * {stride}]", at.render(), render(index, args))
        }
        Expr::NonNeg(i) => format!("((uint8_t)({} >= 0))", i.render()),
        Expr::Cast(d, a) => {
            let inner = render(a, args);
            match (d, a.dtype()) {
                (DType::Bool, _) => format!("((uint8_t)({inner} != 0))"),
                // A select rather than a conversion: GCC 12 vectorizes no loop that converts a combination of
                // comparisons (its mask type) to float (yolact's crop: four comparisons and-ed, times the masks).
                (d, DType::Bool) if d.is_float() => format!("(({inner}) ? ({t})1 : ({t})0)", t = c_type(*d)),
                // To int32 and narrower as x86 converts (PyTorch's result): INT32_MIN out of range, then wrapped.
                (DType::I32 | DType::I16 | DType::I8 | DType::U8, s) if s.is_float() => {
                    format!("(({})ff_f2i32((double)({inner})))", c_type(*d))
                }
                (d, s) if !d.is_float() && s.is_float() => format!("(({})(int64_t)({inner}))", c_type(*d)),
                _ => format!("(({})({inner}))", c_type(*d)),
            }
        }
        Expr::Where(c, a, b) => {
            let (c, x, y) = (render(c, args), render(a, args), render(b, args));
            match blend(e) {
                Some(f) => format!("{f}({c}, {x}, {y})"),
                None => format!("({c} ? {x} : {y})"),
            }
        }
        Expr::Unary(op, out, a) => unary(*op, *out, a, args),
        Expr::Binary(op, compute, out, a, b) => binary(*op, *compute, *out, a, b, args),
    }
}

/// The bit-mask blend a float `where` renders as (`FF_SELF`, `FF_SELD`: `vmath.h`'s on the C backend), where it
/// may evaluate both arms: its condition is data (no loop index, no view test, every load at a position that is
/// a plain function of the loop variables and parameters), and so are its arms' loads, so both arms read in bounds
/// at every point whichever is taken; kernels' integer divisions are by nonzero constants and do not trap. GCC
/// turns `c ? a : b` with a constant arm into branches it then does not if-convert, and the loop stays scalar:
/// litgpt's top-p filter (`masked_fill` with -inf, then a softmax) summed 32000 exps in 0.24 ms so, 0.07 blended.
/// `None`: the plain conditional (positions that are valid only where the condition holds: a pad, a `cat`).
fn blend(e: &Expr) -> Option<&'static str> {
    let Expr::Where(c, a, b) = e else { return None };
    let f = match a.dtype() {
        DType::F32 => "FF_SELF",
        DType::F64 => "FF_SELD",
        _ => return None,
    };
    (plain(c) && plain(a) && plain(b)).then_some(f)
}

/// Whether `e` uses no loop index as a value or view test, and loads only at positions made of loop variables and
/// parameters (no view inverse, index read, division or modulo).
fn plain(e: &Expr) -> bool {
    match e {
        Expr::Load { at, .. } => at.terms.keys().all(|a| matches!(a, Atom::Var(..) | Atom::Param(_))),
        Expr::Const(..) | Expr::Acc(_) => true,
        Expr::Unary(_, _, x) | Expr::Cast(_, x) => plain(x),
        Expr::Binary(_, _, _, x, y) => plain(x) && plain(y),
        Expr::Where(c, x, y) => plain(c) && plain(x) && plain(y),
        Expr::Index(_) | Expr::NonNeg(_) | Expr::Local { .. } | Expr::Gather { .. } | Expr::Dot(_) => false,
    }
}

fn unary(op: Unary, out: DType, a: &Expr, args: &str) -> String {
    use Unary::*;
    let x = render(a, args);
    let t = c_type(out);
    if out == DType::F32 && !matches!(op, LogicalNot | BitNot) {
        return unary_f32(op, &x);
    }
    if a.dtype().is_float() || (out.is_float() && op != LogicalNot) {
        let f = format!("(double)({x})");
        let v = match op {
            Neg => format!("-{f}"),
            Abs => format!("fabs({f})"),
            Relu => format!("ff_relu({f})"),
            Exp => format!("exp({f})"),
            Log => format!("log({f})"),
            Log1p => format!("log1p({f})"),
            Expm1 => format!("expm1({f})"),
            Sqrt => format!("sqrt({f})"),
            Rsqrt => format!("1.0 / sqrt({f})"),
            Sigmoid => format!("ff_sigmoid({f})"),
            Tanh => format!("tanh({f})"),
            Sin => format!("sin({f})"),
            Cos => format!("cos({f})"),
            Floor => format!("floor({f})"),
            Ceil => format!("ceil({f})"),
            Round => format!("rint({f})"),
            Trunc => format!("trunc({f})"),
            Sign => format!("ff_sign({f})"),
            Reciprocal => format!("1.0 / {f}"),
            Square => format!("{f} * {f}"),
            Erf => format!("erf({f})"),
            Silu => format!("{f} * ff_sigmoid({f})"),
            Gelu => format!("0.5 * {f} * (1.0 + erf({f} * 0.70710678118654752440))"),
            LogicalNot | BitNot => unreachable!("not a float op"),
        };
        return format!("(({t})({v}))");
    }
    let i = format!("(int64_t)({x})");
    let v = match op {
        LogicalNot => return format!("((uint8_t)(({x}) == 0))"),
        Neg => format!("-{i}"),
        Abs => format!("({i} < 0 ? -{i} : {i})"),
        Relu => format!("({i} > 0 ? {i} : 0)"),
        Sign => format!("(({i} > 0) - ({i} < 0))"),
        Square => format!("{i} * {i}"),
        BitNot if out == DType::Bool => format!("!{i}"),
        BitNot => format!("~{i}"),
        _ => i,
    };
    format!("(({t})({v}))")
}

/// A unary op on f32, computed in f32: exact where the op is correctly rounded (negation, abs, rounding, sqrt,
/// reciprocal, square), within the math functions' stated ulp bounds elsewhere (`ff_expf` and friends: the C
/// backend's vectorizable `vmath.h`, within 1 or 2 ulp; CUDA's math library, within 2, on the GPU and in the
/// emulator). `vmath.h`'s sin and cos hold for |x| < 2^30; beyond, libm's are called.
fn unary_f32(op: Unary, x: &str) -> String {
    use Unary::*;
    let f = format!("(float)({x})");
    let v = match op {
        Neg => format!("-{f}"),
        Abs => format!("fabsf({f})"),
        Relu => format!("ff_reluf({f})"),
        Exp => format!("ff_expf({f})"),
        Log => format!("ff_logf({f})"),
        Log1p => format!("ff_log1pf({f})"),
        Expm1 => format!("ff_expm1f({f})"),
        Sqrt => format!("sqrtf({f})"),
        Rsqrt => format!("1.0f / sqrtf({f})"),
        Sigmoid => format!("ff_sigmoidf({f})"),
        Tanh => format!("ff_tanhf({f})"),
        Sin => format!("ff_sin32({f})"),
        Cos => format!("ff_cos32({f})"),
        Floor => format!("floorf({f})"),
        Ceil => format!("ceilf({f})"),
        Round => format!("rintf({f})"),
        Trunc => format!("truncf({f})"),
        Sign => format!("ff_signf({f})"),
        Reciprocal => format!("1.0f / {f}"),
        Square => format!("{f} * {f}"),
        Erf => format!("ff_erff({f})"),
        Silu => format!("{f} * ff_sigmoidf({f})"),
        Gelu => format!("0.5f * {f} * (1.0f + ff_erff({f} * 0.70710678118654752440f))"),
        LogicalNot | BitNot => unreachable!("not a float op"),
    };
    format!("((float)({v}))")
}

fn binary(op: Binary, compute: DType, out: DType, a: &Expr, b: &Expr, args: &str) -> String {
    use Binary::*;
    let (x, y) = (render(a, args), render(b, args));
    let t = c_type(out);
    let cmp = |o: &str, cast: &str| format!("((uint8_t)(({cast})({x}) {o} ({cast})({y})))");
    if compute == DType::F32 {
        // Add, subtract, multiply and divide round once in f32 exactly as in double rounded to f32 (double
        // carries more than twice f32's precision), so computing them in f32 is exact; comparisons are too.
        let (f, g) = (format!("(float)({x})"), format!("(float)({y})"));
        let v = match op {
            Add => format!("{f} + {g}"),
            Sub => format!("{f} - {g}"),
            Mul => format!("{f} * {g}"),
            Div => format!("{f} / {g}"),
            Maximum => format!("ff_maxf({f}, {g})"),
            Minimum => format!("ff_minf({f}, {g})"),
            Eq => return cmp("==", "float"),
            Ne => return cmp("!=", "float"),
            Lt => return cmp("<", "float"),
            Le => return cmp("<=", "float"),
            Gt => return cmp(">", "float"),
            Ge => return cmp(">=", "float"),
            _ => String::new(),
        };
        if !v.is_empty() {
            return format!("(({t})({v}))");
        }
    }
    if compute.is_float() {
        let (f, g) = (format!("(double)({x})"), format!("(double)({y})"));
        let v = match op {
            Add => format!("{f} + {g}"),
            Sub => format!("{f} - {g}"),
            Mul => format!("{f} * {g}"),
            Div => format!("{f} / {g}"),
            FloorDiv => format!("ff_floordiv({f}, {g})"),
            Rem => format!("ff_rem({f}, {g})"),
            Fmod => format!("fmod({f}, {g})"),
            Pow => format!("pow({f}, {g})"),
            Maximum => format!("ff_max({f}, {g})"),
            Minimum => format!("ff_min({f}, {g})"),
            Atan2 => format!("atan2({f}, {g})"),
            Eq => return cmp("==", "double"),
            Ne => return cmp("!=", "double"),
            Lt => return cmp("<", "double"),
            Le => return cmp("<=", "double"),
            Gt => return cmp(">", "double"),
            Ge => return cmp(">=", "double"),
            BitAnd | BitOr | BitXor | Shl | Shr => unreachable!("rejected by the planner"),
        };
        return format!("(({t})({v}))");
    }
    let (i, j) = (format!("(int64_t)({x})"), format!("(int64_t)({y})"));
    let boolean = compute == DType::Bool;
    let v = match op {
        Eq => return cmp("==", "int64_t"),
        Ne => return cmp("!=", "int64_t"),
        Lt => return cmp("<", "int64_t"),
        Le => return cmp("<=", "int64_t"),
        Gt => return cmp(">", "int64_t"),
        Ge => return cmp(">=", "int64_t"),
        Add | BitOr | Maximum if boolean => format!("{i} | {j}"),
        Mul | BitAnd | Minimum if boolean => format!("{i} & {j}"),
        BitXor => format!("{i} ^ {j}"),
        Add => format!("(int64_t)((uint64_t){i} + (uint64_t){j})"),
        Sub => format!("(int64_t)((uint64_t){i} - (uint64_t){j})"),
        Mul => format!("(int64_t)((uint64_t){i} * (uint64_t){j})"),
        Maximum => format!("ff_imax({i}, {j})"),
        Minimum => format!("ff_imin({i}, {j})"),
        BitAnd => format!("{i} & {j}"),
        BitOr => format!("{i} | {j}"),
        // PyTorch's results for counts outside [0, 64) (0, and the sign), without C's undefined shifts.
        Shl => format!("((uint64_t){j} < 64 ? (int64_t)((uint64_t){i} << {j}) : (int64_t)0)"),
        Shr => format!("{i} >> ((uint64_t){j} < 64 ? {j} : 63)"),
        // By a constant other than 0 and -1 only (the planner checks): floor division and Python's remainder
        // (the divisor's sign), and C's truncated remainder for fmod.
        FloorDiv => format!("ff_div({i}, {j})"),
        Rem => format!("ff_mod({i}, {j})"),
        Fmod => format!("{i} % {j}"),
        _ => unreachable!("rejected by the planner"),
    };
    format!("(({t})({v}))")
}

/// Whether the renderers support `op` on operands of dtype `compute` (the planner leaves the rest to the host).
pub fn binary_supported(op: Binary, compute: DType) -> bool {
    use Binary::*;
    if compute.is_float() {
        return !matches!(op, BitAnd | BitOr | BitXor | Shl | Shr);
    }
    let boolean = compute == DType::Bool;
    match op {
        Eq | Ne | Lt | Le | Gt | Ge | BitXor | BitAnd | BitOr | Add | Mul | Maximum | Minimum => true,
        Sub | Shl | Shr => !boolean,
        _ => false,
    }
}

/// The view-inverse helpers of a kernel: `vi<k>(r)` is the row-major position within view k's shape of the
/// element at offset `r` from the view's start, or -1 when the view does not reach it. Views must nest (sorted by
/// stride, each stride steps past what the smaller ones reach), which the planner checks.
pub fn view_helpers(k: &Kernel, prefix: &str, fn_kw: &str) -> String {
    let mut s = String::new();
    for (n, (shape, strides)) in k.views.iter().enumerate() {
        let cs = contiguous(shape);
        let mut dims: Vec<usize> = (0..shape.len()).filter(|&d| shape[d] > 1).collect();
        dims.sort_by_key(|&d| std::cmp::Reverse(strides[d]));
        let _ = writeln!(s, "{fn_kw} int64_t {prefix}vi{n}(int64_t r) {{");
        let _ = writeln!(s, "  int64_t q, out = 0;\n  if (r < 0) return -1;");
        if shape.contains(&0) {
            // An empty view reaches no element (a size-0 dim is not a size-1 one).
            let _ = writeln!(s, "  (void)q; (void)out; return -1;\n}}");
            continue;
        }
        for d in dims {
            let _ = writeln!(
                s,
                "  q = r / {st}; if (q >= {n}) return -1; r -= q * {st}; out += q * {c};",
                st = strides[d],
                n = shape[d],
                c = cs[d]
            );
        }
        let _ = writeln!(s, "  return r == 0 ? out : -1;\n}}");
    }
    s
}

/// The accumulator's initial value, update and final value for a reduction, in C (`acc`, `arg`, `v`, `r`).
pub fn reduction_parts(op: RedOp, acc_ty: &str, count: usize) -> (String, String, String) {
    let lowest = if acc_ty == "double" { "-INFINITY" } else { "INT64_MIN" };
    let highest = if acc_ty == "double" { "INFINITY" } else { "INT64_MAX" };
    match op {
        RedOp::Sum => ("0".into(), "acc += v;".into(), "acc".into()),
        RedOp::Mean => ("0".into(), "acc += v;".into(), format!("acc / {count}.0")),
        RedOp::Prod => ("1".into(), "acc *= v;".into(), "acc".into()),
        RedOp::Max => (lowest.into(), "if (v > acc || v != v) acc = v;".into(), "acc".into()),
        RedOp::Min => (highest.into(), "if (v < acc || v != v) acc = v;".into(), "acc".into()),
        RedOp::Any => ("0".into(), "acc = acc || (v != 0);".into(), "acc".into()),
        RedOp::All => ("1".into(), "acc = acc && (v != 0);".into(), "acc".into()),
        RedOp::ArgMax => {
            (lowest.into(), "if (v > acc || (v != v && acc == acc)) { acc = v; arg = r; }".into(), "arg".into())
        }
        RedOp::ArgMin => {
            (highest.into(), "if (v < acc || (v != v && acc == acc)) { acc = v; arg = r; }".into(), "arg".into())
        }
    }
}

/// `e` with the reduced value ([`Expr::Acc`]) replaced by `v`.
fn replace_acc(e: &Expr, v: &Expr) -> Expr {
    let m = |a: &Expr| Box::new(replace_acc(a, v));
    match e {
        Expr::Acc(_) => v.clone(),
        Expr::Gather { arg, at, index, stride, extent, dtype } => {
            Expr::Gather { arg: *arg, at: at.clone(), index: m(index), stride: *stride, extent: *extent, dtype: *dtype }
        }
        Expr::Load { .. } | Expr::Local { .. } | Expr::Dot(_) | Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) => {
            e.clone()
        }
        Expr::Unary(op, d, a) => Expr::Unary(*op, *d, m(a)),
        Expr::Cast(d, a) => Expr::Cast(*d, m(a)),
        Expr::Binary(op, c, d, a, b) => Expr::Binary(*op, *c, *d, m(a), m(b)),
        Expr::Where(c, a, b) => Expr::Where(m(c), m(a), m(b)),
    }
}
