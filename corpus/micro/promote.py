"""`loops/promote`: a loop that reads and writes its carried state only through one view fixed for the loop (row `j`
of a state stack, in a time loop under a layer loop) carries that row instead, reading it before the loop and
writing it back after. The programs that must stay as they are read the state some other way."""
from __future__ import annotations

import torch


def state_row_promoted(x: f32[6, 4, 8], w: f32[8, 8]) -> tuple[f32[3, 4, 8], f32[4, 8]]:
    state = torch.zeros(3, 4, 8)
    out = torch.zeros(4, 8)
    for j in range(3):
        for t in range(6):
            h = torch.tanh(x[t] @ w + state[j] * 0.5)
            state[j] = h
        out += state[j]
    return state, out


def two_state_rows_promoted(x: f32[5, 2, 8], w: f32[8, 16]) -> tuple[f32[4, 2, 8], f32[4, 2, 8]]:
    hs = torch.ones(4, 2, 8)
    cs = torch.zeros(4, 2, 8)
    for j in range(4):
        for t in range(5):
            g = x[t] @ w + hs[j].repeat(1, 2)
            a, b = g.chunk(2, 1)
            c = torch.sigmoid(a) * cs[j] + torch.tanh(b)
            hs[j] = torch.tanh(c)
            cs[j] = c
    return hs, cs


def state_row_and_whole_state(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[3, 4, 8]:
    # Each step also reads the whole stack: the loop needs every row, not only row j.
    state = torch.zeros(3, 4, 8)
    for j in range(3):
        for t in range(6):
            state[j] = torch.tanh(x[t] @ w + state[j] + state.mean())
    return state


def state_row_and_next_row(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[3, 4, 8]:
    # Reads row j + 1 while writing row j.
    state = torch.ones(3, 4, 8)
    for j in range(2):
        for t in range(6):
            state[j] = torch.tanh(x[t] @ w + state[j + 1] - state[j])
    return state


def state_row_broadcast_write(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[3, 4, 8]:
    # The written value is broadcast into the row; functionalized, the broadcast is a view of it of the row's shape,
    # so the row read back is that value: promoted.
    state = torch.zeros(3, 4, 8)
    for j in range(3):
        for t in range(6):
            state[j] = torch.tanh(x[t] @ w + state[j]).mean(dim=0)
    return state


def state_row_cast_write(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[3, 4, 8]:
    # A float32 value written into a float64 stack is rounded on the way: the row read back is not the value written.
    state = torch.zeros(3, 4, 8, dtype=torch.float64)
    for j in range(3):
        for t in range(6):
            state[j] = torch.tanh(x[t] @ w + state[j].float())
    return state.float()


def state_row_by_step(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[6, 4, 8]:
    # The row written moves with the loop variable (an output written step by step).
    out = torch.zeros(6, 4, 8)
    h = torch.zeros(4, 8)
    for t in range(6):
        h = torch.tanh(x[t] @ w + h)
        out[t] = h
    return out
