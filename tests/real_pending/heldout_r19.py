"""Held-out real code, issue 14's nineteenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout19.py): torchvision's FCOS target building (a write indexed by a boolean mask and by a selection
made with it), Nero (a dict entry set to a tensor or to a float by a run-time `if`) and FAdam (Python's `min` of a
0-d tensor and a number). Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import List, Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


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


_VLLM_SAMPLING_EPS = 1e-5


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
