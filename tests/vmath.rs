//! `src/backend/vmath.h`: the accuracy of each function over a dense sweep of f32 inputs, exact results on special
//! values, and that a loop calling each one vectorizes with the kernels' flags. The checks run in C
//! (`tests/vmath_harness.c`, compiled into a scratch folder); these tests parse its output.

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const HEADER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/backend/vmath.h");
const HARNESS: &str = include_str!("vmath_harness.c");

/// The stated bound of each function, in ulp against the correctly rounded result (see the header's comment).
const BOUNDS: [(&str, i64); 11] = [
    ("expf", 1),
    ("expm1f", 2),
    ("logf", 1),
    ("log1pf", 2),
    ("tanhf", 1),
    ("sigmoidf", 2),
    ("erff", 2),
    ("sinf", 1),
    ("cosf", 1),
    ("powf", 1),
    ("rsqrtf", 1),
];

/// Every STRIDE-th f32 bit pattern (a prime, so that every mantissa pattern class is hit): 14M inputs per function.
const STRIDE: u32 = 307;

/// sin/cos are accurate below this magnitude (2^30); beyond it only |result| <= 1 is promised.
const TRIG_LIMIT: f32 = 1073741824.0;

fn cc() -> String {
    std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into())
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let text = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{cmd:?} failed ({}):\n{text}", out.status);
    text
}

/// The harness compiled as the issue asks: `-O2 -march=native -fno-math-errno -ffp-contract=off` (and without
/// floating-point traps, as the kernels are).
fn harness(name: &str) -> PathBuf {
    harness_with(name, &[])
}

/// The harness with extra compiler flags (`-mno-fma`: polynomials unfused, as on a CPU without FMA).
fn harness_with(name: &str, extra: &[&str]) -> PathBuf {
    let dir = common::scratch("vmath", name);
    let src = dir.join("harness.c");
    std::fs::write(&src, HARNESS).unwrap();
    let exe = dir.join("harness");
    run(Command::new(cc())
        .args([
            "-O2",
            "-march=native",
            "-fno-math-errno",
            "-fno-trapping-math",
            "-ffp-contract=off",
            "-std=c99",
            "-D_POSIX_C_SOURCE=199309L",
        ])
        .args(["-Wall", "-Wextra", "-Werror"])
        .args(extra)
        .arg(format!("-DVMATH_H=\"{HEADER}\""))
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .arg("-lm"));
    exe
}

fn hex(s: &str) -> u32 {
    u32::from_str_radix(s, 16).unwrap_or_else(|_| panic!("not hex: {s}"))
}

fn f(bits: u32) -> f32 {
    f32::from_bits(bits)
}

/// Distance in ulp on the monotone integer line of floats (+0 and -0 both at 0); NaN matches NaN only.
fn ulp(got: u32, want: u32) -> i64 {
    let key = |b: u32| if b & 0x8000_0000 != 0 { -((b & 0x7fff_ffff) as i64) } else { b as i64 };
    match (f(got).is_nan(), f(want).is_nan()) {
        (true, true) => 0,
        (false, false) => (key(got) - key(want)).abs(),
        _ => i64::MAX,
    }
}

fn bound(name: &str) -> i64 {
    BOUNDS.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("unknown function {name}")).1
}

#[test]
fn sweep_max_ulp_within_stated_bounds() {
    check_sweep(&harness("sweep"));
}

/// The same sweep with the polynomials unfused (`FF__MADD` without FMA), as a CPU without FMA computes them; on
/// x86-64 only, where `-mno-fma` turns off what `-march=native` turned on.
#[test]
fn sweep_without_fma_within_stated_bounds() {
    if cfg!(target_arch = "x86_64") {
        check_sweep(&harness_with("sweep-nofma", &["-mno-fma"]));
    }
}

