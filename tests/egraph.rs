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
