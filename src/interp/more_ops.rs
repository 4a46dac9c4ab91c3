//! Ops optimizer steps, LLM decode steps and detection code reach for: `lerp`, `addcmul`/`addcdiv`,
//! `softplus`, `logsigmoid`, `cosine_similarity`, `binary_cross_entropy_with_logits`, `atan`, vector norms,
//! `einsum`, `index_copy`/`index_add`, and division with a rounding mode. Each is
//! written with PyTorch's formula in terms of the runtime's ops, the same composition the functionalizer builds
//! (`crate::functionalize::desugar`), so every engine computes the same thing.

use super::args::{AResult, Args};
use super::torch_ops::{cname, operand_arg, t};
use super::value::Value;
use crate::tensor::einsum::{self, Step};
use crate::tensor::ops::{self, Binary, Operand, Unary};
use crate::tensor::views::wrap_dim;
use crate::tensor::{index, reduce, DType, Scalar, Tensor};

fn bin(op: Binary, x: &Operand, y: &Operand) -> AResult<Tensor> {
    ops::binary(op, x, y)
}

fn tt(x: &Tensor) -> Operand {
    Operand::T(x.clone())
}

/// A Python float weight as PyTorch uses it: rounded to the tensor's dtype first (its opmath type for f32).
pub(crate) fn round_to(dt: DType, v: f64) -> f64 {
    if dt == DType::F32 {
        v as f32 as f64
    } else {
        v
    }
}

/// `x / y` rounded toward zero, in the promoted dtype: `trunc(x / y)` for floats; for integers `x // y` plus one
/// where the remainder is nonzero and the signs differ (exact for every i64, unlike a float division).
pub(crate) fn trunc_div(x: &Operand, y: &Operand) -> AResult<Tensor> {
    let (c, _) = ops::binary_dtypes(Binary::Add, x, y)?;
    if c.is_float() {
        return ops::unary(Unary::Trunc, &bin(Binary::Div, x, y)?);
    }
    let q = bin(Binary::FloorDiv, x, y)?;
    let r = bin(Binary::Fmod, x, y)?;
    let zero = Operand::S(Scalar::I(0));
    let nonzero = bin(Binary::Ne, &tt(&r), &zero)?;
    let signs = bin(Binary::BitXor, &Operand::T(bin(Binary::Lt, x, &zero)?), &Operand::T(bin(Binary::Lt, y, &zero)?))?;
    let adj = bin(Binary::BitAnd, &tt(&nonzero), &tt(&signs))?.to_dtype(q.dtype())?;
    bin(Binary::Add, &tt(&q), &tt(&adj))
}

fn float_input(op: &str, x: &Tensor) -> AResult<()> {
    if x.dtype().is_float() {
        Ok(())
    } else {
        Err(format!("\"{op}\" not implemented for '{}'", x.dtype().name()))
    }
}

/// The `p` of a norm: a number, `inf`/`-inf`, or `'fro'` (2).
fn norm_p(v: Option<&Value>, default: f64, op: &str) -> AResult<f64> {
    match v {
        None => Ok(default),
        Some(Value::Str(s)) if s.as_ref() == "fro" => Ok(2.0),
        Some(Value::Str(s)) => Err(format!("{op}(): p='{s}' (a matrix norm) is not supported; use a number")),
        Some(v) => v.as_scalar().map(|s| s.to_f64()).ok_or_else(|| format!("{op}(): p must be a number")),
    }
}

/// The vector `p`-norm over `dims` (all when `None`), PyTorch's special cases for p = 0, 1, 2 and +-inf.
pub(crate) fn vector_norm(x: &Tensor, p: f64, dims: Option<&[i64]>, keep: bool) -> AResult<Tensor> {
    if !x.dtype().is_float() {
        return Err(format!(
            "linalg.vector_norm: Expected a floating point or complex tensor as input. Got {}",
            x.dtype().name()
        ));
    }
    let dims = dims.filter(|d| !d.is_empty());
    let ab = ops::unary(Unary::Abs, x)?;
    if p.is_infinite() {
        return reduce::amax(&ab, dims, keep, p > 0.0);
    }
    if p == 0.0 {
        let nz = bin(Binary::Ne, &tt(x), &Operand::S(Scalar::I(0)))?.to_dtype(x.dtype())?;
        return reduce::sum(&nz, dims, keep, None);
    }
    if p == 1.0 {
        return reduce::sum(&ab, dims, keep, None);
    }
    if p == 2.0 {
        let sq = bin(Binary::Mul, &tt(x), &tt(x))?;
        return ops::unary(Unary::Sqrt, &reduce::sum(&sq, dims, keep, None)?);
    }
    let pw = bin(Binary::Pow, &tt(&ab), &Operand::S(Scalar::F(p)))?;
    bin(Binary::Pow, &Operand::T(reduce::sum(&pw, dims, keep, None)?), &Operand::S(Scalar::F(1.0 / p)))
}

