"""Control flow the functional engine used to refuse, found by the fuzzer: `break`, `continue` and `return` under an
`if` on a run-time value, a name that is `None` before a loop and a tensor after it, a name rebound in one arm only,
and a name bound to views of different tensors in the two arms of such an `if`."""
from __future__ import annotations

import torch


def break_on_data(a: f32[6, 3], b: f32[6, 3]) -> tuple[f32[6, 3], f32[3]]:
    h = torch.zeros(3)
    for i in range(6):
        h = h * 0.5 + a[i]
        if h.sum() > 0.5:
            break
        b[i] += h
    return b, h


def continue_on_data(x: f32[8, 4]) -> tuple[f32[8, 4], f32[4]]:
    acc = torch.zeros(4)
    for i in range(8):
        if x[i].mean() < 0.0:
            continue
        acc = acc + x[i]
        x[i] *= 2.0
    return x, acc


def greedy_decode(logits: f32[10, 5], out: i64[10]) -> tuple[i64[10], i64[()]]:
    # Decode until an end token (id 0 here) is produced, as greedy decoding loops do.
    n = torch.zeros((), dtype=torch.int64)
    t = 0
    while t < 10:
        tok = logits[t].argmax()
        out[t] = tok
        n += 1
        t += 1
        if tok == 0:
            break
    return out, n


def nested_break(x: f32[4, 6]) -> f32[4, 6]:
    for i in range(4):
        for j in range(6):
            if x[i, j] > 0.5:
                break
            x[i, j] = -1.0
    return x


def none_before_loop(x: f32[5, 3]) -> f32[3]:
    last = None
    for i in range(5):
        if i == 4:
            last = x[i] * 2.0
    return last


def rebound_in_one_arm(x: f32[4], y: f32[4]) -> f32[4]:
    h = x * 1.0
    for i in range(3):
        if y[i] > 0.0:
            h = h + y
    return h



def view_chosen_by_data(a: f32[4, 3], b: f32[4, 3], s: f32[2]) -> tuple[f32[4, 3], f32[4, 3], f32[3]]:
    # `v` views `a` or `b` depending on data: writes through it must reach whichever tensor the taken arm chose.
    for i in range(2):
        if s[i] > 0.0:
            v = a[i]
        else:
            v = b[i + 1]
        v += 1.0
        v[1:].mul_(2.0)
    if s[1] > 0.0:
        w = a[3]
    else:
        w = b[0]
    w[0] = -1.0
    return a, b, w * 3.0


def view_or_fresh_by_data(a: f32[4, 3], b: f32[3], s: f32[2]) -> tuple[f32[4, 3], f32[3], f32[3]]:
    if s[0] > 0.0:
        v = a[1]
    else:
        v = torch.zeros(3)
    v += 1.0
    if s[1] > 0.0:
        w = a[2]
    else:
        w = b * 2.0
    w -= 1.0
    return a, v, w


def _pick_row(x, y, c):
    if c > 0.0:
        return x[0]
    return y[1]


def early_return_on_data(a: f32[4, 3], b: f32[4, 3], s: f32[2]) -> tuple[f32[4, 3], f32[4, 3]]:
    # `return` under an `if` on a run-time value, in the program and in a helper that returns a view.
    _pick_row(a, b, s[0]).fill_(5.0)
    _pick_row(a, b, s[1]).fill_(-5.0)
    if s[0] < -0.5:
        return a * 2.0, b
    a.add_(1.0)
    if s[1] < 0.0:
        b.mul_(2.0)
        return a, b
    return b, a


def set_on_last_iteration(b: f32[4, 3], s: f32[1]) -> tuple[f32[4, 3], f32[3]]:
    # `last` is None before the loop and bound under an `if` on the loop variable, which the loop's state cannot
    # express: reading it after the loop unrolls the loop.
    last = None
    for i in range(2):
        if i == 1:
            last = b[i] * 2.0
    if s.item() > 0:
        w = b[0]
    else:
        w = b[2]
    w += last
    return b, last


