//! Type inference for terms: every node's dtype and static shape, and the errors of ill-formed terms.
//!
//! The rules are PyTorch's, taken from the tensor runtime where they live (promotion, broadcasting), so a term that
//! verifies evaluates without a type error. Loop bodies are typed against their carried state.

use egg::Id;

use super::{Node, OpName, Term};
use crate::tensor::ops::{self, Operand};
use crate::tensor::views::wrap_dim;
use crate::tensor::{fmt_shape, DType, Tensor};

/// The type of a term node.
#[derive(Clone, Debug, PartialEq)]
pub enum Ty {
    Tensor(DType, Vec<usize>),
    Int,
    Float,
    Bool,
    DType,
    Name,
    None,
    View(Vec<usize>),
    List(Vec<Ty>),
    Tuple(Vec<Ty>),
}

impl std::fmt::Display for Ty {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ty::Tensor(d, s) => write!(f, "{}{}", d.annotation(), fmt_shape(s)),
            Ty::Tuple(items) => write!(f, "({})", items.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(", ")),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Infers the type of `term`'s root given the types of its inputs; an error names the offending node.
pub fn verify(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> Result<Ty, String> {
    let mut v = Verifier { term, inputs, frames: Vec::new(), serials: vec![0], next: 1, cache: Default::default() };
    v.ty(term.root())
}

/// The type of every node of `term` (None for nodes the root does not reach); an error when one node has
/// different types in different loop bodies.
pub fn node_types(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> Result<Vec<Option<Ty>>, String> {
    let mut v = Verifier { term, inputs, frames: Vec::new(), serials: vec![0], next: 1, cache: Default::default() };
    v.ty(term.root())?;
    let mut out: Vec<Option<Ty>> = vec![None; term.as_ref().len()];
    let mut entries: Vec<_> = v.cache.into_iter().collect();
    entries.sort_by_key(|((id, serial), _)| (*id, *serial));
    for ((id, _), t) in entries {
        match &out[usize::from(id)] {
            Some(prev) if *prev != t => {
                return Err(format!("node {id} has type {prev} in one loop and {t} in another"))
            }
            _ => out[usize::from(id)] = Some(t),
        }
    }
    Ok(out)
}

/// The type of every node of `term` that has one type wherever it is evaluated (None for the others and for nodes
/// the root does not reach); None when the term does not verify.
pub fn unambiguous_types(term: &Term, inputs: &[(String, DType, Vec<usize>)]) -> Option<Vec<Option<Ty>>> {
    let mut v = Verifier { term, inputs, frames: Vec::new(), serials: vec![0], next: 1, cache: Default::default() };
    v.ty(term.root()).ok()?;
    let mut out: Vec<Option<Ty>> = vec![None; term.as_ref().len()];
    let mut clash = vec![false; term.as_ref().len()];
    for ((id, _), t) in v.cache {
        let k = usize::from(id);
        match &out[k] {
            Some(prev) if *prev != t => clash[k] = true,
            _ => out[k] = Some(t),
        }
    }
    for (k, c) in clash.into_iter().enumerate() {
        if c {
            out[k] = None;
        }
    }
    Some(out)
}

/// The types of the nodes of `term` that are evaluated outside every loop (those that use no loop's variable or
/// state), by node.
pub fn top_level_types(
    term: &Term,
    inputs: &[(String, DType, Vec<usize>)],
) -> Result<hashbrown::HashMap<Id, Ty>, String> {
    let mut v = Verifier { term, inputs, frames: Vec::new(), serials: vec![0], next: 1, cache: Default::default() };
    v.ty(term.root())?;
    Ok(v.cache.into_iter().filter(|((_, frame), _)| *frame == 0).map(|((id, _), t)| (id, t)).collect())
}

struct Verifier<'a> {
    term: &'a Term,
    inputs: &'a [(String, DType, Vec<usize>)],
    /// Carried-state types of the enclosing loops, innermost last.
    frames: Vec<Vec<Ty>>,
    /// A number for each entered loop body (0 outside all loops), innermost last: types are cached per body entered,
    /// as one node shared by two loops' bodies may have a different type in each.
    serials: Vec<usize>,
    next: usize,
    cache: hashbrown::HashMap<(Id, usize), Ty>,
}

fn dummy(d: DType, rank: usize) -> Operand {
    Operand::T(Tensor::zeros(d, &vec![1; rank]).expect("a one-element tensor"))
}

impl Verifier<'_> {
    fn ty(&mut self, id: Id) -> Result<Ty, String> {
        let key = (id, *self.serials.last().expect("the outermost frame"));
        if let Some(t) = self.cache.get(&key) {
            return Ok(t.clone());
        }
        let t =
            self.infer(id).map_err(
                |e| {
                    if e.starts_with("in ") {
                        e
                    } else {
                        format!("in `{}`: {e}", self.show(id))
                    }
                },
            )?;
        self.cache.insert(key, t.clone());
        Ok(t)
    }

    fn push(&mut self, state: Vec<Ty>) {
        self.frames.push(state);
        self.serials.push(self.next);
        self.next += 1;
    }

    fn pop(&mut self) {
        self.frames.pop();
        self.serials.pop();
    }

    fn show(&self, id: Id) -> String {
        let n = &self.term[id];
        match n {
            Node::Op(op, _) => format!("({} ...)", op.as_str()),
            other => format!("{other}"),
        }
    }

    fn lit_int(&self, id: Id) -> Result<i64, String> {
        match &self.term[id] {
            Node::Int(i) => Ok(*i),
            other => Err(format!("expected an integer literal, found `{other}`")),
        }
    }

    fn lit_ints(&self, id: Id) -> Result<Vec<i64>, String> {
        match &self.term[id] {
            Node::List(items) => items.iter().map(|&i| self.lit_int(i)).collect(),
            other => Err(format!("expected a list of integer literals, found `{other}`")),
        }
    }

    fn tensor(&mut self, id: Id) -> Result<(DType, Vec<usize>), String> {
        match self.ty(id)? {
            Ty::Tensor(d, s) => Ok((d, s)),
            other => Err(format!("expected a tensor, found {other}")),
        }
    }

    fn int(&mut self, id: Id) -> Result<(), String> {
        match self.ty(id)? {
            Ty::Int => Ok(()),
            other => Err(format!("expected an integer, found {other}")),
        }
    }

    fn frame(&self, d: Id) -> Result<&Vec<Ty>, String> {
        let d = self.lit_int(d)?;
        let n = self.frames.len() as i64;
        if d < 0 || d >= n {
            return Err(format!("loop reference {d} outside of {n} enclosing loops"));
        }
        Ok(&self.frames[(n - 1 - d) as usize])
    }

    fn tuple_items(&mut self, id: Id) -> Result<Vec<Ty>, String> {
        match self.ty(id)? {
            Ty::Tuple(items) => Ok(items),
            other => Err(format!("expected a tuple, found {other}")),
        }
    }

    fn infer(&mut self, id: Id) -> Result<Ty, String> {
        let node = self.term[id].clone();
        Ok(match node {
            Node::Int(_) => Ty::Int,
            Node::Float(_) => Ty::Float,
            Node::Bool(_) => Ty::Bool,
            Node::DType(_) => Ty::DType,
            Node::Name(_) => Ty::Name,
            Node::NoneLit => Ty::None,
            Node::List(items) => Ty::List(items.iter().map(|&c| self.ty(c)).collect::<Result<_, _>>()?),
            Node::Tuple(items) => Ty::Tuple(items.iter().map(|&c| self.ty(c)).collect::<Result<_, _>>()?),
            Node::View([s, st, off]) => {
                let shape = self.lit_ints(s)?;
                let strides = self.lit_ints(st)?;
                if shape.len() != strides.len() || shape.iter().any(|&d| d < 0) {
                    return Err("a view needs one non-negative size per stride".into());
                }
                self.int(off)?;
                Ty::View(shape.into_iter().map(|d| d as usize).collect())
            }
            Node::Input(n) => {
                let Node::Name(name) = &self.term[n] else {
                    return Err("input takes a %name".into());
                };
                match self.inputs.iter().find(|(k, _, _)| *k == name.0) {
                    Some((_, d, s)) => Ty::Tensor(*d, s.clone()),
                    None => match super::consts::type_of(&name.0) {
                        Some((d, s)) => Ty::Tensor(d, s),
                        None => return Err(format!("no input named {name}")),
                    },
                }
            }
            Node::Access([x, v]) => {
                let (d, _) = self.tensor(x)?;
                match self.ty(v)? {
                    Ty::View(shape) => Ty::Tensor(d, shape),
                    other => return Err(format!("access through {other}")),
                }
            }
            Node::Assign([x, v, y]) => {
                let (d, s) = self.tensor(x)?;
                let Ty::View(vs) = self.ty(v)? else {
                    return Err("assign needs a view".into());
                };
                let (_, ys) = self.tensor(y)?;
                let b = ops::broadcast_shapes(&vs, &ys)?;
                if b != vs {
                    return Err(format!(
                        "a value of shape {} cannot be assigned to a view of shape {}",
                        fmt_shape(&ys),
                        fmt_shape(&vs)
                    ));
                }
                Ty::Tensor(d, s)
            }
            Node::Get([t, j]) => {
                let j = self.lit_int(j)?;
                let items = self.tuple_items(t)?;
                items.get(j as usize).cloned().ok_or_else(|| format!("get {j} of a tuple of {}", items.len()))?
            }
            Node::Iter(d) => {
                self.frame(d)?;
                Ty::Int
            }
            Node::Carried([d, j]) => {
                let j = self.lit_int(j)?;
                let f = self.frame(d)?;
                f.get(j as usize).cloned().ok_or_else(|| format!("carried {j} of {} values", f.len()))?
            }
            Node::If([c, a, b]) => {
                match self.ty(c)? {
                    Ty::Tensor(DType::Bool, s) if s.iter().product::<usize>() == 1 => {}
                    Ty::Bool | Ty::Int => {}
                    other => return Err(format!("if condition must be a one-element bool tensor, not {other}")),
                }
                let (ta, tb) = (self.ty(a)?, self.ty(b)?);
                if ta != tb {
                    return Err(format!("if arms differ: {ta} and {tb}"));
                }
                ta
            }
            Node::Loop([a, b, s, init, body]) => {
                for x in [a, b, s] {
                    self.int(x)?;
                }
                let state = self.tuple_items(init)?;
                self.push(state.clone());
                let out = self.tuple_items(body);
                self.pop();
                let out = out?;
                if out != state {
                    return Err(format!("loop body yields {} but carries {}", Ty::Tuple(out), Ty::Tuple(state)));
                }
                Ty::Tuple(state)
            }
            Node::While([init, cond, body]) => {
                let state = self.tuple_items(init)?;
                self.push(state.clone());
                let c = self.ty(cond);
                let out = self.tuple_items(body);
                self.pop();
                match c? {
                    Ty::Tensor(DType::Bool, s) if s.iter().product::<usize>() == 1 => {}
                    Ty::Bool => {}
                    other => return Err(format!("while condition must be a one-element bool tensor, not {other}")),
                }
                let out = out?;
                if out != state {
                    return Err(format!("while body yields {} but carries {}", Ty::Tuple(out), Ty::Tuple(state)));
                }
                Ty::Tuple(state)
            }
            Node::Op(op, args) => {
                let tys = args.iter().map(|&c| self.ty(c)).collect::<Result<Vec<_>, _>>()?;
                op_type(op, &OpCx { term: self.term, ids: &args, tys: &tys })?
            }
        })
    }
}

/// The type of `(op args...)` given its children's types: the typing rules shared by [`verify`] and the
/// functionalizer, which types each node as it builds it.
pub(crate) fn op_type(op: OpName, cx: &OpCx) -> Result<Ty, String> {
    let args = cx.ids;
    use OpName::*;
    if !op.arity().admits(args.len()) {
        return Err(format!("takes {} arguments, got {}", op.arity(), args.len()));
    }
    if let Some(u) = op.unary() {
        let (d, s) = cx.tensor(0)?;
        let r = ops::unary(u, &Tensor::zeros(d, &[1])?)?;
        return Ok(Ty::Tensor(r.dtype(), s));
    }
    if let Some(b) = op.binary() {
        let (da, sa) = cx.tensor(0)?;
        let (db, sb) = cx.tensor(1)?;
        if da != db {
            return Err(format!(
                "operands of {} have dtypes {} and {}; cast them first",
                op.as_str(),
                da.annotation(),
                db.annotation()
            ));
        }
        let (_, out) = ops::binary_dtypes(b, &dummy(da, sa.len()), &dummy(db, sb.len()))?;
        return Ok(Ty::Tensor(out, ops::broadcast_shapes(&sa, &sb)?));
    }
    Ok(match op {
        IAdd | ISub | IMul | IFloorDiv | IMod => {
            cx.int(0)?;
            cx.int(1)?;
            Ty::Int
        }
        IIndex | ISlice | INarrow => {
            (0..args.len()).try_for_each(|k| cx.int(k).map(|_| ()))?;
            Ty::Int
        }
        After => cx.tys[1].clone(),
        Raise => Ty::Int,
        Fallback => {
            cx.int(0)?;
            cx.int(1)?;
            Ty::Int
        }
        ToInt => {
            let (d, s) = cx.tensor(0)?;
            if d.is_float() || s.iter().product::<usize>() != 1 {
                return Err("toint needs a one-element integer tensor".into());
            }
            Ty::Int
        }
        ITensor => {
            cx.int(0)?;
            Ty::Tensor(DType::I64, vec![])
        }
        Full => {
            let shape = cx.lit_ints(0)?;
            let d = cx.lit_dtype(1)?;
            if !matches!(cx.term[args[2]], Node::Int(_) | Node::Float(_) | Node::Bool(_)) {
                return Err("full takes a literal value".into());
            }
            Ty::Tensor(d, shape.into_iter().map(|x| x.max(0) as usize).collect())
        }
        Arange => {
            let d = cx.lit_dtype(0)?;
            let n = cx.lit_int(3)?;
            Ty::Tensor(d, vec![n.max(0) as usize])
        }
        Cast => {
            let d = cx.lit_dtype(0)?;
            Ty::Tensor(d, cx.tensor(1)?.1)
        }
        Reshape => {
            let (d, s) = cx.tensor(0)?;
            let shape = cx.lit_ints(1)?;
            let shape = crate::tensor::views::infer_shape(&shape, s.iter().product())?;
            Ty::Tensor(d, shape)
        }
        Where => {
            let (dc, sc) = cx.tensor(0)?;
            let (da, sa) = cx.tensor(1)?;
            let (db, sb) = cx.tensor(2)?;
            if dc != DType::Bool || da != db {
                return Err("where takes a bool condition and two tensors of one dtype".into());
            }
            Ty::Tensor(da, ops::broadcast_shapes(&ops::broadcast_shapes(&sc, &sa)?, &sb)?)
        }
        Clamp => {
            let (d, s) = cx.tensor(0)?;
            for k in 1..args.len() {
                match cx.ty(k)? {
                    Ty::None => {}
                    Ty::Tensor(db, sb) if db == d => {
                        ops::broadcast_shapes(&s, &sb)?;
                    }
                    other => return Err(format!("clamp bound {other} must be none or a {} tensor", d.annotation())),
                }
            }
            Ty::Tensor(d, s)
        }
        Sum | Mean | Prod | Amax | Amin | Any | All => {
            let (d, s) = cx.tensor(0)?;
            let dims = cx.lit_ints(1)?;
            let keep = cx.lit_bool(2)?;
            let mut dims: Vec<usize> = if dims.is_empty() {
                (0..s.len()).collect()
            } else {
                dims.iter().map(|&x| wrap_dim(x, s.len())).collect::<Result<_, _>>()?
            };
            // A 0-dim tensor accepts dim 0 (or -1) and has no dim to reduce.
            if s.is_empty() {
                dims.clear();
            }
            if matches!(op, Amax | Amin) {
                empty_reduction(if op == Amax { "amax" } else { "amin" }, &s, &dims, cx.lit_ints(1)?.is_empty())?;
            }
            let shape = reduced(&s, &dims, keep);
            let out = match op {
                Sum | Prod if !d.is_float() => DType::I64,
                Mean if !d.is_float() => return Err(format!("mean of {}", d.annotation())),
                Any | All if d == DType::U8 => DType::U8,
                Any | All => DType::Bool,
                _ => d,
            };
            Ty::Tensor(out, shape)
        }
        MaxVal | MaxIdx | MinVal | MinIdx => {
            let (d, s) = cx.tensor(0)?;
            let dim = wrap_dim(cx.lit_int(1)?, s.len())?;
            let keep = cx.lit_bool(2)?;
            let dims = if s.is_empty() { vec![] } else { vec![dim] };
            empty_reduction(if matches!(op, MaxVal | MaxIdx) { "max" } else { "min" }, &s, &dims, false)?;
            Ty::Tensor(if matches!(op, MaxIdx | MinIdx) { DType::I64 } else { d }, reduced(&s, &dims, keep))
        }
        Softmax | LogSoftmax | Cumsum | Cumprod => {
            let (d, s) = cx.tensor(0)?;
            wrap_dim(cx.lit_int(1)?, s.len())?;
            let scan = matches!(op, Cumsum | Cumprod);
            let out = if scan && !d.is_float() { DType::I64 } else { d };
            if !scan && !d.is_float() {
                return Err(format!("softmax of {}", d.annotation()));
            }
            Ty::Tensor(out, s)
        }
        Matmul => {
            let (da, sa) = cx.tensor(0)?;
            let (db, sb) = cx.tensor(1)?;
            if da != db {
                return Err(format!("matmul of {} and {}", da.annotation(), db.annotation()));
            }
            let shape = matmul_shape(&sa, &sb)?;
            Ty::Tensor(da, shape)
        }
        Cat => {
            let dim = cx.lit_int(0)?;
            let mut parts = Vec::new();
            for k in 1..args.len() {
                parts.push(cx.tensor(k)?);
            }
            if let Some(k) = parts.iter().position(|(_, s)| s.is_empty()) {
                return Err(format!("zero-dimensional tensor (at position {k}) cannot be concatenated"));
            }
            let (d0, s0) = parts[0].clone();
            let dd = wrap_dim(dim, s0.len())?;
            let mut shape = s0.clone();
            shape[dd] = 0;
            for (d, s) in &parts {
                if *d != d0 || s.len() != s0.len() || (0..s.len()).any(|k| k != dd && s[k] != s0[k]) {
                    return Err("cat operands must agree in dtype and in every dim but the one joined".into());
                }
                shape[dd] += s[dd];
            }
            Ty::Tensor(d0, shape)
        }
        InView => {
            let (_, s) = cx.tensor(0)?;
            match cx.ty(1)? {
                Ty::View(_) => Ty::Tensor(DType::Bool, s),
                other => return Err(format!("inview takes a tensor and a view, not {other}")),
            }
        }
        MatrixExp => {
            let (d, s) = cx.tensor(0)?;
            if !d.is_float() || s.len() < 2 || s[s.len() - 1] != s[s.len() - 2] {
                return Err("matrix_exp takes float tensors of square matrices".into());
            }
            Ty::Tensor(d, s)
        }
        Triu | Tril => {
            cx.int(1)?;
            let (d, s) = cx.tensor(0)?;
            if s.len() < 2 {
                return Err("triu/tril need at least 2 dimensions".into());
            }
            Ty::Tensor(d, s)
        }
        Index | IndexPut => {
            let base = if op == Index { 1 } else { 3 };
            let (d, s) = cx.tensor(0)?;
            let mut idx = Vec::new();
            for k in base..args.len() {
                idx.push(match cx.ty(k)? {
                    Ty::None => None,
                    Ty::Tensor(di, si) if !di.is_float() && di != DType::Bool => {
                        Some(Tensor::zeros(DType::I64, &[])?.restride(si.clone(), vec![0; si.len()], 0))
                    }
                    other => return Err(format!("index entry {other} must be none or an integer tensor")),
                });
            }
            let x = Tensor::zeros(d, &[])?.restride(s.clone(), vec![0; s.len()], 0);
            let r = crate::tensor::index::advanced(&x, &idx)?;
            if op == Index {
                Ty::Tensor(d, r.shape)
            } else {
                cx.lit_bool(1)?;
                let (_, vs) = cx.tensor(2)?;
                if ops::broadcast_shapes(&r.shape, &vs)? != r.shape {
                    return Err("index_put value does not broadcast to the indexed shape".into());
                }
                Ty::Tensor(d, s)
            }
        }
        Gather => {
            let (d, s) = cx.tensor(0)?;
            wrap_dim(cx.lit_int(1)?, s.len())?;
            let (di, si) = cx.tensor(2)?;
            if !matches!(di, DType::I64 | DType::I32) {
                return Err("gather(): Expected dtype int32/int64 for index".into());
            }
            if si.len() != s.len() {
                return Err("Index tensor must have the same number of dimensions as input tensor".into());
            }
            Ty::Tensor(d, si)
        }
        Scatter => {
            let (d, s) = cx.tensor(0)?;
            wrap_dim(cx.lit_int(1)?, s.len())?;
            let (di, si) = cx.tensor(2)?;
            let (ds, _) = cx.tensor(3)?;
            if di.is_float() || di == DType::Bool || si.len() != s.len() || ds != d {
                return Err("scatter takes an integer index and a source of the input's dtype".into());
            }
            cx.lit_bool(4)?;
            Ty::Tensor(d, s)
        }
        SortVal | SortIdx => {
            let (d, s) = cx.tensor(0)?;
            wrap_dim(cx.lit_int(1)?, s.len())?;
            cx.lit_bool(2)?;
            crate::tensor::ties::Ties::from_code(cx.lit_int(3)?, 0)?;
            cx.int(4)?;
            Ty::Tensor(if op == SortIdx { DType::I64 } else { d }, s)
        }
        _ => return Err(format!("{} is not typed here", op.as_str())),
    })
}

/// What [`op_type`] sees of a node's children: their ids (for literals) and their types.
pub(crate) struct OpCx<'a> {
    pub term: &'a Term,
    pub ids: &'a [Id],
    pub tys: &'a [Ty],
}

