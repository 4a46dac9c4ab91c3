"""Programs the differential fuzzer (`funcfuse fuzz`) found refused or wrong, reduced, each named for what it holds.

A name bound in the two arms of an `if` on a run-time value to views with different strides (a strided view of one
tensor in one arm, a fresh contiguous tensor or a transposed view in the other): PyTorch runs it, and later reads
and writes go through whichever view the taken arm chose (fuzz seeds 831, 1753, 6008, 6291, 9145).

Also: `index_put_` and indexed assignment into an `expand`ed view; a name bound to views by both arms of an `if` inside
a data-dependent `while`; a write under a test of a counter that a data-dependent `while` carries; an in-place write
that reads exactly the memory it writes through a strided view; a name an inner `while` binds before reading it."""
from __future__ import annotations

import torch


def strided_view_or_fresh_by_data(a: f32[3, 4], s: f32[4]) -> tuple[f32[3, 4], f32[2], f32[2]]:
    # Seed 831: `v` is a stride-2 view of `t` or a fresh tensor, decided by data; then written and read.
    t = torch.tanh(a).relu()
    acc = torch.zeros(2)
    for i in range(4):
        v = t.view(-1).chunk(3, 0)[2][-4::2]
        if s[i] > 0.0:
            v = v * 0.5 + (v * v - v)
        v += 1.0
        acc = acc + v * 2.0
    return t, v, acc


def strided_views_of_two_tensors_by_data(a: f32[2, 3], b: f32[3, 2], s: f32[4]) -> tuple[f32[2, 3], f32[3, 2], f32[3]]:
    # A column of `a` (stride 3) in one arm, a transposed row of `b` (stride 1) in the other.
    acc = torch.zeros(3)
    for i in range(4):
        if s[i] > 0.0:
            v = a[i % 2]
        else:
            v = b.t()[i % 2]
        v.mul_(2.0)
        v[1:] += 1.0
        acc = acc + v.relu()
    return a, b, acc


def transposed_or_fresh_by_data(d: f32[1, 3, 2], s: f32[3]) -> tuple[f32[1, 3, 2], f32[2, 3, 1]]:
    # Seed 9145: a transposed view of `d` or of a softmax made before the `if`; elementwise results keep the chosen
    # view's layout.
    v1 = d.transpose(0, 2)
    t4 = torch.softmax(v1, 0)
    out = torch.zeros(2, 3, 1)
    for i in range(3):
        if s[i] > 0.0:
            w5 = v1[..., :]
        else:
            w5 = t4[..., :]
        w5 += 0.5
        e = torch.exp(w5.clamp(max=1.0))
        out = out + e
    return d, out


def narrow_slice_or_fresh_by_data(a: f32[2, 3], c: f32[4]) -> tuple[f32[2, 3], f32[2, 1]]:
    # Seed 6008: `a[..., -1:3]` (strides 3, 1) or a fresh [2, 1] tensor.
    acc = torch.zeros(2, 1)
    for i in range(4):
        v1 = a[..., -1:3]
        if c[i] < 0.25:
            v1 = v1 * 0.5 + (v1 + -1.25)
        v1.sub_(0.25)
        acc = acc + v1
    return a, acc


def view_chosen_by_nested_ifs(a: f32[2], b: f32[4], c: f32[4]) -> tuple[f32[2], f32[4], f32[4]]:
    # Seed 5350: inside an `if` on data, an inner `if` on data leaves `v` a view of `a` or a fresh tensor; the outer
    # `if` then chooses between that and a view of `b`. Writes reach whichever tensor the taken arms chose.
    out = torch.zeros(4)
    for i in range(4):
        v = a[-2]
        if c[i] < 0.0:
            if b[i] < -0.25:
                w = c[:1]
            else:
                v = v * 0.5 + (v / (v.abs() + 1.0))
        else:
            v = b[i]
        v += 1.0
        out[i] = v
    return a, b, out


def view_or_fresh_chosen_twice_by_data(a: f32[3, 3], s: f32[4]) -> tuple[f32[3, 3], f32[3]]:
    # Seed 6876: a strided column of `a`, or a fresh tensor made by an inner `if`, or a row of `a`.
    acc = torch.zeros(3)
    for i in range(4):
        v = a.t()[1]
        if s[i] < 0.25:
            if s[3 - i] >= 0.0:
                v = v * 0.5 + torch.sigmoid(v.relu())
        else:
            v = a[i % 3]
        v.mul_(2.0)
        acc = acc + v
    return a, acc



