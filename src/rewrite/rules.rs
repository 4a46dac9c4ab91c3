//! Rule files: parsing `rules/*.rules` into egg rewrites with conditions from a closed registry of predicates.
//!
//! A rule is one line `topic/name: LHS => RHS [if pred(?a, ...)]...` (`<=>` for both directions), preceded by a
//! comment line stating its identity. Errors name `file:line`: a malformed line, an unknown operator (the term
//! language fails to parse it), an unknown predicate, a variable on the right or in a condition that the left does
//! not bind, a topic that is not the file's, a duplicate name, a rule without its comment, an operator with the
//! wrong number of children (`file:line:col`, from the op table `ir::OpName::arity`).
//!
//! A rule may range over an op class: `?f:CLASS` (or `?f:CLASS.RULE`, only the class's ops of that dtype rule) in the
//! head of a left-hand pattern, and `(?f ...)` elsewhere in it or on the right, stand for each op of the class in
//! turn (`ir::OpClass`, `ir::DtypeRule`). Such a rule is loaded as one rule per member op, named `NAME[op]`, each
//! checked and used on its own.

use std::collections::HashSet;
use std::path::Path;

use egg::{ConditionalApplier, Id, Pattern, Rewrite, Subst, Var};

use super::analysis::{Lit, TermAnalysis};
use super::TermGraph;
use crate::diag::Diagnostic;
use crate::ir::geometry::{disjoint, no_overlap};
use crate::ir::{parse_class, Node, OpName, Ty};

/// A rule as written: where, what, and its conditions.
#[derive(Clone, Debug)]
pub struct RuleDef {
    pub name: String,
    pub file: String,
    pub line: usize,
    pub lhs: String,
    pub rhs: String,
    pub both_ways: bool,
    pub conditions: Vec<(Pred, Vec<String>)>,
    /// Written `@real`: the identity holds in real arithmetic but not always in floating point (reassociation,
    /// cancellation). Such a rule is used only with `--fast-math`, and checked within an error bound.
    pub real: bool,
    /// For one member of a rule over an op class (`?f:unary`): the rule's name as written and the class, e.g.
    /// (`fusion/access-unary`, `unary`); this rule's name is that name with the member's op, `fusion/access-unary[neg]`.
    pub family: Option<(String, String)>,
}

/// How deep a rule's pattern may nest (deeper is an error, not a stack overflow while parsing it).
pub const MAX_DEPTH: usize = 32;

/// A predicate a rule's condition names on the classes bound to its arguments, resolved from its name when the rule
/// loads ([`PREDICATES`]) and evaluated by [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pred {
    SameDtype,
    SameShape,
    Scalar,
    Float,
    Fills,
    NoOverlap,
    Disjoint,
    Infallible,
    Matrix,
    SameRows,
    SameCols,
    Inner,
}

/// The predicates rule conditions may name: the predicate, its name, its number of arguments, and what it says.
pub const PREDICATES: &[(Pred, &str, usize, &str)] = &[
    (Pred::SameDtype, "same_dtype", 2, "both are tensors of one dtype"),
    (Pred::SameShape, "same_shape", 2, "both are tensors of one shape (so nothing broadcasts)"),
    (Pred::Scalar, "scalar", 1, "?a is a tensor of no dims (it broadcasts to every shape)"),
    (Pred::Float, "float", 1, "?a is a floating-point tensor"),
    (Pred::Fills, "fills", 2, "tensor ?a has exactly the shape of view ?b"),
    (Pred::NoOverlap, "no_overlap", 1, "no two indices of view ?a name one element (checked by enumeration)"),
    (Pred::Disjoint, "disjoint", 2, "views ?a and ?b, whose offsets differ by a known constant, share no element"),
    (Pred::Infallible, "infallible", 1, "evaluating ?a raises for no input (no run-time index check, division by a run-time integer, gather or scatter in it)"),
    (Pred::Matrix, "matrix", 1, "?a is a tensor of exactly two dims"),
    (Pred::SameRows, "same_rows", 2, "?a and ?b are tensors of at least one dim whose first dims are equal"),
    (Pred::SameCols, "same_cols", 2, "?a and ?b are tensors of at least one dim whose last dims are equal"),
    (Pred::Inner, "inner", 2, "?a's last dim equals ?b's first dim (both tensors of at least one dim)"),
];

impl std::fmt::Display for Pred {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let name = PREDICATES.iter().find(|e| e.0 == *self).map_or("?", |e| e.1);
        f.write_str(name)
    }
}

