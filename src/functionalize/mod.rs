//! Functionalization: an imperative program becomes one pure term.
//!
//! This is SSA construction over root buffers. Every Python name holds a symbolic value; a tensor is a view
//! (shape, strides, affine offset) of a root buffer, and every root has a current version, a term. A read through a
//! view is `(access VERSION VIEW)`; an in-place write makes a new version `(assign VERSION VIEW VALUE)` that every
//! alias of the root sees. Loops over static ranges become one `loop` term whose carried state is whatever the body
//! writes or rebinds (found by a first, discarded pass over the body); a loop whose body needs the loop variable as a
//! static value (indexing a Python list, a shape that grows) is unrolled instead, up to [`UNROLL_LIMIT`] iterations.
//! A data-dependent `if` becomes an `if` term yielding both arms' versions; a data-dependent `while` a `while` term.
//! Mutated tensor parameters become extra outputs.
//!
//! Invariants: the result verifies ([`crate::ir::verify`]); what cannot be functionalized is reported with its
//! source location and reason, never turned into a wrong term.

mod args;
mod branch;
mod carry;
pub(crate) mod checks;
mod composite;
mod constants;
mod counted;
mod ctrl;
mod desugar;
mod drawn;
mod entries;
mod exits;
mod expr;
mod list_writes;
mod losses;
mod masked;
mod nn_ops;
mod numbers;
mod ops;
mod overlap;
mod pick;
mod pool;
mod python;
mod ranges;
mod resample;
mod selections;
mod specialize;
mod squeezed;
mod state;
mod strings;
mod subscript;
mod table;
mod views;

use std::collections::HashMap;

use crate::diag::{Diagnostic, Span};
use crate::frontend::ast::{Function, Module};
use crate::interp;
use crate::ir::{Node, ParamName, Term, Ty};
use crate::tensor::DType;
use state::{diag, Affine, Root, Stop, TRef, Terms, FR, FV};

/// Loops whose bodies need a static loop variable are unrolled up to this many iterations.
pub const UNROLL_LIMIT: i64 = 1024;

/// What each element of a functional program's output tuple is.
#[derive(Clone, Debug, PartialEq)]
pub enum Output {
    /// The program's `k`-th returned tensor.
    Return(usize),
    /// The final state of a tensor parameter written in place.
    Mutated(String),
}

/// A functionalized program: the term, its inputs, and the meaning of its output tuple.
#[derive(Clone, Debug)]
pub struct Functional {
    pub name: String,
    pub term: Term,
    pub inputs: Vec<(String, DType, Vec<usize>)>,
    pub outputs: Vec<Output>,
    /// Whether the program returned a tuple (`return.K.npy`) rather than one tensor (`return.npy`).
    pub returns_tuple: bool,
}

/// Functionalizes program `name` of `module`; scalar parameters take their `--arg` or default values.
pub fn functionalize(
    module: &Module,
    name: &str,
    scalars: &std::collections::BTreeMap<String, interp::ScalarArg>,
) -> Result<Functional, Diagnostic> {
    let t = std::time::Instant::now();
    // Where no exact form exists, the `if` blamed for the failure follows the arm the sample inputs take, under a
    // guard that hands the run to the reference interpreter where the other is taken (`specialize.rs`), one `if` at
    // a time; the first reason stands where that fails too.
    let mut follow = Vec::new();
    let f = match functionalize_with_exits(module, name, scalars, &follow) {
        Ok(f) => f,
        Err((first, mut blamed)) => loop {
            match blamed {
                Some(at) if !follow.contains(&at) && follow.len() < specialize::MAX_FOLLOWED => follow.push(at),
                _ => return Err(first),
            }
            match functionalize_with_exits(module, name, scalars, &follow) {
                Ok(f) => break f,
                Err((_, b)) => blamed = b,
            }
        },
    };
    crate::log::log(crate::log::Stage::Functionalize, || {
        let s = crate::ir::term_stats(&f.term);
        let ms = t.elapsed().as_secs_f64() * 1e3;
        format!(
            "{name}: {} nodes, {} loops, {} accesses, {} assigns, in {ms:.2} ms",
            s.nodes, s.loops, s.accesses, s.assigns
        )
    });
    Ok(f)
}

