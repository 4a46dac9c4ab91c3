//! The C layout of an elementwise kernel that transposes: its output is contiguous along one loop variable and its
//! loads along another (yolov3's and fcos's `permute(...).contiguous()` with a sigmoid on the way, a channels-first
//! tensor read channels-last). The plain nest walks the output in order and reads a column of the input: every load
//! of the innermost loop is on a line of its own, and with dozens of rows in flight the hardware prefetchers lose
//! track, so that a transposing kernel whose input comes from memory waits on it. Here the output's variable runs in
//! bands of [`TILE`] and the loads' variable in runs of up to 256 (the tile fills [`STAGE_BYTES`]): the tile's values
//! are computed with the loads' variable innermost (rows of the input read as streams, vectorized) into a local
//! array, then stored with the output's variable innermost (rows of the output), 32-bit values through 8 x 8
//! transposes in registers ([`transposed_store`]).
//! Every point computes the same expression as in the nest, so the bits are the same; the points run in another
//! order, which an elementwise kernel allows (it reads, at each point, only the element it writes or elements no
//! point writes, and reads all of a tile before it writes any of it).
//!
//! Why long runs: a 16 x 16 tile reads 64 bytes of each input row per tile, which measured no faster than the nest
//! with inputs read from memory; rows read whole (6.4 kB in yolov3) measured yolov3 0.68 -> 0.49 ms and fcos 0.22 ->
//! 0.18 ms (`compare --measure`, one thread, two sittings; see ARCHITECTURE.md). The rows are still runs that start
//! anywhere and cross pages: each row's successor is prefetched while it is computed ([`prefetches`]). With the
//! prefetches and the stores transposed in registers, runs of 256 (a 16 kB tile, in L1) measured better than whole
//! rows (128 kB, in L2): yolov3's kernel profiled 0.444 -> 0.373 ms, fcos's 0.126 -> 0.111; `compare --measure`
//! with inputs from L3, two sittings, yolov3 0.550 and 0.523 -> 0.522 and 0.520 ms, fcos 0.173 and 0.168 -> 0.162.

use std::fmt::Write;

use crate::lower::index::{Atom, Idx};
use crate::lower::kernel::{c_type, render, Expr, Kernel};
use crate::tensor::DType;

/// The tile's side along the output's variable: 16 f32 lanes, one AVX-512 vector or a 64-byte line.
pub const TILE: usize = 16;

/// The most bytes of a tile (a local array: it must fit the stack of any thread that runs kernels, and stays in L1).
pub const STAGE_BYTES: usize = 16 << 10;

/// The fewest elements along the loads' variable for the tile to pay: a shorter run of each row is not a stream
/// (ultralytics' DFL, 30 long, measured slower tiled).
pub const MIN_RUN: usize = 64;

