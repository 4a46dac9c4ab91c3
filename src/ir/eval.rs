//! The functional interpreter: runs a term on input tensors with pure semantics.
//!
//! Each operator maps onto the tensor runtime the reference interpreter uses, so the two engines differ only in how a
//! program's aliasing is expressed, which is exactly what differential tests compare. Nodes that do not depend on a
//! loop variable are evaluated once; the others once per iteration of their innermost loop.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use egg::{Id, Language};

use super::{Node, OpName, Term};
use crate::tensor::ops::{self, Operand};
use crate::tensor::{index, reduce, DType, Scalar, Tensor};

/// A runtime value of a term node.
#[derive(Clone, Debug)]
enum V {
    T(Tensor),
    I(i64),
    F(f64),
    B(bool),
    D(DType),
    L(Rc<Vec<V>>),
    Tup(Rc<Vec<V>>),
    View(Rc<(Vec<usize>, Vec<isize>, i64)>),
    Name(String),
    None,
}

/// A failure while running a term: an ill-formed term or an operation that fails on these values.
#[derive(Debug, Clone, PartialEq)]
pub struct EvalError(pub String);

type R<T> = Result<T, EvalError>;

/// The run-time integer ops of view offsets (`iindex`, `islice`, `inarrow`) on their integer arguments.
pub fn run_time_start(op: OpName, args: &[i64]) -> Result<i64, String> {
    use crate::tensor::views::{narrow_start, slice_start, wrap_index};
    use OpName::*;
    match (op, args) {
        (IIndex, &[i, n, d]) => wrap_index(i, n, d as usize),
        (ISlice, &[s, len, n, d]) => slice_start(s, len, n, d as usize),
        (INarrow, &[s, len, n]) => narrow_start(s, len, n),
        _ => Err(format!("internal: `{op}` with {} arguments", args.len())),
    }
}

/// The error of a run-time Python int operation whose result leaves the 64-bit range (Python's would not wrap).
pub(crate) const RUNTIME_INT_OVERFLOW: &str =
    "integer overflow: a Python int computed at run time does not fit in 64 bits (arbitrary-precision ints are not supported)";

fn fail<T>(m: impl Into<String>) -> R<T> {
    Err(EvalError(m.into()))
}

impl From<String> for EvalError {
    fn from(s: String) -> Self {
        EvalError(s)
    }
}

/// The error of `(raise)`; run-time errors get PyTorch's located message from the reference interpreter.
pub const RAISES: &str = "the program raises here: an arm of an `if` on a run-time value fails when it runs";

/// The error of `(fallback LINE COL)`: the run took the arm of an `if` on a run-time value that the plan was not
/// specialized for; callers run the program on the reference interpreter instead ([`fallback_message`]).
pub const FALLBACK: &str = "the run took an arm of an `if` on a run-time value that the plan was not specialized for";

/// The message of `(fallback LINE COL)`, which names the `if`.
pub fn fallback_message(line: i64, col: i64) -> String {
    format!("{FALLBACK} (the `if` at line {line}, column {col})")
}

/// Runs a program term (its root is a tuple of outputs) on named inputs; returns the tuple's tensors.

pub fn eval_program(term: &Term, inputs: &BTreeMap<String, Tensor>) -> Result<Vec<Tensor>, EvalError> {
    let root = term.root();
    let mut ev =
        Evaluator { term, inputs, global: HashMap::new(), frames: Vec::new(), dependent: dependent_nodes(term) };
    match ev.eval(root)? {
        V::Tup(items) => items
            .iter()
            .map(|v| match v {
                V::T(t) => Ok(t.clone()),
                V::I(i) => Ok(Tensor::scalar(DType::I64, Scalar::I(*i))?),
                other => fail(format!("program output is not a tensor: {other:?}")),
            })
            .collect(),
        other => fail(format!("a program term's root must be a tuple, not {other:?}")),
    }
}

