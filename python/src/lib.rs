//! `funcfuse._native`: the Rust side of the Python package. It holds no policy: `funcfuse/__init__.py` binds
//! arguments, checks shapes and dtypes, converts arrays and falls back; this module compiles a function given as
//! source ([`funcfuse::embed`]) and runs its plan on byte buffers.

use std::collections::BTreeMap;
use std::sync::Mutex;

use funcfuse::backend::Target;
use funcfuse::embed::{Compiled, Input, Param, Raw, Source};
use funcfuse::interp::ScalarArg;
use funcfuse::tensor::{Buf, DType};
use pyo3::buffer::PyBuffer;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyByteArray;

create_exception!(
    _native,
    Unsupported,
    PyException,
    "funcfuse cannot optimize this function (the message says why and where)."
);

fn dtype(name: &str) -> PyResult<DType> {
    DType::from_annotation(name)
        .filter(|d| !matches!(d, DType::F16 | DType::BF16))
        .ok_or_else(|| Unsupported::new_err(format!("tensors of dtype {name} are not supported")))
}

/// A returned or written tensor: (dtype, shape, bytearray of its row-major elements).
type Out<'py> = (&'static str, Vec<usize>, Bound<'py, PyByteArray>);

fn out<'py>(py: Python<'py>, r: &Raw) -> PyResult<Out<'py>> {
    let arr = PyByteArray::new_with(py, r.buf.len() * r.dtype.size(), |b| {
        funcfuse::embed::write_bytes(&r.buf, b);
        Ok(())
    })?;
    Ok((r.dtype.annotation(), r.shape.clone(), arr))
}

/// One function compiled for one signature.
#[pyclass(frozen, module = "funcfuse._native")]
struct Plan {
    inner: Mutex<Compiled>,
    inputs: Vec<(String, &'static str, Vec<usize>)>,
    mutated: Vec<String>,
    explanation: String,
    record: String,
}

#[pymethods]
impl Plan {
    /// `params`: one `(name, kind, shape, value)` per parameter; kind is a tensor dtype (`f32`, `f64`, `i64`,
    /// `i32`, `i16`, `i8`, `u8`, `bool`, with its shape) or `int`, `float`, `pybool` (with its value). `rules`: user rule files or folders,
    /// checked before use. `backend`: `c`, `cuda`, `cuda-emu`, or None to plan without compiling kernels.
    #[new]
    #[pyo3(signature = (path, source, func, indents, params, rules, backend, unchecked_rules=false, fast_math=false))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: String,
        source: String,
        func: String,
        indents: Vec<(u32, u32, u32)>,
        params: Vec<(String, String, Vec<usize>, Bound<'_, PyAny>)>,
        rules: Vec<String>,
        backend: Option<String>,
        unchecked_rules: bool,
        fast_math: bool,
    ) -> PyResult<Plan> {
        let mut typed = Vec::new();
        for (name, kind, shape, value) in params {
            let p = match kind.as_str() {
                "int" => Param::Scalar(ScalarArg::Int(value.extract()?)),
                "float" => Param::Scalar(ScalarArg::Float(value.extract()?)),
                "pybool" => Param::Scalar(ScalarArg::Bool(value.extract()?)),
                d => Param::Tensor(dtype(d)?, shape),
            };
            typed.push((name, p));
        }
        let target = match backend.as_deref() {
            None => None,
            Some("c") => Some(Target::C),
            Some("cuda") => Some(Target::Cuda),
            Some("cuda-emu") => Some(Target::CudaEmu),
            Some(other) => {
                return Err(PyValueError::new_err(format!(
                    "backend {other:?}: expected \"c\", \"cuda\" or \"cuda-emu\""
                )))
            }
        };
        let paths: Vec<std::path::PathBuf> = rules.iter().map(Into::into).collect();
        let defs =
            funcfuse::rewrite::usable::usable(&paths, true, fast_math, unchecked_rules, &mut |m| eprintln!("{m}"))
                .map_err(PyValueError::new_err)?;
        let src = Source { path, text: source, func, indents };
        let compiled = py
            .detach(move || Compiled::new(src, typed, defs, target))
            .map_err(|d| Unsupported::new_err(d.to_string()))?;
        let inputs = compiled.inputs().iter().map(|(n, d, s)| (n.clone(), d.annotation(), s.clone())).collect();
        let mutated = compiled.mutated().to_vec();
        let explanation = compiled.explanation().to_string();
        let record = compiled.record().to_string();
        Ok(Plan { inner: Mutex::new(compiled), inputs, mutated, explanation, record })
    }

    /// The tensor parameters, in signature order: (name, dtype, shape).
    #[getter]
    fn inputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        self.inputs.clone()
    }

