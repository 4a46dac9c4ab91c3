//! Module-level classes as functions (`crate::interp::objects` runs them). A class `C` becomes: each method `m` a
//! function `C::m` (a property's getter `C::@m`; a static method `C::!m`), the methods of a base class of the file
//! that `C` does not define copied as `C`'s, `__call__` standing for an `nn.Module`'s `forward`, and a constructor
//! function `C` taking `__init__`'s parameters: it makes the instance (a dict holding the class's name and its
//! class-level values), runs `C::__init__` on it and returns it. A `@dataclass` gets the `__init__` its annotated
//! fields give. After the functions convert, `super().m(...)` becomes the base's `B::m(self, ...)` (nothing for
//! `object` or `nn.Module`'s `__init__`), and `C.m(...)` the function `C::m`. What a class body may hold: methods,
//! `NAME = value` and `NAME: type [= value]`, a docstring, `pass`; bases: none, `object`, `nn.Module`, or a class of
//! the file. Anything else makes the class unusable (only the functions that use it fail).

use std::collections::{HashMap, VecDeque};

use ruff_python_ast as py;

use super::Cx;
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;

/// The file's classes (by name, and in order) and, per class statement, the functions its methods become; a class
/// that is not supported goes to `unusable` (only what uses it fails).
#[allow(clippy::type_complexity)]
pub(super) fn collect(
    cx: &Cx,
    path: &str,
    body: &[py::Stmt],
    prelude_bases: &[(String, String)],
    unusable: &mut Vec<FailedFunction>,
) -> (HashMap<String, Class>, Vec<String>, Vec<Vec<py::Stmt>>) {
    let (mut classes, mut order, mut defs) = (HashMap::new(), Vec::new(), Vec::new());
    for stmt in body {
        if let py::Stmt::ClassDef(c) = stmt {
            match expand(c, &classes, prelude_bases, |r| cx.lines.span(r.start())) {
                Ok((class, fs)) => {
                    classes.insert(c.name.to_string(), class);
                    order.push(c.name.to_string());
                    defs.push(fs.into_iter().map(py::Stmt::FunctionDef).collect());
                }
                Err(m) => {
                    let error = Diagnostic::new(m).at(cx.sp(c)).in_file(path);
                    unusable.push(FailedFunction { name: c.name.to_string(), span: cx.sp(c), error });
                    defs.push(Vec::new());
                }
            }
        }
    }
    (classes, order, defs)
}

/// The module's statements in order, each class statement replaced by the functions its methods become (`defs`, one
/// list per class statement, from [`collect`]).
pub(super) fn statements<'a>(body: &'a [py::Stmt], defs: &'a [Vec<py::Stmt>]) -> VecDeque<&'a py::Stmt> {
    let mut defs = defs.iter();
    let mut work = VecDeque::new();
    for stmt in body {
        match stmt {
            py::Stmt::ClassDef(_) => work.extend(defs.next().expect("one per class")),
            other => work.push_back(other),
        }
    }
    work
}

/// After the file's functions converted: a method that failed becomes one that fails with its error where it is
/// called ([`method_stub`]: Python runs a class whose other methods are called, as torchdistx's optimizer whose
/// bfloat16 check float32 never calls); then each class's added functions ([`finish`]); a class whose values failed
/// becomes unusable with that error, and its functions are dropped.
pub(super) fn settle(
    path: &str,
    order: &[String],
    classes: &mut HashMap<String, Class>,
    functions: &mut Vec<Function>,
    failed: &mut Vec<FailedFunction>,
    unusable: &mut Vec<FailedFunction>,
    convert: &dyn Fn(&py::Expr) -> Result<Expr, Diagnostic>,
) {
    stub_failed_methods(&|c| classes.contains_key(c), functions, failed);
    for (name, span, d) in finish(order, classes, functions, convert) {
        unusable.push(FailedFunction { name, span, error: d.in_file(path) });
    }
    functions.retain(|f| !unusable.iter().any(|u| f.name.split_once("::").is_some_and(|(c, _)| c == u.name)));
}

