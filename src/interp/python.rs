//! Python-level features of the reference interpreter that real PyTorch code leans on: `*args` in calls and
//! displays, dicts with constant keys, f-strings, `raise`, and `torch.device` values (CPU semantics).

use std::cell::RefCell;
use std::rc::Rc;

use super::args::Args;
use super::exec::{tensor_err, Frame, Interp};
use super::pyfmt;
use super::pyvalue::{Py, PyValue};
use super::value::Value;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;
use crate::tensor::DType;

pub(crate) use super::device::*;

/// Exception classes a program may raise by name (`raise ValueError(...)`).
pub(crate) const EXCEPTIONS: &[&str] = &[
    "Exception",
    "ValueError",
    "TypeError",
    "RuntimeError",
    "IndexError",
    "KeyError",
    "AssertionError",
    "NotImplementedError",
    "ZeroDivisionError",
];

/// The message of `raise EXC(args)` given the class name and its arguments' `str`s, as Python prints it.
pub(crate) fn exception_message(class: &str, args: &[String]) -> String {
    match args {
        [] => class.to_string(),
        [one] => format!("{class}: {one}"),
        many => format!("{class}: ({})", many.join(", ")),
    }
}

/// `d[key] = v`: replaces the entry of `key` or appends one.
pub(super) fn dict_set(d: &RefCell<Vec<(Value, Value)>>, key: &Value, v: &Value, span: Span) -> Result<(), Diagnostic> {
    check_key(key, span)?;
    let mut d = d.borrow_mut();
    match d.iter_mut().find(|(k, _)| key_eq(k, key)) {
        Some(slot) => slot.1 = v.clone(),
        None => d.push((key.clone(), v.clone())),
    }
    Ok(())
}

/// Whether a dict key equals another (Python equality for the hashable values dict displays may use). A tensor key
/// (an optimizer's `self.state[p]`) is found by identity, as Python's dict finds it (`is` first, and tensors hash by
/// identity): here the same view of the same storage, as `is` compares tensors.
pub(crate) fn key_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Tensor(x), Value::Tensor(y)) => x.same_view(y),
        (Value::Tensor(_), _) | (_, Value::Tensor(_)) => false,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::None, Value::None) | (Value::Device, Value::Device) => true,
        (Value::DType(x), Value::DType(y)) => x == y,
        (Value::Tuple(x), Value::Tuple(y)) => x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| key_eq(p, q)),
        (x, y) => match (x.as_scalar(), y.as_scalar()) {
            (Some(p), Some(q)) => crate::interp::pyarith::py_compare(p, CmpOp::Eq, q),
            _ => false,
        },
    }
}

pub(super) fn check_key(k: &Value, span: Span) -> Result<(), Diagnostic> {
    if is_key(k) {
        return Ok(());
    }
    err(span, not_a_key(k.type_name()))
}

/// Whether a value may be a dict key here: a number, a string, None, a dtype, a device, a tensor, or a tuple of
/// such (both engines).
pub(crate) fn is_key(k: &Value) -> bool {
    match k {
        Value::Str(_) | Value::None | Value::Bool(_) | Value::Int(_) | Value::Float(_) | Value::Tensor(_) => true,
        // torch.optim's `(device, dtype)` groups.
        Value::DType(_) | Value::Device => true,
        Value::Tuple(items) => items.iter().all(is_key),
        _ => false,
    }
}

/// The refusal of a dict key of type `ty`.
pub(crate) fn not_a_key(ty: &str) -> String {
    format!("dict keys must be numbers, strings, None, dtypes, devices, tensors or tuples of them here, not {ty}")
}

