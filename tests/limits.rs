//! Limits that stop work and inputs that must never abort: deep programs (a located error past the documented depth
//! limits, never a stack overflow), time limits (validated, and honoured by `run` and by `optimize`'s programs),
//! the e-graph node limit, size-0 dims, directory links and FIFOs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use funcfuse::tensor::{Buf, Tensor};

mod common;

use common::Outcome;

fn funcfuse(args: &[&str]) -> Outcome {
    common::run_binary(common::binary().args(args))
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("limits", name)
}

const HEAD: &str = "from __future__ import annotations\nimport torch\n\n";

fn write(dir: &Path, name: &str, body: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, format!("{HEAD}{body}")).unwrap();
    p.to_string_lossy().to_string()
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// The .npy files of two output folders agree (same names, values within the shared tolerance).
fn same_outputs(got: &Path, want: &Path) {
    let mut names: Vec<_> = std::fs::read_dir(want)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .collect();
    names.sort();
    assert!(!names.is_empty(), "no outputs in {}", want.display());
    for w in names {
        let g = got.join(w.file_name().unwrap());
        let (a, b) = (funcfuse::io::read_npy(&g).unwrap(), funcfuse::io::read_npy(&w).unwrap());
        funcfuse::tensor::compare_close(&g.display().to_string(), &a, &b).unwrap();
    }
}

