//! The functionalizer's state: symbolic values, root buffers and their versions, affine offsets, and the term
//! builder with types and de Bruijn shifting.

use std::collections::HashMap;
use std::rc::Rc;

use egg::{Id, Language};

use crate::diag::{Diagnostic, Span};
use crate::interp::pyvalue::PyValue;
use crate::ir::{op_type, Builder, Node, OpCx, OpName, Ty};
use crate::tensor::DType;

/// A term node and the loop depth at which its loop references are meant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct TId {
    pub id: Id,
    pub depth: usize,
}

/// An integer unknown at functionalization time.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Sym {
    /// The variable of the loop at this nesting level (0 = outermost).
    Loop(usize),
    /// Any other integer term (a `.item()`, a value carried around a loop).
    Opaque(TIdKey),
}

/// `TId` ordered, for use in sorted affine forms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct TIdKey(pub usize, pub usize);

impl TIdKey {
    pub fn of(t: TId) -> Self {
        TIdKey(usize::from(t.id), t.depth)
    }
    pub fn tid(self) -> TId {
        TId { id: Id::from(self.0), depth: self.1 }
    }
}

/// `c + sum(k * sym)`: offsets, indices and Python ints that depend on loop variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Affine {
    pub c: i64,
    pub terms: Vec<(Sym, i64)>,
}

impl Affine {
    pub fn constant(c: i64) -> Self {
        Affine { c, terms: vec![] }
    }
    pub fn sym(s: Sym) -> Self {
        Affine { c: 0, terms: vec![(s, 1)] }
    }
    pub fn as_const(&self) -> Option<i64> {
        if self.terms.is_empty() {
            Some(self.c)
        } else {
            None
        }
    }
    pub fn add(&self, o: &Affine) -> Affine {
        let mut terms = self.terms.clone();
        for (s, k) in &o.terms {
            match terms.iter_mut().find(|(t, _)| t == s) {
                Some(e) => e.1 += k,
                None => terms.push((s.clone(), *k)),
            }
        }
        terms.retain(|(_, k)| *k != 0);
        terms.sort();
        Affine { c: self.c.wrapping_add(o.c), terms }
    }
    pub fn scale(&self, k: i64) -> Affine {
        if k == 0 {
            return Affine::constant(0);
        }
        Affine { c: self.c.wrapping_mul(k), terms: self.terms.iter().map(|(s, c)| (s.clone(), c * k)).collect() }
    }
    pub fn neg(&self) -> Affine {
        self.scale(-1)
    }
}

/// A view of a root buffer: shape and strides over its storage, and an offset that may depend on loop variables.
///
/// A name bound to views of different roots in the two arms of an `if` on a run-time value is a *conditional view*:
/// the fields describe the view the taken arm chose when `cond` is true, and `alt` holds `(cond, view otherwise)`.
/// Both views have one shape and dtype. Reads select between the two; writes update both roots, each under the
/// predicate that chose it (see `views.rs`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct TRef {
    pub root: usize,
    pub shape: Vec<usize>,
    pub strides: Vec<isize>,
    pub off: Affine,
    pub alt: Option<Rc<(TId, TRef)>>,
}

impl TRef {
    /// The view chosen when every condition holds (`alt` dropped).
    pub fn primary(&self) -> TRef {
        TRef { alt: None, ..self.clone() }
    }

    /// Every view this may be: the primary, then each alternative (each without its own `alt`).
    pub fn choices(&self) -> Vec<TRef> {
        let mut out = vec![self.primary()];
        let mut t = self;
        while let Some(a) = &t.alt {
            t = &a.1;
            out.push(t.primary());
        }
        out
    }

    /// Every root this view may refer to.
    pub fn roots(&self) -> Vec<usize> {
        let mut out = vec![self.root];
        let mut t = self;
        while let Some(a) = &t.alt {
            t = &a.1;
            out.push(t.root);
        }
        out
    }
}

