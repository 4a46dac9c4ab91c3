"""Held-out real code, issue 14's twentieth round, the programs some engine refuses (the round's others are in
corpus/real/heldout20.py): gpt-fast's speculative acceptance (`nonzero`, then a result whose length depends on the
data). YOLOX's SimOTA dynamic-k matching (`torch.uint8`, `topk` with a k from tensor data), pending at first, runs
now and is in corpus/real/heldout20.py. Inputs arrive uniform in [-1, 1); integer
inputs in [0, 10)."""
from __future__ import annotations

import math
from itertools import product
from math import ceil

import torch
import torch.nn.functional as F


# gpt-fast (pytorch-labs/gpt-fast), generate.py: logits_to_probs
def _gf_logits_to_probs(logits, temperature: float = 1.0, top_k=None):
    logits = logits / max(temperature, 1e-5)
    if top_k is not None:
        v, _ = torch.topk(logits, min(top_k, logits.size(-1)))
        pivot = v.select(-1, -1).unsqueeze(-1)
        logits = torch.where(logits < pivot, -float("Inf"), logits)
    probs = torch.nn.functional.softmax(logits, dim=-1)
    return probs


# gpt-fast, generate.py: multinomial_sample_one_no_sync, with the exponential noise q given
def _gf_multinomial_sample_one_no_sync(probs_sort, q):
    return torch.argmax(probs_sort / q, dim=-1, keepdim=True).to(dtype=torch.int)


# gpt-fast (pytorch-labs/gpt-fast), generate.py: speculative_decode's acceptance part (see the program below)
def _gf_speculative_accept(draft_logits, target_logits_raw, u, noise, speculate_k=4):
    device = draft_logits.device
    sampling_kwargs = {"temperature": 0.8, "top_k": 6}
    draft_probs = [_gf_logits_to_probs(draft_logits[i], **sampling_kwargs) for i in range(speculate_k)]
    draft_tokens = torch.cat([torch.argmax(dp, dim=-1, keepdim=True) for dp in draft_probs])
    target_logits = target_logits_raw.unsqueeze(0)
    target_probs = _gf_logits_to_probs(target_logits[0], **sampling_kwargs)
    draft_probs = torch.stack(draft_probs)
    p = draft_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    q = target_probs[torch.arange(0, speculate_k, device=device), draft_tokens]
    accept_draft_prob = torch.minimum(torch.ones(()), q[:speculate_k] / p)
    rejected_locations = (u > accept_draft_prob).nonzero()

    if rejected_locations.shape[0] == 0:
        accept_length = speculate_k + 1
        last_token = _gf_multinomial_sample_one_no_sync(target_probs[-1], noise)
        return torch.cat([draft_tokens, last_token.long()]), accept_length
    else:
        accept_length = rejected_locations[0].item()
        p = draft_probs[accept_length]
        q = target_probs[accept_length]
        new = q - p
        new = torch.where(new > 0, new, 0.0)
        new = new / new.sum()
        next_token = _gf_multinomial_sample_one_no_sync(new, noise)
        return torch.cat([draft_tokens[:accept_length], next_token.long()]), accept_length


# gpt-fast (pytorch-labs/gpt-fast), generate.py: speculative_decode after the draft and target model calls
# (speculate_k 4, temperature 0.8, top_k 6, vocabulary 16): p and q gathered at the draft tokens, acceptance
# against torch.rand_like (here the uniform input u), then either the bonus token (all accepted; the draft model's
# extra step is left out) or the residual distribution's sample. The draft tokens are the argmax of the draft
# probabilities (the draft model's sampling is outside this function). The exponential noise of the two samplers is made
# from inputs (q = -log(1 - u)), so the sample is determined; the variable-length result is written into a
# fixed [5] buffer padded with -1 and returned with the accept length. Two cases: target logits near the draft's
# (most accepted) and independent ones.
def gptfast_speculative_accept(
    draft_raw: f32[4, 16], target_raw: f32[5, 16], u: f32[2, 4], noise_raw: f32[2, 16]
) -> tuple[i64[2, 5], i64[2]]:
    out = torch.full((2, 5), -1, dtype=torch.int64)
    lens = []
    draft_logits = draft_raw * 3.0
    noise = -torch.log(1 - (noise_raw + 1) / 2)
    cases = [torch.cat([draft_logits, draft_logits[-1:]]) + target_raw * 0.3, target_raw * 3.0]
    for c in range(2):
        tokens, accept_length = _gf_speculative_accept(draft_logits, cases[c], (u[c] + 1) / 2, noise[c])
        out[c, :tokens.shape[0]] = tokens
        lens.append(accept_length)
    return out, torch.tensor(lens)
