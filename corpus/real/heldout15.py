"""Held-out real code, issue 14's fifteenth round: Detectron2's Boxes.clip and pairwise_ioa, MMDetection's
bbox_rescale, torchvision's box_convert, PyTorch's own LSTM (with projections, bidirectional) and GRU decompositions, a
Mamba-2 decode step, Hugging Face's YaRN rotary embedding, Qwen2-MoE's sparse MoE block and Bark's EOS prioritizer,
timm's NAdamW, torch-optimizer's SGDW and pytorch_optimizer's Tiger. Inputs arrive uniform in [-1, 1); integer inputs
in [0, 10). The Qwen2-MoE block (`torch.where(cond)`, a data-dependent shape) is in
tests/real_pending/heldout_r15.py."""
from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _boxes_area(box):
    area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])
    return area


def _boxes_clip(tensor, box_size):
    assert torch.isfinite(tensor).all(), "Box tensor contains infinite or NaN!"
    h, w = box_size
    x1 = tensor[:, 0].clamp(min=0, max=w)
    y1 = tensor[:, 1].clamp(min=0, max=h)
    x2 = tensor[:, 2].clamp(min=0, max=w)
    y2 = tensor[:, 3].clamp(min=0, max=h)
    tensor = torch.stack((x1, y1, x2, y2), dim=-1)
    return tensor


def _pairwise_intersection(boxes1, boxes2):
    width_height = torch.min(boxes1[:, None, 2:], boxes2[:, 2:]) - torch.max(
        boxes1[:, None, :2], boxes2[:, :2]
    )  # [N,M,2]

    width_height.clamp_(min=0)  # [N,M,2]
    intersection = width_height.prod(dim=2)  # [N,M]
    return intersection


def _pairwise_ioa(boxes1, boxes2):
    area2 = _boxes_area(boxes2)  # [M]
    inter = _pairwise_intersection(boxes1, boxes2)

    # handle empty boxes
    ioa = torch.where(
        inter > 0, inter / area2, torch.zeros(1, dtype=inter.dtype, device=inter.device)
    )
    return ioa


# Detectron2 (facebookresearch/detectron2), detectron2/structures/boxes.py: Boxes.clip on both box sets, then
# pairwise_ioa (with pairwise_intersection and Boxes.area); image 40x50, boxes made valid from the raw inputs
def d2_clip_pairwise_ioa(raw1: f32[12, 4], raw2: f32[9, 4]) -> f32[12, 9]:
    xy1 = raw1[:, :2] * 30 + 20
    boxes1 = torch.cat([xy1, xy1 + raw1[:, 2:].abs() * 20 + 2], dim=1)
    xy2 = raw2[:, :2] * 30 + 20
    boxes2 = torch.cat([xy2, xy2 + raw2[:, 2:].abs() * 20 + 2], dim=1)
    boxes1 = _boxes_clip(boxes1, (40, 50))
    boxes2 = _boxes_clip(boxes2, (40, 50))
    return _pairwise_ioa(boxes1, boxes2)


def _bbox_rescale(bboxes, scale_factor=1.0):
    if bboxes.size(1) == 5:
        bboxes_ = bboxes[:, 1:]
        inds_ = bboxes[:, 0]
    else:
        bboxes_ = bboxes
    cx = (bboxes_[:, 0] + bboxes_[:, 2]) * 0.5
    cy = (bboxes_[:, 1] + bboxes_[:, 3]) * 0.5
    w = bboxes_[:, 2] - bboxes_[:, 0]
    h = bboxes_[:, 3] - bboxes_[:, 1]
    w = w * scale_factor
    h = h * scale_factor
    x1 = cx - 0.5 * w
    x2 = cx + 0.5 * w
    y1 = cy - 0.5 * h
    y2 = cy + 0.5 * h
    if bboxes.size(1) == 5:
        rescaled_bboxes = torch.stack([inds_, x1, y1, x2, y2], dim=-1)
    else:
        rescaled_bboxes = torch.stack([x1, y1, x2, y2], dim=-1)
    return rescaled_bboxes


