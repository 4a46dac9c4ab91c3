"""Held-out real code, issue 14's eighteenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout18.py): torchvision's keypoint decoding from heatmaps (bicubic `F.interpolate`, a resize size
from data), vLLM's paged KV cache and decode attention (a loop bound from data), Hugging Face's no-repeat-n-gram
processor (dict keys from data), and torch-optimizer's Shampoo (`torch.eye(out=)`, `str.format`, `transpose_`,
`torch.svd`). The Legendre Memory Unit (`torch.linalg.matrix_exp`), pending at first, runs now and is in
corpus/real/heldout18.py. Inputs arrive uniform in [-1, 1); integer inputs in
[0, 10)."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import Variable


def _tv_heatmaps_to_keypoints(maps, rois):
    offset_x = rois[:, 0]
    offset_y = rois[:, 1]

    widths = rois[:, 2] - rois[:, 0]
    heights = rois[:, 3] - rois[:, 1]
    widths = widths.clamp(min=1)
    heights = heights.clamp(min=1)
    widths_ceil = widths.ceil()
    heights_ceil = heights.ceil()

    num_keypoints = maps.shape[1]

    xy_preds = torch.zeros((len(rois), 3, num_keypoints), dtype=torch.float32, device=maps.device)
    end_scores = torch.zeros((len(rois), num_keypoints), dtype=torch.float32, device=maps.device)
    for i in range(len(rois)):
        roi_map_width = int(widths_ceil[i].item())
        roi_map_height = int(heights_ceil[i].item())
        width_correction = widths[i] / roi_map_width
        height_correction = heights[i] / roi_map_height
        roi_map = F.interpolate(
            maps[i][:, None], size=(roi_map_height, roi_map_width), mode='bicubic', align_corners=False)[:, 0]
        w = roi_map.shape[2]
        pos = roi_map.reshape(num_keypoints, -1).argmax(dim=1)

        x_int = pos % w
        y_int = (pos - x_int) // w
        x = (x_int.float() + 0.5) * width_correction
        y = (y_int.float() + 0.5) * height_correction
        xy_preds[i, 0, :] = x + offset_x[i]
        xy_preds[i, 1, :] = y + offset_y[i]
        xy_preds[i, 2, :] = 1
        end_scores[i, :] = roi_map[torch.arange(num_keypoints), y_int, x_int]

    return xy_preds.permute(0, 2, 1), end_scores


def _tv_keypointrcnn_inference(x, boxes):
    kp_probs = []
    kp_scores = []

    boxes_per_image = [box.size(0) for box in boxes]
    x2 = x.split(boxes_per_image, dim=0)

    for xx, bb in zip(x2, boxes):
        kp_prob, scores = _tv_heatmaps_to_keypoints(xx, bb)
        kp_probs.append(kp_prob)
        kp_scores.append(scores)

    return kp_probs, kp_scores


# torchvision (pytorch/vision), torchvision/models/detection/roi_heads.py: keypointrcnn_inference and
# heatmaps_to_keypoints (the eager branch, not the ONNX-tracing one), for two images with 3 and 2 detections, 4
# keypoints, 14x14 heatmap logits; boxes made from the raw inputs (corners in [0, 40), sides in [4, 20), not
# integers), so each box's heatmap is resized bicubically to its own (ceil) size
def tv_heatmaps_to_keypoints(
    keypoint_logits: f32[5, 4, 14, 14], box_raw: f32[5, 4]
) -> tuple[f32[3, 4, 3], f32[2, 4, 3], f32[3, 4], f32[2, 4]]:
    x0 = (box_raw[:, 0] + 1.0) * 20.0
    y0 = (box_raw[:, 1] + 1.0) * 20.0
    w = box_raw[:, 2] * 8.0 + 12.0
    h = box_raw[:, 3] * 8.0 + 12.0
    all_boxes = torch.stack((x0, y0, x0 + w, y0 + h), dim=1)
    boxes = [all_boxes[:3], all_boxes[3:]]
    kp_probs, kp_scores = _tv_keypointrcnn_inference(keypoint_logits, boxes)
    return kp_probs[0], kp_probs[1], kp_scores[0], kp_scores[1]


def _vllm_ref_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, block_size):
    num_tokens = key.shape[0]
    reshaped_key = key.reshape(num_tokens, *key_cache[0, :, :, 0, :].shape)
    block_indices = torch.div(slot_mapping, block_size, rounding_mode="floor")
    block_indices_lst = block_indices.cpu().tolist()
    block_offsets = slot_mapping % block_size
    block_offsets_lst = block_offsets.cpu().tolist()
    for i in range(num_tokens):
        block_idx = block_indices_lst[i]
        block_offset = block_offsets_lst[i]
        key_cache[block_idx, :, :, block_offset, :] = reshaped_key[i]
        value_cache[block_idx, :, :, block_offset] = value[i]


def _vllm_ref_masked_attention(query, key, value, scale, attn_mask=None):
    attn_weights = scale * torch.einsum("qhd,khd->hqk", query, key).float()
    if attn_mask is not None:
        attn_weights = attn_weights + attn_mask.float()
    attn_weights = torch.softmax(attn_weights, dim=-1).to(value.dtype)
    out = torch.einsum("hqk,khd->qhd", attn_weights, value)
    return out


def _vllm_ref_single_query_cached_kv_attention(output, query, num_queries_per_kv, key_cache, value_cache,
                                               block_tables, seq_lens, scale, alibi_slopes):
    num_query_heads = query.shape[1]
    num_kv_heads = value_cache.shape[1]
    head_size = value_cache.shape[2]
    block_size = value_cache.shape[3]
    num_seqs = query.shape[0]

    block_tables_lst = block_tables.cpu().tolist()
    seq_lens_lst = seq_lens.cpu().tolist()
    for i in range(num_seqs):
        q = query[i].unsqueeze(0)
        block_table = block_tables_lst[i]
        seq_len = int(seq_lens_lst[i])

        keys_lst: list[torch.Tensor] = []
        values_lst: list[torch.Tensor] = []
        for j in range(seq_len):
            block_number = int(block_table[j // block_size])
            block_offset = j % block_size

            k = key_cache[block_number, :, :, block_offset, :]
            k = k.reshape(num_kv_heads, head_size)
            keys_lst.append(k)

            v = value_cache[block_number, :, :, block_offset]
            values_lst.append(v)
        keys = torch.stack(keys_lst, dim=0)
        values = torch.stack(values_lst, dim=0)
        if num_queries_per_kv > 1:
            # Handle MQA and GQA
            keys = torch.repeat_interleave(keys, num_queries_per_kv, dim=1)
            values = torch.repeat_interleave(values, num_queries_per_kv, dim=1)

        alibi_bias = None
        if alibi_slopes is not None:
            # Create the ALiBi bias used in the paged attention kernel.
            position_ids = torch.arange(seq_len).int()
            alibi_bias = (position_ids - seq_len + 1).float()
            alibi_bias = alibi_slopes.view(-1, 1, 1) * alibi_bias.view(1, 1, -1)

        out = _vllm_ref_masked_attention(q, keys, values, scale, alibi_bias)
        out = out.view(num_query_heads, head_size)
        output[i].copy_(out, non_blocking=True)


# vLLM (vllm-project/vllm), tests/kernels/attention/test_cache.py: test_reshape_and_cache's reference (the write of
# each token's key and value into its slot of the paged caches) and tests/kernels/attention/test_attention.py:
# ref_single_query_cached_kv_attention with ref_masked_attention (GQA with 4 query heads over 2 KV heads, ALiBi),
# as one decode step chains them: each of 3 sequences has a context of 0..9 tokens already cached (from the integer
# input) and writes its new token at position = context length before attending over context + 1 tokens. Caches in
# vLLM's layout (key [blocks, kv_heads, head_size / x, block_size, x] with x = 16 // 4 for float32, value [blocks,
# kv_heads, head_size, block_size]); 10 blocks of 4, head size 8; fixed block tables of 3 blocks per sequence. The
# slot mapping for the new token (block_tables[pos // block_size] * block_size + pos % block_size) is computed as
# vLLM's input preparation does, vectorized
def vllm_paged_kv_decode(
    query: f32[3, 4, 8], key: f32[3, 2, 8], value: f32[3, 2, 8], key_cache: f32[10, 2, 2, 4, 4],
    value_cache: f32[10, 2, 8, 4], context_lens: i64[3], alibi_raw: f32[4]
) -> f32[3, 4, 8]:
    block_size = 4
    head_size = 8
    block_tables = torch.tensor([[7, 2, 9], [0, 5, 3], [8, 1, 4]], dtype=torch.int)
    positions = context_lens
    seq_lens = (context_lens + 1).int()
    block_numbers = block_tables.long().gather(1, (positions // block_size)[:, None]).squeeze(1)
    slot_mapping = block_numbers * block_size + positions % block_size

    _vllm_ref_reshape_and_cache(key, value, key_cache, value_cache, slot_mapping, block_size)

    scale = float(1.0 / (head_size ** 0.5))
    num_queries_per_kv = query.shape[1] // key.shape[1]
    alibi_slopes = alibi_raw.abs() + 0.1
    output = torch.empty_like(query)
    _vllm_ref_single_query_cached_kv_attention(output, query, num_queries_per_kv, key_cache, value_cache,
                                               block_tables, seq_lens, scale, alibi_slopes)
    return output


def _get_ngrams(ngram_size: int, prev_input_ids: torch.Tensor, num_hypos: int):
    generated_ngrams = [{} for _ in range(num_hypos)]
    for idx in range(num_hypos):
        gen_tokens = prev_input_ids[idx].tolist()
        generated_ngram = generated_ngrams[idx]
        # Loop through each n-gram of size ngram_size in the list of tokens (gen_tokens)
        for ngram in zip(*[gen_tokens[i:] for i in range(ngram_size)]):
            prev_ngram_tuple = tuple(ngram[:-1])
            generated_ngram[prev_ngram_tuple] = generated_ngram.get(prev_ngram_tuple, []) + [ngram[-1]]
    return generated_ngrams


def _get_generated_ngrams(banned_ngrams, prev_input_ids, ngram_size, cur_len):
    # Before decoding the next token, prevent decoding of ngrams that have already appeared
    start_idx = cur_len + 1 - ngram_size
    ngram_idx = tuple(prev_input_ids[start_idx:cur_len].tolist())
    return banned_ngrams.get(ngram_idx, [])


def _calc_banned_ngram_tokens(ngram_size: int, prev_input_ids: torch.Tensor, num_hypos: int, cur_len: int):
    """Copied from fairseq for no_repeat_ngram in beam_search"""
    if cur_len + 1 < ngram_size:
        # return no banned tokens if we haven't generated no_repeat_ngram_size tokens yet
        return [[] for _ in range(num_hypos)]
    generated_ngrams = _get_ngrams(ngram_size, prev_input_ids, num_hypos)
    banned_tokens = [
        _get_generated_ngrams(generated_ngrams[hypo_idx], prev_input_ids[hypo_idx], ngram_size, cur_len)
        for hypo_idx in range(num_hypos)
    ]
    return banned_tokens


def _no_repeat_ngram_call(self, input_ids, scores):
    num_batch_hypotheses = scores.shape[0]
    cur_len = input_ids.shape[-1]
    scores_processed = scores.clone()
    banned_batch_tokens = _calc_banned_ngram_tokens(self["ngram_size"], input_ids, num_batch_hypotheses, cur_len)
    for i, banned_tokens in enumerate(banned_batch_tokens):
        scores_processed[i, banned_tokens] = -float("inf")

    return scores_processed


# Hugging Face transformers, generation/logits_process.py: NoRepeatNGramLogitsProcessor.__init__ and __call__ with
# _get_ngrams, _get_generated_ngrams and _calc_banned_ngram_tokens; ngram sizes 2 and 3 on the same batch of 4
# hypotheses of 12 tokens (ids from the integer input modulo 3, so n-grams repeat), vocabulary 10; the processor
# as a dict
def hf_no_repeat_ngram(input_ids: i64[4, 12], scores: f32[4, 10]) -> tuple[f32[4, 10], f32[4, 10]]:
    input_ids = input_ids % 3  # few distinct ids, so that 3-grams repeat too
    out = []
    for ngram_size in (2, 3):
        if not isinstance(ngram_size, int) or ngram_size <= 0:
            raise ValueError(f"`ngram_size` has to be a strictly positive integer, but is {ngram_size}")
        processor = {"ngram_size": ngram_size}
        out.append(_no_repeat_ngram_call(processor, input_ids, scores))
    return out[0], out[1]


def _matrix_power(matrix: torch.Tensor, power: float) -> torch.Tensor:
    # use CPU for svd for speed up
    device = matrix.device
    matrix = matrix.cpu()
    u, s, v = torch.svd(matrix)
    return (u @ s.pow_(power).diag() @ v.t()).to(device)


def _shampoo_step(param_groups, state_by_param):
    loss = None
    for group in param_groups:
        for pi, (p, p_grad) in enumerate(zip(group['params'], group['grads'])):
            if p_grad is None:
                continue
            grad = p_grad.data
            order = grad.ndimension()
            original_size = grad.size()
            state = state_by_param[pi]
            momentum = group['momentum']
            weight_decay = group['weight_decay']
            if len(state) == 0:
                state['step'] = 0
                if momentum > 0:
                    state['momentum_buffer'] = grad.clone()
                for dim_id, dim in enumerate(grad.size()):
                    # precondition matrices
                    state['precond_{}'.format(dim_id)] = group['epsilon'] * torch.eye(dim, out=grad.new(dim, dim))
                    state['inv_precond_{dim_id}'.format(dim_id=dim_id)] = grad.new(dim, dim).zero_()

            if momentum > 0:
                grad.mul_(1 - momentum).add_(state['momentum_buffer'], alpha=momentum)

            if weight_decay > 0:
                grad.add_(p.data, alpha=group['weight_decay'])

            # See Algorithm 2 for detail
            for dim_id, dim in enumerate(grad.size()):
                precond = state['precond_{}'.format(dim_id)]
                inv_precond = state['inv_precond_{}'.format(dim_id)]

                # mat_{dim_id}(grad)
                grad = grad.transpose_(0, dim_id).contiguous()
                transposed_size = grad.size()
                grad = grad.view(dim, -1)

                grad_t = grad.t()
                precond.add_(grad @ grad_t)
                if state['step'] % group['update_freq'] == 0:
                    inv_precond.copy_(_matrix_power(precond, -1 / order))

                if dim_id == order - 1:
                    # finally
                    grad = grad_t @ inv_precond
                    # grad: (-1, last_dim)
                    grad = grad.view(original_size)
                else:
                    # if not final
                    grad = inv_precond @ grad
                    # grad (dim, -1)
                    grad = grad.view(transposed_size)

            state['step'] += 1
            state['momentum_buffer'] = grad
            p.data.add_(grad, alpha=-group['lr'])

    return loss


# torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/shampoo.py: Shampoo.step with _matrix_power (torch.svd)
# (lr 0.1, momentum 0.5, weight_decay 1e-3, update_freq 1, epsilon 0.1 instead of 1e-4 so that the preconditioners
# stay well conditioned in float32), three steps on a [3, 4] weight and a [4] bias; p.grad is each step's gradient
# slice, which the momentum and weight decay update in place as the original does to p.grad.data; param_groups and
# state as a list of dicts and a dict by parameter index
def shampoo_steps(w: f32[3, 4], b: f32[4], gw: f32[3, 3, 4], gb: f32[3, 4]) -> tuple[f32[3, 4], f32[4]]:
    group = dict(lr=1e-1, momentum=0.5, weight_decay=1e-3, epsilon=1e-1, update_freq=1)
    group["params"] = [w, b]
    state = {0: {}, 1: {}}
    for t in range(3):
        group["grads"] = [gw[t], gb[t]]
        _shampoo_step([group], state)
    return w, b
