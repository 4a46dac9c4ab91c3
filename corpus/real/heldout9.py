"""Held-out real code, issue 14's ninth round (7 of 12 ran on every engine before the fixes of that round):
mmdetection's YOLOBBoxCoder and bbox2roi, YOLACT's mask post-processing, a multiplicative LSTM, a recurrent highway
network, GPT-2's attention with a past, a Mamba decode step, NovoGrad, AdaBound, SGD with gradient centralization,
Hugging Face's begin-suppression, and timm's ModelEmaV3. Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _yolo_encode(bboxes, gt_bboxes, stride, eps=1e-6):
    assert bboxes.size(0) == gt_bboxes.size(0)
    assert bboxes.size(-1) == gt_bboxes.size(-1) == 4
    x_center_gt = (gt_bboxes[..., 0] + gt_bboxes[..., 2]) * 0.5
    y_center_gt = (gt_bboxes[..., 1] + gt_bboxes[..., 3]) * 0.5
    w_gt = gt_bboxes[..., 2] - gt_bboxes[..., 0]
    h_gt = gt_bboxes[..., 3] - gt_bboxes[..., 1]
    x_center = (bboxes[..., 0] + bboxes[..., 2]) * 0.5
    y_center = (bboxes[..., 1] + bboxes[..., 3]) * 0.5
    w = bboxes[..., 2] - bboxes[..., 0]
    h = bboxes[..., 3] - bboxes[..., 1]
    w_target = torch.log((w_gt / w).clamp(min=eps))
    h_target = torch.log((h_gt / h).clamp(min=eps))
    x_center_target = ((x_center_gt - x_center) / stride + 0.5).clamp(eps, 1 - eps)
    y_center_target = ((y_center_gt - y_center) / stride + 0.5).clamp(eps, 1 - eps)
    encoded_bboxes = torch.stack([x_center_target, y_center_target, w_target, h_target], dim=-1)
    return encoded_bboxes


def _yolo_decode(bboxes, pred_bboxes, stride):
    assert pred_bboxes.size(-1) == bboxes.size(-1) == 4
    xy_centers = (bboxes[..., :2] + bboxes[..., 2:]) * 0.5 + (pred_bboxes[..., :2] - 0.5) * stride
    whs = (bboxes[..., 2:] - bboxes[..., :2]) * 0.5 * pred_bboxes[..., 2:].exp()
    decoded_bboxes = torch.stack(
        (xy_centers[..., 0] - whs[..., 0], xy_centers[..., 1] - whs[..., 1], xy_centers[..., 0] + whs[..., 0],
         xy_centers[..., 1] + whs[..., 1]),
        dim=-1)
    return decoded_bboxes


# mmdetection (open-mmlab/mmdetection), mmdet/core/bbox/coder/yolo_bbox_coder.py: YOLOBBoxCoder.encode and decode
# (stride 16; boxes made valid from the raw inputs)
def mmdet_yolo_bbox_coder(
    raw_anchors: f32[2, 30, 4], raw_gt: f32[2, 30, 4], pred: f32[2, 30, 4]
) -> tuple[f32[2, 30, 4], f32[2, 30, 4]]:
    anchors = torch.cat([raw_anchors[..., :2] * 50 + 60, raw_anchors[..., 2:].abs() * 40 + 120], dim=-1)
    gt = torch.cat([raw_gt[..., :2] * 50 + 60, raw_gt[..., 2:].abs() * 40 + 120], dim=-1)
    encoded = _yolo_encode(anchors, gt, 16)
    decoded = _yolo_decode(anchors, torch.sigmoid(pred), 16)
    return encoded, decoded


def _bbox2roi(bbox_list):
    rois_list = []
    for img_id, bboxes in enumerate(bbox_list):
        if bboxes.size(0) > 0:
            img_inds = bboxes.new_full((bboxes.size(0), 1), img_id)
            rois = torch.cat([img_inds, bboxes[:, :4]], dim=-1)
        else:
            rois = bboxes.new_zeros((0, 5))
        rois_list.append(rois)
    rois = torch.cat(rois_list, 0)
    return rois


# mmdetection, mmdet/core/bbox/transforms.py: bbox2roi over three images' proposals (with scores in a fifth column)
def mmdet_bbox2roi(a: f32[6, 5], b: f32[4, 5], c: f32[7, 4]) -> f32[17, 5]:
    return _bbox2roi([a, b, c])


def _sanitize_coordinates(_x1, _x2, img_size: int, padding: int = 0, cast: bool = True):
    _x1 = _x1 * img_size
    _x2 = _x2 * img_size
    if cast:
        _x1 = _x1.long()
        _x2 = _x2.long()
    x1 = torch.min(_x1, _x2)
    x2 = torch.max(_x1, _x2)
    x1 = torch.clamp(x1 - padding, min=0)
    x2 = torch.clamp(x2 + padding, max=img_size)

    return x1, x2


# YOLACT (dbolya/yolact), layers/output_utils.py: the mask and box part of postprocess (masks from prototypes,
# bilinear upsampling to the image, thresholded in place; boxes scaled and sanitized; image 24x32, 5 detections)
def yolact_postprocess_masks(
    proto_data: f32[12, 16, 8], coeffs: f32[5, 8], raw_boxes: f32[5, 4]
) -> tuple[f32[5, 24, 32], i64[5, 4]]:
    h, w = 24, 32
    interpolation_mode = 'bilinear'
    boxes = raw_boxes * 0.6 + 0.5
    masks = proto_data @ coeffs.t()
    masks = torch.sigmoid(masks)
    # Permute into the correct output shape [num_dets, proto_h, proto_w]
    masks = masks.permute(2, 0, 1).contiguous()
    # Scale masks up to the full image
    masks = F.interpolate(masks.unsqueeze(0), (h, w), mode=interpolation_mode, align_corners=False).squeeze(0)
    # Binarize the masks
    masks.gt_(0.5)
    boxes[:, 0], boxes[:, 2] = _sanitize_coordinates(boxes[:, 0], boxes[:, 2], w, cast=False)
    boxes[:, 1], boxes[:, 3] = _sanitize_coordinates(boxes[:, 1], boxes[:, 3], h, cast=False)
    boxes = boxes.long()
    return masks, boxes


# Multiplicative LSTM (Krause et al., 2016), guillitte/pytorch-sentiment-neuron models.py: mLSTM.forward and
# StackedLSTM.forward (2 layers, input 8, hidden 16, batch 2, 5 steps; dropout 0 in eval)
def mlstm_stacked(
    x: f32[5, 2, 8], wx0: f32[64, 8], wx1: f32[64, 16], wh: f32[2, 64, 16], bh: f32[2, 64], wmx0: f32[16, 8],
    wmx1: f32[16, 16], wmh: f32[2, 16, 16], h_0: f32[2, 2, 16], c_0: f32[2, 2, 16]
) -> tuple[f32[5, 2, 16], f32[2, 2, 16], f32[2, 2, 16]]:
    def layer(data, last_hidden, l):
        hx, cx = last_hidden
        wx = wx0 if l == 0 else wx1
        wmx = wmx0 if l == 0 else wmx1
        m = F.linear(data, wmx) * F.linear(hx, wmh[l])
        gates = F.linear(data, wx) + F.linear(m, wh[l], bh[l])
        i, f, o, u = gates.chunk(4, 1)
        i = F.sigmoid(i)
        f = F.sigmoid(f)
        u = F.tanh(u)
        o = F.sigmoid(o)
        cy = f * cx + i * u
        hy = o * F.tanh(cy)
        return hy, cy

    hidden = (h_0, c_0)
    outputs = []
    for t in range(x.size(0)):
        input = x[t]
        h_0, c_0 = hidden
        h_1, c_1 = [], []
        for i in range(2):
            h_1_i, c_1_i = layer(input, (h_0[i], c_0[i]), i)
            input = h_1_i
            if i != 2:
                input = F.dropout(input, p=0.0, training=False)
            h_1 += [h_1_i]
            c_1 += [c_1_i]
        h_1 = torch.stack(h_1)
        c_1 = torch.stack(c_1)
        hidden = (h_1, c_1)
        outputs.append(input)
    return torch.stack(outputs), hidden[0], hidden[1]


# Recurrent Highway Networks (Zilly et al., 2017), the RHN cell with coupled carry gate as PyTorch ports write it
# (depth 3, input 6, hidden 10, batch 2, 4 steps; the transform bias starts negative as in the paper)
def rhn(
    x: f32[4, 2, 6], w_h: f32[10, 6], w_t: f32[10, 6], r_h: f32[3, 10, 10], b_h: f32[3, 10], r_t: f32[3, 10, 10],
    b_t: f32[3, 10]
) -> tuple[f32[4, 2, 10], f32[2, 10]]:
    depth = 3
    s = torch.zeros(2, 10)
    out = []
    for step in range(x.shape[0]):
        input = x[step]
        for l in range(depth):
            if l == 0:
                h = torch.tanh(F.linear(input, w_h) + F.linear(s, r_h[l], b_h[l]))
                t = torch.sigmoid(F.linear(input, w_t) + F.linear(s, r_t[l], b_t[l] - 2.0))
            else:
                h = torch.tanh(F.linear(s, r_h[l], b_h[l]))
                t = torch.sigmoid(F.linear(s, r_t[l], b_t[l] - 2.0))
            c = 1 - t
            s = h * t + s * c
        out.append(s)
    return torch.stack(out), s


def _conv1d(x, weight, bias):
    size_out = x.size()[:-1] + (weight.size(-1),)
    x = torch.addmm(bias, x.view(-1, x.size(-1)), weight)
    x = x.view(size_out)
    return x


def _split_heads(tensor, num_heads, attn_head_size):
    new_shape = tensor.size()[:-1] + (num_heads, attn_head_size)
    tensor = tensor.view(new_shape)
    return tensor.permute(0, 2, 1, 3)  # (batch, head, seq_length, head_features)


def _merge_heads(tensor, num_heads, attn_head_size):
    tensor = tensor.permute(0, 2, 1, 3).contiguous()
    new_shape = tensor.size()[:-2] + (num_heads * attn_head_size,)
    return tensor.view(new_shape)


def _gpt2_attn(query, key, value, bias, attention_mask=None, head_mask=None, scale_attn_weights=True, layer_idx=0,
               scale_attn_by_inverse_layer_idx=False, is_cross_attention=False):
    attn_weights = torch.matmul(query, key.transpose(-1, -2))

    if scale_attn_weights:
        attn_weights = attn_weights / torch.full(
            [], value.size(-1) ** 0.5, dtype=attn_weights.dtype, device=attn_weights.device
        )

    # Layer-wise attention scaling
    if scale_attn_by_inverse_layer_idx:
        attn_weights = attn_weights / float(layer_idx + 1)

    if not is_cross_attention:
        # if only "normal" attention layer implements causal mask
        query_length, key_length = query.size(-2), key.size(-2)
        causal_mask = bias[:, :, key_length - query_length : key_length, :key_length]
        mask_value = torch.finfo(attn_weights.dtype).min
        # Need to be a tensor, otherwise we get error: `RuntimeError: expected scalar type float but found double`.
        # Need to be on the same device, otherwise `RuntimeError: ..., x and y to be on the same device`
        mask_value = torch.full([], mask_value, dtype=attn_weights.dtype, device=attn_weights.device)
        attn_weights = torch.where(causal_mask, attn_weights.to(attn_weights.dtype), mask_value)

    if attention_mask is not None:
        # Apply the attention mask
        attn_weights = attn_weights + attention_mask

    attn_weights = nn.functional.softmax(attn_weights, dim=-1)

    # Downcast (if necessary) back to V's dtype (if in mixed-precision) -- No-Op otherwise
    attn_weights = attn_weights.type(value.dtype)

    # Mask heads if we want to
    if head_mask is not None:
        attn_weights = attn_weights * head_mask

    attn_output = torch.matmul(attn_weights, value)

    return attn_output, attn_weights


# Hugging Face transformers, models/gpt2/modeling_gpt2.py: GPT2Attention.forward with layer_past and use_cache,
# Conv1D, _split_heads, _attn and _merge_heads (2 new tokens after 5 past ones, 4 heads of 8, max positions 16,
# layer 2 with scale_attn_by_inverse_layer_idx)
def hf_gpt2_attention_with_past(
    hidden_states: f32[2, 2, 32], c_attn_w: f32[32, 96], c_attn_b: f32[96], c_proj_w: f32[32, 32],
    c_proj_b: f32[32], past_key: f32[2, 4, 5, 8], past_value: f32[2, 4, 5, 8]
) -> tuple[f32[2, 2, 32], f32[2, 4, 7, 8], f32[2, 4, 7, 8]]:
    num_heads, head_dim, split_size, max_positions = 4, 8, 32, 16
    bias = torch.tril(torch.ones((max_positions, max_positions), dtype=torch.bool)).view(
        1, 1, max_positions, max_positions
    )
    layer_past = (past_key, past_value)
    query, key, value = _conv1d(hidden_states, c_attn_w, c_attn_b).split(split_size, dim=2)

    query = _split_heads(query, num_heads, head_dim)
    key = _split_heads(key, num_heads, head_dim)
    value = _split_heads(value, num_heads, head_dim)

    if layer_past is not None:
        past_key, past_value = layer_past
        key = torch.cat((past_key, key), dim=-2)
        value = torch.cat((past_value, value), dim=-2)

    present = (key, value)
    attn_output, attn_weights = _gpt2_attn(query, key, value, bias, layer_idx=2, scale_attn_by_inverse_layer_idx=True)

    attn_output = _merge_heads(attn_output, num_heads, head_dim)
    attn_output = _conv1d(attn_output, c_proj_w, c_proj_b)
    return attn_output, present[0], present[1]


# Mamba (state-spaces/mamba), mamba_ssm/modules/mamba_simple.py: Mamba.step without the fused kernels (d_model 8,
# expand 2, d_state 4, d_conv 4, dt_rank 2, batch 2); einops' rearrange written as squeeze/unsqueeze
def mamba_decode_step(
    hidden_states: f32[2, 1, 8], in_proj_w: f32[32, 8], conv_w: f32[16, 1, 4], conv_b: f32[16], x_proj_w: f32[10, 16],
    dt_proj_w: f32[16, 2], dt_proj_b: f32[16], A_log: f32[16, 4], D: f32[16], out_proj_w: f32[8, 16],
    conv_state: f32[2, 16, 4], ssm_state: f32[2, 16, 4]
) -> tuple[f32[2, 1, 8], f32[2, 16, 4], f32[2, 16, 4]]:
    dt_rank, d_state = 2, 4
    dtype = hidden_states.dtype
    assert hidden_states.shape[1] == 1, "Only support decoding with 1 token at a time for now"
    xz = F.linear(hidden_states.squeeze(1), in_proj_w)  # (B 2D)
    x, z = xz.chunk(2, dim=-1)  # (B D)

    # Conv step
    conv_state.copy_(torch.roll(conv_state, shifts=-1, dims=-1))  # Update state (B D W)
    conv_state[:, :, -1] = x
    x = torch.sum(conv_state * conv_w.squeeze(1), dim=-1)  # (B D)
    x = x + conv_b
    x = F.silu(x).to(dtype=dtype)

    x_db = F.linear(x, x_proj_w)  # (B dt_rank+2*d_state)
    dt, B, C = torch.split(x_db, [dt_rank, d_state, d_state], dim=-1)
    # Don't add dt_bias here
    dt = F.linear(dt, dt_proj_w)  # (B d_inner)
    A = -torch.exp(A_log.float())  # (d_inner, d_state)

    # SSM step
    # Discretize A and B
    dt = F.softplus(dt + dt_proj_b.to(dtype=dt.dtype))
    dA = torch.exp(torch.einsum("bd,dn->bdn", dt, A))
    dB = torch.einsum("bd,bn->bdn", dt, B)
    ssm_state.copy_(ssm_state * dA + x.unsqueeze(-1) * dB)
    y = torch.einsum("bdn,bn->bd", ssm_state.to(dtype), C)
    y = y + D.to(dtype) * x
    y = y * F.silu(z)  # (B D)

    out = F.linear(y, out_proj_w)
    return out.unsqueeze(1), conv_state, ssm_state


# NovoGrad (Ginsburg et al., 2019), NVIDIA DeepLearningExamples' novograd.py: Novograd.step with amsgrad and grad
# averaging (lr 0.01, betas (0.95, 0.98), weight decay 1e-3), three steps on two parameters; per-parameter state in a
# list of dicts; PyTorch's deprecated add_(scalar, tensor) overloads as the original writes them
def novograd_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    group = dict(lr=0.01, betas=(0.95, 0.98), eps=1e-8, weight_decay=1e-3, grad_averaging=True, amsgrad=True)
    states = [{}, {}]
    for k in range(3):
        for p, grad, state in zip([p1, p2], [grads1[k].clone(), grads2[k].clone()], states):
            amsgrad = group['amsgrad']
            # State initialization
            if len(state) == 0:
                state['step'] = 0
                # Exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(p.data)
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros([]).to(state['exp_avg'].device)
                if amsgrad:
                    # Maintains max of all exp. moving avg. of sq. grad. values
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
                # Maintains the maximum of all 2nd moment running avg. till now
                torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                # Use the max. for normalizing running avg. of gradient
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
    return p1, p2


# AdaBound (Luo et al., 2019), Luolc/AdaBound adabound/adabound.py: AdaBound.step with amsbound (lr 1e-3, final_lr
# 0.1, gamma 1e-3, weight decay 5e-4), three steps on one parameter; deprecated overloads as the original writes them
def adabound_steps(p: f32[8, 3], grads: f32[3, 8, 3]) -> f32[8, 3]:
    group = {'lr': 1e-3, 'betas': (0.9, 0.999), 'final_lr': 0.1, 'gamma': 1e-3, 'eps': 1e-8, 'weight_decay': 5e-4,
             'amsbound': True}
    base_lr = 1e-3
    state = {}
    for k in range(3):
        grad = grads[k]
        amsbound = group['amsbound']
        # State initialization
        if len(state) == 0:
            state['step'] = 0
            # Exponential moving average of gradient values
            state['exp_avg'] = torch.zeros_like(p.data)
            # Exponential moving average of squared gradient values
            state['exp_avg_sq'] = torch.zeros_like(p.data)
            if amsbound:
                # Maintains max of all exp. moving avg. of sq. grad. values
                state['max_exp_avg_sq'] = torch.zeros_like(p.data)

        exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
        if amsbound:
            max_exp_avg_sq = state['max_exp_avg_sq']
        beta1, beta2 = group['betas']

        state['step'] += 1

        if group['weight_decay'] != 0:
            grad = grad.add(group['weight_decay'], p.data)

        # Decay the first and second moment running average coefficient
        exp_avg.mul_(beta1).add_(1 - beta1, grad)
        exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
        if amsbound:
            # Maintains the maximum of all 2nd moment running avg. till now
            torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
            # Use the max. for normalizing running avg. of gradient
            denom = max_exp_avg_sq.sqrt().add_(group['eps'])
        else:
            denom = exp_avg_sq.sqrt().add_(group['eps'])

        bias_correction1 = 1 - beta1 ** state['step']
        bias_correction2 = 1 - beta2 ** state['step']
        step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1

        # Applies bounds on actual learning rate
        # lr_scheduler cannot affect final_lr, this is a workaround to apply lr decay
        final_lr = group['final_lr'] * group['lr'] / base_lr
        lower_bound = final_lr * (1 - 1 / (group['gamma'] * state['step'] + 1))
        upper_bound = final_lr * (1 + 1 / (group['gamma'] * state['step']))
        step_size = torch.full_like(denom, step_size)
        step_size.div_(denom).clamp_(lower_bound, upper_bound).mul_(exp_avg)

        p.data.add_(-step_size)
    return p


def _centralized_gradient(x, use_gc=True, gc_conv_only=False):
    if use_gc:
        if gc_conv_only:
            if len(list(x.size())) > 3:
                x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
        else:
            if len(list(x.size())) > 1:
                x.add_(-x.mean(dim=tuple(range(1, len(list(x.size())))), keepdim=True))
    return x


# Gradient Centralization (Yong et al., 2020), Yonghui1993/Gradient-Centralization's SGD_GC.step (momentum 0.9,
# nesterov, weight decay 1e-4), two steps on a conv weight and a bias
def sgd_gc_steps(
    w: f32[4, 3, 2, 2], b: f32[4], gw: f32[2, 4, 3, 2, 2], gb: f32[2, 4]
) -> tuple[f32[4, 3, 2, 2], f32[4]]:
    weight_decay, momentum, dampening, nesterov, lr = 1e-4, 0.9, 0.0, True, 0.05
    states = [{}, {}]
    for k in range(2):
        for p, g, param_state in zip([w, b], [gw[k].clone(), gb[k].clone()], states):
            d_p = g
            if weight_decay != 0:
                d_p.add_(weight_decay, p.data)

            # GC operation
            d_p = _centralized_gradient(d_p, use_gc=True, gc_conv_only=False)

            if momentum != 0:
                if 'momentum_buffer' not in param_state:
                    buf = param_state['momentum_buffer'] = torch.clone(d_p).detach()
                else:
                    buf = param_state['momentum_buffer']
                    buf.mul_(momentum).add_(1 - dampening, d_p)
                if nesterov:
                    d_p = d_p.add(momentum, buf)
                else:
                    d_p = buf

            p.data.add_(-lr, d_p)
    return w, b


def _isin_mps_friendly(elements, test_elements):
    if elements.device.type == "mps":
        test_elements = test_elements.to(elements.device)
        return elements.tile(test_elements.shape[0], 1).eq(test_elements.unsqueeze(1)).sum(dim=0).bool().squeeze()
    else:
        # Note: don't use named arguments in `torch.isin`, see https://github.com/pytorch/pytorch/issues/126045
        return torch.isin(elements, test_elements)


# Hugging Face transformers, generation/logits_process.py: SuppressTokensAtBeginLogitsProcessor.__call__ with
# isin_mps_friendly (begin index 4: suppressed for the 4-token prompt, not after one more token)
def hf_suppress_tokens_at_begin(
    input_ids: i64[2, 4], more_ids: i64[2, 5], scores: f32[2, 12]
) -> tuple[f32[2, 12], f32[2, 12]]:
    begin_suppress_tokens = torch.tensor([3, 7, 11])
    begin_index = 4
    out = []
    for ids in (input_ids, more_ids):
        vocab_tensor = torch.arange(scores.shape[-1], device=scores.device)
        suppress_token_mask = _isin_mps_friendly(vocab_tensor, begin_suppress_tokens)
        scores_processed = scores
        if ids.shape[-1] == begin_index:
            scores_processed = torch.where(suppress_token_mask, -float("inf"), scores)
        out.append(scores_processed)
    return out[0], out[1]


# timm (huggingface/pytorch-image-models), timm/utils/model_ema.py: ModelEmaV3.get_decay with warmup and
# update with _foreach_lerp_ (the state dicts as lists: a weight, a bias and an integer buffer), steps 5 and 40
def timm_model_ema_v3(
    ema_w: f32[6, 4], ema_b: f32[6], ema_n: i64[1], w: f32[6, 4], b: f32[6], n: i64[1]
) -> tuple[f32[6, 4], f32[6], i64[1]]:
    decay_cfg, min_decay, update_after_step, use_warmup, warmup_gamma, warmup_power = 0.9999, 0.0, 0, True, 1.0, 2 / 3

    def get_decay(step=None):
        if step is None:
            return decay_cfg

        step = max(0, step - update_after_step - 1)
        if step <= 0:
            return 0.0

        if use_warmup:
            decay = 1 - (1 + step / warmup_gamma) ** -warmup_power
            decay = max(min(decay, decay_cfg), min_decay)
        else:
            decay = decay_cfg

        return decay

    ema_state = [ema_w, ema_b, ema_n]
    model_state = [w, b, n]
    for step in (5, 40):
        decay = get_decay(step)
        ema_lerp_values = []
        model_lerp_values = []
        for ema_v, model_v in zip(ema_state, model_state):
            if ema_v.is_floating_point():
                ema_lerp_values.append(ema_v)
                model_lerp_values.append(model_v)
            else:
                ema_v.copy_(model_v)

        if hasattr(torch, '_foreach_lerp_'):
            torch._foreach_lerp_(ema_lerp_values, model_lerp_values, weight=1. - decay)
        else:
            torch._foreach_mul_(ema_lerp_values, scalar=decay)
            torch._foreach_add_(ema_lerp_values, model_lerp_values, alpha=1. - decay)
    return ema_w, ema_b, ema_n