/// The tiled layout of `k` (a piece of a kernel: see `c::render_kernel`), or `None` where it does not apply: a
/// reduction or an ordered kernel (a scatter, one that reads its own output), a value with gathers or dots, a
/// load or store through a division, modulo, view inverse or index read of a loop variable, or no pair of variables where the
/// store is contiguous along the innermost loop `v`, the loads move at least [`TILE`] elements along `v` and at
/// least 8 times less along another loop `u`, and the store moves at least [`TILE`] along `u`; `v` at least
/// [`TILE`] long and `u` at least [`MIN_RUN`]. `FUNCFUSE_TILE=0` turns it off (the nest everywhere).
pub fn transposed(k: &Kernel) -> Option<String> {
    if std::env::var("FUNCFUSE_TILE").is_ok_and(|v| v == "0") {
        return None;
    }
    if k.reduce.is_some() || k.epilogue.is_some() || k.ordered() {
        return None;
    }
    let mut loads = Vec::new();
    if !collect_loads(&k.value, &mut loads) || !affine(&k.store) {
        return None;
    }
    // How far a variable moves the loads per step, in all (the sum) and at most (the largest).
    let moves =
        |w: usize| loads.iter().map(|(at, _, _)| stride(at, w)).fold((0i64, 0i64), |(s, m), x| (s + x, m.max(x)));
    let loops: Vec<(usize, usize)> = k.domain.iter().copied().enumerate().filter(|&(_, n)| n != 1).collect();
    let &(v, nv) = loops.last()?;
    let ((load_v, _), store_v) = (moves(v), stride(&k.store, v));
    if nv < TILE || store_v != 1 || load_v < TILE as i64 {
        return None;
    }
    // The other loop the loads move along least (the last such on ties: the innermost), each by at most one
    // element. A load that steps further along it (yolact's and ssd's per-row maximum of a softmax, 3 and 6 apart)
    // would be a strided read per element in the tile where the nest reads it once per row: both that and the
    // load hoisted out of the tile's rows into a small array measured slower than the nest.
    let mut best: Option<(i64, usize, usize)> = None;
    for &(u, nu) in &loops[..loops.len() - 1] {
        let ((lu, most), su) = (moves(u), stride(&k.store, u));
        if nu >= MIN_RUN && su >= TILE as i64 && most <= 1 && lu * 8 <= load_v && best.is_none_or(|(l, _, _)| lu <= l) {
            best = Some((lu, u, nu));
        }
    }
    let (_, u, nu) = best?;
    let t = c_type(k.out_dtype);
    let mut s = String::new();
    let mut ind = String::from("  ");
    let outer: Vec<&(usize, usize)> = loops.iter().filter(|&&(w, _)| w != u && w != v).collect();
    for &&(w, n) in &outer {
        let _ = writeln!(s, "{ind}for (int64_t i{w} = 0; i{w} < {n}; i{w}++) {{");
        ind.push_str("  ");
    }
    let tv_n = TILE;
    let tu_n = (STAGE_BYTES / (TILE * k.out_dtype.size())).min(nu);
    let _ = writeln!(s, "{ind}for (int64_t tv = 0; tv < {nv}; tv += {tv_n}) {{");
    let _ = writeln!(s, "{ind}  const int64_t ev = {nv} - tv < {tv_n} ? {nv} - tv : {tv_n};");
    let _ = writeln!(s, "{ind}  for (int64_t tu = 0; tu < {nu}; tu += {tu_n}) {{");
    let _ = writeln!(s, "{ind}    const int64_t eu = {nu} - tu < {tu_n} ? {nu} - tu : {tu_n};");
    let _ = writeln!(s, "{ind}    {t} tl[{tv_n}][{tu_n}];");
    let body = format!("tl[jv][ju] = ({t})({});", render(&k.value, "a"));
    let ahead = prefetches(&loads, u, v, nv, &ind);
    let store = format!("a0[{}] = tl[jv][ju];", k.store.render());
    // (the tile's variable, its extent, its tile's start, the loop it steps)
    let (along_v, along_u) = (("jv", "ev", "tv", v), ("ju", "eu", "tu", u));
    let blocks = (k.out_dtype.size() == 4 && signed_stride(&k.store, v) == 1)
        .then(|| transposed_store(k, (u, signed_stride(&k.store, u)), v, tu_n, &ind));
    for (first, second, text) in [(along_v, along_u, body), (along_u, along_v, store)] {
        if let (Some(blocks), true) = (&blocks, first.3 == u) {
            s.push_str(blocks);
            continue;
        }
        let _ = writeln!(s, "{ind}    for (int64_t {j} = 0; {j} < {e}; {j}++) {{", j = first.0, e = first.1);
        let _ = writeln!(s, "{ind}      const int64_t i{} = {} + {};", first.3, first.2, first.0);
        if first.3 == v {
            s.push_str(&ahead);
        }
        // The values' loop is left rolled as every innermost loop of a kernel (`c::inner_loop_pragmas`); the stores'
        // loop is a copy with no select, which GCC may unroll.
        let unroll = if first.3 == v { format!("\n{ind}      #pragma GCC unroll 1") } else { String::new() };
        let _ = writeln!(s, "{ind}      #pragma GCC ivdep{unroll}");
        let _ = writeln!(s, "{ind}      for (int64_t {j} = 0; {j} < {e}; {j}++) {{", j = second.0, e = second.1);
        let _ = writeln!(s, "{ind}        const int64_t i{} = {} + {};", second.3, second.2, second.0);
        let _ = writeln!(s, "{ind}        {text}\n{ind}      }}\n{ind}    }}");
    }
    let _ = writeln!(s, "{ind}  }}\n{ind}}}");
    for _ in &outer {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    Some(s)
}

/// The C declaration of the 8 x 8 transposes that store a tile of 32-bit values ([`transposed_store`]): row `r`
/// of the destination (rows `ds` elements apart) gets column `r` of the source (rows `ss` apart), the bits
/// copied (moves and shuffles: NaN payloads and signed zeros stay as they are). In AVX registers where the target
/// has them (24 shuffles for 64 elements), else element by element.
pub const TRANSPOSE_PRELUDE: &str = r#"#if defined(__AVX__)
#include <immintrin.h>
static inline void ff_tr8x8(const void* src, int64_t ss, void* dst, int64_t ds) {
  const float* s = (const float*)src;
  float* d = (float*)dst;
  __m256 r[8], t[8];
  for (int i = 0; i < 8; i++) r[i] = _mm256_loadu_ps(s + i * ss);
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 8; i += 4) {
    r[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for (int i = 0; i < 4; i++) {
    _mm256_storeu_ps(d + i * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x20));
    _mm256_storeu_ps(d + (i + 4) * ds, _mm256_permute2f128_ps(r[i], r[i + 4], 0x31));
  }
}
#else
static inline void ff_tr8x8(const void* src, int64_t ss, void* dst, int64_t ds) {
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) memcpy((char*)dst + 4 * (i * ds + j), (const char*)src + 4 * (j * ss + i), 4);
}
#endif
"#;

