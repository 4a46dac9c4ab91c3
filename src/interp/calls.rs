//! Calls: user helpers, Python builtins, list methods, attributes, and the routing of `torch.*`, `F.*` and tensor
//! methods to the op table in `torch_ops`.

use super::args::{to_int, Args};
use super::exec::{operand, tensor_err, Frame, Interp};
use super::out_arg::{check_out, overlap_error, OutKind};
use super::pyarith::int_range_error;
use super::pyvalue::Callee;
use super::value::Value;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;
use crate::tensor::ops::{self, Unary};
use crate::tensor::Tensor;

impl<'m> Interp<'m> {
    /// A call expression: its callee and arguments evaluated (`pyvalue::call_parts`), then the callee dispatched.
    pub(super) fn call(&mut self, frame: &mut Frame, call: &'m Expr) -> Result<Value, Diagnostic> {
        let (span, ExprKind::Call { func, .. }) = (call.span, &call.kind) else { unreachable!("a call expression") };
        let (callee, pos, kw) = super::pyvalue::call_parts(self, frame, call)?;
        let copies = match &callee {
            Callee::Method(o, name) => self.check_call(Some(o), name, &pos, &kw, span)?,
            Callee::Name(n) if !self.program_name(frame, n) => self.check_call(None, n, &pos, &kw, span)?,
            _ => false,
        };
        // What a copy between floating tensors carries (`drawn::carried_marks`), with where it goes.
        let carried = match &callee {
            Callee::Method(o, name) if self.drawn.any() => super::drawn::carried_marks(Some(o), name, &pos)
                .map(|s| (s.clone(), (*name == "copy_").then(|| o.clone()))),
            _ => None,
        };
        let r = self.call_checked(frame, func, callee, pos, kw, span)?;
        if copies {
            self.drawn.adopt(&r);
        }
        if let Some((src, into)) = carried {
            if let Some(Value::Tensor(dst)) = into.as_ref().or(Some(&r)) {
                super::drawn::carry_marks(&mut self.drawn, &src, dst).map_err(|m| Diagnostic::new(m).at(span))?;
            }
        }
        Ok(r)
    }

    /// Whether a called name is the program's (a local, a module constant, a function of the file), not a builtin.
    fn program_name(&self, frame: &Frame, n: &str) -> bool {
        frame.contains_key(n) || self.globals.contains_key(n) || self.module.function(n).is_some()
    }

    /// `call` after the check of what it reads.
    fn call_checked(
        &mut self,
        frame: &mut Frame,
        func: &'m Expr,
        callee: Callee<Value>,
        mut pos: Vec<Value>,
        kw: Vec<(String, Value)>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        match callee {
            Callee::Answered(v) => Ok(v),
            Callee::Method(o, name) => match o {
                Value::Module("torch") if matches!(name.as_str(), "finfo" | "iinfo") && kw.is_empty() => {
                    let d = match pos.as_slice() {
                        [] => None,
                        [Value::DType(d)] => Some(*d),
                        [Value::Tensor(t)] => Some(t.dtype()),
                        _ => return err(span, format!("torch.{name}() takes a dtype")),
                    };
                    let (v, names) = super::python::type_info(name, d).map_err(tensor_err(span))?;
                    Ok(Value::Named(std::rc::Rc::new(v), names))
                }
                Value::Module("torch") if name.starts_with("_foreach_") => self.foreach(name, &pos, &kw, span),
                Value::Module("itertools") => self.itertools(name, &pos, &kw, span),
                Value::Module("functools") if name == "reduce" => super::compat::reduce(self, &pos, &kw, span),
                Value::Module("functools") => super::compat::partial_value(name, &pos, kw).map_err(tensor_err(span)),
                Value::Module(m @ ("logging" | "warnings")) => {
                    Ok(super::compat::quiet_call(m, name).map_err(tensor_err(span))?.map_or(Value::None, Value::Module))
                }
                Value::Module("time") if super::compat::still_clock(name, pos.len() + kw.len()) => {
                    Ok(Value::Float(0.0))
                }
                Value::Module("copy") => {
                    super::compat::deepcopy_args(name, &pos, &kw).map_err(tensor_err(span))?;
                    let copy = deepcopy(&pos[0]).map_err(tensor_err(span))?;
                    super::grads::copy_parameters(self, &pos[0], &copy, span, |w, id, f| w.parameters.add(id, f))?;
                    Ok(copy)
                }
                Value::Module("torch.nn.init") => self.nn_init(name, &pos, &kw, span),
                Value::Module(m) => self.module_call(m, name, pos, kw, span),
                Value::Tensor(t) if matches!(name.as_str(), "uniform_" | "normal_") => {
                    let keywords: Vec<&str> = kw.iter().map(|(k, _)| k.as_str()).collect();
                    super::drawn::random_method(name, pos.len(), &keywords).map_err(tensor_err(span))?;
                    self.draw(&t, span)?;
                    Ok(Value::Tensor(t))
                }
                Value::Tensor(t) => {
                    pos.insert(0, Value::Tensor(t));
                    if name == "cuda" {
                        return err(span, super::python::not_cpu("'cuda'"));
                    }
                    let mut kw = kw;
                    super::python::strip_device(name, &mut pos, &mut kw).map_err(tensor_err(span))?;
                    let a = Args::new(pos, kw, span, name.clone());
                    if crate::interp::pyvalue::SHAPE_INPLACE.contains(&name.as_str()) {
                        let ExprKind::Attr(obj, _) = &func.kind else { unreachable!("a method call") };
                        return self.shape_inplace(frame, obj, name, a);
                    }
                    self.tensor_method_call(name, a, span)
                }
                Value::List(l) => self.list_method(&l, name, pos, span),
                Value::Dict(d) if kw.is_empty() => Self::dict_method(&d, name, &pos, span),
                Value::Str(text) if name == "format" => {
                    let s = super::pyfmt::str_format(&text, &pos, &kw).map_err(tensor_err(span))?;
                    Ok(Value::Str(s.into()))
                }
                Value::Str(text) if kw.is_empty() => str_method(&text, name, &pos, span),
                other => err(span, format!("unsupported method `{name}` on a value of type {}", other.type_name())),
            },
            Callee::Name(n) if n == crate::frontend::ast::MAKE_CLOSURE => match pos.first() {
                Some(Value::Func(f)) => Ok(Value::Closure(f.clone(), std::rc::Rc::new(kw))),
                _ => unreachable!("the frontend makes closures of helpers only"),
            },
            Callee::Name(n) => {
                if self.program_name(frame, n) {
                    let f = self.lookup(frame, n, func.span)?;
                    return self.call_value(f, pos, kw, span);
                }
                let a = Args::builtin(pos, kw, span, n.clone());
                let r = self.builtin(n, &a)?;
                check_keywords(&a, n)?;
                Ok(r)
            }
            Callee::Value(f) => self.call_value(f, pos, kw, span),
        }
    }

