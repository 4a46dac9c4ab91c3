"""Held-out real code, issue 14's thirty-sixth round, the programs every engine runs after the round's fixes:
- lufficc/SSD's PriorBox (8732 priors built in Python loops: a constant tensor of 34,928 numbers) and test-time box
  decoding (ssd_prior_box_decode);
- the DARTS recurrent cell with its searched genotype (quark0/darts: a namedtuple genotype, an `nn.ParameterList` of
  per-node weights, eval mode; darts_rnn_cell);
- PyTorch-YOLOv3's build_targets with its IoU helpers (eriklindernoren/PyTorch-YOLOv3; yolov3_build_targets);
- the SSD tutorial's prior boxes and MultiBoxLoss with hard negative mining (sgrvinod/a-PyTorch-Tutorial-to-Object-
  Detection; ssd_multibox_loss);
- makemore's GRU language model and its loss (karpathy/makemore; makemore_gru);
- PyTorch's time-sequence-prediction example, two LSTMCells in float64 (pytorch/examples; time_sequence_prediction);
- llama2.c's transformer block: RMSNorm, real-arithmetic RoPE, grouped KV heads, SDPA, SwiGLU (karpathy/llama2.c;
  llama2c_block);
- the windowed KV cache of LLMs-from-scratch over a prefill and decode steps that overflow it
  (rasbt/LLMs-from-scratch; llmscratch_window_kv_cache);
- StreamingLLM's attention-sink cache eviction (mit-han-lab/streaming-llm; streaming_llm_evict);
- Whisper's logit filters and greedy decoder (openai/whisper; whisper_greedy_logit_filters);
- MoCo's momentum key encoder and queue around torch.optim.SGD (facebookresearch/moco; moco_momentum_queue_steps);
- pytorch-a3c's SharedAdam (ikostrikov/pytorch-a3c; a3c_shared_adam_steps);
- rl_a3c_pytorch's centered SharedRMSprop (dgriff777/rl_a3c_pytorch; a3c_shared_rmsprop_steps);
- EDM's training-loop update: learning-rate ramp-up, gradient sanitizing, Adam and the EMA (NVlabs/edm;
  edm_adam_ema_steps).
Ported by a helper from the originals, as code nobody here had seen; the sizes are the originals' where a constant
depends on them (SSD300's priors in ssd_prior_box_decode), small elsewhere (sizes written inside the originals'
helpers shrunk with them). Module weights and gradients arrive as inputs. Inputs arrive uniform in [-1, 1); integer
inputs in [0, 10)."""
from __future__ import annotations

import copy
import math
from collections import namedtuple
from dataclasses import dataclass, field
from functools import partial
from itertools import product
from math import sqrt
from typing import Optional, Sequence, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch import Tensor
from torch.autograd import Variable
from torch.distributions import Categorical


# ---------------------------------------------------------------------------------------------------------------
# lufficc/SSD, ssd/modeling/anchors/prior_box.py, ssd/utils/box_utils.py, ssd/modeling/box_head/box_head.py
# ---------------------------------------------------------------------------------------------------------------


def _center_form_to_corner_form(locations):
    return torch.cat([locations[..., :2] - locations[..., 2:]/2,
                     locations[..., :2] + locations[..., 2:]/2], locations.dim() - 1)



class PriorBox:
    def __init__(self, cfg):
        self.image_size = cfg.INPUT.IMAGE_SIZE
        prior_config = cfg.MODEL.PRIORS
        self.feature_maps = prior_config.FEATURE_MAPS
        self.min_sizes = prior_config.MIN_SIZES
        self.max_sizes = prior_config.MAX_SIZES
        self.strides = prior_config.STRIDES
        self.aspect_ratios = prior_config.ASPECT_RATIOS
        self.clip = prior_config.CLIP

    def __call__(self):
        """Generate SSD Prior Boxes.
            It returns the center, height and width of the priors. The values are relative to the image size
            Returns:
                priors (num_priors, 4): The prior boxes represented as [[center_x, center_y, w, h]]. All the values
                    are relative to the image size.
        """
        priors = []
        for k, f in enumerate(self.feature_maps):
            scale = self.image_size / self.strides[k]
            for i, j in product(range(f), repeat=2):
                # unit center x,y
                cx = (j + 0.5) / scale
                cy = (i + 0.5) / scale

                # small sized square box
                size = self.min_sizes[k]
                h = w = size / self.image_size
                priors.append([cx, cy, w, h])

                # big sized square box
                size = sqrt(self.min_sizes[k] * self.max_sizes[k])
                h = w = size / self.image_size
                priors.append([cx, cy, w, h])

                # change h/w ratio of the small sized box
                size = self.min_sizes[k]
                h = w = size / self.image_size
                for ratio in self.aspect_ratios[k]:
                    ratio = sqrt(ratio)
                    priors.append([cx, cy, w * ratio, h / ratio])
                    priors.append([cx, cy, w / ratio, h * ratio])

        priors = torch.tensor(priors)
        if self.clip:
            priors.clamp_(max=1, min=0)
        return priors


def _convert_locations_to_boxes(locations, priors, center_variance,
                               size_variance):
    """Convert regressional location results of SSD into boxes in the form of (center_x, center_y, h, w)."""
    # priors can have one dimension less.
    if priors.dim() + 1 == locations.dim():
        priors = priors.unsqueeze(0)
    return torch.cat([
        locations[..., :2] * center_variance * priors[..., 2:] + priors[..., :2],
        torch.exp(locations[..., 2:] * size_variance) * priors[..., 2:]
    ], dim=locations.dim() - 1)


class _PriorsCfg:
    """Stand-in for the yacs CfgNode of ssd/config/defaults.py (attribute access only): cfg.MODEL.PRIORS."""

    def __init__(self):
        self.FEATURE_MAPS = [38, 19, 10, 5, 3, 1]
        self.STRIDES = [8, 16, 32, 64, 100, 300]
        self.MIN_SIZES = [30, 60, 111, 162, 213, 264]
        self.MAX_SIZES = [60, 111, 162, 213, 264, 315]
        self.ASPECT_RATIOS = [[2], [2, 3], [2, 3], [2, 3], [2], [2]]
        self.CLIP = True


class _ModelCfg:
    def __init__(self):
        self.CENTER_VARIANCE = 0.1
        self.SIZE_VARIANCE = 0.2
        self.PRIORS = _PriorsCfg()


class _InputCfg:
    def __init__(self):
        self.IMAGE_SIZE = 300


class _Cfg:
    def __init__(self):
        self.INPUT = _InputCfg()
        self.MODEL = _ModelCfg()


class SSDBoxHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.priors = None

    def _forward_test(self, cls_logits, bbox_pred):
        if self.priors is None:
            self.priors = PriorBox(self.cfg)().to(bbox_pred.device)
        scores = F.softmax(cls_logits, dim=2)
        boxes = _convert_locations_to_boxes(
            bbox_pred, self.priors, self.cfg.MODEL.CENTER_VARIANCE, self.cfg.MODEL.SIZE_VARIANCE
        )
        boxes = _center_form_to_corner_form(boxes)
        detections = (scores, boxes)
        return detections, {}


# lufficc/SSD: PriorBox.__call__ (vgg_ssd300_voc0712: six feature maps, 8732 priors, clip) and
# SSDBoxHead._forward_test (softmax, convert_locations_to_boxes, center_form_to_corner_form) up to the post-processor
# (score threshold and NMS, data-dependent, left out); batch 1, 4 classes; the yacs config as attributes
def ssd_prior_box_decode(cls_logits: f32[1, 8732, 4], bbox_pred: f32[1, 8732, 4]):
    cfg = _Cfg()
    head = SSDBoxHead(cfg)
    (scores, boxes), _ = head._forward_test(cls_logits, bbox_pred)
    return scores, boxes, head.priors


# ---------------------------------------------------------------------------------------------------------------
# quark0/darts, rnn/genotypes.py, rnn/utils.py (mask2d), rnn/model.py (DARTSCell)
# ---------------------------------------------------------------------------------------------------------------

Genotype = namedtuple('Genotype', 'recurrent concat')

PRIMITIVES = [
    'none',
    'tanh',
    'relu',
    'sigmoid',
    'identity'
]
STEPS = 8
CONCAT = 8

ENAS = Genotype(
    recurrent = [
        ('tanh', 0),
        ('tanh', 1),
        ('relu', 1),
        ('tanh', 3),
        ('tanh', 3),
        ('relu', 3),
        ('relu', 4),
        ('relu', 7),
        ('relu', 8),
        ('relu', 8),
        ('relu', 8),
    ],
    concat = [2, 5, 6, 9, 10, 11]
)

DARTS = Genotype(recurrent=[('relu', 0), ('relu', 1), ('tanh', 2), ('relu', 3), ('relu', 4), ('identity', 1), ('relu', 5), ('relu', 1)], concat=range(1, 9))

INITRANGE = 0.04


def _mask2d(B, D, keep_prob, cuda=True):
  m = torch.floor(torch.rand(B, D) + keep_prob) / keep_prob
  m = Variable(m, requires_grad=False)
  if cuda:
    m = m.cuda()
  return m


