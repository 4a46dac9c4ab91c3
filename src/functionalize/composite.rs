//! Ops of the functionalizer's table that are built from other terms (statistics, flips, diagonals) and the
//! creation ops.

use crate::interp::creation::count_arg;
use crate::interp::torch_ops::{check_int_data, DataKind};
use std::rc::Rc;

use super::desugar::ints;
use super::ops::{err, A};
use super::state::{diag, needs_static, Affine, Stop, TRef, FR, FV};
use super::Fz;
use crate::ir::{Node, OpName};
use crate::tensor::ops::{self, Binary};
use crate::tensor::views::wrap_dim;
use crate::tensor::{DType, Scalar};

impl<'m> Fz<'m> {
    pub(super) fn composite(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        match name {
            "var" | "std" => self.var_std(name, a),
            "normalize" => self.normalize(a),
            "logsumexp" => self.logsumexp(a),
            "logcumsumexp" => self.logcumsumexp(a),
            "flip" => self.flip(a),
            "roll" => self.roll(a),
            "diff" => self.diff(a),
            "fill_diagonal" => self.fill_diagonal(a),
            "diag" => self.diag_op(a),
            "index_fill" => self.index_fill(a),
            "gather" => self.gather(a),
            "take_along_dim" => self.take_along_dim(a),
            "scatter" | "scatter_add" => self.scatter(name, a),
            "sort" | "argsort" | "topk" => self.sort(name, a),
            _ => self.creation(name, a, method),
        }
    }

    /// `var`/`std`: the mean of squared deviations over `dim`, with Bessel's `correction`, and its root for `std`.
    fn var_std(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let dims = a.dims(1, "dim")?.unwrap_or_default();
        let keep = a.bool_or(3, "keepdim", false)?;
        let correction = match (a.opt(99, "correction"), a.opt(2, "unbiased")) {
            (Some(c), _) => a.int_of(c, "correction")?,
            (None, Some(FV::Bool(false))) => 0,
            _ => 1,
        };
        let mean = self.reduce_op(OpName::Mean, &x, &dims, true, None, span)?;
        let diff = self.elementwise(Binary::Sub, &[FV::Tensor(x.clone()), mean], span)?;
        let sq = self.elementwise(Binary::Mul, &[diff.clone(), diff], span)?;
        let FV::Tensor(sq) = sq else { unreachable!() };
        let s = self.reduce_op(OpName::Sum, &sq, &dims, keep, None, span)?;
        let FV::Tensor(st) = &s else { unreachable!() };
        let n = (x.shape.iter().product::<usize>() / st.shape.iter().product::<usize>().max(1)) as i64;
        let v = self.elementwise(Binary::Div, &[s, FV::Float((n - correction).max(0) as f64)], span)?;
        if name == "std" {
            self.unary(ops::Unary::Sqrt, &v, span)
        } else {
            Ok(v)
        }
    }

    /// `F.normalize`: `x` over its `p`-norm along `dim`, the norm clamped below by `eps`.
    fn normalize(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let p = a.opt(1, "p").and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(2.0);
        let dim = a.int_or(2, "dim", 1)?;
        let eps = a.opt(3, "eps").and_then(|v| a.number(v)).map(|s| s.to_f64()).unwrap_or(1e-12);
        let ab = self.unary(ops::Unary::Abs, &FV::Tensor(x.clone()), span)?;
        let pw = self.elementwise(Binary::Pow, &[ab, FV::Float(p)], span)?;
        let FV::Tensor(pw) = pw else { unreachable!() };
        let s = self.reduce_op(OpName::Sum, &pw, &[dim], true, None, span)?;
        let n = self.elementwise(Binary::Pow, &[s, FV::Float(1.0 / p)], span)?;
        let n = self.torch("clamp", &A::new(vec![n, FV::Float(eps)], vec![], span, "clamp".into()), false)?;
        self.elementwise(Binary::Div, &[FV::Tensor(x), n], span)
    }

