//! `collections.namedtuple` at module level: `Pair = namedtuple('Pair', ['a', 'b'])` (or `collections.namedtuple`,
//! with the fields as one string, `'a b'` or `'a, b'`) is the class `class Pair(NamedTuple): a: object; b: object`,
//! which the conversion supports (`classes.rs`: fields by position and keyword, indexing, unpacking, `_replace`,
//! `_asdict`, `_fields`). Other forms (keywords such as `defaults=` or `rename=`, fields not known as literals, a
//! call that is not bound to a name at module level) are left as they are, and refused where they are read.

use ruff_python_ast as py;
use ruff_python_ast::visitor::transformer::{self, Transformer};
use ruff_text_size::TextRange;

/// The module's statements with each supported `NAME = namedtuple(...)` replaced by its class.
pub(super) fn as_classes(body: &mut [py::Stmt]) {
    for s in body.iter_mut() {
        if let Some(class) = class_of(s) {
            *s = class;
        }
    }
}

/// The class a `NAME = namedtuple('TYPENAME', FIELDS)` statement stands for, located at the statement.
fn class_of(s: &py::Stmt) -> Option<py::Stmt> {
    let py::Stmt::Assign(a) = s else { return None };
    let [py::Expr::Name(target)] = a.targets.as_slice() else { return None };
    let py::Expr::Call(call) = a.value.as_ref() else { return None };
    let named = match call.func.as_ref() {
        py::Expr::Name(n) => n.id.as_str() == "namedtuple",
        py::Expr::Attribute(at) => {
            at.attr.as_str() == "namedtuple"
                && matches!(at.value.as_ref(), py::Expr::Name(m) if m.id.as_str() == "collections")
        }
        _ => false,
    };
    if !named || !call.arguments.keywords.is_empty() {
        return None;
    }
    let [py::Expr::StringLiteral(_), fields] = &*call.arguments.args else { return None };
    let names: Vec<String> = match fields {
        py::Expr::StringLiteral(s) => s.value.to_str().replace(',', " ").split_whitespace().map(String::from).collect(),
        py::Expr::List(py::ExprList { elts, .. }) | py::Expr::Tuple(py::ExprTuple { elts, .. }) => elts
            .iter()
            .map(|e| match e {
                py::Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
                _ => None,
            })
            .collect::<Option<_>>()?,
        _ => return None,
    };
    // Python's own checks: identifiers, not keywords, not starting with `_`, each once.
    let valid = |n: &str| {
        n.chars().next().is_some_and(|c| c.is_alphabetic())
            && n.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !KEYWORDS.contains(&n)
    };
    let mut seen = std::collections::BTreeSet::new();
    if names.is_empty() || !names.iter().all(|n| valid(n) && seen.insert(n.clone())) {
        return None;
    }
    let fields: String = names.iter().map(|n| format!("    {n}: object\n")).collect();
    let source = format!("class {}(NamedTuple):\n{fields}", target.id);
    let parsed = ruff_python_parser::parse_module(&source).ok()?;
    let mut class = parsed.into_syntax().body.into_iter().next()?;
    Relocate(a.range).visit_stmt(&mut class);
    Some(class)
}

/// Python's keywords, which a field may not be.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
    "elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda", "nonlocal",
    "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// Puts every statement and expression of generated code at `range` (the statement it stands for), so that what
/// is said of it points into the file.
struct Relocate(TextRange);

impl Transformer for Relocate {
    fn visit_stmt(&self, s: &mut py::Stmt) {
        match s {
            py::Stmt::ClassDef(c) => {
                c.range = self.0;
                c.name.range = self.0;
                if let Some(a) = c.arguments.as_mut() {
                    a.range = self.0;
                }
            }
            py::Stmt::AnnAssign(a) => a.range = self.0,
            _ => {}
        }
        transformer::walk_stmt(self, s);
    }

    fn visit_expr(&self, e: &mut py::Expr) {
        if let py::Expr::Name(n) = e {
            n.range = self.0;
        }
        transformer::walk_expr(self, e);
    }
}
