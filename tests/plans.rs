//! Extraction and plans: over the whole corpus, the DAG-aware extractor's choice passes `check` and never costs more
//! than egg's tree extractor's; `check` rejects broken choices; plan search, grouping and buffer reuse. (That ours
//! launches no more kernels than the baselines, and that no plan writes into its inputs, is checked with the
//! corpus tests, on their plans: `tests/corpus.rs`, `common::check_corpus_plan`.)

mod common;

use std::collections::BTreeMap;

use funcfuse::extract::{build, check, dag_choice, dag_cost, plan_search, tree_choice, Budget};
use funcfuse::lower::Policy;
use funcfuse::rewrite::TermAnalysis;

fn saturated(f: &funcfuse::functionalize::Functional) -> (funcfuse::rewrite::TermGraph, egg::Id) {
    let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().unwrap()).unwrap();
    let runner = egg::Runner::<funcfuse::ir::Node, TermAnalysis>::new(TermAnalysis::new(&f.inputs))
        .with_iter_limit(30)
        .with_node_limit(50_000)
        .with_expr(&f.term)
        .run(&rules);
    let root = runner.roots[0];
    (runner.egraph, root)
}

#[test]
fn dag_extraction_checks_and_never_costs_more_than_tree_extraction() {
    let mut strictly_better = 0;
    for p in common::corpus_programs() {
        let module = common::load(&p);
        let f = funcfuse::functionalize::functionalize(&module, &p.func, &BTreeMap::new()).unwrap();
        let (g, root) = saturated(&f);
        let tree = tree_choice(&g);
        let dag = dag_choice(&g, root, 4);
        check(&g, &tree, root).unwrap_or_else(|e| panic!("{}: tree choice: {e}", p.label()));
        check(&g, &dag, root).unwrap_or_else(|e| panic!("{}: DAG choice: {e}", p.label()));
        let (t, d) = (dag_cost(&g, &tree, root).unwrap(), dag_cost(&g, &dag, root).unwrap());
        assert!(d <= t, "{}: DAG choice costs {d}, tree choice {t}", p.label());
        strictly_better += usize::from(d < t);
    }
    eprintln!("the DAG choice is cheaper than the tree choice on {strictly_better} programs");
}

#[test]
fn check_rejects_broken_choices() {
    let inputs = vec![("a".to_string(), funcfuse::tensor::DType::F32, vec![4])];
    let mut g = funcfuse::rewrite::TermGraph::new(TermAnalysis::new(&inputs));
    let x = g.add_expr(&"(exp (input %a))".parse().unwrap());
    let y = g.add_expr(&"(neg (exp (input %a)))".parse().unwrap());
    g.rebuild();
    let good = tree_choice(&g);
    check(&g, &good, y).unwrap();
    // A node that is not in its class.
    let mut wrong = good.clone();
    wrong.insert(g.find(y), g[x].nodes[0].clone());
    assert!(check(&g, &wrong, y).unwrap_err().contains("not in it"));
    // A missing child class.
    let mut missing = good.clone();
    missing.remove(&g.find(x));
    assert!(check(&g, &missing, y).is_err());
    // A cycle: exp(a) = neg(exp(a)) makes one class that contains its own parent.
    g.union(x, y);
    g.rebuild();
    let mut cyclic = tree_choice(&g);
    let c = g.find(x);
    let neg =
        g[c].nodes.iter().find(|n| matches!(n, funcfuse::ir::Node::Op(funcfuse::ir::OpName::Neg, _))).unwrap().clone();
    cyclic.insert(c, neg);
    assert!(check(&g, &cyclic, c).unwrap_err().contains("cyclic"));
}

