//! Exhaustive checking of view-algebra rules on small instances: where both sides are made of `access`, `assign`,
//! views and integer arithmetic alone, every combination of views (rank, sizes, strides including negative and
//! zero, offsets) over every storage up to a few elements is tried, with distinct values in every tensor so that any
//! element read from the wrong place shows. The largest domain whose instance count fits [`LIMIT`] is used; a rule
//! that passes is reported as proved on that domain (and is still sampled on larger instances).

use std::collections::BTreeMap;

use egg::{ENodeOrVar, Var};

use super::draw::{input_term, int_term, reach, view_term, Instance, View};
use super::{try_instance, Kind, Outcome, Rule};
use crate::ir::{Node, OpName};
use crate::tensor::{DType, Scalar, Tensor};

/// The most instances one rule is checked on exhaustively.
const LIMIT: usize = 20000;

/// A domain: storages of 1..=`n` elements; views of rank <= `rank`, sizes 1..=`size`, strides in `lo..=hi`.
#[derive(Clone, Copy)]
struct Domain {
    n: usize,
    rank: usize,
    size: usize,
    lo: i64,
    hi: i64,
}

const DOMAINS: &[Domain] = &[
    Domain { n: 6, rank: 2, size: 3, lo: -2, hi: 2 },
    Domain { n: 5, rank: 2, size: 2, lo: -1, hi: 2 },
    Domain { n: 4, rank: 1, size: 3, lo: -1, hi: 2 },
    Domain { n: 3, rank: 1, size: 2, lo: -1, hi: 1 },
];

/// Whether both sides are view algebra (and so values only move, never combine).
fn view_algebra(rule: &Rule) -> bool {
    let ok = |ast: &egg::RecExpr<ENodeOrVar<Node>>| {
        ast.as_ref().iter().all(|n| match n {
            ENodeOrVar::Var(_) => true,
            ENodeOrVar::ENode(node) => matches!(
                node,
                Node::Access(_)
                    | Node::Assign(_)
                    | Node::View(_)
                    | Node::List(_)
                    | Node::Int(_)
                    | Node::Op(OpName::IAdd | OpName::ISub | OpName::IMul, _)
            ),
        })
    };
    ok(&rule.lhs.ast) && ok(&rule.rhs.ast) && rule.kinds.values().all(|k| !matches!(k, Kind::Tensor { cond: true, .. }))
}

/// Every in-bounds view of a storage of `n` elements within the domain.
fn views(n: usize, d: Domain) -> Vec<View> {
    let mut out = Vec::new();
    for rank in 0..=d.rank {
        let mut shapes: Vec<Vec<usize>> = vec![vec![]];
        let mut strides: Vec<Vec<i64>> = vec![vec![]];
        for _ in 0..rank {
            shapes = shapes.iter().flat_map(|s| (1..=d.size).map(move |k| [s.clone(), vec![k]].concat())).collect();
            strides = strides.iter().flat_map(|s| (d.lo..=d.hi).map(move |k| [s.clone(), vec![k]].concat())).collect();
        }
        for s in &shapes {
            for st in &strides {
                let Some((lo, hi)) = reach(s, st) else { continue };
                for off in -lo..=(n as i64 - 1 - hi) {
                    out.push((s.clone(), st.clone(), off));
                }
            }
        }
    }
    out
}

/// The number of instances of a domain.
fn count(kinds: &BTreeMap<Var, Kind>, d: Domain) -> usize {
    let nviews = kinds.values().filter(|k| **k == Kind::View).count();
    let mut total = 0usize;
    for n in 1..=d.n {
        let mut c = 1usize;
        for k in kinds.values() {
            let choices = match k {
                Kind::View => views(n, d).len(),
                Kind::Int => n + 2,
                Kind::Tensor { base: true, .. } => 1,
                Kind::Tensor { .. } => nviews + 1,
            };
            c = c.saturating_mul(choices);
        }
        total = total.saturating_add(c);
    }
    total
}

/// Checks a view-algebra rule on every instance of the largest domain that fits: None when the rule is not view
/// algebra, no domain fits, or no instance met the conditions; Some(Ok(domain)) when it held on all of them;
/// Some(Err(counterexample)) otherwise.
pub(super) fn check(rule: &Rule) -> Option<Result<String, String>> {
    if !view_algebra(rule) {
        return None;
    }
    let d = *DOMAINS.iter().find(|d| count(&rule.kinds, **d) <= LIMIT)?;
    let vars: Vec<(Var, Kind)> = rule.kinds.iter().map(|(v, k)| (*v, *k)).collect();
    let nviews = vars.iter().filter(|(_, k)| *k == Kind::View).count();
    let mut applied = 0usize;
    for n in 1..=d.n {
        let all = views(n, d);
        let radix: Vec<usize> = vars
            .iter()
            .map(|(_, k)| match k {
                Kind::View => all.len(),
                Kind::Int => n + 2,
                Kind::Tensor { base: true, .. } => 1,
                Kind::Tensor { .. } => nviews + 1,
            })
            .collect();
        if radix.contains(&0) {
            continue;
        }
        let mut idx = vec![0usize; vars.len()];
        loop {
            let inst = instance(&vars, &idx, &all, n);
            match try_instance(rule, &inst) {
                Outcome::Differs(cx) => return Some(Err(format!("{cx}\n  (found by exhaustive enumeration)"))),
                Outcome::Agrees => applied += 1,
                Outcome::Invalid | Outcome::Skipped => {}
            }
            // The next combination, in mixed radix.
            let mut k = 0;
            while k < idx.len() {
                idx[k] += 1;
                if idx[k] < radix[k] {
                    break;
                }
                idx[k] = 0;
                k += 1;
            }
            if k == idx.len() {
                break;
            }
        }
    }
    (applied > 0).then(|| {
        Ok(format!(
            "on all {applied} instances with storages of 1 to {} elements and views of rank <= {}, sizes <= {}, strides {}..={}",
            d.n, d.rank, d.size, d.lo, d.hi
        ))
    })
}

/// The instance at one point of the enumeration: distinct values in every tensor.
fn instance(vars: &[(Var, Kind)], idx: &[usize], all: &[View], n: usize) -> Instance {
    let mut bind = BTreeMap::new();
    let mut chosen: Vec<&View> = Vec::new();
    for ((v, k), &i) in vars.iter().zip(idx) {
        if *k == Kind::View {
            let view = &all[i];
            bind.insert(*v, view_term(&view.0, &view.1, view.2));
            chosen.push(view);
        }
    }
    let mut inputs = Vec::new();
    let mut values = BTreeMap::new();
    for (k, ((v, kind), &i)) in vars.iter().zip(idx).enumerate() {
        match kind {
            Kind::View => {}
            Kind::Int => {
                bind.insert(*v, int_term(i as i64 - 1));
            }
            Kind::Tensor { base, .. } => {
                let shape = if *base { vec![n] } else { chosen.get(i).map(|v| v.0.clone()).unwrap_or_default() };
                let count: usize = shape.iter().product();
                let first = 1000.0 * (k as f64 + 1.0);
                let vals: Vec<Scalar> = (0..count).map(|j| Scalar::F(first + j as f64)).collect();
                let name = format!("t{k}");
                let t = Tensor::from_scalars(DType::F32, &shape, &vals).expect("a small tensor");
                values.insert(name.clone(), t);
                bind.insert(*v, input_term(&name));
                inputs.push((name, DType::F32, shape));
            }
        }
    }
    Instance { bind, inputs, values }
}
