//! Generated kernels under AddressSanitizer and UndefinedBehaviorSanitizer (`FUNCFUSE_SANITIZE=1`): corpus programs
//! and fuzzer programs run through the binary, with the ASan runtime preloaded (a library built with ASan can only be
//! loaded into a process whose first library is ASan's), must finish cleanly. Any sanitizer report aborts the run.
//!
//! The default budget is a representative part that takes about a minute: the run-time index regressions
//! (`.item()` and tensor indices, control flow on data), the indexing micro-patterns (gathers, index writes, masks) and the
//! reductions (block reductions and tiled matmuls on the CUDA emulator), then `FUNCFUSE_SANITIZE_FUZZ` (default 20)
//! fuzzer programs on the C and emulator backends. `FUNCFUSE_SANITIZE_PATHS` (space-separated) replaces the corpus
//! part: `FUNCFUSE_SANITIZE_PATHS=corpus cargo test --test sanitize` runs the whole corpus (minutes).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The ASan runtime the C compiler links against.
fn libasan() -> PathBuf {
    let cc = std::env::var("CC").ok().filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into());
    let out = Command::new(&cc).arg("-print-file-name=libasan.so").output().expect("the C compiler runs");
    let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    assert!(
        p.is_absolute() && p.exists(),
        "`{cc}` has no AddressSanitizer runtime (libasan.so): install it (gcc ships it)"
    );
    p
}

/// The binary with sanitized kernels, its own kernel cache, and sanitizer reports made fatal.
fn sanitized(cache: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_funcfuse"));
    c.env("FUNCFUSE_SANITIZE", "1")
        .env("FUNCFUSE_CACHE", cache)
        .env("LD_PRELOAD", libasan())
        // The Rust side is not instrumented, so its allocations would read as leaks.
        .env("ASAN_OPTIONS", "detect_leaks=0:abort_on_error=1")
        .env("UBSAN_OPTIONS", "halt_on_error=1:abort_on_error=1:print_stacktrace=1");
    c
}

/// Runs `c`; asserts no sanitizer report and exit status 0; returns the output.
fn check(what: &str, c: &mut Command) -> String {
    check_status(what, c, &[0])
}

fn check_status(what: &str, c: &mut Command, codes: &[i32]) -> String {
    let out = c.output().expect("the binary runs");
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!text.contains("Sanitizer") && !text.contains("runtime error:"), "{what}: a sanitizer report:\n{text}");
    assert!(out.status.code().is_some_and(|c| codes.contains(&c)), "{what}: {:?}\n{text}", out.status);
    text
}

#[test]
fn kernels_run_clean_under_address_and_undefined_behaviour_sanitizers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tmp = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sanitize");
    let _ = std::fs::remove_dir_all(tmp.join("out"));
    let cache = tmp.join("kernel-cache");
    let paths = std::env::var("FUNCFUSE_SANITIZE_PATHS")
        .unwrap_or_else(|_| "corpus/regressions/engines.py corpus/micro/indexing.py corpus/micro/reductions.py".into());
    for (n, p) in paths.split_whitespace().enumerate() {
        for backend in ["c", "cuda-emu"] {
            let out = tmp.join("out").join(format!("{n}-{backend}"));
            check(
                &format!("{p} on {backend}"),
                sanitized(&cache).arg("run").arg(root.join(p)).args(["--backend", backend]).arg("--output").arg(out),
            );
        }
    }
    let count = std::env::var("FUNCFUSE_SANITIZE_FUZZ").unwrap_or_else(|_| "20".into());
    // Refusals (exit status 1) are the fuzz test's business; wrong results and panics are not allowed here either.
    let text = check_status(
        "the fuzzer's programs",
        sanitized(&cache).args(["fuzz", "--seed", "0", "--count", &count, "--engines", "c,cuda-emu", "--no-reduce"]),
        &[0, 1],
    );
    assert!(text.contains(&format!("{count} programs: ")) && text.contains("(0 wrong, 0 crashed, 0 panics"), "{text}");
    // The kernels really were instrumented: every library in the cache calls ASan's checks.
    let mut libs = 0;
    for sub in ["c", "emu"] {
        for e in std::fs::read_dir(cache.join(sub)).unwrap().flatten() {
            if e.path().extension().is_some_and(|x| x == "so") {
                let bytes = std::fs::read(e.path()).unwrap();
                let has = |s: &[u8]| bytes.windows(s.len()).any(|w| w == s);
                assert!(has(b"__asan_init"), "{} is not built with AddressSanitizer", e.path().display());
                libs += 1;
            }
        }
    }
    assert!(libs > 10, "only {libs} libraries were built");
}
