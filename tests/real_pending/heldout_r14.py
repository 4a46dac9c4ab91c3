"""Held-out real code of issue 14's fourteenth round that some engine refuses: Medusa's evaluate_posterior
(`torch.where(condition)` with one argument, and a slice bounded by a tensor: sizes that depend on the data).
Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _medusa_evaluate_posterior(
    logits, candidates, temperature, posterior_threshold, posterior_alpha
):
    # Greedy decoding based on temperature value
    if temperature == 0:
        # Find the tokens that match the maximum logits for each position in the sequence
        posterior_mask = (
            candidates[:, 1:] == torch.argmax(logits[:, :-1], dim=-1)
        ).int()
        candidates_accept_length = (torch.cumprod(posterior_mask, dim=1)).sum(dim=1)
        accept_length = candidates_accept_length.max()
        # Choose the best candidate
        if accept_length == 0:
            # Default to the first candidate if none are accepted
            best_candidate = torch.tensor(0, dtype=torch.long, device=candidates.device)
        else:
            best_candidate = torch.argmax(candidates_accept_length).to(torch.long)
        return best_candidate, accept_length
    # Calculate posterior probabilities and thresholds for candidate selection
    posterior_prob = torch.softmax(logits[:, :-1] / temperature, dim=-1)
    candidates_prob = torch.gather(
        posterior_prob, dim=-1, index=candidates[:, 1:].unsqueeze(-1)
    ).squeeze(-1)
    posterior_entropy = -torch.sum(
        posterior_prob * torch.log(posterior_prob + 1e-5), dim=-1
    )  # torch.sum(torch.log(*)) is faster than torch.prod
    threshold = torch.minimum(
        torch.ones_like(posterior_entropy) * posterior_threshold,
        torch.exp(-posterior_entropy) * posterior_alpha,
    )
    posterior_mask = candidates_prob > threshold
    candidates_accept_length = (torch.cumprod(posterior_mask, dim=1)).sum(dim=1)

    # Choose the best candidate based on the evaluated posterior probabilities
    accept_length = candidates_accept_length.max()
    if accept_length == 0:
        # If no candidates are accepted, just choose the first one
        best_candidate = torch.tensor(0, dtype=torch.long, device=candidates.device)
    else:
        best_candidates = torch.where(candidates_accept_length == accept_length)[0]
        # Accept the best one according to likelihood
        likelihood = torch.sum(
            torch.log(candidates_prob[best_candidates, :accept_length]), dim=-1
        )
        best_candidate = best_candidates[torch.argmax(likelihood)]
    return best_candidate, accept_length


# Medusa (FasterDecoding/Medusa), medusa/model/utils.py: evaluate_posterior, typical acceptance (temperature 0.7,
# posterior_threshold 0.09, posterior_alpha 0.3) and greedy (temperature 0) over 6 candidate paths of 5 tokens,
# vocabulary 10; for the greedy case the candidates agree with the model's argmax where the raw token is below 7
# (a stand-in for Medusa heads that mostly guess right); best candidate and accept length stacked per case
def medusa_evaluate_posterior(logits: f32[6, 5, 10], candidates: i64[6, 5]) -> tuple[i64[2], i64[2]]:
    logits = logits * 2
    best_t, len_t = _medusa_evaluate_posterior(logits, candidates, 0.7, 0.09, 0.3)
    greedy = candidates.clone()
    greedy[:, 1:] = torch.where(candidates[:, 1:] < 7, torch.argmax(logits[:, :-1], dim=-1), candidates[:, 1:])
    best_g, len_g = _medusa_evaluate_posterior(logits, greedy, 0, 0.09, 0.3)
    return torch.stack([best_t, len_t]), torch.stack([best_g, len_g])