/// Each method of a class (`is_class`) among `failed` made a [`method_stub`] among `functions`.
pub(super) fn stub_failed_methods(
    is_class: &dyn Fn(&str) -> bool,
    functions: &mut Vec<Function>,
    failed: &mut Vec<FailedFunction>,
) {
    let (methods, others): (Vec<_>, Vec<_>) =
        std::mem::take(failed).into_iter().partition(|f| f.name.split_once("::").is_some_and(|(c, _)| is_class(c)));
    *failed = others;
    functions.extend(methods.iter().map(|f| method_stub(&f.name, f.span, &f.error)));
}

/// The method `name` (`C::m`, `C::!m`, `C::@p`, `C::=p`) that did not convert, as one that fails with `error` (at
/// its place) when it is called: any arguments, nothing but the refusal.
pub(super) fn method_stub(name: &str, span: Span, error: &Diagnostic) -> Function {
    let shown = ["::!", "::@", "::=", "::"].iter().fold(name.to_string(), |n, sep| n.replacen(sep, ".", 1));
    let why = Diagnostic { message: format!("`{shown}` cannot be used: {}", error.message), ..error.clone() };
    let body = vec![Stmt { kind: StmtKind::Expr(super::numpy::refusal(why, span)), span }];
    let param = |n: &str| Param { name: n.into(), ann: None, default: None, span };
    Function {
        vararg: Some((0, param("args"))),
        kwarg: Some(param("kwargs")),
        ..function(name.into(), vec![], body, span)
    }
}

/// What the conversion needs to know of a class: its base of the file (and whether it is an `nn.Module`), its methods
/// (their function names), whether it is a dataclass, its class-level values and annotated fields.
#[derive(Clone, Debug, Default)]
pub(crate) struct Class {
    pub base: Option<String>,
    pub module_base: bool,
    pub methods: Vec<String>,
    pub dataclass: bool,
    /// Class-level `NAME = value`, the source expressions.
    pub attrs: Vec<(String, py::Expr)>,
    /// Annotated fields in order, with their defaults (a dataclass's `__init__` parameters).
    pub fields: Vec<(String, Option<py::Expr>, Span)>,
    pub span: Span,
    /// A subclass of `dict` with nothing of its own (OLMo's `class BufferCache(dict): pass`): a dict.
    pub dict_alias: bool,
    /// A `typing.NamedTuple` class: a dataclass whose instance also holds its fields as a tuple
    /// ([`named_tuple_methods`]).
    pub named_tuple: bool,
    /// The methods written for it (`module_methods`), located at the class once converted.
    pub generated: Vec<String>,
}

