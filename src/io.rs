//! File edges: `.npy` reading and writing (through `npyz`) and the seeded input generator.
//!
//! The input generator is specified exactly so that other tools (the golden script in `scripts/`) can reproduce it:
//! with `mix` the SplitMix64 finalizer and `G = 0x9E3779B97F4A7C15`, all arithmetic modulo 2^64,
//! `key = mix(seed * G + p + 1)` for the `p`-th tensor parameter (0-based, signature order) and
//! `u_i = mix(key + (i + 1) * G)` for its `i`-th element in row-major order. Floats are `(u_i >> 40) / 2^23 - 1`
//! (in [-1, 1), exact in f32), integers `(u_i >> 32) % 10`, bools `u_i >> 63`.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use crate::diag::Diagnostic;
use npyz::WriterBuilder;

use crate::tensor::{Buf, DType, Tensor};

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seeded input for the `param_index`-th tensor parameter.
pub fn random_input(seed: u64, param_index: usize, dtype: DType, shape: &[usize]) -> Result<Tensor, Diagnostic> {
    let key = mix(seed.wrapping_mul(GOLDEN).wrapping_add(param_index as u64 + 1));
    let n: usize = shape.iter().product();
    let u = (0..n).map(|i| mix(key.wrapping_add((i as u64 + 1).wrapping_mul(GOLDEN))));
    let float = |x: u64| (x >> 40) as f64 / (1u64 << 23) as f64 - 1.0;
    let buf = match dtype {
        DType::F32 => Buf::F32(u.map(|x| float(x) as f32).collect()),
        DType::F64 => Buf::F64(u.map(float).collect()),
        DType::I64 => Buf::I64(u.map(|x| ((x >> 32) % 10) as i64).collect()),
        DType::I32 => Buf::I32(u.map(|x| ((x >> 32) % 10) as i32).collect()),
        DType::I16 => Buf::I16(u.map(|x| ((x >> 32) % 10) as i16).collect()),
        DType::I8 => Buf::I8(u.map(|x| ((x >> 32) % 10) as i8).collect()),
        DType::U8 => Buf::U8(u.map(|x| ((x >> 32) % 10) as u8).collect()),
        DType::Bool => Buf::Bool(u.map(|x| (x >> 63) == 1).collect()),
        DType::F16 | DType::BF16 => {
            return Err(Diagnostic::new(format!("dtype {} is not supported yet", dtype.annotation())))
        }
    };
    Ok(Tensor::from_buf(buf, shape.to_vec()))
}

/// `Err` with the reason unless `path` is a regular file (or a link to one): a FIFO, a device or a directory given as
/// an input file would block or never end.
pub fn regular_file(path: &Path) -> Result<(), String> {
    let m = std::fs::metadata(path).map_err(|e| format!("cannot open: {e}"))?;
    if m.is_file() {
        Ok(())
    } else if m.is_dir() {
        Err("is a directory, not a file".into())
    } else {
        Err("not a regular file (a FIFO, socket or device): only regular files are read".into())
    }
}

/// Reads a regular file as text (see [`regular_file`]).
pub fn read_text(path: &Path) -> Result<String, String> {
    regular_file(path)?;
    std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))
}

/// Reads a `.npy` file (f32, f64, i64, i32 or bool, C order, either byte order).
pub fn read_npy(path: &Path) -> Result<Tensor, Diagnostic> {
    let shown = path.display().to_string();
    let fail = |m: String| Diagnostic::new(m).in_file(&shown);
    regular_file(path).map_err(fail)?;
    let file = File::open(path).map_err(|e| fail(format!("cannot open: {e}")))?;
    let npy = npyz::NpyFile::new(BufReader::new(file)).map_err(|e| fail(format!("not a valid .npy file: {e}")))?;
    if npy.order() != npyz::Order::C {
        return Err(fail("Fortran-ordered arrays are not supported; save with C order".into()));
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let descr = match npy.dtype() {
        npyz::DType::Plain(ts) => ts.to_string(),
        other => return Err(fail(format!("unsupported .npy dtype {other:?}"))),
    };
    let code = descr.trim_start_matches(['<', '>', '|', '=']);
    let bad = |e: std::io::Error| fail(format!("cannot read data: {e}"));
    let buf = match code {
        "f4" => Buf::F32(npy.into_vec::<f32>().map_err(bad)?.into()),
        "f8" => Buf::F64(npy.into_vec::<f64>().map_err(bad)?.into()),
        "i8" => Buf::I64(npy.into_vec::<i64>().map_err(bad)?.into()),
        "i4" => Buf::I32(npy.into_vec::<i32>().map_err(bad)?.into()),
        "i2" => Buf::I16(npy.into_vec::<i16>().map_err(bad)?.into()),
        "i1" => Buf::I8(npy.into_vec::<i8>().map_err(bad)?.into()),
        "u1" => Buf::U8(npy.into_vec::<u8>().map_err(bad)?.into()),
        "b1" => Buf::Bool(npy.into_vec::<bool>().map_err(bad)?.into()),
        other => {
            return Err(fail(format!("unsupported .npy dtype `{other}` (supported: f4, f8, i8, i4, i2, i1, u1, b1)")))
        }
    };
    if buf.len() != shape.iter().product::<usize>() {
        return Err(fail("truncated .npy file".into()));
    }
    Ok(Tensor::from_buf(buf, shape))
}

/// Writes a tensor as a C-ordered little-endian `.npy` file.
pub fn write_npy(path: &Path, t: &Tensor) -> Result<(), Diagnostic> {
    let shown = path.display().to_string();
    let fail = |e: std::io::Error| Diagnostic::new(format!("cannot write: {e}")).in_file(&shown);
    let file = BufWriter::new(File::create(path).map_err(fail)?);
    let shape: Vec<u64> = t.shape.iter().map(|&d| d as u64).collect();
    let c = t.contiguous_copy();
    let b = c.buf.borrow();
    macro_rules! put {
        ($v:expr, $ty:ty) => {{
            let mut w =
                npyz::WriteOptions::<$ty>::new().default_dtype().shape(&shape).writer(file).begin_nd().map_err(fail)?;
            w.extend($v.iter().copied()).map_err(fail)?;
            w.finish().map_err(fail)?;
        }};
    }
    match &*b {
        Buf::F32(v) => put!(v, f32),
        Buf::F64(v) => put!(v, f64),
        Buf::I64(v) => put!(v, i64),
        Buf::I32(v) => put!(v, i32),
        Buf::I16(v) => put!(v, i16),
        Buf::I8(v) => put!(v, i8),
        Buf::U8(v) => put!(v, u8),
        Buf::Bool(v) => put!(v, bool),
    }
    Ok(())
}