# MMDetection (open-mmlab/mmdetection), mmdet/core/bbox/transforms.py: bbox_rescale on RoIs (batch index in the
# first column, as SABL's heads call it with scale 1.5) and on plain boxes (scale 0.8)
def mmdet_bbox_rescale(raw_rois: f32[16, 5], img_ids: i64[16], raw_boxes: f32[10, 4]) -> tuple[f32[16, 5], f32[10, 4]]:
    rois = raw_rois.clone()
    rois[:, 0] = (img_ids % 2).float()
    rois[:, 3:] = rois[:, 1:3] + raw_rois[:, 3:].abs() * 10 + 1
    boxes = torch.cat([raw_boxes[:, :2] * 5, raw_boxes[:, :2] * 5 + raw_boxes[:, 2:].abs() + 0.5], dim=1)
    return _bbox_rescale(rois, 1.5), _bbox_rescale(boxes, 0.8)


def _box_cxcywh_to_xyxy(boxes: Tensor) -> Tensor:
    # We need to change all 4 of them so some temporary variable is needed.
    cx, cy, w, h = boxes.unbind(-1)
    x1 = cx - 0.5 * w
    y1 = cy - 0.5 * h
    x2 = cx + 0.5 * w
    y2 = cy + 0.5 * h

    boxes = torch.stack((x1, y1, x2, y2), dim=-1)

    return boxes


def _box_xyxy_to_cxcywh(boxes: Tensor) -> Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    cx = (x1 + x2) / 2
    cy = (y1 + y2) / 2
    w = x2 - x1
    h = y2 - y1

    boxes = torch.stack((cx, cy, w, h), dim=-1)

    return boxes


def _box_xywh_to_xyxy(boxes: Tensor) -> Tensor:
    x, y, w, h = boxes.unbind(-1)
    boxes = torch.stack([x, y, x + w, y + h], dim=-1)
    return boxes


def _box_xyxy_to_xywh(boxes: Tensor) -> Tensor:
    x1, y1, x2, y2 = boxes.unbind(-1)
    w = x2 - x1  # x2 - x1
    h = y2 - y1  # y2 - y1
    boxes = torch.stack((x1, y1, w, h), dim=-1)
    return boxes


def _box_convert(boxes: Tensor, in_fmt: str, out_fmt: str) -> Tensor:
    allowed_fmts = ("xyxy", "xywh", "cxcywh")
    if in_fmt not in allowed_fmts or out_fmt not in allowed_fmts:
        raise ValueError("Unsupported Bounding Box Conversions for given in_fmt and out_fmt")

    if in_fmt == out_fmt:
        return boxes.clone()

    if in_fmt != "xyxy" and out_fmt != "xyxy":
        # convert to xyxy and change in_fmt xyxy
        if in_fmt == "xywh":
            boxes = _box_xywh_to_xyxy(boxes)
        elif in_fmt == "cxcywh":
            boxes = _box_cxcywh_to_xyxy(boxes)
        in_fmt = "xyxy"

    if in_fmt == "xyxy":
        if out_fmt == "xywh":
            boxes = _box_xyxy_to_xywh(boxes)
        elif out_fmt == "cxcywh":
            boxes = _box_xyxy_to_cxcywh(boxes)
    elif out_fmt == "xyxy":
        if in_fmt == "xywh":
            boxes = _box_xywh_to_xyxy(boxes)
        elif in_fmt == "cxcywh":
            boxes = _box_cxcywh_to_xyxy(boxes)
    return boxes


def _box_area(boxes: Tensor) -> Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


