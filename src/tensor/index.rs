//! Advanced indexing: integer and boolean index tensors, for reading (a copy) and for `index_put_`.
//!
//! Both directions go through one function that lists, in the result's row-major order, the storage offset each
//! result element comes from. Writes then happen in that order, so the last duplicate index wins, as in PyTorch.

use std::rc::Rc;

use super::ops::broadcast_shapes;
use super::ties::Ties;
use super::views::wrap_dim;
use super::{contiguous_strides, fmt_shape, Buf, DType, Scalar, TResult, Tensor};

/// The shape of an advanced-indexing result and, for each of its elements, the storage offset it reads or writes.
pub struct AdvIndex {
    pub shape: Vec<usize>,
    pub offsets: Vec<usize>,
}

/// PyTorch's error for `x[m] = 0` with a uint8 mask `m` (its `masked_fill_` takes only boolean masks).
pub const BYTE_MASK_FILL: &str = "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char";

/// Expands boolean masks into integer index tensors (one per masked dim), leaving `None` (a full slice) alone.
pub fn expand_masks(x: &Tensor, idx: &[Option<Tensor>]) -> TResult<Vec<Option<Tensor>>> {
    let mut out = Vec::new();
    for it in idx {
        match it {
            Some(t) if t.dtype() == DType::Bool => {
                let pos = out.len();
                if t.dim() == 0 {
                    return Err("indexing with a 0-dim boolean tensor is not supported".into());
                }
                for k in 0..t.dim() {
                    if pos + k >= x.dim() || t.shape[k] != x.shape[pos + k] {
                        return Err(format!(
                            "The shape of the mask {} at index {} does not match the shape of the indexed tensor {} at index {}",
                            fmt_shape(&t.shape),
                            k,
                            fmt_shape(&x.shape),
                            pos + k
                        ));
                    }
                }
                let vals = t.scalars();
                let strides = super::contiguous_strides(&t.shape);
                let hits: Vec<usize> = (0..vals.len()).filter(|&i| vals[i].to_bool()).collect();
                for k in 0..t.dim() {
                    let coords: Vec<Scalar> = hits
                        .iter()
                        .map(|&i| Scalar::I(((i as isize / strides[k]) as usize % t.shape[k]) as i64))
                        .collect();
                    out.push(Some(Tensor::from_scalars(DType::I64, &[hits.len()], &coords)?));
                }
            }
            Some(t) if t.dtype().is_float() => {
                return Err("tensors used as indices must be long, int, byte or bool tensors".into());
            }
            other => out.push(other.clone()),
        }
    }
    if out.len() > x.dim() {
        return Err(format!("too many indices for tensor of dimension {}", x.dim()));
    }
    Ok(out)
}

/// Offsets of `x[idx]` where `idx[d]` is an integer index tensor or `None` for a full slice.
pub fn advanced(x: &Tensor, idx: &[Option<Tensor>]) -> TResult<AdvIndex> {
    let idx = expand_masks(x, idx)?;
    let adv: Vec<usize> = (0..idx.len()).filter(|&d| idx[d].is_some()).collect();
    let mut bshape: Vec<usize> = Vec::new();
    for &d in &adv {
        let t = idx[d].as_ref().expect("advanced dims hold tensors");
        bshape = broadcast_shapes(&bshape, &t.shape).map_err(|_| {
            let shapes: Vec<String> = adv.iter().map(|&d| fmt_shape(&idx[d].as_ref().unwrap().shape)).collect();
            format!(
                "shape mismatch: indexing tensors could not be broadcast together with shapes {}",
                shapes.join(", ")
            )
        })?;
    }
    let nb: usize = bshape.iter().product();
    let mut adv_vals: Vec<Vec<i64>> = Vec::new();
    for &d in &adv {
        let t = idx[d].as_ref().unwrap().broadcast_to(&bshape)?;
        let n = x.shape[d] as i64;
        let mut v = Vec::with_capacity(nb);
        for s in t.scalars() {
            let i = s.to_i64_trunc();
            if i < -n || i >= n {
                return Err(format!("index {} is out of bounds for dimension {} with size {}", i, d, n));
            }
            v.push(if i < 0 { i + n } else { i });
        }
        adv_vals.push(v);
    }
    let adjacent = adv.windows(2).all(|w| w[1] == w[0] + 1);
    // The loop order of the result: plain dims and one group for the broadcast index positions.
    enum G {
        Dim(usize),
        Adv,
    }
    let mut groups = Vec::new();
    if adjacent && !adv.is_empty() {
        groups.extend((0..adv[0]).map(G::Dim));
        groups.push(G::Adv);
        groups.extend((adv[adv.len() - 1] + 1..x.dim()).map(G::Dim));
    } else {
        if !adv.is_empty() {
            groups.push(G::Adv);
        }
        groups.extend((0..x.dim()).filter(|d| !adv.contains(d)).map(G::Dim));
    }
    let mut shape = Vec::new();
    let mut sizes = Vec::new();
    for g in &groups {
        match g {
            G::Dim(d) => {
                shape.push(x.shape[*d]);
                sizes.push(x.shape[*d]);
            }
            G::Adv => {
                shape.extend(&bshape);
                sizes.push(nb);
            }
        }
    }
    let total: usize = sizes.iter().product();
    let mut offsets = Vec::with_capacity(total);
    let mut counter = vec![0usize; sizes.len()];
    for _ in 0..total {
        let mut off = x.offset as isize;
        for (g, &c) in groups.iter().zip(&counter) {
            match g {
                G::Dim(d) => off += c as isize * x.strides[*d],
                G::Adv => {
                    for (k, &d) in adv.iter().enumerate() {
                        off += adv_vals[k][c] as isize * x.strides[d];
                    }
                }
            }
        }
        offsets.push(off as usize);
        for k in (0..sizes.len()).rev() {
            counter[k] += 1;
            if counter[k] < sizes[k] {
                break;
            }
            counter[k] = 0;
        }
    }
    Ok(AdvIndex { shape, offsets })
}

