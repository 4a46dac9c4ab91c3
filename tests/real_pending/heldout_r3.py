"""Held-out real code of issue 14's third round, ported from public code not seen before and measured before any fix:
ultralytics' task-aligned assigner, CenterNet's decoder, xLSTM's sLSTM and mLSTM steps, Hugging Face's eta sampling
warper and sliding-window cache, AdamP and MADGRAD. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# ultralytics, ultralytics/utils/tal.py: TaskAlignedAssigner.select_candidates_in_gts (eps 1e-9)
def _select_candidates_in_gts(xy_centers, gt_bboxes, eps=1e-9):
    n_anchors = xy_centers.shape[0]
    bs, n_boxes, _ = gt_bboxes.shape
    lt, rb = gt_bboxes.view(-1, 1, 4).chunk(2, 2)
    bbox_deltas = torch.cat((xy_centers[None] - lt, rb - xy_centers[None]), dim=2).view(bs, n_boxes, n_anchors, -1)
    return bbox_deltas.amin(3).gt_(eps)


# ultralytics, ultralytics/utils/tal.py: TaskAlignedAssigner.select_highest_overlaps
def _select_highest_overlaps(mask_pos, overlaps, n_max_boxes: int):
    fg_mask = mask_pos.sum(-2)
    if fg_mask.max() > 1:
        mask_multi_gts = (fg_mask.unsqueeze(1) > 1).expand(-1, n_max_boxes, -1)
        max_overlaps_idx = overlaps.argmax(1)
        is_max_overlaps = torch.zeros(mask_pos.shape, dtype=mask_pos.dtype, device=mask_pos.device)
        is_max_overlaps.scatter_(1, max_overlaps_idx.unsqueeze(1), 1)
        mask_pos = torch.where(mask_multi_gts, is_max_overlaps, mask_pos).float()
        fg_mask = mask_pos.sum(-2)
    target_gt_idx = mask_pos.argmax(-2)
    return target_gt_idx, fg_mask, mask_pos


# ultralytics, ultralytics/utils/tal.py: the two helpers above as TaskAlignedAssigner.get_pos_mask and _forward chain
# them (anchor points of an 8x8 grid of stride 8; mask_pos is the in-box mask, the top-k metric left out)
def tal_assign_candidates(
    raw_boxes: f32[2, 5, 4], overlaps: f32[2, 5, 64]
) -> tuple[i64[2, 64], f32[2, 64], f32[2, 5, 64]]:
    xy = (raw_boxes[..., :2] + 1.0) * 24.0
    wh = raw_boxes[..., 2:].abs() * 32.0 + 4.0
    gt_bboxes = torch.cat([xy, xy + wh], -1)
    sx = torch.arange(8, dtype=torch.float32) + 0.5
    sy, sx = torch.meshgrid(sx, sx, indexing="ij")
    anc_points = torch.stack((sx, sy), -1).view(-1, 2) * 8.0
    mask_in_gts = _select_candidates_in_gts(anc_points, gt_bboxes)
    mask_pos = mask_in_gts * 1.0
    return _select_highest_overlaps(mask_pos, overlaps.abs(), 5)


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


# xLSTM (NX-AI/xlstm), xlstm/blocks/slstm/src/vanilla/slstm.py: slstm_forward_pointwise, run over 5 steps with the
# recurrent projection Ry = y @ R as slstm_forward does it (one head)
def xlstm_slstm_steps(
    Wx: f32[5, 2, 32], R: f32[8, 32], b: f32[1, 32], states: f32[4, 2, 8]
) -> tuple[f32[4, 2, 8], f32[4, 2, 8]]:
    states = states.clone()
    states[1:3] = 0.0
    states[3] = 0.0
    for t in range(Wx.shape[0]):
        Ry = states[0] @ R
        raw = Wx[t] + Ry + b
        _, c, n, m = torch.unbind(states.view(4, states.shape[1], -1), dim=0)
        iraw, fraw, zraw, oraw = torch.unbind(raw.view(raw.shape[0], 4, -1), dim=1)
        logfplusm = m + torch.nn.functional.logsigmoid(fraw)
        if torch.all(n == 0.0):
            mnew = iraw
        else:
            mnew = torch.max(iraw, logfplusm)
        ogate = torch.sigmoid(oraw)
        igate = torch.exp(iraw - mnew)
        fgate = torch.exp(logfplusm - mnew)
        cnew = fgate * c + igate * torch.tanh(zraw)
        nnew = fgate * n + igate
        ynew = ogate * cnew / nnew
        states, gates = torch.stack((ynew, cnew, nnew, mnew), dim=0), torch.stack((igate, fgate, zraw, ogate), dim=0)
    return states, gates


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


# Hugging Face transformers, cache_utils.py: SlidingWindowLayer.update (max_cache_len 6), a prompt of 4 positions
# then 4 decode steps: index_copy_ while the window has room, roll and write at index -1 once it is full
def hf_sliding_window_cache(
    keys: f32[1, 2, 6, 8], values: f32[1, 2, 6, 8], prompt_k: f32[1, 2, 4, 8], prompt_v: f32[1, 2, 4, 8],
    new_k: f32[4, 1, 2, 1, 8], new_v: f32[4, 1, 2, 1, 8]
) -> tuple[f32[1, 2, 6, 8], f32[1, 2, 6, 8]]:
    max_cache_len = 6
    cumulative_length = 0
    keys.zero_()
    values.zero_()
    steps = [(prompt_k, prompt_v, torch.arange(4))]
    for i in range(4):
        steps.append((new_k[i], new_v[i], torch.tensor([4 + i])))
    for key_states, value_states, cache_position in steps:
        is_full = cumulative_length >= max_cache_len
        cumulative_length += key_states.shape[-2]
        if cache_position.shape[0] > max_cache_len:
            keys.copy_(key_states[:, :, -max_cache_len:, :])
            values.copy_(value_states[:, :, -max_cache_len:, :])
            continue
        if is_full:
            new_keys = keys.roll(-1, dims=-2)
            new_values = values.roll(-1, dims=-2)
            index = torch.tensor([-1], dtype=int)
            new_keys[:, :, index] = key_states
            new_values[:, :, index] = value_states
            keys.copy_(new_keys)
            values.copy_(new_values)
        else:
            try:
                keys.index_copy_(2, cache_position, key_states)
                values.index_copy_(2, cache_position, value_states)
            except NotImplementedError:
                keys[:, :, cache_position] = key_states
                values[:, :, cache_position] = value_states
    return keys, values


# AdamP (clovaai/AdamP), adamp/adamp.py: AdamP._channel_view, _layer_view, _cosine_similarity, _projection and
# AdamP.step for one 2-D and one 1-D parameter (betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, delta 0.1,
# wd_ratio 0.1, nesterov False), state at step 2; the methods as nested functions, and the parameters returned
# (PyTorch's version counter does not see the writes through `p.data`, so its goldens would not record them)
def adamp_step(
    w0: f32[8, 16], w1: f32[16], g0: f32[8, 16], g1: f32[16], m0: f32[8, 16], m1: f32[16], v0: f32[8, 16],
    v1: f32[16], lr: float = 1e-3
) -> tuple[f32[8, 16], f32[16]]:
    def _channel_view(x):
        return x.view(x.size(0), -1)

    def _layer_view(x):
        return x.view(1, -1)

    def _cosine_similarity(x, y, eps, view_func):
        x = view_func(x)
        y = view_func(y)
        return F.cosine_similarity(x, y, dim=1, eps=eps).abs_()

    def _projection(p, grad, perturb, delta, wd_ratio, eps):
        wd = 1
        expand_size = [-1] + [1] * (len(p.shape) - 1)
        for view_func in [_channel_view, _layer_view]:
            cosine_sim = _cosine_similarity(grad, p.data, eps, view_func)
            if cosine_sim.max() < delta / math.sqrt(view_func(p.data).size(1)):
                p_n = p.data / view_func(p.data).norm(dim=1).view(expand_size).add_(eps)
                perturb -= p_n * view_func(p_n * perturb).sum(dim=1).view(expand_size)
                wd = wd_ratio
                return perturb, wd
        return perturb, wd

    beta1, beta2, eps, weight_decay, delta, wd_ratio_, nesterov = 0.9, 0.999, 1e-8, 1e-2, 0.1, 0.1, False
    for p, grad, exp_avg, exp_avg_sq in zip([w0, w1], [g0, g1], [m0, m1], [v0, v1]):
        exp_avg_sq.abs_()
        step = 2
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
        step_size = lr / bias_correction1
        if nesterov:
            perturb = (beta1 * exp_avg + (1 - beta1) * grad) / denom
        else:
            perturb = exp_avg / denom
        wd_ratio = 1
        if len(p.shape) > 1:
            perturb, wd_ratio = _projection(p, grad, perturb, delta, wd_ratio_, eps)
        if weight_decay > 0:
            p.data.mul_(1 - lr * weight_decay * wd_ratio)
        p.data.add_(perturb, alpha=-step_size)
    return w0, w1


# MADGRAD (facebookresearch/madgrad), madgrad/madgrad.py: MADGRAD.step, dense gradients (lr 1e-2, momentum 0.9,
# weight_decay 0, eps 1e-6), two steps from an empty state (the gradient scaled per step as a stand-in for new
# gradients); the parameters returned, as their writes go through `p.data`
def madgrad_steps(
    w0: f32[8, 16], w1: f32[16], g0: f32[8, 16], g1: f32[16]
) -> tuple[f32[8, 16], f32[16], f32[8, 16], f32[16]]:
    params = [w0, w1]
    grads = [g0, g1]
    state = {}
    eps, lr, decay, momentum = 1e-6, 1e-2, 0.0, 0.9
    k = 0
    ck = 1 - momentum
    for _ in range(2):
        lamb = lr * math.pow(k + 1, 0.5)
        for i, p in enumerate(params):
            grad = grads[i] * (1.0 + 0.5 * k)
            if i not in state:
                state[i] = {}
            st = state[i]
            if "grad_sum_sq" not in st:
                st["grad_sum_sq"] = torch.zeros_like(p.data).detach()
                st["s"] = torch.zeros_like(p.data).detach()
                if momentum != 0:
                    st["x0"] = torch.clone(p.data).detach()
            grad_sum_sq = st["grad_sum_sq"]
            s = st["s"]
            if momentum == 0:
                rms = grad_sum_sq.pow(1 / 3).add_(eps)
                x0 = p.data.addcdiv(s, rms, value=1)
            else:
                x0 = st["x0"]
            grad_sum_sq.addcmul_(grad, grad, value=lamb)
            rms = grad_sum_sq.pow(1 / 3).add_(eps)
            s.data.add_(grad, alpha=lamb)
            if momentum == 0:
                p.data.copy_(x0.addcdiv(s, rms, value=-1))
            else:
                z = x0.addcdiv(s, rms, value=-1)
                p.data.mul_(1 - ck).add_(z, alpha=ck)
        k += 1
    return state[0]["s"], state[1]["grad_sum_sq"], w0, w1
