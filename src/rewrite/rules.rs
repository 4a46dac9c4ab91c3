//! Rule files: parsing `rules/*.rules` into egg rewrites with conditions from a closed registry of predicates.
//!
//! A rule is one line `topic/name: LHS => RHS [if pred(?a, ...)]...` (`<=>` for both directions), preceded by a
//! comment line stating its identity. Errors name `file:line`: a malformed line, an unknown operator (the term
//! language fails to parse it), an unknown predicate, a variable on the right or in a condition that the left does
//! not bind, a topic that is not the file's, a duplicate name, a rule without its comment.

use std::collections::HashSet;
use std::path::Path;

use egg::{ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};

use super::analysis::{Lit, TermAnalysis};
use super::TermGraph;
use crate::diag::Diagnostic;
use crate::ir::geometry::{disjoint, no_overlap};
use crate::ir::{Node, Ty};

/// A rule as written: where, what, and its conditions.
#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub lhs: String,
    pub rhs: String,
    pub both_ways: bool,
    pub conditions: Vec<(String, Vec<String>)>,
    /// Written `@real`: the identity holds in real arithmetic but not always in floating point (reassociation,
    /// cancellation). Such a rule is used only with `--fast-math`, and checked within an error bound.
    pub real: bool,
}

/// How deep a rule's pattern may nest (deeper is an error, not a stack overflow while parsing it).
pub const MAX_DEPTH: usize = 32;

/// The predicates rule conditions may name.
pub const PREDICATES: &[(&str, usize, &str)] = &[
    ("same_dtype", 2, "both are tensors of one dtype"),
    ("same_shape", 2, "both are tensors of one shape (so nothing broadcasts)"),
    ("scalar", 1, "?a is a tensor of no dims (it broadcasts to every shape)"),
    ("float", 1, "?a is a floating-point tensor"),
    ("fills", 2, "tensor ?a has exactly the shape of view ?b"),
    ("no_overlap", 1, "no two indices of view ?a name one element (checked by enumeration)"),
    ("disjoint", 2, "views ?a and ?b, whose offsets differ by a known constant, share no element"),
];

fn err(file: &str, line: usize, m: impl Into<String>) -> Diagnostic {
    Diagnostic::new(format!("{file}:{line}: {}", m.into()))
}

/// The deepest nesting of parentheses in `text`.
fn depth(text: &str) -> usize {
    let (mut d, mut max) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' => {
                d += 1;
                max = max.max(d);
            }
            ')' => d = d.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Splits `text` after one balanced s-expression or token; returns (item, rest).
