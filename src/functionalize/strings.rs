//! Strings the program formats: `text.format(...)` and `text % args`, of values known before the program runs (see
//! `interp::pyfmt`).

use super::args::err;
use super::python::fv_static;
use super::state::{needs_static, FR, FV};
use crate::diag::Span;
use crate::interp::{pyfmt, Value};

/// `v` as the reference interpreter's value, known before the program runs (`what` formats it).
fn known(v: &FV, what: &str, span: Span) -> FR<Value> {
    match fv_static(v) {
        Some(x) => Ok(x),
        // A value known only when the program runs (a loop's variable, say) unrolls the loop, where it is known.
        None => needs_static(span, format!("{what} of a {} known only when the program runs", v.type_name())),
    }
}

/// `text.format(*pos, **kw)` of values known before the program runs (see `interp::pyfmt::str_format`).
pub(super) fn str_format(text: &str, pos: &[FV], kw: &[(String, FV)], span: Span) -> FR<FV> {
    let pos = pos.iter().map(|v| known(v, "str.format()", span)).collect::<FR<Vec<_>>>()?;
    let kw = kw.iter().map(|(k, v)| Ok((k.clone(), known(v, "str.format()", span)?))).collect::<FR<Vec<_>>>()?;
    let s = pyfmt::str_format(text, &pos, &kw).map_err(err(span))?;
    Ok(FV::Str(s.into()))
}

/// `text % args` of values known before the program runs (see `interp::pyfmt::percent`).
pub(super) fn percent_format(text: &str, args: &FV, span: Span) -> FR<FV> {
    let s = pyfmt::percent(text, &known(args, "`%` formatting", span)?).map_err(err(span))?;
    Ok(FV::Str(s.into()))
}
