"""Held-out real code, issue 14's seventeenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout17.py): Muon (bfloat16); Phi-3 LongRoPE, which every engine runs on the goldens' inputs, but whose
plan is specialized for the arm of `if seq_len > original_max_position_embeddings` that seed 0 takes (the corpus's
other seeds take the other arm). Pending at first and in corpus/real/heldout17.py now: mmdetection's EIoU loss and
Prodigy. Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _zeropower_via_newtonschulz5(G: torch.Tensor, steps: int) -> torch.Tensor:
    assert G.ndim >= 2  # batched Muon implementation by @scottjmaddox, and put into practice in the record by @YouJiacheng
    a, b, c = (3.4445, -4.7750, 2.0315)
    X = G.bfloat16()
    if G.size(-2) > G.size(-1):
        X = X.mT

    # Ensure spectral norm is at most 1
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    # Perform the NS iterations
    for _ in range(steps):
        A = X @ X.mT
        B = b * A + c * A @ A  # quintic computation strategy adapted from suggestion by @jxbz, @leloykun, and @YouJiacheng
        X = a * X + B @ X

    if G.size(-2) > G.size(-1):
        X = X.mT
    return X


def _muon_update(grad, momentum, beta=0.95, ns_steps=5, nesterov=True):
    momentum.lerp_(grad, 1 - beta)
    update = grad.lerp_(momentum, beta) if nesterov else momentum
    if update.ndim == 4:  # for the case of conv filters
        update = update.view(len(update), -1)
    update = _zeropower_via_newtonschulz5(update, steps=ns_steps)
    update *= max(1, grad.size(-2) / grad.size(-1)) ** 0.5
    return update


# Muon (KellerJordan/Muon), muon.py: zeropower_via_newtonschulz5, muon_update and SingleDeviceMuon.step (lr 0.02,
# weight_decay 0.01, momentum 0.95), two steps on a wide [8, 12] and a tall [12, 8] parameter (the tall one goes
# through the .mT branch); p.grad is each step's gradient (the raw gradient times 1 + 0.5 * step, fresh each step,
# since muon_update's lerp_ writes into p.grad); the @torch.no_grad decorator and closure left out; the state as dicts
def muon_steps(p1: f32[8, 12], p2: f32[12, 8], g1: f32[8, 12], g2: f32[12, 8]) -> tuple[f32[8, 12], f32[12, 8]]:
    group = {"params": [p1, p2], "lr": 0.02, "weight_decay": 0.01, "momentum": 0.95}
    raw_grads = [g1, g2]
    states = [{}, {}]
    for step in range(2):
        for j, p in enumerate(group["params"]):
            grad = raw_grads[j] * (1.0 + 0.5 * step)
            state = states[j]
            if len(state) == 0:
                state["momentum_buffer"] = torch.zeros_like(p)
            update = _muon_update(grad, state["momentum_buffer"], beta=group["momentum"])
            p.mul_(1 - group["lr"] * group["weight_decay"])
            p.add_(update.reshape(p.shape), alpha=-group["lr"])
    return p1, p2


def _compute_longrope_parameters(config, device, seq_len=None, **rope_kwargs):
    base = config["rope_theta"]
    partial_rotary_factor = config["partial_rotary_factor"] if "partial_rotary_factor" in config else 1.0
    head_dim = config.get("head_dim", config["hidden_size"] // config["num_attention_heads"])
    dim = int(head_dim * partial_rotary_factor)
    long_factor = config["rope_scaling"]["long_factor"]
    short_factor = config["rope_scaling"]["short_factor"]
    factor = config["rope_scaling"].get("factor")
    attention_factor = config["rope_scaling"].get("attention_factor")

    # NOTE: Phi3 (and potentially other models) modify `max_position_embeddings` and have a
    # `original_max_position_embeddings` field containing the pretrained value. They use the ratio between these two
    # values to compute the default attention scaling factor, instead of using `factor`.
    if "original_max_position_embeddings" in config:
        original_max_position_embeddings = config["original_max_position_embeddings"]
        factor = config["max_position_embeddings"] / config["original_max_position_embeddings"]
    else:
        original_max_position_embeddings = config["max_position_embeddings"]

    # Sets the attention factor as suggested in the paper
    if attention_factor is None:
        if factor <= 1.0:
            attention_factor = 1.0
        else:
            attention_factor = math.sqrt(1 + math.log(factor) / math.log(original_max_position_embeddings))

    # Compute the inverse frequencies -- scaled based on the target sequence length
    if seq_len and seq_len > original_max_position_embeddings:
        ext_factors = torch.tensor(long_factor, dtype=torch.float32, device=device)
    else:
        ext_factors = torch.tensor(short_factor, dtype=torch.float32, device=device)
    inv_freq_shape = torch.arange(0, dim, 2, dtype=torch.int64, device=device).float() / dim
    inv_freq = 1.0 / (ext_factors * base**inv_freq_shape)

    return inv_freq, attention_factor


def _longrope_frequency_update(self, position_ids, device):
    seq_len = torch.max(position_ids) + 1
    if "original_max_position_embeddings" in self["config"]:
        original_max_position_embeddings = self["config"]["original_max_position_embeddings"]
    else:
        original_max_position_embeddings = self["config"]["max_position_embeddings"]
    if seq_len > original_max_position_embeddings:
        if "long_inv_freq" not in self:
            self["long_inv_freq"], _ = _compute_longrope_parameters(
                self["config"], device, seq_len=original_max_position_embeddings + 1
            )
        self["inv_freq"] = self["long_inv_freq"]
    else:
        # This .to() is needed if the model has been moved to a device after being initialized (because
        # the buffer is automatically moved, but not the original copy)
        self["original_inv_freq"] = self["original_inv_freq"].to(device)
        self["inv_freq"] = self["original_inv_freq"]


def _rotary_forward(self, x, position_ids):
    if "dynamic" in self["rope_type"]:
        _longrope_frequency_update(self, position_ids, device=x.device)

    inv_freq_expanded = self["inv_freq"][None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
    position_ids_expanded = position_ids[:, None, :].float()
    device_type = x.device.type if isinstance(x.device.type, str) and x.device.type != "mps" else "cpu"
    with torch.autocast(device_type=device_type, enabled=False):  # Force float32
        freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self["attention_scaling"]
        sin = emb.sin() * self["attention_scaling"]
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _rotate_half(x):
    """Rotates half the hidden dims of the input."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def _apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)

    rotary_dim = cos.shape[-1]
    q_rot, q_pass = q[..., :rotary_dim], q[..., rotary_dim:]
    k_rot, k_pass = k[..., :rotary_dim], k[..., rotary_dim:]

    q_embed = torch.cat([(q_rot * cos) + (_rotate_half(q_rot) * sin), q_pass], dim=-1)
    k_embed = torch.cat([(k_rot * cos) + (_rotate_half(k_rot) * sin), k_pass], dim=-1)
    return q_embed, k_embed


