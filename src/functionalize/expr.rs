//! Expressions: Python values, arithmetic on static and run-time numbers, elementwise tensor ops with PyTorch's
//! promotion, conditions, and subscripts of tensors and sequences.

use std::rc::Rc;

use super::state::{diag, needs_static, Affine, Stop, Sym, TId, TIdKey, TRef, FR, FV};
use super::{Env, Fz};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::*;
use crate::interp::pyvalue;
use crate::interp::value::Value;
use crate::ir::{Node, OpName};
use crate::tensor::ops::{self, Binary, Operand};
use crate::tensor::{DType, Scalar, Tensor};

/// A condition: known now, or a 0-dim bool tensor term.
pub(super) enum Cond {
    Static(bool),
    Dyn(TId),
}

pub(super) fn binop_name(op: Binary) -> OpName {
    OpName::of_binary(op)
}

fn static_scalar(v: &FV) -> Option<Scalar> {
    match v {
        FV::Bool(b) => Some(Scalar::B(*b)),
        FV::Int(i) => Some(Scalar::I(*i)),
        FV::Float(f) => Some(Scalar::F(*f)),
        _ => None,
    }
}

fn from_value(v: Value) -> FV {
    match v {
        Value::Bool(b) => FV::Bool(b),
        Value::Int(i) => FV::Int(i),
        Value::Float(f) => FV::Float(f),
        _ => FV::None,
    }
}

impl<'m> Fz<'m> {
    pub(super) fn lookup(&self, env: &Env, name: &str, span: Span) -> FR<FV> {
        if let Some(v) = env.get(name) {
            if let FV::Poisoned(why, at) = v {
                let e = Stop::NeedsStatic(span, format!("`{name}` {why}"));
                if let Some(at) = at {
                    self.blame(&e, *at);
                }
                return Err(e);
            }
            return Ok(v.clone());
        }
        if let Some(v) = self.consts.get(name) {
            if let FV::Poisoned(why, _) = v {
                return needs_static(span, format!("`{name}` {why}"));
            }
            return Ok(v.clone());
        }
        if let Some(d) = self.failed_consts.get(name) {
            return diag(span, format!("`{name}` cannot be used: {d}"));
        }
        if self.module.function(name).is_some() {
            return Ok(FV::Func(Rc::from(name)));
        }
        match pyvalue::builtin_name(name) {
            Some(m) => Ok(FV::Module(m)),
            None => diag(span, format!("name `{name}` is not defined")),
        }
    }

    /// An expression's value: a Python value known now, or a term. The walk is the reference interpreter's
    /// (`crate::interp::pyvalue::eval`, shared); this engine's own are the expressions whose meaning depends on
    /// whether a condition is known now ([`Fz::expr_other`]), and its values known only at run time.
    pub(super) fn expr(&mut self, env: &mut Env, e: &'m Expr) -> FR<FV> {
        pyvalue::eval(self, env, e)
    }

