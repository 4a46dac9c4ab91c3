//! Python's `str` methods that code around tensors uses on names and keys (`name.startswith("scale")`,
//! `"_".join(parts)`), shared by the reference interpreter and the functionalizer: strings are always known when a
//! program is converted, so both engines compute them the same way, here.

use super::value::Value;

/// An argument of a string method, as far as these methods look at it.
pub enum StrArg {
    Str(String),
    /// A tuple or list of strings (`startswith(("a", "b"))`, `"".join(parts)`).
    Strs(Vec<String>),
    None,
    /// Any other value, by Python's type name.
    Other(&'static str),
}

/// What a string method returns.
pub enum StrOut {
    Bool(bool),
    Int(i64),
    Str(String),
    Strs(Vec<String>),
}

fn arg_type(a: &StrArg) -> &'static str {
    match a {
        StrArg::Str(_) => "str",
        StrArg::Strs(_) => "tuple",
        StrArg::None => "NoneType",
        StrArg::Other(t) => t,
    }
}

fn one_str<'a>(name: &str, args: &'a [StrArg]) -> Result<&'a str, String> {
    match args {
        [StrArg::Str(s)] => Ok(s),
        [a] => Err(format!("TypeError: {name}() argument must be str, not {}", arg_type(a))),
        _ => Err(format!("TypeError: {name}() takes exactly one argument ({} given)", args.len())),
    }
}

