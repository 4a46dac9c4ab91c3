//! The library's layering, checked: every top-level module of `src/` has a rank, and a module may import only
//! modules of lower rank (`crate::NAME`, `use crate::{NAME, ...}`, `super::` paths that climb to the crate root).
//! The ranks are stated once, here ([`RANKS`]), and ARCHITECTURE.md's module map shows them. Imports against them
//! that are not yet undone are listed file by file in [`KNOWN`], each with why; the test fails on any other, and on a
//! known one that is gone (so the list stays true). The binary (`src/main.rs`, `src/cli/`) sits above everything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each top-level module and its rank, lowest first: a module may import only modules of a lower rank.
const RANKS: &[(&str, u32)] = &[
    // Shared ground: diagnostics, the limits every stage honours, stage logging.
    ("diag", 0),
    ("limits", 1),
    ("log", 1),
    // The strided runtime and file edges.
    ("tensor", 2),
    ("io", 3),
    // The term language (it knows no Python).
    ("ir", 4),
    // Python source: the AST, the reference interpreter over it, and the stage that makes it a term.
    ("frontend", 5),
    ("interp", 6),
    ("functionalize", 7),
    // Cost profiles, then plans and the kernel IR, then the backends that render and run them.
    ("cost", 8),
    ("lower", 9),
    ("roofline", 10),
    ("backend", 11),
    // The e-graph: extraction (over any e-graph of terms), then rules and saturation (which plans candidates to
    // price them).
    ("extract", 12),
    ("rewrite", 13),
    // The pipeline and what is built on it.
    ("autotune", 14),
    ("pipeline", 15),
    ("optimize", 16),
    ("batch", 17),
    ("compare", 18),
    ("explain", 18),
    ("report", 18),
    ("embed", 19),
    ("fuzz", 19),
    ("ops_doc", 19),
    // Calibration runs plans through the pipeline and compares them, to measure the profile `cost` reads.
    ("calibrate", 19),
    ("torch", 19),
];

/// Imports against [`RANKS`] not undone yet: (file, the module it imports, why).
const KNOWN: &[(&str, &str, &str)] = &[];

/// A file's module path below `src/` (`lower/plan.rs` is `["lower", "plan"]`, `lower/mod.rs` is `["lower"]`).
fn module_path(rel: &str) -> Vec<String> {
    let mut parts: Vec<String> = rel.trim_end_matches(".rs").split('/').map(str::to_string).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts
}

/// The text of a Rust file without its comments (line comments, doc comments and block comments).
fn strip_comments(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with("//") {
            rest = rest.find('\n').map_or("", |i| &rest[i..]);
        } else if rest.starts_with("/*") {
            rest = rest.find("*/").map_or("", |i| &rest[i + 2..]);
        } else {
            let c = rest.chars().next().unwrap();
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

fn ident_at(s: &str) -> &str {
    let end = s.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(s.len());
    &s[..end]
}

/// The top-level modules a file (at module path `path`) imports, other than its own.
fn imports(path: &[String], text: &str) -> BTreeSet<String> {
    let text = strip_comments(text);
    let mut found = BTreeSet::new();
    let bytes = text.as_bytes();
    let word_start = |i: usize| i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
    for (i, _) in text.match_indices("crate::") {
        if !word_start(i) {
            continue;
        }
        let after = &text[i + "crate::".len()..];
        if let Some(group) = after.strip_prefix('{') {
            // `crate::{a, b::c, d}`: the first name of each item (nested braces belong to their item).
            let mut depth = 0;
            let mut item_start = true;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => item_start = true,
                    c if item_start && (c.is_ascii_alphabetic() || c == '_') => {
                        found.insert(ident_at(&group[j..]).to_string());
                        item_start = false;
                    }
                    c if !c.is_whitespace() => item_start = false,
                    _ => {}
                }
            }
        } else {
            found.insert(ident_at(after).to_string());
        }
    }
    // `super::super::NAME` climbing to the crate root names a top-level module.
    for (i, _) in text.match_indices("super::") {
        if !word_start(i) || text[..i].ends_with("super::") {
            continue;
        }
        let mut rest = &text[i..];
        let mut ups = 0;
        while let Some(r) = rest.strip_prefix("super::") {
            ups += 1;
            rest = r;
        }
        // A file's own module is `path` (a `mod.rs` is its folder's module): climbing `path.len()` levels reaches
        // the crate root.
        if ups == path.len() {
            found.insert(ident_at(rest).to_string());
        }
    }
    found.retain(|m| !m.is_empty() && path.first() != Some(m));
    found
}