# torchvision (pytorch/vision), torchvision/ops/boxes.py and ops/_box_convert.py: box_convert cxcywh -> xywh (through
# xyxy), xywh -> cxcywh, cxcywh -> cxcywh (a clone), and box_area of the xyxy form, on [2, 20, 4] and [20, 4] boxes
def tv_box_convert(cxcywh: f32[2, 20, 4], raw: f32[20, 4]) -> tuple[f32[2, 20, 4], f32[20, 4], f32[20, 4], f32[20]]:
    a = _box_convert(cxcywh, in_fmt="cxcywh", out_fmt="xywh")
    b = _box_convert(raw, in_fmt="xywh", out_fmt="cxcywh")
    c = _box_convert(raw, in_fmt="cxcywh", out_fmt="cxcywh")
    area = _box_area(_box_convert(raw, in_fmt="cxcywh", out_fmt="xyxy"))
    return a, b, c, area


def _gather_params(params, has_biases, has_projections):
    if has_biases and has_projections:
        group_size = 5
    elif has_biases:
        group_size = 4
    elif has_projections:
        group_size = 3
    else:
        group_size = 2

    if len(params) % group_size != 0:
        raise AssertionError(
            f"len(params)={len(params)} is not divisible by group_size={group_size}"
        )
    return [
        tuple(params[i : i + group_size]) for i in range(0, len(params), group_size)
    ]


def _params_hiddens(params, hiddens, i, bidirectional):
    if bidirectional:
        cur_params, cur_hidden = params[2 * i], hiddens[2 * i]
        bidir_params, bidir_hidden = params[2 * i + 1], hiddens[2 * i + 1]
    else:
        cur_params, cur_hidden = params[i], hiddens[i]
        bidir_params, bidir_hidden = None, None

    return cur_params, cur_hidden, bidir_params, bidir_hidden


def _rnn_helper(
    input,
    hidden,
    params,
    has_biases,
    num_layers,
    dropout,
    train,
    bidirectional,
    batch_first,
    layer_fn,
):
    input = input.transpose(0, 1) if batch_first else input
    final_hiddens = []

    for i in range(num_layers):
        cur_params, cur_hidden, bidir_params, bidir_hidden = _params_hiddens(
            params, hidden, i, bidirectional
        )
        dropout = dropout if (train and num_layers < i - 1) else 0.0
        fwd_inp, fwd_hidden = layer_fn(input, cur_hidden, cur_params, has_biases)
        final_hiddens.append(fwd_hidden)

        if bidirectional:
            bwd_inp, bwd_hidden = layer_fn(
                input, bidir_hidden, bidir_params, has_biases, reverse=True
            )
            final_hiddens.append(bwd_hidden)

        if bidirectional:
            input = torch.cat([fwd_inp, bwd_inp], fwd_inp.dim() - 1)  # type: ignore[possibly-undefined]
        else:
            input = fwd_inp

        if dropout != 0 and train and i < num_layers - 1:
            input = torch.dropout(input, dropout, train=True)

    input = input.transpose(0, 1) if batch_first else input
    return input, final_hiddens


def _lstm_cell(inp, hx, cx, hh_weight, hh_bias, hr_weight, chunk_dim):
    gates = F.linear(hx, hh_weight, hh_bias) + inp
    chunked_gates = gates.chunk(4, chunk_dim)
    in_gate = chunked_gates[0].sigmoid()
    forget_gate = chunked_gates[1].sigmoid()
    cell_gate = chunked_gates[2].tanh()
    out_gate = chunked_gates[3].sigmoid()
    cy = forget_gate * cx + (in_gate * cell_gate)
    hy = out_gate * cy.tanh()
    hy = hy if hr_weight is None else F.linear(hy, hr_weight, None)

    return hy, cy


def _one_layer_lstm(inp, hidden, params, has_biases, reverse=False):
    ih_weight = params[0]
    hh_weight = params[1]
    ih_bias = params[2] if has_biases else None
    hh_bias = params[3] if has_biases else None
    hr_weight = (
        params[4] if len(params) == 5 else params[2] if len(params) == 3 else None
    )

    hx = hidden[0].unsqueeze(0)
    cx = hidden[1].unsqueeze(0)

    precomputed_input = F.linear(inp, ih_weight, ih_bias)
    precomputed_input = precomputed_input.flip(0) if reverse else precomputed_input
    step_output = []
    for inp in precomputed_input:
        hx, cx = _lstm_cell(inp, hx, cx, hh_weight, hh_bias, hr_weight, chunk_dim=2)
        step_output.append(hx)

    if reverse:
        step_output.reverse()

    out = torch.cat(step_output, 0)

    return out, (hx.squeeze(0), cx.squeeze(0))


