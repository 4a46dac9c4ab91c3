"""Held-out real code, issue 14's eleventh round (10 of 12 ran on every engine before that round's fixes, 12 after):
Ultralytics' process_mask with crop_mask and xywhr2xyxyxyxy (numpy in the `isinstance` arm a tensor does not take, a
generator unpacked, `torch.cat` as a value), DETR's masks_to_boxes, flash-linear-attention's naive recurrent GLA and
delta rule, Hugging Face's RecurrentGemma RG-LRU (prefill and one decode step), Hugging Face's
EncoderRepetitionPenaltyLogitsProcessor, MPT's ALiBi attention, the Switch Transformers top-1 router with its losses
(`nn.Softmax(dim=-1)`, `axis=`), and torch-optimizer's DiffGrad and AggMo and timm's RMSpropTF. Inputs arrive uniform
in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _crop_mask(masks, boxes):
    _, h, w = masks.shape
    x1, y1, x2, y2 = torch.chunk(boxes[:, :, None], 4, 1)  # x1 shape(n,1,1)
    r = torch.arange(w, device=masks.device, dtype=x1.dtype)[None, None, :]  # rows shape(1,1,w)
    c = torch.arange(h, device=masks.device, dtype=x1.dtype)[None, :, None]  # cols shape(1,h,1)

    return masks * ((r >= x1) * (r < x2) * (c >= y1) * (c < y2))


def _process_mask(protos, masks_in, bboxes, shape, upsample=False):
    c, mh, mw = protos.shape  # CHW
    ih, iw = shape
    masks = (masks_in @ protos.float().view(c, -1)).view(-1, mh, mw)  # CHW
    width_ratio = mw / iw
    height_ratio = mh / ih

    downsampled_bboxes = bboxes.clone()
    downsampled_bboxes[:, 0] *= width_ratio
    downsampled_bboxes[:, 2] *= width_ratio
    downsampled_bboxes[:, 3] *= height_ratio
    downsampled_bboxes[:, 1] *= height_ratio

    masks = _crop_mask(masks, downsampled_bboxes)  # CHW
    if upsample:
        masks = F.interpolate(masks[None], shape, mode="bilinear", align_corners=False)[0]  # CHW
    return masks.gt_(0.0)


# Ultralytics (ultralytics/ultralytics), ultralytics/utils/ops.py: process_mask with upsample and crop_mask
# (8 prototypes of 12x16, 5 detections, image 24x32; boxes made valid xyxy inside the image)
def ultralytics_process_mask(protos: f32[8, 12, 16], masks_in: f32[5, 8], raw_boxes: f32[5, 4]) -> f32[5, 24, 32]:
    xy1 = (raw_boxes[:, :2] + 1) * torch.tensor([8.0, 6.0])
    wh = raw_boxes[:, 2:].abs() * torch.tensor([16.0, 12.0]) + 3
    bboxes = torch.cat([xy1, xy1 + wh], dim=1)
    return _process_mask(protos, masks_in, bboxes, (24, 32), upsample=True)


def _xywhr2xyxyxyxy(x):
    cos, sin, cat, stack = (
        (torch.cos, torch.sin, torch.cat, torch.stack)
        if isinstance(x, torch.Tensor)
        else (np.cos, np.sin, np.concatenate, np.stack)
    )

    ctr = x[..., :2]
    w, h, angle = (x[..., i : i + 1] for i in range(2, 5))
    cos_value, sin_value = cos(angle), sin(angle)
    vec1 = [w / 2 * cos_value, w / 2 * sin_value]
    vec2 = [-h / 2 * sin_value, h / 2 * cos_value]
    vec1 = cat(vec1, -1)
    vec2 = cat(vec2, -1)
    pt1 = ctr + vec1 + vec2
    pt2 = ctr + vec1 - vec2
    pt3 = ctr - vec1 - vec2
    pt4 = ctr - vec1 + vec2
    return stack([pt1, pt2, pt3, pt4], -2)


# Ultralytics, ultralytics/utils/ops.py: xywhr2xyxyxyxy on a batch of oriented boxes (B, N, 5); centers, sizes and
# angles in [0, pi/2] made from the raw inputs
def ultralytics_xywhr2xyxyxyxy(raw: f32[2, 20, 5]) -> f32[2, 20, 4, 2]:
    rboxes = torch.cat(
        [raw[..., :2] * 50 + 100, raw[..., 2:4].abs() * 30 + 5, (raw[..., 4:] + 1) * (math.pi / 4)], dim=-1
    )
    return _xywhr2xyxyxyxy(rboxes)


def _masks_to_boxes(masks):
    """Compute the bounding boxes around the provided masks

    The masks should be in format [N, H, W] where N is the number of masks, (H, W) are the spatial dimensions.

    Returns a [N, 4] tensors, with the boxes in xyxy format
    """
    if masks.numel() == 0:
        return torch.zeros((0, 4), device=masks.device)

    h, w = masks.shape[-2:]

    y = torch.arange(0, h, dtype=torch.float)
    x = torch.arange(0, w, dtype=torch.float)
    y, x = torch.meshgrid(y, x)

    x_mask = (masks * x.unsqueeze(0))
    x_max = x_mask.flatten(1).max(-1)[0]
    x_min = x_mask.masked_fill(~(masks.bool()), 1e8).flatten(1).min(-1)[0]

    y_mask = (masks * y.unsqueeze(0))
    y_max = y_mask.flatten(1).max(-1)[0]
    y_min = y_mask.masked_fill(~(masks.bool()), 1e8).flatten(1).min(-1)[0]

    return torch.stack([x_min, y_min, x_max, y_max], 1)


# DETR (facebookresearch/detr), util/box_ops.py: masks_to_boxes on 4 binary masks of 12x16 (thresholded raw input)
def detr_masks_to_boxes(raw: f32[4, 12, 16]) -> f32[4, 4]:
    masks = (raw > 0.95).float()
    return _masks_to_boxes(masks)


def _naive_recurrent_gla(q, k, v, gk, initial_state=None, output_final_state=False):
    dtype = q.dtype
    q, k, v, gk = map(lambda x: x.transpose(1, 2).float(), (q, k, v, gk))
    B, H, T, K, V = *q.shape, v.shape[-1]
    o = torch.zeros_like(v)
    scale = K ** -0.5

    h = q.new_zeros(B, H, K, V, dtype=torch.float32)
    if initial_state is not None:
        h += initial_state.float()

    for i in range(T):
        q_i = q[:, :, i] * scale
        k_i = k[:, :, i]
        v_i = v[:, :, i]
        gk_i = gk[:, :, i].exp()
        kv_i = k_i[..., None] * v_i[..., None, :]
        h = h * gk_i[..., None] + kv_i
        o[:, :, i] = (q_i[..., None] * h).sum(-2)

    if not output_final_state:
        h = None
    return o.transpose(1, 2).to(dtype), h


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/gla/naive.py: naive_recurrent_gla with an initial
# state and the final state ([B, T, H, K] layout; batch 2, 6 steps, 2 heads of 8; the gate in log space through
# logsigmoid as GatedLinearAttention computes it)
def fla_naive_recurrent_gla(
    q: f32[2, 6, 2, 8], k: f32[2, 6, 2, 8], v: f32[2, 6, 2, 8], raw_gk: f32[2, 6, 2, 8], h0: f32[2, 2, 8, 8]
) -> tuple[f32[2, 6, 2, 8], f32[2, 2, 8, 8]]:
    gk = F.logsigmoid(raw_gk + 1.0)
    return _naive_recurrent_gla(q, k, v, gk, initial_state=h0, output_final_state=True)


def _delta_rule_recurrence(q, k, v, beta, initial_state=None, output_final_state=True):
    orig_dtype = q.dtype
    b, h, l, d_k = q.shape
    q, k, v, beta = map(lambda x: x.float(), [q, k, v, beta])
    d_v = v.shape[-1]
    o = torch.zeros_like(v)
    S = torch.zeros(b, h, d_k, d_v).to(v)
    q = q * (d_k ** -0.5)

    if beta.ndim < v.ndim:
        beta = beta[..., None]

    if initial_state is not None:
        S += initial_state

    for i in range(l):
        _k = k[:, :, i]
        _q = q[:, :, i]
        _v = v[:, :, i].clone()
        beta_i = beta[:, :, i]
        _v = _v - (S.clone() * _k[..., None]).sum(-2)
        _v = _v * beta_i
        S = S.clone() + _k.unsqueeze(-1) * _v.unsqueeze(-2)
        o[:, :, i] = torch.einsum('bhd,bhdm->bhm', _q, S)
    S = None if output_final_state is False else S
    return o.to(orig_dtype), S


# flash-linear-attention, fla/ops/delta_rule/naive.py: delta_rule_recurrence with an initial state ([B, H, T, K]
# layout; batch 2, 2 heads, 6 steps, key and value dims 8); keys L2-normalized and beta a sigmoid, as DeltaNet feeds it
def fla_delta_rule_recurrence(
    q: f32[2, 2, 6, 8], raw_k: f32[2, 2, 6, 8], v: f32[2, 2, 6, 8], raw_beta: f32[2, 2, 6], h0: f32[2, 2, 8, 8]
) -> tuple[f32[2, 2, 6, 8], f32[2, 2, 8, 8]]:
    k = F.normalize(raw_k, p=2, dim=-1)
    beta = raw_beta.sigmoid()
    return _delta_rule_recurrence(q, k, v, beta, initial_state=h0, output_final_state=True)


def _sqrt_bound_derivative(x):
    # SqrtBoundDerivative.apply: an autograd.Function whose forward is torch.sqrt (the bound is on the backward)
    return torch.sqrt(x)


def _rnn_scan(hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype=torch.float32):
    # Multiply `a` by the reset.
    recurrent_gate = recurrent_gate * ~reset

    if hidden_states.shape[1] == 1:
        # Using scan in sampling mode.
        if recurrent_states is None:  # same here, when decoding you always have cache
            return hidden_states, hidden_states[:, 0].type(acc_dtype)

        else:
            contextualized_states = recurrent_gate.type(acc_dtype) * recurrent_states[:, None].to(
                recurrent_gate.device
            )
            contextualized_states += hidden_states.type(acc_dtype)
            return contextualized_states.type(hidden_states.dtype), contextualized_states[:, -1]

    else:
        # Using scan in linear mode.
        if recurrent_states is None:
            recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device)

        contextualized_states = torch.zeros_like(hidden_states)
        for t in range(hidden_states.shape[1]):
            recurrent_states = recurrent_gate[:, t].type(acc_dtype) * recurrent_states.to(recurrent_gate.device)
            recurrent_states = recurrent_states + hidden_states[:, t].type(acc_dtype)
            contextualized_states[:, t] = recurrent_states.type(hidden_states.dtype)

    return contextualized_states, recurrent_states


# Hugging Face transformers, models/recurrent_gemma/modeling_recurrent_gemma.py: RecurrentGemmaRglru.forward and
# _rnn_scan, a prefill of 6 positions then one decoding step with the carried recurrent_states (lru_width 16, 2 heads
# of 8; not tracing, so the multiplier is SqrtBoundDerivative's forward; position 0 resets the state)
def hf_recurrent_gemma_rglru(
    activations_all: f32[2, 7, 16], position_ids_all: i64[2, 7], input_gate_weight: f32[2, 8, 8],
    input_gate_bias: f32[2, 8], recurrent_gate_weight: f32[2, 8, 8], recurrent_gate_bias: f32[2, 8],
    recurrent_param: f32[16]
) -> tuple[f32[2, 6, 16], f32[2, 1, 16], f32[2, 16]]:
    num_attention_heads, block_width = 2, 8
    state = {'recurrent_states': None}

    def forward(activations, position_ids):
        batch_size, seq_len, lru_width = activations.shape
        reset = position_ids[:, :, None] == 0

        reshape_act = activations.reshape(batch_size * seq_len, num_attention_heads, block_width)
        reshape_act = reshape_act.permute(1, 0, 2)

        res = torch.baddbmm(input_gate_bias[:, None, :], reshape_act, input_gate_weight)
        input_gate = torch.sigmoid(res.transpose(0, 1).reshape(batch_size, seq_len, lru_width))

        res = torch.baddbmm(recurrent_gate_bias[:, None, :], reshape_act, recurrent_gate_weight)
        recurrent_gate = torch.sigmoid(res.transpose(0, 1).reshape(batch_size, seq_len, lru_width))

        # Compute the parameter `A` of the recurrence.
        log_recurrent_gate = -8.0 * recurrent_gate * nn.functional.softplus(recurrent_param)
        recurrent_gate = torch.exp(log_recurrent_gate)
        a_square = torch.exp(2 * log_recurrent_gate)

        # Gate the input.
        gated_inputs = activations * input_gate

        # Apply gamma normalization to the input. We need to clip the derivatives of
        # `sqrt` in order to prevent NaNs during training in bfloat16. TODO a bit annoying
        multiplier = 1
        tracing = False
        if not tracing:
            multiplier = _sqrt_bound_derivative(1 - a_square)
        multiplier = reset + ~reset * multiplier
        normalized_x = gated_inputs * multiplier.type(activations.dtype)

        hidden_states, recurrent_states = _rnn_scan(
            hidden_states=normalized_x,
            recurrent_gate=recurrent_gate,
            reset=reset,
            recurrent_states=state['recurrent_states'],
        )
        state['recurrent_states'] = recurrent_states
        return hidden_states

    prefill = forward(activations_all[:, :6], position_ids_all[:, :6])
    step = forward(activations_all[:, 6:], position_ids_all[:, 6:])
    return prefill, step, state['recurrent_states']


# Hugging Face transformers, generation/logits_process.py: EncoderRepetitionPenaltyLogitsProcessor.__init__ and
# __call__ (penalty 1.5, so self.penalty = 1 / 1.5; prompt ids may repeat)
def hf_encoder_repetition_penalty(
    encoder_input_ids: i64[2, 6], input_ids: i64[2, 4], scores: f32[2, 16]
) -> f32[2, 16]:
    penalty = 1.5
    if not isinstance(penalty, float) or not (penalty > 0):
        raise ValueError(f"`penalty` has to be a strictly positive float, but is {penalty}")
    self_penalty = 1 / penalty
    self_encoder_input_ids = encoder_input_ids

    score = torch.gather(scores, 1, self_encoder_input_ids)

    # if score < 0 then hallucination penalty has to be multiplied to increase the token probabilities
    score = torch.where(score < 0, score * self_penalty, score / self_penalty)

    scores_processed = scores.scatter(1, self_encoder_input_ids, score)
    return scores_processed


def _build_mpt_alibi_tensor(num_heads, sequence_length, alibi_bias_max=8, device=None):
    alibi = torch.arange(1 - sequence_length, 1, dtype=torch.int32, device=device).view(1, 1, 1, sequence_length)
    num_heads_power_of_2 = 2 ** math.ceil(math.log2(num_heads))

    base = torch.arange(1, num_heads_power_of_2 + 1, dtype=torch.int64, device=device).float()
    base = base * (alibi_bias_max / num_heads_power_of_2)

    slopes = 1.0 / torch.pow(2, base)
    slopes = slopes.view(1, num_heads_power_of_2, 1, 1)

    if num_heads_power_of_2 != num_heads:
        slopes = torch.concat([slopes[:, 1::2, ...], slopes[:, ::2, ...]], dim=1)[:, :num_heads, ...]

    alibi = alibi * slopes
    return alibi.squeeze(0)


# Hugging Face transformers, models/mpt/modeling_mpt.py: build_mpt_alibi_tensor and MptAttention.forward without a
# past (6 heads of 4, so the slopes of 8 heads are interleaved and cut; max_seq_len 8, 5 tokens; the boolean causal
# mask MptModel builds as `_prepare_4d_causal_attention_mask(...) < 0`, written as triu; weights at nn.Linear's scale)
def hf_mpt_alibi_attention(
    hidden_states: f32[2, 5, 24], wqkv: f32[72, 24], out_proj_w: f32[24, 24]
) -> tuple[f32[2, 5, 24], f32[2, 6, 5, 5]]:
    n_heads, head_dim, max_seq_len = 6, 4, 8
    # the weights at nn.Linear's initial scale (uniform in +-1/sqrt(fan_in))
    wqkv = wqkv / math.sqrt(24)
    out_proj_w = out_proj_w / math.sqrt(24)
    softmax_scale = 1 / math.sqrt(24 / n_heads)
    position_bias = _build_mpt_alibi_tensor(n_heads, max_seq_len, device=hidden_states.device)
    attention_mask = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)[None, None, :, :].expand(2, 1, 5, 5)
    past_key_value = None

    batch_size, seq_length = hidden_states.shape[:2]

    mixed_qkv = F.linear(hidden_states, wqkv)
    query_states, key_states, value_states = mixed_qkv.chunk(3, dim=2)
    query_states = query_states.reshape(batch_size, seq_length, n_heads, head_dim).transpose(1, 2)
    key_states = key_states.reshape(batch_size, seq_length, n_heads, head_dim).transpose(1, 2)
    value_states = value_states.reshape(batch_size, seq_length, n_heads, head_dim).transpose(1, 2)

    attention_scores = torch.matmul(query_states, key_states.transpose(-1, -2)) * softmax_scale

    query_length = seq_length if past_key_value is None else seq_length + past_key_value[0].shape[2]

    if position_bias is not None:
        if len(position_bias.shape) != 3:
            raise ValueError(f"Expecting position_bias shape to be 3 dimensions, got {len(position_bias.shape)}")
        key_length = key_states.shape[-2]

        position_bias_query_index = max(0, position_bias.size(1) - query_length)
        position_bias_key_index = max(0, position_bias.size(2) - key_length)

        position_bias = position_bias[:, position_bias_query_index:, position_bias_key_index:]

        attention_scores = attention_scores + position_bias

    if attention_mask is not None:
        attention_scores = attention_scores.masked_fill(attention_mask, torch.finfo(query_states.dtype).min)

    # (batch_size, n_heads, seq_length, key_length)
    attn_weights = nn.functional.softmax(attention_scores.float(), dim=-1).to(value_states.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=0.0, training=False)

    context_states = torch.matmul(attn_weights, value_states)
    context_states = context_states.permute(0, 2, 1, 3).contiguous().view(batch_size, seq_length, -1)
    attn_output = F.linear(context_states, out_proj_w)

    return attn_output, attn_weights


def _router_z_loss_func(router_logits: torch.Tensor) -> float:
    num_groups, tokens_per_group, _ = router_logits.shape
    log_z = torch.logsumexp(router_logits, dim=-1)
    z_loss = log_z**2
    return torch.sum(z_loss) / (num_groups * tokens_per_group)


def _load_balancing_loss_func(router_probs: torch.Tensor, expert_indices: torch.Tensor) -> float:
    num_experts = router_probs.shape[-1]

    # cast the expert indices to int64, otherwise one-hot encoding will fail
    if expert_indices.dtype != torch.int64:
        expert_indices = expert_indices.to(torch.int64)

    if len(expert_indices.shape) == 2:
        expert_indices = expert_indices.unsqueeze(2)

    expert_mask = torch.nn.functional.one_hot(expert_indices, num_experts)

    # For a given token, determine if it was routed to a given expert.
    expert_mask = torch.max(expert_mask, axis=-2).values

    # cast to float32 otherwise mean will fail
    expert_mask = expert_mask.to(torch.float32)
    tokens_per_group_and_expert = torch.mean(expert_mask, axis=-2)

    router_prob_per_group_and_expert = torch.mean(router_probs, axis=-2)
    return torch.mean(tokens_per_group_and_expert * router_prob_per_group_and_expert) * (num_experts**2)


# Hugging Face transformers, models/switch_transformers/modeling_switch_transformers.py: SwitchTransformersTop1Router
# (_compute_router_probabilities and forward, eval mode, expert capacity 3), the expert index SparseMLP takes by
# argmax of the router mask (dropped tokens get expert 0), and router_z_loss_func and load_balancing_loss_func as the
# model's forward applies them (4 experts, 2 groups of 8 tokens, hidden 16)
def hf_switch_top1_router(
    hidden_states: f32[2, 8, 16], classifier_w: f32[4, 16]
) -> tuple[i64[2, 8, 4], f32[2, 8, 1], i64[2, 8], f32[()], f32[()]]:
    num_experts, expert_capacity, jitter_noise, training = 4, 3, 0.01, False
    dtype = torch.float32

    def _compute_router_probabilities(hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(dtype)

        if training and jitter_noise > 0:
            # Multiply the token inputs by the uniform distribution - adding some noise
            hidden_states *= torch.empty_like(hidden_states).uniform_(1.0 - jitter_noise, 1.0 + jitter_noise)

        # Shape: [num_groups, tokens_per_group, num_experts]
        router_logits = F.linear(hidden_states, classifier_w)

        # Apply Softmax and cast back to the original `dtype`
        router_probabilities = nn.functional.softmax(router_logits, dim=-1, dtype=dtype).to(input_dtype)
        return router_probabilities, router_logits

    router_probs, router_logits = _compute_router_probabilities(hidden_states)

    expert_index = torch.argmax(router_probs, dim=-1)
    expert_index = torch.nn.functional.one_hot(expert_index, num_classes=num_experts)

    # Mask tokens outside expert capacity. Sum over each sequence
    token_priority = torch.cumsum(expert_index, dim=-2)
    # mask if the token routed to to the expert will overflow
    expert_capacity_mask = token_priority <= expert_capacity
    expert_index = expert_index * expert_capacity_mask

    router_probs = torch.max(router_probs, dim=-1).values.unsqueeze(-1)
    router_mask = expert_index

    expert_indexes = torch.argmax(router_mask, dim=-1)
    z_loss = _router_z_loss_func(router_logits)
    all_router_probs = nn.Softmax(dim=-1)(router_logits)
    aux_loss = _load_balancing_loss_func(all_router_probs, expert_indexes)
    return router_mask, router_probs, expert_indexes, z_loss, aux_loss


# torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/diffgrad.py: DiffGrad.step (lr 0.01, weight decay
# 1e-2), three steps on a weight and a bias; p.grad is each step's gradient slice, which the weight decay updates in
# place as the original does to p.grad.data
def diffgrad_steps(
    w: f32[6, 4], b: f32[6], grads_w: f32[3, 6, 4], grads_b: f32[3, 6]
) -> tuple[f32[6, 4], f32[6]]:
    group = dict(lr=0.01, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)
    states = [{}, {}]
    for k in range(3):
        beta1, beta2 = group['betas']
        for p, grad, state in zip([w, b], [grads_w[k], grads_b[k]], states):
            # State initialization
            if len(state) == 0:
                state['step'] = 0
                # Exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(p)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(p)
                # Previous gradient
                state['previous_grad'] = torch.zeros_like(p)

            exp_avg, exp_avg_sq, previous_grad = (
                state['exp_avg'],
                state['exp_avg_sq'],
                state['previous_grad'],
            )

            state['step'] += 1

            if group['weight_decay'] != 0:
                grad.add_(p.data, alpha=group['weight_decay'])

            # Decay the first and second moment running average coefficient
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.sqrt().add_(group['eps'])

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            # compute diffgrad coefficient (dfc)
            diff = torch.abs(previous_grad - grad)
            dfc = torch.div(1.0, (1.0 + torch.exp(-diff)))
            state['previous_grad'] = grad.clone()

            # update momentum with dfc
            exp_avg1 = exp_avg * dfc

            step_size = (group['lr'] * math.sqrt(bias_correction2) / bias_correction1)

            p.data.addcdiv_(exp_avg1, denom, value=-step_size)
    return w, b


# torch-optimizer, torch_optimizer/aggmo.py: AggMo.from_exp_form (a 0.1, k 3: betas 0.0, 0.9, 0.99) and AggMo.step
# (lr 0.1, weight decay 1e-3), three steps on two parameters; the momentum buffers in a dict keyed by beta; the
# weight decay added in place to the gradient as the original does to p.grad.data
def aggmo_steps(
    w: f32[5, 3], b: f32[5], grads_w: f32[3, 5, 3], grads_b: f32[3, 5]
) -> tuple[f32[5, 3], f32[5]]:
    lr, a, k_exp, weight_decay = 0.1, 0.1, 3, 1e-3
    betas = [1 - a ** i for i in range(k_exp)]
    group = dict(lr=lr, betas=betas, weight_decay=weight_decay)
    states = [{}, {}]
    for k in range(3):
        weight_decay = group['weight_decay']
        betas = group['betas']
        total_mom = float(len(betas))

        for p, d_p, param_state in zip([w, b], [grads_w[k], grads_b[k]], states):
            if weight_decay != 0:
                d_p.add_(p.data, alpha=weight_decay)
            if 'momentum_buffer' not in param_state:
                param_state['momentum_buffer'] = {}
                for beta in betas:
                    param_state['momentum_buffer'][
                        beta
                    ] = torch.zeros_like(
                        p.data, memory_format=torch.preserve_format
                    )
            for beta in betas:
                buf = param_state['momentum_buffer'][beta]
                buf.mul_(beta).add_(d_p)
                p.data.sub_(buf, alpha=group['lr'] / total_mom)
    return w, b


# timm (huggingface/pytorch-image-models), timm/optim/rmsprop_tf.py: RMSpropTF.step, centered, momentum 0.9 with
# the learning rate in the momentum buffer (TensorFlow style), weight decay 1e-4 (not decoupled), alpha 0.9, eps 1e-10
# inside the square root; three steps on a weight and a bias
def timm_rmsprop_tf_steps(
    w: f32[8, 4], b: f32[8], grads_w: f32[3, 8, 4], grads_b: f32[3, 8]
) -> tuple[f32[8, 4], f32[8]]:
    group = dict(lr=0.01, momentum=0.9, alpha=0.9, eps=1e-10, centered=True, weight_decay=1e-4,
                 decoupled_decay=False, lr_in_momentum=True)
    states = [{}, {}]
    for k in range(3):
        for p, grad, state in zip([w, b], [grads_w[k], grads_b[k]], states):
            # State initialization
            if len(state) == 0:
                state['step'] = 0
                state['square_avg'] = torch.ones_like(p)  # PyTorch inits to zero
                if group['momentum'] > 0:
                    state['momentum_buffer'] = torch.zeros_like(p)
                if group['centered']:
                    state['grad_avg'] = torch.zeros_like(p)

            square_avg = state['square_avg']
            one_minus_alpha = 1. - group['alpha']

            state['step'] += 1

            if group['weight_decay'] != 0:
                if group['decoupled_decay']:
                    p.mul_(1. - group['lr'] * group['weight_decay'])
                else:
                    grad = grad.add(p, alpha=group['weight_decay'])

            # Tensorflow order of ops for updating squared avg
            square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
            # square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)  # PyTorch original

            if group['centered']:
                grad_avg = state['grad_avg']
                grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(group['eps']).sqrt_()  # eps in sqrt
                # grad_avg.mul_(alpha).add_(grad, alpha=1 - alpha)  # PyTorch original
            else:
                avg = square_avg.add(group['eps']).sqrt_()  # eps moved in sqrt

            if group['momentum'] > 0:
                buf = state['momentum_buffer']
                # Tensorflow accumulates the LR scaling in the momentum buffer
                if group['lr_in_momentum']:
                    buf.mul_(group['momentum']).addcdiv_(grad, avg, value=group['lr'])
                    p.add_(-buf)
                else:
                    # PyTorch scales the param update by LR
                    buf.mul_(group['momentum']).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-group['lr'])
            else:
                p.addcdiv_(grad, avg, value=-group['lr'])
    return w, b
