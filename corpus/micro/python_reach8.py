"""Python and PyTorch that real code uses, added after held-out rounds 34 and 35: index tensors next to index lists
of data-dependent length where their broadcast does not depend on the length (chameleon's
`logits[torch.where(mask)[0].unsqueeze(1), token_ids] = -inf`), read and written on every engine; mmdetection's
`pos_inds = torch.nonzero(gt_inds > 0, as_tuple=False).squeeze()` (0-d where one anchor is positive), as an index read
and written, in arithmetic, `numel()` and sums, with none, one and several positives; `F.max_pool3d`/`avg_pool3d`
and the pooling modules (`nn.MaxPool1d`/`2d`/`3d`, `nn.AvgPool1d`/`2d`/`3d`), with DeFCN's 3-d max filtering across
pyramid levels; module-level `torch.jit.script(f)` (FCOS-style losses), type aliases (`dict[str, torch.Tensor]`,
`Optional[...]`) and a `torch.autograd.Function`'s `apply` bound to a name (maskrcnn-benchmark's `clip = Clip.apply`); `functools.reduce`; an optimizer keeping its state under its first parameter
(hypergradient-descent's SGDHD, `self.state[self._params[0]]`); DETR's bound methods as values (`loss_map =
{'labels': self.loss_labels, ...}`), `torch.tensor(range(n))`, the deprecated `torch.range` and `layout=x.layout`; slices from a tensor element with a fixed length (TransformerEngine's staggered
`freqs[i : i + n] for i in start_positions`); `with` on the program's own context managers; `except IndexError`
(and `LookupError`) around Python list and tuple indexing; `module.double()`/`float()`; the deprecated
`nn.init.constant`; legacy tensor types (`torch.ByteTensor`) as values, called; `torch.nan_to_num(..., out=)`;
`collections.namedtuple` at module level, ranges in module-level values, `nn.ParameterList`, dataclass
`field(default=..., default_factory=...)`, class methods that never name their class, `torch.Size.numel()`,
`torch.LongTensor(range(n))`, `module_list += [...]`, `x.new().resize_as_(y)`, `torch.optim.RMSprop`, copies and
casts of drawn weights loaded before they are read, `is` between objects, and unsupported imports read only on paths
not taken (from held-out round 36).
"""

from __future__ import annotations

import collections
import functools
import math
from collections import namedtuple
from dataclasses import dataclass, field
from functools import reduce
from typing import Optional

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Function
from torch.distributions import Categorical
from torch.nn.utils.rnn import PackedSequence


def write_rows_cols(logits: f32[4, 10], s: f32[4]) -> f32[4, 10]:
    """facebookresearch/chameleon, logits_processor.py: DisallowTokensInIndexRangeLogitsProcessor's write."""
    tok = torch.tensor([1, 7, 7])
    logits[torch.where(s > 0)[0].unsqueeze(1), tok] = -math.inf
    return logits


def write_rows_cols_values(logits: f32[5, 6], s: f32[5], v: f32[3]) -> f32[5, 6]:
    tok = torch.tensor([0, 2, 5])
    rows = torch.where(s > -0.2)[0]
    logits[rows[:, None], tok] = v
    return logits


def read_rows_cols(x: f32[6, 5], s: f32[6]) :
    cols = torch.tensor([[4, 0, 2]])
    rows = torch.where(s > 0)[0].unsqueeze(-1)
    g = x[rows, cols]
    return g.sum(), (g * 2).amax(1).sum()


def write_3d(x: f32[2, 4, 5], s: f32[4]) -> f32[2, 4, 5]:
    tok = torch.tensor([3, 1])
    x[:, torch.where(s < 0.3)[0].unsqueeze(1), tok] = 0.5
    return x


def _assign(gt_inds, gt_labels, scores):
    # open-mmlab/mmdetection, max_iou_assigner.py: assign_wrt_overlaps's labels of the positive anchors.
    labels = gt_inds.new_full((gt_inds.shape[0],), -1)
    pos_inds = torch.nonzero(gt_inds > 0, as_tuple=False).squeeze()
    if pos_inds.numel() > 0:
        labels[pos_inds] = gt_labels[gt_inds[pos_inds] - 1]
    w = scores.new_zeros(scores.shape)
    w[pos_inds] = scores[pos_inds].sigmoid() * 2 + 1
    total = (scores[pos_inds] * 3).sum() + pos_inds.float().mean() * 0
    return labels, w, total


