//! Comparing plans: for one program, the baselines (eager, unfunctionalized) and ours, each planned by the same
//! pipeline and run on the same inputs; kernels launched, bytes moved, predicted time, and, when asked, measured
//! median time, side by side.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::diag::Diagnostic;
use crate::frontend::Module;
use crate::functionalize::Functional;
use crate::lower::exec::Stats;
use crate::lower::Policy;
use crate::pipeline::Session;

pub use crate::pipeline::PLANS;

/// One plan's figures. `kernels`, `fallbacks`, `bytes` and `predicted_s` are the plan's predicted figures
/// ([`crate::lower::estimate::plan_estimate`]), the same `explain` and `optimize` print; `stats` is what the checked run
/// counted, which differs only where the run took a path the estimate assumed otherwise (a `while`'s trips, an `if`
/// arm, computed loop bounds).
#[derive(Clone, Debug)]
pub struct PlanRow {
    pub plan: String,
    pub kernels: usize,
    pub fallbacks: usize,
    pub bytes: f64,
    pub predicted_s: f64,
    pub measured_s: Option<f64>,
    /// Whether its outputs match the reference engine's (`tensor::compare_close`: the tolerance the tests use).
    pub agrees: bool,
    /// What the plan's checked run did (launches, bytes, ops, class by class).
    pub stats: Stats,
}

impl PlanRow {
    /// Whether the checked run launched other than predicted (then reports say so beside the prediction).
    pub fn ran_otherwise(&self) -> bool {
        self.stats.launches != self.kernels
    }
}

/// What comparing one program gives: the plans' rows, the roofline and a summary of the inputs used.
#[derive(Clone, Debug)]
pub struct Compared {
    pub rows: Vec<PlanRow>,
    /// The program's roofline bound (bytes from its inputs and outputs, transcendentals from our plan).
    pub roofline: crate::roofline::Roofline,
    /// Each tensor input: name, shape and the sum of its elements (to check that another tool used the same ones).
    pub inputs: Vec<(String, Vec<usize>, f64)>,
    /// With profiling asked for and measuring: our plan's per-kernel profile over the measured runs' count of
    /// profiled runs ([`crate::lower::profile`]).
    pub profile: Option<Vec<crate::lower::profile::ProfileRow>>,
    /// With autotuning: the record of the candidates tried ([`crate::autotune::record_json`]).
    pub autotune: Option<Value>,
}

