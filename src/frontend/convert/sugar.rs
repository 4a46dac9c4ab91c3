//! Python sugar the converter rewrites into the subset: `lambda` (a top-level helper) and `try` (its body, where
//! that is sound).

use ruff_python_ast as py;

use super::Cx;
use crate::diag::{err, Diagnostic, Span};
use crate::frontend::ast::*;

/// Python builtins a `try` body may call (none raises `NotImplementedError`).
const PY_BUILTINS: &[&str] = &[
    "len",
    "range",
    "int",
    "float",
    "bool",
    "min",
    "max",
    "abs",
    "sum",
    "enumerate",
    "zip",
    "map",
    "list",
    "tuple",
    "round",
    "isinstance",
    "type",
    "reversed",
    "sorted",
    "any",
    "all",
    "divmod",
    "pow",
    "str",
];

/// Calls `f` on every statement of `body`, nested ones included.
pub(super) fn visit_stmts<'a>(body: &'a [Stmt], f: &mut dyn FnMut(&'a Stmt)) {
    for s in body {
        f(s);
        match &s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => visit_stmts(body, f),
            StmtKind::If { body, orelse, .. } => {
                visit_stmts(body, f);
                visit_stmts(orelse, f);
            }
            _ => {}
        }
    }
}

/// In a loop's body, each `break` of that loop (not of a loop inside it) preceded by `set` (see [`Cx::loop_else`]).
fn mark_breaks(body: &mut Vec<Stmt>, set: &Stmt) {
    let mut i = 0;
    while i < body.len() {
        match &mut body[i].kind {
            StmtKind::Break => {
                body.insert(i, set.clone());
                i += 1;
            }
            StmtKind::If { body: yes, orelse: no, .. } => {
                mark_breaks(yes, set);
                mark_breaks(no, set);
            }
            _ => {}
        }
        i += 1;
    }
}

impl Cx {
    /// `for T in I: BODY else: ELSE` (or `while`): a flag named for the loop's place, false before it and set where
    /// BODY breaks out of it, then `if not FLAG: ELSE`, which is when Python runs ELSE. `None` for another statement.
    pub(super) fn loop_else(&self, s: &py::Stmt) -> Option<Result<Vec<Stmt>, Diagnostic>> {
        let orelse = match s {
            py::Stmt::For(f) if !f.orelse.is_empty() && !f.is_async => &f.orelse,
            py::Stmt::While(w) if !w.orelse.is_empty() => &w.orelse,
            _ => return None,
        };
        let span = self.sp(s);
        let flag = format!("<broke@{}:{}>", span.line, span.col);
        let name = || Expr { kind: ExprKind::Name(flag.clone()), span };
        let set = |b: bool| {
            let value = Expr { kind: ExprKind::Bool(b), span };
            Stmt { kind: StmtKind::Assign { targets: vec![name()], value }, span }
        };
        let converted = (|| {
            let mut looped = match s {
                py::Stmt::For(f) => StmtKind::For {
                    target: self.expr(&f.target)?,
                    iter: self.expr(&f.iter)?,
                    body: self.block(&f.body)?,
                },
                py::Stmt::While(w) => StmtKind::While { test: self.expr(&w.test)?, body: self.block(&w.body)? },
                _ => unreachable!("a loop"),
            };
            if let StmtKind::For { body, .. } | StmtKind::While { body, .. } = &mut looped {
                mark_breaks(body, &set(true));
            }
            let test = Expr { kind: ExprKind::Unary(UnaryOp::Not, Box::new(name())), span };
            let after = StmtKind::If { test, body: self.block(orelse)?, orelse: vec![] };
            Ok(vec![set(false), Stmt { kind: looped, span }, Stmt { kind: after, span }])
        })();
        Some(converted)
    }

