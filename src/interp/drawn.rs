//! Elements a random initialization drew: `nn.Linear(...)`'s weights, `nn.init.normal_(w)`, `w.uniform_()`,
//! `torch.Tensor(n, m)`'s uninitialized memory. No engine can reproduce PyTorch's generator, so such elements may
//! be written (a checkpoint loaded over them: `copy_`, `load_state_dict`, `fill_`) but never read: a read is an error
//! located where it happens, never a result that differs from PyTorch's.
//!
//! The reference interpreter stores a NaN with a payload of its own ([`F32`], [`F64`]) in each drawn element and
//! remembers the buffers it drew into; an element is written once it holds anything else (every write replaces the
//! bits), so a read is checked exactly, element by element, through any view. Reads are checked where values enter
//! an operation (`Interp::check_drawn`: torch functions and tensor methods other than views, writes' sources,
//! arithmetic, comparisons, truth values, builtins, program outputs). The functional engines keep a bitmap per root
//! instead (`functionalize::drawn`).

use std::cell::RefCell;
use std::rc::Rc;

use super::value::Value;
use crate::tensor::{Buf, Tensor};

/// The bits of a drawn f32 element: a quiet NaN whose payload no arithmetic makes.
pub const F32: u32 = 0x7fd5_a5a5;
/// The bits of a drawn f64 element.
pub const F64: u64 = 0x7ffa_a5a5_a5a5_a5a5;

/// Why a read of drawn elements fails, in every engine.
pub fn refusal() -> String {
    "this reads elements that no write has set: a random initializer drew them (a module's initial weights, \
     `nn.init.normal_`, `uniform_`...) or they are uninitialized memory (`torch.Tensor(n, m)`), and funcfuse \
     reproduces neither: write them first, as loading a checkpoint does (`load_state_dict`, `copy_`, `fill_`)"
        .into()
}

/// Why a random initialization of a tensor of `dtype` is refused, if it is: only floating tensors are drawn here.
pub fn undrawable(dtype: crate::tensor::DType) -> Option<String> {
    match dtype {
        crate::tensor::DType::F32 | crate::tensor::DType::F64 => None,
        d => Some(format!(
            "random initialization of a {} tensor is not supported (only float32 and float64 tensors)",
            d.torch_name()
        )),
    }
}

/// Marks the elements `t` sees as drawn.
pub fn draw(t: &Tensor) -> Result<(), String> {
    if let Some(m) = undrawable(t.dtype()) {
        return Err(m);
    }
    let mut b = t.buf.borrow_mut();
    t.offsets().into_iter().for_each(|o| set_drawn(&mut b, o));
    Ok(())
}

/// Whether the element at `o` of `b` is drawn.
fn is_drawn(b: &Buf, o: usize) -> bool {
    match b {
        Buf::F32(v) => v[o].to_bits() == F32,
        Buf::F64(v) => v[o].to_bits() == F64,
        _ => false,
    }
}

/// Makes the element at `o` of `b` (a floating buffer) drawn.
fn set_drawn(b: &mut Buf, o: usize) {
    match b {
        Buf::F32(v) => v[o] = f32::from_bits(F32),
        Buf::F64(v) => v[o] = f64::from_bits(F64),
        _ => {}
    }
}

/// Whether any element `t` sees is drawn.
pub fn sees_drawn(t: &Tensor) -> bool {
    let b = t.buf.borrow();
    t.offsets().into_iter().any(|o| is_drawn(&b, o))
}

/// The buffers drawn into, to check reads against.
#[derive(Default)]
pub struct Drawn(Vec<Rc<RefCell<Buf>>>);

impl Drawn {
    /// Whether any buffer holds drawn elements (none: nothing to check or carry).
    pub fn any(&self) -> bool {
        !self.0.is_empty()
    }

    pub fn add(&mut self, t: &Tensor) {
        if !self.0.iter().any(|b| Rc::ptr_eq(b, &t.buf)) {
            self.0.push(t.buf.clone());
        }
    }

