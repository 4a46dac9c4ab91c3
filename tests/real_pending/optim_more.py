"""Optimizer steps some engine refuses: torch.optim's Adamax (`unsqueeze_` on a temporary)."""
from __future__ import annotations

import math

import torch


# PyTorch, torch/optim/adamax.py: _single_tensor_adamax (beta1 0.9, beta2 0.999, not differentiable)
def adamax_step(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], m0: f32[16, 8], m1: f32[16], u0: f32[16, 8],
    u1: f32[16], step: int = 5, lr: float = 2e-3
) -> None:
    for u in (u0, u1):
        u.abs_()
    params = [w0, w1]
    grads = [g0, g1]
    exp_avgs = [m0, m1]
    exp_infs = [u0, u1]
    state_steps = [torch.tensor(float(step)), torch.tensor(float(step))]
    beta1, beta2, eps, weight_decay = 0.9, 0.999, 1e-8, 0.0
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_inf = exp_infs[i]
        step_t = state_steps[i]
        step_t += 1
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        norm_buf = torch.cat([exp_inf.mul_(beta2).unsqueeze(0), grad.abs().add_(eps).unsqueeze_(0)], 0)
        exp_inf.copy_(torch.amax(norm_buf, 0, keepdim=False))
        bias_correction = 1 - beta1 ** step_t.item()
        clr = lr / bias_correction
        param.addcdiv_(exp_avg, exp_inf, value=-clr)
