//! Elementwise operations with PyTorch's broadcasting and type promotion, and the checks of in-place writes.
//!
//! Values are computed in the widest type of the common dtype's kind (f64, i64, bool) after casting every operand to
//! the common dtype, then rounded into the result dtype. For f32 this gives PyTorch's correctly rounded `+ - * /` and
//! `sqrt` bit for bit; transcendental functions may differ in the last place (PyTorch's own are not correctly rounded).

use super::dtype::Kind;
use super::{fmt_shape, DType, Scalar, TResult, Tensor};

/// An operand of an elementwise op: a tensor or a Python number.
#[derive(Clone, Debug)]
pub enum Operand {
    T(Tensor),
    S(Scalar),
}

impl Operand {
    fn shape(&self) -> &[usize] {
        match self {
            Operand::T(t) => &t.shape,
            Operand::S(_) => &[],
        }
    }
}

/// PyTorch's `result_type`: dimensioned tensors, then 0-dim tensors, then Python numbers, each counting only when of a
/// higher category than the ones before.
pub fn result_type(ops: &[&Operand]) -> DType {
    let mut dim: Option<DType> = None;
    let mut zero: Option<DType> = None;
    let mut wrapped: Option<DType> = None;
    let join = |acc: &mut Option<DType>, d: DType| *acc = Some(acc.map_or(d, |a| DType::promote(a, d)));
    for op in ops {
        match op {
            Operand::T(t) if t.dim() > 0 => join(&mut dim, t.dtype()),
            Operand::T(t) => join(&mut zero, t.dtype()),
            Operand::S(s) => join(&mut wrapped, s.default_dtype()),
        }
    }
    combine(dim, combine(zero, wrapped)).unwrap_or(DType::F32)
}

fn combine(higher: Option<DType>, lower: Option<DType>) -> Option<DType> {
    match (higher, lower) {
        (None, l) => l,
        (h, None) => h,
        (Some(h), Some(l)) => {
            if h.is_float() {
                Some(h)
            } else if h == DType::Bool || l.is_float() {
                Some(DType::promote(h, l))
            } else {
                Some(h)
            }
        }
    }
}

/// Broadcasts shapes as NumPy and PyTorch do.
pub fn broadcast_shapes(a: &[usize], b: &[usize]) -> TResult<Vec<usize>> {
    let n = a.len().max(b.len());
    let mut out = vec![0; n];
    // From the last dim, as PyTorch's `infer_size`, so a message names the same dim as PyTorch's.
    for i in (0..n).rev() {
        let da = if i + a.len() >= n { a[i + a.len() - n] } else { 1 };
        let db = if i + b.len() >= n { b[i + b.len() - n] } else { 1 };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(format!(
                "The size of tensor a ({da}) must match the size of tensor b ({db}) at non-singleton dimension {i}"
            ));
        };
    }
    Ok(out)
}

/// Every operand's elements broadcast to `shape` and cast to `dtype`, in row-major order.
fn gather(op: &Operand, shape: &[usize], dtype: DType) -> TResult<Vec<Scalar>> {
    match op {
        Operand::S(s) => Ok(vec![s.cast(dtype); super::numel(shape)]),
        Operand::T(t) => {
            let b = t.broadcast_to(shape)?;
            let buf = b.buf.borrow();
            Ok(b.offsets().into_iter().map(|o| buf.get(o).cast(dtype)).collect())
        }
    }
}

