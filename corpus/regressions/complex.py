"""Complex tensors as LLM code writes its rotary embeddings: `torch.polar`, `torch.view_as_complex`, products with
broadcasting through `view`, `torch.view_as_real(...).flatten`, indexing by positions, `.real`/`.imag`. Each engine holds a complex tensor as its real view."""
from __future__ import annotations

import torch
from typing import Tuple


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device, dtype=torch.float32)
    freqs = torch.outer(t, freqs)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)  # complex64
    return freqs_cis



def _reshape_for_broadcast(freqs_cis, x):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(*shape)



def _apply_rotary_emb(xq, xk, freqs_cis) -> Tuple[torch.Tensor, torch.Tensor]:
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    freqs_cis = _reshape_for_broadcast(freqs_cis, xq_)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)



def llama3_decode(xq: f32[2, 1, 4, 8], xk: f32[2, 1, 2, 8], start: i64[1]) -> tuple[f32[2, 1, 4, 8], f32[2, 1, 2, 8]]:
    freqs_cis = _precompute_freqs_cis(8, 16)
    start_pos = 5
    freqs_cis = freqs_cis[start_pos : start_pos + 1]
    return _apply_rotary_emb(xq, xk, freqs_cis)



def mistral_positions(x: f32[3, 2, 8], pos: i64[3]) -> f32[3, 2, 8]:
    freqs_cis = _precompute_freqs_cis(8, 10)
    fc = freqs_cis[pos][:, None, :]
    x_ = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_ * fc).flatten(2).type_as(x)



def parts(a: f32[3, 4], b: f32[3, 4]) -> tuple[f32[3, 4], f32[3, 4], f32[3, 4], f32[2, 4], f32[3, 4, 2]]:
    c = torch.complex(a, b)
    d = torch.polar(b.abs(), a)
    e = (c * d + c - torch.complex(d.real, -d.imag)) * 0.5
    f = -e * a
    # torch.complex broadcasts its parts; a real factor multiplies as a complex one with imaginary part 0.
    g = torch.complex(a[:, :1], b[0]) * 2.0
    return (
        e.real,
        e.imag,
        torch.view_as_real(f).square().sum(-1),
        torch.view_as_real(f[1:, ::2].unsqueeze(0))[0, ..., 1].repeat(1, 2),
        torch.view_as_real(g),
    )


def rope_loop(x: f32[4, 2, 8]) -> f32[4, 2, 8]:
    freqs_cis = _precompute_freqs_cis(8, 4)
    out = torch.zeros_like(x)
    for t in range(4):
        xt = torch.view_as_complex(x[t].reshape(2, 4, 2))
        out[t] = torch.view_as_real(xt * freqs_cis[t]).flatten(1)
    return out
