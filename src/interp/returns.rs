//! The check of what a program returns against its return annotation (`-> f32[4, 3]`, `-> tuple[f32[2], i64[3]]`).
//! Every engine runs it on the dtypes and shapes it returns, so a program whose annotation is wrong fails the same
//! way everywhere instead of returning something its caller does not expect. The annotation is optional.

use crate::frontend::ast::TypeAnn;
use crate::tensor::{fmt_shape, DType};

/// Checks returned values, each as (dtype, shape), against `ann`; `tuple` says whether the program returned a tuple.
/// Numbers count as 0-dim tensors (`int` as i64, `float` as f64, `bool` as bool), as they are written out.
pub fn check_returns(name: &str, ann: &TypeAnn, got: &[(DType, Vec<usize>)], tuple: bool) -> Result<(), String> {
    let shown = show_got(got, tuple);
    let wrong = || format!("`{name}` returns {shown}, but its annotation says `-> {}`", show_ann(ann));
    match ann {
        TypeAnn::Opaque => Ok(()),
        TypeAnn::Tuple(items) => {
            if !tuple || items.len() != got.len() {
                return Err(wrong());
            }
            if items.iter().zip(got).all(|(a, g)| matches_one(a, g)) {
                Ok(())
            } else {
                Err(wrong())
            }
        }
        one if !tuple && got.len() == 1 && matches_one(one, &got[0]) => Ok(()),
        _ => Err(wrong()),
    }
}

fn matches_one(ann: &TypeAnn, (dtype, shape): &(DType, Vec<usize>)) -> bool {
    match ann {
        TypeAnn::Tensor { dtype: d, shape: s } => d == dtype && s == shape,
        TypeAnn::Int => *dtype == DType::I64 && shape.is_empty(),
        TypeAnn::Float => *dtype == DType::F64 && shape.is_empty(),
        TypeAnn::Bool => *dtype == DType::Bool && shape.is_empty(),
        TypeAnn::Opaque => true,
        TypeAnn::Tuple(_) => false,
    }
}

fn show_one((dtype, shape): &(DType, Vec<usize>)) -> String {
    format!("{}{}", dtype.annotation(), fmt_shape(shape))
}

fn show_got(got: &[(DType, Vec<usize>)], tuple: bool) -> String {
    match (tuple, got) {
        (false, [one]) => show_one(one),
        _ => format!("a tuple ({})", got.iter().map(show_one).collect::<Vec<_>>().join(", ")),
    }
}

fn show_ann(ann: &TypeAnn) -> String {
    match ann {
        TypeAnn::Tensor { dtype, shape } => format!("{}{}", dtype.annotation(), fmt_shape(shape)),
        TypeAnn::Int => "int".into(),
        TypeAnn::Float => "float".into(),
        TypeAnn::Bool => "bool".into(),
        TypeAnn::Tuple(items) => format!("tuple[{}]", items.iter().map(show_ann).collect::<Vec<_>>().join(", ")),
        TypeAnn::Opaque => "...".into(),
    }
}
