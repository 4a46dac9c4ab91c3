"""Detection post-processing ported from torchvision, detectron2 and yolov5. Inputs arrive uniform in [-1, 1); each
program first turns them into valid boxes (x1 < x2, y1 < y2, pixel coordinates) where the original expects them,
then runs the original computation in the original's style."""
from __future__ import annotations

import math

import torch


def _xyxy(raw, size: float):
    # Valid (x1, y1, x2, y2) boxes from uniform inputs: corners in [0, 2*size), sides in [1, size + 1).
    xy = (raw[:, :2] + 1.0) * size
    wh = raw[:, 2:].abs() * size + 1.0
    return torch.cat([xy, xy + wh], 1)


# torchvision, torchvision/ops/boxes.py: box_area
def _box_area(boxes):
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


# torchvision, torchvision/ops/boxes.py: _box_inter_union
def _box_inter_union(boxes1, boxes2):
    area1 = _box_area(boxes1)
    area2 = _box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter, union


# torchvision, torchvision/ops/boxes.py: box_iou
def tv_box_iou(raw1: f32[40, 4], raw2: f32[24, 4]) -> f32[40, 24]:
    boxes1 = _xyxy(raw1, 32.0)
    boxes2 = _xyxy(raw2, 32.0)
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    return iou


# torchvision, torchvision/ops/boxes.py: generalized_box_iou
def tv_generalized_box_iou(raw1: f32[40, 4], raw2: f32[24, 4]) -> f32[40, 24]:
    boxes1 = _xyxy(raw1, 32.0)
    boxes2 = _xyxy(raw2, 32.0)
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    whi = (rbi - lti).clamp(min=0)
    areai = whi[:, :, 0] * whi[:, :, 1]
    return iou - (areai - union) / areai


# torchvision, torchvision/ops/boxes.py: clip_boxes_to_image (the eager branch)
def tv_clip_boxes_to_image(raw: f32[2, 60, 4], height: int = 48, width: int = 64) -> f32[2, 60, 4]:
    boxes = raw * 80.0
    size = (height, width)
    dim = boxes.dim()
    boxes_x = boxes[..., 0::2]
    boxes_y = boxes[..., 1::2]
    height, width = size
    boxes_x = boxes_x.clamp(min=0, max=width)
    boxes_y = boxes_y.clamp(min=0, max=height)
    clipped_boxes = torch.stack((boxes_x, boxes_y), dim=dim)
    return clipped_boxes.reshape(boxes.shape)


# torchvision, torchvision/models/detection/_utils.py: Matcher.__call__ (allow_low_quality_matches=False, 0.7 / 0.3)
def tv_matcher(match_quality_matrix: f32[6, 200]) -> i64[200]:
    match_quality_matrix = match_quality_matrix.abs()
    high_threshold = 0.7
    low_threshold = 0.3
    matched_vals, matches = match_quality_matrix.max(dim=0)
    below_low_threshold = matched_vals < low_threshold
    between_thresholds = (matched_vals >= low_threshold) & (matched_vals < high_threshold)
    matches[below_low_threshold] = -1
    matches[between_thresholds] = -2
    return matches


# torchvision, torchvision/models/detection/_utils.py: smooth_l1_loss (beta 1/9, size_average)
def tv_smooth_l1_loss(input: f32[256, 4], target: f32[256, 4], size_average: bool = True) -> f32[()]:
    beta = 1.0 / 9
    n = torch.abs(input - target)
    cond = n < beta
    loss = torch.where(cond, 0.5 * n**2 / beta, n - 0.5 * beta)
    if size_average:
        return loss.mean()
    return loss.sum()


# torchvision, torchvision/ops/boxes.py: _batched_nms_coordinate_trick (the per-class offset, up to the nms call)
def tv_batched_nms_offsets(raw: f32[150, 4], idxs: i64[150]) -> f32[150, 4]:
    boxes = _xyxy(raw, 50.0)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return boxes_for_nms


