//! Constant tensors too large to spell as literals: the anchors and priors that detection code builds in Python
//! loops (`torch.tensor(priors)` of 8732 x 4 numbers) and the tables LLM code precomputes.
//!
//! A term reads one as an input, `(input %__const_HASH)`, whose name is a digest of its dtype, shape and values; the
//! data lives in this process-wide table. Everything that binds or types inputs (the checker, the functional
//! interpreter, the e-graph analysis, the plan executor) looks a name it was not given up here, so such a constant
//! travels through rewriting, extraction and lowering as a buffer that kernels read, never as thousands of nodes.
//!
//! Invariant: a name is a function of the data alone (the same constant gets the same name in every run, so plans
//! and kernels stay byte-identical), and once registered it never changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use crate::tensor::{DType, Scalar, TResult, Tensor};

/// The prefix of every constant's input name; no program parameter is spelled so (a dunder prefix).
pub const PREFIX: &str = "__const_";

struct Data {
    dtype: DType,
    shape: Vec<usize>,
    values: Vec<Scalar>,
}

fn table() -> &'static Mutex<HashMap<String, Arc<Data>>> {
    static TABLE: OnceLock<Mutex<HashMap<String, Arc<Data>>>> = OnceLock::new();
    TABLE.get_or_init(Default::default)
}

/// FNV-1a over 64 bits, fed the dtype, the shape and every value's bits: stable across runs and machines.
struct Digest(u64);

impl Digest {
    fn feed(&mut self, x: u64) {
        for b in x.to_le_bytes() {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

fn digest(dtype: DType, shape: &[usize], values: &[Scalar], seed: u64) -> u64 {
    let mut d = Digest(0xcbf2_9ce4_8422_2325 ^ seed);
    for b in dtype.name().bytes() {
        d.feed(u64::from(b));
    }
    d.feed(shape.len() as u64);
    for &s in shape {
        d.feed(s as u64);
    }
    for v in values {
        d.feed(match *v {
            Scalar::B(b) => u64::from(b),
            Scalar::I(i) => i as u64,
            Scalar::F(f) => f.to_bits(),
        });
    }
    d.0
}

/// Registers a constant of `dtype` and `shape` (values converted to `dtype`, in row-major order) and returns its
/// input name.
pub fn register(dtype: DType, shape: &[usize], values: &[Scalar]) -> TResult<String> {
    let t = Tensor::from_scalars(dtype, shape, values)?;
    let values = t.scalars();
    // Two digests with different seeds: 128 bits, so two constants of one program never share a name by chance.
    let name = format!(
        "{PREFIX}{:016x}{:016x}",
        digest(dtype, shape, &values, 0),
        digest(dtype, shape, &values, 0x9e37_79b9_7f4a_7c15)
    );
    let mut table = table().lock().unwrap_or_else(|e| e.into_inner());
    table.entry(name.clone()).or_insert_with(|| Arc::new(Data { dtype, shape: shape.to_vec(), values }));
    Ok(name)
}

fn get(name: &str) -> Option<Arc<Data>> {
    if !name.starts_with(PREFIX) {
        return None;
    }
    table().lock().unwrap_or_else(|e| e.into_inner()).get(name).cloned()
}

/// The dtype and shape of the registered constant `name`.
pub fn type_of(name: &str) -> Option<(DType, Vec<usize>)> {
    get(name).map(|d| (d.dtype, d.shape.clone()))
}

/// A fresh tensor holding the registered constant `name` (the caller may write into it).
pub fn tensor(name: &str) -> Option<Tensor> {
    let d = get(name)?;
    Tensor::from_scalars(d.dtype, &d.shape, &d.values).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_data_gets_one_name_and_different_data_another() {
        let a = register(DType::F32, &[2, 2], &[Scalar::F(1.0), Scalar::I(2), Scalar::F(3.0), Scalar::F(4.0)]).unwrap();
        let b =
            register(DType::F32, &[2, 2], &[Scalar::F(1.0), Scalar::F(2.0), Scalar::F(3.0), Scalar::F(4.0)]).unwrap();
        let c = register(DType::F32, &[4], &[Scalar::F(1.0), Scalar::F(2.0), Scalar::F(3.0), Scalar::F(4.0)]).unwrap();
        let d =
            register(DType::F64, &[2, 2], &[Scalar::F(1.0), Scalar::F(2.0), Scalar::F(3.0), Scalar::F(4.0)]).unwrap();
        assert_eq!(a, b, "values are converted to the dtype before the digest");
        assert_ne!(a, c, "the shape is part of the name");
        assert_ne!(a, d, "the dtype is part of the name");
        assert_eq!(type_of(&c), Some((DType::F32, vec![4])));
        let t = tensor(&a).unwrap();
        assert_eq!(t.shape, vec![2, 2]);
        assert_eq!(t.to_f64_vec(), vec![1.0, 2.0, 3.0, 4.0]);
        assert_eq!(type_of("__const_missing"), None);
        assert_eq!(type_of("x"), None);
    }
}
