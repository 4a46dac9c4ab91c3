//! The terms of `crate::interp::nn_ops`' ops, built the same way: `isnan`/`isinf`/`isfinite`, `nan_to_num`,
//! `hardswish`, `hardsigmoid`, `relu6`, `mish`, `F.pad` (constant), `repeat_interleave` (an int count), `baddbmm`
//! and `addmm`.

use super::desugar::ints;
use super::ops::{err, A};
use super::state::{diag, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::interp::nn_ops::{float_max, norm_dims, norm_eps, norm_param_dtypes, pad_layout};
use crate::ir::OpName;
use crate::tensor::ops::{Binary, Unary};
use crate::tensor::views::wrap_dim;
use crate::tensor::{DType, Scalar};

impl<'m> Fz<'m> {
    fn op(&mut self, name: &str, pos: Vec<FV>, span: Span) -> FR<FV> {
        self.torch(name, &A::new(pos, vec![], span, name.into()), false)
    }

    /// `beta * input + alpha * m` (`addmm`, `baddbmm`): the input ignored when `beta == 0`, a factor of 1 skipped.
    fn add_scaled(&mut self, a: &A, m: FV, span: Span) -> FR<FV> {
        let num = |v: Option<&FV>| v.map(|v| a.number(v).map(|s| s.to_f64())).unwrap_or(Some(1.0));
        let (beta_v, alpha_v) = (a.opt(3, "beta").cloned(), a.opt(4, "alpha").cloned());
        let (Some(beta), Some(alpha)) = (num(beta_v.as_ref()), num(alpha_v.as_ref())) else {
            return diag(span, format!("{}(): beta and alpha must be numbers known before the program runs", a.name));
        };
        let input = a.tensor(0, "input")?;
        let prod = if alpha == 1.0 { m } else { self.elementwise(Binary::Mul, &[m, alpha_v.expect("given")], span)? };
        let FV::Tensor(p) = &prod else { unreachable!("a matmul is a tensor") };
        crate::tensor::ops::broadcast_shapes(&input.shape, &p.shape).map_err(err(span))?;
        if beta == 0.0 {
            return Ok(prod);
        }
        let bias = if beta == 1.0 {
            FV::Tensor(input)
        } else {
            self.elementwise(Binary::Mul, &[FV::Tensor(input), beta_v.expect("given")], span)?
        };
        self.elementwise(Binary::Add, &[bias, prod], span)
    }

    /// `F.layer_norm` and `F.rms_norm`, composed as `crate::interp::nn_ops` composes them: the biased variance
    /// (or mean square) over the last dims, `rsqrt(var + eps)`, then the weight and bias.
    fn layer_norm(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let ns = match a.req(1, "normalized_shape")?.items() {
            Some(items) => items.iter().map(|v| a.int_of(v, "normalized_shape")).collect::<FR<Vec<i64>>>()?,
            None => {
                return diag(span, format!("{name}(): argument 'normalized_shape' (position 2) must be tuple of ints"))
            }
        };
        let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
            None => Ok(None),
            Some(FV::Tensor(t)) => Ok(Some(t.clone())),
            Some(o) => diag(span, format!("{name}(): argument '{k}' must be Tensor, not {}", o.type_name())),
        };
        let ln = name == "layer_norm";
        let w = tensor_at(2, "weight")?;
        let b = if ln { tensor_at(3, "bias")? } else { None };
        let dt = self.roots[x.root].dtype;
        let eps = match a.opt(if ln { 4 } else { 3 }, "eps") {
            Some(v) => match a.number(v) {
                Some(e) => e.to_f64(),
                None => return diag(span, format!("{name}(): eps must be a number known before the program runs")),
            },
            None => norm_eps(name, dt),
        };
        let pdt: Vec<_> = [&w, &b].iter().filter_map(|t| t.as_ref().map(|t| self.roots[t.root].dtype)).collect();
        norm_param_dtypes(name, dt, pdt.into_iter()).map_err(err(span))?;
        let shape_of = |t: &Option<super::state::TRef>| t.as_ref().map(|t| t.shape.clone());
        let dims =
            norm_dims(name, &x.shape, dt, &ns, shape_of(&w).as_deref(), shape_of(&b).as_deref()).map_err(err(span))?;
        let xv = FV::Tensor(x);
        let y = if ln {
            let FV::Tensor(xt) = &xv else { unreachable!() };
            let m = self.reduce_op(OpName::Mean, xt, &dims, true, None, span)?;
            self.elementwise(Binary::Sub, &[xv.clone(), m], span)?
        } else {
            xv
        };
        let sq = self.elementwise(Binary::Mul, &[y.clone(), y.clone()], span)?;
        let FV::Tensor(sq) = sq else { unreachable!("a product of tensors is a tensor") };
        let var = self.reduce_op(OpName::Mean, &sq, &dims, true, None, span)?;
        let ve = self.elementwise(Binary::Add, &[var, FV::Float(eps)], span)?;
        let r = self.unary(Unary::Rsqrt, &ve, span)?;
        let mut y = self.elementwise(Binary::Mul, &[y, r], span)?;
        if let Some(w) = w {
            y = self.elementwise(Binary::Mul, &[y, FV::Tensor(w)], span)?;
        }
        if let Some(b) = b {
            y = self.elementwise(Binary::Add, &[y, FV::Tensor(b)], span)?;
        }
        match &y {
            FV::Tensor(t) if self.roots[t.root].dtype != dt => self.op("to", vec![y, FV::DType(dt)], span),
            _ => Ok(y),
        }
    }

    /// `F.batch_norm`, composed as `crate::interp::nn_ops` composes it: per channel `alpha = weight / sqrt(var +
    /// eps)` and `beta = bias - mean * alpha`, then `x * alpha + beta`; in training mode with the batch's statistics,
    /// the running ones (where given) updated in place.
    fn batch_norm(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
            None => Ok(None),
            Some(FV::Tensor(t)) => Ok(Some(t.clone())),
            Some(o) => diag(span, format!("batch_norm(): argument '{k}' must be Tensor, not {}", o.type_name())),
        };
        let ps = [
            tensor_at(1, "running_mean")?,
            tensor_at(2, "running_var")?,
            tensor_at(3, "weight")?,
            tensor_at(4, "bias")?,
        ];
        let training = match a.opt(5, "training") {
            None => false,
            Some(FV::Bool(b)) => *b,
            Some(o) => {
                return diag(
                    span,
                    format!(
                        "batch_norm(): argument 'training' must be bool known before the program runs, not {}",
                        o.type_name()
                    ),
                )
            }
        };
        let number = |i: usize, k: &str, default: f64| match a.opt(i, k) {
            Some(v) => match a.number(v) {
                Some(e) => Ok(e.to_f64()),
                None => diag(span, format!("batch_norm(): {k} must be a number known before the program runs")),
            },
            None => Ok(default),
        };
        let (momentum, eps) = (number(6, "momentum", 0.1)?, number(7, "eps", 1e-5)?);
        let dt = self.roots[x.root].dtype;
        let info: Vec<Option<(&[usize], crate::tensor::DType)>> =
            ps.iter().map(|p| p.as_ref().map(|t| (&t.shape[..], self.roots[t.root].dtype))).collect();
        let names = ["running_mean", "running_var", "weight", "bias"];
        let c = crate::interp::nn_ops::batch_norm_channels(
            (&x.shape, dt),
            training,
            [(names[0], info[0]), (names[1], info[1]), (names[2], info[2]), (names[3], info[3])],
        )
        .map_err(err(span))?;
        let [running_mean, running_var, w, b] = ps;
        let mut view = vec![1i64; x.shape.len()];
        view[1] = c as i64;
        let (mean, var) = if training {
            let dims: Vec<i64> = (0..x.shape.len() as i64).filter(|&d| d != 1).collect();
            let mean = self.op("mean", vec![FV::Tensor(x.clone()), ints(&dims)], span)?;
            let m = self.op("reshape", vec![mean.clone(), ints(&view)], span)?;
            let centered = self.elementwise(Binary::Sub, &[FV::Tensor(x.clone()), m], span)?;
            let sq = self.elementwise(Binary::Mul, &[centered.clone(), centered], span)?;
            let var = self.op("mean", vec![sq, ints(&dims)], span)?;
            let n = (x.shape.iter().product::<usize>() / c) as f64;
            for (running, batch, scale) in [(&running_mean, &mean, 1.0), (&running_var, &var, n / (n - 1.0))] {
                if let Some(r) = running {
                    let batch = self.elementwise(Binary::Mul, &[batch.clone(), FV::Float(scale * momentum)], span)?;
                    let kept =
                        self.elementwise(Binary::Mul, &[FV::Tensor(r.clone()), FV::Float(1.0 - momentum)], span)?;
                    let new = self.elementwise(Binary::Add, &[batch, kept], span)?;
                    self.inplace("copy_", &A::new(vec![FV::Tensor(r.clone()), new], vec![], span, "copy_".into()))?;
                }
            }
            (mean, var)
        } else {
            (FV::Tensor(running_mean.expect("checked")), FV::Tensor(running_var.expect("checked")))
        };
        let ve = self.elementwise(Binary::Add, &[var, FV::Float(eps)], span)?;
        let sd = self.unary(Unary::Sqrt, &ve, span)?;
        let invstd = self.elementwise(Binary::Div, &[FV::Float(1.0), sd], span)?;
        let alpha = match w {
            Some(w) => self.elementwise(Binary::Mul, &[invstd, FV::Tensor(w)], span)?,
            None => invstd,
        };
        let ma = self.elementwise(Binary::Mul, &[mean, alpha.clone()], span)?;
        let beta = match b {
            Some(b) => self.elementwise(Binary::Sub, &[FV::Tensor(b), ma], span)?,
            None => self.elementwise(Binary::Sub, &[FV::Float(0.0), ma], span)?,
        };
        let alpha = self.op("reshape", vec![alpha, ints(&view)], span)?;
        let beta = self.op("reshape", vec![beta, ints(&view)], span)?;
        let y = self.elementwise(Binary::Mul, &[FV::Tensor(x), alpha], span)?;
        self.elementwise(Binary::Add, &[y, beta], span)
    }

    /// `torch.cdist`, composed as `crate::interp::nn_ops` composes it: the differences of every pair of rows, then
    /// the reduction over the columns that `p` selects.
    fn cdist(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let (x1, x2) = (a.tensor(0, "x1")?, a.tensor(1, "x2")?);
        let p = match a.opt(2, "p") {
            Some(v) => match a.number(v) {
                Some(p) => p.to_f64(),
                None => return diag(span, "cdist(): p must be a number known before the program runs"),
            },
            None => 2.0,
        };
        if a.opt(3, "compute_mode").is_some() {
            return diag(span, "cdist(): compute_mode is not supported");
        }
        let dt = self.roots[x1.root].dtype;
        let d2 = self.roots[x2.root].dtype;
        crate::interp::nn_ops::cdist_check((&x1.shape, dt), (&x2.shape, d2), p).map_err(err(span))?;
        let u1 = self.tview(&x1, |t| t.unsqueeze(-2)).map_err(err(span))?;
        let u2 = self.tview(&x2, |t| t.unsqueeze(-3)).map_err(err(span))?;
        let d = self.elementwise(Binary::Sub, &[FV::Tensor(u1), FV::Tensor(u2)], span)?;
        let ad = self.unary(Unary::Abs, &d, span)?;
        let last = FV::Int(-1);
        if p == 0.0 {
            // As the reference: min(ceil(|d|), 1), so that a NaN difference gives NaN.
            let c = self.unary(Unary::Ceil, &ad, span)?;
            let nz = self.elementwise(Binary::Minimum, &[c, FV::Float(1.0)], span)?;
            self.op("sum", vec![nz, last], span)
        } else if p == 1.0 || (p.is_infinite() && x1.shape.last() == Some(&0)) {
            self.op("sum", vec![ad, last], span)
        } else if p == 2.0 {
            let sq = self.elementwise(Binary::Mul, &[d.clone(), d], span)?;
            let s = self.op("sum", vec![sq, last], span)?;
            self.unary(Unary::Sqrt, &s, span)
        } else if p.is_infinite() {
            self.op("amax", vec![ad, last], span)
        } else {
            let pw = self.elementwise(Binary::Pow, &[ad, FV::Float(p)], span)?;
            let s = self.op("sum", vec![pw, last], span)?;
            self.elementwise(Binary::Pow, &[s, FV::Float(1.0 / p)], span)
        }
    }

    /// `F.group_norm`, composed as `crate::interp::nn_ops` composes it: the input as `[N, G, rest]`, the biased
    /// variance over `rest`, `rsqrt(var + eps)`, back to the input's shape, then the per-channel weight and bias.
    fn group_norm(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let g = a.int(1, "num_groups")?;
        let tensor_at = |i: usize, k: &str| match a.opt(i, k) {
            None | Some(FV::None) => Ok(None),
            Some(FV::Tensor(t)) => Ok(Some(t.clone())),
            Some(o) => diag(span, format!("group_norm(): argument '{k}' must be Tensor, not {}", o.type_name())),
        };
        let (w, b) = (tensor_at(2, "weight")?, tensor_at(3, "bias")?);
        let eps = match a.opt(4, "eps") {
            Some(v) => match a.number(v) {
                Some(e) => e.to_f64(),
                None => return diag(span, "group_norm(): eps must be a number known before the program runs"),
            },
            None => 1e-5,
        };
        let dt = self.roots[x.root].dtype;
        let ps: Vec<_> = [&w, &b].iter().filter_map(|t| t.as_ref().map(|t| self.roots[t.root].dtype)).collect();
        let shape_of = |t: &Option<super::state::TRef>| t.as_ref().map(|t| t.shape.clone());
        let (grouped, param) = crate::interp::nn_ops::group_norm_shapes(
            &x.shape,
            dt,
            g,
            shape_of(&w).as_deref(),
            shape_of(&b).as_deref(),
            &ps,
        )
        .map_err(err(span))?;
        let ints = |v: &[i64]| FV::Tuple(std::rc::Rc::new(v.iter().map(|&i| FV::Int(i)).collect()));
        let full: Vec<i64> = x.shape.iter().map(|&s| s as i64).collect();
        let xg = self.op("reshape", vec![FV::Tensor(x), ints(&grouped)], span)?;
        let FV::Tensor(xt) = &xg else { unreachable!("a reshaped tensor is a tensor") };
        let m = self.reduce_op(OpName::Mean, xt, &[2], true, None, span)?;
        let d = self.elementwise(Binary::Sub, &[xg.clone(), m], span)?;
        let sq = self.elementwise(Binary::Mul, &[d.clone(), d.clone()], span)?;
        let FV::Tensor(sq) = sq else { unreachable!("a product of tensors is a tensor") };
        let var = self.reduce_op(OpName::Mean, &sq, &[2], true, None, span)?;
        let ve = self.elementwise(Binary::Add, &[var, FV::Float(eps)], span)?;
        let r = self.unary(Unary::Rsqrt, &ve, span)?;
        let y = self.elementwise(Binary::Mul, &[d, r], span)?;
        let mut y = self.op("reshape", vec![y, ints(&full)], span)?;
        if let Some(w) = w {
            let w = self.op("reshape", vec![FV::Tensor(w), ints(&param)], span)?;
            y = self.elementwise(Binary::Mul, &[y, w], span)?;
        }
        if let Some(b) = b {
            let b = self.op("reshape", vec![FV::Tensor(b), ints(&param)], span)?;
            y = self.elementwise(Binary::Add, &[y, b], span)?;
        }
        match &y {
            FV::Tensor(t) if self.roots[t.root].dtype != dt => self.op("to", vec![y, FV::DType(dt)], span),
            _ => Ok(y),
        }
    }

    pub(super) fn nn_ops(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let float_only = |me: &Self, x: &super::state::TRef| {
            let d = me.roots[x.root].dtype;
            if d.is_float() {
                Ok(())
            } else {
                diag(span, format!("\"{name}_cpu\" not implemented for '{}'", d.name()))
            }
        };
        match name {
            "one_hot" => self.one_hot(a),
            "isnan" => {
                let x = FV::Tensor(a.tensor(0, "input")?);
                self.elementwise(Binary::Ne, &[x.clone(), x], span)
            }
            "isinf" => {
                let ab = self.unary(Unary::Abs, &FV::Tensor(a.tensor(0, "input")?), span)?;
                self.elementwise(Binary::Eq, &[ab, FV::Float(f64::INFINITY)], span)
            }
            "isfinite" => {
                let x = FV::Tensor(a.tensor(0, "input")?);
                let not_nan = self.elementwise(Binary::Eq, &[x.clone(), x.clone()], span)?;
                let ab = self.unary(Unary::Abs, &x, span)?;
                let not_inf = self.elementwise(Binary::Ne, &[ab, FV::Float(f64::INFINITY)], span)?;
                self.elementwise(Binary::BitAnd, &[not_nan, not_inf], span)
            }
            "nan_to_num" => {
                let x = a.tensor(0, "input")?;
                let dt = self.roots[x.root].dtype;
                let num =
                    |i: usize, k: &str, d: f64| a.opt(i, k).and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(d);
                let (nan, pinf, ninf) =
                    (num(1, "nan", 0.0), num(2, "posinf", float_max(dt)), num(3, "neginf", -float_max(dt)));
                if !dt.is_float() {
                    return self.op("clone", vec![FV::Tensor(x)], span);
                }
                let xv = FV::Tensor(x);
                let c = self.elementwise(Binary::Eq, &[xv.clone(), FV::Float(f64::NEG_INFINITY)], span)?;
                let r = self.op("where", vec![c, FV::Float(ninf), xv.clone()], span)?;
                let c = self.elementwise(Binary::Eq, &[xv.clone(), FV::Float(f64::INFINITY)], span)?;
                let r = self.op("where", vec![c, FV::Float(pinf), r], span)?;
                let c = self.elementwise(Binary::Ne, &[xv.clone(), xv], span)?;
                self.op("where", vec![c, FV::Float(nan), r], span)
            }
            "hardswish" | "hardsigmoid" => {
                let x = a.tensor(0, "input")?;
                float_only(self, &x)?;
                let xv = FV::Tensor(x);
                let s = self.elementwise(Binary::Add, &[xv.clone(), FV::Float(3.0)], span)?;
                let c = self.op("clamp", vec![s, FV::Float(0.0), FV::Float(6.0)], span)?;
                let c = if name == "hardswish" { self.elementwise(Binary::Mul, &[xv, c], span)? } else { c };
                self.elementwise(Binary::Div, &[c, FV::Float(6.0)], span)
            }
            "relu6" => {
                let x = FV::Tensor(a.tensor(0, "input")?);
                self.op("clamp", vec![x, FV::Float(0.0), FV::Float(6.0)], span)
            }
            "mish" => {
                let x = a.tensor(0, "input")?;
                float_only(self, &x)?;
                let xv = FV::Tensor(x);
                let e = self.unary(Unary::Exp, &xv, span)?;
                let sp = self.unary(Unary::Log1p, &e, span)?;
                let th = self.unary(Unary::Tanh, &sp, span)?;
                self.elementwise(Binary::Mul, &[xv, th], span)
            }
            "max_pool1d" | "max_pool2d" | "max_pool3d" | "avg_pool1d" | "avg_pool2d" | "avg_pool3d" => {
                self.pool(name, a)
            }
            "conv1d" | "conv2d" | "conv3d" => self.conv(name, a),
            "interpolate" => self.interpolate(a),
            "pad" => self.pad(a),
            "repeat_interleave" => self.repeat_interleave(a),
            "baddbmm" | "addmm" => {
                let (p, q) = if name == "addmm" { ("mat1", "mat2") } else { ("batch1", "batch2") };
                let m = self.matmul(&FV::Tensor(a.tensor(1, p)?), &FV::Tensor(a.tensor(2, q)?), span)?;
                self.add_scaled(a, m, span)
            }
            "layer_norm" | "rms_norm" => self.layer_norm(name, a),
            "group_norm" => self.group_norm(a),
            // `torch.batch_norm` takes its arguments in another order: only `F.batch_norm` is this.
            "batch_norm" if a.name == "torch.nn.functional.batch_norm" => self.batch_norm(a),
            "cdist" => self.cdist(a),
            _ => {
                // A function call carries its module (`torch.sigmod`); a method call only its name.
                let full = if a.name.contains('.') { a.name.clone() } else { format!("torch.Tensor.{name}") };
                diag(span, crate::frontend::torch_api::unsupported(&full))
            }
        }
    }

    /// `F.pad` in `constant` mode: the input written into a tensor of the value, at its place in the padded shape.
    fn pad(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let pad: Vec<i64> = match a.req(1, "pad")?.items() {
            Some(items) => items.iter().map(|v| a.int_of(v, "pad")).collect::<FR<_>>()?,
            None => return diag(span, "pad(): argument 'pad' must be a tuple of ints"),
        };
        if let Some(FV::Str(m)) = a.opt(2, "mode") {
            if m.as_ref() != "constant" {
                return diag(span, format!("F.pad(mode='{m}') is not supported; only mode='constant'"));
            }
        }
        let p = pad_layout(&x.shape, &pad).map_err(err(span))?;
        let dt = self.roots[x.root].dtype;
        let out = match a.opt(3, "value") {
            None => self.full(&p.shape, dt, Scalar::I(0)).map_err(err(span)).and_then(|r| self.fresh(r, None, span))?,
            Some(v) => match a.number(v) {
                Some(n) => self.full(&p.shape, dt, n).map_err(err(span)).and_then(|r| self.fresh(r, None, span))?,
                None => self.run_time_pad_value(v, dt, &p.shape, span)?,
            },
        };
        let narrowed = |t: &crate::tensor::Tensor, at: &[usize]| {
            let mut v = t.clone();
            for (d, (&s, &n)) in at.iter().zip(&p.len).enumerate() {
                v = v.narrow(d as i64, s as i64, n as i64)?;
            }
            Ok(v)
        };
        let view = self.tview(&out, |t| narrowed(t, &p.dst)).map_err(err(span))?;
        // A negative pad crops the input's side first.
        let kept = self.tview(&x, |t| narrowed(t, &p.src)).map_err(err(span))?;
        let v = self.read(&kept, span)?;
        self.write(&view, v, span)?;
        self.roots[out.root].written = false;
        Ok(FV::Tensor(out))
    }

    /// A pad's output filled with a value known only at run time (kvpress's `F.pad(scores, (n, 0),
    /// value=scores.max().item())`): the value's 0-dim tensor expanded to the output's shape, where it converts to the
    /// output's dtype exactly (a value of that dtype, or any into f64); PyTorch would check others for overflow.
    fn run_time_pad_value(&mut self, v: &FV, dt: DType, shape: &[usize], span: Span) -> FR<super::state::TRef> {
        let source = match v {
            // (`.item()` of a float tensor is its value cast to f64: the tensor's own dtype counts)
            FV::DynFloat(t) => {
                let id = self.t.at(*t);
                match self.t.b.node(id).clone() {
                    crate::ir::Node::Op(OpName::Cast, args) if args.len() == 2 => match self.t.ty(args[1]) {
                        Ok(crate::ir::Ty::Tensor(d, _)) => Some(d),
                        _ => Some(DType::F64),
                    },
                    _ => Some(self.tensor_ty(*t, span)?.0),
                }
            }
            FV::DynBool(t) => Some(self.tensor_ty(*t, span)?.0),
            FV::DynInt(_) => Some(DType::I64),
            _ => None,
        };
        let Some(source) = source else {
            return Err(super::state::Stop::NeedsStatic(span, "a pad value known only at run time".into()));
        };
        if source != dt && dt != DType::F64 && source != DType::Bool {
            let why = "a pad value known only at run time that could overflow the input's dtype";
            return Err(super::state::Stop::NeedsStatic(span, why.into()));
        }
        let (t, _) = self.scalar_tensor(v, Some(dt), span)?;
        let scalar = FV::Tensor(self.fresh(t, None, span)?);
        let dims = ints(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let e = self.method("expand", span, vec![scalar, dims])?;
        match self.method("clone", span, vec![e])? {
            FV::Tensor(t) => Ok(t),
            _ => unreachable!("clone gives a tensor"),
        }
    }

    /// `repeat_interleave` by an int: an unsqueezed, expanded view along `dim` (the flattened input without it),
    /// reshaped to merge the repeats.
    fn repeat_interleave(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let r = match a.req(1, "repeats")? {
            FV::Int(r) if *r >= 0 => *r,
            FV::Int(_) => return diag(span, "repeat_interleave: repeats can not be negative"),
            _ => {
                return diag(span, "repeat_interleave with a tensor of repeats has a data-dependent shape; pass an int")
            }
        };
        let (x, d) = match a.opt_int(2, "dim")? {
            Some(d) => {
                let d = wrap_dim(d, x.shape.len().max(1)).map_err(err(span))?;
                (x, d)
            }
            None => {
                let FV::Tensor(f) = self.op("reshape", vec![FV::Tensor(x), ints(&[-1])], span)? else {
                    unreachable!("reshape gives a tensor")
                };
                (f, 0)
            }
        };
        let x = if x.shape.is_empty() { self.tview(&x, |t| t.reshape(&[1])).map_err(err(span))? } else { x };
        let mut sizes: Vec<i64> = x.shape.iter().map(|&n| n as i64).collect();
        let mut merged = sizes.clone();
        merged[d] *= r;
        sizes.insert(d + 1, r);
        let e = self.tview(&x, |t| t.unsqueeze(d as i64 + 1)?.expand(&sizes)).map_err(err(span))?;
        self.op("reshape", vec![FV::Tensor(e), ints(&merged)], span)
    }
}

