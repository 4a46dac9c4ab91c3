"""Held-out real code, issue 14's seventeenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout17.py): mmdetection's EIoU loss (an early `return` of a sum where no weight is positive: the
returned shape depends on the data), Phi-3 LongRoPE (a dict key cached in one arm of an `if` on a run-time value),
Muon (bfloat16), and Prodigy (a state tensor whose shape depends on
`p.any()`). Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _reduce_loss(loss, reduction):
    reduction_enum = F._Reduction.get_enum(reduction)
    # none: 0, elementwise_mean:1, sum: 2
    if reduction_enum == 0:
        return loss
    elif reduction_enum == 1:
        return loss.mean()
    elif reduction_enum == 2:
        return loss.sum()


def _weight_reduce_loss(loss, weight=None, reduction="mean", avg_factor=None):
    # if weight is specified, apply element-wise weight
    if weight is not None:
        loss = loss * weight

    # if avg_factor is not specified, just reduce the loss
    if avg_factor is None:
        loss = _reduce_loss(loss, reduction)
    else:
        # if reduction is mean, then average the loss by avg_factor
        if reduction == "mean":
            # Avoid causing ZeroDivisionError when avg_factor is 0.0,
            # i.e., all labels of an image belong to ignore index.
            eps = torch.finfo(torch.float32).eps
            loss = loss.sum() / (avg_factor + eps)
        # if reduction is 'none', then do nothing, otherwise raise an error
        elif reduction != "none":
            raise ValueError('avg_factor can not be used with reduction="sum"')
    return loss


def _eiou_loss(pred, target, smooth_point=0.1, eps=1e-7):
    px1, py1, px2, py2 = pred[:, 0], pred[:, 1], pred[:, 2], pred[:, 3]
    tx1, ty1, tx2, ty2 = target[:, 0], target[:, 1], target[:, 2], target[:, 3]

    # extent top left
    ex1 = torch.min(px1, tx1)
    ey1 = torch.min(py1, ty1)

    # intersection coordinates
    ix1 = torch.max(px1, tx1)
    iy1 = torch.max(py1, ty1)
    ix2 = torch.min(px2, tx2)
    iy2 = torch.min(py2, ty2)

    # extra
    xmin = torch.min(ix1, ix2)
    ymin = torch.min(iy1, iy2)
    xmax = torch.max(ix1, ix2)
    ymax = torch.max(iy1, iy2)

    # Intersection
    intersection = (
        (ix2 - ex1) * (iy2 - ey1)
        + (xmin - ex1) * (ymin - ey1)
        - (ix1 - ex1) * (ymax - ey1)
        - (xmax - ex1) * (iy1 - ey1)
    )
    # Union
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - intersection + eps
    # IoU
    ious = 1 - (intersection / union)

    # Smooth-EIoU
    smooth_sign = (ious < smooth_point).detach().float()
    loss = 0.5 * smooth_sign * (ious**2) / smooth_point + (1 - smooth_sign) * (ious - 0.5 * smooth_point)
    return loss


def _eiou_loss_forward(self, pred, target, weight=None, avg_factor=None, reduction_override=None, **kwargs):
    if weight is not None and not torch.any(weight > 0):
        if pred.dim() == weight.dim() + 1:
            weight = weight.unsqueeze(1)
        return (pred * weight).sum()  # 0
    assert reduction_override in (None, "none", "mean", "sum")
    reduction = reduction_override if reduction_override else self["reduction"]
    if weight is not None and weight.dim() > 1:
        assert weight.shape == pred.shape
        weight = weight.mean(-1)
    loss = self["loss_weight"] * _weight_reduce_loss(
        _eiou_loss(pred, target, smooth_point=self["smooth_point"], eps=self["eps"], **kwargs),
        weight,
        reduction=reduction,
        avg_factor=avg_factor,
    )
    return loss


# mmdetection (open-mmlab/mmdetection), mmdet/models/losses/iou_loss.py: eiou_loss and EIoULoss.forward (smooth_point
# 0.1, eps 1e-6, loss_weight 1.0), with mmdet/models/losses/utils.py's weight_reduce_loss and reduce_loss standing
# in for the @weighted_loss decorator; called with avg_factor 8 (reduction "mean") and with reduction_override
# "none"; XYXY boxes made valid from the raw inputs (corners in [0, 16), sides in [1, 5)), weights in [0, 1)
def mmdet_eiou_loss(raw_pred: f32[16, 4], raw_target: f32[16, 4], raw_weight: f32[16]) -> tuple[f32[()], f32[16]]:
    pred = torch.cat([raw_pred[:, :2] * 8 + 8, raw_pred[:, :2] * 8 + 8 + raw_pred[:, 2:].abs() * 4 + 1], dim=1)
    target = torch.cat([raw_target[:, :2] * 8 + 8, raw_target[:, :2] * 8 + 8 + raw_target[:, 2:].abs() * 4 + 1], dim=1)
    weight = (raw_weight + 1) / 2
    module = {"reduction": "mean", "loss_weight": 1.0, "smooth_point": 0.1, "eps": 1e-6}
    loss_avg = _eiou_loss_forward(module, pred, target, weight, avg_factor=8.0)
    loss_none = _eiou_loss_forward(module, pred, target, weight, reduction_override="none")
    return loss_avg, loss_none


def _compute_longrope_parameters(config, device, seq_len=None, **rope_kwargs):
    base = config["rope_theta"]
    partial_rotary_factor = config["partial_rotary_factor"] if "partial_rotary_factor" in config else 1.0
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    dim = int(head_dim * partial_rotary_factor)
    long_factor = config["rope_scaling"]["long_factor"]
    short_factor = config["rope_scaling"]["short_factor"]
    factor = config["rope_scaling"].get("factor")
    attention_factor = config["rope_scaling"].get("attention_factor")

    # NOTE: Phi3 (and potentially other models) modify `max_position_embeddings` and have a
    # `original_max_position_embeddings` field containing the pretrained value. They use the ratio between these two
    # values to compute the default attention scaling factor, instead of using `factor`.
    if "original_max_position_embeddings" in config:
        original_max_position_embeddings = config["original_max_position_embeddings"]
        factor = config["max_position_embeddings"] / config["original_max_position_embeddings"]
    else:
        original_max_position_embeddings = config["max_position_embeddings"]

    # Sets the attention factor as suggested in the paper
    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original_max_position_embeddings))

    # Compute the inverse frequencies -- scaled based on the target sequence length
    if seq_len and seq_len > original_max_position_embeddings:
        ext_factors = torch.tensor(long_factor, dtype=torch.float32, device=device)
    else:
        ext_factors = torch.tensor(short_factor, dtype=torch.float32, device=device)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    inv_freq = 1.0 / (ext_factors * base**inv_freq_shape)

    return inv_freq, attention_factor


def _longrope_frequency_update(self, position_ids, device):
    seq_len = torch.max(position_ids) + 1
    if "original_max_position_embeddings" in self["config"]:
        original_max_position_embeddings = self["config"]["original_max_position_embeddings"]
    else:
        original_max_position_embeddings = self["config"]["max_position_embeddings"]
    if seq_len > original_max_position_embeddings:
        if "long_inv_freq" not in self:
            self["long_inv_freq"], _ = _compute_longrope_parameters(
                self["config"], device, seq_len=original_max_position_embeddings + 1
            )
        self["inv_freq"] = self["long_inv_freq"]
    else:
        # This .to() is needed if the model has been moved to a device after being initialized (because
        # the buffer is automatically moved, but not the original copy)
        self["original_inv_freq"] = self["original_inv_freq"].to(device)
        self["inv_freq"] = self["original_inv_freq"]


def _rotary_forward(self, x, position_ids):
    if "dynamic" in self["rope_type"]:
        _longrope_frequency_update(self, position_ids, device=x.device)

    inv_freq_expanded = self["inv_freq"][None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
    position_ids_expanded = position_ids[:, None, :].float()
    device_type = x.device.type if isinstance(x.device.type, str) and x.device.type != "mps" else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):  # Force float32
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self["attention_scaling"]
        sin = emb.sin() * self["attention_scaling"]
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)

    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]

    q_embed = torch.cat([(q_rot * cos) + (_rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (_rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


# Hugging Face transformers, modeling_rope_utils.py: _compute_longrope_parameters, and models/phi3/modeling_phi3.py:
# Phi3RotaryEmbedding (__init__, _longrope_frequency_update and forward, rope_type "longrope" so the dynamic update
# runs) and apply_rotary_pos_emb with partial rotary (partial_rotary_factor 0.75: 6 of 8 dims rotate); head_dim 8,
# max_position_embeddings 32, original_max_position_embeddings 8, short/long factors of 3; position ids are inputs in
# [0, 10), so max(position_ids) + 1 > 8 picks the long factors for some seeds; the config and module as dicts
# (hasattr(config, k) as `k in config`, register_buffer as a dict write)
def hf_phi3_longrope(q: f32[1, 2, 6, 8], k: f32[1, 2, 6, 8], position_ids: i64[1, 6]) -> tuple[f32[1, 2, 6, 8], f32[1, 2, 6, 8]]:
    config = {
        "rope_theta": 10000.0, "partial_rotary_factor": 0.75, "hidden_size": 16, "num_attention_heads": 2,
        "max_position_embeddings": 32, "original_max_position_embeddings": 8,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.25, 1.5], "long_factor": [1.0, 2.0, 4.0]},
    }
    rope = {"config": config, "rope_type": "longrope"}
    rope["max_seq_len_cached"] = config["max_position_embeddings"]
    rope["original_max_seq_len"] = config["max_position_embeddings"]
    inv_freq, rope["attention_scaling"] = _compute_longrope_parameters(config, q.device)
    rope["inv_freq"] = inv_freq
    rope["original_inv_freq"] = rope["inv_freq"]
    if rope["rope_type"] == "longrope":
        rope["rope_type"] = "dynamic_longrope"
    cos, sin = _rotary_forward(rope, q, position_ids)
    return _apply_rotary_pos_emb(q, k, cos, sin)


def _zeropower_via_newtonschulz5(G: torch.Tensor, steps: int) -> torch.Tensor:
    assert G.ndim >= 2  # batched Muon implementation by @scottjmaddox, and put into practice in the record by @YouJiacheng
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.bfloat16()
    if G.size(-2) > G.size(-1):
        X = X.mT

    # Ensure spectral norm is at most 1
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    # Perform the NS iterations
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A  # quintic computation strategy adapted from suggestion by @jxbz, @leloykun, and @YouJiacheng
        X = a * X + B @ X

    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def _muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    if update.ndim == 4:  # for the case of conv filters
        update = update.view(len(update), -1)
    update = _zeropower_via_newtonschulz5(update, steps=ns_steps)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


# Muon (KellerJordan/Muon), muon.py: zeropower_via_newtonschulz5, muon_update and SingleDeviceMuon.step (lr 0.02,
# weight_decay 0.01, momentum 0.95), two steps on a wide [8, 12] and a tall [12, 8] parameter (the tall one goes
# through the .mT branch); p.grad is each step's gradient (the raw gradient times 1 + 0.5 * step, fresh each step,
# since muon_update's lerp_ writes into p.grad); the @torch.no_grad decorator and closure left out; the state as dicts
def muon_steps(p1: f32[8, 12], p2: f32[12, 8], g1: f32[8, 12], g2: f32[12, 8]) -> tuple[f32[8, 12], f32[12, 8]]:
    group = {"params": [p1, p2], "lr": 0.02, "weight_decay": 0.01, "momentum": 0.95}
    raw_grads = [g1, g2]
    states = [{}, {}]
    for step in range(2):
        for j, p in enumerate(group["params"]):
            grad = raw_grads[j] * (1.0 + 0.5 * step)
            state = states[j]
            if len(state) == 0:
                state["momentum_buffer"] = torch.zeros_like(p)
            update = _muon_update(grad, state["momentum_buffer"], beta=group["momentum"])
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(update.reshape(p.shape), alpha=-group["lr"])
    return p1, p2


# Prodigy (konstmish/prodigy), prodigyopt/prodigy.py: Prodigy.step (lr 1.0, betas (0.9, 0.999), beta3 None so
# sqrt(beta2), eps 1e-8, weight_decay 0.01 decoupled, use_bias_correction False, safeguard_warmup False, d0 1e-3
# instead of 1e-6, d_coef 1.0, growth_rate inf, slice_p 1, no FSDP), three steps on two parameters in one group;
# p.grad is each step's gradient slice; the closure left out (and `return loss` when d_denom is 0 written `continue`, as
# the step loop is inlined); self.param_groups and self.state as a list of dicts;
# d, d_hat and d_max returned as a tensor beside the parameters
def prodigy_steps(
    p1: f32[4, 6], p2: f32[6], grads1: f32[3, 4, 6], grads2: f32[3, 6]
) -> tuple[f32[4, 6], f32[6], f32[3]]:
    param_groups = [dict(lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, weight_decay=0.01, d=1e-3, d0=1e-3,
                         d_max=1e-3, d_numerator=0.0, d_coef=1.0, k=0, growth_rate=float("inf"),
                         use_bias_correction=False, decouple=True, safeguard_warmup=False, fsdp_in_use=False,
                         slice_p=1, params=[p1, p2])]
    states = [{}, {}]
    all_grads = [grads1, grads2]
    d_hat = 0.0
    for it in range(3):
        grads = [all_grads[0][it], all_grads[1][it]]
        d_denom = 0.0

        group = param_groups[0]
        use_bias_correction = group['use_bias_correction']
        beta1, beta2 = group['betas']
        beta3 = group['beta3']
        if beta3 is None:
            beta3 = math.sqrt(beta2)
        k = group['k']

        d = group['d']
        d_max = group['d_max']
        d_coef = group['d_coef']
        lr = max(group['lr'] for group in param_groups)

        if use_bias_correction:
            bias_correction = ((1 - beta2 ** (k + 1)) ** 0.5) / (1 - beta1 ** (k + 1))
        else:
            bias_correction = 1

        dlr = d * lr * bias_correction

        growth_rate = group['growth_rate']
        decouple = group['decouple']
        fsdp_in_use = group['fsdp_in_use']

        d_numerator = group['d_numerator']
        d_numerator *= beta3

        for group in param_groups:
            decay = group['weight_decay']
            k = group['k']
            eps = group['eps']
            group_lr = group['lr']
            d0 = group['d0']
            safeguard_warmup = group['safeguard_warmup']
            slice_p = group['slice_p']

            if group_lr not in [lr, 0.0]:
                raise RuntimeError(f"Setting different lr values in different parameter groups is only supported for values of 0")

            for j, p in enumerate(group['params']):
                grad = grads[j]

                # Apply weight decay (coupled variant)
                if decay != 0 and not decouple:
                    grad.add_(p.data, alpha=decay)

                state = states[j]

                # State initialization
                if 'step' not in state:
                    state['step'] = 0

                    state['s'] = torch.zeros_like(p.data.flatten()[::slice_p]).detach()

                    if p.any():
                        state['p0'] = p.flatten()[::slice_p].detach().clone()
                    else:
                        # All values are zero, so save VRAM with a zero-tensor
                        state['p0'] = torch.tensor(0, device=p.device, dtype=p.dtype)

                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(p.data).detach()
                    # Exponential moving average of squared gradient values
                    state['exp_avg_sq'] = torch.zeros_like(p.data).detach()

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']

                s = state['s']
                p0 = state['p0']

                if group_lr > 0.0:
                    # we use d / d0 instead of just d to avoid getting values that are too small
                    sliced_grad = grad.flatten()[::slice_p]
                    d_numerator += (d / d0) * dlr * torch.dot(sliced_grad, p0.data - p.data.flatten()[::slice_p]).item()

                    # Adam EMA updates
                    exp_avg.mul_(beta1).add_(grad, alpha=d * (1 - beta1))
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=d * d * (1 - beta2))

                    if safeguard_warmup:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * d))
                    else:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * dlr))
                    d_denom += s.abs().sum().item()

        d_hat = d

        # if we have not done any progres, return
        # if we have any gradients available, will have d_denom > 0 (unless \|g\|=0)
        if d_denom == 0:
            continue

        if lr > 0.0:
            global_d_numerator = d_numerator
            global_d_denom = d_denom

            d_hat = d_coef * global_d_numerator / global_d_denom
            if d == group['d0']:
                d = max(d, d_hat)
            d_max = max(d_max, d_hat)
            d = min(d_max, d * growth_rate)

        for group in param_groups:
            group['d_numerator'] = global_d_numerator
            group['d_denom'] = global_d_denom
            group['d'] = d
            group['d_max'] = d_max
            group['d_hat'] = d_hat

            decay = group['weight_decay']
            k = group['k']
            eps = group['eps']

            for j, p in enumerate(group['params']):
                state = states[j]

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']

                state['step'] += 1

                denom = exp_avg_sq.sqrt().add_(d * eps)

                # Apply weight decay (decoupled variant)
                if decay != 0 and decouple:
                    p.data.add_(p.data, alpha=-decay * dlr)

                ### Take step
                p.data.addcdiv_(exp_avg, denom, value=-dlr)

            group['k'] = k + 1
    group = param_groups[0]
    return p1, p2, torch.tensor([group['d'], group['d_hat'], group['d_max']])
