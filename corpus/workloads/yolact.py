"""YOLACT box and mask post-processing: per-level decode with strided clamps, fast-NMS IoU matrix, and crop masks
for the leading detections (the data-dependent selection itself stays outside, as in the reference work)."""
from __future__ import annotations

import torch

SIZES = [40, 20, 10, 5, 3]
K = 24


def _decode(loc, s: int):
    ys, xs = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    cx = ((xs.float() + 0.5) / s).reshape(-1, 1).expand(s * s, 3).reshape(-1)
    cy = ((ys.float() + 0.5) / s).reshape(-1, 1).expand(s * s, 3).reshape(-1)
    wh = 24.0 / (s * 8.0)
    boxes = torch.zeros(s * s * 3, 4)
    boxes[:, 0] = cx + loc[:, 0] * 0.1 * wh
    boxes[:, 1] = cy + loc[:, 1] * 0.1 * wh
    boxes[:, 2] = wh * torch.exp(loc[:, 2] * 0.2)
    boxes[:, 3] = wh * torch.exp(loc[:, 3] * 0.2)
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    boxes[:, 0::2].clamp_(0.0, 1.0)
    boxes[:, 1::2].clamp_(0.0, 1.0)
    return boxes


def _iou(a, b):
    x1 = torch.maximum(a[:, None, 0], b[None, :, 0])
    y1 = torch.maximum(a[:, None, 1], b[None, :, 1])
    x2 = torch.minimum(a[:, None, 2], b[None, :, 2])
    y2 = torch.minimum(a[:, None, 3], b[None, :, 3])
    inter = (x2 - x1).clamp(min=0) * (y2 - y1).clamp(min=0)
    area_a = (a[:, 2] - a[:, 0]) * (a[:, 3] - a[:, 1])
    area_b = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    return inter / (area_a[:, None] + area_b[None, :] - inter + 1e-6)


def _crop(masks, boxes):
    h, w, n = masks.shape
    x1 = boxes[:, 0] * w
    x2 = boxes[:, 2] * w
    y1 = boxes[:, 1] * h
    y2 = boxes[:, 3] * h
    rows = torch.arange(w).view(1, -1, 1).expand(h, w, n)
    cols = torch.arange(h).view(-1, 1, 1).expand(h, w, n)
    left = rows >= x1.view(1, 1, -1)
    right = rows < x2.view(1, 1, -1)
    up = cols >= y1.view(1, 1, -1)
    down = cols < y2.view(1, 1, -1)
    crop = left * right * up * down
    return masks * crop.float()


def yolact(
    l0: f32[1, 12, 40, 40], c0: f32[1, 243, 40, 40], k0: f32[1, 96, 40, 40],
    l1: f32[1, 12, 20, 20], c1: f32[1, 243, 20, 20], k1: f32[1, 96, 20, 20],
    l2: f32[1, 12, 10, 10], c2: f32[1, 243, 10, 10], k2: f32[1, 96, 10, 10],
    l3: f32[1, 12, 5, 5], c3: f32[1, 243, 5, 5], k3: f32[1, 96, 5, 5],
    l4: f32[1, 12, 3, 3], c4: f32[1, 243, 3, 3], k4: f32[1, 96, 3, 3],
    proto: f32[1, 32, 80, 80],
):
    locs = [l0, l1, l2, l3, l4]
    confs = [c0, c1, c2, c3, c4]
    coefs = [k0, k1, k2, k3, k4]
    boxes = []
    scores = []
    coeffs = []
    for i in range(5):
        loc = locs[i].permute(0, 2, 3, 1).reshape(-1, 4)
        boxes.append(_decode(loc, SIZES[i]))
        scores.append(torch.softmax(confs[i].permute(0, 2, 3, 1).reshape(-1, 81), dim=1))
        coeffs.append(torch.tanh(coefs[i].permute(0, 2, 3, 1).reshape(-1, 32)))
    boxes = torch.cat(boxes, 0)
    scores = torch.cat(scores, 0)
    coeffs = torch.cat(coeffs, 0)
    det_boxes = boxes[:K]
    det_coeffs = coeffs[:K]
    iou = _iou(det_boxes, det_boxes)
    iou.triu_(diagonal=1)
    iou_max = iou.max(dim=0).values
    keep = iou_max <= 0.5
    protos = proto[0].permute(1, 2, 0)
    masks = torch.sigmoid(protos @ det_coeffs.t())
    masks = _crop(masks, det_boxes)
    best = scores[:, 1:].max(dim=1)
    return boxes, best.values, best.indices, keep, masks
