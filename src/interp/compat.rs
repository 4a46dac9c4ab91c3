//! PyTorch's older and convenience spellings, each rewritten to the op it is, for both engines:
//! `torch.autograd.Variable`, stateless `torch.nn` modules (a closure over the function their `forward` calls) and
//! NumPy-style keyword aliases, GELU's tanh approximation, `take_along_dim` as a `gather`; `np.prod` of Python numbers.

use super::pyvalue::{Made, Py, PyValue, Walk};
use crate::diag::{Diagnostic, Span};
use crate::tensor::DType;

/// `torch.autograd.Variable(data, requires_grad=False)` (older code wraps tensors in it): since PyTorch 0.4 it is a
/// new tensor over `data`'s storage, `data.detach()`; so is `torch.nn.Parameter(data, requires_grad=True)` (`name`
/// is `Variable` or `Parameter`). `Ok(())` where the call is that, else Python's error or the refusal (both engines;
/// `type_name` names a value's type, `as_bool` reads a `bool`); the caller keeps the first positional argument.
/// Without autograd a parameter's `requires_grad` changes nothing here; PyTorch's refusal of an in-place op on a
/// leaf that requires grad (outside `torch.no_grad()`) is not reproduced.
pub(crate) fn autograd_variable<V>(
    name: &str,
    pos: &[V],
    kw: &[(String, V)],
    type_name: impl Fn(&V) -> &'static str,
    as_bool: impl Fn(&V) -> Option<bool>,
) -> Result<(), String> {
    let (npos, data) = (pos.len(), pos.first().map(&type_name));
    let kw: Vec<(&String, Option<bool>)> = kw.iter().map(|(k, v)| (k, as_bool(v))).collect();
    let parameter = name == "Parameter";
    if !parameter && name != "Variable" {
        return Err(crate::frontend::torch_api::unsupported(&format!("torch.autograd.{name}")));
    }
    match (npos, data) {
        (1, Some("Tensor")) => {}
        (2, Some("Tensor")) if parameter && pos.get(1).and_then(&as_bool).is_some() => {}
        (1 | 2, Some(t)) if parameter => return Err(format!("AttributeError: '{t}' object has no attribute 'detach'")),
        (1, Some(t)) => return Err(format!("TypeError: Variable data has to be a tensor, but got {t}")),
        _ => return Err(format!("{name}(): funcfuse supports the data as the first positional argument")),
    }
    for (k, v) in kw {
        match (k.as_str(), v) {
            ("requires_grad", Some(_)) if parameter => {}
            ("requires_grad", Some(false)) | ("volatile", Some(false)) => {}
            ("requires_grad" | "volatile", Some(true)) => {
                return Err(format!("Variable({k}=True): autograd is not supported"))
            }
            (k, _) if parameter => {
                return Err(format!("TypeError: Parameter.__new__() got an unexpected keyword argument '{k}'"))
            }
            (k, _) => return Err(format!("Variable(): unexpected keyword argument '{k}'")),
        }
    }
    Ok(())
}

/// `F._Reduction.get_enum(reduction)` (loss code written against PyTorch's internals): the number PyTorch gives
/// each reduction name. `arg` is the single positional argument where it is a string.
pub(crate) fn reduction_enum(name: &str, npos: usize, arg: Option<&str>, nkw: usize) -> Result<i64, String> {
    if name != "get_enum" {
        return Err(crate::frontend::torch_api::unsupported(&format!("torch.nn.functional._Reduction.{name}")));
    }
    match (npos, arg, nkw) {
        (1, Some("none"), 0) => Ok(0),
        (1, Some("mean" | "elementwise_mean"), 0) => Ok(1),
        (1, Some("sum"), 0) => Ok(2),
        (1, Some(s), 0) => Err(format!("ValueError: {s} is not a valid value for reduction")),
        _ => Err("_Reduction.get_enum() takes one argument, a reduction name string".into()),
    }
}

