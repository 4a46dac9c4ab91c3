//! The e-class analysis: type (dtype and static shape) and literal value of every class.
//!
//! Types come from the same rules as [`crate::ir::verify`] (`op_type`); a class whose type depends on an enclosing
//! loop's carried state (`carried` and what is built on it) has no type here, which makes conditions on it fail, so
//! rewrites that need a type are conservative there.

use std::collections::HashMap;

use egg::{Analysis, DidMerge, Id};

use crate::ir::{op_type, Node, OpCx, Term, Ty};
use crate::tensor::DType;

/// The literal an e-class holds, if it is a literal class.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    /// A leaf: an integer, float, bool, dtype, parameter name or `none`.
    Leaf(Node),
    /// A list of integer literals (shapes, strides, dims).
    Ints(Vec<i64>),
}

/// An integer class as `c + sum(k * atom)`, where atoms are classes with no such decomposition (loop variables,
/// carried integers, `.item()`s). Offsets of views are integer classes, so views can be compared through this.
#[derive(Clone, Debug, PartialEq)]
pub struct AffineInt {
    pub c: i64,
    pub terms: Vec<(Id, i64)>,
}

impl AffineInt {
    fn atom(id: Id) -> Self {
        AffineInt { c: 0, terms: vec![(id, 1)] }
    }

    pub fn constant(c: i64) -> Self {
        AffineInt { c, terms: vec![] }
    }