impl<'m> Interp<'m> {
    /// The values of call arguments or display items, with `*value` spread out as Python does.
    pub(super) fn eval_items(
        &mut self,
        frame: &mut Frame,
        items: &'m [Expr],
        call: bool,
    ) -> Result<Vec<Value>, Diagnostic> {
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            match &it.kind {
                ExprKind::Starred(inner) => {
                    let v = self.eval(frame, inner)?;
                    match super::pyvalue::spread(&v, call).map_err(|m| Diagnostic::new(m).at(it.span))? {
                        super::pyvalue::Spread::Keys(keys) => out.extend(keys),
                        super::pyvalue::Spread::Iterate => out.extend(self.iterate(&v, it.span)?),
                    }
                }
                _ => out.push(self.eval(frame, it)?),
            }
        }
        Ok(out)
    }

    pub(super) fn eval_dict(&mut self, frame: &mut Frame, items: &'m [(Expr, Expr)]) -> Result<Value, Diagnostic> {
        let mut out: Vec<(Value, Value)> = Vec::new();
        for (k, v) in items {
            if let ExprKind::Starred(m) = &k.kind {
                let m = self.eval(frame, m)?;
                super::pyvalue::spread_into(&m, &mut out, key_eq, k.span)?;
                continue;
            }
            let key = self.eval(frame, k)?;
            check_key(&key, k.span)?;
            let val = self.eval(frame, v)?;
            super::pyvalue::dict_put(&mut out, key, val, key_eq);
        }
        Ok(Value::Dict(Rc::new(std::cell::RefCell::new(out))))
    }

    /// `d[key]`.
    pub(super) fn dict_get(d: &[(Value, Value)], key: &Value, span: Span) -> Result<Value, Diagnostic> {
        match d.iter().find(|(k, _)| key_eq(k, key)) {
            Some((_, v)) => Ok(v.clone()),
            None => err(span, format!("KeyError: {}", pyfmt::py_repr(key))),
        }
    }

    /// Dict methods: `get`, `keys`, `values`, `items`, `setdefault`, `pop`, `update` (from a dict).
    pub(super) fn dict_method(
        dict: &RefCell<Vec<(Value, Value)>>,
        name: &str,
        pos: &[Value],
        span: Span,
    ) -> Result<Value, Diagnostic> {
        if let ("setdefault", [k, ..]) | ("pop", [k, ..]) = (name, pos) {
            check_key(k, span)?;
            let mut d = dict.borrow_mut();
            let at = d.iter().position(|(x, _)| key_eq(x, k));
            return match (name, at, pos.get(1)) {
                (_, _, _) if pos.len() > 2 => {
                    err(span, format!("{name} expected at most 2 arguments, got {}", pos.len()))
                }
                ("setdefault", Some(i), _) => Ok(d[i].1.clone()),
                ("setdefault", None, dflt) => {
                    let v = dflt.cloned().unwrap_or(Value::None);
                    d.push((k.clone(), v.clone()));
                    Ok(v)
                }
                (_, Some(i), _) => Ok(d.remove(i).1),
                (_, None, Some(dflt)) => Ok(dflt.clone()),
                (_, None, None) => err(span, format!("KeyError: {}", pyfmt::py_repr(k))),
            };
        }
        if let ("update", [Value::Dict(other)]) = (name, pos) {
            let items = other.borrow().clone();
            for (k, v) in items {
                dict_set(dict, &k, &v, span)?;
            }
            return Ok(Value::None);
        }
        if let ("clear", []) = (name, pos) {
            dict.borrow_mut().clear();
            return Ok(Value::None);
        }
        if let ("add", [item]) = (name, pos) {
            super::pyset::set_add(dict, item).map_err(|m| Diagnostic::new(m).at(span))?;
            return Ok(Value::None);
        }
        let d = dict.borrow();
        match (name, pos) {
            ("get", [k]) | ("get", [k, _]) => Ok(match d.iter().find(|(x, _)| key_eq(x, k)) {
                Some((_, v)) => v.clone(),
                None => pos.get(1).cloned().unwrap_or(Value::None),
            }),
            ("keys", []) => Ok(Value::list(d.iter().map(|(k, _)| k.clone()).collect())),
            ("values", []) => Ok(Value::list(d.iter().map(|(_, v)| v.clone()).collect())),
            ("items", []) => Ok(Value::list(d.iter().map(|(k, v)| Value::tuple(vec![k.clone(), v.clone()])).collect())),
            _ => err(span, format!("unsupported dict method `{name}` (with {} arguments)", pos.len())),
        }
    }

    /// An f-string's text (`pyvalue::fstring`).
    pub(super) fn eval_fstring(&mut self, frame: &mut Frame, parts: &'m [FPart]) -> Result<Value, Diagnostic> {
        super::pyvalue::fstring(self, frame, parts, |_, v, conv, spec| pyfmt::field(v, conv, spec))
    }

    /// `raise EXC`: the error the program stops with (`pyvalue::raise`).
    pub(super) fn raise(&mut self, frame: &mut Frame, exc: &'m Option<Expr>, span: Span) -> Diagnostic {
        super::pyvalue::raise(self, frame, exc, span, |_, v| pyfmt::py_str(v), |_, v| pyfmt::py_repr(v))
    }
}

