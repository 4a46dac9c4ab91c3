"""Python and PyTorch spellings that held-out real code (rounds 17 and 18) used: reduction enums, factory keywords,
legacy typed constructors, `in` over strings and set literals, lists and dicts written in both arms of an `if` on a
run-time value, dicts keyed by tuples, numpy at module level, `tolist()`, and device keywords."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

# numpy on numbers at module level folds as it does in a function.
_HALF_PI = np.pi / 2.0


def reduction_enum(x: f32[4], y: f32[4]) -> tuple[f32[()], f32[4]]:
    """`F._Reduction.get_enum(reduction)` (mmdetection's `reduce_loss`): 0 none, 1 mean, 2 sum."""
    loss = (x - y).abs()
    r = F._Reduction.get_enum("sum")
    total = loss.mean() if r == 1 else loss.sum()
    if F._Reduction.get_enum("none") == 0:
        loss = loss * 2.0
    return total, loss


def factory_keywords(x: f32[2, 3]) -> tuple[f32[2, 3], i64[3], f32[2, 3]]:
    """`requires_grad=False` and `pin_memory=False` on factories say what every tensor here is."""
    a = x + torch.zeros(2, 3, dtype=torch.float, requires_grad=False)
    b = torch.arange(3, requires_grad=False, pin_memory=False)
    c = torch.ones_like(x, requires_grad=False) * x.new_full((2, 3), 0.5, requires_grad=False)
    return a, b, c


def legacy_typed_constructors(x: f32[2]) -> tuple[f32[2], i64[3], f64[2], bool[2]]:
    """`torch.FloatTensor([..])` and its kin over data (yolov5, older detection code): `torch.tensor` with the
    type's dtype."""
    a = x * torch.FloatTensor([0.7] * 2)
    b = torch.LongTensor([1, 2, 3]) + 1
    c = torch.DoubleTensor((1.5, 2))
    d = torch.BoolTensor([True, False])
    return a, b, c, d


def membership_in_strings_and_sets(x: f32[2]) -> f32[2]:
    """`"dynamic" in rope_type` (Hugging Face's rope init) and `x.dtype in {torch.float16, torch.bfloat16}`
    (optimizers that upcast low precision)."""
    rope_type = "dynamic_longrope"
    if "dynamic" in rope_type:
        x = x * 2
    if "yarn" not in rope_type:
        x = x + 1
    if x.dtype in {torch.float16, torch.bfloat16}:
        x = x.float()
    if 3 in {1, 2, 3}:
        x = x - 0.5
    return x * _HALF_PI


def dict_entry_written_in_both_arms(x: f32[3], pos: i64[4]) -> tuple[f32[3], f32[3], f32[3]]:
    """A dict entry set in both arms of an `if` on a run-time value (Hugging Face's dynamic rope update:
    `self.inv_freq` is the scaled or the original frequencies, by the sequence length)."""
    state = {"inv_freq": x, "original_inv_freq": x + 1.0}
    if pos[0] > 4:
        state["inv_freq"] = x * 2
    else:
        state["inv_freq"] = state["original_inv_freq"]
    y = state["inv_freq"] + 0.0
    state["inv_freq"].mul_(3.0)
    return y, x, state["original_inv_freq"]


def list_entries_and_numbers_in_both_arms(x: f32[4]) -> tuple[f32[4], f32[()], f32[4]]:
    """A list's entries and a dict's number set in one arm, another value in the other, in a loop (Prodigy's
    `d` estimate, skipped where its denominator is zero)."""
    group = {"d": 1.0, "k": 0}
    outs = [x, x * 0.0]
    for it in range(3):
        denom = (x * it).abs().sum()
        if denom == 0:
            continue
        group["d"] = group["d"] * 2
        outs[1] = outs[1] + x * group["d"]
    if x.sum() > 0:
        outs[0] = x.clamp(min=0.0)
    return outs[0], torch.tensor(group["d"]), outs[1]


def dicts_keyed_by_tuples(x: f32[6]) -> tuple[f32[6], f32[()]]:
    """Dicts keyed by tuples (Hugging Face's no-repeat-n-gram processor keys each n-gram's continuations by its
    prefix): set, replaced, looked up with `get`, `in` and `[]`, with keys equal across int and float."""
    d = {(1,): 2.0, (1, 2): 3.0}
    d[(1, 2)] = 4.0
    d[(2, 1)] = 5.0
    bans = {}
    for prefix, token in [((0, 1), 0), ((1, 1), 2), ((0, 1), 4)]:
        bans[prefix] = bans.get(prefix, []) + [token]
    scale = d[(1,)] * d.get((1, 2), 0.0) + len(d) + (1.0 if (1.0, 2) in d else 0.0)
    y = x.clone()
    for k, v in bans.items():
        y[v[-1]] = -1.0 - k[0]
    return y * scale, torch.tensor(float(len(bans)))


def device_and_copy_keywords(x: f32[2, 3], y: f32[3]) -> f32[2, 3]:
    """`torch.cuda.is_available()` (False: programs run with CPU semantics) and `copy_(src, non_blocking=True)`
    (vLLM's cache writes)."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    z = x.to(device) * 2.0
    z[0].copy_(y, non_blocking=True)
    return z


def tolist_as_indices(cache: f32[4, 3], v: f32[2, 3], slots: i64[2]) -> f32[4, 3]:
    """`.tolist()` of a small tensor whose elements index a write (vLLM's reshape_and_cache reference)."""
    lst = (slots % 4).tolist()
    for i in range(2):
        cache[lst[i]] = v[i] * 2.0
    return cache


def int_of_a_run_time_float(x: f32[4]) -> tuple[f32[4], i64[4]]:
    """`int()` of a float known only when the program runs, truncated toward zero (torchvision's heatmap decoding
    takes `int()` of scaled sizes), as a multiplier and in integer arithmetic."""
    n = int(x[0].item() * 4.0)
    m = int(-2.75 + x[1].item() * 0.0)
    return x * n, torch.arange(4) * m + n


def str_format_keys(x: f32[2]) -> tuple[f32[2], f32[2]]:
    """`'precond_{}'.format(dim_id)` as a state key (torch-optimizer's Shampoo), with numbered, named and
    formatted fields."""
    state = {}
    for dim_id in range(2):
        state["precond_{}".format(dim_id)] = x * (dim_id + 1)
    key = "{0}_{1}{tag}".format("precond", 1, tag="")
    label = "{:.2f}|{!r}".format(0.5, "a")
    y = state[key] + len(label)
    return state["precond_0"], y