fn check_sweep(exe: &std::path::Path) {
    let out = run(Command::new(exe).args(["sweep", &STRIDE.to_string()]));
    let mut seen = Vec::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.first().copied() {
            Some("SWEEP") => {
                let (name, max) = (w[1], w[2].parse::<i64>().unwrap());
                let (x, y, got, want) = (hex(w[3]), hex(w[4]), hex(w[5]), hex(w[6]));
                let count: u64 = w[7].parse().unwrap();
                let args = if name == "powf" {
                    format!("{:e} ({x:08x}), {:e} ({y:08x})", f(x), f(y))
                } else {
                    format!("{:e} ({x:08x})", f(x))
                };
                eprintln!("{name}: max {max} ulp over {count} inputs, at {name}({args})");
                assert!(count >= 5_000_000, "{name}: only {count} inputs swept");
                assert!(
                    max <= bound(name),
                    "{name}: {max} ulp (bound {}) at {name}({args}): got {:e} ({got:08x}), expected {:e} ({want:08x})",
                    bound(name),
                    f(got),
                    f(want)
                );
                seen.push(name.to_string());
            }
            Some("RANGE") => {
                let (name, bad) = (w[1], w[2].parse::<u64>().unwrap());
                assert!(
                    bad == 0,
                    "{name}: {bad} inputs beyond 2^30 outside [-1, 1] (or not NaN for inf), first {name}({:e}) = {:e}",
                    f(hex(w[3])),
                    f(hex(w[4]))
                );
            }
            _ => {}
        }
    }
    let mut expected: Vec<String> = BOUNDS.iter().map(|(n, _)| n.to_string()).collect();
    expected.sort();
    seen.sort();
    assert_eq!(seen, expected, "the harness did not report every function:\n{out}");
}

/// (function, x, y) -> (got, want), from `harness special`.
/// Each caller names its own scratch folder: tests run in parallel, and a shared one would be removed and rebuilt
/// under the other's feet.
fn specials(scratch: &str) -> BTreeMap<(String, u32, u32), (u32, u32)> {
    let exe = harness(scratch);
    let out = run(Command::new(&exe).arg("special"));
    let mut m = BTreeMap::new();
    for line in out.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        if w.first() == Some(&"SPEC") {
            m.insert((w[1].to_string(), hex(w[2]), hex(w[3])), (hex(w[4]), hex(w[5])));
        }
    }
    m
}

fn is_special(bits: u32) -> bool {
    let v = f(bits);
    v.is_nan() || v.is_infinite() || v == 0.0
}

#[test]
fn special_values_match_libm_exactly() {
    let m = specials("special_all");
    assert!(m.len() > 1000, "too few special cases: {}", m.len());
    for ((name, x, y), (got, want)) in &m {
        let call = if name == "powf" {
            format!("{name}({:e} ({x:08x}), {:e} ({y:08x}))", f(*x), f(*y))
        } else {
            format!("{name}({:e} ({x:08x}))", f(*x))
        };
        if (name == "sinf" || name == "cosf") && f(*x).is_finite() && f(*x).abs() >= TRIG_LIMIT {
            assert!(f(*got).abs() <= 1.0, "{call} = {:e}, outside [-1, 1]", f(*got));
            continue;
        }
        // NaN, infinities and zeros, in or out, exactly (the sign of a zero included); elsewhere the bound.
        let exact = is_special(*x) || (name == "powf" && is_special(*y)) || is_special(*want) || is_special(*got);
        let ok = if exact {
            ulp(*got, *want) == 0 && (f(*want).is_nan() || got == want)
        } else {
            ulp(*got, *want) <= bound(name)
        };
        assert!(ok, "{call}: got {:e} ({got:08x}), expected {:e} ({want:08x})", f(*got), f(*want));
    }
}

