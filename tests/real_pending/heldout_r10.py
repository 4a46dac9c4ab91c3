"""Held-out real code of issue 14's tenth round that the functional engines refuse: Mixtral's sparse mixture-of-experts
block (`torch.where(mask)` with one argument: a data-dependent number of tokens per expert). The reference engine runs
it and matches PyTorch. (Hugging Face's dynamic-NTK rotary embedding, a conditional expression on a run-time value,
runs on every engine since conditional assignments became `if` statements: corpus/real/heldout10.py.) Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


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












