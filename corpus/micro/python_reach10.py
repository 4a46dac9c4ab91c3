"""Python and PyTorch that real code uses, added after held-out round 37: `torch.nn.utils.clip_grad_norm_` and
`clip_grad_value_` (BertAdam's per-parameter clipping, DINO's clip_gradients), `nn.GroupNorm` and `nn.BatchNorm1d/2d`
modules (latent-diffusion's UNet stand-in, pytorch-kaldi's liGRU, IndRNN), `Tensor.unfold` (prompt-lookup-decoding's
n-gram windows), `time.time()`, `weakref.ref` and `distutils.util.strtobool` (YOLOv2's timing, pytorch_ema's
parameter references, pytorch-kaldi's flags) and `@contextlib.contextmanager` (pytorch_ema's `average_parameters`,
LitEma's `ema_scope`)."""

from __future__ import annotations

import contextlib
import time
import weakref
from contextlib import contextmanager
from distutils.util import strtobool

import torch
import torch.nn as nn
from torch.nn.utils import clip_grad_norm_


def clip_norms(w: f32[8, 4], b: f32[4], gw: f32[8, 4], gb: f32[4]):
    m = nn.Linear(8, 4)
    with torch.no_grad():
        m.weight.copy_(w.t())
        m.bias.copy_(b)
    m.weight.grad = gw.t() * 3.0
    m.bias.grad = gb * 2.0
    n1 = clip_grad_norm_(m.parameters(), 1.0)
    n2 = torch.nn.utils.clip_grad_norm_([m.bias], 0.5, norm_type=float("inf"))
    torch.nn.utils.clip_grad_value_(m.parameters(), 0.05)
    v = nn.utils.parameters_to_vector(m.parameters())
    return n1, n2, m.weight.grad, m.bias.grad, v


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 8, 3, padding=1)
        self.gn = nn.GroupNorm(2, 8)
        self.bn = nn.BatchNorm2d(8)
        self.bn1 = nn.BatchNorm1d(8, momentum=None)

    def forward(self, x):
        y = self.gn(self.conv(x))
        y = self.bn(y)
        return self.bn1(y.mean(dim=(2, 3)))


def norm_modules(x: f32[2, 4, 6, 6], w: f32[8, 4, 3, 3], g: f32[8]):
    net = _Net()
    with torch.no_grad():
        net.conv.weight.copy_(w)
        net.conv.bias.zero_()
        net.gn.weight.copy_(g)
        net.bn.weight.copy_(g * 0.5)
    net.train()
    a = net(x)
    b = net(x * 2.0)
    net.eval()
    c = net(x)
    sd = net.state_dict()
    return a, b, c, net.bn.running_mean, net.bn.running_var, net.bn1.num_batches_tracked, sd["bn.running_var"], len(sd)


def unfold_windows(x: f32[3, 10], t: i64[20]):
    w = x.unfold(1, 4, 3)
    s = w.sum(-1)
    w[:, 1] += 1.0
    ng = t.unfold(0, 3, 1)
    hits = (ng == t[-3:]).all(dim=1)
    y = x.t().unfold(0, 2, 2)
    return s, x, hits, y.contiguous(), w.shape[1]


class _WeakEma:
    def __init__(self, params, decay):
        self.decay = decay
        self.shadow = [p.clone().detach() for p in params]
        self._refs = [weakref.ref(p) for p in params]

    def update(self):
        for s, r in zip(self.shadow, self._refs):
            p = r()
            s.sub_((1.0 - self.decay) * (s - p))


def python_stdlib_bits(w: f32[4, 4], b: f32[4]):
    t0 = time.time()
    flags = list(map(strtobool, "True,no,1,off".split(",")))
    ema = _WeakEma([w, b], 0.9)
    w.mul_(2.0)
    ema.update()
    t1 = time.perf_counter()
    scale = sum(flags) + (t1 - t0) * 0.0
    try:
        strtobool("maybe")
        bad = 0
    except ValueError:
        bad = 1
    return ema.shadow[0] * scale, ema.shadow[1], bad


class _Ema:
    def __init__(self, params, decay):
        self.decay = decay
        self.params = list(params)
        self.shadow = [p.clone().detach() for p in self.params]
        self.collected = None

    def update(self):
        for s, p in zip(self.shadow, self.params):
            s.sub_((1.0 - self.decay) * (s - p))

    @contextlib.contextmanager
    def average_parameters(self):
        self.collected = [p.clone() for p in self.params]
        for s, p in zip(self.shadow, self.params):
            p.data.copy_(s.data)
        try:
            yield self.params[0]
        finally:
            for c, p in zip(self.collected, self.params):
                p.data.copy_(c.data)


@contextmanager
def _scaled(t, k):
    old = t.clone()
    t.mul_(k)
    yield
    t.copy_(old)


def ema_scope_steps(w: f32[4, 4], b: f32[4], x: f32[3, 4]):
    ema = _Ema([w, b], 0.9)
    for i in range(3):
        w.add_(0.1 * (i + 1))
        b.sub_(0.05)
        ema.update()
    with ema.average_parameters() as first:
        inside = x @ w + b
        same = first is w
    outside = x @ w + b
    with _scaled(b, 3.0):
        scaled = b.clone()
    return inside, outside, same, scaled, b
