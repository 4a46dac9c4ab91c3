//! `torch.einsum` as a plan of ops every engine already has: per operand an `expand` (size-1 dims that broadcast),
//! a `sum` over the subscripts no other operand or the output needs, a `permute` and a `reshape` to a batched
//! matrix; a batched `matmul` per pair of operands (left to right); a final `permute` into the output's order.
//! Refused with a message: ellipsis (`...`), a subscript repeated within one operand (a diagonal), and equations
//! that do not fit their operands.

/// One step over a row of values (slot `i` starts as operand `i`; the result is slot 0 after the last step).
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Replaces slot `slot` by: `expand(expand)` if any, then `sum(sum)` (no keepdim) if non-empty, then
    /// `permute(perm)` unless it is the identity, then `reshape(reshape)` if any.
    Prep { slot: usize, expand: Option<Vec<i64>>, sum: Vec<i64>, perm: Vec<i64>, reshape: Option<Vec<i64>> },
    /// Slot `a` becomes `matmul(slot a, slot b).reshape(reshape)`.
    Matmul { a: usize, b: usize, reshape: Vec<i64> },
}

fn parse_term(t: &str) -> Result<Vec<char>, String> {
    if t.contains('.') {
        return Err("einsum(): ellipsis ('...') is not supported; write out the subscripts".into());
    }
    let mut out = Vec::new();
    for c in t.chars() {
        if !c.is_ascii_alphabetic() {
            return Err(format!("einsum(): invalid subscript given at index of the equation string: '{c}'"));
        }
        if out.contains(&c) {
            return Err(format!(
                "einsum(): subscript {c} is repeated within one operand (a diagonal or trace), which is not supported"
            ));
        }
        out.push(c);
    }
    Ok(out)
}

/// Whether a permutation changes nothing.
pub fn is_identity(p: &[i64]) -> bool {
    p.iter().enumerate().all(|(i, &d)| d == i as i64)
}

