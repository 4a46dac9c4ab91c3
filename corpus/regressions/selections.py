"""Regressions of issue #14: index lists of data-dependent length (`torch.where(condition)`, `nonzero(as_tuple=True)`)
used for gathers, row-wise ops and `index_add_`, as the mixture-of-experts blocks of Mixtral, Qwen2-MoE and DBRX use
them. The functional and optimized engines compute at every position of the condition and keep what it selects."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def experts_by_gate(x: f32[6, 4], w: f32[3, 5, 4], gate: f32[6, 3]) -> f32[6, 5]:
    # Per expert: the rows whose gate is positive, a matmul, a softmax over the expert's outputs, the gate as weight,
    # added back twice over (alpha) with index_add_.
    out = torch.zeros(6, 5)
    for e in range(3):
        (rows,) = torch.where(gate[:, e] > 0)
        h = F.relu(x[rows] @ w[e].t())
        h = h.softmax(dim=-1) * gate[rows, e, None]
        out.index_add_(0, rows, h, alpha=2.0)
    return out


def pairs_of_a_matrix(x: f32[4, 5]) -> tuple[f32[4], f32[5], i64[4], f32[4]]:
    # A condition that is not bool, pairs gathered by two lists, nonzero(as_tuple=True), integer sums, and a
    # reduction over the rows' own dim.
    i, j = torch.where((x > 0.2).int())
    rowsum = torch.zeros(4).index_add(0, i, x[i, j] * 3)
    r, k = (x < -0.5).nonzero(as_tuple=True)
    colsum = torch.zeros(5)
    colsum.index_add_(0, k, x[r, k].abs())
    cols = torch.zeros(4, dtype=torch.long).index_add_(0, i, j)
    rows_max = torch.zeros(4).index_add_(0, i, x[i].amax(dim=1) - x[i, j])
    return rowsum, colsum, cols, rows_max


def skip_unused_experts(x: f32[5, 3], choice: i64[5]) -> tuple[f32[5, 3], i64[4]]:
    # DBRX: an expert no token chose is skipped by a run-time test of its list's length.
    out = torch.zeros_like(x)
    sizes = torch.zeros(4, dtype=torch.long)
    expert = choice.abs() % 4
    for e in range(4):
        (tok,) = torch.where(expert == e)
        n = tok.shape[0]
        sizes[e] = n
        if tok.shape[0] == 0:
            continue
        out.index_add_(0, tok, torch.tanh(x[tok]).to(torch.float32) * (e + 1))
    return out, sizes


def top2_one_hot_loop(h: f32[2, 3, 4], gate: f32[3, 4], w: f32[3, 4, 4]) -> f32[2, 3, 4]:
    # Mixtral's routing: top-2 of 3 experts, a one-hot mask permuted to [expert, k, token], lists of its
    # coordinates, the rows gathered with a leading None and reshaped, weights gathered by two lists.
    b, s, d = h.shape
    x = h.view(-1, d)
    weights, chosen = torch.topk(F.softmax(F.linear(x, gate), dim=1), 2, dim=-1)
    weights /= weights.sum(dim=-1, keepdim=True)
    out = torch.zeros(b * s, d, dtype=x.dtype)
    mask = F.one_hot(chosen, num_classes=3).permute(2, 1, 0)
    for e in range(3):
        idx, top_x = torch.where(mask[e])
        rows = x[None, top_x].reshape(-1, d)
        y = F.silu(F.linear(rows, w[e])) * weights[top_x, idx, None]
        out.index_add_(0, top_x, y.to(x.dtype))
    return out.reshape(b, s, d)


def negative_zero_untouched(x: f32[4, 2]) -> f32[4, 2]:
    # Rows that no position selects keep their -0.0 (the other positions add -0.0, the identity).
    out = -torch.zeros(4, 2)
    (r,) = torch.where(x[:, 0] > 0.3)
    out.index_add_(0, r, x[r] * 2)
    return out


def writes_through_lists(x: f32[6, 3], i: i64[4]) -> tuple[f32[6, 3], f32[6, 3]]:
    # A number written at a list and a column, an update at negative indices (they wrap), and a write at a list
    # that may repeat an index (each time with the same value).
    (r,) = torch.where(x[:, 0] > 0.0)
    y = x.clone()
    y[r, 1] = -5.0
    y[r - 6, 2] += 1.0
    z = torch.zeros(6, 3)
    (k,) = torch.where(i > 4)
    z[i[k] % 6] = x[i[k] % 6] + 1.0
    return y, z


def clipped_in_place(x: f32[6, 3]) -> f32[6, 3]:
    # Detectron2's clip: a gathered column clamped in place, updated, and written back.
    (r,) = torch.where(x[:, 2] > -0.5)
    lo = x[r, 0] * 4
    lo.clamp_(min=-1.0, max=1.0)
    lo += 0.5
    lo.mul_(x[r, 1])
    x[r, 0] = lo
    x[r, 2] = torch.max(x[r, 2], lo)
    return x


def pairs_stacked(x: f32[4, 6]) -> tuple[f32[6], i64[4]]:
    # The pairs of a 2-d condition stacked into [N, 2] (nonzero's layout), columns taken from it, rows unsqueezed.
    p = torch.stack(torch.where(x > 0.3), dim=1)
    rows, cols = p[:, 0], p[..., 1]
    per_col = torch.zeros(6).index_add_(0, cols, x[rows, cols].unsqueeze(1).squeeze(1))
    hit = torch.full((4,), -1, dtype=torch.long)
    hit[rows] = 1
    return per_col, hit


def index_put_at_lists(x: f32[2, 3, 4]) -> tuple[f32[2, 3, 4], f32[2, 3, 4], f32[3, 3], f32[2, 3, 4]]:
    # index_put_ at the lists of a 3-d condition (values gathered by them), accumulated onto ones, one-element
    # values accumulated at a list (negative indices wrap) over whole rows, and a write at two of three lists.
    idx = torch.where(x > 0.0)
    out = torch.zeros(2, 3, 4)
    out.index_put_(idx, x[idx] * 2)
    acc = torch.ones(2, 3, 4)
    acc.index_put_(idx, x[idx], accumulate=True)
    (r,) = torch.where(x[0, :, 0] > -0.5)
    m = torch.zeros(3, 3)
    m.index_put_((r,), torch.tensor(2.5), accumulate=True)
    m.index_put_((r - 1,), torch.tensor([1.0]), accumulate=True)
    y = x.clone()
    y.index_put_((idx[0], idx[1]), torch.tensor(7.0))
    return out, acc, m, y


def _relu_mlp(x, w1, w2):
    return F.linear(F.relu(F.linear(x, w1)), w2)


def switch_experts_by_mask(h: f32[2, 5, 8], router_w: f32[3, 8], w1: f32[3, 16, 8], w2: f32[3, 8, 16]) -> f32[2, 5, 8]:
    # Hugging Face's SwitchTransformersSparseMLP: each expert's MLP on a boolean-mask selection of tokens, assigned
    # back through the mask. The loop over experts applies `linear` to 3-d activations: the optimizer's loop hoist
    # batches those matmuls over the experts (its batched operand once lined its expert dim up with the
    # activations' batch dim: a term that did not verify).
    probs = F.softmax(F.linear(h, router_w), dim=-1)
    mask = F.one_hot(torch.argmax(probs, dim=-1), num_classes=3)
    out = h.clone()
    for e in range(3):
        tokens = mask[:, :, e].bool()
        out[tokens] = _relu_mlp(h[tokens], w1[e], w2[e]).to(out.dtype)
    return torch.max(probs, dim=-1).values.unsqueeze(-1) * out


def losses_on_lists(
    class_logits: f32[12, 4], box_regression: f32[12, 16], raw_labels: i64[12], regression_targets: f32[12, 4]
) -> tuple[f32[()], f32[()], f32[()], f32[12]]:
    # torchvision's fastrcnn_loss: smooth L1 between the positive proposals' boxes of their class and their targets;
    # cross entropy over the positives (mean over those not ignored, label 3 ignored), and per positive.
    labels = raw_labels % 4
    classification_loss = F.cross_entropy(class_logits, labels)
    pos = torch.where(labels > 0)[0]
    labels_pos = labels[pos]
    N, num_classes = class_logits.shape
    box_regression = box_regression.reshape(N, box_regression.size(-1) // 4, 4)
    box_loss = F.smooth_l1_loss(box_regression[pos, labels_pos], regression_targets[pos], beta=1 / 9, reduction="sum")
    box_loss = box_loss / labels.numel()
    ce = F.cross_entropy(class_logits[pos], labels[pos], ignore_index=3)
    per = torch.zeros(12)
    per[pos] = F.cross_entropy(class_logits[pos], labels[pos], reduction="none")
    return classification_loss, box_loss, ce, per


def where_and_signs(x: f32[6, 3], b: f32[3]) -> tuple[f32[6, 3], bool[6, 3]]:
    # torch.where between selections, tensors of the rows' shape and numbers; unary minus, plus and ~ of selections.
    (r,) = torch.where(x[:, 0] > -0.2)
    s = x[r]
    t = torch.where(s > 0.1, s * 2, -s)
    u = torch.where(x[r] < 0.0, b, 0.5)
    v = torch.where(x[r] > 0.5, x[r], x[0])
    out = torch.zeros(6, 3)
    out.index_add_(0, r, t + u + v + (-s) + (+s))
    m = x[:, 0] > -0.2
    flags = torch.zeros(6, 3, dtype=torch.bool)
    flags[m] = ~(x[m] > 0.0)
    return out, flags


def nonzero_rows(x: f32[8, 4], raw: i64[8]) -> tuple[f32[4], f32[8], f32[8, 4]]:
    # mmdetection's positive and negative indices, `nonzero().squeeze(1)` and `nonzero(as_tuple=False).view(-1)`,
    # and the pairs of a 2-d condition as the columns of `nonzero()`.
    labels = raw % 3
    pos_inds = (labels > 0).nonzero().squeeze(1)
    neg_inds = torch.nonzero(labels == 0, as_tuple=False).view(-1)
    a = torch.zeros(4).index_add_(0, labels[pos_inds], x[pos_inds, 0])
    b = torch.zeros(8)
    b[neg_inds] = 1.0
    pairs = (x > 0.5).nonzero()
    c = torch.zeros(8, 4)
    c[pairs[:, 0], pairs[:, 1]] = 2.0
    return a, b, c
