"""Held-out real code (ported after the fixes of issue 14, not seen before): an optimizer step with nested helper
functions, two detection post-processing steps and a hand-written RNN recurrence."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# PyTorch, torch/optim/radam.py: _single_tensor_radam (betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, not
# decoupled; the nested _compute_rect and _compute_adaptive_lr as written there), steps 3 and 7: one parameter takes
# the rectified branch (rho_t > 5), the other the plain one
def radam_step(
    w0: f32[8, 4], w1: f32[6], g0: f32[8, 4], g1: f32[6], m0: f32[8, 4], m1: f32[6], v0: f32[8, 4], v1: f32[6],
    lr: float = 1e-3
) -> None:
    v0.abs_()
    v1.abs_()
    params, grads, exp_avgs, exp_avg_sqs = [w0, w1], [g0, g1], [m0, m1], [v0, v1]
    state_steps = [torch.tensor(6.0), torch.tensor(2.0)]
    beta1, beta2, eps, weight_decay = 0.9, 0.999, 1e-8, 1e-2
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]
        step_t += 1
        step = step_t.item()
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        bias_corrected_exp_avg = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2**step) / bias_correction2

        def _compute_rect():
            return (
                (rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)
            ) ** 0.5

        def _compute_adaptive_lr():
            exp_avg_sq_sqrt = exp_avg_sq.sqrt()
            exp_avg_sq_sqrt = exp_avg_sq_sqrt.add(eps)
            return (bias_correction2**0.5) / exp_avg_sq_sqrt

        if rho_t > 5.0:
            param.add_(bias_corrected_exp_avg * lr * _compute_adaptive_lr() * _compute_rect(), alpha=-1.0)
        else:
            param.add_(bias_corrected_exp_avg * lr, alpha=-1.0)


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


# IndRNN (Sunnydreamrain/IndRNN_pytorch), IndRNN_onlyrecurrent.py: IndRNN_onlyrecurrent.forward's plain PyTorch path
# (relu, h0 given): the recurrence is elementwise, h_t = relu(x_t + w_hh * h_{t-1})
def indrnn_onlyrecurrent(input: f32[7, 3, 16], weight_hh: f32[16], h0: f32[3, 16]) -> f32[7, 3, 16]:
    assert input.dim() == 2 or input.dim() == 3
    if (h0.size(-1) != input.size(-1)) or (h0.size(-2) != input.size(-2)):
        raise RuntimeError("The initial hidden size must be equal to input_size")
    hx = h0
    outputs = []
    for input_x in input:
        hx = F.relu(input_x + hx * weight_hh)
        outputs.append(hx)
    return torch.stack(outputs, 0)
