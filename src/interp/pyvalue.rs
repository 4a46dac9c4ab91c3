//! The Python layer both engines share: the reference interpreter's values ([`Value`](super::value::Value)) and the
//! functionalizer's (`functionalize::state::FV`, which also has values known only when the program runs) are both
//! [`PyValue`]s, declared by one macro ([`py_values`]), seen through one borrowed view ([`Py`]) and built through one
//! constructor ([`Made`]). What Python does with the values both have (literals, the builtin names, sequence
//! arithmetic, `dict(...)`, `*` in displays and calls, `is`, `in`, equality of kinds and of sequences) is written here
//! once, over that view; each engine keeps only what differs (run-time values, tensors as terms or as data, conditions
//! known only at run time). The walks over the syntax and the builtins that call back into an engine are `pywalk.rs`,
//! re-exported here.

use std::cell::RefCell;
use std::rc::Rc;

pub use super::pywalk::*;
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::{BinOp, ExprKind};
use crate::tensor::DType;

pub use super::pycompare::{identity, kind_eq};

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
    DType(DType),
    Device,
    /// A module or a builtin type (`type(x)` is `list`: the name [`builtin_name`] gives it).
    Module(&'static str),
    /// A function of the program file, by name (a class's method is `CLASS::NAME`: `frontend::convert::classes`).
    Func(Rc<str>),
    /// A closure: a function of the program file and the values it carries (a bound method: `objects::BOUND`).
    Closure(Rc<str>, Vec<(String, V)>),
}

/// A Python value of one engine.
pub trait PyValue: Clone + Sized {
    fn py(&self) -> Py<'_, Self>;
    fn make(m: Made<Self>) -> Self;
    /// The type name of an engine's own kind ([`Py::Other`]), as errors print it.
    fn other_type_name(&self) -> &'static str;
    /// A complex tensor's real view (`interp::complex`), if this is one.
    fn complex_of(&self) -> Option<&Self>;
    /// The complex tensor whose real view is `inner`.
    fn make_complex(inner: Self) -> Self;
    /// The function value of `torch.NAME`.
    fn torch_function(name: &str) -> Self;
    /// The slice `:`.
    fn full_slice() -> Self;
    /// The name of a function value of the program file (a class's constructor too), or of an op.
    fn function_name(&self) -> Option<&str>;
    /// The name of the function a closure calls (a helper, an op for a stateless `torch.nn` module, a bound method).
    fn closure_name(&self) -> Option<&str>;
    /// A float or int known before the program runs, as a float.
    fn number(&self) -> Option<f64>;

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

    /// The type name as a refusal of the value shows it: a complex tensor says so.
    fn shown_type(&self) -> &'static str {
        if self.complex_of().is_some() {
            "complex tensor (return `torch.view_as_real` of it)"
        } else {
            self.type_name()
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

    /// A tensor's subscript as PyTorch reads it: a list of fewer than 32 items of which one is a tensor, a
    /// sequence, a slice, `...` or `None` is the tuple of its items (NumPy's old rule, which PyTorch keeps:
    /// `x[[i, j]]` with tensors `i` and `j` is `x[i, j]`, and `x[[[0, 1], [1, 2]]]` is `x[[0, 1], [1, 2]]`);
    /// anything else (a list of numbers: one index tensor) is itself.
    fn tensor_index(&self) -> std::borrow::Cow<'_, Self> {
        let Py::List(items) = self.py() else { return std::borrow::Cow::Borrowed(self) };
        let items = items.borrow();
        let tuple_like = |v: &Self| {
            matches!(
                v.py(),
                Py::Tensor
                    | Py::Tuple(_)
                    | Py::Named(_)
                    | Py::List(_)
                    | Py::Str(_)
                    | Py::Range
                    | Py::Slice
                    | Py::Ellipsis
                    | Py::None
            ) || v.complex_of().is_some()
        };
        match items.len() < 32 && items.iter().any(tuple_like) {
            true => std::borrow::Cow::Owned(Self::make(Made::Tuple(items.clone()))),
            false => std::borrow::Cow::Borrowed(self),
        }
    }
}