crate::interp::pyvalue::py_values! {
    /// A symbolic Python value: tensors are references to terms, and some numbers are known only at run time.
    pub(crate) enum FV {
        tensor: TRef,
        slice_bound: Affine,
        /// A Python int known at run time only.
        DynInt(Affine),
        /// A Python float known at run time only: a 0-dim f64 tensor term.
        DynFloat(TId),
        /// A Python bool known at run time only: a 0-dim bool tensor term.
        DynBool(TId),
        /// A name whose binding is not expressible (a view rebound per iteration, at the start of a loop iteration; a
        /// name bound in one arm only of an `if` on a run-time value): reading it is unsupported, for the reason
        /// given, unless the enclosing loop is unrolled (which may make the binding static). Where an `if` on a
        /// run-time value left it so, the `if`'s location (which a specialized program follows one arm of).
        Poisoned(&'static str, Option<Span>),
        /// `y[mask]`: a selection whose size depends on the data. It is usable where the result does not depend on
        /// how many elements it selects (`masked`): as the value of `x[mask] = ...` (a predicated select), in
        /// elementwise ops with selections by the same mask, and summed or averaged; anything else is reported.
        /// Holds the selected-from value and the mask's value (terms read at the subscript), the view's shape and
        /// the mask's position, and where the selection was made (errors about it point there).
        Masked(Box<Sel>),
        /// `.squeeze()` of a selection: 0-d where it selects one element, so its rank depends on the data
        /// (`squeezed`): the selection with its size-one dims dropped, usable where the rank does not show.
        Squeezed(Box<Sel>),
    }
    name: |v: &FV| match v {
        FV::DynBool(_) => "bool",
        FV::DynInt(_) => "int",
        FV::DynFloat(_) => "float",
        FV::Masked(_) => "boolean-mask selection (its shape depends on the data)",
        FV::Squeezed(_) => "squeezed selection (its rank depends on the data)",
        _ => "value",
    }
}

impl FV {
    pub fn type_name(&self) -> &'static str {
        PyValue::type_name(self)
    }

    pub fn items(&self) -> Option<Vec<FV>> {
        PyValue::items(self)
    }

    /// Whether two values are the same binding (same root and view, same number, same term).
    pub fn same(&self, o: &FV) -> bool {
        match (self, o) {
            (FV::None, FV::None) | (FV::Ellipsis, FV::Ellipsis) => true,
            (FV::Poisoned(a, x), FV::Poisoned(b, y)) => a == b && x == y,
            (FV::Bool(a), FV::Bool(b)) => a == b,
            (FV::Int(a), FV::Int(b)) => a == b,
            (FV::Float(a), FV::Float(b)) => a.to_bits() == b.to_bits(),
            (FV::Str(a), FV::Str(b)) => a == b,
            (FV::DType(a), FV::DType(b)) => a == b,
            (FV::DynInt(a), FV::DynInt(b)) => a == b,
            (FV::DynFloat(a), FV::DynFloat(b)) | (FV::DynBool(a), FV::DynBool(b)) => a == b,
            (FV::Tensor(a), FV::Tensor(b)) => a == b,
            (FV::Masked(a), FV::Masked(b)) | (FV::Squeezed(a), FV::Squeezed(b)) => {
                (a.src, a.mask, &a.shape, a.pos) == (b.src, b.mask, &b.shape, b.pos)
            }
            (FV::Tuple(a), FV::Tuple(b)) | (FV::Named(a, _), FV::Named(b, _)) => {
                Rc::ptr_eq(a, b) || (a.len() == b.len() && a.iter().zip(b.iter()).all(|(x, y)| x.same(y)))
            }
            (FV::List(a), FV::List(b)) => Rc::ptr_eq(a, b),
            (FV::Dict(a), FV::Dict(b)) => Rc::ptr_eq(a, b),
            (FV::Device, FV::Device) => true,
            (FV::Range(a, b, c), FV::Range(d, e, f)) => (a, b, c) == (d, e, f),
            (FV::Module(a), FV::Module(b)) => a == b,
            (FV::Func(a), FV::Func(b)) => a == b,
            (FV::Closure(f, a), FV::Closure(g, b)) => {
                f == g
                    && (Rc::ptr_eq(a, b)
                        || (a.len() == b.len() && a.iter().zip(b.iter()).all(|((k, x), (l, y))| k == l && x.same(y))))
            }
            _ => false,
        }
    }
}