impl<'m> Fz<'m> {
    /// `F.one_hot`: `x.unsqueeze(-1) == arange(num_classes)` as int64, with PyTorch's run-time checks that every
    /// value is in range (`num_classes` must be known before the program runs: -1 infers it from the values).
    fn one_hot(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "tensor")?;
        let classes = match a.opt(1, "num_classes") {
            None => -1,
            Some(v) => match a.number(v) {
                Some(Scalar::I(c)) => c,
                _ => return diag(span, "one_hot(): num_classes must be an int known before the program runs"),
            },
        };
        let numel = x.shape.iter().product::<usize>();
        let dt = self.roots[x.root].dtype;
        if let Some(c) = crate::interp::nn_ops::one_hot_static(dt, numel, classes).map_err(err(span))? {
            let mut shape: Vec<i64> = x.shape.iter().map(|&s| s as i64).collect();
            shape.push(c as i64);
            return self.op("zeros", vec![ints(&shape), FV::DType(crate::tensor::DType::I64)], span);
        }
        if classes == -1 {
            return diag(span, "one_hot(): num_classes=-1 takes the number of classes from the values, which are known only when the program runs; pass num_classes");
        }
        let xv = FV::Tensor(x.clone());
        for (op, bound) in [(Binary::Ge, 0), (Binary::Lt, classes)] {
            let ok = self.elementwise(op, &[xv.clone(), FV::Int(bound)], span)?;
            let all = self.op("all", vec![ok], span)?;
            if let super::expr::Cond::Dyn(t) = self.cond(&all, span)? {
                self.runtime_assert(t, span)?;
            }
        }
        let col = self.tview(&x, |t| t.unsqueeze(-1)).map_err(err(span))?;
        let range = self.op("arange", vec![FV::Int(classes)], span)?;
        let hot = self.elementwise(Binary::Eq, &[FV::Tensor(col), range], span)?;
        self.op("to", vec![hot, FV::DType(crate::tensor::DType::I64)], span)
    }
}

