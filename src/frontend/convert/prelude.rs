//! PyTorch classes written as Python source and converted as classes of the file: torch.nn's containers, dropouts
//! and losses (`nn.py`), torch.optim's `Optimizer`, `SGD`, `Adam`, `AdamW` and `RMSprop` (`optim.py`), torch.nn.utils'
//! gradient clipping (`nn_utils.py`, functions) and Python's `collections.deque` (`collections.py`). Real code keeps them
//! as attributes (`self.drop = nn.Dropout(0.1)`, `self.loss = nn.MSELoss()`), builds models of them
//! (`nn.Sequential(...)`), subclasses them (`class LARS(Optimizer)`) or wraps them (`Lookahead(torch.optim.SGD(...))`),
//! and ports must run as written.
//!
//! A prelude is added where the file's code names one of its classes (`nn.Sequential`, `SGD`): its statements are
//! parsed and put before the file's own, each class renamed `PREFIX·NAME` ([`class_name`]: a name no Python program
//! can bind, without a `.`, which the engines would read as an op), so that they convert as the file's classes do
//! (`classes.rs`). Then ([`Prelude::settle`]) every function they became is located at that first use, and the names the
//! source uses for what Python cannot write are made ours: `_refused(message)` is [`REFUSED`], `_is_module(m)`
//! [`IS_MODULE`], `self._items` the [`ITEMS_KEY`] entry that iterating and indexing an instance reach. Both engines
//! call the constructor for `torch.nn.NAME(...)` / `torch.optim.NAME(...)`, and a class statement whose base is
//! `nn.Sequential`, `torch.optim.Optimizer` and so on (or a name the file imports from the module) gets the class as
//! its base ([`base`]).

use ruff_python_ast as py;
use ruff_python_ast::visitor::transformer::{self, Transformer};
use ruff_python_ast::visitor::{walk_expr, Visitor};

use crate::diag::Span;
use crate::frontend::ast::*;

/// One prelude: the module whose classes it writes, the prefix of their names, its public classes (those a program
/// names; helper classes start with `_`) and its source.
pub(super) struct Prelude {
    pub module: &'static str,
    pub prefix: &'static str,
    pub classes: &'static [&'static str],
    /// Where the module's public names are functions, not classes: the class whose static methods they are.
    functions: Option<&'static str>,
    source: &'static str,
}

pub(super) const PRELUDES: [Prelude; 9] = [
    Prelude {
        module: "torch.nn",
        prefix: "nn",
        classes: &[
            "Identity",
            "Dropout",
            "AlphaDropout",
            "ModuleList",
            "Sequential",
            "ModuleDict",
            "ParameterList",
            "L1Loss",
            "MSELoss",
            "SmoothL1Loss",
            "BCEWithLogitsLoss",
            "CrossEntropyLoss",
            "NLLLoss",
            "KLDivLoss",
            "BCELoss",
            "Embedding",
            "Linear",
            "Conv1d",
            "Conv2d",
            "LayerNorm",
            "GroupNorm",
            "BatchNorm1d",
            "BatchNorm2d",
            "BatchNorm3d",
            "RNN",
            "LSTM",
            "GRU",
            "RNNCell",
            "LSTMCell",
            "GRUCell",
            // (a function of `_Functional`: `class_name`)
            "binary_cross_entropy",
        ],
        functions: None,
        source: include_str!("nn.py"),
    },
    Prelude {
        module: "torch.optim",
        prefix: "optim",
        classes: &["Optimizer", "SGD", "Adam", "AdamW", "RMSprop"],
        functions: None,
        source: include_str!("optim.py"),
    },
    Prelude {
        module: "torch.optim.lr_scheduler",
        prefix: "lr_scheduler",
        classes: &[
            "LRScheduler",
            "_LRScheduler",
            "LambdaLR",
            "StepLR",
            "MultiStepLR",
            "ExponentialLR",
            "LinearLR",
            "CosineAnnealingLR",
            "ReduceLROnPlateau",
        ],
        functions: None,
        source: include_str!("lr_scheduler.py"),
    },
    Prelude {
        module: "torch.autograd",
        prefix: "autograd",
        classes: &["Function", "FunctionCtx"],
        functions: None,
        source: include_str!("autograd.py"),
    },
    Prelude {
        module: "torch.nn.utils",
        prefix: "nnutils",
        classes: &[
            "clip_grad_norm_",
            "clip_grad_value_",
            "get_total_norm",
            "clip_grads_with_norm_",
            "parameters_to_vector",
        ],
        functions: Some("_Utils"),
        source: include_str!("nn_utils.py"),
    },
    Prelude {
        module: "weakref",
        prefix: "weakref",
        classes: &["ref"],
        functions: None,
        source: include_str!("weakref.py"),
    },
    Prelude {
        module: "distutils.util",
        prefix: "distutils",
        classes: &["strtobool"],
        functions: Some("_Util"),
        source: include_str!("distutils.py"),
    },
    Prelude {
        module: "contextlib",
        prefix: "contextlib",
        // (the decorator, which `context_manager.rs` reads: its class is `_GeneratorContextManager`)
        classes: &["contextmanager"],
        functions: None,
        source: include_str!("contextlib.py"),
    },
    Prelude {
        module: "collections",
        prefix: "collections",
        classes: &["deque"],
        functions: None,
        source: include_str!("collections.py"),
    },
];

