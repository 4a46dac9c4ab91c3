//! The executor's own cost: one run of a plan on the C backend, where the kernels do little and the host's walk of
//! the plan (loops, branches, buffers, launches) is most of the time. Programs: a one-op plan (the run's fixed
//! cost), attention (91 small launches), and a fuzz program of data-dependent `if`s in a loop (87 tiny launches
//! behind host decisions). Compare a change's figures against the same bench before it, in one sitting. Run with
//! `cargo bench --bench executor`.

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::rewrite::rules::{shipped, to_rewrites};

mod common;

const PROGRAMS: &[(&str, &str)] = &[
    ("corpus/regressions/ops.py", "add_out"),
    ("corpus/workloads/attention.py", "attention"),
    ("corpus/regressions/fuzz.py", "views_chosen_by_ifs_in_turn"),
];

fn bench(c: &mut Criterion) {
    let rules = to_rewrites(&shipped().unwrap()).unwrap();
    let mut group = c.benchmark_group("executor");
    for (file, name) in PROGRAMS {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let source = std::fs::read_to_string(&path).unwrap();
        let module = funcfuse::frontend::parse_module(path.to_str().unwrap(), &source).unwrap();
        let (plan, mut dev, inputs) = common::loaded_plan(&module, name, &rules);
        group.bench_function(*name, |b| b.iter(|| dev.run(&plan, &inputs).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
