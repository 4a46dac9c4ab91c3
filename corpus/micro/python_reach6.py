"""torch.nn modules real code keeps as attributes and the activations it runs in place: `nn.Sequential` (and a
subclass of it), `nn.ModuleDict`, loss modules (`nn.MSELoss(reduction=...)`, the deprecated `size_average`/`reduce`),
`nn.LeakyReLU(inplace=True)` and `F.relu(x, inplace=True)` on views, `.grad` assigned and read, `for ... else`, torch
functions and legacy tensor types as values, a module's `parameters()`, `collections.deque`, `F.binary_cross_entropy` and `nn.BCELoss`, and class bodies with `__annotations__` and `property(lambda ...)`
(held-out rounds 30 to 33)."""

from __future__ import annotations

from typing import Optional

from collections import deque

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.0)
        self.loss = nn.MSELoss(reduction="sum")
        self.seq = nn.Sequential(nn.ReLU(), nn.Dropout(0.5), nn.Identity(54, unused="kept"), nn.Tanh())
        self.heads = nn.ModuleDict(nn.ModuleDict({"gate": nn.Sigmoid(), "drop": nn.Dropout(0.2)}))

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


class Ratio:
    __annotations__ = {"scale": Optional[float]}

    def __init__(self, kind):
        self.kind = kind
        self.cache = {"a": 1, "b": 2}

    name = property(lambda self: "ratio-" + self.kind)

    def reset(self):
        self.cache.clear()
        return len(self.cache)


# A class body's `__annotations__` dict and `NAME = property(lambda self: ...)`, and `dict.clear()`
def class_body_forms(x: f32[3]) -> tuple[f32[3], int]:
    r = Ratio("iou")
    n = r.reset()
    return x * len(r.name), n


# `for ... else` and `while ... else`: the else runs where the loop ends without `break` (a nested loop's break
# is its own)
def for_else(x: f32[6], k: i64[2]) -> tuple[f32[6], int, int]:
    hits = 0
    for i in range(6):
        for j in range(2):
            if j == 1:
                break
        if i == 4:
            x[i] = 0.0
            break
        hits += 1
    else:
        x.add_(100.0)
    n = 0
    while n < 3:
        n += 1
    else:
        x.mul_(2.0)
    for i in range(3):
        pass
    else:
        hits += 10
    return x, hits, n


# `for ... else` whose `break` depends on the data
def dyn_break(x: f32[5]) -> tuple[f32[5], f32[5]]:
    y = x.clone()
    z = x.clone()
    for i in range(5):
        if x[i] > 0.5:
            break
    else:
        y.fill_(-1.0)
    for i in range(5):
        if x[i] > 2.0:
            break
    else:
        z.fill_(-1.0)
    return y, z


# torch functions and legacy tensor types as values; CPU autocast is off and a CPU build has no CUDA device
def funcs_as_values(x: f32[3, 4]) -> tuple[f32[4], f32[()], f32[3, 4], bool, int]:
    reduce_func = torch.max
    m = reduce_func(x)
    r = torch.amax
    y = torch.zeros(3, 4).type(torch.DoubleTensor).type(torch.FloatTensor)
    return r(x, 0), m, y + x, torch.is_autocast_enabled(), torch.cuda.device_count()


class Cell(nn.Module):
    def __init__(self, w, b, scale):
        super().__init__()
        self.weight = nn.Parameter(w)
        self.scale = scale
        self.bias = None if b is None else nn.Parameter(b, requires_grad=False)
        self.mask = torch.ones_like(w)


class Net(nn.Module):
    def __init__(self, w, b, v):
        super().__init__()
        self.first = Cell(w, b, 2.0)
        self.head = nn.Parameter(v)
        self.layers = nn.ModuleList([Cell(w * 2, None, 1.0), Cell(w * 3, b + 1.0, 3.0)])
        self.shared = self.first


