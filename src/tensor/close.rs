//! The one tolerance by which every engine's outputs are compared with the reference's (and PyTorch's goldens).
//!
//! f32 (and the 16-bit floats): rtol 1e-5, atol 1e-6; f64: rtol 1e-9, atol 1e-12; integers and bools exactly. NaN
//! matches NaN, an infinity matches only the same infinity; dtype and shape must be equal.

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
    let mut bad = 0usize;
    let mut first = None;
    let mut worst = 0f64;
    for (i, (&x, &y)) in g.iter().zip(&w).enumerate() {
        let ok = if x.is_nan() || y.is_nan() {
            x.is_nan() && y.is_nan()
        } else if x.is_infinite() || y.is_infinite() {
            x == y
        } else {
            (x - y).abs() <= atol + rtol * y.abs()
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
