//! The rule checker (`funcfuse rules check`): every rule's two sides are instantiated on random shapes, values and
//! views and run in the functional interpreter; a rule whose sides differ on an instance where its conditions hold
//! is unsound, and the instance is its counterexample.
//!
//! Variables get a kind from where the left side uses them (tensor, view, integer). Views are drawn at random
//! (size-1 dims, zero strides that broadcast, strides past one, offsets) and often derived from another view of the
//! same instance (the same view, or the same view shifted), so that conditions like `disjoint` and `fills` hold in
//! some instances and fail in others. Tensors that are read or written through views get a storage shape; values
//! get a view's shape, a broadcastable one, or a random one. An instance whose left side does not type-check is
//! drawn again; a rule with no instance where its conditions hold is reported as unchecked, which is a failure too.

use std::collections::BTreeMap;
use std::fmt::Write;

use egg::{ENodeOrVar, Id, Language, Pattern, RecExpr, Var};

use super::analysis::TermAnalysis;
use super::rules::{check as predicate, RuleDef};
use super::TermGraph;
use crate::ir::{eval_program, verify, Builder, Node, OpName, Term};
use crate::tensor::{DType, Tensor};

/// What one rule's check found.
#[derive(Debug)]
pub struct RuleReport {
    pub name: String,
    /// `file:line` of the rule.
    pub at: String,
    /// Instances where the conditions held (and so both sides were compared).
    pub applied: usize,
    pub drawn: usize,
    /// The counterexample, or why the rule could not be checked.
    pub failure: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Tensor { base: bool },
    View,
    Int,
}

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Checks each rule (both directions of a `<=>` rule) on `samples` random instances.
pub fn check_rules(defs: &[RuleDef], samples: usize) -> Vec<RuleReport> {
    let mut out = Vec::new();
    for (k, d) in defs.iter().enumerate() {
        out.push(check_one(d, &d.lhs, &d.rhs, &d.conditions, &d.name, samples, k as u64));
        if d.both_ways {
            out.push(check_one(d, &d.rhs, &d.lhs, &[], &format!("{}-rev", d.name), samples, k as u64 + 1000));
        }
    }
    out
}

fn check_one(
    d: &RuleDef,
    lhs: &str,
    rhs: &str,
    conditions: &[(String, Vec<String>)],
    name: &str,
    samples: usize,
    seed: u64,
) -> RuleReport {
    let mut report = RuleReport {
        name: name.to_string(),
        at: format!("{}:{}", d.file, d.line),
        applied: 0,
        drawn: 0,
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
    let kinds = match var_kinds(&lp.ast) {
        Ok(k) => k,
        Err(e) => {
            report.failure = Some(e);
            return report;
        }
    };
    let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ 0x5EED);
    for _ in 0..samples {
        report.drawn += 1;
        let inst = draw(&kinds, &mut rng);
        let l = instantiate(&lp.ast, &inst.bind);
        let Ok(lty) = verify(&l, &inst.inputs) else { continue };
        if !conditions_hold(&l, &inst, conditions) {
            continue;
        }
        report.applied += 1;
        let r = instantiate(&rp.ast, &inst.bind);
        let problem = match verify(&r, &inst.inputs) {
            Err(e) => Some(format!("the right side does not type-check: {e}")),
            Ok(rty) if rty != lty => Some(format!("the left side is {lty} but the right side is {rty}")),
            Ok(_) => compare(&l, &r, &inst.values),
        };
        if let Some(p) = problem {
            report.failure = Some(counterexample(&inst, &l, &r, &p));
            return report;
        }
    }
    if report.applied == 0 {
        report.failure = Some(format!("no instance of {samples} satisfied the conditions, so the rule is unchecked"));
    }
    report
}

