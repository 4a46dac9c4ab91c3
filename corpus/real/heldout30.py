"""Held-out real code, issue 14's thirtieth round, its optimizer steps (refused when first run: 0 of 4; run as
written once torch.optim's classes, `.grad` and a bare `except:` were supported). Round 30's optimizer steps: mgrankin/over9000 (novograd.py Novograd.step),
noahgolmant/pytorch-lars (lars.py LARS.step), michaelrzhang/lookahead (lookahead_pytorch.py Lookahead around
torch.optim.SGD, pullback momentum), facebookresearch/dadaptation (dadaptation/dadapt_sgd.py DadaptSGD.step).
The classes subclass torch.optim.Optimizer as in the originals; parameters are the input tensors, gradients are
assigned to `.grad` before each step. Ported by a helper. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math
from collections import defaultdict

import torch
from torch.optim import Optimizer
from torch.optim.optimizer import required


# mgrankin/over9000, novograd.py: Novograd.step (as written, deprecated add_(scalar, tensor) overloads included)
class Novograd(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.95, 0), eps=1e-8,
                 weight_decay=0, grad_averaging=False, amsgrad=False):
        defaults = dict(lr=lr, betas=betas, eps=eps,
                      weight_decay=weight_decay,
                      grad_averaging=grad_averaging,
                      amsgrad=amsgrad)

        super(Novograd, self).__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                if grad.is_sparse:
                    raise RuntimeError('Sparse gradients are not supported.')
                amsgrad = group['amsgrad']

                state = self.state[p]

                # State initialization
                if len(state) == 0:
                    state['step'] = 0
                    state['exp_avg'] = torch.zeros_like(p.data)
                    state['exp_avg_sq'] = torch.zeros([]).to(state['exp_avg'].device)
                    if amsgrad:
                        state['max_exp_avg_sq'] = torch.zeros([]).to(state['exp_avg'].device)

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                if amsgrad:
                    max_exp_avg_sq = state['max_exp_avg_sq']
                beta1, beta2 = group['betas']

                state['step'] += 1

                norm = torch.sum(torch.pow(grad, 2))

                if exp_avg_sq == 0:
                    exp_avg_sq.copy_(norm)
                else:
                    exp_avg_sq.mul_(beta2).add_(1 - beta2, norm)

                if amsgrad:
                    torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                    denom = max_exp_avg_sq.sqrt().add_(group['eps'])
                else:
                    denom = exp_avg_sq.sqrt().add_(group['eps'])

                grad.div_(denom)
                if group['weight_decay'] != 0:
                    grad.add_(group['weight_decay'], p.data)
                if group['grad_averaging']:
                    grad.mul_(1 - beta1)
                exp_avg.mul_(beta1).add_(grad)

                p.data.add_(-group['lr'], exp_avg)

        return loss


def novograd_steps(w: f32[6, 4], b: f32[6], gw: f32[3, 6, 4], gb: f32[3, 6]) -> tuple[f32[6, 4], f32[6]]:
    opt = Novograd([w, b], lr=0.01, betas=(0.95, 0.98), weight_decay=1e-3, grad_averaging=True, amsgrad=True)
    for k in range(3):
        w.grad = gw[k].clone()
        b.grad = gb[k].clone()
        opt.step()
    return w, b


# noahgolmant/pytorch-lars, lars.py: LARS.step (as written)
class LARS(Optimizer):
    def __init__(self, params, lr=required, momentum=.9,
                 weight_decay=.0005, eta=0.001, max_epoch=200):
        self.epoch = 0
        defaults = dict(lr=lr, momentum=momentum,
                        weight_decay=weight_decay,
                        eta=eta, max_epoch=max_epoch)
        super(LARS, self).__init__(params, defaults)

    def step(self, epoch=None, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        if epoch is None:
            epoch = self.epoch
            self.epoch += 1

        for group in self.param_groups:
            weight_decay = group['weight_decay']
            momentum = group['momentum']
            eta = group['eta']
            lr = group['lr']
            max_epoch = group['max_epoch']

            for p in group['params']:
                if p.grad is None:
                    continue

                param_state = self.state[p]
                d_p = p.grad.data

                weight_norm = torch.norm(p.data)
                grad_norm = torch.norm(d_p)

                # Global LR computed on polynomial decay schedule
                decay = (1 - float(epoch) / max_epoch) ** 2
                global_lr = lr * decay

                # Compute local learning rate for this layer
                local_lr = eta * weight_norm / \
                    (grad_norm + weight_decay * weight_norm)

                # Update the momentum term
                actual_lr = local_lr * global_lr

                if 'momentum_buffer' not in param_state:
                    buf = param_state['momentum_buffer'] = \
                            torch.zeros_like(p.data)
                else:
                    buf = param_state['momentum_buffer']
                buf.mul_(momentum).add_(actual_lr, d_p + weight_decay * p.data)
                p.data.add_(buf)

        return loss


def lars_steps(w: f32[8, 5], b: f32[8], gw: f32[3, 8, 5], gb: f32[3, 8]) -> tuple[f32[8, 5], f32[8]]:
    opt = LARS([w, b], lr=0.5, momentum=0.9, weight_decay=5e-4, eta=0.01, max_epoch=10)
    for k in range(3):
        w.grad = gw[k]
        b.grad = gb[k]
        opt.step()
    return w, b


# michaelrzhang/lookahead, lookahead_pytorch.py: Lookahead.__init__ and Lookahead.step (as written) around
# torch.optim.SGD with momentum
class Lookahead(Optimizer):
    def __init__(self, optimizer, la_steps=5, la_alpha=0.8, pullback_momentum="none"):
        self.optimizer = optimizer
        self._la_step = 0  # counter for inner optimizer
        self.la_alpha = la_alpha
        self._total_la_steps = la_steps
        pullback_momentum = pullback_momentum.lower()
        assert pullback_momentum in ["reset", "pullback", "none"]
        self.pullback_momentum = pullback_momentum

        self.state = defaultdict(dict)

        # Cache the current optimizer parameters
        for group in optimizer.param_groups:
            for p in group['params']:
                param_state = self.state[p]
                param_state['cached_params'] = torch.zeros_like(p.data)
                param_state['cached_params'].copy_(p.data)
                if self.pullback_momentum == "pullback":
                    param_state['cached_mom'] = torch.zeros_like(p.data)

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def step(self, closure=None):
        loss = self.optimizer.step(closure)
        self._la_step += 1

        if self._la_step >= self._total_la_steps:
            self._la_step = 0
            # Lookahead and cache the current optimizer parameters
            for group in self.optimizer.param_groups:
                for p in group['params']:
                    param_state = self.state[p]
                    p.data.mul_(self.la_alpha).add_(1.0 - self.la_alpha, param_state['cached_params'])  # crucial line
                    param_state['cached_params'].copy_(p.data)
                    if self.pullback_momentum == "pullback":
                        internal_momentum = self.optimizer.state[p]["momentum_buffer"]
                        self.optimizer.state[p]["momentum_buffer"] = internal_momentum.mul_(self.la_alpha).add_(
                            1.0 - self.la_alpha, param_state["cached_mom"])
                        param_state["cached_mom"] = self.optimizer.state[p]["momentum_buffer"]
                    elif self.pullback_momentum == "reset":
                        self.optimizer.state[p]["momentum_buffer"] = torch.zeros_like(p.data)

        return loss


def lookahead_sgd_steps(w: f32[5, 3], b: f32[5], gw: f32[4, 5, 3], gb: f32[4, 5]) -> tuple[f32[5, 3], f32[5]]:
    base = torch.optim.SGD([w, b], lr=0.1, momentum=0.9)
    opt = Lookahead(base, la_steps=2, la_alpha=0.5, pullback_momentum="pullback")
    for k in range(4):
        w.grad = gw[k]
        b.grad = gb[k]
        opt.step()
    return w, b


# facebookresearch/dadaptation, dadaptation/dadapt_sgd.py: DadaptSGD.step (as written; log_every 0)
class DadaptSGD(torch.optim.Optimizer):
    def __init__(self, params,
        lr=1e-2,
        momentum=0,
        weight_decay=0,
        log_every=0,
        d0=1e-6, growth_rate=float('inf')):
        defaults = dict(lr=lr,
            momentum=momentum,
            weight_decay=weight_decay, k=0,
            log_every=log_every,
            gsq_weighted=0.0, d=d0, growth_rate=growth_rate)
        self.loggables = {}

        try:
            self.rank = torch.distributed.get_rank()
        except:
            self.rank = 0

        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = None
        if closure is not None:
            loss = closure()

        group = self.param_groups[0]
        lr = group['lr']
        decay = group['weight_decay']
        momentum = group['momentum']
        log_every = group['log_every']
        ck = 1 - momentum
        k = group['k']

        gsq_weighted = group['gsq_weighted']
        growth_rate = group['growth_rate']
        d = group['d']

        g_sq = 0.0
        sk_sq = 0.0

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data

                # Apply weight decay
                if decay != 0:
                    if grad.is_sparse:
                        raise RuntimeError("weight_decay option is not compatible with sparse gradients")

                    grad.add_(p.data, alpha=decay)

                state = self.state[p]

                g_sq += (grad * grad).sum().item()

        group = self.param_groups[0]
        if k == 0:
            group['g0_norm'] = g0_norm = math.sqrt(g_sq)

        g0_norm = group['g0_norm']
        dlr = d*lr/g0_norm

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                if 'z' not in state:
                    z = state['z'] = torch.clone(p.data).detach()
                    s = state['s'] = torch.zeros_like(p.data).detach()
                    x0 = state['x0'] = torch.clone(p.data).detach()

                s = state['s']
                s.data.add_(grad, alpha=dlr)
                sk_sq += (s * s).sum().item()

        gsq_weighted = group['gsq_weighted'] = gsq_weighted + dlr*dlr*g_sq
        d_hat = d

        d_hat = (sk_sq - gsq_weighted)/(math.sqrt(sk_sq))
        d = group['d'] = max(d, min(d_hat, d*growth_rate))

        if log_every > 0 and k % log_every == 0:
            print(f"(r={self.rank},k={k}) dlr: {dlr} d_hat: {d_hat}, d: {d}. sk_sq={sk_sq} gsq_weighted={gsq_weighted} g0_norm={g0_norm}", flush=True)

        for group in self.param_groups:
            group['gsq_weighted'] = gsq_weighted
            group['d'] = d
            group['g0_norm'] = g0_norm
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                s = state['s']
                x0 = state['x0']
                z = state['z']

                # z step
                z.data.copy_(x0 - s)

                # x step
                p.data.mul_(1-ck).add_(z, alpha=ck)

            group['k'] = k + 1

        return loss


def dadapt_sgd_steps(w: f32[6, 6], b: f32[6], gw: f32[3, 6, 6], gb: f32[3, 6]) -> tuple[f32[6, 6], f32[6]]:
    opt = DadaptSGD([w, b], lr=1.0, momentum=0.9, weight_decay=1e-3, d0=1e-2)
    for k in range(3):
        w.grad = gw[k].clone()
        b.grad = gb[k].clone()
        opt.step()
    return w, b
