//! The rule checker: every shipped rule passes, and deliberately unsound rules (wrong shapes, wrong views,
//! overlapping views treated as disjoint, a missing condition) are each caught with a counterexample.

use funcfuse::rewrite::check::check_rules;
use funcfuse::rewrite::rules::{parse_rules, shipped};

#[test]
fn every_shipped_rule_passes() {
    let reports = check_rules(&shipped().unwrap(), 300);
    assert!(reports.len() >= 20);
    for r in &reports {
        assert!(r.failure.is_none(), "{} ({}): {}", r.name, r.at, r.failure.as_deref().unwrap_or(""));
        assert!(r.applied > 0, "{} never applied", r.name);
    }
}

const UNSOUND: &str = "\
# wrong shapes: a read through a view is not the whole tensor
bad/read-is-whole: (access ?x ?v) => ?x

# wrong views: a read sees the written value whatever view it goes through
bad/read-any-view: (access (assign ?x ?v ?y) ?w) => ?y if same_dtype(?x, ?y) if fills(?y, ?w)

# overlapping views treated as disjoint: no condition at all
bad/read-past-any: (access (assign ?x ?v ?y) ?w) => (access ?x ?w)

# two writes commute even when their views overlap
bad/writes-commute: (assign (assign ?x ?v ?a) ?w ?b) => (assign (assign ?x ?w ?b) ?v ?a)

# a read of what was written, without asking that the view not overlap itself
bad/read-after-write-overlap: (access (assign ?x ?v ?y) ?v) => ?y if fills(?y, ?v) if same_dtype(?x, ?y)

# an elementwise op of two tensors commutes with a read even when one of them broadcasts
bad/access-add-broadcast: (access (add ?x ?y) ?v) => (add (access ?x ?v) (access ?y ?v))

# wrong algebra
bad/sub-commutes: (sub ?x ?y) => (sub ?y ?x)
";

#[test]
fn unsound_rules_are_caught_with_a_counterexample() {
    let defs = parse_rules("bad.rules", UNSOUND).unwrap();
    let reports = check_rules(&defs, 400);
    assert_eq!(reports.len(), defs.len());
    for r in &reports {
        let f = r.failure.as_deref().unwrap_or_else(|| panic!("{} was not caught ({} applied)", r.name, r.applied));
        assert!(f.contains("left:") && f.contains("right:"), "{}: no counterexample in {f}", r.name);
        assert!(f.contains("?x ="), "{}: the counterexample does not bind ?x: {f}", r.name);
    }
}

#[test]
fn a_rule_whose_conditions_never_hold_is_reported_unchecked() {
    let defs =
        parse_rules("views.rules", "# never\nviews/never: (access ?x ?v) => ?x if same_shape(?x, ?v)\n").unwrap();
    let r = &check_rules(&defs, 50)[0];
    assert!(r.failure.as_deref().is_some_and(|f| f.contains("unchecked")), "{r:?}");
}
