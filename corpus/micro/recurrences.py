"""Recurrences whose input projection may or may not move out of the loop (`loops/hoist`): the projection of the
input reads no carried state (hoistable, also under an outer loop and from a loop that starts past 0), or it does,
through an in-place write onto a carried buffer or onto the input itself (not hoistable)."""
from __future__ import annotations

import torch


def rnn_hoistable(x: f32[40, 2, 64], w_x: f32[64, 96], w_h: f32[96, 96]) -> f32[2, 96]:
    w_x = w_x * 0.125
    w_h = w_h * 0.1
    h = torch.zeros(2, 96)
    for t in range(40):
        h = torch.tanh(x[t] @ w_x + h @ w_h)
    return h


def rnn_hoistable_offset(x: f32[24, 3, 32], w_x: f32[32, 48], w_h: f32[48, 48]) -> tuple[f32[3, 48], f32[3]]:
    h = torch.zeros(3, 48)
    s = torch.zeros(3)
    for t in range(4, 24):
        p = torch.sigmoid(x[t] @ w_x * 0.2)
        h = torch.tanh(p + h @ w_h * 0.1)
        s = s + torch.exp(x[t] * 0.1).sum(dim=1)
    return h, s


def rnn_layers(x: f32[16, 1, 32], w_x: f32[3, 32, 32], w_h: f32[3, 32, 32]) -> f32[1, 32]:
    h = torch.zeros(1, 32)
    for layer in range(3):
        for t in range(16):
            h = torch.tanh(x[t] @ w_x[layer] * 0.15 + h @ w_h[layer] * 0.15)
    return h


def rnn_state_feeds_input(x0: f32[4, 32], w_x: f32[32, 32], w_h: f32[32, 32]) -> tuple[f32[4, 32], f32[13, 4, 32]]:
    buf = torch.zeros(13, 4, 32)
    buf[0] = x0
    h = torch.zeros(4, 32)
    for t in range(12):
        h = torch.tanh(buf[t] @ w_x * 0.15 + h @ w_h * 0.15)
        buf[t + 1] = h
    return h, buf


def rnn_writes_input(x: f32[10, 3, 16], w_x: f32[16, 16], w_h: f32[16, 16]) -> f32[3, 16]:
    h = torch.zeros(3, 16)
    for t in range(9):
        h = torch.tanh(x[t] @ w_x * 0.2 + h @ w_h * 0.2)
        x[t + 1] += h
    return h


def rnn_while(x: f32[8, 2, 16], w_x: f32[16, 16], w_h: f32[16, 16]) -> tuple[f32[2, 16], i64[()]]:
    h = torch.zeros(2, 16)
    t = 0
    while t < 8 and h.abs().sum().item() < 1000.0:
        h = torch.tanh(x[t] @ w_x * 0.2 + h @ w_h * 0.2)
        t += 1
    return h, torch.tensor(t)


def rnn_strided(x: f32[16, 2, 16], w_x: f32[16, 16], w_h: f32[16, 16]) -> f32[2, 16]:
    h = torch.zeros(2, 16)
    for t in range(1, 16, 3):
        h = torch.tanh(x[t] @ w_x * 0.2 + h @ w_h * 0.2)
    return h


def rnn_leaky(x: f32[20, 64], h0: f32[64]) -> f32[64]:
    # tanh(x[t]) could move out, but it fuses into the step's kernel: the cost model keeps it in the loop.
    h = h0
    for t in range(20):
        h = h * 0.5 + torch.tanh(x[t])
    return h
