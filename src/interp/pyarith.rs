//! Python's number semantics, shared by the reference interpreter and the functionalizer: comparisons (ints
//! exactly, floats as floats), arithmetic with Python's rules (bools count as ints, floor division and modulo round
//! toward negative infinity, 64-bit overflow is an error), and `int()` of a float.

use super::value::Value;
use crate::frontend::ast::{BinOp, CmpOp};
use crate::tensor::Scalar;

/// A comparison of two Python numbers, as Python makes it (ints exactly, floats as floats).
pub(crate) fn py_compare(x: Scalar, op: CmpOp, y: Scalar) -> bool {
    if x.kind() == crate::tensor::Kind::Float || y.kind() == crate::tensor::Kind::Float {
        let (p, q) = (x.to_f64(), y.to_f64());
        cmp(op, p.partial_cmp(&q), p == q)
    } else {
        let (p, q) = (x.to_i64_trunc(), y.to_i64_trunc());
        cmp(op, p.partial_cmp(&q), p == q)
    }
}

/// Python's ordering of two values known now: numbers (ints exactly), strings, and tuples or lists of such,
/// lexicographically. `Err` with Python's TypeError where `<` is not defined between them; `Ok(None)` where the
/// values are unordered (a NaN).
pub(crate) fn py_order(a: &Value, b: &Value) -> Result<Option<std::cmp::Ordering>, String> {
    use std::cmp::Ordering::Equal;
    let seq = |v: &Value| match v {
        Value::Tuple(xs) => Some(("tuple", xs.to_vec())),
        Value::List(xs) => Some(("list", xs.borrow().clone())),
        _ => None,
    };
    if let (Value::Str(x), Value::Str(y)) = (a, b) {
        return Ok(Some(x.cmp(y)));
    }
    if let (Some(x), Some(y)) = (a.as_scalar(), b.as_scalar()) {
        return Ok(if py_compare(x, CmpOp::Lt, y) {
            Some(std::cmp::Ordering::Less)
        } else if py_compare(x, CmpOp::Gt, y) {
            Some(std::cmp::Ordering::Greater)
        } else if py_compare(x, CmpOp::Eq, y) {
            Some(Equal)
        } else {
            None
        });
    }
    if let (Some((ta, xs)), Some((tb, ys))) = (seq(a), seq(b)) {
        if ta == tb {
            for (x, y) in xs.iter().zip(&ys) {
                match py_order(x, y)? {
                    Some(Equal) => {}
                    other => return Ok(other),
                }
            }
            return Ok(Some(xs.len().cmp(&ys.len())));
        }
    }
    Err(format!("TypeError: '<' not supported between instances of '{}' and '{}'", a.type_name(), b.type_name()))
}

/// `op` (an ordering) of two values by [`py_order`].
pub(crate) fn py_ordered(a: &Value, op: CmpOp, b: &Value) -> Result<bool, String> {
    let ord = py_order(a, b).map_err(|m| m.replace("'<'", &format!("'{}'", cmp_symbol(op))))?;
    Ok(cmp(op, ord, ord == Some(std::cmp::Ordering::Equal)))
}

/// `sorted(items, reverse=...)` of values known now: Python's stable sort by [`py_order`] (unordered pairs, NaN,
/// keep their order).
pub(crate) fn py_sorted(mut items: Vec<Value>, reverse: bool) -> Result<Vec<Value>, String> {
    // Python's sort first asks whether each item is less than the one before it.
    for w in items.windows(2) {
        py_order(&w[1], &w[0])?;
    }
    if let Some(first) = items.first() {
        items.iter().try_for_each(|x| py_order(first, x).map(|_| ()))?;
    }
    let ord = |a: &Value, b: &Value| py_order(a, b).ok().flatten().unwrap_or(std::cmp::Ordering::Equal);
    // With `reverse`, each comparison is reversed: equal items keep their order, as in Python.
    if reverse {
        items.sort_by(|a, b| ord(b, a));
    } else {
        items.sort_by(|a, b| ord(a, b));
    }
    Ok(items)
}