/// What made a [`Sel`]: a boolean mask (`x[mask]`), an index list (`torch.where(condition)`, `nonzero`), or `topk`
/// with a `k` from tensor data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SelOrigin {
    Mask,
    Listed,
    RunTimeK,
}

/// A selection whose length depends on the data ([`FV::Masked`]): `src` holds values at every position of the view
/// (its shape `shape`), of which those where `mask` holds (its dims at `pos..`) are the selection's, in order.
#[derive(Clone, Debug)]
pub(crate) struct Sel {
    pub src: TId,
    pub mask: TId,
    pub shape: Vec<usize>,
    pub pos: usize,
    /// Where the selection was made (refusals point there).
    pub at: Span,
    /// What made it (its refusal says so).
    pub origin: SelOrigin,
    /// The object it is, or views: the `src` it was made with. Two values with one `obj` may share memory, so an
    /// in-place op on one is refused while the other is reachable (`selections::masked_inplace`).
    pub obj: TId,
}

impl Sel {
    /// A new object.
    pub fn new(src: TId, mask: TId, shape: Vec<usize>, pos: usize, at: Span, origin: SelOrigin) -> Sel {
        Sel { src, mask, shape, pos, at, origin, obj: src }
    }

    /// The same selection (mask, origin) with other values: a view of this object where `view` (or where the
    /// values are this one's), else a new object.
    pub fn with(&self, src: TId, shape: Vec<usize>, pos: usize, view: bool) -> Sel {
        let obj = if view || src == self.src { self.obj } else { src };
        Sel { src, mask: self.mask, shape, pos, at: self.at, origin: self.origin, obj }
    }
}

/// A root buffer: its current version (a term of the storage) and what it is.
#[derive(Clone, Debug)]
pub(super) struct Root {
    pub version: TId,
    pub dtype: DType,
    /// The storage as a tensor: the shape of the version term.
    pub shape: Vec<usize>,
    pub written: bool,
    pub param: Option<String>,
    /// A one-element stand-in buffer, so views of this root can be checked for overlap with the runtime's code.
    pub dummy: crate::tensor::Tensor,
    /// A 0-d tensor that stands for a Python number of this kind where the data chose one (a name that is a number
    /// in one arm of an `if` and a 0-d tensor in the other, `min(t, 1)`): arithmetic with it must promote as the
    /// number would (`Fz::elementwise` checks).
    pub number: Option<crate::tensor::Kind>,
    /// Which of its elements a random initialization drew (`super::drawn`), if any.
    pub drawn: Option<std::rc::Rc<Vec<bool>>>,
}

/// Why functionalization stopped: a located, final error, or a construct that needs static loop variables (the loop
/// being processed symbolically is then unrolled instead).
#[derive(Debug)]
pub(crate) enum Stop {
    Diag(Diagnostic),
    NeedsStatic(Span, String),
}

impl From<String> for Stop {
    fn from(m: String) -> Self {
        Stop::Diag(Diagnostic::new(m))
    }
}

impl From<Diagnostic> for Stop {
    fn from(d: Diagnostic) -> Self {
        Stop::Diag(d)
    }
}

pub(super) type FR<T> = Result<T, Stop>;

/// A boolean-mask selection in `v` (itself, or in a tuple, list or dict), if any.
pub(super) fn find_masked(v: &FV) -> Option<FV> {
    find_in(v, &|x| matches!(x, FV::Masked(_)), &mut Vec::new())
}

