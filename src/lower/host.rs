//! Python's scalars on the host. A 0-d boolean comparison or logical op of integers and booleans that only the host
//! reads is what Python computes without a kernel: `done = t >= MAX_LEN or tok.item() == EOS` then `while not done`
//! are Python bools in PyTorch eager. Such an op (a *host scalar*) is planned [`How::Host`] under every policy: the
//! executor evaluates it itself (`exec.rs`), reading each operand where it is (a host integer through `itensor`, a
//! literal `full`, another host scalar, loop state, or a 0-d buffer downloaded as `.item()` does), and no plan
//! launches a kernel for it.
//!
//! Only the host may read it: another host scalar, an `if`'s or `while`'s condition, or a loop's state whose every
//! reader (in the loop, and after it through `get`) is one of these. State is traced only in loops with no loop
//! inside them, where `(carried 0 j)` names the loop's own slot.

use egg::{Id, Language};
use hashbrown::HashSet;

use super::plan::Planner;
use crate::ir::{lit, Node, OpName};
use crate::tensor::DType;

/// The ops a host scalar may be.
pub fn scalar_op(op: OpName) -> bool {
    use OpName::*;
    matches!(op, Eq | Ne | Lt | Le | Gt | Ge | BitAnd | BitOr | BitXor | LogicalNot)
}

impl Planner<'_> {
    /// Whether node `id` is a 0-d tensor of booleans or integers (the values a host scalar reads and yields).
    fn scalar_typed(&self, id: Id, bool_only: bool) -> bool {
        match self.tensor(id) {
            Some((d, s)) => s.is_empty() && (d == DType::Bool || (!bool_only && matches!(d, DType::I64 | DType::I32))),
            None => false,
        }
    }

    /// Whether a host scalar reads node `id` where it is, not as a buffer: an `itensor` of a host integer, or a
    /// `full` of a literal integer or boolean.
    pub(super) fn host_literal(&self, id: Id) -> bool {
        match &self.term[id] {
            Node::Op(OpName::ITensor, _) => true,
            // The literal as the dtype holds it (a bool `true`, an integer in range), so that reading it raw is right.
            Node::Op(OpName::Full, a) => match (self.tensor(id).map(|(d, _)| d), &self.term[a[2]]) {
                (Some(DType::Bool), Node::Bool(_)) | (Some(DType::I64), Node::Int(_)) => true,
                (Some(DType::I32), Node::Int(i)) => i32::try_from(*i).is_ok(),
                _ => false,
            },
            _ => false,
        }
    }

    /// The host scalars of the term.
    pub(super) fn host_scalars(&self) -> HashSet<Id> {
        let term = self.term;
        let n = term.as_ref().len();
        let mut set: HashSet<Id> = (0..n)
            .map(Id::from)
            .filter(|&id| match &term[id] {
                Node::Op(op, args) => {
                    scalar_op(*op) && self.scalar_typed(id, true) && args.iter().all(|&a| self.scalar_typed(a, false))
                }
                _ => false,
            })
            .collect();
        let slots = loop_slots(term);
        // The greatest set whose every member is read only by the host: drop members with another reader until none.
        loop {
            let before = set.len();
            let keep: Vec<Id> = set.iter().copied().filter(|&id| self.host_read(id, &set, &slots)).collect();
            set = keep.into_iter().collect();
            if set.len() == before {
                return set;
            }
        }
    }

    /// Whether every reader of `id` is the host: a member of `set`, a condition, or a loop state slot (as its initial
    /// or next value) whose readers all are.
    fn host_read(&self, id: Id, set: &HashSet<Id>, slots: &Slots) -> bool {
        self.users[usize::from(id)].iter().all(|&u| match &self.term[u] {
            _ if host_reader(&self.term[u], u, id, set) => true,
            Node::Tuple(items) => {
                items.iter().enumerate().all(|(j, &x)| x != id || self.slot_host_read(u, j, set, slots))
            }
            _ => false,
        })
    }

    /// Whether slot `j` of tuple `tuple` is loop state only the host reads: the tuple is only loops' state (hash-
    /// consing may share it with another loop, an `if`'s arm or an output, which would read the value as a tensor),
    /// and in each of those loops, and after it through `get`, every reader of the slot is the host.
    fn slot_host_read(&self, tuple: Id, j: usize, set: &HashSet<Id>, slots: &Slots) -> bool {
        let Some(loops) = slots.of.get(&tuple) else { return false };
        self.users[usize::from(tuple)].iter().all(|l| loops.iter().any(|&(lp, _)| lp == *l))
            && loops.iter().all(|&(lp, k)| {
                slots.readers[k].get(j).is_some_and(|r| r.iter().all(|&c| self.value_host_read(c, set)))
                    && slots.gets(lp, j).all(|g| self.value_host_read(g, set))
            })
    }

    /// Whether every reader of the value node `v` (loop state read in the loop, or a loop's result read after it)
    /// is a member of `set` or a condition.
    fn value_host_read(&self, v: Id, set: &HashSet<Id>) -> bool {
        self.users[usize::from(v)].iter().all(|&u| host_reader(&self.term[u], u, v, set))
    }
}

