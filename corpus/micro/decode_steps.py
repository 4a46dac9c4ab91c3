"""Decode-step shapes: a matmul over `cat([x, h])` and over an embedding row `emb[tok]` (fused as dot products per
piece in their readers, or as a GEMV reading the cat where it is), a reduction whose readers write its result in
place at the same point (`out[t] = logits`, `tokens[t] = tok[0]`: one launch with it), and the cases that must stay
apart (a reader at another point, a write into what the reduction reads)."""
from __future__ import annotations

import torch


def cat_gemv_written_in_place(h: f32[1, 16], ctx: f32[1, 8], w: f32[24, 20]) -> tuple[f32[4, 1, 20], i64[4]]:
    out = torch.zeros(4, 1, 20)
    tokens = torch.zeros(4, dtype=torch.int64)
    for t in range(4):
        logits = torch.cat([h, ctx], 1) @ w
        out[t] = logits
        tok = logits.argmax(dim=1)
        tokens[t] = tok[0]
        h = torch.tanh(h * 0.9 + logits[:, :16] * 0.1)
    return out, tokens


def embedding_cell(emb: f32[12, 8], w_x: f32[16, 32], w_h: f32[8, 32]) -> tuple[f32[1, 8], i64[5]]:
    # An LSTM cell over cat([emb[tok], ctx]): its matmul is dot products over the embedding row and ctx.
    h = torch.zeros(1, 8)
    c = torch.zeros(1, 8)
    ctx = torch.full((1, 8), 0.25)
    tok = torch.zeros(1, dtype=torch.int64)
    toks = torch.zeros(5, dtype=torch.int64)
    for t in range(5):
        gates = torch.cat([emb[tok], ctx], 1) @ w_x + h @ w_h
        i, f, g, o = gates.chunk(4, 1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        ctx = ctx * 0.5 + h * 0.5
        tok = (h @ emb.t()).argmax(dim=1)
        toks[t] = tok[0]
    return h, toks


def negative_token_row(emb: f32[6, 4], h: f32[1, 4], w: f32[8, 6]) -> f32[1, 3]:
    # A negative index counts from the end of the table; the cell reads the product's two chunks.
    tok = torch.tensor([-2])
    g = torch.cat([emb[tok], h], 1) @ w
    a, b = g.chunk(2, 1)
    return torch.sigmoid(a) * torch.tanh(b)


def three_piece_cat(a: f32[2, 3], b: f32[2, 5], c: f32[2, 4], w: f32[12, 6]) -> f32[2, 6]:
    return torch.relu(torch.cat([a, b, c], 1) @ w) * 2.0


def sum_then_shifted_read(x: f32[6, 10]) -> f32[6]:
    # The reader reads the sum at another row: it cannot run at the sum's point.
    s = x.sum(1)
    return s * 2.0 + s.roll(1, 0)


def max_then_write_into_its_input(x: f32[5, 7]) -> f32[5, 7]:
    # The write goes into the buffer the reduction reads: all of the reduction must come first.
    m = x.amax(1, keepdim=True)
    x[:, 0:1] = m * 0.5
    return x


def softmax_statistics(x: f32[4, 9]) -> tuple[f32[4, 1], f32[4, 1]]:
    # The sum reads the max where it computes (one launch); both fold rows of x, which neither writes.
    m = x.amax(1, keepdim=True)
    s = (x - m).exp().sum(1, keepdim=True)
    return m, s.log() + m


def attention_energies(memory: f32[6, 8], w: f32[8, 8], x: f32[4, 1, 8]) -> f32[4, 6]:
    # memory @ (h @ w)[0] is (memory @ w.T) @ h[0]: memory @ w.T is computed once, before the loop.
    h = torch.zeros(1, 8)
    out = torch.zeros(4, 6)
    for t in range(4):
        h = torch.tanh(x[t] + h * 0.5)
        e = memory @ (h @ w)[0]
        out[t] = torch.softmax(e, 0)
    return out


def vector_times_product(a: f32[5, 7], x: f32[3], w: f32[3, 7], y: f32[2, 3]) -> tuple[f32[5], f32[5], f32[5, 2]]:
    # A vector product, the second row of a matrix product, and (not reassociated: a matrix) a whole product.
    return a @ (x @ w), a @ (y @ w)[1], a @ (y @ w).t()


def greedy_until_eos(emb: f32[10, 6], w: f32[6, 10]) -> i64[8]:
    # `done` is a Python bool made of Python ints: the host computes it, no plan launches a kernel for it.
    tokens = torch.full((8,), -1, dtype=torch.int64)
    tok = torch.zeros(1, dtype=torch.int64)
    t = 0
    done = False
    while not done:
        logits = emb[tok] @ w
        tok = logits.argmax(dim=1)
        tokens[t] = tok[0]
        t += 1
        done = t >= 8 or tok.item() == 3
    return tokens


def flag_read_by_a_kernel(x: f32[5]) -> tuple[f32[5], bool[()]]:
    # The flag is also returned and multiplied in: it is a tensor, computed by a kernel.
    y = x
    done = False
    n = 0
    while not done:
        y = y * 0.5 + 1.0
        n += 1
        done = n >= 3 or y.sum().item() > 100.0
    flag = torch.tensor(n == 3)
    return y * flag, flag


def epilogue_reads_what_a_member_writes(x: f32[8, 16]) -> tuple[f32[9], f32[8]]:
    # The sum's epilogue reads z flipped, where the write after it writes z[1:] in place: not one launch (a review
    # found the CUDA emulator wrong when they were).
    z = torch.zeros(9)
    s = torch.zeros(8)
    for t in range(3):
        x = x * 0.5
        s = x.sum(1) * z[:8].flip(0) + 1.0
        z[1:] = s * 0.5
    return z, s


# Found by review: `(k > 2, x)` is one tuple node, the initial state of both loops; the second loop (with a loop
# inside) reads the flag with torch.where, as a tensor. It is not the host's.
def flag_state_shared_with_a_loop_that_reads_it(x: f32[5], k: i64[()]) -> tuple[f32[5], f32[5]]:
    f = k > 2
    y = x
    while f:
        y = y * 0.5
        f = y.sum() > 1.0
    g = k > 2
    z = x
    while g:
        for j in range(2):
            z = z + 1.0
        z = torch.where(g, z, z - 100.0)
        g = z.sum() < 0.0
    return y, z


# Found by review: the `if` arm's `(k > 2, x * 2.0)` is the loop's initial state, and the flag is returned.
def flag_state_shared_with_an_if_arm(x: f32[5], k: i64[()], s: f32[2]) -> tuple[f32[5], f32[5], bool[()]]:
    f = k > 2
    y = x * 2.0
    while f:
        y = y * 0.5
        f = y.sum() > 1.0
    if s[0] > 0.0:
        g = k > 2
        z = x * 2.0
    else:
        g = k < 0
        z = x + 1.0
    return y, z, g
