"""Control flow the functional engine used to refuse, found by the fuzzer: `break` and `continue` under an `if` on a
run-time value, a name that is `None` before a loop and a tensor after it, and a name rebound in one arm only."""
from __future__ import annotations

import torch


def break_on_data(a: f32[6, 3], b: f32[6, 3]) -> tuple[f32[6, 3], f32[3]]:
    h = torch.zeros(3)
    for i in range(6):
        h = h * 0.5 + a[i]
        if h.sum() > 0.5:
            break
        b[i] += h
    return b, h


def continue_on_data(x: f32[8, 4]) -> tuple[f32[8, 4], f32[4]]:
    acc = torch.zeros(4)
    for i in range(8):
        if x[i].mean() < 0.0:
            continue
        acc = acc + x[i]
        x[i] *= 2.0
    return x, acc


def greedy_decode(logits: f32[10, 5], out: i64[10]) -> tuple[i64[10], i64[()]]:
    # Decode until an end token (id 0 here) is produced, as greedy decoding loops do.
    n = torch.zeros((), dtype=torch.int64)
    t = 0
    while t < 10:
        tok = logits[t].argmax()
        out[t] = tok
        n += 1
        t += 1
        if tok == 0:
            break
    return out, n


def nested_break(x: f32[4, 6]) -> f32[4, 6]:
    for i in range(4):
        for j in range(6):
            if x[i, j] > 0.5:
                break
            x[i, j] = -1.0
    return x


def none_before_loop(x: f32[5, 3]) -> f32[3]:
    last = None
    for i in range(5):
        if i == 4:
            last = x[i] * 2.0
    return last


def rebound_in_one_arm(x: f32[4], y: f32[4]) -> f32[4]:
    h = x * 1.0
    for i in range(3):
        if y[i] > 0.0:
            h = h + y
    return h
