"""Held-out real code, issue 14's seventh round (2 of 7 ran on every engine before the fixes of that round):
gpt-fast's decode attention, FCOS locations, DETR's box losses, a zoneout LSTM, Yogi, Lookahead and NeRF's
positional encoding. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor


# gpt-fast (pytorch-labs/gpt-fast), model.py: KVCache.update and Attention.forward for one decode step (n_head 4,
# n_local_heads 2, head_dim 8, max_seq_length 16, input_pos [5]); the mask row is causal_mask[None, None, input_pos]
def gptfast_attention_decode(
    x: f32[1, 1, 32], wqkv: f32[64, 32], wo: f32[32, 32], k_cache: f32[1, 2, 16, 8], v_cache: f32[1, 2, 16, 8]
) -> tuple[f32[1, 1, 32], f32[1, 2, 16, 8], f32[1, 2, 16, 8]]:
    n_head, n_local_heads, head_dim, dim = 4, 2, 8, 32
    bsz, seqlen, _ = x.shape
    input_pos = torch.tensor([5])
    causal_mask = torch.tril(torch.ones(16, 16, dtype=torch.bool))
    mask = causal_mask[None, None, input_pos]
    kv_size = n_local_heads * head_dim
    q, k, v = F.linear(x, wqkv).split([dim, kv_size, kv_size], dim=-1)

    q = q.view(bsz, seqlen, n_head, head_dim)
    k = k.view(bsz, seqlen, n_local_heads, head_dim)
    v = v.view(bsz, seqlen, n_local_heads, head_dim)

    q, k, v = map(lambda x: x.transpose(1, 2), (q, k, v))

    # KVCache.update
    assert input_pos.shape[0] == k.shape[2]
    k_out = k_cache
    v_out = v_cache
    k_out[:, :, input_pos] = k
    v_out[:, :, input_pos] = v
    k, v = k_out, v_out

    k = k.repeat_interleave(n_head // n_local_heads, dim=1)
    v = v.repeat_interleave(n_head // n_local_heads, dim=1)
    y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0)

    y = y.transpose(1, 2).contiguous().view(bsz, seqlen, dim)

    y = F.linear(y, wo)
    return y, k_cache, v_cache


def _compute_locations_per_level(h, w, stride, device):
    shifts_x = torch.arange(0, w * stride, step=stride, dtype=torch.float32, device=device)
    shifts_y = torch.arange(0, h * stride, step=stride, dtype=torch.float32, device=device)
    shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x)
    shift_x = shift_x.reshape(-1)
    shift_y = shift_y.reshape(-1)
    locations = torch.stack((shift_x, shift_y), dim=1) + stride // 2
    return locations


# FCOS (tianzhi0549/FCOS), fcos_core/modeling/rpn/fcos/fcos.py: FCOSModule.compute_locations and
# compute_locations_per_level, for feature maps of 4x6 and 2x3 at strides 8 and 16
def fcos_compute_locations(p3: f32[1, 2, 4, 6], p4: f32[1, 2, 2, 3]) -> tuple[f32[24, 2], f32[6, 2]]:
    fpn_strides = [8, 16]
    features = [p3, p4]
    locations = []
    for level, feature in enumerate(features):
        h, w = feature.size()[-2:]
        locations_per_level = _compute_locations_per_level(h, w, fpn_strides[level], feature.device)
        locations.append(locations_per_level)
    return locations[0], locations[1]


def _box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def _box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _box_iou(boxes1, boxes2):
    area1 = _box_area(boxes1)
    area2 = _box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    return iou, union


def _generalized_box_iou(boxes1, boxes2):
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = _box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


# DETR (facebookresearch/detr), models/detr.py: SetCriterion._get_src_permutation_idx and loss_boxes with a fixed
# matching (2 images, 3 targets each; num_boxes 6), util/box_ops.py's box_cxcywh_to_xyxy and generalized_box_iou;
# boxes made valid first (positive sizes)
def detr_loss_boxes(pred_boxes: f32[2, 5, 4], tgt0: f32[3, 4], tgt1: f32[3, 4]) -> tuple[f32[()], f32[()]]:
    pred_boxes = torch.cat([pred_boxes[..., :2], pred_boxes[..., 2:].abs() * 0.5 + 0.05], -1)
    targets = [{"boxes": torch.cat([t[:, :2], t[:, 2:].abs() * 0.5 + 0.05], -1)} for t in (tgt0, tgt1)]
    indices = [(torch.tensor([4, 0, 2]), torch.tensor([1, 2, 0])), (torch.tensor([1, 3, 0]), torch.tensor([0, 1, 2]))]
    num_boxes = 6
    # _get_src_permutation_idx
    batch_idx = torch.cat([torch.full_like(src, i) for i, (src, _) in enumerate(indices)])
    src_idx = torch.cat([src for (src, _) in indices])
    idx = (batch_idx, src_idx)
    src_boxes = pred_boxes[idx]
    target_boxes = torch.cat([t['boxes'][i] for t, (_, i) in zip(targets, indices)], dim=0)

    loss_bbox = F.l1_loss(src_boxes, target_boxes, reduction='none')

    losses = {}
    losses['loss_bbox'] = loss_bbox.sum() / num_boxes

    loss_giou = 1 - torch.diag(_generalized_box_iou(
        _box_cxcywh_to_xyxy(src_boxes),
        _box_cxcywh_to_xyxy(target_boxes)))
    losses['loss_giou'] = loss_giou.sum() / num_boxes
    return losses['loss_bbox'], losses['loss_giou']


def _zoneout(h, next_h, prob, training):
    if isinstance(h, tuple):
        num_h = len(h)
        if not isinstance(prob, tuple):
            prob = tuple([prob] * num_h)
        return tuple([_zoneout(h[i], next_h[i], prob[i], training) for i in range(num_h)])
    if training:
        mask = h.new(*h.size()).bernoulli_(prob)
        return mask * h + (1 - mask) * next_h
    else:
        return prob * h + (1 - prob) * next_h


def _lstm_cell(x, hc, w_ih, w_hh, b):
    h, c = hc
    gates = x @ w_ih.t() + h @ w_hh.t() + b
    i, f, g, o = gates.chunk(4, 1)
    c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
    h = torch.sigmoid(o) * torch.tanh(c)
    return h, c


# Tacotron 2 style zoneout LSTM (e.g. espnet, espnet/nets/pytorch_backend/tacotron2/decoder.py: ZoneOutCell.forward
# and _zoneout in evaluation mode, zoneout_rate 0.1) around an LSTMCell written out, over 5 steps
def zoneout_lstm(xs: f32[5, 2, 6], w_ih: f32[32, 6], w_hh: f32[32, 8], b: f32[32]) -> tuple[f32[5, 2, 8], f32[2, 8]]:
    zoneout_rate = 0.1
    hidden = (torch.zeros(2, 8), torch.zeros(2, 8))
    outs = []
    for t in range(xs.shape[0]):
        next_hidden = _lstm_cell(xs[t], hidden, w_ih, w_hh, b)
        hidden = _zoneout(hidden, next_hidden, zoneout_rate, False)
        outs.append(hidden[0])
    return torch.stack(outs), hidden[1]


# Yogi (jettify/pytorch-optimizer), torch_optimizer/yogi.py: Yogi.step for one parameter over 4 steps (lr 1e-2,
# betas (0.9, 0.999), eps 1e-3, initial_accumulator 1e-6, weight_decay 0); `p.data` written `p`
def yogi_steps(p: f32[5, 3], grads: f32[4, 5, 3]) -> tuple[f32[5, 3], f32[5, 3]]:
    group = {"lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-3, "initial_accumulator": 1e-6, "weight_decay": 0}
    state = {}
    for k in range(grads.shape[0]):
        grad = grads[k]
        if grad.is_sparse:
            raise RuntimeError("Yogi does not support sparse gradients")
        # State initialization
        if len(state) == 0:
            state["step"] = 0
            # Exponential moving average of gradient values
            state["exp_avg"] = torch.nn.init.constant_(
                torch.empty_like(p, memory_format=torch.preserve_format), group["initial_accumulator"])
            # Exponential moving average of squared gradient values
            state["exp_avg_sq"] = torch.nn.init.constant_(
                torch.empty_like(p, memory_format=torch.preserve_format), group["initial_accumulator"])

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        beta1, beta2 = group["betas"]

        state["step"] += 1
        bias_correction1 = 1 - beta1 ** state["step"]
        bias_correction2 = 1 - beta2 ** state["step"]

        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])

        # Decay the first and second moment running average coefficient
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)

        grad_squared = grad.mul(grad)

        exp_avg_sq.addcmul_(
            torch.sign(exp_avg_sq - grad_squared),
            grad_squared,
            value=-(1 - beta2),
        )

        denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(group["eps"])
        step_size = group["lr"] / bias_correction1
        p.addcdiv_(exp_avg, denom, value=-step_size)
    return p, state["exp_avg_sq"]


# Lookahead (lonePatient/lookahead_pytorch), optimizer.py: Lookahead.step around plain SGD (lr 0.1) for one
# parameter, k 3, alpha 0.5, over 7 steps; slow weights initialised from the parameter on the first step
def lookahead_sgd(p: f32[4, 4], grads: f32[7, 4, 4]) -> tuple[f32[4, 4], f32[4, 4]]:
    k, alpha, lr = 3, 0.5, 0.1
    step_counter = 0
    slow_weights = None
    for s in range(grads.shape[0]):
        # the inner optimizer's step (SGD)
        p.add_(grads[s], alpha=-lr)
        step_counter += 1
        if slow_weights is None:
            slow_weights = p.clone().detach()
            slow_weights.requires_grad = False
        if step_counter % k != 0:
            continue
        q = slow_weights
        q.data.add_(p.data - q.data, alpha=alpha)
        p.data.copy_(q.data)
    return p, slow_weights


# NeRF (yenchiahsu/nerf-pytorch), run_nerf_helpers.py: Embedder.create_embedding_fn and embed (multires 3,
# include_input, log_sampling, periodic_fns [sin, cos])
def nerf_positional_encoding(inputs: f32[5, 3]) -> f32[5, 21]:
    kwargs = {"include_input": True, "input_dims": 3, "max_freq_log2": 2, "num_freqs": 3, "log_sampling": True,
              "periodic_fns": [torch.sin, torch.cos]}
    embed_fns = []
    d = kwargs['input_dims']
    out_dim = 0
    if kwargs['include_input']:
        embed_fns.append(lambda x: x)
        out_dim += d

    max_freq = kwargs['max_freq_log2']
    N_freqs = kwargs['num_freqs']

    if kwargs['log_sampling']:
        freq_bands = 2. ** torch.linspace(0., max_freq, steps=N_freqs)
    else:
        freq_bands = torch.linspace(2. ** 0., 2. ** max_freq, steps=N_freqs)

    for freq in freq_bands:
        for p_fn in kwargs['periodic_fns']:
            embed_fns.append(lambda x, p_fn=p_fn, freq=freq: p_fn(x * freq))
            out_dim += d

    return torch.cat([fn(inputs) for fn in embed_fns], -1)