#[test]
fn plan_search_keeps_what_prices_cheaper_within_its_budget() {
    let inputs: Vec<_> = ["a", "b"].iter().map(|n| (n.to_string(), funcfuse::tensor::DType::F32, vec![4])).collect();
    let mut g = funcfuse::rewrite::TermGraph::new(TermAnalysis::new(&inputs));
    let short = g.add_expr(&"(exp (input %a))".parse().unwrap());
    let long = g.add_expr(&"(neg (neg (input %b)))".parse().unwrap());
    let root = g.add_expr(&"(add (neg (neg (input %b))) (input %a))".parse().unwrap());
    g.union(short, long);
    g.rebuild();
    // The seed chooses the longer alternative; the price is the term's size, so the shorter one is cheaper.
    let mut seed = tree_choice(&g);
    let c = g.find(short);
    let neg = g[c].nodes.iter().find(|n| matches!(n, funcfuse::ir::Node::Op(funcfuse::ir::OpName::Neg, _))).unwrap();
    seed.insert(c, neg.clone());
    let size = |t: &funcfuse::ir::Term| t.as_ref().len() as f64;
    let seed_price = size(&build(&g, &seed, root));
    let mut priced = Vec::new();
    let (best, price, stats) = plan_search(&g, root, &[(seed.clone(), seed_price)], Budget::default(), |t| {
        priced.push(t.to_string());
        Some(size(t))
    })
    .unwrap();
    check(&g, &best, root).unwrap();
    assert_eq!(build(&g, &best, root).to_string(), r#"(add (exp (input "%a")) (input "%a"))"#);
    assert_eq!((price, seed_price), (4.0, 7.0));
    assert_eq!((stats.priced, stats.improvements, stats.budget_spent), (priced.len(), 1, false));
    // Each priced term once, never the seed's.
    assert!(!priced.contains(&build(&g, &seed, root).to_string()));
    let mut unique = priced.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), priced.len(), "{priced:?}");
    // No budget: the seed comes back, and the search says its budget stopped it.
    let none = Budget { candidates: 0, nodes: 0 };
    let (kept, p, stats) = plan_search(&g, root, &[(seed.clone(), seed_price)], none, |t| Some(size(t))).unwrap();
    assert_eq!((kept == seed, p, stats.priced, stats.budget_spent), (true, 7.0, 0, true));
}

fn fused_plan(source: &str, func: &str) -> funcfuse::lower::Plan {
    let module = funcfuse::frontend::parse_module("test.py", source).unwrap();
    let f = common::optimized(&module, func).unwrap();
    funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap()
}

#[test]
fn independent_kernels_one_kernel_reads_launch_as_one_group_only_where_all_are_needed() {
    let src = r#"
import torch
def both(x: f32[80, 500], y: f32[80, 500]) -> f32[80]:
    return torch.tanh(x.sum(dim=1)) * y.amax(dim=1) + x.amin(dim=1)

def in_branch(x: f32[80, 500], y: f32[80, 500]) -> f32[80]:
    if x.sum() > 0:
        out = torch.tanh(x.sum(dim=1)) * y.amax(dim=1) + x.amin(dim=1)
    else:
        out = y[:, 0] * 2.0
    return out
"#;
    // The min carries the rest as its epilogue and reads the sum and the max at its own point: the three small
    // reductions are one chained launch (80 rows: too many for the min to compute the others itself as pres).
    let p = fused_plan(src, "both");
    assert_eq!(p.groups.len(), 1, "{}", p.describe());
    assert_eq!(p.groups[0].len(), 3);
    // Inside a branch they would run before the branch is decided: no group.
    let q = fused_plan(src, "in_branch");
    assert!(q.groups.is_empty(), "{}", q.describe());
    // Both plans run, grouped or not, and match the reference engine (the corpus tests check every program).
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    for func in ["both", "in_branch"] {
        let inputs = common::seeded_inputs(&module, func, 3);
        for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
            common::check_plan_on(&module, func, &inputs, Policy::Fused, target).unwrap();
        }
    }
}

