//! Our own AST for the supported Python subset, independent of the parser crate.
//!
//! Invariant: every node carries the span of its source text, so every later error can name `file:line:col`.

use crate::diag::Span;
use crate::tensor::DType;

/// A parsed program file: its programs and helpers (every top-level `def`) and module-level constants.
#[derive(Clone, Debug)]
pub struct Module {
    pub path: String,
    pub functions: Vec<Function>,
    /// Top-level `NAME = expr` assignments, evaluated in order before a program runs.
    pub constants: Vec<(String, Expr)>,
    /// Top-level functions that use a construct outside the subset, or call one that does: each fails on its own
    /// (with its own `file:line:col`), and the other functions of the file still run.
    pub failed: Vec<FailedFunction>,
    /// Module-level names that cannot be used (an unsupported import, a class, a name a module-level statement
    /// funcfuse does not run binds or changes), with why: what reads them fails, the rest of the file runs.
    pub unusable: Vec<FailedFunction>,
    /// The file's classes (`frontend::convert::classes`): their constructors and methods (`CLASS::NAME`) are
    /// functions, not programs.
    pub classes: Vec<String>,
    /// What funcfuse accepts but Python would not run (a file without `import torch`), located; the command line
    /// prints them, and they change no result.
    pub warnings: Vec<crate::diag::Diagnostic>,
}

/// A top-level function that cannot be used, and why.
#[derive(Clone, Debug)]
pub struct FailedFunction {
    pub name: String,
    pub span: Span,
    /// Located, with the file name.
    pub error: crate::diag::Diagnostic,
}

impl Module {
    /// A function that converted (failed ones are not found here; see [`Module::get`]).
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// A function by name, or why it cannot be used: its own located error if it failed, else "no function".
    pub fn get(&self, name: &str) -> Result<&Function, crate::diag::Diagnostic> {
        if let Some(f) = self.function(name) {
            return Ok(f);
        }
        match self.failed.iter().find(|f| f.name == name) {
            Some(f) => Err(f.error.clone()),
            None => Err(crate::diag::Diagnostic::new(format!("no function `{name}` in {}", self.path))),
        }
    }

    /// Whether some function reads or writes an attribute `grad` (a tensor's gradient: `interp::grads`), so that the
    /// engines keep the table of gradients ([`GRADS`]).
    pub fn uses_grad(&self) -> bool {
        let mut found = false;
        for f in &self.functions {
            visit_exprs(&f.body, &mut |e| found |= matches!(&e.kind, ExprKind::Attr(_, a) if a == "grad"));
        }
        found
    }

    /// The names of every program, those that failed included, in source order.
    pub fn program_names(&self) -> Vec<String> {
        let mut all: Vec<(Span, &str)> = self.functions.iter().map(|f| (f.span, f.name.as_str())).collect();
        all.extend(self.failed.iter().map(|f| (f.span, f.name.as_str())));
        all.sort();
        all.into_iter().filter(|(_, n)| self.is_program(n)).map(|(_, n)| n.to_string()).collect()
    }

    /// Programs are the top-level functions whose names do not start with `_`; the rest are helpers (and classes).
    pub fn programs(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| self.is_program(&f.name))
    }

    fn is_program(&self, name: &str) -> bool {
        !name.starts_with('_') && !name.contains("::") && !self.classes.iter().any(|c| c == name)
    }
}

impl Function {
    /// How many parameters positional arguments fill (all of them, unless `*args` comes first).
    pub fn positional(&self) -> usize {
        self.vararg.as_ref().map_or(self.params.len(), |(n, _)| *n)
    }

    /// The names its parameters bind: the named ones, then `*args` and `**kwargs`.
    pub fn param_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.params.iter().map(|p| p.name.clone()).collect();
        names.extend(self.vararg.iter().map(|(_, v)| v.name.clone()));
        names.extend(self.kwarg.iter().map(|v| v.name.clone()));
        names
    }

    /// Whether keyword `name` binds one of its named parameters (else it goes to `**kwargs`, if it has one).
    pub fn takes_keyword(&self, name: &str) -> bool {
        self.params.iter().any(|p| p.name == name)
    }
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: Vec<Param>,
    /// `*args`: the number of parameters before it (those after it are keyword-only) and its name and place.
    pub vararg: Option<(usize, Param)>,
    /// `**kwargs`: the keyword arguments no named parameter takes, as a dict in the order given.
    pub kwarg: Option<Param>,
    pub returns: Option<TypeAnn>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ann: Option<TypeAnn>,
    pub default: Option<Expr>,
    pub span: Span,
}

