"""Held-out real code of issue 14's third round, ported from public code not seen before and measured before any fix:
ultralytics' task-aligned assigner, CenterNet's decoder, xLSTM's sLSTM and mLSTM steps, Hugging Face's eta sampling
warper and sliding-window cache, AdamP and MADGRAD. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# CenterNet (xingyizhou), src/lib/models/utils.py: _gather_feat and _transpose_and_gather_feat
def _gather_feat(feat, ind, mask=None):
    dim = feat.size(2)
    ind = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
    feat = feat.gather(1, ind)
    if mask is not None:
        mask = mask.unsqueeze(2).expand_as(feat)
        feat = feat[mask]
        feat = feat.view(-1, dim)
    return feat


def _transpose_and_gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).contiguous()
    feat = feat.view(feat.size(0), -1, feat.size(3))
    feat = _gather_feat(feat, ind)
    return feat


# CenterNet (xingyizhou), src/lib/models/decode.py: _nms and _topk
def _nms(heat, kernel=3):
    pad = (kernel - 1) // 2
    hmax = nn.functional.max_pool2d(heat, (kernel, kernel), stride=1, padding=pad)
    keep = (hmax == heat).float()
    return heat * keep


def _topk(scores, K=40):
    batch, cat, height, width = scores.size()
    topk_scores, topk_inds = torch.topk(scores.view(batch, cat, -1), K)
    topk_inds = topk_inds % (height * width)
    topk_ys = (topk_inds / width).int().float()
    topk_xs = (topk_inds % width).int().float()
    topk_score, topk_ind = torch.topk(topk_scores.view(batch, -1), K)
    topk_clses = (topk_ind / K).int()
    topk_inds = _gather_feat(topk_inds.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_ys = _gather_feat(topk_ys.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_xs = _gather_feat(topk_xs.view(batch, -1, 1), topk_ind).view(batch, K)
    return topk_score, topk_inds, topk_clses, topk_ys, topk_xs


# CenterNet (xingyizhou), src/lib/models/decode.py: ctdet_decode (reg given, cat_spec_wh False, K 10); the heatmap
# is the sigmoid of the raw head output, as ctdet's process() applies it
def centernet_ctdet_decode(hm: f32[1, 3, 16, 16], wh: f32[1, 2, 16, 16], reg: f32[1, 2, 16, 16]) -> f32[1, 10, 6]:
    heat = hm.sigmoid_()
    K = 10
    cat_spec_wh = False
    batch, cat, height, width = heat.size()
    heat = _nms(heat)
    scores, inds, clses, ys, xs = _topk(heat, K=K)
    if reg is not None:
        reg = _transpose_and_gather_feat(reg, inds)
        reg = reg.view(batch, K, 2)
        xs = xs.view(batch, K, 1) + reg[:, :, 0:1]
        ys = ys.view(batch, K, 1) + reg[:, :, 1:2]
    else:
        xs = xs.view(batch, K, 1) + 0.5
        ys = ys.view(batch, K, 1) + 0.5
    wh = _transpose_and_gather_feat(wh, inds)
    if cat_spec_wh:
        wh = wh.view(batch, K, cat, 2)
        clses_ind = clses.view(batch, K, 1, 1).expand(batch, K, 1, 2).long()
        wh = wh.gather(2, clses_ind).view(batch, K, 2)
    else:
        wh = wh.view(batch, K, 2)
    clses = clses.view(batch, K, 1).float()
    scores = scores.view(batch, K, 1)
    bboxes = torch.cat(
        [xs - wh[..., 0:1] / 2, ys - wh[..., 1:2] / 2, xs + wh[..., 0:1] / 2, ys + wh[..., 1:2] / 2], dim=2
    )
    detections = torch.cat([bboxes, scores, clses], dim=2)
    return detections


# xLSTM (NX-AI/xlstm), xlstm/blocks/mlstm/backends.py: recurrent_step_stabilized_simple (eps 1e-6), one decode step;
# the new states returned flat, not as a nested tuple (goldens store flat tuples)
def xlstm_mlstm_recurrent_step(
    c_state: f32[2, 4, 8, 8], n_state: f32[2, 4, 8, 1], m_state: f32[2, 4, 1, 1], q: f32[2, 4, 1, 8],
    k: f32[2, 4, 1, 8], v: f32[2, 4, 1, 8], igate_preact: f32[2, 4, 1, 1], fgate_preact: f32[2, 4, 1, 1]
) -> tuple[f32[2, 4, 1, 8], f32[2, 4, 8, 8], f32[2, 4, 8, 1], f32[2, 4, 1, 1]]:
    eps = 1e-6
    B, NH, S, DH = q.shape
    q, k, v = q.squeeze_(2).unsqueeze(-1), k.squeeze_(2).unsqueeze(-1), v.squeeze_(2).unsqueeze(-1)
    log_fg_act = torch.nn.functional.logsigmoid(fgate_preact)
    m_state_new = torch.max(log_fg_act + m_state, igate_preact)
    fg_act = torch.exp(log_fg_act + m_state - m_state_new)
    ig_act = torch.exp(igate_preact - m_state_new)
    k_scaled = k / math.sqrt(DH)
    c_state_new = fg_act * c_state + ig_act * (k_scaled @ v.transpose(-1, -2))
    n_state_new = fg_act * n_state + ig_act * k_scaled
    h_num = q.transpose(-1, -2) @ c_state_new
    qn_dotproduct = q.transpose(-1, -2) @ n_state_new
    max_val = torch.exp(-m_state_new)
    h_denom = torch.maximum(qn_dotproduct.abs(), max_val) + eps
    h = h_num / h_denom
    return h, c_state_new, n_state_new, m_state_new


# Hugging Face transformers, generation/logits_process.py: EtaLogitsWarper.__call__ (epsilon 0.05, min_tokens_to_keep
# 1, filter_value -inf; self.epsilon is torch.tensor(epsilon))
def hf_eta_warper(input_ids: i64[2, 6], scores: f32[2, 32]) -> f32[2, 32]:
    scores = scores * 4.0
    epsilon = torch.tensor(0.05)
    min_tokens_to_keep = 1
    filter_value = -float("Inf")
    probabilities = scores.softmax(dim=-1)
    entropy = torch.distributions.Categorical(logits=scores).entropy()
    eta = torch.min(epsilon, torch.sqrt(epsilon) * torch.exp(-entropy))[..., None]
    indices_to_remove = probabilities < eta
    top_k = min(min_tokens_to_keep, scores.size(-1))
    indices_to_remove = indices_to_remove & (scores < torch.topk(scores, top_k)[0][..., -1, None])
    scores_processed = scores.masked_fill(indices_to_remove, filter_value)
    return scores_processed
