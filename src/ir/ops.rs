//! The op table: every operator of the term language, one row each, with what the stages need to know of it.
//!
//! A row gives the operator's name in terms, its class (unary and binary elementwise ops, selects, reductions,
//! scans, creation, ...), its arity, its dtype rule and whether it is transcendental (priced as such by the cost
//! model). Evaluation and type checking (`eval.rs`, `verify.rs`), the planner (which nodes are elementwise, which
//! reduce), the batching of loops, the rule loader (arity checked at load; `?f:unary` in a rule ranges over a class)
//! and the rule checker ask this table instead of keeping their own lists, so that an operator added here is known
//! everywhere at once.

use std::fmt;
use std::str::FromStr;

use crate::tensor::ops::{Binary, Unary};

/// What kind of operation an operator is. Rules may range over a class (`?f:unary`, `rules/README.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpClass {
    /// Python-int arithmetic on loop variables and offsets, and run-time index checks (`i+`, `iindex`, `toint`).
    Int,
    /// Evaluation order: `after` (a check kept for its error), `raise`.
    Control,
    /// A new tensor from literals: `full`, `arange`.
    Creation,
    /// A dtype conversion, elementwise: `cast`.
    Cast,
    /// A new shape over the same elements: `reshape`.
    Reshape,
    /// Elementwise of one tensor: `neg`, `exp`, `relu`, ...
    Unary,
    /// Elementwise of two tensors of one dtype, broadcast: `add`, `maximum`, `lt`, ...
    Binary,
    /// Elementwise, picking one of its operands per element: `where`, `clamp`.
    Select,
    /// Reduces dims: `sum`, `amax`, `max_val`, ...
    Reduction,
    /// Along one dim, keeping the shape: `cumsum`, `cumprod`, `softmax`, `log_softmax`.
    Scan,
    /// `matmul`.
    Matmul,
    /// `cat`.
    Join,
    /// A mask or masked copy: `triu`, `tril`, `inview`.
    Mask,
    /// Reads or writes at computed positions: `index`, `index_put`, `gather`, `scatter`, sorting.
    Index,
}

impl OpClass {
    /// Every class, in the order [`OpClass::name`] lists them.
    pub const ALL: &'static [OpClass] = &[
        OpClass::Int,
        OpClass::Control,
        OpClass::Creation,
        OpClass::Cast,
        OpClass::Reshape,
        OpClass::Unary,
        OpClass::Binary,
        OpClass::Select,
        OpClass::Reduction,
        OpClass::Scan,
        OpClass::Matmul,
        OpClass::Join,
        OpClass::Mask,
        OpClass::Index,
    ];

    /// The class's name in rule files (`?f:unary`).
    pub fn name(self) -> &'static str {
        match self {
            OpClass::Int => "int",
            OpClass::Control => "control",
            OpClass::Creation => "creation",
            OpClass::Cast => "cast",
            OpClass::Reshape => "reshape",
            OpClass::Unary => "unary",
            OpClass::Binary => "binary",
            OpClass::Select => "select",
            OpClass::Reduction => "reduction",
            OpClass::Scan => "scan",
            OpClass::Matmul => "matmul",
            OpClass::Join => "join",
            OpClass::Mask => "mask",
            OpClass::Index => "index",
        }
    }
}

/// How many children an operator takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arity {
    Exact(usize),
    AtLeast(usize),
}

