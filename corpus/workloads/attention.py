"""Incremental decoding with a KV cache: each step writes `k[:, :, t, :]` and `v[:, :, t, :]` in place (the caller's
cache sees the writes), then attends over the filled prefix. Projection weights arrive uniform in [-1, 1) and are
scaled to 1/sqrt(head_dim), as an initialized model has (unscaled, the recurrence is ill-conditioned in f32)."""
from __future__ import annotations

import torch


def attention(
    x: f32[1, 12, 1, 64],
    k: f32[1, 12, 50, 64],
    v: f32[1, 12, 50, 64],
    wq: f32[64, 64],
    wk: f32[64, 64],
    wv: f32[64, 64],
    start: int = 32,
    end: int = 50,
) -> f32[1, 12, 1, 64]:
    wq = wq * 0.125
    wk = wk * 0.125
    wv = wv * 0.125
    for t in range(start, end):
        q = x @ wq
        k[:, :, t, :] = (x @ wk)[:, :, 0, :]
        v[:, :, t, :] = (x @ wv)[:, :, 0, :]
        scores = q @ k[:, :, : t + 1, :].transpose(-2, -1) / 8.0
        att = torch.softmax(scores, dim=-1)
        x = att @ v[:, :, : t + 1, :]
    return x
