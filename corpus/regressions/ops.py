"""Regressions of issue #12: sequence slices with negative steps, when contiguous() aliases, out= arguments, and the
order of tied values in sort and topk. Each program once diverged between the engines or from PyTorch."""
from __future__ import annotations

import collections
import copy
import itertools
import logging
import math
import random
import string
import warnings
from collections import defaultdict
from itertools import zip_longest

import numpy as np
import torch
import torch as th
import torch.distributed as dist
import torch.nn as tnn
import torch.onnx.operators
from torch.nn.functional import scaled_dot_product_attention

# entropix's device choice (held-out round 27): decided before the program runs, where CUDA is never available
if torch.cuda.is_available() and not torch.backends.mps.is_available():
    _DEVICE = torch.device("cuda")
elif torch.backends.mps.is_available():
    _DEVICE = torch.device("mps")
else:
    _DEVICE = torch.device("cpu")


def reversed_unbind(x: f32[4, 3]) -> f32[4, 3]:
    # A reversed layer order, as in a bidirectional LSTM: the tuple slice with step -1 reverses.
    ys = x.unbind(0)[::-1]
    return torch.stack(ys)


def every_other_backwards(x: f32[5, 3]) -> f32[3, 3]:
    xs = [x[0], x[1], x[2], x[3], x[4]]
    return torch.stack(xs[::-2])


def slice_negative_bounds(x: f32[7, 2]) -> tuple[f32[2, 2], f32[2, 2], f32[2, 2], f32[7, 2]]:
    xs = list(x.unbind(0))
    a = torch.stack(xs[-2:0:-3])
    b = torch.stack(xs[10:-5:-2])
    c = torch.stack(xs[-100:2])
    d = torch.stack(xs[::-1][::-1])
    return a, b, c, d


def reversed_layers_write(x: f32[3, 4]) -> f32[3, 4]:
    # Views taken through a reversed tuple still write into x.
    for i, row in enumerate(x.unbind(0)[::-1]):
        row.mul_(float(i + 1))
    return x


def contiguous_is_alias(x: f32[4, 1, 6]) -> f32[1, 4, 6]:
    # permute of a size-1 dim leaves the tensor contiguous, so contiguous() returns it and the write reaches x.
    y = x.permute(1, 0, 2).contiguous()
    y[0, 0] = 0.0
    return y


def contiguous_is_copy(x: f32[4, 6]) -> f32[4, 1]:
    # A column of a row-major matrix is not contiguous: contiguous() copies and x is untouched.
    y = x[:, 2:3].contiguous()
    y.zero_()
    return y


def contiguous_row_alias(x: f32[4, 6]) -> f32[1, 6]:
    y = x[1:2].contiguous()
    y.add_(1.0)
    return y


def add_out(x: f32[4], y: f32[4]) -> f32[4]:
    z = torch.add(x, 1.0, out=y)
    return z


def out_through_view(x: f32[2, 4], y: f32[3, 4]) -> tuple[f32[4], f32[3, 4]]:
    # out= writes through y's row, and returns that row itself.
    z = torch.add(x[0], 1.0, out=y[1])
    z.mul_(2.0)
    return z, y


def out_strided_column(x: f32[4, 3], y: f32[4, 3]) -> f32[4, 3]:
    torch.mul(x[:, 0], 2.0, out=y[:, 1])
    return y


def out_is_input(x: f32[4]) -> f32[4]:
    torch.exp(x, out=x)
    return x


def out_casts(x: f32[4], y: f64[4]) -> f64[4]:
    return torch.sub(x, 0.5, out=y)


def out_compare(a: f32[4], b: f32[4], c: bool[4]) -> bool[4]:
    torch.lt(a, b, out=c)
    return c


def out_matmul_cat_sum(a: f32[3, 4], b: f32[4, 2], c: f32[3, 2], d: f32[2, 5], e: f32[3]) -> tuple[f32[3, 2], f32[2, 5], f32[3]]:
    torch.mm(a, b, out=c)
    torch.cat([a[0], b[0, :1]], out=d[1])
    torch.sum(a, 1, out=e)
    return c, d, e


def sort_stable_ties(x: i64[40]) -> tuple[i64[40], i64[40], i64[40], i64[40]]:
    # Values 0..9 repeat, so every value is tied; stable sorts keep tied elements in index order, both ways.
    a, i = torch.sort(x, descending=True, stable=True)
    b, j = torch.sort(x, stable=True)
    return a, i, b, j


def argsort_stable_ties(x: i64[3, 20]) -> i64[3, 20]:
    return torch.argsort(x, dim=1, descending=True, stable=True)


def sort_nan(x: f32[12]) -> tuple[f32[12], i64[12], f32[12], i64[12]]:
    # NaN sorts as the largest value: last ascending, first descending (tied NaNs in index order).
    y = torch.where(x > 0.3, float("nan"), x)
    a, i = torch.sort(y, stable=True)
    b, j = torch.sort(y, descending=True, stable=True)
    return a, i, b, j


