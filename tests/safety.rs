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

def copy_rows(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    table.index_copy_(0, idx, vals)
    return table
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
        // index_copy_ (a KV cache write) never wraps a negative index, as in PyTorch.
        ("copy_rows", [0, 4], "23:5", 4),
        ("copy_rows", [-1, 0], "23:5", -1),
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

/// Issue #12: PyTorch runs every statement, so a bad index in code whose value is never used still raises.
const DEAD_CODE: &str = "def dead_item(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    row = table[idx[1].item()]
    return table * 2.0

def dead_gather(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[2, 4]:
    rows = table[idx]
    table.mul_(2.0)
    return vals

def dead_in_loop(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[2, 4]:
    for i in range(2):
        r = table[idx[i]]
        vals[i] += 1.0
    return vals

def dead_loop(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[2, 4]:
    for i in range(2):
        r = table[idx[i].item()]
    return vals + 1.0

def dead_in_arm(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    if table.sum() > vals.sum():
        r = table[idx[1].item()]
    else:
        table = table + 1.0
    return table * 2.0

def dead_in_while(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    s = table.sum()
    while s > 0.0:
        r = table[idx]
        s = s - 1000.0
    return table * 2.0

def dead_empty_view(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    table.narrow(1, 3, 0)[idx[1].item()].sigmoid_()
    return table * 2.0

def dead_empty_select(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    k = 0
    while k < 2:
        table[:, 4:].select(0, k * idx[1].item()).copy_(vals[0, :0])
        k += 1
    return table * 2.0
";

#[test]
fn a_bad_index_in_dead_code_is_pytorchs_error_on_every_engine() {
    let dir = scratch("dead_code");
    let file = program(&dir, DEAD_CODE);
    // (function, line:col of the failing subscript)
    let cases = [
        ("dead_item", "5:11"),
        ("dead_gather", "9:12"),
        ("dead_in_loop", "15:13"),
        ("dead_loop", "21:13"),
        ("dead_in_arm", "26:13"),
        ("dead_in_while", "34:13"),
        // Fuzz seed 175197: the write into an empty view writes nothing, but taking the view raises.
        ("dead_empty_view", "39:5"),
        // Fuzz seed 260456 (of a generator version that wrote sorts mid-program): the same with a view whose index
        // is computed in a loop, and a `copy_`; the C and CUDA plans checked the value's indices but not the view's.
        ("dead_empty_select", "45:9"),
    ];
    let bad = inputs(&dir, [1, 6]);
    let good = inputs(&dir, [1, 2]);
    for (func, at) in cases {
        let target = format!("{file}::{func}");
        let want = format!("{file}:{at}: index 6 is out of bounds for dimension 0 with size 4\n");
        for engine in ENGINES {
            let out = dir.join("out");
            let mut args = vec!["run", &target, "--inputs", bad.to_str().unwrap(), "--output", out.to_str().unwrap()];
            args.extend_from_slice(engine);
            let o = funcfuse(&args);
            assert_eq!(o.code, Some(1), "{func} {engine:?}: {}", o.stderr);
            assert_eq!(o.stderr, want, "{func} {engine:?}");
            // In range, the same program runs.
            let mut args = vec!["run", &target, "--inputs", good.to_str().unwrap(), "--output", out.to_str().unwrap()];
            args.extend_from_slice(engine);
            let o = funcfuse(&args);
            assert_eq!(o.code, Some(0), "{func} {engine:?}: {}", o.stderr);
        }
    }
    // The check runs only with the arm that runs: an `if` not taken checks nothing.
    let src = "def untaken(table: f32[4, 4], idx: i64[2], vals: f32[2, 4]) -> f32[4, 4]:
    if table.sum() < -1000.0:
        r = table[idx[1].item()]
    return table * 2.0
";
    let file = program(&dir, src);
    for engine in ENGINES {
        let out = dir.join("out");
        let target = format!("{file}::untaken");
        let mut args = vec!["run", &target, "--inputs", bad.to_str().unwrap(), "--output", out.to_str().unwrap()];
        args.extend_from_slice(engine);
        let o = funcfuse(&args);
        assert_eq!(o.code, Some(0), "{engine:?}: {}", o.stderr);
    }
}

/// A program with one fused kernel, run with seeded inputs.
const SIMPLE: &str = "def f(x: f32[8, 8]) -> f32[8, 8]:\n    return (x * 2.0).relu() + 1.0\n";

/// Runs `prog::f` on the C backend with the kernel cache `cache` and `env`; returns the outcome and the output.
fn run_cached(dir: &Path, cache: &Path, out: &str, env: &[(&str, &Path)]) -> (Outcome, Option<Vec<u8>>) {
    let file = dir.join("prog.py");
    let target = format!("{}::f", file.display());
    let out = dir.join(out);
    let mut c = Command::new(env!("CARGO_BIN_EXE_funcfuse"));
    c.env("FUNCFUSE_CACHE", cache).args(["run", &target, "--output", out.to_str().unwrap()]);
    for (k, v) in env {
        c.env(k, v);
    }
    let o = outcome(&mut c);
    (o, std::fs::read(out.join("return.npy")).ok())
}

/// The libraries in a cache folder.
fn libraries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|r| r.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|x| x == "so")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

fn mode(p: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

#[test]
fn the_kernel_cache_is_private_and_a_broken_entry_is_rebuilt() {
    let dir = scratch("cache_rebuild");
    program(&dir, SIMPLE);
    let cache = dir.join("cache");
    let (first, want) = run_cached(&dir, &cache, "out0", &[]);
    assert_eq!(first.code, Some(0), "{}", first.stderr);
    let want = want.expect("return.npy written");
    assert_eq!(mode(&cache), 0o700);
    assert_eq!(mode(&cache.join("c")), 0o700);
    let libs = libraries(&cache.join("c"));
    assert_eq!(libs.len(), 1, "{libs:?}");
    let lib = &libs[0];
    assert_eq!(mode(lib) & 0o022, 0, "the library is writable by others");
    let good = std::fs::read(lib).unwrap();
    let digest = lib.with_extension("sha256");
    // A cached run uses the entry as it is.
    let (o, got) = run_cached(&dir, &cache, "out1", &[]);
    assert_eq!((o.code, o.stderr.as_str()), (Some(0), ""));
    assert_eq!(got.as_ref(), Some(&want));
    // Truncated, empty, and not a library at all (with a digest that matches it): each is rebuilt, and said why.
    let cases: &[(&str, Vec<u8>, bool, &str)] = &[
        ("truncated", good[..good.len() / 3].to_vec(), false, "is not the one stored when it was built"),
        ("empty", Vec::new(), false, "is not the one stored when it was built"),
        ("garbage", b"not an ELF file at all".to_vec(), true, "does not load"),
    ];
    for (name, bytes, matching_digest, why) in cases {
        std::fs::write(lib, bytes).unwrap();
        if *matching_digest {
            let out = Command::new("sha256sum").arg(lib).output().unwrap();
            let hex = String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap().to_string();
            std::fs::write(&digest, hex).unwrap();
        }
        let (o, got) = run_cached(&dir, &cache, &format!("out-{name}"), &[]);
        assert_eq!(o.code, Some(0), "{name}: {}", o.stderr);
        assert!(o.stderr.contains(&format!("kernel cache entry {}", lib.display())), "{name}: {}", o.stderr);
        assert!(o.stderr.contains(why) && o.stderr.contains("rebuilding it"), "{name}: {}", o.stderr);
        assert_eq!(got.as_ref(), Some(&want), "{name}: the output differs after the rebuild");
        assert_eq!(std::fs::read(lib).unwrap(), good, "{name}: the rebuilt library differs from the first build");
        // And the rebuilt entry is used as it is the next time.
        let (o, _) = run_cached(&dir, &cache, &format!("out-{name}-again"), &[]);
        assert_eq!((o.code, o.stderr.as_str()), (Some(0), ""), "{name}");
    }
    // The garbage case names dlopen's reason.
    std::fs::write(lib, b"\x7fELF garbage").unwrap();
    let out = Command::new("sha256sum").arg(lib).output().unwrap();
    std::fs::write(&digest, String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap()).unwrap();
    let (o, _) = run_cached(&dir, &cache, "out-elf", &[]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert!(o.stderr.contains("does not load (") && o.stderr.contains(&lib.display().to_string()), "{}", o.stderr);
}

#[test]
fn a_kernel_cache_writable_by_others_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("cache_mode");
    let file = program(&dir, SIMPLE);
    let cache = dir.join("cache");
    let (o, _) = run_cached(&dir, &cache, "out0", &[]);
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (o, got) = run_cached(&dir, &cache, "out1", &[]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert_eq!(
        o.stderr,
        format!(
            "{file}: cache {}: the directory is writable by group or others (mode 0777); refusing to use it (chmod go-w it, or set FUNCFUSE_CACHE to a private folder)\n",
            cache.display()
        )
    );
    assert!(got.is_none(), "no output is written");
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A library writable by its group is refused too.
    let lib = libraries(&cache.join("c")).pop().unwrap();
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o770)).unwrap();
    let (o, _) = run_cached(&dir, &cache, "out2", &[]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("the file is writable by group or others (mode 0770)"), "{}", o.stderr);
}

#[test]
fn the_kernel_cache_defaults_to_the_users_cache_folder() {
    let dir = scratch("cache_default");
    program(&dir, SIMPLE);
    let xdg = dir.join("xdg");
    let home = dir.join("home");
    for (env, want) in [
        (vec![("XDG_CACHE_HOME", xdg.as_path()), ("HOME", home.as_path())], xdg.join("funcfuse")),
        (vec![("XDG_CACHE_HOME", Path::new("")), ("HOME", home.as_path())], home.join(".cache/funcfuse")),
    ] {
        let file = dir.join("prog.py");
        let target = format!("{}::f", file.display());
        let out = dir.join("out");
        let mut c = Command::new(env!("CARGO_BIN_EXE_funcfuse"));
        c.env_remove("FUNCFUSE_CACHE").args(["run", &target, "--output", out.to_str().unwrap()]);
        for (k, v) in env {
            c.env(k, v);
        }
        let o = outcome(&mut c);
        assert_eq!(o.code, Some(0), "{}", o.stderr);
        assert_eq!(mode(&want), 0o700, "{}", want.display());
        assert_eq!(libraries(&want.join("c")).len(), 1, "{}", want.display());
    }
}

#[test]
fn two_processes_building_the_same_kernels_at_once_both_succeed() {
    let dir = scratch("cache_race");
    let file = program(&dir, SIMPLE);
    let target = format!("{file}::f");
    for round in 0..3 {
        let cache = dir.join(format!("cache{round}"));
        let spawn = |n: usize| {
            let out = dir.join(format!("out{round}-{n}"));
            let child = Command::new(env!("CARGO_BIN_EXE_funcfuse"))
                .env("FUNCFUSE_CACHE", &cache)
                .args(["run", &target, "--backend", if n % 2 == 0 { "c" } else { "cuda-emu" }])
                .args(["--output", out.to_str().unwrap()])
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap();
            (child, out)
        };
        // Two of each backend, all at once, on an empty cache.
        let children: Vec<_> = (0..4).map(spawn).collect();
        let mut outputs = Vec::new();
        for (child, out) in children {
            let o = child.wait_with_output().unwrap();
            assert_eq!(o.status.code(), Some(0), "{}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(String::from_utf8_lossy(&o.stderr), "", "no entry needed a rebuild");
            outputs.push(std::fs::read(out.join("return.npy")).unwrap());
        }
        assert!(outputs.windows(2).all(|w| w[0] == w[1]), "outputs differ between processes");
        assert_eq!(libraries(&cache.join("c")).len(), 1);
        assert_eq!(libraries(&cache.join("emu")).len(), 1);
        // No temporary file is left behind.
        for sub in ["c", "emu"] {
            let names: Vec<String> = std::fs::read_dir(cache.join(sub))
                .unwrap()
                .flatten()
                .map(|e| e.file_name().to_string_lossy().to_string())
                .collect();
            assert_eq!(names.len(), 2, "{names:?}");
        }
    }
}

#[test]
fn a_kernel_cache_owned_by_another_user_is_refused() {
    let dir = scratch("cache_owner");
    let file = program(&dir, SIMPLE);
    // As root: a folder given to `nobody`; as anyone else: `/`, which root owns.
    let cache = dir.join("cache");
    std::fs::create_dir(&cache).unwrap();
    let (cache, owner) = match std::os::unix::fs::chown(&cache, Some(65534), Some(65534)) {
        Ok(()) => (cache, 65534),
        Err(_) => (PathBuf::from("/"), 0),
    };
    let (o, got) = run_cached(&dir, &cache, "out", &[]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    let want = format!("{file}: cache {}: the directory is owned by user id {owner}, not by you (", cache.display());
    assert!(o.stderr.starts_with(&want), "{}", o.stderr);
    assert!(got.is_none());
}