    /// `lambda PARAMS: BODY`: a top-level helper `def _<lambda>@LINE:COL(PARAMS): return BODY`, named by the lambda
    /// expression.
    pub(super) fn lambda(&self, l: &py::ExprLambda, span: Span) -> Result<ExprKind, Diagnostic> {
        let params = match &l.parameters {
            Some(p) => {
                if let Some(v) = &p.vararg {
                    return err(self.sp(v.as_ref()), "`*args` parameters are not supported");
                }
                if let Some(v) = &p.kwarg {
                    return err(self.sp(v.as_ref()), "`**kwargs` parameters are not supported");
                }
                self.params(p)?
            }
            None => Vec::new(),
        };
        let body = self.expr(&l.body)?;
        let name = format!("_<lambda>@{}:{}", span.line, span.col);
        let ret = Stmt { span: body.span, kind: StmtKind::Return(Some(body)) };
        self.lambdas.borrow_mut().push(Function {
            name: name.clone(),
            params,
            vararg: None,
            kwarg: None,
            returns: None,
            body: vec![ret],
            span,
        });
        if !self.in_def.get() {
            return Ok(ExprKind::Name(name));
        }
        // In a function: `<closure>(HELPER)`, whose captures `lambdas::close_lambdas` fills in (or which it turns
        // back into the helper's name when the lambda reads no local).
        let name_expr = |n: &str| Expr { kind: ExprKind::Name(n.to_string()), span };
        Ok(ExprKind::Call { func: Box::new(name_expr(MAKE_CLOSURE)), args: vec![name_expr(&name)], kwargs: vec![] })
    }

    /// `with E as V: BODY` on a context manager of the program (a class with `__enter__` and `__exit__`): the
    /// manager is bound to a name of its place, `V = M.__enter__()`, then BODY, then `M.__exit__(None, None, None)`;
    /// several items nest, exited in reverse. An error in BODY fails the program (Python would hand it to
    /// `__exit__`, which may suppress it), and a BODY that leaves the block early is refused, as for `try: ...
    /// finally:` (the `__exit__` would run first).
    pub(super) fn with_block(&self, w: &py::StmtWith) -> Result<Vec<Stmt>, Diagnostic> {
        let span = self.sp(w);
        let call = |func: Expr, args: Vec<Expr>| Expr {
            kind: ExprKind::Call { func: Box::new(func), args, kwargs: vec![] },
            span,
        };
        let method = |m: &Expr, name: &str| Expr { kind: ExprKind::Attr(Box::new(m.clone()), name.into()), span };
        let mut out = Vec::new();
        let mut managers = Vec::new();
        for (k, item) in w.items.iter().enumerate() {
            let m = Expr { kind: ExprKind::Name(format!("<with@{}:{}#{k}>", span.line, span.col)), span };
            let value = self.expr(&item.context_expr)?;
            out.push(Stmt { kind: StmtKind::Assign { targets: vec![m.clone()], value }, span });
            let entered = call(method(&m, "__enter__"), vec![]);
            out.push(Stmt {
                kind: match &item.optional_vars {
                    Some(v) => StmtKind::Assign { targets: vec![self.expr(v)?], value: entered },
                    None => StmtKind::Expr(entered),
                },
                span,
            });
            managers.push(m);
        }
        let body = self.block(&w.body)?;
        if let Some(at) = leaves_block(&body, false) {
            return err(at, "`return`, `break` and `continue` that leave a `with` block are not supported (its `__exit__` would run first)");
        }
        out.extend(body);
        for m in managers.iter().rev() {
            let none = || Expr { kind: ExprKind::NoneLit, span };
            out.push(Stmt { kind: StmtKind::Expr(call(method(m, "__exit__"), vec![none(), none(), none()])), span });
        }
        Ok(out)
    }