/// Keyword arguments with every `**mapping` (a keyword named `**`) spread out, as Python binds them.
pub(crate) fn spread_kwargs<V: Clone>(
    kw: Vec<(String, V)>,
    as_dict: impl Fn(&V) -> Result<Vec<(Option<String>, V)>, String>,
) -> Result<Vec<(String, V)>, String> {
    if !kw.iter().any(|(k, _)| k == "**") {
        return Ok(kw);
    }
    let mut out: Vec<(String, V)> = Vec::new();
    for (k, v) in kw {
        let items = if k == "**" { as_dict(&v)? } else { vec![(Some(k), v)] };
        for (k, v) in items {
            let Some(k) = k else { return Err("TypeError: keywords must be strings".into()) };
            if out.iter().any(|(o, _)| *o == k) {
                return Err(format!("TypeError: got multiple values for keyword argument '{k}'"));
            }
            out.push((k, v));
        }
    }
    Ok(out)
}

/// The entries of a `**mapping` argument.
pub(crate) fn dict_entries<V: PyValue>(v: &V) -> Result<Vec<(Option<String>, V)>, String> {
    let key = |k: &V| match k.py() {
        Py::Str(s) => Some(s.to_string()),
        _ => None,
    };
    match v.py() {
        Py::Dict(d) => Ok(d.borrow().iter().map(|(k, v)| (key(k), v.clone())).collect()),
        _ => Err(format!("TypeError: argument after ** must be a mapping, not {}", v.type_name())),
    }
}

/// `a in s` with a string `s` and `a` of another type: Python's TypeError.
pub(crate) fn str_in_needs_str(a: &str) -> String {
    format!("TypeError: 'in <string>' requires string as left operand, not {a}")
}

/// `a in b` where `b` is nothing `in` looks into here.
pub(crate) fn in_needs_container(b: &str) -> String {
    format!("`in` needs a tuple, list, dict or str, not {b}")
}

/// The module predicates that say how the program is being run (exported, scripted, traced, compiled, on CUDA, in
/// a process group): never, here (programs run with CPU semantics, in one process).
pub(crate) fn run_mode_predicate(full: &str) -> bool {
    crate::frontend::torch_api::run_mode_predicate(full)
}

const FINFO: &[&str] = &["bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"];
const IINFO: &[&str] = &["bits", "max", "min"];

/// `torch.finfo(dtype)` / `torch.iinfo(dtype)`: their fields (numbers) and names, as PyTorch gives them.
pub(crate) fn type_info(which: &str, d: Option<DType>) -> Result<(Vec<Value>, &'static [&'static str]), String> {
    let f = |bits: i64, eps: f64, max: f64, tiny: f64, res: f64| {
        let v = vec![
            Value::Int(bits),
            Value::Float(eps),
            Value::Float(max),
            Value::Float(-max),
            Value::Float(tiny),
            Value::Float(tiny),
            Value::Float(res),
        ];
        Ok((v, FINFO))
    };
    let i = |bits: i64, min: i64, max: i64| Ok((vec![Value::Int(bits), Value::Int(max), Value::Int(min)], IINFO));
    match (which, d.unwrap_or(DType::F32)) {
        ("finfo", DType::F32) => f(32, f32::EPSILON as f64, f32::MAX as f64, f32::MIN_POSITIVE as f64, 1e-6),
        ("finfo", DType::F64) => f(64, f64::EPSILON, f64::MAX, f64::MIN_POSITIVE, 1e-15),
        ("finfo", DType::F16) => f(16, 0.0009765625, 65504.0, 6.103515625e-05, 0.001),
        ("finfo", DType::BF16) => f(16, 0.0078125, 3.3895313892515355e38, f32::MIN_POSITIVE as f64, 0.01),
        ("iinfo", DType::I64) if d.is_some() => i(64, i64::MIN, i64::MAX),
        ("iinfo", DType::I32) => i(32, i32::MIN as i64, i32::MAX as i64),
        ("iinfo", DType::I16) => i(16, i16::MIN as i64, i16::MAX as i64),
        ("iinfo", DType::I8) => i(8, i8::MIN as i64, i8::MAX as i64),
        ("iinfo", DType::U8) => i(8, 0, u8::MAX as i64),
        ("finfo", _) => {
            Err("torch.finfo() requires a floating point input type. Use torch.iinfo to handle 'torch.finfo'".into())
        }
        _ => Err("torch.iinfo() requires an integer input type. Use torch.finfo to handle 'torch.iinfo'".into()),
    }
}

