"""Python that real PyTorch code uses around tensors: `*args` in calls and displays, f-strings in asserts and raises
(evaluated only when they fail), dicts with constant keys, `x.device` and dtype checks."""
from __future__ import annotations
from math import pi

import numpy as np
import torch

LAYER = {"scale": 3.0, "repeats": 2, "names": ("q", "k")}


def _rotate_pairs(x, cos, sin):
    # RoPE as gpt-fast and llama write it: pairs of the last dim, split with a starred reshape.
    xs = x.float().reshape(*x.shape[:-1], -1, 2)
    x0 = xs[..., 0]
    x1 = xs[..., 1]
    out = torch.stack([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1)
    return out.flatten(2).type_as(x)


def rope_starred_reshape(q: f32[2, 4, 8], cos: f32[4, 4], sin: f32[4, 4]) -> f32[2, 4, 8]:
    return _rotate_pairs(q, cos, sin)


def starred_shapes(x: f32[3, 4, 5], y: f32[4, 5]) -> tuple[f32[12, 5], f32[4, 4, 5], f32[3, 20]]:
    shape = (-1, x.shape[-1])
    flat = x.view(*shape)
    rows = list(x.unbind(0))
    stacked = torch.stack([*rows, y])
    lead = x.shape[:1]
    merged = x.reshape(*lead, *[4 * 5])
    return flat * 2, stacked, merged


def fstring_messages(x: f32[3, 4], k: int = 2) -> f32[3, 4]:
    # The messages would fail if evaluated (`x.shape[7]`); Python evaluates them only when the check fails.
    assert x.dim() == 2, f"expected a matrix, got {x.shape[7]} dims"
    if x.shape[0] != 3:
        raise ValueError(f"bad rows {x.shape[9]}")
    if k < 0:
        raise RuntimeError(f"k must be positive, got {k:>3}")
    tag = f"{k:02d}-{x.shape[1]}-{1.5:.2f}"
    if tag == "02-4-1.50":
        x = x + 1
    return x * k


def dict_config(x: f32[4, 6]) -> tuple[f32[4, 6], f32[4, 6]]:
    cfg = {"eps": 1e-5, "scale": 2, "act": "relu", 3: 0.5}
    y = x * cfg["scale"] + cfg.get("bias", 0.25) + cfg[3]
    if "act" in cfg and cfg["act"] == "relu":
        y = y.relu()
    if "dropout" not in cfg:
        y = y / (cfg["eps"] + 1)
    outs = {"sum": x + y, "prod": x * y}
    for name, t in outs.items():
        if name == "sum":
            t.add_(1.0)
    total = x.new_zeros(x.shape)
    for name in outs:
        total = total + outs[name] * len(cfg)
    return total, outs["sum"]


def device_and_dtype(x: f32[4, 4], idx: i64[4]) -> tuple[f32[4, 4], f64[4, 4], f32[4], i64[4]]:
    dev = x.device
    z = torch.zeros(4, 4, device=dev, dtype=x.dtype)
    r = torch.arange(4, device=x.device)
    if x.device == torch.device("cpu") and x.device.type == "cpu" and dev == x.device:
        z = z + 1
    if x.dtype == torch.float32 and x.dtype.is_floating_point and x.is_floating_point() and not x.is_complex():
        z = z * 2
    if torch.is_tensor(x) and isinstance(x, torch.Tensor) and isinstance(3, int) and not idx.dtype.is_floating_point:
        z = z + x.to(x.device)
    d = x.to(device=dev, dtype=torch.float64).cpu()
    f = idx.to(x)[:4] + r.to(dev).type_as(x)
    return z, d, f, idx.to("cpu", torch.int64) + r


def checked_loop(x: f32[4, 3], n: int = 3) -> f32[4, 3]:
    # A check on the loop variable: the raise is never reached, on any engine.
    for i in range(n):
        if i >= x.shape[0]:
            raise IndexError(f"row {i} out of {x.shape[0]}")
        x[i] += LAYER["scale"] * i
    return x


def module_dict_and_starred_index(x: f32[4, 4, 2]) -> tuple[f32[2], f32[4, 2]]:
    at = (1, 2)
    y = x[(*at,)] * LAYER.get("repeats", 1)
    for name in LAYER["names"]:
        if name == "k" and "names" in LAYER:
            y = y + 1
    return y, x[(*at[:1],)]


def finfo_masking(logits: f32[2, 8], ids: i64[2, 8]) -> tuple[f32[2, 8], i64[2, 8], f32[2, 8]]:
    # Hugging Face style masking with the dtype's most negative value, and an iinfo clamp.
    neg = torch.finfo(logits.dtype).min
    masked = logits.masked_fill(logits < 0, neg)
    big = ids.clamp(max=torch.iinfo(torch.int64).max)
    eps = torch.finfo(torch.float32).eps
    return masked, big, logits / (logits.abs() + eps) * torch.finfo().tiny


def factory_kwargs(x: f32[3, 5]) -> tuple[f32[3, 5], f32[3, 4]]:
    # nn.Module style: creation keywords gathered once and spread into every call.
    factory = {"device": x.device, "dtype": x.dtype}
    h = torch.zeros(3, 5, **factory)
    opts = {"dim": -1, "keepdim": True}
    s = x.sum(**opts)
    c = torch.ones(3, 4, **{"dtype": torch.float32}) * s
    return h + x.softmax(**{"dim": 1}), c


def imported_names(x: f32[4, 2]) -> tuple[f32[4, 2], f32[4, 2]]:
    # `from math import sqrt as sq` and `from itertools import product` (imported at the end of this file; Python
    # binds them before the function runs), `import itertools`, legacy type names and `torch.isin`.
    cells = [(i + 0.5) / sq(4.0) * j for i, j in product(range(2), repeat=2)]
    pairs = list(itertools.product([1.0, 2.0], (3.0, 4.0)))
    grid = torch.tensor(cells).view(2, 2).repeat(2, 1) + torch.tensor(pairs)
    y = (x > 0).type(x.type()) * grid
    hit = torch.isin(torch.arange(8).view(4, 2), torch.tensor([1, 4, 6]), invert=x.type() != "torch.FloatTensor")
    return y, torch.where(hit, x, grid)


def map_consumed_and_none_compared(x: f32[3], s: float = pi) -> f32[3]:
    # `map` consumed where it is made (unpacked, summed, listed); a tensor compared with None is False; an imported
    # name in a parameter's default.
    a, b = map(lambda v: v * 2.0, (x, x))
    y = a + sum(map(lambda v: v + 1.0, [x, x])) + torch.stack(list(map(torch.sin, [b]))).sum(0)
    if x == None or not (x != None):
        return x
    return y * s + sq(4.0)


def _shifted(x, factor=2.0, period=np.pi, **kwargs):
    # `**kwargs` as Hugging Face's attention helpers take it: extra keywords collected in order, read as a dict.
    y = x * factor + kwargs.get("shift", 0.0)
    if "bias" in kwargs:
        y = y + kwargs["bias"]
    for name, v in kwargs.items():
        if name.startswith("scale"):
            y = y * v
    return torch.remainder(y, period) + len(kwargs)


def kwargs_collected_and_numpy_default(x: f32[2, 3], b: f32[3]) -> tuple[f32[2, 3], f32[2, 3], f32[2, 3]]:
    return _shifted(x), _shifted(x, 3.0, shift=0.5, bias=b, scale_a=2.0), _shifted(x, config=None, factor=1.5)


def masked_update_by_selection(x: f32[4, 5], y: f32[4, 5]) -> f32[4, 5]:
    # vLLM's penalties: `x[m] op= v[m]` with the mask written twice (one value: `x` is unchanged in between).
    x[x > 0] /= (y.abs() + 1.0)[x > 0]
    x[x <= 0] *= torch.where(y > 0, y, 2.0)[x <= 0]
    x[y > 0.5] -= y[y > 0.5] * 3
    return x


def old_overloads_hasattr_and_loop_conditionals(
    x: f32[3, 4], g: f32[3, 4], w0: f32[4, 4], w1: f32[4, 2]
) -> tuple[f32[3, 4], f32[3, 4], f32[3, 2]]:
    # Older optimizers: `addcmul_(value, t1, t2)`, `torch.max(a, b, out=a)`; timm's `hasattr(torch, ...)` switch;
    # a conditional expression on a loop variable choosing weights of different shapes (unrolled).
    m = torch.zeros_like(x)
    m.addcmul_(0.5, g, g).addcdiv_(0.25, g, x.abs() + 1.0)
    torch.max(m, x, out=m)
    torch.min(x, g * 0.5, out=x)
    if hasattr(torch, "_foreach_lerp_") and hasattr(x, "addcmul_") and not hasattr(x, "no_such_attribute"):
        torch._foreach_lerp_([m], [g], weight=0.25)
    h = x
    for i in range(2):
        w = w0 if i == 0 else w1
        h = torch.tanh(h @ w)
    return m, x, h


import itertools  # noqa: E402
from itertools import product  # noqa: E402
from math import sqrt as sq  # noqa: E402
