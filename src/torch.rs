//! PyTorch timed in the same run as our plans (`compare --measure --torch PYTHON`).
//!
//! The binary embeds `scripts/torch_baseline.py` and `scripts/make_goldens.py` (the seeded input generator), writes
//! them to a private temporary folder and starts `PYTHON torch_baseline.py --worker` once: a long-lived worker that
//! imports torch once and answers one request per program (PyTorch eager and torch.compile times of `FILE::FUNC`,
//! the median of N runs after 3 warm-up runs, on fresh copies of the seed-0 inputs). It runs with one thread
//! (`OMP_NUM_THREADS=1`, `MKL_NUM_THREADS=1` unless set, and `torch.set_num_threads(1)`). Answers are lines starting
//! `@@funcfuse ` on the worker's standard output; anything else it prints is passed to standard error.
//!
//! A Python that does not start, or lacks torch, makes the worker unavailable: every request answers why, once
//! asked. A worker that dies during a request (a crash in torch) answers that request with its exit status and is
//! started again for the next one.

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

use serde_json::{json, Value};

const SCRIPT: &str = include_str!("../scripts/torch_baseline.py");
const GENERATOR: &str = include_str!("../scripts/make_goldens.py");
const MARK: &str = "@@funcfuse ";

struct Running {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

/// A PyTorch worker process, started on first use.
pub struct Worker {
    python: String,
    device: &'static str,
    dir: PathBuf,
    running: Option<Running>,
    /// Why the worker cannot run (set once, then every request answers it).
    unavailable: Option<String>,
    /// `torch VERSION` from the worker's greeting.
    pub version: Option<String>,
}

impl Worker {
    /// A worker run by `python`, timing on `device` (`cpu` or `cuda`); writes the scripts, starts nothing yet.
    pub fn new(python: &str, device: &'static str) -> Result<Worker, String> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let dir = std::env::temp_dir().join(format!("funcfuse-torch-{}-{nanos}", std::process::id()));
        let mut b = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut b, 0o700);
        b.create(&dir).map_err(|e| format!("{}: cannot create: {e}", dir.display()))?;
        let worker =
            Worker { python: python.to_string(), device, dir, running: None, unavailable: None, version: None };
        for (name, text) in [("torch_baseline.py", SCRIPT), ("make_goldens.py", GENERATOR)] {
            let p = worker.dir.join(name);
            std::fs::write(&p, text).map_err(|e| format!("{}: cannot write: {e}", p.display()))?;
        }
        Ok(worker)
    }

    /// Why the worker cannot run, once it has been found unable to.
    pub fn unavailable(&self) -> Option<&str> {
        self.unavailable.as_deref()
    }

    fn start(&mut self) -> Result<(), String> {
        let mut cmd = Command::new(&self.python);
        cmd.arg("-u").arg(self.dir.join("torch_baseline.py")).arg("--worker").arg("--device").arg(self.device);
        for var in ["OMP_NUM_THREADS", "MKL_NUM_THREADS"] {
            if std::env::var_os(var).is_none() {
                cmd.env(var, "1");
            }
        }
        // Loading a program must not leave __pycache__ folders beside the user's files.
        cmd.env("PYTHONDONTWRITEBYTECODE", "1");
        cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit());
        let mut child = cmd.spawn().map_err(|e| format!("cannot start `{}`: {e}", self.python))?;
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("cannot talk to `{}`", self.python));
        };
        let mut r = Running { child, stdin, stdout: BufReader::new(stdout) };
        let hello = match answer(&mut r) {
            Ok(v) => v,
            Err(e) => {
                let _ = r.child.kill();
                let _ = r.child.wait();
                return Err(format!("`{}` {e} before greeting (is it a Python 3?)", self.python));
            }
        };
        if hello["ok"] != json!(true) {
            let _ = r.child.kill();
            let _ = r.child.wait();
            return Err(hello["error"].as_str().unwrap_or("the PyTorch worker refused to start").to_string());
        }
        self.version = Some(format!("torch {}", hello["torch"].as_str().unwrap_or("?")));
        self.running = Some(r);
        Ok(())
    }

    /// Times `func` of `file`: the worker's answer (`eager_s`, `compile_s`, `eager_error`, `compile_error`, `error`,
    /// `inputs`), or why there is none (the worker is unavailable or died).
    pub fn time(&mut self, file: &str, func: &str, runs: usize, compile: bool) -> Result<Value, String> {
        if let Some(why) = &self.unavailable {
            return Err(why.clone());
        }
        if self.running.is_none() {
            if let Err(why) = self.start() {
                self.unavailable = Some(why.clone());
                return Err(why);
            }
        }
        let r = self.running.as_mut().expect("started above");
        let req = json!({ "file": file, "func": func, "runs": runs.max(1), "compile": compile });
        let sent = writeln!(r.stdin, "{req}").and_then(|_| r.stdin.flush());
        let got = match sent {
            Ok(()) => answer(r),
            Err(e) => Err(format!("stopped reading requests ({e})")),
        };
        match got {
            Ok(v) => Ok(v),
            Err(e) => {
                // It died: say so for this program, and start a fresh one for the next.
                let mut r = self.running.take().expect("running");
                let _ = r.child.kill();
                let _ = r.child.wait();
                Err(format!("the PyTorch worker {e}"))
            }
        }
    }
}

/// The next answer line of the worker; other lines go to standard error.
fn answer(r: &mut Running) -> Result<Value, String> {
    let mut line = String::new();
    loop {
        line.clear();
        match r.stdout.read_line(&mut line) {
            Ok(0) | Err(_) => {
                let status = r.child.wait().map_or("ended".to_string(), |s| format!("exited ({s})"));
                return Err(status);
            }
            Ok(_) => match line.strip_prefix(MARK) {
                Some(text) => {
                    return serde_json::from_str(text.trim_end()).map_err(|e| format!("answered garbage ({e})"));
                }
                None => eprint!("{line}"),
            },
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut r) = self.running.take() {
            // End of input ends the worker; it is idle between requests.
            drop(r.stdin);
            let _ = r.child.wait();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `Err` with the first difference unless the worker's `inputs` (name, shape, sum) are ours.
pub fn check_inputs(answer: &Value, ours: &[(String, Vec<usize>, f64)]) -> Result<(), String> {
    let theirs = answer["inputs"].as_array().ok_or("the PyTorch worker did not describe its inputs")?;
    if theirs.len() != ours.len() {
        return Err(format!("PyTorch made {} tensor inputs, ours {}", theirs.len(), ours.len()));
    }
    for (name, shape, sum) in ours {
        let t = theirs.iter().find(|t| t[0].as_str() == Some(name.as_str()));
        let Some(t) = t else { return Err(format!("PyTorch has no input `{name}`")) };
        let tshape: Vec<usize> = t[1]
            .as_array()
            .map(|a| a.iter().filter_map(|d| d.as_u64()).map(|d| d as usize).collect())
            .unwrap_or_default();
        if &tshape != shape {
            return Err(format!("input `{name}`: PyTorch's shape {tshape:?}, ours {shape:?}"));
        }
        let tsum = t[2].as_f64().unwrap_or(f64::NAN);
        let n = shape.iter().product::<usize>() as f64;
        // Both sum the same values, in different orders: a generator that differs moves the sum by far more.
        // (A NaN sum is never close.)
        let close = (tsum - sum).abs() <= 1e-9 * (n + sum.abs()) + 1e-9;
        if !close {
            return Err(format!("input `{name}`: the sum of PyTorch's elements is {tsum}, of ours {sum}"));
        }
    }
    Ok(())
}
