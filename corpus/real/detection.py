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


# torchvision, torchvision/models/detection/_utils.py: BoxCoder.decode_single (weights (10, 10, 5, 5), default clip)
def tv_box_coder_decode(rel_codes: f32[120, 8], raw: f32[120, 4]) -> f32[120, 8]:
    boxes = _xyxy(raw, 64.0)
    boxes = boxes.to(rel_codes.dtype)
    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights
    wx, wy, ww, wh = (10.0, 10.0, 5.0, 5.0)
    dx = rel_codes[:, 0::4] / wx
    dy = rel_codes[:, 1::4] / wy
    dw = rel_codes[:, 2::4] / ww
    dh = rel_codes[:, 3::4] / wh
    bbox_xform_clip = math.log(1000.0 / 16)
    dw = torch.clamp(dw, max=bbox_xform_clip)
    dh = torch.clamp(dh, max=bbox_xform_clip)
    pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
    pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
    pred_w = torch.exp(dw) * widths[:, None]
    pred_h = torch.exp(dh) * heights[:, None]
    pred_boxes1 = pred_ctr_x - torch.tensor(0.5, dtype=pred_ctr_x.dtype, device=pred_w.device) * pred_w
    pred_boxes2 = pred_ctr_y - torch.tensor(0.5, dtype=pred_ctr_y.dtype, device=pred_h.device) * pred_h
    pred_boxes3 = pred_ctr_x + torch.tensor(0.5, dtype=pred_ctr_x.dtype, device=pred_w.device) * pred_w
    pred_boxes4 = pred_ctr_y + torch.tensor(0.5, dtype=pred_ctr_y.dtype, device=pred_h.device) * pred_h
    pred_boxes = torch.stack((pred_boxes1, pred_boxes2, pred_boxes3, pred_boxes4), dim=2).flatten(1)
    return pred_boxes


# torchvision, torchvision/models/detection/_utils.py: BoxCoder.encode_single and encode_boxes
def tv_encode_boxes(raw_ref: f32[96, 4], raw_prop: f32[96, 4]) -> f32[96, 4]:
    reference_boxes = _xyxy(raw_ref, 64.0)
    proposals = _xyxy(raw_prop, 64.0)
    dtype = reference_boxes.dtype
    device = reference_boxes.device
    weights = torch.as_tensor((10.0, 10.0, 5.0, 5.0), dtype=dtype, device=device)
    wx = weights[0]
    wy = weights[1]
    ww = weights[2]
    wh = weights[3]
    proposals_x1 = proposals[:, 0].unsqueeze(1)
    proposals_y1 = proposals[:, 1].unsqueeze(1)
    proposals_x2 = proposals[:, 2].unsqueeze(1)
    proposals_y2 = proposals[:, 3].unsqueeze(1)
    reference_boxes_x1 = reference_boxes[:, 0].unsqueeze(1)
    reference_boxes_y1 = reference_boxes[:, 1].unsqueeze(1)
    reference_boxes_x2 = reference_boxes[:, 2].unsqueeze(1)
    reference_boxes_y2 = reference_boxes[:, 3].unsqueeze(1)
    ex_widths = proposals_x2 - proposals_x1
    ex_heights = proposals_y2 - proposals_y1
    ex_ctr_x = proposals_x1 + 0.5 * ex_widths
    ex_ctr_y = proposals_y1 + 0.5 * ex_heights
    gt_widths = reference_boxes_x2 - reference_boxes_x1
    gt_heights = reference_boxes_y2 - reference_boxes_y1
    gt_ctr_x = reference_boxes_x1 + 0.5 * gt_widths
    gt_ctr_y = reference_boxes_y1 + 0.5 * gt_heights
    targets_dx = wx * (gt_ctr_x - ex_ctr_x) / ex_widths
    targets_dy = wy * (gt_ctr_y - ex_ctr_y) / ex_heights
    targets_dw = ww * torch.log(gt_widths / ex_widths)
    targets_dh = wh * torch.log(gt_heights / ex_heights)
    targets = torch.cat((targets_dx, targets_dy, targets_dw, targets_dh), dim=1)
    return targets