    /// Comparisons, `and`/`or`, conditional expressions, comprehensions and slices: a condition may be run-time.
    fn expr_other(&mut self, env: &mut Env, e: &'m Expr) -> FR<FV> {
        let span = e.span;
        Ok(match &e.kind {
            ExprKind::Compare(first, rest) => {
                let mut left = self.expr(env, first)?;
                let mut acc: Option<FV> = None;
                for (op, rhs) in rest {
                    let right = self.expr(env, rhs)?;
                    let r = self.compare(&left, *op, &right, span)?;
                    acc = Some(match acc {
                        None => r,
                        Some(prev) => self.logical(&prev, &r, true, span)?,
                    });
                    left = right;
                }
                acc.unwrap_or(FV::Bool(true))
            }
            ExprKind::BoolOp(is_and, vals) => {
                let mut acc = self.expr(env, &vals[0])?;
                for v in &vals[1..] {
                    match self.cond(&acc, v.span)? {
                        Cond::Static(t) => {
                            if (*is_and && !t) || (!*is_and && t) {
                                return Ok(acc);
                            }
                            acc = self.expr(env, v)?;
                        }
                        Cond::Dyn(_) => {
                            let next = self.expr(env, v)?;
                            acc = self.logical(&acc, &next, *is_and, span)?;
                        }
                    }
                }
                acc
            }
            ExprKind::IfExp { test, body, orelse } => {
                let c = self.expr(env, test)?;
                match self.cond(&c, test.span)? {
                    Cond::Static(true) => self.expr(env, body)?,
                    Cond::Static(false) => self.expr(env, orelse)?,
                    // In a loop, the test may be known once the loop is unrolled (`w0 if l == 0 else w1`).
                    Cond::Dyn(_) if self.t.depth() > 0 => {
                        return needs_static(span, "a conditional expression on a value known only at run time")
                    }
                    Cond::Dyn(_) => {
                        return diag(
                            span,
                            "a conditional expression on a run-time value is not supported here (in a loop, or inside another expression); write it as an `if` statement, or use torch.where",
                        )
                    }
                }
            }
            ExprKind::ListComp { elt, target, iter, conds } => {
                let it = self.expr(env, iter)?;
                // The target is the comprehension's own (Python 3): the enclosing names are restored after it.
                let mut names = Vec::new();
                crate::frontend::ast::target_names(target, &mut names);
                let saved: Vec<(String, Option<FV>)> = names.into_iter().map(|n| (n.clone(), env.remove(&n))).collect();
                let mut out = Vec::new();
                'items: for item in self.iterate(&it, iter.span)? {
                    self.assign(env, target, item)?;
                    for c in conds {
                        let cv = self.expr(env, c)?;
                        match self.cond(&cv, c.span)? {
                            Cond::Static(true) => {}
                            Cond::Static(false) => continue 'items,
                            Cond::Dyn(_) => {
                                return diag(c.span, "a comprehension filter on a run-time value is not supported")
                            }
                        }
                    }
                    out.push(self.expr(env, elt)?);
                }
                for (n, v) in saved {
                    match v {
                        Some(v) => env.insert(n, v),
                        None => env.remove(&n),
                    };
                }
                FV::List(Rc::new(std::cell::RefCell::new(out)))
            }
            ExprKind::Slice(a, b, c) => {
                let mut bound = |x: &'m Option<Box<Expr>>, this: &mut Self| -> FR<Option<Affine>> {
                    match x {
                        None => Ok(None),
                        Some(x) => match this.expr(env, x)? {
                            FV::None => Ok(None),
                            FV::Int(i) => Ok(Some(Affine::constant(i))),
                            FV::Bool(b) => Ok(Some(Affine::constant(b as i64))),
                            FV::DynInt(a) => Ok(Some(a)),
                            FV::Tensor(t) => Ok(Some(this.tensor_to_int(&t, x.span)?)),
                            other => diag(x.span, format!("slice indices must be integers, not {}", other.type_name())),
                        },
                    }
                };
                let a = bound(a, self)?;
                let b = bound(b, self)?;
                let c = match bound(c, self)? {
                    None => None,
                    Some(s) => match s.as_const() {
                        Some(k) => Some(k),
                        None => return needs_static(span, "a slice step that depends on a loop variable"),
                    },
                };
                FV::Slice(a, b, c)
            }
            _ => unreachable!("pyvalue::eval walks the other expressions"),
        })
    }

    /// A one-element integer tensor used as a Python int (`__index__`): its `.item()`.
    pub(super) fn tensor_to_int(&mut self, t: &TRef, span: Span) -> FR<Affine> {
        let dt = self.roots[t.root].dtype;
        if dt.is_float() || t.shape.iter().product::<usize>() != 1 {
            return diag(span, "only integer tensors of a single element can be converted to an index");
        }
        let v = self.read(t, span)?;
        let v = self.reshape_value(v, &[], span)?;
        match self.run_time_int(v, span)? {
            FV::Int(i) => Ok(Affine::constant(i)),
            FV::DynInt(a) => Ok(a),
            other => diag(span, format!("an index made {}", other.type_name())),
        }
    }

    /// The truth of a value, as `if` and `while` ask it.
    pub(super) fn cond(&mut self, v: &FV, span: Span) -> FR<Cond> {
        Ok(match v {
            FV::None => Cond::Static(false),
            FV::Bool(b) => Cond::Static(*b),
            FV::Int(i) => Cond::Static(*i != 0),
            FV::Float(f) => Cond::Static(*f != 0.0),
            FV::Str(s) => Cond::Static(!s.is_empty()),
            FV::Tuple(items) | FV::Named(items, _) => Cond::Static(!items.is_empty()),
            FV::List(items) => Cond::Static(!items.borrow().is_empty()),
            FV::Dict(items) => Cond::Static(!items.borrow().is_empty()),
            FV::DynBool(t) => Cond::Dyn(*t),
            v @ FV::Masked(_) => return super::state::masked_use(v),
            FV::Complex(_) => {
                return diag(span, crate::interp::complex::refusal("the truth value of a complex tensor"))
            }
            FV::DynInt(_) | FV::DynFloat(_) => {
                let (t, _) = self.scalar_tensor(v, None, span)?;
                let z = self.scalar_tensor(&FV::Int(0), None, span)?;
                Cond::Dyn(
                    self.elementwise(Binary::Ne, &[FV::DynFloat(t), FV::DynFloat(z.0)], span)
                        .and_then(|r| self.dyn_bool_of(&r, span))?,
                )
            }
            FV::Tensor(t) => {
                let n: usize = t.shape.iter().product();
                if n == 0 {
                    return diag(span, "Boolean value of Tensor with no values is ambiguous");
                }
                if n > 1 {
                    return diag(span, "Boolean value of Tensor with more than one value is ambiguous");
                }
                let v = self.read(t, span)?;
                let v = self.cast(v, DType::Bool, span)?;
                let v = self.reshape_value(v, &[], span)?;
                Cond::Dyn(v)
            }
            _ => Cond::Static(true),
        })
    }

    /// The 0-dim bool term of a one-element tensor or run-time bool.
    pub(super) fn dyn_bool_of(&mut self, v: &FV, span: Span) -> FR<TId> {
        match self.cond(v, span)? {
            Cond::Dyn(t) => Ok(t),
            Cond::Static(b) => Ok(self.scalar_tensor(&FV::Bool(b), None, span)?.0),
        }
    }

    pub(super) fn reshape_value(&mut self, v: TId, shape: &[usize], span: Span) -> FR<TId> {
        let (_, s) = self.tensor_ty(v, span)?;
        if s == shape {
            return Ok(v);
        }
        let x = self.t.at(v);
        let l = self.t.b.ints(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        self.t.op(OpName::Reshape, vec![x, l]).map_err(Self::tyerr(span))
    }

    /// `a and b` / `a or b` where at least one side is known only at run time: both must be bools.
    fn logical(&mut self, a: &FV, b: &FV, is_and: bool, span: Span) -> FR<FV> {
        if let (Some(x), Some(y)) = (static_scalar(a), static_scalar(b)) {
            let r = if is_and { x.to_bool() && y.to_bool() } else { x.to_bool() || y.to_bool() };
            return Ok(FV::Bool(r));
        }
        let ta = self.dyn_bool_of(a, span)?;
        let tb = self.dyn_bool_of(b, span)?;
        let r = self.elementwise(
            if is_and { Binary::BitAnd } else { Binary::BitOr },
            &[FV::DynBool(ta), FV::DynBool(tb)],
            span,
        )?;
        Ok(FV::DynBool(self.dyn_bool_of(&r, span)?))
    }

    /// An elementwise op with PyTorch's promotion over tensors and Python numbers; the result is a fresh root.
    /// With only run-time Python numbers as operands, the result is a run-time Python number.
    pub(super) fn elementwise(&mut self, op: Binary, args: &[FV], span: Span) -> FR<FV> {
        if args.iter().any(|a| matches!(a, FV::Masked(_))) {
            return self.masked_elementwise(op, args, span);
        }
        let mut operands = Vec::new();
        let mut any_tensor = false;
        for a in args {
            operands.push(match a {
                FV::Tensor(t) => {
                    any_tensor = true;
                    let d = self.roots[t.root].dtype;
                    Operand::T(Tensor::zeros(d, &vec![1; t.shape.len()])?)
                }
                FV::Bool(_) | FV::DynBool(_) => Operand::S(Scalar::B(false)),
                FV::Int(_) | FV::DynInt(_) => Operand::S(Scalar::I(0)),
                FV::Float(_) | FV::DynFloat(_) => Operand::S(Scalar::F(0.0)),
                v @ FV::Masked(_) => return super::state::masked_use(v),
                other => return diag(span, format!("unsupported operand type {}", other.type_name())),
            });
        }
        let refs: Vec<&Operand> = operands.iter().collect();
        let (compute, out) = if !any_tensor {
            // Python numbers compute as Python does: floats in f64, ints in i64.
            let kind =
                operands.iter().map(|o| if let Operand::S(s) = o { s.kind() } else { crate::tensor::Kind::Bool }).max();
            let d = match kind {
                Some(crate::tensor::Kind::Float) => DType::F64,
                Some(crate::tensor::Kind::Int) => DType::I64,
                _ => DType::Bool,
            };
            let d = if op == Binary::Div { DType::F64 } else { d };
            let dummy = Operand::T(Tensor::zeros(d, &[1])?);
            ops::binary_dtypes(op, &dummy, &dummy).map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)))?
        } else if args.len() == 2 {
            ops::binary_dtypes(op, refs[0], refs[1])
                .map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)))?
        } else {
            let d = ops::result_type(&refs);
            (d, d)
        };
        let as_number = self.check_number_or_tensor(op, args, &operands, out, span)?;
        let mut terms = Vec::new();
        for a in args {
            let t = match a {
                FV::Tensor(tr) => {
                    let v = self.read(tr, span)?;
                    self.cast(v, compute, span)?
                }
                other => {
                    // A Python number is cast to the compute dtype first, as PyTorch does.
                    match static_scalar(other) {
                        Some(s) => self.full(&[], compute, s).map_err(Self::tyerr(span))?,
                        None => self.scalar_tensor(other, Some(compute), span)?.0,
                    }
                }
            };
            terms.push(self.t.at(t));
        }
        let r = self.t.op(binop_name(op), terms).map_err(Self::tyerr(span))?;
        if !any_tensor {
            // Run-time Python numbers stay Python numbers.
            return Ok(match out {
                DType::Bool => FV::DynBool(r),
                d if d.is_float() => FV::DynFloat(self.cast(r, DType::F64, span)?),
                _ => {
                    let x = self.t.at(r);
                    let e = self.t.op(OpName::ToInt, vec![x]).map_err(Self::tyerr(span))?;
                    FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(e))))
                }
            });
        }
        let layout = self.layout_operand(args, span)?;
        let r = self.fresh(r, layout.as_ref(), span)?;
        self.roots[r.root].number = as_number;
        Ok(FV::Tensor(r))
    }

    /// The operand whose layout an elementwise result keeps: the first tensor of the full shape that is not broadcast.
    pub(super) fn layout_operand(&mut self, args: &[FV], span: Span) -> FR<Option<TRef>> {
        let mut shape: Vec<usize> = Vec::new();
        for a in args {
            if let FV::Tensor(t) = a {
                shape = ops::broadcast_shapes(&shape, &t.shape)
                    .map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)))?;
            }
        }
        Ok(args.iter().find_map(|a| match a {
            FV::Tensor(t) if t.shape == shape && !t.shape.iter().zip(&t.strides).any(|(&n, &s)| n > 1 && s == 0) => {
                Some(t.clone())
            }
            _ => None,
        }))
    }

    pub(super) fn binop(&mut self, a: &FV, op: BinOp, b: &FV, span: Span) -> FR<FV> {
        if let (Some(x), Some(y)) = (static_scalar(a), static_scalar(b)) {
            return crate::interp::pyarith::py_arith(x, op, y)
                .map(from_value)
                .map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)));
        }
        if let Some(v) = pyvalue::sequence_binop(a, op, b) {
            return v.map_err(|m| Stop::Diag(Diagnostic::new(m).at(span)));
        }
        if let (FV::Str(text), BinOp::Mod) = (a, op) {
            return super::strings::percent_format(text, b, span);
        }
        if let Some(r) = self.squeezed_binop(a, op, b, span)? {
            return Ok(r);
        }
        // Affine arithmetic on run-time ints (loop variables) keeps offsets exact.
        match (a, b, op) {
            (FV::DynInt(x), FV::Int(k), BinOp::Add) | (FV::Int(k), FV::DynInt(x), BinOp::Add) => {
                return Ok(FV::DynInt(x.add(&Affine::constant(*k))))
            }
            (FV::DynInt(x), FV::DynInt(y), BinOp::Add) => return Ok(FV::DynInt(x.add(y))),
            (FV::DynInt(x), FV::Int(k), BinOp::Sub) => return Ok(FV::DynInt(x.add(&Affine::constant(-k)))),
            (FV::Int(k), FV::DynInt(x), BinOp::Sub) => return Ok(FV::DynInt(x.neg().add(&Affine::constant(*k)))),
            (FV::DynInt(x), FV::DynInt(y), BinOp::Sub) => return Ok(FV::DynInt(x.add(&y.neg()))),
            (FV::DynInt(x), FV::Int(k), BinOp::Mul) | (FV::Int(k), FV::DynInt(x), BinOp::Mul) => {
                return Ok(FV::DynInt(x.scale(*k)))
            }
            (FV::DynInt(_) | FV::Int(_), FV::DynInt(_) | FV::Int(_), BinOp::Mul | BinOp::FloorDiv | BinOp::Mod) => {
                let (x, y) = (self.int_term(a), self.int_term(b));
                let name = match op {
                    BinOp::Mul => OpName::IMul,
                    BinOp::FloorDiv => OpName::IFloorDiv,
                    _ => OpName::IMod,
                };
                let e = self.t.op(name, vec![x, y]).map_err(Self::tyerr(span))?;
                return Ok(FV::DynInt(Affine::sym(Sym::Opaque(TIdKey::of(e)))));
            }
            // A sequence repeated a loop variable's number of times: its length differs between iterations.
            (FV::List(_) | FV::Tuple(_) | FV::Str(_), FV::DynInt(_), BinOp::Mul)
            | (FV::DynInt(_), FV::List(_) | FV::Tuple(_) | FV::Str(_), BinOp::Mul) => {
                return super::state::needs_static(span, "a sequence repeated a run-time number of times");
            }
            (FV::Tensor(_), FV::Tensor(_), BinOp::MatMul) => return self.matmul(a, b, span),
            (FV::Tensor(_), FV::Masked(_), BinOp::MatMul) => return super::state::masked_use(b),
            (FV::Masked(_), FV::Masked(_), BinOp::MatMul) => return super::state::masked_use(a),
            (FV::Masked(sel), FV::Tensor(_), BinOp::MatMul) => {
                return match self.lifted_call("matmul", sel, std::slice::from_ref(b), &[], span)? {
                    Some(r) => Ok(r),
                    None => super::state::masked_use(a),
                }
            }
            _ => {}
        }
        let Some(bin) = op.elementwise() else { return diag(span, "`@` needs two tensors") };
        if bin == Binary::Pow {
            if let (FV::Tensor(t), Some(s)) = (a, static_scalar(b)) {
                if !self.roots[t.root].dtype.is_float()
                    && s.kind() != crate::tensor::Kind::Float
                    && s.to_i64_trunc() < 0
                {
                    return diag(span, "Integers to negative integer powers are not allowed.");
                }
            }
        }
        // Python ints in true division become floats, as in Python.
        if let (FV::DynInt(_) | FV::Int(_), FV::DynInt(_) | FV::Int(_), Binary::Div) = (a, b, bin) {
            let x = self.scalar_tensor(a, Some(DType::F64), span)?.0;
            let y = self.scalar_tensor(b, Some(DType::F64), span)?.0;
            return self.elementwise(bin, &[FV::DynFloat(x), FV::DynFloat(y)], span);
        }
        self.elementwise(bin, &[a.clone(), b.clone()], span)
    }

    /// The integer term of a static or run-time int.
    pub(super) fn int_term(&mut self, v: &FV) -> egg::Id {
        match v {
            FV::Int(i) => self.t.leaf(Node::Int(*i)),
            FV::Bool(b) => self.t.leaf(Node::Int(*b as i64)),
            FV::DynInt(a) => {
                let a = a.clone();
                self.affine_term(&a)
            }
            _ => self.t.leaf(Node::Int(0)),
        }
    }

    fn unop(&mut self, op: UnaryOp, v: &FV, span: Span) -> FR<FV> {
        if op == UnaryOp::Not {
            return Ok(match self.cond(v, span)? {
                Cond::Static(b) => FV::Bool(!b),
                Cond::Dyn(t) => {
                    let x = self.t.at(t);
                    FV::DynBool(self.t.op(OpName::LogicalNot, vec![x]).map_err(Self::tyerr(span))?)
                }
            });
        }
        match (v, op) {
            (FV::Int(i), UnaryOp::Neg) => match i.checked_neg() {
                Some(v) => Ok(FV::Int(v)),
                None => diag(span, crate::interp::pyarith::int_range_error(-(*i as i128))),
            },
            (FV::Float(f), UnaryOp::Neg) => Ok(FV::Float(-f)),
            (FV::Int(i), UnaryOp::Invert) => Ok(FV::Int(!i)),
            (FV::DynInt(a), UnaryOp::Neg) => Ok(FV::DynInt(a.neg())),
            (FV::Tensor(_) | FV::Int(_) | FV::Float(_) | FV::DynInt(_) | FV::DynFloat(_), UnaryOp::Pos) => {
                Ok(v.clone())
            }
            (FV::Tensor(_), UnaryOp::Neg) => self.unary(crate::tensor::ops::Unary::Neg, v, span),
            (FV::Masked(_) | FV::Squeezed(_), UnaryOp::Pos) => Ok(v.clone()),
            (FV::Squeezed(sel), UnaryOp::Neg | UnaryOp::Invert) => {
                let name = if op == UnaryOp::Neg { "neg" } else { "bitwise_not" };
                self.squeezed_call(name, sel, &[], &[], span)
            }
            (FV::Masked(sel), UnaryOp::Neg | UnaryOp::Invert) => {
                let name = if op == UnaryOp::Neg { "neg" } else { "bitwise_not" };
                match self.masked_call(name, sel, &[], &[], span)? {
                    Some(r) => Ok(r),
                    None => super::state::masked_use(v),
                }
            }
            (FV::Tensor(_), UnaryOp::Invert) => self.unary(crate::tensor::ops::Unary::BitNot, v, span),
            (FV::DynFloat(t), UnaryOp::Neg) => {
                let x = self.t.at(*t);
                Ok(FV::DynFloat(self.t.op(OpName::Neg, vec![x]).map_err(Self::tyerr(span))?))
            }
            _ => diag(span, format!("bad operand type for unary operator: '{}'", v.type_name())),
        }
    }

    /// `a == b` known now; `what` names the comparison in the error where it is known only at run time.
    pub(super) fn static_eq(&mut self, a: &FV, b: &FV, what: &str, span: Span) -> FR<bool> {
        match self.compare(a, CmpOp::Eq, b, span)? {
            FV::Bool(r) => Ok(r),
            _ => diag(span, format!("{what} is not supported")),
        }
    }

    pub(super) fn compare(&mut self, a: &FV, op: CmpOp, b: &FV, span: Span) -> FR<FV> {
        match op {
            CmpOp::Is | CmpOp::IsNot => {
                let same_root = |x: &FV, y: &FV| matches!((x, y), (FV::Tensor(x), FV::Tensor(y)) if x == y);
                let r = pyvalue::identity(a, op, b, same_root).map_err(|m| Stop::Diag(Diagnostic::new(m).at(span)))?;
                return Ok(FV::Bool(r));
            }
            CmpOp::In | CmpOp::NotIn => {
                let b = &crate::interp::objects::membership(b).map_err(|m| Stop::Diag(Diagnostic::new(m).at(span)))?;
                let found = match b {
                    FV::Dict(d) => Self::dict_contains(&d.borrow(), a, span)?,
                    _ => pyvalue::contains(a, b, span, |x, y| self.static_eq(x, y, "`in` over run-time values", span))?,
                };
                return Ok(FV::Bool(found == (op == CmpOp::In)));
            }
            _ => {}
        }
        if matches!(a, FV::Complex(_)) || matches!(b, FV::Complex(_)) {
            return diag(span, crate::interp::complex::refusal("comparing complex tensors"));
        }
        if let Some(r) = self.squeezed_compare(a, op, b, span)? {
            return Ok(r);
        }
        if let (Some(x), Some(y)) = (static_scalar(a), static_scalar(b)) {
            return Ok(FV::Bool(crate::interp::pyarith::py_compare(x, op, y)));
        }
        // Values compared by kind (strings, dtypes, devices, None), then tuples and lists item by item.
        if matches!(op, CmpOp::Eq | CmpOp::Ne) {
            let (x, y) = (crate::interp::objects::tuple_items(a), crate::interp::objects::tuple_items(b));
            if x.is_some() || y.is_some() {
                return self.compare(x.as_ref().unwrap_or(a), op, y.as_ref().unwrap_or(b), span);
            }
            // None equals only None: Python's `==` falls back to identity, and so does a tensor's (`t == None` is
            // False, as the reference interpreter has it).
            if let (FV::Closure(f, x), FV::Closure(g, y)) = (a, b) {
                if let Some(same) = crate::interp::objects::bound_eq(self, (f, x), (g, y), span)? {
                    return Ok(FV::Bool(same == (op == CmpOp::Eq)));
                }
            }
            let none = |x: &FV, y: &FV| matches!(x, FV::None) && !matches!(y, FV::Masked(_));
            let eq = match pyvalue::kind_eq(a, b) {
                Some(eq) => Some(eq),
                None if none(a, b) || none(b, a) => Some(false),
                None if matches!((a, b), (FV::Dict(_), FV::Dict(_))) => Some(self.dicts_eq(a, b, span)?),
                None => pyvalue::sequences_eq(a, b, |p, q| {
                    self.static_eq(p, q, "comparing sequences of run-time values", span)
                })
                .transpose()?,
            };
            if let Some(eq) = eq {
                return Ok(FV::Bool(eq == (op == CmpOp::Eq)));
            }
        }
        // Strings, tuples and lists known now order as Python orders them.
        if matches!(a, FV::Str(_) | FV::Tuple(_) | FV::List(_)) || matches!(b, FV::Str(_) | FV::Tuple(_) | FV::List(_))
        {
            let (Some(x), Some(y)) = (super::python::fv_static(a), super::python::fv_static(b)) else {
                return needs_static(span, "an ordering of sequences of values known only when the program runs");
            };
            let r = crate::interp::pyarith::py_ordered(&x, op, &y);
            return r.map(FV::Bool).map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)));
        }
        let bin = op.elementwise().expect("`is` and `in` are decided above");
        self.elementwise(bin, &[a.clone(), b.clone()], span)
    }

    /// Items a `for` loop visits when it is unrolled.
    /// `x.tolist()`: nested lists of its elements, each a number known when the program runs (`.item()` of it).
    pub(super) fn tolist(&mut self, x: &TRef, span: Span) -> FR<FV> {
        if x.shape.iter().product::<usize>() > 4096 {
            return diag(span, "tolist() of more than 4096 elements is not supported (each is a number of its own)");
        }
        if x.shape.is_empty() {
            return self.item(x, span);
        }
        let mut items = Vec::new();
        for row in self.iterate(&FV::Tensor(x.clone()), span)? {
            let FV::Tensor(r) = row else { unreachable!("rows of a tensor are tensors") };
            items.push(self.tolist(&r, span)?);
        }
        Ok(FV::List(Rc::new(std::cell::RefCell::new(items))))
    }

    pub(super) fn iterate(&mut self, v: &FV, span: Span) -> FR<Vec<FV>> {
        if let Some(items) = crate::interp::objects::items_of(v) {
            return self.iterate(&items, span);
        }
        match v {
            FV::Range(a, b, s) => {
                let mut out = Vec::new();
                let mut i = *a;
                while (*s > 0 && i < *b) || (*s < 0 && i > *b) {
                    out.push(FV::Int(i));
                    i += s;
                }
                Ok(out)
            }
            FV::Tensor(t) => {
                if t.shape.is_empty() {
                    return diag(span, "iteration over a 0-d tensor");
                }
                let n = t.shape[0];
                (0..n)
                    .map(|i| {
                        self.tview(t, |d| d.select(0, i as i64))
                            .map(FV::Tensor)
                            .map_err(|m| Stop::Diag(crate::diag::Diagnostic::new(m).at(span)))
                    })
                    .collect()
            }
            FV::Dict(d) => Ok(d.borrow().iter().map(|(k, _)| k.clone()).collect()),
            FV::Squeezed(sel) => super::squeezed::squeezed_use(sel),
            other => other.items().ok_or_else(|| {
                Stop::Diag(
                    crate::diag::Diagnostic::new(format!("'{}' object is not iterable", other.type_name())).at(span),
                )
            }),
        }
    }

    pub(super) fn getitem(&mut self, obj: &FV, idx: &FV, span: Span) -> FR<FV> {
        match obj {
            v @ FV::Masked(sel) => match self.masked_getitem(sel, idx, span)? {
                Some(r) => Ok(r),
                None => super::state::masked_use(v),
            },
            FV::Squeezed(sel) => super::squeezed::squeezed_use(sel),
            FV::Tensor(t) => self.tensor_getitem(t, idx, span),
            FV::Dict(d) if matches!(idx, FV::DynInt(_)) => {
                let entries = d.borrow().clone();
                self.pick_entry(&entries, idx, span)
            }
            FV::Dict(d) => Self::dict_get(&d.borrow(), idx, span),
            FV::Tuple(_) | FV::List(_) | FV::Named(..) => {
                let items = obj.items().unwrap_or_default();
                let n = items.len() as i64;
                if let FV::Slice(a, b, c) = idx {
                    let Some((a, b)) = super::subscript::static_bounds(a, b) else {
                        return needs_static(span, "slicing a Python sequence with a loop variable");
                    };
                    let at = match crate::interp::value::slice_positions(n, a, b, *c) {
                        Ok(at) => at,
                        Err(m) => return diag(span, m),
                    };
                    let picked: Vec<FV> = at.into_iter().map(|i| items[i].clone()).collect();
                    return Ok(if matches!(obj, FV::List(_)) {
                        FV::List(Rc::new(std::cell::RefCell::new(picked)))
                    } else {
                        FV::Tuple(Rc::new(picked))
                    });
                }
                let i = match idx {
                    FV::Int(i) => *i,
                    FV::Bool(b) => *b as i64,
                    FV::DynInt(_) => return self.pick_item(&items, idx, span),
                    other => {
                        return diag(span, format!("sequence indices must be integers, not {}", other.type_name()))
                    }
                };
                let k = if i < 0 { i + n } else { i };
                if k < 0 || k >= n {
                    return diag(span, format!("IndexError: {} index out of range", obj.type_name()));
                }
                Ok(items[k as usize].clone())
            }
            FV::Str(s) => {
                let r = match idx {
                    FV::Int(i) => crate::interp::pystr::str_getitem(s, Some(*i), None),
                    FV::Slice(a, b, c) => {
                        let Some((a, b)) = super::subscript::static_bounds(a, b) else {
                            return needs_static(span, "slicing a string with a loop variable");
                        };
                        crate::interp::pystr::str_getitem(s, None, Some((a, b, *c)))
                    }
                    FV::DynInt(_) => return needs_static(span, "indexing a string with a loop variable"),
                    other => return diag(span, format!("string indices must be integers, not {}", other.type_name())),
                };
                Ok(FV::Str(r.map_err(super::args::err(span))?.into()))
            }
            other => diag(span, format!("'{}' object is not subscriptable", other.type_name())),
        }
    }
}

