//! Module-level statements other than imports, `def` and `NAME = value`. Python runs them once, on import; what
//! they leave behind matters to a function only through the names they bind. So each is taken as follows, and
//! never fails the whole file unless it could change what every function computes:
//! - an `if` whose condition is decided by literals and earlier `NAME = literal` constants (`if _mode is None:`,
//!   `if __name__ == "__main__":`, which is false on import) stands for the statements of the arm it takes;
//! - a `class`, an undecided `if`, a `for`/`while`/`with`/`try`, a `+=` on a constant or a write into one makes the
//!   names it binds or changes unusable: only the functions that read them fail, each with this statement's reason;
//! - a call that changes nothing a function computes (seeding, warnings, logging, printing, `sys.path`) is skipped;
//!   any other call, or a write into a module outside the file, fails the file (it may change PyTorch's defaults).

use std::collections::{HashMap, VecDeque};

use ruff_python_ast as py;

use super::Cx;
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::FailedFunction;

/// A module-level value known before anything runs: what decides an `if`.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Lit {
    None,
    Bool(bool),
    Int(i64),
    Str(String),
}

impl Lit {
    pub(super) fn of(e: &py::Expr, known: &HashMap<String, Lit>) -> Option<Lit> {
        Some(match e {
            py::Expr::NoneLiteral(_) => Lit::None,
            py::Expr::BooleanLiteral(b) => Lit::Bool(b.value),
            py::Expr::NumberLiteral(py::ExprNumberLiteral { value: py::Number::Int(i), .. }) => Lit::Int(i.as_i64()?),
            py::Expr::StringLiteral(s) => Lit::Str(s.value.to_str().to_string()),
            // A file funcfuse reads is imported, never run as the main script.
            py::Expr::Name(n) if n.id.as_str() == "__name__" => Lit::Str("<module>".into()),
            py::Expr::Name(n) => known.get(n.id.as_str())?.clone(),
            // `torch.cuda.is_available()` and the other questions about the run mode: false (one CPU process).
            py::Expr::Call(c)
                if c.arguments.is_empty() && crate::frontend::torch_api::run_mode_predicate(&dotted(&c.func)) =>
            {
                Lit::Bool(false)
            }
            _ => return None,
        })
    }

    fn truthy(&self) -> bool {
        match self {
            Lit::None => false,
            Lit::Bool(b) => *b,
            Lit::Int(i) => *i != 0,
            Lit::Str(s) => !s.is_empty(),
        }
    }
}

/// What a module-level statement amounts to.
pub(super) enum TopLevel<'a> {
    /// The statements to take in its place (the arm a decided `if` takes).
    Expand(&'a [py::Stmt]),
    /// Nothing a function can see.
    Skip,
    /// The names it binds or changes, which the functions reading them cannot use, and why.
    Unusable(Vec<String>, String),
}

/// How a module-level statement that is not an import, a `def`, a docstring or `NAME = value` is taken; `Err` with
/// the reason where it fails the whole file.
pub(super) fn classify<'a>(stmt: &'a py::Stmt, known: &HashMap<String, Lit>) -> Result<TopLevel<'a>, String> {
    let unusable = |why: &str| {
        let mut names = Vec::new();
        bound_by(stmt, &mut names);
        Ok(TopLevel::Unusable(names, why.to_string()))
    };
    match stmt {
        py::Stmt::If(i) => {
            let mut arms = vec![(Some(i.test.as_ref()), i.body.as_slice())];
            arms.extend(i.elif_else_clauses.iter().map(|c| (c.test.as_ref(), c.body.as_slice())));
            for (test, body) in arms {
                match test.map(|t| decide(t, known)) {
                    None | Some(Some(true)) => return Ok(TopLevel::Expand(body)),
                    Some(Some(false)) => continue,
                    Some(None) => {
                        return unusable(
                            "it is bound under a module-level `if` whose condition funcfuse cannot decide before \
                             the program runs",
                        )
                    }
                }
            }
            Ok(TopLevel::Skip)
        }
        py::Stmt::ClassDef(c) => Ok(TopLevel::Unusable(
            vec![c.name.to_string()],
            format!("`class {}`: classes are not supported by funcfuse (use a dict, or functions)", c.name),
        )),
        py::Stmt::For(_) | py::Stmt::While(_) | py::Stmt::With(_) | py::Stmt::Try(_) => {
            unusable("it is bound by a module-level `for`, `while`, `with` or `try`, which funcfuse does not run")
        }
        py::Stmt::AugAssign(_) | py::Stmt::AnnAssign(_) | py::Stmt::Assign(_) | py::Stmt::Delete(_) => {
            let mut roots = Vec::new();
            bound_by(stmt, &mut roots);
            if roots.iter().any(|r| matches!(r.as_str(), "torch" | "np" | "numpy" | "math" | "os" | "sys")) {
                return match stmt {
                    // `torch.backends.cudnn.benchmark = True`, `os.environ[...] = ...`: nothing a function computes.
                    py::Stmt::Assign(a) if a.targets.iter().all(harmless_target) => Ok(TopLevel::Skip),
                    _ => Err("a module-level write into a module (it may change what every function computes)".into()),
                };
            }
            unusable("it is bound or changed by a module-level statement funcfuse does not run (only `NAME = value`)")
        }
        py::Stmt::Expr(e) => match e.value.as_ref() {
            py::Expr::Call(c) if harmless_call(&c.func) => Ok(TopLevel::Skip),
            _ => Err("a module-level call (it may change what every function computes); only seeding, warnings, \
                      logging, printing and `sys.path` calls are skipped"
                .into()),
        },
        py::Stmt::Pass(_) => Ok(TopLevel::Skip),
        _ => Err("unsupported top-level statement (only imports, `def`, `class`, `if` and `NAME = value`)".into()),
    }
}

