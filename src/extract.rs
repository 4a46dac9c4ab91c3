//! DAG-aware extraction: choose one node per e-class so that the term, counted as a DAG (a shared node is paid
//! once), is cheap; and `check` every choice (the root is chosen, choices are nodes of their classes, every child
//! class is chosen, and nothing is its own ancestor).
//!
//! The search starts from the tree extractor (the best choice when nothing is shared) and improves it greedily:
//! for each reachable class in turn, each alternative node is tried and kept when the whole DAG gets cheaper and
//! stays acyclic. It can only lower the DAG cost of the tree extractor's choice.
//!
//! It reads only the e-graph's nodes, whatever its analysis, so it depends on the term language alone
//! (saturation, `crate::rewrite`, calls it).

use egg::{Analysis, EGraph, Id, Language};
use hashbrown::{HashMap, HashSet};

use crate::ir::{Node, Term};

/// E-graphs with more classes than this skip the DAG-aware search (its cost grows with the square of the size).
pub const MAX_CLASSES: usize = 3000;

/// A node's own cost: every node costs one except literals and structure, which are free.
pub fn node_cost(n: &Node) -> f64 {
    match n {
        Node::Int(_) | Node::Float(_) | Node::Bool(_) | Node::DType(_) | Node::Name(_) | Node::NoneLit => 0.0,
        Node::List(_) | Node::Tuple(_) | Node::Get(_) | Node::View(_) => 0.0,
        _ => 1.0,
    }
}

/// One node per class.
pub type Choice = HashMap<Id, Node>;

/// Sum of node costs over the classes reachable from `root`, each once; None if a cycle is reachable.
pub fn dag_cost<N: Analysis<Node>>(g: &EGraph<Node, N>, choice: &Choice, root: Id) -> Option<f64> {
    let mut order = Vec::new();
    topo(g, choice, g.find(root), &mut HashSet::new(), &mut HashSet::new(), &mut order)?;
    Some(order.iter().map(|c| node_cost(&choice[c])).sum())
}

fn topo<N: Analysis<Node>>(
    g: &EGraph<Node, N>,
    choice: &Choice,
    c: Id,
    done: &mut HashSet<Id>,
    onstack: &mut HashSet<Id>,
    out: &mut Vec<Id>,
) -> Option<()> {
    if done.contains(&c) {
        return Some(());
    }
    if !onstack.insert(c) {
        return None;
    }
    for &k in choice.get(&c)?.children() {
        topo(g, choice, g.find(k), done, onstack, out)?;
    }
    onstack.remove(&c);
    done.insert(c);
    out.push(c);
    Some(())
}

/// Checks a choice: see the module's doc. The error names what is wrong.
pub fn check<N: Analysis<Node>>(g: &EGraph<Node, N>, choice: &Choice, root: Id) -> Result<(), String> {
    let root = g.find(root);
    if !choice.contains_key(&root) {
        return Err("the root class has no chosen node".into());
    }
    for (c, n) in choice {
        if !g[*c].nodes.iter().any(|m| m.clone().map_children(|k| g.find(k)) == n.clone().map_children(|k| g.find(k))) {
            return Err(format!("the node chosen for class {c} is not in it"));
        }
    }
    let mut order = Vec::new();
    topo(g, choice, root, &mut HashSet::new(), &mut HashSet::new(), &mut order)
        .ok_or("the choice is cyclic, or a reachable class has no chosen node")?;
    Ok(())
}

/// The term of a choice (which `check` accepted).
pub fn build<N: Analysis<Node>>(g: &EGraph<Node, N>, choice: &Choice, root: Id) -> Term {
    let mut order = Vec::new();
    topo(g, choice, g.find(root), &mut HashSet::new(), &mut HashSet::new(), &mut order).expect("a checked choice");
    let mut term = Term::default();
    let mut at: HashMap<Id, Id> = HashMap::new();
    for c in order {
        let n = choice[&c].clone().map_children(|k| at[&g.find(k)]);
        at.insert(c, term.add(n));
    }
    term
}

