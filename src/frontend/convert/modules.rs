//! PyTorch's dropout modules (`nn.Dropout(p)`, `nn.AlphaDropout(p)`) as classes of the file: real models keep one as
//! an attribute (`self.dropout = nn.Dropout(0.1)`) and call it on every layer, and it computes nothing where the
//! model is in eval mode or `p` is 0, which is when it gives the same values every run. Each becomes the functions a
//! class of the file becomes (`classes.rs`, run by `crate::interp::objects`), under a name no Python program can
//! bind ([`class_name`]: `nn.Dropout(...)` never reaches a `Dropout` the file defines): a constructor
//! `(p=0.5, inplace=False)` making an instance that holds `training` (true), `p` and `inplace`, and the methods
//! `__call__`/`forward` (`F.dropout(input, self.p, self.training, self.inplace)`, which returns its input where
//! PyTorch does and refuses a random mask), `train(mode=True)` and `eval()`, so that a parent module's `eval()`
//! reaches it. Both engines call the constructor for `torch.nn.NAME(...)`. Every function is located at the first
//! mention of `NAME` in the file's code (a whole word, outside comments). `Dropout1d/2d/3d` are not among them:
//! PyTorch checks their input's rank, which these would not.

use super::classes::{function, name, stmt};
use crate::diag::Span;
use crate::frontend::ast::*;

/// The module classes made so, by their PyTorch names (`torch.nn.NAME`).
pub const MODULE_CLASSES: &[&str] = &["Dropout", "AlphaDropout", "ModuleList"];

/// The name the class made for `torch.nn.NAME` has among the file's functions, if `NAME` is one of
/// [`MODULE_CLASSES`]: not an identifier (Python code cannot define, bind or call it), without a `.` (the engines
/// read a dotted function name as an op).
pub fn class_name(name: &str) -> Option<String> {
    MODULE_CLASSES.contains(&name).then(|| format!("nn·{name}"))
}

/// Adds the functions of each dropout class the source mentions, and their names to `classes` (the module's
/// classes, which are not programs). `at` locates a byte offset of the source.
pub(super) fn add(source: &str, at: &dyn Fn(usize) -> Span, functions: &mut Vec<Function>, classes: &mut Vec<String>) {
    for &nn_name in MODULE_CLASSES {
        let Some(offset) = first_mention(source, nn_name) else { continue };
        let cname = class_name(nn_name).expect("one of MODULE_CLASSES");
        functions.extend(match nn_name {
            "ModuleList" => module_list(&cname, at(offset)),
            _ => dropout(&cname, at(offset)),
        });
        classes.push(cname);
    }
}

/// The byte offset of the first mention of `word` in `source` as a whole word outside a comment.
pub(super) fn first_mention(source: &str, word: &str) -> Option<usize> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    source.match_indices(word).map(|(i, _)| i).find(|&i| {
        let line_start = source[..i].rfind('\n').map_or(0, |n| n + 1);
        !source[..i].ends_with(ident)
            && !source[i + word.len()..].starts_with(ident)
            && !source[line_start..i].contains('#')
    })
}

/// The functions of dropout class `cname`, located at `span`.
fn dropout(cname: &str, span: Span) -> Vec<Function> {
    let e = |kind| Expr { kind, span };
    let s = |kind| stmt(kind, span);
    let attr = |o: Expr, a: &str| e(ExprKind::Attr(Box::new(o), a.into()));
    let call = |f: Expr, args| e(ExprKind::Call { func: Box::new(f), args, kwargs: vec![] });
    let param = |n: &str, default| Param { name: n.into(), ann: None, default, span };
    let this = || name("self", span);
    let num = |f: f64| e(ExprKind::Float(f));
    // _DropoutNd.__init__'s check, then the instance.
    let p = || name("p", span);
    let out_of_range = e(ExprKind::BoolOp(
        false,
        vec![
            e(ExprKind::Compare(Box::new(p()), vec![(CmpOp::Lt, num(0.0))])),
            e(ExprKind::Compare(Box::new(p()), vec![(CmpOp::Gt, num(1.0))])),
        ],
    ));
    let message = call(
        attr(e(ExprKind::Str("dropout probability has to be between 0 and 1, but got {}".into())), "format"),
        vec![p()],
    );
    let check = s(StmtKind::If {
        test: out_of_range,
        body: vec![s(StmtKind::Raise(Some(call(name("ValueError", span), vec![message]))))],
        orelse: vec![],
    });
    let key = |k: &str| e(ExprKind::Str(k.into()));
    let instance = e(ExprKind::Dict(vec![
        (key(CLASS_KEY), key(cname)),
        (key("training"), e(ExprKind::Bool(true))),
        (key("p"), p()),
        (key("inplace"), name("inplace", span)),
    ]));
    let ctor_params = vec![param("p", Some(num(0.5))), param("inplace", Some(e(ExprKind::Bool(false))))];
    let ctor_body = vec![check, s(StmtKind::Return(Some(instance)))];
    let functional = attr(attr(attr(name("torch", span), "nn"), "functional"), "dropout");
    let field = |f: &str| attr(this(), f);
    let apply = call(functional, vec![name("input", span), field("p"), field("training"), field("inplace")]);
    let method = |m: &str, params, body| function(format!("{cname}::{m}"), params, body, span);
    let forward = |m: &str| {
        method(m, vec![param("self", None), param("input", None)], vec![s(StmtKind::Return(Some(apply.clone())))])
    };
    let train_body = vec![
        s(StmtKind::Assign { targets: vec![field("training")], value: name("mode", span) }),
        s(StmtKind::Return(Some(this()))),
    ];
    let eval_body = vec![s(StmtKind::Return(Some(call(attr(this(), "train"), vec![e(ExprKind::Bool(false))]))))];
    vec![
        function(cname.to_string(), ctor_params, ctor_body, span),
        forward("__call__"),
        forward("forward"),
        method("train", vec![param("self", None), param("mode", Some(e(ExprKind::Bool(true))))], train_body),
        method("eval", vec![param("self", None)], eval_body),
    ]
}

