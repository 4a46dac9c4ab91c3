"""Ops that optimizer steps, LLM decode steps and detection code use (issue #14): index_copy_ into KV caches,
lerp/addcmul/addcdiv updates, softplus, atan, norms, einsum and division with a rounding mode. Each program is
written after a public original named in its comment (same computation, same imperative style)."""
from __future__ import annotations
import math
import torch
import torch.nn.functional as F


# After llama's Attention.forward (cache written at the decode positions with index_copy_) and gpt-fast's KVCache.
def kv_cache_index_copy(
    k_cache: f32[1, 2, 8, 4], v_cache: f32[1, 2, 8, 4], k: f32[1, 2, 3, 4], v: f32[1, 2, 3, 4], start: int = 4
) -> tuple[f32[1, 2, 8, 4], f32[1, 2, 3, 8], f32[1, 2, 3, 4]]:
    pos = torch.arange(start, start + 3)
    k_cache.index_copy_(2, pos, k)
    v_out = torch.index_copy(v_cache, 2, pos, v)
    scores = torch.einsum("bhqd,bhkd->bhqk", k, k_cache) / math.sqrt(4.0)
    att = F.softmax(scores, dim=-1)
    out = torch.einsum("bhqk,bhkd->bhqd", att, v_out)
    return k_cache, att, out


# After a decode loop writing one position per step (gpt-fast generate -> KVCache.update) with index_copy_.
def decode_loop_cache(cache: f32[2, 6, 3], x: f32[4, 2, 3], w: f32[3, 3]) -> tuple[f32[2, 6, 3], f32[2, 3]]:
    h = x[0]
    for t in range(4):
        h = torch.tanh(h @ w + x[t])
        cache.index_copy_(1, torch.tensor([t + 1]), h.unsqueeze(1))
    return cache, h


# After torch.optim.Adam's _single_tensor_adam (lerp_ for the first moment, addcmul_/addcdiv_ for the rest).
def adam_step(
    param: f32[16, 8], grad: f32[16, 8], exp_avg: f32[16, 8], exp_avg_sq: f32[16, 8], step: int = 3
) -> tuple[f32[16, 8], f32[16, 8], f32[16, 8]]:
    lr, beta1, beta2, eps = 1e-2, 0.9, 0.999, 1e-8
    exp_avg_sq.abs_()
    exp_avg.lerp_(grad, 1 - beta1)
    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
    param.addcdiv_(exp_avg, denom, value=-step_size)
    return param, exp_avg, exp_avg_sq


# After torch.optim.RMSprop's _single_tensor_rmsprop (centered=False) and SGD with momentum.
def rmsprop_sgd(
    param: f32[32], grad: f32[32], square_avg: f32[32], buf: f32[32]
) -> tuple[f32[32], f32[32], f32[32]]:
    alpha, lr, eps = 0.99, 1e-2, 1e-8
    square_avg.abs_()
    square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
    avg = square_avg.sqrt().add_(eps)
    param.addcdiv_(grad, avg, value=-lr)
    buf.mul_(0.9).add_(grad, alpha=1 - 0.1)
    p2 = torch.addcmul(param, buf, grad)
    return param, square_avg, torch.addcdiv(p2, buf, avg)


# After timm's ModelEmaV3 (lerp_ with a small weight) and a tensor-weight lerp taking both of PyTorch's branches.
def ema_lerp(ema: f32[6, 5], model: f32[6, 5], w: f32[6, 5]) -> tuple[f32[6, 5], f32[6, 5], f32[6, 5]]:
    ema.lerp_(model, 1.0 - 0.999)
    big = torch.lerp(ema, model, 0.75)
    return ema, big, torch.lerp(model, ema, w * 1.5)


# After torch.nn.utils.clip_grad_norm_ (foreach=False): per-tensor norms, a total norm, a clamped coefficient.
def clip_grad_norm(g1: f32[8, 4], g2: f32[10], g3: f32[3, 3, 2]) -> tuple[f32[8, 4], f32[10], f32[3, 3, 2], f32[()]]:
    grads = [g1, g2, g3]
    max_norm = 0.5
    norms = [torch.linalg.vector_norm(g, 2.0) for g in grads]
    total_norm = torch.linalg.vector_norm(torch.stack(norms), 2.0)
    clip_coef = max_norm / (total_norm + 1e-6)
    clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
    for g in grads:
        g.mul_(clip_coef_clamped)
    return g1, g2, g3, total_norm