/// `x[idx]` with advanced indices: a fresh contiguous tensor.
pub fn index(x: &Tensor, idx: &[Option<Tensor>]) -> TResult<Tensor> {
    let a = advanced(x, idx)?;
    let b = x.buf.borrow();
    let vals: Vec<Scalar> = a.offsets.iter().map(|&o| b.get(o)).collect();
    Tensor::from_scalars(x.dtype(), &a.shape, &vals)
}

/// `x.index_put_(idx, values, accumulate)`: `values` broadcast to the indexing result, written in order.
pub fn index_put(x: &Tensor, idx: &[Option<Tensor>], values: &Tensor, accumulate: bool) -> TResult<()> {
    super::ops::check_no_overlap(x, &[values])?;
    let a = advanced(x, idx)?;
    let b = broadcast_shapes(&a.shape, &values.shape).ok().filter(|b| *b == a.shape);
    if b.is_none() {
        return Err(format!(
            "shape mismatch: value tensor of shape {} cannot be broadcast to indexing result of shape {}",
            fmt_shape(&values.shape),
            fmt_shape(&a.shape)
        ));
    }
    let vals = values.broadcast_to(&a.shape)?.scalars();
    let mut buf = x.buf.borrow_mut();
    for (&o, v) in a.offsets.iter().zip(vals) {
        let v = if accumulate {
            let old = buf.get(o);
            match x.dtype().kind() {
                super::dtype::Kind::Float => Scalar::F(old.to_f64() + v.cast(x.dtype()).to_f64()),
                super::dtype::Kind::Int => Scalar::I(old.to_i64_trunc().wrapping_add(v.to_i64_trunc())),
                super::dtype::Kind::Bool => Scalar::B(old.to_bool() | v.to_bool()),
            }
        } else {
            v
        };
        buf.set(o, v);
    }
    Ok(())
}

/// Index tensors addressing, for every element of `index`, the element of `x` with `dim` replaced by the index
/// value (the addressing of `gather`/`scatter`).
pub fn along_dim_offsets(x: &Tensor, dim: usize, idx: &Tensor) -> TResult<Vec<usize>> {
    if idx.dim() != x.dim() {
        return Err("Index tensor must have the same number of dimensions as input tensor".into());
    }
    if x.dim() == 0 {
        // A 0-d tensor is one element along dim 0 (PyTorch checks its index against size 1).
        let i = idx.scalars()[0].to_i64_trunc();
        if i != 0 {
            return Err(format!("index {i} is out of bounds for dimension 0 with size 1"));
        }
        return Ok(vec![x.offset]);
    }
    let vals = idx.scalars();
    let istr = contiguous_strides(&idx.shape);
    let mut out = Vec::with_capacity(vals.len());
    for (flat, v) in vals.iter().enumerate() {
        let mut off = x.offset as isize;
        for d in 0..x.dim() {
            let c = (flat as isize / istr[d]) as usize % idx.shape[d].max(1);
            let c = if d == dim {
                // gather, scatter, index_copy and index_add do not wrap negative indices (PyTorch's error).
                let i = v.to_i64_trunc();
                let n = x.shape[d] as i64;
                if i < 0 || i >= n {
                    return Err(format!("index {} is out of bounds for dimension {} with size {}", i, d, n));
                }
                i as usize
            } else {
                if c >= x.shape[d] {
                    return Err(format!("Size does not match at dimension {d} expected index {:?} to be smaller than self {:?} apart from dimension {dim}", idx.shape, x.shape));
                }
                c
            };
            off += c as isize * x.strides[d];
        }
        out.push(off as usize);
    }
    Ok(out)
}

