"""Held-out real code of issue 14's third round that some engine refuses: xLSTM's mLSTM step (`squeeze_` on its
parameters). The round's other seven ports (ultralytics' task-aligned assigner, CenterNet's decoder, xLSTM's sLSTM
step, Hugging Face's sliding-window cache and eta warper, AdamP, MADGRAD) run on every engine and are in corpus/real.
Inputs arrive uniform in [-1, 1)."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


# xLSTM (NX-AI/xlstm), xlstm/blocks/mlstm/backends.py: recurrent_step_stabilized_simple (eps 1e-6), one decode step;
# the new states returned flat, not as a nested tuple (goldens store flat tuples)
def xlstm_mlstm_recurrent_step(
    c_state: f32[2, 4, 8, 8], n_state: f32[2, 4, 8, 1], m_state: f32[2, 4, 1, 1], q: f32[2, 4, 1, 8],
    k: f32[2, 4, 1, 8], v: f32[2, 4, 1, 8], igate_preact: f32[2, 4, 1, 1], fgate_preact: f32[2, 4, 1, 1]
) -> tuple[f32[2, 4, 1, 8], f32[2, 4, 8, 8], f32[2, 4, 8, 1], f32[2, 4, 1, 1]]:
    eps = 1e-6
    B, NH, S, DH = q.shape
    q, k, v = q.squeeze_(2).unsqueeze(-1), k.squeeze_(2).unsqueeze(-1), v.squeeze_(2).unsqueeze(-1)
    log_fg_act = torch.nn.functional.logsigmoid(fgate_preact)
    m_state_new = torch.max(log_fg_act + m_state, igate_preact)
    fg_act = torch.exp(log_fg_act + m_state - m_state_new)
    ig_act = torch.exp(igate_preact - m_state_new)
    k_scaled = k / math.sqrt(DH)
    c_state_new = fg_act * c_state + ig_act * (k_scaled @ v.transpose(-1, -2))
    n_state_new = fg_act * n_state + ig_act * k_scaled
    h_num = q.transpose(-1, -2) @ c_state_new
    qn_dotproduct = q.transpose(-1, -2) @ n_state_new
    max_val = torch.exp(-m_state_new)
    h_denom = torch.maximum(qn_dotproduct.abs(), max_val) + eps
    h = h_num / h_denom
    return h, c_state_new, n_state_new, m_state_new
