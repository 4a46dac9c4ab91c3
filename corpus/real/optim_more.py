"""More optimizer steps, ported from torch.optim (Adadelta, NAdam, Rprop, ASGD, Adamax, RAdam), lion-pytorch, Hugging
Face transformers' Adafactor, MADGRAD, AdamP, Adan (sail-sg), SophiaG (Liuhong99/Sophia) and pytorch-lamb, with
per-parameter state kept in dicts the way `Optimizer.state[p]` keeps it."""
from __future__ import annotations

import math
from typing import List

import torch
import torch.nn.functional as F
from torch import Tensor


# PyTorch, torch/optim/adadelta.py: Adadelta.step's state initialisation (state["step"], state["square_avg"],
# state["acc_delta"] in a dict per parameter) and _single_tensor_adadelta (rho 0.9, weight_decay 1e-2)
def adadelta_first_steps(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], lr: float = 1.0
) -> tuple[f32[16, 8], f32[16]]:
    params = [w0, w1]
    grads = [g0, g1]
    state = {}
    rho, eps, weight_decay, maximize = 0.9, 1e-6, 1e-2, False
    for k in range(2):
        for i, param in enumerate(params):
            if i not in state:
                state[i] = {}
            st = state[i]
            if len(st) == 0:
                st["step"] = 0
                st["square_avg"] = torch.zeros_like(param)
                st["acc_delta"] = torch.zeros_like(param)
            grad = grads[i] if not maximize else -grads[i]
            square_avg, acc_delta = st["square_avg"], st["acc_delta"]
            st["step"] += 1
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            square_avg.mul_(rho).addcmul_(grad, grad, value=1 - rho)
            std = square_avg.add(eps).sqrt_()
            delta = acc_delta.add(eps).sqrt_()
            delta.div_(std).mul_(grad)
            acc_delta.mul_(rho).addcmul_(delta, delta, value=1 - rho)
            param.add_(delta, alpha=-lr)
    return state[0]["acc_delta"], state[1]["square_avg"]


# PyTorch, torch/optim/nadam.py: _single_tensor_nadam (momentum_decay 4e-3, not decoupled, weight_decay 1e-3)
def nadam_step(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], m0: f32[16, 8], m1: f32[16], v0: f32[16, 8],
    v1: f32[16], step: int = 3, lr: float = 2e-3
) -> None:
    for v in (v0, v1):
        v.abs_()
    params = [w0, w1]
    grads = [g0, g1]
    exp_avgs = [m0, m1]
    exp_avg_sqs = [v0, v1]
    state_steps = [torch.tensor(float(step)), torch.tensor(float(step))]
    mu_products = [torch.tensor(0.8), torch.tensor(0.8)]
    beta1, beta2, eps, weight_decay, momentum_decay = 0.9, 0.999, 1e-8, 1e-3, 4e-3
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        mu_product = mu_products[i]
        step_t = state_steps[i]
        step_t += 1
        step = step_t.item()
        bias_correction2 = 1 - beta2**step
        if weight_decay != 0:
            grad = grad.add(param, alpha=weight_decay)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product *= mu
        exp_avg.lerp_(grad, 1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = exp_avg_sq.div(bias_correction2).sqrt()
        mu_product_next = mu_product.item() * mu_next
        denom.add_(eps)
        param.addcdiv_(grad, denom, value=(-lr * (1.0 - mu) / (1.0 - mu_product.item())))
        param.addcdiv_(exp_avg, denom, value=(-lr * mu_next) / (1.0 - mu_product_next))


# PyTorch, torch/optim/rprop.py: _single_tensor_rprop (etas (0.5, 1.2), step sizes (1e-6, 50))
def rprop_step(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], p0: f32[16, 8], p1: f32[16], s0: f32[16, 8],
    s1: f32[16]
) -> None:
    for s in (s0, s1):
        s.abs_().mul_(0.01)
    params = [w0, w1]
    grads = [g0, g1]
    prevs = [p0, p1]
    step_sizes = [s0, s1]
    etaminus, etaplus, step_size_min, step_size_max = 0.5, 1.2, 1e-6, 50.0
    for i, param in enumerate(params):
        grad = grads[i]
        prev = prevs[i]
        step_size = step_sizes[i]
        sign = grad.mul(prev).sign()
        sign[sign.gt(0)] = etaplus
        sign[sign.lt(0)] = etaminus
        sign[sign.eq(0)] = 1
        step_size.mul_(sign).clamp_(step_size_min, step_size_max)
        grad = grad.clone(memory_format=torch.preserve_format)
        grad[sign.eq(etaminus)] = 0
        param.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)


