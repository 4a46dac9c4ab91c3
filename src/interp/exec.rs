//! Statements and expressions of the reference interpreter.

use std::collections::{HashMap, HashSet};
use std::rc::Rc;

use super::args::to_int;
use super::pyarith::{int_range_error, py_arith, py_compare};
use super::pyvalue;
use super::subscript;
use super::value::Value;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;
use crate::tensor::ops::{self, Operand, Unary};
use crate::tensor::{reduce, Tensor};

/// Python's recursion is not what these programs are about; this bounds helper calls.
const MAX_DEPTH: usize = 64;
pub use crate::limits::MAX_WHILE_ITERATIONS;

pub(super) type Flow = pyvalue::Flow<Value>;

pub struct Interp<'m> {
    pub(super) module: &'m Module,
    pub(super) globals: HashMap<String, Value>,
    /// Module constants whose value could not be computed, with why: only the functions that read them fail.
    pub(super) failed_globals: HashMap<String, Diagnostic>,
    /// Storage buffers written in place (by address); PyTorch's version counter, per root buffer.
    pub written: HashSet<usize>,
    pub(super) depth: usize,
    /// Each tensor parameter's object as the caller holds it (`squeeze_`/`unsqueeze_` on it change it).
    pub(super) params: Vec<pyvalue::ParamObject<Tensor>>,
    /// The values `id()` was asked for, in order (`pywalk::identity_number`).
    pub(super) ids: Vec<Value>,
    /// The tensors' gradients, where the file uses `.grad` (`super::grads`).
    grads: Option<Value>,
    /// The tensors `nn.Parameter` made.
    pub(super) parameters: super::grads::Parameters,
    /// The buffers a random initialization drew into (`super::drawn`).
    pub(super) drawn: super::drawn::Drawn,
}

pub(super) type Frame = HashMap<String, Value>;

pub(super) fn tensor_err(span: Span) -> impl Fn(String) -> Diagnostic {
    move |m| Diagnostic::new(m).at(span)
}

impl<'m> Interp<'m> {
    pub fn new(module: &'m Module) -> Result<Self, Diagnostic> {
        let (globals, written) = (HashMap::new(), HashSet::new());
        let failed_globals = HashMap::new();
        let grads = super::grads::table(module);
        let (params, ids) = (Vec::new(), Vec::new());
        let parameters = Default::default();
        let drawn = Default::default();
        let mut it =
            Interp { module, globals, failed_globals, written, depth: 0, params, ids, grads, parameters, drawn };
        for (name, e) in &module.constants {
            let mut frame = Frame::new();
            match it.eval(&mut frame, e) {
                Ok(v) => {
                    it.failed_globals.remove(name);
                    it.globals.insert(name.clone(), v);
                }
                // What Python raises fails the import, and so every function; what this tool does not support
                // fails the functions that read the constant.
                Err(d) if !(d.message.contains("support") || d.message.contains("cannot be used")) => return Err(d),
                Err(d) => {
                    it.globals.remove(name);
                    it.failed_globals.insert(name.clone(), d.in_file(&module.path));
                }
            }
        }
        Ok(it)
    }

    /// Why a module-level name cannot be used, at `span` where it is read: a name an unsupported module-level
    /// statement binds (`Module::unusable`), or a constant whose value could not be made (`failed_globals`).
    pub(super) fn unusable_global(&self, name: &str, span: Span) -> Option<Diagnostic> {
        let why = match self.module.unusable.iter().find(|u| u.name == name) {
            Some(bad) => &bad.error,
            None => self.failed_globals.get(name)?,
        };
        Some(Diagnostic::new(format!("`{name}` cannot be used: {why}")).at(span))
    }

    /// Why a module constant has no value (its expression failed), where it failed.
    pub fn failed_global(&self, name: &str) -> Option<&Diagnostic> {
        self.failed_globals.get(name)
    }

    /// The value of a module constant (`NAME = expr` at the top level).
    pub fn global(&self, name: &str) -> Option<Value> {
        self.globals.get(name).cloned()
    }

    pub(super) fn mark_written(&mut self, t: &Tensor) {
        self.written.insert(Rc::as_ptr(&t.buf) as usize);
    }

