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


def state_row_written_backwards(x: f32[6, 4, 8], w: f32[8, 8]) -> f32[3, 4, 8]:
    # A loop with a negative step: the row is carried all the same.
    state = torch.ones(3, 4, 8)
    for j in range(3):
        for t in range(5, -1, -2):
            state[j] = torch.tanh(x[t] @ w + state[j])
    return state


def state_row_read_by_an_inner_loop(x: f32[6, 8], w: f32[8, 8]) -> f32[4, 8]:
    # The row, read before an inner loop that refines it: promoted.
    h = torch.ones(4, 8)
    for t in range(3):
        r = h[1]
        for k in range(2):
            r = r * 0.5 + x[k]
        h[1] = torch.tanh(r @ w)
    return h


def state_rows_read_by_an_inner_loop(x: f32[6, 8], w: f32[8, 8]) -> f32[4, 8]:
    # An inner loop reads every row of the buffer the outer loop writes row 1 of.
    h = torch.ones(4, 8)
    for t in range(3):
        s = torch.zeros(8)
        for k in range(4):
            s = s + h[k]
        h[1] = torch.tanh(h[1] @ w + s)
    return h


def state_row_written_then_read_whole(x: f32[6, 8], w: f32[8, 8]) -> f32[4, 8]:
    # Each step reads the whole buffer after writing row 0 (`acc + h`).
    h = torch.zeros(4, 8)
    acc = torch.zeros(4, 8)
    for t in range(3):
        h[0] = torch.tanh(x[t] @ w + h[0])
        acc = acc + h
    return acc


def state_recorded_each_step(x: f32[6, 8], w: f32[8, 8]) -> f32[6, 2, 8]:
    # Row 1 is the recurrence; every step records the whole buffer (`out[t] = h`).
    h = torch.ones(2, 8)
    out = torch.zeros(6, 2, 8)
    for t in range(6):
        h[1] = torch.tanh(x[t] @ w + h[1])
        out[t] = h
    return out


def state_row_written_then_refined_whole(x: f32[6, 8], w: f32[8, 8]) -> f32[4, 8]:
    # The buffer after the write starts an inner loop.
    h = torch.ones(4, 8)
    acc = torch.zeros(4, 8)
    for t in range(3):
        h[0] = torch.tanh(x[t] @ w + h[0])
        s = h
        for k in range(2):
            s = s * 0.5
        acc = acc + s
    return acc