/// A parameter or return annotation.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeAnn {
    Tensor {
        dtype: DType,
        shape: Vec<usize>,
    },
    Int,
    Float,
    Bool,
    Tuple(Vec<TypeAnn>),
    /// An annotation we accept for helpers but that gives no type (e.g. `list[Tensor]`, `Tensor`).
    Opaque,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `a = b = value`: targets are assigned left to right.
    Assign {
        targets: Vec<Expr>,
        value: Expr,
    },
    AugAssign {
        target: Expr,
        op: BinOp,
        value: Expr,
    },
    Expr(Expr),
    Return(Option<Expr>),
    For {
        target: Expr,
        iter: Expr,
        body: Vec<Stmt>,
    },
    While {
        test: Expr,
        body: Vec<Stmt>,
    },
    If {
        test: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
    },
    Assert {
        test: Expr,
        msg: Option<Expr>,
    },
    /// `raise EXC` (or a bare `raise`): the program fails with the exception's message where it is reached.
    Raise(Option<Expr>),
    /// `del a, b`: the names are unbound (only names; a subscript or attribute target is refused when parsing).
    Delete(Vec<Expr>),
    Pass,
    Break,
    Continue,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Name(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    NoneLit,
    Ellipsis,
    Str(String),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    /// `a < b <= c`: a chain of comparisons.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    /// `and` (true) or `or` (false) over two or more operands.
    BoolOp(bool, Vec<Expr>),
    /// A call; a keyword named `**` is a `**mapping` argument, spread into keywords when the call runs.
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
    Attr(Box<Expr>, String),
    Subscript(Box<Expr>, Box<Expr>),
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    IfExp {
        test: Box<Expr>,
        body: Box<Expr>,
        orelse: Box<Expr>,
    },
    ListComp {
        elt: Box<Expr>,
        target: Box<Expr>,
        iter: Box<Expr>,
        conds: Vec<Expr>,
    },
    /// `*value`: only as a call argument or an item of a list or tuple display (the converter allows no other place).
    Starred(Box<Expr>),
    /// `{k: v, ...}`: a dict display.
    Dict(Vec<(Expr, Expr)>),
    /// `f"..."`: literal text and replacement fields, in order.
    FString(Vec<FPart>),
}

/// A piece of an f-string.
#[derive(Clone, Debug)]
pub enum FPart {
    Lit(String),
    /// `{value!conv:spec}`: `conv` is `s`, `r` or `a` when given; `spec` is the format spec's literal text.
    Field {
        value: Expr,
        conv: Option<char>,
        spec: String,
    },
}

/// The key of an object's class in the dict that holds its attributes: an instance of a class of the program file
/// (`frontend::convert::classes`) is a dict of its attributes with this entry, the class's name
/// (`crate::interp::objects`).
pub const CLASS_KEY: &str = "__class__";

/// The builtin that says whether a value is a module (an instance of a class of the file holding `training`): a name
/// no Python code can write, which the `train` made for `nn.Module` subclasses calls.
pub const IS_MODULE: &str = "·is_module";

/// The builtin that says whether a value is a tensor `nn.Parameter` made (`interp::grads::Parameters`): what
/// `nn.ParameterList` asks before wrapping a value it is given. No Python code can name it.
pub const IS_PARAMETER: &str = "·is_parameter";

/// The name every frame of a program binds, where the file uses `.grad` ([`Module::uses_grad`]), to the one dict of
/// the tensors' gradients, keyed by `id(tensor)` (`interp::grads`): bound in each frame, it is reachable from the
/// bindings as the functionalizer's snapshots of lists and dicts need. No Python code can name it.
pub const GRADS: &str = "·grads";