    /// Calls a function of the module with bound arguments.
    pub fn call_function(
        &mut self,
        f: &'m Function,
        args: Vec<Value>,
        kwargs: Vec<(String, Value)>,
        span: Span,
    ) -> Result<Value, Diagnostic> {
        if self.depth >= MAX_DEPTH {
            return err(span, format!("call depth exceeds {MAX_DEPTH} (recursion is not supported)"));
        }
        let bound = super::bind::bind_args(
            f,
            args,
            &kwargs,
            |d, frozen| self.eval(&mut frozen.into_iter().collect(), d),
            tensor_err(span),
            Value::tuple,
            |items| {
                let d = items.into_iter().map(|(k, v)| (Value::Str(k.as_str().into()), v)).collect();
                Value::Dict(Rc::new(std::cell::RefCell::new(d)))
            },
        )?;
        let mut frame: Frame = bound.into_iter().collect();
        super::grads::bind(&self.grads, &mut frame);
        self.depth += 1;
        let flow = self.exec_block(&mut frame, &f.body);
        self.depth -= 1;
        match flow? {
            Flow::Return(v) => Ok(v),
            _ => Ok(Value::None),
        }
    }

    pub(super) fn exec_block(&mut self, frame: &mut Frame, body: &'m [Stmt]) -> Result<Flow, Diagnostic> {
        for s in body {
            match self.exec(frame, s)? {
                Flow::Normal => {}
                other => return Ok(other),
            }
        }
        Ok(Flow::Normal)
    }

    fn exec(&mut self, frame: &mut Frame, s: &'m Stmt) -> Result<Flow, Diagnostic> {
        pyvalue::exec(self, frame, s)
    }

    /// The statements whose walk differs between the engines (see [`pyvalue::Exec::exec_other`]).
    fn exec_other(&mut self, frame: &mut Frame, s: &'m Stmt) -> Result<Flow, Diagnostic> {
        match &s.kind {
            StmtKind::If { test, body, orelse } => {
                if let Some(caught) = crate::frontend::ast::try_catches(test) {
                    let finally = caught.contains(&crate::frontend::ast::FINALLY_MARK);
                    let r = match self.exec_block(frame, body) {
                        Err(d) if crate::frontend::ast::error_caught(&caught, &d.message) => {
                            self.exec_block(frame, orelse)
                        }
                        r => r,
                    };
                    return r.map_err(|mut d| {
                        if finally {
                            d.message = crate::frontend::ast::escaped_finally(&d.message);
                        }
                        d
                    });
                }
                let c = self.eval(frame, test)?;
                let branch = if self.truthy(&c, test.span)? { body } else { orelse };
                return self.exec_block(frame, branch);
            }
            StmtKind::For { target, iter, body } => {
                let it = self.eval(frame, iter)?;
                // Ranges are walked lazily, so `range(10**9)` with an early `break` costs nothing up front.
                let items: Box<dyn Iterator<Item = Value>> = match it {
                    Value::Range(a, b, st) => {
                        let len = if (st > 0 && a < b) || (st < 0 && a > b) {
                            let span = (b as i128 - a as i128).unsigned_abs();
                            ((span - 1) / st.unsigned_abs() as u128 + 1) as u64
                        } else {
                            0
                        };
                        Box::new((0..len).map(move |k| Value::Int(a.wrapping_add((k as i64).wrapping_mul(st)))))
                    }
                    other => Box::new(self.iterate(&other, iter.span)?.into_iter()),
                };
                return pyvalue::for_items(self, frame, target, items, body);
            }
            StmtKind::While { test, body } => {
                let mut n = 0u64;
                loop {
                    let c = self.eval(frame, test)?;
                    if !self.truthy(&c, test.span)? {
                        break;
                    }
                    n += 1;
                    if n > MAX_WHILE_ITERATIONS {
                        return err(s.span, format!("while loop exceeded {MAX_WHILE_ITERATIONS} iterations"));
                    }
                    match self.exec_block(frame, body)? {
                        Flow::Break => break,
                        Flow::Return(v) => return Ok(Flow::Return(v)),
                        _ => {}
                    }
                }
            }
            StmtKind::Assert { test, msg } => {
                let c = self.eval(frame, test)?;
                if !self.truthy(&c, test.span)? {
                    // The message is evaluated only when the assertion fails, as Python does.
                    let m = match msg {
                        Some(m) => format!("AssertionError: {}", super::pyfmt::py_str(&self.eval(frame, m)?)),
                        None => "AssertionError".to_string(),
                    };
                    return err(s.span, m);
                }
            }
            StmtKind::Raise(exc) => return Err(self.raise(frame, exc, s.span)),
            StmtKind::Delete(targets) => pyvalue::delete_names(frame, targets)?,
            _ => unreachable!("pyvalue::exec runs the other statements"),
        }
        Ok(Flow::Normal)
    }

