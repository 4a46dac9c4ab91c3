"""Held-out real code (ported after the fixes of issue 14, not seen before): an optimizer step with nested helper
functions, two detection post-processing steps and a hand-written RNN recurrence."""
from __future__ import annotations

import math

import torch


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


# torchvision, torchvision/ops/boxes.py: _batched_nms_coordinate_trick up to the boxes given to nms (the offsets
# that keep boxes of different categories from overlapping); torchvision.ops.nms itself is not ported
def tv_batched_nms_offsets(raw: f32[40, 4], raw_idxs: i64[40]) -> f32[40, 4]:
    xy = (raw[:, :2] + 1.0) * 32.0
    boxes = torch.cat([xy, xy + raw[:, 2:].abs() * 16.0 + 1.0], 1)
    idxs = raw_idxs.abs() % 5
    if boxes.numel() == 0:
        return torch.empty((0,), dtype=torch.int64, device=boxes.device)
    max_coordinate = boxes.max()
    offsets = idxs.to(boxes) * (max_coordinate + torch.tensor(1).to(boxes))
    boxes_for_nms = boxes + offsets[:, None]
    return boxes_for_nms


# yolov5, utils/metrics.py: bbox_iou with xywh=True and CIoU=True (eps 1e-7), boxes (1, 4) against (n, 4)
def yolo_bbox_ciou(raw1: f32[1, 4], raw2: f32[30, 4]) -> f32[30, 1]:
    box1 = torch.cat([(raw1[:, :2] + 1.0) * 20.0, raw1[:, 2:].abs() * 10.0 + 1.0], 1)
    box2 = torch.cat([(raw2[:, :2] + 1.0) * 20.0, raw2[:, 2:].abs() * 10.0 + 1.0], 1)
    eps = 1e-7
    (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
    w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
    b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
    b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * (
        b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)
    ).clamp(0)
    union = w1 * h1 + w2 * h2 - inter + eps
    iou = inter / union
    cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)
    ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)
    c2 = cw**2 + ch**2 + eps
    rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
    v = (4 / math.pi**2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
    with torch.no_grad():
        alpha = v / (v - iou + (1 + eps))
    return iou - (rho2 / c2 + v * alpha)


# SRU (taolei87/sru), sru/ops.py: sru_compute_cpu, unidirectional, k == 3 (the skip term is the input itself),
# tanh activation, no masks; `x.new(...)` (uninitialized) written as new_zeros
def sru_compute_cpu(u: f32[5, 2, 24], x: f32[5, 2, 8], bias: f32[16], init: f32[2, 8]) -> tuple[f32[5, 2, 8], f32[2, 8]]:
    d, bidir, scale_x = 8, 1, 1
    length = x.size(0) if x.dim() == 3 else 1
    batch = x.size(-2)
    k = u.size(-1) // d // bidir
    u = u.view(length, batch, bidir, d, k)
    forget_bias, reset_bias = bias.view(2, bidir, d)
    x_prime = x.view(length, batch, bidir, d)
    x_prime = x_prime * scale_x if scale_x != 1 else x_prime
    h = x.new_zeros(length, batch, bidir, d)
    c_init = init.view(batch, bidir, d)
    c_final = []
    for di in range(bidir):
        time_seq = range(length) if di == 0 else range(length - 1, -1, -1)
        c_prev = c_init[:, di, :]
        fb, rb = forget_bias[di], reset_bias[di]
        for t in time_seq:
            f_t = (u[t, :, di, :, 1] + fb).sigmoid()
            r_t = (u[t, :, di, :, 2] + rb).sigmoid()
            c_t = u[t, :, di, :, 0] + (c_prev - u[t, :, di, :, 0]) * f_t
            c_prev = c_t
            g_c_t = c_t.tanh()
            h_t = (g_c_t - x_prime[t, :, di, :]) * r_t + x_prime[t, :, di, :]
            h[t, :, di, :] = h_t
        c_final.append(c_t)
    return h.view(length, batch, -1), torch.stack(c_final, dim=1).view(batch, -1)
