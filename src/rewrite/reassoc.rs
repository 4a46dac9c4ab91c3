//! The Rust rewrite `matmul/reassociate`: a matrix times a vector that is itself a product, `a @ (x @ w)`, is
//! `(a @ w.T) @ x`. With `a` `[t, n]`, `w` `[k, n]` and `x` `[k]` (or one row of a matrix `x`, read through a row
//! view of the product: `(h @ w)[0]`), the product `a @ w.T` is `[t, k]` and reads no value of `x`: where `a` and
//! `w` are fixed for a loop and `x` is its state, the plan computes it once, before the loop, and each step is one
//! matrix-vector product over `t * k` instead of two over `k * n + t * n` (seq2seq's attention energies
//! `memory @ (h @ w_attn)[0]`). Every element is the same sum over the reals, but its products are grouped
//! otherwise and round otherwise (`memory @ w.T` may overflow, or cancel, where `h @ w` did not): like the `@real`
//! text rules it applies only with fast math (`Limits::fast_math`, `--fast-math`).
//!
//! Whether the result is kept is the cost model's decision (`saturate::optimize_for` plans both terms).

use egg::{Id, Language};

use crate::ir::{lits, unambiguous_types, Builder, Node, OpName, Term, Ty};
use crate::tensor::DType;

/// Reassociates every qualifying product; returns the new term and how many were.
pub fn reassociate(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> (Term, usize) {
    let Some(types) = unambiguous_types(term, inputs) else { return (term.clone(), 0) };
    let shape = |id: Id| match &types[usize::from(id)] {
        Some(Ty::Tensor(d, s)) if d.is_float() => Some((*d, s.clone())),
        _ => None,
    };
    let mut b = Builder::default();
    let mut map: Vec<Id> = Vec::with_capacity(term.as_ref().len());
    let mut count = 0;
    for node in term.as_ref() {
        let id = match vector_product(term, node, &shape) {
            Some(m) => {
                count += 1;
                m.build(&mut b, &map)
            }
            None => b.add(node.clone().map_children(|c| map[usize::from(c)])),
        };
        map.push(id);
    }
    let root = map[usize::from(term.root())];
    (b.extract(root), count)
}

/// `a @ (x @ w)`'s parts, in the source term: `row` is the row of a matrix `x` that the vector is (None where `x`
/// is a vector).
struct Match {
    a: Id,
    x: Id,
    w: Id,
    row: Option<i64>,
    k: i64,
    n: i64,
}

type Shape<'a> = dyn Fn(Id) -> Option<(DType, Vec<usize>)> + 'a;

fn vector_product(term: &Term, node: &Node, shape: &Shape) -> Option<Match> {
    let Node::Op(OpName::Matmul, args) = node else { return None };
    let &[a, v] = args.as_slice() else { return None };
    let (da, sa) = shape(a)?;
    let (p, row) = match &term[v] {
        Node::Op(OpName::Matmul, _) => (v, None),
        Node::Access([p, view]) => (*p, Some(row_of(term, *view, shape(*p)?.1)?)),
        _ => return None,
    };
    let Node::Op(OpName::Matmul, inner) = &term[p] else { return None };
    let &[x, w] = inner.as_slice() else { return None };
    let ((dx, sx), (dw, sw)) = (shape(x)?, shape(w)?);
    let [k, n] = sw[..] else { return None };
    let x_ok = match row {
        None => sx == [k],
        Some(r) => sx.len() == 2 && sx[1] == k && (r as usize) < sx[0],
    };
    if sa.len() != 2 || sa[1] != n || !x_ok || da != dx || dx != dw || k == 0 || n == 0 || sa[0] == 0 {
        return None;
    }
    Some(Match { a, x, w, row, k: k as i64, n: n as i64 })
}

/// The row `r` that `view` reads of a matrix of shape `s` as a vector (shape `[s[1]]`, stride 1, offset `r * s[1]`).
fn row_of(term: &Term, view: Id, s: Vec<usize>) -> Option<i64> {
    let Node::View([vs, st, off]) = &term[view] else { return None };
    let (vs, st, off) = (lits(term, *vs)?, lits(term, *st)?, crate::ir::lit(term, *off)?);
    let [rows, n] = s[..] else { return None };
    let n = n as i64;
    (vs == [n] && st == [1] && n > 0 && off % n == 0 && off / n < rows as i64).then(|| off / n)
}

impl Match {
    fn build(&self, b: &mut Builder, map: &[Id]) -> Id {
        let (a, x, w) = (map[usize::from(self.a)], map[usize::from(self.x)], map[usize::from(self.w)]);
        let (k, n) = (self.k, self.n);
        let view = |b: &mut Builder, shape: &[i64], strides: &[i64], off: i64| {
            let (s, st, o) = (b.ints(shape), b.ints(strides), b.int(off));
            b.add(Node::View([s, st, o]))
        };
        let wt_view = view(b, &[n, k], &[1, n], 0);
        let wt = b.add(Node::Access([w, wt_view]));
        let awt = b.op(OpName::Matmul, vec![a, wt]);
        let x = match self.row {
            None => x,
            Some(r) => {
                let v = view(b, &[k], &[1], r * k);
                b.add(Node::Access([x, v]))
            }
        };
        b.op(OpName::Matmul, vec![awt, x])
    }
}
