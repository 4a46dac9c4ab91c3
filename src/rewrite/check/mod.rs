//! The rule checker: both sides of a rule, instantiated on random instances (and, for rules of view algebra alone,
//! on every small instance), evaluated by the functional interpreter and compared.
//!
//! A variable's kind comes from where the left side uses it: a tensor read or written through a view (it gets a
//! storage shape), a view, an integer, or a value tensor (any shape that may broadcast). Instances are drawn by
//! [`draw`] from a generator seeded by the rule's name, so a verdict does not depend on the other rules loaded. An
//! instance whose left side is invalid (does not type-check, fails to evaluate, or is too large) is drawn again and
//! not counted; draws continue until the conditions held on `samples` instances or a budget of draws is spent (the
//! report says how many met them; fewer than a tenth of `samples` leaves the rule unchecked, a failure). Where the left side is valid and the conditions hold, the right side must
//! type-check to the same type and give the same values: exactly (NaN equal to NaN, -0 equal to 0), or, for a rule
//! marked `@real`, within [`REAL_TOLERANCE`] on tame values.
//!
//! Invariant: the checker never panics on a rule the parser accepted; a panic of the interpreter on an instance is
//! caught and reported as a failure of that rule (it is a bug of the interpreter).

mod draw;
mod exhaustive;

use std::collections::BTreeMap;
use std::fmt::Write;

use egg::{ENodeOrVar, Id, Language, Pattern, RecExpr, Var};

use super::analysis::TermAnalysis;
use super::rules::{check as predicate, Pred, RuleDef};
use super::TermGraph;
use crate::ir::{eval_program, node_types, verify, Builder, Node, OpClass, OpName, Term, Ty};
use crate::tensor::{DType, Scalar, Tensor};

pub use draw::Instance;

/// The relative error bound of `@real` rules: |left - right| <= REAL_TOLERANCE * (1 + max |value|) over the
/// inputs and both sides, elementwise, on finite inputs in [-4, 4].
pub const REAL_TOLERANCE: f64 = 1e-4;

/// Draws per rule allowed per sample wanted, for rules whose conditions rarely hold or whose left side is often
/// invalid.
const BUDGET_PER_SAMPLE: usize = 25;

/// A rule whose conditions held on fewer than 1 in MIN_SHARE of the instances wanted, within the budget, is reported
/// unchecked: a handful of instances proves little.
const MIN_SHARE: usize = 10;

/// The most elements any tensor of an instance may have (bigger instances are invalid, not evaluated).
const MAX_ELEMENTS: usize = 1 << 16;

/// What one rule's check found.
#[derive(Debug)]
pub struct RuleReport {
    pub name: String,
    /// `file:line` of the rule.
    pub at: String,
    /// Instances where the left side was valid and the conditions held (so both sides were compared).
    pub applied: usize,
    /// Instances drawn, valid or not.
    pub drawn: usize,
    /// Drawn instances whose left side was valid.
    pub valid: usize,
    /// The rule is marked `@real` (compared within a bound).
    pub real: bool,
    /// Where the rule was also checked on every small instance: the domain and the number of instances.
    pub proved: Option<String>,
    /// The counterexample, or why the rule could not be checked.
    pub failure: Option<String>,
}

impl RuleReport {
    /// One line (and the counterexample below it) as `rules check` prints it.
    pub fn render(&self) -> String {
        match &self.failure {
            Some(f) => format!("FAIL  {:<32} ({})\n  {}", self.name, self.at, f.replace('\n', "\n  ")),
            None => {
                let how = match &self.proved {
                    Some(p) => format!("proved {p}; sampled"),
                    None => "sampled".to_string(),
                };
                let real = if self.real {
                    format!(", real arithmetic within {REAL_TOLERANCE:e}*(1+max|value|)")
                } else {
                    String::new()
                };
                format!(
                    "ok    {:<32} {how}: {} instances met the conditions, of {} valid and {} drawn{real}  ({})",
                    self.name, self.applied, self.valid, self.drawn, self.at
                )
            }
        }
    }
}