/// The builtin the generated `parameters` and `named_parameters` of an `nn.Module` subclass call
/// (`interp::objects::parameters`): `PARAMETERS(module, recurse, named, prefix, remove_duplicate)`. No Python code can
/// name it.
pub const PARAMETERS: &str = "·parameters";

/// The builtin the generated `register_buffer` of an `nn.Module` subclass calls to record a buffer
/// (`interp::objects::record_buffer`): `BUFFER(module, name, persistent)`. No Python code can name it.
pub const BUFFER: &str = "·buffer";

/// The entry of an `nn.Module` instance listing its buffers, as `(name, persistent)` pairs in the order they were
/// registered (`interp::objects::record_buffer`). No Python code can name it.
pub const BUFFERS_KEY: &str = "·buffers";

/// The entry of a container instance (`nn.ModuleList`, `nn.Sequential`, `nn.ModuleDict`, `collections.deque`:
/// `frontend::convert::prelude`) that holds its items: iterating and indexing the instance iterate and index it
/// (`interp::objects::items_of`). No Python code can name it.
pub const ITEMS_KEY: &str = "·items";

/// The callee of the call a nested `def` becomes: `NAME = <closure>(HELPER, CAPTURED=CAPTURED, ...)` makes a function
/// value that calls the top-level `HELPER` with the captured values as keywords (not a name Python code can write).
pub const MAKE_CLOSURE: &str = "<closure>";

/// The callee of a call that fails, when it is evaluated, with its one argument as the message: an arm the
/// frontend cannot convert (numpy on values known only at run time) in a branch on `isinstance` that the engines
/// decide (a tensor never takes the numpy arm of `isinstance(x, torch.Tensor)`).
pub const REFUSED: &str = "<refused>";

/// The callee `np.prod(x)` becomes where `x` is not a tensor the frontend knows of: the product of a sequence of
/// Python ints (`np.prod(p.size())`); anything else is refused where it runs (numpy's product of a tensor's
/// elements is not Python's of its rows, and its float64 of floats is no Python float to torch).
pub const NUMPY_PROD: &str = "<numpy.prod>";

/// The test of the `if` a `try: BODY except ERRORS: HANDLER` becomes (`if <try>("ZeroDivisionError", ...): BODY
/// else: HANDLER`, so that every pass that walks statements sees both blocks as ones that may run): the engines run
/// BODY, and HANDLER where BODY raised one of the errors (see [`try_catches`]).
pub const TRY_MARKER: &str = "<try>";

/// The errors a `try` caught, where `test` is the test of the `if` it became ([`TRY_MARKER`]).
pub fn try_catches(test: &Expr) -> Option<Vec<&str>> {
    let ExprKind::Call { func, args, .. } = &test.kind else { return None };
    if !matches!(&func.kind, ExprKind::Name(n) if n == TRY_MARKER) {
        return None;
    }
    Some(args.iter().filter_map(|a| if let ExprKind::Str(s) = &a.kind { Some(s.as_str()) } else { None }).collect())
}

/// Among the arguments of a [`TRY_MARKER`] call, where the `try` has a `finally` block: the statements after the
/// `if` run only where BODY or HANDLER ends without an error, so an error that leaves the `try` is made one no outer
/// `except` catches ([`escaped_finally`]), which would otherwise go on without the `finally` block having run.
pub const FINALLY_MARK: &str = "<finally>";

/// The message of an error that leaves a `try` with a `finally` block ([`FINALLY_MARK`]): no Python error class
/// comes first, so no `except` catches it.
pub fn escaped_finally(message: &str) -> String {
    format!("an error left a `try` whose `finally` block runs here only where no error leaves it: {message}")
}