/// The torch functions a program may use as values (`act_fn=F.relu`, then `act_fn(x)`): a function value names
/// the op by its full dotted name, which no function of the program can have.
pub(crate) fn function_value(full: &str) -> bool {
    const TORCH: &[&str] = &[
        "relu",
        "sigmoid",
        "tanh",
        "exp",
        "abs",
        "sqrt",
        "log",
        "softmax",
        "log_softmax",
        "cat",
        "concat",
        "stack",
        "reshape",
        "unsqueeze",
        "broadcast_to",
        "matmul",
        "bmm",
        "add",
        "sub",
        "mul",
        "div",
        "maximum",
        "minimum",
        "where",
        "sum",
        "mean",
        "flatten",
        "clamp",
        "max",
        "min",
        "amax",
        "amin",
        "prod",
        "norm",
        "square",
        "clone",
        "logsumexp",
    ];
    const NNF: &[&str] = &[
        "relu",
        "gelu",
        "silu",
        "sigmoid",
        "tanh",
        "softplus",
        "elu",
        "leaky_relu",
        "mish",
        "hardswish",
        "relu6",
        "softmax",
        "log_softmax",
    ];
    match full.rsplit_once('.') {
        Some(("torch", n)) => TORCH.contains(&n) || super::torch_ops::unary_op(n).is_some(),
        Some(("torch.nn.functional", n)) => NNF.contains(&n),
        Some(("torch.nn.init", n)) => super::nn_init::is_init(n),
        _ => false,
    }
}

/// The first variable a closure captures (the keywords `NAME=NAME` of a `<closure>(HELPER, ...)` call) that is not
/// assigned where the closure is made, with where: funcfuse captures values then, and Python reads them only when
/// the function runs (where it would raise `NameError` if they are still unassigned, or see a value assigned since).
pub(crate) fn unbound_capture<'e>(
    kwargs: &'e [(String, Expr)],
    bound: impl Fn(&str) -> bool,
) -> Option<(&'e str, Span)> {
    kwargs.iter().find_map(|(_, v)| match &v.kind {
        ExprKind::Name(n) if !bound(n) => Some((n.as_str(), v.span)),
        _ => None,
    })
}

/// The message for [`unbound_capture`].
pub(crate) fn unbound_capture_message(name: &str) -> String {
    format!(
        "`{name}` is not assigned when the function defined here is made (a closure that reads it): funcfuse captures it then, where Python would read it when the function runs; not supported; assign `{name}` before the `def` or `lambda`"
    )
}

/// The error of `x.type(NAME)` with a type name that is not one of the CPU tensor types funcfuse has.
pub fn unknown_legacy_type(name: &str) -> String {
    format!(
        "invalid type: '{name}' (the CPU tensor types are torch.FloatTensor, torch.DoubleTensor, torch.HalfTensor, \
         torch.BFloat16Tensor, torch.LongTensor, torch.IntTensor and torch.BoolTensor)"
    )
}

/// `itertools.product(*seqs, repeat=repeat)`: every combination of one item of each sequence (the sequences
/// repeated `repeat` times), the last sequence advancing fastest, as tuples' items.
pub fn cartesian_product<T: Clone>(seqs: &[Vec<T>], repeat: i64) -> Result<Vec<Vec<T>>, String> {
    if repeat < 0 {
        return Err("repeat argument cannot be negative".into());
    }
    let all: Vec<&Vec<T>> = (0..repeat).flat_map(|_| seqs.iter()).collect();
    let mut out: Vec<Vec<T>> = vec![Vec::new()];
    for seq in all {
        if out.len().saturating_mul(seq.len()) > crate::limits::MAX_LIST_ITEMS {
            return Err(format!("itertools.product(): more than {} combinations", crate::limits::MAX_LIST_ITEMS));
        }
        out = out
            .iter()
            .flat_map(|prefix| seq.iter().map(move |x| [prefix.as_slice(), std::slice::from_ref(x)].concat()))
            .collect();
    }
    Ok(out)
}