/// Each variable's kind, from the positions where the left side uses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Kind {
    /// A tensor; `base` when read or written through a view (it gets a storage shape), `cond` when it is a `where`
    /// condition (mostly bool).
    Tensor {
        base: bool,
        cond: bool,
    },
    View,
    Int,
}

pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// True with probability `p` percent.
    pub(crate) fn pct(&mut self, p: u64) -> bool {
        self.below(100) < p
    }
    pub(crate) fn pick<T: Clone>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize].clone()
    }
    /// Uniform in [lo, hi].
    pub(crate) fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1).max(1) as u64) as i64
    }
}

/// A 64-bit FNV-1a hash: the seed of a rule's draws, from its name alone.
pub fn name_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ b as u64).wrapping_mul(0x0100_0000_01b3))
}

/// Checks each rule (both directions of a `<=>` rule) on `samples` instances where its conditions hold.
pub fn check_rules(defs: &[RuleDef], samples: usize) -> Vec<RuleReport> {
    let mut out = Vec::new();
    for d in defs {
        out.push(check_one(d, &d.lhs, &d.rhs, &d.conditions, &d.name, samples));
        if d.both_ways {
            out.push(check_one(d, &d.rhs, &d.lhs, &[], &format!("{}-rev", d.name), samples));
        }
    }
    out
}

/// A rule direction ready to check: its parsed sides, conditions and variable kinds.
pub(crate) struct Rule<'a> {
    pub lhs: Pattern<Node>,
    pub rhs: Pattern<Node>,
    pub conditions: &'a [(Pred, Vec<String>)],
    pub kinds: BTreeMap<Var, Kind>,
    pub real: bool,
}

/// What one instance gave.
pub(crate) enum Outcome {
    /// The left side is invalid here: draw again.
    Invalid,
    /// Valid, but the conditions do not hold.
    Skipped,
    Agrees,
    Differs(String),
}

fn check_one(
    d: &RuleDef,
    lhs: &str,
    rhs: &str,
    conditions: &[(Pred, Vec<String>)],
    name: &str,
    samples: usize,
) -> RuleReport {
    let mut report = RuleReport {
        name: name.to_string(),
        at: format!("{}:{}", d.file, d.line),
        applied: 0,
        drawn: 0,
        valid: 0,
        real: d.real,
        proved: None,
        failure: None,
    };
    let parsed = lhs.parse::<Pattern<Node>>().and_then(|l| Ok((l, rhs.parse::<Pattern<Node>>()?)));
    let (lp, rp) = match parsed {
        Ok(p) => p,
        Err(e) => {
            report.failure = Some(format!("does not parse: {e}"));
            return report;
        }
    };
    if let Some(why) = uncheckable(&lp.ast).or_else(|| uncheckable(&rp.ast)) {
        report.failure = Some(why);
        return report;
    }
    let kinds = match var_kinds(&lp.ast) {
        Ok(k) => k,
        Err(e) => {
            report.failure = Some(e);
            return report;
        }
    };
    let rule = Rule { lhs: lp, rhs: rp, conditions, kinds, real: d.real };
    if !d.real {
        match exhaustive::check(&rule) {
            Some(Ok(domain)) => report.proved = Some(domain),
            Some(Err(cx)) => {
                report.failure = Some(cx);
                return report;
            }
            None => {}
        }
    }
    let drawer = draw::Drawer::new(&rule);
    let mut rng = Rng::new(name_seed(name));
    let budget = samples.saturating_mul(BUDGET_PER_SAMPLE).max(samples);
    while report.applied < samples && report.drawn < budget {
        report.drawn += 1;
        let inst = drawer.draw(&mut rng);
        match try_instance(&rule, &inst) {
            Outcome::Invalid => continue,
            Outcome::Skipped => report.valid += 1,
            Outcome::Agrees => {
                report.valid += 1;
                report.applied += 1;
            }
            Outcome::Differs(cx) => {
                report.valid += 1;
                report.applied += 1;
                report.failure = Some(cx);
                return report;
            }
        }
    }
    if report.applied == 0 {
        report.failure = Some(format!(
            "no instance satisfied the conditions ({} drawn, {} with a valid left side), so the rule is unchecked",
            report.drawn, report.valid
        ));
    } else if report.applied < samples.div_ceil(MIN_SHARE) {
        report.failure = Some(format!(
            "the conditions held on only {} instances ({} drawn, {} with a valid left side), fewer than 1 in {MIN_SHARE} of the {samples} wanted, so the rule is unchecked",
            report.applied, report.drawn, report.valid
        ));
    }
    report
}