class DARTSCell(nn.Module):

  def __init__(self, ninp, nhid, dropouth, dropoutx, genotype, W0, Ws):
    super(DARTSCell, self).__init__()
    self.nhid = nhid
    self.dropouth = dropouth
    self.dropoutx = dropoutx
    self.genotype = genotype

    # genotype is None when doing arch search
    steps = len(self.genotype.recurrent) if self.genotype is not None else STEPS
    self._W0 = nn.Parameter(W0)
    self._Ws = nn.ParameterList([
        nn.Parameter(Ws[i]) for i in range(steps)
    ])

  def forward(self, inputs, hidden):
    T, B = inputs.size(0), inputs.size(1)

    if self.training:
      x_mask = _mask2d(B, inputs.size(2), keep_prob=1.-self.dropoutx)
      h_mask = _mask2d(B, hidden.size(2), keep_prob=1.-self.dropouth)
    else:
      x_mask = h_mask = None

    hidden = hidden[0]
    hiddens = []
    for t in range(T):
      hidden = self.cell(inputs[t], hidden, x_mask, h_mask)
      hiddens.append(hidden)
    hiddens = torch.stack(hiddens)
    return hiddens, hiddens[-1].unsqueeze(0)

  def _compute_init_state(self, x, h_prev, x_mask, h_mask):
    if self.training:
      xh_prev = torch.cat([x * x_mask, h_prev * h_mask], dim=-1)
    else:
      xh_prev = torch.cat([x, h_prev], dim=-1)
    c0, h0 = torch.split(xh_prev.mm(self._W0), self.nhid, dim=-1)
    c0 = c0.sigmoid()
    h0 = h0.tanh()
    s0 = h_prev + c0 * (h0-h_prev)
    return s0

  def _get_activation(self, name):
    if name == 'tanh':
      f = F.tanh
    elif name == 'relu':
      f = F.relu
    elif name == 'sigmoid':
      f = F.sigmoid
    elif name == 'identity':
      f = lambda x: x
    else:
      raise NotImplementedError
    return f

  def cell(self, x, h_prev, x_mask, h_mask):
    s0 = self._compute_init_state(x, h_prev, x_mask, h_mask)

    states = [s0]
    for i, (name, pred) in enumerate(self.genotype.recurrent):
      s_prev = states[pred]
      if self.training:
        ch = (s_prev * h_mask).mm(self._Ws[i])
      else:
        ch = s_prev.mm(self._Ws[i])
      c, h = torch.split(ch, self.nhid, dim=-1)
      c = c.sigmoid()
      fn = self._get_activation(name)
      h = fn(h)
      s = s_prev + c * (h-s_prev)
      states += [s]
    output = torch.mean(torch.stack([states[i] for i in self.genotype.concat], -1), -1)
    return output


# quark0/darts, rnn/model.py: DARTSCell.forward in eval mode (no dropout masks) with the searched DARTS genotype of
# rnn/genotypes.py (8 nodes, concat 1..8); 5 steps, batch 3, ninp = nhid = 6; the parameters listed by name
def darts_rnn_cell(
    inputs: f32[5, 3, 6], hidden: f32[1, 3, 6], W0: f32[12, 12], Ws: f32[8, 6, 12]
) -> tuple[f32[5, 3, 6], f32[1, 3, 6], f32[8]]:
    cell = DARTSCell(6, 6, 0.25, 0.75, DARTS, W0 * 0.5, Ws * 0.5)
    cell.eval()
    hs, h = cell(inputs, hidden)
    sums = torch.stack([p.sum() for name, p in cell.named_parameters() if name.startswith("_Ws.")])
    return hs, h, sums


# ---------------------------------------------------------------------------------------------------------------
# eriklindernoren/PyTorch-YOLOv3, utils/utils.py (2019): bbox_wh_iou, bbox_iou, build_targets
# ---------------------------------------------------------------------------------------------------------------


def _bbox_wh_iou(wh1, wh2):
    wh2 = wh2.t()
    w1, h1 = wh1[0], wh1[1]
    w2, h2 = wh2[0], wh2[1]
    inter_area = torch.min(w1, w2) * torch.min(h1, h2)
    union_area = (w1 * h1 + 1e-16) + w2 * h2 - inter_area
    return inter_area / union_area


def _bbox_iou(box1, box2, x1y1x2y2=True):
    """
    Returns the IoU of two bounding boxes
    """
    if not x1y1x2y2:
        # Transform from center and width to exact coordinates
        b1_x1, b1_x2 = box1[:, 0] - box1[:, 2] / 2, box1[:, 0] + box1[:, 2] / 2
        b1_y1, b1_y2 = box1[:, 1] - box1[:, 3] / 2, box1[:, 1] + box1[:, 3] / 2
        b2_x1, b2_x2 = box2[:, 0] - box2[:, 2] / 2, box2[:, 0] + box2[:, 2] / 2
        b2_y1, b2_y2 = box2[:, 1] - box2[:, 3] / 2, box2[:, 1] + box2[:, 3] / 2
    else:
        # Get the coordinates of bounding boxes
        b1_x1, b1_y1, b1_x2, b1_y2 = box1[:, 0], box1[:, 1], box1[:, 2], box1[:, 3]
        b2_x1, b2_y1, b2_x2, b2_y2 = box2[:, 0], box2[:, 1], box2[:, 2], box2[:, 3]

    # get the corrdinates of the intersection rectangle
    inter_rect_x1 = torch.max(b1_x1, b2_x1)
    inter_rect_y1 = torch.max(b1_y1, b2_y1)
    inter_rect_x2 = torch.min(b1_x2, b2_x2)
    inter_rect_y2 = torch.min(b1_y2, b2_y2)
    # Intersection area
    inter_area = torch.clamp(inter_rect_x2 - inter_rect_x1 + 1, min=0) * torch.clamp(
        inter_rect_y2 - inter_rect_y1 + 1, min=0
    )
    # Union Area
    b1_area = (b1_x2 - b1_x1 + 1) * (b1_y2 - b1_y1 + 1)
    b2_area = (b2_x2 - b2_x1 + 1) * (b2_y2 - b2_y1 + 1)

    iou = inter_area / (b1_area + b2_area - inter_area + 1e-16)

    return iou


def _build_targets(pred_boxes, pred_cls, target, anchors, ignore_thres):

    ByteTensor = torch.cuda.ByteTensor if pred_boxes.is_cuda else torch.ByteTensor
    FloatTensor = torch.cuda.FloatTensor if pred_boxes.is_cuda else torch.FloatTensor

    nB = pred_boxes.size(0)
    nA = pred_boxes.size(1)
    nC = pred_cls.size(-1)
    nG = pred_boxes.size(2)

    # Output tensors
    obj_mask = ByteTensor(nB, nA, nG, nG).fill_(0)
    noobj_mask = ByteTensor(nB, nA, nG, nG).fill_(1)
    class_mask = FloatTensor(nB, nA, nG, nG).fill_(0)
    iou_scores = FloatTensor(nB, nA, nG, nG).fill_(0)
    tx = FloatTensor(nB, nA, nG, nG).fill_(0)
    ty = FloatTensor(nB, nA, nG, nG).fill_(0)
    tw = FloatTensor(nB, nA, nG, nG).fill_(0)
    th = FloatTensor(nB, nA, nG, nG).fill_(0)
    tcls = FloatTensor(nB, nA, nG, nG, nC).fill_(0)

    # Convert to position relative to box
    target_boxes = target[:, 2:6] * nG
    gxy = target_boxes[:, :2]
    gwh = target_boxes[:, 2:]
    # Get anchors with best iou
    ious = torch.stack([_bbox_wh_iou(anchor, gwh) for anchor in anchors])
    best_ious, best_n = ious.max(0)
    # Separate target values
    b, target_labels = target[:, :2].long().t()
    gx, gy = gxy.t()
    gw, gh = gwh.t()
    gi, gj = gxy.long().t()
    # Set masks
    obj_mask[b, best_n, gj, gi] = 1
    noobj_mask[b, best_n, gj, gi] = 0

    # Set noobj mask to zero where iou exceeds ignore threshold
    for i, anchor_ious in enumerate(ious.t()):
        noobj_mask[b[i], anchor_ious > ignore_thres, gj[i], gi[i]] = 0

    # Coordinates
    tx[b, best_n, gj, gi] = gx - gx.floor()
    ty[b, best_n, gj, gi] = gy - gy.floor()
    # Width and height
    tw[b, best_n, gj, gi] = torch.log(gw / anchors[best_n][:, 0] + 1e-16)
    th[b, best_n, gj, gi] = torch.log(gh / anchors[best_n][:, 1] + 1e-16)
    # One-hot encoding of label
    tcls[b, best_n, gj, gi, target_labels] = 1
    # Compute label correctness and iou at best anchor
    class_mask[b, best_n, gj, gi] = (pred_cls[b, best_n, gj, gi].argmax(-1) == target_labels).float()
    iou_scores[b, best_n, gj, gi] = _bbox_iou(pred_boxes[b, best_n, gj, gi], target_boxes, x1y1x2y2=False)

    tconf = obj_mask.float()
    return iou_scores, class_mask, obj_mask, noobj_mask, tx, ty, tw, th, tcls, tconf


