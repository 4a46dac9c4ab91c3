//! `import numpy as np` in code that uses numpy only on Python numbers known when the program is converted
//! (`np.abs(np.log(16 / 1000))`, as mmdetection writes its clamp bounds) and in a branch of
//! `isinstance(x, torch.Tensor)` that a tensor parameter never takes (yolov5's `x.clone() if isinstance(x,
//! torch.Tensor) else np.copy(x)`): the `isinstance` test of a tensor or number parameter the function never
//! rebinds is decided, the branch it does not take is dropped, and numpy calls on constants are folded to numbers.
//! A numpy function of one number known only when the program runs (a helper's parameter, as Hugging Face's DoLa
//! takes `np.log(relative_top)`) is `math`'s function of it. The values agree; what differs is outside the domain,
//! where `math` raises (`np.log(0)` is -inf, `np.sqrt(-1)` NaN), and arithmetic on the result, a Python float
//! (dividing by a zero one raises `ZeroDivisionError` where numpy's float64 gives inf); messages there name `math`.
//! `np.array` of numbers known when the program is converted, one of them a float, is numpy's float64 array, which
//! behaves as `torch.tensor(..., dtype=torch.float64)` under what programs do with it (`Fold::array`);
//! `np.array(NUMBERS).astype(np.float32)` (ints too) is that tensor in that dtype, and `torch.from_numpy` of either is
//! the tensor itself (torchdiffeq's `torch.from_numpy(np.array([2. * np.pi]))`). Any other use of numpy is refused,
//! located.

use std::collections::HashMap;

use ruff_python_ast as py;
use ruff_python_ast::visitor::{walk_expr, Visitor};

use super::{bound_names, Cx};
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// Folds `f`'s uses of the numpy module bound to `np`, or refuses the first one that is not a call of a known
/// function on constants or a known constant.
/// `isinstance` is decided only where `program_only` says `f` runs as a program alone (its parameters' annotations
/// are then checked against the arguments; a helper's are not).
/// `constructor`: a call of `torch.tensor`/`as_tensor`/`asarray` that a float folded here could reach (see
/// [`reachable_constructors`]), with the function it is in.
pub(super) fn fold(
    f: &mut Function,
    np: &str,
    program_only: bool,
    constructor: Option<&(Span, String, String)>,
) -> Result<(), Diagnostic> {
    // Defaults are evaluated where the `def` is, in the module's scope: `period=np.pi` folds whatever the body binds.
    let outer = Fold { np, kinds: Vec::new(), consts: Vec::new(), constructor, math_free: false, torch_free: false };
    for p in &mut f.params {
        if let Some(d) = &mut p.default {
            outer.expr(d)?;
        }
    }
    let mut local = Vec::new();
    bound_names(&f.body, &mut local);
    if local.iter().any(|n| n == np) || f.params.iter().any(|p| p.name == np) {
        return Ok(()); // a local named like the module: not numpy here
    }
    let mut kinds: Vec<(String, bool)> = Vec::new(); // (parameter, is a tensor) for parameters never rebound
    for p in f.params.iter().filter(|_| program_only) {
        let tensor = match &p.ann {
            Some(TypeAnn::Tensor { .. }) => true,
            Some(TypeAnn::Int | TypeAnn::Float | TypeAnn::Bool) => false,
            _ => continue,
        };
        if !local.contains(&p.name) {
            kinds.push((p.name.clone(), tensor));
        }
    }
    // Names bound once in the whole function, by a top-level `NAME = constant`: their value, and where.
    let mut consts: Vec<(String, Num, Span)> = Vec::new();
    let binds = |m: &str| local.iter().chain(f.params.iter().map(|p| &p.name)).any(|n| n == m);
    let (math_free, torch_free) = (!binds("math"), !binds("torch"));
    let mut cx = Fold { np, kinds, consts: Vec::new(), constructor, math_free, torch_free };
    for s in &f.body {
        if let StmtKind::Assign { targets, value } = &s.kind {
            if let [Expr { kind: ExprKind::Name(n), .. }] = targets.as_slice() {
                let once = local.iter().filter(|m| *m == n).count() == 1 && !f.params.iter().any(|p| p.name == *n);
                if once {
                    let mut v = value.clone();
                    cx.consts = consts.clone();
                    if cx.expr(&mut v).is_ok() {
                        if let Some(x) = cx.value(&v) {
                            consts.push((n.clone(), x, s.span));
                        }
                    }
                }
            }
        }
    }
    cx.consts = consts;
    cx.block(&mut f.body)
}

