//! Conversion from `ruff_python_ast` to our AST, with spans and rejection of unsupported constructs.

use std::collections::HashMap;

use ruff_python_ast as py;
use ruff_text_size::{Ranged, TextSize};

use super::ast::*;
use crate::diag::{err, Diagnostic, Span};
use inert::{is_disabled_autocast, is_grad_mode, is_inert_decorator, library_context};

mod annotations;
mod brackets;
mod callers;
mod class_attrs;
mod class_body;
mod classes;
mod closure;
mod context_manager;
mod defaultdict;
mod defaults;
mod distributions;
mod generators;
mod imports;
mod inert;
mod iterators;
mod lambdas;
mod module_methods;
mod namedtuple;
mod numpy;
mod optim;
pub(super) mod prelude;
mod sugar;
mod toplevel;
mod walrus;

struct Lines {
    starts: Vec<usize>,
    source: String,
}

impl Lines {
    fn new(source: &str) -> Self {
        let mut starts = vec![0];
        for (i, b) in source.bytes().enumerate() {
            if b == b'\n' {
                starts.push(i + 1);
            }
        }
        Lines { starts, source: source.to_string() }
    }

    fn span(&self, offset: TextSize) -> Span {
        let off = usize::from(offset).min(self.source.len());
        let line = match self.starts.binary_search(&off) {
            Ok(i) => i,
            Err(i) => i - 1,
        };
        let start = self.starts[line];
        let col = self.source.get(start..off).map(|s| s.chars().count()).unwrap_or(off - start);
        Span { line: line as u32 + 1, col: col as u32 + 1 }
    }
}

struct Cx {
    lines: Lines,
    /// How deeply the expression or block being converted nests ([`crate::limits::MAX_EXPR_DEPTH`]).
    depth: std::cell::Cell<usize>,
    /// The `lambda`s converted so far, each as a top-level helper function named `_<lambda>@LINE:COL`.
    lambdas: std::cell::RefCell<Vec<Function>>,
    /// The nested `def`s of the top-level function being converted (see `closure`), and whether one is being
    /// converted now.
    nested: std::cell::RefCell<Vec<closure::Nested>>,
    in_nested: std::cell::Cell<bool>,
    /// Whether a top-level `def` is being converted: its lambdas become closures (see `lambdas`).
    in_def: std::cell::Cell<bool>,
    /// The name `import numpy [as NAME]` binds, if any (see `numpy`).
    numpy: std::cell::RefCell<Option<String>>,
    /// Module-level names bound to decorators that change nothing here: a `def` that returns its one argument,
    /// and `autocast` from `torch.cuda.amp` (CUDA's autocast leaves CPU tensors alone), called.
    inert_decorators: std::cell::RefCell<std::collections::HashSet<String>>,
    /// The names `import torch as NAME` binds (see `inert::torch_aliases`).
    torch: std::cell::RefCell<Vec<String>>,
}

impl Cx {
    fn sp(&self, node: &impl Ranged) -> Span {
        self.lines.span(node.start())
    }
}