/// Each variable's kind, from the positions where the pattern uses it.
fn var_kinds(ast: &RecExpr<ENodeOrVar<Node>>) -> Result<BTreeMap<Var, Kind>, String> {
    let mut kinds = BTreeMap::new();
    for n in ast.as_ref() {
        let ENodeOrVar::ENode(node) = n else { continue };
        for (i, &c) in node.children().iter().enumerate() {
            let ENodeOrVar::Var(v) = &ast[c] else { continue };
            let kind = match (node, i) {
                (Node::Access(_), 0) | (Node::Assign(_), 0) => Kind::Tensor { base: true },
                (Node::Access(_), 1) | (Node::Assign(_), 1) => Kind::View,
                (Node::Assign(_), 2) => Kind::Tensor { base: false },
                (Node::View(_), 2) => Kind::Int,
                (Node::Op(op, _), _) if crate::ir::is_unary(*op) || crate::ir::is_binary(*op) => {
                    Kind::Tensor { base: false }
                }
                (Node::Op(OpName::Where | OpName::Clamp, _), _) => Kind::Tensor { base: false },
                (Node::Op(OpName::IAdd | OpName::ISub | OpName::IMul, _), _) => Kind::Int,
                _ => return Err(format!("the checker cannot instantiate {v} where `{node}` uses it")),
            };
            match kinds.insert(*v, kind) {
                // A tensor read through a view somewhere is a base tensor everywhere.
                Some(Kind::Tensor { base: true }) if kind == (Kind::Tensor { base: false }) => {
                    kinds.insert(*v, Kind::Tensor { base: true });
                }
                Some(Kind::Tensor { .. }) if matches!(kind, Kind::Tensor { .. }) => {}
                Some(prev) if prev != kind => return Err(format!("{v} is used both as {prev:?} and as {kind:?}")),
                _ => {}
            }
        }
    }
    Ok(kinds)
}

/// One random instance: what each variable stands for, and the inputs the terms read.
struct Instance {
    bind: BTreeMap<Var, Term>,
    inputs: Vec<(String, DType, Vec<usize>)>,
    values: BTreeMap<String, Tensor>,
}

fn view_term(shape: &[usize], strides: &[i64], offset: i64) -> Term {
    let s: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let st: Vec<String> = strides.iter().map(|d| d.to_string()).collect();
    format!("(view (list {}) (list {}) {offset})", s.join(" "), st.join(" ")).parse().expect("a view term")
}

fn draw(kinds: &BTreeMap<Var, Kind>, rng: &mut Rng) -> Instance {
    let rank = 1 + rng.below(3) as usize;
    let storage: Vec<usize> = (0..rank).map(|_| 1 + rng.below(4) as usize).collect();
    let numel: usize = storage.iter().product();
    let mut views: Vec<(Vec<usize>, Vec<i64>, i64)> = Vec::new();
    let mut bind = BTreeMap::new();
    for (v, _) in kinds.iter().filter(|(_, k)| **k == Kind::View) {
        let pick = rng.below(4);
        let view = match views.get(rng.below(views.len() as u64) as usize) {
            Some(prev) if pick == 0 => prev.clone(),
            Some((s, st, _)) if pick == 1 => {
                let reach: i64 = s.iter().zip(st).map(|(&d, &t)| (d as i64 - 1) * t).sum();
                let off = rng.below((numel as i64 - reach).max(1) as u64) as i64;
                (s.clone(), st.clone(), off)
            }
            _ => random_view(numel, rng),
        };
        bind.insert(*v, view_term(&view.0, &view.1, view.2));
        views.push(view);
    }
    let mut inputs = Vec::new();
    let mut values = BTreeMap::new();
    for (k, (v, kind)) in kinds.iter().enumerate() {
        match kind {
            Kind::View => {}
            Kind::Int => {
                bind.insert(*v, (rng.below(7) as i64 - 3).to_string().parse().expect("an int"));
            }
            Kind::Tensor { base } => {
                let shape = if *base {
                    storage.clone()
                } else {
                    match (rng.below(6), views.get(rng.below(views.len() as u64) as usize)) {
                        (0..=2, Some((s, _, _))) => s.clone(),
                        (3, _) => vec![],
                        (4, _) => storage.clone(),
                        _ => (0..rng.below(3)).map(|_| 1 + rng.below(3) as usize).collect(),
                    }
                };
                let dtype = if rng.below(8) == 0 { DType::I64 } else { DType::F32 };
                let name = format!("t{k}");
                let t = crate::io::random_input(rng.next(), k, dtype, &shape).expect("a small tensor");
                values.insert(name.clone(), t);
                bind.insert(*v, format!("(input %{name})").parse().expect("an input term"));
                inputs.push((name, dtype, shape));
            }
        }
    }
    Instance { bind, inputs, values }
}