# detectron2, detectron2/modeling/box_regression.py: Box2BoxTransform.get_deltas (weights (10, 10, 5, 5))
def d2_get_deltas(raw_src: f32[80, 4], raw_target: f32[80, 4]) -> f32[80, 4]:
    src_boxes = _xyxy(raw_src, 40.0)
    target_boxes = _xyxy(raw_target, 40.0)
    assert isinstance(src_boxes, torch.Tensor), type(src_boxes)
    assert isinstance(target_boxes, torch.Tensor), type(target_boxes)
    src_widths = src_boxes[:, 2] - src_boxes[:, 0]
    src_heights = src_boxes[:, 3] - src_boxes[:, 1]
    src_ctr_x = src_boxes[:, 0] + 0.5 * src_widths
    src_ctr_y = src_boxes[:, 1] + 0.5 * src_heights
    target_widths = target_boxes[:, 2] - target_boxes[:, 0]
    target_heights = target_boxes[:, 3] - target_boxes[:, 1]
    target_ctr_x = target_boxes[:, 0] + 0.5 * target_widths
    target_ctr_y = target_boxes[:, 1] + 0.5 * target_heights
    wx, wy, ww, wh = (10.0, 10.0, 5.0, 5.0)
    dx = wx * (target_ctr_x - src_ctr_x) / src_widths
    dy = wy * (target_ctr_y - src_ctr_y) / src_heights
    dw = ww * torch.log(target_widths / src_widths)
    dh = wh * torch.log(target_heights / src_heights)
    deltas = torch.stack((dx, dy, dw, dh), dim=1)
    assert (src_widths > 0).all().item(), "Input boxes to Box2BoxTransform are not valid!"
    return deltas