/// The constructor a legacy tensor type held as a value names (`"torch.FloatTensor"`, what `torch.FloatTensor`
/// evaluates to, called: PyTorch-YOLOv3's `FloatTensor = torch.cuda.FloatTensor if x.is_cuda else
/// torch.FloatTensor`, then `FloatTensor(n, m)`): its name in `torch` (`"FloatTensor"`), which [`typed_tensor`] takes.
pub(crate) fn legacy_type_constructor(value: &str) -> Option<&str> {
    value.strip_prefix("torch.").filter(|_| crate::tensor::DType::from_legacy_type_name(value).is_some())
}

/// `torch.FloatTensor([..])`, `torch.Tensor([..])` and the other legacy typed constructors: over a list, tuple or
/// range of data (`torch.LongTensor(range(n))`, sgrvinod's SSD tutorial) `torch.tensor` with that dtype (`Some((dtype, "tensor"))`); with sizes (`torch.LongTensor(n)`, often an `out=` that is then
/// overwritten) or none, `torch.empty` of that dtype (`"empty"`: zeros here, where PyTorch leaves memory
/// uninitialized); `None` for any other name. `first` names the first argument's type.
pub(crate) fn typed_tensor(
    name: &str,
    npos: usize,
    first: Option<&str>,
    nkw: usize,
) -> Result<Option<(DType, &'static str)>, String> {
    let dtype = match name {
        "FloatTensor" | "Tensor" => DType::F32,
        "DoubleTensor" => DType::F64,
        "LongTensor" => DType::I64,
        "IntTensor" => DType::I32,
        "ShortTensor" => DType::I16,
        "CharTensor" => DType::I8,
        "ByteTensor" => DType::U8,
        "BoolTensor" => DType::Bool,
        _ => return Ok(None),
    };
    match (npos, first, nkw) {
        (1, Some("list" | "tuple" | "range"), 0) => Ok(Some((dtype, "tensor"))),
        (_, Some("int") | None, 0) => Ok(Some((dtype, "empty"))),
        _ => Err(format!(
            "torch.{name}(...): funcfuse supports the legacy constructor over a list, tuple or range of data \
             (`torch.{name}([..])`) or over sizes (`torch.{name}(2, 3)`), without keywords"
        )),
    }
}

