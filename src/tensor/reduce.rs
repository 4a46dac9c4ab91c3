//! Reductions, scans, softmax, matmul and concatenation.
//!
//! Float sums accumulate in f64 and round once (PyTorch's blocked f32 sums differ in the last places; goldens are compared
//! with a tolerance). Ties in max/min/argmax return the first index; NaN wins.

use super::dtype::Kind;
use super::ops::result_type;
use super::ops::Operand;
use super::views::wrap_dim;
use super::{fmt_shape, numel, Buf, DType, Scalar, TResult, Tensor};

/// Reduced groups: for every output element (row-major over the kept dims), the input elements along `dims`.
struct Groups {
    out_shape: Vec<usize>,
    keep_shape: Vec<usize>,
    values: Vec<Scalar>,
    group: usize,
}

fn groups(x: &Tensor, dims: &[usize], keepdim: bool) -> Groups {
    let kept: Vec<usize> = (0..x.dim()).filter(|d| !dims.contains(d)).collect();
    let mut perm: Vec<i64> = kept.iter().map(|&d| d as i64).collect();
    perm.extend(dims.iter().map(|&d| d as i64));
    let p = x.permute(&perm).expect("a permutation of all dims is valid");
    let values = p.scalars();
    let group = dims.iter().map(|&d| x.shape[d]).product();
    let keep_shape: Vec<usize> = kept.iter().map(|&d| x.shape[d]).collect();
    let out_shape = if keepdim {
        (0..x.dim()).map(|d| if dims.contains(&d) { 1 } else { x.shape[d] }).collect()
    } else {
        keep_shape.clone()
    };
    Groups { out_shape, keep_shape, values, group }
}

/// Normalizes a `dim=` argument: `None` or an empty list reduces every dim.
pub fn reduce_dims(x: &Tensor, dims: Option<&[i64]>) -> TResult<Vec<usize>> {
    let mut out = Vec::new();
    match dims {
        None => out.extend(0..x.dim()),
        Some([]) => out.extend(0..x.dim()),
        Some(ds) => {
            for &d in ds {
                let d = wrap_dim(d, x.dim())?;
                if out.contains(&d) {
                    return Err(format!("dim {d} appears multiple times in the list of dims"));
                }
                out.push(d);
            }
        }
    }
    // A 0-dim tensor accepts dim 0 (or -1) and has no dim to reduce: the result is its one element.
    if x.dim() == 0 {
        out.clear();
    }
    out.sort();
    Ok(out)
}

fn reduce_with(
    x: &Tensor,
    dims: &[usize],
    keepdim: bool,
    out: DType,
    f: impl Fn(&[Scalar]) -> TResult<Scalar>,
) -> TResult<Tensor> {
    let g = groups(x, dims, keepdim);
    let n = numel(&g.keep_shape);
    let t = Tensor::zeros(out, &g.out_shape)?;
    {
        let mut b = t.buf.borrow_mut();
        for i in 0..n {
            b.set(i, f(&g.values[i * g.group..(i + 1) * g.group])?);
        }
    }
    Ok(t)
}