/// Folds numpy in a module-level constant's value, evaluated in the module's scope. Any function may read it, so
/// the first constructor whose dtype follows its data (`constructors`, by position) is the one it could reach.
pub(super) fn fold_constant(
    e: &mut Expr,
    np: &str,
    constructors: &HashMap<String, (Span, String, String)>,
) -> Result<(), Diagnostic> {
    let constructor = constructors.values().min_by_key(|c| (c.0.line, c.0.col, c.2.clone()));
    Fold { np, kinds: Vec::new(), consts: Vec::new(), constructor, math_free: false, torch_free: false }.expr(e)
}

#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

fn num(e: &Expr) -> Option<Num> {
    match &e.kind {
        ExprKind::Int(i) => Some(Num::Int(*i)),
        ExprKind::Float(x) => Some(Num::Float(*x)),
        ExprKind::Unary(UnaryOp::Neg, a) => match num(a)? {
            Num::Int(i) => i.checked_neg().map(Num::Int),
            Num::Float(x) => Some(Num::Float(-x)),
        },
        _ => None,
    }
}

fn as_f64(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(x) => x,
    }
}

struct Fold<'a> {
    np: &'a str,
    kinds: Vec<(String, bool)>,
    consts: Vec<(String, Num, Span)>,
    /// A call that `f`'s values may reach and that takes its dtype from a value (`torch.tensor(v)`), with the
    /// function it is in: numpy's functions give `np.float64`, of which it makes a float64 tensor, where the Python
    /// float they fold to would give float32.
    constructor: Option<&'a (Span, String, String)>,
    /// The function does not bind `math`: a numpy function of a number known only when the program runs is
    /// `math`'s function of it.
    math_free: bool,
    /// The function does not bind `torch`: a float64 array of constants is `torch.tensor` of them.
    torch_free: bool,
}

/// numpy's functions of one number that `math` has, by their `math` names.
const MATH_EQUIVALENTS: &[(&str, &str)] = &[
    ("log", "log"),
    ("log2", "log2"),
    ("log10", "log10"),
    ("exp", "exp"),
    ("sqrt", "sqrt"),
    ("sin", "sin"),
    ("cos", "cos"),
    ("tan", "tan"),
    ("arctan", "atan"),
    ("tanh", "tanh"),
    ("ceil", "ceil"),
    ("floor", "floor"),
];

/// Constructors whose dtype follows their data: a numpy float64 makes a float64 tensor there, a Python float a
/// float32 one. (`torch.full` and `torch.scalar_tensor` give float32 for either.)
const FROM_DATA: &[&str] = &["tensor", "as_tensor", "asarray"];

/// Names read and the first constructor call of [`FROM_DATA`] in one top-level `def` (nested `def`s and lambdas
/// included).
struct Scan<'c> {
    cx: &'c Cx,
    names: Vec<String>,
    constructor: Option<(Span, String)>,
}

impl<'a> Visitor<'a> for Scan<'_> {
    fn visit_expr(&mut self, e: &'a py::Expr) {
        match e {
            py::Expr::Name(n) => self.names.push(n.id.to_string()),
            py::Expr::Call(c) if self.constructor.is_none() => {
                if let py::Expr::Attribute(a) = &*c.func {
                    let torch = matches!(&*a.value, py::Expr::Name(m) if m.id.as_str() == "torch");
                    if torch && FROM_DATA.contains(&a.attr.as_str()) {
                        self.constructor = Some((self.cx.sp(e), format!("torch.{}", a.attr)));
                    }
                }
            }
            _ => {}
        }
        walk_expr(self, e);
    }
}

