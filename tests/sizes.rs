//! Size limits on the source, checked: no file of `src/` over [`MAX_FILE_LINES`] lines and no function over
//! [`MAX_FN_LINES`] lines, except the declarative tables listed in [`TABLES`] (a `match` from an op name to its
//! value, type or arity, one arm per op: splitting one would scatter the table, not name steps). A function's length
//! runs from its `fn` line to its closing brace, doc comments not counted.

use std::path::Path;

const MAX_FILE_LINES: usize = 800;
const MAX_FN_LINES: usize = 150;

/// Functions allowed over [`MAX_FN_LINES`]: (file below `src/`, function name, why it is a table). The test fails on
/// an entry that is no longer over the limit, so the list stays true.
const TABLES: &[(&str, &str, &str)] = &[
    ("functionalize/table.rs", "torch", "torch op name -> the term it builds, one arm per op"),
    ("interp/torch_ops.rs", "torch_op", "torch op name -> the runtime call that computes it, one arm per op"),
    ("ir/verify.rs", "op_type", "op name -> its result dtype and shape, one arm per op"),
    ("ir/eval.rs", "op", "op name -> the runtime call that evaluates it, one arm per op"),
];

/// Rust source with comments, string and character literals blanked out (newlines kept, so lines still count), so
/// that braces inside them do not count.
fn blank_literals(text: &str) -> Vec<char> {
    let s: Vec<char> = text.chars().collect();
    let mut out = s.clone();
    let blank = |out: &mut Vec<char>, from: usize, to: usize| {
        for c in &mut out[from..to.min(s.len())] {
            if *c != '\n' {
                *c = ' ';
            }
        }
    };
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut i = 0;
    while i < s.len() {
        let next = s.get(i + 1).copied();
        if s[i] == '/' && next == Some('/') {
            let end = (i..s.len()).find(|&j| s[j] == '\n').unwrap_or(s.len());
            blank(&mut out, i, end);
            i = end;
        } else if s[i] == '/' && next == Some('*') {
            // Block comments nest in Rust.
            let (mut depth, mut j) = (0, i);
            while j < s.len() {
                if s[j] == '/' && s.get(j + 1) == Some(&'*') {
                    depth += 1;
                    j += 2;
                } else if s[j] == '*' && s.get(j + 1) == Some(&'/') {
                    depth -= 1;
                    j += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    j += 1;
                }
            }
            blank(&mut out, i, j);
            i = j;
        } else if s[i] == 'r' && (i == 0 || !ident(s[i - 1])) && matches!(next, Some('"') | Some('#')) {
            // A raw string `r#"..."#`: it ends at a quote followed by as many hashes.
            let hashes = (i + 1..s.len()).take_while(|&j| s[j] == '#').count();
            if s.get(i + 1 + hashes) != Some(&'"') {
                i += 1;
                continue;
            }
            let mut j = i + 2 + hashes;
            while j < s.len() && !(s[j] == '"' && (1..=hashes).all(|h| s.get(j + h) == Some(&'#'))) {
                j += 1;
            }
            blank(&mut out, i, j + 1 + hashes);
            i = j + 1 + hashes;
        } else if s[i] == '"' {
            let mut j = i + 1;
            while j < s.len() && s[j] != '"' {
                j += if s[j] == '\\' { 2 } else { 1 };
            }
            blank(&mut out, i, j + 1);
            i = j + 1;
        } else if s[i] == '\'' {
            // A character literal (`'{'`, `'\''`, `'\u{7b}'`), or a lifetime (`'a`), which is left alone.
            let end = if next == Some('\\') {
                (i + 3..s.len()).find(|&j| s[j] == '\'')
            } else if s.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(e) => {
                    blank(&mut out, i, e + 1);
                    i = e + 1;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Every function with a body in a file: (name, first line, number of lines), lines 1-based.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let s = blank_literals(text);
    let line_at = |i: usize| 1 + s[..i].iter().filter(|&&c| c == '\n').count();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut out = Vec::new();
    for i in 0..s.len().saturating_sub(3) {
        if !(s[i] == 'f' && s[i + 1] == 'n' && s[i + 2].is_whitespace()) || (i > 0 && ident(s[i - 1])) {
            continue;
        }
        let name_start = (i + 2..s.len()).find(|&j| !s[j].is_whitespace()).unwrap_or(s.len());
        let name: String = s[name_start..].iter().take_while(|&&c| ident(c)).collect();
        if name.is_empty() {
            continue; // `fn(` as a type
        }
        // The body opens at the first `{` outside brackets; a `;` there first means no body.
        let mut depth = 0i32;
        let mut open = None;
        for (j, &c) in s.iter().enumerate().skip(name_start) {
            match c {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    open = Some(j);
                    break;
                }
                _ => {}
            }
        }
        let Some(open) = open else { continue };
        let mut depth = 0i32;
        let close = (open..s.len()).find(|&j| {
            match s[j] {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            depth == 0
        });
        let close = close.unwrap_or_else(|| panic!("fn {name}: no closing brace found"));
        let first = line_at(i);
        out.push((name, first, line_at(close) - first + 1));
    }
    out
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

#[test]
fn no_file_or_function_of_src_is_over_its_limit() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut rels = Vec::new();
    rust_files(&src, &src, &mut rels);
    assert!(rels.len() > 50, "only {} files found under src/: the scan no longer reads the tree", rels.len());
    let mut over = Vec::new();
    let mut seen = vec![false; TABLES.len()];
    for rel in &rels {
        let text = std::fs::read_to_string(src.join(rel)).unwrap();
        let lines = text.lines().count();
        if lines > MAX_FILE_LINES {
            over.push(format!("src/{rel}: {lines} lines (at most {MAX_FILE_LINES})"));
        }
        for (name, line, n) in functions(&text) {
            if n <= MAX_FN_LINES {
                continue;
            }
            match TABLES.iter().position(|(f, t, _)| f == rel && *t == name) {
                Some(k) => seen[k] = true,
                None => over.push(format!("src/{rel}:{line}: fn {name} has {n} lines (at most {MAX_FN_LINES})")),
            }
        }
    }
    assert!(over.is_empty(), "over the size limits (split into named steps):\n{}", over.join("\n"));
    let stale: Vec<String> =
        TABLES.iter().zip(&seen).filter(|(_, s)| !**s).map(|((f, t, _), _)| format!("src/{f}: fn {t}")).collect();
    assert!(
        stale.is_empty(),
        "listed in TABLES but no longer over {MAX_FN_LINES} lines (remove them): {}",
        stale.join(", ")
    );
}

/// The scanner itself: braces in strings, characters and comments do not count, a lifetime is not a character, a
/// body-less declaration is no function, and a nested function counts in its own right.
#[test]
fn the_scanner_measures_functions() {
    let text = "/// fn doc() {\nfn a<'x>(s: &'x str) -> [u8; 2] {\n    let _ = \"}\";\n    let _ = '{';\n    \
                let _ = r#\"}\"#; // }\n    /* } /* } */ } */\n    fn inner() {\n    }\n}\ntrait T { fn decl(&self); }\n\
                fn b(f: fn(u8) -> u8) { let _ = '\\''; }\n";
    let got = functions(text);
    let expected: Vec<(String, usize, usize)> = vec![("a".into(), 2, 8), ("inner".into(), 7, 2), ("b".into(), 11, 1)];
    assert_eq!(got, expected);
}
