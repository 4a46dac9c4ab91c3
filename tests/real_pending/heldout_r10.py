"""Held-out real code of issue 14's tenth round that the functional engines refuse: Hugging Face's dynamic-NTK rotary
embedding (a conditional expression on `int(torch.max(position_ids)) + 1`, a run-time value there) and Mixtral's
sparse mixture-of-experts block (`torch.where(mask)` with one argument: a data-dependent number of tokens per
expert). The reference engine runs both and matches PyTorch. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


def _dynamic_ntk_inv_freq(base, dim, max_position_embeddings, factor, seq_len=None):
    attention_factor = 1.0
    seq_len = seq_len if seq_len is not None and seq_len > max_position_embeddings else max_position_embeddings
    base = base * ((factor * seq_len / max_position_embeddings) - (factor - 1)) ** (dim / (dim - 2))
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    return inv_freq, attention_factor


# Hugging Face transformers, modeling_rope_utils.py _compute_dynamic_ntk_parameters and LlamaRotaryEmbedding.forward
# (dynamic rope type: the frequencies grow with the longest position seen; the product runs in float32 under a
# disabled autocast)
@torch.no_grad()
def hf_dynamic_ntk_rope(x: f32[2, 20, 16]) -> tuple[f32[2, 20, 16], f32[2, 20, 16]]:
    max_position_embeddings = 8
    position_ids = torch.arange(20).unsqueeze(0).expand(2, -1)
    seq_len = int(torch.max(position_ids)) + 1
    inv_freq, attention_scaling = _dynamic_ntk_inv_freq(10000.0, 16, max_position_embeddings, 2.0, seq_len=seq_len)
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    device_type = x.device.type
    device_type = device_type if isinstance(device_type, str) and device_type != "mps" else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos()
        sin = emb.sin()
    cos = cos * attention_scaling
    sin = sin * attention_scaling
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _expert(x, w1, w2, w3):
    current_hidden_states = F.silu(F.linear(x, w1)) * F.linear(x, w3)
    return F.linear(current_hidden_states, w2)


# Hugging Face transformers, models/mixtral/modeling_mixtral.py: MixtralSparseMoeBlock.forward (4 experts, top 2)
def mixtral_sparse_moe(
    hidden_states: f32[2, 5, 8], gate: f32[4, 8], w1: f32[4, 12, 8], w2: f32[4, 8, 12], w3: f32[4, 12, 8]
) -> tuple[f32[2, 5, 8], f32[10, 4]]:
    num_experts = 4
    top_k = 2
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    hidden_states = hidden_states.view(-1, hidden_dim)
    router_logits = F.linear(hidden_states, gate)
    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    routing_weights = routing_weights.to(hidden_states.dtype)
    final_hidden_states = torch.zeros(
        (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
    )
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=num_experts).permute(2, 1, 0)
    for expert_idx in range(num_experts):
        idx, top_x = torch.where(expert_mask[expert_idx])
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current_hidden_states = _expert(current_state, w1[expert_idx], w2[expert_idx], w3[expert_idx])
        current_hidden_states = current_hidden_states * routing_weights[top_x, idx, None]
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))
    final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
    return final_hidden_states, router_logits












