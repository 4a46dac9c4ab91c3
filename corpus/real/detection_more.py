"""Detection code ported from detectron2 (level assignment for ROI pooling), mmdetection (distance-to-box decoding,
pairwise IoU/GIoU, delta decoding with numpy on constants), yolov5 (box format), ultralytics (the task-aligned
assigner's candidate selection), CenterNet (heatmap peaks by max pooling, top-k decoding), torchvision (complete IoU),
DETR (the Hungarian matcher's cost matrix) and mmdetection's FCOS centerness targets. Coordinates arrive uniform in
[-1, 1) and are mapped to boxes inside an image by `_xyxy`."""
from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _xyxy(raw, size: float):
    """Valid xyxy boxes from uniform [-1, 1) numbers: (x1, y1) in [0, size/2), widths and heights in [1, size/2)."""
    xy = (raw[..., :2] + 1.0) * (size / 4.0)
    wh = (raw[..., 2:] + 1.0) * (size / 4.0) + 1.0
    return torch.cat([xy, xy + wh], dim=-1)


# detectron2, detectron2/layers/wrappers.py: cat
def _cat(tensors, dim: int = 0):
    assert isinstance(tensors, (list, tuple))
    if len(tensors) == 1:
        return tensors[0]
    return torch.cat(tensors, dim)


# detectron2, detectron2/structures/boxes.py: Boxes.area
def _area(box):
    area = (box[:, 2] - box[:, 0]) * (box[:, 3] - box[:, 1])
    return area


# detectron2, detectron2/modeling/poolers.py: assign_boxes_to_levels (levels 2 to 5, canonical box size 224 at
# level 4), for the boxes of two images
def d2_assign_boxes_to_levels(raw0: f32[30, 4], raw1: f32[20, 4]) -> i64[50]:
    box_lists = [_xyxy(raw0, 800.0), _xyxy(raw1, 800.0)]
    min_level, max_level, canonical_box_size, canonical_level = 2, 5, 224, 4
    box_sizes = torch.sqrt(_cat([_area(boxes) for boxes in box_lists]))
    level_assignments = torch.floor(canonical_level + torch.log2(box_sizes / canonical_box_size + 1e-8))
    level_assignments = torch.clamp(level_assignments, min=min_level, max=max_level)
    return level_assignments.to(torch.int64) - min_level


# mmdetection (v2.x), mmdet/core/bbox/transforms.py: distance2bbox with max_shape (48, 64), 2-D inputs
def mmdet_distance2bbox(raw_points: f32[40, 2], raw_distance: f32[40, 4]) -> f32[40, 4]:
    points = (raw_points + 1.0) * torch.tensor([32.0, 24.0])
    distance = (raw_distance + 1.0) * 10.0
    max_shape = (48, 64)
    x1 = points[..., 0] - distance[..., 0]
    y1 = points[..., 1] - distance[..., 1]
    x2 = points[..., 0] + distance[..., 2]
    y2 = points[..., 1] + distance[..., 3]

    bboxes = torch.stack([x1, y1, x2, y2], -1)

    if max_shape is not None:
        if bboxes.dim() == 2 and not torch.onnx.is_in_onnx_export():
            # speed up
            bboxes[:, 0::2].clamp_(min=0, max=max_shape[1])
            bboxes[:, 1::2].clamp_(min=0, max=max_shape[0])
            return bboxes
    return bboxes


# mmdetection, mmdet/structures/bbox/bbox_overlaps.py: fp16_clamp
def _fp16_clamp(x, min=None, max=None):
    if not x.is_cuda and x.dtype == torch.float16:
        # clamp for cpu float16, tensor fp16 has no clamp implementation
        return x.float().clamp(min, max).half()

    return x.clamp(min, max)


