//! The cost model: a measured profile of a backend (launch overhead, memory bandwidth, arithmetic throughput) and
//! the time it predicts for a plan's launches, bytes and ops.
//!
//! `funcfuse calibrate` measures a profile with micro-kernels run through the same pipeline as programs and writes
//! it as JSON (`crate::calibrate`, above the pipeline it runs); `corpus/costs/` ships one per machine kind.
//! Predictions never measure.

use std::path::Path;

use serde_json::{json, Value};

pub mod class;
pub mod fit;
pub mod records;

use class::{CLASSES, FEATURES};

/// Per kernel class ([`class::CLASSES`]), the seconds per unit of each feature ([`class::FEATURES`]).
pub type Coefficients = [[f64; 4]; class::N];

/// What one run did: the counts the executor (`lower::exec`) keeps and [`Profile::predict`] prices.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Kernels launched, buffer copies included.
    pub launches: usize,
    pub copies: usize,
    /// Ops run on the host by the functional interpreter.
    pub fallbacks: usize,
    /// Bytes read and written by kernels (an estimate: each load site reads at most its buffer once per point).
    pub bytes: f64,
    /// Arithmetic ops executed by kernels (an estimate from the expression trees).
    pub flops: f64,
    /// The same work split by kernel class ([`class::CLASSES`]), which profiles price class by class.
    pub by_class: [class::ClassStats; class::N],
}

impl Stats {
    /// Adds one launch's (or copy's, or fallback's) features to class `c`.
    pub fn class(&mut self, c: usize, launches: f64, bytes: f64, ops: f64, transcendentals: f64) {
        let s = &mut self.by_class[c];
        s.launches += launches;
        s.bytes += bytes;
        s.ops += ops;
        s.transcendentals += transcendentals;
    }
}

/// The profile format this build writes; it reads this and 1 (no `version`, no `classes`).
pub const PROFILE_VERSION: u64 = 2;

/// A backend's measured costs.
#[derive(Clone, Debug, PartialEq)]
pub struct Profile {
    pub backend: String,
    /// Seconds per kernel launch (call and host overhead of an almost empty kernel).
    pub launch_s: f64,
    /// Bytes per second a streaming kernel reads plus writes.
    pub bytes_per_s: f64,
    /// Elementwise arithmetic ops per second (a mix of transcendental and simple ops).
    pub ops_per_s: f64,
    /// Seconds per element of a transcendental function (exp, log, tanh, sigmoid, erf, pow, ...) at the machine's
    /// best (vectorized) rate: the roofline bound's arithmetic term (`crate::roofline`), not a prediction of our
    /// kernels. Optional in profile JSON ([`DEFAULT_TRANSCENDENTAL_S`] when absent); `calibrate` writes the default.
    pub transcendental_s: f64,
    /// Bytes per second one thread streams through warm buffers (read plus write): the roofline bound's memory
    /// term. Optional in profile JSON (`bytes_per_s` when absent). The shipped profile keeps its planning figure
    /// `bytes_per_s` from before the buffer pool (planning with the streaming figure stores too much; issue #17)
    /// and carries this one, measured by `calibrate`, for the bound.
    pub stream_bytes_per_s: f64,
    /// Per kernel class, measured rates (profile version 2): when present, [`Profile::predict`] prices each class
    /// by its own launch, byte, op and transcendental costs. Absent in older profiles (then the three numbers above
    /// predict).
    pub classes: Option<Coefficients>,
    /// Where the profile came from (machine, compiler, samples, fit quality): informative only, kept as written.
    pub info: Value,
}

/// The default cost of one transcendental element: measured on this project's CPU machines (Xeon with AVX-512, one
/// thread) with glibc's vector math in 512-bit vectors (`gcc -O3 -march=native -ffast-math
/// -mprefer-vector-width=512`, 64 Ki f32 in cache): expf 0.24 ns, logf 0.26 ns, sigmoid 0.31 ns, tanhf 0.31 ns
/// per element; the bound takes the fast end. (GCC's default 256-bit vectors measured expf 0.36 ns, sigmoid 0.43:
/// the figure was 0.4 ns until the kernels were built for 512-bit vectors and the bound had to be the machine's.)
pub const DEFAULT_TRANSCENDENTAL_S: f64 = 0.24e-9;

/// The profile shipped for the CPU kind these machines are (measured with `calibrate --backend c`).
pub const SHIPPED_C: &str = include_str!("../../corpus/costs/c-cpu.json");

impl Profile {
    pub fn shipped_c() -> Profile {
        static SHIPPED: std::sync::OnceLock<Profile> = std::sync::OnceLock::new();
        SHIPPED.get_or_init(|| Profile::parse(SHIPPED_C).expect("the shipped profile parses")).clone()
    }

    /// The profile in `path`, or the shipped CPU profile.
    pub fn load_or_shipped(path: Option<&Path>) -> Result<Profile, String> {
        path.map_or_else(|| Ok(Profile::shipped_c()), Profile::load)
    }