/// Applies `f` elementwise over broadcast operands cast to `compute`, storing the results as `out`.
pub fn map_n(
    ops: &[&Operand],
    compute: DType,
    out: DType,
    f: impl Fn(&[Scalar]) -> TResult<Scalar>,
) -> TResult<Tensor> {
    let mut shape: Vec<usize> = Vec::new();
    for op in ops {
        shape = broadcast_shapes(&shape, op.shape())?;
    }
    let cols: Vec<Vec<Scalar>> = ops.iter().map(|o| gather(o, &shape, compute)).collect::<TResult<_>>()?;
    let n = super::numel(&shape);
    let mut values = Vec::with_capacity(n);
    let mut args = vec![Scalar::B(false); ops.len()];
    for i in 0..n {
        for (a, col) in args.iter_mut().zip(&cols) {
            *a = col[i];
        }
        values.push(f(&args)?);
    }
    // PyTorch keeps the memory layout of the first operand that is not broadcast.
    let deciding = ops.iter().find_map(|o| match o {
        Operand::T(t) if t.shape == shape && !t.has_internal_overlap() => Some(t),
        _ => None,
    });
    let result = match deciding {
        Some(t) => Tensor::empty_like_layout(t, out)?,
        None => Tensor::zeros(out, &shape)?,
    };
    result.write_scalars(&values);
    Ok(result)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Rem,
    Fmod,
    Pow,
    Maximum,
    Minimum,
    BitAnd,
    BitOr,
    BitXor,
    /// `<<` and `>>` of integers, as PyTorch's CPU kernels: a shift by a negative count or by the width or more
    /// gives 0 (left) or the sign (right); a left shift wraps.
    Shl,
    Shr,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Atan2,
}

impl Binary {
    pub fn is_comparison(self) -> bool {
        matches!(self, Binary::Eq | Binary::Ne | Binary::Lt | Binary::Le | Binary::Gt | Binary::Ge)
    }
}

fn py_floor_div_f(a: f64, b: f64) -> f64 {
    if b == 0.0 {
        return a / b;
    }
    let m = a % b;
    let mut div = (a - m) / b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        div -= 1.0;
    }
    if div != 0.0 {
        let fl = div.floor();
        if div - fl > 0.5 {
            return fl + 1.0;
        }
        return fl;
    }
    0.0f64.copysign(a / b)
}

fn py_rem_f(a: f64, b: f64) -> f64 {
    let mut m = a % b;
    if m != 0.0 && ((b < 0.0) != (m < 0.0)) {
        m += b;
    }
    m
}

/// The dtype an op computes in and the dtype of its result, with PyTorch's errors for unsupported dtype pairs.
pub fn binary_dtypes(op: Binary, a: &Operand, b: &Operand) -> TResult<(DType, DType)> {
    let common = result_type(&[a, b]);
    let both_bool = common == DType::Bool;
    match op {
        Binary::Sub if both_bool => Err("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or `logical_xor()` operator instead.".into()),
        Binary::Div | Binary::Atan2 if !common.is_float() => Ok((DType::F32, DType::F32)),
        Binary::Shl | Binary::Shr if common.is_float() || both_bool => {
            Err(format!("\"{}shift_cpu\" not implemented for '{}'", if op == Binary::Shl { "l" } else { "r" }, common.name()))
        }
        Binary::BitAnd | Binary::BitOr | Binary::BitXor if common.is_float() => {
            Err(format!("\"bitwise_{}_cpu\" not implemented for '{}'", match op { Binary::BitAnd => "and", Binary::BitOr => "or", _ => "xor" }, common.name()))
        }
        _ if op.is_comparison() => Ok((common, DType::Bool)),
        _ => Ok((common, common)),
    }
}

/// `a OP b` with broadcasting and promotion.
pub fn binary(op: Binary, a: &Operand, b: &Operand) -> TResult<Tensor> {
    let (compute, out) = binary_dtypes(op, a, b)?;
    let kind = compute.kind();
    if op == Binary::Pow && kind != Kind::Float {
        if let Operand::T(t) = b {
            if t.scalars().iter().any(|s| s.to_i64_trunc() < 0) {
                return Err("Integers to negative integer powers are not allowed.".into());
            }
        } else if let Operand::S(s) = b {
            if s.to_i64_trunc() < 0 {
                return Err("Integers to negative integer powers are not allowed.".into());
            }
        }
    }
    map_n(&[a, b], compute, out, |args| apply_binary(op, kind, args[0], args[1]))
}