impl Arity {
    pub fn admits(self, n: usize) -> bool {
        match self {
            Arity::Exact(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

impl fmt::Display for Arity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Arity::Exact(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
        }
    }
}

/// The dtype of an operator's result, from its tensor operands' dtype (binary operands share one dtype).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DtypeRule {
    /// The operands' dtype (where the op is defined for it: `bitnot` refuses floats, `mean` and `softmax` integers).
    Same,
    /// Floats keep their dtype; integers and bool give f32 (`exp`, `div`, `atan2`).
    Float,
    /// Bool (`lt`, `not`, `any`, `inview`).
    Bool,
    /// Floats keep their dtype; integers and bool accumulate in i64 (`sum`, `prod`, `cumsum`, `cumprod`).
    Accumulate,
    /// i64 positions (`max_idx`, `sort_idx`, `itensor`).
    Index,
    /// The dtype a literal child names (`full`, `arange`, `cast`).
    Given,
    /// A Python int, not a tensor (`i+`, `iindex`, `toint`, `raise`).
    Int,
    /// The type of the last child (`after`).
    Last,
}

impl DtypeRule {
    /// The rule's name in rule files (`?f:unary.same`).
    pub fn name(self) -> &'static str {
        match self {
            DtypeRule::Same => "same",
            DtypeRule::Float => "float",
            DtypeRule::Bool => "bool",
            DtypeRule::Accumulate => "accumulate",
            DtypeRule::Index => "index",
            DtypeRule::Given => "given",
            DtypeRule::Int => "int",
            DtypeRule::Last => "last",
        }
    }
}

macro_rules! op_table {
    (@arity ($n:literal ..)) => { Arity::AtLeast($n) };
    (@arity $n:literal) => { Arity::Exact($n) };
    (@unary Unary $k:ident) => { Some(Unary::$k) };
    (@unary $c:ident $($k:ident)?) => { None };
    (@binary Binary $k:ident) => { Some(Binary::$k) };
    (@binary $c:ident $($k:ident)?) => { None };
    (@flag transcendental transcendental) => { true };
    (@flag raises raises) => { true };
    (@flag $want:ident $flag:ident) => { false };
    ($($variant:ident = $text:literal: $class:ident $(($kernel:ident))?, $arity:tt, $dtype:ident $(, $flag:ident)*;)*) => {
        /// The closed set of operators on tensors and integers. A name outside it fails to parse.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpName { $($variant,)* }

        impl OpName {
            pub const ALL: &'static [OpName] = &[$(OpName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(OpName::$variant => $text,)* }
            }

            pub fn class(self) -> OpClass {
                match self { $(OpName::$variant => OpClass::$class,)* }
            }

            pub fn arity(self) -> Arity {
                match self { $(OpName::$variant => op_table!(@arity $arity),)* }
            }

            pub fn dtype_rule(self) -> DtypeRule {
                match self { $(OpName::$variant => DtypeRule::$dtype,)* }
            }

            /// Priced as transcendental work (many arithmetic ops per element) by the cost model.
            pub fn transcendental(self) -> bool {
                match self { $(OpName::$variant => false $(|| op_table!(@flag transcendental $flag))*,)* }
            }

            /// Raises for some values of well-typed operands (integer division by zero, integer powers with negative
            /// exponents), so computing it on more elements than asked may raise where the program does not.
            pub fn raises(self) -> bool {
                match self { $(OpName::$variant => false $(|| op_table!(@flag raises $flag))*,)* }
            }

            /// The runtime's elementwise op of one tensor that computes this operator.
            pub fn unary(self) -> Option<Unary> {
                match self { $(OpName::$variant => op_table!(@unary $class $($kernel)?),)* }
            }

            /// The runtime's elementwise op of two tensors that computes this operator.
            pub fn binary(self) -> Option<Binary> {
                match self { $(OpName::$variant => op_table!(@binary $class $($kernel)?),)* }
            }

            /// The elementwise op computing `b` (every tensor binary op has one).
            pub fn of_binary(b: Binary) -> OpName {
                *OpName::ALL.iter().find(|o| o.binary() == Some(b)).expect("every binary op has an IR op")
            }
        }

        impl FromStr for OpName {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s { $($text => Ok(OpName::$variant),)* _ => Err(format!("unknown operator `{s}`")) }
            }
        }
    };
}

