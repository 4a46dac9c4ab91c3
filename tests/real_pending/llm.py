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


# Hugging Face transformers, cache_utils.py: StaticLayer.update (index_copy_ at cumulative_length)
def hf_static_cache_update(
    keys: f32[1, 2, 16, 8], values: f32[1, 2, 16, 8], key_states: f32[1, 2, 3, 8], value_states: f32[1, 2, 3, 8],
    cumulative_length: i64[()]
) -> tuple[f32[1, 2, 16, 8], f32[1, 2, 16, 8]]:
    kv_length = key_states.shape[-2]
    cache_position = torch.arange(kv_length, device=keys.device) + cumulative_length
    cumulative_length.add_(kv_length)
    try:
        keys.index_copy_(2, cache_position, key_states)
        values.index_copy_(2, cache_position, value_states)
    except NotImplementedError:
        keys[:, :, cache_position] = key_states
        values[:, :, cache_position] = value_states
    return keys, values


# nanoGPT, model.py: MLP.forward and Block.forward's second residual (LayerNorm with bias, GELU)
def nanogpt_mlp_block(
    x: f32[2, 6, 32], ln_w: f32[32], ln_b: f32[32], c_fc_w: f32[128, 32], c_fc_b: f32[128], c_proj_w: f32[32, 128],
    c_proj_b: f32[32]
) -> f32[2, 6, 32]:
    c_fc_w, c_proj_w = c_fc_w * 0.17, c_proj_w * 0.09
    h = F.layer_norm(x, ln_w.shape, ln_w, ln_b, 1e-5)
    h = F.linear(h, c_fc_w, c_fc_b)
    h = F.gelu(h)
    h = F.linear(h, c_proj_w, c_proj_b)
    x = x + h
    return x


