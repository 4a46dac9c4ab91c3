"""Hand-written recurrent cells from PyTorch's fastrnns benchmark (benchmarks/fastrnns/cells.py and custom_lstms.py),
run over short sequences the way its layer classes do. Weights arrive uniform in [-1, 1) and are scaled by
1/sqrt(hidden) as nn.LSTM initializes them."""
from __future__ import annotations

import torch


# PyTorch, benchmarks/fastrnns/cells.py: lstm_cell
def _lstm_cell(input, hidden, w_ih, w_hh, b_ih, b_hh):
    hx, cx = hidden
    gates = torch.mm(input, w_ih.t()) + torch.mm(hx, w_hh.t()) + b_ih + b_hh
    ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
    ingate = torch.sigmoid(ingate)
    forgetgate = torch.sigmoid(forgetgate)
    cellgate = torch.tanh(cellgate)
    outgate = torch.sigmoid(outgate)
    cy = (forgetgate * cx) + (ingate * cellgate)
    hy = outgate * torch.tanh(cy)
    return hy, cy


# PyTorch, benchmarks/fastrnns/custom_lstms.py: LSTMLayer.forward over LSTMCell (unbind, outputs += [out], stack)
def fastrnns_lstm_layer(
    input: f32[10, 4, 32], hx: f32[4, 32], cx: f32[4, 32], w_ih: f32[128, 32], w_hh: f32[128, 32], b_ih: f32[128],
    b_hh: f32[128]
) -> tuple[f32[10, 4, 32], f32[4, 32], f32[4, 32]]:
    s = 0.17677669529663687
    w_ih, w_hh, b_ih, b_hh = w_ih * s, w_hh * s, b_ih * s, b_hh * s
    state = (hx, cx)
    inputs = input.unbind(0)
    outputs = []
    for i in range(len(inputs)):
        hy, cy = _lstm_cell(inputs[i], state, w_ih, w_hh, b_ih, b_hh)
        out, state = hy, (hy, cy)
        outputs += [out]
    return torch.stack(outputs), state[0], state[1]


# PyTorch, benchmarks/fastrnns/cells.py: premul_lstm_cell, with the input projection of the whole sequence done first
def fastrnns_premul_lstm(
    input: f32[12, 3, 24], hx: f32[3, 32], cx: f32[3, 32], w_ih: f32[128, 24], w_hh: f32[128, 32], b_ih: f32[128],
    b_hh: f32[128]
) -> tuple[f32[12, 3, 32], f32[3, 32], f32[3, 32]]:
    s = 0.17677669529663687
    w_ih, w_hh, b_ih, b_hh = w_ih * s, w_hh * s, b_ih * s, b_hh * s
    igates = input.matmul(w_ih.t())
    outputs = []
    for t in range(igates.size(0)):
        gates = igates[t] + torch.mm(hx, w_hh.t()) + b_ih + b_hh
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)
        cx = (forgetgate * cx) + (ingate * cellgate)
        hx = outgate * torch.tanh(cx)
        outputs.append(hx)
    return torch.stack(outputs), hx, cx


# PyTorch, benchmarks/fastrnns/cells.py: milstm_cell
def fastrnns_milstm(
    x: f32[8, 4, 32], hx: f32[4, 32], cx: f32[4, 32], w_ih: f32[128, 32], w_hh: f32[128, 32], alpha: f32[128],
    beta_i: f32[128], beta_h: f32[128], bias: f32[128]
) -> tuple[f32[8, 4, 32], f32[4, 32], f32[4, 32]]:
    s = 0.17677669529663687
    w_ih, w_hh = w_ih * s, w_hh * s
    outs = []
    for t in range(x.size(0)):
        Wx = x[t].mm(w_ih.t())
        Uz = hx.mm(w_hh.t())
        gates = alpha * Wx * Uz + beta_i * Wx + beta_h * Uz + bias
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
        ingate = ingate.sigmoid()
        forgetgate = forgetgate.sigmoid()
        cellgate = cellgate.tanh()
        outgate = outgate.sigmoid()
        cx = (forgetgate * cx) + (ingate * cellgate)
        hx = outgate * cx.tanh()
        outs.append(hx)
    return torch.stack(outs, 0), hx, cx


# PyTorch, benchmarks/fastrnns/cells.py: gru_cell
def fastrnns_gru(
    input: f32[10, 4, 16], hidden: f32[4, 32], w_ih: f32[96, 16], w_hh: f32[96, 32], b_ih: f32[96], b_hh: f32[96]
) -> tuple[f32[10, 4, 32], f32[4, 32]]:
    s = 0.17677669529663687
    w_ih, w_hh, b_ih, b_hh = w_ih * s, w_hh * s, b_ih * s, b_hh * s
    out = torch.empty(input.size(0), hidden.size(0), hidden.size(1))
    for t in range(input.size(0)):
        gi = torch.mm(input[t], w_ih.t()) + b_ih
        gh = torch.mm(hidden, w_hh.t()) + b_hh
        i_r, i_i, i_n = gi.chunk(3, 1)
        h_r, h_i, h_n = gh.chunk(3, 1)
        resetgate = torch.sigmoid(i_r + h_r)
        inputgate = torch.sigmoid(i_i + h_i)
        newgate = torch.tanh(i_n + resetgate * h_n)
        hidden = newgate + inputgate * (hidden - newgate)
        out[t] = hidden
    return out, hidden


