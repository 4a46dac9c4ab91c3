//! Every distinct matmul shape of the corpus workloads (`benches/matmul/shapes.py`, one program each) through our
//! real pipeline: parse, functionalize, saturate and extract, plan, compile for the C backend, then time one run of
//! the plan (the kernel launch and the executor around it; compiling is not timed). PyTorch's one-thread time for
//! the same programs: see `benches/matmul/README.md`. Run with `cargo bench --bench matmul`.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::rewrite::rules::{shipped, to_rewrites};

mod common;

fn bench(c: &mut Criterion) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/matmul/shapes.py");
    let path = file.to_str().unwrap().to_string();
    let source = std::fs::read_to_string(&file).unwrap();
    let module = funcfuse::frontend::parse_module(&path, &source).unwrap();
    let rules = to_rewrites(&shipped().unwrap()).unwrap();
    let mut group = c.benchmark_group("matmul");
    for name in module.program_names() {
        let (plan, mut dev, inputs) = common::loaded_plan(&module, &name, &rules);
        group.bench_function(&name, |b| b.iter(|| dev.run(&plan, &inputs).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
