//! One function given as source text, its parameters typed by values instead of annotations: the way in for the
//! Python package (`python/`), which hands over `inspect.getsource(fn)` and the example inputs' dtypes and shapes.
//!
//! [`Compiled::new`] parses, types, optimizes and plans the function once (with the same pipeline and profile as
//! `funcfuse explain`, so the figures `explain` prints are the plan that runs) and loads its kernels; then
//! [`Compiled::run`] runs the plan as often as asked. Every stage recurses over the program, and the runtime's
//! tensors are not `Send`, so one worker thread with the big stack of [`crate::limits::on_big_stack`] owns all of it
//! and the caller (any thread) exchanges plain buffers with it.

use std::collections::BTreeMap;
use std::ptr::NonNull;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::Duration;

use crate::backend::{Loaded, Target};
use crate::diag::Diagnostic;
use crate::frontend::ast::{Module, TypeAnn};
use crate::interp::ScalarArg;
use crate::lower::Plan;
use crate::optimize::ProgramResult;
use crate::pipeline::Session;
use crate::tensor::{Buf, DType, Store, Tensor};

/// What a parameter is bound to: a tensor of this dtype and shape, or a scalar with this value.
#[derive(Clone, Debug, PartialEq)]
pub enum Param {
    Tensor(DType, Vec<usize>),
    Scalar(ScalarArg),
}

/// The function to compile: `text` holds it (and the helpers and constants it uses), each function dedented by the
/// columns `indents` gives for its lines (`(first line, last line, columns)`; blank lines stand for the lines of
/// its file above it, so that lines are the file's); `path` names its file in messages.
#[derive(Clone, Debug)]
pub struct Source {
    pub path: String,
    pub text: String,
    pub func: String,
    pub indents: Vec<(u32, u32, u32)>,
}

/// A tensor crossing the boundary: dtype, shape and row-major elements.
#[derive(Clone, Debug, PartialEq)]
pub struct Raw {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub buf: Buf,
}

/// A tensor parameter's elements for [`Compiled::run`] (row-major): owned, or read in place from the caller's
/// memory for the length of one run (zero-copy; see [`Input::borrowed`]).
pub enum Input {
    Owned(Buf),
    Borrowed(Borrowed),
}

/// A caller's memory, read in place during one run: made by [`Input::borrowed`].
pub struct Borrowed {
    dtype: DType,
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: [`Input::borrowed`]'s contract: the memory stays valid and unwritten until the run given it returns, and
// the worker thread that reads it ends every borrow before it replies ([`end_borrows`]).
unsafe impl Send for Borrowed {}

impl Input {
    /// `len` elements of `dtype` at `ptr`, read in place (no copy) by the run they are given to. Bool elements are
    /// not accepted (a byte other than 0 and 1 is not a bool): copy them into an owned [`Buf`].
    ///
    /// # Safety
    /// `ptr` is aligned for `dtype` and valid for reads of `len` elements, and the memory is neither written nor
    /// freed, by anyone, until the [`Compiled::run`] given this input returns.
    pub unsafe fn borrowed(dtype: DType, ptr: *const u8, len: usize) -> Result<Input, String> {
        let ptr = NonNull::new(ptr as *mut u8).ok_or("a null pointer")?;
        match dtype {
            DType::F32 | DType::F64 | DType::I64 | DType::I32 | DType::I16 | DType::I8 | DType::U8 => {
                Ok(Input::Borrowed(Borrowed { dtype, ptr, len }))
            }
            _ => Err(format!("{} elements are copied, not read in place", dtype.annotation())),
        }
    }

    fn dtype_len(&self) -> (DType, usize) {
        match self {
            Input::Owned(b) => (b.dtype(), b.len()),
            Input::Borrowed(b) => (b.dtype, b.len),
        }
    }

