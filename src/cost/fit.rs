//! Fitting a profile's class coefficients to measured runs: non-negative least squares on relative error.
//!
//! Each sample is what a run did, class by class ([`crate::cost::class::ClassStats`]), and its measured seconds.
//! The model is linear in the features (per class: launches, bytes, ops, transcendentals), so the fit minimizes
//! `sum((predicted - measured)^2 / measured^2)` over coefficients between 0 and a physical bound ([`UPPER`]) by
//! cyclic coordinate descent, with a
//! light pull toward a prior (the starting coefficients) so that a feature no sample exercises keeps its prior
//! value. Deterministic: the same samples give the same coefficients.

use super::class::{ClassStats, N};
use super::Coefficients;

/// One measured run: its features and seconds.
#[derive(Clone, Debug)]
pub struct Sample {
    pub label: String,
    pub by_class: [ClassStats; N],
    pub seconds: f64,
}

const P: usize = N * 4;
/// The pull toward the prior, relative to each feature's own weight in the fit.
const RIDGE: f64 = 1e-9;
const SWEEPS: usize = 50_000;

/// The most each feature may cost, whatever the samples say (launch: 100 us; byte: 10 ns, 0.1 GB/s; op: 10 ns;
/// transcendental element: 25 ns, some 60 times a vectorized `expf`). A coefficient is a physical rate, and a
/// feature few samples exercise otherwise soaks up whatever those samples' other features leave unexplained: a fit
/// without these bounds priced a gather kernel's transcendental at 0.6 us, and predicted fcos 12 times too slow.
pub const UPPER: [f64; 4] = [1e-4, 1e-8, 1e-8, 2.5e-8];

/// Reweighting rounds: after the first least-squares fit, each sample is weighted by the inverse of its relative
/// error (at least [`FLOOR`]), which approaches the least absolute relative error: a few badly modelled runs (a
/// host fallback of unusual cost) then pull the fit less than squared error lets them.
const ROUNDS: usize = 6;
const FLOOR: f64 = 0.02;

/// The coefficients that best predict `samples` (relative error), starting from and pulled toward `prior`.
pub fn fit(samples: &[Sample], prior: &Coefficients) -> Coefficients {
    let rows: Vec<Vec<f64>> = samples
        .iter()
        .filter(|s| s.seconds > 0.0 && s.seconds.is_finite())
        .map(|s| s.by_class.iter().flat_map(|c| c.features()).map(|x| x / s.seconds).collect())
        .collect();
    let p: Vec<f64> = prior.iter().flatten().copied().collect();
    let mut t = p.clone();
    let mut weights = vec![1.0; rows.len()];
    for _ in 0..ROUNDS {
        t = solve(&rows, &weights, &p, t);
        for (w, x) in weights.iter_mut().zip(&rows) {
            let e = (x.iter().zip(&t).map(|(a, b)| a * b).sum::<f64>() - 1.0).abs();
            *w = 1.0 / e.max(FLOOR);
        }
    }
    let mut out = [[0.0; 4]; N];
    for (j, x) in t.into_iter().enumerate() {
        out[j / 4][j % 4] = x;
    }
    out
}

