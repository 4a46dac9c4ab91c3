//! The e-graph over functional terms: its analysis types every class as `verify` types the term, and a union of
//! classes of different types is recorded, never a panic.

mod common;

use std::collections::BTreeMap;

use funcfuse::functionalize::functionalize;
use funcfuse::ir::{verify, Ty};
use funcfuse::rewrite::{TermAnalysis, TermGraph};

#[test]
fn the_analysis_types_every_corpus_program_as_verify_does() {
    let mut checked = 0;
    for p in common::corpus_programs() {
        let module = common::load(&p);
        let f = functionalize(&module, &p.func, &BTreeMap::new()).unwrap_or_else(|d| panic!("{d}"));
        let want = verify(&f.term, &f.inputs).unwrap();
        let mut g = TermGraph::new(TermAnalysis::new(&f.inputs));
        let root = g.add_expr(&f.term);
        g.rebuild();
        assert_eq!(g[root].data.ty.as_ref(), Some(&want), "{}", p.label());
        assert!(g.analysis.conflicts.is_empty(), "{}: {:?}", p.label(), g.analysis.conflicts);
        checked += 1;
    }
    assert!(checked >= 80, "only {checked} programs");
}

#[test]
fn a_union_of_different_types_is_recorded() {
    let inputs = vec![
        ("a".to_string(), funcfuse::tensor::DType::F32, vec![4]),
        ("b".to_string(), funcfuse::tensor::DType::F32, vec![3]),
    ];
    let mut g = TermGraph::new(TermAnalysis::new(&inputs));
    let a = g.add_expr(&"(exp (input %a))".parse().unwrap());
    let b = g.add_expr(&"(exp (input %b))".parse().unwrap());
    assert_eq!(g[a].data.ty, Some(Ty::Tensor(funcfuse::tensor::DType::F32, vec![4])));
    g.union(a, b);
    g.rebuild();
    assert_eq!(g.analysis.conflicts.len(), 1, "{:?}", g.analysis.conflicts);
    assert!(g.analysis.conflicts[0].contains("f32[4]") && g.analysis.conflicts[0].contains("f32[3]"));
}

use funcfuse::rewrite::rules::{load_dir, parse_rules};

#[test]
fn the_shipped_rules_load() {
    let defs = load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")).unwrap();
    assert!(defs.len() >= 4);
    funcfuse::rewrite::rules::to_rewrites(&defs).unwrap();
    // The rules compiled into the binary are exactly those of the directory.
    let names = |d: &[funcfuse::rewrite::rules::RuleDef]| d.iter().map(|r| r.name.clone()).collect::<Vec<_>>();
    assert_eq!(names(&funcfuse::rewrite::rules::shipped().unwrap()), names(&defs), "update rules::SHIPPED");
}

#[test]
fn bad_rule_files_are_reported_with_file_and_line() {
    let cases = [
        ("# id\nviews/a (access ?x ?v) => ?x\n", "views.rules:2: expected `topic/name: LHS => RHS`"),
        ("# id\nviews/a: (acess ?x ?v) => ?x\n", "views.rules:2: cannot parse `(acess ?x ?v)`"),
        ("# id\nviews/a: (access ?x ?v) => ?x if frobnicate(?x)\n", "views.rules:2: unknown predicate `frobnicate`"),
        ("# id\nviews/a: (access ?x ?v) => ?y\n", "views.rules:2: variable `?y` is not bound by the left-hand side"),
        ("# id\nviews/a: (access ?x ?v) => ?x if fills(?x, ?z)\n", "views.rules:2: variable `?z` is not bound"),
        ("# id\nscatter/a: (access ?x ?v) => ?x\n", "views.rules:2: rule name `scatter/a` must be `views/NAME`"),
        ("views/a: (access ?x ?v) => ?x\n", "views.rules:1: rule `views/a` needs a comment line"),
        ("# id\nviews/a: (access ?x ?v) -> ?x\n", "views.rules:2: expected `=>` or `<=>`, found `->`"),
        ("# id\nviews/a: (access ?x ?v => ?x\n", "views.rules:2: missing or unbalanced left-hand side"),
        ("# id\nviews/a: (access ?x ?v) => ?x if fills(?x)\n", "views.rules:2: `fills` takes 2 arguments, got 1"),
    ];
    for (text, want) in cases {
        let e = parse_rules("views.rules", text).unwrap_err().to_string();
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
    }
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dup_rules");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("views.rules"),
        "# id\nviews/a: (access ?x ?v) => (access ?x ?v)\n# id\nviews/a: (exp ?x) => (exp ?x)\n",
    )
    .unwrap();
    let e = load_dir(&dir).unwrap_err().to_string();
    assert!(e.contains("views.rules:4: duplicate rule name `views/a` (first at"), "{e}");
}

#[test]
fn saturation_reads_what_was_just_written_without_a_round_trip() {
    let module = funcfuse::frontend::load_module(&format!("{}/micro/views.py", common::CORPUS)).unwrap();
    let f = functionalize(&module, "write_through_t", &BTreeMap::new()).unwrap();
    let defs = load_dir(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("rules")).unwrap();
    let rules = funcfuse::rewrite::rules::to_rewrites(&defs).unwrap();
    let o = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default()).unwrap();
    let (before, after) = (funcfuse::ir::term_stats(&f.term), funcfuse::ir::term_stats(&o.term));
    assert!(o.conflicts.is_empty(), "{:?}", o.conflicts);
    assert!(after.accesses < before.accesses && after.assigns < before.assigns, "{before:?} -> {after:?}");
    assert!(o.fired.get("views/read-after-write").is_some_and(|&n| n > 0), "{:?}", o.fired);
}
