//! The Python package's tests (`python/tests`), run with the Python that has the package installed
//! (`pip install ./python`; `FUNCFUSE_PYTHON` names the interpreter, `python3` by default, and `FUNCFUSE_PYTHONPATH`,
//! when set, is its PYTHONPATH: where `pip install --target DIR` put the package). Where the package is not
//! importable the test says so and passes, unless `FUNCFUSE_REQUIRE_PYTHON=1` (CI sets it): then it fails, so that CI
//! cannot pass by skipping.

use std::process::Command;

#[test]
fn python_package_tests() {
    let python = std::env::var("FUNCFUSE_PYTHON").unwrap_or_else(|_| "python3".into());
    let required = std::env::var("FUNCFUSE_REQUIRE_PYTHON").is_ok_and(|v| v == "1");
    let root = env!("CARGO_MANIFEST_DIR");
    let python_cmd = || {
        let mut c = Command::new(&python);
        c.current_dir(std::env::temp_dir());
        if let Ok(p) = std::env::var("FUNCFUSE_PYTHONPATH") {
            c.env("PYTHONPATH", p);
        }
        c
    };
    // Run from outside the checkout, so that `python/funcfuse` (without its compiled module) cannot shadow the
    // installed package.
    let probe = python_cmd().args(["-c", "import funcfuse, numpy; print(funcfuse.__file__)"]).output();
    match probe {
        Ok(o) if o.status.success() => {
            eprintln!("funcfuse package: {}", String::from_utf8_lossy(&o.stdout).trim());
        }
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).trim().to_string(),
                Err(e) => format!("cannot run {python}: {e}"),
            };
            assert!(
                !required,
                "FUNCFUSE_REQUIRE_PYTHON=1 but the funcfuse package does not import with {python}: {why}\n\
                 (install it with `{python} -m pip install ./python numpy`)"
            );
            eprintln!("skipped: the funcfuse package does not import with {python} ({why}); `pip install ./python`");
            return;
        }
    }
    let out = python_cmd()
        .args(["-m", "unittest", "discover", "-v", "-s"])
        .arg(format!("{root}/python/tests"))
        .env("FUNCFUSE_BIN", env!("CARGO_BIN_EXE_funcfuse"))
        .output()
        .expect("python runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{}{stderr}", String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "the Python package's tests failed (output above)");
    assert!(stderr.contains("\nOK"), "unittest did not report OK");
    // The NumPy tests ran (the torch ones may be skipped): not a run that skipped everything.
    assert!(
        stderr.lines().any(|l| l.starts_with("test_readme_example_runs_as_written ") && l.ends_with("... ok")),
        "the README example test did not run"
    );
}
