//! Python sets of ints, bools and strings, as both engines hold them: a dict whose keys are the set's items in the
//! order CPython iterates them, its values None (`in`, `len`, iteration, `sorted`, `list` and `==` then behave as the
//! set's). CPython iterates a set in the order of its hash table's slots, which for ints is fixed and
//! `frontend::cpython::iteration_order` replays. A set of strings keeps its insertion order: CPython's order for
//! strings depends on the interpreter's hash seed, so a program whose result depends on it differs from one Python
//! run to the next.

use super::pyvalue::{Made, Py, PyValue};
use crate::frontend::cpython::{int_hash, iteration_order};

/// `s.add(item)` on the dict standing for a set (a dict has no `add`): the set of its items and `item`, in the order
/// Python's set would iterate them.
pub fn set_add<V: PyValue>(set: &std::cell::RefCell<Vec<(V, V)>>, item: &V) -> Result<(), String> {
    let same = |a: &V, b: &V| match (a.py(), b.py()) {
        (Py::Str(x), Py::Str(y)) => x == y,
        (Py::Int(_) | Py::Bool(_), Py::Int(_) | Py::Bool(_)) => a.number() == b.number(),
        _ => false,
    };
    let mut items: Vec<V> = set.borrow().iter().map(|(k, _)| k.clone()).collect();
    if !items.iter().any(|k| same(k, item)) {
        items.push(item.clone());
    }
    let made = set_of(items)?;
    let Py::Dict(d) = made.py() else { unreachable!("set_of makes a dict") };
    let made = d.borrow().clone();
    *set.borrow_mut() = made;
    Ok(())
}

/// `set(items)` in either engine (the items added in order): the dict standing for it (see the module's
/// documentation).
pub fn set_of<V: PyValue>(items: Vec<V>) -> Result<V, String> {
    let ints: Option<Vec<i64>> = items
        .iter()
        .map(|v| match v.py() {
            Py::Int(i) => Some(i),
            Py::Bool(b) => Some(i64::from(b)),
            _ => None,
        })
        .collect();
    let order: Vec<usize> = match ints {
        Some(ints) => {
            let hashes: Vec<i64> = ints.iter().map(|&v| int_hash(v)).collect();
            iteration_order(&hashes, &|a, b| ints[a] == ints[b], false)
        }
        None => {
            let strs: Option<Vec<&str>> =
                items.iter().map(|v| if let Py::Str(s) = v.py() { Some(&**s) } else { None }).collect();
            let Some(strs) = strs else {
                let bad = items.iter().find(|v| !matches!(v.py(), Py::Int(_) | Py::Bool(_) | Py::Str(_)));
                let ty = bad.map_or("a mix of numbers and strings", |v| v.type_name());
                return Err(format!(
                    "sets are supported of ints, bools (known before the program runs) or strings, not of {ty}"
                ));
            };
            (0..strs.len()).filter(|&k| !strs[..k].contains(&strs[k])).collect()
        }
    };
    Ok(V::make(Made::Dict(order.into_iter().map(|k| (items[k].clone(), V::make(Made::None))).collect())))
}
