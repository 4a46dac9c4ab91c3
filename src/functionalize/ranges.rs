//! `torch.arange` and the deprecated `torch.range` (its end included): one `arange` term each, over bounds that
//! must be known when the program is converted.

use super::ops::{err, A};
use super::state::{Stop, FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::{DType, Scalar};

impl<'m> Fz<'m> {
    /// `arange`: one `arange` term of the bounds, which must be known now.
    pub(super) fn arange(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let num =
            |v: &FV| a.number(v).ok_or_else(|| Stop::NeedsStatic(span, "arange bounds known only at run time".into()));
        let (s, e, st) = crate::interp::creation::arange_bind(&a.pos, |k| a.get(usize::MAX, k)).map_err(err(span))?;
        let start = s.map(num).transpose()?.unwrap_or(Scalar::I(0));
        let (end, step) = (num(e)?, st.map(num).transpose()?.unwrap_or(Scalar::I(1)));
        let all_int = [start, end, step].iter().all(|s| !matches!(s, Scalar::F(_)));
        let dt = a.dtype(99, "dtype")?.unwrap_or(if all_int { DType::I64 } else { DType::F32 });
        let (s, e, st) = (start.to_f64(), end.to_f64(), step.to_f64());
        let n = crate::interp::creation::arange_len(s, e, st).map_err(err(span))? as i64;
        self.arange_term(dt, start, step, n, all_int, span)
    }

    /// The `arange` term of `n` values of dtype `dt` from `start` by `step`, given as int literals where `int`.
    fn arange_term(&mut self, dt: DType, start: Scalar, step: Scalar, n: i64, int: bool, span: Span) -> FR<FV> {
        let d = self.t.leaf(Node::DType(dt));
        let lit = |x: Scalar| match int {
            true => Node::Int(x.to_i64_trunc()),
            false => Node::Float(crate::ir::FloatLit(x.to_f64())),
        };
        let (ls, lst) = (self.t.leaf(lit(start)), self.t.leaf(lit(step)));
        let nn = self.t.leaf(Node::Int(n));
        self.fresh_op(OpName::Arange, vec![d, ls, lst, nn], None, span)
    }

    /// The deprecated `torch.range` (`crate::interp::creation::range_args`): `arange`'s term over its length.
    pub(super) fn torch_range(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let num = |v: &FV| {
            a.number(v).ok_or_else(|| Stop::NeedsStatic(span, "torch.range bounds known only at run time".into()))
        };
        let [s, e, st] = crate::interp::creation::range_args(&a.pos, |k| a.get(usize::MAX, k)).map_err(err(span))?;
        let (start, end) = (num(s.expect("checked"))?, num(e.expect("checked"))?);
        let step = st.map(num).transpose()?.unwrap_or(Scalar::I(1));
        let dt = a.dtype(99, "dtype")?.unwrap_or(DType::F32);
        let [s0, e0, st0] = crate::interp::creation::range_bounds(dt, [start.to_f64(), end.to_f64(), step.to_f64()]);
        let n = crate::interp::creation::range_len(s0, e0, st0).map_err(err(span))?;
        self.arange_term(dt, Scalar::F(s0), Scalar::F(st0), n as i64, !dt.is_float(), span)
    }
}