# mmdetection, mmdet/structures/bbox/bbox_overlaps.py: bbox_overlaps (mode "giou", is_aligned False, eps 1e-6)
def mmdet_bbox_overlaps_giou(raw1: f32[2, 12, 4], raw2: f32[2, 9, 4]) -> f32[2, 12, 9]:
    bboxes1 = _xyxy(raw1, 64.0)
    bboxes2 = _xyxy(raw2, 64.0)
    mode, is_aligned, eps = "giou", False, 1e-6
    assert mode in ["iou", "iof", "giou"], f"Unsupported mode {mode}"
    # Either the boxes are empty or the length of boxes' last dimension is 4
    assert bboxes1.size(-1) == 4 or bboxes1.size(0) == 0
    assert bboxes2.size(-1) == 4 or bboxes2.size(0) == 0

    # Batch dim must be the same
    # Batch dim: (B1, B2, ... Bn)
    assert bboxes1.shape[:-2] == bboxes2.shape[:-2]
    batch_shape = bboxes1.shape[:-2]

    rows = bboxes1.size(-2)
    cols = bboxes2.size(-2)
    if is_aligned:
        assert rows == cols

    if rows * cols == 0:
        if is_aligned:
            return bboxes1.new(batch_shape + (rows,))
        else:
            return bboxes1.new(batch_shape + (rows, cols))

    area1 = (bboxes1[..., 2] - bboxes1[..., 0]) * (bboxes1[..., 3] - bboxes1[..., 1])
    area2 = (bboxes2[..., 2] - bboxes2[..., 0]) * (bboxes2[..., 3] - bboxes2[..., 1])

    lt = torch.max(bboxes1[..., :, None, :2], bboxes2[..., None, :, :2])  # [B, rows, cols, 2]
    rb = torch.min(bboxes1[..., :, None, 2:], bboxes2[..., None, :, 2:])  # [B, rows, cols, 2]

    wh = _fp16_clamp(rb - lt, min=0)
    overlap = wh[..., 0] * wh[..., 1]

    if mode in ["iou", "giou"]:
        union = area1[..., None] + area2[..., None, :] - overlap
    else:
        union = area1[..., None]
    if mode == "giou":
        enclosed_lt = torch.min(bboxes1[..., :, None, :2], bboxes2[..., None, :, :2])
        enclosed_rb = torch.max(bboxes1[..., :, None, 2:], bboxes2[..., None, :, 2:])

    eps = union.new_tensor([eps])
    union = torch.max(union, eps)
    ious = overlap / union
    if mode in ["iou", "iof"]:
        return ious
    # calculate gious
    enclose_wh = _fp16_clamp(enclosed_rb - enclosed_lt, min=0)
    enclose_area = enclose_wh[..., 0] * enclose_wh[..., 1]
    enclose_area = torch.max(enclose_area, eps)
    gious = ious - (enclose_area - union) / enclose_area
    return gious


# torchvision, torchvision/ops/focal_loss.py: sigmoid_focal_loss (alpha 0.25, gamma 2, reduction "sum") with
# 0/1 targets
def tv_sigmoid_focal_loss(inputs: f32[64, 5], raw_targets: f32[64, 5]) -> f32[()]:
    targets = (raw_targets > 0.6).float()
    alpha, gamma, reduction = 0.25, 2.0, "sum"
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
    else:
        raise ValueError(
            f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', 'mean', 'sum'"
        )
    return loss


# yolov5, utils/general.py: xywh2xyxy
def yolo_xywh2xyxy(x: f32[300, 4]) -> f32[300, 4]:
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2
    y[..., 1] = x[..., 1] - x[..., 3] / 2
    y[..., 2] = x[..., 0] + x[..., 2] / 2
    y[..., 3] = x[..., 1] + x[..., 3] / 2
    return y


