"""Realistic-size benchmark, optimizer steps written with in-place ops on parameters of 0.25M to 4M elements: Google's
reference Lion, the original RAdam (LiyuanLucasLiu/RAdam, with its step-size buffer), optimi's StableAdamW (RMS-clipped
learning rate read back with .item()), Adam-mini (block-wise second moments for query, value, MLP, LayerNorm and bias
blocks of a transformer layer), OpenNMT-py's AdaFactor (factored second moments, deprecated scalar-first overloads) and
GaLore's AdamW (gradients projected to rank 128 and back). One step each, on a transformer layer's worth of parameters;
p.grad is a gradient input, the optimizer state (moments, step counts) is given as it stands after some steps. Ported
by hand from the originals for benchmarking against PyTorch eager at one thread; the optimizers' Python bookkeeping
(param groups, state dicts) is kept as lists and dicts built in the program. Inputs arrive uniform in [-1, 1): second
moments are made non-negative in the first lines."""
from __future__ import annotations

import math

import torch


# Lion (google/automl), lion/lion_pytorch.py: Lion.step (lr 1e-4, betas (0.9, 0.99), weight_decay 0.1) on a 2048x2048
# weight and its bias; the momentum state exp_avg given
def automl_lion_step(
    w: f32[2048, 2048], b: f32[2048], w_grad: f32[2048, 2048], b_grad: f32[2048],
    w_exp_avg: f32[2048, 2048], b_exp_avg: f32[2048],
):
    group = {"lr": 1e-4, "betas": (0.9, 0.99), "weight_decay": 0.1, "params": [w, b]}
    grads = [w_grad, b_grad]
    states = [{"exp_avg": w_exp_avg}, {"exp_avg": b_exp_avg}]
    for i, p in enumerate(group["params"]):
        # Perform stepweight decay
        p.data.mul_(1 - group["lr"] * group["weight_decay"])

        grad = grads[i]
        state = states[i]
        # State initialization
        if len(state) == 0:
            # Exponential moving average of gradient values
            state["exp_avg"] = torch.zeros_like(p)

        exp_avg = state["exp_avg"]
        beta1, beta2 = group["betas"]

        # Weight update
        update = exp_avg * beta1 + grad * (1 - beta1)

        p.add_(update.sign_(), alpha=-group["lr"])

        # Decay the momentum running average coefficient
        exp_avg.mul_(beta2).add_(grad, alpha=1 - beta2)


# RAdam (LiyuanLucasLiu/RAdam), radam/radam.py: RAdam.step (lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight_decay 1e-2,
# degenerated_to_sgd False) with its group buffer of 10 [step, N_sma, step_size] entries, at state['step'] = step
# (default 20, past the N_sma >= 5 threshold) on a 1024x4096 weight and its bias; p.data.float() of a float32 parameter
# is the parameter itself, as in PyTorch
def radam_step(
    w: f32[1024, 4096], b: f32[4096], w_grad: f32[1024, 4096], b_grad: f32[4096],
    w_exp_avg: f32[1024, 4096], w_exp_avg_sq: f32[1024, 4096], b_exp_avg: f32[4096], b_exp_avg_sq: f32[4096],
    step: int = 20,
):
    w_exp_avg_sq.abs_().mul_(1e-2)
    b_exp_avg_sq.abs_().mul_(1e-2)
    degenerated_to_sgd = False
    group = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 1e-2,
             "buffer": [[None, None, None] for _ in range(10)], "params": [w, b]}
    grads = [w_grad, b_grad]
    states = [{"step": step, "exp_avg": w_exp_avg, "exp_avg_sq": w_exp_avg_sq},
              {"step": step, "exp_avg": b_exp_avg, "exp_avg_sq": b_exp_avg_sq}]

    for i, p in enumerate(group["params"]):
        grad = grads[i].data.float()

        p_data_fp32 = p.data.float()

        state = states[i]

        if len(state) == 0:
            state["step"] = 0
            state["exp_avg"] = torch.zeros_like(p_data_fp32)
            state["exp_avg_sq"] = torch.zeros_like(p_data_fp32)
        else:
            state["exp_avg"] = state["exp_avg"].type_as(p_data_fp32)
            state["exp_avg_sq"] = state["exp_avg_sq"].type_as(p_data_fp32)

        exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
        beta1, beta2 = group["betas"]

        exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)

        state["step"] += 1
        buffered = group["buffer"][int(state["step"] % 10)]
        if state["step"] == buffered[0]:
            N_sma, step_size = buffered[1], buffered[2]
        else:
            buffered[0] = state["step"]
            beta2_t = beta2 ** state["step"]
            N_sma_max = 2 / (1 - beta2) - 1
            N_sma = N_sma_max - 2 * state["step"] * beta2_t / (1 - beta2_t)
            buffered[1] = N_sma

            # more conservative since it's an approximated value
            if N_sma >= 5:
                step_size = math.sqrt(
                    (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2) / N_sma * N_sma_max / (N_sma_max - 2)
                ) / (1 - beta1 ** state["step"])
            elif degenerated_to_sgd:
                step_size = 1.0 / (1 - beta1 ** state["step"])
            else:
                step_size = -1
            buffered[2] = step_size

        # more conservative since it's an approximated value
        if N_sma >= 5:
            if group["weight_decay"] != 0:
                p_data_fp32.add_(p_data_fp32, alpha=-group["weight_decay"] * group["lr"])
            denom = exp_avg_sq.sqrt().add_(group["eps"])
            p_data_fp32.addcdiv_(exp_avg, denom, value=-step_size * group["lr"])
            p.data.copy_(p_data_fp32)
        elif step_size > 0:
            if group["weight_decay"] != 0:
                p_data_fp32.add_(p_data_fp32, alpha=-group["weight_decay"] * group["lr"])
            p_data_fp32.add_(exp_avg, alpha=-step_size * group["lr"])
            p.data.copy_(p_data_fp32)


