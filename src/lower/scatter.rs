//! Writes and reads through index tensors as kernels: `index_put` (`x[:, :, pos] = v`, with or without
//! accumulate), `scatter` (`index_copy_`, `index_add_`, `scatter_`), gathers with several index tensors and
//! `torch.gather` (a load whose coordinate along its dim is read from the index buffer).
//!
//! A scatter kernel's domain is the indexed result (the value's broadcast shape, or the scatter index's shape); it
//! stores each point at the base position whose indexed dims come from the index buffers at run time
//! ([`Atom::Load`]), in place into the base where it is dead, else into a copy of it (never a whole-buffer pass on
//! the host). Points run in row-major order on the C backend, so duplicate indices behave as the reference's
//! sequential loop (the last write wins; an accumulating write adds each). The executor checks every index value
//! before the launch, reading only the index buffer, so a kernel never addresses outside its base.

use egg::Id;

use super::fuse::KernelBuilder;
use super::index::{ravel, Atom, Idx};
use super::kernel::{Expr, Kernel};
use super::plan::{lit, How, IndexCheck, Planner};
use crate::ir::{Node, OpName};
use crate::tensor::ops::Binary;
use crate::tensor::DType;

/// How advanced indices address a base of shape `xs`: the result's shape, and per base dim either the result dim
/// that walks it (a full slice) or the index entry it reads (with that entry's shape).
struct Layout {
    shape: Vec<usize>,
    /// Per base dim: `Ok(result dim)` or `Err(index entry position)`.
    dims: Vec<Result<usize, usize>>,
    /// Where the broadcast index dims start in the result, and their shape.
    adv_at: usize,
    bshape: Vec<usize>,
}

/// The layout of `x[idx]` (PyTorch's advanced indexing): adjacent index tensors put their broadcast dims where the
/// first of them stands, separated ones put them first.
fn layout(xs: &[usize], idx: &[Option<Vec<usize>>]) -> Option<Layout> {
    if idx.len() > xs.len() {
        return None;
    }
    let adv: Vec<usize> = (0..idx.len()).filter(|&d| idx[d].is_some()).collect();
    if adv.is_empty() {
        return None;
    }
    let mut bshape: Vec<usize> = Vec::new();
    for &d in &adv {
        bshape = crate::tensor::ops::broadcast_shapes(&bshape, idx[d].as_ref()?).ok()?;
    }
    let adjacent = adv.windows(2).all(|w| w[1] == w[0] + 1);
    let mut shape = Vec::new();
    let mut dims = vec![Ok(0); xs.len()];
    let adv_at;
    if adjacent {
        for (d, dim) in dims.iter_mut().enumerate().take(adv[0]) {
            *dim = Ok(d);
            shape.push(xs[d]);
        }
        adv_at = shape.len();
        shape.extend(&bshape);
        for (d, &n) in xs.iter().enumerate().skip(adv[adv.len() - 1] + 1) {
            dims[d] = Ok(shape.len());
            shape.push(n);
        }
    } else {
        adv_at = 0;
        shape.extend(&bshape);
        for (d, &n) in xs.iter().enumerate() {
            if !adv.contains(&d) {
                dims[d] = Ok(shape.len());
                shape.push(n);
            }
        }
    }
    for &d in &adv {
        dims[d] = Err(d);
    }
    Some(Layout { shape, dims, adv_at, bshape })
}

/// The index of an operand of shape `from` broadcast to a result indexed by `idx` (right-aligned).
fn broadcast(idx: &[Idx], from: &[usize]) -> Vec<Idx> {
    let pad = idx.len() - from.len();
    from.iter().enumerate().map(|(k, &n)| if n == 1 { Idx::constant(0) } else { idx[pad + k].clone() }).collect()
}