def fresh_in_one_arm_viewed_by_a_name_of_that_arm(a: f32[4], b: f32[4], s: f32[3]) -> tuple[f32[4], f32[4]]:
    # Seed 2517: in a `while` loop, `v` is `a` or a fresh tensor; `u`, bound in that arm only, views the fresh one
    # (and is unreadable after the `if`, leaving `v` the only name that reaches it).
    out = torch.zeros(4)
    k = 0
    while k < 3:
        v = a
        if s[k] > 0.0:
            v = v * 0.5 + torch.maximum(b, torch.full((4,), 0.25))
            u = v[::2][None].reshape(-1)
        v += 1.0
        out = out + v
        k += 1
    return a, out


def in_place_writes_each_after_readers_of_the_other(
    a: f32[6], b: f32[4], c: f32[4], d: f32[4]
) -> tuple[f32[1, 6], f32[6]]:
    # Seed 687: two in-place writes (into `a` and into `b`), each to run after the readers of its old buffer, where
    # a reader of each needs the other write: the plan ran each before the other and recursed until the stack
    # overflowed (C and the CUDA emulator). One of them now writes a new buffer.
    a.split(3, 0)[0].mul_((-b[-1]))
    t1 = torch.stack([a, a], 0)
    b[1] *= (a[-2] * 2.0).clamp(min=-0.5, max=0.75)
    u = (torch.full((2, 6), -0.5) - a) + (t1 * a)
    t2 = torch.where(u > torch.where(t1 > (t1 + t1), t1, (t1 * t1)), u, torch.full((2, 6), 2.0))
    v3 = t2[-1:]
    xs7 = []
    for i8 in range(2):
        xs7.append(t1[i8] * 2.0 + (a * 2.0))
    return v3, a


def index_put_into_expanded_rows(b: f32[5], s: f32[2, 5]) -> f32[5]:
    # Seed 1778: the rows of `b.expand(3, 5)` are one memory; `index_put_` writes each memory position once per
    # index entry, the last entry winning (PyTorch warns that this is deprecated, and runs it).
    b.expand(3, 5).index_put_((torch.tensor([2, 0]),), s)
    return b


def index_put_into_expanded_dim_with_duplicates(b: f32[1, 2, 4]) -> f32[1, 2, 4]:
    # Seed 497: both indices of the expanded dim reach the same memory; the later one wins.
    v = torch.arange(16.0).reshape(2, 2, 4, 1)
    b.permute(1, 2, 0).expand(3, -1, -1, -1).chunk(1, 1)[-1].index_put_((torch.tensor([0, -1]),), v)
    return b


def setitem_into_expanded_view(d: f32[5], e: f32[4, 1, 3], s: f32[3, 2]) -> tuple[f32[5], f32[4, 1, 3], f32[4, 5, 3]]:
    # Seed 5182: an indexed assignment into an expanded view: along a dim the index does not cover (every value of
    # that dim reaches one memory position: the last wins), and with index tensors on both sides of it.
    d.expand(3, 5)[:, torch.tensor([1, 3])] = s
    x = e.expand(4, 5, 3)
    x[torch.tensor([3, 0, 3]), :, torch.tensor([2, 1, 0])] = torch.arange(15.0).reshape(3, 5) - 7.0
    return d, e, x


def view_chosen_by_data_in_while_loop(a: f32[3, 4], b: f32[3, 4], s: f32[4]) -> tuple[f32[3, 4], f32[3, 4]]:
    # Seeds 1936, 4304, 9742: in a data-dependent `while`, both arms of an `if` on data bind `w` (a view of `a` or
    # of `b`) before anything reads it, so `w` is local to an iteration and need not be carried.
    k = 0
    while k < 4:
        if s[k].item() < 0.0:
            w = a[k % 3, :3]
        else:
            w = b[:, k]
        w += 1.0
        k += 1
        if a.sum().item() > 100.0:
            break
    return a, b


def while_write_under_a_carried_counter(a: f32[2], b: f32[4]) -> tuple[f32[4], f32[4]]:
    # Seed 1845: the loop becomes data-dependent after its first iteration; the write under `k == 2` was not seen
    # when finding what the loop carries (with `k` still a known number), and the loop was refused.
    v = b.view(-1)
    k = 0
    while k < 3:
        if k == 2:
            b[3:].mul_(0.5)
            b[3:].add_(1.0)
        k += 1
        if a.abs().sum().item() < -1.0:
            break
    return v, b