/// For every node, whether it depends on a loop variable or carried value (and so is re-evaluated per iteration).
pub(crate) fn dependent_nodes(term: &Term) -> Vec<bool> {
    let nodes = term.as_ref();
    let mut dep = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        dep[i] = match n {
            Node::Iter(_) | Node::Carried(_) => true,
            // A loop's own body references are bound by it; only its init and bounds can make it dependent.
            Node::Loop([a, b, c, init, _]) => {
                [a, b, c, init].iter().any(|&&x| dep[usize::from(x)]) || body_escapes(term, n)
            }
            Node::While([init, _, _]) => dep[usize::from(*init)] || body_escapes(term, n),
            other => other.children().iter().any(|&c| dep[usize::from(c)]),
        };
    }
    dep
}

/// Whether a loop's body or condition refers to an enclosing loop (a de Bruijn index of 1 or more at depth 0).
fn body_escapes(term: &Term, n: &Node) -> bool {
    fn walk(term: &Term, id: Id, depth: i64, seen: &mut HashMap<(Id, i64), bool>) -> bool {
        if let Some(&r) = seen.get(&(id, depth)) {
            return r;
        }
        let r = match &term[id] {
            Node::Iter(d) | Node::Carried([d, _]) => matches!(term[*d], Node::Int(k) if k > depth),
            Node::Loop([a, b, c, init, body]) => {
                [a, b, c, init].iter().any(|&&x| walk(term, x, depth, seen)) || walk(term, *body, depth + 1, seen)
            }
            Node::While([init, cond, body]) => {
                walk(term, *init, depth, seen)
                    || walk(term, *cond, depth + 1, seen)
                    || walk(term, *body, depth + 1, seen)
            }
            other => other.children().iter().any(|&c| walk(term, c, depth, seen)),
        };
        seen.insert((id, depth), r);
        r
    }
    let mut seen = HashMap::new();
    match n {
        Node::Loop([_, _, _, _, body]) => walk(term, *body, 0, &mut seen),
        Node::While([_, cond, body]) => walk(term, *cond, 0, &mut seen) || walk(term, *body, 0, &mut seen),
        _ => false,
    }
}

struct Frame {
    iter: i64,
    carried: Rc<Vec<V>>,
    cache: HashMap<Id, V>,
}

struct Evaluator<'a> {
    term: &'a Term,
    inputs: &'a BTreeMap<String, Tensor>,
    global: HashMap<Id, V>,
    frames: Vec<Frame>,
    dependent: Vec<bool>,
}

