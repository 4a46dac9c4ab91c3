//! Constant tensors made from values known while functionalizing (`torch.tensor(PRIORS)` of a list built in Python
//! loops, `torch.LongTensor([...])`): up to [`LITERAL_ELEMENTS`] elements a join of literals the rules can read and
//! fold; larger ones (SSD's 8732 priors) registered data that the plan reads as a buffer (`ir::consts`).

use super::args::err;
use super::state::{FR, FV};
use super::Fz;
use crate::diag::Span;
use crate::ir::{Node, OpName};
use crate::tensor::{DType, Scalar};

/// The most elements a constant tensor is spelled with as literals.
const LITERAL_ELEMENTS: usize = 4096;

impl Fz<'_> {
    /// A constant tensor from static values: up to [`LITERAL_ELEMENTS`] a join of literals the rules can read.
    pub(super) fn const_data(&mut self, dtype: DType, shape: &[usize], values: &[Scalar], span: Span) -> FR<FV> {
        if values.len() > LITERAL_ELEMENTS {
            // Too many to spell as literals: a buffer the plan reads, named by its data (`ir::consts`).
            let name = crate::ir::consts::register(dtype, shape, values).map_err(err(span))?;
            let n = self.t.leaf(Node::Name(crate::ir::ParamName(name)));
            let id = self.t.leaf(Node::Input(n));
            self.t.set_ty(id, crate::ir::Ty::Tensor(dtype, shape.to_vec()));
            return Ok(FV::Tensor(self.fresh(super::state::TId { id, depth: 0 }, None, span)?));
        }
        if values.is_empty() {
            let r = self.full(shape, dtype, Scalar::I(0)).map_err(err(span))?;
            return Ok(FV::Tensor(self.fresh(r, None, span)?));
        }
        let parts: Vec<egg::Id> = values
            .iter()
            .map(|v| self.full(&[1], dtype, *v).map(|t| t.id))
            .collect::<Result<_, _>>()
            .map_err(err(span))?;
        let d = self.t.leaf(Node::Int(0));
        let mut args = vec![d];
        args.extend(parts);
        let c = self.t.op(OpName::Cat, args).map_err(err(span))?;
        let c = self.reshape_value(c, shape, span)?;
        Ok(FV::Tensor(self.fresh(c, None, span)?))
    }
}
