//! Autotuning (`optimize --autotune K`): the K candidate terms extraction predicts cheapest are planned, run on the
//! backend and timed, and the fastest is kept. Measurement-dependent, so off by default: with it, the same input
//! can give different plans on different runs or machines.

use std::collections::BTreeMap;
use std::time::Instant;

use serde_json::{json, Value};

use crate::cost::class::{ClassStats, N};
use crate::cost::Profile;
use crate::functionalize::Functional;
use crate::lower::Policy;
use crate::rewrite::saturate::{Extractor, Optimized};

/// One measured candidate.
#[derive(Clone, Debug)]
pub struct Tried {
    pub candidate: Extractor,
    /// The plan's cost as extraction priced it ([`crate::lower::estimate::decision_cost`]).
    pub predicted_s: f64,
    /// The profile's prediction for what its checked run did (its own trip counts and arms), class by class.
    pub predicted_class_s: f64,
    pub measured_s: f64,
    pub features: [ClassStats; N],
    /// Whether its outputs match the model's choice's outputs (a candidate that does not is never kept).
    pub agrees: bool,
}

/// A candidate loaded for timing: its index in `alternatives`, plan, loaded kernels, what its checked run did, and
/// its timed runs so far.
struct Candidate {
    index: usize,
    plan: crate::lower::Plan,
    dev: crate::backend::Loaded,
    stats: crate::lower::exec::Stats,
    agrees: bool,
    times: Vec<f64>,
}

/// Measures the `k` best-predicted distinct candidates of `o` (`runs` timed runs each, the median) and makes the
/// fastest `o`'s term and choice. Returns what was tried, in predicted order.
pub fn autotune(
    f: &Functional,
    o: &mut Optimized,
    k: usize,
    runs: usize,
    profile: &Profile,
    target: crate::backend::Target,
) -> Result<Vec<Tried>, String> {
    let mut order: Vec<usize> = (0..o.alternatives.len()).collect();
    let cost = |i: usize| o.candidates.get(i).map_or(f64::INFINITY, |c| c.1);
    order.sort_by(|&a, &b| cost(a).total_cmp(&cost(b)).then(a.cmp(&b)));
    // The model's choice first among equals, then distinct terms only.
    let mut seen: Vec<String> = Vec::new();
    let mut picked = Vec::new();
    for i in order {
        let text = crate::ir::display_dag(&o.alternatives[i].1);
        if seen.contains(&text) || !cost(i).is_finite() {
            continue;
        }
        seen.push(text);
        picked.push(i);
        if picked.len() == k {
            break;
        }
    }
    let mut inputs = BTreeMap::new();
    for (i, (name, d, shape)) in f.inputs.iter().enumerate() {
        inputs.insert(name.clone(), crate::io::random_input(0, i, *d, shape).map_err(|d| d.to_string())?);
    }
    let fresh = || -> BTreeMap<String, crate::tensor::Tensor> {
        inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect()
    };
    // Each candidate is planned, loaded and run once (checked against the first), then the timed runs go round
    // the candidates in turn: timed one after another, a later candidate ran on a warmer process (its buffers'
    // pages already mapped, caches and clocks up) and measured up to a third faster than an identical plan before it.
    let mut loaded = Vec::new();
    let mut reference: Option<Vec<crate::tensor::Tensor>> = None;
    for &i in &picked {
        let term = &o.alternatives[i].1;
        crate::limits::check()?;
        let p = crate::lower::plan_for(term, &f.inputs, Policy::Fused, profile)?;
        let mut dev = crate::backend::Loaded::new(&p, target)?;
        // Run as the timed runs are (inputs given up), so that its counts are of the work they time.
        let (out, stats) = dev.run_donated(&p, &mut fresh())?;
        let agrees = match &reference {
            None => true,
            Some(want) => {
                want.len() == out.len()
                    && want.iter().zip(&out).all(|(w, g)| crate::tensor::compare_close("", g, w).is_ok())
            }
        };
        if reference.is_none() {
            reference = Some(out);
        }
        loaded.push(Candidate { index: i, plan: p, dev, stats, agrees, times: Vec::new() });
    }
    for _ in 0..runs.max(1) {
        for c in loaded.iter_mut() {
            crate::limits::check()?;
            // Given up to the run, as `compare --measure` times plans ([`crate::backend::Loaded::run_donated`]).
            let mut set = fresh();
            let t = Instant::now();
            c.dev.run_donated(&c.plan, &mut set)?;
            c.times.push(t.elapsed().as_secs_f64());
        }
    }
    let mut tried = Vec::new();
    for mut c in loaded {
        c.times.sort_by(f64::total_cmp);
        tried.push(Tried {
            candidate: o.alternatives[c.index].0,
            predicted_s: cost(c.index),
            predicted_class_s: profile.predict(&c.stats),
            measured_s: c.times[c.times.len() / 2],
            features: c.stats.by_class,
            agrees: c.agrees,
        });
    }
    let best = tried
        .iter()
        .enumerate()
        .filter(|(_, t)| t.agrees)
        .min_by(|a, b| a.1.measured_s.total_cmp(&b.1.measured_s).then(a.0.cmp(&b.0)))
        .map(|(j, _)| picked[j]);
    if let Some(i) = best {
        o.chosen = o.alternatives[i].0;
        o.term = o.alternatives[i].1.clone();
    }
    Ok(tried)
}

/// The record's `autotune` entry: the model's choice, the kept candidate and every tried one.
pub fn record_json(model_choice: Extractor, chosen: Extractor, tried: &[Tried]) -> Value {
    json!({
        "model_choice": model_choice.name(),
        "chosen": chosen.name(),
        "tried": tried.iter().map(|t| json!({
            "candidate": t.candidate.name(),
            "predicted_s": t.predicted_s,
            "predicted_class_s": t.predicted_class_s,
            "measured_s": t.measured_s,
            "matches_model_choice": t.agrees,
            "features": crate::cost::records::features_json(&t.features),
        })).collect::<Vec<_>>(),
    })
}