/// A condition on the op a class variable stands for, decided when the rule loads (a member that fails one is left
/// out): `total(?f)` ([`OP_PREDICATES`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpPred {
    Total,
}

/// The conditions on a class variable's op: the condition, its name, and what it says.
pub const OP_PREDICATES: &[(OpPred, &str, &str)] = &[(
    OpPred::Total,
    "total",
    "op ?f raises for no values of its operands (not integer division, not `pow`: `ir::OpName::raises`)",
)];

impl OpPred {
    fn holds(self, op: OpName) -> bool {
        match self {
            OpPred::Total => !op.raises(),
        }
    }

    fn name(self) -> &'static str {
        OP_PREDICATES.iter().find(|e| e.0 == self).map_or("?", |e| e.1)
    }
}

fn err(file: &str, line: usize, m: impl Into<String>) -> Diagnostic {
    Diagnostic::new(format!("{file}:{line}: {}", m.into()))
}

/// An error at `file:line:col` (or `file:line` where no column is known).
fn err_at(file: &str, line: usize, col: Option<usize>, m: impl Into<String>) -> Diagnostic {
    match col {
        Some(c) => Diagnostic::new(format!("{file}:{line}:{c}: {}", m.into())),
        None => err(file, line, m),
    }
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
        let mut on_ops = Vec::new();
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
            let pname = r[..open].trim();
            let args: Vec<String> =
                r[open + 1..close].split(',').map(|a| a.trim().to_string()).filter(|a| !a.is_empty()).collect();
            if let Some(&(p, _, arity, _)) = PREDICATES.iter().find(|e| e.1 == pname) {
                if arity != args.len() {
                    return Err(err(file, n, format!("`{pname}` takes {arity} arguments, got {}", args.len())));
                }
                conditions.push((p, args));
            } else if let Some(&(p, _, _)) = OP_PREDICATES.iter().find(|e| e.1 == pname) {
                on_ops.push((p, args));
            } else {
                let known: Vec<&str> =
                    PREDICATES.iter().map(|e| e.1).chain(OP_PREDICATES.iter().map(|e| e.1)).collect();
                return Err(err(file, n, format!("unknown predicate `{pname}` (known: {})", known.join(", "))));
            }
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
        if both_ways && !(conditions.is_empty() && on_ops.is_empty()) {
            return Err(err(file, n, "a rule with conditions must be written one way (`=>`)"));
        }
        let col = |side: &str| side.as_ptr() as usize - raw.as_ptr() as usize + 1;
        let mut class = class_var(lhs, rhs, &conditions)
            .map_err(|(m, at)| err_at(file, n, at.map(|(side, k)| col(side) + k), m))?;
        for (on, args) in &on_ops {
            let p = on.name();
            match &mut class {
                Some((var, spec, ops)) if args.len() == 1 && args[0] == *var => {
                    ops.retain(|o| on.holds(*o));
                    if ops.is_empty() {
                        return Err(err(file, n, format!("no op of class `{spec}` satisfies `{p}({var})`")));
                    }
                }
                _ => return Err(err(file, n, format!("`{p}` takes the rule's op-class variable (`{p}(?f)`)"))),
            }
        }
        // The class as `rules check` reports it, with the conditions on its ops.
        let shown = class
            .as_ref()
            .map(|(var, spec, _)| on_ops.iter().fold(spec.clone(), |s, (p, _)| format!("{s} if {}({var})", p.name())));
        let members: Vec<Option<OpName>> = match &class {
            Some((_, _, ops)) => ops.iter().map(|&o| Some(o)).collect(),
            None => vec![None],
        };
        for member in members {
            let (l, r) = match (&class, member) {
                (Some((var, spec, _)), Some(op)) => {
                    (instantiate(lhs, var, Some(spec), op), instantiate(rhs, var, None, op))
                }
                _ => (lhs.to_string(), rhs.to_string()),
            };
            let lv = vars_of(&l);
            let rv = vars_of(&r);
            for v in rv.iter().chain(conditions.iter().flat_map(|(_, a)| a.iter())) {
                if !lv.contains(v) {
                    return Err(err(file, n, format!("variable `{v}` is not bound by the left-hand side")));
                }
            }
            if both_ways && !lv.iter().all(|v| rv.contains(v)) {
                return Err(err(file, n, "a `<=>` rule must bind the same variables on both sides"));
            }
            for (side, text) in [(lhs, &l), (rhs, &r)] {
                text.parse::<Pattern<Node>>().map_err(|e| err(file, n, format!("cannot parse `{text}`: {e}")))?;
                check_arity(side, member).map_err(|(m, k)| err_at(file, n, Some(col(side) + k), m))?;
            }
            let (name, family) = match (&class, member) {
                (Some(_), Some(op)) => {
                    (format!("{name}[{op}]"), Some((name.clone(), shown.clone().unwrap_or_default())))
                }
                _ => (name.clone(), None),
            };
            out.push(RuleDef {
                name,
                file: file.to_string(),
                line: n,
                lhs: l,
                rhs: r,
                both_ways,
                conditions: conditions.clone(),
                real,
                family,
            });
        }
    }
    Ok(out)
}

