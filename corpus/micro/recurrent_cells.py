"""Variants of the recurrent workloads (nasrnn, lstm, seq2seq) for the loop rewrites and the cell kernels: other
sizes and batches, the other loop order (layers outside, time inside), extra carried state (a running sum, a step
counter, a second output buffer), a GRU cell whose gates use the hidden projection's chunks differently, a counted
decoder loop, and dependences that forbid moving the input projection out of the loop (the input written from
carried state before it is projected; a layer reading the layer above from the previous step)."""
from __future__ import annotations

import torch


def _nas_cell(x, h, c, w_x, w_h):
    g = (x @ w_x + h @ w_h).chunk(8, dim=1)
    l1 = torch.sigmoid(g[0]) * torch.relu(g[1])
    l2 = torch.sigmoid(g[2]) + torch.tanh(g[3])
    l3 = torch.relu(g[4]) * torch.sigmoid(g[5])
    l4 = torch.tanh(g[6]) + torch.sigmoid(g[7])
    m1 = torch.tanh(l1 * l2)
    m2 = torch.tanh(l3 + l4)
    c_new = torch.tanh(m1 + c)
    h_new = torch.tanh(c_new * m2)
    return h_new, c_new


def nasrnn_small(
    x: f32[12, 3, 32], w_x: f32[32, 256], w_h: f32[32, 256]
) -> tuple[f32[3, 32], f32[3, 32], f32[3, 32]]:
    """nasrnn at batch 3, hidden 32, 12 steps, also carrying a running sum of the hidden state."""
    w_x = w_x * 0.18
    w_h = w_h * 0.18
    h = torch.zeros(3, 32)
    c = torch.zeros(3, 32)
    total = torch.zeros(3, 32)
    for t in range(12):
        h, c = _nas_cell(x[t], h, c, w_x, w_h)
        total = total + h
    return h, c, total


def nasrnn_input_from_state(x: f32[10, 2, 32], w_x: f32[32, 256], w_h: f32[32, 256]) -> tuple[f32[2, 32], f32[10, 2, 32]]:
    """The input row is updated from the carried cell state before it is projected: `x[t] @ w_x` reads carried
    state and must stay in the loop (and `x` is written in place)."""
    w_x = w_x * 0.18
    w_h = w_h * 0.18
    h = torch.zeros(2, 32)
    c = torch.zeros(2, 32)
    for t in range(10):
        x[t] += 0.5 * c
        h, c = _nas_cell(x[t], h, c, w_x, w_h)
    return h, x


def nasrnn_history(x: f32[9, 1, 64], w_x: f32[64, 512], w_h: f32[64, 512]) -> tuple[f32[9, 1, 64], f32[9, 1, 64]]:
    """Every step's hidden and cell state stored into history buffers (`hs[t] = h`, `cs[t] = c`)."""
    w_x = w_x * 0.125
    w_h = w_h * 0.125
    h = torch.zeros(1, 64)
    c = torch.zeros(1, 64)
    hs = torch.zeros(9, 1, 64)
    cs = torch.zeros(9, 1, 64)
    for t in range(9):
        h, c = _nas_cell(x[t], h, c, w_x, w_h)
        hs[t] = h
        cs[t] = c
    return hs, cs


def lstm_layers_outside(
    x: f32[8, 2, 24], w_ih: f32[3, 24, 96], w_hh: f32[3, 24, 96], bias: f32[3, 96]
) -> tuple[f32[8, 2, 24], f32[3, 2, 24], f32[3, 2, 24]]:
    """The stacked LSTM written layer by layer (the other loop order): each layer reads the sequence the layer below
    wrote and overwrites it in place."""
    w_ih = w_ih * 0.2
    w_hh = w_hh * 0.2
    seq = x.clone()
    state_h = torch.zeros(3, 2, 24)
    state_c = torch.zeros(3, 2, 24)
    for j in range(3):
        h = torch.zeros(2, 24)
        c = torch.zeros(2, 24)
        for t in range(8):
            gates = seq[t] @ w_ih[j] + h @ w_hh[j] + bias[j]
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            seq[t] = h
        state_h[j] = h
        state_c[j] = c
    return seq, state_h, state_c


