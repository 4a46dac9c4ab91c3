//! Names bound by `from math import sqrt` and `from itertools import product` (ssd.pytorch's prior boxes import
//! both): each function that reads such a name without binding it itself reads `math.sqrt` / `itertools.product`,
//! which both engines know as module attributes. A function that binds the name, or the module's name, keeps its
//! own binding (Python's scoping), and any other module stays an unsupported import.

use ruff_python_ast as py;

use super::bound_names;
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;

/// One name a `from MODULE import ATTR [as BOUND]` binds.
pub(super) struct FromImport {
    pub bound: String,
    pub module: &'static str,
    pub attr: String,
    /// The import statement.
    pub at: Span,
}

/// The modules whose names `from MODULE import NAME` may bind, and the names of each the engines have (`None`: any
/// name; a name the module lacks fails where it is called, as `math.NAME` does).
pub(super) fn importable(module: &str, name: &str) -> Option<Result<&'static str, String>> {
    match module {
        "math" => Some(Ok("math")),
        "itertools" if matches!(name, "product" | "chain" | "zip_longest") => Some(Ok("itertools")),
        "torch.autograd" if name == "Variable" => Some(Ok("torch.autograd")),
        "copy" if name == "deepcopy" => Some(Ok("copy")),
        // Rewritten where it is bound to a name (`convert::defaultdict`).
        "collections" if name == "defaultdict" => Some(Ok("collections")),
        // A class and a function of the file (`convert::prelude`).
        "weakref" if name == "ref" => Some(Ok("weakref")),
        "distutils.util" if name == "strtobool" => Some(Ok("distutils.util")),
        // A class of the file (`convert::prelude`).
        "collections" if name == "deque" => Some(Ok("collections")),
        "functools" if matches!(name, "partial" | "reduce") => Some(Ok("functools")),
        // torch's own names (`from torch.nn.functional import scaled_dot_product_attention`, `from torch import
        // nn`): a name the module lacks fails where it is read, as `torch.NAME` does.
        "torch" => Some(Ok("torch")),
        "torch.nn" => Some(Ok("torch.nn")),
        "torch.nn.parameter" if name == "Parameter" => Some(Ok("torch.nn")),
        "torch.nn.functional" => Some(Ok("torch.nn.functional")),
        // `clip_grad_norm_` and the others `nn_utils.py` writes (a name it lacks fails where it is read).
        "torch.nn.utils" | "torch.nn.utils.clip_grad" => Some(Ok("torch.nn.utils")),
        "torch.linalg" => Some(Ok("torch.linalg")),
        // `SGD`, `Adam`, `AdamW`, `RMSprop` (classes of the file: `convert::optim`), `Optimizer` as a base class and the
        // `required` marker.
        "torch.optim" => Some(Ok("torch.optim")),
        "torch.optim.optimizer" if matches!(name, "Optimizer" | "required") => Some(Ok("torch.optim.optimizer")),
        // Its schedulers (classes of the file: `lr_scheduler.py`); a name it lacks fails where it is read.
        "torch.optim.lr_scheduler" => Some(Ok("torch.optim.lr_scheduler")),
        "itertools" => Some(Err(crate::frontend::torch_api::unsupported_itertools(name))),
        // Supported calls are classes before imports are read (`namedtuple.rs`); this names any other.
        "collections" if name == "namedtuple" => Some(Err("`namedtuple(...)` is supported as `NAME = \
            namedtuple('NAME', FIELDS)` at module level, its fields a list or tuple of names or one string of them, \
            without keywords (`defaults=`, `rename=`)"
            .into())),
        _ => None,
    }
}

