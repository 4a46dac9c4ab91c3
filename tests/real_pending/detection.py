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
        [[10.0, 13.0, 16.0, 30.0, 33.0, 23.0], [30.0, 61.0, 62.0, 45.0, 59.0, 119.0], [116.0, 90.0, 156.0, 198.0, 373.0, 326.0]]
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
