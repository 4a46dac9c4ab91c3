//! The command line as a user meets it: outputs of `funcfuse run`, and a located message with exit status 1 (never a
//! panic) for every kind of bad input.

use std::path::PathBuf;
use std::process::Command;

mod common;

use common::Outcome;

fn funcfuse(args: &[&str]) -> Outcome {
    common::run_binary(common::binary().args(args))
}

/// A fresh scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    common::scratch("cli", name)
}

/// Runs `FILE::f` with the reference engine and expects failure with `want` in the message at `line:col`.
fn check_error(name: &str, src: &str, extra: &[&str], line_col: Option<&str>, want: &str) {
    let dir = scratch(name);
    let file = common::program(&dir, src);
    let target = format!("{file}::f");
    let out_dir = dir.join("out");
    let mut args = vec!["run", &target, "--engine", "reference", "--output", out_dir.to_str().unwrap()];
    args.extend_from_slice(extra);
    let o = funcfuse(&args);
    assert_eq!(o.code, 1, "expected exit 1, got {}: {}", o.code, o.stderr);
    assert!(o.stderr.contains(want), "message {:?} lacks {:?}", o.stderr, want);
    if let Some(lc) = line_col {
        let prefix = format!("{file}:{lc}: ");
        assert!(o.stderr.starts_with(&prefix), "message {:?} does not start with {:?}", o.stderr, prefix);
    }
}