/// Stable sort of every line along `dim`: values and their original indices.
pub fn sort(x: &Tensor, dim: i64, descending: bool, ties: Ties) -> TResult<(Tensor, Tensor)> {
    sort_prefix(x, dim, descending, usize::MAX, ties)
}

/// [`sort`]'s first `k` positions of every line along `dim` (all of them where the line is shorter), in tensors of
/// the full shape whose later positions hold zeros: what a plan computes when every reader of a sort reads only a
/// leading part of each line (`topk`'s `sort(..)[:k]`). The first `k` are selected in linear time, then sorted.
/// With `Ties::Stable`, ties keep their index order (each element is ordered by its key, then its index), so the
/// result is the stable sort's whatever `k` is; otherwise equal keys come out as PyTorch's kernel leaves them
/// ([`super::ties`]).
pub fn sort_prefix(x: &Tensor, dim: i64, descending: bool, k: usize, ties: Ties) -> TResult<(Tensor, Tensor)> {
    let d = wrap_dim(dim, x.dim())? as i64;
    // Lines made contiguous: the input as it is where they already are, else a copy.
    let last = d as usize + 1 >= x.dim();
    let whole = x.offset + x.numel() <= x.buf.borrow().len();
    let moved = if last && whole && x.is_contiguous() { x.clone() } else { x.transpose(d, -1)?.contiguous_copy() };
    let values = Tensor::zeros(moved.dtype(), &moved.shape)?;
    let indices = Tensor::zeros(DType::I64, &moved.shape)?;
    sort_prefix_into(&moved, descending, k, ties, &values, &indices)?;
    let back = |t: Tensor| -> TResult<Tensor> { Ok(if last { t } else { t.transpose(d, -1)?.contiguous_copy() }) };
    Ok((back(values)?, back(indices)?))
}