# optimi (warner-benjamin/optimi), optimi/utils.py: debias_beta
def _op_debias_beta(beta, step):
    return (beta**step - beta) / (beta**step - 1)


# optimi (warner-benjamin/optimi), optimi/stableadamw.py: _single_param_stableadamw (kahan_sum False: float32)
def _op_single_param_stableadamw(param, grad, exp_avg, exp_avg_sq, eps_sq, kahan_comp, *, lr, beta1_comp, beta2_hat,
                                 beta2_comp, weight_decay, eps, decouple_lr, max_lr, kahan_sum=False,
                                 update_parameters=True, **kwargs):
    # update gradient moving averages with debiased betas
    exp_avg.lerp_(grad, weight=beta1_comp)
    exp_avg_sq.mul_(beta2_hat).addcmul_(grad, grad, value=beta2_comp)

    if update_parameters:
        # compute per tensor RMS stabilization term
        rms = grad.pow(2).div_(exp_avg_sq.maximum(eps_sq)).mean().sqrt()

        # calculate RMS stabilized learning rate
        lr = lr / max(1, rms.item())

        # decoupled weight decay or fully decoupled weight decay
        if weight_decay != 0:
            if decouple_lr:
                weight_decay = 1 - (lr / max_lr) * weight_decay
            else:
                weight_decay = 1 - lr * weight_decay
            param.mul_(weight_decay)

        if kahan_sum and param.dtype in [torch.float16, torch.bfloat16]:
            # Adam step
            kahan_comp.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-lr)

            # update weights with kahan compensation using grad as temp buffer
            grad.copy_(param.detach())
            param.add_(kahan_comp)

            # save error back to kahan compensation for next iteration
            kahan_comp.add_(grad.sub_(param))
        else:
            # Adam step
            param.addcdiv_(exp_avg, exp_avg_sq.sqrt().add_(eps), value=-lr)


