"""`F.conv1d`/`conv2d`/`conv3d` (ConvLSTM cells, detection heads): one matmul over the zero-padded input's windows.
Groups, strides, dilation, `padding='same'` (asymmetric for an even kernel), an unbatched input, `torch.conv2d`."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def conv_forms(x: f32[2, 4, 7, 6], w: f32[6, 2, 3, 3], b: f32[6], v: f32[3, 9], u: f32[5, 3, 2]) -> tuple[f32[2, 6, 7, 6], f32[2, 6, 3, 2], f32[5, 9], f32[2, 6, 5, 4]]:
    a = F.conv2d(x, w, b, padding=1, groups=2)
    c = F.conv2d(x, w, None, stride=(2, 3), padding=(1, 0), dilation=(2, 1), groups=2)
    d = F.conv1d(v, u, padding='same')
    e = torch.conv2d(x[:, :, :, :], w, b, 1, 0, 1, 2)
    return a, c, d, e


# A 1x1 convolution of a permuted (non-contiguous) input, a 3-D one, and a conv whose input is written afterwards.
def conv_of_views(x: f32[2, 5, 4, 3], w: f32[3, 3, 1, 1], k: f32[2, 3, 2, 2, 2], y: f32[1, 3, 4, 4, 4]) -> tuple[f32[2, 3, 5, 4], f32[1, 2, 3, 3, 3], f32[2, 5, 4, 3]]:
    a = F.conv2d(x.permute(0, 3, 1, 2), w)
    c = F.conv3d(y, k, stride=1)
    x[:, 0] = 0.0
    return a, c, x