# mmdetection, mmdet/models/task_modules/coders/delta_xywh_bbox_coder.py: onnx_delta2bbox (same settings)
def mmdet_onnx_delta2bbox(raw: f32[50, 4], deltas: f32[50, 8]) -> f32[50, 8]:
    rois = _xyxy(raw, 24.0)
    means = deltas.new_tensor((0.0, 0.0, 0.0, 0.0)).view(1, -1).repeat(1, deltas.size(-1) // 4)
    stds = deltas.new_tensor((0.1, 0.1, 0.2, 0.2)).view(1, -1).repeat(1, deltas.size(-1) // 4)
    denorm_deltas = deltas * stds + means
    dx = denorm_deltas[..., 0::4]
    dy = denorm_deltas[..., 1::4]
    dw = denorm_deltas[..., 2::4]
    dh = denorm_deltas[..., 3::4]
    x1, y1 = rois[..., 0], rois[..., 1]
    x2, y2 = rois[..., 2], rois[..., 3]
    px = ((x1 + x2) * 0.5).unsqueeze(-1).expand_as(dx)
    py = ((y1 + y2) * 0.5).unsqueeze(-1).expand_as(dy)
    pw = (x2 - x1).unsqueeze(-1).expand_as(dw)
    ph = (y2 - y1).unsqueeze(-1).expand_as(dh)
    dx_width = pw * dx
    dy_height = ph * dy
    max_ratio = abs(math.log(16 / 1000))
    dw = dw.clamp(min=-max_ratio, max=max_ratio)
    dh = dh.clamp(min=-max_ratio, max=max_ratio)
    gw = pw * dw.exp()
    gh = ph * dh.exp()
    gx = px + dx_width
    gy = py + dy_height
    x1 = gx - gw * 0.5
    y1 = gy - gh * 0.5
    x2 = gx + gw * 0.5
    y2 = gy + gh * 0.5
    bboxes = torch.stack([x1, y1, x2, y2], dim=-1).view(deltas.size())
    max_shape = x1.new_tensor((48, 64))
    max_shape = max_shape[..., :2].type_as(x1)
    min_xy = x1.new_tensor(0)
    max_xy = torch.cat([max_shape] * (deltas.size(-1) // 2), dim=-1).flip(-1).unsqueeze(-2)
    bboxes = torch.where(bboxes < min_xy, min_xy, bboxes)
    bboxes = torch.where(bboxes > max_xy, max_xy, bboxes)
    return bboxes


# yolov5, utils/general.py: clip_boxes
def _clip_boxes(boxes, shape):
    if isinstance(boxes, torch.Tensor):
        boxes[..., 0].clamp_(0, shape[1])
        boxes[..., 1].clamp_(0, shape[0])
        boxes[..., 2].clamp_(0, shape[1])
        boxes[..., 3].clamp_(0, shape[0])
    else:
        boxes[..., [0, 2]] = boxes[..., [0, 2]].clip(0, shape[1])
        boxes[..., [1, 3]] = boxes[..., [1, 3]].clip(0, shape[0])


# yolov5, utils/general.py: scale_boxes (letterboxed 640x640 back to a 480x640 image)
def yolo_scale_boxes(boxes: f32[200, 6]) -> f32[200, 6]:
    boxes = boxes * 400.0 + 320.0
    img1_shape = (640, 640)
    img0_shape = (480, 640)
    gain = min(img1_shape[0] / img0_shape[0], img1_shape[1] / img0_shape[1])
    pad = (img1_shape[1] - img0_shape[1] * gain) / 2, (img1_shape[0] - img0_shape[0] * gain) / 2
    boxes[..., [0, 2]] -= pad[0]
    boxes[..., [1, 3]] -= pad[1]
    boxes[..., :4] /= gain
    _clip_boxes(boxes, img0_shape)
    return boxes


# yolov5, utils/metrics.py: bbox_iou (xywh=True, CIoU=True)
def yolo_bbox_ciou(raw1: f32[128, 4], raw2: f32[128, 4]) -> f32[128, 1]:
    box1 = torch.cat([raw1[:, :2] * 10.0, raw1[:, 2:].abs() * 5.0 + 0.5], 1)
    box2 = torch.cat([raw2[:, :2] * 10.0, raw2[:, 2:].abs() * 5.0 + 0.5], 1)
    eps = 1e-7
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
    b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
    b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * (
        b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)
    ).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
    ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
    c2 = cw**2 + ch**2 + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
    v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


# yolov5, models/yolo.py: Detect.forward (inference branch) with Detect._make_grid; 3 levels, 3 anchors, 4 classes
def yolo_detect_decode(
    x0: f32[1, 27, 8, 8], x1: f32[1, 27, 4, 4], x2: f32[1, 27, 2, 2]
) -> tuple[f32[1, 252, 9], f32[1, 3, 8, 8, 9], f32[1, 3, 4, 4, 9], f32[1, 3, 2, 2, 9]]:
    x = [x0, x1, x2]
    nc = 4
    no = nc + 5
    nl = 3
    na = 3
    anchors = torch.tensor(
        [
            [10.0, 13.0, 16.0, 30.0, 33.0, 23.0],
            [30.0, 61.0, 62.0, 45.0, 59.0, 119.0],
            [116.0, 90.0, 156.0, 198.0, 373.0, 326.0],
        ]
    ).float().view(nl, -1, 2)
    stride = torch.tensor([8.0, 16.0, 32.0])
    anchors /= stride.view(-1, 1, 1)
    z = []
    for i in range(nl):
        bs, _, ny, nx = x[i].shape
        x[i] = x[i].view(bs, na, no, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
        d = anchors[i].device
        t = anchors[i].dtype
        shape = 1, na, ny, nx, 2
        y, xs = torch.arange(ny, device=d, dtype=t), torch.arange(nx, device=d, dtype=t)
        yv, xv = torch.meshgrid(y, xs, indexing="ij")
        grid = torch.stack((xv, yv), 2).expand(shape) - 0.5
        anchor_grid = (anchors[i] * stride[i]).view((1, na, 1, 1, 2)).expand(shape)
        xy, wh, conf = x[i].sigmoid().split((2, 2, nc + 1), 4)
        xy = (xy * 2 + grid) * stride[i]
        wh = (wh * 2) ** 2 * anchor_grid
        y = torch.cat((xy, wh, conf), 4)
        z.append(y.view(bs, na * nx * ny, no))
    return torch.cat(z, 1), x[0], x[1], x[2]


# torchvision, torchvision/models/detection/rpn.py: RegionProposalNetwork._get_top_n_idx and the top-n gather of
# filter_proposals (pre_nms_top_n 20, levels of 192, 48 and 12 anchors)
def tv_rpn_top_n(objectness: f32[2, 252, 1], proposals: f32[2, 252, 4]) -> tuple[f32[2, 52], i64[2, 52], f32[2, 52, 4]]:
    num_anchors_per_level = [192, 48, 12]
    num_images = proposals.shape[0]
    device = proposals.device
    objectness = objectness.detach()
    objectness = objectness.reshape(num_images, -1)
    levels = [torch.full((n,), idx, dtype=torch.int64, device=device) for idx, n in enumerate(num_anchors_per_level)]
    levels = torch.cat(levels, 0)
    levels = levels.reshape(1, -1).expand_as(objectness)
    r = []
    offset = 0
    for ob in objectness.split(num_anchors_per_level, 1):
        num_anchors = ob.shape[1]
        pre_nms_top_n = min(20, num_anchors)
        _, top_n_idx = ob.topk(pre_nms_top_n, dim=1)
        r.append(top_n_idx + offset)
        offset += num_anchors
    top_n_idx = torch.cat(r, dim=1)
    image_range = torch.arange(num_images, device=device)
    batch_idx = image_range[:, None]
    objectness = objectness[batch_idx, top_n_idx]
    levels = levels[batch_idx, top_n_idx]
    proposals = proposals[batch_idx, top_n_idx]
    objectness_prob = torch.sigmoid(objectness)
    return objectness_prob, levels, proposals


# ssd.pytorch (amdegroot), layers/box_utils.py: point_form
def _point_form(boxes):
    return torch.cat((boxes[:, :2] - boxes[:, 2:] / 2, boxes[:, :2] + boxes[:, 2:] / 2), 1)


# ssd.pytorch (amdegroot), layers/box_utils.py: intersect and jaccard
def _jaccard(box_a, box_b):
    A = box_a.size(0)
    B = box_b.size(0)
    max_xy = torch.min(box_a[:, 2:].unsqueeze(1).expand(A, B, 2), box_b[:, 2:].unsqueeze(0).expand(A, B, 2))
    min_xy = torch.max(box_a[:, :2].unsqueeze(1).expand(A, B, 2), box_b[:, :2].unsqueeze(0).expand(A, B, 2))
    inter = torch.clamp((max_xy - min_xy), min=0)
    inter = inter[:, :, 0] * inter[:, :, 1]
    area_a = ((box_a[:, 2] - box_a[:, 0]) * (box_a[:, 3] - box_a[:, 1])).unsqueeze(1).expand_as(inter)
    area_b = ((box_b[:, 2] - box_b[:, 0]) * (box_b[:, 3] - box_b[:, 1])).unsqueeze(0).expand_as(inter)
    union = area_a + area_b - inter
    return inter / union


# ssd.pytorch (amdegroot), layers/box_utils.py: encode
def _encode(matched, priors, variances):
    g_cxcy = (matched[:, :2] + matched[:, 2:]) / 2 - priors[:, :2]
    g_cxcy /= variances[0] * priors[:, 2:]
    g_wh = (matched[:, 2:] - matched[:, :2]) / priors[:, 2:]
    g_wh = torch.log(g_wh) / variances[1]
    return torch.cat([g_cxcy, g_wh], 1)


# ssd.pytorch (amdegroot), layers/box_utils.py: match (threshold 0.5, variances (0.1, 0.2)), writing image idx of
# loc_t and conf_t in place
def ssd_match(
    raw_truths: f32[4, 4], raw_priors: f32[60, 4], labels: i64[4], loc_t: f32[2, 60, 4], conf_t: i64[2, 60],
    idx: int = 1
) -> None:
    corner = (raw_truths[:, :2] + 1.0) * 0.4
    truths = torch.cat([corner, corner + raw_truths[:, 2:].abs() * 0.3 + 0.05], 1)
    priors = torch.cat([(raw_priors[:, :2] + 1.0) * 0.5, raw_priors[:, 2:].abs() * 0.3 + 0.05], 1)
    threshold = 0.5
    variances = [0.1, 0.2]
    overlaps = _jaccard(truths, _point_form(priors))
    best_prior_overlap, best_prior_idx = overlaps.max(1, keepdim=True)
    best_truth_overlap, best_truth_idx = overlaps.max(0, keepdim=True)
    best_truth_idx.squeeze_(0)
    best_truth_overlap.squeeze_(0)
    best_prior_idx.squeeze_(1)
    best_prior_overlap.squeeze_(1)
    best_truth_overlap.index_fill_(0, best_prior_idx, 2)
    for j in range(best_prior_idx.size(0)):
        best_truth_idx[best_prior_idx[j]] = j
    matches = truths[best_truth_idx]
    conf = labels[best_truth_idx] + 1
    conf[best_truth_overlap < threshold] = 0
    loc = _encode(matches, priors, variances)
    loc_t[idx] = loc
    conf_t[idx] = conf


# DETR, models/position_encoding.py: PositionEmbeddingSine.forward (num_pos_feats 16, normalize=True)
def detr_position_embedding_sine(x: f32[2, 8, 6, 10], raw_mask: i64[2, 6, 10]) -> f32[2, 32, 6, 10]:
    mask = raw_mask > 7
    num_pos_feats = 16
    temperature = 10000
    normalize = True
    scale = 2 * math.pi
    assert mask is not None
    not_mask = ~mask
    y_embed = not_mask.cumsum(1, dtype=torch.float32)
    x_embed = not_mask.cumsum(2, dtype=torch.float32)
    if normalize:
        eps = 1e-6
        y_embed = y_embed / (y_embed[:, -1:, :] + eps) * scale
        x_embed = x_embed / (x_embed[:, :, -1:] + eps) * scale
    dim_t = torch.arange(num_pos_feats, dtype=torch.float32, device=x.device)
    dim_t = temperature ** (2 * (dim_t // 2) / num_pos_feats)
    pos_x = x_embed[:, :, :, None] / dim_t
    pos_y = y_embed[:, :, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, :, 0::2].sin(), pos_x[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos_y = torch.stack((pos_y[:, :, :, 0::2].sin(), pos_y[:, :, :, 1::2].cos()), dim=4).flatten(3)
    pos = torch.cat((pos_y, pos_x), dim=3).permute(0, 3, 1, 2)
    return pos


# ultralytics, ultralytics/utils/tal.py: make_anchors
def _make_anchors(feats, strides, grid_cell_offset=0.5):
    anchor_points, stride_tensor = [], []
    assert feats is not None
    dtype, device = feats[0].dtype, feats[0].device
    for i, stride in enumerate(strides):
        _, _, h, w = feats[i].shape
        sx = torch.arange(end=w, device=device, dtype=dtype) + grid_cell_offset
        sy = torch.arange(end=h, device=device, dtype=dtype) + grid_cell_offset
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        anchor_points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_tensor.append(torch.full((h * w, 1), stride, dtype=dtype, device=device))
    return torch.cat(anchor_points), torch.cat(stride_tensor)


# ultralytics, ultralytics/utils/tal.py: make_anchors and dist2bbox (xywh), scaled by the strides as the v8 head does
def yolov8_make_anchors_dist2bbox(
    distance: f32[2, 84, 4], f0: f32[1, 4, 8, 8], f1: f32[1, 4, 4, 4], f2: f32[1, 4, 2, 2]
) -> tuple[f32[2, 84, 4], f32[84, 2], f32[84, 1]]:
    anchor_points, stride_tensor = _make_anchors([f0, f1, f2], [8, 16, 32], 0.5)
    distance = distance.abs() * 3.0
    dim = -1
    lt, rb = distance.chunk(2, dim)
    x1y1 = anchor_points - lt
    x2y2 = anchor_points + rb
    c_xy = (x1y1 + x2y2) / 2
    wh = x2y2 - x1y1
    return torch.cat((c_xy, wh), dim) * stride_tensor, anchor_points, stride_tensor