/// [`sort_prefix`] along the last dim of `x` (contiguous), into `values` (x's dtype) and `indices` (int64),
/// contiguous tensors of x's shape: the first `k` positions of each line are written, the others left as they are
/// (the executor hands buffers whose later positions nothing reads: `lower::sorts`).
pub fn sort_prefix_into(
    x: &Tensor,
    descending: bool,
    k: usize,
    ties: Ties,
    values: &Tensor,
    indices: &Tensor,
) -> TResult<()> {
    let fits = |t: &Tensor| t.is_contiguous() && t.shape == x.shape && t.offset + t.numel() <= t.buf.borrow().len();
    let shared =
        Rc::ptr_eq(&x.buf, &values.buf) || Rc::ptr_eq(&x.buf, &indices.buf) || Rc::ptr_eq(&values.buf, &indices.buf);
    if !fits(x) || !fits(values) || !fits(indices) || shared {
        return Err("sort: the lines and the results must be separate contiguous tensors of one shape".into());
    }
    let len = x.shape.last().copied().unwrap_or(1).max(1);
    let (start, n) = (x.offset, x.numel());
    let b = x.buf.borrow();
    let mut vb = values.buf.borrow_mut();
    let mut ib = indices.buf.borrow_mut();
    let Buf::I64(iv) = &mut *ib else { return Err("sort: indices must be int64".into()) };
    let iv = &mut iv[indices.offset..indices.offset + n];
    let vs = values.offset..values.offset + n;
    if ties != Ties::Stable {
        let lines = start..start + n;
        macro_rules! ordered {
            ($v:expr, $o:expr) => {
                ordered_lines(&$v[lines], len, k, descending, ties, &mut $o[vs], iv)
            };
        }
        match (&*b, &mut *vb) {
            (Buf::Bool(v), Buf::Bool(o)) => ordered!(v, o),
            (Buf::I32(v), Buf::I32(o)) => ordered!(v, o),
            (Buf::I16(v), Buf::I16(o)) => ordered!(v, o),
            (Buf::I8(v), Buf::I8(o)) => ordered!(v, o),
            (Buf::U8(v), Buf::U8(o)) => ordered!(v, o),
            (Buf::I64(v), Buf::I64(o)) => ordered!(v, o),
            (Buf::F32(v), Buf::F32(o)) => ordered!(v, o),
            (Buf::F64(v), Buf::F64(o)) => ordered!(v, o),
            _ => return Err("sort: the values must have the input's dtype".into()),
        }
        return Ok(());
    }
    // Whether `x` may come before `w` (true where unsure): by keys for integers, and for floats by a float
    // comparison that a NaN on either side passes (-0.0 and 0.0 compare equal, as their keys do).
    let by_key = |key: fn(i64) -> u64| move |x: i64, w: i64| if descending { key(x) > key(w) } else { key(x) < key(w) };
    let ints = by_key(int_key);
    let f32s = |x: f32, w: f32| if descending { !(x <= w) } else { !(x >= w) };
    let f64s = |x: f64, w: f64| if descending { !(x <= w) } else { !(x >= w) };
    let bools = |x: bool, w: bool| if descending { x & !w } else { !x & w };
    let lines = start..start + n;
    // Integers narrower than int64, keyed and compared as int64.
    macro_rules! narrow {
        ($v:expr, $o:expr, $t:ty) => {{
            let before = |x: $t, w: $t| ints(x as i64, w as i64);
            sort_lines(&$v[lines], len, k, descending, |i| int_key(i as i64), before, &mut $o[vs], iv)
        }};
    }
    match (&*b, &mut *vb) {
        (Buf::Bool(v), Buf::Bool(o)) => sort_lines(&v[lines], len, k, descending, |b| b as u64, bools, &mut o[vs], iv),
        (Buf::I32(v), Buf::I32(o)) => narrow!(v, o, i32),
        (Buf::I16(v), Buf::I16(o)) => narrow!(v, o, i16),
        (Buf::I8(v), Buf::I8(o)) => narrow!(v, o, i8),
        (Buf::U8(v), Buf::U8(o)) => narrow!(v, o, u8),
        (Buf::I64(v), Buf::I64(o)) => sort_lines(&v[lines], len, k, descending, int_key, ints, &mut o[vs], iv),
        (Buf::F32(v), Buf::F32(o)) => sort_lines(&v[lines], len, k, descending, f32_key, f32s, &mut o[vs], iv),
        (Buf::F64(v), Buf::F64(o)) => sort_lines(&v[lines], len, k, descending, float_key, f64s, &mut o[vs], iv),
        _ => return Err("sort: the values must have the input's dtype".into()),
    }
    Ok(())
}

/// The first `k` positions of each line of `src` (lines of `len`) in the order PyTorch's kernel for `ties` leaves
/// them (`super::ties::order`), into `out` and `idx`.
fn ordered_lines<T: Copy + PartialOrd>(
    src: &[T],
    len: usize,
    k: usize,
    descending: bool,
    ties: Ties,
    out: &mut [T],
    idx: &mut [i64],
) {
    for (l, line) in src.chunks(len).enumerate() {
        let order = super::ties::order(line, descending, ties);
        for (p, &o) in order.iter().take(k).enumerate() {
            out[l * len + p] = line[o];
            idx[l * len + p] = o as i64;
        }
    }
}

