//! The tensor runtime: strided storage shared by views, exactly as PyTorch lays it out.
//!
//! A [`Tensor`] is a window (shape, strides, offset) onto a reference-counted buffer. Views share the buffer, so an
//! in-place write through one view is seen through every other view of the same root.
//! Invariant: every element a tensor can address lies inside its buffer; views are checked when they are made.
//! Deliberately absent: f16/bf16 storage (rejected with a clear error), autograd, devices.

mod close;
mod dtype;
pub mod einsum;
pub mod index;
pub mod linalg;
pub mod ops;
pub mod reduce;
mod store;
pub mod ties;
pub mod views;

use std::cell::RefCell;
use std::rc::Rc;

pub use close::compare_close;
pub use dtype::{half_unsupported, legacy_new_check, unsupported_torch_dtype, DType, Kind, Scalar, OTHER_TORCH_DTYPES};
pub use store::Store;

/// An error from a tensor operation: a message in PyTorch's words. The interpreter adds the source location.
pub type TResult<T> = Result<T, String>;

/// The largest tensor the interpreter allocates (2^31 elements), so a huge shape is an error, not an abort.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// Element storage of one root buffer.
#[derive(Clone, Debug, PartialEq)]
pub enum Buf {
    Bool(Store<bool>),
    U8(Store<u8>),
    I8(Store<i8>),
    I16(Store<i16>),
    I32(Store<i32>),
    I64(Store<i64>),
    F32(Store<f32>),
    F64(Store<f64>),
}

/// `$e` on the store of whichever variant `$b` is, bound to `$v` (`each_buf!(b, v => v.len())`); with `=> Buf`,
/// the result is wrapped back into the same variant (`each_buf!(b, v => Buf v[..n].to_vec().into())`).
#[macro_export]
macro_rules! each_buf {
    ($b:expr, $v:ident => Buf $e:expr) => {
        match $b {
            $crate::tensor::Buf::Bool($v) => $crate::tensor::Buf::Bool($e),
            $crate::tensor::Buf::U8($v) => $crate::tensor::Buf::U8($e),
            $crate::tensor::Buf::I8($v) => $crate::tensor::Buf::I8($e),
            $crate::tensor::Buf::I16($v) => $crate::tensor::Buf::I16($e),
            $crate::tensor::Buf::I32($v) => $crate::tensor::Buf::I32($e),
            $crate::tensor::Buf::I64($v) => $crate::tensor::Buf::I64($e),
            $crate::tensor::Buf::F32($v) => $crate::tensor::Buf::F32($e),
            $crate::tensor::Buf::F64($v) => $crate::tensor::Buf::F64($e),
        }
    };
    ($b:expr, $v:ident => $e:expr) => {
        match $b {
            $crate::tensor::Buf::Bool($v) => $e,
            $crate::tensor::Buf::U8($v) => $e,
            $crate::tensor::Buf::I8($v) => $e,
            $crate::tensor::Buf::I16($v) => $e,
            $crate::tensor::Buf::I32($v) => $e,
            $crate::tensor::Buf::I64($v) => $e,
            $crate::tensor::Buf::F32($v) => $e,
            $crate::tensor::Buf::F64($v) => $e,
        }
    };
}

impl Buf {
    pub fn zeros(dtype: DType, n: usize) -> TResult<Buf> {
        if n > MAX_ELEMENTS {
            return Err(format!("a tensor of {n} elements is larger than this interpreter allows ({MAX_ELEMENTS})"));
        }
        Ok(match dtype {
            DType::Bool => Buf::Bool(vec![false; n].into()),
            DType::U8 => Buf::U8(vec![0; n].into()),
            DType::I8 => Buf::I8(vec![0; n].into()),
            DType::I16 => Buf::I16(vec![0; n].into()),
            DType::I32 => Buf::I32(vec![0; n].into()),
            DType::I64 => Buf::I64(vec![0; n].into()),
            DType::F32 => Buf::F32(vec![0.0; n].into()),
            DType::F64 => Buf::F64(vec![0.0; n].into()),
            DType::F16 | DType::BF16 => return Err(dtype::half_unsupported(dtype)),
        })
    }

    pub fn dtype(&self) -> DType {
        match self {
            Buf::Bool(_) => DType::Bool,
            Buf::U8(_) => DType::U8,
            Buf::I8(_) => DType::I8,
            Buf::I16(_) => DType::I16,
            Buf::I32(_) => DType::I32,
            Buf::I64(_) => DType::I64,
            Buf::F32(_) => DType::F32,
            Buf::F64(_) => DType::F64,
        }
    }