/// The tile's store phase for 32-bit values whose store steps by +1 along `v` and by `su` along `u`: blocks of 8
/// rows of the output (8 values of `u`) by 8 along `v`, each transposed in registers from the tile ([`TRANSPOSE_PRELUDE`])
/// and stored as 8 runs of 8 elements, and the rest of each block (a band narrower than 8 along `v`, or fewer than
/// 8 rows left) element by element. Left to GCC, the plain store loop read the tile down its columns one element at a
/// time (a load and an insert per element): yolov3's level-2 piece (388k sigmoids) 0.27 -> 0.21 ms in a C harness,
/// inputs in cache.
fn transposed_store(k: &Kernel, (u, su): (usize, i64), v: usize, tu_n: usize, ind: &str) -> String {
    let mut s = String::new();
    let store = k.store.render();
    let _ = writeln!(s, "{ind}    for (int64_t bu = 0; bu < eu; bu += 8) {{");
    let _ = writeln!(s, "{ind}      const int64_t nu = eu - bu < 8 ? eu - bu : 8;");
    let _ = writeln!(s, "{ind}      int64_t bv = 0;");
    let _ = writeln!(s, "{ind}      for (; nu == 8 && bv + 8 <= ev; bv += 8) {{");
    let _ = writeln!(s, "{ind}        const int64_t i{u} = tu + bu;\n{ind}        const int64_t i{v} = tv + bv;");
    let _ = writeln!(s, "{ind}        ff_tr8x8(&tl[bv][bu], {tu_n}, &a0[{store}], {su});\n{ind}      }}");
    let _ = writeln!(s, "{ind}      for (int64_t ju = bu; ju < bu + nu; ju++) {{");
    let _ = writeln!(s, "{ind}        const int64_t i{u} = tu + ju;");
    let _ = writeln!(s, "{ind}        for (int64_t jv = bv; jv < ev; jv++) {{");
    let _ = writeln!(s, "{ind}          const int64_t i{v} = tv + jv;\n{ind}          a0[{store}] = tl[jv][ju];");
    let _ = writeln!(s, "{ind}        }}\n{ind}      }}\n{ind}    }}");
    s
}

