"""Held-out real code, issue 14's sixth round (2 of 8 ran on every engine before the fixes of that round): detection decoding, an RNN cell, SSM chunked scan, optimizers and
logits processors, each ported with minimal changes. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math
from itertools import product

import torch
import torch.nn.functional as F


def _meshgrid(*tensors):
    return torch.meshgrid(*tensors, indexing="ij")


# YOLOX (Megvii-BaseDetection/YOLOX), yolox/models/yolo_head.py: YOLOXHead.decode_outputs, with yolox/utils's
# meshgrid (torch >= 1.10 branch); self.hw = [(4, 4), (2, 2), (1, 1)], self.strides = [8, 16, 32]
def yolox_decode_outputs(outputs: f32[2, 21, 7]) -> f32[2, 21, 7]:
    hw = [(4, 4), (2, 2), (1, 1)]
    strides_cfg = [8, 16, 32]
    dtype = outputs.dtype
    grids = []
    strides = []
    for (hsize, wsize), stride in zip(hw, strides_cfg):
        yv, xv = _meshgrid(torch.arange(hsize), torch.arange(wsize))
        grid = torch.stack((xv, yv), 2).view(1, -1, 2)
        grids.append(grid)
        shape = grid.shape[:2]
        strides.append(torch.full((*shape, 1), stride))
    grids = torch.cat(grids, dim=1).type(dtype)
    strides = torch.cat(strides, dim=1).type(dtype)
    outputs = torch.cat([
        (outputs[..., 0:2] + grids) * strides,
        torch.exp(outputs[..., 2:4]) * strides,
        outputs[..., 4:]
    ], dim=-1)
    return outputs


# YOLOX, yolox/utils/boxes.py: bboxes_iou with xyxy=False (centre-size boxes); widths and heights made positive first
def yolox_bboxes_iou(bboxes_a: f32[6, 4], bboxes_b: f32[5, 4]) -> f32[6, 5]:
    bboxes_a = torch.cat([bboxes_a[:, :2], bboxes_a[:, 2:].abs() + 0.1], 1)
    bboxes_b = torch.cat([bboxes_b[:, :2], bboxes_b[:, 2:].abs() + 0.1], 1)
    xyxy = False
    if bboxes_a.shape[1] != 4 or bboxes_b.shape[1] != 4:
        raise IndexError

    if xyxy:
        tl = torch.max(bboxes_a[:, None, :2], bboxes_b[:, :2])
        br = torch.min(bboxes_a[:, None, 2:], bboxes_b[:, 2:])
        area_a = torch.prod(bboxes_a[:, 2:] - bboxes_a[:, :2], 1)
        area_b = torch.prod(bboxes_b[:, 2:] - bboxes_b[:, :2], 1)
    else:
        tl = torch.max(
            (bboxes_a[:, None, :2] - bboxes_a[:, None, 2:] / 2),
            (bboxes_b[:, :2] - bboxes_b[:, 2:] / 2),
        )
        br = torch.min(
            (bboxes_a[:, None, :2] + bboxes_a[:, None, 2:] / 2),
            (bboxes_b[:, :2] + bboxes_b[:, 2:] / 2),
        )

        area_a = torch.prod(bboxes_a[:, 2:], 1)
        area_b = torch.prod(bboxes_b[:, 2:], 1)
    en = (tl < br).type(tl.type()).prod(dim=2)
    area_i = torch.prod(br - tl, 2) * en  # * ((tl < br).all())
    return area_i / (area_a[:, None] + area_b - area_i)


# ssd.pytorch (amdegroot), layers/functions/prior_box.py: PriorBox.forward with a small config (feature maps 3, 2, 1;
# image size 60; steps 20, 30, 60; min sizes 12, 24, 42; max sizes 24, 42, 60; aspect ratios [2], [2, 3], [2]; clip)
def ssd_prior_box() -> f32[64, 4]:
    feature_maps = [3, 2, 1]
    image_size = 60
    steps = [20, 30, 60]
    min_sizes = [12, 24, 42]
    max_sizes = [24, 42, 60]
    aspect_ratios = [[2], [2, 3], [2]]
    clip = True
    mean = []
    for k, f in enumerate(feature_maps):
        for i, j in product(range(f), repeat=2):
            f_k = image_size / steps[k]
            # unit center x,y
            cx = (j + 0.5) / f_k
            cy = (i + 0.5) / f_k

            # aspect_ratio: 1
            # rel size: min_size
            s_k = min_sizes[k] / image_size
            mean += [cx, cy, s_k, s_k]

            # aspect_ratio: 1
            # rel size: sqrt(s_k * s_(k+1))
            s_k_prime = math.sqrt(s_k * (max_sizes[k] / image_size))
            mean += [cx, cy, s_k_prime, s_k_prime]

            # rest of aspect ratios
            for ar in aspect_ratios[k]:
                mean += [cx, cy, s_k * math.sqrt(ar), s_k / math.sqrt(ar)]
                mean += [cx, cy, s_k / math.sqrt(ar), s_k * math.sqrt(ar)]
    # back to torch land
    output = torch.Tensor(mean).view(-1, 4)
    if clip:
        output.clamp_(max=1, min=0)
    return output


def _mogrify(x, h, mog_w, mogrify_steps):
    for i in range(mogrify_steps):
        if (i + 1) % 2 == 0:
            h = (2 * torch.sigmoid(F.linear(x, mog_w[i]))) * h
        else:
            x = (2 * torch.sigmoid(F.linear(h, mog_w[i]))) * x
    return x, h


# Mogrifier LSTM (fawazsammani/mogrifier-lstm-pytorch), mog_lstm.py: MogrifierLSTMCell.mogrify and forward, run over
# a sequence of 6 steps (nn.Linear as F.linear; mogrify_steps 5)
def mogrifier_lstm(
    xs: f32[6, 2, 8], mog_w: f32[5, 8, 8], w_x2h: f32[32, 8], b_x2h: f32[32], w_h2h: f32[32, 8], b_h2h: f32[32]
) -> tuple[f32[6, 2, 8], f32[2, 8]]:
    mog_w = mog_w * 0.35
    ht = torch.zeros(2, 8)
    ct = torch.zeros(2, 8)
    outputs = []
    for t in range(xs.size(0)):
        x, ht = _mogrify(xs[t], ht, mog_w, 5)
        gates = F.linear(x, w_x2h, b_x2h) + F.linear(ht, w_h2h, b_h2h)
        in_gate, forget_gate, new_memory, out_gate = gates.chunk(4, 1)
        in_gate = torch.sigmoid(in_gate)
        forget_gate = torch.sigmoid(forget_gate)
        out_gate = torch.sigmoid(out_gate)
        new_memory = torch.tanh(new_memory)
        c_new = (forget_gate * ct) + (in_gate * new_memory)
        h_new = out_gate * torch.tanh(c_new)
        ht, ct = h_new, c_new
        outputs.append(ht)
    return torch.stack(outputs), ct


def _segsum(x):
    T = x.size(-1)
    x = x[..., None].expand(*x.shape, T)
    mask = torch.tril(torch.ones(T, T, device=x.device, dtype=bool), diagonal=-1)
    x = x.masked_fill(~mask, 0)
    x_segsum = torch.cumsum(x, dim=-2)
    mask = torch.tril(torch.ones(T, T, device=x.device, dtype=bool), diagonal=0)
    x_segsum = x_segsum.masked_fill(~mask, -torch.inf)
    return x_segsum


# Mamba-2 (state-spaces/mamba), mamba_ssm/modules/ssd_minimal.py: segsum and ssd_minimal_discrete (block_len 4,
# no initial states); einops' rearrange/repeat written as reshape, permute and expand
def mamba2_ssd_minimal(
    X: f32[1, 8, 2, 3], A: f32[1, 8, 2], B: f32[1, 8, 2, 4], C: f32[1, 8, 2, 4]
) -> tuple[f32[1, 8, 2, 3], f32[1, 2, 3, 4]]:
    A = -A.abs()
    block_len = 4
    assert X.dtype == A.dtype == B.dtype == C.dtype
    assert X.shape[1] % block_len == 0
    # Rearrange into blocks/chunks
    X, A, B, C = [x.reshape(x.shape[0], x.shape[1] // block_len, block_len, *x.shape[2:]) for x in (X, A, B, C)]
    A = A.permute(0, 3, 1, 2)
    A_cumsum = torch.cumsum(A, dim=-1)

    # 1. Compute the output for each intra-chunk (diagonal blocks)
    L = torch.exp(_segsum(A))
    Y_diag = torch.einsum("bclhn,bcshn,bhcls,bcshp->bclhp", C, B, L, X)

    # 2. Compute the state for each intra-chunk
    # (right term of low-rank factorization of off-diagonal blocks; B terms)
    decay_states = torch.exp((A_cumsum[:, :, :, -1:] - A_cumsum))
    states = torch.einsum("bclhn,bhcl,bclhp->bchpn", B, decay_states, X)

    # 3. Compute the inter-chunk SSM recurrence; produces correct SSM states at chunk boundaries
    # (middle term of factorization of off-diag blocks; A terms)
    initial_states = torch.zeros_like(states[:, :1])
    states = torch.cat([initial_states, states], dim=1)
    decay_chunk = torch.exp(_segsum(F.pad(A_cumsum[:, :, :, -1], (1, 0))))
    new_states = torch.einsum("bhzc,bchpn->bzhpn", decay_chunk, states)
    states, final_state = new_states[:, :-1], new_states[:, -1]

    # 4. Compute state -> output conversion per chunk
    # (left term of low-rank factorization of off-diagonal blocks; C terms)
    state_decay_out = torch.exp(A_cumsum)
    Y_off = torch.einsum('bclhn,bchpn,bhcl->bclhp', C, states, state_decay_out)

    # Add output of intra-chunk and inter-chunk terms (diagonal and off-diagonal blocks)
    Y = Y_diag + Y_off
    Y = Y.reshape(Y.shape[0], Y.shape[1] * Y.shape[2], *Y.shape[3:])
    return Y, final_state


# AdaBelief (juntang-zhuang/Adabelief-Optimizer), pytorch_adabelief/AdaBelief.py (v0.2): AdaBelief.step for one
# parameter over 7 steps (lr 1e-3, betas (0.9, 0.999), eps 1e-16, weight_decay 1e-2, weight_decouple, rectify,
# degenerated_to_sgd); `p.data` written `p`
def adabelief_steps(p: f32[4, 6], grads: f32[7, 4, 6]) -> tuple[f32[4, 6], f32[4, 6], f32[4, 6]]:
    lr, (beta1, beta2), eps, weight_decay = 1e-3, (0.9, 0.999), 1e-16, 1e-2
    weight_decouple, fixed_decay, rectify, degenerated_to_sgd, amsgrad = True, False, True, True, False
    buffer = [[None, None, None] for _ in range(10)]
    state = {"step": 0, "exp_avg": torch.zeros_like(p), "exp_avg_var": torch.zeros_like(p)}
    for g in range(grads.shape[0]):
        grad = grads[g]
        exp_avg, exp_avg_var = state["exp_avg"], state["exp_avg_var"]
        state["step"] += 1
        bias_correction1 = 1 - beta1 ** state["step"]
        bias_correction2 = 1 - beta2 ** state["step"]

        # perform weight decay, check if decoupled weight decay
        if weight_decouple:
            if not fixed_decay:
                p.mul_(1.0 - lr * weight_decay)
            else:
                p.mul_(1.0 - weight_decay)
        else:
            if weight_decay != 0:
                grad.add_(p, alpha=weight_decay)

        # update first and second moment
        exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
        grad_residual = grad - exp_avg
        exp_avg_var.mul_(beta2).addcmul_(grad_residual, grad_residual, value=1 - beta2)

        denom = (exp_avg_var.add_(eps).sqrt() / math.sqrt(bias_correction2)).add_(eps)

        if not rectify:
            step_size = lr / bias_correction1
            p.addcdiv_(exp_avg, denom, value=-step_size)
        else:  # Rectified update, forked from RAdam
            buffered = buffer[int(state["step"] % 10)]
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
                        (1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (N_sma - 2) / N_sma * N_sma_max / (
                            N_sma_max - 2)) / (1 - beta1 ** state["step"])
                elif degenerated_to_sgd:
                    step_size = 1.0 / (1 - beta1 ** state["step"])
                else:
                    step_size = -1
                buffered[2] = step_size

            if N_sma >= 5:
                denom = exp_avg_var.sqrt().add_(eps)
                p.addcdiv_(exp_avg, denom, value=-step_size * lr)
            elif step_size > 0:
                p.add_(exp_avg, alpha=-step_size * lr)
    return p, state["exp_avg"], state["exp_avg_var"]


# Hugging Face transformers, generation/logits_process.py: SuppressTokensLogitsProcessor.__call__ (suppress_tokens
# [1, 4, 9]; isin_mps_friendly is torch.isin on the CPU) followed by ForcedEOSTokenLogitsProcessor.__call__
# (max_length 7, eos_token_id tensor [3])
def hf_suppress_then_forced_eos(input_ids: i64[2, 6], scores: f32[2, 12]) -> tuple[f32[2, 12], f32[2, 12]]:
    suppress_tokens = torch.tensor([1, 4, 9])
    vocab_tensor = torch.arange(scores.shape[-1], device=scores.device)
    suppress_token_mask = torch.isin(vocab_tensor, suppress_tokens)
    scores = torch.where(suppress_token_mask, -float("inf"), scores)

    max_length = 7
    eos_token_id = torch.tensor([3])
    cur_len = input_ids.shape[-1]
    scores_processed = scores
    if cur_len == max_length - 1:
        scores_processed = torch.full_like(scores, -math.inf)
        scores_processed[:, eos_token_id] = 0
    return scores, scores_processed


# fvcore (facebookresearch/fvcore), fvcore/nn/giou_loss.py: giou_loss (reduction "mean", eps 1e-7); boxes made
# valid (x2 >= x1, y2 >= y1) first, so the asserts hold
def fvcore_giou_loss(boxes1: f32[8, 4], boxes2: f32[8, 4]) -> f32[()]:
    boxes1 = torch.cat([boxes1[:, :2], boxes1[:, :2] + boxes1[:, 2:].abs()], 1)
    boxes2 = torch.cat([boxes2[:, :2], boxes2[:, :2] + boxes2[:, 2:].abs()], 1)
    reduction = "mean"
    eps = 1e-7

    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)

    assert (x2 >= x1).all(), "bad box: x1 larger than x2"
    assert (y2 >= y1).all(), "bad box: y1 larger than y2"

    # Intersection keypoints
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)

    intsctk = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsctk[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    unionk = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsctk
    iouk = intsctk / (unionk + eps)

    # smallest enclosing box
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)

    area_c = (xc2 - xc1) * (yc2 - yc1)
    miouk = iouk - ((area_c - unionk) / (area_c + eps))

    loss = 1 - miouk

    if reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()

    return loss
