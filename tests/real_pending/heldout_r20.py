"""Held-out real code, issue 14's twentieth round, the programs some engine refuses (the round's others are in
corpus/real/heldout20.py): YOLOX's SimOTA dynamic-k matching (`torch.uint8`, then `topk` with a k from tensor data)
and gpt-fast's speculative acceptance (`nonzero`, a data-dependent shape). Inputs arrive uniform in [-1, 1); integer
inputs in [0, 10)."""
from __future__ import annotations

import math
from itertools import product
from math import ceil

import torch
import torch.nn.functional as F


# YOLOX (Megvii-BaseDetection/YOLOX), yolox/models/yolo_head.py: YOLOXHead.dynamic_k_matching
def _yolox_dynamic_k_matching(cost, pair_wise_ious, gt_classes, num_gt, fg_mask):
    matching_matrix = torch.zeros_like(cost, dtype=torch.uint8)

    n_candidate_k = min(10, pair_wise_ious.size(1))
    topk_ious, _ = torch.topk(pair_wise_ious, n_candidate_k, dim=1)
    dynamic_ks = torch.clamp(topk_ious.sum(1).int(), min=1)
    for gt_idx in range(num_gt):
        _, pos_idx = torch.topk(cost[gt_idx], k=dynamic_ks[gt_idx], largest=False)
        matching_matrix[gt_idx][pos_idx] = 1

    del topk_ious, dynamic_ks, pos_idx

    anchor_matching_gt = matching_matrix.sum(0)
    # deal with the case that one anchor matches multiple ground-truths
    if anchor_matching_gt.max() > 1:
        multiple_match_mask = anchor_matching_gt > 1
        _, cost_argmin = torch.min(cost[:, multiple_match_mask], dim=0)
        matching_matrix[:, multiple_match_mask] *= 0
        matching_matrix[cost_argmin, multiple_match_mask] = 1
    fg_mask_inboxes = anchor_matching_gt > 0
    num_fg = fg_mask_inboxes.sum().item()

    fg_mask[fg_mask.clone()] = fg_mask_inboxes

    matched_gt_inds = matching_matrix[:, fg_mask_inboxes].argmax(0)
    gt_matched_classes = gt_classes[matched_gt_inds]

    pred_ious_this_matching = (matching_matrix * pair_wise_ious).sum(0)[fg_mask_inboxes]
    return num_fg, gt_matched_classes, pred_ious_this_matching, matched_gt_inds


# YOLOX (Megvii-BaseDetection/YOLOX), yolox/models/yolo_head.py: YOLOXHead.dynamic_k_matching, fed as get_assignments
# feeds it (cost = cls cost + 3 * iou cost + 100000 * ~is_in_boxes_and_center); 4 gts, 30 anchors of which the
# 20 with index % 3 != 0 are in fg_mask (so the cost has 20 columns); IoUs made in [0, 1) from the raw input. The
# dynamically sized results are scattered back into fixed-size outputs through the updated fg_mask (per-anchor matched
# gt index, class and IoU; -1 / 0 elsewhere), returned with fg_mask and num_fg.
def yolox_dynamic_k_matching(
    raw_ious: f32[4, 20], raw_cls: f32[4, 20], in_center: bool[4, 20], gt_classes_raw: i64[4]
) -> tuple[bool[30], i64[30], i64[30], f32[30], i64[()]]:
    num_gt = 4
    fg_mask = torch.arange(30) % 3 != 0
    pair_wise_ious = (raw_ious + 1.0) * 0.5
    pair_wise_ious_loss = -torch.log(pair_wise_ious + 1e-8)
    pair_wise_cls_loss = raw_cls.abs() * 2.0
    cost = pair_wise_cls_loss + 3.0 * pair_wise_ious_loss + 100000.0 * (~in_center)
    gt_classes = (gt_classes_raw % 5).float()
    num_fg, gt_matched_classes, pred_ious_this_matching, matched_gt_inds = _yolox_dynamic_k_matching(
        cost, pair_wise_ious, gt_classes, num_gt, fg_mask)
    cls_out = torch.full((30,), -1, dtype=torch.int64)
    cls_out[fg_mask] = gt_matched_classes.long()
    iou_out = torch.zeros(30)
    iou_out[fg_mask] = pred_ious_this_matching
    gt_out = torch.full((30,), -1, dtype=torch.int64)
    gt_out[fg_mask] = matched_gt_inds
    return fg_mask, gt_out, cls_out, iou_out, torch.tensor(num_fg)