#[test]
fn a_value_written_through_views_is_computed_by_the_writes() {
    // `h` is written into two buffers through row views: each write reads 16 of its elements, not one per element of
    // the 64x16 buffer it writes, so computing it in both writes is cheaper than a kernel that stores it first.
    let src = r#"
import torch
def cell(x: f32[16], y: f32[16]) -> tuple[f32[64, 16], f32[64, 16]]:
    a = torch.zeros(64, 16)
    b = torch.zeros(64, 16)
    h = torch.sigmoid(x) * torch.tanh(y)
    a[3] = h
    b[5] = h
    return a, b
"#;
    let p = fused_plan(src, "cell");
    assert_eq!(p.kernels.len(), 2, "{}", p.describe());
    assert!(!p.describe().contains("= mul f32[16]: kernel"), "{}", p.describe());
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "cell", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "cell", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn levels_of_a_cat_are_computed_where_the_cat_writes_them() {
    // Each level is read by the cat at its own 4800 (1200, 300) elements, not at the cat's 6300: computing it where
    // the cat writes it costs nothing more than a kernel of its own, which would store it and the cat copy it.
    let src = r#"
import torch
def levels(a: f32[3, 40, 40], b: f32[3, 20, 20], c: f32[3, 10, 10]) -> f32[6300]:
    parts = [torch.sigmoid(t).permute(1, 2, 0).reshape(-1) * 2.0 + torch.exp(t).permute(1, 2, 0).reshape(-1) for t in [a, b, c]]
    return torch.cat(parts, 0)
"#;
    let p = fused_plan(src, "levels");
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "levels", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "levels", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn the_worklist_tree_extractor_finds_egg_extractors_costs() {
    for p in common::corpus_programs() {
        let module = common::load(&p);
        let f = funcfuse::functionalize::functionalize(&module, &p.func, &BTreeMap::new()).unwrap();
        let (g, _) = saturated(&f);
        let ours = funcfuse::extract::TreeExtractor::new(&g, egg::AstSize);
        let egg_ex = egg::Extractor::new(&g, egg::AstSize);
        for c in g.classes() {
            let (cost, term) = ours.find_best(c.id);
            assert_eq!(cost, egg_ex.find_best_cost(c.id), "{}: class {}", p.label(), c.id);
            // The term is made of the chosen nodes, its root a node of the class.
            assert!(g[c.id].iter().any(|n| n == ours.find_best_node(c.id)), "{}", p.label());
            assert!(!term.as_ref().is_empty());
        }
    }
}

#[test]
fn a_cache_written_step_by_step_is_written_in_place() {
    // attention writes k[:, :, t, :] and v[:, :, t, :] for 18 steps and reads the prefix after each. Recomputed in
    // their readers, the writes nest into ever longer chains of selects over the whole cache; stored, each writes
    // its 768 elements in place, and the cost model prefers that.
    let p = common::corpus_programs().into_iter().find(|p| p.func == "attention").unwrap();
    let module = common::load(&p);
    let f = common::optimized(&module, &p.func).unwrap();
    let pl = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    let in_place: Vec<usize> = pl
        .how
        .iter()
        .filter_map(|h| match h {
            funcfuse::lower::How::InPlace(k) => Some(pl.kernels[*k].domain.iter().product()),
            _ => None,
        })
        .collect();
    assert_eq!(in_place.len(), 36, "{}", pl.describe());
    assert!(in_place.iter().all(|&n| n == 12 * 64), "{in_place:?}");
}

#[test]
fn the_cost_profile_decides_between_storing_and_recomputing() {
    // The same term planned for the shipped CPU profile and for a device where a launch costs a millisecond: the
    // second plan launches fewer kernels, and each plan is the cheaper one under its own profile.
    // (attention's two plans launch alike since its small reductions chain with their readers.)
    let p = common::corpus_programs().into_iter().find(|p| p.func == "ssd").unwrap();
    let module = common::load(&p);
    let f = common::optimized(&module, &p.func).unwrap();
    let shipped = funcfuse::cost::Profile::shipped_c();
    // Every class's launch costs a millisecond too: the shipped profile decides by its classes.
    let classes = shipped.classes.map(|mut c| {
        c.iter_mut().for_each(|row| row[0] = 1e-3);
        c
    });
    let slow_launch = funcfuse::cost::Profile { launch_s: 1e-3, classes, ..shipped.clone() };
    let cpu = funcfuse::lower::plan_for(&f.term, &f.inputs, Policy::Fused, &shipped).unwrap();
    let launchy = funcfuse::lower::plan_for(&f.term, &f.inputs, Policy::Fused, &slow_launch).unwrap();
    let launches = |pl: &funcfuse::lower::Plan| funcfuse::lower::estimate::plan_estimate(pl, &shipped).launches;
    assert!(launches(&launchy) < launches(&cpu), "{} vs {}", launches(&launchy), launches(&cpu));
    // Each is cheaper by the figures the planner decides by.
    let cost =
        |pl: &funcfuse::lower::Plan, pr: &funcfuse::cost::Profile| funcfuse::lower::estimate::decision_cost(pl, pr);
    assert!(cost(&launchy, &slow_launch) < cost(&cpu, &slow_launch));
    assert!(cost(&cpu, &shipped) <= cost(&launchy, &shipped));
}

/// The C device keeps buffers in a pool across runs and launches: a plan run again on the same device, with other
/// inputs in between, gives the same bits, and the run in between gives what a fresh device gives.
#[test]
fn buffers_reused_across_runs_give_the_same_results() {
    for p in common::corpus_programs().into_iter().filter(|p| p.label().starts_with("workloads/")) {
        let module = common::load(&p);
        // Our plan and its kernels from the corpus tests' batch of the file (`common::file_batch`).
        let batch = common::file_batch(&p.file);
        let ours = || batch.plan(&p.func, Policy::Fused, funcfuse::backend::Target::C).unwrap();
        let (_, plan, mut dev) = ours();
        let bits = |out: &[funcfuse::tensor::Tensor]| -> Vec<Vec<u64>> {
            out.iter().map(|t| t.to_f64_vec().iter().map(|v| v.to_bits()).collect()).collect()
        };
        let inputs = |seed| common::seeded_inputs(&module, &p.func, seed);
        let given = inputs(1);
        let before: Vec<Vec<u64>> = bits(&given.values().cloned().collect::<Vec<_>>());
        let first = bits(&dev.run(plan, &given).unwrap().0);
        let after: Vec<Vec<u64>> = bits(&given.values().cloned().collect::<Vec<_>>());
        assert_eq!(before, after, "{}: the run wrote into the caller's inputs", p.label());
        // The outputs a caller keeps are not buffers a later run may take from the pool.
        let kept = dev.run(plan, &given).unwrap().0;
        let between = bits(&dev.run(plan, &inputs(2)).unwrap().0);
        assert_eq!(first, bits(&kept), "{}: a later run wrote into outputs the caller kept", p.label());
        let again = bits(&dev.run(plan, &inputs(1)).unwrap().0);
        assert_eq!(first, again, "{}: a second run on the same device differs", p.label());
        // A fresh device (buffers of its own) on the same kernels.
        let (_, _, mut fresh) = ours();
        assert_eq!(between, bits(&fresh.run(plan, &inputs(2)).unwrap().0), "{}: reused buffers differ", p.label());
        // Inputs given up to the run (written in place where the plan writes into them) give the same outputs;
        // an input the caller still holds elsewhere is copied, not written.
        let (donated, stats) = dev.run_donated(plan, &mut inputs(1)).unwrap();
        assert_eq!(first, bits(&donated), "{}: donated inputs", p.label());
        // Where the plan writes into its inputs it copies them, unless they are given up: then nothing is copied.
        let run = funcfuse::cost::class::RUN;
        let copied = dev.run(plan, &inputs(1)).unwrap().1.by_class[run].bytes;
        assert!(funcfuse::lower::exec::shares_inputs(plan) || stats.by_class[run].bytes < copied, "{}", p.label());
        let held = inputs(1);
        let out = dev.run_donated(plan, &mut held.clone()).unwrap().0;
        assert_eq!(first, bits(&out), "{}: donated inputs held elsewhere", p.label());
        assert_eq!(before, bits(&held.values().cloned().collect::<Vec<_>>()), "{}: wrote a held input", p.label());
    }
}

/// The kernels index an input by the plan's shape: an input of another shape or dtype is refused before any runs.
#[test]
fn an_input_of_another_shape_than_the_plans_is_refused() {
    let src = "import torch\ndef f(x: f32[4, 4]) -> f32[4, 4]:\n    return x * 2.0\n";
    let plan = fused_plan(src, "f");
    let mut dev = funcfuse::backend::Loaded::new(&plan, funcfuse::backend::Target::C).unwrap();
    let input = |d, s: &[usize]| BTreeMap::from([("x".to_string(), funcfuse::tensor::Tensor::zeros(d, s).unwrap())]);
    assert!(dev.run(&plan, &input(funcfuse::tensor::DType::F32, &[4, 4])).is_ok());
    for (d, s) in [(funcfuse::tensor::DType::F32, &[5, 5][..]), (funcfuse::tensor::DType::F64, &[4, 4][..])] {
        let e = dev.run(&plan, &input(d, s)).unwrap_err();
        assert!(e.contains("input `x` is") && e.contains("the plan takes f32[4, 4]"), "{e}");
        let e = dev.run_donated(&plan, &mut input(d, s)).unwrap_err();
        assert!(e.contains("the plan takes f32[4, 4]"), "{e}");
    }
}

#[test]
fn elementwise_kernels_of_one_step_run_as_one_multi_output_kernel_only_where_each_reads_its_own_point() {
    let src = r#"
import torch
def cell(x: f32[6, 16, 16], w: f32[16, 16]) -> tuple[f32[16, 16], f32[16, 16]]:
    h = torch.zeros(16, 16)
    c = torch.zeros(16, 16)
    for t in range(6):
        g = x[t] + h @ w
        c = torch.tanh(g) + c * 0.5
        h = torch.sigmoid(c) * torch.tanh(g)
    return h, c

def transposed(x: f32[6, 16, 16], w: f32[16, 16]) -> tuple[f32[16, 16], f32[16, 16]]:
    h = torch.zeros(16, 16)
    c = torch.zeros(16, 16)
    for t in range(6):
        g = x[t] + h @ w
        c = torch.tanh(g) + c * 0.5
        h = torch.sigmoid(c.t()) * torch.tanh(g)
    return h, c

def stacked(x: f32[6, 16], w: f32[16, 16]) -> tuple[f32[4, 16], f32[4, 16]]:
    hs = torch.zeros(4, 16)
    cs = torch.zeros(4, 16)
    for t in range(6):
        inp = x[t]
        for j in range(4):
            g = inp + hs[j] @ w
            c = torch.sigmoid(g) * cs[j] + torch.tanh(g)
            hs[j] = torch.tanh(c) * torch.sigmoid(g)
            cs[j] = c
            inp = hs[j]
    return hs, cs

def neighbour(x: f32[6, 16], w: f32[16, 16]) -> tuple[f32[4, 16], f32[4, 16]]:
    hs = torch.zeros(4, 16)
    cs = torch.zeros(4, 16)
    for t in range(6):
        inp = x[t]
        for j in range(4):
            g = inp + hs[j] @ w
            c = torch.sigmoid(g) * cs[3 - j] + torch.tanh(g)
            hs[j] = torch.tanh(c) * torch.sigmoid(g)
            cs[j] = c
            inp = hs[j]
    return hs, cs
"#;
    let chained = |p: &funcfuse::lower::Plan| -> Vec<Vec<usize>> {
        p.groups.iter().zip(&p.chained).filter(|(_, c)| **c).map(|(g, _)| g.clone()).collect()
    };
    // c and h of one step: h reads c where it computes it, one launch per step.
    let p = fused_plan(src, "cell");
    assert_eq!(chained(&p).len(), 1, "{}", p.describe());
    // h reads c transposed: another point's value, which another thread may not have written yet. Not merged, and
    // the plan says why.
    // (The matmul may head a chain with c, which reads it at its own point.)
    let q = fused_plan(src, "transposed");
    assert!(
        chained(&q).iter().all(|g| g
            .iter()
            .filter(|&&k| q.kernels[k].reduce.is_none() && q.kernels[k].domain == vec![16, 16])
            .count()
            < 2),
        "{}",
        q.describe()
    );
    // Writes of rows of stacked state, each step's cell reading `cs[j]` where `cs[j] = c` writes: chained.
    let s = fused_plan(src, "stacked");
    assert!(chained(&s).iter().any(|g| g.len() >= 2), "{}", s.describe());
    // A cell reading row `3 - j` of the state that another kernel of the step writes at row `j`: not at the point it
    // writes, so not merged (conservative: the check compares positions, not whether they can meet), and explained.
    let n = fused_plan(src, "neighbour");
    assert!(n.merge_notes.iter().any(|m| m.contains("at another point")), "{:?}\n{}", n.merge_notes, n.describe());
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    for func in ["cell", "transposed", "stacked", "neighbour"] {
        let inputs = common::seeded_inputs(&module, func, 3);
        for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
            common::check_plan_on(&module, func, &inputs, Policy::Fused, target).unwrap();
        }
    }
}

#[test]
fn a_copy_through_a_view_that_covers_a_fresh_buffer_runs_over_the_view() {
    // `reshape` of a permuted tensor copies it into a fresh buffer through a view that names every element once
    // (FCOS's box regression, then `stack`): the kernel runs over the view's points and stores through it, with no
    // select over the buffer recovering each element's view position by divisions, and it writes the whole buffer,
    // which the executor therefore does not zero. (The copy fused into it is still read through its view's inverse,
    // as a copy is wherever it fuses into a reader instead of being stored.)
    let src = r#"
import torch
def permuted_stack(x: f32[1, 4, 8, 8], p: f32[64, 2]) -> f32[64, 4]:
    reg = torch.exp(x.permute(0, 2, 3, 1).reshape(-1, 4)) * 8.0
    return torch.stack([p[:, 0] - reg[:, 0], p[:, 1] - reg[:, 1], p[:, 0] + reg[:, 2], p[:, 1] + reg[:, 3]], dim=1)
"#;
    // The functional term, planned as it is: the rewrites may fuse the copy elsewhere.
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let f = funcfuse::functionalize::functionalize(&module, "permuted_stack", &BTreeMap::new()).unwrap();
    let p = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    let described = p.describe();
    assert!(described.contains("assign f32[256]: kernel k0 (new buffer) over [64, 4]"), "{described}");
    let k = &p.kernels[0];
    assert_eq!(k.store.render(), "(i0 + 64*i1)");
    assert!(k.covers(), "{described}");
    let inputs = common::seeded_inputs(&module, "permuted_stack", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "permuted_stack", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn a_reduction_read_through_a_reshape_carries_the_reader_as_its_epilogue() {
    // As seq2seq's `ctx = (attn @ memory).unsqueeze(0)` (loop state): a reduction's result read through a view of as
    // many elements in the same row-major order. The reader is evaluated at the reduction's point of the same
    // position (`12 * (p / 12) + p % 12` is `p` again), so the sum and the reshape (with the tanh) are one kernel; a
    // transposing reader is not such a view.
    let src = r#"
import torch
def reshaped(x: f32[6, 4, 500]) -> f32[2, 12]:
    return torch.tanh(x.sum(dim=2).reshape(2, 12))

def transposed(x: f32[6, 4, 500]) -> f32[4, 6]:
    return torch.tanh(x.sum(dim=2).t().contiguous())
"#;
    let p = fused_plan(src, "reshaped");
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    assert!(p.kernels[0].epilogue.is_some(), "{}", p.describe());
    let q = fused_plan(src, "transposed");
    assert!(q.kernels.iter().all(|k| k.epilogue.is_none()), "{}", q.describe());
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    for func in ["reshaped", "transposed"] {
        let inputs = common::seeded_inputs(&module, func, 3);
        for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
            common::check_plan_on(&module, func, &inputs, Policy::Fused, target).unwrap();
        }
    }
}

/// Python's scalars are the host's under every policy: `done = t >= 8 or tok.item() == 3` and `while not done`
/// launch no kernel (as in PyTorch eager), and the run matches the reference.
#[test]
fn python_bools_of_a_decode_loop_launch_no_kernel() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/micro/decode_steps.py");
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let f = common::optimized(&module, "greedy_until_eos").unwrap();
    for policy in [Policy::Fused, Policy::Eager, Policy::Unfunctionalized] {
        let p = funcfuse::lower::plan(&f.term, &f.inputs, policy).unwrap();
        assert!(
            p.kernels.iter().all(|k| k.out_dtype != funcfuse::tensor::DType::Bool),
            "{policy:?}: a kernel computes a bool\n{}",
            p.describe()
        );
    }
    // A flag that a kernel reads (multiplied in, returned) stays a tensor: its plan still matches (corpus test).
    let g = common::optimized(&module, "flag_read_by_a_kernel").unwrap();
    let p = funcfuse::lower::plan(&g.term, &g.inputs, Policy::Fused).unwrap();
    assert!(p.kernels.iter().any(|k| k.out_dtype == funcfuse::tensor::DType::Bool), "{}", p.describe());
}

/// issue #16: the energies of an attention step, their softmax and its max and sum are computed by the GEMV that
/// reads the softmax (pres, `lower/pre.rs`); a reduction computed before a loop and read inside it, or over a buffer
/// written in place, stays a kernel of its own.
#[test]
fn small_values_are_computed_by_the_kernels_that_read_them() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/micro/small_reductions.py");
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let plan = |name: &str| {
        let f = common::optimized(&module, name).unwrap();
        funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap()
    };
    let p = plan("energies_softmax_context");
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    assert_eq!(p.kernels[0].pre.len(), 4, "the GEMV, max, sum and softmax: {:?}", p.kernels[0].pre);
    let p = plan("reduction_before_a_loop");
    assert!(p.kernels.iter().all(|k| k.pre.is_empty()), "{}", p.describe());
    let eager = {
        let f = common::optimized(&module, "reduction_before_a_loop").unwrap();
        funcfuse::lower::plan(&f.term, &f.inputs, Policy::Eager).unwrap()
    };
    assert!(eager.kernels.iter().all(|k| k.pre.is_empty()), "pres are ours only");
    // A max over a buffer that a later write changes in place: its reader would run after that write.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/micro/decode_steps.py");
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let f = common::optimized(&module, "max_then_write_into_its_input").unwrap();
    let p = funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap();
    assert!(p.kernels.iter().all(|k| k.pre.is_empty()), "{}", p.describe());
}

