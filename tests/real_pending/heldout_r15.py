"""Held-out real code, issue 14's fifteenth round: Detectron2's Boxes.clip and pairwise_ioa, MMDetection's
bbox_rescale, torchvision's box_convert, PyTorch's own LSTM (with projections, bidirectional) and GRU decompositions, a
Mamba-2 decode step, Hugging Face's YaRN rotary embedding, Qwen2-MoE's sparse MoE block and Bark's EOS prioritizer,
timm's NAdamW, torch-optimizer's SGDW and pytorch_optimizer's Tiger. Inputs arrive uniform in [-1, 1); integer inputs
in [0, 10). Here: the Qwen2-MoE block, refused by the functional and optimized engines (`torch.where(cond)`, a
data-dependent shape); the other programs of the round are in corpus/real/heldout15.py."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def _qwen2moe_mlp(x, gate_proj, up_proj, down_proj):
    return F.linear(F.silu(F.linear(x, gate_proj)) * F.linear(x, up_proj), down_proj)


# Hugging Face transformers, models/qwen2_moe/modeling_qwen2_moe.py: Qwen2MoeSparseMoeBlock.forward (softmax router,
# top-2 of 4 experts without renormalization, one_hot expert mask, torch.where and index_add_ per expert, a shared
# expert behind a sigmoid gate) with Qwen2MoeMLP; hidden 8, expert intermediate 6, shared 12, batch 2, 5 tokens
def hf_qwen2_moe_block(
    hidden_states: f32[2, 5, 8], gate_w: f32[4, 8], gate_proj: f32[4, 6, 8], up_proj: f32[4, 6, 8],
    down_proj: f32[4, 8, 6], shared_gate_proj: f32[12, 8], shared_up_proj: f32[12, 8], shared_down_proj: f32[8, 12],
    shared_expert_gate_w: f32[1, 8]
) -> tuple[f32[2, 5, 8], f32[10, 4]]:
    num_experts, top_k, norm_topk_prob = 4, 2, False
    batch_size, sequence_length, hidden_dim = hidden_states.shape
    hidden_states = hidden_states.view(-1, hidden_dim)
    # router_logits: (batch * sequence_length, n_experts)
    router_logits = F.linear(hidden_states, gate_w)

    routing_weights = F.softmax(router_logits, dim=1, dtype=torch.float)
    routing_weights, selected_experts = torch.topk(routing_weights, top_k, dim=-1)
    if norm_topk_prob:
        routing_weights /= routing_weights.sum(dim=-1, keepdim=True)
    # we cast back to the input dtype
    routing_weights = routing_weights.to(hidden_states.dtype)

    final_hidden_states = torch.zeros(
        (batch_size * sequence_length, hidden_dim), dtype=hidden_states.dtype, device=hidden_states.device
    )

    # One hot encode the selected experts to create an expert mask
    # this will be used to easily index which expert is going to be sollicitated
    expert_mask = torch.nn.functional.one_hot(selected_experts, num_classes=num_experts).permute(2, 1, 0)

    # Loop over all available experts in the model and perform the computation on each expert
    for expert_idx in range(num_experts):
        idx, top_x = torch.where(expert_mask[expert_idx])

        # Index the correct hidden states and compute the expert hidden state for
        # the current expert. We need to make sure to multiply the output hidden
        # states by `routing_weights` on the corresponding tokens (top-1 and top-2)
        current_state = hidden_states[None, top_x].reshape(-1, hidden_dim)
        current_hidden_states = _qwen2moe_mlp(
            current_state, gate_proj[expert_idx], up_proj[expert_idx], down_proj[expert_idx]
        ) * routing_weights[top_x, idx, None]

        # However `index_add_` only support torch tensors for indexing so we'll use
        # the `top_x` tensor instead.
        final_hidden_states.index_add_(0, top_x, current_hidden_states.to(hidden_states.dtype))

    shared_expert_output = _qwen2moe_mlp(hidden_states, shared_gate_proj, shared_up_proj, shared_down_proj)

    shared_expert_output = F.sigmoid(F.linear(hidden_states, shared_expert_gate_w)) * shared_expert_output

    final_hidden_states = final_hidden_states + shared_expert_output

    final_hidden_states = final_hidden_states.reshape(batch_size, sequence_length, hidden_dim)
    return final_hidden_states, router_logits