/// The best tree under a cost function: egg's `Extractor` semantics (per class, the cheapest node by tree cost;
/// ties keep the node found first), computed with a worklist: a class is re-costed only when one of its children's
/// costs fell, so a chain of n classes costs O(n), not egg's O(n^2) rounds over every class.
pub struct TreeExtractor<'a, CF: egg::CostFunction<Node>, N: Analysis<Node>> {
    g: &'a EGraph<Node, N>,
    costs: HashMap<Id, (CF::Cost, Node)>,
}

impl<'a, CF: egg::CostFunction<Node>, N: Analysis<Node>> TreeExtractor<'a, CF, N> {
    pub fn new(g: &'a EGraph<Node, N>, mut cf: CF) -> Self {
        let mut costs: HashMap<Id, (CF::Cost, Node)> = HashMap::new();
        let mut queue: std::collections::VecDeque<Id> = g.classes().map(|c| c.id).collect();
        let mut queued: HashSet<Id> = queue.iter().copied().collect();
        while let Some(c) = queue.pop_front() {
            queued.remove(&c);
            let mut best: Option<(CF::Cost, &Node)> = None;
            for n in g[c].iter() {
                if !n.all(|k| costs.contains_key(&g.find(k))) {
                    continue;
                }
                let cost = cf.cost(n, |k| costs[&g.find(k)].0.clone());
                if best.as_ref().is_none_or(|(b, _)| cost < *b) {
                    best = Some((cost, n));
                }
            }
            let Some((cost, node)) = best else { continue };
            if costs.get(&c).is_some_and(|(old, _)| cost >= *old) {
                continue;
            }
            costs.insert(c, (cost, node.clone()));
            for p in g[c].parents() {
                let p = g.find(p);
                if queued.insert(p) {
                    queue.push_back(p);
                }
            }
        }
        TreeExtractor { g, costs }
    }

    pub fn find_best_node(&self, class: Id) -> &Node {
        &self.costs[&self.g.find(class)].1
    }

    /// The chosen node of every class that has a finite cost.
    pub fn choice(&self) -> Choice {
        self.costs.iter().map(|(c, (_, n))| (*c, n.clone())).collect()
    }

    /// The cheapest tree of `class` and its cost.
    pub fn find_best(&self, class: Id) -> (CF::Cost, Term) {
        let (cost, root) = self.costs[&self.g.find(class)].clone();
        (cost, root.build_recexpr(|id| self.find_best_node(id).clone()))
    }
}

/// The tree extractor's choice (by `AstSize`) for every class.
pub fn tree_choice<N: Analysis<Node>>(g: &EGraph<Node, N>) -> Choice {
    let ex = TreeExtractor::new(g, egg::AstSize);
    g.classes().map(|c| (c.id, ex.find_best_node(c.id).clone())).collect()
}

/// The DAG-aware choice: the tree choice, improved greedily (at most `rounds` passes over the reachable classes).
pub fn dag_choice<N: Analysis<Node>>(g: &EGraph<Node, N>, root: Id, rounds: usize) -> Choice {
    let mut choice = tree_choice(g);
    let Some(mut best) = dag_cost(g, &choice, root) else { return choice };
    for _ in 0..rounds {
        let mut improved = false;
        let mut order = Vec::new();
        topo(g, &choice, g.find(root), &mut HashSet::new(), &mut HashSet::new(), &mut order);
        for c in order {
            let current = choice[&c].clone();
            for alt in &g[c].nodes {
                if *alt == current {
                    continue;
                }
                choice.insert(c, alt.clone());
                match dag_cost(g, &choice, root) {
                    Some(cost) if cost < best => {
                        best = cost;
                        improved = true;
                        break;
                    }
                    _ => {
                        choice.insert(c, current.clone());
                    }
                }
            }
        }
        if !improved {
            break;
        }
    }
    choice
}

/// What [`plan_search`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SearchStats {
    /// Candidate terms planned and priced by the search (the seeds not included).
    pub priced: usize,
    /// How many of them were cheaper than the best before them, and kept.
    pub improvements: usize,
    /// Whether the budget stopped the search (otherwise a whole pass over the reachable classes found nothing
    /// cheaper).
    pub budget_spent: bool,
}

