//! Reducing a diverging program: delete statements (a line, or a block header with its body) and returned names
//! while the program still diverges the same way (the same engine, the same kind of divergence).
//!
//! Deletion works on lines of the program's body. A candidate that no longer parses, or that the reference now
//! rejects differently, simply fails the test and is not kept. Passes repeat until none deletes anything.

use super::{check_source, Engine, Verdict};
use crate::ir::Node;
use crate::rewrite::TermAnalysis;

fn indent(l: &str) -> usize {
    l.len() - l.trim_start().len()
}

/// The end (exclusive) of the statement starting at line `i`: the line itself and every following deeper line.
fn block_end(lines: &[String], i: usize) -> usize {
    let base = indent(&lines[i]);
    let mut j = i + 1;
    while j < lines.len() && (lines[j].trim().is_empty() || indent(&lines[j]) > base) {
        j += 1;
    }
    j
}

/// Shrinks `source` (whose program `func` diverges with `signature`) as far as deleting statements and shrinking
/// parameter dims go; returns the smallest source found and its verdict.
pub fn reduce(
    source: &str,
    func: &str,
    signature: &super::Divergence,
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> (String, Option<Verdict>) {
    // Only the reference and the diverging engine need to run while reducing.
    let engines: Vec<Engine> =
        engines.iter().copied().filter(|&e| e == Engine::Reference || e == signature.engine).collect();
    let still = |text: &str| -> Option<Verdict> {
        let v = check_source(&format!("{func}.py"), text, func, &engines, rules);
        v.divergences.iter().any(|d| d.same_as(signature)).then_some(v)
    };
    let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
    let mut best = None;
    let find_def = |lines: &[String]| lines.iter().position(|l| l.starts_with(&format!("def {func}(")));
    let Some(mut def) = find_def(&lines) else {
        return (source.to_string(), None);
    };
    loop {
        let mut changed = false;
        // Statements, from the last to the first (later statements depend on earlier ones, not the reverse).
        let mut i = lines.len();
        while i > def + 1 {
            i -= 1;
            if lines[i].trim_start().starts_with("return ") || advances_a_while(&lines, i) {
                continue;
            }
            let j = block_end(&lines, i);
            let mut cand = lines.clone();
            cand.drain(i..j);
            let text = cand.join("\n") + "\n";
            if let Some(v) = still(&text) {
                lines = cand;
                best = Some(v);
                changed = true;
                i = i.min(lines.len());
            }
        }
        // Returned names, one at a time.
        if let Some(r) = lines.iter().position(|l| l.trim_start().starts_with("return ")) {
            let names: Vec<String> =
                lines[r].trim_start()["return ".len()..].split(',').map(|s| s.trim().to_string()).collect();
            if names.len() > 1 {
                for k in 0..names.len() {
                    let rest: Vec<&String> =
                        names.iter().enumerate().filter(|(x, _)| *x != k).map(|(_, n)| n).collect();
                    let mut cand = lines.clone();
                    cand[r] = format!("    return {}", rest.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", "));
                    let text = cand.join("\n") + "\n";
                    if let Some(v) = still(&text) {
                        lines = cand;
                        best = Some(v);
                        changed = true;
                        break;
                    }
                }
            }
        }
        // Parameter shapes, one dim at a time: to 1, else halved (smaller inputs make the divergence easier to read).
        let mut from = 0;
        while let Some((start, end, n)) = next_dim(&lines[def], from) {
            from = end;
            for smaller in [1, n / 2] {
                if smaller == 0 || smaller >= n {
                    continue;
                }
                let mut cand = lines.clone();
                cand[def] = format!("{}{smaller}{}", &lines[def][..start], &lines[def][end..]);
                let text = cand.join("\n") + "\n";
                if let Some(v) = still(&text) {
                    lines = cand;
                    best = Some(v);
                    changed = true;
                    from = start + smaller.to_string().len();
                    break;
                }
            }
        }
        // Helpers no longer called.
        let mut k = 0;
        while k < lines.len() {
            if let Some(name) = lines[k].strip_prefix("def _").and_then(|l| l.split('(').next()) {
                let name = format!("_{name}");
                let called = lines.iter().any(|l| !l.starts_with("def ") && l.contains(&format!("{name}(")));
                if !called {
                    let mut end = block_end(&lines, k);
                    while end < lines.len() && lines[end].trim().is_empty() {
                        end += 1;
                    }
                    lines.drain(k..end);
                    continue;
                }
            }
            k += 1;
        }
        // Helpers are defined before the program: removing one moves its `def` line.
        def = find_def(&lines).expect("the program's def is never deleted");
        if !changed {
            break;
        }
    }
    (lines.join("\n") + "\n", best)
}

