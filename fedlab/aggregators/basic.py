"""Pure aggregation kernels over stacked client updates tau[K, P] (no Lightning, no Ray, no model)."""
from __future__ import annotations

import math

import torch
from torch import Tensor


def pairwise_cosine(tau: Tensor) -> Tensor:
    """S[k, j] = <τ_k, τ_j> / (‖τ_k‖ ‖τ_j‖); a zero row has similarity 0 with everyone (itself included),
    a non-zero row similarity exactly 1 with itself."""
    if tau.dim() != 2:
        raise ValueError(f"tau must be [K, P], got shape {tuple(tau.shape)}")
    t = tau.float() if not tau.is_floating_point() else tau
    norms = t.norm(dim=1)
    nz = norms > 0
    safe = torch.where(nz, norms, torch.ones_like(norms))
    s = (t @ t.T) / (safe[:, None] * safe[None, :])
    s = s.clamp(-1.0, 1.0)
    both = nz[:, None] & nz[None, :]
    s = torch.where(both, s, torch.zeros_like(s))
    eye = torch.eye(len(t), dtype=torch.bool, device=t.device)
    return torch.where(eye & both, torch.ones_like(s), s)


def fedavg(tau: Tensor, weights: Tensor | None = None) -> Tensor:
    """Σ_k w_k τ_k with w normalised to sum 1 (uniform when None)."""
    if tau.dim() != 2:
        raise ValueError(f"tau must be [K, P], got shape {tuple(tau.shape)}")
    k = tau.shape[0]
    if weights is None:
        w = torch.full((k,), 1.0 / k, dtype=tau.dtype, device=tau.device)
    else:
        w = torch.as_tensor(weights, dtype=tau.dtype, device=tau.device).reshape(-1)
        if w.numel() != k:
            raise ValueError(f"weights has {w.numel()} entries for {k} clients")
        if (w < 0).any() or w.sum() <= 0:
            raise ValueError("weights must be non-negative with a positive sum")
        w = w / w.sum()
    return w @ tau


def _keep_count(keep: float, p: int, eps: float) -> int:
    # ceil(keep·P), forgiving the rounding of keep in its own precision (0.3·10 keeps 3, a float32 1/3
    # of 3 keeps 1): products within 4·P·eps above an integer count as that integer
    x = float(keep) * p
    return min(p, max(0, math.ceil(x - 4 * p * eps)))


def magnitude_trim(tau: Tensor, keep: float | Tensor) -> Tensor:
    """Per row keep the ceil(keep·P) entries of largest |value| (ties at the threshold: lower index first),
    zero the rest. `keep` is one fraction or one per row. Linear-time selection (kthvalue), no full sort."""
    if tau.dim() != 2:
        raise ValueError(f"tau must be [K, P], got shape {tuple(tau.shape)}")
    k_rows, p = tau.shape
    if isinstance(keep, Tensor):
        keeps = keep.reshape(-1).tolist()
        eps = torch.finfo(keep.dtype).eps if keep.is_floating_point() else 0.0
    else:
        keeps, eps = [keep] * k_rows, torch.finfo(torch.float64).eps
    if len(keeps) != k_rows:
        raise ValueError(f"keep has {len(keeps)} entries for {k_rows} rows")
    if p == 0:
        return tau.clone()
    mag = tau.abs()
    counts = [_keep_count(kp, p, eps) for kp in keeps]
    # per-row threshold: the count-th largest magnitude (one kthvalue per row: a loop over K, not over P)
    thr = torch.stack([
        torch.kthvalue(mag[i].float(), p - c + 1).values if 0 < c else mag.new_tensor(float("inf"))
        for i, c in enumerate(counts)]).to(mag.dtype)[:, None] if k_rows else mag[:, :1]
    above = mag > thr
    equal = mag == thr
    need = torch.tensor(counts, device=tau.device) - above.sum(dim=1)
    mask = above | equal
    # rows with more entries at the threshold than places left keep the lowest indices among them (a
    # cumulative count on those rows only: ties are rare, and an int64 cumsum over all K·P entries would
    # cost 8 bytes per entry)
    crowded = (equal.sum(dim=1) > need).nonzero().flatten().tolist()
    for i in crowded:
        mask[i] = above[i] | (equal[i] & (torch.cumsum(equal[i], dim=0, dtype=torch.int32) <= need[i]))
    return torch.where(mask, tau, torch.zeros_like(tau))