    /// `self + k * other`, with atoms as they are now in `egraph` (classes may have merged since).
    pub fn add_scaled(&self, other: &AffineInt, k: i64, find: impl Fn(Id) -> Id) -> AffineInt {
        let mut terms: Vec<(Id, i64)> = self.terms.iter().map(|&(a, c)| (find(a), c)).collect();
        for &(a, c) in &other.terms {
            let a = find(a);
            match terms.iter_mut().find(|(t, _)| *t == a) {
                Some(e) => e.1 += k * c,
                None => terms.push((a, k * c)),
            }
        }
        terms.retain(|(_, c)| *c != 0);
        terms.sort();
        AffineInt { c: self.c.wrapping_add(k.wrapping_mul(other.c)), terms }
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct ClassInfo {
    pub ty: Option<Ty>,
    pub lit: Option<Lit>,
    /// For integer classes: the class as an affine form.
    pub affine: Option<AffineInt>,
    /// Whether evaluating some term of the class may raise (a run-time index check, an integer division by a
    /// run-time value, a gather or scatter, `raise`, or such a term below it): rules that drop a subterm require it
    /// not to (`infallible`), since PyTorch raises there. Merged classes keep it if either had it.
    pub may_fail: bool,
}

/// The analysis state: the types of the program's inputs, and the conflicts found when classes merged.
#[derive(Default)]
pub struct TermAnalysis {
    pub inputs: HashMap<String, Ty>,
    /// One message per union of two classes whose types differ (a rewrite that changed a shape or dtype).
    pub conflicts: Vec<String>,
}

impl TermAnalysis {
    pub fn new(inputs: &[(String, DType, Vec<usize>)]) -> Self {
        TermAnalysis {
            inputs: inputs.iter().map(|(n, d, s)| (n.clone(), Ty::Tensor(*d, s.clone()))).collect(),
            conflicts: Vec::new(),
        }
    }
}

fn info(egraph: &egg::EGraph<Node, TermAnalysis>, id: Id) -> &ClassInfo {
    &egraph[id].data
}

/// The type of an operator node from its children's classes, through a small term holding their literals.
fn op_ty(egraph: &egg::EGraph<Node, TermAnalysis>, op: crate::ir::OpName, children: &[Id]) -> Option<Ty> {
    let mut tys = Vec::with_capacity(children.len());
    let mut temp = Term::default();
    let mut ids = Vec::with_capacity(children.len());
    for &c in children {
        let ci = info(egraph, c);
        tys.push(ci.ty.clone()?);
        ids.push(match &ci.lit {
            Some(Lit::Leaf(n)) => temp.add(n.clone()),
            Some(Lit::Ints(v)) => {
                let kids: Vec<Id> = v.iter().map(|&i| temp.add(Node::Int(i))).collect();
                temp.add(Node::List(kids.into()))
            }
            None => temp.add(Node::NoneLit),
        });
    }
    op_type(op, &OpCx { term: &temp, ids: &ids, tys: &tys }).ok()
}

impl Analysis<Node> for TermAnalysis {
    type Data = ClassInfo;

    fn make(egraph: &mut egg::EGraph<Node, Self>, enode: &Node, id: Id) -> ClassInfo {
        let ty_of = |id: Id| info(egraph, id).ty.clone();
        let int_of = |id: Id| match &info(egraph, id).lit {
            Some(Lit::Leaf(Node::Int(i))) => Some(*i),
            _ => None,
        };
        let (ty, lit) = match enode {
            Node::Int(_) => (Some(Ty::Int), Some(Lit::Leaf(enode.clone()))),
            Node::Float(_) => (Some(Ty::Float), Some(Lit::Leaf(enode.clone()))),
            Node::Bool(_) => (Some(Ty::Bool), Some(Lit::Leaf(enode.clone()))),
            Node::DType(_) => (Some(Ty::DType), Some(Lit::Leaf(enode.clone()))),
            Node::Name(_) => (Some(Ty::Name), Some(Lit::Leaf(enode.clone()))),
            Node::NoneLit => (Some(Ty::None), Some(Lit::Leaf(enode.clone()))),
            Node::List(items) => {
                let ints: Option<Vec<i64>> = items.iter().map(|&c| int_of(c)).collect();
                let tys: Option<Vec<Ty>> = items.iter().map(|&c| ty_of(c)).collect();
                (tys.map(Ty::List), ints.map(Lit::Ints))
            }
            Node::Tuple(items) => (items.iter().map(|&c| ty_of(c)).collect::<Option<Vec<_>>>().map(Ty::Tuple), None),
            Node::View([s, _, _]) => match &info(egraph, *s).lit {
                Some(Lit::Ints(v)) => (Some(Ty::View(v.iter().map(|&d| d.max(0) as usize).collect())), None),
                _ => (None, None),
            },
            Node::Access([x, v]) => match (ty_of(*x), ty_of(*v)) {
                (Some(Ty::Tensor(d, _)), Some(Ty::View(s))) => (Some(Ty::Tensor(d, s)), None),
                _ => (None, None),
            },
            Node::Assign([x, _, _]) => (ty_of(*x), None),
            Node::Get([t, j]) => match (ty_of(*t), int_of(*j)) {
                (Some(Ty::Tuple(items)), Some(j)) => (items.get(j as usize).cloned(), None),
                _ => (None, None),
            },
            Node::If([_, a, _]) => (ty_of(*a), None),
            Node::Loop([_, _, _, init, _]) | Node::While([init, _, _]) => (ty_of(*init), None),
            Node::Iter(_) => (Some(Ty::Int), None),
            Node::Carried(_) => (None, None),
            Node::Input(n) => match &info(egraph, *n).lit {
                Some(Lit::Leaf(Node::Name(name))) => match egraph.analysis.inputs.get(&name.0) {
                    Some(t) => (Some(t.clone()), None),
                    None => (crate::ir::consts::type_of(&name.0).map(|(d, s)| Ty::Tensor(d, s)), None),
                },
                _ => (None, None),
            },
            Node::Op(op, args) => (op_ty(egraph, *op, args), None),
        };
        let aff = |c: Id| info(egraph, c).affine.clone();
        let find = |c: Id| egraph.find(c);
        let affine = match enode {
            Node::Int(i) => Some(AffineInt::constant(*i)),
            Node::Iter(_) | Node::Carried(_) => Some(AffineInt::atom(id)),
            Node::Op(crate::ir::OpName::IAdd, a) => aff(a[0]).zip(aff(a[1])).map(|(x, y)| x.add_scaled(&y, 1, find)),
            Node::Op(crate::ir::OpName::ISub, a) => aff(a[0]).zip(aff(a[1])).map(|(x, y)| x.add_scaled(&y, -1, find)),
            Node::Op(crate::ir::OpName::IMul, a) => match (aff(a[0]), aff(a[1])) {
                (Some(x), Some(y)) if x.terms.is_empty() => Some(AffineInt::constant(0).add_scaled(&y, x.c, find)),
                (Some(x), Some(y)) if y.terms.is_empty() => Some(AffineInt::constant(0).add_scaled(&x, y.c, find)),
                _ => Some(AffineInt::atom(id)),
            },
            _ if ty == Some(Ty::Int) => Some(AffineInt::atom(id)),
            _ => None,
        };
        let may_fail = enode_may_fail(egraph, enode);
        ClassInfo { ty, lit, affine, may_fail }
    }

    fn merge(&mut self, a: &mut ClassInfo, b: ClassInfo) -> DidMerge {
        let mut changed_a = false;
        let mut b_differs = false;
        match (&a.ty, b.ty) {
            (Some(x), Some(y)) if *x != y => {
                self.conflicts.push(format!("merged classes of types {x} and {y}"));
                b_differs = true;
            }
            (None, Some(y)) => {
                a.ty = Some(y);
                changed_a = true;
            }
            (Some(_), None) => b_differs = true,
            _ => {}
        }
        match (&a.affine, b.affine) {
            (None, Some(f)) => {
                a.affine = Some(f);
                changed_a = true;
            }
            (Some(x), Some(y)) if *x != y => b_differs = true,
            (Some(_), None) => b_differs = true,
            _ => {}
        }
        match (&a.lit, b.lit) {
            (None, Some(l)) => {
                a.lit = Some(l);
                changed_a = true;
            }
            (Some(x), Some(y)) if *x != y => {
                self.conflicts.push(format!("merged classes of literals {x:?} and {y:?}"));
                b_differs = true;
            }
            (Some(_), None) => b_differs = true,
            _ => {}
        }
        if b.may_fail && !a.may_fail {
            a.may_fail = true;
            changed_a = true;
        } else if a.may_fail && !b.may_fail {
            b_differs = true;
        }
        DidMerge(changed_a, b_differs)
    }
}

/// Whether `enode` may raise when evaluated, itself or through a child (as `functionalize::checks::can_fail` says
/// of terms).
fn enode_may_fail(egraph: &egg::EGraph<Node, TermAnalysis>, enode: &Node) -> bool {
    use crate::ir::OpName::*;
    use egg::Language;
    let literal = |id: &Id| matches!(info(egraph, *id).lit, Some(Lit::Leaf(Node::Int(_))));
    let own = match enode {
        Node::Op(IIndex | ISlice | INarrow, a) => !a.first().is_some_and(literal),
        Node::Op(IFloorDiv | IMod, a) => !a.get(1).is_some_and(literal),
        Node::Op(Index | IndexPut | Gather | Scatter | Raise | Fallback, _) => true,
        _ => false,
    };
    own || enode.children().iter().any(|&c| info(egraph, c).may_fail)
}