/// Why the checker cannot run a pattern, if it cannot: loops and branches depend on state a rule cannot bind.
fn uncheckable(ast: &RecExpr<ENodeOrVar<Node>>) -> Option<String> {
    ast.as_ref().iter().find_map(|n| match n {
        ENodeOrVar::ENode(node @ (Node::Loop(_) | Node::While(_) | Node::If(_) | Node::Iter(_) | Node::Carried(_))) => {
            Some(format!("the checker cannot instantiate `{node}` (loops and branches), so the rule is unchecked"))
        }
        _ => None,
    })
}

/// Evaluates one instance of a rule direction.
pub(crate) fn try_instance(rule: &Rule, inst: &Instance) -> Outcome {
    let l = instantiate(&rule.lhs.ast, &inst.bind);
    let Ok(lty) = verify(&l, &inst.inputs) else { return Outcome::Invalid };
    if !small_enough(&l, &inst.inputs) {
        return Outcome::Invalid;
    }
    if !conditions_hold(&l, inst, rule.conditions) {
        return Outcome::Skipped;
    }
    let left = match guarded_eval(&l, &inst.values) {
        Ok(v) => v,
        Err(e) if e.starts_with("panicked") => return Outcome::Differs(counterexample(inst, &l, &l, &e)),
        Err(_) => return Outcome::Invalid,
    };
    let r = instantiate(&rule.rhs.ast, &inst.bind);
    let problem = match verify(&r, &inst.inputs) {
        Err(e) => Some(format!("the left side is valid but the right side does not type-check: {e}")),
        Ok(rty) if rty != lty => Some(format!("the left side is {lty} but the right side is {rty}")),
        Ok(_) if !small_enough(&r, &inst.inputs) => {
            Some(format!("the right side builds a tensor of more than {MAX_ELEMENTS} elements"))
        }
        Ok(_) => match guarded_eval(&r, &inst.values) {
            Err(e) => Some(format!("the left side is valid but the right side fails: {e}")),
            Ok(right) => compare(&left, &right, inst, rule.real),
        },
    };
    match problem {
        Some(p) => Outcome::Differs(counterexample(inst, &l, &r, &p)),
        None => Outcome::Agrees,
    }
}

/// Whether every tensor and view a term builds is of a size worth evaluating.
fn small_enough(t: &Term, inputs: &[(String, DType, Vec<usize>)]) -> bool {
    let Ok(tys) = node_types(t, inputs) else { return false };
    tys.iter().flatten().all(|ty| match ty {
        Ty::Tensor(_, s) | Ty::View(s) => {
            s.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).is_some_and(|n| n <= MAX_ELEMENTS)
        }
        _ => true,
    })
}

