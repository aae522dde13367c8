"""LoRA factors of different ranks in one aggregate (Floe).

A client at rank r_i holds A_i ∈ R^{r_i×in} and B_i ∈ R^{out×r_i}; its update is ΔW_i = s·B_i A_i. Zero-padding
A's rows and B's columns to r_max leaves B A unchanged, and a client takes back the first r_i components.
Averaging padded factors would shrink component j by the clients that do not have it, so component j is
averaged only over the clients with r_i > j (0-based), weights renormalised among them:

    Ā[j, :] = Σ_{i : r_i > j} w_i A_i[j, :] / Σ_{i : r_i > j} w_i        (B likewise along its columns)

For ΔW = s·BA to mean the same at every rank the scale s = α/r must not depend on r: Floe sets
α = s·r for each client (fedlab.methods.floe)."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch
from torch import Tensor


def pad_rank(t: Tensor, axis: int, r_max: int) -> Tensor:
    """t zero-padded along `axis` to length r_max (a new tensor; t unchanged)."""
    r = t.shape[axis]
    if r > r_max:
        raise ValueError(f"pad_rank: rank {r} along axis {axis} exceeds r_max {r_max}")
    if r == r_max:
        return t.clone()
    shape = list(t.shape)
    shape[axis] = r_max - r
    return torch.cat([t, t.new_zeros(shape)], dim=axis)


def truncate_rank(t: Tensor, axis: int, r: int) -> Tensor:
    """The first r components of t along `axis` (a copy)."""
    if r > t.shape[axis]:
        raise ValueError(f"truncate_rank: asked for {r} components, the tensor has {t.shape[axis]} along axis {axis}")
    return t.narrow(axis, 0, r).clone()


def hetero_rank_mean(factors: Sequence[Tensor], axis: int, weights: Sequence[float] | Tensor | None = None) -> Tensor:
    """Component-wise weighted mean of LoRA factors whose rank (their size along `axis`) differs; component j
    is averaged over the factors that have it (module docstring). Output rank: the largest."""
    if not factors:
        raise ValueError("hetero_rank_mean: no factors")
    ranks = torch.tensor([f.shape[axis] for f in factors])
    r_max = int(ranks.max())
    w = torch.ones(len(factors), dtype=torch.float64) if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    if w.numel() != len(factors) or bool((w < 0).any()):
        raise ValueError(f"hetero_rank_mean: need {len(factors)} non-negative weights, got {w.tolist()}")
    stacked = torch.stack([pad_rank(f.to(torch.float64), axis, r_max) for f in factors])        # [K, ...]
    has = (torch.arange(r_max)[None, :] < ranks[:, None]).to(torch.float64) * w[:, None]        # [K, r_max]
    denom = has.sum(0)
    coef = has / torch.where(denom > 0, denom, torch.ones_like(denom))                          # [K, r_max]
    view = [len(factors)] + [1] * factors[0].dim()
    view[1 + (axis % factors[0].dim())] = r_max
    out = (stacked * coef.reshape(view)).sum(0)
    return out.to(factors[0].dtype)


def aggregate_lora_states(states: Sequence[Mapping[str, Tensor]], rank_axes: Mapping[str, int],
                          weights: Sequence[float] | None = None,
                          fill: Mapping[str, Tensor] | None = None) -> dict[str, Tensor]:
    """Key by key: `hetero_rank_mean` for the keys in `rank_axes` (a LoRA factor and its rank axis), the
    plain weighted mean for every other key (all states must have the same keys). Pass each state at its
    own rank (unpadded): the rank is read from the factor's size. With `fill` (a state at the full rank), the
    components no state has are taken from it instead of being zero — a zero A and B would never train again."""
    keys = list(states[0])
    for s in states[1:]:
        if list(s) != keys:
            raise ValueError("aggregate_lora_states: states carry different keys")
    w = torch.ones(len(states), dtype=torch.float64) if weights is None else torch.as_tensor(weights, dtype=torch.float64)
    out = {}
    for k in keys:
        if k in rank_axes:
            out[k] = hetero_rank_mean([s[k] for s in states], rank_axes[k], w)
            if fill is not None and out[k].shape[rank_axes[k]] < fill[k].shape[rank_axes[k]]:
                r = out[k].shape[rank_axes[k]]
                rest = fill[k].narrow(rank_axes[k], r, fill[k].shape[rank_axes[k]] - r).to(out[k].dtype)
                out[k] = torch.cat([out[k], rest], dim=rank_axes[k])
        else:
            stack = torch.stack([s[k].to(torch.float64) for s in states])
            out[k] = ((stack * (w / w.sum()).reshape(-1, *[1] * (stack.dim() - 1))).sum(0)).to(states[0][k].dtype)
    return out


def take_rank(state: Mapping[str, Tensor], rank_axes: Mapping[str, int], r: int) -> dict[str, Tensor]:
    """A client's share of an aggregate: the first r components of every LoRA factor, the rest as is."""
    return {k: truncate_rank(v, rank_axes[k], r) if k in rank_axes else v.clone() for k, v in state.items()}
