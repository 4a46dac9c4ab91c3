//! Specialized `if`s: where an `if` on a run-time value cannot become one term (its arms leave values of different
//! types, shapes or lengths, or one arm holds what only the reference engine runs), the program is functionalized
//! once more, following at each such `if` the arm that the sample inputs take, under a guard: where a run takes the
//! other arm, `(fallback LINE COL)` stops it and the caller runs the reference interpreter instead. The sample inputs
//! are those of seed 0 (`io::random_input`, what `funcfuse run` makes by default), so the plan depends on the program
//! alone. Only a program that fails without it is specialized, one `if` at a time ([`super::functionalize`]: each
//! failed attempt names the `if` to blame, `Fz::blame`, and the next follows one arm there), and only where the
//! condition is known outside every loop term (a loop whose iterations differ is unrolled first).

use std::collections::BTreeMap;

use super::branch::Arm;
use super::ctrl::Flow;
use super::state::{Stop, TId, Terms, FR};
use super::{Env, Fz};
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::{Scalar, Tensor};

/// How many `if`s one program may be specialized at.
pub const MAX_FOLLOWED: usize = 16;

/// The seed whose inputs (`io::random_input`) decide which arm a specialized `if` keeps.
pub const SAMPLE_SEED: u64 = 0;

impl<'m> Fz<'m> {
    /// An `if` on a run-time value: one term where the arms can be joined; an `if` the program is specialized at
    /// follows the arm the sample inputs take. Where joining fails for a limit of this tool, the `if` is blamed for
    /// the error, which the next attempt may specialize ([`super::functionalize`]).
    pub(super) fn dyn_if(&mut self, env: &mut Env, cond: TId, body: Arm<'m>, orelse: Arm<'m>, span: Span) -> FR<Flow> {
        if self.follow.contains(&span) {
            if let Some(taken) = self.sample_cond(cond) {
                return self.follow_arm(env, cond, taken, if taken { body } else { orelse }, span);
            }
        }
        match self.joined_if(env, cond, body, orelse, span) {
            Err(e) if this_tools_limit(&e) => {
                self.blame(&e, span);
                Err(e)
            }
            r => r,
        }
    }

    /// Records that error `e` comes from the `if` at `at` (the innermost such `if` is kept).
    pub(super) fn blame(&self, e: &Stop, at: Span) {
        self.blamed.borrow_mut().entry(blame_key(e)).or_insert(at);
    }

    /// Runs the arm the sample inputs take, under a guard that stops the run where the other is taken.
    fn follow_arm(&mut self, env: &mut Env, cond: TId, taken: bool, arm: Arm<'m>, span: Span) -> FR<Flow> {
        self.t.open_scope();
        let end = match super::checks::raising_arm(self.run_arm(env, &arm, span))? {
            Ok(end) => end,
            Err(d) => return Err(Stop::Diag(d)),
        };
        let made = self.t.take_scope();
        let (line, col) = (self.t.leaf(Node::Int(span.line.into())), self.t.leaf(Node::Int(span.col.into())));
        let fallback = self.t.op(OpName::Fallback, vec![line, col]).map_err(Self::tyerr(span))?.id;
        crate::log::log(crate::log::Stage::Functionalize, || {
            let which = if taken { "first" } else { "second" };
            format!("specialized the `if` at {}:{} to its {which} arm", span.line, span.col)
        });
        self.one_arm_fails(env, cond, !taken, end, &made, fallback, span)
    }

    /// The value of `cond` on the sample inputs, where it is known outside every loop term and evaluates.
    fn sample_cond(&mut self, cond: TId) -> Option<bool> {
        if self.t.discovering > 0 {
            return None;
        }
        if self.sample.is_none() {
            let mut inputs = BTreeMap::new();
            for (i, (name, dtype, shape)) in self.sample_spec.iter().enumerate() {
                inputs.insert(name.clone(), crate::io::random_input(SAMPLE_SEED, i, *dtype, shape).ok()?);
            }
            self.sample = Some(inputs);
        }
        let value = scalar_now(&mut self.t, cond, self.sample.as_ref()?, |_| true)?;
        Some(value.to_f64() != 0.0)
    }
}

/// The one element of term `v` (made outside every loop term), evaluated now by the functional interpreter on
/// `inputs`, where `admissible` accepts the term and it evaluates. The term is extracted from a tuple node added
/// outside the builder's accounting: nothing the program computes.
pub(super) fn scalar_now(
    t: &mut Terms,
    v: TId,
    inputs: &BTreeMap<String, Tensor>,
    admissible: impl Fn(&crate::ir::Term) -> bool,
) -> Option<Scalar> {
    if v.depth != 0 || t.depth() != 0 {
        return None;
    }
    let top = t.b.add(Node::Tuple(vec![v.id].into()));
    let term = t.b.extract(top);
    if !admissible(&term) {
        return None;
    }
    crate::ir::eval_program(&term, inputs).ok()?.first()?.item().ok()
}

/// What identifies an error for [`Fz::blame`]: where and what.
pub(super) fn blame_key(e: &Stop) -> (u32, u32, String) {
    match e {
        Stop::NeedsStatic(at, why) => (at.line, at.col, why.clone()),
        Stop::Diag(d) => d.span.map_or((0, 0, d.message.clone()), |at| (at.line, at.col, d.message.clone())),
    }
}

/// Whether an error is one of this tool's limits (a specialized `if` may avoid it), not one PyTorch raises too.
fn this_tools_limit(e: &Stop) -> bool {
    match e {
        Stop::NeedsStatic(..) => true,
        Stop::Diag(d) => !super::checks::raises_in_pytorch(&d.message),
    }
}