/// The function definitions class `c` stands for (its methods renamed), or why it is not supported.
pub(super) fn expand(
    c: &py::StmtClassDef,
    classes: &HashMap<String, Class>,
    prelude_bases: &[(String, String)],
    sp: impl Fn(ruff_text_size::TextRange) -> Span,
) -> Result<(Class, Vec<py::StmtFunctionDef>), String> {
    let name = c.name.as_str();
    let mut class = Class { span: sp(c.range), ..Class::default() };
    for d in &c.decorator_list {
        match &d.expression {
            py::Expr::Name(n) if n.id.as_str() == "dataclass" => class.dataclass = true,
            py::Expr::Attribute(a) if a.attr.as_str() == "dataclass" => class.dataclass = true,
            py::Expr::Call(call) if matches!(call.func.as_ref(), py::Expr::Name(n) if n.id.as_str() == "dataclass") => {
                class.dataclass = true
            }
            _ => return Err(format!("`class {name}`: its decorator is not supported (only `@dataclass`)")),
        }
    }
    let bases: Vec<&py::Expr> = c.arguments.as_ref().map(|a| a.args.iter().collect()).unwrap_or_default();
    if c.arguments.as_ref().is_some_and(|a| !a.keywords.is_empty()) || bases.len() > 1 {
        return Err(format!("`class {name}`: several bases or class keywords are not supported"));
    }
    match bases.first() {
        None => {}
        Some(py::Expr::Name(n)) if n.id.as_str() == "object" => {}
        Some(py::Expr::Name(n)) if n.id.as_str() == "dict" => {
            let own = c.body.iter().any(|s| !matches!(s, py::Stmt::Pass(_) | py::Stmt::Expr(_)));
            if own || !c.decorator_list.is_empty() {
                return Err(format!("`class {name}`: a subclass of `dict` is supported only with nothing of its own"));
            }
            class.dict_alias = true;
        }
        Some(py::Expr::Name(n)) if n.id.as_str() == "NamedTuple" => (class.dataclass, class.named_tuple) = (true, true),
        Some(py::Expr::Attribute(a)) if a.attr.as_str() == "NamedTuple" => {
            (class.dataclass, class.named_tuple) = (true, true)
        }
        Some(py::Expr::Attribute(a)) if a.attr.as_str() == "Module" => class.module_base = true,
        Some(py::Expr::Name(n)) if n.id.as_str() == "Module" => class.module_base = true,
        Some(b) if base_class(b, classes, prelude_bases).is_some() => {
            let n = base_class(b, classes, prelude_bases).expect("a class");
            let b = &classes[&n];
            class.base = Some(n);
            class.module_base = b.module_base;
            class.attrs = b.attrs.clone();
            class.fields = b.fields.clone();
        }
        Some(_) => {
            return Err(format!(
                "`class {name}`: its base class is not supported (only `object`, `nn.Module`, torch.optim's `Optimizer`, `SGD`, `Adam`, `AdamW`, `RMSprop`, torch.nn's containers or a class of this file)"
            ))
        }
    }
    let mut defs = Vec::new();
    for s in &c.body {
        match s {
            py::Stmt::FunctionDef(f) => {
                let mut f = f.clone();
                let kind = super::class_body::method_kind(name, &mut f)?;
                if kind != "!" && f.parameters.posonlyargs.is_empty() && f.parameters.args.is_empty() {
                    return Err(format!("`class {name}`: method `{}` takes no `self`", f.name));
                }
                let fname = format!("{name}::{kind}{}", f.name);
                f.name = py::Identifier::new(fname.clone(), f.name.range);
                class.methods.push(fname);
                defs.push(f);
            }
            // Type metadata (Detectron-style `__annotations__ = {...}` of typing names): nothing runs it here.
            py::Stmt::Assign(a) if matches!(&a.targets[..], [py::Expr::Name(n)] if n.id.as_str() == "__annotations__") =>
                {}
            py::Stmt::Assign(a) if a.targets.len() == 1 && a.targets[0].is_name_expr() => {
                let n = a.targets[0].as_name_expr().expect("a name").id.to_string();
                class.attrs.retain(|(m, _)| *m != n);
                class.attrs.push((n, (*a.value).clone()));
            }
            py::Stmt::AnnAssign(a) if a.target.is_name_expr() => {
                let n = a.target.as_name_expr().expect("a name").id.to_string();
                let is_classvar = is_classvar(&a.annotation);
                if class.dataclass && !is_classvar {
                    class.fields.retain(|(m, _, _)| *m != n);
                    let default = match a.value.as_deref() {
                        Some(v) => super::class_body::field_default(v)
                            .map_err(|m| format!("`class {name}`: field `{n}`: {m}"))?,
                        None => None,
                    };
                    class.fields.push((n, default, sp(a.range)));
                } else if let Some(v) = &a.value {
                    class.attrs.retain(|(m, _)| *m != n);
                    class.attrs.push((n, (**v).clone()));
                }
            }
            py::Stmt::Expr(e) if e.value.is_string_literal_expr() => {}
            py::Stmt::Pass(_) => {}
            _ => return Err(format!("`class {name}`: only methods and `NAME = value` are supported in a class body")),
        }
    }
    if class.module_base && class.base.is_none() {
        for mut f in super::module_methods::module_methods(name) {
            let fname = format!("{name}::{}", f.name);
            if !class.methods.contains(&fname) {
                f.name = py::Identifier::new(fname.clone(), c.range);
                class.methods.push(fname.clone());
                class.generated.push(fname);
                defs.push(f);
            }
        }
    }
    let function_base = super::prelude::class_name("torch.autograd", "Function");
    let custom_function = class.base.is_some() && class.base == function_base;
    if class.named_tuple || custom_function {
        let made = match custom_function {
            true => autograd_apply(name),
            false => named_tuple_methods(name, &class.fields, &mut class.attrs),
        };
        for mut f in made {
            // (`apply` is static: its decorator says so, as in a class body)
            let kind = if std::mem::take(&mut f.decorator_list).is_empty() { "" } else { "!" };
            let fname = format!("{name}::{kind}{}", f.name);
            if !class.methods.contains(&fname) {
                f.name = py::Identifier::new(fname.clone(), c.range);
                class.methods.push(fname);
                defs.push(f);
            }
        }
    }
    Ok((class, defs))
}