/// `from MODULE import NAMES` at `at`: the names of `math`, `itertools`, torch's modules and the others of
/// [`importable`] go to `from_imports`; every other name of any other module but `__future__` and `typing` is
/// `unusable` (only the functions reading it fail).
pub(super) fn from_import(
    path: &str,
    module: &str,
    names: &[py::Alias],
    at: Span,
    from_imports: &mut Vec<FromImport>,
    unusable: &mut Vec<FailedFunction>,
    never_instances: &mut Vec<String>,
) {
    if matches!(module, "__future__" | "typing") {
        return;
    }
    for alias in names {
        let bound = alias.asname.as_ref().unwrap_or(&alias.name).to_string();
        let attr = alias.name.to_string();
        let why = match importable(module, &attr) {
            Some(Ok(module)) if attr != "*" => {
                from_imports.push(FromImport { bound, module, attr, at });
                continue;
            }
            Some(Ok(_)) => format!("`from {module} import *` is not supported; import the names"),
            Some(Err(why)) => why,
            None => format!("unsupported import from `{module}`"),
        };
        if never_instance(module, &attr) {
            never_instances.push(bound.clone());
        }
        let error = Diagnostic::new(why).at(at).in_file(path);
        unusable.push(FailedFunction { name: bound, span: at, error });
    }
}

/// Whether no value a program can make here is an instance of `module.name`, an unsupported class: nothing funcfuse
/// runs makes a `PackedSequence` or a `torch.distributions` object, so `isinstance(x, PackedSequence)` is False.
fn never_instance(module: &str, name: &str) -> bool {
    (module == "torch.nn.utils.rnn" && name == "PackedSequence")
        || (module == "torch.distributions" || module.starts_with("torch.distributions."))
            && name.starts_with(|c: char| c.is_ascii_uppercase())
}

/// The calls `from torch.cuda.amp import autocast [as NAME]` makes inert decorators (`NAME()`; CUDA's autocast leaves
/// CPU tensors alone).
pub(super) fn autocast(module: &str, names: &[py::Alias]) -> Vec<String> {
    let cuda = matches!(module, "torch.cuda.amp" | "torch.cuda");
    let autocast = names.iter().filter(|a| cuda && a.name.as_str() == "autocast");
    autocast.map(|a| format!("{}()", a.asname.as_ref().unwrap_or(&a.name))).collect()
}

/// The modules `import NAME` binds for the engines (`torch.nn` too, as `nn`).
const KNOWN: &[&str] = &[
    "torch",
    "torch.nn.functional",
    "math",
    "itertools",
    "copy",
    "functools",
    "logging",
    "warnings",
    "string",
    "weakref",
    "distutils.util",
];

/// Whether `import NAME` binds a module the engines know under that name (`math`, `torch`, ...).
pub(super) fn is_known(name: &str) -> bool {
    KNOWN.contains(&name)
}

/// `import NAME [as BOUND]` at `at`: numpy's name goes to `numpy`; `import torch.X.Y as Z` is `from torch.X import
/// Y as Z` (to `from_imports`); a module the engines do not know fails only the functions that name it (`unusable`).
/// True where the statement binds `torch` itself (maybe as another name).
pub(super) fn import(
    path: &str,
    alias: &py::Alias,
    at: Span,
    numpy: &std::cell::RefCell<Option<String>>,
    from_imports: &mut Vec<FromImport>,
    unusable: &mut Vec<FailedFunction>,
) -> bool {
    let name = alias.name.as_str();
    // `import torch as th` counts: the file's programs name torch as `th`.
    let binds_torch = name == "torch" || (alias.asname.is_none() && name.starts_with("torch."));
    if name == "numpy" {
        *numpy.borrow_mut() = Some(alias.asname.as_ref().map_or("numpy".to_string(), |a| a.to_string()));
        return binds_torch;
    }
    // `import torch.nn as nn` binds `nn` (`nn.functional.max_pool2d`), as `F` stands for torch.nn.functional.
    let nn_alias = name == "torch.nn" && alias.asname.as_ref().is_none_or(|a| a.as_str() == "nn");
    let known = is_known(name);
    // `import torch as th`, `import torch.nn.functional as fn`, `import math as m`: the name reads the module.
    if let (Some(bound), true) = (&alias.asname, known || name == "torch.nn") {
        let module = KNOWN.iter().copied().chain(["torch.nn"]).find(|m| *m == name).unwrap_or("torch");
        // The names the engines give these modules without an import: `torch`, `F`, `nn`, `math`, ...
        let own = match module {
            "torch.nn.functional" => "F",
            "torch.nn" => "nn",
            m => m,
        };
        if bound.as_str() != own {
            from_imports.push(FromImport { bound: bound.to_string(), module, attr: String::new(), at });
        }
        return binds_torch;
    }
    // A standard-library module: bound, and refused where a program uses it (see `UNSUPPORTED_MODULES`).
    if let Some(module) = crate::frontend::cpython::UNSUPPORTED_MODULES.iter().copied().find(|m| *m == name) {
        if let Some(bound) = alias.asname.as_ref().filter(|b| b.as_str() != name) {
            from_imports.push(FromImport { bound: bound.to_string(), module, attr: String::new(), at });
        }
        return binds_torch;
    }
    if let (Some(bound), false, Some((module, attr))) = (&alias.asname, known || nn_alias, name.rsplit_once('.')) {
        if let Some(Ok(module)) = importable(module, attr) {
            from_imports.push(FromImport { bound: bound.to_string(), module, attr: attr.to_string(), at });
            return binds_torch;
        }
    }
    if !known && !nn_alias && !binds_torch {
        let bound = match &alias.asname {
            Some(a) => a.to_string(),
            None => name.split('.').next().unwrap_or(name).to_string(),
        };
        let msg = format!(
            "unsupported import `{name}` (only torch, torch.nn as nn, torch.nn.functional, math, itertools, copy, \
             functools, logging, warnings and string)"
        );
        let error = Diagnostic::new(msg).at(at).in_file(path);
        unusable.push(FailedFunction { name: bound, span: at, error });
    }
    binds_torch
}

