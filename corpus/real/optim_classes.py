"""torch.optim's classes as training code uses them: the built-in `SGD`, `Adam` and `AdamW` stepped over parameters
whose `.grad` the program assigns, parameter groups given as dicts, `zero_grad`, and `Optimizer` subclassed with a
`required` learning rate and per-parameter state in `self.state[p]`. Each comment names the PyTorch behaviour it
exercises. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import torch
from torch.optim import Optimizer
from torch.optim.optimizer import required


# PyTorch, torch/optim/sgd.py: SGD.step over two parameter groups (the second with its own lr, given as a bare tensor),
# nesterov momentum and weight decay, zero_grad() before each step
def torch_sgd_param_groups(w: f32[6, 4], b: f32[6], gw: f32[3, 6, 4], gb: f32[3, 6]) -> tuple[f32[6, 4], f32[6]]:
    opt = torch.optim.SGD(
        [{"params": [w]}, {"params": b, "lr": 0.05}], lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-4
    )
    for k in range(3):
        opt.zero_grad()
        w.grad = gw[k]
        b.grad = gb[k].clone()
        opt.step()
    return w, b


# PyTorch, torch/optim/adam.py: Adam.step with amsgrad and (coupled) weight decay, four steps; the state's step count
# is a tensor
def torch_adam_amsgrad(w: f32[5, 3], gw: f32[4, 5, 3]) -> tuple[f32[5, 3], f32[()]]:
    opt = torch.optim.Adam([w], lr=0.01, betas=(0.8, 0.99), amsgrad=True, weight_decay=0.1)
    for k in range(4):
        w.grad = gw[k]
        opt.step()
    return w, opt.state[w]["step"]


# PyTorch, torch/optim/adamw.py: AdamW (decoupled weight decay) maximizing; a parameter whose grad is None at a step
# is skipped (zero_grad sets every grad to None)
def torch_adamw_skip(w: f32[4, 4], b: f32[4], gw: f32[3, 4, 4], gb: f32[3, 4]) -> tuple[f32[4, 4], f32[4]]:
    opt = torch.optim.AdamW([w, b], lr=0.02, maximize=True)
    for k in range(3):
        opt.zero_grad(set_to_none=True)
        w.grad = gw[k]
        if k != 1:
            b.grad = gb[k]
        opt.step()
    return w, b


# An Optimizer subclass in the style of PyTorch's documentation for new optimizers: `lr=required`, defaults filled
# into each parameter group, momentum buffers made on first use in self.state[p]
class SignMomentum(Optimizer):
    def __init__(self, params, lr=required, momentum=0.0):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        defaults = dict(lr=lr, momentum=momentum)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                p.add_(torch.sign(buf), alpha=-group["lr"])
        return None


# The SignMomentum subclass above over two parameter groups, one overriding lr, the other momentum
def sign_momentum_groups(w: f32[6, 3], b: f32[6], gw: f32[3, 6, 3], gb: f32[3, 6]) -> tuple[f32[6, 3], f32[6]]:
    opt = SignMomentum([{"params": [w], "lr": 0.1}, {"params": [b], "momentum": 0.0}], lr=0.01, momentum=0.5)
    for k in range(3):
        w.grad = gw[k]
        b.grad = gb[k]
        opt.step()
    return w, b


# A wrapper in the style of Lookahead (michaelrzhang/lookahead): slow weights kept in the wrapper's own state, pulled
# toward the inner torch.optim.SGD's fast weights every two steps
class SlowFast(Optimizer):
    def __init__(self, optimizer, k=2, alpha=0.5):
        self.optimizer = optimizer
        self.k = k
        self.alpha = alpha
        self.steps = 0
        self.state = {}
        for group in optimizer.param_groups:
            for p in group["params"]:
                self.state[p] = {"slow": p.detach().clone()}

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self):
        self.optimizer.step()
        self.steps += 1
        if self.steps % self.k == 0:
            for group in self.param_groups:
                for p in group["params"]:
                    slow = self.state[p]["slow"]
                    slow.add_(p - slow, alpha=self.alpha)
                    p.copy_(slow)


# The SlowFast wrapper above around torch.optim.SGD with momentum, four steps
def slow_fast_sgd(w: f32[5, 2], gw: f32[4, 5, 2]) -> f32[5, 2]:
    opt = SlowFast(torch.optim.SGD([w], lr=0.1, momentum=0.9), k=2, alpha=0.5)
    for k in range(4):
        w.grad = gw[k]
        opt.step()
    return w
