"""SSD post-processing: six levels of class scores and box deltas decoded against generated priors, in normalized
image coordinates (scaling to pixels is left to the caller)."""
from __future__ import annotations

import torch

SIZES = [20, 10, 5, 3, 2, 1]
SCALES = [0.1, 0.2, 0.375, 0.55, 0.725, 0.9]
IMAGE = 1.0


def _priors(s: int, scale: float):
    ys, xs = torch.meshgrid(torch.arange(s), torch.arange(s), indexing="ij")
    cx = ((xs.float() + 0.5) / s).reshape(-1, 1).expand(s * s, 6)
    cy = ((ys.float() + 0.5) / s).reshape(-1, 1).expand(s * s, 6)
    ratios = torch.tensor([1.0, 2.0, 0.5, 3.0, 1.0 / 3.0, 1.0])
    w = (scale * ratios.sqrt()).expand(s * s, 6)
    h = (scale / ratios.sqrt()).expand(s * s, 6)
    return torch.stack([cx, cy, w, h], 2).reshape(-1, 4)


def _decode(loc, priors):
    boxes = torch.cat([priors[:, :2] + loc[:, :2] * 0.1 * priors[:, 2:], priors[:, 2:] * torch.exp(loc[:, 2:] * 0.2)], 1)
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    return boxes


def ssd(
    c0: f32[1, 486, 20, 20], b0: f32[1, 24, 20, 20],
    c1: f32[1, 486, 10, 10], b1: f32[1, 24, 10, 10],
    c2: f32[1, 486, 5, 5], b2: f32[1, 24, 5, 5],
    c3: f32[1, 486, 3, 3], b3: f32[1, 24, 3, 3],
    c4: f32[1, 486, 2, 2], b4: f32[1, 24, 2, 2],
    c5: f32[1, 486, 1, 1], b5: f32[1, 24, 1, 1],
) -> tuple[f32[1, 3234, 81], f32[1, 3234, 4]]:
    confs = [c0, c1, c2, c3, c4, c5]
    locs = [b0, b1, b2, b3, b4, b5]
    all_scores = []
    all_boxes = []
    for i in range(6):
        conf = confs[i].permute(0, 2, 3, 1).reshape(1, -1, 81)
        loc = locs[i].permute(0, 2, 3, 1).reshape(-1, 4)
        scores = torch.softmax(conf, dim=-1)
        boxes = _decode(loc, _priors(SIZES[i], SCALES[i])).unsqueeze(0)
        boxes[..., 0::2].clamp_(0, IMAGE)
        boxes[..., 1::2].clamp_(0, IMAGE)
        all_scores.append(scores)
        all_boxes.append(boxes)
    return torch.cat(all_scores, 1), torch.cat(all_boxes, 1)