/// `torch.nn.CLASS(...)` of a stateless module (an activation, `Softmax`, `Flatten`, a pooling): the function its `forward`
/// calls and the arguments the constructor fixes, as keywords (the positional ones named in the constructor's order;
/// `Flatten`'s defaults differ from `torch.flatten`'s, so they are fixed too). Calling the module calls the function
/// with them (both engines make it a closure over the function). `int` makes an int value; `is_true` says whether a
/// value is `True`.
pub(crate) fn nn_module<V: Clone>(
    class: &str,
    pos: Vec<V>,
    kw: Vec<(String, V)>,
    int: impl Fn(i64) -> V,
    is_true: impl Fn(&V) -> bool,
) -> Result<(&'static str, Vec<(String, V)>), String> {
    let (func, params): (&'static str, &[&str]) = match class {
        "Softmax" => ("torch.nn.functional.softmax", &["dim"]),
        "LogSoftmax" => ("torch.nn.functional.log_softmax", &["dim"]),
        "ReLU" => ("torch.nn.functional.relu", &["inplace"]),
        "ReLU6" => ("torch.nn.functional.relu6", &["inplace"]),
        "GELU" => ("torch.nn.functional.gelu", &["approximate"]),
        "SiLU" => ("torch.nn.functional.silu", &["inplace"]),
        "Mish" => ("torch.nn.functional.mish", &["inplace"]),
        "Hardswish" => ("torch.nn.functional.hardswish", &["inplace"]),
        "Hardsigmoid" => ("torch.nn.functional.hardsigmoid", &["inplace"]),
        "LeakyReLU" => ("torch.nn.functional.leaky_relu", &["negative_slope", "inplace"]),
        "ELU" => ("torch.nn.functional.elu", &["alpha", "inplace"]),
        "Softplus" => ("torch.nn.functional.softplus", &["beta", "threshold"]),
        "Sigmoid" => ("torch.sigmoid", &[]),
        "Tanh" => ("torch.tanh", &[]),
        "Flatten" => ("torch.flatten", &["start_dim", "end_dim"]),
        "MaxPool1d" | "MaxPool2d" | "MaxPool3d" => (
            match class {
                "MaxPool1d" => "torch.nn.functional.max_pool1d",
                "MaxPool2d" => "torch.nn.functional.max_pool2d",
                _ => "torch.nn.functional.max_pool3d",
            },
            &["kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode"],
        ),
        "AvgPool1d" => {
            ("torch.nn.functional.avg_pool1d", &["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad"])
        }
        "AvgPool2d" | "AvgPool3d" => (
            if class == "AvgPool2d" { "torch.nn.functional.avg_pool2d" } else { "torch.nn.functional.avg_pool3d" },
            &["kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"],
        ),
        _ => return Err(crate::frontend::torch_api::unsupported(&format!("torch.nn.{class}"))),
    };
    if pos.len() > params.len() {
        let takes = match params.len() {
            0 => "1 positional argument".to_string(),
            n => format!("from 1 to {} positional arguments", n + 1),
        };
        return Err(format!("TypeError: {class}.__init__() takes {takes} but {} were given", pos.len() + 1));
    }
    let mut fixed: Vec<(String, V)> = params.iter().zip(pos).map(|(p, v)| (p.to_string(), v)).collect();
    for (k, v) in kw {
        if !params.contains(&k.as_str()) {
            return Err(format!("TypeError: {class}.__init__() got an unexpected keyword argument '{k}'"));
        }
        if fixed.iter().any(|(p, _)| *p == k) {
            return Err(format!("TypeError: {class}.__init__() got multiple values for argument '{k}'"));
        }
        fixed.push((k, v));
    }
    // `inplace=True` goes on to the functional form, which writes its result into the input
    // (`inplace_activation`); False is its default.
    fixed.retain(|(k, v)| k != "inplace" || is_true(v));
    if class == "Flatten" {
        for (k, d) in [("start_dim", 1), ("end_dim", -1)] {
            if !fixed.iter().any(|(p, _)| p == k) {
                fixed.push((k.to_string(), int(d)));
            }
        }
    }
    Ok((func, fixed))
}

/// `F.NAME(..., inplace=...)` for an activation of `torch.nn.functional` that takes `inplace` (its position among the
/// arguments): the flag taken out of `pos`/`kw`, and whether it was true. The engines then run the op out of place
/// and copy its result into the input, which they return: what PyTorch's in-place activation leaves. `None` for
/// another name; an error where the flag is not a bool known before the program runs.
pub(crate) fn inplace_activation<V>(
    name: &str,
    pos: &mut Vec<V>,
    kw: &mut Vec<(String, V)>,
    as_bool: impl Fn(&V) -> Option<bool>,
) -> Option<Result<bool, String>> {
    let at = match name {
        "relu" | "relu6" | "silu" | "mish" | "hardswish" | "hardsigmoid" | "selu" => 1,
        "leaky_relu" | "elu" | "celu" => 2,
        "hardtanh" | "threshold" => 3,
        _ => return None,
    };
    let flag = match kw.iter().position(|(k, _)| k == "inplace") {
        Some(i) => Some(kw.remove(i).1),
        None if pos.len() > at => Some(pos.remove(at)),
        None => None,
    };
    Some(match flag.map(|v| as_bool(&v)) {
        None => Ok(false),
        Some(Some(b)) => Ok(b),
        Some(None) => Err(format!("{name}(): argument 'inplace' must be a bool known before the program runs")),
    })
}

