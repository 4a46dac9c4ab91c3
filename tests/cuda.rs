//! The CUDA backend without a GPU: every corpus program's kernels (ours and both baselines) compile with NVRTC for
//! sm_90, and a few rendered kernels are snapshotted.
//!
//! NVRTC comes from `LD_LIBRARY_PATH` (`.ci/run` installs `nvidia-cuda-nvrtc` from PyPI). Where it is absent the
//! compile test says so and passes, unless `FUNCFUSE_REQUIRE_NVRTC=1` (set by `.ci/run`) makes its absence a failure.
//! Running the kernels needs a GPU (`scripts/gpu_check.sh`) or the emulator (`tests/corpus.rs` runs every program's
//! CUDA kernels on it against the reference engine).

mod common;

use std::collections::BTreeMap;

use funcfuse::backend::{cuda, many};
use funcfuse::lower::{plan, Policy};

#[test]
fn every_corpus_program_compiles_with_nvrtc_for_sm_90() {
    if !cuda::nvrtc_available() {
        assert!(std::env::var_os("FUNCFUSE_REQUIRE_NVRTC").is_none(), "NVRTC is required but was not found");
        eprintln!("NVRTC not found: the CUDA compile check did not run");
        return;
    }
    // Programs are planned on every core; compiling is what takes the time: every distinct kernel and group of all
    // the plans goes to NVRTC once (`funcfuse::backend::many::distinct_units`), in programs of a fixed number of
    // units, on as many threads as the machine has (NVRTC compiles programs concurrently); where one does not
    // compile, every plan is compiled on its own, so that the failing plans are named.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get()).max(2);
    let programs = common::corpus_programs();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let planned = std::sync::Mutex::new(BTreeMap::new());
    // Each thread on the stack every stage gets in the CLI (`limits::STACK_BYTES`): NVRTC's parser and the planner
    // recurse over deep expressions, past a test thread's default 2 MiB in a debug build.
    let big = || std::thread::Builder::new().stack_size(funcfuse::limits::STACK_BYTES);
    std::thread::scope(|s| {
        for _ in 0..threads {
            big()
                .spawn_scoped(s, || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(p) = programs.get(i) else { break };
                    let module = common::load(p);
                    let functional =
                        funcfuse::functionalize::functionalize(&module, &p.func, &BTreeMap::new()).unwrap();
                    let ours = common::optimized(&module, &p.func).unwrap();
                    let mut three = Vec::new();
                    for (policy, f) in
                        [(Policy::Eager, &functional), (Policy::Unfunctionalized, &functional), (Policy::Fused, &ours)]
                    {
                        three.push((format!("{} ({policy:?})", p.label()), plan(&f.term, &f.inputs, policy).unwrap()));
                    }
                    planned.lock().unwrap().insert(i, three);
                })
                .unwrap();
        }
    });
    let plans: Vec<(String, funcfuse::lower::Plan)> = planned.into_inner().unwrap().into_values().flatten().collect();
    let refs: Vec<&funcfuse::lower::Plan> = plans.iter().map(|(_, p)| p).collect();
    // Every distinct kernel and group once (many plans share kernels: the eager and unfunctionalized plans of a
    // program, programs of one family), in programs of about `UNITS_PER_NVRTC_PROGRAM` units; a group calls its
    // members, so it goes with them (a member compiled in another program is compiled again with it).
    let (units, symbols) = many::distinct_units(&refs, funcfuse::backend::Target::Cuda).unwrap();
    let source: std::collections::HashMap<&str, &str> = units.iter().map(|(n, t)| (n.as_str(), t.as_str())).collect();
    let mut done = std::collections::HashSet::new();
    let (mut chunks, mut cur, mut in_cur): (Vec<Vec<&str>>, Vec<&str>, std::collections::HashSet<&str>) =
        Default::default();
    for (p, sym) in refs.iter().zip(&symbols) {
        let mut need: Vec<&str> = Vec::new();
        for (g, name) in sym.groups.iter().enumerate() {
            if !done.contains(name.as_str()) {
                need.extend(p.groups[g].iter().map(|&m| sym.kernels[m].as_str()));
                need.push(name);
            }
        }
        need.extend(sym.kernels.iter().map(|k| k.as_str()).filter(|k| !done.contains(k)));
        for n in need {
            if in_cur.insert(n) {
                cur.push(source[n]);
            }
            done.insert(n);
        }
        if cur.len() >= UNITS_PER_NVRTC_PROGRAM {
            chunks.push(std::mem::take(&mut cur));
            in_cur.clear();
        }
    }
    chunks.push(cur);
    let next = std::sync::atomic::AtomicUsize::new(0);
    let failed = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..threads {
            big()
                .spawn_scoped(s, || loop {
                    let b = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    let Some(chunk) = chunks.get(b) else { break };
                    if let Err(e) = many::check_cuda_units(chunk, cuda::DEFAULT_ARCH) {
                        eprintln!("a program of {} units did not compile: {e}", chunk.len());
                        failed.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                })
                .unwrap();
        }
    });
    if failed.into_inner() {
        // Name the plans that do not compile: each plan on its own.
        let mut failures: Vec<String> = refs
            .iter()
            .zip(&plans)
            .filter_map(|(p, (label, _))| {
                many::check_cuda(&[p], cuda::DEFAULT_ARCH).remove(0).err().map(|e| format!("{label}: {e}"))
            })
            .collect();
        failures.sort();
        assert!(
            !failures.is_empty(),
            "a program of distinct units did not compile (above), though every plan does alone"
        );
        panic!("{}", failures.join("\n"));
    }
    eprintln!(
        "{} plans ({} distinct kernels and groups) compiled as {} programs on {threads} threads",
        plans.len(),
        units.len(),
        chunks.len()
    );
    assert!(units.len() >= 5000, "only {} kernels and groups compiled", units.len());
}

