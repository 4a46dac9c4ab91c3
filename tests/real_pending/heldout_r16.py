"""Held-out real code, issue 14's sixteenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout16.py): torchvision's keypoint R-CNN loss (`torch.uint8`, `F.cross_entropy`, `torch.where(cond)`),
Ultralytics' TaskAlignedAssigner (`torch.int8`), and
torch-optimizer's SWATS
(`Tensor.allclose`; a dict changed under an `if` on a run-time value); Hugging Face's DoLa layer contrast (a list
indexed by `.item()`), pending at first, runs now and is in corpus/real/heldout16.py, and Detectron2's RotatedBoxes
clip (`torch.where(cond)`) in corpus/real/detection_where.py. Inputs arrive uniform in
[-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _keypoints_to_heatmap(keypoints, rois, heatmap_size):
    offset_x = rois[:, 0]
    offset_y = rois[:, 1]
    scale_x = heatmap_size / (rois[:, 2] - rois[:, 0])
    scale_y = heatmap_size / (rois[:, 3] - rois[:, 1])

    offset_x = offset_x[:, None]
    offset_y = offset_y[:, None]
    scale_x = scale_x[:, None]
    scale_y = scale_y[:, None]

    x = keypoints[..., 0]
    y = keypoints[..., 1]

    x_boundary_inds = x == rois[:, 2][:, None]
    y_boundary_inds = y == rois[:, 3][:, None]

    x = (x - offset_x) * scale_x
    x = x.floor().long()
    y = (y - offset_y) * scale_y
    y = y.floor().long()

    x[x_boundary_inds] = heatmap_size - 1
    y[y_boundary_inds] = heatmap_size - 1

    valid_loc = (x >= 0) & (y >= 0) & (x < heatmap_size) & (y < heatmap_size)
    vis = keypoints[..., 2] > 0
    valid = (valid_loc & vis).long()

    lin_ind = y * heatmap_size + x
    heatmaps = lin_ind * valid

    return heatmaps, valid


def _keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, keypoint_matched_idxs):
    # type: (Tensor, List[Tensor], List[Tensor], List[Tensor]) -> Tensor
    N, K, H, W = keypoint_logits.shape
    if H != W:
        raise ValueError(
            f"keypoint_logits height and width (last two elements of shape) should be equal. Instead got H = {H} and W = {W}"
        )
    discretization_size = H
    heatmaps = []
    valid = []
    for proposals_per_image, gt_kp_in_image, midx in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        kp = gt_kp_in_image[midx]
        heatmaps_per_image, valid_per_image = _keypoints_to_heatmap(kp, proposals_per_image, discretization_size)
        heatmaps.append(heatmaps_per_image.view(-1))
        valid.append(valid_per_image.view(-1))

    keypoint_targets = torch.cat(heatmaps, dim=0)
    valid = torch.cat(valid, dim=0).to(dtype=torch.uint8)
    valid = torch.where(valid)[0]

    # torch.mean (in binary_cross_entropy_with_logits) doesn't
    # accept empty tensors, so handle it separately
    if keypoint_targets.numel() == 0 or len(valid) == 0:
        return keypoint_logits.sum() * 0

    keypoint_logits = keypoint_logits.view(N * K, H * W)

    keypoint_loss = F.cross_entropy(keypoint_logits[valid], keypoint_targets[valid])
    return keypoint_loss


# torchvision (pytorch/vision), torchvision/models/detection/roi_heads.py: keypointrcnn_loss with keypoints_to_heatmap
# (two images with 5 and 4 proposals, 3 gt instances of 4 keypoints each, heatmap 14x14); proposals and keypoints
# made integer-valued from the raw inputs (proposal corners in [0, 24), keypoints in [0, 24), visibility from a
# threshold), so that some keypoints fall outside their proposal and some lie exactly on its right or bottom edge
def tv_keypointrcnn_loss(
    keypoint_logits: f32[9, 4, 14, 14], raw_props1: f32[5, 4], raw_props2: f32[4, 4], raw_kps1: f32[3, 4, 3],
    raw_kps2: f32[3, 4, 3], midx1: i64[5], midx2: i64[4]
) -> f32[()]:
    proposals = []
    for raw in (raw_props1, raw_props2):
        x1 = (raw[:, 0] * 6 + 6).floor()
        y1 = (raw[:, 1] * 6 + 6).floor()
        x2 = x1 + (raw[:, 2].abs() * 8).floor() + 4
        y2 = y1 + (raw[:, 3].abs() * 8).floor() + 4
        proposals.append(torch.stack([x1, y1, x2, y2], dim=1))
    gt_keypoints = []
    for raw in (raw_kps1, raw_kps2):
        kx = (raw[..., 0] * 12 + 12).floor()
        ky = (raw[..., 1] * 12 + 12).floor()
        kv = (raw[..., 2] > -0.5).float() * 2
        gt_keypoints.append(torch.stack([kx, ky, kv], dim=-1))
    matched_idxs = [midx1 % 3, midx2 % 3]
    return _keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, matched_idxs)


def _tal_select_topk_candidates(self, metrics, topk_mask=None):
    # (b, max_num_obj, topk)
    topk_metrics, topk_idxs = torch.topk(metrics, self["topk"], dim=-1, largest=True)
    if topk_mask is None:
        topk_mask = (topk_metrics.max(-1, keepdim=True)[0] > self["eps"]).expand_as(topk_idxs)
    # (b, max_num_obj, topk)
    topk_idxs.masked_fill_(~topk_mask, 0)

    # (b, max_num_obj, topk, h*w) -> (b, max_num_obj, h*w)
    count_tensor = torch.zeros(metrics.shape, dtype=torch.int8, device=topk_idxs.device)
    ones = torch.ones_like(topk_idxs[:, :, :1], dtype=torch.int8, device=topk_idxs.device)
    for k in range(self["topk"]):
        # Expand topk_idxs for each value of k and add 1 at the specified positions
        count_tensor.scatter_add_(-1, topk_idxs[:, :, k : k + 1], ones)
    # Filter invalid bboxes
    count_tensor.masked_fill_(count_tensor > 1, 0)

    return count_tensor.to(metrics.dtype)


def _tal_get_targets(self, gt_labels, gt_bboxes, target_gt_idx, fg_mask):
    # Assigned target labels, (b, 1)
    batch_ind = torch.arange(end=self["bs"], dtype=torch.int64, device=gt_labels.device)[..., None]
    target_gt_idx = target_gt_idx + batch_ind * self["n_max_boxes"]  # (b, h*w)
    target_labels = gt_labels.long().flatten()[target_gt_idx]  # (b, h*w)

    # Assigned target boxes, (b, max_num_obj, 4) -> (b, h*w, 4)
    target_bboxes = gt_bboxes.view(-1, gt_bboxes.shape[-1])[target_gt_idx]

    # Assigned target scores
    target_labels.clamp_(0)

    # 10x faster than F.one_hot()
    target_scores = torch.zeros(
        (target_labels.shape[0], target_labels.shape[1], self["num_classes"]),
        dtype=torch.int64,
        device=target_labels.device,
    )  # (b, h*w, 80)
    target_scores.scatter_(2, target_labels.unsqueeze(-1), 1)

    fg_scores_mask = fg_mask[:, :, None].repeat(1, 1, self["num_classes"])  # (b, h*w, 80)
    target_scores = torch.where(fg_scores_mask > 0, target_scores, 0)

    return target_labels, target_bboxes, target_scores


# Ultralytics (ultralytics/ultralytics), ultralytics/utils/tal.py: TaskAlignedAssigner.select_topk_candidates (topk 4,
# with the topk_mask get_pos_mask passes, mask_gt expanded) and get_targets (5 classes), chained as get_pos_mask,
# select_highest_overlaps (its single-assignment path: fg_mask and argmax) and _forward chain them; batch 2, 3 gt
# slots (padding slots where mask_gt is 0), 24 anchors; the assigner as a dict of its attributes; the align metric
# made positive from the raw input and the in-gts mask left out
def ultralytics_tal_topk_targets(
    raw_metric: f32[2, 3, 24], raw_mask_gt: f32[2, 3, 1], gt_labels: i64[2, 3, 1], gt_bboxes: f32[2, 3, 4]
) -> tuple[i64[2, 24], f32[2, 24, 4], i64[2, 24, 5], f32[2, 24]]:
    self = {"topk": 4, "num_classes": 5, "bs": 2, "n_max_boxes": 3, "eps": 1e-9}
    mask_gt = (raw_mask_gt > -0.4).float()
    align_metric = raw_metric.abs() * mask_gt
    mask_topk = _tal_select_topk_candidates(self, align_metric, topk_mask=mask_gt.expand(-1, -1, self["topk"]).bool())
    mask_pos = mask_topk * mask_gt
    fg_mask = mask_pos.sum(-2)
    target_gt_idx = mask_pos.argmax(-2)
    target_labels, target_bboxes, target_scores = _tal_get_targets(self, gt_labels % 5, gt_bboxes, target_gt_idx, fg_mask)
    return target_labels, target_bboxes, target_scores, fg_mask


# SWATS (Keskar and Socher, 2017), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/swats.py: SWATS.step
# (lr 1e-2, betas (0.9, 0.999), eps 1e-3, weight decay 1e-3, amsgrad off, nesterov off, adamd_bias_correction off),
# four steps on two parameters; p.grad is each step's gradient slice, which the weight decay updates in place as the
# original does to w.grad.data; the group and per-parameter state as dicts (the Adam-to-SGD switch is tested every
# step and, with these gradients, not taken)
def swats_steps(p1: f32[6, 5], p2: f32[7], grads1: f32[4, 6, 5], grads2: f32[4, 7]) -> tuple[f32[6, 5], f32[7]]:
    group = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-3, phase='ADAM', weight_decay=1e-3, amsgrad=False,
                 nesterov=False, adamd_bias_correction=False, params=[p1, p2])
    states = [{}, {}]
    for it in range(4):
        grads = [grads1[it], grads2[it]]
        for j, w in enumerate(group['params']):
            grad = grads[j]

            amsgrad = group['amsgrad']

            state = states[j]

            # state initialization
            if len(state) == 0:
                state['step'] = 0
                # exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # moving average for the non-orthogonal projection scaling
                state['exp_avg2'] = w.new(1).fill_(0)
                if amsgrad:
                    # maintains max of all exp. moving avg.
                    # of sq. grad. values
                    state['max_exp_avg_sq'] = torch.zeros_like(
                        w.data, memory_format=torch.preserve_format
                    )

            exp_avg, exp_avg2, exp_avg_sq = (
                state['exp_avg'],
                state['exp_avg2'],
                state['exp_avg_sq'],
            )

            if amsgrad:
                max_exp_avg_sq = state['max_exp_avg_sq']
            beta1, beta2 = group['betas']

            state['step'] += 1

            if group['weight_decay'] != 0:
                grad.add_(w.data, alpha=group['weight_decay'])

            # if its SGD phase, take an SGD update and continue
            if group['phase'] == 'SGD':
                if 'momentum_buffer' not in state:
                    buf = state['momentum_buffer'] = torch.clone(
                        grad
                    ).detach()
                else:
                    buf = state['momentum_buffer']
                    buf.mul_(beta1).add_(grad)
                    grad = buf

                grad.mul_(1 - beta1)
                if group['nesterov']:
                    grad.add_(buf, alpha=beta1)

                w.data.add_(grad, alpha=-group['lr'])
                continue

            # decay the first and second moment running average coefficient
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if amsgrad:
                # maintains the maximum of all 2nd
                # moment running avg. till now
                torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                # use the max. for normalizing running avg. of gradient
                denom = max_exp_avg_sq.sqrt().add_(group['eps'])
            else:
                denom = exp_avg_sq.sqrt().add_(group['eps'])

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            if group['adamd_bias_correction']:
                step_size = group['lr'] * (bias_correction2 ** 0.5)
            else:
                step_size = (
                    group['lr']
                    * (bias_correction2 ** 0.5)
                    / bias_correction1
                )

            p = -step_size * (exp_avg / denom)
            w.data.add_(p)

            p_view = p.view(-1)
            pg = p_view.dot(grad.view(-1))

            if pg != 0:
                # the non-orthognal scaling estimate
                scaling = p_view.dot(p_view) / -pg
                exp_avg2.mul_(beta2).add_(scaling, alpha=1 - beta2)

                # bias corrected exponential average
                corrected_exp_avg = exp_avg2 / bias_correction2

                # checking criteria of switching to SGD training
                if (
                    state['step'] > 1
                    and corrected_exp_avg.allclose(scaling, rtol=1e-6)
                    and corrected_exp_avg > 0
                ):
                    group['phase'] = 'SGD'
                    group['lr'] = corrected_exp_avg.item()
    return p1, p2