# PyTorch, torch/optim/asgd.py: _single_tensor_asgd (lambd 1e-4, alpha 0.75, t0 2: averaging starts at step 3)
def asgd_steps(
    w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], lr: float = 1e-2
) -> tuple[f32[16, 8], f32[16]]:
    params = [w0, w1]
    grads = [g0, g1]
    axs = [torch.zeros_like(w0), torch.zeros_like(w1)]
    mus = [torch.ones(()), torch.ones(())]
    etas = [torch.tensor(lr), torch.tensor(lr)]
    state_steps = [torch.zeros(()), torch.zeros(())]
    lambd, alpha, t0, weight_decay = 1e-4, 0.75, 2.0, 0.0
    for _ in range(4):
        for i, param in enumerate(params):
            grad = grads[i]
            mu = mus[i]
            ax = axs[i]
            eta = etas[i]
            step_t = state_steps[i]
            step_t += 1
            step = step_t.item()
            if weight_decay != 0:
                grad = grad.add(param, alpha=weight_decay)
            eta_value = eta.item()
            param.mul_(1 - lambd * eta_value)
            param.add_(grad, alpha=-eta_value)
            if mu.item() != 1:
                ax.add_(param.sub(ax).mul_(mu))
            else:
                ax.copy_(param)
            new_eta = torch.as_tensor(lr / ((1 + lambd * lr * step) ** alpha))
            eta.copy_(new_eta)
            new_mu = torch.as_tensor(1 / max(1, step - t0))
            mu.copy_(new_mu)
    return axs[0], axs[1]


# lion-pytorch (lucidrains), lion_pytorch/lion_pytorch.py: update_fn (lr 1e-4, wd 1e-2, betas (0.9, 0.99))
def _lion_update_fn(p, grad, exp_avg, lr, wd, beta1, beta2):
    p.data.mul_(1.0 - lr * wd)
    update = exp_avg.clone().mul_(beta1).add(grad, alpha=1.0 - beta1).sign_()
    p.add_(update, alpha=-lr)
    exp_avg.mul_(beta2).add_(grad, alpha=1.0 - beta2)


# lion-pytorch (lucidrains), lion_pytorch/lion_pytorch.py: Lion.step over two parameters (exp_avg in the state dict)
def lion_step(w0: f32[16, 8], w1: f32[16], g0: f32[16, 8], g1: f32[16], m0: f32[16, 8], m1: f32[16]) -> None:
    group = {"lr": 1e-4, "weight_decay": 1e-2, "betas": (0.9, 0.99)}
    states = [{"exp_avg": m0}, {"exp_avg": m1}]
    for p, grad, state in zip([w0, w1], [g0, g1], states):
        lr, wd, beta1, beta2 = group["lr"], group["weight_decay"], *group["betas"]
        exp_avg = state["exp_avg"]
        _lion_update_fn(p, grad, exp_avg, lr, wd, beta1, beta2)


# Hugging Face transformers, optimization.py: Adafactor._rms and Adafactor._approx_sq_grad
def _rms(tensor):
    return tensor.norm(2) / (tensor.numel() ** 0.5)


