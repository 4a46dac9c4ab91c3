//! PyTorch's dropout modules (`nn.Dropout(p)`, its 1d, 2d and 3d forms and `AlphaDropout`) as classes of the file:
//! real models keep one as an attribute (`self.dropout = nn.Dropout(0.1)`) and call it on every layer, and it
//! computes nothing where the model is in eval mode or `p` is 0, which is when it gives the same values every run.
//! Each becomes the functions a class of the file becomes (`classes.rs`, run by `crate::interp::objects`): a
//! constructor `Dropout(p=0.5, inplace=False)` making an instance that holds `training` (true), `p` and `inplace`,
//! and the methods `__call__`/`forward` (`F.dropout(input, self.p, self.training, self.inplace)`, which returns its
//! input where PyTorch does and refuses a random mask), `train(mode=True)` and `eval()`, so that a parent module's
//! `eval()` reaches it. Both engines call the constructor for `torch.nn.NAME(...)` where the module has it. A file
//! that defines or binds the name itself keeps its own (and `nn.NAME` then stays unsupported). Every function is
//! located at the first mention of the name in the file.

use super::classes::{function, name, stmt};
use crate::diag::Span;
use crate::frontend::ast::*;

/// The module classes made so, by their PyTorch names (`torch.nn.NAME`).
pub const MODULE_CLASSES: &[&str] = &["Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout"];

/// Adds the functions of each dropout class the source mentions and nothing in the file defines, and their names
/// to `classes` (the module's classes, which are not programs). `at` locates a byte offset of the source.
pub(super) fn add(source: &str, at: &dyn Fn(usize) -> Span, functions: &mut Vec<Function>, classes: &mut Vec<String>) {
    for &cname in MODULE_CLASSES {
        let mentioned = source.match_indices(cname).find(|(i, _)| {
            let after = source[i + cname.len()..].chars().next();
            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
        });
        let Some((offset, _)) = mentioned else { continue };
        let taken = |n: &str| n == cname || n.split_once("::").is_some_and(|(c, _)| c == cname);
        if functions.iter().any(|f| taken(&f.name)) || classes.iter().any(|c| c == cname) {
            continue;
        }
        functions.extend(dropout(cname, at(offset)));
        classes.push(cname.to_string());
    }
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
