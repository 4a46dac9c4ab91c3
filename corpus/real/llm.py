"""LLM decode-step pieces ported from gpt-fast, llama, nanoGPT and Hugging Face transformers: RMSNorm, SwiGLU,
rotary embeddings (llama's through complex tensors, which waited in tests/real_pending at first), KV-cache writes by position, attention over a cache, and logits processing (temperature, top-k,
top-p, repetition penalty). Sampling itself (torch.multinomial) is random and left out; each program stops at the
probabilities or the processed logits. Weights arrive uniform in [-1, 1) and are scaled down where a layer needs it."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# llama, llama/model.py: RMSNorm._norm and RMSNorm.forward (eps 1e-6)
def llama_rmsnorm(x: f32[2, 5, 64], weight: f32[64]) -> f32[2, 5, 64]:
    eps = 1e-6
    output = (x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).type_as(x)
    return output * weight


# gpt-fast, model.py: RMSNorm (x * x instead of pow, eps 1e-5)
def gptfast_rmsnorm(x: f32[3, 7, 48], weight: f32[48]) -> f32[3, 7, 48]:
    eps = 1e-5
    xf = x.float()
    output = (xf * torch.rsqrt(torch.mean(xf * xf, dim=-1, keepdim=True) + eps)).type_as(x)
    return output * weight


# Hugging Face transformers, models/llama/modeling_llama.py: LlamaRMSNorm.forward
def hf_llama_rmsnorm(hidden_states: f32[2, 6, 32], weight: f32[32]) -> f32[2, 6, 32]:
    variance_epsilon = 1e-6
    input_dtype = hidden_states.dtype
    hidden_states = hidden_states.to(torch.float32)
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    hidden_states = hidden_states * torch.rsqrt(variance + variance_epsilon)
    return weight * hidden_states.to(input_dtype)


# gpt-fast, model.py: FeedForward.forward (SwiGLU: w2(silu(w1(x)) * w3(x)), nn.Linear without bias)
def gptfast_swiglu(x: f32[2, 4, 32], w1: f32[88, 32], w3: f32[88, 32], w2: f32[32, 88]) -> f32[2, 4, 32]:
    w1, w3, w2 = w1 * 0.125, w3 * 0.125, w2 * 0.125
    return F.linear(F.silu(F.linear(x, w1)) * F.linear(x, w3), w2)


# Hugging Face transformers, models/llama/modeling_llama.py: rotate_half
def _rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


# Hugging Face transformers, models/llama/modeling_llama.py: LlamaRotaryEmbedding.forward (default rope, head_dim 16)
# and apply_rotary_pos_emb
def hf_rotary_pos_emb(
    q: f32[1, 4, 6, 16], k: f32[1, 2, 6, 16], position_ids: i64[1, 6]
) -> tuple[f32[1, 4, 6, 16], f32[1, 2, 6, 16]]:
    base = 10000.0
    dim = 16
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    inv_freq_expanded = inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
    position_ids_expanded = position_ids[:, None, :].float()
    freqs = (inv_freq_expanded.float() @ position_ids_expanded.float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    cos = emb.cos()
    sin = emb.sin()
    cos = cos.unsqueeze(1)
    sin = sin.unsqueeze(1)
    q_embed = (q * cos) + (_rotate_half(q) * sin)
    k_embed = (k * cos) + (_rotate_half(k) * sin)
    return q_embed, k_embed


# gpt-fast, model.py: KVCache.update (k_out[:, :, input_pos] = k_val), decode at position start_pos
def gptfast_kv_cache_update(
    k_cache: f32[1, 4, 16, 8], v_cache: f32[1, 4, 16, 8], k_val: f32[1, 4, 1, 8], v_val: f32[1, 4, 1, 8],
    start_pos: int = 9
) -> tuple[f32[1, 4, 16, 8], f32[1, 4, 16, 8]]:
    input_pos = torch.arange(start_pos, start_pos + 1)
    assert input_pos.shape[0] == k_val.shape[2]
    k_out = k_cache
    v_out = v_cache
    k_out[:, :, input_pos] = k_val
    v_out[:, :, input_pos] = v_val
    return k_out, v_out


# llama, llama/model.py: repeat_kv
def _repeat_kv(x, n_rep: int):
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


# llama, llama/model.py: Attention.forward after the rotary embedding (cache writes by slice, repeat_kv, attention)
def llama_cached_attention(
    xq: f32[1, 2, 4, 8], xk: f32[1, 2, 2, 8], xv: f32[1, 2, 2, 8], cache_k: f32[2, 12, 2, 8], cache_v: f32[2, 12, 2, 8],
    start_pos: int = 5
) -> f32[1, 2, 32]:
    bsz, seqlen, n_local_heads, head_dim = xq.shape
    n_rep = n_local_heads // xk.shape[2]
    cache_k = cache_k.to(xq)
    cache_v = cache_v.to(xq)
    cache_k[:bsz, start_pos : start_pos + seqlen] = xk
    cache_v[:bsz, start_pos : start_pos + seqlen] = xv
    keys = cache_k[:bsz, : start_pos + seqlen]
    values = cache_v[:bsz, : start_pos + seqlen]
    keys = _repeat_kv(keys, n_rep)
    values = _repeat_kv(values, n_rep)
    xq = xq.transpose(1, 2)
    keys = keys.transpose(1, 2)
    values = values.transpose(1, 2)
    scores = torch.matmul(xq, keys.transpose(2, 3)) / math.sqrt(head_dim)
    scores = F.softmax(scores.float(), dim=-1).type_as(xq)
    output = torch.matmul(scores, values)
    output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)
    return output


# nanoGPT, model.py: CausalSelfAttention.forward (the manual attention path, no dropout)
def nanogpt_causal_self_attention(
    x: f32[2, 8, 32], c_attn_w: f32[96, 32], c_attn_b: f32[96], c_proj_w: f32[32, 32], c_proj_b: f32[32]
) -> f32[2, 8, 32]:
    n_head = 4
    n_embd = 32
    c_attn_w, c_proj_w = c_attn_w * 0.17, c_proj_w * 0.17
    bias = torch.tril(torch.ones(8, 8)).view(1, 1, 8, 8)
    B, T, C = x.size()
    q, k, v = F.linear(x, c_attn_w, c_attn_b).split(n_embd, dim=2)
    k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
    q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
    v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
    att = att.masked_fill(bias[:, :, :T, :T] == 0, float("-inf"))
    att = F.softmax(att, dim=-1)
    y = att @ v
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    y = F.linear(y, c_proj_w, c_proj_b)
    return y


# nanoGPT, model.py: GPT.generate, one step's logits processing (temperature, top-k with logits[...] = -inf, softmax)
def nanogpt_generate_topk(logits: f32[2, 5, 64], temperature: float = 0.8, top_k: int = 10) -> f32[2, 64]:
    logits = logits[:, -1, :] / temperature
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    logits[logits < v[:, [-1]]] = -float("Inf")
    probs = F.softmax(logits, dim=-1)
    return probs


# gpt-fast, generate.py: logits_to_probs (and sample's logits[:, -1])
def gptfast_logits_to_probs(logits: f32[2, 3, 64], temperature: float = 0.7, top_k: int = 12) -> f32[2, 64]:
    logits = logits[:, -1]
    logits = logits / max(temperature, 1e-5)
    v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
    pivot = v.select(-1, -1).unsqueeze(-1)
    logits = torch.where(logits < pivot, -float("Inf"), logits)
    probs = torch.nn.functional.softmax(logits, dim=-1)
    return probs


# llama, llama/generation.py: the sampling step's softmax(logits[:, -1] / temperature) and sample_top_p up to the
# multinomial draw
def llama_sample_top_p(
    logits: f32[2, 4, 48], temperature: float = 0.6, p: float = 0.9
) -> tuple[f32[2, 48], i64[2, 48]]:
    probs = torch.softmax(logits[:, -1] / temperature, dim=-1)
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    mask = probs_sum - probs_sort > p
    probs_sort[mask] = 0.0
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    return probs_sort, probs_idx


# Hugging Face transformers, generation/logits_process.py: TemperatureLogitsWarper then TopKLogitsWarper
def hf_temperature_top_k(scores: f32[3, 50], temperature: float = 0.7, top_k: int = 8) -> f32[3, 50]:
    scores_processed = scores / temperature
    filter_value = -float("Inf")
    top_k = min(top_k, scores_processed.size(-1))
    indices_to_remove = scores_processed < torch.topk(scores_processed, top_k)[0][..., -1, None]
    scores_processed = scores_processed.masked_fill(indices_to_remove, filter_value)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: TopPLogitsWarper.__call__ (top_p 0.8, min_tokens_to_keep 1)
def hf_top_p(scores: f32[3, 40]) -> f32[3, 40]:
    top_p = 0.8
    min_tokens_to_keep = 1
    filter_value = -float("Inf")
    sorted_logits, sorted_indices = torch.sort(scores, descending=False)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    sorted_indices_to_remove = cumulative_probs <= (1 - top_p)
    sorted_indices_to_remove[..., -min_tokens_to_keep:] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    scores_processed = scores.masked_fill(indices_to_remove, filter_value)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: RepetitionPenaltyLogitsProcessor.__call__ (2-D scores)
def hf_repetition_penalty(input_ids: i64[2, 7], scores: f32[2, 10], penalty: float = 1.3) -> f32[2, 10]:
    score = torch.gather(scores, 1, input_ids)
    score = torch.where(score < 0, score * penalty, score / penalty)
    scores_processed = scores.scatter(1, input_ids, score)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: TypicalLogitsWarper.__call__ (mass 0.9, min_tokens_to_keep 1)
def hf_typical_p(scores: f32[3, 40]) -> f32[3, 40]:
    mass = 0.9
    min_tokens_to_keep = 1
    filter_value = -float("Inf")
    normalized = torch.nn.functional.log_softmax(scores, dim=-1)
    p = torch.exp(normalized)
    ent = -(normalized * p).nansum(-1, keepdim=True)
    shifted_scores = torch.abs((-normalized) - ent)
    sorted_scores, sorted_indices = torch.sort(shifted_scores, descending=False)
    sorted_logits = scores.gather(-1, sorted_indices)
    cumulative_probs = sorted_logits.softmax(dim=-1).cumsum(dim=-1)
    last_ind = (cumulative_probs < mass).sum(dim=1)
    last_ind.clamp_(max=sorted_scores.shape[-1] - 1)
    sorted_indices_to_remove = sorted_scores > sorted_scores.gather(1, last_ind.view(-1, 1))
    sorted_indices_to_remove[..., :min_tokens_to_keep] = 0
    indices_to_remove = sorted_indices_to_remove.scatter(1, sorted_indices, sorted_indices_to_remove)
    scores_processed = scores.masked_fill(indices_to_remove, filter_value)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: MinPLogitsWarper.__call__ (min_p 0.3, min_tokens_to_keep 2)
def hf_min_p(scores: f32[4, 32]) -> f32[4, 32]:
    min_p = 0.3
    min_tokens_to_keep = 2
    filter_value = -float("Inf")
    probs = torch.softmax(scores * 3.0, dim=-1)
    top_probs = probs.amax(dim=-1, keepdim=True)
    scaled_min_p = min_p * top_probs
    tokens_to_remove = probs < scaled_min_p
    k = min(min_tokens_to_keep, probs.shape[-1])
    sorted_indices = torch.topk(probs, k, dim=-1).indices
    tokens_to_remove.scatter_(-1, sorted_indices, False)
    scores_processed = scores.masked_fill(tokens_to_remove, filter_value)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: EpsilonLogitsWarper.__call__ (epsilon 0.03)
def hf_epsilon(scores: f32[3, 48]) -> f32[3, 48]:
    epsilon = 0.03
    min_tokens_to_keep = 1
    filter_value = -float("Inf")
    probabilities = scores.softmax(dim=-1)
    indices_to_remove = probabilities < epsilon
    top_k = min(min_tokens_to_keep, scores.size(-1))
    indices_to_remove = indices_to_remove & (scores < torch.topk(scores, top_k)[0][..., -1, None])
    scores_processed = scores.masked_fill(indices_to_remove, filter_value)
    return scores_processed


# Hugging Face transformers, generation/logits_process.py: RepetitionPenaltyLogitsProcessor.__call__, the 3-D branch
# (last position's scores, token mask by scatter_, _apply_penalty as torch.where, written back by slice)
def hf_repetition_penalty_3d(input_ids: i64[2, 6], scores: f32[2, 3, 10], penalty: float = 1.5) -> f32[2, 3, 10]:
    last_scores = scores[:, -1, :]
    token_mask = torch.zeros_like(last_scores, dtype=torch.bool)
    token_mask.scatter_(1, input_ids, True)
    penalty_scores = torch.where(last_scores < 0, last_scores * penalty, last_scores / penalty)
    scores[:, -1, :] = torch.where(token_mask, penalty_scores, last_scores)
    return scores


# Hugging Face transformers, models/t5/modeling_t5.py: T5Attention._relative_position_bucket and compute_bias
# (bidirectional, 32 buckets, max_distance 128, 4 heads)
def t5_relative_position_bias(
    relative_attention_bias: f32[32, 4], query_length: int = 24, key_length: int = 40
) -> f32[1, 4, 24, 40]:
    num_buckets = 32
    max_distance = 128
    context_position = torch.arange(query_length, dtype=torch.long)[:, None]
    memory_position = torch.arange(key_length, dtype=torch.long)[None, :]
    relative_position = memory_position - context_position
    relative_buckets = 0
    num_buckets //= 2
    relative_buckets += (relative_position > 0).to(torch.long) * num_buckets
    relative_position = torch.abs(relative_position)
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    relative_position_if_large = max_exact + (
        torch.log(relative_position.float() / max_exact)
        / math.log(max_distance / max_exact)
        * (num_buckets - max_exact)
    ).to(torch.long)
    relative_position_if_large = torch.min(
        relative_position_if_large, torch.full_like(relative_position_if_large, num_buckets - 1)
    )
    relative_buckets += torch.where(is_small, relative_position, relative_position_if_large)
    values = torch.nn.functional.embedding(relative_buckets, relative_attention_bias)
    values = values.permute([2, 0, 1]).unsqueeze(0)
    return values


# Hugging Face transformers (v4.3x), generation/logits_process.py: MinLengthLogitsProcessor.__call__ (writes scores in
# place; eos ids 2 and 7, min_length 10)
def hf_min_length_in_place(input_ids: i64[3, 6], scores: f32[3, 16]) -> f32[3, 16]:
    min_length = 10
    eos_token_id = [2, 7]
    cur_len = input_ids.shape[-1]
    if cur_len < min_length:
        for i in eos_token_id:
            scores[:, i] = -float("inf")
    return scores


# gpt-fast, model.py: apply_rotary_emb (freqs_cis as precompute_freqs_cis caches it: [seq, head_dim / 2, 2])
def gptfast_apply_rotary_emb(x: f32[1, 6, 4, 16], freqs_cis: f32[6, 8, 2]) -> f32[1, 6, 4, 16]:
    xshaped = x.float().reshape(*x.shape[:-1], -1, 2)
    freqs_cis = freqs_cis.view(1, xshaped.size(1), 1, xshaped.size(3), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * freqs_cis[..., 0] - xshaped[..., 1] * freqs_cis[..., 1],
            xshaped[..., 1] * freqs_cis[..., 0] + xshaped[..., 0] * freqs_cis[..., 1],
        ],
        -1,
    )
    x_out2 = x_out2.flatten(3)
    return x_out2.type_as(x)


# Hugging Face transformers (v4.3x), models/llama/modeling_llama.py: _make_causal_mask, _expand_mask and
# LlamaModel._prepare_decoder_attention_mask (past_key_values_length 3)
def hf_prepare_decoder_attention_mask(attention_mask_raw: i64[2, 8], inputs_embeds: f32[2, 5, 16]) -> f32[2, 1, 5, 8]:
    attention_mask = (attention_mask_raw < 8).long()
    input_shape = inputs_embeds.shape[:-1]
    past_key_values_length = 3
    dtype = inputs_embeds.dtype
    device = inputs_embeds.device
    bsz, tgt_len = input_shape
    mask = torch.full((tgt_len, tgt_len), torch.finfo(dtype).min, device=device)
    mask_cond = torch.arange(mask.size(-1), device=device)
    mask.masked_fill_(mask_cond < (mask_cond + 1).view(mask.size(-1), 1), 0)
    mask = mask.to(dtype)
    if past_key_values_length > 0:
        mask = torch.cat([torch.zeros(tgt_len, past_key_values_length, dtype=dtype, device=device), mask], dim=-1)
    combined_attention_mask = mask[None, None, :, :].expand(bsz, 1, tgt_len, tgt_len + past_key_values_length)
    bsz, src_len = attention_mask.size()
    expanded_mask = attention_mask[:, None, None, :].expand(bsz, 1, tgt_len, src_len).to(dtype)
    inverted_mask = 1.0 - expanded_mask
    expanded_attn_mask = inverted_mask.masked_fill(inverted_mask.to(torch.bool), torch.finfo(dtype).min)
    combined_attention_mask = expanded_attn_mask + combined_attention_mask
    return combined_attention_mask


# Hugging Face transformers, models/bloom/modeling_bloom.py: build_alibi_tensor (6 heads: not a power of two)
def bloom_build_alibi_tensor(attention_mask_raw: i64[2, 9]) -> f32[12, 1, 9]:
    attention_mask = attention_mask_raw % 2
    num_heads = 6
    dtype = torch.float32
    batch_size, seq_length = attention_mask.shape
    closest_power_of_2 = 2 ** math.floor(math.log2(num_heads))
    base = torch.tensor(
        2 ** (-(2 ** -(math.log2(closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32
    )
    powers = torch.arange(1, 1 + closest_power_of_2, device=attention_mask.device, dtype=torch.int32)
    slopes = torch.pow(base, powers)
    if closest_power_of_2 != num_heads:
        extra_base = torch.tensor(
            2 ** (-(2 ** -(math.log2(2 * closest_power_of_2) - 3))), device=attention_mask.device, dtype=torch.float32
        )
        num_remaining_heads = min(closest_power_of_2, num_heads - closest_power_of_2)
        extra_powers = torch.arange(1, 1 + 2 * num_remaining_heads, 2, device=attention_mask.device, dtype=torch.int32)
        slopes = torch.cat([slopes, torch.pow(extra_base, extra_powers)], dim=0)
    arange_tensor = ((attention_mask.cumsum(dim=-1) - 1) * attention_mask)[:, None, :]
    alibi = slopes[..., None] * arange_tensor
    return alibi.reshape(batch_size * num_heads, 1, seq_length).to(dtype)


# text-generation-inference, server/text_generation_server/utils/logits_process.py: batched_bincount
def tgi_batched_bincount(x: i64[4, 12], max_value: int = 10) -> i64[4, 10]:
    dim = 1
    target = torch.zeros(x.shape[0], max_value, dtype=x.dtype, device=x.device)
    values = torch.ones_like(x)
    target.scatter_add_(dim, x, values)
    return target


# Hugging Face transformers, pytorch_utils.py: Conv1D.forward (GPT-2's transposed linear layer)
def _conv1d(x, weight, bias, nf: int):
    size_out = x.size()[:-1] + (nf,)
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    x = x.view(size_out)
    return x


# Hugging Face transformers, models/gpt2/modeling_gpt2.py: GPT2MLP.forward (Conv1D, gelu_new as activations.py's
# NewGELUActivation writes it, Conv1D; no dropout)
def hf_gpt2_mlp(
    hidden_states: f32[2, 5, 16], c_fc_w: f32[16, 64], c_fc_b: f32[64], c_proj_w: f32[64, 16], c_proj_b: f32[16]
) -> f32[2, 5, 16]:
    c_fc_w, c_proj_w = c_fc_w * 0.25, c_proj_w * 0.125
    hidden_states = _conv1d(hidden_states, c_fc_w, c_fc_b, 64)
    input = hidden_states
    hidden_states = (
        0.5 * input * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (input + 0.044715 * torch.pow(input, 3.0))))
    )
    hidden_states = _conv1d(hidden_states, c_proj_w, c_proj_b, 16)
    return hidden_states


# Hugging Face transformers, cache_utils.py: StaticLayer.update (index_copy_ at cumulative_length)
def hf_static_cache_update(
    keys: f32[1, 2, 16, 8], values: f32[1, 2, 16, 8], key_states: f32[1, 2, 3, 8], value_states: f32[1, 2, 3, 8],
    cumulative_length: i64[()]
) -> tuple[f32[1, 2, 16, 8], f32[1, 2, 16, 8]]:
    kv_length = key_states.shape[-2]
    cache_position = torch.arange(kv_length, device=keys.device) + cumulative_length
    cumulative_length.add_(kv_length)
    try:
        keys.index_copy_(2, cache_position, key_states)
        values.index_copy_(2, cache_position, value_states)
    except NotImplementedError:
        keys[:, :, cache_position] = key_states
        values[:, :, cache_position] = value_states
    return keys, values


# nanoGPT, model.py: MLP.forward and Block.forward's second residual (LayerNorm with bias, GELU)
def nanogpt_mlp_block(
    x: f32[2, 6, 32], ln_w: f32[32], ln_b: f32[32], c_fc_w: f32[128, 32], c_fc_b: f32[128], c_proj_w: f32[32, 128],
    c_proj_b: f32[32]
) -> f32[2, 6, 32]:
    c_fc_w, c_proj_w = c_fc_w * 0.17, c_proj_w * 0.09
    h = F.layer_norm(x, ln_w.shape, ln_w, ln_b, 1e-5)
    h = F.linear(h, c_fc_w, c_fc_b)
    h = F.gelu(h)
    h = F.linear(h, c_proj_w, c_proj_b)
    x = x + h
    return x


# Hugging Face transformers, cache_utils.py: StaticLayer.update at a decode step (one new position written into a
# 2x8x32x64 static cache through an index tensor)
def hf_static_cache_decode_update(
    keys: f32[2, 8, 32, 64], values: f32[2, 8, 32, 64], key_states: f32[2, 8, 1, 64], value_states: f32[2, 8, 1, 64],
    position: int = 17
) -> tuple[f32[2, 8, 32, 64], f32[2, 8, 32, 64]]:
    cache_position = torch.arange(position, position + 1)
    keys[:, :, cache_position] = key_states
    values[:, :, cache_position] = value_states
    return keys, values


# fairseq, fairseq/search.py: BeamSearch.step (scores added, top 2 * beam over beam x vocab, then beam and token)
def fairseq_beam_search_step(
    lprobs: f32[2, 4, 500], scores: f32[2, 4, 1], beam_size: int = 4
) -> tuple[f32[2, 8], i64[2, 8], i64[2, 8]]:
    bsz, beam, vocab_size = lprobs.shape
    lprobs = lprobs + scores
    top_prediction = torch.topk(lprobs.view(bsz, -1), k=min(beam_size * 2, lprobs.view(bsz, -1).size(1) - 1))
    scores_buf = top_prediction[0]
    indices_buf = top_prediction[1]
    beams_buf = torch.div(indices_buf, vocab_size, rounding_mode="trunc")
    indices_buf = indices_buf.fmod(vocab_size)
    return scores_buf, indices_buf, beams_buf


# A decode step over a static cache (Hugging Face's StaticLayer.update with index_copy_, then scaled dot-product
# attention of one query over the positions written so far)
def hf_decode_step_attention(
    q: f32[2, 8, 1, 64], keys: f32[2, 8, 32, 64], values: f32[2, 8, 32, 64], key_states: f32[2, 8, 1, 64],
    value_states: f32[2, 8, 1, 64], position: int = 17
) -> tuple[f32[2, 8, 1, 64], f32[2, 8, 32, 64], f32[2, 8, 32, 64]]:
    cache_position = torch.arange(position, position + 1)
    keys.index_copy_(2, cache_position, key_states)
    values.index_copy_(2, cache_position, value_states)
    visible = torch.arange(32) <= position
    attn = torch.matmul(q, keys.transpose(2, 3)) / 8.0
    attn = attn.masked_fill(~visible, float("-inf"))
    attn = torch.softmax(attn, dim=-1)
    return torch.matmul(attn, values), keys, values


# Hugging Face transformers, generation/logits_process.py: EtaLogitsWarper.__call__ (epsilon 0.05, min_tokens_to_keep
# 1, filter_value -inf; self.epsilon is torch.tensor(epsilon))
def hf_eta_warper(input_ids: i64[2, 6], scores: f32[2, 32]) -> f32[2, 32]:
    scores = scores * 4.0
    epsilon = torch.tensor(0.05)
    min_tokens_to_keep = 1
    filter_value = -float("Inf")
    probabilities = scores.softmax(dim=-1)
    entropy = torch.distributions.Categorical(logits=scores).entropy()
    eta = torch.min(epsilon, torch.sqrt(epsilon) * torch.exp(-entropy))[..., None]
    indices_to_remove = probabilities < eta
    top_k = min(min_tokens_to_keep, scores.size(-1))
    indices_to_remove = indices_to_remove & (scores < torch.topk(scores, top_k)[0][..., -1, None])
    scores_processed = scores.masked_fill(indices_to_remove, filter_value)
    return scores_processed


# llama, llama/model.py: precompute_freqs_cis and apply_rotary_emb (complex multiply via view_as_complex)
def llama_apply_rotary_emb(xq: f32[1, 5, 4, 16], xk: f32[1, 5, 4, 16]) -> tuple[f32[1, 5, 4, 16], f32[1, 5, 4, 16]]:
    dim, end, theta = 16, 5, 10000.0
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)
    freqs = torch.outer(t, freqs).float()
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs)
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    ndim = xq_.ndim
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(xq_.shape)]
    freqs_cis = freqs_cis.view(*shape)
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)