pub(super) fn value_to_fv(v: &Value) -> FV {
    match v {
        Value::None => FV::None,
        Value::Bool(b) => FV::Bool(*b),
        Value::Int(i) => FV::Int(*i),
        Value::Float(f) => FV::Float(*f),
        Value::Str(s) => FV::Str(s.clone()),
        Value::Tuple(items) => FV::Tuple(Rc::new(items.iter().map(value_to_fv).collect())),
        Value::List(items) => {
            FV::List(Rc::new(std::cell::RefCell::new(items.borrow().iter().map(value_to_fv).collect())))
        }
        Value::DType(d) => FV::DType(*d),
        Value::Device => FV::Device,
        Value::Func(f) => FV::Func(f.clone()),
        Value::Closure(f, captured) => {
            FV::Closure(f.clone(), Rc::new(captured.iter().map(|(k, v)| (k.clone(), value_to_fv(v))).collect()))
        }
        Value::Module(m) => FV::Module(m),
        Value::Ellipsis => FV::Ellipsis,
        Value::Named(items, names) => FV::Named(Rc::new(items.iter().map(value_to_fv).collect()), names),
        Value::Dict(items) => FV::Dict(Rc::new(std::cell::RefCell::new(
            items.borrow().iter().map(|(k, v)| (value_to_fv(k), value_to_fv(v))).collect(),
        ))),
        Value::Range(a, b, s) => FV::Range(*a, *b, *s),
        // Never `None` in its place: a program that tested it would silently take another path.
        Value::Tensor(_) | Value::Slice(..) | Value::Complex(_) => FV::Poisoned(
            "is a module-level tensor or slice, which the functional engines do not take as a constant",
            None,
        ),
    }
}