/// Distinct kernels and groups compiled as one NVRTC program by the corpus check.
const UNITS_PER_NVRTC_PROGRAM: usize = 400;

/// A batch NVRTC rejects is compiled plan by plan: the plan with the bad kernel gets NVRTC's error, the others pass.
#[test]
fn a_batch_nvrtc_rejects_names_the_bad_plan() {
    if !cuda::nvrtc_available() {
        assert!(std::env::var_os("FUNCFUSE_REQUIRE_NVRTC").is_none(), "NVRTC is required but was not found");
        return;
    }
    let good = kernels_of("corpus/micro/loops.py", "shift_rows");
    let mut bad = kernels_of("corpus/micro/reductions.py", "tiled_matmuls");
    // A kernel reading an argument it does not have: `a99` is undeclared.
    let k = &mut bad.kernels[1];
    k.value = funcfuse::lower::kernel::Expr::Load { arg: 99, at: k.store.clone(), dtype: k.out_dtype };
    let checked = many::check_cuda(&[&good, &bad, &good], cuda::DEFAULT_ARCH);
    assert!(checked[0].is_ok() && checked[2].is_ok(), "{checked:?}");
    let e = checked[1].as_ref().unwrap_err();
    assert!(e.contains("NVRTC rejected") && e.contains("a99"), "{e}");
    assert_eq!(many::check_cuda(&[&good, &good], cuda::DEFAULT_ARCH), [Ok(()), Ok(())]);
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
    // The C source without vmath.h (its functions are checked by tests/vmath.rs).
    let c = funcfuse::backend::c::render(&shift);
    let (start, end) = (c.find("/* vmath.h").unwrap(), c.find("#endif /* FF_VMATH_H */").unwrap());
    insta::assert_snapshot!("shift_rows_c", format!("{}/* vmath.h */\n{}", &c[..start], &c[end..]));
    let matmul = kernels_of("corpus/micro/ops.py", "matmul_epilogue");
    insta::assert_snapshot!("matmul_epilogue_cuda", cuda::render(&matmul));
    let tiled = kernels_of("corpus/micro/reductions.py", "tiled_matmuls");
    insta::assert_snapshot!("tiled_matmuls_cuda", cuda::render(&tiled));
    insta::assert_snapshot!("tiled_matmuls_emulator", funcfuse::backend::emu::render(&tiled));
}

#[test]
fn layouts_and_launch_configurations_follow_the_kernels() {
    use funcfuse::backend::cuda_src::{launch_config, layout, Config, Layout};
    let p = kernels_of("corpus/micro/reductions.py", "tiled_matmuls");
    let layouts: Vec<Layout> = p.kernels.iter().map(layout).collect();
    // relu(a @ b + bias) [70, 40]; sigmoid(c * 2) and d - 1 (rows of a batch); their matmul [3, 33, 17] with its
    // * 0.5; tanh(v @ w) [8] with K = 300: a block reduction.
    assert_eq!(layouts, [Layout::Tiled, Layout::Rows, Layout::Rows, Layout::Tiled, Layout::BlockReduce]);
    assert!(p.kernels[0].epilogue.is_some() && p.kernels[3].epilogue.is_some() && p.kernels[4].epilogue.is_some());
    // 5 x 3 tiles of 16 x 16; 3 x 3 x 2 tiles, on 132 multiprocessors; eight outputs of 300 terms: 8 blocks.
    assert_eq!(launch_config(&p.kernels[0], 132), Config { grid: (15, 1, 1), block: 256 });
    assert_eq!(launch_config(&p.kernels[3], 132), Config { grid: (18, 1, 1), block: 256 });
    assert_eq!(launch_config(&p.kernels[4], 132), Config { grid: (8, 1, 1), block: 256 });
    // Rows: the batch on blockIdx.y, the 33 x 20 rest on x.
    assert_eq!(launch_config(&p.kernels[1], 132), Config { grid: (3, 3, 1), block: 256 });
    // A small elementwise kernel gets one small block; a big one is capped at 16 blocks per multiprocessor.
    let shift = kernels_of("corpus/micro/loops.py", "shift_rows");
    let c = launch_config(&shift.kernels[0], 132);
    assert!(c.block.is_multiple_of(32) && c.block <= 256 && c.grid.0 >= 1, "{c:?}");
    let s = kernels_of("corpus/micro/reductions.py", "long_sums");
    // Six sums of 3000 terms: block reductions; 3000 sums of six terms: one thread each.
    let by_outputs: Vec<(usize, Layout)> =
        s.kernels.iter().map(|k| (k.domain.iter().product::<usize>(), layout(k))).collect();
    assert!(by_outputs.contains(&(6, Layout::BlockReduce)), "{by_outputs:?}");
    assert!(by_outputs.contains(&(3000, Layout::Flat)), "{by_outputs:?}");
}

