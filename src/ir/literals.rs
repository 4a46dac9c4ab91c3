//! Leaf data of the term language: float and bool literals, parameter names, and the closed set of operator names.

use std::fmt;
use std::str::FromStr;

use crate::tensor::DType;

/// A float literal, compared and hashed by its bits; printed so that it never reads back as an integer.
#[derive(Clone, Copy, Debug)]
pub struct FloatLit(pub f64);

impl PartialEq for FloatLit {
    fn eq(&self, o: &Self) -> bool {
        self.0.to_bits() == o.0.to_bits()
    }
}
impl Eq for FloatLit {}
impl std::hash::Hash for FloatLit {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        self.0.to_bits().hash(h)
    }
}
impl PartialOrd for FloatLit {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for FloatLit {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.0.to_bits().cmp(&o.0.to_bits())
    }
}
impl fmt::Display for FloatLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            write!(f, "nan")
        } else if v.is_infinite() {
            write!(f, "{}", if v > 0.0 { "inf" } else { "-inf" })
        } else if v == v.trunc() && v.abs() < 1e15 {
            write!(f, "{v:.1}")
        } else {
            write!(f, "{v:?}")
        }
    }
}
impl FromStr for FloatLit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "nan" => return Ok(FloatLit(f64::NAN)),
            "inf" => return Ok(FloatLit(f64::INFINITY)),
            "-inf" => return Ok(FloatLit(f64::NEG_INFINITY)),
            _ => {}
        }
        if !s.contains(['.', 'e', 'E']) {
            return Err(format!("`{s}` is not a float literal"));
        }
        s.parse::<f64>().map(FloatLit).map_err(|e| e.to_string())
    }
}

/// `true` or `false`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BoolLit(pub bool);

impl fmt::Display for BoolLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
impl FromStr for BoolLit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "true" => Ok(BoolLit(true)),
            "false" => Ok(BoolLit(false)),
            _ => Err(format!("`{s}` is not a bool literal")),
        }
    }
}

/// A program parameter's name, written `%name`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ParamName(pub String);

impl fmt::Display for ParamName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}
impl FromStr for ParamName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.strip_prefix('%') {
            Some(n) if !n.is_empty() && n.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                Ok(ParamName(n.to_string()))
            }
            _ => Err(format!("`{s}` is not a parameter name (%name)")),
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.annotation())
    }
}
impl FromStr for DType {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        DType::from_annotation(s).ok_or_else(|| format!("`{s}` is not a dtype"))
    }
}

macro_rules! op_names {
    ($($variant:ident = $text:literal,)*) => {
        /// The closed set of operators on tensors and integers. A name outside it fails to parse.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum OpName { $($variant,)* }

        impl OpName {
            pub const ALL: &'static [OpName] = &[$(OpName::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self { $(OpName::$variant => $text,)* }
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

op_names! {
    // Integer (index) arithmetic on loop variables and offsets.
    IAdd = "i+",
    ISub = "i-",
    IMul = "i*",
    IFloorDiv = "i//",
    IMod = "i%",
    ToInt = "toint",
    // `(iindex i n d)`: index i into dim d of size n, as Python reads it (-1 is n - 1); outside -n..n an IndexError.
    IIndex = "iindex",
    // `(islice s len n d)`: the start of `[s : s + len]` in dim d of size n, as Python clamps it; an error where the
    // slice would not have len elements (its shape would depend on the data).
    ISlice = "islice",
    // `(inarrow s len n)`: the start of `narrow(_, s, len)` in a dim of size n; PyTorch's error where out of range.
    INarrow = "inarrow",
    ITensor = "itensor",
    // `(after E V)`: evaluates E for its errors only (a run-time index check whose value is never used), then is V.
    // The functionalizer hangs the checks of dead code on a live value this way, as PyTorch still raises there.
    After = "after",
    // `(raise)`: an error PyTorch raises where this is evaluated (the arm of an `if` on a run-time value that fails).
    Raise = "raise",
    // Creation and conversion.
    Full = "full",
    Arange = "arange",
    Cast = "cast",
    Reshape = "reshape",
    // Elementwise, one input.
    Neg = "neg",
    Abs = "abs",
    Relu = "relu",
    Exp = "exp",
    Log = "log",
    Log1p = "log1p",
    Expm1 = "expm1",
    Sqrt = "sqrt",
    Rsqrt = "rsqrt",
    Sigmoid = "sigmoid",
    Tanh = "tanh",
    Sin = "sin",
    Cos = "cos",
    Floor = "floor",
    Ceil = "ceil",
    Round = "round",
    Trunc = "trunc",
    Sign = "sign",
    LogicalNot = "not",
    BitNot = "bitnot",
    Reciprocal = "reciprocal",
    Square = "square",
    Erf = "erf",
    Silu = "silu",
    Gelu = "gelu",
    // Elementwise, two inputs (same dtype, broadcast).
    Add = "add",
    Sub = "sub",
    Mul = "mul",
    Div = "div",
    FloorDiv = "floordiv",
    Rem = "rem",
    Fmod = "fmod",
    Pow = "pow",
    Maximum = "maximum",
    Minimum = "minimum",
    Atan2 = "atan2",
    BitAnd = "bitand",
    BitOr = "bitor",
    BitXor = "bitxor",
    Eq = "eq",
    Ne = "ne",
    Lt = "lt",
    Le = "le",
    Gt = "gt",
    Ge = "ge",
    Where = "where",
    Clamp = "clamp",
    // Reductions and scans.
    Sum = "sum",
    Mean = "mean",
    Prod = "prod",
    Amax = "amax",
    Amin = "amin",
    Any = "any",
    All = "all",
    MaxVal = "max_val",
    MaxIdx = "max_idx",
    MinVal = "min_val",
    MinIdx = "min_idx",
    Softmax = "softmax",
    LogSoftmax = "log_softmax",
    Cumsum = "cumsum",
    Cumprod = "cumprod",
    // Linear algebra, concatenation, masks.
    Matmul = "matmul",
    Cat = "cat",
    Triu = "triu",
    Tril = "tril",
    // `(inview x v)`: a bool tensor of x's shape, true at the elements view v reaches.
    InView = "inview",
    // Advanced indexing.
    Index = "index",
    IndexPut = "index_put",
    // Gathers, scatters and sorting along one dim.
    Gather = "gather",
    Scatter = "scatter",
    SortVal = "sort_val",
    SortIdx = "sort_idx",
}

impl fmt::Display for OpName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