    /// `list.NAME(*pos)`: `append`, `extend`, `pop`, `reverse`, `insert`, `copy`, `clear`, `index`.
    fn list_method(
        &mut self,
        l: &std::rc::Rc<std::cell::RefCell<Vec<Value>>>,
        name: &str,
        mut pos: Vec<Value>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        match (name, pos.len()) {
            ("append", 1) => {
                l.borrow_mut().push(pos.remove(0));
                Ok(Value::None)
            }
            ("extend", 1) => {
                let items = self.iterate(&pos[0], span)?;
                l.borrow_mut().extend(items);
                Ok(Value::None)
            }
            ("pop", 0) => l.borrow_mut().pop().ok_or_else(|| Diagnostic::new("pop from empty list").at(span)),
            ("reverse", 0) => {
                l.borrow_mut().reverse();
                Ok(Value::None)
            }
            ("index", 1) => {
                let items = l.borrow().clone();
                for (k, it) in items.iter().enumerate() {
                    // Python tries identity first; a tensor compared otherwise is an elementwise `==`.
                    match (it, &pos[0]) {
                        (Value::Tensor(a), Value::Tensor(b)) if a.same_view(b) => return Ok(Value::Int(k as i64)),
                        (Value::Tensor(_), _) | (_, Value::Tensor(_)) => {
                            return err(span, super::python::LIST_INDEX_TENSORS);
                        }
                        _ => {}
                    }
                    if matches!(self.compare(it, CmpOp::Eq, &pos[0], span)?, Value::Bool(true)) {
                        return Ok(Value::Int(k as i64));
                    }
                }
                err(span, "ValueError: list.index(x): x not in list")
            }
            ("copy", 0) => Ok(Value::List(std::rc::Rc::new(std::cell::RefCell::new(l.borrow().clone())))),
            ("clear", 0) => {
                l.borrow_mut().clear();
                Ok(Value::None)
            }
            ("pop", 1) => {
                let i = to_int(&pos[0]).map_err(tensor_err(span))?;
                let mut v = l.borrow_mut();
                let k = super::python::list_pop_index(i, v.len()).map_err(tensor_err(span))?;
                Ok(v.remove(k))
            }
            ("insert", 2) => {
                let i = to_int(&pos[0]).map_err(tensor_err(span))?;
                let mut v = l.borrow_mut();
                let n = v.len() as i64;
                let k = if i < 0 { (i + n).max(0) } else { i.min(n) };
                v.insert(k as usize, pos[1].clone());
                Ok(Value::None)
            }
            _ => err(span, format!("unsupported list method `{name}`")),
        }
    }

