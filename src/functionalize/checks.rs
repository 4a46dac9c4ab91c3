//! Run-time checks in code whose value is never used.
//!
//! PyTorch runs every statement, so `y = x[idx[0].item()]` raises an IndexError for a bad index even when `y` is
//! never read. A pure term keeps only what its outputs reach, so such a check would vanish with the dead code. Every
//! term that can fail at run time (a data-dependent index, slice start or narrow, an integer division by a run-time
//! value, advanced indexing, gathers and scatters) is recorded in the innermost open *scope*: the program, a loop
//! body, or one arm of an `if` on a run-time value. When a scope closes, the recorded terms its results do not reach
//! are hung on a result as `(after CHECK VALUE)`, which evaluates CHECK for its errors only:
//! - the program: on its first output;
//! - a loop body: on an extra carried integer, so every iteration's checks run;
//! - an `if` arm: on an extra integer part of the arm's tuple, so only the arm that runs checks.
//!
//! A loop or `if` whose scope recorded anything is itself recorded in the enclosing scope, so a loop whose results
//! are all unused still runs (and checks). Scopes are rolled back with the functionalizer's snapshots.

use egg::{Id, Language};

use super::state::{TId, Terms};
use crate::ir::{Builder, Node, OpName};

/// Whether node `n` (with children in `b`) can fail at run time with an error PyTorch would raise.
pub(super) fn can_fail(b: &Builder, n: &Node) -> bool {
    use OpName::*;
    let literal = |id: Id| matches!(b.node(id), Node::Int(_));
    match n {
        Node::Op(IIndex | ISlice | INarrow, a) => !a.first().is_some_and(|&i| literal(i)),
        Node::Op(IFloorDiv | IMod, a) => !a.get(1).is_some_and(|&i| literal(i)),
        Node::Op(Index | IndexPut | Gather | Scatter, _) => true,
        _ => false,
    }
}

impl Terms {
    /// Opens a scope: checks made from now on belong to it until [`Terms::take_scope`].
    pub fn open_scope(&mut self) {
        self.scopes.push(Vec::new());
    }

    /// Closes the innermost scope; returns the checks made in it.
    pub fn take_scope(&mut self) -> Vec<TId> {
        self.scopes.pop().unwrap_or_default()
    }

    /// Records a term that can fail (or contains checks) in the innermost scope.
    pub fn note_check(&mut self, t: TId) {
        if let Some(s) = self.scopes.last_mut() {
            s.push(t);
        }
    }

    /// The checks among `made` that evaluating `roots` is not sure to run, as nodes at the current depth, each once, in
    /// order.
    pub fn unreached(&mut self, made: &[TId], roots: &[Id]) -> Vec<Id> {
        if made.is_empty() {
            return Vec::new();
        }
        let mut seen = vec![false; self.b.expr.as_ref().len()];
        let mut stack = roots.to_vec();
        while let Some(id) = stack.pop() {
            if !std::mem::replace(&mut seen[usize::from(id)], true) {
                match self.b.node(id) {
                    // Only the arm that runs is evaluated, and a `while` body may run no time: what is reached
                    // only through them is not sure to run.
                    Node::If([c, _, _]) => stack.push(*c),
                    Node::While([init, cond, _]) => stack.extend([*init, *cond]),
                    n => stack.extend(n.children().iter().copied()),
                }
            }
        }
        let mut out = Vec::new();
        for &t in made {
            let id = self.at(t);
            if usize::from(id) < seen.len() && !seen[usize::from(id)] && !out.contains(&id) {
                out.push(id);
            }
        }
        out
    }

    /// `value` with every check in `checks` run first: `(after C1 (after C2 ... value))`.
    pub fn after_checks(&mut self, checks: &[Id], value: Id) -> Result<Id, String> {
        let mut v = value;
        for &c in checks.iter().rev() {
            v = self.op(OpName::After, vec![c, v])?.id;
        }
        Ok(v)
    }
}