def topk_ties_canonical(x: i64[30]) -> tuple[i64[6], i64[6], i64[6], i64[6]]:
    # PyTorch does not specify the order of tied values in topk, so the indices are compared as a set: sorted.
    # k = 6 with values 0..9 usually splits a tie at the k-th value, so this compares only the values, and the set of
    # indices of the values strictly above (below) the k-th.
    v, i = torch.topk(x, 6)
    w, j = torch.topk(x, 6, largest=False)
    i = torch.where(x[i] > v[5], i, -1)
    j = torch.where(x[j] < w[5], j, -1)
    return v, torch.sort(i).values, w, torch.sort(j).values


def matrix_exponentials(x: f32[3, 3], y: f64[2, 4, 4]) -> tuple[f32[3, 3], f64[2, 4, 4], f32[3, 3]]:
    # torch.linalg.matrix_exp, torch.matrix_exp and the method, batched, in float32 and float64 (the LMU's and S4's
    # zero-order-hold discretization); the 4x4 ones scaled up so that the scaling and squaring squares several times.
    return torch.linalg.matrix_exp(x), torch.matrix_exp(y * 3), (x * 0.5).matrix_exp() @ x


def where_as_a_method(x: i64[4, 3], m: bool[4, 3], y: f32[4, 3]) -> tuple[i64[4, 3], f32[4, 3], f32[4, 3]]:
    # `x.where(condition, other)` is `torch.where(condition, x, other)`: the tensor is the second argument
    return x.where(m, 0), y.where(m, -y), y.where(condition=y > 0, other=x.float())


def ravel(x: f32[3, 4], s: f32[()]) -> tuple[f32[12], f32[6], f32[1], f32[3, 4]]:
    # torch.ravel and Tensor.ravel: reshape(-1), a view of a contiguous tensor (the write below reaches x), a copy
    # of a transposed one, one element from a 0-d tensor
    v = x.ravel()
    v[0] = 5.0
    return v * 2, torch.ravel(x.t()[::2]), s.ravel(), x


def ravel_of_strided_views(x: f32[6, 4]) -> tuple[f32[3], f32[6], f32[6, 4]]:
    # ravel copies any tensor that is not contiguous (contiguous().view(-1)), even where reshape could view it:
    # the writes below must not reach x
    v = x[::2, 0].ravel()
    v[0] = 5.0
    c = x[:, :1].ravel()
    c.mul_(10.0)
    return v, c, x


def dot_blocks_within_tolerance(
    x: f32[10, 40], w: f32[40, 40], y: f32[2, 65536], v: f32[65536], a: f32[8, 512], b: f32[256, 512], c: f32[2, 300000]
) -> tuple[f32[10, 40], f32[2], f32[2], f32[8, 256], f32[2]]:
    # Dot products in blocks of rows sharing an operand (linear layers, sums of a broadcast operand): f32 partial
    # sums folded into double ones per panel stay within the tolerance from the reference, where f32 lanes alone
    # left long sums outside it; a linear layer of 512 inputs (PyTorch's own result too) needs the tolerance's
    # rounding scale, its near-zero outputs off by rounding of the terms
    h = x
    for _ in range(3):
        h = torch.tanh(h @ w.t())
    return h, (y + v).sum(-1), (y * v).mean(-1), a @ b.t(), (c.abs() + 0.1).sum(-1)


def full_of_an_int_element(x: f32[4, 2]) -> f32[9, 1]:
    # YOLOv6's anchors: `torch.full(size, stride, dtype=torch.float)` with `stride` an int64 element of a tensor;
    # an integer fills a float32 tensor without overflow, so the optimized engine runs it too
    strides = torch.tensor([8, 16, 32])
    outs = []
    for s in strides:
        outs.append(torch.full((3, 1), s, dtype=torch.float))
    return torch.cat(outs) + x.sum()


def new_of_a_size(g: f32[2, 5, 4]) -> tuple[f32[2, 5, 4], f32[2, 5, 4]]:
    # faster-rcnn's `gt_boxes.new(gt_boxes.size()).zero_()`: a torch.Size is sizes
    z = g.new(g.size()).zero_()
    w = g.new(g.shape).fill_(2.0)
    return z + g, w * g


def type_of_values(x: f32[3], n: int = 3) -> tuple[f32[3], f32[3], f32[3]]:
    # pytorch-esn's `type(seq_lengths) == list`: type() compared with a builtin type, by == and by `is`
    lengths = [3, 2]
    a = x * 2 if type(lengths) == list else x
    b = x + 1 if type(x) is torch.Tensor else x
    c = x - 1 if type(n) != float else x
    return a, b, c


def math_of_a_one_element_tensor(p: f32[6, 4]) -> tuple[f32[6, 4], f32[6, 4]]:
    # OpenNMT's Adafactor: `_rms(x)` is `math.sqrt(torch.mean(x.pow(2)))`, a Python float of a 0-d tensor; math's
    # functions read a one-element tensor as a float
    rms = math.sqrt(torch.mean(p.pow(2)))
    scale = max(1e-3, rms)
    return p / scale, p * math.sqrt(p[0, :1].abs())


