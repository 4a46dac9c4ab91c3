"""Python and PyTorch that real code uses, added after held-out rounds 34 and 35: index tensors next to index lists
of data-dependent length where their broadcast does not depend on the length (chameleon's
`logits[torch.where(mask)[0].unsqueeze(1), token_ids] = -inf`), read and written on every engine.
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
