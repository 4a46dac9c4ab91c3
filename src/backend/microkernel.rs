//! The C backend's GEMM layout: an f32 matmul (with its fused prologues and epilogue) as a register-blocked
//! micro-kernel with fused multiply-adds, the way BLAS libraries compute one. The output is cut into tiles of
//! `mr` rows (the broadcast variable `i`) by `nv` vectors of columns (the vector variable `j`); a tile's
//! `mr * nv` accumulators stay in registers while the reduction runs, each reduction index loading `nv` vectors
//! of the column operand and broadcasting `mr` scalars of the row operand: `mr * nv` fused multiply-adds per
//! `nv + mr` loads. The row operand is packed per panel of `mr` rows (`pa[k][r]`, contiguous, in L1 whatever the
//! operand's layout or prologue); the column operand is read in place where it is a plain load contiguous along
//! `j` (a row-major `B`), else packed per block of columns (`pb[k][w]`, a transposed weight `W.T`).
//! Columns go in blocks of at most [`BLOCK_BYTES`] of the column operand, so that the block stays in L2 while
//! every panel of rows goes past it.
//!
//! Numerics: each output is one f32 accumulator folded over the reduction in order with fused multiply-adds (no
//! rounding of the product), as PyTorch's CPU matmuls accumulate; the result is within the corpus tolerance of the
//! reference's (see `tensor/close.rs`), not bitwise the other layouts'.
//! [`GEMM_MIN_ROWS`] and the other limits keep small and memory-bound products (a GEMV) on the dot and row layouts.

use std::fmt::Write;

use super::gemm::uses_var;
use super::source::{store_result, stride_sum};
use crate::lower::index::Atom;
use crate::lower::kernel::{c_type, render, Expr, Kernel, RedOp};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// The GEMM layout takes products with at least this many rows (values of the broadcast variable): a product
/// of fewer rows is bound by reading the column operand, which the dot layout streams once.
pub const GEMM_MIN_ROWS: usize = 8;

/// The GEMM layout takes products whose column operand it packs (not read in place: a transposed weight,
/// `x @ W.T`) with at least this many rows: packing transposes the operand element by element, which a
/// product of a few rows does not repay (RHN's [8, 512] @ [512, 1024].T, packed: 1.5 ms against PyTorch's
/// 0.3); the dot layout reads such a weight once, in place.
pub const GEMM_MIN_ROWS_PACKED: usize = 64;

/// The GEMM layout takes products with at least this many columns.
pub const GEMM_MIN_COLS: usize = 16;

/// The longest reduction the GEMM layout takes (its packed row panel, `mr` floats per index, is on the stack).
pub const GEMM_MAX_K: usize = 1024;

/// The column operand of a block of columns is about this many bytes (whole tiles of columns, at least one).
pub const BLOCK_BYTES: usize = 256 * 1024;

/// One instruction set's tile shape: `v` floats per vector, `mr` rows by `nv` vectors of accumulators, and the C
/// names of the vector types (aligned, unaligned) and the fused multiply-add.
struct Shape {
    v: usize,
    mr: usize,
    nv: usize,
    ty: &'static str,
    unaligned: &'static str,
    fma: &'static str,
    set: &'static str,
}

/// AVX-512: 6 x 4 vectors of 16 floats (24 accumulators of 32 registers). Measured on this machine's Zen 4, one
/// thread, hand-written C: [1376, 128] @ [128, 512] 2.0 ms (PyTorch 1.8), [50, 256] @ [256, 1024] 0.27 ms (0.31);
/// 8 x 2 took 2.1 and 0.29 ms, 12 x 2 2.1 and 0.36 ms, and without fused multiply-adds 8 x 2 took 2.7 and 0.44 ms.
const AVX512: Shape =
    Shape { v: 16, mr: 6, nv: 4, ty: "ff_gv16", unaligned: "ff_gv16u", fma: "FF_FMA16", set: "FF_SET16" };

/// Other targets: 6 x 2 vectors of 8 floats (12 accumulators of AVX2's 16 registers).
const NARROW: Shape = Shape { v: 8, mr: 6, nv: 2, ty: "ff_gv8", unaligned: "ff_gv8u", fma: "FF_FMA8", set: "FF_SET8" };

