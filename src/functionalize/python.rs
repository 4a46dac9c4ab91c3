//! Python-level features in the functionalizer, mirroring `interp/python.rs`: `*args` in calls and displays, dicts
//! with keys known before the program runs, f-strings, `raise`, and `torch.device` values (CPU semantics).

use std::rc::Rc;

use super::args::err;
use super::expr::Cond;
use super::ops::A;
use super::state::{diag, needs_static, Stop, TId, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;
use crate::interp::python::key_eq;
use crate::interp::{pyfmt, pyvalue, Value};
use crate::tensor::{DType, Scalar};
use std::cell::RefCell;

/// A value known before the program runs, as the reference interpreter's value (for keys, messages and formats).
/// Whether a value may be a dict key (see `interp::python::is_key`; a tensor by identity).
fn fv_is_key(k: &FV) -> bool {
    matches!(k, FV::Tensor(_)) || fv_static(k).is_some_and(|v| crate::interp::python::is_key(&v))
}

/// Whether two dict keys are one: tensors by identity (the same view of the same storage, as `is` compares them),
/// other keys by Python equality.
pub(super) fn fv_key_eq(a: &FV, b: &FV) -> bool {
    match (a, b) {
        (FV::Tensor(x), FV::Tensor(y)) => x == y,
        (FV::Tensor(_), _) | (_, FV::Tensor(_)) => false,
        _ => match (fv_static(a), fv_static(b)) {
            (Some(x), Some(y)) => key_eq(&x, &y),
            _ => false,
        },
    }
}

pub(super) fn fv_static(v: &FV) -> Option<Value> {
    static_of(v, &mut Vec::new())
}

/// [`fv_static`], `None` for a list or dict that holds itself (`open`: the containers being converted).
fn static_of(v: &FV, open: &mut Vec<usize>) -> Option<Value> {
    let at = match v {
        FV::List(xs) => Some(Rc::as_ptr(xs) as *const u8 as usize),
        FV::Dict(xs) => Some(Rc::as_ptr(xs) as *const u8 as usize),
        _ => None,
    };
    if let Some(at) = at {
        if open.contains(&at) {
            return None;
        }
        open.push(at);
    }
    let value = static_value(v, open);
    if at.is_some() {
        open.pop();
    }
    value
}

fn static_value(v: &FV, open: &mut Vec<usize>) -> Option<Value> {
    // Each call pops what it pushed, so the items share the path.
    let mut of = |x: &FV| static_of(x, open);
    Some(match v {
        FV::None => Value::None,
        FV::Bool(b) => Value::Bool(*b),
        FV::Int(i) => Value::Int(*i),
        FV::Float(f) => Value::Float(*f),
        FV::Str(s) => Value::Str(s.clone()),
        FV::DType(d) => Value::DType(*d),
        FV::Device => Value::Device,
        FV::Ellipsis => Value::Ellipsis,
        FV::Range(a, b, s) => Value::Range(*a, *b, *s),
        FV::Tuple(items) | FV::Named(items, _) => Value::tuple(items.iter().map(&mut of).collect::<Option<Vec<_>>>()?),
        FV::List(items) => Value::list(items.borrow().iter().map(&mut of).collect::<Option<Vec<_>>>()?),
        FV::Dict(items) => Value::Dict(Rc::new(std::cell::RefCell::new(
            items.borrow().iter().map(|(k, v)| Some((of(k)?, of(v)?))).collect::<Option<Vec<_>>>()?,
        ))),
        _ => return None,
    })
}

impl<'m> Fz<'m> {
    /// Python's `str` of a value; tensors and values known only at run time are described, not printed.
    pub(super) fn fv_str(&self, v: &FV) -> String {
        match v {
            FV::Tensor(t) => {
                format!("tensor(<{}{}>)", self.roots[t.root].dtype.annotation(), crate::tensor::fmt_shape(&t.shape))
            }
            other => match fv_static(other) {
                Some(v) => pyfmt::py_str(&v),
                None => format!("<{} known when the program runs>", other.type_name()),
            },
        }
    }

    /// The values of call arguments or display items, with `*value` spread out as Python does.
    pub(super) fn expr_items(&mut self, env: &mut Env, items: &'m [Expr], call: bool) -> FR<Vec<FV>> {
        let mut out = Vec::with_capacity(items.len());
        for it in items {
            match &it.kind {
                ExprKind::Starred(inner) => {
                    let v = self.expr(env, inner)?;
                    match pyvalue::spread(&v, call).map_err(|m| Stop::Diag(Diagnostic::new(m).at(it.span)))? {
                        pyvalue::Spread::Keys(keys) => out.extend(keys),
                        pyvalue::Spread::Iterate => out.extend(self.iterate(&v, it.span)?),
                    }
                }
                _ => out.push(self.expr(env, it)?),
            }
        }
        Ok(out)
    }

    /// `dict(**kw)` or `dict(d, **kw)` (`pyvalue::dict_call`, as the reference interpreter builds it).
    pub(super) fn dict_call(&mut self, a: &super::ops::A) -> FR<FV> {
        for (k, _) in &a.kw {
            a.get(usize::MAX, k);
        }
        let key = |k: &FV| fv_is_key(k).then_some(()).ok_or_else(|| Self::key_refusal(k));
        pyvalue::dict_call(&a.pos, &a.kw, key, fv_key_eq).map_err(|m| Stop::Diag(Diagnostic::new(m).at(a.span)))
    }

    /// Calls a function value (a closure, a program function or a torch function) with evaluated arguments.
    pub(super) fn call_value(
        &mut self,
        callee: FV,
        pos: Vec<FV>,
        kw: Vec<(String, FV)>,
        span: Span,
        shown: &str,
    ) -> FR<FV> {
        if let FV::Closure(fname, captured) = &callee {
            if let Some(f) = fname.strip_prefix(crate::interp::objects::BOUND) {
                let pos = captured.iter().map(|(_, o)| o.clone()).chain(pos).collect();
                return self.call_value(FV::Func(f.into()), pos, kw, span, shown);
            }
            if let Some(f) = fname.strip_prefix(crate::interp::compat::PARTIAL) {
                let kw = crate::interp::compat::partial_keywords(captured, kw);
                return self.call_value(FV::Func(f.into()), pos, kw, span, shown);
            }
            // A stateless `torch.nn` module: its function with the constructor's arguments.
            if fname.contains('.') {
                let kw = captured.iter().cloned().chain(kw).collect();
                return self.call_value(FV::Func(fname.clone()), pos, kw, span, shown);
            }
            let module = self.module;
            let f = module.function(fname).expect("Closure values name module functions");
            let kw = crate::interp::calls::closure_args(f, &pos, kw, captured)
                .map_err(|m| Stop::Diag(Diagnostic::new(m).at(span)))?;
            return self.inline(fname, pos, kw, span);
        }
        if let FV::Func(fname) = callee {
            if let Some(op) = fname.strip_prefix("torch.nn.init.") {
                return self.nn_init(op, &pos, &kw, span);
            }
            if let Some((m, op)) = fname.rsplit_once('.') {
                let (mut pos, mut kw) = (pos, kw);
                if m == "torch.nn.functional" {
                    if let Some(r) = self.inplace_activation(op, &mut pos, &mut kw, span) {
                        return r;
                    }
                }
                let a = super::ops::A::new(pos, kw, span, fname.to_string());
                let r = self.torch(op, &a, false)?;
                a.check_keywords(&fname)?;
                return Ok(r);
            }
            return self.inline(&fname, pos, kw, span);
        }
        // A legacy tensor type as a value, called: its constructor (as the reference engine's `call_value`).
        if let FV::Str(s) = &callee {
            if let Some(name) = crate::interp::compat::legacy_type_constructor(s) {
                return self.module_call("torch", name, pos, kw, span);
            }
        }
        diag(span, format!("{shown} is not callable"))
    }

    pub(super) fn dict_display(&mut self, env: &mut Env, items: &'m [(Expr, Expr)]) -> FR<FV> {
        let mut out: Vec<(FV, FV)> = Vec::new();
        for (k, v) in items {
            if let ExprKind::Starred(m) = &k.kind {
                let m = self.expr(env, m)?;
                crate::interp::pyvalue::spread_into(&m, &mut out, fv_key_eq, k.span)?;
                continue;
            }
            let key = self.expr(env, k)?;
            if !fv_is_key(&key) {
                return diag(k.span, Self::key_refusal(&key));
            }
            let val = self.expr(env, v)?;
            crate::interp::pyvalue::dict_put(&mut out, key, val, fv_key_eq);
        }
        Ok(FV::Dict(Rc::new(std::cell::RefCell::new(out))))
    }

    /// Why `key` cannot be a dict key here: its type, or that it is known only when the program runs.
    fn key_refusal(key: &FV) -> String {
        match key {
            FV::DynInt(_) | FV::DynFloat(_) | FV::DynBool(_) | FV::Tuple(_) if fv_static(key).is_none() => {
                format!("a dict key must be known before the program runs (this {} is not)", key.type_name())
            }
            _ => crate::interp::python::not_a_key(key.type_name()),
        }
    }

    /// The entry of `key` in a dict, if any (`key` must be known before the program runs).
    fn dict_find(d: &[(FV, FV)], key: &FV, span: Span) -> FR<Option<FV>> {
        if !matches!(key, FV::Tensor(_)) && fv_static(key).is_none() {
            return diag(span, "a dict key must be known before the program runs");
        }
        Ok(d.iter().find(|(x, _)| fv_key_eq(x, key)).map(|(_, v)| v.clone()))
    }

    /// `d[key]`.
    pub(super) fn dict_get(d: &[(FV, FV)], key: &FV, span: Span) -> FR<FV> {
        match Self::dict_find(d, key, span)? {
            Some(v) => Ok(v),
            None => diag(span, format!("KeyError: {}", fv_static(key).map(|k| pyfmt::py_repr(&k)).unwrap_or_default())),
        }
    }

    /// `key in d`.
    pub(super) fn dict_contains(d: &[(FV, FV)], key: &FV, span: Span) -> FR<bool> {
        Ok(Self::dict_find(d, key, span)?.is_some())
    }

    /// `d[key] = v`: replaces the entry of `key` or appends one (`key` must be known before the program runs).
    pub(super) fn dict_set(dict: &std::cell::RefCell<Vec<(FV, FV)>>, key: &FV, v: &FV, span: Span) -> FR<()> {
        if !fv_is_key(key) {
            return diag(span, Self::key_refusal(key));
        }
        let mut d = dict.borrow_mut();
        match d.iter_mut().find(|(x, _)| fv_key_eq(x, key)) {
            Some(slot) => slot.1 = v.clone(),
            None => d.push((key.clone(), v.clone())),
        }
        Ok(())
    }

    /// Dict methods: `get`, `keys`, `values`, `items`, `setdefault`, `pop`, `update` (from a dict).
    pub(super) fn dict_method(dict: &std::cell::RefCell<Vec<(FV, FV)>>, name: &str, pos: &[FV], span: Span) -> FR<FV> {
        let list = |items: Vec<FV>| FV::List(Rc::new(std::cell::RefCell::new(items)));
        if let ("setdefault", [k, ..]) | ("pop", [k, ..]) = (name, pos) {
            if pos.len() > 2 {
                return diag(span, format!("{name} expected at most 2 arguments, got {}", pos.len()));
            }
            let found = Self::dict_find(&dict.borrow(), k, span)?;
            return match (name, found, pos.get(1)) {
                ("setdefault", Some(v), _) => Ok(v),
                ("setdefault", None, dflt) => {
                    let v = dflt.cloned().unwrap_or(FV::None);
                    Self::dict_set(dict, k, &v, span)?;
                    Ok(v)
                }
                (_, Some(v), _) => {
                    dict.borrow_mut().retain(|(x, _)| !fv_key_eq(x, k));
                    Ok(v)
                }
                (_, None, Some(dflt)) => Ok(dflt.clone()),
                (_, None, None) => {
                    diag(span, format!("KeyError: {}", fv_static(k).map(|k| pyfmt::py_repr(&k)).unwrap_or_default()))
                }
            };
        }
        if let ("update", [FV::Dict(other)]) = (name, pos) {
            let items = other.borrow().clone();
            for (k, v) in items {
                Self::dict_set(dict, &k, &v, span)?;
            }
            return Ok(FV::None);
        }
        if let ("clear", []) = (name, pos) {
            dict.borrow_mut().clear();
            return Ok(FV::None);
        }
        if let ("add", [item]) = (name, pos) {
            crate::interp::pyset::set_add(dict, item).map_err(super::args::err(span))?;
            return Ok(FV::None);
        }
        let d = dict.borrow();
        let d = d.as_slice();
        match (name, pos) {
            ("get", [k]) | ("get", [k, _]) => {
                Ok(Self::dict_find(d, k, span)?.unwrap_or_else(|| pos.get(1).cloned().unwrap_or(FV::None)))
            }
            ("keys", []) => Ok(list(d.iter().map(|(k, _)| k.clone()).collect())),
            ("values", []) => Ok(list(d.iter().map(|(_, v)| v.clone()).collect())),
            ("items", []) => Ok(list(d.iter().map(|(k, v)| FV::Tuple(Rc::new(vec![k.clone(), v.clone()]))).collect())),
            _ => diag(span, format!("unsupported dict method `{name}` (with {} arguments)", pos.len())),
        }
    }

    /// An f-string's text (`pyvalue::fstring`); fields known only at run time are described (see [`Fz::fv_str`]).
    pub(super) fn fstring(&mut self, env: &mut Env, parts: &'m [FPart]) -> FR<FV> {
        pyvalue::fstring(self, env, parts, |fz, v, conv, spec| match fv_static(v) {
            Some(v) => pyfmt::field(&v, conv, spec),
            None => Ok(fz.fv_str(v)),
        })
    }

    /// `raise EXC`: the error functionalization stops with. Under an `if` or loop on a run-time value the program
    /// would raise only for some data, which the term cannot say: refused (an enclosing loop unrolls first, which
    /// makes a condition on its variable static).
    pub(super) fn raise(&mut self, env: &mut Env, exc: &'m Option<Expr>, span: Span) -> Stop {
        if self.dyn_depth > 0 {
            // A condition on a loop variable becomes static when the loop is unrolled; one on data never does.
            return Stop::NeedsStatic(
                span,
                "`raise` under a condition known only when the program runs is not supported by the functional \
                 and optimized engines"
                    .into(),
            );
        }
        let repr = |fz: &mut Self, v: &FV| fv_static(v).map(|v| pyfmt::py_repr(&v)).unwrap_or_else(|| fz.fv_str(v));
        pyvalue::raise(self, env, exc, span, |fz, v| fz.fv_str(v), repr)
    }

    /// `math.NAME(...)` on numbers known before the program runs.
    /// `torch._foreach_NAME(tensors, ...)`: the tensor method `NAME` on each tensor of the list, as the reference
    /// interpreter runs it (`crate::interp::foreach`); `None` for an in-place op, else the list of results.
    pub(super) fn foreach(&mut self, name: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
        let (method, calls) = crate::interp::foreach::foreach_calls(name, pos, kw).map_err(err(span))?;
        let mut out = Vec::with_capacity(calls.len());
        for (p, k) in calls {
            let a = super::ops::A::new(p, k, span, method.clone());
            let r = if method.ends_with('_') { self.inplace(&method, &a)? } else { self.torch(&method, &a, true)? };
            a.check_keywords(&format!("torch.{name}"))?;
            out.push(r);
        }
        Ok(if method.ends_with('_') { FV::None } else { FV::List(Rc::new(std::cell::RefCell::new(out))) })
    }

    /// `itertools.NAME(...)`: `product` only, as a list of tuples (`interp::compat::itertools`); `repeat` must be known
    /// before the program runs.
    pub(super) fn itertools(&mut self, name: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
        if kw.iter().any(|(k, v)| k == "repeat" && matches!(v, FV::DynInt(_))) && name == "product" {
            return needs_static(span, "itertools.product(): `repeat` must be known before the program runs");
        }
        crate::interp::compat::itertools(self, name, pos, kw, span)
    }

    /// `LIST.NAME(*pos)`: the list methods both engines have.
    pub(super) fn list_method(&mut self, l: &Rc<RefCell<Vec<FV>>>, name: &str, mut pos: Vec<FV>, span: Span) -> FR<FV> {
        match (name, pos.len()) {
            ("append", 1) => l.borrow_mut().push(pos.remove(0)),
            ("extend", 1) => {
                let items = self.iterate(&pos[0], span)?;
                l.borrow_mut().extend(items);
            }
            ("pop", 0) => {
                return l.borrow_mut().pop().ok_or_else(|| Stop::Diag(Diagnostic::new("pop from empty list").at(span)))
            }
            ("reverse", 0) => l.borrow_mut().reverse(),
            ("index", 1) => {
                let items = l.borrow().clone();
                for (k, it) in items.iter().enumerate() {
                    match (it, &pos[0]) {
                        (FV::Tensor(a), FV::Tensor(b)) if a == b => return Ok(FV::Int(k as i64)),
                        (FV::Tensor(_), _) | (_, FV::Tensor(_)) => {
                            return diag(span, crate::interp::python::LIST_INDEX_TENSORS)
                        }
                        _ => {}
                    }
                    if self.static_eq(it, &pos[0], "list.index() over run-time values", span)? {
                        return Ok(FV::Int(k as i64));
                    }
                }
                return diag(span, "ValueError: list.index(x): x not in list");
            }
            ("copy", 0) => return Ok(FV::List(Rc::new(RefCell::new(l.borrow().clone())))),
            ("clear", 0) => l.borrow_mut().clear(),
            ("pop", 1) => {
                let FV::Int(i) = pos[0] else {
                    return diag(span, "list.pop() needs an index known before the program runs");
                };
                let mut v = l.borrow_mut();
                let k = crate::interp::python::list_pop_index(i, v.len()).map_err(err(span))?;
                return Ok(v.remove(k));
            }
            ("insert", 2) => {
                let FV::Int(i) = pos[0] else {
                    return diag(span, "list.insert() needs an index known before the program runs");
                };
                let mut v = l.borrow_mut();
                let n = v.len() as i64;
                let k = if i < 0 { (i + n).max(0) } else { i.min(n) };
                v.insert(k as usize, pos[1].clone());
            }
            _ => return diag(span, format!("unsupported list method `{name}`")),
        }
        Ok(FV::None)
    }

    /// `functools.NAME(*pos, **kw)`: `partial` by keyword ([`crate::interp::compat::functools_partial`]), `reduce`.
    pub(super) fn functools(&mut self, name: &str, pos: &[FV], kw: Vec<(String, FV)>, span: Span) -> FR<FV> {
        use crate::interp::compat::{functools_partial, PARTIAL};
        if name == "reduce" {
            return crate::interp::compat::reduce(self, pos, &kw, span);
        }
        let func = match pos.first() {
            Some(FV::Func(f)) => Some((&**f, &[][..])),
            Some(FV::Closure(f, c)) if f.starts_with(PARTIAL) => Some((&**f, &c[..])),
            _ => None,
        };
        let (f, kw) = functools_partial(name, pos.len(), func, kw).map_err(err(span))?;
        Ok(FV::Closure(f.into(), Rc::new(kw)))
    }

    pub(super) fn math(&mut self, name: &str, pos: &[FV], span: Span) -> FR<FV> {
        let num = |v: Option<&FV>| match v {
            Some(FV::Int(i)) => Some(*i as f64),
            Some(FV::Float(f)) => Some(*f),
            Some(FV::Bool(b)) => Some(*b as i64 as f64),
            _ => None,
        };
        // A one-element tensor is a Python float (`__float__`) to math's functions: OpenNMT Adafactor's
        // `math.sqrt(torch.mean(x.pow(2)))`.
        let converted;
        let pos = match pos {
            [FV::Tensor(t)] if t.shape.iter().product::<usize>() == 1 => {
                converted = [match self.item(t, span)? {
                    FV::DynInt(i) => FV::DynFloat(self.scalar_tensor(&FV::DynInt(i), Some(DType::F64), span)?.0),
                    v => v,
                }];
                &converted[..]
            }
            _ => pos,
        };
        if let ([v @ (FV::DynFloat(_) | FV::DynInt(_))], "sqrt") = (pos, name) {
            return self.dyn_sqrt(v, span);
        }
        if let ([v @ (FV::DynFloat(_) | FV::DynInt(_))], "isnan" | "isinf" | "isfinite") = (pos, name) {
            return self.dyn_float_class(name, v, span);
        }
        if let Some(b) = num(pos.first()).and_then(|x| crate::interp::calls::float_class(name, x)) {
            return Ok(FV::Bool(b));
        }
        let Some(x) = num(pos.first()) else {
            return diag(span, format!("math.{name}() needs a number known before the program runs"));
        };
        if pos.len() == 2 {
            let Some(y) = num(pos.get(1)) else {
                return diag(span, format!("math.{name}() needs numbers known before the program runs"));
            };
            return crate::interp::calls::math2(name, x, y).map(FV::Float).map_err(Self::tyerr(span));
        }
        match crate::interp::calls::math1(name, x).map_err(Self::tyerr(span))? {
            Some(crate::tensor::Scalar::I(i)) => Ok(FV::Int(i)),
            Some(v) => Ok(FV::Float(v.to_f64())),
            None => diag(span, format!("unsupported function `math.{name}`")),
        }
    }

    /// `math.isnan(x)`, `math.isinf(x)`, `math.isfinite(x)` of a number known only at run time: `x != x`,
    /// `|x| == inf`, `x - x == 0` (NaN for infinities and NaN) in double, as a run-time bool.
    fn dyn_float_class(&mut self, name: &str, v: &FV, span: Span) -> FR<FV> {
        use crate::tensor::ops::Binary;
        let t = self.scalar_tensor(v, Some(DType::F64), span)?.0;
        let x = FV::DynFloat(t);
        let r = match name {
            "isnan" => self.elementwise(Binary::Ne, &[x.clone(), x], span)?,
            "isinf" => {
                let a = self.dyn_abs(t, span)?;
                self.elementwise(Binary::Eq, &[a, FV::Float(f64::INFINITY)], span)?
            }
            _ => {
                let d = self.elementwise(Binary::Sub, &[x.clone(), x], span)?;
                self.elementwise(Binary::Eq, &[d, FV::Float(0.0)], span)?
            }
        };
        Ok(FV::DynBool(self.dyn_bool_of(&r, span)?))
    }

    /// `abs(x)` of a float known only at run time (its 0-d float64 term `t`): exact, as Python's.
    pub(super) fn dyn_abs(&mut self, t: TId, span: Span) -> FR<FV> {
        let x = self.t.at(t);
        Ok(FV::DynFloat(self.t.op(crate::ir::OpName::Abs, vec![x]).map_err(Self::tyerr(span))?))
    }

    /// `math.sqrt(x)` of a number known only at run time (an optimizer's bias correction from a step counter read
    /// with `.item()`): in double, as Python computes it, raising where `x < 0` (Python's "math domain error"; NaN
    /// gives NaN).
    fn dyn_sqrt(&mut self, v: &FV, span: Span) -> FR<FV> {
        use crate::tensor::ops::Binary;
        let x = self.scalar_tensor(v, Some(DType::F64), span)?.0;
        let zero = self.scalar_tensor(&FV::Float(0.0), Some(DType::F64), span)?.0;
        let negative = self.elementwise(Binary::Lt, &[FV::DynFloat(x), FV::DynFloat(zero)], span)?;
        let negative = self.dyn_bool_of(&negative, span)?;
        let n = self.t.at(negative);
        let ok = self.t.op(crate::ir::OpName::LogicalNot, vec![n]).map_err(Self::tyerr(span))?;
        self.runtime_assert(ok, span)?;
        let x = self.t.at(x);
        Ok(FV::DynFloat(self.t.op(crate::ir::OpName::Sqrt, vec![x]).map_err(Self::tyerr(span))?))
    }

    /// Python's `all(items)` / `any(items)`: items known before the program runs decide statically (the first one
    /// that decides ends it, as in Python); the truth values of run-time items are combined as a run-time bool.
    pub(super) fn all_any(&mut self, any: bool, items: &[FV], span: Span) -> FR<FV> {
        let mut dynamic: Option<FV> = None;
        for it in items {
            match self.cond(it, span)? {
                // A deciding item decides whatever the run-time items before it are.
                super::expr::Cond::Static(b) if b == any => return Ok(FV::Bool(any)),
                super::expr::Cond::Static(_) => {}
                super::expr::Cond::Dyn(t) => {
                    let op = if any { crate::tensor::ops::Binary::BitOr } else { crate::tensor::ops::Binary::BitAnd };
                    dynamic = Some(match dynamic {
                        None => FV::DynBool(t),
                        Some(d) => self.elementwise(op, &[d, FV::DynBool(t)], span)?,
                    });
                }
            }
        }
        Ok(dynamic.unwrap_or(FV::Bool(!any)))
    }

    /// `max(...)`/`min(...)` over numbers some of which are floats known only at run time: Python's choice (the
    /// first item that no later one beats by `>`/`<`), as a run-time float (an int that wins is the same number).
    pub(super) fn dyn_minmax(&mut self, name: &str, items: &[FV], span: Span) -> FR<FV> {
        if let Some(d) = self.scalar_tensors_dtype(items) {
            return self.minmax_of_scalar_tensors(name, items, d, span);
        }
        let numeric = |v: &FV| matches!(v, FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynFloat(_));
        // An int known only at run time (a loop's index, `end = min(start + 2, n)`) is a slice bound or a shape more
        // often than a number: the loop around it is unrolled, where it is known.
        if items.iter().any(|v| matches!(v, FV::DynInt(_))) {
            let ints = items.iter().all(|v| matches!(v, FV::Int(_) | FV::DynInt(_)));
            if !ints || !self.t.frames.is_empty() {
                return super::state::needs_static(span, format!("{name}() of an int known only at run time"));
            }
            // Outside loops nothing would unroll: the int chosen when the program runs (`max(1, n)` of a count).
            let best = self.chosen(name, items, DType::I64, span)?;
            return self.run_time_int(best, span);
        }
        if items.is_empty() || !items.iter().all(numeric) || !items.iter().any(|v| matches!(v, FV::DynFloat(_))) {
            return diag(span, format!("{name}() over run-time values is not supported; use torch.maximum/minimum"));
        }
        Ok(FV::DynFloat(self.chosen(name, items, DType::F64, span)?))
    }

    /// The dtype of the 0-d tensors among `items` where `min`/`max` of them is a 0-d tensor whichever item wins:
    /// some items are 0-d tensors, all of one dtype, and the others numbers of a kind not above it (Python compares
    /// a tensor and a number in the tensor's dtype).
    fn scalar_tensors_dtype(&self, items: &[FV]) -> Option<DType> {
        let mut d = None;
        for it in items {
            if let FV::Tensor(t) = it {
                let dt = self.roots[t.root].dtype;
                if !t.shape.is_empty() || d.is_some_and(|d| d != dt) {
                    return None;
                }
                d = Some(dt);
            }
        }
        let d = d?;
        items
            .iter()
            .all(|it| match it {
                FV::Tensor(_) | FV::Bool(_) | FV::DynBool(_) => true,
                FV::Int(_) | FV::DynInt(_) => d != DType::Bool,
                FV::Float(_) | FV::DynFloat(_) => d.is_float(),
                _ => false,
            })
            .then_some(d)
    }

    /// `min(rms, 1)` of 0-d tensors and numbers (FAdam's `min(rms_grad, 1) * eps`): Python returns the item it
    /// picks, the tensor itself (a write through the result writes into it) or the number. So the result is a
    /// conditional view of the items, the numbers as fresh 0-d tensors of the tensors' dtype, marked as numbers
    /// (`numbers.rs`: arithmetic over the result must promote alike whichever item won).
    fn minmax_of_scalar_tensors(&mut self, name: &str, items: &[FV], d: DType, span: Span) -> FR<FV> {
        let gt = super::expr::binop_name(crate::tensor::ops::Binary::Gt);
        let view = |s: &mut Self, it: &FV| -> FR<TRef> {
            match it {
                FV::Tensor(t) if t.alt.is_some() => {
                    diag(span, format!("{name}() of a tensor an `if` on a run-time value chose is not supported"))
                }
                FV::Tensor(t) => Ok(t.clone()),
                other => {
                    let v = s.scalar_tensor(other, Some(d), span)?.0;
                    let t = s.fresh(v, None, span)?;
                    s.roots[t.root].number = Some(super::numbers::number_kind(other));
                    Ok(t)
                }
            }
        };
        let mut best = view(self, &items[0])?;
        for it in &items[1..] {
            let x = view(self, it)?;
            // Python keeps the current item unless the next is strictly better.
            let (xv, bv) = (self.read(&x, span)?, self.read(&best, span)?);
            let (l, r) = if name == "max" { (xv, bv) } else { (bv, xv) };
            let (l, r) = (self.t.at(l), self.t.at(r));
            let c = self.t.op(gt, vec![l, r]).map_err(Self::tyerr(span))?;
            best = TRef { alt: Some(Rc::new((c, best))), ..x };
        }
        Ok(FV::Tensor(best))
    }

    /// The term of `min`/`max` of numbers as `dtype`, chosen when the program runs (the first of equal ones).
    fn chosen(&mut self, name: &str, items: &[FV], dtype: DType, span: Span) -> FR<super::state::TId> {
        let gt = super::expr::binop_name(crate::tensor::ops::Binary::Gt);
        let mut best = self.scalar_tensor(&items[0], Some(dtype), span)?.0;
        for it in &items[1..] {
            let x = self.scalar_tensor(it, Some(dtype), span)?.0;
            let (l, r) = if name == "max" { (x, best) } else { (best, x) };
            let (l, r) = (self.t.at(l), self.t.at(r));
            let c = self.t.op(gt, vec![l, r]).map_err(Self::tyerr(span))?;
            let (c, xi, bi) = (self.t.at(c), self.t.at(x), self.t.at(best));
            best = self.t.op(crate::ir::OpName::Where, vec![c, xi, bi]).map_err(Self::tyerr(span))?;
        }
        Ok(best)
    }
}

/// The refusal of an op whose output shape depends on the data (`torch.where(condition)` with one argument,
/// `nonzero`, `masked_select`, ...), if `name` called with `npos` positional and `nkw` keyword arguments is one.
pub(super) fn data_dependent(name: &str, npos: usize, nkw: usize, is_method: bool) -> Option<String> {
    let what = match name {
        "where" if npos + usize::from(is_method) == 1 && nkw == 0 => {
            "`torch.where(condition)` with one argument returns the indices of the true elements, whose number"
        }
        "nonzero" | "argwhere" => "`nonzero` returns the indices of the nonzero elements, whose number",
        "masked_select" => "`masked_select` returns the selected elements, whose number",
        "unique" | "unique_consecutive" => "`unique` returns the distinct elements, whose number",
        _ => return None,
    };
    Some(format!(
        "{what} depends on the data (a data-dependent output shape): the functional and optimized engines cannot \
         express it (the reference engine runs it)"
    ))
}

/// Python builtins of `Fz::builtin` that take more than a few lines.
impl Fz<'_> {
    /// Python's `==` of two dicts (and of sets, which are dicts here): the same keys, with equal values.
    pub(super) fn dicts_eq(&mut self, a: &FV, b: &FV, span: Span) -> FR<bool> {
        let (FV::Dict(x), FV::Dict(y)) = (a, b) else { return Ok(false) };
        let (x, y) = (x.borrow().clone(), y.borrow().clone());
        if x.len() != y.len() {
            return Ok(false);
        }
        for (k, v) in &x {
            let Some((_, w)) = y.iter().find(|(l, _)| fv_key_eq(k, l)) else { return Ok(false) };
            if !self.static_eq(v, w, "comparing dicts of run-time values", span)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl<'m> Fz<'m> {
    /// `int(x)`, `float(x)`, `bool(x)` of a number (known now or at run time), a one-element tensor, or (`float`)
    /// a string.
    pub(super) fn number_builtin(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let v = a.req(0, "x")?.clone();
        let v = match v {
            FV::Tensor(t) => {
                if t.shape.iter().product::<usize>() != 1 {
                    return diag(span, "only one element tensors can be converted to Python scalars");
                }
                self.item(&t, span)?
            }
            other => other,
        };
        Ok(match (name, v) {
            ("int", FV::Float(f)) => FV::Int(crate::interp::pyarith::float_to_int(f).map_err(err(span))?),
            ("int", FV::Bool(b)) => FV::Int(b as i64),
            ("int", v @ (FV::Int(_) | FV::DynInt(_))) => v,
            ("int", FV::DynFloat(t)) => self.int_of_run_time_float(t, span)?,
            ("float", FV::Int(i)) => FV::Float(i as f64),
            ("float", FV::Bool(b)) => FV::Float(f64::from(u8::from(b))),
            ("float", FV::DynBool(x)) => FV::DynFloat(self.scalar_tensor(&FV::DynBool(x), Some(DType::F64), span)?.0),
            ("float", FV::Str(s)) => FV::Float(crate::interp::pyarith::parse_float(&s).map_err(err(span))?),
            ("int", FV::Str(s)) => FV::Int(crate::interp::pyarith::parse_int(&s).map_err(err(span))?),
            ("float", v @ (FV::Float(_) | FV::DynFloat(_))) => v,
            ("float", FV::DynInt(x)) => FV::DynFloat(self.scalar_tensor(&FV::DynInt(x), Some(DType::F64), span)?.0),
            ("bool", v) => match self.cond(&v, span)? {
                Cond::Static(b) => FV::Bool(b),
                Cond::Dyn(t) => FV::DynBool(t),
            },
            (_, v) => return diag(span, format!("{name}() of a {} is not supported here", v.type_name())),
        })
    }

    /// `int(f)` of a float known only when the program runs: truncated toward zero, under a check that raises
    /// where Python does (NaN, an infinity, a value outside int64; the reference gives the message).
    fn int_of_run_time_float(&mut self, t: super::state::TId, span: Span) -> FR<FV> {
        use crate::tensor::ops::Binary;
        let two63 = 9_223_372_036_854_775_808.0;
        let lo = self.elementwise(Binary::Ge, &[FV::DynFloat(t), FV::Float(-two63)], span)?;
        let hi = self.elementwise(Binary::Lt, &[FV::DynFloat(t), FV::Float(two63)], span)?;
        let ok = self.elementwise(Binary::BitAnd, &[lo, hi], span)?;
        let FV::DynBool(ok) = ok else { return diag(span, "internal: a comparison of numbers is not a boolean") };
        self.runtime_assert(ok, span)?;
        let x = self.t.at(t);
        let tr = self.t.op(crate::ir::OpName::Trunc, vec![x]).map_err(Self::tyerr(span))?;
        let i = self.cast(tr, DType::I64, span)?;
        self.run_time_int(i, span)
    }

    /// `min`/`max` of an iterable or of the arguments: chosen now where all are numbers known now, else a term.
    pub(super) fn min_max(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let items = if a.pos.len() == 1 { self.iterate(&a.pos[0], span)? } else { a.pos.clone() };
        let nums: Option<Vec<Scalar>> = items.iter().map(|v| a.number(v)).collect();
        match nums {
            Some(ns) if !ns.is_empty() => {
                let mut best = 0;
                for (i, n) in ns.iter().enumerate() {
                    let better =
                        if name == "max" { n.to_f64() > ns[best].to_f64() } else { n.to_f64() < ns[best].to_f64() };
                    if better {
                        best = i;
                    }
                }
                Ok(items[best].clone())
            }
            _ => self.dyn_minmax(name, &items, span),
        }
    }
}

/// `text.NAME(*pos)`: strings are known before the program runs, so the reference's string methods compute it.
pub(super) fn str_method(text: &str, name: &str, pos: &[FV], span: Span) -> FR<FV> {
    use crate::interp::pystr;
    let args = pos.iter().map(|v| fv_static(v).map_or(pystr::StrArg::Other(v.type_name()), |x| pystr::value_arg(&x)));
    match pystr::call(text, name, args.collect()) {
        Ok(v) => Ok(super::expr::value_to_fv(&v)),
        Err(m) => diag(span, m),
    }
}

/// `hasattr(obj, name)` (see `interp::python::hasattr`).
pub(super) fn hasattr(obj: &FV, name: &FV, span: Span) -> FR<FV> {
    use crate::interp::python::{hasattr, AttrOwner};
    let FV::Str(name) = name else { return diag(span, "hasattr(): attribute name must be string") };
    let owner = match obj {
        FV::Module(m) => AttrOwner::Module(m),
        FV::Tensor(_) => AttrOwner::Tensor,
        other => AttrOwner::Other(other.type_name()),
    };
    hasattr(owner, name).map(FV::Bool).or_else(|m| diag(span, m))
}

impl Fz<'_> {
    /// `copy.deepcopy(v)`, as the reference does it (`interp::calls::deepcopy`): a tensor is a fresh copy, lists and
    /// dicts new containers of copies, and a container holding tensors that may share memory (the same root, or a
    /// view chosen at run time) is refused.
    pub(super) fn deepcopy(&mut self, name: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
        crate::interp::compat::deepcopy_args(name, pos, kw).map_err(err(span))?;
        let shares = |a: &FV, b: &FV| match (a, b) {
            (FV::Tensor(a), FV::Tensor(b)) => a.roots().iter().any(|r| b.roots().contains(r)),
            _ => false,
        };
        if crate::interp::pyvalue::tensors_share(&pos[0], shares) {
            return diag(span, crate::interp::compat::DEEPCOPY_CONTAINER);
        }
        let copy = self.deepcopy_in(&pos[0], span)?;
        crate::interp::grads::copy_parameters(self, &pos[0], &copy, span, |w, id, f| w.parameters.add(id, f))?;
        Ok(copy)
    }

    fn deepcopy_in(&mut self, v: &FV, span: Span) -> FR<FV> {
        let items = |xs: &[FV], fz: &mut Self| xs.iter().map(|x| fz.deepcopy_in(x, span)).collect::<FR<Vec<_>>>();
        Ok(match v {
            FV::Tensor(t) => FV::Tensor(self.copy_drawn(t, span)?),
            FV::Masked(..) => return diag(span, crate::interp::compat::DEEPCOPY_CONTAINER),
            FV::List(xs) => {
                let xs = xs.borrow().clone();
                FV::List(Rc::new(RefCell::new(items(&xs, self)?)))
            }
            FV::Tuple(xs) => FV::Tuple(Rc::new(items(xs, self)?)),
            FV::Named(xs, names) => FV::Named(Rc::new(items(xs, self)?), names),
            FV::Dict(d) => {
                let entries = d.borrow().clone();
                let mut copied = Vec::new();
                for (k, x) in entries {
                    copied.push((k, self.deepcopy_in(&x, span)?));
                }
                FV::Dict(Rc::new(RefCell::new(copied)))
            }
            other => other.clone(),
        })
    }
}
