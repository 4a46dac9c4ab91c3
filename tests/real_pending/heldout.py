"""Held-out real code ported for issue 14 that some engine refuses: pytorch-lamb's Lamb step, whose trust ratio is
an int or a tensor depending on the data (the other held-out ports of this round run on every engine and are in
corpus/real)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# pytorch-lamb (cybertronai), pytorch_lamb/lamb.py: Lamb.step for two parameters (betas (0.9, 0.999), eps 1e-6,
# weight_decay 1e-2, adam=False), the trust ratio guarded against zero norms; `p.data.add_(...)` written `p.add_(...)`
# (PyTorch's version counter does not see writes through `.data`, so its goldens would not record the update)
def lamb_step(
    w0: f32[8, 4], w1: f32[6], g0: f32[8, 4], g1: f32[6], m0: f32[8, 4], m1: f32[6], v0: f32[8, 4], v1: f32[6],
    lr: float = 1e-3
) -> tuple[f32[()], f32[()]]:
    beta1, beta2, eps, weight_decay = 0.9, 0.999, 1e-6, 1e-2
    trust = []
    for p, grad, exp_avg, exp_avg_sq in zip([w0, w1], [g0, g1], [m0, m1], [v0, v1]):
        exp_avg_sq.abs_()
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step_size = lr
        weight_norm = p.data.pow(2).sum().sqrt().clamp(0, 10)
        adam_step = exp_avg / exp_avg_sq.sqrt().add(eps)
        if weight_decay != 0:
            adam_step.add_(p.data, alpha=weight_decay)
        adam_norm = adam_step.pow(2).sum().sqrt()
        if weight_norm == 0 or adam_norm == 0:
            trust_ratio = 1
        else:
            trust_ratio = weight_norm / adam_norm
        trust.append(trust_ratio)
        p.add_(adam_step * (-step_size * trust_ratio))
    return trust[0], trust[1]