    /// Whether `v`, or a value it holds (a list's items, a dict's entries), sees drawn elements. An object of a class
    /// is not looked into: what reads it reads its attributes, each checked then.
    pub fn in_value(&self, v: &Value) -> bool {
        if self.0.is_empty() {
            return false;
        }
        let mut seen = Vec::new();
        self.walk(v, &mut seen)
    }

    fn walk(&self, v: &Value, seen: &mut Vec<usize>) -> bool {
        match v {
            Value::Tensor(t) => self.0.iter().any(|b| Rc::ptr_eq(b, &t.buf)) && sees_drawn(t),
            Value::Tuple(items) | Value::Named(items, _) => items.iter().any(|x| self.walk(x, seen)),
            Value::List(l) => {
                let at = Rc::as_ptr(l) as usize;
                if seen.contains(&at) {
                    return false;
                }
                seen.push(at);
                l.borrow().iter().any(|x| self.walk(x, seen))
            }
            Value::Dict(_) if super::pyvalue::object_class(v).is_some() => false,
            Value::Dict(d) => {
                let at = Rc::as_ptr(d) as usize;
                if seen.contains(&at) {
                    return false;
                }
                seen.push(at);
                d.borrow().iter().any(|(k, x)| self.walk(k, seen) || self.walk(x, seen))
            }
            _ => false,
        }
    }

    /// Takes as drawn the buffers of `v` (a deep copy's) that hold drawn elements.
    pub fn adopt(&mut self, v: &Value) {
        if self.0.is_empty() {
            return;
        }
        for t in super::pywalk::tensors_in(v) {
            let Value::Tensor(t) = t else { unreachable!("tensors_in gives tensors") };
            if sees_drawn(&t) {
                self.add(&t);
            }
        }
    }
}

/// `torch.rand(...)`, `torch.randn(...)`, `torch.rand_like(x)`, `torch.randn_like(x)` and `torch.normal(mean, std,
/// size)` of numbers: the call that makes a tensor of the same shape and dtype (`empty` or `empty_like`, `generator=`
/// dropped), whose elements are then drawn. `None` for any other call.
pub fn random_creation<V: super::pyvalue::PyValue>(
    name: &str,
    pos: &[V],
    kw: &[(String, V)],
) -> Option<Result<(&'static str, Vec<V>, Vec<(String, V)>), String>> {
    let kw: Vec<(String, V)> = kw.iter().filter(|(k, _)| k != "generator").cloned().collect();
    match name {
        "rand" | "randn" => Some(Ok(("empty", pos.to_vec(), kw))),
        "rand_like" | "randn_like" => Some(Ok(("empty_like", pos.to_vec(), kw))),
        "normal" => {
            let numbers = pos.len() >= 2 && pos[..2].iter().all(|v| v.number().is_some());
            let size = pos.get(2).cloned().or_else(|| kw.iter().find(|(k, _)| k == "size").map(|(_, v)| v.clone()));
            match (numbers, size) {
                (true, Some(size)) => {
                    let rest = kw.into_iter().filter(|(k, _)| k != "size").collect();
                    Some(Ok(("empty", vec![size], rest)))
                }
                _ => Some(Err("torch.normal is supported only as torch.normal(mean, std, size) of numbers (its \
                               elements drawn, to be written before they are read)"
                    .into())),
            }
        }
        _ => None,
    }
}

/// Tensor methods that read no element of the tensor they are called on (metadata, views, whole writes), so a
/// drawn tensor may call them.
pub const NO_READ_METHODS: &[&str] = &[
    "size",
    "dim",
    "ndimension",
    "numel",
    "nelement",
    "stride",
    "storage_offset",
    "is_contiguous",
    "element_size",
    "is_floating_point",
    "is_complex",
    "get_device",
    "data_ptr",
    "view",
    "view_as",
    "t",
    "transpose",
    "permute",
    "narrow",
    "select",
    "unbind",
    "chunk",
    "split",
    "squeeze",
    "unsqueeze",
    "expand",
    "expand_as",
    "detach",
    "detach_",
    "requires_grad_",
    "unflatten",
    "movedim",
    "diagonal",
    "unfold",
    "as_strided",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "copy_",
    "fill_",
    "zero_",
    "uniform_",
    "normal_",
];