/// The static methods of prelude classes that programs call on the class (`nn.Embedding.from_pretrained(w)`): the
/// module, the class and its path (which the engines read as a module, [`static_owner`]), the method.
const STATIC: &[(&str, &str, &str, &str)] = &[("torch.nn", "Embedding", "torch.nn.Embedding", "from_pretrained")];

/// Whether `CLASS::!NAME` is one of [`STATIC`]'s, PyTorch's class methods written here as static methods of the
/// prelude class itself: on a subclass they would make the prelude class, not the subclass.
pub(super) fn class_method_of_prelude(class: &str, name: &str) -> bool {
    STATIC.iter().any(|(m, c, _, n)| *n == name && class_name(m, c).as_deref() != Some(class))
}

/// `MODULE.CLASS` as a value where a prelude class has static methods that programs call on it.
pub fn static_owner(path: &str) -> Option<&'static str> {
    STATIC.iter().find(|s| s.2 == path).map(|s| s.2)
}

/// The functions of `torch.nn.functional` that `nn.py` writes.
const FUNCTIONAL: &[&str] = &["binary_cross_entropy"];

/// The preludes the file's code names (with the offset of the first use) and the statements to convert: theirs,
/// then the file's.
pub(super) fn with_preludes(body: &[py::Stmt]) -> (Vec<(&'static Prelude, usize)>, Vec<py::Stmt>) {
    let used: Vec<_> = PRELUDES.iter().filter_map(|p| Some((p, p.mention(body)?))).collect();
    let mut all: Vec<py::Stmt> = used.iter().flat_map(|(p, _)| p.statements()).collect();
    all.extend(body.iter().cloned());
    (used, all)
}

/// The name the class made for `MODULE.NAME` has among the file's functions, if a prelude writes it.
pub fn class_name(module: &str, name: &str) -> Option<String> {
    // torch.nn.functional's functions written in `nn.py`, static methods of its `_Functional`.
    if module == "torch.nn.functional" {
        return FUNCTIONAL.contains(&name).then(|| format!("nn·_Functional::!{name}"));
    }
    if let Some((m, class, _, _)) = STATIC.iter().find(|s| s.3 == name && s.2 == module) {
        let p = PRELUDES.iter().find(|p| p.module == *m)?;
        return Some(format!("{}·{class}::!{name}", p.prefix));
    }
    let p = PRELUDES.iter().find(|p| p.module == module)?;
    p.classes.contains(&name).then(|| match p.functions {
        Some(holder) => format!("{}·{holder}::!{name}", p.prefix),
        None => format!("{}·{name}", p.prefix),
    })
}

/// The function of the file a prelude writes for `MODULE.NAME` where the module's names are functions
/// (`torch.nn.utils.clip_grad_norm_`, `distutils.util.strtobool`): read as a value (`map(strtobool, flags)`), it is that
/// function. A file that names it has the prelude (`Prelude::mention`).
pub fn function_name(module: &str, name: &str) -> Option<String> {
    PRELUDES.iter().find(|p| p.module == module && p.functions.is_some())?;
    class_name(module, name)
}

impl Prelude {
    /// The byte offset of the first use of one of its classes in the file's code (a name or an attribute `X.NAME`:
    /// docstrings and comments do not count), where the file needs the prelude.
    pub(super) fn mention(&self, body: &[py::Stmt]) -> Option<usize> {
        let mut scan = FirstUse { classes: self.classes, at: None };
        body.iter().for_each(|s| scan.visit_stmt(s));
        scan.at
    }

    /// Its statements, each class renamed, and so every name of one of its classes (bases, `_Loss(...)` in a
    /// method).
    pub(super) fn statements(&self) -> Vec<py::Stmt> {
        let parsed = ruff_python_parser::parse_module(self.source).expect("a prelude parses");
        let mut body: Vec<py::Stmt> = parsed.into_syntax().body.into_iter().collect();
        let own: Vec<String> = body
            .iter()
            .filter_map(|s| if let py::Stmt::ClassDef(c) = s { Some(c.name.to_string()) } else { None })
            .collect();
        let rename = Rename { own: &own, prefix: self.prefix };
        for s in &mut body {
            if let py::Stmt::ClassDef(c) = s {
                c.name = py::Identifier::new(format!("{}·{}", self.prefix, c.name), c.name.range);
            }
            rename.visit_stmt(s);
        }
        body
    }

    /// After the file's functions converted: the prelude's functions located at `at`, and the names it writes for
    /// what Python cannot write made ours (see the module's documentation).
    pub(super) fn settle(&self, functions: &mut [Function], at: Span) {
        let mine = format!("{}·", self.prefix);
        for f in functions.iter_mut().filter(|f| f.name.starts_with(&mine)) {
            locate(f, at);
            visit_exprs_mut(&mut f.body, &mut |e| match &mut e.kind {
                ExprKind::Name(n) if n == "_refused" => *n = REFUSED.into(),
                ExprKind::Name(n) if n == "_is_module" => *n = IS_MODULE.into(),
                ExprKind::Name(n) if n == "_is_parameter" => *n = IS_PARAMETER.into(),
                ExprKind::Attr(_, a) if a == "_items" => *a = ITEMS_KEY.into(),
                _ => {}
            });
        }
    }
}

/// Locates every statement and expression of `f` at `at` (code written for this tool, whose own source positions
/// mean nothing in the program's file).
pub(super) fn locate(f: &mut Function, at: Span) {
    f.span = at;
    for p in f.params.iter_mut().chain(f.vararg.iter_mut().map(|(_, p)| p)).chain(f.kwarg.iter_mut()) {
        p.span = at;
        if let Some(d) = &mut p.default {
            visit_expr_mut(d, &mut |e| e.span = at);
        }
    }
    relocate(&mut f.body, at);
    visit_exprs_mut(&mut f.body, &mut |e| e.span = at);
}

fn relocate(body: &mut [Stmt], at: Span) {
    for s in body {
        s.span = at;
        match &mut s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => relocate(body, at),
            StmtKind::If { body, orelse, .. } => {
                relocate(body, at);
                relocate(orelse, at);
            }
            _ => {}
        }
    }
}

