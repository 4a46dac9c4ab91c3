//! Matrix functions of the last two dims: `torch.linalg.matrix_exp`.

use super::{DType, TResult, Tensor};

/// `torch.linalg.matrix_exp(x)`: the exponential of each square matrix of the last two dims, computed in f64 by
/// scaling and squaring (the matrix scaled by 2^-s to a 1-norm of at most 1/2, its Taylor series summed until the
/// terms no longer change the sum, then squared s times), then rounded to the dtype. For f32 that is within the
/// tolerance of PyTorch's own f32 computation; a NaN anywhere in a matrix makes it all NaN, as PyTorch's does.
pub fn matrix_exp(x: &Tensor) -> TResult<Tensor> {
    matrix_exp_check(x.dtype(), &x.shape)?;
    let n = x.shape[x.dim() - 1];
    let vals: Vec<f64> = x.scalars().iter().map(|s| s.to_f64()).collect();
    let mut out = Vec::with_capacity(vals.len());
    for a in vals.chunks(n * n.max(1)).filter(|_| n > 0) {
        out.extend(expm(a, n));
    }
    Tensor::from_f64(x.dtype(), &x.shape, &out)
}

/// PyTorch's errors for `matrix_exp` of a tensor of this dtype and shape.
pub fn matrix_exp_check(dtype: DType, shape: &[usize]) -> TResult<()> {
    if !dtype.is_float() {
        return Err(format!(
            "linalg.matrix_exp: Expected a floating point or complex tensor as input. Got {}",
            dtype.name()
        ));
    }
    let r = shape.len();
    if r < 2 {
        return Err("linalg.matrix_exp: The input tensor A must have at least 2 dimensions.".into());
    }
    let (m, n) = (shape[r - 2], shape[r - 1]);
    if m != n {
        return Err(format!(
            "linalg.matrix_exp: A must be batches of square matrices, but they are {m} by {n} matrices"
        ));
    }
    Ok(())
}

fn matmul(a: &[f64], b: &[f64], n: usize) -> Vec<f64> {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        for k in 0..n {
            let aik = a[i * n + k];
            for j in 0..n {
                c[i * n + j] += aik * b[k * n + j];
            }
        }
    }
    c
}

fn norm1(a: &[f64], n: usize) -> f64 {
    (0..n).map(|j| (0..n).map(|i| a[i * n + j].abs()).sum::<f64>()).fold(0.0, f64::max)
}

fn expm(a: &[f64], n: usize) -> Vec<f64> {
    if a.iter().any(|v| v.is_nan()) {
        return vec![f64::NAN; n * n];
    }
    let norm = norm1(a, n);
    let mut s = 0;
    while s < 1100 && norm / 2f64.powi(s) > 0.5 {
        s += 1;
    }
    let scale = 2f64.powi(-s);
    let b: Vec<f64> = a.iter().map(|v| v * scale).collect();
    let mut sum = vec![0.0; n * n];
    for i in 0..n {
        sum[i * n + i] = 1.0;
    }
    let mut term = sum.clone();
    for k in 1..40 {
        term = matmul(&term, &b, n);
        let inv = 1.0 / k as f64;
        term.iter_mut().for_each(|v| *v *= inv);
        let before = sum.clone();
        sum.iter_mut().zip(&term).for_each(|(x, t)| *x += t);
        if sum == before {
            break;
        }
    }
    for _ in 0..s {
        sum = matmul(&sum, &sum, n);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// exp of a diagonal matrix is the exponential of its entries; of a nilpotent one, I + N.
    #[test]
    fn known_exponentials() {
        let d = Tensor::from_f64(DType::F64, &[2, 2], &[1.0, 0.0, 0.0, -2.0]).unwrap();
        let e = matrix_exp(&d).unwrap().scalars();
        let rel = |g: f64, w: f64| ((g - w) / w).abs();
        assert!(rel(e[0].to_f64(), 1f64.exp()) < 1e-14 && rel(e[3].to_f64(), (-2f64).exp()) < 1e-14, "{e:?}");
        assert_eq!((e[1].to_f64(), e[2].to_f64()), (0.0, 0.0));
        let nil = Tensor::from_f64(DType::F64, &[2, 2], &[0.0, 3.0, 0.0, 0.0]).unwrap();
        let e = matrix_exp(&nil).unwrap().scalars();
        assert_eq!(e.iter().map(|v| v.to_f64()).collect::<Vec<_>>(), vec![1.0, 3.0, 0.0, 1.0]);
        // [[1, 2], [3, 4]], as PyTorch computes it in float64.
        let m = Tensor::from_f64(DType::F64, &[2, 2], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let e: Vec<f64> = matrix_exp(&m).unwrap().scalars().iter().map(|v| v.to_f64()).collect();
        let want = [51.96895619870503, 74.73656456700323, 112.10484685050488, 164.07380304920986];
        for (g, w) in e.iter().zip(want) {
            assert!((g - w).abs() <= 1e-13 * w, "{g} vs {w}");
        }
        assert!(matrix_exp(&Tensor::from_f64(DType::F32, &[2, 3], &[0.0; 6]).unwrap()).is_err());
    }
}
