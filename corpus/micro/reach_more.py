"""More constructs real code uses (issue #14): `F.layer_norm`/`F.rms_norm`, `torch.arange` with its bounds given by
keyword, `torch._foreach_*` over lists of tensors, a `lambda` bound to a name and called, `torch.Tensor([...])`
and `torch.cumprod`. Each program is written after a public original named in its comment (same computation, same
imperative style)."""
from __future__ import annotations
import math
import torch
import torch.nn.functional as F


# After nanoGPT's LayerNorm.forward (F.layer_norm with an optional bias) and Block.forward's first residual.
def layer_norm_residual(
    x: f32[2, 5, 16], w: f32[16], b: f32[16], w2: f32[5, 16]
) -> tuple[f32[2, 5, 16], f32[2, 5, 16], f32[2, 5, 16]]:
    h = x + F.layer_norm(x, w.shape, w, b, 1e-5)
    no_bias = F.layer_norm(x * 3.0, (16,), weight=w, bias=None)
    two_dims = torch.nn.functional.layer_norm(x, [5, 16], w2, eps=1e-6)
    return h, no_bias, two_dims


# After gpt-fast's RMSNorm.forward (x * rsqrt(mean(x^2) + eps) * weight) next to F.rms_norm, which computes the same.
def rms_norm_forms(
    x: f32[3, 4, 8], w: f32[8], w64: f64[8]
) -> tuple[f32[3, 4, 8], f32[3, 4, 8], f32[3, 4, 8], f32[3, 4, 8]]:
    hand = x * torch.rsqrt(torch.mean(x * x, dim=-1, keepdim=True) + 1e-5) * w
    return hand, F.rms_norm(x, (8,), w, 1e-5), F.rms_norm(x * 0.5, [4, 8]), F.rms_norm(x, [8], w64 * 0.5 + 1.0)


# After ultralytics' make_anchors (torch.arange(end=w, dtype=..., device=...)) and DETR's position embedding
# (torch.arange(num_pos_feats, dtype=...)), with every keyword form of the bounds.
def arange_keyword_bounds(feat: f32[1, 3, 4, 6]) -> tuple[f32[24, 2], i64[3], f32[5], i64[4]]:
    _, _, h, w = feat.shape
    sx = torch.arange(end=w, device=feat.device, dtype=feat.dtype) + 0.5
    sy = torch.arange(end=h, dtype=feat.dtype) + 0.5
    sy, sx = torch.meshgrid(sy, sx, indexing="ij")
    pts = torch.stack((sx, sy), -1).view(-1, 2)
    return pts, torch.arange(1, end=7, step=2), torch.arange(start=0.0, end=2.5, step=0.5), torch.arange(2, end=6)


# After torch.optim's _multi_tensor_adam (foreach path; weight_decay 0, not amsgrad, not capturable): lerp_ of the
# first moments, mul_/addcmul_ of the second, then sqrt, div_, add_ and addcdiv_ over the lists.
def foreach_adam_step(
    w0: f32[6, 4], w1: f32[4], g0: f32[6, 4], g1: f32[4], m0: f32[6, 4], m1: f32[4], v0: f32[6, 4], v1: f32[4],
    step: int = 3,
) -> tuple[f32[6, 4], f32[4]]:
    params, grads, exp_avgs, exp_avg_sqs = [w0, w1], [g0, g1], [m0, m1], [v0, v1]
    beta1, beta2, lr, eps = 0.9, 0.999, 1e-2, 1e-8
    torch._foreach_abs_(exp_avg_sqs)
    torch._foreach_lerp_(exp_avgs, grads, 1 - beta1)
    torch._foreach_mul_(exp_avg_sqs, beta2)
    torch._foreach_addcmul_(exp_avg_sqs, grads, grads, 1 - beta2)
    bias_correction1 = 1 - beta1**step
    bias_correction2 = 1 - beta2**step
    step_size = lr / bias_correction1
    bias_correction2_sqrt = math.sqrt(bias_correction2)
    exp_avg_sq_sqrt = torch._foreach_sqrt(exp_avg_sqs)
    torch._foreach_div_(exp_avg_sq_sqrt, bias_correction2_sqrt)
    torch._foreach_add_(exp_avg_sq_sqrt, eps)
    torch._foreach_addcdiv_(params, exp_avgs, exp_avg_sq_sqrt, -step_size)
    d0, d1 = torch._foreach_sub(params, [g0, g1], alpha=0.5)
    return d0, d1


