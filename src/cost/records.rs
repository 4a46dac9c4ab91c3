//! Measurements recorded as JSON (`compare.json`'s plans, `record.json`'s autotuned candidates): a run's class
//! features written out ([`features_json`]) and read back as calibration samples ([`record_samples`]).

use serde_json::{json, Value};

use super::class::{ClassStats, CLASSES, N};
use super::fit::Sample;

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
