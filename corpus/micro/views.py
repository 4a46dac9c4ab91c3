"""Writes through every kind of view, overlapping views, and mutation of inputs that the caller must see."""
from __future__ import annotations

import torch


def channel_swap_normalize(src: f32[1, 32, 32, 3], mean: f32[3], scale: f32[3]) -> f32[1, 32, 32, 3]:
    dup = src.clone()
    dup[..., 0] = src[..., 2]
    dup[..., 2] = src[..., 0]
    return (dup - mean) * scale


def write_through_t(x: f32[6, 4]) -> f32[6, 4]:
    y = x.t()
    y[0] = 7.0
    y[1:3] += 1.0
    return x


def write_through_permute(x: f32[2, 3, 4]) -> f32[2, 3, 4]:
    p = x.permute(2, 0, 1)
    p[1] *= -1.0
    p[:, 0, :].fill_(3.0)
    return x


def write_through_flat_view(x: f32[4, 6]) -> f32[4, 6]:
    flat = x.view(-1)
    flat[::5] = 0.0
    flat[1:4] += 2.0
    return x


def write_through_unsqueeze(x: f32[5, 3]) -> f32[5, 3]:
    u = x.unsqueeze(0).unsqueeze(-1)
    u[0, 1:3, :, 0] = 9.0
    u[..., 0].relu_()
    return x


def strided_slices(x: f32[9, 10]) -> f32[9, 10]:
    x[:, ::2] *= 2.0
    x[1::3].clamp_(min=0.0)
    x[::4, 1::3] = -5.0
    return x


def overlapping_views(x: f32[10, 4]) -> f32[10, 4]:
    a = x[0:6]
    b = x[4:10]
    a += 1.0
    b *= 2.0
    a[5] -= 3.0
    return x


def mutate_inputs(x: f32[4, 5], y: f32[5]):
    x.mul_(2.0)
    x[0] = 0.0
    y.add_(x[1])


def return_mutated_input(x: f32[3, 7]) -> f32[3, 7]:
    x.add_(1.0)
    x[:, 0] = x[:, 1]
    return x


def reshape_alias(x: f32[4, 6]) -> tuple[f32[4, 6], f32[24]]:
    y = x.reshape(-1)
    y += 1.0
    z = x.t().reshape(-1)
    z += 100.0
    return x, z


def diagonal_writes(x: f32[5, 5]) -> f32[5, 5]:
    x.diagonal().fill_(1.0)
    x.diagonal(1).add_(10.0)
    x.diagonal(-2).mul_(0.0)
    return x


def chunk_narrow_select(x: f32[6, 8], y: f32[8]) -> f32[6, 8]:
    a, b = x.chunk(2, 1)
    a.sigmoid_()
    b.relu_()
    x.narrow(0, 2, 3).mul_(3.0)
    x.select(0, 5).copy_(y)
    for part in x.split(2, 0):
        part[0] -= 1.0
    return x


def expand_read_then_clone_write(x: f32[1, 6], y: f32[4, 6]) -> f32[4, 6]:
    e = x.expand(4, 6)
    z = e.clone()
    z += y
    z[0] = e[1] * 2.0
    return z


def swap_rows(x: f32[4, 3]) -> f32[4, 3]:
    x[0], x[1] = x[1], x[0]
    x[[2, 3]] = x[[3, 2]]
    return x


def flatten_transpose_matmul(x: f32[2, 3, 4], w: f32[12, 5]) -> f32[2, 5]:
    flat = x.flatten(1)
    out = flat @ w
    out.t()[0] += 1.0
    return out
