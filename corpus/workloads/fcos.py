"""FCOS post-processing: a point grid written column by column into a zeros buffer, distance-to-box decode with
strided clamps, and class scores scaled in place by centerness."""
from __future__ import annotations

import torch

SIZES = [40, 20, 10, 5, 3]
STRIDES = [8, 16, 32, 64, 128]
IMAGE = 320.0


def _points(s: int, stride: int):
    shifts = torch.zeros(s * s, 2)
    xs = torch.arange(s) * stride + stride // 2
    xx = xs.repeat(s)
    yy = xs.view(-1, 1).repeat(1, s).view(-1)
    shifts[:, 0].copy_(xx)
    shifts[:, 1].copy_(yy)
    return shifts


def fcos(
    c0: f32[1, 80, 40, 40], b0: f32[1, 4, 40, 40], n0: f32[1, 1, 40, 40],
    c1: f32[1, 80, 20, 20], b1: f32[1, 4, 20, 20], n1: f32[1, 1, 20, 20],
    c2: f32[1, 80, 10, 10], b2: f32[1, 4, 10, 10], n2: f32[1, 1, 10, 10],
    c3: f32[1, 80, 5, 5], b3: f32[1, 4, 5, 5], n3: f32[1, 1, 5, 5],
    c4: f32[1, 80, 3, 3], b4: f32[1, 4, 3, 3], n4: f32[1, 1, 3, 3],
) -> tuple[f32[2134, 4], f32[2134, 80]]:
    clss = [c0, c1, c2, c3, c4]
    regs = [b0, b1, b2, b3, b4]
    ctrs = [n0, n1, n2, n3, n4]
    all_boxes = []
    all_scores = []
    for i in range(5):
        points = _points(SIZES[i], STRIDES[i])
        reg = torch.exp(regs[i].permute(0, 2, 3, 1).reshape(-1, 4)) * STRIDES[i]
        boxes = torch.stack(
            [points[:, 0] - reg[:, 0], points[:, 1] - reg[:, 1], points[:, 0] + reg[:, 2], points[:, 1] + reg[:, 3]], dim=1
        )
        boxes[:, 0::2].clamp_(min=0, max=IMAGE)
        boxes[:, 1::2].clamp_(min=0, max=IMAGE)
        scores = clss[i].permute(0, 2, 3, 1).reshape(-1, 80).sigmoid()
        centerness = ctrs[i].permute(0, 2, 3, 1).reshape(-1, 1).sigmoid()
        scores *= centerness
        scores.sqrt_()
        all_boxes.append(boxes)
        all_scores.append(scores)
    return torch.cat(all_boxes), torch.cat(all_scores)
