"""Classes of the program file (held-out rounds 25-27: KV caches, coders, matchers, cells and optimizers written as
classes): a constructor with `__init__`, attributes read and written (`self.pos += 1`), class-level values, a
property, `__len__`, an `nn.Module` called through `forward`, a subclass calling `super().forward`, a static method
called on the class and on an instance, and a `@dataclass`."""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F


class _Cache:
    scale = 2.0

    def __init__(self, k, v):
        self.k = k
        self.v = v
        self.pos = 0

    def update(self, k1, v1):
        self.k[:, self.pos] = k1
        self.v[:, self.pos] = v1
        self.pos += 1
        return self.k, self.v

    @property
    def size(self):
        return self.pos * self.scale

    def __len__(self):
        return self.pos


class _Cell(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.w = w

    def forward(self, x):
        return torch.tanh(x @ self.w)


class _Scaled(_Cell):
    def forward(self, x):
        return super().forward(x) * 2.0

    @staticmethod
    def helper(x):
        return x + 1


class _ConvCell(nn.Module):
    def __init__(self, w, act):
        super(_ConvCell, self).__init__()
        self.weight = nn.Parameter(w)
        self.act = act
        self.state = None

    def forward(self, x):
        setattr(self, "state", getattr(torch, self.act)(x @ self.weight))
        return self.state


class _Head(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.inner = _Cell(w)
        self.stats = {"calls": 0}

    def forward(self, x):
        scale = 2.0 if self.training else 1.0
        if self.inner.training:
            scale = scale + 10.0
        return self.inner(x) * scale


@dataclass
class _Params:
    lr: float
    beta: float = 0.9


def objects_of_the_files_classes(
    k: f32[2, 4, 3], v: f32[2, 4, 3], x: f32[2, 3], w: f32[3, 3]
) -> tuple[f32[2, 4, 3], f32[2, 4, 3], f32[2, 3], f32[()]]:
    c = _Cache(k.clone(), v.clone())
    for t in range(3):
        c.update(x, x * 2)
    cell = _Scaled(w)
    p = _Params(0.1)
    y = cell(x) + _Scaled.helper(x) + cell.helper(x) + _Cell(w)(x)
    if len(c) > 2:
        y = y + c.size
    if x.sum() > 0:
        c.pos = 10
    y.mul_(p.beta)
    return c.k, c.v, y + c.pos, torch.tensor(p.lr)


def attributes_by_name_and_parameters(
    x: f32[2, 3], w: f32[3, 3]
) -> tuple[f32[2, 3], f32[3, 3], f32[2, 3], f32[2, 3]]:
    # Held-out ports (round 27): ConvLSTM's `setattr(self, name, value)` and `getattr(module, name)`, torchdiffeq's
    # `super(Class, self).__init__()`, D-FINE's
    # `nn.Parameter(tensor)` (a tensor over the same storage: scaling its `.data` scales `w`)
    cell = _ConvCell(w, "tanh")
    for i in range(2):
        setattr(cell, "half{}".format(i), w * 0.5 * i)
    y = cell(x) + getattr(cell, "half1").sum() * hasattr(cell, "half1") + hasattr(cell, "forward") * 3.0
    if hasattr(cell, "missing"):
        y = y * 100.0
    cell.weight.data.mul_(0.5)
    extra = getattr(cell, "missing", 1.5) + getattr(cell, "weight").sum()
    for name in ["state", "weight"]:
        y = y + getattr(cell, name).sum()
    return y * extra, w, getattr(F, "relu")(x), cell(x) + cell.state


def module_training_modes_and_spread_dicts(
    x: f32[2, 3], w: f32[3, 3]
) -> tuple[f32[2, 3], f32[2, 3], f32[2, 3], bool, f32[2, 3]]:
    # Held-out ports (round 28): RT-DETR's `deploy()` calling `self.eval()` on its nn.Module (its sub-modules leave
    # training mode too), dreamerv3's `{"stoch": stoch, "deter": deter, **stats}`
    head = _Head(w)
    a = head(x)
    b = head.eval()(x)
    c = head.train()(x)
    head.inner.eval()
    stats = {"mean": x.mean(0), "deter": x * 0.0}
    state = {"stoch": x, "deter": x + 1.0, **stats, "last": a}
    return a, b, c + head(x), head.training and not head.inner.training, state["deter"] + state["last"]


class _BufferCache(dict):
    """A dict by another name."""


def _cached_bias(cache, n):
    if (bias := cache.get("bias")) is not None and bias.shape[-1] >= n:
        return bias
    bias = torch.triu(torch.ones(n, n), diagonal=1)
    cache["bias"] = bias
    return bias


def _sin_cos(cache):
    if (s := cache.get("sin")) is not None and (c := cache.get("cos")) is not None and s.shape[0] >= 2:
        return s + c
    elif not (z := cache.get("z")) is None:
        return z
    return None


def _either(cache):
    if (a := cache.get("a")) is not None or (b := cache.get("b")) is not None:
        return a if a is not None else b * 3.0
    return None


def dict_subclass_and_assignment_expressions(
    x: f32[3, 3]
) -> tuple[f32[3, 3], bool, f32[3, 3], f32[3, 3], int, f32[3, 3], f32[3, 3], bool]:
    # Held-out ports (round 27): OLMo's `class BufferCache(dict)` and its cached causal bias and rotary tables read
    # with `if (bias := cache.get(...)) is not None and ...:`; the second test's later `:=` runs only where the first
    # operand holds, as Python evaluates `and`
    cache = _BufferCache()
    a = _cached_bias(cache, 3)
    b = _cached_bias(cache, 3)
    missing = _sin_cos(cache)
    cache["sin"] = x
    cache["cos"] = x * 2.0
    both = _sin_cos(cache)
    either = (_either({"a": x}), _either({"b": x}), _either({}) is None)
    return a + b + x, missing is None, both, _sin_cos(_BufferCache(z=x)), len(cache), *either



class _SeparatedNorm(nn.Module):
    # jihunchoi's BN-LSTM (held-out round 30): one running mean per time step, registered as buffers by name
    def __init__(self, n, steps):
        super().__init__()
        self.steps = steps
        for i in range(steps):
            self.register_buffer('running_mean_{}'.format(i), torch.zeros(n))
        self.register_buffer("scale", torch.ones(n), persistent=False)

    def forward(self, x, t):
        mean = getattr(self, 'running_mean_{}'.format(t))
        mean.add_(x.mean(0) * 0.1)
        return (x - mean) * self.scale


def buffers_registered_by_name(x: f32[4, 3]) -> tuple[f32[4, 3], f32[4, 3], f32[3], f32[3]]:
    norm = _SeparatedNorm(3, 2)
    a = norm(x, 0)
    b = norm(x * 2.0, 1)
    return a, b, norm.running_mean_0, norm.running_mean_1


class _Layer(nn.Module):
    # OpenNMT's StackedLSTM and most models: a dropout module kept as an attribute, called on every layer
    def __init__(self, w, p):
        super().__init__()
        self.w = w
        self.dropout = nn.Dropout(p)

    def forward(self, x):
        return self.dropout(torch.tanh(x @ self.w))


class _Stack(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.first = _Layer(w, 0.3)
        self.second = _Layer(w * 0.5, 0.0)
        self.out = nn.AlphaDropout(p=0.2)

    def forward(self, x):
        return self.out(self.second(self.first(x)))


def dropout_modules_in_eval_mode(x: f32[3, 4], w: f32[4, 4]) -> tuple[f32[3, 4], f32[3, 4], bool, bool, bool]:
    model = _Stack(w)
    model.eval()
    y = model(x)
    # p = 0 draws nothing even in training mode (PyTorch returns the input itself)
    fresh = _Layer(w, 0.0)
    return y, fresh(x), model.first.dropout.training, fresh.dropout.training, model.out.train().training


class _PlainCell(nn.Module):
    pass


class _NormedCell(_PlainCell):
    # jihunchoi's BN-LSTM: `if isinstance(cell, BNLSTMCell)` picks the call
    pass


def isinstance_of_classes_of_the_file(x: f32[3]) -> tuple[bool, bool, bool, bool, bool, bool]:
    plain, bn = _PlainCell(), _NormedCell()
    return (
        isinstance(bn, _NormedCell),
        isinstance(bn, _PlainCell),
        isinstance(plain, _NormedCell),
        isinstance(x, (_PlainCell, torch.Tensor)),
        isinstance(plain, (int, _PlainCell)),
        isinstance({"a": 1}, _PlainCell),
    )


class _Scale(nn.Module):
    # a module whose forward reads its mode
    def forward(self, x):
        return x * 2.0 if self.training else x


class _Cells(nn.Module):
    # georgeyiasemis' LSTM from scratch: cells kept in an nn.ModuleList, appended, indexed and iterated; the model's
    # eval() reaches them, but not the modules of a plain list (PyTorch does not register those)
    def __init__(self, ws):
        super().__init__()
        self.cells = nn.ModuleList()
        for w in ws:
            self.cells.append(_Layer(w, 0.5))
        self.more = nn.ModuleList([_Scale(), nn.Dropout(p=0.2)])
        self.plain = [_Scale()]

    def forward(self, x):
        for i in range(len(self.cells)):
            x = self.cells[i](x)
        for m in self.more:
            x = m(x)
        return self.plain[0](x)


def module_lists(x: f32[3, 4], w0: f32[4, 4], w1: f32[4, 4]) -> tuple[f32[3, 4], int, bool, bool, bool]:
    model = _Cells([w0, w1])
    model.eval()
    return model(x), len(model.cells), model.cells[1].dropout.training, model.more[0].training, model.plain[0].training
