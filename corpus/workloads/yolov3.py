"""YOLOv3 box post-processing (anchor grid and decode, without NMS), three detection levels."""
from __future__ import annotations

import torch

ANCHORS = [[(116, 90), (156, 198), (373, 326)], [(30, 61), (62, 45), (59, 119)], [(10, 13), (16, 30), (33, 23)]]
STRIDES = [32, 16, 8]


def _decode_level(p, anchors, stride: int):
    bs, _, ny, nx = p.shape
    p = p.view(bs, 3, 85, ny, nx).permute(0, 1, 3, 4, 2).contiguous()
    yv, xv = torch.meshgrid(torch.arange(ny), torch.arange(nx), indexing="ij")
    grid = torch.stack((xv, yv), 2).view(1, 1, ny, nx, 2).float()
    anchor_grid = torch.tensor(anchors).view(1, 3, 1, 1, 2).float()
    p[..., :2].sigmoid_()
    p[..., :2] += grid
    p[..., :2] *= stride
    p[..., 2:4] = torch.exp(p[..., 2:4]) * anchor_grid
    p[..., 4:].sigmoid_()
    return p.view(bs, -1, 85)


def yolov3(p0: f32[1, 255, 10, 10], p1: f32[1, 255, 20, 20], p2: f32[1, 255, 40, 40]) -> f32[1, 6300, 85]:
    preds = [p0, p1, p2]
    outs = []
    for i in range(3):
        outs.append(_decode_level(preds[i], ANCHORS[i], STRIDES[i]))
    return torch.cat(outs, 1)
