//! Instances of the classes a program file defines, for both engines. `frontend::convert::classes` turns a class
//! into functions: its constructor (named as the class), which makes a dict holding the class's name under
//! [`CLASS_KEY`] and its class-level values, then runs `__init__`; each method as `CLASS::NAME` (a property's getter
//! as `CLASS::@NAME`, a static method as `CLASS::!NAME`, called without the object). An instance is that dict, so both engines
//! track it as they track any dict (a write in one arm of an `if`, in a loop); what is an object's own is here:
//! `o.name` reads its attribute or calls its property, `o.name = v` and `o.name op= v` write the attribute, and
//! `o.name(...)` calls the attribute if the object has one, else the method with `o` first; calling an object calls
//! its `__call__` (an `nn.Module`'s `forward`), and `len(o)` its `__len__`. `getattr(v, name[, default])` and
//! `setattr(v, name, value)` are here too, for objects and every other value, and `isinstance` against the file's
//! classes.

use std::rc::Rc;

use super::pyvalue::{object_class, Made, Py, PyValue, Walk, CLASS_KEY};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::BUFFERS_KEY;

/// The key of attribute `name` in an object's dict.
pub fn key<V: PyValue>(name: &str) -> V {
    V::make(Made::Str(name.into()))
}

/// The attribute `name` of object `o`, if its dict holds it.
fn entry<V: PyValue>(o: &V, name: &str) -> Option<V> {
    let Py::Dict(d) = o.py() else { return None };
    let d = d.borrow();
    d.iter().find_map(|(k, v)| matches!(k.py(), Py::Str(s) if &**s == name && name != CLASS_KEY).then(|| v.clone()))
}

/// The builtin class an instance of a class of the file is one of: a `typing.NamedTuple`'s (its items a tuple) is a
/// tuple; any other is none.
pub fn builtin_class<V: PyValue>(o: &V) -> super::python::PyClass {
    match tuple_items(o) {
        Some(_) => super::python::PyClass::Tuple,
        None => super::python::PyClass::Other,
    }
}

/// The tuple a `typing.NamedTuple` instance holds its fields in, which `==` compares (`S(1, 2) == (1, 2)`).
pub fn tuple_items<V: PyValue>(o: &V) -> Option<V> {
    items_of(o).filter(|i| matches!(i.py(), Py::Tuple(_)))
}

/// The list of modules of an `nn.ModuleList` instance (its [`crate::frontend::ast::ITEMS_KEY`] entry), which
/// iterating and indexing the instance reach.
pub fn items_of<V: PyValue>(o: &V) -> Option<V> {
    object_class(o).and_then(|_| entry(o, crate::frontend::ast::ITEMS_KEY))
}

/// What `x in o` searches for an instance `o` of the file's classes: the list or dict of a container (a
/// ModuleList's modules, a ModuleDict's keys, a deque's items); Python's TypeError for any other object (funcfuse
/// calls no `__contains__` or `__iter__`); `o` itself where it is no instance.
pub fn membership<V: PyValue>(o: &V) -> Result<V, String> {
    let Some(cls) = object_class(o) else { return Ok(o.clone()) };
    items_of(o).ok_or_else(|| format!("TypeError: argument of type '{cls}' is not iterable"))
}

/// The name prefix of a bound method: a closure (`Closure(BOUND + "C::m", [("self", o)])`) whose call calls `C::m`
/// with `o` first.
pub const BOUND: &str = "<bound>";

/// `a == b` of two closures (`f`, `x`) and (`g`, `y`) where one is a bound method: equal where they bind one function
/// to the same objects (Python's `a.f == a.f`); `None` where neither is one.
pub fn bound_eq<'m, W: Walk<'m>>(
    w: &mut W,
    (f, x): (&str, &[(String, W::V)]),
    (g, y): (&str, &[(String, W::V)]),
    span: Span,
) -> Result<Option<bool>, W::Err> {
    if !f.starts_with(BOUND) && !g.starts_with(BOUND) {
        return Ok(None);
    }
    let mut same = f == g && x.len() == y.len();
    for ((_, p), (_, q)) in x.iter().zip(y) {
        same = same && w.identity(p, span)? == w.identity(q, span)?;
    }
    Ok(Some(same))
}

fn no_attribute(cls: &str, name: &str, span: Span) -> Diagnostic {
    Diagnostic::new(format!("AttributeError: '{cls}' object has no attribute '{name}'")).at(span)
}