# Hugging Face transformers, modeling_rope_utils.py: _compute_longrope_parameters, and models/phi3/modeling_phi3.py:
# Phi3RotaryEmbedding (__init__, _longrope_frequency_update and forward, rope_type "longrope" so the dynamic update
# runs) and apply_rotary_pos_emb with partial rotary (partial_rotary_factor 0.75: 6 of 8 dims rotate); head_dim 8,
# max_position_embeddings 32, original_max_position_embeddings 8, short/long factors of 3; position ids are inputs in
# [0, 10), so max(position_ids) + 1 > 8 picks the long factors for some seeds; the config and module as dicts
# (hasattr(config, k) as `k in config`, register_buffer as a dict write)
def hf_phi3_longrope(q: f32[1, 2, 6, 8], k: f32[1, 2, 6, 8], position_ids: i64[1, 6]) -> tuple[f32[1, 2, 6, 8], f32[1, 2, 6, 8]]:
    config = {
        "rope_theta": 10000.0, "partial_rotary_factor": 0.75, "hidden_size": 16, "num_attention_heads": 2,
        "max_position_embeddings": 32, "original_max_position_embeddings": 8,
        "rope_scaling": {"type": "longrope", "short_factor": [1.0, 1.25, 1.5], "long_factor": [1.0, 2.0, 4.0]},
    }
    rope = {"config": config, "rope_type": "longrope"}
    rope["max_seq_len_cached"] = config["max_position_embeddings"]
    rope["original_max_seq_len"] = config["max_position_embeddings"]
    inv_freq, rope["attention_scaling"] = _compute_longrope_parameters(config, q.device)
    rope["inv_freq"] = inv_freq
    rope["original_inv_freq"] = rope["inv_freq"]
    if rope["rope_type"] == "longrope":
        rope["rope_type"] = "dynamic_longrope"
    cos, sin = _rotary_forward(rope, q, position_ids)
    return _apply_rotary_pos_emb(q, k, cos, sin)
