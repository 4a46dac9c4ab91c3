//! Reference-interpreter time per corpus workload (parse excluded): how fast the oracle is, and later the
//! "interpreted eager" point of comparison. Run with `cargo bench --bench interp`.

use std::collections::BTreeMap;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::frontend;
use funcfuse::interp::{self, ScalarArg};
use funcfuse::io;

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/workloads");
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let mut group = c.benchmark_group("reference_interpreter");
    group.sample_size(10);
    for file in files.iter().filter(|f| f.extension().is_some_and(|x| x == "py")) {
        let module = frontend::load_module(file.to_str().unwrap()).unwrap();
        for f in module.programs() {
            let params = interp::tensor_params(f).unwrap();
            let inputs: BTreeMap<_, _> = params
                .iter()
                .enumerate()
                .map(|(i, (n, d, s))| (n.clone(), io::random_input(0, i, *d, s).unwrap()))
                .collect();
            group.bench_function(&f.name, |b| {
                b.iter(|| {
                    let fresh: BTreeMap<_, _> = inputs.iter().map(|(k, v)| (k.clone(), v.contiguous_copy())).collect();
                    interp::run_program(&module, &f.name, &fresh, &BTreeMap::<String, ScalarArg>::new()).unwrap()
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