# PyTorch, benchmarks/fastrnns/cells.py: rnn_relu_cell and rnn_tanh_cell, a relu layer feeding a tanh layer
def fastrnns_rnn_relu_tanh(
    input: f32[16, 2, 8], h1: f32[2, 16], h2: f32[2, 16], w_ih1: f32[16, 8], w_hh1: f32[16, 16], b_ih1: f32[16],
    b_hh1: f32[16], w_ih2: f32[16, 16], w_hh2: f32[16, 16], b_ih2: f32[16], b_hh2: f32[16]
) -> tuple[f32[16, 2, 16], f32[2, 16], f32[2, 16]]:
    s = 0.25
    w_ih1, w_hh1, b_ih1, b_hh1 = w_ih1 * s, w_hh1 * s, b_ih1 * s, b_hh1 * s
    w_ih2, w_hh2, b_ih2, b_hh2 = w_ih2 * s, w_hh2 * s, b_ih2 * s, b_hh2 * s
    outputs = []
    for t in range(input.shape[0]):
        igates = torch.mm(input[t], w_ih1.t()) + b_ih1
        hgates = torch.mm(h1, w_hh1.t()) + b_hh1
        h1 = torch.relu(igates + hgates)
        igates = torch.mm(h1, w_ih2.t()) + b_ih2
        hgates = torch.mm(h2, w_hh2.t()) + b_hh2
        h2 = torch.tanh(igates + hgates)
        outputs.append(h2)
    return torch.stack(outputs), h1, h2


# PyTorch, benchmarks/fastrnns/custom_lstms.py: LayerNorm (decomposed) and LayerNormLSTMCell.forward
def _layernorm(input, weight, bias):
    mu = input.mean(-1, keepdim=True)
    sigma = input.std(-1, keepdim=True, unbiased=False)
    return (input - mu) / sigma * weight + bias


def fastrnns_layernorm_lstm(
    input: f32[6, 4, 32], hx: f32[4, 32], cx: f32[4, 32], w_ih: f32[128, 32], w_hh: f32[128, 32]
) -> tuple[f32[6, 4, 32], f32[4, 32], f32[4, 32]]:
    s = 0.17677669529663687
    w_ih, w_hh = w_ih * s, w_hh * s
    ln_w4, ln_b4 = torch.ones(128), torch.zeros(128)
    ln_w, ln_b = torch.ones(32), torch.zeros(32)
    outputs = []
    for x in input.unbind(0):
        igates = _layernorm(torch.mm(x, w_ih.t()), ln_w4, ln_b4)
        hgates = _layernorm(torch.mm(hx, w_hh.t()), ln_w4, ln_b4)
        gates = igates + hgates
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)
        cx = _layernorm((forgetgate * cx) + (ingate * cellgate), ln_w, ln_b)
        hx = outgate * torch.tanh(cx)
        outputs += [hx]
    return torch.stack(outputs), hx, cx


# PyTorch, benchmarks/fastrnns/custom_lstms.py: BidirLSTMLayer (LSTMLayer and ReverseLSTMLayer with reverse(), cat)
def fastrnns_bidir_lstm_layer(
    input: f32[6, 2, 16], hf: f32[2, 16], cf: f32[2, 16], hb: f32[2, 16], cb: f32[2, 16], w_ih: f32[2, 64, 16],
    w_hh: f32[2, 64, 16], b: f32[2, 2, 64]
) -> tuple[f32[6, 2, 32], f32[2, 16], f32[2, 16]]:
    w_ih, w_hh, b = w_ih * 0.25, w_hh * 0.25, b * 0.25
    inputs = input.unbind(0)
    fwd = []
    state = (hf, cf)
    for i in range(len(inputs)):
        hy, cy = _lstm_cell(inputs[i], state, w_ih[0], w_hh[0], b[0, 0], b[0, 1])
        state = (hy, cy)
        fwd += [hy]
    rev_inputs = inputs[::-1]
    bwd = []
    state_b = (hb, cb)
    for i in range(len(rev_inputs)):
        hy, cy = _lstm_cell(rev_inputs[i], state_b, w_ih[1], w_hh[1], b[1, 0], b[1, 1])
        state_b = (hy, cy)
        bwd += [hy]
    outputs = [torch.stack(fwd), torch.stack(bwd[::-1])]
    return torch.cat(outputs, -1), state[0], state_b[0]


# PyTorch, benchmarks/fastrnns/custom_lstms.py: StackedLSTM.forward, two LSTMLayers with one state per layer
def fastrnns_stacked_lstm(
    input: f32[5, 2, 16], h: f32[2, 2, 16], c: f32[2, 2, 16], w_ih: f32[2, 64, 16], w_hh: f32[2, 64, 16],
    b_ih: f32[2, 64], b_hh: f32[2, 64]
) -> tuple[f32[5, 2, 16], f32[2, 2, 16], f32[2, 2, 16]]:
    w_ih, w_hh, b_ih, b_hh = w_ih * 0.25, w_hh * 0.25, b_ih * 0.25, b_hh * 0.25
    states = [(h[0], c[0]), (h[1], c[1])]
    output_states = []
    output = input
    i = 0
    for layer in range(2):
        state = states[i]
        outputs = []
        for x in output.unbind(0):
            hy, cy = _lstm_cell(x, state, w_ih[layer], w_hh[layer], b_ih[layer], b_hh[layer])
            state = (hy, cy)
            outputs += [hy]
        output = torch.stack(outputs)
        output_states += [state]
        i += 1
    hs = torch.stack([s[0] for s in output_states])
    cs = torch.stack([s[1] for s in output_states])
    return output, hs, cs