    /// `try: BODY except NotImplementedError: HANDLER [else: ELSE] [finally: FINALLY]` is `BODY ELSE FINALLY` when
    /// BODY cannot raise what the handlers catch. Decidably so only for `NotImplementedError` (which the ops run
    /// here never raise on the CPU: an op without a kernel is refused before the program runs) around a body with
    /// no `raise` and no call of a function of the program (which could raise it).
    ///
    /// `try: BODY except ERRORS: HANDLER [finally: FINALLY]` for other errors (`ZeroDivisionError`, as optimizers
    /// guard a ratio of step counts; a bare `except:`, which catches any `Exception`, around DAdaptation's
    /// `torch.distributed.get_rank()`) becomes `if <try>(...): BODY else: HANDLER` then FINALLY (see
    /// [`crate::frontend::ast::TRY_MARKER`]): the engines catch the error where BODY raises it (the functionalizer
    /// only where BODY computes nothing with tensors, so that its errors are known before the program runs).
    pub(super) fn try_body(&self, t: &py::StmtTry) -> Result<Vec<Stmt>, Diagnostic> {
        let span = self.sp(t);
        if t.is_star {
            return err(span, "`try`/`except*` is not supported");
        }
        let mut caught: Vec<(String, Span)> = Vec::new();
        for h in &t.handlers {
            let py::ExceptHandler::ExceptHandler(h) = h;
            let names: Vec<&py::Expr> = match h.type_.as_deref() {
                Some(py::Expr::Tuple(tu)) => tu.elts.iter().collect(),
                Some(e) => vec![e],
                None => {
                    caught.push(("Exception".into(), self.sp(h)));
                    continue;
                }
            };
            for n in names {
                match n {
                    py::Expr::Name(x) => caught.push((x.id.to_string(), self.sp(n))),
                    _ => return err(self.sp(n), "`except` takes the name of an error class here"),
                }
            }
        }
        let not_implemented = |c: &str| c == "NotImplementedError";
        if !caught.is_empty() && !caught.iter().any(|(c, _)| not_implemented(c)) {
            return self.caught_try(t, caught.iter().map(|(c, _)| c.clone()).collect());
        }
        if let Some((_, at)) = caught.iter().find(|(c, _)| !not_implemented(c)) {
            return err(*at, "a `try` may catch `NotImplementedError` or other errors, not both");
        }
        let mut body = self.block(&t.body)?;
        if caught.is_empty() {
            // `try: BODY finally: FINALLY` catches nothing: an error in BODY fails the program either way, and
            // FINALLY runs after BODY unless BODY leaves the `try` early, which would run FINALLY first.
            if let Some(at) = leaves_block(&body, false) {
                return err(at, "`return`, `break` and `continue` that leave a `try: ... finally:` are not supported (the `finally` block would run first)");
            }
            body.extend(self.block(&t.orelse)?);
            body.extend(self.block(&t.finalbody)?);
            return Ok(body);
        }
        let mut bad = None;
        visit_stmts(&body, &mut |s| {
            if bad.is_none() && matches!(s.kind, StmtKind::Raise(_)) {
                bad = Some((s.span, "a `raise`".to_string()));
            }
        });
        visit_exprs(&body, &mut |e| {
            if let ExprKind::Call { func, .. } = &e.kind {
                if let ExprKind::Name(n) = &func.kind {
                    if bad.is_none() && !PY_BUILTINS.contains(&n.as_str()) {
                        bad = Some((e.span, format!("a call of `{n}`")));
                    }
                }
            }
        });
        if let Some((at, what)) = bad {
            return err(
                at,
                format!("`try` is supported only around a body that cannot raise what it catches; this one has {what}, which could"),
            );
        }
        body.extend(self.block(&t.orelse)?);
        body.extend(self.block(&t.finalbody)?);
        Ok(body)
    }

