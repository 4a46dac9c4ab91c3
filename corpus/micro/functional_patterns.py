"""Writes through views inside loops and branches, and mutated inputs: patterns the functionalizer must keep exact."""
from __future__ import annotations
import torch


def t_writes(x: f32[5, 7]) -> f32[5, 7]:
    y = x.t()
    for i in range(3):
        y[i] = y[i + 2] * 0.5
    y[:, 1::2].relu_()
    return x


def permute_loop(x: f32[2, 3, 4]) -> f32[2, 3, 4]:
    p = x.permute(2, 0, 1)
    for k in range(4):
        p[k] += k
    p[..., 0].mul_(-1.0)
    return x


def flat_unsqueeze(x: f32[3, 8]) -> tuple[f32[3, 8], f32[24]]:
    f = x.view(-1)
    for i in range(0, 24, 5):
        f[i] = -1.0
    u = x.unsqueeze(1)
    u[:, 0, ::3] += 10.0
    return x, f


def overlapping(x: f32[12]) -> f32[12]:
    a = x[0:8]
    b = x[4:12]
    for i in range(4):
        a[i] += b[i]
        b[i + 4] *= 2.0
    return x


def mutate_in_loop_and_branch(x: f32[6, 3], y: f32[3]):
    for i in range(6):
        if i % 2 == 0:
            x[i] += y
        else:
            x[i] -= y
    if x.mean() > 0:
        y.zero_()
    else:
        y.fill_(1.0)


def carry_and_mutate_after(x: f32[4, 4]) -> f32[4, 4]:
    h = torch.zeros(4)
    for i in range(4):
        h = h * 0.5 + x[i]
    h[0] = 100.0
    x[0] = h
    return x


def kv_update(cache: f32[2, 10, 8], new: f32[2, 8], pos: int = 3) -> f32[2, 10, 8]:
    cache[:, pos] = new
    cache[:, pos + 1 :] = 0.0
    return cache.softmax(dim=-1)


def diag_chain(x: f32[6, 6]) -> f32[6, 6]:
    d = x.diagonal()
    for i in range(5):
        d[i + 1] += d[i]
    return x