fn apply_binary(op: Binary, kind: Kind, x: Scalar, y: Scalar) -> TResult<Scalar> {
    use Binary::*;
    if op.is_comparison() {
        fn ordered<T: PartialOrd>(op: Binary, a: T, b: T) -> bool {
            match op {
                Binary::Eq => a == b,
                Binary::Ne => a != b,
                Binary::Lt => a < b,
                Binary::Le => a <= b,
                Binary::Gt => a > b,
                _ => a >= b,
            }
        }
        let r = match kind {
            Kind::Float => ordered(op, x.to_f64(), y.to_f64()),
            _ => ordered(op, x.to_i64_trunc(), y.to_i64_trunc()),
        };
        return Ok(Scalar::B(r));
    }
    Ok(match kind {
        Kind::Float => {
            let (a, b) = (x.to_f64(), y.to_f64());
            Scalar::F(match op {
                Add => a + b,
                Sub => a - b,
                Mul => a * b,
                Div => a / b,
                FloorDiv => py_floor_div_f(a, b),
                Rem => py_rem_f(a, b),
                Fmod => a % b,
                Pow => a.powf(b),
                Maximum => {
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.max(b)
                    }
                }
                Minimum => {
                    if a.is_nan() || b.is_nan() {
                        f64::NAN
                    } else {
                        a.min(b)
                    }
                }
                Atan2 => a.atan2(b),
                _ => unreachable!("bitwise ops on floats are rejected in binary_dtypes"),
            })
        }
        Kind::Int => {
            let (a, b) = (x.to_i64_trunc(), y.to_i64_trunc());
            Scalar::I(match op {
                Add => a.wrapping_add(b),
                Sub => a.wrapping_sub(b),
                Mul => a.wrapping_mul(b),
                FloorDiv | Rem | Fmod if b == 0 => return Err("RuntimeError: ZeroDivisionError".into()),
                FloorDiv => {
                    let q = a.wrapping_div(b);
                    if (a.wrapping_rem(b) != 0) && ((a < 0) != (b < 0)) {
                        q - 1
                    } else {
                        q
                    }
                }
                Rem => {
                    let r = a.wrapping_rem(b);
                    if r != 0 && ((r < 0) != (b < 0)) {
                        r + b
                    } else {
                        r
                    }
                }
                Fmod => a.wrapping_rem(b),
                Pow => a.wrapping_pow(b.clamp(0, u32::MAX as i64) as u32),
                Maximum => a.max(b),
                Minimum => a.min(b),
                BitAnd => a & b,
                BitOr => a | b,
                BitXor => a ^ b,
                // In 64 bits, then wrapped to the result's dtype: the bits PyTorch's kernels give for every width.
                Shl if (0..64).contains(&b) => ((a as u64) << b) as i64,
                Shl => 0,
                Shr => a >> if (0..64).contains(&b) { b } else { 63 },
                Div | Atan2 => unreachable!("true division computes in floats"),
                _ => unreachable!(),
            })
        }
        Kind::Bool => {
            let (a, b) = (x.to_bool(), y.to_bool());
            Scalar::B(match op {
                Add | BitOr | Maximum => a | b,
                Mul | BitAnd | Minimum => a & b,
                BitXor => a ^ b,
                Pow => a | !b,
                FloorDiv | Rem | Fmod => {
                    if !b {
                        return Err("RuntimeError: ZeroDivisionError".into());
                    }
                    if op == FloorDiv {
                        a
                    } else {
                        false
                    }
                }
                _ => unreachable!(),
            })
        }
    })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    Neg,
    Abs,
    Relu,
    Exp,
    Log,
    Log1p,
    Expm1,
    Sqrt,
    Rsqrt,
    Sigmoid,
    Tanh,
    Sin,
    Cos,
    Floor,
    Ceil,
    Round,
    Trunc,
    Sign,
    LogicalNot,
    BitNot,
    Reciprocal,
    Square,
    Erf,
    Silu,
    Gelu,
}