#[test]
fn brackets_nest_ten_thousand_deep_and_deeper_is_a_located_error() {
    let dir = scratch("brackets");
    let ok = write(
        &dir,
        "ok.py",
        &format!("def f(x: f32[3]) -> f32[3]:\n    return {}x{}\n", "(".repeat(10_000), ")".repeat(10_000)),
    );
    let o = funcfuse(&["run", &format!("{ok}::f"), "--output", s(&dir.join("o"))]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let deep = write(
        &dir,
        "deep.py",
        &format!("def f(x: f32[3]) -> f32[3]:\n    return {}x{}\n", "(".repeat(10_001), ")".repeat(10_001)),
    );
    let target = format!("{deep}::f");
    for args in [
        vec!["run", &target, "--engine", "reference", "--output", s(&dir.join("o2"))],
        vec!["explain", &target],
        vec!["list", &deep],
    ] {
        let o = funcfuse(&args);
        assert_eq!(o.code, 1, "{args:?}: {}", o.stderr);
        // The 10,001st bracket: line 5, after `    return ` and 10,000 brackets.
        let want = format!("{deep}:5:10012: expression nested too deeply (limit 10000 brackets)");
        assert!(o.stderr.contains(&want), "{args:?}: {}", o.stderr);
    }
    // Without brackets: a sum of 20,001 terms nests past the expression limit.
    let sum =
        write(&dir, "sum.py", &format!("def f(x: f32[3]) -> f32[3]:\n    return {}\n", vec!["x"; 20_001].join(" + ")));
    let o = funcfuse(&["run", &format!("{sum}::f"), "--output", s(&dir.join("o3"))]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(
        o.stderr.contains(&format!("{sum}:5:12: expression nested too deeply (limit 20000 levels)")),
        "{}",
        o.stderr
    );
}

#[test]
fn ten_thousand_statement_chains_run_and_explain_on_every_engine() {
    let dir = scratch("chain");
    let chain = write(
        &dir,
        "chain.py",
        &format!("def f(x: f32[3]) -> f32[3]:\n{}    return x\n", "    x = x * 0.5 + 1.0\n".repeat(10_000)),
    );
    let sum =
        write(&dir, "sum.py", &format!("def f(x: f32[3]) -> f32[3]:\n    return {}\n", vec!["x"; 10_000].join(" + ")));
    for file in [&chain, &sum] {
        let target = format!("{file}::f");
        let want = dir.join("ref");
        let o = funcfuse(&["run", &target, "--engine", "reference", "--output", s(&want)]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        for engine in [&["--engine", "functional"][..], &["--backend", "c"], &["--backend", "cuda-emu"]] {
            let got = dir.join("got");
            let inputs = want.join("inputs");
            let mut args = vec!["run", &target, "--inputs", s(&inputs), "--output", s(&got)];
            args.extend_from_slice(engine);
            let o = funcfuse(&args);
            assert_eq!(o.code, 0, "{engine:?}: {}", o.stderr);
            same_outputs(&got, &want);
        }
        let o = funcfuse(&["explain", &target]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stdout.contains("predicted speedup"), "{}", o.stdout);
    }
}

const DEEP_PLAN: &str = "\
def deep_plan(idx: i64[12], b: f32[12, 11], a: f32[2, 9]) -> tuple[f32[12, 11], f32[2, 9]]:
    t1 = a * -0.75 / (1.0 + (idx.narrow(0, 1, 9) * 0.25).relu() * (idx.narrow(0, 1, 9) * 0.25).relu())
    h1 = torch.zeros(12, 11)
    for i in range(2):
        v1 = h1[-12][3:]
        if i == 0:
            v1.reshape(8).mul_(v1)
    h1.select(0, 6)[...] = h1[-4]
    p1, p2 = t1.chunk(2, 1)
    b[3, 8] += torch.minimum(p2[0, 3], torch.sum(h1[:, 1:10:2], dim=1)[1]) + torch.minimum(h1.t().max(1, keepdim=True).values[6, 0], (h1 @ b.t())[-4, 4])
    for i in range(1, 9):
        t1[:, i] = t1[:, i - 1]
    p2.select(1, 3).add_(idx[3] * 0.25)
    outs1 = []
    for i in range(2):
        outs1.append(t1[i])
        h1.transpose(0, -1).t()[-11:8:2, -10:8] = p2[1, 1] * t1[:, idx].t()[1:8, 1] * 0.5
    t4 = torch.stack(outs1)
    return h1, t4
";

/// Two kernel groups each reading a member of the other: launching one launched the other, which launched the
/// first again, until the stack overflowed.
#[test]
fn kernel_groups_that_read_each_other_run_like_the_reference() {
    let dir = scratch("deep_plan");
    let file = write(&dir, "p.py", DEEP_PLAN);
    let target = format!("{file}::deep_plan");
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    let idx = Tensor::from_buf(Buf::I64((0..12).map(|i| i % 9).collect()), vec![12]);
    let b = Tensor::from_buf(Buf::F32((0..132).map(|i| (i % 7) as f32 * 0.25 - 0.5).collect()), vec![12, 11]);
    let a = Tensor::from_buf(Buf::F32((0..18).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect()), vec![2, 9]);
    for (n, t) in [("idx", &idx), ("b", &b), ("a", &a)] {
        funcfuse::io::write_npy(&inputs.join(format!("{n}.npy")), t).unwrap();
    }
    let want = dir.join("ref");
    let o = funcfuse(&["run", &target, "--engine", "reference", "--inputs", s(&inputs), "--output", s(&want)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    for backend in ["c", "cuda-emu"] {
        let got = dir.join(backend);
        let o = funcfuse(&["run", &target, "--backend", backend, "--inputs", s(&inputs), "--output", s(&got)]);
        assert_eq!(o.code, 0, "{backend}: {}", o.stderr);
        same_outputs(&got, &want);
    }
}

#[test]
fn a_batch_with_too_deep_files_finishes_and_writes_its_reports() {
    let dir = scratch("deep_batch");
    let progs = dir.join("progs");
    std::fs::create_dir_all(&progs).unwrap();
    write(&progs, "a_good.py", "def good(x: f32[4]) -> f32[4]:\n    return x.exp()\n");
    write(
        &progs,
        "b_deep.py",
        &format!("def deep(x: f32[3]) -> f32[3]:\n    return {}x{}\n", "(".repeat(20_000), ")".repeat(20_000)),
    );
    write(
        &progs,
        "c_chain.py",
        &format!("def chain(x: f32[3]) -> f32[3]:\n{}    return x\n", "    x = x + 1.0\n".repeat(10_000)),
    );
    write(&progs, "d_plan.py", DEEP_PLAN);
    let out = dir.join("out");
    let o = funcfuse(&["optimize", s(&progs), "--jobs", "2", "--out", s(&out)]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let programs = report["programs"].as_array().unwrap();
    let status = |name: &str| {
        let r = programs.iter().find(|r| r["program"].as_str().unwrap().contains(name)).expect(name);
        (r["status"].as_str().unwrap().to_string(), r["error"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(status("a_good.py::good").0, "ok");
    assert_eq!(status("c_chain.py::chain").0, "ok");
    assert_eq!(status("d_plan.py::deep_plan").0, "ok");
    let (st, e) = status("b_deep.py");
    assert!(st == "failed" && e.contains("b_deep.py:5:10012: expression nested too deeply"), "{st}: {e}");
    for f in ["report.md", "report.html"] {
        assert!(std::fs::read_to_string(out.join(f)).unwrap().contains("b_deep.py"), "{f}");
    }
}

#[test]
fn time_limits_that_are_not_finite_positive_seconds_are_usage_errors() {
    let dir = scratch("bad_limits");
    let file = write(&dir, "p.py", "def f(x: f32[3]) -> f32[3]:\n    return x\n");
    let target = format!("{file}::f");
    for bad in ["inf", "1e30", "-1", "NaN", "0", "soon"] {
        for cmd in ["optimize", "run"] {
            let out = dir.join("o");
            let args: Vec<&str> = match cmd {
                "optimize" => vec!["optimize", &target, "--time-limit", bad, "--out", s(&out)],
                _ => vec!["run", &target, "--time-limit", bad, "--output", s(&out)],
            };
            let o = funcfuse(&args);
            assert_eq!(o.code, 2, "{cmd} --time-limit {bad}: {}", o.stderr);
            assert!(o.stderr.contains("--time-limit") && o.stderr.contains("seconds"), "{}", o.stderr);
        }
    }
    let o = funcfuse(&["run", "--help"]);
    assert!(o.stdout.contains("--time-limit") && o.stdout.contains("[default: 600]"), "{}", o.stdout);
}

#[test]
fn run_stops_at_its_time_limit_on_every_engine() {
    let dir = scratch("run_limit");
    let file = write(
        &dir,
        "p.py",
        "def f(x: f32[3], n: int) -> f32[3]:\n    for i in range(n):\n        x += 1.0\n    return x\n",
    );
    let target = format!("{file}::f");
    for engine in
        [&["--engine", "reference"][..], &["--engine", "functional"], &["--backend", "c"], &["--backend", "cuda-emu"]]
    {
        let start = Instant::now();
        let mut args = vec!["run", &target, "--arg", "n=9223372036854775807", "--time-limit", "1", "--output"];
        let out = dir.join("o");
        args.push(s(&out));
        args.extend_from_slice(engine);
        let o = funcfuse(&args);
        assert_eq!(o.code, 1, "{engine:?}: {}", o.stderr);
        assert!(o.stderr.contains("time limit exceeded (1 s)"), "{engine:?}: {}", o.stderr);
        assert!(start.elapsed() < Duration::from_secs(30), "{engine:?} took {:?}", start.elapsed());
    }
    // A range over all of i64 (its length and its items overflow 64-bit arithmetic) stops the same way.
    let wide = write(
        &dir,
        "w.py",
        "def f(x: f32[3], n: int) -> f32[3]:\n    for i in range(-n, n, 3):\n        x += 1.0\n    return x\n",
    );
    for engine in [&["--engine", "reference"][..], &["--engine", "functional"], &["--backend", "c"]] {
        let (target, out) = (format!("{wide}::f"), dir.join("o"));
        let mut args = vec!["run", &target, "--arg", "n=9223372036854775807", "--time-limit", "1", "--output", s(&out)];
        args.extend_from_slice(engine);
        let o = funcfuse(&args);
        assert_eq!(o.code, 1, "{engine:?}: {}", o.stderr);
        assert!(o.stderr.contains("time limit exceeded (1 s)"), "{engine:?}: {}", o.stderr);
    }
    // The reference engine says where it stopped.
    let o = funcfuse(&[
        "run",
        &target,
        "--engine",
        "reference",
        "--arg",
        "n=9223372036854775807",
        "--time-limit",
        "0.5",
        "--output",
        s(&dir.join("o")),
    ]);
    assert!(o.stderr.starts_with(&format!("{file}:6:9: time limit exceeded")), "{}", o.stderr);
}

/// A program past its limit stops working (its thread returns), not only is reported: `optimize_one` under a
/// deadline returns soon after it.
#[test]
fn a_timed_out_program_stops_its_own_work() {
    let dir = scratch("cancel");
    let mut long = String::from("def slow(x: f32[8]) -> f32[8]:\n");
    for i in 0..6000 {
        long.push_str(&format!("    x[{}] += x[{}] * 0.5\n", i % 8, (i + 3) % 8));
    }
    long.push_str("    return x\n");
    let file = PathBuf::from(write(&dir, "slow.py", &long));
    let task = funcfuse::batch::Task { file, dir: dir.join("o"), func: "slow".into() };
    let defs = funcfuse::rewrite::rules::shipped().unwrap();
    let opts = funcfuse::batch::Options {
        jobs: 1,
        time_limit: Duration::from_millis(300),
        kernels: funcfuse::batch::Kernels::C,
        profile: funcfuse::cost::Profile::shipped_c(),
        autotune: 0,
        fast_math: false,
    };
    let start = Instant::now();
    let r =
        funcfuse::limits::with_deadline(Some(opts.time_limit), || funcfuse::batch::optimize_one(&task, &defs, &opts));
    let took = start.elapsed();
    assert!(r.is_err() && funcfuse::limits::check().is_ok(), "{r:?}");
    assert!(r.unwrap_err().contains("time limit exceeded"));
    assert!(took < Duration::from_secs(3), "the work went on for {took:?} past a 0.3 s limit");
    // The whole batch reports it timed out and finishes promptly.
    let start = Instant::now();
    let outcomes = funcfuse::batch::run(&[task], &defs, &opts, |_, _, _, _| {});
    assert!(matches!(outcomes[0], funcfuse::batch::Outcome::TimedOut), "{:?}", outcomes[0].status());
    assert!(start.elapsed() < Duration::from_secs(3), "{:?}", start.elapsed());
}

/// A rule that grows terms: the e-graph stops within one rule application of the node limit (egg alone checks
/// between rules, after all of a rule's matches).
#[test]
fn the_node_limit_holds_between_rule_applications() {
    let src =
        format!("{HEAD}def f(x: f32[4], y: f32[4]) -> f32[4]:\n    return x + y + x * 2.0 + y * 3.0 + x + y + x + y\n");
    let module = funcfuse::frontend::parse_module("g.py", &src).unwrap();
    let f = funcfuse::functionalize::functionalize(&module, "f", &Default::default()).unwrap();
    let rule = "# x + y = (x + (y - y)) + y for finite y (a rule that grows terms)\n\
                grow/pad: (add ?x ?y) => (add (add ?x (sub ?y ?y)) ?y)\n\
                # x + y = y + x\ngrow/comm: (add ?x ?y) => (add ?y ?x)\n";
    let defs = funcfuse::rewrite::rules::parse_rules("grow.rules", rule).unwrap();
    let rules = funcfuse::rewrite::rules::to_rewrites(&defs).unwrap();
    for nodes in [500, 2000, 5000] {
        let limits = funcfuse::rewrite::saturate::Limits {
            iterations: 100,
            nodes,
            time: Duration::from_secs(60),
            search: Default::default(),
            fast_math: false,
        };
        let o = funcfuse::rewrite::saturate::optimize(&f, &rules, limits).unwrap();
        assert!(o.stop_reason.contains("node limit"), "{nodes}: {}", o.stop_reason);
        let margin = funcfuse::rewrite::schedule::MAX_OVERSHOOT;
        assert!(o.egraph_nodes <= nodes + margin, "{} nodes against a limit of {nodes}", o.egraph_nodes);
    }
}

#[test]
fn size_zero_dims_give_empty_tensors_and_zero_sums_on_every_engine() {
    let dir = scratch("size0");
    let file = write(
        &dir,
        "z.py",
        "def add(x: f32[0, 4]) -> f32[0, 4]:\n    return x + 1.0\n\n\
         def total(x: f32[0, 4]) -> f32[4]:\n    return x.sum(0)\n\n\
         def mm(x: f32[0, 4], y: f32[4, 0]) -> f32[0, 0]:\n    return x @ y\n\n\
         def outer(x: f32[0, 4], y: f32[4, 0]) -> f32[4, 4]:\n    return torch.relu(y @ x + 1.0)\n",
    );
    for (func, shape, value) in [
        ("add", vec![0, 4], None),
        ("total", vec![4], Some(0.0)),
        ("mm", vec![0, 0], None),
        ("outer", vec![4, 4], Some(1.0)),
    ] {
        let target = format!("{file}::{func}");
        let want = dir.join(format!("{func}_ref"));
        let o = funcfuse(&["run", &target, "--engine", "reference", "--output", s(&want)]);
        assert_eq!(o.code, 0, "{func}: {}", o.stderr);
        let r = funcfuse::io::read_npy(&want.join("return.npy")).unwrap();
        assert_eq!(r.shape, shape, "{func}");
        if let Some(v) = value {
            assert!(r.to_f64_vec().iter().all(|&x| x == v), "{func}: {:?}", r.to_f64_vec());
        }
        for engine in [&["--engine", "functional"][..], &["--backend", "c"], &["--backend", "cuda-emu"]] {
            let got = dir.join(format!("{func}_got"));
            let mut args = vec!["run", &target, "--output", s(&got)];
            args.extend_from_slice(engine);
            let o = funcfuse(&args);
            assert_eq!(o.code, 0, "{func} {engine:?}: {}", o.stderr);
            same_outputs(&got, &want);
        }
    }
    let o = funcfuse(&["compare", s(&dir), "--out", s(&dir.join("cmp"))]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
}

#[test]
fn directory_links_are_not_followed_and_fifos_are_refused() {
    let dir = scratch("links");
    let tree = dir.join("tree");
    std::fs::create_dir_all(tree.join("sub")).unwrap();
    write(&tree, "a.py", "def a(x: f32[2]) -> f32[2]:\n    return x\n");
    write(&tree.join("sub"), "b.py", "def b(x: f32[2]) -> f32[2]:\n    return x\n");
    // Two links to `.` on every level: following them, the walk doubles per level without end.
    for d in [tree.clone(), tree.join("sub")] {
        std::os::unix::fs::symlink(".", d.join("l1")).unwrap();
        std::os::unix::fs::symlink(".", d.join("l2")).unwrap();
    }
    let start = Instant::now();
    let o = funcfuse(&["list", s(&tree)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.lines().count(), 2, "{}", o.stdout);
    assert!(start.elapsed() < Duration::from_secs(20));
    let out = dir.join("out");
    let o = funcfuse(&["optimize", s(&tree), "--out", s(&out)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.starts_with("2 programs optimized"), "{}", o.stdout);

    let fifo = dir.join("fifo.py");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = funcfuse(&["run", &format!("{}::f", fifo.display()), "--output", s(&out)]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("not a regular file"), "{}", o.stderr);
    let inputs = dir.join("inputs");
    std::fs::create_dir_all(&inputs).unwrap();
    assert!(Command::new("mkfifo").arg(inputs.join("x.npy")).status().unwrap().success());
    let o =
        funcfuse(&["run", &format!("{}::a", tree.join("a.py").display()), "--inputs", s(&inputs), "--output", s(&out)]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("x.npy: not a regular file"), "{}", o.stderr);
}
