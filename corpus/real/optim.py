"""Optimizer steps ported from torch.optim (torch/optim/sgd.py: _single_tensor_sgd; torch/optim/swa_utils.py),
each updating a small model's tensors in place. Programs of the same family that funcfuse refuses today are in
tests/real_pending/optim.py."""
from __future__ import annotations

import torch


# PyTorch, torch/optim/sgd.py: _single_tensor_sgd (weight_decay 1e-4, momentum 0.9, dampening 0, nesterov False,
# momentum buffers already present)
def sgd_momentum(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], m0: f32[16, 8],
    m1: f32[16], m2: f32[4, 16], lr: float = 0.1
) -> None:
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    momentum_buffer_list = [m0, m1, m2]
    weight_decay, momentum, dampening, nesterov, maximize = 1e-4, 0.9, 0.0, False, False
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            if buf is None:
                buf = grad.detach().clone()
                momentum_buffer_list[i] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        param.add_(grad, alpha=-lr)


# PyTorch, torch/optim/sgd.py: _single_tensor_sgd, first step (no momentum buffers yet), nesterov, maximize=False
def sgd_nesterov_first_step(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], lr: float = 0.05
) -> tuple[f32[16, 8], f32[16], f32[4, 16]]:
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    momentum_buffer_list = [None, None, None]
    weight_decay, momentum, dampening, nesterov, maximize = 5e-4, 0.9, 0.0, True, False
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            if buf is None:
                buf = grad.detach().clone()
                momentum_buffer_list[i] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        param.add_(grad, alpha=-lr)
    return momentum_buffer_list[0], momentum_buffer_list[1], momentum_buffer_list[2]


# PyTorch, torch/optim/swa_utils.py: get_swa_avg_fn applied by AveragedModel.update_parameters, one parameter pair
def swa_average(averaged_param: f32[32, 8], current_param: f32[32, 8], num_averaged: i64[()]) -> None:
    averaged_param.copy_(averaged_param + (current_param - averaged_param) / (num_averaged + 1))
    num_averaged += 1


# PyTorch, torch/optim/sgd.py: _single_tensor_sgd with maximize=True (grad = -grads[i]) and dampening 0.1
def sgd_maximize_dampening(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], m0: f32[16, 8], m1: f32[16], lr: float = 0.1
) -> None:
    params = [w0, w1]
    grads = [g0, g1]
    momentum_buffer_list = [m0, m1]
    weight_decay, momentum, dampening, nesterov, maximize = 0.0, 0.9, 0.1, False, True
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        if momentum != 0:
            buf = momentum_buffer_list[i]
            if buf is None:
                buf = grad.detach().clone()
                momentum_buffer_list[i] = buf
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            if nesterov:
                grad = grad.add(buf, alpha=momentum)
            else:
                grad = buf
        param.add_(grad, alpha=-lr)
