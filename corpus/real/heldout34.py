"""Held-out real code, issue 14's thirty-fourth round, the programs every engine runs: JDE's target building and box
decoding (Zhongdao/Towards-Realtime-MOT); the LSTM with attention of MaximumEntropy/Seq2Seq-PyTorch; TriForce's
retrieval KV cache (Infini-AI-Lab/TriForce); apex's LARC around SGD (NVIDIA/apex), XLM's Adam with inverse-sqrt warmup
(facebookresearch/XLM) and AdamS with stable weight decay (zeke-xie/stable-weight-decay-regularization). The round's
other programs were refused (numpy on run-time values, data-dependent shapes, stateful nn modules, shift operators,
decorators, unsupported imports and base classes, a monkey-patching module-level statement, assigning `.data`, and so
on). Ported by a helper from the originals, as code nobody here had seen: 5 of 20 on every engine at first, 6 after.
Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math
from typing import Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.optim.optimizer import Optimizer


# ----------------------------------------------------------------------------------------------------------------
# Zhongdao/Towards-Realtime-MOT
# ----------------------------------------------------------------------------------------------------------------


def _jde_bbox_iou(box1, box2, x1y1x2y2=False):
    """
    Returns the IoU of two bounding boxes
    """
    N, M = len(box1), len(box2)
    if x1y1x2y2:
        # Get the coordinates of bounding boxes
        b1_x1, b1_y1, b1_x2, b1_y2 = box1[:, 0], box1[:, 1], box1[:, 2], box1[:, 3]
        b2_x1, b2_y1, b2_x2, b2_y2 = box2[:, 0], box2[:, 1], box2[:, 2], box2[:, 3]
    else:
        # Transform from center and width to exact coordinates
        b1_x1, b1_x2 = box1[:, 0] - box1[:, 2] / 2, box1[:, 0] + box1[:, 2] / 2
        b1_y1, b1_y2 = box1[:, 1] - box1[:, 3] / 2, box1[:, 1] + box1[:, 3] / 2
        b2_x1, b2_x2 = box2[:, 0] - box2[:, 2] / 2, box2[:, 0] + box2[:, 2] / 2
        b2_y1, b2_y2 = box2[:, 1] - box2[:, 3] / 2, box2[:, 1] + box2[:, 3] / 2

    # get the coordinates of the intersection rectangle
    inter_rect_x1 = torch.max(b1_x1.unsqueeze(1), b2_x1)
    inter_rect_y1 = torch.max(b1_y1.unsqueeze(1), b2_y1)
    inter_rect_x2 = torch.min(b1_x2.unsqueeze(1), b2_x2)
    inter_rect_y2 = torch.min(b1_y2.unsqueeze(1), b2_y2)
    # Intersection area
    inter_area = torch.clamp(inter_rect_x2 - inter_rect_x1, 0) * torch.clamp(inter_rect_y2 - inter_rect_y1, 0)
    # Union Area
    b1_area = ((b1_x2 - b1_x1) * (b1_y2 - b1_y1))
    b1_area = ((b1_x2 - b1_x1) * (b1_y2 - b1_y1)).view(-1,1).expand(N,M)
    b2_area = ((b2_x2 - b2_x1) * (b2_y2 - b2_y1)).view(1,-1).expand(N,M)

    return inter_area / (b1_area + b2_area - inter_area + 1e-16)


def _jde_generate_anchor(nGh, nGw, anchor_wh):
    nA = len(anchor_wh)
    yy, xx =torch.meshgrid(torch.arange(nGh), torch.arange(nGw))

    mesh = torch.stack([xx, yy], dim=0)                                              # Shape 2, nGh, nGw
    mesh = mesh.unsqueeze(0).repeat(nA,1,1,1).float()                                # Shape nA x 2 x nGh x nGw
    anchor_offset_mesh = anchor_wh.unsqueeze(-1).unsqueeze(-1).repeat(1, 1, nGh,nGw) # Shape nA x 2 x nGh x nGw
    anchor_mesh = torch.cat([mesh, anchor_offset_mesh], dim=1)                       # Shape nA x 4 x nGh x nGw
    return anchor_mesh


def _jde_encode_delta(gt_box_list, fg_anchor_list):
    px, py, pw, ph = fg_anchor_list[:, 0], fg_anchor_list[:,1], \
                     fg_anchor_list[:, 2], fg_anchor_list[:,3]
    gx, gy, gw, gh = gt_box_list[:, 0], gt_box_list[:, 1], \
                     gt_box_list[:, 2], gt_box_list[:, 3]
    dx = (gx - px) / pw
    dy = (gy - py) / ph
    dw = torch.log(gw/pw)
    dh = torch.log(gh/ph)
    return torch.stack([dx, dy, dw, dh], dim=1)


def _jde_decode_delta(delta, fg_anchor_list):
    px, py, pw, ph = fg_anchor_list[:, 0], fg_anchor_list[:,1], \
                     fg_anchor_list[:, 2], fg_anchor_list[:,3]
    dx, dy, dw, dh = delta[:, 0], delta[:, 1], delta[:, 2], delta[:, 3]
    gx = pw * dx + px
    gy = ph * dy + py
    gw = pw * torch.exp(dw)
    gh = ph * torch.exp(dh)
    return torch.stack([gx, gy, gw, gh], dim=1)


def _jde_decode_delta_map(delta_map, anchors):
    '''
    :param: delta_map, shape (nB, nA, nGh, nGw, 4)
    :param: anchors, shape (nA,4)
    '''
    nB, nA, nGh, nGw, _ = delta_map.shape
    anchor_mesh = _jde_generate_anchor(nGh, nGw, anchors)
    anchor_mesh = anchor_mesh.permute(0,2,3,1).contiguous()              # Shpae (nA x nGh x nGw) x 4
    anchor_mesh = anchor_mesh.unsqueeze(0).repeat(nB,1,1,1,1)
    pred_list = _jde_decode_delta(delta_map.view(-1,4), anchor_mesh.view(-1,4))
    pred_map = pred_list.view(nB, nA, nGh, nGw, 4)
    return pred_map


def _jde_build_targets_thres(target, anchor_wh, nA, nC, nGh, nGw):
    ID_THRESH = 0.5
    FG_THRESH = 0.5
    BG_THRESH = 0.4
    nB = len(target)  # number of images in batch
    assert(len(anchor_wh)==nA)

    tbox = torch.zeros(nB, nA, nGh, nGw, 4)  # batch size, anchors, grid size
    tconf = torch.LongTensor(nB, nA, nGh, nGw).fill_(0)
    tid = torch.LongTensor(nB, nA, nGh, nGw, 1).fill_(-1)
    for b in range(nB):
        t = target[b]
        t_id = t[:, 1].clone().long()
        t = t[:,[0,2,3,4,5]]
        nTb = len(t)  # number of targets
        if nTb == 0:
            continue

        gxy, gwh = t[: , 1:3].clone() , t[:, 3:5].clone()
        gxy[:, 0] = gxy[:, 0] * nGw
        gxy[:, 1] = gxy[:, 1] * nGh
        gwh[:, 0] = gwh[:, 0] * nGw
        gwh[:, 1] = gwh[:, 1] * nGh
        gxy[:, 0] = torch.clamp(gxy[:, 0], min=0, max=nGw -1)
        gxy[:, 1] = torch.clamp(gxy[:, 1], min=0, max=nGh -1)

        gt_boxes = torch.cat([gxy, gwh], dim=1)                                            # Shape Ngx4 (xc, yc, w, h)

        anchor_mesh = _jde_generate_anchor(nGh, nGw, anchor_wh)
        anchor_list = anchor_mesh.permute(0,2,3,1).contiguous().view(-1, 4)              # Shpae (nA x nGh x nGw) x 4
        iou_pdist = _jde_bbox_iou(anchor_list, gt_boxes)                                 # Shape (nA x nGh x nGw) x Ng
        iou_max, max_gt_index = torch.max(iou_pdist, dim=1)                              # Shape (nA x nGh x nGw), both

        iou_map = iou_max.view(nA, nGh, nGw)
        gt_index_map = max_gt_index.view(nA, nGh, nGw)

        id_index = iou_map > ID_THRESH
        fg_index = iou_map > FG_THRESH
        bg_index = iou_map < BG_THRESH
        ign_index = (iou_map < FG_THRESH) * (iou_map > BG_THRESH)
        tconf[b][fg_index] = 1
        tconf[b][bg_index] = 0
        tconf[b][ign_index] = -1

        gt_index = gt_index_map[fg_index]
        gt_box_list = gt_boxes[gt_index]
        gt_id_list = t_id[gt_index_map[id_index]]
        if torch.sum(fg_index) > 0:
            tid[b][id_index] =  gt_id_list.unsqueeze(1)
            fg_anchor_list = anchor_list.view(nA, nGh, nGw, 4)[fg_index]
            delta_target = _jde_encode_delta(gt_box_list, fg_anchor_list)
            tbox[b][fg_index] = delta_target
    return tconf, tbox, tid


# Zhongdao/Towards-Realtime-MOT, utils/utils.py: build_targets_thres (with generate_anchor, bbox_iou,
# encode_delta) for 2 images of 5 targets each (class 0, track id, normalized xc, yc, w, h built from raw input), 4
# anchors of sizes in grid cells, a 6x8 grid; and decode_delta_map of a prediction map with the same anchors; `.cuda()`
# dropped
def jde_build_targets_and_decode(
    target_raw: f32[2, 5, 6], anchor_raw: f32[4, 2], ids: i64[2, 5], delta_map: f32[2, 4, 6, 8, 4]
) -> tuple[i64[2, 4, 6, 8], f32[2, 4, 6, 8, 4], i64[2, 4, 6, 8, 1], f32[2, 4, 6, 8, 4]]:
    anchor_wh = anchor_raw.abs() * 2.5 + 0.5
    targets = []
    for b in range(2):
        r = target_raw[b]
        t = torch.stack([
            torch.zeros_like(r[:, 0]),
            ids[b].float(),
            (r[:, 2] + 1) * 0.45 + 0.05,
            (r[:, 3] + 1) * 0.45 + 0.05,
            r[:, 4].abs() * 0.35 + 0.05,
            r[:, 5].abs() * 0.35 + 0.05,
        ], dim=1)
        targets.append(t)
    tconf, tbox, tid = _jde_build_targets_thres(targets, anchor_wh, 4, 1, 6, 8)
    pred_map = _jde_decode_delta_map(delta_map, anchor_wh)
    return tconf, tbox, tid, pred_map


# ----------------------------------------------------------------------------------------------------------------
# MaximumEntropy/Seq2Seq-PyTorch
# ----------------------------------------------------------------------------------------------------------------


class LSTMAttention(nn.Module):
    r"""A long short-term memory (LSTM) cell with attention."""

    def __init__(self, input_size, hidden_size, context_size, w):
        """Initialize params."""
        super(LSTMAttention, self).__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.context_size = context_size
        self.num_layers = 1

        self.input_weights_1 = nn.Parameter(w['input_weights_1'], requires_grad=False)
        self.hidden_weights_1 = nn.Parameter(w['hidden_weights_1'], requires_grad=False)
        self.input_bias_1 = nn.Parameter(w['input_bias_1'], requires_grad=False)
        self.hidden_bias_1 = nn.Parameter(w['hidden_bias_1'], requires_grad=False)

        self.input_weights_2 = nn.Parameter(w['input_weights_2'], requires_grad=False)
        self.hidden_weights_2 = nn.Parameter(w['hidden_weights_2'], requires_grad=False)
        self.input_bias_2 = nn.Parameter(w['input_bias_2'], requires_grad=False)
        self.hidden_bias_2 = nn.Parameter(w['hidden_bias_2'], requires_grad=False)

        self.context2attention = nn.Parameter(w['context2attention'], requires_grad=False)
        self.bias_context2attention = nn.Parameter(w['bias_context2attention'], requires_grad=False)

        self.hidden2attention = nn.Parameter(w['hidden2attention'], requires_grad=False)

        self.input2attention = nn.Parameter(w['input2attention'], requires_grad=False)

        self.recurrent2attention = nn.Parameter(w['recurrent2attention'], requires_grad=False)

    def forward(self, input, hidden, ctx, ctx_mask=None):
        """Propogate input through the network."""
        def recurrence(input, hidden, projected_input, projected_ctx):
            """Recurrence helper."""
            hx, cx = hidden  # n_b x hidden_dim

            gates = F.linear(
                input, self.input_weights_1, self.input_bias_1
            ) + F.linear(hx, self.hidden_weights_1, self.hidden_bias_1)
            ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)

            ingate = F.sigmoid(ingate)
            forgetgate = F.sigmoid(forgetgate)
            cellgate = F.tanh(cellgate)
            outgate = F.sigmoid(outgate)

            cy = (forgetgate * cx) + (ingate * cellgate)
            hy = outgate * F.tanh(cy)  # n_b x hidden_dim

            # Attention mechanism

            # Project current hidden state to context size
            hidden_ctx = F.linear(hy, self.hidden2attention)

            # Added projected hidden state to each projected context
            hidden_ctx_sum = projected_ctx + hidden_ctx.unsqueeze(0).expand(
                projected_ctx.size()
            )

            # Add this to projected input at this time step
            hidden_ctx_sum = hidden_ctx_sum + \
                projected_input.unsqueeze(0).expand(hidden_ctx_sum.size())

            # Non-linearity
            hidden_ctx_sum = F.tanh(hidden_ctx_sum)

            # Compute alignments
            alpha = torch.bmm(
                hidden_ctx_sum.transpose(0, 1),
                self.recurrent2attention.unsqueeze(0).expand(
                    hidden_ctx_sum.size(1),
                    self.recurrent2attention.size(0),
                    self.recurrent2attention.size(1)
                )
            ).squeeze()
            alpha = F.softmax(alpha)
            weighted_context = torch.mul(
                ctx, alpha.t().unsqueeze(2).expand(ctx.size())
            ).sum(0).squeeze()

            gates = F.linear(
                weighted_context, self.input_weights_2, self.input_bias_2
            ) + F.linear(hy, self.hidden_weights_2, self.hidden_bias_2)
            ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)

            ingate = F.sigmoid(ingate)
            forgetgate = F.sigmoid(forgetgate)
            cellgate = F.tanh(cellgate)
            outgate = F.sigmoid(outgate)

            cy = (forgetgate * cy) + (ingate * cellgate)
            hy = outgate * F.tanh(cy)  # n_b x hidden_dim

            return hy, cy

        input = input.transpose(0, 1)
        projected_ctx = torch.bmm(
            ctx,
            self.context2attention.unsqueeze(0).expand(
                ctx.size(0),
                self.context2attention.size(0),
                self.context2attention.size(1)
            ),
        )
        projected_ctx += \
            self.bias_context2attention.unsqueeze(0).unsqueeze(0).expand(
                projected_ctx.size()
            )

        projected_input = torch.bmm(
            input,
            self.input2attention.unsqueeze(0).expand(
                input.size(0),
                self.input2attention.size(0),
                self.input2attention.size(1)
            ),
        )

        output = []
        steps = range(input.size(0))
        for i in steps:
            hidden = recurrence(
                input[i], hidden, projected_input[i], projected_ctx
            )
            # the original's `isinstance(hidden, tuple) and hidden[0] or hidden` asks a multi-element tensor for its
            # truth value, which PyTorch rejects; written as the conditional expression it means
            output.append(hidden[0] if isinstance(hidden, tuple) else hidden)

        output = torch.cat(output, 0).view(input.size(0), *output[0].size())

        return output, hidden


# MaximumEntropy/Seq2Seq-PyTorch, model.py: LSTMAttention.forward (two LSTM stages per step with additive attention
# over a time-major context in between; batch-first target input transposed to time-major as the original does);
# batch 2, 4 target steps of size 5, hidden 6, 3 source positions of context size 6
def seq2seq_lstm_attention(
    x: f32[2, 4, 5], h0: f32[2, 6], c0: f32[2, 6], ctx: f32[3, 2, 6], iw1: f32[24, 5], hw1: f32[24, 6],
    ib1: f32[24], hb1: f32[24], iw2: f32[24, 6], hw2: f32[24, 6], ib2: f32[24], hb2: f32[24], c2a: f32[6, 6],
    bc2a: f32[6], h2a: f32[6, 6], i2a: f32[5, 6], r2a: f32[6, 1]
) -> tuple[f32[4, 2, 6], f32[2, 6], f32[2, 6]]:
    w = dict(input_weights_1=iw1, hidden_weights_1=hw1, input_bias_1=ib1, hidden_bias_1=hb1, input_weights_2=iw2,
             hidden_weights_2=hw2, input_bias_2=ib2, hidden_bias_2=hb2, context2attention=c2a,
             bias_context2attention=bc2a, hidden2attention=h2a, input2attention=i2a, recurrent2attention=r2a)
    cell = LSTMAttention(5, 6, 6, w)
    output, (h, c) = cell(x, (h0, c0), ctx)
    return output, h, c


# ----------------------------------------------------------------------------------------------------------------
# Infini-AI-Lab/TriForce
# ----------------------------------------------------------------------------------------------------------------


class Cache:
    """
    Base, abstract class for all caches. The actual data structure is specific to each subclass.
    """
    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError("Make sure to implement `update` in a subclass.")


class FlashSimpleCache(Cache):
    def __init__(self, model, max_budget=1024) -> None:
        self.seq_len = 0
        self.max_budget = max_budget

        self.hidden_size = model.config.hidden_size
        self.num_heads = model.config.num_key_value_heads
        self.head_dim = self.hidden_size // model.config.num_attention_heads
        self.layers = model.config.num_hidden_layers

        dtype = model.model.layers[0].self_attn.q_proj.weight.dtype

        self.key_cache = torch.zeros([self.layers, 1, self.max_budget, self.num_heads, self.head_dim], dtype=dtype).to(model.device)
        self.value_cache = torch.zeros([self.layers, 1, self.max_budget, self.num_heads, self.head_dim], dtype=dtype).to(model.device)

        self.scores = []

    def reset(self):
        self.seq_len = 0
        for i in range(self.layers):
            self.key_cache[i].zero_()
            self.value_cache[i].zero_()

    def update(
        self,
        key_states: torch.Tensor,
        value_states: torch.Tensor,
        layer_idx: int,
    ) -> Tuple[torch.Tensor, torch.Tensor]:
        self.key_cache[layer_idx][:, self.seq_len : self.seq_len + key_states.shape[-3]] = key_states
        self.value_cache[layer_idx][:, self.seq_len : self.seq_len + value_states.shape[-3]] = value_states

        key = self.key_cache[layer_idx][:, :self.seq_len + value_states.shape[-3]]
        value = self.value_cache[layer_idx][:, :self.seq_len + value_states.shape[-3]]

        if layer_idx == self.layers-1:
            self.seq_len += key_states.shape[-3]

        return key, value


class RetrievalCache(Cache):
    def __init__(self, model, max_budget=1024, prefill=1024, chunk_size=8, gamma=6) -> None:

        self.chunk_size = chunk_size
        self.prefill = prefill
        self.chunks = prefill // self.chunk_size
        self.select_sets = max_budget // self.chunk_size
        self.gamma = gamma
        self.max_budget = max_budget
        assert prefill % self.chunk_size == 0, f"prefill should be multiple of chunk_size, got {prefill} % {self.chunk_size}"
        assert max_budget % self.chunk_size == 0, f"max_budget should be multiple of chunk_size, got {max_budget} % {self.chunk_size}"

        self.real_budget = max_budget + gamma + 1

        self.hidden_size = model.config.hidden_size
        self.num_heads = model.config.num_key_value_heads
        self.head_dim = self.hidden_size // model.config.num_attention_heads
        self.layers = model.config.num_hidden_layers

        dtype = model.model.layers[0].self_attn.q_proj.weight.dtype

        self.key_cache = torch.zeros([self.layers, 1, self.real_budget, self.num_heads, self.head_dim], dtype=dtype).to(model.device)
        self.value_cache = torch.zeros([self.layers, 1, self.real_budget, self.num_heads, self.head_dim], dtype=dtype).to(model.device)

        self.init_graph = False

    def init_graph_cache(self, kv_cache, query_states, layer_idx):

        # query_states: (bsz, 1, 32, head_dim) --> (bsz, 32, 1, head_dim)
        # key_cache: (bsz, seq_len, 32, head_dim) --> (bsz, 32, head_dim, seq_len)

        assert 1 == query_states.shape[1], "query_states should be 1 for init"

        chunk_k = kv_cache.key_cache[layer_idx,:,:self.prefill].view(1, self.chunks, self.chunk_size, self.num_heads, self.head_dim).mean(dim=-3)

        # (bsz, 32, chunks)
        chunk_attn = torch.matmul(query_states.permute(0, 2, 1, 3), chunk_k.permute(0, 2, 3, 1)).squeeze(2)
        # (bsz, 32, select_sets) --> (bsz, select_sets, 32)
        _, topk_idx_rest = torch.topk(chunk_attn[:, :, 1:], k=self.select_sets-1, dim=-1)
        topk_idx_rest += 1
        topk_idx_first = torch.zeros((topk_idx_rest.shape[0], topk_idx_rest.shape[1], 1), device=topk_idx_rest.device, dtype=topk_idx_rest.dtype)
        topk_idx = torch.cat([topk_idx_first, topk_idx_rest], dim=-1)  # (bsz, 32, select_sets)
        expanded_index_tensor = topk_idx.permute(0, 2, 1).unsqueeze(-1).unsqueeze(-1).expand(-1, -1, -1, self.chunk_size, self.head_dim)

        # (bsz, prefill, 32, head_dim) --> (bsz, chunks, chunk_size, 32, head_dim) --> (bsz, chunks, 32, chunk_size, head_dim)
        key_ = kv_cache.key_cache[layer_idx][:, :self.prefill].reshape(1, self.chunks, self.chunk_size, self.num_heads, self.head_dim)
        key_ = key_.permute(0, 1, 3, 2, 4)
        result_tensor = torch.gather(key_, 1, expanded_index_tensor) # (bsz, select_sets, 32, chunk_size, head_dim)
        # (bsz, select_sets, 32, chunk_size, head_dim) --> (bsz, select_sets*chunk_size, 32, head_dim)
        self.key_cache[layer_idx][:,:self.max_budget] = result_tensor.permute(0, 1, 3, 2, 4).reshape(1, self.select_sets*self.chunk_size, self.num_heads, self.head_dim).clone()

        value_ = kv_cache.value_cache[layer_idx][:, :self.prefill].reshape(1, self.chunks, self.chunk_size, self.num_heads, self.head_dim)
        value_ = value_.permute(0, 1, 3, 2, 4)
        result_tensor = torch.gather(value_, 1, expanded_index_tensor)
        self.value_cache[layer_idx][:,:self.max_budget] = result_tensor.permute(0, 1, 3, 2, 4).reshape(1, self.select_sets*self.chunk_size, self.num_heads, self.head_dim).clone()

        if layer_idx == self.layers-1:
            self.init_graph = True

    def update_graph_cache(self, kv_cache=None):
        self.value_cache[:,:,self.max_budget-(kv_cache.seq_len-self.prefill):self.max_budget] = kv_cache.value_cache[:,:, self.prefill:kv_cache.seq_len].clone()
        self.key_cache[:,:,self.max_budget-(kv_cache.seq_len-self.prefill):self.max_budget] = kv_cache.key_cache[:,:, self.prefill:kv_cache.seq_len].clone()

    def update(self, new_k_cache :torch.Tensor, new_v_cache :torch.Tensor, layer_idx :int):

        self.key_cache[layer_idx][:, self.real_budget-self.gamma-1:] = new_k_cache.clone()
        self.value_cache[layer_idx][:, self.real_budget-self.gamma-1:] = new_v_cache.clone()

        return self.key_cache[layer_idx][:,:self.real_budget], self.value_cache[layer_idx][:,:self.real_budget]

    def update_graph_cache_retrieval(self, kv_cache, query_states, layer_idx):
        self.init_graph_cache(kv_cache, query_states, layer_idx)
        self.value_cache[layer_idx,:,self.max_budget-(kv_cache.seq_len-self.prefill):self.max_budget] = kv_cache.value_cache[layer_idx,:, self.prefill:kv_cache.seq_len].clone()
        self.key_cache[layer_idx,:,self.max_budget-(kv_cache.seq_len-self.prefill):self.max_budget] = kv_cache.key_cache[layer_idx,:, self.prefill:kv_cache.seq_len].clone()

    def reset(self):
        self.key_cache.zero_()
        self.value_cache.zero_()


class _LlamaConfig:
    """Stand-in for the HF LlamaConfig fields the code reads."""

    def __init__(self, hidden_size, num_attention_heads, num_key_value_heads, num_hidden_layers=1, pretraining_tp=1,
                 max_position_embeddings=2048):
        self.hidden_size = hidden_size
        self.num_attention_heads = num_attention_heads
        self.num_key_value_heads = num_key_value_heads
        self.num_hidden_layers = num_hidden_layers
        self.pretraining_tp = pretraining_tp
        self.max_position_embeddings = max_position_embeddings


class _ProjStandIn:
    def __init__(self, weight):
        self.weight = weight


class _AttnStandIn:
    def __init__(self, q_proj):
        self.q_proj = q_proj


class _LayerStandIn:
    def __init__(self, self_attn):
        self.self_attn = self_attn


class _InnerModelStandIn:
    def __init__(self, layers):
        self.layers = layers


class _ModelStandIn:
    """Stand-in for the HF LlamaForCausalLM attributes the caches read (config, model.layers, device)."""

    def __init__(self, config, model, device):
        self.config = config
        self.model = model
        self.device = device


# Infini-AI-Lab/TriForce, models/cache.py: FlashSimpleCache.update over a 32-token prefill and 2 decode tokens per
# layer, RetrievalCache.update_graph_cache_retrieval per layer for a decode query (chunk-mean keys, top chunks, gather
# into the budget, the tokens after prefill appended), then RetrievalCache.update with gamma + 1 speculated tokens;
# 2 layers, 2 KV heads of dim 8, budget 16 in chunks of 4, gamma 2; a stand-in model object carries the config
def triforce_retrieval_cache(
    k_pre: f32[2, 1, 32, 2, 8], v_pre: f32[2, 1, 32, 2, 8], k_dec: f32[2, 2, 1, 1, 2, 8], v_dec: f32[2, 2, 1, 1, 2, 8],
    query: f32[2, 1, 1, 2, 8], k_spec: f32[2, 1, 3, 2, 8], v_spec: f32[2, 1, 3, 2, 8]
) -> tuple[f32[2, 1, 19, 2, 8], f32[2, 1, 19, 2, 8], f32[2, 1, 48, 2, 8], f32[1, 19, 2, 8], f32[1, 34, 2, 8]]:
    config = _LlamaConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2)
    q_proj = _ProjStandIn(torch.zeros(16, 16))
    model = _ModelStandIn(config, _InnerModelStandIn([_LayerStandIn(_AttnStandIn(q_proj))]), torch.device("cpu"))
    kv_cache = FlashSimpleCache(model, max_budget=48)
    for layer_idx in range(2):
        kv_cache.update(k_pre[layer_idx], v_pre[layer_idx], layer_idx)
    for step in range(2):
        for layer_idx in range(2):
            key, value = kv_cache.update(k_dec[step, layer_idx], v_dec[step, layer_idx], layer_idx)
    graph_cache = RetrievalCache(model, max_budget=16, prefill=32, chunk_size=4, gamma=2)
    for layer_idx in range(2):
        graph_cache.update_graph_cache_retrieval(kv_cache, query[layer_idx], layer_idx)
    for layer_idx in range(2):
        spec_key, spec_value = graph_cache.update(k_spec[layer_idx], v_spec[layer_idx], layer_idx)
    return graph_cache.key_cache, graph_cache.value_cache, kv_cache.value_cache, spec_key, key


# ----------------------------------------------------------------------------------------------------------------
# NVIDIA/apex
# ----------------------------------------------------------------------------------------------------------------


class LARC(object):
    def __init__(self, optimizer, trust_coefficient=0.02, clip=True, eps=1e-8):
        self.optim = optimizer
        self.trust_coefficient = trust_coefficient
        self.eps = eps
        self.clip = clip

    def __getstate__(self):
        return self.optim.__getstate__()

    def __setstate__(self, state):
        self.optim.__setstate__(state)

    @property
    def state(self):
        return self.optim.state

    def __repr__(self):
        return self.optim.__repr__()

    @property
    def param_groups(self):
        return self.optim.param_groups

    @param_groups.setter
    def param_groups(self, value):
        self.optim.param_groups = value

    def state_dict(self):
        return self.optim.state_dict()

    def load_state_dict(self, state_dict):
        self.optim.load_state_dict(state_dict)

    def zero_grad(self):
        self.optim.zero_grad()

    def add_param_group(self, param_group):
        self.optim.add_param_group( param_group)

    def step(self):
        with torch.no_grad():
            weight_decays = []
            for group in self.optim.param_groups:
                # absorb weight decay control from optimizer
                weight_decay = group['weight_decay'] if 'weight_decay' in group else 0
                weight_decays.append(weight_decay)
                group['weight_decay'] = 0
                for p in group['params']:
                    if p.grad is None:
                        continue
                    param_norm = torch.norm(p.data)
                    grad_norm = torch.norm(p.grad.data)

                    if param_norm != 0 and grad_norm != 0:
                        # calculate adaptive lr + weight decay
                        adaptive_lr = self.trust_coefficient * (param_norm) / (grad_norm + param_norm * weight_decay + self.eps)

                        # clip learning rate for LARC
                        if self.clip:
                            # calculation of adaptive_lr so that when multiplied by lr it equals `min(adaptive_lr, lr)`
                            adaptive_lr = min(adaptive_lr/group['lr'], 1)

                        p.grad.data += weight_decay * p.data
                        p.grad.data *= adaptive_lr

        self.optim.step()
        # return weight decay control to optimizer
        for i, group in enumerate(self.optim.param_groups):
            group['weight_decay'] = weight_decays[i]


# NVIDIA/apex, apex/parallel/LARC.py: LARC.step (trust coefficient 0.02, clip mode) around torch.optim.SGD (lr 0.1,
# momentum 0.9, weight decay 5e-4, absorbed by LARC during the step); three steps on a weight matrix (local lr under
# the SGD lr) and a bias (gradients scaled down, so its local lr is clipped to the SGD lr); LARC rescales the assigned
# gradients in place (the weight's gradients are views of the input gw)
def apex_larc_sgd_steps(
    w: f32[8, 6], b: f32[8], gw: f32[3, 8, 6], gb: f32[3, 8]
) -> tuple[f32[8, 6], f32[8], f32[3, 8, 6], f32[3, 8]]:
    base = torch.optim.SGD([w, b], lr=0.1, momentum=0.9, weight_decay=5e-4)
    opt = LARC(base, trust_coefficient=0.02, clip=True)
    for k in range(3):
        w.grad = gw[k]
        b.grad = gb[k] * 0.001
        opt.step()
    return w, b, gw, gb


# ----------------------------------------------------------------------------------------------------------------
# facebookresearch/XLM
# ----------------------------------------------------------------------------------------------------------------


class Adam(optim.Optimizer):
    """
    Same as https://github.com/pytorch/pytorch/blob/master/torch/optim/adam.py,
    without amsgrad, with step in a tensor, and states initialization in __init__.
    It was important to add `.item()` in `state['step'].item()`.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
        super().__init__(params, defaults)

        for group in self.param_groups:
            for p in group['params']:
                state = self.state[p]
                state['step'] = 0  # torch.zeros(1)
                state['exp_avg'] = torch.zeros_like(p.data)
                state['exp_avg_sq'] = torch.zeros_like(p.data)

    def __setstate__(self, state):
        super().__setstate__(state)

    def step(self, closure=None):
        """
        Step.
        """
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                if grad.is_sparse:
                    raise RuntimeError('Adam does not support sparse gradients, please consider SparseAdam instead')

                state = self.state[p]

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                beta1, beta2 = group['betas']

                state['step'] += 1

                # if group['weight_decay'] != 0:
                #     grad.add_(group['weight_decay'], p.data)

                # Decay the first and second moment running average coefficient
                exp_avg.mul_(beta1).add_(1 - beta1, grad)
                exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)
                denom = exp_avg_sq.sqrt().add_(group['eps'])
                # denom = exp_avg_sq.sqrt().clamp_(min=group['eps'])

                bias_correction1 = 1 - beta1 ** state['step']  # .item()
                bias_correction2 = 1 - beta2 ** state['step']  # .item()
                step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1

                if group['weight_decay'] != 0:
                    p.data.add_(-group['weight_decay'] * group['lr'], p.data)

                p.data.addcdiv_(-step_size, exp_avg, denom)

        return loss