/// Every `len`-element line of `data` sorted by `key` (descending: by its complement), ties by index, its first `k`
/// positions written to `values` and `indices` (the rest left as they are).
/// `before(x, w)` says whether `x` may sort strictly before `w` (true where unsure): a cheap test on the values
/// that lets most blocks of a long line skip making keys.
#[allow(clippy::too_many_arguments)]
fn sort_lines<T: Copy>(
    data: &[T],
    len: usize,
    k: usize,
    descending: bool,
    key: impl Fn(T) -> u64,
    before: impl Fn(T, T) -> bool,
    values: &mut [T],
    indices: &mut [i64],
) {
    let k = k.min(len);
    let mut order: Vec<(u64, u32)> = Vec::with_capacity(len);
    let (mut packed, mut spare) = (Vec::new(), Vec::new());
    for (l, line) in data.chunks(len).enumerate() {
        order.clear();
        if k > 0 && k * 16 <= len {
            // A few of many (`topk`): candidates are gathered while the k smallest so far are known only as a
            // bound, the worst of them after the last compaction; when twice k (and at least 256) are gathered, a
            // linear-time selection keeps the k smallest and tightens the bound. An element enters only if it is
            // below the bound, which after the first few compactions is rare, so a block of values is first compared
            // with it (`before`, a loop the compiler vectorizes) and its keys are made only where one may enter. An
            // element comes after every earlier one of an equal key (pairs compare by index next), so one equal to
            // the bound never enters. Keeping the candidates sorted instead (an insertion per entry) cost O(k) per
            // entry: a top-5000 of 982080 took 14.5 ms. At least 256, not more: a line of a few thousand
            // (fairseq's beam search, top 8 of 2000) then compacts once and filters the rest by blocks, where a floor
            // of 4096 keyed and gathered every element (14 -> 6 us for two lines, the host step as profiled).
            let cap = (2 * k).max(256);
            let mut worst: Option<(u64, u32)> = None;
            for (b, block) in line.chunks(64).enumerate() {
                let mut bits = match worst {
                    Some((_, w)) => {
                        let w = line[w as usize];
                        if !block.iter().fold(false, |any, &x| any | before(x, w)) {
                            continue;
                        }
                        block.iter().enumerate().fold(0u64, |m, (j, &x)| m | (before(x, w) as u64) << j)
                    }
                    None => u64::MAX >> (64 - block.len()),
                };
                while bits != 0 {
                    let j = bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let key = if descending { !key(block[j]) } else { key(block[j]) };
                    if worst.is_some_and(|(w, _)| key >= w) {
                        continue;
                    }
                    order.push((key, (b * 64 + j) as u32));
                }
                if order.len() >= cap {
                    order.select_nth_unstable(k - 1);
                    order.truncate(k);
                    worst = order.iter().copied().max();
                }
            }
            if order.len() > k {
                order.select_nth_unstable(k - 1);
                order.truncate(k);
            }
            order.sort_unstable();
        } else {
            let keyed = line.iter().enumerate().map(|(i, &x)| {
                let key = key(x);
                (if descending { !key } else { key }, i as u32)
            });
            order.extend(keyed);
            if len < RADIX_MIN || !radix_sort(&mut order, &mut packed, &mut spare) {
                if k < order.len() {
                    order.select_nth_unstable(k);
                    order.truncate(k);
                }
                order.sort_unstable();
            }
            order.truncate(k);
        }
        for (j, &(_, i)) in order.iter().enumerate() {
            values[l * len + j] = line[i as usize];
            indices[l * len + j] = i as i64;
        }
    }
}

/// The shortest line [`radix_sort`] sorts (shorter ones sort by comparisons).
const RADIX_MIN: usize = 512;

/// `order` ((key, index) pairs in index order) sorted by key, ties by index, where the keys span less than 2^32 (a
/// float32 line without NaN, int32s, bools): each pair packed into one u64 (key less the least key above, index
/// below), then a least-significant-digit radix sort of the upper half in three passes of 11 bits, which is stable,
/// so equal keys keep their index order. False (and `order` untouched) where the keys span more.
fn radix_sort(order: &mut [(u64, u32)], packed: &mut Vec<u64>, spare: &mut Vec<u64>) -> bool {
    let (lo, hi) = order.iter().fold((u64::MAX, 0), |(lo, hi), &(k, _)| (lo.min(k), hi.max(k)));
    if order.is_empty() || hi - lo > u32::MAX as u64 {
        return false;
    }
    packed.clear();
    packed.extend(order.iter().map(|&(k, i)| (k - lo) << 32 | i as u64));
    spare.resize(packed.len(), 0);
    for pass in 0..3 {
        let shift = 32 + 11 * pass;
        let mut count = [0usize; 2048];
        for &v in packed.iter() {
            count[(v >> shift & 2047) as usize] += 1;
        }
        if count.iter().any(|&c| c == packed.len()) {
            continue; // one digit for all: this pass would not move anything
        }
        let mut at = 0;
        for c in count.iter_mut() {
            (*c, at) = (at, at + *c);
        }
        for &v in packed.iter() {
            let d = (v >> shift & 2047) as usize;
            spare[count[d]] = v;
            count[d] += 1;
        }
        std::mem::swap(packed, spare);
    }
    for (slot, &v) in order.iter_mut().zip(packed.iter()) {
        *slot = ((v >> 32) + lo, v as u32);
    }
    true
}