/// The vector norm `torch.linalg.norm(x, ord, dim)` computes: 2 (Frobenius) without `ord` or with `'fro'`; `ord` for
/// one dim (or a 1-D input without `dim`). A matrix norm (a numeric `ord` over two dims, `'nuc'`) is refused.
pub(crate) fn linalg_norm_p(ord: Option<&Value>, ndim: usize, dims: Option<&[i64]>) -> AResult<f64> {
    let one_dim = match dims {
        Some(d) => d.len() == 1,
        None => ndim == 1,
    };
    match ord {
        None => Ok(2.0),
        Some(Value::Str(s)) if s.as_ref() == "fro" && !one_dim => Ok(2.0),
        Some(v) if one_dim && v.as_scalar().is_some() => Ok(v.as_scalar().map(|s| s.to_f64()).unwrap_or(2.0)),
        Some(_) => Err("linalg.norm: a matrix norm (this ord over two dims) is not supported; use torch.linalg.vector_norm or a number ord over one dim".into()),
    }
}

/// `cosine_similarity` as PyTorch computes it: each input divided by its 2-norm over `dim` (clamped below at eps),
/// then the product summed over `dim`.
fn cosine_similarity(a: &Args) -> AResult<Value> {
    let (x, y) = (a.tensor(0, "x1")?, a.tensor(1, "x2")?);
    cosine_check(x.dtype(), y.dtype(), &x.shape, &y.shape)?;
    let dim = a.int_or(2, "dim", 1)?;
    let eps = a.opt(3, "eps").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(1e-8);
    let unit = |v: &Tensor| -> AResult<Tensor> {
        let n = vector_norm(v, 2.0, Some(&[dim]), true)?;
        let n = bin(Binary::Maximum, &tt(&n), &Operand::S(Scalar::F(eps)))?;
        bin(Binary::Div, &tt(v), &tt(&n))
    };
    let prod = bin(Binary::Mul, &tt(&unit(&x)?), &tt(&unit(&y)?))?;
    t(reduce::sum(&prod, Some(&[dim]), false, None)?)
}

/// `logsigmoid` as PyTorch's CPU kernel computes it: min(x, 0) - log1p(exp(-|x|)).
fn log_sigmoid(a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    float_input("log_sigmoid_cpu", &x)?;
    let e = ops::unary(Unary::Exp, &ops::unary(Unary::Neg, &ops::unary(Unary::Abs, &x)?)?)?;
    let min0 = bin(Binary::Minimum, &tt(&x), &Operand::S(Scalar::F(0.0)))?;
    t(bin(Binary::Sub, &tt(&min0), &tt(&ops::unary(Unary::Log1p, &e)?))?)
}

/// `torch.searchsorted(boundaries, input, right=, side=, out_int32=)`: for each value, how many boundaries of its
/// row are below it (`right`: at most it), which is the insertion point where the boundaries are sorted. The
/// functional engines compose the same count (`functionalize::desugar`).
fn searchsorted(a: &Args) -> AResult<Value> {
    let b = a.tensor(0, "sorted_sequence")?;
    let v = match a.req(1, "input")? {
        Value::Tensor(t) => t.clone(),
        other => {
            let s = other.as_scalar().ok_or("searchsorted(): argument 'input' must be Tensor or Number")?;
            Tensor::scalar(s.default_dtype(), s)?
        }
    };
    let right = searchsorted_side(a.opt(99, "right").and_then(Value::as_scalar), a.opt(99, "side"))?;
    if a.opt(99, "sorter").is_some_and(|s| !matches!(s, Value::None)) {
        return Err("searchsorted(sorter=) is not supported".into());
    }
    searchsorted_check(&b.shape, &v.shape)?;
    let n = *b.shape.last().unwrap_or(&1);
    let (bs, vs) = (b.contiguous_copy().to_f64_vec(), v.contiguous_copy().to_f64_vec());
    let per_row = v.shape.last().copied().unwrap_or(1).max(1);
    let counts: Vec<f64> = (vs.iter().enumerate())
        .map(|(i, &x)| {
            let row = if b.shape.len() > 1 { i / per_row } else { 0 };
            let bound = &bs[row * n..(row + 1) * n];
            bound.iter().filter(|&&y| if right { y <= x } else { y < x }).count() as f64
        })
        .collect();
    let dt = if a.opt(99, "out_int32").and_then(Value::as_scalar).is_some_and(|s| s.to_f64() != 0.0) {
        DType::I32
    } else {
        DType::I64
    };
    t(Tensor::from_f64(dt, &v.shape, &counts)?)
}

/// `right=` and `side=` of `searchsorted`, as PyTorch checks them: whether values equal to a boundary go after it.
pub(crate) fn searchsorted_side(right: Option<Scalar>, side: Option<&Value>) -> AResult<bool> {
    let right = right.is_some_and(|r| r.to_f64() != 0.0);
    match side {
        None | Some(Value::None) => Ok(right),
        Some(Value::Str(s)) if s.as_ref() == "left" && !right => Ok(false),
        Some(Value::Str(s)) if s.as_ref() == "right" => Ok(true),
        Some(Value::Str(s)) if s.as_ref() == "left" => {
            Err("torch.searchsorted(): side and right can't be set to opposites, got side of left while right was True"
                .into())
        }
        Some(other) => {
            Err(format!("torch.searchsorted(): side can only be 'left' or 'right' but got {}", other.type_name()))
        }
    }
}

