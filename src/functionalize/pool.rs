//! The terms of `crate::interp::pool`'s pooling functions (`F.max_pool1d`/`2d`/`3d`, `F.avg_pool1d`/`2d`/`3d`),
//! built as the reference interpreter computes them: the padded input's strided windows folded in kernel order.

use super::desugar::ints;
use super::ops::{err, A};
use super::state::{diag, FR, FV};
use super::Fz;
use crate::interp::pool::{layout, pad_value, positions, PoolArgs};
use crate::tensor::ops::Binary;
use crate::tensor::Scalar;

impl<'m> Fz<'m> {
    /// `F.max_pool1d`/`2d`/`3d` or `F.avg_pool1d`/`2d`/`3d`: the input padded (its dtype's lowest value for a maximum,
    /// zeros for an average), then the NaN-propagating maximum, or the sum divided by the divisor, of the kernel's
    /// strided windows over the last one, two or three dims.
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
        let (n, nd) = (x.shape.len(), pool.k.len());
        let padded = if pool.p.iter().all(|&v| v == 0) {
            x
        } else {
            let value = match (pool.avg, pad_value(dt)) {
                (true, _) => FV::Float(0.0),
                (false, Scalar::F(v)) => FV::Float(v),
                (false, other) => FV::Int(other.to_i64_trunc()),
            };
            // `F.pad`'s widths: the last dim's pair first.
            let widths: Vec<i64> = pool.p.iter().rev().flat_map(|&v| [v, v]).collect();
            let args = A::new(
                vec![FV::Tensor(x), ints(&widths), FV::Str("constant".into()), value],
                vec![],
                span,
                "pad".into(),
            );
            match self.nn_ops("pad", &args)? {
                FV::Tensor(t) => t,
                other => return diag(span, format!("{name}: padding gave {}", other.type_name())),
            }
        };
        let fold = if pool.avg { Binary::Add } else { Binary::Maximum };
        let mut acc: Option<FV> = None;
        for o in pool.offsets() {
            let (s, out) = (&pool.s, &pool.out);
            let win = self
                .tview(&padded, |t| {
                    let mut w = t.clone();
                    for i in 0..nd {
                        w = w.slice((n - nd + i) as i64, Some(o[i]), Some(o[i] + s[i] * (out[i] - 1) + 1), s[i])?;
                    }
                    Ok(w)
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
        let mut r = match acc {
            Some(r) => r,
            None => return diag(span, format!("{name}: an empty kernel")),
        };
        if pool.avg {
            r = self.elementwise(Binary::Div, &[r, FV::Int(pool.divisor)], span)?;
        }
        Ok(r)
    }
}