/// The next dim size of a parameter annotation (`f32[4, 3]`) in the `def` line at or after byte `from`: its byte
/// range and value. The return annotation is left alone (it must keep matching what is returned).
fn next_dim(line: &str, from: usize) -> Option<(usize, usize, usize)> {
    let params_end = line.find("->").unwrap_or(line.len());
    let bytes = line.as_bytes();
    let mut depth = 0i32;
    let mut i = 0;
    while i < params_end {
        match bytes[i] {
            b'[' => depth += 1,
            b']' => depth -= 1,
            b'0'..=b'9' if depth > 0 && i >= from && !bytes[i - 1].is_ascii_alphanumeric() => {
                let mut j = i;
                while j < params_end && bytes[j].is_ascii_digit() {
                    j += 1;
                }
                return Some((i, j, line[i..j].parse().ok()?));
            }
            b'0'..=b'9' => {
                // The rest of a number (or of a name such as `f32`) already passed over.
                while i + 1 < params_end && bytes[i + 1].is_ascii_alphanumeric() {
                    i += 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::next_dim;
    use crate::fuzz::{Divergence, Engine, Kind};

    #[test]
    fn a_refusal_stays_the_same_refusal_while_reduced() {
        let d = |kind, detail: &str| Divergence { engine: Engine::Functional, kind, detail: detail.into() };
        let orig = d(Kind::Refused, "fuzz_1.py:15:9: index 6 is out of bounds for dimension 0 with size 4");
        assert!(orig.same_as(&d(Kind::Refused, "fuzz_1.py:7:5: index 2 is out of bounds for dimension 0 with size 1")));
        assert!(!orig.same_as(&d(Kind::Refused, "fuzz_1.py:9:12: name `w3` is not defined")));
        // Wrong values differ from one reduction step to the next: the kind is what must stay.
        let wrong = d(Kind::Wrong, "b.npy: 2 of 6 elements differ");
        assert!(wrong.same_as(&d(Kind::Wrong, "a.npy: 1 of 1 elements differ")));
        assert!(!wrong.same_as(&orig));
    }

    #[test]
    fn next_dim_walks_parameter_dims_only() {
        let line = "def f(a: f32[4, 12], idx: i64[3], n: int = 5) -> tuple[f32[4, 12], f32[()]]:";
        let mut from = 0;
        let mut dims = Vec::new();
        while let Some((s, e, n)) = next_dim(line, from) {
            assert_eq!(line[s..e].parse::<usize>().unwrap(), n);
            dims.push(n);
            from = e;
        }
        assert_eq!(dims, [4, 12, 3]);
    }
}

/// Whether line `i` is `NAME += ...` for a `NAME` some `while` tests: without it the loop may run until the
/// interpreters' iteration limit (ten million), for every candidate that drops it.
fn advances_a_while(lines: &[String], i: usize) -> bool {
    let Some((name, _)) = lines[i].trim_start().split_once(" += ") else { return false };
    lines
        .iter()
        .any(|l| l.trim_start().strip_prefix("while ").is_some_and(|c| c.split_whitespace().next() == Some(name)))
}