/// Takes one such statement: the statements a decided `if` stands for go to the front of `work`; the names an
/// unsupported statement binds become `unusable`.
pub(super) fn take<'a>(
    cx: &Cx,
    path: &str,
    stmt: &'a py::Stmt,
    known: &mut HashMap<String, Lit>,
    work: &mut VecDeque<&'a py::Stmt>,
    unusable: &mut Vec<FailedFunction>,
) -> Result<(), Diagnostic> {
    let span: Span = cx.sp(stmt);
    match classify(stmt, known) {
        Ok(TopLevel::Expand(stmts)) => stmts.iter().rev().for_each(|s| work.push_front(s)),
        Ok(TopLevel::Skip) => {}
        Ok(TopLevel::Unusable(names, why)) => {
            for name in names {
                known.remove(&name);
                cx.inert_decorators.borrow_mut().remove(&name);
                let error = Diagnostic::new(why.clone()).at(span).in_file(path);
                unusable.push(FailedFunction { name, span, error });
            }
        }
        Err(why) => return Err(Diagnostic::new(why).at(span)),
    }
    Ok(())
}

/// The value of a condition made of literals and known constants (`is`, `is not`, `==`, `!=`, `not`).
fn decide(e: &py::Expr, known: &HashMap<String, Lit>) -> Option<bool> {
    match e {
        py::Expr::UnaryOp(u) if u.op == py::UnaryOp::Not => decide(&u.operand, known).map(|b| !b),
        // `a and b` is false where one is, true where all are (and `or` the other way round): undecided otherwise.
        py::Expr::BoolOp(b) => {
            let and = b.op == py::BoolOp::And;
            let each: Vec<Option<bool>> = b.values.iter().map(|v| decide(v, known)).collect();
            if each.contains(&Some(!and)) {
                Some(!and)
            } else {
                each.iter().all(Option::is_some).then_some(and)
            }
        }
        py::Expr::Compare(c) if c.ops.len() == 1 => {
            let (l, r) = (Lit::of(&c.left, known)?, Lit::of(&c.comparators[0], known)?);
            match c.ops[0] {
                py::CmpOp::Is | py::CmpOp::Eq => Some(l == r),
                py::CmpOp::IsNot | py::CmpOp::NotEq => Some(l != r),
                _ => None,
            }
        }
        e => Lit::of(e, known).map(|l| l.truthy()),
    }
}

/// The dotted path a callee or target is written as (`torch.backends.cudnn`), or empty.
fn dotted(e: &py::Expr) -> String {
    match e {
        py::Expr::Name(n) => n.id.to_string(),
        py::Expr::Attribute(a) => {
            let base = dotted(&a.value);
            if base.is_empty() {
                base
            } else {
                format!("{base}.{}", a.attr)
            }
        }
        _ => String::new(),
    }
}

fn harmless_call(callee: &py::Expr) -> bool {
    let p = dotted(callee);
    let prefixes = ["warnings.", "logging.", "sys.path.", "torch.backends.", "torch._dynamo.config."];
    matches!(
        p.as_str(),
        "print"
            | "torch.manual_seed"
            | "random.seed"
            | "np.random.seed"
            | "numpy.random.seed"
            | "torch.set_printoptions"
            | "np.set_printoptions"
            | "numpy.set_printoptions"
            | "torch.set_float32_matmul_precision"
    ) || prefixes.iter().any(|q| p.starts_with(q))
}

fn harmless_target(t: &py::Expr) -> bool {
    let base = match t {
        py::Expr::Subscript(s) => dotted(&s.value),
        t => dotted(t),
    };
    base.starts_with("torch.backends.") || base == "os.environ" || base.starts_with("torch._dynamo.config")
}