/// `o.name` for an instance `o` of class `cls`: its attribute, else its class's property called on it.
pub fn attribute<'m, W: Walk<'m>>(w: &mut W, o: &W::V, cls: &str, name: &str, span: Span) -> Result<W::V, W::Err> {
    if let Some(v) = entry(o, name) {
        return Ok(v);
    }
    let getter = format!("{cls}::@{name}");
    if w.has_function(&getter) {
        return w.call_value(W::V::make(Made::Func(getter.into())), vec![o.clone()], span, name);
    }
    // A static method read through an instance: the function itself.
    let fixed = format!("{cls}::!{name}");
    if w.has_function(&fixed) {
        return Ok(W::V::make(Made::Func(fixed.into())));
    }
    // A method as a value (DETR's `loss_map = {'labels': self.loss_labels, ...}`): bound to the object.
    if w.has_function(&format!("{cls}::{name}")) {
        let f = format!("{BOUND}{cls}::{name}");
        return Ok(W::V::make(Made::Closure(f.into(), vec![("self".into(), o.clone())])));
    }
    if let Some(m) = module_dict_entry(o, cls, name) {
        return Ok(m);
    }
    Err(no_attribute(cls, name, span).into())
}

/// An `nn.ModuleDict`'s module `name`: its modules are its attributes too (minGPT's `self.transformer.wte`).
fn module_dict_entry<V: PyValue>(o: &V, cls: &str, name: &str) -> Option<V> {
    if cls != "nn·ModuleDict" {
        return None;
    }
    let items = entry(o, crate::frontend::ast::ITEMS_KEY)?;
    let Py::Dict(d) = items.py() else { return None };
    let found = d.borrow().iter().find(|(k, _)| matches!(k.py(), Py::Str(s) if &**s == name)).map(|(_, m)| m.clone());
    found
}

/// What calling `v` calls, and the object that goes first where `v` is an instance (its class's `__call__`).
pub fn callable<'m, W: Walk<'m>>(w: &W, v: W::V, span: Span) -> Result<(W::V, Option<W::V>), W::Err> {
    let Some(cls) = object_class(&v) else { return Ok((v, None)) };
    let call = format!("{cls}::__call__");
    if !w.has_function(&call) {
        return Err(Diagnostic::new(format!("TypeError: '{cls}' object is not callable")).at(span).into());
    }
    Ok((W::V::make(Made::Func(call.into())), Some(v)))
}

/// What `o.name(...)` calls for an instance `o` of class `cls`, and the object that goes first: an attribute holding
/// a callable (`self.act = torch.tanh`, a sub-module), else the method with `o` first.
pub fn method<'m, W: Walk<'m>>(
    w: &W,
    o: &W::V,
    cls: &str,
    name: &str,
    span: Span,
) -> Result<(W::V, Option<W::V>), W::Err> {
    if let Some(v) = entry(o, name) {
        return callable(w, v, span);
    }
    let m = format!("{cls}::{name}");
    if w.has_function(&m) {
        return Ok((W::V::make(Made::Func(Rc::from(m))), Some(o.clone())));
    }
    let stat = format!("{cls}::!{name}");
    if w.has_function(&stat) {
        return Ok((W::V::make(Made::Func(Rc::from(stat))), None));
    }
    if let Some(m) = module_dict_entry(o, cls, name) {
        return callable(w, m, span);
    }
    Err(no_attribute(cls, name, span).into())
}

/// `len(o)` for an instance of class `cls`: its `__len__`, else Python's TypeError.
pub fn len<'m, W: Walk<'m>>(w: &mut W, o: &W::V, cls: &str, span: Span) -> Result<W::V, W::Err> {
    let f = format!("{cls}::__len__");
    if !w.has_function(&f) {
        return Err(Diagnostic::new(format!("TypeError: object of type '{cls}' has no len()")).at(span).into());
    }
    w.call_value(W::V::make(Made::Func(f.into())), vec![o.clone()], span, "__len__")
}

