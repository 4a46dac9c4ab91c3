"""LLM decode-step code some engine refuses: llama's generation loop (a data-dependent break). The model calls in the
generation loop are a tiny stand-in (an embedding and an output projection), the loop around them is the original's."""
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