# Norm variants: the inf-norm of clip_grad_norm_, torch.norm(p, dim, keepdim) as in F.normalize-style code.
def norm_variants(x: f32[5, 6]) -> tuple[f32[()], f32[6], f32[5, 1], f32[5], f32[6], f32[5]]:
    inf = torch.linalg.vector_norm(x, float("inf"))
    l1 = torch.linalg.vector_norm(x, ord=1, dim=0)
    l2 = torch.norm(x, p=2, dim=1, keepdim=True)
    l0 = torch.linalg.vector_norm(x, 0, dim=1)
    l3 = x.norm(3, dim=0)
    ninf = torch.linalg.vector_norm(x, ord=-math.inf, dim=(1,))
    return inf, l1, l2, l0, l3, ninf


# After Mamba's selective-scan preprocessing (dt = softplus(dt + dt_bias)) and softplus with beta and threshold.
def mamba_dt_softplus(dt: f32[4, 16], dt_bias: f32[16]) -> tuple[f32[4, 16], f32[4, 16], f32[4, 16]]:
    d = F.softplus(dt + dt_bias)
    e = F.softplus(dt * 30.0, beta=2.0, threshold=10.0)
    # exp overflows to inf where x * beta is past the threshold: the where must still pick x.
    return d, e, torch.exp(-d) * F.softplus(dt * 200.0, beta=0.5, threshold=80.0)


# After yolov5's bbox_iou(CIoU=True): the aspect-ratio term uses atan of width/height ratios.
def ciou_aspect(b1: f32[20, 4], b2: f32[20, 4]) -> tuple[f32[20], f32[20]]:
    w1, h1 = b1[:, 2].abs() + 0.1, b1[:, 3].abs() + 0.1
    w2, h2 = b2[:, 2].abs() + 0.1, b2[:, 3].abs() + 0.1
    v = (4 / math.pi**2) * torch.pow(torch.atan(w2 / h2) - torch.atan(w1 / h1), 2)
    alpha = v / (v - 0.5 + (1 + 1e-7))
    ang = torch.atan2(b1[:, 1], b2[:, 0]) + torch.arctan(b1[:, 0] * 3.0)
    return v * alpha, ang


# After detection post-processing (flat top-k index -> anchor and class with rounding_mode='floor') and
# integer/float division rounding toward zero.
def div_rounding(scores: f32[6, 5], a: f32[8], b: f32[8], n: i64[8]) -> tuple[i64[4], i64[4], f32[8], i64[8], i64[8]]:
    _, idx = scores.flatten().topk(4)
    anchor = torch.div(idx, 5, rounding_mode="floor")
    cls = idx - anchor * 5
    q = torch.div(a * 7.0, b.abs() + 0.25, rounding_mode="trunc")
    m = n - 5
    t = m.div(3, rounding_mode="trunc")
    m.div_(-4, rounding_mode="trunc")
    return anchor, cls, q, t, m


# After yolov5's build_targets (offsets made with new_tensor, gains with new_ones) and new_zeros/new_full buffers.
def new_tensors(targets: f32[5, 6]) -> tuple[f32[5, 2, 2], f32[7], f32[3, 6], f32[2, 6]]:
    g = 0.5
    off = targets.new_tensor([[0, 0], [1, 0]]) * g
    gain = targets.new_ones(7)
    gain[2:6] = 8.0
    xy = targets[:, None, 2:4] - off
    return xy, gain, targets.new_zeros((3, 6)) + targets[0], targets.new_full((2, 6), -1.0)