/// Tensor methods and torch functions that read only the shape, dtype or layout of their tensor arguments (the
/// receiver of a method excepted).
const SHAPE_ONLY_ARGS: &[&str] =
    &["view_as", "expand_as", "reshape_as", "type_as", "zeros_like", "ones_like", "empty_like", "full_like"];

/// Tensor methods that copy the elements they read where they do not return a view: the copy's drawn elements are
/// drawn too (`Drawn::adopt`), so they need no check.
pub const COPYING_METHODS: &[&str] = &["reshape", "flatten", "contiguous", "clone"];

/// Builtins that read no tensor element of their arguments.
const NO_READ_BUILTINS: &[&str] = &[
    "len",
    "isinstance",
    "issubclass",
    "id",
    "type",
    "hasattr",
    "getattr",
    "setattr",
    "delattr",
    "list",
    "tuple",
    "dict",
    "set",
    "zip",
    "enumerate",
    "iter",
    "reversed",
    "next",
    "callable",
    "super",
    "map",
    "filter",
    "sorted",
    crate::frontend::ast::PARAMETERS,
    crate::frontend::ast::BUFFER,
    crate::frontend::ast::IS_MODULE,
    crate::frontend::ast::IS_PARAMETER,
];

/// The arguments of `x.uniform_(from=0, to=1, *, generator=None)` or `x.normal_(mean=0, std=1, *, generator=None)`
/// checked as PyTorch binds them: the method draws every element of `x`.
pub fn random_method(name: &str, npos: usize, kw: &[&str]) -> Result<(), String> {
    let params: &[&str] = if name == "uniform_" { &["from", "to"] } else { &["mean", "std"] };
    if npos > 2 {
        return Err(format!("{name}() takes at most 2 positional arguments ({npos} given)"));
    }
    for (i, k) in kw.iter().enumerate() {
        match params.iter().position(|p| p == k) {
            Some(p) if p < npos => return Err(format!("{name}() got multiple values for argument '{k}'")),
            Some(_) => {}
            None if *k == "generator" && !kw[..i].contains(k) => {}
            None => return Err(format!("{name}() got an unexpected keyword argument '{k}'")),
        }
    }
    Ok(())
}

