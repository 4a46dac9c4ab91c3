"""Python and PyTorch that real code uses, added after held-out rounds 33 and 34: `<<` and `>>` on Python ints and
integer tensors (KIVI's 2-bit cache packing), with PyTorch's results for counts outside [0, 64); `nn.Embedding`
modules with given weights (`_weight=`, as treelstm.pytorch builds them; `from_pretrained`; a subclass calling
`torch.nn.Embedding.__init__`), and `F.binary_cross_entropy` with the legacy `size_average`; WaveRNN's parameter count
(a `filter` bound to a name and read once where it is consumed, `np.prod` of sizes, `%` formatting in a `print`);
`typing.NamedTuple` classes as norse's neuron state and parameters (fields with defaults, a method, construction by
keyword, unpacking, indexing, `len`, `_replace`, `_asdict`, `_fields`, a default argument made of one); norse's
SuperSpike and a straight-through rounding as `torch.autograd.Function` subclasses (`C.apply(...)` runs `forward`),
with `@torch.jit.ignore`.
"""

from __future__ import annotations

from typing import NamedTuple, Tuple

import numpy as np
import torch
import torch.nn as nn
from torch.autograd import Function


def shifts_of_ints(x: i32[4, 8], s: i64[8]):
    a = x << 3
    b = x >> 2
    c = x << s
    d = x >> s
    e = torch.bitwise_left_shift(x, 31)
    f = torch.bitwise_right_shift(x, 40)
    g = 3 << s
    h = x.to(torch.int8) << 5
    k = (x >> (s % 4)).to(torch.int16) & 3
    y = x.clone()
    y <<= 2
    y >>= 1
    return a, b, c, d, e, f, g, h, k, y


def pack_bits(q: i32[2, 16]):
    # KIVI-style packing: 2-bit codes, 16 per int32 word, and back
    codes = q & 3
    packed = torch.zeros(2, 1, dtype=torch.int32)
    for j in range(16):
        packed[:, 0] |= codes[:, j] << (2 * j)
    shifts = torch.arange(16) * 2
    unpacked = (packed >> shifts) & 3
    n = 1 << 20
    m = -7 >> 1
    return packed, unpacked, unpacked == codes, n + m


def shift_of_bool(x: i64[4]):
    return (x > 0) >> 1, (x > 0) << 2


def shift_counts_out_of_range(x: i64[8]):
    s = torch.tensor([-1, 0, 31, 32, 63, 64, 100, 5])
    w = x - 4
    return w << s, w >> s, w.to(torch.int32) << s, w.to(torch.int32) >> s, w.to(torch.uint8) >> s, w.to(torch.int8) << s


class Enc(nn.Module):
    def __init__(self, w):
        super().__init__()
        self.emb = nn.Embedding(10, 4, padding_idx=-1, _weight=w)
        self.pre = nn.Embedding.from_pretrained(w * 2, freeze=False)

    def forward(self, tok):
        return self.emb(tok) + self.pre(tok)


class Drop(torch.nn.Embedding):
    def __init__(self, n, d, w):
        torch.nn.Embedding.__init__(self, n, d, _weight=w)
        self.extra = 3

    def forward(self, tok):
        return torch.nn.functional.embedding(tok, self.weight * self.extra)


def embedding_modules(tok: i64[2, 3], w: f32[10, 4]):
    e = Enc(w)
    d = Drop(10, 4, w.clone())
    names = [n for n, _ in e.named_parameters()]
    return e(tok % 10), d(tok % 10), e.emb.padding_idx, len(names), e.pre.weight.requires_grad, e.emb.weight.requires_grad



def bce_legacy_size_average(x: f32[4], t: f32[4]):
    return torch.nn.functional.binary_cross_entropy(torch.sigmoid(x), torch.sigmoid(t), size_average=False)


class _Counted(nn.Module):
    def __init__(self, w, b):
        super().__init__()
        self.w = nn.Parameter(w)
        self.b = nn.Parameter(b, requires_grad=False)
        self.count = self.num_params()

    def num_params(self):
        # WaveRNN's count of trainable parameters
        parameters = filter(lambda p: p.requires_grad, self.parameters())
        parameters = sum([np.prod(p.size()) for p in parameters]) / 1_000_000
        print('Trainable Parameters: %.3f million' % parameters)
        return parameters