    pub fn len(&self) -> usize {
        each_buf!(self, v => v.len())
    }

    /// Ends a borrow of a caller's memory ([`Store::make_owned`]): the elements are copied if still borrowed.
    pub fn make_owned(&mut self) {
        each_buf!(self, v => v.make_owned())
    }

    /// Whether the elements are read in place from a caller's memory ([`Store::borrowed`]).
    pub fn is_borrowed(&self) -> bool {
        each_buf!(self, v => v.is_borrowed())
    }

    /// Sets every element to zero (false).
    pub fn fill_zero(&mut self) {
        match self {
            Buf::Bool(v) => v.fill(false),
            Buf::F32(v) => v.fill(0.0),
            Buf::F64(v) => v.fill(0.0),
            Buf::U8(v) => v.fill(0),
            Buf::I8(v) => v.fill(0),
            Buf::I16(v) => v.fill(0),
            Buf::I32(v) => v.fill(0),
            Buf::I64(v) => v.fill(0),
        }
    }

    /// Copies `n` elements of `src` from `start` to this buffer's beginning (both of one dtype).
    pub fn copy_range_from(&mut self, src: &Buf, start: usize, n: usize) {
        match (self, src) {
            (Buf::Bool(d), Buf::Bool(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::U8(d), Buf::U8(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::I8(d), Buf::I8(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::I16(d), Buf::I16(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::I32(d), Buf::I32(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::I64(d), Buf::I64(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::F32(d), Buf::F32(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            (Buf::F64(d), Buf::F64(s)) => d[..n].copy_from_slice(&s[start..start + n]),
            _ => panic!("copy_range_from between buffers of different dtypes"),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[inline]
    pub fn get(&self, i: usize) -> Scalar {
        match self {
            Buf::Bool(v) => Scalar::B(v[i]),
            Buf::U8(v) => Scalar::I(v[i] as i64),
            Buf::I8(v) => Scalar::I(v[i] as i64),
            Buf::I16(v) => Scalar::I(v[i] as i64),
            Buf::I32(v) => Scalar::I(v[i] as i64),
            Buf::I64(v) => Scalar::I(v[i]),
            Buf::F32(v) => Scalar::F(v[i] as f64),
            Buf::F64(v) => Scalar::F(v[i]),
        }
    }

    /// Stores `s` at `i`, converting it as a C++ static_cast would (truncation toward zero, integer wrap-around).
    #[inline]
    pub fn set(&mut self, i: usize, s: Scalar) {
        match self {
            Buf::Bool(v) => v[i] = s.to_bool(),
            Buf::U8(v) => v[i] = s.to_i32_wrapping() as u8,
            Buf::I8(v) => v[i] = s.to_i32_wrapping() as i8,
            Buf::I16(v) => v[i] = s.to_i32_wrapping() as i16,
            Buf::I32(v) => v[i] = s.to_i32_wrapping(),
            Buf::I64(v) => v[i] = s.to_i64_trunc(),
            Buf::F32(v) => v[i] = s.to_f64() as f32,
            Buf::F64(v) => v[i] = s.to_f64(),
        }
    }
}

/// A strided view of a shared buffer.
#[derive(Clone, Debug)]
pub struct Tensor {
    pub buf: Rc<RefCell<Buf>>,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub offset: usize,
    dtype: DType,
}

/// Row-major (C order) strides for a shape.
pub fn contiguous_strides(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![0isize; shape.len()];
    let mut acc = 1isize;
    for i in (0..shape.len()).rev() {
        strides[i] = acc;
        acc *= shape[i].max(1) as isize;
    }
    strides
}

pub fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// `[3, 4]` as PyTorch prints sizes in messages.
pub fn fmt_shape(shape: &[usize]) -> String {
    let parts: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    format!("[{}]", parts.join(", "))
}

impl Tensor {
    /// A fresh contiguous tensor from a buffer that holds exactly `numel(shape)` elements.
    pub fn from_buf(buf: Buf, shape: Vec<usize>) -> Tensor {
        debug_assert_eq!(buf.len(), numel(&shape));
        let dtype = buf.dtype();
        Tensor { strides: contiguous_strides(&shape), shape, offset: 0, buf: Rc::new(RefCell::new(buf)), dtype }
    }

    pub fn zeros(dtype: DType, shape: &[usize]) -> TResult<Tensor> {
        Ok(Tensor::from_buf(Buf::zeros(dtype, numel(shape))?, shape.to_vec()))
    }

    pub fn full(dtype: DType, shape: &[usize], value: Scalar) -> TResult<Tensor> {
        let t = Tensor::zeros(dtype, shape)?;
        {
            let mut b = t.buf.borrow_mut();
            for i in 0..b.len() {
                b.set(i, value);
            }
        }
        Ok(t)
    }

    pub fn scalar(dtype: DType, value: Scalar) -> TResult<Tensor> {
        Tensor::full(dtype, &[], value)
    }

    /// A fresh contiguous tensor with the given elements in row-major order.
    pub fn from_scalars(dtype: DType, shape: &[usize], values: &[Scalar]) -> TResult<Tensor> {
        let t = Tensor::zeros(dtype, shape)?;
        {
            let mut b = t.buf.borrow_mut();
            for (i, v) in values.iter().enumerate() {
                b.set(i, *v);
            }
        }
        Ok(t)
    }

    pub fn from_f64(dtype: DType, shape: &[usize], values: &[f64]) -> TResult<Tensor> {
        let t = Tensor::zeros(dtype, shape)?;
        {
            let mut b = t.buf.borrow_mut();
            for (i, v) in values.iter().enumerate() {
                b.set(i, Scalar::F(*v));
            }
        }
        Ok(t)
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn dim(&self) -> usize {
        self.shape.len()
    }

    pub fn numel(&self) -> usize {
        numel(&self.shape)
    }

    /// A new view onto the same buffer.
    pub fn restride(&self, shape: Vec<usize>, strides: Vec<isize>, offset: usize) -> Tensor {
        Tensor { buf: self.buf.clone(), shape, strides, offset, dtype: self.dtype }
    }

    pub fn same_storage(&self, other: &Tensor) -> bool {
        Rc::ptr_eq(&self.buf, &other.buf)
    }

    /// Whether this view is exactly the same window as `other` (same storage, offset, shape and strides).
    pub fn same_view(&self, other: &Tensor) -> bool {
        self.same_storage(other)
            && self.offset == other.offset
            && self.shape == other.shape
            && self.strides == other.strides
    }

    /// PyTorch's contiguity test: the strides of size-1 dims do not count, and an empty tensor is contiguous.
    pub fn is_contiguous(&self) -> bool {
        if self.numel() == 0 {
            return true;
        }
        let mut expected = 1isize;
        for i in (0..self.dim()).rev() {
            if self.shape[i] != 1 {
                if self.strides[i] != expected {
                    return false;
                }
                expected *= self.shape[i] as isize;
            }
        }
        true
    }

    /// Storage offsets of every element in row-major order.
    pub fn offsets(&self) -> Vec<usize> {
        let n = self.numel();
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return out;
        }
        let nd = self.dim();
        let mut idx = vec![0usize; nd];
        let mut off = self.offset as isize;
        loop {
            out.push(off as usize);
            let mut d = nd;
            loop {
                if d == 0 {
                    return out;
                }
                d -= 1;
                idx[d] += 1;
                off += self.strides[d];
                if idx[d] < self.shape[d] {
                    break;
                }
                off -= self.strides[d] * self.shape[d] as isize;
                idx[d] = 0;
            }
        }
    }

    /// All elements in row-major order.
    pub fn scalars(&self) -> Vec<Scalar> {
        let b = self.buf.borrow();
        self.offsets().into_iter().map(|o| b.get(o)).collect()
    }

    pub fn to_f64_vec(&self) -> Vec<f64> {
        let b = self.buf.borrow();
        if self.is_contiguous() && self.offset + self.numel() <= b.len() {
            let r = self.offset..self.offset + self.numel();
            match &*b {
                Buf::F32(v) => return v[r].iter().map(|&x| x as f64).collect(),
                Buf::F64(v) => return v[r].to_vec(),
                _ => {}
            }
        }
        self.offsets().into_iter().map(|o| b.get(o).to_f64()).collect()
    }

    /// The single element of a one-element tensor (`.item()`).
    pub fn item(&self) -> TResult<Scalar> {
        if self.numel() != 1 {
            return Err(format!("a Tensor with {} elements cannot be converted to Scalar", self.numel()));
        }
        Ok(self.buf.borrow().get(self.offset))
    }

    /// A fresh contiguous copy (`clone`).
    pub fn contiguous_copy(&self) -> Tensor {
        if self.is_contiguous() && self.offset + self.numel() <= self.buf.borrow().len() {
            // One block of the buffer: copy it as a slice.
            let (start, n) = (self.offset, self.numel());
            let b = self.buf.borrow();
            let buf = each_buf!(&*b, v => Buf v[start..start + n].to_vec().into());
            drop(b);
            return Tensor::from_buf(buf, self.shape.clone());
        }
        let buf = {
            let b = self.buf.borrow();
            let offs = self.offsets();
            each_buf!(&*b, v => Buf offs.iter().map(|&o| v[o]).collect())
        };
        Tensor::from_buf(buf, self.shape.clone())
    }

    /// A fresh zero tensor of `x`'s shape whose memory follows `x`'s stride order, as PyTorch's elementwise results,
    /// `clone` and `*_like` do: dims are laid out by decreasing stride, size-1 and broadcast dims staying where they are.
    pub fn empty_like_layout(x: &Tensor, dtype: DType) -> TResult<Tensor> {
        let nd = x.dim();
        let fixed = |d: usize| x.shape[d] == 1 || x.strides[d] == 0;
        let mut big: Vec<usize> = (0..nd).filter(|&d| !fixed(d)).collect();
        big.sort_by(|&a, &b| x.strides[b].abs().cmp(&x.strides[a].abs()));
        let mut next = big.into_iter();
        let perm: Vec<usize> =
            (0..nd).map(|d| if fixed(d) { d } else { next.next().expect("one slot per dim") }).collect();
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return Tensor::zeros(dtype, &x.shape);
        }
        let physical: Vec<usize> = perm.iter().map(|&p| x.shape[p]).collect();
        let base = Tensor::zeros(dtype, &physical)?;
        let mut inverse = vec![0i64; nd];
        for (i, &p) in perm.iter().enumerate() {
            inverse[p] = i as i64;
        }
        base.permute(&inverse)
    }

    /// A copy with the same layout rule (`clone`, `.to(dtype)`).
    pub fn clone_like_layout(&self, dtype: DType) -> TResult<Tensor> {
        let out = Tensor::empty_like_layout(self, dtype)?;
        out.write_scalars(&self.scalars());
        Ok(out)
    }

    /// A fresh contiguous copy converted to `dtype` (static_cast semantics).
    pub fn to_dtype(&self, dtype: DType) -> TResult<Tensor> {
        if dtype == self.dtype {
            return Ok(self.contiguous_copy());
        }
        let out = Tensor::zeros(dtype, &self.shape)?;
        {
            let src = self.buf.borrow();
            let mut dst = out.buf.borrow_mut();
            for (i, o) in self.offsets().into_iter().enumerate() {
                dst.set(i, src.get(o));
            }
        }
        Ok(out)
    }

    /// Writes `values` (row-major, already of this view's shape) through this view, converting as static_cast.
    pub fn write_scalars(&self, values: &[Scalar]) {
        let offs = self.offsets();
        let mut b = self.buf.borrow_mut();
        for (o, v) in offs.into_iter().zip(values) {
            b.set(o, *v);
        }
    }

    /// Whether some dimension of size > 1 has stride 0, so several indices name one element. An empty tensor has
    /// no elements to share (PyTorch's test finds it contiguous first: `x.narrow(1, 2, 0).expand(2, -1, -1).add_(1)`
    /// runs).
    pub fn has_internal_overlap(&self) -> bool {
        self.numel() > 0 && self.shape.iter().zip(&self.strides).any(|(&n, &s)| n > 1 && s == 0)
    }

    /// Whether two indices name one element (overlapping `unfold` windows; a stride of 0 too): never where the
    /// elements form a dense block.
    pub fn shares_elements(&self) -> bool {
        if self.numel() <= 1 || self.is_non_overlapping_and_dense() {
            return false;
        }
        // Sorted by stride, each dimension stepping past all the smaller ones' span cannot meet itself.
        let mut dims: Vec<usize> = (0..self.dim()).filter(|&d| self.shape[d] > 1).collect();
        dims.sort_by_key(|&d| self.strides[d].unsigned_abs());
        let mut span = 0usize;
        let nested = dims.iter().all(|&d| {
            let stride = self.strides[d].unsigned_abs();
            let ok = stride > span;
            span += stride * (self.shape[d] - 1);
            ok
        });
        if nested {
            return false;
        }
        let offs = self.offsets();
        let distinct: std::collections::HashSet<usize> = offs.iter().copied().collect();
        distinct.len() < offs.len()
    }

    /// Whether the elements form one dense block (contiguous after some permutation of dims).
    pub fn is_non_overlapping_and_dense(&self) -> bool {
        let mut dims: Vec<usize> = (0..self.dim()).filter(|&d| self.shape[d] != 1).collect();
        dims.sort_by_key(|&d| self.strides[d]);
        let mut expected = 1isize;
        for d in dims {
            if self.strides[d] != expected {
                return false;
            }
            expected *= self.shape[d] as isize;
        }
        true
    }
}
