//! What a class body's decorators and dataclass fields mean: a method's kind (`@property`, `@NAME.setter`,
//! `@staticmethod`, a `@classmethod` that never names its class) and a field's `field(...)` default.

use ruff_python_ast as py;
use ruff_python_ast::visitor::{walk_expr, Visitor};

/// The kind of method `f` of class `name` is by its decorators ("" a method, "@" a property's getter, "=" its
/// setter, "!" static), the decorators taken off it; the others stay.
pub(super) fn method_kind(name: &str, f: &mut py::StmtFunctionDef) -> Result<&'static str, String> {
    let mut kind = "";
    let mut kept = Vec::new();
    for d in std::mem::take(&mut f.decorator_list) {
        match &d.expression {
            py::Expr::Name(n) if n.id.as_str() == "property" => kind = "@",
            // `@NAME.setter`: what `o.NAME = v` calls (`C::=NAME`).
            py::Expr::Attribute(a) if a.attr.as_str() == "setter" => kind = "=",
            py::Expr::Name(n) if n.id.as_str() == "staticmethod" => kind = "!",
            // A class method that never names its class (epfml/powersgd's `_matrices_per_shape(cls,
            // tensors)`) is a static method: `cls` is bound to nothing it reads.
            py::Expr::Name(n) if n.id.as_str() == "classmethod" => {
                let cls = f.parameters.posonlyargs.iter().chain(&f.parameters.args).next();
                let cls = cls.map(|p| p.parameter.name.to_string());
                if cls.as_ref().is_none_or(|c| names(&f.body, c)) {
                    return Err(format!(
                        "`class {name}`: class method `{}` names its class (`cls`), which is not \
                         supported (only class methods that never use it)",
                        f.name
                    ));
                }
                let ps = &mut f.parameters;
                if ps.posonlyargs.is_empty() {
                    ps.args.remove(0)
                } else {
                    ps.posonlyargs.remove(0)
                };
                kind = "!";
            }
            _ => kept.push(d),
        }
    }
    f.decorator_list = kept.into_iter().collect();
    Ok(kind)
}

/// Whether `body` reads or binds the name `n` anywhere.
fn names(body: &[py::Stmt], n: &str) -> bool {
    struct Find<'n>(&'n str, bool);
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a py::Expr) {
            if matches!(e, py::Expr::Name(x) if x.id.as_str() == self.0) {
                self.1 = true;
            }
            walk_expr(self, e);
        }
    }
    let mut f = Find(n, false);
    f.visit_body(body);
    f.1
}

/// A dataclass field's default as its `__init__` parameter's: `field(default=X)` is `X`, `field(default_factory=F)`
/// the call `F()` (defaults are evaluated at each call here, so each instance gets its own, as the factory gives),
/// `field()` none; any other value is itself.
pub(super) fn field_default(v: &py::Expr) -> Result<Option<py::Expr>, String> {
    let py::Expr::Call(call) = v else { return Ok(Some(v.clone())) };
    let is_field = match call.func.as_ref() {
        py::Expr::Name(n) => n.id.as_str() == "field",
        py::Expr::Attribute(a) => {
            a.attr.as_str() == "field"
                && matches!(a.value.as_ref(), py::Expr::Name(m) if m.id.as_str() == "dataclasses")
        }
        _ => false,
    };
    if !is_field {
        return Ok(Some(v.clone()));
    }
    if !call.arguments.args.is_empty() {
        return Err("field() takes keyword arguments only".into());
    }
    let mut default = None;
    for k in call.arguments.keywords.iter() {
        match k.arg.as_ref().map(|a| a.as_str()) {
            Some("default") => default = Some(k.value.clone()),
            Some("default_factory") => {
                let mut made = call.clone();
                made.func = Box::new(k.value.clone());
                made.arguments.keywords.clear();
                default = Some(py::Expr::Call(made));
            }
            Some("repr" | "hash" | "compare" | "metadata") => {}
            _ => {
                return Err("only `field(default=...)` and `field(default_factory=...)` are supported (with \
                            `repr`, `hash`, `compare`, `metadata`)"
                    .into())
            }
        }
    }
    Ok(default)
}