def square_in_place_through_strided_view_by_data(a: f32[2, 5], s: f32[3]) -> f32[2, 5]:
    # Seed 9157: `v.unsqueeze(0).mul_(v)` through a strided view reads exactly the memory each element writes:
    # PyTorch runs it. It was refused as an overlap, even in an arm that never ran.
    v = a[..., 2:]
    for i in range(3):
        if s[i] > 0.0:
            v.unsqueeze(0).mul_(v)
        else:
            a.add_(0.5)
    return a


def view_bound_in_inner_while_loop(a: f32[3], b: f32[4, 3], s: f32[4]) -> tuple[f32[3], f32[3]]:
    # Seed 14697: an inner data-dependent `while` binds `v` before reading it; the outer loop need not carry `v`.
    acc = torch.zeros(3)
    k = 0
    while k < 3:
        j = 0
        while j < 2:
            v = b[k].contiguous()
            v.mul_(2.0)
            acc = acc + v
            j += 1
            if v.sum().item() > 50.0:
                break
        k += 1
        if s[k].item() > 2.0:
            break
    return a, acc


def reductions_of_zero_size_tensors(d: f32[2, 0, 2], e: f32[2, 3]) -> tuple[f32[2, 0, 1], f32[2, 2], f32[2, 2], f32[2, 0], f32[2, 3]]:
    # Seed 10283: a reduction whose output has no elements (`mean` over dim 2 of f32[2, 0, 2]) compiled to a C kernel
    # that named a loop variable it had left out. A reduction over a zero-length dim is its identity: sum 0, mean nan.
    return d.mean(2, keepdim=True), d.sum(1), d.mean(1), d.amax(2), e + d.sum(1).sum(1, keepdim=True)


def softmax_and_logsumexp_over_zero_length_dims(a: f32[2, 0, 3], b: f32[0]) -> tuple[f32[0], f32[2, 0, 3], f32[2, 0, 3], f32[2, 3], f32[()], f32[2, 0, 1], f32[3]]:
    # Seed 57553: the planned engines spell softmax as amax/sub/exp/sum/div, and the amax over a zero-length dim
    # raised (PyTorch checks that on a user's amax, never inside softmax), so every planned engine refused what
    # PyTorch runs (an empty result). logsumexp over a zero-length dim is -inf in PyTorch; both engines raised.
    return (
        torch.softmax(b, 0),
        torch.log_softmax(a, 1),
        torch.softmax(a * 2.0, 2) + 1.0,
        torch.logsumexp(a, 1),
        torch.logsumexp(b, 0),
        torch.logsumexp(a, 2, keepdim=True),
        torch.logsumexp(a, [0, 1]),
    )


def index_out_of_range_past_a_break_on_data(c: f32[3, 2], s: f32[4]) -> tuple[f32[3, 2], f32[3]]:
    # Seed 28079: `c.select(1, i - 1)` is out of range at i = 3, which a `break` on data may never reach; PyTorch
    # raises only if it does. The functionalizer refused the program: it checked the index over every iteration,
    # before it met the `break`. Such an index is now checked when the program runs.
    acc = torch.zeros(3)
    for i in range(1, 4):
        c.select(1, i - 1).mul_(2.0)
        acc = acc + c[:, i - 1]
        if s[i] > -10.0:
            break
    return c, acc


def index_out_of_range_in_iterations_an_if_on_data_skips(c: f32[2, 3], s: f32[5]) -> tuple[f32[2, 3], f32[3]]:
    # The same under an `if` on data (`c[i - 1]` is out of range at i = 3, where the condition is false) and past a
    # `continue` on data (`c[:, i]` at i = 3); the functionalizer raised whenever the arm ran.
    acc = torch.zeros(3)
    for i in range(1, 4):
        if s[i] * 0.0 + i < 3:
            c[i - 1] += 1.0
            acc = acc + c[i - 1]
    for i in range(4):
        if s[i] * 0.0 + i > 2.5:
            continue
        acc[:2] = acc[:2] + c[:, i]
    return c, acc


