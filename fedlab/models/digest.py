"""What identifies a model's weights: the sha256 of its state dict (a leaf module: the zoo and the derived
models both use it)."""
from __future__ import annotations

import hashlib

import torch


def weights_sha256(state: dict) -> str:
    """sha256 over a state dict's tensors (names, dtypes, shapes and bytes, in name order)."""
    h = hashlib.sha256()
    for k in sorted(state):
        t = state[k].detach().cpu().contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