def failing_arm_not_taken(x: f32[4, 4], y: f32[3], s: f32[2]) -> tuple[f32[4, 4], f32[4]]:
    # The first arm is PyTorch's shape error and the second an index out of range, each only if it runs; a loop
    # iteration takes each arm by the data (s[0] > s[1] on one golden seed, not on the other; rows by their sums).
    r = x[0]
    for i in range(4):
        if x[i].sum() > 100.0:
            x[i] = x[i] + y
        else:
            x[i] *= 2.0
    if s[0] > s[1]:
        r = r * 3.0
    elif s[0] > 1000.0:
        r = x[:, 1][9]
    else:
        r = r + 1.0
    return x, r


def dead_index_checked_when_valid(table: f32[6, 3], idx: i64[3]) -> f32[6, 3]:
    # Reads whose results are never used still check their indices (they are in range here: idx is taken modulo 6).
    k = idx % 6
    rows = table[k]
    for i in range(3):
        r = table[k[i].item()]
    table[k[0]] += 1.0
    return table * 2.0


def view_by_data_strides_of_size_one_dims(a: f32[3, 1, 4], b: f32[4], s: f32[2]) -> tuple[f32[3, 1, 4], f32[4]]:
    # The arms' views differ in the stride of a dim of size 1 only (4 and 1): one layout; writes reach the chosen one.
    for i in range(2):
        if s[i] > 0.0:
            v = a[i]
        else:
            v = b.view(4, 1).t()
        v += 1.0
        v.mul_(2.0)
        w = v.contiguous()
        w[0, i] = 7.0
    return a, b


def masked_fill_through_expand(a: f32[4], b: f32[3, 1], s: f32[3, 4]) -> tuple[f32[4], f32[3, 1]]:
    # A fill through an expanded view (PyTorch allows it, with a deprecation warning): a memory position is filled
    # when any of the elements that refer to it is masked.
    a.expand(3, 4).masked_fill_(s > 0.5, -1.0)
    b.expand(3, 5).masked_fill_(s[:, :1] < 0.0, 2.0)
    a.unsqueeze(0).expand(2, 4)[:, 1:3].masked_fill_(torch.tensor([True, False]).unsqueeze(1), 5.0)
    return a * 1.0, b * 1.0


def index_put_accumulate_through_expand(a: f32[4], b: f32[3, 1], v: f32[2, 4]) -> tuple[f32[4], f32[3, 1]]:
    # Accumulating through an expanded view adds every element's value into the memory position it refers to, so
    # the contributions of aliases add up (PyTorch allows it, with a deprecation warning).
    a.expand(3, 4).index_put_((torch.tensor([0, 2]),), v, accumulate=True)
    b.expand(3, 5).index_put_((torch.tensor([1, 1, -1]),), torch.ones(3, 5), accumulate=True)
    a.unsqueeze(0).expand(0, 4).index_put_((torch.tensor([], dtype=torch.long),), torch.ones(4))
    return a * 1.0, b * 1.0


# A `return` under an `if` on a run-time value inside a `for` over a list display (AdamP's _projection): the loop is
# unrolled so the return lifts; the display is evaluated once, before a body that rebinds a name it read.
def return_in_loop_over_display(x: f32[4]) -> f32[4]:
    a = x * 2
    for y in [a, x]:
        a = a + 1
        if y.sum() > 0.5:
            return y + a
        a.mul_(3)
    return a


# The same over a tuple display of pairs, returning a float or an int by the arm taken, with a write to a parameter
# before the return.
def return_in_loop_over_pairs(x: f32[4], w: f32[4]) -> tuple[f32[4], float]:
    r = 1
    for k, t in ((2, x), (3, w)):
        if (t * k).sum() > 0:
            w.add_(t)
            return t * k, 0.5
        r = r + k
    return w, r


