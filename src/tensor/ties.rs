//! The order PyTorch's CPU kernels leave equal keys in. `torch.sort` (without `stable=True`) sorts each line with the
//! C++ standard library's `std::sort`, and `torch.topk` with `std::partial_sort` (where `k * 64 <= n`) or
//! `std::nth_element` followed by `std::sort` of the first `k - 1` (not sorted at all with `sorted=False`). None of
//! them is stable, so the indices of equal keys come out in an order only the algorithms decide: detection code
//! that takes the top `k` of scores padded with zeros, or allocates memory cells by sorting usages that start equal,
//! sees it. This module follows the algorithms as GCC's libstdc++ (which PyTorch's Linux wheels use) writes them
//! (introsort with median-of-three pivots and a final insertion sort over runs of 16, introselect, heap selection),
//! moving `(key, index)` pairs and comparing keys only, so that every engine returns PyTorch's indices.

/// How equal keys are ordered: what a sort node computes (`ir` `sort_val`/`sort_idx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ties {
    /// By index (`stable=True`).
    Stable,
    /// As `torch.sort` leaves them.
    Sort,
    /// As `torch.topk(k, sorted=...)` leaves its first `k` positions (the others are not defined).
    TopK { k: usize, sorted: bool },
}

impl Ties {
    /// The literal a sort node carries for this order, with `k` as its own argument ([`Ties::from_code`]).
    pub fn code(self) -> (i64, i64) {
        match self {
            Ties::Stable => (0, 0),
            Ties::Sort => (1, 0),
            Ties::TopK { k, sorted: true } => (2, k as i64),
            Ties::TopK { k, sorted: false } => (3, k as i64),
        }
    }

    /// The order a sort node's literals name; a negative `k` (which `topk` refuses where it checks it) orders
    /// nothing.
    pub fn from_code(mode: i64, k: i64) -> Result<Ties, String> {
        let k = k.max(0) as usize;
        match mode {
            0 => Ok(Ties::Stable),
            1 => Ok(Ties::Sort),
            2 | 3 => Ok(Ties::TopK { k, sorted: mode == 2 }),
            m => Err(format!("sort: unknown order of ties {m}")),
        }
    }
}

/// The order of `keys` (positions into it) that PyTorch's kernel for `ties` gives, ascending or descending; NaN
/// counts as larger than every number, as PyTorch orders it. For `TopK` only the first `k` positions are PyTorch's.
pub fn order<K: Copy + PartialOrd>(keys: &[K], descending: bool, ties: Ties) -> Vec<usize> {
    let nan = |k: K| k.partial_cmp(&k).is_none();
    // PyTorch's comparators: NaN last ascending, first descending.
    let less = |a: &(K, usize), b: &(K, usize)| -> bool {
        if descending {
            (nan(a.0) && !nan(b.0)) || a.0 > b.0
        } else {
            (!nan(a.0) && nan(b.0)) || a.0 < b.0
        }
    };
    let mut v: Vec<(K, usize)> = keys.iter().copied().zip(0..).collect();
    match ties {
        Ties::Stable => {
            // A merge sort keeps equal keys in index order (`std::stable_sort`'s result is unique).
            v.sort_by(|a, b| match (less(a, b), less(b, a)) {
                (true, _) => std::cmp::Ordering::Less,
                (_, true) => std::cmp::Ordering::Greater,
                _ => std::cmp::Ordering::Equal,
            });
        }
        Ties::Sort => sort(&mut v, &less),
        Ties::TopK { k, sorted } => {
            let n = v.len();
            if k > 0 && k <= n {
                if k * 64 <= n {
                    partial_sort(&mut v, k, &less);
                } else {
                    nth_element(&mut v, k - 1, &less);
                    if sorted {
                        sort(&mut v[..k - 1], &less);
                    }
                }
            }
        }
    }
    v.into_iter().map(|(_, i)| i).collect()
}

/// `floor(log2(n))` for `n > 0`.
fn lg(n: usize) -> usize {
    (usize::BITS - 1 - n.leading_zeros()) as usize
}

/// `std::sort`: introsort to runs of at most 16, then one insertion sort.
fn sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() > 1 {
        introsort_loop(v, 2 * lg(v.len()), less);
        final_insertion_sort(v, less);
    }
}

const THRESHOLD: usize = 16;

fn introsort_loop<T: Copy>(v: &mut [T], mut depth: usize, less: &impl Fn(&T, &T) -> bool) {
    let mut last = v.len();
    while last > THRESHOLD {
        if depth == 0 {
            partial_sort(&mut v[..last], last, less);
            return;
        }
        depth -= 1;
        let cut = partition_pivot(&mut v[..last], less);
        introsort_loop(&mut v[cut..last], depth, less);
        last = cut;
    }
}

/// Moves the median of `v[1]`, the middle and the last element to `v[0]`, then partitions `v[1..]` around it: the
/// position where the part not less than the pivot starts.
fn partition_pivot<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) -> usize {
    let (n, mid) = (v.len(), v.len() / 2);
    move_median_to_first(v, 1, mid, n - 1, less);
    unguarded_partition(v, 1, n, 0, less)
}

fn move_median_to_first<T: Copy>(v: &mut [T], a: usize, b: usize, c: usize, less: &impl Fn(&T, &T) -> bool) {
    let pick = if less(&v[a], &v[b]) {
        if less(&v[b], &v[c]) {
            b
        } else if less(&v[a], &v[c]) {
            c
        } else {
            a
        }
    } else if less(&v[a], &v[c]) {
        a
    } else if less(&v[b], &v[c]) {
        c
    } else {
        b
    };
    v.swap(0, pick);
}