/// Runs a term on fresh copies of the inputs; a panic of the interpreter is an error starting with "panicked".
fn guarded_eval(t: &Term, values: &BTreeMap<String, Tensor>) -> Result<Tensor, String> {
    let fresh: BTreeMap<String, Tensor> = values.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
    let run = std::panic::AssertUnwindSafe(|| eval_program(t, &fresh));
    match std::panic::catch_unwind(run) {
        Ok(Ok(mut v)) if v.len() == 1 => Ok(v.remove(0)),
        Ok(Ok(v)) => Err(format!("{} results", v.len())),
        Ok(Err(e)) => Err(e.0),
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            Err(format!("panicked (a bug of the interpreter): {msg}"))
        }
    }
}

/// Each variable's kind, from the positions where the pattern uses it.
pub(crate) fn var_kinds(ast: &RecExpr<ENodeOrVar<Node>>) -> Result<BTreeMap<Var, Kind>, String> {
    use OpName::*;
    let mut kinds = BTreeMap::new();
    let value = Kind::Tensor { base: false, cond: false };
    for n in ast.as_ref() {
        let ENodeOrVar::ENode(node) = n else { continue };
        for (i, &c) in node.children().iter().enumerate() {
            let ENodeOrVar::Var(v) = &ast[c] else { continue };
            let kind = match (node, i) {
                (Node::Access(_), 0) | (Node::Assign(_), 0) => Kind::Tensor { base: true, cond: false },
                (Node::Op(InView, _), 0) => Kind::Tensor { base: true, cond: false },
                (Node::Access(_), 1) | (Node::Assign(_), 1) | (Node::Op(InView, _), 1) => Kind::View,
                (Node::Assign(_), 2) => value,
                (Node::View(_), 2) => Kind::Int,
                (Node::Op(Where, _), 0) => Kind::Tensor { base: false, cond: true },
                (Node::Op(op, _), _) if matches!(op.class(), OpClass::Unary | OpClass::Binary) => value,
                (Node::Op(Triu | Tril, _), 1) => Kind::Int,
                // The dim of a reduction to values and indices, or of a gather.
                (Node::Op(MaxVal | MaxIdx | MinVal | MinIdx | Gather, _), 1) => Kind::Int,
                (Node::Op(Gather, _), 0 | 2) => value,
                (Node::Op(Where | Clamp | Matmul | Triu | Tril, _), _) => value,
                (Node::Op(op, _), 0) if matches!(op.class(), OpClass::Reduction | OpClass::Scan | OpClass::Reshape) => {
                    value
                }
                (Node::Op(Cast, _), 1) => value,
                (Node::Op(Cat, _), k) if k >= 1 => value,
                (Node::Op(IAdd | ISub | IMul | IFloorDiv | IMod | ITensor, _), _) => Kind::Int,
                _ => return Err(format!("the checker cannot instantiate {v} where `{node}` uses it")),
            };
            let merged = match (kinds.get(v).copied(), kind) {
                (None, k) => k,
                (Some(Kind::Tensor { base: a, cond: b }), Kind::Tensor { base: c, cond: d }) => {
                    Kind::Tensor { base: a || c, cond: b || d }
                }
                (Some(prev), k) if prev == k => k,
                (Some(prev), k) => return Err(format!("{v} is used both as {prev:?} and as {k:?}")),
            };
            kinds.insert(*v, merged);
        }
    }
    Ok(kinds)
}

/// The pattern with its variables replaced by their instances, wrapped in a one-item tuple (a program's root).
pub(crate) fn instantiate(ast: &RecExpr<ENodeOrVar<Node>>, bind: &BTreeMap<Var, Term>) -> Term {
    let mut b = Builder::default();
    let mut ids: Vec<Id> = Vec::new();
    for n in ast.as_ref() {
        let id = match n {
            ENodeOrVar::Var(v) => {
                let mut map: Vec<Id> = Vec::new();
                for node in bind.get(v).map(|t| t.as_ref()).unwrap_or(&[]) {
                    let node = node.clone().map_children(|c| map[usize::from(c)]);
                    map.push(b.add(node));
                }
                // A variable the kinds do not bind (never: every variable is a child of a left-side node).
                *map.last().unwrap_or(&b.add(Node::NoneLit))
            }
            ENodeOrVar::ENode(node) => b.add(node.clone().map_children(|c| ids[usize::from(c)])),
        };
        ids.push(id);
    }
    let root = match ids.last() {
        Some(&r) => r,
        None => b.add(Node::NoneLit),
    };
    let root = b.add(Node::Tuple(vec![root].into()));
    b.extract(root)
}

