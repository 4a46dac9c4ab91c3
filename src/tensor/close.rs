//! The one tolerance by which every engine's outputs are compared with the reference's (and PyTorch's goldens).
//!
//! f32 (and the 16-bit floats): rtol 1e-5, atol 1e-6; f64: rtol 1e-9, atol 1e-12; integers and bools exactly. NaN
//! matches NaN, an infinity matches only the same infinity; dtype and shape must be equal.
//!
//! The relative part is taken of the larger of the element and the tensor's **rounding scale**: the largest
//! magnitude among the finite elements that differ at all (the smaller of the two values there). A sum of many
//! terms in f32 (a matmul's dot products, accumulated in f32 lanes as PyTorch's CPU kernels do) is off by a few
//! units of rounding of its *terms*, not of its result: where the terms cancel, the result is small and its own
//! relative error unbounded. PyTorch's own `x @ w` at [8, 512] @ [512, 1024] leaves 33 of 8192 elements outside
//! a purely element-wise bound from the exactly accumulated result, all within 3.5e-7 of the largest element (at
//! K = 4096: 2.7e-7). Values reproduced exactly (a mask's -1e9, a padding's zeros) do not widen the scale, and an
//! element wrong by more than rtol of the largest noisy value is still reported.

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

/// The largest magnitude among the finite elements where `got` and `want` differ, taking the smaller of the two
/// there (so that an element wrong by a large amount does not widen its own bound); 0 where none differ.
fn rounding_scale(got: &[f64], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .filter(|(x, y)| x != y && x.is_finite() && y.is_finite())
        .map(|(x, y)| x.abs().min(y.abs()))
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(values: &[f64]) -> Tensor {
        Tensor::from_f64(DType::F32, &[values.len()], values).unwrap()
    }

    #[test]
    fn cancellation_is_measured_against_the_noisy_scale() {
        // A dot product's near-zero result off by rounding of its terms (3e-7 of the largest result) passes; the
        // same error with no other element differing is outside the element-wise bound.
        let want = f32s(&[30.0, 0.01, -12.0]);
        let got = f32s(&[30.0 + 30.0 * 2e-7, 0.01 + 9e-6, -12.0]);
        assert!(compare_close("x", &got, &want).is_ok());
        let alone = f32s(&[30.0, 0.01 + 9e-6, -12.0]);
        assert!(compare_close("x", &alone, &want).is_err());
    }

    #[test]
    fn exact_values_and_wrong_values_do_not_widen_the_bound() {
        // A mask's -1e9 reproduced exactly does not widen the bound of the small elements.
        let want = f32s(&[-1e9, -1e9, 0.5, 0.001]);
        let got = f32s(&[-1e9, -1e9, 0.5, 0.0011]);
        assert!(compare_close("x", &got, &want).is_err());
        // An element far off is reported, though it would widen the others' bound.
        let want = f32s(&[1000.0, 0.001]);
        let got = f32s(&[1100.0, 0.0011]);
        let err = compare_close("x", &got, &want).unwrap_err();
        assert!(err.contains("1 of 2 elements differ"), "{err}");
        assert!(compare_close("x", &f32s(&[1100.0, 0.001]), &f32s(&[1000.0, 0.001])).is_err());
    }
}
