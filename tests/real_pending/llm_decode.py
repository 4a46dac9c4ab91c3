"""LLM decode-step code some engine refuses: llama's generation loop (a data-dependent break) and Hugging Face
transformers' chunked feed-forward helper (a nested function that reads the enclosing function's locals). The model calls in a generation loop are a tiny
stand-in (an embedding and an output projection), the loop around them is the original's."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


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
