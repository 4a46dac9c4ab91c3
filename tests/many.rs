//! Batches of plans compiled into one library (`funcfuse::backend::many`): the same results as each plan's own
//! library, bit for bit; each distinct kernel once, under a name of its own; and a batch that does not compile
//! falls back to compiling plan by plan, where only the bad plan fails.

use std::collections::BTreeMap;

use funcfuse::backend::many::{load, source, Compiled};
use funcfuse::backend::{Loaded, Target};
use funcfuse::functionalize::Functional;
use funcfuse::lower::kernel::Kernel;
use funcfuse::lower::{plan, Plan, Policy};
use funcfuse::tensor::{Buf, Tensor};

/// Programs whose plans take every kind of kernel: elementwise, a scatter, a kernel group (`swap_rows`), row
/// reductions and tiled matmuls with epilogues.
const PROGRAMS: &[(&str, &str)] = &[
    ("corpus/micro/loops.py", "shift_rows"),
    ("corpus/micro/views.py", "swap_rows"),
    ("corpus/micro/reductions.py", "tiled_matmuls"),
    ("corpus/micro/ops.py", "matmul_epilogue"),
];

/// Each program's term under each policy (ours optimized with the shipped rules) and its plan.
fn plans() -> Vec<(Functional, Plan)> {
    let rules = funcfuse::rewrite::rules::to_rewrites(&funcfuse::rewrite::rules::shipped().unwrap()).unwrap();
    let mut out = Vec::new();
    for (file, func) in PROGRAMS {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let module = funcfuse::frontend::load_module(path.to_str().unwrap()).unwrap();
        let f = funcfuse::functionalize::functionalize(&module, func, &BTreeMap::new()).unwrap();
        let mut g = f.clone();
        g.term = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default()).unwrap().term;
        for (policy, h) in [(Policy::Eager, &f), (Policy::Unfunctionalized, &f), (Policy::Fused, &g)] {
            let p = plan(&h.term, &h.inputs, policy).unwrap();
            out.push((h.clone(), p));
        }
    }
    out
}