impl std::fmt::Display for SearchStats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let stop = if self.budget_spent { "its budget is spent" } else { "no single change prices cheaper" };
        match self.priced {
            0 if !self.budget_spent => write!(f, "no other choice of the e-graph to price"),
            n => write!(
                f,
                "priced {n} other choices of the e-graph, kept {} cheaper; stopped: {stop}",
                self.improvements
            ),
        }
    }
}

/// How much a [`plan_search`] may price: at most `candidates` terms, and at most `nodes` term nodes over all of them
/// (planning costs time in proportion to a term's size, so a large program gets fewer candidates). Both are counts,
/// so the search, and the plan it chooses, are the same on every run.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    pub candidates: usize,
    pub nodes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget { candidates: 64, nodes: 200_000 }
    }
}

/// Local search over the e-graph's choices with a whole-plan price: from the cheapest of `seeds` (choices and their
/// known prices), passes over the classes the current choice reaches, the root's first; in each class it tries
/// the other nodes, builds the term, and prices it with `price` (`None`: the term cannot be planned); the first
/// cheaper one is kept. A node that is the current one with its children permuted is not tried (it plans the same),
/// nor a choice that is cyclic, nor a term already priced. Stops after a pass that keeps nothing, or when `budget`
/// is spent. Returns the best choice, its price and what the search did.
pub fn plan_search<N: Analysis<Node>>(
    g: &EGraph<Node, N>,
    root: Id,
    seeds: &[(Choice, f64)],
    budget: Budget,
    mut price: impl FnMut(&Term) -> Option<f64>,
) -> Option<(Choice, f64, SearchStats)> {
    let root = g.find(root);
    let acyclic: Vec<&(Choice, f64)> = seeds.iter().filter(|(c, _)| dag_cost(g, c, root).is_some()).collect();
    let (mut best, mut best_cost) = acyclic.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|(c, p)| (c.clone(), *p))?;
    let mut seen: HashSet<Vec<Node>> = acyclic.iter().map(|(c, _)| build(g, c, root).as_ref().to_vec()).collect();
    let mut stats = SearchStats::default();
    let mut nodes_spent = 0usize;
    loop {
        let mut order = Vec::new();
        topo(g, &best, root, &mut HashSet::new(), &mut HashSet::new(), &mut order);
        let mut improved = false;
        for &c in order.iter().rev() {
            let current = best[&c].clone();
            for alt in alternatives(g, c, &current) {
                if stats.priced >= budget.candidates || nodes_spent >= budget.nodes {
                    stats.budget_spent = true;
                    return Some((best, best_cost, stats));
                }
                best.insert(c, alt);
                let term = dag_cost(g, &best, root).map(|_| build(g, &best, root));
                let fresh = term.as_ref().is_some_and(|t| seen.insert(t.as_ref().to_vec()));
                let cost = match (&term, fresh) {
                    (Some(t), true) => {
                        stats.priced += 1;
                        nodes_spent += t.as_ref().len();
                        price(t)
                    }
                    _ => None,
                };
                match cost {
                    Some(p) if p < best_cost => {
                        best_cost = p;
                        stats.improvements += 1;
                        improved = true;
                        break;
                    }
                    _ => {
                        best.insert(c, current.clone());
                    }
                }
            }
        }
        if !improved {
            return Some((best, best_cost, stats));
        }
    }
}

/// The nodes of class `c` worth trying instead of `current`: those with another operator first, then those with the
/// same operator and other children; not `current`, nor `current` with its children permuted. In the e-graph's
/// order within each group, so the search is deterministic.
fn alternatives<N: Analysis<Node>>(g: &EGraph<Node, N>, c: Id, current: &Node) -> Vec<Node> {
    let canon = |n: &Node| n.clone().map_children(|k| g.find(k));
    let op = |n: &Node| n.clone().map_children(|_| Id::from(0usize));
    let sorted = |n: &Node| {
        let mut k: Vec<Id> = n.children().iter().map(|&k| g.find(k)).collect();
        k.sort();
        k
    };
    let cur = canon(current);
    let (mut other_op, mut same_op) = (Vec::new(), Vec::new());
    for n in &g[c].nodes {
        let n = canon(n);
        if op(&n) != op(&cur) {
            other_op.push(n);
        } else if sorted(&n) != sorted(&cur) {
            same_op.push(n);
        }
    }
    other_op.extend(same_op);
    other_op
}