def assign_one(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = torch.where(torch.arange(12) == 5, 2, 0)
    return _assign(gt_inds, gt_labels, scores)


def assign_many(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = (a * 3).long().clamp(0, 3)
    return _assign(gt_inds, gt_labels, scores)


def assign_none(a: f32[12], gt_labels: i64[3], scores: f32[12, 4]):
    gt_inds = (a * 0).long()
    return _assign(gt_inds, gt_labels, scores)


def squeezed_where(x: f32[6, 5], s: f32[6]) -> f32[6, 5]:
    rows = torch.where(s > s.max() - 1e-6)[0].unsqueeze(1).squeeze()
    x[rows] = x[rows].clamp(min=0.1) - 2.0
    x[rows, 2] += 1
    return x


def max3d_filter(x: f32[1, 4, 3, 6, 6]) -> f32[1, 4, 3, 6, 6]:
    pool = nn.MaxPool3d(kernel_size=(3, 3, 3), padding=(1, 1, 1), stride=1)
    return pool(x)


def max3d_strided(x: f32[2, 5, 6, 7]):
    return F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), dilation=(1, 1, 2))


def avg3d(x: f32[1, 2, 4, 6, 6]):
    a = F.avg_pool3d(x, 2)
    b = nn.AvgPool3d(3, stride=(1, 2, 2), padding=1)(x)
    c = F.avg_pool3d(x, (2, 2, 3), divisor_override=5)
    return a, b, c


def modules_2d_1d(x: f32[2, 3, 8, 8], y: f32[2, 3, 9]):
    a = nn.MaxPool2d(3, stride=2, padding=1)(x)
    b = nn.AvgPool2d(2)(x)
    c = nn.MaxPool1d(2)(y)
    d = nn.AvgPool1d(3, stride=2, padding=1)(y)
    e = F.max_pool1d(y, 3, stride=1, padding=1, dilation=1)
    return a, b, c, d, e


def defcn_max_filtering(f0: f32[1, 4, 8, 8], f1: f32[1, 4, 4, 4], f2: f32[1, 4, 2, 2]):
    # Megvii-BaseDetection/DeFCN, fcos.py: MaxFiltering over neighbouring levels (tau 2, kernel 3).
    feats = [f0, f1, f2]
    pool = nn.MaxPool3d(kernel_size=(3, 3, 3), padding=(1, 1, 1), stride=1)
    outs = []
    for l, x in enumerate(feats):
        stack = []
        for k in range(max(0, l - 1), min(len(feats), l + 2)):
            f = feats[k]
            stack.append(F.interpolate(f, size=x.shape[2:], mode="nearest") if k != l else f)
        pooled = pool(torch.stack(stack, dim=2))[:, :, min(l, 1)]
        outs.append(pooled + x)
    return tuple(outs)


def int_max3d(x: f32[1, 2, 3, 4, 4]):
    return F.max_pool3d((x * 10).long(), 2, padding=1)


def _focal(inputs, targets, alpha: float = 0.25, gamma: float = 2.0):
    p = torch.sigmoid(inputs)
    ce = F.binary_cross_entropy_with_logits(inputs, targets, reduction="none")
    p_t = p * targets + (1 - p) * (1 - targets)
    loss = ce * ((1 - p_t) ** gamma)
    return (alpha * targets + (1 - alpha) * (1 - targets)) * loss


_focal_jit = torch.jit.script(_focal)
_focal_compiled = torch.compile(_focal, dynamic=False)
HiddenState = dict[str, torch.Tensor]
MaybeState = Optional[HiddenState] | None


class _Clip(Function):
    @staticmethod
    def forward(ctx, x, a, b):
        return x.clamp(a, b)

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None, None


_clip = _Clip.apply


def scripted_focal_and_clip(x: f32[4, 6], t: f32[4, 6]):
    state: HiddenState = {"x": x}
    y = _focal_jit(state["x"], (t > 0).float()).sum() + _focal_compiled(x, (t > 0.5).float()).mean()
    return y, _clip(x, -0.5, 0.25)


