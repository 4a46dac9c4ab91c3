"""Held-out real code, issue 14's fifteenth round: Detectron2's Boxes.clip and pairwise_ioa, MMDetection's
bbox_rescale, torchvision's box_convert, PyTorch's own LSTM (with projections, bidirectional) and GRU decompositions, a
Mamba-2 decode step, Hugging Face's YaRN rotary embedding, Qwen2-MoE's sparse MoE block and Bark's EOS prioritizer,
timm's NAdamW, torch-optimizer's SGDW and pytorch_optimizer's Tiger. Inputs arrive uniform in [-1, 1); integer inputs
in [0, 10)."""
from __future__ import annotations

import math
from functools import partial

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _gather_params(params, has_biases, has_projections):
    if has_biases and has_projections:
        group_size = 5
    elif has_biases:
        group_size = 4
    elif has_projections:
        group_size = 3
    else:
        group_size = 2

    if len(params) % group_size != 0:
        raise AssertionError(
            f"len(params)={len(params)} is not divisible by group_size={group_size}"
        )
    return [
        tuple(params[i : i + group_size]) for i in range(0, len(params), group_size)
    ]


def _params_hiddens(params, hiddens, i, bidirectional):
    if bidirectional:
        cur_params, cur_hidden = params[2 * i], hiddens[2 * i]
        bidir_params, bidir_hidden = params[2 * i + 1], hiddens[2 * i + 1]
    else:
        cur_params, cur_hidden = params[i], hiddens[i]
        bidir_params, bidir_hidden = None, None

    return cur_params, cur_hidden, bidir_params, bidir_hidden


def _rnn_helper(
    input,
    hidden,
    params,
    has_biases,
    num_layers,
    dropout,
    train,
    bidirectional,
    batch_first,
    layer_fn,
):
    input = input.transpose(0, 1) if batch_first else input
    final_hiddens = []

    for i in range(num_layers):
        cur_params, cur_hidden, bidir_params, bidir_hidden = _params_hiddens(
            params, hidden, i, bidirectional
        )
        dropout = dropout if (train and num_layers < i - 1) else 0.0
        fwd_inp, fwd_hidden = layer_fn(input, cur_hidden, cur_params, has_biases)
        final_hiddens.append(fwd_hidden)

        if bidirectional:
            bwd_inp, bwd_hidden = layer_fn(
                input, bidir_hidden, bidir_params, has_biases, reverse=True
            )
            final_hiddens.append(bwd_hidden)

        if bidirectional:
            input = torch.cat([fwd_inp, bwd_inp], fwd_inp.dim() - 1)  # type: ignore[possibly-undefined]
        else:
            input = fwd_inp

        if dropout != 0 and train and i < num_layers - 1:
            input = torch.dropout(input, dropout, train=True)

    input = input.transpose(0, 1) if batch_first else input
    return input, final_hiddens


def _one_layer_rnn(inp, hidden, params, has_biases, hidden_fn, reverse=False):
    ih_weight = params[0]
    hh_weight = params[1]
    ih_bias = params[2] if has_biases else None
    hh_bias = params[3] if has_biases else None

    precomputed_input = F.linear(inp, ih_weight, ih_bias)
    precomputed_input = precomputed_input.flip(0) if reverse else precomputed_input
    cur_hidden = hidden.unsqueeze(0)
    step_output = []
    for i in precomputed_input:
        cur_hidden = hidden_fn(i, cur_hidden, ih_weight, ih_bias, hh_weight, hh_bias)
        step_output.append(cur_hidden)

    if reverse:
        step_output.reverse()

    out = torch.cat(step_output, 0)

    return out, cur_hidden.squeeze(0)


def _gru_cell(inp, cur_hidden, ih_weight, ih_bias, hh_weight, hh_bias):
    chunked_igates = inp.chunk(3, 1)
    chunked_hgates = F.linear(cur_hidden, hh_weight, hh_bias).chunk(3, 2)
    reset_gate = (chunked_hgates[0] + chunked_igates[0]).sigmoid()
    input_gate = (chunked_hgates[1] + chunked_igates[1]).sigmoid()
    new_gate = (chunked_igates[2] + (chunked_hgates[2] * reset_gate)).tanh()
    return (cur_hidden - new_gate) * input_gate + new_gate


# PyTorch, torch/_decomp/decompositions.py: gru_impl (aten.gru.input's decomposition) with _rnn_helper,
# partial(one_layer_rnn, hidden_fn=gru_cell); two layers with biases (input 5, hidden 8, batch 3, 6 steps)
def torch_decomp_gru_2layer(
    input: f32[6, 3, 5], hx: f32[2, 3, 8], w_ih0: f32[24, 5], w_ih1: f32[24, 8], w_hh: f32[2, 24, 8],
    b_ih: f32[2, 24], b_hh: f32[2, 24]
) -> tuple[f32[6, 3, 8], f32[2, 3, 8]]:
    params = [w_ih0, w_hh[0], b_ih[0], b_hh[0], w_ih1, w_hh[1], b_ih[1], b_hh[1]]
    has_biases, num_layers, dropout, train, bidirectional, batch_first = True, 2, 0.0, False, False, False
    params = _gather_params(params, has_biases, False)
    out, final_hiddens = _rnn_helper(
        input,
        hx.unbind(0),
        params,
        has_biases,
        num_layers,
        dropout,
        train,
        bidirectional,
        batch_first,
        partial(_one_layer_rnn, hidden_fn=_gru_cell),
    )
    return out, torch.stack(final_hiddens, 0)


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


