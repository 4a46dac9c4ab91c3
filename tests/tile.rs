//! The C backend's tiled layout for kernels that transpose (`src/backend/tile.rs`): which kernels take it, and that
//! each point computes what the plain loop nest computes, bit for bit.

mod common;

use funcfuse::lower::Policy;

const PROGRAMS: &str = r#"
def transposed(p: f32[2, 40, 2100]) -> f32[2, 2100, 40]:
    return torch.sigmoid(p.permute(0, 2, 1).contiguous())


def elementwise(p: f32[2, 40, 2100]) -> f32[2, 40, 2100]:
    return torch.sigmoid(p)


def short_rows(p: f32[3, 40, 50]) -> f32[3, 50, 40]:
    return torch.sigmoid(p.permute(0, 2, 1).contiguous())


def transposed_scaled(p: f32[33, 70], c: f32[70]) -> f32[70, 33]:
    return torch.sqrt(torch.sigmoid(p.t()) * c.abs()[:, None])


def scaled(p: f32[33, 70], c: f32[70]) -> f32[33, 70]:
    return torch.sqrt(torch.sigmoid(p) * c.abs()[None, :])


def strided_operand(p: f32[40, 72], m: f32[72, 3]) -> f32[72, 40]:
    return torch.exp(p.t() - m[:, 1:2])


def transposed_ints(p: i32[45, 300]) -> i32[300, 45]:
    return p.t().contiguous() * 3 - 7


def ints(p: i32[45, 300]) -> i32[45, 300]:
    return p * 3 - 7


def transposed_doubles(p: f64[45, 300]) -> f64[300, 45]:
    return torch.sigmoid(p.t()).contiguous()


def doubles(p: f64[45, 300]) -> f64[45, 300]:
    return torch.sigmoid(p)
"#;

/// The C source of `func`'s fused plan (checked against the reference engine) and its outputs on seeded inputs, as
/// the bits of each value.
fn run(func: &str) -> (String, Vec<u64>, Vec<usize>) {
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = common::scratch("tile", &format!("{func}-{n}"));
    let path = common::program(&dir, PROGRAMS);
    let module = funcfuse::frontend::load_module(&path).unwrap();
    let f = common::optimized(&module, func).unwrap();
    let p = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    let source = funcfuse::backend::c::render(&p);
    let inputs = common::seeded_inputs(&module, func, 0);
    common::check_plan_on(&module, func, &inputs, Policy::Fused, funcfuse::backend::Target::C).unwrap();
    let (out, _) = funcfuse::backend::run_c(&f, Policy::Fused, &inputs).unwrap();
    let out = common::output_files(&out).into_values().next().unwrap();
    (source, out.to_f64_vec().iter().map(|x| x.to_bits()).collect(), out.shape.clone())
}

/// `x` of shape [.., a, b] with its last two dims swapped.
fn swap_last(x: &[u64], shape: &[usize]) -> Vec<u64> {
    let (a, b) = (shape[shape.len() - 2], shape[shape.len() - 1]);
    let mut out = vec![0; x.len()];
    for (m, chunk) in x.chunks(a * b).enumerate() {
        for i in 0..a {
            for j in 0..b {
                out[m * a * b + j * a + i] = chunk[i * b + j];
            }
        }
    }
    out
}

#[test]
fn a_transposing_kernel_is_tiled_and_gives_the_nests_bits() {
    // [2, 2100, 40] from [2, 40, 2100]: the output's row (40: two bands of 16 and one of 8) reads down a column of
    // the input; the input's rows (2100) are read in runs of 256 (16 kB of f32 per 16 rows) and one of 52. The
    // elementwise program computes each element in the plain nest, in place: the same sigmoid of the same input
    // element, so the same bits once swapped back.
    let (c, got, shape) = run("transposed");
    assert!(c.contains("float tl[16][256];") && c.contains("for (int64_t tv = 0; tv < 40; tv += 16)"), "{c}");
    assert!(c.contains("for (int64_t tu = 0; tu < 2100; tu += 256)"), "{c}");
    // Stored through 8 x 8 transposes, the last 52 rows' last 4 and the band of 8's rows of fewer than 8 one by one.
    assert!(c.contains("ff_tr8x8(&tl[bv][bu], 256, &a0["), "{c}");
    // The next row of the input is asked for a line (16 f32) at a time while this one is computed, up to the last
    // row: the input's rows are the tile's streams.
    assert!(c.contains("for (int64_t q = 0; q < eu && tv + jv + 1 < 40; q += 16) {"), "{c}");
    assert_eq!(c.matches("__builtin_prefetch(&a1[").count(), 1, "{c}");
    let (plain, want, _) = run("elementwise");
    assert!(!plain.contains("tl["), "{plain}");
    assert_eq!(got, swap_last(&want, &[2, 40, 2100]), "shape {shape:?}");
}

#[test]
fn short_input_rows_keep_the_nest() {
    // Rows of 50: a run shorter than `MIN_RUN` is not a stream for the prefetchers.
    let (c, _, _) = run("short_rows");
    assert!(!c.contains("tl["), "{c}");
}

#[test]
fn an_operand_broadcast_along_the_rows_is_read_in_the_tile() {
    // fcos's scaled scores: `c` moves one element per step of the input's row, as the input does.
    let (c, got, _) = run("transposed_scaled");
    assert!(c.contains("float tl[16][70];") && c.contains("tl[jv][ju] = "), "{c}");
    // `p`'s next row is prefetched; `c` is the same row for every row of the tile, and is not.
    assert_eq!(c.matches("__builtin_prefetch(").count(), 1, "{c}");
    let (_, want, _) = run("scaled");
    assert_eq!(got, swap_last(&want, &[33, 70]));
}

#[test]
fn an_operand_strided_along_the_rows_keeps_the_nest() {
    // `m[:, 1:2]` steps 3 elements per row of `p`: in the tile it would be a strided read per element, where the
    // nest reads it once per output row.
    let (c, _, _) = run("strided_operand");
    assert!(!c.contains("tl["), "{c}");
}

#[test]
fn a_tile_of_32_bit_integers_is_stored_through_transposes_with_the_same_bits() {
    // 45 = two bands of 16 and one of 13 (one block of 8, then 5 one by one); 300 = a run of 256 and one of 44
    // (five blocks of 8 and 4 rows one by one).
    let (c, got, shape) = run("transposed_ints");
    assert!(c.contains("int32_t tl[16][256];") && c.contains("ff_tr8x8(&tl[bv][bu], 256, &a0["), "{c}");
    let (_, want, _) = run("ints");
    assert_eq!(got, swap_last(&want, &[45, 300]), "shape {shape:?}");
}

#[test]
fn a_tile_of_doubles_is_stored_one_element_at_a_time() {
    let (c, got, shape) = run("transposed_doubles");
    assert!(c.contains("double tl[16][128];") && !c.contains("ff_tr8x8(&tl"), "{c}");
    let (_, want, _) = run("doubles");
    assert_eq!(got, swap_last(&want, &[45, 300]), "shape {shape:?}");
}
