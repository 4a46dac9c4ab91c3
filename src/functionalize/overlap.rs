//! Overlap checks decided when the program runs.
//!
//! Whether an in-place write overlaps what it reads can depend on positions known only at run time: an index from
//! data (`c[:1] = c[idx[1].item() % 5]`, fuzz seed 40652), or an iteration of a data-dependent loop
//! (`b[0].index_put_(..., b[k - 1])` in a `while` that may break first, fuzz seed 1408). PyTorch raises its overlap
//! error exactly where the positions meet, and writes otherwise. Where the static checks (`views.rs`,
//! `check_at_corners`) find that some positions pass and others fail, or cannot place a read of the written root,
//! the check becomes a run-time assertion on the distance between the write and each read of its root: the
//! distances at which PyTorch's check fails are found here, on the runtime's own check over stand-ins, and the term
//! raises where the distance is one of them.

use super::state::{TRef, FR};
use super::Fz;
use crate::diag::Span;
use crate::tensor::{DType, Scalar, Tensor};

/// At most this many distances between a write and a read of its root are tried.
const MAX_DISTANCES: i64 = 1 << 16;

/// At most this many view elements are compared over all the distances tried for one write.
const MAX_ELEMENTS: usize = 1 << 24;

impl Fz<'_> {
    /// A check of a write to `dst` that reads `inputs` (no conditional views), decided at run time as described in
    /// the module's documentation. `Ok(false)` where it cannot be (the caller refuses the write as before): the
    /// check fails whatever the positions, or too many distances would have to be tried.
    pub(super) fn runtime_overlap(
        &mut self,
        dst: &TRef,
        inputs: &[&TRef],
        check: &impl Fn(&Tensor, &[&Tensor]) -> Result<(), String>,
        span: Span,
    ) -> FR<bool> {
        let base = super::views::BASE as i64;
        let at = |tr: &TRef, off: i64| {
            self.roots[tr.root].dummy.restride(tr.shape.clone(), tr.strides.clone(), (base + off) as usize)
        };
        let d = at(dst, 0);
        // Reads placed at a fixed distance from the write (or of another root) are checked here, once.
        let mut fixed = Vec::new();
        let mut moving = Vec::new();
        for &t in inputs {
            let rel = t.off.add(&dst.off.neg());
            match rel.as_const() {
                _ if t.root != dst.root => fixed.push(at(t, 0)),
                Some(c) => fixed.push(at(t, c)),
                None => moving.push((t, rel)),
            }
        }
        // (Some checks read their first input: with none fixed, the write's own check is made with a moving read
        // placed where it meets nothing, below.)
        if !fixed.is_empty() && check(&d, &fixed.iter().collect::<Vec<_>>()).is_err() {
            return Ok(false);
        }
        let mut asserts = Vec::new();
        let mut elements = 0usize;
        for (t, rel) in moving {
            let (dlo, dhi) = crate::ir::geometry::span(&dst.shape, &dst.strides, 0);
            let (ilo, ihi) = crate::ir::geometry::span(&t.shape, &t.strides, 0);
            if dlo > dhi || ilo > ihi {
                continue; // A view of no elements overlaps nothing.
            }
            // Only distances at which the spans meet can fail.
            let (lo, hi) = (dlo - ihi, dhi - ilo);
            if hi - lo + 1 > MAX_DISTANCES || lo.abs().max(hi.abs()) >= base {
                return Ok(false);
            }
            elements += (hi - lo + 1) as usize * (d.numel() + t.shape.iter().product::<usize>());
            if elements > MAX_ELEMENTS {
                return Ok(false);
            }
            // Where the spans do not meet, only the write's own layout can fail the check, at every distance.
            if check(&d, &[&at(t, hi + 1)]).is_err() {
                return Ok(false);
            }
            let mut failing: Vec<(i64, i64)> = Vec::new();
            for k in lo..=hi {
                if check(&d, &[&at(t, k)]).is_err() {
                    match failing.last_mut() {
                        Some(last) if last.1 == k - 1 => last.1 = k,
                        _ => failing.push((k, k)),
                    }
                }
            }
            if !failing.is_empty() {
                asserts.push((rel, failing));
            }
        }
        for (rel, failing) in asserts {
            let ok = self.outside_intervals(&rel, &failing).map_err(Self::tyerr(span))?;
            self.runtime_assert(ok, span)?;
        }
        Ok(true)
    }

    /// A 0-dim bool term: whether the run-time value of `rel` lies outside every interval of `failing`.
    fn outside_intervals(
        &mut self,
        rel: &super::state::Affine,
        failing: &[(i64, i64)],
    ) -> Result<super::state::TId, String> {
        use crate::ir::OpName;
        let r = self.affine_term(rel);
        let r = self.t.op(OpName::ITensor, vec![r])?;
        let r = self.t.at(r);
        let mut ok: Option<super::state::TId> = None;
        for &(a, b) in failing {
            let cmp = |this: &mut Self, op: OpName, v: i64| -> Result<super::state::TId, String> {
                let c = this.full(&[], DType::I64, Scalar::I(v))?;
                let c = this.t.at(c);
                this.t.op(op, vec![r, c])
            };
            let outside = if a == b {
                cmp(self, OpName::Ne, a)?
            } else {
                let (below, above) = (cmp(self, OpName::Lt, a)?, cmp(self, OpName::Gt, b)?);
                let (below, above) = (self.t.at(below), self.t.at(above));
                self.t.op(OpName::BitOr, vec![below, above])?
            };
            ok = Some(match ok {
                None => outside,
                Some(prev) => {
                    let (p, o) = (self.t.at(prev), self.t.at(outside));
                    self.t.op(OpName::BitAnd, vec![p, o])?
                }
            });
        }
        ok.ok_or_else(|| "internal: no interval to check".to_string())
    }
}
