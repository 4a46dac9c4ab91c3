"""A matmul computed as dot products in the elementwise kernels that read it (issue #16's cell epilogues across
chunks): a recurrence whose cell reads four column ranges of `h @ w` at the same column, with bias and carried state;
the weight updated inside the loop after the matmul (carried, so the readers still read the old one); and cases
where it must not be: the matmul's result also read by a reduction and returned, and stacked state that the reader
writes in place."""
from __future__ import annotations

import torch


def chunk_cell(x: f32[20, 2, 16], w: f32[16, 64], b: f32[64]) -> tuple[f32[2, 16], f32[2, 16]]:
    """Four chunks of one small matmul per step feed the cell: the matmul and the cell can be one kernel."""
    w = w * 0.25
    h = torch.zeros(2, 16)
    c = torch.zeros(2, 16)
    for t in range(20):
        g = (h @ w + b).chunk(4, dim=1)
        c = torch.sigmoid(g[0]) * c + torch.tanh(g[1]) * torch.sigmoid(g[2])
        h = torch.tanh(c) * torch.sigmoid(g[3]) + x[t]
    return h, c


def chunk_cell_odd_k(x: f32[9, 1, 7], w: f32[7, 21]) -> f32[1, 7]:
    """A reduction length that is no multiple of the four partial sums, and a row vector state."""
    h = torch.zeros(1, 7)
    for t in range(9):
        g = (h @ w).chunk(3, dim=1)
        h = torch.tanh(g[0] - g[2]) * torch.sigmoid(g[1]) + x[t]
    return h


def weight_updated_in_loop(x: f32[6, 2, 8], w: f32[8, 16]) -> tuple[f32[2, 8], f32[8, 16]]:
    """The weight is updated after the matmul in each step (a new buffer per step, carried): the readers of the matmul
    read the step's old weight, so it may still be computed in them."""
    w = w * 0.5
    h = torch.zeros(2, 8)
    for t in range(6):
        g = (h @ w).chunk(2, dim=1)
        w.mul_(0.9)
        h = torch.tanh(g[0]) * torch.sigmoid(g[1]) + x[t]
    return h, w


def result_also_reduced(x: f32[6, 2, 8], w: f32[8, 16]) -> tuple[f32[2, 8], f32[2, 16], f32[2]]:
    """The matmul's result is also summed per row and returned: it stays a buffer."""
    h = torch.zeros(2, 8)
    g = torch.zeros(2, 16)
    s = torch.zeros(2)
    for t in range(6):
        g = h @ w
        s = s + g.sum(dim=1)
        a, b = g.chunk(2, dim=1)
        h = torch.tanh(a) * torch.sigmoid(b) + x[t]
    return h, g, s


def state_written_in_place(x: f32[6, 1, 8], w: f32[8, 16]) -> f32[3, 1, 8]:
    """Stacked state rows written in place by the cell that reads their matmul. Interchanged (layers outside), each
    time loop carries its row (`loops/promote`): the cell then writes a new row, and the matmul fuses into it."""
    state = torch.zeros(3, 1, 8)
    for t in range(6):
        for j in range(3):
            g = (state[j] @ w).chunk(2, dim=1)
            state[j] = torch.tanh(g[0]) * torch.sigmoid(g[1]) + x[t]
    return state


def state_row_by_step_written_in_place(x: f32[6, 1, 8], w: f32[8, 16]) -> f32[3, 1, 8]:
    """A state row chosen by the step, written in place by the cell that reads its matmul."""
    state = torch.zeros(3, 1, 8)
    for t in range(6):
        j = t % 3
        g = (state[j] @ w).chunk(2, dim=1)
        state[j] = torch.tanh(g[0]) * torch.sigmoid(g[1]) + x[t]
    return state