impl Unary {
    /// Ops that compute in floats and turn integer inputs into the default float dtype.
    fn is_float_op(self) -> bool {
        use Unary::*;
        matches!(
            self,
            Exp | Log | Log1p | Expm1 | Sqrt | Rsqrt | Sigmoid | Tanh | Sin | Cos | Reciprocal | Erf | Silu | Gelu
        )
    }
}

fn erf(x: f64) -> f64 {
    // Abramowitz-Stegun 7.1.26 is too coarse; use the series / continued fraction split for double accuracy.
    if x.abs() < 2.5 {
        let mut sum = x;
        let mut term = x;
        let x2 = x * x;
        let mut n = 0.0;
        loop {
            n += 1.0;
            term *= -x2 / n;
            let add = term / (2.0 * n + 1.0);
            sum += add;
            if add.abs() <= 1e-17 * sum.abs() || n > 200.0 {
                break;
            }
        }
        sum * 2.0 / std::f64::consts::PI.sqrt()
    } else {
        let t = x.abs();
        let mut f = 0.0;
        for k in (1..60).rev() {
            f = (k as f64 / 2.0) / (t + f);
        }
        let erfc = (-t * t).exp() / std::f64::consts::PI.sqrt() / (t + f);
        (1.0 - erfc).copysign(x)
    }
}

pub fn unary(op: Unary, x: &Tensor) -> TResult<Tensor> {
    use Unary::*;
    let dt = x.dtype();
    let (compute, out) = if op.is_float_op() && !dt.is_float() {
        (DType::F32, DType::F32)
    } else if op == LogicalNot {
        (dt, DType::Bool)
    } else {
        (dt, dt)
    };
    match op {
        Neg if dt == DType::Bool => return Err("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.".into()),
        BitNot if dt.is_float() => return Err("~ (operator.invert) is only implemented on integer and Boolean-type tensors".into()),
        _ => {}
    }
    let kind = compute.kind();
    map_n(&[&Operand::T(x.clone())], compute, out, |a| {
        let v = a[0];
        Ok(match kind {
            Kind::Float => {
                let f = v.to_f64();
                Scalar::F(match op {
                    Neg => -f,
                    Abs => f.abs(),
                    Relu => {
                        if f.is_nan() {
                            f
                        } else if f > 0.0 {
                            f
                        } else {
                            0.0
                        }
                    }
                    Exp => f.exp(),
                    Log => f.ln(),
                    Log1p => f.ln_1p(),
                    Expm1 => f.exp_m1(),
                    Sqrt => f.sqrt(),
                    Rsqrt => 1.0 / f.sqrt(),
                    Sigmoid => 1.0 / (1.0 + (-f).exp()),
                    Tanh => f.tanh(),
                    Sin => f.sin(),
                    Cos => f.cos(),
                    Floor => f.floor(),
                    Ceil => f.ceil(),
                    Round => f.round_ties_even(),
                    Trunc => f.trunc(),
                    Sign => {
                        if f > 0.0 {
                            1.0
                        } else if f < 0.0 {
                            -1.0
                        } else {
                            f
                        }
                    }
                    LogicalNot => return Ok(Scalar::B(f == 0.0)),
                    Reciprocal => 1.0 / f,
                    Square => f * f,
                    Erf => erf(f),
                    Silu => f / (1.0 + (-f).exp()),
                    Gelu => 0.5 * f * (1.0 + erf(f / std::f64::consts::SQRT_2)),
                    BitNot => unreachable!(),
                })
            }
            Kind::Int => {
                let i = v.to_i64_trunc();
                match op {
                    LogicalNot => Scalar::B(i == 0),
                    _ => Scalar::I(match op {
                        Neg => i.wrapping_neg(),
                        Abs => i.wrapping_abs(),
                        Relu => i.max(0),
                        Floor | Ceil | Round | Trunc => i,
                        Sign => i.signum(),
                        BitNot => !i,
                        Square => i.wrapping_mul(i),
                        _ => unreachable!("float ops compute in floats"),
                    }),
                }
            }
            Kind::Bool => {
                let b = v.to_bool();
                Scalar::B(match op {
                    LogicalNot | BitNot => !b,
                    Abs | Relu | Floor | Ceil | Round | Trunc | Sign | Square => b,
                    _ => unreachable!(),
                })
            }
        })
    })
}