pub fn sum(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> TResult<Tensor> {
    let dims = reduce_dims(x, dims)?;
    let out = dtype.unwrap_or(if x.dtype().is_float() { x.dtype() } else { DType::I64 });
    let float = out.is_float();
    reduce_with(x, &dims, keepdim, out, |v| {
        Ok(if float {
            Scalar::F(v.iter().fold(0.0, |acc, s| acc + s.cast(out).to_f64()))
        } else {
            Scalar::I(v.iter().fold(0i64, |a, s| a.wrapping_add(s.to_i64_trunc())))
        })
    })
}

pub fn prod(x: &Tensor, dims: Option<&[i64]>, keepdim: bool) -> TResult<Tensor> {
    let dims = reduce_dims(x, dims)?;
    let out = if x.dtype().is_float() { x.dtype() } else { DType::I64 };
    let float = out.is_float();
    reduce_with(x, &dims, keepdim, out, |v| {
        Ok(if float {
            Scalar::F(v.iter().fold(1.0, |acc, s| acc * s.to_f64()))
        } else {
            Scalar::I(v.iter().fold(1i64, |a, s| a.wrapping_mul(s.to_i64_trunc())))
        })
    })
}

pub fn mean(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, dtype: Option<DType>) -> TResult<Tensor> {
    let out = dtype.unwrap_or(x.dtype());
    if !out.is_float() {
        return Err(format!("mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: {}", out.name()));
    }
    let d = reduce_dims(x, dims)?;
    reduce_with(x, &d, keepdim, out, |v| {
        let s = v.iter().fold(0.0, |acc, s| acc + s.cast(out).to_f64());
        Ok(Scalar::F(s / v.len() as f64))
    })
}

/// Index and value of the max (or min) of a group: first among ties, NaN wins.
fn arg_extreme(v: &[Scalar], max: bool) -> (usize, Scalar) {
    let mut best = 0;
    for i in 1..v.len() {
        let (a, b) = (v[i], v[best]);
        let better = match a.kind() {
            Kind::Float => {
                let (fa, fb) = (a.to_f64(), b.to_f64());
                if fb.is_nan() {
                    false
                } else if fa.is_nan() {
                    true
                } else if max {
                    fa > fb
                } else {
                    fa < fb
                }
            }
            _ => {
                let (ia, ib) = (a.to_i64_trunc(), b.to_i64_trunc());
                if max {
                    ia > ib
                } else {
                    ia < ib
                }
            }
        };
        if better {
            best = i;
        }
    }
    (best, v[best])
}

/// `max(dim)`/`min(dim)`: values and indices.
pub fn max_dim(x: &Tensor, dim: i64, keepdim: bool, max: bool) -> TResult<(Tensor, Tensor)> {
    let name = if max { "max" } else { "min" };
    let d = wrap_dim(dim, x.dim())?;
    if x.dim() > 0 && x.shape[d] == 0 {
        return Err(format!("{name}(): Expected reduction dim {d} to have non-zero size."));
    }
    let dims = if x.dim() == 0 { vec![] } else { vec![d] };
    let values = reduce_with(x, &dims, keepdim, x.dtype(), |v| Ok(arg_extreme(v, max).1))?;
    let indices = reduce_with(x, &dims, keepdim, DType::I64, |v| Ok(Scalar::I(arg_extreme(v, max).0 as i64)))?;
    Ok((values, indices))
}

/// `max()`/`min()` over every element.
pub fn max_all(x: &Tensor, max: bool) -> TResult<Tensor> {
    if x.numel() == 0 {
        let name = if max { "max" } else { "min" };
        return Err(format!("{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."));
    }
    let dims: Vec<usize> = (0..x.dim()).collect();
    reduce_with(x, &dims, false, x.dtype(), |v| Ok(arg_extreme(v, max).1))
}

/// `amax`/`amin` over several dims.
pub fn amax(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, max: bool) -> TResult<Tensor> {
    let d = reduce_dims(x, dims)?;
    let name = if max { "amax" } else { "amin" };
    if dims.is_none_or(|ds| ds.is_empty()) && x.numel() == 0 {
        return Err(format!("{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."));
    }
    if let Some(&z) = d.iter().find(|&&k| x.shape[k] == 0) {
        return Err(format!("{name}(): Expected reduction dim {z} to have non-zero size."));
    }
    reduce_with(x, &d, keepdim, x.dtype(), |v| Ok(arg_extreme(v, max).1))
}

/// `argmax`/`argmin`; without `dim` the index is into the flattened tensor.
pub fn argmax(x: &Tensor, dim: Option<i64>, keepdim: bool, max: bool) -> TResult<Tensor> {
    match dim {
        Some(d) => Ok(max_dim(x, d, keepdim, max)?.1),
        None => {
            let flat = x.reshape(&[-1])?;
            let (_, i) = max_dim(&flat, 0, false, max)?;
            if keepdim {
                let ones: Vec<i64> = vec![1; x.dim()];
                return i.reshape(&ones);
            }
            Ok(i)
        }
    }
}

pub fn any_all(x: &Tensor, dims: Option<&[i64]>, keepdim: bool, all: bool) -> TResult<Tensor> {
    let d = reduce_dims(x, dims)?;
    // PyTorch answers in uint8 for uint8 input, in bool for any other.
    let out = if x.dtype() == DType::U8 { DType::U8 } else { DType::Bool };
    reduce_with(x, &d, keepdim, out, |v| {
        Ok(Scalar::B(if all { v.iter().all(|s| s.to_bool()) } else { v.iter().any(|s| s.to_bool()) }))
    })
}

/// Applies `f` to every line along `dim`, writing a line of the same length; the result is contiguous.
fn along_dim(x: &Tensor, dim: i64, out: DType, f: impl Fn(&[Scalar], &mut [Scalar])) -> TResult<Tensor> {
    let d = wrap_dim(dim, x.dim())?;
    if x.dim() == 0 {
        let mut o = [Scalar::F(0.0)];
        f(&[x.item()?], &mut o);
        return Tensor::scalar(out, o[0]);
    }
    let moved = x.transpose(d as i64, -1)?;
    let vals = moved.scalars();
    let len = x.shape[d];
    let mut res = vals.clone();
    if len > 0 {
        for (src, dst) in vals.chunks(len).zip(res.chunks_mut(len)) {
            f(src, dst);
        }
    }
    let t = Tensor::from_scalars(out, &moved.shape, &res)?;
    Ok(t.transpose(d as i64, -1)?.contiguous_copy())
}

pub fn softmax(x: &Tensor, dim: i64, dtype: Option<DType>, log: bool) -> TResult<Tensor> {
    let out = dtype.unwrap_or(x.dtype());
    if !out.is_float() {
        return Err(format!("\"softmax_lastdim_kernel_impl\" not implemented for '{}'", out.name()));
    }
    along_dim(x, dim, out, |src, dst| {
        let v: Vec<f64> = src.iter().map(|s| s.cast(out).to_f64()).collect();
        let m = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = v.iter().map(|a| (a - m).exp()).collect();
        let s = e.iter().fold(0.0, |acc, v| acc + v);
        for (o, (a, ei)) in dst.iter_mut().zip(v.iter().zip(&e)) {
            *o = Scalar::F(if log { a - m - s.ln() } else { ei / s });
        }
    })
}

/// `cumsum` (`prod` false) or `cumprod` of float32 or float64 lines that lie contiguous along the last dim, over the
/// buffer itself: the running value in f64, each output rounded to the dtype, as [`cumsum`]'s general path (which
/// goes through a `Scalar` per element). `None` where it does not apply.
fn float_scan(x: &Tensor, dim: i64, out: DType, prod: bool) -> Option<Tensor> {
    let last = wrap_dim(dim, x.dim()).is_ok_and(|d| d + 1 == x.dim());
    let whole = x.offset + x.numel() <= x.buf.borrow().len();
    if !last || !whole || !x.is_contiguous() || out != x.dtype() || x.numel() == 0 {
        return None;
    }
    let len = x.shape[x.dim() - 1];
    let (start, n) = (x.offset, x.numel());
    fn run<T: Copy>(v: &[T], len: usize, prod: bool, to: impl Fn(T) -> f64, from: impl Fn(f64) -> T) -> Vec<T> {
        let mut out = Vec::with_capacity(v.len());
        for line in v.chunks(len) {
            let mut acc = if prod { 1.0 } else { 0.0 };
            for &s in line {
                acc = if prod { acc * to(s) } else { acc + to(s) };
                out.push(from(acc));
            }
        }
        out
    }
    let buf = match &*x.buf.borrow() {
        Buf::F32(v) => Buf::F32(run(&v[start..start + n], len, prod, f64::from, |a| a as f32).into()),
        Buf::F64(v) => Buf::F64(run(&v[start..start + n], len, prod, |s| s, |a| a).into()),
        _ => return None,
    };
    Some(Tensor::from_buf(buf, x.shape.clone()))
}

pub fn cumsum(x: &Tensor, dim: i64, dtype: Option<DType>) -> TResult<Tensor> {
    let out = dtype.unwrap_or(if x.dtype().is_float() { x.dtype() } else { DType::I64 });
    if let Some(r) = float_scan(x, dim, out, false) {
        return Ok(r);
    }
    let float = out.is_float();
    along_dim(x, dim, out, |src, dst| {
        let (mut f, mut i) = (0f64, 0i64);
        for (o, s) in dst.iter_mut().zip(src) {
            if float {
                f += s.to_f64();
                *o = Scalar::F(f);
            } else {
                i = i.wrapping_add(s.to_i64_trunc());
                *o = Scalar::I(i);
            }
        }
    })
}

/// `torch.cumprod`: the running product along `dim`, accumulated as `cumsum` accumulates (floats in f64, integers
/// in i64, wrapping), in the dtype `cumsum` would give.
pub fn cumprod(x: &Tensor, dim: i64, dtype: Option<DType>) -> TResult<Tensor> {
    let out = dtype.unwrap_or(if x.dtype().is_float() { x.dtype() } else { DType::I64 });
    if let Some(r) = float_scan(x, dim, out, true) {
        return Ok(r);
    }
    let float = out.is_float();
    along_dim(x, dim, out, |src, dst| {
        let (mut f, mut i) = (1f64, 1i64);
        for (o, s) in dst.iter_mut().zip(src) {
            if float {
                f *= s.to_f64();
                *o = Scalar::F(f);
            } else {
                i = i.wrapping_mul(s.to_i64_trunc());
                *o = Scalar::I(i);
            }
        }
    })
}

/// `torch.matmul` with 1-D promotion and batch broadcasting.
pub fn matmul(a: &Tensor, b: &Tensor) -> TResult<Tensor> {
    if a.dim() == 0 || b.dim() == 0 {
        return Err(format!(
            "both arguments to matmul need to be at least 1D, but they are {}D and {}D",
            a.dim(),
            b.dim()
        ));
    }
    if a.dtype() != b.dtype() {
        return Err(format!(
            "expected m1 and m2 to have the same dtype, but got: {} != {}",
            cname(a.dtype()),
            cname(b.dtype())
        ));
    }
    if a.dtype() == DType::Bool {
        return Err("\"addmm_impl_cpu_\" not implemented for 'Bool'".into());
    }
    if a.dim() == 1 && b.dim() == 1 {
        if a.shape[0] != b.shape[0] {
            return Err(format!("inconsistent tensor size, expected tensor [{}] and src [{}] to have the same number of elements, but got {} and {} elements respectively", a.shape[0], b.shape[0], a.shape[0], b.shape[0]));
        }
        let r = matmul(&a.unsqueeze(0)?, &b.unsqueeze(1)?)?;
        return r.reshape(&[]);
    }
    let a2 = if a.dim() == 1 { a.unsqueeze(0)? } else { a.clone() };
    let b2 = if b.dim() == 1 { b.unsqueeze(1)? } else { b.clone() };
    let (n, k) = (a2.shape[a2.dim() - 2], a2.shape[a2.dim() - 1]);
    let (k2, m) = (b2.shape[b2.dim() - 2], b2.shape[b2.dim() - 1]);
    if k != k2 {
        return Err(format!("mat1 and mat2 shapes cannot be multiplied ({}x{} and {}x{})", n, k, k2, m));
    }
    let batch = super::ops::broadcast_shapes(&a2.shape[..a2.dim() - 2], &b2.shape[..b2.dim() - 2])?;
    let mut sa = batch.clone();
    sa.extend([n, k]);
    let mut sb = batch.clone();
    sb.extend([k, m]);
    let av = a2.broadcast_to(&sa)?.to_f64_vec();
    let bv = b2.broadcast_to(&sb)?.to_f64_vec();
    let nb = numel(&batch);
    let mut out = vec![0f64; nb * n * m];
    for bi in 0..nb {
        let (ao, bo, oo) = (bi * n * k, bi * k * m, bi * n * m);
        for i in 0..n {
            let row = &mut out[oo + i * m..oo + (i + 1) * m];
            for p in 0..k {
                let x = av[ao + i * k + p];
                let brow = &bv[bo + p * m..bo + (p + 1) * m];
                for (o, y) in row.iter_mut().zip(brow) {
                    *o += x * y;
                }
            }
        }
    }
    let mut shape = batch;
    if a.dim() > 1 {
        shape.push(n);
    }
    if b.dim() > 1 {
        shape.push(m);
    }
    Tensor::from_f64(a.dtype(), &shape, &out)
}

fn cname(d: DType) -> &'static str {
    match d {
        DType::F32 => "float",
        DType::F64 => "double",
        DType::I64 => "long int",
        DType::I32 => "int",
        DType::I16 => "short int",
        DType::I8 => "signed char",
        DType::U8 => "unsigned char",
        DType::Bool => "bool",
        DType::F16 => "c10::Half",
        DType::BF16 => "c10::BFloat16",
    }
}

