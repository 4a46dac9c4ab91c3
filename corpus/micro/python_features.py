"""Python features around tensors: helpers with keywords, zip and comprehensions, while/break, tuples of views."""
from __future__ import annotations
import torch


def _scale(t, k: float = 2.0):
    return t * k


def helpers_kwargs(x: f32[4, 5]) -> f32[4, 5]:
    y = _scale(x, k=3.0)
    z = _scale(t=y)
    return z[1:-1].sum(dim=0, keepdim=True) + z


def masks(x: f32[6, 6], y: f32[6, 6]) -> tuple[f32[6, 6], bool[6, 6], i64[()]]:
    m = (x > 0) & ~(y > 0.5) | (x < -0.9)
    x[m] = y[m]
    return x, m, m.sum()


def broadcast_expand(x: f32[3, 4], y: f32[4]) -> tuple[f32[3, 4, 3], f32[3, 4]]:
    e = x.unsqueeze(-1).expand(-1, -1, 3)
    return e * y[None, :, None], x.T.mT * y


def zipped(a: f32[3, 4], b: f32[3, 4]) -> f32[3, 4]:
    rows = [p * q for p, q in zip(a, b)]
    total = sum(rows)
    return torch.stack(rows, dim=0) - total


def while_break(x: f32[10]) -> tuple[f32[10], i64[()]]:
    i = 0
    while True:
        if x[i] > 0.5 or i >= 9:
            break
        x[i] = 0.0
        i += 1
    return x, torch.tensor(i)


def negative_indices(x: f32[5, 6]) -> tuple[f32[6], f32[5, 2], f32[3, 6]]:
    x[-1] *= 10
    return x[-1], x[:, -2:], x[1:-1]


def permute_view(x: f32[2, 3, 4]) -> f32[4, 6]:
    y = x.permute(2, 0, 1).contiguous().view(4, -1)
    y[:, ::2] = 0.5
    return y


def int_param(x: f32[8, 4], k: int = 3, s: float = 0.5) -> f32[8, 4]:
    for i in range(0, 8, k):
        x[i:i + k] *= s * (i + 1)
    return x


def tuple_list_mix(x: f32[4, 4]) -> tuple[f32[4], f32[4], f32[2, 4]]:
    pairs = [(x[i], x[i].sum()) for i in range(4)]
    a, s = pairs[2]
    a += s
    firsts = [p[0] for p in pairs[:2]]
    return x[2], a, torch.stack(firsts)


def int_tensor_math(a: i64[6], b: i64[6]) -> tuple[i64[6], i64[6], f32[6], bool[6]]:
    c = a * 7 - b
    c[c > 20] = -1
    return c // 3, c % 4, c / 2, (c == b)


def mean_max(x: f32[3, 4, 5]) -> tuple[f32[3], f32[3, 4], i64[3, 5]]:
    return x.mean(dim=(1, 2)), x.max(-1)[0], x.argmin(dim=1)


def _cat_scaled(dim: int, *tensors, scale: float = 1.0):
    assert len(tensors) > 0, f"{tensors} must not be empty"
    return torch.cat([t * scale for t in tensors], dim=dim)


def _apply(fn, *xs):
    return fn(*xs)


def _fma(a, b, c):
    return a + b * c


def varargs_and_dicts(x: f32[2, 3], y: f32[2, 3]) -> tuple[f32[2, 9], f32[2, 3], f32[2, 3], f32[2, 3]]:
    parts = (x, y)
    state = {}
    for i, t in enumerate(parts):
        state.setdefault("sum", torch.zeros_like(t))
        state["sum"] += t * (i + 1)
        state[i] = t.clone()
    state[0].mul_(2.0)
    return _cat_scaled(1, *parts, x, scale=2.0), _apply(_fma, x, y, 2.0), state["sum"], state[0]