def setitem_of_a_view_of_the_same_memory(b: f32[5, 6], t: f32[1, 6], x: f32[3, 4], idx: i64[2]) -> tuple[f32[5, 6], f32[1, 6], f32[3, 4]]:
    # Seed 36370: `b[-1:] = b[k]` with k = 4 writes a row onto itself. PyTorch drops the value's leading size-1 dims,
    # expands it to the target (a new leading dim's stride is the next dim's size times its stride) and finds the
    # same memory with the same strides, so it copies nothing; every engine raised PyTorch's partial-overlap error
    # there (the functional engine refused, the index being known at run time only). A value that the expansion
    # repeats (`x[:, :] = x[0]`) is not checked by PyTorch: it is exact where each position is written from itself.
    b.mul_(0.5)
    v2 = b.select(0, idx[0].item() % 5)
    b[-1:] = v2
    b[4:] = b[-1]
    b[4] += v2 - 1.0
    t2 = t * 2.0
    t2[:, :] = t2.select(0, 0)
    x[:, :] = x[0]
    x[1:, :] = x[1]
    return b, t2, x


def names_local_to_a_for_loop_in_a_while_loop(b: f32[3, 4, 1], c: f32[2]) -> tuple[f32[3, 4, 1], f32[1]]:
    # Seeds 39312, 39723: names bound only inside a `for` loop in the body of a data-dependent `while` (a copy bound
    # to two names; a view of a parameter) were carried by the `while` and refused: a `for` loop that assigns a name
    # before reading it in each iteration does not read it first.
    k = 0
    acc = torch.zeros(1)
    while k < 2:
        for i in range(1, 2):
            v3 = b.permute(2, 1, 0).select(1, i + 1).squeeze(0).contiguous()
            t5 = v3
            v4 = c.unsqueeze(1)[k].chunk(3, 0)[0]
            acc = acc + t5[:1] + v4
        k += 1
        if b.abs().sum() < 0.0:
            break
    return b, acc


def empty_views_and_one_shared_element(a: f32[5, 5], b: f32[4, 2, 5], d: f32[3, 5], idx: i64[1]) -> tuple[f32[5, 5], f32[4, 2, 5], f32[0]]:
    # Seed 30690: `v1` is an empty view of `d` or an empty tensor made in the loop, chosen by a `break` on data;
    # refused as a view chosen by several run-time `if`s, though an empty tensor holds nothing to alias.
    # Seed 40214: an in-place op on an expanded empty view raised PyTorch's internal-overlap error; PyTorch finds an
    # empty tensor contiguous and runs it. Seed 40229: `a[:, 4].copy_(a[-1])` meets its value at one element, which
    # it reads and writes at the same position: PyTorch does not check, and the result does not depend on the copy
    # order; it was refused as a strided overlap (`a[:, 3].copy_(a[-1])`, where they meet at different positions,
    # still is: PyTorch's result would depend on its copy order).
    v1 = d[3:4].flatten()
    for i in range(3):
        if idx[0] > 7:
            break
        v1 = v1 * 0.5 + torch.sigmoid(v1)
    b.narrow(1, 2, 0).expand(2, -1, -1, -1).add_(2.0)
    a[:, 4].copy_(a[-1])
    return a, b, v1


def setitem_rows_from_row_zero(x: f32[3, 4], y: f32[2, 4]) -> tuple[f32[3, 4], f32[2, 4]]:
    # Review of the setitem overlap rule: the value `x[0]` expanded to `x[1:3, :]` repeats along the new dim
    # (stride 0), so it reads row 0 only and never meets the rows written; PyTorch runs it (every engine refused it).
    x[1:3, :] = x[0]
    y[1:2, :] = y[0]
    return x, y


def cdist_p0_of_nan_and_p_inf_without_columns(
    a: f32[3, 4], b: f32[2, 4], e1: f32[3, 0], e2: f32[2, 0]
) -> tuple[f32[3, 2], f32[3, 2], f32[3, 2]]:
    # PyTorch's p = 0 distance is the sum of min(ceil(|d|), 1): a NaN difference gives NaN (it was counted as 1);
    # with no columns every distance is 0, p = inf included (an empty max raised).
    n = a / 0.0 * 0.0
    return torch.cdist(n, b, p=0.0), torch.cdist(a, b, p=0.0), torch.cdist(e1, e2, p=float("inf"))


