//! Python's binding of a call's arguments to a helper's parameters, one for both engines (the reference
//! interpreter's `call_function`, the functionalizer's `inline`): only the values they bind differ.

use crate::frontend::ast::{is_default_capture, Expr, Function};

/// The parameters of `f` bound to a call's positional arguments `pos` and keywords `kw`, in parameter order, then
/// `*args` (made by `tuple` of the positional arguments left) and `**kwargs` (made by `dict` of the keywords no named
/// parameter takes, in the order given) where `f` takes them. A parameter takes the positional
/// argument at its place, else its keyword, else its default, evaluated by `default` in a scope that holds only the
/// lambda's frozen defaults among the keywords (a default is evaluated where the function was defined). Errors are
/// Python's messages, made by `error`; too many positional arguments, then an unexpected keyword, are reported
/// before any parameter is bound.
pub(crate) fn bind_args<'f, V: Clone, E>(
    f: &'f Function,
    pos: Vec<V>,
    kw: &[(String, V)],
    mut default: impl FnMut(&'f Expr, Vec<(String, V)>) -> Result<V, E>,
    error: impl Fn(String) -> E,
    tuple: impl FnOnce(Vec<V>) -> V,
    dict: impl FnOnce(Vec<(String, V)>) -> V,
) -> Result<Vec<(String, V)>, E> {
    let npos = f.positional();
    if f.vararg.is_none() && pos.len() > npos {
        return Err(error(format!("{}() takes {} arguments but {} were given", f.name, npos, pos.len())));
    }
    if let Some((k, _)) = kw.iter().find(|(k, _)| f.kwarg.is_none() && !f.takes_keyword(k)) {
        return Err(error(format!("{}() got an unexpected keyword argument '{k}'", f.name)));
    }
    let mut bound = Vec::with_capacity(f.params.len() + 1);
    let mut pos = pos.into_iter();
    for (i, p) in f.params.iter().enumerate() {
        let next = if i < npos { pos.next() } else { None };
        if next.is_some() && kw.iter().any(|(k, _)| *k == p.name) {
            return Err(error(format!("{}() got multiple values for argument '{}'", f.name, p.name)));
        }
        let v = match next {
            Some(v) => v,
            None => match kw.iter().find(|(k, _)| *k == p.name) {
                Some((_, v)) => v.clone(),
                None => match &p.default {
                    Some(d) => default(d, kw.iter().filter(|(k, _)| is_default_capture(k)).cloned().collect())?,
                    None => return Err(error(format!("{}() missing required argument '{}'", f.name, p.name))),
                },
            },
        };
        bound.push((p.name.clone(), v));
    }
    if let Some((_, va)) = &f.vararg {
        bound.push((va.name.clone(), tuple(pos.collect())));
    }
    if let Some(k) = &f.kwarg {
        bound.push((k.name.clone(), dict(kw.iter().filter(|(k, _)| !f.takes_keyword(k)).cloned().collect())));
    }
    Ok(bound)
}
