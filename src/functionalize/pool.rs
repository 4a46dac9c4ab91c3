//! The terms of `crate::interp::pool`'s pooling functions (`F.max_pool1d`/`max_pool2d`, `F.avg_pool1d`/`avg_pool2d`),
//! built as the reference interpreter computes them: the padded input's strided windows folded in kernel order.

use super::desugar::ints;
use super::ops::{err, A};
use super::state::{diag, FR, FV};
use super::Fz;
use crate::interp::pool::{layout, pad_value, positions, PoolArgs};
use crate::tensor::ops::Binary;
use crate::tensor::Scalar;

impl<'m> Fz<'m> {
    /// `F.max_pool1d`, `max_pool2d`, `avg_pool1d` or `avg_pool2d`: the input padded (its dtype's lowest value for a
    /// maximum, zeros for an average), then the NaN-propagating maximum, or the sum divided by the divisor, of the
    /// kernel's strided windows; a 1-d pool on the input with a height of one.
    pub(super) fn pool(&mut self, name: &str, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let list = |v: &FV, what: &str| -> FR<Vec<i64>> {
            match v.items() {
                Some(items) => items.iter().map(|v| a.int_of(v, what)).collect(),
                None => Ok(vec![a.int_of(v, what)?]),
            }
        };
        let [stride, padding, dilation, ceil, indices, include_pad, divisor] = positions(name);
        let given = |at: Option<(usize, &str)>| at.and_then(|(i, k)| a.opt(i, k)).filter(|v| !matches!(v, FV::None));
        let sizes = |at: Option<(usize, &'static str)>, default: i64| {
            given(at).map(|v| list(v, at.map_or("", |(_, k)| k))).transpose().map(|v| v.unwrap_or(vec![default]))
        };
        let flag = |at: Option<(usize, &str)>, default| at.map_or(Ok(default), |(i, k)| a.bool_or(i, k, default));
        let args = PoolArgs {
            kernel: list(a.req(1, "kernel_size")?, "kernel_size")?,
            stride: given(stride).map(|v| list(v, "stride")).transpose()?,
            padding: sizes(padding, 0)?,
            dilation: sizes(dilation, 1)?,
            ceil_mode: flag(ceil, false)?,
            return_indices: flag(indices, false)?,
            count_include_pad: flag(include_pad, true)?,
            divisor_override: given(divisor).map(|v| a.int_of(v, "divisor_override")).transpose()?,
        };
        let dt = self.roots[x.root].dtype;
        let pool = layout(name, &x.shape, dt, args).map_err(err(span))?;
        let x = if pool.one_d {
            match self.torch(
                "unsqueeze",
                &A::new(vec![FV::Tensor(x), FV::Int(-2)], vec![], span, name.into()),
                false,
            )? {
                FV::Tensor(t) => t,
                other => return diag(span, format!("{name}: unsqueeze gave {}", other.type_name())),
            }
        } else {
            x
        };
        let padded = if pool.p == [0, 0] {
            x
        } else {
            let value = match (pool.avg, pad_value(dt)) {
                (true, _) => FV::Float(0.0),
                (false, Scalar::F(v)) => FV::Float(v),
                (false, other) => FV::Int(other.to_i64_trunc()),
            };
            let pads = ints(&[pool.p[1], pool.p[1], pool.p[0], pool.p[0]]);
            let args = A::new(vec![FV::Tensor(x), pads, FV::Str("constant".into()), value], vec![], span, "pad".into());
            match self.nn_ops("pad", &args)? {
                FV::Tensor(t) => t,
                other => return diag(span, format!("{name}: padding gave {}", other.type_name())),
            }
        };
        let fold = if pool.avg { Binary::Add } else { Binary::Maximum };
        let mut acc: Option<FV> = None;
        for i in 0..pool.k[0] {
            for j in 0..pool.k[1] {
                let (r0, c0) = (i * pool.d[0], j * pool.d[1]);
                let (s, out) = (pool.s, pool.out);
                let win = self
                    .tview(&padded, |t| {
                        t.slice(-2, Some(r0), Some(r0 + s[0] * (out[0] - 1) + 1), s[0])?.slice(
                            -1,
                            Some(c0),
                            Some(c0 + s[1] * (out[1] - 1) + 1),
                            s[1],
                        )
                    })
                    .map_err(err(span))?;
                let win = FV::Tensor(win);
                acc = Some(match acc.take() {
                    // The first window of a maximum joins it with itself, so that even a 1x1 kernel gives a new
                    // tensor (an average divides it).
                    None if pool.avg => win,
                    None => self.elementwise(fold, &[win.clone(), win], span)?,
                    Some(prev) => self.elementwise(fold, &[prev, win], span)?,
                });
            }
        }
        let mut r = match acc {
            Some(r) => r,
            None => return diag(span, format!("{name}: an empty kernel")),
        };
        if pool.avg {
            r = self.elementwise(Binary::Div, &[r, FV::Int(pool.divisor)], span)?;
        }
        if pool.one_d {
            r = self.torch("squeeze", &A::new(vec![r, FV::Int(-2)], vec![], span, name.into()), false)?;
        }
        Ok(r)
    }
}