#[test]
fn run_writes_returns_mutated_parameters_and_inputs() {
    let dir = scratch("run_ok");
    let file = common::program(
        &dir,
        "def f(a: f32[3, 4], b: f32[4], n: int = 2) -> tuple[f32[3, 4], f32[4]]:\n    a[0] += b\n    return a * n, b\n",
    );
    let out = dir.join("out");
    let o = funcfuse(&[
        "run",
        &format!("{file}::f"),
        "--engine",
        "reference",
        "--arg",
        "n=3",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for f in ["return.0.npy", "return.1.npy", "a.npy", "inputs/a.npy", "inputs/b.npy"] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    assert!(!out.join("b.npy").exists(), "b is not mutated, so b.npy must not be written");
    let a0 = funcfuse::io::read_npy(&out.join("inputs/a.npy")).unwrap().to_f64_vec();
    let b = funcfuse::io::read_npy(&out.join("inputs/b.npy")).unwrap().to_f64_vec();
    let r = funcfuse::io::read_npy(&out.join("return.0.npy")).unwrap().to_f64_vec();
    let a = funcfuse::io::read_npy(&out.join("a.npy")).unwrap().to_f64_vec();
    for j in 0..4 {
        let want = (a0[j] as f32 + b[j] as f32) as f64;
        assert_eq!(a[j], want);
        assert_eq!(r[j], (want as f32 * 3.0) as f64);
    }
    assert_eq!(a[4..], a0[4..]);

    // The same inputs read back with --inputs give the same outputs.
    let out2 = dir.join("out2");
    let o = funcfuse(&[
        "run",
        &format!("{file}::f"),
        "--engine",
        "reference",
        "--arg",
        "n=3",
        "--inputs",
        out.join("inputs").to_str().unwrap(),
        "--output",
        out2.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(std::fs::read(out.join("return.0.npy")).unwrap(), std::fs::read(out2.join("return.0.npy")).unwrap());
}

#[test]
fn seeds_change_inputs_and_runs_are_deterministic() {
    let dir = scratch("seeds");
    let file = common::program(&dir, "def f(a: f32[8]) -> f32[8]:\n    return a.exp()\n");
    let run = |seed: &str, out: &str| {
        let o = funcfuse(&[
            "run",
            &format!("{file}::f"),
            "--engine",
            "reference",
            "--seed",
            seed,
            "--output",
            dir.join(out).to_str().unwrap(),
        ]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        std::fs::read(dir.join(out).join("return.npy")).unwrap()
    };
    assert_eq!(run("1", "x"), run("1", "y"));
    assert_ne!(run("1", "x"), run("2", "z"));
}

#[test]
fn syntax_error_is_located() {
    check_error("syntax", "def f(x: f32[3]) -> f32[3]:\n    return x +\n", &[], Some("5:15"), "syntax error");
}

#[test]
fn unknown_op_is_located() {
    check_error(
        "unknown_op",
        "def f(x: f32[3]) -> f32[3]:\n    y = x + 1\n    return torch.frobnicate(y)\n",
        &[],
        Some("6:12"),
        "AttributeError: module 'torch' has no attribute 'frobnicate' (PyTorch ",
    );
}

#[test]
fn unknown_method_is_located() {
    check_error(
        "unknown_method",
        "def f(x: f32[3]) -> f32[3]:\n    return x.frobnicate_()\n",
        &[],
        Some("5:12"),
        "AttributeError: 'Tensor' object has no attribute 'frobnicate_' (PyTorch ",
    );
}

#[test]
fn unsupported_statement_is_located() {
    check_error(
        "with_stmt",
        "def f(x: f32[3]) -> f32[3]:\n    with open(\"f\") as fh:\n        y = x\n    return y\n",
        &[],
        Some("5:5"),
        "`with` on this context manager is not supported (grad modes such as `with torch.no_grad():` and `with torch.autocast(..., enabled=False):` are, and the program's own classes with `__enter__` and `__exit__`)",
    );
}

#[test]
fn missing_annotation_is_located() {
    check_error(
        "no_annotation",
        "def f(x, y: f32[3]):\n    return x\n",
        &[],
        Some("4:7"),
        "parameter `x` has no annotation",
    );
}

#[test]
fn tensor_annotation_without_shape_is_located() {
    check_error("no_shape", "def f(x: f32):\n    return x\n", &[], Some("4:10"), "needs a shape");
}

#[test]
fn shape_mismatch_is_located() {
    check_error(
        "shape_mismatch",
        "def f(x: f32[3], y: f32[4]) -> f32[3]:\n    return x + y\n",
        &[],
        Some("5:12"),
        "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0",
    );
}

#[test]
fn write_through_expanded_view_is_rejected() {
    check_error(
        "expanded_write",
        "def f(x: f32[3]) -> f32[2, 3]:\n    e = x.expand(2, 3)\n    e += 1.0\n    return e\n",
        &[],
        Some("6:5"),
        "more than one element of the written-to tensor refers to a single memory location",
    );
}

#[test]
fn partial_overlap_is_rejected_like_pytorch() {
    check_error(
        "partial_overlap",
        "def f(v: f32[16]) -> f32[16]:\n    a = v[0:8]\n    a += v[4:12]\n    return v\n",
        &[],
        Some("6:5"),
        "some elements of the input tensor and the written-to tensor refer to a single memory location",
    );
}

#[test]
fn cpu_dependent_overlap_is_rejected() {
    check_error(
        "strided_overlap",
        "def f(x: f32[3, 4]) -> f32[3, 4]:\n    x[:, 1:] = x[:, :-1]\n    return x\n",
        &[],
        Some("5:5"),
        "depends on the CPU",
    );
}

#[test]
fn error_inside_helper_points_at_the_helper() {
    check_error(
        "helper_error",
        "def _h(a):\n    return a.view(5, -1)\n\ndef f(x: f32[3, 4]) -> f32[3, 4]:\n    return _h(x)\n",
        &[],
        Some("5:12"),
        "shape '[5, -1]' is invalid for input of size 12",
    );
}

#[test]
fn missing_scalar_arg_is_reported() {
    check_error(
        "missing_arg",
        "def f(x: f32[3], n: int) -> f32[3]:\n    return x * n\n",
        &[],
        None,
        "pass it with --arg n=VALUE",
    );
}

#[test]
fn missing_input_file_is_reported() {
    // An empty inputs folder (outside the program's scratch folder, which check_error makes afresh).
    let dir = scratch("missing_input_folder");
    std::fs::create_dir_all(dir.join("in")).unwrap();
    check_error(
        "missing_input",
        "def f(x: f32[3]) -> f32[3]:\n    return x\n",
        &["--inputs", dir.join("in").to_str().unwrap()],
        None,
        "missing input file for tensor parameter `x`",
    );
}

#[test]
fn bad_npy_is_reported() {
    let dir = scratch("bad_npy_in");
    std::fs::write(dir.join("x.npy"), b"this is not numpy").unwrap();
    check_error(
        "bad_npy",
        "def f(x: f32[3]) -> f32[3]:\n    return x\n",
        &["--inputs", dir.to_str().unwrap()],
        None,
        "not a valid .npy file",
    );
}

#[test]
fn input_of_the_wrong_shape_is_reported() {
    let dir = scratch("wrong_shape_in");
    let t = funcfuse::tensor::Tensor::zeros(funcfuse::tensor::DType::F32, &[4]).unwrap();
    funcfuse::io::write_npy(&dir.join("x.npy"), &t).unwrap();
    check_error(
        "wrong_shape",
        "def f(x: f32[3]) -> f32[3]:\n    return x\n",
        &["--inputs", dir.to_str().unwrap()],
        Some("4:7"),
        "input `x` is f32[4], but the program declares f32[3]",
    );
}

#[test]
fn missing_file_and_function_are_reported() {
    let o = funcfuse(&["run", "no/such/file.py::f", "--engine", "reference", "--output", "/tmp/x"]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("no/such/file.py") && o.stderr.contains("cannot read"), "{}", o.stderr);
    let dir = scratch("no_func");
    let file = common::program(&dir, "def g(x: f32[3]) -> f32[3]:\n    return x\n");
    let o =
        funcfuse(&["run", &format!("{file}::f"), "--engine", "reference", "--output", dir.join("o").to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("no function `f`"), "{}", o.stderr);
}

#[test]
fn bad_usage_exits_with_2() {
    assert_eq!(funcfuse(&["run"]).code, 2);
    assert_eq!(funcfuse(&["frobnicate"]).code, 2);
    let dir = scratch("bad_usage");
    let file = common::program(&dir, "def f(x: f32[3], n: int = 1) -> f32[3]:\n    return x\n");
    let o = funcfuse(&[
        "run",
        &format!("{file}::f"),
        "--engine",
        "reference",
        "--arg",
        "n",
        "--output",
        dir.join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert!(o.stderr.contains("expected NAME=VALUE"));
}

#[test]
fn list_shows_programs_with_signatures() {
    let dir = scratch("list");
    let file = common::program(
        &dir,
        "def _helper(a):\n    return a\n\ndef f(x: f32[3, 4], n: int = 2) -> f32[3]:\n    return x[0]\n",
    );
    let o = funcfuse(&["list", &file]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.trim(), format!("{file}::f(x: f32[3, 4], n: int)"));
}

#[test]
fn run_on_a_directory_runs_every_program_and_reports_failures() {
    let dir = scratch("batch");
    let progs = dir.join("progs");
    std::fs::create_dir_all(progs.join("sub")).unwrap();
    std::fs::write(
        progs.join("good.py"),
        "import torch\n\ndef a(x: f32[2]) -> f32[2]:\n    return x + 1\n\ndef b(x: f32[2]):\n    x.zero_()\n",
    )
    .unwrap();
    std::fs::write(
        progs.join("sub/bad.py"),
        "import torch\n\ndef c(x: f32[2]) -> f32[2]:\n    return x.frobnicate()\n",
    )
    .unwrap();
    let out = dir.join("out");
    let o = funcfuse(&["run", progs.to_str().unwrap(), "--engine", "reference", "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.contains("good.py::a") && o.stdout.contains("good.py::b"), "{}", o.stdout);
    assert!(
        o.stdout.contains("FAIL")
            && o.stdout.contains("sub/bad.py:4:12: AttributeError: 'Tensor' object has no attribute 'frobnicate'"),
        "{}",
        o.stdout
    );
    assert!(o.stdout.contains("2 programs ran, 1 failed"), "{}", o.stdout);
    assert!(out.join("good/a/return.npy").exists());
    assert!(out.join("good/b/x.npy").exists());
}

#[test]
fn huge_or_endless_programs_fail_cleanly() {
    check_error(
        "huge",
        "def f(x: f32[3]) -> f32[3]:\n    y = torch.zeros(100000, 100000, 100)\n    return x\n",
        &[],
        Some("5:9"),
        "larger than this interpreter allows",
    );
    check_error(
        "huge_arange",
        "def f(x: f32[3]) -> f32[3]:\n    y = torch.arange(1e18)\n    return x\n",
        &[],
        Some("5:9"),
        "more than this interpreter allows",
    );
    let dir = scratch("early_break");
    let file = common::program(&dir, "def f(x: f32[3]) -> f32[3]:\n    for i in range(10**15):\n        if i == 3:\n            break\n        x += 1.0\n    return x\n");
    let o =
        funcfuse(&["run", &format!("{file}::f"), "--engine", "reference", "--output", dir.join("o").to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn functional_and_optimized_engines_write_what_the_reference_writes() {
    let dir = scratch("functional_engine");
    let file = common::program(
        &dir,
        "def f(a: f32[4, 6], n: int = 3) -> f32[6, 4]:\n    t = a.t()\n    for i in range(n):\n        t[i] += t[i + 1]\n    a[0].clamp_(min=0.0)\n    return t * 2\n",
    );
    let mut outs = Vec::new();
    for engine in ["reference", "functional", "optimized"] {
        let out = dir.join(engine);
        let o = funcfuse(&["run", &format!("{file}::f"), "--engine", engine, "--output", out.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
        outs.push((std::fs::read(out.join("return.npy")).unwrap(), std::fs::read(out.join("a.npy")).unwrap()));
    }
    assert_eq!(outs[0], outs[1]);
    assert_eq!(outs[0], outs[2]);
    let o =
        funcfuse(&["run", &format!("{file}::f"), "--backend", "cuda", "--output", dir.join("cuda").to_str().unwrap()]);
    if funcfuse::backend::cuda::driver_available() {
        assert_eq!(o.code, 0, "{}", o.stderr);
    } else {
        assert_eq!(o.code, 1);
        assert!(o.stderr.contains("no CUDA driver") && o.stderr.contains("--backend c"), "{}", o.stderr);
    }
    // The CUDA kernels on the emulator: the same arithmetic, so the same bytes.
    let emu = dir.join("emu");
    let o = funcfuse(&["run", &format!("{file}::f"), "--backend", "cuda-emu", "--output", emu.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let got = (std::fs::read(emu.join("return.npy")).unwrap(), std::fs::read(emu.join("a.npy")).unwrap());
    assert_eq!(got, outs[0]);
}

#[test]
fn functionalize_prints_the_term_and_reports_what_it_cannot_do() {
    let dir = scratch("functionalize_cmd");
    let file = common::program(
        &dir,
        "def f(a: f32[8, 4]) -> f32[8, 4]:\n    for i in range(1, 8):\n        a[i] += a[i - 1]\n    return a\n",
    );
    let o = funcfuse(&["functionalize", &format!("{file}::f")]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("1 loops"), "{}", o.stdout);
    assert!(o.stdout.contains("(loop 1 8 1"), "{}", o.stdout);
    assert!(o.stdout.contains("; outputs: (return 0, final a)"), "{}", o.stdout);
    let bad =
        common::program(&dir, "def f(a: f32[2, 8]) -> f32[8]:\n    v = torch.einsum(\"...i->i\", a)\n    return v\n");
    let o = funcfuse(&["functionalize", &format!("{bad}::f")]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.starts_with(&format!("{bad}:5:9: einsum(): ellipsis ('...') is not supported")), "{}", o.stderr);
}

#[test]
fn optimize_records_every_program_and_is_deterministic() {
    let dir = scratch("optimize");
    let progs = dir.join("progs");
    std::fs::create_dir_all(&progs).unwrap();
    std::fs::write(
        progs.join("good.py"),
        "import torch\n\ndef a(x: f32[3, 4]) -> f32[4, 3]:\n    y = x.t()\n    y[1:3] += 1.0\n    return y\n",
    )
    .unwrap();
    std::fs::write(progs.join("syntax.py"), "import torch\n\ndef b(x: f32[2]) -> f32[2]:\n    return x +\n").unwrap();
    std::fs::write(
        progs.join("unsupported.py"),
        "import torch\n\ndef c(x: f32[2, 2]) -> f32[2]:\n    return torch.einsum(\"...i->i\", x)\n",
    )
    .unwrap();
    let run = |out: &str| {
        let o = funcfuse(&["optimize", progs.to_str().unwrap(), "--out", dir.join(out).to_str().unwrap()]);
        assert_eq!(o.code, 1, "{}", o.stderr);
        assert!(o.stdout.contains("1 programs optimized, 2 failed"), "{}", o.stdout);
        // Each program's optimization time is on its progress line, and the batch's total at the end (stderr).
        assert!(o.stderr.lines().any(|l| l.contains("] ok ") && l.ends_with(" ms)")), "{}", o.stderr);
        assert!(o.stderr.contains("optimization time: "), "{}", o.stderr);
        std::fs::read_to_string(dir.join(out).join("report.json")).unwrap()
    };
    let first = run("o1");
    assert_eq!(first, run("o2"), "the same input must give the same report");
    let report: serde_json::Value = serde_json::from_str(&first).unwrap();
    let progs_json = report["programs"].as_array().unwrap();
    assert_eq!(progs_json.len(), 3);
    assert!(progs_json
        .iter()
        .any(|r| r["status"] == "failed" && r["error"].as_str().unwrap().contains("syntax error")));
    assert!(
        progs_json
            .iter()
            .any(|r| r["status"] == "failed"
                && r["error"].as_str().unwrap().contains("ellipsis ('...') is not supported"))
    );
    let ok = progs_json.iter().find(|r| r["status"] == "ok").unwrap();
    assert!(ok["rules_fired"]["views/read-after-write"].as_u64().unwrap() >= 1, "{ok}");
    for f in ["good/a/functional.term", "good/a/optimized.term", "good/a/record.json", "report.md"] {
        assert!(dir.join("o1").join(f).exists(), "{f}");
    }
}

#[test]
fn optimize_with_a_broken_rules_directory_fails_at_load() {
    let dir = scratch("optimize_bad_rules");
    std::fs::create_dir_all(dir.join("rules")).unwrap();
    std::fs::write(dir.join("rules/views.rules"), "# x\nviews/a: (acess ?x ?v) => ?x\n").unwrap();
    let file = common::program(&dir, "def f(x: f32[2]) -> f32[2]:\n    return x\n");
    let o = funcfuse(&[
        "optimize",
        &file,
        "--rules",
        dir.join("rules").to_str().unwrap(),
        "--out",
        dir.join("o").to_str().unwrap(),
    ]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("views.rules:2: cannot parse `(acess ?x ?v)`"), "{}", o.stderr);
}

#[test]
fn rules_check_passes_the_shipped_rules_and_catches_a_users_unsound_rule() {
    let o = funcfuse(&["rules", "check", "--samples", "100"]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("ok    views/read-after-write") && o.stdout.contains("rust  loops/vectorize"));
    assert!(o.stdout.contains(" 0 failed"), "{}", o.stdout);

    let dir = scratch("rules_check_unsound");
    std::fs::create_dir_all(dir.join("mine")).unwrap();
    let rule =
        "# reading through any view sees the write\nmine/too-eager: (access (assign ?x ?v ?y) ?w) => (access ?x ?w)\n";
    std::fs::write(dir.join("mine/mine.rules"), rule).unwrap();
    let o = funcfuse(&["rules", "check", "--rules", dir.join("mine").to_str().unwrap(), "--samples", "200"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("FAIL  mine/too-eager") && o.stdout.contains("mine.rules:2"), "{}", o.stdout);
    assert!(o.stdout.contains("left:") && o.stdout.contains("?w = (view"), "{}", o.stdout);
    // The user's rules come in addition to the shipped ones, or alone with --only-rules.
    let o = funcfuse(&["rules", "list", "--rules", dir.join("mine").to_str().unwrap(), "--only-rules"]);
    assert_eq!(o.stdout.lines().filter(|l| !l.contains("Rust rewrite")).count(), 1, "{}", o.stdout);
}

#[test]
fn a_batch_records_syntax_errors_unsupported_ops_and_timeouts_while_the_rest_succeed() {
    let dir = scratch("batch_failures");
    let progs = dir.join("progs");
    std::fs::create_dir_all(&progs).unwrap();
    let head = "from __future__ import annotations\nimport torch\n\n";
    std::fs::write(
        progs.join("a_good.py"),
        format!("{head}def good(x: f32[4]) -> f32[4]:\n    x[1:3] += 1.0\n    return x.exp()\n"),
    )
    .unwrap();
    std::fs::write(progs.join("b_syntax.py"), format!("{head}def broken(x: f32[4]) -> f32[4]:\n    return x +\n"))
        .unwrap();
    std::fs::write(
        progs.join("c_unsupported.py"),
        format!("{head}def odd(x: f32[4]) -> f32[4]:\n    return torch.fft(x)\n"),
    )
    .unwrap();
    // A program far too long to optimize within the limit: thousands of statements.
    let mut long = format!("{head}def slow(x: f32[8]) -> f32[8]:\n");
    for i in 0..6000 {
        long.push_str(&format!("    x[{}] += x[{}] * 0.5\n", i % 8, (i + 3) % 8));
    }
    long.push_str("    return x\n");
    std::fs::write(progs.join("d_slow.py"), long).unwrap();
    std::fs::write(
        progs.join("e_good.py"),
        format!("{head}def fine(x: f32[2, 3]) -> f32[3, 2]:\n    return x.t() * 2.0\n"),
    )
    .unwrap();
    let out = dir.join("out");
    let o = funcfuse(&[
        "optimize",
        progs.to_str().unwrap(),
        "--time-limit",
        "0.25",
        "--jobs",
        "2",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let status = |name: &str| {
        report["programs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["program"].as_str().unwrap().contains(name))
            .map(|r| (r["status"].as_str().unwrap().to_string(), r["error"].as_str().unwrap_or("").to_string()))
            .unwrap_or_else(|| panic!("{name} missing from the report"))
    };
    assert_eq!(status("a_good.py::good").0, "ok");
    assert_eq!(status("e_good.py::fine").0, "ok");
    let (s, e) = status("b_syntax.py");
    assert!(s == "failed" && e.contains("b_syntax.py:5:"), "{s}: {e}");
    let (s, e) = status("c_unsupported.py::odd");
    assert!(s == "failed" && e.contains("c_unsupported.py:5:") && e.contains("fft"), "{s}: {e}");
    let (s, e) = status("d_slow.py::slow");
    assert!(s == "timed out" && e.contains("time limit"), "{s}: {e}");
    assert_eq!(
        (report["ok"].as_u64(), report["failed"].as_u64(), report["timed_out"].as_u64()),
        (Some(2), Some(2), Some(1))
    );
    for f in ["report.md", "report.html"] {
        let text = std::fs::read_to_string(out.join(f)).unwrap();
        assert!(text.contains("d_slow.py::slow") && text.contains("b_syntax.py"), "{f}");
    }
    assert!(out.join("a_good/good/kernels.c").exists());
}

#[test]
fn optimize_output_does_not_depend_on_jobs() {
    let dir = scratch("batch_jobs");
    let mut texts = Vec::new();
    for jobs in ["1", "3"] {
        let out = dir.join(jobs);
        let o = funcfuse(&["optimize", "corpus/micro", "--jobs", jobs, "--out", out.to_str().unwrap()]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let mut files = Vec::new();
        let mut stack = vec![out.clone()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.file_name().unwrap() != "report.html" {
                    files.push((p.strip_prefix(&out).unwrap().to_path_buf(), std::fs::read(&p).unwrap()));
                }
            }
        }
        files.sort();
        texts.push(files);
    }
    assert!(texts[0].len() > 100);
    assert!(texts[0] == texts[1], "outputs differ between --jobs 1 and --jobs 3");
}

/// Renders report.html in headless Chromium where one is installed (else says so): it must load with no console
/// messages and draw its charts.
#[test]
fn report_html_renders_in_headless_chromium() {
    let dir = scratch("report_html");
    let out = dir.join("out");
    let o = funcfuse(&["optimize", "corpus/micro/loops.py", "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.contains("<svg") && !html.contains("<script"), "charts are inline SVG, with no script");
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"), "the report must not fetch anything");
    // The headline answers "how much faster", labelled as predicted; each program row links to its plan.
    assert!(html.contains("Ours vs eager: <b>") && html.contains("predicted by the cost profile"), "no headline");
    let link = html.split("<a href=\"").nth(1).and_then(|l| l.split('"').next()).expect("a program link");
    assert!(out.join(link).is_file(), "the link {link} does not reach a file");
    assert!(html.contains("shift_rows</a>"), "no row for shift_rows");
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| Command::new(b).arg("--version").output().is_ok_and(|o| o.status.success()))
    else {
        eprintln!("no Chromium on this machine: report.html was not rendered");
        return;
    };
    let url = format!("file://{}", out.join("report.html").canonicalize().unwrap().display());
    let run = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            &url,
        ])
        .output()
        .expect("chromium runs");
    let (dom, log) = (String::from_utf8_lossy(&run.stdout), String::from_utf8_lossy(&run.stderr));
    assert!(run.status.success(), "{log}");
    assert!(dom.contains("<svg") && dom.contains("shift_rows"), "the DOM has no charts");
    assert!(!log.contains("CONSOLE") && !log.contains("Uncaught"), "console messages: {log}");
}

#[test]
fn explain_names_loop_fission_or_why_it_was_not_kept() {
    let o = funcfuse(&["explain", "corpus/workloads/nasrnn.py::nasrnn"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("fired    1 x loops/hoist"), "{}", o.stdout);
    // tanh(x[t]) fuses into the step's kernel: computing it before the loop would only add a kernel and a buffer.
    let o = funcfuse(&["explain", "corpus/micro/recurrences.py::rnn_leaky"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("not kept: loops/hoist applied in 1 place(s)"), "{}", o.stdout);
    assert!(!o.stdout.contains("x loops/hoist"), "{}", o.stdout);
}

#[test]
fn explain_lists_the_python_scalars_the_host_evaluates_and_the_reassociation_under_fast_math() {
    let o = funcfuse(&["explain", "corpus/micro/decode_steps.py::greedy_until_eos"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let line = o.stdout.lines().find(|l| l.contains("Python scalars the host evaluates")).unwrap_or_default();
    assert!(line.contains(" not") && line.contains(" bitor") && line.contains(" ge"), "{}", o.stdout);
    let plain = funcfuse(&["explain", "corpus/micro/decode_steps.py::attention_energies"]);
    assert_eq!(plain.code, 0, "{}", plain.stderr);
    assert!(!plain.stdout.contains("matmul/reassociate"), "{}", plain.stdout);
    let fast = funcfuse(&["explain", "--fast-math", "corpus/micro/decode_steps.py::attention_energies"]);
    assert_eq!(fast.code, 0, "{}", fast.stderr);
    assert!(fast.stdout.contains("fired    1 x matmul/reassociate"), "{}", fast.stdout);
}

#[test]
fn explain_names_loop_interchange_or_the_dependence_that_stopped_it() {
    let o = funcfuse(&["explain", "corpus/workloads/lstm.py::lstm"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("fired    1 x loops/interchange"), "{}", o.stdout);
    let o = funcfuse(&["explain", "corpus/micro/interchange.py::rnn_reads_next_layer"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stdout.contains("x loops/interchange"), "{}", o.stdout);
    assert!(
        o.stdout.contains(
            "loops/interchange: the loop over [0, 6) stays outside the loop over [0, 3): inner iteration 0 reads"
        ),
        "{}",
        o.stdout
    );
}

#[test]
fn explain_and_compare_report_and_reject_bad_arguments() {
    let dir = scratch("explain_compare");
    let o = funcfuse(&["explain", "corpus/micro/loops.py::shift_rows"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("loops/vectorize") && o.stdout.contains("ours vs eager"), "{}", o.stdout);
    let o = funcfuse(&["explain", "corpus/micro/loops.py::shift_rows", "--dump", "plan"]);
    assert!(o.code == 0 && o.stdout.contains("kernel k0"), "{}", o.stdout);
    let o = funcfuse(&["explain", "corpus/micro/loops.py::shift_rows", "--dump", "bogus"]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("--dump bogus"), "{}", o.stderr);
    // A cost profile: one that is missing is an error; a given one is what the plans are predicted with.
    let missing = dir.join("missing.json");
    let o = funcfuse(&["explain", "corpus/micro/loops.py::shift_rows", "--costs", missing.to_str().unwrap()]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("missing.json"), "{}", o.stderr);
    let profile = dir.join("gpu.json");
    std::fs::write(&profile, r#"{"backend": "cuda", "launch_s": 0.001, "bytes_per_s": 1e9, "ops_per_s": 1e9}"#)
        .unwrap();
    let o = funcfuse(&["explain", "corpus/micro/loops.py::shift_rows", "--costs", profile.to_str().unwrap()]);
    assert!(o.code == 0 && o.stdout.contains("predicted with the cuda profile"), "{}{}", o.stdout, o.stderr);

    let out = dir.join("cmp");
    let o = funcfuse(&[
        "compare",
        "corpus/micro/loops.py::prefix_sum",
        "--baselines",
        "eager,bogus",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 2);
    assert!(o.stderr.contains("unknown baseline `bogus`"), "{}", o.stderr);
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    let o = funcfuse(&[
        "compare",
        "corpus/micro/loops.py::prefix_sum",
        "--baseline-file",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("not a baseline file"), "{}", o.stderr);
    let good = dir.join("torch.json");
    std::fs::write(
        &good,
        r#"{"device": "cpu", "torch": "test", "programs": {"corpus/micro/loops.py::prefix_sum": {"eager_s": 0.001}}}"#,
    )
    .unwrap();
    let o = funcfuse(&[
        "compare",
        "corpus/micro/loops.py::prefix_sum",
        "--baseline-file",
        good.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let md = std::fs::read_to_string(out.join("compare.md")).unwrap();
    assert!(md.contains("PyTorch eager (cpu test)") && md.contains("| 1.000 |"), "{md}");
    assert!(md.contains("torch.compile (cpu test) | | | | failed |"), "{md}");
}

#[test]
fn a_gather_kernel_reports_an_index_out_of_range_as_the_reference_does() {
    let dir = scratch("gather_bounds");
    let file = common::program(
        &dir,
        "def f(x: f32[5, 3], k: int = 2) -> f32[2, 3]:\n    i = torch.arange(2) + k\n    return x[i] * 2.0\n",
    );
    let target = format!("{file}::f");
    for (engine, backend) in [("reference", "c"), ("optimized", "c"), ("optimized", "cuda-emu")] {
        let out = dir.join(format!("{engine}-{backend}"));
        let ok =
            funcfuse(&["run", &target, "--engine", engine, "--backend", backend, "--output", out.to_str().unwrap()]);
        assert_eq!(ok.code, 0, "{engine} on {backend}: {}", ok.stderr);
        let bad = funcfuse(&[
            "run",
            &target,
            "--engine",
            engine,
            "--backend",
            backend,
            "--arg",
            "k=4",
            "--output",
            out.to_str().unwrap(),
        ]);
        assert_eq!(bad.code, 1, "{engine} on {backend}: {}", bad.stderr);
        assert!(bad.stderr.contains("index 5 is out of bounds for dimension 0 with size 5"), "{}", bad.stderr);
    }
}

/// `torch.gather` is a kernel (a load whose coordinate along `dim` comes from the index buffer, checked before the
/// launch): an index past the end, or a negative one (gather does not wrap), fails as the reference fails.
#[test]
fn a_torch_gather_kernel_checks_its_indices_as_the_reference_does() {
    let dir = scratch("torch_gather_bounds");
    let file = common::program(
        &dir,
        "def f(x: f32[4, 3], k: int = 0) -> f32[4, 2]:\n    i = torch.tensor([[0, 1], [2, 0], [1, 1], [0, 2]]) + k\n    return torch.gather(x, 1, i) * 2.0\n",
    );
    let target = format!("{file}::f");
    let plan = funcfuse(&["explain", &target, "--dump", "plan"]);
    assert_eq!(plan.code, 0, "{}", plan.stderr);
    // The gather fuses into the kernel that reads it; nothing runs on the host.
    assert!(plan.stdout.contains("kernel k1") && !plan.stdout.contains("host fallback"), "{}", plan.stdout);
    for (engine, backend) in [("reference", "c"), ("optimized", "c"), ("optimized", "cuda-emu")] {
        let out = dir.join(format!("{engine}-{backend}"));
        let run = |k: &str| {
            let arg = format!("k={k}");
            let o = out.to_str().unwrap();
            funcfuse(&["run", &target, "--engine", engine, "--backend", backend, "--arg", &arg, "--output", o])
        };
        let ok = run("0");
        assert_eq!(ok.code, 0, "{engine} on {backend}: {}", ok.stderr);
        for (k, want) in [
            ("1", "index 3 is out of bounds for dimension 1 with size 3"),
            ("-1", "index -1 is out of bounds for dimension 1 with size 3"),
        ] {
            let bad = run(k);
            assert_eq!(bad.code, 1, "{engine} on {backend}, k={k}: {}", bad.stderr);
            assert!(bad.stderr.contains(want), "{engine} on {backend}, k={k}: {}", bad.stderr);
        }
    }
}

/// Issue #12: bad input every engine must reject with the same located message (reference, functional, optimized).
/// A case is `NAME @ LINE:COL @ PROGRAM (lines joined by ⏎) @ MESSAGE`.
#[test]
fn every_engine_rejects_bad_keywords_sizes_ints_and_return_annotations() {
    let cases: &[&str] = &[
        "kw @ 5:12 @ def f(x: f32[4]) -> f32[4]: ⏎ return torch.add(x, 1.0, foo=2) @ unexpected keyword argument 'foo' for torch.add",
        "kw_method @ 5:12 @ def f(x: f32[4]) -> f32[()]: ⏎ return x.sum(foo=2) @ unexpected keyword argument 'foo' for Tensor.sum",
        "out_method @ 5:12 @ def f(x: f32[4], y: f32[4]) -> f32[4]: ⏎ return x.add(1.0, out=y) @ unexpected keyword argument 'out' for Tensor.add",
        "out_shape @ 5:12 @ def f(x: f32[4], y: f32[3]) -> f32[3]: ⏎ return torch.add(x, 1.0, out=y) @ out= has shape [3] but the result has shape [4]",
        "out_dtype @ 5:12 @ def f(x: f32[4], y: i64[4]) -> i64[4]: ⏎ return torch.add(x, 1.0, out=y) @ result type Float can't be cast to the desired output type Long",
        "out_overlap @ 5:12 @ def f(x: f32[5]) -> f32[4]: ⏎ return torch.add(x[1:], 1.0, out=x[:4]) @ some elements of the input tensor and the written-to tensor refer to a single memory location",
        "zeros_neg @ 5:9 @ def f(x: f32[4]) -> f32[4]: ⏎ z = torch.zeros(-4) ⏎ return x @ zeros: Dimension size must be non-negative.",
        "ones_neg @ 5:9 @ def f(x: f32[4]) -> f32[4]: ⏎ z = torch.ones(2, -1) ⏎ return x @ Trying to create tensor with negative dimension -1: [2, -1]",
        "pow_big @ 5:9 @ def f(x: f32[4]) -> f32[4]: ⏎ n = 2**70 ⏎ return x + n @ integer overflow: the Python int 1180591620717411303424 does not fit in 64 bits",
        "mul_big @ 5:16 @ def f(x: f32[4], n: int = 4611686018427387904) -> f32[4]: ⏎ return x + n * 2 @ does not fit in 64 bits",
        "ret_dtype @ 4:1 @ def f(x: f32[4, 3]) -> i64[4, 3]: ⏎ return x @ `f` returns f32[4, 3], but its annotation says `-> i64[4, 3]`",
        "ret_shape @ 4:1 @ def f(x: f32[4, 3]) -> f32[3, 4]: ⏎ return x @ `f` returns f32[4, 3], but its annotation says `-> f32[3, 4]`",
        "ret_arity @ 4:1 @ def f(x: f32[2], y: i64[3]) -> tuple[f32[2], i64[3]]: ⏎ return x, y, x @ returns a tuple (f32[2], i64[3], f32[2]), but its annotation says `-> tuple[f32[2], i64[3]]`",
        "ret_not_tuple @ 4:1 @ def f(x: f32[2], y: i64[3]) -> tuple[f32[2], i64[3]]: ⏎ return x @ `f` returns f32[2], but its annotation says",
        "slice_step_zero @ 5:24 @ def f(x: f32[2, 3]) -> f32[2, 3]: ⏎ return torch.stack(x.unbind(0)[::0]) @ slice step cannot be zero",
    ];
    for case in cases {
        let [name, lc, src, want]: [&str; 4] = case.split(" @ ").collect::<Vec<_>>().try_into().unwrap();
        let dir = scratch(&format!("issue12_{name}"));
        let file = common::program(&dir, &format!("{}\n", src.replace(" ⏎ ", "\n    ")));
        for engine in ["reference", "functional", "optimized"] {
            let out = dir.join(engine);
            let o = funcfuse(&["run", &format!("{file}::f"), "--engine", engine, "--output", out.to_str().unwrap()]);
            assert_eq!(o.code, 1, "{name} on {engine}: expected exit 1, got {}: {}", o.code, o.stderr);
            let prefix = format!("{file}:{lc}: ");
            assert!(o.stderr.starts_with(&prefix), "{name} on {engine}: {:?} does not start with {prefix:?}", o.stderr);
            assert!(o.stderr.contains(want), "{name} on {engine}: {:?} lacks {want:?}", o.stderr);
        }
    }
}

#[test]
fn fuzz_reports_reduces_and_keeps_a_diverging_program() {
    // A planted unsound rule (`sigmoid(x) = x`) makes the optimized engine wrong on seed 5005's program (it takes a
    // sigmoid), which the fuzzer must report, reduce and keep, with exit status 1. The rule checker refuses the rule
    // unless `--unchecked-rules`. (Seeds 1408, 70491 and 102541, real refusals used before, are fixed.)
    let dir = scratch("fuzz_keep");
    let rules = dir.join("planted.rules");
    std::fs::write(&rules, "# sigmoid(x) = x (wrong: planted)\nplanted/sigmoid-id: (sigmoid ?x) => ?x\n").unwrap();
    let keep = dir.join("kept");
    let mut args = vec!["fuzz", "--seed", "5005", "--count", "1", "--engines", "functional,optimized"];
    args.extend(["--rules", rules.to_str().unwrap(), "--keep", keep.to_str().unwrap()]);
    let o = funcfuse(&args);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(
        o.stderr.contains("planted/sigmoid-id") && o.stderr.contains("--unchecked-rules uses them anyway"),
        "{o:?}"
    );
    assert!(!keep.exists(), "nothing checked with a refused rule");
    args.push("--unchecked-rules");
    let o = funcfuse(&args);
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stdout.contains("seed 5005: optimized wrong"), "{o:?}");
    assert!(o.stdout.contains("1 diverge (1 wrong, 0 crashed, 0 panics, 0 refused)"), "{o:?}");
    let reduced = std::fs::read_to_string(keep.join("fuzz_5005.py")).unwrap();
    let original = std::fs::read_to_string(keep.join("fuzz_5005.orig.py")).unwrap();
    assert!(reduced.lines().count() < original.lines().count(), "not reduced:\n{reduced}");
    assert!(reduced.contains("torch.sigmoid("), "the reduction lost what diverges:\n{reduced}");
    let verdict = std::fs::read_to_string(keep.join("fuzz_5005.txt")).unwrap();
    assert!(verdict.contains("optimized wrong: ") && verdict.contains(" elements differ"), "{verdict}");
}

/// Programs are checked in worker processes: one that kills its process (here a test hook aborts the worker that
/// checks seed 5003 on the C backend) is reported as a crash of that engine, and the other programs of its batch are
/// still checked.
#[test]
fn fuzz_survives_and_reports_a_program_that_kills_its_process() {
    let dir = scratch("fuzz_crash");
    let keep = dir.join("kept");
    let args =
        ["fuzz", "--seed", "5000", "--count", "8", "--engines", "functional,c", "--keep", keep.to_str().unwrap()];
    let o = common::run_binary(common::binary().args(args).env("FUNCFUSE_FUZZ_DIE_AT", "5003:c"));
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stdout.contains("seed 5003: c crash"), "{o:?}");
    assert!(o.stdout.contains("8 programs: ") && o.stdout.contains("1 diverge (0 wrong, 1 crashed, 0 panics"), "{o:?}");
    let verdict = std::fs::read_to_string(keep.join("fuzz_5003.txt")).unwrap();
    assert!(verdict.contains("c crash: the process died of signal 6 (SIGABRT)"), "{verdict}");
    // A crash is kept as generated: the reducer checks its candidates in process.
    let kept = std::fs::read_to_string(keep.join("fuzz_5003.py")).unwrap();
    assert_eq!(kept, std::fs::read_to_string(keep.join("fuzz_5003.orig.py")).unwrap());
    // Without the hook the same seeds agree: the crash was the hook's, not the program's.
    let o = funcfuse(&args[..7]);
    assert_eq!(o.code, 0, "{o:?}");
}

/// A worker that stops giving verdicts (a kernel that never ends) is killed after `FUNCFUSE_FUZZ_SILENCE_S` seconds
/// (300 by default) and its program reported as a crash of the engine that hangs alone with the reference.
#[test]
fn fuzz_kills_a_worker_that_hangs() {
    let args = ["fuzz", "--seed", "5000", "--count", "4", "--engines", "functional,c", "--no-reduce"];
    let o = common::run_binary(
        common::binary().args(args).env("FUNCFUSE_FUZZ_DIE_AT", "5001:c:hang").env("FUNCFUSE_FUZZ_SILENCE_S", "2"),
    );
    assert_eq!(o.code, 1, "{o:?}");
    assert!(o.stdout.contains("seed 5001: c crash"), "{o:?}");
    assert!(o.stdout.contains("c crash: the process gave no verdict for 2 s and was killed"), "{o:?}");
    assert!(o.stdout.contains("4 programs: ") && o.stdout.contains("(0 wrong, 1 crashed, 0 panics"), "{o:?}");
}

#[test]
fn fuzz_rejects_an_unknown_engine() {
    let o = funcfuse(&["fuzz", "--count", "1", "--engines", "functional,gpu"]);
    assert_eq!(o.code, 2, "{o:?}");
    assert!(o.stderr.contains("--engines: unknown engine `gpu`"), "{o:?}");
}

/// Issue #20: an `--arg` that names no scalar parameter was silently ignored; `--inputs FILE` doubled the path.
#[test]
fn run_refuses_unknown_args_and_an_inputs_file() {
    let dir = scratch("unknown_arg");
    let file = common::program(&dir, "def f(W: f32[4, 3], scale: float = 1.0) -> f32[4, 3]:\n    return W * scale\n");
    let target = format!("{file}::f");
    let out = dir.join("out");
    let cases = [
        ("w=0.1", "--arg w: `f` has no scalar parameter `w` (its scalar parameters: scale); did you mean `W`?"),
        ("W=0.1", "--arg W: `W` is a tensor parameter of `f`; give it with --inputs"),
        ("bogus=1", "--arg bogus: `f` has no scalar parameter `bogus` (its scalar parameters: scale)"),
    ];
    for (arg, want) in cases {
        for cmd in [
            vec!["run", &target, "--arg", arg, "--output", out.to_str().unwrap()],
            vec!["functionalize", &target, "--arg", arg],
        ] {
            let o = funcfuse(&cmd);
            assert_eq!(o.code, 2, "{cmd:?}: {}", o.stderr);
            assert_eq!(o.stderr.trim_end(), want, "{cmd:?}");
        }
    }
    let o = funcfuse(&["run", &target, "--arg", "scale=2", "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let o = funcfuse(&["run", &target, "--inputs", &file, "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 2, "{}", o.stderr);
    assert_eq!(
        o.stderr.trim_end(),
        format!("--inputs {file}: not a folder (it holds NAME.npy for every tensor parameter)")
    );
}

/// Issue #20: a file Python could not run as written (no `import torch`, no `from __future__ import annotations`)
/// runs, with a located warning for each; a complete file gets none.
#[test]
fn a_file_python_could_not_run_gets_warnings() {
    let dir = scratch("no_imports");
    let file = dir.join("bare.py");
    std::fs::write(&file, "def f(x: f32[3]) -> f32[3]:\n    return torch.sigmoid(x)\n").unwrap();
    let file = file.to_str().unwrap();
    let out = dir.join("out");
    let o = funcfuse(&["run", &format!("{file}::f"), "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains(&format!("{file}:1:1: warning: the file has no `import torch`")), "{}", o.stderr);
    assert!(o.stderr.contains("warning: the file has no `from __future__ import annotations`"), "{}", o.stderr);
    let good = common::program(&dir, "def f(x: f32[3]) -> f32[3]:\n    return torch.sigmoid(x)\n");
    let o = funcfuse(&["run", &format!("{good}::f"), "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(!o.stderr.contains("warning"), "{}", o.stderr);
}

/// Issue #20: `funcfuse ops` lists the supported operations, one per line (docs/OPS.md is its Markdown form).
#[test]
fn ops_lists_supported_operations() {
    let o = funcfuse(&["ops"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let names: Vec<&str> = o.stdout.lines().collect();
    assert!(names.contains(&"torch.sigmoid") && names.contains(&"torch.Tensor.index_copy_"), "{}", o.stdout);
    assert!(!names.contains(&"torch.stft"), "torch.stft has no implementation");
    let md = funcfuse(&["ops", "--markdown"]);
    assert!(md.stdout.starts_with("# Supported operations"), "{}", md.stdout);
}

/// Issue #20: `--verbose` logs every stage to stderr, `FUNCFUSE_LOG=STAGES` some of them, an unknown stage is named;
/// without either nothing is logged, and standard output never changes.
#[test]
fn verbose_and_funcfuse_log_print_each_stage() {
    let dir = scratch("verbose");
    let out = dir.join("out");
    let args = ["run", "corpus/micro/loops.py::shift_rows", "--engine", "optimized", "--output", out.to_str().unwrap()];
    let quiet = common::run_binary(common::binary().args(args).env_remove("FUNCFUSE_LOG"));
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);
    assert!(!quiet.stderr.contains("[funcfuse"), "{}", quiet.stderr);
    let loud = common::run_binary(common::binary().args(args).arg("--verbose").env_remove("FUNCFUSE_LOG"));
    assert_eq!(loud.code, 0, "{}", loud.stderr);
    for stage in ["parse", "functionalize", "saturate", "plan", "compile", "run"] {
        assert!(loud.stderr.contains(&format!("[funcfuse {stage}] ")), "no {stage} line:\n{}", loud.stderr);
    }
    assert!(loud.stderr.contains("extraction chose"), "{}", loud.stderr);
    // Candidates are planned while they are priced: only the plan that runs is logged.
    assert_eq!(loud.stderr.matches("[funcfuse plan]").count(), 1, "{}", loud.stderr);
    assert_eq!(quiet.stdout, loud.stdout);
    let some = common::run_binary(common::binary().args(args).env("FUNCFUSE_LOG", "plan,run"));
    let stages: Vec<&str> = some.stderr.lines().filter_map(|l| l.strip_prefix("[funcfuse ")).collect();
    assert!(
        stages.iter().all(|l| l.starts_with("plan]") || l.starts_with("run]")) && stages.len() == 2,
        "{}",
        some.stderr
    );
    let bad = common::run_binary(common::binary().args(args).env("FUNCFUSE_LOG", "plan,sat"));
    assert!(bad.stderr.contains("FUNCFUSE_LOG: unknown stage `sat`"), "{}", bad.stderr);
}
