//! Functionalization time per corpus program (parse excluded). Run with `cargo bench --bench functionalize`.

use std::collections::BTreeMap;
use std::path::Path;

mod common;

use common::py_files;
use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::frontend;
use funcfuse::functionalize::functionalize;

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut files = Vec::new();
    py_files(&root, &mut files);
    let mut group = c.benchmark_group("functionalize");
    group.sample_size(20);
    for file in files {
        let module = frontend::load_module(file.to_str().unwrap()).unwrap();
        let stem = file.strip_prefix(&root).unwrap().with_extension("").display().to_string();
        for f in module.programs() {
            if functionalize(&module, &f.name, &BTreeMap::new()).is_err() {
                continue;
            }
            group.bench_function(format!("{stem}::{}", f.name), |b| {
                b.iter(|| functionalize(&module, &f.name, &BTreeMap::new()).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
