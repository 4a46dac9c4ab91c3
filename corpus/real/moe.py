"""Mixture-of-experts blocks ported from Hugging Face transformers (Mixtral, Qwen2-MoE, DBRX): a router's top-k
experts, then per expert `torch.where` of the one-hot expert mask (index lists of data-dependent length), the routed
rows gathered, the expert MLP, and `index_add_` back into the output. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F


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


def _dbrx_router_forward(self, hidden_states):
    if self["training"] and self["moe_jitter_eps"] is not None:
        hidden_states *= torch.empty_like(hidden_states).uniform_(
            1.0 - self["moe_jitter_eps"], 1.0 + self["moe_jitter_eps"]
        )
    hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
    weights = F.linear(hidden_states, self["layer"]).softmax(dim=-1, dtype=torch.float32)
    top_weights, top_experts = torch.topk(weights, self["moe_top_k"], dim=-1)

    top_weights_scale = (
        torch.norm(top_weights, p=self["moe_normalize_expert_weights"], dim=-1, keepdim=True)
        if self["moe_normalize_expert_weights"] is not None
        else 1.0
    )
    top_weights = top_weights / top_weights_scale

    weights = weights.to(hidden_states.dtype)
    top_weights = top_weights.to(hidden_states.dtype)
    return weights, top_weights, top_experts


def _dbrx_expert_glu(self, x, expert_w1, expert_v1, expert_w2):
    gate_proj = x.matmul(expert_w1.t())
    up_proj = x.matmul(expert_v1.t())
    gate_proj = self["activation_fn"](gate_proj)
    intermediate_states = gate_proj * up_proj
    down_proj = intermediate_states.matmul(expert_w2)
    return down_proj


def _dbrx_experts_forward(self, x, weights, top_weights, top_experts):
    bsz, q_len, hidden_size = x.shape
    x = x.view(-1, hidden_size)
    out = torch.zeros_like(x)

    expert_mask = nn.functional.one_hot(top_experts, num_classes=self["moe_num_experts"]).permute(2, 1, 0)
    mlp = self["mlp"]
    # Chunk experts at once to avoid storing full parameter multiple times in autograd
    w1_chunked = mlp["w1"].view(mlp["moe_num_experts"], mlp["ffn_hidden_size"], mlp["hidden_size"]).chunk(
        self["moe_num_experts"], dim=0
    )
    v1_chunked = mlp["v1"].view(mlp["moe_num_experts"], mlp["ffn_hidden_size"], mlp["hidden_size"]).chunk(
        self["moe_num_experts"], dim=0
    )
    w2_chunked = mlp["w2"].view(mlp["moe_num_experts"], mlp["ffn_hidden_size"], mlp["hidden_size"]).chunk(
        self["moe_num_experts"], dim=0
    )
    w1_chunked = [w1.squeeze(dim=0) for w1 in w1_chunked]
    v1_chunked = [v1.squeeze(dim=0) for v1 in v1_chunked]
    w2_chunked = [w2.squeeze(dim=0) for w2 in w2_chunked]
    for expert_idx in range(0, self["moe_num_experts"]):
        topk_idx, token_idx = torch.where(expert_mask[expert_idx])
        if token_idx.shape[0] == 0:
            continue

        token_list = token_idx
        topk_list = topk_idx

        expert_tokens = x[None, token_list].reshape(-1, hidden_size)
        expert_out = (
            _dbrx_expert_glu(mlp, expert_tokens, w1_chunked[expert_idx], v1_chunked[expert_idx],
                             w2_chunked[expert_idx])
            * top_weights[token_list, topk_list, None]
        )

        out.index_add_(0, token_idx, expert_out)

    out = out.reshape(bsz, q_len, hidden_size)
    return out


# Hugging Face transformers, models/dbrx/modeling_dbrx.py: DbrxRouter.forward (moe_top_k 2,
# moe_normalize_expert_weights 1, eval mode so no jitter), DbrxExpertGLU.forward (silu) and DbrxExperts.forward (the
# per-expert loop over torch.where of the one-hot mask, index_add_), as DbrxFFN.forward chains them; 4 experts,
# hidden 8, ffn_hidden 6, batch 2 x 4 tokens; modules as dicts, nn.Linear(bias=False) as F.linear
def dbrx_router_experts(
    hidden_states: f32[2, 4, 8], router_w: f32[4, 8], w1: f32[24, 8], v1: f32[24, 8], w2: f32[24, 8]
) -> tuple[f32[2, 4, 8], f32[8, 4], f32[8, 2], i64[8, 2]]:
    router = {"training": False, "moe_jitter_eps": None, "layer": router_w, "moe_top_k": 2,
              "moe_normalize_expert_weights": 1}
    mlp = {"w1": w1 * 0.4, "v1": v1 * 0.4, "w2": w2 * 0.4, "moe_num_experts": 4, "ffn_hidden_size": 6,
           "hidden_size": 8, "activation_fn": F.silu}
    experts = {"moe_num_experts": 4, "mlp": mlp}
    weights, top_weights, top_experts = _dbrx_router_forward(router, hidden_states)
    out = _dbrx_experts_forward(experts, hidden_states, weights, top_weights, top_experts)
    return out, weights, top_weights, top_experts
