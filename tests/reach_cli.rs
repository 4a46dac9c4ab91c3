//! Real PyTorch code through the command line: a function outside the subset fails alone (with its own
//! `file:line:col`) while the rest of its file runs, lists and optimizes; and data-dependent shapes are refused by
//! the functional and optimized engines with a message that says so, at the statement that makes them, while the
//! reference engine runs them.

use std::path::{Path, PathBuf};

mod common;

use common::Outcome;

fn funcfuse(args: &[&str]) -> Outcome {
    common::run_binary(common::binary().args(args))
}

fn scratch(name: &str) -> PathBuf {
    common::scratch("reach_cli", name)
}

/// Writes `src`, a whole file, as `prog.py` in `dir` (created first); its path.
fn program_file(dir: &Path, src: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let file = dir.join("prog.py");
    std::fs::write(&file, src).unwrap();
    file
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// What `_bad` of [`MIXED`] is refused for: a lambda bound to a name (a nested function) whose default reads a local
/// of its function (an inline lambda's such default is frozen when it is made: `heldout7.py`'s NeRF encoding).
const CLOSURE: &str =
    "a default of a lambda reads `x`, a local variable of `_bad`: not supported; pass it as an argument";

/// A file with a good program, a program outside the subset, a helper outside the subset and a program that calls
/// it, a program using `*args` and a program whose local variable is named like the failed program (a local, not a
/// reference to it). Line numbers are the file's.
const MIXED: &str = "\
from __future__ import annotations
import torch


def _good(x):
    return x * 2


def _bad(x):
    g = lambda y, s=x: y * s; return g(x)


def first(x: f32[2, 6]) -> f32[2, 3, 2]:
    return _good(x).reshape(*x.shape[:-1], -1, 2)


def odd(x: f32[3]) -> f32[3]:
    with open(\"f\") as fh:
        pass
    return x


def calls_bad(x: f32[3]) -> f32[3]:
    y = x + 1
    return _bad(y)


def last(x: f32[3]) -> f32[3]:
    odd = x * 3
    return _good(odd) + 1
";

#[test]
fn a_function_outside_the_subset_fails_alone() {
    let dir = scratch("mixed");
    let file = dir.join("mixed.py");
    std::fs::write(&file, MIXED).unwrap();
    let f = s(&file);

    // `list`: the good programs with signatures, the failed ones with their own messages.
    let o = funcfuse(&["list", f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lines: Vec<&str> = o.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{}", o.stdout);
    assert_eq!(lines[0], format!("{f}::first(x: f32[2, 6])"));
    assert_eq!(
        lines[1],
        format!("{f}::odd: failed: {f}:18:5: `with` on this context manager is not supported (grad modes such as `with torch.no_grad():` and `with torch.autocast(..., enabled=False):` are, and the program's own classes with `__enter__` and `__exit__`)")
    );
    assert_eq!(lines[2], format!("{f}::calls_bad: failed: {f}:25:12: `_bad` cannot be used: {f}:10:21: {CLOSURE}"));
    assert_eq!(lines[3], format!("{f}::last(x: f32[3])"));

    // `run FILE::FUNC`: the good ones run on every engine; a failed one reports its own location.
    for engine in ["reference", "functional", "optimized"] {
        for func in ["first", "last"] {
            let out = dir.join(format!("{engine}_{func}"));
            let o = funcfuse(&["run", &format!("{f}::{func}"), "--engine", engine, "--output", s(&out)]);
            assert_eq!(o.code, 0, "{engine} {func}: {}", o.stderr);
        }
        let o = funcfuse(&["run", &format!("{f}::odd"), "--engine", engine, "--output", s(&dir.join("o"))]);
        assert_eq!(o.code, 1, "{}", o.stderr);
        assert!(o.stderr.starts_with(&format!("{f}:18:5: `with` on this context manager")), "{engine}: {}", o.stderr);
    }
    let got = funcfuse::io::read_npy(&dir.join("optimized_first/return.npy")).unwrap();
    let x = funcfuse::io::read_npy(&dir.join("optimized_first/inputs/x.npy")).unwrap();
    assert_eq!(got.shape, vec![2, 3, 2]);
    assert_eq!(got.to_f64_vec(), x.to_f64_vec().iter().map(|v| v * 2.0).collect::<Vec<_>>());

    // `run FILE`: every program, the failed ones reported alone.
    let o = funcfuse(&["run", f, "--engine", "reference", "--output", s(&dir.join("batch"))]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.contains(&format!("FAIL {f}::odd: {f}:18:5:")), "{}", o.stdout);
    assert!(o.stdout.contains(&format!("FAIL {f}::calls_bad: {f}:25:12:")), "{}", o.stdout);
    assert!(o.stdout.contains("2 programs ran, 2 failed"), "{}", o.stdout);

    // `optimize FILE`: plans for the good programs, the failed ones recorded with their messages.
    let out = dir.join("opt");
    let o = funcfuse(&["optimize", f, "--out", s(&out)]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stdout.contains("2 programs optimized, 2 failed"), "{}", o.stdout);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap()).unwrap();
    let status = |name: &str| {
        let r = report["programs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["program"].as_str().unwrap().ends_with(&format!("::{name}")))
            .unwrap_or_else(|| panic!("{name} missing: {report}"));
        (r["status"].as_str().unwrap().to_string(), r["error"].as_str().unwrap_or("").to_string())
    };
    assert_eq!(status("first").0, "ok");
    assert_eq!(status("last").0, "ok");
    let (st, e) = status("odd");
    assert!(st == "failed" && e.starts_with(&format!("{f}:18:5:")), "{st}: {e}");
    let (st, e) = status("calls_bad");
    assert!(st == "failed" && e.contains(&format!("{f}:10:21: {CLOSURE}")), "{st}: {e}");
    assert!(out.join("mixed/first/record.json").exists());

    // A file that is not Python at all is still one file-level error.
    let bad = dir.join("syntax.py");
    std::fs::write(&bad, "import torch\n\ndef f(x: f32[2]) -> f32[2]:\n    return x +\n").unwrap();
    let o = funcfuse(&["list", s(&bad)]);
    assert_eq!(o.code, 1, "{}", o.stdout);
    assert!(o.stderr.contains("syntax error"), "{}", o.stderr);
}

/// Runs `FILE::f` of `src` on `engine` and returns the outcome.
fn run_f(dir: &Path, src: &str, engine: &str) -> Outcome {
    let file = common::program(dir, src);
    funcfuse(&["run", &format!("{file}::f"), "--engine", engine, "--output", s(&dir.join(engine))])
}

#[test]
fn data_dependent_shapes_are_refused_where_they_are_made() {
    let dir = scratch("data_dependent");
    // Line numbers count the two header lines and the blank line `common::program` writes.
    let cases = [
        // The selection on line 6 is used on line 7: the refusal points at the selection.
        (
            "def f(boxes: f32[10, 4], scores: f32[10]) -> f32[4]:\n    keep = scores > 0.5\n    b = boxes[keep]\n    return b.sum(0) * 2\n",
            "prog.py:6:9: indexing with a boolean mask gives a data-dependent shape",
        ),
        (
            "def f(boxes: f32[10, 4], scores: f32[10]) -> f32[10, 4]:\n    keep = scores > 2.0\n    return torch.cat([boxes[keep], boxes], 0)\n",
            "prog.py:6:23: indexing with a boolean mask gives a data-dependent shape",
        ),
        (
            "def f(x: f32[4, 3]) -> i64[0]:\n    idx = torch.where(x > 5.0)\n    return idx[0]\n",
            "prog.py:5:11: `torch.where(condition)` with one argument (or `nonzero`) returns the indices of the true elements, whose number depends on the data",
        ),
        // Index lists gather rows and work on them row by row; a reduction across the rows depends on their number.
        (
            "def f(x: f32[4, 3]) -> f32[3]:\n    (r,) = torch.where(x[:, 0] > 5.0)\n    return x[r].sum(0)\n",
            "prog.py:5:12: `torch.where(condition)` with one argument (or `nonzero`) returns the indices of the true elements, whose number depends on the data",
        ),
        (
            "def f(x: f32[4, 3]) -> i64[0, 2]:\n    return (x > 5.0).nonzero()\n",
            "prog.py:5:12: `torch.where(condition)` with one argument (or `nonzero`) returns the indices of the true elements, whose number depends on the data",
        ),
        (
            "def f(x: f32[4], t: i64[3]) -> f32[0]:\n    t[-1] = 0\n    return x.new_ones(t[-1])\n",
            "prog.py:6:12: new_ones(): argument 'size' comes from tensor data, so the result's shape depends on the data",
        ),
        // Selections by one mask combine elementwise, but not through an op that could raise where the selection
        // would not (integer floor division by the unselected zeros).
        (
            "def f(a: i64[6], b: i64[6]) -> i64[6]:\n    m = b > 0\n    a[m] = a[m] // b[m]\n    return a\n",
            "prog.py:6:12: indexing with a boolean mask gives a data-dependent shape",
        ),
    ];
    for (k, (src, want)) in cases.iter().enumerate() {
        let d = dir.join(k.to_string());
        std::fs::create_dir_all(&d).unwrap();
        // The reference engine runs it (the results are empty: nothing exceeds 5 or 2, and the size is 0).
        let o = run_f(&d, src, "reference");
        assert_eq!(o.code, 0, "reference, case {k}: {}", o.stderr);
        for engine in ["functional", "optimized"] {
            let o = run_f(&d, src, engine);
            assert_eq!(o.code, 1, "{engine}, case {k}: {}", o.stderr);
            assert!(o.stderr.contains(want), "{engine}, case {k}: {}\nwant {want}", o.stderr);
            assert!(o.stderr.contains("the reference engine runs it"), "{}", o.stderr);
        }
    }
    // The reference's `torch.where(condition)` is `nonzero(as_tuple=True)`.
    let src = "def f(x: f32[4, 3]) -> tuple[i64[12], i64[12]]:\n    return torch.where(x > -10.0)\n";
    let o = run_f(&dir, src, "reference");
    assert_eq!(o.code, 0, "{}", o.stderr);
    let rows = funcfuse::io::read_npy(&dir.join("reference/return.0.npy")).unwrap().to_f64_vec();
    let cols = funcfuse::io::read_npy(&dir.join("reference/return.1.npy")).unwrap().to_f64_vec();
    assert_eq!(rows, (0..12).map(|i| (i / 3) as f64).collect::<Vec<_>>());
    assert_eq!(cols, (0..12).map(|i| (i % 3) as f64).collect::<Vec<_>>());
}

/// Issue #12: a `raise` under a condition on data raises only when it runs, on every engine, with PyTorch's (Python's)
/// message and location.
#[test]
fn a_raise_under_a_run_time_condition_raises_only_when_it_runs() {
    let dir = scratch("raise_dyn");
    // (A condition on a loop variable unrolls the loop instead: corpus `python_reach::checked_loop`.)
    let src = "def f(x: f32[4]) -> f32[4]:\n    if x.sum() > 100.0:\n        raise ValueError(f\"sum too large: {x.sum().item()}\")\n    return x\n";
    for engine in ["reference", "functional", "optimized"] {
        let o = run_f(&dir, src, engine);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
    }
    // The condition holds: every engine raises it, with the f-string formatted.
    let src = "def f(x: f32[4]) -> f32[4]:\n    if x.sum() > -100.0:\n        raise ValueError(f\"sum {x.shape[0]:03d}\")\n    return x\n";
    for engine in ["reference", "functional", "optimized"] {
        let o = run_f(&dir, src, engine);
        assert_eq!(o.code, 1, "{engine}");
        assert!(
            o.stderr.starts_with(&format!("{}:6:9: ValueError: sum 004", s(&dir.join("prog.py")))),
            "{engine}: {}",
            o.stderr
        );
    }
    // So does an `assert` on data (it was ignored by the functional and optimized engines).
    let src = "def f(x: f32[4]) -> f32[4]:\n    for i in range(4):\n        assert x[i] < -100.0, \"too big\"\n    return x\n";
    for engine in ["reference", "functional", "optimized"] {
        let o = run_f(&dir, src, engine);
        assert_eq!(o.code, 1, "{engine}");
        assert!(
            o.stderr.starts_with(&format!("{}:6:9: AssertionError: too big", s(&dir.join("prog.py")))),
            "{engine}: {}",
            o.stderr
        );
    }
}

/// A program whose `if` arms cannot be joined (they return different dtypes) follows the arm the default inputs
/// take; given inputs that take the other arm, `run` notes the fallback and the reference engine's results are
/// written, the same on every engine.
#[test]
fn a_specialized_if_falls_back_to_the_reference_engine() {
    let dir = scratch("specialized");
    let src = "def f(x: f32[4]):\n    if x.sum() > 100.0:\n        return x[:2].int()\n    return x * 2.0\n";
    let file = common::program(&dir, src);
    let inputs = dir.join("big");
    std::fs::create_dir_all(&inputs).unwrap();
    let big = funcfuse::tensor::Tensor::from_f64(funcfuse::tensor::DType::F32, &[4], &[60.5, 50.0, 1.0, 2.0]).unwrap();
    funcfuse::io::write_npy(&inputs.join("x.npy"), &big).unwrap();
    for engine in ["reference", "functional", "optimized"] {
        let out = dir.join(engine);
        let o =
            funcfuse(&["run", &format!("{file}::f"), "--engine", engine, "--output", s(&out), "--inputs", s(&inputs)]);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
        assert_eq!(o.stderr.contains(funcfuse::ir::FALLBACK), engine != "reference", "{engine}: {}", o.stderr);
        let r = funcfuse::io::read_npy(&out.join("return.npy")).unwrap();
        assert_eq!((r.dtype(), r.to_f64_vec()), (funcfuse::tensor::DType::I32, vec![60.0, 50.0]), "{engine}");
        // The default inputs take the arm the program follows: no fallback.
        let o = funcfuse(&["run", &format!("{file}::f"), "--engine", engine, "--output", s(&dir.join("seeded"))]);
        assert!(o.code == 0 && !o.stderr.contains(funcfuse::ir::FALLBACK), "{engine}: {}", o.stderr);
    }
}

/// `math.sqrt` of a number known only at run time (timm's NAdamW bias correction): computed in double where the
/// number is not negative, and Python's "math domain error" where it is, on every engine.
#[test]
fn math_sqrt_of_a_run_time_number() {
    let dir = scratch("dyn_sqrt");
    for (shift, ok) in [("2.0", true), ("-2.0", false)] {
        let src =
            format!("import math\n\ndef f(x: f32[4]) -> f32[4]:\n    return x * math.sqrt(x[0].item() + {shift})\n");
        for engine in ["reference", "functional", "optimized"] {
            let o = run_f(&dir, &src, engine);
            if ok {
                assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
            } else {
                assert_eq!(o.code, 1, "{engine}");
                assert!(o.stderr.contains("ValueError: math domain error"), "{engine}: {}", o.stderr);
            }
        }
    }
}

/// `functools.partial` binds by keyword only: a positional argument after the function is a located refusal on every
/// engine, never a wrong binding.
#[test]
fn partial_with_a_positional_argument_is_refused() {
    let dir = scratch("partial_pos");
    let src = "from functools import partial\n\ndef _scale(x, factor):\n    return x * factor\n\ndef f(x: f32[4]) -> f32[4]:\n    g = partial(_scale, x)\n    return g(factor=2.0)\n";
    for engine in ["reference", "functional", "optimized"] {
        let o = run_f(&dir, src, engine);
        assert_eq!(o.code, 1, "{engine}");
        assert!(
            o.stderr.contains("functools.partial with positional arguments after the function"),
            "{engine}: {}",
            o.stderr
        );
    }
}

/// A dtype PyTorch has and no tensor here has is named as such wherever a dtype is taken (`.to(dtype=...)`,
/// `.to(...)`, `torch.zeros(..., dtype=...)`), not as a device or a string. (uint8 and int8, round 16's, are dtypes
/// here now.)
#[test]
fn dtypes_no_tensor_here_has_are_refused_by_name() {
    let dir = scratch("uint8");
    for (body, dtype) in [
        ("    return (x > 0).to(dtype=torch.uint16).long()", "torch.uint16"),
        ("    return (x > 0).to(torch.complex64).long()", "torch.complex64"),
        ("    return torch.zeros(x.shape, dtype=torch.uint32).long()", "torch.uint32"),
    ] {
        let src = format!("def f(x: f32[4]) -> i64[4]:\n{body}\n");
        for engine in ["reference", "functional", "optimized"] {
            let o = run_f(&dir, &src, engine);
            assert_eq!(o.code, 1, "{engine}: {body}");
            let want = format!("prog.py:5:12: dtype {dtype} is not supported: tensors here are float32");
            assert!(o.stderr.contains(&want), "{engine}: {body}: {}", o.stderr);
        }
    }
}

/// An unsupported import binds names that only the functions using them cannot use: the rest of the file runs.
/// numpy is imported, but a use other than a function of numbers known before the program runs is refused there.
#[test]
fn an_unsupported_import_fails_only_the_functions_that_use_it() {
    let dir = scratch("import");
    let src = "from __future__ import annotations\nimport numpy as np\nfrom scipy import special\nimport torch\n\n\n\
               def good(x: f32[3]) -> f32[3]:\n    return x * 3.0\n\n\n\
               def uses_np(x: f32[3]) -> f32[3]:\n    return x * np.float32(3.0)\n\n\n\
               def uses_special(x: f32[3]) -> f32[3]:\n    return special.expit(x)\n";
    let file = program_file(&dir, src);
    let o = funcfuse(&["list", s(&file)]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let f = s(&file);
    assert!(o.stdout.contains(&format!("{f}::good(")), "{}", o.stdout);
    let np =
        format!("{f}::uses_np: failed: {f}:12:16: `np.float32` is not supported: numpy is supported only as np.abs");
    assert!(o.stdout.contains(&np), "{}", o.stdout);
    let sp = format!(
        "{f}::uses_special: failed: {f}:16:12: `special` cannot be used: {f}:3:1: unsupported import from `scipy`"
    );
    assert!(o.stdout.contains(&sp), "{}", o.stdout);
    let out = dir.join("out");
    for engine in ["reference", "functional", "optimized"] {
        let o = funcfuse(&["run", &format!("{f}::good"), "--engine", engine, "--output", s(&out)]);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
    }
}

/// Module-level statements beside imports, `def` and `NAME = value` fail only the functions that read what they
/// bind: a class, a namedtuple constant, a name bound under an `if` funcfuse cannot decide, a constant changed by
/// `+=` (and a constant computed from it). An `if` decided by constants stands for its arm (an identity decorator
/// defined there is inert, as CUDA's `autocast` is); `if __name__ == "__main__":` is skipped; seeding is skipped, and
/// a call that may change every function fails the file.
#[test]
fn module_level_statements_fail_only_the_functions_that_read_them() {
    let dir = scratch("module_level");
    let src = "from __future__ import annotations\nimport collections\nimport torch\n\
               from torch.cuda.amp import autocast\n\
               _mode = None\nK = 2\n\
               if _mode is None:\n    def deco(func):\n        return func\nelse:\n    deco = torch.compile(mode=_mode)\n\
               Node = collections.namedtuple('Node', ['id', 'name'])\n\
               class Params:\n    def __init__(self, n):\n        self.n = n\n\
               try:\n    import flash_attn\nexcept ImportError:\n    flash_attn = None\n\
               SCALE = 3.0\nSCALE += 1.0\nDOUBLE = SCALE * 2\n\
               torch.manual_seed(0)\n\n\n\
               @deco\ndef good(x: f32[3]) -> f32[3]:\n    return x * K\n\n\n\
               @autocast()\ndef cast(x: f32[3]) -> f32[3]:\n    return x + 1.0\n\n\n\
               def uses_node(x: f32[3]) -> f32[3]:\n    return x * Node(1, 'a').id\n\n\n\
               def uses_class(x: f32[3]) -> f32[3]:\n    return x * Params(2).n\n\n\n\
               def uses_flash(x: f32[3]) -> f32[3]:\n    return x if flash_attn is None else -x\n\n\n\
               def uses_double(x: f32[3]) -> f32[3]:\n    return x * DOUBLE\n\n\n\
               if __name__ == \"__main__\":\n    print(good(torch.ones(3)))\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    let o = funcfuse(&["list", f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // `Node = collections.namedtuple(...)` is a class (`frontend/convert/namedtuple.rs`), no longer a statement
    // that fails its readers.
    for good in ["good", "cast", "uses_class", "uses_node"] {
        assert!(o.stdout.contains(&format!("{f}::{good}(")), "{}", o.stdout);
    }
    for (func, want) in [(
        "uses_flash",
        "`flash_attn` cannot be used: {f}:16:1: it is bound by a module-level `for`, `while`, `with` or `try`",
    )] {
        let want = want.replace("{f}", f);
        assert!(
            o.stdout.contains(&format!("{f}::{func}: failed: ")) && o.stdout.contains(&want),
            "{func}: {}",
            o.stdout
        );
    }
    let out = dir.join("out");
    for engine in ["reference", "functional", "optimized"] {
        for func in ["good", "cast", "uses_class", "uses_node"] {
            let o = funcfuse(&["run", &format!("{f}::{func}"), "--engine", engine, "--output", s(&out)]);
            assert_eq!(o.code, 0, "{engine} {func}: {}", o.stderr);
        }
        for (func, want) in
            [("uses_flash", "`flash_attn` cannot be used: "), ("uses_double", "`SCALE` cannot be used: ")]
        {
            let o = funcfuse(&["run", &format!("{f}::{func}"), "--engine", engine, "--output", s(&out)]);
            assert!(o.code != 0 && o.stderr.contains(want), "{engine} {func}: {}", o.stderr);
        }
    }
    std::fs::write(&file, src.replace("torch.manual_seed(0)", "torch.set_default_dtype(torch.float64)")).unwrap();
    let o = funcfuse(&["list", f]);
    assert!(o.code != 0 && o.stderr.contains(":23:1: a module-level call"), "{}", o.stderr);
}

/// A module constant this tool cannot compute fails only its readers, and a later assignment gives the name a
/// value again; a constant that raises in Python fails the import, so every function.
#[test]
fn failed_module_constants_fail_their_readers_and_raising_ones_the_file() {
    let dir = scratch("failed_constants");
    let src = "from __future__ import annotations\nimport collections\nimport torch\n\
               Pair = collections.namedtuple('Pair', ['a', 'b'])\nK = Pair(1, 2)\nK = 3\n\n\n\
               def uses_k(x: f32[3]) -> f32[3]:\n    return x * K\n";
    let file = program_file(&dir, src);
    for engine in ["reference", "functional", "optimized"] {
        let o = funcfuse(&["run", &format!("{}::uses_k", s(&file)), "--engine", engine, "--output", s(&dir.join("o"))]);
        assert_eq!(o.code, 0, "{engine}: {}", o.stderr);
    }
    let file = program_file(&dir, &src.replace("K = 3\n", "BAD = int(\"x\")\n"));
    for engine in ["reference", "functional"] {
        let o = funcfuse(&["run", &format!("{}::uses_k", s(&file)), "--engine", engine, "--output", s(&dir.join("o"))]);
        assert!(
            o.code != 0 && o.stderr.contains("invalid literal for int() with base 10: 'x'"),
            "{engine}: {}",
            o.stderr
        );
    }
}

/// `from math import NAME` and `from itertools import product` bind names the engines read as `math.NAME` and
/// `itertools.product`, except in a function that binds the name itself; another itertools name fails only the
/// functions that use it.
#[test]
fn names_imported_from_math_and_itertools() {
    let dir = scratch("from_imports");
    let src = "from __future__ import annotations\nimport torch\nfrom math import sqrt as sq, pi\n\
               from itertools import product, chain, accumulate\n\n\n\
               def grid(x: f32[4]) -> f32[4]:\n    return x + torch.tensor([sq(i) * pi + j for i, j in product(range(2), repeat=2)])\n\n\n\
               def own(x: f32[4]) -> f32[4]:\n    product = 3.0\n    return x * product\n\n\n\
               def chained(x: f32[4]) -> f32[4]:\n    return x * len(list(chain([1], [2])))\n\n\n\
               def accumulated(x: f32[4]) -> f32[4]:\n    return x * len(list(accumulate([1, 2])))\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    let o = funcfuse(&["list", f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = format!(
        "{f}::accumulated: failed: {f}:21:25: `accumulate` cannot be used: {f}:4:1: `itertools.accumulate` is not \
         supported (of itertools, only `product`, `chain` and `zip_longest` are)"
    );
    assert!(o.stdout.contains(&want), "{}\nwant {want}", o.stdout);
    let expect_grid: Vec<f64> = [(0.0, 0.0), (0.0, 1.0), (1.0, 0.0), (1.0, 1.0)]
        .iter()
        .map(|(i, j): &(f64, f64)| i.sqrt() * std::f64::consts::PI + j)
        .collect();
    for engine in ["reference", "functional", "optimized"] {
        let out = dir.join(engine);
        let inputs = dir.join("in");
        std::fs::create_dir_all(&inputs).unwrap();
        let xs = [0.5, -1.0, 2.0, 0.25];
        let vals: Vec<funcfuse::tensor::Scalar> = xs.iter().map(|&v| funcfuse::tensor::Scalar::F(v)).collect();
        let x = funcfuse::tensor::Tensor::from_scalars(funcfuse::tensor::DType::F32, &[4], &vals).unwrap();
        funcfuse::io::write_npy(&inputs.join("x.npy"), &x).unwrap();
        let grid: Vec<f64> = xs.iter().zip(&expect_grid).map(|(x, g)| x + g).collect();
        let own: Vec<f64> = xs.iter().map(|x| x * 3.0).collect();
        let chained: Vec<f64> = xs.iter().map(|x| x * 2.0).collect();
        for (prog, want) in [("grid", grid), ("own", own), ("chained", chained)] {
            let o = funcfuse(&[
                "run",
                &format!("{f}::{prog}"),
                "--engine",
                engine,
                "--inputs",
                s(&inputs),
                "--output",
                s(&out),
            ]);
            assert_eq!(o.code, 0, "{engine} {prog}: {}", o.stderr);
            let got = funcfuse::io::read_npy(&out.join("return.npy")).unwrap().to_f64_vec();
            assert_eq!(got.len(), want.len(), "{engine} {prog}");
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-6, "{engine} {prog}: {got:?} vs {want:?}");
            }
        }
    }
}

/// Python's `map` and `itertools.product` are lazy, read-once iterators; funcfuse builds them at once, so each is
/// accepted only where it is consumed at once, and refused, located, where it is stored (a later write to what its
/// function reads would show). A name both imported and defined at the top level is refused where it is imported.
#[test]
fn lazy_iterators_and_imported_names_defined_twice_are_refused() {
    let dir = scratch("lazy");
    let src = "from __future__ import annotations\nimport torch\nfrom math import sqrt\n\n\n\
               def stored(x: f32[3]) -> f32[3]:\n    t = x * 1.0\n    ys = map(lambda a: a + t, [x])\n    t.add_(10.0)\n    return list(ys)[0]\n\n\n\
               def sqrt(v):\n    return v * 2.0\n\n\n\
               def uses_sqrt(x: f32[3]) -> f32[3]:\n    return x + sqrt(4.0)\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    let o = funcfuse(&["list", f]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let lazy = format!("{f}::stored: failed: {f}:8:10: `map(...)` returns an iterator");
    assert!(o.stdout.contains(&lazy), "{}\nwant {lazy}", o.stdout);
    let twice = format!(
        "{f}::uses_sqrt: failed: {f}:18:16: `sqrt` cannot be used: {f}:3:1: `sqrt` is imported from math and also \
         defined at the top level"
    );
    assert!(o.stdout.contains(&twice), "{}\nwant {twice}", o.stdout);
}

/// Python's `==` of containers in the reference engine: dicts (and so the sets of string literals held as dicts)
/// by keys and values, whatever their order; tensors inside lists by identity first, then by their one element's
/// truth, and PyTorch's error for more elements. (Equal dicts compared unequal before.)
#[test]
fn containers_compare_as_in_python() {
    let dir = scratch("container_eq");
    let src = "from __future__ import annotations\nimport torch\n\n\n\
               def sets_and_dicts(x: f32[3]) -> f32[3]:\n    a = {\"a\", \"b\"}\n    d = {\"k\": 1, \"j\": 2.0}\n    \
               ok = a == {\"b\", \"a\"} and d == {\"j\": 2, \"k\": 1} and {\"a\": 1} != {\"a\": 2}\n    \
               return x * 2 if ok else x\n\n\n\
               def same_tensor(x: f32[3]) -> f32[3]:\n    return x * 2 if [x] == [x] else x\n\n\n\
               def other_tensor(x: f32[3], y: f32[3]) -> f32[3]:\n    return x if [x] == [y] else y\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    for prog in ["sets_and_dicts", "same_tensor"] {
        let out = dir.join(prog);
        let o =
            funcfuse(&["run", &format!("{f}::{prog}"), "--engine", "reference", "--seed", "1", "--output", s(&out)]);
        assert_eq!(o.code, 0, "{prog}: {}", o.stderr);
        let x = funcfuse::io::read_npy(&out.join("inputs").join("x.npy")).unwrap().to_f64_vec();
        let got = funcfuse::io::read_npy(&out.join("return.npy")).unwrap().to_f64_vec();
        let want: Vec<f64> = x.iter().map(|v| v * 2.0).collect();
        assert_eq!(got, want, "{prog}");
    }
    let out = dir.join("other");
    let o = funcfuse(&["run", &format!("{f}::other_tensor"), "--engine", "reference", "--output", s(&out)]);
    assert_ne!(o.code, 0);
    assert!(o.stderr.contains("Boolean value of Tensor with more than one value is ambiguous"), "{}", o.stderr);
}

/// The refusals next to held-out round 23's reach: a `filter` kept as an iterator (Python's is read once), a
/// `F.embedding` with `max_norm` (it rescales the weight in place), an unsupported `torch.X` after
/// `import torch.X.Y` (refused where used, not for the file), and `int()` of a string that is not a base-10 int.
#[test]
fn round_23_refusals_are_located_and_per_function() {
    let dir = scratch("round23_refusals");
    let src = "from __future__ import annotations\nimport random\nimport torch\nimport torch.distributed as dist\n\n\n\
               def stored_filter(x: f32[3]) -> f32[3]:\n    it = filter(None, [1, 2])\n    return x\n\n\n\
               def max_norm(i: i64[2], w: f32[4, 3]) -> f32[2, 3]:\n    \
               return torch.nn.functional.embedding(i.abs() % 4, w, max_norm=1.0)\n\n\n\
               def rank(x: f32[3]) -> f32[3]:\n    return x * dist.get_rank()\n\n\n\
               def bad_int(x: f32[3]) -> f32[3]:\n    return x * int(\"1.5\")\n\n\n\
               def early_return(x: f32[3]) -> f32[3]:\n    try:\n        return x\n    finally:\n        x.add_(1)\n\n\n\
               def rnd(x: f32[3]) -> f32[3]:\n    return x * random.random()\n\n\n\
               def fine(x: f32[3]) -> f32[3]:\n    return x + 1\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    let cases = [
        ("rnd", "32:16: `random.random`: the module `random` is not supported"),
        ("early_return", "26:9: `return`, `break` and `continue` that leave a `try: ... finally:` are not supported"),
        ("stored_filter", "8:10: `filter(...)` returns an iterator"),
        ("max_norm", "embedding(max_norm=...) rescales the weight in place"),
        ("rank", "17:16: ValueError: Default process group has not been initialized, please make sure to call init_process_group."),
        ("bad_int", "invalid literal for int() with base 10: '1.5'"),
    ];
    for engine in ["reference", "optimized"] {
        for (prog, want) in cases {
            let o = funcfuse(&["run", &format!("{f}::{prog}"), "--engine", engine, "--output", s(&dir.join(prog))]);
            assert_eq!(o.code, 1, "{prog} ({engine}): {}", o.stderr);
            assert!(o.stderr.contains(want), "{prog} ({engine}): {}", o.stderr);
        }
        let o = funcfuse(&["run", &format!("{f}::fine"), "--engine", engine, "--output", s(&dir.join("fine"))]);
        assert_eq!(o.code, 0, "fine ({engine}): {}", o.stderr);
    }
}