    /// `logsumexp`: the maximum subtracted before `exp` and added back after `log` (an infinite maximum counts as 0).
    /// `logcumsumexp(x, dim)` as the reference computes it: the `logsumexp` along a new last dim of `x` (moved to
    /// the end) masked to -inf past each element.
    fn logcumsumexp(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let dt = self.roots[x.root].dtype;
        let d = wrap_dim(a.int(1, "dim")?, x.shape.len().max(1)).map_err(err(span))?;
        if x.shape.is_empty() {
            crate::interp::compat::logcumsumexp_check(dt, 1).map_err(err(span))?;
            return self.torch("clone", &A::new(vec![FV::Tensor(x)], vec![], span, "clone".into()), false);
        }
        let n = x.shape[d];
        crate::interp::compat::logcumsumexp_check(dt, n).map_err(err(span))?;
        let last = x.shape.len() as i64 - 1;
        let mut sizes: Vec<i64> = x.shape.iter().map(|&s| s as i64).collect();
        sizes.swap(d, last as usize);
        sizes.insert(sizes.len() - 1, n as i64);
        let rows = self.tview(&x, |t| t.transpose(d as i64, last)?.unsqueeze(-2)?.expand(&sizes)).map_err(err(span))?;
        let range = self.torch("arange", &A::new(vec![FV::Int(n as i64)], vec![], span, "arange".into()), false)?;
        let FV::Tensor(r) = range else { unreachable!("arange makes a tensor") };
        let col = self.tview(&r, |t| t.unsqueeze(1)).map_err(err(span))?;
        let row = self.tview(&r, |t| t.unsqueeze(0)).map_err(err(span))?;
        let upto = self.elementwise(Binary::Ge, &[FV::Tensor(col), FV::Tensor(row)], span)?;
        let masked = self.torch(
            "where",
            &A::new(vec![upto, FV::Tensor(rows), FV::Float(f64::NEG_INFINITY)], vec![], span, "where".into()),
            false,
        )?;
        let l = self.logsumexp(&A::new(vec![masked, FV::Int(-1)], vec![], span, "logsumexp".into()))?;
        let FV::Tensor(l) = l else { unreachable!("logsumexp makes a tensor") };
        let back = FV::Tensor(self.tview(&l, |t| t.transpose(d as i64, last)).map_err(err(span))?);
        self.torch("contiguous", &A::new(vec![back], vec![], span, "contiguous".into()), true)
    }

    fn logsumexp(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let dims = a.dims(1, "dim")?.unwrap_or_default();
        let keep = a.bool_or(2, "keepdim", false)?;
        if x.shape.contains(&0) {
            // No max to subtract, as in the reference: the log of an empty sum is -inf.
            let FV::Tensor(e) = self.unary(ops::Unary::Exp, &FV::Tensor(x), span)? else { unreachable!() };
            let s = self.reduce_op(OpName::Sum, &e, &dims, keep, None, span)?;
            return self.unary(ops::Unary::Log, &s, span);
        }
        let m = self.reduce_op(OpName::Amax, &x, &dims, true, None, span)?;
        // An infinite maximum is replaced by 0, as PyTorch does, so that inf - inf never appears.
        let inf = self.unary(ops::Unary::Abs, &m, span)?;
        let is_inf = self.elementwise(Binary::Eq, &[inf, FV::Float(f64::INFINITY)], span)?;
        let m = self.torch("where", &A::new(vec![is_inf, FV::Float(0.0), m], vec![], span, "where".into()), false)?;
        let d = self.elementwise(Binary::Sub, &[FV::Tensor(x), m.clone()], span)?;
        let e = self.unary(ops::Unary::Exp, &d, span)?;
        let FV::Tensor(e) = e else { unreachable!() };
        let s = self.reduce_op(OpName::Sum, &e, &dims, true, None, span)?;
        let l = self.unary(ops::Unary::Log, &s, span)?;
        let r = self.elementwise(Binary::Add, &[l, m], span)?;
        if keep {
            return Ok(r);
        }
        let FV::Tensor(r) = r else { unreachable!() };
        let sq: Option<Vec<i64>> = if dims.is_empty() { None } else { Some(dims.clone()) };
        let v = self
            .tview(&r, |t| t.squeeze(Some(sq.as_deref().unwrap_or(&(0..t.dim() as i64).collect::<Vec<_>>()))))
            .map_err(err(span))?;
        Ok(FV::Tensor(v))
    }

    /// `flip`: a view with the flipped dims' strides negated, read into a fresh tensor.
    fn flip(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let mut v = x.clone();
        for d in a.sizes(1, "dims")? {
            let d = crate::tensor::views::wrap_dim(d, x.shape.len()).map_err(err(span))?;
            let n = v.shape.get(d).copied().unwrap_or(1);
            if n > 1 {
                v = super::views::each_view(&v, &|v| {
                    v.off = v.off.add(&Affine::constant((n as i64 - 1) * v.strides[d] as i64));
                    v.strides[d] = -v.strides[d];
                });
            }
        }
        let r = self.read(&v, span)?;
        Ok(FV::Tensor(self.fresh(r, None, span)?))
    }

