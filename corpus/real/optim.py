"""Optimizer steps ported from torch.optim (torch/optim/sgd.py: _single_tensor_sgd and the foreach
_multi_tensor_sgd; torch/optim/swa_utils.py), each updating a small model's tensors in place."""
from __future__ import annotations

import math

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


# PyTorch, torch/optim/adam.py: _single_tensor_adam (amsgrad False, weight_decay 0, not capturable)
def adam_step(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], m0: f32[16, 8],
    m1: f32[16], m2: f32[4, 16], v0: f32[16, 8], v1: f32[16], v2: f32[4, 16], step: int = 4, lr: float = 1e-3
) -> None:
    for v in (v0, v1, v2):
        v.abs_()
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    exp_avgs = [m0, m1, m2]
    exp_avg_sqs = [v0, v1, v2]
    state_steps = [torch.tensor(float(step)), torch.tensor(float(step)), torch.tensor(float(step))]
    beta1, beta2, eps, weight_decay, maximize = 0.9, 0.999, 1e-8, 0.0, False
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]
        step_t += 1
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)


# PyTorch, torch/optim/adam.py: _single_tensor_adam as AdamW runs it (decoupled weight decay 1e-2, amsgrad True)
def adamw_amsgrad_step(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], m0: f32[16, 8],
    m1: f32[16], m2: f32[4, 16], v0: f32[16, 8], v1: f32[16], v2: f32[4, 16], vmax0: f32[16, 8], vmax1: f32[16],
    vmax2: f32[4, 16], step: int = 9, lr: float = 1e-3
) -> None:
    for v in (v0, v1, v2, vmax0, vmax1, vmax2):
        v.abs_()
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    exp_avgs = [m0, m1, m2]
    exp_avg_sqs = [v0, v1, v2]
    max_exp_avg_sqs = [vmax0, vmax1, vmax2]
    state_steps = [torch.tensor(float(step)), torch.tensor(float(step)), torch.tensor(float(step))]
    beta1, beta2, eps, weight_decay = 0.9, 0.999, 1e-8, 1e-2
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        step_t = state_steps[i]
        step_t += 1
        param.mul_(1 - lr * weight_decay)
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        step = step_t.item()
        bias_correction1 = 1 - beta1**step
        bias_correction2 = 1 - beta2**step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = bias_correction2**0.5
        torch.maximum(max_exp_avg_sqs[i], exp_avg_sq, out=max_exp_avg_sqs[i])
        denom = (max_exp_avg_sqs[i].sqrt() / bias_correction2_sqrt).add_(eps)
        param.addcdiv_(exp_avg, denom, value=-step_size)


# PyTorch, torch/optim/rmsprop.py: _single_tensor_rmsprop (alpha 0.99, not centered, no momentum)
def rmsprop_step(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], s0: f32[16, 8],
    s1: f32[16], s2: f32[4, 16], lr: float = 1e-2
) -> None:
    for s in (s0, s1, s2):
        s.abs_()
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    square_avgs = [s0, s1, s2]
    alpha, eps, weight_decay = 0.99, 1e-8, 0.0
    for i, param in enumerate(params):
        grad = grads[i]
        square_avg = square_avgs[i]
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        avg = square_avg.sqrt()
        avg = avg.add_(eps)
        param.addcdiv_(grad, avg, value=-lr)


# PyTorch, torch/optim/rmsprop.py: _single_tensor_rmsprop (centered, momentum 0.9)
def rmsprop_centered_momentum_step(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], s0: f32[16, 8], s1: f32[16], a0: f32[16, 8],
    a1: f32[16], b0: f32[16, 8], b1: f32[16], lr: float = 1e-2
) -> None:
    for s, a in ((s0, a0), (s1, a1)):
        s.abs_().add_(1.0)
        a.mul_(0.5)
    params = [w0, w1]
    grads = [g0, g1]
    square_avgs = [s0, s1]
    grad_avgs = [a0, a1]
    momentum_buffer_list = [b0, b1]
    alpha, eps, momentum = 0.99, 1e-8, 0.9
    for i, param in enumerate(params):
        grad = grads[i]
        square_avg = square_avgs[i]
        square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        grad_avg = grad_avgs[i]
        grad_avg.lerp_(grad, 1 - alpha)
        avg = square_avg.addcmul(grad_avg, grad_avg, value=-1).sqrt_()
        avg = avg.add_(eps)
        buf = momentum_buffer_list[i]
        buf.mul_(momentum).addcdiv_(grad, avg)
        param.add_(buf, alpha=-lr)