/// Whether an error with `message` (`ZeroDivisionError: float division by zero`) is one of `caught` (Python's
/// exception classes: `ArithmeticError` is the base of `ZeroDivisionError` and `OverflowError`).
pub fn error_caught(caught: &[&str], message: &str) -> bool {
    let class = message.split(':').next().unwrap_or("");
    // A Python exception class, as the engines name the errors Python raises (a refusal of this tool is not one).
    let python_error = !class.is_empty()
        && class.starts_with(|c: char| c.is_ascii_uppercase())
        && class.chars().all(|c| c.is_ascii_alphanumeric())
        && (class.ends_with("Error") || class.ends_with("Exception") || class == "StopIteration");
    // funcfuse's own size limits read as MemoryError: never caught.
    if class == "MemoryError" {
        return false;
    }
    caught.iter().any(|&c| match c {
        "ArithmeticError" => matches!(class, "ArithmeticError" | "ZeroDivisionError" | "OverflowError"),
        "LookupError" => matches!(class, "LookupError" | "KeyError" | "IndexError"),
        "Exception" | "BaseException" => python_error,
        _ => c == class,
    })
}

/// The name of the value a lambda's parameter default that reads a local variable took when the lambda was made
/// (`lambda x, f=f: ...`, the idiom that freezes a loop variable): a capture of the closure, which the engines make
/// visible, alone, where they evaluate that parameter's default (`Name(default_capture(p))`).
pub fn default_capture(param: &str) -> String {
    format!("<default {param}>")
}

/// Whether `name` is a [`default_capture`] name.
pub fn is_default_capture(name: &str) -> bool {
    name.starts_with("<default ")
}

/// The names a body binds: assignment, augmented assignment, `for` and comprehension targets.
pub fn bound_names(body: &[Stmt], out: &mut Vec<String>) {
    let target = target_names;
    for s in body {
        match &s.kind {
            StmtKind::Assign { targets, .. } => targets.iter().for_each(|t| target(t, out)),
            StmtKind::AugAssign { target: t, .. } => target(t, out),
            StmtKind::For { target: t, body, .. } => {
                target(t, out);
                bound_names(body, out);
            }
            StmtKind::While { body, .. } => bound_names(body, out),
            StmtKind::If { body, orelse, .. } => {
                bound_names(body, out);
                bound_names(orelse, out);
            }
            _ => {}
        }
    }
    visit_exprs(body, &mut |e| {
        if let ExprKind::ListComp { target: t, .. } = &e.kind {
            target(t, out);
        }
    });
}

/// The names an assignment target binds (`a`, `a, (b, *c)`; not subscripts or attributes).
pub fn target_names(e: &Expr, out: &mut Vec<String>) {
    match &e.kind {
        ExprKind::Name(n) => out.push(n.clone()),
        ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter().for_each(|x| target_names(x, out)),
        ExprKind::Starred(x) => target_names(x, out),
        _ => {}
    }
}

/// The first expression of `body` (in [`visit_exprs`]'s order) for which `pred` holds.
pub fn first_expr<'a>(body: &'a [Stmt], pred: impl Fn(&Expr) -> bool) -> Option<&'a Expr> {
    let mut found = None;
    visit_exprs(body, &mut |e| {
        if found.is_none() && pred(e) {
            found = Some(e);
        }
    });
    found
}

/// Calls `f` on every expression of `body` (nested statements and subexpressions included).

pub fn visit_exprs<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Expr)) {
    for s in body {
        match &s.kind {
            StmtKind::Assign { targets, value } => {
                targets.iter().for_each(|t| visit_expr(t, f));
                visit_expr(value, f);
            }
            StmtKind::AugAssign { target, value, .. } => {
                visit_expr(target, f);
                visit_expr(value, f);
            }
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) | StmtKind::Raise(Some(e)) => visit_expr(e, f),
            StmtKind::Delete(targets) => targets.iter().for_each(|t| visit_expr(t, f)),
            StmtKind::For { target, iter, body } => {
                visit_expr(target, f);
                visit_expr(iter, f);
                visit_exprs(body, f);
            }
            StmtKind::While { test, body } => {
                visit_expr(test, f);
                visit_exprs(body, f);
            }
            StmtKind::If { test, body, orelse } => {
                visit_expr(test, f);
                visit_exprs(body, f);
                visit_exprs(orelse, f);
            }
            StmtKind::Assert { test, msg } => {
                visit_expr(test, f);
                if let Some(m) = msg {
                    visit_expr(m, f);
                }
            }
            StmtKind::Return(None) | StmtKind::Raise(None) | StmtKind::Pass | StmtKind::Break | StmtKind::Continue => {}
        }
    }
}