    /// `roll`: per shifted dim, the two narrowed parts concatenated in swapped order.
    /// `diff`, as the reference computes it (`interp::extra_ops::diff`): views of the input (after `prepend` and
    /// `append`) one step apart, subtracted (compared, for bools), `n` times.
    fn diff(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let (n, d) = crate::interp::extra_ops::diff_args(x.shape.len(), a.int_or(1, "n", 1)?, a.int_or(2, "dim", -1)?)
            .map_err(err(span))?;
        let mut parts = Vec::new();
        for (i, name) in [(3, "prepend"), (99, "input"), (4, "append")] {
            match (name, a.opt(i, name)) {
                ("input", _) => parts.push(FV::Tensor(x.clone())),
                (_, Some(p @ FV::Tensor(_))) => parts.push(p.clone()),
                (_, Some(v)) => {
                    return diag(span, format!("diff(): argument '{name}' must be Tensor, not {}", v.type_name()))
                }
                (_, None) => {}
            }
        }
        let mut v = if parts.len() > 1 {
            let list = FV::List(Rc::new(std::cell::RefCell::new(parts)));
            self.torch("cat", &A::new(vec![list, FV::Int(d)], vec![], span, "cat".into()), false)?
        } else {
            FV::Tensor(x.clone())
        };
        let boolean = self.roots[x.root].dtype == DType::Bool;
        for _ in 0..n {
            let FV::Tensor(c) = v.clone() else { unreachable!("diff of a tensor") };
            let len = c.shape[d as usize] as i64;
            if len == 0 {
                break;
            }
            let hi = self.tview(&c, |t| t.narrow(d, 1, len - 1)).map_err(err(span))?;
            let lo = self.tview(&c, |t| t.narrow(d, 0, len - 1)).map_err(err(span))?;
            let op = if boolean { Binary::Ne } else { Binary::Sub };
            v = self.elementwise(op, &[FV::Tensor(hi), FV::Tensor(lo)], span)?;
        }
        if let FV::Tensor(c) = &v {
            if c.root == x.root {
                let r = self.read(c, span)?;
                return Ok(FV::Tensor(self.fresh(r, None, span)?));
            }
        }
        Ok(v)
    }

    fn roll(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let shifts = a.int_list(a.req(1, "shifts")?)?;
        let Some(dims) = a.opt(2, "dims").cloned() else {
            return diag(span, "roll() without dims is not functionalized yet");
        };
        let dims = a.int_list(&dims)?;
        let mut cur = FV::Tensor(x.clone());
        for (s, d) in shifts.iter().zip(dims) {
            let FV::Tensor(c) = cur.clone() else { unreachable!() };
            if c.shape.is_empty() {
                return diag(span, format!("Dimension specified as {d} but tensor has no dimensions"));
            }
            let d = crate::tensor::views::wrap_dim(d, c.shape.len()).map_err(err(span))? as i64;
            let n = c.shape[d as usize] as i64;
            if n == 0 {
                continue;
            }
            let s = s.rem_euclid(n);
            let p1 = self.tview(&c, |t| t.narrow(d, n - s, s)).map_err(err(span))?;
            let p2 = self.tview(&c, |t| t.narrow(d, 0, n - s)).map_err(err(span))?;
            let list = FV::List(Rc::new(std::cell::RefCell::new(vec![FV::Tensor(p1), FV::Tensor(p2)])));
            cur = self.torch("cat", &A::new(vec![list, FV::Int(d)], vec![], span, "cat".into()), false)?;
        }
        let FV::Tensor(c) = cur else { unreachable!() };
        if c.root == x.root {
            let v = self.read(&c, span)?;
            return Ok(FV::Tensor(self.fresh(v, None, span)?));
        }
        Ok(FV::Tensor(c))
    }

    /// `fill_diagonal_`'s value: a copy of the input with its main diagonal written.
    fn fill_diagonal(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let v = a.req(1, "fill_value")?.clone();
        let c = self.torch("clone", &A::new(vec![FV::Tensor(x)], vec![], span, "clone".into()), true)?;
        let FV::Tensor(c) = c else { unreachable!() };
        let d = self.tview(&c, |t| t.diagonal(0, 0, 1)).map_err(err(span))?;
        let dt = self.roots[c.root].dtype;
        let (val, _) = self.scalar_tensor(&v, Some(dt), span)?;
        self.write(&d, val, span)?;
        Ok(FV::Tensor(c))
    }

    /// `diag`: a 1-D input written on the `diagonal` of a zero matrix, or a 2-D input's diagonal read.
    fn diag_op(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let k = a.int_or(1, "diagonal", 0)?;
        let dt = self.roots[x.root].dtype;
        match x.shape.len() {
            1 => {
                let n = x.shape[0] + k.unsigned_abs() as usize;
                let z = self.full(&[n, n], dt, Scalar::I(0)).map_err(err(span))?;
                let out = self.fresh(z, None, span)?;
                let d = self.tview(&out, |t| t.diagonal(k, 0, 1)).map_err(err(span))?;
                let v = self.read(&x, span)?;
                self.write(&d, v, span)?;
                self.roots[out.root].written = false;
                Ok(FV::Tensor(out))
            }
            2 => {
                let d = self.tview(&x, |t| t.diagonal(k, 0, 1)).map_err(err(span))?;
                let v = self.read(&d, span)?;
                Ok(FV::Tensor(self.fresh(v, None, span)?))
            }
            n => diag(span, format!("diag(): Supports 1D or 2D tensors. Got {n}D")),
        }
    }