/// The C declarations the layout uses, for the source's header: the vector types and the fused multiply-add of
/// each (`c + a * b` rounded once where the target has FMA instructions; elsewhere a product and a sum).
pub const GEMM_PRELUDE: &str = r#"#if defined(__x86_64__) && (defined(__AVX512F__) || defined(__FMA__))
#include <immintrin.h>
#endif
typedef float ff_gv16 __attribute__((vector_size(64)));
typedef float ff_gv16u __attribute__((vector_size(64), aligned(4)));
typedef float ff_gv8 __attribute__((vector_size(32)));
typedef float ff_gv8u __attribute__((vector_size(32), aligned(4)));
#if defined(__AVX512F__)
#define FF_FMA16(a, b, c) ((ff_gv16)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define FF_SET16(s) ((ff_gv16)_mm512_set1_ps(s))
#endif
#define FF_SET8(s) ((ff_gv8){(s), (s), (s), (s), (s), (s), (s), (s)})
#if defined(__x86_64__) && defined(__FMA__)
#define FF_FMA8(a, b, c) ((ff_gv8)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#else
#define FF_FMA8(a, b, c) ((c) + (a) * (b))
#endif
"#;

/// The variables and operands of a GEMM: output `C[i, j] = sum over k of x(i, k) * y(j, k)`, with `x` the row
/// operand (not depending on `j`) and `y` the column operand (not on `i`).
struct Gemm<'a> {
    i: usize,
    j: usize,
    kv: usize,
    m: usize,
    n: usize,
    kn: usize,
    x: &'a Expr,
    y: &'a Expr,
    /// Where `y` is a plain f32 load that steps by one element along `j`: its argument and index, read in place.
    direct: bool,
    /// Where `x` is a plain f32 load that steps by one element along the reduction (a row-major `A`): its rows are
    /// broadcast from in place, not packed (GaLore's products, a C microbenchmark: 2.1 -> 1.8 ms).
    x_direct: bool,
}

/// The GEMM layout of `k` (its loops over the other domain variables outside), or `None` where it does not apply:
/// an f32 sum or mean of products `x * y` of f32 values over one reduction variable of at most [`GEMM_MAX_K`]
/// indices, with a domain variable that `x` does not read and `y` does (the columns) and one the other way round
/// (the rows), at least [`GEMM_MIN_ROWS`] by [`GEMM_MIN_COLS`].
pub fn gemm(k: &Kernel, indent: &str) -> Option<String> {
    let g = gemm_of(k)?;
    let wide = render_gemm(k, &g, &AVX512, indent);
    let narrow = render_gemm(k, &g, &NARROW, indent);
    Some(format!("#if defined(__AVX512F__)\n{wide}#else\n{narrow}#endif\n"))
}

/// The [`Gemm`] of kernel `k`, where the layout applies.
fn gemm_of(k: &Kernel) -> Option<Gemm<'_>> {
    let red = k.reduce.as_ref()?;
    if !matches!(red.op, RedOp::Sum | RedOp::Mean) || k.value.dtype() != DType::F32 {
        return None;
    }
    let nontrivial: Vec<usize> = (0..red.extents.len()).filter(|&q| red.extents[q] > 1).collect();
    let &[q] = nontrivial.as_slice() else { return None };
    let (kv, kn) = (k.domain.len() + q, red.extents[q]);
    if kn > GEMM_MAX_K {
        return None;
    }
    let Expr::Binary(Binary::Mul, DType::F32, DType::F32, a, b) = &k.value else { return None };
    if a.dtype() != DType::F32 || b.dtype() != DType::F32 {
        return None;
    }
    let vars: Vec<usize> = (0..k.domain.len()).filter(|&v| k.domain[v] > 1).collect();
    // Every (rows, columns) pair of variables and which operand is which: the one that packs the fewest elements
    // (see `pack_cost`), then the output's innermost column variable.
    let mut best: Option<(Gemm, (std::cmp::Reverse<usize>, usize))> = None;
    for &i in &vars {
        for &j in &vars {
            for (x, y) in [(a, b), (b, a)] {
                let (m, n) = (k.domain[i], k.domain[j]);
                if i == j || m < GEMM_MIN_ROWS || n < GEMM_MIN_COLS {
                    continue;
                }
                if uses_var(x, j) || uses_var(y, i) || !uses_var(x, i) || !uses_var(y, j) {
                    continue;
                }
                let (direct, x_direct) = (direct_load(y, j, kv), direct_load(x, kv, i));
                if !direct && m < GEMM_MIN_ROWS_PACKED {
                    continue;
                }
                let g = Gemm { i, j, kv, m, n, kn, x, y, direct, x_direct };
                let rank = (std::cmp::Reverse(pack_cost(&g)), j);
                if best.as_ref().is_none_or(|(_, r)| rank > *r) {
                    best = Some((g, rank));
                }
            }
        }
    }
    best.map(|(g, _)| g)
}

