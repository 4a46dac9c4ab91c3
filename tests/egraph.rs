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
        // Arity from the op table, located at the pattern at fault.
        ("# id\nviews/a: (access (neg ?x ?y) ?v) => ?x\n", "views.rules:2:18: `neg` takes 1 children, not 2"),
        ("# id\nviews/a: (exp ?x) => (where ?x ?x)\n", "views.rules:2:22: `where` takes 3 children, not 2"),
        ("# id\nviews/a: (cat ?x) => ?x\n", "views.rules:2:10: `cat` takes at least 2 children, not 1"),
        // Op-class variables.
        ("# id\nviews/a: (?f:unary ?x ?y) => ?x\n", "views.rules:2:10: `neg` takes 1 children, not 2 (`?f:unary` is"),
        ("# id\nviews/a: (?f:unray ?x) => ?x\n", "views.rules:2:11: unknown op class `unray` (known: int,"),
        ("# id\nviews/a: (?f:unary.pink ?x) => ?x\n", "views.rules:2:11: unknown dtype rule `pink`"),
        ("# id\nviews/a: (?f:binary.given ?x ?y) => ?x\n", "views.rules:2:11: op class `binary.given` has no"),
        ("# id\nviews/a: (exp ?f:unary) => ?x\n", "views.rules:2:15: `?f:unary` stands for an operator"),
        ("# id\nviews/a: (?f:unary ?x) => ?f\n", "views.rules:2:27: `?f` stands for an operator"),
        ("# id\nviews/a: (?f:unary ?x) => (?f:unary ?x)\n", "views.rules:2:28: write the op-class variable"),
        ("# id\nviews/a: (?f:unary (?g:unary ?x)) => ?x\n", "views.rules:2:21: `?g:unary`: a rule ranges over at"),
        ("# id\nviews/a: (?f:unary ?x) => ?x if float(?f)\n", "views.rules:2: the op-class variable `?f` cannot"),
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
fn a_rule_over_an_op_class_is_one_rule_per_member() {
    use funcfuse::ir::{DtypeRule, OpClass, OpName};
    let text = "# id\nfusion/a: (access (?f:unary ?x) ?v) <=> (?f (access ?x ?v))\n\
                # id\nfusion/b: (?f:binary.bool ?x (?f ?y ?x)) => (?f ?x ?y) if same_shape(?x, ?y)\n";
    let defs = parse_rules("fusion.rules", text).unwrap();
    let unary = OpName::members(OpClass::Unary, None);
    let bool_binary = OpName::members(OpClass::Binary, Some(DtypeRule::Bool));
    assert_eq!(unary.len(), 25);
    assert_eq!(bool_binary.iter().map(|o| o.as_str()).collect::<Vec<_>>(), ["eq", "ne", "lt", "le", "gt", "ge"]);
    assert_eq!(defs.len(), unary.len() + bool_binary.len());
    let neg = &defs[0];
    assert_eq!(neg.name, "fusion/a[neg]");
    assert_eq!((neg.lhs.as_str(), neg.rhs.as_str()), ("(access (neg ?x) ?v)", "(neg (access ?x ?v))"));
    assert_eq!(neg.family, Some(("fusion/a".to_string(), "unary".to_string())));
    let lt = defs.iter().find(|d| d.name == "fusion/b[lt]").unwrap();
    assert_eq!((lt.lhs.as_str(), lt.rhs.as_str()), ("(lt ?x (lt ?y ?x))", "(lt ?x ?y)"));
    assert_eq!(lt.conditions.len(), 1);
    // `total(?f)` leaves out the ops that raise for some operands, and is no run-time condition.
    let total = "# id\nfusion/c: (?f:binary.same ?x ?y) => (?f ?y ?x) if total(?f) if same_shape(?x, ?y)\n";
    let defs = parse_rules("fusion.rules", total).unwrap();
    let ops: Vec<&str> = defs.iter().map(|d| d.name.as_str()).collect();
    assert!(
        ops.contains(&"fusion/c[add]") && !ops.iter().any(|o| o.contains("floordiv") || o.contains("pow")),
        "{ops:?}"
    );
    assert!(defs.iter().all(|d| d.conditions.len() == 1));
    assert_eq!(defs[0].family, Some(("fusion/c".to_string(), "binary.same if total(?f)".to_string())));
    let e = parse_rules("fusion.rules", "# id\nfusion/d: (exp ?x) => ?x if total(?x)\n").unwrap_err().to_string();
    assert!(e.starts_with("fusion.rules:2: `total` takes the rule's op-class variable"), "{e}");
    funcfuse::rewrite::rules::to_rewrites(&defs).unwrap();
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