/// Calls `f` on `e` and every subexpression of it, outermost first.
pub fn visit_expr<'a>(e: &'a Expr, f: &mut dyn FnMut(&'a Expr)) {
    f(e);
    match &e.kind {
        ExprKind::Name(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_)
        | ExprKind::NoneLit
        | ExprKind::Ellipsis
        | ExprKind::Str(_) => {}
        ExprKind::Bin(_, a, b) | ExprKind::Subscript(a, b) => {
            visit_expr(a, f);
            visit_expr(b, f);
        }
        ExprKind::Unary(_, a) | ExprKind::Attr(a, _) | ExprKind::Starred(a) => visit_expr(a, f),
        ExprKind::Compare(a, rest) => {
            visit_expr(a, f);
            rest.iter().for_each(|(_, x)| visit_expr(x, f));
        }
        ExprKind::BoolOp(_, xs) | ExprKind::Tuple(xs) | ExprKind::List(xs) => xs.iter().for_each(|x| visit_expr(x, f)),
        ExprKind::Call { func, args, kwargs } => {
            visit_expr(func, f);
            args.iter().for_each(|x| visit_expr(x, f));
            kwargs.iter().for_each(|(_, x)| visit_expr(x, f));
        }
        ExprKind::Slice(a, b, c) => [a, b, c].into_iter().flatten().for_each(|x| visit_expr(x, f)),
        ExprKind::IfExp { test, body, orelse } => {
            visit_expr(test, f);
            visit_expr(body, f);
            visit_expr(orelse, f);
        }
        ExprKind::ListComp { elt, target, iter, conds } => {
            visit_expr(elt, f);
            visit_expr(target, f);
            visit_expr(iter, f);
            conds.iter().for_each(|x| visit_expr(x, f));
        }
        ExprKind::Dict(items) => items.iter().for_each(|(k, v)| {
            visit_expr(k, f);
            visit_expr(v, f);
        }),
        ExprKind::FString(parts) => parts.iter().for_each(|p| {
            if let FPart::Field { value, .. } = p {
                visit_expr(value, f);
            }
        }),
    }
}

/// Calls `f` on every expression of `body` that may be changed, outermost first (see [`visit_expr_mut`]).
pub fn visit_exprs_mut(body: &mut [Stmt], f: &mut dyn FnMut(&mut Expr)) {
    for s in body {
        match &mut s.kind {
            StmtKind::Assign { targets, value } => {
                targets.iter_mut().for_each(|t| visit_expr_mut(t, f));
                visit_expr_mut(value, f);
            }
            StmtKind::AugAssign { target, value, .. } => {
                visit_expr_mut(target, f);
                visit_expr_mut(value, f);
            }
            StmtKind::Expr(e) | StmtKind::Return(Some(e)) | StmtKind::Raise(Some(e)) => visit_expr_mut(e, f),
            StmtKind::Delete(targets) => targets.iter_mut().for_each(|t| visit_expr_mut(t, f)),
            StmtKind::For { target, iter, body } => {
                visit_expr_mut(target, f);
                visit_expr_mut(iter, f);
                visit_exprs_mut(body, f);
            }
            StmtKind::While { test, body } => {
                visit_expr_mut(test, f);
                visit_exprs_mut(body, f);
            }
            StmtKind::If { test, body, orelse } => {
                visit_expr_mut(test, f);
                visit_exprs_mut(body, f);
                visit_exprs_mut(orelse, f);
            }
            StmtKind::Assert { test, msg } => {
                visit_expr_mut(test, f);
                if let Some(m) = msg {
                    visit_expr_mut(m, f);
                }
            }
            StmtKind::Return(None) | StmtKind::Raise(None) | StmtKind::Pass | StmtKind::Break | StmtKind::Continue => {}
        }
    }
}