    /// `index_fill`: a copy of the input with the `index`ed slices along `dim` set to `value`.
    fn index_fill(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len()).map_err(err(span))?;
        let ix = a.tensor(2, "index")?;
        let src = a.req(3, "value")?.clone();
        let c = self.torch("clone", &A::new(vec![FV::Tensor(x)], vec![], span, "clone".into()), true)?;
        let FV::Tensor(c) = c else { unreachable!() };
        let mut idx = vec![FV::None; d];
        idx.push(FV::Tensor(ix));
        self.index_write(&c, &idx, &src, false, span)?;
        self.roots[c.root].written = false;
        Ok(FV::Tensor(c))
    }

    /// `gather`: one `gather` term along `dim`.
    fn gather(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len()).map_err(err(span))?;
        let idx = a.tensor(2, "index")?;
        crate::tensor::index::check_along_dim_index("gather", self.roots[idx.root].dtype).map_err(err(span))?;
        let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
        let it = self.term_as(&FV::Tensor(idx.clone()), self.roots[idx.root].dtype, span)?;
        let dd = self.t.leaf(Node::Int(d as i64));
        self.fresh_op(OpName::Gather, vec![xt, dd, it], None, span)
    }

    /// `take_along_dim`: both operands expanded (or flattened) as PyTorch does, then one `gather`.
    fn take_along_dim(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let (x, idx) = (a.tensor(0, "input")?, a.tensor(1, "indices")?);
        let dim = match a.opt(2, "dim") {
            None | Some(FV::None) => None,
            Some(_) => Some(a.int(2, "dim")?),
        };
        let idt = self.roots[idx.root].dtype;
        let plan = crate::interp::compat::take_along_dim_plan(&x.shape, &idx.shape, idt, dim).map_err(err(span))?;
        let (xv, iv, d) = match plan {
            Some((xs, is, d)) => (
                self.method("expand", span, vec![FV::Tensor(x), ints(&xs)])?,
                self.method("expand", span, vec![FV::Tensor(idx), ints(&is)])?,
                d,
            ),
            None => (
                self.method("reshape", span, vec![FV::Tensor(x), ints(&[-1])])?,
                self.method("reshape", span, vec![FV::Tensor(idx), ints(&[-1])])?,
                0,
            ),
        };
        // Negative indices count from the end, as PyTorch's take_along_dim wraps them (gather does not).
        let n = match &xv {
            FV::Tensor(t) => t.shape.get(d as usize).copied().unwrap_or(1) as i64,
            _ => 1,
        };
        let neg = self.elementwise(crate::tensor::ops::Binary::Lt, &[iv.clone(), FV::Int(0)], span)?;
        let wrapped = self.elementwise(crate::tensor::ops::Binary::Add, &[iv.clone(), FV::Int(n)], span)?;
        let iv = self.method("where", span, vec![neg, wrapped, iv])?;
        self.gather(&A::new(vec![xv, FV::Int(d), iv], vec![], span, "gather".into()))
    }

    /// The tensor method `op` on `pos` (the receiver first).
    pub(super) fn method(&mut self, op: &str, span: crate::diag::Span, pos: Vec<FV>) -> FR<FV> {
        self.torch(op, &A::new(pos, vec![], span, op.into()), true)
    }

    /// `scatter`/`scatter_add`: one `scatter` term along `dim`, its source a tensor or a value known now, adding where `reduce='add'`.
    fn scatter(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let dt = self.roots[x.root].dtype;
        let d = crate::tensor::views::wrap_dim(a.int(1, "dim")?, x.shape.len()).map_err(err(span))?;
        let idx = a.tensor(2, "index")?;
        crate::tensor::index::check_along_dim_index("scatter", self.roots[idx.root].dtype).map_err(err(span))?;
        let src = match a.opt(3, "src").or(a.opt(3, "value")).cloned() {
            Some(FV::Tensor(s)) => self.term_as(&FV::Tensor(s), dt, span)?,
            Some(v) => {
                let s = self
                    .full(
                        &idx.shape,
                        dt,
                        a.number(&v)
                            .ok_or_else(|| Stop::NeedsStatic(span, "a scatter value known only at run time".into()))?,
                    )
                    .map_err(err(span))?;
                self.t.at(s)
            }
            None => return diag(span, "scatter() missing argument 'src'"),
        };
        let add = name == "scatter_add" || matches!(a.opt(4, "reduce"), Some(FV::Str(s)) if s.as_ref() == "add");
        let xt = self.term_as(&FV::Tensor(x.clone()), dt, span)?;
        let it = self.term_as(&FV::Tensor(idx.clone()), self.roots[idx.root].dtype, span)?;
        let dd = self.t.leaf(Node::Int(d as i64));
        let ad = self.t.leaf(Node::Bool(crate::ir::BoolLit(add)));
        self.fresh_op(OpName::Scatter, vec![xt, dd, it, src, ad], None, span)
    }

    /// `topk`'s `k` as an integer term: a number, a loop-dependent int, or a one-element integer tensor's run-time
    /// int.
    fn topk_k(&mut self, k: &FV, span: crate::diag::Span) -> FR<egg::Id> {
        let k = match k {
            FV::Tensor(t) if self.run_time_count(k) => {
                let v = self.read(t, span)?;
                self.run_time_int(v, span)?
            }
            other => other.clone(),
        };
        match k {
            FV::Int(_) | FV::DynInt(_) => Ok(self.int_term(&k)),
            other => diag(span, format!("topk(): argument 'k' must be int, not {}", other.type_name())),
        }
    }

    /// `sort`/`argsort`/`topk`: `sortval`/`sortidx` terms along `dim` that order ties as PyTorch's kernel does
    /// (`tensor::ties`), narrowed to `k` for `topk`.
    fn sort(&mut self, name: &str, a: &A) -> FR<FV> {
        use crate::tensor::ties::Ties;
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let (dim, desc, ties) = if name == "topk" {
            let sorted = a.bool_or(4, "sorted", true)?;
            (a.int_or(2, "dim", -1)?, a.bool_or(3, "largest", true)?, Ties::TopK { k: 0, sorted })
        } else {
            let stable = a.bool_or(99, "stable", false)?;
            let keyword = a.kw.iter().any(|(k, _)| k == "stable");
            crate::interp::extra_ops::stable_keywords_only(&a.name, a.pos.len(), keyword).map_err(err(span))?;
            let ties = if stable { Ties::Stable } else { Ties::Sort };
            (a.int_or(1, "dim", -1)?, a.bool_or(2, "descending", false)?, ties)
        };
        let d = crate::tensor::views::wrap_dim(dim, x.shape.len()).map_err(err(span))?;
        // Lines the input does not move along (an expanded dim) come out in order from PyTorch's sort.
        let ties = if ties == Ties::Sort && !x.shape.is_empty() && x.strides[d] == 0 { Ties::Stable } else { ties };
        let xt = self.term_as(&FV::Tensor(x.clone()), self.roots[x.root].dtype, span)?;
        let dd = self.t.leaf(Node::Int(d as i64));
        let de = self.t.leaf(Node::Bool(crate::ir::BoolLit(desc)));
        let mode = self.t.leaf(Node::Int(ties.code().0));
        let k = match name {
            "topk" => self.topk_k(&a.req(1, "k")?.clone(), span)?,
            _ => self.t.leaf(Node::Int(0)),
        };
        let v = self.fresh_op(OpName::SortVal, vec![xt, dd, de, mode, k], None, span)?;
        let i = self.fresh_op(OpName::SortIdx, vec![xt, dd, de, mode, k], None, span)?;
        if name == "argsort" {
            return Ok(i);
        }
        let (v, i) = if name == "topk" {
            let k = a.req(1, "k")?;
            if self.run_time_count(k) {
                return self.topk_run_time(&x.shape, d, &v, &i, &k.clone(), span);
            }
            let k = a.int(1, "k")?;
            if k < 0 || (!x.shape.is_empty() && k as usize > x.shape[d]) {
                return diag(span, "selected index k out of range");
            }
            let (FV::Tensor(vt), FV::Tensor(itr)) = (&v, &i) else { unreachable!() };
            let vn = self.tview(vt, |t| t.narrow(d as i64, 0, k)).map_err(err(span))?;
            let inn = self.tview(itr, |t| t.narrow(d as i64, 0, k)).map_err(err(span))?;
            let (vv, iv) = (self.read(&vn, span)?, self.read(&inn, span)?);
            (FV::Tensor(self.fresh(vv, None, span)?), FV::Tensor(self.fresh(iv, None, span)?))
        } else {
            (v, i)
        };
        Ok(FV::Named(Rc::new(vec![v, i]), &["values", "indices"]))
    }

    pub(super) fn creation(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        if name == "Tensor" {
            let seq = matches!(a.pos.first(), Some(FV::List(_) | FV::Tuple(_)));
            crate::interp::creation::legacy_tensor_check(a.pos.len(), seq, a.kw.len()).map_err(err(a.span))?;
            let b = A::new(vec![a.pos[0].clone(), FV::DType(DType::F32)], vec![], a.span, "Tensor".into());
            return self.creation("tensor", &b, false);
        }
        match name {
            "zeros" | "ones" | "empty" | "full" | "new_zeros" | "new_ones" | "new_empty" | "new_full" => {
                self.filled(name, a, method)
            }
            // The legacy `x.new(2, 3)` (uninitialized: zeros here), `x.new([data])` and `x.new()` (no elements).
            "new" if method => {
                let kind = |i: usize| match &a.pos[i] {
                    FV::List(_) => Some(true),
                    FV::Tuple(_) | FV::Tensor(_) => None,
                    _ => Some(false),
                };
                crate::tensor::legacy_new_check(a.kw.len(), a.pos.len(), kind).map_err(err(a.span))?;
                match a.pos.get(1) {
                    Some(FV::List(_)) => self.desugared("new_tensor", a, true),
                    None => {
                        let b = A::new(vec![a.pos[0].clone(), FV::Int(0)], vec![], a.span, "new".into());
                        self.filled("new_empty", &b, true)
                    }
                    Some(_) => self.filled("new_empty", a, true),
                }
            }
            "scalar_tensor" if !method => self.scalar_tensor_of(a),
            "zeros_like" | "ones_like" | "empty_like" | "full_like" => self.filled_like(name, a),
            "arange" => self.arange(a),
            "range" => self.torch_range(a),
            "tensor" | "as_tensor" => self.tensor_of(a),
            "meshgrid" => self.meshgrid(a),
            "linspace" => self.linspace(name, a),
            "eye" => self.eye(name, a),
            _ => self.desugared(name, a, method),
        }
    }

    /// `zeros`/`ones`/`empty`/`full` and their `new_` methods: a tensor of one value (`empty` is zeros).
    fn filled(&mut self, name: &str, a: &A, method: bool) -> FR<FV> {
        let span = a.span;
        let is_new = name.starts_with("new_");
        if method && !is_new {
            return diag(span, format!("unsupported tensor method `.{name}()`"));
        }
        let base = if is_new { 1 } else { 0 };
        let full = name.ends_with("full");
        let (sizes, value) = if full {
            let v = a.req(base + 1, "fill_value")?.clone();
            if let Some(r) = self.full_of_tensor(name, a, base, &v)? {
                return Ok(r);
            }
            let v =
                a.number(&v).ok_or_else(|| Stop::NeedsStatic(span, "a fill value known only at run time".into()))?;
            (a.int_list(a.req(base, "size")?)?, v)
        } else {
            (a.sizes(base, "size")?, Scalar::I(if name.ends_with("ones") { 1 } else { 0 }))
        };
        let default = if is_new {
            self.roots[a.tensor(0, "self")?.root].dtype
        } else if full {
            value.default_dtype()
        } else {
            DType::F32
        };
        let dt = a.dtype(99, "dtype")?.unwrap_or(default);
        let shape = crate::interp::creation::shape_of(name, &sizes).map_err(err(span))?;
        let r = self.full(&shape, dt, value).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, None, span)?))
    }

    /// `full`/`new_full` with a 0-dim tensor as the fill value (`pad_token_id or eos_token_id[0]`): its value
    /// broadcast to the size, where converting it to the dtype cannot overflow (PyTorch checks that on the value);
    /// `None` where the fill value is not a 0-dim tensor.
    fn full_of_tensor(&mut self, name: &str, a: &A, base: usize, v: &FV) -> FR<Option<FV>> {
        let span = a.span;
        let FV::Tensor(t) = v else { return Ok(None) };
        if !t.shape.is_empty() {
            return Ok(None);
        }
        let td = self.roots[t.root].dtype;
        let default = match (base, td) {
            (1, _) => self.roots[a.tensor(0, "self")?.root].dtype,
            (_, d) if d.is_float() => DType::F32,
            (_, DType::Bool) => DType::Bool,
            _ => DType::I64,
        };
        let dt = a.dtype(99, "dtype")?.unwrap_or(default);
        // Every value of the fill's dtype converts without overflow: the same dtype, a bool, anything into f64, an
        // integer or a narrower float into f32 or bf16 (YOLOv6's `torch.full(size, stride, dtype=torch.float)` with
        // `stride` an int64 element: at most 9.3e18).
        let fits = td == dt
            || td == DType::Bool
            || dt == DType::F64
            || (matches!(dt, DType::F32 | DType::BF16) && !matches!(td, DType::F64 | DType::F32));
        if !fits {
            return Err(Stop::NeedsStatic(
                span,
                "a fill value known only at run time that could overflow its dtype".into(),
            ));
        }
        let sizes = a.int_list(a.req(base, "size")?)?;
        let shape = crate::interp::creation::shape_of(name, &sizes).map_err(err(span))?;
        let dims = ints(&shape.iter().map(|&d| d as i64).collect::<Vec<_>>());
        let c = self.method("to", span, vec![v.clone(), FV::DType(dt)])?;
        let e = self.method("expand", span, vec![c, dims])?;
        Ok(Some(self.method("clone", span, vec![e])?))
    }

    /// `torch.scalar_tensor`: a 0-dim tensor of a number, float32 unless `dtype=` says otherwise.
    fn scalar_tensor_of(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        // As the reference interpreter: `torch.full((), s)` in float32 unless `dtype=` says otherwise.
        let v = a.req(0, "s")?.clone();
        let s = match &v {
            FV::Tensor(x) if x.shape.is_empty() => {
                return diag(span, "torch.scalar_tensor of a tensor is not supported; use x.to(dtype)")
            }
            FV::Tensor(_) | FV::Str(_) | FV::None => {
                return diag(
                    span,
                    format!("scalar_tensor(): argument 's' (position 1) must be Number, not {}", v.type_name()),
                )
            }
            _ => {
                let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
                // A value known at run time converts without PyTorch's overflow check only where it cannot
                // overflow and rounds once: a number into float64, a bool into any dtype.
                let exact = match &v {
                    FV::DynFloat(_) | FV::DynInt(_) => dt == DType::F64,
                    FV::DynBool(_) => true,
                    _ => false,
                };
                if exact {
                    let (r, _) = self.scalar_tensor(&v, Some(dt), span)?;
                    return Ok(FV::Tensor(self.fresh(r, None, span)?));
                }
                a.number(&v).ok_or_else(|| {
                    Stop::NeedsStatic(
                        span,
                        "a scalar_tensor value known only at run time that could overflow its dtype".into(),
                    )
                })?
            }
        };
        let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
        let r = self.full(&[], dt, s).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, None, span)?))
    }

    /// `zeros_like`/`ones_like`/`empty_like`/`full_like`: a tensor of one value in the input's shape and layout.
    fn filled_like(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let value = match name {
            "ones_like" => Scalar::I(1),
            "full_like" => a
                .number(a.req(1, "fill_value")?)
                .ok_or_else(|| Stop::NeedsStatic(span, "a fill value known only at run time".into()))?,
            _ => Scalar::I(0),
        };
        let dt = a.dtype(99, "dtype")?.unwrap_or(self.roots[x.root].dtype);
        let r = self.full(&x.shape, dt, value).map_err(err(span))?;
        Ok(FV::Tensor(self.fresh(r, Some(&x), span)?))
    }

    /// `tensor`/`as_tensor`: a copy of a tensor, constant data, or the concatenation of numbers known at run time.
    fn tensor_of(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let v = a.req(0, "data")?.clone();
        if let FV::Tensor(t) = &v {
            let x = self.read(t, span)?;
            let dt = a.dtype(1, "dtype")?.unwrap_or(self.roots[t.root].dtype);
            let x = self.cast(x, dt, span)?;
            return Ok(FV::Tensor(self.fresh(x, None, span)?));
        }
        let mut shape = Vec::new();
        let mut flat = Vec::new();
        flatten_fv(&v, &mut shape, 0, &mut flat).map_err(err(span))?;
        let statics: Option<Vec<Scalar>> = flat.iter().map(|x| a.number(x)).collect();
        let mut kind = DataKind::default();
        for x in &flat {
            match x {
                FV::Tensor(t) => kind.add(self.roots[t.root].dtype, true),
                FV::Bool(_) | FV::DynBool(_) => kind.add(DType::Bool, false),
                FV::Int(_) | FV::DynInt(_) => kind.add(DType::I64, false),
                _ => kind.add(DType::F32, false),
            }
        }
        let dt = kind.resolve(a.dtype(1, "dtype")?).map_err(err(span))?;
        if let Some(vals) = statics {
            check_int_data(dt, &vals).map_err(err(span))?;
            return self.const_data(dt, &shape, &vals, span);
        }
        let mut parts = vec![self.t.leaf(Node::Int(0))];
        for x in &flat {
            // PyTorch checks that an integer fits a narrower integer dtype, which only the data can tell.
            let from = match x {
                FV::Tensor(t) => self.roots[t.root].dtype,
                FV::DynInt(_) => DType::I64,
                _ => DType::Bool,
            };
            if !int_fits(from, dt) {
                return needs_static(
                    span,
                    format!(
                        "an integer known only at run time stored as {}, which PyTorch checks for overflow",
                        dt.torch_name().trim_start_matches("torch.")
                    ),
                );
            }
            let t = match x {
                FV::Tensor(t) => {
                    let v = self.read(t, span)?;
                    self.cast(v, dt, span)?
                }
                _ => self.scalar_tensor(x, Some(dt), span)?.0,
            };
            let t = self.reshape_value(t, &[1], span)?;
            parts.push(self.t.at(t));
        }
        let c = self.t.op(OpName::Cat, parts).map_err(err(span))?;
        let c = self.reshape_value(c, &shape, span)?;
        Ok(FV::Tensor(self.fresh(c, None, span)?))
    }

    /// `meshgrid`: each input viewed along its own dim and expanded to the grid (`indexing='ij'` unless `'xy'`).
    fn meshgrid(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let ts: Vec<TRef> = if a.pos.len() == 1 && a.pos[0].items().is_some() {
            a.pos[0]
                .items()
                .unwrap_or_default()
                .into_iter()
                .filter_map(|v| if let FV::Tensor(t) = v { Some(t) } else { None })
                .collect()
        } else {
            a.pos.iter().filter_map(|v| if let FV::Tensor(t) = v { Some(t.clone()) } else { None }).collect()
        };
        let ij = !matches!(a.opt(99, "indexing"), Some(FV::Str(s)) if s.as_ref() == "xy");
        let numels: Vec<usize> = ts.iter().map(|t| t.shape.iter().product()).collect();
        let (views, sizes) = crate::tensor::views::meshgrid_shapes(&numels, ij);
        let mut out = Vec::new();
        for (x, shape) in ts.iter().zip(views) {
            let v = self.tview(x, |d| d.view(&shape)?.expand(&sizes)).map_err(err(span))?;
            out.push(FV::Tensor(v));
        }
        Ok(FV::Tuple(Rc::new(out)))
    }

    /// `linspace`: constant data, each half computed from its own end as PyTorch does.
    fn linspace(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let s = a
            .number(a.req(0, "start")?)
            .ok_or_else(|| Stop::NeedsStatic(span, "linspace bounds known only at run time".into()))?
            .to_f64();
        let e = a
            .number(a.req(1, "end")?)
            .ok_or_else(|| Stop::NeedsStatic(span, "linspace bounds known only at run time".into()))?
            .to_f64();
        let n = count_arg(name, "steps", a.int(2, "steps")?).map_err(err(span))?;
        let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
        let vals: Vec<Scalar> = crate::interp::creation::linspace_values(s, e, n).into_iter().map(Scalar::F).collect();
        self.const_data(dt, &[n], &vals, span)
    }

    /// `eye`: constant data of an `n` by `m` identity.
    fn eye(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let n = count_arg(name, "n", a.int(0, "n")?).map_err(err(span))?;
        let m = match a.opt_int(1, "m")? {
            Some(m) => count_arg(name, "m", m).map_err(err(span))?,
            None => n,
        };
        let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
        let vals: Vec<Scalar> = (0..n * m).map(|k| Scalar::I((k / m.max(1) == k % m.max(1)) as i64)).collect();
        self.const_data(dt, &[n, m], &vals, span)
    }
}

