"""Held-out real code, issue 14's sixteenth round, the programs some engine refuses (the round's others are in
corpus/real/heldout16.py): torch-optimizer's SWATS (`Tensor.allclose`; a dict changed under an `if` on a run-time
value). Pending at first and in corpus/real now: Hugging Face's DoLa layer contrast (a list indexed by `.item()`),
torchvision's keypoint R-CNN loss (`torch.uint8`, `torch.where(cond)`) and Ultralytics' TaskAlignedAssigner
(`torch.int8`) in corpus/real/heldout16.py, Detectron2's RotatedBoxes clip (`torch.where(cond)`) in
corpus/real/detection_where.py. Inputs arrive uniform in
[-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import copy
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


# SWATS (Keskar and Socher, 2017), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/swats.py: SWATS.step
# (lr 1e-2, betas (0.9, 0.999), eps 1e-3, weight decay 1e-3, amsgrad off, nesterov off, adamd_bias_correction off),
# four steps on two parameters; p.grad is each step's gradient slice, which the weight decay updates in place as the
# original does to w.grad.data; the group and per-parameter state as dicts (the Adam-to-SGD switch is tested every
# step and, with these gradients, not taken)
def swats_steps(p1: f32[6, 5], p2: f32[7], grads1: f32[4, 6, 5], grads2: f32[4, 7]) -> tuple[f32[6, 5], f32[7]]:
    group = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-3, phase='ADAM', weight_decay=1e-3, amsgrad=False,
                 nesterov=False, adamd_bias_correction=False, params=[p1, p2])
    states = [{}, {}]
    for it in range(4):
        grads = [grads1[it], grads2[it]]
        for j, w in enumerate(group['params']):
            grad = grads[j]

            amsgrad = group['amsgrad']

            state = states[j]

            # state initialization
            if len(state) == 0:
                state['step'] = 0
                # exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(
                    w.data, memory_format=torch.preserve_format
                )
                # moving average for the non-orthogonal projection scaling
                state['exp_avg2'] = w.new(1).fill_(0)
                if amsgrad:
                    # maintains max of all exp. moving avg.
                    # of sq. grad. values
                    state['max_exp_avg_sq'] = torch.zeros_like(
                        w.data, memory_format=torch.preserve_format
                    )

            exp_avg, exp_avg2, exp_avg_sq = (
                state['exp_avg'],
                state['exp_avg2'],
                state['exp_avg_sq'],
            )

            if amsgrad:
                max_exp_avg_sq = state['max_exp_avg_sq']
            beta1, beta2 = group['betas']

            state['step'] += 1

            if group['weight_decay'] != 0:
                grad.add_(w.data, alpha=group['weight_decay'])

            # if its SGD phase, take an SGD update and continue
            if group['phase'] == 'SGD':
                if 'momentum_buffer' not in state:
                    buf = state['momentum_buffer'] = torch.clone(
                        grad
                    ).detach()
                else:
                    buf = state['momentum_buffer']
                    buf.mul_(beta1).add_(grad)
                    grad = buf

                grad.mul_(1 - beta1)
                if group['nesterov']:
                    grad.add_(buf, alpha=beta1)

                w.data.add_(grad, alpha=-group['lr'])
                continue

            # decay the first and second moment running average coefficient
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            if amsgrad:
                # maintains the maximum of all 2nd
                # moment running avg. till now
                torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                # use the max. for normalizing running avg. of gradient
                denom = max_exp_avg_sq.sqrt().add_(group['eps'])
            else:
                denom = exp_avg_sq.sqrt().add_(group['eps'])

            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            if group['adamd_bias_correction']:
                step_size = group['lr'] * (bias_correction2 ** 0.5)
            else:
                step_size = (
                    group['lr']
                    * (bias_correction2 ** 0.5)
                    / bias_correction1
                )

            p = -step_size * (exp_avg / denom)
            w.data.add_(p)

            p_view = p.view(-1)
            pg = p_view.dot(grad.view(-1))

            if pg != 0:
                # the non-orthognal scaling estimate
                scaling = p_view.dot(p_view) / -pg
                exp_avg2.mul_(beta2).add_(scaling, alpha=1 - beta2)

                # bias corrected exponential average
                corrected_exp_avg = exp_avg2 / bias_correction2

                # checking criteria of switching to SGD training
                if (
                    state['step'] > 1
                    and corrected_exp_avg.allclose(scaling, rtol=1e-6)
                    and corrected_exp_avg > 0
                ):
                    group['phase'] = 'SGD'
                    group['lr'] = corrected_exp_avg.item()
    return p1, p2
