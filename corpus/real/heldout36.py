"""Held-out real code, issue 14's thirty-sixth round, the programs every engine runs after the round's fixes: lufficc/SSD's
PriorBox (8732 priors built in Python loops: a constant tensor of 34,928 numbers) and test-time box decoding, and the
DARTS recurrent cell with its searched genotype (quark0/darts: a namedtuple genotype, an `nn.ParameterList` of
per-node weights, eval mode). Ported by a helper from the originals, as code nobody here had seen; the sizes are the
originals' where a constant depends on them (SSD300's priors), smaller elsewhere. Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

from collections import namedtuple
from itertools import product
from math import sqrt

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable


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