def while_over_python_ints_in_a_loop(inputs: f32[4, 6, 3], w: f32[3, 3]) -> f32[4, 6, 3]:
    # AllenNLP's LstmCellWithProjection: a `while` over Python ints whose condition reads the timestep, inside the
    # loop over timesteps (shrinking the batch to the sequences still running): the timestep loop unrolls
    batch_lengths = [6, 5, 3, 2]
    out = inputs.new_zeros(4, 6, 3)
    state = inputs.new_zeros(4, 3)
    current = 3
    for timestep in range(6):
        while batch_lengths[current] <= timestep:
            current -= 1
        prev = state[0 : current + 1].clone()
        h = torch.tanh(inputs[0 : current + 1, timestep] + prev @ w)
        state = state.clone()
        state[0 : current + 1] = h
        out[0 : current + 1, timestep] = h
    return out


def list_copy_clear_and_pop(x: f32[5]) -> tuple[f32[5], f32[5], f32[5], int]:
    # pytorch-esn's `washout_tensor`: `seq_lengths.copy()`; `pop(i)` and `clear()` alike
    lengths = [1, 2, 3]
    kept = lengths.copy()
    lengths.append(4)
    last = lengths.pop(-2)
    first = lengths.pop(0)
    kept.clear()
    return x * last, x + first, x * len(lengths), len(kept)


def sets_of_names(x: f32[3]) -> tuple[f32[3], f32[3]]:
    # Adam-mini's parameter-name sets: a set of string literals tested with `in`, iterated by any(), counted
    embd_names = {"embed", "embd", "wte", "embed"}
    name = "model.wte.weight"
    y = x * 2 if any(n in name for n in embd_names) else x
    z = y + len(embd_names) if "wte" in embd_names and "bias" not in embd_names else y
    return y, z


def python_of_held_out_code(x: f32[2, 3, 4], g: f32[5]) -> tuple[f32[3, 4, 2], f32[2, 4, 3], f32[()], int, int]:
    # Held-out ports (round 22): a tensor's private attribute FSDP sets (`hasattr` is False here), `torch.norm`
    # with dtype=, strings indexed and searched (char-RNN's `all_letters.find(c)`, `line[i]`), list.index,
    # movedim/moveaxis, logging and warnings calls that change nothing, string's constants
    logger = logging.getLogger(__name__)
    if hasattr(g, "_fsdp_flattened"):
        g = g * 2
    else:
        logger.info("plain tensor")
    if x.dim() > 5:
        warnings.warn("never", UserWarning)
    n = torch.norm(g, p=2, dtype=torch.float64).float()
    letters = string.ascii_letters + " .,;'"
    line = "Abc"
    idx = letters.find(line[1]) + letters.index(line[-1])
    names = ["w", "b", "v"]
    return x.movedim(0, -1), torch.moveaxis(x, (1, 2), (2, 1)), n, idx, names.index("v")


def functional_imported_by_name(q: f32[1, 2, 3, 4], k: f32[1, 2, 5, 4], v: f32[1, 2, 5, 4]) -> f32[1, 2, 3, 4]:
    # SGLang's torch-native backend: `from torch.nn.functional import scaled_dot_product_attention`
    return scaled_dot_product_attention(q, k, v)


def more_python_of_held_out_code(w: f32[5, 4], b: f32[5]) -> tuple[f32[5, 4], f32[5], i64[4], f32[()]]:
    # Held-out ports (round 22): a dict comprehension (timm's EMA over a state dict), torch.optim's `(device,
    # dtype)` group keys, `.is_cpu`, the legacy `torch.LongTensor(n)` as an `out=` of arange, numpy's ceil and
    # floor of numbers (mmdetection's valid flags), itertools.chain
    params = {"w": w, "b": b}
    ema = {k: v * 0.9 for k, v in params.items() if k != "skip"}
    groups = {}
    for p in params.values():
        key = (p.device, p.dtype)
        groups.setdefault(key, []).append(p)
    n = 0
    for (device, dtype), ps in groups.items():
        n += len(ps) if ps[0].is_cpu else 0
    ids = torch.arange(0, 4, out=torch.LongTensor(4))
    h = _valid_size(7, 2, 5)
    flat = list(itertools.chain([1, 2], (3,)))
    return ema["w"] + n, ema["b"] * h, ids, b.sum() * sum(flat)


def _valid_size(feat: int, stride: int, limit: int):
    return min(int(np.ceil(feat / stride)), limit) + int(np.floor(feat / stride))


def _tree_add_child(node, child):
    child["parent"] = node
    node["children"].append(child)


