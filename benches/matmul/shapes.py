"""Every distinct matmul shape of corpus/workloads/*.py, one program each, with its operands laid out as the workload
reads them (a permuted or transposed operand stays a view). `benches/matmul.rs` runs them through our pipeline on the
C backend; `funcfuse compare benches/matmul/shapes.py --measure --torch PYTHON --no-torch-compile` puts PyTorch's
one-thread time beside ours in one sitting (see benches/matmul/README.md)."""
from __future__ import annotations

import torch


def attn_proj(x: f32[1, 12, 1, 64], w: f32[64, 64]) -> f32[1, 12, 1, 64]:
    """attention: x @ wq, x @ wk, x @ wv."""
    return x @ w


def attn_scores(q: f32[1, 12, 1, 64], k: f32[1, 12, 50, 64]) -> f32[1, 12, 1, 50]:
    """attention: q @ k[:, :, : t + 1, :].transpose(-2, -1) at the last step (t + 1 = 50)."""
    return q @ k.transpose(-2, -1)


def attn_values(att: f32[1, 12, 1, 50], v: f32[1, 12, 50, 64]) -> f32[1, 12, 1, 64]:
    """attention: att @ v[:, :, : t + 1, :] at the last step."""
    return att @ v


def gemv_256x1024(x: f32[1, 256], w: f32[256, 1024]) -> f32[1, 1024]:
    """lstm: inp @ w_ih[j], state_h[j] @ w_hh[j]; seq2seq: h @ w_hh."""
    return x @ w


def gemv_256x2048(x: f32[1, 256], w: f32[256, 2048]) -> f32[1, 2048]:
    """nasrnn: x @ w_x, h @ w_h."""
    return x @ w


def gemv_512x1024(x: f32[1, 512], w: f32[512, 1024]) -> f32[1, 1024]:
    """seq2seq: torch.cat([x, ctx], 1) @ w_ih."""
    return x @ w


def gemv_256x256(x: f32[1, 256], w: f32[256, 256]) -> f32[1, 256]:
    """seq2seq: h @ w_attn."""
    return x @ w


def gemv_512x500(x: f32[1, 512], w: f32[512, 500]) -> f32[1, 500]:
    """seq2seq: torch.cat([h, ctx], 1) @ w_out."""
    return x @ w


def matvec_50x256(m: f32[50, 256], v: f32[256]) -> f32[50]:
    """seq2seq: memory @ (h @ w_attn)[0]."""
    return m @ v


def vecmat_50x256(a: f32[50], m: f32[50, 256]) -> f32[256]:
    """seq2seq: attn @ memory."""
    return a @ m


def yolact_masks(proto: f32[1, 32, 80, 80], coeffs: f32[24, 32]) -> f32[80, 80, 24]:
    """yolact: proto[0].permute(1, 2, 0) @ det_coeffs.t()."""
    return proto[0].permute(1, 2, 0) @ coeffs.t()