/// The first value in `v` (itself, or in a tuple, list or dict) that `is_it` holds of, each list and dict visited
/// once (`seen`: their addresses): a container may hold itself (a tree whose children link back to their parent).
pub(super) fn find_in(v: &FV, is_it: &dyn Fn(&FV) -> bool, seen: &mut Vec<usize>) -> Option<FV> {
    match v {
        v if is_it(v) => Some(v.clone()),
        FV::Tuple(xs) | FV::Named(xs, _) => xs.iter().find_map(|x| find_in(x, is_it, seen)),
        FV::List(xs) if first_visit(seen, std::rc::Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().find_map(|x| find_in(x, is_it, seen))
        }
        FV::Dict(xs) if first_visit(seen, std::rc::Rc::as_ptr(xs) as *const u8) => {
            xs.borrow().iter().find_map(|(_, x)| find_in(x, is_it, seen))
        }
        _ => None,
    }
}

/// For the walkers of values that go through lists and dicts: whether the container at `at` is visited for the
/// first time (then it is added to `seen`). Python's containers may hold themselves, directly or not.
pub(super) fn first_visit(seen: &mut Vec<usize>, at: *const u8) -> bool {
    let at = at as usize;
    !seen.contains(&at) && {
        seen.push(at);
        true
    }
}

/// The refusal of a boolean-mask selection used other than as `x[mask] = y[mask]`: located at the selection.
pub(super) fn masked_use<T>(v: &FV) -> FR<T> {
    let (at, origin) = match v {
        FV::Masked(sel) => (sel.at, sel.origin),
        _ => (Span::default(), SelOrigin::Mask),
    };
    if origin != SelOrigin::Mask {
        let what = if origin == SelOrigin::RunTimeK {
            "`topk` with a `k` from tensor data returns as many values as that k"
        } else {
            "`torch.where(condition)` with one argument (or `nonzero`) returns the indices of the true elements"
        };
        return diag(
            at,
            what.to_string()
                + ", whose number depends on the data (a data-dependent output shape): the functional and optimized engines \
             express such index lists only in gathers (`x[i]`, `x[None, i]`, `w[i, j, None]`), row-wise work on what they gather \
             (pointwise ops, casts, `linear` or `matmul` by a fixed matrix, reductions and softmax over the rows' \
             own dims, `reshape(-1, ...)`), `index_add_` of such rows at such a list, and `.shape`; this use is not \
             one of them (the reference engine runs it)",
        );
    }
    diag(
        at,
        "indexing with a boolean mask gives a data-dependent shape (how many elements it selects depends on the \
         data): the functional and optimized engines cannot express it (the reference engine runs it); only \
         `x[mask] = value`, `x[mask] = y[mask]`, elementwise arithmetic between selections made with the same mask \
         (`x[mask] = (y[mask] - z[mask]) * 2`), elementwise ops of one, `y[mask].sum()` / `.mean()`, and writes \
         indexed by the mask and selections made with it (`x[mask, i[mask]] = value`) are supported",
    )
}

pub(super) fn diag<T>(span: Span, m: impl Into<String>) -> FR<T> {
    Err(Stop::Diag(Diagnostic::new(m).at(span)))
}

pub(super) fn needs_static<T>(span: Span, m: impl Into<String>) -> FR<T> {
    Err(Stop::NeedsStatic(span, m.into()))
}

/// A loop being processed: its nesting level and, for `for` loops, the least and greatest values of its variable and
/// the distance between its successive values.
#[derive(Clone, Debug)]
pub(super) struct LoopFrame {
    pub range: Option<(i64, i64)>,
    pub step: i64,
    pub carried: Vec<Ty>,
    /// How many arms of `if`s on run-time values were open where the loop began ([`Terms::arms`]).
    pub arms: usize,
}

