//! The C backend's layout for an f32 max, min, argmax or argmin whose one reduction variable walks every load
//! contiguously (a max over the last dim: softmax's row maximum, `scores.max(dim=1)` over classes) where the row
//! layout does not apply: [`LANES`] lanes, lane `l` folding the reduction indices `l, l + LANES, ...` in increasing
//! order, so that the fold vectorizes (the plain nest compares one element at a time, in double, with a branch:
//! about 1.5 ns per element on yolact's 1602 rows of 80 classes). The lanes then combine into the serial fold's
//! result: each lane keeps the index of the element it holds, and the combination picks what the serial fold over
//! all indices would have kept (see [`extrema_reduction`]), so values, indices, signed zeros and ties are exactly
//! the plain nest's.

use std::fmt::Write;

use super::gemm::unit_stride;
use super::source::store_result;
use crate::lower::kernel::{render, Kernel, RedOp};
use crate::tensor::DType;

/// Lanes of the fold: one AVX2 vector of f32 values and one of their 32-bit indices.
pub const LANES: usize = 8;

/// Lanes of the fold where the value loads a one-byte dtype (a bool mask): GCC 12 found no vector type for 8 of
/// them and left the fold scalar (litgpt's argmax over 32000 tokens after a `masked_fill`: 1.25 ms, 0.12 with 16
/// lanes). 16 lanes measured about 5% slower than 8 on yolact's rows of 80, so only these take them.
pub const BYTE_LANES: usize = 16;

/// A loop nest for an f32 max, min, argmax or argmin with exactly one reduction variable of extent over 1, of at
/// least `2 * LANES` indices ([`BYTE_LANES`] where it loads a bool or byte), that steps every load by 0 or 1. Each lane folds its indices as the serial fold does
/// (a greater value, for max and min also a NaN, replaces the kept one; for arg reductions a NaN replaces a
/// non-NaN one), keeping the index of what it holds. The serial fold's result is the first index of the greatest
/// value (values equal under `==`, so a `-0.0` before a `0.0` is kept) when no element is NaN; with NaNs, the
/// first NaN for arg reductions and the last one for max and min. Each lane holds its own first greatest value (its
/// last or first NaN), so the combination takes, among the lanes, a NaN over a number, between NaNs the smaller
/// index (arg) or the larger one (max, min), and between numbers the greater value, ties to the smaller index.
/// `None` where this does not apply.
pub fn extrema_reduction(k: &Kernel, indent: &str) -> Option<String> {
    let red = k.reduce.as_ref()?;
    if k.value.dtype() != DType::F32 || !matches!(red.op, RedOp::Max | RedOp::Min | RedOp::ArgMax | RedOp::ArgMin) {
        return None;
    }
    let nontrivial: Vec<usize> = (0..red.extents.len()).filter(|&j| red.extents[j] > 1).collect();
    let &[j] = nontrivial.as_slice() else { return None };
    let n = red.extents[j];
    let base = k.domain.len();
    let inner = base + j;
    let lanes = if loads_byte(&k.value) { BYTE_LANES } else { LANES };
    if n < 2 * lanes || n > i32::MAX as usize || !unit_stride(&k.value, inner) {
        return None;
    }
    let arg = matches!(red.op, RedOp::ArgMax | RedOp::ArgMin);
    let (cmp, init) = if matches!(red.op, RedOp::Max | RedOp::ArgMax) { (">", "-INFINITY") } else { ("<", "INFINITY") };
    // A lane takes v where the serial fold would: a better value, or a NaN (any NaN for max/min: the last one
    // stays; for arg reductions only over a number: the first one stays).
    let nan_take = if arg { "((v != v) & (a == a))" } else { "(v != v)" };
    let mut s = String::new();
    let mut ind = indent.to_string();
    let outer: Vec<usize> = (0..base).filter(|&v| k.domain[v] > 1).collect();
    for &v in &outer {
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", m = k.domain[v]);
        ind.push_str("  ");
    }
    for (q, &m) in red.extents.iter().enumerate() {
        if m == 1 {
            let _ = writeln!(s, "{ind}const int64_t i{v} = 0; (void)i{v};", v = base + q);
        }
    }
    let value = render(&k.value, "a");
    let _ = writeln!(
        s,
        "{ind}float acc[{lanes}]; int32_t arg[{lanes}];\n{ind}for (int l = 0; l < {lanes}; l++) {{ acc[l] = {init}; \
         arg[l] = l; }}"
    );
    // Bitwise `|` and `&`: with `||` and `&&` GCC 12 kept branches and did not vectorize the lane loop (yolact's
    // 1602 rows of 80: 0.45 ms scalar, slower than the plain nest's 0.19; 0.07 ms vectorized). The index goes in
    // by a bit mask (see `source::row_reduction`: a select became a masked store).
    let update = format!(
        "float v = (float)({value}); float a = acc[l]; int take = (v {cmp} a) | {nan_take}; acc[l] = take ? v : a; \
         int32_t m = -(int32_t)take; arg[l] = (arg[l] & ~m) | ((int32_t)i{inner} & m);"
    );
    let full = n - n % lanes;
    let _ = writeln!(s, "{ind}for (int64_t c = 0; c < {full}; c += {lanes}) {{");
    // See `c.rs`'s inner_loop_pragmas: GCC 12.2 miscompiled selects in short loops it unrolled completely.
    let _ = writeln!(s, "{ind}  #pragma GCC unroll 1\n{ind}  FF_SIMD");
    let _ = writeln!(s, "{ind}  for (int l = 0; l < {lanes}; l++) {{ int64_t i{inner} = c + l; {update} }}");
    let _ = writeln!(s, "{ind}}}");
    if full < n {
        let _ = writeln!(
            s,
            "{ind}for (int64_t i{inner} = {full}; i{inner} < {n}; i{inner}++) {{ int l = (int)(i{inner} - {full}); \
             {update} }}"
        );
    }
    // Combine the lanes in order: NaN over number; between NaNs the smaller index (arg) or the larger (max, min);
    // between numbers the better value, ties to the smaller index.
    let nan_order = if arg { "<" } else { ">" };
    let _ = writeln!(s, "{ind}float best = acc[0]; int32_t bi = arg[0];");
    let _ = writeln!(
        s,
        "{ind}for (int l = 1; l < {lanes}; l++) {{ float v = acc[l]; int32_t r = arg[l]; int take = (v != v) ? (best \
         == best || r {nan_order} bi) : (best == best && (v {cmp} best || (v == best && r < bi))); best = take ? v : \
         best; bi = take ? r : bi; }}"
    );
    let fin = if arg { "bi" } else { "best" };
    let _ = writeln!(s, "{ind}{}", store_result(k, fin));
    for _ in &outer {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    Some(s)
}

/// Whether `e` loads a one-byte dtype (bool, uint8, int8).
fn loads_byte(e: &crate::lower::kernel::Expr) -> bool {
    use crate::lower::kernel::Expr;
    match e {
        Expr::Load { dtype, .. } | Expr::Gather { dtype, .. } => dtype.size() == 1,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => loads_byte(a),
        Expr::Binary(_, _, _, a, b) => loads_byte(a) || loads_byte(b),
        Expr::Where(c, a, b) => loads_byte(c) || loads_byte(a) || loads_byte(b),
        _ => false,
    }
}