    /// `MODULE.NAME(...)`: a `math` function, a `torch.Tensor` method called as a function, or an op of the table
    /// (`torch.*`, `F.*`, `torch.linalg.*`), writing its result through `out=` where the op takes it.
    fn module_call(
        &mut self,
        m: &str,
        name: &str,
        pos: Vec<Value>,
        kw: Vec<(String, Value)>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        // Random tensors: made as `empty` would make them, then drawn (`super::drawn`).
        if m == "torch" {
            if let Some(made) = super::drawn::random_creation(name, &pos, &kw) {
                let (op, pos, kw) = made.map_err(tensor_err(span))?;
                return self.made_drawn(op, pos, kw, span);
            }
        }
        // `nn.Parameter(...)`'s tensor is kept as one (`grads::Parameters`).
        let as_bool = |v: &Value| if let Value::Bool(b) = v { Some(*b) } else { None };
        let parameter =
            ((m, name) == ("torch.nn", "Parameter")).then(|| super::grads::requires_grad(&pos, &kw, as_bool));
        let r = self.module_function(m, name, pos, kw, span)?;
        if let Some(requires) = parameter {
            let id = crate::interp::pyvalue::Walk::identity(self, &r, span)?;
            self.parameters.add(id, requires).map_err(tensor_err(span))?;
        }
        Ok(r)
    }

    pub(super) fn module_function(
        &mut self,
        m: &str,
        name: &str,
        mut pos: Vec<Value>,
        mut kw: Vec<(String, Value)>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        if m == "torch.nn.functional" {
            if let Some(r) = self.inplace_activation(name, &mut pos, &mut kw, span) {
                return r;
            }
        }
        // A class of the file made for `torch.nn.NAME`, `torch.optim.NAME`, `collections.deque`
        // (`frontend::convert::prelude`).
        if let Some(c) = crate::frontend::module_class(m, name).filter(|c| self.module.function(c).is_some()) {
            return self.call_value(Value::Func(std::rc::Rc::from(c.as_str())), pos, kw, span);
        }
        if m == "torch.optim" {
            return err(span, super::python::unsupported_optimizer(name));
        }
        if m == "torch.nn" && name.starts_with(|c: char| c.is_ascii_uppercase()) && name != "Parameter" {
            let (f, fixed) = super::compat::nn_module(name, pos, kw, Value::Int, |v| matches!(v, Value::Bool(true)))
                .map_err(tensor_err(span))?;
            return Ok(Value::Closure(std::rc::Rc::from(f), std::rc::Rc::new(fixed)));
        }
        if m == "torch.nn.functional._Reduction" {
            let arg = match pos.first() {
                Some(Value::Str(s)) => Some(&**s),
                _ => None,
            };
            return super::compat::reduction_enum(name, pos.len(), arg, kw.len())
                .map(Value::Int)
                .map_err(tensor_err(span));
        }
        let (m, name) = crate::interp::compat::module_call_target(m, name).map_err(tensor_err(span))?;
        let (m, name) = if m == "torch.autograd" || (m, name) == ("torch.nn", "Parameter") {
            let as_bool = |v: &Value| if let Value::Bool(b) = v { Some(*b) } else { None };
            super::compat::autograd_variable(name, &pos, &kw, Value::type_name, as_bool).map_err(tensor_err(span))?;
            kw.clear();
            pos.truncate(1);
            ("torch", "detach")
        } else if let Some((dtype, op)) =
            super::compat::typed_tensor(name, pos.len(), pos.first().map(Value::type_name), kw.len())
                .map_err(tensor_err(span))?
        {
            kw.push(("dtype".into(), Value::DType(dtype)));
            if op == "empty" && pos.is_empty() {
                pos.push(Value::Int(0));
            }
            // Uninitialized memory: a floating tensor's elements are drawn (`super::drawn`), to be written first.
            if op == "empty" && super::drawn::undrawable(dtype).is_none() {
                return self.made_drawn(op, pos, kw, span);
            }
            ("torch", op)
        } else {
            (m, name)
        };
        let full = format!("{m}.{name}");
        super::python::strip_device(name, &mut pos, &mut kw).map_err(tensor_err(span))?;
        let out = crate::interp::pyvalue::out_keyword(m, name, &pos, &mut kw);
        let a = Args::new(pos, kw, span, full.clone());
        let r = if m == "math" {
            math_call(name, &a).map_err(tensor_err(span))
        } else if m == "torch.Tensor" {
            return self.tensor_method_call(name, a, span);
        } else {
            let op = if m == "torch.linalg" && name == "norm" { "linalg_norm" } else { name };
            self.torch_op(op, &a, false).map_err(|e| {
                if e.starts_with(super::torch_ops::UNKNOWN_OP) {
                    Diagnostic::new(crate::frontend::torch_api::unsupported(&full)).at(span)
                } else {
                    Diagnostic::new(e).at(span)
                }
            })
        }?;
        check_keywords(&a, &full)?;
        match out {
            Some((kind, out)) if !matches!(out, Value::None) => {
                self.write_out(name, kind, &a, r, out).map_err(tensor_err(span))
            }
            _ => Ok(r),
        }
    }

