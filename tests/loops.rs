//! The Rust rewrite `loops/vectorize`: loops whose iterations are independent become loop-free, loops with a
//! dependence between iterations stay loops, and either way the result matches the reference engine (the corpus
//! test checks every program; this one checks which loops go).

mod common;

use std::collections::BTreeMap;
use std::path::Path;

use funcfuse::functionalize::functionalize;
use funcfuse::ir::term_stats;
use funcfuse::rewrite::saturate::optimize;

fn loops_after(file: &str, func: &str) -> (usize, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let f = functionalize(&module, func, &BTreeMap::new()).unwrap_or_else(|d| panic!("{d}"));
    let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().unwrap()).unwrap();
    let o = optimize(&f, &rules, Default::default()).unwrap();
    let inputs = common::seeded_inputs(&module, func, 3);
    common::check_optimized(&module, func, &inputs).unwrap_or_else(|e| panic!("{func}: {e}"));
    (term_stats(&f.term).loops, term_stats(&o.term).loops)
}

#[test]
fn independent_iterations_become_loop_free() {
    for (file, func) in [
        ("corpus/micro/loops.py", "shift_rows"),
        ("corpus/micro/loops.py", "shift_rows_long"),
        ("corpus/micro/loops.py", "nested_loops"),
        ("corpus/micro/functional_patterns.py", "t_writes"),
        ("corpus/micro/functional_patterns.py", "permute_loop"),
        ("corpus/micro/functional_patterns.py", "overlapping"),
        ("corpus/micro/functional_patterns.py", "flat_unsqueeze"),
    ] {
        let (before, after) = loops_after(file, func);
        assert!(before >= 1, "{func} has no loop to start with");
        assert_eq!(after, 0, "{func} still has {after} loops");
    }
}

#[test]
fn loop_carried_dependences_stay_loops() {
    for (file, func) in [
        ("corpus/micro/loops.py", "prefix_sum"),
        ("corpus/micro/loops.py", "loop_carried_state"),
        ("corpus/micro/functional_patterns.py", "diag_chain"),
        ("corpus/micro/control.py", "loop_in_branch"),
    ] {
        let (before, after) = loops_after(file, func);
        assert_eq!((before, after), (1, 1), "{func}");
    }
}

#[test]
fn assigns_covering_an_axis_become_one_cat() {
    for (file, func) in [("corpus/micro/extra_ops.py", "decode_boxes"), ("corpus/workloads/fcos.py", "fcos")] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
        let f = functionalize(&module, func, &BTreeMap::new()).unwrap_or_else(|d| panic!("{d}"));
        let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().unwrap()).unwrap();
        let o = optimize(&f, &rules, Default::default()).unwrap();
        assert!(o.fired.get("scatter/cover-cat").is_some_and(|&n| n >= 1), "{func}: {:?}", o.fired);
        assert!(o.term.to_string().contains("(cat "), "{func}");
        assert!(term_stats(&o.term).assigns < term_stats(&f.term).assigns, "{func}");
    }
}

#[test]
fn reads_of_reads_compose_into_one_view() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/workloads/yolov3.py");
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let f = functionalize(&module, "yolov3", &BTreeMap::new()).unwrap();
    let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().unwrap()).unwrap();
    let o = optimize(&f, &rules, Default::default()).unwrap();
    assert!(o.fired.get("views/compose").is_some_and(|&n| n >= 1), "{:?}", o.fired);
    let inputs = common::seeded_inputs(&module, "yolov3", 3);
    common::check_optimized(&module, "yolov3", &inputs).unwrap();
}