/// The rule files shipped in `rules/`, compiled into the binary.
const SHIPPED: &[(&str, &str)] = &[
    ("rules/fusion.rules", include_str!("../../rules/fusion.rules")),
    ("rules/matmul.rules", include_str!("../../rules/matmul.rules")),
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

/// Evaluates a predicate on the classes bound to its arguments.
pub(crate) fn check(g: &TermGraph, pred: Pred, ids: &[Id]) -> bool {
    let dims = |i: usize| tensor_ty(g, ids[i]).map(|(_, s)| s);
    // The first and last dims of two tensors of at least one dim each.
    let ends = || {
        let (a, b) = (dims(0)?, dims(1)?);
        Some(((*a.first()?, *a.last()?), (*b.first()?, *b.last()?)))
    };
    match pred {
        Pred::SameDtype => {
            matches!((tensor_ty(g, ids[0]), tensor_ty(g, ids[1])), (Some((a, _)), Some((b, _))) if a == b)
        }
        Pred::SameShape => matches!((dims(0), dims(1)), (Some(a), Some(b)) if a == b),
        Pred::Scalar => dims(0).is_some_and(|s| s.is_empty()),
        Pred::Float => matches!(tensor_ty(g, ids[0]), Some((d, _)) if d.is_float()),
        Pred::Fills => match (dims(0), &g[ids[1]].data.ty) {
            (Some(s), Some(Ty::View(v))) => s == *v,
            _ => false,
        },
        // Every index names its own element.
        Pred::NoOverlap => static_view(g, ids[0]).is_some_and(|(shape, strides, _)| no_overlap(&shape, &strides)),
        // Two views whose offsets differ by a known constant (however they depend on loop variables).
        Pred::Disjoint => match (static_view(g, ids[0]), static_view(g, ids[1])) {
            (Some((sa, ta, oa)), Some((sb, tb, ob))) => {
                let d = ob.add_scaled(&oa, -1, |c| g.find(c));
                d.terms.is_empty() && disjoint(&sa, &ta, &sb, &tb, d.c)
            }
            _ => false,
        },
        // A rule that drops a subterm must not drop an error PyTorch raises there (fuzz seed 74577).
        Pred::Infallible => !g[ids[0]].data.may_fail,
        Pred::Matrix => dims(0).is_some_and(|s| s.len() == 2),
        Pred::SameRows => ends().is_some_and(|((a0, _), (b0, _))| a0 == b0),
        Pred::SameCols => ends().is_some_and(|((_, al), (_, bl))| al == bl),
        Pred::Inner => ends().is_some_and(|((_, al), (b0, _))| al == b0),
    }
}

/// The egg rewrites of some rule definitions (a `<=>` rule gives two, the second named `NAME-rev`).
pub fn to_rewrites(defs: &[RuleDef]) -> Result<Vec<Rewrite<Node, TermAnalysis>>, Diagnostic> {
    let mut out = Vec::new();
    for d in defs {
        let lhs: Pattern<Node> = d.lhs.parse().map_err(|e| err(&d.file, d.line, format!("{e}")))?;
        let rhs: Pattern<Node> = d.rhs.parse().map_err(|e| err(&d.file, d.line, format!("{e}")))?;
        let conds: Vec<(Pred, Vec<Var>)> = d
            .conditions
            .iter()
            .map(|(p, a)| (*p, a.iter().map(|v| v.parse().expect("checked variable")).collect()))
            .collect();
        let condition = move |g: &mut TermGraph, _: Id, s: &Subst| {
            conds.iter().all(|(p, vars)| check(g, *p, &vars.iter().map(|v| s[*v]).collect::<Vec<_>>()))
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

/// The tokens of a pattern: `(`, `)` and words, each with its byte offset in `text`.
fn tokens(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        if c == '(' || c == ')' || c.is_whitespace() {
            if let Some(s) = start.take() {
                out.push((s, &text[s..i]));
            }
            if !c.is_whitespace() {
                out.push((i, &text[i..i + 1]));
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out
}

/// Where a rule error points: (the side's text, byte offset in it).
type At<'a> = Option<(&'a str, usize)>;

/// The op-class variable of a rule, if it has one: (`?f`, the class as written, its member ops). The class is
/// written once, `?f:CLASS`, at the head of a left-hand pattern; `?f` may head other patterns on either side and
/// stands nowhere else (not as an operand, not in a condition).
#[allow(clippy::type_complexity)]
fn class_var<'a>(
    lhs: &'a str,
    rhs: &'a str,
    conditions: &[(Pred, Vec<String>)],
) -> Result<Option<(String, String, Vec<OpName>)>, (String, At<'a>)> {
    let classed = |side: &'a str| -> Vec<(usize, &'a str)> {
        tokens(side).into_iter().filter(|(_, w)| w.starts_with('?') && w.contains(':')).collect()
    };
    if let Some(&(k, w)) = classed(rhs).first() {
        return Err((
            format!("write the op-class variable `{w}` without its class on the right (`(?f ...)`)"),
            Some((rhs, k)),
        ));
    }
    let found = classed(lhs);
    let Some(&(k, word)) = found.first() else { return Ok(None) };
    if let Some(&(k2, w2)) = found.get(1) {
        return Err((format!("`{w2}`: a rule ranges over at most one op class"), Some((lhs, k2))));
    }
    let (var, spec) = word.split_once(':').expect("has a colon");
    let (class, rule) = parse_class(spec).map_err(|m| (m, Some((lhs, k))))?;
    for side in [lhs, rhs] {
        let toks = tokens(side);
        for (j, &(k, w)) in toks.iter().enumerate() {
            if (w == var || w == word) && (j == 0 || toks[j - 1].1 != "(") {
                return Err((
                    format!(
                        "`{w}` stands for an operator of class `{spec}`: it may only head a pattern, `({var} ...)`"
                    ),
                    Some((side, k)),
                ));
            }
        }
    }
    if conditions.iter().any(|(_, args)| args.iter().any(|a| a == var)) {
        return Err((format!("the op-class variable `{var}` cannot be a condition's argument"), None));
    }
    Ok(Some((var.to_string(), spec.to_string(), OpName::members(class, rule))))
}

/// `text` with the op-class variable (`var`, and `var:spec` where `spec` is given) replaced by `op`.
fn instantiate(text: &str, var: &str, spec: Option<&str>, op: OpName) -> String {
    let classed = spec.map(|s| format!("{var}:{s}"));
    let mut out = text.to_string();
    for (k, w) in tokens(text).into_iter().rev() {
        if w == var || Some(w) == classed.as_deref() {
            out.replace_range(k..k + w.len(), op.as_str());
        }
    }
    out
}

/// Checks that every operator of a pattern has as many children as the op table says (`member` is the op the
/// class variable stands for); on failure the message and the byte offset of the pattern at fault.
fn check_arity(side: &str, member: Option<OpName>) -> Result<(), (String, usize)> {
    // Per open parenthesis: its offset, its head word, its children so far.
    let mut stack: Vec<(usize, Option<&str>, usize)> = Vec::new();
    for (k, w) in tokens(side) {
        match w {
            "(" => stack.push((k, None, 0)),
            ")" => {
                let Some((at, head, n)) = stack.pop() else { return Ok(()) };
                if let Some(top) = stack.last_mut() {
                    top.2 += top.1.is_some() as usize;
                    top.1 = top.1.or(Some(""));
                }
                let Some(head) = head else { continue };
                let (op, via) = match (head.strip_prefix('?'), member) {
                    (Some(_), Some(m)) => (Some(m), format!(" (`{head}` is `{m}` here)")),
                    _ => (head.parse::<OpName>().ok(), String::new()),
                };
                if let Some(op) = op {
                    if !op.arity().admits(n) {
                        return Err((format!("`{op}` takes {} children, not {n}{via}", op.arity()), at));
                    }
                }
            }
            _ => {
                if let Some(top) = stack.last_mut() {
                    match top.1 {
                        None => top.1 = Some(w),
                        Some(_) => top.2 += 1,
                    }
                }
            }
        }
    }
    Ok(())
}
