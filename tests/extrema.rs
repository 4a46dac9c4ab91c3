//! The C backend's lane layout for an f32 max, min, argmax or argmin over a contiguous last dim
//! (`src/backend/extrema.rs`): it gives exactly the reference's values and indices (bits, signed zeros, the first
//! index of a tie, NaNs) on rows built to catch a wrong combination of lanes, and the eager plan (one kernel per
//! op) as well as ours.

mod common;

use std::collections::BTreeMap;

use funcfuse::backend::Target;
use funcfuse::lower::{plan, Policy};
use funcfuse::tensor::{DType, Tensor};

/// 37 classes: four vectors of 8 lanes and a tail of 5 (lanes 0 to 4 take one more index each).
const PROGRAMS: &str = r#"
def max_both(x: f32[8, 37]):
    b = x.max(dim=1)
    return b.values, b.indices


def min_both(x: f32[8, 37]):
    b = x.min(dim=1)
    return b.values, b.indices


def extremes(x: f32[8, 37]):
    return x.amax(dim=-1), x.amin(dim=-1), x.argmax(dim=1), x.argmin(dim=1)


def of_softmax(x: f32[8, 37]):
    s = torch.softmax(x * 2.0, dim=1)
    return s.max(dim=1).indices, s.amax(dim=1)


def masked(x: f32[8, 37], m: bool[8, 37]):
    y = x.masked_fill(m, float("-inf"))
    return y.argmax(dim=1), torch.softmax(y, dim=1).argmax(dim=1), torch.exp(y).sum(dim=1)
"#;

/// Rows that a wrong lane combination gets wrong: ties across lanes, signed zeros, NaNs in several lanes, all
/// infinities, a winner in the tail.
fn rows() -> Vec<f64> {
    let (n, nan, inf) = (37usize, f64::NAN, f64::INFINITY);
    let mut v = Vec::new();
    // 0: few distinct values, so the greatest and the least each occur in several lanes.
    v.extend((0..n).map(|i| ((i * 7 + 3) % 4) as f64));
    // 1: signed zeros only, the first one negative.
    v.extend((0..n).map(|i| if i % 3 == 0 { -0.0 } else { 0.0 }));
    // 2: signed zeros, the first one positive, a negative one in every fifth place.
    v.extend((0..n).map(|i| if i % 5 == 1 { -0.0 } else { 0.0 }));
    // 3: NaNs in lanes 5, 4 and 3 (indices 5, 20, 35) among numbers.
    v.extend((0..n).map(|i| if matches!(i, 5 | 20 | 35) { nan } else { (i as f64 * 0.37).sin() }));
    // 4: every element -inf but one +inf in the middle.
    v.extend((0..n).map(|i| if i == 17 { inf } else { -inf }));
    // 5: every element -inf.
    v.extend((0..n).map(|_| -inf));
    // 6: the greatest and least values in the tail, equal values earlier in lanes 1 and 2.
    v.extend((0..n).map(|i| match i {
        33 | 9 => 5.0,
        34 | 10 => -5.0,
        _ => (i as f64 * 0.11).cos(),
    }));
    // 7: a NaN first, then numbers and another NaN.
    v.extend((0..n).map(|i| if i == 0 || i == 30 { nan } else { i as f64 }));
    v
}

/// `a` and `b` the same bits, NaNs compared as NaN (their payload aside).
fn same(a: &Tensor, b: &Tensor) -> bool {
    let (x, y) = (a.to_f64_vec(), b.to_f64_vec());
    x.len() == y.len()
        && a.dtype() == b.dtype()
        && x.iter().zip(&y).all(|(p, q)| (p.is_nan() && q.is_nan()) || p.to_bits() == q.to_bits())
}