/// A float's place in ascending order as an unsigned integer, as PyTorch's sort compares: by value (`-0.0` equal
/// to `0.0`), NaN after everything (`u64::MAX`, above infinity's key).
fn float_key(f: f64) -> u64 {
    if f.is_nan() {
        return u64::MAX;
    }
    let b = (f + 0.0).to_bits();
    if b >> 63 == 1 {
        !b
    } else {
        b | 1 << 63
    }
}

/// [`float_key`] for an f32, from its own bits (the same order, without the widening).
fn f32_key(f: f32) -> u64 {
    let b = (f + 0.0).to_bits();
    let key = if b >> 31 == 1 { !b } else { b | 1 << 31 };
    if f.is_nan() {
        u64::MAX
    } else {
        key as u64
    }
}

/// [`float_key`] for integers: their order, exactly.
fn int_key(i: i64) -> u64 {
    (i as u64) ^ 1 << 63
}

/// PyTorch's check of the index dtype of `gather` and `scatter` (`op`): an integer tensor.
pub fn check_along_dim_index(op: &str, index: DType) -> TResult<()> {
    if !matches!(index, DType::I64 | DType::I32) {
        return Err(format!("{op}(): Expected dtype int32/int64 for index"));
    }
    Ok(())
}

/// PyTorch's check of the index dtype of `index_select` and `F.embedding` (`op`): int64 or int32.
pub fn check_select_index(op: &str, index: DType) -> TResult<()> {
    if matches!(index, DType::I64 | DType::I32) {
        return Ok(());
    }
    Err(if op == "embedding" {
        format!(
            "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int; but got \
             {} instead (while checking arguments for embedding)",
            if index == DType::Bool { "CPUBoolType".to_string() } else { index.legacy_type_name() }
        )
    } else {
        format!("{op}(): Expected dtype int32 or int64 for index")
    })
}

/// PyTorch's checks of `index_copy(x, dim, index, source)` and `index_add` (`op` names which), on shapes and
/// dtypes alone; returns the shape `index` is viewed as (its entries along `dim`, 1 elsewhere) before it is
/// expanded to `source`'s shape and used as a `scatter` index. Both engines call it, so both refuse alike.
#[allow(clippy::too_many_arguments)]
pub fn check_index_along(
    op: &str,
    x: &[usize],
    xd: DType,
    dim: usize,
    idx: &[usize],
    id: DType,
    src: &[usize],
    sd: DType,
) -> TResult<Vec<i64>> {
    let add = op == "index_add";
    if x.is_empty() {
        return Err(format!("{op}_(): a 0-dim tensor as self is not supported"));
    }
    if !(id == DType::I64 || (add && id == DType::I32)) {
        return Err(if add {
            format!("{op}_(): Expected dtype int32/int64 for index but got: {}", id.name())
        } else {
            format!("{op}_(): Expected a long tensor for index, but got {}", id.name())
        });
    }
    if idx.len() > 1 {
        return Err(format!("{op}_(): Index should have dimension 1 or 0 (got {})", idx.len()));
    }
    if xd != sd {
        return Err(format!(
            "{op}_(): self and source expected to have the same dtype, but got (self) {} and (source) {}",
            xd.name(),
            sd.name()
        ));
    }
    let n: usize = idx.iter().product();
    let slices_match = src.len() == x.len() && (0..x.len()).all(|d| d == dim || src[d] == x[d]);
    if src.len() == x.len() && src[dim] != n {
        return Err(format!("{op}_(): Number of indices ({n}) should be equal to source.size(dim) ({})", src[dim]));
    }
    if !slices_match {
        return Err(format!(
            "{op}_(): source tensor shape must match self tensor shape, excluding the specified dimension. Got self.shape = {} source.shape = {}",
            super::fmt_shape(x),
            super::fmt_shape(src)
        ));
    }
    Ok((0..x.len()).map(|d| if d == dim { n as i64 } else { 1 }).collect())
}

