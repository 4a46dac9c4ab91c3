"""Detection code that selects with the index lists of `torch.where(condition)` or with boolean masks and then works
on the selection: torchvision's Matcher (low-quality matches written back through a list of predictions, which may
repeat), detectron2's rotated-box clipping (boxes gathered by a list, clipped in place and written back), and the
losses on foreground selections of torchvision's RetinaNet and FCOS and Ultralytics' YOLO (focal loss, GIoU with a
write through a mask of the selection, CIoU with in-place clamps of temporaries). Inputs arrive uniform in [-1, 1);
integer inputs in [0, 10)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


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


# torchvision/ops/focal_loss.py: sigmoid_focal_loss
def _sigmoid_focal_loss(inputs, targets, alpha: float = 0.25, gamma: float = 2, reduction: str = "none"):
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


# torchvision, torchvision/models/detection/retinanet.py: RetinaNetClassificationHead.compute_loss for one image,
# with torchvision/ops/focal_loss.py: sigmoid_focal_loss (alpha 0.25, gamma 2); matched indices -2 (between
# thresholds), -1 (background) or a gt index from the raw integers, gt labels of 3 classes
def retinanet_cls_loss(cls_logits: f32[20, 3], raw_matched: i64[20], labels: i64[4]) -> f32[()]:
    matched_idxs = raw_matched % 6 - 2   # -2 between thresholds, -1 background
    foreground = matched_idxs >= 0
    num_foreground = foreground.sum()
    gt_classes_target = torch.zeros_like(cls_logits)
    gt_classes_target[foreground, (labels % 3)[matched_idxs[foreground]]] = 1.0
    valid = matched_idxs != -2
    return _sigmoid_focal_loss(cls_logits[valid], gt_classes_target[valid], reduction="sum") / max(1, num_foreground)


def _upcast_non_float(t):
    if t.is_floating_point():
        return t if t.dtype in (torch.float32, torch.float64) else t.float()
    return t if t.dtype in (torch.int32, torch.int64) else t.int()


def _giou_loss(boxes1, boxes2, reduction: str = "none", eps: float = 1e-7):
    boxes1 = _upcast_non_float(boxes1)
    boxes2 = _upcast_non_float(boxes2)
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)
    intsctk = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk
    iouk = intsctk / (unionk + eps)
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)
    area_c = (xc2 - xc1) * (yc2 - yc1)
    miouk = iouk - ((area_c - unionk) / (area_c + eps))
    loss = 1 - miouk
    if reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()
    return loss


# torchvision, torchvision/models/detection/fcos.py: FCOSHead.compute_loss's box regression loss, with
# torchvision/ops/giou_loss.py: generalized_box_iou_loss and _loss_inter_union (reduction "sum") and
# torchvision/ops/_utils.py: _upcast_non_float, on the foreground anchors; XYXY boxes made valid from the raw inputs
def fcos_giou(raw_pred: f32[16, 4], raw_tgt: f32[16, 4], raw_matched: i64[16]) -> f32[()]:
    pred = torch.cat([raw_pred[:, :2] * 10, raw_pred[:, :2] * 10 + raw_pred[:, 2:].abs() * 5 + 1], 1)
    tgt = torch.cat([raw_tgt[:, :2] * 10, raw_tgt[:, :2] * 10 + raw_tgt[:, 2:].abs() * 5 + 1], 1)
    foreground = raw_matched % 3 > 0
    return _giou_loss(pred[foreground], tgt[foreground], reduction="sum")


# ultralytics/utils/metrics.py: bbox_iou
def _bbox_iou(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7):
    if xywh:
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    else:
        b1_x1, b1_y1, b1_x2, b1_y2 = box1.chunk(4, -1)
        b2_x1, b2_y1, b2_x2, b2_y2 = box2.chunk(4, -1)
        w1, h1 = b1_x2 - b1_x1, b1_y2 - b1_y1 + eps
        w2, h2 = b2_x2 - b2_x1, b2_y2 - b2_y1 + eps
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp_(0) * (
        b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)
    ).clamp_(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    if CIoU or DIoU or GIoU:
        cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
        ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
        if CIoU or DIoU:
            c2 = cw.pow(2) + ch.pow(2) + eps
            rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2).pow(2) + (b2_y1 + b2_y2 - b1_y1 - b1_y2).pow(2)) / 4
            if CIoU:
                v = (4 / math.pi**2) * ((w2 / h2).atan() - (w1 / h1).atan()).pow(2)
                with torch.no_grad():
                    alpha = v / (v - iou + (1 + eps))
                return iou - (rho2 / c2 + v * alpha)
            return iou - rho2 / c2
        c_area = cw * ch + eps
        return iou - (c_area - union) / c_area
    return iou


# Ultralytics, ultralytics/utils/loss.py: BboxLoss.forward's IoU term (CIoU between the foreground boxes, weighted by
# the summed target scores), with ultralytics/utils/metrics.py: bbox_iou (xywh False, CIoU); batch 2 of 12 anchors,
# 3 classes; XYXY boxes made valid from the raw inputs, the foreground from a threshold on a raw input
def yolo_bbox_ciou_loss(raw_pred: f32[2, 12, 4], raw_tgt: f32[2, 12, 4], scores: f32[2, 12, 3], fg_raw: f32[2, 12]) -> f32[()]:
    pred = torch.cat([raw_pred[..., :2] * 10, raw_pred[..., :2] * 10 + raw_pred[..., 2:].abs() * 5 + 1], -1)
    tgt = torch.cat([raw_tgt[..., :2] * 10, raw_tgt[..., :2] * 10 + raw_tgt[..., 2:].abs() * 5 + 1], -1)
    fg_mask = fg_raw > -0.3
    target_scores = scores.abs()
    target_scores_sum = max(target_scores.sum(), 1)
    weight = target_scores.sum(-1)[fg_mask].unsqueeze(-1)
    iou = _bbox_iou(pred[fg_mask], tgt[fg_mask], xywh=False, CIoU=True)
    loss_iou = ((1.0 - iou) * weight).sum() / target_scores_sum
    return loss_iou