def write_of_nothing_at_a_loop_dependent_offset(a: f32[3, 0]) -> f32[3, 0]:
    # Fuzz seed 4212: the write into a view with no elements runs on the host, and its view's offset (`2 - i`) was
    # copied out of the loop unevaluated: every planned engine failed with "loop reference 0 outside of 0 enclosing
    # loops". PyTorch writes nothing.
    for i in range(1, 3):
        a[2 - i].expand(2, 0)[:, :-1].sigmoid_()
    return a



def overlap_decided_by_run_time_positions(
    b: f32[3, 1], c: f32[5, 1], x: f32[2]
) -> tuple[f32[3, 1], f32[5, 1]]:
    # Seed 40652: whether `c[:1] = c[j]` meets its value depends on `j`, read from data; seed 1408: the counter of
    # a `while` that may break on data decides whether `b[k - 1]` is the element written. PyTorch raises its overlap
    # error only where they meet (tests/engines.rs has those runs); the functional and planned engines refused both.
    j = (x.abs() < -1.0).sum().item()
    c[:1].split(1, 1)[0][:, 0:] = c[j + 2]
    for i in range(1, 3):
        c[i : i + 1] = c[j + 4] * 0.5 + c[i - 1]
    k = 0
    while k < 4:
        b.select(0, 0)[0::2].index_put_((torch.tensor([-1]),), b[k - 1], accumulate=True)
        k += 1
        if x.abs().sum() >= 0.0:
            break
    return b, c


def write_of_nothing_beside_a_write_in_the_same_loop(a: f32[3, 0], b: f32[4]) -> tuple[f32[3, 0], f32[4]]:
    # Fuzz seed 4212 as generated: with the write of nothing, the plan's run made 2 copies where its estimate
    # (`plan_estimate`, which every command prints) counted 1.
    for i in range(1, 3):
        a[2 - i].expand(2, 0)[:, :-1].sigmoid_()
        b[i : i + 2] += 1.0
    return a, b


def names_the_arms_bind_differently_and_nobody_reads(
    a: f32[3, 1], c: f32[1, 2], d: f32[2, 1, 1]
) -> tuple[f32[1], f32[1, 1], f32[1, 1]]:
    # Seed 72836: the loop target `x` is a row of `a` before the `if` on data and a row of `d` (another shape) in
    # it; seed 74333: `v` is a view chosen by a `break` on data in both arms of the `if` its flags make. Neither is
    # read after: PyTorch runs it, every engine but the reference refused it at the `if`.
    t = a[0] * 1.0
    for x in [a[1], a[2]]:
        t = t + x
    u = d[0] * 1.0
    if t.abs().sum() >= 0.0:
        for x in [d[1]]:
            u = u + x
    v = c[:, 1::3].split(1, 1)[0]
    w = v * 1.0
    for i in range(0, 1):
        for j in range(2):
            if c.sum() > 0.5:
                break
            v = v * 0.5 + torch.full((1, 1), -1.25)
            w = w + v
    return t, u, w


# Fuzz seeds 100800 and 100829 (reduced): a matmul written through an empty view was fused into the write as dot
# products, and the in-place write then found no buffer to write into ("node was fused but is read by the host").
def matmul_written_through_an_empty_view(b: f32[4, 2]) -> f32[4, 4]:
    t1 = b @ torch.maximum(torch.full((4, 2), 0.5), b).t()
    t1[:, -1:-1:3] = torch.sigmoid(torch.full((4, 0), 2.0)) * 2.0
    return t1


def matmul_view_copied_into_an_empty_view(a: f32[2]) -> f32[0, 1]:
    v1 = a.view(-1).unsqueeze(0).clone()
    t2 = v1 @ torch.full((1, 2), 1.0).relu().t()
    v3 = t2[2:1].narrow(1, 0, 1)
    v3.split(1, 1)[0][:, -2:0].copy_((v3 * 2.0) + torch.zeros((0, 0)))
    return v3


# Fuzz seed 100645 (reduced): a name bound in both arms of an `if` on a run-time value to views that earlier such
# `if`s chose (a loop that may break on data makes each iteration one) was refused; the merged view is now a chain
# of the choices, each under the conditions that lead to it.
def views_chosen_by_ifs_in_turn(a: f32[1, 1], b: f32[3], c: f32[3]) -> tuple[f32[3], f32[3], f32[3]]:
    v1 = b
    for i in range(0, 6):
        if (a.sum() * 0.0 + i % 2).item() > 0.5:
            w = c[::2]
            v1 = v1 * 0.5 + torch.exp(torch.tanh(v1).clamp(max=1.0))
        else:
            w = v1[::2]
        w += w + torch.full((2,), -1.25)
        if (a.sum() * 0.0 + i).item() > 3.5:
            break
    return v1, b, c


