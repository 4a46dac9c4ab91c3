"""Modules with weights and checkpoint loading, added after held-out round 35, whose ports keep the originals'
`nn.Linear` / `nn.LSTM` / `nn.GRU` / `nn.Conv1d` / `nn.Embedding` modules and load their weights from the inputs
(`state_dict(keep_vars=True)` + `copy_`, `load_state_dict`). Random initial weights (module constructors, `nn.init`'s
random initializers, `torch.randn`, `torch.Tensor(n, m)`) are drawn: written before they are read, they give
PyTorch's results; read, they are refused (tests/engines.rs). Also `state_dict`/`load_state_dict` with buffers,
strict and not, the recurrent layers (layers, bidirectional, batch_first, unbatched) and cells against PyTorch, and
sorts and top-k of equal keys in the order PyTorch's CPU kernels leave them (zero-padded scores, equal usages).
"""
from __future__ import annotations

import copy

import torch
import torch.nn as nn


def _load(module, flat, scale=0.5):
    off = 0
    with torch.no_grad():
        for _, t in module.state_dict(keep_vars=True).items():
            n = t.numel()
            t.copy_(flat[off:off + n].view_as(t) * scale)
            off += n
    return off


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.zeros(3, 2))
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("tmp", torch.zeros(2), persistent=False)
        self.b = nn.Parameter(torch.zeros(3))

    def forward(self, x):
        return (x * self.scale) @ self.w.t() + self.b

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.first = Block()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.gain = nn.Parameter(torch.ones(1))

    def forward(self, x):
        x = self.first(x)[:, :2]
        for b in self.blocks:
            x = b(x)[:, :2]
        return x * self.gain


def load_then_use(x: f32[4, 3], w: f32[2, 3], b: f32[2]):
    lin = torch.Tensor(2, 3)
    nn.init.xavier_uniform_(lin, gain=nn.init.calculate_gain('tanh'))
    bias = torch.Tensor(2)
    bias.uniform_(-0.1, 0.1)
    lin.copy_(w)
    bias.data.copy_(b)
    return x @ lin.t() + bias


def partial_then_read(x: f32[4, 3], w: f32[2, 3]):
    lin = torch.Tensor(2, 3)
    nn.init.normal_(lin, std=0.01)
    lin[0].copy_(w[0])
    return x @ lin[0]


def state_keys(flat: f32[40]):
    net = Net()
    names = [k for k in net.state_dict()]
    buf = [k for k, _ in net.named_buffers()]
    return torch.tensor([len(names), len(buf), len(list(net.parameters())), len(list(net.children())), len(list(net.modules()))])


def load_flat(x: f32[4, 2], flat: f32[40]):
    net = Net()
    off = 0
    with torch.no_grad():
        for _, t in net.state_dict(keep_vars=True).items():
            n = t.numel()
            t.copy_(flat[off:off + n].view_as(t))
            off += n
    return net(x)


def load_dict(x: f32[4, 2], w: f32[3, 2], b: f32[3], s: f32[2]):
    blk = Block()
    blk.load_state_dict({"w": w, "b": b, "scale": s})
    return blk(x)


def load_nonstrict(x: f32[4, 2], w: f32[3, 2]):
    blk = Block()
    missing, unexpected = blk.load_state_dict({"w": w, "extra": w}, strict=False)
    return blk(x) + len(missing) + 10 * len(unexpected)


def linear_loaded(x: f32[4, 6], flat: f32[64]):
    lin = nn.Linear(6, 5)
    _load(lin, flat)
    return lin(x)


def lstm_two_layers(x: f32[5, 2, 3], flat: f32[400]):
    lstm = nn.LSTM(3, 4, num_layers=2)
    _load(lstm, flat)
    out, (h, c) = lstm(x)
    return out, h, c


def lstm_bidirectional_batch_first(x: f32[2, 5, 3], h0: f32[2, 2, 4], c0: f32[2, 2, 4], flat: f32[400]):
    lstm = nn.LSTM(3, 4, batch_first=True, bidirectional=True)
    _load(lstm, flat)
    out, (h, c) = lstm(x, (h0, c0))
    return out, h, c


def gru_unbatched(x: f32[5, 3], flat: f32[300]):
    gru = nn.GRU(3, 4, num_layers=2)
    _load(gru, flat)
    out, h = gru(x)
    return out, h