/// The cases the issue names, spelled out, so that they do not rest on the reference alone.
#[test]
fn named_special_cases() {
    let m = specials("special_named");
    let nan = f32::NAN.to_bits();
    let (inf, ninf) = (f32::INFINITY.to_bits(), f32::NEG_INFINITY.to_bits());
    let b = |v: f32| v.to_bits();
    let cases: &[(&str, f32, f32, u32)] = &[
        ("expm1f", -0.0, 0.0, b(-0.0)),
        ("log1pf", -0.0, 0.0, b(-0.0)),
        ("tanhf", -0.0, 0.0, b(-0.0)),
        ("erff", -0.0, 0.0, b(-0.0)),
        ("sinf", -0.0, 0.0, b(-0.0)),
        ("cosf", -0.0, 0.0, b(1.0)),
        ("expf", f32::INFINITY, 0.0, inf),
        ("expf", f32::NEG_INFINITY, 0.0, b(0.0)),
        ("expf", 88.72284, 0.0, inf),
        ("expf", -104.0, 0.0, b(0.0)),
        ("expm1f", f32::NEG_INFINITY, 0.0, b(-1.0)),
        ("logf", 0.0, 0.0, ninf),
        ("logf", -0.0, 0.0, ninf),
        ("logf", -1.0, 0.0, nan),
        ("logf", f32::INFINITY, 0.0, inf),
        ("log1pf", -1.0, 0.0, ninf),
        ("log1pf", -2.0, 0.0, nan),
        ("tanhf", f32::NEG_INFINITY, 0.0, b(-1.0)),
        ("sigmoidf", f32::NEG_INFINITY, 0.0, b(0.0)),
        ("sigmoidf", f32::INFINITY, 0.0, b(1.0)),
        ("erff", f32::NEG_INFINITY, 0.0, b(-1.0)),
        ("sinf", f32::INFINITY, 0.0, nan),
        ("cosf", f32::NEG_INFINITY, 0.0, nan),
        ("rsqrtf", 0.0, 0.0, inf),
        ("rsqrtf", -0.0, 0.0, ninf),
        ("rsqrtf", -1.0, 0.0, nan),
        ("rsqrtf", f32::INFINITY, 0.0, b(0.0)),
        ("rsqrtf", 0.25, 0.0, b(2.0)),
        ("powf", f32::NAN, 0.0, b(1.0)),
        ("powf", f32::NAN, -0.0, b(1.0)),
        ("powf", 1.0, f32::NAN, b(1.0)),
        ("powf", 1.0, f32::INFINITY, b(1.0)),
        ("powf", -1.0, f32::INFINITY, b(1.0)),
        ("powf", -1.0, f32::NEG_INFINITY, b(1.0)),
        ("powf", -2.0, 3.0, b(-8.0)),
        ("powf", -2.0, -2.0, b(0.25)),
        ("powf", -2.0, 0.5, nan),
        ("powf", -2.0, -2.5, nan),
        ("powf", -0.0, -3.0, ninf),
        ("powf", 0.0, -3.0, inf),
        ("powf", -0.0, -2.0, inf),
        ("powf", -0.0, -0.5, inf),
        ("powf", -0.0, 3.0, b(-0.0)),
        ("powf", -0.0, 2.0, b(0.0)),
        ("powf", -0.0, f32::NEG_INFINITY, inf),
        ("powf", f32::NEG_INFINITY, 3.0, ninf),
        ("powf", f32::NEG_INFINITY, -3.0, b(-0.0)),
        ("powf", f32::NEG_INFINITY, 2.0, inf),
        ("powf", f32::NEG_INFINITY, -0.5, b(0.0)),
        ("powf", f32::INFINITY, -0.5, b(0.0)),
        ("powf", 0.5, f32::NEG_INFINITY, inf),
        ("powf", 0.5, f32::INFINITY, b(0.0)),
        ("powf", 2.0, f32::NEG_INFINITY, b(0.0)),
        ("powf", -2.0, f32::INFINITY, inf),
        ("powf", -8388609.0, 1.0, b(-8388609.0)),
        ("powf", -2.0, 16777216.0, inf),
        ("powf", -0.5, 16777216.0, b(0.0)),
        ("powf", 2.0, 0.5, b(std::f32::consts::SQRT_2)),
        ("powf", f32::NAN, 2.0, nan),
        ("powf", 2.0, f32::NAN, nan),
    ];
    for &(name, x, y, want) in cases {
        let key = (name.to_string(), x.to_bits(), y.to_bits());
        let (got, _) =
            *m.get(&key).unwrap_or_else(|| panic!("{name}({x:e}, {y:e}) is not among the harness's specials"));
        let ok = if f(want).is_nan() { f(got).is_nan() } else { got == want };
        assert!(ok, "{name}({x:e}, {y:e}): got {:e} ({got:08x}), expected {:e} ({want:08x})", f(got), f(want));
    }
}

fn is_gcc() -> bool {
    Command::new(cc()).arg("--version").output().is_ok_and(|o| {
        let v = String::from_utf8_lossy(&o.stdout).to_string();
        v.contains("Free Software Foundation") || v.contains("gcc")
    })
}