fn take_item(text: &str) -> Option<(&str, &str)> {
    let t = text.trim_start();
    if t.is_empty() {
        return None;
    }
    if t.starts_with('(') {
        let mut depth = 0;
        for (i, c) in t.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((&t[..=i], &t[i + 1..]));
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    let end = t.find(char::is_whitespace).unwrap_or(t.len());
    Some((&t[..end], &t[end..]))
}

fn vars_of(pattern: &str) -> HashSet<String> {
    pattern
        .split(|c: char| c.is_whitespace() || c == '(' || c == ')' || c == ',')
        .filter(|w| w.starts_with('?'))
        .map(|w| w.to_string())
        .collect()
}

/// Parses one rule file's text.
pub fn parse_rules(file: &str, text: &str) -> Result<Vec<RuleDef>, Diagnostic> {
    let topic = Path::new(file).file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
    let mut out = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    for (i, raw) in lines.iter().enumerate() {
        let line = raw.trim();
        let n = i + 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, rest) = line.split_once(':').ok_or_else(|| err(file, n, "expected `topic/name: LHS => RHS`"))?;
        let name = name.trim().to_string();
        match name.split_once('/') {
            Some((t, r))
                if t == topic && !r.is_empty() && r.chars().all(|c| c.is_alphanumeric() || c == '-' || c == '_') => {}
            _ => return Err(err(file, n, format!("rule name `{name}` must be `{topic}/NAME` (the file's topic)"))),
        }
        if i == 0 || !lines[i - 1].trim().starts_with('#') || lines[i - 1].trim() == "#" {
            return Err(err(file, n, format!("rule `{name}` needs a comment line above it stating its identity")));
        }
        let (lhs, rest) = take_item(rest).ok_or_else(|| err(file, n, "missing or unbalanced left-hand side"))?;
        let (arrow, rest) = take_item(rest).ok_or_else(|| err(file, n, "expected `=>` or `<=>`"))?;
        let both_ways = match arrow {
            "=>" => false,
            "<=>" => true,
            other => return Err(err(file, n, format!("expected `=>` or `<=>`, found `{other}`"))),
        };
        let (rhs, mut rest) = take_item(rest).ok_or_else(|| err(file, n, "missing or unbalanced right-hand side"))?;
        let mut conditions = Vec::new();
        let mut real = false;
        while let Some((kw, r)) = take_item(rest) {
            if kw == "@real" {
                real = true;
                rest = r;
                continue;
            }
            if kw != "if" {
                return Err(err(file, n, format!("expected `if PREDICATE(?a, ...)` or `@real`, found `{kw}`")));
            }
            let r = r.trim_start();
            let open = r.find('(').ok_or_else(|| err(file, n, "a condition needs arguments in parentheses"))?;
            let close = open + r[open..].find(')').ok_or_else(|| err(file, n, "unclosed condition"))?;
            let pname = r[..open].trim().to_string();
            let args: Vec<String> =
                r[open + 1..close].split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
            match PREDICATES.iter().find(|(p, _, _)| *p == pname) {
                None => {
                    let known: Vec<&str> = PREDICATES.iter().map(|(p, _, _)| *p).collect();
                    return Err(err(file, n, format!("unknown predicate `{pname}` (known: {})", known.join(", "))));
                }
                Some((_, arity, _)) if *arity != args.len() => {
                    return Err(err(file, n, format!("`{pname}` takes {arity} arguments, got {}", args.len())));
                }
                _ => {}
            }
            conditions.push((pname, args));
            rest = &r[close + 1..];
        }
        for (what, side) in [("left", lhs), ("right", rhs)] {
            let d = depth(side);
            if d > MAX_DEPTH {
                return Err(err(file, n, format!("the {what}-hand side nests {d} deep (at most {MAX_DEPTH})")));
            }
        }
        if lhs.starts_with('?') {
            return Err(err(
                file,
                n,
                format!("the left-hand side `{lhs}` is a bare variable: it would match every term"),
            ));
        }
        if both_ways && rhs.starts_with('?') {
            return Err(err(
                file,
                n,
                format!("the right-hand side `{rhs}` is a bare variable, so the reverse of this `<=>` rule would match every term; write it one way (`=>`)"),
            ));
        }
        let lv = vars_of(lhs);
        let rv = vars_of(rhs);
        for v in rv.iter().chain(conditions.iter().flat_map(|(_, a)| a.iter())) {
            if !lv.contains(v) {
                return Err(err(file, n, format!("variable `{v}` is not bound by the left-hand side")));
            }
        }
        if both_ways && !conditions.is_empty() {
            return Err(err(file, n, "a rule with conditions must be written one way (`=>`)"));
        }
        if both_ways && !lv.iter().all(|v| rv.contains(v)) {
            return Err(err(file, n, "a `<=>` rule must bind the same variables on both sides"));
        }
        for side in [lhs, rhs] {
            side.parse::<Pattern<Node>>().map_err(|e| err(file, n, format!("cannot parse `{side}`: {e}")))?;
        }
        out.push(RuleDef {
            name,
            file: file.to_string(),
            line: n,
            lhs: lhs.to_string(),
            rhs: rhs.to_string(),
            both_ways,
            conditions,
            real,
        });
    }
    Ok(out)
}

/// The rule files shipped in `rules/`, compiled into the binary.
const SHIPPED: &[(&str, &str)] = &[
    ("rules/fusion.rules", include_str!("../../rules/fusion.rules")),
    ("rules/scatter.rules", include_str!("../../rules/scatter.rules")),
    ("rules/views.rules", include_str!("../../rules/views.rules")),
];

/// The shipped rules.
pub fn shipped() -> Result<Vec<RuleDef>, Diagnostic> {
    let mut out = Vec::new();
    for (file, text) in SHIPPED {
        out.extend(parse_rules(file, text)?);
    }
    Ok(out)
}

/// Rules with unique names: a name seen before is an error naming both places (one hash lookup per rule).
#[derive(Default)]
struct Unique {
    rules: Vec<RuleDef>,
    seen: std::collections::HashMap<String, usize>,
}

impl Unique {
    fn push(&mut self, r: RuleDef) -> Result<(), Diagnostic> {
        if let Some(&k) = self.seen.get(&r.name) {
            let prev = &self.rules[k];
            return Err(err(
                &r.file,
                r.line,
                format!("duplicate rule name `{}` (first at {}:{})", r.name, prev.file, prev.line),
            ));
        }
        self.seen.insert(r.name.clone(), self.rules.len());
        self.rules.push(r);
        Ok(())
    }
}

