//! A plan's text form (`describe`) and its Graphviz graph (`dot`).

use egg::Id;

use super::plan::{How, Plan};
use crate::ir::Node;

impl Plan {
    /// Kernel `k`'s line of [`Plan::describe`]: the node it computes, its type, how it writes, its domain, its
    /// reduction and the nodes it reads.
    pub fn kernel_line(&self, k: usize) -> String {
        let id = self.launches[k].node;
        let i = usize::from(id);
        let shown = match &self.term[id] {
            Node::Op(op, _) => op.to_string(),
            other => other.to_string(),
        };
        let ty = self.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
        let kernel = &self.kernels[k];
        let what = match self.how[i] {
            How::InPlace(_) => "in place",
            How::CopyInPlace(_) => "copy, then in place",
            _ => "new buffer",
        };
        let red = kernel.reduce.as_ref().map(|r| {
            let then = if kernel.epilogue.is_some() { " with an epilogue" } else { "" };
            format!(" reducing {:?} over {:?}{then}", r.op, r.extents)
        });
        format!(
            "${i} = {shown} {ty}: kernel {} ({what}) over {:?}{}, reads {:?}",
            kernel.name,
            kernel.domain,
            red.unwrap_or_default(),
            self.launches[k].args.iter().map(|a| format!("${a}")).collect::<Vec<_>>()
        )
    }

    /// One line per node that is not fused: how it is computed, with its kernel's domain (the plan's text form).
    pub fn describe(&self) -> String {
        use std::fmt::Write;
        let mut s = String::new();
        for (i, how) in self.how.iter().enumerate() {
            let node = &self.term[Id::from(i)];
            let shown = match node {
                Node::Op(op, _) => op.to_string(),
                other => other.to_string(),
            };
            let ty = self.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
            let _ = match how {
                How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => writeln!(s, "{}", self.kernel_line(*k)),
                How::Fallback => writeln!(s, "${i} = {shown} {ty}: host fallback"),
                How::Input => writeln!(s, "${i} = {shown} {ty}: input"),
                _ => Ok(()),
            };
        }
        for (g, members) in self.groups.iter().enumerate() {
            let names: Vec<&str> = members.iter().map(|&m| self.kernels[m].name.as_str()).collect();
            let _ = writeln!(s, "group g{g}: {} launch together", names.join(", "));
        }
        s
    }
}

impl Plan {
    /// The plan as a Graphviz graph: buffers (inputs, kernels, fallbacks) and which kernels read which.
    pub fn dot(&self) -> String {
        use std::fmt::Write;
        let mut s = String::from("digraph plan {\n  rankdir=TB;\n  node [fontname=\"sans-serif\", fontsize=10];\n");
        for (i, how) in self.how.iter().enumerate() {
            let ty = self.types[i].as_ref().map(|t| t.to_string()).unwrap_or_default();
            let (label, shape) = match how {
                How::Input => (format!("{}\\n{ty}", self.term[Id::from(i)]), "ellipse"),
                How::Kernel(k) | How::InPlace(k) | How::CopyInPlace(k) => {
                    let what = match how {
                        How::InPlace(_) => " (in place)",
                        How::CopyInPlace(_) => " (copy + in place)",
                        _ => "",
                    };
                    (format!("{}{what}\\n{ty}", self.kernels[*k].name), "box")
                }
                How::Fallback => (format!("host: {}\\n{ty}", self.term[Id::from(i)]), "octagon"),
                _ => continue,
            };
            let _ = writeln!(s, "  n{i} [label=\"{}\", shape={shape}];", label.replace('"', "'"));
        }
        for l in &self.launches {
            for a in &l.args {
                let _ = writeln!(s, "  n{} -> n{};", usize::from(*a), usize::from(l.node));
            }
            if let Some(x) = super::exec::written_base(&self.term, l.node) {
                if matches!(self.how[usize::from(l.node)], How::InPlace(_) | How::CopyInPlace(_)) {
                    let _ = writeln!(
                        s,
                        "  n{} -> n{} [style=dashed, label=\"base\"];",
                        usize::from(x),
                        usize::from(l.node)
                    );
                }
            }
        }
        s.push_str("}\n");
        s
    }
}