pub(super) fn convert_module(_path: &str, source: &str) -> Result<Module, Diagnostic> {
    let cx = Cx {
        lines: Lines::new(source),
        depth: std::cell::Cell::new(0),
        lambdas: Default::default(),
        nested: Default::default(),
        in_nested: Default::default(),
        in_def: Default::default(),
        numpy: Default::default(),
        inert_decorators: Default::default(),
        torch: Default::default(),
    };
    // The parser recurses per bracket: reject deeper nesting before it sees the text.
    if let Some((offset, _)) = brackets::too_deep_brackets(source, crate::limits::MAX_NESTING) {
        return err(
            cx.lines.span(TextSize::new(offset as u32)),
            format!("expression nested too deeply (limit {} brackets)", crate::limits::MAX_NESTING),
        );
    }
    let parsed = match ruff_python_parser::parse_module(source) {
        Ok(p) => p,
        Err(e) => {
            return err(cx.lines.span(e.location.start()), format!("syntax error: {}", e.error));
        }
    };
    let mut module = parsed.into_syntax();
    namedtuple::as_classes(&mut module.body);
    *cx.torch.borrow_mut() = inert::torch_aliases(&module.body);
    let mut functions: Vec<Function> = Vec::new();
    let mut failed: Vec<FailedFunction> = Vec::new();
    let mut constants = Vec::new();
    let mut unusable: Vec<FailedFunction> = Vec::new();
    let mut never: Vec<String> = Vec::new(); // imported classes no value is an instance of (`imports::from_import`)
    let (mut imports_torch, mut future_annotations) = (false, false);
    let mut from_imports: Vec<imports::FromImport> = Vec::new();
    let constructors = numpy::reachable_constructors(&cx, &module.body);
    // Module-level `NAME = literal` values, which decide module-level `if`s (`toplevel.rs`).
    let mut known: HashMap<String, toplevel::Lit> = HashMap::new();
    // torch.nn's and torch.optim's classes the file mentions go first, as classes of the file (`prelude`).
    let (preludes, body) = prelude::with_preludes(&module.body);
    let optimizers = preludes.iter().any(|(p, _)| p.prefix == "optim");
    let bases = prelude::imported(&module.body);
    let (mut classes, class_order, class_defs) = classes::collect(&cx, _path, &body, &bases, &mut unusable);
    let mut work = classes::statements(&body, &class_defs);
    let optimizer_classes = optim::subclasses(&classes);
    while let Some(stmt) = work.pop_front() {
        match stmt {
            py::Stmt::FunctionDef(f) => {
                let name = f.name.to_string();
                let span = cx.sp(f);
                known.remove(&name);
                unusable.retain(|u| u.name != name);
                if inert::returns_its_argument(f) {
                    cx.inert_decorators.borrow_mut().insert(name.clone());
                } else {
                    cx.inert_decorators.borrow_mut().remove(&name);
                }
                if functions.iter().any(|g| g.name == name) || failed.iter().any(|g: &FailedFunction| g.name == name) {
                    return err(span, format!("function `{name}` is defined twice"));
                }
                // Each function converts on its own: one outside the subset fails alone.
                cx.in_def.set(true);
                let converted = cx.function(f);
                cx.in_def.set(false);
                let mut lambdas = std::mem::take(&mut *cx.lambdas.borrow_mut());
                let mut nested = std::mem::take(&mut *cx.nested.borrow_mut());
                let numpy = cx.numpy.borrow().clone();
                let checked = converted.and_then(|mut func| {
                    if let Some(np) = &numpy {
                        // Only a program's parameters are checked against their annotations; a function named
                        // anywhere else in the file may be called as a helper with anything.
                        let program_only = mentions(source, &name) == 1;
                        let c = constructors.get(&name);
                        numpy::fold(&mut func, np, program_only, c)?;
                        nested.iter_mut().try_for_each(|n| numpy::fold(&mut n.func, np, false, c))?;
                    }
                    lambdas::close_lambdas(&mut func, &mut nested, &mut lambdas)?;
                    closure::close_over(&mut func, &mut nested)?;
                    if optimizers {
                        let method_of_optimizer =
                            name.split_once("::").is_some_and(|(c, _)| optimizer_classes.iter().any(|k| k == c));
                        optim::state_reads(&mut func, method_of_optimizer);
                        nested.iter_mut().for_each(|n| optim::state_reads(&mut n.func, method_of_optimizer));
                    }
                    sugar::desugar(&mut func)?;
                    nested.iter_mut().try_for_each(|n| sugar::desugar(&mut n.func))?;
                    defaults::check(&func)?;
                    nested.iter().try_for_each(|n| defaults::check(&n.func))?;
                    lambdas.iter_mut().try_for_each(sugar::desugar)?;
                    Ok(func)
                });
                match checked {
                    Ok(func) => {
                        functions.push(func);
                        functions.extend(nested.into_iter().map(|n| n.func));
                        functions.extend(lambdas);
                    }
                    Err(d) => failed.push(FailedFunction { name, span, error: d.in_file(_path) }),
                }
            }
            // An unsupported import binds names that only the functions using them cannot use (not `torch`).
            py::Stmt::Import(imp) => {
                for alias in &imp.names {
                    let at = cx.sp(alias);
                    imports_torch |= imports::import(_path, alias, at, &cx.numpy, &mut from_imports, &mut unusable);
                }
            }
            py::Stmt::ImportFrom(imp) => {
                let module = imp.module.as_ref().map(|m| m.as_str()).unwrap_or("");
                cx.inert_decorators.borrow_mut().extend(imports::autocast(module, &imp.names));
                future_annotations |=
                    module == "__future__" && imp.names.iter().any(|a| a.name.as_str() == "annotations");
                let at = cx.sp(imp);
                imports::from_import(_path, module, &imp.names, at, &mut from_imports, &mut unusable, &mut never);
            }
            py::Stmt::Assign(a) if a.targets.len() == 1 && a.targets[0].is_name_expr() => {
                let name = a.targets[0].as_name_expr().map(|n| n.id.to_string()).unwrap_or_default();
                match toplevel::Lit::of(&a.value, &known) {
                    Some(v) => known.insert(name.clone(), v),
                    None => known.remove(&name),
                };
                cx.inert_decorators.borrow_mut().remove(&name);
                unusable.retain(|u| u.name != name);
                match toplevel::module_constant(&cx, _path, a, &constructors) {
                    Ok(e) => constants.push((name, e)),
                    Err(error) => unusable.push(FailedFunction { name, span: cx.sp(a), error }),
                }
                functions.append(&mut cx.lambdas.borrow_mut());
            }
            py::Stmt::Expr(e) if e.value.is_string_literal_expr() => {}
            other => toplevel::take(&cx, _path, other, &mut known, &mut work, &mut unusable)?,
        }
    }
    for (p, at) in &preludes {
        p.settle(&mut functions, cx.lines.span(TextSize::new(*at as u32)));
    }
    classes::settle(_path, &class_order, &mut classes, &mut functions, &mut failed, &mut unusable, &|e| cx.expr(e));
    if let Some(np) = cx.numpy.borrow().clone() {
        fold_class_values(_path, &np, &class_order, &mut functions, &mut failed);
    }
    classes::static_method_values(&classes, &mut functions, &mut constants);
    // The helpers of lambdas in class bodies (`__name__ = property(lambda self: self.ltype)`).
    functions.append(&mut cx.lambdas.borrow_mut());
    imports::qualify(_path, &mut functions, &constants, from_imports, &mut unusable);
    iterators::check_all(_path, &mut functions, &mut failed);
    let parents = classes::parents(&class_order, &classes);
    callers::fail_callers(_path, &mut functions, &mut failed, &mut unusable, &never, &parents);
    let warnings = python_would_not_run(_path, &cx, imports_torch, future_annotations || functions.is_empty());
    Ok(Module { path: _path.to_string(), functions, constants, failed, unusable, classes: class_order, warnings })
}

