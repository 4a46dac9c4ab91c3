"""uint8, int8 and int16 tensors: PyTorch's wrap-around arithmetic and conversions, promotion between them (uint8
with int8 is int16), reductions that widen to int64, and uint8 index tensors read as masks."""
from __future__ import annotations

import torch


def wrap_around(a: u8[6], b: i8[6]) -> tuple[u8[6], i8[6], i16[6], u8[6], i8[6]]:
    # 250-ish + 10 wraps in uint8, negation of a uint8 wraps, int8 times 50 wraps, uint8 with int8 promotes to int16.
    x = a * 30 + 10
    y = (b - 5) * 50
    z = x * y
    w = -x
    v = y // 3 + y % 7
    return x, y, z, w, v


def conversions(x: f32[8]) -> tuple[u8[8], i8[8], i16[8], f32[8], i64[()]]:
    s = x * 300.0
    u = s.to(torch.uint8)
    i = s.char()
    h = s.short()
    back = u.float() + i.float() + h.float()
    total = u.sum() + i.sum()
    return u, i, h, back, total


def uint8_masks(x: f32[4, 5], m: u8[4, 5]) -> tuple[f32[()], f32[4, 5], i64[5]]:
    # A uint8 index tensor is a mask, as PyTorch reads it; torch.where takes uint8 conditions too. (`y[keep] = 0.0`
    # is PyTorch's error, its masked_fill_ taking boolean masks only, and so is `y[keep] += 2.0` where keep selects
    # one element.)
    keep = (m % 2).byte()
    total = x[keep].sum()
    z = torch.where(keep, x, -x)
    counts = keep.sum(0)
    return total, z, counts


def matching_matrix(cost: f32[3, 8], k: i64[3]) -> tuple[u8[3, 8], i64[8], f32[8]]:
    # YOLOX's dynamic-k matching builds its assignment as a uint8 matrix of zeros filled with ones.
    matching = torch.zeros_like(cost, dtype=torch.uint8)
    for g in range(3):
        _, pos = torch.topk(cost[g], k=2, largest=False)
        matching[g][pos] = 1
    matching[:, 0] += k.to(torch.uint8)
    anchor_matching_gt = matching.sum(0)
    fg = anchor_matching_gt > 0
    score = (matching.float() * cost).sum(0) / anchor_matching_gt.clamp(min=1)
    return matching, anchor_matching_gt, torch.where(fg, score, torch.zeros_like(score))


def int8_topk_mask(scores: f32[2, 6], valid: bool[2, 6]) -> tuple[i8[2, 6], u8[2, 6], i16[2]]:
    # Ultralytics' assigner counts top-k hits per anchor in an int8 tensor.
    count = torch.zeros(scores.shape, dtype=torch.int8)
    _, idx = scores.topk(3, dim=-1)
    ones = torch.ones_like(idx[:, :1], dtype=torch.int8)
    for k in range(3):
        count.scatter_add_(-1, idx[:, k : k + 1], ones)
    count.masked_fill_(count > 1, 0)
    flags = (count.to(torch.uint8) * 4) | valid.to(torch.uint8)
    return count, flags, count.to(torch.int16).sum(-1, dtype=torch.int16)


def scans_any_sort(a: u8[8], b: i8[8], x: f32[8]) -> tuple[i64[8], f32[8], u8[()], u8[8], i64[8], i16[8]]:
    # Integer scans into a narrower dtype wrap; any/all of uint8 answer in uint8; a stable sort of uint8 values with
    # ties; float to int16 beyond int32's range is what x86 converts it to (PyTorch's result).
    c = (a * 30).cumsum(0, dtype=torch.uint8).long()
    p = (b - 5).cumprod(0, dtype=torch.int8).float()
    s, i = torch.sort(a * 29, stable=True)
    return c, p, a.any(), s, i, (x * 3.0e9).short()
