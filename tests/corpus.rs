//! One generated test per corpus program: the reference interpreter against the PyTorch goldens.
//!
//! Run with `cargo test --test corpus`; filter by program as with any test (`cargo test --test corpus yolov3`).

mod common;

use libtest_mimic::{Arguments, Trial};

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for p in common::corpus_programs() {
        trials.push(Trial::test(
            format!("reference_matches_pytorch::{}", p.label()),
            move || {
                let module = common::load(&p);
                let inputs = common::golden_inputs(&p, &module)?;
                let out = common::run_reference(&module, &p.func, &inputs)?;
                common::check_goldens(&p, &out)?;
                Ok(())
            },
        ));
    }
    libtest_mimic::run(&args, trials).exit();
}