/// The static `apply` of a `torch.autograd.Function` subclass `name`: its `forward` on a fresh context (the prelude's
/// `FunctionCtx`), as PyTorch runs it where no gradient is recorded.
fn autograd_apply(name: &str) -> Vec<py::StmtFunctionDef> {
    let source = format!(
        "@staticmethod\ndef apply(*args, **kwargs):\n    return {name}.forward(torch.autograd.FunctionCtx(), *args, **kwargs)\n"
    );
    let parsed = ruff_python_parser::parse_module(&source).expect("apply parses");
    parsed
        .into_syntax()
        .body
        .into_iter()
        .filter_map(|s| if let py::Stmt::FunctionDef(f) = s { Some(f) } else { None })
        .collect()
}

/// What a `typing.NamedTuple` class has besides its fields, written as Python for class `name` with `fields`:
/// `__len__`, `_replace(**changes)` (Python's ValueError for a name that is no field), `_asdict()`, and the class
/// value `_fields`. Indexing, iterating and unpacking an instance read the tuple its `__init__` stores under
/// `ast::ITEMS_KEY` ([`finish`]).
fn named_tuple_methods(
    name: &str,
    fields: &[(String, Option<py::Expr>, Span)],
    attrs: &mut Vec<(String, py::Expr)>,
) -> Vec<py::StmtFunctionDef> {
    let names: Vec<&str> = fields.iter().map(|(n, _, _)| n.as_str()).collect();
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}',")).collect();
    let replaced: Vec<String> = names.iter().map(|n| format!("kwargs.pop('{n}', self.{n})")).collect();
    let source = format!(
        "_fields = ({})\n\
         def __len__(self):\n    return {}\n\
         def _replace(self, **kwargs):\n    r = {name}({})\n    if kwargs:\n        \
         raise ValueError('Got unexpected field names: %r' % list(kwargs))\n    return r\n\
         def _asdict(self):\n    return {{{}}}\n",
        quoted.join(" "),
        names.len(),
        replaced.join(", "),
        names.iter().map(|n| format!("'{n}': self.{n}")).collect::<Vec<_>>().join(", "),
    );
    let parsed = ruff_python_parser::parse_module(&source).expect("the NamedTuple methods parse");
    let mut defs = Vec::new();
    for s in parsed.into_syntax().body {
        match s {
            py::Stmt::FunctionDef(f) => defs.push(f),
            py::Stmt::Assign(a) => attrs.push(("_fields".into(), *a.value)),
            _ => {}
        }
    }
    defs
}

/// Each class of `order` with its base of the file, if any.
pub(super) fn parents(order: &[String], classes: &HashMap<String, Class>) -> Vec<(String, Option<String>)> {
    order.iter().map(|c| (c.clone(), classes.get(c).and_then(|k| k.base.clone()))).collect()
}

/// The class of the file a base expression names: a class the file defines, or one of torch.nn's or torch.optim's
/// (`super::prelude::base`).
fn base_class(e: &py::Expr, classes: &HashMap<String, Class>, prelude_bases: &[(String, String)]) -> Option<String> {
    let named = match e {
        py::Expr::Name(n) if classes.contains_key(n.id.as_str()) => Some(n.id.to_string()),
        _ => super::prelude::base(e, prelude_bases),
    };
    named.filter(|n| classes.contains_key(n))
}

/// Whether a field's annotation is `ClassVar[...]` (`typing.ClassVar` too): a class-level value, not a dataclass
/// field.
fn is_classvar(ann: &py::Expr) -> bool {
    let head = match ann {
        py::Expr::Subscript(s) => s.value.as_ref(),
        other => other,
    };
    match head {
        py::Expr::Name(n) => n.id.as_str() == "ClassVar",
        py::Expr::Attribute(a) => a.attr.as_str() == "ClassVar",
        _ => false,
    }
}

pub(super) fn name(n: &str, span: Span) -> Expr {
    Expr { kind: ExprKind::Name(n.to_string()), span }
}

pub(super) fn stmt(kind: StmtKind, span: Span) -> Stmt {
    Stmt { kind, span }
}

/// A function the conversion makes (a constructor, a dataclass's `__init__`, a module's `train`), without `*args`,
/// `**kwargs` or a return annotation.
pub(super) fn function(name: String, params: Vec<Param>, body: Vec<Stmt>, span: Span) -> Function {
    Function { name, params, vararg: None, kwarg: None, returns: None, body, span }
}

