//! A tensor's `.grad`, both engines: optimizer code reads `p.grad` for each parameter and programs set it before a
//! step (`w.grad = g`). Without autograd a gradient is only what the program assigned, so it is a table from tensors
//! to values: the dict every frame binds to [`GRADS`] (the engine makes it when the file uses `.grad` and binds it
//! in each call's frame, which keeps it reachable where the functionalizer snapshots lists and dicts around
//! branches and loops), keyed by the tensor's `id()`. Reading gives the value assigned, `None` where there is none;
//! assigning checks what PyTorch checks (a tensor of the same size and dtype, or `None`).
//!
//! The tensors `nn.Parameter` made are kept too ([`Parameters`]): `p.requires_grad` is what `nn.Parameter` was given
//! (True unless `requires_grad=False`), and a module's `parameters()` lists them (`super::objects::parameters`).
//!
//! A tensor is told apart as `id()` tells it (`pywalk::identity_number`): by its view of its buffer, so two views
//! of the same elements made separately (`w.view(n)`, `w.data`), distinct objects in PyTorch, share one `.grad` here.

use super::pyvalue::{Exec, Made, Py, PyValue, Walk};
use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::{BinOp, Expr, ExprKind, GRADS};

/// The engine's table of gradients, for a file that uses `.grad`: an empty dict, made once per run.
pub fn table<V: PyValue>(module: &crate::frontend::ast::Module) -> Option<V> {
    module.uses_grad().then(|| V::make(Made::Dict(Vec::new())))
}

/// Binds the table in a new frame.
pub fn bind<V: PyValue>(table: &Option<V>, frame: &mut std::collections::HashMap<String, V>) {
    if let Some(t) = table {
        frame.insert(GRADS.to_string(), t.clone());
    }
}

fn entries<'m, W: Walk<'m>>(w: &mut W, env: &mut W::Env, span: Span) -> Result<W::V, W::Err> {
    let t = w.lookup(env, GRADS, span)?;
    match t.py() {
        Py::Dict(_) => Ok(t),
        _ => Err(Diagnostic::new("`.grad` is not available here").at(span).into()),
    }
}

/// `t.grad` for tensor `t`.
pub fn read<'m, W: Walk<'m>>(w: &mut W, env: &mut W::Env, t: &W::V, span: Span) -> Result<W::V, W::Err> {
    let key = w.identity(t, span)?;
    let table = entries(w, env, span)?;
    let Py::Dict(d) = table.py() else { unreachable!("checked by entries") };
    let found = d.borrow().iter().find(|(k, _)| matches!(k.py(), Py::Int(i) if i == key)).map(|(_, v)| v.clone());
    Ok(found.unwrap_or_else(|| W::V::make(Made::None)))
}

/// `t.grad = v` for tensor `t`.
pub fn write<'m, X: Exec<'m>>(x: &mut X, env: &mut X::Env, t: &X::V, v: &X::V, span: Span) -> Result<(), X::Err> {
    let fail = |m: String| Err(Diagnostic::new(m).at(span).into());
    match v.py() {
        Py::None => {}
        Py::Tensor => {
            let (size, grad_size) = (shape(x, t, span)?, shape(x, v, span)?);
            if size != grad_size {
                return fail(format!(
                    "RuntimeError: attempting to assign a gradient of size '{grad_size}' to a tensor of size \
                     '{size}'. Please ensure that the gradient and the tensor are the same size"
                ));
            }
            let (dtype, grad_dtype) = (x.attribute(t, "dtype", span)?, x.attribute(v, "dtype", span)?);
            if let (Py::DType(d), Py::DType(g)) = (dtype.py(), grad_dtype.py()) {
                if d != g {
                    return fail(format!(
                        "RuntimeError: attempting to assign a gradient with dtype '{}' to a tensor with grad_dtype \
                         '{}'. The gradient must match the tensor's grad_dtype (defaults to the tensor's dtype)",
                        g.torch_name(),
                        d.torch_name()
                    ));
                }
            }
        }
        _ => {
            return fail(format!(
                "TypeError: assigned grad expected to be a Tensor or None but got grad of type {}",
                v.type_name()
            ))
        }
    }
    let key = X::V::make(Made::Int(x.identity(t, span)?));
    let table = entries(x, env, span)?;
    x.setitem(&table, &key, v, span)
}

/// A tensor's size as PyTorch prints it in these messages (`[4, 3]`).
fn shape<'m, W: Walk<'m>>(w: &mut W, t: &W::V, span: Span) -> Result<String, W::Err> {
    let s = w.attribute(t, "shape", span)?;
    let dims: Vec<String> = s
        .items()
        .unwrap_or_default()
        .iter()
        .map(|d| match d.py() {
            Py::Int(i) => i.to_string(),
            _ => "?".into(),
        })
        .collect();
    Ok(format!("[{}]", dims.join(", ")))
}