/// The prefetches of the next row's streams, run before a row of the tile is computed: each load that reads along
/// the loads' variable `u` one element per step and moves along the output's variable `v` is read one row (`v + 1`,
/// the next tile's first row after a tile's last) ahead, a line at a time. A row is a run of a few kB that starts
/// anywhere and crosses pages, where the hardware prefetchers start late and stop: with its input from memory,
/// yolov3's kernel measured 1.11 -> 0.58 ms in a C harness (one thread, inputs not in cache; 0.49 ms with them in
/// cache), and yolov3 1.07 -> 0.56 ms, fcos 0.30 -> 0.18 ms under `compare --measure`.
/// A prefetch never faults; the row after the last is not asked for.
fn prefetches(loads: &[(&Idx, usize, DType)], u: usize, v: usize, nv: usize, ind: &str) -> String {
    let mut seen = std::collections::BTreeSet::new();
    let mut s = String::new();
    for &(at, arg, d) in loads {
        let text = format!("a{arg}[{}]", at.render());
        if stride(at, u) != 1 || stride(at, v) == 0 || !seen.insert(text.clone()) {
            continue;
        }
        let line = (64 / d.size()).max(1);
        let _ = writeln!(s, "{ind}      for (int64_t q = 0; q < eu && tv + jv + 1 < {nv}; q += {line}) {{");
        let _ =
            writeln!(s, "{ind}        const int64_t i{v} = tv + jv + 1;\n{ind}        const int64_t i{u} = tu + q;");
        let _ = writeln!(s, "{ind}        __builtin_prefetch(&{text});\n{ind}      }}");
    }
    s
}

/// Collects the positions of `e`'s loads of arguments (a pre value is a small local array: its reads do not
/// count); false where `e` has a gather or a dot, or a load or pre read at a position that is not affine.
fn collect_loads<'a>(e: &'a Expr, out: &mut Vec<(&'a Idx, usize, DType)>) -> bool {
    match e {
        Expr::Load { at, arg, dtype } => {
            out.push((at, *arg, *dtype));
            affine(at)
        }
        Expr::Local { at, .. } => affine(at),
        Expr::Gather { .. } | Expr::Dot(_) => false,
        Expr::Const(..) | Expr::Index(_) | Expr::NonNeg(_) | Expr::Acc(_) => true,
        Expr::Unary(_, _, a) | Expr::Cast(_, a) => collect_loads(a, out),
        Expr::Binary(_, _, _, a, b) => collect_loads(a, out) && collect_loads(b, out),
        Expr::Where(c, a, b) => collect_loads(c, out) && collect_loads(a, out) && collect_loads(b, out),
    }
}

/// Whether `i` is a sum of loop variables and terms that no loop variable moves (parameters, and divisions,
/// modulos or index reads of them: the depth loop's `hidden_w[d % 3]`), times constants.
fn affine(i: &Idx) -> bool {
    i.terms.keys().all(|a| match a {
        Atom::Var(..) | Atom::Param(_) => true,
        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => invariant(x),
    })
}

/// Whether no loop variable occurs in `i`.
fn invariant(i: &Idx) -> bool {
    i.terms.keys().all(|a| match a {
        Atom::Var(..) => false,
        Atom::Param(_) => true,
        Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => invariant(x),
    })
}

/// The coefficient of loop variable `v` in affine position `i`, with its sign.
fn signed_stride(i: &Idx, v: usize) -> i64 {
    i.terms.iter().filter(|(a, _)| matches!(a, Atom::Var(w, _) if *w == v)).map(|(_, k)| *k).sum()
}

/// How far loop variable `v` moves affine position `i` per step.
fn stride(i: &Idx, v: usize) -> i64 {
    i.terms.iter().filter(|(a, _)| matches!(a, Atom::Var(w, _) if *w == v)).map(|(_, k)| k.abs()).sum()
}