/// `torch.tensor` of nested data and sets: PyTorch's refusals, on every engine, where the data tells; refusals of
/// what only the run would tell on the functional and optimized engines (the reference runs those).
#[test]
fn tensor_data_and_set_refusals_are_located() {
    let dir = scratch("data_and_set_refusals");
    let src = "from __future__ import annotations\nimport torch\n\n\n\
               def float_into_int(x: f32[3]) -> i64[2]:\n    return torch.tensor([x[0], 2], dtype=torch.int64)\n\n\n\
               def several(x: f32[3]) -> f32[2, 2]:\n    return torch.tensor([x[:2], x[1:]])\n\n\n\
               def overflow(x: f32[3]) -> f32[3]:\n    return x + torch.tensor([300], dtype=torch.uint8)\n\n\n\
               def floats(x: f32[3]) -> f32[3]:\n    s = set([0.5, 1])\n    return x * len(s)\n\n\n\
               def run_time_int32(x: f32[3], i: i64[3]) -> i32[2]:\n    return torch.tensor([i[0], 1], dtype=torch.int32)\n\n\n\
               def run_time_set(x: f32[3], i: i64[3]) -> f32[3]:\n    return x * len(set(i.tolist()))\n";
    let file = program_file(&dir, src);
    let f = s(&file);
    let everywhere = [
        ("float_into_int", "6:12: only integer tensors of a single element can be converted to an index"),
        ("several", "10:12: only one element tensors can be converted to Python scalars"),
        ("overflow", "14:16: value cannot be converted to type uint8 without overflow"),
        ("floats", "18:9: sets are supported of ints, bools (known before the program runs) or strings, not of float"),
    ];
    let functional_only = [
        ("run_time_int32", "23:12: cannot functionalize: an integer known only at run time stored as int32"),
        ("run_time_set", "27:20: cannot functionalize: a set of numbers known only at run time"),
    ];
    for engine in ["reference", "optimized"] {
        for (prog, want) in everywhere.iter().chain(functional_only.iter().filter(|_| engine == "optimized")) {
            let o = funcfuse(&["run", &format!("{f}::{prog}"), "--engine", engine, "--output", s(&dir.join(prog))]);
            assert_eq!(o.code, 1, "{prog} ({engine}): {}", o.stderr);
            assert!(o.stderr.contains(want), "{prog} ({engine}): {}", o.stderr);
        }
    }
    for (prog, _) in functional_only {
        let o = funcfuse(&["run", &format!("{f}::{prog}"), "--engine", "reference", "--output", s(&dir.join(prog))]);
        assert_eq!(o.code, 0, "{prog} (reference): {}", o.stderr);
    }
}
