//! The Python layer both engines share: the reference interpreter's values ([`Value`]) and the functionalizer's
//! (`functionalize::state::FV`, which also has values known only when the program runs) are both [`PyValue`]s, seen
//! through one borrowed view ([`Py`]) and built through one constructor ([`Made`]). What Python does with the values
//! both have (literals, the builtin names, sequence arithmetic, `dict(...)`, `*` in displays and calls, `is`, `in`,
//! equality of kinds and of sequences, the expression walk itself) is written here once, over that view; each engine
//! keeps only what differs (run-time values, tensors as terms or as data, conditions known only at run time).

use std::cell::RefCell;
use std::rc::Rc;

use super::args::CallArgs;
use super::value::Value;
use crate::diag::Diagnostic;
use crate::diag::Span;
use crate::frontend::ast::{BinOp, CmpOp, Expr, ExprKind, FPart, Stmt, StmtKind, UnaryOp};
use crate::tensor::DType;

/// A value's Python kind, borrowed: the kinds both engines have, with their contents where Python reads them.
pub enum Py<'a, V> {
    None,
    Bool(bool),
    Int(i64),
    Float,
    Str(&'a Rc<str>),
    DType(DType),
    Device,
    Ellipsis,
    Module(&'static str),
    Range,
    Tuple(&'a [V]),
    /// A named tuple (`torch.return_types.max`).
    Named(&'a [V]),
    List(&'a RefCell<Vec<V>>),
    Dict(&'a RefCell<Vec<(V, V)>>),
    /// A slice, a tensor: kinds both engines have, with contents of engine-specific types.
    Slice,
    Tensor,
    /// A function: a closure has the values it captured.
    Function(Option<&'a [(String, V)]>),
    /// An engine's own kind (a value known only when the program runs).
    Other,
}

/// A value to build: the kinds [`PyValue::make`] can make in either engine.
pub enum Made<V> {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Rc<str>),
    Ellipsis,
    Tuple(Vec<V>),
    List(Vec<V>),
    Dict(Vec<(V, V)>),
}

/// A Python value of one engine.
pub trait PyValue: Clone + Sized {
    fn py(&self) -> Py<'_, Self>;
    fn make(m: Made<Self>) -> Self;
    /// The type name of an engine's own kind ([`Py::Other`]), as errors print it.
    fn other_type_name(&self) -> &'static str;

    /// Python's name of the value's type, as errors print it.
    fn type_name(&self) -> &'static str {
        match self.py() {
            Py::None => "NoneType",
            Py::Bool(_) => "bool",
            Py::Int(_) => "int",
            Py::Float => "float",
            Py::Str(_) => "str",
            Py::DType(_) => "torch.dtype",
            Py::Device => "torch.device",
            Py::Ellipsis => "ellipsis",
            Py::Module(_) => "module",
            Py::Range => "range",
            Py::Tuple(_) | Py::Named(_) => "tuple",
            Py::List(_) => "list",
            Py::Dict(_) => "dict",
            Py::Slice => "slice",
            Py::Tensor => "Tensor",
            Py::Function(_) => "function",
            Py::Other => self.other_type_name(),
        }
    }

    /// The items of a tuple or list, copied.
    fn items(&self) -> Option<Vec<Self>> {
        match self.py() {
            Py::Tuple(v) | Py::Named(v) => Some(v.to_vec()),
            Py::List(v) => Some(v.borrow().clone()),
            _ => None,
        }
    }
}

/// The value a builtin name denotes when no binding shadows it: a module, or a builtin type (`isinstance(n, int)`;
/// calls to them are builtins).
pub fn builtin_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "torch" => "torch",
        "F" => "torch.nn.functional",
        "nn" => "torch.nn",
        "math" => "math",
        "itertools" => "itertools",
        "copy" => "copy",
        "functools" => "functools",
        "Tensor" => "torch.Tensor",
        "int" => "int",
        "float" => "float",
        "bool" => "bool",
        "str" => "str",
        "tuple" => "tuple",
        "list" => "list",
        "dict" => "dict",
        _ => return None,
    })
}

/// A literal's value (`1`, `2.5`, `True`, `None`, `...`, `"s"`); None for any other expression.
pub fn literal<V: PyValue>(kind: &ExprKind) -> Option<V> {
    Some(V::make(match kind {
        ExprKind::Int(i) => Made::Int(*i),
        ExprKind::Float(f) => Made::Float(*f),
        ExprKind::Bool(b) => Made::Bool(*b),
        ExprKind::NoneLit => Made::None,
        ExprKind::Ellipsis => Made::Ellipsis,
        ExprKind::Str(s) => Made::Str(Rc::from(s.as_str())),
        _ => return None,
    }))
}

/// Python's arithmetic on sequences: `+` of two tuples, lists or strings, and a tuple, list or string times an int
/// (a negative count gives an empty one). None where the operands are not that.
pub fn sequence_binop<V: PyValue>(a: &V, op: BinOp, b: &V) -> Option<V> {
    let times = |n: i64, len: usize| len * n.max(0) as usize;
    Some(V::make(match (a.py(), b.py(), op) {
        (Py::Tuple(x), Py::Tuple(y), BinOp::Add) => Made::Tuple(x.iter().chain(y).cloned().collect()),
        (Py::List(x), Py::List(y), BinOp::Add) => {
            Made::List(x.borrow().iter().chain(y.borrow().iter()).cloned().collect())
        }
        (Py::List(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::List(x), BinOp::Mul) => {
            let items = x.borrow();
            Made::List(items.iter().cycle().take(times(n, items.len())).cloned().collect())
        }
        (Py::Tuple(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::Tuple(x), BinOp::Mul) => {
            Made::Tuple(x.iter().cycle().take(times(n, x.len())).cloned().collect())
        }
        (Py::Str(x), Py::Str(y), BinOp::Add) => Made::Str(format!("{x}{y}").into()),
        (Py::Str(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::Str(x), BinOp::Mul) => {
            Made::Str(x.repeat(n.max(0) as usize).into())
        }
        _ => return None,
    }))
}

/// `dict(**kw)` or `dict(d, **kw)`: a new dict, the keywords (string keys) after `d`'s entries, a keyword replacing
/// an entry of the same key.
pub fn dict_call<V: PyValue>(pos: &[V], kw: &[(String, V)]) -> Result<V, String> {
    let mut out: Vec<(V, V)> = match pos {
        [] => vec![],
        [d] => match d.py() {
            Py::Dict(d) => d.borrow().clone(),
            _ => return Err(format!("dict() is supported with a dict and keyword arguments, not a {}", d.type_name())),
        },
        more => return Err(format!("dict expected at most 1 argument, got {}", more.len())),
    };
    for (k, v) in kw {
        let same = |x: &V| matches!(x.py(), Py::Str(s) if s.as_ref() == k.as_str());
        match out.iter_mut().find(|(x, _)| same(x)) {
            Some(slot) => slot.1 = v.clone(),
            None => out.push((V::make(Made::Str(k.as_str().into())), v.clone())),
        }
    }
    Ok(V::make(Made::Dict(out)))
}

/// What `*v` spreads in a call's arguments or a display: a dict's keys, or the items of something iterable (the
/// engine iterates it), or an error in Python's words.
pub enum Spread<V> {
    Keys(Vec<V>),
    Iterate,
}

pub fn spread<V: PyValue>(v: &V, call: bool) -> Result<Spread<V>, String> {
    match v.py() {
        Py::Dict(d) => Ok(Spread::Keys(d.borrow().iter().map(|(k, _)| k.clone()).collect())),
        Py::Range | Py::Tensor | Py::Tuple(_) | Py::List(_) | Py::Named(_) => Ok(Spread::Iterate),
        _ if call => Err(format!("TypeError: Value after * must be an iterable, not {}", v.type_name())),
        _ => Err(format!("TypeError: '{}' object is not iterable", v.type_name())),
    }
}

/// `a is b` / `a is not b` where Python's identity is decided by the kinds (None, bools); `same_tensor` says whether
/// two tensors are the same one. An error for other kinds, which no program here compares by identity.
pub fn identity<V: PyValue>(a: &V, op: CmpOp, b: &V, same_tensor: impl Fn(&V, &V) -> bool) -> Result<bool, String> {
    let same = match (a.py(), b.py()) {
        (Py::None, Py::None) => true,
        (Py::None, _) | (_, Py::None) => false,
        (Py::Bool(x), Py::Bool(y)) => x == y,
        (Py::Tensor, Py::Tensor) => same_tensor(a, b),
        _ => return Err("`is` is only supported for None, bools and tensors".into()),
    };
    Ok(same == (op == CmpOp::Is))
}

/// Equality of values compared by kind: strings, dtypes, devices and None (a string is never a dtype or a device).
/// None where the kinds are not these.
pub fn kind_eq<V: PyValue>(a: &V, b: &V) -> Option<bool> {
    match (a.py(), b.py()) {
        (Py::Str(x), Py::Str(y)) => Some(x == y),
        (Py::DType(x), Py::DType(y)) => Some(x == y),
        (Py::Device, Py::Device) | (Py::None, Py::None) => Some(true),
        (Py::Str(_) | Py::DType(_) | Py::Device, Py::Str(_) | Py::DType(_) | Py::Device) => Some(false),
        _ => None,
    }
}

/// `needle in hay` for a string or a sequence; `eq` compares the needle with one item (None: the engine cannot tell
/// now, which is then an error of its own). Dicts are the engines' own (their keys compare by engine rules).
pub fn contains<V: PyValue, E: From<Diagnostic>>(
    needle: &V,
    hay: &V,
    span: Span,
    mut eq: impl FnMut(&V, &V) -> Result<bool, E>,
) -> Result<bool, E> {
    let fail = |m: String| Err(Diagnostic::new(m).at(span).into());
    if let Py::Str(h) = hay.py() {
        return match needle.py() {
            Py::Str(n) => Ok(h.contains(&**n)),
            _ => fail(super::python::str_in_needs_str(needle.type_name())),
        };
    }
    let Some(items) = hay.items() else {
        return fail(super::python::in_needs_container(hay.type_name()));
    };
    for it in &items {
        if eq(needle, it)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// `==` of two tuples or lists: equal lengths and equal items in order (`eq` compares two items). None where they
/// are not both sequences.
pub fn sequences_eq<V: PyValue, E>(
    a: &V,
    b: &V,
    mut eq: impl FnMut(&V, &V) -> Result<bool, E>,
) -> Option<Result<bool, E>> {
    let (x, y) = (a.items()?, b.items()?);
    if x.len() != y.len() {
        return Some(Ok(false));
    }
    for (p, q) in x.iter().zip(&y) {
        match eq(p, q) {
            Ok(true) => {}
            other => return Some(other),
        }
    }
    Some(Ok(true))
}

/// Whether `v` is, or holds (in a list, tuple, dict value or a closure's captured values), a value `is_it` picks.
pub fn holds<V: PyValue>(v: &V, is_it: &impl Fn(&V) -> bool) -> bool {
    if is_it(v) {
        return true;
    }
    match v.py() {
        Py::Dict(d) => d.borrow().iter().any(|(_, x)| holds(x, is_it)),
        Py::Function(Some(captured)) => captured.iter().any(|(_, x)| holds(x, is_it)),
        _ => v.items().is_some_and(|items| items.iter().any(|x| holds(x, is_it))),
    }
}

/// Where `X.squeeze_(...)` / `X.unsqueeze_(...)` (`name`) may run, the tensor value whose shape it changes: the
/// local name `local`'s, or the temporary `first` (the method's receiver). Refused, with the reason, where another
/// name, list, dict, constant or the caller may hold the same tensor object (PyTorch would change the shape seen
/// there too): anything in a helper (`depth` > 1); a program parameter's own object; a tensor that another binding
/// holds (`same` tells two tensor values apart as the engine can).
#[allow(clippy::too_many_arguments)]
pub fn shape_inplace_target<V: PyValue>(
    name: &str,
    local: Option<&String>,
    first: Option<&V>,
    depth: usize,
    env: &std::collections::HashMap<String, V>,
    consts: &std::collections::HashMap<String, V>,
    entry_args: &[V],
    same: impl Fn(&V, &V) -> bool,
) -> Result<V, String> {
    let base = &name[..name.len() - 1];
    let refuse = |why: &str| Err(format!("`{name}` {why}; rebind instead (`x = x.{base}(...)`)"));
    // In a helper, the caller may hold the tensor even where nothing of the helper's does (`xs.pop()` of the
    // caller's list), so neither a name nor a temporary is changed there.
    if depth > 1 {
        return refuse("inside a helper function is not supported (the caller may hold the same tensor)");
    }
    let is_tensor = |v: &&V| matches!(v.py(), Py::Tensor);
    let t = match (local, first) {
        (Some(n), _) => match env.get(n).filter(is_tensor) {
            Some(t) => t.clone(),
            None => return refuse("on a name that is not a local tensor is not supported"),
        },
        (None, Some(t)) if is_tensor(&t) => t.clone(),
        (None, _) => return refuse("on a value that is not a tensor is not supported"),
    };
    let is_t = |v: &V| matches!(v.py(), Py::Tensor) && same(v, &t);
    let other = |k: &String| local != Some(k);
    let shared = env.iter().filter(|(k, v)| other(k) && is_tensor(v) && is_t(v));
    if let Some(k) = shared.map(|(k, _)| k).min() {
        return refuse(&match local {
            Some(_) => "on a tensor that another name also refers to is not supported (PyTorch would change the shape seen through both)".to_string(),
            None => format!("on a temporary with the storage and shape of `{k}` is not supported (it may be the same tensor object, whose shape PyTorch would change)"),
        });
    }
    if env.values().any(|v| !is_tensor(&v) && holds(v, &is_t)) || consts.values().any(|v| holds(v, &is_t)) {
        return refuse("on a tensor that a list or tuple (or a dict or constant) also holds is not supported (PyTorch would change the shape seen through both)");
    }
    if depth == 1 && entry_args.iter().any(|v| holds(v, &is_t)) {
        return refuse("on a program parameter is not supported (PyTorch would change the shape the caller sees)");
    }
    Ok(t)
}

/// A torch function's `out=` keyword, taken out of `kw` where the function (`m.name`, with `pos` its positional
/// arguments) is one whose result `out=` receives: the kind of write and the `out` value.
pub fn out_keyword<V: PyValue>(
    m: &str,
    name: &str,
    pos: &[V],
    kw: &mut Vec<(String, V)>,
) -> Option<(super::out_arg::OutKind, V)> {
    let has_dim = pos.len() > 1 || kw.iter().any(|(k, _)| k == "dim");
    let binary = matches!(pos.get(1).map(|v| v.py()), Some(Py::Tensor));
    let kind = super::out_arg::out_kind(name, has_dim, binary).filter(|_| m == "torch")?;
    let k = kw.iter().position(|(k, _)| k == "out")?;
    Some((kind, kw.remove(k).1))
}

/// The tensors among a call's arguments, and in the lists and tuples among them (the inputs an `out=` may overlap).
pub fn tensor_arguments<V: PyValue>(pos: &[V], kw: &[(String, V)]) -> Vec<V> {
    let is_tensor = |v: &V| matches!(v.py(), Py::Tensor);
    let mut out = Vec::new();
    for v in pos.iter().chain(kw.iter().map(|(_, v)| v)) {
        match is_tensor(v) {
            true => out.push(v.clone()),
            false => out.extend(v.items().unwrap_or_default().into_iter().filter(is_tensor)),
        }
    }
    out
}

/// `einsum`'s equation and operands (given one by one, or as one list or tuple), checked to be a string and
/// tensors (`tensor` takes a tensor value's contents).
pub fn einsum_operands<V: PyValue, T>(
    equation: &V,
    pos: &[V],
    tensor: impl Fn(V) -> Option<T>,
) -> Result<(String, Vec<T>), String> {
    let Py::Str(eq) = equation.py() else {
        return Err(format!("einsum(): argument 'equation' must be str, not {}", equation.type_name()));
    };
    let rest: Vec<V> = match (pos.len(), pos.get(1).and_then(|v| v.items())) {
        (2, Some(items)) => items,
        _ => pos.get(1..).unwrap_or(&[]).to_vec(),
    };
    let mut slots = Vec::with_capacity(rest.len());
    for v in rest {
        let name = v.type_name();
        slots.push(tensor(v).ok_or_else(|| format!("einsum(): expected Tensor operands, got {name}"))?);
    }
    Ok((eq.to_string(), slots))
}

/// A field of a named tuple (`torch.max(x, 0).values`) by its name.
pub fn named_field<V: Clone>(items: &[V], names: &[&str], name: &str) -> Result<V, String> {
    match names.iter().position(|n| *n == name) {
        Some(i) => Ok(items[i].clone()),
        None => Err(format!("result has no attribute `{name}`")),
    }
}

/// A call of `m.name(...)` on a module (`callee`) that both engines answer before dispatching it: complex-number
/// functions are refused by name, and run-mode predicates (`torch.is_grad_enabled()`, ...) are False, taking no
/// arguments. None for any other call.
pub fn answered_call<V: PyValue>(callee: &V, name: &str, pos: &[V], kw: &[(String, V)]) -> Option<Result<V, String>> {
    let Py::Module(m) = callee.py() else { return None };
    if m == "torch" {
        if let Some(why) = super::python::complex_refusal(name) {
            return Some(Err(why));
        }
    }
    if super::python::run_mode_predicate(&format!("{m}.{name}")) {
        return Some(match pos.is_empty() && kw.is_empty() {
            true => Ok(V::make(Made::Bool(false))),
            false => Err(format!("{m}.{name}() takes no arguments")),
        });
    }
    None
}

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
    match &e.kind {
        ExprKind::Name(n) if exception(n) => Diagnostic::new(n.clone()).at(span).into(),
        ExprKind::Call { func, args, kwargs }
            if kwargs.is_empty() && matches!(&func.kind, ExprKind::Name(n) if exception(n)) =>
        {
            let ExprKind::Name(n) = &func.kind else { unreachable!("matched above") };
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
        _ => Diagnostic::new(format!("raise: unsupported exception (use one of {})", EXCEPTIONS.join(", ")))
            .at(e.span)
            .into(),
    }
}

/// A call's arguments, evaluated in order: positional ones with `*` spread, keyword ones with `**` spread. A
/// nested function's captures (`MAKE_CLOSURE`'s keywords) must be bound where it is made.
pub fn call_arguments<'m, W: Walk<'m, Env = std::collections::HashMap<String, <W as Walk<'m>>::V>>>(
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

/// `isinstance(v, class_or_tuple)` for the classes a program can name; a value known only at run time has its
/// class now (its type name is the class's).
pub fn isinstance<V: PyValue>(v: &V, class_or_tuple: &V) -> Result<bool, String> {
    use super::python::{isinstance_of, PyClass};
    let classes = match class_or_tuple.py() {
        Py::Tuple(items) => items.to_vec(),
        _ => vec![class_or_tuple.clone()],
    };
    let class = match v.type_name() {
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

/// `itertools.product(*iterables, repeat=)` (the only `itertools` function here): the list of tuples. `repeat`
/// must be an int (the functionalizer first refuses one known only at run time).
pub fn itertools<'m, W: Walk<'m>>(
    w: &mut W,
    name: &str,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: Span,
) -> Result<W::V, W::Err> {
    let fail = |m: String| -> W::Err { Diagnostic::new(m).at(span).into() };
    if name != "product" {
        return Err(fail(crate::frontend::torch_api::unsupported_itertools(name)));
    }
    let mut repeat = 1;
    for (k, v) in kw {
        match (k.as_str(), v.py()) {
            ("repeat", Py::Int(r)) => repeat = r,
            ("repeat", _) => {
                return Err(fail(format!("'{}' object cannot be interpreted as an integer", v.type_name())))
            }
            _ => return Err(fail(format!("product() got an unexpected keyword argument '{k}'"))),
        }
    }
    let seqs = pos.iter().map(|v| w.iterate(v, span)).collect::<Result<Vec<_>, _>>()?;
    let combos = super::python::cartesian_product(&seqs, repeat).map_err(fail)?;
    Ok(W::V::make(Made::List(combos.into_iter().map(|c| W::V::make(Made::Tuple(c))).collect())))
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
pub trait Exec<'m>: Walk<'m, Env = std::collections::HashMap<String, <Self as Walk<'m>>::V>> {
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
pub fn aug_assign_data<'m, X: Exec<'m>>(
    x: &mut X,
    env: &mut X::Env,
    target: &'m Expr,
    op: BinOp,
    value: &'m Expr,
    span: Span,
) -> Result<(), X::Err> {
    let cur = x.eval(env, target)?;
    if !matches!(cur.py(), Py::Tensor) {
        let m = format!("'{}' object has no attribute 'data'", cur.type_name());
        return Err(Diagnostic::new(m).at(target.span).into());
    }
    let rhs = x.eval(env, value)?;
    x.inplace_binop(cur, op, rhs, span).map(|_| ())
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

/// `target = v`: a name bound, a tuple or list of targets unpacked, an item set, a tensor's attribute (only
/// `requires_grad = False`).
pub fn assign<'m, X: Exec<'m>>(x: &mut X, env: &mut X::Env, target: &'m Expr, v: X::V) -> Result<(), X::Err> {
    let fail = |m: String| Err(Diagnostic::new(m).at(target.span).into());
    match &target.kind {
        ExprKind::Name(n) => {
            env.insert(n.clone(), v);
            Ok(())
        }
        ExprKind::Tuple(ts) | ExprKind::List(ts) => {
            let items = x.unpack(&v, target.span)?;
            if items.len() != ts.len() {
                return fail(format!("cannot unpack {} values into {} targets", items.len(), ts.len()));
            }
            for (t, item) in ts.iter().zip(items) {
                assign(x, env, t, item)?;
            }
            Ok(())
        }
        ExprKind::Subscript(obj, idx) => {
            let o = x.eval(env, obj)?;
            let i = x.eval(env, idx)?;
            x.setitem(&o, &i, &v, target.span)
        }
        ExprKind::Attr(obj, a) => match x.eval(env, obj)?.py() {
            Py::Tensor => super::python::tensor_attr_assign(a, matches!(v.py(), Py::Bool(false))).or_else(fail),
            _ => fail(format!("assigning to attribute `{a}` is not supported")),
        },
        ExprKind::Starred(_) => fail("starred assignment targets (`a, *b = ...`) are not supported".into()),
        _ => fail("unsupported assignment target".into()),
    }
}

/// `del NAME, ...`: each name unbound (a NameError for one that is not bound); other targets are refused earlier.
pub fn delete_names<V>(env: &mut std::collections::HashMap<String, V>, targets: &[Expr]) -> Result<(), Diagnostic> {
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
}

/// The builtins both engines run alike: a refusal the frontend deferred to where it runs (`ast::REFUSED`), and
/// Python's builtins over iterables (`sum`, `list`, `tuple`, `enumerate`, `zip`, `map`, `reversed`), and
/// `isinstance`. None for another
/// name.
pub fn shared_builtin<'m, W: Walk<'m>>(w: &mut W, name: &str, a: &CallArgs<W::V>) -> Option<Result<W::V, W::Err>> {
    let span = a.span;
    if name == crate::frontend::ast::REFUSED {
        let Some(Py::Str(m)) = a.pos.first().map(|m| m.py()) else {
            unreachable!("the frontend gives a refusal its message")
        };
        return Some(Err(Diagnostic::new(m.to_string()).at(span).into()));
    }
    let list = |items| W::V::make(Made::List(items));
    let run = || -> Result<W::V, W::Err> {
        Ok(match name {
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
            "isinstance" => {
                let v = w.required(a, 0, "obj")?.clone();
                let classes = w.required(a, 1, "class_or_tuple")?.clone();
                let r = isinstance(&v, &classes).map_err(|m| Diagnostic::new(m).at(span))?;
                W::V::make(Made::Bool(r))
            }
            _ => {
                let mut items = w.iterate(w.required(a, 0, "seq")?, span)?;
                items.reverse();
                list(items)
            }
        })
    };
    matches!(name, "sum" | "list" | "tuple" | "enumerate" | "zip" | "map" | "reversed" | "isinstance").then(run)
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
            w.binop(&a, *op, &b, span)?
        }
        ExprKind::Unary(op, a) => {
            let v = w.eval(env, a)?;
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
            w.getitem(&o, &i, span)?
        }
        ExprKind::Attr(obj, name) => {
            let o = w.eval(env, obj)?;
            w.attribute(&o, name, span)?
        }
        ExprKind::Call { .. } => w.call(env, e)?,
        _ => w.eval_other(env, e)?,
    })
}

/// Implements [`PyValue`] for an engine's value enum `$t`: its variants for the kinds both engines have carry the
/// same names and contents (both enums are written so), and `$other` are its own variants ([`Py::Other`], named in
/// errors by `$name`).
macro_rules! impl_py_value {
    ($t:ident, other: [$($other:pat),*], name: $name:expr) => {
        impl $crate::interp::pyvalue::PyValue for $t {
            fn py(&self) -> $crate::interp::pyvalue::Py<'_, Self> {
                use $crate::interp::pyvalue::Py;
                match self {
                    $t::None => Py::None,
                    $t::Bool(b) => Py::Bool(*b),
                    $t::Int(i) => Py::Int(*i),
                    $t::Float(_) => Py::Float,
                    $t::Str(s) => Py::Str(s),
                    $t::DType(d) => Py::DType(*d),
                    $t::Device => Py::Device,
                    $t::Ellipsis => Py::Ellipsis,
                    $t::Module(m) => Py::Module(m),
                    $t::Range(..) => Py::Range,
                    $t::Tuple(v) => Py::Tuple(v),
                    $t::Named(v, _) => Py::Named(v),
                    $t::List(v) => Py::List(v),
                    $t::Dict(d) => Py::Dict(d),
                    $t::Slice(..) => Py::Slice,
                    $t::Tensor(_) => Py::Tensor,
                    $t::Func(_) => Py::Function(None),
                    $t::Closure(_, captured) => Py::Function(Some(captured)),
                    $($other => Py::Other,)*
                }
            }

            fn make(m: $crate::interp::pyvalue::Made<Self>) -> Self {
                use $crate::interp::pyvalue::Made;
                use std::{cell::RefCell, rc::Rc};
                match m {
                    Made::None => $t::None,
                    Made::Bool(b) => $t::Bool(b),
                    Made::Int(i) => $t::Int(i),
                    Made::Float(f) => $t::Float(f),
                    Made::Str(s) => $t::Str(s),
                    Made::Ellipsis => $t::Ellipsis,
                    Made::Tuple(v) => $t::Tuple(Rc::new(v)),
                    Made::List(v) => $t::List(Rc::new(RefCell::new(v))),
                    Made::Dict(v) => $t::Dict(Rc::new(RefCell::new(v))),
                }
            }

            fn other_type_name(&self) -> &'static str {
                $name(self)
            }
        }
    };
}
pub(crate) use impl_py_value;

impl_py_value!(Value, other: [], name: |_: &Value| unreachable!("every reference value has a Python kind"));