    /// `try: BODY except ERRORS: HANDLER [finally: FINALLY]` as the `if` the engines run as a `try`.
    fn caught_try(&self, t: &py::StmtTry, caught: Vec<String>) -> Result<Vec<Stmt>, Diagnostic> {
        let span = self.sp(t);
        if t.handlers.len() != 1 {
            return err(span, "`try` with more than one `except` clause is not supported");
        }
        let py::ExceptHandler::ExceptHandler(h) = &t.handlers[0];
        if h.name.is_some() {
            return err(self.sp(h), "`except ... as NAME` is not supported");
        }
        if !t.orelse.is_empty() {
            return err(span, "`try` with an `else:` clause is not supported (move it to the end of the body)");
        }
        let body = self.block(&t.body)?;
        let handler = self.block(&h.body)?;
        let mut exits = None;
        for b in [&body, &handler] {
            visit_stmts(b, &mut |s| {
                if exits.is_none() && matches!(s.kind, StmtKind::Return(_) | StmtKind::Break | StmtKind::Continue) {
                    exits = Some(s.span);
                }
            });
        }
        if let Some(at) = exits {
            return err(at, "`return`, `break` and `continue` inside a `try` are not supported");
        }
        let marker = Expr { kind: ExprKind::Name(crate::frontend::ast::TRY_MARKER.into()), span };
        let finally = (!t.finalbody.is_empty()).then(|| crate::frontend::ast::FINALLY_MARK.to_string());
        let args = caught.into_iter().chain(finally).map(|c| Expr { kind: ExprKind::Str(c), span }).collect();
        let test = Expr { kind: ExprKind::Call { func: Box::new(marker), args, kwargs: vec![] }, span };
        let mut out = vec![Stmt { kind: StmtKind::If { test, body, orelse: handler }, span }];
        out.extend(self.block(&t.finalbody)?);
        Ok(out)
    }
}

/// Whether a generator expression passed as the one argument (of `nargs`) of a call of `func` is consumed at once,
/// in order and to the end, so that a list comprehension computes the same: `tuple`, `list`, `sum`, `min`, `max`,
/// `sorted` (not `torch.cat`/`torch.stack`, which raise on a generator). `any` and `all` stop at the first item that
/// decides them, which a list computes the same value as where evaluating the rest has no effect: they are taken
/// when the items call nothing ([`calls_nothing`], checked on the comprehension).
pub(super) fn consumes_generator(func: &py::Expr, nargs: usize) -> bool {
    let py::Expr::Name(n) = func else { return false };
    nargs == 1 && matches!(n.id.as_str(), "tuple" | "list" | "sum" | "min" | "max" | "sorted" | "any" | "all")
}

/// Whether `func` stops consuming its generator early (`any`, `all`).
pub(super) fn stops_early(func: &py::Expr) -> bool {
    matches!(func, py::Expr::Name(n) if matches!(n.id.as_str(), "any" | "all"))
}

/// Whether a converted comprehension's items, conditions and iterables call nothing with an effect, so that
/// computing every item computes what stopping at the deciding one does: `isinstance` and the other builtins of
/// [`PURE_BUILTINS`], functions of `torch` (also under an alias, `th`), `F` and `math` but those that draw random numbers
/// or write an `out=`, and methods (not in place, not of a list or dict) of what such a call returns (improved-
/// diffusion's `any(not th.isfinite(p.grad).all() for p in params)`). A function or method of the program is never
/// taken: it may have effects. Evaluating the rest may raise where Python would have stopped (a refusal, not a wrong
/// value).
pub(super) fn calls_nothing(e: &Expr, torch: &[String]) -> bool {
    let mut effects = false;
    visit_expr(e, &mut |x| {
        if let ExprKind::Call { .. } = &x.kind {
            effects |= !pure_call(x, torch);
        }
    });
    !effects
}

/// The builtins that have no effect on what they are given.
const PURE_BUILTINS: &[&str] = &["isinstance", "len", "abs", "float", "int", "bool", "round", "min", "max", "sum"];

/// Whether `call` (a call expression) is one [`calls_nothing`] takes.
fn pure_call(call: &Expr, torch: &[String]) -> bool {
    let ExprKind::Call { func, kwargs, .. } = &call.kind else { return false };
    if kwargs.iter().any(|(k, _)| matches!(k.as_str(), "out" | "generator")) {
        return false;
    }
    let random = |name: &str| {
        [
            "rand",
            "normal",
            "bernoulli",
            "multinomial",
            "seed",
            "poisson",
            "exponential",
            "cauchy",
            "geometric",
            "uniform",
        ]
        .iter()
        .any(|r| name.contains(r))
    };
    match &func.kind {
        ExprKind::Name(n) => PURE_BUILTINS.contains(&n.as_str()),
        ExprKind::Attr(base, m) => {
            if m.ends_with('_') || random(m) {
                return false;
            }
            // A module's function: `torch.isfinite`, `torch.linalg.norm`, `F.relu`, `math.sqrt`.
            let mut root = base.as_ref();
            while let ExprKind::Attr(b, _) = &root.kind {
                root = b;
            }
            match &root.kind {
                ExprKind::Name(n) => n == "torch" || n == "F" || n == "math" || torch.iter().any(|t| t == n),
                // A method of what a taken call returns: a fresh value, not the program's.
                ExprKind::Call { .. } => pure_call(root, torch) && matches!(&base.kind, ExprKind::Call { .. }),
                _ => false,
            }
        }
        _ => false,
    }
}