#[test]
fn lane_extrema_are_exactly_the_serial_fold() {
    let dir = common::scratch("extrema", "lanes");
    let path = common::program(&dir, PROGRAMS);
    let module = funcfuse::frontend::load_module(&path).unwrap();
    let x = Tensor::from_f64(DType::F32, &[8, 37], &rows()).unwrap();
    let inputs = BTreeMap::from([("x".to_string(), x)]);
    let mut failures = Vec::new();
    for func in ["max_both", "min_both", "extremes", "of_softmax"] {
        let want = common::output_files(&common::run_reference(&module, func, &inputs).unwrap());
        let f = common::optimized(&module, func).unwrap();
        let eager = funcfuse::functionalize::functionalize(&module, func, &BTreeMap::new()).unwrap();
        for (policy, term) in [(Policy::Fused, &f), (Policy::Eager, &eager)] {
            let p = plan(&term.term, &term.inputs, policy).unwrap();
            let src = funcfuse::backend::c::render(&p);
            if !src.contains("int32_t bi = arg[0];") {
                failures.push(format!("{func} ({policy:?}): no lane layout in\n{src}"));
            }
            let fresh: BTreeMap<String, Tensor> =
                inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
            let (got, _) = funcfuse::backend::run_on(term, policy, Target::C, &fresh).unwrap();
            let got = common::output_files(&got);
            for (name, w) in &want {
                match got.get(name) {
                    Some(g) if same(g, w) => {}
                    g => failures.push(format!(
                        "{func} ({policy:?}) {name}: got {:?}, want {:?}",
                        g.map(|t| t.to_f64_vec()),
                        w.to_f64_vec()
                    )),
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

fn is_gcc(cc: &str) -> bool {
    std::process::Command::new(cc).arg("--version").output().is_ok_and(|o| {
        let v = String::from_utf8_lossy(&o.stdout).to_string();
        v.contains("Free Software Foundation") || v.contains("gcc")
    })
}

/// The lane loops vectorize with the C backend's flags: written with `||` they stayed scalar, with branches,
/// slower than the plain nest.
#[test]
fn lane_loops_vectorize() {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if !is_gcc(&cc) {
        eprintln!("skipped: `{cc}` is not GCC (-fopt-info-vec is GCC's)");
        return;
    }
    let dir = common::scratch("extrema", "vectorize");
    let (_, src) = fused_c(&dir, "extremes");
    lane_loops_vectorized(&cc, &dir, &src, 8, 4);
}

/// A row with a bool mask blended in (`masked_fill` with -inf: a select with a constant arm, rendered as a bit-mask
/// blend, `FF_SELF`) folds in 16 lanes, which vectorize (8 lanes of bytes had no vector type: the fold stayed
/// scalar), and gives the reference's indices and, for the sum of exps, its value within the tolerance.
#[test]
fn masked_rows_blend_and_fold_in_byte_lanes() {
    let dir = common::scratch("extrema", "masked");
    let (module, src) = fused_c(&dir, "masked");
    assert!(src.contains("FF_SELF(") && !src.contains("? (-INFINITY) :"), "{src}");
    for seed in [0, 1, 2] {
        let inputs = common::seeded_inputs(&module, "masked", seed);
        common::check_plan_on(&module, "masked", &inputs, Policy::Fused, Target::C).unwrap();
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    if !is_gcc(&cc) {
        eprintln!("skipped the vectorization check: `{cc}` is not GCC");
        return;
    }
    lane_loops_vectorized(&cc, &dir, &src, 16, 2);
}

/// The module of [`PROGRAMS`] (written into `dir`) and the C source of `func`'s fused plan.
fn fused_c(dir: &std::path::Path, func: &str) -> (funcfuse::frontend::ast::Module, String) {
    let path = common::program(dir, PROGRAMS);
    let module = funcfuse::frontend::load_module(&path).unwrap();
    let f = common::optimized(&module, func).unwrap();
    let p = plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    let src = funcfuse::backend::c::render(&p);
    (module, src)
}

/// Asserts that `src` has at least `least` lane loops of `lanes` lanes and that GCC vectorized every one.
fn lane_loops_vectorized(cc: &str, dir: &std::path::Path, src: &str, lanes: usize, least: usize) {
    let (lines, info) = vectorized(cc, dir, src, &format!("for (int l = 0; l < {lanes}; l++) {{ int64_t i"));
    assert!(lines.len() >= least, "at least {least} reductions with a lane loop of {lanes}:\n{src}");
    for line in lines {
        let at = format!("kernels.c:{line}:");
        assert!(
            info.lines().any(|l| l.contains(&at) && l.contains("loop vectorized")),
            "the lane loop at line {line} did not vectorize:\n{info}"
        );
    }
}

/// Compiles `src` with the C backend's flags and GCC's vectorizer report; the (1-based) lines containing `mark`
/// and the report.
fn vectorized(cc: &str, dir: &std::path::Path, src: &str, mark: &str) -> (Vec<usize>, String) {
    let file = dir.join("kernels.c");
    std::fs::write(&file, src).unwrap();
    let out = std::process::Command::new(cc)
        .args(["-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fno-trapping-math"])
        .args(["-fPIC", "-w", "-fopt-info-vec-optimized", "-c"])
        .arg(&file)
        .arg("-o")
        .arg(dir.join("kernels.o"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let info = String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let lines = src.lines().enumerate().filter(|(_, l)| l.contains(mark)).map(|(n, _)| n + 1).collect();
    (lines, info)
}
