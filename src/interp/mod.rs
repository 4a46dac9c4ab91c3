//! The reference interpreter: runs a program's AST with PyTorch's exact aliasing semantics.
//!
//! Tensors are strided views of shared buffers (see [`crate::tensor`]), so writes through any alias are seen by every
//! other alias and by the caller. This interpreter is the meaning of a program: every later stage is checked against it.
//! Invariant: where PyTorch raises, we raise with the source location; where PyTorch's result depends on the CPU, we
//! reject the program instead of guessing.

pub(crate) mod args;
pub(crate) mod bind;
pub(crate) mod calls;
pub(crate) mod compat;
pub(crate) mod complex;
pub(crate) mod conv;
pub(crate) mod creation;
pub(crate) mod device;
pub(crate) mod drawn;
pub(crate) mod exec;
pub(crate) mod extra_ops;
pub(crate) mod foreach;
pub(crate) mod grads;
pub(crate) mod losses;
pub(crate) mod more_ops;
pub(crate) mod nn_init;
pub(crate) mod nn_ops;
pub(crate) mod objects;
pub(crate) mod out_arg;
pub(crate) mod pool;
pub(crate) mod pyarith;
pub(crate) mod pycompare;
pub(crate) mod pyfmt;
pub(crate) mod pyset;
pub(crate) mod pystr;
pub(crate) mod python;
pub(crate) mod pyvalue;
pub(crate) mod pywalk;
pub(crate) mod resample;
pub mod returns;
mod subscript;
pub(crate) mod torch_ops;
pub mod value;

use std::collections::BTreeMap;
use std::rc::Rc;

pub use exec::{Interp, MAX_WHILE_ITERATIONS};
pub use value::Value;

use crate::diag::{err, Diagnostic};
use crate::frontend::ast::{Function, Module, TypeAnn};
use crate::tensor::{fmt_shape, Tensor};

/// A scalar argument given on the command line or in a test.
#[derive(Clone, Debug, PartialEq)]
pub enum ScalarArg {
    Int(i64),
    Float(f64),
    Bool(bool),
}

/// What a program run produces: its return value and the final state of every tensor parameter it wrote to.
#[derive(Debug)]
pub struct RunOutput {
    /// The returned tensors, in order (`return.npy` or `return.0.npy`, ...); `None` when a single tensor was returned
    /// rather than a tuple.
    pub returns: Vec<Tensor>,
    pub returns_tuple: bool,
    /// Tensor parameters written in place, in signature order.
    pub mutated: Vec<(String, Tensor)>,
}

impl RunOutput {
    /// The files `funcfuse run` writes for this output, by name: `return.npy` or `return.K.npy`, and `NAME.npy` for
    /// every tensor parameter written in place.
    pub fn files(&self) -> BTreeMap<String, Tensor> {
        let mut m = BTreeMap::new();
        if self.returns_tuple {
            for (i, t) in self.returns.iter().enumerate() {
                m.insert(format!("return.{i}.npy"), t.clone());
            }
        } else if let Some(t) = self.returns.first() {
            m.insert("return.npy".to_string(), t.clone());
        }
        for (n, t) in &self.mutated {
            m.insert(format!("{n}.npy"), t.clone());
        }
        m
    }
}

/// The tensor parameters of a program and their annotated types, checking that every parameter is annotated.
pub fn tensor_params(f: &Function) -> Result<Vec<(String, crate::tensor::DType, Vec<usize>)>, Diagnostic> {
    let mut out = Vec::new();
    if let Some((_, va)) = &f.vararg {
        return err(va.span, format!("a program cannot take `*{}`: its parameters are its inputs, each annotated (`*args` is supported in the helpers it calls)", va.name));
    }
    if let Some(kw) = &f.kwarg {
        return err(kw.span, format!("a program cannot take `**{}`: its parameters are its inputs, each annotated (`**kwargs` is supported in the helpers it calls)", kw.name));
    }
    for p in &f.params {
        match &p.ann {
            Some(TypeAnn::Tensor { dtype, shape }) => out.push((p.name.clone(), *dtype, shape.clone())),
            Some(TypeAnn::Int | TypeAnn::Float | TypeAnn::Bool) => {}
            Some(_) => return err(p.span, format!("parameter `{}` of a program must be annotated as a tensor (`f32[4, 8]`) or as int, float or bool", p.name)),
            None => return err(p.span, format!("parameter `{}` has no annotation; programs annotate tensors as `f32[4, 8]` and scalars as int, float or bool", p.name)),
        }
    }
    Ok(out)
}