def containers_that_hold_themselves(x: f32[3], y: f32[3]) -> f32[3]:
    # Held-out ports (round 23): the Child-Sum Tree-LSTM's `Tree.add_child` links each child back to its parent,
    # so a dict is reachable from itself twice (the functional engine's walkers over containers overflowed the
    # stack); a list that holds itself too
    root = {"parent": None, "children": [], "state": x}
    _tree_add_child(root, {"parent": None, "children": [], "state": y})
    _tree_add_child(root, {"parent": None, "children": [], "state": x * y})
    loop = [x]
    loop.append(loop)
    total = root["state"]
    for child in root["children"]:
        total = total + child["state"] * len(child["parent"]["children"])
    return total + loop[1][1][0]


def filters_and_starred_maps(a: f32[3], b: f32[3]) -> f32[3]:
    # Held-out ports (round 23): AdamAtan2's `for p in filter(exists, group["params"])`, the Tree-LSTM's
    # `zip(*map(lambda x: x.state, children))` (read at once by the star), `filter(None, ...)`
    params = [a, None, b]
    total = torch.zeros(3)
    for p in filter(_exists, params):
        total = total + p
    nums = list(filter(None, [0, 2, 0, 3]))
    pairs = list(zip(*map(lambda t: (t, t * 2), [a, b])))
    return total * sum(nums) + pairs[1][0]


def _exists(v):
    return v is not None


def module_checks_and_inert_keywords(x: f32[4, 3], ids: i64[5], w: f32[10, 3]) -> tuple[f32[4, 3], f32[5, 3]]:
    # Held-out ports (round 23): ESPnet's `isinstance(m, torch.nn.Module)` (a module is a dict here: False),
    # PyTorch 0.4's `F.dropout(..., inplace=False)` in eval, fairseq's `F.embedding(..., padding_idx=1)`
    state = {"w": w}
    scale = 1.0 if isinstance(state, torch.nn.Module) else 2.0
    h = torch.nn.functional.dropout(x, p=0.3, training=False, inplace=False)
    e = torch.nn.functional.embedding(ids.abs() % 10, w, padding_idx=1)
    return h * scale, e


def maps_of_builtins_and_int_of_strings(x: f32[3]) -> f32[3]:
    # Held-out ports (round 23): the Tree-LSTM's `list(map(int, line.split()))` reading a dependency parse
    parents = list(map(int, "2 0 1".split()))
    s = sum(map(abs, [-1, 2, -3]))
    lens = [n for n in map(len, [[1], [1, 2]])]
    return x * parents[0] + s + lens[1] + int(" -1_000 ") / 1000


def tensors_of_one_element_tensors(x: f32[3], idx: i64[3]):
    # Held-out port (round 23): Hugging Face's contrastive search, `torch.tensor([x + i * top_k for i, x in
    # enumerate(selected_idx)])`; the dtype is PyTorch's promotion over the items, a uint8 takes -1 as 255
    a = torch.tensor([v + i * 4 for i, v in enumerate(idx)])
    b = torch.tensor([x[0], 2.5])
    c = torch.tensor([x.double()[1], x[2]])
    d = torch.tensor([[idx[0].int()], [idx[1].int()]])
    e = torch.tensor([idx[0] % 3, True], dtype=torch.float32)
    g = torch.tensor([-1, 255], dtype=torch.uint8)
    return a, b, c, d, e, g


def lists_of_tensors_index_as_tuples(x: f32[3, 4]):
    # A list holding tensors, lists or None indexes as the tuple of its items (PyTorch keeps NumPy's old rule):
    # `x[[a, b]]` is `x[a, b]`, not the rows a and b
    a = torch.tensor(1)
    b = torch.tensor(2)
    y = x.clone()
    y[[torch.tensor([0, 2]), torch.tensor([1, 3])]] = 5.0
    return x[[a, b]], x[[[0, 1], [1, 2]]], x[[0, None]], x[[1, 2]], y


def finally_blocks_and_one_process(x: f32[2, 3], fsdp: bool = False) -> tuple[f32[2, 3], i64[2], f32[2]]:
    # Held-out ports (round 23): Whisper's `try: <decode loop> finally: cleanup()` (a `break` in the loop stays
    # inside), D-Adaptation's `dist.all_reduce` under a flag that is off and `dist.is_initialized()`, and fairseq's
    # `torch.onnx.operators.shape_as_tensor`
    cache = {"n": 0}
    try:
        for i in range(5):
            x = _add_one(x)
            if i == 2:
                break
    finally:
        cache["n"] = 7
    total = x.sum(1)
    if fsdp or dist.is_initialized():
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
    shape = torch.onnx.operators.shape_as_tensor(x)
    return x * cache["n"], shape, total


def _add_one(t):
    return t + 1


