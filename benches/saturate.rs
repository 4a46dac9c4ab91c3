//! Saturation (all phases, with extraction) time per corpus program, and the e-graph size each reaches, printed once
//! per program before it is timed. Run with `cargo bench --bench saturate`.

use std::collections::BTreeMap;
use std::path::Path;

mod common;

use common::py_files;
use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::frontend;
use funcfuse::functionalize::functionalize;
use funcfuse::rewrite::rules::{shipped, to_rewrites};
use funcfuse::rewrite::saturate::optimize;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let rules = to_rewrites(&shipped().unwrap()).unwrap();
    let mut files = Vec::new();
    py_files(&root, &mut files);
    let mut group = c.benchmark_group("saturate");
    group.sample_size(10);
    for file in files {
        let module = frontend::load_module(file.to_str().unwrap()).unwrap();
        let stem = file.strip_prefix(&root).unwrap().with_extension("").display().to_string();
        for p in module.programs() {
            let Ok(f) = functionalize(&module, &p.name, &BTreeMap::new()) else { continue };
            let name = format!("{stem}::{}", p.name);
            let o = optimize(&f, &rules, Default::default()).unwrap();
            eprintln!(
                "{name}: e-graph {} nodes, {} classes, {} iterations, {}",
                o.egraph_nodes, o.egraph_classes, o.iterations, o.stop_reason
            );
            group.bench_function(name, |b| b.iter(|| optimize(&f, &rules, Default::default()).unwrap()));
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