/// The rule files a `--rules` path names: the file itself, or every `*.rules` file of a directory (sorted).
pub fn rule_files(path: &Path) -> Result<Vec<std::path::PathBuf>, Diagnostic> {
    if !path.is_dir() {
        if !path.exists() {
            return Err(Diagnostic::new(format!("{}: no such rules file or directory", path.display())));
        }
        return Ok(vec![path.to_path_buf()]);
    }
    let mut files: Vec<_> = std::fs::read_dir(path)
        .map_err(|e| Diagnostic::new(format!("{}: cannot read rules directory: {e}", path.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "rules"))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads and parses one rule file.
pub fn load_file(f: &Path) -> Result<Vec<RuleDef>, Diagnostic> {
    let shown = f.display().to_string();
    let text = crate::io::read_text(f).map_err(|e| Diagnostic::new(format!("{shown}: {e}")))?;
    parse_rules(&shown, &text)
}

/// Loads every `*.rules` file of a directory (sorted), rejecting duplicate names.
pub fn load_dir(dir: &Path) -> Result<Vec<RuleDef>, Diagnostic> {
    let mut out = Unique::default();
    for f in rule_files(dir)? {
        for r in load_file(&f)? {
            out.push(r)?;
        }
    }
    Ok(out.rules)
}

/// The rules to use: the shipped ones (unless `shipped` is false) and those of each `--rules` path (a directory or
/// one file), in order; a name defined twice is an error naming both places.
pub fn load(paths: &[std::path::PathBuf], shipped_too: bool) -> Result<Vec<RuleDef>, Diagnostic> {
    let mut out = Unique::default();
    if shipped_too {
        for r in shipped()? {
            out.push(r)?;
        }
    }
    for p in paths {
        for f in rule_files(p)? {
            for r in load_file(&f)? {
                out.push(r)?;
            }
        }
    }
    if out.rules.is_empty() {
        return Err(Diagnostic::new("no rules: --only-rules needs at least one --rules path with rules in it"));
    }
    Ok(out.rules)
}

fn tensor_ty(g: &TermGraph, id: Id) -> Option<(crate::tensor::DType, Vec<usize>)> {
    match &g[id].data.ty {
        Some(Ty::Tensor(d, s)) => Some((*d, s.clone())),
        _ => None,
    }
}

/// A view class with literal shape and strides, and its offset as an affine form.
fn static_view(g: &TermGraph, id: Id) -> Option<(Vec<usize>, Vec<isize>, super::AffineInt)> {
    let node = g[id].nodes.iter().find(|n| matches!(n, Node::View(_)))?;
    let Node::View([s, st, off]) = node else { return None };
    let ints = |c: Id| match &g[c].data.lit {
        Some(Lit::Ints(v)) => Some(v.clone()),
        _ => None,
    };
    let off = g[*off].data.affine.clone()?;
    Some((
        ints(*s)?.into_iter().map(|d| d.max(0) as usize).collect(),
        ints(*st)?.into_iter().map(|d| d as isize).collect(),
        off,
    ))
}

/// Evaluates a named predicate on the classes bound to its arguments.
pub(crate) fn check(g: &TermGraph, pred: &str, ids: &[Id]) -> bool {
    match pred {
        "same_dtype" => matches!((tensor_ty(g, ids[0]), tensor_ty(g, ids[1])), (Some((a, _)), Some((b, _))) if a == b),
        "same_shape" => matches!((tensor_ty(g, ids[0]), tensor_ty(g, ids[1])), (Some((_, a)), Some((_, b))) if a == b),
        "scalar" => matches!(tensor_ty(g, ids[0]), Some((_, s)) if s.is_empty()),
        "float" => matches!(tensor_ty(g, ids[0]), Some((d, _)) if d.is_float()),
        "fills" => match (tensor_ty(g, ids[0]), &g[ids[1]].data.ty) {
            (Some((_, s)), Some(Ty::View(v))) => s == *v,
            _ => false,
        },
        // Every index names its own element.
        "no_overlap" => static_view(g, ids[0]).is_some_and(|(shape, strides, _)| no_overlap(&shape, &strides)),
        // Two views whose offsets differ by a known constant (however they depend on loop variables).
        "disjoint" => match (static_view(g, ids[0]), static_view(g, ids[1])) {
            (Some((sa, ta, oa)), Some((sb, tb, ob))) => {
                let d = ob.add_scaled(&oa, -1, |c| g.find(c));
                if !d.terms.is_empty() {
                    return false;
                }
                disjoint(&sa, &ta, &sb, &tb, d.c)
            }
            _ => false,
        },
        _ => false,
    }
}

/// The egg rewrites of some rule definitions (a `<=>` rule gives two, the second named `NAME-rev`).
pub fn to_rewrites(defs: &[RuleDef]) -> Result<Vec<Rewrite<Node, TermAnalysis>>, Diagnostic> {
    let mut out = Vec::new();
    for d in defs {
        let lhs: Pattern<Node> = d.lhs.parse().map_err(|e| err(&d.file, d.line, format!("{e}")))?;
        let rhs: Pattern<Node> = d.rhs.parse().map_err(|e| err(&d.file, d.line, format!("{e}")))?;
        let conds: Vec<(String, Vec<Var>)> = d
            .conditions
            .iter()
            .map(|(p, a)| (p.clone(), a.iter().map(|v| v.parse().expect("checked variable")).collect()))
            .collect();
        let condition = move |g: &mut TermGraph, _: Id, s: &Subst| {
            conds.iter().all(|(p, vars)| check(g, p, &vars.iter().map(|v| s[*v]).collect::<Vec<_>>()))
        };
        let rw = Rewrite::new(d.name.clone(), lhs.clone(), ConditionalApplier { condition, applier: rhs.clone() })
            .map_err(|e| err(&d.file, d.line, e))?;
        out.push(rw);
        if d.both_ways {
            out.push(Rewrite::new(format!("{}-rev", d.name), rhs, lhs).map_err(|e| err(&d.file, d.line, e))?);
        }
    }
    Ok(out)
}
