//! What the benchmarks share: the corpus's program files, and a program's fused plan loaded on the C device.

#![allow(dead_code)] // each bench uses a part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use funcfuse::backend::{Loaded, Target};
use funcfuse::lower::{Plan, Policy};
use funcfuse::tensor::Tensor;

/// Every `*.py` under `dir` (goldens excluded), sorted.
pub fn py_files(dir: &Path, out: &mut Vec<PathBuf>) {
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

/// Program `name` of `module` through the real pipeline (functionalize, saturate with `rules`, plan as ours), its
/// kernels compiled and loaded on the C device, with seed-0 inputs.
pub fn loaded_plan(
    module: &funcfuse::frontend::Module,
    name: &str,
    rules: &[egg::Rewrite<funcfuse::ir::Node, funcfuse::rewrite::TermAnalysis>],
) -> (Plan, Loaded, BTreeMap<String, Tensor>) {
    let f = funcfuse::functionalize::functionalize(module, name, &BTreeMap::new()).unwrap();
    let mut o = f.clone();
    o.term = funcfuse::rewrite::saturate::optimize(&f, rules, Default::default()).unwrap().term;
    let plan = funcfuse::lower::plan(&o.term, &o.inputs, Policy::Fused).unwrap();
    let dev = Loaded::new(&plan, Target::C).unwrap();
    let inputs = o
        .inputs
        .iter()
        .enumerate()
        .map(|(i, (n, d, s))| (n.clone(), funcfuse::io::random_input(0, i, *d, s).unwrap()))
        .collect();
    (plan, dev, inputs)
}
