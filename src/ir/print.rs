//! Readable forms of terms: a numbered listing of a term's DAG (shared nodes printed once), and statistics.

use std::fmt::Write;

use egg::Language;

use super::{Node, OpName, Term};

/// One line per node, children named by number: `$12 = (add $10 $11)`. Leaves are printed inline.
pub fn display_dag(term: &Term) -> String {
    let nodes = term.as_ref();
    let inline: Vec<bool> = nodes
        .iter()
        .map(|n| n.is_leaf() || matches!(n, Node::List(c) if c.iter().all(|&i| term[i].is_leaf())))
        .collect();
    let mut names = vec![String::new(); nodes.len()];
    let mut out = String::new();
    for (i, n) in nodes.iter().enumerate() {
        let text = if matches!(n, Node::List(c) if c.is_empty()) {
            "(list)".to_string()
        } else if n.is_leaf() {
            n.to_string()
        } else {
            let kids: Vec<&str> = n.children().iter().map(|&c| names[usize::from(c)].as_str()).collect();
            format!("({} {})", op_text(n), kids.join(" "))
        };
        if inline[i] {
            names[i] = text;
        } else {
            names[i] = format!("${i}");
            let _ = writeln!(out, "${i} = {text}");
        }
    }
    out
}

fn op_text(n: &Node) -> String {
    match n {
        Node::Op(op, _) => op.as_str().to_string(),
        other => other.to_string(),
    }
}

/// Counts that tell how big a term is and what it does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TermStats {
    pub nodes: usize,
    pub loops: usize,
    pub accesses: usize,
    pub assigns: usize,
    pub ifs: usize,
}

pub fn term_stats(term: &Term) -> TermStats {
    let mut s = TermStats { nodes: term.as_ref().len(), ..Default::default() };
    for n in term.as_ref() {
        match n {
            Node::Loop(_) | Node::While(_) => s.loops += 1,
            Node::Access(_) => s.accesses += 1,
            Node::Assign(_) => s.assigns += 1,
            Node::If(_) => s.ifs += 1,
            Node::Op(OpName::IndexPut, _) => s.assigns += 1,
            _ => {}
        }
    }
    s
}
