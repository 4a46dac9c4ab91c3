//! The C backend's matmul layouts (`src/backend/gemm.rs`, `microkernel.rs`, `source.rs`): which layout each matmul shape gets, and
//! that each computes what the reference engine does (within the corpus tolerance), fused prologues and
//! epilogues included.

mod common;

use std::collections::BTreeMap;

use funcfuse::backend::Target;
use funcfuse::lower::{plan, Policy};

const PROGRAMS: &str = r#"
def blocked(a: f32[5, 40], b: f32[40, 48], bias: f32[48]) -> f32[5, 48]:
    return torch.relu(a @ (b * 0.5) + bias)


def permuted(p: f32[1, 8, 12, 10], c: f32[6, 8]) -> f32[12, 10, 6]:
    return torch.sigmoid(p[0].permute(1, 2, 0) @ c.t())


def batched(x: f32[1, 6, 1, 64], w: f32[64, 64]) -> f32[1, 6, 1, 64]:
    return x @ w


def gemv(x: f32[1, 99], w: f32[99, 70]) -> f32[1, 70]:
    return x @ w


def matvec(m: f32[7, 37], v: f32[37]) -> f32[7]:
    return torch.tanh(m @ (v - 0.25))


def scores(q: f32[2, 1, 40], k: f32[2, 9, 40]) -> f32[2, 1, 9]:
    return q @ k.transpose(-2, -1) / 8.0


def row_mean(x: f32[5, 35]) -> f32[5]:
    return x.mean(dim=1)


def tiled_odd(a: f32[7, 37], b: f32[37, 45]) -> f32[7, 45]:
    return a @ b - 0.5


def tiled_short(a: f32[6, 3], b: f32[3, 20]) -> f32[6, 20]:
    return torch.tanh(a @ b)


def tiled_masks(p: f32[1, 5, 6, 19], c: f32[7, 5], box: f32[7, 4]) -> f32[6, 19, 7]:
    m = torch.sigmoid(p[0].permute(1, 2, 0) @ c.t())
    rows = torch.arange(19).view(1, -1, 1).expand(6, 19, 7)
    cols = torch.arange(6).view(-1, 1, 1).expand(6, 19, 7)
    inside = (rows >= box[:, 0] * 19.0) * (rows < box[:, 2] * 19.0) * (cols >= box[:, 1] * 6.0) * (cols < box[:, 3] * 6.0)
    return m * inside.float()


def packed(a: f32[5, 70], b: f32[70, 44], bias: f32[44]) -> f32[5, 44]:
    return torch.relu(a @ (b * 0.5) + bias)


def packed_swapped(b: f32[70, 40], a: f32[7, 70]) -> f32[40, 7]:
    return torch.tanh(b.t() @ a.t())


def packed_batched(x: f32[3, 2, 80], w: f32[80, 24]) -> f32[3, 2, 24]:
    return torch.sigmoid(x) @ w


def softmax_sum(x: f32[2, 81, 40], m: f32[2, 40]) -> f32[2, 40]:
    return torch.exp(x - m[:, None, :]).sum(dim=1)


def gemm_direct(a: f32[13, 50], b: f32[50, 83], bias: f32[83]) -> f32[13, 83]:
    return torch.relu(a @ b + bias)


def gemm_weight(x: f32[65, 70], w: f32[45, 70]) -> f32[65, 45]:
    return torch.tanh(x @ w.t())


def gemm_weight_few_rows(x: f32[9, 70], w: f32[45, 70]) -> f32[9, 45]:
    return torch.tanh(x @ w.t())


def gemm_mean(a: f32[10, 30], b: f32[30, 20]) -> f32[10, 20]:
    return (a[:, :, None] * b[None, :, :]).mean(dim=1)


def gemm_batched(x: f32[3, 10, 40], w: f32[3, 40, 20]) -> f32[3, 10, 20]:
    return x @ w - 1.0


def gemm_transposed(a: f32[40, 12], b: f32[40, 33]) -> f32[12, 33]:
    return a.t() @ torch.sigmoid(b)


def gemm_blocks(a: f32[9, 600], b: f32[600, 300]) -> f32[9, 300]:
    return a @ b


def blocked_f64(a: f64[4, 50], b: f64[50, 60]) -> f64[4, 60]:
    return torch.tanh(a @ b)


def two_sums(a: f32[5, 7, 6], b: f32[5, 7, 10]) -> f32[6, 10]:
    return (a[:, :, :, None] * b[:, :, None, :]).sum(dim=(0, 1))
"#;

