//! Reducing a diverging program: delete statements (a line, or a block header with its body) and returned names
//! while the program still diverges the same way (the same engine, the same kind of divergence).
//!
//! Deletion works on lines of the program's body. A candidate that no longer parses, or that the reference now
//! rejects differently, simply fails the test and is not kept. Passes repeat until none deletes anything.

use super::{check_source, Engine, Kind, Verdict};
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

/// Shrinks `source` (whose program `func` diverges with `signature`) as far as statement deletion goes; returns the
/// smallest source found and its verdict.
pub fn reduce(
    source: &str,
    func: &str,
    signature: (Engine, Kind),
    engines: &[Engine],
    rules: &[egg::Rewrite<Node, TermAnalysis>],
) -> (String, Option<Verdict>) {
    // Only the reference and the diverging engine need to run while reducing.
    let engines: Vec<Engine> =
        engines.iter().copied().filter(|&e| e == Engine::Reference || e == signature.0).collect();
    let still = |text: &str| -> Option<Verdict> {
        let v = check_source(&format!("{func}.py"), text, func, &engines, rules);
        v.divergences.iter().any(|d| (d.engine, d.kind) == signature).then_some(v)
    };
    let mut lines: Vec<String> = source.lines().map(str::to_string).collect();
    let mut best = None;
    let Some(def) = lines.iter().position(|l| l.starts_with(&format!("def {func}("))) else {
        return (source.to_string(), None);
    };
    loop {
        let mut changed = false;
        // Statements, from the last to the first (later statements depend on earlier ones, not the reverse).
        let mut i = lines.len();
        while i > def + 1 {
            i -= 1;
            if lines[i].trim_start().starts_with("return ") {
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
        if !changed {
            break;
        }
    }
    (lines.join("\n") + "\n", best)
}