# eriklindernoren/PyTorch-YOLOv3, utils/utils.py: build_targets with bbox_wh_iou and bbox_iou (the 2019 version that
# YOLOLayer.forward calls) for a stride-8 head with YOLOv3's three smallest anchors (10,13), (16,30), (33,23) in grid
# units; batch 2, an 8x8 grid, 10 classes, 4 targets per image (8 rows of image, class, x, y, w, h; each image's
# targets in distinct grid columns), ignore threshold 0.5; pred_boxes made from the raw head outputs in grid units
def yolov3_build_targets(
    raw_boxes: f32[2, 3, 8, 8, 4], pred_cls: f32[2, 3, 8, 8, 10], raw_targets: f32[8, 4], labels: i64[8]
):
    pred_boxes = torch.cat([(raw_boxes[..., :2] + 1) * 4, raw_boxes[..., 2:].exp() * 0.5], dim=-1)
    t_idx = torch.arange(8)
    img = (t_idx // 4).float()
    col = (t_idx % 4) * 2 + 1
    x = (col.float() + (raw_targets[:, 0] + 1) * 0.45) / 8
    y = (raw_targets[:, 1] + 1) * 0.49
    w = raw_targets[:, 2].abs() * 0.3 + 0.02
    h = raw_targets[:, 3].abs() * 0.3 + 0.02
    target = torch.stack([img, labels.float(), x, y, w, h], dim=1)
    anchors = torch.tensor([(10.0, 13.0), (16.0, 30.0), (33.0, 23.0)]) / 8
    return _build_targets(pred_boxes, pred_cls, target, anchors, 0.5)



# ---------------------------------------------------------------------------------------------------------------
# sgrvinod/a-PyTorch-Tutorial-to-Object-Detection, utils.py and model.py
# ---------------------------------------------------------------------------------------------------------------

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


def _xy_to_cxcy(xy):
    return torch.cat([(xy[:, 2:] + xy[:, :2]) / 2,  # c_x, c_y
                      xy[:, 2:] - xy[:, :2]], 1)  # w, h


def _cxcy_to_xy(cxcy):
    return torch.cat([cxcy[:, :2] - (cxcy[:, 2:] / 2),  # x_min, y_min
                      cxcy[:, :2] + (cxcy[:, 2:] / 2)], 1)  # x_max, y_max


def _cxcy_to_gcxgcy(cxcy, priors_cxcy):
    # The 10 and 5 below are referred to as 'variances' in the original Caffe repo, completely empirical
    # They are for some sort of numerical conditioning, for 'scaling the localization gradient'
    # See https://github.com/weiliu89/caffe/issues/155
    return torch.cat([(cxcy[:, :2] - priors_cxcy[:, :2]) / (priors_cxcy[:, 2:] / 10),  # g_c_x, g_c_y
                      torch.log(cxcy[:, 2:] / priors_cxcy[:, 2:]) * 5], 1)  # g_w, g_h


def _find_intersection(set_1, set_2):
    # PyTorch auto-broadcasts singleton dimensions
    lower_bounds = torch.max(set_1[:, :2].unsqueeze(1), set_2[:, :2].unsqueeze(0))  # (n1, n2, 2)
    upper_bounds = torch.min(set_1[:, 2:].unsqueeze(1), set_2[:, 2:].unsqueeze(0))  # (n1, n2, 2)
    intersection_dims = torch.clamp(upper_bounds - lower_bounds, min=0)  # (n1, n2, 2)
    return intersection_dims[:, :, 0] * intersection_dims[:, :, 1]  # (n1, n2)


def _find_jaccard_overlap(set_1, set_2):
    # Find intersections
    intersection = _find_intersection(set_1, set_2)  # (n1, n2)

    # Find areas of each box in both sets
    areas_set_1 = (set_1[:, 2] - set_1[:, 0]) * (set_1[:, 3] - set_1[:, 1])  # (n1)
    areas_set_2 = (set_2[:, 2] - set_2[:, 0]) * (set_2[:, 3] - set_2[:, 1])  # (n2)

    # Find the union
    # PyTorch auto-broadcasts singleton dimensions
    union = areas_set_1.unsqueeze(1) + areas_set_2.unsqueeze(0) - intersection  # (n1, n2)

    return intersection / union  # (n1, n2)


def _create_prior_boxes():
    """
    Create the 236 prior (default) boxes for the SSD300, as defined in the paper.

    :return: prior boxes in center-size coordinates, a tensor of dimensions (236, 4)
    """
    fmap_dims = {'conv4_3': 6,
                 'conv7': 3,
                 'conv8_2': 2,
                 'conv9_2': 1,
                 'conv10_2': 1,
                 'conv11_2': 1}

    obj_scales = {'conv4_3': 0.1,
                  'conv7': 0.2,
                  'conv8_2': 0.375,
                  'conv9_2': 0.55,
                  'conv10_2': 0.725,
                  'conv11_2': 0.9}

    aspect_ratios = {'conv4_3': [1., 2., 0.5],
                     'conv7': [1., 2., 3., 0.5, .333],
                     'conv8_2': [1., 2., 3., 0.5, .333],
                     'conv9_2': [1., 2., 3., 0.5, .333],
                     'conv10_2': [1., 2., 0.5],
                     'conv11_2': [1., 2., 0.5]}

    fmaps = list(fmap_dims.keys())

    prior_boxes = []

    for k, fmap in enumerate(fmaps):
        for i in range(fmap_dims[fmap]):
            for j in range(fmap_dims[fmap]):
                cx = (j + 0.5) / fmap_dims[fmap]
                cy = (i + 0.5) / fmap_dims[fmap]

                for ratio in aspect_ratios[fmap]:
                    prior_boxes.append([cx, cy, obj_scales[fmap] * sqrt(ratio), obj_scales[fmap] / sqrt(ratio)])

                    # For an aspect ratio of 1, use an additional prior whose scale is the geometric mean of the
                    # scale of the current feature map and the scale of the next feature map
                    if ratio == 1.:
                        try:
                            additional_scale = sqrt(obj_scales[fmap] * obj_scales[fmaps[k + 1]])
                        # For the last feature map, there is no "next" feature map
                        except IndexError:
                            additional_scale = 1.
                        prior_boxes.append([cx, cy, additional_scale, additional_scale])

    prior_boxes = torch.FloatTensor(prior_boxes).to(device)  # (236, 4)
    prior_boxes.clamp_(0, 1)  # (236, 4)

    return prior_boxes


class MultiBoxLoss(nn.Module):
    """
    The MultiBox loss, a loss function for object detection.

    This is a combination of:
    (1) a localization loss for the predicted locations of the boxes, and
    (2) a confidence loss for the predicted class scores.
    """

    def __init__(self, priors_cxcy, threshold=0.5, neg_pos_ratio=3, alpha=1.):
        super(MultiBoxLoss, self).__init__()
        self.priors_cxcy = priors_cxcy
        self.priors_xy = _cxcy_to_xy(priors_cxcy)
        self.threshold = threshold
        self.neg_pos_ratio = neg_pos_ratio
        self.alpha = alpha

        self.smooth_l1 = nn.L1Loss()  # *smooth* L1 loss in the paper; see Remarks section in the tutorial
        self.cross_entropy = nn.CrossEntropyLoss(reduce=False)

    def forward(self, predicted_locs, predicted_scores, boxes, labels):
        batch_size = predicted_locs.size(0)
        n_priors = self.priors_cxcy.size(0)
        n_classes = predicted_scores.size(2)

        assert n_priors == predicted_locs.size(1) == predicted_scores.size(1)

        true_locs = torch.zeros((batch_size, n_priors, 4), dtype=torch.float).to(device)  # (N, 8732, 4)
        true_classes = torch.zeros((batch_size, n_priors), dtype=torch.long).to(device)  # (N, 8732)

        # For each image
        for i in range(batch_size):
            n_objects = boxes[i].size(0)

            overlap = _find_jaccard_overlap(boxes[i],
                                           self.priors_xy)  # (n_objects, 8732)

            # For each prior, find the object that has the maximum overlap
            overlap_for_each_prior, object_for_each_prior = overlap.max(dim=0)  # (8732)

            # We don't want a situation where an object is not represented in our positive (non-background) priors -
            # 1. An object might not be the best object for all priors, and is therefore not in object_for_each_prior.
            # 2. All priors with the object may be assigned as background based on the threshold (0.5).

            # To remedy this -
            # First, find the prior that has the maximum overlap for each object.
            _, prior_for_each_object = overlap.max(dim=1)  # (N_o)

            # Then, assign each object to the corresponding maximum-overlap-prior. (This fixes 1.)
            object_for_each_prior[prior_for_each_object] = torch.LongTensor(range(n_objects)).to(device)

            # To ensure these priors qualify, artificially give them an overlap of greater than 0.5. (This fixes 2.)
            overlap_for_each_prior[prior_for_each_object] = 1.

            # Labels for each prior
            label_for_each_prior = labels[i][object_for_each_prior]  # (8732)
            # Set priors whose overlaps with objects are less than the threshold to be background (no object)
            label_for_each_prior[overlap_for_each_prior < self.threshold] = 0  # (8732)

            # Store
            true_classes[i] = label_for_each_prior

            # Encode center-size object coordinates into the form we regressed predicted boxes to
            true_locs[i] = _cxcy_to_gcxgcy(_xy_to_cxcy(boxes[i][object_for_each_prior]), self.priors_cxcy)  # (8732, 4)

        # Identify priors that are positive (object/non-background)
        positive_priors = true_classes != 0  # (N, 8732)

        # LOCALIZATION LOSS

        # Localization loss is computed only over positive (non-background) priors
        loc_loss = self.smooth_l1(predicted_locs[positive_priors], true_locs[positive_priors])  # (), scalar

        # Note: indexing with a torch.uint8 (byte) tensor flattens the tensor when indexing is across multiple dimensions (N & 8732)
        # So, if predicted_locs has the shape (N, 8732, 4), predicted_locs[positive_priors] will have (total positives, 4)

        # CONFIDENCE LOSS

        # Confidence loss is computed over positive priors and the most difficult (hardest) negative priors in each image
        # That is, FOR EACH IMAGE,
        # we will take the hardest (neg_pos_ratio * n_positives) negative priors, i.e where there is maximum loss
        # This is called Hard Negative Mining - it concentrates on hardest negatives in each image, and also minimizes pos/neg imbalance

        # Number of positive and hard-negative priors per image
        n_positives = positive_priors.sum(dim=1)  # (N)
        n_hard_negatives = self.neg_pos_ratio * n_positives  # (N)

        # First, find the loss for all priors
        conf_loss_all = self.cross_entropy(predicted_scores.view(-1, n_classes), true_classes.view(-1))  # (N * 8732)
        conf_loss_all = conf_loss_all.view(batch_size, n_priors)  # (N, 8732)

        # We already know which priors are positive
        conf_loss_pos = conf_loss_all[positive_priors]  # (sum(n_positives))

        # Next, find which priors are hard-negative
        # To do this, sort ONLY negative priors in each image in order of decreasing loss and take top n_hard_negatives
        conf_loss_neg = conf_loss_all.clone()  # (N, 8732)
        conf_loss_neg[positive_priors] = 0.  # (N, 8732), positive priors are ignored (never in top n_hard_negatives)
        conf_loss_neg, _ = conf_loss_neg.sort(dim=1, descending=True)  # (N, 8732), sorted by decreasing hardness
        hardness_ranks = torch.LongTensor(range(n_priors)).unsqueeze(0).expand_as(conf_loss_neg).to(device)  # (N, 8732)
        hard_negatives = hardness_ranks < n_hard_negatives.unsqueeze(1)  # (N, 8732)
        conf_loss_hard_neg = conf_loss_neg[hard_negatives]  # (sum(n_hard_negatives))

        # As in the paper, averaged over positive priors only, although computed over both positive and hard-negative priors
        conf_loss = (conf_loss_hard_neg.sum() + conf_loss_pos.sum()) / n_positives.sum().float()  # (), scalar

        # TOTAL LOSS

        return conf_loss + self.alpha * loc_loss


# sgrvinod/a-PyTorch-Tutorial-to-Object-Detection, model.py: SSD300.create_prior_boxes (Python loops; its six
# feature maps shrunk to 6, 3, 2, 1, 1, 1 cells a side: 236 priors) and MultiBoxLoss.forward (Jaccard matching of
# each image's objects to the priors, forced best prior per object, L1 localization loss over positives,
# cross-entropy with hard negative mining at 3:1); utils.py's box conversions; batch 2 of 3 objects each (the
# dataloader's list of per-image tensors), 6 classes
def ssd_multibox_loss(
    predicted_locs: f32[2, 236, 4], predicted_scores: f32[2, 236, 6], raw_boxes: f32[2, 3, 4], raw_labels: i64[2, 3]
):
    boxes = []
    labels = []
    for i in range(2):
        xy = (raw_boxes[i, :, :2] + 1) * 0.35
        wh = raw_boxes[i, :, 2:].abs() * 0.28 + 0.02
        boxes.append(torch.cat([xy, xy + wh], dim=1))
        labels.append(raw_labels[i] // 2 + 1)
    criterion = MultiBoxLoss(priors_cxcy=_create_prior_boxes())
    return criterion(predicted_locs, predicted_scores, boxes, labels)


# ---------------------------------------------------------------------------------------------------------------
# karpathy/makemore, makemore.py
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    block_size: int = None # length of the input sequences of integers
    vocab_size: int = None # the input integers are in range [0 .. vocab_size -1]
    # parameters below control the sizes of each model slightly differently
    n_layer: int = 4
    n_embd: int = 64
    n_embd2: int = 64
    n_head: int = 4


class RNNCell(nn.Module):
    """
    the job of a 'Cell' is to:
    take input at current time step x_{t} and the hidden state at the
    previous time step h_{t-1} and return the resulting hidden state
    h_{t} at the current timestep
    """
    def __init__(self, config):
        super().__init__()
        self.xh_to_h = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        xh = torch.cat([xt, hprev], dim=1)
        ht = F.tanh(self.xh_to_h(xh))
        return ht


class GRUCell(nn.Module):
    """
    same job as RNN cell, but a bit more complicated recurrence formula
    that makes the GRU more expressive and easier to optimize.
    """
    def __init__(self, config):
        super().__init__()
        # input, forget, output, gate
        self.xh_to_z = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_r = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)
        self.xh_to_hbar = nn.Linear(config.n_embd + config.n_embd2, config.n_embd2)

    def forward(self, xt, hprev):
        # first use the reset gate to wipe some channels of the hidden state to zero
        xh = torch.cat([xt, hprev], dim=1)
        r = F.sigmoid(self.xh_to_r(xh))
        hprev_reset = r * hprev
        # calculate the candidate new hidden state hbar
        xhr = torch.cat([xt, hprev_reset], dim=1)
        hbar = F.tanh(self.xh_to_hbar(xhr))
        # calculate the switch gate that determines if each channel should be updated at all
        z = F.sigmoid(self.xh_to_z(xh))
        # blend the previous hidden state and the new candidate hidden state
        ht = (1 - z) * hprev + z * hbar
        return ht


class RNN(nn.Module):

    def __init__(self, config, cell_type):
        super().__init__()
        self.block_size = config.block_size
        self.vocab_size = config.vocab_size
        self.start = nn.Parameter(torch.zeros(1, config.n_embd2)) # the starting hidden state
        self.wte = nn.Embedding(config.vocab_size, config.n_embd) # token embeddings table
        if cell_type == 'rnn':
            self.cell = RNNCell(config)
        elif cell_type == 'gru':
            self.cell = GRUCell(config)
        self.lm_head = nn.Linear(config.n_embd2, self.vocab_size)

    def get_block_size(self):
        return self.block_size

    def forward(self, idx, targets=None):
        device = idx.device
        b, t = idx.size()

        # embed all the integers up front and all at once for efficiency
        emb = self.wte(idx) # (b, t, n_embd)

        # sequentially iterate over the inputs and update the RNN state each tick
        hprev = self.start.expand((b, -1)) # expand out the batch dimension
        hiddens = []
        for i in range(t):
            xt = emb[:, i, :] # (b, n_embd)
            ht = self.cell(xt, hprev) # (b, n_embd2)
            hprev = ht
            hiddens.append(ht)

        # decode the outputs
        hidden = torch.stack(hiddens, 1) # (b, t, n_embd2)
        logits = self.lm_head(hidden)

        # if we are given some desired targets also calculate the loss
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)

        return logits, loss


