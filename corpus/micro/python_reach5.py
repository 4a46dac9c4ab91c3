"""Python and PyTorch spellings that held-out real code (round 19) used: `Tensor.diff`, `sorted` and Python's ordering
of tuples, `p.data -= x`, `torch.jit.annotate`, numpy's `abs` of a helper's number, and a named tuple returned as
it is."""

from __future__ import annotations

from typing import List

import numpy as np
import torch


def diffs(x: f32[3, 6], m: bool[5], k: i64[4]) -> tuple[f32[3, 4], f32[2, 6], f32[3, 8], bool[4], i64[3]]:
    """`diff` (text-generation-webui's tail-free sampling: `probs.diff().diff()`), along the last dim twice, along
    dim 0, with `prepend`/`append`, of bools (whether neighbours differ) and of integers."""
    a = x.diff().diff().abs()
    b = torch.diff(x, dim=0)
    c = x.diff(prepend=x[:, :1] * 2.0, append=x[:, -2:])
    return a, b, c, m.diff(), torch.diff(k)


def _scale(x, c):
    return x * np.abs(c)


def sorting_and_tuple_order(g: f32[6, 4]) -> tuple[f32[1, 4], f32[6, 4], f32[6, 4]]:
    """`sorted` over (size, dim) pairs (timm's Adafactor picks its factored dims so), tuple comparisons, and numpy's
    `abs` of a helper's parameter (mmrotate's `np.abs(np.log(wh_ratio_clip))`)."""
    dims = sorted(((n, i) for i, n in enumerate(g.shape)))
    big = sorted([3, 1, 2], reverse=True)
    y = g.mean(dim=dims[-1][1], keepdim=True)
    z = g * big[0] if (6, 0) > (4, 1) and "ab" < "b" else g
    return y, z, _scale(g, -0.5)


def data_and_jit_annotate(p: f32[3, 4], x: f32[2, 4]) -> tuple[f32[3, 4], f32[2, 4]]:
    """`p.data -= x` and `p.data /= n` (Nero's update), and `torch.jit.annotate(List[Tensor], [])` (torchrecurrent's
    layer loop)."""
    p.data -= p.mean() * 0.5
    p.data /= 2.0
    outs = torch.jit.annotate(List[torch.Tensor], [])
    for i in range(2):
        outs.append(x[i] * (i + 1))
    return p, torch.stack(outs)


def returns_a_named_tuple(x: f32[2, 12]) -> tuple[f32[2, 3], i64[2, 3]]:
    """`return torch.topk(x, 3)`: the named tuple returns as the tuple it is."""
    return torch.topk(x * 2.0, 3)


def max_of_a_run_time_count(x: f32[8]) -> tuple[f32[()], f32[()], i64[3]]:
    """`loss / max(1, num_foreground)` (torchvision's FCOS loss), with `num_foreground` from `.item()`: outside a loop
    the chosen int is known when the program runs; also `min` and a count that is 0."""
    n = (x > 0.0).sum().item()
    none = (x > 5.0).sum().item()
    k = min(n, 3, 7 - none)
    return x.sum() / max(1, n), x.sum() / max(1, none), torch.arange(3) + k


def number_or_scalar_tensor(w: f32[6, 4], g: f32[6, 4], i: i64[4]) -> tuple[f32[6, 4], f32[()], i64[4], f32[6, 4]]:
    """A name that is a number in one arm of an `if` on data and a 0-d tensor in the other (pytorch-lamb's
    `trust_ratio = 1 if w_norm == 0 or g_norm == 0 else w_norm / g_norm`), merged as a 0-d tensor of the tensor's
    dtype; an int with an integer tensor, a float with a float tensor."""
    w_norm = w.pow(2).sum().sqrt()
    g_norm = g.pow(2).sum().sqrt()
    if w_norm == 0 or g_norm > 2.8:
        trust = 1
    else:
        trust = w_norm / g_norm
    w.add_(g * (-0.01 * trust))
    k = i.max() if g_norm > 2.8 else 2
    s = g.abs().amax() if w_norm > 2.8 else 0.5
    return w, (g * trust).sum(), i * k, g.clamp(max=s)