class AdamInverseSqrtWithWarmup(Adam):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0, warmup_updates=4000, warmup_init_lr=1e-7,
                 exp_factor=0.5):
        super().__init__(
            params,
            lr=warmup_init_lr,
            betas=betas,
            eps=eps,
            weight_decay=weight_decay,
        )

        # linearly warmup for the first warmup_updates
        self.warmup_updates = warmup_updates
        self.warmup_init_lr = warmup_init_lr
        warmup_end_lr = lr
        self.lr_step = (warmup_end_lr - warmup_init_lr) / warmup_updates

        # then, decay prop. to the inverse square root of the update number
        self.exp_factor = exp_factor
        self.decay_factor = warmup_end_lr * warmup_updates ** self.exp_factor

        # total number of updates
        for param_group in self.param_groups:
            param_group['num_updates'] = 0

    def get_lr_for_step(self, num_updates):
        if num_updates < self.warmup_updates:
            return self.warmup_init_lr + num_updates * self.lr_step
        else:
            return self.decay_factor * (num_updates ** -self.exp_factor)

    def step(self, closure=None):
        super().step(closure)
        for param_group in self.param_groups:
            param_group['num_updates'] += 1
            param_group['lr'] = self.get_lr_for_step(param_group['num_updates'])


# facebookresearch/XLM, xlm/optim.py: AdamInverseSqrtWithWarmup.step (its Adam.step with the legacy positional
# add_/addcmul_/addcdiv_ overloads and decoupled weight decay 0.01, then the per-group warmup / inverse-sqrt learning
# rate: lr 0.01, 2 warmup updates from 1e-4); five steps on a weight matrix and a bias
def xlm_adam_inverse_sqrt_steps(
    w: f32[4, 9], b: f32[4], gw: f32[5, 4, 9], gb: f32[5, 4]
) -> tuple[f32[4, 9], f32[4]]:
    opt = AdamInverseSqrtWithWarmup([w, b], lr=0.01, weight_decay=0.01, warmup_updates=2, warmup_init_lr=1e-4)
    for k in range(5):
        w.grad = gw[k]
        b.grad = gb[k]
        opt.step()
    return w, b


