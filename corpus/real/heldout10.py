"""Held-out real code, issue 14's tenth round (7 of 12 ran on every engine before that round's fixes; the round's
first copy was lost with a machine, and its five refused programs were ported again): a hierarchical multiscale
LSTM cell written with torch.autograd.Variable, Schedule-Free AdamW (`try`/`except ZeroDivisionError`) and SM3
(accumulators keyed by concatenated strings, shapes from list arithmetic, `state.update`), and Hugging Face's
dynamic-NTK rotary embedding (a conditional expression on `int(torch.max(position_ids)) + 1`, known only at run
time). Mixtral's sparse MoE block is in tests/real_pending/heldout_r10.py. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


def _hard_sigm(a, x):
    temp = torch.div(torch.add(torch.mul(x, a), 1), 2.0)
    output = torch.clamp(temp, min=0, max=1)
    return output


def _hm_lstm_cell(c, h_bottom, h, h_top, z, z_bottom, W_01, U_11, U_21, bias, hidden_size, a, last_layer):
    s_recur = torch.mm(W_01, h_bottom)
    if not last_layer:
        s_topdown_ = torch.mm(U_21, h_top)
        s_topdown = z.expand_as(s_topdown_) * s_topdown_
    else:
        s_topdown = Variable(torch.zeros(s_recur.size()), requires_grad=False)
    s_bottomup_ = torch.mm(U_11, h)
    s_bottomup = z_bottom.expand_as(s_bottomup_) * s_bottomup_

    f_s = s_recur + s_topdown + s_bottomup + bias.unsqueeze(1).expand_as(s_recur)
    f = F.sigmoid(f_s[0:hidden_size, :])
    i = F.sigmoid(f_s[hidden_size:hidden_size * 2, :])
    o = F.sigmoid(f_s[hidden_size * 2:hidden_size * 3, :])
    g = F.tanh(f_s[hidden_size * 3:hidden_size * 4, :])
    z_hat = _hard_sigm(a, f_s[hidden_size * 4:hidden_size * 4 + 1, :])

    one = Variable(torch.ones(f.size()), requires_grad=False)
    z = z.expand_as(f)
    z_bottom = z_bottom.expand_as(f)

    c_new = z * (i * g) + (one - z) * (one - z_bottom) * c + (one - z) * z_bottom * (f * c + i * g)
    h_new = z * o * F.tanh(c_new) + (one - z) * (one - z_bottom) * h + (one - z) * z_bottom * o * F.tanh(c_new)

    z_new = (z_hat > 0.5).float()
    return h_new, c_new, z_new


# A hierarchical multiscale LSTM (Chung et al.), a PyTorch port's HM_LSTMCell.forward (columns are the batch; the
# boundary detector's straight-through `bound()` Function is its forward, `z_hat > 0.5`), two layers over 6 steps
def hm_lstm(
    x: f32[6, 8, 4], W0: f32[21, 8], U0: f32[21, 5], V0: f32[21, 5], W1: f32[21, 5], U1: f32[21, 5], b: f32[2, 21]
) -> tuple[f32[5, 4], f32[5, 4], f32[1, 4]]:
    hs = 5
    h0 = Variable(torch.zeros(hs, 4), requires_grad=False)
    c0 = torch.zeros(hs, 4)
    h1 = torch.zeros(hs, 4)
    c1 = torch.zeros(hs, 4)
    z0 = torch.zeros(1, 4)
    z1 = torch.zeros(1, 4)
    one_bottom = torch.ones(1, 4)
    for t in range(x.size(0)):
        h0, c0, z0 = _hm_lstm_cell(c0, x[t], h0, h1, z0, one_bottom, W0, U0, V0, b[0], hs, 1.0, False)
        h1, c1, z1 = _hm_lstm_cell(c1, h0, h1, None, z1, z0, W1, U1, None, b[1], hs, 1.0, True)
    return h1, c1, z0


# facebookresearch/schedule_free, schedulefree/adamw_schedulefree.py: AdamWScheduleFree.step (training mode; warmup
# 2 steps, weight decay at y), 4 steps on two parameters with fixed gradients
def schedulefree_adamw_steps(
    p1: f32[6, 5], p2: f32[5], g1: f32[6, 5], g2: f32[5]
) -> tuple[f32[6, 5], f32[5], f32[6, 5], f32[5]]:
    params = [p1, p2]
    grads = [g1, g2]
    group = {'lr': 0.05, 'betas': (0.9, 0.999), 'eps': 1e-8, 'weight_decay': 0.01, 'k': 0, 'warmup_steps': 2,
             'r': 0.0, 'weight_lr_power': 2.0, 'weight_sum': 0.0, 'lr_max': -1.0}
    state = {}
    for _ in range(4):
        eps = group['eps']
        beta1, beta2 = group['betas']
        decay = group['weight_decay']
        k = group['k']
        r = group['r']
        warmup_steps = group['warmup_steps']
        weight_lr_power = group['weight_lr_power']
        if k < warmup_steps:
            sched = (k + 1) / warmup_steps
        else:
            sched = 1.0
        bias_correction2 = 1 - beta2 ** (k + 1)
        lr = group['lr'] * sched
        group['scheduled_lr'] = lr
        lr_max = group['lr_max'] = max(lr, group['lr_max'])
        weight = ((k + 1) ** r) * (lr_max ** weight_lr_power)
        weight_sum = group['weight_sum'] = group['weight_sum'] + weight
        try:
            ckp1 = weight / weight_sum
        except ZeroDivisionError:
            ckp1 = 0
        for i, p in enumerate(params):
            grad = grads[i]
            if i not in state:
                state[i] = {'z': torch.clone(p, memory_format=torch.preserve_format),
                            'exp_avg_sq': torch.zeros_like(p, memory_format=torch.preserve_format)}
            z = state[i]['z']
            exp_avg_sq = state[i]['exp_avg_sq']
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(eps)
            grad_normalized = grad.div_(denom)
            if decay != 0:
                grad_normalized.add_(p, alpha=decay)
            p.lerp_(end=z, weight=ckp1)
            p.add_(grad_normalized, alpha=lr * (beta1 * (1 - ckp1) - 1))
            z.sub_(grad_normalized, alpha=lr)
        group['k'] = k + 1
    return p1, p2, state[0]['z'], state[1]['z']


def _key(i):
    # Returns key used for accessing accumulators
    return 'accumulator_' + str(i)


def _add_initial_accumulators(state, grad):
    shape = grad.shape
    rank = len(shape)
    defaults = {'device': grad.device, 'dtype': grad.dtype}
    acc = {}
    if grad.is_sparse:
        acc[_key(0)] = torch.zeros(shape[0], **defaults)
    elif rank == 0:
        acc[_key(0)] = torch.zeros(shape, **defaults)
    else:
        for i in range(rank):
            acc_shape = [1] * i + [shape[i]] + [1] * (rank - 1 - i)
            acc[_key(i)] = torch.zeros(acc_shape, **defaults)
    state.update(acc)


def _max_reduce_except_dim(tensor, dim):
    rank = len(tensor.shape)
    result = tensor
    if rank > 0:
        assert dim < rank
        for d in range(rank):
            if d != dim:
                result = result.max(dim=d, keepdim=True).values
    return result


def _compute_update(beta, acc_list, grad):
    rank = len(acc_list)
    update = acc_list[0].clone()
    for i in range(1, rank):
        update = torch.min(update, acc_list[i])
    if beta > 0.0:
        update.mul_(beta).addcmul_(grad, grad, value=1 - beta)
    else:
        update.addcmul_(grad, grad)
    return update


# torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/sm3.py: SM3.step (dense gradients, momentum 0.5),
# 3 steps on a matrix and a vector with fixed gradients
def sm3_steps(p1: f32[6, 4], p2: f32[7], g1: f32[6, 4], g2: f32[7]) -> tuple[f32[6, 4], f32[7], f32[6, 1]]:
    group = {'lr': 0.1, 'momentum': 0.5, 'beta': 0.0, 'eps': 1e-30}
    states = [{}, {}]
    for _ in range(3):
        momentum = group['momentum']
        beta = group['beta']
        eps = group['eps']
        for p, grad, state in zip([p1, p2], [g1, g2], states):
            shape = grad.shape
            rank = len(shape)
            if len(state) == 0:
                state['step'] = 0
                state['momentum_buffer'] = 0.0
                _add_initial_accumulators(state, grad)
            if rank > 1:
                acc_list = [state[_key(i)] for i in range(rank)]
            else:
                acc_list = [state[_key(0)]]
            update = _compute_update(beta, acc_list, grad)
            for i, acc in enumerate(acc_list):
                torch.max(acc, _max_reduce_except_dim(update, i), out=acc)
            update.add_(eps).rsqrt_().mul_(grad)
            if momentum > 0.0:
                m = state['momentum_buffer']
                update.mul_(1.0 - momentum).add_(m, alpha=momentum)
                state['momentum_buffer'] = update.detach()
            p.sub_(update, alpha=group['lr'])
            state['step'] += 1
    return p1, p2, states[0][_key(0)]


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