# einsum forms real code writes: RoPE frequencies (outer product), transposes, sums, matmuls, three operands.
def einsum_forms(
    t: f32[6], inv_freq: f32[4], x: f32[3, 5], y: f32[5, 2], z: f32[2, 4], u: f32[1, 5]
) -> tuple[f32[6, 4], f32[5, 3], f32[5], f32[3, 2], f32[3, 4], f32[3, 5], f32[3]]:
    freqs = torch.einsum("i,j->ij", t, inv_freq)
    tr = torch.einsum("ij->ji", x)
    s = torch.einsum("ij->j", x)
    mm = torch.einsum("ij,jk", x, y)
    chain = torch.einsum("ij,jk,kl->il", x, y, z)
    bcast = torch.einsum("ij,ij->ij", x, u)
    rowdot = torch.einsum("ij, ij -> i", x, x)
    return freqs, tr, s, mm, chain, bcast, rowdot


# index_add_ with alpha and duplicate indices (accumulated), as scatter-style pooling code writes it.
def index_add_pool(x: f32[5, 3], src: f32[4, 3], idx: i64[4]) -> tuple[f32[5, 3], f32[2, 3]]:
    x.index_add_(0, idx % 5, src, alpha=0.5)
    pooled = torch.zeros(2, 3).index_add(0, idx % 2, src)
    return x, pooled


# In-place view ops (as in fairseq's and detectron2's `x.unsqueeze_(0)` / `squeeze_`): the tensor's own shape
# changes; other views keep theirs.
def squeeze_unsqueeze_inplace(a: f32[4, 1, 3]) -> tuple[f32[4, 3], f32[1, 4, 1, 3], f32[2, 1, 3]]:
    x = a + 0.0
    y = x[0:2]
    z = x * 2.0
    x.squeeze_(1)
    z.unsqueeze_(0)
    x.mul_(3.0)
    return x, z, y


# unsqueeze_/squeeze_ inside a loop: the shape changes each iteration (unrolled) or round-trips.
def unsqueeze_in_loop(x: f32[3, 4]) -> tuple[f32[1, 1, 1, 4], f32[4]]:
    h = x[0] * 1.0
    for i in range(3):
        h.unsqueeze_(0)
        h.mul_(2.0)
    g = x[0] * 1.0
    for i in range(3):
        g.unsqueeze_(0)
        g = g + x[i]
        g.squeeze_(0)
    return h, g


# index_copy with a repeated index: the last source slice wins (PyTorch's CPU kernel; unspecified in general).
def index_copy_duplicates(x: f32[5, 3], src: f32[4, 3]) -> f32[5, 3]:
    idx = torch.tensor([1, 3, 1, 0])
    return x.index_copy(0, idx, src)


# torch.linalg.norm as real code calls it: no ord (2-norm / Frobenius), a vector ord over one dim, 'fro' over two.
def linalg_norm_forms(x: f32[4, 6]) -> tuple[f32[()], f32[4], f32[6], f32[()]]:
    total = torch.linalg.norm(x)
    rows = torch.linalg.norm(x, dim=1)
    cols = torch.linalg.norm(x, ord=float("inf"), dim=0)
    fro = torch.linalg.norm(x, "fro", dim=(0, 1))
    return total, rows, cols, fro


# Ops the reference ran but the functional engines refused: outer (RoPE tables), addmm with beta/alpha (fairseq's
# linear layers), hypot, log2/log10, leaky_relu (yolov3/yolov5 activations), dropout at inference.
def reference_only_ops(
    a: f32[4], b: f32[3], m: f32[4, 3], x: f32[4, 5], y: f32[5, 3]
) -> tuple[f32[4, 3], f32[4, 3], f32[4], f32[4], f32[4], f32[4, 5], f32[4, 5]]:
    freqs = torch.outer(a, b)
    lin = torch.addmm(m, x, y, beta=0.5, alpha=2.0)
    h = torch.hypot(a, a * 2.0)
    l2 = torch.log2(a.abs() + 1)
    l10 = torch.log10(a.abs() + 1)
    act = F.leaky_relu(x, 0.1)
    return freqs + torch.ger(a, b), lin, h, l2, l10, act, F.dropout(act, p=0.2, training=False)


