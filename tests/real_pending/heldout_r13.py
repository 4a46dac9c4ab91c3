"""Held-out real code of issue 14's thirteenth round that some engine refuses: Hugging Face's
HammingDiversityLogitsProcessor in group beam search (`torch.bincount`, whose result's size depends on the data).
Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import copy
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


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
