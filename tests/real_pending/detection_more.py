"""Detection code some engine refuses: torchvision's sigmoid focal loss (F.binary_cross_entropy_with_logits)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# torchvision, torchvision/ops/focal_loss.py: sigmoid_focal_loss (alpha 0.25, gamma 2, reduction "sum") with
# 0/1 targets
def tv_sigmoid_focal_loss(inputs: f32[64, 5], raw_targets: f32[64, 5]) -> f32[()]:
    targets = (raw_targets > 0.6).float()
    alpha, gamma, reduction = 0.25, 2.0, "sum"
    p = torch.sigmoid(inputs)
    ce_loss = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce_loss * ((1 - p_t) ** gamma)
    if alpha >= 0:
        alpha_t = alpha * targets + (1 - alpha) * (1 - targets)
        loss = alpha_t * loss
    if reduction == "none":
        pass
    elif reduction == "mean":
        loss = loss.mean()
    elif reduction == "sum":
        loss = loss.sum()
    else:
        raise ValueError(
            f"Invalid Value for arg 'reduction': '{reduction} \n Supported reduction modes: 'none', 'mean', 'sum'"
        )
    return loss