/// PyTorch's shape checks of `searchsorted`: a 1-D sequence, or one whose leading dims are the input's.
pub(crate) fn searchsorted_check(b: &[usize], v: &[usize]) -> AResult<()> {
    if b.is_empty() {
        return Err(
            "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 dimension".into()
        );
    }
    if b.len() > 1 && v.is_empty() {
        return Err(format!("torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension is 1, but we got boundaries tensor dim({}) and input value's dim(0) numel(1)", b.len()));
    }
    if b.len() > 1 && (b.len() != v.len() || b[..b.len() - 1] != v[..v.len() - 1]) {
        return Err(format!("torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries tensor and input value tensor must match, but we got boundaries tensor {b:?} and input value tensor {v:?}"));
    }
    Ok(())
}

/// `lerp` with PyTorch's two formulas: `start + weight * (end - start)` where |weight| < 0.5, else
/// `end - (end - start) * (1 - weight)`.
fn lerp(a: &Args) -> AResult<Value> {
    let s = a.tensor(0, "input")?;
    let e = a.tensor(1, "end")?;
    float_input("lerp_kernel_scalar", &s)?;
    if e.dtype() != s.dtype() {
        return Err(format!("expected dtype {} for `end` but got dtype {}", cname(s.dtype()), cname(e.dtype())));
    }
    let diff = bin(Binary::Sub, &tt(&e), &tt(&s))?;
    match a.req(2, "weight")? {
        Value::Tensor(w) => {
            if w.dtype() != s.dtype() {
                return Err(format!(
                    "expected dtype {} for `weight` but got dtype {}",
                    cname(s.dtype()),
                    cname(w.dtype())
                ));
            }
            let small = bin(Binary::Lt, &Operand::T(ops::unary(Unary::Abs, w)?), &Operand::S(Scalar::F(0.5)))?;
            let lo = bin(Binary::Add, &tt(&s), &Operand::T(bin(Binary::Mul, &tt(w), &tt(&diff))?))?;
            let om = bin(Binary::Sub, &Operand::S(Scalar::I(1)), &tt(w))?;
            let hi = bin(Binary::Sub, &tt(&e), &Operand::T(bin(Binary::Mul, &tt(&diff), &tt(&om))?))?;
            t(ops::where_(&small, &tt(&lo), &tt(&hi))?)
        }
        v => {
            let w = v.as_scalar().ok_or("lerp(): argument 'weight' must be Tensor or Number")?.to_f64();
            let w = round_to(s.dtype(), w);
            if w.abs() < 0.5 {
                let step = bin(Binary::Mul, &Operand::S(Scalar::F(w)), &tt(&diff))?;
                t(bin(Binary::Add, &tt(&s), &tt(&step))?)
            } else {
                let om = round_to(s.dtype(), 1.0 - w);
                let step = bin(Binary::Mul, &tt(&diff), &Operand::S(Scalar::F(om)))?;
                t(bin(Binary::Sub, &tt(&e), &tt(&step))?)
            }
        }
    }
}

/// `binary_cross_entropy_with_logits`, as PyTorch computes it.
fn bce_with_logits(a: &Args) -> AResult<Value> {
    let (x, y, reduction) = bce_args(a)?;
    // PyTorch's formula: (1 - y) * x - log_sigmoid(x) [* ((pos_weight - 1) * y + 1)] [* weight], with
    // log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)).
    let one = Operand::S(Scalar::I(1));
    let e = ops::unary(Unary::Exp, &ops::unary(Unary::Neg, &ops::unary(Unary::Abs, &x)?)?)?;
    let min0 = bin(Binary::Minimum, &tt(&x), &Operand::S(Scalar::F(0.0)))?;
    let mut log_sig = bin(Binary::Sub, &tt(&min0), &tt(&ops::unary(Unary::Log1p, &e)?))?;
    if let Some(pw) = a.opt(usize::MAX, "pos_weight") {
        let Value::Tensor(pw) = pw else {
            return Err("binary_cross_entropy_with_logits(): pos_weight must be a Tensor".into());
        };
        let lw = bin(Binary::Add, &tt(&bin(Binary::Mul, &tt(&bin(Binary::Sub, &tt(&pw), &one)?), &tt(&y))?), &one)?;
        log_sig = bin(Binary::Mul, &tt(&log_sig), &tt(&lw))?;
    }
    let mut loss =
        bin(Binary::Sub, &tt(&bin(Binary::Mul, &tt(&bin(Binary::Sub, &one, &tt(&y))?), &tt(&x))?), &tt(&log_sig))?;
    if let Some(w) = a.opt(usize::MAX, "weight") {
        let Value::Tensor(w) = w else {
            return Err("binary_cross_entropy_with_logits(): weight must be a Tensor".into());
        };
        loss = bin(Binary::Mul, &tt(&loss), &tt(&w))?;
    }
    t(match reduction {
        "none" => loss,
        "sum" => reduce::sum(&loss, None, false, None)?,
        _ => reduce::mean(&loss, None, false, None)?,
    })
}