/// A loop calling each function vectorizes with the C backend's flags and calls nothing (no libm).
#[test]
fn loops_vectorize_without_calls() {
    if !is_gcc() {
        eprintln!("skipped: `{}` is not GCC (-fopt-info-vec is GCC's)", cc());
        return;
    }
    let dir = common::scratch("vmath", "vectorize");
    let names: Vec<&str> = BOUNDS.iter().map(|(n, _)| *n).collect();
    let mut src = String::from("#define FF_FN static inline\n#include <stdint.h>\n#include <math.h>\n");
    src += &format!("#include \"{HEADER}\"\n");
    let first_line = src.lines().count() + 1;
    for n in &names {
        if *n == "powf" {
            src += "void l_powf(float *restrict y, const float *restrict a, const float *restrict b, int n) \
                    { for (int i = 0; i < n; i++) y[i] = ff_powf(a[i], b[i]); }\n";
        } else {
            src += &format!(
                "void l_{n}(float *restrict y, const float *restrict x, int n) \
                 {{ for (int i = 0; i < n; i++) y[i] = ff_{n}(x[i]); }}\n"
            );
        }
    }
    let file = dir.join("loops.c");
    std::fs::write(&file, &src).unwrap();
    let obj = dir.join("loops.o");
    let out = run(Command::new(cc())
        .args([
            "-O3",
            "-march=native",
            "-fno-math-errno",
            "-fno-trapping-math",
            "-ffp-contract=off",
            "-fopt-info-vec-optimized",
        ])
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-c"])
        .arg(&file)
        .arg("-o")
        .arg(&obj));
    for (i, n) in names.iter().enumerate() {
        let at = format!("loops.c:{}:", first_line + i);
        assert!(
            out.lines().any(|l| l.contains(&at) && l.contains("loop vectorized")),
            "the loop calling ff_{n} (line {}) did not vectorize:\n{out}",
            first_line + i
        );
    }
    let undefined = run(Command::new("nm").arg("-u").arg(&obj));
    assert!(undefined.trim().is_empty(), "the loops call out: {undefined}");
}

/// The functions that compute in float lanes: their vectorized loops hold 16 floats per AVX-512 vector, 8 per AVX2.
const FLOAT_LANES: [&str; 7] = ["expf", "expm1f", "logf", "log1pf", "tanhf", "sigmoidf", "erff"];

/// The float-lane functions do no double arithmetic: their loops, compiled as the kernels are, hold no x86
/// conversion to or from double and no double add/sub/mul/div (GCC on x86-64 only; the mnemonics are x86's).
#[test]
fn float_lane_functions_do_no_double_arithmetic() {
    if !is_gcc() || !cfg!(target_arch = "x86_64") {
        eprintln!("skipped: needs GCC on x86-64");
        return;
    }
    let dir = common::scratch("vmath", "float_lanes");
    let mut src = format!("#define FF_FN static inline\n#include \"{HEADER}\"\n");
    for n in FLOAT_LANES {
        src += &format!(
            "void l_{n}(float *restrict y, const float *restrict x, int n) \
             {{ for (int i = 0; i < n; i++) y[i] = ff_{n}(x[i]); }}\n"
        );
    }
    let file = dir.join("lanes.c");
    std::fs::write(&file, &src).unwrap();
    let asm = dir.join("lanes.s");
    run(Command::new(cc())
        .args(["-O3", "-march=native", "-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-std=c99", "-S"])
        .arg(&file)
        .arg("-o")
        .arg(&asm));
    let text = std::fs::read_to_string(&asm).unwrap();
    let double_ops =
        ["2pd", "pd2", "2sd", "sd2", "addpd", "subpd", "mulpd", "divpd", "addsd", "subsd", "mulsd", "divsd"];
    for n in FLOAT_LANES {
        let start = text.find(&format!("\nl_{n}:\n")).unwrap_or_else(|| panic!("no l_{n} in the assembly"));
        let body = &text[start..];
        let body = &body[..body.find(".cfi_endproc").unwrap_or_else(|| panic!("l_{n}: no end"))];
        let mnemonics: Vec<&str> =
            body.lines().filter_map(|l| l.split_whitespace().next()).filter(|w| !w.ends_with(':')).collect();
        assert!(mnemonics.len() > 20, "l_{n}: too few instructions to be the vectorized loop:\n{body}");
        let bad: Vec<&&str> = mnemonics.iter().filter(|m| double_ops.iter().any(|d| m.contains(d))).collect();
        assert!(bad.is_empty(), "l_{n} does double arithmetic ({bad:?}):\n{body}");
    }
}

/// Under -ffast-math the NaN/infinity selects and rounding tricks would be folded away: the header refuses to compile.
#[test]
fn refuses_fast_math() {
    let dir = common::scratch("vmath", "fast_math");
    let file = dir.join("f.c");
    std::fs::write(&file, format!("#include \"{HEADER}\"\nfloat f(float x) {{ return ff_expf(x); }}\n")).unwrap();
    for flag in ["-ffast-math", "-ffinite-math-only"] {
        let out =
            Command::new(cc()).args(["-O2", flag, "-c"]).arg(&file).arg("-o").arg(dir.join("f.o")).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{flag}: compiled");
        assert!(err.contains("vmath.h needs IEEE semantics"), "{flag}: not the header's error:\n{err}");
    }
    let out = Command::new(cc()).args(["-O2", "-c"]).arg(&file).arg("-o").arg(dir.join("f.o")).output().unwrap();
    assert!(out.status.success(), "without fast math: {}", String::from_utf8_lossy(&out.stderr));
}
