//! View operations: each returns a new window onto the same buffer, or PyTorch's error.
//!
//! Invariant: a view never addresses an element outside its buffer; `reshape` copies only where `view` would fail.

use super::{fmt_shape, numel, TResult, Tensor};

/// Wraps a possibly negative dim into `0..ndim` (a 0-dim tensor accepts dims -1 and 0).
pub fn wrap_dim(dim: i64, ndim: usize) -> TResult<usize> {
    let n = ndim.max(1) as i64;
    if dim < -n || dim >= n {
        return Err(format!(
            "Dimension out of range (expected to be in range of [{}, {}], but got {})",
            -n,
            n - 1,
            dim
        ));
    }
    Ok(if dim < 0 { (dim + n) as usize } else { dim as usize })
}

/// The permutation `movedim(source, destination)` is (`moveaxis` too): each dim of `source` goes to the place of
/// the same position in `destination`, the other dims keep their order in the places left.
pub fn movedim_perm(ndim: usize, source: &[i64], destination: &[i64]) -> TResult<Vec<i64>> {
    if source.len() != destination.len() {
        return Err(format!(
            "movedim: Invalid source or destination dims: source ({source:?} dims) should contain the same number of \
             dims as destination ({destination:?} dims)"
        ));
    }
    let src = source.iter().map(|&d| wrap_dim(d, ndim)).collect::<TResult<Vec<_>>>()?;
    let dst = destination.iter().map(|&d| wrap_dim(d, ndim)).collect::<TResult<Vec<_>>>()?;
    for (what, dims) in [("source", &src), ("destination", &dst)] {
        if (1..dims.len()).any(|i| dims[..i].contains(&dims[i])) {
            return Err(format!("movedim: repeated dim in `{what}` ({dims:?})"));
        }
    }
    if ndim == 0 {
        // A 0-d tensor takes dims 0 and -1 and stays itself.
        return Ok(vec![]);
    }
    let mut perm: Vec<Option<usize>> = vec![None; ndim];
    for (&s, &d) in src.iter().zip(&dst) {
        perm[d] = Some(s);
    }
    let mut rest = (0..ndim).filter(|d| !src.contains(d));
    Ok(perm.into_iter().map(|p| p.or_else(|| rest.next()).unwrap_or(0) as i64).collect())
}