/// `isclose`'s and `allclose`'s `rtol` and `atol` (1e-5 and 1e-8 by default), numbers (both engines).
fn close_tolerances(a: &Args) -> AResult<(f64, f64)> {
    let num = |i: usize, n: &str, d: f64| match a.opt(i, n) {
        None => Ok(d),
        Some(v) => {
            v.as_scalar().map(|s| s.to_f64()).ok_or_else(|| format!("{}(): argument '{n}' must be a number", a.name))
        }
    };
    Ok((num(2, "rtol", 1e-5)?, num(3, "atol", 1e-8)?))
}

/// `einsum`: the equation and its operands.
fn einsum(a: &Args) -> AResult<Value> {
    let tensor = |v| if let Value::Tensor(t) = v { Some(t) } else { None };
    let (eq, mut slots) = super::pyvalue::einsum_operands(a.req(0, "equation")?, &a.pos, tensor)?;
    let shapes: Vec<Vec<usize>> = slots.iter().map(|x| x.shape.clone()).collect();
    for step in einsum::plan(&eq, &shapes)? {
        match step {
            Step::Prep { slot, expand, sum, perm, reshape } => {
                let mut x = slots[slot].clone();
                if let Some(e) = expand {
                    x = x.expand(&e)?;
                }
                if !sum.is_empty() {
                    x = reduce::sum(&x, Some(&sum), false, None)?;
                }
                if !einsum::is_identity(&perm) {
                    x = x.permute(&perm)?;
                }
                if let Some(r) = reshape {
                    x = x.reshape(&r)?;
                }
                slots[slot] = x;
            }
            Step::Matmul { a: i, b: j, reshape } => {
                if slots[i].dtype() != slots[j].dtype() {
                    return Err(format!(
                        "einsum(): operands must have the same dtype, got {} and {}",
                        slots[i].dtype().name(),
                        slots[j].dtype().name()
                    ));
                }
                slots[i] = reduce::matmul(&slots[i], &slots[j])?.reshape(&reshape)?;
            }
        }
    }
    t(slots.swap_remove(0))
}

/// `index_copy` and `index_add`: a scatter along one dim, checked as PyTorch checks it.
fn index_along(name: &str, a: &Args) -> AResult<Value> {
    let x = a.tensor(0, "input")?;
    let d = wrap_dim(a.int(1, "dim")?, x.dim().max(1))?;
    let ix = a.tensor(2, "index")?;
    let src = a.tensor(3, "source")?;
    let view = index::check_index_along(name, &x.shape, x.dtype(), d, &ix.shape, ix.dtype(), &src.shape, src.dtype())?;
    let alpha = if name == "index_add" { a.opt(4, "alpha") } else { None };
    let src = match alpha {
        Some(v) => {
            let al = v.as_scalar().ok_or("index_add(): argument 'alpha' must be a number")?;
            bin(Binary::Mul, &tt(&src), &Operand::S(al))?.to_dtype(x.dtype())?
        }
        None => src,
    };
    let sizes: Vec<i64> = src.shape.iter().map(|&n| n as i64).collect();
    let idx = ix.reshape(&view)?.expand(&sizes)?;
    let out = x.contiguous_copy();
    let offs = index::along_dim_offsets(&out, d, &idx)?;
    // Duplicate indices: index_copy keeps the last source slice (PyTorch leaves it unspecified; its CPU
    // kernel does the same), index_add sums them.
    index::scatter_values(&out, &offs, src.scalars(), name == "index_add");
    t(out)
}

