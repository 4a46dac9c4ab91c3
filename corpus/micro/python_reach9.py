"""Python and PyTorch that real code uses, added after held-out round 37: numpy in a class body (DIoU-pytorch-detectron's
`BBOX_XFORM_CLIP = np.log(1000. / 16.)`), `self.__dict__.update(kw)` (minGPT's config, ATSS's nodes), an
`nn.ModuleDict`'s modules read as attributes (minGPT's `self.transformer.wte(idx)`), and `torch.split` with its
`split_size_or_sections` keyword (relational-rnn-pytorch)."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn


class _Cfg:
    CLIP = np.log(1000.0 / 16.0)
    SCALE = np.sqrt(4.0)


class _Config:
    def __init__(self, **kw):
        self.n_embd = 4
        self.__dict__.update(kw)


class _Tiny(nn.Module):
    def __init__(self, cfg, w):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(wte=nn.Embedding(cfg.vocab, cfg.n_embd, _weight=w), ln=nn.Identity()))

    def forward(self, idx):
        return self.transformer.ln(self.transformer.wte(idx))


def class_level_numpy_and_config_objects(
    deltas: f32[5, 4], w: f32[7, 6], idx: i64[3], qkv: f32[2, 12]
) -> tuple[f32[5, 4], f32[3, 6], f32[2, 4], f32[2, 8]]:
    cfg0 = _Cfg()
    clipped = torch.clamp(deltas * 10.0, max=cfg0.CLIP) * cfg0.SCALE
    cfg = _Config(vocab=7, n_embd=6)
    m = _Tiny(cfg, w)
    q, kv = torch.split(qkv, split_size_or_sections=[4, 8], dim=1)
    return clipped, m(idx % cfg.vocab), q, kv + len(m.transformer) + len(list(m.parameters()))