def rnn_relu(x: f32[5, 2, 3], flat: f32[300]):
    rnn = nn.RNN(3, 4, nonlinearity="relu", bias=False)
    _load(rnn, flat)
    out, h = rnn(x)
    return out, h


def cells(x: f32[3, 4], flat: f32[600]):
    lc = nn.LSTMCell(4, 5)
    gc = nn.GRUCell(4, 5)
    rc = nn.RNNCell(4, 5)
    off = _load(lc, flat)
    off += _load(gc, flat[off:])
    _load(rc, flat[off:])
    h, c = lc(x)
    g = gc(x, h)
    r = rc(x[0])
    return h, c, g, r


def conv_and_norm(x: f32[2, 3, 10], flat: f32[200]):
    conv = nn.Conv1d(3, 4, kernel_size=3, padding=1, groups=1)
    norm = nn.LayerNorm(10)
    _load(conv, flat)
    return norm(conv(x))


def conv2d_loaded(x: f32[1, 2, 6, 6], flat: f32[200]):
    conv = nn.Conv2d(2, 4, 3, stride=2, bias=False)
    _load(conv, flat)
    return conv(x)


def embedding_padding(idx: i64[6], flat: f32[40]):
    emb = nn.Embedding(10, 4, padding_idx=0)
    with torch.no_grad():
        emb.weight[1:].copy_(flat[:36].view(9, 4))
    return emb(idx.clamp(0, 9))


def load_into_model(x: f32[3, 4], w: f32[5, 4], b: f32[5]):
    class_model = nn.Sequential(nn.Linear(4, 5), nn.Tanh())
    class_model.load_state_dict({"0.weight": w, "0.bias": b})
    return class_model(x)


def named_params(flat: f32[8]):
    lstm = nn.LSTM(2, 3, num_layers=2, bidirectional=True)
    names = [n for n, _ in lstm.named_parameters()]
    return torch.tensor([len(names), len(list(lstm.parameters()))]), torch.tensor([p.numel() for p in lstm.parameters()])


def topk_ties(x: f32[3, 70]):
    q = (x * 2).round().clamp(-1, 1)
    v, i = q.topk(10, dim=1)
    v2, i2 = q.topk(3, dim=1, largest=False)
    v3, i3 = q.topk(30, dim=1, sorted=False)
    return v, i, v2, i2, i3


def topk_big(x: f32[2, 700]):
    q = (x * 2).round().clamp(-1, 1)
    v, i = q.topk(5, dim=1)
    return v, i, q.topk(9, dim=1, largest=False)[1]


def sort_ties(x: f32[4, 40]):
    q = (x * 2).round().clamp(-1, 1)
    v, i = q.sort(dim=1)
    vd, idd = q.sort(dim=1, descending=True)
    s = q.sort(dim=1, stable=True)[1]
    a = torch.argsort(q, dim=0)
    return v, i, vd, idd, s, a


def sort_ints(x: i64[5, 33]):
    q = x % 3
    return torch.sort(q, dim=1)[1], torch.topk(q, 4, dim=1)[1], torch.argsort(q, dim=1, descending=True)


def topk_zero_padding(scores: f32[2, 64]):
    s = torch.where(scores > 1.0, scores, torch.zeros_like(scores))
    return torch.topk(s.view(2, -1), 10)


def random_then_loaded(x: f32[3, 4], w: f32[4, 4]):
    # torch.randn draws; the program writes every element before it reads one.
    h = torch.randn(4, 4)
    h.copy_(w)
    bias = torch.rand(4)
    bias.zero_()
    return x @ h + bias


def deep_copied_module(x: f32[2, 3], w: f32[4, 3], b: f32[4]):
    # A target network copied before its weights are loaded: each copy loads its own.
    online = nn.Linear(3, 4)
    target = copy.deepcopy(online)
    online.load_state_dict({"weight": w, "bias": b})
    target.load_state_dict({"weight": w * 0.5, "bias": b})
    return online(x), target(x)