def _approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col):
    r_factor = (exp_avg_sq_row / exp_avg_sq_row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
    c_factor = exp_avg_sq_col.unsqueeze(-2).rsqrt()
    return torch.mul(r_factor, c_factor)


# Hugging Face transformers, optimization.py: Adafactor.step for one factored 2-D parameter (scale_parameter=False,
# relative_step=False, warmup_init=False, lr 1e-3, beta1 None), two steps from an empty state
def adafactor_steps(p: f32[16, 12], grad0: f32[16, 12], grad1: f32[16, 12]) -> tuple[f32[16], f32[12]]:
    group = {"lr": 1e-3, "eps": (1e-30, 1e-3), "clip_threshold": 1.0, "decay_rate": -0.8, "beta1": None,
             "weight_decay": 0.0, "scale_parameter": False, "relative_step": False, "warmup_init": False}
    state = {}
    for grad in (grad0, grad1):
        grad_shape = grad.shape
        factored = len(grad_shape) >= 2
        use_first_moment = group["beta1"] is not None
        if len(state) == 0:
            state["step"] = 0
            if factored:
                state["exp_avg_sq_row"] = torch.zeros(grad_shape[:-1]).to(grad)
                state["exp_avg_sq_col"] = torch.zeros(grad_shape[:-2] + grad_shape[-1:]).to(grad)
            else:
                state["exp_avg_sq"] = torch.zeros_like(grad)
            state["RMS"] = 0
        p_data_fp32 = p
        state["step"] += 1
        state["RMS"] = _rms(p_data_fp32)
        lr = group["lr"]
        beta2t = 1.0 - math.pow(state["step"], group["decay_rate"])
        update = (grad**2) + group["eps"][0]
        if factored:
            exp_avg_sq_row = state["exp_avg_sq_row"]
            exp_avg_sq_col = state["exp_avg_sq_col"]
            exp_avg_sq_row.mul_(beta2t).add_(update.mean(dim=-1), alpha=(1.0 - beta2t))
            exp_avg_sq_col.mul_(beta2t).add_(update.mean(dim=-2), alpha=(1.0 - beta2t))
            update = _approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col)
            update.mul_(grad)
        else:
            exp_avg_sq = state["exp_avg_sq"]
            exp_avg_sq.mul_(beta2t).add_(update, alpha=(1.0 - beta2t))
            update = exp_avg_sq.rsqrt().mul_(grad)
        update.div_((_rms(update) / group["clip_threshold"]).clamp_(min=1.0))
        update.mul_(lr)
        if group["weight_decay"] != 0:
            p_data_fp32.add_(p_data_fp32, alpha=(-group["weight_decay"] * lr))
        p_data_fp32.add_(-update)
    return state["exp_avg_sq_row"], state["exp_avg_sq_col"]


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


# MADGRAD (facebookresearch/madgrad), madgrad/madgrad.py: MADGRAD.step, dense gradients (lr 1e-2, momentum 0.9,
# weight_decay 0, eps 1e-6), two steps from an empty state (the gradient scaled per step as a stand-in for new
# gradients); the parameters returned, as their writes go through `p.data`
def madgrad_steps(
    w0: f32[8, 16], w1: f32[16], g0: f32[8, 16], g1: f32[16]
) -> tuple[f32[8, 16], f32[16], f32[8, 16], f32[16]]:
    params = [w0, w1]
    grads = [g0, g1]
    state = {}
    eps, lr, decay, momentum = 1e-6, 1e-2, 0.0, 0.9
    k = 0
    ck = 1 - momentum
    for _ in range(2):
        lamb = lr * math.pow(k + 1, 0.5)
        for i, p in enumerate(params):
            grad = grads[i] * (1.0 + 0.5 * k)
            if i not in state:
                state[i] = {}
            st = state[i]
            if "grad_sum_sq" not in st:
                st["grad_sum_sq"] = torch.zeros_like(p.data).detach()
                st["s"] = torch.zeros_like(p.data).detach()
                if momentum != 0:
                    st["x0"] = torch.clone(p.data).detach()
            grad_sum_sq = st["grad_sum_sq"]
            s = st["s"]
            if momentum == 0:
                rms = grad_sum_sq.pow(1 / 3).add_(eps)
                x0 = p.data.addcdiv(s, rms, value=1)
            else:
                x0 = st["x0"]
            grad_sum_sq.addcmul_(grad, grad, value=lamb)
            rms = grad_sum_sq.pow(1 / 3).add_(eps)
            s.data.add_(grad, alpha=lamb)
            if momentum == 0:
                p.data.copy_(x0.addcdiv(s, rms, value=-1))
            else:
                z = x0.addcdiv(s, rms, value=-1)
                p.data.mul_(1 - ck).add_(z, alpha=ck)
        k += 1
    return state[0]["s"], state[1]["grad_sum_sq"], w0, w1


