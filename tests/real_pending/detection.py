"""Detection post-processing ported from torchvision, detectron2, mmdetection and yolov5, written as those projects
write it; funcfuse refuses it on some engine today (see STATUS.md). Inputs arrive uniform in [-1, 1); each program
first turns them into valid boxes (x1 < x2, y1 < y2, pixel coordinates) where the original expects them."""
from __future__ import annotations

import math

import numpy as np
import torch


def _xyxy(raw, size: float):
    # Valid (x1, y1, x2, y2) boxes from uniform inputs: corners in [0, 2*size), sides in [1, size + 1).
    xy = (raw[:, :2] + 1.0) * size
    wh = raw[:, 2:].abs() * size + 1.0
    return torch.cat([xy, xy + wh], 1)


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


# yolov5, utils/general.py: xywh2xyxy
def yolo_xywh2xyxy(x: f32[300, 4]) -> f32[300, 4]:
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2
    y[..., 1] = x[..., 1] - x[..., 3] / 2
    y[..., 2] = x[..., 0] + x[..., 2] / 2
    y[..., 3] = x[..., 1] + x[..., 3] / 2
    return y


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


# yolov5, utils/general.py: non_max_suppression, the per-image candidate filtering before torchvision.ops.nms
def yolo_nms_candidates(prediction: f32[1, 200, 9]) -> f32[1, 200, 6]:
    prediction = (prediction + 1.0) * 0.5
    conf_thres = 0.25
    bs = prediction.shape[0]
    nc = prediction.shape[2] - 5
    xc = prediction[..., 4] > conf_thres
    mi = 5 + nc
    out = torch.zeros(bs, prediction.shape[1], 6)
    for xi, x in enumerate(prediction):
        x = x[xc[xi]]
        x[:, 5:] *= x[:, 4:5]
        box = yolo_xywh2xyxy(x[:, :4])
        conf, j = x[:, 5:mi].max(1, keepdim=True)
        x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]
        n = x.shape[0]
        out[xi, :n] = x[x[:, 4].argsort(descending=True)]
    return out


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


# ssd.pytorch (amdegroot), layers/box_utils.py: log_sum_exp; layers/modules/multibox_loss.py: MultiBoxLoss.forward,
# the hard negative mining (negpos_ratio 3) up to the neg mask
def ssd_hard_negative_mining(
    conf_data: f32[2, 60, 5], raw_conf_t: i64[2, 60]
) -> tuple[f32[2, 60], bool[2, 60], i64[2, 1]]:
    conf_t = (raw_conf_t >= 7).long() * (raw_conf_t - 6)
    num = conf_data.size(0)
    num_classes = 5
    negpos_ratio = 3
    pos = conf_t > 0
    batch_conf = conf_data.view(-1, num_classes)
    x = batch_conf
    x_max = x.data.max()
    lse = torch.log(torch.sum(torch.exp(x - x_max), 1, keepdim=True)) + x_max
    loss_c = lse - batch_conf.gather(1, conf_t.view(-1, 1))
    loss_c[pos.view(-1, 1)] = 0
    loss_c = loss_c.view(num, -1)
    _, loss_idx = loss_c.sort(1, descending=True)
    _, idx_rank = loss_idx.sort(1)
    num_pos = pos.long().sum(1, keepdim=True)
    num_neg = torch.clamp(negpos_ratio * num_pos, max=pos.size(1) - 1)
    neg = idx_rank < num_neg.expand_as(idx_rank)
    return loss_c, neg, num_neg


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
