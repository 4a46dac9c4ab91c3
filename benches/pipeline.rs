//! Optimizing one program end to end, from source text to rendered kernels (parse, functionalize, saturate and
//! extract, plan, render C), per corpus workload. Compiling the C is the system compiler's time and is not counted.
//! Run with `cargo bench --bench pipeline`.

use std::collections::BTreeMap;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::rewrite::rules::{shipped, to_rewrites};

fn bench(c: &mut Criterion) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/workloads");
    let rules = to_rewrites(&shipped().unwrap()).unwrap();
    let mut files: Vec<_> = std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut group = c.benchmark_group("pipeline");
    group.sample_size(20);
    for file in files.into_iter().filter(|f| f.extension().is_some_and(|x| x == "py")) {
        let path = file.to_str().unwrap().to_string();
        let source = std::fs::read_to_string(&file).unwrap();
        let name = file.file_stem().unwrap().to_string_lossy().to_string();
        group.bench_function(&name, |b| {
            b.iter(|| {
                let module = funcfuse::frontend::parse_module(&path, &source).unwrap();
                let f = funcfuse::functionalize::functionalize(&module, &name, &BTreeMap::new()).unwrap();
                let mut o = f.clone();
                o.term = funcfuse::rewrite::saturate::optimize(&f, &rules, Default::default()).unwrap().term;
                let plan = funcfuse::lower::plan(&o.term, &o.inputs, funcfuse::lower::Policy::Fused).unwrap();
                funcfuse::backend::c::render(&plan)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