// One row per operator: `Variant = "name": Class(runtime op), arity, dtype rule[, transcendental][, raises];`
// (`(2 ..)` is "at least 2").
op_table! {
    // Integer (index) arithmetic on loop variables and offsets.
    IAdd = "i+": Int, 2, Int;
    ISub = "i-": Int, 2, Int;
    IMul = "i*": Int, 2, Int;
    IFloorDiv = "i//": Int, 2, Int;
    IMod = "i%": Int, 2, Int;
    ToInt = "toint": Int, 1, Int;
    // `(iindex i n d)`: index i into dim d of size n, as Python reads it (-1 is n - 1); outside -n..n an IndexError.
    IIndex = "iindex": Int, 3, Int;
    // `(islice s len n d)`: the start of `[s : s + len]` in dim d of size n, as Python clamps it; an error where the
    // slice would not have len elements (its shape would depend on the data).
    ISlice = "islice": Int, 4, Int;
    // `(inarrow s len n)`: the start of `narrow(_, s, len)` in a dim of size n; PyTorch's error where out of range.
    INarrow = "inarrow": Int, 3, Int;
    ITensor = "itensor": Int, 1, Index;
    // `(after E V)`: evaluates E for its errors only (a run-time index check whose value is never used), then is V.
    // The functionalizer hangs the checks of dead code on a live value this way, as PyTorch still raises there.
    After = "after": Control, 2, Last;
    // `(raise)`: an error PyTorch raises where this is evaluated (the arm of an `if` on a run-time value that fails).
    Raise = "raise": Control, 0, Int;
    // `(fallback LINE COL)`: the arm of an `if` on a run-time value (at LINE:COL) that the plan was not specialized
    // for; where it is evaluated the run stops, and the reference interpreter runs the program instead.
    Fallback = "fallback": Control, 2, Int;
    // Creation and conversion.
    Full = "full": Creation, 3, Given;
    Arange = "arange": Creation, 4, Given;
    Cast = "cast": Cast, 2, Given;
    Reshape = "reshape": Reshape, 2, Same;
    // Elementwise, one input.
    Neg = "neg": Unary(Neg), 1, Same;
    Abs = "abs": Unary(Abs), 1, Same;
    Relu = "relu": Unary(Relu), 1, Same;
    Exp = "exp": Unary(Exp), 1, Float, transcendental;
    Log = "log": Unary(Log), 1, Float, transcendental;
    Log1p = "log1p": Unary(Log1p), 1, Float, transcendental;
    Expm1 = "expm1": Unary(Expm1), 1, Float, transcendental;
    Sqrt = "sqrt": Unary(Sqrt), 1, Float;
    Rsqrt = "rsqrt": Unary(Rsqrt), 1, Float;
    Sigmoid = "sigmoid": Unary(Sigmoid), 1, Float, transcendental;
    Tanh = "tanh": Unary(Tanh), 1, Float, transcendental;
    Sin = "sin": Unary(Sin), 1, Float, transcendental;
    Cos = "cos": Unary(Cos), 1, Float, transcendental;
    Floor = "floor": Unary(Floor), 1, Same;
    Ceil = "ceil": Unary(Ceil), 1, Same;
    Round = "round": Unary(Round), 1, Same;
    Trunc = "trunc": Unary(Trunc), 1, Same;
    Sign = "sign": Unary(Sign), 1, Same;
    LogicalNot = "not": Unary(LogicalNot), 1, Bool;
    BitNot = "bitnot": Unary(BitNot), 1, Same;
    Reciprocal = "reciprocal": Unary(Reciprocal), 1, Float;
    Square = "square": Unary(Square), 1, Same;
    Erf = "erf": Unary(Erf), 1, Float, transcendental;
    Silu = "silu": Unary(Silu), 1, Float, transcendental;
    Gelu = "gelu": Unary(Gelu), 1, Float, transcendental;
    // Elementwise, two inputs (same dtype, broadcast).
    Add = "add": Binary(Add), 2, Same;
    Sub = "sub": Binary(Sub), 2, Same;
    Mul = "mul": Binary(Mul), 2, Same;
    Div = "div": Binary(Div), 2, Float;
    FloorDiv = "floordiv": Binary(FloorDiv), 2, Same, raises;
    Rem = "rem": Binary(Rem), 2, Same, raises;
    Fmod = "fmod": Binary(Fmod), 2, Same, raises;
    Pow = "pow": Binary(Pow), 2, Same, transcendental, raises;
    Maximum = "maximum": Binary(Maximum), 2, Same;
    Minimum = "minimum": Binary(Minimum), 2, Same;
    Atan2 = "atan2": Binary(Atan2), 2, Float, transcendental;
    BitAnd = "bitand": Binary(BitAnd), 2, Same;
    BitOr = "bitor": Binary(BitOr), 2, Same;
    BitXor = "bitxor": Binary(BitXor), 2, Same;
    Shl = "shl": Binary(Shl), 2, Same;
    Shr = "shr": Binary(Shr), 2, Same;
    Eq = "eq": Binary(Eq), 2, Bool;
    Ne = "ne": Binary(Ne), 2, Bool;
    Lt = "lt": Binary(Lt), 2, Bool;
    Le = "le": Binary(Le), 2, Bool;
    Gt = "gt": Binary(Gt), 2, Bool;
    Ge = "ge": Binary(Ge), 2, Bool;
    Where = "where": Select, 3, Same;
    Clamp = "clamp": Select, 3, Same;
    // Reductions and scans.
    Sum = "sum": Reduction, 3, Accumulate;
    Mean = "mean": Reduction, 3, Same;
    Prod = "prod": Reduction, 3, Accumulate;
    Amax = "amax": Reduction, 3, Same;
    Amin = "amin": Reduction, 3, Same;
    Any = "any": Reduction, 3, Bool;
    All = "all": Reduction, 3, Bool;
    MaxVal = "max_val": Reduction, 3, Same;
    MaxIdx = "max_idx": Reduction, 3, Index;
    MinVal = "min_val": Reduction, 3, Same;
    MinIdx = "min_idx": Reduction, 3, Index;
    Softmax = "softmax": Scan, 2, Same;
    LogSoftmax = "log_softmax": Scan, 2, Same;
    Cumsum = "cumsum": Scan, 2, Accumulate;
    Cumprod = "cumprod": Scan, 2, Accumulate;
    // Linear algebra, concatenation, masks.
    Matmul = "matmul": Matmul, 2, Same;
    MatrixExp = "matrix_exp": Matmul, 1, Same;
    Cat = "cat": Join, (2 ..), Same;
    Triu = "triu": Mask, 2, Same;
    Tril = "tril": Mask, 2, Same;
    // `(inview x v)`: a bool tensor of x's shape, true at the elements view v reaches.
    InView = "inview": Mask, 2, Bool;
    // Advanced indexing.
    Index = "index": Index, (1 ..), Same;
    IndexPut = "index_put": Index, (3 ..), Same;
    // Gathers, scatters and sorting along one dim.
    Gather = "gather": Index, 3, Same;
    Scatter = "scatter": Index, 5, Same;
    SortVal = "sort_val": Index, 5, Same;
    SortIdx = "sort_idx": Index, 5, Index;
}