# optimi (warner-benjamin/optimi), optimi/stableadamw.py: the functional stableadamw (foreach False, triton False, no
# gradient release) with _single_stableadamw, as StableAdamW.step calls it for one param group (lr 1e-3, betas (0.9,
# 0.99), weight_decay 1e-2, eps 1e-6, decouple_lr False, kahan_sum False); the group's int32 step counter is a 0-d
# input (mutated), eps_sq is _init_state's torch.tensor(eps ** 2). A 2048x2048 weight and its bias
def optimi_stableadamw_step(
    w: f32[2048, 2048], b: f32[2048], w_grad: f32[2048, 2048], b_grad: f32[2048],
    w_exp_avg: f32[2048, 2048], w_exp_avg_sq: f32[2048, 2048], b_exp_avg: f32[2048], b_exp_avg_sq: f32[2048],
    step: i32[()],
):
    w_exp_avg_sq.abs_().mul_(1e-2)
    b_exp_avg_sq.abs_().mul_(1e-2)
    lr = 1e-3
    beta1, beta2 = 0.9, 0.99
    weight_decay = 1e-2
    eps = 1e-6
    decouple_lr = False
    max_lr = None
    kahan_sum = False
    optimizer_accumulation = False
    params = [w, b]
    grads = [w_grad, b_grad]
    exp_avgs = [w_exp_avg, b_exp_avg]
    exp_avg_sqs = [w_exp_avg_sq, b_exp_avg_sq]
    eps_sqs = [torch.tensor(eps**2, dtype=w.dtype), torch.tensor(eps**2, dtype=b.dtype)]
    kahan_comps = [None, None]

    # calculate debiased beta hat & complement terms
    step.add_(1)
    step_int = step.item()
    beta1_hat = _op_debias_beta(beta1, step_int)
    beta1_comp = 1 - beta1_hat
    beta2_hat = _op_debias_beta(beta2, step_int)
    beta2_comp = 1 - beta2_hat

    # _single_stableadamw
    for i, param in enumerate(params):
        grad = grads[i]
        exp_avg = exp_avgs[i]
        exp_avg_sq = exp_avg_sqs[i]
        kahan_comp = kahan_comps[i]
        eps_sq = eps_sqs[i]

        _op_single_param_stableadamw(
            param=param,
            grad=grad,
            exp_avg=exp_avg,
            exp_avg_sq=exp_avg_sq,
            eps_sq=eps_sq,
            kahan_comp=kahan_comp,
            lr=lr,
            beta1_comp=beta1_comp,
            beta2_hat=beta2_hat,
            beta2_comp=beta2_comp,
            weight_decay=weight_decay,
            eps=eps,
            decouple_lr=decouple_lr,
            max_lr=max_lr,
            kahan_sum=kahan_sum,
            update_parameters=(not optimizer_accumulation),
        )


