"""LLM decode-step code some engine refuses: llama's generation loop (a data-dependent break). The model calls in the
generation loop are a tiny stand-in (an embedding and an output projection), the loop around them is the original's."""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F


