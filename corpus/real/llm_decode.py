"""LLM decode-step code ported from Mistral's reference implementation (a rotating KV cache written with scatter_)
and Hugging Face transformers' logits processors and llama3 RoPE frequencies, vLLM's top-k/top-p filter, chunked feed-forward (a nested function), sliding-window cache and Hamming diversity penalty in group beam search
(`torch.bincount` with `minlength`), and llama's greedy generation loop (a data-dependent `break`, which waited in
tests/real_pending at first)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


# Mistral (mistralai/mistral-src), one_file_ref.py: repeat_kv
def _repeat_kv(keys, values, repeats: int):
    keys = torch.repeat_interleave(keys, repeats=repeats, dim=2)
    values = torch.repeat_interleave(values, repeats=repeats, dim=2)
    return keys, values


# Mistral (mistralai/mistral-src), one_file_ref.py: Attention.forward after the rotary embedding, prefill of 12
# positions into a rotating cache of sliding_window 8 (scatter_ at positions % sliding_window), then attention of
# the prompt over its own keys and values with the sliding-window causal mask
def mistral_rotating_cache_prefill(
    xq: f32[1, 12, 4, 8], xk: f32[1, 12, 2, 8], xv: f32[1, 12, 2, 8], cache_k: f32[1, 8, 2, 8],
    cache_v: f32[1, 8, 2, 8]
) -> f32[1, 12, 32]:
    bsz, seqlen, n_heads, head_dim = xq.shape
    n_kv_heads, sliding_window = 2, 8
    repeats = n_heads // n_kv_heads
    positions = torch.arange(0, seqlen)
    scatter_pos = (positions[-sliding_window:] % sliding_window)[None, :, None, None]
    scatter_pos = scatter_pos.repeat(bsz, 1, n_kv_heads, head_dim)
    cache_k[:bsz].scatter_(dim=1, index=scatter_pos, src=xk[:, -sliding_window:])
    cache_v[:bsz].scatter_(dim=1, index=scatter_pos, src=xv[:, -sliding_window:])
    if positions.shape[0] > 1:
        key, value = _repeat_kv(xk, xv, repeats)
    else:
        cur_pos = positions[-1].item() + 1
        key, value = _repeat_kv(cache_k[:bsz, :cur_pos, ...], cache_v[:bsz, :cur_pos, ...], repeats)
    query = xq.transpose(1, 2)
    key = key.transpose(1, 2)
    value = value.transpose(1, 2)
    scores = torch.matmul(query, key.transpose(2, 3)) * (head_dim**-0.5)
    tensor = torch.full((seqlen, seqlen), dtype=xq.dtype, fill_value=1)
    mask = torch.tril(tensor, diagonal=0).to(xq.dtype)
    mask = torch.triu(mask, diagonal=-sliding_window)
    mask = torch.log(mask)
    scores += mask[None, None, ...]
    scores = scores.float()
    scores = F.softmax(scores, dim=-1).type_as(query)
    output = torch.matmul(scores, value)
    output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
    return output


# Hugging Face transformers, generation/logits_process.py: ExponentialDecayLengthPenalty.__call__ (exponential_decay
# (5, 1.5), eos ids [2, 7], input length 3)
def hf_exponential_decay_length_penalty(input_ids: i64[2, 9], scores: f32[2, 32]) -> f32[2, 32]:
    regulation_start, regulation_factor = 5 + 3, 1.5
    eos_token_id = [2, 7]
    cur_len = input_ids.shape[-1]
    penalties = torch.zeros_like(scores)
    penalized_scores = scores
    if cur_len > regulation_start:
        penalty_idx = cur_len - regulation_start
        penalty = torch.abs(scores[:, eos_token_id]) * (pow(regulation_factor, penalty_idx) - 1)
        penalties[:, eos_token_id] = penalty
        penalized_scores = scores + penalties
    return penalized_scores


# Hugging Face transformers, generation/logits_process.py: UnbatchedClassifierFreeGuidanceLogitsProcessor.__call__
# (guidance_scale 1.5; the unconditional model's logits given)
def hf_unbatched_cfg(input_ids: i64[2, 6], scores: f32[2, 32], logits: f32[2, 6, 32]) -> f32[2, 32]:
    guidance_scale = 1.5
    scores = torch.nn.functional.log_softmax(scores, dim=-1)
    if guidance_scale == 1:
        return scores
    unconditional_logits = torch.nn.functional.log_softmax(logits[:, -1], dim=-1)
    scores_processed = guidance_scale * (scores - unconditional_logits) + unconditional_logits
    return scores_processed


# Hugging Face transformers, pytorch_utils.py: apply_chunking_to_forward (the inspect.signature check left out)
def _apply_chunking_to_forward(forward_fn, chunk_size: int, chunk_dim: int, *input_tensors):
    assert len(input_tensors) > 0, f"{input_tensors} has to be a tuple/list of tensors"
    if chunk_size > 0:
        tensor_shape = input_tensors[0].shape[chunk_dim]
        for input_tensor in input_tensors:
            if input_tensor.shape[chunk_dim] != tensor_shape:
                raise ValueError(
                    f"All input tenors have to be of the same shape: {tensor_shape}, "
                    f"found shape {input_tensor.shape[chunk_dim]}"
                )
        if input_tensors[0].shape[chunk_dim] % chunk_size != 0:
            raise ValueError(
                f"The dimension to be chunked {input_tensors[0].shape[chunk_dim]} has to be a multiple of the chunk "
                f"size {chunk_size}"
            )
        num_chunks = input_tensors[0].shape[chunk_dim] // chunk_size
        input_tensors_chunks = tuple(input_tensor.chunk(num_chunks, dim=chunk_dim) for input_tensor in input_tensors)
        output_chunks = tuple(forward_fn(*input_tensors_chunk) for input_tensors_chunk in zip(*input_tensors_chunks))
        return torch.cat(output_chunks, dim=chunk_dim)
    return forward_fn(*input_tensors)


# Hugging Face transformers, models/bert/modeling_bert.py: BertIntermediate, BertOutput and BertLayer.feed_forward_chunk
# (gelu, no dropout), run through apply_chunking_to_forward with chunk_size_feed_forward 4 over the sequence
def hf_bert_chunked_feed_forward(
    attention_output: f32[2, 8, 16], w_in: f32[32, 16], b_in: f32[32], w_out: f32[16, 32], b_out: f32[16],
    ln_w: f32[16], ln_b: f32[16]
) -> f32[2, 8, 16]:
    w_in, w_out = w_in * 0.25, w_out * 0.18

    def feed_forward_chunk(attention_output):
        intermediate_output = F.gelu(F.linear(attention_output, w_in, b_in))
        hidden_states = F.linear(intermediate_output, w_out, b_out)
        return F.layer_norm(hidden_states + attention_output, (16,), ln_w, ln_b, eps=1e-12)

    return _apply_chunking_to_forward(feed_forward_chunk, 4, 1, attention_output)


# Hugging Face transformers, cache_utils.py: SlidingWindowLayer.update (max_cache_len 6), a prompt of 4 positions
# then 4 decode steps: index_copy_ while the window has room, roll and write at index -1 once it is full
def hf_sliding_window_cache(
    keys: f32[1, 2, 6, 8], values: f32[1, 2, 6, 8], prompt_k: f32[1, 2, 4, 8], prompt_v: f32[1, 2, 4, 8],
    new_k: f32[4, 1, 2, 1, 8], new_v: f32[4, 1, 2, 1, 8]
) -> tuple[f32[1, 2, 6, 8], f32[1, 2, 6, 8]]:
    max_cache_len = 6
    cumulative_length = 0
    keys.zero_()
    values.zero_()
    steps = [(prompt_k, prompt_v, torch.arange(4))]
    for i in range(4):
        steps.append((new_k[i], new_v[i], torch.tensor([4 + i])))
    for key_states, value_states, cache_position in steps:
        is_full = cumulative_length >= max_cache_len
        cumulative_length += key_states.shape[-2]
        if cache_position.shape[0] > max_cache_len:
            keys.copy_(key_states[:, :, -max_cache_len:, :])
            values.copy_(value_states[:, :, -max_cache_len:, :])
            continue
        if is_full:
            new_keys = keys.roll(-1, dims=-2)
            new_values = values.roll(-1, dims=-2)
            index = torch.tensor([-1], dtype=int)
            new_keys[:, :, index] = key_states
            new_values[:, :, index] = value_states
            keys.copy_(new_keys)
            values.copy_(new_values)
        else:
            try:
                keys.index_copy_(2, cache_position, key_states)
                values.index_copy_(2, cache_position, value_states)
            except NotImplementedError:
                keys[:, :, cache_position] = key_states
                values[:, :, cache_position] = value_states
    return keys, values


# Hugging Face transformers, modeling_rope_utils.py: _compute_default_rope_parameters and
# _compute_llama3_parameters (rope_theta 500000, head_dim 32, factor 8, low_freq_factor 1, high_freq_factor 4,
# original_max_position_embeddings 8192); then LlamaRotaryEmbedding.forward's cos and sin for the positions (the
# config object's fields are locals and a dict; positions are scaled by 900 to reach the long wavelengths)
def hf_llama3_rope(position_ids: i64[2, 7]) -> tuple[f32[2, 7, 32], f32[2, 7, 32]]:
    position_ids = position_ids * 900
    base = 500000.0
    dim = 32
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).to(device=None, dtype=torch.float) / dim))
    attention_factor = 1.0
    rope_scaling = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    factor = rope_scaling["factor"]
    low_freq_factor = rope_scaling["low_freq_factor"]
    high_freq_factor = rope_scaling["high_freq_factor"]
    old_context_len = rope_scaling["original_max_position_embeddings"]

    low_freq_wavelen = old_context_len / low_freq_factor
    high_freq_wavelen = old_context_len / high_freq_factor

    wavelen = 2 * math.pi / inv_freq
    inv_freq_llama = torch.where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
    smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
    smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
    is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    inv_freq_llama = torch.where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)

    inv_freq_expanded = inv_freq_llama[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos() * attention_factor
    sin = emb.sin() * attention_factor
    return cos, sin


# vLLM, vllm/v1/sample/ops/topk_topp_sampler.py: apply_top_k_top_p_pytorch with both k and p (the k of each request
# is 1 + a 0..9 input, p maps the input to [0.5, 1))
def vllm_top_k_top_p(logits: f32[4, 64], k_raw: i64[4], p_raw: f32[4]) -> f32[4, 64]:
    k = k_raw + 1
    p = p_raw / 4 + 0.75
    logits_sort, logits_idx = logits.sort(dim=-1, descending=False)

    if k is not None:
        top_k_mask = logits_sort.size(1) - k.to(torch.long)
        top_k_mask = logits_sort.gather(1, top_k_mask.unsqueeze(dim=1))
        top_k_mask = logits_sort < top_k_mask
        logits_sort.masked_fill_(top_k_mask, -float("inf"))

    if p is not None:
        probs_sort = logits_sort.softmax(dim=-1)
        probs_sum = torch.cumsum(probs_sort, dim=-1, out=probs_sort)
        top_p_mask = probs_sum <= 1 - p.unsqueeze(dim=1)
        top_p_mask[:, -1] = False
        logits_sort.masked_fill_(top_p_mask, -float("inf"))

    return logits.scatter_(dim=-1, index=logits_idx, src=logits_sort)


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


# llama, llama/generation.py: Llama.generate with temperature 0 (greedy), prompts of lengths 4 and 2, max_gen_len 5,
# eos id 3; the transformer is a stand-in (embedding, then output projection of each position)
def llama_greedy_generate(prompt_tokens: i64[2, 4], tok_embeddings: f32[16, 8], output: f32[16, 8]) -> i64[2, 9]:
    prompt_lens = [4, 2]
    bsz = len(prompt_lens)
    pad_id, eos_id, max_gen_len = -1, 3, 5
    min_prompt_len = min(prompt_lens)
    max_prompt_len = max(prompt_lens)
    total_len = max_gen_len + max_prompt_len
    tokens = torch.full((bsz, total_len), pad_id, dtype=torch.long)
    for k, n in enumerate(prompt_lens):
        tokens[k, :n] = prompt_tokens[k, :n]
    prev_pos = 0
    eos_reached = torch.tensor([False] * bsz)
    input_text_mask = tokens != pad_id
    for cur_pos in range(min_prompt_len, total_len):
        h = F.embedding(tokens[:, prev_pos:cur_pos].clamp(min=0), tok_embeddings)
        logits = (h @ output.t()).float()
        next_token = torch.argmax(logits[:, -1], dim=-1)
        next_token = next_token.reshape(-1)
        next_token = torch.where(input_text_mask[:, cur_pos], tokens[:, cur_pos], next_token)
        tokens[:, cur_pos] = next_token
        eos_reached |= (~input_text_mask[:, cur_pos]) & (next_token == eos_id)
        prev_pos = cur_pos
        if all(eos_reached):
            break
    return tokens