/// The flags of a tensor that are constant here (a dense CPU tensor outside autograd): `is_sparse`, `is_quantized`,
/// `is_meta`, `is_mkldnn`, `is_nested` and `requires_grad` are false, `is_leaf` true.
pub fn cpu_dense_flag(name: &str) -> Option<bool> {
    match name {
        "is_sparse" | "is_quantized" | "is_meta" | "is_mkldnn" | "is_nested" | "requires_grad" | "is_cuda"
        | "is_xpu" | "is_mps" | "is_xla" | "is_ipu" | "is_vulkan" | "is_mtia" | "is_maia" => Some(false),
        "is_leaf" | "is_cpu" => Some(true),
        _ => None,
    }
}

/// `x.ATTR = value` on a tensor: only `requires_grad = False` (what it already is; optimizers' slow-weight copies
/// write it), a no-op; anything else is refused.
pub fn tensor_attr_assign(attr: &str, value_is_false: bool) -> Result<(), String> {
    match (attr, value_is_false) {
        ("requires_grad", true) => Ok(()),
        ("requires_grad", false) => Err("`requires_grad = True`: autograd is not supported".into()),
        _ => Err(format!("assigning to attribute `{attr}` is not supported")),
    }
}

/// What `hasattr(obj, name)` asks about.
pub enum AttrOwner<'a> {
    /// A module value (`torch`, `torch.nn.functional`, `math`) or the class `torch.Tensor`.
    Module(&'a str),
    Tensor,
    /// Any other value, by Python's type name.
    Other(&'static str),
}

/// The private attributes a tensor has (`dir(torch.zeros(1))` of PyTorch 2.15, dunders aside): `hasattr` of another
/// private name is False for the tensors here, which carry no attributes of their own (FSDP's `_fsdp_flattened`).
const TENSOR_PRIVATE_ATTRS: &[&str] = &[
    "_addmm_activation",
    "_autocast_to_full_precision",
    "_autocast_to_reduced_precision",
    "_backward_hooks",
    "_base",
    "_cdata",
    "_clear_non_serializable_cached_data",
    "_coalesced_",
    "_conj",
    "_conj_physical",
    "_dimI",
    "_dimV",
    "_dtensor__new__",
    "_fix_weakref",
    "_grad",
    "_grad_fn",
    "_has_grad_dtype_override",
    "_has_symbolic_sizes_strides",
    "_indices",
    "_is_all_true",
    "_is_any_true",
    "_is_view",
    "_is_zerotensor",
    "_lazy_clone",
    "_make_subclass",
    "_make_wrapper_subclass",
    "_neg_view",
    "_nested_tensor_size",
    "_nested_tensor_storage_offsets",
    "_nested_tensor_strides",
    "_nnz",
    "_philox_normal_",
    "_philox_randint_",
    "_philox_uniform_",
    "_post_accumulate_grad_hooks",
    "_python_dispatch",
    "_reduce_ex_internal",
    "_rev_view_func_unsafe",
    "_sparse_mask_projection",
    "_to_dense",
    "_to_sparse",
    "_to_sparse_bsc",
    "_to_sparse_bsr",
    "_to_sparse_csc",
    "_to_sparse_csr",
    "_typed_storage",
    "_use_count",
    "_values",
    "_version",
    "_view_func",
    "_view_func_unsafe",
];

/// `hasattr(obj, name)` where the answer is PyTorch's own: the names of its public callables and every public
/// attribute of `torch.Tensor` (`frontend::torch_api`, generated from one PyTorch version), and the dtypes. Where the
/// list cannot tell (a private tensor attribute, a module attribute that is not a callable), the refusal says so.
pub fn hasattr(owner: AttrOwner, name: &str) -> Result<bool, String> {
    use crate::frontend::torch_api;
    let unknown = |what: &str| {
        Err(format!("hasattr({what}, '{name}'): funcfuse cannot tell (it knows PyTorch {}'s public callables, tensor attributes and dtypes)", torch_api::version()))
    };
    match owner {
        AttrOwner::Module(m) if m != "torch.Tensor" && (m == "torch" || m.starts_with("torch.")) => {
            // A public callable, a dtype, or a submodule (ADOPT's `hasattr(torch, 'compiler')`).
            let full = format!("{m}.{name}");
            if torch_api::has(&full)
                || run_mode_predicate(&full)
                || (m == "torch" && DType::from_torch_name(name).is_some())
                || matches!(module_attr(m, name), Ok(Value::Module(_)))
            {
                Ok(true)
            } else {
                unknown(m)
            }
        }
        AttrOwner::Module("torch.Tensor") | AttrOwner::Tensor if !name.starts_with('_') => {
            Ok(torch_api::has(&format!("torch.Tensor.{name}")))
        }
        AttrOwner::Module(m) => unknown(m),
        AttrOwner::Tensor if !name.starts_with("__") && !TENSOR_PRIVATE_ATTRS.contains(&name) => Ok(false),
        AttrOwner::Tensor => unknown("a tensor"),
        AttrOwner::Other(t) => Err(format!("hasattr() on a value of type {t} is not supported")),
    }
}

/// `MODULE.NAME` that is not a call: a submodule, a dtype, a memory format, a constant (`math.pi`) or a function value
/// (`F.relu`), as a plain Python value (both engines; the functionalizer converts it).
pub(crate) fn module_attr(m: &str, name: &str) -> Result<Value, String> {
    let full = format!("{m}.{name}");
    if UNSUPPORTED_MODULES.contains(&m) {
        return Err(unsupported_module(m, name));
    }
    if let Some(d) = DType::from_torch_name(name).filter(|_| m == "torch") {
        return Ok(Value::DType(d));
    }
    if let Some(f) = crate::frontend::module_function(m, name) {
        return Ok(Value::Func(Rc::from(f)));
    }
    Ok(match full.as_str() {
        "torch.nn" => Value::Module("torch.nn"),
        "torch.nn.functional" => Value::Module("torch.nn.functional"),
        "torch.nn.functional._Reduction" => Value::Module("torch.nn.functional._Reduction"),
        "torch.nn.init" => Value::Module("torch.nn.init"),
        // Its functions are functions of the file (`frontend::convert::prelude`).
        "torch.nn.utils" => Value::Module("torch.nn.utils"),
        "distutils.util" => Value::Module("distutils.util"),
        // A class for `isinstance` only (ESPnet's `isinstance(m, torch.nn.Module)`): modules are dicts here.
        "torch.nn.Module" => Value::Module("torch.nn.Module"),
        "torch.Tensor" => Value::Module("torch.Tensor"),
        "torch.linalg" => Value::Module("torch.linalg"),
        "torch.autograd" => Value::Module("torch.autograd"),
        "torch.onnx" => Value::Module("torch.onnx"),
        "torch.onnx.operators" => Value::Module("torch.onnx.operators"),
        "torch.distributed" => Value::Module("torch.distributed"),
        // Its classes are classes of the file (`frontend::convert::optim`); `required` marks a parameter group's
        // required value, which `is` compares.
        "torch.optim" => Value::Module("torch.optim"),
        "torch.optim.optimizer" => Value::Module("torch.optim.optimizer"),
        "torch.optim.lr_scheduler" => Value::Module("torch.optim.lr_scheduler"),
        "torch.optim.optimizer.required" => Value::Module("torch.optim.optimizer.required"),
        "torch.cuda" => Value::Module("torch.cuda"),
        "torch.backends" => Value::Module("torch.backends"),
        "torch.backends.mps" => Value::Module("torch.backends.mps"),
        "torch.jit" => Value::Module("torch.jit"),
        "torch.compiler" => Value::Module("torch.compiler"),
        f if MEMORY_FORMATS.contains(&f) => Value::Str(f.into()),
        // The dense layout every tensor here has (`layout=x.layout`); the sparse ones name what is not run.
        f @ ("torch.strided" | "torch.sparse_coo" | "torch.sparse_csr") => Value::Str(f.into()),
        // PyTorch's dtypes no tensor here has: a value that equals no dtype of ours and prints as PyTorch's, so
        // that `x.dtype in (torch.float16, torch.int8)` and `x.dtype == torch.uint8` work (making such a tensor fails).
        f if crate::tensor::OTHER_TORCH_DTYPES.contains(&f) => Value::Str(f.into()),
        // A legacy tensor type as a value (ConvGRU's `dtype=torch.FloatTensor`, then `x.type(dtype)`): its name,
        // which `.type()` takes.
        f if DType::from_legacy_type_name(f).is_some() => Value::Str(f.into()),
        "math.pi" | "torch.pi" => Value::Float(std::f64::consts::PI),
        "string.ascii_letters" => Value::Str("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ".into()),
        "string.ascii_lowercase" => Value::Str("abcdefghijklmnopqrstuvwxyz".into()),
        "string.ascii_uppercase" => Value::Str("ABCDEFGHIJKLMNOPQRSTUVWXYZ".into()),
        "string.digits" => Value::Str("0123456789".into()),
        "string.punctuation" => Value::Str("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~".into()),
        "math.e" | "torch.e" => Value::Float(std::f64::consts::E),
        "math.inf" | "torch.inf" => Value::Float(f64::INFINITY),
        "math.nan" | "torch.nan" => Value::Float(f64::NAN),
        f if function_value(f) => Value::Func(Rc::from(f)),
        f => match crate::frontend::static_owner(f) {
            // A prelude class whose static methods programs call on it (`nn.Embedding.from_pretrained`).
            Some(class) => Value::Module(class),
            None => return Err(format!("unsupported attribute `{full}`")),
        },
    })
}

/// The refusal of `torch.optim.NAME(...)` for a class that is not made a class of the file
/// (`frontend::convert::optim`).
pub(crate) fn unsupported_optimizer(name: &str) -> String {
    format!(
        "`torch.optim.{name}` is not supported (only the `Optimizer` base class, `SGD`, `Adam`, `AdamW` and `RMSprop`)"
    )
}

/// `dtype.NAME`: what a dtype says of itself (both engines).
pub(crate) fn dtype_attr(d: DType, name: &str) -> Result<Value, String> {
    match name {
        "is_floating_point" => Ok(Value::Bool(d.is_float())),
        "is_complex" => Ok(Value::Bool(false)),
        "is_signed" => Ok(Value::Bool(!matches!(d, DType::Bool))),
        "itemsize" => Ok(Value::Int(d.size() as i64)),
        _ => Err(format!("'torch.dtype' object has no attribute '{name}'")),
    }
}

/// The class `isinstance` sees of a value (a bool is an int too, as in Python), for both engines.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum PyClass {
    Tensor,
    Int,
    Bool,
    Float,
    Str,
    Tuple,
    List,
    Dict,
    Other,
}