# After torch.optim's _multi_tensor_sgd with weight decay (grads = _foreach_add(grads, params, alpha=wd)) and a
# per-tensor list of scalars (_foreach_mul_ with a list), then the update.
def foreach_sgd_weight_decay(w0: f32[5, 3], w1: f32[3], g0: f32[5, 3], g1: f32[3]) -> None:
    params, grads = [w0, w1], [g0, g1]
    grads = torch._foreach_add(grads, params, alpha=1e-2)
    torch._foreach_mul_(grads, [0.5, 2.0])
    torch._foreach_add_(params, grads, alpha=-0.1)


# After nerf-pytorch's raw2outputs: a lambda bound to a name with a torch function as a default argument, called with
# and without it, and the 1e10 sentinel distance built with the legacy torch.Tensor constructor.
def lambda_with_function_default(raw: f32[4, 6], z: f32[4, 6]) -> tuple[f32[4, 6], f32[4, 6], f32[4, 6]]:
    raw2alpha = lambda raw, dists, act_fn=F.relu: 1.0 - torch.exp(-act_fn(raw) * dists)
    scale = lambda t: t * 0.5 + 1.0
    dists = z.abs()[..., 1:] - z.abs()[..., :-1]
    dists = torch.cat([dists, torch.Tensor([1e10]).expand(dists[..., :1].shape)], -1)
    a = raw2alpha(raw, dists.abs())
    b = raw2alpha(raw, scale(dists).abs(), torch.sigmoid)
    c = raw2alpha(raw, z, act_fn=F.softplus)
    return a, b, c


# After nerf-pytorch's raw2outputs (transmittance as an exclusive cumprod) and a discount-factor product, on floats
# and integers, along the last and the first dim.
def cumprod_scans(alpha: f32[3, 8], k: i64[4, 3]) -> tuple[f32[3, 8], f32[3, 8], i64[4, 3], f64[3, 8]]:
    raw = alpha * 0.5 + 1.0
    alpha = torch.sigmoid(alpha)
    t = torch.cumprod(torch.cat([torch.ones((alpha.shape[0], 1)), 1.0 - alpha + 1e-10], -1), -1)[:, :-1]
    w = alpha * t
    ki = torch.cumprod(k % 3 + 1, dim=0)
    return w, (alpha + 0.5).cumprod(1), ki, torch.cumprod(raw, 1, dtype=torch.float64)


# After Hugging Face transformers' StaticLayer.update (index_copy_ in a try, indexed assignment in the
# NotImplementedError fallback for devices without index_copy_), with else and finally clauses.
def try_not_implemented_fallback(
    keys: f32[1, 2, 8, 4], key_states: f32[1, 2, 3, 4], start: int = 2
) -> tuple[f32[1, 2, 8, 4], f32[1, 2, 3, 4]]:
    cache_position = torch.arange(key_states.shape[-2]) + start
    try:
        keys.index_copy_(2, cache_position, key_states)
    except NotImplementedError:
        keys[:, :, cache_position] = key_states * 0.0
    else:
        key_states = key_states * 2.0
    finally:
        key_states = key_states + 1.0
    try:
        n = len(cache_position)
    except (NotImplementedError,) as e:
        n = 0
    return keys * n, key_states


_SCALE = lambda t: t * 2.0
_ACT = F.silu