# karpathy/makemore, makemore.py: RNN.forward with cell_type 'gru' (GRUCell) and its loss: vocab 27 (names.txt),
# block 6, n_embd 8, n_embd2 16, batch 4; targets end in -1 (ignored) after each word as CharDataset pads them;
# the module's weights are set from the inputs after construction
def makemore_gru(
    idx: i64[4, 6], tgt: i64[4, 6], start: f32[1, 16], wte: f32[27, 8], wz: f32[16, 24], bz: f32[16],
    wr: f32[16, 24], br: f32[16], wh: f32[16, 24], bh: f32[16], wl: f32[27, 16], bl: f32[27]
):
    config = ModelConfig(vocab_size=27, block_size=6, n_embd=8, n_embd2=16)
    model = RNN(config, cell_type='gru')
    s = 1.0 / math.sqrt(24)
    model.start = nn.Parameter(start)
    model.wte.weight = nn.Parameter(wte)
    model.cell.xh_to_z.weight = nn.Parameter(wz * s)
    model.cell.xh_to_z.bias = nn.Parameter(bz * s)
    model.cell.xh_to_r.weight = nn.Parameter(wr * s)
    model.cell.xh_to_r.bias = nn.Parameter(br * s)
    model.cell.xh_to_hbar.weight = nn.Parameter(wh * s)
    model.cell.xh_to_hbar.bias = nn.Parameter(bh * s)
    model.lm_head.weight = nn.Parameter(wl / 4)
    model.lm_head.bias = nn.Parameter(bl / 4)
    targets = (tgt * 2 + 1).clone()
    targets[:, 4:] = -1
    logits, loss = model(idx * 2 + 3, targets)
    return logits, loss


# ---------------------------------------------------------------------------------------------------------------
# pytorch/examples, time_sequence_prediction/train.py
# ---------------------------------------------------------------------------------------------------------------


