//! Matmuls fused into their elementwise readers (issue #16's "cell epilogues across chunks"): where every kernel
//! that reads a matmul's result is elementwise (nasrnn's cell reads eight column ranges of `h @ w_h` at the same
//! column), each computes the dot products it needs per output element itself ([`super::kernel::Dot`]), so the
//! per-step matmul and the cell are one launch.
//!
//! Legality: the readers read the matmul's operand buffers when they run, later than the matmul would have, so no
//! operand buffer may be written in place anywhere in the plan (a weight updated inside the loop, the loop state a
//! reader itself writes); the readers must be in the matmul's scope (else a loop would recompute it per iteration);
//! operands must be f32 buffers read at positions that step by a constant along the reduction. Whether it pays is
//! the cost model's: the readers may not compute more products than the matmul does, and the whole plan is planned
//! both ways where a matmul was fused, the cheaper by [`super::estimate::decision_cost`] kept.

use egg::Id;

use super::fuse::KernelBuilder;
use super::kernel::{dot_reads, Expr};
use super::plan::{How, Plan, Planner};
use crate::ir::{Node, OpName};
use crate::tensor::DType;

/// `with` (planned with matmuls fused into their readers) where it fused none or is predicted no dearer than the
/// plan `without` them, else that plan, its notes saying why. `FUNCFUSE_DOTS=keep` keeps `with` whatever the
/// prediction and `=never` takes `without`, to measure both.
pub(super) fn keep_cheaper(
    with: Plan,
    without: impl FnOnce() -> Result<Plan, String>,
    cost: &dyn Fn(&Plan) -> f64,
) -> Result<Plan, String> {
    let fused = with.how.iter().zip(with.term.as_ref()).any(|(h, n)| *h == How::Inline && is_matmul(n))
        || with.kernels.iter().any(|k| !k.pre.is_empty());
    if !fused {
        return Ok(with);
    }
    crate::limits::check()?;
    let mut plain = without()?;
    let force = std::env::var("FUNCFUSE_DOTS").ok();
    let (a, b) = (cost(&with), cost(&plain));
    if force.as_deref() == Some("keep") || (force.as_deref() != Some("never") && a <= b) {
        return Ok(with);
    }
    plain.dot_notes =
        with.dot_notes.iter().map(|n| format!("{n} (not kept: the plan with it {a:.3e}, without {b:.3e})")).collect();
    Ok(plain)
}

fn is_matmul(n: &Node) -> bool {
    matches!(n, Node::Op(OpName::Matmul, _))
}

