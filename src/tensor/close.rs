//! The one tolerance by which every engine's outputs are compared with the reference's (and PyTorch's goldens).
//!
//! f32 (and the 16-bit floats): rtol 1e-5, atol 1e-6; f64: rtol 1e-9, atol 1e-12; integers and bools exactly. NaN
//! matches NaN, an infinity matches only the same infinity; dtype and shape must be equal.
//!
//! The relative part is taken of the larger of the element and the tensor's **rounding scale**: the median
//! magnitude of the finite elements that differ at all (the smaller of the two values at each). A sum of many terms
//! in f32 (a matmul's dot products, accumulated in f32 lanes as PyTorch's CPU kernels do) is off by a few units of
//! rounding of its *terms*, whose magnitude the typical result shows (for a dot product of K terms of random sign,
//! both grow as the square root of K), not of its own value: where the terms cancel, the result is small and its
//! own relative error unbounded. PyTorch's own `x @ w` at [8, 512] @ [512, 1024] leaves 33 of 8192 elements outside
//! a purely element-wise bound from the exactly accumulated result, all within 2.2e-6 of the median (at K = 4096:
//! 1.9e-6). The median, not the largest value: a few large elements (a mask's -10000 off by one rounding) do not
//! widen the bound of the many small ones, and values reproduced exactly do not count. A tensor more than half of
//! whose differing elements are such large values still widens it: a tolerance from outputs alone cannot tell
//! those from a dot product's terms.

use super::{DType, Tensor};

/// Compares `got` with `want`; the error says how many elements differ, the first and the worst.
pub fn compare_close(what: &str, got: &Tensor, want: &Tensor) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!("{what}: dtype {} but expected {}", got.dtype().annotation(), want.dtype().annotation()));
    }
    if got.shape != want.shape {
        return Err(format!("{what}: shape {:?} but expected {:?}", got.shape, want.shape));
    }
    let (rtol, atol) = match got.dtype() {
        DType::F64 => (1e-9, 1e-12),
        DType::F32 | DType::F16 | DType::BF16 => (1e-5, 1e-6),
        _ => (0.0, 0.0),
    };
    let (g, w) = (got.to_f64_vec(), want.to_f64_vec());
    let scale = rounding_scale(&g, &w);
    let mut bad = 0usize;
    let mut first = None;
    let mut worst = 0f64;
    for (i, (&x, &y)) in g.iter().zip(&w).enumerate() {
        let ok = if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs().max(scale)
        };
        if !ok {
            bad += 1;
            worst = worst.max((x - y).abs());
            first.get_or_insert((i, x, y));
        }
    }
    match first {
        None => Ok(()),
        Some((i, x, y)) => Err(format!(
            "{what}: {bad} of {} elements differ (first at flat index {i}: got {x}, expected {y}; worst abs diff {worst:e})",
            g.len()
        )),
    }
}

/// The median magnitude among the finite elements where `got` and `want` differ, taking the smaller of the two at
/// each (so that an element wrong by a large amount does not widen the bound); 0 where none differ.
fn rounding_scale(got: &[f64], want: &[f64]) -> f64 {
    let mut m: Vec<f64> = got
        .iter()
        .zip(want)
        .filter(|(x, y)| x != y && x.is_finite() && y.is_finite())
        .map(|(x, y)| x.abs().min(y.abs()))
        .collect();
    if m.is_empty() {
        return 0.0;
    }
    let k = m.len() / 2;
    *m.select_nth_unstable_by(k, f64::total_cmp).1
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(values: &[f64]) -> Tensor {
        Tensor::from_f64(DType::F32, &[values.len()], values).unwrap()
    }

    #[test]
    fn cancellation_is_measured_against_the_noisy_scale() {
        // A dot product's near-zero result off by rounding of its terms (2e-7 of the typical result) passes; the
        // same error with no other element differing is outside the element-wise bound.
        let want = f32s(&[30.0, 0.01, -12.0, 20.0]);
        let got = f32s(&[30.0 + 30.0 * 2e-7, 0.01 + 9e-6, -12.0 - 12.0 * 2e-7, 20.0 + 20.0 * 2e-7]);
        assert!(compare_close("x", &got, &want).is_ok());
        let alone = f32s(&[30.0, 0.01 + 9e-6, -12.0, 20.0]);
        assert!(compare_close("x", &alone, &want).is_err());
    }

    #[test]
    fn exact_values_and_a_few_large_ones_do_not_widen_the_bound() {
        // A mask's -1e9 reproduced exactly does not widen the bound of the small elements.
        let want = f32s(&[-1e9, -1e9, 0.5, 0.001]);
        let got = f32s(&[-1e9, -1e9, 0.5, 0.0011]);
        assert!(compare_close("x", &got, &want).is_err());
        // Nor does a large element off by one rounding (a review's cases: 1e4 and -1.25e8 one ulp off).
        let want = f32s(&[1e4, 0.001, 0.002, 0.5]);
        let got = f32s(&[1e4 + 0.001, 0.05, -0.05, 0.59]);
        let err = compare_close("x", &got, &want).unwrap_err();
        assert!(err.contains("3 of 4 elements differ"), "{err}");
        let want = f32s(&[-1.25e8, 0.3, -0.2]);
        let got = f32s(&[-1.25e8 + 8.0, 1000.0, -1000.0]);
        assert!(compare_close("x", &got, &want).is_err());
    }
}
