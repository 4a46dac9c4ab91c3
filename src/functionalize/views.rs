//! Views, reads and writes: the SSA core. A read is an `access` of the root's current version; a write replaces the
//! version by an `assign`; view operations compose into one (shape, strides, affine offset).

use std::collections::HashMap;
use std::rc::Rc;

use egg::Id;

use super::state::{diag, needs_static, Affine, Sym, TId, TIdKey, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::{ops, DType, Tensor};

/// Dummy views carry their static offset above this base, so that view arithmetic never goes below zero.
pub(super) const BASE: usize = 1 << 40;

/// At most this many combinations of the views that conditional views may be are tried by an overlap check.
const MAX_CHOICES: usize = 256;

/// At most this many placements of run-time indices are tried by an overlap check; past it, views placed by them are
/// not checked.
const MAX_PLACEMENTS: usize = 4096;

/// At most this many iterations of the loops around a write are visited by an overlap check; past it, a write whose
/// overlap with what it reads moves with the loops is refused.
const MAX_ITERATIONS: usize = 1 << 16;

/// At most this many view elements are compared by the overlap checks of one write, over all its placements.
const MAX_CHECKED_ELEMENTS: usize = 1 << 26;

impl Fz<'_> {
    /// The integer term of an affine form at the current depth.
    pub(super) fn affine_term(&mut self, a: &Affine) -> Id {
        let mut acc = self.t.leaf(Node::Int(a.c));
        let depth = self.t.depth();
        for (s, k) in &a.terms {
            let v = match s {
                Sym::Loop(level) => {
                    let d = self.t.leaf(Node::Int((depth - 1 - level) as i64));
                    self.t.leaf(Node::Iter(d))
                }
                Sym::Opaque(key) => self.t.at(key.tid()),
            };
            let v = if *k == 1 {
                v
            } else {
                let kk = self.t.leaf(Node::Int(*k));
                self.t.leaf(Node::Op(OpName::IMul, vec![kk, v]))
            };
            acc = if a.c == 0 && acc == self.t.leaf(Node::Int(0)) {
                v
            } else {
                self.t.leaf(Node::Op(OpName::IAdd, vec![acc, v]))
            };
        }
        acc
    }

    fn view_node(&mut self, tr: &TRef) -> Id {
        let shape: Vec<i64> = tr.shape.iter().map(|&d| d as i64).collect();
        let strides: Vec<i64> = tr.strides.iter().map(|&d| d as i64).collect();
        let s = self.t.b.ints(&shape);
        let st = self.t.b.ints(&strides);
        let off = self.affine_term(&tr.off);
        self.t.leaf(Node::View([s, st, off]))
    }

    /// The value seen through `tr` now: `(access VERSION VIEW)`; for a conditional view, the view its condition
    /// chooses.
    pub(super) fn read(&mut self, tr: &TRef, span: Span) -> FR<TId> {
        match tr.alt {
            _ if self.drawn_arith => {}
            None => self.check_drawn(tr, span)?,
            Some(_) => tr.choices().iter().try_for_each(|c| self.check_drawn(c, span))?,
        }
        self.read_raw(tr, span)
    }

    /// `read`, drawn elements included (`super::drawn`: a copy that keeps them drawn).
    pub(super) fn read_raw(&mut self, tr: &TRef, span: Span) -> FR<TId> {
        if let Some(alt) = &tr.alt {
            let a = self.read_raw(&tr.primary(), span)?;
            let b = self.read_raw(&alt.1, span)?;
            return self.select(alt.0, a, b, span);
        }
        let v = self.roots[tr.root].version;
        let version = self.t.at(v);
        // Reading a root's whole storage in its own shape is the version itself.
        if tr.off.as_const() == Some(0)
            && tr.shape == self.roots[tr.root].shape
            && tr.strides == crate::tensor::contiguous_strides(&tr.shape)
        {
            return Ok(TId { id: version, depth: self.t.depth() });
        }
        let view = self.view_node(tr);
        self.t.add(Node::Access([version, view])).map_err(Self::tyerr(span))
    }

    /// `a` where the 0-dim bool `cond` holds, else `b`: `(get (if COND (tuple A) (tuple B)) 0)`.
    pub(super) fn select(&mut self, cond: TId, a: TId, b: TId, span: Span) -> FR<TId> {
        let (c, a, b) = (self.t.at(cond), self.t.at(a), self.t.at(b));
        let ta = self.t.add(Node::Tuple(vec![a].into())).map_err(Self::tyerr(span))?;
        let tb = self.t.add(Node::Tuple(vec![b].into())).map_err(Self::tyerr(span))?;
        let node = self.t.add(Node::If([c, ta.id, tb.id])).map_err(Self::tyerr(span))?;
        let zero = self.t.leaf(Node::Int(0));
        self.t.add(Node::Get([node.id, zero])).map_err(Self::tyerr(span))
    }

    /// Replaces the elements seen through `tr` by `value` (broadcast and cast as `copy_`): a new version of the root.
    /// Through a conditional view, each root it may refer to gets the write under the predicate that chooses it.
    pub(super) fn write(&mut self, tr: &TRef, value: TId, span: Span) -> FR<()> {
        self.write_under(tr, value, &mut Vec::new(), span)
    }

    /// `write` of the views of `tr` chosen when every `(cond, holds)` of `guards` is met.
    fn write_under(&mut self, tr: &TRef, value: TId, guards: &mut Vec<(TId, bool)>, span: Span) -> FR<()> {
        if let Some(alt) = &tr.alt {
            guards.push((alt.0, true));
            self.write_under(&tr.primary(), value, guards, span)?;
            guards.last_mut().expect("pushed above").1 = false;
            self.write_under(&alt.1, value, guards, span)?;
            guards.pop();
            return Ok(());
        }
        let old = self.roots[tr.root].version;
        let version = self.t.at(old);
        let v = self.t.at(value);
        let view = self.view_node(tr);
        let mut new = self.t.add(Node::Assign([version, view, v])).map_err(Self::tyerr(span))?;
        for &(cond, holds) in guards.iter().rev() {
            new = if holds { self.select(cond, new, old, span)? } else { self.select(cond, old, new, span)? };
        }
        self.roots[tr.root].version = new;
        self.roots[tr.root].written = true;
        if guards.is_empty() {
            self.undraw(tr, span)?;
        }
        Ok(())
    }

    /// A new root holding `value`, laid out like `layout` (PyTorch's rule for elementwise results) or contiguously.
    ///
    /// For a conditional view the layout is each alternative's: where they differ, the result is a conditional view
    /// of one new root, laid out as the arm that ran would have laid it out.
    pub(super) fn fresh(&mut self, value: TId, layout: Option<&TRef>, span: Span) -> FR<TRef> {
        let (dtype, shape) = self.tensor_ty(value, span)?;
        if let Some(l) = layout {
            let layout_of = |v: &TRef| -> Result<Tensor, String> {
                let d = Tensor::zeros(DType::F32, &[])?.restride(v.shape.clone(), v.strides.clone(), 0);
                Ok(Tensor::empty_like_layout(&d, DType::F32)?)
            };
            let strides_of = |v: &TRef| layout_of(v).map(|e| e.strides.clone());
            let laid: Vec<Tensor> = l.choices().iter().map(layout_of).collect::<Result<_, _>>()?;
            let each: Vec<Vec<isize>> = laid.iter().map(|e| e.strides.clone()).collect();
            if laid.iter().any(|e| !e.is_contiguous()) {
                let n: usize = shape.iter().product();
                let zeros = self.full(&[n], dtype, crate::tensor::Scalar::I(0))?;
                let root = self.new_root(zeros, dtype, vec![n], None);
                let tr = if each.iter().all(|s| *s == each[0]) {
                    TRef { root, shape, strides: each[0].clone(), off: Affine::constant(0), alt: None }
                } else {
                    each_view(l, &|v| {
                        v.strides = strides_of(v).expect("computed above");
                        v.root = root;
                        v.off = Affine::constant(0);
                    })
                };
                self.write(&tr, value, span)?;
                self.roots[root].written = false;
                return Ok(tr);
            }
        }
        let root = self.new_root(value, dtype, shape, None);
        Ok(self.natural_view(root))
    }

    /// A dummy tensor with `tr`'s shape and strides, for reusing the runtime's view arithmetic and checks.
    pub(super) fn dummy(&self, tr: &TRef, _dtype: DType) -> Tensor {
        Tensor::zeros(DType::F32, &[]).expect("one element").restride(tr.shape.clone(), tr.strides.clone(), BASE)
    }

    /// Applies a static view operation to `tr` (to each view of a conditional view: they share shape and strides).
    pub(super) fn tview(&self, tr: &TRef, f: impl Fn(&Tensor) -> Result<Tensor, String>) -> Result<TRef, String> {
        self.tview_dyn(tr, &f)
    }

    fn tview_dyn(&self, tr: &TRef, f: &dyn Fn(&Tensor) -> Result<Tensor, String>) -> Result<TRef, String> {
        let d = self.dummy(tr, self.roots[tr.root].dtype);
        let r = f(&d)?;
        if !r.same_storage(&d) {
            return Err("internal: a view operation copied".into());
        }
        let alt = match &tr.alt {
            Some(a) => Some(Rc::new((a.0, self.tview_dyn(&a.1, f)?))),
            None => None,
        };
        Ok(TRef {
            root: tr.root,
            shape: r.shape.clone(),
            strides: r.strides.clone(),
            off: tr.off.add(&Affine::constant(r.offset as i64 - BASE as i64)),
            alt,
        })
    }

    /// The values the loop variables in scope take at their first and last iterations (for static checks).
    fn corners(&self) -> Vec<HashMap<usize, i64>> {
        let mut out = vec![HashMap::new()];
        for (level, f) in self.t.frames.iter().enumerate() {
            if let Some((a, b)) = f.range {
                let mut next = Vec::new();
                for m in &out {
                    for v in [a, b] {
                        let mut m2 = m.clone();
                        m2.insert(level, v);
                        next.push(m2);
                    }
                }
                out = next;
            }
        }
        out
    }

    /// An affine form's value under an assignment of loop variables; `None` if it has other unknowns.
    pub(super) fn eval_affine(a: &Affine, vals: &HashMap<usize, i64>) -> Option<i64> {
        let mut v = a.c;
        for (s, k) in &a.terms {
            match s {
                Sym::Loop(l) => v += k * vals.get(l)?,
                Sym::Opaque(_) => return None,
            }
        }
        Some(v)
    }

    /// PyTorch's overlap checks of an in-place write, on every corner of the iteration space that is known.
    pub(super) fn check_inplace(&mut self, dst: &TRef, inputs: &[&TRef], internal: bool, span: Span) -> FR<()> {
        self.check_at_corners(dst, inputs, span, |d, ins| ops::check_overlap(d, ins, internal))
    }

    /// A write of only some elements (`index_put_`, `x[idx] = v`; `masked_fill_` has [`Fz::masked_fill_expanded`])
    /// into a view whose elements share memory (an `expand`): PyTorch writes each chosen element once, while a
    /// functional write of the view's whole value would also write its unchosen aliases back over them. Refused
    /// rather than computed wrong.
    pub(super) fn check_partial_write(&self, dst: &TRef, what: &str, span: Span) -> FR<()> {
        // A view of no elements writes nothing.
        let writes = dst.shape.iter().all(|&n| n > 0);
        if writes && self.some_choice_shares_memory(dst) {
            return diag(
                span,
                format!("`{what}` into a tensor whose elements share memory (an `expand`ed view) is not supported"),
            );
        }
        Ok(())
    }

    /// Whether some view `t` may be has elements that share memory (an `expand`).
    pub(super) fn some_choice_shares_memory(&self, t: &TRef) -> bool {
        t.choices().iter().any(|c| self.dummy(c, self.roots[c.root].dtype).has_internal_overlap())
    }

    /// Whether `dst` is a conditional view one of whose choices has elements that share memory (an `expand`): a
    /// write of some of its elements is then made on each choice by [`Fz::on_each_choice`], since the exact forms
    /// of such writes (e.g. [`Fz::masked_fill_expanded`]) are per memory view.
    pub(super) fn conditional_shared(&self, dst: &TRef) -> bool {
        dst.alt.is_some() && dst.shape.iter().all(|&n| n > 0) && self.some_choice_shares_memory(dst)
    }

    /// Runs the write `f` on the view a conditional view `dst` chooses: on each choice from the same state, then
    /// every root one of them changed takes the version of the choice its condition picks.
    pub(super) fn on_each_choice(
        &mut self,
        dst: &TRef,
        span: Span,
        f: &mut dyn FnMut(&mut Self, &TRef) -> FR<()>,
    ) -> FR<()> {
        let Some(alt) = &dst.alt else { return f(self, dst) };
        let before: Vec<(TId, bool)> = self.roots.iter().map(|r| (r.version, r.written)).collect();
        f(self, &dst.primary())?;
        let chosen: Vec<(TId, bool)> = self.roots[..before.len()].iter().map(|r| (r.version, r.written)).collect();
        for (r, &(v, w)) in self.roots.iter_mut().zip(&before) {
            (r.version, r.written) = (v, w);
        }
        self.on_each_choice(&alt.1, span, f)?;
        // Roots the choices made (after `before`) are their own temporaries; the roots from before take the
        // version their condition picks, and count as written if either choice wrote them (as for an `if`'s arms).
        for (i, (v, w)) in chosen.into_iter().enumerate() {
            if v != self.roots[i].version {
                let other = self.roots[i].version;
                self.roots[i].version = self.select(alt.0, v, other, span)?;
            }
            self.roots[i].written |= w;
        }
        Ok(())
    }

    /// `masked_fill_` into a view whose elements share memory (an `expand`): PyTorch writes the value into each
    /// memory position that any masked element refers to, so the write is exact on the view with the expanded dims
    /// reduced to one entry: `where(any(mask over the expanded dims), value, old)`. `value` is the fill's term (of
    /// the view's dtype); `mask` broadcasts to the view (checked by the caller).
    pub(super) fn masked_fill_expanded(&mut self, dst: &TRef, mask: &TRef, value: Id, span: Span) -> FR<()> {
        let (expanded, base) = memory_view(dst);
        // The mask at the view's shape, then whether any alias of each memory position is masked.
        let none = self.full(&dst.shape, DType::Bool, crate::tensor::Scalar::B(false)).map_err(Self::tyerr(span))?;
        let none = self.fresh(none, None, span)?;
        let full_mask = self.elementwise(ops::Binary::BitOr, &[FV::Tensor(mask.clone()), FV::Tensor(none)], span)?;
        let FV::Tensor(full_mask) = full_mask else { return diag(span, "internal: a mask that is not a tensor") };
        let any = self.reduce_op(OpName::Any, &full_mask, &expanded, true, None, span)?;
        let FV::Tensor(any) = any else { return diag(span, "internal: a reduction that is not a tensor") };
        let any = self.read(&any, span)?;
        let any = self.t.at(any);
        let old = self.read(&base, span)?;
        let old = self.t.at(old);
        let w = self.t.op(OpName::Where, vec![any, value, old]).map_err(Self::tyerr(span))?;
        self.write(&base, w, span)
    }

    /// PyTorch's check that a write (`index_put_`, `x[idx] = v`) does not overlap its value at all, on every corner.
    pub(super) fn check_no_overlap(&mut self, dst: &TRef, inputs: &[&TRef], span: Span) -> FR<()> {
        self.check_at_corners(dst, inputs, span, ops::check_no_overlap)
    }

    /// Runs a runtime check of a write to `dst` that reads `inputs` on stand-ins of both, placed as they are in the
    /// iterations of the enclosing loops that can decide it (see `check_placed`), and for every choice of the conditions of conditional views.
    /// A check that fails for some choices only (an overlap decided by data) is refused.
    pub(super) fn check_at_corners(
        &mut self,
        dst: &TRef,
        inputs: &[&TRef],
        span: Span,
        check: impl Fn(&Tensor, &[&Tensor]) -> Result<(), String>,
    ) -> FR<()> {
        // Every view each distinct conditional view may be: the same view read and written (`w += w + 1`) is the
        // same choice, different ones are chosen independently (which may try choices no run makes: a failure
        // only there refuses, never raises).
        let mut chains: Vec<(&TRef, Vec<TRef>)> = Vec::new();
        for tr in std::iter::once(dst).chain(inputs.iter().copied()) {
            if tr.alt.is_some() && !chains.iter().any(|(c, _)| *c == tr) {
                chains.push((tr, tr.choices()));
            }
        }
        let combos = chains.iter().try_fold(1usize, |n, (_, c)| n.checked_mul(c.len()).filter(|&n| n <= MAX_CHOICES));
        let Some(combos) = combos else {
            return needs_static(
                span,
                format!("a write through views chosen by `if`s on run-time values in more than {MAX_CHOICES} ways"),
            );
        };
        let conditional = !chains.is_empty();
        let mut first_err = None;
        let mut passed = false;
        // The choices whose check fails at every placement, and whether some choice both passes and fails.
        let (mut failing, mut mixed) = (Vec::new(), false);
        for choice in 0..combos {
            let pick = |tr: &TRef| -> TRef {
                let mut rest = choice;
                for (c, views) in &chains {
                    if *c == tr {
                        return views[rest % views.len()].clone();
                    }
                    rest /= views.len();
                }
                tr.clone()
            };
            let (d, ins) = (pick(dst), inputs.iter().map(|t| pick(t)).collect::<Vec<_>>());
            let (ok, err) = match self.check_chosen(&d, &ins.iter().collect::<Vec<_>>(), &check) {
                Some(r) => r,
                None if !conditional && self.runtime_overlap(dst, inputs, &check, span)? => return Ok(()),
                None => return needs_static(
                    span,
                    "an in-place write whose overlap with what it reads depends on positions known only at run time (or on more loop iterations than are checked)",
                ),
            };
            passed |= ok;
            mixed |= ok && err.is_some();
            if !ok && err.is_some() {
                failing.push(choice);
            }
            first_err = first_err.or(err);
        }
        match first_err {
            None => Ok(()),
            // A loop's discovery pass starts from the first iteration's state, where a counter may still be static
            // (fuzz seed 1408: `b[k - 1]` in a `while` that may break on data); its terms are dropped, and the real
            // pass checks the write where it runs.
            Some(_) if self.t.discovering > 0 => Ok(()),
            Some(m) if !passed => Err(super::state::Stop::Diag(crate::diag::Diagnostic::new(m).at(span))),
            Some(_) if !conditional && self.runtime_overlap(dst, inputs, &check, span)? => Ok(()),
            // Some views the conditional views may be fail, the others pass, wherever they are placed: the write
            // raises (the reference's error, from the layouts alone) only where the `if`s chose a failing one
            // (fuzz seed 145179).
            Some(m) if conditional && !mixed && super::checks::raises_in_pytorch(&m) => {
                for choice in failing {
                    let chosen = self.choice_predicate(&chains, choice, span)?;
                    let c = self.t.at(chosen);
                    let other = self.t.op(OpName::LogicalNot, vec![c]).map_err(Self::tyerr(span))?;
                    self.runtime_assert(other, span)?;
                }
                Ok(())
            }
            Some(m) => needs_static(
                span,
                format!("a write whose overlap depends on run-time values (an index from data, or which arm of an `if` ran): {m}"),
            ),
        }
    }

    /// The run-time condition under which each conditional view of `chains` is the view that `choice` picks for it
    /// (a mixed-radix number over the chains' lengths, as `check_at_corners` counts): in a chain `c1 ? v1 : (c2 ? v2
    /// : ... vn)`, view `j` is chosen where `c1` to `c(j-1)` fail and `cj` holds (the last where all fail).
    fn choice_predicate(&mut self, chains: &[(&TRef, Vec<TRef>)], choice: usize, span: Span) -> FR<TId> {
        let mut all: Option<TId> = None;
        let mut rest = choice;
        for (tr, views) in chains {
            let j = rest % views.len();
            rest /= views.len();
            let mut conds = Vec::new();
            let mut t = *tr;
            while let Some(a) = &t.alt {
                conds.push(a.0);
                t = &a.1;
            }
            for (k, &c) in conds.iter().enumerate().take(j + 1) {
                let term = if k == j {
                    c
                } else {
                    let c = self.t.at(c);
                    self.t.op(OpName::LogicalNot, vec![c]).map_err(Self::tyerr(span))?
                };
                all = Some(match all {
                    None => term,
                    Some(p) => {
                        let (p, q) = (self.t.at(p), self.t.at(term));
                        self.t.op(OpName::BitAnd, vec![p, q]).map_err(Self::tyerr(span))?
                    }
                });
            }
        }
        Ok(all.expect("a chain has a condition"))
    }

    /// `check_at_corners` for views that are not conditional, at the iterations of the loops that can decide it and
    /// for every value of
    /// the run-time indices in their offsets (an `iindex`, `islice` or `inarrow` term ranges over the positions it
    /// may take; an offset merged from an `if`'s arms over the arms' offsets). Says whether some values passed, and
    /// the first failure; None when the write shares a root with what it reads and some position is unknown, or
    /// there are more than `MAX_PLACEMENTS` (the overlap cannot be decided here).
    fn check_chosen(
        &self,
        dst: &TRef,
        inputs: &[&TRef],
        check: &impl Fn(&Tensor, &[&Tensor]) -> Result<(), String>,
    ) -> Option<(bool, Option<String>)> {
        let mut syms: Vec<(TIdKey, Vec<i64>)> = Vec::new();
        let mut unknown = false;
        for tr in std::iter::once(dst).chain(inputs.iter().copied()) {
            for (s, _) in &tr.off.terms {
                if let Sym::Opaque(k) = s {
                    if !syms.iter().any(|(x, _)| x == k) {
                        match self.opaque_values(*k) {
                            Some(vs) if !vs.is_empty() => syms.push((*k, vs)),
                            _ => unknown = true,
                        }
                    }
                }
            }
        }
        let combos = syms.iter().try_fold(1usize, |acc, (_, vs)| acc.checked_mul(vs.len()));
        if unknown || combos.is_none_or(|c| c > MAX_PLACEMENTS) {
            // Views of different roots never overlap, and a view's overlap with itself does not depend on where it
            // is: only a read of the written root needs the positions.
            if inputs.iter().any(|t| t.root == dst.root) {
                return None;
            }
            let at_zero = |tr: &TRef| TRef { off: Affine::constant(tr.off.c), ..tr.primary() };
            let (d, ins) = (at_zero(dst), inputs.iter().map(|t| at_zero(t)).collect::<Vec<_>>());
            let refs: Vec<&TRef> = ins.iter().collect();
            return match self.check_placed(&d, &refs, &HashMap::new(), check) {
                Ok(Some(())) => Some((true, None)),
                Ok(None) => None,
                Err(m) => Some((false, Some(m))),
            };
        }
        let (mut passed, mut first_err) = (false, None);
        let mut pos = vec![0usize; syms.len()];
        loop {
            let opaque: HashMap<TIdKey, i64> = syms.iter().zip(&pos).map(|((k, vs), &p)| (*k, vs[p])).collect();
            match self.check_placed(dst, inputs, &opaque, check) {
                Ok(Some(())) => passed = true,
                Ok(None) => return None,
                Err(m) => first_err = first_err.or(Some(m)),
            }
            // The next combination of values (odometer order).
            let mut k = 0;
            while k < syms.len() {
                pos[k] += 1;
                if pos[k] < syms[k].1.len() {
                    break;
                }
                pos[k] = 0;
                k += 1;
            }
            if k == syms.len() {
                break;
            }
        }
        Some((passed, first_err))
    }

    /// The check at every iteration of the loops that matter, with the run-time indices of `opaque` at the given
    /// values. A loop whose variable moves a read of the written root relative to the write (their offsets have
    /// different coefficients of it) is visited at each of its values, since an overlap may occur in a middle
    /// iteration only (`v[9::3].copy_(v[i + 1])`, fuzz seed 28112); any other loop at its first and last values (its
    /// variable moves everything alike, which no check depends on). Past `MAX_ITERATIONS` placements, or
    /// `MAX_CHECKED_ELEMENTS` elements checked, `Ok(None)`: the overlap cannot be decided here.
    fn check_placed(
        &self,
        dst: &TRef,
        inputs: &[&TRef],
        opaque: &HashMap<TIdKey, i64>,
        check: &impl Fn(&Tensor, &[&Tensor]) -> Result<(), String>,
    ) -> Result<Option<()>, String> {
        let coef =
            |a: &Affine, l: usize| a.terms.iter().filter(|(s, _)| *s == Sym::Loop(l)).map(|(_, k)| k).sum::<i64>();
        let mut levels: Vec<(usize, Vec<i64>)> = Vec::new();
        let mut count = 1usize;
        for (level, f) in self.t.frames.iter().enumerate() {
            let Some((a, b)) = f.range else { continue };
            let moves = inputs.iter().any(|t| t.root == dst.root && coef(&t.off, level) != coef(&dst.off, level));
            let vals: Vec<i64> = if !moves {
                if a == b {
                    vec![a]
                } else {
                    vec![a, b]
                }
            } else {
                let n = ((b - a) / f.step.max(1)) as usize + 1;
                if n > MAX_ITERATIONS {
                    return Ok(None);
                }
                (0..n as i64).map(|k| a + k * f.step).collect()
            };
            count = count.saturating_mul(vals.len());
            levels.push((level, vals));
        }
        if count > MAX_ITERATIONS {
            return Ok(None);
        }
        let mut checked = 0usize;
        let mut pos = vec![0usize; levels.len()];
        loop {
            let c: HashMap<usize, i64> = levels.iter().zip(&pos).map(|((l, vs), &p)| (*l, vs[p])).collect();
            let corner = levels.iter().zip(&pos).all(|((_, vs), &p)| p == 0 || p == vs.len() - 1);
            let place = |tr: &TRef| -> Option<i64> {
                let mut off = tr.off.c;
                for (s, k) in &tr.off.terms {
                    off += k * match s {
                        Sym::Loop(l) => *c.get(l)?,
                        Sym::Opaque(key) => *opaque.get(key)?,
                    };
                }
                Some(off)
            };
            // Off the corners only a read of the written root that reaches the write's span can fail the check.
            let reaches = |t: &&TRef| {
                let (Some(o), Some(od)) = (place(t), place(dst)) else { return false };
                let (lo, hi) = crate::ir::geometry::span(&t.shape, &t.strides, o);
                let (dlo, dhi) = crate::ir::geometry::span(&dst.shape, &dst.strides, od);
                t.root == dst.root && lo <= dhi && dlo <= hi
            };
            if corner || inputs.iter().any(reaches) {
                let at = |tr: &TRef| -> Option<Tensor> {
                    let off = place(tr)?;
                    Some(self.roots[tr.root].dummy.restride(
                        tr.shape.clone(),
                        tr.strides.clone(),
                        off.max(0) as usize + BASE,
                    ))
                };
                if let Some(d) = at(dst) {
                    let ins: Vec<Tensor> = inputs.iter().filter_map(|t| at(t)).collect();
                    checked += d.numel() + ins.iter().map(Tensor::numel).sum::<usize>();
                    if checked > MAX_CHECKED_ELEMENTS {
                        return Ok(None);
                    }
                    check(&d, &ins.iter().collect::<Vec<_>>())?;
                }
            }
            let mut k = 0;
            while k < levels.len() {
                pos[k] += 1;
                if pos[k] < levels[k].1.len() {
                    break;
                }
                pos[k] = 0;
                k += 1;
            }
            if k == levels.len() {
                return Ok(Some(()));
            }
        }
    }

    /// The values a run-time index term may take, where its node says: `iindex` gives a position in its dim,
    /// `islice`/`inarrow` a start that keeps the slice in range; an offset merged from an `if`'s arms, the arms'.
    fn opaque_values(&self, key: TIdKey) -> Option<Vec<i64>> {
        if let Some(vs) = self.offset_choices.get(&key) {
            return Some(vs.clone());
        }
        let int = |id: Id| match self.t.b.node(id) {
            Node::Int(v) => Some(*v),
            _ => None,
        };
        match self.t.b.node(key.tid().id) {
            Node::Op(OpName::IIndex, a) => Some((0..int(a[1])?).collect()),
            Node::Op(OpName::ISlice | OpName::INarrow, a) => Some((0..(int(a[2])? - int(a[1])? + 1).max(0)).collect()),
            _ => None,
        }
    }

    /// A run-time index into a dim of size `n`, as Python reads it: a negative index counts from the end (once), and
    /// one outside `-n..n` is PyTorch's IndexError. Where the loop variables alone decide the index, the first and
    /// last iterations bound it (it is affine), so it is checked here and wrapped by a constant where it keeps one
    /// sign; otherwise an `iindex` term wraps and checks it when the program runs. So does an index out of range in
    /// some iteration of a loop whose iterations may not all reach it (an `if` on a run-time value, or a `break` or
    /// `continue` on one, between the loop and the index: fuzz seed 28079): PyTorch raises only if that iteration
    /// gets there.
    fn wrapped_index(&mut self, idx: &Affine, n: usize, dim: usize, span: Span) -> FR<Affine> {
        let n = n as i64;
        let values: Option<Vec<i64>> = self.corners().iter().map(|c| Self::eval_affine(idx, c)).collect();
        if let Some(vs) = values {
            if let Some(v) = vs.iter().find(|&&v| v < -n || v >= n) {
                if !self.skippable(idx) {
                    return diag(span, format!("index {v} is out of bounds for dimension {dim} with size {n}"));
                }
                return self.checked_index(idx, n, dim, span);
            }
            if vs.iter().all(|&v| v >= 0) {
                return Ok(idx.clone());
            }
            if vs.iter().all(|&v| v < 0) {
                return Ok(idx.add(&Affine::constant(n)));
            }
        }
        self.checked_index(idx, n, dim, span)
    }

    /// `idx` wrapped and checked against a dim of size `n` when the program runs (an `iindex` term).
    fn checked_index(&mut self, idx: &Affine, n: i64, dim: usize, span: Span) -> FR<Affine> {
        let i = self.affine_term(idx);
        let (nn, dd) = (self.t.leaf(Node::Int(n)), self.t.leaf(Node::Int(dim as i64)));
        let t = self.t.add(Node::Op(OpName::IIndex, vec![i, nn, dd])).map_err(Self::tyerr(span))?;
        Ok(Affine::sym(Sym::Opaque(super::state::TIdKey::of(t))))
    }

    /// Whether some iteration of a loop whose variable `idx` reads may not reach it: an arm of an `if` on a
    /// run-time value opened inside that loop is being functionalized, or a loop's discovery pass, which runs the
    /// body from the state before the loop (where the flags of a `break` on data are still false).
    fn skippable(&self, idx: &Affine) -> bool {
        if self.t.discovering > 0 {
            return true;
        }
        let outer = idx.terms.iter().filter_map(|(s, _)| match s {
            Sym::Loop(l) => Some(*l),
            Sym::Opaque(_) => None,
        });
        outer.min().and_then(|l| self.t.frames.get(l)).is_some_and(|f| self.t.arms > f.arms)
    }

    /// A select with an index known at run time: static shape, offset moved by `index * stride`.
    pub(super) fn dyn_select(&mut self, tr: &TRef, dim: usize, idx: &Affine, span: Span) -> FR<TRef> {
        let idx = self.wrapped_index(idx, tr.shape[dim], dim, span)?;
        Ok(each_view(tr, &|out| {
            out.off = out.off.add(&idx.scale(out.strides[dim] as i64));
            out.shape.remove(dim);
            out.strides.remove(dim);
        }))
    }

    /// A slice (or, with `narrow`, a `narrow`) whose start is known at run time and whose length is static. Where
    /// loop variables alone decide the start, the first and last iterations must keep the slice in range (else the
    /// loop is unrolled); a start that depends on data goes through an `islice` (`inarrow`) term, which checks when
    /// the program runs that the slice has its static length, as PyTorch would compute it.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn dyn_slice(
        &mut self,
        tr: &TRef,
        dim: usize,
        start: &Affine,
        stop: &Affine,
        step: i64,
        narrow: bool,
        span: Span,
    ) -> FR<TRef> {
        if step <= 0 {
            return diag(span, "step must be greater than zero");
        }
        let len = match stop.add(&start.neg()).as_const() {
            Some(l) => l.max(0),
            None => return needs_static(span, "a slice whose length depends on a loop variable"),
        };
        let n = tr.shape[dim] as i64;
        let values: Option<Vec<i64>> = self.corners().iter().map(|c| Self::eval_affine(start, c)).collect();
        let start = match values {
            Some(vs) => {
                if vs.iter().any(|&s| s < 0 || s + len > n) {
                    return needs_static(span, "a slice that moves out of range with the loop variable");
                }
                start.clone()
            }
            None => {
                let s = self.affine_term(start);
                let (l, nn) = (self.t.leaf(Node::Int(len)), self.t.leaf(Node::Int(n)));
                let node = if narrow {
                    Node::Op(OpName::INarrow, vec![s, l, nn])
                } else {
                    let d = self.t.leaf(Node::Int(dim as i64));
                    Node::Op(OpName::ISlice, vec![s, l, nn, d])
                };
                let t = self.t.add(node).map_err(Self::tyerr(span))?;
                Affine::sym(Sym::Opaque(super::state::TIdKey::of(t)))
            }
        };
        Ok(each_view(tr, &|out| {
            out.off = out.off.add(&start.scale(out.strides[dim] as i64));
            out.shape[dim] = ((len + step - 1) / step) as usize;
            out.strides[dim] *= step as isize;
        }))
    }

    /// A Python number as a 0-dim tensor term of `dtype` (or of its own kind's default dtype).
    pub(super) fn scalar_tensor(&mut self, v: &FV, dtype: Option<DType>, span: Span) -> FR<(TId, DType)> {
        use crate::tensor::Scalar;
        let (t, d) = match v {
            FV::Bool(b) => (self.full(&[], DType::Bool, Scalar::B(*b)).map_err(Self::tyerr(span))?, DType::Bool),
            FV::Int(i) => (self.full(&[], DType::I64, Scalar::I(*i)).map_err(Self::tyerr(span))?, DType::I64),
            FV::Float(f) => (self.full(&[], DType::F64, Scalar::F(*f)).map_err(Self::tyerr(span))?, DType::F64),
            FV::DynInt(a) => {
                let e = self.affine_term(a);
                (self.t.op(OpName::ITensor, vec![e]).map_err(Self::tyerr(span))?, DType::I64)
            }
            FV::DynFloat(t) => (*t, DType::F64),
            FV::DynBool(t) => (*t, DType::Bool),
            other => return diag(span, format!("expected a number, found {}", other.type_name())),
        };
        match dtype {
            Some(want) if want != d => Ok((self.cast(t, want, span)?, want)),
            _ => Ok((t, d)),
        }
    }

    pub(super) fn cast(&mut self, t: TId, dtype: DType, span: Span) -> FR<TId> {
        let (d, _) = self.tensor_ty(t, span)?;
        if d == dtype {
            return Ok(t);
        }
        let dt = self.t.leaf(Node::DType(dtype));
        let x = self.t.at(t);
        self.t.op(OpName::Cast, vec![dt, x]).map_err(Self::tyerr(span))
    }
}

/// `tr` with `f` applied to its view and, for a conditional view, to each alternative.
pub(super) fn each_view(tr: &TRef, f: &dyn Fn(&mut TRef)) -> TRef {
    let mut out = tr.primary();
    f(&mut out);
    out.alt = tr.alt.as_ref().map(|a| Rc::new((a.0, each_view(&a.1, f))));
    out
}

/// The dims of `v` that an `expand` made (size above 1, stride 0), and `v` with each reduced to one entry: the view
/// that reaches each memory position once.
pub(super) fn memory_view(v: &TRef) -> (Vec<i64>, TRef) {
    let expanded: Vec<i64> =
        (0..v.shape.len()).filter(|&d| v.shape[d] > 1 && v.strides[d] == 0).map(|d| d as i64).collect();
    let mut base = v.clone();
    for &d in &expanded {
        base.shape[d as usize] = 1;
    }
    (expanded, base)
}