class TspSequence(nn.Module):
    def __init__(self):
        super(TspSequence, self).__init__()
        self.lstm1 = nn.LSTMCell(1, 6)
        self.lstm2 = nn.LSTMCell(6, 6)
        self.linear = nn.Linear(6, 1)

    def forward(self, input, future = 0):
        outputs = []
        h_t = torch.zeros(input.size(0), 6, dtype=torch.double)
        c_t = torch.zeros(input.size(0), 6, dtype=torch.double)
        h_t2 = torch.zeros(input.size(0), 6, dtype=torch.double)
        c_t2 = torch.zeros(input.size(0), 6, dtype=torch.double)

        for input_t in input.split(1, dim=1):
            h_t, c_t = self.lstm1(input_t, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        for i in range(future):# if we should predict the future
            h_t, c_t = self.lstm1(output, (h_t, c_t))
            h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
            output = self.linear(h_t2)
            outputs += [output]
        outputs = torch.cat(outputs, dim=1)
        return outputs


# pytorch/examples, time_sequence_prediction/train.py: Sequence.forward (renamed TspSequence here; two nn.LSTMCell,
# 51 units shrunk to 6, and a linear read-out, float64 as `seq.double()` makes it) over 5 sine-wave series (the
# example has 97) for 6 steps of input and 3 predicted future steps; the weights come from the inputs (the example
# loads none)
def time_sequence_prediction(
    phase: f64[5, 1], w_ih1: f64[24, 1], w_hh1: f64[24, 6], b_ih1: f64[24], b_hh1: f64[24], w_ih2: f64[24, 6],
    w_hh2: f64[24, 6], b_ih2: f64[24], b_hh2: f64[24], w_lin: f64[1, 6], b_lin: f64[1]
) -> f64[5, 9]:
    seq = TspSequence()
    seq.double()
    s = 1.0 / math.sqrt(6)
    seq.lstm1.weight_ih = nn.Parameter(w_ih1 * s)
    seq.lstm1.weight_hh = nn.Parameter(w_hh1 * s)
    seq.lstm1.bias_ih = nn.Parameter(b_ih1 * s)
    seq.lstm1.bias_hh = nn.Parameter(b_hh1 * s)
    seq.lstm2.weight_ih = nn.Parameter(w_ih2 * s)
    seq.lstm2.weight_hh = nn.Parameter(w_hh2 * s)
    seq.lstm2.bias_ih = nn.Parameter(b_ih2 * s)
    seq.lstm2.bias_hh = nn.Parameter(b_hh2 * s)
    seq.linear.weight = nn.Parameter(w_lin * s)
    seq.linear.bias = nn.Parameter(b_lin * s)
    # the example's data: sin((x + shift) / T) with T = 20, here shifted by the given phase
    x = torch.arange(6, dtype=torch.double).unsqueeze(0) + phase * 40
    data = torch.sin(x / 1.0 / 20)
    with torch.no_grad():
        return seq(data, future=3)


# ---------------------------------------------------------------------------------------------------------------
# karpathy/llama2.c, model.py
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class LoraArgs:
    lora_r: int
    lora_alpha: float


@dataclass
class ModelArgs:
    # default hyperparameters for the Llama 7B model
    dim: int = 4096
    n_layers: int = 32
    n_heads: int = 32
    n_kv_heads: Optional[int] = None
    vocab_size: int = 32000
    hidden_dim: Optional[int] = None
    multiple_of: int = 256  # MLP hidden layer size will be multiple of
    norm_eps: float = 1e-5
    max_seq_len: int = 2048
    dropout: float = 0.0
    lora_modules: Optional[dict[str, LoraArgs]] = field(default_factory = dict)


class RMSNorm(torch.nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def _norm(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)

    def forward(self, x):
        output = self._norm(x.float()).type_as(x)
        return output * self.weight


def _precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0):
    freqs = 1.0 / (theta ** (torch.arange(0, dim, 2)[: (dim // 2)].float() / dim))
    t = torch.arange(end, device=freqs.device)  # type: ignore
    freqs = torch.outer(t, freqs).float()  # type: ignore
    freqs_cos = torch.cos(freqs)  # real part
    freqs_sin = torch.sin(freqs)  # imaginary part
    return freqs_cos, freqs_sin


def _reshape_for_broadcast(freqs_cis: torch.Tensor, x: torch.Tensor):
    ndim = x.ndim
    assert 0 <= 1 < ndim
    assert freqs_cis.shape == (x.shape[1], x.shape[-1])
    shape = [d if i == 1 or i == ndim - 1 else 1 for i, d in enumerate(x.shape)]
    return freqs_cis.view(shape)


def _apply_rotary_emb(
    xq: torch.Tensor,
    xk: torch.Tensor,
    freqs_cos: torch.Tensor,
    freqs_sin: torch.Tensor
) -> Tuple[torch.Tensor, torch.Tensor]:

    # reshape xq and xk to match the complex representation
    xq_r, xq_i = xq.float().reshape(xq.shape[:-1] + (-1, 2)).unbind(-1)
    xk_r, xk_i = xk.float().reshape(xk.shape[:-1] + (-1, 2)).unbind(-1)

    # reshape freqs_cos and freqs_sin for broadcasting
    freqs_cos = _reshape_for_broadcast(freqs_cos, xq_r)
    freqs_sin = _reshape_for_broadcast(freqs_sin, xq_r)

    # apply rotation using real numbers
    xq_out_r = xq_r * freqs_cos - xq_i * freqs_sin
    xq_out_i = xq_r * freqs_sin + xq_i * freqs_cos
    xk_out_r = xk_r * freqs_cos - xk_i * freqs_sin
    xk_out_i = xk_r * freqs_sin + xk_i * freqs_cos

    # flatten last two dimensions
    xq_out = torch.stack([xq_out_r, xq_out_i], dim=-1).flatten(3)
    xk_out = torch.stack([xk_out_r, xk_out_i], dim=-1).flatten(3)

    return xq_out.type_as(xq), xk_out.type_as(xk)


def _repeat_kv(x: torch.Tensor, n_rep: int) -> torch.Tensor:
    """torch.repeat_interleave(x, dim=2, repeats=n_rep)"""
    bs, slen, n_kv_heads, head_dim = x.shape
    if n_rep == 1:
        return x
    return (
        x[:, :, :, None, :]
        .expand(bs, slen, n_kv_heads, n_rep, head_dim)
        .reshape(bs, slen, n_kv_heads * n_rep, head_dim)
    )


class Attention(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        self.n_kv_heads = args.n_heads if args.n_kv_heads is None else args.n_kv_heads
        assert args.n_heads % self.n_kv_heads == 0
        model_parallel_size = 1
        self.n_local_heads = args.n_heads // model_parallel_size
        self.n_local_kv_heads = self.n_kv_heads // model_parallel_size
        self.n_rep = self.n_local_heads // self.n_local_kv_heads
        self.head_dim = args.dim // args.n_heads
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, self.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)
        self.attn_dropout = nn.Dropout(args.dropout)
        self.resid_dropout = nn.Dropout(args.dropout)
        self.dropout = args.dropout

        # use flash attention or a manual implementation?
        self.flash = hasattr(torch.nn.functional, 'scaled_dot_product_attention')
        if not self.flash:
            print("WARNING: using slow attention. Flash Attention requires PyTorch >= 2.0")
            mask = torch.full((1, 1, args.max_seq_len, args.max_seq_len), float("-inf"))
            mask = torch.triu(mask, diagonal=1)
            self.register_buffer("mask", mask)

    def forward(
        self,
        x: torch.Tensor,
        freqs_cos: torch.Tensor,
        freqs_sin: torch.Tensor,
    ):
        bsz, seqlen, _ = x.shape

        # QKV
        xq, xk, xv = self.wq(x), self.wk(x), self.wv(x)
        xq = xq.view(bsz, seqlen, self.n_local_heads, self.head_dim)
        xk = xk.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)
        xv = xv.view(bsz, seqlen, self.n_local_kv_heads, self.head_dim)

        # RoPE relative positional embeddings
        xq, xk = _apply_rotary_emb(xq, xk, freqs_cos, freqs_sin)

        # grouped multiquery attention: expand out keys and values
        xk = _repeat_kv(xk, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)
        xv = _repeat_kv(xv, self.n_rep)  # (bs, seqlen, n_local_heads, head_dim)

        # make heads into a batch dimension
        xq = xq.transpose(1, 2)  # (bs, n_local_heads, seqlen, head_dim)
        xk = xk.transpose(1, 2)
        xv = xv.transpose(1, 2)

        # flash implementation
        if self.flash:
            output = torch.nn.functional.scaled_dot_product_attention(xq, xk, xv, attn_mask=None, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            # manual implementation
            scores = torch.matmul(xq, xk.transpose(2, 3)) / math.sqrt(self.head_dim)
            assert hasattr(self, 'mask')
            scores = scores + self.mask[:, :, :seqlen, :seqlen]   # (bs, n_local_heads, seqlen, cache_len + seqlen)
            scores = F.softmax(scores.float(), dim=-1).type_as(xq)
            scores = self.attn_dropout(scores)
            output = torch.matmul(scores, xv)  # (bs, n_local_heads, seqlen, head_dim)

        # restore time as batch dimension and concat heads
        output = output.transpose(1, 2).contiguous().view(bsz, seqlen, -1)

        # final projection into the residual stream
        output = self.wo(output)
        output = self.resid_dropout(output)
        return output


class FeedForward(nn.Module):
    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.hidden_dim is None:
            args.hidden_dim = 4 * args.dim
            args.hidden_dim = int(2 * args.hidden_dim / 3)
            args.hidden_dim = args.multiple_of * ((args.hidden_dim + args.multiple_of - 1) // args.multiple_of)
        self.w1 = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.w2 = nn.Linear(args.hidden_dim, args.dim, bias=False)
        self.w3 = nn.Linear(args.dim, args.hidden_dim, bias=False)
        self.dropout = nn.Dropout(args.dropout)

    def forward(self, x):
        return self.dropout(self.w2(F.silu(self.w1(x)) * self.w3(x)))


class TransformerBlock(nn.Module):
    def __init__(self, layer_id: int, args: ModelArgs):
        super().__init__()
        self.n_heads = args.n_heads
        self.dim = args.dim
        self.head_dim = args.dim // args.n_heads
        self.attention = Attention(args)
        self.feed_forward = FeedForward(args)
        self.layer_id = layer_id
        self.attention_norm = RMSNorm(args.dim, eps=args.norm_eps)
        self.ffn_norm = RMSNorm(args.dim, eps=args.norm_eps)

    def forward(self, x, freqs_cos, freqs_sin):
        h = x + self.attention.forward(self.attention_norm(x), freqs_cos, freqs_sin)
        out = h + self.feed_forward.forward(self.ffn_norm(h))
        return out


# karpathy/llama2.c, model.py: TransformerBlock.forward (RMSNorm, Attention with real-arithmetic apply_rotary_emb,
# repeat_kv and PyTorch's scaled_dot_product_attention with is_causal, SwiGLU FeedForward) with the RoPE tables of
# precompute_freqs_cis sliced to the prompt as Transformer.forward does; a small layer shaped like stories42M's (dim
# 32, 4 heads, 2 KV heads, hidden 96 from multiple_of 32, max_seq_len 64), eval mode, a 16-token prompt, batch 1
def llama2c_block(
    x: f32[1, 16, 32], wq: f32[32, 32], wk: f32[16, 32], wv: f32[16, 32], wo: f32[32, 32],
    w1: f32[96, 32], w2: f32[32, 96], w3: f32[96, 32], attn_norm: f32[32], ffn_norm: f32[32]
) -> f32[1, 16, 32]:
    params = ModelArgs(dim=32, n_layers=8, n_heads=4, n_kv_heads=2, vocab_size=32000, multiple_of=32,
                       max_seq_len=64, dropout=0.0)
    block = TransformerBlock(0, params)
    s = 1.0 / math.sqrt(32)
    block.attention.wq.weight = nn.Parameter(wq * s)
    block.attention.wk.weight = nn.Parameter(wk * s)
    block.attention.wv.weight = nn.Parameter(wv * s)
    block.attention.wo.weight = nn.Parameter(wo * s)
    block.feed_forward.w1.weight = nn.Parameter(w1 * s)
    block.feed_forward.w2.weight = nn.Parameter(w2 / math.sqrt(96))
    block.feed_forward.w3.weight = nn.Parameter(w3 * s)
    block.attention_norm.weight = nn.Parameter(1 + 0.1 * attn_norm)
    block.ffn_norm.weight = nn.Parameter(1 + 0.1 * ffn_norm)
    block.eval()
    freqs_cos, freqs_sin = _precompute_freqs_cis(params.dim // params.n_heads, params.max_seq_len)
    seqlen = x.shape[1]
    with torch.no_grad():
        return block(x, freqs_cos[:seqlen], freqs_sin[:seqlen])


# ---------------------------------------------------------------------------------------------------------------
# rasbt/LLMs-from-scratch, ch04/03_kv-cache/gpt_with_kv_cache_optimized.py
# ---------------------------------------------------------------------------------------------------------------


class MultiHeadAttention(nn.Module):
    def __init__(self, d_in, d_out, context_length, dropout, num_heads, qkv_bias=False, max_seq_len=None, window_size=None):
        super().__init__()
        assert d_out % num_heads == 0, "d_out must be divisible by num_heads"

        self.d_out = d_out
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads  # Reduce the projection dim to match desired output dim

        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # Linear layer to combine head outputs
        self.dropout = nn.Dropout(dropout)

        ####################################################
        # NEW
        self.max_seq_len = max_seq_len or context_length
        self.window_size = window_size or self.max_seq_len
        self.register_buffer("cache_k", None, persistent=False)
        self.register_buffer("cache_v", None, persistent=False)
        ####################################################

    def forward(self, x, use_cache=False):
        b, num_tokens, d_in = x.shape

        keys_new = self.W_key(x)  # Shape: (b, num_tokens, d_out)
        values_new = self.W_value(x)
        queries = self.W_query(x)

        # We implicitly split the matrix by adding a `num_heads` dimension
        # Unroll last dim: (b, num_tokens, d_out) -> (b, num_tokens, num_heads, head_dim)
        keys_new = keys_new.view(b, num_tokens, self.num_heads, self.head_dim)
        values_new = values_new.view(b, num_tokens, self.num_heads, self.head_dim)
        queries = queries.view(b, num_tokens, self.num_heads, self.head_dim)

        # Transpose: (b, num_tokens, num_heads, head_dim) -> (b, num_heads, num_tokens, head_dim)
        keys_new = keys_new.transpose(1, 2)
        values_new = values_new.transpose(1, 2)
        queries = queries.transpose(1, 2)

        ####################################################
        # NEW
        if use_cache:
            if self.cache_k is None or self.cache_k.size(0) != b:
                self.cache_k = torch.zeros(b, self.num_heads,
                                           self.window_size, self.head_dim,
                                           device=x.device)
                self.cache_v = torch.zeros_like(self.cache_k)
                self.ptr_cur = 0  # pointer to next free slot

            # if incoming chunk would overflow discard oldest tokens
            if self.ptr_cur + num_tokens > self.window_size:
                overflow = self.ptr_cur + num_tokens - self.window_size
                # shift everything left by `overflow` (cheap view-copy)
                self.cache_k[:, :, :-overflow, :] = self.cache_k[:, :, overflow:, :].clone()
                self.cache_v[:, :, :-overflow, :] = self.cache_v[:, :, overflow:, :].clone()
                self.ptr_cur -= overflow  # pointer after shift

            self.cache_k[:, :, self.ptr_cur:self.ptr_cur + num_tokens, :] = keys_new
            self.cache_v[:, :, self.ptr_cur:self.ptr_cur + num_tokens, :] = values_new
            self.ptr_cur += num_tokens

            keys = self.cache_k[:, :, :self.ptr_cur, :]
            values = self.cache_v[:, :, :self.ptr_cur, :]
        else:
            keys, values = keys_new, values_new
            self.ptr_cur = 0  # keep pointer sane if you interleave modes
        ####################################################


        # Compute scaled dot-product attention (aka self-attention) with a causal mask
        attn_scores = queries @ keys.transpose(2, 3)  # Dot product for each head

        ####################################################
        # NEW
        K = attn_scores.size(-1)

        if num_tokens == K:
            # No cache → use the pre‑baked triangular mask slice
            causal_mask = torch.triu(torch.ones(num_tokens, K, device=x.device, dtype=torch.bool), diagonal=1)
        else:
            # Cached: need to offset the diagonal by (K − num_tokens)
            offset = K - num_tokens  # number of tokens already in cache before this chunk
            row_idx = torch.arange(num_tokens, device=x.device).unsqueeze(1)  # (num_tokens, 1)
            col_idx = torch.arange(K, device=x.device).unsqueeze(0)           # (1, K)
            causal_mask = row_idx + offset < col_idx                          # True where j > i+offset
        ####################################################

        # Use the mask to fill attention scores
        attn_scores.masked_fill_(causal_mask.unsqueeze(0).unsqueeze(0), -torch.inf)

        attn_weights = torch.softmax(attn_scores / keys.shape[-1]**0.5, dim=-1)
        attn_weights = self.dropout(attn_weights)

        # Shape: (b, num_tokens, num_heads, head_dim)
        context_vec = (attn_weights @ values).transpose(1, 2)

        # Combine heads, where self.d_out = self.num_heads * self.head_dim
        context_vec = context_vec.contiguous().view(b, num_tokens, self.d_out)
        context_vec = self.out_proj(context_vec)  # optional projection

        return context_vec

    ####################################################
    # NEW
    def reset_cache(self):
        self.cache_k, self.cache_v = None, None
    ####################################################


# rasbt/LLMs-from-scratch, ch04/03_kv-cache/gpt_with_kv_cache_optimized.py: MultiHeadAttention.forward with
# use_cache (a preallocated window cache written by position, shifted left when a chunk would overflow it, the causal
# mask offset by the cached length) shaped like GPT-2's attention but small (32 wide, 4 heads, no qkv bias, dropout
# 0.1 in eval, context 64), a 16-slot window: a 12-token prefill, then 8 single-token steps as
# generate_text_simple_cached feeds them (the last 4 shift the window)
def llmscratch_window_kv_cache(
    x_prefill: f32[1, 12, 32], x_steps: f32[8, 1, 1, 32], wq: f32[32, 32], wk: f32[32, 32],
    wv: f32[32, 32], wo: f32[32, 32], bo: f32[32]
) -> tuple[f32[1, 12, 32], f32[8, 32], f32[1, 4, 16, 8]]:
    att = MultiHeadAttention(32, 32, 64, 0.1, 4, qkv_bias=False, window_size=16)
    s = 1.0 / math.sqrt(32)
    att.W_query.weight = nn.Parameter(wq * s)
    att.W_key.weight = nn.Parameter(wk * s)
    att.W_value.weight = nn.Parameter(wv * s)
    att.out_proj.weight = nn.Parameter(wo * s)
    att.out_proj.bias = nn.Parameter(bo * s)
    att.eval()
    with torch.no_grad():
        out0 = att(x_prefill, use_cache=True)
        outs = []
        for i in range(8):
            outs.append(att(x_steps[i], use_cache=True)[0, 0])
    return out0, torch.stack(outs), att.cache_k


# ---------------------------------------------------------------------------------------------------------------
# mit-han-lab/streaming-llm, streaming_llm/kv_cache.py
# ---------------------------------------------------------------------------------------------------------------


def _slice2d(x, start, end):
    return x[:, :, start:end, ...]


def _slice3d(x, start, end):
    return x[:, :, :, start:end, ...]


def _slice1d(x, start, end):
    return x[:, start:end, ...]


DIM_TO_SLICE = {
    1: _slice1d,
    2: _slice2d,
    3: _slice3d,
}


class StartRecentKVCache:
    def __init__(
        self,
        start_size=4,
        recent_size=512,
        k_seq_dim=2,
        v_seq_dim=2,
    ):
        print(f"StartRecentKVCache: {start_size}, {recent_size}")
        self.start_size = start_size
        self.recent_size = recent_size
        self.cache_size = start_size + recent_size
        self.k_seq_dim = k_seq_dim
        self.v_seq_dim = v_seq_dim
        self.k_slice = DIM_TO_SLICE[k_seq_dim]
        self.v_slice = DIM_TO_SLICE[v_seq_dim]

    def __call__(self, past_key_values):
        if past_key_values is None:
            return None
        seq_len = past_key_values[0][0].size(self.k_seq_dim)
        if seq_len <= self.cache_size:
            return past_key_values
        return [
            [
                torch.cat(
                    [
                        self.k_slice(k, 0, self.start_size),
                        self.k_slice(k, seq_len - self.recent_size, seq_len),
                    ],
                    dim=self.k_seq_dim,
                ),
                torch.cat(
                    [
                        self.v_slice(v, 0, self.start_size),
                        self.v_slice(v, seq_len - self.recent_size, seq_len),
                    ],
                    dim=self.v_seq_dim,
                ),
            ]
            for k, v in past_key_values
        ]

    def evict_for_space(self, past_key_values, num_coming):
        if past_key_values is None:
            return None
        seq_len = past_key_values[0][0].size(self.k_seq_dim)
        if seq_len + num_coming <= self.cache_size:
            return past_key_values
        return [
            [
                torch.cat(
                    [
                        self.k_slice(k, 0, self.start_size),
                        self.k_slice(
                            k, seq_len - self.recent_size + num_coming, seq_len
                        ),
                    ],
                    dim=self.k_seq_dim,
                ),
                torch.cat(
                    [
                        self.v_slice(v, 0, self.start_size),
                        self.v_slice(
                            v, seq_len - self.recent_size + num_coming, seq_len
                        ),
                    ],
                    dim=self.v_seq_dim,
                ),
            ]
            for k, v in past_key_values
        ]


# mit-han-lab/streaming-llm, streaming_llm/kv_cache.py: StartRecentKVCache (start 4 as enable_streaming_llm sets,
# recent 12 instead of 508; k_seq_dim = v_seq_dim = 2 as for Llama) over two layers of a small cache (4 KV heads of
# dim 16): evict_for_space before a 4-token prompt on a 20-token cache (as run_streaming_llama.py does), the prompt's
# keys and values appended, then __call__ once more
def streaming_llm_evict(
    k0: f32[1, 4, 20, 16], v0: f32[1, 4, 20, 16], k1: f32[1, 4, 20, 16], v1: f32[1, 4, 20, 16],
    new_k: f32[2, 1, 4, 4, 16], new_v: f32[2, 1, 4, 4, 16]
):
    kv_cache = StartRecentKVCache(start_size=4, recent_size=12, k_seq_dim=2, v_seq_dim=2)
    past_key_values = [[k0, v0], [k1, v1]]
    past_key_values = kv_cache.evict_for_space(past_key_values, 4)
    past_key_values = [
        [torch.cat([k, new_k[i]], dim=2), torch.cat([v, new_v[i]], dim=2)]
        for i, (k, v) in enumerate(past_key_values)
    ]
    past_key_values = kv_cache(past_key_values)
    return past_key_values[0][0], past_key_values[0][1], past_key_values[1][0], past_key_values[1][1]



# ---------------------------------------------------------------------------------------------------------------
# openai/whisper, whisper/decoding.py: LogitFilter, SuppressBlank, SuppressTokens, GreedyDecoder, the main loop
# ---------------------------------------------------------------------------------------------------------------


class LogitFilter:
    def apply(self, logits: Tensor, tokens: Tensor) -> None:
        """Apply any filtering or masking to logits in-place"""
        raise NotImplementedError


class SuppressBlank(LogitFilter):
    def __init__(self, tokenizer, sample_begin: int):
        self.tokenizer = tokenizer
        self.sample_begin = sample_begin

    def apply(self, logits: Tensor, tokens: Tensor):
        if tokens.shape[1] == self.sample_begin:
            logits[:, self.tokenizer.encode(" ") + [self.tokenizer.eot]] = -np.inf


class SuppressTokens(LogitFilter):
    def __init__(self, suppress_tokens: Sequence[int]):
        self.suppress_tokens = list(suppress_tokens)

    def apply(self, logits: Tensor, tokens: Tensor):
        logits[:, self.suppress_tokens] = -np.inf


class GreedyDecoder:
    def __init__(self, temperature: float, eot: int):
        self.temperature = temperature
        self.eot = eot

    def update(
        self, tokens: Tensor, logits: Tensor, sum_logprobs: Tensor
    ) -> Tuple[Tensor, bool]:
        if self.temperature == 0:
            next_tokens = logits.argmax(dim=-1)
        else:
            next_tokens = Categorical(logits=logits / self.temperature).sample()

        logprobs = F.log_softmax(logits.float(), dim=-1)
        current_logprobs = logprobs[torch.arange(logprobs.shape[0]), next_tokens]
        sum_logprobs += current_logprobs * (tokens[:, -1] != self.eot)

        next_tokens[tokens[:, -1] == self.eot] = self.eot
        tokens = torch.cat([tokens, next_tokens[:, None]], dim=-1)

        completed = (tokens[:, -1] == self.eot).all()
        return tokens, completed


class _TokenizerStandIn:
    """The two members of whisper's multilingual Tokenizer that these filters read (eot moved into a 700-token
    vocabulary: 50257 - 49700)."""

    eot = 557

    def encode(self, text):
        return [220] if text == " " else []


# openai/whisper, whisper/decoding.py: DecodingTask._main_loop's filtering and greedy update (temperature 0,
# best_of 3 groups, without timestamps: sample_begin 4) with SuppressBlank and SuppressTokens (whisper's default
# suppress list as a literal, "-1" resolved to the tokenizer's non-speech tokens, cut to a 700-token vocabulary: the
# ids under 700 kept, the special tokens from 50254 on moved down by 49700 like eot and the SOT sequence, the rest
# dropped) applied in place to each step's last-position logits, GreedyDecoder.update's log-probability sums and the
# `completed` break; 8 steps of logits as the model would return them
def whisper_greedy_logit_filters(
    logits_steps: f32[8, 3, 700]
) -> tuple[i64[3, 12], f32[3]]:
    tokenizer = _TokenizerStandIn()
    sample_begin = 4
    suppress = [1, 2, 7, 8, 9, 10, 14, 25, 26, 27, 28, 29, 31, 58, 59, 60, 61, 62, 63, 90, 91, 92, 93, 359, 503,
                522, 542, 554, 558, 658, 659, 660, 661, 662]
    logit_filters = [SuppressBlank(tokenizer, sample_begin), SuppressTokens(suppress)]
    decoder = GreedyDecoder(0.0, tokenizer.eot)
    tokens = torch.tensor([[558, 559, 659, 663]]).repeat(3, 1)
    sum_logprobs = torch.zeros(3)
    for i in range(8):
        logits = logits_steps[i] * 6
        for logit_filter in logit_filters:
            logit_filter.apply(logits, tokens)
        tokens, completed = decoder.update(tokens, logits, sum_logprobs)
        if completed or tokens.shape[-1] > 448:
            break
    return tokens, sum_logprobs


# ---------------------------------------------------------------------------------------------------------------
# facebookresearch/moco, moco/builder.py (MoCo), main_moco.py (train)
# ---------------------------------------------------------------------------------------------------------------


class MoCo(nn.Module):
    """
    Build a MoCo model with: a query encoder, a key encoder, and a queue
    https://arxiv.org/abs/1911.05722
    """

    def __init__(
        self,
        base_encoder,
        queue,
        dim: int = 128,
        K: int = 65536,
        m: float = 0.999,
        T: float = 0.07,
        mlp: bool = False,
    ) -> None:
        """
        dim: feature dimension (default: 128)
        K: queue size; number of negative keys (default: 65536)
        m: moco momentum of updating key encoder (default: 0.999)
        T: softmax temperature (default: 0.07)
        """
        super(MoCo, self).__init__()

        self.K = K
        self.m = m
        self.T = T

        # create the encoders
        # num_classes is the output fc dimension
        self.encoder_q = base_encoder(num_classes=dim)
        self.encoder_k = base_encoder(num_classes=dim)

        if mlp:  # hack: brute-force replacement
            dim_mlp = self.encoder_q.fc.weight.shape[1]
            self.encoder_q.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_q.fc
            )
            self.encoder_k.fc = nn.Sequential(
                nn.Linear(dim_mlp, dim_mlp), nn.ReLU(), self.encoder_k.fc
            )

        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.data.copy_(param_q.data)  # initialize
            param_k.requires_grad = False  # not update by gradient

        # create the queue
        self.register_buffer("queue", queue)
        self.queue = nn.functional.normalize(self.queue, dim=0)

        self.register_buffer("queue_ptr", torch.zeros(1, dtype=torch.long))

    @torch.no_grad()
    def _momentum_update_key_encoder(self) -> None:
        """
        Momentum update of the key encoder
        """
        for param_q, param_k in zip(
            self.encoder_q.parameters(), self.encoder_k.parameters()
        ):
            param_k.mul_(self.m).add_(param_q.mul(1. - self.m))

    @torch.no_grad()
    def _dequeue_and_enqueue(self, keys) -> None:
        batch_size = keys.shape[0]

        ptr = int(self.queue_ptr)
        assert self.K % batch_size == 0  # for simplicity

        # replace the keys at ptr (dequeue and enqueue)
        self.queue[:, ptr : ptr + batch_size] = keys.T
        ptr = (ptr + batch_size) % self.K  # move pointer

        self.queue_ptr[0] = ptr

    def forward(self, im_q, im_k):
        """
        Input:
            im_q: a batch of query images
            im_k: a batch of key images
        Output:
            logits, targets
        """

        # compute query features
        q = self.encoder_q(im_q)  # queries: NxC
        q = nn.functional.normalize(q, dim=1)

        # compute key features
        with torch.no_grad():  # no gradient to keys
            self._momentum_update_key_encoder()  # update the key encoder

            k = self.encoder_k(im_k)  # keys: NxC
            k = nn.functional.normalize(k, dim=1)

        # compute logits
        # Einstein sum is more intuitive
        # positive logits: Nx1
        l_pos = torch.einsum("nc,nc->n", [q, k]).unsqueeze(-1)
        # negative logits: NxK
        l_neg = torch.einsum("nc,ck->nk", [q, self.queue.clone().detach()])

        # logits: Nx(1+K)
        logits = torch.cat([l_pos, l_neg], dim=1)

        # apply temperature
        logits /= self.T

        # labels: positive key indicators
        labels = torch.zeros(logits.shape[0], dtype=torch.long)

        # dequeue and enqueue
        self._dequeue_and_enqueue(k)

        return logits, labels


class _PooledEncoder(nn.Module):
    """Stand-in for torchvision's resnet18(num_classes=dim) from its pooled features on: a 16-wide layer (512 in
    ResNet-18), then fc."""

    def __init__(self, num_classes, w):
        super().__init__()
        self.layer = nn.Linear(16, 16)
        self.fc = nn.Linear(16, num_classes)
        self.layer.weight = nn.Parameter(w["layer_w"].clone())
        self.layer.bias = nn.Parameter(w["layer_b"].clone())
        self.fc.weight = nn.Parameter(w["fc_w"].clone())
        self.fc.bias = nn.Parameter(w["fc_b"].clone())

    def forward(self, x):
        return self.fc(torch.relu(self.layer(x)))


# facebookresearch/moco, moco/builder.py: MoCo (v2: mlp head, m 0.999, T 0.2; dim 8 and K 32 instead of 128 and
# 16384) forward with _momentum_update_key_encoder and _dequeue_and_enqueue, in main_moco.py's train loop
# (CrossEntropyLoss, then torch.optim.SGD lr 0.03, momentum 0.9, weight decay 1e-4) for 3 iterations of 4 images;
# single process: concat_all_gather and the DDP batch shuffle left out, `.cuda()` dropped; the queue's initial randn
# given; the encoder is a stand-in from pooled features, 16 wide (the mlp head's new layer set from the inputs in both
# encoders); the gradients of the query encoder's six tensors given per step
def moco_momentum_queue_steps(
    im_q: f32[3, 4, 16], im_k: f32[3, 4, 16], queue0: f32[8, 32], layer_w: f32[16, 16],
    layer_b: f32[16], fc_w: f32[8, 16], fc_b: f32[8], g_layer_w: f32[3, 16, 16], g_mlp_w: f32[3, 16, 16],
    g_fc_w: f32[3, 8, 16], mlp_w: f32[16, 16], mlp_b: f32[16]
):
    w = dict(layer_w=layer_w / 4, layer_b=layer_b * 0.1, fc_w=fc_w / 4, fc_b=fc_b * 0.1)
    model = MoCo(partial(_PooledEncoder, w=w), queue0, dim=8, K=32, m=0.999, T=0.2, mlp=True)
    for enc in (model.encoder_q, model.encoder_k):  # the mlp head's new layer, as loaded from a checkpoint
        enc.fc[0].weight = nn.Parameter(mlp_w / 4)
        enc.fc[0].bias = nn.Parameter(mlp_b * 0.1)
        enc.fc[0].weight.requires_grad = enc is model.encoder_q
        enc.fc[0].bias.requires_grad = enc is model.encoder_q
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), 0.03, momentum=0.9, weight_decay=1e-4)
    losses = []
    for i in range(3):
        output, target = model(im_q[i], im_k[i])
        loss = criterion(output, target)
        losses.append(loss)
        optimizer.zero_grad()
        grads = [g_layer_w[i] * 0.01, g_layer_w[i, 0] * 0.01, g_mlp_w[i] * 0.01, g_mlp_w[i, 0] * 0.01,
                 g_fc_w[i] * 0.01, g_fc_w[i, :, 0] * 0.01]
        for p, g in zip(model.encoder_q.parameters(), grads):
            p.grad = g.clone()
        optimizer.step()
    k_params = [p.detach() for p in model.encoder_k.parameters()]
    return torch.stack(losses), model.queue, model.queue_ptr, k_params[0], k_params[2], k_params[4]



# ---------------------------------------------------------------------------------------------------------------
# ikostrikov/pytorch-a3c, my_optim.py
# ---------------------------------------------------------------------------------------------------------------


class SharedAdam(optim.Adam):
    """Implements Adam algorithm with shared states.
    """

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8,
                 weight_decay=0):
        super(SharedAdam, self).__init__(params, lr, betas, eps, weight_decay)

        for group in self.param_groups:
            for p in group['params']:
                state = self.state[p]
                state['step'] = torch.zeros(1)
                state['exp_avg'] = p.data.new().resize_as_(p.data).zero_()
                state['exp_avg_sq'] = p.data.new().resize_as_(p.data).zero_()

    def share_memory(self):
        for group in self.param_groups:
            for p in group['params']:
                state = self.state[p]
                state['step'].share_memory_()
                state['exp_avg'].share_memory_()
                state['exp_avg_sq'].share_memory_()

    def step(self, closure=None):
        """Performs a single optimization step.
        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                exp_avg, exp_avg_sq = state['exp_avg'], state['exp_avg_sq']
                beta1, beta2 = group['betas']

                state['step'] += 1

                if group['weight_decay'] != 0:
                    grad = grad.add(group['weight_decay'], p.data)

                # Decay the first and second moment running average coefficient
                exp_avg.mul_(beta1).add_(1 - beta1, grad)
                exp_avg_sq.mul_(beta2).addcmul_(1 - beta2, grad, grad)

                denom = exp_avg_sq.sqrt().add_(group['eps'])

                bias_correction1 = 1 - beta1 ** state['step'][0]
                bias_correction2 = 1 - beta2 ** state['step'][0]
                step_size = group['lr'] * math.sqrt(bias_correction2) / bias_correction1

                p.data.addcdiv_(-step_size, exp_avg, denom)

        return loss


# ikostrikov/pytorch-a3c, my_optim.py: SharedAdam.step (torch.optim.Adam subclass, legacy positional add_/addcmul_/
# addcdiv_ overloads, a one-element step tensor), lr 1e-4 as main.py builds it (share_memory is not called), 4 steps
# on the LSTM and heads of model.py's ActorCritic, shrunk (LSTMCell(12, 8) instead of (288, 256): weight_ih,
# weight_hh, biases; critic and actor linears for 6 actions); the critic's gradient is missing (None) on the first
# step, as when only part of the graph was used
def a3c_shared_adam_steps(
    w_ih: f32[32, 12], w_hh: f32[32, 8], b_ih: f32[32], b_hh: f32[32], critic_w: f32[1, 8],
    actor_w: f32[6, 8], grads_ih: f32[4, 32, 12], grads_hh: f32[4, 32, 8], grads_heads: f32[4, 7, 8]
):
    params = [w_ih, w_hh, b_ih, b_hh, critic_w, actor_w]
    optimizer = SharedAdam(params, lr=1e-4)
    for i in range(4):
        w_ih.grad = grads_ih[i]
        w_hh.grad = grads_hh[i]
        b_ih.grad = grads_ih[i, :, 0].contiguous()
        b_hh.grad = grads_hh[i, :, 0].contiguous()
        critic_w.grad = None if i == 0 else grads_heads[i, :1]
        actor_w.grad = grads_heads[i, 1:]
        optimizer.step()
    return w_ih, w_hh, b_ih, b_hh, critic_w, actor_w


# ---------------------------------------------------------------------------------------------------------------
# dgriff777/rl_a3c_pytorch, shared_optim.py
# ---------------------------------------------------------------------------------------------------------------


class SharedRMSprop(optim.RMSprop):
    """Implements RMSprop algorithm with shared states.
    """

    def __init__(self,
                 params,
                 lr=1e-2,
                 alpha=0.99,
                 eps=1e-8,
                 weight_decay=0,
                 momentum=0,
                 centered=False):
        super(SharedRMSprop, self).__init__(params, lr, alpha, eps,
                                            weight_decay, momentum, centered)

        for group in self.param_groups:
            for p in group['params']:
                state = self.state[p]
                state['step'] = torch.zeros(1)
                state['grad_avg'] = p.data.new().resize_as_(p.data).zero_()
                state['square_avg'] = p.data.new().resize_as_(p.data).zero_()
                state['momentum_buffer'] = p.data.new().resize_as_(
                    p.data).zero_()

    def share_memory(self):
        for group in self.param_groups:
            for p in group['params']:
                state = self.state[p]
                state['square_avg'].share_memory_()
                state['step'].share_memory_()
                state['grad_avg'].share_memory_()
                state['momentum_buffer'].share_memory_()

    def step(self, closure=None):
        """Performs a single optimization step.
        Arguments:
            closure (callable, optional): A closure that reevaluates the model
                and returns the loss.
        """
        loss = None
        if closure is not None:
            loss = closure()

        for group in self.param_groups:
            for p in group['params']:
                if p.grad is None:
                    continue
                grad = p.grad.data
                state = self.state[p]

                square_avg = state['square_avg']
                alpha = group['alpha']

                state['step'] += 1

                if group['weight_decay'] != 0:
                    grad = grad.add(group['weight_decay'], p.data)

                square_avg.mul_(alpha).addcmul_(1 - alpha, grad, grad)

                if group['centered']:
                    grad_avg = state['grad_avg']
                    grad_avg.mul_(alpha).add_(1 - alpha, grad)
                    avg = square_avg.addcmul(
                        -1, grad_avg, grad_avg).sqrt().add_(group['eps'])
                else:
                    avg = square_avg.sqrt().add_(group['eps'])

                if group['momentum'] > 0:
                    buf = state['momentum_buffer']
                    buf.mul_(group['momentum']).addcdiv_(grad, avg)
                    p.data.add_(-group['lr'], buf)
                else:
                    p.data.addcdiv_(-group['lr'], grad, avg)

        return loss


# dgriff777/rl_a3c_pytorch, shared_optim.py: SharedRMSprop.step (torch.optim.RMSprop subclass, legacy positional
# overloads), centered with momentum 0.9 and weight decay 1e-5 (lr 1e-4 as main.py), 4 steps on model.py's A3Clstm
# parameters, shrunk (a 4x4x2x2 convolution, the LSTMCell's weight_hh 32x8 and a bias, actor 6x8 and critic 1x8)
def a3c_shared_rmsprop_steps(
    conv_w: f32[4, 4, 2, 2], lstm_w_hh: f32[32, 8], lstm_b: f32[32], actor_w: f32[6, 8],
    critic_w: f32[1, 8], g_conv: f32[4, 4, 4, 2, 2], g_lstm: f32[4, 32, 8], g_heads: f32[4, 7, 8]
):
    params = [conv_w, lstm_w_hh, lstm_b, actor_w, critic_w]
    optimizer = SharedRMSprop(params, lr=1e-4, weight_decay=1e-5, momentum=0.9, centered=True)
    for i in range(4):
        conv_w.grad = g_conv[i]
        lstm_w_hh.grad = g_lstm[i]
        lstm_b.grad = g_lstm[i, :, 0].contiguous()
        actor_w.grad = g_heads[i, :6]
        critic_w.grad = g_heads[i, 6:]
        optimizer.step()
    return conv_w, lstm_w_hh, lstm_b, actor_w, critic_w


# ---------------------------------------------------------------------------------------------------------------
# NVlabs/edm, training/training_loop.py
# ---------------------------------------------------------------------------------------------------------------


class _NetStandIn(nn.Module):
    """The parameters of an EDM network (a SongUNet's conv and embedding layers), as given tensors."""

    def __init__(self, conv_w, conv_b, emb_w, emb_b):
        super().__init__()
        self.conv_w = nn.Parameter(conv_w)
        self.conv_b = nn.Parameter(conv_b)
        self.emb_w = nn.Parameter(emb_w)
        self.emb_b = nn.Parameter(emb_b)


# NVlabs/edm, training/training_loop.py: the "Update weights" and "Update EMA" blocks of training_loop (the learning
# rate ramp-up written into optimizer.param_groups, torch.nan_to_num(param.grad, ..., out=param.grad), the Adam step
# with the CIFAR-10 config's optimizer_kwargs (lr 10e-4, betas [0.9, 0.999], eps 1e-8), then ema_beta from the EMA
# half-life with its ramp-up and p_ema.copy_(p_net.detach().lerp(p_ema, ema_beta))) for 3 ticks of batch 512 resumed
# at 2000 kimg; the EMA network is copy.deepcopy of the net as the loop makes it; small parameters (an 8x8x3x3
# convolution, a 16x8 embedding); gradients given, with a few infinities for nan_to_num to clamp
def edm_adam_ema_steps(
    conv_w: f32[8, 8, 3, 3], conv_b: f32[8], emb_w: f32[16, 8], emb_b: f32[16],
    g_conv: f32[3, 8, 8, 3, 3], g_emb: f32[3, 16, 8]
):
    net = _NetStandIn(conv_w, conv_b, emb_w, emb_b)
    optimizer_kwargs = dict(class_name='torch.optim.Adam', lr=10e-4, betas=[0.9, 0.999], eps=1e-8)
    optimizer = torch.optim.Adam(params=net.parameters(), lr=optimizer_kwargs['lr'], betas=optimizer_kwargs['betas'],
                                 eps=optimizer_kwargs['eps'])
    ema = copy.deepcopy(net).eval().requires_grad_(False)
    batch_size = 512
    lr_rampup_kimg = 10000
    ema_halflife_kimg = 500
    ema_rampup_ratio = 0.05
    cur_nimg = 2000 * 1000
    for i in range(3):
        optimizer.zero_grad(set_to_none=True)
        gc = torch.where(g_conv[i].abs() > 0.995, g_conv[i] / 0.0, g_conv[i])
        net.conv_w.grad = gc
        net.conv_b.grad = g_conv[i, :, 0, 0, 0].contiguous()
        net.emb_w.grad = g_emb[i]
        net.emb_b.grad = g_emb[i, :, 0].contiguous()

        # Update weights.
        for g in optimizer.param_groups:
            g['lr'] = optimizer_kwargs['lr'] * min(cur_nimg / max(lr_rampup_kimg * 1000, 1e-8), 1)
        for param in net.parameters():
            if param.grad is not None:
                torch.nan_to_num(param.grad, nan=0, posinf=1e5, neginf=-1e5, out=param.grad)
        optimizer.step()

        # Update EMA.
        ema_halflife_nimg = ema_halflife_kimg * 1000
        if ema_rampup_ratio is not None:
            ema_halflife_nimg = min(ema_halflife_nimg, cur_nimg * ema_rampup_ratio)
        ema_beta = 0.5 ** (batch_size / max(ema_halflife_nimg, 1e-8))
        for p_ema, p_net in zip(ema.parameters(), net.parameters()):
            p_ema.copy_(p_net.detach().lerp(p_ema, ema_beta))

        cur_nimg += batch_size
    return net.conv_w.detach(), net.emb_w.detach(), ema.conv_w.detach(), ema.emb_w.detach(), ema.conv_b.detach()