# gpt-fast (pytorch-labs/gpt-fast), generate.py: logits_to_probs
def _gf_logits_to_probs(logits, temperature: float = 1.0, top_k=None):
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    probs = torch.nn.functional.softmax(logits, dim=-1)
    return probs


# gpt-fast, generate.py: multinomial_sample_one_no_sync, with the exponential noise q given
def _gf_multinomial_sample_one_no_sync(probs_sort, q):
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


# gpt-fast (pytorch-labs/gpt-fast), generate.py: speculative_decode's acceptance part (see the program below)
def _gf_speculative_accept(draft_logits, target_logits_raw, u, noise, speculate_k=4):
    device = draft_logits.device
    sampling_kwargs = {"temperature": 0.8, "top_k": 6}
    draft_probs = [_gf_logits_to_probs(draft_logits[i], **sampling_kwargs) for i in range(speculate_k)]
    draft_tokens = torch.cat([torch.argmax(dp, dim=-1, keepdim=True) for dp in draft_probs])
    target_logits = target_logits_raw.unsqueeze(0)
    target_probs = _gf_logits_to_probs(target_logits[0], **sampling_kwargs)
    draft_probs = torch.stack(draft_probs)
    p = draft_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    q = target_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    accept_draft_prob = torch.minimum(torch.ones(()), q[:speculate_k] / p)
    rejected_locations = (u > accept_draft_prob).nonzero()

    if rejected_locations.shape[0] == 0:
        accept_length = speculate_k + 1
        last_token = _gf_multinomial_sample_one_no_sync(target_probs[-1], noise)
        return torch.cat([draft_tokens, last_token.long()]), accept_length
    else:
        accept_length = rejected_locations[0].item()
        p = draft_probs[accept_length]
        q = target_probs[accept_length]
        new = q - p
        new = torch.where(new > 0, new, 0.0)
        new = new / new.sum()
        next_token = _gf_multinomial_sample_one_no_sync(new, noise)
        return torch.cat([draft_tokens[:accept_length], next_token.long()]), accept_length


# gpt-fast (pytorch-labs/gpt-fast), generate.py: speculative_decode after the draft and target model calls
# (speculate_k 4, temperature 0.8, top_k 6, vocabulary 16): p and q gathered at the draft tokens, acceptance
# against torch.rand_like (here the uniform input u), then either the bonus token (all accepted; the draft model's
# extra step is left out) or the residual distribution's sample. The draft tokens are the argmax of the draft
# probabilities (the draft model's sampling is outside this function). The exponential noise of the two samplers is made
# from inputs (q = -log(1 - u)), so the sample is determined; the variable-length result is written into a
# fixed [5] buffer padded with -1 and returned with the accept length. Two cases: target logits near the draft's
# (most accepted) and independent ones.
def gptfast_speculative_accept(
    draft_raw: f32[4, 16], target_raw: f32[5, 16], u: f32[2, 4], noise_raw: f32[2, 16]
) -> tuple[i64[2, 5], i64[2]]:
    out = torch.full((2, 5), -1, dtype=torch.int64)
    lens = []
    draft_logits = draft_raw * 3.0
    noise = -torch.log(1 - (noise_raw + 1) / 2)
    cases = [torch.cat([draft_logits, draft_logits[-1:]]) + target_raw * 0.3, target_raw * 3.0]
    for c in range(2):
        tokens, accept_length = _gf_speculative_accept(draft_logits, cases[c], (u[c] + 1) / 2, noise[c])
        out[c, :tokens.shape[0]] = tokens
        lens.append(accept_length)
    return out, torch.tensor(lens)