/// `isinstance` of a value of `class`: `classes` names each class given (`None` for a value that is not a class,
/// which Python refuses, as it refuses a class this tool does not know). Both engines call it.
pub(crate) fn isinstance_of<'c>(
    class: PyClass,
    classes: impl IntoIterator<Item = Option<&'c str>>,
) -> Result<bool, String> {
    const NOT_A_TYPE: &str = "isinstance() arg 2 must be a type or tuple of types";
    let mut hit = false;
    for c in classes {
        hit |= match c.ok_or(NOT_A_TYPE)? {
            "torch.Tensor" => class == PyClass::Tensor,
            // No value here is a module (a ported module is a dict, which Python's `isinstance` says is not one).
            "torch.nn.Module" => false,
            "int" => matches!(class, PyClass::Int | PyClass::Bool),
            "float" => class == PyClass::Float,
            "bool" => class == PyClass::Bool,
            "str" => class == PyClass::Str,
            "tuple" => class == PyClass::Tuple,
            "list" => class == PyClass::List,
            "dict" => class == PyClass::Dict,
            // Sets are held as dicts (`frontend::convert::sugar`): a dict's answer cannot be told.
            "set" | "frozenset" if class == PyClass::Dict => {
                return Err("isinstance() of a dict or set against `set`: funcfuse holds sets as dicts".into())
            }
            "set" | "frozenset" => false,
            _ => return Err(NOT_A_TYPE.into()),
        };
    }
    Ok(hit)
}

