//! Small values computed by the kernels that read them (issue #16): seq2seq's softmax over the 50 rows of its memory
//! launched its max and sum, then the division, as kernels of their own at every step, between the energies and
//! the GEMV that reads the softmax. A node of at most [`MAX_PRE_NUMEL`] elements (a reduction folding at most
//! [`MAX_PRE_FOLD`] per element, at most [`MAX_PRE_OWN`] in all) is instead computed by each kernel that reads it,
//! before that kernel's loop nest (a "pre", [`super::kernel::Kernel::pre`]), into a local array its points read at
//! any element. A pre may read earlier pres of the same kernel (the softmax reads its sum, which reads its max).
//!
//! Legality, as for matmuls fused into their readers (`dots.rs`): a reader computes the value when it runs, later
//! than the value's own kernel would have, so no buffer it reads may be written in place anywhere in the plan, nor
//! may it be a write in place itself; its readers must be kernels in its scope (else a loop would recompute it per
//! iteration; the host reads buffers). Cost: on C a launch computes each pre once, by the layout its own kernel
//! would take; on CUDA every block computes its kernel's pres (its threads share the points, into shared memory),
//! so a reader's blocks times the pre's folded elements is at most [`MAX_PRE_WORK`]. Whether it pays is the cost
//! model's (the plan is planned both ways, as with dots, [`super::dots::keep_cheaper`]).

use egg::Id;

use super::fuse::KernelBuilder;
use super::kernel::Kernel;
use super::plan::{How, Planner};
use crate::ir::{Node, OpName};

/// At most this many elements has a value computed as a pre.
pub const MAX_PRE_NUMEL: usize = 64;
/// At most this many elements folds each element of a pre.
pub const MAX_PRE_FOLD: usize = 512;
/// At most this many elements folds a pre in all, with the pres it reads (seq2seq's energies, a GEMV of 50 by 256,
/// with the softmax over them).
pub const MAX_PRE_OWN: usize = 1 << 14;
/// At most this many folded elements per launch of a reader, over its CUDA blocks (each computes every pre of its
/// kernel), counted as [`PRE_BLOCK`] points each.
pub const MAX_PRE_WORK: usize = 1 << 20;
const PRE_BLOCK: usize = 256;

const HOST: &str = " is read by the host";

/// The elements kernel `k` (a pre) folds or computes, its own pres and the dots of its value included.
fn pre_work(k: &Kernel) -> usize {
    let (_, ops) = Kernel { pre: Vec::new(), ..k.clone() }.traffic(std::iter::empty());
    k.points().max(ops as usize) + k.pre.iter().map(pre_work).sum::<usize>()
}