/// The elements a GEMM packs, weighted by how far apart it reads them: the row operand once per panel of each
/// block of columns, the column operand once; an operand that neither of its two variables steps by one element
/// counts 4 times, each of its loads a cache line of its own (yolact's protos packed by pixel rows 80 apart: 0.50
/// ms; by pixel columns, contiguous, 0.29). GaLore's `P.T @ G` ([512, 128] transposed, times [512, 1376]) packs
/// `P.T` by rows of 128 once per block of 1376 columns (11 times), or `G.T` once as rows of 1376 by columns of 128.
fn pack_cost(g: &Gemm) -> usize {
    let weight = |e: &Expr, a: usize| if stride_sum(e, a).min(stride_sum(e, g.kv)) <= 1 { 1 } else { 4 };
    let blocks = g.n.div_ceil(block_cols(g.kn, AVX512.v * AVX512.nv, g.n));
    let x = if g.x_direct { 0 } else { g.m * g.kn * blocks * weight(g.x, g.i) };
    let y = if g.direct { 0 } else { g.kn * g.n * weight(g.y, g.j) };
    x + y
}

/// Columns per block of a GEMM with `kn` reduction indices, tiles of `nr` columns and `n` columns in all: whole
/// tiles, the column operand's block about [`BLOCK_BYTES`].
fn block_cols(kn: usize, nr: usize, n: usize) -> usize {
    ((BLOCK_BYTES / (4 * kn) / nr).max(1) * nr).min(n.div_ceil(nr) * nr)
}

/// Whether `e` is a plain f32 load whose index steps by exactly one element along variable `along` (and along
/// `along` and `other` only linearly), so that a tile reads it in place: the column operand along the columns
/// (`other` the reduction), the row operand along the reduction (`other` the rows).
fn direct_load(e: &Expr, along: usize, other: usize) -> bool {
    let Expr::Load { at, dtype: DType::F32, .. } = e else { return false };
    at.terms.iter().any(|(a, c)| matches!(a, Atom::Var(u, _) if *u == along) && *c == 1)
        && at.terms.iter().all(|(a, c)| match a {
            Atom::Var(u, _) => *u != along || *c == 1,
            Atom::Param(_) => true,
            Atom::Div(x, _) | Atom::Mod(x, _) | Atom::ViewInv(_, x, _) | Atom::Load(_, x, _, _) => {
                !x.mentions(along) && !x.mentions(other)
            }
        })
}

/// The layout for one instruction set's tile shape.
fn render_gemm(k: &Kernel, g: &Gemm, sh: &Shape, indent: &str) -> String {
    let nr = sh.v * sh.nv;
    let nc = block_cols(g.kn, nr, g.n);
    // A block packs its column operand where that is not read in place, and where its last vector is partial
    // (only the last block's can be: a block is whole tiles).
    let packed = |cols: usize| !g.direct || cols % sh.v != 0;
    let mut s = String::new();
    let mut ind = indent.to_string();
    let _ = writeln!(s, "{ind}{{");
    ind.push_str("  ");
    if !g.x_direct {
        let _ = writeln!(s, "{ind}float pa[{}][{}] __attribute__((aligned(64)));", g.kn, sh.mr);
    }
    if packed(g.n % nc) {
        let _ = writeln!(s, "{ind}float pb[{}][{}] __attribute__((aligned(64)));", g.kn, nc);
    }
    let outer: Vec<usize> = (0..k.domain.len()).filter(|&v| k.domain[v] > 1 && v != g.i && v != g.j).collect();
    for &v in &outer {
        let _ = writeln!(s, "{ind}for (int64_t i{v} = 0; i{v} < {m}; i{v}++) {{", m = k.domain[v]);
        ind.push_str("  ");
    }
    steps(&mut s, &ind, ("jc", g.n, nc), |s, cols, ind| s.push_str(&block(k, g, sh, cols, packed(cols), ind)));
    for _ in &outer {
        ind.truncate(ind.len() - 2);
        let _ = writeln!(s, "{ind}}}");
    }
    let _ = writeln!(s, "{indent}}}");
    s
}

