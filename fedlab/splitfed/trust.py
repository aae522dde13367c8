"""ELSA's divergences and trust (paper 002 §3.2.1: Eq. 4–5 and step 4's trust, SPEC §3.1 and §3.4), in the log
domain.

  R(n, n') = KL(n‖n') + KL(n'‖n)          closed form between the clients' Gaussian fingerprints
  R̂ = R / D                               the declared per-dimension temperature (scale="raw": R itself;
                                          scale="median": R / median_{n≠n'} R, our scale-free option)
  log w_n = −mean_j 1/‖T_n^j‖ − mean_{n'≠n} R̂(n, n')        trust (step 4, unnumbered), kept as a logarithm

A client whose embeddings drift away from everyone else's (e.g. one trained on flipped labels) has a large
mean divergence and so a low trust. `relative_trust` divides by the largest trust (w_n / max w ∈ (0, 1])."""
from __future__ import annotations

import torch

from fedlab.clustering import gaussian_fingerprint, symmetric_kl


def divergence_matrix(embeddings: list[torch.Tensor], scale: str = "per_dim",
                      shrinkage: float | None = None) -> torch.Tensor:
    """[N, N] R̂ between the fingerprints of each client's probe embeddings T_n [Q, D] (0 on the diagonal)."""
    if scale not in ("per_dim", "raw", "median"):
        raise ValueError(f"divergence scale: {scale!r} is not allowed; allowed: median, per_dim, raw")
    prints = [gaussian_fingerprint(t.double(), shrinkage) for t in embeddings]
    n, d = len(prints), embeddings[0].shape[-1]
    out = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(i + 1, n):
            r = symmetric_kl(*prints[i], *prints[j])
            out[i, j] = out[j, i] = r / d if scale == "per_dim" else r
    if scale == "median" and n > 1:     # a typical pair at 1, whatever the embeddings' spread
        off = out[~torch.eye(n, dtype=torch.bool)]
        out = out / off.median().clamp_min(1e-12)
    return out


def log_trust(embeddings: list[torch.Tensor], divergence: torch.Tensor, confidence: str = "inverse_norm") -> torch.Tensor:
    """[N] log w_n = −c_n − mean_{n'≠n} R̂(n, n') (module docstring), with the confidence term
    c_n = mean_j 1/‖T_n^j‖ (the paper's) or, for fingerprints of log-probabilities (confidence="entropy"),
    c_n = mean_j H(p_n(· | probe j)) = −mean_j Σ_y p log p, the mean prediction entropy in nats."""
    n = len(embeddings)
    if confidence == "entropy":
        conf = torch.stack([-(t.double().exp() * t.double()).sum(-1).mean() for t in embeddings])
    elif confidence == "inverse_norm":
        conf = torch.stack([(1.0 / t.double().norm(dim=-1).clamp_min(1e-12)).mean() for t in embeddings])
    else:
        raise ValueError(f"trust confidence: {confidence!r} is not allowed; allowed: entropy, inverse_norm")
    others = divergence.sum(1) / max(n - 1, 1)
    return -conf - others


def relative_trust(log_w: torch.Tensor) -> torch.Tensor:
    """w_n / max_m w_m, computed from logarithms (no underflow)."""
    return torch.exp(log_w - log_w.max())