def lstm_step_count(
    x: f32[6, 4, 16], w_ih: f32[2, 16, 64], w_hh: f32[2, 16, 64], bias: f32[2, 64]
) -> tuple[f32[6, 4, 16], f32[2, 4, 16], f32[2]]:
    """The stacked LSTM at batch 4 (time outside, layers inside), with extra carried state: per layer, the sum of
    its cell state's magnitudes over all steps."""
    w_ih = w_ih * 0.25
    w_hh = w_hh * 0.25
    state_h = torch.zeros(2, 4, 16)
    state_c = torch.zeros(2, 4, 16)
    mass = torch.zeros(2)
    out = torch.zeros(6, 4, 16)
    for t in range(6):
        inp = x[t]
        for j in range(2):
            gates = inp @ w_ih[j] + state_h[j] @ w_hh[j] + bias[j]
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * state_c[j] + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            state_c[j] = c
            state_h[j] = h
            mass[j] += c.abs().sum()
            inp = h
        out[t] = inp
    return out, state_h, mass


def lstm_reads_layer_above(
    x: f32[5, 2, 16], w_ih: f32[3, 16, 64], w_hh: f32[3, 16, 64]
) -> tuple[f32[5, 2, 16], f32[3, 2, 16]]:
    """Each layer's gates also read the layer above's hidden state from the previous step (an anti-dependence
    across layers): the time loop must stay outside."""
    w_ih = w_ih * 0.25
    w_hh = w_hh * 0.25
    state_h = torch.zeros(3, 2, 16)
    state_c = torch.zeros(3, 2, 16)
    out = torch.zeros(5, 2, 16)
    for t in range(5):
        inp = x[t]
        for j in range(3):
            above = state_h[(j + 1) % 3]
            gates = inp @ w_ih[j] + (state_h[j] + 0.5 * above) @ w_hh[j]
            i, f, g, o = gates.chunk(4, 1)
            c = torch.sigmoid(f) * state_c[j] + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            state_c[j] = c
            state_h[j] = h
            inp = h
        out[t] = inp
    return out, state_h


def gru(x: f32[10, 2, 32], w_ih: f32[32, 96], w_hh: f32[32, 96], b_hh: f32[96]) -> tuple[f32[10, 2, 32], f32[2, 32]]:
    """A GRU cell: the reset gate multiplies a chunk of the hidden projection (not the sum of both projections)."""
    w_ih = w_ih * 0.18
    w_hh = w_hh * 0.18
    h = torch.zeros(2, 32)
    out = torch.zeros(10, 2, 32)
    for t in range(10):
        gi = x[t] @ w_ih
        gh = h @ w_hh + b_hh
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        out[t] = h
    return out, h


def seq2seq_counted(
    enc: f32[12, 2, 32],
    emb: f32[40, 32],
    w_ih: f32[64, 128],
    w_hh: f32[32, 128],
    w_attn: f32[32, 32],
    w_out: f32[64, 40],
) -> tuple[f32[12, 2, 40], i64[12, 2]]:
    """The seq2seq attention decoder at batch 2 as a counted loop (no early stop), attention per batch row."""
    w_ih = w_ih * 0.125
    w_hh = w_hh * 0.18
    w_attn = w_attn * 0.18
    w_out = w_out * 0.125
    memory = enc.permute(1, 0, 2)
    h = torch.zeros(2, 32)
    c = torch.zeros(2, 32)
    ctx = torch.zeros(2, 32)
    tok = torch.zeros(2, dtype=torch.int64)
    output_all = torch.zeros(12, 2, 40)
    tokens = torch.zeros(12, 2, dtype=torch.int64)
    for t in range(12):
        x = emb[tok]
        gates = torch.cat([x, ctx], 1) @ w_ih + h @ w_hh
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        energy = (memory @ (h @ w_attn).unsqueeze(2)).squeeze(2)
        attn = torch.softmax(energy, dim=1)
        ctx = (attn.unsqueeze(1) @ memory).squeeze(1)
        output = torch.cat([h, ctx], 1) @ w_out
        output_all[t] = output
        tok = output.argmax(dim=1)
        tokens[t] = tok
    return output_all, tokens