def init_functions_as_values(x: f32[2, 3], w: f32[4, 3]):
    # a2c-style `init_(module, weight_init, bias_init)` with nn.init functions passed as values.
    def init_(module, weight_init, bias_init, gain=1.0):
        weight_init(module.weight.data, gain=gain)
        bias_init(module.bias.data)
        return module

    lin = init_(nn.Linear(3, 4), nn.init.orthogonal_, lambda t: nn.init.constant_(t, 0.25), gain=nn.init.calculate_gain("relu"))
    with torch.no_grad():
        lin.weight.copy_(w)
    return lin(x)


def seen_ids_and_flags(flat: f32[40]):
    # _load_flat's `seen = set(); seen.add(id(t))`, requires_grad_ and share_memory on a model.
    net = Net()
    net.share_memory()
    net.requires_grad_(False)
    seen = set()
    off = 0
    with torch.no_grad():
        for _, t in net.state_dict(keep_vars=True).items():
            if id(t) in seen:
                continue
            seen.add(id(t))
            t.copy_(flat[off:off + t.numel()].view_as(t))
            off += t.numel()
    return net(flat[:8].view(4, 2)) + len(seen)


# Found by a review of this change against PyTorch: stateless modules are children, a shared sub-module has entries
# under each of its names in a state dict, an expanded dim sorts in order, layers made in a loop, `apply` with
# `isinstance(m, nn.Linear)`.
def children_with_stateless(x: f32[3, 4], w1: f32[5, 4], b1: f32[5], w2: f32[2, 5], b2: f32[2]):
    net = nn.Sequential(nn.Linear(4, 5), nn.Tanh(), nn.Linear(5, 2), nn.Softmax(dim=-1))
    net.load_state_dict({"0.weight": w1, "0.bias": b1, "2.weight": w2, "2.bias": b2})
    body = nn.Sequential(*list(net.children())[:-1])
    rebuilt = nn.Sequential(*net.children())
    counts = torch.tensor([len(list(net.children())), len(list(net.modules())), len(list(net.named_modules()))])
    return body(x), rebuilt(x * 3 - 1), counts


class _Shared(nn.Module):
    def __init__(self):
        super().__init__()
        self.l1 = nn.Linear(2, 2)
        self.l2 = self.l1
        self.l3 = nn.Linear(2, 2)

    def forward(self, x):
        return self.l3(self.l2(self.l1(x)))


def shared_submodule_state(x: f32[3, 2], flat: f32[40]):
    m = _Shared()
    with torch.no_grad():
        off = 0
        for _, t in m.state_dict(keep_vars=True).items():
            t.copy_(flat[off:off + t.numel()].view_as(t))
            off += t.numel()
    return m(x), torch.tensor([off, len(m.state_dict()), len(list(m.parameters())), len(list(m.named_modules()))])


def expanded_sort(x: f32[3, 1]):
    q = x.expand(3, 40)
    return q.sort(dim=1)[1], q.topk(5, dim=1)[1], torch.argsort(q, dim=1), q.sort(dim=1, descending=True)[1]


def layers_made_in_a_loop(x: f32[2, 3], flat: f32[40]):
    layers = []
    for i in range(3):
        layers.append(nn.Linear(3, 3))
    m = nn.Sequential(*layers)
    _load(m, flat)
    return m(x)


def apply_with_isinstance(x: f32[3, 4], flat: f32[40]):
    net = nn.Sequential(nn.Linear(4, 5), nn.ReLU(), nn.Linear(5, 2))

    def init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            m.bias.data.fill_(0.01)

    net.apply(init_weights)
    with torch.no_grad():
        net[0].weight.copy_(flat[:20].view(5, 4))
        net[2].weight.copy_(flat[20:30].view(2, 5))
    return net(x)


# NTM's learned initial state: `Parameter(torch.randn(...) * 0.05)`, arithmetic of drawn elements with a number
# (drawn where they were), then loaded with the rest.
class _Controller(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(3, 4)
        self.h_bias = nn.Parameter(torch.randn(1, 1, 4) * 0.05)
        self.c_bias = nn.Parameter(0.05 * torch.randn(1, 1, 4) - 1)

    def forward(self, x):
        return self.lstm(x, (self.h_bias.clone(), self.c_bias.clone()))[0]


def scaled_then_loaded(x: f32[5, 1, 3], flat: f32[200]):
    m = _Controller()
    off = 0
    with torch.no_grad():
        for _, t in m.state_dict(keep_vars=True).items():
            t.copy_(flat[off:off + t.numel()].view_as(t))
            off += t.numel()
    return m(x)
