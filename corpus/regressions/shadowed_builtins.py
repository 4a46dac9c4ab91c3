"""Names funcfuse gives a meaning of its own, defined by the file itself (found by review): a top-level `slice`
function is called, not read as Python's builtin, and a class named `Dropout` is the file's while `nn.Dropout` stays
PyTorch's; an instance is no builtin type's in `isinstance`."""
from __future__ import annotations

import torch
import torch.nn as nn


def slice(start: int = 2, stop: int = 5) -> int:
    return start


class Dropout(nn.Module):
    # the file's own module of that name (a scale), beside PyTorch's
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        return x * self.p


class _Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.mine = Dropout(3.0)
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(self.mine(x))


def file_defines_slice_and_dropout(x: f32[8, 4]) -> tuple[f32[4], f32[8, 4], bool, bool, bool]:
    net = _Net()
    net.eval()
    nested = isinstance(net.mine, (int, (_Net, (Dropout,))))
    return x[slice(1, 5)], net(x), isinstance(net, (int, dict)), isinstance(net.mine, (_Net, Dropout)), nested
