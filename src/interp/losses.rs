//! Classification losses as PyTorch computes them: `cross_entropy` (class indices or class probabilities),
//! `nll_loss` and `kl_div`, composed of the runtime's ops. The functionalizer builds the same compositions
//! (`crate::functionalize::losses`); the options both accept, and their refusals, are checked here once
//! ([`options`]).
//!
//! With class indices, a row whose target is `ignore_index` contributes 0 and is not counted by the mean (all rows
//! ignored: 0 / 0, NaN, as PyTorch gives). Supported shapes: input `[N, C]` with target `[N]`, and input `[C]` with a
//! 0-dim target. Class weights and label smoothing are refused by name.

use super::args::{AResult, Args};
use super::torch_ops::t;
use super::value::Value;
use crate::tensor::ops::{self, Binary, Operand, Unary};
use crate::tensor::{reduce, DType, Scalar, Tensor};

/// What a loss call asks beyond input and target, read from its arguments by either engine.
pub(crate) struct Given<'a> {
    /// A class weight tensor was given (`weight=`).
    pub weight: bool,
    /// A `label_smoothing` other than a literal 0 was given (cross entropy only).
    pub smoothing: bool,
    /// The reduction given: a string, or the type name of something else.
    pub reduction: Option<Result<&'a str, &'static str>>,
    /// The reduction a deprecated `size_average` or `reduce` gives, where one was given
    /// ([`legacy_reduction`]).
    pub legacy: Result<Option<&'static str>, String>,
}

/// The reduction of loss `name`, after the checks both engines make: no class weights, no label smoothing, no
/// deprecated arguments, and a reduction PyTorch knows (`batchmean` for `kl_div` only).
pub(crate) fn options(name: &str, g: &Given) -> Result<&'static str, String> {
    if g.weight {
        return Err(format!("{name}(): class weights (`weight=`) are not supported"));
    }
    if g.smoothing {
        return Err(format!("{name}(): label_smoothing is not supported"));
    }
    if let Some(r) = g.legacy.clone().map_err(|m| format!("{name}(): {m}"))? {
        return Ok(r); // PyTorch replaces `reduction` by the legacy one, whatever it was
    }
    match g.reduction {
        None => Ok("mean"),
        Some(Ok("mean")) => Ok("mean"),
        Some(Ok("sum")) => Ok("sum"),
        Some(Ok("none")) => Ok("none"),
        Some(Ok("batchmean")) if name == "kl_div" => Ok("batchmean"),
        Some(Ok(other)) => Err(format!("{other} is not a valid value for reduction")),
        Some(Err(ty)) => Err(format!("{name}(): argument 'reduction' must be str, not {ty}")),
    }
}

/// Whether `full` (the call as written: `torch.nn.functional.kl_div`, or the bare name of a tensor method) is a
/// spelling PyTorch has for op `name` with these arguments: the losses only as `torch.nn.functional` functions
/// (`torch.kl_div` exists but takes its reduction as an int), `isclose`/`allclose` as `torch` functions and tensor
/// methods.
pub(crate) fn spelled(name: &str, full: &str) -> Result<(), String> {
    let ok = match name {
        "isclose" | "allclose" => full == name || full == format!("torch.{name}"),
        _ => full == format!("torch.nn.functional.{name}"),
    };
    if ok {
        return Ok(());
    }
    Err(match full.rsplit_once('.') {
        None => format!("'Tensor' object has no attribute '{name}'"),
        Some(_) if crate::frontend::torch_api::has(full) => {
            format!("`{full}` is not supported (it takes other arguments); use torch.nn.functional.{name}")
        }
        Some((module, _)) => format!("module '{module}' has no attribute '{name}'"),
    })
}

/// PyTorch's checks of `isclose`/`allclose`: `other` a tensor of the input's dtype, tolerances not negative; the
/// input floating point (integer inputs are not supported here).
pub(crate) fn close_checks(name: &str, x: DType, other: Option<DType>, rtol: f64, atol: f64) -> Result<(), String> {
    let Some(y) = other else {
        return Err(format!("{name}(): argument 'other' (position 2) must be Tensor"));
    };
    if x != y {
        return Err(format!(
            "{name}(): input and other must have one dtype, not {} and {}",
            x.annotation(),
            y.annotation()
        ));
    }
    if !x.is_float() {
        return Err(format!("{name}(): integer and bool tensors are not supported (only floating point)"));
    }
    if rtol < 0.0 || rtol.is_nan() {
        return Err(format!("rtol must be greater than or equal to zero, but got {rtol}"));
    }
    if atol < 0.0 || atol.is_nan() {
        return Err(format!("atol must be greater than or equal to zero, but got {atol}"));
    }
    Ok(())
}