/// Writes `vals` at the storage offsets `offs` of `x` in order (a later duplicate overwrites an earlier one), or
/// adds them (`add`: exact for integers, one rounding per addition for floats, logical or for bools): the write of
/// `scatter`, `scatter_add`, `index_copy` and `index_add` on every engine.
pub fn scatter_values(x: &Tensor, offs: &[usize], vals: Vec<Scalar>, add: bool) {
    let dt = x.dtype();
    let mut b = x.buf.borrow_mut();
    for (&o, v) in offs.iter().zip(vals) {
        let v = if !add {
            v
        } else if dt.is_float() {
            Scalar::F(b.get(o).to_f64() + v.to_f64()).cast(dt)
        } else if dt == DType::Bool {
            Scalar::B(b.get(o).to_bool() || v.to_bool())
        } else {
            Scalar::I(b.get(o).to_i64_trunc().wrapping_add(v.to_i64_trunc())).cast(dt)
        };
        b.set(o, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stable sort written the plain way: indices ordered by comparing elements (NaN last, `-0.0 == 0.0`,
    /// integers exactly), ties by index.
    fn plain_order(line: &[Scalar], descending: bool) -> Vec<usize> {
        let mut order: Vec<usize> = (0..line.len()).collect();
        order.sort_by(|&i, &j| {
            let c = match (line[i], line[j]) {
                (Scalar::I(a), Scalar::I(b)) => a.cmp(&b),
                (a, b) => {
                    let (a, b) = (a.to_f64(), b.to_f64());
                    a.is_nan().cmp(&b.is_nan()).then(a.partial_cmp(&b).unwrap_or(std::cmp::Ordering::Equal))
                }
            };
            if descending {
                c.reverse()
            } else {
                c
            }
        });
        order
    }

    #[test]
    fn the_radix_sort_orders_as_the_comparison_sort_and_declines_wide_keys() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (mut packed, mut spare) = (Vec::new(), Vec::new());
        for span in [1u64, 7, 2048, 1 << 20, u32::MAX as u64] {
            let mut order: Vec<(u64, u32)> = (0..3000u32).map(|i| ((1 << 40) + next() % span, i)).collect();
            let mut want = order.clone();
            want.sort_unstable();
            assert!(radix_sort(&mut order, &mut packed, &mut spare), "span {span}");
            assert_eq!(order, want, "span {span}");
        }
        let mut wide = vec![(0u64, 0u32), (1 << 33, 1)];
        assert!(!radix_sort(&mut wide, &mut packed, &mut spare));
        assert_eq!(wide, [(0, 0), (1 << 33, 1)]);
    }

    #[test]
    fn every_prefix_of_a_sort_is_the_plain_stable_sorts() {
        let floats = [3.0, -0.0, f64::NAN, 0.0, -1.5, f64::INFINITY, 3.0, f64::NEG_INFINITY, 1e-40, f64::NAN, -1.5];
        let ints = [i64::MAX, 9007199254740993, 9007199254740992, -4, i64::MIN, 7, -4, 0, 7, 1, 2];
        // Long lines too (many ties, NaNs spread out), where a few positions are kept by a scan, not a selection.
        let long = |n: usize| (0..n).map(move |j| (j * 7 + j / 11) % 11);
        let f = |l: &mut dyn Iterator<Item = usize>| l.map(|j| Scalar::F(floats[j])).collect::<Vec<_>>();
        for (dtype, line) in [
            (DType::F64, f(&mut (0..11))),
            (DType::I64, ints.iter().map(|&i| Scalar::I(i)).collect()),
            (DType::F32, f(&mut long(300))),
            (DType::F64, f(&mut long(130))),
            (DType::I64, long(200).map(|j| Scalar::I(ints[j])).collect()),
            (DType::I32, long(200).map(|j| Scalar::I(j as i64 - 5)).collect()),
            (DType::Bool, long(200).map(|j| Scalar::B(j % 4 == 1)).collect()),
            // Lines the radix sort takes (at least RADIX_MIN long, keys spanning under 2^32): float32 without NaN
            // (ties, -0.0 and 0.0, infinities, a subnormal), int32, bool.
            (DType::F32, f(&mut long(700).map(|j| if j == 2 || j == 9 { 4 } else { j }))),
            (DType::I32, long(600).map(|j| Scalar::I((j as i64 - 5) * 1_000_003)).collect()),
            (DType::Bool, long(520).map(|j| Scalar::B(j % 3 == 1)).collect()),
            // Lines long enough that a top-k gathers more candidates than it keeps (256) and compacts them, several
            // times while no bound is known yet (every element a candidate), then under a bound full of ties.
            (DType::F32, f(&mut long(20000))),
            (DType::I64, long(9000).map(|j| Scalar::I(ints[j])).collect()),
        ] {
            let x = Tensor::from_scalars(dtype, &[2, line.len()], &[line.clone(), line.clone()].concat()).unwrap();
            for descending in [false, true] {
                let order = plain_order(&line, descending);
                for k in [0, 1, 3, 8, 10, 11, 12, 18, 129, 300, 650, 1100, usize::MAX] {
                    let (v, i) = sort_prefix(&x, -1, descending, k, Ties::Stable).unwrap();
                    let (v, i) = (v.scalars(), i.scalars());
                    for row in 0..2 {
                        for (j, &o) in order.iter().enumerate() {
                            let (got_v, got_i) = (v[row * line.len() + j], i[row * line.len() + j]);
                            if j < k {
                                assert_eq!(got_i, Scalar::I(o as i64), "{dtype:?} desc={descending} k={k} j={j}");
                                let want = Tensor::from_scalars(dtype, &[], &[line[o]]).unwrap().scalars()[0];
                                assert_eq!(got_v.to_f64().to_bits(), want.to_f64().to_bits());
                            } else {
                                assert_eq!((got_v.to_f64(), got_i), (0.0, Scalar::I(0)), "unread positions are 0");
                            }
                        }
                    }
                }
            }
        }
        // Along the first dim of a [3, 2] tensor: each column is a line.
        let x = Tensor::from_f64(DType::F32, &[3, 2], &[2.0, 0.0, 1.0, 5.0, 3.0, -1.0]).unwrap();
        let (v, i) = sort_prefix(&x, 0, true, 1, Ties::Stable).unwrap();
        assert_eq!(v.to_f64_vec(), [3.0, 5.0, 0.0, 0.0, 0.0, 0.0]);
        assert_eq!(i.scalars(), [2, 1, 0, 0, 0, 0].map(Scalar::I));
    }
}

/// PyTorch's checks of `bincount(input, weights, minlength)` on dtypes and shapes (`weights` as (dtype, shape)):
/// the dtype of the result (int64 counts, or the weights' float dtype; integer weights sum as float64). An empty
/// input gives int64 zeros whatever the weights, as PyTorch's kernel returns before it looks at them.
pub fn check_bincount(
    x: DType,
    shape: &[usize],
    weights: Option<(DType, &[usize])>,
    minlength: i64,
) -> Result<DType, String> {
    if x == DType::Bool || x.is_float() {
        return Err(format!("\"bincount_cpu\" not implemented for '{}'", x.name()));
    }
    if shape.len() != 1 {
        return Err("bincount only supports 1-d non-negative integral inputs.".into());
    }
    if minlength < 0 {
        return Err("minlength should be >= 0".into());
    }
    match weights {
        _ if shape[0] == 0 => Ok(DType::I64),
        None => Ok(DType::I64),
        Some((_, s)) if s != shape => Err("weights should be 1-d and have the same length as input".into()),
        Some((DType::F32, _)) => Ok(DType::F32),
        Some(_) => Ok(DType::F64),
    }
}

/// `bincount` as PyTorch's CPU kernel computes it: `max(input) + 1` bins (at least `minlength`), each the count of
/// its index in `input`, or the sum of the weights at those positions in input order (in float32 for float32
/// weights, else in float64).
pub fn bincount(x: &Tensor, weights: Option<&Tensor>, minlength: i64) -> TResult<Tensor> {
    let dtype = check_bincount(x.dtype(), &x.shape, weights.map(|w| (w.dtype(), w.shape.as_slice())), minlength)?;
    let idx: Vec<i64> = x.scalars().iter().map(|s| s.to_i64_trunc()).collect();
    if idx.iter().any(|&i| i < 0) {
        return Err("bincount only supports 1-d non-negative integral inputs.".into());
    }
    let bins = idx.iter().map(|&i| i.saturating_add(1)).max().unwrap_or(0).max(minlength);
    let out = Tensor::zeros(dtype, &[usize::try_from(bins).map_err(|_| format!("bincount: {bins} bins"))?])?;
    {
        let mut b = out.buf.borrow_mut();
        match weights {
            None => {
                for &i in &idx {
                    let n = b.get(i as usize).to_i64_trunc();
                    b.set(i as usize, Scalar::I(n + 1));
                }
            }
            Some(w) => {
                for (&i, v) in idx.iter().zip(w.to_f64_vec()) {
                    // float32 weights add in float32: the sum of two floats rounded once, as PyTorch's `+=`.
                    let sum = b.get(i as usize).to_f64() + v;
                    b.set(i as usize, Scalar::F(if dtype == DType::F32 { sum as f32 as f64 } else { sum }));
                }
            }
        }
    }
    Ok(out)
}