def reduce_forms(x: f32[3, 4], y: f32[4]):
    total = reduce(lambda acc, p: acc + p.numel(), [x, y], 0)
    prod = functools.reduce(lambda a, b: a * b, x.shape)
    s = reduce(torch.add, [x, x * 2, x * 3])
    m = reduce(lambda a, b: torch.maximum(a, b), x.unbind(0))
    return x * total + prod, s, m


class _GlobalStateSGD(torch.optim.Optimizer):
    # gbaydin/hypergradient-descent, sgd_hd.py: one state for all parameters, kept under the first.
    def __init__(self, params, lr=0.1):
        super().__init__(params, dict(lr=lr))
        self._params = self.param_groups[0]["params"]

    def step(self):
        state = self.state[self._params[0]]
        if len(state) == 0:
            state["steps"] = 0
        state["steps"] += 1
        for p in self._params:
            p.data.add_(p.grad, alpha=-self.param_groups[0]["lr"] / state["steps"])


def global_state_sgd(w: f32[3, 4], b: f32[4], gw: f32[3, 4], gb: f32[4]):
    opt = _GlobalStateSGD([w, b])
    for i in range(3):
        w.grad = gw * (i + 1)
        b.grad = gb
        opt.step()
    return w, b


class _Criterion:
    def __init__(self, weight):
        self.weight = weight
        self.calls = 0

    def loss_labels(self, x, t, scale=1.0):
        self.calls += 1
        return {"labels": ((x - t) ** 2).mean() * self.weight * scale}

    def loss_boxes(self, x, t, scale=1.0):
        self.calls += 1
        return {"boxes": (x - t).abs().sum() * scale}

    def get_loss(self, loss, x, t, **kwargs):
        loss_map = {"labels": self.loss_labels, "boxes": self.loss_boxes}
        assert loss in loss_map, f"do you really want to compute {loss} loss?"
        return loss_map[loss](x, t, **kwargs)


class _Sub(_Criterion):
    def loss_boxes(self, x, t, scale=1.0):
        self.calls += 10
        return {"boxes": (x - t).abs().amax() * scale}


def bound_methods(x: f32[3, 4], t: f32[3, 4]):
    c = _Criterion(2.0)
    s = _Sub(3.0)
    out = {}
    for name in ["labels", "boxes"]:
        out.update(c.get_loss(name, x, t, scale=0.5))
        out.update({k + "_sub": v for k, v in s.get_loss(name, x, t).items()})
    f = s.loss_labels
    return out["labels"], out["boxes"], out["labels_sub"], out["boxes_sub"], f(x, t)["labels"], torch.tensor(c.calls + s.calls)


def tensor_of_range(x: f32[3]):
    a = torch.tensor(range(3))
    b = torch.tensor([range(2), range(1, 5, 2)], dtype=torch.float32)
    c = torch.as_tensor(range(6, 0, -2))
    return x * a, b, c


def torch_range_forms(x: f32[4]):
    a = torch.range(0, 3)
    b = torch.range(0, 1, 0.3)
    c = torch.range(0, 3, dtype=torch.long)
    d = torch.range(5, 1, -2)
    e = torch.range(start=1.5, end=3)
    n = x.shape[0]
    t = torch.range(0, n - 1).long()
    return x * a, b, c, d, e, t


def layout_of(x: f32[2, 3]):
    # IDEA-Research/DINO, dn_components / SetCriterion.loss_labels: a one-hot target made like its logits.
    t = torch.zeros([x.shape[0], x.shape[1] + 1], dtype=x.dtype, layout=x.layout, device=x.device)
    t.scatter_(1, (x[:, :1] > 0).long() * 3, 1)
    return t[:, :-1], torch.ones(2, layout=torch.strided)


class _P:
    @staticmethod
    def w(x):
        return x - 100


class _Q:
    def __init__(self, k):
        self.k = k

    def w(self, x):
        return x * self.k

    @staticmethod
    def s(x):
        return x + 1


def shadowed_class(x: f32[3, 4]):
    _P = _Q(2.0)
    g = _P.w
    return g(x), _P.w(x)


def _call_with(_P, x):
    return _P.w(x)


def shadowed_param(x: f32[3, 4]):
    return _call_with(_Q(3.0), x)


def bound_equality(x: f32[3]):
    a = _Q(2.0)
    f = a.w
    b = _Q(2.0)
    same = float(f == f) + float(a.w == a.w) * 10 + float(a.w == b.w) * 100 + float(a.w != b.w) * 1000
    return x * same