/// Plans and runs one program; `measure` gives the number of timed runs (the median is reported); with `profile`
/// too, our plan is run that many times again, profiled.
#[allow(clippy::too_many_arguments)]
pub fn compare_program(
    module: &Module,
    func: &str,
    session: &Session,
    which: &[&str],
    measure: Option<usize>,
    profile_runs: bool,
    autotune: usize,
) -> Result<Compared, Diagnostic> {
    let (profile, target) = (&session.profile, session.target);
    let functional = session.functionalize(module, func, &BTreeMap::new())?;
    let mut optimized = functional.clone();
    let mut o = session.saturate(&functional, &module.path)?;
    let tuned = if autotune > 0 {
        let model = o.chosen;
        let runs = measure.unwrap_or(crate::batch::AUTOTUNE_RUNS);
        let tried = crate::autotune::autotune(&functional, &mut o, autotune, runs, profile, target)
            .map_err(|m| Diagnostic::new(m).in_file(&module.path))?;
        Some(crate::autotune::record_json(model, o.chosen, &tried))
    } else {
        None
    };
    optimized.term = o.term;
    let params: Vec<(String, crate::tensor::DType, Vec<usize>)> = functional.inputs.clone();
    let mut inputs = BTreeMap::new();
    for (i, (name, d, shape)) in params.iter().enumerate() {
        inputs.insert(name.clone(), crate::io::random_input(0, i, *d, shape)?);
    }
    let summary = params
        .iter()
        .map(|(name, _, shape)| (name.clone(), shape.clone(), inputs[name].to_f64_vec().iter().sum::<f64>()))
        .collect();
    let mut rows = Vec::new();
    let mut roofline = None;
    let mut profiled = None;
    // The reference engine's outputs, in the functional term's output order.
    let fresh: BTreeMap<_, _> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let reference = crate::interp::run_program(module, func, &fresh, &BTreeMap::new())?;
    let mut want = Vec::new();
    for o in &functional.outputs {
        want.push(match o {
            crate::functionalize::Output::Return(k) => reference.returns.get(*k).cloned(),
            // A parameter the term may write that this run left alone (a view chosen at run time, an arm not
            // taken, a loop run zero times) is its input as it was.
            crate::functionalize::Output::Mutated(n) => match reference.mutated.iter().find(|(m, _)| m == n) {
                Some((_, t)) => Some(t.clone()),
                None => inputs.get(n).cloned(),
            },
        });
    }
    for (name, policy) in PLANS {
        if !which.contains(name) {
            continue;
        }
        let f: &Functional = if *policy == Policy::Fused { &optimized } else { &functional };
        let p = session.plan(&f.term, &f.inputs, *policy).map_err(|e| Diagnostic::new(format!("{name} plan: {e}")))?;
        if *policy == Policy::Fused {
            let outs: Vec<(crate::tensor::DType, Vec<usize>)> =
                want.iter().flatten().map(|t| (t.dtype(), t.shape.clone())).collect();
            // The eager plan computes each op once per element: our plan's count may include recomputation.
            let eager = session.plan(&functional.term, &functional.inputs, Policy::Eager).ok();
            let plans: Vec<&crate::lower::Plan> = std::iter::once(&p).chain(eager.as_ref()).collect();
            roofline = Some(crate::roofline::roofline(
                profile,
                params.iter().map(|(_, d, s)| (*d, s.as_slice())),
                outs.iter().map(|(d, s)| (*d, s.as_slice())),
                &plans,
            ));
        }
        let mut dev = session.load_plan(&p).map_err(Diagnostic::new)?;
        // Fresh inputs for every run: runs are given them up, as PyTorch writes into the tensors it is timed on.
        let fresh = || -> BTreeMap<_, _> { inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect() };
        // The checked run is run as the timed ones are, so that its counts, which `compare.json` records beside the
        // measured time as the features a profile is fitted to, are of the same work.
        let (out, stats): (Vec<crate::tensor::Tensor>, Stats) =
            dev.run_donated(&p, &mut fresh()).map_err(Diagnostic::new)?;
        let agrees =
            want.len() == out.len() && want.iter().zip(&out).all(|(w, o)| w.as_ref().is_some_and(|w| close(o, w)));
        let measured_s = match measure {
            Some(n) => {
                // The inputs are made before the clock starts; as in PyTorch's timing, the outputs are dropped
                // within the time and the inputs after it.
                let sets: Vec<BTreeMap<_, _>> = (0..n.max(1)).map(|_| fresh()).collect();
                let mut times = Vec::new();
                for mut set in sets {
                    let t = Instant::now();
                    dev.run_donated(&p, &mut set).map_err(Diagnostic::new)?;
                    times.push(t.elapsed().as_secs_f64());
                }
                times.sort_by(f64::total_cmp);
                if profile_runs && *policy == Policy::Fused {
                    let mut runs = Vec::new();
                    for _ in 0..n.max(1) {
                        runs.push(dev.run_profiled(&p, &fresh()).map_err(Diagnostic::new)?.2);
                    }
                    profiled = Some(crate::lower::profile::summarize(&p, &runs));
                }
                Some(times[times.len() / 2])
            }
            None => None,
        };
        let estimate = crate::lower::estimate::plan_estimate(&p, profile);
        rows.push(PlanRow {
            plan: name.to_string(),
            kernels: estimate.launches.round() as usize,
            fallbacks: estimate.stats.fallbacks,
            bytes: estimate.bytes,
            predicted_s: estimate.seconds,
            measured_s,
            agrees,
            stats,
        });
    }
    let roofline = roofline.ok_or_else(|| Diagnostic::new("compare: our plan was not among the plans asked for"))?;
    Ok(Compared { rows, roofline, inputs: summary, profile: profiled, autotune: tuned })
}

fn close(a: &crate::tensor::Tensor, b: &crate::tensor::Tensor) -> bool {
    crate::tensor::compare_close("", a, b).is_ok()
}