# Less common call forms: a weight known only at run time, einsum's list of operands, torch.norm('fro'), a lerp
# weight tensor that broadcasts, division of a Python number by a tensor, in-place floor division.
def call_forms(a: f32[3, 4], b: f32[3, 4], w: f32[4], n: i64[3, 4]) -> tuple[f32[3, 4], f32[3, 4], f32[3, 3], f32[()], f32[3, 4], i64[3, 4]]:
    r = a.mean().item()
    c = torch.lerp(a, b, r)
    d = a.lerp(b, w)
    e = torch.einsum("ij,kj->ik", [a, b])
    f = torch.norm(a, "fro")
    g = torch.div(7.0, b.abs() + 1.0, rounding_mode="trunc")
    m = n - 4
    m.div_(torch.tensor(3), rounding_mode="floor")
    return c, d, e, f, g, m


# Activations and guards from yolov5 (Hardswish), YOLOv4 (Mish), MobileNetV3 (hardsigmoid, relu6) and
# clip_grad_norm_'s non-finite check (isnan/isinf), with nan_to_num on a tensor holding nan and infinities.
def activations_and_guards(x: f32[5, 6]) -> tuple[f32[5, 6], f32[5, 6], f32[5, 6], f32[5, 6], bool[5, 6], bool[5, 6], bool[5, 6], f32[5, 6], f32[5, 6]]:
    y = x * 5.0
    z = y.clone()
    z[0, 0] = float("nan")
    z[1, 1] = float("inf")
    z[2, 2] = -float("inf")
    fixed = torch.nan_to_num(z)
    fixed2 = torch.nan_to_num(z, nan=1.0, posinf=2.0, neginf=-3.0)
    return F.hardswish(y), F.hardsigmoid(y), F.relu6(y), F.mish(y), torch.isnan(z), torch.isinf(z), torch.isfinite(z), fixed, fixed2


# F.pad (constant), repeat_interleave (gpt-fast's GQA key/value expansion), baddbmm/addmm with beta=0 (HF
# attention: the input is ignored, so its NaN does not propagate).
def pad_repeat_baddbmm(
    x: f32[2, 3, 4], k: f32[2, 2, 4], m: f32[2, 3, 3], b: f32[2, 4, 3]
) -> tuple[f32[2, 5, 7], f32[2, 4, 4], f32[12], f32[2, 3, 3], f32[2, 3, 3]]:
    p = F.pad(x, (1, 2, 0, 2), value=-1.0)
    kk = torch.repeat_interleave(k, 2, dim=1)
    flat = k[0].repeat_interleave(1).repeat_interleave(3)[:12]
    bad = m.clone()
    bad[0, 0, 0] = float("nan")
    s = torch.baddbmm(bad, x, b, beta=0.0, alpha=0.5)
    t = torch.baddbmm(m, x, b, beta=2.0)
    return p, kk, flat, s, t


# After torchvision's sigmoid_focal_loss and detection heads' objectness losses: binary_cross_entropy_with_logits
# with the default mean, a weight and pos_weight summed, and large logits unreduced (log-sigmoid must not overflow).
def bce_with_logits_forms(x: f32[6, 5], t: f32[6, 5], w: f32[5], pw: f32[5]):
    y = (t > 0.5).float()
    a = F.binary_cross_entropy_with_logits(x * 4.0, y)
    b = F.binary_cross_entropy_with_logits(x, t, weight=w, pos_weight=pw + 1.0, reduction="sum")
    c = torch.nn.functional.binary_cross_entropy_with_logits(x * 30.0, y, reduction="none")
    return a, b, c


# Nested functions (closures, as in Hugging Face's feed_forward_chunk passed to apply_chunking_to_forward): the
# captured tensor is the same object, so an in-place write after the `def` is seen by the closure; a closure
# passed to a helper with `*args`, and one that returns a tuple.
def _apply_each(fn, *xs):
    return [fn(x) for x in xs]


def nested_closures(x: f32[4, 3], w: f32[3, 3]) -> tuple[f32[4, 3], f32[4, 3], f32[4, 3]]:
    scale = 0.5
    acc = torch.zeros(4, 3)

    def proj(h):
        return h @ w * scale + acc

    def both(h, k=2.0):
        return proj(h), h * k

    acc.add_(1.0)
    a, b = _apply_each(proj, x, x * 2.0)
    c, d = both(x, k=3.0)
    return a + b, c, d


