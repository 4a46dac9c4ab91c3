"""Detection post-processing ported from torchvision, detectron2, yolov5, ultralytics (YOLOv8), ssd.pytorch, DETR and
Deformable DETR. Inputs arrive uniform in [-1, 1); each program first turns them into valid boxes (x1 < x2, y1 < y2,
pixel coordinates) where the original expects them, then runs the original computation in the original's style."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


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


# torchvision, torchvision/models/detection/rpn.py: permute_and_flatten
def _permute_and_flatten(layer, N: int, A: int, C: int, H: int, W: int):
    layer = layer.view(N, -1, C, H, W)
    layer = layer.permute(0, 3, 4, 1, 2)
    layer = layer.reshape(N, -1, C)
    return layer


# torchvision, torchvision/models/detection/rpn.py: concat_box_prediction_layers (three levels, three anchors)
def tv_concat_box_prediction_layers(
    c0: f32[2, 3, 8, 8], c1: f32[2, 3, 4, 4], c2: f32[2, 3, 2, 2], r0: f32[2, 12, 8, 8], r1: f32[2, 12, 4, 4],
    r2: f32[2, 12, 2, 2]
) -> tuple[f32[504, 1], f32[504, 4]]:
    box_cls = [c0, c1, c2]
    box_regression = [r0, r1, r2]
    box_cls_flattened = []
    box_regression_flattened = []
    for box_cls_per_level, box_regression_per_level in zip(box_cls, box_regression):
        N, AxC, H, W = box_cls_per_level.shape
        Ax4 = box_regression_per_level.shape[1]
        A = Ax4 // 4
        C = AxC // A
        box_cls_per_level = _permute_and_flatten(box_cls_per_level, N, A, C, H, W)
        box_cls_flattened.append(box_cls_per_level)
        box_regression_per_level = _permute_and_flatten(box_regression_per_level, N, A, 4, H, W)
        box_regression_flattened.append(box_regression_per_level)
    box_cls_concated = torch.cat(box_cls_flattened, dim=1).flatten(0, -2)
    box_regression_concated = torch.cat(box_regression_flattened, dim=1).reshape(-1, 4)
    return box_cls_concated, box_regression_concated


# torchvision, torchvision/models/detection/rpn.py: RegionProposalNetwork.assign_targets_to_anchors for one image,
# with Matcher(0.7, 0.3) (allow_low_quality_matches off) and box_iou as the similarity
def tv_rpn_assign_targets(raw_gt: f32[5, 4], raw_anchors: f32[120, 4]) -> tuple[f32[120], f32[120, 4]]:
    gt_boxes = _xyxy(raw_gt, 16.0)
    anchors_per_image = _xyxy(raw_anchors, 16.0)
    area1 = (gt_boxes[:, 2] - gt_boxes[:, 0]) * (gt_boxes[:, 3] - gt_boxes[:, 1])
    area2 = (anchors_per_image[:, 2] - anchors_per_image[:, 0]) * (anchors_per_image[:, 3] - anchors_per_image[:, 1])
    lt = torch.max(gt_boxes[:, None, :2], anchors_per_image[:, :2])
    rb = torch.min(gt_boxes[:, None, 2:], anchors_per_image[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    match_quality_matrix = inter / (area1[:, None] + area2 - inter)
    matched_vals, matches = match_quality_matrix.max(dim=0)
    below_low_threshold = matched_vals < 0.3
    between_thresholds = (matched_vals >= 0.3) & (matched_vals < 0.7)
    matches[below_low_threshold] = -1
    matches[between_thresholds] = -2
    matched_idxs = matches
    matched_gt_boxes_per_image = gt_boxes[matched_idxs.clamp(min=0)]
    labels_per_image = matched_idxs >= 0
    labels_per_image = labels_per_image.to(dtype=torch.float32)
    bg_indices = matched_idxs == -1
    labels_per_image[bg_indices] = 0.0
    inds_to_discard = matched_idxs == -2
    labels_per_image[inds_to_discard] = -1.0
    return labels_per_image, matched_gt_boxes_per_image


# ultralytics, ultralytics/utils/tal.py: dist2rbox
def yolov8_dist2rbox(pred_dist: f32[2, 64, 4], pred_angle: f32[2, 64, 1], anchor_points: f32[64, 2]) -> f32[2, 64, 4]:
    dim = -1
    lt, rb = pred_dist.split(2, dim=dim)
    cos, sin = torch.cos(pred_angle), torch.sin(pred_angle)
    xf, yf = ((rb - lt) / 2).split(1, dim=dim)
    x, y = xf * cos - yf * sin, xf * sin + yf * cos
    xy = torch.cat([x, y], dim=dim) + anchor_points
    return torch.cat([xy, lt + rb], dim=dim)


# ultralytics, ultralytics/utils/tal.py: bbox2dist (reg_max 16)
def yolov8_bbox2dist(anchor_points: f32[64, 2], raw: f32[64, 4]) -> f32[64, 4]:
    bbox = torch.cat([anchor_points * 8.0 - raw[:, :2].abs() * 10.0, anchor_points * 8.0 + raw[:, 2:].abs() * 30.0], -1)
    anchor_points = anchor_points * 8.0
    reg_max = 16
    x1y1, x2y2 = bbox.chunk(2, -1)
    return torch.cat((anchor_points - x1y1, x2y2 - anchor_points), -1).clamp_(0, reg_max - 0.01)


# ssd.pytorch (amdegroot), layers/box_utils.py: decode (variances (0.1, 0.2))
def ssd_decode(loc: f32[80, 4], raw_priors: f32[80, 4]) -> f32[80, 4]:
    priors = torch.cat([(raw_priors[:, :2] + 1.0) * 0.5, raw_priors[:, 2:].abs() * 0.3 + 0.05], 1)
    variances = [0.1, 0.2]
    boxes = torch.cat(
        (
            priors[:, :2] + loc[:, :2] * variances[0] * priors[:, 2:],
            priors[:, 2:] * torch.exp(loc[:, 2:] * variances[1]),
        ),
        1,
    )
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    return boxes


# DETR, util/box_ops.py: box_cxcywh_to_xyxy
def _box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


# DETR, models/detr.py: PostProcess.forward (softmax, best non-background class, boxes scaled by integer image sizes)
def detr_postprocess(
    out_logits: f32[2, 30, 6], out_bbox: f32[2, 30, 4], raw_sizes: i64[2, 2]
) -> tuple[f32[2, 30], i64[2, 30], f32[2, 30, 4]]:
    out_bbox = out_bbox * 0.25 + 0.5
    target_sizes = raw_sizes * 100 + 200
    assert len(out_logits) == len(target_sizes)
    assert target_sizes.shape[1] == 2
    prob = F.softmax(out_logits, -1)
    scores, labels = prob[..., :-1].max(-1)
    boxes = _box_cxcywh_to_xyxy(out_bbox)
    img_h, img_w = target_sizes.unbind(1)
    scale_fct = torch.stack([img_w, img_h, img_w, img_h], dim=1)
    boxes = boxes * scale_fct[:, None, :]
    return scores, labels, boxes


# Deformable DETR, models/deformable_detr.py: PostProcess.forward (sigmoid scores, top-k over queries x classes,
# query and class recovered with // and %, boxes gathered; 20 of 150)
def deformable_detr_postprocess(
    out_logits: f32[2, 30, 5], out_bbox: f32[2, 30, 4], raw_sizes: i64[2, 2]
) -> tuple[f32[2, 20], i64[2, 20], f32[2, 20, 4]]:
    out_bbox = out_bbox * 0.25 + 0.5
    target_sizes = raw_sizes * 100 + 200
    prob = out_logits.sigmoid()
    topk_values, topk_indexes = torch.topk(prob.view(out_logits.shape[0], -1), 20, dim=1)
    scores = topk_values
    topk_boxes = topk_indexes // out_logits.shape[2]
    labels = topk_indexes % out_logits.shape[2]
    boxes = _box_cxcywh_to_xyxy(out_bbox)
    boxes = torch.gather(boxes, 1, topk_boxes.unsqueeze(-1).repeat(1, 1, 4))
    img_h, img_w = target_sizes.unbind(1)
    scale_fct = torch.stack([img_w, img_h, img_w, img_h], dim=1)
    boxes = boxes * scale_fct[:, None, :]
    return scores, labels, boxes
