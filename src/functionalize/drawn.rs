//! Elements a random initialization drew (`crate::interp::drawn`), on the functional engines: each root keeps a
//! bitmap of its drawn elements (`Root::drawn`). Drawing sets the bits of a view's elements, a write clears them,
//! and `Fz::read` refuses a view that sees a set bit. Both drawing and clearing happen only in straight-line code, so
//! the bitmaps never need merging: a loop over a known range that draws or writes drawn elements is unrolled; under
//! an `if` or in a loop on run-time values a draw is refused, and a write leaves the bits set (a read after it is
//! refused, never wrong).

use std::rc::Rc;

use super::state::{diag, needs_static, TRef, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::interp::drawn::{random_method, refusal, undrawable};
use crate::interp::nn_init::{nn_init, nn_init_args, Init};

impl Fz<'_> {
    /// Whether the statement being functionalized runs once, unconditionally.
    fn straight_line(&self) -> bool {
        self.t.frames.is_empty() && self.dyn_depth == 0 && self.t.arms == 0
    }

    /// The storage offsets of a view placed at a constant offset; `None` for one placed by run-time data or a loop.
    fn static_offsets(&self, tr: &TRef) -> Option<Vec<usize>> {
        let c = tr.off.as_const()?;
        if tr.alt.is_some() {
            return None;
        }
        let d = crate::tensor::Tensor::zeros(crate::tensor::DType::F32, &[]).ok()?;
        Some(d.restride(tr.shape.clone(), tr.strides.clone(), c as usize).offsets())
    }

    /// Marks the elements `tr` sees as drawn (their values are never read, so they are written as zeros).
    pub(super) fn draw(&mut self, tr: &TRef, span: Span) -> FR<()> {
        if let Some(m) = undrawable(self.roots[tr.root].dtype) {
            return diag(span, m);
        }
        if self.dyn_depth > 0 || self.t.arms > 0 {
            return diag(span, "random initialization inside an `if` or a loop on run-time values is not supported");
        }
        if !self.t.frames.is_empty() {
            return needs_static(span, "random initialization in a loop body");
        }
        let Some(offsets) = self.static_offsets(tr) else {
            return diag(span, "random initialization of a view chosen by run-time data is not supported");
        };
        let zero =
            self.full(&[], self.roots[tr.root].dtype, crate::tensor::Scalar::F(0.0)).map_err(Self::tyerr(span))?;
        self.write(tr, zero, span)?;
        let n: usize = self.roots[tr.root].shape.iter().product();
        let bits = self.roots[tr.root].drawn.get_or_insert_with(|| Rc::new(vec![false; n]));
        let bits = Rc::make_mut(bits);
        offsets.into_iter().for_each(|o| bits[o] = true);
        Ok(())
    }

    /// After a write through `tr`: its elements are no longer drawn, where the write surely happened (straight-line
    /// code, a view at a constant offset).
    pub(super) fn undraw(&mut self, tr: &TRef, span: Span) -> FR<()> {
        if self.roots[tr.root].drawn.is_none() {
            return Ok(());
        }
        // A loop over a known range that writes drawn elements runs unrolled, each write then at a known place.
        if !self.t.frames.is_empty() && self.dyn_depth == 0 && self.t.arms == 0 {
            return needs_static(span, "a write of drawn elements in a loop body");
        }
        if !self.straight_line() {
            return Ok(());
        }
        let Some(offsets) = self.static_offsets(tr) else { return Ok(()) };
        let bits = Rc::make_mut(self.roots[tr.root].drawn.as_mut().expect("checked above"));
        offsets.into_iter().for_each(|o| bits[o] = false);
        if bits.iter().all(|b| !b) {
            self.roots[tr.root].drawn = None;
        }
        Ok(())
    }

    /// `a OP b` in an expression: arithmetic of a tensor with drawn elements and a Python number, in straight-line
    /// code, gives a fresh tensor whose elements are drawn where the tensor's are (`torch.randn(n, m) * 0.05`); any
    /// other read of drawn elements is refused by `read`.
    pub(super) fn drawn_binop(&mut self, a: &FV, op: crate::frontend::ast::BinOp, b: &FV, span: Span) -> FR<FV> {
        use crate::frontend::ast::BinOp;
        let arith = matches!(op, BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Pow);
        let t = match (a, b) {
            (FV::Tensor(t), FV::Int(_) | FV::Float(_) | FV::Bool(_))
            | (FV::Int(_) | FV::Float(_) | FV::Bool(_), FV::Tensor(t)) => Some(t.clone()),
            _ => None,
        };
        let Some(t) = t.filter(|t| arith && self.roots[t.root].drawn.is_some() && self.straight_line()) else {
            return self.binop(a, op, b, span);
        };
        let Some(offsets) = self.static_offsets(&t) else { return self.binop(a, op, b, span) };
        let bits = self.roots[t.root].drawn.clone().expect("checked above");
        let from: Vec<bool> = offsets.iter().map(|&o| bits[o]).collect();
        self.drawn_arith = true;
        let r = self.binop(a, op, b, span);
        self.drawn_arith = false;
        let r = r?;
        let FV::Tensor(rt) = &r else { return diag(span, refusal()) };
        let fresh = rt.root != t.root && rt.shape == t.shape && undrawable(self.roots[rt.root].dtype).is_none();
        match fresh {
            true => self.set_bits(rt, from, span).map(|()| r),
            false => diag(span, refusal()),
        }
    }

    /// Refuses a read through `tr` of drawn elements (any, for a view placed at run time).
    pub(super) fn check_drawn(&self, tr: &TRef, span: Span) -> FR<()> {
        let Some(bits) = &self.roots[tr.root].drawn else { return Ok(()) };
        let hit = match self.static_offsets(tr) {
            Some(offsets) => offsets.iter().any(|&o| bits[o]),
            None => true,
        };
        match hit {
            true => diag(span, refusal()),
            false => Ok(()),
        }
    }

    /// A copy of `from` as a new root laid out contiguously, whose drawn elements stay drawn (`copy.deepcopy`).
    pub(super) fn copy_drawn(&mut self, from: &TRef, span: Span) -> FR<TRef> {
        let bits: Option<Vec<bool>> = match &self.roots[from.root].drawn {
            None => None,
            Some(b) => match self.static_offsets(from) {
                Some(offsets) => Some(offsets.iter().map(|&o| b[o]).collect()),
                None => return diag(span, refusal()),
            },
        };
        let x = self.read_raw(from, span)?;
        let copy = self.fresh(x, None, span)?;
        if let Some(bits) = bits.filter(|b| b.iter().any(|&x| x)) {
            self.roots[copy.root].drawn = Some(Rc::new(bits));
        }
        Ok(copy)
    }

    /// The drawn flags of the elements `src` copies into `dst` (broadcast to its shape), in `dst`'s element order,
    /// where any is drawn and the copy keeps them (straight-line code, views at constant offsets, a floating `dst`);
    /// `None` otherwise (a read then refuses drawn elements).
    fn carried_bits(&self, src: &TRef, dst: &TRef) -> Option<Vec<bool>> {
        let bits = self.roots[src.root].drawn.as_ref()?;
        if !self.straight_line() || undrawable(self.roots[dst.root].dtype).is_some() {
            return None;
        }
        let c = src.off.as_const().filter(|_| src.alt.is_none())?;
        let d = crate::tensor::Tensor::zeros(crate::tensor::DType::F32, &[]).ok()?;
        let from = d.restride(src.shape.clone(), src.strides.clone(), c as usize).broadcast_to(&dst.shape).ok()?;
        let flags: Vec<bool> = from.offsets().iter().map(|&o| bits[o]).collect();
        flags.iter().any(|&f| f).then_some(flags)
    }

    /// Sets the drawn bits of the elements `dst` sees from `flags` (its element order), after a write cleared them.
    fn set_bits(&mut self, dst: &TRef, flags: Vec<bool>, span: Span) -> FR<()> {
        let Some(to) = self.static_offsets(dst) else { return diag(span, refusal()) };
        let n: usize = self.roots[dst.root].shape.iter().product();
        let bits = self.roots[dst.root].drawn.get_or_insert_with(|| Rc::new(vec![false; n]));
        let bits = Rc::make_mut(bits);
        to.into_iter().zip(flags).filter(|(_, f)| *f).for_each(|(o, _)| bits[o] = true);
        Ok(())
    }

    /// `dst.copy_(src)` where `src` has drawn elements a floating `dst` keeps drawn (MoCo's key encoder initialized
    /// from the query encoder's drawn weights): the write, then the marks. False where `src` has none to carry.
    pub(super) fn copy_drawn_into(&mut self, dst: &TRef, src: &TRef, span: Span) -> FR<bool> {
        let Some(flags) = self.carried_bits(src, dst) else { return Ok(false) };
        self.drawn_arith = true;
        let w = self.write_result(dst, src, false, span);
        self.drawn_arith = false;
        w?;
        self.set_bits(dst, flags, span)?;
        Ok(true)
    }

    /// `x.to(dtype)`, `x.double()`, `x.float()`, `x.type(dtype)`, `x.type_as(y)` of a tensor with drawn elements
    /// (time_sequence_prediction's `seq.double()` before its weights are loaded): the cast, drawn where `x` is.
    /// `None` where `x` has none to carry.
    pub(super) fn cast_drawn(&mut self, name: &str, a: &super::args::A) -> FR<Option<FV>> {
        let Some(FV::Tensor(x)) = a.pos.first() else { return Ok(None) };
        if !crate::interp::drawn::CASTS.contains(&name) {
            return Ok(None);
        }
        let Some(flags) = self.carried_bits(x, x) else { return Ok(None) };
        self.drawn_arith = true;
        let r = self.torch(name, a, true);
        self.drawn_arith = false;
        let r = r?;
        match &r {
            FV::Tensor(t) if t.root == x.root => Ok(Some(r)),
            FV::Tensor(t) if t.shape == x.shape && undrawable(self.roots[t.root].dtype).is_none() => {
                self.set_bits(t, flags, a.span)?;
                Ok(Some(r))
            }
            _ => diag(a.span, refusal()),
        }
    }

    /// `torch.nn.init.NAME(...)` (`crate::interp::nn_init`): the tensor, filled or drawn; `calculate_gain`'s
    /// number.
    pub(super) fn nn_init(&mut self, name: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
        let name = &*crate::interp::nn_init::canonical(name);
        let e = super::args::err(span);
        let args = nn_init_args(name, pos, kw).map_err(&e)?;
        let t = match &args[0] {
            _ if name == "calculate_gain" => None,
            Some(FV::Tensor(t)) => Some(t.clone()),
            Some(other) => {
                let shown = crate::interp::pyvalue::PyValue::type_name(other);
                return diag(span, format!("{name}(): argument 'tensor' must be Tensor, not {shown}"));
            }
            None => unreachable!("nn_init_args binds the tensor"),
        };
        let shape = t.as_ref().map_or(&[][..], |t| &t.shape[..]);
        match (nn_init(name, &args, shape).map_err(&e)?, t) {
            (Init::Gain(g), _) => Ok(FV::Float(g)),
            (Init::Fill(v), Some(t)) => {
                let a = super::ops::A::new(vec![FV::Tensor(t.clone()), v], vec![], span, name.into());
                self.inplace("fill_", &a)?;
                Ok(FV::Tensor(t))
            }
            (Init::Draw, Some(t)) => {
                self.draw(&t, span)?;
                Ok(FV::Tensor(t))
            }
            (_, None) => unreachable!("only calculate_gain takes no tensor"),
        }
    }

    /// `torch.rand(...)` and the other random tensors (`crate::interp::drawn::random_creation`): made as `empty`
    /// would make them, then drawn. `None` for any other call.
    pub(super) fn random_tensor(
        &mut self,
        m: &str,
        name: &str,
        pos: &[FV],
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<Option<FV>> {
        let Some(made) = (m == "torch").then(|| crate::interp::drawn::random_creation(name, pos, kw)).flatten() else {
            return Ok(None);
        };
        let (op, pos, kw) = made.map_err(super::args::err(span))?;
        self.made_drawn(op, pos, kw, span).map(Some)
    }

    /// `torch.OP(...)` (`empty`, `empty_like`), its elements then drawn: random and uninitialized tensors.
    pub(super) fn made_drawn(&mut self, op: &str, pos: Vec<FV>, kw: Vec<(String, FV)>, span: Span) -> FR<FV> {
        let r = self.module_function("torch", op, pos, kw, span)?;
        if let FV::Tensor(t) = &r {
            self.draw(t, span)?;
        }
        Ok(r)
    }

    /// `x.uniform_(...)` / `x.normal_(...)`: `x`, drawn.
    pub(super) fn random_method(
        &mut self,
        name: &str,
        t: &TRef,
        npos: usize,
        kw: &[(String, FV)],
        span: Span,
    ) -> FR<FV> {
        let keywords: Vec<&str> = kw.iter().map(|(k, _)| k.as_str()).collect();
        random_method(name, npos, &keywords).map_err(super::args::err(span))?;
        self.draw(t, span)?;
        Ok(FV::Tensor(t.clone()))
    }
}
