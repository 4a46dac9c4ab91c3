//! Python constructs that change nothing here, where there is no autograd and one device: grad modes
//! (`with torch.no_grad():`), a disabled autocast, and decorators that leave what a function computes as it is.

use ruff_python_ast as py;

/// The names `import torch as NAME` binds at the top of a module (`th`), which stand for `torch` in the constructs
/// below.
pub(super) fn torch_aliases(body: &[py::Stmt]) -> Vec<String> {
    let imports = body.iter().filter_map(|s| s.as_import_stmt());
    let aliases = imports.flat_map(|i| i.names.iter()).filter(|a| a.name.as_str() == "torch");
    aliases.filter_map(|a| a.asname.as_ref().map(|n| n.to_string())).collect()
}

/// The dotted name `e` reads (`torch.cuda.amp.autocast`), with an alias of `torch` (`th.no_grad`) read as `torch`;
/// empty for anything else.
fn dotted(mut e: &py::Expr, torch: &[String]) -> String {
    let mut parts = Vec::new();
    while let py::Expr::Attribute(a) = e {
        parts.push(a.attr.to_string());
        e = a.value.as_ref();
    }
    let py::Expr::Name(n) = e else { return String::new() };
    parts.push(if torch.iter().any(|t| *t == n.id) { "torch".to_string() } else { n.id.to_string() });
    parts.reverse();
    parts.join(".")
}

/// A context manager of a library or a builtin (`torch.cuda.amp.autocast()`, `contextlib.suppress(...)`,
/// `open(...)`): the calls and attributes it is built from start at `torch`, `contextlib` or `open`, whose managers
/// other than the inert ones are not modelled.
pub(super) fn library_context(mut e: &py::Expr, torch: &[String]) -> bool {
    if let py::Expr::Call(c) = e {
        e = c.func.as_ref();
    }
    matches!(dotted(e, torch).split('.').next(), Some("torch" | "contextlib" | "open"))
}

/// `torch.no_grad()`, `torch.inference_mode()` and `torch.enable_grad()`: grad modes, meaningless without autograd.
pub(super) fn is_grad_mode(e: &py::Expr, torch: &[String]) -> bool {
    let py::Expr::Call(c) = e else { return false };
    matches!(dotted(&c.func, torch).as_str(), "torch.no_grad" | "torch.inference_mode" | "torch.enable_grad")
}

/// A decorator that leaves what the function computes as it is: a grad mode (`@torch.no_grad()`, also without the
/// call), `@torch.jit.script` (TorchScript's subset computes what Python does), TorchScript's markers
/// `@torch.jit.ignore`/`unused`/`export` (which leave the Python function as it is) and `@torch.compile` (bare, or
/// called with keywords only: it compiles the same computation).
pub(super) fn is_inert_decorator(e: &py::Expr, torch: &[String]) -> bool {
    let path = |e: &py::Expr| dotted(e, torch);
    let grad = |p: &str| matches!(p, "torch.no_grad" | "torch.inference_mode" | "torch.enable_grad");
    match e {
        py::Expr::Call(c) => {
            let p = path(c.func.as_ref());
            (grad(&p) && c.arguments.len() == 0)
                || (p == "torch.compile" && c.arguments.args.is_empty())
                // CUDA's autocast leaves the CPU tensors funcfuse's semantics are about as they are.
                || (p == "torch.cuda.amp.autocast" && c.arguments.args.is_empty())
        }
        e => {
            let p = path(e);
            grad(&p)
                || matches!(
                    p.as_str(),
                    "torch.jit.script" | "torch.jit.ignore" | "torch.jit.unused" | "torch.jit.export" | "torch.compile"
                )
        }
    }
}

/// `torch.jit.script(f)` and `torch.compile(f, ...)` called on a function (FCOS-style `_loss_jit =
/// torch.jit.script(_loss)` at module level), and TorchScript's markers called so: the function itself, as the
/// decorators are (`is_inert_decorator`). The argument, where `c` is such a call.
pub(super) fn wrapped_unchanged<'a>(c: &'a py::ExprCall, torch: &[String]) -> Option<&'a py::Expr> {
    let p = dotted(c.func.as_ref(), torch);
    let known = matches!(
        p.as_str(),
        "torch.jit.script" | "torch.jit.ignore" | "torch.jit.unused" | "torch.jit.export" | "torch.compile"
    );
    let keywords_fine = c.arguments.keywords.is_empty() || p == "torch.compile";
    match c.arguments.args.as_ref() {
        [f] if known && keywords_fine && !f.is_starred_expr() => Some(f),
        _ => None,
    }
}

