//! `F.conv1d`/`conv2d`/`conv3d` as one matmul (im2col), for both engines: the input is zero-padded into a fresh
//! contiguous tensor, whose windows are one strided view `[N, groups, C/groups, out..., kernel...]` (elements repeat
//! where windows overlap); permuted and reshaped to `[N, groups, L, C/groups * kernel]`, it is multiplied by the
//! weights reshaped to `[groups, C/groups * kernel, O/groups]`, and the result is laid out as `[N, O, out...]`.
//! PyTorch's CPU kernels sum in another order: results agree within the float tolerance, not bit for bit.
//!
//! [`conv_plan`] holds PyTorch's checks (with its messages) and the layouts; each engine runs the steps with its ops.

use super::args::{int_list, Args};
use super::value::Value;
use crate::tensor::{ops, DType, Scalar, Tensor};

/// The `padding` argument: sizes, or PyTorch's strings.
pub(crate) enum ConvPadding {
    Sizes(Vec<i64>),
    Same,
    Valid,
}

impl ConvPadding {
    /// `padding='NAME'`.
    pub(crate) fn named(s: &str) -> Result<ConvPadding, String> {
        match s {
            "same" => Ok(ConvPadding::Same),
            "valid" => Ok(ConvPadding::Valid),
            _ => Err(format!("Invalid padding string: '{s}'")),
        }
    }
}

/// The layouts of one convolution (see the module doc).
pub(crate) struct ConvPlan {
    /// Whether the input has a batch dim (else one is added, and removed from the result).
    pub batched: bool,
    /// The batched input's shape, zero-padded.
    pub padded: Vec<usize>,
    /// Where the input starts in the padded tensor, per dim.
    pub start: Vec<usize>,
    /// The windows: shape and strides of the view of the contiguous padded tensor.
    pub cols: (Vec<usize>, Vec<isize>),
    /// The permutation to `[N, groups, out..., C/groups, kernel...]`, then the matrix shape.
    pub perm: Vec<i64>,
    pub cols_matrix: Vec<i64>,
    /// The weights as `[groups, O/groups, C/groups * kernel]` (transposed to the right operand).
    pub w_matrix: Vec<i64>,
    /// The result `[N, O, out...]`, and the bias's shape to broadcast against it.
    pub out: Vec<i64>,
    pub bias: Vec<i64>,
}

/// Checks a convolution as PyTorch does (its messages) and lays it out. `spatial` is 1, 2 or 3; `bias` is the bias's
/// shape where there is one.
#[allow(clippy::too_many_arguments)]
pub(crate) fn conv_plan(
    name: &str,
    spatial: usize,
    (x, xd): (&[usize], DType),
    (w, wd): (&[usize], DType),
    bias: Option<&[usize]>,
    stride: Vec<i64>,
    padding: ConvPadding,
    dilation: Vec<i64>,
    groups: i64,
) -> Result<ConvPlan, String> {
    if x.len() != spatial + 1 && x.len() != spatial + 2 {
        return Err(format!(
            "Expected {}D (unbatched) or {}D (batched) input to {name}, but got input of size: {x:?}",
            spatial + 1,
            spatial + 2
        ));
    }
    if xd != wd {
        return Err(format!("expected scalar type {} but found {}", xd.name(), wd.name()));
    }
    if xd == DType::Bool {
        return Err(format!("\"{name}\" not implemented for 'Bool'"));
    }
    let batched = x.len() == spatial + 2;
    let xb: Vec<usize> = if batched { x.to_vec() } else { [&[1], x].concat() };
    let each = |v: Vec<i64>, what: &str| -> Result<Vec<i64>, String> {
        match v.len() {
            1 => Ok(vec![v[0]; spatial]),
            n if n == spatial => Ok(v),
            _ => Err(format!(
                "expected {what} to be a single integer value or a list of {spatial} values to match the convolution dimensions, but got {what}={v:?}"
            )),
        }
    };
    let (stride, dilation) = (each(stride, "stride")?, each(dilation, "dilation")?);
    if stride.iter().any(|&s| s <= 0) {
        return Err("non-positive stride is not supported".into());
    }
    if dilation.iter().any(|&d| d <= 0) {
        return Err("dilation should be greater than zero".into());
    }
    if groups <= 0 {
        return Err("non-positive groups is not supported".into());
    }
    if w.len() != spatial + 2 {
        return Err(format!(
            "Expected {}-dimensional weight for {name}, but got {}-dimensional weight of size {w:?}",
            spatial + 2,
            w.len()
        ));
    }
    let k: Vec<i64> = w[2..].iter().map(|&n| n as i64).collect();
    // Padding per spatial dim, before and after.
    let pads: Vec<(i64, i64)> = match padding {
        ConvPadding::Valid => vec![(0, 0); spatial],
        ConvPadding::Same if stride.iter().any(|&s| s != 1) => {
            return Err("padding='same' is not supported for strided convolutions".into())
        }
        ConvPadding::Same => (0..spatial)
            .map(|i| {
                let total = dilation[i] * (k[i] - 1);
                (total / 2, total - total / 2)
            })
            .collect(),
        ConvPadding::Sizes(p) => {
            let p = each(p, "padding")?;
            if p.iter().any(|&v| v < 0) {
                return Err("negative padding is not supported".into());
            }
            p.iter().map(|&v| (v, v)).collect()
        }
    };
    let (o, c, g) = (w[0] as i64, xb[1] as i64, groups);
    if o % g != 0 {
        return Err(format!(
            "Given groups={g}, expected weight to be divisible by {g} at dimension 0, but got weight of size [{w:?}] instead"
        ));
    }
    if c != w[1] as i64 * g {
        return Err(format!(
            "Given groups={g}, weight of size {w:?}, expected input{xb:?} to have {} channels, but got {c} channels instead",
            w[1] as i64 * g
        ));
    }
    if let Some(b) = bias {
        if b.len() != 1 || b[0] as i64 != o {
            return Err(format!(
                "Given weight of size {w:?}, expected bias to be 1-dimensional with {o} elements, but got bias of size {b:?} instead"
            ));
        }
    }
    let padded_len: Vec<i64> = (0..spatial).map(|i| xb[2 + i] as i64 + pads[i].0 + pads[i].1).collect();
    let kernel_len: Vec<i64> = (0..spatial).map(|i| dilation[i] * (k[i] - 1) + 1).collect();
    if padded_len.iter().zip(&kernel_len).any(|(p, k)| k > p) {
        let show = |v: &[i64]| v.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(" x ");
        return Err(format!(
            "Calculated padded input size per channel: ({}). Kernel size: ({}). Kernel size can't be greater than actual input size",
            show(&padded_len),
            show(&kernel_len)
        ));
    }
    let out_len: Vec<i64> = (0..spatial).map(|i| (padded_len[i] - kernel_len[i]) / stride[i] + 1).collect();
    let mut padded = xb[..2].to_vec();
    padded.extend(padded_len.iter().map(|&n| n as usize));
    let mut start = vec![0, 0];
    start.extend(pads.iter().map(|p| p.0 as usize));
    // Contiguous strides of the padded tensor, then the windows' view.
    let mut st = vec![1isize; padded.len()];
    for d in (0..padded.len() - 1).rev() {
        st[d] = st[d + 1] * padded[d + 1] as isize;
    }
    let cg = (c / g) as usize;
    let mut shape = vec![xb[0], g as usize, cg];
    let mut strides = vec![st[0], st[1] * cg as isize, st[1]];
    shape.extend(out_len.iter().map(|&n| n as usize));
    strides.extend((0..spatial).map(|i| st[2 + i] * stride[i] as isize));
    shape.extend(k.iter().map(|&n| n as usize));
    strides.extend((0..spatial).map(|i| st[2 + i] * dilation[i] as isize));
    let s = spatial as i64;
    let mut perm: Vec<i64> = vec![0, 1];
    perm.extend(3..3 + s);
    perm.push(2);
    perm.extend(3 + s..3 + 2 * s);
    let (l, kp): (i64, i64) = (out_len.iter().product(), k.iter().product());
    let mut out = vec![xb[0] as i64, o];
    out.extend(&out_len);
    let mut bias_shape = vec![1, o];
    bias_shape.extend(std::iter::repeat_n(1, spatial));
    Ok(ConvPlan {
        batched,
        padded,
        start,
        cols: (shape, strides),
        perm,
        cols_matrix: vec![xb[0] as i64, g, l, c / g * kp],
        w_matrix: vec![g, o / g, c / g * kp],
        out,
        bias: bias_shape,
    })
}