/// `getattr(v, name[, default])` (`args`: the call's positional arguments; keywords are refused before): `v.name`
/// for a name known only as a string (`getattr(F, activation)`), the default where an object or a torch module lacks
/// the attribute.
pub fn getattr<'m, W: Walk<'m>>(w: &mut W, args: &[W::V], span: Span) -> Result<W::V, W::Err> {
    let error = |m: String| -> W::Err { Diagnostic::new(m).at(span).into() };
    let fail = |m: String| -> Result<W::V, W::Err> { Err(error(m)) };
    let (o, name, default) = match args {
        [o, n] => (o, n, None),
        [o, n, d] => (o, n, Some(d)),
        _ => return fail(format!("TypeError: getattr expected 2 or 3 arguments, got {}", args.len())),
    };
    let Py::Str(name) = name.py() else { return fail("TypeError: attribute name must be string".into()) };
    let name = name.to_string();
    let Some(d) = default else { return super::pywalk::attribute_of(w, o, &name, span) };
    let has = match (object_class(o), o.py()) {
        (Some(cls), _) => has_attribute(w, o, &cls, &name),
        (None, Py::Module(m)) => super::python::hasattr(super::python::AttrOwner::Module(m), &name).map_err(error)?,
        _ => return fail(format!("getattr() with a default on a value of type {} is not supported", o.type_name())),
    };
    if has {
        super::pywalk::attribute_of(w, o, &name, span)
    } else {
        Ok(d.clone())
    }
}

/// Whether instance `o` of class `cls` has attribute `name`: its own, a property, a method or a static method.
pub fn has_attribute<'m, W: Walk<'m>>(w: &W, o: &W::V, cls: &str, name: &str) -> bool {
    entry(o, name).is_some() || ["@", "", "!"].iter().any(|k| w.has_function(&format!("{cls}::{k}{name}")))
}

/// `hasattr(o, name)` for an instance `o`: `None` where `o` is not one (the engines answer for other values).
pub fn hasattr<'m, W: Walk<'m>>(w: &W, args: &[W::V]) -> Option<W::V> {
    let [o, name] = args else { return None };
    let (Some(cls), Py::Str(name)) = (object_class(o), name.py()) else { return None };
    Some(W::V::make(Made::Bool(has_attribute(w, o, &cls, name))))
}

/// `setattr(o, name, v)`, also with a name known only as a string (ConvLSTM's `setattr(self, 'cell{}'.format(i),
/// cell)`): `o.name = v` ([`super::pywalk::set_attribute`]). `None` for another number of arguments (the engine's
/// error).
pub fn setattr<'m, W: super::pywalk::Exec<'m>>(w: &mut W, args: &[W::V], span: Span) -> Option<Result<W::V, W::Err>> {
    let [o, name, v] = args else { return None };
    let Py::Str(name) = name.py() else {
        let m = format!("TypeError: attribute name must be string, not '{}'", name.type_name());
        return Some(Err(Diagnostic::new(m).at(span).into()));
    };
    Some(super::pywalk::set_attribute(w, o, name, v, span).map(|()| W::V::make(Made::None)))
}

/// `isinstance(v, C)` where `C` (or an item of a tuple of classes) is a class of the program file: whether `v` is an
/// instance of `C` or of a class derived from it (`frontend::convert::classes` gives each class a function
/// `CLASS::^A` per class `A` it is). `None` where no class of the file is asked about; a tuple that mixes them with
/// builtin types asks about those too.
pub fn isinstance_of_class<'m, W: Walk<'m>>(w: &W, v: &W::V, class_or_tuple: &W::V) -> Option<Result<bool, String>> {
    let items = super::pywalk::flat_classes(class_or_tuple);
    let is_class = |c: &W::V| c.function_name().is_some_and(|n| w.has_function(&format!("{n}::^{n}")));
    if !items.iter().any(is_class) {
        return None;
    }
    let of = object_class(v);
    let mine = items.iter().filter(|c| is_class(c)).any(|c| {
        let name = c.function_name().expect("a class");
        of.as_ref().is_some_and(|o| w.has_function(&format!("{o}::^{name}")))
    });
    let rest: Vec<W::V> = items.into_iter().filter(|c| !is_class(c)).collect();
    match rest.is_empty() {
        true => Some(Ok(mine)),
        false => Some(super::pywalk::isinstance(v, &W::V::make(Made::Tuple(rest))).map(|b| mine || b)),
    }
}

