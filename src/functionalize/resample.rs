//! `F.interpolate` as gathers along each spatial dim and, for the linear modes, their weighted sum: the plan (source
//! indices and weights, PyTorch's checks) is the reference interpreter's (`interp::resample`), so both engines
//! compute the same sums in the same order.

use super::ops::{err, A};
use super::python::fv_static;
use super::state::{needs_static, FR, FV};
use super::Fz;
use crate::interp::resample::{check_dtype, plan, request};
use crate::interp::Value;
use crate::tensor::ops::Binary;
use crate::tensor::{DType, Scalar};

const NAMES: [&str; 7] =
    ["input", "size", "scale_factor", "mode", "align_corners", "recompute_scale_factor", "antialias"];

impl<'m> Fz<'m> {
    pub(super) fn interpolate(&mut self, a: &A) -> FR<FV> {
        let span = a.span;
        let x = a.tensor(0, "input")?;
        let dt = self.roots[x.root].dtype;
        check_dtype(dt).map_err(err(span))?;
        let mut vals: Vec<Option<Value>> = vec![None];
        for (i, name) in NAMES.iter().enumerate().skip(1) {
            vals.push(match a.opt(i, name) {
                None => None,
                Some(v) => match fv_static(v) {
                    Some(v) => Some(v),
                    None => return needs_static(span, format!("interpolate's `{name}` known only at run time")),
                },
            });
        }
        let (_, axes) = plan(&x.shape, dt == DType::F64, &request(|i, _| vals[i].as_ref())).map_err(err(span))?;
        let mut y = FV::Tensor(x);
        for ax in axes {
            let index = |fz: &mut Self, y: &FV, idx: &[i64]| -> FR<FV> {
                let FV::Tensor(y) = y else { unreachable!("gathers give tensors") };
                let ints: Vec<Scalar> = idx.iter().map(|&i| Scalar::I(i)).collect();
                let ix = fz.const_data(DType::I64, &[idx.len()], &ints, span)?;
                let mut at = vec![FV::None; ax.dim];
                at.push(ix);
                fz.index_read(y, &at, span)
            };
            let Some((i1, w0, w1)) = &ax.linear else {
                y = index(self, &y, &ax.i0)?;
                continue;
            };
            let FV::Tensor(t) = &y else { unreachable!("gathers give tensors") };
            let mut wshape = vec![w0.len()];
            wshape.resize(t.shape.len() - ax.dim, 1);
            let weight = |fz: &mut Self, w: &[f64]| {
                let s: Vec<Scalar> = w.iter().map(|&v| Scalar::F(v)).collect();
                fz.const_data(dt, &wshape, &s, span)
            };
            let (g0, g1) = (index(self, &y, &ax.i0)?, index(self, &y, i1)?);
            let (k0, k1) = (weight(self, w0)?, weight(self, w1)?);
            let a0 = self.elementwise(Binary::Mul, &[g0, k0], span)?;
            let a1 = self.elementwise(Binary::Mul, &[g1, k1], span)?;
            y = self.elementwise(Binary::Add, &[a0, a1], span)?;
        }
        Ok(y)
    }
}