# Fuzz seed 101816 (reduced): an overlapping write whose result PyTorch leaves to its vector width, in an arm of an
# `if` on a run-time value that does not run, refused the whole program on the functional engines; it is now refused
# only where the arm runs, as the reference does.
def overlapping_write_in_an_arm_not_taken(a: f32[1, 1], b: f32[1, 6], c: f32[6, 6]) -> tuple[f32[1, 6], f32[6, 6]]:
    if a.abs().mean().item() < 2.0:
        b.split(5, 1)[0][:1].reshape(-1).masked_fill_(torch.full((5,), 1.0) < torch.full((5,), 2.0), -1.25)
    else:
        c.narrow(1, 3, 1).expand(6, 1).reshape(-1).copy_(c[-2])
    return b, c


# Fuzz seed 146116 (reduced): a sum over a view with no elements (`[0, 20]`) read element 0 of the empty buffer in the
# C kernels, a segmentation fault, since their loop nests treat extents of 0 like 1; a reduction over nothing is now
# its identity (through the kernel's epilogue where it has one).
def reductions_over_an_empty_view(a: f32[1, 1], b: f32[0, 1, 1]) -> tuple[f32[1], f32[20], f32[()], f32[()], bool[20]]:
    v = b.squeeze(0).reshape(0, 20)
    s = v.abs().sum()
    return a[0] + s, v.sum(0), v.prod(), v.sum() * 2.0 + 1.0, v.any(0)


# Fuzz seed 145179 (reduced): a write through a view an `if` on a run-time value chose, which overlaps what it reads
# in a way PyTorch leaves to its vector width for one choice only, refused the program on the functional engines; the
# write now raises (as the reference does) only where that choice is made.
def overlap_for_one_choice_only(a: f32[1, 1], c: f32[2, 2], t: f32[2, 2]) -> tuple[f32[2, 2], f32[2, 2]]:
    t1 = t * 1.0
    if (a.sum() * 0.0).item() > 1.0:
        w = t1[:, 0]
    else:
        w = c[:, 0]
    w += t1[1]
    return t1, c


# Fuzz seed 142187 (reduced): a view of no elements of `t1` (`w = t1[2:].t()[2:1]`) bound beside `t1` in one arm made
# `t1` a conditional view after the `if`, which a data-dependent `while` cannot carry; a view of no elements aliases
# nothing (it reads nothing and writes nothing), so `t1` is merged as a value.
def empty_view_beside_a_rebound_name(a: f32[1, 1], b: f32[1, 1]) -> f32[1, 1]:
    t1 = b.cumsum(1)
    k = 0
    while k < 3:
        if a[0].mean().item() < 0.0:
            w = a[2:].t()[2:1]
            t1 = t1 * 0.5 + a
        else:
            w = t1[2:].t()[2:1]
        k += 1
        if (b.abs().sum() * 0.0 + k).item() >= 2.5:
            break
    return t1


# Fuzz seed 168522 (reduced): the in-place `zero_` of a sum was chained with the write the sum reads (`v[-1] -= v[2]`),
# and launching the chain ran the sum first, on the unwritten `b` (the fused C plan's `b` differed); a group whose
# in-place member writes into a buffer that needs another member is now dissolved.
def in_place_write_of_a_sum_chained_with_what_it_reads(b: f32[1, 4]) -> tuple[f32[1, 4], f32[()]]:
    v1 = b[0]
    v1[-1] -= v1[2]
    r2 = v1.sum(0)
    for i in range(1):
        r2.zero_()
    return b, r2