/// After the file's functions converted: the functions each class adds (inherited methods, `__call__`, a
/// dataclass's `__init__`, the constructor), and `super()` and `C.m(...)` calls rewritten. `convert` converts a
/// class-level expression; a class whose values do not convert becomes unusable with its error (`Err` by name).
fn finish(
    order: &[String],
    classes: &mut HashMap<String, Class>,
    functions: &mut Vec<Function>,
    convert: &dyn Fn(&py::Expr) -> Result<Expr, Diagnostic>,
) -> Vec<(String, Span, Diagnostic)> {
    let mut failed = Vec::new();
    supers(classes, functions);
    for cname in order {
        let class = classes[cname].clone();
        let span = class.span;
        let find = |fs: &Vec<Function>, n: &str| fs.iter().position(|f| f.name == n);
        let mut methods = class.methods.clone();
        // Methods of the base the class does not define.
        if let Some(b) = &class.base {
            for m in classes[b].methods.clone() {
                let own = format!("{cname}::{}", &m[b.len() + 2..]);
                if !methods.contains(&own) {
                    if let Some(i) = find(functions, &m) {
                        let mut f = functions[i].clone();
                        f.name = own.clone();
                        functions.push(f);
                        methods.push(own);
                    }
                }
            }
        }
        // `isinstance(o, A)` asks for `CLASS::^A` (`interp::pywalk::isinstance_of_class`): one per class the class
        // is (itself and its bases), each a function that does nothing.
        let mut ancestor = Some(cname.clone());
        while let Some(a) = ancestor {
            functions.push(function(format!("{cname}::^{a}"), vec![], vec![], span));
            ancestor = classes.get(&a).and_then(|c| c.base.clone());
        }
        let fwd = format!("{cname}::forward");
        let call = format!("{cname}::__call__");
        // An `nn.Module` is called through its `forward` (its own, or the one it inherits), unless the class
        // itself defines `__call__` (an inherited `__call__` is the base's `forward`).
        if class.module_base && !class.methods.contains(&call) {
            if let Some(i) = find(functions, &fwd) {
                let mut f = functions[i].clone();
                f.name = call.clone();
                functions.retain(|g| g.name != call);
                functions.push(f);
                if !methods.contains(&call) {
                    methods.push(call);
                }
            }
        }
        let init = format!("{cname}::__init__");
        let fields: Result<Vec<Param>, _> = super::class_attrs::dataclass_fields(cname, classes)
            .iter()
            .map(|(n, d, at)| {
                Ok::<Param, crate::diag::Diagnostic>(Param {
                    name: n.clone(),
                    ann: None,
                    default: d.as_ref().map(convert).transpose()?,
                    span: *at,
                })
            })
            .collect();
        let attrs: Result<Vec<(String, Expr)>, _> =
            class.attrs.iter().map(|(n, e)| Ok::<_, crate::diag::Diagnostic>((n.clone(), convert(e)?))).collect();
        let (fields, mut attrs) = match (fields, attrs) {
            (Ok(f), Ok(a)) => (f, a),
            (Err(d), _) | (_, Err(d)) => {
                failed.push((cname.clone(), span, d));
                continue;
            }
        };
        // `NAME = property(GETTER)` in the class body: the property `C::@NAME`, which calls GETTER on the instance
        // (a name the class body defines as a method is that method).
        let own = methods.clone();
        attrs.retain(|(n, e)| {
            let ExprKind::Call { func, args, kwargs } = &e.kind else { return true };
            let ([getter], true, ExprKind::Name(p)) = (args.as_slice(), kwargs.is_empty(), &func.kind) else {
                return true;
            };
            if p != "property" {
                return true;
            }
            let getter = match &getter.kind {
                ExprKind::Name(g) if own.contains(&format!("{cname}::{g}")) => {
                    name(&format!("{cname}::{g}"), getter.span)
                }
                _ => getter.clone(),
            };
            let call = Expr {
                kind: ExprKind::Call { func: Box::new(getter), args: vec![name("self", e.span)], kwargs: vec![] },
                span: e.span,
            };
            let this = Param { name: "self".into(), ann: None, default: None, span: e.span };
            let getter = format!("{cname}::@{n}");
            functions.push(function(
                getter.clone(),
                vec![this],
                vec![stmt(StmtKind::Return(Some(call)), e.span)],
                e.span,
            ));
            methods.push(getter);
            false
        });
        if class.module_base {
            module_mode(cname, span, &mut attrs, &mut methods, functions);
        }
        for f in functions.iter_mut().filter(|f| class.generated.contains(&f.name)) {
            super::prelude::locate(f, span);
        }
        // (an `__init__` copied from a dataclass base gives way: Python writes one for each dataclass)
        if class.dataclass && !class.methods.contains(&init) {
            functions.retain(|f| f.name != init);
            methods.retain(|m| *m != init);
            let this = Param { name: "self".into(), ann: None, default: None, span };
            let body = fields
                .iter()
                .map(|p| {
                    let target =
                        Expr { kind: ExprKind::Attr(Box::new(name("self", p.span)), p.name.clone()), span: p.span };
                    stmt(StmtKind::Assign { targets: vec![target], value: name(&p.name, p.span) }, p.span)
                })
                .collect();
            let mut body: Vec<Stmt> = body;
            if class.named_tuple {
                let items = fields
                    .iter()
                    .map(|p| Expr { kind: ExprKind::Attr(Box::new(name("self", span)), p.name.clone()), span })
                    .collect();
                let target = Expr { kind: ExprKind::Attr(Box::new(name("self", span)), ITEMS_KEY.into()), span };
                let value = Expr { kind: ExprKind::Tuple(items), span };
                body.push(stmt(StmtKind::Assign { targets: vec![target], value }, span));
            }
            let params = std::iter::once(this).chain(fields.iter().cloned()).collect();
            functions.push(function(init.clone(), params, body, span));
            methods.push(init.clone());
        }
        super::class_attrs::getters(cname, class.base.as_deref(), &attrs, functions, span);
        let ctor = match class.dict_alias {
            true => dict_constructor(cname, span),
            false => constructor(cname, span, attrs, functions.iter().find(|f| f.name == init)),
        };
        functions.push(ctor);
        classes.get_mut(cname).expect("a class").methods = methods;
    }
    class_calls(&classes.clone(), functions);
    super::class_attrs::class_attr_reads(classes, functions);
    failed
}