/// `F.dropout(input, p=0.5, training=True, inplace=False)`, for either engine's arguments: Ok where it returns its
/// input (the input itself: in place or not, it is unchanged), as PyTorch's CPU kernel does where `p` is 0 or
/// `training` is false, after PyTorch's check of `p`; the refusal where it would draw a random mask, which funcfuse
/// cannot reproduce.
pub(crate) fn dropout<V: super::pyvalue::PyValue>(a: &super::args::CallArgs<V>) -> Result<(), String> {
    let p = a.opt(1, "p").map_or(Some(0.5), |v| v.number());
    if let Some(p) = p.filter(|p| *p < 0.0 || *p > 1.0) {
        return Err(format!("ValueError: dropout probability has to be between 0 and 1, but got {p}"));
    }
    a.opt(3, "inplace");
    let eval = a.opt(2, "training").is_some_and(|v| matches!(v.py(), super::pyvalue::Py::Bool(false)));
    match eval || p == Some(0.0) {
        true => Ok(()),
        false => Err("dropout in training mode is random; pass training=False or remove it".into()),
    }
}

/// PyTorch's NumPy-style keyword aliases (`axis` for `dim`, `keepdims` for `keepdim`), which its argument parser
/// accepts for every op, renamed to the names the ops take.
pub(crate) fn numpy_aliases<V>(kw: &mut [(String, V)]) {
    for (k, _) in kw.iter_mut() {
        match k.as_str() {
            "axis" => *k = "dim".into(),
            "keepdims" => *k = "keepdim".into(),
            _ => {}
        }
    }
}

/// `gelu`'s tanh approximation's constants as PyTorch's kernel writes them: `sqrt(2 / pi)` and the cubic's factor.
pub(crate) const GELU_TANH: (f64, f64) = (std::f64::consts::SQRT_2 * std::f64::consts::FRAC_2_SQRT_PI * 0.5, 0.044715);

/// Whether `gelu(..., approximate=A)` is the tanh approximation (`A` as a string where it is one); PyTorch's error
/// for anything but `'none'` and `'tanh'`.
pub(crate) fn gelu_tanh(approximate: Option<Option<&str>>) -> Result<bool, String> {
    match approximate {
        None | Some(Some("none")) => Ok(false),
        Some(Some("tanh")) => Ok(true),
        Some(_) => Err("approximate argument must be either none or tanh.".into()),
    }
}

/// `torch.take_along_dim(input, indices, dim)`: PyTorch's checks, then the sizes both are expanded to and the dim
/// they are gathered along (each keeps its own size along `dim`; the others broadcast); `None` where `dim` is `None`
/// (both are flattened and gathered along 0).
pub(crate) fn take_along_dim_plan(
    x: &[usize],
    idx: &[usize],
    idx_dtype: DType,
    dim: Option<i64>,
) -> Result<Option<(Vec<i64>, Vec<i64>, i64)>, String> {
    if idx_dtype != DType::I64 {
        return Err(format!("torch.take_along_dim(): dtype of indices should be Long but got {}", idx_dtype.name()));
    }
    let Some(dim) = dim else { return Ok(None) };
    if x.len() != idx.len() {
        return Err(format!(
            "torch.take_along_dim(): input and indices should have the same number of dimensions, but got {} dimensions for input, and {} dimensions for indices",
            x.len(),
            idx.len()
        ));
    }
    let d = crate::tensor::views::wrap_dim(dim, x.len().max(1))?;
    let (mut xs, mut is) = (x.to_vec(), idx.to_vec());
    if !xs.is_empty() {
        xs[d] = 1;
        is[d] = 1;
    }
    let b = crate::tensor::ops::broadcast_shapes(&xs, &is)?;
    let sized = |own: usize| -> Vec<i64> {
        b.iter().enumerate().map(|(k, &s)| if k == d { own as i64 } else { s as i64 }).collect()
    };
    let (xo, io) = if x.is_empty() { (vec![], vec![]) } else { (sized(x[d]), sized(idx[d])) };
    Ok(Some((xo, io, d as i64)))
}