/// Every byte of a tensor's elements (so that results compare bit for bit, NaNs and signed zeros included).
fn bytes(t: &Tensor) -> Vec<u8> {
    let t = t.contiguous_copy();
    let b = t.buf.borrow();
    match &*b {
        Buf::Bool(v) => v.iter().map(|&x| x as u8).collect(),
        Buf::U8(v) => v.to_vec(),
        Buf::I8(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Buf::I16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Buf::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Buf::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Buf::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        Buf::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}

/// Runs plan `p` of `f` on `dev` with seeded inputs: each output file's shape and bytes.
fn run(f: &Functional, p: &Plan, dev: &mut Loaded) -> BTreeMap<String, (Vec<usize>, Vec<u8>)> {
    let inputs: BTreeMap<String, Tensor> = f
        .inputs
        .iter()
        .enumerate()
        .map(|(i, (name, d, shape))| (name.clone(), funcfuse::io::random_input(3, i, *d, shape).unwrap()))
        .collect();
    let (out, _) = funcfuse::backend::run_loaded(f, p, dev, &inputs).unwrap();
    out.files().into_iter().map(|(name, t)| (name, (t.shape.clone(), bytes(&t)))).collect()
}

#[test]
fn a_batch_runs_every_plan_bit_for_bit_as_its_own_library_does() {
    let planned = plans();
    assert!(planned.iter().any(|(_, p)| !p.groups.is_empty()), "a plan with a kernel group is covered");
    let refs: Vec<&Plan> = planned.iter().map(|(_, p)| p).collect();
    for target in [Target::C, Target::CudaEmu] {
        let compiled = Compiled::new(&refs, target);
        assert!(compiled.batched, "{target:?}: the batch compiles");
        assert_eq!(compiled.len(), refs.len());
        for (i, (f, p)) in planned.iter().enumerate() {
            let mut own = Loaded::new(p, target).unwrap();
            let mut shared = compiled.device(i).unwrap();
            let want = run(f, p, &mut own);
            assert!(!want.is_empty());
            assert_eq!(run(f, p, &mut shared), want, "{target:?}: plan {i} ({:?})", p.policy);
        }
    }
}

/// A kernel's source for `target`, under a fixed name.
fn unnamed_source(k: &Kernel, target: Target) -> String {
    use funcfuse::backend::cuda_src::{render_kernel, Dialect};
    use funcfuse::backend::emu::{EMU_REDUCE_THREADS, EMU_SMS};
    let k = Kernel { name: "x".into(), ..k.clone() };
    match target {
        Target::C => funcfuse::backend::c::render_kernel(&k),
        Target::CudaEmu => render_kernel(&k, Dialect::Emu { sms: EMU_SMS, reduce_threads: EMU_REDUCE_THREADS }),
        Target::Cuda => render_kernel(&k, Dialect::Cuda),
    }
}

#[test]
fn each_distinct_kernel_is_compiled_once_under_a_name_of_its_own() {
    let planned = plans();
    let refs: Vec<&Plan> = planned.iter().map(|(_, p)| p).collect();
    for target in [Target::C, Target::CudaEmu, Target::Cuda] {
        let s = source(&refs, target).unwrap();
        let units: usize = refs.iter().map(|p| p.kernels.len() + p.groups.len()).sum();
        // The eager and unfunctionalized plans of these programs share kernels: fewer units than plans have.
        assert!(s.units < units, "{target:?}: {} units of {units}", s.units);
        // The same name for kernels of the same source (up to their names), different names for different ones.
        let mut by_name: BTreeMap<&str, String> = BTreeMap::new();
        for (p, syms) in refs.iter().zip(&s.symbols) {
            assert_eq!((syms.kernels.len(), syms.groups.len()), (p.kernels.len(), p.groups.len()));
            for (k, name) in p.kernels.iter().zip(&syms.kernels) {
                let text = unnamed_source(k, target);
                assert_eq!(by_name.entry(name).or_insert_with(|| text.clone()), &text, "{name}");
                assert_eq!(s.text.matches(&format!("void {name}(")).count(), 1, "{target:?}: {name} defined once");
            }
        }
        let texts: std::collections::BTreeSet<&String> = by_name.values().collect();
        assert_eq!(texts.len(), by_name.len(), "{target:?}: one kernel under two names");
        // The same plans give the same source (the kernel cache finds it again).
        assert_eq!(source(&refs, target).unwrap().text, s.text);
    }
}

#[test]
fn a_batch_that_does_not_compile_is_compiled_plan_by_plan_and_the_bad_plan_names_itself() {
    let mut planned = plans();
    // A kernel reading an argument it does not have: `a99` is undeclared, and the C compiler rejects it.
    let bad = 4;
    let k = &mut planned[bad].1.kernels[0];
    k.value = funcfuse::lower::kernel::Expr::Load { arg: 99, at: k.store.clone(), dtype: k.out_dtype };
    let refs: Vec<&Plan> = planned.iter().map(|(_, p)| p).collect();
    for target in [Target::C, Target::CudaEmu] {
        let compiled = Compiled::new(&refs, target);
        assert!(!compiled.batched, "{target:?}");
        for (i, (f, p)) in planned.iter().enumerate() {
            match compiled.device(i) {
                Err(e) if i == bad => assert!(e.contains("rejected") && e.contains("a99"), "{target:?}: {e}"),
                Err(e) => panic!("{target:?}: plan {i} failed with the bad one: {e}"),
                Ok(_) if i == bad => panic!("{target:?}: the bad plan compiled"),
                Ok(mut dev) => assert_eq!(run(f, p, &mut dev), run(f, p, &mut Loaded::new(p, target).unwrap())),
            }
        }
    }
    // `load` hands out the same: the bad plan's error, the others' devices.
    let loaded = load(&refs, Target::C);
    assert!(loaded.iter().enumerate().all(|(i, d)| d.is_err() == (i == bad)));
}