/// The JSON form of one program's rows and roofline (`ours_over_bound`: our measured time over the bound, when
/// measured).
pub fn rows_json(program: &str, rows: &[PlanRow], roofline: &crate::roofline::Roofline) -> Value {
    let ours = rows.iter().find(|r| r.plan == "ours").and_then(|r| r.measured_s);
    json!({
        "program": program,
        "roofline": {
            "bytes": roofline.bytes,
            "transcendentals": roofline.transcendentals,
            "bound_s": roofline.bound_s,
            "ours_over_bound": ours.filter(|_| roofline.bound_s > 0.0).map(|m| m / roofline.bound_s),
        },
        "plans": rows.iter().map(|r| json!({
            "plan": r.plan,
            "kernels": r.kernels,
            "fallbacks": r.fallbacks,
            "bytes": r.bytes,
            "predicted_s": r.predicted_s,
            "measured_s": r.measured_s,
            "run": { "kernels": r.stats.launches, "fallbacks": r.stats.fallbacks, "bytes": r.stats.bytes },
            "matches_reference": r.agrees,
            "features": crate::cost::records::features_json(&r.stats.by_class),
        })).collect::<Vec<_>>(),
    })
}

/// Geometric mean of positive numbers.
pub fn geomean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    (xs.iter().map(|x| x.ln()).sum::<f64>() / xs.len() as f64).exp()
}

/// How well predicted times rank and match measured ones, over `(predicted, measured)` pairs: the median of
/// `|predicted - measured| / measured` and Spearman's rank correlation (ties take their average rank). `None` for
/// fewer than two pairs.
pub fn prediction_quality(pairs: &[(f64, f64)]) -> Option<(f64, f64)> {
    if pairs.len() < 2 {
        return None;
    }
    let mut errors: Vec<f64> = pairs.iter().map(|(p, m)| (p - m).abs() / m).collect();
    errors.sort_by(f64::total_cmp);
    let n = errors.len();
    let median = if n % 2 == 1 { errors[n / 2] } else { (errors[n / 2 - 1] + errors[n / 2]) / 2.0 };
    let ranks = |xs: Vec<f64>| -> Vec<f64> {
        let mut order: Vec<usize> = (0..xs.len()).collect();
        order.sort_by(|&a, &b| xs[a].total_cmp(&xs[b]));
        let mut r = vec![0.0; xs.len()];
        let mut i = 0;
        while i < order.len() {
            let mut j = i;
            while j + 1 < order.len() && xs[order[j + 1]] == xs[order[i]] {
                j += 1;
            }
            for &k in &order[i..=j] {
                r[k] = (i + j) as f64 / 2.0 + 1.0;
            }
            i = j + 1;
        }
        r
    };
    let (a, b) = (ranks(pairs.iter().map(|p| p.0).collect()), ranks(pairs.iter().map(|p| p.1).collect()));
    let mean = (n as f64 + 1.0) / 2.0;
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(&b) {
        cov += (x - mean) * (y - mean);
        va += (x - mean) * (x - mean);
        vb += (y - mean) * (y - mean);
    }
    let spearman = if va == 0.0 || vb == 0.0 { 0.0 } else { cov / (va * vb).sqrt() };
    Some((median, spearman))
}

#[cfg(test)]
mod tests {
    use super::prediction_quality;

    #[test]
    fn prediction_quality_is_the_median_error_and_the_rank_correlation() {
        // Errors 10%, 50%, 0%: median 10%. Predicted and measured rank alike: spearman 1.
        let (e, s) = prediction_quality(&[(1.1, 1.0), (3.0, 2.0), (5.0, 5.0)]).unwrap();
        assert!((e - 0.1).abs() < 1e-12 && (s - 1.0).abs() < 1e-12, "{e} {s}");
        // Reversed ranks: spearman -1; ties share their average rank.
        let (_, s) = prediction_quality(&[(3.0, 1.0), (2.0, 2.0), (1.0, 3.0)]).unwrap();
        assert!((s + 1.0).abs() < 1e-12, "{s}");
        let (_, s) = prediction_quality(&[(1.0, 1.0), (1.0, 2.0), (2.0, 3.0)]).unwrap();
        assert!((s - 0.8660254037844387).abs() < 1e-12, "{s}");
        assert_eq!(prediction_quality(&[(1.0, 1.0)]), None);
    }
}