/// Whether a `def` returns its one parameter unchanged (`def decorator(func): return func`, maybe after a
/// docstring): as a decorator it changes nothing.
pub(super) fn returns_its_argument(f: &py::StmtFunctionDef) -> bool {
    let p = &f.parameters;
    let [only] = p.args.as_slice() else { return false };
    if !(p.posonlyargs.is_empty() && p.kwonlyargs.is_empty() && p.vararg.is_none() && p.kwarg.is_none()) {
        return false;
    }
    let body: Vec<&py::Stmt> =
        f.body.iter().filter(|s| !matches!(s, py::Stmt::Expr(e) if e.value.is_string_literal_expr())).collect();
    matches!(body.as_slice(), [py::Stmt::Return(r)]
        if matches!(r.value.as_deref(), Some(py::Expr::Name(n)) if n.id == only.parameter.name.id))
}

/// `torch.autocast(..., enabled=False)` (also `torch.amp.`, `torch.cpu.amp.` and `torch.cuda.amp.autocast`), as
/// Hugging Face's rotary embeddings force float32: with `enabled=False` written out, nothing changes inside. (Its
/// other arguments are names and constants there; they are not evaluated.)
pub(super) fn is_disabled_autocast(e: &py::Expr, torch: &[String]) -> bool {
    let py::Expr::Call(c) = e else { return false };
    let autocast = matches!(
        dotted(&c.func, torch).as_str(),
        "torch.autocast" | "torch.amp.autocast" | "torch.cpu.amp.autocast" | "torch.cuda.amp.autocast"
    );
    let disabled = c.arguments.keywords.iter().any(|k| {
        k.arg.as_ref().is_some_and(|a| a.as_str() == "enabled")
            && matches!(&k.value, py::Expr::BooleanLiteral(b) if !b.value)
    });
    autocast && disabled
}

/// `X.data.set_(Y)` as a statement: `Y`, the one argument (see `convert.rs`).
pub(super) fn data_set_argument(e: &py::Expr) -> Option<&py::Expr> {
    let py::Expr::Call(c) = e else { return None };
    let py::Expr::Attribute(set) = c.func.as_ref() else { return None };
    let py::Expr::Attribute(data) = set.value.as_ref() else { return None };
    if set.attr.as_str() != "set_" || data.attr.as_str() != "data" || !c.arguments.keywords.is_empty() {
        return None;
    }
    match c.arguments.args.as_ref() {
        [y] if !y.is_starred_expr() => Some(y),
        _ => None,
    }
}

/// Whether `c` is `torch.is_grad_enabled(...)`.
pub(super) fn asks_grad_mode(c: &py::ExprCall, torch: &[String]) -> bool {
    dotted(&c.func, torch) == "torch.is_grad_enabled"
}

/// `torch.is_grad_enabled()` (pytorch3d's `_sqrt_positive_part` picks its form by it) as `True`, what PyTorch
/// answers where a program runs as a script runs it, when nothing in the file (`source`) changes the grad mode.
/// Where the file has a `torch.no_grad`, `inference_mode`, `enable_grad` or `set_grad_enabled` (anywhere: which
/// calls a block or decorator reaches is not followed here), the answer would depend on where the call runs, and
/// it is refused.
pub(super) fn grad_enabled(
    c: &py::ExprCall,
    source: &str,
    span: crate::diag::Span,
) -> Result<crate::frontend::ast::Expr, crate::diag::Diagnostic> {
    use crate::diag::err;
    if !c.arguments.is_empty() {
        return err(span, "TypeError: is_grad_enabled() takes 0 positional arguments");
    }
    let modes = ["no_grad", "inference_mode", "enable_grad", "set_grad_enabled"];
    if let Some(m) = modes.iter().find(|m| source.contains(*m)) {
        return err(
            span,
            format!(
                "torch.is_grad_enabled() in a file that changes the grad mode (`{m}`) is not supported: the answer \
                 depends on which blocks reach the call, which funcfuse does not follow"
            ),
        );
    }
    Ok(crate::frontend::ast::Expr { kind: crate::frontend::ast::ExprKind::Bool(true), span })
}