impl Planner<'_> {
    /// Fuses each matmul that may be into its readers (ours only), recording for `explain` what it did and why not.
    pub(super) fn fuse_dots(&mut self, scope: &[Option<Id>]) {
        let pinned: hashbrown::HashSet<Id> =
            self.before.iter().flat_map(|(k, v)| std::iter::once(*k).chain(v.iter().copied())).collect();
        for i in 0..self.term.as_ref().len() {
            let m = Id::from(i);
            if !matches!(self.term[m], Node::Op(OpName::Matmul, _)) || self.how[i] != How::Kernel(()) {
                continue;
            }
            if self.epilogue.values().any(|&r| r == m) {
                continue;
            }
            let outcome = if pinned.contains(&m) {
                Err("an in-place write waits for it".to_string())
            } else {
                self.try_dots(m, scope)
            };
            self.dot_notes.push(match outcome {
                Ok(readers) => {
                    let names: Vec<String> = readers.iter().map(|r| format!("${r}")).collect();
                    format!("${m} matmul: computed as dot products in its readers {}", names.join(", "))
                }
                Err(why) => format!("${m} matmul: a kernel of its own, not fused into its readers: {why}"),
            });
        }
    }

    /// Makes matmul `m` inline in its readers where that is legal and computes no more products; returns them.
    fn try_dots(&mut self, m: Id, scope: &[Option<Id>]) -> Result<Vec<Id>, String> {
        let (dtype, shape) = self.tensor(m).ok_or("not a tensor")?;
        if dtype != DType::F32 {
            return Err("not f32".into());
        }
        let readers = self.kernel_readers(m)?;
        let mut earlier = 0;
        for &r in &readers {
            let (ri, mi) = (usize::from(r), usize::from(m));
            if scope[ri].is_none() || scope[ri] != scope[mi] || self.dependent[ri] != self.dependent[mi] {
                return Err(format!("${r} reads it in another scope (a loop would compute it per iteration)"));
            }
            earlier += self.dot_products(r)?.0;
        }
        self.how[usize::from(m)] = How::Inline;
        let result = self.check_readers(m, &shape, &readers, earlier);
        if result.is_err() {
            self.how[usize::from(m)] = How::Kernel(());
        }
        result.map(|()| readers)
    }

    /// The materialized kernels that read `m` through fused nodes; an error where some reader is not an elementwise
    /// kernel (the host, a fallback, a reduction, a scatter, an epilogue host).
    fn kernel_readers(&self, m: Id) -> Result<Vec<Id>, String> {
        let mut out = Vec::new();
        let mut stack = self.users[usize::from(m)].clone();
        let mut seen = hashbrown::HashSet::new();
        while let Some(u) = stack.pop() {
            if !seen.insert(u) {
                continue;
            }
            let ui = usize::from(u);
            if let (How::InPlace(_), Some(base)) = (&self.how[ui], self.in_place_base(u)) {
                // The write needs the buffer it writes into (an empty view's write too).
                if base == m || self.how[usize::from(base)] == How::Inline {
                    return Err(format!("${u} writes into it in place"));
                }
            }
            match self.how[ui] {
                How::Inline if !matches!(self.term[u], Node::Op(OpName::Matmul, _)) => {
                    stack.extend(self.users[ui].iter().copied())
                }
                How::Kernel(_) | How::InPlace(_)
                    if !self.reduction(u)
                        && !self.epilogue.contains_key(&u)
                        && !matches!(self.term[u], Node::Op(OpName::IndexPut | OpName::Scatter, _)) =>
                {
                    out.push(u)
                }
                How::Host | How::Fallback => return Err(format!("${u} is read by the host")),
                _ => return Err(format!("${u} is not an elementwise kernel")),
            }
        }
        out.sort();
        Ok(out)
    }

    /// Builds each reader with `m` inline: every one must build, its dots may read no buffer written in place, and
    /// together they may compute no more products than the matmul.
    fn check_readers(&self, m: Id, shape: &[usize], readers: &[Id], earlier: usize) -> Result<(), String> {
        let Node::Op(_, args) = &self.term[m] else { return Err("not an op".into()) };
        let (_, sa) = self.tensor(args[0]).ok_or("matmul operand")?;
        let own = shape.iter().product::<usize>() * sa.last().copied().unwrap_or(1);
        let mut products = 0;
        for &r in readers {
            let (n, value) = self.dot_products(r)?;
            let points: usize = self.tensor(r).map_or(0, |(_, s)| s.iter().product());
            if points > super::kernel::MAX_DOT_POINTS {
                return Err(format!("${r} has {points} points, more than {}", super::kernel::MAX_DOT_POINTS));
            }
            products += n;
            if let Expr::Dot(_) = value {
                // Only the dot: nothing left to fuse it with.
                return Err(format!("${r} is the matmul's value alone"));
            }
        }
        // The products of matmuls fused into these readers before this one.
        let products = products.saturating_sub(earlier);
        if products > own {
            return Err(format!("its readers would compute {products} products, the matmul {own}"));
        }
        Ok(())
    }

    /// The products reader `r`'s dots compute per launch and its value; an error where it does not build or a dot
    /// reads a buffer written in place.
    fn dot_products(&self, r: Id) -> Result<(usize, Expr), String> {
        let mut kb = KernelBuilder::default();
        let k = self.kernel(&mut kb, r, String::new()).map_err(|e| format!("${r}: {e}"))?;
        let mut dots = Vec::new();
        dot_reads(&k.value, &mut dots);
        let mut products = 0;
        for (arg, len) in &dots {
            let node = if *arg == 0 { r } else { kb.args[arg - 1] };
            if *arg == 0 || self.written_in_place(node) {
                return Err(format!("${r} would read ${node} after it is written in place"));
            }
            // Two reads per dot.
            products += k.domain.iter().product::<usize>() * len;
        }
        Ok((products / 2, k.value))
    }

    /// Whether some kernel of the plan writes into `x`'s buffer in place (an assign or a scatter with base `x`).
    pub(super) fn written_in_place(&self, x: Id) -> bool {
        self.how
            .iter()
            .enumerate()
            .any(|(i, h)| matches!(h, How::InPlace(_)) && self.in_place_base(Id::from(i)) == Some(x))
    }

    /// The buffer node `n` writes into where it is planned in place: an assign's or a scatter's base.
    pub(super) fn in_place_base(&self, n: Id) -> Option<Id> {
        match &self.term[n] {
            Node::Assign([b, _, _]) => Some(*b),
            Node::Op(OpName::IndexPut | OpName::Scatter, a) => a.first().copied(),
            _ => None,
        }
    }
}