fn unguarded_partition<T: Copy>(
    v: &mut [T],
    mut first: usize,
    mut last: usize,
    pivot: usize,
    less: &impl Fn(&T, &T) -> bool,
) -> usize {
    loop {
        while less(&v[first], &v[pivot]) {
            first += 1;
        }
        last -= 1;
        while less(&v[pivot], &v[last]) {
            last -= 1;
        }
        if first >= last {
            return first;
        }
        v.swap(first, last);
        first += 1;
    }
}

fn insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    for i in 1..v.len() {
        if less(&v[i], &v[0]) {
            let x = v[i];
            v.copy_within(0..i, 1);
            v[0] = x;
        } else {
            unguarded_linear_insert(v, i, less);
        }
    }
}

fn unguarded_linear_insert<T: Copy>(v: &mut [T], mut last: usize, less: &impl Fn(&T, &T) -> bool) {
    let x = v[last];
    while less(&x, &v[last - 1]) {
        v[last] = v[last - 1];
        last -= 1;
    }
    v[last] = x;
}

fn final_insertion_sort<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    if v.len() > THRESHOLD {
        insertion_sort(&mut v[..THRESHOLD], less);
        for i in THRESHOLD..v.len() {
            unguarded_linear_insert(v, i, less);
        }
    } else {
        insertion_sort(v, less);
    }
}

/// `std::nth_element`: introselect, then an insertion sort of the last range of at most 3.
fn nth_element<T: Copy>(v: &mut [T], nth: usize, less: &impl Fn(&T, &T) -> bool) {
    if v.is_empty() || nth >= v.len() {
        return;
    }
    let (mut first, mut last) = (0, v.len());
    let mut depth = 2 * lg(v.len());
    while last - first > 3 {
        if depth == 0 {
            heap_select(&mut v[first..last], nth + 1 - first, less);
            v.swap(first, nth);
            return;
        }
        depth -= 1;
        let cut = first + partition_pivot(&mut v[first..last], less);
        if cut <= nth {
            first = cut;
        } else {
            last = cut;
        }
    }
    insertion_sort(&mut v[first..last], less);
}

/// `std::partial_sort`: the least `middle` elements, sorted, in front.
fn partial_sort<T: Copy>(v: &mut [T], middle: usize, less: &impl Fn(&T, &T) -> bool) {
    heap_select(v, middle, less);
    let mut last = middle;
    while last > 1 {
        last -= 1;
        pop_heap(v, last, last, less);
    }
}

fn heap_select<T: Copy>(v: &mut [T], middle: usize, less: &impl Fn(&T, &T) -> bool) {
    make_heap(&mut v[..middle], less);
    for i in middle..v.len() {
        if less(&v[i], &v[0]) {
            pop_heap(v, middle, i, less);
        }
    }
}

fn make_heap<T: Copy>(v: &mut [T], less: &impl Fn(&T, &T) -> bool) {
    let len = v.len();
    if len < 2 {
        return;
    }
    let mut parent = (len - 2) / 2;
    loop {
        let x = v[parent];
        adjust_heap(v, parent, len, x, less);
        if parent == 0 {
            return;
        }
        parent -= 1;
    }
}

/// Moves the heap's top (the heap is `v[..len]`) to `result` and puts `v[result]` into the heap.
fn pop_heap<T: Copy>(v: &mut [T], len: usize, result: usize, less: &impl Fn(&T, &T) -> bool) {
    let x = v[result];
    v[result] = v[0];
    adjust_heap(v, 0, len, x, less);
}

fn adjust_heap<T: Copy>(v: &mut [T], mut hole: usize, len: usize, x: T, less: &impl Fn(&T, &T) -> bool) {
    let top = hole;
    let mut child = hole;
    while len > 2 && child < (len - 1) / 2 {
        child = 2 * (child + 1);
        if less(&v[child], &v[child - 1]) {
            child -= 1;
        }
        v[hole] = v[child];
        hole = child;
    }
    if len % 2 == 0 && len >= 2 && child == (len - 2) / 2 {
        child = 2 * (child + 1);
        v[hole] = v[child - 1];
        hole = child - 1;
    }
    // push_heap
    let mut parent = hole.wrapping_sub(1) / 2;
    while hole > top && less(&v[parent], &x) {
        v[hole] = v[parent];
        hole = parent;
        parent = hole.wrapping_sub(1) / 2;
    }
    v[hole] = x;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Orders PyTorch 2.15 (CPU, Linux wheel) gave, on the inputs written here.
    #[test]
    fn equal_keys_come_out_as_pytorch_orders_them() {
        let zeros = |n: usize| vec![0.0f64; n];
        let topk = |k, sorted| Ties::TopK { k, sorted };
        assert_eq!(order(&zeros(64), true, topk(10, true))[..10], [40, 47, 46, 45, 44, 43, 42, 41, 34, 35]);
        assert_eq!(order(&zeros(8), true, topk(3, true))[..3], [6, 5, 4]);
        assert_eq!(order(&zeros(1000), true, topk(5, true))[..5], [3, 4, 1, 0, 2]);
        assert_eq!(
            order(&zeros(64), false, Ties::Sort)[..20],
            [48, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 32, 49, 50, 51]
        );
        let x = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 2.0, 2.0, 0.0, 1.0, 1.0];
        assert_eq!(order(&x, true, topk(4, true))[..4], [7, 6, 4, 0]);
        assert_eq!(order(&x, false, topk(4, true))[..4], [1, 8, 5, 3]);
        assert_eq!(order(&x, true, topk(4, false))[..4], [7, 6, 4, 0]);
    }
}
