"""Held-out real code, issue 14's nineteenth round: mmrotate's oriented-box coder, CenterNet's multi-person pose
decode; the Long Expressive Memory (LEM) network, flash-linear-attention's naive DPLR delta-rule recurrence,
torchrecurrent's peephole LSTM; text-generation-webui's tail-free and top-a warpers, vLLM's v1 sampler with logprob
gathering, torchscale's xPos attention at decode time; AdafactorBigVision; and, pending at first (in
tests/real_pending), Nero (a dict entry set to a tensor or to a float by a run-time `if`), FAdam (Python's `min` of a
0-d tensor and a number) and torchvision's FCOS target building (a write indexed by a boolean mask and by a selection
made with it). Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def _mmrotate_norm_angle(angle, angle_range):
    if angle_range == 'oc':
        return angle
    elif angle_range == 'le135':
        return (angle + np.pi / 4) % np.pi - np.pi / 4
    elif angle_range == 'le90':
        return (angle + np.pi / 2) % np.pi - np.pi / 2
    else:
        print('Not yet implemented.')


def _mmrotate_bbox2delta(proposals, gt, means=(0., 0., 0., 0., 0.), stds=(1., 1., 1., 1., 1.), angle_range='oc',
                         norm_factor=None, edge_swap=False, proj_xy=False):
    assert proposals.size() == gt.size()
    proposals = proposals.float()
    gt = gt.float()
    px, py, pw, ph, pa = proposals.unbind(dim=-1)
    gx, gy, gw, gh, ga = gt.unbind(dim=-1)

    if proj_xy:
        dx = (torch.cos(pa) * (gx - px) + torch.sin(pa) * (gy - py)) / pw
        dy = (-torch.sin(pa) * (gx - px) + torch.cos(pa) * (gy - py)) / ph
    else:
        dx = (gx - px) / pw
        dy = (gy - py) / ph

    if edge_swap:
        dtheta1 = _mmrotate_norm_angle(ga - pa, angle_range)
        dtheta2 = _mmrotate_norm_angle(ga - pa + np.pi / 2, angle_range)
        abs_dtheta1 = torch.abs(dtheta1)
        abs_dtheta2 = torch.abs(dtheta2)
        gw_regular = torch.where(abs_dtheta1 < abs_dtheta2, gw, gh)
        gh_regular = torch.where(abs_dtheta1 < abs_dtheta2, gh, gw)
        da = torch.where(abs_dtheta1 < abs_dtheta2, dtheta1, dtheta2)
        dw = torch.log(gw_regular / pw)
        dh = torch.log(gh_regular / ph)
    else:
        da = _mmrotate_norm_angle(ga - pa, angle_range)
        dw = torch.log(gw / pw)
        dh = torch.log(gh / ph)

    if norm_factor:
        da /= norm_factor * np.pi

    deltas = torch.stack([dx, dy, dw, dh, da], dim=-1)
    means = deltas.new_tensor(means).unsqueeze(0)
    stds = deltas.new_tensor(stds).unsqueeze(0)
    deltas = deltas.sub_(means).div_(stds)
    return deltas


def _mmrotate_delta2bbox(rois, deltas, means=(0., 0., 0., 0., 0.), stds=(1., 1., 1., 1., 1.), max_shape=None,
                         wh_ratio_clip=16 / 1000, add_ctr_clamp=False, ctr_clamp=32, angle_range='oc',
                         norm_factor=None, edge_swap=False, proj_xy=False):
    means = deltas.new_tensor(means).view(1, -1).repeat(1, deltas.size(1) // 5)
    stds = deltas.new_tensor(stds).view(1, -1).repeat(1, deltas.size(1) // 5)
    denorm_deltas = deltas * stds + means
    dx = denorm_deltas[:, 0::5]
    dy = denorm_deltas[:, 1::5]
    dw = denorm_deltas[:, 2::5]
    dh = denorm_deltas[:, 3::5]
    da = denorm_deltas[:, 4::5]
    if norm_factor:
        da *= norm_factor * np.pi
    # Compute center of each roi
    px = rois[:, 0].unsqueeze(1).expand_as(dx)
    py = rois[:, 1].unsqueeze(1).expand_as(dy)
    # Compute width/height of each roi
    pw = rois[:, 2].unsqueeze(1).expand_as(dw)
    ph = rois[:, 3].unsqueeze(1).expand_as(dh)
    # Compute rotated angle of each roi
    pa = rois[:, 4].unsqueeze(1).expand_as(da)
    dx_width = pw * dx
    dy_height = ph * dy
    max_ratio = np.abs(np.log(wh_ratio_clip))
    if add_ctr_clamp:
        dx_width = torch.clamp(dx_width, max=ctr_clamp, min=-ctr_clamp)
        dy_height = torch.clamp(dy_height, max=ctr_clamp, min=-ctr_clamp)
        dw = torch.clamp(dw, max=max_ratio)
        dh = torch.clamp(dh, max=max_ratio)
    else:
        dw = dw.clamp(min=-max_ratio, max=max_ratio)
        dh = dh.clamp(min=-max_ratio, max=max_ratio)
    # Use exp(network energy) to enlarge/shrink each roi
    gw = pw * dw.exp()
    gh = ph * dh.exp()
    # Use network energy to shift the center of each roi
    if proj_xy:
        gx = dx * pw * torch.cos(pa) - dy * ph * torch.sin(pa) + px
        gy = dx * pw * torch.sin(pa) + dy * ph * torch.cos(pa) + py
    else:
        gx = px + dx_width
        gy = py + dy_height
    # Compute angle
    ga = _mmrotate_norm_angle(pa + da, angle_range)
    if max_shape is not None:
        gx = gx.clamp(min=0, max=max_shape[1] - 1)
        gy = gy.clamp(min=0, max=max_shape[0] - 1)

    if edge_swap:
        w_regular = torch.where(gw > gh, gw, gh)
        h_regular = torch.where(gw > gh, gh, gw)
        theta_regular = torch.where(gw > gh, ga, ga + np.pi / 2)
        theta_regular = _mmrotate_norm_angle(theta_regular, angle_range)
        return torch.stack([gx, gy, w_regular, h_regular, theta_regular], dim=-1).view_as(deltas)
    else:
        return torch.stack([gx, gy, gw, gh, ga], dim=-1).view(deltas.size())


def _mmrotate_coder_encode(self, bboxes, gt_bboxes):
    assert bboxes.size(0) == gt_bboxes.size(0)
    assert bboxes.size(-1) == 5
    assert gt_bboxes.size(-1) == 5
    if self["angle_range"] in ['oc', 'le135', 'le90']:
        return _mmrotate_bbox2delta(bboxes, gt_bboxes, self["means"], self["stds"], self["angle_range"],
                                    self["norm_factor"], self["edge_swap"], self["proj_xy"])
    else:
        raise NotImplementedError


def _mmrotate_coder_decode(self, bboxes, pred_bboxes, max_shape=None, wh_ratio_clip=16 / 1000):
    assert pred_bboxes.size(0) == bboxes.size(0)
    if self["angle_range"] in ['oc', 'le135', 'le90']:
        return _mmrotate_delta2bbox(bboxes, pred_bboxes, self["means"], self["stds"], max_shape, wh_ratio_clip,
                                    self["add_ctr_clamp"], self["ctr_clamp"], self["angle_range"],
                                    self["norm_factor"], self["edge_swap"], self["proj_xy"])
    else:
        raise NotImplementedError


# mmrotate (open-mmlab/mmrotate, 0.x), mmrotate/core/bbox/coder/delta_xywha_rbbox_coder.py: DeltaXYWHAOBBoxCoder
# encode and decode, bbox2delta and delta2bbox, with mmrotate/core/bbox/transforms.py's norm_angle; angle_range
# 'le90', edge_swap True, proj_xy True (the rotated RetinaNet le90 configuration), target_stds (0.1, 0.1, 0.2, 0.2,
# 0.1); 12 anchors and ground truths (centres in [8, 56), sides in [4, 24), angles in [-pi/2, pi/2)), encoded, then
# two classes of predicted deltas decoded (N x 10) with max_shape (48, 64). The @mmcv.jit(coderize=True) decorator
# (identity when not tracing) is left out.
def mmrotate_delta_xywha_coder(
    anchor_raw: f32[12, 5], gt_raw: f32[12, 5], pred_deltas: f32[12, 10]
) -> tuple[f32[12, 5], f32[12, 10]]:
    def to_obb(raw):
        ctr = 32.0 + raw[:, :2] * 24.0
        wh = 14.0 + raw[:, 2:4] * 10.0
        ang = raw[:, 4:5] * (np.pi / 2) * 0.999
        return torch.cat([ctr, wh, ang], dim=1)

    coder = {"means": (0., 0., 0., 0., 0.), "stds": (0.1, 0.1, 0.2, 0.2, 0.1), "angle_range": "le90",
             "norm_factor": None, "edge_swap": True, "proj_xy": True, "add_ctr_clamp": False, "ctr_clamp": 32}
    anchors = to_obb(anchor_raw)
    gts = to_obb(gt_raw)
    deltas = _mmrotate_coder_encode(coder, anchors, gts)
    decoded = _mmrotate_coder_decode(coder, anchors, pred_deltas * 0.5, max_shape=(48, 64))
    return deltas, decoded


def _cn_gather_feat(feat, ind, mask=None):
    dim = feat.size(2)
    ind = ind.unsqueeze(2).expand(ind.size(0), ind.size(1), dim)
    feat = feat.gather(1, ind)
    if mask is not None:
        mask = mask.unsqueeze(2).expand_as(feat)
        feat = feat[mask]
        feat = feat.view(-1, dim)
    return feat


def _cn_transpose_and_gather_feat(feat, ind):
    feat = feat.permute(0, 2, 3, 1).contiguous()
    feat = feat.view(feat.size(0), -1, feat.size(3))
    feat = _cn_gather_feat(feat, ind)
    return feat


def _cn_nms(heat, kernel=3):
    pad = (kernel - 1) // 2

    hmax = nn.functional.max_pool2d(
        heat, (kernel, kernel), stride=1, padding=pad)
    keep = (hmax == heat).float()
    return heat * keep


def _cn_topk_channel(scores, K=40):
    batch, cat, height, width = scores.size()

    topk_scores, topk_inds = torch.topk(scores.view(batch, cat, -1), K)

    topk_inds = topk_inds % (height * width)
    topk_ys = (topk_inds / width).int().float()
    topk_xs = (topk_inds % width).int().float()

    return topk_scores, topk_inds, topk_ys, topk_xs


def _cn_topk(scores, K=40):
    batch, cat, height, width = scores.size()

    topk_scores, topk_inds = torch.topk(scores.view(batch, cat, -1), K)

    topk_inds = topk_inds % (height * width)
    topk_ys = (topk_inds / width).int().float()
    topk_xs = (topk_inds % width).int().float()

    topk_score, topk_ind = torch.topk(topk_scores.view(batch, -1), K)
    topk_clses = (topk_ind / K).int()
    topk_inds = _cn_gather_feat(
        topk_inds.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_ys = _cn_gather_feat(topk_ys.view(batch, -1, 1), topk_ind).view(batch, K)
    topk_xs = _cn_gather_feat(topk_xs.view(batch, -1, 1), topk_ind).view(batch, K)

    return topk_score, topk_inds, topk_clses, topk_ys, topk_xs


def _cn_multi_pose_decode(heat, wh, kps, reg=None, hm_hp=None, hp_offset=None, K=100):
    batch, cat, height, width = heat.size()
    num_joints = kps.shape[1] // 2
    # heat = torch.sigmoid(heat)
    # perform nms on heatmaps
    heat = _cn_nms(heat)
    scores, inds, clses, ys, xs = _cn_topk(heat, K=K)

    kps = _cn_transpose_and_gather_feat(kps, inds)
    kps = kps.view(batch, K, num_joints * 2)
    kps[..., ::2] += xs.view(batch, K, 1).expand(batch, K, num_joints)
    kps[..., 1::2] += ys.view(batch, K, 1).expand(batch, K, num_joints)
    if reg is not None:
        reg = _cn_transpose_and_gather_feat(reg, inds)
        reg = reg.view(batch, K, 2)
        xs = xs.view(batch, K, 1) + reg[:, :, 0:1]
        ys = ys.view(batch, K, 1) + reg[:, :, 1:2]
    else:
        xs = xs.view(batch, K, 1) + 0.5
        ys = ys.view(batch, K, 1) + 0.5
    wh = _cn_transpose_and_gather_feat(wh, inds)
    wh = wh.view(batch, K, 2)
    clses = clses.view(batch, K, 1).float()
    scores = scores.view(batch, K, 1)

    bboxes = torch.cat([xs - wh[..., 0:1] / 2,
                        ys - wh[..., 1:2] / 2,
                        xs + wh[..., 0:1] / 2,
                        ys + wh[..., 1:2] / 2], dim=2)
    if hm_hp is not None:
        hm_hp = _cn_nms(hm_hp)
        thresh = 0.1
        kps = kps.view(batch, K, num_joints, 2).permute(
            0, 2, 1, 3).contiguous()  # b x J x K x 2
        reg_kps = kps.unsqueeze(3).expand(batch, num_joints, K, K, 2)
        hm_score, hm_inds, hm_ys, hm_xs = _cn_topk_channel(hm_hp, K=K)  # b x J x K
        if hp_offset is not None:
            hp_offset = _cn_transpose_and_gather_feat(
                hp_offset, hm_inds.view(batch, -1))
            hp_offset = hp_offset.view(batch, num_joints, K, 2)
            hm_xs = hm_xs + hp_offset[:, :, :, 0]
            hm_ys = hm_ys + hp_offset[:, :, :, 1]
        else:
            hm_xs = hm_xs + 0.5
            hm_ys = hm_ys + 0.5

        mask = (hm_score > thresh).float()
        hm_score = (1 - mask) * -1 + mask * hm_score
        hm_ys = (1 - mask) * (-10000) + mask * hm_ys
        hm_xs = (1 - mask) * (-10000) + mask * hm_xs
        hm_kps = torch.stack([hm_xs, hm_ys], dim=-1).unsqueeze(
            2).expand(batch, num_joints, K, K, 2)
        dist = (((reg_kps - hm_kps) ** 2).sum(dim=4) ** 0.5)
        min_dist, min_ind = dist.min(dim=3)  # b x J x K
        hm_score = hm_score.gather(2, min_ind).unsqueeze(-1)  # b x J x K x 1
        min_dist = min_dist.unsqueeze(-1)
        min_ind = min_ind.view(batch, num_joints, K, 1, 1).expand(
            batch, num_joints, K, 1, 2)
        hm_kps = hm_kps.gather(3, min_ind)
        hm_kps = hm_kps.view(batch, num_joints, K, 2)
        l = bboxes[:, :, 0].view(batch, 1, K, 1).expand(batch, num_joints, K, 1)
        t = bboxes[:, :, 1].view(batch, 1, K, 1).expand(batch, num_joints, K, 1)
        r = bboxes[:, :, 2].view(batch, 1, K, 1).expand(batch, num_joints, K, 1)
        b = bboxes[:, :, 3].view(batch, 1, K, 1).expand(batch, num_joints, K, 1)
        mask = (hm_kps[..., 0:1] < l) + (hm_kps[..., 0:1] > r) + \
               (hm_kps[..., 1:2] < t) + (hm_kps[..., 1:2] > b) + \
               (hm_score < thresh) + (min_dist > (torch.max(b - t, r - l) * 0.3))
        mask = (mask > 0).float().expand(batch, num_joints, K, 2)
        kps = (1 - mask) * hm_kps + mask * kps
        kps = kps.permute(0, 2, 1, 3).contiguous().view(
            batch, K, num_joints * 2)
    detections = torch.cat([bboxes, scores, kps, clses], dim=2)

    return detections


# CenterNet (xingyizhou/CenterNet), src/lib/models/decode.py: multi_pose_decode with _nms, _topk, _topk_channel and
# src/lib/models/utils.py's _gather_feat and _transpose_and_gather_feat; batch 2, 2 classes, 4 joints, 10x10 output
# maps, K 4, with reg, hm_hp and hp_offset given. The heatmaps are sigmoid(4 * raw) (the network's sigmoid, done by
# the caller in CenterNet), so the 0.1 joint threshold both passes and fails; wh and kps are scaled to map units.
def centernet_multi_pose_decode(
    heat_raw: f32[2, 2, 10, 10], wh_raw: f32[2, 2, 10, 10], kps_raw: f32[2, 8, 10, 10], reg_raw: f32[2, 2, 10, 10],
    hm_hp_raw: f32[2, 4, 10, 10], hp_offset_raw: f32[2, 2, 10, 10]
) -> f32[2, 4, 14]:
    heat = torch.sigmoid(heat_raw * 4.0)
    wh = (wh_raw + 1.0) * 3.0
    kps = kps_raw * 3.0
    reg = (reg_raw + 1.0) * 0.5
    hm_hp = torch.sigmoid(hm_hp_raw * 4.0)
    hp_offset = (hp_offset_raw + 1.0) * 0.5
    return _cn_multi_pose_decode(heat, wh, kps, reg=reg, hm_hp=hm_hp, hp_offset=hp_offset, K=4)


def _lem_cell_forward(self, x, y, z):
    transformed_inp = F.linear(x, self["inp2hid_w"], self["inp2hid_b"])
    transformed_hid = F.linear(y, self["hid2hid_w"], self["hid2hid_b"])
    i_dt1, i_dt2, i_z, i_y = transformed_inp.chunk(4, 1)
    h_dt1, h_dt2, h_y = transformed_hid.chunk(3, 1)

    ms_dt_bar = self["dt"] * torch.sigmoid(i_dt1 + h_dt1)
    ms_dt = self["dt"] * torch.sigmoid(i_dt2 + h_dt2)

    z = (1. - ms_dt) * z + ms_dt * torch.tanh(i_y + h_y)
    y = (1. - ms_dt_bar) * y + ms_dt_bar * torch.tanh(F.linear(z, self["transform_z_w"], self["transform_z_b"]) + i_z)

    return y, z


def _lem_forward(self, input):
    ## initialize hidden states
    y = input.data.new(input.size(1), self["nhid"]).zero_()
    z = input.data.new(input.size(1), self["nhid"]).zero_()
    for x in input:
        y, z = _lem_cell_forward(self["cell"], x, y, z)
    out = F.linear(y, self["classifier_w"], self["classifier_b"])
    return out


# LEM, Long Expressive Memory (tk-rusch/LEM), sMNIST/network.py: LEMCell.forward and LEM.forward (ninp 3, nhid 8,
# nout 4, dt 1.0); sequence 6, batch 2. nn.Linear layers as F.linear on weight/bias entries of dicts; the weights
# are the raw inputs times 1/sqrt(nhid), the range of reset_parameters' uniform_(-std, std).
def lem_forward(
    x: f32[6, 2, 3], w_inp: f32[32, 3], b_inp: f32[32], w_hid: f32[24, 8], b_hid: f32[24], w_z: f32[8, 8],
    b_z: f32[8], w_cls: f32[4, 8], b_cls: f32[4]
) -> f32[2, 4]:
    std = 1.0 / math.sqrt(8)
    cell = {"dt": 1.0, "inp2hid_w": w_inp * std, "inp2hid_b": b_inp * std, "hid2hid_w": w_hid * std,
            "hid2hid_b": b_hid * std, "transform_z_w": w_z * std, "transform_z_b": b_z * std}
    model = {"nhid": 8, "cell": cell, "classifier_w": w_cls, "classifier_b": b_cls}
    return _lem_forward(model, x)


def _fla_dplr_recurrence(q, k, v, alpha, beta, gk, initial_state=None, output_final_state=True):
    orig_dtype = q.dtype
    b, h, l, d_k = q.shape
    q, k, v, beta, gk = (x.float() for x in [q, k, v, beta, gk])
    d_v = v.shape[-1]
    o = torch.zeros_like(v)
    S = torch.zeros(b, h, d_k, d_v).to(v)
    q = q * (d_k ** -0.5)

    if initial_state is not None:
        S += initial_state

    for i in range(l):
        _k = k[:, :, i]
        _q = q[:, :, i]
        _v = v[:, :, i]
        _alpha = alpha[:, :, i].clone()
        _beta = beta[:, :, i].clone()
        _kv = _k[..., None] * _v[..., None, :] + (S.clone() * _alpha[..., None]).sum(-2, keepdim=True) * _beta[..., None]
        S = S.clone() * gk[:, :, i].exp()[..., None] + _kv
        o[:, :, i] = torch.einsum('bhd,bhdm->bhm', _q, S)
    S = None if output_final_state is False else S
    return o.to(orig_dtype), S


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/generalized_delta_rule/dplr/naive.py:
# dplr_recurrence (S_t = S_t-1 * exp(gk_t) + S_t-1-weighted alpha_t beta_t^T term + k_t v_t^T) with an initial
# state; B 2, H 2, L 6, K 4, V 4. Inputs made as RWKV-7 makes them: kk = L2-normalised k, alpha = -kk,
# beta = kk * sigmoid(a), gk = -0.6 * exp(raw) (log decay in (-1.7, -0.2)).
def fla_dplr_recurrence(
    q: f32[2, 2, 6, 4], k: f32[2, 2, 6, 4], v: f32[2, 2, 6, 4], a_raw: f32[2, 2, 6, 4], gk_raw: f32[2, 2, 6, 4],
    h0: f32[2, 2, 4, 4]
) -> tuple[f32[2, 2, 6, 4], f32[2, 2, 4, 4]]:
    kk = F.normalize(k, dim=-1)
    alpha = -kk
    beta = kk * torch.sigmoid(a_raw)
    gk = -0.6 * torch.exp(gk_raw)
    return _fla_dplr_recurrence(q, k, v, alpha, beta, gk, initial_state=h0, output_final_state=True)


def _tr_check_states(self, state):
    if state is None:
        return None, None
    return state


def _tr_preprocess_states(self, inp, states):
    state, c_state = states
    is_batched = inp.dim() == 2
    if not is_batched:
        inp = inp.unsqueeze(0)
    if state is None:
        state = torch.zeros(inp.size(0), self["hidden_size"], dtype=inp.dtype, device=inp.device)
    if c_state is None:
        c_state = torch.zeros(inp.size(0), self["hidden_size"], dtype=inp.dtype, device=inp.device)
    if state.dim() == 1:
        state = state.unsqueeze(0)
        c_state = c_state.unsqueeze(0)
    return inp, state, c_state, is_batched


def _tr_peephole_cell_forward(self, inp, state=None):
    state, c_state = _tr_check_states(self, state)
    inp, state, c_state, is_batched = _tr_preprocess_states(self, inp, (state, c_state))

    weight_ih_i, weight_ih_f, weight_ih_c, weight_ih_o = self["weight_ih"].chunk(4, 0)
    weight_hh_i, weight_hh_f, weight_hh_c, weight_hh_o = self["weight_hh"].chunk(4, 0)
    weight_ph_i, weight_ph_f, weight_ph_o = self["weight_ph"].chunk(3, 0)
    bias_ih_i, bias_ih_f, bias_ih_c, bias_ih_o = self["bias_ih"].chunk(4, 0)
    bias_hh_i, bias_hh_f, bias_hh_c, bias_hh_o = self["bias_hh"].chunk(4, 0)

    i = inp @ weight_ih_i.t() + bias_ih_i + \
        state @ weight_hh_i.t() + c_state * weight_ph_i + bias_hh_i
    input_gate = self["gate_activation_fn"](i)
    f = inp @ weight_ih_f.t() + bias_ih_f + \
        state @ weight_hh_f.t() + bias_hh_f + \
        c_state * weight_ph_f
    forget_gate = self["gate_activation_fn"](f)
    c_hat = inp @ weight_ih_c.t() + bias_ih_c + \
        state @ weight_hh_c.t() + bias_hh_c
    cell_candidate = self["activation_fn"](c_hat)
    new_c = forget_gate * c_state + input_gate * cell_candidate
    o = inp @ weight_ih_o.t() + bias_ih_o + \
        state @ weight_hh_o.t() + bias_hh_o \
        + new_c * weight_ph_o
    output_gate = self["gate_activation_fn"](o)
    new_h = output_gate * self["activation_fn"](new_c)

    if not is_batched:
        new_h = new_h.squeeze(0)
        new_c = new_c.squeeze(0)

    return new_h, new_c


def _tr_double_state_layer_forward(self, inp, state=None):
    if self["batch_first"]:
        inp = inp.transpose(0, 1)

    seq_len, batch_size, _ = inp.size()

    if state is None:
        h = torch.zeros(
            self["num_layers"], batch_size, self["hidden_size"], dtype=inp.dtype, device=inp.device
        )
        c = torch.zeros_like(h)
        state = (h, c)

    outputs = torch.jit.annotate(List[torch.Tensor], [])

    for t in range(seq_len):
        x = inp[t]
        new_h = torch.jit.annotate(List[torch.Tensor], [])
        new_c = torch.jit.annotate(List[torch.Tensor], [])
        h_prev, c_prev = state

        for layer_idx, cell in enumerate(self["cells"]):
            h_i, c_i = _tr_peephole_cell_forward(cell, x, (h_prev[layer_idx], c_prev[layer_idx]))
            new_h.append(h_i)
            new_c.append(c_i)
            x = h_i
            if self["dropout_layer"] is not None and layer_idx < self["num_layers"] - 1:
                x = self["dropout_layer"](x)

        state = (torch.stack(new_h, dim=0), torch.stack(new_c, dim=0))
        outputs.append(x)

    out = torch.stack(outputs, dim=0)
    if self["batch_first"]:
        out = out.transpose(0, 1)
    return out, state


# torchrecurrent (MartinuzziFrancesco/torchrecurrent), torchrecurrent/cells/peepholelstm_cell.py: PeepholeLSTMCell.forward
# (activation tanh, gate activation sigmoid, peephole weights for i, f from c(t-1) and o from c(t)), run by
# torchrecurrent/base.py's DoubleStateRecurrentLayerBase.forward (torch.jit.annotate lists, per-layer state stacks);
# 2 layers, input 3, hidden 6, batch_first True, batch 2, sequence 5, zero initial state. The cell's
# _check_states / _validate_* / _preprocess_states helpers (in a base class the stored snapshot does not include)
# are written here to the behaviour the cell relies on (None -> zeros, 1-D -> batch of one); the validation checks are
# left out. Weights are raw inputs times 0.5 (the xavier range for these sizes), peephole weights raw.
def tr_peephole_lstm(
    x: f32[2, 5, 3], w_ih0: f32[24, 3], w_hh0: f32[24, 6], b_ih0: f32[24], b_hh0: f32[24], w_ph0: f32[18],
    w_ih1: f32[24, 6], w_hh1: f32[24, 6], b_ih1: f32[24], b_hh1: f32[24], w_ph1: f32[18]
) -> tuple[f32[2, 5, 6], f32[2, 2, 6], f32[2, 2, 6]]:
    cells = [
        {"hidden_size": 6, "weight_ih": w_ih0 * 0.5, "weight_hh": w_hh0 * 0.5, "bias_ih": b_ih0 * 0.1,
         "bias_hh": b_hh0 * 0.1, "weight_ph": w_ph0, "activation_fn": torch.tanh, "gate_activation_fn": torch.sigmoid},
        {"hidden_size": 6, "weight_ih": w_ih1 * 0.5, "weight_hh": w_hh1 * 0.5, "bias_ih": b_ih1 * 0.1,
         "bias_hh": b_hh1 * 0.1, "weight_ph": w_ph1, "activation_fn": torch.tanh, "gate_activation_fn": torch.sigmoid},
    ]
    layer = {"batch_first": True, "num_layers": 2, "hidden_size": 6, "cells": cells, "dropout_layer": None}
    out, (h, c) = _tr_double_state_layer_forward(layer, x)
    return out, h, c


def _tgw_tail_free(self, input_ids, scores):
    sorted_logits, sorted_indices = torch.sort(scores, descending=True)
    probs = sorted_logits.softmax(dim=-1)

    # Compute second derivative normalized CDF
    d2 = probs.diff().diff().abs()
    normalized_d2 = d2 / d2.sum(dim=-1, keepdim=True)
    normalized_d2_cdf = normalized_d2.cumsum(dim=-1)

    # Remove tokens with CDF value above the threshold (token with 0 are kept)
    sorted_indices_to_remove = normalized_d2_cdf > self["tfs"]

    # Centre the distribution around the cutoff as in the original implementation of the algorithm
    sorted_indices_to_remove = torch.cat(
        (
            torch.zeros(scores.shape[0], 1, dtype=torch.bool, device=scores.device),
            sorted_indices_to_remove,
            torch.ones(scores.shape[0], 1, dtype=torch.bool, device=scores.device),
        ),
        dim=-1,
    )

    if self["min_tokens_to_keep"] > 1:
        # Keep at least min_tokens_to_keep
        sorted_indices_to_remove[..., : self["min_tokens_to_keep"]] = 0

    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    scores = scores.masked_fill(indices_to_remove, self["filter_value"])
    return scores


def _tgw_top_a(self, input_ids, scores):
    sorted_logits, sorted_indices = torch.sort(scores, descending=True)
    probs = sorted_logits.softmax(dim=-1)

    # Remove tokens with probability less than top_a*(max(probs))^2 (token with 0 are kept)
    probs_max = probs[..., 0, None]
    sorted_indices_to_remove = probs < probs_max * probs_max * self["top_a"]

    if self["min_tokens_to_keep"] > 1:
        # Keep at least min_tokens_to_keep
        sorted_indices_to_remove[..., : self["min_tokens_to_keep"]] = 0

    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    scores = scores.masked_fill(indices_to_remove, self["filter_value"])
    return scores


# text-generation-webui (oobabooga/text-generation-webui), modules/sampler_hijack.py: TailFreeLogitsWarper.__call__
# (tfs 0.9) then TopALogitsWarper.__call__ (top_a 0.3), both with min_tokens_to_keep 2 (what get_logits_warper_patch
# passes when num_beams > 1) and filter_value -inf, as the patched warper list applies them, then the softmax the
# sampler takes; batch 3, vocabulary 32, logits 3 * raw.
def tgw_tail_free_top_a(input_ids: i64[3, 5], raw: f32[3, 32]) -> tuple[f32[3, 32], f32[3, 32]]:
    scores = raw * 3.0
    tfs = {"tfs": 0.9, "filter_value": -float("Inf"), "min_tokens_to_keep": 2}
    top_a = {"top_a": 0.3, "filter_value": -float("Inf"), "min_tokens_to_keep": 2}
    scores = _tgw_tail_free(tfs, input_ids, scores)
    scores = _tgw_top_a(top_a, input_ids, scores)
    return scores, torch.softmax(scores, dim=-1)


_VLLM_SAMPLING_EPS = 1e-5


def _vllm_batched_count_greater_than(x, values):
    return (x >= values).sum(-1)


def _vllm_min_p_apply(self, logits):
    if not self["min_p_count"]:
        return logits

    # Convert logits to probability distribution
    probability_values = torch.nn.functional.softmax(logits, dim=-1)
    # Calculate maximum probabilities per sequence
    max_probabilities = torch.amax(probability_values, dim=-1, keepdim=True)
    # Adjust min_p
    adjusted_min_p = max_probabilities.mul_(self["min_p"])
    # Identify valid tokens using threshold comparison
    invalid_token_mask = probability_values < adjusted_min_p
    # Apply mask using boolean indexing
    logits[invalid_token_mask] = -float('inf')
    return logits


def _vllm_logit_bias_apply(self, logits):
    if self["biases"]:
        logits[self["logits_slice"]] += self["bias_tensor"]
    return logits


def _vllm_apply_temperature(logits, temp, all_random):
    if not all_random:
        temp = torch.where(temp < _VLLM_SAMPLING_EPS, 1.0, temp)
    return logits.div_(temp.unsqueeze(dim=1))


def _vllm_random_sample(probs, q):
    # q.exponential_() replaced by the caller's exponential noise q
    return probs.div_(q).argmax(dim=-1).view(-1)


def _vllm_gather_logprobs(logprobs, num_logprobs, token_ids):
    assert token_ids.dtype == torch.int64
    # Find the topK values.
    topk_logprobs, topk_indices = torch.topk(logprobs, num_logprobs, dim=-1)

    # Get with the logprob of the prompt or sampled token.
    token_ids = token_ids.unsqueeze(-1)
    token_logprobs = logprobs.gather(-1, token_ids)

    # Compute the ranks of the actual token.
    token_ranks = _vllm_batched_count_greater_than(logprobs, token_logprobs)

    # Concatenate together with the topk.
    indices = torch.cat((token_ids, topk_indices), dim=1)
    logprobs = torch.cat((token_logprobs, topk_logprobs), dim=1)

    # Use int32 to reduce the tensor size.
    indices = indices.to(torch.int32)

    return indices, logprobs, token_ranks


def _vllm_sample(md, logits, q):
    assert not (md["all_greedy"] and md["all_random"])
    if md["all_random"]:
        greedy_sampled = None
    else:
        greedy_sampled = logits.argmax(dim=-1).view(-1)

    # Apply temperature.
    logits = _vllm_apply_temperature(logits, md["temperature"], md["all_random"])

    # Apply logits processors that only apply to random sampling (argmax invariant)
    for processor in md["argmax_invariant"]:
        logits = _vllm_min_p_apply(processor, logits)

    # Apply top_k and/or top_p (neither given: the sampler's softmax and random sample)
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    random_sampled = _vllm_random_sample(probs, q)

    if greedy_sampled is None:
        return random_sampled

    sampled = torch.where(
        md["temperature"] < _VLLM_SAMPLING_EPS,
        greedy_sampled,
        random_sampled,
        out=greedy_sampled,  # Reuse tensor
    )
    return sampled


# vLLM (vllm-project/vllm), vllm/v1/sample/sampler.py: Sampler.forward with logprobs_mode "raw_logprobs"
# (compute_logprobs before processing), apply_logits_processors with logits_processor/builtin.py's
# LogitBiasLogitsProcessor.apply (biases {0: {3: 2.0, 7: -1.5}, 2: {5: 4.0}} as int32 index tensors), no penalties,
# sample with greedy_sample, apply_temperature (temperatures 0, 0.7, 1.0, 1.5: a mixed batch), MinPLogitsProcessor.apply
# (min_p 0, 0.1, 0.05, 0.2), no top-k/top-p so TopKTopPSampler's random_sample, the torch.where(..., out=) merge, and
# gather_logprobs (max_num_logprobs 3) with ops/logprobs.py's batched_count_greater_than (the torch.compile
# decorator left out). Batch 4, vocabulary 24. Deviation: random_sample's q.exponential_() is replaced by exponential
# noise made from the input u (q = -log(1 - (u + 1) / 2)), so that the sample is determined.
def vllm_v1_sampler(
    logits_raw: f32[4, 24], u: f32[4, 24]
) -> tuple[i32[4, 1], i32[4, 4], f32[4, 4], i64[4]]:
    logits = (logits_raw * 4.0).to(torch.float32)
    q = -torch.log(1.0 - (u + 1.0) * 0.5)
    md = {
        "all_greedy": False, "all_random": False, "max_num_logprobs": 3,
        "temperature": torch.tensor([0.0, 0.7, 1.0, 1.5]),
        "argmax_invariant": [{"min_p_count": 3, "min_p": torch.tensor([0.0, 0.1, 0.05, 0.2]).unsqueeze(1)}],
        "non_argmax_invariant": [{
            "biases": {0: {3: 2.0, 7: -1.5}, 2: {5: 4.0}},
            "bias_tensor": torch.tensor([2.0, -1.5, 4.0], dtype=torch.float32),
            "logits_slice": (torch.tensor([0, 0, 2], dtype=torch.int32), torch.tensor([3, 7, 5], dtype=torch.int32)),
        }],
    }
    num_logprobs = md["max_num_logprobs"]
    raw_logprobs = logits.log_softmax(dim=-1, dtype=torch.float32)

    for processor in md["non_argmax_invariant"]:
        logits = _vllm_logit_bias_apply(processor, logits)

    sampled = _vllm_sample(md, logits, q)
    sampled = sampled.long()
    indices, logprobs, ranks = _vllm_gather_logprobs(raw_logprobs, num_logprobs, token_ids=sampled)
    sampled = sampled.to(torch.int32)
    return sampled.unsqueeze(-1), indices, logprobs, ranks


def _ts_fixed_pos_embedding(x):
    seq_len, dim = x.shape
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim) / dim))
    sinusoid_inp = (
        torch.einsum("i , j -> i j", torch.arange(0, seq_len, dtype=torch.float), inv_freq).to(x)
    )
    return torch.sin(sinusoid_inp), torch.cos(sinusoid_inp)


def _ts_rotate_every_two(x):
    x1 = x[:, :, ::2]
    x2 = x[:, :, 1::2]
    x = torch.stack((-x2, x1), dim=-1)
    return x.flatten(-2)  # in einsum notation: rearrange(x, '... d j -> ... (d j)')\


def _ts_duplicate_interleave(m):
    dim0 = m.shape[0]
    m = m.view(-1, 1)  # flatten the matrix
    m = m.repeat(1, 2)  # repeat all elements into the 2nd dimension
    m = m.view(dim0, -1)  # reshape into a matrix, interleaving the copy
    return m


def _ts_apply_rotary_pos_emb(x, sin, cos, scale=1):
    sin, cos = map(lambda t: _ts_duplicate_interleave(t * scale), (sin, cos))
    # einsum notation for lambda t: repeat(t[offset:x.shape[1]+offset,:], "n d -> () n () (d j)", j=2)
    return (x * cos) + (_ts_rotate_every_two(x) * sin)


def _ts_xpos_forward(self, x, offset=0, downscale=False):
    length = x.shape[1]
    min_pos = -(length + offset) // 2
    max_pos = length + offset + min_pos
    scale = self["scale"] ** torch.arange(min_pos, max_pos, 1).to(self["scale"]).div(self["scale_base"])[:, None]
    sin, cos = _ts_fixed_pos_embedding(scale)

    if scale.shape[0] > length:
        scale = scale[-length:]
        sin = sin[-length:]
        cos = cos[-length:]

    if downscale:
        scale = 1 / scale

    x = _ts_apply_rotary_pos_emb(x, sin, cos, scale)
    return x


def _ts_mha_forward(self, query, key, value, incremental_state=None, key_padding_mask=None, attn_mask=None,
                    rel_pos=None):
    bsz, tgt_len, embed_dim = query.size()
    src_len = tgt_len
    assert embed_dim == self["embed_dim"], f"query dim {embed_dim} != {self['embed_dim']}"

    key_bsz, src_len, _ = key.size()
    assert key_bsz == bsz, f"{query.size(), key.size()}"
    assert value is not None
    assert bsz, src_len == value.shape[:2]

    q = F.linear(query, self["q_w"], self["q_b"])
    k = F.linear(key, self["k_w"], self["k_b"])
    v = F.linear(value, self["v_w"], self["v_b"])
    q *= self["scaling"]

    q = q.view(bsz, tgt_len, self["num_heads"], self["head_dim"]).transpose(1, 2)
    k = k.view(bsz, src_len, self["num_heads"], self["head_dim"]).transpose(1, 2)
    v = v.view(bsz, src_len, self["num_heads"], self["head_dim"]).transpose(1, 2)
    q = q.reshape(bsz * self["num_heads"], tgt_len, self["head_dim"])
    k = k.reshape(bsz * self["num_heads"], src_len, self["head_dim"])
    v = v.reshape(bsz * self["num_heads"], src_len, self["head_dim"])

    if incremental_state is not None:
        if "prev_key" in incremental_state:
            prev_key = incremental_state["prev_key"].view(
                bsz * self["num_heads"], -1, self["head_dim"]
            )
            prev_value = incremental_state["prev_value"].view(
                bsz * self["num_heads"], -1, self["head_dim"]
            )
            k = torch.cat([prev_key, k], dim=1)
            v = torch.cat([prev_value, v], dim=1)
        incremental_state["prev_key"] = k.view(
            bsz, self["num_heads"], -1, self["head_dim"]
        )
        incremental_state["prev_value"] = v.view(
            bsz, self["num_heads"], -1, self["head_dim"]
        )
        src_len = k.size(1)

    if self["xpos"] is not None:
        if incremental_state is not None:
            offset = src_len - 1
        else:
            offset = 0
        k = _ts_xpos_forward(self["xpos"], k, offset=0, downscale=True)
        q = _ts_xpos_forward(self["xpos"], q, offset=offset, downscale=False)

    attn_weights = torch.bmm(q, k.transpose(1, 2))

    if attn_mask is not None:
        attn_weights = torch.nan_to_num(attn_weights)
        attn_mask = attn_mask.unsqueeze(0)
        attn_weights += attn_mask

    if key_padding_mask is not None:
        attn_weights = attn_weights.view(bsz, self["num_heads"], tgt_len, src_len)
        attn_weights = attn_weights.masked_fill(
            key_padding_mask.unsqueeze(1).unsqueeze(2).to(torch.bool),
            float("-inf"),
        )
        attn_weights = attn_weights.view(bsz * self["num_heads"], tgt_len, src_len)

    if rel_pos is not None:
        rel_pos = rel_pos.view(attn_weights.size())
        attn_weights = attn_weights + rel_pos

    attn_weights = F.softmax(attn_weights, dim=-1, dtype=torch.float32).type_as(
        attn_weights
    )
    attn_probs = attn_weights  # dropout 0

    attn = torch.bmm(attn_probs, v)
    attn = attn.transpose(0, 1).reshape(tgt_len, bsz, embed_dim).transpose(0, 1)

    attn = F.linear(attn, self["out_w"], self["out_b"])
    attn_weights = attn_weights.view(
        bsz, self["num_heads"], tgt_len, src_len
    ).transpose(1, 0)

    return attn, attn_weights


# torchscale (microsoft/torchscale), torchscale/component/multihead_attention.py: MultiheadAttention.forward
# (self-attention, xpos_rel_pos True, scale_base 512, no subln, dropout 0) with
# torchscale/component/xpos_relative_position.py's XPOS, fixed_pos_embedding, rotate_every_two,
# duplicate_interleave and apply_rotary_pos_emb; embed 16, 2 heads (head_dim 8), batch 2; a 5-token prefill with the
# decoder's causal mask (triu of -inf, diagonal 1) and an incremental_state dict, then 2 one-token decode steps
# (k/v concatenated onto prev_key/prev_value, q's xPos offset src_len - 1). nn.Linear layers as F.linear on dict
# entries (weights 0.3 * raw); the MultiwayWrapper is the identity here.
def torchscale_xpos_decode(
    x_prompt: f32[2, 5, 16], x_new: f32[2, 2, 16], wq: f32[16, 16], wk: f32[16, 16], wv: f32[16, 16],
    wo: f32[16, 16], bq: f32[16], bk: f32[16], bv: f32[16], bo: f32[16]
) -> tuple[f32[2, 5, 16], f32[2, 1, 16], f32[2, 1, 16], f32[2, 2, 1, 7], f32[2, 2, 7, 8]]:
    head_dim = 8
    xpos = {"head_dim": head_dim, "scale_base": 512,
            "scale": (torch.arange(0, head_dim, 2) + 0.4 * head_dim) / (1.4 * head_dim)}
    mha = {"embed_dim": 16, "num_heads": 2, "head_dim": head_dim, "scaling": head_dim ** -0.5,
           "q_w": wq * 0.3, "k_w": wk * 0.3, "v_w": wv * 0.3, "out_w": wo * 0.3,
           "q_b": bq * 0.1, "k_b": bk * 0.1, "v_b": bv * 0.1, "out_b": bo * 0.1, "xpos": xpos}
    incremental_state = {}
    slen = x_prompt.size(1)
    self_attn_mask = torch.triu(torch.zeros([slen, slen]).float().fill_(float("-inf")), 1)
    out_prompt, _ = _ts_mha_forward(mha, x_prompt, x_prompt, x_prompt, incremental_state=incremental_state,
                                    attn_mask=self_attn_mask)
    outs = []
    w = None
    for t in range(x_new.size(1)):
        xt = x_new[:, t:t + 1]
        o, w = _ts_mha_forward(mha, xt, xt, xt, incremental_state=incremental_state)
        outs.append(o)
    return out_prompt, outs[0], outs[1], w, incremental_state["prev_key"]


def _abv_get_scalar_dtype():
    """Get the scalar dtype that the optimizer uses for state"""
    return torch.float64


def _abv_factored_dims(shape, factored, min_dim_size_to_factor):
    if not factored or len(shape) < 2:
        return None
    sorted_dims = sorted(((x, i) for i, x in enumerate(shape)))
    if shape[sorted_dims[-2][1]] < min_dim_size_to_factor:
        return None
    return int(sorted_dims[-2][1]), int(sorted_dims[-1][1])


def _abv_single_tensor_adafactor(params, grads, exp_avg_sq_rs, exp_avg_sq_cs, exp_avg_sqs, exp_avgs, state_steps, *,
                                 beta2_decay, beta2_cap, min_dim_size_to_factor, eps, lr, weight_decay, momentum,
                                 momentum_dtype, clipping_threshold, unscaled_wd):
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg_sq_r = exp_avg_sq_rs[i]
        exp_avg_sq_c = exp_avg_sq_cs[i]
        exp_avg_sq = exp_avg_sqs[i]
        exp_avg = exp_avgs[i]
        step_t = state_steps[i]

        # Update step
        step_t += 1
        beta2_t = min(beta2_cap, 1.0 - float(step_t) ** (-beta2_decay))
        one_minus_beta2_t = 1 - beta2_t

        grad_sqr = torch.square(grad) + eps
        if exp_avg_sq is None:
            # factorized second moment
            d1, d0 = _abv_factored_dims(grad.shape, True, min_dim_size_to_factor=min_dim_size_to_factor)
            exp_avg_sq_r.lerp_(grad_sqr.mean(dim=d0, keepdim=True), one_minus_beta2_t)
            exp_avg_sq_c.lerp_(grad_sqr.mean(dim=d1, keepdim=True), one_minus_beta2_t)

            reduced_d1 = d1 - 1 if d1 > d0 else d1
            row_col_mean = exp_avg_sq_r.mean(dim=reduced_d1, keepdim=True)
            row_factor = (exp_avg_sq_r / row_col_mean).rsqrt()
            col_factor = exp_avg_sq_c.rsqrt()

            update = grad * row_factor * col_factor
        else:
            # non-factorized second moment
            assert exp_avg_sq_r is None and exp_avg_sq_c is None
            exp_avg_sq.lerp_(grad_sqr, one_minus_beta2_t)
            update = grad * exp_avg_sq.rsqrt()

        # Clip by RMS value
        if clipping_threshold is not None:
            denom = (update.norm(2) / ((update.numel() ** 0.5) / clipping_threshold)).clamp_(max=1.0)
            update.div_(denom)

        # Apply momentum (in different dtype)
        if momentum is not None and exp_avg is not None:
            if momentum_dtype != grad.dtype:
                exp_avg.lerp_(update.to(momentum_dtype), 1 - momentum)  # ema
                update = exp_avg.to(grad.dtype)
            else:
                exp_avg.lerp_(update, 1 - momentum)  # ema
                update = exp_avg.clone()

        # Scale by learning rate
        update.mul_(lr)

        # Perform weight decay
        if weight_decay != 0:
            if unscaled_wd:
                # match big vision impl, 'fully decoupled' decay w/o LR scaling
                param.mul_(1. - weight_decay)
            else:
                # match typical pytorch behaviour for decoupled decay, eg adamw where wd is scaled by LR
                param.mul_(1. - lr * weight_decay)

        # Update parameters
        param.add_(update, alpha=-1.0)


def _abv_step(self, param_groups, grads_list):
    loss = None
    for group in param_groups:
        params_with_grad = []
        grads = []
        exp_avg_sq_rs = []
        exp_avg_sq_cs = []
        exp_avg_sqs = []
        state_steps = []
        exp_avgs = []  # For momentum

        for pi, (p, p_grad) in enumerate(zip(group['params'], grads_list)):
            if p_grad is None:
                continue

            params_with_grad.append(p)
            grads.append(p_grad)

            state = self["state"].setdefault(pi, {})

            if len(state) == 0:
                # NOTE step on CPU, probably need some more though to make capturable
                state['step'] = torch.tensor(0.0, dtype=_abv_get_scalar_dtype())

                shape = p_grad.shape
                factored_dims = _abv_factored_dims(
                    shape,
                    factored=True,
                    min_dim_size_to_factor=self["defaults"]['min_dim_size_to_factor']
                )

                if factored_dims is not None:
                    d1, d0 = factored_dims
                    row_shape = list(p_grad.shape)
                    row_shape[d0] = 1
                    col_shape = list(p_grad.shape)
                    col_shape[d1] = 1
                    state['exp_avg_sq_r'] = p_grad.new_zeros(row_shape)
                    state['exp_avg_sq_c'] = p_grad.new_zeros(col_shape)
                else:
                    state['exp_avg_sq'] = torch.zeros_like(p_grad, memory_format=torch.preserve_format)

                if self["defaults"]['momentum'] is not None:
                    state['exp_avg'] = torch.zeros_like(p_grad, dtype=self["defaults"]['momentum_dtype'])

            state_steps.append(state['step'])
            exp_avg_sq_rs.append(state.get('exp_avg_sq_r', None))
            exp_avg_sq_cs.append(state.get('exp_avg_sq_c', None))
            exp_avg_sqs.append(state.get('exp_avg_sq', None))
            exp_avgs.append(state.get('exp_avg', None))

        _abv_single_tensor_adafactor(
            params=params_with_grad,
            grads=grads,
            exp_avg_sq_rs=exp_avg_sq_rs,
            exp_avg_sq_cs=exp_avg_sq_cs,
            exp_avg_sqs=exp_avg_sqs,
            exp_avgs=exp_avgs,
            state_steps=state_steps,
            beta2_decay=group['decay_rate'],
            beta2_cap=group['beta2_cap'],
            min_dim_size_to_factor=group['min_dim_size_to_factor'],
            eps=group['eps'],
            lr=group['lr'],
            weight_decay=group['weight_decay'],
            momentum=group['momentum'],
            momentum_dtype=group['momentum_dtype'],
            clipping_threshold=group['clipping_threshold'],
            unscaled_wd=group['unscaled_wd'],
        )

    return loss


# timm (huggingface/pytorch-image-models), timm/optim/adafactor_bv.py: AdafactorBigVision.step, _factored_dims and
# _single_tensor_adafactor (lr 1e-2, min_dim_size_to_factor 4 instead of 32 so the [6, 8] weight is factored, decay
# rate 0.8, beta2_cap 0.999, momentum 0.9 with momentum_dtype 'float32' instead of the default bfloat16, eps 1e-30,
# weight_decay 1e-2 (lr-scaled), clipping_threshold 1.0), three steps on a [6, 8] weight (factored second moment) and
# an [8] bias (full second moment) in one group; the state step is a float64 0-d tensor as in the original;
# p.grad is each step's gradient slice, self.state (keyed by the parameter tensor in the original) a dict keyed by the
# parameter's index; @torch.no_grad and the closure left out.
def timm_adafactor_bv_steps(w: f32[6, 8], b: f32[8], gw: f32[3, 6, 8], gb: f32[3, 8]) -> tuple[f32[6, 8], f32[8]]:
    defaults = dict(lr=1e-2, min_dim_size_to_factor=4, decay_rate=0.8, decay_offset=0, beta2_cap=0.999,
                    momentum=0.9, momentum_dtype=torch.float32, eps=1e-30, weight_decay=1e-2,
                    clipping_threshold=1.0, unscaled_wd=False, foreach=False)
    group = dict(defaults)
    group["params"] = [w, b]
    opt = {"state": {}, "defaults": defaults}
    for t in range(3):
        _abv_step(opt, [group], [gw[t], gb[t]])
    return w, b


def _nero_neuron_norm(x):
    if x.dim() > 1:
        view_shape = [x.shape[0]] + [1] * (x.dim() - 1)
        x = x.view(x.shape[0], -1)
        return x.norm(dim=1).view(*view_shape)
    else:
        return x.abs()


def _nero_neuron_mean(x):
    if x.dim() > 1:
        view_shape = [x.shape[0]] + [1] * (x.dim() - 1)
        x = x.view(x.shape[0], -1)
        return x.mean(dim=1).view(*view_shape)
    else:
        raise Exception("neuron_mean not defined on 1D tensors.")


def _nero_init(self, param_groups):
    for group in param_groups:
        for pi, p in enumerate(group['params']):
            if self["constraints"] and p.dim() > 1:
                p.data -= _nero_neuron_mean(p)
                p.data /= _nero_neuron_norm(p)
            state = self["state"].setdefault(pi, {})
            state['step'] = 0
            state['exp_avg_sq'] = torch.zeros_like(_nero_neuron_norm(p))
            state['scale'] = _nero_neuron_norm(p).mean()
            if state['scale'] == 0.0:
                state['scale'] = 0.01


def _nero_step(self, param_groups, grads):
    loss = None
    for group in param_groups:
        for pi, (p, g) in enumerate(zip(group['params'], grads)):
            if g is None:
                continue
            state = self["state"][pi]

            state['step'] += 1
            bias_correction = 1 - self["beta"] ** state['step']
            state['exp_avg_sq'] = self["beta"] * state['exp_avg_sq'] + (1 - self["beta"]) * _nero_neuron_norm(g) ** 2

            grad_normed = g / (state['exp_avg_sq'] / bias_correction).sqrt()
            grad_normed[torch.isnan(grad_normed)] = 0

            p.data -= group['lr'] * state['scale'] * grad_normed

            if self["constraints"] and p.dim() > 1:
                p.data -= _nero_neuron_mean(p)
                p.data /= _nero_neuron_norm(p)

    return loss


# Nero (jxbz/nero), nero.py: neuron_norm, neuron_mean, Nero.__init__'s state set-up (constraints True: weights
# centred and normalised per neuron; scale = mean neuron norm, 0.01 if zero) and Nero.step, three steps (lr 0.01,
# beta 0.999) on a [6, 5] weight and a [6] bias; p.grad is each step's gradient slice, self.state (keyed by the
# parameter tensor in the original) a dict keyed by the parameter's index in its group.
def nero_steps(w: f32[6, 5], b: f32[6], gw: f32[3, 6, 5], gb: f32[3, 6]) -> tuple[f32[6, 5], f32[6]]:
    nero = {"beta": 0.999, "constraints": True, "state": {}}
    param_groups = [{"params": [w, b], "lr": 0.01}]
    _nero_init(nero, param_groups)
    for t in range(3):
        _nero_step(nero, param_groups, [gw[t], gb[t]])
    return w, b


def _fadam_debias_beta(beta: float, step: int) -> float:
    beta_n: float = math.pow(beta, step)
    return (beta_n - beta) / (beta_n - 1.0)  # fmt: skip


def _fadam_step(self, param_groups, grads):
    loss = None
    for group in param_groups:
        if 'step' in group:
            group['step'] += 1
        else:
            group['step'] = 1

        beta1, beta2 = group['betas']

        curr_beta2: float = _fadam_debias_beta(beta2, group['step'])

        for pi, (p, grad) in enumerate(zip(group['params'], grads)):
            if grad is None:
                continue

            state = self["state"].setdefault(pi, {})
            if len(state) == 0:
                state['momentum'] = torch.zeros_like(p, dtype=self["momentum_dtype"])
                state['fim'] = torch.zeros_like(p, dtype=self["fim_dtype"])

            momentum, fim = state['momentum'], state['fim']
            fim.mul_(curr_beta2).addcmul_(grad, grad, value=1.0 - curr_beta2)

            rms_grad = grad.pow(2).mean().sqrt_()
            curr_eps = min(rms_grad, 1) * group['eps']

            fim_base = fim.pow(group['p']).add_(curr_eps)
            grad_nat = grad / fim_base

            rms = grad_nat.pow(2).mean().sqrt_()
            divisor = max(1, rms) / group['clip']
            grad_nat.div_(divisor)

            momentum.mul_(beta1).add_(grad_nat, alpha=1.0 - beta1)

            grad_weights = p / fim_base

            rms = torch.pow(grad_weights, 2).mean().sqrt_()
            divisor = max(1, rms) / group['clip']
            grad_weights.div_(divisor)

            grad_weights.mul_(group['weight_decay']).add_(momentum)

            p.add_(grad_weights, alpha=-group['lr'])

    return loss


# FAdam (Hwang, 2024), pytorch_optimizer (kozistr/pytorch_optimizer), pytorch_optimizer/optimizer/fadam.py:
# FAdam.step with BaseOptimizer.debias_beta (lr 1e-2 instead of 1e-3, betas (0.9, 0.999), weight_decay 0.1, clip 1.0,
# p 0.5, eps 1e-8, float32 momentum and fim), three steps on a [4, 6] weight and a [6] bias in one group; p.grad is
# each step's gradient slice (scaled by 0.1 so the rms of the gradient is below 1 and min(rms_grad, 1) takes the
# tensor), self.state (keyed by the parameter tensor in the original) a dict keyed by the parameter's index; @torch.no_grad
# and the closure left out.
def fadam_steps(w: f32[4, 6], b: f32[6], gw: f32[3, 4, 6], gb: f32[3, 6]) -> tuple[f32[4, 6], f32[6]]:
    opt = {"state": {}, "momentum_dtype": torch.float32, "fim_dtype": torch.float32}
    param_groups = [{"params": [w, b], "lr": 1e-2, "betas": (0.9, 0.999), "weight_decay": 0.1, "clip": 1.0,
                     "p": 0.5, "eps": 1e-8}]
    for t in range(3):
        _fadam_step(opt, param_groups, [gw[t] * 0.1, gb[t] * 0.1])
    return w, b


def _tv_sigmoid_focal_loss(inputs, targets, alpha: float = 0.25, gamma: float = 2, reduction: str = "none"):
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)

    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss

    if reduction == "none":
        pass
    elif reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


def _tv_box_linear_encode(self, reference_boxes, proposals):
    # get the center of reference_boxes
    reference_boxes_ctr_x = 0.5 * (reference_boxes[..., 0] + reference_boxes[..., 2])
    reference_boxes_ctr_y = 0.5 * (reference_boxes[..., 1] + reference_boxes[..., 3])

    # get box regression transformation deltas
    target_l = reference_boxes_ctr_x - proposals[..., 0]
    target_t = reference_boxes_ctr_y - proposals[..., 1]
    target_r = proposals[..., 2] - reference_boxes_ctr_x
    target_b = proposals[..., 3] - reference_boxes_ctr_y

    targets = torch.stack((target_l, target_t, target_r, target_b), dim=-1)

    if self["normalize_by_size"]:
        reference_boxes_w = reference_boxes[..., 2] - reference_boxes[..., 0]
        reference_boxes_h = reference_boxes[..., 3] - reference_boxes[..., 1]
        reference_boxes_size = torch.stack(
            (reference_boxes_w, reference_boxes_h, reference_boxes_w, reference_boxes_h), dim=-1
        )
        targets = targets / reference_boxes_size
    return targets


def _tv_fcos_match(self, targets, anchors, num_anchors_per_level):
    matched_idxs = []
    for anchors_per_image, targets_per_image in zip(anchors, targets):
        if targets_per_image["boxes"].numel() == 0:
            matched_idxs.append(
                torch.full((anchors_per_image.size(0),), -1, dtype=torch.int64, device=anchors_per_image.device)
            )
            continue

        gt_boxes = targets_per_image["boxes"]
        gt_centers = (gt_boxes[:, :2] + gt_boxes[:, 2:]) / 2  # Nx2
        anchor_centers = (anchors_per_image[:, :2] + anchors_per_image[:, 2:]) / 2  # N
        anchor_sizes = anchors_per_image[:, 2] - anchors_per_image[:, 0]
        # center sampling: anchor point must be close enough to gt center.
        pairwise_match = (anchor_centers[:, None, :] - gt_centers[None, :, :]).abs_().max(
            dim=2
        ).values < self["center_sampling_radius"] * anchor_sizes[:, None]
        # compute pairwise distance between N points and M boxes
        x, y = anchor_centers.unsqueeze(dim=2).unbind(dim=1)  # (N, 1)
        x0, y0, x1, y1 = gt_boxes.unsqueeze(dim=0).unbind(dim=2)  # (1, M)
        pairwise_dist = torch.stack([x - x0, y - y0, x1 - x, y1 - y], dim=2)  # (N, M)

        # anchor point must be inside gt
        pairwise_match &= pairwise_dist.min(dim=2).values > 0

        # each anchor is only responsible for certain scale range.
        lower_bound = anchor_sizes * 4
        lower_bound[: num_anchors_per_level[0]] = 0
        upper_bound = anchor_sizes * 8
        upper_bound[-num_anchors_per_level[-1] :] = float("inf")
        pairwise_dist = pairwise_dist.max(dim=2).values
        pairwise_match &= (pairwise_dist > lower_bound[:, None]) & (pairwise_dist < upper_bound[:, None])

        # match the GT box with minimum area, if there are multiple GT matches
        gt_areas = (gt_boxes[:, 2] - gt_boxes[:, 0]) * (gt_boxes[:, 3] - gt_boxes[:, 1])  # N
        pairwise_match = pairwise_match.to(torch.float32) * (1e8 - gt_areas[None, :])
        min_values, matched_idx = pairwise_match.max(dim=1)  # R, per-anchor match
        matched_idx[min_values < 1e-5] = -1  # unmatched anchors are assigned -1

        matched_idxs.append(matched_idx)
    return matched_idxs


def _tv_fcos_head_targets(self, targets, cls_logits, anchors, matched_idxs):
    all_gt_classes_targets = []
    all_gt_boxes_targets = []
    for targets_per_image, matched_idxs_per_image in zip(targets, matched_idxs):
        if len(targets_per_image["labels"]) == 0:
            gt_classes_targets = targets_per_image["labels"].new_zeros((len(matched_idxs_per_image),))
            gt_boxes_targets = targets_per_image["boxes"].new_zeros((len(matched_idxs_per_image), 4))
        else:
            gt_classes_targets = targets_per_image["labels"][matched_idxs_per_image.clip(min=0)]
            gt_boxes_targets = targets_per_image["boxes"][matched_idxs_per_image.clip(min=0)]
        gt_classes_targets[matched_idxs_per_image < 0] = -1  # backgroud
        all_gt_classes_targets.append(gt_classes_targets)
        all_gt_boxes_targets.append(gt_boxes_targets)

    all_gt_boxes_targets, all_gt_classes_targets, anchors = (
        torch.stack(all_gt_boxes_targets),
        torch.stack(all_gt_classes_targets),
        torch.stack(anchors),
    )

    # compute foregroud
    foregroud_mask = all_gt_classes_targets >= 0
    num_foreground = foregroud_mask.sum().item()

    # classification loss
    gt_classes_targets = torch.zeros_like(cls_logits)
    gt_classes_targets[foregroud_mask, all_gt_classes_targets[foregroud_mask]] = 1.0
    loss_cls = _tv_sigmoid_focal_loss(cls_logits, gt_classes_targets, reduction="sum")

    bbox_reg_targets = _tv_box_linear_encode(self["box_coder"], anchors, all_gt_boxes_targets)

    if len(bbox_reg_targets) == 0:
        gt_ctrness_targets = bbox_reg_targets.new_zeros(bbox_reg_targets.size()[:-1])
    else:
        left_right = bbox_reg_targets[:, :, [0, 2]]
        top_bottom = bbox_reg_targets[:, :, [1, 3]]
        gt_ctrness_targets = torch.sqrt(
            (left_right.min(dim=-1)[0] / left_right.max(dim=-1)[0])
            * (top_bottom.min(dim=-1)[0] / top_bottom.max(dim=-1)[0])
        )
    return loss_cls / max(1, num_foreground), all_gt_classes_targets, gt_ctrness_targets, foregroud_mask


# torchvision (pytorch/vision), torchvision/models/detection/fcos.py: FCOS.compute_loss (the per-image matching with
# center_sampling_radius 1.5 and the per-level scale ranges) and FCOSHead.compute_loss up to its boolean-mask
# selections (gt class/box targets, the one-hot write gt_classes_targets[foregroud_mask, ...] = 1.0,
# ops/focal_loss.py's sigmoid_focal_loss (alpha 0.25, gamma 2, "sum") divided by max(1, num_foreground), and the
# centerness targets through _utils.py's BoxLinearCoder.encode (normalize_by_size)). 2 images, 3 ground-truth boxes
# each, 4 classes; anchors as torchvision's AnchorGenerator makes them for FCOS (one square anchor per location,
# sizes 8 and 16 on 8x8 and 4x4 grids at strides 8 and 16), built inline. Deviations: the GIoU and centerness BCE
# losses (on pred_boxes[foregroud_mask], data-dependent shapes) are left out; the centerness targets are returned
# with background anchors zeroed by torch.where (their raw values are NaN or meaningless).
def tv_fcos_match_targets(
    gt_raw: f32[2, 3, 4], labels: i64[2, 3], cls_logits: f32[2, 80, 4]
) -> tuple[i64[2, 80], f32[()], i64[2, 80], f32[2, 80]]:
    anchors_one = []
    for size, stride, grid in ((8, 8, 8), (16, 16, 4)):
        shifts = torch.arange(0, grid, dtype=torch.float32) * stride
        shift_y, shift_x = torch.meshgrid(shifts, shifts, indexing="ij")
        shift_x = shift_x.reshape(-1)
        shift_y = shift_y.reshape(-1)
        shifts4 = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)
        base = torch.tensor([[-size / 2, -size / 2, size / 2, size / 2]]).round()
        anchors_one.append((shifts4.view(-1, 1, 4) + base.view(1, -1, 4)).reshape(-1, 4))
    num_anchors_per_level = [a.size(0) for a in anchors_one]
    anchors_img = torch.cat(anchors_one)
    anchors = [anchors_img, anchors_img.clone()]

    # boxes: top-left in [0, 40), sides in [6, 96)
    xy0 = (gt_raw[..., :2] + 1.0) * 20.0
    wh = 6.0 + (gt_raw[..., 2:] + 1.0) * 45.0
    boxes = torch.cat([xy0, xy0 + wh], dim=-1)
    targets = [{"boxes": boxes[i], "labels": labels[i] % 4} for i in range(2)]

    fcos = {"center_sampling_radius": 1.5, "box_coder": {"normalize_by_size": True}}
    matched_idxs = _tv_fcos_match(fcos, targets, anchors, num_anchors_per_level)
    loss_cls, gt_classes, ctrness, fg = _tv_fcos_head_targets(fcos, targets, cls_logits, anchors, matched_idxs)
    ctrness = torch.where(fg, ctrness, torch.zeros_like(ctrness))
    return torch.stack(matched_idxs), loss_cls, gt_classes, ctrness