def numpy_prod_and_percent_format(x: f32[2, 3], w: f32[2, 3], b: f32[3]):
    m = _Counted(w, b)
    sizes = map(len, [[1, 2], [3]])
    total = sum(sizes)
    label = '%s-%03d|%-4s|%.2f' % ('k', 7, 'ab', 2.5)
    return x * m.count * 1e6 + total + len(label) + np.prod((2, 3))


class _NeuronParams(NamedTuple):
    tau: torch.Tensor = torch.as_tensor(1.0 / 100)
    v_th: torch.Tensor = torch.as_tensor(1.0)
    method: str = "super"
    alpha: float = 100.0


class _NeuronState(NamedTuple):
    z: torch.Tensor
    v: torch.Tensor

    def clone(self):
        return _NeuronState(self.z.clone(), self.v.clone())


def _step(x, state: _NeuronState, p: _NeuronParams = _NeuronParams()) -> Tuple[torch.Tensor, _NeuronState]:
    v = state.v + p.tau * (x - state.v)
    z = (v > p.v_th).float() * p.alpha
    return z, _NeuronState(z, v)


def named_tuples(x: f32[2, 3], v0: f32[2, 3]):
    s = _NeuronState(z=torch.zeros(2, 3), v=v0)
    outs = []
    for t in range(3):
        z, s = _step(x * (t + 1), s)
        outs.append(z)
    z2, v2 = s
    r = s._replace(v=v2 * 2)
    d = r._asdict()
    return torch.stack(outs), s[1], len(s), d["v"], s.clone().z, _NeuronParams()._fields[2] == "method", _NeuronParams(alpha=2.0).alpha * x


class _Pair(NamedTuple):
    a: int
    b: float = 2.0


def _count(*args):
    return len(args)


def named_tuple_spread_and_eq(x: f32[3], v0: f32[3]):
    # (review of this change: `*s` spreads the fields; `==` compares as tuples; a tuple never equals a list)
    s = _NeuronState(x, v0)
    ps = [x, x * 2]
    ps = map(lambda p: p + 1, ps)
    ps = list(ps)
    same = (_Pair(1) == (1, 2.0), _Pair(1) != (1, 2.0), _Pair(1) == [1, 2.0], (1, 2) == [1, 2], _Pair(1) == _Pair(1, 3.0))
    return x * _count(*s), torch.cat([*s]), torch.tensor(same), ps[1]


def _heaviside(data):
    return torch.gt(data, torch.as_tensor(0.0)).to(data.dtype)


class SuperSpike(torch.autograd.Function):
    @staticmethod
    @torch.jit.ignore
    def forward(ctx, input_tensor: torch.Tensor, alpha: float) -> torch.Tensor:
        ctx.save_for_backward(input_tensor)
        ctx.alpha = alpha
        return _heaviside(input_tensor)

    @staticmethod
    @torch.jit.ignore
    def backward(ctx, grad_output):
        (inp,) = ctx.saved_tensors
        alpha = ctx.alpha
        grad = grad_output / (alpha * torch.abs(inp) + 1.0).pow(2)
        return grad, None


class RoundSTE(Function):
    @staticmethod
    def forward(ctx, x, scale=2.0):
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, g):
        return g, None


@torch.jit.ignore
def _super_fn(x: torch.Tensor, alpha: float = 100.0) -> torch.Tensor:
    return SuperSpike.apply(x, alpha)


def autograd_functions(x: f32[2, 3]):
    return _super_fn(x - 0.5), RoundSTE.apply(x), RoundSTE.apply(x, scale=4.0)


def numpy_array_of_powers(x: f32[3, 3]) -> f32[3, 3]:
    # yhenon/pytorch-retinanet's anchor scales: `np.array([2 ** 0, 2 ** (1.0 / 3.0), 2 ** (2.0 / 3.0)])`, powers
    # of numbers known before the program runs (an int to an int power stays an int, as in Python).
    scales = np.array([2 ** 0, 2 ** (1.0 / 3.0), 2 ** (2.0 / 3.0)])
    ratios = np.array([0.5, 1, 2 ** 1])
    return x * torch.tensor(scales).float()[None, :] + torch.tensor(ratios).float()[:, None]