/// Functionalizes the program as written, then with its loop exits as flags where that helps; an error comes with
/// the `if` blamed for it.
fn functionalize_with_exits(
    module: &Module,
    name: &str,
    scalars: &std::collections::BTreeMap<String, interp::ScalarArg>,
    follow: &[crate::diag::Span],
) -> Result<Functional, (Diagnostic, Option<crate::diag::Span>)> {
    let as_written = |m: &Module| functionalize_as_written(m, name, scalars, follow);
    match as_written(module) {
        // A loop left under an `if` on a run-time value: functionalize it again with its exits as flags.
        Err((_, true, _)) => as_written(&exits::desugar(module)).map_err(|(d, _, b)| (d, b)),
        // Any other failure of a program with such loops, too: it may come before the exit is met, from what only
        // the iterations the exit does not skip run (an index out of range in a later iteration: fuzz seed 28079).
        // The flags are exact wherever they apply; where that fails too, the first error stands.
        Err((d, false, b)) if exits::has_exits_under_if(module) => {
            as_written(&exits::desugar(module)).map_err(|(_, _, b2)| (d, b.or(b2)))
        }
        r => r.map_err(|(d, _, b)| (d, b)),
    }
}

/// Functionalizes the program as it is written; on failure, also says whether a `break` or `continue` under an `if`
/// on a run-time value was met (which [`exits::desugar`] removes).
fn functionalize_as_written(
    module: &Module,
    name: &str,
    scalars: &std::collections::BTreeMap<String, interp::ScalarArg>,
    follow: &[crate::diag::Span],
) -> Result<Functional, (Diagnostic, bool, Option<crate::diag::Span>)> {
    let f = module.get(name).map_err(|d| (d, false, None))?;
    let inputs = interp::tensor_params(f).map_err(|d| (d.in_file(&module.path), false, None))?;
    // Module constants are plain Python data, evaluated once with the reference interpreter's rules.
    let it = interp::Interp::new(module).map_err(|d| (d.in_file(&module.path), false, None))?;
    let consts =
        module.constants.iter().filter_map(|(n, _)| it.global(n).map(|v| (n.clone(), expr::value_to_fv(&v)))).collect();
    let failed_consts =
        module.constants.iter().filter_map(|(n, _)| it.failed_global(n).map(|d| (n.clone(), d.clone()))).collect();
    let mut fz = Fz {
        module,
        t: Terms::new(),
        roots: Vec::new(),
        depth_calls: 0,
        call_base: 0,
        fn_names: HashMap::new(),
        consts,
        failed_consts,
        fn_stack: Vec::new(),
        exit_under_dyn_if: false,
        offset_choices: HashMap::new(),
        dyn_depth: 0,
        param_objects: Vec::new(),
        entry_selections: Vec::new(),
        statement: None,
        follow: follow.to_vec(),
        blamed: Default::default(),
        sample_spec: inputs.clone(),
        sample: None,
        ids: Vec::new(),
        grads: crate::interp::grads::table(module),
        parameters: Default::default(),
        drawn_arith: false,
    };
    let result = fz.program(f, &inputs, scalars);
    let exit = fz.exit_under_dyn_if;
    match result {
        Ok(out) => Ok(out),
        Err(e) => {
            let blamed = fz.blamed.borrow().get(&specialize::blame_key(&e)).copied();
            let d = match e {
                Stop::Diag(d) => d,
                Stop::NeedsStatic(span, why) => Diagnostic::new(format!("cannot functionalize: {why}")).at(span),
            };
            Err((d.in_file(&module.path), exit, blamed))
        }
    }
}

pub(crate) type Env = HashMap<String, FV>;

pub(super) struct Fz<'m> {
    module: &'m Module,
    t: Terms,
    roots: Vec<Root>,
    depth_calls: usize,
    /// How many roots there were when the function being run was entered: its callers' names can refer to those
    /// only (see `branch.rs`, where a tensor reachable by one name only merges as a fresh value).
    call_base: usize,
    /// For each function, how often each name occurs in it (to tell loop-local names from names used after).
    fn_names: HashMap<String, HashMap<String, usize>>,
    consts: HashMap<String, FV>,
    /// Module constants the reference interpreter could not compute, with why (`Interp::failed_global`).
    failed_consts: HashMap<String, Diagnostic>,
    /// The functions being inlined, innermost last.
    fn_stack: Vec<String>,
    /// A `break` or `continue` under an `if` on a run-time value was met (see [`exits`]).
    exit_under_dyn_if: bool,
    /// The values an offset merged from the arms of an `if` on a run-time value may take, where both are constants
    /// (for overlap checks).
    offset_choices: HashMap<state::TIdKey, Vec<i64>>,
    /// How many `if` arms or loop bodies on run-time values enclose the statement being functionalized (a `raise`
    /// there is refused: it would fail the program whatever the data).
    dyn_depth: usize,
    /// Each tensor parameter's object as the caller holds it (`squeeze_`/`unsqueeze_` on it change it,
    /// `desugar::shape_inplace`; PyTorch counts that as a mutation of the parameter, whose final contents are
    /// then an output, in the new shape).
    param_objects: Vec<interp::pyvalue::ParamObject<state::TRef>>,
    /// Per function being run, the objects of the selections its arguments reach (its callers hold them too).
    entry_selections: Vec<Vec<state::TId>>,
    /// Where the expression statement being run is (an in-place op on a selection bound to a name must be one).
    statement: Option<crate::diag::Span>,
    /// The `if`s (by location) that follow the arm the sample inputs take ([`specialize`]).
    follow: Vec<crate::diag::Span>,
    /// For each error met, the `if` on a run-time value that caused it, if any ([`specialize::blame_key`]).
    blamed: std::cell::RefCell<HashMap<(u32, u32, String), crate::diag::Span>>,
    /// The tensor parameters, whose seed-0 values are the sample inputs (made when first needed, in `sample`).
    sample_spec: Vec<(String, DType, Vec<usize>)>,
    sample: Option<std::collections::BTreeMap<String, crate::tensor::Tensor>>,
    /// The values `id()` was asked for, in order (`pywalk::identity_number`).
    ids: Vec<FV>,
    /// The tensors' gradients, where the file uses `.grad` (`interp::grads`).
    grads: Option<FV>,
    /// The tensors `nn.Parameter` made.
    parameters: crate::interp::grads::Parameters,
    /// Arithmetic that keeps drawn elements drawn is being made (`drawn::drawn_binop`): reads are not checked.
    drawn_arith: bool,
}