/// `x.data op= v` and `x.grad op= v`: in place on the tensor the attribute reads (`+=` on a `.grad` that is None is
/// Python's TypeError).
pub fn aug_assign<'m, X: Exec<'m>>(
    x: &mut X,
    env: &mut X::Env,
    target: &'m Expr,
    op: BinOp,
    value: &'m Expr,
    span: Span,
) -> Result<(), X::Err> {
    let cur = x.eval(env, target)?;
    if !matches!(cur.py(), Py::Tensor) {
        let m = match &target.kind {
            // `p.grad += g` where `p.grad` is None
            ExprKind::Attr(_, a) if a == "grad" => format!(
                "TypeError: unsupported operand type(s) for {}=: '{}' and '{}'",
                op.symbol(),
                cur.type_name(),
                x.eval(env, value)?.type_name()
            ),
            _ => format!("'{}' object has no attribute 'data'", cur.type_name()),
        };
        return Err(Diagnostic::new(m).at(target.span).into());
    }
    let rhs = x.eval(env, value)?;
    x.inplace_binop(cur, op, rhs, span).map(|_| ())
}

/// The tensors `nn.Parameter` made in a run, by `id()`, with their `requires_grad`.
#[derive(Clone, Default)]
pub struct Parameters(Vec<(i64, bool)>);

impl Parameters {
    /// Keeps the tensor `nn.Parameter` made; an error where one it made before has the same `id()` here: PyTorch's
    /// two Parameters over the same elements are two objects, which this table could not tell apart (a module's
    /// `parameters()` would list one of them).
    pub fn add(&mut self, id: i64, requires_grad: bool) -> Result<(), String> {
        if self.0.iter().any(|(i, _)| *i == id) {
            return Err(
                "nn.Parameter of a tensor that is already a parameter (two parameters over the same elements) \
                        is not supported: funcfuse tells tensors apart by their elements"
                    .into(),
            );
        }
        self.0.push((id, requires_grad));
        Ok(())
    }

    pub fn get(&self, id: i64) -> Option<bool> {
        self.0.iter().find(|(i, _)| *i == id).map(|(_, r)| *r)
    }

    /// Sets a parameter's `requires_grad`; false where `id` is no parameter's.
    pub fn set(&mut self, id: i64, requires_grad: bool) -> bool {
        self.0.iter_mut().find(|(i, _)| *i == id).map(|p| p.1 = requires_grad).is_some()
    }
}

/// After `copy.deepcopy(orig)` made `copy`: each copy of a parameter is a parameter too, with its `requires_grad` (a
/// module copied with its parameters), kept by `add(engine, id, requires_grad)`. A tensor without an identity (a
/// view placed by data or a loop) was never made a parameter.
pub fn copy_parameters<'m, W: Walk<'m>>(
    w: &mut W,
    orig: &W::V,
    copy: &W::V,
    span: Span,
    add: impl Fn(&mut W, i64, bool) -> Result<(), String>,
) -> Result<(), W::Err> {
    let pairs = super::pywalk::tensors_in(orig).into_iter().zip(super::pywalk::tensors_in(copy));
    for (x, y) in pairs.collect::<Vec<_>>() {
        if let Ok(Some(flag)) = w.parameter(&x, span) {
            let id = w.identity(&y, span)?;
            add(w, id, flag).map_err(|m| Diagnostic::new(m).at(span))?;
        }
    }
    Ok(())
}

/// `nn.Parameter(data, requires_grad=True)`'s `requires_grad` (a bool known now; `autograd_variable` checked it).
pub fn requires_grad<V>(pos: &[V], kw: &[(String, V)], as_bool: impl Fn(&V) -> Option<bool>) -> bool {
    let given = kw.iter().find(|(k, _)| k == "requires_grad").map(|(_, v)| v).or(pos.get(1));
    given.and_then(as_bool).unwrap_or(true)
}

/// The tensor methods that change nothing an engine computes and return the tensor: `x.share_memory_()` (memory is
/// the process's here), `x.requires_grad_(flag)` (a parameter's flag is kept, `super::grads::Parameters`; any other
/// tensor's is False, so only `False` is accepted there: autograd is not supported). `None` for any other call.
pub fn tensor_flag_call<'m, W: Walk<'m>>(
    w: &mut W,
    o: &W::V,
    name: &str,
    pos: &[W::V],
    kw: &[(String, W::V)],
    span: Span,
) -> Result<Option<W::V>, W::Err> {
    if !matches!(o.py(), Py::Tensor) {
        return Ok(None);
    }
    let e = |m: String| -> Result<Option<W::V>, W::Err> { Err(Diagnostic::new(m).at(span).into()) };
    match name {
        "share_memory_" if pos.is_empty() && kw.is_empty() => Ok(Some(o.clone())),
        "share_memory_" => e("share_memory_() takes no arguments".into()),
        "requires_grad_" => {
            let given = match (pos, kw) {
                ([], []) => None,
                ([v], []) => Some(v),
                ([], [(k, v)]) if k == "requires_grad" => Some(v),
                _ => return e("requires_grad_() takes one argument, `requires_grad`".into()),
            };
            let flag = match given.map(|v| v.py()) {
                None => true,
                Some(Py::Bool(b)) => b,
                Some(_) => return e("requires_grad_(): argument 'requires_grad' must be bool".into()),
            };
            if w.parameter(o, span)?.is_some() {
                w.set_requires_grad(o, flag, span)?;
            } else if flag {
                return e(
                    "`requires_grad_(True)` on a tensor that is no nn.Parameter: autograd is not supported".into()
                );
            }
            Ok(Some(o.clone()))
        }
        _ => Ok(None),
    }
}