pub(super) fn more_op(name: &str, a: &Args) -> AResult<Value> {
    match name {
        "lerp" => lerp(a),
        "searchsorted" => searchsorted(a),
        "addcmul" | "addcdiv" => {
            let x = operand_arg(a, 0, "input")?;
            // PyTorch's deprecated overload `addcmul(input, value, tensor1, tensor2)`, as older optimizers write it.
            // `value` is a Number, which a 0-d tensor converts to; in the current overload it is keyword-only.
            let old = a.pos.len() == 4 && a.pos[1].as_number().is_some();
            if a.pos.len() > 3 && !old {
                return Err(format!("{name}() takes 3 positional arguments but {} were given", a.pos.len()).into());
            }
            let (at, value) = if old { (2, a.pos.get(1)) } else { (1, a.keyword("value")) };
            let p = a.tensor(at, "tensor1")?;
            let q = a.tensor(at + 1, "tensor2")?;
            if name == "addcdiv" && !p.dtype().is_float() && !q.dtype().is_float() {
                return Err("Integer division with addcdiv is no longer supported, and in a future release addcdiv will perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as (input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the latter implementation: (input + value * tensor1 / tensor2), for all dtypes.".into());
            }
            // PyTorch's order: self + value * tensor1 OP tensor2.
            let scaled = match value {
                Some(v) => {
                    let s = v.as_number().ok_or_else(|| {
                        format!(
                            "{name}(): argument 'value' must be Number, not {}",
                            super::pyvalue::PyValue::type_name(v)
                        )
                    })?;
                    bin(Binary::Mul, &Operand::S(s), &tt(&p))?
                }
                None => p,
            };
            let op = if name == "addcmul" { Binary::Mul } else { Binary::Div };
            let r = bin(op, &tt(&scaled), &tt(&q))?;
            t(bin(Binary::Add, &x, &tt(&r))?)
        }
        "softplus" => {
            let x = a.tensor(0, "input")?;
            float_input("softplus_cpu", &x)?;
            let beta = a.opt(1, "beta").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(1.0);
            let thr = a.opt(2, "threshold").and_then(|v| v.as_scalar()).map(|s| s.to_f64()).unwrap_or(20.0);
            let xb = if beta == 1.0 { x.clone() } else { bin(Binary::Mul, &tt(&x), &Operand::S(Scalar::F(beta)))? };
            let big = bin(Binary::Gt, &tt(&xb), &Operand::S(Scalar::F(thr)))?;
            let sp = ops::unary(Unary::Log1p, &ops::unary(Unary::Exp, &xb)?)?;
            let sp = if beta == 1.0 { sp } else { bin(Binary::Div, &tt(&sp), &Operand::S(Scalar::F(beta)))? };
            t(ops::where_(&big, &tt(&x), &tt(&sp))?)
        }
        "cosine_similarity" => cosine_similarity(a),
        "isin" => isin(a),
        "l1_loss" | "mse_loss" | "smooth_l1_loss" => pointwise_loss(name, a),
        "scaled_dot_product_attention" => sdpa(a),
        "logsigmoid" => log_sigmoid(a),
        "binary_cross_entropy_with_logits" => bce_with_logits(a),
        "cross_entropy" | "nll_loss" | "kl_div" => super::losses::loss(name, a),
        "isclose" | "allclose" => {
            let (x, y) = (a.tensor(0, "input")?, operand_arg(a, 1, "other")?);
            let (rtol, atol) = close_tolerances(a)?;
            super::losses::spelled(name, &a.name)?;
            let other = match &y {
                Operand::T(t) => Some(t.dtype()),
                _ => None,
            };
            super::losses::close_checks(name, x.dtype(), other, rtol, atol)?;
            let equal_nan = a.bool_or(4, "equal_nan", false)?;
            // PyTorch's formula: equal, or both NaN (with equal_nan), or a finite |x - y| <= atol + |rtol * y|.
            let mut close = bin(Binary::Eq, &tt(&x), &y)?;
            if equal_nan {
                let nan = bin(Binary::Ne, &tt(&x), &tt(&x))?;
                let both = bin(Binary::BitAnd, &tt(&nan), &tt(&bin(Binary::Ne, &y, &y)?))?;
                close = bin(Binary::BitOr, &tt(&close), &tt(&both))?;
            }
            let allowed = bin(
                Binary::Add,
                &Operand::S(Scalar::F(atol)),
                &tt(&ops::unary(Unary::Abs, &bin(Binary::Mul, &Operand::S(Scalar::F(rtol)), &y)?)?),
            )?;
            let err = ops::unary(Unary::Abs, &bin(Binary::Sub, &tt(&x), &y)?)?;
            let finite = bin(Binary::Lt, &tt(&err), &Operand::S(Scalar::F(f64::INFINITY)))?;
            let within = bin(Binary::BitAnd, &tt(&finite), &tt(&bin(Binary::Le, &tt(&err), &tt(&allowed))?))?;
            close = bin(Binary::BitOr, &tt(&close), &tt(&within))?;
            if name == "allclose" {
                return Ok(Value::Bool(close.scalars().iter().all(|v| v.to_bool())));
            }
            t(close)
        }
        "atan" | "arctan" => {
            let x = a.tensor(0, "input")?;
            t(bin(Binary::Atan2, &tt(&x), &Operand::S(Scalar::I(1)))?)
        }
        "matrix_exp" => t(crate::tensor::linalg::matrix_exp(&a.tensor(0, "A")?)?),
        "vector_norm" | "norm" => {
            // `dtype=`: the input is cast to it first (fairseq's `torch.norm(g, p=2, dtype=torch.float32)`).
            let x = match a.dtype(4, "dtype")? {
                Some(d) => a.tensor(0, "input")?.to_dtype(d)?,
                None => a.tensor(0, "input")?,
            };
            let p = match name {
                "norm" => norm_p(a.opt(1, "p"), 2.0, "norm")?,
                _ => norm_p(a.opt(1, "ord"), 2.0, "linalg.vector_norm")?,
            };
            t(vector_norm(&x, p, a.dims(2, "dim")?.as_deref(), a.bool_or(3, "keepdim", false)?)?)
        }
        "linalg_norm" => {
            let x = a.tensor(0, "input")?;
            let dims = a.dims(2, "dim")?;
            let ord = a.opt(1, "ord").cloned();
            let p = linalg_norm_p(ord.as_ref(), x.dim(), dims.as_deref())?;
            t(vector_norm(&x, p, dims.as_deref(), a.bool_or(3, "keepdim", false)?)?)
        }
        "einsum" => einsum(a),
        "index_copy" | "index_add" => index_along(name, a),
        "bincount" => {
            let x = a.tensor(0, "input")?;
            let w = match a.opt(1, "weights") {
                None | Some(Value::None) => None,
                Some(_) => Some(a.tensor(1, "weights")?),
            };
            t(index::bincount(&x, w.as_ref(), a.int_or(2, "minlength", 0)?)?)
        }
        _ => super::nn_ops::nn_op(name, a),
    }
}

