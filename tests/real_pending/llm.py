"""LLM pieces ported from gpt-fast, llama, nanoGPT and Hugging Face transformers, written as those projects write
them; funcfuse refuses them on some engine today (see STATUS.md)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# llama, llama/model.py: precompute_freqs_cis and apply_rotary_emb (complex multiply via view_as_complex)
def llama_apply_rotary_emb(xq: f32[1, 5, 4, 16], xk: f32[1, 5, 4, 16]) -> tuple[f32[1, 5, 4, 16], f32[1, 5, 4, 16]]:
    dim, end, theta = 16, 5, 10000.0
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    ndim = xq_.ndim
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)