impl OpCx<'_> {
    fn ty(&self, k: usize) -> Result<Ty, String> {
        Ok(self.tys[k].clone())
    }
    fn tensor(&self, k: usize) -> Result<(DType, Vec<usize>), String> {
        match &self.tys[k] {
            Ty::Tensor(d, s) => Ok((*d, s.clone())),
            other => Err(format!("expected a tensor, found {other}")),
        }
    }
    fn int(&self, k: usize) -> Result<(), String> {
        match &self.tys[k] {
            Ty::Int => Ok(()),
            other => Err(format!("expected an integer, found {other}")),
        }
    }
    fn lit_int(&self, k: usize) -> Result<i64, String> {
        lit_int(self.term, self.ids[k])
    }
    fn lit_ints(&self, k: usize) -> Result<Vec<i64>, String> {
        match &self.term[self.ids[k]] {
            Node::List(items) => items.iter().map(|&i| lit_int(self.term, i)).collect(),
            other => Err(format!("expected a list of integer literals, found `{other}`")),
        }
    }
    fn lit_bool(&self, k: usize) -> Result<bool, String> {
        match &self.term[self.ids[k]] {
            Node::Bool(b) => Ok(b.0),
            other => Err(format!("expected a bool literal, found `{other}`")),
        }
    }
    fn lit_dtype(&self, k: usize) -> Result<DType, String> {
        match &self.term[self.ids[k]] {
            Node::DType(d) => Ok(*d),
            other => Err(format!("expected a dtype, found `{other}`")),
        }
    }
}

