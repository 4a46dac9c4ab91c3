"""Small reductions and small values computed by the kernels that read them, before their loop nests (a softmax's
max and sum over a short vector, then the softmax itself, read by a GEMV), and the cases that must stay kernels of
their own: a reduction over something written in place later, one computed before a loop and read inside it, one
the host reads."""
from __future__ import annotations

import torch


def softmax_then_gemv(memory: f32[12, 16], w: f32[16, 16], h: f32[1, 16]) -> tuple[f32[5, 16], f32[1, 16]]:
    # An attention step: the energies' softmax and its max and sum are computed by the GEMV that reads them.
    out = torch.zeros(5, 16)
    for t in range(5):
        energy = memory @ (h @ w)[0]
        attn = torch.softmax(energy, dim=0)
        ctx = (attn @ memory).unsqueeze(0)
        out[t] = ctx[0]
        h = torch.tanh(h + ctx)
    return out, h


def stats_read_by_two_kernels(x: f32[40], y: f32[3, 40]) -> tuple[f32[40], f32[3, 40]]:
    # Each reader computes the mean and the variance itself (the variance reads the mean).
    m = x.mean()
    v = ((x - m) ** 2).mean()
    a = (x - m) / torch.sqrt(v + 1e-5)
    b = y * m + v
    return a * 2.0, torch.relu(b)


def row_max_read_per_row(x: f32[4, 9]) -> f32[4, 9]:
    # A pre of four elements, read at the reader's row.
    m = x.amax(dim=1, keepdim=True)
    return torch.exp(x - m)


def sum_of_a_written_buffer(x: f32[10]) -> tuple[f32[10], f32[10]]:
    # The sum reads `x`'s buffer, which a later write changes: it must be computed before that write.
    x = x.clone()
    s = x.sum()
    x[3] = 100.0
    return x * s, x + 1.0


def reduction_before_a_loop(x: f32[8], y: f32[8]) -> f32[8]:
    # Computed once before the loop, read in it: it stays a kernel (a pre would recompute it every iteration).
    s = x.max()
    for _ in range(3):
        y = torch.tanh(y * s + x)
    return y


def argmax_compared_with_positions(x: f32[6, 5]) -> tuple[f32[6, 5], i64[6]]:
    # An integer pre read as a value.
    k = x.argmax(dim=1)
    pos = torch.arange(5)
    return torch.where(pos == k.unsqueeze(1), x, 0.0), k


def all_positive_rows(x: f32[4, 7]) -> f32[4, 7]:
    # A boolean pre.
    ok = (x > -1.0).all(dim=1, keepdim=True)
    return torch.where(ok, x, -x)


def normalized_then_summed(x: f32[30]) -> f32[()]:
    # A reduction reading a pre at its own fold variable.
    p = torch.exp(x) / torch.exp(x).sum()
    return (p * x).sum()


def empty_sum_read_by_a_kernel(x: f32[4, 6]) -> f32[4, 6]:
    s = x[:, :0].sum(dim=1, keepdim=True)
    return x + s


def written_in_place_with_its_stats(x: f32[6, 8]) -> f32[6, 8]:
    # `out[t] = ...` writes in place; the value it writes reads a pre over the row.
    out = torch.zeros(6, 8)
    for t in range(6):
        r = x[t]
        out[t] = r - r.max()
    return out


def chain_of_pres(x: f32[64, 64], y: f32[4, 64]) -> f32[4, 64]:
    # Each sum reads the one before: the reader's pres together stay within their bound.
    a = x.sum(0)
    b = (x * a).sum(0)
    c = (x * b).sum(0)
    return y * c


def energies_softmax_context(memory: f32[50, 64], v: f32[64]) -> f32[64]:
    # A GEMV of 50 by 64, its softmax and the context that reads it: one kernel.
    e = memory @ v
    attn = torch.softmax(e, dim=0)
    return attn @ memory
