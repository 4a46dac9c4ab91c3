"""Held-out real code, issue 14's twelfth round (10 of 12 ran on every engine before that round's fixes, 12 after:
`float | None` annotations on helpers, `torch.take_along_dim`, `torch.full` with a 0-dim tensor as the fill value):
torchvision's AnchorGenerator, YOLOv10's NMS-free v10postprocess,
mmdetection's DETRHead prediction, a RetNet retention decode (torchscale), a layer-normalized GRU, flash-linear-
attention's naive recurrent RWKV-6, Hugging Face's vectorized beam-search step, DeepSeek-V3's group-limited gate,
Hugging Face's SinkCache (v4.38), and QHAdam, Apollo and PID from torch-optimizer. Inputs arrive uniform in [-1, 1);
integer inputs in [0, 10)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _generate_anchors(scales, aspect_ratios, dtype=torch.float32, device=torch.device("cpu")):
    scales = torch.as_tensor(scales, dtype=dtype, device=device)
    aspect_ratios = torch.as_tensor(aspect_ratios, dtype=dtype, device=device)
    h_ratios = torch.sqrt(aspect_ratios)
    w_ratios = 1 / h_ratios

    ws = (w_ratios[:, None] * scales[None, :]).view(-1)
    hs = (h_ratios[:, None] * scales[None, :]).view(-1)

    base_anchors = torch.stack([-ws, -hs, ws, hs], dim=1) / 2
    return base_anchors.round()


def _grid_anchors(cell_anchors, grid_sizes, strides):
    anchors = []
    assert cell_anchors is not None

    if not (len(grid_sizes) == len(strides) == len(cell_anchors)):
        raise ValueError("Anchors should be Tuple[Tuple[int]] because each feature "
                         "map could potentially have different sizes and aspect ratios. ")

    for size, stride, base_anchors in zip(
        grid_sizes, strides, cell_anchors
    ):
        grid_height, grid_width = size
        stride_height, stride_width = stride
        device = base_anchors.device

        # For output anchor, compute [x_center, y_center, x_center, y_center]
        shifts_x = torch.arange(
            0, grid_width, dtype=torch.float32, device=device
        ) * stride_width
        shifts_y = torch.arange(
            0, grid_height, dtype=torch.float32, device=device
        ) * stride_height
        shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x)
        shift_x = shift_x.reshape(-1)
        shift_y = shift_y.reshape(-1)
        shifts = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)

        # For every (base anchor, output anchor) pair,
        # offset each zero-centered base anchor by the center of the output anchor.
        anchors.append(
            (shifts.view(-1, 1, 4) + base_anchors.view(1, -1, 4)).reshape(-1, 4)
        )

    return anchors


# torchvision (pytorch/vision), torchvision/models/detection/anchor_utils.py: AnchorGenerator.generate_anchors,
# set_cell_anchors, grid_anchors and forward (two feature maps, sizes ((16,), (32,)), aspect ratios (0.5, 1, 2); a
# batch of two 32x48 images; the methods written as functions, the ImageList as its tensor and image sizes)
def tv_anchor_generator(
    images: f32[2, 3, 32, 48], feat0: f32[2, 4, 8, 12], feat1: f32[2, 4, 4, 6]
) -> tuple[f32[360, 4], f32[360, 4]]:
    sizes = ((16,), (32,))
    aspect_ratios = ((0.5, 1.0, 2.0),) * len(sizes)
    image_sizes = [(32, 48), (32, 48)]
    feature_maps = [feat0, feat1]
    grid_sizes = list([feature_map.shape[-2:] for feature_map in feature_maps])
    image_size = images.shape[-2:]
    dtype, device = feature_maps[0].dtype, feature_maps[0].device
    strides = [[torch.tensor(image_size[0] // g[0], dtype=torch.int64, device=device),
                torch.tensor(image_size[1] // g[1], dtype=torch.int64, device=device)] for g in grid_sizes]
    cell_anchors = [
        _generate_anchors(
            sizes,
            aspect_ratios,
            dtype,
            device
        )
        for sizes, aspect_ratios in zip(sizes, aspect_ratios)
    ]
    anchors_over_all_feature_maps = _grid_anchors(cell_anchors, grid_sizes, strides)
    anchors = []
    for i in range(len(image_sizes)):
        anchors_in_image = [anchors_per_feature_map for anchors_per_feature_map in anchors_over_all_feature_maps]
        anchors.append(anchors_in_image)
    anchors = [torch.cat(anchors_per_image) for anchors_per_image in anchors]
    return anchors[0], anchors[1]


def _v10postprocess(preds, max_det, nc=80):
    assert(4 + nc == preds.shape[-1])
    boxes, scores = preds.split([4, nc], dim=-1)
    max_scores = scores.amax(dim=-1)
    max_scores, index = torch.topk(max_scores, max_det, dim=-1)
    index = index.unsqueeze(-1)
    boxes = torch.gather(boxes, dim=1, index=index.repeat(1, 1, boxes.shape[-1]))
    scores = torch.gather(scores, dim=1, index=index.repeat(1, 1, scores.shape[-1]))

    scores, index = torch.topk(scores.flatten(1), max_det, dim=-1)
    labels = index % nc
    index = index // nc
    boxes = boxes.gather(dim=1, index=index.unsqueeze(-1).repeat(1, 1, boxes.shape[-1]))
    return boxes, scores, labels


# YOLOv10 (THU-MIG/yolov10), ultralytics/utils/ops.py: v10postprocess, the NMS-free top-k selection (6 classes,
# 40 anchors, max_det 8); the head's output made as v10Detect makes it (boxes in pixels, class scores sigmoided)
def yolov10_postprocess(raw: f32[2, 40, 10]) -> tuple[f32[2, 8, 4], f32[2, 8], i64[2, 8]]:
    preds = torch.cat([raw[..., :4] * 100 + 120, raw[..., 4:].sigmoid()], dim=-1)
    return _v10postprocess(preds, 8, nc=6)


def _bbox_cxcywh_to_xyxy(bbox: Tensor) -> Tensor:
    cx, cy, w, h = bbox.split((1, 1, 1, 1), dim=-1)
    bbox_new = [(cx - 0.5 * w), (cy - 0.5 * h), (cx + 0.5 * w), (cy + 0.5 * h)]
    return torch.cat(bbox_new, dim=-1)


def _detr_predict_by_feat_single(cls_score, bbox_pred, img_meta, rescale=True, use_sigmoid=False, num_classes=4,
                                 max_per_img=10):
    assert len(cls_score) == len(bbox_pred)  # num_queries
    img_shape = img_meta['img_shape']
    # exclude background
    if use_sigmoid:
        cls_score = cls_score.sigmoid()
        scores, indexes = cls_score.view(-1).topk(max_per_img)
        det_labels = indexes % num_classes
        bbox_index = indexes // num_classes
        bbox_pred = bbox_pred[bbox_index]
    else:
        scores, det_labels = F.softmax(cls_score, dim=-1)[..., :-1].max(-1)
        scores, bbox_index = scores.topk(max_per_img)
        bbox_pred = bbox_pred[bbox_index]
        det_labels = det_labels[bbox_index]

    det_bboxes = _bbox_cxcywh_to_xyxy(bbox_pred)
    det_bboxes[:, 0::2] = det_bboxes[:, 0::2] * img_shape[1]
    det_bboxes[:, 1::2] = det_bboxes[:, 1::2] * img_shape[0]
    det_bboxes[:, 0::2].clamp_(min=0, max=img_shape[1])
    det_bboxes[:, 1::2].clamp_(min=0, max=img_shape[0])
    if rescale:
        assert img_meta.get('scale_factor') is not None
        det_bboxes /= det_bboxes.new_tensor(
            img_meta['scale_factor']).repeat((1, 2))
    return det_bboxes, scores, det_labels


# mmdetection, mmdet/models/dense_heads/detr_head.py: DETRHead.predict_by_feat and _predict_by_feat_single (softmax
# classifier with a background class, 4 classes, 20 queries, max_per_img 10, rescale) with bbox_cxcywh_to_xyxy from
# mmdet/structures/bbox/transforms.py; two decoder layers, two images of different shapes and scale factors; the box
# branch sigmoided as DETRHead.forward does; InstanceData written as tuples
def mmdet_detr_predict_by_feat(
    all_layers_cls_scores: f32[2, 2, 20, 5], all_layers_bbox_raw: f32[2, 2, 20, 4]
) -> tuple[f32[10, 4], f32[10], i64[10], f32[10, 4], f32[10], i64[10]]:
    all_layers_bbox_preds = all_layers_bbox_raw.sigmoid()
    batch_img_metas = [dict(img_shape=(48, 64), scale_factor=(1.5, 1.25)),
                       dict(img_shape=(40, 56), scale_factor=(0.5, 0.8))]
    cls_scores = all_layers_cls_scores[-1]
    bbox_preds = all_layers_bbox_preds[-1]
    result_list = []
    for img_id in range(len(batch_img_metas)):
        cls_score = cls_scores[img_id]
        bbox_pred = bbox_preds[img_id]
        img_meta = batch_img_metas[img_id]
        results = _detr_predict_by_feat_single(cls_score, bbox_pred, img_meta, True)
        result_list.append(results)
    return result_list[0] + result_list[1]


def _rotate_every_two(x):
    x1 = x[:, :, :, ::2]
    x2 = x[:, :, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)  # in einsum notation: rearrange(x, '... d j -> ... (d j)')\


def _theta_shift(x, sin, cos):
    return (x * cos) + (_rotate_every_two(x) * sin)


def _rms_norm(x, eps=1e-6):
    def _norm(x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)

    output = _norm(x.float()).type_as(x)
    return output


def _retention_recurrent_forward(qr, kr, v, decay, incremental_state, num_heads, head_dim):
    bsz = v.size(0)

    v = v.view(bsz, num_heads, head_dim, 1)
    kv = kr * v
    if "prev_key_value" in incremental_state:
        prev_kv = incremental_state["prev_key_value"]
        prev_scale = incremental_state["scale"]
        scale = prev_scale * decay + 1
        kv = prev_kv * (prev_scale.sqrt() * decay / scale.sqrt()).view(num_heads, 1, 1) + kv / scale.sqrt().view(
            num_heads, 1, 1)
        # kv = prev_kv * decay.view(self.num_heads, 1, 1) + kv
    else:
        scale = torch.ones_like(decay)

    incremental_state["prev_key_value"] = kv
    incremental_state["scale"] = scale

    output = torch.sum(qr * kv, dim=3)
    return output


# RetNet (microsoft/torchscale), torchscale/component/multiscale_retention.py: MultiScaleRetention.forward with
# incremental_state (recurrent_forward, theta_shift, rotate_every_two, the RMSNorm group norm without affine) and
# torchscale/architecture/retnet.py: RetNetRelPos (recurrent branch); embed 16, value 32, 2 heads, batch 2, three
# decode steps; the projections (bias-free nn.Linear) as weights, scaled to xavier_uniform_ bounds (the module's
# reset_parameters, without its 2 ** -2.5 gain on q, k, v and g, which would leave outputs of order 0.05)
def retnet_recurrent_decode(
    x: f32[3, 2, 1, 16], q_w: f32[16, 16], k_w: f32[16, 16], v_w: f32[32, 16], g_w: f32[32, 16], out_w: f32[16, 32]
) -> tuple[f32[3, 2, 1, 16], f32[2, 2, 16, 8], f32[2]]:
    embed_dim, value_dim, num_heads = 16, 32, 2
    gain = 1.0
    q_w = q_w * (gain * math.sqrt(6 / (embed_dim + embed_dim)))
    k_w = k_w * (gain * math.sqrt(6 / (embed_dim + embed_dim)))
    v_w = v_w * (gain * math.sqrt(6 / (embed_dim + value_dim)))
    g_w = g_w * (gain * math.sqrt(6 / (embed_dim + value_dim)))
    out_w = out_w * math.sqrt(6 / (embed_dim + value_dim))
    head_dim = value_dim // num_heads
    key_dim = embed_dim // num_heads
    scaling = key_dim ** -0.5
    # RetNetRelPos.__init__
    angle = 1.0 / (10000 ** torch.linspace(0, 1, embed_dim // num_heads // 2))
    angle = angle.unsqueeze(-1).repeat(1, 2).flatten()
    decay = torch.log(1 - 2 ** (-5 - torch.arange(num_heads, dtype=torch.float)))

    incremental_state = {}
    outputs = []
    for step in range(x.shape[0]):
        slen = step + 1
        # RetNetRelPos.forward(slen, activate_recurrent=True)
        sin = torch.sin(angle * (slen - 1))
        cos = torch.cos(angle * (slen - 1))
        rel_pos = ((sin, cos), decay.exp())

        # MultiScaleRetention.forward
        xs = x[step]
        bsz, tgt_len, _ = xs.size()
        (sin, cos), inner_mask = rel_pos

        q = F.linear(xs, q_w)
        k = F.linear(xs, k_w)
        v = F.linear(xs, v_w)
        g = F.linear(xs, g_w)

        k *= scaling
        q = q.view(bsz, tgt_len, num_heads, key_dim).transpose(1, 2)
        k = k.view(bsz, tgt_len, num_heads, key_dim).transpose(1, 2)

        qr = _theta_shift(q, sin, cos)
        kr = _theta_shift(k, sin, cos)

        output = _retention_recurrent_forward(qr, kr, v, inner_mask, incremental_state, num_heads, head_dim)

        output = _rms_norm(output).reshape(bsz, tgt_len, head_dim * num_heads)

        output = F.silu(g) * output

        output = F.linear(output, out_w)
        outputs.append(output)
    return torch.stack(outputs), incremental_state["prev_key_value"], incremental_state["scale"]


def _layer_norm_x(x, g, b, eps=0):
    mean = x.mean(1).expand_as(x)
    std = x.std(1).expand_as(x)
    return g.expand_as(x) * ((x - mean) / (std + eps)) + b.expand_as(x)


def _layer_norm_h(x, g, b):
    mean = x.mean(1).expand_as(x)
    return g.expand_as(x) * (x - mean) + b.expand_as(x)


def _ln_gru_cell(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gamma_ih, gamma_hh, hidden_size):
    ih_rz = _layer_norm_x(
        torch.mm(x, weight_ih.narrow(0, 0, 2 * hidden_size).transpose(0, 1)),
        gamma_ih.narrow(0, 0, 2 * hidden_size),
        bias_ih.narrow(0, 0, 2 * hidden_size))

    hh_rz = _layer_norm_h(
        torch.mm(h, weight_hh.narrow(0, 0, 2 * hidden_size).transpose(0, 1)),
        gamma_hh.narrow(0, 0, 2 * hidden_size),
        bias_hh.narrow(0, 0, 2 * hidden_size))

    rz = torch.sigmoid(ih_rz + hh_rz)
    r = rz.narrow(1, 0, hidden_size)
    z = rz.narrow(1, hidden_size, hidden_size)

    ih_n = _layer_norm_x(
        torch.mm(x, weight_ih.narrow(0, 2 * hidden_size, hidden_size).transpose(0, 1)),
        gamma_ih.narrow(0, 2 * hidden_size, hidden_size),
        bias_ih.narrow(0, 2 * hidden_size, hidden_size))

    hh_n = _layer_norm_h(
        torch.mm(h, weight_hh.narrow(0, 2 * hidden_size, hidden_size).transpose(0, 1)),
        gamma_hh.narrow(0, 2 * hidden_size, hidden_size),
        bias_hh.narrow(0, 2 * hidden_size, hidden_size))

    n = torch.tanh(ih_n + r * hh_n)
    h = (1 - z) * n + z * h
    return h


# Layer-normalized GRU, Denis Yarats' gist (denisyarats/2074e6f302dc6998a9f6f9051334e3bd, as vendored in several
# repositories): LayerNormGRUCell(nn.GRUCell).forward and LayerNormGRU.forward (input 6, hidden 8, 5 steps). The
# cell's `x.mean(1).expand_as(x)` predates keepdim=False, so under today's PyTorch it only runs with batch 1, which
# is the batch used here; eps 0 as in the original
def layernorm_gru(
    xs: f32[5, 1, 6], h: f32[1, 1, 8], weight_ih: f32[24, 6], weight_hh: f32[24, 8], bias_ih: f32[24],
    bias_hh: f32[24], gamma_ih: f32[24], gamma_hh: f32[24]
) -> tuple[f32[5, 1, 8], f32[1, 1, 8]]:
    hidden_size = 8
    h = h.squeeze(0)
    ys = []
    for i in range(xs.size(0)):
        x = xs.narrow(0, i, 1).squeeze(0)
        h = _ln_gru_cell(x, h, weight_ih, weight_hh, bias_ih, bias_hh, gamma_ih, gamma_hh, hidden_size)
        ys.append(h.unsqueeze(0))
    y = torch.cat(ys, 0)
    h = h.unsqueeze(0)
    return y, h


def _naive_recurrent_rwkv6(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    w: torch.Tensor,
    u: torch.Tensor,
    scale: float | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool | None = False,
):
    orig_dtype = q.dtype
    B, H, T, K, V = *q.shape, v.shape[-1]
    q, k, v, w, u = (x.float() for x in (q, k, v, w, u))
    h = torch.zeros(B, H, K, V, dtype=torch.float32, device=q.device)
    o = torch.zeros_like(v)

    if scale is None:
        scale = K ** -0.5

    if initial_state is not None:
        h += initial_state

    for i in range(T):
        q_i = q[:, :, i, :] * scale
        k_i = k[:, :, i]
        v_i = v[:, :, i, :]
        w_i = w[:, :, i].exp()
        kv_i = k_i[..., None] * v_i[..., None, :]
        o_i = (h + u[None, ..., None] * kv_i) * q_i[..., None]
        o[:, :, i] = o_i.sum(-2)
        h = h * w_i[..., None] + kv_i
    ht = h if output_final_state else None
    return o.to(orig_dtype), ht


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/rwkv6/recurrent_naive.py: naive_recurrent_rwkv6
# with an initial state and the final state (batch 2, 2 heads, 6 steps, key and value dim 4); the log decay made
# negative as the RWKV-6 layers make it (w = -exp(w))
def fla_naive_recurrent_rwkv6(
    q: f32[2, 2, 6, 4], k: f32[2, 2, 6, 4], v: f32[2, 2, 6, 4], w_raw: f32[2, 2, 6, 4], u: f32[2, 4],
    h0: f32[2, 2, 4, 4]
) -> tuple[f32[2, 2, 6, 4], f32[2, 2, 4, 4]]:
    w = -torch.exp(w_raw)
    return _naive_recurrent_rwkv6(q, k, v, w, u, initial_state=h0, output_final_state=True)


def _flatten_beam_dim(tensor: torch.Tensor) -> torch.Tensor:
    """[batch_size, num_beams, ...] -> [batch_size * num_beams, ...]"""
    shape = list(tensor.shape)
    return torch.reshape(tensor, [shape[0] * shape[1]] + shape[2:])


def _unflatten_beam_dim(tensor: torch.Tensor, batch_size: int, num_beams: int) -> torch.Tensor:
    """[batch_size * num_beams, ...] -> [batch_size, num_beams, ...]"""
    shape = list(tensor.shape)
    return torch.reshape(tensor, [batch_size, num_beams] + shape[1:])


def _gather_beams(tensor: torch.Tensor, beam_indices: torch.Tensor) -> torch.Tensor:
    """Gathers the beam slices indexed by beam_indices into new beam array."""
    while len(beam_indices.shape) < len(tensor.shape):
        beam_indices = beam_indices.unsqueeze(-1)
    gathered_tensor = torch.take_along_dim(input=tensor, indices=beam_indices, dim=1)
    return gathered_tensor


def _get_top_k_continuations(accumulated_log_probs, running_sequences, running_beam_indices, cur_len,
                             decoder_prompt_len, do_sample, beams_to_keep, num_beams, vocab_size, batch_size):
    # TODO (joao): This function should take an optional beam scorer function that manipulates the scores after
    # token selection. The function should be an argument exposed, so that custom scoring functions can be defined.

    # Gather the top K scores from _all_ beams.
    if do_sample:
        topk_indices = torch.multinomial(
            nn.functional.softmax(accumulated_log_probs, dim=-1), num_samples=beams_to_keep
        )
        topk_log_probs = torch.gather(input=accumulated_log_probs, dim=1, index=topk_indices)
    else:
        topk_log_probs, topk_indices = torch.topk(accumulated_log_probs, k=beams_to_keep)

    # Gather K top beams, recover the beam index by floor division and token id by modulo division
    topk_current_beam_indices = topk_indices // vocab_size
    topk_running_beam_indices = _gather_beams(running_beam_indices, topk_current_beam_indices)
    topk_running_sequences = _gather_beams(running_sequences, topk_current_beam_indices)
    topk_ids = topk_indices % vocab_size

    # Update sequences for the K top-k new sequences.
    topk_running_sequences[:, :, cur_len] = topk_ids

    # we want to store the beam indices with batch information -> real beam index = batch index * num beams + beam index
    batch_offset = torch.arange(batch_size, device=topk_ids.device).view(-1, 1) * num_beams
    batch_modified_indices = topk_current_beam_indices + batch_offset
    topk_running_beam_indices[:, :, cur_len - decoder_prompt_len] = batch_modified_indices

    return topk_log_probs, topk_running_sequences, topk_running_beam_indices


def _get_running_beams_for_next_iteration(topk_log_probs, topk_running_sequences, topk_running_beam_indices,
                                          next_token_hits_stopping_criteria, num_beams):
    # To prevent these just finished sequences from being used in subsequent iterations, set their log probs
    # to a very large negative value
    topk_running_log_probs = topk_log_probs + next_token_hits_stopping_criteria.to(torch.float32) * -1.0e9

    next_topk_indices = torch.topk(topk_running_log_probs, k=num_beams)[1]
    running_sequences = _gather_beams(topk_running_sequences, next_topk_indices)
    running_beam_scores = _gather_beams(topk_running_log_probs, next_topk_indices)
    running_beam_indices = _gather_beams(topk_running_beam_indices, next_topk_indices)
    return running_sequences, running_beam_scores, running_beam_indices


def _stopping_criteria(input_ids, eos_token_id, max_length):
    # StoppingCriteriaList.__call__ over MaxLengthCriteria and EosTokenCriteria
    is_done = torch.full((input_ids.shape[0],), False, device=input_ids.device, dtype=torch.bool)
    cur_len = input_ids.shape[-1]
    is_done = is_done | torch.full((input_ids.shape[0],), cur_len >= max_length, device=input_ids.device,
                                   dtype=torch.bool)
    eos_token_id = eos_token_id.to(input_ids.device)
    is_done = is_done | torch.isin(input_ids[:, -1], eos_token_id)
    return is_done


# Hugging Face transformers, generation/utils.py: GenerationMixin._beam_search (the vectorized beam search of
# v4.50+): the running-beam initialization and, for three steps, log_softmax, the beam score accumulation,
# _get_top_k_continuations, the stopping criteria (MaxLengthCriteria and EosTokenCriteria, eos id 3) and
# _get_running_beams_for_next_iteration, with _flatten_beam_dim, _unflatten_beam_dim and _gather_beams (greedy, 2
# beams, batch 2, vocabulary 12, prompt 3 tokens expanded by _expand_inputs_for_generation, max_length 7); the model
# a stand-in whose logits are inputs; pad_token_id 0, so `pad_token_id or eos_token_id[0]` fills with the eos tensor
def hf_beam_search_steps(
    prompt_ids: i64[2, 3], step_logits: f32[3, 4, 12]
) -> tuple[i64[2, 2, 7], f32[2, 2], i32[2, 2, 4]]:
    num_beams, max_length, pad_token_id, do_sample = 2, 7, 0, False
    eos_token_id = torch.tensor([3])
    # _expand_inputs_for_generation
    input_ids = prompt_ids.repeat_interleave(num_beams, dim=0)
    n_eos_tokens = eos_token_id.shape[0]
    batch_size_unflattened, cur_len = input_ids.shape
    batch_size = batch_size_unflattened // num_beams
    vocab_size = step_logits.shape[-1]
    decoder_prompt_len = cur_len
    beams_to_keep = max(2, 1 + n_eos_tokens) * num_beams

    output_fill_value = pad_token_id or eos_token_id[0] if eos_token_id is not None else -1
    running_sequences = torch.full(
        (batch_size, num_beams, max_length),
        fill_value=output_fill_value,
        dtype=torch.int64,
        device=input_ids.device,
    )
    running_sequences[:, :, :cur_len] = _unflatten_beam_dim(input_ids, batch_size, num_beams)
    running_beam_scores = torch.zeros((batch_size, num_beams), dtype=torch.float, device=input_ids.device)
    running_beam_scores[:, 1:] = -1e9
    running_beam_indices = torch.full(
        (batch_size, num_beams, max_length - cur_len), fill_value=-1, dtype=torch.int32, device=input_ids.device
    )

    for step in range(3):
        flat_running_sequences = _flatten_beam_dim(running_sequences[:, :, :cur_len])
        logits = step_logits[step].clone().to(torch.float32)
        log_probs = nn.functional.log_softmax(logits, dim=-1)

        log_probs = _unflatten_beam_dim(log_probs, batch_size, num_beams)
        log_probs = log_probs + running_beam_scores[:, :, None]
        log_probs = torch.reshape(log_probs, (batch_size, num_beams * vocab_size))

        topk_log_probs, topk_running_sequences, topk_running_beam_indices = _get_top_k_continuations(
            accumulated_log_probs=log_probs,
            running_sequences=running_sequences,
            running_beam_indices=running_beam_indices,
            cur_len=cur_len,
            decoder_prompt_len=decoder_prompt_len,
            do_sample=do_sample,
            beams_to_keep=beams_to_keep,
            num_beams=num_beams,
            vocab_size=vocab_size,
            batch_size=batch_size,
        )

        next_token_hits_stopping_criteria = _stopping_criteria(
            _flatten_beam_dim(topk_running_sequences[:, :, : cur_len + 1]), eos_token_id, max_length
        )
        next_token_hits_stopping_criteria = _unflatten_beam_dim(
            next_token_hits_stopping_criteria, batch_size, beams_to_keep
        )

        running_sequences, running_beam_scores, running_beam_indices = _get_running_beams_for_next_iteration(
            topk_log_probs=topk_log_probs,
            topk_running_sequences=topk_running_sequences,
            topk_running_beam_indices=topk_running_beam_indices,
            next_token_hits_stopping_criteria=next_token_hits_stopping_criteria,
            num_beams=num_beams,
        )
        cur_len = cur_len + 1
    return running_sequences, running_beam_scores, running_beam_indices


# DeepSeek-V3 (deepseek-ai/DeepSeek-V3), inference/model.py: Gate.forward with sigmoid scores, the bias of the
# 7168-dim model (auxiliary-loss-free balancing) and group-limited routing (16 experts in 4 groups, top 2 groups,
# top 4 experts, route scale 2.5; 6 tokens of dim 16); `linear` as F.linear
def deepseek_v3_gate(x: f32[6, 16], weight: f32[16, 16], raw_bias: f32[16]) -> tuple[f32[6, 4], i64[6, 4]]:
    topk, n_groups, topk_groups, score_func, route_scale = 4, 4, 2, "sigmoid", 2.5
    bias = raw_bias * 0.1
    scores = F.linear(x, weight)
    if score_func == "softmax":
        scores = scores.softmax(dim=-1, dtype=torch.float32)
    else:
        scores = scores.sigmoid()
    original_scores = scores
    if bias is not None:
        scores = scores + bias
    if n_groups > 1:
        scores = scores.view(x.size(0), n_groups, -1)
        if bias is None:
            group_scores = scores.amax(dim=-1)
        else:
            group_scores = scores.topk(2, dim=-1)[0].sum(dim=-1)
        indices = group_scores.topk(topk_groups, dim=-1)[1]
        mask = scores.new_ones(x.size(0), n_groups, dtype=bool).scatter_(1, indices, False)
        scores = scores.masked_fill_(mask.unsqueeze(-1), float("-inf")).flatten(1)
    indices = torch.topk(scores, topk, dim=-1)[1]
    weights = original_scores.gather(1, indices)
    if score_func == "sigmoid":
        weights /= weights.sum(dim=-1, keepdim=True)
    weights *= route_scale
    return weights.type_as(x), indices


def _sink_rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _sink_apply_key_rotary_pos_emb(key_states, cos, sin):
    rotated_key_states = (key_states * cos) + (_sink_rotate_half(key_states) * sin)
    return rotated_key_states


def _sink_get_rerotation_cos_sin(cache, key_states, cos, sin):
    if key_states.shape[-2] not in cache["cos_sin_cache"]:
        # Upcast to float32 temporarily for better accuracy
        cos = cos.to(torch.float32)
        sin = sin.to(torch.float32)

        # Compute the cos and sin required for back- and forward-rotating to one position earlier in the sequence
        original_cos = cos[cache["num_sink_tokens"] + key_states.shape[-2] :]
        shifted_cos = cos[cache["num_sink_tokens"] : -key_states.shape[-2]]
        original_sin = sin[cache["num_sink_tokens"] + key_states.shape[-2] :]
        shifted_sin = sin[cache["num_sink_tokens"] : -key_states.shape[-2]]
        rerotation_cos = original_cos * shifted_cos + original_sin * shifted_sin
        rerotation_sin = -original_sin * shifted_cos + original_cos * shifted_sin

        cache["cos_sin_cache"][key_states.shape[-2]] = (
            rerotation_cos.to(key_states.dtype).unsqueeze(0),
            rerotation_sin.to(key_states.dtype).unsqueeze(0),
        )
    return cache["cos_sin_cache"][key_states.shape[-2]]


def _sink_get_seq_length(cache, layer_idx=0):
    # Workaround to make 'key_states.shape[-2] + past_key_value.get_seq_length(self.layer_idx)' <= window_length
    if len(cache["key_cache"]) <= layer_idx:
        return 0
    return cache["key_cache"][layer_idx].shape[-2]


def _sink_get_usable_length(cache, new_seq_length, layer_idx=0):
    # Cache.get_usable_length with SinkCache.get_max_length
    max_length = cache["window_length"]
    previous_seq_length = _sink_get_seq_length(cache, layer_idx)
    if max_length is not None and previous_seq_length + new_seq_length > max_length:
        return max_length - new_seq_length
    return previous_seq_length


def _sink_update(cache, key_states, value_states, layer_idx, cache_kwargs=None):
    # Optional kwargs for `SinkCache` -- needed on models using RoPE. `partial_rotation_size` is used on models
    # with partially rotated position embeddings, like Phi or Persimmon.
    sin = cache_kwargs.get("sin")
    cos = cache_kwargs.get("cos")
    partial_rotation_size = cache_kwargs.get("partial_rotation_size")
    using_rope = cos is not None and sin is not None

    # Update the number of seen tokens
    if layer_idx == 0:
        cache["_seen_tokens"] += key_states.shape[-2]

    # [bsz, num_heads, seq_len, head_dim]
    if len(cache["key_cache"]) <= layer_idx:
        # Empty cache
        cache["key_cache"].append(key_states)
        cache["value_cache"].append(value_states)

    elif key_states.shape[-2] + _sink_get_seq_length(cache, layer_idx) < cache["window_length"]:
        # Growing cache
        cache["key_cache"][layer_idx] = torch.cat([cache["key_cache"][layer_idx], key_states], dim=-2)
        cache["value_cache"][layer_idx] = torch.cat([cache["value_cache"][layer_idx], value_states], dim=-2)

    else:
        # Shifting cache
        keys_to_keep = cache["key_cache"][layer_idx][
            :, :, -cache["window_length"] + cache["num_sink_tokens"] + key_states.shape[-2] :
        ]

        # On RoPE models, we need to recompute the Key rotation as the tokens are shifted
        if using_rope:
            rerotation_cos, rerotation_sin = _sink_get_rerotation_cos_sin(
                cache, key_states, cos[: cache["window_length"]], sin[: cache["window_length"]]
            )
            if partial_rotation_size is not None:
                keys_to_keep, keys_pass = (
                    keys_to_keep[..., :partial_rotation_size],
                    keys_to_keep[..., partial_rotation_size:],
                )
            keys_to_keep = _sink_apply_key_rotary_pos_emb(keys_to_keep, rerotation_cos, rerotation_sin)
            if partial_rotation_size is not None:
                keys_to_keep = torch.cat((keys_to_keep, keys_pass), dim=-1)

        # Concatenate sink tokens, shifted & rotated tokens (if needed), and new tokens
        sink_keys = cache["key_cache"][layer_idx][:, :, : cache["num_sink_tokens"]]
        cache["key_cache"][layer_idx] = torch.cat([sink_keys, keys_to_keep, key_states], dim=-2)

        sink_values = cache["value_cache"][layer_idx][:, :, : cache["num_sink_tokens"]]
        values_to_keep = cache["value_cache"][layer_idx][
            :, :, -cache["window_length"] + cache["num_sink_tokens"] + value_states.shape[-2] :
        ]
        cache["value_cache"][layer_idx] = torch.cat([sink_values, values_to_keep, value_states], dim=-2)

    return cache["key_cache"][layer_idx], cache["value_cache"][layer_idx]


# Hugging Face transformers v4.38, cache_utils.py: SinkCache (window 8, 2 sink tokens; _rotate_half,
# _apply_key_rotary_pos_emb, _get_rerotation_cos_sin, get_seq_length, update) with Cache.get_usable_length, driven
# as LlamaAttention drives it: LlamaRotaryEmbedding's cos/sin up to kv_seq_len passed in cache_kwargs; two layers,
# a 6-token prefill, then 4 single-token steps (the cache grows, then shifts and re-rotates); the cache object as a
# dict of its attributes
def hf_sink_cache(
    prefill_k: f32[2, 1, 2, 6, 8], prefill_v: f32[2, 1, 2, 6, 8], step_k: f32[4, 2, 1, 2, 1, 8],
    step_v: f32[4, 2, 1, 2, 1, 8]
) -> tuple[f32[1, 2, 8, 8], f32[1, 2, 8, 8], f32[1, 2, 8, 8], f32[1, 2, 8, 8]]:
    dim, base, max_position_embeddings = 8, 10000, 32
    cache = {"key_cache": [], "value_cache": [], "window_length": 8, "num_sink_tokens": 2, "cos_sin_cache": {},
             "_seen_tokens": 0}
    # LlamaRotaryEmbedding.__init__ / _set_cos_sin_cache
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    t = torch.arange(max_position_embeddings, dtype=torch.int64).type_as(inv_freq)
    freqs = torch.outer(t, inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos_cached = emb.cos()
    sin_cached = emb.sin()

    steps = [(prefill_k, prefill_v)] + [(step_k[i], step_v[i]) for i in range(step_k.shape[0])]
    for keys, values in steps:
        for layer_idx in range(2):
            key_states = keys[layer_idx]
            value_states = values[layer_idx]
            kv_seq_len = key_states.shape[-2]
            kv_seq_len += _sink_get_usable_length(cache, kv_seq_len, layer_idx)
            cos, sin = cos_cached[:kv_seq_len], sin_cached[:kv_seq_len]
            cache_kwargs = {"sin": sin, "cos": cos}  # Specific to RoPE models
            key_states, value_states = _sink_update(cache, key_states, value_states, layer_idx, cache_kwargs)
    return cache["key_cache"][0], cache["value_cache"][0], cache["key_cache"][1], cache["value_cache"][1]


# QHAdam (Ma and Yarats, 2019), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/qhadam.py: QHAdam.step
# (lr 1e-2, betas (0.9, 0.999), nus (0.7, 1.0), weight decay 1e-2 not decoupled), three steps on two parameters;
# per-parameter state in a list of dicts; deprecated add_(scalar, tensor) and addcdiv_(scalar, t1, t2) overloads as the
# original writes them
def qhadam_steps(p1: f32[5, 4], p2: f32[4], grads1: f32[3, 5, 4], grads2: f32[3, 4]) -> tuple[f32[5, 4], f32[4]]:
    group = {'lr': 1e-2, 'betas': (0.9, 0.999), 'nus': (0.7, 1.0), 'weight_decay': 1e-2,
             'decouple_weight_decay': False, 'eps': 1e-8}
    states = [{}, {}]
    for k in range(3):
        lr = group['lr']
        beta1, beta2 = group['betas']
        nu1, nu2 = group['nus']
        weight_decay = group['weight_decay']
        decouple_weight_decay = group['decouple_weight_decay']
        eps = group['eps']

        for p, grad, state in zip([p1, p2], [grads1[k].clone(), grads2[k].clone()], states):
            d_p = grad.data

            if weight_decay != 0:
                if decouple_weight_decay:
                    p.data.mul_(1 - lr * weight_decay)
                else:
                    d_p.add_(weight_decay, p.data)

            d_p_sq = d_p.mul(d_p)

            if len(state) == 0:
                state['beta1_weight'] = 0.0
                state['beta2_weight'] = 0.0
                state['exp_avg'] = torch.zeros_like(p.data)
                state['exp_avg_sq'] = torch.zeros_like(p.data)

            state['beta1_weight'] = 1.0 + beta1 * state['beta1_weight']
            state['beta2_weight'] = 1.0 + beta2 * state['beta2_weight']

            beta1_weight = state['beta1_weight']
            beta2_weight = state['beta2_weight']
            exp_avg = state['exp_avg']
            exp_avg_sq = state['exp_avg_sq']

            beta1_adj = 1.0 - (1.0 / beta1_weight)
            beta2_adj = 1.0 - (1.0 / beta2_weight)
            exp_avg.mul_(beta1_adj).add_(1.0 - beta1_adj, d_p)
            exp_avg_sq.mul_(beta2_adj).add_(1.0 - beta2_adj, d_p_sq)

            avg_grad = exp_avg.mul(nu1)
            if nu1 != 1.0:
                avg_grad.add_(1.0 - nu1, d_p)

            avg_grad_rms = exp_avg_sq.mul(nu2)
            if nu2 != 1.0:
                avg_grad_rms.add_(1.0 - nu2, d_p_sq)
            avg_grad_rms.sqrt_()
            if eps != 0.0:
                avg_grad_rms.add_(eps)

            p.data.addcdiv_(-lr, avg_grad, avg_grad_rms)
    return p1, p2


# Apollo (Ma, 2020), torch-optimizer, torch_optimizer/apollo.py: Apollo.step (lr 1e-2, beta 0.9, eps 1e-4, warmup 2
# steps from init_lr 1e-3, weight decay 1e-4), three steps on two parameters; state as a list of dicts
def apollo_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = dict(lr=1e-2, beta=0.9, eps=1e-4, warmup=2, init_lr=1e-3, base_lr=1e-2, weight_decay=1e-4)
    states = [{}, {}]
    for k in range(3):
        for p, p_grad, state in zip([p1, p2], [grads1[k], grads2[k]], states):
            # State initialization
            if len(state) == 0:
                state['step'] = 0
                # Exponential moving average of gradient values
                state['exp_avg_grad'] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
                # Exponential moving average of squared gradient values
                state['approx_hessian'] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )
                # Previous update direction
                state['update'] = torch.zeros_like(
                    p, memory_format=torch.preserve_format
                )

            # Calculate current lr
            if state['step'] < group['warmup']:
                curr_lr = (group['base_lr'] - group['init_lr']) * state[
                    'step'
                ] / group['warmup'] + group['init_lr']
            else:
                curr_lr = group['lr']

            # Perform optimization step
            grad = p_grad
            if grad.is_sparse:
                raise RuntimeError(
                    'Atom does not support sparse gradients.'
                )

            # Perform step weight decay
            if group['weight_decay'] != 0:
                grad = grad.add(p, alpha=group['weight_decay'])

            beta = group['beta']
            exp_avg_grad = state['exp_avg_grad']
            B = state['approx_hessian']
            d_p = state['update']

            state['step'] += 1
            bias_correction = 1 - beta ** state['step']
            alpha = (1 - beta) / bias_correction

            # Update the running average grad
            delta_grad = grad - exp_avg_grad
            exp_avg_grad.add_(delta_grad, alpha=alpha)

            denom = d_p.norm(p=4).add(group['eps'])
            d_p.div_(denom)
            v_sq = d_p.mul(d_p)
            delta = (
                delta_grad.div_(denom).mul_(d_p).sum().mul(-alpha)
                - B.mul(v_sq).sum()
            )

            # Update B
            B.addcmul_(v_sq, delta)

            # calc direction of parameter updates
            denom = B.abs().clamp_(min=1)
            d_p.copy_(exp_avg_grad.div(denom))

            p.data.add_(d_p, alpha=-curr_lr)
    return p1, p2


# PID optimizer (An et al., 2018), torch-optimizer, torch_optimizer/pid.py: PID.step (lr 1e-2, momentum 0.9,
# dampening 0, weight decay 1e-3, integral 5, derivative 10), three steps on two parameters; the gradients are the
# rows of the gradient inputs, which the step writes in place as it writes p.grad (d_p.add_); state as a list of
# dicts
def pid_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = dict(lr=1e-2, momentum=0.9, dampening=0.0, weight_decay=1e-3, integral=5.0, derivative=10.0)
    states = [{}, {}]
    for k in range(3):
        weight_decay = group['weight_decay']
        momentum = group['momentum']
        dampening = group['dampening']
        integral = group['integral']
        derivative = group['derivative']
        for p, p_grad, param_state in zip([p1, p2], [grads1[k], grads2[k]], states):
            d_p = p_grad.data
            if weight_decay != 0:
                d_p.add_(p.data, alpha=weight_decay)
            if momentum != 0:
                if 'i_buffer' not in param_state:
                    i_buf = param_state['i_buffer'] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )
                    i_buf.mul_(momentum).add_(d_p)
                else:
                    i_buf = param_state['i_buffer']
                    i_buf.mul_(momentum).add_(d_p, alpha=1 - dampening)
                if 'grad_buffer' not in param_state:
                    g_buf = param_state['grad_buffer'] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )
                    g_buf = d_p

                    d_buf = param_state['d_buffer'] = torch.zeros_like(
                        p, memory_format=torch.preserve_format
                    )
                    d_buf.mul_(momentum).add_(d_p - g_buf)
                else:
                    d_buf = param_state['d_buffer']
                    g_buf = param_state['grad_buffer']
                    d_buf.mul_(momentum).add_(
                        d_p - g_buf, alpha=1 - momentum
                    )
                    param_state['grad_buffer'] = d_p.clone()

                d_p = d_p.add_(i_buf, alpha=integral).add_(
                    d_buf, alpha=derivative
                )
            p.data.add_(d_p, alpha=-group['lr'])
    return p1, p2