# In-place view ops on temporaries (as in torch.optim's Adamax `grad.abs().add_(eps).unsqueeze_(0)`): only the
# temporary's shape changes; the tensors it was computed from keep theirs.
def unsqueeze_on_temporaries(g: f32[5, 2], u: f32[5, 2]) -> tuple[f32[2, 5, 2], f32[5, 2], f32[5]]:
    norm_buf = torch.cat([u.abs().unsqueeze(0), g.abs().add_(1e-3).unsqueeze_(0)], 0)
    col = (g * 2.0)[:, 1:2].squeeze_(1)
    return norm_buf, g, col


def sdpa_masks(q: f32[2, 2, 3, 4], k: f32[2, 2, 5, 4], v: f32[2, 2, 5, 6], bias: f32[3, 5]) -> tuple[f32[2, 2, 3, 6], f32[2, 2, 3, 6], f32[2, 2, 3, 6], f32[2, 2, 3, 6]]:
    # F.scaled_dot_product_attention with a boolean mask (its middle row masked out entirely: PyTorch gives zeros
    # there), causal, a float mask, and an explicit scale.
    keep = torch.ones(3, 5, dtype=torch.bool)
    keep[1] = False
    a = F.scaled_dot_product_attention(q, k, v, attn_mask=keep)
    b = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    c = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
    d = F.scaled_dot_product_attention(q, k, v, scale=0.3, dropout_p=0.0)
    return a, b, c, d


def losses_pointwise(x: f32[4, 5], y: f32[4, 5]) -> tuple[f32[()], f32[4, 5], f32[()], f32[()], f32[4, 5]]:
    # F.l1_loss, F.mse_loss and F.smooth_l1_loss with each reduction and beta.
    return (
        F.l1_loss(x, y),
        F.mse_loss(x, y, reduction="none"),
        F.smooth_l1_loss(x, y, reduction="sum"),
        F.smooth_l1_loss(x * 3.0, y, beta=0.5),
        F.smooth_l1_loss(x, y, reduction="none", beta=0.0),
    )


def isclose_and_allclose(x: f32[8], y: f32[8]) -> tuple[bool[8], bool[8], f32[8], f32[8]]:
    """`torch.isclose`, `Tensor.isclose` with `equal_nan`, and `allclose` deciding branches (torch-optimizer's SWATS
    switches to SGD where `corrected_exp_avg.allclose(scaling, rtol=1e-6)`)."""
    x[0] = float("nan")
    y[0] = float("nan")
    x[1] = float("inf")
    y[1] = float("inf")
    x[2] = float("inf")
    y[3] = x[3] + 1e-6
    y[4] = x[4] + 1e-3
    a = torch.isclose(x, y)
    b = x.isclose(y, rtol=1e-2, atol=0.0, equal_nan=True)
    if x[3:5].allclose(y[3:5], atol=1e-2):
        c = x * 2.0
    else:
        c = x * 3.0
    if torch.allclose(x[5:], y[5:]):
        d = y + 1.0
    else:
        d = y - 1.0
    return a, b, c, d


def legacy_loss_reductions(
    x: f32[4, 3], y: f32[4, 3], t: i64[4]
) -> tuple[f32[()], f32[4, 3], f32[()], f32[4], f32[()], f32[()]]:
    """Old code's deprecated `size_average`/`reduce` (kuangliu's RetinaNet: `F.smooth_l1_loss(p, t,
    size_average=False)`, a sum), which replace `reduction` whatever it says, as PyTorch's legacy_get_string does."""
    logp = F.log_softmax(x, 1)
    t = t % 3
    return (
        F.smooth_l1_loss(x, y, size_average=False),
        F.mse_loss(x, y, reduce=False),
        F.l1_loss(x, y, size_average=True, reduce=True, reduction="sum"),
        F.nll_loss(logp, t, reduce=False),
        F.cross_entropy(x, t, size_average=False),
        F.kl_div(logp, y.softmax(1), size_average=None, reduce=None),
    )