def grad_modes_as_wrappers_and_aliases(x: f32[2, 3, 4], y: f32[5], steps: f32[2]) -> tuple[f32[2, 3, 4], ...]:
    # Held-out ports (round 24): torch.optim's LBFGS `torch.enable_grad()(closure)` and `clone(memory_format=
    # torch.contiguous_format)`, Adafactor's `all(isinstance(t, torch.Tensor) for t in state_steps)`, lstms.pth's
    # `import torch as th`, PointerNet's `nn.Softmax()` without dim (PyTorch's implicit dim, 0 for 1-D and 3-D
    # inputs, else 1), DiffusionDet's `random.shuffle` in a branch its shapes never take; (round 27) improved-
    # diffusion's `with th.no_grad():`, a grad mode through the alias
    closure = torch.enable_grad()(_add_one)
    ok = all(isinstance(t, torch.Tensor) for t in [x, steps])
    if x.shape[0] > 5:
        random.shuffle([1, 2])
    sm = tnn.Softmax()
    with th.no_grad(), th.autocast("cpu", enabled=False):
        c = x.transpose(0, 2).clone(memory_format=torch.contiguous_format)
    return sm(x) * ok, torch.nn.functional.softmax(y), sm(x[0]), th.tanh(closure(x)), c.view(-1), abs(steps.sum().item()) + x


def sets_of_ints_in_cpythons_order(x: f32[8], ids: i64[6]) -> tuple[f32[8], f32[8], f32[8]]:
    # Held-out ports (round 24): vLLM's `all_stop_token_ids: {2, 7}` and `set()`, Hugging Face v2's `for token in
    # set(prev_tokens)` (the reference runs it on data; here on numbers known before the program runs). A set is
    # iterated in CPython's order (its hash table's), not the insertion order: {7, 2} iterates 2 then 7
    stop = {7, 2}
    big = {10, 20, 30, 40, 50}
    seen = set([5, 3, 5, 8, -1])
    empty = set()
    squares = {i * i % 7 for i in range(6)}
    out = x.clone()
    order = []
    for t in stop:
        order.append(t)
    for t in big:
        order.append(t)
    for t in seen:
        order.append(t)
    for t in squares:
        order.append(t)
    y = x.clone()
    for k, t in enumerate(order):
        y[k % 8] = y[k % 8] * 0.5 + t
    for t in sorted(seen):
        out[t % 8] += 1.0
    return out + len(empty) + (3 in seen) + (4 not in stop), y, x * len(order)


def numpy_nan_placeholders(x: f32[2, 3]) -> f32[2, 3]:
    # Held-out port (round 23): Whisper's `no_speech_probs = [np.nan] * n_batch`, filled in later
    probs = [np.nan] * 2
    probs[0] = x[0, 0].item()
    probs[1] = x[1, 0].item()
    scale = probs[1] if not math.isnan(probs[1]) else 0.0
    return x * scale + probs[0] + math.isinf(probs[0]) + math.isfinite(probs[1])


def tuples_of_index_sequences(x: f32[4, 5]) -> tuple[f32[4, 5], f32[2], f32[2, 5]]:
    # Held-out port (round 24): vLLM's `logits[tuple(zip(*logits_to_penalize))] = -float("inf")` over the pairs
    # `itertools.product` gave `list.extend`: a tuple inside the index tuple is a sequence of indices
    pairs = []
    pairs.extend(itertools.product([1, 3], [0, 2]))
    y = x.clone()
    y[tuple(zip(*pairs))] = -float("inf")
    return y, x[(0, 2), (1, 4)], x[((0, 1),)]


def continue_skips_the_rest_of_the_loop(x: f32[3, 4], counts: i64[3]) -> tuple[f32[3], f32[3, 4]]:
    # Held-out port (round 24): RetinaNet's focal loss, per image `if <no annotations>: losses.append(zero);
    # continue` then `losses.append(loss)`, on a condition known only at run time: every path appends once
    losses = []
    y = x.clone()
    for j in range(3):
        if (counts[j] + j) % 3 == 0:
            losses.append(x[j].sum() * 0)
            continue
        if (counts[j] + j) % 3 == 1:
            y[j] = -1.0
            losses.append(x[j].max())
            continue
        y[j] += 1.0
        losses.append(x[j].sum())
    return torch.stack(losses), y


def addcdiv_with_the_value_first(x: f32[4], g: f32[4]) -> tuple[f32[4], f32[4], f32[4], f32[4]]:
    # Held-out port (round 25): over9000's Ralamb `p.addcdiv_(-step * trust_ratio, exp_avg, denom)` with a 0-d
    # tensor `trust_ratio`: PyTorch's deprecated overload `addcdiv_(value, tensor1, tensor2)`, the 0-d tensor read
    # as the Number `value` (the functional engines read it as `tensor1` and got a wrong answer)
    y = x.clone()
    trust = x.pow(2).sum().sqrt() / (x.pow(2).sum().sqrt() + 1.0)
    y.addcdiv_(-0.1 * trust, g, g.abs() + 1.0)
    z = x.addcmul(torch.tensor(2), g, g)
    w = torch.addcdiv(x, 0.5, g, g.abs() + 2.0)
    v = x.addcmul(g, g, value=trust)
    return y, z, w, v


