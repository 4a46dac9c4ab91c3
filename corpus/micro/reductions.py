"""Reductions and matmuls sized for the GPU layouts: long reductions with few outputs (block reductions), ties and NaN
in max/min and argmax/argmin, integer and boolean folds, and matmuls big enough to tile, with prologues and
epilogues. Inputs are uniform in [-1, 1)."""
from __future__ import annotations

import torch


def long_sums(x: f32[6, 3000]) -> tuple[f32[6], f32[6], f32[3000], f32[()], i64[6]]:
    return x.sum(dim=1), x.mean(dim=1), x.sum(dim=0), (x * x).sum(), (x > 0).long().sum(dim=1)


def ties_and_nan(x: f32[5, 700]) -> tuple[i64[5], i64[5], f32[5], f32[5], i64[5], f32[5], i64[5]]:
    q = torch.floor(x * 3.0)
    n = torch.where(x > 0.99, (x - x) / (x - x), x)
    return q.argmax(dim=1), q.argmin(dim=1), q.amax(dim=1), n.amax(dim=1), n.argmax(dim=1), n.amin(dim=1), n.argmin(dim=1)


def ties_and_nan_across_rows(
    x: f32[300, 24], y: f32[1, 81, 40]
) -> tuple[i64[24], i64[24], f32[24], f32[24], i64[24], f32[24], i64[24], f32[1, 1, 40], i64[1, 1, 40], f32[24]]:
    # Reductions over the leading dim: each output's row of inputs is strided, and neighbouring outputs are
    # neighbours in memory (the C backend keeps one accumulator per output of a row).
    q = torch.floor(x * 3.0)
    n = torch.where(x > 0.99, (x - x) / (x - x), x)
    m = torch.where(y > 0.995, (y - y) / (y - y), y)
    return (
        q.argmax(dim=0),
        q.argmin(dim=0),
        q.amax(dim=0),
        n.amax(dim=0),
        n.argmax(dim=0),
        n.amin(dim=0),
        n.argmin(dim=0),
        m.amax(dim=1, keepdim=True),
        y.argmax(dim=1, keepdim=True),
        (x * 0.5).prod(dim=0) + x.mean(dim=0),
    )


def folds(x: f32[4, 900]) -> tuple[f32[4], bool[4], bool[4], f32[4, 900]]:
    p = (1.0 + x * 0.01).prod(dim=1)
    return p, (x > 0.995).any(dim=1), (x > -0.999).all(dim=1), torch.softmax(x * 4.0, dim=1)


def tiled_matmuls(
    a: f32[70, 50], b: f32[50, 40], bias: f32[40], c: f32[3, 33, 20], d: f32[3, 20, 17], v: f32[300], w: f32[300, 8]
) -> tuple[f32[70, 40], f32[3, 33, 17], f32[8]]:
    y = torch.relu(a @ b + bias)
    z = torch.sigmoid(c * 2.0) @ (d - 1.0)
    return y, z * 0.5, torch.tanh(v @ w)