/// A max along a dim is one reduction: where the indices are read, the values are gathered at them, the table they
/// come from computed there (not stored) and the indices not checked on the host (in range by construction); where
/// only the values are read, the gather is the reduction to the values again (`prepare.rs`), which fuses on.
#[test]
fn a_max_is_one_reduction_its_values_gathered_only_where_its_indices_are_read() {
    use funcfuse::ir::{Node, OpName};
    let src = r#"
import torch
def both(x: f32[64, 300]) -> tuple[f32[64], i64[64]]:
    v, i = torch.max(x.exp(), 1)
    return v, i

def values(x: f32[64, 300]) -> f32[64]:
    return x.max(dim=1).values * 2.0
"#;
    let ops = |p: &funcfuse::lower::Plan, op: OpName| {
        p.term.as_ref().iter().filter(|n| matches!(n, Node::Op(o, _) if *o == op)).count()
    };
    let p = fused_plan(src, "both");
    assert_eq!((ops(&p, OpName::MaxIdx), ops(&p, OpName::Gather), ops(&p, OpName::MaxVal)), (1, 1, 0));
    // The indices, the values read at them (the `exp` computed there: no kernel of its own) and the indices'
    // output without the kept dim.
    assert_eq!(p.kernels.len(), 3, "{}", p.describe());
    assert!(!p.describe().contains(" = exp "), "{}", p.describe());
    assert!(p.launches.iter().all(|l| l.checks.is_empty()), "{}", p.describe());
    let q = fused_plan(src, "values");
    assert_eq!((ops(&q, OpName::MaxIdx), ops(&q, OpName::Gather), ops(&q, OpName::MaxVal)), (0, 0, 1));
    assert_eq!(q.kernels.len(), 1, "{}", q.describe());
}