/// Renames every name of a prelude's own classes to `PREFIX·NAME` ([`Prelude::statements`]).
struct Rename<'a> {
    own: &'a [String],
    prefix: &'static str,
}

impl Transformer for Rename<'_> {
    fn visit_expr(&self, e: &mut py::Expr) {
        if let py::Expr::Name(n) = e {
            if self.own.iter().any(|o| o == n.id.as_str()) {
                n.id = format!("{}·{}", self.prefix, n.id).into();
            }
        }
        transformer::walk_expr(self, e);
    }
}

/// The class of the file a prelude writes for a dotted name the converted code calls a method on
/// (`torch.nn.Embedding.__init__(self, ...)`, `nn.Embedding.from_pretrained(w)`).
pub(super) fn named_class(e: &Expr) -> Option<String> {
    let mut parts = Vec::new();
    let mut cur = e;
    while let ExprKind::Attr(o, a) = &cur.kind {
        parts.push(a.as_str());
        cur = o;
    }
    let ExprKind::Name(n) = &cur.kind else { return None };
    parts.push(n.as_str());
    parts.reverse();
    dotted_class(&parts)
}

/// The prelude class a dotted name's parts name: `torch.nn.NAME`, `nn.NAME`, `torch.optim.NAME`, `optim.NAME`,
/// `torch.optim.optimizer.Optimizer`, `torch.autograd.NAME`, `autograd.NAME`.
fn dotted_class(parts: &[&str]) -> Option<String> {
    match parts {
        ["nn", name] | ["torch", "nn", name] => class_name("torch.nn", name),
        ["optim", name] | ["torch", "optim", name] => class_name("torch.optim", name),
        ["torch", "optim", "optimizer", "Optimizer"] => class_name("torch.optim", "Optimizer"),
        ["lr_scheduler", name] | ["optim", "lr_scheduler", name] | ["torch", "optim", "lr_scheduler", name] => {
            class_name("torch.optim.lr_scheduler", name)
        }
        ["autograd", name] | ["torch", "autograd", name] => class_name("torch.autograd", name),
        _ => None,
    }
}

