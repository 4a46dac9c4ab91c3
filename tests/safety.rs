//! Issue #13, safe to run on anyone's machine: data-dependent indices in generated kernels are checked (PyTorch's
//! message at the program's location, exit status 1, never a signal or a corrupted result) on every engine.

use std::path::{Path, PathBuf};
use std::process::Command;

use funcfuse::tensor::{DType, Tensor};

#[derive(Debug)]
struct Outcome {
    code: Option<i32>,
    stderr: String,
}

/// Runs the binary with the test suite's kernel cache (never the user's).
fn funcfuse(args: &[&str]) -> Outcome {
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("safety-cache");
    outcome(Command::new(env!("CARGO_BIN_EXE_funcfuse")).env("FUNCFUSE_CACHE", cache).args(args))
}

fn outcome(c: &mut Command) -> Outcome {
    let out = c.output().expect("the binary runs");
    let o = Outcome { code: out.status.code(), stderr: String::from_utf8_lossy(&out.stderr).to_string() };
    assert!(!o.stderr.contains("panicked"), "funcfuse panicked: {}", o.stderr);
    o
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("safety").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn program(dir: &Path, src: &str) -> String {
    let p = dir.join("prog.py");
    std::fs::write(&p, format!("from __future__ import annotations\nimport torch\n\n{src}")).unwrap();
    p.to_string_lossy().to_string()
}

const SCATTER_ROWS: &str = "def scatter_rows(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    for i in range(2):
        table[idx[i]] = vals[i]
    return table

def gather_rows(table: f32[4, 4], idx: i64[2]) -> f32[2, 4]:
    return table[idx] * 2.0

def gather_in_loop(table: f32[4, 4], idx: i64[2]) -> f32[2, 4]:
    out = torch.zeros(2, 4)
    for i in range(2):
        out[i] = table[idx[i]] * 2.0
    return out

def item_row(table: f32[4, 4], idx: i64[2]) -> f32[4]:
    k = idx[1].item()
    return table[k] + 1.0
";

/// Writes `table` (0..16), `idx` and `vals` (all 7) as the inputs of the programs above.
fn inputs(dir: &Path, idx: [i64; 2]) -> PathBuf {
    let d = dir.join(format!("in{}_{}", idx[0], idx[1]));
    std::fs::create_dir_all(&d).unwrap();
    let table: Vec<f64> = (0..16).map(f64::from).collect();
    funcfuse::io::write_npy(&d.join("table.npy"), &Tensor::from_f64(DType::F32, &[4, 4], &table).unwrap()).unwrap();
    let i = Tensor::from_f64(DType::I64, &[2], &idx.map(|v| v as f64)).unwrap();
    funcfuse::io::write_npy(&d.join("idx.npy"), &i).unwrap();
    funcfuse::io::write_npy(&d.join("vals.npy"), &Tensor::from_f64(DType::F32, &[2, 4], &[7.0; 8]).unwrap()).unwrap();
    d
}

/// The engines `run` offers: the default (the optimized plan on C), the CUDA kernels on the emulator, the
/// functional interpreter and the reference.
const ENGINES: &[&[&str]] = &[&[], &["--backend", "cuda-emu"], &["--engine", "functional"], &["--engine", "reference"]];

#[test]
fn a_bad_data_dependent_index_is_pytorchs_located_error_on_every_engine() {
    let dir = scratch("bad_index");
    let file = program(&dir, SCATTER_ROWS);
    // (function, index values, line:col of the failing subscript, the bad index)
    let cases: &[(&str, [i64; 2], &str, i64)] = &[
        ("scatter_rows", [0, 100000000], "6:9", 100000000),
        ("scatter_rows", [0, 6], "6:9", 6),
        ("scatter_rows", [0, 4], "6:9", 4),
        ("scatter_rows", [-5, 0], "6:9", -5),
        ("gather_rows", [1, 6], "10:12", 6),
        ("gather_rows", [-9, 0], "10:12", -9),
        ("gather_in_loop", [100000000, 0], "15:18", 100000000),
        ("item_row", [0, 6], "20:12", 6),
    ];
    for &(func, idx, at, bad) in cases {
        let ins = inputs(&dir, idx);
        let target = format!("{file}::{func}");
        let want = format!("{file}:{at}: index {bad} is out of bounds for dimension 0 with size 4\n");
        for engine in ENGINES {
            let out = dir.join("out");
            let mut args = vec!["run", &target, "--inputs", ins.to_str().unwrap(), "--output", out.to_str().unwrap()];
            args.extend_from_slice(engine);
            let o = funcfuse(&args);
            assert_eq!(o.code, Some(1), "{func} {idx:?} {engine:?}: {}", o.stderr);
            assert_eq!(o.stderr, want, "{func} {idx:?} {engine:?}");
        }
    }
}

#[test]
fn a_negative_index_in_range_wraps_on_every_engine() {
    let dir = scratch("wrapping_index");
    let file = program(&dir, SCATTER_ROWS);
    let ins = inputs(&dir, [0, -1]);
    // Rows 0 and 3 (idx -1) take vals; rows 1 and 2 keep the table's.
    let mut want: Vec<f64> = vec![7.0; 4];
    want.extend((4..12).map(f64::from));
    want.extend([7.0; 4]);
    for engine in ENGINES {
        let out = dir.join("out");
        let target = format!("{file}::scatter_rows");
        let mut args = vec!["run", &target, "--inputs", ins.to_str().unwrap(), "--output", out.to_str().unwrap()];
        args.extend_from_slice(engine);
        let o = funcfuse(&args);
        assert_eq!(o.code, Some(0), "{engine:?}: {}", o.stderr);
        let t = funcfuse::io::read_npy(&out.join("return.npy")).unwrap().to_f64_vec();
        assert_eq!(t, want, "{engine:?}");
        let t = funcfuse::io::read_npy(&out.join("table.npy")).unwrap().to_f64_vec();
        assert_eq!(t, want, "{engine:?}: the table written in place");
    }
}