impl Planner<'_> {
    /// Makes each small value that may be a pre of its readers (ours only), latest first (so that a value read
    /// only by a pre is then read through it), recording for `explain` what it did and why not.
    pub(super) fn fuse_pres(&mut self, scope: &[Option<Id>]) {
        let pinned: hashbrown::HashSet<Id> =
            self.before.iter().flat_map(|(k, v)| std::iter::once(*k).chain(v.iter().copied())).collect();
        for i in (0..self.term.as_ref().len()).rev() {
            let r = Id::from(i);
            let candidate = self.how[i] == How::Kernel(())
                && matches!(self.term[r], Node::Op(op, _) if !matches!(op, OpName::IndexPut | OpName::Scatter))
                && !self.epilogue.contains_key(&r)
                && !self.epilogue.values().any(|&x| x == r);
            if !candidate || !self.small(r) {
                continue;
            }
            let outcome = if pinned.contains(&r) {
                Err("an in-place write waits for it".to_string())
            } else {
                self.try_pre(r, scope)
            };
            if outcome.as_ref().is_err_and(|e| e.ends_with(HOST)) {
                // Not worth a note: the host reads most small values (`.item()`, loop state, outputs).
                continue;
            }
            let op = match &self.term[r] {
                Node::Op(op, _) => op.to_string(),
                other => other.to_string(),
            };
            self.dot_notes.push(match outcome {
                Ok(readers) => {
                    let names: Vec<String> = readers.iter().map(|r| format!("${r}")).collect();
                    format!("${r} {op}: computed before the loop nest of its readers {}", names.join(", "))
                }
                Err(why) => format!("${r} {op}: a kernel of its own, not computed by its readers: {why}"),
            });
        }
    }

    /// Whether `r` has at most [`MAX_PRE_NUMEL`] elements, each folding at most [`MAX_PRE_FOLD`] where it is a
    /// reduction.
    fn small(&self, r: Id) -> bool {
        let Node::Op(_, args) = &self.term[r] else { return false };
        let Some((_, out)) = self.tensor(r) else { return false };
        let n: usize = out.iter().product();
        if n == 0 || n > MAX_PRE_NUMEL {
            return false;
        }
        if !self.reduction(r) {
            return true;
        }
        let Some((_, input)) = args.first().and_then(|&x| self.tensor(x)) else { return false };
        let fold = match self.term[r] {
            // A matmul folds its left operand's last dim.
            Node::Op(OpName::Matmul, _) => input.last().copied().unwrap_or(1),
            _ => input.iter().product::<usize>() / n,
        };
        fold <= MAX_PRE_FOLD
    }

    /// Makes node `r` a pre of its readers where that is legal and every reader still builds; returns them.
    fn try_pre(&mut self, r: Id, scope: &[Option<Id>]) -> Result<Vec<Id>, String> {
        let mut kb = KernelBuilder::default();
        let k = self.kernel(&mut kb, r, String::new())?;
        for &x in &kb.args {
            if self.written_in_place(x) {
                return Err(format!("it reads ${x}, which is written in place"));
            }
        }
        if k.ordered() || k.in_place {
            return Err("its kernel writes in place".into());
        }
        let work = pre_work(&k);
        if work > MAX_PRE_OWN {
            return Err(format!("it folds {work} elements, more than {MAX_PRE_OWN}"));
        }
        let readers = self.pre_readers(r)?;
        for &u in &readers {
            let (ui, ri) = (usize::from(u), usize::from(r));
            if scope[ui].is_none() || scope[ui] != scope[ri] || self.dependent[ui] != self.dependent[ri] {
                return Err(format!("${u} reads it in another scope (a loop would compute it per iteration)"));
            }
        }
        self.how[usize::from(r)] = How::Inline;
        self.pres.insert(r);
        let checked = readers.iter().try_for_each(|&u| self.reader_fits(u));
        if let Err(e) = checked {
            self.how[usize::from(r)] = How::Kernel(());
            self.pres.remove(&r);
            return Err(e);
        }
        Ok(readers)
    }

    /// Whether reader `u` builds with the pres planned so far, and all of them together fold at most
    /// [`MAX_PRE_OWN`] elements, at most [`MAX_PRE_WORK`] over its CUDA blocks (a pre that reads another pre
    /// was bounded alone when it was decided: its reader's total is bounded here).
    fn reader_fits(&self, u: Id) -> Result<(), String> {
        let k = self
            .kernel(&mut KernelBuilder::default(), u, String::new())
            .map_err(|e| format!("${u} does not build with it: {e}"))?;
        let work: usize = k.pre.iter().map(pre_work).sum();
        if work > MAX_PRE_OWN {
            return Err(format!("${u}'s pres would fold {work} elements, more than {MAX_PRE_OWN}"));
        }
        let points: usize = k.domain.iter().product();
        if points.div_ceil(PRE_BLOCK).saturating_mul(work) > MAX_PRE_WORK {
            return Err(format!("${u} has {points} points: each block of {PRE_BLOCK} would fold {work} elements"));
        }
        Ok(())
    }

    /// The materialized kernels that read `r` through fused nodes (other pres among them); an error where the host
    /// reads it.
    fn pre_readers(&self, r: Id) -> Result<Vec<Id>, String> {
        let mut out = Vec::new();
        let mut stack = self.users[usize::from(r)].clone();
        let mut seen = hashbrown::HashSet::new();
        while let Some(u) = stack.pop() {
            if !seen.insert(u) {
                continue;
            }
            let ui = usize::from(u);
            if let (How::InPlace(_) | How::CopyInPlace(_), Some(base)) = (&self.how[ui], self.in_place_base(u)) {
                if base == r || self.how[usize::from(base)] == How::Inline {
                    return Err(format!("${u} writes into it in place"));
                }
            }
            // The reduction of a kernel with an epilogue: that kernel reads it.
            if let Some((&reader, _)) = self.epilogue.iter().find(|(_, &x)| x == u) {
                stack.push(reader);
                continue;
            }
            match self.how[ui] {
                How::Inline if !matches!(self.term[u], Node::Op(OpName::Matmul, _)) => {
                    stack.extend(self.users[ui].iter().copied())
                }
                How::Kernel(_) | How::InPlace(_) | How::CopyInPlace(_) => out.push(u),
                How::Host | How::Fallback => return Err(format!("${u}{HOST}")),
                _ => return Err(format!("${u} is not a kernel")),
            }
        }
        out.sort();
        Ok(out)
    }
}