# detectron2, detectron2/modeling/box_regression.py: Box2BoxTransform.apply_deltas (weights (10, 10, 5, 5))
def d2_apply_deltas(deltas: f32[100, 12], raw: f32[100, 4]) -> f32[100, 12]:
    boxes = _xyxy(raw, 64.0)
    boxes = boxes.to(deltas.dtype)
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    wx, wy, ww, wh = (10.0, 10.0, 5.0, 5.0)
    dx = deltas[:, 0::4] / wx
    dy = deltas[:, 1::4] / wy
    dw = deltas[:, 2::4] / ww
    dh = deltas[:, 3::4] / wh
    scale_clamp = math.log(1000.0 / 16)
    dw = torch.clamp(dw, max=scale_clamp)
    dh = torch.clamp(dh, max=scale_clamp)
    pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
    pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
    pred_w = torch.exp(dw) * widths[:, None]
    pred_h = torch.exp(dh) * heights[:, None]
    pred_boxes = torch.zeros_like(deltas)
    pred_boxes[:, 0::4] = pred_ctr_x - 0.5 * pred_w
    pred_boxes[:, 1::4] = pred_ctr_y - 0.5 * pred_h
    pred_boxes[:, 2::4] = pred_ctr_x + 0.5 * pred_w
    pred_boxes[:, 3::4] = pred_ctr_y + 0.5 * pred_h
    return pred_boxes


# detectron2, detectron2/modeling/box_regression.py: Box2BoxTransformRotated.apply_deltas (weights (10, 10, 5, 5, 1))
def d2_rotated_apply_deltas(deltas: f32[64, 5], raw: f32[64, 5]) -> f32[64, 5]:
    boxes = torch.cat([(raw[:, :2] + 1.0) * 50.0, raw[:, 2:4].abs() * 30.0 + 1.0, raw[:, 4:] * 180.0], 1)
    assert deltas.shape[1] == 5 and boxes.shape[1] == 5
    boxes = boxes.to(deltas.dtype)
    ctr_x = boxes[:, 0]
    ctr_y = boxes[:, 1]
    widths = boxes[:, 2]
    heights = boxes[:, 3]
    angles = boxes[:, 4]
    wx, wy, ww, wh, wa = (10.0, 10.0, 5.0, 5.0, 1.0)
    dx = deltas[:, 0] / wx
    dy = deltas[:, 1] / wy
    dw = deltas[:, 2] / ww
    dh = deltas[:, 3] / wh
    da = deltas[:, 4] / wa
    scale_clamp = math.log(1000.0 / 16)
    dw = torch.clamp(dw, max=scale_clamp)
    dh = torch.clamp(dh, max=scale_clamp)
    pred_boxes = torch.zeros_like(deltas)
    pred_boxes[:, 0] = dx * widths + ctr_x
    pred_boxes[:, 1] = dy * heights + ctr_y
    pred_boxes[:, 2] = torch.exp(dw) * widths
    pred_boxes[:, 3] = torch.exp(dh) * heights
    pred_angle = da * 180.0 / math.pi + angles
    pred_angle = (pred_angle + 180.0) % 360.0 - 180.0
    pred_boxes[:, 4] = pred_angle
    return pred_boxes


# yolov5, utils/metrics.py: box_iou
def yolo_box_iou(raw1: f32[30, 4], raw2: f32[50, 4]) -> f32[30, 50]:
    box1 = _xyxy(raw1, 20.0)
    box2 = _xyxy(raw2, 20.0)
    eps = 1e-7
    (a1, a2), (b1, b2) = box1.unsqueeze(1).chunk(2, 2), box2.unsqueeze(0).chunk(2, 2)
    inter = (torch.min(a2, b2) - torch.max(a1, b1)).clamp(0).prod(2)
    return inter / ((a2 - a1).prod(2) + (b2 - b1).prod(2) - inter + eps)