def min_max_of_a_scalar_tensor_and_numbers(x: f32[8], n: i64[3]) -> tuple[f32[8], f32[8], f32[()], i64[()]]:
    """`min(rms, 1)` and `max(1, rms)` of a 0-d tensor and a number (FAdam): Python returns the item it picks, the
    tensor itself where it wins, so a write through the result writes into it."""
    rms = x.pow(2).mean().sqrt()
    eps = min(rms, 0.55) * 1e-3
    divisor = max(1, rms, 0.5) / 2.0
    s = x.sum().abs()
    m = min(s, 100.0)
    m.add_(1.0)
    return x * eps, x / divisor, s, max(n.sum(), 2)


def pick_by_a_run_time_int(x: f32[3, 4], w: f32[4]) -> tuple[f32[4], f32[4], f32[3, 4], f32[4]]:
    """A list, tuple or dict indexed by an int known only when the program runs (DoLa's
    `layers[int(js_divs.argmax().item())]` then `logits_by_layer[layer]`): numbers picked as a run-time number,
    tensors as the tensor itself (a write through it writes into the one picked), negative indices from the end."""
    layers = [0, 2, 5]
    j = int(x.sum(1).argmax().item())
    layer = layers[j]
    by_layer = {0: x[0], 2: x[1], 5: x[2]}
    picked = by_layer[layer]
    scale = (0.5, 1.5, 2.5)[j - 3]
    rows = [x[2], x[0], x[1]]
    rows[-1 - j].mul_(2.0)
    return picked * scale, w * layer, x, rows[j]


def _scaled_then_deleted(x):
    a = x * 2.0
    b = a + 1.0
    del a
    return b


def del_of_names(x: f32[4], y: f32[4]) -> tuple[f32[4], f32[4]]:
    """`del` of names (YOLOX's SimOTA frees its temporaries with `del topk_ious, dynamic_ks, pos_idx`): the names
    are unbound, in loops and in the arm of an `if` on a run-time value too."""
    t = x + y
    u, v = t * 2.0, t * 3.0
    del t, u
    for i in range(3):
        w = v * i
        del w
    if x.sum() > 0:
        z = v * 2.0
        del z
    return _scaled_then_deleted(v), v


def _bumped(x, counter):
    counter.append(len(counter))
    return x + len(counter)


def call_evaluation_order(x: f32[4], y: f32[4]) -> tuple[f32[4], f32[4], f32[4]]:
    """A call reads its callee before its arguments, as Python does: the receiver of `xs.pop().sub(xs.pop())` is
    the last item, and `fs[len(seen)](...)` picks its function before the argument appends to `seen`."""
    xs = [x, y]
    d = xs.pop().sub(xs.pop())
    seen = []
    fs = [torch.exp, torch.neg, torch.abs]
    e = fs[len(seen)](_bumped(x, seen))
    order = []
    f = _bumped(y, order).mul(_bumped(x, order))
    return d, e, f


def slices_as_values(x: f32[6, 8]) -> tuple[f32[6, 8], f32[3, 4], f32[6, 3], f32[2, 8]]:
    """Python's `slice` objects (Swin's shifted-window mask, ring attention's `slice_` argument): a tuple of them
    iterated as subscripts of a write, a tuple of them as one subscript, `slice(stop)` and a step."""
    mask = torch.zeros(6, 8)
    h_slices = (slice(0, -3), slice(-3, -1), slice(-1, None))
    w_slices = (slice(0, -4), slice(-4, -2), slice(-2, None))
    cnt = 0
    for h in h_slices:
        for w in w_slices:
            mask[h, w] = cnt
            cnt += 1
    s = (slice(None), slice(1, None, 2))
    y = x[s][slice(3), ...]
    picked = slice(2, None)
    return mask, y, x[:, slice(5)][:, picked], x[slice(1, 5, 2)]


def starred_unpacking(x: f32[5, 3, 2]) -> tuple[int, int, int, f32[3, 2], int]:
    """Starred targets (denoising-diffusion-pytorch's `b, *_ = t.shape`): the starred name takes what the others
    leave, as a list."""
    b, *_ = x.shape
    first, *mid, last = [x[0], x[1], x[2], x[3]]
    *init, z = x.shape
    return b, len(_), len(mid), mid[1] + last + first, z + len(init)