def static_through_instance(x: f32[3]):
    a = _Q(2.0)
    s = a.s
    return s(x), a.s(x)


def torch_range_int(x: f32[4]):
    a = torch.range(-5, -2.5, dtype=torch.long)
    b = torch.range(5, 2.5, -1, dtype=torch.int32)
    c = torch.range(-0.5, 2, dtype=torch.long)
    d = torch.range(0.5, 3, dtype=torch.long)
    return a, b, c, d


def squeezed_aug_write(x: f32[8, 5], s: f32[8]):
    p = torch.nonzero(s > 0, as_tuple=False).squeeze()
    x[p] += 1.5
    x[p] -= x[p] * 0.5
    return x


def _compare_neg(x, m):
    p = torch.nonzero(m, as_tuple=False).squeeze()
    n = (p * 2 > 3).sum() + (p <= 5).long().sum()
    x[p] = (-p).float() + n
    return x


def squeezed_compare_neg(x: f32[8], s: f32[8]):
    return _compare_neg(x, s > 0)


def squeezed_compare_neg_one(x: f32[8]):
    return _compare_neg(x, torch.arange(8) == 3)


def staggered_slices(freqs: f32[16, 1, 4], s: f32[3]):
    # NVIDIA/TransformerEngine, rope.py: _apply_rotary_pos_emb_base's staggered freqs per sequence.
    start_positions = (s.abs() * 5).long()
    return torch.cat([freqs[i : i + 3] for i in start_positions], dim=1)


def staggered_slices_back(freqs: f32[16, 1, 4], s: f32[3]):
    start_positions = (s.abs() * 5).long() + 4
    return torch.stack([freqs[i - 2 : i + 1] for i in start_positions], dim=0) * 2


class Scale:
    def __init__(self, factor):
        self.factor = factor
        self.entered = 0
        self.exited = 0

    def __enter__(self):
        self.entered += 1
        return self.factor

    def __exit__(self, exc_type, exc, tb):
        self.exited += 1
        return False


class Recorder:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append(1.0)
        return self

    def __exit__(self, *args):
        self.log.append(2.0)


def with_user_managers(x: f32[4, 3]) -> tuple[f32[4, 3], f32[5], f32[()]]:
    # `with` on the program's own context managers: `as` binds what `__enter__` returns, several items nest and
    # exit in reverse, and a manager entered in a loop is entered and exited each time.
    s = Scale(2.0)
    with s as k:
        y = x * k
    log = []
    with Recorder(log) as r, Scale(3.0) as k2:
        y = y + k2
        r.log.append(float(len(r.log)))
    for i in range(2):
        with s:
            y = y - 1
    z = torch.tensor(log + [float(s.entered), float(s.exited)])
    return y, z, y.sum()


def index_errors_caught(x: f32[4]) -> f32[4]:
    # `except IndexError` around Python list and tuple indexing, as sgrvinod's SSD tutorial (model.py,
    # create_prior_boxes) takes the next feature map's scale, or 1 past the last one.
    scales = [0.1, 0.2, 0.375]
    out = x
    for k in range(3):
        try:
            extra = (scales[k] * scales[k + 1]) ** 0.5
        except IndexError:
            extra = 1.0
        out = out + extra
    try:
        scales[5] = 2.0
    except IndexError:
        out = out * 2.0
    try:
        t = (1, 2)[2]
    except LookupError:
        out = out - 1.0
    return out