impl Cx {
    /// A generator expression that its call consumes at once (see [`consumes_generator`]): a list comprehension.
    pub(super) fn generator(&self, g: &py::ExprGenerator) -> Result<Expr, Diagnostic> {
        let span = self.sp(g);
        Ok(Expr { kind: self.comprehension(&g.elt, &g.generators, span)?, span })
    }

    /// `[ELT for TARGET in ITER if COND...]` with a single `for`.
    pub(super) fn comprehension(
        &self,
        elt: &py::Expr,
        gens: &[py::Comprehension],
        span: Span,
    ) -> Result<ExprKind, Diagnostic> {
        if gens.iter().any(|g| g.is_async) {
            return err(span, "async comprehensions are not supported");
        }
        if gens.len() > 1 {
            // `[e for a in A if c for b in B(a)]` is the lists `[e for b in B(a)]` for each `a`, joined in order:
            // `sum([[e for b in B(a)] for a in A if c], [])`.
            let inner = Expr { kind: self.comprehension(elt, &gens[1..], span)?, span };
            let g = &gens[0];
            let outer = ExprKind::ListComp {
                elt: Box::new(inner),
                target: Box::new(self.expr(&g.target)?),
                iter: Box::new(self.expr(&g.iter)?),
                conds: g.ifs.iter().map(|c| self.expr(c)).collect::<Result<_, _>>()?,
            };
            return Ok(ExprKind::Call {
                func: Box::new(Expr { kind: ExprKind::Name("sum".into()), span }),
                args: vec![Expr { kind: outer, span }, Expr { kind: ExprKind::List(vec![]), span }],
                kwargs: vec![],
            });
        }
        let g = &gens[0];
        Ok(ExprKind::ListComp {
            elt: Box::new(self.expr(elt)?),
            target: Box::new(self.expr(&g.target)?),
            iter: Box::new(self.expr(&g.iter)?),
            conds: g.ifs.iter().map(|c| self.expr(c)).collect::<Result<_, _>>()?,
        })
    }
}

/// `NAME = A if C else B` and `return A if C else B`, outside loops, become `if C:` statements with one arm each, as
/// Python runs them (C first, then one arm). Every engine runs them alike; the functional engines can then take a
/// condition known only at run time (Hugging Face's `seq_len if seq_len > max_len else max_len` after `int(...)` of a
/// tensor) as they take an `if` on one, where as an expression it would be refused. Inside a loop the expression
/// stays: there its test may become known when the loop unrolls.
fn conditional_statements(body: &mut [Stmt]) {
    for s in body.iter_mut() {
        let span = s.span;
        let arms = |kind: &mut StmtKind| -> Option<(Expr, Expr, Expr)> {
            let value = match kind {
                StmtKind::Assign { targets, value }
                    if targets.len() == 1 && matches!(targets[0].kind, ExprKind::Name(_)) =>
                {
                    value
                }
                StmtKind::Return(Some(value)) => value,
                _ => return None,
            };
            if !matches!(value.kind, ExprKind::IfExp { .. }) {
                return None;
            }
            let ExprKind::IfExp { test, body, orelse } = std::mem::replace(&mut value.kind, ExprKind::NoneLit) else {
                unreachable!("checked")
            };
            Some((*test, *body, *orelse))
        };
        match &mut s.kind {
            StmtKind::If { body, orelse, .. } => {
                conditional_statements(body);
                conditional_statements(orelse);
            }
            kind => {
                let Some((test, a, b)) = arms(kind) else { continue };
                let with = |v: Expr| {
                    let kind = match &*kind {
                        StmtKind::Assign { targets, .. } => StmtKind::Assign { targets: targets.clone(), value: v },
                        _ => StmtKind::Return(Some(v)),
                    };
                    vec![Stmt { kind, span }]
                };
                let (mut yes, mut no) = (with(a), with(b));
                conditional_statements(&mut yes);
                conditional_statements(&mut no);
                s.kind = StmtKind::If { test, body: yes, orelse: no };
            }
        }
    }
}