/// Whether `v` holds (itself, or inside a list, tuple or named tuple) a tensor with `t`'s storage and metadata:
/// possibly the same Python object, which an in-place shape change would change too.
impl<'m> super::exec::Interp<'m> {
    /// `X.squeeze_(...)` / `X.unsqueeze_(...)`: the tensor object's own shape changes. Where `X` is a local name,
    /// it is rebound to the new view; where it is a temporary (`g.abs().add_(eps).unsqueeze_(0)`), only the value of
    /// the expression changes. Every other view keeps its shape. Refused where another name, list, dict, constant
    /// may hold the same tensor object (PyTorch would change the shape seen there too): anything in a helper; a
    /// tensor with the same storage and metadata as any other binding.
    pub(super) fn shape_inplace(
        &mut self,
        frame: &mut super::exec::Frame,
        obj: &crate::frontend::ast::Expr,
        name: &str,
        a: Args,
    ) -> Result<Value, crate::diag::Diagnostic> {
        let span = a.span;
        let base = &name[..name.len() - 1];
        let local = match &obj.kind {
            crate::frontend::ast::ExprKind::Name(n) => Some(n),
            _ => None,
        };
        let same = |x: &Value, y: &Value| match (x, y) {
            (Value::Tensor(u), Value::Tensor(t)) => {
                std::rc::Rc::ptr_eq(&u.buf, &t.buf)
                    && u.shape == t.shape
                    && u.strides == t.strides
                    && u.offset == t.offset
            }
            _ => false,
        };
        let target =
            super::pyvalue::shape_inplace_target(name, local, a.pos.first(), self.depth, frame, &self.globals, same)
                .map_err(super::exec::tensor_err(span))?;
        let r = self.torch_op(base, &a, true).map_err(super::exec::tensor_err(span))?;
        // A program parameter's own object: the caller's tensor changes shape (see `Interp::params`).
        if let (Value::Tensor(new), 1) = (&r, self.depth) {
            let is_target = |o: &Tensor| same(&target, &Value::Tensor(o.clone()));
            let at = super::pyvalue::param_object_target(&self.params, name, local, is_target)
                .map_err(super::exec::tensor_err(span))?;
            if let Some(i) = at {
                (self.params[i].object, self.params[i].reshaped) = (new.clone(), true);
            }
        }
        if let Some(k) = a.unexpected() {
            return crate::diag::err(span, format!("unexpected keyword argument '{k}' for Tensor.{name}"));
        }
        if let Some(n) = local {
            frame.insert(n.clone(), r.clone());
        }
        Ok(r)
    }
}

/// `binary_cross_entropy_with_logits`'s input and target (same shape, floating point) and its reduction.
/// `weight`, `reduction` and `pos_weight` must be keywords: `torch.binary_cross_entropy_with_logits` and
/// `torch.nn.functional.binary_cross_entropy_with_logits` order their positional arguments differently.
fn bce_args(a: &Args) -> AResult<(Tensor, Tensor, &'static str)> {
    loss_args(a, "binary_cross_entropy_with_logits", Some("log_sigmoid_cpu"), "weight, reduction and pos_weight")
}

/// The input, target and reduction of a loss `name` whose kernel (`kernel`, for PyTorch's message on integer
/// inputs) takes floats: input and target of one shape and dtype (broadcasting and mixed dtypes are refused by
/// name), the options after them by keyword (`keywords`), reduction `mean` by default.
pub(crate) fn loss_args(
    a: &Args,
    name: &str,
    kernel: Option<&str>,
    keywords: &str,
) -> AResult<(Tensor, Tensor, &'static str)> {
    let (x, y) = (a.tensor(0, "input")?, a.tensor(1, "target")?);
    let (reduction, legacy) = loss_keywords(a);
    let shapes = (&x.shape[..], &y.shape[..]);
    let r = loss_check(name, kernel, keywords, a.pos.len(), legacy, shapes, (x.dtype(), y.dtype()), reduction)?;
    Ok((x, y, r))
}

/// A loss's `reduction` keyword (a string, or the type name of something else) and the reduction its deprecated
/// `size_average`/`reduce` give ([`super::losses::legacy_reduction`]), in either engine's arguments.
pub(crate) fn loss_keywords<V: super::pyvalue::PyValue>(
    a: &super::args::CallArgs<V>,
) -> (Option<Result<String, &'static str>>, Result<Option<&'static str>, String>) {
    let reduction = a.opt(usize::MAX, "reduction").map(|v| match v.py() {
        super::pyvalue::Py::Str(s) => Ok(s.to_string()),
        _ => Err(v.type_name()),
    });
    (reduction, super::losses::legacy_reduction(a.opt(usize::MAX, "size_average"), a.opt(usize::MAX, "reduce")))
}