# PyTorch (pytorch/pytorch), torch/_decomp/decompositions.py: lstm_impl (aten.lstm.input's decomposition) with
# gather_params, params_hiddens, _rnn_helper, one_layer_lstm and lstm_cell; one bidirectional layer with biases and
# projections (input 6, hidden 8, proj 4, batch 2, 5 steps, batch_first)
def torch_decomp_lstm_proj_bidir(
    input: f32[2, 5, 6], h0: f32[2, 2, 4], c0: f32[2, 2, 8],
    w_ih: f32[2, 32, 6], w_hh: f32[2, 32, 4], b_ih: f32[2, 32], b_hh: f32[2, 32], w_hr: f32[2, 4, 8]
) -> tuple[f32[2, 5, 8], f32[2, 2, 4], f32[2, 2, 8]]:
    hx = (h0, c0)
    params = [w_ih[0], w_hh[0], b_ih[0], b_hh[0], w_hr[0], w_ih[1], w_hh[1], b_ih[1], b_hh[1], w_hr[1]]
    has_biases, num_layers, dropout, train, bidirectional, batch_first = True, 1, 0.0, False, True, True
    if len(hx) != 2:
        raise AssertionError(f"lstm expects two hidden states, got {len(hx)}")
    params = _gather_params(params, has_biases, hx[0].size(2) != hx[1].size(2))
    hidden = list(zip(hx[0], hx[1]))
    layer_fn = _one_layer_lstm
    out, final_hiddens = _rnn_helper(
        input,
        hidden,
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        layer_fn,
    )
    final_hiddens = list(zip(*final_hiddens))
    return out, torch.stack(final_hiddens[0], 0), torch.stack(final_hiddens[1], 0)


# Mamba-2 (state-spaces/mamba), mamba_ssm/modules/mamba2.py: Mamba2.step on the path without the Triton kernels
# (causal_conv1d_update and selective_state_update None: torch.roll conv state, einsum state update), rmsnorm off,
# d_model 8, expand 2 (d_ssm 16), headdim 4 (4 heads), d_state 8, ngroups 1, d_conv 4, batch 2, three decode steps;
# einops' rearrange written as view/unsqueeze
def mamba2_step(
    hidden: f32[3, 2, 1, 8], in_proj_w: f32[52, 8], conv_w: f32[32, 1, 4], conv_b: f32[32], dt_bias: f32[4],
    A_log: f32[4], D: f32[4], out_proj_w: f32[8, 16], conv_state: f32[2, 32, 4], ssm_state: f32[2, 4, 4, 8]
) -> tuple[f32[3, 2, 1, 8], f32[2, 32, 4], f32[2, 4, 4, 8]]:
    d_ssm, ngroups, d_state, nheads, headdim = 16, 1, 8, 4, 4
    outs = []
    for t in range(3):
        hidden_states = hidden[t]
        dtype = hidden_states.dtype
        assert hidden_states.shape[1] == 1, "Only support decoding with 1 token at a time for now"
        zxbcdt = F.linear(hidden_states.squeeze(1), in_proj_w)  # (B 2D)
        d_mlp = (zxbcdt.shape[-1] - 2 * d_ssm - 2 * ngroups * d_state - nheads) // 2
        z0, x0, z, xBC, dt = torch.split(
            zxbcdt,
            [d_mlp, d_mlp, d_ssm, d_ssm + 2 * ngroups * d_state, nheads],
            dim=-1
        )

        # Conv step
        conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))  # Update state (B D W)
        conv_state[:, :, -1] = xBC
        xBC = torch.sum(conv_state * conv_w.squeeze(1), dim=-1)  # (B D)
        xBC = xBC + conv_b
        xBC = F.silu(xBC).to(dtype=dtype)

        x, B, C = torch.split(xBC, [d_ssm, ngroups * d_state, ngroups * d_state], dim=-1)
        A = -torch.exp(A_log.float())  # (nheads,)

        # SSM step
        assert ngroups == 1, "Only support ngroups=1 for this inference code path"
        # Discretize A and B
        dt = F.softplus(dt + dt_bias.to(dtype=dt.dtype))  # (batch, nheads)
        dA = torch.exp(dt * A)  # (batch, nheads)
        x = x.view(x.shape[0], nheads, headdim)
        dBx = torch.einsum("bh,bn,bhp->bhpn", dt, B, x)
        ssm_state.copy_(ssm_state * dA.unsqueeze(-1).unsqueeze(-1) + dBx)
        y = torch.einsum("bhpn,bn->bhp", ssm_state.to(dtype), C)
        y = y + D.to(dtype).unsqueeze(-1) * x
        y = y.view(y.shape[0], nheads * headdim)
        y = y * F.silu(z)  # (B D)
        if d_mlp > 0:
            y = torch.cat([F.silu(z0) * x0, y], dim=-1)
        out = F.linear(y, out_proj_w)
        outs.append(out.unsqueeze(1))
    return torch.stack(outs, 0), conv_state, ssm_state


