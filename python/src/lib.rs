//! `funcfuse._native`: the Rust side of the Python package. It holds no policy: `funcfuse/__init__.py` binds
//! arguments, checks shapes and dtypes, converts arrays and falls back; this module compiles a function given as
//! source ([`funcfuse::embed`]) and runs its plan on byte buffers.

use std::collections::BTreeMap;
use std::sync::Mutex;

use funcfuse::backend::Target;
use funcfuse::embed::{Compiled, Param, Raw, Source};
use funcfuse::interp::ScalarArg;
use funcfuse::tensor::DType;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes};

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
    explanation: String,
    record: String,
}

#[pymethods]
impl Plan {
    /// `params`: one `(name, kind, shape, value)` per parameter; kind is a tensor dtype (`f32`, `f64`, `i64`, `i32`,
    /// `bool`, with its shape) or `int`, `float`, `pybool` (with its value). `rules`: user rule files or folders,
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
        let explanation = compiled.explanation().to_string();
        let record = compiled.record().to_string();
        Ok(Plan { inner: Mutex::new(compiled), inputs, explanation, record })
    }

    /// The tensor parameters, in signature order: (name, dtype, shape).
    #[getter]
    fn inputs(&self) -> Vec<(String, &'static str, Vec<usize>)> {
        self.inputs.clone()
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

    /// Runs the plan on one `bytes` per tensor parameter (row-major, native byte order, in `inputs` order).
    /// Returns `(returns, returns_tuple, mutated)`: returns as `(dtype, shape, bytearray)`, mutated as
    /// `(name, (dtype, shape, bytearray))`. A failure raises RuntimeError with the program's location.
    #[allow(clippy::type_complexity)]
    fn run<'py>(
        &self,
        py: Python<'py>,
        data: Vec<Bound<'py, PyBytes>>,
    ) -> PyResult<(Vec<Out<'py>>, bool, Vec<(String, Out<'py>)>)> {
        if data.len() != self.inputs.len() {
            return Err(PyValueError::new_err(format!(
                "{} tensors given, the plan takes {}",
                data.len(),
                self.inputs.len()
            )));
        }
        let bytes: Vec<&[u8]> = data.iter().map(|b| b.as_bytes()).collect();
        let bufs = |bytes: &[&[u8]]| -> Result<BTreeMap<String, funcfuse::tensor::Buf>, String> {
            let mut m = BTreeMap::new();
            for ((name, d, shape), b) in self.inputs.iter().zip(bytes) {
                let dtype = DType::from_annotation(d).ok_or("unknown dtype")?;
                let buf = funcfuse::embed::buf_from_bytes(dtype, funcfuse::tensor::numel(shape), b)
                    .map_err(|e| format!("tensor `{name}`: {e}"))?;
                m.insert(name.clone(), buf);
            }
            Ok(m)
        };
        let first = bufs(&bytes).map_err(PyValueError::new_err)?;
        let r = py.detach(|| {
            let inner = self.inner.lock().map_err(|_| "a run of this plan panicked before".to_string())?;
            inner.run(first, || bufs(&bytes)).map_err(|d| d.to_string())
        });
        let o = r.map_err(PyRuntimeError::new_err)?;
        let returns = o.returns.iter().map(|r| out(py, r)).collect::<PyResult<Vec<_>>>()?;
        let mutated = o.mutated.iter().map(|(n, r)| Ok((n.clone(), out(py, r)?))).collect::<PyResult<Vec<_>>>()?;
        Ok((returns, o.returns_tuple, mutated))
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Plan>()?;
    m.add("Unsupported", m.py().get_type::<Unsupported>())?;
    Ok(())
}