# mmdetection, mmdet/models/task_modules/coders/delta_xywh_bbox_coder.py: delta2bbox (stds (0.1, 0.1, 0.2, 0.2),
# max_shape (48, 64), clip_border)
def mmdet_delta2bbox(raw: f32[50, 4], deltas: f32[50, 8]) -> f32[50, 8]:
    rois = _xyxy(raw, 24.0)
    means = (0.0, 0.0, 0.0, 0.0)
    stds = (0.1, 0.1, 0.2, 0.2)
    max_shape = (48, 64)
    wh_ratio_clip = 16 / 1000
    num_bboxes, num_classes = deltas.size(0), deltas.size(1) // 4
    deltas = deltas.reshape(-1, 4)
    means = deltas.new_tensor(means).view(1, -1)
    stds = deltas.new_tensor(stds).view(1, -1)
    denorm_deltas = deltas * stds + means
    dxy = denorm_deltas[:, :2]
    dwh = denorm_deltas[:, 2:]
    rois_ = rois.repeat(1, num_classes).reshape(-1, 4)
    pxy = (rois_[:, :2] + rois_[:, 2:]) * 0.5
    pwh = rois_[:, 2:] - rois_[:, :2]
    dxy_wh = pwh * dxy
    max_ratio = np.abs(np.log(wh_ratio_clip))
    dwh = dwh.clamp(min=-max_ratio, max=max_ratio)
    gxy = pxy + dxy_wh
    gwh = pwh * dwh.exp()
    x1y1 = gxy - (gwh * 0.5)
    x2y2 = gxy + (gwh * 0.5)
    bboxes = torch.cat([x1y1, x2y2], dim=-1)
    bboxes[..., 0::2].clamp_(min=0, max=max_shape[1])
    bboxes[..., 1::2].clamp_(min=0, max=max_shape[0])
    bboxes = bboxes.reshape(num_bboxes, -1)
    return bboxes


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


def _upcast(t: Tensor) -> Tensor:
    if t.is_floating_point():
        return t if t.dtype in (torch.float32, torch.float64) else t.float()
    else:
        return t if t.dtype in (torch.int32, torch.int64) else t.int()


def _box_area(boxes: Tensor) -> Tensor:
    boxes = _upcast(boxes)
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def _box_inter_union(boxes1: Tensor, boxes2: Tensor):
    area1 = _box_area(boxes1)
    area2 = _box_area(boxes2)
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = _upcast(rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    return inter, union


def _box_iou(boxes1: Tensor, boxes2: Tensor) -> Tensor:
    inter, union = _box_inter_union(boxes1, boxes2)
    iou = inter / union
    return iou


def _box_diou_iou(boxes1: Tensor, boxes2: Tensor, eps: float = 1e-7):
    iou = _box_iou(boxes1, boxes2)
    lti = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rbi = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    whi = _upcast(rbi - lti).clamp(min=0)
    diagonal_distance_squared = (whi[:, :, 0] ** 2) + (whi[:, :, 1] ** 2) + eps
    x_p = (boxes1[:, 0] + boxes1[:, 2]) / 2
    y_p = (boxes1[:, 1] + boxes1[:, 3]) / 2
    x_g = (boxes2[:, 0] + boxes2[:, 2]) / 2
    y_g = (boxes2[:, 1] + boxes2[:, 3]) / 2
    centers_distance_squared = (_upcast((x_p[:, None] - x_g[None, :])) ** 2) + (
        _upcast((y_p[:, None] - y_g[None, :])) ** 2
    )
    return iou - (centers_distance_squared / diagonal_distance_squared), iou


# torchvision, torchvision/ops/boxes.py: complete_box_iou (with _box_diou_iou, box_iou, _box_inter_union, box_area,
# _upcast); boxes made from the inputs as (x1, y1) in [0, 40) and sizes in [1, 11)
def tv_complete_box_iou(raw1: f32[20, 4], raw2: f32[12, 4]) -> f32[20, 12]:
    boxes1 = torch.cat([raw1[:, :2] * 20 + 20, raw1[:, :2] * 20 + 21 + raw1[:, 2:].abs() * 10], dim=1)
    boxes2 = torch.cat([raw2[:, :2] * 20 + 20, raw2[:, :2] * 20 + 21 + raw2[:, 2:].abs() * 10], dim=1)
    eps = 1e-7
    boxes1 = _upcast(boxes1)
    boxes2 = _upcast(boxes2)
    diou, iou = _box_diou_iou(boxes1, boxes2, eps)

    w_pred = boxes1[:, None, 2] - boxes1[:, None, 0]
    h_pred = boxes1[:, None, 3] - boxes1[:, None, 1]

    w_gt = boxes2[:, 2] - boxes2[:, 0]
    h_gt = boxes2[:, 3] - boxes2[:, 1]

    v = (4 / (torch.pi**2)) * torch.pow(torch.atan(w_pred / h_pred) - torch.atan(w_gt / h_gt), 2)
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)
    return diou - alpha * v