/// Weighted non-negative least squares of `rows . t = 1` by coordinate descent from `t`, pulled toward `p`.
fn solve(rows: &[Vec<f64>], weights: &[f64], p: &[f64], mut t: Vec<f64>) -> Vec<f64> {
    let mut g = vec![[0.0f64; P]; P];
    let mut h = [0.0f64; P];
    for (x, w) in rows.iter().zip(weights) {
        for j in 0..P {
            if x[j] == 0.0 {
                continue;
            }
            h[j] += w * x[j];
            for k in 0..P {
                g[j][k] += w * x[j] * x[k];
            }
        }
    }
    for _ in 0..SWEEPS {
        let mut moved = 0.0f64;
        for j in 0..P {
            if g[j][j] == 0.0 {
                continue;
            }
            let others: f64 = (0..P).filter(|&k| k != j).map(|k| g[j][k] * t[k]).sum();
            let d = g[j][j];
            let new = ((h[j] - others + RIDGE * d * p[j]) / (d * (1.0 + RIDGE))).clamp(0.0, UPPER[j % 4]);
            let scale = t[j].abs().max(new.abs()).max(1e-300);
            moved = moved.max((new - t[j]).abs() / scale);
            t[j] = new;
        }
        if moved < 1e-15 {
            break;
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cost::class::{ELEMENTWISE, MATMUL, RUN};
    use crate::cost::predict_classes;

    #[test]
    fn the_fit_recovers_known_coefficients_from_exact_samples() {
        let mut truth = [[0.0; 4]; N];
        truth[ELEMENTWISE] = [2e-6, 1e-10, 0.0, 0.0];
        truth[MATMUL] = [5e-6, 0.0, 3e-10, 0.0];
        truth[RUN] = [1e-5, 2e-10, 0.0, 0.0];
        let mut samples = Vec::new();
        for i in 0..12 {
            let mut by_class = [ClassStats::default(); N];
            let f = i as f64;
            by_class[ELEMENTWISE] =
                ClassStats { launches: 1.0 + f, bytes: 1e5 * (1.0 + (f * 7.0) % 5.0), ..Default::default() };
            by_class[MATMUL] =
                ClassStats { launches: (i % 3) as f64, ops: 1e6 * ((f * 3.0) % 4.0), ..Default::default() };
            by_class[RUN] = ClassStats { launches: 1.0, bytes: 1e4 * (1.0 + (f * 5.0) % 7.0), ..Default::default() };
            let seconds = predict_classes(&truth, &by_class);
            samples.push(Sample { label: format!("s{i}"), by_class, seconds });
        }
        // A prior 5 to 100 times off the truth on every exercised feature.
        let prior = [[1e-5, 1e-9, 1e-9, 1e-9]; N];
        let got = fit(&samples, &prior);
        for c in [ELEMENTWISE, MATMUL, RUN] {
            for f in 0..4 {
                let (a, b) = (got[c][f], truth[c][f]);
                if b == 0.0 {
                    // Unexercised features keep the prior; exercised ones that are zero in the truth fit to ~0.
                    continue;
                }
                assert!((a - b).abs() / b < 0.05, "class {c} feature {f}: fitted {a}, true {b}");
            }
        }
        // Every sample is predicted within 1%.
        for s in &samples {
            let p = predict_classes(&got, &s.by_class);
            assert!((p - s.seconds).abs() / s.seconds < 0.01, "{}: {p} vs {}", s.label, s.seconds);
        }
        // A class no sample exercises keeps its prior.
        assert_eq!(got[crate::cost::class::GATHER], prior[crate::cost::class::GATHER]);
    }

    #[test]
    fn a_feature_few_samples_exercise_cannot_soak_up_their_unexplained_time() {
        use crate::cost::class::GATHER;
        // Elementwise launches and bytes at known rates; one sample also runs a gather with a few transcendentals
        // and took 2 ms more than the rest explains (some cost the model has no feature for).
        let mut samples = Vec::new();
        for i in 0..10 {
            let mut by_class = [ClassStats::default(); N];
            let f = i as f64;
            by_class[ELEMENTWISE] = ClassStats { launches: 1.0 + f, bytes: 1e5 * (1.0 + f), ..Default::default() };
            let mut seconds = 1e-6 * (1.0 + f) + 1e-11 * 1e5 * (1.0 + f);
            if i == 3 {
                by_class[GATHER] = ClassStats { launches: 1.0, transcendentals: 4000.0, ..Default::default() };
                seconds += 2e-3;
            }
            samples.push(Sample { label: format!("s{i}"), by_class, seconds });
        }
        let got = fit(&samples, &[[1e-6, 1e-11, 1e-10, 0.0]; N]);
        for (c, row) in got.iter().enumerate() {
            for (f, x) in row.iter().enumerate() {
                assert!(*x >= 0.0 && *x <= UPPER[f], "class {c} feature {f}: {x}");
            }
        }
        // Unbounded, 4000 transcendentals would have to cost the 2 ms: 500 ns each.
        assert!(got[GATHER][3] <= 2.5e-8, "{}", got[GATHER][3]);
    }
}
