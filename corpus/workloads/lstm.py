"""A 10-layer LSTM over 50 steps: nested time and layer loops writing `state_c[j] = c` and `state_h[j] = h` into
stacked state buffers. Weights arrive uniform in [-1, 1) and are scaled to 1/sqrt(hidden)."""
from __future__ import annotations

import torch


def lstm(
    x: f32[50, 1, 256], w_ih: f32[10, 256, 1024], w_hh: f32[10, 256, 1024], bias: f32[10, 1024]
) -> tuple[f32[50, 1, 256], f32[10, 1, 256], f32[10, 1, 256]]:
    w_ih = w_ih * 0.0625
    w_hh = w_hh * 0.0625
    bias = bias * 0.0625
    state_h = torch.zeros(10, 1, 256)
    state_c = torch.zeros(10, 1, 256)
    out = torch.zeros(50, 1, 256)
    for t in range(50):
        inp = x[t]
        for j in range(10):
            gates = inp @ w_ih[j] + state_h[j] @ w_hh[j] + bias[j]
            i, f, g, o = gates.chunk(4, 1)
            i = torch.sigmoid(i)
            f = torch.sigmoid(f)
            g = torch.tanh(g)
            o = torch.sigmoid(o)
            c = f * state_c[j] + i * g
            h = o * torch.tanh(c)
            state_c[j] = c
            state_h[j] = h
            inp = h
        out[t] = inp
    return out, state_h, state_c