def sorted_by_key_and_dict_equality(x: f32[5]) -> tuple[f32[5], f32[()]]:
    # Held-out port (round 25): Medusa's `sorted(medusa_choices, key=lambda x: (len(x), x))` and Muon's
    # `assert set(group.keys()) == {...}` (sets and dicts compare by their keys, and dicts by their values)
    choices = [(1, 0), (0,), (0, 1, 2), (2,), (0, 0)]
    ordered = sorted(choices, key=lambda c: (len(c), c))
    by_last = sorted(choices, key=lambda c: c[-1], reverse=True)
    group = {"lr": 0.1, "params": [x]}
    assert set(group.keys()) == {"params", "lr"}
    same = {"a": 1, "b": 2} == {"b": 2, "a": 1}
    differ = {"a": 1} != {"a": 2}
    y = x.clone()
    for k, c in enumerate(ordered):
        y[k] = y[k] + len(c) * 10 + c[0]
    return y + by_last[0][-1] * 100, torch.tensor(float(same) + 2 * float(differ))


def sizes_read_back_from_a_tensor_of_literals(memory: f32[2, 20, 4]) -> tuple[f32[2, 2, 4], i64[2], f32[()]]:
    # Held-out port (round 23): Deformable DETR's `spatial_shapes = torch.as_tensor([(h, w), ...])`, whose rows are
    # then read back as slice bounds and view sizes (`memory[:, cur:cur + H_ * W_].view(N_, H_, W_, 1)`): a tensor
    # made from literals alone has values known before the program runs
    shapes = []
    for h, w in [(4, 4), (2, 2)]:
        shapes.append((h, w))
    spatial_shapes = torch.as_tensor(shapes, dtype=torch.long)
    level_start = torch.cat((spatial_shapes.new_zeros((1,)), spatial_shapes.prod(1).cumsum(0)[:-1]))
    outs = []
    cur = 0
    for lvl, (H_, W_) in enumerate(spatial_shapes):
        m = memory[:, cur:(cur + H_ * W_)].view(2, H_, W_, 4)
        outs.append(m.mean((1, 2)) * (lvl + 1))
        cur += H_ * W_
    return torch.stack(outs, 1), level_start, memory[:, int(level_start[1]):].sum()


def data_set_leaves_the_tensor_alone(h: f32[4], m: f32[4]) -> tuple[f32[4], f32[2, 8]]:
    # Held-out ports (rounds 24 and 25): lstms.pth's Gal dropout `h_t.data.set_(th.mul(h_t, self.mask).data)` and
    # bnlstm's `self.weight_hh.data.set_(weight_hh_data)`: `x.data` is a new tensor object, so `set_` on it rebinds
    # that temporary only and `x` keeps its values (PyTorch 2)
    h = h * 1.0
    h.data.set_(torch.mul(h, m).data)
    h.data *= 2.0
    w = torch.zeros(2, 8)
    w.data.set_(torch.eye(2).repeat(1, 4))
    return h, w


def nn_init_with_keywords(b: f32[4], w: f32[2, 3]) -> f32[4]:
    # Held-out port (round 25): bnlstm's `nn.init.constant_(self.bias.data, val=0)`, the value given by keyword
    b = b.clone()
    torch.nn.init.constant_(b.data, val=0.5)
    torch.nn.init.constant_(tensor=w, val=2)
    return b


def _annotated_helper(model: Module, cfg: "Config", fn: Callable[[int], int], x):
    import math

    if callable(fn) and not callable(x):
        return x * math.pi
    return x


def helper_annotations_inplace_transposes_and_imports(x: f32[3, 4]) -> tuple[f32[4, 3], f32[4, 3], f32[3, 3]]:
    # Held-out ports (round 26): x-transformers' `model: Module` and `callable(...)`, Shampoo's
    # `torch.eye(dim, out=grad.new(dim, dim))` and `transpose_`, gru_ode_bayes' `import ipdb` in a branch that does not
    # run; a helper's annotations are read by nobody here
    y = x * 1.0
    y.transpose_(0, 1)
    z = x.clone()
    z.t_()
    e = torch.eye(3, out=x.new(3, 3))
    if x.sum() > 100.0:
        import ipdb

        ipdb.set_trace()
    return _annotated_helper(None, None, lambda v: v, y), z, e


def searchsorted_for_sampling(p: f32[2, 6], u: f32[2, 3], s: f32[5]) -> tuple[i64[2, 3], i64[5], i64[()], i32[1]]:
    # Held-out ports (round 26): inverse-CDF sampling as x-transformers and Speculative-Decoding write it,
    # `torch.searchsorted(cdf, uniforms)`, and the `right=`, `side=`, `out_int32=` and scalar forms
    probs = torch.softmax(p, -1)
    cdf = probs.cumsum(-1)
    idx = torch.searchsorted(cdf, (u + 1.0) / 2.0)
    bounds = torch.sort(s).values
    a = torch.searchsorted(bounds, s, right=True)
    b = torch.searchsorted(bounds, 0.1)
    c = torch.searchsorted(bounds, bounds[2:3], side="left", out_int32=True)
    return idx, a, b, c


