//! What a plan is predicted to do without running it: the same figures a run counts ([`Stats`]: launches, copies,
//! fallbacks, bytes, ops, split by kernel class), derived from the plan alone, and the time the profile predicts for
//! them. Every command prints these (`explain`, `optimize`'s reports, `compare`'s predicted columns, the Python
//! package), and the planner and extraction decide by them, so one plan has one set of figures everywhere.
//!
//! The estimate follows the executor ([`crate::lower::exec`]) step by step: each kernel once per time its node
//! runs (a kernel group launches once, for its first member), a copy before a write into a buffer that is not the
//! writer's own, the loop-state copies the executor makes, host fallbacks (operands downloaded, the result
//! uploaded), and the run's input uploads and output downloads. Where a run's path is known only at run time, it
//! assumes: a loop with literal bounds runs its trip count, one with computed bounds or a `while` 16 times, and each
//! arm of an `if` half the time. A run that takes other paths counts other figures; `compare` says so beside them.

use super::exec::{copies_loop_state, shares_inputs, written_base, Stats};
use super::{How, Plan};
use crate::cost::class::{self, ClassStats};
use crate::cost::Profile;
use crate::ir::Node;

/// The trips assumed for a `while` or a loop whose bounds are computed.
pub const ASSUMED_TRIPS: f64 = 16.0;

/// What a plan is predicted to do, without running it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Estimate {
    /// Kernel launches (copies and host fallbacks included), weighted by how often each runs.
    pub launches: f64,
    pub bytes: f64,
    pub seconds: f64,
    /// The predicted work, as a run counts it ([`Stats::launches`] and the other counts rounded).
    pub stats: Stats,
}

/// The profile's three planning figures (`launch_s`, `bytes_per_s`, `ops_per_s`) applied per kernel: its launch
/// plus the larger of its bytes over the bandwidth and its ops over the op rate, copies before in-place writes and
/// host fallbacks included, times how often it runs ([`run_counts`]). What decisions are made by when a profile has
/// no class coefficients ([`decision_cost`]).
pub fn planning_cost(plan: &Plan, profile: &Profile) -> f64 {
    let times = run_counts(plan);
    let mut seconds = 0.0;
    for (i, how) in plan.how.iter().enumerate() {
        let m = times[i];
        if m == 0.0 {
            continue;
        }
        let size = |id: egg::Id| plan.tensor(id).map_or(0, |(d, s)| d.size() * s.iter().product::<usize>()) as f64;
        let one = match how {
            How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                let (bytes, ops) = plan.traffic(*k);
                let copy = match how {
                    How::CopyInPlace(_) => profile.launch_s + 2.0 * size(egg::Id::from(i)) / profile.bytes_per_s,
                    _ => 0.0,
                };
                let launch = if launches(plan, *k) { profile.launch_s } else { 0.0 };
                launch + (bytes / profile.bytes_per_s).max(ops / profile.ops_per_s) + copy
            }
            How::Fallback if sort_counted_by_sibling(plan, egg::Id::from(i)) => 0.0,
            How::Fallback => profile.launch_s + 4.0 * size(egg::Id::from(i)) / profile.bytes_per_s,
            _ => 0.0,
        };
        seconds += m * one;
    }
    seconds
}

/// Whether `id` is a host sort whose sibling (the other output of the same sort) is counted instead: the one with
/// the smaller id counts both, as the run computes them at once ([`super::sorts`]).
fn sort_counted_by_sibling(plan: &Plan, id: egg::Id) -> bool {
    plan.host_sorts.get(&id).and_then(|s| s.sibling).is_some_and(|s| s < id)
}

/// What the planner and extraction decide by: the plan's predicted time ([`plan_estimate`], the figure every command
/// prints) where the profile has class coefficients, as the shipped and calibrated profiles do; else, for a profile
/// of three numbers only, [`planning_cost`], which prices each kernel by the larger of its bytes and its ops rather
/// than the whole plan's. So with a class profile, the cost `explain` lists for extraction's chosen candidate is the
/// time it predicts for our plan.
pub fn decision_cost(plan: &Plan, profile: &Profile) -> f64 {
    if profile.classes.is_some() {
        plan_estimate(plan, profile).seconds
    } else {
        planning_cost(plan, profile)
    }
}