/// The plan of `einsum(equation, operands)` for operands of the given shapes.
pub fn plan(equation: &str, shapes: &[Vec<usize>]) -> Result<Vec<Step>, String> {
    let eq: String = equation.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<Vec<char>> = lhs.split(',').map(parse_term).collect::<Result<_, _>>()?;
    if shapes.is_empty() {
        return Err("einsum(): must provide at least one operand".into());
    }
    if terms.len() < shapes.len() {
        return Err("einsum(): more operands were provided than specified in the equation".into());
    }
    if terms.len() > shapes.len() {
        return Err("einsum(): fewer operands were provided than specified in the equation".into());
    }
    let mut size: Vec<(char, usize)> = Vec::new();
    for (i, (t, s)) in terms.iter().zip(shapes).enumerate() {
        if t.len() != s.len() {
            return Err(format!("einsum(): the number of subscripts in the equation ({}) does not match the number of dimensions ({}) for operand {i} and no ellipsis was given", t.len(), s.len()));
        }
        for (&c, &n) in t.iter().zip(s) {
            match size.iter_mut().find(|(k, _)| *k == c) {
                None => size.push((c, n)),
                Some((_, m)) if *m == n || n == 1 => {}
                Some((_, m)) if *m == 1 => *m = n,
                Some((_, m)) => {
                    return Err(format!(
                        "einsum(): subscript {c} has size {n} for operand {i} which does not broadcast with previously seen size {m}"
                    ))
                }
            }
        }
    }
    let size_of = |c: char| size.iter().find(|(k, _)| *k == c).map(|(_, n)| *n as i64).unwrap_or(1);
    let out: Vec<char> = match rhs {
        Some(r) => {
            let o =
                parse_term(r).map_err(|e| e.replace("within one operand (a diagonal or trace)", "in the output"))?;
            if let Some(c) = o.iter().find(|c| !terms.iter().any(|t| t.contains(c))) {
                return Err(format!(
                    "einsum(): output subscript {c} does not appear in the equation for any input operand"
                ));
            }
            o
        }
        None => {
            let mut o: Vec<char> =
                size.iter().map(|(c, _)| *c).filter(|c| terms.iter().filter(|t| t.contains(c)).count() == 1).collect();
            o.sort_unstable();
            o
        }
    };
    let expand: Vec<Option<Vec<i64>>> = terms
        .iter()
        .zip(shapes)
        .map(|(t, s)| {
            let full: Vec<i64> = t.iter().map(|&c| size_of(c)).collect();
            (full.iter().zip(s).any(|(&f, &n)| f != n as i64)).then_some(full)
        })
        .collect();
    let pos = |letters: &[char], c: char| letters.iter().position(|&k| k == c).expect("letter present") as i64;
    let prod = |cs: &[char]| cs.iter().map(|&c| size_of(c)).product::<i64>();
    let mut steps = Vec::new();
    if terms.len() == 1 {
        let t = &terms[0];
        let sum: Vec<i64> = t.iter().filter(|c| !out.contains(c)).map(|&c| pos(t, c)).collect();
        let rest: Vec<char> = t.iter().copied().filter(|c| out.contains(c)).collect();
        let perm = out.iter().map(|&c| pos(&rest, c)).collect();
        steps.push(Step::Prep { slot: 0, expand: expand[0].clone(), sum, perm, reshape: None });
        return Ok(steps);
    }
    let mut cur = terms[0].clone();
    for i in 1..terms.len() {
        let keep: Vec<char> = out.iter().chain(terms[i + 1..].iter().flatten()).copied().collect();
        let (a, b) = (&cur, &terms[i]);
        let batch: Vec<char> = a.iter().copied().filter(|c| b.contains(c) && keep.contains(c)).collect();
        let contract: Vec<char> = a.iter().copied().filter(|c| b.contains(c) && !keep.contains(c)).collect();
        let m: Vec<char> = a.iter().copied().filter(|c| !b.contains(c) && keep.contains(c)).collect();
        let n: Vec<char> = b.iter().copied().filter(|c| !a.contains(c) && keep.contains(c)).collect();
        let side = |me: &[char], other: &[char], order: [&[char]; 3]| {
            let sum: Vec<i64> =
                me.iter().filter(|c| !other.contains(c) && !keep.contains(c)).map(|&c| pos(me, c)).collect();
            let rest: Vec<char> = me.iter().copied().filter(|c| other.contains(c) || keep.contains(c)).collect();
            let perm: Vec<i64> = order.iter().flat_map(|cs| cs.iter()).map(|&c| pos(&rest, c)).collect();
            (sum, perm, vec![prod(order[0]), prod(order[1]), prod(order[2])])
        };
        let (sa, pa, ra) = side(a, b, [&batch, &m, &contract]);
        let (sb, pb, rb) = side(b, a, [&batch, &contract, &n]);
        let ea = if i == 1 { expand[0].clone() } else { None };
        steps.push(Step::Prep { slot: 0, expand: ea, sum: sa, perm: pa, reshape: Some(ra) });
        steps.push(Step::Prep { slot: i, expand: expand[i].clone(), sum: sb, perm: pb, reshape: Some(rb) });
        let next: Vec<char> = batch.iter().chain(&m).chain(&n).copied().collect();
        steps.push(Step::Matmul { a: 0, b: i, reshape: next.iter().map(|&c| size_of(c)).collect() });
        cur = next;
    }
    let perm: Vec<i64> = out.iter().map(|&c| pos(&cur, c)).collect();
    if !is_identity(&perm) {
        steps.push(Step::Prep { slot: 0, expand: None, sum: vec![], perm, reshape: None });
    }
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attention_scores_are_one_batched_matmul() {
        let p = plan("bhqd,bhkd->bhqk", &[vec![2, 3, 4, 5], vec![2, 3, 6, 5]]).unwrap();
        assert_eq!(
            p,
            vec![
                Step::Prep { slot: 0, expand: None, sum: vec![], perm: vec![0, 1, 2, 3], reshape: Some(vec![6, 4, 5]) },
                Step::Prep { slot: 1, expand: None, sum: vec![], perm: vec![0, 1, 3, 2], reshape: Some(vec![6, 5, 6]) },
                Step::Matmul { a: 0, b: 1, reshape: vec![2, 3, 4, 6] },
            ]
        );
    }

    #[test]
    fn refusals_and_errors_say_why() {
        let e = |eq: &str, s: &[Vec<usize>]| plan(eq, s).unwrap_err();
        assert!(e("...ij->ij", &[vec![2, 2]]).contains("ellipsis"));
        assert!(e("ii->i", &[vec![2, 2]]).contains("repeated"));
        assert!(e("ij,jk->ik", &[vec![2, 3], vec![4, 5]]).contains("does not broadcast"));
        assert!(e("ij->k", &[vec![2, 3]]).contains("output subscript k"));
        assert!(e("ij,jk->ik", &[vec![2, 3]]).contains("fewer operands"));
        assert!(e("ij->i", &[vec![2, 3, 4]]).contains("number of subscripts"));
    }

    #[test]
    fn implicit_output_is_the_subscripts_seen_once_in_order() {
        // "ji" implicitly means "ji->ij": a transpose.
        let p = plan("ji", &[vec![2, 3]]).unwrap();
        assert_eq!(p, vec![Step::Prep { slot: 0, expand: None, sum: vec![], perm: vec![1, 0], reshape: None }]);
    }
}
