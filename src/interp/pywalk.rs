//! The expression and statement walks both engines share, and the builtins that call back into an engine
//! (`crate::interp::pyvalue` is the layer; this is its half that walks the syntax). Each engine implements [`Walk`]
//! and [`Exec`] by delegating to its own methods; the walks here call those for what differs.

use std::collections::HashMap;
use std::rc::Rc;

use super::args::CallArgs;
use super::pyvalue::{literal, Made, Py, PyValue};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::{BinOp, Expr, ExprKind, FPart, Stmt, StmtKind, UnaryOp};

/// `raise EXC` or `raise EXC(args)` (one of [`super::python::EXCEPTIONS`]): the error the program stops with, its
/// message as Python prints it (`str_of` and `repr_of` print an argument). An error evaluating the arguments is
/// the one raised.
pub fn raise<'m, W: Walk<'m>>(
    w: &mut W,
    env: &mut W::Env,
    exc: &'m Option<Expr>,
    span: Span,
    str_of: impl Fn(&mut W, &W::V) -> String,
    repr_of: impl Fn(&mut W, &W::V) -> String,
) -> W::Err {
    use super::python::{exception_message, EXCEPTIONS};
    let Some(e) = exc else {
        return Diagnostic::new("RuntimeError: No active exception to reraise").at(span).into();
    };
    let exception = |n: &str| EXCEPTIONS.contains(&n);
    let unsupported =
        || Diagnostic::new(format!("raise: unsupported exception (use one of {})", EXCEPTIONS.join(", ")));
    match &e.kind {
        ExprKind::Name(n) if exception(n) => Diagnostic::new(n.clone()).at(span).into(),
        ExprKind::Call { func, args, kwargs } if kwargs.is_empty() => match &func.kind {
            ExprKind::Name(n) if exception(n) => {
                let vals = match w.items(env, args, true) {
                    Ok(v) => v,
                    Err(d) => return d,
                };
                let strs: Vec<String> = match vals.as_slice() {
                    [one] => vec![str_of(w, one)],
                    _ => vals.iter().map(|v| repr_of(w, v)).collect(),
                };
                Diagnostic::new(exception_message(n, &strs)).at(span).into()
            }
            _ => unsupported().at(e.span).into(),
        },
        _ => unsupported().at(e.span).into(),
    }
}

/// A call's arguments, evaluated in order: positional ones with `*` spread, keyword ones with `**` spread. A
/// nested function's captures (`MAKE_CLOSURE`'s keywords) must be bound where it is made.
pub fn call_arguments<'m, W: Walk<'m, Env = HashMap<String, <W as Walk<'m>>::V>>>(
    w: &mut W,
    env: &mut W::Env,
    call: &'m Expr,
) -> Result<(Vec<W::V>, Vec<(String, W::V)>), W::Err> {
    let ExprKind::Call { func, args, kwargs } = &call.kind else { unreachable!("a call expression") };
    if matches!(&func.kind, ExprKind::Name(n) if n == crate::frontend::ast::MAKE_CLOSURE) {
        if let Some((n, at)) = super::python::unbound_capture(kwargs, |n| env.contains_key(n)) {
            return Err(Diagnostic::new(super::python::unbound_capture_message(n)).at(at).into());
        }
    }
    let pos = w.items(env, args, true)?;
    let mut kw = Vec::with_capacity(kwargs.len());
    for (k, v) in kwargs {
        kw.push((k.clone(), w.eval(env, v)?));
    }
    let kw =
        super::python::spread_kwargs(kw, super::python::dict_entries).map_err(|m| Diagnostic::new(m).at(call.span))?;
    Ok((pos, kw))
}

