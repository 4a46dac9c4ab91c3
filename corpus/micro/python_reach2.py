"""More Python and module forms real PyTorch code uses (issue 14's tenth and eleventh rounds): `Variable`, a disabled
autocast and grad-mode decorators, `F.one_hot`, `try`/`except ZeroDivisionError` around Python arithmetic, string
and sequence arithmetic, stateless `torch.nn` modules, NumPy-style `axis=`/`keepdims=`, torch functions as values
a generator unpacked, union annotations on helpers, `take_along_dim` and `full` with a 0-dim tensor fill value."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


@torch.no_grad()
def _scaled(x, s):
    return x * s


@torch.jit.script
def _hard_sigmoid(x):
    return torch.clamp(0.2 * x + 0.5, 0.0, 1.0)


def variable_autocast_and_decorators(x: f32[3, 4]) -> tuple[f32[3, 4], f32[3, 4]]:
    # Older code wraps tensors in Variable (a detached alias); Hugging Face forces float32 under a disabled autocast.
    v = Variable(x, requires_grad=False)
    v.mul_(2.0)
    with torch.autocast(device_type="cpu", enabled=False):
        y = _scaled(v, 0.5) + torch.autograd.Variable(torch.ones(3, 4))
    return x, _hard_sigmoid(y)


def one_hot_routing(logits: f32[6, 4], w: f32[4, 3]) -> tuple[i64[6, 2, 4], f32[6, 3]]:
    # Mixtral's expert mask: the top-2 experts of each token, one-hot over the experts.
    top, experts = torch.topk(logits, 2, dim=-1)
    mask = F.one_hot(experts, num_classes=4)
    gate = (mask.float() * top.unsqueeze(-1)).sum(1)
    return mask, gate @ w


def try_zero_division(p: f32[5], g: f32[5], n: int = 0) -> f32[5]:
    # Schedule-free AdamW's `try: ckp1 = weight / weight_sum except ZeroDivisionError: ckp1 = 0`.
    weight_sum = 0.0
    for k in range(n, n + 3):
        weight = float(k)
        weight_sum += weight
        try:
            ckp1 = weight / weight_sum
        except ZeroDivisionError:
            ckp1 = 0
        p.lerp_(g, ckp1)
    try:
        r = 1 // (n - n)
    except ArithmeticError:
        r = -1.0
    finally:
        p.add_(0.5)
    return p * r


def _key(i):
    return 'accumulator_' + str(i)


def sequence_arithmetic(g: f32[3, 4, 2]) -> tuple[f32[3, 1, 1], f32[1, 4, 1], f32[1, 1, 2], f32[3, 4, 4]]:
    # SM3's accumulators: shapes from list arithmetic in a loop, keyed by concatenated strings.
    shape = g.shape
    rank = len(shape)
    state = {}
    for i in range(rank):
        acc_shape = [1] * i + [shape[i]] + [1] * (rank - 1 - i)
        state[_key(i)] = torch.zeros(acc_shape) + g.abs().amax(dim=[d for d in range(rank) if d != i], keepdim=True)
    reps = (1,) * 2 + (2,)
    tiled = g.repeat(*reps)[:3] * len('ab' * 3)
    return state[_key(0)], state[_key(1)], state['accumulator_' + '2'], tiled


def modules_aliases_and_values(x: f32[4, 6], y: f32[2, 3, 4]) -> tuple[f32[4, 6], f32[2, 12], f32[4], f32[1, 6], f32[4, 12], f32[4, 1]]:
    # Switch Transformers' `nn.Softmax(dim=-1)(logits)`; `axis=`/`keepdims=`; ultralytics' `cat = torch.cat`
    # and `w, h, a = (x[..., i:i+1] for i in range(...))`.
    act = nn.GELU(approximate="tanh")
    probs = nn.Softmax(dim=-1)(act(x))
    flat = nn.Flatten()(y)
    m = torch.max(x, axis=-1).values
    mean = x.mean(axis=0, keepdims=True)
    cat = torch.cat
    w, h, a = (x[..., i:i + 1] for i in range(3))
    return probs, flat, m, mean, cat([x, x], -1), w * h + a


def _scale(x: torch.Tensor, s: float | None = None):
    if s is None:
        s = 2.0
    return x * s


def union_annotation(x: f32[4]) -> f32[4]:
    return _scale(x)


def take_along_dims(x: f32[3, 5], idx: i64[3, 2]) -> tuple[f32[3, 2], f32[6], f32[3, 2]]:
    # Hugging Face's beam search gathers with take_along_dim (keywords, no dim: flattened, broadcast indices).
    i = idx % 5
    a = torch.take_along_dim(input=x, indices=i, dim=1)
    return a, torch.take_along_dim(x, i), torch.take_along_dim(x, i[:1], dim=-1) * 1


def full_of_tensor_values(x: f32[2, 3], ids: i64[4]) -> tuple[i64[2, 3], f32[2, 3], f32[2, 2]]:
    # `pad_token_id or eos_token_id[0]`: a 0-dim tensor as the fill value.
    eos = ids + 1
    return torch.full((2, 3), fill_value=eos[0], dtype=torch.int64), torch.full((2, 3), x[0, 1]), x.new_full((2, 2), x.sum())


def builtins_keep_keywords_and_python_raises(x: f32[3, 4], idx: i64[3, 1]) -> tuple[f32[3, 4], f32[3, 1]]:
    # `dict(axis=...)` keeps its key (only torch ops take NumPy's aliases); Python's power errors are caught.
    d = dict(axis=2.0, keepdims=3.0)
    s = d["axis"] + d.get("keepdims", 0.0)
    try:
        s = s + 0.0 ** -1
    except ZeroDivisionError:
        s = s * 2.0
    try:
        s = s + 2.0 ** 10000
    except ArithmeticError:
        s = s + 1.0
    # Negative indices count from the end in take_along_dim.
    return x * s, torch.take_along_dim(x, -1 - idx % 4, dim=-1)
