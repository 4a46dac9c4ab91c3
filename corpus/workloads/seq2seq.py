"""Seq2seq attention decoder with an LSTM cell: a `while` loop whose stop depends on data (`.item()`), an embedding
lookup of the previous token, argmax decoding, and `output_all[t] = output`."""
from __future__ import annotations

import torch

EOS = 1
MAX_LEN = 50


def seq2seq(
    enc: f32[50, 1, 256],
    emb: f32[500, 256],
    w_ih: f32[512, 1024],
    w_hh: f32[256, 1024],
    w_attn: f32[256, 256],
    w_out: f32[512, 500],
) -> tuple[f32[50, 1, 500], i64[50]]:
    w_ih = w_ih * 0.044
    w_hh = w_hh * 0.0625
    w_attn = w_attn * 0.0625
    w_out = w_out * 0.044
    memory = enc[:, 0, :]
    h = torch.zeros(1, 256)
    c = torch.zeros(1, 256)
    ctx = torch.zeros(1, 256)
    tok = torch.zeros(1, dtype=torch.int64)
    output_all = torch.zeros(50, 1, 500)
    tokens = torch.zeros(50, dtype=torch.int64)
    t = 0
    done = False
    while not done:
        x = emb[tok]
        gates = torch.cat([x, ctx], 1) @ w_ih + h @ w_hh
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        energy = memory @ (h @ w_attn)[0]
        attn = torch.softmax(energy, dim=0)
        ctx = (attn @ memory).unsqueeze(0)
        output = torch.cat([h, ctx], 1) @ w_out
        output_all[t] = output
        tok = output.argmax(dim=1)
        tokens[t] = tok[0]
        t += 1
        done = t >= MAX_LEN or tok.item() == EOS
    return output_all, tokens
