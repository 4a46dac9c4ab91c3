//! Calls in the functionalizer: helpers (inlined), builtins, list methods, attributes, subscripts, and the torch op
//! table, each op building its term and a fresh root (or, for views, a new view of the same root).

use std::cell::RefCell;
use std::rc::Rc;

use super::state::{diag, Stop, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;
use crate::ir::{Node, OpName};
use crate::tensor::ops::{self, Operand};
use crate::tensor::{fmt_shape, DType, Scalar, Tensor};

use crate::interp::out_arg::{check_out, overlap_error, OutKind};
use crate::interp::pyvalue::Callee;
use crate::interp::torch_ops::UNCHECKED_INPLACE;

pub(super) use super::args::{err, A};

pub(super) fn unary_name(u: ops::Unary) -> OpName {
    use ops::Unary::*;
    match u {
        Neg => OpName::Neg,
        Abs => OpName::Abs,
        Relu => OpName::Relu,
        Exp => OpName::Exp,
        Log => OpName::Log,
        Log1p => OpName::Log1p,
        Expm1 => OpName::Expm1,
        Sqrt => OpName::Sqrt,
        Rsqrt => OpName::Rsqrt,
        Sigmoid => OpName::Sigmoid,
        Tanh => OpName::Tanh,
        Sin => OpName::Sin,
        Cos => OpName::Cos,
        Floor => OpName::Floor,
        Ceil => OpName::Ceil,
        Round => OpName::Round,
        Trunc => OpName::Trunc,
        Sign => OpName::Sign,
        LogicalNot => OpName::LogicalNot,
        BitNot => OpName::BitNot,
        Reciprocal => OpName::Reciprocal,
        Square => OpName::Square,
        Erf => OpName::Erf,
        Silu => OpName::Silu,
        Gelu => OpName::Gelu,
    }
}

/// A call's keyword arguments, in order.
type Keywords = Vec<(String, FV)>;

impl<'m> Fz<'m> {
    /// A call expression: its callee and arguments evaluated (`pyvalue::call_parts`), then the callee dispatched.
    pub(super) fn call(&mut self, env: &mut Env, call: &'m Expr) -> FR<FV> {
        let (span, ExprKind::Call { func, .. }) = (call.span, &call.kind) else { unreachable!("a call expression") };
        let (callee, mut pos, kw) = crate::interp::pyvalue::call_parts(self, env, call)?;
        if let (Callee::Method(FV::Masked(sel), name), ExprKind::Attr(obj, _)) = (&callee, &func.kind) {
            if let Some(r) = self.masked_inplace(env, obj, name, sel, &pos, &kw, span)? {
                return Ok(r);
            }
        }
        // A boolean-mask selection passed to anything is refused where the selection was made.
        // A program function takes it (each op in it decides).
        let masked = pos.iter().chain(kw.iter().map(|(_, v)| v)).find_map(super::state::find_masked);
        let squeezed = pos.iter().chain(kw.iter().map(|(_, v)| v)).find_map(super::squeezed::find_squeezed);
        if masked.is_some() || squeezed.is_some() {
            let program_fn = |v: &FV| match v {
                FV::Func(f) | FV::Closure(f, _) => !f.contains('.') && !f.starts_with(crate::interp::compat::PARTIAL),
                _ => false,
            };
            let inlined = match &callee {
                Callee::Name(n) => {
                    let known =
                        env.contains_key(*n) || self.consts.contains_key(*n) || self.module.function(n).is_some();
                    known && program_fn(&self.lookup(env, n, func.span)?)
                }
                Callee::Value(v) => program_fn(v),
                _ => false,
            };
            // `len(sel)`: the builtin answers with the run-time count.
            let len = matches!(&callee, Callee::Name(n) if n.as_str() == "len" && !env.contains_key("len")
                && self.module.function("len").is_none());
            if let (Some(sel), false) = (&squeezed, inlined) {
                return super::squeezed::squeezed_use(sel);
            }
            let inlined = inlined || len;
            if let (Some(m), false) = (masked, inlined) {
                return self.torch_call_on_masked(&callee, &pos, &kw, m, span);
            }
        }
        match callee {
            Callee::Answered(v) => Ok(v),
            Callee::Method(o, name) => match o {
                FV::Masked(sel) if name == "squeeze" && pos.is_empty() && kw.is_empty() => {
                    self.squeeze_selection(&sel, span)
                }
                FV::Masked(sel) => match self.masked_call(name, &sel, &pos, &kw, span)? {
                    Some(r) => Ok(r),
                    None => super::state::masked_use(&FV::Masked(sel)),
                },
                FV::Squeezed(sel) => self.squeezed_call(name, &sel, &pos, &kw, span),
                FV::Module("math") => {
                    if let Some((k, _)) = kw.first() {
                        return diag(span, format!("unexpected keyword argument '{k}' for math.{name}"));
                    }
                    self.math(name, &pos, span)
                }
                FV::Module("torch") if matches!(name.as_str(), "finfo" | "iinfo") && kw.is_empty() => {
                    let d = match pos.as_slice() {
                        [] => None,
                        [FV::DType(d)] => Some(*d),
                        [FV::Tensor(t)] => Some(self.roots[t.root].dtype),
                        _ => return diag(span, format!("torch.{name}() takes a dtype")),
                    };
                    let (v, names) = crate::interp::python::type_info(name, d).map_err(err(span))?;
                    Ok(FV::Named(Rc::new(v.iter().map(super::expr::value_to_fv).collect()), names))
                }
                FV::Module("torch") if name.starts_with("_foreach_") => self.foreach(name, &pos, &kw, span),
                FV::Module("itertools") => self.itertools(name, &pos, &kw, span),
                FV::Module(m @ ("logging" | "warnings")) => {
                    Ok(crate::interp::compat::quiet_call(m, name).map_err(err(span))?.map_or(FV::None, FV::Module))
                }
                FV::Module("time") if crate::interp::compat::still_clock(name, pos.len() + kw.len()) => {
                    Ok(FV::Float(0.0))
                }
                FV::Module("copy") => self.deepcopy(name, &pos, &kw, span),
                FV::Module("functools") => self.functools(name, &pos, kw, span),
                FV::Module("torch.nn.init") => self.nn_init(name, &pos, &kw, span),
                FV::Tensor(t) if matches!(name.as_str(), "uniform_" | "normal_") => {
                    self.random_method(name, &t, pos.len(), &kw, span)
                }
                FV::Module(m) => self.module_call(m, name, pos, kw, span),
                FV::Tensor(t) => {
                    pos.insert(0, FV::Tensor(t));
                    if name == "cuda" {
                        return diag(span, crate::interp::python::not_cpu("'cuda'"));
                    }
                    let mut kw = kw;
                    crate::interp::python::strip_device(name, &mut pos, &mut kw).map_err(err(span))?;
                    if let Some(r) = self.where_call(true, false, name, &pos, &kw, span)? {
                        return Ok(r);
                    }
                    if let Some(why) = super::python::data_dependent(name, pos.len() - 1, kw.len(), true) {
                        return diag(span, why);
                    }
                    let a = A::new(pos, kw, span, name.clone());
                    if crate::interp::pyvalue::SHAPE_INPLACE.contains(&name.as_str()) {
                        let ExprKind::Attr(obj, _) = &func.kind else { unreachable!("a method call") };
                        return self.shape_inplace(env, obj, name, a);
                    }
                    let r = if name.ends_with('_') && !name.ends_with("__") {
                        self.inplace(name, &a)?
                    } else if let Some(r) = self.cast_drawn(name, &a)? {
                        r
                    } else {
                        self.torch(name, &a, true)?
                    };
                    a.check_keywords(&format!("Tensor.{name}"))?;
                    Ok(r)
                }
                FV::List(l) => self.list_method(&l, name, pos, span),
                FV::Dict(d) if kw.is_empty() => Self::dict_method(&d, name, &pos, span),
                FV::Str(text) if name == "format" => super::strings::str_format(&text, &pos, &kw, span),
                FV::Str(text) if kw.is_empty() => super::python::str_method(&text, name, &pos, span),
                other => diag(span, format!("unsupported method `{name}` on a value of type {}", other.type_name())),
            },
            Callee::Name(n) if n == crate::frontend::ast::MAKE_CLOSURE => match pos.first() {
                Some(FV::Func(f)) => Ok(FV::Closure(f.clone(), Rc::new(kw))),
                _ => unreachable!("the frontend makes closures of helpers only"),
            },
            Callee::Name(n) => {
                let known = env.contains_key(n) || self.consts.contains_key(n) || self.module.function(n).is_some();
                if known {
                    let callee = self.lookup(env, n, func.span)?;
                    return self.call_value(callee, pos, kw, span, &format!("`{n}`"));
                }
                let a = A::builtin(pos, kw, span, n.clone());
                let r = self.builtin(n, &a)?;
                a.check_keywords(n)?;
                Ok(r)
            }
            Callee::Value(f) => self.call_value(f, pos, kw, span, "the value"),
        }
    }

    /// `MODULE.NAME(...)`: an op of the table (`torch.*`, `F.*`, `torch.linalg.*`), writing its result through `out=`
    /// where the op takes it.
    pub(super) fn module_call(&mut self, m: &str, name: &str, pos: Vec<FV>, kw: Keywords, span: Span) -> FR<FV> {
        if let Some(r) = self.random_tensor(m, name, &pos, &kw, span)? {
            return Ok(r);
        }
        // `nn.Parameter(...)`'s tensor is kept as one (`interp::grads::Parameters`).
        let as_bool = |v: &FV| if let FV::Bool(b) = v { Some(*b) } else { None };
        let parameter =
            ((m, name) == ("torch.nn", "Parameter")).then(|| crate::interp::grads::requires_grad(&pos, &kw, as_bool));
        let r = self.module_function(m, name, pos, kw, span)?;
        if let Some(requires) = parameter {
            let id = crate::interp::pyvalue::Walk::identity(self, &r, span)?;
            self.parameters.add(id, requires).map_err(err(span))?;
        }
        Ok(r)
    }

    pub(super) fn module_function(
        &mut self,
        m: &str,
        name: &str,
        mut pos: Vec<FV>,
        mut kw: Vec<(String, FV)>,
        span: Span,
    ) -> FR<FV> {
        if m == "torch.nn.functional" {
            if let Some(r) = self.inplace_activation(name, &mut pos, &mut kw, span) {
                return r;
            }
        }
        // A class of the file made for `torch.nn.NAME`, `torch.optim.NAME`, `collections.deque`
        // (`frontend::convert::prelude`).
        if let Some(c) = crate::frontend::module_class(m, name).filter(|c| self.module.function(c).is_some()) {
            return self.call_value(FV::Func(Rc::from(c.as_str())), pos, kw, span, &format!("`{m}.{name}`"));
        }
        if m == "torch.optim" {
            return diag(span, crate::interp::python::unsupported_optimizer(name));
        }
        if m == "torch.nn" && name.starts_with(|c: char| c.is_ascii_uppercase()) && name != "Parameter" {
            let (f, fixed) = crate::interp::compat::nn_module(name, pos, kw, FV::Int, |v| matches!(v, FV::Bool(true)))
                .map_err(err(span))?;
            return Ok(FV::Closure(Rc::from(f), Rc::new(fixed)));
        }
        if m == "torch.nn.functional._Reduction" {
            let arg = match pos.first() {
                Some(FV::Str(s)) => Some(&**s),
                _ => None,
            };
            return crate::interp::compat::reduction_enum(name, pos.len(), arg, kw.len())
                .map(FV::Int)
                .map_err(err(span));
        }
        let (m, name) = crate::interp::compat::module_call_target(m, name).map_err(err(span))?;
        let (m, name) = if m == "torch.autograd" || (m, name) == ("torch.nn", "Parameter") {
            let as_bool = |v: &FV| if let FV::Bool(b) = v { Some(*b) } else { None };
            crate::interp::compat::autograd_variable(name, &pos, &kw, FV::type_name, as_bool).map_err(err(span))?;
            kw.clear();
            pos.truncate(1);
            ("torch", "detach")
        } else if let Some((dtype, op)) =
            crate::interp::compat::typed_tensor(name, pos.len(), pos.first().map(FV::type_name), kw.len())
                .map_err(err(span))?
        {
            kw.push(("dtype".into(), FV::DType(dtype)));
            if op == "empty" && pos.is_empty() {
                pos.push(FV::Int(0));
            }
            // Uninitialized memory: a floating tensor's elements are drawn (`super::drawn`), to be written first.
            if op == "empty" && crate::interp::drawn::undrawable(dtype).is_none() {
                return self.made_drawn(op, pos, kw, span);
            }
            ("torch", op)
        } else {
            (m, name)
        };
        crate::interp::python::strip_device(name, &mut pos, &mut kw).map_err(err(span))?;
        let out = crate::interp::pyvalue::out_keyword(m, name, &pos, &mut kw);
        let full = format!("{m}.{name}");
        if let Some(r) = self.where_call(false, m == "torch", name, &pos, &kw, span)? {
            return Ok(r);
        }
        if let Some(why) = super::python::data_dependent(name, pos.len(), kw.len(), false) {
            return diag(span, why);
        }
        let a = A::new(pos, kw, span, full.clone());
        let op = if m == "torch.linalg" && name == "norm" { "linalg_norm" } else { name };
        let r = self.torch(op, &a, false)?;
        a.check_keywords(&full)?;
        match out {
            Some((kind, out)) if !matches!(out, FV::None) => self.write_out(name, kind, &a, r, out),
            _ => Ok(r),
        }
    }

    pub(super) fn inline(&mut self, name: &str, pos: Vec<FV>, kw: Vec<(String, FV)>, span: Span) -> FR<FV> {
        let module = self.module;
        let f = module.function(name).expect("functions named by Func exist");
        let bound = crate::interp::bind::bind_args(
            f,
            pos,
            &kw,
            |d, frozen| self.expr(&mut frozen.into_iter().collect(), d),
            err(span),
            |items| FV::Tuple(Rc::new(items)),
            |items| {
                let d = items.into_iter().map(|(k, v)| (FV::Str(k.as_str().into()), v)).collect();
                FV::Dict(Rc::new(RefCell::new(d)))
            },
        )?;
        let env: Env = bound.into_iter().collect();
        self.call_body(f, env)
    }

    fn builtin(&mut self, name: &str, a: &A) -> FR<FV> {
        if let Some(r) = crate::interp::pyvalue::shared_builtin(self, name, a) {
            return r;
        }
        if name == "setattr" && a.kw.is_empty() {
            if let Some(r) = crate::interp::objects::setattr(self, &a.pos, a.span) {
                return r;
            }
        }
        if let ("id", [v], true) = (name, a.pos.as_slice(), a.kw.is_empty()) {
            return Ok(FV::Int(crate::interp::pyvalue::Walk::identity(self, v, a.span)?));
        }
        let span = a.span;
        match name {
            "range" => {
                let ints: Vec<i64> = a
                    .pos
                    .iter()
                    .map(|v| match v {
                        FV::Tensor(t) => self.tensor_to_int(t, span).and_then(|x| {
                            x.as_const()
                                .ok_or_else(|| Stop::NeedsStatic(span, "a loop bound known only at run time".into()))
                        }),
                        other => a.int_of(other, "range"),
                    })
                    .collect::<FR<_>>()?;
                let (s, t, st) =
                    crate::interp::calls::range_args(&ints).map_err(|m| Stop::Diag(Diagnostic::new(m).at(span)))?;
                Ok(FV::Range(s, t, st))
            }
            "len" => match a.req(0, "obj")? {
                FV::Tensor(t) if t.shape.is_empty() => diag(span, "len() of a 0-d tensor"),
                FV::Tensor(t) => Ok(FV::Int(t.shape[0] as i64)),
                v @ FV::Range(..) => Ok(FV::Int(self.iterate(v, span)?.len() as i64)),
                FV::Dict(d) => Ok(FV::Int(d.borrow().len() as i64)),
                // A selection's first dim: a fixed one before the selected dim, else the run-time count.
                FV::Masked(sel) => {
                    let sel = sel.as_ref().clone();
                    match self.masked_attribute(&sel, "shape", span)? {
                        Some(FV::Tuple(dims)) => Ok(dims[0].clone()),
                        _ => diag(span, "len() of a boolean-mask selection"),
                    }
                }
                FV::Str(x) => Ok(FV::Int(x.chars().count() as i64)),
                other => match other.items() {
                    Some(items) => Ok(FV::Int(items.len() as i64)),
                    None => diag(span, format!("object of type '{}' has no len()", other.type_name())),
                },
            },
            "int" | "float" | "bool" => self.number_builtin(name, a),
            "abs" => match a.req(0, "x")?.clone() {
                FV::Int(i) => match i.checked_abs() {
                    Some(v) => Ok(FV::Int(v)),
                    None => diag(span, crate::interp::pyarith::int_range_error(-(i as i128))),
                },
                FV::Float(f) => Ok(FV::Float(f.abs())),
                v @ FV::Tensor(_) => self.unary(ops::Unary::Abs, &v, span),
                FV::DynFloat(t) => self.dyn_abs(t, span),
                other => diag(span, format!("abs() of a {} is not supported here", other.type_name())),
            },
            "min" | "max" => self.min_max(name, a),
            "pow" if a.pos.len() == 2 && a.kw.is_empty() => self.binop(&a.pos[0], BinOp::Pow, &a.pos[1], span),
            "all" | "any" => {
                let items = self.iterate(a.req(0, "iterable")?, span)?;
                self.all_any(name == "any", &items, span)
            }
            "dict" => self.dict_call(a),
            "set" | "frozenset" => {
                let items = match a.opt(0, "iterable") {
                    Some(v) => self.iterate(v, span)?,
                    None => Vec::new(),
                };
                if items.iter().any(|v| matches!(v, FV::DynInt(_) | FV::DynBool(_))) {
                    return super::state::needs_static(
                        span,
                        "a set of numbers known only at run time (its size and order depend on them)",
                    );
                }
                crate::interp::pyset::set_of(items).map_err(err(span))
            }
            "sorted" => {
                let reverse = matches!(a.get(99, "reverse"), Some(FV::Bool(true)));
                let items = self.iterate(a.req(0, "iterable")?, span)?;
                let Some(known) = items.iter().map(super::python::fv_static).collect::<Option<Vec<_>>>() else {
                    return super::state::needs_static(span, "sorted() of values known only when the program runs");
                };
                let sorted = match a.get(99, "key").filter(|k| !matches!(k, FV::None)).cloned() {
                    None => crate::interp::pyarith::py_sorted(known, reverse).map_err(err(span))?,
                    Some(key) => {
                        let mut keys = Vec::new();
                        for x in &items {
                            let k = self.call_value(key.clone(), vec![x.clone()], vec![], span, "key")?;
                            let Some(k) = super::python::fv_static(&k) else {
                                return super::state::needs_static(
                                    span,
                                    "sorted() by keys known only when the program runs",
                                );
                            };
                            keys.push(k);
                        }
                        crate::interp::pyarith::py_sorted_by(known, keys, reverse).map_err(err(span))?
                    }
                };
                Ok(FV::List(Rc::new(RefCell::new(sorted.iter().map(super::expr::value_to_fv).collect()))))
            }
            "print" => Ok(FV::None),
            "callable" => Ok(FV::Bool(matches!(a.req(0, "obj")?, FV::Func(_) | FV::Closure(..)))),
            "hasattr" => super::python::hasattr(a.req(0, "obj")?, a.req(1, "name")?, span),
            "str" => {
                let v = a.req(0, "object")?;
                Ok(FV::Str(self.fv_str(v).into()))
            }
            // A module-level name whose value could not be made says why.
            _ => match self.failed_consts.get(name) {
                Some(d) => diag(span, format!("`{name}` cannot be used: {d}")),
                None => diag(span, format!("unsupported function `{name}`")),
            },
        }
    }

    pub(super) fn attribute(&mut self, o: &FV, name: &str, span: Span) -> FR<FV> {
        match o {
            FV::Masked(sel) => match self.masked_attribute(sel, name, span)? {
                Some(v) => Ok(v),
                None => super::state::masked_use(o),
            },
            FV::Squeezed(sel) if name == "dtype" => Ok(FV::DType(self.tensor_ty(sel.src, span)?.0)),
            FV::Squeezed(sel) => super::squeezed::squeezed_use(sel),
            FV::Tensor(t) => Ok(match name {
                "shape" => FV::Tuple(Rc::new(t.shape.iter().map(|&d| FV::Int(d as i64)).collect())),
                "dtype" => FV::DType(self.roots[t.root].dtype),
                "ndim" => FV::Int(t.shape.len() as i64),
                "T" => {
                    let rev: Vec<i64> = (0..t.shape.len() as i64).rev().collect();
                    FV::Tensor(self.tview(t, |d| d.permute(&rev)).map_err(err(span))?)
                }
                "mT" => FV::Tensor(self.tview(t, |d| d.transpose(-2, -1)).map_err(err(span))?),
                "data" | "real" => o.clone(),
                "device" => FV::Device,
                "layout" => FV::Str(crate::interp::device::STRIDED.into()),
                "is_cuda" => FV::Bool(false),
                "grad" | "grad_fn" => FV::None,
                _ => match crate::interp::python::cpu_dense_flag(name) {
                    Some(b) => FV::Bool(b),
                    None => return diag(span, format!("unsupported tensor attribute `.{name}`")),
                },
            }),
            FV::Named(items, names) => crate::interp::pyvalue::named_field(items, names, name).map_err(err(span)),
            // A prelude class as a value (`isinstance(m, nn.Linear)`): its constructor.
            FV::Module(m)
                if crate::frontend::module_class(m, name).is_some_and(|c| self.module.function(&c).is_some()) =>
            {
                Ok(FV::Func(crate::frontend::module_class(m, name).expect("checked").into()))
            }
            // Attributes of modules, dtypes and the device are plain Python values, the interpreter's.
            FV::Module(m) => {
                crate::interp::python::module_attr(m, name).map(|v| super::expr::value_to_fv(&v)).map_err(err(span))
            }
            FV::DType(d) => {
                crate::interp::python::dtype_attr(*d, name).map(|v| super::expr::value_to_fv(&v)).map_err(err(span))
            }
            FV::Device => {
                crate::interp::python::device_attr(name).map(|v| super::expr::value_to_fv(&v)).map_err(err(span))
            }
            other => diag(span, format!("'{}' object has no attribute '{name}'", other.type_name())),
        }
    }

    /// `.item()`: a run-time Python number.
    pub(super) fn item(&mut self, t: &TRef, span: Span) -> FR<FV> {
        if t.shape.iter().product::<usize>() != 1 {
            return diag(
                span,
                format!("a Tensor with {} elements cannot be converted to Scalar", t.shape.iter().product::<usize>()),
            );
        }
        let v = self.read(t, span)?;
        let v = self.reshape_value(v, &[], span)?;
        let d = self.roots[t.root].dtype;
        if let Some(x) = self.constant_scalar(v) {
            return Ok(match x {
                Scalar::B(b) => FV::Bool(b),
                Scalar::I(i) => FV::Int(i),
                Scalar::F(f) => FV::Float(f),
            });
        }
        Ok(match d {
            DType::Bool => FV::DynBool(v),
            d if d.is_float() => FV::DynFloat(self.cast(v, DType::F64, span)?),
            _ => self.run_time_int(v, span)?,
        })
    }

    /// The value of a one-element tensor term that reads no input (made from literals: Deformable DETR's
    /// `spatial_shapes = torch.as_tensor([(h, w), ...])` read back as sizes), computed now; `None` otherwise.
    pub(super) fn constant_scalar(&mut self, v: super::state::TId) -> Option<Scalar> {
        super::specialize::scalar_now(&mut self.t, v, &std::collections::BTreeMap::new(), |term| {
            term.as_ref().len() <= 4096
                && !term.as_ref().iter().any(|n| {
                    matches!(
                        n,
                        Node::Input(_)
                            | Node::Carried(_)
                            | Node::Iter(_)
                            | Node::Op(OpName::Fallback | OpName::Raise, _)
                    )
                })
        })
    }

    pub(super) fn unary(&mut self, u: ops::Unary, v: &FV, span: Span) -> FR<FV> {
        let FV::Tensor(t) = v else {
            return diag(span, "expected a tensor");
        };
        let x = self.read(t, span)?;
        let x = self.t.at(x);
        let r = self.t.op(unary_name(u), vec![x]).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, Some(t), span)?))
    }

    pub(super) fn matmul(&mut self, a: &FV, b: &FV, span: Span) -> FR<FV> {
        let (FV::Tensor(x), FV::Tensor(y)) = (a, b) else {
            return diag(span, "matmul needs two tensors");
        };
        let (dx, dy) = (self.roots[x.root].dtype, self.roots[y.root].dtype);
        if dx != dy {
            return diag(
                span,
                format!("expected m1 and m2 to have the same dtype, but got: {} != {}", dx.name(), dy.name()),
            );
        }
        let p = self.read(x, span)?;
        let q = self.read(y, span)?;
        let (p, q) = (self.t.at(p), self.t.at(q));
        let r = self.t.op(OpName::Matmul, vec![p, q]).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, None, span)?))
    }

    /// Writes an in-place op's result `r` into `dst` after PyTorch's dtype and shape checks.
    pub(super) fn write_result(&mut self, dst: &TRef, r: &TRef, cast_check: bool, span: Span) -> FR<()> {
        let dd = self.roots[dst.root].dtype;
        let rd = self.roots[r.root].dtype;
        if cast_check && !dd.can_cast_from(rd) {
            return diag(
                span,
                format!("result type {} can't be cast to the desired output type {}", rd.name(), dd.name()),
            );
        }
        let b = ops::broadcast_shapes(&dst.shape, &r.shape).map_err(err(span))?;
        if b != dst.shape {
            return diag(
                span,
                format!(
                    "output with shape {} doesn't match the broadcast shape {}",
                    fmt_shape(&dst.shape),
                    fmt_shape(&b)
                ),
            );
        }
        let v = self.read(r, span)?;
        self.write(dst, v, span)
    }

    pub(super) fn operand_fv(&self, a: &A, i: usize, name: &str) -> FR<FV> {
        let v = a.req(i, name)?;
        match v {
            FV::Tensor(_)
            | FV::Int(_)
            | FV::Float(_)
            | FV::Bool(_)
            | FV::DynInt(_)
            | FV::DynFloat(_)
            | FV::DynBool(_) => Ok(v.clone()),
            other => diag(
                a.span,
                format!("{}(): argument '{name}' must be Tensor or Number, not {}", a.name, other.type_name()),
            ),
        }
    }

    /// The term of a tensor or number cast to `dtype` (for ops whose operands share one dtype).
    pub(super) fn term_as(&mut self, v: &FV, dtype: DType, span: Span) -> FR<egg::Id> {
        let t = match v {
            FV::Tensor(t) => {
                let x = self.read(t, span)?;
                self.cast(x, dtype, span)?
            }
            other => match other {
                FV::Int(i) => self.full(&[], dtype, Scalar::I(*i)).map_err(err(span))?,
                FV::Float(f) => self.full(&[], dtype, Scalar::F(*f)).map_err(err(span))?,
                FV::Bool(b) => self.full(&[], dtype, Scalar::B(*b)).map_err(err(span))?,
                _ => self.scalar_tensor(other, Some(dtype), span)?.0,
            },
        };
        Ok(self.t.at(t))
    }

    pub(super) fn dummy_operand(&self, v: &FV) -> FR<Operand> {
        Ok(match v {
            FV::Tensor(t) => Operand::T(Tensor::zeros(self.roots[t.root].dtype, &vec![1; t.shape.len()])?),
            FV::Bool(_) | FV::DynBool(_) => Operand::S(Scalar::B(false)),
            FV::Int(_) | FV::DynInt(_) => Operand::S(Scalar::I(0)),
            _ => Operand::S(Scalar::F(0.0)),
        })
    }

    pub(super) fn fresh_op(&mut self, op: OpName, args: Vec<egg::Id>, layout: Option<&TRef>, span: Span) -> FR<FV> {
        let r = self.t.op(op, args).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, layout, span)?))
    }

    pub(super) fn lit_ints(&mut self, v: &[i64]) -> egg::Id {
        self.t.b.ints(v)
    }

    pub(super) fn view_fv(&self, t: &TRef, span: Span, f: impl Fn(&Tensor) -> Result<Tensor, String>) -> FR<FV> {
        Ok(FV::Tensor(self.tview(t, f).map_err(err(span))?))
    }

    pub(super) fn reduce_op(
        &mut self,
        op: OpName,
        t: &TRef,
        dims: &[i64],
        keep: bool,
        dtype: Option<DType>,
        span: Span,
    ) -> FR<FV> {
        let mut x = self.read(t, span)?;
        if let Some(d) = dtype {
            x = self.cast(x, d, span)?;
        }
        let x = self.t.at(x);
        let l = self.lit_ints(dims);
        let k = self.t.leaf(Node::Bool(crate::ir::BoolLit(keep)));
        match dtype {
            // Integer sums accumulate in int64; `dtype=torch.int32` (or narrower) wraps the total into it, which
            // accumulating in that dtype gives too (wrap-around is addition modulo 2^bits).
            Some(d) if !d.is_float() => {
                let r = self.t.op(op, vec![x, l, k]).map_err(Self::tyerr(span))?;
                let r = self.cast(r, d, span)?;
                Ok(FV::Tensor(self.fresh(r, None, span)?))
            }
            _ => self.fresh_op(op, vec![x, l, k], None, span),
        }
    }

    /// Writes the result `r` of `torch.NAME` into `out` (an `out=` argument) through `out`'s view, so every alias
    /// of `out` sees it, after PyTorch's checks; the call's value is `out` itself.
    fn write_out(&mut self, name: &str, kind: OutKind, a: &A, r: FV, out: FV) -> FR<FV> {
        let span = a.span;
        let (FV::Tensor(r), FV::Tensor(out)) = (r, out) else {
            return diag(span, format!("{name}(): argument 'out' must be Tensor"));
        };
        let (rd, od) = (self.roots[r.root].dtype, self.roots[out.root].dtype);
        check_out(name, kind, rd, &r.shape, od, &out.shape).map_err(err(span))?;
        let tensor = |v| if let FV::Tensor(t) = v { Some(t) } else { None };
        let inputs: Vec<TRef> = crate::interp::pyvalue::tensor_arguments(&a.pos, &a.kw, tensor);
        let refs: Vec<&TRef> = inputs.iter().collect();
        let scan = crate::interp::out_arg::out_may_be_input(name);
        self.check_at_corners(&out, &refs, span, |d, ins| {
            let ins: Vec<&Tensor> = ins.iter().copied().filter(|t| !(scan && t.same_view(d))).collect();
            ops::check_out_overlap(d, &ins, kind == OutKind::Elementwise).map_err(|e| {
                if e.is_empty() {
                    overlap_error(name)
                } else {
                    e
                }
            })
        })?;
        self.write_result(&out, &r, true, span)?;
        Ok(FV::Tensor(out))
    }

    pub(super) fn inplace(&mut self, name: &str, a: &A) -> FR<FV> {
        let dst = a.tensor(0, "self")?;
        if matches!(name, "index_put_" | "masked_fill_") && self.conditional_shared(&dst) {
            self.on_each_choice(&dst, a.span, &mut |s, c| s.inplace_into(name, a, c.clone()).map(|_| ()))?;
            return Ok(FV::Tensor(dst));
        }
        self.inplace_into(name, a, dst)
    }

    /// The in-place op `name` with arguments `a` (`self` at its place), writing into `dst`.
    fn inplace_into(&mut self, name: &str, a: &A, dst: TRef) -> FR<FV> {
        let span = a.span;
        match name {
            "copy_" => {
                let src = match a.req(1, "src")?.clone() {
                    FV::Tensor(s) => s,
                    other => {
                        let (t, _) = self.scalar_tensor(&other, Some(self.roots[dst.root].dtype), span)?;
                        self.fresh(t, None, span)?
                    }
                };
                self.check_inplace(&dst, &[&src], true, span)?;
                if !self.copy_drawn_into(&dst, &src, span)? {
                    self.write_result(&dst, &src, false, span)?;
                }
            }
            "fill_" | "zero_" => {
                let v = if name == "zero_" { FV::Int(0) } else { a.req(1, "value")?.clone() };
                let dt = self.roots[dst.root].dtype;
                let t = match v {
                    FV::Tensor(t) if t.shape.is_empty() => {
                        // As the reference: from a tensor, PyTorch fills with `copy_`, which checks internal overlap.
                        self.check_inplace(&dst, &[], true, span)?;
                        let x = self.read(&t, span)?;
                        self.cast(x, dt, span)?
                    }
                    FV::Tensor(t) => {
                        return diag(
                            span,
                            format!(
                                "fill_ only supports 0-dimension value tensor but got tensor with {} dimensions.",
                                t.shape.len()
                            ),
                        )
                    }
                    other => self.scalar_tensor(&other, Some(dt), span)?.0,
                };
                self.write(&dst, t, span)?;
            }
            "index_put_" => {
                let idx = a.req(1, "indices")?.items().ok_or_else(|| {
                    Stop::Diag(Diagnostic::new("index_put_(): argument 'indices' must be tuple of Tensors").at(span))
                })?;
                let values = a.tensor(2, "values")?;
                if self.roots[values.root].dtype != self.roots[dst.root].dtype {
                    return diag(
                        span,
                        super::subscript::index_put_dtypes(self.roots[dst.root].dtype, self.roots[values.root].dtype),
                    );
                }
                let acc = a.bool_or(3, "accumulate", false)?;
                self.check_inplace(&dst, &[&values], false, span)?;
                let dt = self.roots[dst.root].dtype;
                if acc && dst.alt.is_none() && self.dummy(&dst, dt).has_internal_overlap() {
                    self.index_accumulate_expanded(&dst, &idx, &FV::Tensor(values), span)?;
                } else if self.is_expanded_write(&dst)
                    && self.index_write_expanded(&dst, &idx, &FV::Tensor(values.clone()), false, span)?.is_some()
                {
                    // Written as PyTorch writes into an expanded view (the last element per memory position).
                } else {
                    self.check_partial_write(&dst, name, span)?;
                    self.index_write(&dst, &idx, &FV::Tensor(values), acc, span)?;
                }
            }
            "t_" | "transpose_" | "squeeze_" | "unsqueeze_" | "resize_" | "as_strided_" | "swapdims_" | "swapaxes_" => {
                return diag(span, format!("`{name}` changes a tensor's shape in place, which is not supported"));
            }
            _ => {
                let base = &name[..name.len() - 1];
                let unsupported = |m: &str| crate::frontend::torch_api::unsupported(&format!("torch.Tensor.{m}"));
                let r = match self.torch(base, a, true) {
                    // `x.set_(...)`: the in-place method is what the program names (there is no `set`).
                    Err(Stop::Diag(d)) if d.message == unsupported(base) => return diag(span, unsupported(name)),
                    r => match r? {
                        FV::Tensor(r) => r,
                        _ => return diag(span, format!("unsupported tensor method `.{name}()`")),
                    },
                };
                let inputs: Vec<TRef> = a.tensors().into_iter().cloned().collect();
                let refs: Vec<&TRef> = inputs.iter().collect();
                self.check_inplace(&dst, &refs, !UNCHECKED_INPLACE.contains(&name), span)?;
                if UNCHECKED_INPLACE.contains(&name) {
                    let dt = self.roots[dst.root].dtype;
                    if name == "masked_fill_" && dst.alt.is_none() && self.dummy(&dst, dt).has_internal_overlap() {
                        let mask = a.tensor(1, "mask")?;
                        let value = self.term_as(a.req(2, "value")?, dt, span)?;
                        self.masked_fill_expanded(&dst, &mask, value, span)?;
                        return Ok(FV::Tensor(dst));
                    }
                    self.check_partial_write(&dst, name, span)?;
                }
                self.write_result(&dst, &r, true, span)?;
            }
        }
        Ok(FV::Tensor(dst))
    }
}
