//! The order constraints of in-place writes: a write into a dead buffer runs after the readers of the old buffer
//! (`Plan::before`). Those readers must not need the write themselves, directly or through what other in-place
//! writes must run first; else the executor would wait on the write to run the write (fuzz seed 687: two writes,
//! each of whose old-buffer readers needs the other).

use egg::{Id, Language, RecExpr};

use crate::ir::Node;

/// Whether running `first` before the in-place write `id` would need `id` itself: some node of `first` reaches it
/// through operands or through the `before` lists of other writes. Such a write is not done in place.
pub(super) fn would_cycle(
    term: &RecExpr<Node>,
    before: &hashbrown::HashMap<Id, Vec<Id>>,
    id: Id,
    first: &[Id],
) -> bool {
    let mut stack: Vec<Id> = first.to_vec();
    let mut seen = hashbrown::HashSet::new();
    while let Some(c) = stack.pop() {
        if c == id {
            return true;
        }
        if seen.insert(c) {
            stack.extend(term[c].children().iter().copied());
            if let Some(b) = before.get(&c) {
                stack.extend(b.iter().copied());
            }
        }
    }
    false
}