/// Which convolution a name is (`conv2d`: 2 spatial dims).
pub(crate) fn conv_spatial(name: &str) -> Option<usize> {
    match name {
        "conv1d" => Some(1),
        "conv2d" => Some(2),
        "conv3d" => Some(3),
        _ => None,
    }
}

/// The reference's convolution (see the module doc).
pub(super) fn conv(name: &str, spatial: usize, a: &Args) -> Result<Value, String> {
    let (x, w) = (a.tensor(0, "input")?, a.tensor(1, "weight")?);
    let given = |i: usize, n: &str| a.opt(i, n).filter(|v| !matches!(v, Value::None));
    let bias = given(2, "bias").map(|_| a.tensor(2, "bias")).transpose()?;
    let list = |i: usize, n: &str| given(i, n).map(int_list).transpose().map(|v| v.unwrap_or(vec![1]));
    let padding = match given(4, "padding") {
        None => ConvPadding::Sizes(vec![0]),
        Some(Value::Str(s)) => ConvPadding::named(s)?,
        Some(v) => ConvPadding::Sizes(int_list(v)?),
    };
    let groups = given(6, "groups").map(super::args::to_int).transpose()?.unwrap_or(1);
    let plan = conv_plan(
        name,
        spatial,
        (&x.shape, x.dtype()),
        (&w.shape, w.dtype()),
        bias.as_ref().map(|b| b.shape.as_slice()),
        list(3, "stride")?,
        padding,
        list(5, "dilation")?,
        groups,
    )?;
    let xb = if plan.batched { x } else { x.unsqueeze(0)? };
    let padded = Tensor::full(xb.dtype(), &plan.padded, Scalar::I(0))?;
    let mut inside = padded.clone();
    for (d, (&s, &n)) in plan.start.iter().zip(&xb.shape).enumerate() {
        inside = inside.narrow(d as i64, s as i64, n as i64)?;
    }
    ops::write_result(&inside, &xb, false)?;
    let (shape, strides) = plan.cols.clone();
    let cols = padded.restride(shape, strides, padded.offset).permute(&plan.perm)?.reshape(&plan.cols_matrix)?;
    let wm = w.reshape(&plan.w_matrix)?.transpose(1, 2)?;
    let mut out = crate::tensor::reduce::matmul(&cols, &wm)?.permute(&[0, 1, 3, 2])?.reshape(&plan.out)?;
    if let Some(b) = bias {
        let b = b.reshape(&plan.bias)?;
        out = ops::binary(ops::Binary::Add, &ops::Operand::T(out), &ops::Operand::T(b))?;
    }
    Ok(Value::Tensor(if plan.batched { out } else { out.squeeze(Some(&[0]))? }))
}