/// The functionalizer's side of the walk both engines share: it delegates to the methods above.
impl<'m> pyvalue::Walk<'m> for Fz<'m> {
    type V = FV;
    type Env = Env;
    type Err = Stop;

    fn eval(&mut self, env: &mut Env, e: &'m Expr) -> FR<FV> {
        Fz::expr(self, env, e)
    }
    fn lookup(&mut self, env: &mut Env, name: &str, span: Span) -> FR<FV> {
        Fz::lookup(self, env, name, span)
    }
    fn binop(&mut self, a: &FV, op: BinOp, b: &FV, span: Span) -> FR<FV> {
        self.drawn_binop(a, op, b, span)
    }
    fn unop(&mut self, op: UnaryOp, v: &FV, span: Span) -> FR<FV> {
        Fz::unop(self, op, v, span)
    }
    fn getitem(&mut self, obj: &FV, idx: &FV, span: Span) -> FR<FV> {
        Fz::getitem(self, obj, idx, span)
    }
    fn attribute(&mut self, obj: &FV, name: &str, span: Span) -> FR<FV> {
        Fz::attribute(self, obj, name, span)
    }
    fn items(&mut self, env: &mut Env, items: &'m [Expr], call: bool) -> FR<Vec<FV>> {
        self.expr_items(env, items, call)
    }
    fn dict_display(&mut self, env: &mut Env, items: &'m [(Expr, Expr)]) -> FR<FV> {
        Fz::dict_display(self, env, items)
    }
    fn fstring(&mut self, env: &mut Env, parts: &'m [FPart]) -> FR<FV> {
        Fz::fstring(self, env, parts)
    }
    fn call(&mut self, env: &mut Env, call: &'m Expr) -> FR<FV> {
        Fz::call(self, env, call)
    }
    fn eval_other(&mut self, env: &mut Env, e: &'m Expr) -> FR<FV> {
        Fz::expr_other(self, env, e)
    }
    fn iterate(&mut self, v: &FV, span: Span) -> FR<Vec<FV>> {
        Fz::iterate(self, v, span)
    }
    fn required<'a>(&self, a: &'a super::args::A, i: usize, name: &str) -> FR<&'a FV> {
        a.req(i, name)
    }
    fn call_value(&mut self, f: FV, pos: Vec<FV>, span: Span, shown: &str) -> FR<FV> {
        self.call_value(f, pos, vec![], span, shown)
    }
    fn int_or(&self, a: &super::args::A, i: usize, name: &str, default: i64) -> FR<i64> {
        a.int_or(i, name, default)
    }
    fn has_function(&self, name: &str) -> bool {
        self.module.function(name).is_some()
    }
    fn identity(&mut self, v: &FV, span: Span) -> FR<i64> {
        if matches!(v, FV::Tensor(t) if t.alt.is_some() || !t.off.terms.is_empty()) {
            return diag(span, "id() of a view chosen by run-time data or by a loop variable is not supported");
        }
        let same = |x: &FV, y: &FV| matches!((x, y), (FV::Tensor(x), FV::Tensor(y)) if x == y);
        crate::interp::pyvalue::identity_number(&mut self.ids, v, same).map_err(|m| Diagnostic::new(m).at(span).into())
    }
    fn parameter(&mut self, v: &FV, span: Span) -> FR<Option<bool>> {
        let id = crate::interp::pyvalue::Walk::identity(self, v, span)?;
        Ok(self.parameters.get(id))
    }
    fn set_requires_grad(&mut self, v: &FV, flag: bool, span: Span) -> FR<bool> {
        let id = crate::interp::pyvalue::Walk::identity(self, v, span)?;
        Ok(self.parameters.set(id, flag))
    }
}