# A `for` loop that may `break` on data left its target at the range's last value in the functional engines (after
# the `break` its body runs under a flag, and the loop went on binding the target): silently wrong wherever the
# target was read after the loop. It now keeps the value it broke at, as in Python.
def for_target_after_a_break_on_data(x: f32[4]) -> tuple[f32[4], f32[4]]:
    for i in range(4):
        if x[i] > 0.0:
            break
    y = x * i
    for j, v in enumerate(x.unbind(0)):
        if v < 0.0:
            break
    return y, x * j + v


# A list comprehension's target is its own (Python 3): every engine left the enclosing `k` at the comprehension's last
# value (silently wrong; found by review). The enclosing binding is now restored after the comprehension.
def comprehension_target_does_not_leak(x: f32[6]) -> tuple[f32[6], f32[6]]:
    k = 5
    ys = [x[k] * 2.0 for k in range(2)]
    zs = [x[j] + x[k] for j in range(3)]
    return ys[0] + x * k, zs[2] + x


# Real code of a fresh held-out round (mistral-inference's BufferCache, SAM's grad norm, TGI's next-token chooser,
# yolov5's build_targets) used constructs every engine refused: a generator expression in any()/all(), a
# comprehension with two `for`s, a `range` as an index, and `torch.argmax(..., out=)`.
def generators_ranges_and_out(x: f32[2, 3], t: i64[4], y: f32[4, 5]) -> tuple[f32[2, 3], f32[6], f32[4, 5], i64[4]]:
    seqlens = [3, 1, 2]
    if any(n > 2 for n in seqlens):
        x = x * 2
    if all(n > 0 for n in seqlens if n != 1):
        x = x + 1
    rows = [x[0], x[1]]
    vals = [v * 2 for r in rows for v in r.unbind(0)]
    pairs = [a * b for a in range(3) if a > 0 for b in range(2)]
    inter = [v for pair in zip([x[0, 0], x[0, 1]], [x[1, 0], x[1, 1]]) for v in pair]
    z = y.clone()
    z[range(4), t % 5] = 7.0
    out = torch.zeros(4, dtype=torch.long)
    torch.argmax(z[range(1, 4, 2)].sum(0, keepdim=True) + z, -1, out=out)
    return x, torch.stack(vals) + sum(pairs) + torch.stack(inter).sum(), z, out


def _sgd_momentum(params, grads, state, lr=0.1, momentum=0.9):
    for p, g in zip(params, grads):
        st = state.setdefault(p, {})
        if "momentum_buffer" not in st:
            buf = st["momentum_buffer"] = g.clone()
        else:
            buf = st["momentum_buffer"]
            buf.mul_(momentum).add_(g)
        p.add_(buf, alpha=-lr)


# An optimizer's state keyed by its parameters (`self.state[p]`, SAM and most torch.optim-style code), which every
# engine refused: a tensor key is found by identity, as Python's dict finds it.
def tensor_keyed_state(w: f32[3, 4], b: f32[4], gw: f32[3, 3, 4], gb: f32[3, 4]) -> tuple[f32[3, 4], f32[4], i64[()]]:
    state = {}
    params = [w, b]
    for k in range(3):
        _sgd_momentum(params, [gw[k], gb[k]], state)
    n = len(state) + (1 if w in state else 0) + (1 if gw[0] in state else 0)
    return w, b, torch.tensor(n)


# A slice whose length is known only at run time, assigned one number: sequence masks from lengths
# (`mask[i, :lens[i]] = 1`), padding after a length, and bounds Python clamps (negative, beyond the end). Every
# functional engine refused them; each is now a select over the whole dim.
def slices_of_run_time_length(x: f32[3, 6], lens: i64[3], codes: i64[2, 5]) -> tuple[f32[3, 6], f32[3, 6], i64[2, 5]]:
    m = torch.zeros(3, 6)
    for i in range(3):
        m[i, : lens[i]] = 1.0
    y = x.clone()
    for i in range(3):
        y[i, lens[i].item() :] = 0.0
    y[1, -lens[0] :] = 5.0
    c = codes.clone()
    c[0, 2 : lens[1] + 7] = -1
    c[:, lens[2] - 9 : lens[0]] = 7
    return x * m, y, c
