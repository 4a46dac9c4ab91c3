"""Held-out real code, issue 14's twenty-first round, the programs some engine refuses (the round's others are in
corpus/real/heldout21.py): mmdetection's ATSSAssigner, yolov5's ComputeLoss, S4D, Hugging Face's
WhisperTimeStampLogitsProcessor and SAM; mistral-inference's BufferCache, pending at first, is in
corpus/real/heldout21.py now. The round: EfficientDet's (zylo117) BBoxTransform and ClipBoxes, CornerNet's
_decode, mmdetection's ATSSAssigner, yolov5's ComputeLoss with build_targets; EdgeML's bidirectional FastGRNN, S4D
(complex kernel and FFT convolution), mamba.py's Blelloch pscan under its selective scan, the gated Lipschitz RNN;
GPT-NeoX's partial rotary attention at a decode step with layer_past, Hugging Face's WhisperTimeStampLogitsProcessor,
text-generation-inference's heterogeneous next-token chooser, mistral-inference's BufferCache over prefill, subsequent
prefill and decode; Fromage, Adai, SAM (adaptive) around SGD, timm's Lamb with global grad-norm clipping. Ported by a
helper from its reading of the originals. Inputs arrive uniform in [-1, 1); integer inputs in [0, 10)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# ---------------------------------------------------------------------------------------------------------------
# Detection
# ---------------------------------------------------------------------------------------------------------------

# mmdetection (open-mmlab/mmdetection, v2.x), mmdet/core/bbox/iou_calculators/iou2d_calculator.py: bbox_overlaps
# (mode "iou", is_aligned False, eps 1e-6; fp16_clamp is a plain clamp for float32)
def _mm_bbox_overlaps(bboxes1, bboxes2, mode='iou', is_aligned=False, eps=1e-6):
    batch_shape = bboxes1.shape[:-2]
    rows = bboxes1.size(-2)
    cols = bboxes2.size(-2)
    if rows * cols == 0:
        return bboxes1.new(batch_shape + (rows, cols))
    area1 = (bboxes1[..., 2] - bboxes1[..., 0]) * (bboxes1[..., 3] - bboxes1[..., 1])
    area2 = (bboxes2[..., 2] - bboxes2[..., 0]) * (bboxes2[..., 3] - bboxes2[..., 1])
    lt = torch.max(bboxes1[..., :, None, :2], bboxes2[..., None, :, :2])
    rb = torch.min(bboxes1[..., :, None, 2:], bboxes2[..., None, :, 2:])
    wh = (rb - lt).clamp(min=0)
    overlap = wh[..., 0] * wh[..., 1]
    union = area1[..., None] + area2[..., None, :] - overlap
    eps = union.new_tensor([eps])
    union = torch.max(union, eps)
    ious = overlap / union
    return ious


# mmdetection (open-mmlab/mmdetection, v2.x), mmdet/core/bbox/assigners/atss_assigner.py: ATSSAssigner.assign
# (gt_bboxes_ignore None; the AssignResult as a tuple)
def _mm_atss_assign(self, bboxes, num_level_bboxes, gt_bboxes, gt_bboxes_ignore=None, gt_labels=None):
    INF = 100000000
    bboxes = bboxes[:, :4]
    num_gt, num_bboxes = gt_bboxes.size(0), bboxes.size(0)

    # compute iou between all bbox and gt
    overlaps = _mm_bbox_overlaps(bboxes, gt_bboxes)

    # assign 0 by default
    assigned_gt_inds = overlaps.new_full((num_bboxes, ), 0, dtype=torch.long)

    # compute center distance between all bbox and gt
    gt_cx = (gt_bboxes[:, 0] + gt_bboxes[:, 2]) / 2.0
    gt_cy = (gt_bboxes[:, 1] + gt_bboxes[:, 3]) / 2.0
    gt_points = torch.stack((gt_cx, gt_cy), dim=1)

    bboxes_cx = (bboxes[:, 0] + bboxes[:, 2]) / 2.0
    bboxes_cy = (bboxes[:, 1] + bboxes[:, 3]) / 2.0
    bboxes_points = torch.stack((bboxes_cx, bboxes_cy), dim=1)

    distances = (bboxes_points[:, None, :] - gt_points[None, :, :]).pow(2).sum(-1).sqrt()

    # Selecting candidates based on the center distance
    candidate_idxs = []
    start_idx = 0
    for level, bboxes_per_level in enumerate(num_level_bboxes):
        # on each pyramid level, for each gt,
        # select k bbox whose center are closest to the gt center
        end_idx = start_idx + bboxes_per_level
        distances_per_level = distances[start_idx:end_idx, :]
        selectable_k = min(self["topk"], bboxes_per_level)
        _, topk_idxs_per_level = distances_per_level.topk(selectable_k, dim=0, largest=False)
        candidate_idxs.append(topk_idxs_per_level + start_idx)
        start_idx = end_idx
    candidate_idxs = torch.cat(candidate_idxs, dim=0)

    # get corresponding iou for the these candidates, and compute the
    # mean and std, set mean + std as the iou threshold
    candidate_overlaps = overlaps[candidate_idxs, torch.arange(num_gt)]
    overlaps_mean_per_gt = candidate_overlaps.mean(0)
    overlaps_std_per_gt = candidate_overlaps.std(0)
    overlaps_thr_per_gt = overlaps_mean_per_gt + overlaps_std_per_gt

    is_pos = candidate_overlaps >= overlaps_thr_per_gt[None, :]

    # limit the positive sample's center in gt
    for gt_idx in range(num_gt):
        candidate_idxs[:, gt_idx] += gt_idx * num_bboxes
    ep_bboxes_cx = bboxes_cx.view(1, -1).expand(num_gt, num_bboxes).contiguous().view(-1)
    ep_bboxes_cy = bboxes_cy.view(1, -1).expand(num_gt, num_bboxes).contiguous().view(-1)
    candidate_idxs = candidate_idxs.view(-1)

    # calculate the left, top, right, bottom distance between positive
    # bbox center and gt side
    l_ = ep_bboxes_cx[candidate_idxs].view(-1, num_gt) - gt_bboxes[:, 0]
    t_ = ep_bboxes_cy[candidate_idxs].view(-1, num_gt) - gt_bboxes[:, 1]
    r_ = gt_bboxes[:, 2] - ep_bboxes_cx[candidate_idxs].view(-1, num_gt)
    b_ = gt_bboxes[:, 3] - ep_bboxes_cy[candidate_idxs].view(-1, num_gt)
    is_in_gts = torch.stack([l_, t_, r_, b_], dim=1).min(dim=1)[0] > 0.01
    is_pos = is_pos & is_in_gts

    # if an anchor box is assigned to multiple gts,
    # the one with the highest IoU will be selected.
    overlaps_inf = torch.full_like(overlaps, -INF).t().contiguous().view(-1)
    index = candidate_idxs.view(-1)[is_pos.view(-1)]
    overlaps_inf[index] = overlaps.t().contiguous().view(-1)[index]
    overlaps_inf = overlaps_inf.view(num_gt, -1).t()

    max_overlaps, argmax_overlaps = overlaps_inf.max(dim=1)
    assigned_gt_inds[max_overlaps != -INF] = argmax_overlaps[max_overlaps != -INF] + 1

    if gt_labels is not None:
        assigned_labels = assigned_gt_inds.new_full((num_bboxes, ), -1)
        pos_inds = torch.nonzero(assigned_gt_inds > 0, as_tuple=False).squeeze()
        if pos_inds.numel() > 0:
            assigned_labels[pos_inds] = gt_labels[assigned_gt_inds[pos_inds] - 1]
    else:
        assigned_labels = None
    return num_gt, assigned_gt_inds, max_overlaps, assigned_labels


# mmdetection (open-mmlab/mmdetection, v2.x), mmdet/core/bbox/assigners/atss_assigner.py: ATSSAssigner.assign (topk 9)
# with bbox_overlaps as its iou_calculator; one square anchor per location (octave scale 4) on a 6x6 level of stride 8
# and a 3x3 level of stride 16 (a 48x48 image, 45 anchors: the second level takes its 9), 3 gt boxes made valid from
# the raw input, labels from the integer input; the anchors built inline as ATSS's anchor generator lays them out
def mm_atss_assign(raw_gt: f32[3, 4], gt_labels: i64[3]) -> tuple[i64[45], f32[45], i64[45]]:
    levels = []
    for size, stride in ((6, 8), (3, 16)):
        shifts = torch.arange(size, dtype=torch.float32) * stride + stride / 2
        shift_y, shift_x = torch.meshgrid(shifts, shifts, indexing="ij")
        half = stride * 4 / 2
        levels.append(torch.stack([shift_x.reshape(-1) - half, shift_y.reshape(-1) - half,
                                   shift_x.reshape(-1) + half, shift_y.reshape(-1) + half], dim=1))
    bboxes = torch.cat(levels)
    ctr = (raw_gt[:, :2] + 1) * 20 + 4
    wh = raw_gt[:, 2:].abs() * 24 + 8
    gt_bboxes = torch.cat([ctr - wh / 2, ctr + wh / 2], dim=1)
    self = {"topk": 9}
    _, assigned_gt_inds, max_overlaps, assigned_labels = _mm_atss_assign(self, bboxes, [36, 9], gt_bboxes,
                                                                         gt_labels=gt_labels)
    return assigned_gt_inds, max_overlaps, assigned_labels


# yolov5 (ultralytics/yolov5), utils/metrics.py: bbox_iou (v7.0 form, xywh True, CIoU True)
def _y5_bbox_iou(box1, box2, xywh=True, GIoU=False, DIoU=False, CIoU=False, eps=1e-7):
    if xywh:  # transform from xywh to xyxy
        (x1, y1, w1, h1), (x2, y2, w2, h2) = box1.chunk(4, -1), box2.chunk(4, -1)
        w1_, h1_, w2_, h2_ = w1 / 2, h1 / 2, w2 / 2, h2 / 2
        b1_x1, b1_x2, b1_y1, b1_y2 = x1 - w1_, x1 + w1_, y1 - h1_, y1 + h1_
        b2_x1, b2_x2, b2_y1, b2_y2 = x2 - w2_, x2 + w2_, y2 - h2_, y2 + h2_
    else:  # x1, y1, x2, y2 = box1
        b1_x1, b1_y1, b1_x2, b1_y2 = box1.chunk(4, -1)
        b2_x1, b2_y1, b2_x2, b2_y2 = box2.chunk(4, -1)
        w1, h1 = b1_x2 - b1_x1, (b1_y2 - b1_y1).clamp(eps)
        w2, h2 = b2_x2 - b2_x1, (b2_y2 - b2_y1).clamp(eps)

    # Intersection area
    inter = (b1_x2.minimum(b2_x2) - b1_x1.maximum(b2_x1)).clamp(0) * \
            (b1_y2.minimum(b2_y2) - b1_y1.maximum(b2_y1)).clamp(0)

    # Union Area
    union = w1 * h1 + w2 * h2 - inter + eps

    # IoU
    iou = inter / union
    if CIoU or DIoU or GIoU:
        cw = b1_x2.maximum(b2_x2) - b1_x1.minimum(b2_x1)  # convex (smallest enclosing box) width
        ch = b1_y2.maximum(b2_y2) - b1_y1.minimum(b2_y1)  # convex height
        if CIoU or DIoU:  # Distance or Complete IoU
            c2 = cw ** 2 + ch ** 2 + eps  # convex diagonal squared
            rho2 = ((b2_x1 + b2_x2 - b1_x1 - b1_x2) ** 2 + (b2_y1 + b2_y2 - b1_y1 - b1_y2) ** 2) / 4
            if CIoU:
                v = (4 / math.pi ** 2) * (torch.atan(w2 / h2) - torch.atan(w1 / h1)).pow(2)
                with torch.no_grad():
                    alpha = v / (v - iou + (1 + eps))
                return iou - (rho2 / c2 + v * alpha)  # CIoU
            return iou - rho2 / c2  # DIoU
        c_area = cw * ch + eps  # convex area
        return iou - (c_area - union) / c_area  # GIoU
    return iou  # IoU


# yolov5 (ultralytics/yolov5), utils/loss.py: ComputeLoss.build_targets
def _y5_build_targets(self, p, targets):
    na, nt = self["na"], targets.shape[0]  # number of anchors, targets
    tcls, tbox, indices, anch = [], [], [], []
    gain = torch.ones(7, device=self["device"])  # normalized to gridspace gain
    ai = torch.arange(na, device=self["device"]).float().view(na, 1).repeat(1, nt)
    targets = torch.cat((targets.repeat(na, 1, 1), ai[..., None]), 2)  # append anchor indices

    g = 0.5  # bias
    off = torch.tensor(
        [
            [0, 0],
            [1, 0],
            [0, 1],
            [-1, 0],
            [0, -1],  # j,k,l,m
        ],
        device=self["device"]).float() * g  # offsets

    for i in range(self["nl"]):
        anchors, shape = self["anchors"][i], p[i].shape
        gain[2:6] = torch.tensor(shape)[[3, 2, 3, 2]]  # xyxy gain

        # Match targets to anchors
        t = targets * gain  # shape(3,n,7)
        if nt:
            # Matches
            r = t[..., 4:6] / anchors[:, None]  # wh ratio
            j = torch.max(r, 1 / r).max(2)[0] < self["hyp"]['anchor_t']  # compare
            t = t[j]  # filter

            # Offsets
            gxy = t[:, 2:4]  # grid xy
            gxi = gain[[2, 3]] - gxy  # inverse
            j, k = ((gxy % 1 < g) & (gxy > 1)).T
            l, m = ((gxi % 1 < g) & (gxi > 1)).T
            j = torch.stack((torch.ones_like(j), j, k, l, m))
            t = t.repeat((5, 1, 1))[j]
            offsets = (torch.zeros_like(gxy)[None] + off[:, None])[j]
        else:
            t = targets[0]
            offsets = 0

        # Define
        bc, gxy, gwh, a = t.chunk(4, 1)  # (image, class), grid xy, grid wh, anchors
        a, (b, c) = a.long().view(-1), bc.long().T  # anchors, image, class
        gij = (gxy - offsets).long()
        gi, gj = gij.T  # grid indices

        # Append
        indices.append((b, a, gj.clamp_(0, shape[2] - 1), gi.clamp_(0, shape[3] - 1)))  # image, anchor, grid
        tbox.append(torch.cat((gxy - gij, gwh), 1))  # box
        anch.append(anchors[a])  # anchors
        tcls.append(c)  # class

    return tcls, tbox, indices, anch


# yolov5 (ultralytics/yolov5), utils/loss.py: ComputeLoss.__call__ (sort_obj_iou False, gr 1.0, no autobalance,
# label smoothing 0 so cp 1 and cn 0, fl_gamma 0 so plain BCEWithLogitsLoss)
def _y5_compute_loss(self, p, targets):
    lcls = torch.zeros(1, device=self["device"])  # class loss
    lbox = torch.zeros(1, device=self["device"])  # box loss
    lobj = torch.zeros(1, device=self["device"])  # object loss
    tcls, tbox, indices, anchors = _y5_build_targets(self, p, targets)  # targets

    # Losses
    for i, pi in enumerate(p):  # layer index, layer predictions
        b, a, gj, gi = indices[i]  # image, anchor, gridy, gridx
        tobj = torch.zeros(pi.shape[:4], dtype=pi.dtype, device=self["device"])  # target obj

        n = b.shape[0]  # number of targets
        if n:
            pxy, pwh, _, pcls = pi[b, a, gj, gi].split((2, 2, 1, self["nc"]), 1)  # target-subset of predictions

            # Regression
            pxy = pxy.sigmoid() * 2 - 0.5
            pwh = (pwh.sigmoid() * 2) ** 2 * anchors[i]
            pbox = torch.cat((pxy, pwh), 1)  # predicted box
            iou = _y5_bbox_iou(pbox, tbox[i], CIoU=True).squeeze()  # iou(prediction, target)
            lbox += (1.0 - iou).mean()  # iou loss

            # Objectness
            iou = iou.detach().clamp(0).type(tobj.dtype)
            if self["gr"] < 1:
                iou = (1.0 - self["gr"]) + self["gr"] * iou
            tobj[b, a, gj, gi] = iou  # iou ratio

            # Classification
            if self["nc"] > 1:  # cls loss (only if multiple classes)
                t = torch.full_like(pcls, self["cn"], device=self["device"])  # targets
                t[range(n), tcls[i]] = self["cp"]
                lcls += F.binary_cross_entropy_with_logits(pcls, t, pos_weight=self["cls_pw"])  # BCE

        obji = F.binary_cross_entropy_with_logits(pi[..., 4], tobj, pos_weight=self["obj_pw"])
        lobj += obji * self["balance"][i]  # obj loss

    lbox *= self["hyp"]['box']
    lobj *= self["hyp"]['obj']
    lcls *= self["hyp"]['cls']
    bs = tobj.shape[0]  # batch size

    return (lbox + lobj + lcls) * bs, torch.cat((lbox, lobj, lcls)).detach()


# yolov5 (ultralytics/yolov5), utils/loss.py: ComputeLoss (__init__'s settings, __call__, build_targets) with
# utils/metrics.py's bbox_iou; two detection layers (8x8 and 4x4 grids, strides 8 and 16, yolov5's P3/P4 anchors in
# grid units as Detect keeps them), 3 classes, batch 2, hyp box 0.05 / obj 1.0 / cls 0.5 / anchor_t 4.0, balance
# [4.0, 1.0] (nl 2); 4 targets (image, class, x, y, w, h normalised) made from the inputs, the module as a dict and
# BCEWithLogitsLoss as F.binary_cross_entropy_with_logits with its pos_weight
def yolov5_compute_loss(
    p0: f32[2, 3, 8, 8, 8], p1: f32[2, 3, 4, 4, 8], raw_t: f32[4, 4], t_img: i64[4], t_cls: i64[4]
) -> tuple[f32[1], f32[3]]:
    anchors = torch.tensor([[[10., 13.], [16., 30.], [33., 23.]], [[30., 61.], [62., 45.], [59., 119.]]])
    anchors = anchors / torch.tensor([8., 16.]).view(-1, 1, 1)
    self = {"device": "cpu", "na": 3, "nc": 3, "nl": 2, "anchors": anchors, "gr": 1.0, "cp": 1.0, "cn": 0.0,
            "balance": {3: [4.0, 1.0, 0.4]}.get(2, [4.0, 1.0, 0.25, 0.06, 0.02]),
            "hyp": {"box": 0.05, "obj": 1.0, "cls": 0.5, "anchor_t": 4.0},
            "cls_pw": torch.tensor([1.0]), "obj_pw": torch.tensor([1.0])}
    xy = raw_t[:, :2] * 0.42 + 0.5
    wh = raw_t[:, 2:].abs() * 0.3 + 0.08
    targets = torch.cat([(t_img % 2).float()[:, None], (t_cls % 3).float()[:, None], xy, wh], dim=1)
    return _y5_compute_loss(self, [p0, p1], targets)


# ---------------------------------------------------------------------------------------------------------------
# Recurrent
# ---------------------------------------------------------------------------------------------------------------

# S4 (state-spaces/s4), models/s4/s4d.py: S4DKernel.forward
def _s4d_kernel(self, L):
    # Materialize parameters
    dt = torch.exp(self["log_dt"])  # (H)
    C = torch.view_as_complex(self["C"])  # (H N)
    A = -torch.exp(self["log_A_real"]) + 1j * self["A_imag"]  # (H N)

    # Vandermonde multiplication
    dtA = A * dt.unsqueeze(-1)  # (H N)
    K = dtA.unsqueeze(-1) * torch.arange(L, device=A.device)  # (H N L)
    C = C * (torch.exp(dtA) - 1.) / A
    K = 2 * torch.einsum('hn, hnl -> hl', C, torch.exp(K)).real

    return K


# S4 (state-spaces/s4), models/s4/s4d.py: S4D.forward (transposed, dropout 0 so nn.Identity)
def _s4d_forward(self, u):
    if not self["transposed"]:
        u = u.transpose(-1, -2)
    L = u.size(-1)

    # Compute SSM Kernel
    k = _s4d_kernel(self["kernel"], L=L)  # (H L)

    # Convolution
    k_f = torch.fft.rfft(k, n=2 * L)  # (H L)
    u_f = torch.fft.rfft(u, n=2 * L)  # (B H L)
    y = torch.fft.irfft(u_f * k_f, n=2 * L)[..., :L]  # (B H L)

    # Compute D term in state space equation - essentially a skip connection
    y = y + u * self["D"].unsqueeze(-1)

    y = F.gelu(y)
    y = F.glu(F.conv1d(y, self["out_w"], self["out_b"]), dim=-2)
    if not self["transposed"]:
        y = y.transpose(-1, -2)
    return y, None


# S4 (state-spaces/s4), models/s4/s4d.py: S4DKernel.__init__ and S4D.forward (d_model 4, d_state 8, transposed,
# dropout 0; output_linear = Conv1d(4, 8, 1) then GLU(dim=-2) as F.conv1d and F.glu); batch 2, L 12. The random
# init becomes inputs: log_dt spread over [log 1e-3, log 1e-1] from the raw input, C as view_as_real's (H, N/2, 2),
# log_A_real = log(0.5) plus the raw input scaled; A_imag = pi * n as the init (einops' repeat as .repeat); the modules
# as dicts
def s4d_forward(
    u: f32[2, 4, 12], raw_log_dt: f32[4], c_ri: f32[4, 4, 2], raw_log_a: f32[4, 4], d: f32[4], out_w: f32[8, 4, 1],
    out_b: f32[8]
) -> f32[2, 4, 12]:
    H, N = 4, 8
    dt_min, dt_max = 0.001, 0.1
    log_dt = (raw_log_dt + 1) / 2 * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
    kernel = {"log_dt": log_dt, "C": c_ri,
              "log_A_real": torch.log(0.5 * torch.ones(H, N // 2)) + 0.2 * raw_log_a,
              "A_imag": math.pi * torch.arange(N // 2).repeat(H, 1)}
    self = {"transposed": True, "kernel": kernel, "D": d, "out_w": out_w * 0.5, "out_b": out_b * 0.5}
    y, _ = _s4d_forward(self, u)
    return y


# ---------------------------------------------------------------------------------------------------------------
# LLM decode
# ---------------------------------------------------------------------------------------------------------------

# Hugging Face transformers, generation/logits_process.py: WhisperTimeStampLogitsProcessor.__init__ and __call__
# (the generate config as a dict)
def _hf_whisper_ts_init(generate_config, begin_index, _detect_timestamp_from_logprob=None):
    self = {}
    self["no_timestamps_token_id"] = generate_config["no_timestamps_token_id"]
    self["timestamp_begin"] = generate_config["no_timestamps_token_id"] + 1
    self["eos_token_id"] = generate_config["eos_token_id"] or generate_config["bos_token_id"]
    self["_detect_timestamp_from_logprob"] = (
        _detect_timestamp_from_logprob
        if _detect_timestamp_from_logprob is not None
        else generate_config.get("_detect_timestamp_from_logprob", True)
    )
    self["begin_index"] = begin_index
    self["max_initial_timestamp_index"] = generate_config.get("max_initial_timestamp_index", None)
    return self


def _hf_whisper_ts_call(self, input_ids, scores):
    # suppress <|notimestamps|> which is handled by without_timestamps
    scores_processed = scores.clone()
    scores_processed[:, self["no_timestamps_token_id"]] = -float("inf")

    # timestamps have to appear in pairs, except directly before eos_token; mask logits accordingly
    for k in range(input_ids.shape[0]):
        sampled_tokens = input_ids[k, self["begin_index"]:]
        seq = list(sampled_tokens.tolist())

        last_was_timestamp = len(seq) >= 1 and seq[-1] >= self["timestamp_begin"]
        penultimate_was_timestamp = len(seq) < 2 or seq[-2] >= self["timestamp_begin"]

        if last_was_timestamp:
            if penultimate_was_timestamp:  # has to be non-timestamp
                scores_processed[k, self["timestamp_begin"]:] = -float("inf")
            else:  # cannot be normal text tokens
                scores_processed[k, : self["eos_token_id"]] = -float("inf")

        timestamps = sampled_tokens[sampled_tokens.ge(self["timestamp_begin"])]
        if timestamps.numel() > 0:
            # `timestamps` shouldn't decrease; forbid timestamp tokens smaller than the last
            # The following lines of code are copied from: https://github.com/openai/whisper/pull/914/files#r1137085090
            if last_was_timestamp and not penultimate_was_timestamp:
                timestamp_last = timestamps[-1]
            else:
                # Avoid to emit <|0.00|> again
                timestamp_last = timestamps[-1] + 1

            scores_processed[k, self["timestamp_begin"]: timestamp_last] = -float("inf")

    # apply the `max_initial_timestamp` option
    if input_ids.shape[1] == self["begin_index"]:
        scores_processed[:, : self["timestamp_begin"]] = -float("inf")

        if self["max_initial_timestamp_index"] is not None:
            last_allowed = self["timestamp_begin"] + self["max_initial_timestamp_index"]
            scores_processed[:, last_allowed + 1:] = -float("inf")

    # if sum of probability over timestamps is above any other token, sample timestamp
    logprobs = F.log_softmax(scores_processed.float(), dim=-1)
    for k in range(input_ids.shape[0]):
        timestamp_logprob = logprobs[k, self["timestamp_begin"]:].logsumexp(dim=-1)
        max_text_token_logprob = logprobs[k, : self["timestamp_begin"]].max()
        if timestamp_logprob > max_text_token_logprob and self["_detect_timestamp_from_logprob"]:
            scores_processed[k, : self["timestamp_begin"]] = -float("inf")

    return scores_processed


# Hugging Face transformers, generation/logits_process.py: WhisperTimeStampLogitsProcessor (__init__, __call__) at
# the first generated position (input length == begin_index 2, max_initial_timestamp_index 3) and four steps later
# (batch 4, vocabulary 24: eos 10, <|notimestamps|> 12, timestamps from 13); the sampled tokens are the integer input
# with 6..9 mapped to timestamp tokens 14..17, the logits the raw input scaled by 4
def hf_whisper_timestamps(input_ids_raw: i64[4, 6], scores: f32[4, 24], scores0: f32[4, 24]) -> tuple[f32[4, 24], f32[4, 24]]:
    generate_config = {"no_timestamps_token_id": 12, "eos_token_id": 10, "bos_token_id": 10,
                       "max_initial_timestamp_index": 3}
    proc = _hf_whisper_ts_init(generate_config, begin_index=2)
    input_ids = torch.where(input_ids_raw >= 6, input_ids_raw + 8, input_ids_raw)
    first = _hf_whisper_ts_call(proc, input_ids[:, :2], scores0 * 4)
    later = _hf_whisper_ts_call(proc, input_ids, scores * 4)
    return first, later


# ---------------------------------------------------------------------------------------------------------------
# Optimizers
# ---------------------------------------------------------------------------------------------------------------

# SAM (davda54/sam), sam.py: SAM._grad_norm
def _sam_grad_norm(self, grads):
    norm = torch.norm(
        torch.stack([
            ((torch.abs(p) if group["adaptive"] else 1.0) * grads[p]).norm(p=2)
            for group in self["param_groups"] for p in group["params"]
            if grads[p] is not None
        ]),
        p=2
    )
    return norm


# SAM (davda54/sam), sam.py: SAM.first_step
def _sam_first_step(self, grads):
    grad_norm = _sam_grad_norm(self, grads)
    for group in self["param_groups"]:
        scale = group["rho"] / (grad_norm + 1e-12)

        for p in group["params"]:
            if grads[p] is None:
                continue
            self["state"][p]["old_p"] = p.data.clone()
            e_w = (torch.pow(p, 2) if group["adaptive"] else 1.0) * grads[p] * scale.to(p)
            p.add_(e_w)  # climb to the local maximum "w + e(w)"


# SAM (davda54/sam), sam.py: SAM.second_step with the base optimizer's step (torch/optim/sgd.py's
# _single_tensor_sgd: momentum 0.9, dampening 0, no nesterov, no weight decay)
def _sam_second_step(self, grads):
    for group in self["param_groups"]:
        for p in group["params"]:
            if grads[p] is None:
                continue
            p.data = self["state"][p]["old_p"]  # get back to "w" from "w + e(w)"

    for group in self["param_groups"]:
        for p in group["params"]:
            grad = grads[p]
            buf = self["state"][p].get("momentum_buffer")
            if buf is None:
                buf = torch.clone(grad).detach()
                self["state"][p]["momentum_buffer"] = buf
            else:
                buf.mul_(group["momentum"]).add_(grad, alpha=1 - group["dampening"])
            p.add_(buf, alpha=-group["lr"])


# the closure's loss.backward() for a linear least-squares model (loss 0.5 * mean ||x w^T + b - y||^2), as gradients
# keyed by parameter
def _sam_lsq_grads(w, b, x, y):
    r = (x @ w.t() + b - y) / x.shape[0]
    return {w: r.t() @ x, b: r.sum(0)}


# SAM (davda54/sam), sam.py: SAM (__init__, first_step, second_step, _grad_norm) in its README's two-step training
# loop, adaptive (ASAM, rho 0.5) around SGD (lr 0.1, momentum 0.9), two iterations; the loss is a linear least-squares
# fit on a batch of 8 whose gradients stand in for loss.backward(); the state keyed by parameter tensor as the
# original's self.state[p]
def sam_asam_sgd(w: f32[3, 4], b: f32[3], x: f32[8, 4], y: f32[8, 3]) -> tuple[f32[3, 4], f32[3]]:
    self = {"param_groups": [{"params": [w, b], "rho": 0.5, "adaptive": True, "lr": 0.1, "momentum": 0.9,
                              "dampening": 0.0}],
            "state": {w: {}, b: {}}}
    for _ in range(2):
        # first forward-backward pass
        grads = _sam_lsq_grads(w, b, x, y)
        _sam_first_step(self, grads)
        # second forward-backward pass
        grads = _sam_lsq_grads(w, b, x, y)
        _sam_second_step(self, grads)
    return w, b


