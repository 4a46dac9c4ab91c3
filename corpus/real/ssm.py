"""State-space model reference code: Mamba's selective_scan_ref (mamba_ssm/ops/selective_scan_interface.py), the
sequential loop that the CUDA kernel is checked against."""
from __future__ import annotations

import torch
import torch.nn.functional as F


# Mamba (state-spaces/mamba), mamba_ssm/ops/selective_scan_interface.py: selective_scan_ref (real A, variable B and C
# of shape (B, N, L), no D, with z, delta_bias and delta_softplus, return_last_state)
def mamba_selective_scan_ref(
    u: f32[2, 8, 10], delta: f32[2, 8, 10], A_log: f32[8, 4], B: f32[2, 4, 10], C: f32[2, 4, 10], z: f32[2, 8, 10],
    delta_bias: f32[8]
) -> tuple[f32[2, 8, 10], f32[2, 8, 4]]:
    A = -torch.exp(A_log.float())
    D = None
    delta_softplus = True
    dtype_in = u.dtype
    u = u.float()
    delta = delta.float()
    if delta_bias is not None:
        delta = delta + delta_bias[..., None].float()
    if delta_softplus:
        delta = F.softplus(delta)
    batch, dim, dstate = u.shape[0], A.shape[0], A.shape[1]
    is_variable_B = B.dim() >= 3
    is_variable_C = C.dim() >= 3
    B = B.float()
    C = C.float()
    x = A.new_zeros((batch, dim, dstate))
    ys = []
    deltaA = torch.exp(torch.einsum("bdl,dn->bdln", delta, A))
    deltaB_u = torch.einsum("bdl,bnl,bdl->bdln", delta, B, u)
    last_state = None
    for i in range(u.shape[2]):
        x = deltaA[:, :, i] * x + deltaB_u[:, :, i]
        y = torch.einsum("bdn,bn->bd", x, C[:, :, i])
        if i == u.shape[2] - 1:
            last_state = x
        if y.is_complex():
            y = y.real * 2
        ys.append(y)
    y = torch.stack(ys, dim=2)
    out = y
    out = out * F.silu(z)
    out = out.to(dtype=dtype_in)
    return out, last_state