/// Warnings for a file funcfuse accepts but Python cannot run as written: without `import torch`, `torch` is
/// undefined; without `from __future__ import annotations`, Python evaluates the `f32[...]` annotations when it defines
/// each function.
fn python_would_not_run(path: &str, cx: &Cx, imports_torch: bool, future_annotations: bool) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    let at = cx.lines.span(TextSize::new(0));
    if !imports_torch {
        let m = "warning: the file has no `import torch`: funcfuse runs it, but Python cannot (NameError: name \
                 'torch' is not defined)";
        warnings.push(Diagnostic::new(m).at(at).in_file(path));
    }
    if !future_annotations {
        let m = "warning: the file has no `from __future__ import annotations`: funcfuse runs it, but Python \
                 evaluates annotations such as `f32[3, 4]` when it defines a function (NameError: name 'f32' is not \
                 defined)";
        warnings.push(Diagnostic::new(m).at(at).in_file(path));
    }
    warnings
}

/// Class-level values are the constructor's (`BBOX_XFORM_CLIP = np.log(1000. / 16.)` in a config class): numpy
/// folds there as in any function, and what it refuses fails the class alone.
fn fold_class_values(
    path: &str,
    np: &str,
    classes: &[String],
    functions: &mut Vec<Function>,
    failed: &mut Vec<FailedFunction>,
) {
    let mut k = 0;
    while k < functions.len() {
        let f = &mut functions[k];
        // (and the functions that read them through the class, `C::#NAME`)
        let class_value = f.name.split_once("::#").is_some_and(|(c, _)| classes.iter().any(|k| k == c));
        match (classes.contains(&f.name) || class_value).then(|| numpy::fold(f, np, false, None)) {
            Some(Err(d)) => {
                let f = functions.remove(k);
                failed.push(FailedFunction { name: f.name, span: f.span, error: d.in_file(path) });
            }
            _ => k += 1,
        }
    }
}