/// `torch.cat`: empty 1-D operands are skipped, dtypes promote.
pub fn cat(ts: &[Tensor], dim: i64) -> TResult<Tensor> {
    if ts.is_empty() {
        return Err("torch.cat(): expected a non-empty list of Tensors".into());
    }
    for (i, t) in ts.iter().enumerate() {
        if t.dim() == 0 {
            return Err(format!("zero-dimensional tensor (at position {i}) cannot be concatenated"));
        }
    }
    let ops: Vec<Operand> = ts.iter().map(|t| Operand::T(t.clone())).collect();
    let refs: Vec<&Operand> = ops.iter().collect();
    let dt = result_type(&refs);
    let parts: Vec<&Tensor> = ts.iter().filter(|t| !(t.dim() == 1 && t.shape[0] == 0)).collect();
    if parts.is_empty() {
        return Tensor::zeros(dt, &[0]);
    }
    let nd = parts[0].dim();
    let d = wrap_dim(dim, nd)?;
    let mut shape = parts[0].shape.clone();
    shape[d] = 0;
    for (i, t) in parts.iter().enumerate() {
        if t.dim() != nd {
            return Err(format!("Tensors must have same number of dimensions: got {} and {}", nd, t.dim()));
        }
        for k in 0..nd {
            if k != d && t.shape[k] != parts[0].shape[k] {
                return Err(format!("Sizes of tensors must match except in dimension {}. Expected size {} but got size {} for tensor number {} in the list.", d, parts[0].shape[k], t.shape[k], i));
            }
        }
        shape[d] += t.shape[d];
    }
    let out = Tensor::zeros(dt, &shape)?;
    let mut start = 0i64;
    for t in parts {
        let len = t.shape[d] as i64;
        let dst = out.narrow(d as i64, start, len)?;
        let vals: Vec<Scalar> = t.scalars();
        dst.write_scalars(&vals);
        start += len;
    }
    Ok(out)
}