/// The rewrites of this file, `distributions` and `defaultdict` on the body of a converted function.
pub(super) fn desugar(func: &mut Function) -> Result<(), Diagnostic> {
    let body = &mut func.body;
    continue_as_else(body);
    conditional_statements(body);
    super::distributions::categorical_entropy(body);
    visit_exprs_mut(body, &mut resize_new);
    dict_updates(body);
    super::defaultdict::rewrite(body)
}

/// `o.__dict__.update(d)` as a statement (minGPT's `GPTConfig(**kw)`) is `for k, v in d.items(): setattr(o, k, v)`:
/// an object is its attributes' dict here, whose other entries Python code cannot name.
fn dict_updates(body: &mut [Stmt]) {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => dict_updates(body),
            StmtKind::If { body, orelse, .. } => {
                dict_updates(body);
                dict_updates(orelse);
            }
            StmtKind::Expr(e) => {
                let ExprKind::Call { func, args, kwargs } = &e.kind else { continue };
                let ExprKind::Attr(d, m) = &func.kind else { continue };
                let ExprKind::Attr(o, dunder) = &d.kind else { continue };
                let ([src], true, "update", "__dict__") =
                    (args.as_slice(), kwargs.is_empty(), m.as_str(), dunder.as_str())
                else {
                    continue;
                };
                let span = e.span;
                let ex = |kind| Expr { kind, span };
                let (k, v) = (ex(ExprKind::Name("·k".into())), ex(ExprKind::Name("·v".into())));
                let items = ex(ExprKind::Attr(Box::new(src.clone()), "items".into()));
                let iter = ex(ExprKind::Call { func: Box::new(items), args: vec![], kwargs: vec![] });
                let set = ex(ExprKind::Call {
                    func: Box::new(ex(ExprKind::Name("setattr".into()))),
                    args: vec![(**o).clone(), k.clone(), v.clone()],
                    kwargs: vec![],
                });
                s.kind = StmtKind::For {
                    target: ex(ExprKind::Tuple(vec![k, v])),
                    iter,
                    body: vec![Stmt { kind: StmtKind::Expr(set), span }],
                };
            }
            _ => {}
        }
    }
}

/// `x.new().resize_as_(y)` (the old optimizers' state, ikostrikov/pytorch-a3c's `p.data.new().resize_as_(p.data)
/// .zero_()`) is `x.new_empty(y.shape)`: the tensor `new()` made is held by nothing else, so resizing it in place is
/// making one of `y`'s shape with `x`'s dtype, uninitialized.
fn resize_new(e: &mut Expr) {
    let ExprKind::Call { func, args, kwargs } = &mut e.kind else { return };
    let ExprKind::Attr(recv, m) = &mut func.kind else { return };
    let ([like], true, "resize_as_") = (args.as_slice(), kwargs.is_empty(), m.as_str()) else { return };
    let ExprKind::Call { func: inner, args: a, kwargs: k } = &recv.kind else { return };
    let ExprKind::Attr(x, n) = &inner.kind else { return };
    if n != "new" || !a.is_empty() || !k.is_empty() {
        return;
    }
    let span = like.span;
    let shape = Expr { kind: ExprKind::Attr(Box::new(like.clone()), "shape".into()), span };
    *func = Box::new(Expr { kind: ExprKind::Attr(x.clone(), "new_empty".into()), span: inner.span });
    *args = vec![shape];
}

