"""Detection code that selects with the index lists of `torch.where(condition)`: torchvision's Matcher (low-quality
matches written back through a list of predictions, which may repeat) and detectron2's rotated-box clipping (boxes
gathered by a list, clipped in place and written back). Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch


# torchvision, torchvision/models/detection/_utils.py: Matcher.__call__ with set_low_quality_matches_
def tv_matcher_low_quality(match_quality_matrix: f32[6, 200]) -> i64[200]:
    match_quality_matrix = match_quality_matrix.abs()
    matched_vals, matches = match_quality_matrix.max(dim=0)
    all_matches = matches.clone()
    below_low_threshold = matched_vals < 0.3
    between_thresholds = (matched_vals >= 0.3) & (matched_vals < 0.7)
    matches[below_low_threshold] = -1
    matches[between_thresholds] = -2
    highest_quality_foreach_gt, _ = match_quality_matrix.max(dim=1)
    gt_pred_pairs_of_highest_quality = torch.stack(
        torch.where((match_quality_matrix == highest_quality_foreach_gt[:, None]) > 0), dim=1
    ).squeeze(1)
    pred_inds_to_update = gt_pred_pairs_of_highest_quality[:, 1]
    matches[pred_inds_to_update] = all_matches[pred_inds_to_update]
    return matches


def _rotated_area(tensor):
    box = tensor
    area = box[:, 2] * box[:, 3]
    return area


def _rotated_normalize_angles(tensor):
    tensor[:, 4] = (tensor[:, 4] + 180.0) % 360.0 - 180.0


def _rotated_clip(tensor, box_size, clip_angle_threshold: float = 1.0):
    h, w = box_size

    # normalize angles to be within (-180, 180] degrees
    _rotated_normalize_angles(tensor)

    idx = torch.where(torch.abs(tensor[:, 4]) <= clip_angle_threshold)[0]

    # convert to (x1, y1, x2, y2)
    x1 = tensor[idx, 0] - tensor[idx, 2] / 2.0
    y1 = tensor[idx, 1] - tensor[idx, 3] / 2.0
    x2 = tensor[idx, 0] + tensor[idx, 2] / 2.0
    y2 = tensor[idx, 1] + tensor[idx, 3] / 2.0

    # clip
    x1.clamp_(min=0, max=w)
    y1.clamp_(min=0, max=h)
    x2.clamp_(min=0, max=w)
    y2.clamp_(min=0, max=h)

    # convert back to (xc, yc, w, h)
    tensor[idx, 0] = (x1 + x2) / 2.0
    tensor[idx, 1] = (y1 + y2) / 2.0
    # make sure widths and heights do not increase due to numerical errors
    tensor[idx, 2] = torch.min(tensor[idx, 2], x2 - x1)
    tensor[idx, 3] = torch.min(tensor[idx, 3], y2 - y1)


def _rotated_scale(tensor, scale_x: float, scale_y: float) -> None:
    tensor[:, 0] *= scale_x
    tensor[:, 1] *= scale_y
    theta = tensor[:, 4] * math.pi / 180.0
    c = torch.cos(theta)
    s = torch.sin(theta)
    tensor[:, 2] *= torch.sqrt((scale_x * c) ** 2 + (scale_y * s) ** 2)
    tensor[:, 3] *= torch.sqrt((scale_x * s) ** 2 + (scale_y * c) ** 2)
    tensor[:, 4] = torch.atan2(scale_x * s, scale_y * c) * 180 / math.pi


def _rotated_inside_box(tensor, box_size, boundary_threshold: int = 0):
    height, width = box_size

    cnt_x = tensor[..., 0]
    cnt_y = tensor[..., 1]
    half_w = tensor[..., 2] / 2.0
    half_h = tensor[..., 3] / 2.0
    a = tensor[..., 4]
    c = torch.abs(torch.cos(a * math.pi / 180.0))
    s = torch.abs(torch.sin(a * math.pi / 180.0))
    # This basically computes the horizontal bounding rectangle of the rotated box
    max_rect_dx = c * half_w + s * half_h
    max_rect_dy = c * half_h + s * half_w

    inds_inside = (
        (cnt_x - max_rect_dx >= -boundary_threshold)
        & (cnt_y - max_rect_dy >= -boundary_threshold)
        & (cnt_x + max_rect_dx < width + boundary_threshold)
        & (cnt_y + max_rect_dy < height + boundary_threshold)
    )

    return inds_inside


# Detectron2 (facebookresearch/detectron2), detectron2/structures/rotated_boxes.py: RotatedBoxes.scale (0.8, 1.25),
# normalize_angles and clip (image 40x50, clip_angle_threshold 1 degree), then area and inside_box; the methods
# written as functions of the box tensor. Boxes (cx, cy, w, h, angle in degrees) made from the raw inputs: centres
# partly outside the image, the first 6 boxes almost horizontal, the other 8 at angles in [-200, 200)
def d2_rotated_boxes_scale_clip(raw: f32[14, 4], raw_angle: f32[14]) -> tuple[f32[14, 5], f32[14], bool[14]]:
    angle = torch.cat([raw_angle[:6] * 1.5, raw_angle[6:] * 200.0])
    tensor = torch.stack(
        [raw[:, 0] * 30 + 25, raw[:, 1] * 25 + 20, raw[:, 2].abs() * 20 + 2, raw[:, 3].abs() * 20 + 2, angle], dim=1
    )
    _rotated_scale(tensor, 0.8, 1.25)
    _rotated_clip(tensor, (40, 50))
    return tensor, _rotated_area(tensor), _rotated_inside_box(tensor, (40, 50))