#[test]
fn an_op_on_a_transposed_input_reads_it_through_the_view_not_through_view_inverses() {
    // PyTorch lays `p.t() * 3` out as `p.t()` is (strides (1, 300)): functionalized, the product is written into a
    // buffer through that view and read back through it. The rules read `p.t()` directly; priced without the view
    // inverses that the written-and-read-back form computes per element (`index::VIEW_INVERSE_OPS`), that form
    // looked cheaper (its class prices no bytes) and ran 15 times slower.
    let src = r#"
import torch
def scaled(p: f32[45, 300]) -> f32[300, 45]:
    return (p.t() * 3 - 7).contiguous()
"#;
    let p = fused_plan(src, "scaled");
    let c = funcfuse::backend::c::render(&p);
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    assert!(!c.contains("vi0("), "{c}");
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "scaled", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "scaled", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn a_large_constant_is_one_buffer_the_plan_reads_not_thousands_of_literals() {
    // SSD's 8732 priors are built in Python loops and turned into one tensor: above `LITERAL_ELEMENTS` such a
    // constant is registered data the plan reads as an input (`ir::consts`), and writing into it in place (the priors'
    // `clamp_`) changes the program's copy only: a second run reads the original values again.
    let src = r#"
import torch
def priors(x: f32[3000, 2]) -> f32[3000, 2]:
    p = torch.tensor([[(i % 7) * 0.25 - 0.5, i / 3000.0] for i in range(3000)])
    p.clamp_(min=0.0)
    return x * p
"#;
    let p = fused_plan(src, "priors");
    let shown = p.term.to_string();
    assert!(shown.contains("(input \"%__const_"), "{shown}");
    assert!(p.term.as_ref().len() < 200, "{} nodes: {shown}", p.term.as_ref().len());
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "priors", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "priors", &inputs, Policy::Fused, target).unwrap();
        common::check_plan_on(&module, "priors", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn a_matmul_with_rows_longer_than_a_row_reduction_keeps_runs_as_row_reductions() {
    // `x @ W` with 16000 output columns (a vocabulary projection stored [in, out]): a row reduction keeps its
    // accumulators for at most `source::MAX_ROW` columns, and the plain nest read `W` down its columns (15 ms against
    // PyTorch's 1.2 on [4, 128] @ [128, 16000]); it runs as row reductions over runs of the columns instead.
    let src = r#"
import torch
def proj(x: f32[3, 40], w: f32[40, 9000], b: f32[9000]) -> f32[3, 9000]:
    return torch.relu(x @ w + b)
"#;
    let p = fused_plan(src, "proj");
    let c = funcfuse::backend::c::render(&p);
    assert_eq!(p.kernels.len(), 1, "{}", p.describe());
    // Three runs of at most 4096 columns, each storing at its offset, and no plain nest.
    assert!(c.contains("a0[(9000*i0 + i1 + 4096)]") && c.contains("a0[(9000*i0 + i1 + 8192)]"), "{c}");
    assert!(!c.contains("double acc = 0"), "no plain nest: {c}");
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "proj", 3);
    for target in [funcfuse::backend::Target::C, funcfuse::backend::Target::CudaEmu] {
        common::check_plan_on(&module, "proj", &inputs, Policy::Fused, target).unwrap();
    }
}

#[test]
fn kernels_of_the_same_text_are_compiled_once() {
    // An unrolled loop's steps at the same shapes (the context grows to 8 rows, then is cropped: minGPT's generation
    // loop, 1,955 kernels of 419 texts) render the same kernels but for their names; each later copy is a call of the
    // first, so the compiler sees each text once.
    let src = r#"
import torch
def steps(h: f32[4, 128], w: f32[128, 128]) -> f32[8, 128]:
    for t in range(10):
        y = torch.softmax(h @ w, dim=-1)
        h = torch.cat([h, y[-1:] + h[-1:]], 0)[-8:]
    return h
"#;
    let p = fused_plan(src, "steps");
    let c = funcfuse::backend::c::render(&p);
    let defined = |name: &str| c.contains(&format!("void {name}(void** b, const int64_t* p) {{\n  (void)p;"));
    let calls = p.kernels.iter().filter(|k| !defined(&k.name)).count();
    assert!(p.kernels.len() >= 10 && calls >= p.kernels.len() / 3, "{calls} of {}: {c}", p.kernels.len());
    assert!(p.kernels.iter().all(|k| c.contains(&format!("void {}(void** b", k.name))), "{c}");
    let module = funcfuse::frontend::parse_module("test.py", src).unwrap();
    let inputs = common::seeded_inputs(&module, "steps", 3);
    common::check_plan_on(&module, "steps", &inputs, Policy::Fused, funcfuse::backend::Target::C).unwrap();
}