def _box_cxcywh_to_xyxy(x):
    x_c, y_c, w, h = x.unbind(-1)
    b = [(x_c - 0.5 * w), (y_c - 0.5 * h), (x_c + 0.5 * w), (y_c + 0.5 * h)]
    return torch.stack(b, dim=-1)


def _detr_box_iou(boxes1, boxes2):
    area1 = (boxes1[:, 2] - boxes1[:, 0]) * (boxes1[:, 3] - boxes1[:, 1])
    area2 = (boxes2[:, 2] - boxes2[:, 0]) * (boxes2[:, 3] - boxes2[:, 1])
    lt = torch.max(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.min(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    inter = wh[:, :, 0] * wh[:, :, 1]
    union = area1[:, None] + area2 - inter
    iou = inter / union
    return iou, union


def _generalized_box_iou(boxes1, boxes2):
    assert (boxes1[:, 2:] >= boxes1[:, :2]).all()
    assert (boxes2[:, 2:] >= boxes2[:, :2]).all()
    iou, union = _detr_box_iou(boxes1, boxes2)
    lt = torch.min(boxes1[:, None, :2], boxes2[:, :2])
    rb = torch.max(boxes1[:, None, 2:], boxes2[:, 2:])
    wh = (rb - lt).clamp(min=0)
    area = wh[:, :, 0] * wh[:, :, 1]
    return iou - (area - union) / area


# DETR (facebookresearch/detr), models/matcher.py: HungarianMatcher.forward up to the cost matrix C (cost_class 1,
# cost_bbox 5, cost_giou 2), before scipy's linear_sum_assignment; util/box_ops.py's box_cxcywh_to_xyxy,
# box_iou and generalized_box_iou. The outputs and targets dicts are built from the inputs (boxes through the model's
# final sigmoid); two images with 3 and 2 targets. Inputs in float64: C sums terms of opposite signs, so where it
# is near zero float32 rounding (which differs by plan in the last bits) exceeds the corpus tolerance
def detr_hungarian_cost(
    pred_logits: f64[2, 10, 6], pred_boxes_raw: f64[2, 10, 4], labels0: i64[3], labels1: i64[2],
    boxes0_raw: f64[3, 4], boxes1_raw: f64[2, 4]
) -> f64[2, 10, 5]:
    outputs = {"pred_logits": pred_logits, "pred_boxes": pred_boxes_raw.sigmoid()}
    targets = [
        {"labels": labels0 % 6, "boxes": boxes0_raw.sigmoid()},
        {"labels": labels1 % 6, "boxes": boxes1_raw.sigmoid()},
    ]
    cost_class_w, cost_bbox_w, cost_giou_w = 1.0, 5.0, 2.0
    bs, num_queries = outputs["pred_logits"].shape[:2]

    out_prob = outputs["pred_logits"].flatten(0, 1).softmax(-1)
    out_bbox = outputs["pred_boxes"].flatten(0, 1)

    tgt_ids = torch.cat([v["labels"] for v in targets])
    tgt_bbox = torch.cat([v["boxes"] for v in targets])

    cost_class = -out_prob[:, tgt_ids]
    cost_bbox = torch.cdist(out_bbox, tgt_bbox, p=1)
    cost_giou = -_generalized_box_iou(_box_cxcywh_to_xyxy(out_bbox), _box_cxcywh_to_xyxy(tgt_bbox))

    C = cost_bbox_w * cost_bbox + cost_class_w * cost_class + cost_giou_w * cost_giou
    C = C.view(bs, num_queries, -1).cpu()
    return C


# mmdetection, mmdet/models/dense_heads/fcos_head.py: FCOSHead.centerness_target (distances made positive from the
# inputs)
def mmdet_fcos_centerness_target(raw: f32[50, 4]) -> f32[50]:
    pos_bbox_targets = raw.abs() * 8 + 0.5
    left_right = pos_bbox_targets[:, [0, 2]]
    top_bottom = pos_bbox_targets[:, [1, 3]]
    if len(left_right) == 0:
        centerness_targets = left_right[..., 0]
    else:
        centerness_targets = (left_right.min(dim=-1)[0] / left_right.max(dim=-1)[0]) * (
            top_bottom.min(dim=-1)[0] / top_bottom.max(dim=-1)[0]
        )
    return torch.sqrt(centerness_targets)