    fn into_buf(self) -> Buf {
        let Input::Borrowed(Borrowed { dtype, ptr, len }) = self else {
            let Input::Owned(b) = self else { unreachable!() };
            return b;
        };
        // SAFETY: `Input::borrowed`'s contract covers the run, and `end_borrows` ends each borrow before the run
        // returns; alignment and length are the caller's promise for `dtype`, checked against the plan's shape.
        unsafe {
            match dtype {
                DType::F32 => Buf::F32(Store::borrowed(ptr.cast(), len)),
                DType::F64 => Buf::F64(Store::borrowed(ptr.cast(), len)),
                DType::I32 => Buf::I32(Store::borrowed(ptr.cast(), len)),
                DType::I64 => Buf::I64(Store::borrowed(ptr.cast(), len)),
                DType::I16 => Buf::I16(Store::borrowed(ptr.cast(), len)),
                DType::I8 => Buf::I8(Store::borrowed(ptr.cast(), len)),
                DType::U8 => Buf::U8(Store::borrowed(ptr.cast(), len)),
                _ => unreachable!("refused by Input::borrowed"),
            }
        }
    }
}

impl From<Buf> for Input {
    fn from(b: Buf) -> Input {
        Input::Owned(b)
    }
}

/// What one run produced: the returned tensors (a tuple or not) and the final values of the parameters it writes.
#[derive(Clone, Debug)]
pub struct Outputs {
    pub returns: Vec<Raw>,
    pub returns_tuple: bool,
    pub mutated: Vec<(String, Raw)>,
}

/// Parses the source and gives each parameter of its function the type of `params` (every parameter must have
/// one); returns the typed module and the scalar values.
pub fn typed_module(
    src: &Source,
    params: &[(String, Param)],
) -> Result<(Module, BTreeMap<String, ScalarArg>), Diagnostic> {
    let mut module = crate::frontend::parse_module(&src.path, &src.text)?;
    // A function outside the subset fails alone, with its own located error.
    module.get(&src.func)?;
    let f = module
        .functions
        .iter_mut()
        .find(|f| f.name == src.func)
        .ok_or_else(|| Diagnostic::new(format!("no function `{}` in its source", src.func)).in_file(&src.path))?;
    let mut scalars = BTreeMap::new();
    for p in &mut f.params {
        let Some((_, v)) = params.iter().find(|(n, _)| *n == p.name) else {
            return Err(Diagnostic::new(format!("no value given for parameter `{}`", p.name))
                .at(p.span)
                .in_file(&src.path));
        };
        p.ann = Some(match v {
            Param::Tensor(DType::F16 | DType::BF16, _) => {
                return Err(Diagnostic::new(format!("parameter `{}`: f16 and bf16 tensors are not supported", p.name))
                    .at(p.span)
                    .in_file(&src.path))
            }
            Param::Tensor(dtype, shape) => TypeAnn::Tensor { dtype: *dtype, shape: shape.clone() },
            Param::Scalar(s) => {
                scalars.insert(p.name.clone(), s.clone());
                match s {
                    ScalarArg::Int(_) => TypeAnn::Int,
                    ScalarArg::Float(_) => TypeAnn::Float,
                    ScalarArg::Bool(_) => TypeAnn::Bool,
                }
            }
        });
    }
    if let Some((name, _)) = params.iter().find(|(n, _)| !f.params.iter().any(|p| p.name == *n)) {
        return Err(Diagnostic::new(format!("`{}` has no parameter `{name}`", src.func)).in_file(&src.path));
    }
    Ok((module, scalars))
}

/// Moves a located error's column back to where it is in the file (its line was dedented by the columns `indents`
/// gives for it).
pub fn reindent(mut d: Diagnostic, indents: &[(u32, u32, u32)]) -> Diagnostic {
    if let Some(s) = &mut d.span {
        if let Some((_, _, cols)) = indents.iter().find(|(a, b, _)| (*a..=*b).contains(&s.line)) {
            s.col += cols;
        }
    }
    d
}

/// Writes a buffer's elements as bytes (native byte order; bools as 0 and 1) into `out`, which holds exactly
/// `buf.len() * dtype.size()` bytes.
pub fn write_bytes(buf: &Buf, out: &mut [u8]) {
    macro_rules! put {
        ($v:expr, $w:expr) => {
            out.chunks_exact_mut($w).zip($v.iter()).for_each(|(o, x)| o.copy_from_slice(&x.to_ne_bytes()))
        };
    }
    match buf {
        Buf::Bool(v) => out.iter_mut().zip(v.iter()).for_each(|(o, b)| *o = *b as u8),
        Buf::F32(v) => put!(v, 4),
        Buf::F64(v) => put!(v, 8),
        Buf::I64(v) => put!(v, 8),
        Buf::I32(v) => put!(v, 4),
        Buf::I16(v) => put!(v, 2),
        Buf::I8(v) => put!(v, 1),
        Buf::U8(v) => put!(v, 1),
    }
}

/// A run's outputs, copied out of its tensors.
fn outputs(o: &crate::interp::RunOutput) -> Outputs {
    Outputs {
        returns: o.returns.iter().map(raw).collect(),
        returns_tuple: o.returns_tuple,
        mutated: o.mutated.iter().map(|(n, t)| (n.clone(), raw(t))).collect(),
    }
}

fn raw(t: &Tensor) -> Raw {
    let c = t.contiguous_copy();
    // The copy's buffer is its own: take it rather than copy it again.
    let buf = std::rc::Rc::try_unwrap(c.buf).map(|b| b.into_inner()).unwrap_or_else(|b| b.borrow().clone());
    Raw { dtype: t.dtype(), shape: t.shape.clone(), buf }
}

/// The parsed, typed and optimized function with its plan (ours) and the baselines' figures.
struct Prepared {
    module: Module,
    func: String,
    scalars: BTreeMap<String, ScalarArg>,
    result: ProgramResult,
    plans: Vec<(&'static str, Plan, crate::lower::estimate::Estimate)>,
    indents: Vec<(u32, u32, u32)>,
}

fn prepare(
    src: &Source,
    params: &[(String, Param)],
    rules: &[crate::rewrite::rules::RuleDef],
) -> Result<Prepared, Diagnostic> {
    let limit = Duration::from_secs_f64(crate::limits::OPTIMIZE_TIME_LIMIT_S);
    crate::limits::with_deadline(Some(limit), || {
        let (module, scalars) = typed_module(src, params)?;
        let rewrites = crate::rewrite::rules::to_rewrites(rules)?;
        // The Python API's rules come from `usable`, which keeps `@real` rules only under its `fast_math`.
        let session = Session::new(&rewrites, crate::cost::Profile::shipped_c(), crate::backend::Target::C)
            .fast_math(rules.iter().any(|d| d.real));
        let result = session.optimize(&module, &src.func, &scalars).map_err(|d| d.in_file(&src.path))?;
        let plans = crate::explain::plans(&result, &session).map_err(|e| Diagnostic::new(e).in_file(&src.path))?;
        Ok(Prepared { module, func: src.func.clone(), scalars, result, plans, indents: src.indents.clone() })
    })
    .map_err(|d| reindent(d, &src.indents))
}

/// The tensor parameters of a plan, in signature order: name, dtype, shape.
pub type Inputs = Vec<(String, DType, Vec<usize>)>;

enum Request {
    Run(BTreeMap<String, Input>),
    Locate(BTreeMap<String, Input>, Diagnostic),
    /// A run on the reference interpreter: the plan, specialized to one arm of an `if`, met the other.
    Reference(BTreeMap<String, Input>),
}

enum Reply {
    Ready(Result<(Inputs, Vec<String>, String, String), Diagnostic>),
    Ran(Result<Outputs, Diagnostic>, bool),
    Located(Diagnostic),
}

/// A compiled function: a worker thread that owns the plan and its loaded kernels.
pub struct Compiled {
    tx: Sender<Request>,
    rx: Receiver<Reply>,
    inputs: Inputs,
    mutated: Vec<String>,
    explanation: String,
    record: String,
}

impl Compiled {
    /// Parses, types, optimizes and plans the function; with `target`, also compiles and loads its kernels there.
    pub fn new(
        src: Source,
        params: Vec<(String, Param)>,
        rules: Vec<crate::rewrite::rules::RuleDef>,
        target: Option<Target>,
    ) -> Result<Compiled, Diagnostic> {
        let (tx, worker_rx) = channel::<Request>();
        let (worker_tx, rx) = channel::<Reply>();
        std::thread::Builder::new()
            .name("funcfuse".into())
            .stack_size(crate::limits::STACK_BYTES)
            .spawn(move || worker(src, params, rules, target, worker_rx, worker_tx))
            .map_err(|e| Diagnostic::new(format!("cannot start funcfuse's worker thread: {e}")))?;
        match rx.recv() {
            Ok(Reply::Ready(Ok((inputs, mutated, explanation, record)))) => {
                Ok(Compiled { tx, rx, inputs, mutated, explanation, record })
            }
            Ok(Reply::Ready(Err(d))) => Err(d),
            _ => Err(Diagnostic::new("funcfuse's worker thread stopped while compiling")),
        }
    }