/// Where each option of loss `name` sits positionally (PyTorch's signatures; `usize::MAX`: by keyword only).
pub(crate) struct Slots {
    pub weight: usize,
    pub smoothing: usize,
    pub reduction: usize,
    pub size_average: usize,
    pub reduce: usize,
}

pub(crate) fn slots(name: &str) -> Slots {
    let none = usize::MAX;
    match name {
        "kl_div" => Slots { weight: none, smoothing: none, reduction: 4, size_average: 2, reduce: 3 },
        "cross_entropy" => Slots { weight: 2, smoothing: 7, reduction: 6, size_average: 3, reduce: 5 },
        _ => Slots { weight: 2, smoothing: none, reduction: 6, size_average: 3, reduce: 5 },
    }
}

/// What a loss computes, decided by the checks both engines make on its input and target.
pub(crate) enum Form {
    /// `kl_div`: a target of the input's dtype.
    KlDiv,
    /// `cross_entropy` of class probabilities (a float target of the input's shape and dtype), over class dim `d`.
    Probabilities(i64),
    /// Class indices: an int64 target with one dim fewer than the input, whose class dim is `d` (1 for `[N, C]`, 0
    /// for `[C]`; other ranks are refused).
    Indices(i64),
}

pub(crate) fn form(name: &str, (xs, xd): (&[usize], DType), (ys, yd): (&[usize], DType)) -> Result<Form, String> {
    if !xd.is_float() {
        return Err(format!("{name}(): the input must be floating point, not {}", xd.annotation()));
    }
    if name == "kl_div" {
        return if yd == xd { Ok(Form::KlDiv) } else { Err("kl_div(): input and target must have one dtype".into()) };
    }
    let d = match xs.len() {
        1 => 0,
        2 => 1,
        r => return Err(format!("{name}(): an input of {r} dims is not supported (only [N, C] and [C])")),
    };
    if yd.is_float() && name == "cross_entropy" {
        return if ys == xs && yd == xd {
            Ok(Form::Probabilities(d))
        } else {
            Err("cross_entropy(): a float target must have the input's shape and dtype".into())
        };
    }
    if yd != DType::I64 || ys.len() + 1 != xs.len() || (d == 1 && ys[0] != xs[0]) {
        return Err(format!("{name}(): the target must be int64 class indices with one dim fewer than the input"));
    }
    Ok(Form::Indices(d))
}

fn given<'a>(a: &'a Args, name: &str) -> Given<'a> {
    let at = slots(name);
    Given {
        weight: a.opt(at.weight, "weight").is_some(),
        smoothing: !matches!(a.opt(at.smoothing, "label_smoothing"), None | Some(Value::Float(0.0) | Value::Int(0))),
        reduction: a.opt(at.reduction, "reduction").map(|v| match v {
            Value::Str(s) => Ok(&**s),
            other => Err(other.type_name()),
        }),
        legacy: legacy_reduction(a.opt(at.size_average, "size_average"), a.opt(at.reduce, "reduce")),
    }
}

fn tt(x: &Tensor) -> Operand {
    Operand::T(x.clone())
}

fn bin(op: Binary, x: &Tensor, y: &Operand) -> AResult<Tensor> {
    ops::binary(op, &tt(x), y)
}

fn reduced(loss: Tensor, reduction: &str, count: Option<Tensor>) -> AResult<Tensor> {
    match reduction {
        "none" => Ok(loss),
        "sum" => reduce::sum(&loss, None, false, None),
        _ => match count {
            Some(n) => bin(Binary::Div, &reduce::sum(&loss, None, false, None)?, &tt(&n)),
            None => reduce::mean(&loss, None, false, None),
        },
    }
}

/// `cross_entropy`, `nll_loss` or `kl_div` with the reference interpreter's arguments.
pub(crate) fn loss(name: &str, a: &Args) -> AResult<Value> {
    spelled(name, &a.name)?;
    let reduction = options(name, &given(a, name))?;
    let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "target")?);
    let (d, probabilities) = match form(name, (&x.shape, x.dtype()), (&y.shape, y.dtype()))? {
        Form::KlDiv => return t(kl_div(&x, &y, reduction, a.bool_or(5, "log_target", false)?)?),
        Form::Probabilities(d) => (d, true),
        Form::Indices(d) => (d, false),
    };
    let logp = if name == "cross_entropy" { reduce::softmax(&x, d, None, true)? } else { x.clone() };
    if probabilities {
        // Class probabilities: -sum over classes of target * log_softmax, the mean over the rows.
        let l = ops::unary(Unary::Neg, &reduce::sum(&bin(Binary::Mul, &logp, &tt(&y))?, Some(&[d]), false, None)?)?;
        return t(reduced(l, reduction, None)?);
    }
    let ignore = a.int_or(4, "ignore_index", -100)?;
    t(nll(&logp, &y, d, ignore, reduction, a.span)?)
}