    /// The tensor parameters the function writes in place, by name.
    #[getter]
    fn mutated(&self) -> Vec<String> {
        self.mutated.clone()
    }

    /// What `funcfuse explain` prints for this function and signature.
    #[getter]
    fn explanation(&self) -> &str {
        &self.explanation
    }

    /// The explanation as data: JSON text of the function's `report.json` record (rules fired, extraction, plans).
    #[getter]
    fn record(&self) -> &str {
        &self.record
    }

    /// Runs the plan on one array per tensor parameter, in `inputs` order: any object with the buffer protocol
    /// holding that parameter's dtype (native byte order; bool as uint8) and element count. C-contiguous arrays of
    /// every dtype but bool are read in place, without a copy (they must not be written by another thread during
    /// the call); others are copied once. `dests`: for parameters the program writes, the array (same protocol,
    /// writable) its final value is written into once the run has succeeded.
    /// Returns `(returns, returns_tuple, mutated)`: returns as `(dtype, shape, bytearray)`, mutated (the written
    /// parameters `dests` does not name) as `(name, (dtype, shape, bytearray))`. A failure raises RuntimeError with
    /// the program's location.
    #[allow(clippy::type_complexity)]
    #[pyo3(signature = (data, dests=Vec::new()))]
    fn run<'py>(
        &self,
        py: Python<'py>,
        data: Vec<Bound<'py, PyAny>>,
        dests: Vec<(String, Bound<'py, PyAny>)>,
    ) -> PyResult<(Vec<Out<'py>>, bool, Vec<(String, Out<'py>)>)> {
        if data.len() != self.inputs.len() {
            return Err(PyValueError::new_err(format!(
                "{} tensors given, the plan takes {}",
                data.len(),
                self.inputs.len()
            )));
        }
        // The buffers stay exported (their arrays alive and not resizable) until this function returns.
        let views = self
            .inputs
            .iter()
            .zip(&data)
            .map(|((name, d, shape), obj)| View::new(name, d, funcfuse::tensor::numel(shape), obj))
            .collect::<PyResult<Vec<_>>>()?;
        let inputs = |py: Python<'_>| -> PyResult<BTreeMap<String, Input>> {
            let mut m = BTreeMap::new();
            for ((name, _, _), v) in self.inputs.iter().zip(&views) {
                m.insert(name.clone(), v.input(py)?);
            }
            Ok(m)
        };
        let first = inputs(py)?;
        let r = py.detach(|| {
            let inner = self.inner.lock().map_err(|_| "a run of this plan panicked before".to_string())?;
            let again = || Python::attach(|py| inputs(py).map_err(|e| e.to_string()));
            inner.run(first, again).map_err(|d| d.to_string())
        });
        let o = r.map_err(PyRuntimeError::new_err)?;
        let returns = o.returns.iter().map(|r| out(py, r)).collect::<PyResult<Vec<_>>>()?;
        // Every destination is exported and checked before the first write, so a bad one writes nothing.
        let mut mutated = Vec::new();
        let mut writes = Vec::new();
        for (name, r) in &o.mutated {
            match dests.iter().find(|(n, _)| n == name) {
                Some((_, dest)) => {
                    writes.push((View::new(name, r.dtype.annotation(), r.buf.len(), dest)?.writable(name)?, &r.buf))
                }
                None => mutated.push((name.clone(), out(py, r)?)),
            }
        }
        for (view, buf) in writes {
            view.write(py, buf)?;
        }
        Ok((returns, o.returns_tuple, mutated))
    }
}

/// `$e` with `$b` bound to the buffer of whichever element type `$v` holds.
macro_rules! each {
    ($v:expr, $b:ident => $e:expr) => {
        match $v {
            View::F32($b) => $e,
            View::F64($b) => $e,
            View::I32($b) => $e,
            View::I64($b) => $e,
            View::I16($b) => $e,
            View::I8($b) => $e,
            View::U8($b) => $e,
            View::Bool($b) => $e,
        }
    };
}

/// One tensor argument's buffer, exported for the length of a run.
enum View {
    F32(PyBuffer<f32>),
    F64(PyBuffer<f64>),
    I32(PyBuffer<i32>),
    I64(PyBuffer<i64>),
    I16(PyBuffer<i16>),
    I8(PyBuffer<i8>),
    U8(PyBuffer<u8>),
    Bool(PyBuffer<u8>),
}

