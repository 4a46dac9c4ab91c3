"""Held-out real code, issue 14's seventeenth round, the programs every engine runs (the round's others wait in
tests/real_pending/heldout_r17.py): detectron2's DefaultAnchorGenerator with Box2BoxTransform.apply_deltas,
DAB-DETR's sine embedding of reference boxes with iterative refinement; RWKV-7's time mixing, xLSTM's chunkwise mLSTM,
flash-linear-attention's chunkwise delta rule; Gemma's sampler; CAME; and, pending at first (in
tests/real_pending), mmdetection's EIoU loss (an early `return` of a sum where no weight is positive: the returned
shape depends on the data) and Prodigy (a state tensor whose shape depends on `p.any()`). Inputs arrive uniform in
[-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import List, Optional

import torch
import torch.nn as nn
import torch.nn.functional as F


def _move_device_like(src, dst):
    return src.to(dst.device)


def _create_grid_offsets(size: List[int], stride: int, offset: float, target_device_tensor: torch.Tensor):
    grid_height, grid_width = size
    shifts_x = _move_device_like(
        torch.arange(offset * stride, grid_width * stride, step=stride, dtype=torch.float32),
        target_device_tensor,
    )
    shifts_y = _move_device_like(
        torch.arange(offset * stride, grid_height * stride, step=stride, dtype=torch.float32),
        target_device_tensor,
    )

    shift_y, shift_x = torch.meshgrid(shifts_y, shifts_x, indexing="ij")
    shift_x = shift_x.reshape(-1)
    shift_y = shift_y.reshape(-1)
    return shift_x, shift_y


def _broadcast_params(params, num_features, name):
    assert isinstance(params, (list, tuple)), f"{name} in anchor generator has to be a list! Got {params}."
    assert len(params), f"{name} in anchor generator cannot be empty!"
    if not isinstance(params[0], (list, tuple)):  # list[float]
        return [params] * num_features
    if len(params) == 1:
        return list(params) * num_features
    assert len(params) == num_features, (
        f"Got {name} of length {len(params)} in anchor generator, "
        f"but the number of input features is {num_features}!"
    )
    return params


def _generate_cell_anchors(sizes=(32, 64, 128, 256, 512), aspect_ratios=(0.5, 1, 2)):
    anchors = []
    for size in sizes:
        area = size**2.0
        for aspect_ratio in aspect_ratios:
            w = math.sqrt(area / aspect_ratio)
            h = aspect_ratio * w
            x0, y0, x1, y1 = -w / 2.0, -h / 2.0, w / 2.0, h / 2.0
            anchors.append([x0, y0, x1, y1])
    return torch.tensor(anchors)


def _grid_anchors(self, grid_sizes: List[List[int]]):
    anchors = []
    buffers: List[torch.Tensor] = self["cell_anchors"]
    for size, stride, base_anchors in zip(grid_sizes, self["strides"], buffers):
        shift_x, shift_y = _create_grid_offsets(size, stride, self["offset"], base_anchors)
        shifts = torch.stack((shift_x, shift_y, shift_x, shift_y), dim=1)

        anchors.append((shifts.view(-1, 1, 4) + base_anchors.view(1, -1, 4)).reshape(-1, 4))

    return anchors


def _apply_deltas(self, deltas, boxes):
    boxes = boxes.to(deltas.dtype)

    widths = boxes[:, 2] - boxes[:, 0]
    heights = boxes[:, 3] - boxes[:, 1]
    ctr_x = boxes[:, 0] + 0.5 * widths
    ctr_y = boxes[:, 1] + 0.5 * heights

    wx, wy, ww, wh = self["weights"]
    dx = deltas[:, 0::4] / wx
    dy = deltas[:, 1::4] / wy
    dw = deltas[:, 2::4] / ww
    dh = deltas[:, 3::4] / wh

    # Prevent sending too large values into torch.exp()
    dw = torch.clamp(dw, max=self["scale_clamp"])
    dh = torch.clamp(dh, max=self["scale_clamp"])

    pred_ctr_x = dx * widths[:, None] + ctr_x[:, None]
    pred_ctr_y = dy * heights[:, None] + ctr_y[:, None]
    pred_w = torch.exp(dw) * widths[:, None]
    pred_h = torch.exp(dh) * heights[:, None]

    x1 = pred_ctr_x - 0.5 * pred_w
    y1 = pred_ctr_y - 0.5 * pred_h
    x2 = pred_ctr_x + 0.5 * pred_w
    y2 = pred_ctr_y + 0.5 * pred_h
    pred_boxes = torch.stack((x1, y1, x2, y2), dim=-1)
    return pred_boxes.reshape(deltas.shape)


# detectron2 (facebookresearch/detectron2), detectron2/modeling/anchor_generator.py: DefaultAnchorGenerator.__init__
# (_broadcast_params, generate_cell_anchors), _grid_anchors with _create_grid_offsets, and forward, on two feature
# maps of 4x6 and 2x3 (sizes [[32], [64]], aspect ratios [0.5, 1, 2], strides [8, 16], offset 0.5), then
# detectron2/modeling/box_regression.py: Box2BoxTransform.apply_deltas (weights (1, 1, 1, 1), scale_clamp
# log(1000/16)) of the RPN's deltas onto the concatenated anchors; the generator as a dict, BufferList as a list,
# Boxes as their tensors; move_device_like as src.to(dst.device); meshgrid with indexing="ij" (detectron2 calls
# torch.meshgrid without it, which gives the same grids and a warning). The deltas are float64 and apply_deltas'
# `deltas = deltas.float()` is left out, so that the boxes decode in float64: x1 = ctr_x - 0.5 * w cancels where a box
# edge is near zero, and float32 rounding there (which differs by plan in the last bits) exceeds the corpus tolerance
def d2_anchor_generator_apply_deltas(
    feat0: f32[1, 4, 4, 6], feat1: f32[1, 4, 2, 3], deltas: f64[90, 4]
) -> tuple[f32[90, 4], f64[90, 4]]:
    features = [feat0, feat1]
    sizes = [[32], [64]]
    aspect_ratios = [[0.5, 1.0, 2.0]]
    strides = [8, 16]
    num_features = len(strides)
    sizes = _broadcast_params(sizes, num_features, "sizes")
    aspect_ratios = _broadcast_params(aspect_ratios, num_features, "aspect_ratios")
    cell_anchors = [_generate_cell_anchors(s, a).float() for s, a in zip(sizes, aspect_ratios)]
    gen = {"strides": strides, "offset": 0.5, "cell_anchors": cell_anchors, "num_features": num_features}

    grid_sizes = [feature_map.shape[-2:] for feature_map in features]
    anchors_over_all_feature_maps = _grid_anchors(gen, grid_sizes)
    anchors = torch.cat(anchors_over_all_feature_maps, dim=0)

    transform = {"weights": (1.0, 1.0, 1.0, 1.0), "scale_clamp": math.log(1000.0 / 16)}
    proposals = _apply_deltas(transform, deltas * 0.5, anchors)
    return anchors, proposals


def _inverse_sigmoid(x, eps=1e-3):
    x = x.clamp(min=0, max=1)
    x1 = x.clamp(min=eps)
    x2 = (1 - x).clamp(min=eps)
    return torch.log(x1 / x2)


def _gen_sineembed_for_position(pos_tensor):
    # n_query, bs, _ = pos_tensor.size()
    # sineembed_tensor = torch.zeros(n_query, bs, 256)
    scale = 2 * math.pi
    dim_t = torch.arange(128, dtype=torch.float32, device=pos_tensor.device)
    dim_t = 10000 ** (2 * (dim_t // 2) / 128)
    x_embed = pos_tensor[:, :, 0] * scale
    y_embed = pos_tensor[:, :, 1] * scale
    pos_x = x_embed[:, :, None] / dim_t
    pos_y = y_embed[:, :, None] / dim_t
    pos_x = torch.stack((pos_x[:, :, 0::2].sin(), pos_x[:, :, 1::2].cos()), dim=3).flatten(2)
    pos_y = torch.stack((pos_y[:, :, 0::2].sin(), pos_y[:, :, 1::2].cos()), dim=3).flatten(2)
    if pos_tensor.size(-1) == 2:
        pos = torch.cat((pos_y, pos_x), dim=2)
    elif pos_tensor.size(-1) == 4:
        w_embed = pos_tensor[:, :, 2] * scale
        pos_w = w_embed[:, :, None] / dim_t
        pos_w = torch.stack((pos_w[:, :, 0::2].sin(), pos_w[:, :, 1::2].cos()), dim=3).flatten(2)

        h_embed = pos_tensor[:, :, 3] * scale
        pos_h = h_embed[:, :, None] / dim_t
        pos_h = torch.stack((pos_h[:, :, 0::2].sin(), pos_h[:, :, 1::2].cos()), dim=3).flatten(2)

        pos = torch.cat((pos_y, pos_x, pos_w, pos_h), dim=2)
    else:
        raise ValueError("Unknown pos_tensor shape(-1):{}".format(pos_tensor.size(-1)))
    return pos


# DAB-DETR (IDEA-Research/DAB-DETR), models/DAB_DETR/transformer.py: gen_sineembed_for_position (4-d boxes) and the
# decoder loop's reference-point handling (obj_center = reference_points[..., :4], query_sine_embed, then the
# iterative box refinement tmp = bbox_embed(output); tmp[..., :4] += inverse_sigmoid(reference_points); sigmoid),
# with Deformable DETR's util/misc.py inverse_sigmoid; 5 queries, batch 2, one decoder layer whose output is `tgt`;
# bbox_embed a single linear layer (DAB-DETR's is a 3-layer MLP), the reference points the sigmoid of raw inputs
def dab_detr_sine_embed_refine(
    ref_raw: f32[5, 2, 4], tgt: f32[5, 2, 16], bbox_w: f32[4, 16], bbox_b: f32[4]
) -> tuple[f32[5, 2, 512], f32[5, 2, 4]]:
    reference_points = ref_raw.sigmoid()
    obj_center = reference_points[..., :4]  # [num_queries, batch_size, 4]
    query_sine_embed = _gen_sineembed_for_position(obj_center)
    output = tgt
    tmp = F.linear(output, bbox_w * 0.25, bbox_b)
    tmp[..., :4] += _inverse_sigmoid(reference_points)
    new_reference_points = tmp[..., :4].sigmoid()
    reference_points = new_reference_points.detach()
    return query_sine_embed, reference_points


def _rwkv7_time_mixing(H: int, N: int, x, x_prev, v_first, state, x_r, x_w, x_k, x_v, x_a, x_g, w0, w1, w2, a0, a1,
                       a2, v0, v1, v2, g1, g2, k_k, k_a, r_k, kw, vw, rw, ow, ln_w, ln_b):
    xx = x_prev - x
    xr = x + xx * x_r
    xw = x + xx * x_w
    xk = x + xx * x_k
    xv = x + xx * x_v
    xa = x + xx * x_a
    xg = x + xx * x_g

    r = rw @ xr
    w = torch.tanh(xw @ w1) @ w2
    k = kw @ xk
    v = vw @ xv

    if H < 0:  # hack to determine first layer
        v_first = v
        H = -H
    else:
        v = v + (v_first - v) * torch.sigmoid(v0 + (xv @ v1) @ v2)

    a = torch.sigmoid(a0 + (xa @ a1) @ a2)
    g = torch.sigmoid(xg @ g1) @ g2

    kk = k * k_k
    kk = torch.nn.functional.normalize(kk.view(H, N), dim=-1, p=2.0).view(-1)
    k = k * (1 + (a - 1) * k_a)

    # fused version
    w = w0 + w.float()
    assert w.dtype == torch.float
    w = torch.exp(-0.606531 * torch.sigmoid(w))  # 0.606531 = exp(-0.5)

    vk = v.view(H, N, 1) @ k.view(H, 1, N)

    ab = (-kk).view(H, N, 1) @ (kk * a).view(H, 1, N)

    state = state * w.view(H, 1, N) + state @ ab.float() + vk.float()

    out = (state.to(dtype=x.dtype) @ r.view(H, N, 1)).view(H, N)

    out = torch.nn.functional.group_norm(out.view(1, H * N), num_groups=H, weight=ln_w, bias=ln_b, eps=64e-5).view(H * N)
    out = out + ((r * k * r_k).view(H, N).sum(dim=-1, keepdim=True) * v.view(H, N)).view(H * N)

    return ow @ (out * g), x, state, v_first


# RWKV-7 (BlinkDL/RWKV-LM), RWKV-v7/rwkv_v7_demo_rnn.py: time_mixing__ (the "fused" w) and the RNN forward's layer
# loop (the H < 0 first-layer hack, v_first, the per-layer state list written by index), 2 layers that share one set
# of attention weights (the demo loads one set per layer), without the channel mixing and the head, over 3 tokens;
# n_embd 8, 2 heads of 4; DTYPE float32 (the demo uses half); the torch.compile/jit wrappers left out; low-rank
# widths 4; weights scaled down from the raw inputs
def rwkv7_time_mixing(
    emb: f32[3, 8], ln1_w: f32[8], ln1_b: f32[8], x_r: f32[8], x_w: f32[8], x_k: f32[8], x_v: f32[8], x_a: f32[8],
    x_g: f32[8], w0: f32[8], w1: f32[8, 4], w2: f32[4, 8], a0: f32[8], a1: f32[8, 4], a2: f32[4, 8], v0: f32[8],
    v1: f32[8, 4], v2: f32[4, 8], g1: f32[8, 4], g2: f32[4, 8], k_k: f32[8], k_a: f32[8], r_k: f32[8],
    kw: f32[8, 8], vw: f32[8, 8], rw: f32[8, 8], ow: f32[8, 8], ln_w: f32[8], ln_b: f32[8]
) -> tuple[f32[3, 8], f32[2, 4, 4], f32[2, 4, 4]]:
    n_layer, n_embd, n_head, head_size = 2, 8, 2, 4
    s = 0.35
    att = [x_r, x_w, x_k, x_v, x_a, x_g, w0, w1 * s, w2 * s, a0, a1 * s, a2 * s, v0, v1 * s, v2 * s, g1 * s, g2 * s,
           k_k, k_a, r_k, kw * s, vw * s, rw * s, ow * s, ln_w, ln_b]
    state = [None for _ in range(n_layer * 2)]
    for i in range(n_layer):  # state: 0=att_x_prev 1=att_kv
        state[i * 2 + 0] = torch.zeros(n_embd, dtype=torch.float, requires_grad=False)
        state[i * 2 + 1] = torch.zeros((n_embd // head_size, head_size, head_size), dtype=torch.float,
                                       requires_grad=False)
    outs = []
    for token in range(emb.shape[0]):
        with torch.no_grad():
            x = emb[token]
            v_first = torch.empty_like(x)
            for i in range(n_layer):
                xx = F.layer_norm(x, (n_embd,), weight=ln1_w, bias=ln1_b)
                xx, state[i * 2 + 0], state[i * 2 + 1], v_first = _rwkv7_time_mixing(
                    n_head if i > 0 else -n_head, head_size, xx, state[i * 2 + 0], v_first, state[i * 2 + 1], *att)
                x = x + xx
            outs.append(x)
    return torch.stack(outs), state[1], state[3]


def _mlstm_chunkwise_simple(
    queries: torch.Tensor,
    keys: torch.Tensor,  # B, NH, S, DH
    values: torch.Tensor,  # B, NH, S, DH
    igate_preact: torch.Tensor,  # B, NH, S
    fgate_preact: torch.Tensor,  # B, NH, S
    initial_C: Optional[torch.Tensor] = None,  # B, NH, DH, DH
    initial_n: Optional[torch.Tensor] = None,  # B, NH, DH
    initial_m: Optional[torch.Tensor] = None,  # B, NH, 1
    chunk_size: int = 64,  # optimize this
    return_last_state: bool = False,
    eps: float = 1e-6,
    **kwargs,
) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    B, NH, S, DH = queries.shape
    NS, CS = S // chunk_size, chunk_size
    _dtype, _device = queries.dtype, queries.device

    # form chunks
    q = queries.view(B, NH, NS, CS, DH) / math.sqrt(DH)
    k = keys.view(B, NH, NS, CS, DH)
    v = values.view(B, NH, NS, CS, DH)

    # forget gates
    log_fgates = torch.nn.functional.logsigmoid(fgate_preact).view(B, NH, NS, CS)
    log_fgates_acc = log_fgates.cumsum(dim=3)
    igate_preact = igate_preact.view(B, NH, NS, CS)

    loggates = (igate_preact - log_fgates_acc)[:, :, :, :, None]
    m_loc, _ = torch.max(loggates + log_fgates_acc[:, :, :, -1, None, None], dim=3, keepdim=True)
    loggates = loggates + log_fgates_acc[:, :, :, -1, None, None] - m_loc

    kv = k.transpose(-1, -2) @ (v * (loggates).exp())
    ksum = (k * (loggates).exp()).sum(dim=-2)
    C = torch.zeros((B, NH, NS + 1, DH, DH), device=kv.device, dtype=kv.dtype)
    n = torch.zeros((B, NH, NS + 1, DH), device=kv.device, dtype=kv.dtype)
    if initial_C is not None:
        C[:, :, 0] = initial_C
    if initial_n is not None:
        n[:, :, 0] = initial_n

    m = torch.zeros((B, NH, NS + 1, 1, 1), device=kv.device, dtype=kv.dtype)
    if initial_m is not None:
        m[:, :, 0] = initial_m[:, :, None, None]

    for i in range(1, NS + 1):
        m[:, :, i] = torch.maximum(
            log_fgates_acc[:, :, i - 1, -1, None, None] + m[:, :, i - 1],
            m_loc[:, :, i - 1],
        )
        C[:, :, i] = (
            C[:, :, i - 1].clone()
            * (log_fgates_acc[:, :, i - 1, -1, None, None] + m[:, :, i - 1] - m[:, :, i]).exp()
            + kv[:, :, i - 1] * (m_loc[:, :, i - 1] - m[:, :, i]).exp()
        )
        n[:, :, i] = (
            n[:, :, i - 1].clone()
            * (log_fgates_acc[:, :, i - 1, -1, None] + m[:, :, i - 1, 0] - m[:, :, i, 0]).exp()
            + ksum[:, :, i - 1] * (m_loc[:, :, i - 1, 0] - m[:, :, i, 0]).exp()
        )

    log_fgates_rep = log_fgates_acc[:, :, :, :, None].repeat(1, 1, 1, 1, CS)
    log_fg_matrix = (
        log_fgates_rep
        - log_fgates_rep.transpose(-1, -2)
        - torch.triu(float("inf") * torch.ones([1, 1, 1, CS, CS]).to(q), diagonal=1)
    )

    # gate decay matrix D (combination of forget gate and input gate)
    log_D_matrix = log_fg_matrix + igate_preact[:, :, :, :, None].transpose(-2, -1)  # (B, NH, NS, CS, CS)
    D_max, _ = torch.max(log_D_matrix, dim=-1, keepdim=True)

    stab = torch.maximum(D_max, m[:, :, :-1, :] + log_fgates_acc[:, :, :, :, None])
    inter_C = (q * (m[:, :, :-1, :] + log_fgates_acc[:, :, :, :, None] - stab).exp()) @ C[:, :, :-1]
    inter_n = (q * (m[:, :, :-1, :] + log_fgates_acc[:, :, :, :, None] - stab).exp()) @ n[:, :, :-1, :, None]

    # D matrix stabilization
    log_D_matrix_stabilized = log_D_matrix - stab  # (B, NH, NS, CS, CS)
    D_matrix = torch.exp(log_D_matrix_stabilized)  # (B, NH, NS, CS, CS)

    # combination matrix C
    qk_matrix = q @ k.transpose(-2, -1)  # (B, NH, NS, CS, CS)
    E_matrix = qk_matrix * D_matrix  # (B, NH, NS, CS, CS)

    normalizer = torch.maximum(
        (E_matrix.sum(dim=-1, keepdim=True) + inter_n).abs(),
        torch.exp(-stab),
    )  # (B, NH, NS, CS, 1)

    E_matrix_normalized = E_matrix / (normalizer + eps)

    # retrieved values
    intra = E_matrix_normalized @ v  # (B, NH, S, DH)
    inter = inter_C / (normalizer + eps)

    if return_last_state:
        return (intra + inter).view((B, NH, S, DH)), (C[:, :, -1], n[:, :, -1], m[:, :, -1])
    else:
        return (intra + inter).view((B, NH, S, DH))


# xLSTM (NX-AI/xlstm), xlstm/blocks/mlstm/backends.py: chunkwise_simple (the mLSTM in chunkwise form) with initial
# C, n and m states and return_last_state=True; batch 1, 2 heads of 4, 16 steps in chunks of 4. initial_m is passed
# of shape (B, NH) (the docstring says (B, NH, 1), but m[:, :, 0] = initial_m[:, :, None, None] then fails to
# broadcast in PyTorch)
def xlstm_mlstm_chunkwise(
    q: f32[1, 2, 16, 4], k: f32[1, 2, 16, 4], v: f32[1, 2, 16, 4], igate: f32[1, 2, 16], fgate: f32[1, 2, 16],
    c0: f32[1, 2, 4, 4], n0: f32[1, 2, 4], m0: f32[1, 2]
) -> tuple[f32[1, 2, 16, 4], f32[1, 2, 4, 4], f32[1, 2, 4], f32[1, 2, 1, 1]]:
    h, (c_last, n_last, m_last) = _mlstm_chunkwise_simple(
        q, k, v, igate, fgate * 3.0 + 2.0, initial_C=c0, initial_n=n0, initial_m=m0, chunk_size=4,
        return_last_state=True,
    )
    return h, c_last, n_last, m_last


def _delta_rule_chunkwise(q, k, v, beta, chunk_size=32):
    b, h, l, d_k = q.shape
    d_v = v.shape[-1]
    q = q * (d_k ** -0.5)
    v = v * beta[..., None]
    k_beta = k * beta[..., None]

    assert l % chunk_size == 0

    # compute (I - tri(diag(beta) KK^T))^{-1}
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device), diagonal=0)
    q, k, v, k_beta = (x.reshape(b, h, l // chunk_size, chunk_size, x.shape[-1]) for x in [q, k, v, k_beta])
    attn = -(k_beta @ k.transpose(-1, -2)).masked_fill(mask, 0)
    for i in range(1, chunk_size):
        attn[..., i, :i] = attn[..., i, :i] + (attn[..., i, :, None].clone() * attn[..., :, :i].clone()).sum(-2)
    attn = attn + torch.eye(chunk_size, dtype=torch.float, device=q.device)

    u = attn @ v
    w = attn @ k_beta
    S = k.new_zeros(b, h, d_k, d_v)
    o = torch.zeros_like(v)
    mask = torch.triu(torch.ones(chunk_size, chunk_size, dtype=torch.bool, device=q.device), diagonal=1)
    for i in range(0, l // chunk_size):
        q_i, k_i = q[:, :, i], k[:, :, i]
        attn = (q_i @ k_i.transpose(-1, -2)).masked_fill_(mask, 0)
        u_i = u[:, :, i] - w[:, :, i] @ S
        o_inter = q_i @ S
        o[:, :, i] = o_inter + attn @ u_i
        S = S + k_i.transpose(-1, -2) @ u_i

    return o.reshape(b, h, l, d_v), S


# flash-linear-attention (fla-org/flash-linear-attention), fla/ops/delta_rule/naive.py: delta_rule_chunkwise
# (chunk_size 4 instead of 32; einops' rearrange 'b h (n c) d -> b h n c d' and back written as reshape, einops
# being absent); batch 1, 2 heads, 16 steps, d_k = d_v = 4; keys L2-normalized and beta a sigmoid, as fla's tests
# make them
def fla_delta_rule_chunkwise(
    q: f32[1, 2, 16, 4], k: f32[1, 2, 16, 4], v: f32[1, 2, 16, 4], beta_raw: f32[1, 2, 16]
) -> tuple[f32[1, 2, 16, 4], f32[1, 2, 4, 4]]:
    k = F.normalize(k, p=2, dim=-1)
    beta = beta_raw.sigmoid()
    return _delta_rule_chunkwise(q, k, v, beta, chunk_size=4)


def _gemma_sampler_forward(self, embedding, hidden_states, output_positions, temperatures, top_ps, top_ks,
                           embedding_bias=None):
    # Select the last element for each sequence.
    # (batch_size, input_len, hidden_size) -> (batch_size, hidden_size)
    hidden_states = hidden_states.index_select(1, output_positions).squeeze(dim=1)
    logits = torch.matmul(hidden_states, embedding.t())
    if embedding_bias is not None:
        logits += embedding_bias
    if self["config"]["final_logit_softcapping"] is not None:
        logits = logits / self["config"]["final_logit_softcapping"]
        logits = torch.tanh(logits)
        logits = logits * self["config"]["final_logit_softcapping"]

    if temperatures is None:
        return torch.argmax(logits, dim=-1).squeeze(dim=-1), logits

    # Apply temperature scaling.
    logits.div_(temperatures.unsqueeze(dim=1))

    # Calculate probabilities with softmax.
    probs = torch.softmax(logits, dim=-1, dtype=torch.float)
    probs_sort, probs_idx = torch.sort(probs, dim=-1, descending=True)

    # Apply top-p, top-k.
    probs_sum = torch.cumsum(probs_sort, dim=-1)
    top_ps_mask = (probs_sum - probs_sort) > top_ps.unsqueeze(dim=1)
    probs_sort = torch.where(top_ps_mask, 0, probs_sort)

    top_ks_mask = torch.arange(probs_idx.shape[-1], device=probs_idx.device)
    top_ks_mask = top_ks_mask.expand(probs_idx.shape[0], -1)
    top_ks_mask = top_ks_mask >= top_ks.unsqueeze(dim=1)
    probs_sort = torch.where(top_ks_mask, 0, probs_sort)

    # Re-normalization.
    probs_sort.div_(probs_sort.sum(dim=-1, keepdim=True))
    probs = torch.gather(probs_sort, dim=-1, index=torch.argsort(probs_idx, dim=-1))

    # next_token_ids = torch.multinomial(probs, num_samples=1, replacement=True).squeeze(dim=-1)
    return probs, logits


# Gemma (google/gemma_pytorch), gemma/model.py: Sampler.forward (final_logit_softcapping 30.0, an embedding bias)
# with GemmaForCausalLM.generate's tensors of temperatures, top-ps and top-ks (temperature 0.7, top_p 0.9, top_k 12,
# built with torch.FloatTensor / torch.LongTensor as generate builds them) and output_positions the last position;
# the final torch.multinomial draw left out (the probabilities it draws from are returned), and the greedy branch
# (temperatures None) called too; vocabulary 64, hidden 16, batch 2, 5 positions
def gemma_sampler(
    embedding: f32[64, 16], hidden_states: f32[2, 5, 16], embedding_bias: f32[64]
) -> tuple[f32[2, 64], f32[2, 64], i64[2]]:
    sampler = {"config": {"final_logit_softcapping": 30.0}}
    batch_size = hidden_states.shape[0]
    device = hidden_states.device
    temperature, top_p, top_k = 0.7, 0.9, 12
    temperatures_tensor = None if not temperature else torch.FloatTensor([temperature] * batch_size).to(device)
    top_ps_tensor = torch.FloatTensor([top_p] * batch_size).to(device)
    top_ks_tensor = torch.LongTensor([top_k] * batch_size).to(device)
    output_positions_tensor = torch.LongTensor([hidden_states.shape[1] - 1]).to(device)
    probs, logits = _gemma_sampler_forward(sampler, embedding * 4.0, hidden_states, output_positions_tensor,
                                           temperatures_tensor, top_ps_tensor, top_ks_tensor, embedding_bias)
    greedy, _ = _gemma_sampler_forward(sampler, embedding * 4.0, hidden_states, output_positions_tensor, None,
                                       top_ps_tensor, top_ks_tensor)
    return probs, logits, greedy


def _came_rms(tensor):
    return tensor.norm(2) / (tensor.numel() ** 0.5)


def _came_approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col):
    r_factor = (exp_avg_sq_row / exp_avg_sq_row.mean(dim=-1, keepdim=True)).rsqrt_().unsqueeze(-1)
    c_factor = exp_avg_sq_col.unsqueeze(-2).rsqrt()
    return torch.mul(r_factor, c_factor)


# CAME (yangluo7/CAME), came_pytorch/CAME.py: CAME.step with _get_options, _rms and _approx_sq_grad (lr 1e-2 instead
# of the README's 2e-4, eps (1e-30, 1e-16), clip_threshold 1.0, betas (0.9, 0.999, 0.9999), weight_decay 1e-2), three
# steps on a factored [6, 8] and an unfactored [8] parameter; p.grad is each step's gradient slice; state as dicts
def came_steps(p1: f32[6, 8], p2: f32[8], grads1: f32[3, 6, 8], grads2: f32[3, 8]) -> tuple[f32[6, 8], f32[8], f32[6, 8]]:
    group = dict(lr=1e-2, eps=(1e-30, 1e-16), clip_threshold=1.0, betas=(0.9, 0.999, 0.9999), weight_decay=1e-2,
                 params=[p1, p2])
    states = [{}, {}]
    for it in range(3):
        for j, p in enumerate(group["params"]):
            grad = [grads1, grads2][j][it]
            if grad.dtype in {torch.float16, torch.bfloat16}:
                grad = grad.float()
            if grad.is_sparse:
                raise RuntimeError("CAME does not support sparse gradients.")

            state = states[j]
            grad_shape = grad.shape

            factored = len(grad_shape) >= 2
            # State Initialization
            if len(state) == 0:
                state["step"] = 0

                state["exp_avg"] = torch.zeros_like(grad)
                if factored:
                    state["exp_avg_sq_row"] = torch.zeros(grad_shape[:-1]).type_as(grad)
                    state["exp_avg_sq_col"] = torch.zeros(grad_shape[:-2] + grad_shape[-1:]).type_as(grad)

                    state["exp_avg_res_row"] = torch.zeros(grad_shape[:-1]).type_as(grad)
                    state["exp_avg_res_col"] = torch.zeros(grad_shape[:-2] + grad_shape[-1:]).type_as(grad)
                else:
                    state["exp_avg_sq"] = torch.zeros_like(grad)

                state["RMS"] = 0

            state["step"] += 1
            state["RMS"] = _came_rms(p.data)

            update = (grad**2) + group["eps"][0]
            if factored:
                exp_avg_sq_row = state["exp_avg_sq_row"]
                exp_avg_sq_col = state["exp_avg_sq_col"]

                exp_avg_sq_row.mul_(group["betas"][1]).add_(update.mean(dim=-1), alpha=1.0 - group["betas"][1])
                exp_avg_sq_col.mul_(group["betas"][1]).add_(update.mean(dim=-2), alpha=1.0 - group["betas"][1])

                # Approximation of exponential moving average of square of gradient
                update = _came_approx_sq_grad(exp_avg_sq_row, exp_avg_sq_col)
                update.mul_(grad)
            else:
                exp_avg_sq = state["exp_avg_sq"]

                exp_avg_sq.mul_(group["betas"][1]).add_(update, alpha=1.0 - group["betas"][1])
                update = exp_avg_sq.rsqrt().mul_(grad)

            update.div_((_came_rms(update) / group["clip_threshold"]).clamp_(min=1.0))

            exp_avg = state["exp_avg"]
            exp_avg.mul_(group["betas"][0]).add_(update, alpha=1 - group["betas"][0])

            # Confidence-guided strategy
            # Calculation of instability
            res = (update - exp_avg) ** 2 + group["eps"][1]

            if factored:
                exp_avg_res_row = state["exp_avg_res_row"]
                exp_avg_res_col = state["exp_avg_res_col"]

                exp_avg_res_row.mul_(group["betas"][2]).add_(res.mean(dim=-1), alpha=1.0 - group["betas"][2])
                exp_avg_res_col.mul_(group["betas"][2]).add_(res.mean(dim=-2), alpha=1.0 - group["betas"][2])

                # Approximation of exponential moving average of instability
                res_approx = _came_approx_sq_grad(exp_avg_res_row, exp_avg_res_col)
                update = res_approx.mul_(exp_avg)
            else:
                update = exp_avg.clone()

            if group["weight_decay"] != 0:
                p.data.add_(p.data, alpha=-group["weight_decay"] * group["lr"])

            update.mul_(group["lr"])
            p.data.add_(-update)
    return p1, p2, states[0]["exp_avg"]


def _reduce_loss(loss, reduction):
    reduction_enum = F._Reduction.get_enum(reduction)
    # none: 0, elementwise_mean:1, sum: 2
    if reduction_enum == 0:
        return loss
    elif reduction_enum == 1:
        return loss.mean()
    elif reduction_enum == 2:
        return loss.sum()


def _weight_reduce_loss(loss, weight=None, reduction="mean", avg_factor=None):
    # if weight is specified, apply element-wise weight
    if weight is not None:
        loss = loss * weight

    # if avg_factor is not specified, just reduce the loss
    if avg_factor is None:
        loss = _reduce_loss(loss, reduction)
    else:
        # if reduction is mean, then average the loss by avg_factor
        if reduction == "mean":
            # Avoid causing ZeroDivisionError when avg_factor is 0.0,
            # i.e., all labels of an image belong to ignore index.
            eps = torch.finfo(torch.float32).eps
            loss = loss.sum() / (avg_factor + eps)
        # if reduction is 'none', then do nothing, otherwise raise an error
        elif reduction != "none":
            raise ValueError('avg_factor can not be used with reduction="sum"')
    return loss


def _eiou_loss(pred, target, smooth_point=0.1, eps=1e-7):
    px1, py1, px2, py2 = pred[:, 0], pred[:, 1], pred[:, 2], pred[:, 3]
    tx1, ty1, tx2, ty2 = target[:, 0], target[:, 1], target[:, 2], target[:, 3]

    # extent top left
    ex1 = torch.min(px1, tx1)
    ey1 = torch.min(py1, ty1)

    # intersection coordinates
    ix1 = torch.max(px1, tx1)
    iy1 = torch.max(py1, ty1)
    ix2 = torch.min(px2, tx2)
    iy2 = torch.min(py2, ty2)

    # extra
    xmin = torch.min(ix1, ix2)
    ymin = torch.min(iy1, iy2)
    xmax = torch.max(ix1, ix2)
    ymax = torch.max(iy1, iy2)

    # Intersection
    intersection = (
        (ix2 - ex1) * (iy2 - ey1)
        + (xmin - ex1) * (ymin - ey1)
        - (ix1 - ex1) * (ymax - ey1)
        - (xmax - ex1) * (iy1 - ey1)
    )
    # Union
    union = (px2 - px1) * (py2 - py1) + (tx2 - tx1) * (ty2 - ty1) - intersection + eps
    # IoU
    ious = 1 - (intersection / union)

    # Smooth-EIoU
    smooth_sign = (ious < smooth_point).detach().float()
    loss = 0.5 * smooth_sign * (ious**2) / smooth_point + (1 - smooth_sign) * (ious - 0.5 * smooth_point)
    return loss


def _eiou_loss_forward(self, pred, target, weight=None, avg_factor=None, reduction_override=None, **kwargs):
    if weight is not None and not torch.any(weight > 0):
        if pred.dim() == weight.dim() + 1:
            weight = weight.unsqueeze(1)
        return (pred * weight).sum()  # 0
    assert reduction_override in (None, "none", "mean", "sum")
    reduction = reduction_override if reduction_override else self["reduction"]
    if weight is not None and weight.dim() > 1:
        assert weight.shape == pred.shape
        weight = weight.mean(-1)
    loss = self["loss_weight"] * _weight_reduce_loss(
        _eiou_loss(pred, target, smooth_point=self["smooth_point"], eps=self["eps"], **kwargs),
        weight,
        reduction=reduction,
        avg_factor=avg_factor,
    )
    return loss


# mmdetection (open-mmlab/mmdetection), mmdet/models/losses/iou_loss.py: eiou_loss and EIoULoss.forward (smooth_point
# 0.1, eps 1e-6, loss_weight 1.0), with mmdet/models/losses/utils.py's weight_reduce_loss and reduce_loss standing
# in for the @weighted_loss decorator; called with avg_factor 8 (reduction "mean") and with reduction_override
# "none"; XYXY boxes made valid from the raw inputs (corners in [0, 16), sides in [1, 5)), weights in [0, 1)
def mmdet_eiou_loss(raw_pred: f32[16, 4], raw_target: f32[16, 4], raw_weight: f32[16]) -> tuple[f32[()], f32[16]]:
    pred = torch.cat([raw_pred[:, :2] * 8 + 8, raw_pred[:, :2] * 8 + 8 + raw_pred[:, 2:].abs() * 4 + 1], dim=1)
    target = torch.cat([raw_target[:, :2] * 8 + 8, raw_target[:, :2] * 8 + 8 + raw_target[:, 2:].abs() * 4 + 1], dim=1)
    weight = (raw_weight + 1) / 2
    module = {"reduction": "mean", "loss_weight": 1.0, "smooth_point": 0.1, "eps": 1e-6}
    loss_avg = _eiou_loss_forward(module, pred, target, weight, avg_factor=8.0)
    loss_none = _eiou_loss_forward(module, pred, target, weight, reduction_override="none")
    return loss_avg, loss_none


# Prodigy (konstmish/prodigy), prodigyopt/prodigy.py: Prodigy.step (lr 1.0, betas (0.9, 0.999), beta3 None so
# sqrt(beta2), eps 1e-8, weight_decay 0.01 decoupled, use_bias_correction False, safeguard_warmup False, d0 1e-3
# instead of 1e-6, d_coef 1.0, growth_rate inf, slice_p 1, no FSDP), three steps on two parameters in one group;
# p.grad is each step's gradient slice; the closure left out (and `return loss` when d_denom is 0 written `continue`, as
# the step loop is inlined); self.param_groups and self.state as a list of dicts;
# d, d_hat and d_max returned as a tensor beside the parameters
def prodigy_steps(
    p1: f32[4, 6], p2: f32[6], grads1: f32[3, 4, 6], grads2: f32[3, 6]
) -> tuple[f32[4, 6], f32[6], f32[3]]:
    param_groups = [dict(lr=1.0, betas=(0.9, 0.999), beta3=None, eps=1e-8, weight_decay=0.01, d=1e-3, d0=1e-3,
                         d_max=1e-3, d_numerator=0.0, d_coef=1.0, k=0, growth_rate=float("inf"),
                         use_bias_correction=False, decouple=True, safeguard_warmup=False, fsdp_in_use=False,
                         slice_p=1, params=[p1, p2])]
    states = [{}, {}]
    all_grads = [grads1, grads2]
    d_hat = 0.0
    for it in range(3):
        grads = [all_grads[0][it], all_grads[1][it]]
        d_denom = 0.0

        group = param_groups[0]
        use_bias_correction = group['use_bias_correction']
        beta1, beta2 = group['betas']
        beta3 = group['beta3']
        if beta3 is None:
            beta3 = math.sqrt(beta2)
        k = group['k']

        d = group['d']
        d_max = group['d_max']
        d_coef = group['d_coef']
        lr = max(group['lr'] for group in param_groups)

        if use_bias_correction:
            bias_correction = ((1 - beta2 ** (k + 1)) ** 0.5) / (1 - beta1 ** (k + 1))
        else:
            bias_correction = 1

        dlr = d * lr * bias_correction

        growth_rate = group['growth_rate']
        decouple = group['decouple']
        fsdp_in_use = group['fsdp_in_use']

        d_numerator = group['d_numerator']
        d_numerator *= beta3

        for group in param_groups:
            decay = group['weight_decay']
            k = group['k']
            eps = group['eps']
            group_lr = group['lr']
            d0 = group['d0']
            safeguard_warmup = group['safeguard_warmup']
            slice_p = group['slice_p']

            if group_lr not in [lr, 0.0]:
                raise RuntimeError(f"Setting different lr values in different parameter groups is only supported for values of 0")

            for j, p in enumerate(group['params']):
                grad = grads[j]

                # Apply weight decay (coupled variant)
                if decay != 0 and not decouple:
                    grad.add_(p.data, alpha=decay)

                state = states[j]

                # State initialization
                if 'step' not in state:
                    state['step'] = 0

                    state['s'] = torch.zeros_like(p.data.flatten()[::slice_p]).detach()

                    if p.any():
                        state['p0'] = p.flatten()[::slice_p].detach().clone()
                    else:
                        # All values are zero, so save VRAM with a zero-tensor
                        state['p0'] = torch.tensor(0, device=p.device, dtype=p.dtype)

                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(p.data).detach()
                    # Exponential moving average of squared gradient values
                    state['exp_avg_sq'] = torch.zeros_like(p.data).detach()

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']

                s = state['s']
                p0 = state['p0']

                if group_lr > 0.0:
                    # we use d / d0 instead of just d to avoid getting values that are too small
                    sliced_grad = grad.flatten()[::slice_p]
                    d_numerator += (d / d0) * dlr * torch.dot(sliced_grad, p0.data - p.data.flatten()[::slice_p]).item()

                    # Adam EMA updates
                    exp_avg.mul_(beta1).add_(grad, alpha=d * (1 - beta1))
                    exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=d * d * (1 - beta2))

                    if safeguard_warmup:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * d))
                    else:
                        s.mul_(beta3).add_(sliced_grad, alpha=((d / d0) * dlr))
                    d_denom += s.abs().sum().item()

        d_hat = d

        # if we have not done any progres, return
        # if we have any gradients available, will have d_denom > 0 (unless \|g\|=0)
        if d_denom == 0:
            continue

        if lr > 0.0:
            global_d_numerator = d_numerator
            global_d_denom = d_denom

            d_hat = d_coef * global_d_numerator / global_d_denom
            if d == group['d0']:
                d = max(d, d_hat)
            d_max = max(d_max, d_hat)
            d = min(d_max, d * growth_rate)

        for group in param_groups:
            group['d_numerator'] = global_d_numerator
            group['d_denom'] = global_d_denom
            group['d'] = d
            group['d_max'] = d_max
            group['d_hat'] = d_hat

            decay = group['weight_decay']
            k = group['k']
            eps = group['eps']

            for j, p in enumerate(group['params']):
                state = states[j]

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']

                state['step'] += 1

                denom = exp_avg_sq.sqrt().add_(d * eps)

                # Apply weight decay (decoupled variant)
                if decay != 0 and decouple:
                    p.data.add_(p.data, alpha=-decay * dlr)

                ### Take step
                p.data.addcdiv_(exp_avg, denom, value=-dlr)

            group['k'] = k + 1
    group = param_groups[0]
    return p1, p2, torch.tensor([group['d'], group['d_hat'], group['d_max']])