/// The modules a builtin name of the same spelling denotes.
const NAMED_MODULES: &[&str] =
    &["math", "itertools", "copy", "functools", "logging", "warnings", "string", "weakref", "distutils"];

/// The value a builtin name denotes when no binding shadows it: a module, or a builtin type (`isinstance(n, int)`;
/// calls to them are builtins).
pub fn builtin_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "torch" => "torch",
        "F" => "torch.nn.functional",
        "nn" => "torch.nn",
        // (`weakref`'s and `distutils`' names are a class and a function of the file: `frontend::convert::prelude`.)
        m if NAMED_MODULES.contains(&m) => NAMED_MODULES.iter().copied().find(|u| *u == m).unwrap_or("math"),
        m if super::python::UNSUPPORTED_MODULES.contains(&m) => {
            super::python::UNSUPPORTED_MODULES.iter().copied().find(|u| *u == m).unwrap_or("random")
        }
        // Warning categories, which `warnings.warn(msg, UserWarning)` takes (and ignores here).
        "UserWarning" => "UserWarning",
        "DeprecationWarning" => "DeprecationWarning",
        "FutureWarning" => "FutureWarning",
        "RuntimeWarning" => "RuntimeWarning",
        "Tensor" => "torch.Tensor",
        "int" => "int",
        "float" => "float",
        "bool" => "bool",
        "str" => "str",
        "tuple" => "tuple",
        "list" => "list",
        "dict" => "dict",
        "set" => "set",
        "frozenset" => "frozenset",
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

/// The most items (or bytes of a string) a repeated sequence may have here: Python would try to allocate more and
/// raise `MemoryError` (or `OverflowError` past an index-sized count); building one would exhaust memory.
pub const MAX_REPEATED_ITEMS: usize = 1 << 28;

