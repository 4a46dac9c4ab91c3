//! Strings the program formats: `text.format(...)` and `text % args`, of values known before the program runs (see
//! `interp::pyfmt`).

use super::args::err;
use super::python::fv_static;
use super::state::{needs_static, FR, FV};
use crate::diag::Span;
use crate::interp::pyfmt;

/// `text.format(*pos, **kw)` of values known before the program runs (see `interp::pyfmt::str_format`).
pub(super) fn str_format(text: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
    // A value known only when the program runs (a loop's variable, say) unrolls the loop, where it is known.
    let known = |v: &FV| match fv_static(v) {
        Some(x) => Ok(x),
        None => needs_static(span, format!("str.format() of a {} known only when the program runs", v.type_name())),
    };
    let pos = pos.iter().map(known).collect::<FR<Vec<_>>>()?;
    let kw = kw.iter().map(|(k, v)| Ok((k.clone(), known(v)?))).collect::<FR<Vec<_>>>()?;
    let s = pyfmt::str_format(text, &pos, &kw).map_err(err(span))?;
    Ok(FV::Str(s.into()))
}

/// `text % args` of values known before the program runs (see `interp::pyfmt::percent_format`).
pub(super) fn percent_format(text: &str, args: &FV, span: Span) -> FR<FV> {
    let items = match args {
        FV::Tuple(items) => items.to_vec(),
        other => vec![other.clone()],
    };
    let known = |v: &FV| match fv_static(v) {
        Some(x) => Ok(x),
        None => needs_static(span, format!("`%` formatting of a {} known only when the program runs", v.type_name())),
    };
    let items = items.iter().map(known).collect::<FR<Vec<_>>>()?;
    let s = pyfmt::percent_format(text, &items).map_err(err(span))?;
    Ok(FV::Str(s.into()))
}