# AdamP (clovaai/AdamP), adamp/adamp.py: AdamP._channel_view, _layer_view, _cosine_similarity, _projection and
# AdamP.step for one 2-D and one 1-D parameter (betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2, delta 0.1,
# wd_ratio 0.1, nesterov False), state at step 2; the methods as nested functions, and the parameters returned
# (PyTorch's version counter does not see the writes through `p.data`, so its goldens would not record them). The
# 2-D gradient is first made orthogonal to its weight as a whole, as for a scale-invariant weight, so that the
# layer-wise projection (not the channel-wise one) applies
def adamp_step(
    w0: f32[8, 16], w1: f32[16], g0: f32[8, 16], g1: f32[16], m0: f32[8, 16], m1: f32[16], v0: f32[8, 16],
    v1: f32[16], lr: float = 1e-3
) -> tuple[f32[8, 16], f32[16]]:
    def _channel_view(x):
        return x.view(x.size(0), -1)

    def _layer_view(x):
        return x.view(1, -1)

    def _cosine_similarity(x, y, eps, view_func):
        x = view_func(x)
        y = view_func(y)
        return F.cosine_similarity(x, y, dim=1, eps=eps).abs_()

    def _projection(p, grad, perturb, delta, wd_ratio, eps):
        wd = 1
        expand_size = [-1] + [1] * (len(p.shape) - 1)
        for view_func in [_channel_view, _layer_view]:
            cosine_sim = _cosine_similarity(grad, p.data, eps, view_func)
            if cosine_sim.max() < delta / math.sqrt(view_func(p.data).size(1)):
                p_n = p.data / view_func(p.data).norm(dim=1).view(expand_size).add_(eps)
                perturb -= p_n * view_func(p_n * perturb).sum(dim=1).view(expand_size)
                wd = wd_ratio
                return perturb, wd
        return perturb, wd

    g0 = g0 - (g0 * w0).sum() / (w0 * w0).sum() * w0
    beta1, beta2, eps, weight_decay, delta, wd_ratio_, nesterov = 0.9, 0.999, 1e-8, 1e-2, 0.1, 0.1, False
    for p, grad, exp_avg, exp_avg_sq in zip([w0, w1], [g0, g1], [m0, m1], [v0, v1]):
        exp_avg_sq.abs_()
        step = 2
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)
        step_size = lr / bias_correction1
        if nesterov:
            perturb = (beta1 * exp_avg + (1 - beta1) * grad) / denom
        else:
            perturb = exp_avg / denom
        wd_ratio = 1
        if len(p.shape) > 1:
            perturb, wd_ratio = _projection(p, grad, perturb, delta, wd_ratio_, eps)
        if weight_decay > 0:
            p.data.mul_(1 - lr * weight_decay * wd_ratio)
        p.data.add_(perturb, alpha=-step_size)
    return w0, w1


def _single_tensor_adan(
    params: List[Tensor],
    grads: List[Tensor],
    exp_avgs: List[Tensor],
    exp_avg_sqs: List[Tensor],
    exp_avg_diffs: List[Tensor],
    neg_pre_grads: List[Tensor],
    *,
    beta1: float,
    beta2: float,
    beta3: float,
    bias_correction1: float,
    bias_correction2: float,
    bias_correction3_sqrt: float,
    lr: float,
    weight_decay: float,
    eps: float,
    no_prox: bool,
    clip_global_grad_norm: Tensor,
):
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        exp_avg_diff = exp_avg_diffs[i]
        neg_grad_or_diff = neg_pre_grads[i]

        grad.mul_(clip_global_grad_norm)
        neg_grad_or_diff.add_(grad)

        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        exp_avg_diff.mul_(beta2).add_(neg_grad_or_diff, alpha=1 - beta2)

        neg_grad_or_diff.mul_(beta2).add_(grad)
        exp_avg_sq.mul_(beta3).addcmul_(neg_grad_or_diff, neg_grad_or_diff, value=1 - beta3)

        denom = ((exp_avg_sq).sqrt() / bias_correction3_sqrt).add_(eps)
        step_size_diff = lr * beta2 / bias_correction2
        step_size = lr / bias_correction1

        if no_prox:
            param.mul_(1 - lr * weight_decay)
            param.addcdiv_(exp_avg, denom, value=-step_size)
            param.addcdiv_(exp_avg_diff, denom, value=-step_size_diff)
        else:
            param.addcdiv_(exp_avg, denom, value=-step_size)
            param.addcdiv_(exp_avg_diff, denom, value=-step_size_diff)
            param.div_(1 + lr * weight_decay)

        neg_grad_or_diff.zero_().add_(grad, alpha=-1.0)