/// The first use of one of `classes` in the code a visit walks ([`Prelude::mention`]).
struct FirstUse {
    classes: &'static [&'static str],
    at: Option<usize>,
}

impl<'a> Visitor<'a> for FirstUse {
    fn visit_expr(&mut self, e: &'a py::Expr) {
        let named = match e {
            py::Expr::Name(n) => Some((n.id.as_str(), n.range)),
            py::Expr::Attribute(a) => Some((a.attr.as_str(), a.attr.range)),
            _ => None,
        };
        if let Some((_, range)) = named.filter(|(n, _)| self.classes.contains(n)) {
            let at = usize::from(range.start());
            self.at = Some(self.at.map_or(at, |a| a.min(at)));
        }
        walk_expr(self, e);
    }
}

/// The names `from MODULE import NAME [as BOUND]` binds to a class of a prelude (`from torch.optim.optimizer import
/// Optimizer` too): (bound, the class's name).
pub(super) fn imported(body: &[py::Stmt]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for s in body {
        let py::Stmt::ImportFrom(imp) = s else { continue };
        let module = imp.module.as_ref().map(|m| m.as_str()).unwrap_or("");
        let module = if module == "torch.optim.optimizer" { "torch.optim" } else { module };
        for a in &imp.names {
            if let Some(c) = class_name(module, a.name.as_str()) {
                out.push((a.asname.as_ref().unwrap_or(&a.name).to_string(), c));
            }
        }
    }
    out
}

/// The prelude class a class statement's base `e` names: `torch.nn.NAME`, `nn.NAME`, `torch.optim.NAME`,
/// `optim.NAME`, `torch.optim.optimizer.Optimizer`, or a name `imported` from those modules.
pub(super) fn base(e: &py::Expr, imported: &[(String, String)]) -> Option<String> {
    let mut parts = Vec::new();
    let mut cur = e;
    while let py::Expr::Attribute(a) = cur {
        parts.push(a.attr.as_str());
        cur = &a.value;
    }
    let py::Expr::Name(n) = cur else { return None };
    parts.push(n.id.as_str());
    parts.reverse();
    match parts.as_slice() {
        [bound] => imported.iter().find(|(b, _)| b == bound).map(|(_, c)| c.clone()),
        parts => dotted_class(parts),
    }
}