/// For each top-level function, a call of a constructor whose dtype follows its data (`torch.tensor`, ...) that a
/// numpy float folded in it could reach: the first one in source order among the functions connected to it by
/// naming one another (the helpers it calls, its callers, theirs, closures passed along), with the function that
/// makes it. A folded numpy float is refused where such a call exists; elsewhere it acts as the Python float it
/// folds to.
pub(super) fn reachable_constructors(cx: &Cx, body: &[py::Stmt]) -> HashMap<String, (Span, String, String)> {
    let mut defs: Vec<(String, Vec<String>, Option<(Span, String)>)> = Vec::new();
    for s in body {
        if let py::Stmt::FunctionDef(f) = s {
            let mut scan = Scan { cx, names: Vec::new(), constructor: None };
            scan.visit_stmt(s);
            defs.push((f.name.to_string(), scan.names, scan.constructor));
        }
    }
    let mut parent: Vec<usize> = (0..defs.len()).collect();
    fn root(p: &mut [usize], mut i: usize) -> usize {
        while p[i] != i {
            p[i] = p[p[i]];
            i = p[i];
        }
        i
    }
    for i in 0..defs.len() {
        for j in 0..defs.len() {
            if i != j && defs[i].1.contains(&defs[j].0) {
                let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                parent[a.max(b)] = a.min(b);
            }
        }
    }
    let mut out = HashMap::new();
    for i in 0..defs.len() {
        let r = root(&mut parent, i);
        let first = (0..defs.len()).find(|&j| root(&mut parent, j) == r && defs[j].2.is_some());
        if let Some(j) = first {
            let (at, c) = defs[j].2.clone().unwrap_or_default();
            out.insert(defs[i].0.clone(), (at, c, defs[j].0.clone()));
        }
    }
    out
}

/// Whether `e` is `isinstance(...)` or its negation.
fn is_isinstance(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Unary(UnaryOp::Not, a) => is_isinstance(a),
        ExprKind::Call { func, .. } => matches!(&func.kind, ExprKind::Name(n) if n == "isinstance"),
        _ => false,
    }
}

/// An expression that fails with `d` when it is evaluated (see [`crate::frontend::ast::REFUSED`]).
pub(super) fn refusal(d: Diagnostic, span: Span) -> Expr {
    let span = d.span.unwrap_or(span);
    let marker = Expr { kind: ExprKind::Name(REFUSED.to_string()), span };
    let msg = Expr { kind: ExprKind::Str(d.message), span };
    Expr { kind: ExprKind::Call { func: Box::new(marker), args: vec![msg], kwargs: vec![] }, span }
}

const FUNCS: &str =
    "np.abs, np.log, np.log2, np.log10, np.exp, np.sqrt, np.sin, np.cos, np.tan, np.arctan, np.tanh, np.ceil, np.floor";

