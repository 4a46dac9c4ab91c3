"""Optimizer steps ported from torch.optim (the single-tensor code paths of Adam, AdamW, RMSprop and Adagrad),
torch.nn.utils.clip_grad_norm_, torch.optim.swa_utils and yolov5's ModelEMA, each updating a small model's tensors in
place, written as those projects write them; funcfuse refuses them on some engine today (see STATUS.md). Optimizer
state that must be non-negative (second moments) is made so with abs_() first."""
from __future__ import annotations

import math

import torch


# PyTorch, torch/optim/sgd.py: _multi_tensor_sgd (foreach; momentum 0.9, nesterov, weight_decay 0, so the nesterov
# _foreach_add_ writes into the gradients themselves)
def sgd_foreach_nesterov(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], m0: f32[16, 8], m1: f32[16], lr: float = 0.1
) -> None:
    device_params = [w0, w1]
    device_grads = [g0, g1]
    device_momentum_buffer_list = [m0, m1]
    weight_decay, momentum, dampening, nesterov, maximize = 0.0, 0.9, 0.0, True, False
    if maximize:
        device_grads = torch._foreach_neg(device_grads)
    if weight_decay != 0:
        device_grads = torch._foreach_add(device_grads, device_params, alpha=weight_decay)
    if momentum != 0:
        bufs = []
        all_states_with_momentum_buffer = True
        for i in range(len(device_momentum_buffer_list)):
            if device_momentum_buffer_list[i] is None:
                all_states_with_momentum_buffer = False
                break
            else:
                bufs.append(device_momentum_buffer_list[i])
        if all_states_with_momentum_buffer:
            torch._foreach_mul_(bufs, momentum)
            torch._foreach_add_(bufs, device_grads, alpha=1 - dampening)
        if nesterov:
            torch._foreach_add_(device_grads, bufs, alpha=momentum)
        else:
            device_grads = bufs
    torch._foreach_add_(device_params, device_grads, alpha=-lr)
