//! Python's `str`, `repr` and `format` of the values f-strings and exception messages show: numbers (floats as
//! Python writes them: `1.0`, `1e-05`, `1e+16`), strings, None, tuples, lists, dicts, dtypes and devices, with the
//! format-spec mini-language for numbers and strings (`{x:.3f}`, `{n:>5}`, `{p:.1%}`, `{n:,}`).

use super::value::Value;

/// Python's `repr` of a float.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    // Rust's `{:e}` gives the shortest digits that round-trip, as Python's repr does; only the layout differs.
    let s = format!("{:e}", x);
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let neg = mant.starts_with('-');
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let sign = if neg { "-" } else { "" };
    if (-4..16).contains(&exp) {
        let body = if exp >= 0 {
            let e = exp as usize;
            let int: String = if digits.len() > e + 1 {
                digits[..e + 1].to_string()
            } else {
                format!("{digits}{}", "0".repeat(e + 1 - digits.len()))
            };
            let frac = if digits.len() > e + 1 { &digits[e + 1..] } else { "0" };
            format!("{int}.{frac}")
        } else {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let m = if digits.len() > 1 { format!("{}.{}", &digits[..1], &digits[1..]) } else { digits };
        format!("{sign}{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// Python's `str` of a value.
pub fn py_str(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => py_repr(other),
    }
}

/// Python's `repr` of a value (tensors are shown by dtype and shape, not by their elements).
pub fn py_repr(v: &Value) -> String {
    let seq = |items: &[Value]| items.iter().map(py_repr).collect::<Vec<_>>().join(", ");
    match v {
        Value::None => "None".into(),
        Value::Bool(b) => if *b { "True" } else { "False" }.into(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) => float_repr(*f),
        // Python's quotes: double ones where the text has a single quote and no double one.
        Value::Str(s) if s.contains('\'') && !s.contains('"') => format!("\"{}\"", s.replace('\\', "\\\\")),
        Value::Str(s) => format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'")),
        Value::Tensor(t) => format!("tensor(<{}{}>)", t.dtype().annotation(), crate::tensor::fmt_shape(&t.shape)),
        Value::Complex(inner) => format!("complex {}", py_repr(inner)),
        Value::Tuple(items) | Value::Named(items, _) if items.len() == 1 => format!("({},)", seq(items)),
        Value::Tuple(items) | Value::Named(items, _) => format!("({})", seq(items)),
        Value::List(items) => format!("[{}]", seq(&items.borrow())),
        Value::Dict(items) => {
            let kv: Vec<String> =
                items.borrow().iter().map(|(k, v)| format!("{}: {}", py_repr(k), py_repr(v))).collect();
            format!("{{{}}}", kv.join(", "))
        }
        Value::Slice(a, b, c) => {
            let o = |x: &Option<i64>| x.map_or("None".to_string(), |v| v.to_string());
            format!("slice({}, {}, {})", o(a), o(b), o(c))
        }
        Value::Ellipsis => "Ellipsis".into(),
        Value::DType(d) => d.torch_name().to_string(),
        Value::Range(a, b, s) if *s == 1 => format!("range({a}, {b})"),
        Value::Range(a, b, s) => format!("range({a}, {b}, {s})"),
        Value::Module(m) => format!("<module '{m}'>"),
        Value::Func(f) => format!("<function {f}>"),
        Value::Closure(f, _) => format!("<function {f}>"),
        Value::Device => "device(type='cpu')".into(),
    }
}

/// A parsed format spec: `[[fill]align][sign][#][0][width][,|_][.precision][type]`.
struct Spec {
    fill: char,
    align: Option<char>,
    sign: char,
    alt: bool,
    width: usize,
    group: Option<char>,
    precision: Option<usize>,
    ty: Option<char>,
}

fn parse_spec(spec: &str) -> Result<Spec, String> {
    let c: Vec<char> = spec.chars().collect();
    let mut i = 0;
    let mut s =
        Spec { fill: ' ', align: None, sign: '-', alt: false, width: 0, group: None, precision: None, ty: None };
    let is_align = |c: char| matches!(c, '<' | '>' | '^' | '=');
    if c.len() >= 2 && is_align(c[1]) {
        s.fill = c[0];
        s.align = Some(c[1]);
        i = 2;
    } else if !c.is_empty() && is_align(c[0]) {
        s.align = Some(c[0]);
        i = 1;
    }
    if i < c.len() && matches!(c[i], '+' | '-' | ' ') {
        s.sign = c[i];
        i += 1;
    }
    if i < c.len() && c[i] == '#' {
        s.alt = true;
        i += 1;
    }
    if i < c.len() && c[i] == '0' {
        if s.align.is_none() {
            s.fill = '0';
            s.align = Some('=');
        }
        i += 1;
    }
    let num = |i: &mut usize| {
        let start = *i;
        while *i < c.len() && c[*i].is_ascii_digit() {
            *i += 1;
        }
        c[start..*i].iter().collect::<String>().parse::<usize>().ok()
    };
    s.width = num(&mut i).unwrap_or(0);
    if i < c.len() && matches!(c[i], ',' | '_') {
        s.group = Some(c[i]);
        i += 1;
    }
    if i < c.len() && c[i] == '.' {
        i += 1;
        s.precision = Some(num(&mut i).ok_or("Format specifier missing precision")?);
    }
    if i < c.len() {
        s.ty = Some(c[i]);
        i += 1;
    }
    if i != c.len() {
        return Err(format!("Invalid format specifier '{spec}'"));
    }
    Ok(s)
}

/// Groups the digits of an integer part by thousands.
fn group_digits(int: &str, sep: char) -> String {
    let n = int.len();
    let mut out = String::new();
    for (k, ch) in int.chars().enumerate() {
        if k > 0 && (n - k) % 3 == 0 {
            out.push(sep);
        }
        out.push(ch);
    }
    out
}

/// Scientific notation as Python writes it (`1.500000e-05`).
fn sci(x: f64, p: usize, upper: bool) -> String {
    let s = format!("{:.*e}", p, x);
    let (m, e) = s.split_once('e').unwrap_or((&s, "0"));
    let e: i32 = e.parse().unwrap_or(0);
    let out = format!("{m}e{}{:02}", if e < 0 { '-' } else { '+' }, e.abs());
    if upper {
        out.to_uppercase()
    } else {
        out
    }
}

/// `%g`: fixed or scientific by the exponent, trailing zeros removed (unless `alt`).
fn general(x: f64, p: usize, alt: bool, upper: bool) -> String {
    let p = p.max(1);
    if !x.is_finite() {
        return float_repr(x);
    }
    let exp = if x == 0.0 {
        0
    } else {
        let s = format!("{:.*e}", p - 1, x);
        s.split_once('e').and_then(|(_, e)| e.parse::<i32>().ok()).unwrap_or(0)
    };
    let strip = |s: String| {
        if alt || !s.contains('.') {
            s
        } else {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        }
    };
    if exp >= -4 && exp < p as i32 {
        strip(format!("{:.*}", (p as i32 - 1 - exp).max(0) as usize, x))
    } else {
        let s = sci(x, p - 1, upper);
        let (m, e) = s.split_once(if upper { 'E' } else { 'e' }).unwrap_or((&s, ""));
        format!("{}{}{e}", strip(m.to_string()), if upper { 'E' } else { 'e' })
    }
}

fn pad(body: String, neg: bool, s: &Spec, default_align: char) -> String {
    let sign = if neg {
        "-"
    } else {
        match s.sign {
            '+' => "+",
            ' ' => " ",
            _ => "",
        }
    };
    let len = sign.chars().count() + body.chars().count();
    let fill = s.width.saturating_sub(len);
    let f = |n: usize| s.fill.to_string().repeat(n);
    match s.align.unwrap_or(default_align) {
        '<' => format!("{sign}{body}{}", f(fill)),
        '^' => format!("{}{sign}{body}{}", f(fill / 2), f(fill - fill / 2)),
        '=' => format!("{sign}{}{body}", f(fill)),
        _ => format!("{}{sign}{body}", f(fill)),
    }
}

/// `format(v, spec)` as Python computes it, for numbers, strings and (with an empty spec) anything.
pub fn format_value(v: &Value, spec: &str) -> Result<String, String> {
    if spec.is_empty() {
        return Ok(py_str(v));
    }
    let s = parse_spec(spec)?;
    let float = |x: f64, ty: Option<char>| -> Result<String, String> {
        let neg = x.is_sign_negative() && !x.is_nan();
        let a = x.abs();
        let body = match ty {
            // Python's `nan` and `inf` (upper case for the upper-case types), whatever the precision.
            _ if !a.is_finite() => {
                let s = if a.is_nan() { "nan" } else { "inf" };
                let s = if matches!(ty, Some('F' | 'E' | 'G')) { s.to_uppercase() } else { s.to_string() };
                if ty == Some('%') {
                    format!("{s}%")
                } else {
                    s
                }
            }
            Some('f' | 'F') => format!("{:.*}", s.precision.unwrap_or(6), a),
            Some(t @ ('e' | 'E')) => sci(a, s.precision.unwrap_or(6), t == 'E'),
            Some(t @ ('g' | 'G')) => general(a, s.precision.unwrap_or(6), s.alt, t == 'G'),
            Some('%') => format!("{:.*}%", s.precision.unwrap_or(6), a * 100.0),
            None => match s.precision {
                // Like `g`, but a whole number keeps one decimal (`format(1.0, ".3")` is `1.0`).
                Some(p) => {
                    let g = general(a, p, s.alt, false);
                    if a.is_finite() && !g.contains(['.', 'e']) {
                        format!("{g}.0")
                    } else {
                        g
                    }
                }
                None => float_repr(a),
            },
            Some(t) => return Err(format!("Unknown format code '{t}' for object of type 'float'")),
        };
        let body = match s.group {
            Some(g) => {
                let (int, rest) = match body.find(|c: char| !c.is_ascii_digit()) {
                    Some(k) => body.split_at(k),
                    None => (body.as_str(), ""),
                };
                format!("{}{rest}", group_digits(int, g))
            }
            None => body,
        };
        Ok(pad(body, neg, &s, '>'))
    };
    match v {
        Value::Bool(_) | Value::Int(_) if matches!(s.ty, Some('f' | 'F' | 'e' | 'E' | 'g' | 'G' | '%')) => {
            let x = v.as_scalar().map(|x| x.to_f64()).unwrap_or(0.0);
            float(x, s.ty)
        }
        Value::Int(_) | Value::Bool(_) => {
            let i = v.as_scalar().map(|x| x.to_i64_trunc()).unwrap_or(0);
            if s.precision.is_some() {
                return Err("Precision not allowed in integer format specifier".into());
            }
            let body = match s.ty {
                None | Some('d' | 'n') => i.unsigned_abs().to_string(),
                Some('x') => format!("{:x}", i.unsigned_abs()),
                Some('X') => format!("{:X}", i.unsigned_abs()),
                Some('b') => format!("{:b}", i.unsigned_abs()),
                Some('o') => format!("{:o}", i.unsigned_abs()),
                Some(t) => return Err(format!("Unknown format code '{t}' for object of type 'int'")),
            };
            let body = match s.group {
                Some(g) => group_digits(&body, g),
                None => body,
            };
            Ok(pad(body, i < 0, &s, '>'))
        }
        Value::Float(x) => float(*x, s.ty),
        Value::Str(text) => {
            if !matches!(s.ty, None | Some('s')) {
                return Err(format!("Unknown format code '{}' for object of type 'str'", s.ty.unwrap_or('?')));
            }
            let body: String = match s.precision {
                Some(p) => text.chars().take(p).collect(),
                None => text.to_string(),
            };
            Ok(pad(body, false, &Spec { sign: '-', ..s }, '<'))
        }
        other => Err(format!("unsupported format string passed to {}.__format__", other.type_name())),
    }
}

/// One f-string field: the conversion (`!s`, `!r`, `!a`), then the format spec.
pub fn field(v: &Value, conv: Option<char>, spec: &str) -> Result<String, String> {
    match conv {
        Some('r' | 'a') => format_value(&Value::Str(py_repr(v).into()), spec),
        Some(_) => format_value(&Value::Str(py_str(v).into()), spec),
        None => format_value(v, spec),
    }
}

/// `template.format(*pos, **kw)`: `{}` (numbered automatically), `{0}`, `{name}`, each with an optional
/// conversion (`!r`) and format spec (`:.2f`), and `{{`/`}}`; Python's errors otherwise. Attribute and index fields
/// (`{0.x}`, `{a[0]}`) and nested specs are refused.
pub fn str_format(template: &str, pos: &[Value], kw: &[(String, Value)]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = template.chars().peekable();
    let mut auto: Option<usize> = None;
    let mut manual = false;
    while let Some(c) = chars.next() {
        match c {
            '{' if chars.peek() == Some(&'{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek() == Some(&'}') => {
                chars.next();
                out.push('}');
            }
            '}' => return Err("ValueError: Single '}' encountered in format string".into()),
            '{' => {
                let mut inner = String::new();
                loop {
                    match chars.next() {
                        Some('}') => break,
                        Some('{') => {
                            return Err("str.format(): nested fields in a format spec are not supported".into())
                        }
                        Some(c) => inner.push(c),
                        None => return Err("ValueError: expected '}' before end of string".into()),
                    }
                }
                let (head, spec) = inner.split_once(':').unwrap_or((&inner, ""));
                let (name, conv) = match head.split_once('!') {
                    Some((n, c)) if c.len() == 1 && "rsa".contains(c) => (n, c.chars().next()),
                    Some(_) => return Err("ValueError: Unknown conversion specifier".into()),
                    None => (head, None),
                };
                let v = if name.is_empty() {
                    if manual {
                        return Err(
                            "ValueError: cannot switch from manual field specification to automatic field numbering"
                                .into(),
                        );
                    }
                    let k = auto.map_or(0, |k| k + 1);
                    auto = Some(k);
                    pos.get(k).ok_or_else(|| {
                        format!("IndexError: Replacement index {k} out of range for positional args tuple")
                    })?
                } else if let Ok(k) = name.parse::<usize>() {
                    if auto.is_some() {
                        return Err(
                            "ValueError: cannot switch from automatic field numbering to manual field specification"
                                .into(),
                        );
                    }
                    manual = true;
                    pos.get(k).ok_or_else(|| {
                        format!("IndexError: Replacement index {k} out of range for positional args tuple")
                    })?
                } else if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
                    &kw.iter().find(|(k, _)| k == name).ok_or_else(|| format!("KeyError: '{name}'"))?.1
                } else {
                    return Err(format!(
                        "str.format(): the field `{{{name}}}` is not supported (only positions and names)"
                    ));
                };
                out.push_str(&field(v, conv, spec)?);
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `%` formatting, against what CPython prints for the same cases.
    #[test]
    fn percent_format_is_pythons() {
        let s = |x: &str| Value::Str(x.into());
        let list = Value::List(std::rc::Rc::new(std::cell::RefCell::new(vec![Value::Int(1), Value::Int(2)])));
        let cases: Vec<(&str, Vec<Value>, &str)> = vec![
            ("%.3f million", vec![Value::Float(1.23456)], "1.235 million"),
            ("%d items", vec![Value::Float(3.9)], "3 items"),
            ("%5d|%-5d|%05d", vec![Value::Int(42), Value::Int(42), Value::Int(42)], "   42|42   |00042"),
            ("%s and %r", vec![s("a"), s("a")], "a and 'a'"),
            ("%x %X %o", vec![Value::Int(255), Value::Int(255), Value::Int(8)], "ff FF 10"),
            ("%+.2e", vec![Value::Float(12345.678)], "+1.23e+04"),
            ("%g", vec![Value::Float(0.0001234)], "0.0001234"),
            ("%10.4f|", vec![Value::Float(3.14159)], "    3.1416|"),
            ("100%%", vec![], "100%"),
            ("%s", vec![list], "[1, 2]"),
            ("%-8s|", vec![s("ab")], "ab      |"),
            ("%i", vec![Value::Bool(true)], "1"),
            ("% d", vec![Value::Int(5)], " 5"),
            ("%#g", vec![Value::Float(2.0)], "2.00000"),
            (
                "%f|%.3e|%F|%g|%E",
                [f64::NAN, -f64::NAN, f64::INFINITY, -f64::INFINITY, f64::NAN].map(Value::Float).to_vec(),
                "nan|nan|INF|-inf|NAN",
            ),
        ];
        for (t, args, want) in cases {
            assert_eq!(percent_format(t, &args).as_deref(), Ok(want), "{t}");
        }
        assert_eq!(
            percent_format("%d %d", &[Value::Int(1)]).unwrap_err(),
            "TypeError: not enough arguments for format string"
        );
        assert_eq!(
            percent_format("%d", &[Value::Int(1), Value::Int(2)]).unwrap_err(),
            "TypeError: not all arguments converted during string formatting"
        );
        assert_eq!(
            percent_format("%d", &[s("x")]).unwrap_err(),
            "TypeError: %d format: a real number is required, not str"
        );
        // The right operand: a tuple's items, or the one value (a list is one value).
        let pair = Value::Tuple(std::rc::Rc::new(vec![Value::Int(1), s("b")]));
        assert_eq!(percent("%d-%s", &pair).as_deref(), Ok("1-b"));
        assert_eq!(percent("<%s>", &Value::List(Default::default())).as_deref(), Ok("<[]>"));
        // What is refused rather than printed differently from CPython.
        for (t, v) in [
            ("%(k)s", s("x")),
            ("%*d", Value::Int(1)),
            ("%a", s("x")),
            ("%#x", Value::Int(255)),
            ("%#.0f", Value::Float(3.0)),
            ("%.3d", Value::Int(5)),
            ("%d", Value::Float(1e20)),
        ] {
            assert!(percent(t, &v).unwrap_err().contains("is not supported"), "{t}");
        }
    }

    #[test]
    fn floats_print_as_python_prints_them() {
        for (x, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (1e16, "1e+16"),
            (1.5e16, "1.5e+16"),
            (123456.789, "123456.789"),
            (-2.5, "-2.5"),
            (0.0001, "0.0001"),
            (1e15, "1000000000000000.0"),
        ] {
            assert_eq!(float_repr(x), want, "{x}");
        }
    }

    #[test]
    fn format_specs_follow_python() {
        let f = |v: Value, s: &str| format_value(&v, s).unwrap();
        assert_eq!(f(Value::Float(3.14159), ".2f"), "3.14");
        assert_eq!(f(Value::Float(-3.14159), "8.3f"), "  -3.142");
        assert_eq!(f(Value::Float(0.25), ".1%"), "25.0%");
        assert_eq!(f(Value::Float(12345.678), ",.1f"), "12,345.7");
        assert_eq!(f(Value::Float(1.5e-7), ".3e"), "1.500e-07");
        assert_eq!(f(Value::Float(0.0001234), ".3g"), "0.000123");
        assert_eq!(f(Value::Float(1234567.0), "g"), "1.23457e+06");
        assert_eq!(f(Value::Float(1.0), ".3"), "1.0");
        assert_eq!(f(Value::Float(2.5), ".3"), "2.5");
        assert_eq!(f(Value::Int(42), "05d"), "00042");
        assert_eq!(f(Value::Int(-42), ">6"), "   -42");
        assert_eq!(f(Value::Int(1234567), ","), "1,234,567");
        assert_eq!(f(Value::Int(3), ".2f"), "3.00");
        assert_eq!(f(Value::Str("ab".into()), "*^6"), "**ab**");
        assert_eq!(f(Value::Str("ab".into()), "4"), "ab  ");
        assert!(format_value(&Value::Float(1.0), "d").is_err());
    }

    #[test]
    fn str_format_follows_python() {
        let (one, x) = (Value::Int(1), Value::Float(0.5));
        let kw = vec![("name".to_string(), Value::Str("p".into()))];
        assert_eq!(str_format("precond_{}", std::slice::from_ref(&one), &[]).unwrap(), "precond_1");
        assert_eq!(str_format("{1}-{0}-{1:.2f}", &[one.clone(), x.clone()], &[]).unwrap(), "0.5-1-0.50");
        assert_eq!(str_format("{name!r} {{x}} {:>4}", std::slice::from_ref(&one), &kw).unwrap(), "'p' {x}    1");
        assert!(str_format("{} {1}", &[one.clone(), x.clone()], &[]).unwrap_err().contains("cannot switch"));
        assert!(str_format("{2}", &[one], &[]).unwrap_err().starts_with("IndexError: Replacement index 2"));
        assert_eq!(str_format("{a}", &[], &[]).unwrap_err(), "KeyError: 'a'");
        assert!(str_format("}", &[], &[]).unwrap_err().contains("Single '}'"));
    }
}

/// `template % args` (printf-style formatting): `%[-+ 0#][width][.precision]TYPE` with TYPE among `d i u f F e E g
/// G x X o s r` and `%%`, each conversion taking the next of `args` (the items of a tuple, or the one value), as
/// Python computes it (`%d` truncates a float; `%s` is `str`), with Python's TypeErrors for the wrong number of
/// arguments or a type a conversion cannot take. Mapping keys (`%(name)s`), `*` widths, `%a`, the `#` flag (but with
/// `g`), `%d` with a precision or of a float beyond 64 bits are refused.
pub fn percent(template: &str, args: &Value) -> Result<String, String> {
    match args {
        Value::Tuple(items) => percent_format(template, items),
        other => percent_format(template, std::slice::from_ref(other)),
    }
}

/// [`percent`] of the conversions' values in order.
fn percent_format(template: &str, args: &[Value]) -> Result<String, String> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = template.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut flags = String::new();
        while let Some(&f) = chars.peek().filter(|f| "-+ 0#".contains(**f)) {
            flags.push(f);
            chars.next();
        }
        let mut width = String::new();
        while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
            width.push(d);
            chars.next();
        }
        let mut precision = String::new();
        if chars.peek() == Some(&'.') {
            chars.next();
            precision.push('.');
            while let Some(&d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                precision.push(d);
                chars.next();
            }
        }
        let ty = chars.next().ok_or("ValueError: incomplete format")?;
        if matches!(ty, '(' | '*') {
            return Err("printf-style formatting with `%(name)s` or a `*` width is not supported".into());
        }
        if ty == '%' {
            out.push('%');
            continue;
        }
        let v = next.next().ok_or("TypeError: not enough arguments for format string")?;
        let number = |v: &Value| matches!(v, Value::Int(_) | Value::Float(_) | Value::Bool(_));
        let (value, spec_ty) = match ty {
            // (a float beyond 64 bits, or not finite, is Python's exact int or its error: not here)
            'd' | 'i' | 'u' if number(v) && v.as_scalar().is_some_and(|s| s.to_f64().abs() < 9.2e18) => {
                (Value::Int(v.as_scalar().map_or(0, |s| s.to_i64_trunc())), 'd')
            }
            'x' | 'X' | 'o' if matches!(v, Value::Int(_) | Value::Bool(_)) => (v.clone(), ty),
            'f' | 'F' | 'e' | 'E' | 'g' | 'G' if number(v) => {
                (Value::Float(v.as_scalar().map_or(0.0, |s| s.to_f64())), ty)
            }
            's' => (Value::Str(py_str(v).into()), 's'),
            'r' => (Value::Str(py_repr(v).into()), 's'),
            'd' | 'i' | 'u' | 'a' if number(v) || ty == 'a' => {
                return Err(format!("printf-style `%{ty}` of {} is not supported", py_repr(v)))
            }
            'd' | 'i' | 'u' | 'f' | 'F' | 'e' | 'E' | 'g' | 'G' => {
                return Err(format!("TypeError: %{ty} format: a real number is required, not {}", v.type_name()))
            }
            'x' | 'X' | 'o' => {
                return Err(format!("TypeError: %{ty} format: an integer is required, not {}", v.type_name()))
            }
            _ => return Err(format!("ValueError: unsupported format character '{ty}'")),
        };
        let left = flags.contains('-');
        let sign = if flags.contains('+') {
            "+"
        } else if flags.contains(' ') {
            " "
        } else {
            ""
        };
        let zero = if flags.contains('0') && !left && spec_ty != 's' { "0" } else { "" };
        let align = if left {
            "<"
        } else if spec_ty == 's' {
            ">"
        } else {
            ""
        };
        let alt = if flags.contains('#') { "#" } else { "" };
        let sign = if spec_ty == 's' { "" } else { sign };
        if (spec_ty == 'd' && !precision.is_empty()) || (!alt.is_empty() && !matches!(ty, 'g' | 'G')) {
            return Err(format!("printf-style `%{flags}{width}{precision}{ty}` is not supported"));
        }
        out.push_str(&format_value(&value, &format!("{align}{sign}{alt}{zero}{width}{precision}{spec_ty}"))?);
    }
    if next.next().is_some() {
        return Err("TypeError: not all arguments converted during string formatting".into());
    }
    Ok(out)
}
