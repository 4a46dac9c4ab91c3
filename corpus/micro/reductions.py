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


def max_values_at_indices(
    x: f32[6, 81, 40], y: f32[7, 30]
) -> tuple[f32[40, 80], i64[40, 80], f32[6, 1, 40], i64[6, 1, 40], f32[7], i64[7], f32[30], i64[30]]:
    # A max's values are read at its indices (one reduction for both): the values of a softmax over a transposed
    # input are computed only at the indices; ties (floor) and NaN rows pick PyTorch's first index, and the values
    # are the elements there. Min alike, over the other dim, with keepdim.
    s = torch.softmax(x[0].permute(1, 0), dim=1)[:, 1:]
    best = s.max(dim=1)
    q = torch.floor(x * 4.0)
    lo, lo_i = q.min(dim=1, keepdim=True)
    n = torch.where(y > 0.9, (y - y) / (y - y), y)
    nv, ni = torch.max(n, 1)
    mv, mi = n.min(dim=0)
    return best.values.expand(80, 40).t() * 1.0, best.indices.expand(80, 40).t() * 1, lo, lo_i, nv, ni, mv, mi


def max_values_in_a_loop(x: f32[8, 10, 6]) -> tuple[f32[8, 10], i64[8, 10]]:
    # Each step's max and argmax over rows: the loop becomes one batched max (values read at the indices).
    out = torch.zeros(8, 10)
    idx = torch.zeros(8, 10, dtype=torch.long)
    for t in range(8):
        v, i = x[t].max(dim=1)
        out[t] = v
        idx[t] = i
    return out, idx
