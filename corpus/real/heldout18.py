"""Held-out real code, issue 14's eighteenth round, the programs every engine runs (the round's others wait in
tests/real_pending/heldout_r18.py): YOLACT's Fast NMS; the coupled oscillatory RNN (coRNN), flash-linear-attention's
naive recurrent ABC; vLLM's rejection sampler for speculative decoding; AdEMAMix and Ranger (2020); Ultralytics'
pose keypoints with OKS (its sigmas an `np.array`, which funcfuse runs as a float64 tensor); the Legendre Memory Unit
(`torch.linalg.matrix_exp`), which waited in tests/real_pending at first. Inputs arrive
uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Tuple

import numpy as np
import torch
import torch.nn.functional as F
from torch.autograd import Variable


def _yolact_point_form(boxes):
    return torch.cat((boxes[:, :2] - boxes[:, 2:] / 2,     # xmin, ymin
                      boxes[:, :2] + boxes[:, 2:] / 2), 1)  # xmax, ymax


def _yolact_intersect(box_a, box_b):
    n = box_a.size(0)
    A = box_a.size(1)
    B = box_b.size(1)
    max_xy = torch.min(box_a[:, :, 2:].unsqueeze(2).expand(n, A, B, 2),
                       box_b[:, :, 2:].unsqueeze(1).expand(n, A, B, 2))
    min_xy = torch.max(box_a[:, :, :2].unsqueeze(2).expand(n, A, B, 2),
                       box_b[:, :, :2].unsqueeze(1).expand(n, A, B, 2))
    inter = torch.clamp((max_xy - min_xy), min=0)
    return inter[:, :, :, 0] * inter[:, :, :, 1]


def _yolact_jaccard(box_a, box_b, iscrowd: bool = False):
    use_batch = True
    if box_a.dim() == 2:
        use_batch = False
        box_a = box_a[None, ...]
        box_b = box_b[None, ...]

    inter = _yolact_intersect(box_a, box_b)
    area_a = ((box_a[:, :, 2] - box_a[:, :, 0]) *
              (box_a[:, :, 3] - box_a[:, :, 1])).unsqueeze(2).expand_as(inter)  # [A,B]
    area_b = ((box_b[:, :, 2] - box_b[:, :, 0]) *
              (box_b[:, :, 3] - box_b[:, :, 1])).unsqueeze(1).expand_as(inter)  # [A,B]
    union = area_a + area_b - inter

    out = inter / area_a if iscrowd else inter / union
    return out if use_batch else out.squeeze(0)


def _yolact_decode(loc, priors, use_yolo_regressors: bool = False):
    if use_yolo_regressors:
        boxes = torch.cat((
            loc[:, :2] + priors[:, :2],
            priors[:, 2:] * torch.exp(loc[:, 2:])
        ), 1)
        boxes = _yolact_point_form(boxes)
    else:
        variances = [0.1, 0.2]
        boxes = torch.cat((
            priors[:, :2] + loc[:, :2] * variances[0] * priors[:, 2:],
            priors[:, 2:] * torch.exp(loc[:, 2:] * variances[1])), 1)
        boxes[:, :2] -= boxes[:, 2:] / 2
        boxes[:, 2:] += boxes[:, :2]
    return boxes


def _yolact_fast_nms(self, boxes, masks, scores, iou_threshold: float = 0.5, top_k: int = 200,
                     second_threshold: bool = False):
    scores, idx = scores.sort(1, descending=True)

    idx = idx[:, :top_k].contiguous()
    scores = scores[:, :top_k]

    num_classes, num_dets = idx.size()

    boxes = boxes[idx.view(-1), :].view(num_classes, num_dets, 4)
    masks = masks[idx.view(-1), :].view(num_classes, num_dets, -1)

    iou = _yolact_jaccard(boxes, boxes)
    iou.triu_(diagonal=1)
    iou_max, _ = iou.max(dim=1)

    # Now just filter out the ones higher than the threshold
    keep = (iou_max <= iou_threshold)

    if second_threshold:
        keep *= (scores > self["conf_thresh"])

    # Assign each kept detection to its corresponding class
    classes = torch.arange(num_classes, device=boxes.device)[:, None].expand_as(keep)
    return boxes, masks, classes, scores, keep


# YOLACT (dbolya/yolact), layers/functions/detection.py: Detect.__call__'s per-image loop (conf_data viewed and
# transposed to [batch, classes, priors]) and Detect.fast_nms (iou_threshold 0.5, top_k 10, second_threshold False),
# with layers/box_utils.py's decode (variances (0.1, 0.2)), intersect and jaccard (batched); 2 images, 24 priors,
# 5 classes (background first), 8 mask coefficients; priors made center-size from the raw input (centres in
# [0.3, 0.7), sides in [0.3, 0.7), so that boxes overlap). Deviations:
# Detect.detect's conf_thresh selection (`scores = cur_scores[:, keep]`, a data-dependent shape) is left out (all
# priors go to fast_nms), and fast_nms stops before its boolean-mask gathers `classes[keep]` / `boxes[keep]` and the
# final sort: it returns the top-k boxes, masks, classes, scores and the keep mask, stacked over the two images.
def yolact_fast_nms(
    loc: f32[2, 24, 4], conf_raw: f32[2, 24, 5], mask_data: f32[2, 24, 8], prior_raw: f32[24, 4]
) -> tuple[f32[2, 4, 10, 4], f32[2, 4, 10, 8], i64[2, 4, 10], f32[2, 4, 10], bool[2, 4, 10]]:
    prior_data = torch.cat((prior_raw[:, :2] * 0.2 + 0.5, prior_raw[:, 2:] * 0.2 + 0.5), 1)
    conf_data = F.softmax(conf_raw * 3.0, dim=-1)
    det = {"num_classes": 5, "background_label": 0, "top_k": 10, "nms_thresh": 0.5, "conf_thresh": 0.05}

    batch_size = loc.size(0)
    num_priors = prior_data.size(0)
    conf_preds = conf_data.view(batch_size, num_priors, det["num_classes"]).transpose(2, 1).contiguous()

    out_boxes, out_masks, out_classes, out_scores, out_keep = [], [], [], [], []
    for batch_idx in range(batch_size):
        decoded_boxes = _yolact_decode(loc[batch_idx], prior_data)
        cur_scores = conf_preds[batch_idx, 1:, :]
        masks = mask_data[batch_idx]
        boxes, masks, classes, scores, keep = _yolact_fast_nms(
            det, decoded_boxes, masks, cur_scores, det["nms_thresh"], det["top_k"])
        out_boxes.append(boxes)
        out_masks.append(masks)
        out_classes.append(classes)
        out_scores.append(scores)
        out_keep.append(keep)
    return (torch.stack(out_boxes), torch.stack(out_masks), torch.stack(out_classes), torch.stack(out_scores),
            torch.stack(out_keep))


def _cornn_cell_forward(self, x, hy, hz):
    hz = hz + self["dt"] * (torch.tanh(F.linear(torch.cat((x, hz, hy), 1), self["i2h_w"], self["i2h_b"]))
                            - self["gamma"] * hy - self["epsilon"] * hz)
    hy = hy + self["dt"] * hz

    return hy, hz


def _cornn_forward(self, x):
    ## initialize hidden states
    hy = Variable(torch.zeros(x.size(1), self["n_hid"]))
    hz = Variable(torch.zeros(x.size(1), self["n_hid"]))

    for t in range(x.size(0)):
        hy, hz = _cornn_cell_forward(self["cell"], x[t], hy, hz)
    output = F.linear(hy, self["readout_w"], self["readout_b"])

    return output


# coRNN (tk-rusch/coRNN), psMNIST/network.py: coRNNCell.forward and coRNN.forward (n_inp 4, n_hid 8, n_out 3, dt
# 0.042, gamma 2.7, epsilon 4.7), 6 time steps of a batch of 2 (sequence first, as the task feeds it); the modules as
# dicts, nn.Linear as F.linear with weights scaled to nn.Linear's init bound 1/sqrt(fan_in); Variable as the original
# writes it
def cornn(
    x: f32[6, 2, 4], i2h_w: f32[8, 20], i2h_b: f32[8], readout_w: f32[3, 8], readout_b: f32[3]
) -> f32[2, 3]:
    cell = {"dt": 0.042, "gamma": 2.7, "epsilon": 4.7,
            "i2h_w": i2h_w / math.sqrt(20.0), "i2h_b": i2h_b / math.sqrt(20.0)}
    model = {"n_hid": 8, "cell": cell,
             "readout_w": readout_w / math.sqrt(8.0), "readout_b": readout_b / math.sqrt(8.0)}
    return _cornn_forward(model, x * 2.0)


def _repeat_heads(x, g):
    # einops.repeat(x, 'b h t d -> b (h g) t d', g=g)
    b, h = x.shape[0], x.shape[1]
    return x.unsqueeze(2).expand(b, h, g, *x.shape[2:]).reshape(b, h * g, *x.shape[2:])


def _naive_recurrent_abc(q, k, v, s, g=None, scale=None, initial_state=None, output_final_state=False):
    dtype = q.dtype

    NG = q.shape[1] // k.shape[1]
    # [batch_size, n_heads, seq_len, n_slots]
    if g is None:
        z = s.float().logcumsumexp(2)
        g = torch.cat((z[:, :, :1], z[:, :, :-1]), 2) - z
        s = torch.exp(s - z)
    q, k, v, s, g = (x.float() for x in (q, k, v, s, g))
    k, v, s, g = (_repeat_heads(x, NG) for x in (k, v, s, g))
    if initial_state is not None:
        initial_state = tuple(_repeat_heads(x, NG) for x in initial_state)

    B, H, T, K, V, M = *q.shape, v.shape[-1], s.shape[-1]

    hk = torch.zeros(B, H, K, M, dtype=torch.float, device=q.device)
    ok = torch.zeros_like(s)

    if scale is None:
        scale = q.shape[-1] ** -0.5

    final_state = None
    if initial_state is not None:
        hk += initial_state[0]

    for i in range(T):
        q_i = q[:, :, i] * scale
        k_i = k[:, :, i]
        v_i = s[:, :, i]
        g_i = g[:, :, i].exp()
        hk = hk * g_i[..., None, :] + k_i[..., None] * v_i[..., None, :]
        ok[:, :, i] = (q_i[..., None] * hk).sum(-2)

    qv = ok.softmax(-1)
    hv = torch.zeros(B, H, M, V, dtype=torch.float, device=q.device)
    ov = torch.zeros_like(v)
    if initial_state is not None:
        hv += initial_state[1]

    for i in range(T):
        q_i = qv[:, :, i]
        k_i = s[:, :, i]
        v_i = v[:, :, i]
        g_i = g[:, :, i].exp()
        hv = hv * g_i[..., :, None] + k_i[..., None] * v_i[..., None, :]
        ov[:, :, i] = (q_i[..., None] * hv).sum(-2)

    if output_final_state:
        final_state = (hk.view(B, -1, NG, K, M)[:, :, 0], hv.view(B, -1, NG, M, V)[:, :, 0])
    return ov.to(dtype), final_state


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/abc/naive.py: naive_recurrent_abc with g None
# (the slot gates from logcumsumexp of the slot scores), an initial state and output_final_state True; 4 query heads
# over 2 key/value heads (NG 2), batch 2, 6 steps, head dims 4, 3 slots. Deviation: einops' repeat
# 'b h t d -> b (h g) t d' written as unsqueeze/expand/reshape
def fla_naive_recurrent_abc(
    q: f32[2, 4, 6, 4], k: f32[2, 2, 6, 4], v: f32[2, 2, 6, 4], s: f32[2, 2, 6, 3], hk0: f32[2, 2, 4, 3],
    hv0: f32[2, 2, 3, 4]
) -> tuple[f32[2, 4, 6, 4], f32[2, 2, 4, 3], f32[2, 2, 3, 4]]:
    o, (hk, hv) = _naive_recurrent_abc(q, k, v, s * 2.0, initial_state=(hk0, hv0), output_final_state=True)
    return o, hk, hv


def _vllm_get_accepted(self, target_probs, draft_probs, draft_token_ids, uniform_rand):
    batch_size, k, _ = draft_probs.shape
    batch_indices = torch.arange(batch_size, device=target_probs.device)[:, None]
    probs_indicies = torch.arange(k, device=target_probs.device)

    # shape [batch_size, k]
    selected_draft_probs = draft_probs[batch_indices, probs_indicies, draft_token_ids]

    # shape [batch_size, k]
    selected_target_probs = target_probs[batch_indices, probs_indicies, draft_token_ids]

    capped_ratio = torch.minimum(
        selected_target_probs / selected_draft_probs,
        torch.full((1, ), 1, device=target_probs.device))
    accepted = uniform_rand < capped_ratio

    return accepted


def _vllm_get_recovered_probs(self, target_probs, draft_probs):
    _, k, _ = draft_probs.shape

    # shape [batch_size, k, vocab_size]
    difference = target_probs - draft_probs

    # shape [batch_size, k, vocab_size]
    f = torch.clamp(difference, min=self["_smallest_positive_value"])

    # shape [batch_size, k, vocab_size]
    recovered_probs = f / torch.sum(f, dim=-1).reshape(-1, k, 1)

    return recovered_probs


def _vllm_multinomial(probs, num_samples: int, k: int, exponential_noise):
    if num_samples > 1:
        probs = probs[:, None, :].expand(probs.shape[0], num_samples,
                                         probs.shape[1]).contiguous().view(-1, probs.shape[1])
    q = torch.empty_like(probs)
    q.copy_(exponential_noise)  # q.exponential_(1.0)
    return probs.div_(q).argmax(dim=1).view(-1, num_samples)


def _vllm_batch_modified_rejection_sampling(self, target_probs, draft_probs, draft_token_ids, uniform_rand,
                                            exponential_noise):
    batch_size, k, vocab_size = draft_probs.shape

    # shape [batch_size, k]
    accepted = _vllm_get_accepted(self, target_probs, draft_probs, draft_token_ids, uniform_rand)

    recovered_probs = _vllm_get_recovered_probs(self, target_probs, draft_probs).reshape(batch_size * k, vocab_size)

    # NOTE: the recovered_probs are overwritten by this method.
    recovered_token_ids = _vllm_multinomial(recovered_probs, num_samples=1, k=k,
                                            exponential_noise=exponential_noise).reshape(batch_size, k)

    return accepted, recovered_token_ids


def _vllm_create_output(self, accepted, substitute_token_ids, draft_token_ids, bonus_token_ids):
    batch_size, k = substitute_token_ids.shape
    bonus_token_ids = bonus_token_ids.squeeze(-1)
    # Determine the index of the first False value for each row.
    limits = (accepted == 0).max(1).indices
    limits[~(accepted == 0).any(1)] = k

    # Create masks using the indices.
    indices = torch.arange(k, device=accepted.device).unsqueeze(0)
    accepted_mask = indices < limits.unsqueeze(1)
    after_false_mask = indices == limits.unsqueeze(1)

    # Create an extended output tensor
    output_with_bonus_tokens = -torch.ones(
        (batch_size, k + self["_num_bonus_tokens"]),
        dtype=self["token_id_dtype"],
        device=accepted.device)
    output = output_with_bonus_tokens[:, :k]

    # Fill in the first k columns of the output tensor using masks and data tensors.
    output[:, :k] = torch.where(accepted_mask, draft_token_ids, -torch.ones_like(draft_token_ids))

    # Fill the last column.
    # We check output directly as accepted may have True values inconsistent with causal acceptance.
    output_with_bonus_tokens[:, -1] = torch.where(output[:, -1] != -1, bonus_token_ids, -1)

    # Fill the recovered token ids.
    output.mul_(~after_false_mask).add_(substitute_token_ids.mul(after_false_mask))

    self["num_accepted_tokens"] += accepted.sum()
    self["num_emitted_tokens"] += (output_with_bonus_tokens != -1).sum()
    self["num_draft_tokens"] += batch_size * k

    return output_with_bonus_tokens


# vLLM (vllm-project/vllm, v0.6), vllm/model_executor/layers/rejection_sampler.py: RejectionSampler.forward,
# _batch_modified_rejection_sampling, _get_accepted, _get_recovered_probs, _smallest_positive_value and
# _multinomial (num_samples 1), with spec_decode_base_sampler.py's _create_output (one bonus token) and the
# init_gpu_tensors counters; batch 3, 4 speculative tokens, vocabulary 10; probabilities are softmaxes of the raw
# inputs. Deviation: no seeded generators; torch.rand_like's uniforms and q.exponential_(1.0)'s noise are inputs
# (u in [0, 1) and -log(1 - u)), so q.exponential_ is written q.copy_(noise)
def vllm_rejection_sampler(
    target_logits: f32[3, 5, 10], draft_logits: f32[3, 4, 10], draft_token_ids: i64[3, 4], bonus_token_ids: i64[3, 1],
    uniform_raw: f32[3, 4], expo_raw: f32[12, 10]
) -> tuple[i64[3, 5], i64[()], i64[()], i64[()]]:
    target_with_bonus_probs = torch.softmax(target_logits * 2.0, dim=-1)
    draft_probs = torch.softmax(draft_logits * 2.0, dim=-1)
    uniform_rand = (uniform_raw + 1.0) * 0.5
    exponential_noise = -torch.log(1.0 - (expo_raw + 1.0) * 0.5)

    sampler = {
        "_disable_bonus_tokens": True, "_strict_mode": False, "_num_bonus_tokens": 1,
        "probs_dtype": torch.float32, "token_id_dtype": torch.int64,
        "_smallest_positive_value": torch.finfo(torch.float32).tiny,
        "num_accepted_tokens": torch.tensor(0, dtype=torch.long),
        "num_emitted_tokens": torch.tensor(0, dtype=torch.long),
        "num_draft_tokens": 0,
    }

    accepted, recovered_token_ids = _vllm_batch_modified_rejection_sampling(
        sampler, target_with_bonus_probs[:, :-1], draft_probs, draft_token_ids, uniform_rand, exponential_noise)

    output_token_ids = _vllm_create_output(sampler, accepted, recovered_token_ids, draft_token_ids, bonus_token_ids)
    return (output_token_ids, sampler["num_accepted_tokens"], sampler["num_emitted_tokens"],
            torch.tensor(sampler["num_draft_tokens"]))


def _linear_warmup_scheduler(step, alpha_end, alpha_start=0, warmup=1):
    if step < warmup:
        a = step / float(warmup)
        return (1.0 - a) * alpha_start + a * alpha_end
    return alpha_end


def _linear_hl_warmup_scheduler(step, beta_end, beta_start=0, warmup=1):

    def f(beta, eps=1e-8):
        return math.log(0.5) / math.log(beta + eps) - 1

    def f_inv(t):
        return math.pow(0.5, 1 / (t + 1))

    if step < warmup:
        a = step / float(warmup)
        return f_inv((1.0 - a) * f(beta_start) + a * f(beta_end))
    return beta_end


def _ademamix_step(param_groups, state_by_param):
    for group in param_groups:

        lr = group["lr"]
        lmbda = group["weight_decay"]
        eps = group["eps"]
        beta1, beta2, beta3_final = group["betas"]
        beta3_warmup = group["beta3_warmup"]
        alpha_final = group["alpha"]
        alpha_warmup = group["alpha_warmup"]

        for pi, (p, grad) in enumerate(zip(group['params'], group['grads'])):
            if grad is None:
                continue

            state = state_by_param[pi]

            # State initialization
            if len(state) == 0:
                state['step'] = 0
                # Exponential moving average of gradient values
                if beta1 != 0.0:  # save memory in case beta1 is 0.0
                    state['exp_avg_fast'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                else:
                    state['exp_avg_fast'] = None
                state['exp_avg_slow'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)

            exp_avg_fast, exp_avg_slow, exp_avg_sq = state['exp_avg_fast'], state['exp_avg_slow'], state['exp_avg_sq']

            state['step'] += 1
            bias_correction1 = 1 - beta1 ** state['step']
            bias_correction2 = 1 - beta2 ** state['step']

            # Compute the effective alpha and beta3 in case warmup is used
            if alpha_warmup is not None:
                alpha = _linear_warmup_scheduler(state["step"], alpha_end=alpha_final, alpha_start=0,
                                                 warmup=alpha_warmup)
            else:
                alpha = alpha_final

            if beta3_warmup is not None:
                beta3 = _linear_hl_warmup_scheduler(state["step"], beta_end=beta3_final, beta_start=beta1,
                                                    warmup=beta3_warmup)
            else:
                beta3 = beta3_final

            # Decay the first and second moment running average coefficient
            if beta1 != 0.0:
                exp_avg_fast.mul_(beta1).add_(grad, alpha=1 - beta1)
            else:
                exp_avg_fast = grad
            exp_avg_slow.mul_(beta3).add_(grad, alpha=1 - beta3)
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

            denom = (exp_avg_sq.sqrt() / math.sqrt(bias_correction2)).add_(eps)

            update = (exp_avg_fast.div(bias_correction1) + alpha * exp_avg_slow) / denom

            # decay
            update.add_(p, alpha=lmbda)

            p.add_(-lr * update)


# AdEMAMix (apple/ml-ademamix), pytorch/ademamix.py: AdEMAMix.step with linear_warmup_scheduler and
# linear_hl_warmup_scheduler (lr 1e-2, betas (0.9, 0.999, 0.9999), alpha 2.0, beta3_warmup 4, alpha_warmup 4,
# eps 1e-8, weight_decay 0.1), three steps on a [4, 6] weight and a [6] bias in one group; p.grad is each step's
# gradient slice; self.param_groups and self.state as a list of dicts and a dict by parameter index; the
# @torch.no_grad decorator and the closure left out
def ademamix_steps(w: f32[4, 6], b: f32[6], gw: f32[3, 4, 6], gb: f32[3, 6]) -> tuple[f32[4, 6], f32[6]]:
    defaults = dict(lr=1e-2, betas=(0.9, 0.999, 0.9999), eps=1e-8, alpha=2.0, beta3_warmup=4, alpha_warmup=4,
                    weight_decay=0.1)
    group = dict(defaults)
    group["params"] = [w, b]
    state = {0: {}, 1: {}}
    for t in range(3):
        group["grads"] = [gw[t], gb[t]]
        _ademamix_step([group], state)
    return w, b


def _centralized_gradient(x, use_gc=True, gc_conv_only=False):
    '''credit - https://github.com/Yonghongwei/Gradient-Centralization '''
    if use_gc:
        if gc_conv_only:
            if len(list(x.size())) > 3:
                x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
        else:
            if len(list(x.size())) > 1:
                x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
    return x


def _ranger_step(self):
    loss = None
    for group in self["param_groups"]:

        for pi, (p, p_grad) in enumerate(zip(group['params'], group['grads'])):
            if p_grad is None:
                continue
            grad = p_grad.data.float()

            if grad.is_sparse:
                raise RuntimeError('Ranger optimizer does not support sparse gradients')

            p_data_fp32 = p.data.float()

            state = self["state"][pi]  # get state dict for this param

            if len(state) == 0:  # if first time to run...init dictionary with our desired entries
                state['step'] = 0
                state['exp_avg'] = torch.zeros_like(p_data_fp32)
                state['exp_avg_sq'] = torch.zeros_like(p_data_fp32)

                # look ahead weight storage now in state dict
                state['slow_buffer'] = torch.empty_like(p.data)
                state['slow_buffer'].copy_(p.data)

            else:
                state['exp_avg'] = state['exp_avg'].type_as(p_data_fp32)
                state['exp_avg_sq'] = state['exp_avg_sq'].type_as(p_data_fp32)

            # begin computations
            exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
            beta1, beta2 = group['betas']

            # GC operation for Conv layers and FC layers
            if self["gc_loc"]:
                grad = _centralized_gradient(grad, use_gc=self["use_gc"], gc_conv_only=self["gc_conv_only"])

            state['step'] += 1

            # compute variance mov avg
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)

            # compute mean moving avg
            exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)

            buffered = self["radam_buffer"][int(state['step'] % 10)]

            if state['step'] == buffered[0]:
                N_sma, step_size = buffered[1], buffered[2]
            else:
                buffered[0] = state['step']
                beta2_t = beta2 ** state['step']
                N_sma_max = 2 / (1 - beta2) - 1
                N_sma = N_sma_max - 2 * \
                    state['step'] * beta2_t / (1 - beta2_t)
                buffered[1] = N_sma
                if N_sma > self["N_sma_threshhold"]:
                    step_size = math.sqrt((1 - beta2_t) * (N_sma - 4) / (N_sma_max - 4) * (
                        N_sma - 2) / N_sma * N_sma_max / (N_sma_max - 2)) / (1 - beta1 ** state['step'])
                else:
                    step_size = 1.0 / (1 - beta1 ** state['step'])
                buffered[2] = step_size

            # apply lr
            if N_sma > self["N_sma_threshhold"]:
                denom = exp_avg_sq.sqrt().add_(group['eps'])
                G_grad = exp_avg / denom
            else:
                G_grad = exp_avg

            if group['weight_decay'] != 0:
                G_grad.add_(p_data_fp32, alpha=group['weight_decay'])
            # GC operation
            if self["gc_loc"] == False:
                G_grad = _centralized_gradient(G_grad, use_gc=self["use_gc"], gc_conv_only=self["gc_conv_only"])

            p_data_fp32.add_(G_grad, alpha=-step_size * group['lr'])
            p.data.copy_(p_data_fp32)

            # integrated look ahead...
            # we do it at the param level instead of group level
            if state['step'] % group['k'] == 0:
                # get access to slow param tensor
                slow_p = state['slow_buffer']
                # (fast weights - slow weights) * alpha
                slow_p.add_(p.data - slow_p, alpha=self["alpha"])
                # copy interpolated weights to RAdam param tensor
                p.data.copy_(slow_p)

    return loss


# Ranger (lessw2020/Ranger-Deep-Learning-Optimizer), ranger/ranger2020.py: Ranger.step (version 2020.9.4: RAdam with
# the radam_buffer cache, integrated Lookahead, gradient centralization with use_gc True, gc_conv_only False, gc_loc
# True) with centralized_gradient; lr 1e-2, alpha 0.5, k 3 (instead of 6, so Lookahead syncs twice), N_sma_threshhold
# 5, betas (0.95, 0.999), eps 1e-5, weight_decay 1e-2 (the default is 0; with it the original's `G_grad = exp_avg`
# followed by `G_grad.add_(...)` updates exp_avg in place in the early steps), seven steps on a [4, 6] weight and a
# [6] bias; p.grad is each step's gradient slice, which gradient centralization updates in place (grad.float() of a
# float32 tensor is the tensor itself) as the original does to p.grad.data; the optimizer as a dict, self.state as a
# dict by parameter index; the __init__ prints left out
def ranger_steps(w: f32[4, 6], b: f32[6], gw: f32[7, 4, 6], gb: f32[7, 6]) -> tuple[f32[4, 6], f32[6]]:
    defaults = dict(lr=1e-2, alpha=0.5, k=3, step_counter=0, betas=(.95, 0.999), N_sma_threshhold=5, eps=1e-5,
                    weight_decay=1e-2)
    group = dict(defaults)
    group["params"] = [w, b]
    opt = {
        "param_groups": [group], "state": {0: {}, 1: {}},
        "N_sma_threshhold": 5, "alpha": 0.5, "k": 3,
        "radam_buffer": [[None, None, None] for ind in range(10)],
        "gc_loc": True, "use_gc": True, "gc_conv_only": False,
    }
    for t in range(7):
        group["grads"] = [gw[t], gb[t]]
        _ranger_step(opt)
    return w, b


def _ul_make_anchors(feats, strides, grid_cell_offset=0.5):
    anchor_points, stride_tensor = [], []
    assert feats is not None
    dtype, device = feats[0].dtype, feats[0].device
    for i, stride in enumerate(strides):
        h, w = feats[i].shape[2:] if isinstance(feats, list) else (int(feats[i][0]), int(feats[i][1]))
        sx = torch.arange(end=w, device=device, dtype=dtype) + grid_cell_offset  # shift x
        sy = torch.arange(end=h, device=device, dtype=dtype) + grid_cell_offset  # shift y
        sy, sx = torch.meshgrid(sy, sx, indexing="ij")
        anchor_points.append(torch.stack((sx, sy), -1).view(-1, 2))
        stride_tensor.append(torch.full((h * w, 1), stride, dtype=dtype, device=device))
    return torch.cat(anchor_points), torch.cat(stride_tensor)


def _ul_kpts_decode(self, bs, kpts):
    ndim = self["kpt_shape"][1]
    y = kpts.clone()
    if ndim == 3:
        y[:, 2::3] = y[:, 2::3].sigmoid()  # sigmoid (WARNING: inplace .sigmoid_() Apple MPS bug)
    y[:, 0::ndim] = (y[:, 0::ndim] * 2.0 + (self["anchors"][0] - 0.5)) * self["strides"]
    y[:, 1::ndim] = (y[:, 1::ndim] * 2.0 + (self["anchors"][1] - 0.5)) * self["strides"]
    return y


def _ul_xyxy2xywh(x):
    assert x.shape[-1] == 4, f"input shape last dimension expected 4 but input shape is {x.shape}"
    y = torch.empty_like(x)  # faster than clone/copy
    y[..., 0] = (x[..., 0] + x[..., 2]) / 2  # x center
    y[..., 1] = (x[..., 1] + x[..., 3]) / 2  # y center
    y[..., 2] = x[..., 2] - x[..., 0]  # width
    y[..., 3] = x[..., 3] - x[..., 1]  # height
    return y


def _ul_kpt_iou(kpt1, kpt2, area, sigma, eps=1e-7):
    d = (kpt1[:, None, :, 0] - kpt2[..., 0]).pow(2) + (kpt1[:, None, :, 1] - kpt2[..., 1]).pow(2)  # (N, M, 17)
    sigma = torch.tensor(sigma, device=kpt1.device, dtype=kpt1.dtype)  # (17, )
    kpt_mask = kpt1[..., 2] != 0  # (N, 17)
    e = d / ((2 * sigma).pow(2) * (area[:, None, None] + eps) * 2)  # from cocoeval
    return ((-e).exp() * kpt_mask[:, None]).sum(-1) / (kpt_mask.sum(-1)[:, None] + eps)


# Ultralytics (ultralytics/ultralytics), ultralytics/nn/modules/head.py: Pose.kpts_decode (not export, kpt_shape
# (17, 3)) with the anchors and strides Detect.forward makes (`(x.transpose(0, 1) for x in make_anchors(x, stride,
# 0.5))`), ultralytics/utils/tal.py's make_anchors; then as PoseValidator._process_batch scores keypoints:
# ultralytics/utils/ops.py's xyxy2xywh for the area (w * h * 0.53) and ultralytics/utils/metrics.py's kpt_iou with
# OKS_SIGMA (a numpy array, as the validator passes it). Two levels of 4x4 and 2x2 cells (strides 8 and 16), batch 1,
# 3 ground-truth people; gt boxes and keypoints made from the raw inputs in pixels of a 32x32 image, keypoint
# visibility 0 or 2 from a threshold. Deviations: no NMS between the head and the validator, every anchor's decoded
# keypoints are the predictions (the [51, 20] output transposed to [20, 17, 3]); OKS_SIGMA, a module-level constant
# of metrics.py, is defined in the function
def ultralytics_pose_kpts_oks(
    feat0: f32[1, 8, 4, 4], feat1: f32[1, 8, 2, 2], kpt: f32[1, 51, 20], gt_box_raw: f32[3, 4],
    gt_kpt_raw: f32[3, 17, 3]
) -> tuple[f32[1, 51, 20], f32[3, 20]]:
    # ultralytics/utils/metrics.py's module-level OKS_SIGMA, here in the function: funcfuse refuses numpy at module
    # level (`name np is not defined`, see the report)
    OKS_SIGMA = (
        np.array(
            [0.26, 0.25, 0.25, 0.35, 0.35, 0.79, 0.79, 0.72, 0.72, 0.62, 0.62, 1.07, 1.07, 0.87, 0.87, 0.89, 0.89]
        ) / 10.0
    )
    x = [feat0, feat1]
    head = {"kpt_shape": (17, 3), "stride": torch.tensor([8.0, 16.0]), "shape": None}
    bs = x[0].shape[0]
    if head["shape"] != x[0].shape:
        head["anchors"], head["strides"] = (t.transpose(0, 1) for t in _ul_make_anchors(x, head["stride"], 0.5))
        head["shape"] = x[0].shape
    pred_kpt = _ul_kpts_decode(head, bs, kpt)

    x1 = (gt_box_raw[:, 0] + 1.0) * 8.0
    y1 = (gt_box_raw[:, 1] + 1.0) * 8.0
    gt_bboxes = torch.stack((x1, y1, x1 + gt_box_raw[:, 2] * 4.0 + 10.0, y1 + gt_box_raw[:, 3] * 4.0 + 10.0), 1)
    gt_kpts = gt_kpt_raw.clone()
    gt_kpts[..., 0] = (gt_kpt_raw[..., 0] + 1.0) * 16.0
    gt_kpts[..., 1] = (gt_kpt_raw[..., 1] + 1.0) * 16.0
    gt_kpts[..., 2] = (gt_kpt_raw[..., 2] > -0.3).float() * 2.0

    pred_kpts = pred_kpt[0].transpose(0, 1).reshape(-1, *head["kpt_shape"])
    area = _ul_xyxy2xywh(gt_bboxes)[:, 2:].prod(1) * 0.53
    iou = _ul_kpt_iou(gt_kpts, pred_kpts, sigma=OKS_SIGMA, area=area)
    return pred_kpt, iou


def _lmu_state_space_matrices(memory_size, theta):
    """ Returns the discretized state space matrices A and B """
    Q = torch.arange(memory_size, dtype=torch.float64).reshape(-1, 1)
    R = (2 * Q + 1) / theta
    i, j = torch.meshgrid(Q[:, 0], Q[:, 0], indexing="ij")

    # Continuous
    A = R * torch.where(i < j, -1.0, (-1.0) ** (i - j + 1))
    B = R * ((-1.0) ** Q)

    # Convert to discrete (zero-order hold, dt 1): the exponential of the augmented matrix [[A, B], [0, 0]]
    em_upper = torch.cat((A, B), dim=1)
    em_lower = torch.cat((torch.zeros((B.shape[1], B.shape[0]), dtype=A.dtype),
                          torch.zeros((B.shape[1], B.shape[1]), dtype=A.dtype)), dim=1)
    em = torch.cat((em_upper, em_lower), dim=0)
    ms = torch.linalg.matrix_exp(1.0 * em)
    ms = ms[:A.shape[0], :]
    A = ms[:, :A.shape[1]]
    B = ms[:, A.shape[1]:]
    return A, B


def _lmu_cell_forward(self, x, state):
    h, m = state

    # Equation (7) of the paper
    u = F.linear(x, self["e_x"]) + F.linear(h, self["e_h"]) + F.linear(m, self["e_m"])  # [batch_size, 1]

    # Equation (4) of the paper
    m = F.linear(m, self["A"]) + F.linear(u, self["B"])  # [batch_size, memory_size]

    # Equation (6) of the paper
    h = self["f"](
        F.linear(x, self["W_x"]) +
        F.linear(h, self["W_h"]) +
        F.linear(m, self["W_m"])
    )  # [batch_size, hidden_size]

    return h, m


def _lmu_forward(self, x, state=None):
    batch_size = x.size(0)
    seq_len = x.size(1)

    # Initial state (h_0, m_0)
    if state == None:
        h_0 = torch.zeros(batch_size, self["hidden_size"]).to(self["device"])
        m_0 = torch.zeros(batch_size, self["memory_size"]).to(self["device"])
        state = (h_0, m_0)

    # Iterate over the timesteps
    output = []
    for t in range(seq_len):
        x_t = x[:, t, :]  # [batch_size, input_size]
        h_t, m_t = _lmu_cell_forward(self["cell"], x_t, state)
        state = (h_t, m_t)
        output.append(h_t)

    output = torch.stack(output)  # [seq_len, batch_size, hidden_size]
    output = output.permute(1, 0, 2)  # [batch_size, seq_len, hidden_size]

    return output, state  # state is (h_n, m_n) where n = seq_len


# Legendre Memory Unit (hrshtv/pytorch-lmu), src/lmu.py: LMUCell (stateSpaceMatrices, forward) and LMU.forward from
# no state (input 3, hidden 8, memory 4, theta 6; learn_a and learn_b False, so A and B are float32 buffers), batch 2,
# 5 steps; the modules as dicts, self.device "cpu". Deviation: stateSpaceMatrices builds A and B with numpy and
# discretizes with scipy.signal.cont2discrete(method="zoh"); here the same float64 construction is written with
# torch, and the zero-order hold as the matrix exponential of the augmented matrix [[A, B], [0, 0]] (what scipy's
# zoh computes, and how the pure-PyTorch LMU ports write it). Encoders and kernels are raw inputs scaled to the
# cell's init bounds (lecun-uniform encoders; e_m, zero at init, given small values)
def lmu(
    x: f32[2, 5, 3], e_x: f32[1, 3], e_h: f32[1, 8], e_m: f32[1, 4], W_x: f32[8, 3], W_h: f32[8, 8], W_m: f32[8, 4]
) -> tuple[f32[2, 5, 8], f32[2, 8], f32[2, 4]]:
    A, B = _lmu_state_space_matrices(4, 6)
    cell = {
        "hidden_size": 8, "memory_size": 4, "f": torch.tanh,
        "A": A.float(), "B": B.float(),
        "e_x": e_x * math.sqrt(3.0 / 3), "e_h": e_h * math.sqrt(3.0 / 8), "e_m": e_m * 0.1,
        "W_x": W_x * math.sqrt(2.0 / 11), "W_h": W_h * math.sqrt(2.0 / 16), "W_m": W_m * math.sqrt(2.0 / 12),
    }
    layer = {"hidden_size": 8, "memory_size": 4, "cell": cell,
             "device": "cuda" if torch.cuda.is_available() else "cpu"}
    output, (h_n, m_n) = _lmu_forward(layer, x)
    return output, h_n, m_n
