"""Detection post-processing ported from torchvision, detectron2, mmdetection and yolov5, written as those projects
write it; funcfuse refuses it on some engine today (see STATUS.md). Inputs arrive uniform in [-1, 1); each program
first turns them into valid boxes (x1 < x2, y1 < y2, pixel coordinates) where the original expects them."""
from __future__ import annotations

import math

import numpy as np
import torch


def _xyxy(raw, size: float):
    # Valid (x1, y1, x2, y2) boxes from uniform inputs: corners in [0, 2*size), sides in [1, size + 1).
    xy = (raw[:, :2] + 1.0) * size
    wh = raw[:, 2:].abs() * size + 1.0
    return torch.cat([xy, xy + wh], 1)


# yolov5, utils/general.py: xywh2xyxy (a program of corpus/real/detection_more.py; here the helper of the next one)
def _xywh2xyxy(x):
    y = x.clone() if isinstance(x, torch.Tensor) else np.copy(x)
    y[..., 0] = x[..., 0] - x[..., 2] / 2
    y[..., 1] = x[..., 1] - x[..., 3] / 2
    y[..., 2] = x[..., 0] + x[..., 2] / 2
    y[..., 3] = x[..., 1] + x[..., 3] / 2
    return y


# yolov5, utils/general.py: non_max_suppression, the per-image candidate filtering before torchvision.ops.nms
def yolo_nms_candidates(prediction: f32[1, 200, 9]) -> f32[1, 200, 6]:
    prediction = (prediction + 1.0) * 0.5
    conf_thres = 0.25
    bs = prediction.shape[0]
    nc = prediction.shape[2] - 5
    xc = prediction[..., 4] > conf_thres
    mi = 5 + nc
    out = torch.zeros(bs, prediction.shape[1], 6)
    for xi, x in enumerate(prediction):
        x = x[xc[xi]]
        x[:, 5:] *= x[:, 4:5]
        box = _xywh2xyxy(x[:, :4])
        conf, j = x[:, 5:mi].max(1, keepdim=True)
        x = torch.cat((box, conf, j.float()), 1)[conf.view(-1) > conf_thres]
        n = x.shape[0]
        out[xi, :n] = x[x[:, 4].argsort(descending=True)]
    return out


# ssd.pytorch (amdegroot), layers/box_utils.py: log_sum_exp; layers/modules/multibox_loss.py: MultiBoxLoss.forward,
# the hard negative mining (negpos_ratio 3) up to the neg mask
def ssd_hard_negative_mining(
    conf_data: f32[2, 60, 5], raw_conf_t: i64[2, 60]
) -> tuple[f32[2, 60], bool[2, 60], i64[2, 1]]:
    conf_t = (raw_conf_t >= 7).long() * (raw_conf_t - 6)
    num = conf_data.size(0)
    num_classes = 5
    negpos_ratio = 3
    pos = conf_t > 0
    batch_conf = conf_data.view(-1, num_classes)
    x = batch_conf
    x_max = x.data.max()
    lse = torch.log(torch.sum(torch.exp(x - x_max), 1, keepdim=True)) + x_max
    loss_c = lse - batch_conf.gather(1, conf_t.view(-1, 1))
    loss_c[pos.view(-1, 1)] = 0
    loss_c = loss_c.view(num, -1)
    _, loss_idx = loss_c.sort(1, descending=True)
    _, idx_rank = loss_idx.sort(1)
    num_pos = pos.long().sum(1, keepdim=True)
    num_neg = torch.clamp(negpos_ratio * num_pos, max=pos.size(1) - 1)
    neg = idx_rank < num_neg.expand_as(idx_rank)
    return loss_c, neg, num_neg