/// `torch.where(cond, a, b)`.
pub fn where_(cond: &Tensor, a: &Operand, b: &Operand) -> TResult<Tensor> {
    // PyTorch takes a uint8 condition as a boolean one.
    if !matches!(cond.dtype(), DType::Bool | DType::U8) {
        return Err(format!(
            "where expected condition to be a boolean tensor, but got a tensor with dtype {}",
            cond.dtype().name()
        ));
    }
    let dt = result_type(&[a, b]);
    map_n(&[&Operand::T(cond.clone()), a, b], dt, dt, |v| Ok(if v[0].to_bool() { v[1] } else { v[2] }))
}

/// `clamp(x, min, max)`; NaN in `x` or in a bound propagates, and `max` wins when `min > max`.
pub fn clamp(x: &Tensor, lo: Option<&Operand>, hi: Option<&Operand>) -> TResult<Tensor> {
    if lo.is_none() && hi.is_none() {
        return Err("torch.clamp: At least one of 'min' or 'max' must not be None".into());
    }
    let xo = Operand::T(x.clone());
    let none = Operand::S(Scalar::B(false));
    let mut ops: Vec<&Operand> = vec![&xo];
    ops.extend(lo.iter().copied());
    ops.extend(hi.iter().copied());
    let dt = result_type(&ops);
    let (l, h) = (lo.unwrap_or(&none), hi.unwrap_or(&none));
    let (has_l, has_h) = (lo.is_some(), hi.is_some());
    let float = dt.is_float();
    map_n(&[&xo, l, h], dt, dt, |v| {
        if float {
            let mut r = v[0].to_f64();
            if has_l {
                let b = v[1].to_f64();
                r = if r.is_nan() || b.is_nan() { f64::NAN } else { r.max(b) };
            }
            if has_h {
                let b = v[2].to_f64();
                r = if r.is_nan() || b.is_nan() { f64::NAN } else { r.min(b) };
            }
            Ok(Scalar::F(r))
        } else {
            let mut r = v[0].to_i64_trunc();
            if has_l {
                r = r.max(v[1].to_i64_trunc());
            }
            if has_h {
                r = r.min(v[2].to_i64_trunc());
            }
            Ok(Scalar::I(r).cast(dt))
        }
    })
}

/// The error messages of PyTorch's memory-overlap checks.
pub const E_INTERNAL: &str = "unsupported operation: more than one element of the written-to tensor refers to a single memory location. Please clone() the tensor before performing the operation.";
/// Ours: an in-place write through a view whose elements share memory without a stride of 0 (`x.unfold(1, 4, 2)`,
/// overlapping windows), which PyTorch runs unchecked, each element reading what an earlier one wrote.
pub const E_SHARED: &str = "unsupported in-place write: elements of the written-to view share memory (overlapping \
    windows of `unfold`, an `as_strided` view), and PyTorch's result then depends on the order its kernel visits \
    them; clone() the view first";
pub const E_PARTIAL: &str = "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single memory location. Please clone() the tensor before performing the operation.";