/// Runs program `name` of `module` on the given tensors (by parameter name) and scalar arguments.
pub fn run_program(
    module: &Module,
    name: &str,
    inputs: &BTreeMap<String, Tensor>,
    scalars: &BTreeMap<String, ScalarArg>,
) -> Result<RunOutput, Diagnostic> {
    let run = || -> Result<RunOutput, Diagnostic> {
        let f = module.get(name)?;
        tensor_params(f)?;
        let mut it = Interp::new(module)?;
        // Every value goes by keyword; parameters not given take their defaults in `call_function`.
        let mut kwargs = Vec::new();
        let mut params: Vec<(String, Tensor)> = Vec::new();
        for p in &f.params {
            match &p.ann {
                Some(TypeAnn::Tensor { dtype, shape }) => {
                    let t = inputs
                        .get(&p.name)
                        .ok_or_else(|| Diagnostic::new(format!("no input given for tensor parameter `{}`", p.name)))?;
                    if t.dtype() != *dtype || t.shape != *shape {
                        return Err(Diagnostic::new(format!(
                            "input `{}` is {}{}, but the program declares {}{}",
                            p.name,
                            t.dtype().annotation(),
                            fmt_shape(&t.shape),
                            dtype.annotation(),
                            fmt_shape(shape)
                        ))
                        .at(p.span));
                    }
                    params.push((p.name.clone(), t.clone()));
                    kwargs.push((p.name.clone(), Value::Tensor(t.clone())));
                }
                ann => match scalars.get(&p.name) {
                    Some(s) => kwargs.push((
                        p.name.clone(),
                        scalar_value(s, ann.as_ref(), &p.name).map_err(|m| Diagnostic::new(m).at(p.span))?,
                    )),
                    None if p.default.is_some() => {}
                    None => {
                        return err(
                            p.span,
                            format!(
                                "scalar parameter `{}` has no default; pass it with --arg {}=VALUE",
                                p.name, p.name
                            ),
                        )
                    }
                },
            }
        }
        for k in scalars.keys() {
            if !f.params.iter().any(|p| p.name == *k) {
                return Err(Diagnostic::new(format!("`{name}` has no parameter `{k}`")));
            }
        }
        it.params = params.iter().map(|(n, t)| pyvalue::ParamObject::new(n.clone(), t.clone())).collect();
        let ret = it.call_function(f, Vec::new(), kwargs, f.span)?;
        let (returns, returns_tuple) = match ret {
            Value::Tensor(t) => (vec![t], false),
            Value::None => (vec![], true),
            // A named tuple (`torch.topk(x, 3)`) returns as the tuple it is.
            Value::Tuple(items) | Value::Named(items, _) => {
                let mut out = Vec::new();
                for v in items.iter() {
                    out.push(return_tensor(v)?);
                }
                (out, true)
            }
            other => (vec![return_tensor(&other)?], false),
        };
        if let Some(ann) = &f.returns {
            let got: Vec<_> = returns.iter().map(|t| (t.dtype(), t.shape.clone())).collect();
            returns::check_returns(&f.name, ann, &got, returns_tuple).map_err(|m| Diagnostic::new(m).at(f.span))?;
        }
        // What a random initialization drew is never an output (`drawn`: reads are checked where they happen;
        // this is where the program's caller reads).
        let outputs: Vec<Value> =
            returns.iter().chain(it.params.iter().map(|p| &p.object)).cloned().map(Value::Tensor).collect();
        it.check_drawn(&outputs.iter().collect::<Vec<_>>(), f.span)?;
        // A parameter written in place, or whose object `squeeze_`/`unsqueeze_` changed: its final contents, in the
        // shape the caller's object has now.
        let mutated = (it.params.into_iter())
            .filter(|p| p.reshaped || it.written.contains(&(Rc::as_ptr(&p.object.buf) as usize)))
            .map(|p| (p.name, p.object))
            .collect();
        Ok(RunOutput { returns, returns_tuple, mutated })
    };
    run().map_err(|d| d.in_file(&module.path))
}

/// The located form of a run-time error that another engine (functional, compiled) raised on `inputs` without a
/// source location: the reference interpreter runs the program on copies of the same inputs, and where it raises with
/// a location, its diagnostic (PyTorch's message at the program's `file:line:col`) is the one reported. Otherwise the
/// engine's own error stands (in `module`'s file).
pub fn locate(
    module: &Module,
    name: &str,
    inputs: &BTreeMap<String, Tensor>,
    scalars: &BTreeMap<String, ScalarArg>,
    d: Diagnostic,
) -> Diagnostic {
    if d.span.is_some() {
        return d.in_file(&module.path);
    }
    // The reference writes parameters in place: it gets its own buffers.
    let copies: BTreeMap<String, Tensor> = inputs.iter().map(|(k, t)| (k.clone(), t.contiguous_copy())).collect();
    match run_program(module, name, &copies, scalars) {
        Err(r) if r.span.is_some() => r,
        _ => d.in_file(&module.path),
    }
}

fn return_tensor(v: &Value) -> Result<Tensor, Diagnostic> {
    use crate::tensor::{DType, Scalar};
    match v {
        Value::Tensor(t) => Ok(t.clone()),
        Value::Int(i) => Tensor::scalar(DType::I64, Scalar::I(*i)).map_err(Diagnostic::new),
        Value::Float(f) => Tensor::scalar(DType::F64, Scalar::F(*f)).map_err(Diagnostic::new),
        Value::Bool(b) => Tensor::scalar(DType::Bool, Scalar::B(*b)).map_err(Diagnostic::new),
        other => Err(Diagnostic::new(format!(
            "programs return tensors, numbers or tuples of them, not a {}",
            pyvalue::PyValue::shown_type(other)
        ))),
    }
}

fn scalar_value(s: &ScalarArg, ann: Option<&TypeAnn>, name: &str) -> Result<Value, String> {
    Ok(match (ann, s) {
        (Some(TypeAnn::Int), ScalarArg::Int(i)) => Value::Int(*i),
        (Some(TypeAnn::Float), ScalarArg::Int(i)) => Value::Float(*i as f64),
        (Some(TypeAnn::Float), ScalarArg::Float(f)) => Value::Float(*f),
        (Some(TypeAnn::Bool), ScalarArg::Bool(b)) => Value::Bool(*b),
        (Some(TypeAnn::Tensor { .. }), _) => {
            return Err(format!("`{name}` is a tensor parameter; give it as an input file"))
        }
        (_, other) => return Err(format!("`{name}` is declared {:?} but was given {:?}", ann, other)),
    })
}