/// `copy.NAME(*pos, **kw)`'s arguments: `deepcopy(x)` is the one function of `copy` programs use.
pub(crate) fn deepcopy_args<V>(name: &str, pos: &[V], kw: &[(String, V)]) -> Result<(), String> {
    if name != "deepcopy" {
        return Err(format!("unsupported function `copy.{name}` (only copy.deepcopy)"));
    }
    if pos.len() != 1 || !kw.is_empty() {
        return Err("copy.deepcopy() takes one value here (no memo)".into());
    }
    Ok(())
}

/// Why `copy.deepcopy` of a container holding tensors that share memory is refused: PyTorch's copy keeps them (twice
/// the same tensor, two views of one) sharing their new memory, which a copy per tensor would not.
pub(crate) const DEEPCOPY_CONTAINER: &str =
    "copy.deepcopy() of a list, tuple or dict holding tensors that share memory is not supported (the copies would have to share memory as the originals do); copy each tensor with clone()";

/// The longest dim `logcumsumexp` runs along: both engines compute element `i` as the `logsumexp` of the elements
/// up to `i` (the others masked to -inf), which is stable (no running maximum to rescale) but quadratic in the length.
pub(crate) const LOGCUMSUMEXP_MAX: usize = 4096;

/// `logcumsumexp`'s checks: a floating dtype (PyTorch's message), and a length both engines compute.
pub(crate) fn logcumsumexp_check(d: DType, len: usize) -> Result<(), String> {
    if !d.is_float() {
        return Err(format!("\"logcumsumexp_out_cpu\" not implemented for '{}'", d.name()));
    }
    if len > LOGCUMSUMEXP_MAX {
        return Err(format!("logcumsumexp along a dim longer than {LOGCUMSUMEXP_MAX} is not supported"));
    }
    Ok(())
}

/// `functools.reduce(function, iterable[, initial])`, as Python runs it: the items folded from the left by
/// `function`, starting from `initial` where given, else from the first item (Python's `TypeError` for an empty
/// iterable without one).
pub fn reduce<'m, W: super::pyvalue::Walk<'m>>(
    w: &mut W,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: crate::diag::Span,
) -> Result<W::V, W::Err> {
    let fail = |m: String| Err(crate::diag::Diagnostic::new(m).at(span).into());
    if !kw.is_empty() {
        return fail("TypeError: reduce() takes no keyword arguments".into());
    }
    let (f, items, initial) = match pos {
        [f, xs] => (f, xs, None),
        [f, xs, init] => (f, xs, Some(init.clone())),
        _ => return fail(format!("TypeError: reduce expected at least 2 arguments, got {}", pos.len())),
    };
    let mut items = w.iterate(items, span)?.into_iter();
    let Some(mut acc) = initial.or_else(|| items.next()) else {
        return fail("TypeError: reduce() of empty iterable with no initial value".into());
    };
    for x in items {
        acc = w.call_value(f.clone(), vec![acc, x], span, "reduce()'s function")?;
    }
    Ok(acc)
}

/// The name prefix of a `functools.partial` value: a closure (`Closure(PARTIAL + f, keywords)`) whose keywords a call
/// may override, unlike a nested `def`'s captured values.
pub const PARTIAL: &str = "<partial>";

/// `functools.NAME(*pos, **kw)`: `partial(f, **keywords)` of a function (`func`: its name, or that of an earlier
/// partial with `inner` its keywords): the name and keywords of the partial. Positional arguments after the function
/// are not supported (PyTorch's GRU decomposition binds its cell by keyword).
pub fn functools_partial<V: Clone>(
    name: &str,
    npos: usize,
    func: Option<(&str, &[(String, V)])>,
    kw: Vec<(String, V)>,
) -> Result<(String, Vec<(String, V)>), String> {
    if name != "partial" {
        return Err(format!("unsupported function `functools.{name}` (only functools.partial and functools.reduce)"));
    }
    let Some((f, inner)) = func else {
        return Err(if npos == 0 {
            "partial() missing required argument 'func'".into()
        } else {
            "the first argument of functools.partial must be a function".into()
        });
    };
    if npos > 1 {
        return Err("functools.partial with positional arguments after the function is not supported; pass them by \
                    keyword"
            .into());
    }
    let f = f.strip_prefix(PARTIAL).unwrap_or(f);
    Ok((format!("{PARTIAL}{f}"), partial_keywords(inner, kw)))
}

