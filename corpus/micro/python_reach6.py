"""torch.nn modules real code keeps as attributes and the activations it runs in place: `nn.Sequential` (and a
subclass of it), `nn.ModuleDict`, loss modules (`nn.MSELoss(reduction=...)`, the deprecated `size_average`/`reduce`),
`nn.LeakyReLU(inplace=True)` and `F.relu(x, inplace=True)` on views, and `.grad` assigned and read (held-out rounds
30 to 32)."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.loss = nn.MSELoss(reduction="sum")
        self.seq = nn.Sequential(nn.ReLU(), nn.Dropout(0.5), nn.Tanh())
        self.heads = nn.ModuleDict({"gate": nn.Sigmoid(), "drop": nn.Dropout(0.2)})

    def forward(self, x, y):
        h = self.seq(self.drop(x))
        h = self.heads["gate"](h) + len(self.seq) + len(self.heads)
        for name in self.heads:
            if name == "drop":
                h = self.heads[name](h)
        return h, self.loss(h, y)


# A module built of nn.Sequential and nn.ModuleDict, in eval mode (the dropouts then compute nothing)
def sequential_and_module_dict(x: f32[4, 3], y: f32[4, 3]) -> tuple[f32[4, 3], f32[()]]:
    m = Block()
    m.eval()
    return m(x, y)


# Loss modules with the deprecated size_average / reduce arguments and reduction keywords
def loss_modules(x: f32[4, 3], y: f32[4, 3], t: i64[4]) -> tuple[f32[()], f32[4, 3], f32[()], f32[()], f32[()]]:
    a = nn.L1Loss(size_average=False)(x, y)
    b = nn.SmoothL1Loss(reduce=False, beta=0.5)(x, y)
    c = nn.KLDivLoss(reduction="batchmean", log_target=True)(x, y)
    d = nn.CrossEntropyLoss(ignore_index=2)(x, t % 3)
    e = nn.BCEWithLogitsLoss(pos_weight=torch.full((3,), 2.0))(x, (y > 0).float())
    return a, b, c, d, e


class Stack(nn.Sequential):
    def __init__(self, n):
        super().__init__(nn.ReLU(), nn.Tanh())
        self.n = n


# A subclass of nn.Sequential, indexed and appended to
def sequential_subclass(x: f32[4, 3]) -> tuple[f32[4, 3], f32[4, 3]]:
    s = Stack(2)
    s.append(nn.Sigmoid())
    return s(x) * s.n, s[1](x)


# In-place activations, as modules and as F.*(inplace=True), on views: the input is written and returned
def inplace_activations(x: f32[2, 6]) -> tuple[f32[2, 6], f32[6], f32[4]]:
    act = nn.LeakyReLU(0.2, inplace=True)
    y = act(x[0])
    z = F.relu(x[1, 2:], inplace=True)
    F.hardswish(x[1, :2], inplace=True)
    return x, y, z


# A gradient assigned, replaced, accumulated into and cleared, read back per step
def assigned_grads(w: f32[4, 3], g: f32[3, 4, 3]) -> tuple[f32[4, 3], f32[4, 3]]:
    for k in range(3):
        if w.grad is None:
            w.grad = g[k].clone()
        else:
            w.grad += g[k]
        w.sub_(w.grad, alpha=0.1)
        if k == 1:
            w.grad = None
    return w, w.grad