/// `s.NAME(*args)`: `Err` with Python's message for a bad argument, or `None` as the message for a method these
/// engines do not have.
pub fn str_method(s: &str, name: &str, args: &[StrArg]) -> Result<StrOut, Option<String>> {
    let out = match name {
        "startswith" | "endswith" => {
            let prefixes = match args {
                [StrArg::Str(p)] => vec![p.clone()],
                [StrArg::Strs(ps)] => ps.clone(),
                [a] => {
                    return Err(Some(format!(
                        "TypeError: {name} first arg must be str or a tuple of str, not {}",
                        arg_type(a)
                    )))
                }
                _ => return Err(None), // start/end positions: not supported
            };
            let hit =
                |p: &String| if name == "startswith" { s.starts_with(p.as_str()) } else { s.ends_with(p.as_str()) };
            StrOut::Bool(prefixes.iter().any(hit))
        }
        "lower" | "upper" | "strip" | "lstrip" | "rstrip" | "isdigit" | "isidentifier" if args.is_empty() => match name
        {
            "lower" => StrOut::Str(s.to_lowercase()),
            "upper" => StrOut::Str(s.to_uppercase()),
            "strip" => StrOut::Str(s.trim().to_string()),
            "lstrip" => StrOut::Str(s.trim_start().to_string()),
            "rstrip" => StrOut::Str(s.trim_end().to_string()),
            "isdigit" => StrOut::Bool(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
            _ => StrOut::Bool(
                s.chars().next().is_some_and(|c| c == '_' || c.is_alphabetic())
                    && s.chars().all(|c| c == '_' || c.is_alphanumeric()),
            ),
        },
        "replace" => match args {
            [StrArg::Str(a), StrArg::Str(b)] => StrOut::Str(s.replace(a.as_str(), b)),
            _ => return Err(None),
        },
        // By characters, as Python counts them; -1 where absent (`find`), Python's ValueError (`index`).
        "find" | "index" => {
            let sub = one_str(name, args).map_err(Some)?;
            match s.find(sub) {
                Some(b) => StrOut::Int(s[..b].chars().count() as i64),
                None if name == "find" => StrOut::Int(-1),
                None => return Err(Some("ValueError: substring not found".into())),
            }
        }
        "count" => StrOut::Int(s.matches(one_str(name, args).map_err(Some)?).count() as i64),
        "split" => match args {
            [] | [StrArg::None] => StrOut::Strs(s.split_whitespace().map(String::from).collect()),
            [StrArg::Str(sep)] if sep.is_empty() => return Err(Some("ValueError: empty separator".into())),
            [StrArg::Str(sep)] => StrOut::Strs(s.split(sep.as_str()).map(String::from).collect()),
            _ => return Err(None),
        },
        "join" => match args {
            [StrArg::Strs(parts)] => StrOut::Str(parts.join(s)),
            [StrArg::Str(text)] => StrOut::Str(text.chars().map(String::from).collect::<Vec<_>>().join(s)),
            _ => return Err(None),
        },
        _ => return Err(None),
    };
    Ok(out)
}

/// A value as an argument of a string method.
pub fn value_arg(v: &Value) -> StrArg {
    let strs = |xs: &[Value]| -> Option<Vec<String>> {
        xs.iter().map(|x| if let Value::Str(s) = x { Some(s.to_string()) } else { None }).collect()
    };
    match v {
        Value::Str(s) => StrArg::Str(s.to_string()),
        Value::None => StrArg::None,
        Value::Tuple(xs) => strs(xs).map_or(StrArg::Other("tuple"), StrArg::Strs),
        Value::List(xs) => strs(&xs.borrow()).map_or(StrArg::Other("list"), StrArg::Strs),
        other => StrArg::Other(other.type_name()),
    }
}

/// `text.NAME(*args)` as a value (a list of strings for `split`), or the message: Python's error, or the refusal.
pub fn call(text: &str, name: &str, args: Vec<StrArg>) -> Result<Value, String> {
    match str_method(text, name, &args) {
        Ok(StrOut::Bool(b)) => Ok(Value::Bool(b)),
        Ok(StrOut::Int(i)) => Ok(Value::Int(i)),
        Ok(StrOut::Str(s)) => Ok(Value::Str(s.into())),
        Ok(StrOut::Strs(v)) => Ok(Value::list(v.into_iter().map(|s| Value::Str(s.into())).collect())),
        Err(Some(m)) => Err(m),
        Err(None) => Err(unsupported(name)),
    }
}

/// The refusal for a string method [`str_method`] does not have.
fn unsupported(name: &str) -> String {
    format!(
        "unsupported method `{name}` on a value of type str (supported: startswith, endswith, lower, upper, strip, \
         lstrip, rstrip, isdigit, isidentifier, replace, count, find, index, split, join)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: &str) -> StrArg {
        StrArg::Str(x.into())
    }

    #[test]
    fn methods_are_pythons() {
        assert!(matches!(str_method("scale_a", "startswith", &[s("scale")]), Ok(StrOut::Bool(true))));
        let both = StrArg::Strs(vec!["x".into(), "_a".into()]);
        assert!(matches!(str_method("scale_a", "endswith", &[both]), Ok(StrOut::Bool(true))));
        assert!(matches!(str_method("a.b.c", "split", &[s(".")]), Ok(StrOut::Strs(v)) if v == ["a", "b", "c"]));
        assert!(matches!(str_method(" a  b ", "split", &[]), Ok(StrOut::Strs(v)) if v == ["a", "b"]));
        let parts = StrArg::Strs(vec!["q".into(), "k".into()]);
        assert!(matches!(str_method("_", "join", &[parts]), Ok(StrOut::Str(v)) if v == "q_k"));
        assert!(matches!(str_method("aXa", "count", &[s("a")]), Ok(StrOut::Int(2))));
        assert!(matches!(str_method("", "isdigit", &[]), Ok(StrOut::Bool(false))));
        assert!(matches!(str_method("x", "split", &[s("")]), Err(Some(m)) if m == "ValueError: empty separator"));
        let e = str_method("x", "startswith", &[StrArg::Other("int")]);
        assert!(
            matches!(e, Err(Some(m)) if m == "TypeError: startswith first arg must be str or a tuple of str, not int")
        );
        assert!(matches!(str_method("x", "format", &[]), Err(None)));
    }
}

/// `s[i]` (`slice` None) or `s[a:b:c]` of a string, by characters as Python indexes them.
pub fn str_getitem(
    s: &str,
    index: Option<i64>,
    slice: Option<(Option<i64>, Option<i64>, Option<i64>)>,
) -> Result<String, String> {
    let chars: Vec<char> = s.chars().collect();
    let n = chars.len() as i64;
    if let Some((a, b, c)) = slice {
        let at = super::value::slice_positions(n, a, b, c)?;
        return Ok(at.into_iter().map(|i| chars[i]).collect());
    }
    let i = index.unwrap_or(0);
    let k = if i < 0 { i + n } else { i };
    if k < 0 || k >= n {
        return Err("IndexError: string index out of range".into());
    }
    Ok(chars[k as usize].to_string())
}
