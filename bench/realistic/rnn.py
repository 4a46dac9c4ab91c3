"""Realistic-size benchmark, recurrent layers unrolled in Python loops: pytorch-kaldi's bidirectional GRU layer with
batch norm (TIMIT recipe, 550 units), pytorch-esn's echo-state reservoir and readout (Mackey-Glass settings, 500 units,
float64), labml's HyperLSTM (512 units, 16-unit hyper network) and recurrent highway network (512 units, depth 3), and
AllenNLP's ELMo LstmCellWithProjection (4096 gates, 1024 cells projected to 128, variable lengths, backward direction)
and AugmentedLstm with highway connections (variable lengths). Ported by hand from the originals for benchmarking
against PyTorch eager at one thread; nn.Linear / nn.LayerNorm / nn.BatchNorm1d modules are written as F.linear /
F.layer_norm / F.batch_norm on weight inputs, stacked per kind where the original keeps a ModuleList. Weights arrive
uniform in [-1, 1) and are scaled to about 1/sqrt(fan_in) in the first lines of each program."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# pytorch-kaldi (mravanelli/pytorch-kaldi), neural_networks.py: flip (the device switch
# `getattr(torch.arange(...), ("cpu", "cuda")[x.is_cuda])()` left out)
def _pk_flip(x, dim):
    xsize = x.size()
    dim = x.dim() + dim if dim < 0 else dim
    x = x.contiguous()
    x = x.view(-1, *xsize[dim:])
    x = x.view(x.size(0), x.size(1), -1)[
        :, torch.arange(x.size(1) - 1, -1, -1).long(), :
    ]
    return x.view(xsize)


# pytorch-kaldi (mravanelli/pytorch-kaldi), neural_networks.py: GRU.forward in test mode (to_do "forward", so the drop
# mask is torch.FloatTensor([1 - gru_drop])) for the first layer of cfg/TIMIT_baselines/TIMIT_GRU_fbank.cfg: 550 units,
# bidirectional, gru_use_batchnorm True (so the feed-forward Linears have no bias; BatchNorm1d in eval mode as
# F.batch_norm, momentum 0.05), no layer norm, tanh, drop 0.2; 40 fbank features, 24 frames, batch 8 (the recipe's
# batch_size_train). Each BatchNorm1d is a [4, 550] input holding running_mean, running_var, weight and bias
def kaldi_gru_bidir_bn(
    x: f32[24, 8, 40],
    wh_w: f32[550, 40], wz_w: f32[550, 40], wr_w: f32[550, 40],
    uh_w: f32[550, 550], uz_w: f32[550, 550], ur_w: f32[550, 550],
    bn_wh: f32[4, 550], bn_wz: f32[4, 550], bn_wr: f32[4, 550],
) -> f32[24, 8, 1100]:
    wh_w = wh_w / math.sqrt(40)
    wz_w = wz_w / math.sqrt(40)
    wr_w = wr_w / math.sqrt(40)
    uh_w = uh_w / math.sqrt(550)
    uz_w = uz_w / math.sqrt(550)
    ur_w = ur_w / math.sqrt(550)
    bn_params = []
    for bn in [bn_wh, bn_wz, bn_wr]:
        bn_params.append((bn[0] * 0.1, bn[1].abs() + 0.5, bn[2] + 1.0, bn[3] * 0.1))
    gru_lay = [550]
    gru_drop = [0.2]
    gru_use_batchnorm = [True]
    gru_use_laynorm = [False]
    gru_use_laynorm_inp = False
    gru_use_batchnorm_inp = False
    bidir = True
    test_flag = True
    N_gru_lay = len(gru_lay)

    for i in range(N_gru_lay):

        # Initial state and concatenation
        if bidir:
            h_init = torch.zeros(2 * x.shape[1], gru_lay[i])
            x = torch.cat([x, _pk_flip(x, 0)], 1)
        else:
            h_init = torch.zeros(x.shape[1], gru_lay[i])

        # Drop mask initilization (same mask for all time steps)
        if test_flag == False:
            drop_mask = torch.bernoulli(torch.Tensor(h_init.shape[0], h_init.shape[1]).fill_(1 - gru_drop[i]))
        else:
            drop_mask = torch.FloatTensor([1 - gru_drop[i]])

        # Feed-forward affine transformations (all steps in parallel)
        wh_out = F.linear(x, wh_w)
        wz_out = F.linear(x, wz_w)
        wr_out = F.linear(x, wr_w)

        # Apply batch norm if needed (all steos in parallel)
        if gru_use_batchnorm[i]:
            m, v, w, b = bn_params[0]
            wh_out_bn = F.batch_norm(wh_out.view(wh_out.shape[0] * wh_out.shape[1], wh_out.shape[2]), m, v, w, b,
                                     False, 0.05, 1e-5)
            wh_out = wh_out_bn.view(wh_out.shape[0], wh_out.shape[1], wh_out.shape[2])

            m, v, w, b = bn_params[1]
            wz_out_bn = F.batch_norm(wz_out.view(wz_out.shape[0] * wz_out.shape[1], wz_out.shape[2]), m, v, w, b,
                                     False, 0.05, 1e-5)
            wz_out = wz_out_bn.view(wz_out.shape[0], wz_out.shape[1], wz_out.shape[2])

            m, v, w, b = bn_params[2]
            wr_out_bn = F.batch_norm(wr_out.view(wr_out.shape[0] * wr_out.shape[1], wr_out.shape[2]), m, v, w, b,
                                     False, 0.05, 1e-5)
            wr_out = wr_out_bn.view(wr_out.shape[0], wr_out.shape[1], wr_out.shape[2])

        # Processing time steps
        hiddens = []
        ht = h_init

        for k in range(x.shape[0]):

            # gru equation
            zt = torch.sigmoid(wz_out[k] + F.linear(ht, uz_w))
            rt = torch.sigmoid(wr_out[k] + F.linear(ht, ur_w))
            at = wh_out[k] + F.linear(rt * ht, uh_w)
            hcand = torch.tanh(at) * drop_mask
            ht = zt * ht + (1 - zt) * hcand

            hiddens.append(ht)

        # Stacking hidden states
        h = torch.stack(hiddens)

        # Bidirectional concatenations
        if bidir:
            h_f = h[:, 0: int(x.shape[1] / 2)]
            h_b = _pk_flip(h[:, int(x.shape[1] / 2): x.shape[1]].contiguous(), 0)
            h = torch.cat([h_f, h_b], 2)

        # Setup x for the next hidden layer
        x = h

    return x


# pytorch-esn (stefanonardo/pytorch-esn), torchesn/nn/reservoir.py: ResTanhCell
def _esn_res_tanh_cell(input, hidden, leaking_rate, w_ih, w_hh, b_ih=None):
    hy_ = torch.tanh(F.linear(input, w_ih, b_ih) + F.linear(hidden, w_hh))
    hy = (1 - leaking_rate) * hidden + leaking_rate * hy_
    return hy


# pytorch-esn (stefanonardo/pytorch-esn), torchesn/nn/reservoir.py: Recurrent's forward
def _esn_recurrent(inner, leaking_rate, input, hidden, weight):
    output = []
    steps = range(input.size(0))
    for i in steps:
        hidden = inner(input[i], hidden, leaking_rate, *weight)
        output.append(hidden[0] if isinstance(hidden, tuple) else hidden)

    output = torch.cat(output, 0).view(input.size(0), *output[0].size())

    return hidden, output


# pytorch-esn (stefanonardo/pytorch-esn), torchesn/nn/reservoir.py: StackedRNN's forward (one direction)
def _esn_stacked(inner, leaking_rate, num_layers, input, hidden, weight):
    num_directions = 1
    total_layers = num_layers * num_directions
    assert (len(weight) == total_layers)
    next_hidden = []
    all_layers_output = []

    for i in range(num_layers):
        all_output = []
        for j in range(num_directions):
            l = i * num_directions + j
            hy, output = _esn_recurrent(inner, leaking_rate, input, hidden[l], weight[l])
            next_hidden.append(hy)
            all_output.append(output)

        input = torch.cat(all_output, input.dim() - 1)
        all_layers_output.append(input)

    all_layers_output = torch.cat(all_layers_output, -1)
    next_hidden = torch.cat(next_hidden, 0).view(
        total_layers, *next_hidden[0].size())

    return next_hidden, all_layers_output


# pytorch-esn (stefanonardo/pytorch-esn), torchesn/utils/utilities.py: washout_tensor (not bidirectional, time first)
def _esn_washout_tensor(tensor, washout, seq_lengths, bidirectional=False, batch_first=False):
    tensor = tensor.transpose(0, 1) if batch_first else tensor.clone()
    if type(seq_lengths) == list:
        seq_lengths = seq_lengths.copy()
    if type(seq_lengths) == torch.Tensor:
        seq_lengths = seq_lengths.clone()

    for b in range(tensor.size(1)):
        if washout[b] > 0:
            tmp = tensor[washout[b]:seq_lengths[b], b].clone()
            tensor[:seq_lengths[b] - washout[b], b] = tmp
            tensor[seq_lengths[b] - washout[b]:, b] = 0
            seq_lengths[b] -= washout[b]

            if bidirectional:
                tensor[seq_lengths[b] - washout[b]:, b] = 0
                seq_lengths[b] -= washout[b]

    if type(seq_lengths) == list:
        max_len = max(seq_lengths)
    else:
        max_len = max(seq_lengths).item()

    return tensor[:max_len], seq_lengths


# pytorch-esn (stefanonardo/pytorch-esn), torchesn/nn/echo_state_network.py: ESN.forward for inference (target None,
# not packed, batch_first False, w_io False) with Reservoir.forward and AutogradReservoir('RES_TANH') for one layer,
# hx None; the examples/mackey-glass.py settings (float64, input 1, 500 units, leaking_rate 1, spectral_radius 0.9,
# output 1); 4 series of 100 steps with washout 20. The reservoir's w_hh is scaled toward spectral radius 0.9 by the
# uniform-matrix estimate sqrt(n / 3) in place of reset_parameters' eigenvalue computation
def esn_reservoir_readout(
    x: f64[100, 4, 1], w_ih: f64[500, 1], w_hh: f64[500, 500], b_ih: f64[500], readout_w: f64[1, 500],
    readout_b: f64[1],
) -> tuple[f64[80, 4, 1], f64[1, 4, 500]]:
    w_hh = w_hh * (0.9 / math.sqrt(500 / 3))
    readout_w = readout_w / math.sqrt(500)
    hidden_size = 500
    num_layers = 1
    leaking_rate = 1
    washout = [20, 20, 20, 20]
    input = x

    max_batch_size = input.size(1)
    hx = input.new_zeros(num_layers, max_batch_size, hidden_size, requires_grad=False)
    all_weights = [(w_ih, w_hh, b_ih)]
    hidden, output = _esn_stacked(_esn_res_tanh_cell, leaking_rate, num_layers, input, hx, all_weights)

    seq_lengths = output.size(1) * [output.size(0)]
    output, seq_lengths = _esn_washout_tensor(output, washout, seq_lengths)
    output = F.linear(output, readout_w, readout_b)
    return output, hidden


# labml.ai annotated paper implementations (labmlai/annotated_deep_learning_paper_implementations), labml_nn/lstm:
# LSTMCell.forward with layer_norm True (nn.LayerNorm as F.layer_norm on stacked weights)
def _lb_lstm_cell(x, h, c, hidden_w, hidden_b, input_w, ln_w, ln_b, ln_c_w, ln_c_b):
    ifgo = F.linear(h, hidden_w, hidden_b) + F.linear(x, input_w)
    ifgo = ifgo.chunk(4, dim=-1)

    ifgo = [F.layer_norm(ifgo[i], (ifgo[i].shape[-1],), ln_w[i], ln_b[i]) for i in range(4)]

    i, f, g, o = ifgo

    c_next = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)

    h_next = torch.sigmoid(o) * torch.tanh(F.layer_norm(c_next, (c_next.shape[-1],), ln_c_w, ln_c_b))

    return h_next, c_next


# labml.ai (labmlai/annotated_deep_learning_paper_implementations), labml_nn/hypernetworks/hyper_lstm.py:
# HyperLSTMCell.forward and HyperLSTM.forward (state None) with the experiment's sizes (d_model 512 as input and
# hidden size, n_rhn 16 as hyper_size, n_z 16, one layer, the experiment's batch of 2); 16 characters. The ModuleLists and
# ParameterLists are stacked inputs; the LayerNorms keep their init (weight 1, bias 0) as tensors made here
def hyper_lstm(
    x: f32[16, 2, 512],
    hyp_hidden_w: f32[64, 16], hyp_hidden_b: f32[64], hyp_input_w: f32[64, 1024],
    z_h_w: f32[64, 16], z_h_b: f32[64], z_x_w: f32[64, 16], z_x_b: f32[64], z_b_w: f32[64, 16],
    d_h_w: f32[4, 512, 16], d_x_w: f32[4, 512, 16], d_b_w: f32[4, 512, 16], d_b_b: f32[4, 512],
    w_h: f32[4, 512, 512], w_x: f32[4, 512, 512],
) -> tuple[f32[16, 2, 512], f32[1, 2, 512], f32[1, 2, 512], f32[1, 2, 16], f32[1, 2, 16]]:
    hyp_hidden_w = hyp_hidden_w / 4.0
    hyp_input_w = hyp_input_w / 32.0
    z_h_w = z_h_w / 4.0
    z_x_w = z_x_w / 4.0
    z_b_w = z_b_w / 4.0
    d_h_w = d_h_w / 4.0
    d_x_w = d_x_w / 4.0
    d_b_w = d_b_w / 4.0
    w_h = w_h / math.sqrt(512)
    w_x = w_x / math.sqrt(512)
    hyper_size = 16
    hidden_size = 512
    n_layers = 1
    hyp_ln_w = torch.ones(4, hyper_size)
    hyp_ln_b = torch.zeros(4, hyper_size)
    ln_w = torch.ones(4, hidden_size)
    ln_b = torch.zeros(4, hidden_size)

    n_steps, batch_size = x.shape[:2]

    h = [x.new_zeros(batch_size, hidden_size) for _ in range(n_layers)]
    c = [x.new_zeros(batch_size, hidden_size) for _ in range(n_layers)]
    h_hat = [x.new_zeros(batch_size, hyper_size) for _ in range(n_layers)]
    c_hat = [x.new_zeros(batch_size, hyper_size) for _ in range(n_layers)]

    out = []
    for t in range(n_steps):
        inp = x[t]
        for layer in range(n_layers):
            # HyperLSTMCell.forward
            x_hat = torch.cat((h[layer], inp), dim=-1)
            h_hat_l, c_hat_l = _lb_lstm_cell(x_hat, h_hat[layer], c_hat[layer], hyp_hidden_w, hyp_hidden_b,
                                             hyp_input_w, hyp_ln_w, hyp_ln_b, hyp_ln_w[0], hyp_ln_b[0])

            z_h = F.linear(h_hat_l, z_h_w, z_h_b).chunk(4, dim=-1)
            z_x = F.linear(h_hat_l, z_x_w, z_x_b).chunk(4, dim=-1)
            z_b = F.linear(h_hat_l, z_b_w).chunk(4, dim=-1)

            ifgo = []
            for i in range(4):
                d_h = F.linear(z_h[i], d_h_w[i])
                d_x = F.linear(z_x[i], d_x_w[i])

                y = d_h * torch.einsum('ij,bj->bi', w_h[i], h[layer]) + \
                    d_x * torch.einsum('ij,bj->bi', w_x[i], inp) + \
                    F.linear(z_b[i], d_b_w[i], d_b_b[i])

                ifgo.append(F.layer_norm(y, (hidden_size,), ln_w[i], ln_b[i]))

            i, f, g, o = ifgo

            c_next = torch.sigmoid(f) * c[layer] + torch.sigmoid(i) * torch.tanh(g)

            h_next = torch.sigmoid(o) * torch.tanh(F.layer_norm(c_next, (hidden_size,), ln_w[0], ln_b[0]))

            h[layer], c[layer], h_hat[layer], c_hat[layer] = h_next, c_next, h_hat_l, c_hat_l
            inp = h[layer]
        out.append(h[-1])

    out = torch.stack(out)
    h = torch.stack(h)
    c = torch.stack(c)
    h_hat = torch.stack(h_hat)
    c_hat = torch.stack(c_hat)

    return out, h, c, h_hat, c_hat


# labml.ai (labmlai/annotated_deep_learning_paper_implementations), labml_nn/recurrent_highway_networks: RHNCell.forward
# and RHN.forward (state None) with weight tying c = 1 - g; input and hidden 512, depth 3, one layer; 20 steps of a
# batch of 8. The hidden_lin ModuleList is a stacked input
def rhn(
    x: f32[20, 8, 512], hidden_w: f32[3, 1024, 512], hidden_b: f32[3, 1024], input_w: f32[1024, 512]
) -> tuple[f32[20, 8, 512], f32[1, 8, 512]]:
    hidden_w = hidden_w / math.sqrt(512)
    input_w = input_w / math.sqrt(512)
    hidden_size = 512
    depth = 3
    n_layers = 1

    time_steps, batch_size = x.shape[:2]
    s = [x.new_zeros(batch_size, hidden_size) for _ in range(n_layers)]

    out = []
    for t in range(time_steps):
        inp = x[t]
        for layer in range(n_layers):
            # RHNCell.forward
            s_l = s[layer]
            for d in range(depth):
                if d == 0:
                    hg = F.linear(inp, input_w) + F.linear(s_l, hidden_w[d], hidden_b[d])
                else:
                    hg = F.linear(s_l, hidden_w[d], hidden_b[d])

                h = torch.tanh(hg[:, :hidden_size])
                g = torch.sigmoid(hg[:, hidden_size:])

                s_l = h * g + s_l * (1 - g)
            s[layer] = s_l
            inp = s[layer]
        out.append(s[-1])

    out = torch.stack(out)
    s = torch.stack(s)

    return out, s


# AllenNLP (allenai/allennlp), allennlp/modules/lstm_cell_with_projection.py: LstmCellWithProjection.forward (eval, so
# no dropout mask), initial_state None; ELMo's small configuration (elmo_2x1024_128_2048cnn_1xhighway: cell 1024,
# projection 128, cell_clip 3, proj_clip 3) in its backward direction (go_forward False); a batch of 8 sentences sorted
# by length (20, 20, 18, 17, 15, 12, 10, 7) padded to 20 tokens of 128 features
def elmo_lstm_cell_with_projection(
    inputs: f32[8, 20, 128], input_linearity_w: f32[4096, 128], state_linearity_w: f32[4096, 128],
    state_linearity_b: f32[4096], state_projection_w: f32[128, 1024],
) -> tuple[f32[8, 20, 128], f32[1, 8, 128], f32[1, 8, 1024]]:
    input_linearity_w = input_linearity_w / math.sqrt(128)
    state_linearity_w = state_linearity_w / math.sqrt(128)
    state_projection_w = state_projection_w / math.sqrt(1024)
    batch_lengths = [20, 20, 18, 17, 15, 12, 10, 7]
    hidden_size = 128
    cell_size = 1024
    go_forward = False
    memory_cell_clip_value = 3.0
    state_projection_clip_value = 3.0

    batch_size = inputs.size()[0]
    total_timesteps = inputs.size()[1]

    output_accumulator = inputs.new_zeros(batch_size, total_timesteps, hidden_size)

    full_batch_previous_memory = inputs.new_zeros(batch_size, cell_size)
    full_batch_previous_state = inputs.new_zeros(batch_size, hidden_size)

    current_length_index = batch_size - 1 if go_forward else 0
    dropout_mask = None

    for timestep in range(total_timesteps):
        # The index depends on which end we start.
        index = timestep if go_forward else total_timesteps - timestep - 1

        if go_forward:
            while batch_lengths[current_length_index] <= index:
                current_length_index -= 1
        # If we're going backwards, we are _picking up_ more indices.
        else:
            while (
                current_length_index < (len(batch_lengths) - 1)
                and batch_lengths[current_length_index + 1] > index
            ):
                current_length_index += 1

        previous_memory = full_batch_previous_memory[0: current_length_index + 1].clone()
        previous_state = full_batch_previous_state[0: current_length_index + 1].clone()
        timestep_input = inputs[0: current_length_index + 1, index]

        projected_input = F.linear(timestep_input, input_linearity_w)
        projected_state = F.linear(previous_state, state_linearity_w, state_linearity_b)

        input_gate = torch.sigmoid(
            projected_input[:, (0 * cell_size): (1 * cell_size)]
            + projected_state[:, (0 * cell_size): (1 * cell_size)]
        )
        forget_gate = torch.sigmoid(
            projected_input[:, (1 * cell_size): (2 * cell_size)]
            + projected_state[:, (1 * cell_size): (2 * cell_size)]
        )
        memory_init = torch.tanh(
            projected_input[:, (2 * cell_size): (3 * cell_size)]
            + projected_state[:, (2 * cell_size): (3 * cell_size)]
        )
        output_gate = torch.sigmoid(
            projected_input[:, (3 * cell_size): (4 * cell_size)]
            + projected_state[:, (3 * cell_size): (4 * cell_size)]
        )
        memory = input_gate * memory_init + forget_gate * previous_memory

        if memory_cell_clip_value:
            memory = torch.clamp(
                memory, -memory_cell_clip_value, memory_cell_clip_value
            )

        pre_projection_timestep_output = output_gate * torch.tanh(memory)

        timestep_output = F.linear(pre_projection_timestep_output, state_projection_w)
        if state_projection_clip_value:
            timestep_output = torch.clamp(
                timestep_output,
                -state_projection_clip_value,
                state_projection_clip_value,
            )

        if dropout_mask is not None:
            timestep_output = timestep_output * dropout_mask[0: current_length_index + 1]

        full_batch_previous_memory = full_batch_previous_memory.clone()
        full_batch_previous_state = full_batch_previous_state.clone()
        full_batch_previous_memory[0: current_length_index + 1] = memory
        full_batch_previous_state[0: current_length_index + 1] = timestep_output
        output_accumulator[0: current_length_index + 1, index] = timestep_output

    final_state = (
        full_batch_previous_state.unsqueeze(0),
        full_batch_previous_memory.unsqueeze(0),
    )

    return output_accumulator, final_state[0], final_state[1]


# AllenNLP (allenai/allennlp), allennlp/modules/augmented_lstm.py: AugmentedLSTMCell.forward and AugmentedLstm.forward
# (go_forward True, recurrent_dropout_probability 0, use_highway True, states None); the PackedSequence input is given
# padded with its lengths (what pad_packed_sequence returns) and the padded output is returned without
# pack_padded_sequence; 300-dimensional embeddings (GloVe), 256 units, a batch of 16 sentences sorted by length, 24 steps
def augmented_lstm_highway(
    sequence_tensor: f32[16, 24, 300], input_linearity_w: f32[1536, 300], input_linearity_b: f32[1536],
    state_linearity_w: f32[1280, 256], state_linearity_b: f32[1280],
) -> tuple[f32[16, 24, 256], f32[1, 16, 256], f32[1, 16, 256]]:
    input_linearity_w = input_linearity_w / math.sqrt(300)
    state_linearity_w = state_linearity_w / math.sqrt(256)
    batch_lengths = [24, 24, 23, 22, 22, 20, 19, 17, 16, 15, 13, 12, 10, 9, 7, 5]
    lstm_dim = 256
    go_forward = True
    use_highway = True
    _highway_inp_proj_start = 5 * lstm_dim
    _highway_inp_proj_end = 6 * lstm_dim

    batch_size = sequence_tensor.size()[0]
    total_timesteps = sequence_tensor.size()[1]
    output_accumulator = sequence_tensor.new_zeros(batch_size, total_timesteps, lstm_dim)
    full_batch_previous_memory = sequence_tensor.new_zeros(batch_size, lstm_dim)
    full_batch_previous_state = sequence_tensor.data.new_zeros(batch_size, lstm_dim)

    current_length_index = batch_size - 1 if go_forward else 0
    dropout_mask = None

    for timestep in range(total_timesteps):
        index = timestep if go_forward else total_timesteps - timestep - 1

        if go_forward:
            while batch_lengths[current_length_index] <= index:
                current_length_index -= 1
        # If we're going backwards, we are _picking up_ more indices.
        else:
            while (
                current_length_index < (len(batch_lengths) - 1)
                and batch_lengths[current_length_index + 1] > index
            ):
                current_length_index += 1

        previous_memory = full_batch_previous_memory[0: current_length_index + 1].clone()
        previous_state = full_batch_previous_state[0: current_length_index + 1].clone()
        timestep_input = sequence_tensor[0: current_length_index + 1, index]

        # AugmentedLSTMCell.forward
        hidden_state, memory_state = previous_state, previous_memory
        projected_input = F.linear(timestep_input, input_linearity_w, input_linearity_b)
        projected_state = F.linear(hidden_state, state_linearity_w, state_linearity_b)

        input_gate = forget_gate = memory_init = output_gate = highway_gate = None
        if use_highway:
            fused_op = projected_input[:, : 5 * lstm_dim] + projected_state
            fused_chunked = torch.chunk(fused_op, 5, 1)
            (input_gate, forget_gate, memory_init, output_gate, highway_gate) = fused_chunked
            highway_gate = torch.sigmoid(highway_gate)
        else:
            fused_op = projected_input + projected_state
            input_gate, forget_gate, memory_init, output_gate = torch.chunk(fused_op, 4, 1)
        input_gate = torch.sigmoid(input_gate)
        forget_gate = torch.sigmoid(forget_gate)
        memory_init = torch.tanh(memory_init)
        output_gate = torch.sigmoid(output_gate)
        memory = input_gate * memory_init + forget_gate * memory_state
        timestep_output = output_gate * torch.tanh(memory)

        if use_highway:
            highway_input_projection = projected_input[
                :, _highway_inp_proj_start: _highway_inp_proj_end
            ]
            timestep_output = (
                highway_gate * timestep_output
                + (1 - highway_gate) * highway_input_projection
            )

        full_batch_previous_memory = full_batch_previous_memory.data.clone()
        full_batch_previous_state = full_batch_previous_state.data.clone()
        full_batch_previous_memory[0: current_length_index + 1] = memory
        full_batch_previous_state[0: current_length_index + 1] = timestep_output
        output_accumulator[0: current_length_index + 1, index, :] = timestep_output

    final_state = (
        full_batch_previous_state.unsqueeze(0),
        full_batch_previous_memory.unsqueeze(0),
    )
    return output_accumulator, final_state[0], final_state[1]
