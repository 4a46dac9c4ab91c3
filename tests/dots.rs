//! Matmuls computed as dot products in the elementwise kernels that read them (issue #16's cell epilogues across
//! chunks, `src/lower/dots.rs`): formed where every reader is an elementwise kernel of the matmul's scope and no
//! operand buffer is written in place, refused otherwise; either way every plan matches the reference on the C
//! backend and the CUDA emulator, and the estimate counts the launches the executor makes.

mod common;

use std::path::Path;

use funcfuse::backend::Target;
use funcfuse::ir::{Node, OpName};
use funcfuse::lower::{How, Policy};

const FILE: &str = "corpus/micro/dot_epilogues.py";

/// Our plan of `func`, after checking it against the reference on the C backend and the emulator.
fn planned(func: &str) -> funcfuse::lower::Plan {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(FILE);
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let inputs = common::seeded_inputs(&module, func, 11);
    for target in [Target::C, Target::CudaEmu] {
        common::check_plan_on(&module, func, &inputs, Policy::Fused, target)
            .unwrap_or_else(|e| panic!("{func} on {target:?}: {e}"));
    }
    let f = common::optimized(&module, func).unwrap();
    funcfuse::lower::plan(&f.term, &f.inputs, Policy::Fused).unwrap()
}

fn fused_matmuls(plan: &funcfuse::lower::Plan) -> usize {
    plan.term
        .as_ref()
        .iter()
        .zip(&plan.how)
        .filter(|(n, h)| matches!(n, Node::Op(OpName::Matmul, _)) && **h == How::Inline)
        .count()
}

#[test]
fn matmuls_read_by_cells_become_dot_products() {
    // state_written_in_place: its stacked rows are carried one by one after interchange (`loops/promote`).
    for func in ["chunk_cell", "chunk_cell_odd_k", "weight_updated_in_loop", "state_written_in_place"] {
        let plan = planned(func);
        assert_eq!(fused_matmuls(&plan), 1, "{func}: {:?}", plan.dot_notes);
        assert!(plan.dot_notes.iter().any(|n| n.contains("computed as dot products")), "{func}: {:?}", plan.dot_notes);
        // The C kernels compute the dots before their nest; the CUDA ones per point.
        assert!(funcfuse::backend::c::render(&plan).contains("float ffd0["), "{func}");
    }
}

#[test]
fn matmuls_read_elsewhere_or_with_written_operands_stay_kernels() {
    for (func, why) in [
        ("result_also_reduced", "is read by the host"),
        ("state_row_by_step_written_in_place", "after it is written in place"),
    ] {
        let plan = planned(func);
        assert_eq!(fused_matmuls(&plan), 0, "{func}");
        assert!(plan.dot_notes.iter().any(|n| n.contains(why)), "{func}: {:?}", plan.dot_notes);
    }
}