/// `PARAMETERS(module, recurse, named, prefix, remove_duplicate, kind)` (the generated `parameters()`,
/// `named_parameters()`, `buffers()`, `named_buffers()` and `state_dict()` of an `nn.Module` subclass,
/// `frontend::convert::classes`): as PyTorch orders them, the module's own parameters (its tensor attributes that
/// `nn.Parameter` made, in the order of their first assignment) and buffers (`register_buffer`'s, in their order),
/// then each sub-module's, depth first in the order they were assigned (a container's modules, under their index or
/// key); a list of tensors, or of `(name, tensor)` pairs, each tensor once unless duplicates are asked for. `kind` is
/// `"parameters"`, `"buffers"`, `"state"` (the parameters, then the persistent buffers: a state dict's entries) or
/// `"children"` (the module's own sub-modules, as `(name, module)` pairs).
pub fn parameters<'m, W: Walk<'m>>(w: &mut W, args: &[W::V], span: Span) -> Result<W::V, W::Err> {
    let flag = |v: &W::V| matches!(v.py(), Py::Bool(true));
    let (recurse, named, dedupe) = (flag(&args[1]), flag(&args[2]), flag(&args[4]));
    let kind = match args[5].py() {
        Py::Str(s) => s.to_string(),
        _ => unreachable!("the generated methods pass the kind"),
    };
    let prefix = if let Py::Str(s) = args[3].py() { s.to_string() } else { String::new() };
    let mut found: Vec<(String, W::V, i64)> = Vec::new();
    let mut stack = vec![(prefix, args[0].clone())];
    let mut visited: Vec<i64> = Vec::new();
    while let Some((at, module)) = stack.pop() {
        // A sub-module reachable twice is walked twice for a state dict (each of its names has entries), once
        // otherwise.
        let id = w.identity(&module, span)?;
        if visited.contains(&id) && kind != "state" {
            continue;
        }
        visited.push(id);
        if visited.len() > 1 << 16 {
            return Err(Diagnostic::new("state_dict(): a module holds itself (RecursionError in PyTorch)")
                .at(span)
                .into());
        }
        let entries: Vec<(W::V, W::V)> = match module.py() {
            Py::Dict(d) => d.borrow().clone(),
            _ => Vec::new(),
        };
        let name_of = |k: &str| if at.is_empty() { k.to_string() } else { format!("{at}.{k}") };
        let mut children = Vec::new();
        let mut own = Vec::new();
        for (k, v) in &entries {
            let Py::Str(k) = k.py() else { continue };
            let buffer = buffer_names(&entries).into_iter().find(|(b, _)| b == &**k);
            let wanted = match (kind.as_str(), &buffer) {
                ("buffers", Some(_)) | ("state", Some((_, true))) => true,
                ("parameters" | "state", None) => matches!(v.py(), Py::Tensor) && w.parameter(v, span)?.is_some(),
                _ => false,
            };
            if &**k == crate::frontend::ast::ITEMS_KEY && matches!(kind.as_str(), "parameters" | "state") {
                // An `nn.ParameterList`'s parameters, under their index.
                let items = match v.py() {
                    Py::List(l) => l.borrow().clone(),
                    _ => Vec::new(),
                };
                for (i, p) in items.into_iter().enumerate() {
                    if matches!(p.py(), Py::Tensor) && w.parameter(&p, span)?.is_some() {
                        own.push((i.to_string(), p, false));
                    }
                }
            }
            if wanted {
                own.push((k.to_string(), v.clone(), buffer.is_some()));
            } else if !matches!(v.py(), Py::Tensor | Py::None) || buffer.is_none() {
                collect_children(w, k, v, &name_of, &mut children);
            }
        }
        if kind == "children" {
            // The module's own sub-modules, each once (a stateless module, a closure, is always another).
            let mut pairs = Vec::new();
            let mut ids = Vec::new();
            for (n, m) in children {
                if object_class(&m).is_some() {
                    let id = w.identity(&m, span)?;
                    if ids.contains(&id) {
                        continue;
                    }
                    ids.push(id);
                }
                pairs.push(W::V::make(Made::Tuple(vec![W::V::make(Made::Str(n.into())), m])));
            }
            return Ok(W::V::make(Made::List(pairs)));
        }
        // Stateless modules hold nothing to walk.
        children.retain(|(_, m)| object_class(m).is_some());
        // A module's parameters come before its buffers.
        own.sort_by_key(|(_, _, is_buffer)| *is_buffer);
        for (k, v, _) in own {
            if !matches!(v.py(), Py::Tensor) {
                continue;
            }
            let id = w.identity(&v, span)?;
            if !dedupe || !found.iter().any(|(_, _, i)| *i == id) {
                found.push((name_of(&k), v, id));
            }
        }
        if recurse {
            // Depth first, in order: the first child on top of the stack.
            stack.extend(children.into_iter().rev());
        }
    }
    let items = found
        .into_iter()
        .map(|(n, v, _)| if named { W::V::make(Made::Tuple(vec![W::V::make(Made::Str(n.into())), v])) } else { v })
        .collect();
    Ok(W::V::make(Made::List(items)))
}

