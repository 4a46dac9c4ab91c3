//! Leaf data of the term language: float and bool literals, parameter names and dtypes (operators: `ops.rs`).

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
