//! The rule checker: every shipped rule passes (the view rules proved on every small instance); unsound rules of
//! every kind contributors write (values never extreme, integers, dtypes, shapes and views too small, rare
//! conditions, position dependence) are each caught with a counterexample at the default sample count, alone or
//! among the shipped rules; sound but unusual rules pass; the loader rejects what would crash the checker; and
//! random, garbled rule files never panic it.

use funcfuse::rewrite::check::{check_rules, RuleReport};
use funcfuse::rewrite::rules::{parse_rules, shipped, RuleDef};

/// The sample count `rules check` and the check before use default to.
const SAMPLES: usize = 400;

fn bad_rules() -> Vec<RuleDef> {
    parse_rules("bad.rules", UNSOUND).unwrap()
}

#[test]
fn every_shipped_rule_passes_and_view_rules_are_proved() {
    let reports = check_rules(&shipped().unwrap(), SAMPLES);
    assert!(reports.len() >= 20);
    for r in &reports {
        assert!(r.failure.is_none(), "{} ({}): {}", r.name, r.at, r.failure.as_deref().unwrap_or(""));
        assert!(r.applied > 0, "{} never applied", r.name);
    }
    for name in ["views/read-after-write", "views/read-past-write", "scatter/assign-twice", "scatter/write-back-read"] {
        let r = reports.iter().find(|r| r.name == name).unwrap();
        assert!(r.proved.is_some(), "{name} was not proved: {}", r.render());
        assert!(r.render().contains("proved on all"), "{}", r.render());
    }
    // The matmul rules: the exact ones and those that hold in real arithmetic, each on drawn matrices.
    for name in ["matmul/join-columns", "matmul/split-rows", "matmul/split-inner", "matmul/distribute-right"] {
        let r = reports.iter().find(|r| r.name == name).unwrap();
        assert!(r.render().contains("sampled: 400 instances met the conditions"), "{}", r.render());
    }
    let r = reports.iter().find(|r| r.name == "matmul/join-inner").unwrap();
    assert!(r.real && r.applied >= 200, "{}", r.render());
    let r = reports.iter().find(|r| r.name == "fusion/access-binary[add]").unwrap();
    assert!(r.proved.is_none() && r.render().contains("sampled: 400 instances met the conditions"), "{}", r.render());
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

# values never extreme: log(exp(x)) = x (x = 100 overflows)
bad/log-exp: (log (exp ?x)) => ?x if float(?x)

# sqrt(x * x) = abs(x) (x = 2e19 overflows)
bad/sqrt-square: (sqrt (mul ?x ?x)) => (abs ?x) if float(?x)

# (a + b) - b = a (1e8 cancels a)
bad/add-sub-cancel: (sub (add ?a ?b) ?b) => ?a if same_shape(?a, ?b)

# additions reassociate
bad/add-assoc: (add (add ?a ?b) ?c) => (add ?a (add ?b ?c)) if same_shape(?a, ?b) if same_shape(?b, ?c)

# min(x, max(x, y)) = x (y = NaN)
bad/min-max-absorb: (minimum ?x (maximum ?x ?y)) => ?x if same_shape(?x, ?y)

# where(a < b, x, y) = where(a >= b, y, x) (NaN compares false both ways)
bad/where-flip: (where (lt ?a ?b) ?x ?y) => (where (ge ?a ?b) ?y ?x) if same_shape(?a, ?b) if same_shape(?a, ?x) if same_shape(?x, ?y)

# (x - x) * y = x - x (y = inf)
bad/zero-times: (mul (sub ?x ?x) ?y) => (sub ?x ?x) if same_shape(?x, ?y)

# (x / y) * y = x (y = 0)
bad/div-mul: (mul (div ?x ?y) ?y) => ?x if float(?x) if same_shape(?x, ?y)

# x * 0 = 0 for a float scalar x (x = inf or NaN)
bad/times-zero: (mul ?x (full (list) f32 0.0)) => (full (list) f32 0.0) if scalar(?x)

# exp(log(x)) = x (x < 0)
bad/exp-log: (exp (log ?x)) => ?x if float(?x)

# sqrt(x) * sqrt(x) = x
bad/sqrt-twice: (mul (sqrt ?x) (sqrt ?x)) => ?x if float(?x)

# 1 / (1 / x) = x (x subnormal)
bad/reciprocal-twice: (reciprocal (reciprocal ?x)) => ?x if float(?x)

# max(x, y) = x + y - min(x, y)
bad/max-by-sum: (maximum ?x ?y) => (sub (add ?x ?y) (minimum ?x ?y)) if same_shape(?x, ?y)

# floor(x) = trunc(x) (x < 0)
bad/floor-trunc: (floor ?x) => (trunc ?x) if float(?x)

# integers never negative: x // y = trunc(x / y)
bad/floordiv-trunc: (floordiv ?x ?y) => (cast i64 (trunc (div ?x ?y))) if same_shape(?x, ?y)

# x // 2 = trunc(x / 2) for an i64 x (negative odd or huge x)
bad/floordiv-two: (floordiv ?x (full (list) i64 2)) => (cast i64 (trunc (div ?x (full (list) i64 2))))

# abs(-x) = x (x negative)
bad/abs-neg: (abs (neg ?x)) => ?x

# tanh(-x) = -tanh(x) (for the smallest integer, -x wraps)
bad/tanh-odd: (tanh (neg ?x)) => (neg (tanh ?x))

# int32(int64(x)) = int32(x) (floats beyond the i32 range)
bad/cast-i32-i64: (cast i32 (cast i64 ?x)) => (cast i32 ?x)

# writing what y holds through v makes x into y (only when v covers all of x)
bad/assign-all: (assign ?x ?v (access ?y ?v)) => ?y if same_shape(?x, ?y) if same_dtype(?x, ?y)

# a write under another one through a disjoint view is hidden (it is not)
bad/drop-first-write: (assign (assign ?x ?v ?a) ?w ?b) => (assign ?x ?w ?b) if disjoint(?v, ?w)

# fmod(x, 2) = x & 1 (x negative)
bad/fmod-bitand: (fmod ?x (full (list) i64 2)) => (bitand ?x (full (list) i64 1))

# integers never large: float(a + b) = float(a) + float(b) (beyond f32's exact range)
bad/cast-add: (cast f32 (add ?a ?b)) => (add (cast f32 ?a) (cast f32 ?b)) if same_shape(?a, ?b)

# int64(int32(x)) = x (near 2^31)
bad/i32-roundtrip: (cast i64 (cast i32 ?x)) => ?x

# int64(float(x)) = x (2^24 + 1)
bad/f32-roundtrip: (cast i64 (cast f32 ?x)) => ?x

# relu(abs(x)) = abs(x) (abs(i64 min) wraps)
bad/abs-nonneg: (relu (abs ?x)) => (abs ?x)

# (x * y) // y = x (overflow)
bad/mul-floordiv: (floordiv (mul ?x ?y) ?y) => ?x if same_shape(?x, ?y)

# a < b = (a - b) < 0 (a - b wraps)
bad/lt-by-sub: (lt ?a ?b) => (lt (sub ?a ?b) (full (list) i64 0)) if same_shape(?a, ?b)

# dtypes: float(x) = x for a float x (not for f64)
bad/drop-cast-f32: (cast f32 ?x) => ?x if float(?x)

# double(float(x)) = double(x) (f64 values round)
bad/cast-f64-f32: (cast f64 (cast f32 ?x)) => (cast f64 ?x)

# shapes too small: a 16-wide tile's row and column share no element (they share element 0)
bad/tile-row-col: (access (assign ?x (view (list 16) (list 1) ?o) ?y) (view (list 16) (list 16) ?o)) => (access ?x (view (list 16) (list 16) ?o))

# summing dims 0, 1, 2 is the full sum (not for rank 4)
bad/sum-three-dims: (sum ?x (list 0 1 2) false) => (sum ?x (list) false)

# neg is the identity on a 65-element slice
bad/neg-65: (access (neg ?x) (view (list 65) (list 1) 0)) => (access ?x (view (list 65) (list 1) 0))

# elements 0, 2, 4 and 4, 6, 8 are disjoint (they share 4)
bad/stride-two: (access (assign ?x (view (list 3) (list 2) 0) ?y) (view (list 3) (list 2) 4)) => (access ?x (view (list 3) (list 2) 4))

# two views that do not overlap themselves do not overlap each other
bad/no-overlap-is-disjoint: (access (assign ?x ?v ?y) ?w) => (access ?x ?w) if no_overlap(?v) if no_overlap(?w)

# writes through views that do not overlap themselves commute
bad/writes-commute-no-overlap: (assign (assign ?x ?v ?a) ?w ?b) => (assign (assign ?x ?w ?b) ?v ?a) if no_overlap(?v) if no_overlap(?w)

# read after write without asking for the dtype
bad/read-after-write-dtype: (access (assign ?x ?v ?y) ?v) => ?y if fills(?y, ?v) if no_overlap(?v)

# read after write without asking for the shape
bad/read-after-write-shape: (access (assign ?x ?v ?y) ?v) => ?y if same_dtype(?x, ?y) if no_overlap(?v)

# rare conditions: two scalars subtract either way
bad/scalar-sub-commutes: (sub ?x ?y) => (sub ?y ?x) if scalar(?x) if scalar(?y)

# a read past a write of something that fills the read view sees the write
bad/read-past-sees-write: (access (assign ?x ?v ?y) ?w) => ?y if fills(?y, ?w) if same_dtype(?x, ?y) if disjoint(?v, ?w)

# ties: x < y = x <= y
bad/lt-le-tie: (lt ?x ?y) => (le ?x ?y) if same_shape(?x, ?y)

# position dependence: reading two elements reversed is the same
bad/reversed-pair: (access ?x (view (list 2) (list 1) ?o)) => (access ?x (view (list 2) (list -1) (i+ ?o 1)))

# softmax over dim 0 is softmax over the last dim (only for rank 1)
bad/softmax-dim: (softmax ?x 0) => (softmax ?x -1)

# summing dim 0 is summing the last dim (only for rank 1)
bad/sum-dim-swap: (sum ?x (list 0) false) => (sum ?x (list -1) false)

# real arithmetic does not rescue a wrong identity: (x / y) * y = x fails at y = 0
bad/real-div-mul: (mul (div ?x ?y) ?y) => ?x if float(?x) if same_shape(?x, ?y) @real

# real arithmetic: (a + b) - a = a is wrong even there
bad/real-wrong: (sub (add ?a ?b) ?a) => ?a if same_shape(?a, ?b) @real

# wrong: joins the weights' rows instead of their columns
bad/mm-columns-wrong-dim: (cat 1 (matmul ?x ?a) (matmul ?x ?b)) => (matmul ?x (cat 0 ?a ?b)) if matrix(?x) if matrix(?a) if matrix(?b)

# wrong: a batched x joins its rows, not the product's columns
bad/mm-columns-batched: (cat 1 (matmul ?x ?a) (matmul ?x ?b)) => (matmul ?x (cat 1 ?a ?b)) if matrix(?a) if matrix(?b)

# wrong: a batched weight
bad/mm-rows-batched: (cat 0 (matmul ?x ?w) (matmul ?y ?w)) => (matmul (cat 0 ?x ?y) ?w) if matrix(?x) if matrix(?y)

# wrong: a sum of products is not exactly one product
bad/mm-join-inner-exact: (add (matmul ?x ?a) (matmul ?y ?b)) => (matmul (cat 1 ?x ?y) (cat 0 ?a ?b)) if matrix(?x) if matrix(?y) if matrix(?a) if matrix(?b) if same_rows(?x, ?y) if same_cols(?a, ?b)

# wrong: products of different rows broadcast in the sum
bad/mm-join-inner-broadcast: (add (matmul ?x ?a) (matmul ?y ?b)) => (matmul (cat 1 ?x ?y) (cat 0 ?a ?b)) if matrix(?x) if matrix(?y) if matrix(?a) if matrix(?b) if same_cols(?a, ?b) @real

# wrong: the inner dims may be split elsewhere
bad/mm-split-inner-anywhere: (matmul (cat 1 ?x ?y) (cat 0 ?a ?b)) => (add (matmul ?x ?a) (matmul ?y ?b)) if matrix(?x) if matrix(?y) if matrix(?a) if matrix(?b) @real
";

fn assert_counterexample(r: &RuleReport) {
    let f = r.failure.as_deref().unwrap_or_else(|| panic!("{} was not caught: {}", r.name, r.render()));
    assert!(f.contains("left:") && f.contains("right:"), "{}: no counterexample in {f}", r.name);
    assert!(!f.contains("panicked"), "{}: the interpreter panicked: {f}", r.name);
}

#[test]
fn unsound_rules_are_caught_alone_and_among_the_shipped_rules() {
    let bad = bad_rules();
    assert!(bad.len() >= 40, "{} unsound rules", bad.len());
    let mut alone = Vec::new();
    for d in &bad {
        let r = check_rules(std::slice::from_ref(d), SAMPLES).remove(0);
        assert_counterexample(&r);
        alone.push(r);
    }
    // Among the shipped rules and in reverse order: the same verdicts and the same counterexamples.
    let mut all = shipped().unwrap();
    all.extend(bad.iter().rev().cloned());
    let together = check_rules(&all, SAMPLES);
    for r in &alone {
        let t = together.iter().find(|t| t.name == r.name).unwrap();
        assert_eq!(t.failure, r.failure, "{} depends on the other rules loaded", r.name);
    }
}

#[test]
fn counterexamples_name_what_exposed_them() {
    let bad = bad_rules();
    let get = |name: &str| {
        let d = bad.iter().find(|d| d.name == name).unwrap();
        check_rules(std::slice::from_ref(d), SAMPLES).remove(0).failure.unwrap()
    };
    // A type difference that only f64 shows.
    assert!(get("bad/drop-cast-f32").contains("f64"), "{}", get("bad/drop-cast-f32"));
    // A rank-4 value.
    let f = get("bad/sum-three-dims");
    assert!(f.contains("left side is (f") || f.contains("left side is (i") || f.contains("left side is (b"), "{f}");
    // The 65-element slice: the left side is valid (the storage is large enough) and the values differ.
    assert!(get("bad/neg-65").contains("on the left and"), "{}", get("bad/neg-65"));
    // The tile's row and column: a storage of at least 256 elements.
    assert!(get("bad/tile-row-col").contains("elements)]"), "{}", get("bad/tile-row-col"));
    // A rule of view algebra alone is enumerated first: its counterexample is among the smallest.
    let f = get("bad/read-past-any");
    assert!(f.contains("found by exhaustive enumeration"), "{f}");
    // A real-arithmetic rule is compared within the stated bound.
    assert!(get("bad/real-div-mul").contains("beyond 1e-4"), "{}", get("bad/real-div-mul"));
}

const SOUND: &str = "\
# -(a - b) = b - a (rounding is symmetric; -0 and 0 compare equal)
ok/neg-sub: (neg (sub ?a ?b)) => (sub ?b ?a) if same_shape(?a, ?b)

# x % 4 = x & 3 for integers (Python's modulo, two's complement)
ok/rem-pow2: (rem ?x (full (list) i64 4)) => (bitand ?x (full (list) i64 3))

# -(-x) = x, also for the smallest integer
ok/neg-neg: (neg (neg ?x)) => ?x

# x & x = x
ok/bitand-self: (bitand ?x ?x) => ?x

# bool(abs(x)) = bool(x), also for NaN and the smallest integer
ok/cast-bool-abs: (cast bool (abs ?x)) => (cast bool ?x)

# writing back what was read through a literal two-element slice changes nothing (wherever it is in bounds)
ok/write-back-slice: (assign ?x (view (list 2) (list 1) ?o) (access ?x (view (list 2) (list 1) ?o))) => ?x

# max(x, y) = max(y, x), NaN included
ok/max-commutes: (maximum ?x ?y) => (maximum ?y ?x)

# where(not(a < b), x, y) = where(a < b, y, x)
ok/where-not: (where (not (lt ?a ?b)) ?x ?y) => (where (lt ?a ?b) ?y ?x)

# a write through a reversed view and a read past it: elements 2, 1, 0 and 3, 4 are disjoint
ok/reversed-disjoint: (access (assign ?x (view (list 3) (list -1) 2) ?y) (view (list 2) (list 1) 3)) => (access ?x (view (list 2) (list 1) 3))

# summing dim 0 of a 0-dim tensor is the tensor
ok/sum-0dim: (sum (sum ?x (list) false) (list 0) false) => (sum ?x (list) false)

# triu(x, k) keeps what tril(x, k - 1) drops: their sum is x (for an integer k)
ok/triu-tril: (add (triu ?x ?k) (tril ?x (i- ?k 1))) => ?x if same_dtype(?x, ?x)

# x * 1.0 = x for f32
ok/mul-one: (mul ?x (full (list) f32 1.0)) => ?x if float(?x)

# read past write with the condition the rule needs, on two views derived from each other
ok/read-past-disjoint: (access (assign ?x ?v ?y) ?w) => (access ?x ?w) if disjoint(?v, ?w)

# (a + b) - b = a in real arithmetic
ok/cancel-real: (sub (add ?a ?b) ?b) => ?a if same_shape(?a, ?b) @real

# additions reassociate in real arithmetic
ok/assoc-real: (add (add ?a ?b) ?c) => (add ?a (add ?b ?c)) if same_shape(?a, ?b) if same_shape(?b, ?c) @real
";

#[test]
fn sound_unusual_rules_pass() {
    let defs = parse_rules("ok.rules", SOUND).unwrap();
    assert!(defs.len() >= 10);
    for r in check_rules(&defs, SAMPLES) {
        assert!(r.failure.is_none(), "{}", r.render());
        assert!(r.applied >= 100, "{} met its conditions on only {} instances", r.name, r.applied);
        if r.real {
            assert!(r.render().contains("real arithmetic within 1e-4"), "{}", r.render());
        }
    }
}

#[test]
fn a_rule_whose_conditions_never_hold_is_reported_unchecked() {
    let defs =
        parse_rules("views.rules", "# never\nviews/never: (access ?x ?v) => ?x if same_shape(?x, ?v)\n").unwrap();
    let r = &check_rules(&defs, 50)[0];
    assert!(r.failure.as_deref().is_some_and(|f| f.contains("unchecked")), "{r:?}");
}

#[test]
fn a_rule_whose_conditions_rarely_hold_is_reported_unchecked() {
    // Sound (both sides read ?x past a disjoint write), but two disjoint views that both fill the storage's shape
    // are rare: a handful of instances in the budget is too few to trust.
    let text = "# rare\nviews/rare: (access (assign ?x ?v ?y) ?w) => (access ?x ?w) if fills(?x, ?v) if fills(?x, ?w) if disjoint(?v, ?w) if fills(?y, ?v)\n";
    let defs = parse_rules("views.rules", text).unwrap();
    let r = &check_rules(&defs, SAMPLES)[0];
    assert!(r.failure.as_deref().is_some_and(|f| f.contains("conditions held on only")), "{}", r.render());
}

#[test]
fn rules_that_would_crash_the_checker_are_load_errors() {
    let cases = [
        ("# id\nviews/a: ?x => (neg (neg ?x))\n", "views.rules:2: the left-hand side `?x` is a bare variable"),
        ("# id\nviews/a: (neg (neg ?x)) <=> ?x\n", "views.rules:2: the right-hand side `?x` is a bare variable"),
        ("# id\nviews/a: (neg ?x) => ?x if )fills(\n", "views.rules:2: unclosed condition"),
    ];
    for (text, want) in cases {
        let e = parse_rules("views.rules", text).unwrap_err().to_string();
        assert!(e.starts_with(want), "got {e:?}, want {want:?}");
    }
    // Deep nesting is an error naming the line, not a stack overflow.
    let deep = format!("# deep\nviews/deep: {}?x{} => ?x\n", "(neg ".repeat(100_000), ")".repeat(100_000));
    let e = parse_rules("views.rules", &deep).unwrap_err().to_string();
    assert!(e.starts_with("views.rules:2: the left-hand side nests 100000 deep"), "{e}");
}

#[test]
fn verdicts_do_not_depend_on_rule_order() {
    let defs = parse_rules("ok.rules", SOUND).unwrap();
    let forward = check_rules(&defs, 50);
    let mut rev = defs.clone();
    rev.reverse();
    let backward = check_rules(&rev, 50);
    for f in &forward {
        let b = backward.iter().find(|b| b.name == f.name).unwrap();
        assert_eq!((f.applied, f.drawn, f.valid), (b.applied, b.drawn, b.valid), "{}", f.name);
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A random s-expression over the term language's operators, literals and the variables `vars`.
fn sexp(rng: &mut Rng, depth: usize, vars: &[&str]) -> String {
    const LEAVES: &[&str] = &[
        "0",
        "1",
        "-1",
        "2",
        "16",
        "1.0",
        "nan",
        "-inf",
        "f32",
        "i64",
        "bool",
        "true",
        "none",
        "%a",
        "(list)",
        "(list 2 3)",
        "(list -1)",
        "(view (list 2) (list 1) 0)",
        "(input %a)",
        "9223372036854775807",
        "(view (list 99999999999) (list 1) 0)",
        "(view (list 3) (list -4611686018427387904) 7)",
        "(full (list 99999999 99999999) f32 1.0)",
    ];
    if depth == 0 || rng.below(3) == 0 {
        if !vars.is_empty() && rng.below(2) == 0 {
            return vars[rng.below(vars.len())].to_string();
        }
        return LEAVES[rng.below(LEAVES.len())].to_string();
    }
    let ops: Vec<&str> = funcfuse::ir::OpName::ALL
        .iter()
        .map(|o| o.as_str())
        .chain(["access", "assign", "view", "list", "tuple", "get", "loop", "iter", "input"])
        .collect();
    let op = ops[rng.below(ops.len())];
    // Operators get the children the op table says (the loader refuses other counts); the rest 1 to 3.
    let n = match (op, op.parse::<funcfuse::ir::OpName>().map(|o| o.arity())) {
        ("access" | "get", _) => 2,
        ("assign" | "view", _) => 3,
        (_, Ok(funcfuse::ir::Arity::Exact(k))) => k,
        (_, Ok(funcfuse::ir::Arity::AtLeast(k))) => k + rng.below(2),
        _ => 1 + rng.below(3),
    };
    let args: Vec<String> = (0..n).map(|_| sexp(rng, depth - 1, vars)).collect();
    format!("({op} {})", args.join(" "))
}

/// A random, mostly well-typed expression over `?x`, `?y` (tensors) and `?v` (a view).
fn typed(rng: &mut Rng, depth: usize) -> String {
    use funcfuse::ir::{OpClass, OpName};
    // The op table's elementwise ops, in table order.
    let unary = OpName::members(OpClass::Unary, None);
    let binary = OpName::members(OpClass::Binary, None);
    if depth == 0 || rng.below(4) == 0 {
        return ["?x", "?y", "?x", "?y", "(full (list) f32 2.0)", "(full (list) i64 -3)"][rng.below(6)].to_string();
    }
    let d = depth - 1;
    match rng.below(10) {
        0..=3 => format!("({} {})", unary[rng.below(unary.len())], typed(rng, d)),
        4..=7 => format!("({} {} {})", binary[rng.below(binary.len())], typed(rng, d), typed(rng, d)),
        8 => format!("(where (lt {} {}) {} {})", typed(rng, d), typed(rng, d), typed(rng, d), typed(rng, d)),
        _ => match rng.below(4) {
            0 => format!("(sum {} (list) false)", typed(rng, d)),
            1 => format!("(cast {} {})", ["f64", "f32", "i32", "i64", "bool"][rng.below(5)], typed(rng, d)),
            2 => format!("(access {} ?v)", typed(rng, d)),
            _ => format!("(clamp {} ?y none)", typed(rng, d)),
        },
    }
}

#[test]
fn random_well_typed_rules_run_on_extreme_values_without_a_panic() {
    let mut rng = Rng(0x0bad_5eed_1234_5678);
    let (mut checked, mut compared) = (0, 0);
    for i in 0..300 {
        let lhs = typed(&mut rng, 3);
        let rhs = typed(&mut rng, 3);
        let text = format!("# fuzzed\nfz/t{i}: {lhs} => {rhs}\n");
        let Ok(defs) = parse_rules("fz.rules", &text) else { continue };
        for r in check_rules(&defs, 10) {
            checked += 1;
            compared += (r.applied > 0) as usize;
            let f = r.failure.as_deref().unwrap_or("");
            assert!(!f.contains("panicked"), "{text}: {f}");
        }
    }
    assert!(checked >= 100 && compared >= 50, "{compared} of {checked} random rules were evaluated on an instance");
}

#[test]
fn random_and_garbled_rule_files_never_panic_the_checker() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let preds =
        ["same_dtype(?x, ?y)", "scalar(?x)", "fills(?x, ?v)", "no_overlap(?v)", "disjoint(?v, ?w)", "float(?y)"];
    let (mut parsed, mut checked, mut compared) = (0, 0, 0);
    for i in 0..400 {
        let lhs = sexp(&mut rng, 4, &["?x", "?y", "?v", "?w", "?o"]);
        let bound: Vec<&str> = ["?x", "?y", "?v", "?w", "?o"].into_iter().filter(|v| lhs.contains(v)).collect();
        let rhs = sexp(&mut rng, 3, &bound);
        let arrow = if rng.below(4) == 0 { "<=>" } else { "=>" };
        let mut line = format!("fz/r{i}: {lhs} {arrow} {rhs}");
        for _ in 0..rng.below(3) {
            let p = preds[rng.below(preds.len())];
            if bound.iter().any(|v| p.contains(v)) {
                line.push_str(&format!(" if {p}"));
            }
        }
        if rng.below(5) == 0 {
            line.push_str(" @real");
        }
        let mut bytes: Vec<char> = line.chars().collect();
        // Garble a third of them: drop, duplicate or insert characters.
        if rng.below(3) == 0 {
            for _ in 0..1 + rng.below(4) {
                let k = rng.below(bytes.len());
                match rng.below(3) {
                    0 => {
                        bytes.remove(k);
                    }
                    1 => bytes.insert(k, bytes[k]),
                    _ => bytes.insert(k, ['(', ')', '?', ':', ' ', 'é', '#'][rng.below(7)]),
                }
            }
        }
        let text = format!("# fuzzed\n{}\n", bytes.into_iter().collect::<String>());
        let Ok(defs) = parse_rules("fz.rules", &text) else { continue };
        parsed += 1;
        for r in check_rules(&defs, 10) {
            checked += 1;
            compared += (r.applied > 0) as usize;
            let f = r.failure.as_deref().unwrap_or("");
            assert!(!f.contains("panicked"), "{text}: {f}");
        }
    }
    assert!(parsed >= 100 && checked >= 100, "only {parsed} of 400 random rule files parsed");
    // A few got as far as evaluating the left side on an instance (the typed generator below reaches many more).
    assert!(compared >= 5, "only {compared} of {checked} random rules were evaluated on an instance");
}
