//! Class-by-class calibration (issue #17): runs programs (the embedded calibration kernels, real programs with
//! `calibrate --from`, and measurements recorded earlier with `--from-records`) and fits the profile's class
//! coefficients to what they measured ([`super::fit`]).

use serde_json::{json, Value};

use super::class::{ClassStats, CLASSES, FEATURES, N};
use super::fit::{fit, Sample};
use super::Profile;
use crate::diag::Diagnostic;
use crate::frontend::Module;

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

/// The JSON form of a run's class features (in `compare.json` and `record.json`), read back by [`record_samples`].
pub fn features_json(by_class: &[ClassStats; N]) -> Value {
    let mut m = serde_json::Map::new();
    for (name, s) in CLASSES.iter().zip(by_class) {
        if *s != ClassStats::default() {
            m.insert(
                name.to_string(),
                json!({"launches": s.launches, "bytes": s.bytes, "ops": s.ops, "transcendentals": s.transcendentals}),
            );
        }
    }
    Value::Object(m)
}

fn features_from(v: &Value) -> Option<[ClassStats; N]> {
    let obj = v.as_object()?;
    let mut out = [ClassStats::default(); N];
    for (name, s) in obj {
        let c = CLASSES.iter().position(|k| k == name)?;
        let f = |k: &str| s.get(k).and_then(Value::as_f64).filter(|x| x.is_finite() && *x >= 0.0);
        out[c] = ClassStats {
            launches: f("launches")?,
            bytes: f("bytes")?,
            ops: f("ops")?,
            transcendentals: f("transcendentals")?,
        };
    }
    Some(out)
}

/// Samples recorded in JSON files under `dir` (searched recursively): every object holding `features` (see
/// [`features_json`]) and a positive `measured_s`, as `compare.json`'s plans and `record.json`'s autotuned
/// candidates do. Files that are not JSON are skipped; a directory without any sample is an error.
pub fn record_samples(dir: &std::path::Path) -> Result<Vec<Sample>, String> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    if !dir.is_dir() {
        return Err(format!(
            "{}: --from-records needs a directory (of record.json or compare.json files)",
            dir.display()
        ));
    }
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d)
            .map_err(|e| format!("{}: {e}", d.display()))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|e| e == "json") {
                files.push(p);
            }
        }
    }
    files.sort();
    let mut out = Vec::new();
    for f in files {
        let Ok(text) = std::fs::read_to_string(&f) else { continue };
        let Ok(v) = serde_json::from_str::<Value>(&text) else { continue };
        collect(&v, &f.display().to_string(), &mut out);
    }
    // One measurement can appear in two files (a record.json and the report.json that gathers it): keep it once.
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|s| {
        let key: Vec<u64> = s.by_class.iter().flat_map(|c| c.features()).chain([s.seconds]).map(f64::to_bits).collect();
        seen.insert(key)
    });
    if out.is_empty() {
        return Err(format!(
            "{}: no measured plans with features in its JSON files (write them with `compare --measure` or \
             `optimize --autotune`)",
            dir.display()
        ));
    }
    Ok(out)
}

fn collect(v: &Value, file: &str, out: &mut Vec<Sample>) {
    match v {
        Value::Object(m) => {
            if let (Some(f), Some(t)) = (m.get("features"), m.get("measured_s").and_then(Value::as_f64)) {
                if let Some(by_class) = features_from(f).filter(|_| t > 0.0 && t.is_finite()) {
                    out.push(Sample { label: format!("{file} #{}", out.len()), by_class, seconds: t });
                }
            }
            m.values().for_each(|x| collect(x, file, out));
        }
        Value::Array(a) => a.iter().for_each(|x| collect(x, file, out)),
        _ => {}
    }
}

/// A profile whose class coefficients fit `samples`, starting from `base`'s three numbers; `info` records where it
/// came from and how well it fits its own samples.
pub fn fitted(base: &Profile, samples: &[Sample], sources: Value) -> Profile {
    let classes = fit(samples, &base.prior());
    let pairs: Vec<(f64, f64)> =
        samples.iter().map(|s| (super::predict_classes(&classes, &s.by_class), s.seconds)).collect();
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
