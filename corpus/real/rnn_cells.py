"""Hand-written recurrent cells: Salesforce's QRNN (its CPU ForgetMult), ChatRWKV's RWKV-5 time mixing (a group norm
over heads), lucidrains' minGRU in its sequential mode, SRU's CPU recurrence, IndRNN's elementwise recurrence and
xLSTM's sLSTM pointwise step and mLSTM decode step (`squeeze_` on its parameters), Hugging Face's RWKV linear attention (CPU path) and SpeechBrain's LiGRU layer.
Weights arrive uniform in [-1, 1) and are scaled by about 1/sqrt(fan_in) as the layers initialize them."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# Salesforce pytorch-qrnn, torchqrnn/forget_mult.py: CPUForgetMult.forward
def _cpu_forget_mult(f, x, hidden_init=None):
    result = []
    forgets = f.split(1, dim=0)
    prev_h = hidden_init
    for i, h in enumerate((f * x).split(1, dim=0)):
        if prev_h is not None:
            h = h + (1 - forgets[i]) * prev_h
        # h is (1, batch, hidden) when it needs to be (batch_hidden): the size()[1:] drops the 1
        h = h.view(h.size()[1:])
        result.append(h)
        prev_h = h
    return torch.stack(result)


# Salesforce pytorch-qrnn, torchqrnn/qrnn.py: QRNNLayer.forward (window 1, output_gate, no zoneout), with
# CPUForgetMult as ForgetMult runs it without CUDA
def qrnn_layer(
    X: f32[7, 3, 16], hidden: f32[3, 24], w: f32[72, 16], b: f32[72]
) -> tuple[f32[7, 3, 24], f32[1, 3, 24]]:
    w, b = w * 0.25, b * 0.25
    seq_len, batch_size, _ = X.size()
    source = X
    Y = F.linear(source, w, b)
    hidden_size = 24
    Y = Y.view(seq_len, batch_size, 3 * hidden_size)
    Z, Fg, O = Y.chunk(3, dim=2)
    Z = torch.tanh(Z)
    Fg = torch.sigmoid(Fg)
    Z = Z.contiguous()
    Fg = Fg.contiguous()
    C = _cpu_forget_mult(Fg, Z, hidden)
    H = torch.sigmoid(O) * C
    return H, C[-1:]


# ChatRWKV (BlinkDL), RWKV_v5_demo.py: RWKV_RNN.time_mixing for layer i (head_size 8, 4 heads, the state's
# (2 + head_size) rows per layer, ln_x as F.group_norm over heads with eps 64e-5)
def rwkv5_time_mixing(
    x: f32[32], state: f32[20, 32], time_mix_k: f32[32], time_mix_v: f32[32], time_mix_r: f32[32],
    time_mix_g: f32[32], time_first: f32[4, 8, 1], time_decay_raw: f32[4, 8, 1], kw: f32[32, 32], vw: f32[32, 32],
    rw: f32[32, 32], gw: f32[32, 32], ow: f32[32, 32], ln_w: f32[32], ln_b: f32[32], i: int = 1
) -> tuple[f32[32], f32[20, 32]]:
    kw, vw, rw, gw, ow = kw * 0.17, vw * 0.17, rw * 0.17, gw * 0.17, ow * 0.17
    time_decay = torch.exp(-torch.exp(time_decay_raw.float()))
    H = 4
    S = 8
    i1 = (2 + S) * i + 1
    xk = x * time_mix_k + state[i1] * (1 - time_mix_k)
    xv = x * time_mix_v + state[i1] * (1 - time_mix_v)
    xr = x * time_mix_r + state[i1] * (1 - time_mix_r)
    xg = x * time_mix_g + state[i1] * (1 - time_mix_g)
    state[i1] = x
    r = (rw @ xr).view(H, 1, S)
    k = (kw @ xk).view(H, S, 1)
    v = (vw @ xv).view(H, 1, S)
    g = F.silu(gw @ xg)
    s = state[(2 + S) * i + 2:(2 + S) * (i + 1), :].reshape(H, S, S)
    x = torch.zeros(H, S)
    a = k @ v
    x = r @ (time_first * a + s)
    s = a + time_decay * s
    state[(2 + S) * i + 2:(2 + S) * (i + 1), :] = s.reshape(S, -1)
    x = x.flatten()
    x = F.group_norm(x.unsqueeze(0), num_groups=H, weight=ln_w, bias=ln_b, eps=64e-5).squeeze(0) * g
    return ow @ x, state


# minGRU-pytorch (lucidrains), minGRU_pytorch/minGRU.py: g
def _g(x):
    return torch.where(x >= 0, x + 0.5, x.sigmoid())


# minGRU-pytorch (lucidrains), minGRU_pytorch/minGRU.py: MinGRU.forward's sequential branch (seq_len 1, prev_hidden
# given, expansion_factor 1, no out projection), run token by token as its decoding does
def mingru_decode(x: f32[2, 6, 16], prev_hidden: f32[2, 1, 16], w: f32[32, 16]) -> tuple[f32[2, 6, 16], f32[2, 1, 16]]:
    w = w * 0.25
    outs = []
    for t in range(x.shape[1]):
        xt = x[:, t:t + 1]
        seq_len = xt.shape[1]
        hidden, gate = F.linear(xt, w).chunk(2, dim=-1)
        if seq_len == 1:
            hidden = _g(hidden)
            gate = gate.sigmoid()
            out = torch.lerp(prev_hidden, hidden, gate) if prev_hidden is not None else (hidden * gate)
        next_prev_hidden = out[:, -1:]
        outs.append(out)
        prev_hidden = next_prev_hidden
    return torch.cat(outs, dim=1), prev_hidden


# SRU (taolei87/sru), sru/ops.py: sru_compute_cpu, unidirectional, k == 3 (the skip term is the input itself),
# tanh activation, no masks; `x.new(...)` (uninitialized) written as new_zeros
def sru_compute_cpu(u: f32[5, 2, 24], x: f32[5, 2, 8], bias: f32[16], init: f32[2, 8]) -> tuple[f32[5, 2, 8], f32[2, 8]]:
    d, bidir, scale_x = 8, 1, 1
    length = x.size(0) if x.dim() == 3 else 1
    batch = x.size(-2)
    k = u.size(-1) // d // bidir
    u = u.view(length, batch, bidir, d, k)
    forget_bias, reset_bias = bias.view(2, bidir, d)
    x_prime = x.view(length, batch, bidir, d)
    x_prime = x_prime * scale_x if scale_x != 1 else x_prime
    h = x.new_zeros(length, batch, bidir, d)
    c_init = init.view(batch, bidir, d)
    c_final = []
    for di in range(bidir):
        time_seq = range(length) if di == 0 else range(length - 1, -1, -1)
        c_prev = c_init[:, di, :]
        fb, rb = forget_bias[di], reset_bias[di]
        for t in time_seq:
            f_t = (u[t, :, di, :, 1] + fb).sigmoid()
            r_t = (u[t, :, di, :, 2] + rb).sigmoid()
            c_t = u[t, :, di, :, 0] + (c_prev - u[t, :, di, :, 0]) * f_t
            c_prev = c_t
            g_c_t = c_t.tanh()
            h_t = (g_c_t - x_prime[t, :, di, :]) * r_t + x_prime[t, :, di, :]
            h[t, :, di, :] = h_t
        c_final.append(c_t)
    return h.view(length, batch, -1), torch.stack(c_final, dim=1).view(batch, -1)


# IndRNN (Sunnydreamrain/IndRNN_pytorch), IndRNN_onlyrecurrent.py: IndRNN_onlyrecurrent.forward's plain PyTorch path
# (relu, h0 given): the recurrence is elementwise, h_t = relu(x_t + w_hh * h_{t-1})
def indrnn_onlyrecurrent(input: f32[7, 3, 16], weight_hh: f32[16], h0: f32[3, 16]) -> f32[7, 3, 16]:
    assert input.dim() == 2 or input.dim() == 3
    if (h0.size(-1) != input.size(-1)) or (h0.size(-2) != input.size(-2)):
        raise RuntimeError("The initial hidden size must be equal to input_size")
    hx = h0
    outputs = []
    for input_x in input:
        hx = F.relu(input_x + hx * weight_hh)
        outputs.append(hx)
    return torch.stack(outputs, 0)


# xLSTM (NX-AI/xlstm), xlstm/blocks/slstm/src/vanilla/slstm.py: slstm_forward_pointwise, run over 5 steps with the
# recurrent projection Ry = y @ R as slstm_forward does it (one head)
def xlstm_slstm_steps(
    Wx: f32[5, 2, 32], R: f32[8, 32], b: f32[1, 32], states: f32[4, 2, 8]
) -> tuple[f32[4, 2, 8], f32[4, 2, 8]]:
    states = states.clone()
    states[1:3] = 0.0
    states[3] = 0.0
    for t in range(Wx.shape[0]):
        Ry = states[0] @ R
        raw = Wx[t] + Ry + b
        _, c, n, m = torch.unbind(states.view(4, states.shape[1], -1), dim=0)
        iraw, fraw, zraw, oraw = torch.unbind(raw.view(raw.shape[0], 4, -1), dim=1)
        logfplusm = m + torch.nn.functional.logsigmoid(fraw)
        if torch.all(n == 0.0):
            mnew = iraw
        else:
            mnew = torch.max(iraw, logfplusm)
        ogate = torch.sigmoid(oraw)
        igate = torch.exp(iraw - mnew)
        fgate = torch.exp(logfplusm - mnew)
        cnew = fgate * c + igate * torch.tanh(zraw)
        nnew = fgate * n + igate
        ynew = ogate * cnew / nnew
        states, gates = torch.stack((ynew, cnew, nnew, mnew), dim=0), torch.stack((igate, fgate, zraw, ogate), dim=0)
    return states, gates


# Hugging Face transformers, models/rwkv/modeling_rwkv.py: rwkv_linear_attention_cpu with state None and
# return_state True (the state list returned as a tuple)
def hf_rwkv_linear_attention_cpu(
    time_decay: f32[16], time_first: f32[16], key: f32[2, 6, 16], value: f32[2, 6, 16]
) -> tuple[f32[2, 6, 16], f32[2, 16], f32[2, 16], f32[2, 16]]:
    state = None
    return_state = True
    _, seq_length, _ = key.size()
    output = torch.zeros_like(key)

    if state is None:
        num_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        den_state = torch.zeros_like(key[:, 0], dtype=torch.float32)
        max_state = torch.zeros_like(key[:, 0], dtype=torch.float32) - 1e38
    else:
        num_state, den_state, max_state = state

    time_decay = -torch.exp(time_decay)

    for current_index in range(seq_length):
        current_key = key[:, current_index].float()
        current_value = value[:, current_index]

        max_for_output = torch.maximum(max_state, current_key + time_first)
        e1 = torch.exp(max_state - max_for_output)
        e2 = torch.exp(current_key + time_first - max_for_output)
        numerator = e1 * num_state + e2 * current_value
        denominator = e1 * den_state + e2
        output[:, current_index] = (numerator / denominator).to(output.dtype)

        max_for_state = torch.maximum(max_state + time_decay, current_key)
        e1 = torch.exp(max_state + time_decay - max_for_state)
        e2 = torch.exp(current_key - max_for_state)
        num_state = e1 * num_state + e2 * current_value
        den_state = e1 * den_state + e2
        max_state = max_for_state

    if return_state or state is not None:
        state = [num_state, den_state, max_state]

    return output, state[0], state[1], state[2]


# SpeechBrain, speechbrain/nnet/RNN.py: LiGRU_Layer.forward and _ligru_cell in eval mode (relu, batch normalization
# with a fresh BatchNorm1d's running statistics, drop mask torch.tensor([1.0]), h_init zeros); self.w and self.u
# (bias-free nn.Linear) become F.linear with weight parameters
def speechbrain_ligru(x: f32[2, 6, 8], w_w: f32[32, 8], u_w: f32[32, 16]) -> f32[2, 6, 16]:
    hidden_size = 16
    w = F.linear(x, w_w)
    running_mean = torch.zeros(2 * hidden_size)
    running_var = torch.ones(2 * hidden_size)
    w_bn = F.batch_norm(
        w.reshape(w.shape[0] * w.shape[1], w.shape[2]), running_mean, running_var, None, None, False, 0.05, 1e-5
    )
    w = w_bn.reshape(w.shape[0], w.shape[1], w.shape[2])
    ht = torch.zeros(1, hidden_size)
    hiddens = []
    drop_mask = torch.tensor([1.0]).float()
    for k in range(w.shape[1]):
        gates = w[:, k] + F.linear(ht, u_w)
        at, zt = gates.chunk(2, 1)
        zt = torch.sigmoid(zt)
        hcand = torch.relu(at) * drop_mask
        ht = zt * ht + (1 - zt) * hcand
        hiddens.append(ht)
    h = torch.stack(hiddens, dim=1)
    return h


# xLSTM (NX-AI/xlstm), xlstm/blocks/mlstm/backends.py: recurrent_step_stabilized_simple (eps 1e-6), one decode step;
# the new states returned flat, not as a nested tuple (goldens store flat tuples)
def xlstm_mlstm_recurrent_step(
    c_state: f32[2, 4, 8, 8], n_state: f32[2, 4, 8, 1], m_state: f32[2, 4, 1, 1], q: f32[2, 4, 1, 8],
    k: f32[2, 4, 1, 8], v: f32[2, 4, 1, 8], igate_preact: f32[2, 4, 1, 1], fgate_preact: f32[2, 4, 1, 1]
) -> tuple[f32[2, 4, 1, 8], f32[2, 4, 8, 8], f32[2, 4, 8, 1], f32[2, 4, 1, 1]]:
    eps = 1e-6
    B, NH, S, DH = q.shape
    q, k, v = q.squeeze_(2).unsqueeze(-1), k.squeeze_(2).unsqueeze(-1), v.squeeze_(2).unsqueeze(-1)
    log_fg_act = torch.nn.functional.logsigmoid(fgate_preact)
    m_state_new = torch.max(log_fg_act + m_state, igate_preact)
    fg_act = torch.exp(log_fg_act + m_state - m_state_new)
    ig_act = torch.exp(igate_preact - m_state_new)
    k_scaled = k / math.sqrt(DH)
    c_state_new = fg_act * c_state + ig_act * (k_scaled @ v.transpose(-1, -2))
    n_state_new = fg_act * n_state + ig_act * k_scaled
    h_num = q.transpose(-1, -2) @ c_state_new
    qn_dotproduct = q.transpose(-1, -2) @ n_state_new
    max_val = torch.exp(-m_state_new)
    h_denom = torch.maximum(qn_dotproduct.abs(), max_val) + eps
    h = h_num / h_denom
    return h, c_state_new, n_state_new, m_state_new