pub fn stack(ts: &[Tensor], dim: i64) -> TResult<Tensor> {
    if ts.is_empty() {
        return Err("stack expects a non-empty TensorList".into());
    }
    for (i, t) in ts.iter().enumerate() {
        if t.shape != ts[0].shape {
            return Err(format!(
                "stack expects each tensor to be equal size, but got {} at entry 0 and {} at entry {}",
                fmt_shape(&ts[0].shape),
                fmt_shape(&t.shape),
                i
            ));
        }
    }
    let d = wrap_dim(dim, ts[0].dim() + 1)? as i64;
    let parts: Vec<Tensor> = ts.iter().map(|t| t.unsqueeze(d)).collect::<TResult<_>>()?;
    cat(&parts, d)
}

/// `triu`/`tril` of the last two dims.
pub fn triangle(x: &Tensor, k: i64, upper: bool) -> TResult<Tensor> {
    if x.dim() < 2 {
        return Err(format!("{}: input tensor must have at least 2 dimensions", if upper { "triu" } else { "tril" }));
    }
    let (r, c) = (x.shape[x.dim() - 2], x.shape[x.dim() - 1]);
    let zero = Scalar::I(0).cast(x.dtype());
    let vals: Vec<Scalar> = x
        .scalars()
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let (row, col) = ((i / c.max(1)) % r.max(1), i % c.max(1));
            let d = col as i64 - row as i64;
            if (upper && d >= k) || (!upper && d <= k) {
                *v
            } else {
                zero
            }
        })
        .collect();
    Tensor::from_scalars(x.dtype(), &x.shape, &vals)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct path over contiguous last-dim lines (`float_scan`) gives the general path's bits: the same lines
    /// read through a transposed view take the general one.
    #[test]
    fn float_scans_over_the_buffer_match_the_general_path() {
        let vals: Vec<f64> = (0..150).map(|i| ((i * 37 % 101) as f64 - 50.0) / 7.0 + 1e-3 * i as f64).collect();
        for dtype in [DType::F32, DType::F64] {
            let stored = Tensor::from_f64(dtype, &[50, 3], &vals).unwrap();
            let strided = stored.transpose(0, 1).unwrap(); // [3, 50], lines 3 apart: the general path
            let contiguous = strided.contiguous_copy(); // the same lines, contiguous: the direct path
            assert!(float_scan(&strided, 1, dtype, false).is_none());
            assert!(float_scan(&contiguous, 1, dtype, false).is_some());
            for prod in [false, true] {
                let scan = if prod { cumprod } else { cumsum };
                let (want, got) = (scan(&strided, 1, None).unwrap(), scan(&contiguous, -1, None).unwrap());
                let bits = |t: &Tensor| t.to_f64_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!((got.dtype(), bits(&got)), (dtype, bits(&want)), "{dtype:?} prod={prod}");
            }
        }
    }
}