impl Cx {
    fn function(&self, f: &py::StmtFunctionDef) -> Result<Function, Diagnostic> {
        let span = self.sp(f);
        if f.is_async {
            return err(span, "async functions are not supported");
        }
        let inert = |e: &py::Expr| match e {
            py::Expr::Name(n) => self.inert_decorators.borrow().contains(n.id.as_str()),
            py::Expr::Call(c) if c.func.is_name_expr() => {
                c.func.as_name_expr().is_some_and(|n| self.inert_decorators.borrow().contains(&format!("{}()", n.id)))
            }
            e => is_inert_decorator(e, &self.torch.borrow()),
        };
        let manager = f.decorator_list.iter().any(|d| context_manager::is_decorator(&d.expression));
        let inert = |e: &py::Expr| inert(e) || context_manager::is_decorator(e);
        if let Some(d) = f.decorator_list.iter().find(|d| !inert(&d.expression)) {
            return err(
                self.sp(d),
                "decorators are not supported (except `@torch.no_grad()` and the other grad modes, `@torch.jit.script`, `@torch.jit.ignore` and `@torch.compile`, which change nothing here)",
            );
        }
        let p = &f.parameters;
        // An annotation of `*args` or `**kwargs` (`*iterables: Iterable`) types each item: it is not checked.
        let vararg = match &p.vararg {
            Some(v) => {
                let n = p.posonlyargs.len() + p.args.len();
                Some((n, Param { name: v.name.to_string(), ann: None, default: None, span: self.sp(v.as_ref()) }))
            }
            None => None,
        };
        let kwarg = match &p.kwarg {
            Some(v) => Some(Param { name: v.name.to_string(), ann: None, default: None, span: self.sp(v.as_ref()) }),
            None => None,
        };
        let params = self.params(p)?;
        let returns = match &f.returns {
            Some(r) => Some(self.annotation(r)?),
            None => None,
        };
        let body = walrus::hoisted(self.block(&f.body)?)?;
        let body =
            match manager {
                true if self.in_nested.get() => return err(
                    span,
                    "a `@contextmanager` function inside another function is not supported; define it at the top level",
                ),
                true => context_manager::split(body, span, &mut self.nested.borrow_mut())?,
                false => generators::finish(body, span)?,
            };
        Ok(Function { name: f.name.to_string(), params, vararg, kwarg, returns, body, span })
    }

    fn params(&self, p: &py::Parameters) -> Result<Vec<Param>, Diagnostic> {
        let mut params = Vec::new();
        for pd in p.posonlyargs.iter().chain(p.args.iter()).chain(p.kwonlyargs.iter()) {
            let ann = match pd.parameter.annotation() {
                Some(a) => Some(self.annotation(a)?),
                None => None,
            };
            let default = match pd.default() {
                Some(d) => Some(self.expr(d)?),
                None => None,
            };
            params.push(Param { name: pd.name().to_string(), ann, default, span: self.sp(pd) });
        }
        Ok(params)
    }