# A module's parameters() and named_parameters(): the nn.Parameter attributes, own first, then each sub-module's
# (a ModuleList's under their index), a shared module once; requires_grad as nn.Parameter was given
def parameter_lists(w: f32[3, 2], b: f32[3], v: f32[4]) -> tuple[f32[3, 2], int, int, float, bool, bool]:
    net = Net(w, b, v)
    names = [n for n, _ in net.named_parameters()]
    total = sum(p.numel() for p in net.parameters())
    trainable = sum(p.numel() for p in filter(lambda p: p.requires_grad, net.parameters()))
    first = next(net.first.parameters())
    expected = ["head", "first.weight", "first.bias", "layers.0.weight", "layers.1.weight", "layers.1.bias"]
    return first.data * len(names), total, trainable, float(len(names[0])), names == expected, net.first.mask.requires_grad


# collections.deque with maxlen (AdaShift's window of past gradients): appends past maxlen drop the oldest; indexed,
# iterated, measured; popleft and appendleft
def deque_window(g: f32[5, 3]) -> tuple[f32[3], f32[3], f32[3], int, int]:
    window = deque([g[0]], maxlen=3)
    for k in range(1, 5):
        window.append(g[k] * k)
    total = torch.zeros(3)
    for x in window:
        total += x
    first = window.popleft()
    window.appendleft(g[0])
    return total, first, window[-1] + window[0], len(window), window.maxlen


class Pair(nn.Module):
    def __init__(self, a, b):
        super().__init__()
        self.a = nn.Parameter(a)
        self.b = nn.Parameter(b)


# A frozen parameter (`p.requires_grad = False`) is left out of what trains; `in` on a ModuleDict (its keys) and a
# ModuleList (its modules); a class-body `property` over a method of that class, beside a top-level function of the
# same name (review of this stop)
def frozen_and_contained(w: f32[3, 2], b: f32[3]) -> tuple[f32[3, 2], f32[3], int, bool, bool, bool, int]:
    m = Pair(w.clone(), b.clone())
    m.a.requires_grad = False
    trainable = [p for p in m.parameters() if p.requires_grad]
    with torch.no_grad():
        for p in m.parameters():
            if p.requires_grad:
                p.sub_(0.5)
    d = nn.ModuleDict({"ab": nn.ReLU()})
    cells = nn.ModuleList([m])
    return m.a.detach(), m.b.detach(), len(trainable), "ab" in d, "training" in d, m in cells, Labelled().label


def _label(self):
    return 100


class Labelled:
    def __init__(self):
        self.k = 3

    def _label(self):
        return self.k

    label = property(_label)


class Wrapper:
    def __init__(self, inner):
        self.inner = inner

    @property
    def groups(self):
        return self.inner.param_groups

    @groups.setter
    def groups(self, value):
        self.inner.param_groups = value


# A property with a setter (apex's LARC wraps an optimizer so): `o.groups = v` calls the setter
def property_setter(w: f32[3], g: f32[3]) -> tuple[f32[3], int]:
    opt = torch.optim.SGD([w], lr=0.5)
    wrapped = Wrapper(opt)
    groups = list(wrapped.groups)
    groups[0]["lr"] = 0.25
    wrapped.groups = groups + groups
    wrapped.groups = wrapped.groups[:1]
    w.grad = g
    opt.step()
    return w, len(opt.param_groups)


# F.binary_cross_entropy and nn.BCELoss (written in funcfuse's nn prelude after PyTorch's CPU kernel: each log
# clamped at -100): mean, per-element with a weight, sum, and the legacy size_average=False
def bce_losses(x: f32[4, 3], y: f32[4, 3], w: f32[3]) -> tuple[f32[()], f32[4, 3], f32[()], f32[()]]:
    p = torch.sigmoid(x * 3)
    t = (y > 0).float()
    a = F.binary_cross_entropy(p, t)
    b = F.binary_cross_entropy(p, t, weight=w.abs(), reduction="none")
    c = nn.BCELoss(reduction="sum")(p, y.abs())
    d = nn.BCELoss(size_average=False)(torch.sigmoid(x), t)
    return a, b, c, d
