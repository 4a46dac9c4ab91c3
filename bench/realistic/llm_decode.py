"""Realistic-size benchmark, LLM decode steps: LitGPT's attention at a decode step (Llama-3.2-1B shapes, KV cache of
1024 written with index_copy_, rotary embedding, grouped-query attention), torchtune's (Llama-3-8B shapes, cache of
1024 written by index assignment), LitGPT's sampler (top-k, temperature, top-p over a 32000 vocabulary), Megatron-LM's
decode-step bookkeeping around its top-p sampler (batch 4, log-probs by gather), LMDeploy's PyTorch-engine logits
processing (repetition penalty by gather/scatter, bad and stop words, top-k/top-p/min-p on the sorted top-k) and
SGLang's torch-native top-k/top-p/min-p sampler. Ported by hand from the originals for benchmarking against PyTorch
eager at one thread. The projections before attention (and the model before the samplers) are not part of the
programs: their outputs are the inputs. Where an original draws with torch.multinomial, the draw is the exponential
race argmax(probs / q) with q = -log(u) made from a raw input (what gpt-fast and torchtune do in place of
multinomial), so that the programs are deterministic. Integer inputs arrive in [0, 10); positions and token ids are
made from them arithmetically in the first lines."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# LitGPT (Lightning-AI/litgpt), litgpt/model.py: batched_index_select, the branch for a 1-D idx (the batched branch,
# not taken at a decode step of shared positions, is left out)
def _lg_batched_index_select(t, dim, idx):
    if idx.dim() == 1:
        return torch.index_select(t, dim, idx)


# LitGPT (Lightning-AI/litgpt), litgpt/model.py: batched_index_copy_, the non-mps branch for a 1-D idx (the per-row
# loop for a 2-D idx is left out, as in batched_index_select)
def _lg_batched_index_copy_(t, dim, idx, val):
    if idx.dim() == 1:
        return t.index_copy_(dim, idx, val)


# LitGPT (Lightning-AI/litgpt), litgpt/model.py: apply_rope
def _lg_apply_rope(x, cos, sin):
    if cos.dim() != 3:
        raise ValueError(f"cos must be three-dimensional, but shape is {cos.shape}")
    if cos.shape != sin.shape:
        raise ValueError(f"cos, sin must have same shape, but cos.shape={cos.shape}, sin.shape={sin.shape}")
    head_size_half = x.size(-1) // 2
    x1 = x[..., :head_size_half]  # (B, ..., T, head_size/2)
    x2 = x[..., head_size_half:]  # (B, ..., T, head_size/2)
    rotated = torch.cat((-x2, x1), dim=-1)  # (B, ..., T, head_size)
    dims_diff = x.dim() - cos.dim()
    if dims_diff > 0:
        # Ensure that shapes of `x`, `cos`, `sin` align
        new_shape = cos.shape[0:1] + (1,) * dims_diff + cos.shape[1:]
        cos = cos.view(*new_shape)
        sin = sin.view(*new_shape)

    roped = (x * cos) + (rotated * sin)
    return roped.to(dtype=x.dtype)


# LitGPT (Lightning-AI/litgpt), litgpt/model.py: build_mask_cache
def _lg_build_mask_cache(max_seq_length, device=None):
    ones = torch.ones((max_seq_length, max_seq_length), device=device, dtype=torch.bool)
    return torch.tril(ones).unsqueeze(0).unsqueeze(0)


# LitGPT (Lightning-AI/litgpt), litgpt/model.py: a decode step of one layer: GPT.forward's cos/sin/mask selection by
# input_pos (1-D, one token; input_pos_maxp1 None, so attention spans the whole cache under the mask) with the mask
# cache set_kv_cache builds, then CausalSelfAttention.forward from the qkv projection's output to the re-assembled
# heads (the output projection left out): split, rotary embedding (apply_rope, rope_n_elem = head_size), KVCache.forward
# (global attention: batched_index_copy_ into the cache buffers, mutated in place), repeat_interleave for the query
# groups and scaled_dot_product_attention with the boolean mask. Llama-3.2-1B shapes (n_head 32, n_query_groups 8,
# head_size 64), batch 2, max_seq_length 1024; the decode position is 512 plus a raw integer; the cos/sin caches
# (build_rope_cache's output) are inputs
def litgpt_decode_attention(
    qkv: f32[2, 1, 3072], cos_cache: f32[1024, 64], sin_cache: f32[1024, 64],
    k_cache: f32[2, 8, 1024, 64], v_cache: f32[2, 8, 1024, 64], raw_pos: i64[1],
) -> f32[2, 1, 2048]:
    input_pos = 512 + raw_pos
    max_seq_length = 1024
    head_size = 64
    n_head = 32
    n_query_groups = 8
    rope_n_elem = 64

    # GPT.forward (input_pos given)
    cos = _lg_batched_index_select(cos_cache, 0, input_pos)
    sin = _lg_batched_index_select(sin_cache, 0, input_pos)
    if input_pos.dim() == 1:
        cos = cos.unsqueeze(0)
        sin = sin.unsqueeze(0)
    mask_cache = _lg_build_mask_cache(max_seq_length)
    mask = _lg_batched_index_select(mask_cache, 2, input_pos)
    if mask.dim() > 4:
        mask = mask.view(*(mask.shape[0:1] + mask.shape[2:]))

    # CausalSelfAttention.forward
    B, T, _ = qkv.size()
    query_size = n_head * head_size
    key_size = value_size = n_query_groups * head_size
    q, k, v = qkv.split((query_size, key_size, value_size), dim=-1)  # 3x(B, T, C*)

    q = q.view(B, T, n_head, head_size)  # (B, T, nh_q, hs)
    k = k.view(B, T, n_query_groups, head_size)  # (B, T, n_query_groups, hs)
    v = v.view(B, T, n_query_groups, head_size)  # (B, T, n_query_groups, hs)

    q = q.transpose(1, 2)  # (B, nh_q, T, hs)
    k = k.transpose(1, 2)  # (B, nh_k, T, hs)
    v = v.transpose(1, 2)  # (B, nh_v, T, hs)

    q_roped = _lg_apply_rope(q[..., :rope_n_elem], cos, sin)
    k_roped = _lg_apply_rope(k[..., :rope_n_elem], cos, sin)
    q = torch.cat((q_roped, q[..., rope_n_elem:]), dim=-1)  # (B, nh_q, T, hs)
    k = torch.cat((k_roped, k[..., rope_n_elem:]), dim=-1)  # (B, nh_k, T, hs)

    # KVCache.forward, standard (global attention) cache
    bs = k.size(0)
    k = _lg_batched_index_copy_(k_cache[:bs, ...], -2, input_pos, k)
    v = _lg_batched_index_copy_(v_cache[:bs, ...], -2, input_pos, v)

    if n_query_groups != n_head and (input_pos is None or n_query_groups != 1):
        q_per_kv = n_head // n_query_groups
        k = k.repeat_interleave(q_per_kv, dim=1)  # (B, nh_q, T, hs)
        v = v.repeat_interleave(q_per_kv, dim=1)  # (B, nh_q, T, hs)

    # CausalSelfAttention.scaled_dot_product_attention (no softcapping; mscale 1)
    scale = 1.0 / math.sqrt(head_size)
    y = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=0.0, scale=scale, is_causal=mask is None
    )
    y = y.transpose(1, 2)

    # Re-assemble all head outputs side by side.
    y = y.reshape(B, T, head_size * n_head)
    return y


# torchtune (pytorch/torchtune), torchtune/modules/position_embeddings.py: RotaryPositionalEmbeddings.forward
def _tt_rope(x, cache, input_pos=None):
    seq_len = x.size(1)

    rope_cache = (
        cache[:seq_len] if input_pos is None else cache[input_pos]
    )

    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)

    rope_cache = rope_cache.view(-1, xshaped.size(1), 1, xshaped.size(3), 2)

    x_out = torch.stack(
        [
            xshaped[..., 0] * rope_cache[..., 0]
            - xshaped[..., 1] * rope_cache[..., 1],
            xshaped[..., 1] * rope_cache[..., 0]
            + xshaped[..., 0] * rope_cache[..., 1],
        ],
        -1,
    )

    x_out = x_out.flatten(3)
    return x_out.type_as(x)


# torchtune (pytorch/torchtune), torchtune/modules/kv_cache.py: KVCache.update
def _tt_kv_cache_update(k_cache, v_cache, cache_pos, k_val, v_val):
    bsz, _, seq_len, _ = k_val.shape
    if bsz > k_cache.shape[0]:
        raise ValueError(
            f"The current cache has been setup with a batch size of {k_cache.shape[0]}"
            f", but found new key tensors with batch size {k_val.shape[0]}!"
        )

    assert (cache_pos[0] + seq_len) <= k_cache.shape[2]
    k_out = k_cache
    v_out = v_cache

    k_out[:, :, cache_pos[:seq_len]] = k_val
    v_out[:, :, cache_pos[:seq_len]] = v_val

    cache_pos.add_(seq_len)

    return k_out, v_out


# torchtune (pytorch/torchtune), torchtune/generation/_generation.py: generate's decode-step inputs with incremental
# decoding and no padding (masks = tril(ones(total_response_length, max_seq_len)), input_pos = arange, then
# masks[:, curr_pos, None, :] and input_pos[:, curr_pos]), and torchtune/modules/attention.py:
# MultiHeadAttention.forward with the KV cache enabled, from the q/k/v projections' outputs to the attention output
# before output_proj: rotary embedding on q and k (the RoPE cache built at init is an input), KVCache.update (caches and
# cache_pos mutated), expand for grouped-query attention and attention_utils' SDPA call with the boolean mask.
# Llama-3-8B shapes (32 heads, 8 KV heads, head_dim 128), batch 1, max_seq_len 1024, a 960-token prompt generating
# 48 tokens, at curr_pos 980 (cache_pos is the cache's arange advanced to it)
def torchtune_decode_attention(
    q_out: f32[1, 1, 4096], k_out: f32[1, 1, 1024], v_out: f32[1, 1, 1024], rope_cache: f32[1024, 64, 2],
    k_cache: f32[1, 8, 1024, 128], v_cache: f32[1, 8, 1024, 128], curr_pos: int = 980,
) -> tuple[f32[1, 1, 4096], i64[1024]]:
    num_heads = 32
    num_kv_heads = 8
    head_dim = 128
    max_seq_len = 1024
    total_response_length = 960 + 48
    cache_pos = torch.arange(0, max_seq_len) + curr_pos

    # generate's decode step
    masks = torch.tril(
        torch.ones(
            total_response_length,
            max_seq_len,
            dtype=torch.bool,
        )
    ).unsqueeze(0)
    input_pos = torch.arange(0, total_response_length).unsqueeze(0)
    curr_input_pos = input_pos[:, curr_pos].contiguous()
    curr_masks = masks[:, curr_pos, None, :].contiguous()
    mask = curr_masks

    # MultiHeadAttention.forward
    b, s_x, _ = q_out.shape
    s_y = s_x

    q = q_out
    q_per_kv = num_heads // num_kv_heads
    q = q.view(b, s_x, num_kv_heads * q_per_kv, head_dim)
    q = _tt_rope(q, rope_cache, input_pos=curr_input_pos)
    q = q.transpose(1, 2)

    k = k_out
    v = v_out
    k = k.view(b, s_y, -1, head_dim)
    v = v.view(b, s_y, -1, head_dim)
    k = _tt_rope(k, rope_cache, input_pos=curr_input_pos)
    k = k.transpose(1, 2)
    v = v.transpose(1, 2)

    k, v = _tt_kv_cache_update(k_cache, v_cache, cache_pos, k, v)

    if num_heads != num_kv_heads:
        expand_shape = (b, num_kv_heads, q_per_kv, -1, head_dim)
        k = k.unsqueeze(2).expand(expand_shape).flatten(1, 2)
        v = v.unsqueeze(2).expand(expand_shape).flatten(1, 2)

    # attention_utils._sdpa_or_flex_attention's _sdpa_call
    if mask is not None:
        mask = mask[:, None, :, :]
    output = F.scaled_dot_product_attention(
        q, k, v, attn_mask=mask, dropout_p=0.0, is_causal=False
    )

    output = output.transpose(1, 2).contiguous().view(b, s_x, -1)
    return output, cache_pos


# LitGPT (Lightning-AI/litgpt), litgpt/generate/base.py: sample_top_p
def _lg_sample_top_p(logits, top_p):
    sorted_logits, sorted_indices = torch.sort(logits, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    # Keep at least 1 token always to prevent the case where no token is selected
    # In this case the most probable one is always kept
    sorted_indices_to_remove[-1:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(0, sorted_indices, sorted_indices_to_remove)
    logits = logits.masked_fill(indices_to_remove, float("-inf"))
    return logits


# LitGPT (Lightning-AI/litgpt), litgpt/generate/base.py: sample (temperature 0.8, top_k 50, top_p 0.9) with
# multinomial_num_samples_1's torch.compile branch (argmax(probs / exponential noise)), the noise given as q = -log(u)
# from a raw input; next_token's cast to int64. Logits of one sequence over Llama-2's 32000 tokens
def litgpt_sample(logits: f32[1, 1, 32000], raw_u: f32[32000]) -> i64[1]:
    u = (raw_u + 1) / 2 * 0.999 + 0.0005
    q = -torch.log(u)
    temperature = 0.8
    top_k = 50
    top_p = 0.9
    if top_p < 0.0 or top_p > 1.0:
        raise ValueError(f"top_p must be in [0, 1], got {top_p}")
    logits = logits[0, -1]
    # optionally crop the logits to only the top k options
    if top_k is not None:
        v, i = torch.topk(logits, min(top_k, logits.size(-1)))
        # do not use `torch.where` as in nanogpt because it will repeat top-k collisions
        logits = torch.full_like(logits, float("-inf")).scatter_(-1, i, v)
    # optionally scale the logits and sample from a probability distribution
    if temperature > 0.0 and top_p > 0.0:
        if temperature > 0.0:
            logits = logits / temperature
        # optionally crop the logits to smallest set of logits with a cumulative probability above top_p
        if top_p < 1.0:
            logits = _lg_sample_top_p(logits, top_p)
        probs = torch.nn.functional.softmax(logits, dim=-1)
        # multinomial_num_samples_1, compiling branch
        distribution = q
        return torch.argmax(probs / distribution, dim=-1, keepdim=True).to(dtype=torch.int64)
    return torch.argmax(logits, dim=-1, keepdim=True).to(dtype=torch.int64)


# Megatron-LM (NVIDIA/Megatron-LM), megatron/inference/text_generation/sampling.py: modify_logits_for_top_p_filtering
def _mg_modify_logits_for_top_p_filtering(logits, top_p):
    # First sort and calculate cumulative sum of probabilities.
    sorted_logits, sorted_indices = torch.sort(logits, descending=True)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)

    # Filteration based on the cumulative sum.
    filter_ = cumulative_probs > top_p
    # This shift by 1 is weird and I cannot justify it. This existed
    # in the original implementation:
    #   https://github.com/ari-holtzman/degen/blob/master/gen.py
    # and I guess it is needed so keeping it for now.
    filter_[:, 1:] = filter_[:, :-1].clone()
    # Make sure we at least have one token to select from.
    filter_[..., 0] = 0

    # Fill in the filtered part
    filter_ = filter_.scatter(1, sorted_indices, filter_)
    logits.masked_fill_(filter_, float('-Inf'))


# Megatron-LM (NVIDIA/Megatron-LM), megatron/inference/text_generation/sampling.py: sample (top_k 0, top_p 0.9,
# temperature 0.9, vocab_size given), the type assertion on logits.type() left out and torch.multinomial written as
# the exponential race with the given noise q
def _mg_sample(logits, q, top_k=0, top_p=0.0, temperature=1.0, vocab_size=None):
    assert logits.ndim == 2, 'expected the logits to be of [b, v] shape.'

    # Greedy is just simple argmax.
    if top_k == 1:
        assert top_p == 0.0, 'cannot set both greedy and top-p samplings.'
        samples = torch.argmax(logits, dim=-1)

    # Top-k or top-p sampling.
    else:
        # Clone so we do not modify the inputs,
        logits = logits.clone()
        # Apply temperature in place.
        if temperature != 1.0:
            logits.div_(temperature)

        if top_k > 1:
            assert top_p == 0.0, 'cannot set both top-k and top-p samplings.'
            assert top_k <= logits.size(1), 'top-k is larger than logit size.'
            if vocab_size:
                assert top_k < vocab_size, 'top-k is larger than vocab size.'
            filter_ = logits < torch.topk(logits, top_k)[0][..., -1, None]
            logits.masked_fill_(filter_, float('-Inf'))

        elif top_p > 0.0:
            assert top_p <= 1.0, 'top-p should be in (0, 1].'
            _mg_modify_logits_for_top_p_filtering(logits, top_p)

        # After filtering, we need to recalculate the distribution.
        probs = logits.softmax(dim=-1)
        samples = torch.argmax(probs / q, dim=-1, keepdim=True).view(-1)

    # If vocab size is provided, make sure the samples are in
    # in the range [0, vocab-size).
    if vocab_size:
        samples = torch.clamp(samples, min=0, max=(vocab_size - 1))

    return samples


# Megatron-LM (NVIDIA/Megatron-LM), megatron/inference/text_generation/generation.py:
# generate_tokens_probs_and_return_on_first_stage, one decode iteration of its loop on the last pipeline stage after
# forward_step (return_output_log_probs True, prevent_newline_after_colon True, top_p 0.9, temperature 0.9, no top_p
# decay, termination by the eod token, no pipeline broadcast): the ":" -> "\n" suppression by boolean indexing, sample,
# the write of the new tokens for started sequences, log-probs gathered into output_log_probs, and the done
# bookkeeping. Llama tokenizer ids (":" 29901, "\n" 13, eod 2, vocabulary 32000); batch 4 with token buffers of 1024,
# at context_length 600; prompt lengths 560 to 632, token ids and the done flags (uint8, as the original keeps
# them) made from the raw integers
def megatron_decode_step(
    logits: f32[4, 1, 32000], raw_tokens: i64[4, 1024], raw_lengths: i64[4], raw_u: f32[4, 32000],
    output_log_probs: f32[4, 1023], generated_sequence_lengths: i64[4], context_length: int = 600,
) -> tuple[i64[4, 1024], i64[4], bool[4], u8[()]]:
    tokens = (raw_tokens * 3203 + torch.arange(1024) * 7919) % 32000
    lengths = 560 + raw_lengths * 8
    q = -torch.log((raw_u + 1) / 2 * 0.999 + 0.0005)
    is_generation_done = (raw_lengths == 9).byte()
    colon_id = 29901
    newline_id = 13
    termination_id = 2
    vocab_size = 32000
    top_k = 0
    top_p = 0.9
    temperature = 0.9
    prev_context_length = context_length - 1
    tokens2use = tokens[:, prev_context_length:context_length]

    logits[tokens2use[:, -1] == colon_id, -1, newline_id] = -1e10  # disable "\n" after ":"

    # Sample.
    last_token_logits = logits[:, -1, :]
    new_sample = _mg_sample(last_token_logits, q,
                            top_k=top_k,
                            top_p=top_p,
                            temperature=temperature,
                            vocab_size=vocab_size)

    # If a prompt length is smaller or equal th current context
    # length, it means we have started generating tokens
    started = lengths <= context_length
    # Update the tokens.
    tokens[started, context_length] = new_sample[started]

    # Calculate the log probabilities.
    log_probs = F.log_softmax(logits, dim=2)
    indices = torch.unsqueeze(
        tokens[
            :,
            (prev_context_length + 1):(context_length + 1)],
        2)
    output_log_probs[:,
                     prev_context_length:context_length] = \
        torch.gather(log_probs, 2, indices).squeeze(2)

    done_token = (new_sample == termination_id).byte() & \
        started.byte()

    just_finished = (done_token & ~is_generation_done).bool()
    generated_sequence_lengths[just_finished.view(-1)] = \
        context_length + 1
    is_generation_done = is_generation_done | done_token
    done = torch.all(is_generation_done)
    return tokens, new_sample, is_generation_done.bool(), done


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _process_temperature_
def _lmd_process_temperature_(scores, temperature):
    temperature = temperature.to(scores.dtype)
    scores.div_(temperature[:, None])
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _process_bad_words_
def _lmd_process_bad_words_(scores, bad_words, mask, filter_value=-float('inf')):
    # invalid badwords might be negative
    valid_bad_words = bad_words.where(mask, 0)
    filtered_scores = scores.gather(1, valid_bad_words)
    filtered_scores[mask] = filter_value
    scores.scatter_(1, valid_bad_words, filtered_scores)
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _process_repetition_penalty_
def _lmd_process_repetition_penalty_(scores, input_ids, penalty):
    score = torch.gather(scores, 1, input_ids)
    penalty = penalty.to(score.dtype)
    score = torch.where(score < 0, score * penalty[:, None], score / penalty[:, None])
    scores.scatter_(1, input_ids, score)
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _filter_topk_sorted_
def _lmd_filter_topk_sorted_(scores, topk, filter_value=-float('inf')):
    filter_value = -float('inf')
    num_tokens = scores.size(1)
    token_idx = torch.arange(num_tokens, device=scores.device)
    mask = token_idx[None, :] >= topk[:, None]
    scores.masked_fill_(mask, filter_value)
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _filter_topp_sorted_
def _lmd_filter_topp_sorted_(scores, topp, filter_value=-float('inf')):
    softmax_scores = scores.softmax(-1)
    cum_scores = softmax_scores.cumsum(1) - softmax_scores
    mask = cum_scores > topp[:, None]
    mask[:, 0] = False  # keep at least one
    scores.masked_fill_(mask, filter_value)
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _filter_minp_sorted_
def _lmd_filter_minp_sorted_(scores, minp, filter_value=-float('inf')):
    softmax_scores = scores.softmax(-1)
    top_probs, _ = softmax_scores.max(dim=-1, keepdim=True)
    scaled_min_p = minp.unsqueeze(dim=1) * top_probs
    mask = softmax_scores < scaled_min_p
    scores.masked_fill_(mask, filter_value)
    return scores


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: _torch_topk
def _lmd_torch_topk(x, k, dim=-1, largest=True, sorted=True):
    if k == 1:
        # torch.topk would not fallback to torch.max/torch.min automatically
        if largest:
            return torch.max(x, dim=dim, keepdim=True)
        else:
            return torch.min(x, dim=dim, keepdim=True)
    else:
        return torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)


# LMDeploy (InternLM/lmdeploy), lmdeploy/pytorch/engine/logits_process.py: FusedLogitsProcessor.__call__ (no guided
# decoding, no custom processors, max_num_logprobs -1, repetition penalty, no n-gram filter, temperature, bad words,
# stop words with ignore_eos) and FusedLogitsProcessor.sampling's random branch up to the multinomial kernel
# (max_top_k 50: _torch_topk, then _filter_topk_sorted_, _filter_topp_sorted_, _filter_minp_sorted_ and softmax).
# 16 requests over a 32000 vocabulary with 512 generated ids each; per-request settings as tensors made here; the
# generated ids spread over the vocabulary from the raw integers
def lmdeploy_logits_process(
    scores: f32[16, 32000], raw_generated_ids: i64[16, 512],
) -> tuple[f32[16, 32000], f32[16, 50], i64[16, 50]]:
    generated_ids = (raw_generated_ids * 3203 + torch.arange(512) * 61) % 32000
    batch = 16
    repetition_penalty = torch.tensor([1.0, 1.1, 1.05, 1.2] * 4)
    temperature = torch.tensor([0.7, 1.0, 0.8, 0.9] * 4)
    bad_words = torch.tensor([[100, 2000, -1, -1]] * batch)
    bad_mask = bad_words >= 0
    stop_words = torch.tensor([[2, 32000 - 1]] * batch)
    stop_mask = torch.ones(batch, 2, dtype=torch.bool)
    num_ignore_eos = torch.tensor([0, 0, 0, 5] * 4)
    top_k = torch.tensor([50, 40, 20, 50] * 4)
    top_p = torch.tensor([0.9, 0.95, 0.8, 1.0] * 4)
    min_p = torch.tensor([0.05, 0.0, 0.1, 0.02] * 4)
    max_top_k = 50

    # FusedLogitsProcessor.__call__
    scores = _lmd_process_repetition_penalty_(scores, generated_ids, repetition_penalty)
    scores = _lmd_process_temperature_(scores, temperature)
    scores = _lmd_process_bad_words_(scores, bad_words, bad_mask)
    ignore_eos = num_ignore_eos > 0
    stop_mask = torch.where(ignore_eos[:, None], stop_mask, False)
    scores = _lmd_process_bad_words_(scores, stop_words, stop_mask)

    # FusedLogitsProcessor.sampling, up to _multinomial_sampling (a Triton kernel)
    logits = scores
    if max_top_k <= 0:
        topk_scores, indices = logits.sort(1, descending=True)
    else:
        topk_scores, indices = _lmd_torch_topk(logits, max_top_k, dim=1)

    # __random_sampling
    if max_top_k <= 0:
        max_top_k = topk_scores.size(1)
        if top_k is not None:
            top_k = torch.masked_fill(top_k, top_k <= 0, max_top_k)
    if top_k is not None:
        topk_scores = _lmd_filter_topk_sorted_(topk_scores, top_k)
    if top_p is not None:
        topk_scores = _lmd_filter_topp_sorted_(topk_scores, top_p)
    if min_p is not None:
        topk_scores = _lmd_filter_minp_sorted_(topk_scores, min_p)
    softmax_scores = topk_scores.softmax(1)
    return scores, softmax_scores, indices


# SGLang (sgl-project/sglang), python/sglang/srt/layers/sampler.py: top_k_top_p_min_p_sampling_from_probs_torch with
# torch.multinomial written as the exponential race on the given noise (the RuntimeError fallback left out)
def _sg_top_k_top_p_min_p_sampling_from_probs_torch(probs, top_ks, top_ps, min_ps, q):
    probs_sort, probs_idx = probs.sort(dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    min_p_thresholds = probs_sort[:, 0] * min_ps
    probs_sort[(probs_sum - probs_sort) > top_ps.view(-1, 1)] = 0.0
    probs_sort[
        torch.arange(0, probs.shape[-1], device=probs.device).view(1, -1)
        >= top_ks.view(-1, 1)
    ] = 0.0
    probs_sort[probs_sort < min_p_thresholds.view(-1, 1)] = 0.0
    probs_sort.div_(probs_sort.max(dim=-1, keepdim=True)[0])
    sampled_index = torch.argmax(probs_sort / q, dim=-1, keepdim=True)

    batch_next_token_ids = torch.gather(probs_idx, dim=1, index=sampled_index).view(-1)
    success = torch.ones(probs.shape[0], dtype=torch.bool, device=probs.device)
    return batch_next_token_ids, success


# SGLang (sgl-project/sglang), python/sglang/srt/layers/sampler.py: Sampler.forward_cuda on its torch fallback path
# (disable_flashinfer_sampling): temperature, logit bias, vocab mask, no penalizers (the orchestrator returns the
# logits), softmax, the torch sampler and the failure fallback. 4 requests over a 32000 vocabulary; per-request
# temperatures, top-k, top-p and min-p as tensors made here; logit bias and vocab mask made from the raw inputs
def sglang_sampler_torch(
    logits: f32[4, 32000], raw_bias: f32[4, 32000], raw_u: f32[4, 32000]
) -> i64[4]:
    q = -torch.log((raw_u + 1) / 2 * 0.999 + 0.0005)
    temperatures = torch.tensor([0.7, 1.0, 0.8, 0.6]).view(-1, 1)
    logit_bias = torch.where(raw_bias > 0.99, 2.0, 0.0)
    vocab_mask = raw_bias > -0.999
    top_ks = torch.tensor([40, 1073741824, 20, 100])  # 1 << 30 stands for "no top-k" in SGLang's sampling info
    top_ps = torch.tensor([0.9, 1.0, 0.8, 0.95])
    min_ps = torch.tensor([0.0, 0.05, 0.0, 0.1])

    logits = logits.contiguous()
    logits.div_(temperatures)
    if logit_bias is not None:
        logits.add_(logit_bias)

    if vocab_mask is not None:
        logits = logits.masked_fill(~vocab_mask, float("-inf"))

    probs = torch.softmax(logits, dim=-1)

    batch_next_token_ids, success = _sg_top_k_top_p_min_p_sampling_from_probs_torch(
        probs, top_ks, top_ps, min_ps, q
    )

    if not torch.all(success):
        probs = probs.masked_fill(torch.isnan(probs), 0.0)
        argmax_ids = torch.argmax(probs, dim=-1)
        batch_next_token_ids = torch.where(
            success, batch_next_token_ids, argmax_ids
        )

    return batch_next_token_ids