/// The names a statement binds, or changes the value of (the root name of `X[i] = v` and `X.a = v`), everywhere in
/// it (both arms of an `if`, a loop's body).
fn bound_by(stmt: &py::Stmt, out: &mut Vec<String>) {
    let mut push = |n: String| {
        if !n.is_empty() && !out.contains(&n) {
            out.push(n)
        }
    };
    let mut targets: Vec<&py::Expr> = Vec::new();
    let mut bodies: Vec<&[py::Stmt]> = Vec::new();
    match stmt {
        py::Stmt::FunctionDef(f) => push(f.name.to_string()),
        py::Stmt::ClassDef(c) => push(c.name.to_string()),
        py::Stmt::Assign(a) => targets.extend(a.targets.iter()),
        py::Stmt::AugAssign(a) => targets.push(&a.target),
        py::Stmt::AnnAssign(a) => targets.push(&a.target),
        py::Stmt::Delete(d) => targets.extend(d.targets.iter()),
        py::Stmt::For(f) => {
            targets.push(&f.target);
            bodies.extend([f.body.as_slice(), f.orelse.as_slice()]);
        }
        py::Stmt::While(w) => bodies.extend([w.body.as_slice(), w.orelse.as_slice()]),
        py::Stmt::With(w) => {
            targets.extend(w.items.iter().filter_map(|i| i.optional_vars.as_deref()));
            bodies.push(&w.body);
        }
        py::Stmt::If(i) => {
            bodies.push(&i.body);
            bodies.extend(i.elif_else_clauses.iter().map(|c| c.body.as_slice()));
        }
        py::Stmt::Try(t) => {
            bodies.extend([t.body.as_slice(), t.orelse.as_slice(), t.finalbody.as_slice()]);
            for h in &t.handlers {
                let py::ExceptHandler::ExceptHandler(h) = h;
                if let Some(n) = &h.name {
                    push(n.to_string());
                }
                bodies.push(&h.body);
            }
        }
        py::Stmt::Import(i) => {
            for a in &i.names {
                let n = a.asname.as_ref().map(|n| n.to_string());
                push(n.unwrap_or_else(|| a.name.split('.').next().unwrap_or("").to_string()));
            }
        }
        py::Stmt::ImportFrom(i) => {
            for a in &i.names {
                push(a.asname.as_ref().unwrap_or(&a.name).to_string());
            }
        }
        _ => {}
    }
    while let Some(t) = targets.pop() {
        match t {
            py::Expr::Tuple(x) => targets.extend(x.elts.iter()),
            py::Expr::List(x) => targets.extend(x.elts.iter()),
            py::Expr::Starred(s) => targets.push(&s.value),
            py::Expr::Subscript(s) => targets.push(&s.value),
            py::Expr::Attribute(a) => targets.push(&a.value),
            py::Expr::Name(n) => push(n.id.to_string()),
            _ => {}
        }
    }
    for b in bodies {
        b.iter().for_each(|s| bound_by(s, out));
    }
}

/// Names of generic types that a module-level type alias subscripts (`dict[str, torch.Tensor]`, `Optional[int]`).
const GENERIC_TYPES: &[&str] = &[
    "dict",
    "list",
    "tuple",
    "set",
    "frozenset",
    "type",
    "Dict",
    "List",
    "Tuple",
    "Set",
    "FrozenSet",
    "Type",
    "Optional",
    "Union",
    "Callable",
    "Iterable",
    "Iterator",
    "Sequence",
    "Mapping",
    "MutableMapping",
    "Literal",
    "Generator",
    "Annotated",
];

/// Whether `e` is a type alias (`MemoryHiddenState = dict[str, torch.Tensor]`, `Pair = Tuple[int, int] | None`):
/// funcfuse does not evaluate types (annotations are never evaluated), so the name is left unusable, which fails
/// only a function that reads it as a value.
pub(super) fn is_type_alias(e: &py::Expr) -> bool {
    let generic = |e: &py::Expr| match e {
        py::Expr::Name(n) => GENERIC_TYPES.contains(&n.id.as_str()),
        py::Expr::Attribute(a) => GENERIC_TYPES.contains(&a.attr.as_str()),
        _ => false,
    };
    match e {
        py::Expr::Subscript(s) => generic(&s.value),
        py::Expr::BinOp(b) if b.op == py::Operator::BitOr => {
            let side = |x: &py::Expr| {
                is_type_alias(x)
                    || x.is_none_literal_expr()
                    || matches!(x, py::Expr::Name(_))
                    || matches!(x, py::Expr::Attribute(a) if a.attr.starts_with(|c: char| c.is_ascii_uppercase()))
            };
            (is_type_alias(&b.left) || is_type_alias(&b.right)) && side(&b.left) && side(&b.right)
        }
        _ => false,
    }
}

/// The value of a module-level `NAME = value`, or why the functions reading it cannot use it: numpy on numbers
/// folds as in a function (`OKS_SIGMA = np.array(...) / 10` aside); a type alias is never evaluated; a value that
/// cannot convert fails the functions that read it, not the file.
pub(super) fn module_constant(
    cx: &Cx,
    path: &str,
    a: &py::StmtAssign,
    constructors: &std::collections::HashMap<String, (Span, String, String)>,
) -> Result<crate::frontend::ast::Expr, Diagnostic> {
    if is_type_alias(&a.value) {
        let why = "it is a type alias, which funcfuse does not evaluate (it reads annotations without evaluating them)";
        return Err(Diagnostic::new(why).at(cx.sp(a)).in_file(path));
    }
    let numpy = cx.numpy.borrow().clone();
    let mut e = cx.expr(&a.value).map_err(|d| d.in_file(path))?;
    if let Some(np) = &numpy {
        super::numpy::fold_constant(&mut e, np, constructors).map_err(|d| d.in_file(path))?;
    }
    Ok(e)
}
