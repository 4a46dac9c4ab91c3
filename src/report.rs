//! Batch reports: `report.json` (the records), `report.md` (a table) and `report.html` (self-contained, no script:
//! a headline of geometric-mean speedups and launch ratios over each baseline, a table per program sorted by speedup
//! with a link to its plan, SVG charts of kernels and predicted time per program on a log axis that starts at the
//! smallest value, where optimization time goes per stage, and the failures with their messages).
//!
//! `report.json` schema: `{ "ok": N, "failed": N, "timed_out": N, "programs": [RECORD...] }`, a record per program
//! in input order: `program`, `status` (`ok`, `failed`, `timed out`), `error` (when not ok), and when ok:
//! `functional` and `optimized` term statistics (`nodes`, `loops`, `accesses`, `assigns`, `ifs`), `egraph`
//! (`nodes`, `classes`), `iterations`, `stop_reason`, `rules_fired` (name to count, Rust rewrites included),
//! `conflicts`, `extraction` (`chosen` and each candidate's `predicted_s`), and `plans` (`eager`,
//! `unfunctionalized`, `ours`: predicted `kernels`, `bytes`, `predicted_s`). Nothing in it depends on timing.

use std::fmt::Write;

use serde_json::Value;

use crate::batch::Timings;

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

fn num(v: &Value, path: &[&str]) -> f64 {
    let mut v = v;
    for p in path {
        v = &v[*p];
    }
    v.as_f64().unwrap_or(0.0)
}

/// The Markdown table of a batch.
pub fn markdown(records: &[Value]) -> String {
    let mut md = String::from(
        "| program | status | loops | accesses | assigns | e-graph nodes | stop | kernels eager / unfunc. / ours | predicted ms eager / ours |\n|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in records {
        let p = r["program"].as_str().unwrap_or("");
        let status = r["status"].as_str().unwrap_or("");
        if status != "ok" {
            let err = r["error"].as_str().unwrap_or("").lines().next().unwrap_or("").replace('|', "\\|");
            let _ = writeln!(md, "| {p} | {status}: {err} | | | | | | | |");
            continue;
        }
        let s = |a: &str, b: &str| num(r, &[a, b]) as u64;
        let _ = writeln!(
            md,
            "| {p} | ok | {} -> {} | {} -> {} | {} -> {} | {} | {} | {} / {} / {} | {:.3} / {:.3} |",
            s("functional", "loops"),
            s("optimized", "loops"),
            s("functional", "accesses"),
            s("optimized", "accesses"),
            s("functional", "assigns"),
            s("optimized", "assigns"),
            s("egraph", "nodes"),
            r["stop_reason"].as_str().unwrap_or(""),
            num(r, &["plans", "eager", "kernels"]),
            num(r, &["plans", "unfunctionalized", "kernels"]),
            num(r, &["plans", "ours", "kernels"]),
            num(r, &["plans", "eager", "predicted_s"]) * 1e3,
            num(r, &["plans", "ours", "predicted_s"]) * 1e3,
        );
    }
    md
}

const COLORS: [(&str, &str); 3] = [("eager", "#c44e52"), ("unfunctionalized", "#dd8452"), ("ours", "#4c72b0")];