pub(crate) fn conditions_hold(l: &Term, inst: &Instance, conditions: &[(Pred, Vec<String>)]) -> bool {
    if conditions.is_empty() {
        return true;
    }
    let mut g = TermGraph::new(TermAnalysis::new(&inst.inputs));
    g.add_expr(l);
    let mut class = BTreeMap::new();
    for (v, t) in &inst.bind {
        class.insert(v.to_string(), g.add_expr(t));
    }
    g.rebuild();
    conditions.iter().all(|(p, args)| {
        let ids: Option<Vec<Id>> = args.iter().map(|a| class.get(a).map(|&c| g.find(c))).collect();
        ids.is_some_and(|ids| predicate(&g, *p, &ids))
    })
}

/// Why the two results differ, if they do.
fn compare(a: &Tensor, b: &Tensor, inst: &Instance, real: bool) -> Option<String> {
    if a.shape != b.shape || a.dtype() != b.dtype() {
        return Some(format!(
            "the left side gives {}{:?} and the right side {}{:?}",
            a.dtype().annotation(),
            a.shape,
            b.dtype().annotation(),
            b.shape
        ));
    }
    let (xa, xb) = (a.scalars(), b.scalars());
    let scale = if real {
        let inputs = inst.values.values().flat_map(|t| t.to_f64_vec());
        let sides = xa.iter().chain(&xb).map(|s| s.to_f64());
        1.0 + inputs.chain(sides).map(f64::abs).filter(|x| x.is_finite()).fold(0.0, f64::max)
    } else {
        0.0
    };
    for (i, (x, y)) in xa.iter().zip(&xb).enumerate() {
        let same = match (x, y) {
            (Scalar::F(p), Scalar::F(q)) => {
                p == q || (p.is_nan() && q.is_nan()) || (real && (p - q).abs() <= REAL_TOLERANCE * scale)
            }
            (Scalar::F(_), _) | (_, Scalar::F(_)) => x.to_f64() == y.to_f64(),
            _ => x.to_i64_trunc() == y.to_i64_trunc(),
        };
        if !same {
            let show = |s: &Scalar| match s {
                Scalar::F(f) => format!("{f:e}"),
                Scalar::I(i) => i.to_string(),
                Scalar::B(b) => b.to_string(),
            };
            let bound = if real { format!(" (beyond {REAL_TOLERANCE:e} * {scale:e})") } else { String::new() };
            return Some(format!(
                "element {i} (row-major) is {} on the left and {} on the right{bound}",
                show(x),
                show(y)
            ));
        }
    }
    None
}

fn counterexample(inst: &Instance, l: &Term, r: &Term, problem: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{problem}");
    for (v, t) in &inst.bind {
        let _ = writeln!(s, "  {v} = {t}");
    }
    for (name, d, shape) in &inst.inputs {
        let vals: Vec<String> = inst.values[name]
            .scalars()
            .iter()
            .map(|x| match x {
                Scalar::F(f) => format!("{f:e}"),
                Scalar::I(i) => i.to_string(),
                Scalar::B(b) => b.to_string(),
            })
            .collect();
        let shown = if vals.len() > 64 {
            format!("[{}, ... ({} elements)]", vals[..64].join(", "), vals.len())
        } else {
            format!("[{}]", vals.join(", "))
        };
        let _ = writeln!(s, "  %{name}: {}{:?} = {shown}", d.annotation(), shape);
    }
    let _ = writeln!(s, "  left:  {l}");
    let _ = write!(s, "  right: {r}");
    s
}
