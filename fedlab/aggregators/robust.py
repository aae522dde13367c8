"""Byzantine-robust aggregation kernels for untrusted clients, over stacked updates tau[K, P]."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def _check(tau: Tensor) -> None:
    if tau.dim() != 2 or tau.shape[0] < 1:
        raise ValueError(f"tau must be [K, P] with K >= 1, got shape {tuple(tau.shape)}")


def coordinate_median(tau: Tensor) -> Tensor:
    """Coordinate-wise median (Yin et al., 2018): Δ[d] = median_k τ_k[d]; for even K the mean of the two
    middle values."""
    _check(tau)
    k = tau.shape[0]
    s = tau.sort(dim=0).values
    return s[k // 2].clone() if k % 2 else (s[k // 2 - 1] + s[k // 2]) / 2


def trimmed_mean(tau: Tensor, trim: float = 0.1) -> Tensor:
    """Coordinate-wise trimmed mean (Yin et al., 2018): per coordinate drop the b = floor(trim·K) largest and
    b smallest values and average the rest (K − 2b ≥ 1)."""
    _check(tau)
    if not 0 <= trim < 0.5:
        raise ValueError(f"trim must be in [0, 0.5), got {trim}")
    k = tau.shape[0]
    b = math.floor(trim * k)
    if k - 2 * b < 1:
        b = (k - 1) // 2
    s = tau.sort(dim=0).values
    return s[b:k - b].mean(dim=0)


def krum(tau: Tensor, f: int = 1, m: int = 1) -> Tensor:
    """(Multi-)Krum (Blanchard et al., 2017): score_k = Σ of the squared distances from τ_k to its K − f − 2
    nearest other updates; the mean of the m updates with the lowest scores (m = 1: Krum). Needs
    K ≥ f + 3 for the guarantee; with fewer clients every other update counts as a neighbour."""
    _check(tau)
    k = tau.shape[0]
    if not 1 <= m <= k:
        raise ValueError(f"m must be in [1, {k}], got {m}")
    t = tau.double()
    d2 = torch.cdist(t, t).pow(2)
    d2.fill_diagonal_(float("inf"))
    n = max(1, min(k - 1, k - f - 2))
    scores = d2.topk(n, dim=1, largest=False).values.sum(1) if k > 1 else torch.zeros(1, dtype=t.dtype, device=t.device)
    chosen = torch.argsort(scores, stable=True)[:m]
    return tau[chosen].mean(dim=0)