/// Checks an in-place write of `dst` that reads `inputs`, as PyTorch's TensorIterator does.
///
/// Where PyTorch does not check (an operand with gaps) and the memory still overlaps, the result would depend on the
/// CPU's vector width, so we reject the write instead of guessing.
pub fn check_overlap(dst: &Tensor, inputs: &[&Tensor], check_internal: bool) -> TResult<()> {
    if check_internal && dst.has_internal_overlap() {
        return Err(E_INTERNAL.into());
    }
    if check_internal && dst.shares_elements() {
        return Err(E_SHARED.into());
    }
    let mut dst_offsets: Option<std::collections::HashSet<usize>> = None;
    for inp in inputs {
        if !inp.same_storage(dst) || inp.same_view(dst) || inp.numel() == 0 || dst.numel() == 0 {
            continue;
        }
        let set = dst_offsets.get_or_insert_with(|| dst.offsets().into_iter().collect());
        if !inp.offsets().iter().any(|o| set.contains(o)) {
            continue;
        }
        if dst.is_non_overlapping_and_dense() && inp.is_non_overlapping_and_dense() {
            return Err(E_PARTIAL.into());
        }
        // Each element that reads written memory reads the very memory it writes (`x.unsqueeze(0).mul_(x)` through
        // a strided `x`; `a[:, 4].copy_(a[-1])`, which meet at one element): PyTorch does not check, and the result
        // does not depend on the order of the element loop, since no other element reads what one writes.
        let reads_own = |b: Tensor| b.offsets().iter().zip(dst.offsets()).all(|(r, w)| !set.contains(r) || *r == w);
        if inp.broadcast_to(&dst.shape).is_ok_and(reads_own) {
            continue;
        }
        return Err("unsupported in-place write: the value read overlaps the tensor written through a strided view, and PyTorch's result then depends on the CPU's vector width; clone() the value first".into());
    }
    Ok(())
}

/// PyTorch's checks of `dst[...] = value` without advanced indices. PyTorch copies the value as it is where the
/// shapes are equal, and fills from a 0-dim value; otherwise it drops the value's leading size-1 dims and `expand`s it
/// to `dst` (a new leading dim of size 1 has the next dim's size times its stride as stride, any other new dim
/// stride 0, as has every dim of a 0-dim source), then `copy_`s: the same memory with the same strides copies nothing, else an in-place write's checks run on the
/// expanded value, which PyTorch does not check where the expansion repeats elements (not non-overlapping and
/// dense). There the copy is exact only where each memory position it both reads and writes is written from itself
/// (`x[:, :] = x[0]`); any other overlap is refused, since PyTorch's result would depend on its copy order.
pub fn check_setitem_overlap(dst: &Tensor, value: &Tensor) -> TResult<()> {
    // A tensor value (0-dim included) is copied with `copy_`, which refuses a destination whose elements share
    // memory (`e = x.expand(3, 4)` then `e[:] = y`); only a number is filled unchecked.
    if dst.has_internal_overlap() {
        return Err(E_INTERNAL.into());
    }
    if dst.shares_elements() {
        return Err(E_SHARED.into());
    }
    if value.dim() == 0 || !value.same_storage(dst) || value.numel() == 0 || dst.numel() == 0 {
        return Ok(());
    }
    let src = if value.shape == dst.shape {
        value.clone()
    } else {
        let lead = value.shape.iter().take_while(|&&n| n == 1).count();
        let (vs, vst) = (&value.shape[lead..], &value.strides[lead..]);
        let n = dst.dim();
        if vs.len() > n {
            return Ok(()); // a shape error, reported by the write
        }
        let mut strides = vec![0isize; n];
        for i in (0..n).rev() {
            let k = i as isize - (n - vs.len()) as isize;
            strides[i] = if k >= 0 {
                if vs[k as usize] == dst.shape[i] {
                    vst[k as usize]
                } else {
                    0
                }
            } else if vs.is_empty() || dst.shape[i] != 1 {
                // A new leading dim: `expand` repeats the value along it (stride 0) unless its size is 1.
                0
            } else {
                dst.shape[i + 1] as isize * strides[i + 1]
            };
        }
        value.restride(dst.shape.clone(), strides, value.offset)
    };
    if src.same_view(dst) {
        return Ok(());
    }
    if dst.has_internal_overlap() {
        return Err(E_INTERNAL.into());
    }
    let (d, r) = (dst.offsets(), src.offsets());
    let read: std::collections::HashSet<usize> = r.iter().copied().collect();
    if !d.iter().any(|o| read.contains(o)) {
        return Ok(());
    }
    if dst.is_non_overlapping_and_dense() && src.is_non_overlapping_and_dense() {
        return Err(E_PARTIAL.into());
    }
    if d.iter().zip(&r).all(|(w, v)| !read.contains(w) || w == v) {
        return Ok(());
    }
    Err("unsupported write: the value assigned overlaps the tensor written, and PyTorch's result then depends on the CPU's vector width (the order of its copy); clone() the value first".into())
}