/// Reads of imported names in `functions` become attribute reads of their module. A name the module also binds at
/// its top level (a `def` or `NAME = ...`; in Python whichever runs last wins) is `unusable` instead, with a message
/// that asks for another name.
pub(super) fn qualify(
    path: &str,
    functions: &mut [Function],
    constants: &[(String, Expr)],
    imports: Vec<FromImport>,
    unusable: &mut Vec<FailedFunction>,
) {
    // The builtin `slice` where nothing at the top level of the file binds the name (`sugar::slice_builtin`).
    let binds_slice = |n: &str| n == "slice";
    if !functions.iter().any(|f| binds_slice(&f.name))
        && !constants.iter().any(|(n, _)| binds_slice(n))
        && !imports.iter().any(|i| binds_slice(&i.bound))
    {
        functions.iter_mut().for_each(super::sugar::slice_builtin);
    }
    let mut kept = Vec::new();
    for i in imports {
        let clash = functions.iter().any(|f| f.name == i.bound) || constants.iter().any(|(n, _)| *n == i.bound);
        if clash {
            let msg = format!(
                "`{}` is imported from {} and also defined at the top level of the file (Python would use whichever \
                 runs last): rename one",
                i.bound, i.module
            );
            let error = Diagnostic::new(msg).at(i.at).in_file(path);
            unusable.push(FailedFunction { name: i.bound, span: i.at, error });
        } else {
            kept.push(i);
        }
    }
    let imports = kept;
    if imports.is_empty() {
        return;
    }
    let qualified = |active: &[&FromImport], e: &mut Expr| {
        if let ExprKind::Name(n) = &e.kind {
            if let Some(i) = active.iter().find(|i| i.bound == *n) {
                // `torch.autograd` is `Attr(Name("torch"), "autograd")`.
                let mut parts = i.module.split('.');
                let first = Expr { kind: ExprKind::Name(parts.next().unwrap_or_default().to_string()), span: e.span };
                let module =
                    parts.fold(first, |m, p| Expr { kind: ExprKind::Attr(Box::new(m), p.to_string()), span: e.span });
                // `import torch as th`: the module itself.
                e.kind = match i.attr.as_str() {
                    "" => module.kind,
                    attr => ExprKind::Attr(Box::new(module), attr.to_string()),
                };
            }
        }
    };
    for f in functions {
        // Defaults are evaluated where the function is defined, at the top level, where every import is visible.
        let all: Vec<&FromImport> = imports.iter().collect();
        for p in f.params.iter_mut() {
            if let Some(d) = p.default.as_mut() {
                visit_expr_mut(d, &mut |e| qualified(&all, e));
            }
        }
        let mut local = f.param_names();
        bound_names(&f.body, &mut local);
        let active: Vec<&FromImport> =
            imports.iter().filter(|i| !local.iter().any(|l| *l == i.bound || l == i.module)).collect();
        if active.is_empty() {
            continue;
        }
        visit_exprs_mut(&mut f.body, &mut |e| qualified(&active, e));
    }
}