# Adam-mini (zyushun/Adam-mini), adam_mini/adam_mini.py: Adam_mini.step (version 1.1.1; lr 1e-3, betas (0.9, 0.999),
# eps 1e-8, weight_decay 0.1, dim 1024, n_heads 16 so head_numel 65536, one process so no all-reduce) on one Llama-style
# layer: the query projection (per-head blocks), the value projection and the MLP up projection (per-neuron blocks),
# the attention LayerNorm weight (one block) and a bias (plain Adam), named as model.named_parameters() names them;
# state at step 100 with the block second moments (vmean) given. The name checks are the original's any(...) tests
def adam_mini_step(
    q_w: f32[1024, 1024], v_w: f32[1024, 1024], up_w: f32[2816, 1024], ln_w: f32[1024], up_b: f32[2816],
    q_grad: f32[1024, 1024], v_grad: f32[1024, 1024], up_grad: f32[2816, 1024], ln_grad: f32[1024],
    up_b_grad: f32[2816],
    q_m: f32[16, 65536], q_vmean: f32[16, 1], v_m: f32[1024, 1024], v_vmean: f32[1024, 1],
    up_m: f32[2816, 1024], up_vmean: f32[2816, 1], ln_m: f32[1024], ln_vmean: f32[()], up_b_m: f32[2816],
    up_b_v: f32[2816],
):
    q_vmean.abs_().mul_(1e-2)
    v_vmean.abs_().mul_(1e-2)
    up_vmean.abs_().mul_(1e-2)
    ln_vmean.abs_().mul_(1e-2)
    up_b_v.abs_().mul_(1e-2)
    dim = 1024
    n_heads = 16
    head_numel = dim * dim // n_heads
    world_size = 1
    embd_names = {"embed", "embd", "wte"}
    output_names = {"lm_head", "output", "final_layer"}
    wqk_names = {"k_proj", "q_proj", "wq", "wk", "query", "key"}
    wv_names = {"v_proj", "wv", "value"}
    attn_proj_names = {"o_proj", "wo", "attn.proj"}
    mlp_names = {"feed_forward", "linear", "mlp"}
    adam_block_names = {"bias"}
    step0 = 100
    param_groups = [
        {"name": "model.layers.0.self_attn.q_proj.weight", "params": [q_w], "grads": [q_grad],
         "states": [{"m": q_m, "vmean": q_vmean, "step": step0, "head_per_gpu": 16}]},
        {"name": "model.layers.0.self_attn.v_proj.weight", "params": [v_w], "grads": [v_grad],
         "states": [{"m": v_m, "vmean": v_vmean, "step": step0, "neuron_per_gpu": 1024}]},
        {"name": "model.layers.0.mlp.up_proj.weight", "params": [up_w], "grads": [up_grad],
         "states": [{"m": up_m, "vmean": up_vmean, "step": step0, "neuron_per_gpu": 2816}]},
        {"name": "model.layers.0.input_layernorm.weight", "params": [ln_w], "grads": [ln_grad],
         "states": [{"m": ln_m, "vmean": ln_vmean, "step": step0, "reduced": False, "block_numel": 1024.0}]},
        {"name": "model.layers.0.mlp.up_proj.bias", "params": [up_b], "grads": [up_b_grad],
         "states": [{"m": up_b_m, "v": up_b_v, "step": step0}]},
    ]

    for group in param_groups:
        beta1 = 0.9
        beta2 = 0.999
        lr = 1e-3
        name = group["name"]
        eps = 1e-8
        weight_decay = 0.1

        for j, p in enumerate(group["params"]):
            state = group["states"][j]
            p_grad = group["grads"][j]
            if any(adam_block_name in name for adam_block_name in adam_block_names):  # for bias terms
                if p_grad is None:
                    continue
                if len(state) == 0:
                    state["m"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    state["step"] = 0
                    state["v"] = torch.zeros_like(p, memory_format=torch.preserve_format)

                grad = p_grad
                state["v"].mul_(beta2).addcmul_(grad, grad.conj(), value=1 - beta2)
                state["step"] += 1
                if weight_decay > 0.0:
                    p.mul_(1 - lr * weight_decay)
                state["m"].lerp_(grad, 1 - beta1)
                bias_correction_1 = 1 - beta1 ** state["step"]
                bias_correction_2 = 1 - beta2 ** state["step"]
                bias_correction_2_sqrt = math.sqrt(bias_correction_2)
                h = (state["v"].sqrt() / bias_correction_2_sqrt).add_(eps)
                stepsize = lr / bias_correction_1
                p.addcdiv_(state["m"], h, value=-stepsize)
            elif any(wqk_name in name for wqk_name in wqk_names):  # this is for query and key
                if p_grad is None:
                    continue
                grad = p_grad
                head_per_gpu = state["head_per_gpu"]
                grad = grad.view(head_per_gpu, head_numel)
                tmp_lr = torch.mean(grad * grad, dim=1, keepdim=True)

                state["vmean"].mul_(beta2).add_(tmp_lr, alpha=1 - beta2)
                state["step"] += 1
                if weight_decay > 0.0:
                    p.mul_(1 - lr * weight_decay)
                state["m"].lerp_(grad, 1 - beta1)
                bias_correction_1 = 1 - beta1 ** state["step"]
                bias_correction_2 = 1 - beta2 ** state["step"]
                bias_correction_2_sqrt = math.sqrt(bias_correction_2)
                h = (state["vmean"].sqrt() / bias_correction_2_sqrt).add_(eps)
                stepsize = ((1 / bias_correction_1) / h).view(head_per_gpu, 1)
                update = (state["m"] * stepsize).view(p.size())
                update.mul_(lr)
                p.add_(-update)
            elif any(embd_name in name for embd_name in embd_names) or any(
                    output_name in name for output_name in output_names) or any(
                    wv_name in name for wv_name in wv_names) or any(
                    mlp_name in name for mlp_name in mlp_names) or any(
                    attn_proj_name in name for attn_proj_name in attn_proj_names):
                if p_grad is None:
                    continue
                grad = p_grad
                neuron_per_gpu = state["neuron_per_gpu"]
                tmp_lr = torch.mean(grad * grad, dim=1, keepdim=True)

                state["vmean"].mul_(beta2).add_(tmp_lr, alpha=1 - beta2)
                state["step"] += 1
                if weight_decay > 0.0:
                    p.mul_(1 - lr * weight_decay)
                state["m"].lerp_(grad, 1 - beta1)
                bias_correction_1 = 1 - beta1 ** state["step"]
                bias_correction_2 = 1 - beta2 ** state["step"]
                bias_correction_2_sqrt = math.sqrt(bias_correction_2)
                h = (state["vmean"].sqrt() / bias_correction_2_sqrt).add_(eps)
                stepsize = ((1 / bias_correction_1) / h).view(neuron_per_gpu, 1)
                update = (state["m"] * stepsize).view(p.size())
                update.mul_(lr)
                p.add_(-update)

            else:  # other blocks. By default, this is for LayerNorms. Sometimes it is also fine to put Value here
                if p_grad is None:
                    tmp_lr = torch.zeros_like(torch.sum(p * p))
                else:
                    grad = p_grad
                    tmp_lr = torch.sum(grad * grad)

                if (p_grad is None):
                    continue
                tmp_lr = tmp_lr / state["block_numel"]

                if weight_decay > 0.0:
                    p.mul_(1 - lr * weight_decay)
                state["step"] += 1
                state["m"].lerp_(grad, 1 - beta1)
                bias_correction_1 = 1 - beta1 ** state["step"]
                bias_correction_2 = 1 - beta2 ** state["step"]
                bias_correction_2_sqrt = math.sqrt(bias_correction_2)
                state["vmean"].mul_(beta2).add_(tmp_lr, alpha=1 - beta2)
                h = (state["vmean"].sqrt() / bias_correction_2_sqrt).add_(eps)
                stepsize = (1 / bias_correction_1) / h
                update = state["m"] * (stepsize.to(state["m"].device))
                update.mul_(lr)
                p.add_(-update)


# OpenNMT-py (OpenNMT/OpenNMT-py), onmt/utils/optimizers.py: AdaFactor._check_shape
def _onmt_check_shape(shape):
    """
    output1 - True - algorithm for matrix, False - vector;
    output2 - need reshape
    """
    if len(shape) > 2:
        return True, True
    elif len(shape) == 2:
        return True, False
    elif len(shape) == 2 and (shape[0] == 1 or shape[1] == 1):
        return False, False
    else:
        return False, False


# OpenNMT-py (OpenNMT/OpenNMT-py), onmt/utils/optimizers.py: AdaFactor._rms (math.sqrt of a 0-d tensor)
def _onmt_rms(x):
    return math.sqrt(torch.mean(x.pow(2)))


# OpenNMT-py (OpenNMT/OpenNMT-py), onmt/utils/optimizers.py: AdaFactor.step (lr 1e-2, beta1 0.9,
# beta2 0.999, eps1 1e-30, eps2 1e-3, cliping_threshold 1, non_constant_decay True so ams_grad False,
# enable_factorization True, weight_decay 0) on a 1024x2048 weight (factored row and column moments) and its bias
# (full moment), at state['step'] = step (default 50); the deprecated add_(scalar, tensor) and addcmul_(scalar, t1, t2)
# overloads as the original writes them, math.sqrt of a 0-d tensor for _rms
def opennmt_adafactor_step(
    w: f32[1024, 2048], b: f32[2048], w_grad: f32[1024, 2048], b_grad: f32[2048],
    w_exp_avg: f32[1024, 2048], w_exp_avg_sq_R: f32[1, 2048], w_exp_avg_sq_C: f32[1024, 1],
    b_exp_avg: f32[2048], b_exp_avg_sq: f32[2048], step: int = 50,
):
    w_exp_avg_sq_R.abs_().mul_(1e-2)
    w_exp_avg_sq_C.abs_().mul_(1e-2)
    b_exp_avg_sq.abs_().mul_(1e-2)
    group = {"lr": 1e-2, "beta1": 0.9, "beta2": 0.999, "eps1": 1e-30, "eps2": 1e-3, "cliping_threshold": 1,
             "weight_decay": 0, "ams_grad": False, "enable_factorization": True, "enable_momentum": True,
             "non_constant_decay": True, "params": [w, b]}
    grads = [w_grad, b_grad]
    states = [{"step": step, "exp_avg": w_exp_avg, "exp_avg_sq_R": w_exp_avg_sq_R, "exp_avg_sq_C": w_exp_avg_sq_C},
              {"step": step, "exp_avg": b_exp_avg, "exp_avg_sq": b_exp_avg_sq}]

    for i, p in enumerate(group["params"]):
        grad = grads[i].data

        is_matrix, is_need_reshape = _onmt_check_shape(grad.size())
        new_shape = p.data.size()

        state = states[i]

        if group["enable_momentum"]:
            exp_avg = state["exp_avg"]

        if is_matrix and group["enable_factorization"]:
            exp_avg_sq_r = state["exp_avg_sq_R"]
            exp_avg_sq_c = state["exp_avg_sq_C"]
        else:
            exp_avg_sq = state["exp_avg_sq"]

        if group["ams_grad"]:
            exp_avg_sq_hat = state["exp_avg_sq_hat"]

        state["step"] += 1
        lr_t = group["lr"]
        lr_t *= max(group["eps2"], _onmt_rms(p.data))

        if group["enable_momentum"]:
            if group["non_constant_decay"]:
                beta1_t = (
                    group["beta1"]
                    * (1 - group["beta1"] ** (state["step"] - 1))
                    / (1 - group["beta1"] ** state["step"])
                )
            else:
                beta1_t = group["beta1"]
            exp_avg.mul_(beta1_t).add_(1 - beta1_t, grad)

        if group["non_constant_decay"]:
            beta2_t = (
                group["beta2"]
                * (1 - group["beta2"] ** (state["step"] - 1))
                / (1 - group["beta2"] ** state["step"])
            )
        else:
            beta2_t = group["beta2"]

        if is_matrix and group["enable_factorization"]:
            exp_avg_sq_r.mul_(beta2_t).add_(
                1 - beta2_t,
                torch.sum(
                    torch.mul(grad, grad).add_(group["eps1"]),
                    dim=0,
                    keepdim=True,
                ),
            )
            exp_avg_sq_c.mul_(beta2_t).add_(
                1 - beta2_t,
                torch.sum(
                    torch.mul(grad, grad).add_(group["eps1"]),
                    dim=1,
                    keepdim=True,
                ),
            )
            v = torch.mul(exp_avg_sq_c, exp_avg_sq_r).div_(
                torch.sum(exp_avg_sq_r)
            )
        else:
            exp_avg_sq.mul_(beta2_t).addcmul_(1 - beta2_t, grad, grad).add_(
                (1 - beta2_t) * group["eps1"]
            )
            v = exp_avg_sq

        g = grad
        if group["enable_momentum"]:
            g = torch.div(exp_avg, 1 - beta1_t ** state["step"])

        if group["ams_grad"]:
            torch.max(exp_avg_sq_hat, v, out=exp_avg_sq_hat)
            v = exp_avg_sq_hat
            u = torch.div(
                g,
                (torch.div(v, 1 - beta2_t ** state["step"]))
                .sqrt()
                .add_(group["eps1"]),
            )
        else:
            u = torch.div(g, v.sqrt())

        u.div_(max(1, _onmt_rms(u) / group["cliping_threshold"]))
        p.data.add_(
            -lr_t
            * (
                u.view(old_shape)
                if is_need_reshape and group["enable_factorization"]
                else u
            )
        )

        if group["weight_decay"] != 0:
            p.data.add_(-group["weight_decay"] * lr_t, p.data)


# GaLore (jiaweizzhao/GaLore), galore_torch/galore_projector.py: GaLoreProjector.project, proj_type "std" (the other
# proj_types left out), the projector's attributes as a dict; at a step that is not a multiple of update_proj_gap the
# stored ortho_matrix is used, so get_orthogonal_matrix's SVD refresh is not reached and is left out (an exception
# stands in for it)
def _gl_project(self, full_rank_grad, iter):
    if self["proj_type"] == "std":
        if full_rank_grad.shape[0] >= full_rank_grad.shape[1]:
            if self["ortho_matrix"] is None or iter % self["update_proj_gap"] == 0:
                raise NotImplementedError("get_orthogonal_matrix (SVD) is not part of this port")
            low_rank_grad = torch.matmul(full_rank_grad, self["ortho_matrix"].t())
        else:
            if self["ortho_matrix"] is None or iter % self["update_proj_gap"] == 0:
                raise NotImplementedError("get_orthogonal_matrix (SVD) is not part of this port")
            low_rank_grad = torch.matmul(self["ortho_matrix"].t(), full_rank_grad)

    return low_rank_grad


# GaLore (jiaweizzhao/GaLore), galore_torch/galore_projector.py: GaLoreProjector.project_back, proj_type "std"
def _gl_project_back(self, low_rank_grad):
    if self["proj_type"] == "std":
        if low_rank_grad.shape[0] >= low_rank_grad.shape[1]:
            full_rank_grad = torch.matmul(low_rank_grad, self["ortho_matrix"])
        else:
            full_rank_grad = torch.matmul(self["ortho_matrix"], low_rank_grad)

    return full_rank_grad * self["scale"]


# GaLore (jiaweizzhao/GaLore), galore_torch/adamw.py: AdamW.step (lr 1e-2, betas (0.9, 0.999), eps 1e-6,
# weight_decay 0, correct_bias True) with the README's LLaMA settings for the GaLore group (rank 128, update_proj_gap
# 200, scale 0.25, proj_type "std"): a LLaMA-60M MLP down weight (1376x512, projected on the right) and up weight
# (512x1376, projected on the left), and a plain-AdamW LayerNorm weight; state at step 201 with the low-rank moments
# and the stored projection matrices (orthonormal-scale rows from the raw input)
def galore_adamw_step(
    w1: f32[1376, 512], w2: f32[512, 1376], ln: f32[512],
    w1_grad: f32[1376, 512], w2_grad: f32[512, 1376], ln_grad: f32[512],
    w1_ortho: f32[128, 512], w2_ortho: f32[512, 128],
    w1_exp_avg: f32[1376, 128], w1_exp_avg_sq: f32[1376, 128], w2_exp_avg: f32[128, 1376],
    w2_exp_avg_sq: f32[128, 1376], ln_exp_avg: f32[512], ln_exp_avg_sq: f32[512],
):
    w1_ortho = w1_ortho / math.sqrt(512)
    w2_ortho = w2_ortho / math.sqrt(512)
    w1_exp_avg_sq.abs_().mul_(1e-2)
    w2_exp_avg_sq.abs_().mul_(1e-2)
    ln_exp_avg_sq.abs_().mul_(1e-2)
    step0 = 201
    galore_group = {"params": [w1, w2], "grads": [w1_grad, w2_grad], "lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-6,
                    "weight_decay": 0.0, "correct_bias": True, "rank": 128, "update_proj_gap": 200, "scale": 0.25,
                    "proj_type": "std",
                    "states": [{"step": step0, "exp_avg": w1_exp_avg, "exp_avg_sq": w1_exp_avg_sq,
                                "projector": {"rank": 128, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std",
                                              "ortho_matrix": w1_ortho}},
                               {"step": step0, "exp_avg": w2_exp_avg, "exp_avg_sq": w2_exp_avg_sq,
                                "projector": {"rank": 128, "update_proj_gap": 200, "scale": 0.25, "proj_type": "std",
                                              "ortho_matrix": w2_ortho}}]}
    plain_group = {"params": [ln], "grads": [ln_grad], "lr": 1e-2, "betas": (0.9, 0.999), "eps": 1e-6,
                   "weight_decay": 0.0, "correct_bias": True,
                   "states": [{"step": step0, "exp_avg": ln_exp_avg, "exp_avg_sq": ln_exp_avg_sq}]}

    for group in [galore_group, plain_group]:
        for i, p in enumerate(group["params"]):
            grad = group["grads"][i]

            state = group["states"][i]

            if "step" not in state:
                state["step"] = 0

            if "dim" not in group:
                group["dim"] = 2

            # GaLore Projection
            if "rank" in group:
                grad = _gl_project(state["projector"], grad, state["step"])

            # State initialization
            if "exp_avg" not in state:
                # Exponential moving average of gradient values
                state["exp_avg"] = torch.zeros_like(grad)
                # Exponential moving average of squared gradient values
                state["exp_avg_sq"] = torch.zeros_like(grad)

            exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
            beta1, beta2 = group["betas"]

            state["step"] += 1

            # Decay the first and second moment running average coefficient
            # In-place operations to update the averages at the same time
            exp_avg.mul_(beta1).add_(grad, alpha=(1.0 - beta1))
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1.0 - beta2)
            denom = exp_avg_sq.sqrt().add_(group["eps"])

            step_size = group["lr"]
            if group["correct_bias"]:  # No bias correction for Bert
                bias_correction1 = 1.0 - beta1 ** state["step"]
                bias_correction2 = 1.0 - beta2 ** state["step"]
                step_size = step_size * math.sqrt(bias_correction2) / bias_correction1

            # compute norm gradient
            norm_grad = exp_avg / denom

            # GaLore Projection Back
            if "rank" in group:
                norm_grad = _gl_project_back(state["projector"], norm_grad)

            p.add_(norm_grad, alpha=-step_size)

            if group["weight_decay"] > 0.0:
                p.add_(p, alpha=(-group["lr"] * group["weight_decay"]))