/// Checks a write into `dst` that must not overlap `inputs` at all, not even exactly (`index_put_`, `index_add_`, and
/// `x[idx] = v`), as PyTorch's `assert_no_overlap` does.
pub fn check_no_overlap(dst: &Tensor, inputs: &[&Tensor]) -> TResult<()> {
    for inp in inputs {
        if !inp.same_storage(dst) || inp.numel() == 0 || dst.numel() == 0 {
            continue;
        }
        let set: std::collections::HashSet<usize> = dst.offsets().into_iter().collect();
        if !inp.offsets().iter().any(|o| set.contains(o)) {
            continue;
        }
        if dst.is_non_overlapping_and_dense() && inp.is_non_overlapping_and_dense() {
            return Err(E_PARTIAL.into());
        }
        // Each element reads the very memory it writes (`x.unsqueeze(0).mul_(x)` through a strided `x`): PyTorch
        // does not check, and the result does not depend on the order of the element loop.
        if inp.broadcast_to(&dst.shape).is_ok_and(|b| b.offsets() == dst.offsets()) {
            continue;
        }
        return Err("unsupported in-place write: the value read overlaps the tensor written through a strided view, and PyTorch's result then depends on the order of the writes; clone() the value first".into());
    }
    Ok(())
}

/// The overlap checks of writing an op's result into `out=`: an elementwise op's as an in-place op's (`out` may be
/// exactly an input, not partially overlap one); any other op's `out` must not overlap an input at all (the error
/// is then empty, for the caller to name the op).
pub fn check_out_overlap(dst: &Tensor, inputs: &[&Tensor], elementwise: bool) -> TResult<()> {
    if elementwise {
        return check_overlap(dst, inputs, true);
    }
    if dst.has_internal_overlap() {
        return Err(E_INTERNAL.into());
    }
    let set: std::collections::HashSet<usize> = dst.offsets().into_iter().collect();
    if inputs.iter().any(|inp| inp.same_storage(dst) && inp.offsets().iter().any(|o| set.contains(o))) {
        return Err(String::new());
    }
    Ok(())
}

/// Writes `value` into `dst` (an in-place op's result), after PyTorch's checks of dtype and shape.
pub fn write_result(dst: &Tensor, value: &Tensor, cast_check: bool) -> TResult<()> {
    if cast_check && !dst.dtype().can_cast_from(value.dtype()) {
        return Err(format!(
            "result type {} can't be cast to the desired output type {}",
            value.dtype().name(),
            dst.dtype().name()
        ));
    }
    let b = broadcast_shapes(&dst.shape, &value.shape)?;
    if b != dst.shape {
        return Err(format!(
            "output with shape {} doesn't match the broadcast shape {}",
            fmt_shape(&dst.shape),
            fmt_shape(&b)
        ));
    }
    let src = value.broadcast_to(&dst.shape)?;
    let vals = src.scalars();
    dst.write_scalars(&vals);
    Ok(())
}