    pub fn parse(text: &str) -> Result<Profile, String> {
        let v: Value = serde_json::from_str(text).map_err(|e| format!("a cost profile must be JSON: {e}"))?;
        let num = |k: &str| {
            v.get(k)
                .and_then(Value::as_f64)
                .filter(|x| *x > 0.0)
                .ok_or(format!("the cost profile needs a positive `{k}`"))
        };
        if !v.is_object() {
            return Err("a cost profile must be a JSON object".into());
        }
        match v.get("version") {
            None | Some(Value::Null) => {}
            Some(x) => match x.as_u64() {
                Some(1 | 2) => {}
                Some(n) if n > PROFILE_VERSION => {
                    return Err(format!(
                        "cost profile version {n} is newer than this build reads ({PROFILE_VERSION}): recalibrate"
                    ))
                }
                _ => return Err(format!("the cost profile's `version` must be 1 or 2, not {x}")),
            },
        }
        let mut p = Profile {
            backend: v.get("backend").and_then(Value::as_str).unwrap_or("c").to_string(),
            launch_s: num("launch_s")?,
            bytes_per_s: num("bytes_per_s")?,
            ops_per_s: num("ops_per_s")?,
            transcendental_s: match v.get("transcendental_s") {
                None | Some(Value::Null) => DEFAULT_TRANSCENDENTAL_S,
                Some(_) => num("transcendental_s")?,
            },
            stream_bytes_per_s: match v.get("stream_bytes_per_s") {
                None | Some(Value::Null) => num("bytes_per_s")?,
                Some(_) => num("stream_bytes_per_s")?,
            },
            classes: None,
            info: v.get("info").cloned().unwrap_or(Value::Null),
        };
        p.classes = match v.get("classes") {
            None | Some(Value::Null) => None,
            Some(c) => Some(parse_classes(c, &p.prior())?),
        };
        Ok(p)
    }

    /// Class coefficients from the three legacy numbers: every class launches at `launch_s`, moves bytes at
    /// `bytes_per_s` and computes at `ops_per_s` (the start of a fit, and a class a profile leaves out).
    pub fn prior(&self) -> Coefficients {
        [[self.launch_s, 1.0 / self.bytes_per_s, 1.0 / self.ops_per_s, 0.0]; class::N]
    }

    pub fn load(path: &Path) -> Result<Profile, String> {
        let text = crate::io::read_text(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Profile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn to_json(&self) -> Value {
        let classes = self.classes.map(|c| {
            let mut m = serde_json::Map::new();
            for (name, row) in CLASSES.iter().zip(c.iter()) {
                let r: serde_json::Map<String, Value> =
                    FEATURES.iter().zip(row).map(|(f, x)| (f.to_string(), json!(x))).collect();
                m.insert(name.to_string(), Value::Object(r));
            }
            Value::Object(m)
        });
        json!({
            "version": PROFILE_VERSION,
            "info": self.info,
            "classes": classes,
            "backend": self.backend,
            "launch_s": self.launch_s,
            "bytes_per_s": self.bytes_per_s,
            "ops_per_s": self.ops_per_s,
            "transcendental_s": self.transcendental_s,
            "stream_bytes_per_s": self.stream_bytes_per_s,
        })
    }

    /// Predicted seconds for what a plan ran: launches, then memory traffic and arithmetic overlapping.
    pub fn predict(&self, s: &Stats) -> f64 {
        if let Some(c) = &self.classes {
            return predict_classes(c, &s.by_class);
        }
        s.launches as f64 * self.launch_s + (s.bytes / self.bytes_per_s).max(s.flops / self.ops_per_s)
    }
}

/// The time class coefficients predict for per-class features.
pub fn predict_classes(c: &Coefficients, by_class: &[class::ClassStats; class::N]) -> f64 {
    c.iter().zip(by_class).map(|(row, s)| row.iter().zip(s.features()).map(|(a, x)| a * x).sum::<f64>()).sum()
}

fn parse_classes(v: &Value, prior: &Coefficients) -> Result<Coefficients, String> {
    let obj = v.as_object().ok_or("the cost profile's `classes` must be an object of kernel classes")?;
    let mut out = *prior;
    for (name, row) in obj {
        let c = CLASSES.iter().position(|k| k == name).ok_or_else(|| {
            format!("the cost profile's `classes` has an unknown class `{name}` (known: {})", CLASSES.join(", "))
        })?;
        let row = row.as_object().ok_or_else(|| format!("the cost profile's class `{name}` must be an object"))?;
        for (f, x) in row {
            let j = FEATURES.iter().position(|k| k == f).ok_or_else(|| {
                format!("the cost profile's class `{name}` has an unknown field `{f}` (known: {})", FEATURES.join(", "))
            })?;
            out[c][j] = x
                .as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("the cost profile's `classes.{name}.{f}` must be a non-negative number"))?;
        }
    }
    Ok(out)
}
