"""LLM pieces ported from gpt-fast, llama, nanoGPT and Hugging Face transformers, written as those projects write
them; funcfuse refuses them on some engine today (see STATUS.md)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# gpt-fast, model.py: apply_rotary_emb (freqs_cis as precompute_freqs_cis caches it: [seq, head_dim / 2, 2])
def gptfast_apply_rotary_emb(x: f32[1, 6, 4, 16], freqs_cis: f32[6, 8, 2]) -> f32[1, 6, 4, 16]:
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
            xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
        ],
        -1,
    )
    x_out2 = x_out2.flatten(3)
    return x_out2.type_as(x)


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


# Hugging Face transformers (v4.3x), models/llama/modeling_llama.py: _make_causal_mask, _expand_mask and
# LlamaModel._prepare_decoder_attention_mask (past_key_values_length 3)
def hf_prepare_decoder_attention_mask(attention_mask_raw: i64[2, 8], inputs_embeds: f32[2, 5, 16]) -> f32[2, 1, 5, 8]:
    attention_mask = (attention_mask_raw < 8).long()
    input_shape = inputs_embeds.shape[:-1]
    past_key_values_length = 3
    dtype = inputs_embeds.dtype
    device = inputs_embeds.device
    bsz, tgt_len = input_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    if past_key_values_length > 0:
        mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype, device=device), mask], dim=-1)
    combined_attention_mask = mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)
    bsz, src_len = attention_mask.size()
    expanded_mask = attention_mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    expanded_attn_mask = inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)
    combined_attention_mask = expanded_attn_mask + combined_attention_mask
    return combined_attention_mask


# Hugging Face transformers, models/bloom/modeling_bloom.py: build_alibi_tensor (6 heads: not a power of two)
def bloom_build_alibi_tensor(attention_mask_raw: i64[2, 9]) -> f32[12, 1, 9]:
    attention_mask = attention_mask_raw % 2
    num_heads = 6
    dtype = torch.float32
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(
        2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32
    )
    powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, device=attention_mask.device, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


# text-generation-inference, server/text_generation_server/utils/logits_process.py: batched_bincount
def tgi_batched_bincount(x: i64[4, 12], max_value: int = 10) -> i64[4, 10]:
    dim = 1
    target = torch.zeros(x.shape[0], max_value, dtype=x.dtype, device=x.device)
    values = torch.ones_like(x)
    target.scatter_add_(dim, x, values)
    return target


# Hugging Face transformers, pytorch_utils.py: Conv1D.forward (GPT-2's transposed linear layer)
def _conv1d(x, weight, bias, nf: int):
    size_out = x.size()[:-1] + (nf,)
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    x = x.view(size_out)
    return x


# Hugging Face transformers, models/gpt2/modeling_gpt2.py: GPT2MLP.forward (Conv1D, gelu_new as activations.py's
# NewGELUActivation writes it, Conv1D; no dropout)
def hf_gpt2_mlp(
    hidden_states: f32[2, 5, 16], c_fc_w: f32[16, 64], c_fc_b: f32[64], c_proj_w: f32[64, 16], c_proj_b: f32[16]
) -> f32[2, 5, 16]:
    c_fc_w, c_proj_w = c_fc_w * 0.25, c_proj_w * 0.125
    hidden_states = _conv1d(hidden_states, c_fc_w, c_fc_b, 64)
    input = hidden_states
    hidden_states = (
        0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
    )
    hidden_states = _conv1d(hidden_states, c_proj_w, c_proj_b, 16)
    return hidden_states