    /// The items a `for` loop visits: a snapshot for ranges and tuples, rows (views) for tensors.
    pub(super) fn iterate(&self, v: &Value, span: Span) -> Result<Vec<Value>, Diagnostic> {
        if let Some(items) = super::objects::items_of(v) {
            return self.iterate(&items, span);
        }
        match v {
            Value::Range(a, b, s) => {
                let mut out = Vec::new();
                let mut i = *a;
                while (*s > 0 && i < *b) || (*s < 0 && i > *b) {
                    crate::limits::check().map_err(|t| Diagnostic::from(t).at(span))?;
                    out.push(Value::Int(i));
                    match i.checked_add(*s) {
                        Some(next) => i = next,
                        None => break,
                    }
                }
                Ok(out)
            }
            Value::Tensor(t) => {
                if t.dim() == 0 {
                    return err(span, "iteration over a 0-d tensor");
                }
                Ok(t.unbind(0).map_err(tensor_err(span))?.into_iter().map(Value::Tensor).collect())
            }
            Value::Dict(d) => Ok(d.borrow().iter().map(|(k, _)| k.clone()).collect()),
            other => other
                .items()
                .ok_or_else(|| Diagnostic::new(format!("'{}' object is not iterable", other.type_name())).at(span)),
        }
    }

    pub(super) fn truthy(&self, v: &Value, span: Span) -> Result<bool, Diagnostic> {
        Ok(match v {
            Value::None => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Tensor(t) => {
                self.check_operands(&[v], span)?;
                if t.numel() == 0 {
                    return err(span, "Boolean value of Tensor with no values is ambiguous");
                }
                if t.numel() > 1 {
                    return err(span, "Boolean value of Tensor with more than one value is ambiguous");
                }
                t.item().map_err(tensor_err(span))?.to_bool()
            }
            Value::Tuple(v) | Value::Named(v, _) => !v.is_empty(),
            Value::List(v) => !v.borrow().is_empty(),
            Value::Dict(v) => !v.borrow().is_empty(),
            Value::Range(a, b, s) => (*s > 0 && a < b) || (*s < 0 && a > b),
            Value::Complex(_) => return err(span, super::complex::refusal("the truth value of a complex tensor")),
            _ => true,
        })
    }

    pub(super) fn assign(&mut self, frame: &mut Frame, target: &'m Expr, v: Value) -> Result<(), Diagnostic> {
        pyvalue::assign(self, frame, target, v)
    }