impl Fz<'_> {
    /// `F.conv1d`/`conv2d`/`conv3d` as the reference computes them (`crate::interp::conv`): the zero-padded input's
    /// windows as one strided view, then one matmul with the weights.
    fn conv(&mut self, name: &str, a: &A) -> FR<FV> {
        use crate::interp::conv::{conv_plan, conv_spatial, ConvPadding};
        let span = a.span;
        let (x, w) = (a.tensor(0, "input")?, a.tensor(1, "weight")?);
        let given = |i: usize, n: &str| a.opt(i, n).filter(|v| !matches!(v, FV::None)).cloned();
        let bias = given(2, "bias").map(|_| a.tensor(2, "bias")).transpose()?;
        let list = |v: &FV, n: &str| -> FR<Vec<i64>> {
            match v.items() {
                Some(items) => items.iter().map(|v| a.int_of(v, n)).collect(),
                None => Ok(vec![a.int_of(v, n)?]),
            }
        };
        let sizes = |i: usize, n: &str| given(i, n).map(|v| list(&v, n)).transpose().map(|v| v.unwrap_or(vec![1]));
        let padding = match given(4, "padding") {
            None => ConvPadding::Sizes(vec![0]),
            Some(FV::Str(s)) => ConvPadding::named(&s).map_err(err(span))?,
            Some(v) => ConvPadding::Sizes(list(&v, "padding")?),
        };
        let groups = given(6, "groups").map(|v| a.int_of(&v, "groups")).transpose()?.unwrap_or(1);
        let (xd, wd) = (self.roots[x.root].dtype, self.roots[w.root].dtype);
        let plan = conv_plan(
            name,
            conv_spatial(name).unwrap_or(2),
            (&x.shape, xd),
            (&w.shape, wd),
            bias.as_ref().map(|b| b.shape.as_slice()),
            sizes(3, "stride")?,
            padding,
            sizes(5, "dilation")?,
            groups,
        )
        .map_err(err(span))?;
        let xb = if plan.batched { x } else { self.tview(&x, |t| t.unsqueeze(0)).map_err(err(span))? };
        let zeros = self.full(&plan.padded, xd, Scalar::I(0)).map_err(Self::tyerr(span))?;
        let p = self.fresh(zeros, None, span)?;
        let start = plan.start.clone();
        let inside = self
            .tview(&p, |t| {
                let mut v = t.clone();
                for (d, (&s, &n)) in start.iter().zip(&xb.shape).enumerate() {
                    v = v.narrow(d as i64, s as i64, n as i64)?;
                }
                Ok(v)
            })
            .map_err(err(span))?;
        let value = self.read(&xb, span)?;
        self.write(&inside, value, span)?;
        let ((shape, strides), perm) = (plan.cols.clone(), plan.perm.clone());
        let cols = self
            .tview(&p, |t| t.restride(shape.clone(), strides.clone(), t.offset).permute(&perm))
            .map_err(err(span))?;
        let cols = self.op("reshape", vec![FV::Tensor(cols), ints(&plan.cols_matrix)], span)?;
        let wm = self.op("reshape", vec![FV::Tensor(w), ints(&plan.w_matrix)], span)?;
        let wm = self.op("transpose", vec![wm, FV::Int(1), FV::Int(2)], span)?;
        let out = self.matmul(&cols, &wm, span)?;
        let out = self.op("permute", vec![out, ints(&[0, 1, 3, 2])], span)?;
        let mut out = self.op("reshape", vec![out, ints(&plan.out)], span)?;
        if let Some(b) = bias {
            let b = self.op("reshape", vec![FV::Tensor(b), ints(&plan.bias)], span)?;
            out = self.elementwise(Binary::Add, &[out, b], span)?;
        }
        if plan.batched {
            return Ok(out);
        }
        self.op("squeeze", vec![out, FV::Int(0)], span)
    }
}

impl<'m> super::Fz<'m> {
    /// `F.NAME(x, ..., inplace=True)` for an activation that takes `inplace` (`compat::inplace_activation`): the op
    /// out of place, its result copied into `x`, which it returns. `None` where it is not in place.
    pub(super) fn inplace_activation(
        &mut self,
        name: &str,
        pos: &mut Vec<FV>,
        kw: &mut Vec<(String, FV)>,
        span: Span,
    ) -> Option<FR<FV>> {
        let as_bool = |v: &FV| if let FV::Bool(b) = v { Some(*b) } else { None };
        match crate::interp::compat::inplace_activation(name, pos, kw, as_bool)? {
            Err(m) => Some(Err(super::state::Stop::Diag(crate::diag::Diagnostic::new(m).at(span)))),
            Ok(true) if !pos.is_empty() => {
                let input = pos[0].clone();
                let f = FV::Func(format!("torch.nn.functional.{name}").into());
                let shown = format!("F.{name}");
                Some(self.call_value(f, std::mem::take(pos), std::mem::take(kw), span, &shown).and_then(|out| {
                    self.inplace("copy_", &super::ops::A::new(vec![input, out], vec![], span, "copy_".into()))
                }))
            }
            Ok(_) => None,
        }
    }
}