# Fuzz seed 178147 (reduced): two in-place writes of `c` went to different groups (`c[:, 0] = ...` with a reader of
# `a`, `c[:, 0:1] = ...` with the first write of `a`); launching the second needed the first, whose group needed the
# first write of `a`, so the fused C plan multiplied `a` twice. Group entanglement is now followed through in-place
# members too.
def in_place_writes_grouped_across_each_others_needs(a: f32[4, 2], c: f32[4, 1]) -> tuple[f32[4, 2], f32[4, 1], f32[4]]:
    a.view(8)[::2].unsqueeze(1).mul_(torch.full((4, 1), 3.125))
    c.unbind(1)[0].copy_(torch.full((4,), 0.75) / (torch.tanh(torch.full((4,), 0.0)).abs() + 1.0))
    c[..., 0:1].copy_(torch.sigmoid(torch.full((1,), 2.0)))
    a.select(0, -2).add_(torch.full((), 0.5) - 0.5)
    t = a.relu() + a.clamp(min=-0.5, max=0.75)
    return a, c, t[:, -1]


# Fuzz seeds 102541, 171808, 185586, 192565, 198693 (reduced): a `while k < 3: ...; k += 1` loop that may `break` on
# data was a `while` term, where the counter is a run-time value, so a view or tensor chosen by `if k == 2` was
# refused. Such a counted loop (`k` set to an int literal before it, stepped by a literal once per iteration, a
# literal bound of at most 64 iterations) is now functionalized as the `for` loop it is, exactly: `k` after the loop
# is what the `while` leaves, also after a `break` before or after the step.
def counted_while_with_a_view_chosen_on_the_counter(a: f32[1], b: f32[4, 1], idx: i64[1]) -> tuple[f32[1], f32[1]]:
    v = b.unbind(0)[2]
    k = 0
    while k < 3:
        if k == 2:
            v = v * 0.5 + torch.exp((a / (v.abs() + 1.0)).clamp(max=1.0))
        if idx[0] > 2:
            break
        k += 1
    return v, a * k


def counted_while_stepping_before_a_break(a: f32[3, 6], d: f32[3, 6], s: f32[4]) -> tuple[f32[3, 6], f32[6]]:
    k = 1
    t = d
    while k <= 4:
        if k == 2:
            t = torch.exp(a.clamp(max=1.0)) - d
            v = t.flatten()
            if s[0] > 5.0:
                break
        else:
            w = d.transpose(0, 1)
            w += 1.0
        k += 1
        if s[k - 2] > 0.0:
            break
    return t * k, d[k - 3]


# Fuzz seed 214204 (reduced): the group of `d.clamp_` and the later `a[:, -3] *= ...` needed the in-place
# `a.view(9).add_`, which had to wait for the `cat` that read `a` before it, and the `cat` needed `d.clamp_`: launching
# the group ran the write first, so the `cat` read `a` already written (the fused C plan's result differed). Group
# entanglement now follows an in-place write to the readers that run before it.
def group_needing_a_write_that_waits_for_a_reader_of_the_group(a: f32[3, 3], d: f32[3]) -> f32[9]:
    d.clamp_(-0.75, 0.0)
    xs = []
    for i in range(3):
        xs.append(a[i] * 2.0 + (-d))
    t = torch.cat(xs[::-1], 0)
    a.view(9).add_(torch.full((9,), 0.5) + -1.25)
    a[:, -3] *= (-d) - d.clamp(min=-0.5, max=0.75)
    return t


# Fuzz seed 215892 (reduced): `w += torch.tanh(w)` through a view chosen by an `if` on data wrote in place into the
# zeros that `c`'s earlier copy also read; the planner took that copy for done before the write because the `if`
# reads it, but the host runs one arm only, so the eager and unfunctionalized plans' copy read the written zeros.
def in_place_write_over_a_buffer_read_only_in_an_arm(a: f32[3, 6, 3], b: f32[3], c: f32[3, 6, 3]) -> f32[6, 3, 3]:
    b[0] += 4.0
    c.reshape(-1).copy_(b[0] + torch.zeros((54,)))
    if b.sum() > 0.5:
        w = a.transpose(1, 0)
    else:
        w = c.transpose(1, 0)
    w += torch.tanh(w)
    return w


# Found by review: an in-place write over `y` waited for a reader of `y` that only an `if`'s arm computes, and the
# eager and unfunctionalized plans ran that reader outside its arm, so its index check raised where the arm does not
# run. A write no longer waits for such a reader (it writes into a copy).
def in_place_write_after_a_reader_only_an_arm_computes(x: f32[4], c: f32[4], idx: i64[2]) -> tuple[f32[4], f32[()]]:
    y = x * 2.0
    if c.sum() > 100.0:
        z = y[idx[0].item() + 20] * 3.0
    else:
        z = y[2] * 1.0
    y[1:3] = 0.0
    return y, z