/// The keywords of a call of a partial: the partial's, each overridden by the call's keyword of its name, then the
/// call's others (Python's `{**self.keywords, **keywords}`).
pub fn partial_keywords<V: Clone>(bound: &[(String, V)], kw: Vec<(String, V)>) -> Vec<(String, V)> {
    let mut out: Vec<(String, V)> = bound.to_vec();
    for (k, v) in kw {
        match out.iter_mut().find(|(b, _)| *b == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
    }
    out
}

/// A call into `logging` or `warnings`, which changes no value: `Ok(None)` where it returns None (`logging.info`,
/// `warnings.warn`: Python prints; nothing here does), `Ok(Some(module))` where it returns a logger, which is the
/// module again (`logger = logging.getLogger(__name__)`, then `logger.warning(...)`); an error for other names.
pub(crate) fn quiet_call(module: &str, name: &str) -> Result<Option<&'static str>, String> {
    match (module, name) {
        ("logging", "getLogger") => Ok(Some("logging")),
        ("logging", "debug" | "info" | "warning" | "warn" | "error" | "critical" | "exception" | "log") => Ok(None),
        ("warnings", "warn") => Ok(None),
        _ => Err(format!("unsupported function `{module}.{name}` (only logging's messages and warnings.warn)")),
    }
}

/// `functools.NAME(f, **kw)` (`partial`) on the reference engine: the closure [`functools_partial`] makes of `f`, a
/// function or a partial itself.
pub(crate) fn partial_value(
    name: &str,
    pos: &[super::Value],
    kw: Vec<(String, super::Value)>,
) -> Result<super::Value, String> {
    use super::Value;
    let func = match pos.first() {
        Some(Value::Func(f)) => Some((&**f, &[][..])),
        Some(Value::Closure(f, c)) if f.starts_with(PARTIAL) => Some((&**f, &c[..])),
        _ => None,
    };
    let (f, kw) = functools_partial(name, pos.len(), func, kw)?;
    Ok(Value::Closure(f.into(), std::rc::Rc::new(kw)))
}

/// Whether `time.NAME()` with `args` arguments reads a clock (`time.time()`, `time.perf_counter()`, ...), which both
/// engines answer with 0.0: a clock that stands still, so that the timing code real programs carry (`t0 =
/// time.time()` ... `print(t1 - t0)`) runs and every run and plan stays the same. A result that depends on elapsed
/// time (a time budget) is not what funcfuse reproduces; it differs between PyTorch runs too.
pub(crate) fn still_clock(name: &str, args: usize) -> bool {
    args == 0 && matches!(name, "time" | "perf_counter" | "monotonic" | "process_time" | "thread_time")
}

/// What PyTorch raises for a collective or a rank query without a process group.
const NO_PROCESS_GROUP: &str =
    "ValueError: Default process group has not been initialized, please make sure to call init_process_group.";

/// `MODULE.NAME(...)` as both engines dispatch it: `torch.onnx.operators.shape_as_tensor` is `torch._shape_as_tensor`;
/// a call into `torch.distributed` (but `is_initialized()`, False, a run-mode predicate, and the calls that raise
/// PyTorch's `ValueError` without a process group) is refused, the program
/// running in one process without the process group the module needs, as is one into a standard-library module of
/// `UNSUPPORTED_MODULES`; any other call is itself.
pub(crate) fn module_call_target<'a>(m: &'a str, name: &'a str) -> Result<(&'a str, &'a str), String> {
    if super::python::UNSUPPORTED_MODULES.contains(&m) {
        return Err(super::python::unsupported_module(m, name));
    }
    match (m, name) {
        // What PyTorch raises without a process group (DAdaptation's `try: rank = get_rank() except: rank = 0`).
        (
            "torch.distributed",
            "get_rank" | "get_world_size" | "get_backend" | "barrier" | "all_reduce" | "broadcast",
        ) => Err(NO_PROCESS_GROUP.into()),
        ("torch.distributed", _) => Err(format!(
            "`torch.distributed.{name}` needs a process group; funcfuse runs a program in one process, where \
             `torch.distributed.is_initialized()` is False"
        )),
        ("torch.onnx.operators", "shape_as_tensor") => Ok(("torch", "_shape_as_tensor")),
        _ => Ok((m, name)),
    }
}

