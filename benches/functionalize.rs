//! Functionalization time per corpus program (parse excluded). Run with `cargo bench --bench functionalize`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::frontend;
use funcfuse::functionalize::functionalize;

fn py_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for e in entries {
        if e.is_dir() && e.file_name().is_some_and(|n| n != "goldens") {
            py_files(&e, out);
        } else if e.extension().is_some_and(|x| x == "py") {
            out.push(e);
        }
    }
}

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