impl<'m> Fz<'m> {
    fn program(
        &mut self,
        f: &'m Function,
        inputs: &[(String, DType, Vec<usize>)],
        scalars: &std::collections::BTreeMap<String, interp::ScalarArg>,
    ) -> FR<Functional> {
        let mut env = Env::new();
        self.t.open_scope();
        for (name, dtype, shape) in inputs {
            let n = self.t.leaf(Node::Name(ParamName(name.clone())));
            let id = self.t.leaf(Node::Input(n));
            self.t.set_ty(id, Ty::Tensor(*dtype, shape.clone()));
            let root = self.new_root(state::TId { id, depth: 0 }, *dtype, shape.clone(), Some(name.clone()));
            let object = self.natural_view(root);
            self.param_objects.push(interp::pyvalue::ParamObject::new(name.clone(), object.clone()));
            env.insert(name.clone(), FV::Tensor(object));
        }
        for p in &f.params {
            if env.contains_key(&p.name) {
                continue;
            }
            let v = match scalars.get(&p.name) {
                Some(interp::ScalarArg::Int(i)) => FV::Int(*i),
                Some(interp::ScalarArg::Float(x)) => FV::Float(*x),
                Some(interp::ScalarArg::Bool(b)) => FV::Bool(*b),
                None => match &p.default {
                    Some(d) => self.expr(&mut Env::new(), d)?,
                    None => {
                        return diag(
                            p.span,
                            format!("scalar parameter `{}` has no default; pass it with --arg", p.name),
                        )
                    }
                },
            };
            let v = match (&p.ann, v) {
                (Some(crate::frontend::ast::TypeAnn::Float), FV::Int(i)) => FV::Float(i as f64),
                (_, v) => v,
            };
            env.insert(p.name.clone(), v);
        }
        let ret = self.call_body(f, env)?;
        // The output tuple: returned tensors, then the final versions of parameters written in place.
        let (rets, returns_tuple) = match ret {
            FV::Tensor(_) => (vec![ret], false),
            FV::None => (vec![], true),
            // A named tuple (`torch.topk(x, 3)`) returns as the tuple it is.
            FV::Tuple(items) | FV::Named(items, _) => (items.as_ref().clone(), true),
            other => (vec![other], false),
        };
        let mut parts = Vec::new();
        let mut outputs = Vec::new();
        let mut got = Vec::new();
        for (k, r) in rets.iter().enumerate() {
            let id = match r {
                FV::Tensor(tr) => {
                    let v = self.read(tr, f.span)?;
                    got.push(self.tensor_ty(v, f.span)?);
                    self.t.at(v)
                }
                FV::Int(_) | FV::Float(_) | FV::Bool(_) | FV::DynInt(_) | FV::DynFloat(_) | FV::DynBool(_) => {
                    let (v, _) = self.scalar_tensor(r, None, f.span)?;
                    got.push(self.tensor_ty(v, f.span)?);
                    self.t.at(v)
                }
                m @ FV::Masked(_) => return state::masked_use(m),
                other => {
                    return diag(
                        f.span,
                        format!(
                            "programs return tensors or tuples of tensors, not a {}",
                            crate::interp::pyvalue::PyValue::shown_type(other)
                        ),
                    )
                }
            };
            parts.push(id);
            outputs.push(Output::Return(k));
        }
        if let Some(ann) = &f.returns {
            crate::interp::returns::check_returns(&f.name, ann, &got, returns_tuple)
                .map_err(|m| Stop::Diag(Diagnostic::new(m).at(f.span)))?;
        }
        for p in std::mem::take(&mut self.param_objects) {
            let root = p.object.root;
            if p.reshaped {
                let v = self.read(&p.object, f.span)?;
                parts.push(self.t.at(v));
            } else if self.roots[root].written {
                self.check_drawn(&self.natural_view(root), f.span)?;
                parts.push(self.t.at(self.roots[root].version));
            } else {
                continue;
            }
            outputs.push(Output::Mutated(self.roots[root].param.clone().unwrap_or_default()));
        }
        self.checks_on_outputs(&mut parts, f.span)?;
        let top = self.t.add(Node::Tuple(parts.into())).map_err(|m| Stop::Diag(Diagnostic::new(m).at(f.span)))?;
        let term = self.t.b.extract(top.id);
        Ok(Functional { name: f.name.clone(), term, inputs: inputs.to_vec(), outputs, returns_tuple })
    }