# ----------------------------------------------------------------------------------------------------------------
# zeke-xie/stable-weight-decay-regularization
# ----------------------------------------------------------------------------------------------------------------


class AdamS(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=1e-4, amsgrad=False):
        if not 0.0 <= lr:
            raise ValueError("Invalid learning rate: {}".format(lr))
        if not 0.0 <= eps:
            raise ValueError("Invalid epsilon value: {}".format(eps))
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError("Invalid beta parameter at index 0: {}".format(betas[0]))
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError("Invalid beta parameter at index 1: {}".format(betas[1]))
        if not 0.0 <= weight_decay:
            raise ValueError("Invalid weight_decay value: {}".format(weight_decay))
        defaults = dict(lr=lr, betas=betas, eps=eps,
                        weight_decay=weight_decay, amsgrad=amsgrad)
        super(AdamS, self).__init__(params, defaults)

    def __setstate__(self, state):
        super(AdamS, self).__setstate__(state)
        for group in self.param_groups:
            group.setdefault('amsgrad', False)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()

        param_size = 0
        exp_avg_sq_hat_sum = 0.

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                param_size += p.numel()

                # Perform optimization step
                grad = p.grad
                if grad.is_sparse:
                    raise RuntimeError('AdamS does not support sparse gradients')
                amsgrad = group['amsgrad']

                state = self.state[p]

                # State initialization
                if len(state) == 0:
                    state['step'] = 0
                    # Exponential moving average of gradient values
                    state['exp_avg'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    # Exponential moving average of squared gradient values
                    state['exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)
                    if amsgrad:
                        # Maintains max of all exp. moving avg. of sq. grad. values
                        state['max_exp_avg_sq'] = torch.zeros_like(p, memory_format=torch.preserve_format)

                beta1, beta2 = group['betas']
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']

                state['step'] += 1
                bias_correction2 = 1 - beta2 ** state['step']

                # Decay the first and second moment running average coefficient
                exp_avg.mul_(beta1).add_(grad, alpha=1 - beta1)
                exp_avg_sq.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
                if amsgrad:
                    max_exp_avg_sq = state['max_exp_avg_sq']
                    # Maintains the maximum of all 2nd moment running avg. till now
                    torch.max(max_exp_avg_sq, exp_avg_sq, out=max_exp_avg_sq)
                    # Use the max. for normalizing running avg. of gradient
                    exp_avg_sq_hat = max_exp_avg_sq / bias_correction2
                else:
                    exp_avg_sq_hat = exp_avg_sq / bias_correction2

                exp_avg_sq_hat_sum += exp_avg_sq_hat.sum()

        # Calculate the sqrt of the mean of all elements in exp_avg_sq_hat
        exp_avg_mean_sqrt = math.sqrt(exp_avg_sq_hat_sum / param_size)

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue

                state = self.state[p]

                #Perform stable weight decay
                if group['weight_decay'] !=0:
                    p.data.mul_(1 - group['weight_decay'] * group['lr'] / exp_avg_mean_sqrt)

                beta1, beta2 = group['betas']
                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                bias_correction1 = 1 - beta1 ** state['step']
                bias_correction2 = 1 - beta2 ** state['step']

                if amsgrad:
                    max_exp_avg_sq = state['max_exp_avg_sq']
                    exp_avg_sq_hat = max_exp_avg_sq / bias_correction2
                else:
                    exp_avg_sq_hat = exp_avg_sq / bias_correction2

                denom = exp_avg_sq_hat.sqrt().add(group['eps'])

                step_size = group['lr'] / bias_correction1
                p.addcdiv_(exp_avg, denom, value= - step_size)

        return loss


# zeke-xie/stable-weight-decay-regularization, swd_optim/adams.py: AdamS.step with amsgrad (lr 0.01, weight decay
# 0.05 scaled by the root-mean of the bias-corrected second moments over all parameters); two parameter groups, a
# third parameter that never gets a gradient (skipped); three steps
def adams_stable_weight_decay_steps(
    w: f32[4, 7], b: f32[4], frozen: f32[3], gw: f32[3, 4, 7], gb: f32[3, 4]
) -> tuple[f32[4, 7], f32[4], f32[3]]:
    opt = AdamS([{'params': [w, frozen]}, {'params': [b], 'weight_decay': 0.0}], lr=0.01, weight_decay=0.05,
                amsgrad=True)
    for k in range(3):
        w.grad = gw[k]
        b.grad = gb[k] * (k + 1)
        opt.step()
    return w, b, frozen