impl super::Interp<'_> {
    /// `torch.nn.init.NAME(...)` (`super::nn_init`): the tensor, filled or drawn; `calculate_gain`'s number.
    pub(super) fn nn_init(
        &mut self,
        name: &str,
        pos: &[Value],
        kw: &[(String, Value)],
        span: crate::diag::Span,
    ) -> Result<Value, crate::diag::Diagnostic> {
        use super::nn_init::{nn_init, nn_init_args, Init};
        let name = &*super::nn_init::canonical(name);
        let e = super::exec::tensor_err(span);
        let args = nn_init_args(name, pos, kw).map_err(&e)?;
        let t = match &args[0] {
            _ if name == "calculate_gain" => None,
            Some(Value::Tensor(t)) => Some(t.clone()),
            Some(other) => {
                let m = format!("{name}(): argument 'tensor' must be Tensor, not {}", other.type_name());
                return Err(e(m));
            }
            None => unreachable!("nn_init_args binds the tensor"),
        };
        let shape = t.as_ref().map_or(&[][..], |t| &t.shape[..]);
        match (nn_init(name, &args, shape).map_err(&e)?, t) {
            (Init::Gain(g), _) => Ok(Value::Float(g)),
            (Init::Fill(v), Some(t)) => {
                let a = super::args::Args::new(vec![Value::Tensor(t.clone()), v], vec![], span, name.into());
                self.tensor_method_call("fill_", a, span)?;
                Ok(Value::Tensor(t))
            }
            (Init::Draw, Some(t)) => {
                self.draw(&t, span)?;
                Ok(Value::Tensor(t))
            }
            (_, None) => unreachable!("only calculate_gain takes no tensor"),
        }
    }

    /// `torch.OP(...)` (`empty`, `empty_like`), its elements then drawn: random and uninitialized tensors.
    pub(super) fn made_drawn(
        &mut self,
        op: &str,
        pos: Vec<Value>,
        kw: Vec<(String, Value)>,
        span: crate::diag::Span,
    ) -> Result<Value, crate::diag::Diagnostic> {
        let r = self.module_function("torch", op, pos, kw, span)?;
        if let Value::Tensor(t) = &r {
            self.draw(t, span)?;
        }
        Ok(r)
    }

    /// Draws the elements `t` sees ([`draw`]).
    pub(super) fn draw(&mut self, t: &Tensor, span: crate::diag::Span) -> Result<(), crate::diag::Diagnostic> {
        draw(t).map_err(super::exec::tensor_err(span))?;
        self.drawn.add(t);
        self.mark_written(t);
        Ok(())
    }

    /// A located error where any of `values` sees drawn elements.
    pub(super) fn check_drawn(
        &self,
        values: &[&Value],
        span: crate::diag::Span,
    ) -> Result<(), crate::diag::Diagnostic> {
        match values.iter().any(|v| self.drawn.in_value(v)) {
            true => Err(crate::diag::Diagnostic::new(refusal()).at(span)),
            false => Ok(()),
        }
    }

    /// `a OP b` in an expression, where arithmetic of a tensor with drawn elements and a Python number gives a tensor
    /// whose elements are drawn where the tensor's are (`torch.randn(n, m) * 0.05`, loaded later); any other use of
    /// drawn elements is refused by `binop`'s check.
    pub(super) fn drawn_binop(
        &mut self,
        a: &Value,
        op: crate::frontend::ast::BinOp,
        b: &Value,
        span: crate::diag::Span,
    ) -> Result<Value, crate::diag::Diagnostic> {
        use crate::frontend::ast::BinOp;
        let arith = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow);
        let t = match (a, b) {
            (Value::Tensor(t), n) | (n, Value::Tensor(t)) if n.as_scalar().is_some() => Some(t.clone()),
            _ => None,
        };
        if let (true, Some(t)) = (arith, t) {
            if self.drawn.in_value(&Value::Tensor(t.clone())) {
                let r = self.binop_unchecked(a, op, b, span)?;
                if let Value::Tensor(rt) = &r {
                    if undrawable(rt.dtype()).is_none() && rt.shape == t.shape && !rt.same_storage(&t) {
                        let drawn: Vec<bool> = {
                            let src = t.buf.borrow();
                            t.offsets().into_iter().map(|o| is_drawn(&src, o)).collect()
                        };
                        let mut out = rt.buf.borrow_mut();
                        for (o, d) in rt.offsets().into_iter().zip(drawn) {
                            if d {
                                set_drawn(&mut out, o);
                            }
                        }
                        drop(out);
                        self.drawn.add(rt);
                        return Ok(r);
                    }
                }
            }
        }
        self.binop(a, op, b, span)
    }

    /// `check_drawn` of the operands of an operator that are tensors (a list's items are not read by `+`).
    pub(super) fn check_operands(
        &self,
        values: &[&Value],
        span: crate::diag::Span,
    ) -> Result<(), crate::diag::Diagnostic> {
        let tensors: Vec<&Value> = values.iter().copied().filter(|v| matches!(v, Value::Tensor(_))).collect();
        self.check_drawn(&tensors, span)
    }

    /// The check of a call's arguments before it runs: what the callee reads of them (`receiver` is the object of a
    /// method call, `callee` its name or the builtin's). Returns whether the result is a copy whose drawn elements
    /// are drawn too.
    pub(super) fn check_call(
        &self,
        receiver: Option<&Value>,
        callee: &str,
        pos: &[Value],
        kw: &[(String, Value)],
        span: crate::diag::Span,
    ) -> Result<bool, crate::diag::Diagnostic> {
        if self.drawn.0.is_empty() {
            return Ok(false);
        }
        let mut args: Vec<&Value> = pos.iter().chain(kw.iter().map(|(_, v)| v)).collect();
        if SHAPE_ONLY_ARGS.contains(&callee) {
            args.retain(|v| !matches!(v, Value::Tensor(_)));
        }
        match receiver {
            // The tensor an initializer writes (its first argument) is not read.
            Some(Value::Module("torch.nn.init")) => {
                let rest: Vec<&Value> = match pos.is_empty() {
                    false => args[1..].to_vec(),
                    true => kw.iter().filter(|(k, _)| k != "tensor").map(|(_, v)| v).collect(),
                };
                self.check_drawn(&rest, span).map(|_| false)
            }
            Some(Value::Module("copy")) => Ok(true),
            // `nn.Parameter(t)` / `Variable(t)` hold `t` as it is.
            Some(Value::Module("torch.nn" | "torch.autograd")) if matches!(callee, "Parameter" | "Variable") => {
                Ok(false)
            }
            Some(Value::Module(_)) => self.check_drawn(&args, span).map(|_| false),
            // A copy between floating tensors keeps drawn elements drawn (`carried_marks`).
            Some(Value::Tensor(_)) if carried_marks(receiver, callee, pos).is_some() => {
                let rest: Vec<&Value> = args.iter().copied().skip(usize::from(callee == "copy_")).collect();
                self.check_drawn(&rest, span).map(|_| false)
            }
            Some(Value::Tensor(_)) if NO_READ_METHODS.contains(&callee) => self.check_drawn(&args, span).map(|_| false),
            Some(Value::Tensor(_)) if COPYING_METHODS.contains(&callee) => self.check_drawn(&args, span).map(|_| true),
            Some(t @ Value::Tensor(_)) => {
                self.check_drawn(&[t], span)?;
                self.check_drawn(&args, span).map(|_| false)
            }
            Some(_) => Ok(false),
            None if NO_READ_BUILTINS.contains(&callee) => Ok(false),
            None => self.check_drawn(&args, span).map(|_| false),
        }
    }
}