    pub(super) fn call_value(
        &mut self,
        f: Value,
        pos: Vec<Value>,
        kw: Vec<(String, Value)>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        match f {
            Value::Func(name) if name.starts_with("torch.nn.init.") => self.nn_init(&name[14..], &pos, &kw, span),
            Value::Func(name) if name.contains('.') => {
                let (m, op) = name.rsplit_once('.').expect("a dotted name");
                let (mut pos, mut kw) = (pos, kw);
                if m == "torch.nn.functional" {
                    if let Some(r) = self.inplace_activation(op, &mut pos, &mut kw, span) {
                        return r;
                    }
                }
                let a = Args::new(pos, kw, span, name.to_string());
                let r = self.torch_op(op, &a, false).map_err(tensor_err(span))?;
                check_keywords(&a, &name)?;
                Ok(r)
            }
            Value::Func(name) => {
                let module = self.module;
                let func = module.function(&name).expect("Func values name module functions");
                self.call_function(func, pos, kw, span)
            }
            Value::Closure(name, captured) if name.starts_with(super::objects::BOUND) => {
                let f = &name[super::objects::BOUND.len()..];
                let pos = captured.iter().map(|(_, o)| o.clone()).chain(pos).collect();
                self.call_value(Value::Func(f.into()), pos, kw, span)
            }
            Value::Closure(name, captured) if name.starts_with(super::compat::PARTIAL) => {
                let f = &name[super::compat::PARTIAL.len()..];
                let kw = super::compat::partial_keywords(&captured, kw);
                self.call_value(Value::Func(f.into()), pos, kw, span)
            }
            // A stateless `torch.nn` module: its function with the constructor's arguments.
            Value::Closure(name, captured) if name.contains('.') => {
                let kw = captured.iter().cloned().chain(kw).collect();
                self.call_value(Value::Func(name), pos, kw, span)
            }
            Value::Closure(name, captured) => {
                let module = self.module;
                let func = module.function(&name).expect("Closure values name module functions");
                let kw = closure_args(func, &pos, kw, &captured).map_err(|m| Diagnostic::new(m).at(span))?;
                self.call_function(func, pos, kw, span)
            }
            // A legacy tensor type as a value, called: its constructor.
            other => {
                let name = if let Value::Str(s) = &other { super::compat::legacy_type_constructor(s) } else { None };
                match name {
                    Some(name) => self.module_call("torch", name, pos, kw, span),
                    None => err(span, format!("'{}' object is not callable", other.type_name())),
                }
            }
        }
    }

    /// `torch._foreach_NAME(tensors, ...)`: the tensor method `NAME` on each tensor of the list (see
    /// `super::foreach`); `None` for an in-place op, else the list of results.
    fn foreach(&mut self, name: &str, pos: &[Value], kw: &[(String, Value)], span: Span) -> Result<Value, Diagnostic> {
        let (method, calls) = super::foreach::foreach_calls(name, pos, kw).map_err(tensor_err(span))?;
        let mut out = Vec::with_capacity(calls.len());
        for (p, k) in calls {
            let a = Args::new(p, k, span, method.clone());
            let r = self.tensor_method(&method, &a).map_err(|e| {
                if e.starts_with(super::torch_ops::UNKNOWN_OP) {
                    Diagnostic::new(crate::frontend::torch_api::unsupported(&format!("torch.{name}"))).at(span)
                } else {
                    Diagnostic::new(e).at(span)
                }
            })?;
            check_keywords(&a, &format!("torch.{name}"))?;
            out.push(r);
        }
        Ok(if method.ends_with('_') { Value::None } else { Value::list(out) })
    }

    /// `F.NAME(x, ..., inplace=True)` for an activation that takes `inplace` (`compat::inplace_activation`): the op
    /// out of place, its result copied into `x`, which it returns. `None` where it is not in place.
    fn inplace_activation(
        &mut self,
        name: &str,
        pos: &mut Vec<Value>,
        kw: &mut Vec<(String, Value)>,
        span: Span,
    ) -> Option<Result<Value, Diagnostic>> {
        let as_bool = |v: &Value| if let Value::Bool(b) = v { Some(*b) } else { None };
        match super::compat::inplace_activation(name, pos, kw, as_bool)? {
            Err(m) => Some(err(span, m)),
            Ok(true) if !pos.is_empty() => {
                let input = pos[0].clone();
                let f = Value::Func(format!("torch.nn.functional.{name}").into());
                Some(self.call_value(f, std::mem::take(pos), std::mem::take(kw), span).and_then(|out| {
                    self.tensor_method_call("copy_", Args::new(vec![input, out], vec![], span, "copy_".into()), span)
                }))
            }
            Ok(_) => None,
        }
    }