    fn block(&self, body: &[py::Stmt]) -> Result<Vec<Stmt>, Diagnostic> {
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            if let py::Stmt::Expr(e) = s {
                if e.value.is_string_literal_expr() {
                    continue; // docstring
                }
            }
            // `with torch.no_grad():` changes nothing here (there is no autograd), nor does a disabled autocast: the
            // body runs in place.
            if let py::Stmt::With(w) = s {
                let torch = self.torch.borrow();
                let inert = |e: &py::Expr| is_grad_mode(e, &torch) || is_disabled_autocast(e, &torch);
                if !w.is_async && w.items.iter().all(|it| it.optional_vars.is_none() && inert(&it.context_expr)) {
                    out.extend(self.block(&w.body)?);
                    continue;
                }
                if !w.is_async && !w.items.iter().any(|it| library_context(&it.context_expr, &torch)) {
                    drop(torch);
                    out.extend(self.with_block(w)?);
                    continue;
                }
            }
            if let py::Stmt::Try(t) = s {
                out.extend(self.try_body(t)?);
                continue;
            }
            if let Some(stmts) = self.loop_else(s) {
                out.extend(stmts?);
                continue;
            }
            out.push(self.stmt(s)?);
        }
        Ok(out)
    }

    fn stmt(&self, s: &py::Stmt) -> Result<Stmt, Diagnostic> {
        self.deeper(s, || self.stmt_at(s))
    }

    fn stmt_at(&self, s: &py::Stmt) -> Result<Stmt, Diagnostic> {
        let span = self.sp(s);
        let kind = match s {
            py::Stmt::Assign(a) => StmtKind::Assign {
                targets: a.targets.iter().map(|t| self.expr(t)).collect::<Result<_, _>>()?,
                // `a, b, c = (f(i) for i in ...)`: unpacking consumes the generator at once, in order.
                value: match &*a.value {
                    py::Expr::Generator(g) if a.targets.iter().all(|t| t.is_tuple_expr() || t.is_list_expr()) => {
                        self.generator(g)?
                    }
                    v => self.expr(v)?,
                },
            },
            py::Stmt::AnnAssign(a) => match &a.value {
                Some(v) => StmtKind::Assign { targets: vec![self.expr(&a.target)?], value: self.expr(v)? },
                None => StmtKind::Pass,
            },
            py::Stmt::AugAssign(a) => StmtKind::AugAssign {
                target: self.expr(&a.target)?,
                op: binop(a.op),
                value: self.expr(&a.value)?,
            },
            // `x.data.set_(y)` rebinds the storage of the temporary `x.data` only: `x` is unchanged (PyTorch 2; the
            // Gal dropout of lstms.pth and bnlstm's initialization write it). What is left is evaluating `y`.
            py::Stmt::Expr(e) => match inert::data_set_argument(&e.value) {
                Some(y) => StmtKind::Expr(self.expr(y)?),
                None => StmtKind::Expr(self.expr(&e.value)?),
            },
            py::Stmt::Return(r) => StmtKind::Return(r.value.as_deref().map(|v| self.expr(v)).transpose()?),
            py::Stmt::For(f) => {
                if f.is_async {
                    return err(span, "`async for` is not supported");
                }
                if !f.orelse.is_empty() {
                    return err(span, "`for ... else` is not supported");
                }
                StmtKind::For { target: self.expr(&f.target)?, iter: self.expr(&f.iter)?, body: self.block(&f.body)? }
            }
            py::Stmt::While(w) => {
                if !w.orelse.is_empty() {
                    return err(span, "`while ... else` is not supported");
                }
                StmtKind::While { test: self.expr(&w.test)?, body: self.block(&w.body)? }
            }
            py::Stmt::If(i) => {
                // Fold `elif`/`else` clauses into nested ifs, innermost last.
                let mut orelse: Vec<Stmt> = Vec::new();
                for clause in i.elif_else_clauses.iter().rev() {
                    let body = self.block(&clause.body)?;
                    orelse = match &clause.test {
                        Some(t) => vec![Stmt {
                            kind: StmtKind::If { test: self.expr(t)?, body, orelse },
                            span: self.sp(clause),
                        }],
                        None => body,
                    };
                }
                StmtKind::If { test: self.expr(&i.test)?, body: self.block(&i.body)?, orelse }
            }
            py::Stmt::Assert(a) => StmtKind::Assert {
                test: self.expr(&a.test)?,
                msg: match &a.msg {
                    Some(m) => Some(self.expr(m)?),
                    None => None,
                },
            },
            py::Stmt::Pass(_) => StmtKind::Pass,
            py::Stmt::Break(_) => StmtKind::Break,
            py::Stmt::Continue(_) => StmtKind::Continue,
            py::Stmt::FunctionDef(f) => {
                if self.in_nested.get() {
                    return err(span, "a function defined inside a nested function is not supported; define it at the top level");
                }
                self.in_nested.set(true);
                let func = self.function(f);
                self.in_nested.set(false);
                let mut func = func?;
                let name = func.name.clone();
                func.name = closure::lifted_name(&name, span);
                let kind = closure::placeholder(&name, &func.name, span);
                self.nested.borrow_mut().push(closure::Nested { name, func });
                kind
            }
            py::Stmt::ClassDef(_) => return err(span, "class definitions are not supported"),
            py::Stmt::With(_) => {
                return err(span, "`with` on this context manager is not supported (grad modes such as `with torch.no_grad():` and `with torch.autocast(..., enabled=False):` are, and the program's own classes with `__enter__` and `__exit__`)")
            }
            py::Stmt::Try(_) => return err(span, "`try` is supported only as a statement of a block"),
            py::Stmt::Raise(r) => StmtKind::Raise(match &r.exc {
                Some(e) => Some(self.expr(e)?),
                None => None,
            }),
            py::Stmt::Delete(d) => {
                let mut targets = Vec::new();
                for t in &d.targets {
                    let e = self.expr(t)?;
                    if !matches!(e.kind, ExprKind::Name(_)) {
                        return err(e.span, "`del` of a subscript or attribute is not supported (only of names)");
                    }
                    targets.push(e);
                }
                StmtKind::Delete(targets)
            }
            py::Stmt::Global(_) => return err(span, "`global` is not supported"),
            py::Stmt::Nonlocal(_) => {
                return err(span, "`nonlocal` is not supported: a nested function cannot assign a variable of the enclosing function; return the new value instead")
            }
            // `import math` repeats what the engines have; any other import inside a function fails where it runs
            // (a debugger imported in a branch that never runs: gru_ode_bayes' `import ipdb`).
            py::Stmt::Import(i) if i.names.iter().all(|a| a.asname.is_none() && imports::is_known(a.name.as_str())) => {
                StmtKind::Pass
            }
            py::Stmt::Import(_) | py::Stmt::ImportFrom(_) => {
                let d = Diagnostic::new("imports inside a function are not supported (only at the top level)").at(span);
                StmtKind::Expr(numpy::refusal(d, span))
            }
            py::Stmt::Match(_) => return err(span, "`match` statements are not supported"),
            _ => return err(span, "unsupported statement"),
        };
        Ok(Stmt { kind, span })
    }

    fn boxed(&self, e: &py::Expr) -> Result<Box<Expr>, Diagnostic> {
        Ok(Box::new(self.expr(e)?))
    }

    fn opt(&self, e: &Option<Box<py::Expr>>) -> Result<Option<Box<Expr>>, Diagnostic> {
        match e {
            Some(e) => Ok(Some(self.boxed(e)?)),
            None => Ok(None),
        }
    }

    /// Runs `f` one level deeper, with a located error past [`crate::limits::MAX_EXPR_DEPTH`].
    fn deeper<T>(&self, at: &impl Ranged, f: impl FnOnce() -> Result<T, Diagnostic>) -> Result<T, Diagnostic> {
        let d = self.depth.get() + 1;
        if d > crate::limits::MAX_EXPR_DEPTH {
            return err(
                self.sp(at),
                format!("expression nested too deeply (limit {} levels)", crate::limits::MAX_EXPR_DEPTH),
            );
        }
        self.depth.set(d);
        let r = f();
        self.depth.set(d - 1);
        r
    }

    fn expr(&self, e: &py::Expr) -> Result<Expr, Diagnostic> {
        self.deeper(e, || self.expr_at(e))
    }

    /// A call argument or an item of a tuple or list display: `*value` is allowed here.
    fn item(&self, e: &py::Expr) -> Result<Expr, Diagnostic> {
        match e {
            py::Expr::Starred(s) => Ok(Expr { kind: ExprKind::Starred(self.boxed(&s.value)?), span: self.sp(s) }),
            other => self.expr(other),
        }
    }

    /// The pieces of an f-string (implicitly concatenated literals included).
    fn fstring(&self, f: &py::ExprFString) -> Result<Vec<FPart>, Diagnostic> {
        let mut parts = Vec::new();
        for part in f.value.iter() {
            match part {
                py::FStringPart::Literal(l) => parts.push(FPart::Lit(l.value.to_string())),
                py::FStringPart::FString(fs) => {
                    for el in fs.elements.iter() {
                        match el {
                            py::InterpolatedStringElement::Literal(l) => parts.push(FPart::Lit(l.value.to_string())),
                            py::InterpolatedStringElement::Interpolation(i) => {
                                if i.debug_text.is_some() {
                                    return err(self.sp(i), "`=` in f-string fields is not supported");
                                }
                                let conv = match i.conversion {
                                    py::ConversionFlag::None => None,
                                    py::ConversionFlag::Str => Some('s'),
                                    py::ConversionFlag::Repr => Some('r'),
                                    py::ConversionFlag::Ascii => Some('a'),
                                };
                                let mut spec = String::new();
                                if let Some(fs) = &i.format_spec {
                                    for e in fs.elements.iter() {
                                        match e {
                                            py::InterpolatedStringElement::Literal(l) => spec.push_str(&l.value),
                                            py::InterpolatedStringElement::Interpolation(n) => return err(
                                                self.sp(n),
                                                "replacement fields inside an f-string format spec are not supported",
                                            ),
                                        }
                                    }
                                }
                                parts.push(FPart::Field { value: self.expr(&i.expression)?, conv, spec });
                            }
                        }
                    }
                }
            }
        }
        Ok(parts)
    }

    fn expr_at(&self, e: &py::Expr) -> Result<Expr, Diagnostic> {
        let span = self.sp(e);
        let kind = match e {
            // A program runs as Python's main module (`logging.getLogger(__name__)`).
            py::Expr::Name(n) if n.id.as_str() == "__name__" => ExprKind::Str("__main__".into()),
            py::Expr::Name(n) => ExprKind::Name(n.id.to_string()),
            py::Expr::NumberLiteral(n) => match &n.value {
                py::Number::Int(i) => match i.as_i64() {
                    Some(v) => ExprKind::Int(v),
                    None => return err(span, "integer literal does not fit in 64 bits"),
                },
                py::Number::Float(f) => ExprKind::Float(*f),
                py::Number::Complex { .. } => return err(span, "complex numbers are not supported"),
            },
            py::Expr::BooleanLiteral(b) => ExprKind::Bool(b.value),
            py::Expr::NoneLiteral(_) => ExprKind::NoneLit,
            py::Expr::EllipsisLiteral(_) => ExprKind::Ellipsis,
            py::Expr::StringLiteral(s) => ExprKind::Str(s.value.to_str().to_string()),
            py::Expr::BinOp(b) => ExprKind::Bin(binop(b.op), self.boxed(&b.left)?, self.boxed(&b.right)?),
            py::Expr::UnaryOp(u) => {
                let op = match u.op {
                    py::UnaryOp::USub => UnaryOp::Neg,
                    py::UnaryOp::UAdd => UnaryOp::Pos,
                    py::UnaryOp::Not => UnaryOp::Not,
                    py::UnaryOp::Invert => UnaryOp::Invert,
                };
                ExprKind::Unary(op, self.boxed(&u.operand)?)
            }
            py::Expr::Compare(c) => {
                let mut rest = Vec::new();
                for (op, rhs) in c.ops.iter().zip(c.comparators.iter()) {
                    let op = match op {
                        py::CmpOp::Eq => CmpOp::Eq,
                        py::CmpOp::NotEq => CmpOp::Ne,
                        py::CmpOp::Lt => CmpOp::Lt,
                        py::CmpOp::LtE => CmpOp::Le,
                        py::CmpOp::Gt => CmpOp::Gt,
                        py::CmpOp::GtE => CmpOp::Ge,
                        py::CmpOp::Is => CmpOp::Is,
                        py::CmpOp::IsNot => CmpOp::IsNot,
                        py::CmpOp::In => CmpOp::In,
                        py::CmpOp::NotIn => CmpOp::NotIn,
                    };
                    let rhs = match rhs {
                        // `x in {a, b}`: membership in a set literal is membership in the tuple of its items (each
                        // compared with ==, as a set's hash lookup ends in).
                        py::Expr::Set(set) if matches!(op, CmpOp::In | CmpOp::NotIn) => {
                            let items = set.elts.iter().map(|v| self.item(v)).collect::<Result<_, _>>()?;
                            Expr { kind: ExprKind::Tuple(items), span: self.sp(rhs) }
                        }
                        _ => self.expr(rhs)?,
                    };
                    rest.push((op, rhs));
                }
                ExprKind::Compare(self.boxed(&c.left)?, rest)
            }
            py::Expr::BoolOp(b) => ExprKind::BoolOp(
                matches!(b.op, py::BoolOp::And),
                b.values.iter().map(|v| self.expr(v)).collect::<Result<_, _>>()?,
            ),
            // `torch.jit.annotate(T, value)` is `value` (its type only informs TorchScript).
            py::Expr::Call(c) if is_jit_annotate(&c.func) && c.arguments.args.len() == 2 && c.arguments.keywords.is_empty() => {
                return self.expr(&c.arguments.args[1]);
            }
            py::Expr::Call(c) if inert::wrapped_unchanged(c, &self.torch.borrow()).is_some() => {
                return self.expr(inert::wrapped_unchanged(c, &self.torch.borrow()).expect("checked"));
            }
            py::Expr::Call(c) if inert::asks_grad_mode(c, &self.torch.borrow()) => return inert::grad_enabled(c, &self.lines.source, self.sp(c)),
            // `torch.enable_grad()(closure)` (LBFGS), `torch.compile(mode=...)(f)`: the function itself.
            py::Expr::Call(c)
                if matches!(c.func.as_ref(), py::Expr::Call(_))
                    && inert::is_inert_decorator(&c.func, &self.torch.borrow())
                    && c.arguments.args.len() == 1
                    && c.arguments.keywords.is_empty()
                    && !matches!(c.arguments.args[0], py::Expr::Starred(_)) =>
            {
                return self.expr(&c.arguments.args[0]);
            }
            py::Expr::Call(c) => {
                let mut args = Vec::new();
                for a in c.arguments.args.iter() {
                    match a {
                        py::Expr::Generator(g) if sugar::consumes_generator(&c.func, c.arguments.len()) => {
                            let list = self.generator(g)?;
                            if sugar::stops_early(&c.func) && !sugar::calls_nothing(&list, &self.torch.borrow()) {
                                return err(
                                    self.sp(g),
                                    "a generator expression in any() or all() whose items call what may have \
                                     effects (a function of the program, a method of its values, a random draw) is \
                                     not supported (they stop at the first deciding item; write a loop)",
                                );
                            }
                            args.push(list)
                        }
                        _ => args.push(self.item(a)?),
                    }
                }
                let mut kwargs = Vec::new();
                for k in c.arguments.keywords.iter() {
                    match &k.arg {
                        Some(name) => kwargs.push((name.to_string(), self.expr(&k.value)?)),
                        // `**mapping`: spread when the call runs (see `interp::python::spread_kwargs`).
                        None => kwargs.push(("**".to_string(), self.expr(&k.value)?)),
                    }
                }
                ExprKind::Call { func: self.boxed(&c.func)?, args, kwargs }
            }
            py::Expr::Attribute(a) => ExprKind::Attr(self.boxed(&a.value)?, a.attr.to_string()),
            py::Expr::Subscript(s) => ExprKind::Subscript(self.boxed(&s.value)?, self.boxed(&s.slice)?),
            py::Expr::Slice(s) => ExprKind::Slice(self.opt(&s.lower)?, self.opt(&s.upper)?, self.opt(&s.step)?),
            py::Expr::Tuple(t) => ExprKind::Tuple(t.elts.iter().map(|v| self.item(v)).collect::<Result<_, _>>()?),
            py::Expr::List(t) => ExprKind::List(t.elts.iter().map(|v| self.item(v)).collect::<Result<_, _>>()?),
            py::Expr::If(i) => ExprKind::IfExp {
                test: self.boxed(&i.test)?,
                body: self.boxed(&i.body)?,
                orelse: self.boxed(&i.orelse)?,
            },
            py::Expr::ListComp(l) => self.comprehension(&l.elt, &l.generators, span)?,
            py::Expr::Starred(_) => return err(span, "starred expressions are not supported"),
            py::Expr::Lambda(l) => self.lambda(l, span)?,
            py::Expr::Dict(d) => {
                let mut items = Vec::new();
                for it in d.items.iter() {
                    items.push(match &it.key {
                        Some(k) => (self.expr(k)?, self.expr(&it.value)?),
                        // `**m`: the item `(*m, None)`, which the engines spread (`pyvalue::spread_into`).
                        None => {
                            let (m, at) = (self.boxed(&it.value)?, self.sp(&it.value));
                            (Expr { kind: ExprKind::Starred(m), span: at }, Expr { kind: ExprKind::NoneLit, span: at })
                        }
                    });
                }
                ExprKind::Dict(items)
            }
            py::Expr::Set(_) | py::Expr::SetComp(_) | py::Expr::DictComp(_) => self.set_or_dict_comp(e, span)?,
            py::Expr::Generator(_) => {
                return err(span, "generator expressions are supported only as the one argument of tuple(), list(), sum(), min(), max(), sorted(), any(), all(), torch.cat() or torch.stack() (write a list comprehension)")
            }
            py::Expr::FString(f) => ExprKind::FString(self.fstring(f)?),
            py::Expr::TString(_) => return err(span, "t-strings are not supported"),
            py::Expr::Named(n) => walrus::walrus(walrus::name_of(&n.target), self.expr(&n.value)?, span),
            py::Expr::Yield(y) => generators::yield_expr(y.value.as_deref().map(|v| self.expr(v)).transpose()?, false, span),
            py::Expr::YieldFrom(y) => generators::yield_expr(Some(self.expr(&y.value)?), true, span),
            _ => return err(span, "unsupported expression"),
        };
        Ok(Expr { kind, span })
    }
}

