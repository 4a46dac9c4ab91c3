"""Ops a newcomer reaches for: gathers and scatters, sorting, statistics, torch.nn.functional, no_grad blocks."""
from __future__ import annotations
import torch
import torch.nn.functional as F


def decode_boxes(deltas: f32[100, 4], anchors: f32[100, 4]) -> f32[100, 4]:
    widths = anchors[:, 2] - anchors[:, 0] + 1.0
    heights = anchors[:, 3] - anchors[:, 1] + 1.0
    ctr_x = anchors[:, 0] + 0.5 * widths
    ctr_y = anchors[:, 1] + 0.5 * heights
    dx, dy, dw, dh = deltas.unbind(1)
    pred = torch.zeros_like(deltas)
    pred[:, 0] = dx * widths + ctr_x - 0.5 * torch.exp(dw) * widths
    pred[:, 1] = dy * heights + ctr_y - 0.5 * torch.exp(dh) * heights
    pred[:, 2] = dx * widths + ctr_x + 0.5 * torch.exp(dw) * widths
    pred[:, 3] = dy * heights + ctr_y + 0.5 * torch.exp(dh) * heights
    pred[:, 0::2] = pred[:, 0::2].clamp(min=0, max=1.0)
    return pred


def scatter_gather(x: f32[4, 6], idx: i64[4, 3]) -> tuple[f32[4, 3], f32[4, 6]]:
    idx = idx % 6
    g = torch.gather(x, 1, idx)
    s = torch.zeros(4, 6).scatter_(1, idx, g)
    return g, s


def topk_sort(x: f32[5, 8]) -> tuple[f32[5, 3], i64[5, 3], f32[5, 8]]:
    v, i = x.topk(3, dim=1)
    s, _ = torch.sort(x, dim=1, descending=True)
    return v, i, s


def sorts_read_in_parts(
    x: f32[6, 40], y: f32[30, 4]
) -> tuple[f32[5, 4], i64[5, 4], f32[6, 4], f32[6, 3], f32[6, 3], i64[6, 5], f32[6, 5], i64[6, 2]]:
    # The host sorts only as much of each line as is read: a topk along dim 0, the smallest values, a sort read at
    # its end and at strided positions (whole lines), a slice from the middle, and indices used alone.
    v0, i0 = torch.topk(y, 5, dim=0)
    low, _ = torch.topk(x, 4, dim=1, largest=False)
    s, order = torch.sort(x, dim=1)
    s2, _ = torch.sort(x, dim=1, descending=True)
    _, best = x.topk(2, dim=-1)
    return v0, i0, low, s[:, -3:], s[:, 1:12:4], order[:, :5] * 1, s2[:, 2:7], best


def stats(x: f32[6, 10]) -> tuple[f32[6], f32[6], f32[10], f32[6]]:
    return x.var(dim=1), x.std(1), x.norm(dim=0), torch.logsumexp(x, dim=1)


def functional(x: f32[3, 8], w: f32[5, 8], b: f32[5]) -> tuple[f32[3, 5], f32[3, 5], f32[3, 8]]:
    y = F.linear(x, w, b)
    return F.relu(y), F.softmax(y, dim=-1), F.normalize(x, dim=1)


def grad_free(x: f32[4, 4]) -> f32[4, 4]:
    with torch.no_grad():
        x.mul_(2).add_(1)
        x.fill_diagonal_(0.0)
    return x.flip(0).roll(1, 1)


def new_ops(x: f32[3, 3]) -> tuple[f32[2, 2], f32[3, 3], f32[3, 3], i64[3]]:
    return x.new_zeros(2, 2) + 1, torch.eye(3) * x, torch.diag(torch.diag(x)), torch.tensor(x.shape).new_ones(3)


def embed_loop(tokens: i64[7], table: f32[10, 4]) -> f32[7, 4]:
    out = torch.empty(7, 4)
    for i, t in enumerate(tokens):
        out[i] = F.embedding(t, table) * (i + 1)
    return out


def elif_data(x: f32[8]) -> f32[8]:
    s = x.sum()
    if s > 1.0:
        y = x * 2
    elif s > -1.0:
        y = x + 1
    else:
        y = -x
    y[y < 0] = 0
    return y


def index_add(x: f32[5, 3], src: f32[4, 3]) -> f32[5, 3]:
    idx = torch.tensor([0, 4, 0, 2])
    x.index_add_(0, idx, src)
    x.index_fill_(1, torch.tensor([1]), -1.0)
    return x


def group_norms(x: f32[2, 6, 3, 2], w: f32[6], b: f32[6], z: f32[4, 8]) -> tuple[f32[2, 6, 3, 2], f32[4, 8]]:
    return F.group_norm(x * 3.0 + 1.0, 3, w, b), torch.group_norm(z, 2, eps=1e-3)