/// Tensor methods that convert between floating dtypes (or keep one): a drawn element's copy is drawn.
pub const CASTS: &[&str] = &["to", "double", "float", "type", "type_as"];

/// Where method `callee` of `receiver` copies elements between floating tensors so that drawn elements stay drawn
/// (MoCo's `param_k.data.copy_(param_q.data)` over a drawn initialization, `seq.double()` before the weights are
/// loaded): the tensor whose marks the copy carries (`copy_`'s source, a cast's receiver). Whether the destination
/// is floating is checked after the call, by [`carry_marks`].
pub fn carried_marks<'v>(receiver: Option<&'v Value>, callee: &str, pos: &'v [Value]) -> Option<&'v Tensor> {
    let Some(Value::Tensor(t)) = receiver else { return None };
    let src = match callee {
        "copy_" => match pos.first() {
            Some(Value::Tensor(s)) if t.dtype().is_float() => s,
            _ => return None,
        },
        c if CASTS.contains(&c) => t,
        _ => return None,
    };
    undrawable(src.dtype()).is_none().then_some(src)
}

/// After a copy of `src`'s elements into `dst` (broadcast to its shape): `dst`'s elements are drawn where the copied
/// ones were; an error where one was and `dst` cannot hold the mark (an integer tensor, a half).
pub fn carry_marks(drawn: &mut Drawn, src: &Tensor, dst: &Tensor) -> Result<(), String> {
    if !drawn.0.iter().any(|b| Rc::ptr_eq(b, &src.buf)) || Rc::ptr_eq(&src.buf, &dst.buf) {
        return Ok(()); // nothing drawn, or copied bits in place (a cast to the same dtype is the tensor itself)
    }
    let s = src.broadcast_to(&dst.shape)?;
    let flags: Vec<bool> = {
        let b = s.buf.borrow();
        s.offsets().into_iter().map(|o| is_drawn(&b, o)).collect()
    };
    if !flags.iter().any(|&f| f) {
        return Ok(());
    }
    if undrawable(dst.dtype()).is_some() {
        return Err(refusal());
    }
    {
        let mut b = dst.buf.borrow_mut();
        dst.offsets().into_iter().zip(flags).filter(|(_, f)| *f).for_each(|(o, _)| set_drawn(&mut b, o));
    }
    drawn.add(dst);
    Ok(())
}
