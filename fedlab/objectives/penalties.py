"""Pure penalty kernels (SPEC.md §0), differentiable in `params`."""
from __future__ import annotations

import torch
from torch import Tensor


def proximal_penalty(params: Tensor, anchor: Tensor, mu: float) -> Tensor:
    """FedProx: (μ/2)·‖φ − φ^(t)‖²."""
    return 0.5 * mu * torch.sum((params - anchor.to(params.dtype)) ** 2)
