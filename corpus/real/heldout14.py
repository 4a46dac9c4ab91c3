"""Held-out real code, issue 14's fourteenth round: detectron2's diou_loss and ciou_loss, mmdetection's TBLRBBoxCoder
(bboxes2tblr, tblr2bboxes), Ultralytics' DFL integral, flash-linear-attention's naive_recurrent_gsa and
naive_recurrent_gated_delta_rule, lucidrains' minLSTM (parallel and sequential), vLLM's grouped_topk, ChatGLM2's
RotaryEmbedding and apply_rotary_pos_emb, timm's adaptive_clip_grad, torch-optimizer's QHM and timm's LaProp (the
round's Medusa evaluate_posterior is in tests/real_pending/heldout_r14.py). Inputs arrive uniform in [-1, 1);
integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import Tensor


def _d2_diou_loss(
    boxes1: torch.Tensor,
    boxes2: torch.Tensor,
    reduction: str = "none",
    eps: float = 1e-7,
) -> torch.Tensor:
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)

    # TODO: use torch._assert_async() when pytorch 1.8 support is dropped
    assert (x2 >= x1).all(), "bad box: x1 larger than x2"
    assert (y2 >= y1).all(), "bad box: y1 larger than y2"

    # Intersection keypoints
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)

    intsct = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsct[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    union = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsct + eps
    iou = intsct / union

    # smallest enclosing box
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)
    diag_len = ((xc2 - xc1) ** 2) + ((yc2 - yc1) ** 2) + eps

    # centers of boxes
    x_p = (x2 + x1) / 2
    y_p = (y2 + y1) / 2
    x_g = (x1g + x2g) / 2
    y_g = (y1g + y2g) / 2
    distance = ((x_p - x_g) ** 2) + ((y_p - y_g) ** 2)

    # Eqn. (7)
    loss = 1 - iou + (distance / diag_len)
    if reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()

    return loss


def _d2_ciou_loss(
    boxes1: torch.Tensor,
    boxes2: torch.Tensor,
    reduction: str = "none",
    eps: float = 1e-7,
) -> torch.Tensor:
    x1, y1, x2, y2 = boxes1.unbind(dim=-1)
    x1g, y1g, x2g, y2g = boxes2.unbind(dim=-1)

    # TODO: use torch._assert_async() when pytorch 1.8 support is dropped
    assert (x2 >= x1).all(), "bad box: x1 larger than x2"
    assert (y2 >= y1).all(), "bad box: y1 larger than y2"

    # Intersection keypoints
    xkis1 = torch.max(x1, x1g)
    ykis1 = torch.max(y1, y1g)
    xkis2 = torch.min(x2, x2g)
    ykis2 = torch.min(y2, y2g)

    intsct = torch.zeros_like(x1)
    mask = (ykis2 > ykis1) & (xkis2 > xkis1)
    intsct[mask] = (xkis2[mask] - xkis1[mask]) * (ykis2[mask] - ykis1[mask])
    union = (x2 - x1) * (y2 - y1) + (x2g - x1g) * (y2g - y1g) - intsct + eps
    iou = intsct / union

    # smallest enclosing box
    xc1 = torch.min(x1, x1g)
    yc1 = torch.min(y1, y1g)
    xc2 = torch.max(x2, x2g)
    yc2 = torch.max(y2, y2g)
    diag_len = ((xc2 - xc1) ** 2) + ((yc2 - yc1) ** 2) + eps

    # centers of boxes
    x_p = (x2 + x1) / 2
    y_p = (y2 + y1) / 2
    x_g = (x1g + x2g) / 2
    y_g = (y1g + y2g) / 2
    distance = ((x_p - x_g) ** 2) + ((y_p - y_g) ** 2)

    # width and height of boxes
    w_pred = x2 - x1
    h_pred = y2 - y1
    w_gt = x2g - x1g
    h_gt = y2g - y1g
    v = (4 / (math.pi ** 2)) * torch.pow(
        (torch.atan(w_gt / h_gt) - torch.atan(w_pred / h_pred)), 2
    )
    with torch.no_grad():
        alpha = v / (1 - iou + v + eps)

    # Eqn. (10)
    loss = 1 - iou + (distance / diag_len) + alpha * v
    if reduction == "mean":
        loss = loss.mean() if loss.numel() > 0 else 0.0 * loss.sum()
    elif reduction == "sum":
        loss = loss.sum()

    return loss


# detectron2 (facebookresearch/detectron2), detectron2/layers/losses.py: diou_loss (reductions "none" and "sum") and
# ciou_loss (reduction "mean"), eps 1e-7; XYXY boxes made valid from the raw inputs (corners in [0, 8), sides in
# [1, 5)) so that the asserts hold and some pairs overlap; the two reduced losses stacked
def d2_diou_ciou_loss(raw1: f32[12, 4], raw2: f32[12, 4]) -> tuple[f32[12], f32[2]]:
    xy1 = raw1[:, :2] * 4 + 4
    xy2 = raw2[:, :2] * 2 + xy1
    boxes1 = torch.cat([xy1, xy1 + raw1[:, 2:].abs() * 4 + 1], dim=-1)
    boxes2 = torch.cat([xy2, xy2 + raw2[:, 2:].abs() * 4 + 1], dim=-1)
    return _d2_diou_loss(boxes1, boxes2), torch.stack([_d2_ciou_loss(boxes1, boxes2, reduction="mean"),
                                                       _d2_diou_loss(boxes1, boxes2, reduction="sum")])


def _bboxes2tblr(priors: Tensor,
                 gts: Tensor,
                 normalizer: Union[Sequence[float], float] = 4.0,
                 normalize_by_wh: bool = True) -> Tensor:
    # dist b/t match center and prior's center
    if not isinstance(normalizer, float):
        normalizer = torch.tensor(normalizer, device=priors.device)
        assert len(normalizer) == 4, 'Normalizer must have length = 4'
    assert priors.size(0) == gts.size(0)
    prior_centers = (priors[:, 0:2] + priors[:, 2:4]) / 2
    xmin, ymin, xmax, ymax = gts.split(1, dim=1)
    top = prior_centers[:, 1].unsqueeze(1) - ymin
    bottom = ymax - prior_centers[:, 1].unsqueeze(1)
    left = prior_centers[:, 0].unsqueeze(1) - xmin
    right = xmax - prior_centers[:, 0].unsqueeze(1)
    loc = torch.cat((top, bottom, left, right), dim=1)
    if normalize_by_wh:
        # Normalize tblr by anchor width and height
        wh = priors[:, 2:4] - priors[:, 0:2]
        w, h = torch.split(wh, 1, dim=1)
        loc[:, :2] /= h  # tb is normalized by h
        loc[:, 2:] /= w  # lr is normalized by w
    # Normalize tblr by the given normalization factor
    return loc / normalizer


def _tblr2bboxes(priors: Tensor,
                 tblr: Tensor,
                 normalizer: Union[Sequence[float], float] = 4.0,
                 normalize_by_wh: bool = True,
                 max_shape=None,
                 clip_border: bool = True) -> Tensor:
    if not isinstance(normalizer, float):
        normalizer = torch.tensor(normalizer, device=priors.device)
        assert len(normalizer) == 4, 'Normalizer must have length = 4'
    assert priors.size(0) == tblr.size(0)
    if priors.ndim == 3:
        assert priors.size(1) == tblr.size(1)

    loc_decode = tblr * normalizer
    prior_centers = (priors[..., 0:2] + priors[..., 2:4]) / 2
    if normalize_by_wh:
        wh = priors[..., 2:4] - priors[..., 0:2]
        w, h = torch.split(wh, 1, dim=-1)
        # Inplace operation with slice would failed for exporting to ONNX
        th = h * loc_decode[..., :2]  # tb
        tw = w * loc_decode[..., 2:]  # lr
        loc_decode = torch.cat([th, tw], dim=-1)
    # Cannot be exported using onnx when loc_decode.split(1, dim=-1)
    top, bottom, left, right = loc_decode.split((1, 1, 1, 1), dim=-1)
    xmin = prior_centers[..., 0].unsqueeze(-1) - left
    xmax = prior_centers[..., 0].unsqueeze(-1) + right
    ymin = prior_centers[..., 1].unsqueeze(-1) - top
    ymax = prior_centers[..., 1].unsqueeze(-1) + bottom

    bboxes = torch.cat((xmin, ymin, xmax, ymax), dim=-1)

    if clip_border and max_shape is not None:
        if not isinstance(max_shape, torch.Tensor):
            max_shape = priors.new_tensor(max_shape)
        max_shape = max_shape[..., :2].type_as(priors)
        if max_shape.ndim == 2:
            assert bboxes.ndim == 3
            assert max_shape.size(0) == bboxes.size(0)

        min_xy = priors.new_tensor(0)
        max_xy = torch.cat([max_shape, max_shape],
                           dim=-1).flip(-1).unsqueeze(-2)
        bboxes = torch.where(bboxes < min_xy, min_xy, bboxes)
        bboxes = torch.where(bboxes > max_xy, max_xy, bboxes)

    return bboxes


# mmdetection (open-mmlab/mmdetection), mmdet/models/task_modules/coders/tblr_bbox_coder.py: bboxes2tblr (float
# normalizer 4.0) and tblr2bboxes (list normalizer [4, 4, 2, 2] made a tensor, batched priors of two images with
# max_shape [(40, 48, 3), (32, 56, 3)], clip_border), as TBLRBBoxCoder.encode and decode call them (the
# torch.onnx.is_in_onnx_export() branch left out); priors and gts made valid xyxy boxes from the raw inputs
def mmdet_tblr_bbox_coder(
    raw_priors: f32[2, 10, 4], raw_gts: f32[10, 4], tblr_pred: f32[2, 10, 4]
) -> tuple[f32[10, 4], f32[2, 10, 4]]:
    pxy = (raw_priors[..., :2] + 1) * 20
    priors = torch.cat([pxy, pxy + raw_priors[..., 2:].abs() * 16 + 4], dim=-1)
    gxy = pxy[0] + raw_gts[:, :2] * 4
    gts = torch.cat([gxy, gxy + raw_gts[:, 2:].abs() * 16 + 4], dim=-1)
    encoded = _bboxes2tblr(priors[0], gts, normalizer=4.0)
    decoded = _tblr2bboxes(priors, tblr_pred, normalizer=[4.0, 4.0, 2.0, 2.0],
                           max_shape=[(40, 48, 3), (32, 56, 3)], clip_border=True)
    return encoded, decoded


def _dfl_init(c1=16):
    """Initialize a convolutional layer with a given number of input channels."""
    self = {}
    self['conv_weight'] = torch.zeros(1, c1, 1, 1)  # nn.Conv2d(c1, 1, 1, bias=False).requires_grad_(False)
    x = torch.arange(c1, dtype=torch.float)
    self['conv_weight'].data[:] = x.view(1, c1, 1, 1)
    self['c1'] = c1
    return self


def _dfl_forward(self, x):
    """Applies a transformer layer on input tensor 'x' and returns a tensor."""
    b, c, a = x.shape  # batch, channels, anchors
    return F.conv2d(x.view(b, 4, self['c1'], a).transpose(2, 1).softmax(1), self['conv_weight']).view(b, 4, a)
    # return self.conv(x.view(b, self.c1, 4, a).softmax(1)).view(b, 4, a)


# Ultralytics (ultralytics/ultralytics), ultralytics/nn/modules/block.py: DFL.__init__ and DFL.forward (c1 16; the
# frozen bias-free 1x1 nn.Conv2d as F.conv2d with its arange weight, the module as a dict), on a head's box branch of 2
# images and 30 anchors, logits scaled by 3
def ultralytics_dfl(box: f32[2, 64, 30]) -> f32[2, 4, 30]:
    dfl = _dfl_init(16)
    return _dfl_forward(dfl, box * 3)


def _naive_recurrent_gsa(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    s: torch.Tensor,
    g: torch.Tensor | None = None,
    scale: int | None = None,
    initial_state: torch.Tensor | None = None,
    output_final_state: bool | None = False,
) -> torch.Tensor:
    dtype = q.dtype
    q, k, v, s, g = (x.transpose(1, 2).contiguous().float() for x in (q, k, v, s, g))

    NG = q.shape[1]//k.shape[1]
    # [batch_size, n_heads, seq_len, n_slots]
    if g is None:
        z = s.float().logcumsumexp(2)
        g = torch.cat((z[:, :, :1], z[:, :, :-1]), 2) - z
        s = torch.exp(s - z)
    k, v, s, g = (x.repeat_interleave(NG, dim=1) for x in (k, v, s, g))
    if initial_state is not None:
        initial_state = tuple(x.repeat_interleave(NG, dim=1) for x in initial_state)

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
    ov = ov.transpose(1, 2).contiguous()
    return ov.to(dtype), final_state


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/gsa/naive.py: naive_recurrent_gsa with an initial
# state and the final state ([B, T, H, *] layout; batch 2, 6 steps, 2 heads, key and value dims 8, 4 slots); einops'
# repeat 'b h t d -> b (h g) t d' written as repeat_interleave over the heads; the forget gate and slot input made as
# GatedSlotAttention makes them (f = logsigmoid, s = 1 - exp(f), g = f)
def fla_naive_recurrent_gsa(
    q: f32[2, 6, 2, 8], k: f32[2, 6, 2, 8], v: f32[2, 6, 2, 8], f_raw: f32[2, 6, 2, 4],
    hk0: f32[2, 2, 8, 4], hv0: f32[2, 2, 4, 8]
) -> tuple[f32[2, 6, 2, 8], f32[2, 2, 8, 4], f32[2, 2, 4, 8]]:
    f = F.logsigmoid(f_raw * 2)
    s = 1 - f.exp()
    o, (hk, hv) = _naive_recurrent_gsa(q, k, v, s, f, initial_state=(hk0 * 0.5, hv0 * 0.5), output_final_state=True)
    return o, hk, hv


def _run_recurrent_gated_delta_rule_single_sequence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor,
    scale: float,
    h: torch.Tensor,
):
    H, T, K = q.shape
    V = v.shape[-1]
    o = torch.zeros(H, T, V, device=v.device, dtype=torch.float32)

    for i in range(T):
        b_q = q[:, i]
        b_k = k[:, i]
        b_v = v[:, i]
        h = h * g[:, i].exp()[:, None, None]
        delta = beta[:, i, None] * (b_v - (h * b_k[..., None]).sum(-2))
        h = h + b_k.unsqueeze(-1) * delta.unsqueeze(-2)
        o[:, i] = torch.einsum('hk,hkv->hv', b_q * scale, h)
    return o, h


def _naive_recurrent_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    beta: torch.Tensor,
    g: torch.Tensor,
    scale: float = None,
    initial_state: torch.Tensor = None,
    output_final_state: bool = False,
):
    orig_dtype = v.dtype
    q, k, v, beta, g = map(lambda x: x.transpose(1, 2).contiguous().to(torch.float32), [q, k, v, beta, g])
    B, H, T, K, V = *k.shape, v.shape[-1]
    if scale is None:
        scale = q.shape[-1] ** -0.5

    o = torch.zeros(B, H, T, V, device=v.device, dtype=torch.float32)
    h = torch.zeros(B, H, K, V, device=v.device, dtype=torch.float32)
    if initial_state is not None:
        h = initial_state.to(torch.float32)

    for b in range(B):
        o[b], h[b] = _run_recurrent_gated_delta_rule_single_sequence(
            q=q[b],
            k=k[b],
            v=v[b],
            beta=beta[b],
            g=g[b],
            scale=scale,
            h=h[b],
        )

    if not output_final_state:
        h = None
    o = o.transpose(1, 2).contiguous().to(orig_dtype)
    return o, h


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/gated_delta_rule/naive.py:
# naive_recurrent_gated_delta_rule and _run_recurrent_gated_delta_rule_single_sequence with an initial state and the
# final state ([B, T, H, K] layout; batch 2, 6 steps, 2 heads, key and value dims 8); keys L2-normalized, beta a
# sigmoid and the gate in log space through logsigmoid, as GatedDeltaNet feeds it
def fla_naive_recurrent_gated_delta_rule(
    q: f32[2, 6, 2, 8], k: f32[2, 6, 2, 8], v: f32[2, 6, 2, 8], beta_raw: f32[2, 6, 2], g_raw: f32[2, 6, 2],
    h0: f32[2, 2, 8, 8]
) -> tuple[f32[2, 6, 2, 8], f32[2, 2, 8, 8]]:
    k = F.normalize(k, p=2, dim=-1)
    beta = beta_raw.sigmoid()
    g = F.logsigmoid(g_raw * 2 + 2)
    return _naive_recurrent_gated_delta_rule(q, k, v, beta, g, initial_state=h0 * 0.5, output_final_state=True)


def _mingru_exists(v):
    return v is not None


def _mingru_default(v, d):
    return v if _mingru_exists(v) else d


def _heinsen_associative_scan_log(log_coeffs, log_values):
    a_star = log_coeffs.cumsum(dim = 1)
    log_h0_plus_b_star = (log_values - a_star).logcumsumexp(dim = 1)
    log_h = a_star + log_h0_plus_b_star
    return log_h.exp()


def _mingru_g(x):
    return torch.where(x >= 0, x + 0.5, x.sigmoid())


def _mingru_log_g(x):
    return torch.where(x >= 0, (F.relu(x) + 0.5).log(), -F.softplus(-x))


def _min_lstm_forward(self, x, prev_hidden = None, return_next_prev_hidden = False):
    seq_len = x.shape[1]
    hidden, f_gate, i_gate = F.linear(x, self['to_hidden_and_f_i_gate']).chunk(3, dim = -1)

    if seq_len == 1:
        # handle sequential

        hidden = _mingru_g(hidden)
        f_gate = f_gate.sigmoid()
        i_gate = i_gate.sigmoid()
        f_gate_prime = f_gate/(f_gate + i_gate)
        i_gate_prime = i_gate/(f_gate + i_gate)
        out = (
            (prev_hidden * f_gate_prime) + (hidden * i_gate_prime) if _mingru_exists(prev_hidden)
            else (hidden * i_gate_prime)
        )
    else:
        # parallel

        diff = F.softplus(-f_gate) - F.softplus(-i_gate)

        log_f = -F.softplus(diff)
        log_i = -F.softplus(-diff)

        log_h_0 = -F.softplus(log_f)

        log_tilde_h = _mingru_log_g(hidden)
        log_values = log_i + log_tilde_h

        if _mingru_exists(prev_hidden):
            log_h_0 = _mingru_log_g(prev_hidden)
            log_values = torch.cat((log_h_0, log_values), dim = 1)
            log_f = F.pad(log_f, (0, 0, 1, 0))

        out = _heinsen_associative_scan_log(log_f, log_values)
        out = out[:, -seq_len:]

    next_prev_hidden = out[:, -1:]

    out = F.linear(out, self['to_out']) if self['proj_out'] else out

    if not return_next_prev_hidden:
        return out

    return out, next_prev_hidden


# minGRU-pytorch (lucidrains), minGRU_pytorch/minLSTM.py: minLSTM.forward, its parallel branch over a 5-step prompt
# with a previous hidden state, then its sequential branch for one more step from the returned next_prev_hidden
# (dim 8, expansion_factor 1.5, so proj_out; return_next_prev_hidden True), with minGRU.py's exists, default, g, log_g
# and heinsen_associative_scan_log; bias-free nn.Linear as F.linear at nn.Linear's init scale, the module as a dict
def min_lstm(
    x: f32[2, 5, 8], x_next: f32[2, 1, 8], prev_hidden: f32[2, 1, 12], w_hfi: f32[36, 8], w_out: f32[8, 12]
) -> tuple[f32[2, 5, 8], f32[2, 1, 12], f32[2, 1, 8], f32[2, 1, 12]]:
    dim, expansion_factor = 8, 1.5
    dim_inner = int(dim * expansion_factor)
    proj_out = _mingru_default(None, expansion_factor != 1.)
    self = dict(to_hidden_and_f_i_gate=w_hfi * dim ** -0.5, to_out=w_out * dim_inner ** -0.5, proj_out=proj_out)
    out, next_prev_hidden = _min_lstm_forward(self, x * 2, prev_hidden.abs(), return_next_prev_hidden=True)
    out2, next2 = _min_lstm_forward(self, x_next * 2, next_prev_hidden, return_next_prev_hidden=True)
    return out, next_prev_hidden, out2, next2


def _vllm_grouped_topk(
    hidden_states: torch.Tensor,
    gating_output: torch.Tensor,
    topk: int,
    renormalize: bool,
    num_expert_group: int = 0,
    topk_group: int = 0,
    scoring_func: str = "softmax",
    e_score_correction_bias: Optional[torch.Tensor] = None
):

    assert hidden_states.shape[0] == gating_output.shape[0], (
        "Number of tokens mismatch")

    if scoring_func == "softmax":
        scores = torch.softmax(gating_output, dim=-1)
    elif scoring_func == "sigmoid":
        scores = gating_output.sigmoid()
    else:
        raise ValueError(f"Unsupported scoring function: {scoring_func}")

    num_token = scores.shape[0]
    if e_score_correction_bias is not None:
        # Store original scores before applying correction bias. We use biased
        # scores for expert selection but original scores for routing weights
        original_scores = scores
        scores = scores + e_score_correction_bias.unsqueeze(0)
        group_scores = (scores.view(num_token, num_expert_group,
                                    -1).topk(2, dim=-1)[0].sum(dim=-1))
    else:
        group_scores = scores.view(num_token, num_expert_group,
                                   -1).max(dim=-1).values  # [n, n_group]
    group_idx = torch.topk(group_scores, k=topk_group, dim=-1,
                           sorted=False)[1]  # [n, top_k_group]
    group_mask = torch.zeros_like(group_scores)  # [n, n_group]
    group_mask.scatter_(1, group_idx, 1)  # [n, n_group]
    score_mask = group_mask.unsqueeze(-1).expand(
        num_token, num_expert_group,
        scores.shape[-1] // num_expert_group).reshape(num_token, -1)  # [n, e]
    tmp_scores = scores.masked_fill(~score_mask.bool(),
                                    float("-inf"))  # [n, e]

    if e_score_correction_bias is not None:
        topk_ids = torch.topk(tmp_scores, k=topk, dim=-1, sorted=False)[1]
        # Use original unbiased scores for the routing weights
        topk_weights = original_scores.gather(1, topk_ids)
    else:
        topk_weights, topk_ids = torch.topk(tmp_scores,
                                            k=topk,
                                            dim=-1,
                                            sorted=False)

    if renormalize:
        topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)

    return topk_weights.to(torch.float32), topk_ids.to(torch.int32)


# vLLM (vllm-project/vllm), vllm/model_executor/layers/fused_moe/fused_moe.py: grouped_topk (its @torch.compile
# decorator left out), as DeepSeek-V3 calls it (sigmoid scores with e_score_correction_bias, 16 experts in 4 groups,
# top 2 groups, top 4, renormalize) and as DeepSeek-V2 does (softmax, no bias, top 3); 6 tokens. topk(sorted=False)
# leaves the order of the k picks to the implementation, so each result is put in expert order (sort, gather)
def vllm_grouped_topk(
    hidden_states: f32[6, 16], gating_output: f32[6, 16], bias: f32[16]
) -> tuple[f32[6, 4], i32[6, 4], f32[6, 3], i32[6, 3]]:
    w1, ids1 = _vllm_grouped_topk(hidden_states, gating_output * 3, 4, True, num_expert_group=4, topk_group=2,
                                  scoring_func="sigmoid", e_score_correction_bias=bias * 0.1)
    w2, ids2 = _vllm_grouped_topk(hidden_states, gating_output * 3, 3, True, num_expert_group=4, topk_group=2)
    ids1, order1 = ids1.sort(dim=-1)
    ids2, order2 = ids2.sort(dim=-1)
    return w1.gather(1, order1), ids1, w2.gather(1, order2), ids2


def _chatglm_rotary_init(dim, original_impl=False, device=None, dtype=None):
    self = {}
    inv_freq = 1.0 / (10000 ** (torch.arange(0, dim, 2, device=device).to(dtype=dtype) / dim))
    self['inv_freq'] = inv_freq  # self.register_buffer("inv_freq", inv_freq)
    self['dim'] = dim
    self['original_impl'] = original_impl
    return self


def _chatglm_rotary_forward_impl(
        self, seq_len: int, n_elem: int, dtype: torch.dtype, device: torch.device, base: int = 10000
):
    # $\Theta = {\theta_i = 10000^{\frac{2(i-1)}{d}}, i \in [1, 2, ..., \frac{d}{2}]}$
    theta = 1.0 / (base ** (torch.arange(0, n_elem, 2, dtype=torch.float, device=device) / n_elem))

    # Create position indexes `[0, 1, ..., seq_len - 1]`
    seq_idx = torch.arange(seq_len, dtype=torch.float, device=device)

    # Calculate the product of position index and $\theta_i$
    idx_theta = torch.outer(seq_idx, theta).float()

    cache = torch.stack([torch.cos(idx_theta), torch.sin(idx_theta)], dim=-1)

    # this is to mimic the behaviour of complex32, else we will get different results
    if dtype in (torch.float16, torch.bfloat16, torch.int8):
        cache = cache.bfloat16() if dtype == torch.bfloat16 else cache.half()
    return cache


def _chatglm_rotary_forward(self, max_seq_len, offset=0):
    return _chatglm_rotary_forward_impl(
        self, max_seq_len, self['dim'], dtype=self['inv_freq'].dtype, device=self['inv_freq'].device
    )


def _chatglm_apply_rotary_pos_emb(x: torch.Tensor, rope_cache: torch.Tensor) -> torch.Tensor:
    # x: [sq, b, np, hn]
    sq, b, np, hn = x.size(0), x.size(1), x.size(2), x.size(3)
    rot_dim = rope_cache.shape[-2] * 2
    x, x_pass = x[..., :rot_dim], x[..., rot_dim:]
    # truncate to support variable sizes
    rope_cache = rope_cache[:sq]
    xshaped = x.reshape(sq, -1, np, rot_dim // 2, 2)
    rope_cache = rope_cache.view(sq, -1, 1, xshaped.size(3), 2)
    x_out2 = torch.stack(
        [
            xshaped[..., 0] * rope_cache[..., 0] - xshaped[..., 1] * rope_cache[..., 1],
            xshaped[..., 1] * rope_cache[..., 0] + xshaped[..., 0] * rope_cache[..., 1],
        ],
        -1,
    )
    x_out2 = x_out2.flatten(3)
    return torch.cat((x_out2, x_pass), dim=-1)


# ChatGLM2-6B (THUDM), modeling_chatglm.py: RotaryEmbedding (__init__, forward, forward_impl) and
# apply_rotary_pos_emb (its @torch.jit.script decorator left out), driven as ChatGLMModel.forward and
# SelfAttention.forward drive them: RotaryEmbedding(kv_channels // 2) over seq_length 16, indexed by position_ids
# and transposed to [sq, b, ...]; query [sq 5, b 2, 4 heads, 16] and multi-query key [5, 2, 2 groups, 16], half of
# each head rotated in interleaved pairs; the module as a dict of its attributes
def chatglm_rotary_pos_emb(
    query_layer: f32[5, 2, 4, 16], key_layer: f32[5, 2, 2, 16], position_ids: i64[2, 5]
) -> tuple[f32[5, 2, 4, 16], f32[5, 2, 2, 16]]:
    kv_channels, seq_length = 16, 16
    rotary_dim = kv_channels
    rotary = _chatglm_rotary_init(rotary_dim // 2, original_impl=True, dtype=torch.float32)
    rotary_pos_emb = _chatglm_rotary_forward(rotary, seq_length)
    if position_ids is not None:
        rotary_pos_emb = rotary_pos_emb[position_ids]
    else:
        rotary_pos_emb = rotary_pos_emb[None, :5]
    rotary_pos_emb = rotary_pos_emb.transpose(0, 1).contiguous()
    query_layer = _chatglm_apply_rotary_pos_emb(query_layer, rotary_pos_emb)
    key_layer = _chatglm_apply_rotary_pos_emb(key_layer, rotary_pos_emb)
    return query_layer, key_layer


def _unitwise_norm(x, norm_type=2.0):
    if x.ndim <= 1:
        return x.norm(norm_type)
    else:
        # works for nn.ConvNd and nn,Linear where output dim is first in the kernel/weight tensor
        # might need special cases for other weights (possibly MHA) where this may not be true
        return x.norm(norm_type, dim=tuple(range(1, x.ndim)), keepdim=True)


def _adaptive_clip_grad(parameters, grads, clip_factor=0.01, eps=1e-3, norm_type=2.0):
    if isinstance(parameters, torch.Tensor):
        parameters = [parameters]
    for p, p_grad in zip(parameters, grads):
        if p_grad is None:
            continue
        p_data = p.detach()
        g_data = p_grad.detach()
        max_norm = _unitwise_norm(p_data, norm_type=norm_type).clamp_(min=eps).mul_(clip_factor)
        grad_norm = _unitwise_norm(g_data, norm_type=norm_type)
        clipped_grad = g_data * (max_norm / grad_norm.clamp(min=1e-6))
        new_grads = torch.where(grad_norm < max_norm, g_data, clipped_grad)
        p_grad.detach().copy_(new_grads)


# timm (huggingface/pytorch-image-models), timm/utils/agc.py: unitwise_norm and adaptive_clip_grad (clip factor 0.05,
# eps 1e-3, L2) on a conv weight, a linear weight and a bias; `p.grad` is the matching gradient input, passed
# alongside the parameters (`for p in parameters: ... p.grad` becomes a zip), written in place as the original writes
# p.grad; the gradients scaled per output unit so that some units clip and others do not
def timm_adaptive_clip_grad(
    conv_w: f32[4, 3, 3, 3], lin_w: f32[6, 8], lin_b: f32[6],
    g_conv: f32[4, 3, 3, 3], g_lin: f32[6, 8], g_b: f32[6]
) -> tuple[f32[4, 3, 3, 3], f32[6, 8], f32[6]]:
    scale = torch.tensor([0.01, 0.1, 0.02, 0.005, 0.2, 0.03])
    g_conv = g_conv * scale[:4, None, None, None]
    g_lin = g_lin * scale[:, None]
    g_b = g_b * 0.1
    _adaptive_clip_grad([conv_w, lin_w, lin_b], [g_conv, g_lin, g_b], clip_factor=0.05)
    return g_conv, g_lin, g_b


# QHM (Ma and Yarats, 2019), torch-optimizer (jettify/pytorch-optimizer), torch_optimizer/qhm.py: QHM.step with two
# param groups (lr 0.1, momentum 0.9, nu 0.7, weight decay 1e-2; the first with weight_decay_type 'grad', the second
# 'direct'), three steps on one parameter each; p.grad is each step's gradient slice, which the 'grad' weight decay
# updates in place as the original does to p.grad.data; state as a list of dicts; deprecated add_(scalar, tensor)
# overloads as the original writes them
def qhm_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    GRAD = 'grad'
    DIRECT = 'direct'
    param_groups = [
        dict(params=[p1], grads=grads1, lr=0.1, momentum=0.9, nu=0.7, weight_decay=1e-2, weight_decay_type=GRAD),
        dict(params=[p2], grads=grads2, lr=0.1, momentum=0.9, nu=0.7, weight_decay=1e-2, weight_decay_type=DIRECT),
    ]
    state = [{}, {}]
    for k in range(3):
        for gi, group in enumerate(param_groups):
            lr, nu, momentum = group['lr'], group['nu'], group['momentum']
            weight_decay, weight_decay_type = (
                group['weight_decay'],
                group['weight_decay_type'],
            )

            for p in group['params']:
                grad = group['grads'][k]
                if grad is None:
                    continue
                d_p = grad.data
                param_state = state[gi]

                if weight_decay != 0:
                    if weight_decay_type == GRAD:
                        d_p.add_(weight_decay, p.data)
                    else:
                        p.data.mul_(1.0 - lr * weight_decay)

                if len(param_state) == 0:
                    param_state['momentum_buffer'] = torch.zeros_like(p.data)

                momentum_buffer = param_state['momentum_buffer']
                momentum_buffer.mul_(momentum).add_(1.0 - momentum, d_p)

                p.data.add_(-lr * nu, momentum_buffer)
                p.data.add_(-lr * (1.0 - nu), d_p)
    return p1, p2


def _get_scalar_dtype() -> torch.dtype:
    return torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32


def _init_scalar(
        value: Union[float, Tensor] = 0.0,
        device=None,
        dtype: Optional[torch.dtype] = None,
) -> Tensor:
    if isinstance(value, Tensor):
        dtype = dtype or value.dtype
        device = value.device if device is None else torch.device(device)
        if value.device == device and value.dtype == dtype:
            return value
        return value.to(device=device, dtype=dtype)
    return torch.tensor(value, dtype=dtype or _get_scalar_dtype(), device=device)


def _timm_add_scaled_(param: Tensor, update: Tensor, scale) -> None:
    if torch.is_tensor(scale):
        param.add_(update * scale)
    else:
        param.add_(update, alpha=scale)


# LaProp (Ziyin et al., 2020), timm (huggingface/pytorch-image-models), timm/optim/laprop.py: LaProp.step (lr 1e-2,
# betas (0.9, 0.999), eps 1e-15, weight decay 1e-2, caution True, corrected_weight_decay False) with _helpers.py's
# _init_scalar, _get_scalar_dtype and _add_scaled_; three steps on two parameters with fixed gradients (p.grad the
# step's slice); the group and per-parameter state dicts as locals
def timm_laprop_steps(p1: f32[6, 5], p2: f32[5], grads1: f32[3, 6, 5], grads2: f32[3, 5]) -> tuple[f32[6, 5], f32[5]]:
    defaults = dict(lr=1e-2, betas=(0.9, 0.999), eps=1e-15, weight_decay=1e-2, caution=True,
                    corrected_weight_decay=False)
    group = dict(defaults)
    states = [{}, {}]
    for k in range(3):
        for p, grad, state in zip([p1, p2], [grads1[k], grads2[k]], states):
            if grad is None:
                continue
            if grad.is_sparse:
                raise RuntimeError('LaProp does not support sparse gradients')

            # State initialization
            if len(state) == 0:
                state['step'] = _init_scalar(device='cpu')
                # Exponential moving average of gradient values
                state['exp_avg'] = torch.zeros_like(p)
                # Exponential moving average of learning rates
                state['exp_avg_lr_1'] = torch.zeros_like(group['lr']) if torch.is_tensor(group['lr']) else 0.
                state['exp_avg_lr_2'] = _init_scalar(device='cpu')
                # Exponential moving average of squared gradient values
                state['exp_avg_sq'] = torch.zeros_like(p)

            exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
            beta1, beta2 = group['betas']

            state['step'].add_(1)
            one_minus_beta2 = 1 - beta2
            one_minus_beta1 = 1 - beta1

            # Decay the first and second moment running average coefficient
            exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=one_minus_beta2)

            state['exp_avg_lr_1'] = state['exp_avg_lr_1'] * beta1 + one_minus_beta1 * group['lr']
            state['exp_avg_lr_2'] = state['exp_avg_lr_2'] * beta2 + one_minus_beta2

            # 1 - beta1 ** state['step']
            if torch.is_tensor(group['lr']):
                bias_correction1 = torch.where(
                    group['lr'] != 0.,
                    state['exp_avg_lr_1'] / group['lr'],
                    torch.ones_like(group['lr']),
                )
            else:
                bias_correction1 = state['exp_avg_lr_1'] / group['lr'] if group['lr'] != 0. else 1.
            bias_correction2 = state['exp_avg_lr_2']
            step_size = 1 / bias_correction1

            denom = exp_avg_sq.div(bias_correction2).sqrt_().add_(group['eps'])
            step_of_this_grad = grad / denom
            exp_avg.mul_(beta1)
            _timm_add_scaled_(exp_avg, step_of_this_grad, group['lr'] * one_minus_beta1)

            if group['caution']:
                # Apply caution as per 'Cautious Optimizers' - https://arxiv.org/abs/2411.16085
                mask = (exp_avg * grad > 0).to(grad.dtype)
                mask.div_(mask.mean().clamp_(min=1e-3))
                exp_avg = exp_avg * mask

            _timm_add_scaled_(p, exp_avg, -step_size)

            if group['weight_decay'] != 0:
                if group['corrected_weight_decay']:
                    wd_scale = group['lr'] ** 2 / defaults['lr']
                else:
                    wd_scale = group['lr']
                _timm_add_scaled_(p, p, -wd_scale * group['weight_decay'])
    return p1, p2