/// `np.prod(x)` of a non-empty list or tuple of Python ints (`ast::NUMPY_PROD`), an int (numpy's int64 is one in
/// every use here but `isinstance(..., int)`); floats and the empty product (numpy's float64, which a tensor
/// constructor would keep), a tensor and other items are refused.
pub(crate) fn numpy_prod<'m, W: super::pywalk::Walk<'m>>(
    w: &mut W,
    x: &W::V,
    span: crate::diag::Span,
) -> Result<W::V, W::Err> {
    use super::pyvalue::{Made, Py, PyValue};
    use crate::diag::Diagnostic;
    use crate::frontend::ast::BinOp;
    let refuse = || -> W::Err {
        Diagnostic::new("`np.prod(...)` is supported only of a non-empty list or tuple of ints known before the program runs (a tensor's product is `x.prod()`; numpy's float64 product would make float64 tensors where funcfuse's Python float makes float32: use `math.prod`)").at(span).into()
    };
    let items = match x.py() {
        Py::Tuple(v) | Py::Named(v) => v.to_vec(),
        Py::List(v) => v.borrow().clone(),
        _ => return Err(refuse()),
    };
    if items.is_empty() {
        return Err(refuse());
    }
    let mut acc = W::V::make(Made::Int(1));
    for it in &items {
        if !matches!(it.py(), Py::Int(_) | Py::Bool(_)) || it.number().is_none() {
            return Err(refuse());
        }
        acc = w.binop(&acc, BinOp::Mul, it, span)?;
    }
    Ok(acc)
}

/// `itertools.product(*iterables, repeat=)`: the list of tuples; `itertools.chain(*iterables)`: the list of items;
/// `itertools.zip_longest(*iterables, fillvalue=)`: the list of tuples. `repeat` must be an int (the functionalizer
/// first refuses one known only at run time).
pub fn itertools<'m, W: Walk<'m>>(
    w: &mut W,
    name: &str,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: Span,
) -> Result<W::V, W::Err> {
    let fail = |m: String| -> W::Err { Diagnostic::new(m).at(span).into() };
    if name == "chain" {
        // `chain(*iterables)`: their items one after the other, as a list (YOLOv3's
        // `chain(*[layer.parameters() for ...])`-style flattening of lists of lists).
        if let Some((k, _)) = kw.first() {
            return Err(fail(format!("chain() got an unexpected keyword argument '{k}'")));
        }
        let mut items = Vec::new();
        for v in pos {
            items.extend(w.iterate(v, span)?);
        }
        return Ok(W::V::make(Made::List(items)));
    }
    if name == "zip_longest" {
        // `zip_longest(*iterables, fillvalue=None)`: tuples as long as the longest, the shorter filled.
        let mut fill = W::V::make(Made::None);
        for (k, v) in kw {
            match k.as_str() {
                "fillvalue" => fill = v.clone(),
                _ => return Err(fail(format!("zip_longest() got an unexpected keyword argument '{k}'"))),
            }
        }
        let seqs = pos.iter().map(|v| w.iterate(v, span)).collect::<Result<Vec<_>, _>>()?;
        let n = seqs.iter().map(Vec::len).max().unwrap_or(0);
        let row = |i: usize| seqs.iter().map(|s| s.get(i).cloned().unwrap_or_else(|| fill.clone())).collect();
        return Ok(W::V::make(Made::List((0..n).map(|i| W::V::make(Made::Tuple(row(i)))).collect())));
    }
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