/// `C.m(...)` anywhere (`C` a class of the file, or a prelude's by its PyTorch name) as the function `C::m`, once
/// every class has its methods.
fn class_calls(snapshot: &HashMap<String, Class>, functions: &mut [Function]) {
    for f in functions.iter_mut() {
        let local = local_names(f);
        visit_exprs_mut(&mut f.body, &mut |e| {
            let ExprKind::Call { func, .. } = &mut e.kind else { return };
            let ExprKind::Attr(obj, m) = &func.kind else { return };
            let c = match &obj.kind {
                // (a local or parameter of the class's name hides it)
                ExprKind::Name(c) if local.contains(c) => return,
                ExprKind::Name(c) => c.clone(),
                // A prelude's class by its PyTorch name (`torch.nn.Embedding.__init__(self, ...)`).
                _ => match super::prelude::named_class(obj) {
                    Some(c) => c,
                    None => return,
                },
            };
            let Some(cls) = snapshot.get(&c) else { return };
            if super::prelude::class_method_of_prelude(&c, m) && cls.methods.contains(&format!("{c}::!{m}")) {
                let why = Diagnostic::new(format!(
                    "`{c}.{m}(...)` on a subclass is not supported (PyTorch's class method would make the subclass)"
                ));
                *e = super::numpy::refusal(why, e.span);
                return;
            }
            // (a property is not callable on the class: `C.p(...)` stays Python's error)
            for prefix in ["", "!"] {
                let full = format!("{c}::{prefix}{m}");
                if cls.methods.contains(&full) {
                    let span = func.span;
                    **func = name(&full, span);
                    return;
                }
            }
        });
    }
}