fn lit_int(term: &Term, id: Id) -> Result<i64, String> {
    match &term[id] {
        Node::Int(i) => Ok(*i),
        other => Err(format!("expected an integer literal, found `{other}`")),
    }
}

fn reduced(s: &[usize], dims: &[usize], keep: bool) -> Vec<usize> {
    (0..s.len())
        .filter_map(|d| {
            if dims.contains(&d) {
                if keep {
                    Some(1)
                } else {
                    None
                }
            } else {
                Some(s[d])
            }
        })
        .collect()
}

/// The result shape of `matmul(a, b)`, with its shape errors.
/// The shape of `a @ b` for operands of shapes `sa` and `sb`.
pub(crate) fn matmul_shape(sa: &[usize], sb: &[usize]) -> Result<Vec<usize>, String> {
    if sa.is_empty() || sb.is_empty() {
        return Err("matmul needs tensors of at least one dimension".into());
    }
    let k1 = sa[sa.len() - 1];
    let k2 = if sb.len() == 1 { sb[0] } else { sb[sb.len() - 2] };
    if k1 != k2 {
        return Err(format!("matmul shapes {} and {} do not match", fmt_shape(sa), fmt_shape(sb)));
    }
    let ba = if sa.len() > 2 { &sa[..sa.len() - 2] } else { &[][..] };
    let bb = if sb.len() > 2 { &sb[..sb.len() - 2] } else { &[][..] };
    let mut shape = ops::broadcast_shapes(ba, bb)?;
    if sa.len() > 1 {
        shape.push(sa[sa.len() - 2]);
    }
    if sb.len() > 1 {
        shape.push(sb[sb.len() - 1]);
    }
    Ok(shape)
}

/// PyTorch's errors for a max or min over nothing: a reduced dim of size 0, or every dim of an empty tensor.
fn empty_reduction(name: &str, shape: &[usize], dims: &[usize], all: bool) -> Result<(), String> {
    if all && shape.contains(&0) {
        return Err(format!("{name}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim with the 'dim' argument."));
    }
    match dims.iter().find(|&&d| shape[d] == 0) {
        Some(d) => Err(format!("{name}(): Expected reduction dim {d} to have non-zero size.")),
        None => Ok(()),
    }
}