impl super::Fz<'_> {
    /// Closes a loop body's scope. Checks the body's results (`parts`, and `also`, the condition of a `while`) do
    /// not reach go on an extra carried integer (0 on entry), added to `parts`, `tys` and `init`. Returns whether the
    /// body made any check, which makes the loop one in the enclosing scope.
    pub(super) fn checks_carried(
        &mut self,
        parts: &mut Vec<Id>,
        also: &[Id],
        tys: &mut Vec<crate::ir::Ty>,
        init: &mut Vec<Id>,
        span: crate::diag::Span,
    ) -> super::FR<bool> {
        let made = self.t.take_scope();
        let roots: Vec<Id> = parts.iter().chain(also).copied().collect();
        let dead = self.t.unreached(&made, &roots);
        if !dead.is_empty() {
            let j = parts.len();
            let frame = self.t.frames.last_mut().expect("a loop body runs in its frame");
            frame.carried.push(crate::ir::Ty::Int);
            tys.push(crate::ir::Ty::Int);
            let (d0, jj) = (self.t.leaf(Node::Int(0)), self.t.leaf(Node::Int(j as i64)));
            let token = self.t.add(Node::Carried([d0, jj])).map_err(Self::tyerr(span))?;
            parts.push(self.t.after_checks(&dead, token.id).map_err(Self::tyerr(span))?);
            init.push(self.t.leaf(Node::Int(0)));
        }
        Ok(!made.is_empty())
    }
}

impl super::Fz<'_> {
    /// Closes the program's scope: checks its outputs do not reach go on the first output.
    pub(super) fn checks_on_outputs(&mut self, parts: &mut [Id], span: crate::diag::Span) -> super::FR<()> {
        let made = self.t.take_scope();
        let dead = self.t.unreached(&made, parts);
        if dead.is_empty() {
            return Ok(());
        }
        let Some(first) = parts.first_mut() else {
            return super::state::needs_static(
                span,
                "a program with no outputs (it returns nothing and writes no parameter) whose run-time index checks would be lost",
            );
        };
        *first = self.t.after_checks(&dead, *first).map_err(Self::tyerr(span))?;
        Ok(())
    }
}

/// An arm's outcome: `Ok(Err(d))` where it fails with an error PyTorch raises as well when the arm runs; errors
/// that are this tool's limits (unsupported constructs, refusals) stay errors of the whole program.
pub(super) fn raising_arm<T>(r: super::FR<T>) -> super::FR<Result<T, crate::diag::Diagnostic>> {
    match r {
        Ok(x) => Ok(Ok(x)),
        Err(super::state::Stop::Diag(d)) if raises_in_pytorch(&d.message) => Ok(Err(d)),
        Err(e) => Err(e),
    }
}

/// Whether a functionalizer error is PyTorch's (or Python's) own, rather than a limit of this tool.
pub(crate) fn raises_in_pytorch(message: &str) -> bool {
    // A Python exception the program raises (`raise ValueError(...)`, a failed `assert`) or Python's own.
    let head = message.split(':').next().unwrap_or("");
    if !head.is_empty()
        && head.chars().all(|c| c.is_ascii_alphanumeric())
        && (head.ends_with("Error") || head.ends_with("Exception"))
    {
        return true;
    }
    let m = message.to_ascii_lowercase();
    // PyTorch's own error for writes through overlapping memory, and the reference's refusal of an overlapping write
    // whose result PyTorch leaves to its vector width: both come from the layouts alone, so the reference raises
    // them exactly where the arm runs (fuzz seed 101816).
    if m.starts_with("unsupported operation:") || m.contains("depends on the cpu's vector width") {
        return true;
    }
    ![
        "supported",
        "functionaliz",
        "engine",
        "known before",
        "cannot stay",
        "limit",
        "recursion",
        "internal",
        "depends on the data",
        "data-dependent",
    ]
    .iter()
    .any(|w| m.contains(w))
}

impl super::Fz<'_> {
    /// `assert COND` on a run-time value: a check that raises where COND is false (PyTorch's AssertionError, whose
    /// message and location `run` takes from the reference interpreter).
    pub(super) fn runtime_assert(&mut self, cond: TId, span: crate::diag::Span) -> super::FR<()> {
        let raise = self.t.op(OpName::Raise, vec![]).map_err(Self::tyerr(span))?.id;
        let zero = self.t.leaf(Node::Int(0));
        let th = self.t.add(Node::Tuple(vec![zero].into())).map_err(Self::tyerr(span))?;
        let el = self.t.add(Node::Tuple(vec![raise].into())).map_err(Self::tyerr(span))?;
        let c = self.t.at(cond);
        let node = self.t.add(Node::If([c, th.id, el.id])).map_err(Self::tyerr(span))?;
        self.t.note_check(node);
        Ok(())
    }
}
