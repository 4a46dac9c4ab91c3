//! Our own AST for the supported Python subset, independent of the parser crate.
//!
//! Invariant: every node carries the span of its source text, so every later error can name `file:line:col`.

use crate::diag::Span;
use crate::tensor::DType;

/// A parsed program file: its programs and helpers (every top-level `def`) and module-level constants.
#[derive(Clone, Debug)]
pub struct Module {
    pub path: String,
    pub functions: Vec<Function>,
    /// Top-level `NAME = expr` assignments, evaluated in order before a program runs.
    pub constants: Vec<(String, Expr)>,
}

impl Module {
    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    /// Programs are the top-level functions whose names do not start with `_`; the rest are helpers.
    pub fn programs(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| !f.name.starts_with('_'))
    }
}

#[derive(Clone, Debug)]
pub struct Function {
    pub name: String,
    pub params: Vec<Param>,
    pub returns: Option<TypeAnn>,
    pub body: Vec<Stmt>,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub ann: Option<TypeAnn>,
    pub default: Option<Expr>,
    pub span: Span,
}

/// A parameter or return annotation.
#[derive(Clone, Debug, PartialEq)]
pub enum TypeAnn {
    Tensor {
        dtype: DType,
        shape: Vec<usize>,
    },
    Int,
    Float,
    Bool,
    Tuple(Vec<TypeAnn>),
    /// An annotation we accept for helpers but that gives no type (e.g. `list[Tensor]`, `Tensor`).
    Opaque,
}

#[derive(Clone, Debug)]
pub struct Stmt {
    pub kind: StmtKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum StmtKind {
    /// `a = b = value`: targets are assigned left to right.
    Assign {
        targets: Vec<Expr>,
        value: Expr,
    },
    AugAssign {
        target: Expr,
        op: BinOp,
        value: Expr,
    },
    Expr(Expr),
    Return(Option<Expr>),
    For {
        target: Expr,
        iter: Expr,
        body: Vec<Stmt>,
    },
    While {
        test: Expr,
        body: Vec<Stmt>,
    },
    If {
        test: Expr,
        body: Vec<Stmt>,
        orelse: Vec<Stmt>,
    },
    Assert {
        test: Expr,
        msg: Option<Expr>,
    },
    Pass,
    Break,
    Continue,
}

#[derive(Clone, Debug)]
pub struct Expr {
    pub kind: ExprKind,
    pub span: Span,
}

#[derive(Clone, Debug)]
pub enum ExprKind {
    Name(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    NoneLit,
    Ellipsis,
    Str(String),
    Bin(BinOp, Box<Expr>, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    /// `a < b <= c`: a chain of comparisons.
    Compare(Box<Expr>, Vec<(CmpOp, Expr)>),
    /// `and` (true) or `or` (false) over two or more operands.
    BoolOp(bool, Vec<Expr>),
    Call {
        func: Box<Expr>,
        args: Vec<Expr>,
        kwargs: Vec<(String, Expr)>,
    },
    Attr(Box<Expr>, String),
    Subscript(Box<Expr>, Box<Expr>),
    Slice(Option<Box<Expr>>, Option<Box<Expr>>, Option<Box<Expr>>),
    Tuple(Vec<Expr>),
    List(Vec<Expr>),
    IfExp {
        test: Box<Expr>,
        body: Box<Expr>,
        orelse: Box<Expr>,
    },
    ListComp {
        elt: Box<Expr>,
        target: Box<Expr>,
        iter: Box<Expr>,
        conds: Vec<Expr>,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    FloorDiv,
    Mod,
    Pow,
    MatMul,
    BitAnd,
    BitOr,
    BitXor,
}

impl BinOp {
    /// The elementwise tensor op of a Python operator (`@` has none).
    pub fn elementwise(self) -> Option<crate::tensor::ops::Binary> {
        use crate::tensor::ops::Binary;
        Some(match self {
            BinOp::Add => Binary::Add,
            BinOp::Sub => Binary::Sub,
            BinOp::Mul => Binary::Mul,
            BinOp::Div => Binary::Div,
            BinOp::FloorDiv => Binary::FloorDiv,
            BinOp::Mod => Binary::Rem,
            BinOp::Pow => Binary::Pow,
            BinOp::BitAnd => Binary::BitAnd,
            BinOp::BitOr => Binary::BitOr,
            BinOp::BitXor => Binary::BitXor,
            BinOp::MatMul => return None,
        })
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
            BinOp::MatMul => "@",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::BitXor => "^",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    Neg,
    Pos,
    Not,
    Invert,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    Is,
    IsNot,
    In,
    NotIn,
}