/// Calls `f` on `e`, then on every subexpression of what `f` left, outermost first.
pub fn visit_expr_mut(e: &mut Expr, f: &mut dyn FnMut(&mut Expr)) {
    f(e);
    match &mut e.kind {
        ExprKind::Name(_)
        | ExprKind::Int(_)
        | ExprKind::Float(_)
        | ExprKind::Bool(_)
        | ExprKind::NoneLit
        | ExprKind::Ellipsis
        | ExprKind::Str(_) => {}
        ExprKind::Bin(_, a, b) | ExprKind::Subscript(a, b) => {
            visit_expr_mut(a, f);
            visit_expr_mut(b, f);
        }
        ExprKind::Unary(_, a) | ExprKind::Attr(a, _) | ExprKind::Starred(a) => visit_expr_mut(a, f),
        ExprKind::Compare(a, rest) => {
            visit_expr_mut(a, f);
            rest.iter_mut().for_each(|(_, x)| visit_expr_mut(x, f));
        }
        ExprKind::BoolOp(_, xs) | ExprKind::Tuple(xs) | ExprKind::List(xs) => {
            xs.iter_mut().for_each(|x| visit_expr_mut(x, f))
        }
        ExprKind::Call { func, args, kwargs } => {
            visit_expr_mut(func, f);
            args.iter_mut().for_each(|x| visit_expr_mut(x, f));
            kwargs.iter_mut().for_each(|(_, x)| visit_expr_mut(x, f));
        }
        ExprKind::Slice(a, b, c) => [a, b, c].into_iter().flatten().for_each(|x| visit_expr_mut(x, f)),
        ExprKind::IfExp { test, body, orelse } => {
            visit_expr_mut(test, f);
            visit_expr_mut(body, f);
            visit_expr_mut(orelse, f);
        }
        ExprKind::ListComp { elt, target, iter, conds } => {
            visit_expr_mut(elt, f);
            visit_expr_mut(target, f);
            visit_expr_mut(iter, f);
            conds.iter_mut().for_each(|x| visit_expr_mut(x, f));
        }
        ExprKind::Dict(items) => items.iter_mut().for_each(|(k, v)| {
            visit_expr_mut(k, f);
            visit_expr_mut(v, f);
        }),
        ExprKind::FString(parts) => parts.iter_mut().for_each(|p| {
            if let FPart::Field { value, .. } = p {
                visit_expr_mut(value, f);
            }
        }),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    MatMul,
    BitAnd,
    BitOr,
    BitXor,
    LShift,
    RShift,
}

impl BinOp {
    /// The elementwise tensor op of a Python operator (`@` has none).
    pub fn elementwise(self) -> Option<crate::tensor::ops::Binary> {
        use crate::tensor::ops::Binary;
        Some(match self {
            BinOp::Add => Binary::Add,
            BinOp::Sub => Binary::Sub,
            BinOp::Mul => Binary::Mul,
            BinOp::Div => Binary::Div,
            BinOp::FloorDiv => Binary::FloorDiv,
            BinOp::Mod => Binary::Rem,
            BinOp::Pow => Binary::Pow,
            BinOp::BitAnd => Binary::BitAnd,
            BinOp::BitOr => Binary::BitOr,
            BinOp::BitXor => Binary::BitXor,
            BinOp::LShift => Binary::Shl,
            BinOp::RShift => Binary::Shr,
            BinOp::MatMul => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::MatMul => "@",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
            BinOp::LShift => "<<",
            BinOp::RShift => ">>",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Pos,
    Not,
    Invert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Is,
    IsNot,
    In,
    NotIn,
}

impl CmpOp {
    /// The elementwise tensor comparison of a Python comparison operator (`is` and `in` have none).
    pub fn elementwise(self) -> Option<crate::tensor::ops::Binary> {
        use crate::tensor::ops::Binary;
        Some(match self {
            CmpOp::Eq => Binary::Eq,
            CmpOp::Ne => Binary::Ne,
            CmpOp::Lt => Binary::Lt,
            CmpOp::Le => Binary::Le,
            CmpOp::Gt => Binary::Gt,
            CmpOp::Ge => Binary::Ge,
            CmpOp::Is | CmpOp::IsNot | CmpOp::In | CmpOp::NotIn => return None,
        })
    }
}