/// The name of what [`decision_cost`] gives for `profile`, as `explain` labels it.
pub fn decision_label(profile: &Profile) -> &'static str {
    if profile.classes.is_some() {
        "predicted time"
    } else {
        "planning cost"
    }
}

/// The plan's predicted figures: [`plan_stats`], priced by `profile` ([`Profile::predict`]), as a run's are.
pub fn plan_estimate(plan: &Plan, profile: &Profile) -> Estimate {
    let (stats, launches) = plan_stats(plan);
    Estimate { launches, bytes: stats.bytes, seconds: profile.predict(&stats), stats }
}

/// How often each node of a plan's term runs (indexed by node): the most any path from the root asks for, with loop
/// trip counts where bounds are literals, [`ASSUMED_TRIPS`] for a `while` or computed bounds, half for each arm of
/// an `if`; nodes outside loops run at most once, and 0 means never reached. A kernel's node reaches what its
/// launch reads (its buffers, parameters, index checks, the base it writes in place and the readers that run
/// first), not every child in the term: a child fused into it is not run by the host, and one whose value it never
/// loads (a write of no elements) is not run at all.
pub fn run_counts(plan: &Plan) -> Vec<f64> {
    let term = &plan.term;
    let n = term.as_ref().len();
    let mut times = vec![0.0f64; n];
    let dep = &plan.dependent;
    let mut stack = vec![(term.root(), 1.0f64)];
    while let Some((id, m)) = stack.pop() {
        let i = usize::from(id);
        let m = if dep[i] { m } else { m.min(1.0) };
        if times[i] >= m {
            continue;
        }
        times[i] = m;
        match &term[id] {
            Node::Loop([a, b, s, init, body]) => {
                let trips = trips(plan, *a, *b, *s);
                stack.extend([(*a, m), (*b, m), (*s, m), (*init, m), (*body, m * trips)]);
            }
            Node::While([init, cond, body]) => {
                stack.extend([(*init, m), (*cond, m * ASSUMED_TRIPS), (*body, m * ASSUMED_TRIPS)])
            }
            Node::If([c, a, b]) => stack.extend([(*c, m), (*a, m * 0.5), (*b, m * 0.5)]),
            _ => stack.extend(reads(plan, id).into_iter().map(|c| (c, m))),
        }
    }
    times
}

/// The nodes the executor evaluates to compute node `id` (see [`run_counts`]).
fn reads(plan: &Plan, id: egg::Id) -> Vec<egg::Id> {
    use egg::Language;
    match plan.how[usize::from(id)] {
        How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
            let l = &plan.launches[k];
            let mut r: Vec<egg::Id> = l.args.iter().chain(&l.params).copied().collect();
            r.extend(l.checks.iter().map(|c| c.node));
            r.extend(plan.before.get(&id).into_iter().flatten());
            if !matches!(plan.how[usize::from(id)], How::Kernel(_)) {
                r.extend(written_base(&plan.term, id));
            }
            r
        }
        _ => plan.term[id].children().to_vec(),
    }
}

/// A `for` loop's trip count where its bounds are literals, else [`ASSUMED_TRIPS`].
fn trips(plan: &Plan, a: egg::Id, b: egg::Id, s: egg::Id) -> f64 {
    let lit = |x: egg::Id| match plan.term[x] {
        Node::Int(v) => Some(v),
        _ => None,
    };
    match (lit(a), lit(b), lit(s)) {
        (Some(a), Some(b), Some(s)) if s > 0 => ((b as f64 - a as f64 + s as f64 - 1.0) / s as f64).floor().max(0.0),
        (Some(a), Some(b), Some(s)) if s < 0 => ((a as f64 - b as f64 - s as f64 - 1.0) / -s as f64).floor().max(0.0),
        _ => ASSUMED_TRIPS,
    }
}

