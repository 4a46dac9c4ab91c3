"""Python and PyTorch spellings that held-out real code (round 19) used: `Tensor.diff`, `sorted` and Python's ordering
of tuples, `p.data -= x`, `torch.jit.annotate`, numpy's `abs` of a helper's number, and a named tuple returned as
it is."""

from __future__ import annotations

from typing import List

import numpy as np
import torch


def diffs(x: f32[3, 6], m: bool[5], k: i64[4]) -> tuple[f32[3, 4], f32[2, 6], f32[3, 8], bool[4], i64[3]]:
    """`diff` (text-generation-webui's tail-free sampling: `probs.diff().diff()`), along the last dim twice, along
    dim 0, with `prepend`/`append`, of bools (whether neighbours differ) and of integers."""
    a = x.diff().diff().abs()
    b = torch.diff(x, dim=0)
    c = x.diff(prepend=x[:, :1] * 2.0, append=x[:, -2:])
    return a, b, c, m.diff(), torch.diff(k)


def _scale(x, c):
    return x * np.abs(c)


def sorting_and_tuple_order(g: f32[6, 4]) -> tuple[f32[1, 4], f32[6, 4], f32[6, 4]]:
    """`sorted` over (size, dim) pairs (timm's Adafactor picks its factored dims so), tuple comparisons, and numpy's
    `abs` of a helper's parameter (mmrotate's `np.abs(np.log(wh_ratio_clip))`)."""
    dims = sorted(((n, i) for i, n in enumerate(g.shape)))
    big = sorted([3, 1, 2], reverse=True)
    y = g.mean(dim=dims[-1][1], keepdim=True)
    z = g * big[0] if (6, 0) > (4, 1) and "ab" < "b" else g
    return y, z, _scale(g, -0.5)


def data_and_jit_annotate(p: f32[3, 4], x: f32[2, 4]) -> tuple[f32[3, 4], f32[2, 4]]:
    """`p.data -= x` and `p.data /= n` (Nero's update), and `torch.jit.annotate(List[Tensor], [])` (torchrecurrent's
    layer loop)."""
    p.data -= p.mean() * 0.5
    p.data /= 2.0
    outs = torch.jit.annotate(List[torch.Tensor], [])
    for i in range(2):
        outs.append(x[i] * (i + 1))
    return p, torch.stack(outs)


def returns_a_named_tuple(x: f32[2, 12]) -> tuple[f32[2, 3], i64[2, 3]]:
    """`return torch.topk(x, 3)`: the named tuple returns as the tuple it is."""
    return torch.topk(x * 2.0, 3)


def max_of_a_run_time_count(x: f32[8]) -> tuple[f32[()], f32[()], i64[3]]:
    """`loss / max(1, num_foreground)` (torchvision's FCOS loss), with `num_foreground` from `.item()`: outside a loop
    the chosen int is known when the program runs; also `min` and a count that is 0."""
    n = (x > 0.0).sum().item()
    none = (x > 5.0).sum().item()
    k = min(n, 3, 7 - none)
    return x.sum() / max(1, n), x.sum() / max(1, none), torch.arange(3) + k
