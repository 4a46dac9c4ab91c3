//! `scripts/real_code_check.py`: every program of a folder on every engine against its goldens, sorted into correct,
//! refused (with the message's first line) and silently wrong, with totals and an exit status that says whether any
//! result was wrong. Needs `python3` with numpy; without them the tests say so and pass (set
//! `FUNCFUSE_REQUIRE_NUMPY` to make that a failure).

use std::path::Path;
use std::process::Command;

mod common;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/real_code_check.py");

fn python_with_numpy() -> bool {
    let ok = Command::new("python3").args(["-c", "import numpy"]).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(std::env::var_os("FUNCFUSE_REQUIRE_NUMPY").is_none(), "python3 with numpy is required but missing");
        eprintln!("python3 with numpy not found: scripts/real_code_check.py was not run");
    }
    ok
}

/// Goldens for `file::func` in `dir` (with the seed in meta.json): the reference engine's outputs stand in for
/// PyTorch's.
fn golden(dir: &Path, file: &Path, func: &str) {
    let target = format!("{}::{func}", file.display());
    let o = common::run_binary(common::binary().args([
        "run",
        &target,
        "--engine",
        "reference",
        "--seed",
        "3",
        "--output",
        dir.to_str().unwrap(),
    ]));
    assert_eq!(o.code, 0, "{}", o.stderr);
    std::fs::write(dir.join("meta.json"), "{\"seed\": 3}\n").unwrap();
}

fn check(args: &[&str]) -> (i32, String) {
    let out = Command::new("python3")
        .arg(SCRIPT)
        .args(args)
        .args(["--binary", env!("CARGO_BIN_EXE_funcfuse")])
        .output()
        .expect("python3 runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stdout).to_string())
}

fn row<'a>(table: &'a str, func: &str) -> &'a str {
    let key = format!("::{func}`");
    table.lines().find(|l| l.contains(&key)).unwrap_or_else(|| panic!("no row for {func} in\n{table}"))
}

#[test]
fn programs_are_sorted_into_correct_refused_and_silently_wrong_with_totals() {
    if !python_with_numpy() {
        return;
    }
    let dir = common::scratch("real_code_check", "sorted");
    let progs = dir.join("progs");
    std::fs::create_dir_all(&progs).unwrap();
    let file = progs.join("fam.py");
    std::fs::write(
        &file,
        "from __future__ import annotations\nimport torch\n\n\n\
         # project, file.py: good\n\
         def good(x: f32[4, 3]) -> f32[4, 3]:\n    return (x * 2.0).relu()\n\n\n\
         def wrong(x: f32[4, 3]) -> f32[4, 3]:\n    return x + 1.0\n\n\n\
         def masked(x: f32[4, 3]) -> f32[()]:\n    return x[x > 0].sum()\n",
    )
    .unwrap();
    let goldens = progs.join("goldens");
    for f in ["good", "wrong", "masked"] {
        golden(&goldens.join("fam").join(f), &file, f);
    }
    // `wrong`'s golden says what `good` returns: every engine now exits 0 with other outputs than the golden's.
    std::fs::copy(goldens.join("fam/good/return.npy"), goldens.join("fam/wrong/return.npy")).unwrap();
    let md = dir.join("table.md");
    let (code, out) = check(&[progs.to_str().unwrap(), "--markdown", md.to_str().unwrap()]);
    assert_eq!(code, 1, "a wrong result must give exit status 1:\n{out}");
    assert!(row(&out, "good").ends_with("| project, file.py: good | ok | ok | ok |"), "{out}");
    let wrong = row(&out, "wrong");
    assert_eq!(wrong.matches("WRONG: return.npy: ").count(), 3, "{out}");
    let masked = row(&out, "masked");
    assert!(masked.contains("| ok | refused: "), "{out}");
    assert!(masked.contains("fam.py:15:12: "), "the refusal keeps its location: {out}");
    for want in [
        "- reference: 3/3 accepted, 2/3 correct",
        "- functional: 2/3 accepted, 1/3 correct",
        "- optimized: 2/3 accepted, 1/3 correct",
        "- correct on every engine: 1/3",
        "- silently wrong: 3; crashes or timeouts: 0",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert_eq!(std::fs::read_to_string(&md).unwrap(), out.strip_suffix('\n').unwrap());
    // A filter keeps the programs it names; without wrong results the exit status is 0.
    let (code, out) = check(&[progs.to_str().unwrap(), "good"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("- correct on every engine: 1/1"), "{out}");
}

#[test]
fn isolate_runs_a_program_without_the_constructs_of_its_neighbours() {
    if !python_with_numpy() {
        return;
    }
    let dir = common::scratch("real_code_check", "isolate");
    let progs = dir.join("progs");
    std::fs::create_dir_all(&progs).unwrap();
    let file = progs.join("fam.py");
    // `good` alone runs; `bad` needs scipy, which funcfuse does not import.
    let src = "from __future__ import annotations\nfrom scipy import special\nimport torch\n\n\n\
               def good(x: f32[4, 3]) -> f32[4, 3]:\n    return x * 3.0\n\n\n\
               def bad(x: f32[4, 3]) -> f32[4, 3]:\n    return x * special.expit(3.0)\n";
    std::fs::write(&file, src).unwrap();
    // Goldens from the same computation without scipy (a file outside the checked folder).
    let plain = dir.join("plain.py");
    std::fs::write(&plain, src.replace("from scipy import special\n", "").replace("special.expit(3.0)", "3.0"))
        .unwrap();
    for f in ["good", "bad"] {
        golden(&progs.join("goldens").join("fam").join(f), &plain, f);
    }
    let (_, whole) = check(&[progs.to_str().unwrap()]);
    assert!(row(&whole, "bad").contains("fam.py:2:1: unsupported import from `scipy`"), "{whole}");
    let (code, alone) = check(&[progs.to_str().unwrap(), "--isolate"]);
    assert_eq!(code, 0, "{alone}");
    assert!(row(&alone, "good").ends_with("| ok | ok | ok |"), "{alone}");
    // The copy keeps every line where it was, and messages name the original file.
    let bad = row(&alone, "bad");
    // The unsupported import fails only the function that uses its name, at the use.
    let f = file.display();
    assert!(
        bad.contains(&format!(
            "refused: {f}:11:16: `special` cannot be used: {f}:2:1: unsupported import from `scipy`"
        )),
        "{alone}"
    );
    assert!(row(&whole, "good").ends_with("| ok | ok | ok |"), "{whole}");
}
