"""Python and PyTorch that real code uses, added after held-out rounds 33 and 34: `<<` and `>>` on Python ints and
integer tensors (KIVI's 2-bit cache packing), with PyTorch's results for counts outside [0, 64).
"""

from __future__ import annotations

import torch


def shifts_of_ints(x: i32[4, 8], s: i64[8]):
    a = x << 3
    b = x >> 2
    c = x << s
    d = x >> s
    e = torch.bitwise_left_shift(x, 31)
    f = torch.bitwise_right_shift(x, 40)
    g = 3 << s
    h = x.to(torch.int8) << 5
    k = (x >> (s % 4)).to(torch.int16) & 3
    y = x.clone()
    y <<= 2
    y >>= 1
    return a, b, c, d, e, f, g, h, k, y


def pack_bits(q: i32[2, 16]):
    # KIVI-style packing: 2-bit codes, 16 per int32 word, and back
    codes = q & 3
    packed = torch.zeros(2, 1, dtype=torch.int32)
    for j in range(16):
        packed[:, 0] |= codes[:, j] << (2 * j)
    shifts = torch.arange(16) * 2
    unpacked = (packed >> shifts) & 3
    n = 1 << 20
    m = -7 >> 1
    return packed, unpacked, unpacked == codes, n + m


def shift_of_bool(x: i64[4]):
    return (x > 0) >> 1, (x > 0) << 2


def shift_counts_out_of_range(x: i64[8]):
    s = torch.tensor([-1, 0, 31, 32, 63, 64, 100, 5])
    w = x - 4
    return w << s, w >> s, w.to(torch.int32) << s, w.to(torch.int32) >> s, w.to(torch.uint8) >> s, w.to(torch.int8) << s