impl View {
    fn new(name: &str, dtype: &str, n: usize, obj: &Bound<'_, PyAny>) -> PyResult<View> {
        let bad = |e: PyErr| PyValueError::new_err(format!("tensor `{name}` ({dtype}): {e}"));
        let v = match dtype {
            "f32" => View::F32(PyBuffer::get(obj).map_err(bad)?),
            "f64" => View::F64(PyBuffer::get(obj).map_err(bad)?),
            "i32" => View::I32(PyBuffer::get(obj).map_err(bad)?),
            "i64" => View::I64(PyBuffer::get(obj).map_err(bad)?),
            "i16" => View::I16(PyBuffer::get(obj).map_err(bad)?),
            "i8" => View::I8(PyBuffer::get(obj).map_err(bad)?),
            "u8" => View::U8(PyBuffer::get(obj).map_err(bad)?),
            "bool" => View::Bool(PyBuffer::get(obj).map_err(bad)?),
            other => return Err(Unsupported::new_err(format!("tensors of dtype {other} are not supported"))),
        };
        if !v.native_order() {
            return Err(PyValueError::new_err(format!("tensor `{name}`: not in native byte order")));
        }
        let count = v.item_count();
        if count != n {
            return Err(PyValueError::new_err(format!("tensor `{name}`: {count} elements given, the plan takes {n}")));
        }
        Ok(v)
    }

    /// Whether the buffer's format names no byte order or the native one (PyO3 0.30.1's own check of `<` and `>`
    /// is reversed, so it is not relied on).
    fn native_order(&self) -> bool {
        let format = each!(self, b => b.format());
        let native = if cfg!(target_endian = "little") { b'<' } else { b'>' };
        match format.to_bytes().first() {
            Some(b'>' | b'<' | b'!') => format.to_bytes()[0] == native,
            _ => true,
        }
    }

    fn item_count(&self) -> usize {
        each!(self, b => b.item_count())
    }

    /// The elements for a run: read in place where the buffer is C-contiguous, else copied in row-major order.
    fn input(&self, py: Python<'_>) -> PyResult<Input> {
        macro_rules! take {
            ($b:expr, $d:expr, $v:ident) => {
                if $b.is_c_contiguous() {
                    // SAFETY: the buffer is exported (its memory kept alive, its array not resizable) until `run`
                    // returns, which is after the run reading it; PyO3 checked its format, item size and alignment
                    // against the element type. Not enforced: that no other thread writes the array during the
                    // call (the GIL is released; safe Python code can break this, e.g. another funcfuse call writing
                    // the same array back). That is `run`'s documented contract, as `torch.from_numpy`'s sharing is;
                    // a race reads a mix of old and new elements.
                    unsafe { Input::borrowed($d, $b.buf_ptr() as *const u8, $b.item_count()) }
                        .map_err(PyValueError::new_err)?
                } else {
                    Input::Owned(Buf::$v($b.to_vec(py)?.into()))
                }
            };
        }
        Ok(match self {
            View::F32(b) => take!(b, DType::F32, F32),
            View::F64(b) => take!(b, DType::F64, F64),
            View::I32(b) => take!(b, DType::I32, I32),
            View::I64(b) => take!(b, DType::I64, I64),
            View::I16(b) => take!(b, DType::I16, I16),
            View::I8(b) => take!(b, DType::I8, I8),
            View::U8(b) => take!(b, DType::U8, U8),
            // Copied: a byte other than 0 and 1 is not a bool.
            View::Bool(b) => Input::Owned(Buf::Bool(b.to_vec(py)?.into_iter().map(|x| x != 0).collect())),
        })
    }

    fn writable(self, name: &str) -> PyResult<View> {
        let readonly = each!(&self, b => b.readonly());
        if readonly {
            return Err(PyValueError::new_err(format!("parameter `{name}` is written in place but is read-only")));
        }
        Ok(self)
    }

    /// Writes a parameter's final value into the caller's array (row-major into whatever strides it has).
    fn write(&self, py: Python<'_>, buf: &Buf) -> PyResult<()> {
        match (self, buf) {
            (View::F32(d), Buf::F32(v)) => d.copy_from_slice(py, v),
            (View::F64(d), Buf::F64(v)) => d.copy_from_slice(py, v),
            (View::I32(d), Buf::I32(v)) => d.copy_from_slice(py, v),
            (View::I64(d), Buf::I64(v)) => d.copy_from_slice(py, v),
            (View::I16(d), Buf::I16(v)) => d.copy_from_slice(py, v),
            (View::I8(d), Buf::I8(v)) => d.copy_from_slice(py, v),
            (View::U8(d), Buf::U8(v)) => d.copy_from_slice(py, v),
            (View::Bool(d), Buf::Bool(v)) => d.copy_from_slice(py, &v.iter().map(|&b| b as u8).collect::<Vec<u8>>()),
            _ => Err(PyValueError::new_err("a written parameter changed dtype")),
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add("Unsupported", m.py().get_type::<Unsupported>())?;
    Ok(())
}
