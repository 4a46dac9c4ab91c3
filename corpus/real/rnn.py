"""Recurrent code: hand-written cells from PyTorch's fastrnns benchmark (benchmarks/fastrnns/cells.py and
custom_lstms.py) run over short sequences the way its layer classes do, fairseq's LSTM decoder with attention, and
ChatRWKV's RNN-mode time and channel mixing. Weights arrive uniform in [-1, 1) and are scaled by about
1/sqrt(hidden) as the layers initialize them."""
from __future__ import annotations

import torch
import torch.nn.functional as F


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


# PyTorch, benchmarks/fastrnns/custom_lstms.py: LayerNorm.forward (the decomposed layer norm)
def _layernorm(input, weight, bias):
    mu = input.mean(-1, keepdim=True)
    sigma = input.std(-1, keepdim=True, unbiased=False)
    return (input - mu) / sigma * weight + bias


# PyTorch, benchmarks/fastrnns/custom_lstms.py: LayerNormLSTMCell.forward (decompose_layernorm=True) over a sequence
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


# fairseq, fairseq/models/lstm.py: AttentionLayer.forward (bias-free projections, padding mask)
def _attention_layer(input, source_hids, encoder_padding_mask, input_proj_w, output_proj_w):
    x = F.linear(input, input_proj_w)
    attn_scores = (source_hids * x.unsqueeze(0)).sum(dim=2)
    if encoder_padding_mask is not None:
        attn_scores = attn_scores.float().masked_fill_(encoder_padding_mask, float("-inf")).type_as(attn_scores)
    attn_scores = F.softmax(attn_scores, dim=0)
    x = (attn_scores.unsqueeze(2) * source_hids).sum(dim=0)
    x = torch.tanh(F.linear(torch.cat((x, input), dim=1), output_proj_w))
    return x, attn_scores


# fairseq, fairseq/models/lstm.py: LSTMDecoder.extract_features (one layer, input feeding, attention over encoder
# outputs, no incremental state; nn.LSTMCell written out)
def fairseq_lstm_decoder(
    x: f32[2, 5, 16], encoder_outs: f32[7, 2, 16], encoder_hiddens: f32[1, 2, 16], encoder_cells: f32[1, 2, 16],
    pad: bool[7, 2], w_ih: f32[64, 32], w_hh: f32[64, 16], b_ih: f32[64], b_hh: f32[64], input_proj_w: f32[16, 16],
    output_proj_w: f32[16, 32]
) -> tuple[f32[2, 5, 16], f32[2, 5, 7]]:
    w_ih, w_hh, b_ih, b_hh = w_ih * 0.1, w_hh * 0.1, b_ih * 0.1, b_hh * 0.1
    input_proj_w, output_proj_w = input_proj_w * 0.25, output_proj_w * 0.2
    encoder_padding_mask = pad.clone()
    encoder_padding_mask[0] = False
    num_layers = 1
    hidden_size = 16
    srclen = encoder_outs.size(0)
    bsz, seqlen = x.size(0), x.size(1)
    x = x.transpose(0, 1)
    prev_hiddens = [encoder_hiddens[i] for i in range(num_layers)]
    prev_cells = [encoder_cells[i] for i in range(num_layers)]
    input_feed = x.new_zeros(bsz, hidden_size)
    attn_scores = x.new_zeros(srclen, seqlen, bsz)
    outs = []
    for j in range(seqlen):
        input = torch.cat((x[j, :, :], input_feed), dim=1)
        for i in range(num_layers):
            gates = F.linear(input, w_ih, b_ih) + F.linear(prev_hiddens[i], w_hh, b_hh)
            ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)
            cell = torch.sigmoid(forgetgate) * prev_cells[i] + torch.sigmoid(ingate) * torch.tanh(cellgate)
            hidden = torch.sigmoid(outgate) * torch.tanh(cell)
            input = hidden
            prev_hiddens[i] = hidden
            prev_cells[i] = cell
        out, attn_scores[:, j, :] = _attention_layer(
            hidden, encoder_outs, encoder_padding_mask, input_proj_w, output_proj_w
        )
        input_feed = out
        outs.append(out)
    x = torch.cat(outs, dim=0).view(seqlen, bsz, hidden_size)
    x = x.transpose(1, 0)
    attn_scores = attn_scores.transpose(0, 2)
    return x, attn_scores


# ChatRWKV (BlinkDL), RWKV_in_150_lines.py: RWKV_RNN.time_mixing and channel_mixing for layer i of a 2-layer state
# (the state rows read as views, then overwritten in place)
def rwkv_time_channel_mixing(
    x: f32[32], state: f32[10, 32], time_mix_k: f32[32], time_mix_v: f32[32], time_mix_r: f32[32],
    time_first: f32[32], time_decay_raw: f32[32], kw: f32[32, 32], vw: f32[32, 32], rw: f32[32, 32], ow: f32[32, 32],
    ffn_mix_k: f32[32], ffn_mix_r: f32[32], fkw: f32[64, 32], fvw: f32[32, 64], frw: f32[32, 32], i: int = 1
) -> f32[32]:
    kw, vw, rw, ow = kw * 0.17, vw * 0.17, rw * 0.17, ow * 0.17
    fkw, fvw, frw = fkw * 0.17, fvw * 0.12, frw * 0.17
    time_decay = -torch.exp(time_decay_raw.float())
    # The state arrives uniform; its row bb is a sum of exponentials in RWKV, so it is made positive.
    state[5 * i + 3].abs_().add_(0.5)
    # time_mixing
    xk = x * time_mix_k + state[5 * i + 1] * (1 - time_mix_k)
    xv = x * time_mix_v + state[5 * i + 1] * (1 - time_mix_v)
    xr = x * time_mix_r + state[5 * i + 1] * (1 - time_mix_r)
    state[5 * i + 1] = x
    r = torch.sigmoid(rw @ xr)
    k = kw @ xk
    v = vw @ xv
    aa = state[5 * i + 2]
    bb = state[5 * i + 3]
    pp = state[5 * i + 4]
    ww = time_first + k
    qq = torch.maximum(pp, ww)
    e1 = torch.exp(pp - qq)
    e2 = torch.exp(ww - qq)
    a = e1 * aa + e2 * v
    b = e1 * bb + e2
    wkv = a / b
    ww = pp + time_decay
    qq = torch.maximum(ww, k)
    e1 = torch.exp(ww - qq)
    e2 = torch.exp(k - qq)
    state[5 * i + 2] = e1 * aa + e2 * v
    state[5 * i + 3] = e1 * bb + e2
    state[5 * i + 4] = qq
    x = x + ow @ (r * wkv)
    # channel_mixing
    xk = x * ffn_mix_k + state[5 * i + 0] * (1 - ffn_mix_k)
    xr = x * ffn_mix_r + state[5 * i + 0] * (1 - ffn_mix_r)
    state[5 * i + 0] = x
    r = torch.sigmoid(frw @ xr)
    k = torch.square(torch.relu(fkw @ xk))
    return x + r * (fvw @ k)
