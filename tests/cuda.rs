//! The CUDA backend without a GPU: every corpus program's kernels (ours and both baselines) compile with NVRTC for
//! sm_90, and a few rendered kernels are snapshotted.
//!
//! NVRTC comes from `LD_LIBRARY_PATH` (`.ci/run` installs `nvidia-cuda-nvrtc` from PyPI). Where it is absent the
//! compile test says so and passes, unless `FUNCFUSE_REQUIRE_NVRTC=1` (set by `.ci/run`) makes its absence a failure.
//! Running the kernels needs a GPU: `scripts/gpu_check.sh`.

mod common;

use std::collections::BTreeMap;

use funcfuse::backend::cuda;
use funcfuse::lower::{plan, Policy};

#[test]
fn every_corpus_program_compiles_with_nvrtc_for_sm_90() {
    if !cuda::nvrtc_available() {
        assert!(std::env::var_os("FUNCFUSE_REQUIRE_NVRTC").is_none(), "NVRTC is required but was not found");
        eprintln!("NVRTC not found: the CUDA compile check did not run");
        return;
    }
    let mut failures = Vec::new();
    let mut compiled = 0;
    for p in common::corpus_programs() {
        let module = common::load(&p);
        let functional = funcfuse::functionalize::functionalize(&module, &p.func, &BTreeMap::new()).unwrap();
        let ours = common::optimized(&module, &p.func).unwrap();
        for (policy, f) in
            [(Policy::Eager, &functional), (Policy::Unfunctionalized, &functional), (Policy::Fused, &ours)]
        {
            let pl = plan(&f.term, &f.inputs, policy).unwrap();
            match cuda::compile(&cuda::render(&pl), cuda::DEFAULT_ARCH) {
                Ok(_) => compiled += 1,
                Err(e) => failures.push(format!("{} ({policy:?}): {e}", p.label())),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(compiled >= 240, "only {compiled} plans compiled");
}

fn kernels_of(file: &str, func: &str) -> funcfuse::lower::Plan {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
    let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
    let f = common::optimized(&module, func).unwrap();
    plan(&f.term, &f.inputs, Policy::Fused).unwrap()
}

#[test]
fn rendered_kernels() {
    let shift = kernels_of("corpus/micro/loops.py", "shift_rows");
    insta::assert_snapshot!("shift_rows_cuda", cuda::render(&shift));
    insta::assert_snapshot!("shift_rows_c", funcfuse::backend::c::render(&shift));
    let matmul = kernels_of("corpus/micro/ops.py", "matmul_epilogue");
    insta::assert_snapshot!("matmul_epilogue_cuda", cuda::render(&matmul));
}

#[test]
fn launch_configuration_follows_the_domain() {
    let small = cuda::launch_config(40, 132);
    assert_eq!((small.block_dim.0, small.grid_dim.0), (64, 1));
    let big = cuda::launch_config(1 << 24, 132);
    assert_eq!((big.block_dim.0, big.grid_dim.0), (256, 132 * 16));
}

#[test]
fn without_a_driver_the_cuda_backend_fails_with_a_message() {
    if cuda::driver_available() {
        return;
    }
    let shift = kernels_of("corpus/micro/loops.py", "shift_rows");
    let err = cuda::CudaDevice::new(&shift).err().expect("no device without a driver");
    assert!(err.contains("--backend c"), "{err}");
}