fn random_view(numel: usize, rng: &mut Rng) -> (Vec<usize>, Vec<i64>, i64) {
    for _ in 0..20 {
        let rank = rng.below(4) as usize;
        let shape: Vec<usize> = (0..rank).map(|_| 1 + rng.below(3) as usize).collect();
        let strides: Vec<i64> = (0..rank).map(|_| rng.below(5) as i64).collect();
        let reach: i64 = shape.iter().zip(&strides).map(|(&d, &s)| (d as i64 - 1) * s).sum();
        if reach < numel as i64 {
            let off = rng.below((numel as i64 - reach) as u64) as i64;
            return (shape, strides, off);
        }
    }
    (vec![1], vec![1], 0)
}

/// The pattern with its variables replaced by their instances, wrapped in a one-item tuple (a program's root).
fn instantiate(ast: &RecExpr<ENodeOrVar<Node>>, bind: &BTreeMap<Var, Term>) -> Term {
    let mut b = Builder::default();
    let mut ids: Vec<Id> = Vec::new();
    for n in ast.as_ref() {
        let id = match n {
            ENodeOrVar::Var(v) => {
                let t = &bind[v];
                let mut map: Vec<Id> = Vec::new();
                for node in t.as_ref() {
                    let node = node.clone().map_children(|c| map[usize::from(c)]);
                    map.push(b.add(node));
                }
                *map.last().expect("a non-empty term")
            }
            ENodeOrVar::ENode(node) => b.add(node.clone().map_children(|c| ids[usize::from(c)])),
        };
        ids.push(id);
    }
    let root = b.add(Node::Tuple(vec![*ids.last().expect("a non-empty pattern")].into()));
    b.extract(root)
}

fn conditions_hold(l: &Term, inst: &Instance, conditions: &[(String, Vec<String>)]) -> bool {
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
        let ids: Vec<Id> = args.iter().map(|a| g.find(class[a])).collect();
        predicate(&g, p, &ids)
    })
}

/// Why the two sides differ on these inputs, if they do.
fn compare(l: &Term, r: &Term, values: &BTreeMap<String, Tensor>) -> Option<String> {
    let fresh = || values.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect::<BTreeMap<_, _>>();
    let (a, b) = match (eval_program(l, &fresh()), eval_program(r, &fresh())) {
        (Ok(a), Ok(b)) => (a, b),
        (Ok(_), Err(e)) => return Some(format!("the right side fails: {}", e.0)),
        (Err(e), Ok(_)) => return Some(format!("the left side fails: {}", e.0)),
        (Err(_), Err(_)) => return None,
    };
    let (a, b) = (&a[0], &b[0]);
    if a.shape != b.shape || a.dtype() != b.dtype() {
        return Some(format!("shapes differ: {:?} and {:?}", a.shape, b.shape));
    }
    let (xa, xb) = (a.to_f64_vec(), b.to_f64_vec());
    for (i, (x, y)) in xa.iter().zip(&xb).enumerate() {
        let same = x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-5 + 1e-5 * y.abs();
        if !same {
            return Some(format!("element {i} (row-major) is {x} on the left and {y} on the right"));
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
        let vals = inst.values[name].to_f64_vec();
        let _ = writeln!(s, "  %{name}: {}{:?} = {:?}", d.annotation(), shape, vals);
    }
    let _ = writeln!(s, "  left:  {l}");
    let _ = write!(s, "  right: {r}");
    s
}
