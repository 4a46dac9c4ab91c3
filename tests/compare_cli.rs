//! `compare` with PyTorch timed in the same run (`--torch PYTHON`) and the roofline bound. None of these needs
//! torch: a Python without it, a missing interpreter, and a stand-in `torch` module (where python3 has NumPy) play
//! the worker's counterparts.

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;

use common::Outcome;

fn funcfuse(args: &[&str], env: &[(&str, &str)]) -> Outcome {
    let mut cmd = common::binary();
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    common::run_binary(&mut cmd)
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("compare_cli", name)
}

/// `compare FILE` (with `--measure --runs 2` when `measure`) into its own folder of `dir`, which must succeed: what
/// it printed, the folder, and its compare.json.
fn compare_ok(dir: &Path, file: &str, measure: bool) -> (Outcome, PathBuf, serde_json::Value) {
    let out = dir.join(format!("out-{measure}"));
    let mut args = vec!["compare", file, "--out", out.to_str().unwrap()];
    if measure {
        args.extend(["--measure", "--runs", "2"]);
    }
    let o = funcfuse(&args, &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    let json = read_json(&out.join("compare.json"));
    (o, out, json)
}

/// An executable shell script `name` in `dir` that runs `body`.
fn script(dir: &Path, name: &str, body: &str) -> String {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p.to_string_lossy().to_string()
}

fn python3_has(module: &str) -> bool {
    std::process::Command::new("python3")
        .args(["-c", &format!("import {module}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

const SIMPLE: &str = "def f(a: f32[3, 4], b: f32[4]) -> f32[3, 4]:\n    return a + b\n";

#[test]
fn torch_options_without_what_they_need_are_usage_errors() {
    let dir = scratch("usage");
    let file = common::program(&dir, SIMPLE);
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let o = funcfuse(&["compare", &file, "--torch", "python3", "--out", out], &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--measure"), "{}", o.stderr);
    let o = funcfuse(&["compare", &file, "--measure", "--no-torch-compile", "--out", out], &[]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("--torch"), "{}", o.stderr);
    let o = funcfuse(
        &["compare", &file, "--measure", "--torch", "python3", "--baseline-file", "x.json", "--out", out],
        &[],
    );
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("cannot be used with"), "{}", o.stderr);
    assert!(!Path::new(out).join("compare.md").exists(), "a usage error must not run anything");
}

/// Runs `compare --measure --torch python` on `file` and returns the outcome, compare.md and compare.json.
fn compare_with(
    dir: &Path,
    file: &str,
    python: &str,
    extra: &[&str],
    env: &[(&str, &str)],
) -> (Outcome, String, Value) {
    let out = dir.join("out");
    let mut args = vec!["compare", file, "--measure", "--runs", "2", "--torch", python, "--out", out.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = funcfuse(&args, env);
    let md =
        std::fs::read_to_string(out.join("compare.md")).unwrap_or_else(|e| panic!("no compare.md ({e}): {}", o.stderr));
    (o, md, read_json(&out.join("compare.json")))
}

/// Our plans still ran and were measured.
fn ours_measured(md: &str, json: &Value) {
    assert!(md.contains("| ours |"), "{md}");
    let plans = json["programs"][0]["plans"].as_array().unwrap();
    assert!(plans.iter().all(|p| p["measured_s"].as_f64().is_some_and(|t| t > 0.0)), "{json}");
}

#[test]
fn a_python_without_torch_is_reported_on_every_row_and_the_rest_runs() {
    let dir = scratch("no_torch");
    let file = common::program(&dir, &format!("{SIMPLE}\n\ndef g(a: f32[4]) -> f32[4]:\n    return a * 2.0\n"));
    // -I -S: no site-packages and no PYTHONPATH, so no torch whatever this machine has installed.
    let python = script(&dir, "python", "exec python3 -I -S \"$@\"");
    let (o, md, json) = compare_with(&dir, &file, &python, &[], &[]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("PyTorch was not timed"), "{}", o.stderr);
    let why = if python3_has("sys") { "cannot import torch" } else { "before greeting" };
    assert!(o.stderr.contains(why), "{}", o.stderr);
    for func in ["f", "g"] {
        for name in ["PyTorch eager", "torch.compile"] {
            let row =
                md.lines().find(|l| l.starts_with(&format!("| {file}::{func} | {name} (cpu, this run; not timed:")));
            let row = row.unwrap_or_else(|| panic!("no {name} row for {func}: {md}"));
            assert!(row.contains(why) && row.ends_with("| failed |"), "{row}");
        }
        assert!(o.stdout.contains(&format!("{file}::{func}: eager ")), "{}", o.stdout);
    }
    assert!(o.stdout.contains("  PyTorch: not timed:"), "{}", o.stdout);
    ours_measured(&md, &json);
    assert_eq!(json["pytorch"]["source"], "this run");
    assert!(json["programs"][1]["pytorch"]["error"].as_str().unwrap().contains(why), "{json}");
    assert!(json["geomean_speedup_over_pytorch_eager"].is_null(), "{json}");
}

#[test]
fn a_python_that_does_not_start_is_reported() {
    let dir = scratch("no_python");
    let file = common::program(&dir, SIMPLE);
    let missing = dir.join("no-such-python");
    let (o, md, json) = compare_with(&dir, &file, missing.to_str().unwrap(), &["--no-torch-compile"], &[]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains(&format!("PyTorch was not timed: cannot start `{}`", missing.display())), "{}", o.stderr);
    assert!(md.contains("| PyTorch eager (cpu, this run; not timed: cannot start"), "{md}");
    ours_measured(&md, &json);
}

/// A stand-in for torch, enough for the worker: tensors wrap NumPy arrays, programs add and multiply, and
/// torch.compile fails. With FAKE_TORCH_SKEW set, the inputs it makes are not the generator's; with FAKE_TORCH_DIE,
/// the process dies in an addition.
const FAKE_TORCH: &str = r#"
import os
import numpy as np

__version__ = "0.0-fake"

class Tensor:
    def __init__(self, a):
        self.a = a
        self.shape = a.shape
    def to(self, device):
        return self
    def clone(self):
        return Tensor(self.a.copy())
    def double(self):
        return Tensor(self.a.astype(np.float64))
    def sum(self):
        return Tensor(np.array(self.a.sum()))
    def item(self):
        return float(self.a)
    def __add__(self, o):
        if os.environ.get("FAKE_TORCH_DIE"):
            os._exit(3)
        return Tensor(self.a + (o.a if isinstance(o, Tensor) else o))
    def __mul__(self, o):
        return Tensor(self.a * (o.a if isinstance(o, Tensor) else o))

def from_numpy(a):
    return Tensor(a + 1 if os.environ.get("FAKE_TORCH_SKEW") else a)

def set_num_threads(n):
    pass

class no_grad:
    def __enter__(self):
        assert os.environ.get("OMP_NUM_THREADS") == "1", "the worker must run on one thread"
        return self
    def __exit__(self, *a):
        return False

class _Dynamo:
    def reset(self):
        pass

_dynamo = _Dynamo()

def compile(fn):
    raise RuntimeError("no compiler here\nsecond line")
"#;

#[test]
fn pytorch_rows_measured_in_this_run_sit_beside_ours() {
    if !python3_has("numpy") {
        eprintln!("skipped: python3 has no NumPy for the stand-in torch");
        return;
    }
    let dir = scratch("fake_torch");
    let file = common::program(&dir, &format!("{SIMPLE}\n\ndef g(a: f32[4]) -> f32[4]:\n    return a * 2.0\n"));
    let site = dir.join("site");
    std::fs::create_dir_all(&site).unwrap();
    std::fs::write(site.join("torch.py"), FAKE_TORCH).unwrap();
    let python = script(&dir, "python", &format!("PYTHONPATH='{}' exec python3 \"$@\"", site.display()));
    let (o, md, json) = compare_with(&dir, &file, &python, &[], &[("OMP_NUM_THREADS", "")]);
    // OMP_NUM_THREADS set (even empty) is the user's: the stand-in insists on 1, so eager fails and says why.
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(
        md.contains(
            "PyTorch eager (cpu torch 0.0-fake, this run; failed: AssertionError: the worker must run on one thread)"
        ),
        "{md}"
    );
    let (o, md, json2) = compare_with(&dir, &file, &python, &[], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(json["programs"][0]["pytorch"]["eager_s"].is_null(), "{json}");
    for func in ["f", "g"] {
        let eager = md
            .lines()
            .find(|l| l.starts_with(&format!("| {file}::{func} | PyTorch eager (cpu torch 0.0-fake, this run) |")));
        let t: f64 = eager.unwrap_or_else(|| panic!("{md}")).rsplit('|').nth(1).unwrap().trim().parse().unwrap();
        assert!(t > 0.0, "{md}");
        let compile = format!("| {file}::{func} | torch.compile (cpu torch 0.0-fake, this run; failed: RuntimeError: no compiler here) | | | |  | failed |");
        assert!(md.contains(&compile), "{md}");
    }
    assert!(md.contains("geometric-mean speedup of ours over PyTorch eager (cpu torch 0.0-fake, this run): "), "{md}");
    assert!(o.stdout.contains("  PyTorch: PyTorch eager "), "{}", o.stdout);
    assert!(json2["geomean_speedup_over_pytorch_eager"].as_f64().is_some_and(|g| g > 0.0), "{json2}");
    assert_eq!(json2["programs"][0]["pytorch"]["measured_in_this_run"], true);
    // --no-torch-compile: the compile row says it was not run.
    let (o, md, _) = compare_with(&dir, &file, &python, &["--no-torch-compile"], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        md.contains("torch.compile (cpu torch 0.0-fake, this run; not run: --no-torch-compile) | | | |  |  |"),
        "{md}"
    );
    // Inputs that are not ours make the timings not comparable, and say which input differs.
    let (o, md, json) = compare_with(&dir, &file, &python, &["--no-torch-compile"], &[("FAKE_TORCH_SKEW", "1")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(
        md.contains(
            "PyTorch eager (cpu torch 0.0-fake, this run; not comparable: input `a`: the sum of PyTorch's elements"
        ),
        "{md}"
    );
    assert!(json["geomean_speedup_over_pytorch_eager"].is_null(), "{json}");
    // A worker that dies (f adds) fails that program's rows; a fresh one times the next (g multiplies).
    let (o, md, _) = compare_with(&dir, &file, &python, &["--no-torch-compile"], &[("FAKE_TORCH_DIE", "1")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let died =
        format!("| {file}::f | PyTorch eager (cpu torch 0.0-fake, this run; not timed: the PyTorch worker exited");
    assert!(md.contains(&died) && md.contains("status: 3"), "{md}");
    assert!(md.contains(&format!("| {file}::g | PyTorch eager (cpu torch 0.0-fake, this run) |")), "{md}");
}

#[test]
fn the_roofline_bound_counts_inputs_and_outputs_once() {
    let dir = scratch("roofline");
    // Reads a (12 f32) and b (4 f32), writes the result (12 f32) and the final a (mutated, 12 f32); exp of b is
    // computed once per element of b although it broadcasts over a's rows.
    let file = common::program(
        &dir,
        "def f(a: f32[3, 4], b: f32[4], k: i64[2]) -> f32[3, 4]:\n    a[0] += 1.0\n    return a * torch.exp(b)\n",
    );
    let bytes = (12 * 4 + 4 * 4 + 2 * 8) + (12 * 4 + 12 * 4);
    for measure in [false, true] {
        let (o, out, json) = compare_ok(&dir, &file, measure);
        let r = &json["programs"][0]["roofline"];
        assert_eq!(r["bytes"].as_f64(), Some(bytes as f64), "{r}");
        assert_eq!(r["transcendentals"].as_f64(), Some(4.0), "{r}");
        let p = &json["profile"];
        let want = (bytes as f64 / p["stream_bytes_per_s"].as_f64().unwrap())
            .max(4.0 * p["transcendental_s"].as_f64().unwrap());
        let bound = r["bound_s"].as_f64().unwrap();
        assert!((bound - want).abs() <= 1e-12 * want, "{bound} vs {want}");
        let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
        let row = md.lines().find(|l| {
            l.starts_with(&format!("| {file}::f | {:.3} | 0.000 | {:.4} |", bytes as f64 / 1e6, bound * 1e3))
        });
        let row = row.unwrap_or_else(|| panic!("no roofline row: {md}"));
        assert!(md.contains("| program | min MB (inputs + outputs) | M transcendentals | bound ms |"), "{md}");
        if measure {
            let ours = json["programs"][0]["plans"][2]["measured_s"].as_f64().unwrap();
            let ratio = r["ours_over_bound"].as_f64().unwrap();
            assert!((ratio - ours / bound).abs() <= 1e-9 * ratio, "{ratio}");
            assert!(row.ends_with(&format!("| {:.1}x |", ratio)), "{row}");
            assert!(o.stdout.contains(&format!("ours at {ratio:.1}x the bound")), "{}", o.stdout);
        } else {
            assert!(r["ours_over_bound"].is_null(), "{r}");
            assert!(row.ends_with(&format!("| {:.4} |", bound * 1e3)), "{row}");
        }
    }
}

/// A softmax read by a max and an argmax: our plan computes its `exp` in the sum and again in each reduction
/// reading it (fused), the program only once per element; the bound counts the program's work (the eager plan's).
#[test]
fn the_roofline_does_not_count_our_recomputation() {
    let dir = scratch("roofline-recompute");
    let file = common::program(
        &dir,
        "def f(x: f32[64, 81]):\n    s = torch.softmax(x, dim=1)\n    b = s[:, 1:].max(dim=1)\n    return b.values, b.indices\n",
    );
    let (_, _, json) = compare_ok(&dir, &file, false);
    let r = &json["programs"][0]["roofline"];
    assert_eq!(r["transcendentals"].as_f64(), Some(64.0 * 81.0), "{r}");
}

#[test]
fn a_profile_without_a_transcendental_cost_loads_with_the_default() {
    let dir = scratch("profile");
    let file = common::program(&dir, SIMPLE);
    let old = dir.join("old.json");
    std::fs::write(&old, r#"{"backend": "c", "launch_s": 1e-6, "bytes_per_s": 1e9, "ops_per_s": 1e9}"#).unwrap();
    let out = dir.join("out");
    let o = funcfuse(&["compare", &file, "--costs", old.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let json = read_json(&out.join("compare.json"));
    assert_eq!(json["profile"]["transcendental_s"].as_f64(), Some(funcfuse::cost::DEFAULT_TRANSCENDENTAL_S));
    let bad = dir.join("bad.json");
    std::fs::write(&bad, r#"{"launch_s": 1e-6, "bytes_per_s": 1e9, "ops_per_s": 1e9, "transcendental_s": -1}"#)
        .unwrap();
    let o = funcfuse(&["compare", &file, "--costs", bad.to_str().unwrap(), "--out", out.to_str().unwrap()], &[]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("positive `transcendental_s`"), "{}", o.stderr);
}

/// docs/interface.md: `compare --measure` prints `prediction: median error X%, spearman Y over N plans` over every plan it
/// ran (three per program here), and compare.json carries the same figures; without `--measure` there is none.
#[test]
fn measured_comparisons_report_prediction_quality() {
    let dir = scratch("prediction");
    let file = common::program(&dir, "def f(a: f32[64, 64]) -> f32[64, 64]:\n    return torch.exp(a) * 2.0 + a\n");
    for measure in [false, true] {
        let (o, _, json) = compare_ok(&dir, &file, measure);
        let line = o.stdout.lines().find(|l| l.starts_with("prediction: "));
        if !measure {
            assert!(line.is_none() && json["prediction"].is_null(), "{}", o.stdout);
            continue;
        }
        let line = line.unwrap_or_else(|| panic!("no prediction line: {}", o.stdout));
        let p = &json["prediction"];
        assert_eq!(p["plans"].as_u64(), Some(3), "{p}");
        let (e, s) = (p["median_error"].as_f64().unwrap(), p["spearman"].as_f64().unwrap());
        assert!(e >= 0.0 && (-1.0..=1.0).contains(&s), "{p}");
        assert_eq!(line, format!("prediction: median error {:.1}%, spearman {s:.2} over 3 plans", e * 100.0));
    }
}

#[test]
fn profile_lists_every_launch_of_our_plan_with_its_time_bytes_and_what_it_computes() {
    let dir = scratch("profile");
    // A reduction and an elementwise op over its result that does not fuse into it: at least two kernels (128
    // sums: too many for its reader to compute them itself, `lower/pre.rs`).
    let src =
        "def f(a: f32[128, 32]) -> f32[128, 32]:\n    m = a.sum(dim=1, keepdim=True)\n    return torch.exp(a - m)\n";
    let file = common::program(&dir, src);
    let out = dir.join("out");
    let out = out.to_str().unwrap();
    let o = funcfuse(&["compare", &file, "--profile", "--out", out], &[]);
    assert_eq!(o.code, 2, "--profile needs --measure: {}", o.stderr);
    assert!(o.stderr.contains("--measure"), "{}", o.stderr);
    let o = funcfuse(&["compare", &file, "--measure", "--runs", "3", "--profile", "--out", out], &[]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("profile of ours (median of 3 profiled runs"), "{}", o.stdout);
    assert!(o.stdout.contains("total of the medians"), "{}", o.stdout);
    let json = read_json(&Path::new(out).join("compare.json"));
    let prof = json["programs"][0]["profile"].as_array().unwrap_or_else(|| panic!("no profile in {json}"));
    let kernels = json["programs"][0]["plans"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["plan"] == "ours"))
        .and_then(|p| p["kernels"].as_u64())
        .unwrap_or_else(|| panic!("no kernels of ours in {json}"));
    // One row per launch site; each of our launches ran once, so the launches add up to the plan's.
    assert!(prof.len() >= 2, "{prof:?}");
    assert_eq!(prof.iter().map(|r| r["launches"].as_u64().unwrap()).sum::<u64>(), kernels, "{prof:?}");
    let ms: Vec<f64> = prof.iter().map(|r| r["ms"].as_f64().unwrap()).collect();
    assert!(ms.windows(2).all(|w| w[0] >= w[1]), "not sorted by time: {ms:?}");
    assert!(prof.iter().all(|r| r["bytes"].as_f64().unwrap() > 0.0), "{prof:?}");
    assert!(prof.iter().any(|r| r["what"].as_str().unwrap().contains("reducing Sum over [32]")), "{prof:?}");
    assert!(prof.iter().all(|r| r["what"].as_str().unwrap().contains(": kernel k")), "{prof:?}");
    // Without --profile there is none.
    let (_, _, json) = compare_ok(&dir, &file, true);
    assert!(json["programs"][0].get("profile").is_none(), "{json}");
}

/// A parameter the program writes only in an arm this run does not take is expected unchanged: every plan matches
/// the reference (compare once expected only the parameters the reference wrote, and reported every plan as
/// differing).
#[test]
fn a_parameter_left_unwritten_by_this_run_is_expected_unchanged() {
    let dir = scratch("unwritten-parameter");
    let file = common::program(
        &dir,
        "def f(a: f32[3], b: f32[3]) -> f32[3]:\n    if b.sum() > 1e9:\n        a.add_(1.0)\n    return a * b\n",
    );
    let (o, _, json) = compare_ok(&dir, &file, false);
    let plans = json["programs"][0]["plans"].as_array().unwrap();
    assert_eq!(plans.len(), 3, "{json}");
    for p in plans {
        assert_eq!(p["matches_reference"], Value::Bool(true), "{p}");
    }
    assert!(!o.stdout.contains("differ"), "{}", o.stdout);
}
