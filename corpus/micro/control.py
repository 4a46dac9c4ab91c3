"""Branches and data-dependent loops around views and in-place writes."""
from __future__ import annotations

import torch


def view_before_branch(x: f32[8, 8], flag: bool = True) -> f32[8, 8]:
    top = x[:4]
    if flag:
        top += 1.0
    else:
        top *= 2.0
    return x


def view_before_data_branch(x: f32[8, 8]) -> f32[8, 8]:
    left = x[:, :3]
    if x.sum() > 0:
        left.mul_(-1.0)
    else:
        left.add_(10.0)
    return x


def view_rebound_in_branch(x: f32[6, 4], k: int = 2) -> f32[6, 4]:
    v = x[0]
    if k > 1:
        v = x[k]
    v += 100.0
    return x


def loop_in_branch(x: f32[10, 4], n: int = 5) -> f32[10, 4]:
    if x.mean() < 10.0:
        for i in range(n):
            x[i + 1] += x[i]
    return x


def branch_in_loop(x: f32[12, 4]) -> f32[12, 4]:
    for i in range(12):
        if i % 3 == 0:
            x[i].zero_()
        elif i % 3 == 1:
            x[i] *= 2.0
        else:
            x[i].sigmoid_()
    return x


def data_branch_in_loop(x: f32[8, 6]) -> f32[8, 6]:
    for i in range(8):
        if x[i].sum().item() > 0.0:
            x[i].clamp_(min=0.0)
        else:
            x[i].neg_()
    return x


def while_data_dependent(x: f32[16]) -> tuple[f32[16], i64[()]]:
    n = 0
    y = x.abs() + 0.1
    while y.sum().item() < 100.0:
        y = y * 1.5
        n += 1
    return y, torch.tensor(n)


def value_from_branch_mutated(x: f32[4, 4], flag: bool = False) -> f32[4, 4]:
    if flag:
        y = x.clone()
    else:
        y = x * 2.0
    y[0] = -1.0
    y[:, 0] += 5.0
    return y
