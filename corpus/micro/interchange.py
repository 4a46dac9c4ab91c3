"""Nested time and layer loops for `loops/interchange`: stacked recurrences where layer j at step t reads layer j-1
at step t and its own state from step t-1 (interchangeable: layers outside, time inside), and nests where a
dependence forbids it (a layer reading the next layer's state from the previous step, state carried across layers
through the inner loop, a `while` inner loop)."""
from __future__ import annotations

import torch


def lstm_small(
    x: f32[7, 2, 16], w_ih: f32[3, 16, 64], w_hh: f32[3, 16, 64], bias: f32[3, 64]
) -> tuple[f32[7, 2, 16], f32[3, 2, 16], f32[3, 2, 16]]:
    w_ih = w_ih * 0.25
    w_hh = w_hh * 0.25
    state_h = torch.zeros(3, 2, 16)
    state_c = torch.zeros(3, 2, 16)
    out = torch.zeros(7, 2, 16)
    for t in range(7):
        inp = x[t] * 0.5
        for j in range(3):
            gates = inp @ w_ih[j] + state_h[j] @ w_hh[j] + bias[j]
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * state_c[j] + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            state_c[j] = c
            state_h[j] = h
            inp = h
        out[t] = inp * 2.0
    return out, state_h, state_c


def rnn_stack(x: f32[12, 3, 24], w_x: f32[4, 24, 24], w_h: f32[4, 24, 24]) -> tuple[f32[3, 24], f32[4, 3, 24]]:
    h = torch.zeros(4, 3, 24)
    last = torch.zeros(3, 24)
    for t in range(2, 12):
        inp = x[t]
        for j in range(4):
            hn = torch.tanh(inp @ w_x[j] * 0.2 + h[j] @ w_h[j] * 0.2)
            h[j] = hn
            inp = hn
        last = last * 0.5 + inp
    return last, h


def rnn_reads_next_layer(x: f32[6, 2, 16], w_x: f32[3, 16, 16], w_h: f32[3, 16, 16]) -> f32[4, 2, 16]:
    h = torch.zeros(4, 2, 16)
    h[3] = 0.5
    for t in range(6):
        inp = x[t]
        for j in range(3):
            hn = torch.tanh(inp @ w_x[j] * 0.2 + h[j + 1] @ w_h[j] * 0.2)
            h[j] = hn
            inp = hn
    return h


def rnn_sum_across_layers(x: f32[5, 2, 16], w_x: f32[3, 16, 16], w_h: f32[3, 16, 16]) -> tuple[f32[2, 16], f32[3, 2, 16]]:
    h = torch.zeros(3, 2, 16)
    total = torch.zeros(2, 16)
    for t in range(5):
        inp = x[t]
        for j in range(3):
            hn = torch.tanh(inp @ w_x[j] * 0.2 + h[j] @ w_h[j] * 0.2)
            h[j] = hn
            total = total + hn
            inp = hn
    return total, h


def rnn_inner_while(x: f32[4, 2, 8], w: f32[8, 8]) -> f32[3, 2, 8]:
    h = torch.zeros(3, 2, 8)
    for t in range(4):
        inp = x[t]
        j = 0
        while j < 3 and inp.abs().sum().item() < 1.0e6:
            hn = torch.tanh(inp @ w * 0.3 + h[j])
            h[j] = hn
            inp = hn
            j += 1
    return h