impl Fold<'_> {
    fn block(&self, body: &mut Vec<Stmt>) -> Result<(), Diagnostic> {
        let mut out = Vec::with_capacity(body.len());
        for mut s in std::mem::take(body) {
            match &mut s.kind {
                StmtKind::Assign { targets, value } => {
                    targets.iter_mut().try_for_each(|t| self.expr(t))?;
                    self.expr(value)?;
                }
                StmtKind::AugAssign { target, value, .. } => {
                    self.expr(target)?;
                    self.expr(value)?;
                }
                StmtKind::Expr(e) | StmtKind::Return(Some(e)) | StmtKind::Raise(Some(e)) => self.expr(e)?,
                StmtKind::For { target, iter, body } => {
                    self.expr(target)?;
                    self.expr(iter)?;
                    self.block(body)?;
                }
                StmtKind::While { test, body } => {
                    self.expr(test)?;
                    self.block(body)?;
                }
                StmtKind::If { test, body, orelse } => {
                    self.expr(test)?;
                    if let ExprKind::Bool(b) = test.kind {
                        // Decided: only the branch taken stays (the other may use numpy on tensors).
                        let mut taken = std::mem::take(if b { body } else { orelse });
                        self.block(&mut taken)?;
                        out.extend(taken);
                        continue;
                    }
                    if is_isinstance(test) {
                        // Undecided here (a helper's parameter): an arm numpy cannot run in fails only if it runs.
                        for arm in [&mut *body, &mut *orelse] {
                            if let Err(d) = self.block(arm) {
                                let span = arm.first().map(|s| s.span).unwrap_or(s.span);
                                *arm = vec![Stmt { kind: StmtKind::Expr(refusal(d, span)), span }];
                            }
                        }
                        out.push(s);
                        continue;
                    }
                    self.block(body)?;
                    self.block(orelse)?;
                }
                StmtKind::Assert { test, msg } => {
                    self.expr(test)?;
                    if let Some(m) = msg {
                        self.expr(m)?;
                    }
                }
                StmtKind::Return(None)
                | StmtKind::Raise(None)
                | StmtKind::Delete(_)
                | StmtKind::Pass
                | StmtKind::Break
                | StmtKind::Continue => {}
            }
            out.push(s);
        }
        *body = out;
        Ok(())
    }

    fn exprs(&self, xs: &mut [Expr]) -> Result<(), Diagnostic> {
        xs.iter_mut().try_for_each(|x| self.expr(x))
    }

    /// `isinstance(P, torch.Tensor)` of a parameter never rebound is known; a decided `a if T else b` is one arm.
    /// `Ok(true)` where `e` was folded so.
    fn decided(&self, e: &mut Expr) -> Result<bool, Diagnostic> {
        if let Some(b) = self.isinstance(e) {
            e.kind = ExprKind::Bool(b);
            return Ok(true);
        }
        if let ExprKind::IfExp { test, body, orelse } = &mut e.kind {
            self.expr(test)?;
            if is_isinstance(test) {
                // Undecided here (a helper's parameter): an arm numpy cannot run in fails only if it runs.
                for arm in [body, orelse] {
                    if let Err(d) = self.expr(arm) {
                        let span = arm.span;
                        **arm = refusal(d, span);
                    }
                }
                return Ok(true);
            }
            if let ExprKind::Bool(b) = test.kind {
                let mut taken = std::mem::replace(
                    if b { body } else { orelse },
                    Box::new(Expr { kind: ExprKind::NoneLit, span: e.span }),
                );
                self.expr(&mut taken)?;
                *e = *taken;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// `np.prod(x)` of a sequence of numbers (`np.prod(p.size())`, `x` no tensor parameter), where no float64 it may
    /// give can reach a tensor constructor: the call becomes [`NUMPY_PROD`]'s.
    fn prod_of_numbers(&self, func: &mut Expr, args: &[Expr], no_keywords: bool) -> bool {
        let tensor_param =
            |a: &Expr| matches!(&a.kind, ExprKind::Name(n) if self.kinds.iter().any(|(p, t)| p == n && *t));
        let ([a], true, None) = (args, no_keywords, self.constructor) else { return false };
        if tensor_param(a) {
            return false;
        }
        *func = Expr { kind: ExprKind::Name(NUMPY_PROD.into()), span: func.span };
        true
    }

    fn expr(&self, e: &mut Expr) -> Result<(), Diagnostic> {
        if self.decided(e)? || self.array_made_tensor(e)? {
            return Ok(());
        }
        match &mut e.kind {
            ExprKind::Name(n) if n == self.np => {
                return err(e.span, format!("numpy is supported only as {FUNCS} of numbers known before the program runs, and np.pi, np.e, np.inf, np.nan"));
            }
            ExprKind::Attr(a, attr) if matches!(&a.kind, ExprKind::Name(n) if n == self.np) => {
                let v = match attr.as_str() {
                    "pi" => std::f64::consts::PI,
                    "e" => std::f64::consts::E,
                    "inf" => f64::INFINITY,
                    "nan" => f64::NAN,
                    _ => return err(e.span, format!("`{}.{attr}` is not supported: numpy is supported only as {FUNCS} of numbers known before the program runs, and np.pi, np.e, np.inf, np.nan", self.np)),
                };
                e.kind = ExprKind::Float(v);
                return Ok(());
            }
            ExprKind::Call { func, args, kwargs } if matches!(&func.kind, ExprKind::Attr(a, _) if matches!(&a.kind, ExprKind::Name(n) if n == self.np)) =>
            {
                let ExprKind::Attr(_, name) = &func.kind else { unreachable!() };
                let name = name.clone();
                self.exprs(args)?;
                if name == "array" {
                    return self.array(e, None);
                }
                let arg = match (args.as_slice(), kwargs.is_empty()) {
                    ([a], true) => self.value(a),
                    _ => None,
                };
                let math = MATH_EQUIVALENTS.iter().find(|(n, _)| *n == name).map(|(_, m)| *m);
                let tensor_param =
                    |a: &Expr| matches!(&a.kind, ExprKind::Name(n) if self.kinds.iter().any(|(p, t)| p == n && *t));
                if name == "prod" && self.prod_of_numbers(func, args, kwargs.is_empty()) {
                    return Ok(());
                }
                // `np.abs` of a number known only when the program runs: Python's `abs` of it.
                if let (None, "abs", None, [a], true) =
                    (arg, name.as_str(), self.constructor, args.as_slice(), kwargs.is_empty())
                {
                    if !tensor_param(a) {
                        **func = Expr { kind: ExprKind::Name("abs".into()), span: func.span };
                        return Ok(());
                    }
                }
                if let (None, Some(m), true, None, [a], true) =
                    (arg, math, self.math_free, self.constructor, args.as_slice(), kwargs.is_empty())
                {
                    if tensor_param(a) {
                        return err(e.span, format!("`{}.{name}(...)` of a tensor is not supported: numpy is supported only as {FUNCS} of one number", self.np));
                    }
                    // A number known only when the program runs (a helper's parameter): `math`'s function of it,
                    // which differs from numpy's only outside its domain (an error where numpy gives NaN or -inf).
                    let span = func.span;
                    **func = Expr {
                        kind: ExprKind::Attr(Box::new(Expr { kind: ExprKind::Name("math".into()), span }), m.into()),
                        span,
                    };
                    if matches!(name.as_str(), "ceil" | "floor") {
                        let x = a.clone();
                        e.kind = float_with_sign_of(Expr { kind: e.kind.clone(), span: e.span }, x, span);
                    }
                    return Ok(());
                }
                let Some(x) = arg else {
                    return err(e.span, format!("`{}.{name}(...)` is not supported: numpy is supported only as {FUNCS} of one number known before the program runs", self.np));
                };
                let f = as_f64(x);
                let v = match name.as_str() {
                    "abs" => match x {
                        Num::Int(i) => Num::Int(i.wrapping_abs()),
                        Num::Float(y) => Num::Float(y.abs()),
                    },
                    "log" => Num::Float(f.ln()),
                    "log2" => Num::Float(f.log2()),
                    "log10" => Num::Float(f.log10()),
                    "exp" => Num::Float(f.exp()),
                    "sqrt" => Num::Float(f.sqrt()),
                    "sin" => Num::Float(f.sin()),
                    "cos" => Num::Float(f.cos()),
                    "tan" => Num::Float(f.tan()),
                    "arctan" => Num::Float(f.atan()),
                    "tanh" => Num::Float(f.tanh()),
                    "ceil" => Num::Float(f.ceil()),
                    "floor" => Num::Float(f.floor()),
                    _ => return err(e.span, format!("`{}.{name}` is not supported: numpy is supported only as {FUNCS} of numbers known before the program runs", self.np)),
                };
                if let (Num::Float(_), Some((at, c, in_fn))) = (v, self.constructor) {
                    return err(e.span, format!(
                        "`{}.{name}(...)` gives a numpy float64, and `{in_fn}` calls `{c}` (line {}), which makes a float64 tensor of one where funcfuse, folding numpy to Python numbers, would make float32: not supported; use the `math` module",
                        self.np, at.line
                    ));
                }
                e.kind = match v {
                    Num::Int(i) => ExprKind::Int(i),
                    Num::Float(y) => ExprKind::Float(y),
                };
                return Ok(());
            }
            _ => {}
        }
        match &mut e.kind {
            ExprKind::Name(_)
            | ExprKind::Int(_)
            | ExprKind::Float(_)
            | ExprKind::Bool(_)
            | ExprKind::NoneLit
            | ExprKind::Ellipsis
            | ExprKind::Str(_) => Ok(()),
            ExprKind::Bin(_, a, b) | ExprKind::Subscript(a, b) => {
                self.expr(a)?;
                self.expr(b)
            }
            ExprKind::Unary(_, a) | ExprKind::Attr(a, _) | ExprKind::Starred(a) => self.expr(a),
            ExprKind::Compare(a, rest) => {
                self.expr(a)?;
                rest.iter_mut().try_for_each(|(_, x)| self.expr(x))
            }
            ExprKind::BoolOp(_, xs) | ExprKind::Tuple(xs) | ExprKind::List(xs) => self.exprs(xs),
            ExprKind::Call { func, args, kwargs } => {
                self.expr(func)?;
                self.exprs(args)?;
                kwargs.iter_mut().try_for_each(|(_, x)| self.expr(x))
            }
            ExprKind::Slice(a, b, c) => [a, b, c].into_iter().flatten().try_for_each(|x| self.expr(x)),
            ExprKind::IfExp { test, body, orelse } => {
                self.expr(test)?;
                self.expr(body)?;
                self.expr(orelse)
            }
            ExprKind::ListComp { elt, target, iter, conds } => {
                self.expr(elt)?;
                self.expr(target)?;
                self.expr(iter)?;
                self.exprs(conds)
            }
            ExprKind::Dict(items) => items.iter_mut().try_for_each(|(k, v)| {
                self.expr(k)?;
                self.expr(v)
            }),
            ExprKind::FString(parts) => parts.iter_mut().try_for_each(|p| match p {
                FPart::Field { value, .. } => self.expr(value),
                FPart::Lit(_) => Ok(()),
            }),
        }
    }

    /// `torch.from_numpy(A)` of an array folded here (a tensor already) is `A`; `np.array(NUMBERS).astype(np.DTYPE)`
    /// is `torch.tensor(NUMBERS, dtype=torch.DTYPE)`, of ints or floats. True where `e` was one of them.
    fn array_made_tensor(&self, e: &mut Expr) -> Result<bool, Diagnostic> {
        match &mut e.kind {
            ExprKind::Call { func, args, kwargs }
                if is_path(func, "torch", "from_numpy")
                    && kwargs.is_empty()
                    && args.len() == 1
                    && self.is_array(&args[0]) =>
            {
                let mut a = args.pop().expect("one argument");
                self.expr(&mut a)?;
                *e = a;
                Ok(true)
            }
            ExprKind::Call { func, args, kwargs }
                if kwargs.is_empty() && args.len() == 1 && self.astype_of_array(func, &args[0]).is_some() =>
            {
                let dtype = self.astype_of_array(func, &args[0]).expect("checked").to_string();
                let ExprKind::Attr(made, _) = &mut func.kind else { unreachable!("checked") };
                let mut made = std::mem::replace(&mut **made, Expr { kind: ExprKind::NoneLit, span: e.span });
                self.array_of(&mut made, Some(&dtype))?;
                *e = made;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether `e` is `np.array(...)`, maybe followed by `.astype(np.DTYPE)`.
    fn is_array(&self, e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Call { func, args, .. } => {
                is_path(func, self.np, "array") || (args.len() == 1 && self.astype_of_array(func, &args[0]).is_some())
            }
            _ => false,
        }
    }

    /// The torch dtype of `np.array(...).astype(np.DTYPE)` where `func` is its `np.array(...).astype` and `arg` its
    /// argument.
    fn astype_of_array(&self, func: &Expr, arg: &Expr) -> Option<&'static str> {
        let ExprKind::Attr(made, m) = &func.kind else { return None };
        let made_by_array = matches!(&made.kind, ExprKind::Call { func, .. } if is_path(func, self.np, "array"));
        if m != "astype" || !made_by_array {
            return None;
        }
        let ExprKind::Attr(module, dtype) = &arg.kind else { return None };
        if !matches!(&module.kind, ExprKind::Name(n) if n == self.np) {
            return None;
        }
        ["float32", "float64", "int64", "int32"].into_iter().find(|d| d == dtype)
    }

    /// `np.array(...)` (see [`Fold::array`]), made with `dtype` (a torch dtype's name) where one is given: then of
    /// any numbers.
    fn array_of(&self, e: &mut Expr, dtype: Option<&str>) -> Result<(), Diagnostic> {
        if let ExprKind::Call { args, .. } = &mut e.kind {
            self.exprs(args)?;
        }
        self.array(e, dtype)
    }

    /// `np.array(NUMBERS)`, a list or tuple (nested or not) of numbers known before the program runs, one of them a
    /// float: numpy's float64 array, which is `torch.tensor(NUMBERS, dtype=torch.float64)` under what programs do
    /// with it (arithmetic with numbers and tensors, `torch.tensor(a, dtype=...)`, indexing, `.shape`). An array of
    /// ints only is refused: numpy's true division of one gives float64 where a tensor's gives float32. Left
    /// accepted: the array on the left of an operator with a tensor, where PyTorch (with numpy 2) raises TypeError.
    /// With `dtype` (a torch dtype's name, from `.astype`) the array is of that dtype, of any numbers.
    fn array(&self, e: &mut Expr, dtype: Option<&str>) -> Result<(), Diagnostic> {
        fn leaves(f: &Fold, e: &Expr, floats: &mut bool) -> bool {
            match &e.kind {
                ExprKind::List(xs) | ExprKind::Tuple(xs) => !xs.is_empty() && xs.iter().all(|x| leaves(f, x, floats)),
                _ => match f.value(e) {
                    Some(Num::Float(_)) => {
                        *floats = true;
                        true
                    }
                    Some(Num::Int(_)) => true,
                    None => false,
                },
            }
        }
        let span = e.span;
        let ExprKind::Call { func, args, kwargs } = &mut e.kind else { unreachable!("a call") };
        let mut floats = false;
        let numbers = matches!((args.as_slice(), kwargs.is_empty()), ([a], true)
            if matches!(a.kind, ExprKind::List(_) | ExprKind::Tuple(_)) && leaves(self, a, &mut floats));
        if !(numbers && (floats || dtype.is_some())) {
            return err(span, format!("`{}.array(...)` is supported only of a list of numbers known before the program runs, one of them a float (a float64 array); other numpy is supported only as {FUNCS} of numbers known before the program runs", self.np));
        }
        if !self.torch_free {
            return err(span, format!("`{}.array(...)` of numbers becomes a float64 tensor, which is supported only in the body of a function that does not bind `torch` (not in a module-level constant or a default)", self.np));
        }
        let torch = |attr: &str| {
            let module = Expr { kind: ExprKind::Name("torch".into()), span };
            Expr { kind: ExprKind::Attr(Box::new(module), attr.into()), span }
        };
        **func = torch("tensor");
        kwargs.push(("dtype".into(), torch(dtype.unwrap_or("float64"))));
        Ok(())
    }

    /// A number known now: a literal, arithmetic on numbers, or a name bound once to one before `e`.
    fn value(&self, e: &Expr) -> Option<Num> {
        if let Some(n) = num(e) {
            return Some(n);
        }
        match &e.kind {
            ExprKind::Name(n) => self.consts.iter().find(|(m, _, at)| m == n && *at < e.span).map(|(_, v, _)| *v),
            ExprKind::Bin(op, a, b) => {
                let (x, y) = (self.value(a)?, self.value(b)?);
                match (op, x, y) {
                    (BinOp::Add, Num::Int(p), Num::Int(q)) => p.checked_add(q).map(Num::Int),
                    (BinOp::Sub, Num::Int(p), Num::Int(q)) => p.checked_sub(q).map(Num::Int),
                    (BinOp::Mul, Num::Int(p), Num::Int(q)) => p.checked_mul(q).map(Num::Int),
                    (BinOp::Add, ..) => Some(Num::Float(as_f64(x) + as_f64(y))),
                    (BinOp::Sub, ..) => Some(Num::Float(as_f64(x) - as_f64(y))),
                    (BinOp::Mul, ..) => Some(Num::Float(as_f64(x) * as_f64(y))),
                    (BinOp::Div, ..) if as_f64(y) != 0.0 => Some(Num::Float(as_f64(x) / as_f64(y))),
                    // RetinaNet's anchor scales, `[2 ** 0, 2 ** (1.0 / 3.0), 2 ** (2.0 / 3.0)]`: an int to a
                    // non-negative int power is an int; otherwise a float (none where Python's would be complex
                    // or raise: a negative base to a fractional power, zero to a negative one).
                    (BinOp::Pow, Num::Int(p), Num::Int(q)) if q >= 0 => {
                        u32::try_from(q).ok().and_then(|q| p.checked_pow(q)).map(Num::Int)
                    }
                    (BinOp::Pow, ..) => {
                        let (b, p) = (as_f64(x), as_f64(y));
                        let r = b.powf(p);
                        (!(b < 0.0 && p.fract() != 0.0) && !(b == 0.0 && p < 0.0) && r.is_finite())
                            .then_some(Num::Float(r))
                    }
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// `isinstance(P, torch.Tensor)` (or `int`, `float`, `bool`) of a parameter with a type and never rebound.
    fn isinstance(&self, e: &Expr) -> Option<bool> {
        let ExprKind::Call { func, args, kwargs } = &e.kind else { return None };
        if !matches!(&func.kind, ExprKind::Name(n) if n == "isinstance") || args.len() != 2 || !kwargs.is_empty() {
            return None;
        }
        let ExprKind::Name(p) = &args[0].kind else { return None };
        let (_, tensor) = self.kinds.iter().find(|(n, _)| n == p)?;
        let is_tensor_type = match &args[1].kind {
            ExprKind::Attr(m, t) => matches!(&m.kind, ExprKind::Name(n) if n == "torch") && t == "Tensor",
            ExprKind::Name(t) if t == "Tensor" => true,
            _ => return None,
        };
        is_tensor_type.then_some(*tensor)
    }
}

/// Whether `e` is `MODULE.NAME`.
fn is_path(e: &Expr, module: &str, name: &str) -> bool {
    matches!(&e.kind, ExprKind::Attr(m, n) if n == name && matches!(&m.kind, ExprKind::Name(x) if x == module))
}

/// numpy's ceil and floor give a float (math's an int), with the sign of `x` where it is zero (`np.ceil(-0.5)` is
/// -0.0): `math.copysign(float(call), x)` of `call`, math's ceil or floor of `x`.

fn float_with_sign_of(call: Expr, x: Expr, span: Span) -> ExprKind {
    let name = |n: &str| Box::new(Expr { kind: ExprKind::Name(n.into()), span });
    let float = Expr { kind: ExprKind::Call { func: name("float"), args: vec![call], kwargs: vec![] }, span };
    let copysign = Box::new(Expr { kind: ExprKind::Attr(name("math"), "copysign".into()), span });
    ExprKind::Call { func: copysign, args: vec![float, x], kwargs: vec![] }
}
