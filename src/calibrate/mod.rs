//! Calibration: measures a backend's cost profile. [`calibrate`] times three micro-kernels (launch overhead,
//! bandwidth, arithmetic throughput); class by class (issue #17), it runs programs (the embedded calibration
//! kernels, real programs with `calibrate --from`, and measurements recorded earlier with `--from-records`) and fits
//! the profile's class coefficients to what they measured ([`crate::cost::fit`]). It runs plans through the
//! pipeline and the backends, so it sits above them; the profile it writes is `crate::cost`'s.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cost::class::{CLASSES, FEATURES};
use crate::cost::fit::{fit, Sample};
use crate::cost::{Profile, Stats, DEFAULT_TRANSCENDENTAL_S};
use crate::diag::Diagnostic;
use crate::frontend::Module;
use crate::tensor::DType;

pub use crate::cost::records::{features_json, record_samples};

/// One program per kernel class and size, measured by every calibration.
pub const KERNELS: &str = include_str!("kernels.py");

/// The measured samples of one program: each of its plans (eager, unfunctionalized, ours), `runs` timed runs each.
pub fn program_samples(
    module: &Module,
    func: &str,
    session: &crate::pipeline::Session,
    runs: usize,
) -> Result<Vec<Sample>, Diagnostic> {
    let which: Vec<&str> = crate::pipeline::PLANS.iter().map(|(n, _)| *n).collect();
    let c = crate::compare::compare_program(module, func, session, &which, Some(runs), false, 0)?;
    Ok(c.rows
        .iter()
        .filter_map(|r| {
            r.measured_s.filter(|m| *m > 0.0).map(|m| Sample {
                label: format!("{}::{func} ({})", module.path, r.plan),
                by_class: r.stats.by_class,
                seconds: m,
            })
        })
        .collect())
}

/// The samples of the embedded calibration kernels.
pub fn kernel_samples(session: &crate::pipeline::Session, runs: usize) -> Result<Vec<Sample>, String> {
    let module = crate::frontend::parse_module("<calibration kernels>", KERNELS).map_err(|d| d.to_string())?;
    let mut out = Vec::new();
    for f in module.program_names() {
        out.extend(program_samples(&module, &f, session, runs).map_err(|d| d.to_string())?);
    }
    Ok(out)
}

/// A profile whose class coefficients fit `samples`, starting from `base`'s three numbers; `info` records where it
/// came from and how well it fits its own samples.
pub fn fitted(base: &Profile, samples: &[Sample], sources: Value) -> Profile {
    let classes = fit(samples, &base.prior());
    let pairs: Vec<(f64, f64)> =
        samples.iter().map(|s| (crate::cost::predict_classes(&classes, &s.by_class), s.seconds)).collect();
    let quality = crate::compare::prediction_quality(&pairs);
    let mut p = base.clone();
    p.classes = Some(classes);
    p.info = json!({
        "machine": machine(),
        "compiler": compiler(),
        "measured": true,
        "sources": sources,
        "samples": samples.len(),
        "fit_median_error": quality.map(|q| q.0),
        "fit_spearman": quality.map(|q| q.1),
        "model": format!(
            "per class ({}): seconds = sum of feature * coefficient ({})",
            CLASSES.join(", "),
            FEATURES.join(", ")
        ),
    });
    p
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    format!("{cpu} ({} {})", std::env::consts::OS, std::env::consts::ARCH)
}

fn compiler() -> String {
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    std::process::Command::new(&cc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8_lossy(&o.stdout).lines().next().map(str::to_string))
        .unwrap_or(cc)
}

fn median_time(mut f: impl FnMut() -> Result<(), String>, runs: usize) -> Result<f64, String> {
    f()?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        f()?;
        times.push(t.elapsed().as_secs_f64());
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}

/// Measures a profile of the C backend with three micro-kernels: a one-element add (launch overhead), a copy of
/// 32 MiB (bandwidth), and a chain of exp, mul and add over 1 Mi elements (throughput).
pub fn calibrate_c() -> Result<Profile, String> {
    calibrate(crate::backend::Target::C)
}

/// Measures a profile of `target`'s backend (see [`calibrate_c`]); on CUDA every run is synchronized.
pub fn calibrate(target: crate::backend::Target) -> Result<Profile, String> {
    let measure = |term: &str, shape: &[usize], runs: usize| -> Result<(f64, Stats), String> {
        let inputs = vec![("x".to_string(), DType::F32, shape.to_vec())];
        let term: crate::ir::Term = term.parse().map_err(|e| format!("{e}"))?;
        let plan = crate::lower::plan(&term, &inputs, crate::lower::Policy::Fused)?;
        let mut dev = crate::backend::Loaded::new(&plan, target)?;
        let mut vals = BTreeMap::new();
        vals.insert("x".to_string(), crate::io::random_input(0, 0, DType::F32, shape).map_err(|d| d.to_string())?);
        let mut stats = Stats::default();
        let t = median_time(
            || {
                stats = dev.run(&plan, &vals)?.1;
                Ok(())
            },
            runs,
        )?;
        Ok((t, stats))
    };
    let (t_launch, s) = measure("(tuple (add (input %x) (input %x)))", &[1], 2000)?;
    let launch_s = t_launch / s.launches.max(1) as f64;
    // Every run copies its input into the device's buffers first (read and write): those bytes move too. Buffers
    // are warm (the device's pool keeps them across runs), as a plan's are when it runs again.
    let upload = |n: usize| 2.0 * (n * DType::F32.size()) as f64;
    let n = 8 << 20;
    let (t_copy, s) = measure("(tuple (neg (input %x)))", &[n], 9)?;
    let bytes_per_s = (s.bytes + upload(n)) / (t_copy - launch_s).max(1e-9);
    let m = 1 << 20;
    let (t_ops, s) = measure("(tuple (add (mul (exp (input %x)) (input %x)) (sigmoid (input %x))))", &[m], 9)?;
    let memory = (s.bytes + upload(m)) / bytes_per_s;
    let ops_per_s = s.flops / (t_ops - launch_s - memory).max(t_ops * 0.1);
    let backend = match target {
        crate::backend::Target::C => "c",
        crate::backend::Target::Cuda => "cuda",
        crate::backend::Target::CudaEmu => "cuda-emu",
    };
    Ok(Profile {
        backend: backend.into(),
        launch_s,
        bytes_per_s,
        ops_per_s,
        transcendental_s: DEFAULT_TRANSCENDENTAL_S,
        stream_bytes_per_s: bytes_per_s,
        classes: None,
        info: Value::Null,
    })
}
