"""Held-out real code of issue 14's thirteenth round that some engine refuses: ndrplz's ConvLSTM (`F.conv2d`) and
Hugging Face's HammingDiversityLogitsProcessor in group beam search (`torch.bincount`, whose result's size depends on
the data). Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _conv_lstm_cell_forward(cell, input_tensor, cur_state):
    h_cur, c_cur = cur_state

    combined = torch.cat([input_tensor, h_cur], dim=1)  # concatenate along channel axis

    combined_conv = F.conv2d(combined, cell['weight'], cell['bias'], padding=cell['padding'])
    cc_i, cc_f, cc_o, cc_g = torch.split(combined_conv, cell['hidden_dim'], dim=1)
    i = torch.sigmoid(cc_i)
    f = torch.sigmoid(cc_f)
    o = torch.sigmoid(cc_o)
    g = torch.tanh(cc_g)

    c_next = f * c_cur + i * g
    h_next = o * torch.tanh(c_next)

    return h_next, c_next


def _conv_lstm_cell_init_hidden(cell, batch_size, image_size):
    height, width = image_size
    return (torch.zeros(batch_size, cell['hidden_dim'], height, width, device=cell['weight'].device),
            torch.zeros(batch_size, cell['hidden_dim'], height, width, device=cell['weight'].device))


# ConvLSTM (ndrplz/ConvLSTM_pytorch), convlstm.py: ConvLSTMCell.forward and init_hidden, ConvLSTM.forward and
# _init_hidden (input_dim 2, hidden_dim 4, kernel (3, 3), 2 layers, batch_first, bias, return_all_layers False; batch
# 2, 3 steps of 6x6 maps); each cell's nn.Conv2d as F.conv2d with its weight and bias (weights at the conv's default
# init scale, 1/sqrt(fan_in)), the cells as dicts of their attributes
def convlstm_forward(
    input_tensor: f32[2, 3, 2, 6, 6], raw_w0: f32[16, 6, 3, 3], raw_b0: f32[16], raw_w1: f32[16, 8, 3, 3],
    raw_b1: f32[16]
) -> tuple[f32[2, 3, 4, 6, 6], f32[2, 4, 6, 6], f32[2, 4, 6, 6]]:
    kernel_size = (3, 3)
    padding = kernel_size[0] // 2, kernel_size[1] // 2
    cell_list = [
        {'hidden_dim': 4, 'padding': padding, 'weight': raw_w0 / math.sqrt(6 * 9), 'bias': raw_b0 / math.sqrt(6 * 9)},
        {'hidden_dim': 4, 'padding': padding, 'weight': raw_w1 / math.sqrt(8 * 9), 'bias': raw_b1 / math.sqrt(8 * 9)},
    ]
    num_layers = 2
    batch_first = True
    return_all_layers = False
    hidden_state = None

    if not batch_first:
        # (t, b, c, h, w) -> (b, t, c, h, w)
        input_tensor = input_tensor.permute(1, 0, 2, 3, 4)

    b, _, _, h, w = input_tensor.size()

    # Implement stateful ConvLSTM
    if hidden_state is None:
        # Since the init is done in forward. Can send image size here
        hidden_state = []
        for i in range(num_layers):
            hidden_state.append(_conv_lstm_cell_init_hidden(cell_list[i], b, (h, w)))

    layer_output_list = []
    last_state_list = []

    seq_len = input_tensor.size(1)
    cur_layer_input = input_tensor

    for layer_idx in range(num_layers):

        h, c = hidden_state[layer_idx]
        output_inner = []
        for t in range(seq_len):
            h, c = _conv_lstm_cell_forward(cell_list[layer_idx], input_tensor=cur_layer_input[:, t, :, :, :],
                                           cur_state=[h, c])
            output_inner.append(h)

        layer_output = torch.stack(output_inner, dim=1)
        cur_layer_input = layer_output

        layer_output_list.append(layer_output)
        last_state_list.append([h, c])

    if not return_all_layers:
        layer_output_list = layer_output_list[-1:]
        last_state_list = last_state_list[-1:]

    return layer_output_list[0], last_state_list[0][0], last_state_list[0][1]

def _hamming_diversity_call(self, input_ids, scores, current_tokens, beam_group_idx):
    # hamming diversity: penalise using same token in current group which was used in previous groups at
    # the same time step
    batch_size = current_tokens.shape[0] // self['_num_beams']
    group_start_idx = beam_group_idx * self['_num_sub_beams']
    group_end_idx = min(group_start_idx + self['_num_sub_beams'], self['_num_beams'])
    group_size = group_end_idx - group_start_idx
    vocab_size = scores.shape[-1]

    if group_start_idx == 0:
        return scores

    scores_processed = scores.clone()
    for batch_idx in range(batch_size):
        # predicted tokens of last time step of previous groups
        previous_group_tokens = current_tokens[
            batch_idx * self['_num_beams'] : batch_idx * self['_num_beams'] + group_start_idx
        ]
        token_frequency = torch.bincount(previous_group_tokens, minlength=vocab_size).to(scores.device)
        scores_processed[batch_idx * group_size : (batch_idx + 1) * group_size] -= (
            self['_diversity_penalty'] * token_frequency
        )

    return scores_processed


# Hugging Face transformers, generation/logits_process.py: HammingDiversityLogitsProcessor.__init__ and __call__
# (diversity_penalty 1.5, num_beams 6, num_beam_groups 3), driven as GenerationMixin._group_beam_search drives it for
# one step: current_tokens zeroed, then per group the batch_group_indices, the group's log_softmax scores, the
# processor, and current_tokens[batch_group_indices] = the group's new last tokens (batch 2, vocabulary 12). The beam
# scorer is a stand-in: each beam continues itself with the argmax of its processed scores
def hf_hamming_diversity_group_beam(
    input_ids: i64[12, 4], logits: f32[12, 12]
) -> tuple[f32[4, 12], f32[4, 12], f32[4, 12], i64[12]]:
    diversity_penalty, num_beams, num_beam_groups = 1.5, 6, 3
    if not isinstance(diversity_penalty, float) or (not diversity_penalty > 0.0):
        raise ValueError("`diversity_penalty` should be a float strictly larger than 0.")
    processor = {'_diversity_penalty': diversity_penalty}
    if not isinstance(num_beams, int) or num_beams < 2:
        raise ValueError("`num_beams` should be an integer strictly larger than 1.")
    processor['_num_beams'] = num_beams
    if not isinstance(num_beam_groups, int) or num_beam_groups < 2:
        raise ValueError("`num_beam_groups` should be an integer strictly larger than 1.")
    if num_beam_groups > num_beams:
        raise ValueError("`beam_groups` has to be smaller or equal to `num_beams`.")
    processor['_num_sub_beams'] = num_beams // num_beam_groups

    batch_size = input_ids.shape[0] // num_beams
    num_sub_beams = num_beams // num_beam_groups
    # predicted tokens in cur_len step
    current_tokens = torch.zeros(batch_size * num_beams, dtype=input_ids.dtype, device=input_ids.device)
    processed = []
    for beam_group_idx in range(num_beam_groups):
        group_start_idx = beam_group_idx * num_sub_beams
        group_end_idx = min(group_start_idx + num_sub_beams, num_beams)
        group_size = group_end_idx - group_start_idx

        # indices of beams of current group among all sentences in batch
        batch_group_indices = []

        for batch_idx in range(batch_size):
            batch_group_indices.extend(
                [batch_idx * num_beams + idx for idx in range(group_start_idx, group_end_idx)]
            )
        group_input_ids = input_ids[batch_group_indices]

        # select outputs of beams of current group only
        next_token_logits = logits[batch_group_indices, :]
        next_token_scores = nn.functional.log_softmax(next_token_logits, dim=-1)

        next_token_scores_processed = _hamming_diversity_call(
            processor, group_input_ids, next_token_scores, current_tokens=current_tokens, beam_group_idx=beam_group_idx
        )
        processed.append(next_token_scores_processed)

        # stand-in for the beam scorer: each beam keeps its history and takes its best token
        beam_next_tokens = next_token_scores_processed.argmax(dim=-1)
        group_input_ids = torch.cat([group_input_ids, beam_next_tokens.unsqueeze(-1)], dim=-1)
        current_tokens[batch_group_indices] = group_input_ids[:, -1]
    return processed[0], processed[1], processed[2], current_tokens