    /// A tensor method call `x.NAME(...)` (`a.pos[0]` is `x`), with its keyword arguments checked.
    pub(super) fn tensor_method_call(&mut self, name: &str, a: Args, span: Span) -> Result<Value, Diagnostic> {
        let r = self.tensor_method(name, &a).map_err(|e| {
            if e.starts_with(super::torch_ops::UNKNOWN_OP) {
                Diagnostic::new(crate::frontend::torch_api::unsupported(&format!("torch.Tensor.{name}"))).at(span)
            } else {
                Diagnostic::new(e).at(span)
            }
        })?;
        check_keywords(&a, &format!("Tensor.{name}"))?;
        Ok(r)
    }

    /// Writes the result `r` of `torch.NAME` into `out` (an `out=` argument) through `out`'s view, after PyTorch's
    /// checks, and returns `out`.
    fn write_out(&mut self, name: &str, kind: OutKind, a: &Args, r: Value, out: Value) -> Result<Value, String> {
        let (Value::Tensor(r), Value::Tensor(out)) = (r, out) else {
            return Err(format!("{name}(): argument 'out' must be Tensor"));
        };
        check_out(name, kind, r.dtype(), &r.shape, out.dtype(), &out.shape)?;
        let tensor = |v| if let Value::Tensor(t) = v { Some(t) } else { None };
        let inputs: Vec<Tensor> = crate::interp::pyvalue::tensor_arguments(&a.pos, &a.kw, tensor);
        let scan = super::out_arg::out_may_be_input(name);
        let refs: Vec<&Tensor> = inputs.iter().filter(|t| !(scan && t.same_view(&out))).collect();
        ops::check_out_overlap(&out, &refs, kind == OutKind::Elementwise).map_err(|e| {
            if e.is_empty() {
                overlap_error(name)
            } else {
                e
            }
        })?;
        ops::write_result(&out, &r, true)?;
        self.mark_written(&out);
        Ok(Value::Tensor(out))
    }