/// The checks of [`loss_args`], which the functionalizer's losses make too, on what they read: `npos` positional
/// arguments, whether a deprecated `size_average`/`reduce` was given, the shapes and dtypes of input and target, and
/// the reduction given (a string, or the type name of something else). With `kernel` (BCE's, whose checks PyTorch
/// makes) the messages are PyTorch's; without it (the pointwise losses, which PyTorch broadcasts and runs on
/// integers) they state funcfuse's own limits.
#[allow(clippy::too_many_arguments)]
pub(crate) fn loss_check(
    name: &str,
    kernel: Option<&str>,
    keywords: &str,
    npos: usize,
    legacy: Result<Option<&'static str>, String>,
    (xs, ys): (&[usize], &[usize]),
    (dx, dy): (DType, DType),
    reduction: Option<Result<String, &str>>,
) -> AResult<&'static str> {
    if npos > 2 {
        return Err(format!("{name}(): pass {keywords} by keyword"));
    }
    let legacy = legacy.map_err(|m| format!("{name}(): {m}"))?;
    if xs != ys {
        let size = |s: &[usize]| format!("torch.Size({s:?})");
        return Err(if kernel.is_some() {
            format!("Target size ({}) must be the same as input size ({})", size(ys), size(xs))
        } else {
            format!(
                "{name}(): an input of shape {} and a target of shape {} are not supported (PyTorch broadcasts them, \
                 with a warning); give both the same shape",
                size(xs),
                size(ys)
            )
        });
    }
    if !dx.is_float() {
        return Err(if let Some(kernel) = kernel {
            format!("\"{kernel}\" not implemented for '{}'", dx.name())
        } else {
            format!("{name}() of {} tensors is not supported; convert them to a floating dtype", dx.name())
        });
    }
    if dx != dy {
        return Err(format!(
            "{name}(): an input of dtype {} and a target of dtype {} are not supported; give both the same dtype",
            dx.name(),
            dy.name()
        ));
    }
    if let Some(r) = legacy {
        return Ok(r); // PyTorch replaces `reduction` by the legacy one, whatever it was
    }
    match reduction {
        None => Ok("mean"),
        Some(Ok(s)) => match s.as_str() {
            "none" => Ok("none"),
            "mean" => Ok("mean"),
            "sum" => Ok("sum"),
            other => Err(format!("{other} is not a valid value for reduction")),
        },
        Some(Err(ty)) => Err(format!("{name}(): argument 'reduction' must be str, not {ty}")),
    }
}

/// `l1_loss`, `mse_loss` and `smooth_l1_loss` (`beta`, default 1), as PyTorch computes them: with `z = |x - y|`,
/// `z`, `(x - y)^2`, and `z < beta ? 0.5 * z * z / beta : z - 0.5 * beta` (`z` when beta is 0); then the reduction.
/// The functionalizer's `desugar::pointwise_loss` spells the same.
fn pointwise_loss(name: &str, a: &Args) -> AResult<Value> {
    let (x, y, reduction) = loss_args(a, name, None, "size_average, reduce and reduction")?;
    let d = bin(Binary::Sub, &tt(&x), &tt(&y))?;
    let loss = match name {
        "l1_loss" => ops::unary(Unary::Abs, &d)?,
        "mse_loss" => bin(Binary::Mul, &tt(&d), &tt(&d))?,
        _ => {
            let beta = match a.opt(usize::MAX, "beta") {
                None => 1.0,
                Some(v) => v.as_scalar().ok_or("smooth_l1_loss(): argument 'beta' must be a number")?.to_f64(),
            };
            if beta < 0.0 {
                return Err("smooth_l1_loss does not support negative values for beta.".into());
            }
            let z = ops::unary(Unary::Abs, &d)?;
            if beta == 0.0 {
                z
            } else {
                let small = bin(Binary::Lt, &tt(&z), &Operand::S(Scalar::F(beta)))?;
                let half_z = bin(Binary::Mul, &Operand::S(Scalar::F(0.5)), &tt(&z))?;
                let q = bin(Binary::Div, &tt(&bin(Binary::Mul, &tt(&half_z), &tt(&z))?), &Operand::S(Scalar::F(beta)))?;
                let l = bin(Binary::Sub, &tt(&z), &Operand::S(Scalar::F(0.5 * beta)))?;
                ops::where_(&small, &tt(&q), &tt(&l))?
            }
        }
    };
    t(match reduction {
        "none" => loss,
        "sum" => reduce::sum(&loss, None, false, None)?,
        _ => reduce::mean(&loss, None, false, None)?,
    })
}

/// What `cosine_similarity` accepts: inputs of one floating dtype and one shape (PyTorch's message for integers;
/// broadcasting and mixed dtypes are refused by name).
pub(crate) fn cosine_check(dx: DType, dy: DType, sx: &[usize], sy: &[usize]) -> AResult<()> {
    if dx != dy {
        return Err(format!(
            "cosine_similarity(): inputs of dtypes {} and {} are not supported; give both the same dtype",
            dx.name(),
            dy.name()
        ));
    }
    if !dx.is_float() {
        return Err(format!("expected common dtype to be floating point, yet common dtype is {}", dx.name()));
    }
    if sx != sy {
        return Err(format!(
            "cosine_similarity(): inputs of shapes {sx:?} and {sy:?} are not supported; expand them to one shape first"
        ));
    }
    Ok(())
}