impl OpName {
    /// Computed element by element from the elements of its operands at the same position (after broadcasting):
    /// unary, binary, select and cast. Such ops fuse into one loop and commute with reading through a view.
    pub fn is_elementwise(self) -> bool {
        matches!(self.class(), OpClass::Unary | OpClass::Binary | OpClass::Select | OpClass::Cast)
    }

    /// Reduces dims (`sum`, `amax`, `max_val`, ...): its children are the tensor, the dims (one for `max_val` and
    /// the others of one dim), keepdim.
    pub fn is_reduction(self) -> bool {
        self.class() == OpClass::Reduction
    }

    /// The ops of a class, optionally only those of one dtype rule, in table order.
    pub fn members(class: OpClass, dtype: Option<DtypeRule>) -> Vec<OpName> {
        OpName::ALL
            .iter()
            .copied()
            .filter(|o| o.class() == class && dtype.is_none_or(|d| o.dtype_rule() == d))
            .collect()
    }

    /// The operator the runtime's unary op `u` computes.
    pub fn of_unary(u: Unary) -> OpName {
        *OpName::ALL.iter().find(|o| o.unary() == Some(u)).expect("every runtime unary op is in the table")
    }
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// `?f:CLASS` or `?f:CLASS.RULE` in a rule: the class (and dtype rule) named, or why not.
pub fn parse_class(spec: &str) -> Result<(OpClass, Option<DtypeRule>), String> {
    let (c, d) = match spec.split_once('.') {
        Some((c, d)) => (c, Some(d)),
        None => (spec, None),
    };
    let known: Vec<&str> = OpClass::ALL.iter().map(|c| c.name()).collect();
    let class = OpClass::ALL
        .iter()
        .copied()
        .find(|k| k.name() == c)
        .ok_or_else(|| format!("unknown op class `{c}` (known: {})", known.join(", ")))?;
    let rule = match d {
        None => None,
        Some(d) => {
            let rules = [
                DtypeRule::Same,
                DtypeRule::Float,
                DtypeRule::Bool,
                DtypeRule::Accumulate,
                DtypeRule::Index,
                DtypeRule::Given,
                DtypeRule::Int,
                DtypeRule::Last,
            ];
            let names: Vec<&str> = rules.iter().map(|r| r.name()).collect();
            Some(
                rules
                    .iter()
                    .copied()
                    .find(|r| r.name() == d)
                    .ok_or_else(|| format!("unknown dtype rule `{d}` in `{spec}` (known: {})", names.join(", ")))?,
            )
        }
    };
    if OpName::members(class, rule).is_empty() {
        return Err(format!("op class `{spec}` has no members"));
    }
    Ok((class, rule))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::{DType, Tensor};

    /// The dtype rules of elementwise ops agree with what the runtime computes, for every dtype it accepts.
    #[test]
    fn elementwise_dtype_rules_match_the_runtime() {
        use crate::tensor::ops::{self, Operand};
        for &op in OpName::ALL {
            for d in DType::ALL.into_iter().filter(|d| !matches!(d, DType::F16 | DType::BF16)) {
                let x = Tensor::zeros(d, &[1]).unwrap();
                let got = if let Some(u) = op.unary() {
                    ops::unary(u, &x).map(|r| r.dtype())
                } else if let Some(b) = op.binary() {
                    ops::binary_dtypes(b, &Operand::T(x.clone()), &Operand::T(x)).map(|r| r.1)
                } else {
                    continue;
                };
                let Ok(got) = got else { continue };
                let want = match op.dtype_rule() {
                    DtypeRule::Same => d,
                    DtypeRule::Float if d.is_float() => d,
                    DtypeRule::Float => DType::F32,
                    DtypeRule::Bool => DType::Bool,
                    other => panic!("{op}: an elementwise op with dtype rule {other:?}"),
                };
                assert_eq!(got, want, "{op} on {d:?}");
            }
        }
    }

    #[test]
    fn kernels_match_classes() {
        for &op in OpName::ALL {
            assert_eq!(op.unary().is_some(), op.class() == OpClass::Unary, "{op}");
            assert_eq!(op.binary().is_some(), op.class() == OpClass::Binary, "{op}");
            assert_eq!(op.as_str().parse::<OpName>(), Ok(op));
        }
        // `raises` is said of exactly the binary ops that raise for some integer operands.
        use crate::tensor::ops::{binary, Operand};
        for op in OpName::members(OpClass::Binary, None) {
            let int =
                |v: i64| Operand::T(Tensor::from_scalars(DType::I64, &[1], &[crate::tensor::Scalar::I(v)]).unwrap());
            let fails = [0, -1].iter().any(|&v| binary(op.binary().unwrap(), &int(3), &int(v)).is_err());
            assert_eq!(fails, op.raises(), "{op}");
        }
        assert_eq!(OpName::members(OpClass::Unary, None).len(), 25);
        assert_eq!(OpName::members(OpClass::Binary, None).len(), 22);
    }
}
