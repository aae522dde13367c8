"""ELSA's hierarchical aggregation (paper 002 §3.2).

  edge k:   θ_{g,k} = Σ_{n∈N_k} |D_n| θ_n / Σ_{n∈N_k} |D_n|          after ϱ client–edge rounds
  cloud:    α_k = w̄_k / (1 + R̄_k),  α̃ = α / Σ α,  θ_g = Σ_k α̃_k θ_{g,k}
            w̄_k the group's mean (relative) trust, R̄_k its mean pairwise divergence R̂ (0 for one member)
  stop:     ‖θ_g − θ_{g−1}‖ ≤ ξ, or after G global rounds"""
from __future__ import annotations

import numpy as np
import torch


def weighted_average(states: list[dict], weights) -> dict:
    """Σ_i w_i·state_i / Σ_i w_i, key by key (float32 arithmetic, each tensor back in its dtype)."""
    w = torch.as_tensor(weights, dtype=torch.float32)
    if len(states) != len(w) or not len(states):
        raise ValueError(f"weighted_average: {len(states)} states, {len(w)} weights")
    w = w / w.sum()
    return {k: sum(float(wi) * s[k].float() for wi, s in zip(w, states)).to(states[0][k].dtype) for k in states[0]}


def edge_average(states: list[dict], sizes: list[int]) -> dict:
    """θ_{g,k}: the group's client states weighted by their data sizes |D_n|."""
    return weighted_average(states, sizes)


def cloud_weights(groups: dict[int, list[int]], trust, divergence) -> dict[int, float]:
    """α̃_k per edge (module docstring); `trust` relative per client, `divergence` R̂ [N, N]."""
    trust, div = np.asarray(trust, float), np.asarray(divergence, float)
    alpha = {}
    for k, members in groups.items():
        m = list(members)
        r_bar = float(div[np.ix_(m, m)][np.triu_indices(len(m), 1)].mean()) if len(m) > 1 else 0.0
        alpha[k] = float(trust[m].mean()) / (1.0 + r_bar)
    total = sum(alpha.values())
    return {k: a / total for k, a in alpha.items()}


def state_distance(a: dict, b: dict) -> float:
    """‖θ_a − θ_b‖ over every key (the stopping rule's norm)."""
    return float(torch.sqrt(sum(((a[k].float() - b[k].float()) ** 2).sum() for k in a)))
