"""Python and PyTorch that real code uses, added after held-out round 38: `nn.Module.add_module` (sentiment-discovery's
stacked mLSTM), a `@dataclass` subclass of a `@dataclass` (kvpress's presses), torch.optim.lr_scheduler's
schedulers and a subclass of `_LRScheduler` (pytorch-gradual-warmup-lr over CosineAnnealingLR, ReduceLROnPlateau),
`F.pad` with a value known only at run time (kvpress's sink tokens at `scores.max().item()`), and `type(o)` of an
instance of a class compared with the class (`type(self.after_scheduler) != ReduceLROnPlateau`), and class-level
values read through the class (OneNet's and DIoU's configs as classes: `cfg = Cfg; cfg.ALPHA`, `Cfg.CLIP`)."""

from __future__ import annotations

import math

import numpy as np
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim import lr_scheduler
from torch.optim.lr_scheduler import CosineAnnealingLR, StepLR, _LRScheduler


class _Stack(nn.Module):
    def __init__(self, n, d):
        super().__init__()
        self.n = n
        for i in range(n):
            self.add_module("layer_%d" % i, nn.Linear(d, d))
        self.register_module("head", nn.Linear(d, 2))

    def forward(self, x):
        for i in range(self.n):
            x = torch.tanh(getattr(self, "layer_%d" % i)(x))
        return self.head(x)


def add_module_stack(x: f32[3, 4], w: f32[4, 4]):
    m = _Stack(2, 4)
    with torch.no_grad():
        for p in m.parameters():
            p.copy_(w[: p.shape[0], : p.shape[-1]] if p.dim() == 2 else w[0, : p.shape[0]])
    names = [n for n, _ in m.named_parameters()]
    try:
        m.add_module("a.b", nn.Identity())
        bad = 0
    except KeyError:
        bad = 1
    return m(x), len(names), bad


@dataclass
class _BasePress:
    compression_ratio: float = 0.0
    scale: float = 1.0

    def score(self, x):
        return x * self.scale


@dataclass
class _ExpectedPress(_BasePress):
    n_future: int = 2
    scale: float = 2.0
    extra: list = field(default_factory=list)


def dataclass_inheritance(x: f32[4, 6]):
    p = _ExpectedPress(compression_ratio=0.5, n_future=3)
    q = _ExpectedPress(0.25, 3.0, 1)
    k = int(x.shape[1] * (1 - p.compression_ratio))
    s = p.score(x)
    top = s.topk(k, dim=-1).values
    return top, q.scale * q.n_future + q.compression_ratio, len(p.extra)


class _Warmup(_LRScheduler):
    # A gradual warm-up in the style of ildoonet/pytorch-gradual-warmup-lr: multiplier 1, then hand over.
    def __init__(self, optimizer, total_epoch, after):
        self.total_epoch = total_epoch
        self.after = after
        self.finished = False
        super().__init__(optimizer)

    def get_lr(self):
        if self.last_epoch > self.total_epoch:
            if not self.finished:
                self.after.base_lrs = [base_lr for base_lr in self.base_lrs]
                self.finished = True
            return self.after.get_last_lr()
        return [base_lr * (float(self.last_epoch) / self.total_epoch) for base_lr in self.base_lrs]

    def step(self, epoch=None):
        if self.finished and self.after:
            self.after.step()
            self._last_lr = self.after.get_last_lr()
        else:
            return super().step(epoch)


def lr_schedules(w: f32[6, 4], g: f32[6, 4]):
    p = w.clone()
    opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    cos = CosineAnnealingLR(opt, T_max=5, eta_min=0.001)
    lrs = []
    for step in range(12):
        p.grad = g * (step + 1)
        opt.step()
        cos.step()
        lrs.append(cos.get_last_lr()[0])
    q = w.clone()
    opt2 = torch.optim.SGD([{"params": [q]}, {"params": [w.clone()], "lr": 0.5}], lr=0.2)
    scheds = [
        lr_scheduler.StepLR(opt2, step_size=3, gamma=0.5),
        lr_scheduler.MultiStepLR(opt2, milestones=[2, 5, 5], gamma=0.3),
        lr_scheduler.ExponentialLR(opt2, gamma=0.9),
        lr_scheduler.LinearLR(opt2, start_factor=0.25, total_iters=4),
        lr_scheduler.LambdaLR(opt2, [lambda e: 0.95**e, lambda e: 1.0 / (e + 1)]),
    ]
    seen = []
    for step in range(7):
        q.grad = g
        opt2.step()
        for s in scheds:
            s.step()
            seen.append(s.get_last_lr()[0] + s.get_last_lr()[1])
    scheds[0].step(10)
    seen.append(opt2.param_groups[0]["lr"])
    r = w.clone()
    opt3 = torch.optim.SGD([r], lr=0.05)
    after = CosineAnnealingLR(opt3, T_max=8)
    warm = _Warmup(opt3, 3, after)
    for step in range(8):
        r.grad = g
        opt3.step()
        warm.step()
        seen.append(opt3.param_groups[0]["lr"])
    return p, q, r, torch.tensor(lrs), torch.tensor(seen)


def plateau_schedule(w: f32[6, 4], g: f32[6, 4]):
    p = w.clone()
    opt = torch.optim.SGD([p], lr=0.1)
    plateau = lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=1, cooldown=1, min_lr=0.01)
    losses = [1.0, 0.9, 0.95, 0.97, 0.99, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    lrs = []
    for step, loss in enumerate(losses):
        p.grad = g
        opt.step()
        plateau.step(loss)
        lrs.append(plateau.get_last_lr()[0])
    kind = type(plateau) == lr_scheduler.ReduceLROnPlateau
    return p, torch.tensor(lrs), kind


def pad_with_run_time_value(s: f32[2, 3, 5], k: i64[4]):
    a = F.pad(s, (2, 0), value=s.max().item())
    b = F.pad(k, (1, 1), value=int(k.sum().item()))
    c = F.pad(s, (0, 1, 1, 0), value=float(s.mean()))
    return a, b, c


class _TA:
    pass


class _TB(_TA):
    pass


def type_of_objects(x: f32[2]):
    a = _TB()
    opt = torch.optim.SGD([x.clone()], lr=0.1)
    s = StepLR(opt, 2)
    l = nn.Linear(2, 2)
    return x, type(a) == _TB, type(a) == _TA, type(a) is _TB, type(a) != _TB, type(s) == StepLR, type(l) == nn.Linear, type(s) == torch.optim.lr_scheduler.StepLR


class _Cfg:
    ALPHA = 0.25
    GAMMA = 2.0
    SIZES = (32, 64)
    CLIP = np.log(1000.0 / 16)
    NAME = "focal"


class _Sub(_Cfg):
    GAMMA = 1.5
    SCALE = _Cfg.ALPHA * 4


class _Anchors:
    STRIDES = (8, 16)

    def __init__(self, k):
        self.k = k

    def sizes(self):
        return [s * self.k for s in _Anchors.STRIDES]


def class_level_reads(x: f32[4, 6]):
    cfg = _Cfg
    p = torch.sigmoid(x)
    loss = -cfg.ALPHA * (1 - p) ** _Sub.GAMMA * torch.log(p.clamp(min=1e-6))
    d = torch.clamp(x * 10, max=_Cfg.CLIP)
    a = _Anchors(2)
    made = cfg()
    return loss, d, sum(_Sub.SIZES), _Sub.SCALE, len(_Sub.NAME), sum(a.sizes()), made.GAMMA, type(made) == _Cfg