/// The refusal of `list.index(v)` where a tensor meets another value: Python's `==` of tensors is elementwise.
pub(crate) const LIST_INDEX_TENSORS: &str =
    "list.index() of or over tensors is supported only where the tensor found is the one given (Python compares \
     others with `==`, elementwise)";

/// The position `list.pop(i)` removes (negative `i` counts from the end), or Python's IndexError.
pub(crate) fn list_pop_index(i: i64, n: usize) -> Result<usize, String> {
    let k = if i < 0 { i + n as i64 } else { i };
    if n == 0 {
        return Err("IndexError: pop from empty list".into());
    }
    if !(0..n as i64).contains(&k) {
        return Err("IndexError: pop index out of range".into());
    }
    Ok(k as usize)
}

/// Python builtins of `Interp::builtin` that take more than a few lines.
impl<'m> Interp<'m> {
    /// `len(x)`: a tensor's first dim, a range's, dict's or sequence's length.
    pub(super) fn len_builtin(&mut self, a: &Args) -> Result<Value, Diagnostic> {
        let span = a.span;
        let e = tensor_err(span);
        let v = a.req(0, "obj").map_err(&e)?;
        match v {
            Value::Tensor(t) if t.dim() == 0 => err(span, "len() of a 0-d tensor"),
            Value::Tensor(t) => Ok(Value::Int(t.shape[0] as i64)),
            Value::Range(..) => Ok(Value::Int(self.iterate(v, span)?.len() as i64)),
            Value::Dict(d) => Ok(Value::Int(d.borrow().len() as i64)),
            Value::Str(x) => Ok(Value::Int(x.chars().count() as i64)),
            other => match other.items() {
                Some(items) => Ok(Value::Int(items.len() as i64)),
                None => err(span, format!("object of type '{}' has no len()", other.type_name())),
            },
        }
    }

