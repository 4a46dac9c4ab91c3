"""Held-out real code, issue 14's thirteenth round: mmdetection's mask_matrix_nms (SOLOv2), Ultralytics' probiou and
batch_probiou, detectron2's Box2BoxTransformLinear (FCOS), flash-linear-attention's naive HGRN recurrences,
fast-transformers' RecurrentLinearAttention, ndrplz's ConvLSTM, vLLM's RotaryEmbedding.forward_native, Hugging
Face's Llama4TextMoe, torch-optimizer's AccSGD, timm's ADOPT and pytorch_optimizer's PNM (the round's Hamming
diversity processor is in tests/real_pending/heldout_r13.py). Inputs arrive uniform in [-1, 1); integer inputs in
[0, 10)."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _mask_matrix_nms(masks,
                     labels,
                     scores,
                     filter_thr=-1,
                     nms_pre=-1,
                     max_num=-1,
                     kernel='gaussian',
                     sigma=2.0,
                     mask_area=None):
    assert len(labels) == len(masks) == len(scores)
    if len(labels) == 0:
        return scores.new_zeros(0), labels.new_zeros(0), masks.new_zeros(
            0, *masks.shape[-2:]), labels.new_zeros(0)
    if mask_area is None:
        mask_area = masks.sum((1, 2)).float()
    else:
        assert len(masks) == len(mask_area)

    # sort and keep top nms_pre
    scores, sort_inds = torch.sort(scores, descending=True)

    keep_inds = sort_inds
    if nms_pre > 0 and len(sort_inds) > nms_pre:
        sort_inds = sort_inds[:nms_pre]
        keep_inds = keep_inds[:nms_pre]
        scores = scores[:nms_pre]
    masks = masks[sort_inds]
    mask_area = mask_area[sort_inds]
    labels = labels[sort_inds]

    num_masks = len(labels)
    flatten_masks = masks.reshape(num_masks, -1).float()
    # inter.
    inter_matrix = torch.mm(flatten_masks, flatten_masks.transpose(1, 0))
    expanded_mask_area = mask_area.expand(num_masks, num_masks)
    # Upper triangle iou matrix.
    iou_matrix = (inter_matrix /
                  (expanded_mask_area + expanded_mask_area.transpose(1, 0) -
                   inter_matrix)).triu(diagonal=1)
    # label_specific matrix.
    expanded_labels = labels.expand(num_masks, num_masks)
    # Upper triangle label matrix.
    label_matrix = (expanded_labels == expanded_labels.transpose(
        1, 0)).triu(diagonal=1)

    # IoU compensation
    compensate_iou, _ = (iou_matrix * label_matrix).max(0)
    compensate_iou = compensate_iou.expand(num_masks,
                                           num_masks).transpose(1, 0)

    # IoU decay
    decay_iou = iou_matrix * label_matrix

    # Calculate the decay_coefficient
    if kernel == 'gaussian':
        decay_matrix = torch.exp(-1 * sigma * (decay_iou**2))
        compensate_matrix = torch.exp(-1 * sigma * (compensate_iou**2))
        decay_coefficient, _ = (decay_matrix / compensate_matrix).min(0)
    elif kernel == 'linear':
        decay_matrix = (1 - decay_iou) / (1 - compensate_iou)
        decay_coefficient, _ = decay_matrix.min(0)
    else:
        raise NotImplementedError(
            f'{kernel} kernel is not supported in matrix nms!')
    # update the score.
    scores = scores * decay_coefficient

    if filter_thr > 0:
        keep = scores >= filter_thr
        keep_inds = keep_inds[keep]
        if not keep.any():
            return scores.new_zeros(0), labels.new_zeros(0), masks.new_zeros(
                0, *masks.shape[-2:]), labels.new_zeros(0)
        masks = masks[keep]
        scores = scores[keep]
        labels = labels[keep]

    # sort and keep top max_num
    scores, sort_inds = torch.sort(scores, descending=True)
    keep_inds = keep_inds[sort_inds]
    if max_num > 0 and len(sort_inds) > max_num:
        sort_inds = sort_inds[:max_num]
        keep_inds = keep_inds[:max_num]
        scores = scores[:max_num]
    masks = masks[sort_inds]
    labels = labels[sort_inds]

    return scores, labels, masks, keep_inds


# mmdetection (open-mmlab/mmdetection), mmdet/models/layers/matrix_nms.py: mask_matrix_nms (gaussian kernel, sigma 2,
# nms_pre 8 of 10 masks, max_num 6, no filter_thr; mask_area None so it is computed from the masks), on boolean masks
# `mask_preds > thr` as SOLOv2's head makes them; labels folded to 3 classes so that same-class pairs exist
def mmdet_mask_matrix_nms(
    mask_preds: f32[10, 6, 8], raw_labels: i64[10], raw_scores: f32[10]
) -> tuple[f32[6], i64[6], bool[6, 6, 8], i64[6]]:
    masks = mask_preds > 0.0
    labels = raw_labels % 3
    scores = raw_scores * 0.45 + 0.5
    return _mask_matrix_nms(masks, labels, scores, nms_pre=8, max_num=6, kernel='gaussian', sigma=2.0)


def _get_covariance_matrix(boxes):
    # Gaussian bounding boxes, ignore the center points (the first two columns) because they are not needed here.
    gbbs = torch.cat((boxes[:, 2:4].pow(2) / 12, boxes[:, 4:]), dim=-1)
    a, b, c = gbbs.split(1, dim=-1)
    cos = c.cos()
    sin = c.sin()
    cos2 = cos.pow(2)
    sin2 = sin.pow(2)
    return a * cos2 + b * sin2, a * sin2 + b * cos2, (a - b) * cos * sin


def _probiou(obb1, obb2, CIoU=False, eps=1e-7):
    x1, y1 = obb1[..., :2].split(1, dim=-1)
    x2, y2 = obb2[..., :2].split(1, dim=-1)
    a1, b1, c1 = _get_covariance_matrix(obb1)
    a2, b2, c2 = _get_covariance_matrix(obb2)

    t1 = (
        ((a1 + a2) * (y1 - y2).pow(2) + (b1 + b2) * (x1 - x2).pow(2)) / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps)
    ) * 0.25
    t2 = (((c1 + c2) * (x2 - x1) * (y1 - y2)) / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps)) * 0.5
    t3 = (
        ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2))
        / (4 * ((a1 * b1 - c1.pow(2)).clamp_(0) * (a2 * b2 - c2.pow(2)).clamp_(0)).sqrt() + eps)
        + eps
    ).log() * 0.5
    bd = (t1 + t2 + t3).clamp(eps, 100.0)
    hd = (1.0 - (-bd).exp() + eps).sqrt()
    iou = 1 - hd
    if CIoU:  # only include the wh aspect ratio part
        w1, h1 = obb1[..., 2:4].split(1, dim=-1)
        w2, h2 = obb2[..., 2:4].split(1, dim=-1)
        v = (4 / math.pi**2) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2)
        with torch.no_grad():
            alpha = v / (v - iou + (1 + eps))
        return iou - v * alpha  # CIoU
    return iou


def _batch_probiou(obb1, obb2, eps=1e-7):
    x1, y1 = obb1[..., :2].split(1, dim=-1)
    x2, y2 = (x.squeeze(-1)[None] for x in obb2[..., :2].split(1, dim=-1))
    a1, b1, c1 = _get_covariance_matrix(obb1)
    a2, b2, c2 = (x.squeeze(-1)[None] for x in _get_covariance_matrix(obb2))

    t1 = (
        ((a1 + a2) * (y1 - y2).pow(2) + (b1 + b2) * (x1 - x2).pow(2)) / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps)
    ) * 0.25
    t2 = (((c1 + c2) * (x2 - x1) * (y1 - y2)) / ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2) + eps)) * 0.5
    t3 = (
        ((a1 + a2) * (b1 + b2) - (c1 + c2).pow(2))
        / (4 * ((a1 * b1 - c1.pow(2)).clamp_(0) * (a2 * b2 - c2.pow(2)).clamp_(0)).sqrt() + eps)
        + eps
    ).log() * 0.5
    bd = (t1 + t2 + t3).clamp(eps, 100.0)
    hd = (1.0 - (-bd).exp() + eps).sqrt()
    return 1 - hd


# Ultralytics (ultralytics/ultralytics), ultralytics/utils/metrics.py: _get_covariance_matrix, probiou (plain and
# CIoU) and batch_probiou (its numpy-to-torch conversion lines left out: the inputs are tensors); xywhr boxes made from
# the raw inputs with centres in [0, 4), sides in [2, 6) and angles in [-pi/2, pi/2)
def ultralytics_probiou(raw1: f32[12, 5], raw2: f32[12, 5]) -> tuple[f32[12, 1], f32[12, 1], f32[12, 12]]:
    obb1 = torch.cat([raw1[:, :2] * 2 + 2, raw1[:, 2:4].abs() * 4 + 2, raw1[:, 4:] * (math.pi / 2)], dim=-1)
    obb2 = torch.cat([raw2[:, :2] * 2 + 2, raw2[:, 2:4].abs() * 4 + 2, raw2[:, 4:] * (math.pi / 2)], dim=-1)
    return _probiou(obb1, obb2), _probiou(obb1, obb2, CIoU=True), _batch_probiou(obb1, obb2)


def _d2_cat(tensors, dim: int = 0):
    """
    Efficient version of torch.cat that avoids a copy if there is only a single element in a list
    """
    assert isinstance(tensors, (list, tuple))
    if len(tensors) == 1:
        return tensors[0]
    return torch.cat(tensors, dim)


def _linear_get_deltas(src_boxes, target_boxes, normalize_by_size=True):
    assert isinstance(src_boxes, torch.Tensor), type(src_boxes)
    assert isinstance(target_boxes, torch.Tensor), type(target_boxes)

    src_ctr_x = 0.5 * (src_boxes[:, 0] + src_boxes[:, 2])
    src_ctr_y = 0.5 * (src_boxes[:, 1] + src_boxes[:, 3])

    target_l = src_ctr_x - target_boxes[:, 0]
    target_t = src_ctr_y - target_boxes[:, 1]
    target_r = target_boxes[:, 2] - src_ctr_x
    target_b = target_boxes[:, 3] - src_ctr_y

    deltas = torch.stack((target_l, target_t, target_r, target_b), dim=1)
    if normalize_by_size:
        stride_w = src_boxes[:, 2] - src_boxes[:, 0]
        stride_h = src_boxes[:, 3] - src_boxes[:, 1]
        strides = torch.stack([stride_w, stride_h, stride_w, stride_h], axis=1)
        deltas = deltas / strides

    return deltas


def _linear_apply_deltas(deltas, boxes, normalize_by_size=True):
    # Ensure the output is a valid box. See Sec 2.1 of https://arxiv.org/abs/2006.09214
    deltas = F.relu(deltas)
    boxes = boxes.to(deltas.dtype)

    ctr_x = 0.5 * (boxes[:, 0] + boxes[:, 2])
    ctr_y = 0.5 * (boxes[:, 1] + boxes[:, 3])
    if normalize_by_size:
        stride_w = boxes[:, 2] - boxes[:, 0]
        stride_h = boxes[:, 3] - boxes[:, 1]
        strides = torch.stack([stride_w, stride_h, stride_w, stride_h], axis=1)
        deltas = deltas * strides

    l = deltas[:, 0::4]
    t = deltas[:, 1::4]
    r = deltas[:, 2::4]
    b = deltas[:, 3::4]

    pred_boxes = torch.zeros_like(deltas)
    pred_boxes[:, 0::4] = ctr_x[:, None] - l  # x1
    pred_boxes[:, 1::4] = ctr_y[:, None] - t  # y1
    pred_boxes[:, 2::4] = ctr_x[:, None] + r  # x2
    pred_boxes[:, 3::4] = ctr_y[:, None] + b  # y2
    return pred_boxes


# detectron2 (facebookresearch/detectron2), detectron2/modeling/box_regression.py: Box2BoxTransformLinear.get_deltas
# and apply_deltas (normalize_by_size, the FCOS transform) as _dense_box_regression_loss drives them: the smooth_l1
# branch's gt_anchor_deltas stacked over the images' gt boxes, and the giou branch's pred_boxes over the images'
# concatenated level predictions (two levels of 12 and 8 square anchors, two images); detectron2/layers/wrappers.py's
# cat. Anchor centres lie inside the gt boxes, as get_deltas requires
def d2_box2box_transform_linear(
    raw_anchors0: f32[12, 3], raw_anchors1: f32[8, 3], raw_gt: f32[2, 20, 4], deltas0: f32[2, 12, 4],
    deltas1: f32[2, 8, 4]
) -> tuple[f32[2, 20, 4], f32[2, 20, 4]]:
    anchors_per_level = []
    for raw, size in ((raw_anchors0, 8.0), (raw_anchors1, 16.0)):
        cx = raw[:, 0] * 30 + 40
        cy = raw[:, 1] * 30 + 40
        s = size * (1.5 + raw[:, 2] * 0.5)
        anchors_per_level.append(torch.stack([cx - s / 2, cy - s / 2, cx + s / 2, cy + s / 2], dim=1))
    anchors = _d2_cat(anchors_per_level)
    ctr_x = 0.5 * (anchors[:, 0] + anchors[:, 2])
    ctr_y = 0.5 * (anchors[:, 1] + anchors[:, 3])
    ltrb = raw_gt.abs() * 10 + 1
    gt_boxes = [torch.stack([ctr_x - g[:, 0], ctr_y - g[:, 1], ctr_x + g[:, 2], ctr_y + g[:, 3]], dim=1) for g in ltrb]
    gt_anchor_deltas = [_linear_get_deltas(anchors, k) for k in gt_boxes]
    gt_anchor_deltas = torch.stack(gt_anchor_deltas)  # (N, R, 4)
    pred_anchor_deltas = [deltas0, deltas1]
    pred_boxes = [_linear_apply_deltas(k, anchors) for k in _d2_cat(pred_anchor_deltas, dim=1)]
    return gt_anchor_deltas, torch.stack(pred_boxes)


def _naive_recurrent_hgrn(
    x: torch.Tensor,
    g: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool | None = False,
) -> torch.Tensor:
    dtype = x.dtype
    x, g = (i.float() for i in (x, g))
    B, T, D = x.shape

    h = torch.zeros(B, D, dtype=torch.float, device=x.device)
    o = torch.zeros_like(x)

    final_state = None
    if initial_state is not None:
        h += initial_state

    for i in range(T):
        h = g[:, i].exp() * h + x[:, i]
        o[:, i] = h

    if output_final_state:
        final_state = h
    return o.to(dtype), final_state


def _naive_chunk_hgrn(
    x: torch.Tensor,
    g: torch.Tensor,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool | None = False,
    chunk_size: int = 64,
) -> torch.Tensor:
    dtype = x.dtype
    x, g = (i.float() for i in (x, g))
    B, T, D = x.shape

    gc = g.view(B, chunk_size, D).cumsum(-2).view_as(g)
    h = torch.zeros(B, D, dtype=torch.float, device=x.device)
    o = torch.zeros_like(x)

    final_state = None
    if initial_state is not None:
        h += initial_state

    for i in range(0, T, chunk_size):
        hp = h
        h = torch.zeros(B, D, dtype=torch.float, device=x.device)
        for j in range(i, i + chunk_size):
            h = g[:, j].exp() * h + x[:, j]
            o[:, j] = hp * gc[:, j].exp() + h
        h = o[:, j].clone()

    if output_final_state:
        final_state = h
    return o.to(dtype), final_state


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/hgrn/naive.py: naive_recurrent_hgrn and
# naive_chunk_hgrn with an initial state and the final state (batch 2, 8 steps, width 16; chunk_size 8, the only size
# the chunk version's g.view(B, chunk_size, D) accepts for 8 steps); the forget gate in log space through logsigmoid, as
# the HGRN layer makes it
def fla_naive_hgrn(
    x: f32[2, 8, 16], raw_f: f32[2, 8, 16], h0: f32[2, 16]
) -> tuple[f32[2, 8, 16], f32[2, 16], f32[2, 8, 16], f32[2, 16]]:
    g = F.logsigmoid(raw_f * 3)
    o, final_state = _naive_recurrent_hgrn(x, g, h0, output_final_state=True)
    o_chunk, final_chunk = _naive_chunk_hgrn(x, g, h0, output_final_state=True, chunk_size=8)
    return o, final_state, o_chunk, final_chunk


def _elu_feature_map(x):
    return torch.nn.functional.elu(x) + 1


def _recurrent_linear_attention_forward(query, key, value, state=None, memory=None, eps=1e-6):
    # Normalize state/memory (check_state: state wins when both are given)
    if memory is not None and state is None:
        state = memory

    # Apply the feature map to the query and key
    Q = _elu_feature_map(query)
    K = _elu_feature_map(key)

    # Extract some shapes
    N, H, D = Q.shape
    _, _, M = value.shape

    # Extract the memory or initialize it
    if state is None:
        Si = query.new_zeros((N, H, D, M))
        Zi = query.new_zeros((N, H, D))
    else:
        Si, Zi = state

    # Ensure the batch size did not change
    if len(Si) != N:
        raise ValueError("The batch size changed during iteration")

    # Update the internal state
    #
    # NOTE: The if clause is added due to GitHub PR #10. Simply using the
    # following two lines does not perform the operation in place which
    # means it is slower for inference.
    if K.grad_fn is not None or value.grad_fn is not None:
        Zi = Zi + K
        Si = Si + torch.einsum("nhd,nhm->nhdm", K, value)
    else:
        Zi += K
        Si += torch.einsum("nhd,nhm->nhdm", K, value)

    # Compute the output
    Z = 1. / (torch.einsum("nhd,nhd->nh", Q, Zi) + eps)
    V = torch.einsum("nhd,nhdm,nh->nhm", Q, Si, Z)

    return V, [Si, Zi]


# fast-transformers (idiap/fast-transformers), fast_transformers/recurrent/attention/self_attention/
# linear_attention.py: RecurrentLinearAttention.forward with the default elu(x) + 1 feature map
# (feature_maps/base.py's elu_feature_map; its new_feature_map is a no-op) and _utils.check_state, run for 6 decoding
# steps from no state (batch 2, 4 heads, query/key/value dims 8); no autograd, so the state is updated in place
def fast_transformers_recurrent_linear_attention(
    queries: f32[6, 2, 4, 8], keys: f32[6, 2, 4, 8], values: f32[6, 2, 4, 8]
) -> tuple[f32[6, 2, 4, 8], f32[2, 4, 8, 8], f32[2, 4, 8]]:
    state = None
    outputs = []
    for t in range(queries.shape[0]):
        V, state = _recurrent_linear_attention_forward(queries[t], keys[t], values[t], state=state)
        outputs.append(V)
    return torch.stack(outputs), state[0], state[1]



def _vllm_compute_inv_freq(base: float, rotary_dim: int) -> torch.Tensor:
    """Compute the inverse frequency."""
    inv_freq = 1.0 / (base**(torch.arange(
        0, rotary_dim, 2, dtype=torch.float) / rotary_dim))
    return inv_freq


def _vllm_compute_cos_sin_cache(base: float, rotary_dim: int, max_position_embeddings: int) -> torch.Tensor:
    """Compute the cos and sin cache."""
    inv_freq = _vllm_compute_inv_freq(base, rotary_dim)
    t = torch.arange(max_position_embeddings, dtype=torch.float)

    freqs = torch.einsum("i,j -> ij", t, inv_freq)
    cos = freqs.cos()
    sin = freqs.sin()
    cache = torch.cat((cos, sin), dim=-1)
    return cache


def _vllm_apply_rotary_emb_torch(
    x: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    is_neox_style: bool,
) -> torch.Tensor:
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if is_neox_style:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1 = x[..., ::2]
        x2 = x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if is_neox_style:
        return torch.cat((o1, o2), dim=-1)
    else:
        return torch.stack((o1, o2), dim=-1).flatten(-2)


def _vllm_rotary_forward_native(self, positions, query, key=None, offsets=None):
    """A PyTorch-native implementation of forward()."""
    if offsets is not None:
        positions = positions + offsets
    positions = positions.flatten()
    num_tokens = positions.shape[0]
    cos_sin = self['cos_sin_cache'].index_select(0, positions)
    cos, sin = cos_sin.chunk(2, dim=-1)

    query_shape = query.shape
    query = query.view(num_tokens, -1, self['head_size'])
    query_rot = query[..., :self['rotary_dim']]
    query_pass = query[..., self['rotary_dim']:]
    query_rot = _vllm_apply_rotary_emb_torch(query_rot, cos, sin,
                                             self['is_neox_style'])
    query = torch.cat((query_rot, query_pass), dim=-1).reshape(query_shape)

    # key may be None in some cases, e.g. cross-layer KV sharing
    if key is not None:
        key_shape = key.shape
        key = key.view(num_tokens, -1, self['head_size'])
        key_rot = key[..., :self['rotary_dim']]
        key_pass = key[..., self['rotary_dim']:]
        key_rot = _vllm_apply_rotary_emb_torch(key_rot, cos, sin,
                                               self['is_neox_style'])
        key = torch.cat((key_rot, key_pass), dim=-1).reshape(key_shape)
    return query, key


# vLLM (vllm-project/vllm), vllm/model_executor/layers/rotary_embedding/base.py: RotaryEmbedding._compute_inv_freq,
# _compute_cos_sin_cache and forward_native, with common.py's apply_rotary_emb_torch; partial rotary (head_size 16,
# rotary_dim 8), max_position_embeddings 16, base 10000, float32; a GPT-J-style (is_neox_style False) layer with 4 query
# and 2 key heads, and a NeoX-style one on the same tokens with offsets; 6 tokens; the module as a dict of attributes
def vllm_rotary_embedding_forward_native(
    positions: i64[6], offsets: i64[6], query: f32[6, 64], key: f32[6, 32]
) -> tuple[f32[6, 64], f32[6, 32], f32[6, 64], f32[6, 32]]:
    gptj = dict(head_size=16, rotary_dim=8, max_position_embeddings=32, base=10000.0, is_neox_style=False)
    gptj['cos_sin_cache'] = _vllm_compute_cos_sin_cache(gptj['base'], gptj['rotary_dim'],
                                                        gptj['max_position_embeddings']).to(torch.float32)
    neox = dict(head_size=16, rotary_dim=8, max_position_embeddings=32, base=10000.0, is_neox_style=True)
    neox['cos_sin_cache'] = _vllm_compute_cos_sin_cache(neox['base'], neox['rotary_dim'],
                                                        neox['max_position_embeddings']).to(torch.float32)
    q1, k1 = _vllm_rotary_forward_native(gptj, positions, query, key)
    q2, k2 = _vllm_rotary_forward_native(neox, positions, query, key, offsets=offsets)
    return q1, k1, q2, k2


def _llama4_text_experts_forward(self, hidden_states):
    hidden_states = hidden_states.view(self['gate_up_proj'].shape[0], -1, self['hidden_size'])
    gate_up = torch.bmm(hidden_states, self['gate_up_proj'])
    gate, up = gate_up.chunk(2, dim=-1)  # not supported for DTensors
    next_states = torch.bmm((up * self['act_fn'](gate)), self['down_proj'])
    next_states = next_states.view(-1, self['hidden_size'])
    return next_states


def _llama4_text_mlp_forward(self, x):
    down_proj = self['activation_fn'](F.linear(x, self['gate_proj'])) * F.linear(x, self['up_proj'])
    return F.linear(down_proj, self['down_proj'])


# Hugging Face transformers (v4.51), models/llama4/modeling_llama4.py: Llama4TextMoe.forward (top_k 1 of 4 local
# experts, sigmoid of the scattered top-k router logits, every expert run on every token through a gather and a
# scatter_add_ back), Llama4TextExperts.forward (bmm over the stacked gate_up_proj and down_proj) and the shared
# expert Llama4TextMLP.forward; hidden 8, intermediate 8, silu; batch 2 of 3 tokens. Modules as dicts of their weights
# (nn.Linear as F.linear), at nn.Linear's init scale
def hf_llama4_text_moe(
    hidden_states: f32[2, 3, 8], router_weight: f32[4, 8], gate_up_proj: f32[4, 8, 16], down_proj: f32[4, 8, 8],
    shared_gate: f32[8, 8], shared_up: f32[8, 8], shared_down: f32[8, 8]
) -> tuple[f32[6, 8], f32[4, 6]]:
    scale = 1 / math.sqrt(8)
    experts = {'hidden_size': 8, 'gate_up_proj': gate_up_proj * scale, 'down_proj': down_proj * scale,
               'act_fn': F.silu}
    shared_expert = {'gate_proj': shared_gate * scale, 'up_proj': shared_up * scale,
                     'down_proj': shared_down * scale, 'activation_fn': F.silu}
    top_k = 1
    hidden_dim_ = 8

    batch, seq_len, hidden_dim = hidden_states.shape
    hidden_states = hidden_states.reshape(-1, hidden_dim_)
    router_logits = F.linear(hidden_states, router_weight * scale)
    tokens_per_expert = batch * seq_len

    router_top_value, router_indices = torch.topk(router_logits, top_k, dim=1)
    router_scores = (
        torch.full_like(router_logits, float("-inf")).scatter_(1, router_indices, router_top_value).transpose(0, 1)
    )
    # We do this to make sure we have -inf for non topK tokens before going through the !
    # Here we are just creating a tensor to index each and every single one of the hidden states. Let s maybe register a buffer for this!
    router_indices = (
        torch.arange(tokens_per_expert, device=hidden_states.device).view(1, -1).expand(router_scores.size(0), -1)
    )
    router_scores = torch.sigmoid(router_scores.float()).to(hidden_states.dtype)

    router_indices = router_indices.reshape(-1, 1).expand(-1, hidden_dim)
    routed_in = torch.gather(
        input=hidden_states,
        dim=0,
        index=router_indices,
    ).to(hidden_states.device)
    # we gather inputs corresponding to each expert based on the router indices
    routed_in = routed_in * router_scores.reshape(-1, 1)
    routed_out = _llama4_text_experts_forward(experts, routed_in)
    out = _llama4_text_mlp_forward(shared_expert, hidden_states)
    # now that we finished expert computation -> we scatter add because we gathered previously
    # we have to do this because we used all experts on all tokens. This is faster than the for loop, tho you are compute bound
    # this scales a lot better if you do EP!
    out.scatter_add_(dim=0, index=router_indices, src=routed_out.view(-1, hidden_dim))
    return out, router_scores


# AccSGD (Kidambi et al., 2018), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/accsgd.py: AccSGD.step
# (lr 1e-3, kappa 1000, xi 10, small_const 0.7, weight decay 1e-4), three steps on two parameters; p.grad is each
# step's gradient slice, which the weight decay updates in place as the original does to p.grad.data; the momentum
# buffer copy.deepcopy(p.data) on the first step; deprecated add_(scalar, tensor) overloads as the original writes them
def accsgd_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = dict(lr=1e-3, kappa=1000.0, xi=10.0, small_const=0.7, weight_decay=1e-4)
    state = [{}, {}]
    for k in range(3):
        weight_decay = group['weight_decay']
        large_lr = (group['lr'] * group['kappa']) / (group['small_const'])
        alpha = 1.0 - (
            (group['small_const'] * group['small_const'] * group['xi'])
            / group['kappa']
        )
        beta = 1.0 - alpha
        zeta = group['small_const'] / (group['small_const'] + beta)
        for p, grad, param_state in zip([p1, p2], [grads1[k], grads2[k]], state):
            d_p = grad.data
            if weight_decay != 0:
                d_p.add_(weight_decay, p.data)
            if 'momentum_buffer' not in param_state:
                param_state['momentum_buffer'] = copy.deepcopy(p.data)
            buf = param_state['momentum_buffer']
            buf.mul_((1.0 / beta) - 1.0)
            buf.add_(-large_lr, d_p)
            buf.add_(p.data)
            buf.mul_(beta)

            p.data.add_(-group['lr'], d_p)
            p.data.mul_(zeta)
            p.data.add_(1.0 - zeta, buf)
    return p1, p2


def _is_compiling():
    if hasattr(torch, 'compiler') and hasattr(torch.compiler, 'is_compiling'):
        return torch.compiler.is_compiling()
    else:
        return False


def _get_value(x):
    # item is significantly faster than a cpu tensor in eager mode
    if not torch.jit.is_scripting() and _is_compiling():
        return x
    else:
        return x.item() if isinstance(x, torch.Tensor) else x


def _add_scaled_(param: Tensor, update: Tensor, scale) -> None:
    if torch.is_tensor(scale):
        param.add_(update * scale)
    else:
        param.add_(update, alpha=scale)


def _single_tensor_adopt(params, grads, exp_avgs, exp_avg_sqs, state_steps, first_steps, grad_scale, found_inf, *,
                         has_complex, beta1, beta2, lr, weight_decay, clip_exp, max_lr, decoupled, eps, caution,
                         maximize, capturable, differentiable):
    assert grad_scale is None and found_inf is None

    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]

        # update step
        step_t += 1

        if torch.is_complex(param):
            grad = torch.view_as_real(grad)
            if exp_avg is not None:
                exp_avg = torch.view_as_real(exp_avg)
            if exp_avg_sq is not None:
                exp_avg_sq = torch.view_as_real(exp_avg_sq)
            param = torch.view_as_real(param)

        if weight_decay != 0 and not decoupled:
            grad = grad.add(param, alpha=weight_decay)

        step = step_t if capturable or differentiable else _get_value(step_t)
        if first_steps[i] if first_steps is not None else step == 1:
            exp_avg_sq.addcmul_(grad, grad.conj())
            continue

        if weight_decay != 0 and decoupled:
            wd_scale = lr ** 2 / max_lr if max_lr is not None else lr
            _add_scaled_(param, param, -wd_scale * weight_decay)

        denom = torch.clamp(exp_avg_sq.sqrt(), eps)
        normed_grad = grad.div(denom)

        if clip_exp is not None:
            clip_val = (step - 1) ** clip_exp
            normed_grad.clamp_(-clip_val, clip_val)

        exp_avg.lerp_(normed_grad, 1 - beta1)

        if caution:
            # Apply caution as per 'Cautious Optimizers' - https://arxiv.org/abs/2411.16085
            mask = (exp_avg * grad > 0).to(grad.dtype)
            mask.div_(mask.mean().clamp_(min=1e-3))
            exp_avg = exp_avg * mask

        _add_scaled_(param, exp_avg, -lr)

        exp_avg_sq.mul_(beta2).addcmul_(grad, grad.conj(), value=1 - beta2)


# ADOPT (Taniguchi et al., 2024), timm (huggingface/pytorch-image-models), timm/optim/adopt.py: Adopt._collect_group
# and step's per-group setup, then _single_tensor_adopt (foreach False; lr 1e-3, betas (0.9, 0.9999), eps 1e-6,
# clip_exp 0.333, weight decay 1e-2 not decoupled, no caution), with _get_value, _is_compiling and _helpers.py's
# _add_scaled_; four steps on two parameters with fixed gradients (p.grad the step's slice); the capturable-device
# asserts and the health checks left out (capturable False); state dicts in a list
def adopt_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[4, 6, 5], grads2: f32[4, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = dict(lr=1e-3, betas=(0.9, 0.9999), eps=1e-6, weight_decay=1e-2, clip_exp=0.333, decoupled=False,
                 corrected_weight_decay=False, max_lr_snapshot=1e-3, caution=False, maximize=False, foreach=False,
                 capturable=False, differentiable=False)
    states = [{}, {}]
    for k in range(4):
        params_with_grad = []
        grads = []
        exp_avgs = []
        exp_avg_sqs = []
        state_steps = []
        first_steps = []
        beta1, beta2 = group["betas"]

        has_complex = False
        for p, p_grad, state in zip([p1, p2], [grads1[k], grads2[k]], states):
            has_complex |= torch.is_complex(p)
            params_with_grad.append(p)
            grads.append(p_grad)

            # Params get state (and their first step) on their first grad, known here w/o reading the step tensor
            first_steps.append(len(state) == 0)
            # Lazy state initialization
            if len(state) == 0:
                state["step"] = torch.tensor(0.0, dtype=torch.float32)
                # Exponential moving average of gradient values
                state["exp_avg"] = torch.zeros_like(p_grad, memory_format=torch.preserve_format)
                # Exponential moving average of squared gradient values
                state["exp_avg_sq"] = torch.zeros_like(p_grad, memory_format=torch.preserve_format)

            exp_avgs.append(state["exp_avg"])
            exp_avg_sqs.append(state["exp_avg_sq"])
            state_steps.append(state["step"])

        _single_tensor_adopt(
            params_with_grad,
            grads,
            exp_avgs,
            exp_avg_sqs,
            state_steps,
            first_steps,
            None,
            None,
            has_complex=has_complex,
            beta1=beta1,
            beta2=beta2,
            lr=group["lr"],
            weight_decay=group["weight_decay"],
            clip_exp=group["clip_exp"],
            max_lr=group['max_lr_snapshot'] if group['corrected_weight_decay'] else None,
            decoupled=group["decoupled"],
            eps=group["eps"],
            caution=group["caution"],
            maximize=group["maximize"],
            capturable=group["capturable"],
            differentiable=group["differentiable"],
        )
    return p1, p2


def _pnm_view_as_real(param, *state_and_grads) -> tuple:
    """View imaginary tensors as real tensors."""
    if torch.is_complex(param):
        param = torch.view_as_real(param)
        state_and_grads = tuple(
            torch.view_as_real(s) if (s is not None and torch.is_complex(s)) else s if s is not None else None
            for s in state_and_grads
        )

    return param, *state_and_grads


def _pnm_maximize_gradient(grad: torch.Tensor, maximize: bool = False) -> None:
    """Maximize the objective with respect to the params, instead of minimizing."""
    if maximize:
        grad.neg_()


def _pnm_apply_weight_decay(p, grad, lr, weight_decay, weight_decouple, fixed_decay, ratio=None) -> None:
    if weight_decouple:
        p.mul_(1.0 - weight_decay * (1.0 if fixed_decay else lr) * (ratio if ratio is not None else 1.0))
    elif weight_decay > 0.0 and grad is not None:
        grad.add_(p, alpha=weight_decay)


# PNM (Xie et al., 2021), pytorch_optimizer (kozistr/pytorch_optimizer), pytorch_optimizer/optimizer/pnm.py:
# PNM.init_group and PNM.step (lr 1e-2, betas (0.9, 1.0), weight decay 1e-2 decoupled, not fixed, not maximizing), with
# BaseOptimizer's view_as_real, maximize_gradient and apply_weight_decay; four steps on two parameters (the positive
# and negative momenta swap roles every step); p.grad the step's gradient slice; group and state dicts as locals
def pnm_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[4, 6, 5], grads2: f32[4, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = {'lr': 1e-2, 'betas': (0.9, 1.0), 'weight_decay': 1e-2, 'weight_decouple': True, 'fixed_decay': False}
    maximize = False
    state = [{}, {}]
    for k in range(4):
        params = [p1, p2]
        grads_k = [grads1[k], grads2[k]]
        if 'step' not in group:
            # init_group
            for p, p_state in zip(params, state):
                if len(p_state) == 0:
                    p_state['pos_momentum'] = torch.zeros_like(p)
                    p_state['neg_momentum'] = torch.zeros_like(p)
            group['step'] = 1
        else:
            group['step'] += 1

        beta1, beta2 = group['betas']

        beta1_p2: float = beta1 ** 2  # fmt: skip
        noise_norm: float = math.sqrt((1 + beta2) ** 2 + beta2 ** 2)  # fmt: skip

        for p, grad, p_state in zip(params, grads_k, state):
            _pnm_maximize_gradient(grad, maximize=maximize)

            if group['step'] % 2 == 1:
                pos_momentum, neg_momentum = p_state['pos_momentum'], p_state['neg_momentum']
            else:
                neg_momentum, pos_momentum = p_state['pos_momentum'], p_state['neg_momentum']

            p, grad, pos_momentum, neg_momentum = _pnm_view_as_real(p, grad, pos_momentum, neg_momentum)

            _pnm_apply_weight_decay(
                p=p,
                grad=grad,
                lr=group['lr'],
                weight_decay=group['weight_decay'],
                weight_decouple=group['weight_decouple'],
                fixed_decay=group['fixed_decay'],
            )

            pos_momentum.mul_(beta1_p2).add_(grad, alpha=1.0 - beta1_p2)

            delta_p = pos_momentum.mul(1.0 + beta2).add_(neg_momentum, alpha=-beta2).mul_(1.0 / noise_norm)

            p.add_(delta_p, alpha=-group['lr'])
    return p1, p2


def _conv_lstm_cell_forward(cell, input_tensor, cur_state):
    h_cur, c_cur = cur_state

    combined = torch.cat([input_tensor, h_cur], dim=1)  # concatenate along channel axis

    combined_conv = F.conv2d(combined, cell['weight'], cell['bias'], padding=cell['padding'])
    cc_i, cc_f, cc_o, cc_g = torch.split(combined_conv, cell['hidden_dim'], dim=1)
    i = torch.sigmoid(cc_i)
    f = torch.sigmoid(cc_f)
    o = torch.sigmoid(cc_o)
    g = torch.tanh(cc_g)

    c_next = f * c_cur + i * g
    h_next = o * torch.tanh(c_next)

    return h_next, c_next


def _conv_lstm_cell_init_hidden(cell, batch_size, image_size):
    height, width = image_size
    return (torch.zeros(batch_size, cell['hidden_dim'], height, width, device=cell['weight'].device),
            torch.zeros(batch_size, cell['hidden_dim'], height, width, device=cell['weight'].device))


# ConvLSTM (ndrplz/ConvLSTM_pytorch), convlstm.py: ConvLSTMCell.forward and init_hidden, ConvLSTM.forward and
# _init_hidden (input_dim 2, hidden_dim 4, kernel (3, 3), 2 layers, batch_first, bias, return_all_layers False; batch
# 2, 3 steps of 6x6 maps); each cell's nn.Conv2d as F.conv2d with its weight and bias (weights at the conv's default
# init scale, 1/sqrt(fan_in)), the cells as dicts of their attributes
def convlstm_forward(
    input_tensor: f32[2, 3, 2, 6, 6], raw_w0: f32[16, 6, 3, 3], raw_b0: f32[16], raw_w1: f32[16, 8, 3, 3],
    raw_b1: f32[16]
) -> tuple[f32[2, 3, 4, 6, 6], f32[2, 4, 6, 6], f32[2, 4, 6, 6]]:
    kernel_size = (3, 3)
    padding = kernel_size[0] // 2, kernel_size[1] // 2
    cell_list = [
        {'hidden_dim': 4, 'padding': padding, 'weight': raw_w0 / math.sqrt(6 * 9), 'bias': raw_b0 / math.sqrt(6 * 9)},
        {'hidden_dim': 4, 'padding': padding, 'weight': raw_w1 / math.sqrt(8 * 9), 'bias': raw_b1 / math.sqrt(8 * 9)},
    ]
    num_layers = 2
    batch_first = True
    return_all_layers = False
    hidden_state = None

    if not batch_first:
        # (t, b, c, h, w) -> (b, t, c, h, w)
        input_tensor = input_tensor.permute(1, 0, 2, 3, 4)

    b, _, _, h, w = input_tensor.size()

    # Implement stateful ConvLSTM
    if hidden_state is None:
        # Since the init is done in forward. Can send image size here
        hidden_state = []
        for i in range(num_layers):
            hidden_state.append(_conv_lstm_cell_init_hidden(cell_list[i], b, (h, w)))

    layer_output_list = []
    last_state_list = []

    seq_len = input_tensor.size(1)
    cur_layer_input = input_tensor

    for layer_idx in range(num_layers):

        h, c = hidden_state[layer_idx]
        output_inner = []
        for t in range(seq_len):
            h, c = _conv_lstm_cell_forward(cell_list[layer_idx], input_tensor=cur_layer_input[:, t, :, :, :],
                                           cur_state=[h, c])
            output_inner.append(h)

        layer_output = torch.stack(output_inner, dim=1)
        cur_layer_input = layer_output

        layer_output_list.append(layer_output)
        last_state_list.append([h, c])

    if not return_all_layers:
        layer_output_list = layer_output_list[-1:]
        last_state_list = last_state_list[-1:]

    return layer_output_list[0], last_state_list[0][0], last_state_list[0][1]
