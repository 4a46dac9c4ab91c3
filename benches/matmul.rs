//! Every distinct matmul shape of the corpus workloads (`benches/matmul/shapes.py`, one program each) through our
//! real pipeline: parse, functionalize, saturate and extract, plan, compile for the C backend, then time one run of
//! the plan (the kernel launch and the executor around it; compiling is not timed). PyTorch's one-thread time for
//! the same programs: see `benches/matmul/README.md`. Run with `cargo bench --bench matmul`.

use std::collections::BTreeMap;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::backend::{Loaded, Target};
use funcfuse::lower::Policy;
use funcfuse::rewrite::rules::{shipped, to_rewrites};

fn bench(c: &mut Criterion) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/matmul/shapes.py");
    let path = file.to_str().unwrap().to_string();
    let source = std::fs::read_to_string(&file).unwrap();
    let module = funcfuse::frontend::parse_module(&path, &source).unwrap();
    let rules = to_rewrites(&shipped().unwrap()).unwrap();
    let mut group = c.benchmark_group("matmul");
    for name in module.program_names() {
        let f = funcfuse::functionalize::functionalize(&module, &name, &BTreeMap::new()).unwrap();
        let mut o = f.clone();
        o.term = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default()).unwrap().term;
        let plan = funcfuse::lower::plan(&o.term, &o.inputs, Policy::Fused).unwrap();
        let mut dev = Loaded::new(&plan, Target::C).unwrap();
        let inputs: BTreeMap<_, _> = o
            .inputs
            .iter()
            .enumerate()
            .map(|(i, (n, d, s))| (n.clone(), funcfuse::io::random_input(0, i, *d, s).unwrap()))
            .collect();
        group.bench_function(&name, |b| b.iter(|| dev.run(&plan, &inputs).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
