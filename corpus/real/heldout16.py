"""Held-out real code, issue 14's sixteenth round, the programs every engine runs (the round's other, Detectron2's
RotatedBoxes clip, is in corpus/real/detection_where.py): ncps' liquid time-constant (LTC) and closed-form
continuous-time (CfC) cells, flash-linear-attention's naive simple GLA (recurrent and chunked), Hugging Face's Qwen2-VL
multimodal rotary embedding and Mixtral's load-balancing loss, torch-optimizer's A2GradExp, timm's MARS, and Hugging
Face's DoLa layer contrast (a list indexed by `.item()`), torchvision's keypoint R-CNN loss (`torch.uint8`,
`torch.where(cond)`, `len` of its index list), Ultralytics' TaskAlignedAssigner (`torch.int8`) and torch-optimizer's
SWATS (`Tensor.allclose`; a dict changed under an `if` on a run-time value), which waited in tests/real_pending at
first. Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _ltc_sigmoid(self, v_pre, mu, sigma):
    v_pre = torch.unsqueeze(v_pre, -1)  # For broadcasting
    mues = v_pre - mu
    x = sigma * mues
    return torch.sigmoid(x)


def _ltc_ode_solver(self, inputs, state, elapsed_time):
    v_pre = state

    # We can pre-compute the effects of the sensory neurons here
    sensory_w_activation = self["make_positive_fn"](
        self["_params"]["sensory_w"]
    ) * _ltc_sigmoid(
        self, inputs, self["_params"]["sensory_mu"], self["_params"]["sensory_sigma"]
    )
    sensory_w_activation = (
        sensory_w_activation * self["_params"]["sensory_sparsity_mask"]
    )

    sensory_rev_activation = sensory_w_activation * self["_params"]["sensory_erev"]

    # Reduce over dimension 1 (=source sensory neurons)
    w_numerator_sensory = torch.sum(sensory_rev_activation, dim=1)
    w_denominator_sensory = torch.sum(sensory_w_activation, dim=1)

    # cm/t is loop invariant
    cm_t = self["make_positive_fn"](self["_params"]["cm"]) / (
        elapsed_time / self["_ode_unfolds"]
    )

    # Unfold the multiply ODE multiple times into one RNN step
    w_param = self["make_positive_fn"](self["_params"]["w"])
    for t in range(self["_ode_unfolds"]):
        w_activation = w_param * _ltc_sigmoid(
            self, v_pre, self["_params"]["mu"], self["_params"]["sigma"]
        )

        w_activation = w_activation * self["_params"]["sparsity_mask"]

        rev_activation = w_activation * self["_params"]["erev"]

        # Reduce over dimension 1 (=source neurons)
        w_numerator = torch.sum(rev_activation, dim=1) + w_numerator_sensory
        w_denominator = torch.sum(w_activation, dim=1) + w_denominator_sensory

        gleak = self["make_positive_fn"](self["_params"]["gleak"])
        numerator = cm_t * v_pre + gleak * self["_params"]["vleak"] + w_numerator
        denominator = cm_t + gleak + w_denominator

        # Avoid dividing by 0
        v_pre = numerator / (denominator + self["_epsilon"])

    return v_pre


def _ltc_map_inputs(self, inputs):
    if self["_input_mapping"] in ["affine", "linear"]:
        inputs = inputs * self["_params"]["input_w"]
    if self["_input_mapping"] == "affine":
        inputs = inputs + self["_params"]["input_b"]
    return inputs


def _ltc_map_outputs(self, state):
    output = state
    if self["motor_size"] < self["state_size"]:
        output = output[:, 0 : self["motor_size"]]  # slice

    if self["_output_mapping"] in ["affine", "linear"]:
        output = output * self["_params"]["output_w"]
    if self["_output_mapping"] == "affine":
        output = output + self["_params"]["output_b"]
    return output


def _ltc_cell_forward(self, inputs, states):
    # Regularly sampled mode (elapsed time = 1 second)
    elapsed_time = 1.0
    inputs = _ltc_map_inputs(self, inputs)

    next_state = _ltc_ode_solver(self, inputs, states, elapsed_time)

    outputs = _ltc_map_outputs(self, next_state)

    return outputs, next_state


# ncps (mlech26l/ncps), ncps/torch/ltc_cell.py: LTCCell.forward, _map_inputs, _ode_solver, _sigmoid and _map_outputs
# (fully connected wiring of 8 units, 3 sensory inputs, 4 motor outputs; ode_unfolds 6, epsilon 1e-8,
# implicit_param_constraints True, so make_positive_fn is softplus; affine input and output mappings), stepped over 5
# time steps of a batch of 2 from a zero state as the LTC layer steps it; the cell as a dict of its attributes, the
# parameters drawn from the cell's init ranges (erev and sensory_erev the wiring's +-1 polarities, masks all ones)
def ncps_ltc_cell(
    x: f32[2, 5, 3], gleak: f32[8], vleak: f32[8], cm: f32[8], sigma: f32[8, 8], mu: f32[8, 8], w: f32[8, 8],
    erev: f32[8, 8], sensory_sigma: f32[3, 8], sensory_mu: f32[3, 8], sensory_w: f32[3, 8], sensory_erev: f32[3, 8],
    input_w: f32[3], input_b: f32[3], output_w: f32[4], output_b: f32[4]
) -> tuple[f32[2, 5, 4], f32[2, 8]]:
    params = {
        "gleak": gleak.abs() * 0.999 + 0.001,
        "vleak": vleak * 0.2,
        "cm": cm * 0.1 + 0.5,
        "sigma": sigma * 2.5 + 5.5,
        "mu": mu * 0.25 + 0.55,
        "w": w.abs() * 0.999 + 0.001,
        "erev": (erev >= 0).float() * 2 - 1,
        "sensory_sigma": sensory_sigma * 2.5 + 5.5,
        "sensory_mu": sensory_mu * 0.25 + 0.55,
        "sensory_w": sensory_w.abs() * 0.999 + 0.001,
        "sensory_erev": (sensory_erev >= 0).float() * 2 - 1,
        "sparsity_mask": torch.ones(8, 8),
        "sensory_sparsity_mask": torch.ones(3, 8),
        "input_w": 1.0 + input_w * 0.1,
        "input_b": input_b * 0.1,
        "output_w": 1.0 + output_w * 0.1,
        "output_b": output_b * 0.1,
    }
    cell = {
        "make_positive_fn": F.softplus,
        "_input_mapping": "affine",
        "_output_mapping": "affine",
        "_ode_unfolds": 6,
        "_epsilon": 1e-8,
        "state_size": 8,
        "motor_size": 4,
        "_params": params,
    }
    batch_size, seq_len = x.size(0), x.size(1)
    h_state = torch.zeros((batch_size, 8))
    output_sequence = []
    for t in range(seq_len):
        inputs = x[:, t]
        h_out, h_state = _ltc_cell_forward(cell, inputs, h_state)
        output_sequence.append(h_out)
    readout = torch.stack(output_sequence, dim=1)
    return readout, h_state


def _lecun(x):
    return 1.7159 * torch.tanh(0.666 * x)


def _cfc_cell_forward(self, input, hx, ts):
    x = torch.cat([input, hx], 1)
    if self["backbone_layers"] > 0:
        x = self["backbone"](x)
    if self["sparsity_mask"] is not None:
        ff1 = F.linear(x, self["ff1"]["weight"] * self["sparsity_mask"], self["ff1"]["bias"])
    else:
        ff1 = F.linear(x, self["ff1"]["weight"], self["ff1"]["bias"])
    if self["mode"] == "pure":
        # Solution
        new_hidden = (
            -self["A"]
            * torch.exp(-ts * (torch.abs(self["w_tau"]) + torch.abs(ff1)))
            * ff1
            + self["A"]
        )
    else:
        # Cfc
        if self["sparsity_mask"] is not None:
            ff2 = F.linear(x, self["ff2"]["weight"] * self["sparsity_mask"], self["ff2"]["bias"])
        else:
            ff2 = F.linear(x, self["ff2"]["weight"], self["ff2"]["bias"])
        ff1 = torch.tanh(ff1)
        ff2 = torch.tanh(ff2)
        t_a = F.linear(x, self["time_a"]["weight"], self["time_a"]["bias"])
        t_b = F.linear(x, self["time_b"]["weight"], self["time_b"]["bias"])
        t_interp = torch.sigmoid(t_a * ts + t_b)
        if self["mode"] == "no_gate":
            new_hidden = ff1 + t_interp * ff2
        else:
            new_hidden = ff1 * (1.0 - t_interp) + t_interp * ff2
    return new_hidden, new_hidden


# ncps (mlech26l/ncps), ncps/torch/cfc_cell.py: CfCCell.forward in the default mode with a one-layer lecun_tanh
# backbone (LeCun.forward; input 4, hidden 8, backbone_units 16, no sparsity mask), stepped over 5 time steps of a
# batch of 2 with timespans 1.0 from a zero state; nn.Linear as F.linear, the nn.Sequential backbone as a function,
# the cell as a dict; weights at xavier_uniform_ scale (init_weights), biases at nn.Linear's
def ncps_cfc_cell(
    x: f32[2, 5, 4], bb_w: f32[16, 12], bb_b: f32[16], ff1_w: f32[8, 16], ff1_b: f32[8], ff2_w: f32[8, 16],
    ff2_b: f32[8], ta_w: f32[8, 16], ta_b: f32[8], tb_w: f32[8, 16], tb_b: f32[8]
) -> tuple[f32[2, 5, 8], f32[2, 8]]:
    xav_bb = math.sqrt(6.0 / (12 + 16))
    xav = math.sqrt(6.0 / (16 + 8))
    backbone = {"weight": bb_w * xav_bb, "bias": bb_b / math.sqrt(12)}
    cell = {
        "backbone_layers": 1,
        "backbone": lambda v: _lecun(F.linear(v, backbone["weight"], backbone["bias"])),
        "sparsity_mask": None,
        "mode": "default",
        "ff1": {"weight": ff1_w * xav, "bias": ff1_b / 4.0},
        "ff2": {"weight": ff2_w * xav, "bias": ff2_b / 4.0},
        "time_a": {"weight": ta_w * xav, "bias": ta_b / 4.0},
        "time_b": {"weight": tb_w * xav, "bias": tb_b / 4.0},
    }
    batch_size, seq_len = x.size(0), x.size(1)
    h_state = torch.zeros((batch_size, 8))
    output_sequence = []
    ts = 1.0
    for t in range(seq_len):
        inputs = x[:, t]
        h_out, h_state = _cfc_cell_forward(cell, inputs, h_state, ts)
        output_sequence.append(h_out)
    readout = torch.stack(output_sequence, dim=1)
    return readout, h_state


def _naive_chunk_simple_gla(q, k, v, g, initial_state=None, output_final_state=False, chunk_size=64, scale=None):
    q, k, v, g = (x.transpose(1, 2).to(torch.float32) for x in [q, k, v, g])
    if scale is None:
        scale = 1.0 / q.shape[-1] ** 0.5

    T = q.shape[-2]
    BT = chunk_size
    pad_len = (BT - (T % BT)) % BT
    if pad_len > 0:
        # Pad all tensors
        q = F.pad(q, (0, 0, 0, pad_len))
        k = F.pad(k, (0, 0, 0, pad_len))
        v = F.pad(v, (0, 0, 0, pad_len))
        g = F.pad(g, (0, pad_len))
    decay = g
    B, H, T1, K = q.shape
    V = v.shape[-1]
    q = q * scale
    q, k, v, decay = (
        x.reshape(x.shape[0], x.shape[1], x.shape[2] // chunk_size, chunk_size, x.shape[3])
        for x in [q, k, v, decay.unsqueeze(-1)]
    )
    decay = decay.squeeze(-1).cumsum(-1)
    L_mask = ((decay.unsqueeze(-1) - decay.unsqueeze(-2)).tril().exp().float()).tril()
    S = k.new_zeros(B, H, K, V)
    if initial_state is not None:
        S = initial_state
    o = torch.zeros_like(v)
    for i in range(0, T1 // chunk_size):
        q_i, k_i, v_i = q[:, :, i], k[:, :, i], v[:, :, i]
        attn = (q_i @ k_i.transpose(-1, -2) * L_mask[:, :, i])
        o_inter = (q_i * decay[:, :, i, :, None].exp()) @ S
        o[:, :, i] = o_inter + attn @ v_i
        S = S * decay[:, :, i, -1, None, None].exp() + \
            (k_i * (decay[:, :, i, -1, None] - decay[:, :, i]).exp()[..., None]).transpose(-1, -2) @ v_i
    if not output_final_state:
        S = None
    # unpad
    o = o.reshape(B, H, T1, V).transpose(1, 2)[:, :T]
    return o, S


def _naive_recurrent_simple_gla(q, k, v, g, scale=None, initial_state=None, output_final_state=True):
    dtype = q.dtype
    q, k, v, g = (x.transpose(1, 2).float() for x in (q, k, v, g))
    B, H, T, K = q.shape
    V = v.shape[-1]
    if scale is None:
        scale = K ** -0.5
    q = q * scale
    o = v.new_zeros(B, H, T, V)

    S = q.new_zeros(B, H, K, V)
    if initial_state is not None:
        S += initial_state

    for i in range(T):
        gate = g[:, :, i].exp()
        key = k[:, :, i]
        value = v[:, :, i]
        kv = key.unsqueeze(-1) * value.unsqueeze(-2)
        S = S * gate.unsqueeze(-1).unsqueeze(-1) + kv
        q_i = q[:, :, i, :]
        o_i = (q_i.unsqueeze(-1) * S).sum(-2)
        o[:, :, i] = o_i
    if not output_final_state:
        S = None
    return o.transpose(1, 2).to(dtype), S


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/simple_gla/naive.py: naive_recurrent_simple_gla and
# naive_chunk_simple_gla (chunk_size 4, so 6 steps are padded to 8) with an initial state and the final state
# ([B, T, H, K] layout; batch 2, 6 steps, 2 heads, key and value dims 8; one scalar gate per head and step, in log
# space through logsigmoid); einops' rearrange written as transpose and reshape
def fla_simple_gla(
    q: f32[2, 6, 2, 8], k: f32[2, 6, 2, 8], v: f32[2, 6, 2, 8], raw_g: f32[2, 6, 2], h0: f32[2, 2, 8, 8]
) -> tuple[f32[2, 6, 2, 8], f32[2, 2, 8, 8], f32[2, 6, 2, 8], f32[2, 2, 8, 8]]:
    g = F.logsigmoid(raw_g * 2 + 1)
    o_rec, s_rec = _naive_recurrent_simple_gla(q, k, v, g, initial_state=h0, output_final_state=True)
    o_chk, s_chk = _naive_chunk_simple_gla(q, k, v, g, initial_state=h0, output_final_state=True, chunk_size=4)
    return o_rec, s_rec, o_chk, s_chk


def _compute_default_rope_parameters(config=None, device=None, seq_len=None):
    base = config["rope_theta"]
    partial_rotary_factor = config.get("partial_rotary_factor", 1.0)
    head_dim = config.get("head_dim", None) or config["hidden_size"] // config["num_attention_heads"]
    dim = int(head_dim * partial_rotary_factor)

    attention_factor = 1.0  # Unused in this type of RoPE

    # Compute the inverse frequencies
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    return inv_freq, attention_factor


def _qwen2_vl_rotary_forward(self, x, position_ids):
    # In contrast to other models, Qwen2_VL has different position ids for the grids
    # So we expand the inv_freq to shape (3, ...)
    inv_freq_expanded = self["inv_freq"][None, None, :, None].float().expand(3, position_ids.shape[1], -1, 1)
    position_ids_expanded = position_ids[:, :, None, :].float()  # shape (3, bs, 1, positions)

    device_type = x.device.type if isinstance(x.device.type, str) and x.device.type != "mps" else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):  # Force float32
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(2, 3)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self["attention_scaling"]
        sin = emb.sin() * self["attention_scaling"]

    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _apply_multimodal_rotary_pos_emb(q, k, cos, sin, mrope_section, unsqueeze_dim=1):
    mrope_section = mrope_section * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(mrope_section, dim=-1))], dim=-1).unsqueeze(
        unsqueeze_dim
    )
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(mrope_section, dim=-1))], dim=-1).unsqueeze(
        unsqueeze_dim
    )

    q_embed = (q * cos) + (_rotate_half(q) * sin)
    k_embed = (k * cos) + (_rotate_half(k) * sin)
    return q_embed, k_embed


# Hugging Face transformers, models/qwen2_vl/modeling_qwen2_vl.py: Qwen2VLRotaryEmbedding.forward (3-D position ids
# for the temporal, height and width grids; inv_freq from modeling_rope_utils.py's
# _compute_default_rope_parameters, rope theta 1e6, head dim 16) and apply_multimodal_rotary_pos_emb with rotate_half
# (mrope_section [2, 3, 3]), as Qwen2VLAttention applies them to 4 query and 2 key-value heads; batch 2, 6 positions;
# the config and the module as dicts
def hf_qwen2_vl_mrope(
    q: f32[2, 4, 6, 16], k: f32[2, 2, 6, 16], position_ids: i64[3, 2, 6]
) -> tuple[f32[2, 4, 6, 16], f32[2, 2, 6, 16]]:
    config = {"rope_theta": 1000000.0, "hidden_size": 64, "num_attention_heads": 4,
              "rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}
    inv_freq, attention_scaling = _compute_default_rope_parameters(config, None)
    rotary_emb = {"inv_freq": inv_freq, "attention_scaling": attention_scaling}
    cos, sin = _qwen2_vl_rotary_forward(rotary_emb, q, position_ids)
    return _apply_multimodal_rotary_pos_emb(q, k, cos, sin, config["rope_scaling"]["mrope_section"])


def _load_balancing_loss_func(gate_logits, num_experts=None, top_k=2, attention_mask=None):
    if gate_logits is None or not isinstance(gate_logits, tuple):
        return 0

    if isinstance(gate_logits, tuple):
        compute_device = gate_logits[0].device
        concatenated_gate_logits = torch.cat([layer_gate.to(compute_device) for layer_gate in gate_logits], dim=0)

    routing_weights = torch.nn.functional.softmax(concatenated_gate_logits, dim=-1)

    _, selected_experts = torch.topk(routing_weights, top_k, dim=-1)

    expert_mask = torch.nn.functional.one_hot(selected_experts, num_experts)

    if attention_mask is None:
        # Compute the percentage of tokens routed to each experts
        tokens_per_expert = torch.mean(expert_mask.float(), dim=0)

        # Compute the average probability of routing to these experts
        router_prob_per_expert = torch.mean(routing_weights, dim=0)
    else:
        batch_size, sequence_length = attention_mask.shape
        num_hidden_layers = concatenated_gate_logits.shape[0] // (batch_size * sequence_length)

        # Compute the mask that masks all padding tokens as 0 with the same shape of expert_mask
        expert_attention_mask = (
            attention_mask[None, :, :, None, None]
            .expand((num_hidden_layers, batch_size, sequence_length, top_k, num_experts))
            .reshape(-1, top_k, num_experts)
            .to(compute_device)
        )

        # Compute the percentage of tokens routed to each experts
        tokens_per_expert = torch.sum(expert_mask.float() * expert_attention_mask, dim=0) / torch.sum(
            expert_attention_mask, dim=0
        )

        # Compute the mask that masks all padding tokens as 0 with the same shape of tokens_per_expert
        router_per_expert_attention_mask = (
            attention_mask[None, :, :, None]
            .expand((num_hidden_layers, batch_size, sequence_length, num_experts))
            .reshape(-1, num_experts)
            .to(compute_device)
        )

        # Compute the average probability of routing to these experts
        router_prob_per_expert = torch.sum(routing_weights * router_per_expert_attention_mask, dim=0) / torch.sum(
            router_per_expert_attention_mask, dim=0
        )

    overall_loss = torch.sum(tokens_per_expert * router_prob_per_expert.unsqueeze(0))
    return overall_loss * num_experts


# Hugging Face transformers, models/mixtral/modeling_mixtral.py: load_balancing_loss_func (8 local experts, top 2)
# with and without an attention mask, on the router logits of 2 layers (a tuple, as MixtralForCausalLM.forward passes
# outputs.router_logits) for batch 2 of 6 tokens; the padding mask made from the integer input (positions whose value
# is below 3 are padding), then multiplied by router_aux_loss_coef 0.02 as the model's forward does
def hf_mixtral_load_balancing_loss(
    router_logits0: f32[12, 8], router_logits1: f32[12, 8], mask_ids: i64[2, 6]
) -> tuple[f32[()], f32[()]]:
    num_experts, num_experts_per_tok, router_aux_loss_coef = 8, 2, 0.02
    attention_mask = (mask_ids >= 3).long()
    router_logits = (router_logits0 * 2, router_logits1 * 2)
    aux_loss = _load_balancing_loss_func(router_logits, num_experts, num_experts_per_tok, attention_mask)
    aux_loss_nomask = _load_balancing_loss_func(router_logits, num_experts, num_experts_per_tok)
    return router_aux_loss_coef * aux_loss, router_aux_loss_coef * aux_loss_nomask


# A2Grad (Deng et al., 2018), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/a2grad.py: A2GradExp.step
# (beta 10, lips 10, rho 0.5), four steps on two parameters; p.grad is each step's gradient slice; the per-parameter
# state as dicts, copy.deepcopy of the first gradient and of p.data as the original writes them
def a2grad_exp_steps(p1: f32[5, 6], p2: f32[8], grads1: f32[4, 5, 6], grads2: f32[4, 8]) -> tuple[f32[5, 6], f32[8]]:
    group = dict(beta=10, lips=10, rho=0.5, lr=None, params=[p1, p2])
    states = [{}, {}]
    for it in range(4):
        grads = [grads1[it], grads2[it]]
        for j, p in enumerate(group['params']):
            grad = grads[j]
            state = states[j]

            if len(state) == 0:
                state['step'] = 0
                state['alpha_k'] = 1
                state['v_k'] = 0
                state['avg_grad'] = copy.deepcopy(grad)
                state['x_k'] = copy.deepcopy(p.data)

            gamma_k = 2 * group['lips'] / (state['step'] + 1)

            avg_grad = state['avg_grad']
            avg_grad.mul_(state['step'])
            avg_grad.add_(grad)
            avg_grad.div_(state['step'] + 1)

            delta_k = torch.add(grad, avg_grad, alpha=-1)

            if state['step'] == 0:
                state['v_kk'] = torch.sum(delta_k * delta_k).item()
            else:
                state['v_kk'] *= group['rho']
                state['v_kk'] += (1 - group['rho']) * torch.sum(
                    delta_k * delta_k
                ).item()
            state['v_k'] = max([state['v_kk'], state['v_k']])

            h_k = math.sqrt((state['step'] + 1) * state['v_k'])

            alpha_k_1 = 2 / (state['step'] + 3)

            coef = -1 / (gamma_k + group['beta'] * h_k)
            x_k_1 = state['x_k']
            x_k_1.add_(grad, alpha=coef)

            p.data.mul_(1 - alpha_k_1)
            p.data.add_(x_k_1, alpha=alpha_k_1)
            p.data.add_(
                grad, alpha=(1 - alpha_k_1) * state['alpha_k'] * coef
            )

            state['alpha_k'] = alpha_k_1
            state['step'] += 1
    return p1, p2


def _mars_single_tensor_step(
        p: torch.Tensor,
        grad: torch.Tensor,
        exp_avg: torch.Tensor,
        exp_avg_sq: torch.Tensor,
        lr: float,
        weight_decay: float,
        beta1: float,
        beta2: float,
        last_grad: torch.Tensor,
        eps: float,
        step: int,
        gamma: float,
        mars_type: str,
        is_grad_2d: bool,
        optimize_1d: bool,
        lr_1d_factor: bool,
        betas_1d: Tuple[float, float],
        caution: bool,
):
    # optimize_1d ==> use MARS for 1d param, else use AdamW
    if optimize_1d or is_grad_2d:
        one_minus_beta1 = 1. - beta1
        if step == 1:
            # this is a timm addition, making first step more consistent when no grad history, otherwise tests fail
            c_t = grad
        else:
            c_t = (grad - last_grad).mul_(gamma * (beta1 / one_minus_beta1)).add_(grad)
            c_t_norm = torch.norm(c_t)
            if c_t_norm > 1.:
                c_t = c_t / c_t_norm
        exp_avg.mul_(beta1).add_(c_t, alpha=one_minus_beta1)
        if caution:
            mask = (exp_avg * grad > 0).to(grad.dtype)
            mask.div_(mask.mean().clamp_(min=1e-3))
            exp_avg = exp_avg * mask
        if mars_type == "adamw":
            exp_avg_sq.mul_(beta2).addcmul_(c_t, c_t, value=1. - beta2)
            bias_correction1 = 1.0 - beta1 ** step
            bias_correction2 = 1.0 - beta2 ** step
            denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
            update = p * weight_decay + (exp_avg / bias_correction1).div_(denom)
        elif mars_type == "lion":
            update = p * weight_decay + exp_avg.sign()
        else:
            assert False
        p.add_(update, alpha=-lr)
    else:
        beta1_1d, beta2_1d = betas_1d
        exp_avg.mul_(beta1_1d).add_(grad, alpha=1. - beta1_1d)
        exp_avg_sq.mul_(beta2_1d).addcmul_(grad, grad, value=1. - beta2_1d)
        bias_correction1 = 1.0 - beta1_1d ** step
        bias_correction2 = 1.0 - beta2_1d ** step
        denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
        if caution:
            mask = (exp_avg * grad > 0).to(grad.dtype)
            mask.div_(mask.mean().clamp_(min=1e-3))
            exp_avg = exp_avg * mask
        update = p * weight_decay + (exp_avg / bias_correction1).div_(denom)
        p.add_(update, alpha=-(lr * lr_1d_factor))
    return exp_avg, exp_avg_sq


# MARS (Yuan et al., 2024), timm (huggingface/pytorch-image-models), timm/optim/mars.py: Mars.step and
# _mars_single_tensor_step (lr 3e-3, betas (0.9, 0.99), eps 1e-8, weight decay 1e-2, gamma 0.025, mars_type "adamw",
# optimize_1d False, so the vector takes the AdamW branch, caution True), four steps on a matrix and a vector with
# fixed gradients (p.grad the step's slice, kept as last_grad); group and per-parameter state dicts as locals
def timm_mars_steps(p1: f32[6, 5], p2: f32[7], grads1: f32[4, 6, 5], grads2: f32[4, 7]) -> tuple[f32[6, 5], f32[7]]:
    betas = (0.9, 0.99)
    group = dict(lr=3e-3, betas=betas, eps=1e-8, weight_decay=1e-2, mars_type="adamw", gamma=0.025,
                 optimize_1d=False, lr_1d_factor=1.0, betas_1d=None or betas, caution=True, params=[p1, p2])
    states = [{}, {}]
    for it in range(4):
        grads = [grads1[it], grads2[it]]
        for j, p in enumerate(group['params']):
            grad = grads[j]

            state = states[j]
            # State initialization
            if len(state) <= 1:
                state['step'] = 0
                # Exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(p)
                # Last Gradient
                state['last_grad'] = torch.zeros_like(p)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(p)

            state['step'] += 1
            step = state['step']
            exp_avg = state['exp_avg']
            exp_avg_sq = state['exp_avg_sq']
            last_grad = state['last_grad']
            lr = group['lr']
            wd = group['weight_decay']
            beta1, beta2 = group['betas']
            is_grad_2d = grad.ndim >= 2

            # FIXME add multi-tensor (if usage warrants), make more standard
            _mars_single_tensor_step(
                p,
                grad,
                exp_avg,
                exp_avg_sq,
                lr,
                wd,
                beta1,
                beta2,
                last_grad,
                group['eps'],
                step,
                group['gamma'],
                mars_type=group['mars_type'],
                is_grad_2d=is_grad_2d,
                optimize_1d=group['optimize_1d'],
                lr_1d_factor=group['lr_1d_factor'],
                betas_1d=group['betas_1d'],
                caution=group['caution'],
            )

            state['last_grad'] = grad
    return p1, p2


def _relative_top_filter(
    scores: torch.FloatTensor,
    baseline_scores: torch.FloatTensor,
    relative_top: float = 0.1,
    filter_value: float = -float("Inf"),
    base_filter_value=-1e-3,
    min_tokens_to_keep: int = 1,
) -> torch.FloatTensor:
    scores_normalized = scores.log_softmax(dim=-1)
    baseline_scores_normalized = baseline_scores.log_softmax(dim=-1)
    sorted_logits, sorted_indices = torch.sort(scores_normalized, descending=True)
    min_thresh = sorted_logits[..., min_tokens_to_keep - 1]
    probs_max = torch.max(scores_normalized, dim=-1).values
    probs_thresh = probs_max + np.log(relative_top)
    probs_thresh = torch.min(min_thresh, probs_thresh)
    probs_thresh = probs_thresh.unsqueeze(-1)
    baseline_scores_normalized[scores_normalized < probs_thresh] = base_filter_value
    scores_normalized[scores_normalized < probs_thresh] = filter_value
    return scores_normalized, baseline_scores_normalized


def _dola_select_contrast(candidate_premature_layers, candidate_premature_logits, final_logits):
    if len(candidate_premature_layers) == 1:
        base_logits = candidate_premature_logits[candidate_premature_layers[0]]
        final_logits, base_logits = _relative_top_filter(final_logits, base_logits)
        logits = final_logits - base_logits
        return logits

    # 1. Stacking all premature_layers into a new dimension
    stacked_premature_layers = torch.stack([candidate_premature_logits[i] for i in candidate_premature_layers], dim=0)

    # 2. Calculate the softmax values for mature_layer and all premature_layers
    # shape: (batch_size, vocab_size)
    softmax_mature_layer = F.softmax(final_logits, dim=-1)
    # shape: (num_premature_layers, batch_size, vocab_size)
    softmax_premature_layers = F.softmax(stacked_premature_layers, dim=-1)

    # 3. Calculate the average distribution
    # shape: (num_premature_layers, batch_size, vocab_size)
    avg_dist = 0.5 * (softmax_mature_layer[None, :, :] + softmax_premature_layers)

    # 4. Calculate log-softmax for the KL divergence
    # shape: (batch_size, vocab_size)
    log_softmax_mature_layer = F.log_softmax(final_logits, dim=-1)
    # shape: (num_premature_layers, batch_size, vocab_size)
    log_softmax_premature_layers = F.log_softmax(stacked_premature_layers, dim=-1)

    # 5. Calculate the KL divergences and then the JS divergences
    # shape: (num_premature_layers, batch_size)
    kl1 = F.kl_div(log_softmax_mature_layer[None, :, :], avg_dist, reduction="none").mean(-1)
    # shape: (num_premature_layers, batch_size)
    kl2 = F.kl_div(log_softmax_premature_layers, avg_dist, reduction="none").mean(-1)
    js_divs = 0.5 * (kl1 + kl2)  # shape: (num_premature_layers, batch_size)

    # 6. Reduce the batchmean
    js_divs = js_divs.mean(-1)  # shape: (num_premature_layers,)
    premature_layer = candidate_premature_layers[int(js_divs.argmax().cpu().item())]

    base_logits = candidate_premature_logits[premature_layer]
    final_logits, base_logits = _relative_top_filter(final_logits, base_logits)
    logits = final_logits - base_logits
    return logits


# Hugging Face transformers, generation/utils.py: _dola_select_contrast and _relative_top_filter (relative_top 0.1),
# with the candidate-layer choice and the per-step part of _dola_decoding (dola_layers "low" of an 8-layer model
# without tied embeddings: layers [0, 2]; premature logits through the lm_head; greedy, no logits processors); the
# model a stand-in whose hidden states (embeddings and 8 layers, last position, batch 2) are inputs and whose lm_head
# (vocabulary 40, hidden 16) is a weight input; the final layer's logits are the lm_head of the last hidden state
def hf_dola_select_contrast(hidden_states: f32[9, 2, 16], lm_head_w: f32[40, 16]) -> tuple[f32[2, 40], i64[2]]:
    final_layer = 8
    start_layer = 0
    dola_layers = "low"
    if isinstance(dola_layers, str) and dola_layers == "low":
        if start_layer == final_layer // 2:
            candidate_premature_layers = [start_layer]
        else:
            candidate_premature_layers = (
                list(range(start_layer, final_layer // 2, 2))
                if final_layer <= 40
                else list(range(start_layer, 20, 2))
            )
    w = lm_head_w * 1.5
    final_logits = F.linear(hidden_states[final_layer], w).float()
    candidate_premature_logits = {}
    for candidate_premature_layer in candidate_premature_layers:
        candidate_premature_logits[candidate_premature_layer] = F.linear(hidden_states[candidate_premature_layer], w)
    next_token_logits = _dola_select_contrast(candidate_premature_layers, candidate_premature_logits, final_logits)
    next_tokens = torch.argmax(next_token_logits, dim=-1)
    return next_token_logits, next_tokens


def _keypoints_to_heatmap(keypoints, rois, heatmap_size):
    offset_x = rois[:, 0]
    offset_y = rois[:, 1]
    scale_x = heatmap_size / (rois[:, 2] - rois[:, 0])
    scale_y = heatmap_size / (rois[:, 3] - rois[:, 1])

    offset_x = offset_x[:, None]
    offset_y = offset_y[:, None]
    scale_x = scale_x[:, None]
    scale_y = scale_y[:, None]

    x = keypoints[..., 0]
    y = keypoints[..., 1]

    x_boundary_inds = x == rois[:, 2][:, None]
    y_boundary_inds = y == rois[:, 3][:, None]

    x = (x - offset_x) * scale_x
    x = x.floor().long()
    y = (y - offset_y) * scale_y
    y = y.floor().long()

    x[x_boundary_inds] = heatmap_size - 1
    y[y_boundary_inds] = heatmap_size - 1

    valid_loc = (x >= 0) & (y >= 0) & (x < heatmap_size) & (y < heatmap_size)
    vis = keypoints[..., 2] > 0
    valid = (valid_loc & vis).long()

    lin_ind = y * heatmap_size + x
    heatmaps = lin_ind * valid

    return heatmaps, valid


def _keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, keypoint_matched_idxs):
    # type: (Tensor, List[Tensor], List[Tensor], List[Tensor]) -> Tensor
    N, K, H, W = keypoint_logits.shape
    if H != W:
        raise ValueError(
            f"keypoint_logits height and width (last two elements of shape) should be equal. Instead got H = {H} and W = {W}"
        )
    discretization_size = H
    heatmaps = []
    valid = []
    for proposals_per_image, gt_kp_in_image, midx in zip(proposals, gt_keypoints, keypoint_matched_idxs):
        kp = gt_kp_in_image[midx]
        heatmaps_per_image, valid_per_image = _keypoints_to_heatmap(kp, proposals_per_image, discretization_size)
        heatmaps.append(heatmaps_per_image.view(-1))
        valid.append(valid_per_image.view(-1))

    keypoint_targets = torch.cat(heatmaps, dim=0)
    valid = torch.cat(valid, dim=0).to(dtype=torch.uint8)
    valid = torch.where(valid)[0]

    # torch.mean (in binary_cross_entropy_with_logits) doesn't
    # accept empty tensors, so handle it separately
    if keypoint_targets.numel() == 0 or len(valid) == 0:
        return keypoint_logits.sum() * 0

    keypoint_logits = keypoint_logits.view(N * K, H * W)

    keypoint_loss = F.cross_entropy(keypoint_logits[valid], keypoint_targets[valid])
    return keypoint_loss


# torchvision (pytorch/vision), torchvision/models/detection/roi_heads.py: keypointrcnn_loss with keypoints_to_heatmap
# (two images with 5 and 4 proposals, 3 gt instances of 4 keypoints each, heatmap 14x14); proposals and keypoints
# made integer-valued from the raw inputs (proposal corners in [0, 24), keypoints in [0, 24), visibility from a
# threshold), so that some keypoints fall outside their proposal and some lie exactly on its right or bottom edge
def tv_keypointrcnn_loss(
    keypoint_logits: f32[9, 4, 14, 14], raw_props1: f32[5, 4], raw_props2: f32[4, 4], raw_kps1: f32[3, 4, 3],
    raw_kps2: f32[3, 4, 3], midx1: i64[5], midx2: i64[4]
) -> f32[()]:
    proposals = []
    for raw in (raw_props1, raw_props2):
        x1 = (raw[:, 0] * 6 + 6).floor()
        y1 = (raw[:, 1] * 6 + 6).floor()
        x2 = x1 + (raw[:, 2].abs() * 8).floor() + 4
        y2 = y1 + (raw[:, 3].abs() * 8).floor() + 4
        proposals.append(torch.stack([x1, y1, x2, y2], dim=1))
    gt_keypoints = []
    for raw in (raw_kps1, raw_kps2):
        kx = (raw[..., 0] * 12 + 12).floor()
        ky = (raw[..., 1] * 12 + 12).floor()
        kv = (raw[..., 2] > -0.5).float() * 2
        gt_keypoints.append(torch.stack([kx, ky, kv], dim=-1))
    matched_idxs = [midx1 % 3, midx2 % 3]
    return _keypointrcnn_loss(keypoint_logits, proposals, gt_keypoints, matched_idxs)


def _tal_select_topk_candidates(self, metrics, topk_mask=None):
    # (b, max_num_obj, topk)
    topk_metrics, topk_idxs = torch.topk(metrics, self["topk"], dim=-1, largest=True)
    if topk_mask is None:
        topk_mask = (topk_metrics.max(-1, keepdim=True)[0] > self["eps"]).expand_as(topk_idxs)
    # (b, max_num_obj, topk)
    topk_idxs.masked_fill_(~topk_mask, 0)

    # (b, max_num_obj, topk, h*w) -> (b, max_num_obj, h*w)
    count_tensor = torch.zeros(metrics.shape, dtype=torch.int8, device=topk_idxs.device)
    ones = torch.ones_like(topk_idxs[:, :, :1], dtype=torch.int8, device=topk_idxs.device)
    for k in range(self["topk"]):
        # Expand topk_idxs for each value of k and add 1 at the specified positions
        count_tensor.scatter_add_(-1, topk_idxs[:, :, k : k + 1], ones)
    # Filter invalid bboxes
    count_tensor.masked_fill_(count_tensor > 1, 0)

    return count_tensor.to(metrics.dtype)


def _tal_get_targets(self, gt_labels, gt_bboxes, target_gt_idx, fg_mask):
    # Assigned target labels, (b, 1)
    batch_ind = torch.arange(end=self["bs"], dtype=torch.int64, device=gt_labels.device)[..., None]
    target_gt_idx = target_gt_idx + batch_ind * self["n_max_boxes"]  # (b, h*w)
    target_labels = gt_labels.long().flatten()[target_gt_idx]  # (b, h*w)

    # Assigned target boxes, (b, max_num_obj, 4) -> (b, h*w, 4)
    target_bboxes = gt_bboxes.view(-1, gt_bboxes.shape[-1])[target_gt_idx]

    # Assigned target scores
    target_labels.clamp_(0)

    # 10x faster than F.one_hot()
    target_scores = torch.zeros(
        (target_labels.shape[0], target_labels.shape[1], self["num_classes"]),
        dtype=torch.int64,
        device=target_labels.device,
    )  # (b, h*w, 80)
    target_scores.scatter_(2, target_labels.unsqueeze(-1), 1)

    fg_scores_mask = fg_mask[:, :, None].repeat(1, 1, self["num_classes"])  # (b, h*w, 80)
    target_scores = torch.where(fg_scores_mask > 0, target_scores, 0)

    return target_labels, target_bboxes, target_scores


# Ultralytics (ultralytics/ultralytics), ultralytics/utils/tal.py: TaskAlignedAssigner.select_topk_candidates (topk 4,
# with the topk_mask get_pos_mask passes, mask_gt expanded) and get_targets (5 classes), chained as get_pos_mask,
# select_highest_overlaps (its single-assignment path: fg_mask and argmax) and _forward chain them; batch 2, 3 gt
# slots (padding slots where mask_gt is 0), 24 anchors; the assigner as a dict of its attributes; the align metric
# made positive from the raw input and the in-gts mask left out
def ultralytics_tal_topk_targets(
    raw_metric: f32[2, 3, 24], raw_mask_gt: f32[2, 3, 1], gt_labels: i64[2, 3, 1], gt_bboxes: f32[2, 3, 4]
) -> tuple[i64[2, 24], f32[2, 24, 4], i64[2, 24, 5], f32[2, 24]]:
    self = {"topk": 4, "num_classes": 5, "bs": 2, "n_max_boxes": 3, "eps": 1e-9}
    mask_gt = (raw_mask_gt > -0.4).float()
    align_metric = raw_metric.abs() * mask_gt
    mask_topk = _tal_select_topk_candidates(self, align_metric, topk_mask=mask_gt.expand(-1, -1, self["topk"]).bool())
    mask_pos = mask_topk * mask_gt
    fg_mask = mask_pos.sum(-2)
    target_gt_idx = mask_pos.argmax(-2)
    target_labels, target_bboxes, target_scores = _tal_get_targets(self, gt_labels % 5, gt_bboxes, target_gt_idx, fg_mask)
    return target_labels, target_bboxes, target_scores, fg_mask


# SWATS (Keskar and Socher, 2017), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/swats.py: SWATS.step
# (lr 1e-2, betas (0.9, 0.999), eps 1e-3, weight decay 1e-3, amsgrad off, nesterov off, adamd_bias_correction off),
# four steps on two parameters; p.grad is each step's gradient slice, which the weight decay updates in place as the
# original does to w.grad.data; the group and per-parameter state as dicts (the Adam-to-SGD switch is tested every
# step and, with these gradients, not taken)
def swats_steps(p1: f32[6, 5], p2: f32[7], grads1: f32[4, 6, 5], grads2: f32[4, 7]) -> tuple[f32[6, 5], f32[7]]:
    group = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-3, phase='ADAM', weight_decay=1e-3, amsgrad=False,
                 nesterov=False, adamd_bias_correction=False, params=[p1, p2])
    states = [{}, {}]
    for it in range(4):
        grads = [grads1[it], grads2[it]]
        for j, w in enumerate(group['params']):
            grad = grads[j]

            amsgrad = group['amsgrad']

            state = states[j]

            # state initialization
            if len(state) == 0:
                state['step'] = 0
                # exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # moving average for the non-orthogonal projection scaling
                state['exp_avg2'] = w.new(1).fill_(0)
                if amsgrad:
                    # maintains max of all exp. moving avg.
                    # of sq. grad. values
                    state['max_exp_avg_sq'] = torch.zeros_like(
                        w.data, memory_format=torch.preserve_format
                    )

            exp_avg, exp_avg2, exp_avg_sq = (
                state['exp_avg'],
                state['exp_avg2'],
                state['exp_avg_sq'],
            )

            if amsgrad:
                max_exp_avg_sq = state['max_exp_avg_sq']
            beta1, beta2 = group['betas']

            state['step'] += 1

            if group['weight_decay'] != 0:
                grad.add_(w.data, alpha=group['weight_decay'])

            # if its SGD phase, take an SGD update and continue
            if group['phase'] == 'SGD':
                if 'momentum_buffer' not in state:
                    buf = state['momentum_buffer'] = torch.clone(
                        grad
                    ).detach()
                else:
                    buf = state['momentum_buffer']
                    buf.mul_(beta1).add_(grad)
                    grad = buf

                grad.mul_(1 - beta1)
                if group['nesterov']:
                    grad.add_(buf, alpha=beta1)

                w.data.add_(grad, alpha=-group['lr'])
                continue

            # decay the first and second moment running average coefficient
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if amsgrad:
                # maintains the maximum of all 2nd
                # moment running avg. till now
                torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                # use the max. for normalizing running avg. of gradient
                denom = max_exp_avg_sq.sqrt().add_(group['eps'])
            else:
                denom = exp_avg_sq.sqrt().add_(group['eps'])

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            if group['adamd_bias_correction']:
                step_size = group['lr'] * (bias_correction2 ** 0.5)
            else:
                step_size = (
                    group['lr']
                    * (bias_correction2 ** 0.5)
                    / bias_correction1
                )

            p = -step_size * (exp_avg / denom)
            w.data.add_(p)

            p_view = p.view(-1)
            pg = p_view.dot(grad.view(-1))

            if pg != 0:
                # the non-orthognal scaling estimate
                scaling = p_view.dot(p_view) / -pg
                exp_avg2.mul_(beta2).add_(scaling, alpha=1 - beta2)

                # bias corrected exponential average
                corrected_exp_avg = exp_avg2 / bias_correction2

                # checking criteria of switching to SGD training
                if (
                    state['step'] > 1
                    and corrected_exp_avg.allclose(scaling, rtol=1e-6)
                    and corrected_exp_avg > 0
                ):
                    group['phase'] = 'SGD'
                    group['lr'] = corrected_exp_avg.item()
    return p1, p2
