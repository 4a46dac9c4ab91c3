//! Cost profiles from the command line (issue #17): old and new profiles load, bad ones are clear errors, and
//! `calibrate --from-records` fits to measurements `compare --measure` recorded.

mod common;

use common::Outcome;

fn funcfuse(args: &[&str]) -> Outcome {
    common::run_binary(common::binary().args(args))
}

const PROG: &str = "corpus/micro/loops.py::shift_rows";

#[test]
fn profiles_old_new_and_bad_load_or_say_why() {
    let dir = common::scratch("cost_cli", "profiles");
    let explain = |name: &str, text: &str| {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        funcfuse(&["explain", PROG, "--costs", p.to_str().unwrap()])
    };
    // A version-1 profile (three numbers, no classes) still loads.
    let o = explain("v1.json", r#"{"backend": "c", "launch_s": 1e-6, "bytes_per_s": 1e9, "ops_per_s": 1e9}"#);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // A version-2 profile with classes (a class left out takes the three numbers) loads.
    let o = explain(
        "v2.json",
        r#"{"version": 2, "backend": "c", "launch_s": 1e-6, "bytes_per_s": 1e9, "ops_per_s": 1e9,
            "classes": {"elementwise": {"launch_s": 1e-6, "s_per_byte": 1e-10}}, "info": {"measured": false}}"#,
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    for (name, text, want) in [
        ("notjson.json", "{", "a cost profile must be JSON"),
        ("array.json", "[1]", "must be a JSON object"),
        ("newer.json", r#"{"version": 9, "launch_s": 1, "bytes_per_s": 1, "ops_per_s": 1}"#, "version 9 is newer"),
        (
            "class.json",
            r#"{"launch_s": 1, "bytes_per_s": 1, "ops_per_s": 1, "classes": {"warp": {}}}"#,
            "unknown class `warp`",
        ),
        (
            "field.json",
            r#"{"launch_s": 1, "bytes_per_s": 1, "ops_per_s": 1, "classes": {"matmul": {"flops": 1}}}"#,
            "unknown field `flops`",
        ),
        (
            "negative.json",
            r#"{"launch_s": 1, "bytes_per_s": 1, "ops_per_s": 1, "classes": {"matmul": {"launch_s": -1}}}"#,
            "`classes.matmul.launch_s` must be a non-negative number",
        ),
        ("missing.json", r#"{"launch_s": 1, "ops_per_s": 1}"#, "needs a positive `bytes_per_s`"),
    ] {
        let o = explain(name, text);
        assert_eq!(o.code, 1, "{name}: {}", o.stderr);
        assert!(o.stderr.contains(name) && o.stderr.contains(want), "{name}: {:?} lacks {want:?}", o.stderr);
    }
}

#[test]
fn calibrate_from_records_fits_compare_measurements_and_rejects_bad_directories() {
    let dir = common::scratch("cost_cli", "calibrate");
    let out = dir.join("profile.json");
    // A directory that is missing, or holds no measured plans, is a usage error before anything is measured.
    let empty = dir.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    for d in [dir.join("missing"), empty] {
        let o = funcfuse(&["calibrate", "--out", out.to_str().unwrap(), "--from-records", d.to_str().unwrap()]);
        assert_eq!(o.code, 2, "{}", o.stderr);
        assert!(o.stderr.contains(d.to_str().unwrap()), "{}", o.stderr);
        assert!(!out.exists());
    }
    // compare --measure records each plan's class features beside its measured time ...
    let cmp = dir.join("cmp");
    let o = funcfuse(&["compare", PROG, "--measure", "--runs", "2", "--out", cmp.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(cmp.join("compare.json")).unwrap()).unwrap();
    let text = v.to_string();
    assert!(text.contains("\"features\"") && text.contains("\"run\""), "{text}");
    // ... which calibrate fits to, with the calibration kernels: a version-2 profile with every class.
    let o = funcfuse(&[
        "calibrate",
        "--out",
        out.to_str().unwrap(),
        "--from-records",
        cmp.to_str().unwrap(),
        "--runs",
        "1",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(p["version"], 2);
    for c in funcfuse::cost::class::CLASSES {
        assert!(p["classes"][c]["launch_s"].is_number(), "class {c} missing: {p}");
    }
    let sources = p["info"]["sources"].to_string();
    assert!(sources.contains("(3 records)"), "{sources}");
    assert!(p["info"]["samples"].as_u64().unwrap() > 3, "{p}");
    // The written profile loads and predicts.
    let o = funcfuse(&["explain", PROG, "--costs", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn optimize_autotune_measures_candidates_keeps_the_fastest_and_records_them() {
    let dir = common::scratch("cost_cli", "autotune");
    let prog = "corpus/workloads/lstm.py::lstm";
    let read = |out: &std::path::Path| -> serde_json::Value {
        let text = std::fs::read_to_string(out.join("lstm/lstm/record.json")).unwrap();
        serde_json::from_str(&text).unwrap()
    };
    let plain = dir.join("plain");
    let o = funcfuse(&["optimize", prog, "--out", plain.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = read(&plain);
    assert!(r.get("autotune").is_none(), "autotuning is off by default: {r}");
    let tuned = dir.join("tuned");
    let o = funcfuse(&["optimize", prog, "--autotune", "3", "--out", tuned.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let r = read(&tuned);
    let a = &r["autotune"];
    let tried = a["tried"].as_array().unwrap_or_else(|| panic!("no tried candidates: {r}"));
    assert!(!tried.is_empty() && tried.len() <= 3, "{a}");
    // The model's choice is the best predicted, so it is tried first; every tried plan has both times.
    assert_eq!(tried[0]["candidate"], a["model_choice"], "{a}");
    assert_eq!(a["model_choice"], r_plain_choice(&read(&plain)), "{a}");
    for t in tried {
        assert!(t["predicted_s"].as_f64().unwrap() > 0.0 && t["measured_s"].as_f64().unwrap() > 0.0, "{t}");
        assert!(t["features"].is_object(), "{t}");
    }
    // The kept candidate is the fastest measured one that agrees, and extraction's record says so.
    let fastest = tried
        .iter()
        .filter(|t| t["matches_model_choice"] == true)
        .min_by(|x, y| x["measured_s"].as_f64().unwrap().total_cmp(&y["measured_s"].as_f64().unwrap()))
        .unwrap();
    assert_eq!(a["chosen"], fastest["candidate"], "{a}");
    assert_eq!(r["extraction"]["chosen"], a["chosen"], "{r}");
    // The records feed calibration.
    let o = funcfuse(&[
        "calibrate",
        "--out",
        dir.join("p.json").to_str().unwrap(),
        "--from-records",
        tuned.to_str().unwrap(),
        "--runs",
        "1",
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let p: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("p.json")).unwrap()).unwrap();
    let want = format!("({} records)", tried.len());
    assert!(p["info"]["sources"].to_string().contains(&want), "{}", p["info"]);
}

fn r_plain_choice(r: &serde_json::Value) -> serde_json::Value {
    r["extraction"]["chosen"].clone()
}

#[test]
fn compare_autotune_records_the_tried_candidates() {
    let dir = common::scratch("cost_cli", "compare_autotune");
    let out = dir.join("cmp");
    let o = funcfuse(&["compare", PROG, "--autotune", "2", "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(o.stdout.contains("autotune: kept `"), "{}", o.stdout);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let a = &v["programs"][0]["autotune"];
    let tried = a["tried"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert!(!tried.is_empty() && tried.len() <= 2, "{a}");
    assert!(tried.iter().any(|t| t["candidate"] == a["chosen"]), "{a}");
    // Without the flag there is no autotune entry.
    let o = funcfuse(&["compare", PROG, "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    assert!(v["programs"][0].get("autotune").is_none(), "{v}");
}

/// Issue #20: one program, one set of figures. `explain`, `compare` and `optimize`'s report print the same
/// predicted launches, bytes and time for each plan (all three take them from `lower::estimate::plan_estimate`), and where a
/// run launches otherwise `compare` says so beside the prediction.
#[test]
fn explain_compare_and_the_report_print_one_set_of_figures() {
    let dir = common::scratch("cost_cli", "one_set");
    let explained = funcfuse(&["explain", PROG]);
    assert_eq!(explained.code, 0, "{}", explained.stderr);
    // `    eager     33 launches      0.647 MB    0.0452 ms  (...)`
    let from_explain: Vec<(String, f64, f64, f64)> = explained
        .stdout
        .lines()
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() > 7 && w[2] == "launches" && w[4] == "MB" && w[6] == "ms")
                .then(|| (w[0].to_string(), w[1].parse().unwrap(), w[3].parse().unwrap(), w[5].parse().unwrap()))
        })
        .collect();
    let names: Vec<&str> = from_explain.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(names, ["eager", "unfunctionalized", "ours"], "{}", explained.stdout);
    let out = dir.join("compare");
    let compared = funcfuse(&["compare", PROG, "--out", out.to_str().unwrap()]);
    assert_eq!(compared.code, 0, "{}{}", compared.stdout, compared.stderr);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("compare.json")).unwrap()).unwrap();
    let rows = json["programs"][0]["plans"].as_array().unwrap();
    let report_dir = dir.join("optimize");
    let optimized = funcfuse(&["optimize", "corpus/micro/loops.py", "--out", report_dir.to_str().unwrap()]);
    assert_eq!(optimized.code, 0, "{}{}", optimized.stdout, optimized.stderr);
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report_dir.join("report.json")).unwrap()).unwrap();
    let record = report["programs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["program"].as_str().is_some_and(|p| p.ends_with("::shift_rows")))
        .unwrap_or_else(|| panic!("shift_rows in report.json: {report}"));
    for (name, launches, mb, ms) in &from_explain {
        let row = rows.iter().find(|r| r["plan"] == name.as_str()).unwrap();
        assert_eq!(row["kernels"].as_f64().unwrap(), *launches, "{name}: compare's kernels against explain's");
        assert_eq!(record["plans"][name]["kernels"].as_f64().unwrap(), *launches, "{name}: the report's kernels");
        let close = |a: f64, b: f64, digits: f64| (a - b).abs() <= 0.5 * 10f64.powf(-digits) + 1e-12;
        assert!(close(row["bytes"].as_f64().unwrap() / 1e6, *mb, 3.0), "{name}: bytes {row}");
        assert!(close(row["predicted_s"].as_f64().unwrap() * 1e3, *ms, 4.0), "{name}: time {row} vs {ms} ms");
        let reported = record["plans"][name]["predicted_s"].as_f64().unwrap();
        assert_eq!(reported, row["predicted_s"].as_f64().unwrap(), "{name}: the report's time against compare's");
        // This loop's bounds are literals: its run launched what was predicted.
        assert_eq!(row["run"]["kernels"].as_f64().unwrap(), *launches, "{name}: {row}");
    }
    // A `while` whose trips depend on the data: the run's launches are given beside the prediction, labelled.
    let out = dir.join("while");
    let o = funcfuse(&["compare", "corpus/micro/python_features.py::while_break", "--out", out.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}{}", o.stdout, o.stderr);
    assert!(o.stdout.contains("predicted (this run: "), "{}", o.stdout);
}

/// `run --costs FILE` extracts and plans by that profile, as `optimize` does: where a launch costs a millisecond the
/// plan launches fewer kernels than where it costs a nanosecond, both plans give the reference engine's outputs, and
/// a profile that does not load is an error before anything runs (the reference engine does not read it).
#[test]
fn run_plans_by_the_costs_profile() {
    let dir = common::scratch("cost_cli", "run_costs");
    let prog = "corpus/workloads/attention.py::attention";
    let reference = dir.join("reference");
    let o = funcfuse(&["run", prog, "--engine", "reference", "--output", reference.to_str().unwrap()]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let want = funcfuse::io::read_npy(&reference.join("return.npy")).unwrap();
    let launches = |launch_s: &str| -> usize {
        let p = dir.join(format!("launch-{launch_s}.json"));
        let text = format!(r#"{{"backend": "c", "launch_s": {launch_s}, "bytes_per_s": 1e10, "ops_per_s": 1e10}}"#);
        std::fs::write(&p, text).unwrap();
        let out = dir.join(format!("out-{launch_s}"));
        let o = funcfuse(&["run", prog, "--costs", p.to_str().unwrap(), "--output", out.to_str().unwrap(), "-v"]);
        assert_eq!(o.code, 0, "{}", o.stderr);
        let got = funcfuse::io::read_npy(&out.join("return.npy")).unwrap();
        funcfuse::tensor::compare_close("return", &got, &want).unwrap();
        let line =
            o.stderr.lines().find(|l| l.starts_with("[funcfuse run] ")).unwrap_or_else(|| panic!("{}", o.stderr));
        line["[funcfuse run] ".len()..].split(' ').next().unwrap().parse().unwrap()
    };
    let (slow, fast) = (launches("1e-3"), launches("1e-9"));
    assert!(slow < fast, "a costly launch should give fewer launches: {slow} vs {fast}");
    let missing = dir.join("missing.json");
    let out = dir.join("out-missing");
    let o = funcfuse(&["run", prog, "--costs", missing.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert_eq!(o.code, 1, "{}", o.stderr);
    assert!(o.stderr.contains("missing.json") && !out.exists(), "{}", o.stderr);
    let o = funcfuse(&[
        "run",
        prog,
        "--engine",
        "reference",
        "--costs",
        missing.to_str().unwrap(),
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
}

#[test]
fn explain_reports_the_search_and_measures_every_candidate() {
    let o = funcfuse(&["explain", "corpus/real/rnn.py::fastrnns_premul_lstm", "--measure", "2"]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    // The search over the e-graph found a cheaper choice than the fixed extractors' and extraction kept it.
    assert!(o.stdout.contains("extraction: chose `search` by predicted time"), "{}", o.stdout);
    let search = o.stdout.lines().find(|l| l.trim_start().starts_with("search: priced ")).expect(&o.stdout);
    let priced: usize = search.split_whitespace().nth(2).unwrap().parse().unwrap();
    assert!(priced >= 1 && !search.contains("kept 0 cheaper"), "{search}");
    // Every distinct candidate ran; each line has its predicted time, its run's prediction and a positive measured time.
    let start = o.stdout.find("candidates measured on the C backend").expect(&o.stdout);
    let measured: Vec<&str> = o.stdout[start..].lines().skip(1).filter(|l| l.contains(" measured ")).collect();
    assert!(measured.len() >= 2 && measured[0].trim_start().starts_with("search "), "{}", &o.stdout[start..]);
    for line in &measured {
        let ms: f64 = line.split("measured ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(ms > 0.0 && !line.contains("differ"), "{line}");
    }
}
