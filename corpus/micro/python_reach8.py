"""Python and PyTorch that real code uses, added after held-out rounds 34 and 35: index tensors next to index lists
of data-dependent length where their broadcast does not depend on the length (chameleon's
`logits[torch.where(mask)[0].unsqueeze(1), token_ids] = -inf`), read and written on every engine; mmdetection's
`pos_inds = torch.nonzero(gt_inds > 0, as_tuple=False).squeeze()` (0-d where one anchor is positive), as an index read
and written, in arithmetic, `numel()` and sums, with none, one and several positives.
"""

from __future__ import annotations

import math

import torch


def write_rows_cols(logits: f32[4, 10], s: f32[4]) -> f32[4, 10]:
    """facebookresearch/chameleon, logits_processor.py: DisallowTokensInIndexRangeLogitsProcessor's write."""
    tok = torch.tensor([1, 7, 7])
    logits[torch.where(s > 0)[0].unsqueeze(1), tok] = -math.inf
    return logits


def write_rows_cols_values(logits: f32[5, 6], s: f32[5], v: f32[3]) -> f32[5, 6]:
    tok = torch.tensor([0, 2, 5])
    rows = torch.where(s > -0.2)[0]
    logits[rows[:, None], tok] = v
    return logits


def read_rows_cols(x: f32[6, 5], s: f32[6]) :
    cols = torch.tensor([[4, 0, 2]])
    rows = torch.where(s > 0)[0].unsqueeze(-1)
    g = x[rows, cols]
    return g.sum(), (g * 2).amax(1).sum()


def write_3d(x: f32[2, 4, 5], s: f32[4]) -> f32[2, 4, 5]:
    tok = torch.tensor([3, 1])
    x[:, torch.where(s < 0.3)[0].unsqueeze(1), tok] = 0.5
    return x


def _assign(gt_inds, gt_labels, scores):
    # open-mmlab/mmdetection, max_iou_assigner.py: assign_wrt_overlaps's labels of the positive anchors.
    labels = gt_inds.new_full((gt_inds.shape[0],), -1)
    pos_inds = torch.nonzero(gt_inds > 0, as_tuple=False).squeeze()
    if pos_inds.numel() > 0:
        labels[pos_inds] = gt_labels[gt_inds[pos_inds] - 1]
    w = scores.new_zeros(scores.shape)
    w[pos_inds] = scores[pos_inds].sigmoid() * 2 + 1
    total = (scores[pos_inds] * 3).sum() + pos_inds.float().mean() * 0
    return labels, w, total


def assign_one(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = torch.where(torch.arange(12) == 5, 2, 0)
    return _assign(gt_inds, gt_labels, scores)


def assign_many(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = (a * 3).long().clamp(0, 3)
    return _assign(gt_inds, gt_labels, scores)


def assign_none(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = (a * 0).long()
    return _assign(gt_inds, gt_labels, scores)


def squeezed_where(x: f32[6, 5], s: f32[6]) -> f32[6, 5]:
    rows = torch.where(s > s.max() - 1e-6)[0].unsqueeze(1).squeeze()
    x[rows] = x[rows].clamp(min=0.1) - 2.0
    x[rows, 2] += 1
    return x