/// Resolves one `-1` in a requested shape against `numel`.
pub fn infer_shape(shape: &[i64], numel: usize) -> TResult<Vec<usize>> {
    let mut infer = None;
    let mut known = 1usize;
    for (i, &d) in shape.iter().enumerate() {
        if d == -1 {
            if infer.is_some() {
                return Err("only one dimension can be inferred".into());
            }
            infer = Some(i);
        } else if d < 0 {
            return Err(format!("invalid shape dimension {d}"));
        } else {
            known *= d as usize;
        }
    }
    let show = || format!("[{}]", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "));
    let mut out: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
    match infer {
        Some(i) => {
            if known == 0 || numel % known != 0 {
                return Err(format!("shape '{}' is invalid for input of size {}", show(), numel));
            }
            out[i] = numel / known;
        }
        None => {
            if known != numel {
                return Err(format!("shape '{}' is invalid for input of size {}", show(), numel));
            }
        }
    }
    Ok(out)
}

/// Index `index` into dim `dim` of size `n`, as Python reads it: a negative index counts from the end, once; outside
/// `-n..n` it is PyTorch's IndexError. Every engine wraps and checks run-time indices with this one function.
pub fn wrap_index(index: i64, n: i64, dim: usize) -> TResult<i64> {
    if index < -n || index >= n {
        return Err(format!("index {} is out of bounds for dimension {} with size {}", index, dim, n));
    }
    Ok(if index < 0 { index + n } else { index })
}

/// The start `narrow(dim, start, length)` reads from in a dim of size `n` (a negative start counts from the end).
pub fn narrow_start(start: i64, length: i64, n: i64) -> TResult<i64> {
    let s = if start < 0 { start + n } else { start };
    if s < 0 || length < 0 || s + length > n {
        return Err(format!("start ({start}) + length ({length}) exceeds dimension size ({n})."));
    }
    Ok(s)
}

/// The start of `[start : start + len]` in dim `dim` of size `n`, clamped as Python clamps slice bounds, where that
/// slice has `len` elements; where it has fewer, its shape depends on the data, which no term can express.
pub fn slice_start(start: i64, len: i64, n: i64, dim: usize) -> TResult<i64> {
    let clamp = |b: i64| if b < 0 { (b + n).max(0) } else { b.min(n) };
    let (s, e) = (clamp(start), clamp(start + len));
    if (e - s).max(0) != len {
        return Err(format!(
            "the slice [{start}:{}] of dimension {dim} with size {n} has {} elements, not the {len} it has for other \
             values: a shape that depends on the data is not supported",
            start + len,
            (e - s).max(0)
        ));
    }
    Ok(s)
}

impl Tensor {
    pub fn select(&self, dim: i64, index: i64) -> TResult<Tensor> {
        if self.dim() == 0 {
            return Err("select() cannot be applied to a 0-dim tensor.".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        let i = wrap_index(index, self.shape[d] as i64, d)?;
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        let offset = (self.offset as isize + i as isize * strides[d]) as usize;
        shape.remove(d);
        strides.remove(d);
        Ok(self.restride(shape, strides, offset))
    }

    /// `x[start:stop:step]` along `dim`, with Python's clamping of out-of-range bounds.
    pub fn slice(&self, dim: i64, start: Option<i64>, stop: Option<i64>, step: i64) -> TResult<Tensor> {
        if step <= 0 {
            return Err("step must be greater than zero".into());
        }
        if self.dim() == 0 {
            return Err("slice() cannot be applied to a 0-dim tensor.".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape[d] as i64;
        let norm = |v: i64| if v < 0 { (v + n).max(0) } else { v.min(n) };
        let s = start.map(norm).unwrap_or(0);
        let e = stop.map(norm).unwrap_or(n).max(s);
        let len = ((e - s) + step - 1) / step;
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        let offset = if len > 0 { (self.offset as isize + s as isize * strides[d]) as usize } else { self.offset };
        shape[d] = len as usize;
        strides[d] *= step as isize;
        Ok(self.restride(shape, strides, offset))
    }

    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> TResult<Tensor> {
        if self.dim() == 0 {
            return Err("narrow() cannot be applied to a 0-dim tensor.".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        let s = narrow_start(start, length, self.shape[d] as i64)?;
        self.slice(d as i64, Some(s), Some(s + length), 1)
    }

    pub fn permute(&self, dims: &[i64]) -> TResult<Tensor> {
        if dims.len() != self.dim() {
            return Err(format!(
                "permute(sparse_coo): number of dimensions in the tensor input does not match the length of the desired ordering of dimensions i.e. input.dim() = {} is not equal to len(dims) = {}",
                self.dim(),
                dims.len()
            ));
        }
        let mut seen = vec![false; self.dim()];
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for &d in dims {
            let d = wrap_dim(d, self.dim())?;
            if seen[d] {
                return Err("permute(): duplicate dims are not allowed.".into());
            }
            seen[d] = true;
            shape.push(self.shape[d]);
            strides.push(self.strides[d]);
        }
        Ok(self.restride(shape, strides, self.offset))
    }

    pub fn transpose(&self, a: i64, b: i64) -> TResult<Tensor> {
        if self.dim() == 0 {
            return Ok(self.clone());
        }
        let a = wrap_dim(a, self.dim())?;
        let b = wrap_dim(b, self.dim())?;
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape.swap(a, b);
        strides.swap(a, b);
        Ok(self.restride(shape, strides, self.offset))
    }

    pub fn t(&self) -> TResult<Tensor> {
        if self.dim() > 2 {
            return Err(format!("t() expects a tensor with <= 2 dimensions, but self is {}D", self.dim()));
        }
        if self.dim() < 2 {
            return Ok(self.clone());
        }
        self.transpose(0, 1)
    }

    pub fn unsqueeze(&self, dim: i64) -> TResult<Tensor> {
        let d = wrap_dim(dim, self.dim() + 1)?;
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        let stride = if d < self.dim() { strides[d] * shape[d] as isize } else { 1 };
        shape.insert(d, 1);
        strides.insert(d, stride);
        Ok(self.restride(shape, strides, self.offset))
    }

    /// `squeeze()` with no dims removes every size-1 dim; with dims, those of size 1 among them.
    pub fn squeeze(&self, dims: Option<&[i64]>) -> TResult<Tensor> {
        let remove: Vec<usize> = match dims {
            None => (0..self.dim()).filter(|&d| self.shape[d] == 1).collect(),
            Some(ds) => {
                let mut v = Vec::new();
                for &d in ds {
                    let d = wrap_dim(d, self.dim())?;
                    if self.dim() > 0 && self.shape[d] == 1 {
                        v.push(d);
                    }
                }
                v
            }
        };
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for d in 0..self.dim() {
            if !remove.contains(&d) {
                shape.push(self.shape[d]);
                strides.push(self.strides[d]);
            }
        }
        Ok(self.restride(shape, strides, self.offset))
    }

    pub fn expand(&self, sizes: &[i64]) -> TResult<Tensor> {
        if sizes.len() < self.dim() {
            return Err(format!(
                "expand({}, size={}): the number of sizes provided ({}) must be greater or equal to the number of dimensions in the tensor ({})",
                self.type_name(),
                fmt_i64(sizes),
                sizes.len(),
                self.dim()
            ));
        }
        let lead = sizes.len() - self.dim();
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for (i, &want) in sizes.iter().enumerate() {
            if i < lead {
                if want < 0 {
                    return Err(format!("The expanded size of the tensor ({want}) isn't allowed in a leading, non-existing dimension {i}"));
                }
                shape.push(want as usize);
                strides.push(0);
                continue;
            }
            let d = i - lead;
            let have = self.shape[d];
            if want == -1 || want as usize == have {
                shape.push(have);
                strides.push(self.strides[d]);
            } else if have == 1 && want >= 0 {
                shape.push(want as usize);
                strides.push(0);
            } else {
                return Err(format!(
                    "The expanded size of the tensor ({}) must match the existing size ({}) at non-singleton dimension {}.  Target sizes: {}.  Tensor sizes: {}",
                    want,
                    have,
                    i,
                    fmt_i64(sizes),
                    fmt_shape(&self.shape)
                ));
            }
        }
        Ok(self.restride(shape, strides, self.offset))
    }

    /// Broadcast to `shape` (which must be a valid broadcast target).
    pub fn broadcast_to(&self, shape: &[usize]) -> TResult<Tensor> {
        let sizes: Vec<i64> = shape.iter().map(|&d| d as i64).collect();
        self.expand(&sizes)
    }

    pub fn diagonal(&self, offset: i64, d1: i64, d2: i64) -> TResult<Tensor> {
        let a = wrap_dim(d1, self.dim())?;
        let b = wrap_dim(d2, self.dim())?;
        if a == b {
            return Err(format!("diagonal dimensions cannot be identical {d1}, {d2}"));
        }
        let (na, nb) = (self.shape[a] as i64, self.shape[b] as i64);
        let (len, start) = if offset >= 0 {
            ((na.min(nb - offset)).max(0), offset as isize * self.strides[b])
        } else {
            ((nb.min(na + offset)).max(0), -offset as isize * self.strides[a])
        };
        let mut shape = Vec::new();
        let mut strides = Vec::new();
        for d in 0..self.dim() {
            if d != a && d != b {
                shape.push(self.shape[d]);
                strides.push(self.strides[d]);
            }
        }
        shape.push(len as usize);
        strides.push(self.strides[a] + self.strides[b]);
        let off = if len > 0 { (self.offset as isize + start) as usize } else { self.offset };
        Ok(self.restride(shape, strides, off))
    }

    /// `unfold(dimension, size, step)`: a view whose dimension `dimension` holds the windows' starts (every `step`
    /// elements, as many as fit) and whose new last dimension, of `size` elements, each window's elements.
    pub fn unfold(&self, dimension: i64, size: i64, step: i64) -> TResult<Tensor> {
        if self.dim() == 0 {
            return Err("unfold() of a 0-dimensional tensor is not supported".into());
        }
        let d = wrap_dim(dimension, self.dim())?;
        let n = self.shape[d] as i64;
        if size > n {
            return Err(format!("maximum size for tensor at dimension {d} is {n} but size is {size}"));
        }
        if size < 0 {
            return Err(format!("size is {size} but must be >= 0"));
        }
        if step <= 0 {
            return Err(format!("step is {step} but must be > 0"));
        }
        let mut shape = self.shape.clone();
        let mut strides = self.strides.clone();
        shape[d] = ((n - size) / step + 1) as usize;
        strides[d] = self.strides[d] * step as isize;
        shape.push(size as usize);
        strides.push(self.strides[d]);
        Ok(self.restride(shape, strides, self.offset))
    }

    /// `view(shape)`: a view with the new shape, or PyTorch's error when the strides do not allow it.
    pub fn view(&self, shape: &[i64]) -> TResult<Tensor> {
        let shape = infer_shape(shape, self.numel())?;
        match self.view_strides(&shape) {
            Some(strides) => Ok(self.restride(shape, strides, self.offset)),
            None => Err("view size is not compatible with input tensor's size and stride (at least one dimension spans across two contiguous subspaces). Use .reshape(...) instead.".into()),
        }
    }

    /// `reshape(shape)`: a view where the strides allow it, else a contiguous copy.
    pub fn reshape(&self, shape: &[i64]) -> TResult<Tensor> {
        let shape = infer_shape(shape, self.numel())?;
        match self.view_strides(&shape) {
            Some(strides) => Ok(self.restride(shape, strides, self.offset)),
            None => {
                let c = self.contiguous_copy();
                let strides = super::contiguous_strides(&shape);
                Ok(c.restride(shape, strides, 0))
            }
        }
    }

    /// Strides for viewing this tensor with `new_shape`, as ATen's `computeStride` decides.
    fn view_strides(&self, new_shape: &[usize]) -> Option<Vec<isize>> {
        let old_shape = &self.shape;
        let old_strides = &self.strides;
        let mut new_strides = vec![0isize; new_shape.len()];
        if old_shape.is_empty() {
            return Some(vec![1; new_shape.len()]);
        }
        if numel(old_shape) == 0 && old_shape == new_shape {
            return Some(old_strides.clone());
        }
        if numel(old_shape) == 0 {
            return Some(super::contiguous_strides(new_shape));
        }
        let mut view_d = new_shape.len() as isize - 1;
        let mut chunk_base_stride = *old_strides.last().unwrap();
        let mut tensor_numel: isize = 1;
        let mut view_numel: isize = 1;
        for tensor_d in (0..old_shape.len()).rev() {
            tensor_numel *= old_shape[tensor_d] as isize;
            if tensor_d == 0
                || (old_shape[tensor_d - 1] != 1 && old_strides[tensor_d - 1] != tensor_numel * chunk_base_stride)
            {
                while view_d >= 0 && (view_numel < tensor_numel || new_shape[view_d as usize] == 1) {
                    new_strides[view_d as usize] = view_numel * chunk_base_stride;
                    view_numel *= new_shape[view_d as usize] as isize;
                    view_d -= 1;
                }
                if view_numel != tensor_numel {
                    return None;
                }
                if tensor_d > 0 {
                    chunk_base_stride = old_strides[tensor_d - 1];
                    tensor_numel = 1;
                    view_numel = 1;
                }
            }
        }
        if view_d != -1 {
            return None;
        }
        Some(new_strides)
    }

    pub fn flatten(&self, start: i64, end: i64) -> TResult<Tensor> {
        if self.dim() == 0 {
            return self.reshape(&[1]);
        }
        let s = wrap_dim(start, self.dim())?;
        let e = wrap_dim(end, self.dim())?;
        if s > e {
            return Err("flatten() has invalid args: start_dim cannot come after end_dim".into());
        }
        if s == e {
            return Ok(self.clone());
        }
        let mut shape: Vec<i64> = self.shape[..s].iter().map(|&d| d as i64).collect();
        shape.push(self.shape[s..=e].iter().product::<usize>() as i64);
        shape.extend(self.shape[e + 1..].iter().map(|&d| d as i64));
        self.reshape(&shape)
    }

    pub fn unbind(&self, dim: i64) -> TResult<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err("Dimension specified as 0 but tensor has no dimensions".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        (0..self.shape[d]).map(|i| self.select(d as i64, i as i64)).collect()
    }

    /// `split(sizes, dim)` with explicit sizes.
    pub fn split_sizes(&self, sizes: &[i64], dim: i64) -> TResult<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err("split expects at least a 1-dimensional tensor".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        let total: i64 = sizes.iter().sum();
        if total != self.shape[d] as i64 || sizes.iter().any(|&s| s < 0) {
            return Err(format!(
                "split_with_sizes expects split_sizes to sum exactly to {} (input tensor's size at dimension {}), but got split_sizes={}",
                self.shape[d],
                d,
                fmt_i64(sizes)
            ));
        }
        let mut out = Vec::new();
        let mut start = 0;
        for &s in sizes {
            out.push(self.narrow(d as i64, start, s)?);
            start += s;
        }
        Ok(out)
    }

    /// `split(size, dim)`: pieces of `size`, the last one shorter.
    pub fn split_even(&self, size: i64, dim: i64) -> TResult<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err("split expects at least a 1-dimensional tensor".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        if size <= 0 {
            return Err(format!(
                "split_size can only be 0 if dimension size is 0, but got dimension size of {}",
                self.shape[d]
            ));
        }
        let n = self.shape[d] as i64;
        let mut sizes = Vec::new();
        let mut start = 0;
        while start < n {
            sizes.push(size.min(n - start));
            start += size;
        }
        if sizes.is_empty() {
            sizes.push(0);
        }
        self.split_sizes(&sizes, dim)
    }

    pub fn chunk(&self, chunks: i64, dim: i64) -> TResult<Vec<Tensor>> {
        if self.dim() == 0 {
            return Err("chunk expects at least a 1-dimensional tensor".into());
        }
        if chunks <= 0 {
            return Err("chunk expects `chunks` to be greater than 0".into());
        }
        let d = wrap_dim(dim, self.dim())?;
        let n = self.shape[d] as i64;
        let size = (n + chunks - 1) / chunks;
        self.split_even(size.max(1), dim)
    }

    pub fn type_name(&self) -> String {
        format!("torch.{}Tensor{{{}}}", self.dtype().name(), fmt_shape(&self.shape))
    }
}

pub fn fmt_i64(v: &[i64]) -> String {
    format!("[{}]", v.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", "))
}

/// For `meshgrid` over 1-D tensors of these lengths: the shape each input is viewed as, and the common size all are
/// expanded to (`indexing="xy"` swaps the first two dims).
pub fn meshgrid_shapes(numels: &[usize], ij: bool) -> (Vec<Vec<i64>>, Vec<i64>) {
    let n = numels.len();
    let mut sizes: Vec<i64> = numels.iter().map(|&k| k as i64).collect();
    if !ij && n >= 2 {
        sizes.swap(0, 1);
    }
    let views = (0..n)
        .map(|k| {
            let pos = if !ij && n >= 2 && k < 2 { 1 - k } else { k };
            let mut shape = vec![1i64; n];
            shape[pos] = numels[k] as i64;
            shape
        })
        .collect();
    (views, sizes)
}