/// One block of `cols` columns from `jc`: its column operand packed (zero past the last column, to whole vectors)
/// where `packed`, then every panel of rows over it.
fn block(k: &Kernel, g: &Gemm, sh: &Shape, cols: usize, packed: bool, ind: &str) -> String {
    let mut s = String::new();
    let (j, kv, kn) = (g.j, g.kv, g.kn);
    if packed {
        let padded = cols.div_ceil(sh.v) * sh.v;
        let y = render(g.y, "a");
        // The loop along which `y` is contiguous runs innermost.
        let along_k = super::gemm::unit_stride(g.y, kv) && !super::gemm::unit_stride(g.y, j);
        let body = format!(
            "if (w < {cols}) {{ int64_t i{j} = jc + w; pb[i{kv}][w] = (float)({y}); }} else pb[i{kv}][w] = 0.0f;"
        );
        if along_k {
            let _ = writeln!(
                s,
                "{ind}for (int w = 0; w < {padded}; w++) for (int64_t i{kv} = 0; i{kv} < {kn}; i{kv}++) {body}"
            );
        } else {
            let _ = writeln!(
                s,
                "{ind}for (int64_t i{kv} = 0; i{kv} < {kn}; i{kv}++) for (int w = 0; w < {padded}; w++) {body}"
            );
        }
    }
    steps(&mut s, ind, ("ib", g.m, sh.mr), |s, rows, ind| s.push_str(&panel(k, g, sh, (cols, packed), rows, ind)));
    s
}

/// Statements over `n` indices in steps of `step` from variable `var` (a C `int64_t`): a loop over the whole
/// steps, then the rest with `var` fixed; `each(s, count, ind)` writes one step of `count` indices.
fn steps(s: &mut String, ind: &str, (var, n, step): (&str, usize, usize), each: impl Fn(&mut String, usize, &str)) {
    let full = n - n % step;
    let inner = format!("{ind}  ");
    if full > 0 {
        let _ = writeln!(s, "{ind}for (int64_t {var} = 0; {var} < {full}; {var} += {step}) {{");
        each(s, step, &inner);
        let _ = writeln!(s, "{ind}}}");
    }
    if n > full {
        let _ = writeln!(s, "{ind}{{\n{inner}const int64_t {var} = {full};");
        each(s, n - full, &inner);
        let _ = writeln!(s, "{ind}}}");
    }
}

/// One panel of `rows` rows from `ib`: the row operand packed, then the block's tiles.
fn panel(k: &Kernel, g: &Gemm, sh: &Shape, (cols, packed): (usize, bool), rows: usize, ind: &str) -> String {
    let mut s = String::new();
    let (i, kv, kn) = (g.i, g.kv, g.kn);
    // The row operand is packed unless read in place, along its contiguous loop.
    if !g.x_direct {
        let x = render(g.x, "a");
        let body = format!("{{ int64_t i{i} = ib + r; pa[i{kv}][r] = (float)({x}); }}");
        let (rows_loop, k_loop) =
            (format!("for (int r = 0; r < {rows}; r++)"), format!("for (int64_t i{kv} = 0; i{kv} < {kn}; i{kv}++)"));
        let (outer, inner) = if super::gemm::unit_stride(g.x, kv) { (rows_loop, k_loop) } else { (k_loop, rows_loop) };
        let _ = writeln!(s, "{ind}{outer} {inner} {body}");
    }
    steps(&mut s, ind, ("j0", cols, sh.v * sh.nv), |s, n, ind| {
        s.push_str(&tile(k, g, sh, (rows, n.div_ceil(sh.v), n), packed, ind))
    });
    s
}