impl A {
    fn int_list(&self, v: &FV) -> FR<Vec<i64>> {
        match v.items() {
            Some(items) => items.iter().map(|x| self.int_of(x, "size")).collect(),
            None => Ok(vec![self.int_of(v, "size")?]),
        }
    }
}

fn flatten_fv(v: &FV, shape: &mut Vec<usize>, depth: usize, out: &mut Vec<FV>) -> Result<(), String> {
    match v {
        FV::List(_) | FV::Tuple(_) | FV::Range(..) => {
            let items = match v {
                FV::Range(a, b, s) => crate::interp::value::range_values(*a, *b, *s).into_iter().map(FV::Int).collect(),
                _ => v.items().unwrap_or_default(),
            };
            crate::interp::torch_ops::nested_len(shape, depth, items.len())?;
            for it in &items {
                flatten_fv(it, shape, depth + 1, out)?;
            }
            Ok(())
        }
        other => {
            if depth < shape.len() {
                return Err(format!("expected sequence at dim {depth}"));
            }
            if let FV::Tensor(t) = other {
                if t.shape.iter().product::<usize>() != 1 {
                    return Err("only one element tensors can be converted to Python scalars".into());
                }
            }
            out.push(other.clone());
            Ok(())
        }
    }
}

/// Whether every value of integer dtype `from` fits `to` as `torch.tensor` checks it (see [`check_int_data`]).
fn int_fits(from: DType, to: DType) -> bool {
    use DType::*;
    match to {
        U8 => matches!(from, Bool | U8 | I8),
        I8 => matches!(from, Bool | I8),
        I16 => matches!(from, Bool | U8 | I8 | I16),
        I32 => matches!(from, Bool | U8 | I8 | I16 | I32),
        _ => true,
    }
}