/// `sorted(items, key=..., reverse=...)` given each item's key: stable, and Python's TypeError where two keys do
/// not compare.
pub(crate) fn py_sorted_by<T>(items: Vec<T>, keys: Vec<Value>, reverse: bool) -> Result<Vec<T>, String> {
    // Python's TypeError where two keys do not compare.
    py_sorted(keys.clone(), false)?;
    let ord = |a: &usize, b: &usize| py_order(&keys[*a], &keys[*b]).ok().flatten().unwrap_or(std::cmp::Ordering::Equal);
    let mut idx: Vec<usize> = (0..keys.len()).collect();
    // Stable either way: equal keys keep their order, as in Python.
    if reverse {
        idx.sort_by(|a, b| ord(b, a));
    } else {
        idx.sort_by(ord);
    }
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    Ok(idx.into_iter().filter_map(|i| slots.get_mut(i).and_then(Option::take)).collect())
}

fn cmp_symbol(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
        CmpOp::Eq => "==",
        _ => "!=",
    }
}

fn cmp(op: CmpOp, ord: Option<std::cmp::Ordering>, eq: bool) -> bool {
    use std::cmp::Ordering::*;
    match op {
        CmpOp::Eq => eq,
        CmpOp::Ne => !eq,
        CmpOp::Lt => ord == Some(Less),
        CmpOp::Le => matches!(ord, Some(Less | Equal)),
        CmpOp::Gt => ord == Some(Greater),
        CmpOp::Ge => matches!(ord, Some(Greater | Equal)),
        _ => false,
    }
}

/// The error for a Python int result that leaves the 64-bit range.
pub(crate) fn int_range_error(v: i128) -> String {
    format!(
        "integer overflow: the Python int {} does not fit in 64 bits (arbitrary-precision ints are not supported)",
        if v.unsigned_abs() < 1u128 << 100 { v.to_string() } else { "result".into() }
    )
}

/// Python's `int(f)` of a float: truncation, with Python's errors for NaN and infinities, and ours for a value
/// outside 64 bits.
pub(crate) fn float_to_int(f: f64) -> Result<i64, String> {
    if f.is_nan() {
        return Err("ValueError: cannot convert float NaN to integer".into());
    }
    if f.is_infinite() {
        return Err("OverflowError: cannot convert float infinity to integer".into());
    }
    let t = f.trunc();
    if t < -9.223_372_036_854_775_808e18 || t >= 9.223_372_036_854_775_808e18 {
        return Err(int_range_error(i128::MAX));
    }
    Ok(t as i64)
}

fn int_overflow(x: i64, op: BinOp, y: i64) -> String {
    let exact = match op {
        BinOp::Add => Some(x as i128 + y as i128),
        BinOp::Sub => Some(x as i128 - y as i128),
        BinOp::Mul => Some(x as i128 * y as i128),
        BinOp::FloorDiv => Some(-(x as i128)),
        BinOp::Pow => u32::try_from(y).ok().and_then(|e| (x as i128).checked_pow(e)),
        BinOp::LShift => (y < 64).then(|| (x as i128) << y),
        _ => None,
    };
    match exact {
        Some(v) => int_range_error(v),
        None => int_range_error(i128::MAX),
    }
}