def pad_with_negative_padding_crops(x: f32[2, 5], m: f32[2, 5]) -> tuple[bool[2, 5], f32[2, 4], f32[2, 3]]:
    # Held-out port (round 26): x-transformers' `F.pad(sorted_indices_to_remove, (1, -1), value=False)`, a shift
    # right by one: a negative pad crops that side
    mask = m > 0.0
    a = torch.nn.functional.pad(mask, (1, -1), value=False)
    b = torch.nn.functional.pad(x, (-2, 1, 1, -1))
    c = torch.nn.functional.pad(x, (-1, -1))
    return a, b, c


def batch_norm_in_training_mode(
    x: f32[6, 4, 5], h: f32[6, 8], rm: f32[4], rv: f32[4], w: f32[4], b: f32[4], rm_h: f32[8], rv_h: f32[8]
) -> tuple[f32[6, 4, 5], f32[6, 8], f32[6, 8]]:
    # Held-out port (round 25): jihunchoi/recurrent-batch-normalization's SeparatedBatchNorm1d, batch statistics
    # with the running ones updated in place (`F.batch_norm(..., training=True, momentum=...)`), per time step
    y = torch.nn.functional.batch_norm(x, rm, rv, w, b, training=True, momentum=0.2, eps=1e-5)
    hs = []
    for t in range(2):
        hs.append(torch.nn.functional.batch_norm(h, rm_h, rv_h, training=True, momentum=0.1, eps=1e-3))
    no_stats = torch.nn.functional.batch_norm(h * 2.0, None, None, training=True)
    return y, hs[0] + hs[1], no_stats


def average_and_max_pooling(
    x: f32[2, 3, 9, 8], y: f32[2, 4, 17], z: f32[3, 10]
) -> tuple[f32[2, 3, 4, 4], f32[2, 3, 5, 9], f32[2, 3, 9, 8], f32[2, 4, 9], f32[2, 4, 7], f32[3, 5], f32[3, 8]]:
    # Held-out ports (rounds 25-26): `F.avg_pool1d` over time steps, `F.avg_pool2d` and `F.max_pool1d`, with
    # strides, padding (zeros for an average), dilation and `divisor_override`
    a = torch.nn.functional.avg_pool2d(x, 2)
    b = torch.nn.functional.avg_pool2d(x, (3, 2), stride=(2, 1), padding=1)
    c = torch.nn.functional.avg_pool2d(x, 3, 1, 1, divisor_override=4)
    d = torch.nn.functional.avg_pool1d(y, 3, stride=2, padding=1)
    e = torch.nn.functional.max_pool1d(y, 4, 2, 1, 2)
    f = torch.nn.functional.avg_pool1d(z, 2)
    g = torch.nn.functional.max_pool1d(z, 3, stride=1)
    return a, b, c, d, e, f, g


def defaultdicts_group_and_count(x: f32[4, 8]) -> tuple[f32[3, 8], f32[8], int, int, bool, int]:
    # Held-out ports (round 27): AdaHessian's `defaultdict(dict)` state and detection post-processing's per-class
    # `defaultdict(list)`: a read of a missing key inserts the factory's value (`counts[7]` makes a fourth key)
    groups = defaultdict(list)
    counts = collections.defaultdict(int)
    scores = defaultdict(lambda: torch.zeros(8))
    for i, k in enumerate([0, 1, 0, 2]):
        groups[k].append(x[i])
        counts[k] += 1
        scores[k] += x[i]
    out = []
    for k in sorted(groups):
        out.append(torch.stack(groups[k]).sum(0) * counts[k])
    return torch.stack(out), scores[0] + scores[3], len(groups), counts[7], "a" in groups, len(counts)


def device_chosen_at_module_level(x: f32[3, 4]) -> f32[3, 4]:
    return torch.ones(3, 4, device=_DEVICE) + x.to(_DEVICE)



def numpy_arrays_made_into_tensors(x: f32[4]) -> tuple[f32[4], bool, i64[2]]:
    # Held-out ports (round 27): torchdiffeq's `torch.from_numpy(np.array([2. * np.pi])).float()` and
    # signatrix/efficientdet's `torch.from_numpy(np.array([0, 0, 0, 0]).astype(np.float32))`
    const = torch.from_numpy(np.array([2.0 * np.pi])).float()
    mean = torch.from_numpy(np.array([0, 0, 0, 0]).astype(np.float32))
    std = torch.from_numpy(np.array([0.1, 0.1, 0.2, 0.2]).astype(np.float32))
    return x * const + mean + std, const.dtype == torch.float32, torch.from_numpy(np.array([1, 2]).astype(np.int64)) + 1


