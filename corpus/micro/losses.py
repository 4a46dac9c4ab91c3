"""Classification losses as real code calls them (issue 14's round 16: torchvision's keypoint R-CNN loss calls
`F.cross_entropy`, Hugging Face's DoLa `F.kl_div`): class indices with ignored rows and every reduction, class
probabilities, `nll_loss` of log-probabilities, one sample of `[C]` logits, and `kl_div` with and without log targets
and a target holding zeros."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def cross_entropy_of_class_indices(
    logits: f32[8, 5], labels: i64[8]
) -> tuple[f32[()], f32[()], f32[8], f32[()], f32[()]]:
    """Labels in [0, 5) with two rows ignored (-100, PyTorch's default, and 3 by `ignore_index`)."""
    labels = labels % 5
    labels[1] = -100
    mean = F.cross_entropy(logits, labels)
    total = F.cross_entropy(logits, labels, reduction="sum")
    rows = F.cross_entropy(logits * 2.0, labels, reduction="none")
    labels[6] = 3
    skip3 = F.cross_entropy(logits, torch.where(labels < 0, 0, labels), ignore_index=3)
    one = F.cross_entropy(logits[0], labels[0])
    return mean, total, rows, skip3, one


def cross_entropy_of_class_probabilities(logits: f32[4, 6], raw: f32[4, 6]) -> tuple[f32[()], f32[4]]:
    probs = torch.softmax(raw * 3.0, dim=1)
    return F.cross_entropy(logits, probs), F.cross_entropy(logits, probs, reduction="none")


def nll_loss_of_log_probabilities(scores: f32[6, 7], labels: i64[6]) -> tuple[f32[()], f32[6]]:
    logp = torch.log_softmax(scores, dim=-1)
    labels = labels % 7
    return F.nll_loss(logp, labels), F.nll_loss(logp, labels, reduction="none")


def kl_div_of_distributions(
    a: f32[3, 8], b: f32[3, 8]
) -> tuple[f32[()], f32[()], f32[3, 8], f32[()]]:
    """DoLa's `F.kl_div(log_q, p, reduction="none")`, `batchmean`, log targets, and a target with zeros (0 * log 0 is
    0)."""
    log_q = F.log_softmax(a, dim=-1)
    p = F.softmax(b, dim=-1)
    p0 = torch.where(p > 0.1, p, 0.0)
    batch = F.kl_div(log_q, p, reduction="batchmean")
    logged = F.kl_div(log_q, torch.log(p), reduction="sum", log_target=True)
    zeros = F.kl_div(log_q, p0, reduction="none")
    return batch, logged, zeros, F.kl_div(log_q, p0)