/// Terms under construction: a hash-consing builder, the type of every node in its loop context, and shifts.
pub(super) struct Terms {
    pub b: Builder,
    pub frames: Vec<LoopFrame>,
    types: HashMap<(Id, u64), Ty>,
    shifts: HashMap<(Id, usize, usize), Id>,
    free: HashMap<Id, usize>,
    inputs: HashMap<Id, Ty>,
    /// The run-time checks made in each open scope, innermost last (see [`super::checks`]).
    pub scopes: Vec<Vec<TId>>,
    /// How many arms of `if`s on run-time values are being functionalized, outermost included: inside a loop, an
    /// arm opened after the loop began (a run-time `if`, or the flags of a `break` or `continue`) may skip some
    /// iterations.
    pub arms: usize,
    /// How many discovery passes of loops (whose terms are dropped) are open: the state they start from is the
    /// first iteration's, so they cannot tell which iterations reach a statement.
    pub discovering: usize,
    /// How many nodes [`Terms::add`] was asked for (hash-consed ones included): unchanged across a stretch of the
    /// program where it computed nothing at run time.
    pub made: usize,
}

impl Terms {
    pub fn new() -> Self {
        Terms {
            b: Builder::default(),
            frames: Vec::new(),
            types: HashMap::new(),
            shifts: HashMap::new(),
            free: HashMap::new(),
            inputs: HashMap::new(),
            scopes: Vec::new(),
            arms: 0,
            discovering: 0,
            made: 0,
        }
    }

    pub fn depth(&self) -> usize {
        self.frames.len()
    }

    fn frames_key(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        for f in &self.frames {
            format!("{:?}", f.carried).hash(&mut h);
        }
        h.finish()
    }

    /// Adds a node at the current depth and types it; a type error is returned as a message.
    pub fn add(&mut self, n: Node) -> Result<TId, String> {
        self.made += 1;
        let check = super::checks::can_fail(&self.b, &n);
        let id = self.b.add(n);
        if let Ty::Tensor(d @ (DType::F16 | DType::BF16), _) = self.ty(id)? {
            return Err(crate::tensor::half_unsupported(d));
        }
        let t = TId { id, depth: self.depth() };
        if check {
            self.note_check(t);
        }
        Ok(t)
    }

    pub fn leaf(&mut self, n: Node) -> Id {
        self.b.add(n)
    }

    pub fn op(&mut self, op: OpName, args: Vec<Id>) -> Result<TId, String> {
        self.add(Node::Op(op, args))
    }

    /// The type of a node in the current loop context.
    pub fn ty(&mut self, id: Id) -> Result<Ty, String> {
        let key = (id, self.frames_key());
        if let Some(t) = self.types.get(&key) {
            return Ok(t.clone());
        }
        let node = self.b.node(id).clone();
        let t = match &node {
            Node::Int(_) => Ty::Int,
            Node::Float(_) => Ty::Float,
            Node::Bool(_) => Ty::Bool,
            Node::DType(_) => Ty::DType,
            Node::Name(_) => Ty::Name,
            Node::NoneLit => Ty::None,
            Node::Op(op, args) => {
                let tys = args.iter().map(|&c| self.ty(c)).collect::<Result<Vec<_>, _>>()?;
                op_type(*op, &OpCx { term: &self.b.expr, ids: args, tys: &tys })?
            }
            Node::Iter(_) => Ty::Int,
            Node::Carried([d, j]) => {
                let (d, j) = (lit(&self.b, *d), lit(&self.b, *j));
                let n = self.frames.len() as i64;
                let f = &self.frames[(n - 1 - d) as usize];
                f.carried[j as usize].clone()
            }
            Node::Get([t, j]) => {
                let j = lit(&self.b, *j) as usize;
                match self.ty(*t)? {
                    Ty::Tuple(items) => items[j].clone(),
                    other => return Err(format!("get of {other}")),
                }
            }
            Node::Tuple(items) | Node::List(items) => {
                let tys = items.iter().map(|&c| self.ty(c)).collect::<Result<Vec<_>, _>>()?;
                if matches!(node, Node::Tuple(_)) {
                    Ty::Tuple(tys)
                } else {
                    Ty::List(tys)
                }
            }
            Node::View([s, _, _]) => Ty::View(lits(&self.b, *s).into_iter().map(|d| d as usize).collect()),
            Node::Access([x, v]) => match (self.ty(*x)?, self.ty(*v)?) {
                (Ty::Tensor(d, _), Ty::View(s)) => Ty::Tensor(d, s),
                (a, b) => return Err(format!("access of {a} through {b}")),
            },
            Node::Assign([x, _, _]) => self.ty(*x)?,
            Node::If([_, a, _]) => self.ty(*a)?,
            // Loops are typed by the functionalizer when it builds them.
            Node::Loop([_, _, _, init, _]) | Node::While([init, _, _]) => self.ty(*init)?,
            Node::Input(_) => self.inputs.get(&id).cloned().ok_or("an input with no declared type")?,
        };
        self.types.insert(key, t.clone());
        Ok(t)
    }

