"""Pure penalty kernels, differentiable in `params`, never modifying their inputs."""
from __future__ import annotations

import torch
from torch import Tensor


def proximal_penalty(params: Tensor, anchor: Tensor, mu: float) -> Tensor:
    """FedProx: (μ/2)·‖φ − φ^(t)‖²."""
    return 0.5 * mu * torch.sum((params - anchor.to(params.dtype)) ** 2)


def pcr_penalty(params: Tensor, anchor: Tensor, conflict: Tensor) -> Tensor:
    """FedProxy Eq. 9: Σ_d C_d (φ[d] − φ^(t)[d])²."""
    diff = params - anchor.to(params.dtype)
    return torch.sum(conflict.to(params.dtype) * diff * diff)