/// How often `name` stands in `source` as a whole identifier (a function's own `def` is one).
fn mentions(source: &str, name: &str) -> usize {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    source
        .match_indices(name)
        .filter(|(i, _)| !ident(source[..*i].chars().next_back()) && !ident(source[i + name.len()..].chars().next()))
        .count()
}

/// Whether `f` is `torch.jit.annotate`.
fn is_jit_annotate(f: &py::Expr) -> bool {
    let py::Expr::Attribute(a) = f else { return false };
    let py::Expr::Attribute(jit) = a.value.as_ref() else { return false };
    a.attr.as_str() == "annotate"
        && jit.attr.as_str() == "jit"
        && matches!(jit.value.as_ref(), py::Expr::Name(n) if n.id.as_str() == "torch")
}

/// The operator of a binary expression or augmented assignment.
fn binop(op: py::Operator) -> BinOp {
    match op {
        py::Operator::Add => BinOp::Add,
        py::Operator::Sub => BinOp::Sub,
        py::Operator::Mult => BinOp::Mul,
        py::Operator::Div => BinOp::Div,
        py::Operator::FloorDiv => BinOp::FloorDiv,
        py::Operator::Mod => BinOp::Mod,
        py::Operator::Pow => BinOp::Pow,
        py::Operator::MatMult => BinOp::MatMul,
        py::Operator::BitAnd => BinOp::BitAnd,
        py::Operator::BitOr => BinOp::BitOr,
        py::Operator::BitXor => BinOp::BitXor,
        py::Operator::LShift => BinOp::LShift,
        py::Operator::RShift => BinOp::RShift,
    }
}