    /// `int(x)`, `float(x)`, `bool(x)` of a number, a one-element tensor, or (`float`) a string.
    pub(super) fn number_builtin(&mut self, name: &str, a: &Args) -> Result<Value, Diagnostic> {
        let span = a.span;
        let e = tensor_err(span);
        let v = a.req(0, "x").map_err(&e)?;
        if let (Value::Str(text), "float") = (v, name) {
            return super::pyarith::parse_float(text).map(Value::Float).map_err(&e);
        }
        if let (Value::Str(text), "int") = (v, name) {
            return super::pyarith::parse_int(text).map(Value::Int).map_err(&e);
        }
        let s = match v {
            Value::Tensor(t) => {
                if t.numel() != 1 {
                    return err(span, "only one element tensors can be converted to Python scalars");
                }
                t.item().map_err(&e)?
            }
            other => other.as_scalar().ok_or_else(|| {
                Diagnostic::new(format!("{name}() argument must be a number, not '{}'", other.type_name())).at(span)
            })?,
        };
        Ok(match name {
            "int" => match s {
                crate::tensor::Scalar::F(f) => Value::Int(super::pyarith::float_to_int(f).map_err(&e)?),
                s => Value::Int(s.to_i64_trunc()),
            },
            "float" => Value::Float(s.to_f64()),
            _ => Value::Bool(s.to_bool()),
        })
    }

    /// `min`/`max` of an iterable or of the arguments: the first item no other beats, by Python's comparison.
    pub(super) fn min_max(&mut self, name: &str, a: &Args) -> Result<Value, Diagnostic> {
        let span = a.span;
        let items = if a.pos.len() == 1 { self.iterate(&a.pos[0], span)? } else { a.pos.clone() };
        if items.is_empty() {
            return err(span, format!("{name}() arg is an empty sequence"));
        }
        let op = if name == "max" { CmpOp::Gt } else { CmpOp::Lt };
        let mut best = items[0].clone();
        for it in &items[1..] {
            let better = self.binop_compare(it, op, &best, span)?;
            if better {
                best = it.clone();
            }
        }
        Ok(best)
    }

    /// `dict(**kw)` or `dict(d, **kw)` (`pyvalue::dict_call`).
    pub(super) fn dict_call(&mut self, a: &Args) -> Result<Value, Diagnostic> {
        for (k, _) in &a.kw {
            a.get(usize::MAX, k);
        }
        super::pyvalue::dict_call(
            &a.pos,
            &a.kw,
            |k| is_key(k).then_some(()).ok_or_else(|| not_a_key(k.type_name())),
            key_eq,
        )
        .map_err(|m| Diagnostic::new(m).at(a.span))
    }
}

pub(crate) use crate::frontend::cpython::UNSUPPORTED_MODULES;

/// The refusal of `MODULE.NAME` for a module of [`UNSUPPORTED_MODULES`].
pub(crate) fn unsupported_module(m: &str, name: &str) -> String {
    format!(
        "`{m}.{name}`: the module `{m}` is not supported (only torch, torch.nn, torch.nn.functional, math, itertools, \
         copy, functools, logging, warnings and string)"
    )
}