/// Kernels whose every index value fits in an `int` compute indices in 32 bits, their coordinates recovered by
/// `unsigned` divisions by constants; past 2^31 elements (planned, never run) they stay 64-bit.
#[test]
fn indices_are_32_bit_where_they_fit_and_64_bit_past_2_pow_31() {
    use funcfuse::backend::cuda_src::width;
    use funcfuse::lower::index::Width;
    let y = kernels_of("corpus/workloads/yolov3.py", "yolov3");
    assert!(y.kernels.iter().all(|k| width(k) == Width::I32));
    let src = cuda::render(&y);
    assert!(src.contains("for (unsigned t = blockIdx.x * blockDim.x + threadIdx.x; t < 535500u;"), "{src}");
    assert!(src.contains("const int i2 = (int)(rest % 85u); rest /= 85u;"), "{src}");
    assert!(src.contains("(int)((unsigned)(i1) / 100u)"), "{src}");
    let body = &src[src.find("/* k0:").unwrap()..];
    assert!(!body.contains("int64_t rest") && !body.contains("ff_div(") && !body.contains("ff_mod("), "{body}");
    let dir = common::scratch("cuda", "wide_indices");
    let file = dir.join("big.py");
    std::fs::write(
        &file,
        "def big(x: f32[65536, 32768], y: f32[32768]) -> f32[65536, 32768]:\n    return torch.sigmoid(x) * y\n\n\n\
         def fits(x: f32[65536, 32767], y: f32[32767]) -> f32[65536, 32767]:\n    return torch.sigmoid(x) * y\n",
    )
    .unwrap();
    let module = funcfuse::frontend::load_module(file.to_str().unwrap()).unwrap();
    for (func, want) in [("big", Width::I64), ("fits", Width::I32)] {
        let f = common::optimized(&module, func).unwrap();
        let p = plan(&f.term, &f.inputs, Policy::Fused).unwrap();
        assert_eq!(p.kernels.iter().map(width).collect::<Vec<_>>(), [want], "{func}");
        let src = cuda::render(&p);
        let wide = src.contains("for (int64_t t = ") && src.contains("int64_t i0 = rest % 65536;");
        assert_eq!(wide, want == Width::I64, "{func}: {src}");
    }
}

/// The emulator with an H200's configurations (132 multiprocessors, 256-thread block reductions), where the
/// corpus tests use a small device: programs whose kernels take every layout, against the reference engine.
#[test]
fn the_kernels_with_an_h200_configuration_match_the_reference_on_the_emulator() {
    let mut layouts = std::collections::BTreeSet::new();
    for (file, func) in [
        ("corpus/micro/reductions.py", "tiled_matmuls"),
        ("corpus/micro/reductions.py", "ties_and_nan"),
        ("corpus/micro/reductions.py", "folds"),
        ("corpus/micro/reductions.py", "long_sums"),
        ("corpus/micro/loops.py", "shift_rows"),
        ("corpus/micro/indexing.py", "gather_wrapped"),
    ] {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
        let f = common::optimized(&module, func).unwrap();
        let p = plan(&f.term, &f.inputs, Policy::Fused).unwrap();
        layouts.extend(p.kernels.iter().map(|k| format!("{:?}", funcfuse::backend::cuda_src::layout(k))));
        let mut dev = funcfuse::backend::c::CDevice::emulated_as(&p, 132, 256).unwrap();
        let inputs = common::seeded_inputs(&module, func, 11);
        let got = funcfuse::functionalize::run_with(&f, &inputs, |_, i| {
            funcfuse::lower::exec::execute(&p, &mut dev, i).map(|(t, _)| t)
        })
        .unwrap();
        let want = common::run_reference(&module, func, &inputs).unwrap();
        let (g, w) = (common::output_files(&got), common::output_files(&want));
        for (name, t) in &w {
            common::compare(name, &g[name], t).unwrap_or_else(|e| panic!("{file}::{func}: {e}"));
        }
    }
    assert_eq!(layouts.into_iter().collect::<Vec<_>>(), ["BlockReduce", "Flat", "Rows", "Tiled"]);
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