/// The buffers `register_buffer` recorded among an object's entries (`ast::BUFFERS_KEY`): each name with whether it
/// is persistent.
fn buffer_names<V: PyValue>(entries: &[(V, V)]) -> Vec<(String, bool)> {
    let Some((_, list)) = entries.iter().find(|(k, _)| matches!(k.py(), Py::Str(s) if &**s == BUFFERS_KEY)) else {
        return Vec::new();
    };
    let Py::List(l) = list.py() else { return Vec::new() };
    let pairs = l.borrow();
    pairs
        .iter()
        .filter_map(|p| match p.py() {
            Py::Tuple([n, b]) => match (n.py(), b.py()) {
                (Py::Str(n), Py::Bool(b)) => Some((n.to_string(), b)),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The sub-modules an entry `k` holding `v` adds, under their names: `v` itself if it is a module, or a
/// container's modules (`ast::ITEMS_KEY`) under their index or key.
fn collect_children<'m, W: Walk<'m>>(
    w: &W,
    k: &str,
    v: &W::V,
    name_of: &dyn Fn(&str) -> String,
    children: &mut Vec<(String, W::V)>,
) {
    if k == crate::frontend::ast::ITEMS_KEY {
        let items: Vec<(String, W::V)> = match v.py() {
            Py::List(l) => l.borrow().iter().enumerate().map(|(i, m)| (i.to_string(), m.clone())).collect(),
            Py::Dict(d) => d
                .borrow()
                .iter()
                .filter_map(|(k, m)| if let Py::Str(k) = k.py() { Some((k.to_string(), m.clone())) } else { None })
                .collect(),
            _ => Vec::new(),
        };
        let modules = items.into_iter().filter(|(_, m)| object_class(m).is_some() || stateless_module(m));
        children.extend(modules.map(|(k, m)| (name_of(&k), m)));
    } else if object_class(v).is_some_and(|c| has_attribute(w, v, &c, "training")) || stateless_module(v) {
        children.push((name_of(k), v.clone()));
    }
}

/// Whether `v` is a stateless `torch.nn` module (`nn.ReLU()`, `nn.Softmax(dim=1)`): a closure over the function its
/// `forward` calls (`compat::nn_module`), which PyTorch lists among a module's children.
fn stateless_module<V: PyValue>(v: &V) -> bool {
    v.closure_name().is_some_and(|n| n.contains('.') && !n.starts_with(BOUND) && !n.starts_with('<'))
}

/// `BUFFER(module, name, persistent)` (the generated `register_buffer`, after it set the attribute): records `name`
/// as a buffer of the module (`ast::BUFFERS_KEY`), for `buffers()` and `state_dict()`.
pub fn record_buffer<'m, W: Walk<'m>>(args: &[W::V]) -> W::V {
    if let (Py::Dict(d), Py::Str(name)) = (args[0].py(), args[1].py()) {
        let persistent = matches!(args[2].py(), Py::Bool(true));
        let entry =
            W::V::make(Made::Tuple(vec![W::V::make(Made::Str(name.clone())), W::V::make(Made::Bool(persistent))]));
        let key = |k: &W::V| matches!(k.py(), Py::Str(s) if &**s == BUFFERS_KEY);
        let existing = d.borrow().iter().find(|(k, _)| key(k)).map(|(_, v)| v.clone());
        match existing.as_ref().map(|v| v.py()) {
            Some(Py::List(l)) => {
                let mut l = l.borrow_mut();
                l.retain(|p| !matches!(p.py(), Py::Tuple([n, _]) if matches!(n.py(), Py::Str(s) if s == name)));
                l.push(entry);
            }
            _ => d.borrow_mut().push((W::V::make(Made::Str(BUFFERS_KEY.into())), W::V::make(Made::List(vec![entry])))),
        }
    }
    W::V::make(Made::None)
}

/// The list of modules of an `nn.ModuleList` or `nn.Sequential` instance `v` (its [`crate::frontend::ast::ITEMS_KEY`]
/// entry): what `modules += [a, b]` extends in place (loudinthecloud/pytorch-ntm's `heads += [...]`).
pub fn module_sequence_items<V: PyValue>(v: &V) -> Option<V> {
    let class = object_class(v)?;
    if !matches!(&*class, "nn·ModuleList" | "nn·Sequential") {
        return None;
    }
    let Py::Dict(d) = v.py() else { return None };
    let d = d.borrow();
    let items = d.iter().find(|(k, _)| matches!(k.py(), Py::Str(s) if &**s == crate::frontend::ast::ITEMS_KEY));
    items.map(|(_, l)| l.clone()).filter(|l| matches!(l.py(), Py::List(_)))
}