/// -logp[row, target[row]] per row (0 where the target is `ignore`), reduced; the mean counts the rows not ignored.
fn nll(logp: &Tensor, y: &Tensor, d: i64, ignore: i64, reduction: &str, span: crate::diag::Span) -> AResult<Tensor> {
    let (logp, y) = if d == 0 { (logp.unsqueeze(0)?, y.unsqueeze(0)?) } else { (logp.clone(), y.clone()) };
    let skip = bin(Binary::Eq, &y, &Operand::S(Scalar::I(ignore)))?;
    let safe = ops::where_(&skip, &Operand::S(Scalar::I(0)), &tt(&y))?;
    let args = Args::new(
        vec![Value::Tensor(logp.clone()), Value::Int(1), Value::Tensor(safe.unsqueeze(1)?)],
        vec![],
        span,
        "gather".into(),
    );
    let Value::Tensor(picked) = super::extra_ops::extra_op("gather", &args)? else { unreachable!("a tensor") };
    let picked = picked.squeeze(Some(&[1]))?;
    let zero = Operand::S(Scalar::F(0.0));
    let l = ops::where_(&skip, &zero, &tt(&ops::unary(Unary::Neg, &picked)?))?;
    let kept = ops::unary(Unary::LogicalNot, &skip)?.to_dtype(logp.dtype())?;
    let out = reduced(l, reduction, Some(reduce::sum(&kept, None, false, None)?))?;
    if d == 0 && reduction == "none" {
        return out.squeeze(Some(&[0]));
    }
    Ok(out)
}

/// `kl_div`: xlogy(target, target) - target * input (0 where the target is 0), or exp(target) * (target - input)
/// with `log_target`; `batchmean` divides the sum by the input's first dim.
fn kl_div(x: &Tensor, y: &Tensor, reduction: &str, log_target: bool) -> AResult<Tensor> {
    let l = if log_target {
        bin(Binary::Mul, &ops::unary(Unary::Exp, y)?, &tt(&bin(Binary::Sub, y, &tt(x))?))?
    } else {
        let zero = bin(Binary::Eq, y, &Operand::S(Scalar::F(0.0)))?;
        let ylogy = ops::where_(
            &zero,
            &Operand::S(Scalar::F(0.0)),
            &tt(&bin(Binary::Mul, y, &tt(&ops::unary(Unary::Log, y)?))?),
        )?;
        bin(Binary::Sub, &ylogy, &tt(&bin(Binary::Mul, y, &tt(x))?))?
    };
    match reduction {
        "batchmean" => {
            let n = x.shape.first().copied().unwrap_or(1) as f64;
            bin(Binary::Div, &reduce::sum(&l, None, false, None)?, &Operand::S(Scalar::F(n)))
        }
        r => reduced(l, r, None),
    }
}

/// The reduction of a loss's deprecated `size_average` and `reduce` arguments, as PyTorch's
/// `_Reduction.legacy_get_string` makes it when either is given (it then replaces `reduction`): each `None` or
/// absent counts as true; both true is `mean`, `reduce` alone `sum`, `reduce=False` `none` (old code's
/// `F.smooth_l1_loss(x, y, size_average=False)` is a sum). `None` where neither is given. A value that is not a
/// bool, an int or `None` (a tensor: known only when the program runs) is refused.
pub(crate) fn legacy_reduction<V: super::pyvalue::PyValue>(
    size_average: Option<&V>,
    reduce: Option<&V>,
) -> Result<Option<&'static str>, String> {
    use super::pyvalue::Py;
    if size_average.is_none() && reduce.is_none() {
        return Ok(None);
    }
    let truth = |v: Option<&V>, name: &str| match v.map(|v| v.py()) {
        None | Some(Py::None) => Ok(true),
        Some(Py::Bool(b)) => Ok(b),
        Some(Py::Int(i)) => Ok(i != 0),
        Some(_) => Err(format!(
            "{name}= must be a bool known before the program runs, not {}",
            v.map_or("None", |v| v.type_name())
        )),
    };
    Ok(Some(match (truth(size_average, "size_average")?, truth(reduce, "reduce")?) {
        (true, true) => "mean",
        (false, true) => "sum",
        (_, false) => "none",
    }))
}
