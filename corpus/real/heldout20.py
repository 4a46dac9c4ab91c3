"""Held-out real code, issue 14's twentieth round, the programs every engine runs (the round's others wait in
tests/real_pending/heldout_r20.py): torchvision's AnchorGenerator, RetinaFace's PriorBox with decode and
decode_landm; coRNN, the closed-form continuous-time (CfC) network with its input mask, the Dilated RNN's
interleaving around a GRU; Hugging Face's Llama 3 rope scaling at a decode step and SequenceBiasLogitsProcessor over
three greedy steps; DiffGrad, AggMo and timm's RMSpropTF; YOLOX's SimOTA dynamic-k matching (a uint8 matching matrix,
`topk` with a k from tensor data, masked assignments of selections), which waited in tests/real_pending at first. Ported by a helper from its reading of the originals.
Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from itertools import product
from math import ceil

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------------------------------------------

# torchvision, torchvision/models/detection/anchor_utils.py: AnchorGenerator.generate_anchors
def _tv_generate_anchors(scales, aspect_ratios, dtype=torch.float32, device=torch.device("cpu")):
    scales = torch.as_tensor(scales, dtype=dtype, device=device)
    aspect_ratios = torch.as_tensor(aspect_ratios, dtype=dtype, device=device)
    h_ratios = torch.sqrt(aspect_ratios)
    w_ratios = 1 / h_ratios

    ws = (w_ratios[:, None] * scales[None, :]).view(-1)
    hs = (h_ratios[:, None] * scales[None, :]).view(-1)

    base_anchors = torch.stack([-ws, -hs, ws, hs], dim=1) / 2
    return base_anchors.round()


# torchvision, torchvision/models/detection/anchor_utils.py: AnchorGenerator.grid_anchors
def _tv_grid_anchors(self, grid_sizes, strides):
    anchors = []
    cell_anchors = self["cell_anchors"]
    for size, stride, base_anchors in zip(grid_sizes, strides, cell_anchors):
        grid_height, grid_width = size
        stride_height, stride_width = stride
        device = base_anchors.device

        shifts_x = torch.arange(0, grid_width, dtype=torch.int32, device=device) * stride_width
        shifts_y = torch.arange(0, grid_height, dtype=torch.int32, device=device) * stride_height
        shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
        shift_x = shift_x.reshape(-1)
        shift_y = shift_y.reshape(-1)
        shifts = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)

        anchors.append((shifts.view(-1, 1, 4) + base_anchors.view(1, -1, 4)).reshape(-1, 4))
    return anchors


# torchvision, torchvision/models/detection/anchor_utils.py: AnchorGenerator.forward (with set_cell_anchors)
def _tv_anchor_forward(self, images, image_sizes, feature_maps):
    grid_sizes = [feature_map.shape[-2:] for feature_map in feature_maps]
    image_size = images.shape[-2:]
    dtype, device = feature_maps[0].dtype, feature_maps[0].device
    strides = [
        [
            torch.empty((), dtype=torch.int64, device=device).fill_(image_size[0] // g[0]),
            torch.empty((), dtype=torch.int64, device=device).fill_(image_size[1] // g[1]),
        ]
        for g in grid_sizes
    ]
    self["cell_anchors"] = [cell_anchor.to(dtype=dtype, device=device) for cell_anchor in self["cell_anchors"]]
    anchors_over_all_feature_maps = _tv_grid_anchors(self, grid_sizes, strides)
    anchors = []
    for _ in range(len(image_sizes)):
        anchors_in_image = [anchors_per_feature_map for anchors_per_feature_map in anchors_over_all_feature_maps]
        anchors.append(anchors_in_image)
    anchors = [torch.cat(anchors_per_image) for anchors_per_image in anchors]
    return anchors


# torchvision, torchvision/models/detection/anchor_utils.py: AnchorGenerator (__init__, generate_anchors,
# set_cell_anchors, grid_anchors, forward) with sizes ((16, 32), (64,)) and aspect ratios ((0.5, 1.0, 2.0),
# (0.5, 1.0)), for a batch of two 32x48 images and feature maps of 4x6 and 2x3; the module as a dict and the ImageList
# as its tensor and image sizes. The anchors are then shifted by the (scaled) raw input so the output depends on data.
def tv_anchor_generator(
    images: f32[2, 3, 32, 48], f0: f32[2, 4, 4, 6], f1: f32[2, 4, 2, 3], jitter: f32[2, 156, 4]
) -> tuple[f32[156, 4], f32[2, 156, 4]]:
    sizes = ((16, 32), (64,))
    aspect_ratios = ((0.5, 1.0, 2.0), (0.5, 1.0))
    self = {"sizes": sizes, "aspect_ratios": aspect_ratios,
            "cell_anchors": [_tv_generate_anchors(size, aspect_ratio) for size, aspect_ratio in zip(sizes,
                                                                                                  aspect_ratios)]}
    anchors = _tv_anchor_forward(self, images, [(32, 48), (32, 48)], [f0, f1])
    return anchors[0], torch.stack(anchors) + jitter * 2.0


# RetinaFace (biubug6/Pytorch_Retinaface), layers/functions/prior_box.py: PriorBox.__init__ and forward
def _rf_prior_box(cfg, image_size):
    min_sizes_cfg = cfg['min_sizes']
    steps = cfg['steps']
    clip = cfg['clip']
    feature_maps = [[ceil(image_size[0] / step), ceil(image_size[1] / step)] for step in steps]
    anchors = []
    for k, f in enumerate(feature_maps):
        min_sizes = min_sizes_cfg[k]
        for i, j in product(range(f[0]), range(f[1])):
            for min_size in min_sizes:
                s_kx = min_size / image_size[1]
                s_ky = min_size / image_size[0]
                dense_cx = [x * steps[k] / image_size[1] for x in [j + 0.5]]
                dense_cy = [y * steps[k] / image_size[0] for y in [i + 0.5]]
                for cy, cx in product(dense_cy, dense_cx):
                    anchors += [cx, cy, s_kx, s_ky]
    output = torch.Tensor(anchors).view(-1, 4)
    if clip:
        output.clamp_(max=1, min=0)
    return output


# RetinaFace (biubug6/Pytorch_Retinaface), utils/box_utils.py: decode
def _rf_decode(loc, priors, variances):
    boxes = torch.cat((
        priors[:, :2] + loc[:, :2] * variances[0] * priors[:, 2:],
        priors[:, 2:] * torch.exp(loc[:, 2:] * variances[1])), 1)
    boxes[:, :2] -= boxes[:, 2:] / 2
    boxes[:, 2:] += boxes[:, :2]
    return boxes


# RetinaFace (biubug6/Pytorch_Retinaface), utils/box_utils.py: decode_landm
def _rf_decode_landm(pre, priors, variances):
    landms = torch.cat((priors[:, :2] + pre[:, :2] * variances[0] * priors[:, 2:],
                        priors[:, :2] + pre[:, 2:4] * variances[0] * priors[:, 2:],
                        priors[:, :2] + pre[:, 4:6] * variances[0] * priors[:, 2:],
                        priors[:, :2] + pre[:, 6:8] * variances[0] * priors[:, 2:],
                        priors[:, :2] + pre[:, 8:10] * variances[0] * priors[:, 2:],
                        ), dim=1)
    return landms


# RetinaFace (biubug6/Pytorch_Retinaface), detect.py's post-network part up to the numpy conversion: PriorBox for a
# 32x48 image (cfg_mnet: min_sizes [[16, 32], [64, 128], [256, 512]], steps [8, 16, 32], variance [0.1, 0.2],
# clip False; 64 priors), decode, decode_landm, scaling by the image size (resize 1) and the face score column
def retinaface_decode(
    loc: f32[1, 64, 4], conf: f32[1, 64, 2], landms: f32[1, 64, 10]
) -> tuple[f32[64, 4], f32[64], f32[64, 10]]:
    cfg = {'min_sizes': [[16, 32], [64, 128], [256, 512]], 'steps': [8, 16, 32], 'variance': [0.1, 0.2],
           'clip': False}
    im_height, im_width = 32, 48
    resize = 1
    scale = torch.Tensor([im_width, im_height, im_width, im_height])
    priors = _rf_prior_box(cfg, image_size=(im_height, im_width))
    prior_data = priors.data
    boxes = _rf_decode(loc.data.squeeze(0), prior_data, cfg['variance'])
    boxes = boxes * scale / resize
    scores = F.softmax(conf, dim=-1).squeeze(0)[:, 1]
    landms = _rf_decode_landm(landms.data.squeeze(0), prior_data, cfg['variance'])
    scale1 = torch.Tensor([im_width, im_height, im_width, im_height, im_width, im_height,
                           im_width, im_height, im_width, im_height])
    landms = landms * scale1 / resize
    return boxes, scores, landms


# ---------------------------------------------------------------------------------------------------------------
# Recurrent
# ---------------------------------------------------------------------------------------------------------------

# coRNN (tk-rusch/coRNN), psMNIST/network.py: coRNNCell.forward
def _cornn_cell(self, x, hy, hz):
    hz = hz + self["dt"] * (torch.tanh(F.linear(torch.cat((x, hz, hy), 1), self["i2h_w"], self["i2h_b"]))
                            - self["gamma"] * hy - self["epsilon"] * hz)
    hy = hy + self["dt"] * hz
    return hy, hz


# coRNN (tk-rusch/coRNN), psMNIST/network.py: coRNN.forward (dt 0.042, gamma 2.7, epsilon 4.7 as the psMNIST run;
# input 3, hidden 12, output 4, 8 steps, batch 2); nn.Linear as F.linear at its init scale, modules as dicts,
# Variable(...).to(device) written as the tensor
def cornn_forward(
    x: f32[8, 2, 3], i2h_w: f32[12, 27], i2h_b: f32[12], ro_w: f32[4, 12], ro_b: f32[4]
) -> f32[2, 4]:
    n_hid = 12
    cell = {"dt": 0.042, "gamma": 2.7, "epsilon": 4.7, "i2h_w": i2h_w * (1 / math.sqrt(27)),
            "i2h_b": i2h_b * (1 / math.sqrt(27))}
    hy = torch.zeros(x.size(1), n_hid)
    hz = torch.zeros(x.size(1), n_hid)
    for t in range(x.size(0)):
        hy, hz = _cornn_cell(cell, x[t], hy, hz)
    output = F.linear(hy, ro_w * (1 / math.sqrt(12)), ro_b * (1 / math.sqrt(12)))
    return output


def _cfc_lecun(x):
    return 1.7159 * torch.tanh(0.666 * x)


# CfC (raminmh/CfC), torch_cfc.py: CfcCell.forward (backbone of one layer with the lecun activation, not minimal,
# gated)
def _cfc_cell(self, input, hx, ts):
    batch_size = input.size(0)
    ts = ts.view(batch_size, 1)
    x = torch.cat([input, hx], 1)
    x = _cfc_lecun(F.linear(x, self["bb_w"], self["bb_b"]))
    ff1 = torch.tanh(F.linear(x, self["ff1_w"], self["ff1_b"]))
    ff2 = torch.tanh(F.linear(x, self["ff2_w"], self["ff2_b"]))
    t_a = F.linear(x, self["ta_w"], self["ta_b"])
    t_b = F.linear(x, self["tb_w"], self["tb_b"])
    t_interp = torch.sigmoid(t_a * ts + t_b)
    if self["no_gate"]:
        new_hidden = ff1 + t_interp * ff2
    else:
        new_hidden = ff1 * (1.0 - t_interp) + t_interp * ff2
    return new_hidden


# CfC (raminmh/CfC), torch_cfc.py: Cfc.forward with a mask of the input's width (so the inputs are the forwarded
# input, the time since update and the mask: 3x in-features), return_sequences False, use_mixed False; input 3,
# hidden 8, backbone units 10, output 2, batch 2, 5 steps; timespans made positive, the mask thresholded from the raw
# input; nn.Linear layers as F.linear at their init scale, the cell as a dict
def cfc_masked_forward(
    x: f32[2, 5, 3], raw_ts: f32[2, 5, 1], raw_mask: f32[2, 5, 3], w: f32[6, 10, 17], b: f32[6, 10]
) -> f32[2, 2]:
    hidden_size, out_feature, in_features = 8, 2, 9
    s_bb = 1 / math.sqrt(in_features + hidden_size)
    s_u = 1 / math.sqrt(10)
    cell = {"bb_w": w[0] * s_bb, "bb_b": b[0] * s_bb,
            "ff1_w": w[1, :hidden_size, :10] * s_u, "ff1_b": b[1, :hidden_size] * s_u,
            "ff2_w": w[2, :hidden_size, :10] * s_u, "ff2_b": b[2, :hidden_size] * s_u,
            "ta_w": w[3, :hidden_size, :10] * s_u, "ta_b": b[3, :hidden_size] * s_u,
            "tb_w": w[4, :hidden_size, :10] * s_u, "tb_b": b[4, :hidden_size] * s_u,
            "no_gate": False}
    fc_w = w[5, :out_feature, :hidden_size] * (1 / math.sqrt(hidden_size))
    fc_b = b[5, :out_feature] * (1 / math.sqrt(hidden_size))
    timespans = raw_ts.abs() + 0.1
    mask = (raw_mask > -0.3).float()

    device = x.device
    batch_size = x.size(0)
    seq_len = x.size(1)
    true_in_features = x.size(2)
    h_state = torch.zeros((batch_size, hidden_size), device=device)
    forwarded_output = torch.zeros((batch_size, out_feature), device=device)
    forwarded_input = torch.zeros((batch_size, true_in_features), device=device)
    time_since_update = torch.zeros((batch_size, true_in_features), device=device)
    for t in range(seq_len):
        inputs = x[:, t]
        ts = timespans[:, t].squeeze()
        if mask.size(-1) == true_in_features:
            forwarded_input = mask[:, t] * inputs + (1 - mask[:, t]) * forwarded_input
            time_since_update = (ts.view(batch_size, 1) + time_since_update) * (1 - mask[:, t])
        else:
            forwarded_input = inputs
        if true_in_features * 2 < in_features and mask.size(-1) == true_in_features:
            inputs = torch.cat((forwarded_input, time_since_update, mask[:, t]), dim=1)
        else:
            inputs = torch.cat((forwarded_input, mask[:, t]), dim=1)
        h_state = _cfc_cell(cell, inputs, h_state, ts)
        cur_mask, _ = torch.max(mask[:, t], dim=1)
        cur_mask = cur_mask.view(batch_size, 1)
        current_output = F.linear(h_state, fc_w, fc_b)
        forwarded_output = cur_mask * current_output + (1.0 - cur_mask) * forwarded_output
    readout = forwarded_output
    return readout


# nn.GRU (one layer, seq-first) written out with PyTorch's gate equations (r, z, n; b_hn inside r * (...)), standing
# in for the nn.GRU cell the Dilated RNN wraps
def _gru(self, inputs, hidden):
    h = hidden[0]
    outs = []
    for t in range(inputs.size(0)):
        gi = F.linear(inputs[t], self["w_ih"], self["b_ih"])
        gh = F.linear(h, self["w_hh"], self["b_hh"])
        i_r, i_z, i_n = gi.chunk(3, 1)
        h_r, h_z, h_n = gh.chunk(3, 1)
        r = torch.sigmoid(i_r + h_r)
        z = torch.sigmoid(i_z + h_z)
        n = torch.tanh(i_n + r * h_n)
        h = (1 - z) * n + z * h
        outs.append(h)
    return torch.stack(outs), h.unsqueeze(0)


# zalandoresearch/pytorch-dilated-rnn, drnn.py: DRNN._pad_inputs
def _drnn_pad_inputs(inputs, n_steps, rate):
    is_even = (n_steps % rate) == 0
    if not is_even:
        dilated_steps = n_steps // rate + 1
        zeros_ = torch.zeros(dilated_steps * rate - inputs.size(0), inputs.size(1), inputs.size(2))
        inputs = torch.cat((inputs, zeros_))
    else:
        dilated_steps = n_steps // rate
    return inputs, dilated_steps


# zalandoresearch/pytorch-dilated-rnn, drnn.py: DRNN._prepare_inputs
def _drnn_prepare_inputs(inputs, rate):
    dilated_inputs = torch.cat([inputs[j::rate, :, :] for j in range(rate)], 1)
    return dilated_inputs


# zalandoresearch/pytorch-dilated-rnn, drnn.py: DRNN._split_outputs
def _drnn_split_outputs(dilated_outputs, rate):
    batchsize = dilated_outputs.size(1) // rate
    blocks = [dilated_outputs[:, i * batchsize: (i + 1) * batchsize, :] for i in range(rate)]
    interleaved = torch.stack((blocks)).transpose(1, 0).contiguous()
    interleaved = interleaved.view(dilated_outputs.size(0) * rate, batchsize, dilated_outputs.size(2))
    return interleaved


# zalandoresearch/pytorch-dilated-rnn, drnn.py: DRNN.drnn_layer and _apply_cell (GRU, no initial hidden state)
def _drnn_layer(cell, inputs, rate):
    n_steps = len(inputs)
    batch_size = inputs[0].size(0)
    hidden_size = cell["hidden_size"]
    inputs, _ = _drnn_pad_inputs(inputs, n_steps, rate)
    dilated_inputs = _drnn_prepare_inputs(inputs, rate)
    hidden = torch.zeros(batch_size * rate, hidden_size).unsqueeze(0)
    dilated_outputs, hidden = _gru(cell, dilated_inputs, hidden)
    splitted_outputs = _drnn_split_outputs(dilated_outputs, rate)
    outputs = splitted_outputs[:n_steps]
    return outputs, hidden


# zalandoresearch/pytorch-dilated-rnn, drnn.py: DRNN.forward (GRU cells, dilations 1, 2, 4, batch_first False, no
# hidden given; n_input 3, n_hidden 6, 7 steps so layers 2 and 3 pad, batch 2); the cells' weights at nn.GRU's init
# scale (1/sqrt(hidden)); outputs[i] = inputs[-dilation:] per layer, returned stacked with the last layer's sequence
def drnn_forward(
    x: f32[7, 2, 3], w_ih: f32[3, 18, 6], w_hh: f32[3, 18, 6], b_ih: f32[3, 18], b_hh: f32[3, 18]
) -> tuple[f32[7, 2, 6], f32[1, 2, 6], f32[2, 2, 6], f32[4, 2, 6]]:
    s = 1 / math.sqrt(6)
    cells = [{"hidden_size": 6, "w_ih": w_ih[0, :, :3] * s, "w_hh": w_hh[0] * s, "b_ih": b_ih[0] * s,
              "b_hh": b_hh[0] * s}]
    for i in (1, 2):
        cells.append({"hidden_size": 6, "w_ih": w_ih[i] * s, "w_hh": w_hh[i] * s, "b_ih": b_ih[i] * s,
                      "b_hh": b_hh[i] * s})
    dilations = [1, 2, 4]
    inputs = x
    outputs = []
    for i, (cell, dilation) in enumerate(zip(cells, dilations)):
        inputs, _ = _drnn_layer(cell, inputs, dilation)
        outputs.append(inputs[-dilation:])
    return inputs, outputs[0], outputs[1], outputs[2]


# ---------------------------------------------------------------------------------------------------------------
# LLM decode
# ---------------------------------------------------------------------------------------------------------------

# Hugging Face transformers, modeling_rope_utils.py: _compute_default_rope_parameters
def _hf_default_rope(config, device=None, seq_len=None):
    base = config["rope_theta"]
    partial_rotary_factor = config.get("partial_rotary_factor", 1.0)
    head_dim = config.get("head_dim", None) or config["hidden_size"] // config["num_attention_heads"]
    dim = int(head_dim * partial_rotary_factor)
    attention_factor = 1.0
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=device, dtype=torch.float) / dim))
    return inv_freq, attention_factor


# Hugging Face transformers, modeling_rope_utils.py: _compute_llama3_parameters
def _hf_llama3_rope(config, device=None, seq_len=None):
    inv_freq, attention_factor = _hf_default_rope(config, device, seq_len)
    factor = config["rope_scaling"]["factor"]
    low_freq_factor = config["rope_scaling"]["low_freq_factor"]
    high_freq_factor = config["rope_scaling"]["high_freq_factor"]
    old_context_len = config["rope_scaling"]["original_max_position_embeddings"]
    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor

    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
    return inv_freq_llama, attention_factor


# Hugging Face transformers, models/llama/modeling_llama.py: LlamaRotaryEmbedding.forward (autocast block as plain code)
def _hf_rotary_forward(self, x, position_ids):
    inv_freq_expanded = self["inv_freq"][None, :, None].float().expand(position_ids.shape[0], -1, 1).to(x.device)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * self["attention_scaling"]
    sin = emb.sin() * self["attention_scaling"]
    return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def _hf_rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def _hf_apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (_hf_rotate_half(q) * sin)
    k_embed = (k * cos) + (_hf_rotate_half(k) * sin)
    return q_embed, k_embed


# Hugging Face transformers, modeling_rope_utils.py: _compute_llama3_parameters (factor 8, low/high freq factors 1
# and 4, original context 8192, rope_theta 500000 as Llama 3.1), LlamaRotaryEmbedding.forward and
# apply_rotary_pos_emb with rotate_half, at one decode step per sequence (batch 3 at positions 100 + 37 * id, 4 query
# heads and 2 key heads of dim 16); the config and module as dicts
def hf_llama3_rope_decode(
    q: f32[3, 4, 1, 16], k: f32[3, 2, 1, 16], pos_raw: i64[3, 1]
) -> tuple[f32[3, 4, 1, 16], f32[3, 2, 1, 16], f32[8]]:
    config = {"rope_theta": 500000.0, "hidden_size": 64, "num_attention_heads": 4, "head_dim": 16,
              "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 8192, "rope_type": "llama3"}}
    inv_freq, attention_scaling = _hf_llama3_rope(config)
    rotary = {"inv_freq": inv_freq, "attention_scaling": attention_scaling}
    position_ids = 100 + 37 * pos_raw
    cos, sin = _hf_rotary_forward(rotary, q, position_ids)
    q_embed, k_embed = _hf_apply_rotary_pos_emb(q, k, cos, sin)
    return q_embed, k_embed, inv_freq


# Hugging Face transformers, generation/logits_process.py: SequenceBiasLogitsProcessor (__init__ with
# _convert_list_arguments_into_dict, _prepare_bias_variables, __call__); the processor as a dict
def _hf_seqbias_init(sequence_bias):
    self = {"sequence_bias": sequence_bias}
    if isinstance(self["sequence_bias"], list):
        temp_sequence = {}
        for sb in self["sequence_bias"]:
            temp_sequence[tuple(sb[0])] = sb[1]
        self["sequence_bias"] = temp_sequence
    self["length_1_bias"] = None
    self["prepared_bias_variables"] = False
    return self


def _hf_seqbias_prepare(self, scores):
    vocabulary_size = scores.shape[-1]
    invalid_biases = []
    for sequence_ids in self["sequence_bias"]:
        for token_id in sequence_ids:
            if token_id >= vocabulary_size:
                invalid_biases.append(token_id)
    if len(invalid_biases) > 0:
        raise ValueError(f"The model vocabulary size is {vocabulary_size}, but the following tokens were being biased: "
                         f"{invalid_biases}")
    self["length_1_bias"] = torch.zeros((vocabulary_size,), dtype=torch.float, device=scores.device)
    for sequence_ids, bias in self["sequence_bias"].items():
        if len(sequence_ids) == 1:
            self["length_1_bias"][sequence_ids[-1]] = bias
    self["prepared_bias_variables"] = True


def _hf_seqbias_call(self, input_ids, scores):
    if not self["prepared_bias_variables"]:
        _hf_seqbias_prepare(self, scores)
    bias = torch.zeros_like(scores)
    bias += self["length_1_bias"]
    for sequence_ids, sequence_bias in self["sequence_bias"].items():
        if len(sequence_ids) == 1:
            continue
        if len(sequence_ids) > input_ids.shape[1]:
            continue
        prefix_length = len(sequence_ids) - 1
        last_token = sequence_ids[-1]
        matching_rows = torch.eq(
            input_ids[:, -prefix_length:],
            torch.tensor(sequence_ids[:-1], dtype=input_ids.dtype, device=input_ids.device),
        ).prod(dim=1)
        bias[:, last_token] += torch.where(
            matching_rows.bool(),
            torch.tensor(sequence_bias, device=input_ids.device),
            torch.tensor(0.0, device=input_ids.device),
        )
    scores_processed = scores + bias
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: SequenceBiasLogitsProcessor in greedy search over three
# steps (list-form sequence_bias [[[3], 2.0], [[5, 1], -3.0], [[2, 7, 4], 1.5], [[9], -1.0], [[1, 1], 2.5]],
# vocabulary 10, batch 4, prompt 2 tokens so the 3-token sequence is skipped on the first step); the model is a
# stand-in whose per-step logits are inputs (scaled by 2); tokens appended with torch.cat as the loop does
def hf_sequence_bias_greedy(input_ids: i64[4, 2], logits: f32[3, 4, 10]) -> tuple[i64[4, 5], f32[4, 10]]:
    processor = _hf_seqbias_init([[[3], 2.0], [[5, 1], -3.0], [[2, 7, 4], 1.5], [[9], -1.0], [[1, 1], 2.5]])
    next_token_scores = None
    for step in range(3):
        next_token_logits = logits[step] * 2.0
        next_token_scores = _hf_seqbias_call(processor, input_ids, next_token_logits)
        next_tokens = torch.argmax(next_token_scores, dim=-1)
        input_ids = torch.cat([input_ids, next_tokens[:, None]], dim=-1)
    return input_ids, next_token_scores


# ---------------------------------------------------------------------------------------------------------------
# Optimizers
# ---------------------------------------------------------------------------------------------------------------

# DiffGrad (jettify/pytorch-optimizer), torch_optimizer/diffgrad.py: DiffGrad.step (lr 1e-3, betas (0.9, 0.999),
# eps 1e-8, weight_decay 1e-2, so grad.add_ writes into p.grad), three steps on a weight and a bias; p.grad is the
# step's gradient slice (a view of the input, so the in-place decay reaches it); `p.data` written `p`; state dicts by
# parameter index
def diffgrad_steps(w: f32[6, 5], b: f32[6], gw: f32[3, 6, 5], gb: f32[3, 6]) -> tuple[f32[6, 5], f32[6]]:
    group = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2}
    params = [w, b]
    state_all = {}
    for k in range(3):
        grads = [gw[k], gb[k]]
        beta1, beta2 = group['betas']
        for i, p in enumerate(params):
            grad = grads[i]
            if i not in state_all:
                state_all[i] = {}
            state = state_all[i]
            if len(state) == 0:
                state['step'] = 0
                state['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state['previous_grad'] = torch.zeros_like(p, memory_format=torch.preserve_format)
            exp_avg, exp_avg_sq, previous_grad = (state['exp_avg'], state['exp_avg_sq'], state['previous_grad'])
            state['step'] += 1
            if group['weight_decay'] != 0:
                grad.add_(p, alpha=group['weight_decay'])
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = exp_avg_sq.sqrt().add_(group['eps'])
            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']
            diff = torch.abs(previous_grad - grad)
            dfc = torch.div(1.0, (1.0 + torch.exp(-diff)))
            state['previous_grad'] = grad.clone()
            exp_avg1 = exp_avg * dfc
            step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1
            p.addcdiv_(exp_avg1, denom, value=-step_size)
    return state_all[0]['previous_grad'], state_all[1]['exp_avg']


# AggMo (jettify/pytorch-optimizer), torch_optimizer/aggmo.py: AggMo.step (lr 0.1, betas (0.0, 0.9, 0.99),
# weight_decay 1e-3, so d_p.add_ writes into p.grad), four steps on a weight and a bias with p.grad each step's
# gradient slice; the momentum buffers in a dict keyed by beta as the original keeps them; `p.data` written `p`
def aggmo_steps(w: f32[4, 6], b: f32[4], gw: f32[4, 4, 6], gb: f32[4, 4]) -> f32[4, 6]:
    group = {"lr": 0.1, "betas": (0.0, 0.9, 0.99), "weight_decay": 1e-3}
    state = {}
    for k in range(4):
        grads = {0: gw[k], 1: gb[k]}
        weight_decay = group['weight_decay']
        betas = group['betas']
        total_mom = float(len(betas))
        for i, p in enumerate([w, b]):
            d_p = grads[i]
            if weight_decay != 0:
                d_p.add_(p, alpha=weight_decay)
            param_state = state.setdefault(i, {})
            if 'momentum_buffer' not in param_state:
                param_state['momentum_buffer'] = {}
                for beta in betas:
                    param_state['momentum_buffer'][beta] = torch.zeros_like(p, memory_format=torch.preserve_format)
            for beta in betas:
                buf = param_state['momentum_buffer'][beta]
                buf.mul_(beta).add_(d_p)
                p.sub_(buf, alpha=group['lr'] / total_mom)
    return state[0]['momentum_buffer'][0.99]


# timm (huggingface/pytorch-image-models), timm/optim/rmsprop_tf.py: RMSpropTF.step (lr 1e-2, alpha 0.9, eps 1e-3,
# momentum 0.9, centered True, weight_decay 1e-2 decoupled, lr_in_momentum True), three steps on a weight and a
# bias with fixed gradients; @torch.no_grad and the closure left out; state dicts by parameter index
def timm_rmsprop_tf_steps(w: f32[5, 8], b: f32[5], gw: f32[5, 8], gb: f32[5]) -> tuple[f32[5, 8], f32[5, 8]]:
    group = {"lr": 1e-2, "alpha": 0.9, "eps": 1e-3, "weight_decay": 1e-2, "momentum": 0.9, "centered": True,
             "decoupled_decay": True, "lr_in_momentum": True}
    states = {}
    for _ in range(3):
        for i, (p, grad) in enumerate(zip([w, b], [gw, gb])):
            state = states.setdefault(i, {})
            if len(state) == 0:
                state['step'] = 0
                state['square_avg'] = torch.ones_like(p)
                if group['momentum'] > 0:
                    state['momentum_buffer'] = torch.zeros_like(p)
                if group['centered']:
                    state['grad_avg'] = torch.zeros_like(p)
            square_avg = state['square_avg']
            one_minus_alpha = 1. - group['alpha']
            state['step'] += 1
            if group['weight_decay'] != 0:
                if group['decoupled_decay']:
                    p.mul_(1. - group['lr'] * group['weight_decay'])
                else:
                    grad = grad.add(p, alpha=group['weight_decay'])
            square_avg.add_(grad.pow(2) - square_avg, alpha=one_minus_alpha)
            if group['centered']:
                grad_avg = state['grad_avg']
                grad_avg.add_(grad - grad_avg, alpha=one_minus_alpha)
                avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).add(group['eps']).sqrt_()
            else:
                avg = square_avg.add(group['eps']).sqrt_()
            if group['momentum'] > 0:
                buf = state['momentum_buffer']
                if group['lr_in_momentum']:
                    buf.mul_(group['momentum']).addcdiv_(grad, avg, value=group['lr'])
                    p.add_(-buf)
                else:
                    buf.mul_(group['momentum']).addcdiv_(grad, avg)
                    p.add_(buf, alpha=-group['lr'])
            else:
                p.addcdiv_(grad, avg, value=-group['lr'])
    return states[0]['momentum_buffer'], states[0]['grad_avg']


# YOLOX (Megvii-BaseDetection/YOLOX), yolox/models/yolo_head.py: YOLOXHead.dynamic_k_matching
def _yolox_dynamic_k_matching(cost, pair_wise_ious, gt_classes, num_gt, fg_mask):
    matching_matrix = torch.zeros_like(cost, dtype=torch.uint8)

    n_candidate_k = min(10, pair_wise_ious.size(1))
    topk_ious, _ = torch.topk(pair_wise_ious, n_candidate_k, dim=1)
    dynamic_ks = torch.clamp(topk_ious.sum(1).int(), min=1)
    for gt_idx in range(num_gt):
        _, pos_idx = torch.topk(cost[gt_idx], k=dynamic_ks[gt_idx], largest=False)
        matching_matrix[gt_idx][pos_idx] = 1

    del topk_ious, dynamic_ks, pos_idx

    anchor_matching_gt = matching_matrix.sum(0)
    # deal with the case that one anchor matches multiple ground-truths
    if anchor_matching_gt.max() > 1:
        multiple_match_mask = anchor_matching_gt > 1
        _, cost_argmin = torch.min(cost[:, multiple_match_mask], dim=0)
        matching_matrix[:, multiple_match_mask] *= 0
        matching_matrix[cost_argmin, multiple_match_mask] = 1
    fg_mask_inboxes = anchor_matching_gt > 0
    num_fg = fg_mask_inboxes.sum().item()

    fg_mask[fg_mask.clone()] = fg_mask_inboxes

    matched_gt_inds = matching_matrix[:, fg_mask_inboxes].argmax(0)
    gt_matched_classes = gt_classes[matched_gt_inds]

    pred_ious_this_matching = (matching_matrix * pair_wise_ious).sum(0)[fg_mask_inboxes]
    return num_fg, gt_matched_classes, pred_ious_this_matching, matched_gt_inds


# YOLOX (Megvii-BaseDetection/YOLOX), yolox/models/yolo_head.py: YOLOXHead.dynamic_k_matching, fed as get_assignments
# feeds it (cost = cls cost + 3 * iou cost + 100000 * ~is_in_boxes_and_center); 4 gts, 30 anchors of which the
# 20 with index % 3 != 0 are in fg_mask (so the cost has 20 columns); IoUs made in [0, 1) from the raw input. The
# dynamically sized results are scattered back into fixed-size outputs through the updated fg_mask (per-anchor matched
# gt index, class and IoU; -1 / 0 elsewhere), returned with fg_mask and num_fg.
def yolox_dynamic_k_matching(
    raw_ious: f32[4, 20], raw_cls: f32[4, 20], in_center: bool[4, 20], gt_classes_raw: i64[4]
) -> tuple[bool[30], i64[30], i64[30], f32[30], i64[()]]:
    num_gt = 4
    fg_mask = torch.arange(30) % 3 != 0
    pair_wise_ious = (raw_ious + 1.0) * 0.5
    pair_wise_ious_loss = -torch.log(pair_wise_ious + 1e-8)
    pair_wise_cls_loss = raw_cls.abs() * 2.0
    cost = pair_wise_cls_loss + 3.0 * pair_wise_ious_loss + 100000.0 * (~in_center)
    gt_classes = (gt_classes_raw % 5).float()
    num_fg, gt_matched_classes, pred_ious_this_matching, matched_gt_inds = _yolox_dynamic_k_matching(
        cost, pair_wise_ious, gt_classes, num_gt, fg_mask)
    cls_out = torch.full((30,), -1, dtype=torch.int64)
    cls_out[fg_mask] = gt_matched_classes.long()
    iou_out = torch.zeros(30)
    iou_out[fg_mask] = pred_ious_this_matching
    gt_out = torch.full((30,), -1, dtype=torch.int64)
    gt_out[fg_mask] = matched_gt_inds
    return fg_mask, gt_out, cls_out, iou_out, torch.tensor(num_fg)