/// What a call expression calls, evaluated before its arguments as Python does (`a.f(b)` reads `a`, then `b`).
pub enum Callee<'m, V> {
    /// A call both engines answer without dispatching it (`answered_call`): its result.
    Answered(V),
    /// `obj.name(...)`: the receiver's value and the method's name.
    Method(V, &'m String),
    /// `name(...)`: the engine looks the name up (a program function, a closure, a builtin).
    Name(&'m String),
    /// Any other expression's value: `(lambda: s)()`, `fs[0](x)`.
    Value(V),
}

/// A call expression's callee and then its arguments (`call_arguments`), in Python's order: the receiver of a method
/// and a callee expression are evaluated first. A plain name is looked up by the engine after the arguments (the
/// lookup has no effects; only an unbound name's error would come first in Python).
#[allow(clippy::type_complexity)]
pub fn call_parts<'m, W: Walk<'m, Env = HashMap<String, <W as Walk<'m>>::V>>>(
    w: &mut W,
    env: &mut W::Env,
    call: &'m Expr,
) -> Result<(Callee<'m, W::V>, Vec<W::V>, Vec<(String, W::V)>), W::Err> {
    let ExprKind::Call { func, .. } = &call.kind else { unreachable!("a call expression") };
    let callee = match &func.kind {
        ExprKind::Attr(obj, name) => Callee::Method(w.eval(env, obj)?, name),
        ExprKind::Name(n) => Callee::Name(n),
        _ => Callee::Value(w.eval(env, func)?),
    };
    let (mut pos, mut kw) = call_arguments(w, env, call)?;
    // `x.where(condition, y)` is `torch.where(condition, x, y)`: the one method whose tensor is not the first argument.
    let callee = match callee {
        Callee::Method(o, name) if name == "where" && o.type_name() == "Tensor" && o.complex_of().is_none() => {
            if pos.is_empty() {
                kw.push(("input".to_string(), o));
            } else {
                pos.insert(1, o);
            }
            Callee::Value(W::V::torch_function("where"))
        }
        c => c,
    };
    // `x.new(y.size())` and `x.new(y.shape)`, `torch.FloatTensor(y.size())`: PyTorch reads a torch.Size as sizes
    // (any other tuple as data), so the sizes go as `x.new(d0, d1, ...)` (faster-rcnn's
    // `gt_boxes.new(gt_boxes.size())`).
    if let (Callee::Method(o, name), ExprKind::Call { args, .. }) = (&callee, &call.kind) {
        let legacy = matches!(o.py(), Py::Module("torch")) && name.ends_with("Tensor");
        let new = name.as_str() == "new" && o.type_name() == "Tensor";
        if (new || legacy) && kw.is_empty() && args.len() == 1 && is_size(&args[0]) {
            if let Py::Tuple(items) = pos[0].py() {
                if !items.is_empty() && items.iter().all(|v| matches!(v.py(), Py::Int(_))) {
                    pos = items.to_vec();
                }
            }
        }
    }
    // Calls of the program's objects: a method with the object first, an attribute holding a callable, `__call__`.
    let named_object = |n: &str| env.get(n).filter(|v| super::pyvalue::object_class(*v).is_some()).cloned();
    let target = match &callee {
        Callee::Method(o, name) => match super::pyvalue::object_class(o) {
            Some(cls) => Some(super::objects::method(w, o, &cls, name, call.span)?),
            None => None,
        },
        Callee::Name(n) => match named_object(n) {
            Some(o) => Some(super::objects::callable(w, o, call.span)?),
            None => None,
        },
        Callee::Value(v) if super::pyvalue::object_class(v).is_some() => {
            Some(super::objects::callable(w, v.clone(), call.span)?)
        }
        _ => None,
    };
    let callee = match target {
        Some((f, this)) => {
            pos.splice(0..0, this);
            Callee::Value(f)
        }
        None => callee,
    };
    if super::complex::involves(&callee, &pos, &kw) {
        let r = super::complex::call(w, &callee, &pos, &kw, call.span)?;
        return Ok((Callee::Answered(r), pos, kw));
    }
    if let Callee::Method(o, name) = &callee {
        if let Some(r) = super::pyvalue::answered_call(o, name, &pos, &kw) {
            return Ok((Callee::Answered(r.map_err(|m| Diagnostic::new(m).at(call.span))?), pos, kw));
        }
        if let Some(r) = super::grads::tensor_flag_call(w, o, name, &pos, &kw, call.span)? {
            return Ok((Callee::Answered(r), pos, kw));
        }
    }
    Ok((callee, pos, kw))
}

/// Whether `e` is a torch.Size by its form: `y.shape` or `y.size()`.
fn is_size(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Attr(_, n) => n == "shape",
        ExprKind::Call { func, args, kwargs } => {
            args.is_empty() && kwargs.is_empty() && matches!(&func.kind, ExprKind::Attr(_, n) if n == "size")
        }
        _ => false,
    }
}

/// `isinstance(v, class_or_tuple)` for the classes a program can name; a value known only at run time has its
/// class now (its type name is the class's).
pub fn isinstance<V: PyValue>(v: &V, class_or_tuple: &V) -> Result<bool, String> {
    use super::python::{isinstance_of, PyClass};
    let classes = flat_classes(class_or_tuple);
    // An instance of a class of the file is held as a dict, but is no builtin type's (but a NamedTuple's).
    let class = match v.type_name() {
        _ if super::pyvalue::object_class(v).is_some() => super::objects::builtin_class(v),
        "Tensor" => PyClass::Tensor,
        "int" => PyClass::Int,
        "float" => PyClass::Float,
        "bool" => PyClass::Bool,
        "str" => PyClass::Str,
        "tuple" => PyClass::Tuple,
        "list" => PyClass::List,
        "dict" => PyClass::Dict,
        _ => PyClass::Other,
    };
    let names = classes.iter().map(|c| if let Py::Module(m) = c.py() { Some(m) } else { None });
    isinstance_of(class, names)
}

