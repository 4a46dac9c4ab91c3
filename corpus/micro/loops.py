"""Loops with in-place writes: shifted rows, prefix sums that must stay sequential, lists built in loops."""
from __future__ import annotations

import torch


def shift_rows(a: f32[64, 512], b: f32[64, 512], n: int = 10) -> tuple[f32[64, 512], f32[64, 512]]:
    for i in range(n):
        b[i] += 1.0
        a[i].copy_(b[i + 1])
    return a, b


def shift_rows_long(a: f32[10001, 8], b: f32[10001, 8], n: int = 10000) -> tuple[f32[10001, 8], f32[10001, 8]]:
    for i in range(n):
        b[i] += 1.0
        a[i].copy_(b[i + 1])
    return a, b


def prefix_sum(y: f32[32, 16]) -> f32[32, 16]:
    for i in range(1, 32):
        y[i] += y[i - 1]
    return y


def list_cat(x: f32[8, 16]) -> f32[8, 32]:
    parts = []
    for i in range(8):
        row = x[i] * (i + 1)
        parts.append(torch.cat([row, row.sigmoid()]))
    return torch.stack(parts)


def list_mutated_after_append(x: f32[4, 8]) -> f32[16, 8]:
    outs = []
    h = torch.zeros(8)
    for i in range(4):
        h = h + x[i]
        outs.append(h)
        h += 1.0
    rows = [o.unsqueeze(0).expand(4, 8) for o in outs]
    return torch.cat(rows, 0)


def rows_iteration(x: f32[6, 5]) -> f32[6, 5]:
    for r in x:
        r += r.sum()
    return x


def nested_loops(acc: f32[4, 6, 8], w: f32[8, 8]) -> f32[4, 6, 8]:
    for i in range(4):
        for j in range(6):
            acc[i, j] = torch.tanh(acc[i, j] @ w)
    return acc


def loop_carried_state(x: f32[20, 16]) -> tuple[f32[16], f32[20, 16]]:
    h = torch.zeros(16)
    out = torch.zeros(20, 16)
    for t in range(20):
        h = torch.tanh(h * 0.5 + x[t])
        out[t] = h
    return h, out


def inner_loop_invariant_init(x: f32[4, 3]) -> f32[4, 3]:
    # The inner loop starts from a fresh value each time but reads the outer loop's variable: it must run again
    # in every outer iteration, not once.
    out = torch.zeros(4, 3)
    for i in range(4):
        s = torch.zeros(3)
        for j in range(2):
            s = s + x[i] * (j + 1)
        out[i] = s
    return out