impl Planner<'_> {
    /// The index entries of an `index` (from argument 1) or `index_put` (from argument 3): each an integer tensor's
    /// shape, or `None` for a full slice; `None` overall where an entry is something else.
    fn index_entries(&self, args: &[Id]) -> Option<Vec<Option<Vec<usize>>>> {
        args.iter()
            .map(|&a| match &self.term[a] {
                Node::NoneLit => Some(None),
                _ => match self.tensor(a) {
                    Some((d, s)) if !d.is_float() && d != DType::Bool => Some(Some(s)),
                    _ => None,
                },
            })
            .collect()
    }

    /// Whether `id` is a write through index tensors that a scatter kernel computes.
    pub(super) fn scatter_form(&self, id: Id) -> bool {
        match &self.term[id] {
            Node::Op(OpName::IndexPut, args) if args.len() >= 4 => {
                let Some((_, xs)) = self.tensor(args[0]) else { return false };
                let acc = matches!(self.term[args[1]], Node::Bool(_));
                acc && self.tensor(args[2]).is_some()
                    && self.index_entries(&args[3..]).and_then(|e| layout(&xs, &e)).is_some()
            }
            Node::Op(OpName::Scatter, args) if args.len() == 5 => {
                let (Some((xd, xs)), Some((_, is)), Some((sd, ss))) =
                    (self.tensor(args[0]), self.tensor(args[2]), self.tensor(args[3]))
                else {
                    return false;
                };
                let Some(dim) = lit(self.term, args[1]) else { return false };
                let Ok(dim) = crate::tensor::views::wrap_dim(dim, xs.len()) else { return false };
                // The reference's errors (an index larger than the base or the source off the indexed dim) stay
                // the reference's: such scatters run on the host.
                !xs.is_empty()
                    && xd == sd
                    && matches!(self.term[args[4]], Node::Bool(_))
                    && is.len() == xs.len()
                    && ss.len() == xs.len()
                    && (0..xs.len()).all(|d| is[d] <= ss[d] && (d == dim || is[d] <= xs[d]))
            }
            _ => false,
        }
    }

    /// Whether the kernel IR reads `torch.gather(x, dim, index)`: a load of `x` at the point's position with the
    /// coordinate along `dim` read from `index` (checked before the launch, not wrapped: gather raises on a negative
    /// index). The reference's shape error (an index larger than the input off `dim`) stays the reference's: such a
    /// gather runs on the host.
    pub(super) fn gather_form(&self, id: Id) -> bool {
        let Node::Op(OpName::Gather, args) = &self.term[id] else { return false };
        let (Some((_, xs)), Some((idt, is))) = (self.tensor(args[0]), self.tensor(args[2])) else { return false };
        let Some(Ok(dim)) = lit(self.term, args[1]).map(|d| crate::tensor::views::wrap_dim(d, xs.len())) else {
            return false;
        };
        !xs.is_empty()
            && crate::tensor::index::check_along_dim_index("gather", idt).is_ok()
            && is.len() == xs.len()
            && (0..xs.len()).all(|d| d == dim || is[d] <= xs[d])
    }

    /// `torch.gather(x, dim, index)` read by a kernel at point `idx` of its result (of the index's shape).
    pub(super) fn gather(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let Node::Op(OpName::Gather, args) = &self.term[id] else { return Err("not a gather".into()) };
        let (xd, xs) = self.tensor(args[0]).ok_or("gather input")?;
        let (idt, is) = self.tensor(args[2]).ok_or("gather index")?;
        let dim = crate::tensor::views::wrap_dim(lit(self.term, args[1]).ok_or("gather dim")?, xs.len())?;
        if self.how[usize::from(args[2])] == How::Inline {
            return Err("a gather's index must be a buffer".into());
        }
        let index = kb.arg(args[2], idt);
        // A max's or min's indices along this dim of this table are in range by construction (a max's values read
        // at its indices): no check, which would read the index buffer on the host before the launch.
        if super::prepare::extremum_values(self.term.as_ref(), args).is_none() {
            kb.check(IndexCheck { node: args[2], extent: xs[dim] as i64, dim, wraps: false });
        }
        let mut coord = idx.to_vec();
        coord[dim] = Idx::atom(Atom::Load(index, Box::new(ravel(idx, &is)), xs[dim] as i64, false));
        if self.how[usize::from(args[0])] == How::Inline {
            // The table's expression, at the gathered positions only.
            return self.expr(kb, args[0], &coord);
        }
        let arg = kb.arg(args[0], xd);
        Ok(Expr::Load { arg, at: ravel(&coord, &xs), dtype: xd })
    }

    /// Whether `id` is an operand a gather or scatter kernel reads as positions (an index): it must be a buffer.
    /// (`torch.gather`'s table may be an expression, computed at the gathered positions only.)
    pub(super) fn index_operand_of(&self, id: Id, user: Id) -> bool {
        match &self.term[user] {
            Node::Op(OpName::Index, args) => args[1..].contains(&id),
            Node::Op(OpName::IndexPut, args) => args[3..].contains(&id),
            Node::Op(OpName::Scatter, args) => args[2] == id,
            Node::Op(OpName::Gather, args) => args[2] == id,
            _ => false,
        }
    }

    /// Whether the kernel IR reads `x[idx]` with several index tensors or slices (a gather by [`Atom::Load`]).
    pub(super) fn multi_gather_form(&self, id: Id) -> bool {
        let Node::Op(OpName::Index, args) = &self.term[id] else { return false };
        let Some((_, xs)) = self.tensor(args[0]) else { return false };
        !xs.is_empty() && self.index_entries(&args[1..]).and_then(|e| layout(&xs, &e)).is_some()
    }

    /// The base position (a row-major offset in a buffer of shape `xs`) that point `vars` of layout `l` addresses,
    /// reading the index entries `entries` (buffers) at run time; each is checked before the launch.
    fn indexed_position(
        &self,
        kb: &mut KernelBuilder,
        xs: &[usize],
        l: &Layout,
        entries: &[Id],
        vars: &[Idx],
    ) -> Result<Idx, String> {
        let bvars = &vars[l.adv_at..l.adv_at + l.bshape.len()];
        let mut coord = Vec::new();
        for (d, how) in l.dims.iter().enumerate() {
            coord.push(match *how {
                Ok(r) => vars[r].clone(),
                Err(e) => {
                    let node = entries[e];
                    let (idt, is) = self.tensor(node).ok_or("an index entry")?;
                    if self.how[usize::from(node)] == How::Inline {
                        return Err("an index tensor must be a buffer".into());
                    }
                    let arg = kb.arg(node, idt);
                    kb.check(IndexCheck { node, extent: xs[d] as i64, dim: d, wraps: true });
                    let at = ravel(&broadcast(bvars, &is), &is);
                    Idx::atom(Atom::Load(arg, Box::new(at), xs[d] as i64, true))
                }
            });
        }
        Ok(ravel(&coord, xs))
    }

    /// `x[idx]` read by a kernel at point `idx` of its result: a load at the indexed position.
    pub(super) fn multi_gather(&self, kb: &mut KernelBuilder, id: Id, idx: &[Idx]) -> Result<Expr, String> {
        let Node::Op(OpName::Index, args) = &self.term[id] else { return Err("not a gather".into()) };
        let (xd, xs) = self.tensor(args[0]).ok_or("gather table")?;
        if self.how[usize::from(args[0])] == How::Inline {
            return Err("a gather's table must be a buffer".into());
        }
        let l = self.index_entries(&args[1..]).and_then(|e| layout(&xs, &e)).ok_or("an unsupported gather")?;
        let at = self.indexed_position(kb, &xs, &l, &args[1..], idx)?;
        let arg = kb.arg(args[0], xd);
        Ok(Expr::Load { arg, at, dtype: xd })
    }

    /// Fills `k` (an in-place kernel into the base's buffer or its copy) for the scatter `id`.
    pub(super) fn scatter_kernel(&self, kb: &mut KernelBuilder, id: Id, k: &mut Kernel) -> Result<(), String> {
        let (domain, store, value, add, xd) = match &self.term[id] {
            Node::Op(OpName::IndexPut, args) => {
                let (xd, xs) = self.tensor(args[0]).ok_or("index_put base")?;
                let l = self.index_entries(&args[3..]).and_then(|e| layout(&xs, &e)).ok_or("an index_put")?;
                let vars: Vec<Idx> = l.shape.iter().enumerate().map(|(v, &n)| Idx::var(v, n)).collect();
                let store = self.indexed_position(kb, &xs, &l, &args[3..], &vars)?;
                let value = self.operand(kb, args[2], &vars)?;
                let add = matches!(self.term[args[1]], Node::Bool(b) if b.0);
                (l.shape, store, value, add, xd)
            }
            Node::Op(OpName::Scatter, args) => {
                let (xd, xs) = self.tensor(args[0]).ok_or("scatter base")?;
                let (idt, is) = self.tensor(args[2]).ok_or("scatter index")?;
                let dim = crate::tensor::views::wrap_dim(lit(self.term, args[1]).ok_or("scatter dim")?, xs.len())?;
                if self.how[usize::from(args[2])] == How::Inline {
                    return Err("a scatter's index must be a buffer".into());
                }
                let vars: Vec<Idx> = is.iter().enumerate().map(|(v, &n)| Idx::var(v, n)).collect();
                let arg = kb.arg(args[2], idt);
                kb.check(IndexCheck { node: args[2], extent: xs[dim] as i64, dim, wraps: false });
                let mut coord = vars.clone();
                coord[dim] = Idx::atom(Atom::Load(arg, Box::new(ravel(&vars, &is)), xs[dim] as i64, false));
                let value = self.expr(kb, args[3], &vars)?;
                let add = matches!(self.term[args[4]], Node::Bool(b) if b.0);
                (is, ravel(&coord, &xs), value, add, xd)
            }
            _ => return Err("not a scatter".into()),
        };
        let value = if value.dtype() == xd { value } else { Expr::Cast(xd, Box::new(value)) };
        // Accumulating: the element as it stands (earlier points' writes included) plus the value, computed in the
        // base's dtype as the reference's sequential loop does (an f32 sum rounds once, like double rounded to f32).
        k.value = if add {
            let old = Expr::Load { arg: 0, at: store.clone(), dtype: xd };
            Expr::Binary(Binary::Add, xd, xd, Box::new(old), Box::new(value))
        } else {
            value
        };
        k.domain = domain;
        k.store = store;
        k.in_place = true;
        Ok(())
    }
}