/// In every loop of `body`, `if C: A; continue` followed by the rest of the loop's body R is `if C: A else: R` (the
/// `continue` skips R, which then runs only where C is false), so that an `if` on a run-time value sees both arms
/// (RetinaNet's `if bbox_annotation.shape[0] == 0: losses.append(...); continue` then `losses.append(...)`: as two
/// arms, each appends once; as a skip, the lists' lengths disagreed). Only an `if` without `else` at the top level of
/// the loop's body whose arm ends with the `continue`.
fn continue_as_else(body: &mut [Stmt]) {
    for s in body.iter_mut() {
        match &mut s.kind {
            StmtKind::For { body, .. } | StmtKind::While { body, .. } => {
                in_loop(body);
                continue_as_else(body);
            }
            StmtKind::If { body, orelse, .. } => {
                continue_as_else(body);
                continue_as_else(orelse);
            }
            _ => {}
        }
    }
}

/// [`continue_as_else`] at the top level of one loop body.
fn in_loop(body: &mut Vec<Stmt>) {
    let at = body.iter().enumerate().position(|(i, s)| {
        i + 1 < body.len()
            && matches!(&s.kind, StmtKind::If { body, orelse, .. }
                if orelse.is_empty() && matches!(body.last(), Some(Stmt { kind: StmtKind::Continue, .. })))
    });
    let Some(i) = at else { return };
    let mut rest: Vec<Stmt> = body.drain(i + 1..).collect();
    in_loop(&mut rest);
    let StmtKind::If { body: arm, orelse, .. } = &mut body[i].kind else { unreachable!("found above") };
    let end = arm.pop().expect("the arm ends with `continue`").span;
    if arm.is_empty() {
        arm.push(Stmt { kind: StmtKind::Pass, span: end });
    }
    *orelse = rest;
}

impl Cx {
    /// A set display of string literals (Adam-mini's `{"bias"}`, `{"q_proj", "k_proj"}`: names tested with `in`)
    /// is the dict of those keys: the same membership, length and iteration, in the order written, one of the
    /// orders Python's randomized string hashing gives; a set of int constants the dict of its items in CPython's
    /// order; another set display or comprehension `set([...])`. A dict comprehension `{k: v for ...}` is
    /// `dict([(k, v) for ...])`.
    pub(super) fn set_or_dict_comp(&self, e: &py::Expr, span: Span) -> Result<ExprKind, Diagnostic> {
        match e {
            py::Expr::Set(set) if set.elts.iter().all(|e| matches!(e, py::Expr::StringLiteral(_))) => {
                let mut items = Vec::new();
                for e in set.elts.iter() {
                    items.push((self.expr(e)?, Expr { kind: ExprKind::NoneLit, span: self.sp(e) }));
                }
                Ok(ExprKind::Dict(items))
            }
            py::Expr::DictComp(d) => {
                let Some(key) = d.key.as_deref() else {
                    return err(span, "`**` in dict comprehensions is not supported");
                };
                let pair = py::Expr::Tuple(py::ExprTuple {
                    node_index: Default::default(),
                    range: d.range,
                    elts: vec![key.clone(), (*d.value).clone()],
                    ctx: py::ExprContext::Load,
                    parenthesized: true,
                });
                let list = Expr { kind: self.comprehension(&pair, &d.generators, span)?, span };
                let dict = Box::new(Expr { kind: ExprKind::Name("dict".into()), span });
                Ok(ExprKind::Call { func: dict, args: vec![list], kwargs: vec![] })
            }
            // Another display: a set of ints (or bools) as the engines hold one (`frontend::cpython`), in CPython's
            // order, known now for constants (CPython builds a display of three or more from a frozenset constant),
            // else `set([ITEMS])`, which adds them in order as CPython's display does.
            py::Expr::Set(set) if !set.elts.iter().any(|e| matches!(e, py::Expr::Starred(_))) => {
                let items: Vec<Expr> = set.elts.iter().map(|e| self.expr(e)).collect::<Result<_, _>>()?;
                let consts: Option<Vec<i64>> = items
                    .iter()
                    .map(|e| match &e.kind {
                        ExprKind::Int(i) => Some(*i),
                        ExprKind::Bool(b) => Some(i64::from(*b)),
                        ExprKind::Unary(UnaryOp::Neg, x) => match x.kind {
                            ExprKind::Int(i) => i.checked_neg(),
                            _ => None,
                        },
                        _ => None,
                    })
                    .collect();
                let Some(v) = consts else {
                    let set = Box::new(Expr { kind: ExprKind::Name("set".into()), span });
                    let list = Expr { kind: ExprKind::List(items), span };
                    return Ok(ExprKind::Call { func: set, args: vec![list], kwargs: vec![] });
                };
                let hashes: Vec<i64> = v.iter().map(|&x| crate::frontend::cpython::int_hash(x)).collect();
                let order = crate::frontend::cpython::iteration_order(&hashes, &|a, b| v[a] == v[b], v.len() >= 3);
                let none = |e: &Expr| Expr { kind: ExprKind::NoneLit, span: e.span };
                Ok(ExprKind::Dict(order.into_iter().map(|k| (items[k].clone(), none(&items[k]))).collect()))
            }
            // `{E for ...}` is `set([E for ...])`.
            py::Expr::SetComp(c) => {
                let list = Expr { kind: self.comprehension(&c.elt, &c.generators, span)?, span };
                let set = Box::new(Expr { kind: ExprKind::Name("set".into()), span });
                Ok(ExprKind::Call { func: set, args: vec![list], kwargs: vec![] })
            }
            _ => {
                err(span, "sets are supported only as displays without `*` (`{1, 2}`, `{\"a\", \"b\"}`) and `set(...)`")
            }
        }
    }
}

