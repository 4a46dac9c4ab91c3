"""Index writes with integer and boolean index tensors, `index_put_` with accumulation, masked fills."""
from __future__ import annotations

import torch


def int_index_write(x: f32[10, 4], v: f32[3, 4]) -> f32[10, 4]:
    idx = torch.tensor([7, 2, 5])
    x[idx] = v
    x[torch.tensor([0, 0, 9])] += 1.0
    return x


def index_param(x: f32[12, 3], idx: i64[6]) -> tuple[f32[12, 3], f32[6, 3]]:
    picked = x[idx]
    x[idx, 1] = -1.0
    return x, picked


def mask_write(x: f32[6, 7]) -> f32[6, 7]:
    x[x > 0.5] = 0.0
    x[x < -0.5] *= 2.0
    return x


def mask_param(x: f32[5, 4], m: bool[5, 4]) -> tuple[f32[5, 4], f32[5, 4]]:
    y = torch.where(m, x, -x)
    x.masked_fill_(m, 0.25)
    return x, y


def index_put_accumulate(x: f32[8], vals: f32[5]) -> f32[8]:
    idx = torch.tensor([1, 3, 1, 7, 3])
    x.index_put_((idx,), vals, accumulate=True)
    return x


def index_put_2d(x: f32[4, 5]) -> f32[4, 5]:
    rows = torch.tensor([0, 1, 3])
    cols = torch.tensor([4, 0, 2])
    x.index_put_((rows, cols), torch.tensor(9.0))
    x[rows[:2], 1:3] = 0.5
    return x


def triu_masked_fill(s: f32[6, 6]) -> tuple[f32[6, 6], f32[6, 6]]:
    t = s.clone()
    t.triu_(1)
    mask = torch.arange(6).view(1, 6) > torch.arange(6).view(6, 1)
    u = s.masked_fill(mask, float("-inf")).softmax(dim=-1)
    return t, u


def gather_rows_by_argmax(x: f32[6, 10], table: f32[10, 4]) -> tuple[i64[6], f32[6, 4]]:
    best = x.argmax(dim=1)
    return best, table[best]


def gather_wrapped(table: f32[12, 5], x: f32[4, 5]) -> tuple[f32[4, 5], f32[3, 2, 5]]:
    idx = torch.arange(4) * 3 - 6
    rows = table[idx] * x
    pairs = torch.arange(6).reshape(3, 2) - 3
    return rows, torch.relu(table[pairs] + 1.0)


def mask_selection_arithmetic(a: f32[8], b: f32[8]) -> tuple[f32[8], f32[()], f32[()], f32[()]]:
    # Selections by one mask combined elementwise, then assigned through it (fvcore's GIoU intersection), summed
    # and averaged: none of the results depends on how many elements the mask selects.
    m = a > b
    out = torch.zeros_like(a)
    out[m] = (a[m] - b[m]) * 2.0 + torch.exp(b[m]).abs()
    return out, a[m].sum(), torch.sum(b[m] * a[m]), (a[b > 0.5] + 1.0).mean()


def mask_rows_product(a: f32[6, 3], b: f32[6, 3]) -> tuple[f32[6, 3], f32[()]]:
    # A mask over the leading dim selects whole rows.
    m = a[:, 0] > 0
    a[m] = a[m] * b[m]
    return a, b[m].mean()


def mask_selects_nothing(a: f32[4]) -> tuple[f32[()], f32[()]]:
    # The sum of an empty selection is 0 and its mean NaN, as in PyTorch.
    m = a > 5.0
    return a[m].sum(), a[m].mean()


def mask_on_a_later_dim_mean(a: f32[2, 4]) -> tuple[f32[()], f32[()]]:
    # A mask over dim 1 selects every row's columns: the mean divides by rows times selected columns.
    m = torch.tensor([True, False, True, True])
    return a[:, m].mean(), torch.mean(a[:, m] * 2.0)


def write_by_mask_and_selections(logits: f32[2, 5, 4], cls: i64[2, 5], x: f32[6, 3], c: i64[6], y: f32[6]) -> tuple[f32[2, 5, 4], f32[6, 3]]:
    """`t[m, i[m]] = v`: a boolean mask over the leading dims, then index tensors selected by the same mask
    (torchvision FCOS's one-hot targets `gt_classes_targets[fg, classes[fg]] = 1.0`); the value a number or a
    selection by the mask; negative selected indices count from the end."""
    k = cls % 7 - 3
    fg = k >= 0
    t = torch.zeros_like(logits)
    t[fg, k[fg]] = 1.0
    m = c < 5
    x[m, (c - 3)[m]] = y[m] * 2.0
    return t, x
