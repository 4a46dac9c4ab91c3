//! Lists and dicts whose entries the two arms of an `if` on a run-time value set differently
//! (`d["inv_freq"] = a` in one arm, `= b` in the other): each such entry joins the merge as a name of its own
//! (`%entry.LABEL.J`), merged as a binding is, and the merged value is written back into the container after.
//! The arms must leave each container with one structure (a list's length, a dict's keys in order).

use std::cell::RefCell;
use std::rc::Rc;

use super::state::FV;
use super::Env;

/// The prefix of the names that carry a container's entry through the merge of an `if`'s arms.
pub(super) const ENTRY: &str = "%entry.";

/// A list or a dict.
enum Container {
    List(Rc<RefCell<Vec<FV>>>),
    Dict(Rc<RefCell<Vec<(FV, FV)>>>),
}

impl Container {
    fn same(&self, v: &FV) -> bool {
        match (self, v) {
            (Container::List(a), FV::List(b)) => Rc::ptr_eq(a, b),
            (Container::Dict(a), FV::Dict(b)) => Rc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// A container's entries at one moment.
#[derive(Clone)]
pub(super) enum Entries {
    List(Vec<FV>),
    Dict(Vec<(FV, FV)>),
}

impl Entries {
    fn values(&self) -> Vec<&FV> {
        match self {
            Entries::List(xs) => xs.iter().collect(),
            Entries::Dict(xs) => xs.iter().map(|(_, v)| v).collect(),
        }
    }

    /// Whether two states of one container have the same length and, for a dict, the same keys in order.
    fn same_structure(&self, o: &Entries) -> bool {
        match (self, o) {
            (Entries::List(a), Entries::List(b)) => a.len() == b.len(),
            (Entries::Dict(a), Entries::Dict(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|((k, _), (q, _))| k.same(q))
            }
            _ => false,
        }
    }
}

/// The containers reachable from a set of bindings, each labelled by the first name (in sorted order) that reaches
/// it and the positions on the way, so that the merge's slots come in one order on every run.
pub(super) struct Containers(Vec<(String, Container)>);

impl Containers {
    pub(super) fn of(env: &Env) -> Containers {
        let mut names: Vec<&String> = env.keys().collect();
        names.sort();
        let mut out = Containers(Vec::new());
        for n in names {
            out.walk(&env[n], n.clone());
        }
        out
    }

    fn walk(&mut self, v: &FV, label: String) {
        let items: Vec<FV> = match v {
            FV::Tuple(xs) | FV::Named(xs, _) => xs.to_vec(),
            FV::List(l) if !self.0.iter().any(|(_, c)| c.same(v)) => {
                self.0.push((label.clone(), Container::List(l.clone())));
                l.borrow().clone()
            }
            FV::Dict(d) if !self.0.iter().any(|(_, c)| c.same(v)) => {
                self.0.push((label.clone(), Container::Dict(d.clone())));
                d.borrow().iter().map(|(_, x)| x.clone()).collect()
            }
            _ => return,
        };
        for (j, x) in items.iter().enumerate() {
            self.walk(x, format!("{label}.{j}"));
        }
    }

    /// Every container's entries as they are now.
    pub(super) fn now(&self) -> Vec<Entries> {
        self.0
            .iter()
            .map(|(_, c)| match c {
                Container::List(l) => Entries::List(l.borrow().clone()),
                Container::Dict(d) => Entries::Dict(d.borrow().clone()),
            })
            .collect()
    }

    /// The entries the arms (left in states `a` and `b`) set differently, each bound in the arm's bindings
    /// (`env_a`, `env_b`) to a name of its own; those entries are emptied in the containers (they hold `b`'s
    /// state), so that no other name's merge sees either arm's value through them. `Err` where the arms leave a
    /// container with different structures.
    pub(super) fn split(
        &self,
        a: &[Entries],
        b: &[Entries],
        env_a: &mut Env,
        env_b: &mut Env,
    ) -> Result<Vec<(usize, usize, String)>, String> {
        let mut slots = Vec::new();
        for (i, (label, _)) in self.0.iter().enumerate() {
            if !a[i].same_structure(&b[i]) {
                return Err(format!(
                    "a list or dict (in `{}`) left with different lengths or keys by the two arms of an `if` on a run-time value",
                    shown(label)
                ));
            }
            for (j, (x, y)) in a[i].values().into_iter().zip(b[i].values()).enumerate() {
                if !x.same(y) {
                    let name = format!("{ENTRY}{label}.{j}");
                    env_a.insert(name.clone(), x.clone());
                    env_b.insert(name.clone(), y.clone());
                    slots.push((i, j, name));
                }
            }
        }
        for &(i, j, _) in &slots {
            self.put(i, j, FV::None);
        }
        Ok(slots)
    }

    /// Writes the merged entries (bound in `env` under their names, which are then unbound) back into their
    /// containers. `Err` with the reason where an entry cannot be read after the `if` (its arms' values differ in
    /// type or shape).
    pub(super) fn write_back(&self, slots: &[(usize, usize, String)], env: &mut Env) -> Result<(), String> {
        for (i, j, name) in slots {
            match env.remove(name) {
                Some(FV::Poisoned(why, _)) => {
                    return Err(format!("an entry of a list or dict (in `{}`) {why}", shown(&self.0[*i].0)))
                }
                Some(v) => self.put(*i, *j, v),
                None => unreachable!("a merged entry is bound"),
            }
        }
        env.retain(|k, _| !k.starts_with(ENTRY));
        Ok(())
    }

    fn put(&self, i: usize, j: usize, v: FV) {
        match &self.0[i].1 {
            Container::List(l) => l.borrow_mut()[j] = v,
            Container::Dict(d) => d.borrow_mut()[j].1 = v,
        }
    }
}

/// The name a container's label starts from.
fn shown(label: &str) -> &str {
    label.split('.').next().unwrap_or(label)
}
