"""Reductions, promotion and elementwise math as post-processing code uses them, with helper functions inlined."""
from __future__ import annotations

import torch


def _normalize(x, eps: float = 1e-5):
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + eps)


def _gelu_block(x, w):
    return torch.nn.functional.gelu(_normalize(x) @ w)


def helpers_inlined(x: f32[8, 32], w: f32[32, 16]) -> f32[8, 16]:
    return _gelu_block(x, w)


def reductions(x: f32[6, 9]) -> tuple[f32[6], i64[6], f32[9], f32[()], i64[()], bool[6], f32[6, 9]]:
    v, i = x.max(dim=1)
    col_min = x.min(0).values
    total = x.sum()
    flat_arg = x.argmax()
    any_big = (x > 0.9).any(dim=1)
    c = x.cumsum(1)
    return v, i, col_min, total, flat_arg, any_big, c


def promotion(a: f32[4], b: i64[4], m: bool[4]) -> tuple[f32[4], i64[4], f32[4], i64[4], f32[4], i64[4]]:
    return a + b, b * 3, b / 2, b // 3, m * a, m + b


def integer_ops(b: i64[10], c: i32[10]) -> tuple[i64[10], i32[10], i64[10], bool[10]]:
    d = b % 3 - 1
    c += 2
    e = (b + c) * d
    return d, c, e, (b > 4) & (c < 7)


def matmul_epilogue(x: f32[16, 32], w: f32[32, 24], bias: f32[24]) -> f32[16, 24]:
    y = x @ w
    y += bias
    y.relu_()
    return y


def softmax_stable(x: f32[4, 50]) -> tuple[f32[4, 50], f32[4, 50]]:
    m = x.amax(dim=1, keepdim=True)
    e = torch.exp(x - m)
    return e / e.sum(dim=1, keepdim=True), torch.log_softmax(x, dim=1)


def box_clip(boxes: f32[100, 4], w: float = 0.8, h: float = 0.6) -> f32[100, 4]:
    boxes[:, 0::2].clamp_(min=-0.5, max=w)
    boxes[:, 1::2].clamp_(-0.5, h)
    widths = boxes[:, 2] - boxes[:, 0]
    boxes[widths < 0] = 0.0
    return boxes


def creation_ops(x: f32[3, 4]) -> tuple[f32[3, 4], i64[5], f32[4], f32[2, 3], f32[3, 4]]:
    a = torch.zeros_like(x) + torch.ones(3, 4) * 2
    r = torch.arange(5) * 2
    l = torch.linspace(0.0, 1.0, 4)
    f = torch.full((2, 3), 1.5)
    e = torch.where(x > 0, x, torch.zeros(3, 4)).exp()
    return a, r, l, f, e


def select_by_mask(x: f32[16, 16], y: f32[4, 2, 4]) -> tuple[f32[16, 16], f32[4, 2, 4]]:
    # A select on a byte mask in short nested loops (the eager plan stores the mask): GCC 12.2 miscompiled it once
    # it unrolled the innermost loop and vectorized the one around it.
    m = x > x.t()
    n = y > (y - 0.25).flip(0)
    return torch.where(m, x, torch.full((16, 16), -0.5)), torch.where(n, y, y * 2.0)


def integer_division_by_constants(x: f32[6, 50]) -> tuple[i64[6, 50], i64[6, 50], i64[6, 50], i64[6, 50], i64[6, 50]]:
    # Integer //, % and fmod by constants other than 0 and -1 run as kernels (a beam search's `idx // vocab`).
    a = (x * 100.0).long()
    return a // 7, a // -3, torch.fmod(a, 5), torch.remainder(a, -4), a % 3