# After timm's get_act_fn (an activation picked once and stored as a function value at module level) and a
# module-level lambda called from a lambda inside the program.
def module_level_function_values(x: f32[4, 5]) -> tuple[f32[4, 5], bool]:
    h = lambda t: _SCALE(t) + 1.0
    return _ACT(h(x)), _ACT is None


# After CenterNet's _nms (a 3x3 max pool, stride 1, padding 1, keeping the peaks), with other max_pool2d settings
# PyTorch takes (a stride, dilation, an int64 input with the default stride); AdamP's _cosine_similarity and xLSTM's
# logsigmoid gate; and Hugging Face's `torch.tensor([-1], dtype=int)` (a Python type as the dtype).
def pool_similarity_logsigmoid(
    heat: f32[2, 3, 9, 10], ids: i64[1, 7, 8], a: f32[6, 5], b: f32[6, 5]
) -> tuple[f32[2, 3, 9, 10], f32[2, 3, 5, 4], i64[1, 3, 4], f32[6], f32[6, 5], i64[2]]:
    hmax = F.max_pool2d(heat, (3, 3), stride=1, padding=1)
    peaks = heat * (hmax == heat).float()
    strided = F.max_pool2d(heat, 3, stride=2, padding=1, dilation=(1, 2))
    pooled_ids = F.max_pool2d(ids, 2)
    cos = F.cosine_similarity(a, b, dim=-1, eps=1e-6).abs_()
    gate = F.logsigmoid(a * 40.0)
    index = torch.tensor([-1, 2], dtype=int) * ids.shape[0]
    return peaks, strided, pooled_ids, cos, gate, index


# Lambdas that read locals (closures, as optimizers write `lambda p: p * lr`): a lambda bound to a name, one called
# where it is written, one inside another lambda and one inside a nested def; the captured tensor is the same
# object, so an in-place write after the lambda is seen when it runs.
def lambda_closures(x: f32[4, 3], w: f32[3, 3]) -> tuple[f32[4, 3], f32[4, 3], f32[4, 3]]:
    scale = 0.5
    acc = torch.zeros(4, 3)
    proj = lambda h: h @ w * scale + acc
    twice = lambda h: (lambda k: proj(k) * 2.0)(h)

    def inner(h):
        return (lambda k: k * scale + 1.0)(h)

    acc.add_(1.0)
    return proj(x), twice(x) + (lambda: scale)(), inner(x)


# `dict(...)` with keywords (Adan's `kwargs = dict(...)` then `f(**kwargs)`), `torch.scalar_tensor` (float32 whatever
# the kind of its value), `torch.cumsum(p, out=p)` over its own input (vLLM's sampler), `F.batch_norm` in evaluation
# mode and `torch.cdist` with p = 1, 2 (25 rows or fewer), infinity and 0.
def _scaled(x, *, lr, eps):
    return x * lr + eps


def dict_scalar_scan_norm_dist(
    x: f32[3, 4, 5], m: f32[4], v: f32[4], a: f32[6, 5], b: f32[7, 5]
) -> tuple[f32[3, 4, 5], f32[()], f32[6, 5], f32[3, 4, 5], f32[6, 7], f32[6, 7], f32[6, 7], f32[6, 7]]:
    kwargs = dict(lr=0.5, eps=1e-3)
    y = _scaled(x, **dict(kwargs, lr=2.0))
    s = torch.scalar_tensor(3) + torch.scalar_tensor(True, dtype=torch.float32)
    p = a.softmax(-1)
    torch.cumsum(p, dim=-1, out=p)
    n = F.batch_norm(x, m, v.abs() + 0.1, m * 2.0, v, False, 0.1, 1e-3)
    return y, s, p, n, torch.cdist(a, b, p=1), torch.cdist(a, b), torch.cdist(a, b, p=float("inf")), torch.cdist(a, b, p=0)