/// The classes `isinstance`'s second argument names: itself, or the items of a tuple, nested tuples flattened
/// (`isinstance(b, (int, (A, B)))`, as Python accepts).
pub(super) fn flat_classes<V: PyValue>(class_or_tuple: &V) -> Vec<V> {
    match class_or_tuple.py() {
        Py::Tuple(items) => items.iter().flat_map(flat_classes).collect(),
        _ => vec![class_or_tuple.clone()],
    }
}

/// The builtin the generated `train` of an `nn.Module` subclass calls on each attribute.
pub use crate::frontend::ast::{BUFFER, IS_MODULE, PARAMETERS};

/// `type(v)`: the builtin type a program can name and compare (`type(lengths) == list`, `type(x) is torch.Tensor`).
fn type_of<V: PyValue>(v: &V) -> Result<&'static str, String> {
    Ok(match v.py() {
        Py::Tensor => "torch.Tensor",
        Py::Bool(_) => "bool",
        Py::Int(_) => "int",
        Py::Float => "float",
        Py::Str(_) => "str",
        Py::List(_) => "list",
        Py::Dict(_) => "dict",
        Py::Tuple(_) => {
            return Err("type() of a tuple is not supported: a torch.Size (`x.shape`) looks like a tuple here, and \
                        PyTorch's type of it is not tuple"
                .into())
        }
        _ => {
            return Err(format!(
                "type() of a {} is not supported: only of tensors, numbers known before the program runs, strings, \
                 lists and dicts",
                v.shown_type()
            ))
        }
    })
}

/// An f-string's text: its literal parts, and each field formatted by `field` (which prints a value as its
/// conversion and format spec ask).
pub fn fstring<'m, W: Walk<'m>>(
    w: &mut W,
    env: &mut W::Env,
    parts: &'m [FPart],
    field: impl Fn(&mut W, &W::V, Option<char>, &str) -> Result<String, String>,
) -> Result<W::V, W::Err> {
    let mut out = String::new();
    for p in parts {
        match p {
            FPart::Lit(s) => out.push_str(s),
            FPart::Field { value, conv, spec } => {
                let v = w.eval(env, value)?;
                out.push_str(&field(w, &v, *conv, spec).map_err(|m| Diagnostic::new(m).at(value.span))?);
            }
        }
    }
    Ok(W::V::make(Made::Str(Rc::from(out.as_str()))))
}

/// `map(func, *iterables)`: Python's `map` is lazy; every consumer here takes all of it at once, in order.
pub fn map_builtin<'m, W: Walk<'m>>(w: &mut W, a: &CallArgs<W::V>) -> Result<W::V, W::Err> {
    let span = a.span;
    let f = w.required(a, 0, "func")?.clone();
    let seqs: Vec<Vec<W::V>> = a.pos[1..].iter().map(|v| w.iterate(v, span)).collect::<Result<_, _>>()?;
    if seqs.is_empty() {
        return Err(Diagnostic::new("map() must have at least two arguments.").at(span).into());
    }
    let n = seqs.iter().map(|s| s.len()).min().unwrap_or(0);
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let args = seqs.iter().map(|s| s[i].clone()).collect();
        out.push(w.call_value(f.clone(), args, span, "map()'s function")?);
    }
    Ok(W::V::make(Made::List(out)))
}

/// How a statement ended: on to the next, out of the loop, to the loop's next iteration, or out of the function.
pub enum Flow<V> {
    Normal,
    Break,
    Continue,
    Return(V),
}

