//! The term language: the pure tensor programs that functionalization produces and the e-graph will hold.
//!
//! Parameters (shapes, dims, slice bounds, strides, dtypes) are child nodes, so rules can abstract over them. One
//! generic pair reads and writes through views: `(access x v)` reads the row-major storage of `x` through the strided
//! view `v = (view (list SHAPE) (list STRIDES) OFFSET)`, and `(assign x v y)` is `x` with those elements replaced by
//! `y` (broadcast and cast as `copy_` does). Offsets are integer terms, affine in loop variables.
//!
//! Control flow is structured: `(loop START END STEP INIT BODY)` runs BODY for `(iter 0)` in `range(START, END, STEP)`
//! with the carried tuple `INIT`, whose parts the body reads as `(carried 0 J)` and whose next value BODY is;
//! `(while INIT COND BODY)` evaluates COND (a 0-dim bool tensor) on the carried state before each iteration;
//! `(if C THEN ELSE)` yields one of two tuples; `(get T J)` projects. Loop references are de Bruijn indices: 0 is the
//! innermost enclosing loop.
//!
//! Invariant: every operator is a member of the closed [`OpName`] set or a structural variant; an unknown name fails
//! to parse. [`verify`] infers every node's type and rejects ill-shaped terms.

pub mod consts;
mod eval;
pub mod geometry;
mod literals;
mod ops;
mod print;
mod verify;

use egg::{define_language, Id, Language, RecExpr};

pub(crate) use eval::{dependent_nodes, RUNTIME_INT_OVERFLOW};
pub use eval::{eval_program, fallback_message, run_time_start, EvalError, FALLBACK, RAISES};
pub use literals::{BoolLit, FloatLit, ParamName};
pub use ops::{parse_class, Arity, DtypeRule, OpClass, OpName};
pub use print::{display_dag, term_stats, TermStats};
pub(crate) use verify::{matmul_shape, op_type, OpCx};
pub use verify::{node_types, top_level_types, unambiguous_types, verify, Ty};

use crate::tensor::DType;

define_language! {
    /// One node of a term.
    pub enum Node {
        "list" = List(Box<[Id]>),
        "tuple" = Tuple(Box<[Id]>),
        "view" = View([Id; 3]),
        "access" = Access([Id; 2]),
        "assign" = Assign([Id; 3]),
        "loop" = Loop([Id; 5]),
        "while" = While([Id; 3]),
        "if" = If([Id; 3]),
        "get" = Get([Id; 2]),
        "iter" = Iter(Id),
        "carried" = Carried([Id; 2]),
        "input" = Input(Id),
        "none" = NoneLit,
        Int(i64),
        Float(FloatLit),
        Bool(BoolLit),
        DType(DType),
        Name(ParamName),
        Op(OpName, Vec<Id>),
    }
}

/// A term: a DAG of nodes whose last node is the root.
pub type Term = RecExpr<Node>;

/// The integer literal node `id` of `term` holds, if it is one.
pub fn lit(term: &Term, id: Id) -> Option<i64> {
    match term[id] {
        Node::Int(i) => Some(i),
        _ => None,
    }
}

/// The integers of the list node `id` of `term`, where it is a list of integer literals.
pub fn lits(term: &Term, id: Id) -> Option<Vec<i64>> {
    match &term[id] {
        Node::List(items) => items.iter().map(|&c| lit(term, c)).collect(),
        _ => None,
    }
}

/// Builds terms with hash-consing, so equal subterms are one node.
#[derive(Default)]
pub struct Builder {
    pub expr: Term,
    memo: hashbrown::HashMap<Node, Id>,
}

impl Builder {
    pub fn add(&mut self, n: Node) -> Id {
        if let Some(&id) = self.memo.get(&n) {
            return id;
        }
        let id = self.expr.add(n.clone());
        self.memo.insert(n, id);
        id
    }

    pub fn int(&mut self, v: i64) -> Id {
        self.add(Node::Int(v))
    }

    pub fn ints(&mut self, vs: &[i64]) -> Id {
        let ids: Vec<Id> = vs.iter().map(|&v| self.int(v)).collect();
        self.add(Node::List(ids.into()))
    }

    pub fn op(&mut self, op: OpName, args: Vec<Id>) -> Id {
        self.add(Node::Op(op, args))
    }

    pub fn node(&self, id: Id) -> &Node {
        &self.expr[id]
    }

    /// The term rooted at `root`, with only the nodes it reaches, in a valid order.
    pub fn extract(&self, root: Id) -> Term {
        let mut keep = vec![false; self.expr.as_ref().len()];
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            let i = usize::from(id);
            if keep[i] {
                continue;
            }
            keep[i] = true;
            stack.extend(self.expr[id].children().iter().copied());
        }
        let mut map = vec![Id::from(0usize); keep.len()];
        let mut out = Term::default();
        for (i, node) in self.expr.as_ref().iter().enumerate() {
            if keep[i] {
                let n = node.clone().map_children(|c| map[usize::from(c)]);
                map[i] = out.add(n);
            }
        }
        out
    }
}