/// The work a run of `plan` is predicted to count ([`Stats`], with run counts from [`run_counts`], so fractional
/// where an `if` or an unknown trip count is assumed), and its launches unrounded.
pub fn plan_stats(plan: &Plan) -> (Stats, f64) {
    let times = run_counts(plan);
    let mut w = Work::default();
    let (share, copy_state) = (shares_inputs(plan), copies_loop_state(plan));
    let numel = |id: egg::Id| plan.tensor(id).map_or(0, |(d, s)| d.size() * s.iter().product::<usize>()) as f64;
    for (i, how) in plan.how.iter().enumerate() {
        let m = times[i];
        if m == 0.0 {
            continue;
        }
        let id = egg::Id::from(i);
        match how {
            How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                if let (How::CopyInPlace(_), Some(base)) = (how, written_base(&plan.term, id)) {
                    w.copy(m, numel(base));
                }
                let (bytes, ops) = plan.traffic(*k);
                let super::class::Work { class: c, transcendentals: trans, .. } = plan.class_of(*k);
                let l = if launches(plan, *k) { m } else { 0.0 };
                w.add(c, l, m * bytes, m * ops, m * trans);
                w.stats.flops += m * ops;
            }
            How::Fallback if sort_counted_by_sibling(plan, id) => {}
            How::Fallback => {
                use egg::Language;
                let operands: f64 = plan.term[id].children().iter().map(|&c| numel(c)).sum();
                // A host sort writes its sibling's output too (values and indices from one sort).
                let sibling = plan.host_sorts.get(&id).and_then(|s| s.sibling);
                let bytes = operands + numel(id) + sibling.map_or(0.0, &numel);
                w.add(class::FALLBACK, m, m * bytes, 0.0, 0.0);
                w.fallbacks += m;
            }
            How::Input if !share && matches!(plan.term[id], Node::Input(_)) => {
                w.add(class::RUN, 0.0, numel(id), 0.0, 0.0);
            }
            _ => {}
        }
        if copy_state {
            loop_copies(plan, id, m, &times, &mut w, numel);
        }
    }
    // The run itself: its fixed cost and the outputs downloaded.
    w.by_class_launch(class::RUN, 1.0);
    if let Node::Tuple(items) = &plan.term[plan.term.root()] {
        for &o in items.iter() {
            w.add(class::RUN, 0.0, numel(o), 0.0, 0.0);
        }
    }
    let launches = w.launches;
    let mut stats = w.stats;
    stats.launches = launches.round() as usize;
    stats.copies = w.copies.round() as usize;
    stats.fallbacks = w.fallbacks.round() as usize;
    (stats, launches)
}

/// Whether kernel `k` launches: a kernel group launches once, for its first member.
fn launches(plan: &Plan, k: usize) -> bool {
    plan.group_of.get(k).copied().flatten().is_none_or(|g| plan.groups[g][0] == k)
}

/// The loop-state copies of loop node `id` (run `m` times), where the plan's executor copies loop state: every
/// tensor of the entry state once per run of the loop, and every tensor of the body's result that the body does not
/// compute (it passes an outer value along) or that it yields twice, once per trip.
fn loop_copies(plan: &Plan, id: egg::Id, m: f64, times: &[f64], w: &mut Work, numel: impl Fn(egg::Id) -> f64) {
    let (init, body) = match plan.term[id] {
        Node::Loop([_, _, _, init, body]) | Node::While([init, _, body]) => (init, body),
        _ => return,
    };
    if let Node::Tuple(items) = &plan.term[init] {
        for &x in items.iter() {
            w.copy(m, numel(x));
        }
    }
    if let Node::Tuple(items) = &plan.term[body] {
        let per_trip = times[usize::from(body)];
        for (j, &x) in items.iter().enumerate() {
            let twice = items[..j].contains(&x);
            if twice || !plan.dependent[usize::from(x)] {
                w.copy(per_trip, numel(x));
            }
        }
    }
}

/// Fractional counts while summing (run counts are fractional under assumptions).
#[derive(Default)]
struct Work {
    stats: Stats,
    launches: f64,
    copies: f64,
    fallbacks: f64,
}

impl Work {
    fn add(&mut self, c: usize, launches: f64, bytes: f64, ops: f64, transcendentals: f64) {
        self.by_class_launch(c, launches);
        if c != class::RUN {
            self.launches += launches;
            self.stats.bytes += bytes;
        }
        let s: &mut ClassStats = &mut self.stats.by_class[c];
        s.bytes += bytes;
        s.ops += ops;
        s.transcendentals += transcendentals;
    }

    fn by_class_launch(&mut self, c: usize, launches: f64) {
        self.stats.by_class[c].launches += launches;
    }

    /// A buffer copy of `bytes` (read and written), `m` times.
    fn copy(&mut self, m: f64, bytes: f64) {
        if bytes > 0.0 {
            self.add(class::COPY, m, m * 2.0 * bytes, 0.0, 0.0);
            self.copies += m;
        }
    }
}
