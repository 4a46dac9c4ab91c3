"""Programs the differential fuzzer (`funcfuse fuzz`) found refused or wrong, reduced, each named for what it holds.

A name bound in the two arms of an `if` on a run-time value to views with different strides (a strided view of one
tensor in one arm, a fresh contiguous tensor or a transposed view in the other): PyTorch runs it, and later reads
and writes go through whichever view the taken arm chose (fuzz seeds 831, 1753, 6008, 6291, 9145)."""
from __future__ import annotations

import torch


def strided_view_or_fresh_by_data(a: f32[3, 4], s: f32[4]) -> tuple[f32[3, 4], f32[2], f32[2]]:
    # Seed 831: `v` is a stride-2 view of `t` or a fresh tensor, decided by data; then written and read.
    t = torch.tanh(a).relu()
    acc = torch.zeros(2)
    for i in range(4):
        v = t.view(-1).chunk(3, 0)[2][-4::2]
        if s[i] > 0.0:
            v = v * 0.5 + (v * v - v)
        v += 1.0
        acc = acc + v * 2.0
    return t, v, acc


def strided_views_of_two_tensors_by_data(a: f32[2, 3], b: f32[3, 2], s: f32[4]) -> tuple[f32[2, 3], f32[3, 2], f32[3]]:
    # A column of `a` (stride 3) in one arm, a transposed row of `b` (stride 1) in the other.
    acc = torch.zeros(3)
    for i in range(4):
        if s[i] > 0.0:
            v = a[i % 2]
        else:
            v = b.t()[i % 2]
        v.mul_(2.0)
        v[1:] += 1.0
        acc = acc + v.relu()
    return a, b, acc


def transposed_or_fresh_by_data(d: f32[1, 3, 2], s: f32[3]) -> tuple[f32[1, 3, 2], f32[2, 3, 1]]:
    # Seed 9145: a transposed view of `d` or of a softmax made before the `if`; elementwise results keep the chosen
    # view's layout.
    v1 = d.transpose(0, 2)
    t4 = torch.softmax(v1, 0)
    out = torch.zeros(2, 3, 1)
    for i in range(3):
        if s[i] > 0.0:
            w5 = v1[..., :]
        else:
            w5 = t4[..., :]
        w5 += 0.5
        e = torch.exp(w5.clamp(max=1.0))
        out = out + e
    return d, out


def narrow_slice_or_fresh_by_data(a: f32[2, 3], c: f32[4]) -> tuple[f32[2, 3], f32[2, 1]]:
    # Seed 6008: `a[..., -1:3]` (strides 3, 1) or a fresh [2, 1] tensor.
    acc = torch.zeros(2, 1)
    for i in range(4):
        v1 = a[..., -1:3]
        if c[i] < 0.25:
            v1 = v1 * 0.5 + (v1 + -1.25)
        v1.sub_(0.25)
        acc = acc + v1
    return a, acc