def any_and_all_over_torch_calls(x: f32[2, 3], y: f32[3]) -> tuple[f32[2, 3], bool, bool]:
    # Held-out ports (round 27): improved-diffusion's `any(not th.isfinite(p.grad).all() for p in params)`: items
    # that call only torch's functions (no effects) are all computed, which gives what stopping early gives
    bad = any(not th.isfinite(p).all() for p in [x, y])
    big = all(torch.abs(p).max() < 100.0 for p in [x, y * 1000.0])
    if bad:
        x = x * 0.0
    return x + 1.0, bad, big


def tile_pads_repeats_with_ones(x: f32[2, 3]) -> tuple[f32[2, 6], f32[2, 2, 6], f32[6, 3], f32[2, 6]]:
    # Held-out ports (round 28): RT-DETR's `scores.flatten(1).topk(...)` labels and boxes `.tile(...)`: fewer
    # repeats than dims are padded with leading ones
    return x.tile((2,)), torch.tile(x, (2, 1, 2)), x.tile(3, 1), x[0].tile(2, 2)


def optimizer_state_keyed_by_id(w: f32[3], b: f32[2], gw: f32[4, 3], gb: f32[4, 2]) -> tuple[f32[3], f32[2], bool]:
    # Held-out ports (round 28): RAdam's and Padam's per-parameter state keyed by `id(p)` (one number per tensor
    # object: the same for the same object, different for different ones)
    state = {id(w): {}, id(b): {}}
    for t in range(4):
        for p, g in [(w, gw[t]), (b, gb[t])]:
            s = state[id(p)]
            if len(s) == 0:
                s["step"] = 0
                s["exp_avg"] = torch.zeros_like(p)
            s["step"] += 1
            s["exp_avg"].mul_(0.9).add_(g, alpha=0.1)
            p.add_(s["exp_avg"], alpha=-0.5 / s["step"])
    alias = w
    return w, b, id(alias) == id(w) and id(w) != id(b) and id(state) == id(state)


def _params_iter(model, skip):
    for name, p in model.items():
        if name in skip:
            continue
        yield name, p


def _zip_strict(*iterables):
    yield from zip(*iterables)
    return


def generator_helpers_yield_references(w: f32[3], b: f32[2], v: f32[3]) -> tuple[f32[3], f32[2], f32[3], int]:
    # Held-out ports (rounds 27 and 28): ema-pytorch's `get_params_iter` (a generator skipping some names) zipped
    # over the EMA and the online model, stable-baselines3's `zip_strict` (`yield from`): each call runs to its end
    # and gives the list of what it yields, which is what iterating it lazily gives where the body only picks objects
    online = {"w": w, "b": b, "v": v}
    ema = {"w": w.clone(), "b": b.clone(), "v": v.clone()}
    skip = ["v"]
    assert isinstance(skip, (set, list)) and not isinstance(w, set)
    for (_, ma), (_, cur) in zip(_params_iter(ema, skip), _params_iter(online, skip)):
        ma.lerp_(cur * 2.0, 0.1)
        cur.mul_(0.5)
    out = [x + y for x, y in _zip_strict([w, w], [v, v])]
    return ema["w"], ema["b"], out[1], len(list(_params_iter(online, [])))


def deepcopy_of_a_dict_of_weights(w: f32[3], b: f32[2]) -> tuple[f32[3], f32[3], f32[2], int]:
    # Held-out ports (round 27): ema-pytorch's `copy.deepcopy(model)`, here a dict of separate weights (tensors that
    # share no memory are each copied; the containers are new)
    online = {"w": w, "b": b, "cfg": [1, 2]}
    ema = copy.deepcopy(online)
    ema["w"].mul_(0.5)
    ema["cfg"].append(3)
    return ema["w"], w, ema["b"] + b, len(online["cfg"]) + len(ema["cfg"])


def iter_and_next(x: f32[3], y: f32[3]) -> tuple[f32[3], bool, f32[3]]:
    # `next(iter(d.values()))` (the first tensor of a dict, as code picks a device or dtype from its first
    # parameter), `next(it, default)` past the end, `next` of a generator function's call
    d = {"a": x, "b": y}
    first = next(iter(d.values()))
    it = iter([x, y])
    a = next(it)
    b = next(it)
    c = next(it, None)
    g = next(_params_iter(d, ["a"]))[1]
    rest = [t * 2.0 for t in iter([x])]
    return first + a + b + g, c is None, rest[0]


def _zip_checked(*iterables):
    for combo in zip_longest(*iterables, fillvalue=None):
        if None in combo:
            raise ValueError("Iterables have different lengths")
        yield combo


def zip_longest_fills_the_shorter(x: f32[3], y: f32[3]) -> tuple[f32[3], int, int]:
    # Held-out ports (round 28): stable-baselines3's `zip_strict`, a generator over `zip_longest` that raises when a
    # fill value shows (its sentinel `object()` written as None here), and `zip_longest` with a fill value
    out = x.clone()
    for a, b in _zip_checked([x, y], [y, x]):
        out.add_(a * b)
    pairs = list(itertools.zip_longest([1, 2, 3], [4], fillvalue=0))
    return out, len(pairs), pairs[2][1]