/// One tile: `rows` rows from `ib` by `nv` vectors of columns from `jc + j0`, of which the first `valid` are
/// stored (through the epilogue).
fn tile(k: &Kernel, g: &Gemm, sh: &Shape, (rows, nv, valid): (usize, usize, usize), packed: bool, ind: &str) -> String {
    let red = k.reduce.as_ref().expect("a reduction");
    let (i, j, kv, kn) = (g.i, g.j, g.kv, g.kn);
    let Shape { v, ty, unaligned, fma, set, .. } = *sh;
    let mut s = String::new();
    for r in 0..rows {
        let decl: Vec<String> = (0..nv).map(|c| format!("c{r}_{c} = {{0}}")).collect();
        let _ = writeln!(s, "{ind}{ty} {};", decl.join(", "));
    }
    // A row operand read in place: each row's start (its reduction index steps by one).
    if let (true, Expr::Load { arg, at, .. }) = (g.x_direct, g.x) {
        for r in 0..rows {
            let _ = writeln!(
                s,
                "{ind}const float* ar{r}; {{ int64_t i{i} = ib + {r}; int64_t i{kv} = 0; ar{r} = &a{arg}[{}]; }}",
                at.render()
            );
        }
    }
    let _ = writeln!(s, "{ind}for (int64_t kk = 0; kk < {kn}; kk++) {{");
    let src = if packed {
        "const float* bp = &pb[kk][j0];".to_string()
    } else {
        let Expr::Load { arg, at, .. } = g.y else { unreachable!("a direct column operand is a load") };
        format!("int64_t i{kv} = kk; int64_t i{j} = jc + j0; const float* bp = &a{arg}[{}];", at.render())
    };
    let _ = writeln!(s, "{ind}  {src}");
    let loads: Vec<String> = (0..nv).map(|c| format!("b{c} = *(const {unaligned}*)(bp + {})", c * v)).collect();
    let _ = writeln!(s, "{ind}  {ty} {};", loads.join(", "));
    for r in 0..rows {
        let xr = if g.x_direct { format!("ar{r}[kk]") } else { format!("pa[kk][{r}]") };
        let _ = write!(s, "{ind}  {{ {ty} x = {set}({xr});");
        for c in 0..nv {
            let _ = write!(s, " c{r}_{c} = {fma}(b{c}, x, c{r}_{c});");
        }
        let _ = writeln!(s, " }}");
    }
    let _ = writeln!(s, "{ind}}}");
    let count: usize = red.extents.iter().product();
    // An epilogue whose store steps along the vector variable (yolact's masks, `[80, 80, 24]` stored from vectors
    // along an 80 dim) is computed into a local row first, where it vectorizes, then stored element by element:
    // computed at the store, its sigmoid ran scalar, 0.34 ms of yolact's 1.6.
    let step: i64 =
        k.store.terms.iter().filter(|(a, _)| matches!(a, Atom::Var(u, _) if *u == j)).map(|(_, c)| *c).sum();
    let staged = k.epilogue.as_ref().filter(|_| step != 1);
    for r in 0..rows {
        for c in 0..nv {
            let width = v.min(valid - c * v);
            // The accumulator is read from a local array: an element of a vector-extension value indexed by the
            // loop variable (`c0_0[w]`) has no vector type for GCC 12, and the loop, with its sigmoids, stayed
            // scalar (makemore's GRU cell, 32 x 256 over 320 with two sigmoids and a tanh: 0.110 -> 0.102 ms).
            let (acc, cv) = ("cv[w]".to_string(), format!("float cv[{v}]; memcpy(cv, &c{r}_{c}, sizeof cv);"));
            let fin = if red.op == RedOp::Mean { format!("{acc} / {count}.0") } else { acc };
            let at = format!("int64_t i{i} = ib + {r}; int64_t i{j} = jc + j0 + {} + w;", c * v);
            if let Some((d, e)) = staged {
                let (t, out_t) = (c_type(*d), c_type(k.out_dtype));
                let _ = writeln!(
                    s,
                    "{ind}{{ {cv} {out_t} ev[{width}];
{ind}  for (int w = 0; w < {width}; w++) {{ {at} {t} red = ({t})({fin}); ev[w] = ({out_t})({}); }}
{ind}  for (int w = 0; w < {width}; w++) {{ {at} a0[{}] = ev[w]; }} }}",
                    render(e, "a"),
                    k.store.render()
                );
                continue;
            }
            let _ =
                writeln!(s, "{ind}{{ {cv} for (int w = 0; w < {width}; w++) {{ {at} {} }} }}", store_result(k, &fin));
        }
    }
    s
}