    /// The plan's tensor parameters (name, dtype, shape), in signature order.
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// The tensor parameters the function writes in place (their final values are in [`Outputs::mutated`]).
    pub fn mutated(&self) -> &[String] {
        &self.mutated
    }

    /// What `funcfuse explain` prints for this function.
    pub fn explanation(&self) -> &str {
        &self.explanation
    }

    /// The explanation as data (JSON): the record `funcfuse optimize` writes in report.json for this function.
    pub fn record(&self) -> &str {
        &self.record
    }

    /// Runs the plan on one input per tensor parameter, by name. `pristine` gives the inputs again when a run
    /// fails without a location: the reference interpreter reruns the program on them to locate the error.
    /// Borrowed inputs are read in place until this returns, and never written: a parameter the program writes is
    /// in [`Outputs::mutated`], for the caller to write back.
    pub fn run(
        &self,
        inputs: BTreeMap<String, Input>,
        pristine: impl FnOnce() -> Result<BTreeMap<String, Input>, String>,
    ) -> Result<Outputs, Diagnostic> {
        let gone = || Diagnostic::new("funcfuse's worker thread stopped");
        self.tx.send(Request::Run(inputs)).map_err(|_| gone())?;
        match self.rx.recv() {
            Ok(Reply::Ran(Ok(out), _)) => Ok(out),
            Ok(Reply::Ran(Err(d), true)) => Err(d),
            Ok(Reply::Ran(Err(d), false)) if d.message.contains(crate::ir::FALLBACK) => {
                let again = pristine().map_err(Diagnostic::new)?;
                self.tx.send(Request::Reference(again)).map_err(|_| gone())?;
                match self.rx.recv() {
                    Ok(Reply::Ran(r, _)) => r,
                    _ => Err(gone()),
                }
            }
            Ok(Reply::Ran(Err(d), false)) => {
                let again = pristine().map_err(Diagnostic::new)?;
                self.tx.send(Request::Locate(again, d)).map_err(|_| gone())?;
                match self.rx.recv() {
                    Ok(Reply::Located(d)) => Err(d),
                    _ => Err(gone()),
                }
            }
            _ => Err(gone()),
        }
    }
}

fn tensors(inputs: BTreeMap<String, Input>, shapes: &Inputs) -> Result<BTreeMap<String, Tensor>, Diagnostic> {
    let mut out = BTreeMap::new();
    for (name, input) in inputs {
        let (_, dtype, shape) = shapes
            .iter()
            .find(|(n, _, _)| *n == name)
            .ok_or_else(|| Diagnostic::new(format!("no tensor parameter `{name}`")))?;
        if input.dtype_len() != (*dtype, crate::tensor::numel(shape)) {
            return Err(Diagnostic::new(format!("input `{name}` does not match {}", dtype.annotation())));
        }
        out.insert(name, Tensor::from_buf(input.into_buf(), shape.clone()));
    }
    Ok(out)
}

/// Ends every borrow of the caller's memory before a run returns: an input buffer that something still holds
/// (nothing should; this makes sure) gets its own copy of the elements.
fn end_borrows(ts: BTreeMap<String, Tensor>) {
    for t in ts.into_values() {
        if std::rc::Rc::strong_count(&t.buf) > 1 {
            t.buf.borrow_mut().make_owned();
        }
    }
}

fn worker(
    src: Source,
    params: Vec<(String, Param)>,
    rules: Vec<crate::rewrite::rules::RuleDef>,
    target: Option<Target>,
    rx: Receiver<Request>,
    tx: Sender<Reply>,
) {
    let ready = prepare(&src, &params, &rules).and_then(|p| {
        let loaded = match target {
            Some(t) => Some(Loaded::new(&p.plans[2].1, t).map_err(|e| Diagnostic::new(e).in_file(&src.path))?),
            None => None,
        };
        Ok((p, loaded))
    });
    let (p, mut loaded) = match ready {
        Ok(x) => x,
        Err(d) => {
            let _ = tx.send(Reply::Ready(Err(d)));
            return;
        }
    };
    let which = "the shipped CPU profile";
    let label = format!("{}::{}", src.path, src.func);
    let text = crate::explain::text(&label, &p.result, &p.plans, which);
    let record = crate::explain::record(&label, &p.result, &p.plans).to_string();
    let inputs = p.result.functional.inputs.clone();
    let mutated = (p.result.functional.outputs.iter())
        .filter_map(|o| match o {
            crate::functionalize::Output::Mutated(n) => Some(n.clone()),
            crate::functionalize::Output::Return(_) => None,
        })
        .collect();
    if tx.send(Reply::Ready(Ok((inputs.clone(), mutated, text, record)))).is_err() {
        return;
    }
    let mut f = p.result.functional.clone();
    f.term = p.result.optimized.term.clone();
    let plan = &p.plans[2].1;
    let limit = Duration::from_secs_f64(crate::limits::RUN_TIME_LIMIT_S);
    while let Ok(req) = rx.recv() {
        let reply = match req {
            Request::Run(bufs) => match tensors(bufs, &inputs) {
                Err(d) => Reply::Ran(Err(d), true),
                Ok(ts) => {
                    let r = crate::limits::with_deadline(Some(limit), || {
                        let Some(dev) = loaded.as_mut() else {
                            return Err(Diagnostic::new("compiled without a backend: nothing to run"));
                        };
                        crate::functionalize::run_with(&f, &ts, |_, ts| dev.run(plan, ts).map(|(t, _)| t))
                    });
                    // The outputs are copied out (`raw`) and dropped before the borrows end.
                    let reply = match r {
                        Ok(o) => Reply::Ran(Ok(outputs(&o)), true),
                        Err(d) => {
                            let located = d.span.is_some();
                            let d = d.in_file(&src.path);
                            Reply::Ran(Err(if located { reindent(d, &p.indents) } else { d }), located)
                        }
                    };
                    end_borrows(ts);
                    reply
                }
            },
            Request::Reference(bufs) => match tensors(bufs, &inputs) {
                Err(d) => Reply::Ran(Err(d), true),
                Ok(ts) => {
                    // The reference writes parameters in place: it gets its own buffers.
                    let copies = ts.iter().map(|(k, t)| (k.clone(), t.contiguous_copy())).collect();
                    end_borrows(ts);
                    let r = crate::limits::with_deadline(Some(limit), || {
                        crate::interp::run_program(&p.module, &p.func, &copies, &p.scalars)
                    });
                    Reply::Ran(r.map(|o| outputs(&o)).map_err(|d| reindent(d.in_file(&src.path), &p.indents)), true)
                }
            },
            Request::Locate(bufs, d) => Reply::Located(match tensors(bufs, &inputs) {
                Ok(ts) => {
                    let d = crate::limits::with_deadline(Some(limit), || {
                        crate::interp::locate(&p.module, &p.func, &ts, &p.scalars, d)
                    });
                    end_borrows(ts);
                    reindent(d, &p.indents)
                }
                Err(e) => e,
            }),
        };
        if tx.send(reply).is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src(text: &str, indents: Vec<(u32, u32, u32)>) -> Source {
        Source { path: "t.py".into(), text: text.into(), func: "f".into(), indents }
    }

    #[test]
    fn buffers_are_written_as_native_bytes() {
        let cases: [(Buf, Vec<u8>); 3] = [
            (Buf::F32(vec![1.5, -0.0].into()), [1.5f32.to_ne_bytes(), (-0.0f32).to_ne_bytes()].concat()),
            (Buf::I64(vec![i64::MIN].into()), i64::MIN.to_ne_bytes().to_vec()),
            (Buf::Bool(vec![true, false, true].into()), vec![1, 0, 1]),
        ];
        for (b, want) in cases {
            let mut bytes = vec![0u8; b.len() * b.dtype().size()];
            write_bytes(&b, &mut bytes);
            assert_eq!(bytes, want, "{b:?}");
        }
    }

    /// Compiles `text` (a function `f`) for `params` and runs it the way [`Compiled::run`]'s worker does, on
    /// inputs borrowed from `caller`; returns whether the plan shares its inputs with its kernels, whether each
    /// input's buffer was still borrowed after the run (never copied on write), and the outputs.
    fn run_in_place(text: &str, params: Vec<(String, Param)>, caller: &[(&str, &[f32])]) -> (bool, Vec<bool>, Outputs) {
        let p = prepare(&src(text, vec![]), &params, &[]).unwrap();
        let plan = &p.plans[2].1;
        let shares = crate::lower::exec::shares_inputs(plan);
        let mut dev = Loaded::new(plan, Target::C).unwrap();
        let mut f = p.result.functional.clone();
        f.term = p.result.optimized.term.clone();
        let inputs = caller
            .iter()
            // SAFETY: `caller`'s vectors outlive the run, and nothing writes them while it runs.
            .map(|(n, v)| (n.to_string(), unsafe { Input::borrowed(DType::F32, v.as_ptr().cast(), v.len()) }.unwrap()))
            .collect();
        let ts = tensors(inputs, &f.inputs).unwrap();
        let o = crate::functionalize::run_with(&f, &ts, |_, ts| dev.run(plan, ts).map(|(t, _)| t)).unwrap();
        let in_place = ts.values().map(|t| t.buf.borrow().is_borrowed()).collect();
        let out = Outputs {
            returns: o.returns.iter().map(raw).collect(),
            returns_tuple: o.returns_tuple,
            mutated: o.mutated.iter().map(|(n, t)| (n.clone(), raw(t))).collect(),
        };
        drop(o);
        end_borrows(ts);
        (shares, in_place, out)
    }

    fn params2() -> Vec<(String, Param)> {
        vec![
            ("x".to_string(), Param::Tensor(DType::F32, vec![2, 3])),
            ("y".to_string(), Param::Tensor(DType::F32, vec![2, 3])),
        ]
    }

    #[test]
    fn kernels_read_inputs_in_place_and_never_write_the_callers_memory() {
        let x = ("x".to_string(), Param::Tensor(DType::F32, vec![2, 3]));
        let y = ("y".to_string(), Param::Tensor(DType::F32, vec![2, 3]));
        let (xs, ys) = (vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0], vec![0.5f32; 6]);
        // A plan that only reads its inputs shares them with its kernels: the C device hands a kernel the input
        // tensor itself (`CDevice::share`), whose store is still the borrowed one, so the kernels read the caller's
        // memory and nothing is copied.
        let text = "def f(x, y):\n    return (x * y + 1.0).sum(1)\n";
        let (shares, in_place, out) = run_in_place(text, vec![x.clone(), y.clone()], &[("x", &xs), ("y", &ys)]);
        assert!(shares);
        assert_eq!(in_place, vec![true, true]);
        assert_eq!(out.returns[0].buf, Buf::F32(vec![6.0, 10.5].into()));
        // A plan that writes `y` in place copies its inputs once (`Device::upload`); the caller's `y` is left
        // alone and its new value is an output, for the caller to write back.
        let text = "def f(x, y):\n    y[1:] += x[:1] * 2.0\n    return x.sum()\n";
        let (shares, _, out) = run_in_place(text, vec![x, y], &[("x", &xs), ("y", &ys)]);
        assert!(!shares);
        assert_eq!(ys, vec![0.5; 6], "the caller's memory is never written");
        assert_eq!(out.returns[0].buf, Buf::F32(vec![21.0].into()));
        assert_eq!(out.mutated[0].1.buf, Buf::F32(vec![0.5, 0.5, 0.5, 2.5, 4.5, 6.5].into()));
        // Whatever a plan says, a kernel never writes a buffer read in place: its launch is refused. (Kernel 0
        // writes 2 elements; the borrowed buffer holds 6, so even without the check nothing would overrun.)
        let p = prepare(&src("def f(x, y):\n    return (x * y + 1.0).sum(1)\n", vec![]), &params2(), &[]).unwrap();
        let Ok(Loaded::C(mut dev)) = Loaded::new(&p.plans[2].1, Target::C) else { panic!("a C device") };
        let mut out = vec![0.0f32; 6];
        // SAFETY: `out` outlives the tensor, and the launch is refused before any kernel runs.
        let borrowed = unsafe { Input::borrowed(DType::F32, out.as_mut_ptr().cast(), 6) }.unwrap();
        let t = std::rc::Rc::new(Tensor::from_buf(borrowed.into_buf(), vec![6]));
        let x = std::rc::Rc::new(Tensor::from_buf(Buf::F32(xs.clone().into()), vec![2, 3]));
        let e = crate::lower::exec::Device::launch(&mut dev, 0, &[&t, &x, &x], &[]).unwrap_err();
        assert!(e.contains("read in place"), "{e}");
        assert_eq!(out, vec![0.0; 6]);
        // Bool elements are never read in place (a byte other than 0 and 1 is not a bool).
        // SAFETY: not read: refused.
        assert!(unsafe { Input::borrowed(DType::Bool, [1u8].as_ptr(), 1) }.is_err());
    }

    #[test]
    fn parameters_are_typed_by_value_and_checked_by_name() {
        let s = src("def f(x, n):\n    return x * n\n", vec![]);
        let x = ("x".to_string(), Param::Tensor(DType::F32, vec![2, 3]));
        let n = ("n".to_string(), Param::Scalar(ScalarArg::Int(4)));
        let (m, scalars) = typed_module(&s, &[x.clone(), n.clone()]).unwrap();
        let f = m.function("f").unwrap();
        assert_eq!(f.params[0].ann, Some(TypeAnn::Tensor { dtype: DType::F32, shape: vec![2, 3] }));
        assert_eq!(f.params[1].ann, Some(TypeAnn::Int));
        assert_eq!(scalars.get("n"), Some(&ScalarArg::Int(4)));
        let e = typed_module(&s, &[x.clone()]).unwrap_err();
        assert_eq!(e.to_string(), "t.py:1:10: no value given for parameter `n`");
        let extra = ("z".to_string(), Param::Scalar(ScalarArg::Bool(true)));
        assert!(typed_module(&s, &[x, n, extra]).unwrap_err().to_string().contains("no parameter `z`"));
    }

    #[test]
    fn columns_move_back_by_the_indent_of_their_line() {
        let d = Diagnostic::new("m").at(crate::diag::Span { line: 5, col: 3 }).in_file("t.py");
        assert_eq!(reindent(d.clone(), &[(1, 2, 8), (4, 6, 4)]).to_string(), "t.py:5:7: m");
        assert_eq!(reindent(d, &[(1, 2, 8)]).to_string(), "t.py:5:3: m");
    }

    #[test]
    fn a_compiled_function_runs_and_reports_its_writes() {
        let text = "\n\n    def f(x, y, k):\n        y[1:] += x[:-1] * k\n        return torch.relu(y).sum(0)\n";
        let s = Source { text: text.replace("\n    ", "\n"), ..src("", vec![(3, 5, 4)]) };
        let params = vec![
            ("x".to_string(), Param::Tensor(DType::F32, vec![3, 2])),
            ("y".to_string(), Param::Tensor(DType::F32, vec![3, 2])),
            ("k".to_string(), Param::Scalar(ScalarArg::Float(2.0))),
        ];
        let c = Compiled::new(s, params, Vec::new(), Some(Target::C)).unwrap();
        assert!(c.explanation().starts_with("t.py::f\n"), "{}", c.explanation());
        let record: serde_json::Value = serde_json::from_str(c.record()).unwrap();
        assert_eq!(record["program"], "t.py::f");
        assert!(record["plans"]["ours"]["kernels"].as_f64().unwrap() >= 1.0, "{record}");
        assert_eq!(c.inputs().len(), 2);
        let inputs = BTreeMap::from([
            ("x".to_string(), Buf::F32(vec![1.0; 6].into()).into()),
            ("y".to_string(), Buf::F32(vec![0.0, -5.0, 0.0, 0.0, 0.0, 0.0].into()).into()),
        ]);
        let out = c.run(inputs, || Err("not needed".into())).unwrap();
        assert_eq!(out.returns[0].buf, Buf::F32(vec![4.0, 4.0].into()));
        assert!(!out.returns_tuple);
        assert_eq!(out.mutated.len(), 1);
        assert_eq!(out.mutated[0].1.buf, Buf::F32(vec![0.0, -5.0, 2.0, 2.0, 2.0, 2.0].into()));
        // An unsupported construct is refused with the file's line and column (the indent added back).
        let bad = Source { text: "\n\ndef f(x):\n    return x.frobnicate_()\n".into(), ..src("", vec![(3, 4, 4)]) };
        let e = Compiled::new(bad, vec![("x".into(), Param::Tensor(DType::F32, vec![2]))], Vec::new(), None);
        let msg = e.err().expect("refused").to_string();
        assert!(msg.starts_with("t.py:4:16: "), "{msg}");
    }
}