/// `torch.isin(elements, test_elements, *, assume_unique=False, invert=False)`: every element compared with every
/// test element (`elements[..., None] == test_elements.flatten()`), then `any` over the last dim, as the
/// functionalizer's `desugar` spells it.
fn isin(a: &Args) -> AResult<Value> {
    let e = operand_arg(a, 0, "elements")?;
    let test = operand_arg(a, 1, "test_elements")?;
    a.bool_or(2, "assume_unique", false)?;
    let invert = a.bool_or(3, "invert", false)?;
    let hit = match (&e, &test) {
        (_, Operand::T(t)) => {
            let flat = t.reshape(&[-1])?;
            let e = match e {
                Operand::T(x) => Operand::T(x.unsqueeze(-1)?),
                scalar => scalar,
            };
            reduce::any_all(&bin(Binary::Eq, &e, &tt(&flat))?, Some(&[-1]), false, false)?
        }
        (Operand::T(_), scalar) => bin(Binary::Eq, &e, scalar)?,
        _ => return Err("isin(): at least one of elements and test_elements must be a tensor".into()),
    };
    t(if invert { ops::unary(Unary::LogicalNot, &hit)? } else { hit })
}

/// The checks of `scaled_dot_product_attention`'s options, shared by both engines: `dropout_p` must be 0 (dropout
/// is random), an explicit mask excludes `is_causal` (PyTorch's error), `enable_gqa` is not supported.
pub(crate) fn sdpa_options(
    dropout_p: Option<f64>,
    is_causal: bool,
    has_mask: bool,
    enable_gqa: bool,
) -> Result<(), String> {
    if dropout_p.is_some_and(|p| p != 0.0) {
        return Err("scaled_dot_product_attention(): dropout_p other than 0 is random; pass 0.0".into());
    }
    if is_causal && has_mask {
        return Err("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True".into());
    }
    if enable_gqa {
        return Err(
            "scaled_dot_product_attention(): enable_gqa is not supported; repeat_interleave key and value".into()
        );
    }
    Ok(())
}

/// `F.scaled_dot_product_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None)`:
/// `softmax(q @ k^T * scale + bias) @ v` with `scale = 1/sqrt(E)` by default and the bias `-inf` where a boolean
/// mask (or the causal mask) is false, or a float mask added; a row whose scores are all `-inf` gives zeros, as
/// PyTorch 2.15's CPU kernel does (a NaN row stays NaN). The functionalizer's `desugar::sdpa` spells the same.
fn sdpa(a: &Args) -> AResult<Value> {
    let (q, k, v) = (a.tensor(0, "query")?, a.tensor(1, "key")?, a.tensor(2, "value")?);
    let mask = match a.opt(3, "attn_mask") {
        None | Some(Value::None) => None,
        Some(Value::Tensor(m)) => Some(m.clone()),
        Some(other) => {
            return Err(format!(
                "scaled_dot_product_attention(): attn_mask must be a Tensor, not {}",
                other.type_name()
            ))
        }
    };
    let dropout = match a.opt(4, "dropout_p") {
        None => None,
        Some(x) => Some(x.as_scalar().ok_or("scaled_dot_product_attention(): dropout_p must be a number")?.to_f64()),
    };
    let causal = a.bool_or(5, "is_causal", false)?;
    let scale = match a.opt(6, "scale") {
        None | Some(Value::None) => None,
        Some(x) => Some(x.as_scalar().ok_or("scaled_dot_product_attention(): scale must be a number")?.to_f64()),
    };
    sdpa_options(dropout, causal, mask.is_some(), a.bool_or(7, "enable_gqa", false)?)?;
    if q.dim() < 2 || k.dim() < 2 || v.dim() < 2 {
        return Err("scaled_dot_product_attention(): query, key and value need at least 2 dims".into());
    }
    let e = *q.shape.last().expect("2 dims");
    let scale = scale.unwrap_or(1.0 / (e as f64).sqrt());
    let scores = reduce::matmul(&q, &k.transpose(-2, -1)?)?;
    let scores = bin(Binary::Mul, &tt(&scores), &Operand::S(Scalar::F(scale)))?;
    let (l, s_len) = (q.shape[q.dim() - 2], k.shape[k.dim() - 2]);
    let keep = if causal {
        let ones = Tensor::full(DType::Bool, &[l, s_len], Scalar::B(true))?;
        Some(reduce::triangle(&ones, 0, false)?)
    } else {
        mask.clone().filter(|m| m.dtype() == DType::Bool)
    };
    let scores = match (&keep, &mask) {
        (Some(keep), _) => ops::where_(keep, &tt(&scores), &Operand::S(Scalar::F(f64::NEG_INFINITY)))?,
        (None, Some(m)) => bin(Binary::Add, &tt(&scores), &tt(m))?,
        (None, None) => scores,
    };
    let p = reduce::softmax(&scores, -1, None, false)?;
    let out = reduce::matmul(&p, &v)?;
    let live = bin(
        Binary::Ne,
        &tt(&reduce::amax(&scores, Some(&[-1]), true, true)?),
        &Operand::S(Scalar::F(f64::NEG_INFINITY)),
    )?;
    t(ops::where_(&live, &tt(&out), &Operand::S(Scalar::F(0.0)))?)
}