/// The first statement of `body` that leaves it early: a `return`, or a `break`/`continue` outside any loop of
/// `body` (`in_loop`: inside one).
fn leaves_block(body: &[Stmt], in_loop: bool) -> Option<Span> {
    body.iter().find_map(|s| match &s.kind {
        StmtKind::Return(_) => Some(s.span),
        StmtKind::Break | StmtKind::Continue if !in_loop => Some(s.span),
        StmtKind::For { body, .. } | StmtKind::While { body, .. } => leaves_block(body, true),
        StmtKind::If { body, orelse, .. } => leaves_block(body, in_loop).or_else(|| leaves_block(orelse, in_loop)),
        _ => None,
    })
}

/// `slice(stop)`, `slice(start, stop[, step])` (the builtin: where the function binds no name `slice`, and the file
/// none at its top level, which `imports::qualify` checks before it calls this) as the
/// slice it makes, `start:stop:step`, which both engines evaluate as a value anywhere (Swin's `h_slices =
/// (slice(0, -w), slice(-w, -s), slice(-s, None))` iterated and used as subscripts; ring attention's
/// `slice_=(slice(None), slice(n, None))` passed on and used as `out[slice_]`). Other arities, keywords and `*args`
/// stay calls, which the engines refuse as Python would or name as unsupported.
pub(super) fn slice_builtin(func: &mut Function) {
    let mut bound: Vec<String> = func.params.iter().map(|p| p.name.clone()).collect();
    bound_names(&func.body, &mut bound);
    if bound.iter().any(|n| n == "slice") {
        return;
    }
    visit_exprs_mut(&mut func.body, &mut |e| {
        let ExprKind::Call { func: f, args, kwargs } = &mut e.kind else { return };
        let plain = kwargs.is_empty() && !args.iter().any(|a| matches!(a.kind, ExprKind::Starred(_)));
        if !matches!(&f.kind, ExprKind::Name(n) if n == "slice") || !plain || !(1..=3).contains(&args.len()) {
            return;
        }
        let mut parts = std::mem::take(args).into_iter().map(Box::new);
        let (a, b, c) = match (parts.next(), parts.next(), parts.next()) {
            (Some(stop), None, None) => (None, Some(stop), None),
            (start, stop, step) => (start, stop, step),
        };
        e.kind = ExprKind::Slice(a, b, c);
    });
}
