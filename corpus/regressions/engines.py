"""Reproductions of wrong answers the engines once gave, each kept as a check of the mechanism that fixed it."""
from __future__ import annotations

import torch


def alias_changes_in_loop(a: f32[4, 3]) -> tuple[f32[4, 3], f32[4, 3]]:
    # `v` is a view of `a` in the first iteration only: that iteration's write must reach `a`.
    v = a.view(4, 3)
    for i in range(1, 4):
        v[i].mul_(v[i - 1])
        v = torch.exp(v.clamp(max=1.0))
    return a, v


def alias_read_after_other_write(a: f32[4, 3]) -> tuple[f32[4, 3], f32[4, 3]]:
    # The first iteration's `v` sees the write through `a`; later ones hold a fresh tensor.
    v = a[:, :]
    for i in range(4):
        a[i] += 1.0
        v = v * 2.0
    return a, v


def pad_tail(x: f32[4, 8], n: int = 8) -> f32[4, 8]:
    # `x[:, 8:]` is empty: the write must store nothing (not into column 0 of the next row).
    x *= 2.0
    x[:, n:] = 0.0
    return x


def empty_views(x: f32[4, 8], n: int = 4) -> tuple[f32[4, 8], f32[4, 0], f32[4]]:
    x += 1.0
    x[n:] = 5.0
    x[1:1:2, ::3] = 7.0
    x.view(-1)[32:] = 3.0
    e = x[:, 2 * n :] * 3.0
    s = e.sum(1)
    x[:, 0] += s
    return x, e, s


def row_before_first(y: f32[6, 3]) -> f32[6, 3]:
    # At i = 0, `y[i - 1]` is the last row, as in Python.
    for i in range(3):
        y[i] += y[i - 1]
    return y


def negative_runtime_index(table: f32[5, 3], idx: i64[4]) -> tuple[f32[3], f32[5, 3]]:
    k = (idx.sum() * 0 - 2).item()
    r = table[k] * 2.0
    for i in range(4):
        table[-i] = table[-i] * 2.0 + 1.0
    return r, table


def inner_loop_reads_outer_state(a: f32[6], b: f32[6], d: f32[6]) -> f32[6]:
    # The inner loop reads the outer loop's `a` (its state from outside); the outer write to `a` must not go in
    # place before the inner loop has read it (the C plan once did, and read a + 2 for a + 1).
    for i1 in range(3):
        a.unsqueeze(1).add_(torch.full((6, 1), 1.0))
        for i2 in range(1, 6):
            b.copy_((2.0 + a[i2]) * torch.where(d[0] > d[i2 - 1], d[0], b[-5]))
    return b