    fn new_root(&mut self, version: state::TId, dtype: DType, shape: Vec<usize>, param: Option<String>) -> usize {
        let dummy = crate::tensor::Tensor::zeros(DType::F32, &[]).expect("one element");
        self.roots.push(Root { version, dtype, shape, written: false, param, dummy, number: None, drawn: None });
        self.roots.len() - 1
    }

    /// The contiguous view of a root's whole storage, in the storage's own shape.
    fn natural_view(&self, root: usize) -> TRef {
        let shape = self.roots[root].shape.clone();
        let strides = crate::tensor::contiguous_strides(&shape);
        TRef { root, shape, strides, off: Affine::constant(0), alt: None }
    }

    pub(super) fn tensor_ty(&mut self, v: state::TId, span: Span) -> FR<(DType, Vec<usize>)> {
        let id = self.t.at(v);
        match self.t.ty(id).map_err(Self::tyerr(span))? {
            Ty::Tensor(d, s) => Ok((d, s)),
            other => diag(span, format!("expected a tensor, found {other}")),
        }
    }

    /// `(full SHAPE DTYPE VALUE)`.
    pub(super) fn full(
        &mut self,
        shape: &[usize],
        dtype: DType,
        value: crate::tensor::Scalar,
    ) -> Result<state::TId, String> {
        let s = self.t.b.ints(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let d = self.t.leaf(Node::DType(dtype));
        let v = match value.cast(dtype) {
            crate::tensor::Scalar::I(i) => Node::Int(i),
            crate::tensor::Scalar::F(f) => Node::Float(crate::ir::FloatLit(f)),
            crate::tensor::Scalar::B(b) => Node::Bool(crate::ir::BoolLit(b)),
        };
        let v = self.t.leaf(v);
        self.t.op(crate::ir::OpName::Full, vec![s, d, v])
    }

    /// A located error from a message of the term builder.
    fn tyerr(span: Span) -> impl Fn(String) -> Stop {
        move |m| Stop::Diag(Diagnostic::new(m).at(span))
    }
}

/// Runs a functionalized program with the functional interpreter; outputs are sorted as the reference's are.
pub fn run_functional(
    f: &Functional,
    inputs: &std::collections::BTreeMap<String, crate::tensor::Tensor>,
) -> Result<interp::RunOutput, Diagnostic> {
    run_with(f, inputs, |term, inputs| crate::ir::eval_program(term, inputs).map_err(|e| e.0))
}

/// Runs a functionalized program with `engine` (which evaluates its term on the inputs), checking the inputs
/// against the signature first; outputs are sorted as the reference's are.
pub fn run_with(
    f: &Functional,
    inputs: &std::collections::BTreeMap<String, crate::tensor::Tensor>,
    engine: impl FnOnce(
        &crate::ir::Term,
        &std::collections::BTreeMap<String, crate::tensor::Tensor>,
    ) -> Result<Vec<crate::tensor::Tensor>, String>,
) -> Result<interp::RunOutput, Diagnostic> {
    for (name, dtype, shape) in &f.inputs {
        match inputs.get(name) {
            Some(t) if t.dtype() == *dtype && t.shape == *shape => {}
            Some(t) => {
                return Err(Diagnostic::new(format!(
                    "input `{name}` is {}{}, but the program declares {}{}",
                    t.dtype().annotation(),
                    crate::tensor::fmt_shape(&t.shape),
                    dtype.annotation(),
                    crate::tensor::fmt_shape(shape)
                )))
            }
            None => return Err(Diagnostic::new(format!("no input given for tensor parameter `{name}`"))),
        }
    }
    let values = engine(&f.term, inputs).map_err(Diagnostic::new)?;
    let mut returns = Vec::new();
    let mut mutated = Vec::new();
    for (o, v) in f.outputs.iter().zip(values) {
        match o {
            Output::Return(_) => returns.push(v),
            Output::Mutated(name) => mutated.push((name.clone(), v)),
        }
    }
    Ok(interp::RunOutput { returns, returns_tuple: f.returns_tuple, mutated })
}