fn rank(m: &str) -> Option<u32> {
    RANKS.iter().find(|(n, _)| *n == m).map(|(_, r)| *r)
}

/// Every `.rs` file under `dir`, as paths relative to `root`, sorted.
fn rust_files(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(root, &p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p.strip_prefix(root).unwrap().to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The imports against [`RANKS`]: (file, module imported, the file's module's rank, the imported module's rank).
fn violations(files: &[(String, String)]) -> Vec<(String, String, u32, u32)> {
    let mut out = Vec::new();
    for (rel, text) in files {
        let path = module_path(rel);
        let own = &path[0];
        let own_rank = rank(own).unwrap_or_else(|| panic!("src/{rel}: module `{own}` has no rank in RANKS"));
        for m in imports(&path, text) {
            // Names that are not modules of this crate (`crate::Diagnostic` re-exported at the root) are skipped.
            let Some(r) = rank(&m) else { continue };
            if r >= own_rank {
                out.push((rel.clone(), m, own_rank, r));
            }
        }
    }
    out
}

#[test]
fn no_module_imports_against_the_stated_directions() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut rels = Vec::new();
    rust_files(&src, &src, &mut rels);
    let files: Vec<(String, String)> = rels
        .into_iter()
        .filter(|r| r != "main.rs" && !r.starts_with("cli/") && r != "lib.rs")
        .map(|r| {
            let text = std::fs::read_to_string(src.join(&r)).unwrap();
            (r, text)
        })
        .collect();
    // Every top-level module declared in lib.rs has a rank, and every ranked module exists.
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let declared: BTreeSet<&str> =
        lib.lines().filter_map(|l| l.trim().strip_prefix("pub mod ")).map(|l| l.trim_end_matches(';')).collect();
    let ranked: BTreeSet<&str> = RANKS.iter().map(|(n, _)| *n).collect();
    assert_eq!(declared, ranked, "lib.rs's modules and RANKS differ: give a new module its rank");
    let found = violations(&files);
    let mut unexpected = Vec::new();
    let mut seen: BTreeMap<(&str, &str), bool> = KNOWN.iter().map(|(f, m, _)| ((*f, *m), false)).collect();
    for (file, m, own, r) in &found {
        match seen.get_mut(&(file.as_str(), m.as_str())) {
            Some(s) => *s = true,
            None => unexpected.push(format!("src/{file} (rank {own}) imports `{m}` (rank {r})")),
        }
    }
    assert!(
        unexpected.is_empty(),
        "imports against the layering (tests/layering.rs, RANKS):\n{}",
        unexpected.join("\n")
    );
    let gone: Vec<String> = seen.iter().filter(|(_, s)| !**s).map(|((f, m), _)| format!("src/{f} -> {m}")).collect();
    assert!(gone.is_empty(), "known exceptions no longer needed (remove them from KNOWN): {}", gone.join(", "));
}

/// The scanner itself: it sees every import form, ignores comments, and the check flags a forbidden import.
#[test]
fn the_scanner_finds_imports_in_every_form() {
    let path = module_path("lower/plan.rs");
    let text = "//! crate::backend in a doc comment\nuse crate::{ir::{Node, Term}, tensor};\nuse super::exec;\n\
                fn f() { crate::limits::check(); super::super::diag::x(); /* crate::rewrite */ }\n";
    let got: Vec<String> = imports(&path, text).into_iter().collect();
    assert_eq!(got, ["diag", "ir", "limits", "tensor"]);
    let files = vec![("ir/eval.rs".to_string(), "fn f() { crate::interp::run(); }".to_string())];
    assert_eq!(violations(&files), vec![("ir/eval.rs".to_string(), "interp".to_string(), 4, 6)]);
    let files = vec![("lower/plan.rs".to_string(), "use crate::{ir, rewrite::rules};".to_string())];
    assert_eq!(violations(&files), vec![("lower/plan.rs".to_string(), "rewrite".to_string(), 9, 13)]);
    assert_eq!(module_path("lower/mod.rs"), ["lower"]);
    assert_eq!(imports(&module_path("lower/mod.rs"), "use super::diag::X;"), BTreeSet::from(["diag".to_string()]));
}