/// A horizontal grouped bar chart (log scale) of one plan metric per program.
fn bars(records: &[&Value], metric: &str, unit: &str, scale: f64) -> String {
    let row = 12.0 * COLORS.len() as f64 + 8.0;
    let (left, width) = (330.0, 480.0);
    let height = 30.0 + row * records.len() as f64;
    let values: Vec<f64> = records
        .iter()
        .flat_map(|r| COLORS.iter().map(move |(p, _)| num(r, &["plans", p, metric]) * scale))
        .filter(|v| *v > 0.0)
        .collect();
    // The axis starts at half the smallest value, so that the smallest bar is still visible (a fixed start clamped
    // every program under it to 1 px).
    let max = values.iter().copied().fold(1e-12f64, f64::max);
    let min = values.iter().copied().fold(max, f64::min) / 2.0;
    let span = (max / min).log10().max(1e-9);
    let x = |v: f64| if v <= 0.0 { 0.0 } else { ((v / min).log10() / span * width).max(1.0) };
    let mut s = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{height}\" font-family=\"sans-serif\" font-size=\"11\">\n",
        left + width + 90.0
    );
    for (k, (p, c)) in COLORS.iter().enumerate() {
        let _ = writeln!(
            s,
            "<rect x=\"{}\" y=\"4\" width=\"10\" height=\"10\" fill=\"{c}\"/><text x=\"{}\" y=\"13\">{p}</text>",
            left + k as f64 * 130.0,
            left + k as f64 * 130.0 + 14.0
        );
    }
    for (i, r) in records.iter().enumerate() {
        let y = 24.0 + i as f64 * row;
        let name = r["program"].as_str().unwrap_or("").rsplit('/').next().unwrap_or("");
        let _ =
            writeln!(s, "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>", left - 6.0, y + row / 2.0, esc(name));
        for (k, (p, c)) in COLORS.iter().enumerate() {
            let v = num(r, &["plans", p, metric]) * scale;
            let yy = y + k as f64 * 12.0;
            let _ = writeln!(
                s,
                "<rect x=\"{left}\" y=\"{yy}\" width=\"{:.1}\" height=\"10\" fill=\"{c}\"><title>{p}: {v:.4} {unit}</title></rect><text x=\"{:.1}\" y=\"{}\">{}</text>",
                x(v),
                left + x(v) + 3.0,
                yy + 9.0,
                if v >= 100.0 || v == v.trunc() { format!("{v:.0}") } else { format!("{v:.3}") }
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

/// A stacked bar of where the optimizer's time went, per stage, summed over the batch.
fn stages(timings: &[Option<Timings>]) -> String {
    let mut t = Timings::default();
    for x in timings.iter().flatten() {
        t.functionalize += x.functionalize;
        t.saturate += x.saturate;
        t.plan += x.plan;
        t.render += x.render;
    }
    let parts = [
        ("functionalize", t.functionalize, "#55a868"),
        ("saturate + extract", t.saturate, "#8172b3"),
        ("plan (3 plans)", t.plan, "#937860"),
        ("render kernels", t.render, "#da8bc3"),
    ];
    let total: f64 = parts.iter().map(|p| p.1).sum::<f64>().max(1e-12);
    let mut s = String::from("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"820\" height=\"70\" font-family=\"sans-serif\" font-size=\"11\">\n");
    let mut x = 0.0;
    for (k, (name, v, c)) in parts.iter().enumerate() {
        let w = v / total * 800.0;
        let _ = writeln!(s, "<rect x=\"{x:.1}\" y=\"5\" width=\"{w:.1}\" height=\"24\" fill=\"{c}\"><title>{name}: {:.1} ms</title></rect>", v * 1e3);
        let _ = writeln!(s, "<rect x=\"{}\" y=\"40\" width=\"10\" height=\"10\" fill=\"{c}\"/><text x=\"{}\" y=\"49\">{name} {:.1} ms ({:.0}%)</text>", k * 200, k * 200 + 14, v * 1e3, v / total * 100.0);
        x += w;
    }
    s.push_str("</svg>\n");
    s
}

/// The self-contained HTML report (no scripts, no network).
/// `links` gives, per record, the program's output folder relative to the report (its plan, kernels and record).
pub fn html(records: &[Value], timings: &[Option<Timings>], links: &[Option<String>]) -> String {
    let rows: Vec<Row> = records
        .iter()
        .enumerate()
        .map(|(i, r)| (r, links.get(i).and_then(|l| l.as_deref()), timings.get(i).copied().flatten()))
        .filter(|(r, _, _)| r["status"] == "ok")
        .collect();
    let ok: Vec<&Value> = records.iter().filter(|r| r["status"] == "ok").collect();
    let failed: Vec<&Value> = records.iter().filter(|r| r["status"] != "ok").collect();
    let mut s = String::from(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>funcfuse report</title>\n",
    );
    s.push_str("<style>body{font-family:sans-serif;margin:2em;max-width:1000px}table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}.bad{color:#b00}.head{font-size:20px}td.n{text-align:right}</style></head><body>\n");
    let _ = writeln!(
        s,
        "<h1>funcfuse optimize</h1>\n<p>{} programs: {} ok, {} failed or timed out.</p>",
        records.len(),
        ok.len(),
        failed.len()
    );
    s.push_str(&headline(&ok));
    s.push_str(&table(&rows));
    s.push_str("<h2>Kernel launches per program (predicted, log scale)</h2>\n");
    s.push_str(&bars(&ok, "kernels", "launches", 1.0));
    s.push_str("<h2>Predicted time per program (ms, cost profile, log scale)</h2>\n");
    s.push_str(&bars(&ok, "predicted_s", "ms", 1e3));
    s.push_str("<h2>Where optimization time goes</h2>\n");
    s.push_str(&stages(timings));
    if !failed.is_empty() {
        s.push_str("<h2>Failures</h2>\n<table><tr><th>program</th><th>status</th><th>error</th></tr>\n");
        for r in failed {
            let _ = writeln!(
                s,
                "<tr><td>{}</td><td class=\"bad\">{}</td><td><pre>{}</pre></td></tr>",
                esc(r["program"].as_str().unwrap_or("")),
                esc(r["status"].as_str().unwrap_or("")),
                esc(r["error"].as_str().unwrap_or(""))
            );
        }
        s.push_str("</table>\n");
    }
    s.push_str("</body></html>\n");
    s
}

fn geomean(xs: impl Iterator<Item = f64>) -> Option<(f64, usize)> {
    let logs: Vec<f64> = xs.filter(|x| x.is_finite() && *x > 0.0).map(f64::ln).collect();
    (!logs.is_empty()).then(|| ((logs.iter().sum::<f64>() / logs.len() as f64).exp(), logs.len()))
}

/// Ours over a baseline for one record: `metric` of the baseline divided by ours (a speedup, or fewer launches).
fn ratio(r: &Value, baseline: &str, metric: &str) -> f64 {
    num(r, &["plans", baseline, metric]) / num(r, &["plans", "ours", metric])
}

/// The answer to "how much faster": geometric means over the programs that optimized, predicted (labelled so).
fn headline(ok: &[&Value]) -> String {
    let mut s = String::new();
    for baseline in ["eager", "unfunctionalized"] {
        let (Some((t, n)), Some((k, _))) = (
            geomean(ok.iter().map(|r| ratio(r, baseline, "predicted_s"))),
            geomean(ok.iter().map(|r| ratio(r, baseline, "kernels"))),
        ) else {
            continue;
        };
        let _ = writeln!(
            s,
            "<p class=\"head\">Ours vs {baseline}: <b>{t:.2}x</b> faster, {k:.2}x fewer kernel launches \
             (geometric means over {n} programs; times predicted by the cost profile, not measured: \
             <code>funcfuse compare --measure</code> runs them)</p>"
        );
    }
    s
}

/// A program's record, its output folder relative to the report, and how long it took to optimize.
type Row<'a> = (&'a Value, Option<&'a str>, Option<Timings>);

/// One row per program, sorted by predicted speedup over eager (largest first; ties by name).
fn table(ok: &[Row]) -> String {
    let mut rows: Vec<&Row> = ok.iter().collect();
    rows.sort_by(|a, b| {
        ratio(b.0, "eager", "predicted_s")
            .total_cmp(&ratio(a.0, "eager", "predicted_s"))
            .then_with(|| a.0["program"].as_str().cmp(&b.0["program"].as_str()))
    });
    let mut s = String::from(
        "<h2>Programs</h2>\n<p>Sorted by predicted speedup over eager. Times and bytes are the cost profile's \
         predictions.</p>\n<table><tr><th>program</th><th>kernels eager / unfunc. / ours</th><th>MB eager / ours</th>\
         <th>predicted ms eager / ours</th><th>speedup vs eager</th><th>vs unfunc.</th><th>rules fired</th>\
         <th>optimized in ms</th></tr>\n",
    );
    for (r, link, t) in rows {
        let name = esc(r["program"].as_str().unwrap_or(""));
        let cell = match link {
            Some(l) => format!("<a href=\"{}/plan.txt\">{name}</a>", esc(l)),
            None => name,
        };
        let mut fired: Vec<(String, u64)> = r["rules_fired"]
            .as_object()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_u64().unwrap_or(0))).collect())
            .unwrap_or_default();
        fired.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let fired: Vec<String> = fired.iter().take(4).map(|(k, n)| format!("{} x{n}", esc(k))).collect();
        let more = r["rules_fired"].as_object().map_or(0, |m| m.len()).saturating_sub(4);
        let k = |p: &str| num(r, &["plans", p, "kernels"]);
        let _ = writeln!(
            s,
            "<tr><td>{cell}</td><td class=\"n\">{} / {} / {}</td><td class=\"n\">{:.3} / {:.3}</td>\
             <td class=\"n\">{:.4} / {:.4}</td><td class=\"n\">{:.2}x</td><td class=\"n\">{:.2}x</td><td>{}{}</td>\
             <td class=\"n\">{}</td></tr>",
            k("eager"),
            k("unfunctionalized"),
            k("ours"),
            num(r, &["plans", "eager", "bytes"]) / 1e6,
            num(r, &["plans", "ours", "bytes"]) / 1e6,
            num(r, &["plans", "eager", "predicted_s"]) * 1e3,
            num(r, &["plans", "ours", "predicted_s"]) * 1e3,
            ratio(r, "eager", "predicted_s"),
            ratio(r, "unfunctionalized", "predicted_s"),
            fired.join(", "),
            if more > 0 { format!(", +{more} more") } else { String::new() },
            t.map_or(String::new(), |t| format!("{:.1}", t.total() * 1e3)),
        );
    }
    s.push_str("</table>\n");
    s
}