    fn builtin(&mut self, name: &str, a: &Args) -> Result<Value, Diagnostic> {
        if let Some(r) = crate::interp::pyvalue::shared_builtin(self, name, a) {
            return r;
        }
        if name == "setattr" && a.kw.is_empty() {
            if let Some(r) = crate::interp::objects::setattr(self, &a.pos, a.span) {
                return r;
            }
        }
        if let ("id", [v], true) = (name, a.pos.as_slice(), a.kw.is_empty()) {
            return Ok(Value::Int(crate::interp::pyvalue::Walk::identity(self, v, a.span)?));
        }
        let span = a.span;
        let e = tensor_err(span);
        match name {
            "range" => {
                let ints: Vec<i64> = a
                    .pos
                    .iter()
                    .map(to_int)
                    .collect::<Result<_, _>>()
                    .map_err(|m| Diagnostic::new(format!("range() argument {m}")).at(span))?;
                let (s, t, st) = range_args(&ints).map_err(|m| Diagnostic::new(m).at(span))?;
                Ok(Value::Range(s, t, st))
            }
            "len" => self.len_builtin(a),
            "int" | "float" | "bool" => self.number_builtin(name, a),
            "abs" => {
                let v = a.req(0, "x").map_err(&e)?;
                match v {
                    Value::Tensor(t) => Ok(Value::Tensor(ops::unary(Unary::Abs, t).map_err(&e)?)),
                    Value::Int(i) => Ok(Value::Int(
                        i.checked_abs().ok_or_else(|| Diagnostic::new(int_range_error(-(*i as i128))).at(span))?,
                    )),
                    Value::Float(f) => Ok(Value::Float(f.abs())),
                    Value::Bool(b) => Ok(Value::Int(*b as i64)),
                    other => err(span, format!("bad operand type for abs(): '{}'", other.type_name())),
                }
            }
            "min" | "max" => self.min_max(name, a),
            "pow" if a.pos.len() == 2 && a.kw.is_empty() => self.binop(&a.pos[0], BinOp::Pow, &a.pos[1], span),
            "all" | "any" => {
                // Python's: the first item whose truth decides (a falsy one for all, a truthy one for any).
                let want = name == "any";
                for it in self.iterate(a.req(0, "iterable").map_err(&e)?, span)? {
                    if self.truthy(&it, span)? == want {
                        return Ok(Value::Bool(want));
                    }
                }
                Ok(Value::Bool(!want))
            }
            "dict" => self.dict_call(a),
            "set" | "frozenset" => {
                let items = match a.get(0, "iterable") {
                    Some(v) => self.iterate(v, span)?,
                    None => Vec::new(),
                };
                super::pyset::set_of(items).map_err(&e)
            }
            "sorted" => {
                let reverse = matches!(a.get(99, "reverse"), Some(Value::Bool(true)));
                let items = self.iterate(a.req(0, "iterable").map_err(&e)?, span)?;
                match a.get(99, "key").filter(|k| !matches!(k, Value::None)).cloned() {
                    None => Ok(Value::list(super::pyarith::py_sorted(items, reverse).map_err(&e)?)),
                    Some(key) => {
                        let keys = (items.iter())
                            .map(|x| self.call_value(key.clone(), vec![x.clone()], vec![], span))
                            .collect::<Result<Vec<_>, _>>()?;
                        Ok(Value::list(super::pyarith::py_sorted_by(items, keys, reverse).map_err(&e)?))
                    }
                }
            }
            "round" => match a.req(0, "number").map_err(&e)? {
                Value::Float(f) => match a.opt_int(1, "ndigits").map_err(&e)? {
                    None => Ok(Value::Int(f.round_ties_even() as i64)),
                    Some(nd) => {
                        let p = 10f64.powi(nd as i32);
                        Ok(Value::Float((f * p).round_ties_even() / p))
                    }
                },
                Value::Int(i) => Ok(Value::Int(*i)),
                other => err(span, format!("type {} doesn't define __round__ method", other.type_name())),
            },
            "callable" => Ok(Value::Bool(matches!(a.req(0, "obj").map_err(&e)?, Value::Func(_) | Value::Closure(..)))),
            "hasattr" => {
                use super::python::{hasattr, AttrOwner};
                let Value::Str(name) = a.req(1, "name").map_err(&e)? else {
                    return err(span, "hasattr(): attribute name must be string");
                };
                let owner = match a.req(0, "obj").map_err(&e)? {
                    Value::Module(m) => AttrOwner::Module(m),
                    Value::Tensor(_) => AttrOwner::Tensor,
                    other => AttrOwner::Other(other.type_name()),
                };
                hasattr(owner, name).map(Value::Bool).map_err(|m| Diagnostic::new(m).at(span))
            }
            "str" => Ok(Value::Str(super::pyfmt::py_str(a.req(0, "object").map_err(&e)?).into())),
            "print" => Ok(Value::None),
            // A module-level name whose value could not be made says why.
            _ => match self.unusable_global(name, span) {
                Some(d) => Err(d),
                None => err(span, format!("unsupported function `{name}`")),
            },
        }
    }

    /// `itertools.NAME(...)`: `product` only, as a list of tuples (`compat::itertools`).
    fn itertools(
        &mut self,
        name: &str,
        pos: &[Value],
        kw: &[(String, Value)],
        span: Span,
    ) -> Result<Value, Diagnostic> {
        super::compat::itertools(self, name, pos, kw, span)
    }

    /// `a OP b` as a Python truth value (for `min`/`max` over values).
    pub(super) fn binop_compare(&mut self, a: &Value, op: CmpOp, b: &Value, span: Span) -> Result<bool, Diagnostic> {
        self.check_operands(&[a, b], span)?;
        let bin = if op == CmpOp::Gt { ops::Binary::Gt } else { ops::Binary::Lt };
        if let (Some(x), Some(y)) = (a.as_scalar(), b.as_scalar()) {
            return Ok(if op == CmpOp::Gt { x.to_f64() > y.to_f64() } else { x.to_f64() < y.to_f64() });
        }
        let (Some(x), Some(y)) = (operand(a), operand(b)) else {
            return err(span, format!("cannot compare '{}' and '{}'", a.type_name(), b.type_name()));
        };
        let r = ops::binary(bin, &x, &y).map_err(tensor_err(span))?;
        self.truthy(&Value::Tensor(r), span)
    }

