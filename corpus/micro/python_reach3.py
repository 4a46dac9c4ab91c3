"""Python and module forms of issue 14's thirteenth and fourteenth rounds: `min`/`max` of a loop's index, `F.elu`
and `nn.ELU`, `.grad_fn`/`.grad` outside autograd, `copy.deepcopy`, `hasattr` on torch's submodules, `conj` of a
real tensor (the tensor itself), dtypes no tensor here has, `torch.get_default_dtype()` and `logcumsumexp`."""
from __future__ import annotations

import copy
import functools
import math
from functools import partial

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


# Hugging Face's group beam search bounds each group with `min(start + size, n)` inside a loop over the groups.
def min_max_of_a_loop_index(x: f32[7, 4]) -> tuple[f32[7, 4], f32[4]]:
    acc = x[0] * 0.0
    for g in range(3):
        start = g * 3
        end = min(start + 3, 7)
        x[start:end] += float(g)
        acc = acc + x[max(end - 1, 0)] * min(g, 1)
    return x, acc


def elu_forms(x: f32[3, 5]) -> tuple[f32[3, 5], f32[3, 5], f32[3, 5]]:
    act = nn.ELU(alpha=0.5)
    return F.elu(x * 3.0) + 1, act(x * 4.0), F.elu(x, 2.0)


# fast-transformers tests `K.grad_fn is not None`; optimizers read `p.grad`; ADOPT asks for torch.compiler; timm's
# optimizers call `grad.conj()`, which is the tensor itself for a real tensor (a write through it writes the tensor).
def autograd_attributes_and_conj(p: f32[6], g: f32[6]) -> tuple[f32[6], f32[6]]:
    scale = 2.0 if p.grad_fn is None and p.grad is None else 3.0
    if hasattr(torch, 'compiler') and hasattr(torch.compiler, 'is_compiling') and not torch.compiler.is_compiling():
        scale = scale + 1.0
    c = g.conj()
    c.mul_(0.5)
    p.addcmul_(g, g.resolve_conj(), value=scale)
    return p, g


# AccSGD copies a parameter with `copy.deepcopy(p.data)`; a list of numbers is copied too.
def deepcopy_values(p: f32[5]) -> tuple[f32[5], f32[5], f32[1]]:
    buf = copy.deepcopy(p.data)
    buf.mul_(2.0)
    betas = [0.9, 0.99]
    kept = copy.deepcopy(betas)
    betas[0] = 0.5
    p.add_(buf, alpha=betas[0])
    return p, buf, torch.tensor([kept[0]])


# Round 14: ChatGLM2 tests `dtype in (torch.float16, torch.bfloat16, torch.int8)`; timm asks for the default dtype;
# minGRU's log-space scan uses `logcumsumexp` (stable where a running sum of exponentials would underflow).
def dtypes_and_logcumsumexp(x: f32[3, 5], y: f32[4]) -> tuple[f32[3, 5], f32[3, 5], f32[4], f32[3, 5]]:
    scale = 2.0 if x.dtype in (torch.float16, torch.bfloat16, torch.int8) else 1.0
    if x.dtype == torch.uint8 or torch.get_default_dtype() != torch.float32:
        scale = 5.0
    a = torch.logcumsumexp(x * 3.0, dim=1) * scale
    b = x.logcumsumexp(0)
    c = torch.logcumsumexp(torch.cat([y[:2] * 400.0 - 1000.0, y[2:]]), -1)
    return a, b, c, torch.logcumsumexp(x.t(), 0).t()


# Round 15 (PyTorch's LSTM decomposition, timm's NAdamW): `list.reverse()` and `list.insert()`, and `math.sqrt` of a
# number known only at run time (a bias correction from a tensor step count read with `.item()`).
def list_reverse_and_sqrt_of_a_step(x: f32[3, 4], p: f32[5]) -> tuple[f32[4, 4], f32[5]]:
    outs = []
    for row in x:
        outs.append(row.unsqueeze(0) * 2.0)
    outs.reverse()
    outs.insert(-1, x[0:1])
    step_t = torch.tensor(0.0)
    for _ in range(3):
        step_t += 1
        step = step_t.item()
        p.mul_(math.sqrt(1 - 0.999 ** step))
    return torch.cat(outs, 0), p


def _scaled(x, factor, shift=0.0):
    return x * factor + shift


# Round 15 (PyTorch's GRU decomposition binds its cell with `partial(one_layer_rnn, hidden_fn=gru_cell)`):
# `functools.partial` of a program function or a torch function, by keyword; a call's keyword overrides the partial's,
# and a partial of a partial merges their keywords.
def partial_by_keyword(x: f32[4], y: f32[4]) -> tuple[f32[4], f32[4], f32[4], f32[4]]:
    triple = partial(_scaled, factor=3.0)
    shifted = functools.partial(triple, shift=1.0)
    add2 = partial(torch.add, alpha=2.0)
    return triple(x), triple(x, factor=2.0), shifted(y), add2(x, y)


def _log_ratio(x, relative_top=0.1):
    """Hugging Face's DoLa takes `np.log(relative_top)` of its parameter: `math.log` of it (round 16)."""
    return x + np.log(relative_top) - np.sqrt(relative_top * 4.0)


def np_of_a_helper_parameter(x: f32[2, 5]) -> tuple[f32[2, 5], f32[2, 5]]:
    return _log_ratio(x), _log_ratio(x, relative_top=0.5)


def legacy_tensor_new(x: f32[2, 3]) -> tuple[f32[1], f32[2, 3], f32[2], f32[0]]:
    """`w.new(1).fill_(0)` (torch-optimizer's SWATS), `x.new(2, 3)` (uninitialized in PyTorch; overwritten here),
    `x.new(data)` and `x.new()`."""
    a = x.new(1).fill_(0)
    a.add_(x.sum())
    b = x.new(2, 3).zero_() + x
    c = x.new([1.5, 2.5])
    d = x.new()
    return a, b, c, d


def _pick_arm(a, b, c):
    return a * 2.0 if c.sum() > 0 else b - 1.0


def conditional_assignments_on_run_time_values(x: f32[4], y: f32[4]) -> tuple[f32[4], f32[4], f32[4], f32[4]]:
    """`NAME = A if C else B` and `return A if C else B` on a condition known only at run time run as `if`
    statements (Hugging Face's dynamic NTK rope: `seq_len if seq_len > max_len else max_len` after `int(...)` of a
    tensor); nested, in a helper, and in a loop (where the test is the loop's index)."""
    z = x + 1.0 if x.sum() > y.sum() else y * 3.0
    n = int((x.abs().sum() * 10).long()) + 1
    m = n if n > 20 else 20
    w = x * m
    v = x if x[0] > 0 else (y if y[0] > 0 else x + y)
    acc = x
    for i in range(3):
        acc = acc * 2.0 if i == 1 else acc + 1.0
    return z, w, v, _pick_arm(x, y, acc) + acc