/// The functions of `nn.ModuleList`, located at `span`: a constructor `(modules=None)` making an instance that holds
/// `training` and its modules as a list under [`ITEMS_KEY`] (which iterating and indexing the instance reach, in
/// both engines: `interp::objects::items_of`), `append` and `extend` (returning the list module), `__len__`, and
/// `train`/`eval`, which set the mode on itself and on each module in it. Only such a list is reached by a parent's
/// `train`: a plain list of modules, which PyTorch does not register, is not.
fn module_list(cname: &str, span: Span) -> Vec<Function> {
    let e = |kind| Expr { kind, span };
    let s = |kind| stmt(kind, span);
    let attr = |o: Expr, a: &str| e(ExprKind::Attr(Box::new(o), a.into()));
    let call = |f: Expr, args| e(ExprKind::Call { func: Box::new(f), args, kwargs: vec![] });
    let param = |n: &str, default| Param { name: n.into(), ann: None, default, span };
    let this = || name("self", span);
    let items = || attr(this(), ITEMS_KEY);
    let key = |k: &str| e(ExprKind::Str(k.into()));
    let given = call(name("list", span), vec![name("modules", span)]);
    let none_given = e(ExprKind::Compare(Box::new(name("modules", span)), vec![(CmpOp::Is, e(ExprKind::NoneLit))]));
    let initial = e(ExprKind::IfExp {
        test: Box::new(none_given),
        body: Box::new(e(ExprKind::List(vec![]))),
        orelse: Box::new(given),
    });
    let instance = e(ExprKind::Dict(vec![
        (key(CLASS_KEY), key(cname)),
        (key("training"), e(ExprKind::Bool(true))),
        (key(ITEMS_KEY), initial),
    ]));
    let ctor = function(
        cname.to_string(),
        vec![param("modules", Some(e(ExprKind::NoneLit)))],
        vec![s(StmtKind::Return(Some(instance)))],
        span,
    );
    let method = |m: &str, params, body| function(format!("{cname}::{m}"), params, body, span);
    let grow = |m: &str, arg: &str| {
        let body =
            vec![s(StmtKind::Expr(call(attr(items(), m), vec![name(arg, span)]))), s(StmtKind::Return(Some(this())))];
        method(m, vec![param("self", None), param(arg, None)], body)
    };
    let each = s(StmtKind::For {
        target: name("_m", span),
        iter: items(),
        body: vec![s(StmtKind::If {
            test: call(name(IS_MODULE, span), vec![name("_m", span)]),
            body: vec![s(StmtKind::Expr(call(attr(name("_m", span), "train"), vec![name("mode", span)])))],
            orelse: vec![],
        })],
    });
    let train_body = vec![
        s(StmtKind::Assign { targets: vec![attr(this(), "training")], value: name("mode", span) }),
        each,
        s(StmtKind::Return(Some(this()))),
    ];
    let eval_body = vec![s(StmtKind::Return(Some(call(attr(this(), "train"), vec![e(ExprKind::Bool(false))]))))];
    vec![
        ctor,
        grow("append", "module"),
        grow("extend", "modules"),
        method(
            "__len__",
            vec![param("self", None)],
            vec![s(StmtKind::Return(Some(call(name("len", span), vec![items()]))))],
        ),
        method("train", vec![param("self", None), param("mode", Some(e(ExprKind::Bool(true))))], train_body),
        method("eval", vec![param("self", None)], eval_body),
    ]
}