# PyTorch, torch/optim/adagrad.py: _single_tensor_adagrad (dense gradients, lr_decay 1e-3)
def adagrad_step(
    w0: f32[16, 8], w1: f32[16], w2: f32[4, 16], g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], h0: f32[16, 8],
    h1: f32[16], h2: f32[4, 16], step: int = 3, lr: float = 1e-2
) -> None:
    for h in (h0, h1, h2):
        h.abs_()
    params = [w0, w1, w2]
    grads = [g0, g1, g2]
    state_sums = [h0, h1, h2]
    state_steps = [torch.tensor(float(step)), torch.tensor(float(step)), torch.tensor(float(step))]
    lr_decay, eps, weight_decay = 1e-3, 1e-10, 0.0
    for param, grad, state_sum, step_t in zip(params, grads, state_sums, state_steps):
        step_t += 1
        step = step_t.item()
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        clr = lr / (1 + (step - 1) * lr_decay)
        state_sum.addcmul_(grad, grad, value=1)
        std = state_sum.sqrt().add_(eps)
        param.addcdiv_(grad, std, value=-clr)


# PyTorch, torch/nn/utils/clip_grad.py: _get_total_norm and _clip_grads_with_norm_ (the per-tensor, non-foreach path)
def clip_grad_norm(g0: f32[16, 8], g1: f32[16], g2: f32[4, 16], max_norm: float = 1.0) -> f32[()]:
    grads = [g0, g1, g2]
    norm_type = 2.0
    norms = [torch.linalg.vector_norm(g, norm_type) for g in grads]
    total_norm = torch.linalg.vector_norm(torch.stack([norm.to(grads[0].device) for norm in norms]), norm_type)
    clip_coef = max_norm / (total_norm + 1e-6)
    clip_coef_clamped = torch.clamp(clip_coef, max=1.0)
    for g in grads:
        g.mul_(clip_coef_clamped.to(g.device))
    return total_norm


# yolov5, utils/torch_utils.py: ModelEMA.update (decay ramp 0.9999 * (1 - exp(-updates / 2000)), floating-point
# entries of the state dict only)
def yolo_model_ema(
    ema_w: f32[16, 8], ema_b: f32[16], ema_n: i64[()], w: f32[16, 8], b: f32[16], n: i64[()], updates: int = 300
) -> None:
    updates += 1
    d = 0.9999 * (1 - math.exp(-updates / 2000))
    msd = {"conv.weight": w, "conv.bias": b, "bn.num_batches_tracked": n}
    ema_sd = {"conv.weight": ema_w, "conv.bias": ema_b, "bn.num_batches_tracked": ema_n}
    for k, v in ema_sd.items():
        if v.dtype.is_floating_point:
            v *= d
            v += (1 - d) * msd[k].detach()


# PyTorch, torch/optim/swa_utils.py: get_ema_avg_fn(0.999)'s ema_update
def _ema_avg(ema_param, current_param, num_averaged):
    decay = 0.999
    return decay * ema_param + (1 - decay) * current_param


# PyTorch, torch/optim/swa_utils.py: AveragedModel.update_parameters with avg_fn=get_ema_avg_fn(0.999) (no
# multi_avg_fn, use_buffers False)
def swa_utils_ema_update(
    e0: f32[16, 8], e1: f32[16], p0: f32[16, 8], p1: f32[16], n_averaged: i64[()]
) -> None:
    self_param = [e0, e1]
    model_param = [p0, p1]
    n_averaged.abs_().add_(1)
    self_param_detached = []
    model_param_detached = []
    copy_param = bool(n_averaged == 0)
    for p_averaged, p_model in zip(self_param, model_param):
        p_model_ = p_model.detach().to(p_averaged.device)
        self_param_detached.append(p_averaged.detach())
        model_param_detached.append(p_model_)
        if copy_param:
            p_averaged.detach().copy_(p_model_)
    if n_averaged > 0:
        for p_averaged, p_model in zip(self_param_detached, model_param_detached):
            n = n_averaged.to(p_averaged.device)
            p_averaged.detach().copy_(_ema_avg(p_averaged.detach(), p_model, n))
    n_averaged += 1


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
