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