def _compute_yarn_parameters(config, device, seq_len=None):
    base = config["rope_theta"]
    partial_rotary_factor = config["partial_rotary_factor"] if "partial_rotary_factor" in config else 1.0
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    dim = int(head_dim * partial_rotary_factor)
    max_position_embeddings = config["max_position_embeddings"]
    factor = config["rope_scaling"]["factor"]

    # Sets the attention factor as suggested in the paper
    attention_factor = config["rope_scaling"].get("attention_factor")
    if attention_factor is None:
        attention_factor = 0.1 * math.log(factor) + 1.0

    # Optional config options
    # beta_fast/beta_slow: as suggested in the paper, default to 32/1 (correspondingly)
    beta_fast = config["rope_scaling"].get("beta_fast") or 32
    beta_slow = config["rope_scaling"].get("beta_slow") or 1

    # Compute the inverse frequencies
    def find_correction_dim(num_rotations, dim, base, max_position_embeddings):
        """Inverse dimension formula to find the dimension based on the number of rotations"""
        return (dim * math.log(max_position_embeddings / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    def find_correction_range(low_rot, high_rot, dim, base, max_position_embeddings):
        """Find dimension range bounds based on rotations"""
        low = math.floor(find_correction_dim(low_rot, dim, base, max_position_embeddings))
        high = math.ceil(find_correction_dim(high_rot, dim, base, max_position_embeddings))
        return max(low, 0), min(high, dim - 1)

    def linear_ramp_factor(min, max, dim):
        if min == max:
            max += 0.001  # Prevent singularity

        linear_func = (torch.arange(dim, dtype=torch.float32) - min) / (max - min)
        ramp_func = torch.clamp(linear_func, 0, 1)
        return ramp_func

    # Note on variable naming: "interpolation" comes from the original technique, where we interpolate the position IDs
    # to expand the possible context length. In other words, interpolation = apply scaling factor.
    pos_freqs = base ** (torch.arange(0, dim, 2).float().to(device) / dim)
    inv_freq_extrapolation = 1.0 / pos_freqs
    inv_freq_interpolation = 1.0 / (factor * pos_freqs)

    low, high = find_correction_range(beta_fast, beta_slow, dim, base, max_position_embeddings)

    # Get n-dimensional rotational scaling corrected for extrapolation
    inv_freq_extrapolation_factor = 1 - linear_ramp_factor(low, high, dim // 2).float().to(device)
    inv_freq = (
        inv_freq_interpolation * (1 - inv_freq_extrapolation_factor)
        + inv_freq_extrapolation * inv_freq_extrapolation_factor
    )

    return inv_freq, attention_factor


def _rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (_rotate_half(q) * sin)
    k_embed = (k * cos) + (_rotate_half(k) * sin)
    return q_embed, k_embed


# Hugging Face transformers, modeling_rope_utils.py: _compute_yarn_parameters (factor 4, original context 64, rope
# theta 10000, head dim 16), then models/llama/modeling_llama.py: LlamaRotaryEmbedding.forward (attention_scaling)
# and apply_rotary_pos_emb with rotate_half; the config as a dict; batch 2, 4 heads, 6 positions
def hf_yarn_rotary(q: f32[2, 4, 6, 16], k: f32[2, 4, 6, 16], position_ids: i64[2, 6]) -> tuple[f32[2, 4, 6, 16], f32[2, 4, 6, 16]]:
    config = {"rope_theta": 10000.0, "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 64,
              "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    inv_freq, attention_scaling = _compute_yarn_parameters(config, q.device)
    # Core RoPE block
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()
    sin = emb.sin()
    # Advanced RoPE types (e.g. yarn) apply a post-processing scaling factor, equivalent to scaling attention
    cos = cos * attention_scaling
    sin = sin * attention_scaling
    cos, sin = cos.to(dtype=q.dtype), sin.to(dtype=q.dtype)
    return _apply_rotary_pos_emb(q, k, cos, sin)


# Hugging Face transformers, generation/logits_process.py: BarkEosPrioritizerLogitsProcessor.__call__ (eos token
# ids [3, 7] as a tensor, min_eos_p 0.05); scores scaled to [-4, 4), vocab 40, batch 6
def hf_bark_eos_prioritizer(input_ids: i64[6, 5], raw_scores: f32[6, 40]) -> f32[6, 40]:
    scores = raw_scores * 4
    eos_token_id = torch.tensor([3, 7], device=scores.device)
    min_eos_p = 0.05
    scores_processed = scores
    if min_eos_p:
        probs = torch.nn.functional.softmax(scores.float(), dim=-1)
        # create scores full of -inf except for the eos_token_id
        early_stop_scores = torch.ones_like(scores) * -float("inf")
        early_stop_scores[:, eos_token_id] = scores[:, eos_token_id]

        do_early_stop = probs[:, eos_token_id] > min_eos_p
        do_early_stop = torch.any(do_early_stop, dim=1, keepdim=True)
        scores_processed = torch.where(do_early_stop, early_stop_scores, scores)

    return scores_processed


def _single_tensor_nadamw(
        params,
        grads,
        exp_avgs,
        exp_avg_sqs,
        state_steps,
        *,
        beta1: float,
        beta2: float,
        lr: float,
        weight_decay: float,
        eps: float,
        caution: bool,
        maximize: bool,
        capturable: bool,
        max_lr,
):

    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]

        # Update step.
        step_t += 1

        # Perform stepweight decay.
        wd_scale = lr if max_lr is None else lr ** 2 / max_lr
        param.mul_(1. - wd_scale * weight_decay)

        # Decay the first and second moment running average coefficient.
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

        step = step_t.item()
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)

        # Apply Nesterov. Only difference between NAdamW and AdamW in this implementation.
        # The official PyTorch implementation of NAdam uses a different algorithm.
        exp_avg = exp_avg.mul(beta1).add_(grad, alpha=1 - beta1)
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)

        if caution:
            # Apply caution as per 'Cautious Optimizers' - https://arxiv.org/abs/2411.16085
            mask = (exp_avg * grad > 0).to(grad.dtype)
            mask.div_(mask.mean().clamp_(min=1e-3))
            exp_avg.mul_(mask)

        param.addcdiv_(exp_avg, denom, value=-step_size)


# timm (huggingface/pytorch-image-models), timm/optim/nadamw.py: NAdamW.step's state handling and
# _single_tensor_nadamw with caution (lr 1e-2, weight decay 1e-2, corrected weight decay off), three steps on two
# parameters; tensor step counts read back with .item()
def timm_nadamw_steps(p1: f32[7, 6], p2: f32[9], grads1: f32[3, 7, 6], grads2: f32[3, 9]) -> tuple[f32[7, 6], f32[9]]:
    group = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, caution=True,
                 corrected_weight_decay=False, maximize=False, capturable=False)
    defaults_lr = 1e-2
    state = [{}, {}]
    for k in range(3):
        params_with_grad = []
        grads = []
        exp_avgs = []
        exp_avg_sqs = []
        state_steps = []
        beta1, beta2 = group['betas']

        for j, (p, g) in enumerate(zip([p1, p2], [grads1[k], grads2[k]])):
            params_with_grad.append(p)
            grads.append(g)

            st = state[j]

            # State initialization
            if len(st) == 0:
                st['step'] = torch.tensor(0.)
                # Exponential moving average of gradient values
                st['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                # Exponential moving average of squared gradient values
                st['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)

            exp_avgs.append(st['exp_avg'])
            exp_avg_sqs.append(st['exp_avg_sq'])
            state_steps.append(st['step'])

        _single_tensor_nadamw(
            params_with_grad,
            grads,
            exp_avgs,
            exp_avg_sqs,
            state_steps,
            beta1=beta1,
            beta2=beta2,
            lr=group['lr'],
            weight_decay=group['weight_decay'],
            eps=group['eps'],
            caution=group['caution'],
            maximize=group['maximize'],
            capturable=group['capturable'],
            max_lr=defaults_lr if group['corrected_weight_decay'] else None,
        )
    return p1, p2


# torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/sgdw.py: SGDW.step with Nesterov momentum 0.9
# (dampening 0, lr 0.05, weight decay 1e-3 applied as the original writes it, a scalar add_ with alpha), four steps on
# two parameters; the deprecated add(Scalar, Tensor) overload as the original writes it
def sgdw_steps(p1: f32[5, 8], p2: f32[6], grads1: f32[4, 5, 8], grads2: f32[4, 6]) -> tuple[f32[5, 8], f32[6]]:
    group = dict(lr=0.05, momentum=0.9, dampening=0.0, weight_decay=1e-3, nesterov=True)
    state = [{}, {}]
    for k in range(4):
        weight_decay = group['weight_decay']
        momentum = group['momentum']
        dampening = group['dampening']
        nesterov = group['nesterov']

        for p, grad, param_state in zip([p1, p2], [grads1[k], grads2[k]], state):
            d_p = grad.data

            if momentum != 0:
                if 'momentum_buffer' not in param_state:
                    buf = param_state['momentum_buffer'] = torch.clone(
                        d_p
                    ).detach()
                else:
                    buf = param_state['momentum_buffer']
                    buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                if nesterov:
                    d_p = d_p.add(momentum, buf)
                else:
                    d_p = buf

            # Apply momentum
            p.data.add_(d_p, alpha=-group['lr'])

            # Apply weight decay
            if weight_decay != 0:
                p.data.add_(weight_decay, alpha=-group['lr'])
    return p1, p2


def _apply_weight_decay(p, grad, lr, weight_decay, weight_decouple, fixed_decay, ratio=None):
    if weight_decouple:
        p.mul_(1.0 - weight_decay * (1.0 if fixed_decay else lr) * (ratio if ratio is not None else 1.0))
    elif weight_decay > 0.0 and grad is not None:
        grad.add_(p, alpha=weight_decay)


# pytorch_optimizer (kozistr/pytorch_optimizer), pytorch_optimizer/optimizer/tiger.py: Tiger.step with
# BaseOptimizer.apply_weight_decay; one group with decoupled decay (lr 1e-2, beta 0.965, weight decay 0.01) and one
# with coupled decay into the gradient (weight decay 0.05), four steps
def tiger_steps(p1: f32[6, 6], p2: f32[10], grads1: f32[4, 6, 6], grads2: f32[4, 10]) -> tuple[f32[6, 6], f32[10]]:
    param_groups = [
        {'params': [p1], 'grads': grads1, 'lr': 1e-2, 'beta': 0.965, 'weight_decay': 0.01, 'weight_decouple': True,
         'fixed_decay': False},
        {'params': [p2], 'grads': grads2, 'lr': 1e-2, 'beta': 0.965, 'weight_decay': 0.05, 'weight_decouple': False,
         'fixed_decay': False},
    ]
    state = {0: {}, 1: {}}
    for k in range(4):
        for gi, group in enumerate(param_groups):
            beta = group['beta']
            for p in group['params']:
                grad = group['grads'][k].clone()

                st = state[gi]

                if len(st) == 0:
                    st['exp_avg'] = torch.zeros_like(p)

                _apply_weight_decay(
                    p=p,
                    grad=grad,
                    lr=group['lr'],
                    weight_decay=group['weight_decay'],
                    weight_decouple=group['weight_decouple'],
                    fixed_decay=group['fixed_decay'],
                )

                exp_avg = st['exp_avg']
                exp_avg.mul_(beta).add_(grad, alpha=1.0 - beta)

                p.add_(torch.sign(exp_avg), alpha=-group['lr'])
    return p1, p2


def _one_layer_rnn(inp, hidden, params, has_biases, hidden_fn, reverse=False):
    ih_weight = params[0]
    hh_weight = params[1]
    ih_bias = params[2] if has_biases else None
    hh_bias = params[3] if has_biases else None

    precomputed_input = F.linear(inp, ih_weight, ih_bias)
    precomputed_input = precomputed_input.flip(0) if reverse else precomputed_input
    cur_hidden = hidden.unsqueeze(0)
    step_output = []
    for i in precomputed_input:
        cur_hidden = hidden_fn(i, cur_hidden, ih_weight, ih_bias, hh_weight, hh_bias)
        step_output.append(cur_hidden)

    if reverse:
        step_output.reverse()

    out = torch.cat(step_output, 0)

    return out, cur_hidden.squeeze(0)


def _gru_cell(inp, cur_hidden, ih_weight, ih_bias, hh_weight, hh_bias):
    chunked_igates = inp.chunk(3, 1)
    chunked_hgates = F.linear(cur_hidden, hh_weight, hh_bias).chunk(3, 2)
    reset_gate = (chunked_hgates[0] + chunked_igates[0]).sigmoid()
    input_gate = (chunked_hgates[1] + chunked_igates[1]).sigmoid()
    new_gate = (chunked_igates[2] + (chunked_hgates[2] * reset_gate)).tanh()
    return (cur_hidden - new_gate) * input_gate + new_gate


# PyTorch, torch/_decomp/decompositions.py: gru_impl (aten.gru.input's decomposition) with _rnn_helper,
# partial(one_layer_rnn, hidden_fn=gru_cell); two layers with biases (input 5, hidden 8, batch 3, 6 steps)
def torch_decomp_gru_2layer(
    input: f32[6, 3, 5], hx: f32[2, 3, 8], w_ih0: f32[24, 5], w_ih1: f32[24, 8], w_hh: f32[2, 24, 8],
    b_ih: f32[2, 24], b_hh: f32[2, 24]
) -> tuple[f32[6, 3, 8], f32[2, 3, 8]]:
    params = [w_ih0, w_hh[0], b_ih[0], b_hh[0], w_ih1, w_hh[1], b_ih[1], b_hh[1]]
    has_biases, num_layers, dropout, train, bidirectional, batch_first = True, 2, 0.0, False, False, False
    params = _gather_params(params, has_biases, False)
    out, final_hiddens = _rnn_helper(
        input,
        hx.unbind(0),
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        partial(_one_layer_rnn, hidden_fn=_gru_cell),
    )
    return out, torch.stack(final_hiddens, 0)