/// Arithmetic on Python numbers, with Python's semantics (bools count as ints).
pub(crate) fn py_arith(a: Scalar, op: BinOp, b: Scalar) -> Result<Value, String> {
    let float = matches!(a, Scalar::F(_)) || matches!(b, Scalar::F(_));
    if !float {
        let (x, y) = (a.to_i64_trunc(), b.to_i64_trunc());
        let bools = matches!((a, b), (Scalar::B(_), Scalar::B(_)));
        // Python ints have arbitrary precision; ours are 64-bit, so a result outside that range is an error rather
        // than a wrapped value.
        let fits = |r: Option<i64>| r.map(Value::Int).ok_or_else(|| int_overflow(x, op, y));
        return Ok(match op {
            BinOp::Add => fits(x.checked_add(y))?,
            BinOp::Sub => fits(x.checked_sub(y))?,
            BinOp::Mul => fits(x.checked_mul(y))?,
            BinOp::Div => {
                if y == 0 {
                    return Err("ZeroDivisionError: division by zero".into());
                }
                Value::Float(x as f64 / y as f64)
            }
            BinOp::FloorDiv | BinOp::Mod => {
                if y == 0 {
                    return Err("ZeroDivisionError: integer division or modulo by zero".into());
                }
                // Only i64::MIN // -1 leaves the range.
                let q = fits(x.checked_div_euclid(y))?;
                let (Value::Int(q), r) = (q, x.rem_euclid(y)) else { unreachable!() };
                let (q, r) = if y < 0 && r != 0 { (q - 1, r + y) } else { (q, r) };
                Value::Int(if op == BinOp::FloorDiv { q } else { r })
            }
            BinOp::Pow => {
                if y < 0 && x == 0 {
                    return Err("ZeroDivisionError: 0.0 cannot be raised to a negative power".into());
                } else if y < 0 {
                    Value::Float((x as f64).powf(y as f64))
                } else {
                    fits(u32::try_from(y).ok().and_then(|e| x.checked_pow(e)))?
                }
            }
            BinOp::BitAnd if bools => Value::Bool(x & y != 0),
            BinOp::BitOr if bools => Value::Bool((x | y) != 0),
            BinOp::BitXor if bools => Value::Bool((x ^ y) != 0),
            BinOp::BitAnd => Value::Int(x & y),
            BinOp::BitOr => Value::Int(x | y),
            BinOp::BitXor => Value::Int(x ^ y),
            BinOp::LShift | BinOp::RShift if y < 0 => return Err("ValueError: negative shift count".into()),
            // Exact, or out of our ints' range: Python's ints have no width.
            BinOp::LShift if x == 0 => Value::Int(0),
            BinOp::LShift => fits((y < 64).then(|| i64::try_from((x as i128) << y).ok()).flatten())?,
            BinOp::RShift => Value::Int(x >> y.min(63)),
            BinOp::MatMul => return Err("unsupported operand types for @: numbers".into()),
        });
    }
    let (x, y) = (a.to_f64(), b.to_f64());
    Ok(Value::Float(match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x * y,
        BinOp::Div => {
            if y == 0.0 {
                return Err("ZeroDivisionError: float division by zero".into());
            }
            x / y
        }
        BinOp::FloorDiv => {
            if y == 0.0 {
                return Err("ZeroDivisionError: float floor division by zero".into());
            }
            (x / y).floor()
        }
        BinOp::Mod => {
            if y == 0.0 {
                return Err("ZeroDivisionError: float modulo".into());
            }
            let r = x % y;
            if r != 0.0 && (r < 0.0) != (y < 0.0) {
                r + y
            } else {
                r
            }
        }
        BinOp::Pow if x == 0.0 && y < 0.0 => {
            return Err("ZeroDivisionError: 0.0 cannot be raised to a negative power".into())
        }
        // Python's float power raises where a finite result would overflow.
        BinOp::Pow if x.is_finite() && y.is_finite() && x.powf(y).is_infinite() => {
            return Err("OverflowError: (34, 'Numerical result out of range')".into())
        }
        BinOp::Pow => x.powf(y),
        _ => return Err(format!("unsupported operand types for {}: 'float'", op.symbol())),
    }))
}

/// `int(text)`: Python's parse of a base-10 string (surrounding whitespace, a sign, digits with single underscores
/// between them; both engines). Values past int64 are refused as this tool's ints are int64.
pub(crate) fn parse_int(text: &str) -> Result<i64, String> {
    let bad = || format!("ValueError: invalid literal for int() with base 10: '{text}'");
    let t = text.trim();
    let (neg, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let ok = !digits.is_empty()
        && !digits.starts_with('_')
        && !digits.ends_with('_')
        && !digits.contains("__")
        && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
    if !ok {
        return Err(bad());
    }
    let magnitude: String = digits.chars().filter(|&c| c != '_').collect();
    let signed = if neg { format!("-{magnitude}") } else { magnitude };
    signed.parse::<i64>().map_err(|_| format!("int('{text}') is past int64, which funcfuse's ints are"))
}

/// `float(text)`: Python's parse of a string, with its spellings of infinity and NaN (both engines).
pub(crate) fn parse_float(text: &str) -> Result<f64, String> {
    match text.trim().to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        t => t.parse::<f64>().map_err(|_| format!("could not convert string to float: '{text}'")),
    }
}

#[cfg(test)]
mod tests {
    use super::parse_int;

    #[test]
    fn int_of_a_string_parses_as_python_does() {
        assert_eq!(parse_int(" -1_000 "), Ok(-1000));
        assert_eq!(parse_int("+7"), Ok(7));
        assert_eq!(parse_int("007"), Ok(7));
        for bad in ["", " ", "1__0", "_1", "1_", "1.5", "0x10", "--1", "1 2"] {
            assert!(parse_int(bad).unwrap_err().starts_with("ValueError: invalid literal"), "{bad:?}");
        }
        assert!(parse_int("99999999999999999999").unwrap_err().contains("int64"));
    }
}