/// The C source of `func`'s fused plan, with the module to run it.
fn rendered(func: &str) -> (funcfuse::frontend::Module, String) {
    // A folder per call: two tests render the same function at once, and one must not read a half-written file.
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = common::scratch("gemm", &format!("{func}-{n}"));
    let path = common::program(&dir, PROGRAMS);
    let module = funcfuse::frontend::load_module(&path).unwrap();
    let f = common::optimized(&module, func).unwrap();
    let p = plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    (module, funcfuse::backend::c::render(&p))
}

#[test]
fn matmul_layouts_follow_the_shapes_and_agree_with_the_reference() {
    // (program, the layout's mark in the source, blocked rows per pass). Packed (a reduction over more than 64
    // indices): the column operand, prologue and all, packed 8 row elements wide (one AVX2 vector; 16, one
    // AVX-512 vector, where the compiler targets AVX-512, then a tile of 8 where 8 or more are left), then blocks
    // of up to 3 outputs of the block variable (and a shorter last block) with their 4 partial sums each in vector
    // variables; a last tile narrower than 8 takes the scalar form (blocks of 6 and a shorter one). GEMV (no
    // block variable, at least 32 reduction indices): each lane's accumulator row is loaded once per 8 of its
    // indices (groups of 32), the indices past the last group going round the lanes one at a time. A row
    // operand that does not move with the reduction (the softmax's maximum) is computed once per row element
    // into `h0` before the reduction. Tiled: `mr` outputs of the block variable
    // times a tile of 16 row elements (or the shorter last tile) in registers; blocked (a reduction over several
    // variables): `mr` outputs per pass over the row operand; dot: 16 partial sums over chunks of the contiguous
    // reduction (f32 ones folded into double per panel of 512 indices where outputs run in blocks). The crop mask
    // (an and of comparisons) converts to float as a select, which GCC vectorizes.
    let cases = [
        ("blocked", "bb += 5", "float acc[5][16]"),
        // [12, 10] pixels coalesce into one row of 120 (`lower::coalesce`): tiles of 16 and a last one of 8.
        ("permuted", "bb += 6", "float acc[6][8]"),
        ("batched", "w0 += 16", "float acc[6][16]"),
        ("tiled_odd", "bb += 7", "float acc[7][13]"),
        ("tiled_short", "bb += 6", "float acc[6][4]"),
        ("tiled_masks", "float acc[", "? (float)1 : (float)0"),
        ("two_sums", "bb += 6", "acc[6][4][10]"),
        // float64: blocked too, one double sum per output (each in the unblocked order).
        ("blocked_f64", "bb += 4", "double acc[4][1][60]"),
        // 5 rows of A: a vector block of 3 and a last one of 2 (`bb = 3`); 44 columns: 5 vector tiles and a
        // scalar one of 4 (one block of 5).
        ("packed", "const int64_t bb = 3;", "float acc[4][5][4]"),
        ("packed_swapped", "float pk[70][8]", "ff_v8 c3_0 = {0}, c3_1 = {0}, c3_2 = {0};"),
        // The batch [3, 2] coalesces into 6 rows of A: vector blocks of 3.
        ("packed_batched", "float pk[80][8]", "bb += 3"),
        // GEMM (8 rows or more, 16 columns or more, at most 1024 reduction indices): panels of 6 rows (13 rows:
        // two and a last one of 1 from row 12) by tiles of 4 vectors of 16 columns in fused multiply-adds; 83
        // columns are one block, packed (its last vector is partial) to 128 columns.
        ("gemm_direct", "const int64_t ib = 12;", "float pb[50][128]"),
        // `w.t()` is packed, along the reduction (its contiguous loop), where there are 64 rows or more (65: a last
        // panel of 5 rows); 45 columns: a tile of 3 vectors.
        ("gemm_weight", "float pb[70][64]", "c4_2 = FF_FMA16(b2, x, c4_2); }\n"),
        // Fewer rows: the dot layout reads the weight in place.
        ("gemm_weight_few_rows", "float part[8][16];", "for (int64_t rb = 0; rb < 8; rb += 8) {"),
        ("gemm_mean", "float pb[30][32]", "/ 30.0"),
        // The batch loops outside; 20 columns are packed to 32.
        ("gemm_batched", "for (int64_t i0 = 0; i0 < 3; i0++)", "float pb[40][32]"),
        // `a.t()` is packed by reduction index (its contiguous loop), the row panel innermost.
        (
            "gemm_transposed",
            "for (int r = 0; r < 6; r++) { int64_t i0 = ib + r; pa[i2][r] = (float)(a1[(i0 + 12*i2)]); }",
            "float pb[40][64]",
        ),
        // 600 reduction indices: blocks of 64 columns read in place (`jc += 64`; 48 where the target is not
        // AVX-512), the last 44 packed.
        ("gemm_blocks", "jc += 64", "float pb[600][64]"),
        // 99 reduction indices: groups of 32 up to 96, then 3 going round the lanes.
        ("gemv", "q += 32", "% 4]"),
        ("softmax_sum", "float acc[4][40]", "float h0[40];"),
        // Dots: 16 f32 partial sums per output, folded into double ones per panel; the 7 rows of `m` share `v`: one
        // block of 7 (a tail of 5 past 32, added to the double sums).
        ("matvec", "float part[7][16];", "acc[6][i1 - 32] +="),
        // The 9 keys share the query: a block of 8 and one of 1.
        ("scores", "float part[8][16];", "float part[1][16];"),
        // Every load moves with the row: one output at a time, a plain sum in double lanes.
        ("row_mean", "double acc[1][16];", "/ 35.0"),
    ];
    let mut failures = Vec::new();
    for (func, mark, detail) in cases {
        let (module, c) = rendered(func);
        if !c.contains(mark) || !c.contains(detail) {
            failures.push(format!("{func}: no `{mark}` / `{detail}` in\n{}", &c[c.find("void k0").unwrap_or(0)..]));
        }
        for seed in [0, 1] {
            let inputs = common::seeded_inputs(&module, func, seed);
            if let Err(e) = common::check_plan_on(&module, func, &inputs, Policy::Fused, Target::C) {
                failures.push(format!("{func} (seed {seed}): {e}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn blocked_rows_give_the_unblocked_bits() {
    // The blocked layout folds each output's products in the same order as the row layout does for one output
    // at a time: rows of the same matmul computed alone (a [1, K] @ [K, N] GEMV, never blocked) match exactly.
    same_bits_as_one_row("blocked", (5, 40, 48), "bb += 5");
}

#[test]
fn packed_rows_give_the_unblocked_bits() {
    // So does the packed layout (the column operand's prologue stored as the f32 the product rounds it to), in
    // full blocks and in the shorter last one, in vector tiles and in the scalar last tile; the one-row GEMVs
    // these compare with take the grouped lanes (70 and 40 reduction indices: a group of 32 and a tail).
    // Both panel widths are rendered, the compiler's target picking one: 44 columns are 2 tiles of 16, one of 8
    // and a scalar one of 4 where it targets AVX-512 (as on the project's machines), else 5 of 8 and one of 4.
    same_bits_as_one_row("packed", (5, 70, 44), "float pk[70][8]");
    let (_, c) = rendered("packed");
    for mark in ["#if defined(__AVX512F__)", "float pk[70][16]", "ff_v16 c3_0 = {0}", "w0 += 16", "#else"] {
        assert!(c.contains(mark), "no `{mark}` in {c}");
    }
}

/// Runs `func` (`relu(a @ (b * 0.5) + bias)` with `a: [m, k]`, `b: [k, n]`), whose source must contain `mark`,
/// and checks rows of its result against the same matmul of one row.
fn same_bits_as_one_row(func: &str, (m, k, n): (usize, usize, usize), mark: &str) {
    let (module, c) = rendered(func);
    assert!(c.contains(mark), "{c}");
    let inputs = common::seeded_inputs(&module, func, 3);
    let f = common::optimized(&module, func).unwrap();
    let (all, _) = funcfuse::backend::run_c(&f, Policy::Fused, &inputs).unwrap();
    let all = common::output_files(&all).into_values().next().unwrap().to_f64_vec();
    let (a, b, bias) = (&inputs["a"], &inputs["b"], &inputs["bias"]);
    let dir = common::scratch("gemm", &format!("one_row_{func}"));
    let path = common::program(
        &dir,
        &format!(
            "def one_row(a: f32[1, {k}], b: f32[{k}, {n}], bias: f32[{n}]) -> f32[1, {n}]:\n    return \
             torch.relu(a @ (b * 0.5) + bias)\n"
        ),
    );
    let one = funcfuse::frontend::load_module(&path).unwrap();
    let g = common::optimized(&one, "one_row").unwrap();
    let av = a.to_f64_vec();
    for r in [0usize, m / 2, m - 1] {
        let row =
            funcfuse::tensor::Tensor::from_f64(funcfuse::tensor::DType::F32, &[1, k], &av[r * k..r * k + k]).unwrap();
        let ins =
            BTreeMap::from([("a".to_string(), row), ("b".to_string(), b.clone()), ("bias".to_string(), bias.clone())]);
        let (out, _) = funcfuse::backend::run_c(&g, Policy::Fused, &ins).unwrap();
        let got = common::output_files(&out).into_values().next().unwrap().to_f64_vec();
        assert_eq!(got, all[r * n..r * n + n], "{func}: row {r}");
    }
}