impl Evaluator<'_> {
    fn eval(&mut self, id: Id) -> R<V> {
        if self.dependent[usize::from(id)] {
            if let Some(v) = self.frames.last().and_then(|f| f.cache.get(&id)) {
                return Ok(v.clone());
            }
        } else if let Some(v) = self.global.get(&id) {
            return Ok(v.clone());
        }
        let v = self.compute(id)?;
        if self.dependent[usize::from(id)] {
            if let Some(f) = self.frames.last_mut() {
                f.cache.insert(id, v.clone());
            }
        } else {
            self.global.insert(id, v.clone());
        }
        Ok(v)
    }

    fn tensor(&mut self, id: Id) -> R<Tensor> {
        match self.eval(id)? {
            V::T(t) => Ok(t),
            other => fail(format!("expected a tensor, got {other:?}")),
        }
    }

    fn int(&mut self, id: Id) -> R<i64> {
        match self.eval(id)? {
            V::I(i) => Ok(i),
            other => fail(format!("expected an integer, got {other:?}")),
        }
    }

    fn ints(&mut self, id: Id) -> R<Vec<i64>> {
        match self.eval(id)? {
            V::L(items) => items
                .iter()
                .map(|v| if let V::I(i) = v { Ok(*i) } else { fail("expected a list of integers") })
                .collect(),
            other => fail(format!("expected a list, got {other:?}")),
        }
    }

    fn boolean(&mut self, id: Id) -> R<bool> {
        match self.eval(id)? {
            V::B(b) => Ok(b),
            other => fail(format!("expected a bool, got {other:?}")),
        }
    }

    fn frame(&self, d: i64) -> R<&Frame> {
        let n = self.frames.len() as i64;
        if d < 0 || d >= n {
            return fail(format!("loop reference {d} outside of {n} enclosing loops"));
        }
        Ok(&self.frames[(n - 1 - d) as usize])
    }

    fn compute(&mut self, id: Id) -> R<V> {
        let node = self.term[id].clone();
        Ok(match node {
            Node::Int(i) => V::I(i),
            Node::Float(f) => V::F(f.0),
            Node::Bool(b) => V::B(b.0),
            Node::DType(d) => V::D(d),
            Node::Name(n) => V::Name(n.0),
            Node::NoneLit => V::None,
            Node::List(items) => V::L(Rc::new(items.iter().map(|&c| self.eval(c)).collect::<R<_>>()?)),
            Node::Tuple(items) => V::Tup(Rc::new(items.iter().map(|&c| self.eval(c)).collect::<R<_>>()?)),
            Node::View([s, st, off]) => {
                let shape: Vec<usize> = self.ints(s)?.into_iter().map(|d| d as usize).collect();
                let strides: Vec<isize> = self.ints(st)?.into_iter().map(|d| d as isize).collect();
                V::View(Rc::new((shape, strides, self.int(off)?)))
            }
            Node::Input(n) => match self.eval(n)? {
                V::Name(name) => match self.inputs.get(&name) {
                    Some(t) => V::T(t.clone()),
                    None => match super::consts::tensor(&name) {
                        Some(t) => V::T(t),
                        None => return fail(format!("no input named {name}")),
                    },
                },
                other => return fail(format!("input of {other:?}")),
            },
            Node::Access([x, v]) => {
                let x = self.tensor(x)?;
                let view = self.viewed(&x, v)?;
                V::T(view.contiguous_copy())
            }
            Node::Assign([x, v, y]) => {
                let x = self.tensor(x)?.contiguous_copy();
                let view = self.viewed(&x, v)?;
                let y = self.tensor(y)?;
                ops::write_result(&view, &y, false)?;
                V::T(x)
            }
            Node::Get([t, j]) => {
                let j = self.int(j)?;
                match self.eval(t)? {
                    V::Tup(items) | V::L(items) => items
                        .get(j as usize)
                        .cloned()
                        .ok_or_else(|| EvalError(format!("get {j} of {} items", items.len())))?,
                    other => return fail(format!("get of {other:?}")),
                }
            }
            Node::Iter(d) => {
                let d = self.int(d)?;
                V::I(self.frame(d)?.iter)
            }
            Node::Carried([d, j]) => {
                let (d, j) = (self.int(d)?, self.int(j)?);
                let f = self.frame(d)?;
                f.carried
                    .get(j as usize)
                    .cloned()
                    .ok_or_else(|| EvalError(format!("carried {j} of {}", f.carried.len())))?
            }
            Node::If([c, a, b]) => {
                let cond = match self.eval(c)? {
                    V::T(t) => t.item()?.to_bool(),
                    V::B(b) => b,
                    V::I(i) => i != 0,
                    other => return fail(format!("if condition {other:?}")),
                };
                self.eval(if cond { a } else { b })?
            }
            Node::Loop([a, b, s, init, body]) => {
                let (a, b, s) = (self.int(a)?, self.int(b)?, self.int(s)?);
                if s == 0 {
                    return fail("loop step is zero");
                }
                let mut state = match self.eval(init)? {
                    V::Tup(items) => items,
                    other => return fail(format!("loop init must be a tuple, not {other:?}")),
                };
                let mut i = a;
                while (s > 0 && i < b) || (s < 0 && i > b) {
                    crate::limits::check().map_err(|t| EvalError(t.to_string()))?;
                    self.frames.push(Frame { iter: i, carried: state.clone(), cache: HashMap::new() });
                    let next = self.eval(body);
                    self.frames.pop();
                    state = match next? {
                        V::Tup(items) => items,
                        other => return fail(format!("loop body must be a tuple, not {other:?}")),
                    };
                    match i.checked_add(s) {
                        Some(next) => i = next,
                        None => break,
                    }
                }
                V::Tup(state)
            }
            Node::While([init, cond, body]) => {
                let mut state = match self.eval(init)? {
                    V::Tup(items) => items,
                    other => return fail(format!("while init must be a tuple, not {other:?}")),
                };
                let mut n = 0u64;
                loop {
                    crate::limits::check().map_err(|t| EvalError(t.to_string()))?;
                    self.frames.push(Frame { iter: n as i64, carried: state.clone(), cache: HashMap::new() });
                    let go = match self.eval(cond) {
                        Ok(V::T(t)) => t.item().map(|s| s.to_bool()).map_err(EvalError),
                        Ok(V::B(b)) => Ok(b),
                        Ok(other) => fail(format!("while condition {other:?}")),
                        Err(e) => Err(e),
                    };
                    let go = match go {
                        Ok(g) => g,
                        Err(e) => {
                            self.frames.pop();
                            return Err(e);
                        }
                    };
                    if !go {
                        self.frames.pop();
                        break;
                    }
                    let next = self.eval(body);
                    self.frames.pop();
                    state = match next? {
                        V::Tup(items) => items,
                        other => return fail(format!("while body must be a tuple, not {other:?}")),
                    };
                    n += 1;
                    if n > crate::limits::MAX_WHILE_ITERATIONS {
                        return fail("while loop exceeded its iteration limit");
                    }
                }
                V::Tup(state)
            }
            Node::Op(op, args) => self.op(op, &args)?,
        })
    }

    /// `x` seen through a view node, checked to stay inside `x`'s storage.
    fn viewed(&mut self, x: &Tensor, v: Id) -> R<Tensor> {
        let V::View(view) = self.eval(v)? else {
            return fail("expected a view");
        };
        let (shape, strides, off) = view.as_ref();
        let n = x.numel() as i64;
        let numel: usize = shape.iter().product();
        if numel > 0 {
            // In 128 bits: a view written with huge sizes or strides is out of range, not an overflow.
            let mut lo = *off as i128;
            let mut hi = *off as i128;
            for (&d, &s) in shape.iter().zip(strides) {
                let span = (d as i128 - 1) * s as i128;
                if span < 0 {
                    lo += span
                } else {
                    hi += span
                }
            }
            if lo < 0 || hi >= n as i128 {
                return fail(format!("view reaches elements {lo}..={hi} of a tensor of {n} elements"));
            }
        }
        let base = if x.is_contiguous() && x.offset == 0 { x.clone() } else { x.contiguous_copy() };
        Ok(base.restride(shape.clone(), strides.clone(), (*off).max(0) as usize))
    }

    fn op(&mut self, op: OpName, args: &[Id]) -> R<V> {
        use OpName::*;
        if !op.arity().admits(args.len()) {
            return fail(format!("{} takes {} arguments, got {}", op.as_str(), op.arity(), args.len()));
        }
        let t = |e: &mut Self, i: usize| e.tensor(args[i]);
        let operand = |e: &mut Self, i: usize| -> R<Operand> { Ok(Operand::T(e.tensor(args[i])?)) };
        let out = |r: Result<Tensor, String>| -> R<V> { Ok(V::T(r?)) };
        if let Some(u) = op.unary() {
            let x = t(self, 0)?;
            return out(ops::unary(u, &x));
        }
        if let Some(b) = op.binary() {
            let (x, y) = (operand(self, 0)?, operand(self, 1)?);
            return out(ops::binary(b, &x, &y));
        }
        match op {
            IAdd | ISub | IMul | IFloorDiv | IMod => {
                let (a, b) = (self.int(args[0])?, self.int(args[1])?);
                // Python ints do not wrap: a result outside 64 bits is an error.
                let fits = |r: Option<i64>| r.ok_or_else(|| RUNTIME_INT_OVERFLOW.to_string());
                Ok(V::I(match op {
                    IAdd => fits(a.checked_add(b))?,
                    ISub => fits(a.checked_sub(b))?,
                    IMul => fits(a.checked_mul(b))?,
                    _ if b == 0 => return fail("integer division by zero"),
                    IFloorDiv => {
                        fits(a.checked_div_euclid(b))? - if b < 0 && a.wrapping_rem_euclid(b) != 0 { 1 } else { 0 }
                    }
                    _ => {
                        let r = a.wrapping_rem_euclid(b);
                        if b < 0 && r != 0 {
                            r + b
                        } else {
                            r
                        }
                    }
                }))
            }
            IIndex | ISlice | INarrow => {
                let vals = args.iter().map(|&a| self.int(a)).collect::<R<Vec<i64>>>()?;
                Ok(V::I(run_time_start(op, &vals)?))
            }
            After => {
                self.eval(args[0])?;
                self.eval(args[1])
            }
            Raise => fail(RAISES),
            Fallback => fail(fallback_message(self.int(args[0])?, self.int(args[1])?)),
            ToInt => Ok(V::I(t(self, 0)?.item()?.to_i64_trunc())),
            ITensor => out(Tensor::scalar(DType::I64, Scalar::I(self.int(args[0])?))),
            Full => {
                let shape: Vec<usize> = self.ints(args[0])?.into_iter().map(|d| d as usize).collect();
                let V::D(dt) = self.eval(args[1])? else {
                    return fail("full: expected a dtype");
                };
                let value = match self.eval(args[2])? {
                    V::I(i) => Scalar::I(i),
                    V::F(f) => Scalar::F(f),
                    V::B(b) => Scalar::B(b),
                    other => return fail(format!("full: value {other:?}")),
                };
                out(Tensor::full(dt, &shape, value))
            }
            Arange => {
                let V::D(dt) = self.eval(args[0])? else {
                    return fail("arange: expected a dtype");
                };
                let (start, step) = (self.eval(args[1])?, self.eval(args[2])?);
                let n = self.int(args[3])?.max(0) as usize;
                let vals: Vec<Scalar> = (0..n)
                    .map(|i| match (&start, &step) {
                        (V::I(a), V::I(s)) => Scalar::I(a + i as i64 * s),
                        (a, s) => Scalar::F(num(a) + i as f64 * num(s)),
                    })
                    .collect();
                out(Tensor::from_scalars(dt, &[n], &vals))
            }
            Cast => {
                let V::D(dt) = self.eval(args[0])? else {
                    return fail("cast: expected a dtype");
                };
                out(t(self, 1)?.to_dtype(dt))
            }
            Reshape => {
                let x = t(self, 0)?;
                let shape = self.ints(args[1])?;
                out(x.contiguous_copy().reshape(&shape))
            }
            Where => {
                let c = t(self, 0)?;
                let (a, b) = (operand(self, 1)?, operand(self, 2)?);
                out(ops::where_(&c, &a, &b))
            }
            Clamp => {
                let x = t(self, 0)?;
                let lo = match self.eval(args[1])? {
                    V::T(l) => Some(Operand::T(l)),
                    _ => None,
                };
                let hi = match self.eval(args[2])? {
                    V::T(h) => Some(Operand::T(h)),
                    _ => None,
                };
                out(ops::clamp(&x, lo.as_ref(), hi.as_ref()))
            }
            Sum | Mean | Prod | Amax | Amin | Any | All => {
                let x = t(self, 0)?;
                let dims = self.ints(args[1])?;
                let keep = self.boolean(args[2])?;
                out(match op {
                    Sum => reduce::sum(&x, Some(&dims), keep, None),
                    Mean => reduce::mean(&x, Some(&dims), keep, None),
                    Prod => reduce::prod(&x, Some(&dims), keep),
                    Amax | Amin => reduce::amax(&x, Some(&dims), keep, op == Amax),
                    _ => reduce::any_all(&x, Some(&dims), keep, op == All),
                })
            }
            MaxVal | MaxIdx | MinVal | MinIdx => {
                let x = t(self, 0)?;
                let d = self.int(args[1])?;
                let keep = self.boolean(args[2])?;
                let (v, i) = reduce::max_dim(&x, d, keep, matches!(op, MaxVal | MaxIdx))?;
                Ok(V::T(if matches!(op, MaxVal | MinVal) { v } else { i }))
            }
            Softmax | LogSoftmax | Cumsum | Cumprod => {
                let x = t(self, 0)?;
                let d = self.int(args[1])?;
                out(if op == Cumsum {
                    reduce::cumsum(&x, d, None)
                } else if op == Cumprod {
                    reduce::cumprod(&x, d, None)
                } else {
                    reduce::softmax(&x, d, None, op == LogSoftmax)
                })
            }
            Matmul => {
                let (a, b) = (t(self, 0)?, t(self, 1)?);
                out(reduce::matmul(&a, &b))
            }
            Cat => {
                let d = self.int(args[0])?;
                let parts: Vec<Tensor> = args[1..].iter().map(|&a| self.tensor(a)).collect::<R<_>>()?;
                out(reduce::cat(&parts, d))
            }
            InView => {
                let x = t(self, 0)?;
                let mask = Tensor::zeros(DType::Bool, &x.shape)?;
                let view = self.viewed(&mask, args[1])?;
                ops::write_result(&view, &Tensor::scalar(DType::Bool, Scalar::B(true))?, false)?;
                Ok(V::T(mask))
            }
            MatrixExp => out(crate::tensor::linalg::matrix_exp(&t(self, 0)?)),
            Triu | Tril => {
                let x = t(self, 0)?;
                let k = self.int(args[1])?;
                out(reduce::triangle(&x, k, op == Triu))
            }
            Index => {
                let x = t(self, 0)?;
                let idx = self.indices(&args[1..])?;
                out(index::index(&x, &idx))
            }
            IndexPut => {
                let x = t(self, 0)?.contiguous_copy();
                let acc = self.boolean(args[1])?;
                let v = t(self, 2)?;
                let idx = self.indices(&args[3..])?;
                index::index_put(&x, &idx, &v, acc)?;
                Ok(V::T(x))
            }
            Gather => {
                let x = t(self, 0)?.contiguous_copy();
                let d = crate::tensor::views::wrap_dim(self.int(args[1])?, x.dim())?;
                let idx = t(self, 2)?;
                let offs = index::along_dim_offsets(&x, d, &idx)?;
                let b = x.buf.borrow();
                let vals: Vec<Scalar> = offs.iter().map(|&o| b.get(o)).collect();
                out(Tensor::from_scalars(x.dtype(), &idx.shape, &vals))
            }
            Scatter => {
                let x = t(self, 0)?.contiguous_copy();
                let d = crate::tensor::views::wrap_dim(self.int(args[1])?, x.dim())?;
                let idx = t(self, 2)?;
                let src = t(self, 3)?;
                let add = self.boolean(args[4])?;
                let offs = index::along_dim_offsets(&x, d, &idx)?;
                let sl = (0..src.dim()).try_fold(src.clone(), |acc, k| acc.narrow(k as i64, 0, idx.shape[k] as i64))?;
                index::scatter_values(&x, &offs, sl.scalars(), add);
                Ok(V::T(x))
            }
            SortVal | SortIdx => {
                let x = t(self, 0)?;
                let d = self.int(args[1])?;
                let desc = self.boolean(args[2])?;
                let ties = crate::tensor::ties::Ties::from_code(self.int(args[3])?, self.int(args[4])?)?;
                let (v, i) = index::sort(&x, d, desc, ties)?;
                Ok(V::T(if op == SortVal { v } else { i }))
            }
            _ => fail(format!("operator {} is not evaluated here", op.as_str())),
        }
    }

    fn indices(&mut self, ids: &[Id]) -> R<Vec<Option<Tensor>>> {
        ids.iter()
            .map(|&i| match self.eval(i)? {
                V::T(t) => Ok(Some(t)),
                V::None => Ok(None),
                other => fail(format!("index entry {other:?}")),
            })
            .collect()
    }
}

fn num(v: &V) -> f64 {
    match v {
        V::I(i) => *i as f64,
        V::F(f) => *f,
        V::B(b) => *b as u8 as f64,
        _ => f64::NAN,
    }
}