    pub(super) fn setitem(&mut self, obj: &Value, idx: &Value, v: &Value, span: Span) -> Result<(), Diagnostic> {
        match obj {
            Value::Tensor(t) => {
                self.check_drawn(&[idx, v], span)?;
                subscript::setitem(t, idx, v).map_err(tensor_err(span))?;
                self.mark_written(t);
                Ok(())
            }
            Value::List(l) => {
                let n = l.borrow().len() as i64;
                let i = to_int(idx).map_err(|e| Diagnostic::new(format!("list indices {e}")).at(span))?;
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    return err(span, "IndexError: list assignment index out of range");
                }
                l.borrow_mut()[k as usize] = v.clone();
                Ok(())
            }
            Value::Dict(d) => super::python::dict_set(d, idx, v, span),
            other => err(span, format!("'{}' object does not support item assignment", other.type_name())),
        }
    }

    /// `a op= b`: in place for tensors (`__iadd__`), a new value for Python numbers.
    fn inplace_binop(&mut self, a: Value, op: BinOp, b: Value, span: Span) -> Result<Value, Diagnostic> {
        match &a {
            Value::Tensor(t) => {
                let r = self.binop(&a, op, &b, span)?;
                let Value::Tensor(r) = r else {
                    return err(span, "in-place operator produced a non-tensor");
                };
                let inputs: Vec<&Tensor> = match &b {
                    Value::Tensor(bt) => vec![t, bt],
                    _ => vec![t],
                };
                ops::check_overlap(t, &inputs, true).map_err(tensor_err(span))?;
                ops::write_result(t, &r, true).map_err(tensor_err(span))?;
                self.mark_written(t);
                Ok(a)
            }
            Value::List(l) if op == BinOp::Add => {
                let extra = self.iterate(&b, span)?;
                l.borrow_mut().extend(extra);
                Ok(a)
            }
            Value::Dict(_) if op == BinOp::Add => match super::objects::module_sequence_items(&a) {
                Some(Value::List(l)) => {
                    let extra = self.iterate(&b, span)?;
                    l.borrow_mut().extend(extra);
                    Ok(a)
                }
                _ => self.binop(&a, op, &b, span),
            },
            _ => self.binop(&a, op, &b, span),
        }
    }

    pub(super) fn lookup(&self, frame: &Frame, name: &str, span: Span) -> Result<Value, Diagnostic> {
        if let Some(v) = frame.get(name) {
            return Ok(v.clone());
        }
        if let Some(d) = self.unusable_global(name, span) {
            return Err(d);
        }
        if let Some(v) = self.globals.get(name) {
            return Ok(v.clone());
        }
        if self.module.function(name).is_some() {
            return Ok(Value::Func(Rc::from(name)));
        }
        match super::pyvalue::builtin_name(name) {
            Some(m) => Ok(Value::Module(m)),
            None => err(span, format!("name `{name}` is not defined")),
        }
    }

    /// An expression's value: the walk both engines share (`pyvalue::eval`); the functionalizer's `Fz::expr` builds
    /// terms where this computes values.
    pub(super) fn eval(&mut self, frame: &mut Frame, e: &'m Expr) -> Result<Value, Diagnostic> {
        super::pyvalue::eval(self, frame, e)
    }

    /// The expressions whose walk differs between the engines (see [`super::pyvalue::Walk::eval_other`]).
    fn eval_other(&mut self, frame: &mut Frame, e: &'m Expr) -> Result<Value, Diagnostic> {
        let span = e.span;
        Ok(match &e.kind {
            ExprKind::Compare(first, rest) => {
                let mut left = self.eval(frame, first)?;
                let mut result = Value::Bool(true);
                for (i, (op, rhs)) in rest.iter().enumerate() {
                    let right = self.eval(frame, rhs)?;
                    result = self.compare(&left, *op, &right, span)?;
                    if i + 1 < rest.len() && !self.truthy(&result, span)? {
                        return Ok(result);
                    }
                    left = right;
                }
                result
            }
            ExprKind::BoolOp(is_and, vals) => {
                let mut last = Value::None;
                for v in vals {
                    last = self.eval(frame, v)?;
                    let t = self.truthy(&last, v.span)?;
                    if (*is_and && !t) || (!*is_and && t) {
                        return Ok(last);
                    }
                }
                last
            }
            ExprKind::IfExp { test, body, orelse } => {
                let c = self.eval(frame, test)?;
                if self.truthy(&c, test.span)? {
                    self.eval(frame, body)?
                } else {
                    self.eval(frame, orelse)?
                }
            }
            ExprKind::ListComp { elt, target, iter, conds } => {
                let it = self.eval(frame, iter)?;
                // The target is the comprehension's own (Python 3): the enclosing names are restored after it.
                let mut names = Vec::new();
                crate::frontend::ast::target_names(target, &mut names);
                let saved: Vec<(String, Option<Value>)> =
                    names.into_iter().map(|n| (n.clone(), frame.remove(&n))).collect();
                let mut out = Vec::new();
                'items: for item in self.iterate(&it, iter.span)? {
                    self.assign(frame, target, item)?;
                    for c in conds {
                        let cv = self.eval(frame, c)?;
                        if !self.truthy(&cv, c.span)? {
                            continue 'items;
                        }
                    }
                    out.push(self.eval(frame, elt)?);
                }
                for (n, v) in saved {
                    match v {
                        Some(v) => frame.insert(n, v),
                        None => frame.remove(&n),
                    };
                }
                Value::list(out)
            }
            ExprKind::Slice(a, b, c) => {
                let mut bound = |x: &'m Option<Box<Expr>>, this: &mut Self| -> Result<Option<i64>, Diagnostic> {
                    match x {
                        None => Ok(None),
                        Some(x) => match this.eval(frame, x)? {
                            Value::None => Ok(None),
                            v => Ok(Some(
                                to_int(&v).map_err(|m| Diagnostic::new(format!("slice indices {m}")).at(x.span))?,
                            )),
                        },
                    }
                };
                let a = bound(a, self)?;
                let b = bound(b, self)?;
                let c = bound(c, self)?;
                Value::Slice(a, b, c)
            }
            _ => unreachable!("pyvalue::eval walks the other expressions"),
        })
    }

    pub(super) fn getitem(&mut self, obj: &Value, idx: &Value, span: Span) -> Result<Value, Diagnostic> {
        match obj {
            Value::Tensor(t) => {
                self.check_drawn(&[idx], span)?;
                let r = subscript::getitem(t, idx).map_err(tensor_err(span))?;
                // Advanced indexing copies what it selects: drawn elements stay drawn in the copy.
                if !r.same_storage(t) && self.drawn.in_value(obj) {
                    self.drawn.adopt(&Value::Tensor(r.clone()));
                }
                Ok(Value::Tensor(r))
            }
            Value::Dict(d) => Self::dict_get(&d.borrow(), idx, span),
            Value::Tuple(_) | Value::List(_) | Value::Named(..) => {
                let items = obj.items().expect("sequences have items");
                let n = items.len() as i64;
                if let Value::Slice(a, b, c) = idx {
                    let at = super::value::slice_positions(n, *a, *b, *c).map_err(|m| Diagnostic::new(m).at(span))?;
                    let picked: Vec<Value> = at.into_iter().map(|i| items[i].clone()).collect();
                    return Ok(if matches!(obj, Value::List(_)) { Value::list(picked) } else { Value::tuple(picked) });
                }
                let i = to_int(idx).map_err(|e| Diagnostic::new(format!("sequence indices {e}")).at(span))?;
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    return err(span, format!("IndexError: {} index out of range", obj.type_name()));
                }
                Ok(items[k as usize].clone())
            }
            Value::Str(s) => {
                let r = match idx {
                    Value::Slice(a, b, c) => super::pystr::str_getitem(s, None, Some((*a, *b, *c))),
                    _ => {
                        let i = to_int(idx).map_err(|e| Diagnostic::new(format!("string indices {e}")).at(span))?;
                        super::pystr::str_getitem(s, Some(i), None)
                    }
                };
                Ok(Value::Str(r.map_err(|m| Diagnostic::new(m).at(span))?.into()))
            }
            other => err(span, format!("'{}' object is not subscriptable", other.type_name())),
        }
    }

    pub(super) fn binop(&mut self, a: &Value, op: BinOp, b: &Value, span: Span) -> Result<Value, Diagnostic> {
        self.check_operands(&[a, b], span)?;
        self.binop_unchecked(a, op, b, span)
    }

    /// `binop` without the check of drawn operands (`super::drawn`).
    pub(super) fn binop_unchecked(&mut self, a: &Value, op: BinOp, b: &Value, span: Span) -> Result<Value, Diagnostic> {
        if let (Some(x), Some(y)) = (a.as_scalar(), b.as_scalar()) {
            return py_arith(x, op, y).map_err(tensor_err(span));
        }
        if let Some(v) = super::pyvalue::sequence_binop(a, op, b) {
            return v.map_err(tensor_err(span));
        }
        if let (Value::Str(text), BinOp::Mod) = (a, op) {
            return super::pyfmt::percent(text, b).map(|s| Value::Str(s.into())).map_err(tensor_err(span));
        }
        match (a, b, op) {
            (Value::Tensor(x), Value::Tensor(y), BinOp::MatMul) => {
                return Ok(Value::Tensor(reduce::matmul(x, y).map_err(tensor_err(span))?));
            }
            _ => {}
        }
        let (Some(x), Some(y)) = (operand(a), operand(b)) else {
            return err(
                span,
                format!("unsupported operand types for {}: '{}' and '{}'", op.symbol(), a.type_name(), b.type_name()),
            );
        };
        let Some(bin) = op.elementwise() else { return err(span, "`@` needs two tensors") };
        Ok(Value::Tensor(ops::binary(bin, &x, &y).map_err(tensor_err(span))?))
    }

    fn unop(&mut self, op: UnaryOp, v: &Value, span: Span) -> Result<Value, Diagnostic> {
        self.check_operands(&[v], span)?;
        if op == UnaryOp::Not {
            return Ok(Value::Bool(!self.truthy(v, span)?));
        }
        match (v, op) {
            (Value::Tensor(t), UnaryOp::Pos) => Ok(Value::Tensor(t.clone())),
            (Value::Tensor(t), _) => {
                let u = if op == UnaryOp::Neg { Unary::Neg } else { Unary::BitNot };
                Ok(Value::Tensor(ops::unary(u, t).map_err(tensor_err(span))?))
            }
            (Value::Int(i), UnaryOp::Neg) => {
                i.checked_neg().map(Value::Int).ok_or_else(|| Diagnostic::new(int_range_error(-(*i as i128))).at(span))
            }
            (Value::Int(i), UnaryOp::Invert) => Ok(Value::Int(!i)),
            (Value::Bool(b), UnaryOp::Neg) => Ok(Value::Int(-(*b as i64))),
            (Value::Float(f), UnaryOp::Neg) => Ok(Value::Float(-f)),
            (Value::Int(_) | Value::Float(_) | Value::Bool(_), UnaryOp::Pos) => Ok(v.clone()),
            _ => err(span, format!("bad operand type for unary operator: '{}'", v.type_name())),
        }
    }

    pub(super) fn compare(&mut self, a: &Value, op: CmpOp, b: &Value, span: Span) -> Result<Value, Diagnostic> {
        match op {
            CmpOp::Is | CmpOp::IsNot => {}
            CmpOp::In | CmpOp::NotIn => self.check_operands(&[a], span)?,
            _ => self.check_operands(&[a, b], span)?,
        }
        match op {
            CmpOp::Is | CmpOp::IsNot => {
                let same_view =
                    |x: &Value, y: &Value| matches!((x, y), (Value::Tensor(x), Value::Tensor(y)) if x.same_view(y));
                let r = pyvalue::identity(a, op, b, same_view).map_err(|m| Diagnostic::new(m).at(span))?;
                return Ok(Value::Bool(r));
            }
            CmpOp::In | CmpOp::NotIn => {
                let b = &super::objects::membership(b).map_err(|m| Diagnostic::new(m).at(span))?;
                let found = match b {
                    Value::Dict(d) => d.borrow().iter().any(|(k, _)| super::python::key_eq(k, a)),
                    _ => pyvalue::contains(a, b, span, |x, y| {
                        Ok::<_, Diagnostic>(matches!(self.compare(x, CmpOp::Eq, y, span)?, Value::Bool(true)))
                    })?,
                };
                return Ok(Value::Bool(found == (op == CmpOp::In)));
            }
            _ => {}
        }
        if matches!(a, Value::Complex(_)) || matches!(b, Value::Complex(_)) {
            return err(span, super::complex::refusal("comparing complex tensors"));
        }
        if let (Some(x), Some(y)) = (a.as_scalar(), b.as_scalar()) {
            return Ok(Value::Bool(py_compare(x, op, y)));
        }
        // Values compared by kind (strings, dtypes, devices, None), then tuples and lists item by item.
        if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            let (x, y) = (super::objects::tuple_items(a), super::objects::tuple_items(b));
            if x.is_some() || y.is_some() {
                return self.compare(x.as_ref().unwrap_or(a), op, y.as_ref().unwrap_or(b), span);
            }
            // Bound methods: equal where they bind one function to one object (Python's `a.f == a.f`).
            if let (Value::Closure(f, x), Value::Closure(g, y)) = (a, b) {
                if let Some(same) = super::objects::bound_eq(self, (f, x), (g, y), span)? {
                    return Ok(Value::Bool(same == (op == CmpOp::Eq)));
                }
            }
            let eq = match (pyvalue::kind_eq(a, b), a, b) {
                (Some(eq), ..) => Some(eq),
                (None, Value::Dict(x), Value::Dict(y)) => Some(self.dicts_eq(&x.borrow(), &y.borrow(), span)?),
                _ => pyvalue::sequences_eq(a, b, |p, q| self.item_eq(p, q, span)).transpose()?,
            };
            if let Some(eq) = eq {
                return Ok(Value::Bool(eq == (op == CmpOp::Eq)));
            }
        }
        let (Some(x), Some(y)) = (operand(a), operand(b)) else {
            if matches!(op, CmpOp::Eq | CmpOp::Ne) {
                return Ok(Value::Bool(op == CmpOp::Ne));
            }
            // Strings, tuples and lists order as Python orders them.
            if !matches!(a, Value::Tensor(_)) && !matches!(b, Value::Tensor(_)) {
                return super::pyarith::py_ordered(a, op, b).map(Value::Bool).map_err(|m| Diagnostic::new(m).at(span));
            }
            return err(
                span,
                format!("'<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()),
            );
        };
        let bin = op.elementwise().expect("`is` and `in` are decided above");
        Ok(Value::Tensor(ops::binary(bin, &x, &y).map_err(tensor_err(span))?))
    }

    /// Python's `p == q` of two items of containers being compared: identity first, then `==` and its truth (a
    /// tensor's only where it has one element, else PyTorch's error).
    fn item_eq(&mut self, p: &Value, q: &Value, span: Span) -> Result<bool, Diagnostic> {
        if let (Value::Tensor(x), Value::Tensor(y)) = (p, q) {
            if x.same_view(y) {
                return Ok(true);
            }
        }
        match self.compare(p, CmpOp::Eq, q, span)? {
            Value::Bool(b) => Ok(b),
            Value::Tensor(t) if t.numel() == 1 => Ok(t.to_f64_vec()[0] != 0.0),
            Value::Tensor(_) => err(span, "Boolean value of Tensor with more than one value is ambiguous"),
            _ => Ok(true),
        }
    }

    /// `x == y` of two dicts: the same keys (by Python's key equality), each with equal values.
    fn dicts_eq(&mut self, x: &[(Value, Value)], y: &[(Value, Value)], span: Span) -> Result<bool, Diagnostic> {
        if x.len() != y.len() {
            return Ok(false);
        }
        for (k, v) in x {
            let Some((_, w)) = y.iter().find(|(l, _)| super::python::key_eq(k, l)) else { return Ok(false) };
            if !self.item_eq(v, w, span)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// A value as an elementwise operand, if it is a tensor or a Python number.
pub(super) fn operand(v: &Value) -> Option<Operand> {
    match v {
        Value::Tensor(t) => Some(Operand::T(t.clone())),
        other => other.as_scalar().map(Operand::S),
    }
}

/// The reference interpreter's side of the walk both engines share: it delegates to the methods above.
impl<'m> pyvalue::Walk<'m> for Interp<'m> {
    type V = Value;
    type Env = Frame;
    type Err = Diagnostic;

    fn eval(&mut self, frame: &mut Frame, e: &'m Expr) -> Result<Value, Diagnostic> {
        Interp::eval(self, frame, e)
    }
    fn lookup(&mut self, frame: &mut Frame, name: &str, span: Span) -> Result<Value, Diagnostic> {
        Interp::lookup(self, frame, name, span)
    }
    fn binop(&mut self, a: &Value, op: BinOp, b: &Value, span: Span) -> Result<Value, Diagnostic> {
        self.drawn_binop(a, op, b, span)
    }
    fn unop(&mut self, op: UnaryOp, v: &Value, span: Span) -> Result<Value, Diagnostic> {
        Interp::unop(self, op, v, span)
    }
    fn getitem(&mut self, obj: &Value, idx: &Value, span: Span) -> Result<Value, Diagnostic> {
        Interp::getitem(self, obj, idx, span)
    }
    fn attribute(&mut self, obj: &Value, name: &str, span: Span) -> Result<Value, Diagnostic> {
        Interp::attribute(self, obj, name, span)
    }
    fn items(&mut self, frame: &mut Frame, items: &'m [Expr], call: bool) -> Result<Vec<Value>, Diagnostic> {
        self.eval_items(frame, items, call)
    }
    fn dict_display(&mut self, frame: &mut Frame, items: &'m [(Expr, Expr)]) -> Result<Value, Diagnostic> {
        self.eval_dict(frame, items)
    }
    fn fstring(&mut self, frame: &mut Frame, parts: &'m [FPart]) -> Result<Value, Diagnostic> {
        self.eval_fstring(frame, parts)
    }
    fn call(&mut self, frame: &mut Frame, call: &'m Expr) -> Result<Value, Diagnostic> {
        Interp::call(self, frame, call)
    }
    fn eval_other(&mut self, frame: &mut Frame, e: &'m Expr) -> Result<Value, Diagnostic> {
        Interp::eval_other(self, frame, e)
    }
    fn iterate(&mut self, v: &Value, span: Span) -> Result<Vec<Value>, Diagnostic> {
        Interp::iterate(self, v, span)
    }
    fn required<'a>(&self, a: &'a super::args::Args, i: usize, name: &str) -> Result<&'a Value, Diagnostic> {
        a.req(i, name).map_err(tensor_err(a.span))
    }
    fn call_value(&mut self, f: Value, pos: Vec<Value>, span: Span, _shown: &str) -> Result<Value, Diagnostic> {
        self.call_value(f, pos, vec![], span)
    }
    fn int_or(&self, a: &super::args::Args, i: usize, name: &str, default: i64) -> Result<i64, Diagnostic> {
        a.int_or(i, name, default).map_err(tensor_err(a.span))
    }
    fn has_function(&self, name: &str) -> bool {
        self.module.function(name).is_some()
    }
    fn identity(&mut self, v: &Value, span: Span) -> Result<i64, Diagnostic> {
        let same = |x: &Value, y: &Value| matches!((x, y), (Value::Tensor(x), Value::Tensor(y)) if x.same_view(y));
        pyvalue::identity_number(&mut self.ids, v, same).map_err(tensor_err(span))
    }
    fn parameter(&mut self, v: &Value, span: Span) -> Result<Option<bool>, Diagnostic> {
        let id = pyvalue::Walk::identity(self, v, span)?;
        Ok(self.parameters.get(id))
    }
    fn set_requires_grad(&mut self, v: &Value, flag: bool, span: Span) -> Result<bool, Diagnostic> {
        let id = pyvalue::Walk::identity(self, v, span)?;
        Ok(self.parameters.set(id, flag))
    }
}