/// Python's arithmetic on sequences: `+` of two tuples, lists or strings, and a tuple, list or string times an int
/// (a negative count gives an empty one; a result of more than [`MAX_REPEATED_ITEMS`] items is a `MemoryError`).
/// None where the operands are not that.
pub fn sequence_binop<V: PyValue>(a: &V, op: BinOp, b: &V) -> Option<Result<V, String>> {
    let total = |n: i64, len: usize| match len.checked_mul(n.max(0) as usize) {
        Some(total) if total <= MAX_REPEATED_ITEMS => Ok(total),
        _ => Err(format!(
            "MemoryError: a sequence of {len} items repeated {n} times is larger than funcfuse builds \
             ({MAX_REPEATED_ITEMS} items)"
        )),
    };
    let made = match (a.py(), b.py(), op) {
        (Py::Tuple(x), Py::Tuple(y), BinOp::Add) => Ok(Made::Tuple(x.iter().chain(y).cloned().collect())),
        (Py::List(x), Py::List(y), BinOp::Add) => {
            Ok(Made::List(x.borrow().iter().chain(y.borrow().iter()).cloned().collect()))
        }
        (Py::List(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::List(x), BinOp::Mul) => {
            let items = x.borrow();
            total(n, items.len()).map(|t| Made::List(items.iter().cycle().take(t).cloned().collect()))
        }
        (Py::Tuple(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::Tuple(x), BinOp::Mul) => {
            total(n, x.len()).map(|t| Made::Tuple(x.iter().cycle().take(t).cloned().collect()))
        }
        (Py::Str(x), Py::Str(y), BinOp::Add) => Ok(Made::Str(format!("{x}{y}").into())),
        (Py::Str(x), Py::Int(n), BinOp::Mul) | (Py::Int(n), Py::Str(x), BinOp::Mul) => {
            total(n, x.len()).map(|_| Made::Str(x.repeat(n.max(0) as usize).into()))
        }
        _ => return None,
    };
    Some(made.map(V::make))
}

/// `dict(**kw)` or `dict(d, **kw)`: a new dict, the keywords (string keys) after `d`'s entries, a keyword replacing
/// an entry of the same key.
pub fn dict_call<V: PyValue>(
    pos: &[V],
    kw: &[(String, V)],
    key: impl Fn(&V) -> Result<(), String>,
    key_eq: impl Fn(&V, &V) -> bool,
) -> Result<V, String> {
    let mut out: Vec<(V, V)> = match pos {
        [] => vec![],
        [d] => match d.py() {
            Py::Dict(d) => d.borrow().clone(),
            // Pairs (a dict comprehension is `dict([(k, v) for ...])`): a later key replaces an earlier one.
            Py::List(_) | Py::Tuple(_) => {
                let mut out: Vec<(V, V)> = Vec::new();
                for (i, pair) in d.items().unwrap_or_default().into_iter().enumerate() {
                    let kv = pair.items().filter(|kv| kv.len() == 2).ok_or_else(|| {
                        format!("dictionary update sequence element #{i} is not a pair (a {})", pair.type_name())
                    })?;
                    key(&kv[0])?;
                    match out.iter_mut().find(|(x, _)| key_eq(x, &kv[0])) {
                        Some(slot) => slot.1 = kv[1].clone(),
                        None => out.push((kv[0].clone(), kv[1].clone())),
                    }
                }
                out
            }
            _ => {
                return Err(format!(
                    "dict() is supported with a dict, a list of pairs and keyword arguments, not a {}",
                    d.type_name()
                ))
            }
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
        // An instance (held as a dict) spreads its items where it has them (a NamedTuple, a ModuleList).
        Py::Dict(_) if object_class(v).is_some() && super::objects::items_of(v).is_some() => Ok(Spread::Iterate),
        Py::Dict(d) if object_class(v).is_none() => {
            Ok(Spread::Keys(d.borrow().iter().map(|(k, _)| k.clone()).collect()))
        }
        Py::Range | Py::Tensor | Py::Tuple(_) | Py::List(_) | Py::Named(_) => Ok(Spread::Iterate),
        _ => {
            let ty = object_class(v).map_or(v.type_name().to_string(), |c| c.to_string());
            Err(match call {
                true => format!("TypeError: Value after * must be an iterable, not {ty}"),
                false => format!("TypeError: '{ty}' object is not iterable"),
            })
        }
    }
}

/// `needle in hay` for a string or a sequence; `eq` compares the needle with one item (an error where the engine
/// cannot tell now). Dicts are the engines' own (their keys compare by engine rules).
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
        // Python's `in` is `x is y or x == y`, and an instance of the file's classes equals only itself.
        if let (Py::Dict(a), Py::Dict(b)) = (needle.py(), it.py()) {
            if std::ptr::eq(a, b) {
                return Ok(true);
            }
        }
        if object_class(needle).is_some() || object_class(it).is_some() {
            continue;
        }
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
    // A tuple never equals a list.
    if matches!(a.py(), Py::List(_)) != matches!(b.py(), Py::List(_)) || x.len() != y.len() {
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

/// The in-place ops that change a tensor's shape which both engines run as a rebinding (`shape_inplace_target`);
/// the others of `extra_ops::METADATA_INPLACE` (`resize_`, `as_strided_`) are refused.
pub const SHAPE_INPLACE: &[&str] = &["squeeze_", "unsqueeze_", "t_", "transpose_", "swapdims_", "swapaxes_"];

/// Where `X.squeeze_(...)` / `X.unsqueeze_(...)` (`name`, one of [`SHAPE_INPLACE`]) may run, the tensor value whose shape it changes: the
/// local name `local`'s, or the temporary `first` (the method's receiver). Refused, with the reason, where another
/// name, list, dict or constant may hold the same tensor object (PyTorch would change the shape seen there too):
/// anything in a helper (`depth` > 1); a tensor that another binding holds (`same` tells two tensor values apart as
/// the engine can). A program parameter's own object is allowed (see the end).
pub fn shape_inplace_target<V: PyValue>(
    name: &str,
    local: Option<&String>,
    first: Option<&V>,
    depth: usize,
    env: &std::collections::HashMap<String, V>,
    consts: &std::collections::HashMap<String, V>,
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
    let shared = env.iter().filter(|(k, v)| other(k) && is_t(v));
    if let Some(k) = shared.map(|(k, _)| k).min() {
        return refuse(&match local {
            Some(_) => "on a tensor that another name also refers to is not supported (PyTorch would change the shape seen through both)".to_string(),
            None => format!("on a temporary with the storage and shape of `{k}` is not supported (it may be the same tensor object, whose shape PyTorch would change)"),
        });
    }
    if env.values().any(|v| !is_tensor(&v) && holds(v, &is_t)) || consts.values().any(|v| holds(v, &is_t)) {
        return refuse("on a tensor that a list or tuple (or a dict or constant) also holds is not supported (PyTorch would change the shape seen through both)");
    }
    // A program parameter's own object (`q.squeeze_(2)` on the parameter `q`) is allowed: the engines then report
    // the parameter as mutated, in its new shape ([`param_object_target`]).
    Ok(t)
}

/// A program parameter's tensor object as the caller holds it, for `squeeze_`/`unsqueeze_` (PyTorch changes that
/// object's shape and counts it a mutation: its version moves): its name, its current view, whether such an op
/// changed it, and whether the name was bound to something else since (the name then no longer reaches it).
pub struct ParamObject<T> {
    pub name: String,
    pub object: T,
    pub reshaped: bool,
    pub rebound: bool,
}

impl<T> ParamObject<T> {
    pub fn new(name: String, object: T) -> Self {
        ParamObject { name, object, reshaped: false, rebound: false }
    }
}

/// Which parameter's object `X.squeeze_(...)` (`op`; `local` the name `X`, if a name) changes, where the receiver
/// `is_target` a parameter's current object: reached through the parameter's own name, not rebound since, it is
/// that parameter; reached otherwise (another name after the parameter's was rebound, a fresh view with the same
/// storage and layout) it may or may not be the caller's object, so it is refused.
pub fn param_object_target<T>(
    params: &[ParamObject<T>],
    op: &str,
    local: Option<&String>,
    is_target: impl Fn(&T) -> bool,
) -> Result<Option<usize>, String> {
    let Some(i) = params.iter().position(|p| is_target(&p.object)) else { return Ok(None) };
    let p = &params[i];
    if local == Some(&p.name) && !p.rebound {
        return Ok(Some(i));
    }
    Err(format!(
        "`{op}` on a tensor with the storage and shape of the program parameter `{}` is not supported (it may be the \
         caller's tensor object, whose shape PyTorch would change); call it on the parameter's own name",
        p.name
    ))
}

/// A name bound by an assignment: a parameter of that name no longer reaches the caller's object through it.
pub fn param_name_bound<T>(params: &mut [ParamObject<T>], name: &str) {
    for p in params.iter_mut().filter(|p| p.name == name) {
        p.rebound = true;
    }
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

/// The tensors among a call's arguments, and in the lists and tuples among them (the inputs an `out=` may overlap),
/// as the engine's tensors (`tensor` takes a tensor value's contents).
pub fn tensor_arguments<V: PyValue, T>(pos: &[V], kw: &[(String, V)], tensor: impl Fn(V) -> Option<T>) -> Vec<T> {
    let mut out = Vec::new();
    for v in pos.iter().chain(kw.iter().map(|(_, v)| v)) {
        match v.items() {
            Some(items) => out.extend(items.into_iter().filter_map(&tensor)),
            None => out.extend(tensor(v.clone())),
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
/// functions are refused by name, `torch.device(...)` is the CPU, `torch.get_default_dtype()` is float32, and
/// run-mode predicates (`torch.cuda.is_available()`, ...) are False, taking no arguments (`torch.is_grad_enabled()`
/// is decided while the file converts: `frontend::convert::inert::grad_enabled`). `shape.numel()` (a `torch.Size`,
/// a tuple here: epfml/powersgd's `shape.numel()`) is the product of its sizes. None for any other call.
pub fn answered_call<V: PyValue>(callee: &V, name: &str, pos: &[V], kw: &[(String, V)]) -> Option<Result<V, String>> {
    if let (Py::Tuple(items), "numel") = (callee.py(), name) {
        let ints: Option<Vec<i64>> =
            items.iter().map(|v| if let Py::Int(i) = v.py() { Some(i) } else { None }).collect();
        return Some(match (ints, pos.is_empty() && kw.is_empty()) {
            (Some(s), true) => Ok(V::make(Made::Int(s.iter().product()))),
            (_, false) => Err("torch.Size.numel() takes no arguments".into()),
            (None, true) => Err("numel() of a tuple that is not a torch.Size of ints known before running".into()),
        });
    }
    let Py::Module(m) = callee.py() else { return None };
    if m == "torch" {
        match name {
            "device" if kw.is_empty() => return Some(super::python::torch_device(pos).map(|()| V::make(Made::Device))),
            "get_default_dtype" if pos.is_empty() && kw.is_empty() => {
                return Some(Ok(V::make(Made::DType(DType::F32))))
            }
            _ => {}
        }
    }
    // CPU autocast is off unless a program turns it on (which funcfuse refuses); a CPU build sees no CUDA device.
    match (m, name, pos.len(), kw.is_empty()) {
        ("torch", "is_autocast_enabled", 0 | 1, true) => return Some(Ok(V::make(Made::Bool(false)))),
        ("torch.cuda", "device_count", 0, true) => return Some(Ok(V::make(Made::Int(0)))),
        _ => {}
    }
    if super::python::run_mode_predicate(&format!("{m}.{name}")) {
        return Some(match pos.is_empty() && kw.is_empty() {
            true => Ok(V::make(Made::Bool(false))),
            false => Err(format!("{m}.{name}() takes no arguments")),
        });
    }
    None
}

/// Declares an engine's value enum `$t` and implements [`PyValue`] for it. The variants for the kinds both engines
/// have are written here once: a tensor is `$tensor` (data, or a reference to a term) and a slice's bounds are
/// `$bound`. The engine's own variants follow them; each is [`Py::Other`], named in errors by `$name`.
macro_rules! py_values {
    (
        $(#[$doc:meta])*
        $vis:vis enum $t:ident {
            tensor: $tensor:ty,
            slice_bound: $bound:ty,
            $($(#[$vdoc:meta])* $v:ident($($f:ty),*),)*
        }
        name: $name:expr
    ) => {
        $(#[$doc])*
        #[derive(Clone, Debug)]
        $vis enum $t {
            None,
            Bool(bool),
            Int(i64),
            Float(f64),
            Str(std::rc::Rc<str>),
            DType($crate::tensor::DType),
            Tensor($tensor),
            Tuple(std::rc::Rc<Vec<$t>>),
            /// A tuple whose fields also have names (`torch.return_types.max`: `values`, `indices`).
            Named(std::rc::Rc<Vec<$t>>, &'static [&'static str]),
            /// A Python list: shared and mutable, like the real thing.
            List(std::rc::Rc<std::cell::RefCell<Vec<$t>>>),
            Slice(Option<$bound>, Option<$bound>, Option<i64>),
            Ellipsis,
            Range(i64, i64, i64),
            /// A module object: `torch`, `torch.nn`, `torch.nn.functional`, `math`.
            Module(&'static str),
            /// A function defined in the program file.
            Func(std::rc::Rc<str>),
            /// A nested function (a top-level helper, see `frontend::convert::closure`) with the values it
            /// captured, passed to it as keywords on each call.
            Closure(std::rc::Rc<str>, std::rc::Rc<Vec<(String, $t)>>),
            /// A dict (keys that are numbers, strings or None, known before the program runs), in insertion order:
            /// shared and mutable like a list (`d[k] = v`, `d[k] += v`).
            Dict(std::rc::Rc<std::cell::RefCell<Vec<($t, $t)>>>),
            /// A `torch.device`: programs run with CPU semantics, so the only device is the CPU.
            Device,
            /// A complex tensor, held as its real view (`interp::complex`).
            Complex(std::rc::Rc<$t>),
            $($(#[$vdoc])* $v($($f),*),)*
        }

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
                    $t::Complex(_) => Py::Other,
                    $($t::$v(..) => Py::Other,)*
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
                    Made::DType(d) => $t::DType(d),
                    Made::Device => $t::Device,
                    Made::Module(m) => $t::Module(m),
                    Made::Func(f) => $t::Func(f),
                    Made::Closure(f, captured) => $t::Closure(f, std::rc::Rc::new(captured)),
                }
            }

            fn other_type_name(&self) -> &'static str {
                match self {
                    $t::Complex(_) => "Tensor",
                    other => $name(other),
                }
            }

            fn complex_of(&self) -> Option<&Self> {
                match self {
                    $t::Complex(inner) => Some(inner),
                    _ => None,
                }
            }

            fn make_complex(inner: Self) -> Self {
                $t::Complex(std::rc::Rc::new(inner))
            }

            fn torch_function(name: &str) -> Self {
                $t::Func(std::rc::Rc::from(format!("torch.{name}").as_str()))
            }

            fn full_slice() -> Self {
                $t::Slice(None, None, None)
            }

            fn function_name(&self) -> Option<&str> {
                match self {
                    $t::Func(n) => Some(n),
                    _ => None,
                }
            }

            fn closure_name(&self) -> Option<&str> {
                match self {
                    $t::Closure(n, _) => Some(n),
                    _ => None,
                }
            }

            fn number(&self) -> Option<f64> {
                match self {
                    $t::Float(f) => Some(*f),
                    $t::Int(i) => Some(*i as f64),
                    _ => None,
                }
            }
        }
    };
}
pub(crate) use py_values;

pub use crate::frontend::ast::CLASS_KEY;

/// The class of `v` where it is an instance of a class of the program file: a dict whose first entry is
/// [`CLASS_KEY`] (the constructor puts it first), so that the check costs one entry on every attribute and call.
pub fn object_class<V: PyValue>(v: &V) -> Option<Rc<str>> {
    let Py::Dict(d) = v.py() else { return None };
    let d = d.borrow();
    match d.first().map(|(k, c)| (k.py(), c.py())) {
        Some((Py::Str(k), Py::Str(c))) if &**k == CLASS_KEY => Some(c.clone()),
        _ => None,
    }
}

/// `{..., **m}`: the entries of dict `m` put into `out` in their order, each replacing an equal key's value (`eq`
/// compares keys as the engine does); Python's TypeError for anything but a dict (an instance of a class of the file
/// too: it has no `keys()` here).
pub fn spread_into<V: PyValue>(
    m: &V,
    out: &mut Vec<(V, V)>,
    eq: impl Fn(&V, &V) -> bool,
    span: crate::diag::Span,
) -> Result<(), crate::diag::Diagnostic> {
    let entries = match (m.py(), object_class(m)) {
        (Py::Dict(d), None) => d.borrow().clone(),
        (_, Some(c)) => {
            return Err(crate::diag::Diagnostic::new(format!("TypeError: '{c}' object is not a mapping")).at(span))
        }
        _ => {
            let m = format!("TypeError: '{}' object is not a mapping", m.type_name());
            return Err(crate::diag::Diagnostic::new(m).at(span));
        }
    };
    entries.into_iter().for_each(|(k, v)| dict_put(out, k, v, &eq));
    Ok(())
}

/// `d[k] = v` on a dict's entries (`eq` compares keys as the engine does): an equal key's value replaced, else the
/// entry put last.
pub fn dict_put<V>(out: &mut Vec<(V, V)>, k: V, v: V, eq: impl Fn(&V, &V) -> bool) {
    match out.iter_mut().find(|(x, _)| eq(x, &k)) {
        Some(slot) => slot.1 = v,
        None => out.push((k, v)),
    }
}