/// Whether node `u` (`node`) reads `v` as the host does: a member of `set`, or an `if`'s or `while`'s condition.
fn host_reader(node: &Node, u: Id, v: Id, set: &HashSet<Id>) -> bool {
    match node {
        _ if set.contains(&u) => true,
        Node::If([c, a, b]) => *c == v && *a != v && *b != v,
        Node::While([init, c, body]) => *c == v && *init != v && *body != v,
        _ => false,
    }
}

/// For each tuple that is the initial state or the body of a loop with no loop inside it: the loops (node, index
/// into `readers`). `readers[k][j]`: the `(carried 0 j)` nodes of that loop. `gets`: `(get loop j)` nodes.
struct Slots {
    of: hashbrown::HashMap<Id, Vec<(Id, usize)>>,
    readers: Vec<Vec<Vec<Id>>>,
    gets: Vec<(Id, i64, Id)>,
}

impl Slots {
    fn gets(&self, lp: Id, j: usize) -> impl Iterator<Item = Id> + '_ {
        self.gets.iter().filter(move |&&(l, k, _)| l == lp && k == j as i64).map(|&(_, _, g)| g)
    }
}

fn loop_slots(term: &crate::ir::Term) -> Slots {
    let mut out = Slots { of: Default::default(), readers: Vec::new(), gets: Vec::new() };
    for (i, node) in term.as_ref().iter().enumerate() {
        let id = Id::from(i);
        let (init, inside) = match node {
            Node::While([init, cond, body]) => (*init, vec![*cond, *body]),
            Node::Loop([_, _, _, init, body]) => (*init, vec![*body]),
            Node::Get([lp, j]) => {
                if let Some(j) = lit(term, *j) {
                    out.gets.push((*lp, j, id));
                }
                continue;
            }
            _ => continue,
        };
        let (Node::Tuple(inits), Some(body)) = (&term[init], inside.last()) else { continue };
        let Some(readers) = own_slots(term, &inside, inits.len()) else { continue };
        out.readers.push(readers);
        let k = out.readers.len() - 1;
        for t in [init, *body] {
            if matches!(term[t], Node::Tuple(_)) {
                out.of.entry(t).or_default().push((id, k));
            }
        }
    }
    out
}

/// The `(carried 0 j)` nodes under `roots` per slot `j`, or `None` where a loop is nested there (its body's
/// `(carried 0 j)` would be its own).
fn own_slots(term: &crate::ir::Term, roots: &[Id], slots: usize) -> Option<Vec<Vec<Id>>> {
    let mut readers = vec![Vec::new(); slots];
    let mut seen = HashSet::new();
    let mut stack = roots.to_vec();
    while let Some(n) = stack.pop() {
        if !seen.insert(n) {
            continue;
        }
        match &term[n] {
            Node::While(_) | Node::Loop(_) => return None,
            Node::Carried([d, j]) => {
                if let (Some(0), Some(j)) = (lit(term, *d), lit(term, *j)) {
                    readers.get_mut(j as usize)?.push(n);
                }
            }
            node => stack.extend(node.children().iter().copied()),
        }
    }
    Some(readers)
}

/// A host scalar's value: a comparison of integers (booleans as 0 and 1, as Python compares them), or a
/// logical op of booleans.
pub(super) fn host_scalar(op: OpName, v: &[i64]) -> Result<bool, String> {
    use OpName::*;
    Ok(match (op, v) {
        (LogicalNot, [a]) => *a == 0,
        (Eq, [a, b]) => a == b,
        (Ne, [a, b]) => a != b,
        (Lt, [a, b]) => a < b,
        (Le, [a, b]) => a <= b,
        (Gt, [a, b]) => a > b,
        (Ge, [a, b]) => a >= b,
        (BitAnd, [a, b]) => (a & b) != 0,
        (BitOr, [a, b]) => (a | b) != 0,
        (BitXor, [a, b]) => (a ^ b) != 0,
        _ => return Err(format!("internal: `{op}` is not a host scalar of {} operands", v.len())),
    })
}
