"""Held-out real code, issue 14's nineteenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout19.py): torchvision's FCOS target building (a write indexed by a boolean mask and by a selection
made with it; Nero and FAdam, pending at first, run now and are in corpus/real/heldout19.py). Inputs arrive uniform
in [-1, 1); integer inputs in [0, 10)."""
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