    pub(super) fn attribute(&mut self, o: &Value, name: &str, span: Span) -> Result<Value, Diagnostic> {
        let e = tensor_err(span);
        match o {
            Value::Tensor(t) => Ok(match name {
                "shape" => shape_value(t),
                "dtype" => Value::DType(t.dtype()),
                "ndim" => Value::Int(t.dim() as i64),
                "T" => {
                    let rev: Vec<i64> = (0..t.dim() as i64).rev().collect();
                    Value::Tensor(t.permute(&rev).map_err(&e)?)
                }
                "mT" => Value::Tensor(t.transpose(-2, -1).map_err(&e)?),
                "data" => Value::Tensor(t.clone()),
                "device" => Value::Device,
                "layout" => Value::Str(super::device::STRIDED.into()),
                "is_cuda" => Value::Bool(false),
                "real" => Value::Tensor(t.clone()),
                // Outside autograd a tensor has no gradient and was made by no graph node.
                "grad" | "grad_fn" => Value::None,
                _ => match super::python::cpu_dense_flag(name) {
                    Some(b) => Value::Bool(b),
                    None => return err(span, format!("unsupported tensor attribute `.{name}`")),
                },
            }),
            Value::Named(items, names) => {
                crate::interp::pyvalue::named_field(items, names, name).map_err(tensor_err(span))
            }
            // A prelude class as a value (`isinstance(m, nn.Linear)`): its constructor.
            Value::Module(m)
                if crate::frontend::module_class(m, name).is_some_and(|c| self.module.function(&c).is_some()) =>
            {
                Ok(Value::Func(crate::frontend::module_class(m, name).expect("checked").into()))
            }
            Value::Module(m) => super::python::module_attr(m, name).map_err(&e),
            Value::DType(d) => super::python::dtype_attr(*d, name).map_err(&e),
            Value::Device => super::python::device_attr(name).map_err(&e),
            other => err(span, format!("'{}' object has no attribute '{name}'", other.type_name())),
        }
    }
}

pub(super) fn shape_value(t: &Tensor) -> Value {
    Value::tuple(t.shape.iter().map(|&d| Value::Int(d as i64)).collect())
}

fn math_call(name: &str, a: &Args) -> Result<Value, String> {
    // A one-element tensor is a Python float to math's functions (`__float__`): `math.sqrt(torch.mean(x ** 2))`.
    let number = |v: &Value| match v {
        Value::Tensor(t) if t.numel() == 1 => t.to_f64_vec().first().copied(),
        v => v.as_scalar().map(|s| s.to_f64()),
    };
    let x = number(a.req(0, "x")?).ok_or_else(|| format!("math.{name}() needs a number"))?;
    if let Some(b) = float_class(name, x) {
        return Ok(Value::Bool(b));
    }
    if a.pos.len() == 2 {
        let y = number(&a.pos[1]).ok_or_else(|| format!("math.{name}() needs numbers"))?;
        return math2(name, x, y).map(Value::Float);
    }
    math1(name, x)?.map(Value::from_scalar).ok_or_else(|| format!("unsupported function `math.{name}`"))
}

/// `math.isnan`, `math.isinf`, `math.isfinite` of `x` (both engines); `None` for another function.
pub(crate) fn float_class(name: &str, x: f64) -> Option<bool> {
    match name {
        "isnan" => Some(x.is_nan()),
        "isinf" => Some(x.is_infinite()),
        "isfinite" => Some(x.is_finite()),
        _ => None,
    }
}

/// `range(...)`'s arguments as (start, stop, step).
pub(crate) fn range_args(ints: &[i64]) -> Result<(i64, i64, i64), &'static str> {
    let (s, t, st) = match ints {
        [n] => (0, *n, 1),
        [s, t] => (*s, *t, 1),
        [s, t, st] => (*s, *t, *st),
        _ => return Err("range expected 1 to 3 arguments"),
    };
    if st == 0 {
        return Err("range() arg 3 must not be zero");
    }
    Ok((s, t, st))
}

/// `math.NAME(x, y)` for the two-argument functions programs use (always a float, as in Python).
pub(crate) fn math2(name: &str, x: f64, y: f64) -> Result<f64, String> {
    let r = match name {
        "pow" => {
            if x == 0.0 && y < 0.0 {
                return Err("ValueError: math domain error".into());
            }
            x.powf(y)
        }
        "atan2" => x.atan2(y),
        "hypot" => x.hypot(y),
        "fmod" => x % y,
        "copysign" => x.copysign(y),
        "log" => x.ln() / y.ln(),
        _ => return Err(format!("unsupported function `math.{name}` (with 2 arguments)")),
    };
    if r.is_nan() && !x.is_nan() && !y.is_nan() {
        return Err("ValueError: math domain error".into());
    }
    Ok(r)
}