class _Shifted(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        nn.init.constant(self.lin.weight, 0.25)
        nn.init.constant(self.lin.bias, -0.5)
        self.register_buffer("shift", torch.full((2,), 0.125))
        self.scale = torch.tensor([2.0, 3.0])

    def forward(self, x):
        return self.lin(x) * self.scale.to(x.dtype) + self.shift


def module_dtype_conversions(x: f64[4, 3]) -> tuple[f64[4, 2], f32[2], f32[4, 2], f32[1]]:
    # `model.double()` (pytorch/examples' time_sequence_prediction) converts the floating parameters and buffers of
    # the module and its children, parameters staying parameters; a plain tensor attribute keeps its dtype. The
    # deprecated `nn.init.constant` is `constant_`. `.float()` converts back.
    m = _Shifted().double()
    y = m(x)
    count = torch.tensor([float(len(list(m.parameters())))])
    z = m.float()(x.float())
    return y, m.scale, z, count


def legacy_tensor_types_as_values(x: f32[2, 3]) -> tuple[f32[2, 3], u8[2, 3]]:
    # PyTorch-YOLOv3's build_targets (eriklindernoren): the legacy tensor types picked by device, then called.
    ByteTensor = torch.cuda.ByteTensor if x.is_cuda else torch.ByteTensor
    FloatTensor = torch.cuda.FloatTensor if x.is_cuda else torch.FloatTensor
    mask = ByteTensor(2, 3).fill_(0)
    mask[0, 1] = 1
    t = FloatTensor(2, 3).fill_(0.5)
    return t * x, mask


def nan_to_num_into_out(g: f32[4, 3], w: f32[4, 3]) -> tuple[f32[4, 3], f32[4, 3]]:
    # NVlabs/edm's training loop cleans each gradient in place: `torch.nan_to_num(param.grad, nan=0, posinf=1e5,
    # neginf=-1e5, out=param.grad)`; here over infinities and NaNs made from the inputs.
    grad = g / (w > 0.5).float() - (g * 0.0).masked_fill(w < -0.5, float("nan"))
    torch.nan_to_num(grad, nan=0, posinf=1e5, neginf=-1e5, out=grad)
    out = torch.empty(4, 3)
    r = torch.nan_to_num(grad * w, out=out)
    return grad, out + r


# quark0/darts' genotypes (rnn/genotypes.py) and qfgaohao/pytorch-ssd's configuration: `collections.namedtuple` at
# module level, with its fields as a list or as one string, and a module-level instance holding a range.
Genotype = namedtuple("Genotype", "recurrent concat")
SSDBoxSizes = collections.namedtuple("SSDBoxSizes", ["min", "max"])
Box = namedtuple("Box", "x0, y0, x1, y1")
DARTS_LIKE = Genotype(recurrent=[("sigmoid", 0), ("relu", 1), ("tanh", 1)], concat=range(1, 4))


def named_tuples_at_module_level(x: f32[4]) -> tuple[f32[4], f32[()]]:
    sizes = SSDBoxSizes(0.25, max=2.0)
    lo, hi = sizes
    b = Box(1.0, 2.0, 4.0, 6.0)
    area = (b.x1 - b.x0) * (b[3] - b[1])
    wider = sizes._replace(max=3.0)
    steps = [i for _, i in DARTS_LIKE.recurrent]
    y = x.clamp(lo, wider.max) * area + sum(steps) + sum(DARTS_LIKE.concat)
    same = 1.0 if sizes == (0.25, 2.0) else 0.0
    return y, torch.tensor(float(len(b)) + same + float(hi))


class _Mixture(nn.Module):
    # quark0/darts' DARTSCell keeps one weight per node in an `nn.ParameterList`; PyTorch makes a plain tensor given
    # to one a parameter, keeps a parameter as it is, and lists them under the list's attribute and their index.
    def __init__(self, w0, ws):
        super().__init__()
        self.w0 = nn.Parameter(w0)
        self.ws = nn.ParameterList([nn.Parameter(ws[0])])
        self.ws.append(ws[1] * 2.0)
        self.ws.extend([ws[2], nn.Parameter(ws[3])])

    def forward(self, x):
        h = x @ self.w0
        for i in range(len(self.ws)):
            h = torch.tanh(h @ self.ws[i])
        return h + sum(w.sum() for w in self.ws)


def parameter_list_steps(x: f32[3, 4], w0: f32[4, 4], ws: f32[4, 4, 4], g: f32[4, 4]) -> tuple[f32[3, 4], f32[4, 4, 4], f32[()]]:
    m = _Mixture(w0, ws)
    m.eval()
    y = m(x)
    names = [n for n, _ in m.named_parameters()]
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        for p in m.parameters():
            p.grad = g * p.sum()
        opt.step()
    last = torch.stack([w.detach() for w in m.ws])
    return m(x) + y, last, torch.tensor(float(len(names) + 10 * names.index("ws.3")))


@dataclass
class _Args:
    # karpathy/llama2.c's ModelArgs: `field(default_factory=dict)` gives each instance its own dict.
    dim: int = 4
    scale: float = field(default=0.5)
    extra: dict = field(default_factory=dict)
    order: list = field(default_factory=lambda: [2, 0, 1])


class _Shapes:
    # epfml/powersgd's `_matrices_per_shape(cls, tensors)`: a class method that never names its class.
    @classmethod
    def per_shape(cls, tensors):
        out = {}
        for t in tensors:
            out.setdefault(t.shape.numel(), []).append(t)
        return out


def _unpack(x, temperature):
    # huggingface/torchMoji and openai/whisper import classes used only on paths these inputs never take.
    if isinstance(x, PackedSequence):
        x = PackedSequence(x, None).data
    if temperature == 0:
        return x.argmax(dim=-1)
    return Categorical(logits=x / temperature).sample()


def python_from_round_36(x: f32[3, 4], y: f32[2, 6]) -> tuple[f32[3, 4], i64[3], i64[4], f32[()]]:
    a, b = _Args(), _Args(dim=3)
    a.extra["k"] = 2.0
    a.order.append(5)
    groups = _Shapes.per_shape([x, y, x[0]])
    n = len(groups[12]) * 10 + len(groups[4]) + len(b.extra) + len(b.order)
    idx = torch.LongTensor(range(4))[torch.tensor(a.order[:3])]
    picked = _unpack(x, 0)
    # loudinthecloud/pytorch-ntm builds its heads with `heads += [read, write]` on an nn.ModuleList.
    heads = nn.ModuleList([])
    alias = heads
    for _ in range(2):
        heads += [nn.Linear(4, 4), nn.ReLU()]
    for h in alias:
        if isinstance(h, nn.Linear):
            h.weight.data.fill_(0.25)
            h.bias.data.zero_()
        x = h(x)
    n = n + 100 * len(alias)
    return x * a.scale * a.extra["k"] + b.dim, picked, torch.LongTensor(range(4)) + idx.sum(), torch.tensor(float(n))


def rmsprop_variants(w: f32[4, 3], b: f32[3], g: f32[3, 4, 3], gb: f32[3, 3]) -> tuple[f32[4, 3], f32[3], f32[4, 3], f32[3]]:
    # torch.optim.RMSprop (dgriff777/rl_a3c_pytorch subclasses it): plain, and centered with momentum, weight decay
    # and maximize, three steps each.
    w2, b2 = w.clone(), b.clone()
    plain = torch.optim.RMSprop([w, b], lr=0.01)
    full = torch.optim.RMSprop([w2, b2], lr=0.02, alpha=0.9, eps=1e-6, weight_decay=0.1, momentum=0.8, centered=True, maximize=True)
    for k in range(3):
        for p, q, d in ((w, w2, g[k]), (b, b2, gb[k])):
            p.grad = d
            q.grad = d * 2.0
        plain.step()
        full.step()
    # ikostrikov/pytorch-a3c's SharedAdam makes its state as `p.data.new().resize_as_(p.data).zero_()`.
    z = b.data.new().resize_as_(w.data).fill_(0.5)
    return w, b, w2 + z, b2


class _Enc(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 3)


def drawn_weights_copied_then_loaded(x: f32[2, 4], w: f32[3, 4], b: f32[3]) -> tuple[f32[2, 3], f32[2, 3], f32[()]]:
    # facebookresearch/moco initializes its key encoder from the query encoder's drawn weights (`param_k.data.copy_(
    # param_q.data)`) and pytorch/examples' time_sequence_prediction casts drawn weights (`seq.double()`): copies of
    # drawn elements stay drawn, and are loaded before anything reads them.
    q, k = _Enc(), _Enc()
    for pq, pk in zip(q.parameters(), k.parameters()):
        pk.data.copy_(pq.data)
        pk.requires_grad = False
    q64 = _Enc().double()
    q.fc.weight.data.copy_(w)
    q.fc.bias.data.copy_(b)
    k.fc.load_state_dict(q.fc.state_dict())
    q64.fc.weight.data.copy_(w.double() * 2.0)
    q64.fc.bias.data.fill_(0.5)
    same = (1.0 if k is q else 0.0) + (2.0 if k.fc is k.fc else 0.0) + (4.0 if [1] is [1] else 0.0)
    return q.fc(x), k.fc(x) + q64.fc(x.double()).float(), torch.tensor(same)
