"""Products that share an operand (issue #16's matmul-merging rules, `rules/matmul.rules`): projections of one input
joined along columns (as separate query and key heads are), products of one weight joined along rows, a product with
a joined weight split into chunks, a sum of two products over joined inputs (a recurrent cell's `cat([x, ctx]) @ w_ih
+ h @ w_hh`; one product only with `--fast-math`), and shapes the rules must leave alone: a batched input, whose
join along dim 1 joins rows, not columns, and a vector times the weights."""
from __future__ import annotations

import torch


def shared_input_columns(x: f32[6, 16], wq: f32[16, 8], wk: f32[16, 8]) -> f32[6, 16]:
    """Two heads of one input, joined along columns: one product with the joined weights."""
    return torch.relu(torch.cat([x @ wq, x @ wk], 1))


def shared_weight_rows(x: f32[8, 16], y: f32[4, 16], w: f32[16, 12]) -> f32[12, 12]:
    """Two inputs through one weight, joined along rows: one product of the joined inputs."""
    return torch.tanh(torch.cat([x @ w, y @ w], 0))


def joined_weight_chunks(x: f32[5, 12], a: f32[12, 10], b: f32[12, 6]) -> tuple[f32[5, 10], f32[5, 6]]:
    """A product with weights joined along columns, read back in the two column blocks."""
    y = x @ torch.cat([a, b], 1)
    return torch.sigmoid(y[:, :10]), y[:, 10:] * 2.0


def cell_input_projection(
    x: f32[1, 16], ctx: f32[1, 16], h: f32[1, 24], w_ih: f32[32, 96], w_hh: f32[24, 96]
) -> f32[1, 24]:
    """`cat([x, ctx]) @ w_ih + h @ w_hh`: the sum of two products is one product over joined operands only in real
    arithmetic (the order of the sum changes), so only `--fast-math` joins them."""
    w_ih = w_ih * 0.2
    w_hh = w_hh * 0.2
    gates = torch.cat([x, ctx], 1) @ w_ih + h @ w_hh
    i, f, o, g = gates.chunk(4, 1)
    c = torch.sigmoid(f) * h + torch.sigmoid(i) * torch.tanh(g)
    return torch.sigmoid(o) * torch.tanh(c)


def batched_input_joins_rows(x: f32[2, 3, 4], a: f32[4, 5], b: f32[4, 5]) -> f32[2, 6, 5]:
    """A batched input: dim 1 of the products is their rows, so the column rule must not fire."""
    return torch.cat([x @ a, x @ b], 1) + 1.0


def vector_times_joined_weights(v: f32[12], a: f32[12, 3], b: f32[12, 4]) -> f32[7]:
    """A vector input: its product with the joined weights is a vector, joined along dim 0."""
    return torch.exp(v @ torch.cat([a, b], 1) * 0.1)