    /// Records the type of a node made outside `add` (program inputs).
    pub fn set_ty(&mut self, id: Id, t: Ty) {
        self.inputs.insert(id, t);
    }

    /// The largest free loop reference of a node plus one (0: the node depends on no enclosing loop).
    fn free(&mut self, id: Id) -> usize {
        if let Some(&f) = self.free.get(&id) {
            return f;
        }
        let f = match self.b.node(id).clone() {
            Node::Iter(d) | Node::Carried([d, _]) => lit(&self.b, d) as usize + 1,
            Node::Loop([a, b, c, init, body]) => {
                let inner = self.free(body).saturating_sub(1);
                [a, b, c, init].iter().map(|&x| self.free(x)).max().unwrap_or(0).max(inner)
            }
            Node::While([init, cond, body]) => {
                let inner = self.free(body).max(self.free(cond)).saturating_sub(1);
                self.free(init).max(inner)
            }
            n => n.children().iter().map(|&c| self.free(c)).max().unwrap_or(0),
        };
        self.free.insert(id, f);
        f
    }

    /// The node `t` means at the current depth: loop references made at a shallower depth are shifted outward.
    pub fn at(&mut self, t: TId) -> Id {
        let here = self.depth();
        assert!(t.depth <= here, "a term made inside a loop is used outside it");
        self.shift(t.id, here - t.depth, 0)
    }

    fn shift(&mut self, id: Id, by: usize, cutoff: usize) -> Id {
        if by == 0 || self.free(id) <= cutoff {
            return id;
        }
        if let Some(&r) = self.shifts.get(&(id, by, cutoff)) {
            return r;
        }
        let node = self.b.node(id).clone();
        let r = match node {
            Node::Iter(d) => {
                let k = lit(&self.b, d);
                let k2 = self.b.int(k + by as i64);
                self.b.add(Node::Iter(k2))
            }
            Node::Carried([d, j]) => {
                let k = lit(&self.b, d);
                let k2 = self.b.int(k + by as i64);
                self.b.add(Node::Carried([k2, j]))
            }
            Node::Loop([a, b, c, init, body]) => {
                let kids = [
                    self.shift(a, by, cutoff),
                    self.shift(b, by, cutoff),
                    self.shift(c, by, cutoff),
                    self.shift(init, by, cutoff),
                    self.shift(body, by, cutoff + 1),
                ];
                self.b.add(Node::Loop(kids))
            }
            Node::While([init, cond, body]) => {
                let kids =
                    [self.shift(init, by, cutoff), self.shift(cond, by, cutoff + 1), self.shift(body, by, cutoff + 1)];
                self.b.add(Node::While(kids))
            }
            n => {
                let n2 = n.map_children(|c| self.shift(c, by, cutoff));
                self.b.add(n2)
            }
        };
        self.shifts.insert((id, by, cutoff), r);
        r
    }
}

pub(super) fn lit(b: &Builder, id: Id) -> i64 {
    match b.node(id) {
        Node::Int(i) => *i,
        _ => 0,
    }
}

fn lits(b: &Builder, id: Id) -> Vec<i64> {
    match b.node(id) {
        Node::List(items) => items.iter().map(|&i| lit(b, i)).collect(),
        _ => vec![],
    }
}
