//! Advanced indexing: integer and boolean index tensors, for reading (a copy) and for `index_put_`.
//!
//! Both directions go through one function that lists, in the result's row-major order, the storage offset each
//! result element comes from. Writes then happen in that order, so the last duplicate index wins, as in PyTorch.

use super::ops::broadcast_shapes;
use super::views::wrap_dim;
use super::{contiguous_strides, fmt_shape, DType, Scalar, TResult, Tensor};

/// The shape of an advanced-indexing result and, for each of its elements, the storage offset it reads or writes.
pub struct AdvIndex {
    pub shape: Vec<usize>,
    pub offsets: Vec<usize>,
}

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
pub fn sort(x: &Tensor, dim: i64, descending: bool) -> TResult<(Tensor, Tensor)> {
    let d = wrap_dim(dim, x.dim())? as i64;
    let moved = x.transpose(d, -1)?;
    let vals = moved.scalars();
    let len = moved.shape.last().copied().unwrap_or(1).max(1);
    let mut sv = Vec::with_capacity(vals.len());
    let mut si = Vec::with_capacity(vals.len());
    for line in vals.chunks(len) {
        let mut order: Vec<usize> = (0..line.len()).collect();
        let key = |s: &Scalar| s.to_f64();
        order.sort_by(|&i, &j| {
            let (a, b) = (key(&line[i]), key(&line[j]));
            // NaN sorts as the largest value, as in PyTorch.
            let c = match (a.is_nan(), b.is_nan()) {
                (true, true) => std::cmp::Ordering::Equal,
                (true, false) => std::cmp::Ordering::Greater,
                (false, true) => std::cmp::Ordering::Less,
                _ => a.partial_cmp(&b).unwrap(),
            };
            if descending {
                c.reverse()
            } else {
                c
            }
        });
        for i in order {
            sv.push(line[i]);
            si.push(Scalar::I(i as i64));
        }
    }
    let v = Tensor::from_scalars(x.dtype(), &moved.shape, &sv)?.transpose(d, -1)?.contiguous_copy();
    let i = Tensor::from_scalars(DType::I64, &moved.shape, &si)?.transpose(d, -1)?.contiguous_copy();
    Ok((v, i))
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
