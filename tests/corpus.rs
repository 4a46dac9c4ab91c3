//! Generated tests per corpus program: the reference interpreter against the PyTorch goldens, the functional engine,
//! the optimized term and every plan (on the C backend, ours also as CUDA kernels on the emulator) against the
//! reference interpreter, our C plan against the goldens, and ours launching no more kernels than the baselines; no
//! plan may write into the tensors it is given (`common::check_corpus_plan`). The plans of a file are made once and their kernels
//! compiled as one library per backend (`common::file_batch`), shared by the file's tests.
//!
//! Run with `cargo test --test corpus`; filter by program as with any test (`cargo test --test corpus yolov3`).

mod common;

use libtest_mimic::{Arguments, Trial};

/// Corpus programs the functionalizer reports as unsupported, with the reason it must give (at a source location).
/// Each is still run by the reference interpreter against PyTorch; here the report itself is checked.
const NOT_FUNCTIONALIZED: &[(&str, &str)] = &[];

/// Programs whose plan launches more kernels than the unfunctionalized baseline, each with why (known gaps).
const MORE_LAUNCHES_THAN_UNFUNCTIONALIZED: &[(&str, &str)] = &[(
    "micro/recurrences::rnn_leaky",
    "the loop-invariant tanh is computed once before the loop (21 launches against 20): the class model predicts \
         0.0196 ms against 0.0273 ms, but it measured 3-5% slower (interleaved timing); a class-model error (#17)",
)];

/// Ours launches no more kernels than the unfunctionalized baseline, which launches no more than eager (the plans
/// and kernels of the other tests of the file, run once more on the same inputs).
fn launches_are_ordered(p: &common::Program) -> Result<(), String> {
    use funcfuse::lower::Policy;
    let module = common::load(p);
    let inputs = common::seeded_inputs(&module, &p.func, 7);
    let batch = common::file_batch(&p.file);
    let mut k = Vec::new();
    for policy in [Policy::Fused, Policy::Unfunctionalized, Policy::Eager] {
        let (f, plan, mut dev) = batch.plan(&p.func, policy, funcfuse::backend::Target::C)?;
        let (_, stats) = funcfuse::backend::run_loaded(f, plan, &mut dev, &inputs).map_err(|d| d.to_string())?;
        k.push(stats.launches);
    }
    let label = p.label();
    let (ours, unfunctionalized, eager) = (k[0], k[1], k[2]);
    match MORE_LAUNCHES_THAN_UNFUNCTIONALIZED.iter().find(|(l, _)| *l == label) {
        // Listed: still so (else take it off the list), and still no more than eager.
        Some((_, why)) if !(ours > unfunctionalized && ours <= eager) => {
            Err(format!("listed ({why}), but ours {ours}, unfunctionalized {unfunctionalized}, eager {eager}"))
        }
        None if !(ours <= unfunctionalized && unfunctionalized <= eager) => {
            Err(format!("ours {ours}, unfunctionalized {unfunctionalized}, eager {eager}"))
        }
        _ => Ok(()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    for p in common::corpus_programs() {
        let (file, func, label) = (p.file.clone(), p.func.clone(), p.label());
        let (file2, func2) = (p.file.clone(), p.func.clone());
        trials.push(Trial::test(format!("optimized_matches_reference::{label}"), move || {
            let module = funcfuse::frontend::load_module(file2.to_str().unwrap()).map_err(|d| d.to_string())?;
            let inputs = common::seeded_inputs(&module, &func2, 2);
            common::check_optimized(&module, &func2, &inputs)?;
            Ok(())
        }));
        for (what, policy, seed) in [
            ("c_plan_matches_reference", funcfuse::lower::Policy::Fused, 4),
            ("eager_plan_matches_reference", funcfuse::lower::Policy::Eager, 5),
            ("unfunctionalized_plan_matches_reference", funcfuse::lower::Policy::Unfunctionalized, 6),
        ] {
            let p3 = p.clone();
            trials.push(Trial::test(format!("{what}::{label}"), move || {
                let module = common::load(&p3);
                let inputs = common::seeded_inputs(&module, &p3.func, seed);
                common::check_corpus_plan(&p3, &module, &inputs, policy, funcfuse::backend::Target::C)?;
                Ok(())
            }));
        }
        let p6 = p.clone();
        trials.push(Trial::test(format!("launches_ours_le_unfunctionalized_le_eager::{label}"), move || {
            Ok(launches_are_ordered(&p6)?)
        }));
        // The CUDA kernels of our plan (block reductions, tiled matmuls, 2-D grids), run by the emulator.
        let p5 = p.clone();
        trials.push(Trial::test(format!("cuda_emulator_plan_matches_reference::{label}"), move || {
            let module = common::load(&p5);
            let inputs = common::seeded_inputs(&module, &p5.func, 7);
            let (policy, target) = (funcfuse::lower::Policy::Fused, funcfuse::backend::Target::CudaEmu);
            common::check_corpus_plan(&p5, &module, &inputs, policy, target)?;
            Ok(())
        }));
        let p4 = p.clone();
        trials.push(Trial::test(format!("c_plan_matches_pytorch::{label}"), move || {
            let module = common::load(&p4);
            let inputs = common::golden_inputs(&p4, &module)?;
            let batch = common::file_batch(&p4.file);
            let (f, plan, mut dev) =
                batch.plan(&p4.func, funcfuse::lower::Policy::Fused, funcfuse::backend::Target::C)?;
            let (out, _) = funcfuse::backend::run_loaded(f, plan, &mut dev, &inputs).map_err(|d| d.to_string())?;
            common::check_goldens(&p4, &out, Some(&inputs))?;
            Ok(())
        }));
        let expected_report = NOT_FUNCTIONALIZED.iter().find(|(l, _)| *l == label).map(|(_, m)| *m);
        trials.push(Trial::test(format!("functional_matches_reference::{label}"), move || {
            let module = funcfuse::frontend::load_module(file.to_str().unwrap()).map_err(|d| d.to_string())?;
            if let Some(want) = expected_report {
                let got = funcfuse::functionalize::functionalize(&module, &func, &Default::default());
                return match got {
                    Err(d) if d.message.contains(want) && d.span.is_some() => Ok(()),
                    Err(d) => Err(format!("expected the report {want:?} with a location, got {d}").into()),
                    Ok(_) => {
                        Err("expected this program to be reported as not functionalizable; update NOT_FUNCTIONALIZED"
                            .into())
                    }
                };
            }
            let inputs = common::seeded_inputs(&module, &func, 1);
            common::check_functional(&module, &func, &inputs)?;
            Ok(())
        }));
        trials.push(Trial::test(format!("reference_matches_pytorch::{}", p.label()), move || {
            let module = common::load(&p);
            let inputs = common::golden_inputs(&p, &module)?;
            let out = common::run_reference(&module, &p.func, &inputs)?;
            common::check_goldens(&p, &out, None)?;
            Ok(())
        }));
    }
    libtest_mimic::run(&args, trials).exit();
}
