//! View geometry over row-major storage: the offsets a strided view (shape, strides, base offset) reaches, its span,
//! whether it names an element twice, and whether two views share an element. Shared by the rule conditions of
//! saturation (`no_overlap`, `disjoint`) and the planner (writes that no point of a kernel reads), so both decide
//! alike; the element offsets come from the runtime's own view arithmetic.

/// The storage offsets a view of this shape and these strides reaches from offset `base`.
pub fn offsets(shape: &[usize], strides: &[isize], base: i64) -> Vec<i64> {
    let t = crate::tensor::Tensor::zeros(crate::tensor::DType::F32, &[]).expect("one element");
    let big = 1i64 << 40;
    t.restride(shape.to_vec(), strides.to_vec(), (big + base) as usize)
        .offsets()
        .into_iter()
        .map(|o| o as i64 - big)
        .collect()
}

/// The lowest and highest storage offsets a view reaches from `base` (an empty view reaches none: lo > hi).
pub fn span(shape: &[usize], strides: &[isize], base: i64) -> (i64, i64) {
    if shape.contains(&0) {
        return (1, 0);
    }
    let (mut lo, mut hi) = (base, base);
    for (&n, &s) in shape.iter().zip(strides) {
        let reach = (n as i64 - 1) * s as i64;
        if reach < 0 {
            lo += reach;
        } else {
            hi += reach;
        }
    }
    (lo, hi)
}

type ViewPair = (Vec<usize>, Vec<isize>, Vec<usize>, Vec<isize>, i64);

thread_local! {
    /// Answers of [`disjoint`]: the same pairs of views come up again and again during saturation.
    static DISJOINT: std::cell::RefCell<hashbrown::HashMap<ViewPair, bool>> = Default::default();
}

/// Whether view a (from offset 0) and view b (from offset `delta`) share no element: disjoint ranges, else the
/// elements of a within b's range marked in a bitmap and b's looked up. Very large overlapping views are assumed to
/// share elements (which only keeps a rule from firing).
pub fn disjoint(sa: &[usize], ta: &[isize], sb: &[usize], tb: &[isize], delta: i64) -> bool {
    let (lo_a, hi_a) = span(sa, ta, 0);
    let (lo_b, hi_b) = span(sb, tb, delta);
    if hi_a < lo_b || hi_b < lo_a {
        return true;
    }
    let key = (sa.to_vec(), ta.to_vec(), sb.to_vec(), tb.to_vec(), delta);
    if let Some(r) = DISJOINT.with(|c| c.borrow().get(&key).copied()) {
        return r;
    }
    let (lo, hi) = (lo_a.max(lo_b), hi_a.min(hi_b));
    let r = if sa.iter().product::<usize>() + sb.iter().product::<usize>() > 1 << 24 {
        false
    } else {
        let mut mark = vec![false; (hi - lo + 1) as usize];
        for o in offsets(sa, ta, 0) {
            if (lo..=hi).contains(&o) {
                mark[(o - lo) as usize] = true;
            }
        }
        !offsets(sb, tb, delta).into_iter().any(|o| (lo..=hi).contains(&o) && mark[(o - lo) as usize])
    };
    DISJOINT.with(|c| c.borrow_mut().insert(key, r));
    r
}

/// Whether a view names every element of a buffer of its own size exactly once: no two indices name one element,
/// and its offsets (from `offset`) span exactly `0..numel` (numel distinct offsets that far apart are all of them).
pub fn is_permutation(shape: &[usize], strides: &[isize], offset: i64) -> bool {
    let numel: usize = shape.iter().product();
    let span = |f: fn(i64) -> i64| shape.iter().zip(strides).map(|(&n, &s)| f((n as i64 - 1) * s as i64)).sum::<i64>();
    numel > 0
        && shape.len() == strides.len()
        && offset + span(|d| d.min(0)) == 0
        && offset + span(|d| d.max(0)) == numel as i64 - 1
        && no_overlap(shape, strides)
}

/// Whether no two indices of a view name one element. Sorted by stride, each dim stepping past everything the
/// smaller ones reach proves it; a small view that fails that test is enumerated, a large one is assumed to overlap
/// (which only keeps a rule from firing).
pub fn no_overlap(shape: &[usize], strides: &[isize]) -> bool {
    let mut dims: Vec<(i64, i64)> =
        shape.iter().zip(strides).filter(|(&n, _)| n > 1).map(|(&n, &s)| (n as i64, (s as i64).abs())).collect();
    dims.sort_by_key(|&(_, s)| s);
    let mut reach = 0;
    let nested = dims.iter().all(|&(n, s)| {
        let ok = s > reach;
        reach += (n - 1) * s;
        ok
    });
    if nested {
        return true;
    }
    if shape.iter().product::<usize>() > 1 << 16 {
        return false;
    }
    let all = offsets(shape, strides, 0);
    all.iter().collect::<std::collections::HashSet<_>>().len() == all.len()
}