/// The reference interpreter's side of the statement walk both engines share.
impl<'m> pyvalue::Exec<'m> for Interp<'m> {
    fn binding(&mut self, n: &str) {
        if self.depth == 1 {
            pyvalue::param_name_bound(&mut self.params, n);
        }
    }

    fn aug_assign(
        &mut self,
        frame: &mut Frame,
        target: &'m Expr,
        op: BinOp,
        value: &'m Expr,
        span: Span,
    ) -> Result<(), Diagnostic> {
        match &target.kind {
            ExprKind::Name(n) => {
                let cur = self.lookup(frame, n, target.span)?;
                let rhs = self.eval(frame, value)?;
                let new = self.inplace_binop(cur, op, rhs, span)?;
                frame.insert(n.clone(), new);
                Ok(())
            }
            ExprKind::Subscript(obj, idx) => {
                // Python: t = obj[idx]; t = t.__iop__(rhs); obj[idx] = t.
                let o = self.eval(frame, obj)?;
                let i = self.eval(frame, idx)?;
                let cur = self.getitem(&o, &i, target.span)?;
                let rhs = self.eval(frame, value)?;
                let new = self.inplace_binop(cur, op, rhs, span)?;
                self.setitem(&o, &i, &new, span)
            }
            // `p.data -= x`: in place on the tensor `p.data` is; setting `p.data` back to it changes nothing.
            ExprKind::Attr(_, a) if a == "data" || a == "grad" => {
                super::grads::aug_assign(self, frame, target, op, value, span)
            }
            // `self.n += 1` on an object: its attribute, as a dict entry (`super::objects`).
            ExprKind::Attr(obj, a) => {
                match pyvalue::aug_assign_attribute(self, frame, obj, a, op, value, span, target.span)? {
                    Some(()) => Ok(()),
                    None => err(target.span, "unsupported target of augmented assignment"),
                }
            }
            _ => err(target.span, "unsupported target of augmented assignment"),
        }
    }
    fn setitem(&mut self, obj: &Value, idx: &Value, v: &Value, span: Span) -> Result<(), Diagnostic> {
        Interp::setitem(self, obj, idx, v, span)
    }
    fn unpack(&mut self, v: &Value, span: Span) -> Result<Vec<Value>, Diagnostic> {
        self.iterate(v, span)
    }
    fn exec_other(&mut self, frame: &mut Frame, s: &'m Stmt) -> Result<Flow, Diagnostic> {
        Interp::exec_other(self, frame, s)
    }
    fn block(&mut self, frame: &mut Frame, body: &'m [Stmt]) -> Result<Flow, Diagnostic> {
        self.exec_block(frame, body)
    }
    fn inplace_binop(&mut self, a: Value, op: BinOp, b: Value, span: Span) -> Result<Value, Diagnostic> {
        Interp::inplace_binop(self, a, op, b, span)
    }
}
