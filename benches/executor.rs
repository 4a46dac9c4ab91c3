//! The executor's own cost: one run of a plan on the C backend, where the kernels do little and the host's walk of
//! the plan (loops, branches, buffers, launches) is most of the time. Programs: a one-op plan (the run's fixed
//! cost), attention (91 small launches), and a fuzz program of data-dependent `if`s in a loop (87 tiny launches
//! behind host decisions). Compare a change's figures against the same bench before it, in one sitting. Run with
//! `cargo bench --bench executor`.

use std::collections::BTreeMap;
use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use funcfuse::backend::{Loaded, Target};
use funcfuse::lower::Policy;
use funcfuse::rewrite::rules::{shipped, to_rewrites};

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
        let f = funcfuse::functionalize::functionalize(&module, name, &BTreeMap::new()).unwrap();
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
        group.bench_function(*name, |b| b.iter(|| dev.run(&plan, &inputs).unwrap()));
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
