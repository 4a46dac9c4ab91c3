//! No unchecked rule is used: `optimize`, `compare`, `explain` and `run` check user rule files before planning
//! (the verdict cached by the file's content), refuse an unsound one with its counterexample, and use it anyway only
//! with `--unchecked-rules`; `@real` rules only with `--fast-math`; `compare` exits 1 when a plan differs from the
//! reference. Also: `--rules` takes a file, a 10 MB rules file loads in seconds, and 0-dim sums run.

use std::path::{Path, PathBuf};

mod common;

use common::Outcome;

/// Runs the binary with its cache in `cache`.
fn funcfuse(cache: &Path, args: &[&str]) -> Outcome {
    common::run_binary(common::binary().args(args).env("FUNCFUSE_CACHE", cache))
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("rules_cli", name)
}

const PROGRAM: &str = "from __future__ import annotations\nimport torch\n\n\
def f(a: f32[4, 8], b: f32[4, 8]) -> f32[4, 8]:\n    return torch.exp(a) + b\n";

const UNSOUND: &str = "# exp is the identity (it is not)\nmine/exp-id: (exp ?x) => ?x\n";

const SOUND: &str = "# a + b = b + a\nmine/add-commutes: (add ?a ?b) => (add ?b ?a)\n";

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn an_unsound_user_rule_is_refused_before_anything_is_planned() {
    let dir = scratch("unsound");
    let cache = dir.join("cache");
    let prog = dir.join("prog.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let rules = dir.join("mine.rules");
    std::fs::write(&rules, UNSOUND).unwrap();
    let target = format!("{}::f", s(&prog));
    let out = dir.join("o");
    let runs: Vec<Vec<&str>> = vec![
        vec!["optimize", &target, "--out", s(&out)],
        vec!["compare", &target, "--out", s(&out)],
        vec!["explain", &target],
        vec!["run", &target, "--output", s(&out)],
    ];
    for args in &runs {
        let mut a = args.clone();
        a.extend(["--rules", s(&rules)]);
        let o = funcfuse(&cache, &a);
        assert_eq!(o.code, 1, "{a:?}: {}{}", o.stdout, o.stderr);
        assert!(o.stderr.contains("failed the rule checker; refusing to use them"), "{a:?}: {}", o.stderr);
        assert!(o.stderr.contains("FAIL  mine/exp-id") && o.stderr.contains("mine.rules:2"), "{}", o.stderr);
        assert!(o.stderr.contains("left:") && o.stderr.contains("?x = "), "{}", o.stderr);
        assert!(!out.exists(), "{a:?} wrote outputs before refusing");
    }
    // --unchecked-rules is the way out: the rule is used, and compare says the plan differs (exit 1).
    let o = funcfuse(&cache, &["compare", &target, "--out", s(&out), "--rules", s(&rules), "--unchecked-rules"]);
    assert_eq!(o.code, 1, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("1 plans differ from the reference:") && o.stdout.contains("::f (ours)"), "{}", o.stdout);
    let o = funcfuse(&cache, &["explain", &target, "--rules", s(&rules), "--unchecked-rules"]);
    assert!(o.code == 0 && o.stdout.contains("x mine/exp-id"), "{}{}", o.stdout, o.stderr);
    assert!(o.stderr.contains("rules used without the rule checker (--unchecked-rules)"), "{}", o.stderr);
}

#[test]
fn a_sound_user_rule_is_checked_once_then_its_verdict_is_cached() {
    let dir = scratch("sound");
    let cache = dir.join("cache");
    let prog = dir.join("prog.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    std::fs::create_dir_all(dir.join("mine")).unwrap();
    std::fs::write(dir.join("mine/mine.rules"), SOUND).unwrap();
    let target = format!("{}::f", s(&prog));
    // A directory and a file name the same rules.
    for rules in [dir.join("mine"), dir.join("mine/mine.rules")] {
        let _ = std::fs::remove_dir_all(&cache);
        let o = funcfuse(&cache, &["explain", &target, "--rules", s(&rules)]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stderr.contains("1 rules passed the rule checker") && !o.stderr.contains("cached"), "{}", o.stderr);
        let start = std::time::Instant::now();
        let o = funcfuse(&cache, &["rules", "list", "--rules", s(&rules)]);
        let list_time = start.elapsed();
        assert!(o.stdout.contains("mine/add-commutes"), "{}", o.stdout);
        let start = std::time::Instant::now();
        let o = funcfuse(&cache, &["explain", &target, "--rules", s(&rules), "--dump", "functional"]);
        let cached_time = start.elapsed();
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(o.stderr.contains("(verdict cached)"), "{}", o.stderr);
        // The cached check costs about what loading the rules costs.
        assert!(cached_time < list_time * 4 + std::time::Duration::from_secs(2), "{cached_time:?} vs {list_time:?}");
    }
    // A changed file is checked again.
    std::fs::write(
        dir.join("mine/mine.rules"),
        format!("{SOUND}\n# a * b = b * a\nmine/mul-commutes: (mul ?a ?b) => (mul ?b ?a)\n"),
    )
    .unwrap();
    let o = funcfuse(&cache, &["explain", &target, "--rules", s(&dir.join("mine")), "--dump", "functional"]);
    assert!(o.code == 0 && o.stderr.contains("2 rules passed the rule checker\n"), "{}", o.stderr);
    // A cache directory that cannot be created costs the check every time, nothing more.
    std::fs::write(dir.join("plain-file"), "").unwrap();
    let nowhere = dir.join("plain-file").join("cache");
    for _ in 0..2 {
        let o = funcfuse(&nowhere, &["explain", &target, "--rules", s(&dir.join("mine")), "--dump", "functional"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        assert!(
            o.stderr.contains("rule verdicts are not cached") && o.stderr.contains("2 rules passed the rule checker\n"),
            "{}",
            o.stderr
        );
    }
    // A cache directory that others may write to is refused.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
        let o = funcfuse(&cache, &["explain", &target, "--rules", s(&dir.join("mine"))]);
        assert_eq!(o.code, 1);
        assert!(o.stderr.contains("writable by group or others"), "{}", o.stderr);
    }
}

#[test]
fn real_arithmetic_rules_are_used_only_with_fast_math() {
    let dir = scratch("fast_math");
    let cache = dir.join("cache");
    let prog = dir.join("prog.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let rules = dir.join("mine.rules");
    std::fs::write(
        &rules,
        "# a + b = b + a, marked as if it needed real arithmetic\nmine/add-swap: (add ?a ?b) => (add ?b ?a) @real\n",
    )
    .unwrap();
    let target = format!("{}::f", s(&prog));
    let o = funcfuse(&cache, &["rules", "list", "--rules", s(&rules), "--only-rules"]);
    assert!(o.stdout.contains("(add ?b ?a)  @real"), "{}", o.stdout);
    let o = funcfuse(&cache, &["explain", &target, "--rules", s(&rules)]);
    assert!(o.code == 0 && !o.stdout.contains("mine/add-swap"), "{}{}", o.stdout, o.stderr);
    let o = funcfuse(&cache, &["explain", &target, "--rules", s(&rules), "--fast-math"]);
    assert!(o.code == 0 && o.stdout.contains("x mine/add-swap"), "{}{}", o.stdout, o.stderr);
}

#[test]
fn shipped_matmul_rules_join_products_and_sums_of_products_only_with_fast_math() {
    let dir = scratch("matmul_rules");
    let file = "corpus/micro/matmul_merging.py";
    // An exact rule: joined along rows, the two products of one weight are one product of the joined inputs.
    let o = funcfuse(&dir, &["explain", &format!("{file}::shared_weight_rows"), "--dump", "plan"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert_eq!(o.stdout.matches("reducing Sum").count(), 1, "one product expected:\n{}", o.stdout);
    // The sum of two products is one product only in real arithmetic.
    let target = format!("{file}::cell_input_projection");
    let o = funcfuse(&dir, &["explain", &target]);
    assert!(o.code == 0 && !o.stdout.contains("matmul/join-inner"), "{}{}", o.stdout, o.stderr);
    let o = funcfuse(&dir, &["explain", &target, "--fast-math"]);
    assert!(o.code == 0 && o.stdout.contains("x matmul/join-inner"), "{}{}", o.stdout, o.stderr);
    // A batched input joins rows along dim 1: the column rule must not fire there.
    let o = funcfuse(&dir, &["explain", &format!("{file}::batched_input_joins_rows")]);
    assert!(o.code == 0 && !o.stdout.contains("matmul/"), "{}{}", o.stdout, o.stderr);
    // Every plan of every function, with the real-arithmetic rules too, matches the reference.
    let out = dir.join("compare");
    let o = funcfuse(&dir, &["compare", file, "--fast-math", "--out", s(&out)]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
}

#[test]
fn a_ten_megabyte_rules_file_loads_in_seconds() {
    let dir = scratch("big");
    let mut text = String::new();
    let mut i = 0;
    while text.len() < 10_000_000 {
        text.push_str(&format!("# rule {i}\nbig/r{i}: (access (neg (exp ?x)) ?v) => (neg (access (exp ?x) ?v))\n"));
        i += 1;
    }
    text.push_str("# again\nbig/r7: (neg ?x) => (neg ?x)\n");
    let rules = dir.join("big.rules");
    std::fs::write(&rules, &text).unwrap();
    let start = std::time::Instant::now();
    let o = funcfuse(&dir, &["rules", "list", "--only-rules", "--rules", s(&rules)]);
    let took = start.elapsed();
    assert_eq!(o.code, 1);
    let want = format!("duplicate rule name `big/r7` (first at {}:16)", s(&rules));
    assert!(o.stderr.contains(&want), "{}", o.stderr);
    assert!(took < std::time::Duration::from_secs(30), "loading took {took:?}");
}

#[test]
fn zero_dim_sums_run_and_zero_dim_cats_are_located_errors_in_every_engine() {
    let dir = scratch("sum0");
    let prog = dir.join("prog.py");
    std::fs::write(
        &prog,
        "from __future__ import annotations\nimport torch\n\ndef f(x: f32[3]):\n    return x.sum().sum(0) + x.sum().sum(-1, keepdim=True)\n",
    )
    .unwrap();
    let target = format!("{}::f", s(&prog));
    let mut got = Vec::new();
    for engine in ["reference", "functional", "optimized"] {
        let out = dir.join(engine);
        let o = funcfuse(&dir, &["run", &target, "--engine", engine, "--output", s(&out)]);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
        let x = funcfuse::io::read_npy(&out.join("inputs/x.npy")).unwrap().to_f64_vec();
        let r = funcfuse::io::read_npy(&out.join("return.npy")).unwrap();
        assert!(r.shape.is_empty(), "{engine}: {:?}", r.shape);
        let want: f64 = 2.0 * x.iter().sum::<f64>();
        assert!((r.to_f64_vec()[0] - want).abs() < 1e-5, "{engine}: {:?} vs {want}", r.to_f64_vec());
        got.push(r.to_f64_vec());
    }
    // A cat of a 0-dim tensor is a located error in every engine, and a type error in a term, not a panic.
    std::fs::write(&prog, "from __future__ import annotations\nimport torch\n\ndef f(x: f32[3]):\n    return torch.cat([x.sum(), x.sum()])\n").unwrap();
    for engine in ["reference", "functional", "optimized"] {
        let o = funcfuse(&dir, &["run", &target, "--engine", engine, "--output", s(&dir.join("cat"))]);
        assert_eq!(o.code, 1, "{engine}");
        let want = format!("{}:5:12: zero-dimensional tensor (at position 0) cannot be concatenated", s(&prog));
        assert!(o.stderr.contains(&want), "{engine}: {}", o.stderr);
    }
    let t: funcfuse::ir::Term = "(tuple (cat 0 (input %a) (input %a)))".parse().unwrap();
    let e = funcfuse::ir::verify(&t, &[("a".into(), funcfuse::tensor::DType::F32, vec![])]).unwrap_err();
    assert!(e.contains("zero-dimensional tensor (at position 0) cannot be concatenated"), "{e}");
}

/// `run --rules` saturates with the user's rules, as `optimize` does: the unsound `exp(x) = x`, used with
/// `--unchecked-rules`, makes the optimized engine compute `a + b` where the reference computes `exp(a) + b` (which
/// is how one sees that the rule was used); the reference engine does not read the rules.
#[test]
fn run_uses_the_rules_it_is_given() {
    let dir = scratch("run");
    let cache = dir.join("cache");
    let prog = dir.join("prog.py");
    std::fs::write(&prog, PROGRAM).unwrap();
    let rules = dir.join("mine.rules");
    std::fs::write(&rules, UNSOUND).unwrap();
    let target = format!("{}::f", s(&prog));
    let read = |d: &Path, name: &str| funcfuse::io::read_npy(&d.join(name)).unwrap().to_f64_vec();
    let reference = dir.join("reference");
    let o =
        funcfuse(&cache, &["run", &target, "--engine", "reference", "--rules", s(&rules), "--output", s(&reference)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let (a, b) = (read(&reference, "inputs/a.npy"), read(&reference, "inputs/b.npy"));
    let exp_sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| (*x as f32).exp() as f64 + y).collect();
    let plain_sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    let close = |got: &[f64], want: &[f64]| got.iter().zip(want).all(|(g, w)| (g - w).abs() <= 1e-5 * (1.0 + w.abs()));
    assert!(close(&read(&reference, "return.npy"), &exp_sum));
    let shipped = dir.join("shipped");
    let o = funcfuse(&cache, &["run", &target, "--output", s(&shipped)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(close(&read(&shipped, "return.npy"), &exp_sum));
    let mine = dir.join("mine");
    let o = funcfuse(&cache, &["run", &target, "--rules", s(&rules), "--unchecked-rules", "--output", s(&mine)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stderr.contains("rules used without the rule checker (--unchecked-rules)"), "{}", o.stderr);
    assert!(close(&read(&mine, "return.npy"), &plain_sum), "the user rule was not used");
}