/// `C.m` not called, `m` a static method of class `C` of the file (`clip = Clip.apply`, a `torch.autograd.Function`'s
/// `apply` taken as a function, as maskrcnn-benchmark's FreeAnchor loss does): the function `C::!m`, in functions and
/// module constants alike.
pub(super) fn static_method_values(
    classes: &HashMap<String, Class>,
    functions: &mut [Function],
    constants: &mut [(String, Expr)],
) {
    let visit = |local: &[String], e: &mut Expr| {
        let ExprKind::Attr(obj, m) = &e.kind else { return };
        let ExprKind::Name(c) = &obj.kind else { return };
        let full = format!("{c}::!{m}");
        if !local.contains(c) && classes.get(c).is_some_and(|cls| cls.methods.contains(&full)) {
            *e = name(&full, e.span);
        }
    };
    for f in functions.iter_mut() {
        let local = local_names(f);
        visit_exprs_mut(&mut f.body, &mut |e| visit(&local, e));
    }
    for (_, e) in constants.iter_mut() {
        visit_expr_mut(e, &mut |e| visit(&[], e));
    }
}

/// The names a function binds itself (its parameters and what its body assigns), which hide a class of the file.
pub(super) fn local_names(f: &Function) -> Vec<String> {
    let mut local: Vec<String> = f.params.iter().map(|p| p.name.clone()).collect();
    super::bound_names(&f.body, &mut local);
    local
}

/// What an `nn.Module` subclass `cname` inherits of PyTorch's mode: the class value `training = True`, and the
/// methods it does not define, `train(self, mode=True)` (sets `training` on itself and on every attribute that is
/// an `nn.Module` of the file, as PyTorch does on its registered children, and returns itself) and `eval(self)`,
/// which is `train(False)` (RT-DETR's `deploy()` calls `self.eval()`).
fn module_mode(
    cname: &str,
    span: Span,
    attrs: &mut Vec<(String, Expr)>,
    methods: &mut Vec<String>,
    functions: &mut Vec<Function>,
) {
    let e = |kind| Expr { kind, span };
    let attr = |o: &str, a: &str| e(ExprKind::Attr(Box::new(name(o, span)), a.into()));
    let call = |f: Expr, args| e(ExprKind::Call { func: Box::new(f), args, kwargs: vec![] });
    let param = |n: &str, default| Param { name: n.into(), ann: None, default, span };
    let method = |m: &str, params, body| function(format!("{cname}::{m}"), params, body, span);
    if !attrs.iter().any(|(n, _)| n == "training") {
        attrs.push(("training".into(), e(ExprKind::Bool(true))));
    }
    let train = format!("{cname}::train");
    if !methods.contains(&train) {
        // for _k in self: _v = self[_k]; if ·is_module(_v): _v.train(mode)
        let child = call(name(IS_MODULE, span), vec![name("_v", span)]);
        let recurse = stmt(
            StmtKind::For {
                target: name("_k", span),
                iter: name("self", span),
                body: vec![
                    stmt(
                        StmtKind::Assign {
                            targets: vec![name("_v", span)],
                            value: e(ExprKind::Subscript(Box::new(name("self", span)), Box::new(name("_k", span)))),
                        },
                        span,
                    ),
                    stmt(
                        StmtKind::If {
                            test: child,
                            body: vec![stmt(StmtKind::Expr(call(attr("_v", "train"), vec![name("mode", span)])), span)],
                            orelse: vec![],
                        },
                        span,
                    ),
                ],
            },
            span,
        );
        let body = vec![
            stmt(StmtKind::Assign { targets: vec![attr("self", "training")], value: name("mode", span) }, span),
            recurse,
            stmt(StmtKind::Return(Some(name("self", span))), span),
        ];
        functions.push(method("train", vec![param("self", None), param("mode", Some(e(ExprKind::Bool(true))))], body));
        methods.push(train);
    }
    let eval = format!("{cname}::eval");
    if !methods.contains(&eval) {
        let body =
            vec![stmt(StmtKind::Return(Some(call(attr("self", "train"), vec![e(ExprKind::Bool(false))]))), span)];
        functions.push(method("eval", vec![param("self", None)], body));
        methods.push(eval);
    }
}

/// The constructor of a subclass of `dict` with nothing of its own: `def C(*args, **kwargs): return dict(*args,
/// **kwargs)`.
fn dict_constructor(cname: &str, span: Span) -> Function {
    let param = |n: &str| Param { name: n.into(), ann: None, default: None, span };
    let args = vec![Expr { kind: ExprKind::Starred(Box::new(name("args", span))), span }];
    let kwargs = vec![("**".to_string(), name("kwargs", span))];
    let call = Expr { kind: ExprKind::Call { func: Box::new(name("dict", span)), args, kwargs }, span };
    let body = vec![stmt(StmtKind::Return(Some(call)), span)];
    Function {
        vararg: Some((0, param("args"))),
        kwarg: Some(param("kwargs")),
        ..function(cname.into(), vec![], body, span)
    }
}