# Fuzz seed 310478 (refused, not wrong): a partial write (`index_put_`, indexed assignment, `masked_fill_`) into an
# expanded view of a name that an `if` on a run-time value bound to a parameter or to a fresh tensor. The functional
# engine wrote expanded views exactly only when the view was one tensor's; a conditional view now gets the write on
# each tensor it may be, and each tensor keeps the version its condition chooses.
def expanded_write_through_a_view_chosen_at_run_time(a: f32[1, 2], b: f32[1, 2]) -> tuple[f32[1, 2], f32[1, 2]]:
    t = a if b.sum() > 0.0 else a * -0.5 + 1.0
    t.expand(2, 2, -1).index_put_((torch.tensor([0, 1]),), torch.ones(2, 2, 2) * b, accumulate=True)
    return a, t


def expanded_writes_through_views_chosen_at_run_time(a: f32[3, 1], b: f32[3, 1], m: bool[3, 4]) -> tuple[f32[3, 1], f32[3, 1], f32[3, 1]]:
    s = b if a.sum() > 0.0 else a
    s.expand(3, 4)[torch.tensor([2, 0]), torch.tensor([1, 3])] = torch.tensor([5.0, -5.0])
    u = a if b[0, 0] > 0.0 else b
    u.expand(3, 4).masked_fill_(m, 7.0)
    return a, b, s + u


# Fuzz seed 328871 (the eager plan wrong): `index_put_(..., accumulate=True)` into an expanded view in a loop sums
# the contributions into `zeros` that no loop state reaches, which the executor computes once for every iteration;
# the planner wrote that sum in place into the `zeros` buffer, so later iterations started from the earlier sums. A
# write in a loop body no longer goes into a buffer computed once.
def accumulate_into_an_expanded_view_in_a_loop(b: f32[3, 1, 4]) -> f32[3, 1, 4]:
    for i in range(1, 4):
        b.expand(2, -1, 2, 4).index_put_((torch.tensor([0, -1]),), b + torch.zeros((2, 3, 2, 4)), accumulate=True)
    return b


# Fuzz seed 323810 (refused): an `if` on a run-time value whose one arm always raises (an index known to be out of
# range) and whose other arm sets entries of a dict or list was refused; the arm that goes on now leaves its entries
# in the containers, under the check that raises where the other arm is chosen.
def containers_changed_beside_an_arm_that_raises(x: f32[4], n: int = 2) -> tuple[f32[4], f32[4], f32[4]]:
    d = {"a": x * 2.0, "b": x}
    xs = [x, x + 1.0]
    if x.sum() > -100.0:
        d["a"] = d["b"]
        xs.append(x * 3.0)
    else:
        d["a"] = torch.sigmoid(x[n ** 3])
    if x.sum() < -100.0:
        xs[0] = x[n ** 3]
    else:
        xs[0] = x - 1.0
        d["b"] = x * 4.0
    return d["a"] + d["b"], xs[0], xs[2]


# After fuzz seed 328871 (found by review): the same in-place hazard one loop level down, a buffer made in an outer
# loop's body and written in an inner body, where every inner iteration must start from the outer body's value.
def in_place_writes_in_an_inner_loop_over_outer_loop_values(b: f32[3, 1, 4], c: f32[3, 4], w: f32[3, 4]) -> tuple[f32[3, 1, 4], f32[3, 4]]:
    for j in range(2):
        z = torch.zeros((2, 3, 2, 4)) + j
        v = w * (j + 1.0)
        for i in range(3):
            b.expand(2, -1, 2, 4).index_put_((torch.tensor([0, -1]),), b + z, accumulate=True)
            y = v.clone()
            y[1] += c[0]
            c = c + y
    return b, c


# After fuzz seed 481976: `matmul/reassociate` divided by zero taking the row a view of a product with no columns
# reads (the offset's row was computed before the columns were checked to be there).
def row_view_of_a_product_without_columns(a: f32[1, 1], b: f32[1, 0], c: f32[1, 0]) -> f32[1, 1]:
    t3 = c @ b.t()
    v7 = t3.transpose(1, 0)
    st12 = {"a": (v7 - torch.full((2, 2), 1.0)), "b": t3}
    return st12["b"] + 0.0