/// `math.NAME(x)` for the one-argument functions programs use, with Python's errors: `ValueError: math domain
/// error` outside the domain, `OverflowError: math range error` where a finite argument has no finite result, and
/// `floor`/`ceil` of an infinity or NaN (Python's int conversion). `Ok(None)`: not a function we know.
pub(crate) fn math1(name: &str, x: f64) -> Result<Option<crate::tensor::Scalar>, String> {
    use crate::tensor::Scalar::{F, I};
    let r = match name {
        "sqrt" => x.sqrt(),
        "exp" => x.exp(),
        "log" => x.ln(),
        "log2" => x.log2(),
        "log10" => x.log10(),
        "cos" => x.cos(),
        "sin" => x.sin(),
        "tan" => x.tan(),
        "atan" => x.atan(),
        "asin" => x.asin(),
        "acos" => x.acos(),
        "tanh" => x.tanh(),
        "fabs" => x.abs(),
        "floor" | "ceil" => {
            if x.is_nan() {
                return Err("ValueError: cannot convert float NaN to integer".into());
            }
            if x.is_infinite() {
                return Err("OverflowError: cannot convert float infinity to integer".into());
            }
            let r = if name == "floor" { x.floor() } else { x.ceil() };
            if r.abs() >= 9.2e18 {
                return Err(format!("math.{name}({x}) does not fit in a 64-bit integer"));
            }
            return Ok(Some(I(r as i64)));
        }
        _ => return Ok(None),
    };
    // log(0) is -inf in IEEE arithmetic but a domain error in Python, as is anything that makes a NaN from a
    // number (sqrt(-1), cos(inf)).
    if (r.is_nan() && !x.is_nan()) || (matches!(name, "log" | "log2" | "log10") && x == 0.0) {
        return Err("ValueError: math domain error".into());
    }
    if r.is_infinite() && x.is_finite() {
        return Err("OverflowError: math range error".into());
    }
    Ok(Some(F(r)))
}

/// Rejects a keyword argument the op never looked up (so did not understand), instead of ignoring it.
fn check_keywords(a: &Args, callee: &str) -> Result<(), Diagnostic> {
    match a.unexpected() {
        Some(k) => err(a.span, format!("unexpected keyword argument '{k}' for {callee}")),
        None => Ok(()),
    }
}

/// The keywords a call of a nested function passes to its helper: the call's own, then the captured values (which
/// are keyword-only parameters of the helper, after its own); Python's errors for what the nested function itself
/// would refuse (too many positional arguments, a keyword that names a captured variable).
pub(crate) fn closure_args<V: Clone>(
    func: &crate::frontend::ast::Function,
    pos: &[V],
    mut kw: Vec<(String, V)>,
    captured: &[(String, V)],
) -> Result<Vec<(String, V)>, String> {
    let own = func.params.len() - captured.len();
    let shown = func.name.split_once('>').map_or(func.name.as_str(), |(a, _)| a.trim_start_matches("_<def "));
    if func.vararg.is_none() && pos.len() > own {
        return Err(format!("{shown}() takes {own} positional arguments but {} were given", pos.len()));
    }
    if let Some((k, _)) = kw.iter().find(|(k, _)| captured.iter().any(|(c, _)| c == k)) {
        return Err(format!("{shown}() got an unexpected keyword argument '{k}'"));
    }
    kw.extend(captured.iter().cloned());
    Ok(kw)
}

/// `text.NAME(*pos)` (see `pystr`).
fn str_method(text: &str, name: &str, pos: &[Value], span: Span) -> Result<Value, Diagnostic> {
    super::pystr::call(text, name, pos.iter().map(super::pystr::value_arg).collect())
        .map_err(|m| Diagnostic::new(m).at(span))
}

/// `copy.deepcopy(v)`: a tensor is copied to new memory; lists and dicts are new containers of copies; numbers,
/// strings and the like are themselves (immutable). A container holding tensors that share memory is refused (see
/// `compat::DEEPCOPY_CONTAINER`); its other tensors are each copied (an EMA model's copy of a dict of weights).
fn deepcopy(v: &Value) -> Result<Value, String> {
    fn inner(v: &Value) -> Result<Value, String> {
        let items = |xs: &[Value]| xs.iter().map(inner).collect::<Result<Vec<_>, _>>();
        Ok(match v {
            Value::Tensor(t) => Value::Tensor(t.contiguous_copy()),
            Value::List(xs) => Value::List(std::rc::Rc::new(std::cell::RefCell::new(items(&xs.borrow())?))),
            Value::Tuple(xs) => Value::Tuple(std::rc::Rc::new(items(xs)?)),
            Value::Named(xs, names) => Value::Named(std::rc::Rc::new(items(xs)?), names),
            Value::Dict(d) => {
                let copied =
                    d.borrow().iter().map(|(k, x)| Ok((k.clone(), inner(x)?))).collect::<Result<_, String>>()?;
                Value::Dict(std::rc::Rc::new(std::cell::RefCell::new(copied)))
            }
            other => other.clone(),
        })
    }
    let shares = |a: &Value, b: &Value| matches!((a, b), (Value::Tensor(a), Value::Tensor(b)) if a.same_storage(b));
    if super::pyvalue::tensors_share(v, shares) {
        return Err(super::compat::DEEPCOPY_CONTAINER.into());
    }
    inner(v)
}
