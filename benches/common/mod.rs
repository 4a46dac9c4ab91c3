//! What the benchmarks share: the corpus's program files.

use std::path::{Path, PathBuf};

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
