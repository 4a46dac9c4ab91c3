//! What CPython does that both the frontend and the engines need to know: the standard-library modules a program
//! may import without using them on the path it runs, and the order in which CPython iterates a set of ints (its
//! hash table's slots: for ints, whose hash is the value reduced modulo 2^61 - 1, a fixed order that
//! [`iteration_order`] replays from `setobject.c`: linear probes of 9, then perturbed open addressing; the table grows
//! to hold 4 times its items once it is 3/5 full).

/// Modules of Python's standard library a program may import without using on the path it runs (DiffusionDet's
/// `random.shuffle` in a branch its shapes never take): the import binds the module, and any use of it is refused
/// where it runs (both engines).
pub const UNSUPPORTED_MODULES: &[&str] = &[
    "random",
    "collections",
    "os",
    "sys",
    "time",
    "re",
    "json",
    "operator",
    "numbers",
    "dataclasses",
    "enum",
    "abc",
    "inspect",
    "types",
    "contextlib",
    "pathlib",
    "datetime",
    "traceback",
    "pprint",
    "bisect",
    "heapq",
    "statistics",
];

const LINEAR_PROBES: u64 = 9;
const PERTURB_SHIFT: u32 = 5;
const MIN_SIZE: usize = 8;

/// Python's `hash` of an int.
pub fn int_hash(v: i64) -> i64 {
    const P: i128 = (1 << 61) - 1;
    let m = (i128::from(v).abs() % P) as i64;
    let h = if v < 0 { -m } else { m };
    if h == -1 {
        -2
    } else {
        h
    }
}

/// The slots a key of `hash` tries in a table of `mask + 1` slots, in CPython's order (`set_add_entry`,
/// `set_insert_clean`): from slot `hash & mask`, that slot and the 9 after it where they fit in the table, then the
/// next start `i * 5 + 1 + perturb` with `perturb` shifted right by 5 each time. Endless: a table always has a free slot.
fn probes(hash: i64, mask: u64) -> impl Iterator<Item = usize> {
    let (mut i, mut perturb) = (hash as u64 & mask, hash as u64);
    std::iter::from_fn(move || {
        let run = if i + LINEAR_PROBES <= mask { LINEAR_PROBES } else { 0 };
        let start = i;
        perturb >>= PERTURB_SHIFT;
        i = i.wrapping_mul(5).wrapping_add(1).wrapping_add(perturb) & mask;
        Some((start..=start + run).map(|j| j as usize))
    })
    .flatten()
}

/// The table after growing to hold `min_used` items: the smallest power of two (from 8) above it, the old slots'
/// items reinserted in slot order (`set_insert_clean`: the first free slot, no key there being equal).
fn resized(table: &[Option<usize>], hashes: &[i64], min_used: usize) -> Vec<Option<usize>> {
    let mut size = MIN_SIZE;
    while size <= min_used {
        size <<= 1;
    }
    let mut new = vec![None; size];
    for &item in table.iter().flatten() {
        let slot = probes(hashes[item], size as u64 - 1).find(|&k| new[k].is_none()).expect("a free slot");
        new[slot] = Some(item);
    }
    new
}

/// The slots of a set built by adding `hashes` in order, where `same(a, b)` says items `a` and `b` are equal (the
/// later one is then not added). Nothing is removed, so every filled slot holds an item (CPython's `fill` is `used`).
fn built(hashes: &[i64], same: &dyn Fn(usize, usize) -> bool) -> Vec<Option<usize>> {
    let mut table = vec![None; MIN_SIZE];
    let mut used = 0usize;
    for (item, &hash) in hashes.iter().enumerate() {
        let mask = table.len() as u64 - 1;
        // The first free slot, unless an equal key comes first.
        let slot = probes(hash, mask)
            .find(|&k| table[k].is_none_or(|other| hashes[other] == hash && same(other, item)))
            .expect("a free slot");
        if table[slot].is_some() {
            continue;
        }
        table[slot] = Some(item);
        used += 1;
        if used * 5 >= mask as usize * 3 {
            table = resized(&table, hashes, if used > 50000 { used * 2 } else { used * 4 });
        }
    }
    table
}

/// The items (indices into `hashes`) of a set built from them, in CPython's iteration order, duplicates left out.
/// `constant_display`: a display of three or more constants (`{2, 7, 11}`), which CPython compiles to an empty set
/// updated from a frozenset constant (a larger table copies that one's slots in order).
pub fn iteration_order(hashes: &[i64], same: &dyn Fn(usize, usize) -> bool, constant_display: bool) -> Vec<usize> {
    let mut table = built(hashes, same);
    let used = table.iter().flatten().count();
    if constant_display && used * 5 >= (MIN_SIZE - 1) * 3 {
        table = resized(&table, hashes, used * 2);
    }
    table.into_iter().flatten().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn order(v: &[i64], display: bool) -> Vec<i64> {
        let hashes: Vec<i64> = v.iter().map(|&x| int_hash(x)).collect();
        iteration_order(&hashes, &|a, b| v[a] == v[b], display).into_iter().map(|k| v[k]).collect()
    }

    /// Orders printed by CPython 3.11 (`list(set([...]))`, `list({...})`).
    #[test]
    fn orders_are_cpythons() {
        assert_eq!(order(&[7, 2], false), [2, 7]);
        assert_eq!(order(&[8, 1], false), [8, 1]);
        assert_eq!(order(&[3, 1, 3, 2], false), [1, 2, 3]);
        assert_eq!(order(&[-1, -2, 5], false), [5, -1, -2]);
        assert_eq!(order(&[100, 3, 17, 42, 9, 64], false), [64, 3, 100, 9, 42, 17]);
        assert_eq!(order(&[32000, 2, 13, 31999], false), [32000, 2, 13, 31999]);
        let sevens: Vec<i64> = (0..200).step_by(7).collect();
        let want = [
            0, 133, 7, 140, 14, 147, 21, 154, 28, 161, 35, 168, 42, 175, 49, 182, 56, 189, 63, 196, 70, 77, 84, 91, 98,
            105, 112, 119, 126,
        ];
        assert_eq!(order(&sevens, false), want);
        let big = [1 << 62, -(1 << 62), 5, (1 << 61) - 1, 1 << 61];
        assert_eq!(order(&big, false), [(1 << 61) - 1, 1 << 61, 1 << 62, 5, -(1 << 62)]);
        assert_eq!(order(&[10, 20, 30, 40, 50], true), [50, 20, 40, 10, 30]);
        assert_eq!(order(&[5, 99, 1000, 7], true), [1000, 99, 5, 7]);
        let many = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 33, 65];
        assert_eq!(order(&many, true), many);
    }
}
