"""Held-out real code, issue 14's eighth round (6 of 11 ran on every engine before the fixes of that round):
mmdetection's bbox_flip and anchor_inside_flags, mmdet3d's rotation_3d_in_axis and limit_period, a Phased LSTM,
GRU-D, Hugging Face's 4-d causal mask with a cache position, vLLM's sampling penalties, Barlow Twins' LARS, AdaMod
and Gemma 2's soft-capped eager attention. Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _bbox_flip(bboxes, img_shape, direction='horizontal'):
    assert bboxes.shape[-1] % 4 == 0
    assert direction in ['horizontal', 'vertical', 'diagonal']
    flipped = bboxes.clone()
    if direction == 'horizontal':
        flipped[..., 0::4] = img_shape[1] - bboxes[..., 2::4]
        flipped[..., 2::4] = img_shape[1] - bboxes[..., 0::4]
    elif direction == 'vertical':
        flipped[..., 1::4] = img_shape[0] - bboxes[..., 3::4]
        flipped[..., 3::4] = img_shape[0] - bboxes[..., 1::4]
    else:
        flipped[..., 0::4] = img_shape[1] - bboxes[..., 2::4]
        flipped[..., 1::4] = img_shape[0] - bboxes[..., 3::4]
        flipped[..., 2::4] = img_shape[1] - bboxes[..., 0::4]
        flipped[..., 3::4] = img_shape[0] - bboxes[..., 1::4]
    return flipped


# mmdetection (open-mmlab/mmdetection), mmdet/core/bbox/transforms.py: bbox_flip, in its three directions on boxes
# packed 2 per row (image 60x80)
def mmdet_bbox_flip(bboxes: f32[2, 5, 8]) -> tuple[f32[2, 5, 8], f32[2, 5, 8], f32[2, 5, 8]]:
    img_shape = (60, 80, 3)
    h = _bbox_flip(bboxes, img_shape)
    v = _bbox_flip(bboxes, img_shape, 'vertical')
    d = _bbox_flip(bboxes, img_shape, direction='diagonal')
    return h, v, d


def _anchor_inside_flags(flat_anchors, valid_flags, img_shape, allowed_border=0):
    img_h, img_w = img_shape[:2]
    if allowed_border >= 0:
        inside_flags = valid_flags & \
            (flat_anchors[:, 0] >= -allowed_border) & \
            (flat_anchors[:, 1] >= -allowed_border) & \
            (flat_anchors[:, 2] < img_w + allowed_border) & \
            (flat_anchors[:, 3] < img_h + allowed_border)
    else:
        inside_flags = valid_flags
    return inside_flags


# mmdetection, mmdet/core/anchor/utils.py: anchor_inside_flags (anchors scaled to a 40x50 image, borders 0, 4, -1)
def mmdet_anchor_inside_flags(raw: f32[60, 4], valid_flags: bool[60]) -> tuple[bool[60], bool[60], bool[60]]:
    flat_anchors = raw * 30 + torch.tensor([10.0, 10.0, 30.0, 30.0])
    img_shape = (40, 50)
    a = _anchor_inside_flags(flat_anchors, valid_flags, img_shape)
    b = _anchor_inside_flags(flat_anchors, valid_flags, img_shape, allowed_border=4)
    c = _anchor_inside_flags(flat_anchors, valid_flags, img_shape, -1)
    return a, b, c


def _rotation_3d_in_axis(points, angles, axis=0, return_mat=False, clockwise=False):
    batch_free = len(points.shape) == 2
    if batch_free:
        points = points[None]

    if isinstance(angles, float) or len(angles.shape) == 0:
        angles = torch.full(points.shape[:1], angles)

    assert len(points.shape) == 3 and len(angles.shape) == 1 \
        and points.shape[0] == angles.shape[0], f'Incorrect shape of points ' \
        f'angles: {points.shape}, {angles.shape}'

    assert points.shape[-1] in [2, 3], \
        f'Points size should be 2 or 3 instead of {points.shape[-1]}'

    rot_sin = torch.sin(angles)
    rot_cos = torch.cos(angles)
    ones = torch.ones_like(rot_cos)
    zeros = torch.zeros_like(rot_cos)

    if points.shape[-1] == 3:
        if axis == 1 or axis == -2:
            rot_mat_T = torch.stack([
                torch.stack([rot_cos, zeros, -rot_sin]),
                torch.stack([zeros, ones, zeros]),
                torch.stack([rot_sin, zeros, rot_cos])
            ])
        elif axis == 2 or axis == -1:
            rot_mat_T = torch.stack([
                torch.stack([rot_cos, rot_sin, zeros]),
                torch.stack([-rot_sin, rot_cos, zeros]),
                torch.stack([zeros, zeros, ones])
            ])
        elif axis == 0 or axis == -3:
            rot_mat_T = torch.stack([
                torch.stack([ones, zeros, zeros]),
                torch.stack([zeros, rot_cos, rot_sin]),
                torch.stack([zeros, -rot_sin, rot_cos])
            ])
        else:
            raise ValueError(f'axis should in range '
                             f'[-3, -2, -1, 0, 1, 2], got {axis}')
    else:
        rot_mat_T = torch.stack([
            torch.stack([rot_cos, rot_sin]),
            torch.stack([-rot_sin, rot_cos])
        ])

    if clockwise:
        rot_mat_T = rot_mat_T.transpose(0, 1)

    if points.shape[0] == 0:
        points_new = points
    else:
        points_new = torch.einsum('aij,jka->aik', points, rot_mat_T)

    if batch_free:
        points_new = points_new.squeeze(0)

    if return_mat:
        rot_mat_T = torch.einsum('jka->ajk', rot_mat_T)
        if batch_free:
            rot_mat_T = rot_mat_T.squeeze(0)
        return points_new, rot_mat_T
    else:
        return points_new


# mmdetection3d (open-mmlab/mmdetection3d), mmdet3d/core/bbox/structures/utils.py: rotation_3d_in_axis, about the z
# axis with its matrix, about x clockwise, and a batch-free 2-d case with a float angle
def mmdet3d_rotation_3d_in_axis(
    points: f32[3, 10, 3], angles: f32[3], points2d: f32[10, 2]
) -> tuple[f32[3, 10, 3], f32[3, 3, 3], f32[3, 10, 3], f32[10, 2]]:
    p, m = _rotation_3d_in_axis(points, angles, axis=2, return_mat=True)
    q = _rotation_3d_in_axis(points, angles, axis=0, clockwise=True)
    r = _rotation_3d_in_axis(points2d, 0.3)
    return p, m, q, r


def _limit_period(val, offset=0.5, period=np.pi):
    limited_val = val - torch.floor(val / period + offset) * period
    return limited_val


# mmdetection3d, mmdet3d/core/bbox/structures/utils.py: limit_period, on yaw angles spread over several turns
def mmdet3d_limit_period(yaw: f32[4, 20]) -> tuple[f32[4, 20], f32[4, 20]]:
    val = yaw * 10
    a = _limit_period(val)
    b = _limit_period(val, offset=1, period=2 * np.pi)
    return a, b


# Phased LSTM (Neil, Pfeiffer and Liu, 2016), the PyTorch PhasedLSTMCell of dannyneil/pytorch_plstm: an LSTM cell
# whose state updates only in the open phase of a per-unit oscillation of period tau and shift s (r_on 0.05,
# leak alpha 1e-3 while closed); hidden 16, input 8, batch 2, 6 steps at the given times
def phased_lstm(
    x: f32[6, 2, 8], times: f32[6, 2, 1], w_ih: f32[64, 8], w_hh: f32[64, 16], b: f32[64], log_tau: f32[16], s: f32[16]
) -> tuple[f32[6, 2, 16], f32[2, 16]]:
    # Periods in [e, e^5] and shifts in [0, 2) before the first time (2): phases stay in [0, 1), where the cell is a
    # convex mix of the old and new state (a negative phase would scale state differences by up to 40 per step).
    tau = torch.exp(log_tau * 2 + 3)
    phase = s.abs() * 2
    r_on = 0.05
    alpha = 1e-3
    h = torch.zeros(2, 16)
    c = torch.zeros(2, 16)
    outputs = []
    for t in range(x.size(0)):
        ts = times[t] + 3 + t
        gates = F.linear(x[t], w_ih, b) + F.linear(h, w_hh)
        i, f, g, o = gates.chunk(4, 1)
        c_s = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h_s = torch.sigmoid(o) * torch.tanh(c_s)
        phi = torch.fmod(ts - phase, tau) / tau
        k_up = 2 * phi / r_on
        k_down = 2 - k_up
        k_closed = alpha * phi
        k = torch.where(phi < r_on, k_down, k_closed)
        k = torch.where(phi < 0.5 * r_on, k_up, k)
        c = k * c_s + (1 - k) * c
        h = k * h_s + (1 - k) * h
        outputs.append(h)
    return torch.stack(outputs), c


def _grud_step(x, x_last_obsv, x_mean, h, mask, delta, params):
    w_gx, b_gx, w_gh, b_gh, w_z, b_z, w_r, b_r, w_h, b_h = params
    zeros_x = torch.zeros(x.shape[1])
    zeros_h = torch.zeros(h.shape[1])
    filter_square_matrix = torch.eye(x.shape[1])
    delta_x = torch.exp(-torch.max(zeros_x, F.linear(delta, filter_square_matrix.mul(w_gx), b_gx)))
    delta_h = torch.exp(-torch.max(zeros_h, F.linear(delta, w_gh, b_gh)))

    x = mask * x + (1 - mask) * (delta_x * x_last_obsv + (1 - delta_x) * x_mean)
    h = delta_h * h

    combined = torch.cat((x, h, mask), 1)
    z = torch.sigmoid(F.linear(combined, w_z, b_z))
    r = torch.sigmoid(F.linear(combined, w_r, b_r))
    combined_r = torch.cat((x, r * h, mask), 1)
    h_tilde = torch.tanh(F.linear(combined_r, w_h, b_h))
    h = (1 - z) * h + z * h_tilde
    return h


# GRU-D (Che et al., 2018), zhiyongc/GRU-D's GRUD.step and forward: a GRU whose inputs decay toward the empirical
# mean and whose state decays with the time since the last observation (input 5, hidden 12, batch 3, 7 steps; the
# mask and the time gaps are made from the raw inputs)
def grud(
    X: f32[3, 7, 5], raw_mask: f32[3, 7, 5], raw_delta: f32[3, 7, 5], X_mean: f32[1, 7, 5],
    w_gx: f32[5, 5], b_gx: f32[5], w_gh: f32[12, 5], b_gh: f32[12], w_z: f32[12, 22], b_z: f32[12],
    w_r: f32[12, 22], b_r: f32[12], w_h: f32[12, 22], b_h: f32[12]
) -> f32[3, 12]:
    Mask = (raw_mask > 0).float()
    Delta = raw_delta.abs() * 3
    X_last_obsv = X.roll(1, dims=1) * Mask
    params = (w_gx, b_gx, w_gh, b_gh, w_z, b_z, w_r, b_r, w_h, b_h)
    batch_size = X.size(0)
    step_size = X.size(1)
    Hidden_State = torch.zeros(batch_size, 12)
    for i in range(step_size):
        Hidden_State = _grud_step(
            torch.squeeze(X[:, i:i + 1, :]),
            torch.squeeze(X_last_obsv[:, i:i + 1, :]),
            torch.squeeze(X_mean[:, i:i + 1, :]),
            Hidden_State,
            torch.squeeze(Mask[:, i:i + 1, :]),
            torch.squeeze(Delta[:, i:i + 1, :]),
            params,
        )
    return Hidden_State


def _prepare_4d_causal_attention_mask_with_cache_position(
    attention_mask, sequence_length, target_length, dtype, device, cache_position, batch_size, **kwargs
):
    if attention_mask is not None and attention_mask.dim() == 4:
        # In this case we assume that the mask comes already in inverted form and requires no inversion or slicing.
        causal_mask = attention_mask
    else:
        min_dtype = torch.finfo(dtype).min
        causal_mask = torch.full(
            (sequence_length, target_length), fill_value=min_dtype, dtype=dtype, device=device
        )
        if sequence_length != 1:
            causal_mask = torch.triu(causal_mask, diagonal=1)
        causal_mask *= torch.arange(target_length, device=device) > cache_position.reshape(-1, 1)
        causal_mask = causal_mask[None, None, :, :].expand(batch_size, 1, -1, -1)
        if attention_mask is not None:
            causal_mask = causal_mask.clone()  # copy to contiguous memory for in-place edit
            mask_length = attention_mask.shape[-1]
            padding_mask = causal_mask[:, :, :, :mask_length] + attention_mask[:, None, None, :].to(
                causal_mask.device
            )
            padding_mask = padding_mask == 0
            causal_mask[:, :, :, :mask_length] = causal_mask[:, :, :, :mask_length].masked_fill(
                padding_mask, min_dtype
            )
    return causal_mask


# Hugging Face transformers, models/llama/modeling_llama.py: _prepare_4d_causal_attention_mask_with_cache_position
# (5 new tokens after 3 cached ones, a static cache of 12, a padding mask of 10; and one decode token)
def hf_causal_mask_cache_position(raw_attention: i64[2, 10], x: f32[2, 5, 8]) -> tuple[f32[2, 1, 5, 12], f32[2, 1, 1, 12]]:
    attention_mask = (raw_attention > 2).long()
    dtype, device = x.dtype, x.device
    cache_position = torch.arange(3, 3 + x.shape[1], device=device)
    prefill = _prepare_4d_causal_attention_mask_with_cache_position(
        attention_mask, sequence_length=x.shape[1], target_length=12, dtype=dtype, device=device,
        cache_position=cache_position, batch_size=x.shape[0],
    )
    decode = _prepare_4d_causal_attention_mask_with_cache_position(
        attention_mask, 1, 12, dtype, device, torch.tensor([9]), x.shape[0], config=None
    )
    return prefill, decode


def _get_token_bin_counts_and_mask(tokens, vocab_size, num_seqs):
    # Compute the bin counts for the tokens.
    # vocab_size + 1 for padding.
    bin_counts = torch.zeros((num_seqs, vocab_size + 1), dtype=torch.long, device=tokens.device)
    bin_counts.scatter_add_(1, tokens, torch.ones_like(tokens))
    bin_counts = bin_counts[:, :vocab_size]
    mask = bin_counts > 0

    return bin_counts, mask


def _apply_penalties(logits, prompt_tokens_tensor, output_tokens_tensor, presence_penalties, frequency_penalties,
                     repetition_penalties):
    num_seqs, vocab_size = logits.shape
    _, prompt_mask = _get_token_bin_counts_and_mask(prompt_tokens_tensor, vocab_size, num_seqs)
    output_bin_counts, output_mask = _get_token_bin_counts_and_mask(output_tokens_tensor, vocab_size, num_seqs)
    repetition_penalties = repetition_penalties.unsqueeze(dim=1).repeat(1, vocab_size)
    logits[logits > 0] /= torch.where(prompt_mask | output_mask, repetition_penalties, 1.0)[logits > 0]
    logits[logits <= 0] *= torch.where(prompt_mask | output_mask, repetition_penalties, 1.0)[logits <= 0]
    # We follow the definition in OpenAI API.
    # Refer to https://platform.openai.com/docs/api-reference/parameter-details
    logits -= frequency_penalties.unsqueeze(dim=1) * output_bin_counts
    logits -= presence_penalties.unsqueeze(dim=1) * output_mask
    return logits


# vLLM (vllm-project/vllm), model_executor/layers/utils.py: get_token_bin_counts_and_mask and apply_penalties
# (3 sequences, vocabulary 12 so that the tokens in [0, 10) leave two unseen, prompts of 6 and outputs of 4)
def vllm_apply_penalties(
    logits: f32[3, 12], prompt_tokens: i64[3, 6], output_tokens: i64[3, 4], raw_presence: f32[3],
    raw_frequency: f32[3], raw_repetition: f32[3]
) -> f32[3, 12]:
    presence_penalties = raw_presence * 0.5
    frequency_penalties = raw_frequency * 0.2
    repetition_penalties = 1.0 + raw_repetition.abs()
    return _apply_penalties(logits, prompt_tokens, output_tokens, presence_penalties, frequency_penalties,
                            repetition_penalties)


def _exclude_bias_and_norm(p):
    return p.ndim == 1


# Barlow Twins (facebookresearch/barlowtwins), main.py: LARS.step, three steps over a weight and a bias (the bias is
# excluded from weight decay and from the LARS adaptation); the optimizer's per-parameter state is a dict by index
def barlow_lars_steps(
    w: f32[8, 6], bias: f32[6], grads_w: f32[3, 8, 6], grads_b: f32[3, 6]
) -> tuple[f32[8, 6], f32[6]]:
    g = dict(lr=0.2, weight_decay=1.5e-6, momentum=0.9, eta=0.001,
             weight_decay_filter=_exclude_bias_and_norm, lars_adaptation_filter=_exclude_bias_and_norm)
    params = [w, bias]
    state = {}
    for step in range(3):
        grads = [grads_w[step], grads_b[step]]
        for i, p in enumerate(params):
            dp = grads[i]

            if g['weight_decay_filter'] is None or not g['weight_decay_filter'](p):
                dp = dp.add(p, alpha=g['weight_decay'])

            if g['lars_adaptation_filter'] is None or not g['lars_adaptation_filter'](p):
                param_norm = torch.norm(p)
                update_norm = torch.norm(dp)
                one = torch.ones_like(param_norm)
                q = torch.where(param_norm > 0.,
                                torch.where(update_norm > 0,
                                            (g['eta'] * param_norm / update_norm), one), one)
                dp = dp.mul(q)

            if i not in state:
                state[i] = torch.zeros_like(p)
            mu = state[i]
            mu.mul_(g['momentum']).add_(dp)

            p.add_(mu, alpha=-g['lr'])
    return w, bias


# AdaMod (lancopku/AdaMod), adamod/adamod.py: AdaMod.step (lr 1e-3, betas (0.9, 0.999), beta3 0.999, weight decay
# 1e-2), four steps on two parameters; per-parameter state kept in a list of dicts
def adamod_steps(p1: f32[10, 4], p2: f32[4], grads1: f32[4, 10, 4], grads2: f32[4, 4]) -> tuple[f32[10, 4], f32[4]]:
    group = {'lr': 1e-3, 'betas': (0.9, 0.999), 'beta3': 0.999, 'eps': 1e-8, 'weight_decay': 1e-2}
    states = [{}, {}]
    for k in range(4):
        for p, grad, state in zip([p1, p2], [grads1[k], grads2[k]], states):
            # State initialization
            if len(state) == 0:
                state['step'] = 0
                # Exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(p.data)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(p.data)
                # Exponential moving average of actual learning rates
                state['exp_avg_lr'] = torch.zeros_like(p.data)

            exp_avg, exp_avg_sq, exp_avg_lr = state['exp_avg'], state['exp_avg_sq'], state['exp_avg_lr']
            beta1, beta2 = group['betas']

            state['step'] += 1

            # Decay the first and second moment running average coefficient
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

            denom = exp_avg_sq.sqrt().add_(group['eps'])

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']
            step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1

            if group['weight_decay'] != 0:
                p.data.add_(p.data, alpha=-group['weight_decay'] * group['lr'])

            # Applies momental bounds on actual learning rates
            step_size = torch.full_like(denom, step_size)
            step_size.div_(denom)
            exp_avg_lr.mul_(group['beta3']).add_(step_size, alpha=1 - group['beta3'])
            step_size = torch.min(step_size, exp_avg_lr)
            step_size.mul_(exp_avg)

            p.data.add_(-step_size)
    return p1, p2


def _repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def _eager_attention_forward(query, key, value, attention_mask, num_key_value_groups, head_dim, training=False,
                             dropout=0.0, scaling=None, softcap=None, **kwargs):
    if scaling is None:
        scaling = head_dim**-0.5

    key_states = _repeat_kv(key, num_key_value_groups)
    value_states = _repeat_kv(value, num_key_value_groups)

    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling

    if softcap is not None:
        attn_weights = attn_weights / softcap
        attn_weights = torch.tanh(attn_weights)
        attn_weights = attn_weights * softcap
    if attention_mask is not None:  # no matter the length, we just slice it
        causal_mask = attention_mask[:, :, :, : key_states.shape[-2]]
        attn_weights = attn_weights + causal_mask

    # upcast attention to fp32
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=training)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


# Hugging Face transformers, models/gemma2/modeling_gemma2.py: eager_attention_forward with repeat_kv and attention
# logit soft-capping (4 query heads over 2 key/value heads, head_dim 8, softcap 50 on logits scaled up 30x so that
# it bites; the module's attributes passed as arguments), then the final logit soft-capping of Gemma2ForCausalLM
def gemma2_softcap_attention(
    q: f32[1, 4, 6, 8], k: f32[1, 2, 10, 8], v: f32[1, 2, 10, 8], w_out: f32[20, 32]
) -> tuple[f32[1, 6, 4, 8], f32[1, 4, 6, 10], f32[1, 6, 20]]:
    min_value = torch.finfo(q.dtype).min
    mask = torch.full((6, 12), min_value).triu(diagonal=5)[None, None]
    out, weights = _eager_attention_forward(q * 30, k, v, mask, num_key_value_groups=2, head_dim=8,
                                            scaling=8**-0.5, softcap=50.0)
    hidden_states = out.reshape(1, 6, 32)
    logits = F.linear(hidden_states, w_out)
    final_logit_softcapping = 30.0
    logits = logits / final_logit_softcapping
    logits = torch.tanh(logits)
    logits = logits * final_logit_softcapping
    return out, weights, logits