/// An engine's statements, as far as both engines walk them alike ([`exec`], [`assign`]); the engine supplies the
/// rest ([`Exec::exec_other`]: `if`, loops, `assert`, `raise`, `del`, where a condition may be known only at run
/// time or a loop becomes a term).
pub trait Exec<'m>: Walk<'m, Env = HashMap<String, <Self as Walk<'m>>::V>> {
    fn aug_assign(
        &mut self,
        env: &mut Self::Env,
        target: &'m Expr,
        op: BinOp,
        value: &'m Expr,
        span: Span,
    ) -> Result<(), Self::Err>;
    fn setitem(&mut self, obj: &Self::V, idx: &Self::V, v: &Self::V, span: Span) -> Result<(), Self::Err>;
    /// The items `a, b = v` unpacks.
    fn unpack(&mut self, v: &Self::V, span: Span) -> Result<Vec<Self::V>, Self::Err>;
    fn exec_other(&mut self, env: &mut Self::Env, s: &'m Stmt) -> Result<Flow<Self::V>, Self::Err>;
    /// A block of statements, until one ends it.
    fn block(&mut self, env: &mut Self::Env, body: &'m [Stmt]) -> Result<Flow<Self::V>, Self::Err>;
    /// `a OP= b` on values: in place on a tensor or list, else `a OP b`.
    fn inplace_binop(&mut self, a: Self::V, op: BinOp, b: Self::V, span: Span) -> Result<Self::V, Self::Err>;
    /// Name `n` is about to be bound by an assignment (see [`super::pyvalue::ParamObject`]).
    fn binding(&mut self, _n: &str) {}
    /// `e` is about to run as an expression statement (its value discarded).
    fn expression_statement(&mut self, _e: &'m Expr) {}
    /// `obj[idx] = v` where `obj` is a name bound to `o`: `Some(result)` where the engine sets the item by
    /// rebinding the name (the functional engine's selections), `None` for `setitem`.
    fn setitem_named(
        &mut self,
        _env: &mut Self::Env,
        _name: &str,
        _o: &Self::V,
        _idx: &Self::V,
        _v: &Self::V,
        _span: Span,
    ) -> Option<Result<(), Self::Err>> {
        None
    }
}

/// A `for` loop run item by item: `target` bound to each, then `body`, until a `break` or `return`.
pub fn for_items<'m, X: Exec<'m>>(
    x: &mut X,
    env: &mut X::Env,
    target: &'m Expr,
    items: impl Iterator<Item = X::V>,
    body: &'m [Stmt],
) -> Result<Flow<X::V>, X::Err> {
    for item in items {
        assign(x, env, target, item)?;
        match x.block(env, body)? {
            Flow::Break => break,
            Flow::Return(v) => return Ok(Flow::Return(v)),
            _ => {}
        }
    }
    Ok(Flow::Normal)
}

/// `p.data OP= x`: in place on the tensor `p.data` is; setting `p.data` back to it changes nothing.
/// `o.name op= value` where `o` is an object of the program file (`super::objects`): Python's `t = o.name; t =
/// t.__iop__(value); o.name = t` (in place on a tensor), the attribute written as its dict entry. `None` where `obj`
/// is not such an object (the engine's own error then).
#[allow(clippy::too_many_arguments)]
pub fn aug_assign_attribute<'m, X: Exec<'m>>(
    x: &mut X,
    env: &mut X::Env,
    obj: &'m Expr,
    name: &str,
    op: BinOp,
    value: &'m Expr,
    span: Span,
    at: Span,
) -> Result<Option<()>, X::Err> {
    let o = x.eval(env, obj)?;
    let Some(cls) = super::pyvalue::object_class(&o) else { return Ok(None) };
    let cur = super::objects::attribute(x, &o, &cls, name, at)?;
    let rhs = x.eval(env, value)?;
    let new = x.inplace_binop(cur, op, rhs, span)?;
    x.setitem(&o, &super::objects::key(name), &new, span).map(Some)
}

/// One statement, the walk both engines share (see [`Exec`]).
pub fn exec<'m, X: Exec<'m>>(x: &mut X, env: &mut X::Env, s: &'m Stmt) -> Result<Flow<X::V>, X::Err> {
    crate::limits::check().map_err(|t| Diagnostic::from(t).at(s.span))?;
    match &s.kind {
        StmtKind::Assign { targets, value } => {
            let v = x.eval(env, value)?;
            for t in targets {
                assign(x, env, t, v.clone())?;
            }
        }
        StmtKind::AugAssign { target, op, value } => x.aug_assign(env, target, *op, value, s.span)?,
        StmtKind::Expr(e) => {
            x.expression_statement(e);
            x.eval(env, e)?;
        }
        StmtKind::Return(e) => {
            let v = match e {
                Some(e) => x.eval(env, e)?,
                None => X::V::make(Made::None),
            };
            return Ok(Flow::Return(v));
        }
        StmtKind::Pass => {}
        StmtKind::Break => return Ok(Flow::Break),
        StmtKind::Continue => return Ok(Flow::Continue),
        _ => return x.exec_other(env, s),
    }
    Ok(Flow::Normal)
}

/// `o.name = v` (and `setattr(o, name, v)`): an object's attribute written as its dict entry, a tensor's attribute
/// (only `requires_grad = False`); refused on anything else.
pub fn set_attribute<'m, X: Exec<'m>>(x: &mut X, o: &X::V, name: &str, v: &X::V, span: Span) -> Result<(), X::Err> {
    if let Some(cls) = super::pyvalue::object_class(o) {
        // A property's setter (`@NAME.setter`, `C::=NAME`), else the attribute.
        let setter = format!("{cls}::={name}");
        if x.has_function(&setter) {
            let f = X::V::make(Made::Func(setter.into()));
            return x.call_value(f, vec![o.clone(), v.clone()], span, name).map(|_| ());
        }
        return x.setitem(o, &super::objects::key(name), v, span);
    }
    let refused = match o.py() {
        Py::Tensor => super::python::tensor_attr_assign(name, matches!(v.py(), Py::Bool(false))).err(),
        _ => Some(format!("assigning to attribute `{name}` is not supported")),
    };
    refused.map_or(Ok(()), |m| Err(Diagnostic::new(m).at(span).into()))
}

/// `target = v`: a name bound, a tuple or list of targets unpacked, an item set, an attribute set
/// ([`set_attribute`]).
pub fn assign<'m, X: Exec<'m>>(x: &mut X, env: &mut X::Env, target: &'m Expr, v: X::V) -> Result<(), X::Err> {
    let fail = |m: String| Err(Diagnostic::new(m).at(target.span).into());
    match &target.kind {
        ExprKind::Name(n) => {
            x.binding(n);
            env.insert(n.clone(), v);
            Ok(())
        }
        ExprKind::Tuple(ts) | ExprKind::List(ts) => {
            let mut items = x.unpack(&v, target.span)?;
            // `b, *rest = t.shape`: the starred target takes the items the others leave, as a list.
            if let Some(star) = ts.iter().position(|t| matches!(t.kind, ExprKind::Starred(_))) {
                let fixed = ts.len() - 1;
                if items.len() < fixed {
                    let m = format!("not enough values to unpack (expected at least {fixed}, got {})", items.len());
                    return fail(format!("ValueError: {m}"));
                }
                let tail = items.split_off(star + items.len() - fixed);
                let middle = items.split_off(star);
                items.push(X::V::make(Made::List(middle)));
                items.extend(tail);
            }
            if items.len() != ts.len() {
                return fail(format!("cannot unpack {} values into {} targets", items.len(), ts.len()));
            }
            for (t, item) in ts.iter().zip(items) {
                let t = match &t.kind {
                    ExprKind::Starred(inner) => inner.as_ref(),
                    _ => t,
                };
                assign(x, env, t, item)?;
            }
            Ok(())
        }
        ExprKind::Subscript(obj, idx) => {
            let o = x.eval(env, obj)?;
            let i = x.eval(env, idx)?;
            if let Some(items) = super::objects::items_of(&o) {
                return x.setitem(&items, &i, &v, target.span);
            }
            if let ExprKind::Name(n) = &obj.kind {
                if let Some(r) = x.setitem_named(env, n, &o, &i, &v, target.span) {
                    return r;
                }
            }
            x.setitem(&o, &i, &v, target.span)
        }
        ExprKind::Attr(obj, a) => {
            let o = x.eval(env, obj)?;
            if a == "grad" && matches!(o.py(), Py::Tensor) {
                return super::grads::write(x, env, &o, &v, target.span);
            }
            // `p.requires_grad = flag` on a parameter (freezing it): what its `requires_grad` reads after.
            if let (true, Py::Tensor, Py::Bool(flag)) = (a == "requires_grad", o.py(), v.py()) {
                if x.set_requires_grad(&o, flag, target.span)? {
                    return Ok(());
                }
            }
            set_attribute(x, &o, a, &v, target.span)
        }
        // (a starred target outside a tuple or list of targets; `*a, = v` is a tuple of one)
        ExprKind::Starred(_) => fail("SyntaxError: starred assignment target must be in a list or tuple".into()),
        _ => fail("unsupported assignment target".into()),
    }
}

/// `del NAME, ...`: each name unbound (a NameError for one that is not bound); other targets are refused earlier.
pub fn delete_names<V>(env: &mut HashMap<String, V>, targets: &[Expr]) -> Result<(), Diagnostic> {
    for t in targets {
        if let ExprKind::Name(n) = &t.kind {
            if env.remove(n).is_none() {
                return Err(Diagnostic::new(format!("NameError: name '{n}' is not defined")).at(t.span));
            }
        }
    }
    Ok(())
}

/// An engine's expression evaluation, as far as both engines walk the syntax alike ([`eval`]). The engine supplies
/// what differs: names, operators on its values, subscripts, attributes, calls, and the expressions whose meaning
/// depends on whether a condition is known now ([`Walk::eval_other`]: comparisons, `and`/`or`, conditional
/// expressions, comprehensions, slices).
pub trait Walk<'m> {
    type V: PyValue;
    type Env;
    type Err: From<Diagnostic>;

    fn eval(&mut self, env: &mut Self::Env, e: &'m Expr) -> Result<Self::V, Self::Err>;
    fn lookup(&mut self, env: &mut Self::Env, name: &str, span: Span) -> Result<Self::V, Self::Err>;
    fn binop(&mut self, a: &Self::V, op: BinOp, b: &Self::V, span: Span) -> Result<Self::V, Self::Err>;
    fn unop(&mut self, op: UnaryOp, v: &Self::V, span: Span) -> Result<Self::V, Self::Err>;
    fn getitem(&mut self, obj: &Self::V, idx: &Self::V, span: Span) -> Result<Self::V, Self::Err>;
    fn attribute(&mut self, obj: &Self::V, name: &str, span: Span) -> Result<Self::V, Self::Err>;
    fn items(&mut self, env: &mut Self::Env, items: &'m [Expr], call: bool) -> Result<Vec<Self::V>, Self::Err>;
    fn dict_display(&mut self, env: &mut Self::Env, items: &'m [(Expr, Expr)]) -> Result<Self::V, Self::Err>;
    fn fstring(&mut self, env: &mut Self::Env, parts: &'m [FPart]) -> Result<Self::V, Self::Err>;
    /// A call expression (`ExprKind::Call`).
    fn call(&mut self, env: &mut Self::Env, call: &'m Expr) -> Result<Self::V, Self::Err>;
    fn eval_other(&mut self, env: &mut Self::Env, e: &'m Expr) -> Result<Self::V, Self::Err>;
    /// The items a `for` loop over `v` visits.
    fn iterate(&mut self, v: &Self::V, span: Span) -> Result<Vec<Self::V>, Self::Err>;
    /// The argument at position `i` or keyword `name`, or the engine's error for a missing one.
    fn required<'a>(&self, a: &'a CallArgs<Self::V>, i: usize, name: &str) -> Result<&'a Self::V, Self::Err>;
    /// Calls a function value with positional arguments (`shown` names it in errors).
    fn call_value(&mut self, f: Self::V, pos: Vec<Self::V>, span: Span, shown: &str) -> Result<Self::V, Self::Err>;
    /// An int argument, `default` when absent.
    fn int_or(&self, a: &CallArgs<Self::V>, i: usize, name: &str, default: i64) -> Result<i64, Self::Err>;
    /// Whether the program file defines a function of this name (a class's method: `super::objects`).
    fn has_function(&self, name: &str) -> bool;
    /// `id(v)` ([`identity_number`], tensors compared as the engine tells them apart).
    fn identity(&mut self, v: &Self::V, span: Span) -> Result<i64, Self::Err>;
    /// Whether tensor `v` is one `nn.Parameter` made: `Some(requires_grad)` if so (`super::grads::Parameters`).
    fn parameter(&mut self, v: &Self::V, span: Span) -> Result<Option<bool>, Self::Err>;
    /// Sets a parameter's `requires_grad`; false where `v` is no parameter.
    fn set_requires_grad(&mut self, v: &Self::V, flag: bool, span: Span) -> Result<bool, Self::Err>;
}

/// The builtins both engines run alike: a refusal the frontend deferred to where it runs (`ast::REFUSED`), Python's
/// builtins over iterables (`sum`, `list`, `tuple`, `enumerate`, `zip`, `map`, `reversed`), and `isinstance`. None
/// for another name.
pub fn shared_builtin<'m, W: Walk<'m>>(w: &mut W, name: &str, a: &CallArgs<W::V>) -> Option<Result<W::V, W::Err>> {
    let span = a.span;
    if let (Some(o), "len") = (a.pos.first(), name) {
        if let Some(cls) = super::pyvalue::object_class(o) {
            return Some(super::objects::len(w, o, &cls, span));
        }
    }
    if name == "getattr" && a.kw.is_empty() {
        return Some(super::objects::getattr(w, &a.pos, span));
    }
    if let (Some(v), "hasattr", true) = (super::objects::hasattr(w, &a.pos), name, a.kw.is_empty()) {
        return Some(Ok(v));
    }
    if name == crate::frontend::ast::REFUSED {
        let Some(Py::Str(m)) = a.pos.first().map(|m| m.py()) else {
            unreachable!("the frontend gives a refusal its message")
        };
        return Some(Err(Diagnostic::new(m.to_string()).at(span).into()));
    }
    let list = |items| W::V::make(Made::List(items));
    let mut run = || -> Result<Option<W::V>, W::Err> {
        Ok(Some(match name {
            crate::frontend::ast::NUMPY_PROD => super::compat::numpy_prod(w, w.required(a, 0, "a")?, span)?,
            "sum" => {
                let items = w.iterate(w.required(a, 0, "iterable")?, span)?;
                let mut acc = a.get(1, "start").cloned().unwrap_or(W::V::make(Made::Int(0)));
                for it in items {
                    acc = w.binop(&acc, BinOp::Add, &it, span)?;
                }
                acc
            }
            "list" | "tuple" => {
                let items = match a.pos.first() {
                    Some(v) => w.iterate(v, span)?,
                    None => vec![],
                };
                W::V::make(if name == "list" { Made::List(items) } else { Made::Tuple(items) })
            }
            "enumerate" => {
                let items = w.iterate(w.required(a, 0, "iterable")?, span)?;
                let start = w.int_or(a, 1, "start", 0)?;
                let pair = |(i, v)| W::V::make(Made::Tuple(vec![W::V::make(Made::Int(i as i64 + start)), v]));
                list(items.into_iter().enumerate().map(pair).collect())
            }
            "zip" => {
                let seqs: Vec<Vec<W::V>> = a.pos.iter().map(|v| w.iterate(v, span)).collect::<Result<_, _>>()?;
                let n = seqs.iter().map(|s| s.len()).min().unwrap_or(0);
                list((0..n).map(|i| W::V::make(Made::Tuple(seqs.iter().map(|s| s[i].clone()).collect()))).collect())
            }
            "map" => map_builtin(w, a)?,
            // Whether `v` is a module: an instance holding `training` (the `train` that
            // `frontend::convert::classes` makes asks it of each attribute; no Python code can name it).
            IS_MODULE if a.pos.len() == 1 => {
                let v = &a.pos[0];
                let module = super::pyvalue::object_class(v)
                    .is_some_and(|c| super::objects::has_attribute(w, v, &c, "training"));
                W::V::make(Made::Bool(module))
            }
            crate::frontend::ast::IS_PARAMETER if a.pos.len() == 1 => {
                let v = &a.pos[0];
                W::V::make(Made::Bool(matches!(v.py(), Py::Tensor) && w.parameter(v, span)?.is_some()))
            }
            PARAMETERS if a.pos.len() == 6 => super::objects::parameters(w, &a.pos, span)?,
            BUFFER if a.pos.len() == 3 => super::objects::record_buffer::<W>(&a.pos),
            "isinstance" => {
                let v = w.required(a, 0, "obj")?.clone();
                let classes = w.required(a, 1, "class_or_tuple")?.clone();
                let r = match super::objects::isinstance_of_class(w, &v, &classes) {
                    Some(r) => r,
                    None => isinstance(&v, &classes),
                };
                let r = r.map_err(|m| Diagnostic::new(m).at(span))?;
                W::V::make(Made::Bool(r))
            }
            // An instance of a class of the file: the class, which its name reads as (its constructor), so that
            // `type(o) == C` and `type(o)(...)` mean what they do in Python.
            "type" if a.pos.len() == 1 && a.kw.is_empty() => match super::pyvalue::object_class(&a.pos[0]) {
                Some(c) => W::V::make(Made::Func(c)),
                None => {
                    let v = w.required(a, 0, "obj")?;
                    W::V::make(Made::Module(type_of(v).map_err(|m| Diagnostic::new(m).at(span))?))
                }
            },
            "reversed" => {
                let mut items = w.iterate(w.required(a, 0, "seq")?, span)?;
                items.reverse();
                list(items)
            }
            // An iterator is the list of what is left to visit (`next(iter(d.values()))`, `next(gen())` of a
            // generator function, which returns its list): `iter` copies the items, `next` takes the first.
            "iter" if a.pos.len() == 1 && a.kw.is_empty() => list(w.iterate(&a.pos[0], span)?),
            "next" if (1..=2).contains(&a.pos.len()) && a.kw.is_empty() => {
                let Py::List(items) = a.pos[0].py() else {
                    let m = format!("TypeError: '{}' object is not an iterator", a.pos[0].type_name());
                    return Err(Diagnostic::new(m).at(span).into());
                };
                let mut items = items.borrow_mut();
                match (items.is_empty(), a.pos.get(1)) {
                    (false, _) => items.remove(0),
                    (true, Some(default)) => default.clone(),
                    (true, None) => return Err(Diagnostic::new("StopIteration").at(span).into()),
                }
            }
            _ => return Ok(None),
        }))
    };
    run().transpose()
}

/// `o.name` (and `getattr(o, name)`): a complex tensor's, an object's (`super::objects`), or the engine's attribute.
pub fn attribute_of<'m, W: Walk<'m>>(w: &mut W, o: &W::V, name: &str, span: Span) -> Result<W::V, W::Err> {
    if o.complex_of().is_some() {
        return super::complex::attribute(w, o, name, span);
    }
    if let Some(cls) = super::pyvalue::object_class(o) {
        return super::objects::attribute(w, o, &cls, name, span);
    }
    // A class-level value read through the class, held in a name (`cfg = Config; cfg.ALPHA`): its `C::#NAME`
    // (`frontend::convert::classes`).
    if let Some(getter) = o.function_name().map(|c| format!("{c}::#{name}")).filter(|g| w.has_function(g)) {
        return w.call_value(W::V::make(Made::Func(getter.as_str().into())), vec![], span, name);
    }
    w.attribute(o, name, span)
}

/// An expression's value, the walk both engines share (see [`Walk`]).
pub fn eval<'m, W: Walk<'m>>(w: &mut W, env: &mut W::Env, e: &'m Expr) -> Result<W::V, W::Err> {
    let span = e.span;
    if let Some(v) = literal(&e.kind) {
        return Ok(v);
    }
    Ok(match &e.kind {
        ExprKind::Name(n) => w.lookup(env, n, span)?,
        ExprKind::Bin(op, a, b) => {
            let a = w.eval(env, a)?;
            let b = w.eval(env, b)?;
            if a.complex_of().is_some() || b.complex_of().is_some() {
                return super::complex::binop(w, &a, *op, &b, span);
            }
            w.binop(&a, *op, &b, span)?
        }
        ExprKind::Unary(op, a) => {
            let v = w.eval(env, a)?;
            if v.complex_of().is_some() {
                return super::complex::unop(w, *op, &v, span);
            }
            w.unop(*op, &v, span)?
        }
        ExprKind::Tuple(items) => W::V::make(Made::Tuple(w.items(env, items, false)?)),
        ExprKind::List(items) => W::V::make(Made::List(w.items(env, items, false)?)),
        ExprKind::Starred(_) => {
            return Err(Diagnostic::new("SyntaxError: can't use starred expression here").at(span).into())
        }
        ExprKind::Dict(items) => w.dict_display(env, items)?,
        ExprKind::FString(parts) => w.fstring(env, parts)?,
        ExprKind::Subscript(obj, idx) => {
            let o = w.eval(env, obj)?;
            let i = w.eval(env, idx)?;
            if o.complex_of().is_some() {
                return super::complex::getitem(w, &o, &i, span);
            }
            match super::objects::items_of(&o) {
                Some(items) => w.getitem(&items, &i, span)?,
                None => w.getitem(&o, &i, span)?,
            }
        }
        ExprKind::Attr(obj, name) => {
            let o = w.eval(env, obj)?;
            if name == "grad" && matches!(o.py(), Py::Tensor) {
                return super::grads::read(w, env, &o, span);
            }
            if name == "requires_grad" && matches!(o.py(), Py::Tensor) {
                return Ok(W::V::make(Made::Bool(w.parameter(&o, span)? == Some(true))));
            }
            return attribute_of(w, &o, name, span);
        }
        ExprKind::Call { .. } => w.call(env, e)?,
        _ => w.eval_other(env, e)?,
    })
}

/// `id(v)`: the same number for the same object and different numbers for different ones, which is what programs
/// use it for (torch.optim-style state keyed by `id(p)`). Tensors are the same object where `same_tensor` says so
/// (the view `is` compares), lists and dicts where they are one container. The numbers are not CPython's addresses:
/// they count the objects `id()` was asked for (`seen`, in the order asked), from an address-like base.
pub fn identity_number<V: PyValue>(
    seen: &mut Vec<V>,
    v: &V,
    same_tensor: impl Fn(&V, &V) -> bool,
) -> Result<i64, String> {
    let same = |a: &V, b: &V| match (a.py(), b.py()) {
        (Py::Tensor, Py::Tensor) => same_tensor(a, b),
        (Py::List(x), Py::List(y)) => std::ptr::eq(x, y),
        (Py::Dict(x), Py::Dict(y)) => std::ptr::eq(x, y),
        _ => false,
    };
    if !matches!(v.py(), Py::Tensor | Py::List(_) | Py::Dict(_)) {
        return Err(format!(
            "id() of a {} is not supported (only of tensors, lists, dicts and objects)",
            v.type_name()
        ));
    }
    let i = match seen.iter().position(|s| same(s, v)) {
        Some(i) => i,
        None => {
            seen.push(v.clone());
            seen.len() - 1
        }
    };
    Ok(140_000_000_000_000 + 64 * i as i64)
}

/// Whether some two of the tensors `v` holds (in lists, tuples and dicts, at any depth) share memory, as `shares`
/// tells: `copy.deepcopy` of `v` must then keep them sharing, which copying each tensor on its own would not.
pub fn tensors_share<V: PyValue>(v: &V, shares: impl Fn(&V, &V) -> bool) -> bool {
    let ts = tensors_in(v);
    ts.iter().enumerate().any(|(i, a)| ts[i + 1..].iter().any(|b| shares(a, b)))
}

/// The tensors `v` holds (itself, or in its tuples, lists and dicts), in order: a deep copy's are in the same order.
pub fn tensors_in<V: PyValue>(v: &V) -> Vec<V> {
    fn collect<V: PyValue>(v: &V, out: &mut Vec<V>) {
        match v.py() {
            Py::Tensor => out.push(v.clone()),
            Py::Tuple(xs) | Py::Named(xs) => xs.iter().for_each(|x| collect(x, out)),
            Py::List(xs) => xs.borrow().iter().for_each(|x| collect(x, out)),
            Py::Dict(d) => d.borrow().iter().for_each(|(_, x)| collect(x, out)),
            _ => {}
        }
    }
    let mut ts = Vec::new();
    collect(v, &mut ts);
    ts
}