/// `super().m(...)` in a method of class `C` (before methods are copied into subclasses: `super()` is the base of the
/// class that defines the method): the base's `B::m(self, ...)`, or nothing for `__init__` where no base of the file
/// defines it (`object`, `nn.Module`). `super(D, self)` starts from `D`'s base instead.
fn supers(classes: &HashMap<String, Class>, functions: &mut [Function]) {
    for f in functions.iter_mut() {
        let Some((owner, _)) = f.name.split_once("::") else { continue };
        let owner = owner.to_string();
        let Some(this) = f.params.first().map(|p| p.name.clone()) else { continue };
        visit_exprs_mut(&mut f.body, &mut |e| {
            let ExprKind::Call { func, args, .. } = &mut e.kind else { return };
            let ExprKind::Attr(obj, m) = &func.kind else { return };
            let ExprKind::Call { func: s, args: sargs, kwargs } = &obj.kind else { return };
            if !kwargs.is_empty() || !matches!(&s.kind, ExprKind::Name(n) if n == "super") {
                return;
            }
            // `super()`, or `super(C, self)` as older code writes it (C: this class or another of the file).
            let start = match sargs.as_slice() {
                [] => owner.clone(),
                [Expr { kind: ExprKind::Name(c), .. }, Expr { kind: ExprKind::Name(o), .. }]
                    if *o == this && classes.contains_key(c) =>
                {
                    c.clone()
                }
                _ => return,
            };
            let (m, span) = (m.clone(), func.span);
            let base = classes.get(&start).and_then(|c| c.base.clone());
            // The nearest base of the file that defines `m` (its methods as defined, before copies).
            let mut b = base;
            while let Some(bn) = b.clone() {
                if classes[&bn].methods.contains(&format!("{bn}::{m}")) {
                    **func = name(&format!("{bn}::{m}"), span);
                    args.insert(0, name(&this, span));
                    return;
                }
                b = classes[&bn].base.clone();
            }
            if m == "__init__" {
                e.kind = ExprKind::NoneLit;
            }
        });
    }
}

/// The constructor of class `cname`: `self = {"__class__": C, attrs...}; C::__init__(self, params...); return self`,
/// taking `__init__`'s parameters after `self` (`init`; none without one).
fn constructor(cname: &str, span: Span, attrs: Vec<(String, Expr)>, init: Option<&Function>) -> Function {
    let mut ctor = function(cname.to_string(), vec![], vec![], span);
    let mut items = vec![(
        Expr { kind: ExprKind::Str(CLASS_KEY.into()), span },
        Expr { kind: ExprKind::Str(cname.to_string()), span },
    )];
    items.extend(attrs.into_iter().map(|(n, e)| (Expr { kind: ExprKind::Str(n), span }, e)));
    ctor.body.push(stmt(
        StmtKind::Assign { targets: vec![name("self", span)], value: Expr { kind: ExprKind::Dict(items), span } },
        span,
    ));
    if let Some(f) = init {
        let skip = usize::from(!f.params.is_empty());
        ctor.params = f.params[skip..].to_vec();
        ctor.vararg = f.vararg.clone().map(|(n, p)| (n.saturating_sub(skip), p));
        ctor.kwarg = f.kwarg.clone();
        let mut args = vec![name("self", span)];
        let mut kwargs = Vec::new();
        for (k, p) in ctor.params.iter().enumerate() {
            if k < ctor.positional() {
                args.push(name(&p.name, p.span));
            } else {
                kwargs.push((p.name.clone(), name(&p.name, p.span)));
            }
        }
        if let Some((_, p)) = &ctor.vararg {
            args.push(Expr { kind: ExprKind::Starred(Box::new(name(&p.name, p.span))), span });
        }
        if let Some(p) = &ctor.kwarg {
            kwargs.push(("**".into(), name(&p.name, p.span)));
        }
        let call = Expr { kind: ExprKind::Call { func: Box::new(name(&f.name, span)), args, kwargs }, span };
        ctor.body.push(stmt(StmtKind::Expr(call), span));
    }
    ctor.body.push(stmt(StmtKind::Return(Some(name("self", span))), span));
    ctor
}
