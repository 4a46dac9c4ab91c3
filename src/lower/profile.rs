//! A per-kernel profile: the timed steps of several profiled runs of a plan ([`super::exec::execute_profiled`]),
//! summed per run and site (a kernel launched in a loop counts once per iteration), then the median over runs, most
//! expensive first.

use std::collections::BTreeMap;

use egg::Id;

use super::exec::{Launched, Site};
use super::plan::Plan;

/// One site of a plan over the profiled runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ProfileRow {
    pub site: Site,
    /// Times it ran in one run (the same in every run of a deterministic plan; the largest seen).
    pub launches: usize,
    /// Median over runs of its summed time in a run.
    pub median_s: f64,
    /// Bytes it moved in one run (the largest seen).
    pub bytes: f64,
    /// What it computes.
    pub what: String,
}

/// The profile of `runs` (each the steps of one profiled run), sorted by median time, most first (ties in plan
/// order, so that everything but the times is deterministic).
pub fn summarize(plan: &Plan, runs: &[Vec<Launched>]) -> Vec<ProfileRow> {
    aggregate(runs)
        .into_iter()
        .map(|(site, launches, median_s, bytes)| ProfileRow {
            site,
            launches,
            median_s,
            bytes,
            what: describe(plan, site),
        })
        .collect()
}

/// Per site: launches and bytes per run (the largest seen) and the median over runs of its summed time, sorted by
/// that median, most first, ties by site.
fn aggregate(runs: &[Vec<Launched>]) -> Vec<(Site, usize, f64, f64)> {
    let mut per: BTreeMap<Site, Vec<(usize, f64, f64)>> = BTreeMap::new();
    for (r, run) in runs.iter().enumerate() {
        for l in run {
            let v = per.entry(l.site).or_insert_with(|| vec![(0, 0.0, 0.0); runs.len()]);
            let e = &mut v[r];
            *e = (e.0 + 1, e.1 + l.seconds, e.2 + l.bytes);
        }
    }
    let mut rows: Vec<(Site, usize, f64, f64)> = per
        .into_iter()
        .map(|(site, v)| {
            let launches = v.iter().map(|e| e.0).max().unwrap_or(0);
            let bytes = v.iter().map(|e| e.2).fold(0.0, f64::max);
            let mut times: Vec<f64> = v.iter().map(|e| e.1).collect();
            times.sort_by(f64::total_cmp);
            (site, launches, times[times.len() / 2], bytes)
        })
        .collect();
    rows.sort_by(|a, b| b.2.total_cmp(&a.2).then(a.0.cmp(&b.0)));
    rows
}

/// What a site computes, in the words of [`Plan::describe`].
pub fn describe(plan: &Plan, site: Site) -> String {
    match site {
        Site::Kernel(k) => plan.kernel_line(k),
        Site::Group(g) => {
            let members: Vec<String> = plan.groups[g].iter().map(|&m| plan.kernel_line(m)).collect();
            format!("group g{g}: {}", members.join("; "))
        }
        Site::Copy => "buffer copies by the executor (loop state, copies before writing in place)".into(),
        Site::Fallback(i) => {
            let ty = plan.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
            let shown = match &plan.term[Id::from(i)] {
                crate::ir::Node::Op(op, _) => op.to_string(),
                other => other.to_string(),
            };
            format!("${i} = {shown} {ty}: host fallback")
        }
    }
}

/// The profile as a text table: per site its median ms, share of the total, launches and MB per run, the rate it
/// streamed at, and what it computes.
pub fn table(rows: &[ProfileRow]) -> String {
    use std::fmt::Write;
    let total: f64 = rows.iter().map(|r| r.median_s).sum();
    let mut s = String::from("      ms  share  launches        MB    GB/s  what\n");
    for r in rows {
        let share = if total > 0.0 { 100.0 * r.median_s / total } else { 0.0 };
        let rate = if r.median_s > 0.0 { format!("{:.1}", r.bytes / r.median_s / 1e9) } else { "-".into() };
        let _ = writeln!(
            s,
            "{:8.3} {:5.1}% {:9} {:9.3} {:>7}  {}",
            r.median_s * 1e3,
            share,
            r.launches,
            r.bytes / 1e6,
            rate,
            r.what
        );
    }
    let _ = writeln!(s, "{:8.3} 100.0%  total of the medians", total * 1e3);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(site: Site, ms: f64, bytes: f64) -> Launched {
        Launched { site, seconds: ms / 1e3, bytes }
    }

    #[test]
    fn aggregate_sums_per_run_takes_the_median_and_sorts_by_time() {
        let runs = vec![
            // Kernel 1 launched twice in a run (a loop): its times and bytes add up.
            vec![step(Site::Kernel(1), 1.0, 10.0), step(Site::Kernel(1), 1.0, 10.0), step(Site::Kernel(0), 5.0, 4.0)],
            vec![step(Site::Kernel(1), 3.0, 10.0), step(Site::Kernel(1), 3.0, 10.0), step(Site::Kernel(0), 1.0, 4.0)],
            vec![step(Site::Kernel(1), 2.0, 10.0), step(Site::Kernel(1), 2.0, 10.0), step(Site::Kernel(0), 3.0, 4.0)],
            // A copy in one run only: 0 in the others, so its median is 0.
            vec![step(Site::Copy, 9.0, 8.0)],
        ];
        let rows = aggregate(&runs);
        let sites: Vec<Site> = rows.iter().map(|r| r.0).collect();
        assert_eq!(sites, vec![Site::Kernel(1), Site::Kernel(0), Site::Copy]);
        // Kernel 1: per-run sums 2, 6, 4, 0 -> median (upper) 4 ms; two launches and 20 bytes per run.
        assert_eq!((rows[0].1, rows[0].3), (2, 20.0));
        assert!((rows[0].2 - 4e-3).abs() < 1e-12, "{}", rows[0].2);
        assert!((rows[1].2 - 3e-3).abs() < 1e-12, "{}", rows[1].2);
        assert_eq!((rows[2].1, rows[2].2, rows[2].3), (1, 0.0, 8.0));
    }

    #[test]
    fn ties_keep_plan_order() {
        let runs = vec![vec![step(Site::Kernel(3), 1.0, 0.0), step(Site::Kernel(2), 1.0, 0.0)]];
        let sites: Vec<Site> = aggregate(&runs).iter().map(|r| r.0).collect();
        assert_eq!(sites, vec![Site::Kernel(2), Site::Kernel(3)]);
    }
}