# Adan (sail-sg/Adan), adan.py: Adan.step (max_grad_norm 0, so clip_global_grad_norm is 1.0; betas (0.98, 0.92,
# 0.99), eps 1e-8, weight_decay 0.02, no_prox False, foreach False) at step 3 of two parameters whose state is given,
# then _single_tensor_adan; the group and state dicts become locals
def adan_step(
    w0: f32[16, 8], w1: f32[8], g0: f32[16, 8], g1: f32[8], m0: f32[16, 8], m1: f32[8], v0: f32[16, 8], v1: f32[8],
    n0: f32[16, 8], n1: f32[8], pre0: f32[16, 8], pre1: f32[8]
) -> None:
    group = {"lr": 1e-3, "betas": (0.98, 0.92, 0.99), "eps": 1e-8, "weight_decay": 0.02, "no_prox": False, "step": 2}
    clip_global_grad_norm = 1.0
    params_with_grad = [w0, w1]
    grads = [g0, g1]
    exp_avgs = [m0, m1]
    exp_avg_sqs = [n0.abs(), n1.abs()]
    exp_avg_diffs = [v0, v1]
    neg_pre_grads = [pre0, pre1]
    beta1, beta2, beta3 = group["betas"]
    if "step" in group:
        group["step"] += 1
    else:
        group["step"] = 1
    bias_correction1 = 1.0 - beta1 ** group["step"]
    bias_correction2 = 1.0 - beta2 ** group["step"]
    bias_correction3 = 1.0 - beta3 ** group["step"]
    kwargs = dict(
        params=params_with_grad,
        grads=grads,
        exp_avgs=exp_avgs,
        exp_avg_sqs=exp_avg_sqs,
        exp_avg_diffs=exp_avg_diffs,
        neg_pre_grads=neg_pre_grads,
        beta1=beta1,
        beta2=beta2,
        beta3=beta3,
        bias_correction1=bias_correction1,
        bias_correction2=bias_correction2,
        bias_correction3_sqrt=math.sqrt(bias_correction3),
        lr=group["lr"],
        weight_decay=group["weight_decay"],
        eps=group["eps"],
        no_prox=group["no_prox"],
        clip_global_grad_norm=clip_global_grad_norm,
    )
    _single_tensor_adan(**kwargs)


def _single_tensor_sophiag(
    params: List[Tensor],
    grads: List[Tensor],
    exp_avgs: List[Tensor],
    hessian: List[Tensor],
    state_steps: List[Tensor],
    *,
    beta1: float,
    beta2: float,
    gamma: float,
    lr: float,
    weight_decay: float,
    maximize: bool,
    capturable: bool
):
    for i, param in enumerate(params):
        grad = grads[i] if not maximize else -grads[i]
        exp_avg = exp_avgs[i]
        hess = hessian[i]
        step_t = state_steps[i]

        if capturable:
            assert param.is_cuda and step_t.is_cuda, "If capturable=True, params and state_steps must be CUDA tensors."

        if torch.is_complex(param):
            grad = torch.view_as_real(grad)
            exp_avg = torch.view_as_real(exp_avg)
            hess = torch.view_as_real(hess)
            param = torch.view_as_real(param)

        step_t += 1
        param.mul_(1 - lr * weight_decay)
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)

        if capturable:
            step = step_t
            step_size = lr
            step_size_neg = step_size.neg()
            ratio = (exp_avg.abs() / (hess + 1e-15)).clamp(None, gamma)
            param.addcmul_(exp_avg.sign(), ratio, value=step_size_neg)
        else:
            step = step_t.item()
            step_size_neg = -lr
            ratio = (exp_avg.abs() / (hess + 1e-15)).clamp(None, gamma)
            param.addcmul_(exp_avg.sign(), ratio, value=step_size_neg)


# Sophia (Liuhong99/Sophia), sophia.py: SophiaG's first step on two parameters (lr 1e-4, betas (0.965, 0.99),
# rho 0.04, weight_decay 0.1): the state initialized as SophiaG.step does (step torch.tensor(0.), exp_avg and hessian
# zeros), SophiaG.update_hessian with the gradients, then _single_tensor_sophiag; state dicts become locals
def sophiag_first_step(w0: f32[12, 8], w1: f32[8], g0: f32[12, 8], g1: f32[8]) -> tuple[f32[12, 8], f32[8]]:
    beta1, beta2 = (0.965, 0.99)
    params_with_grad = [w0, w1]
    grads = [g0, g1]
    state_steps = []
    exp_avgs = []
    hessian = []
    for p in params_with_grad:
        state_steps.append(torch.tensor(0.0))
        exp_avgs.append(torch.zeros_like(p, memory_format=torch.preserve_format))
        hessian.append(torch.zeros_like(p, memory_format=torch.preserve_format))
    for p, g, h in zip(params_with_grad, grads, hessian):
        h.mul_(beta2).addcmul_(g, g, value=1 - beta2)
    _single_tensor_sophiag(
        params_with_grad,
        grads,
        exp_avgs,
        hessian,
        state_steps,
        beta1=beta1,
        beta2=beta2,
        gamma=0.04,
        lr=1e-4,
        weight_decay=1e-1,
        maximize=False,
        capturable=False,
    )
    return exp_avgs[0], hessian[1]


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
