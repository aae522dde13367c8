"""ELSA's divergences and trust (paper 002 §3.2.1: Eq. 4–5 and step 4's trust), in the log domain.

  R(n, n') = KL(n‖n') + KL(n'‖n)          closed form between the clients' Gaussian fingerprints
  R̂ = R / D                               the declared per-dimension temperature (scale="raw": R itself;
                                          scale="median": R / median_{n≠n'} R, our scale-free option)
  log w_n = −mean_j 1/‖T_n^j‖ − mean_{n'≠n} R̂(n, n')        trust (step 4, unnumbered), kept as a logarithm

A client whose embeddings drift away from everyone else's (e.g. one trained on flipped labels) has a large
mean divergence and so a low trust. `relative_trust` divides by the largest trust (w_n / max w ∈ (0, 1]).

For fingerprints of predictions on shared probes (`fingerprint: predictions`), `paired_divergence_matrix`
compares two clients probe by probe instead of through Gaussians fitted to each client's predictions:

  R(n, n') = mean_j Σ_y (p_n(y|j) − p_n'(y|j)) (log p_n(y|j) − log p_n'(y|j))      (mean_j symmetric KL)

A Gaussian fingerprint keeps only the mean and covariance of a client's predictions over the probes, so two
clients that give the same answers to *different* probes look alike to it; the paired form does not."""
from __future__ import annotations

import torch

from fedlab.clustering import gaussian_fingerprint, symmetric_kl


def divergence_matrix(embeddings: list[torch.Tensor], scale: str = "per_dim",
                      shrinkage: float | None = None) -> torch.Tensor:
    """[N, N] R̂ between the fingerprints of each client's probe embeddings T_n [Q, D] (0 on the diagonal)."""
    _check_scale(scale)
    prints = [gaussian_fingerprint(t.double(), shrinkage) for t in embeddings]
    n = len(prints)
    out = torch.zeros(n, n, dtype=torch.float64)
    for i in range(n):
        for j in range(i + 1, n):
            out[i, j] = out[j, i] = symmetric_kl(*prints[i], *prints[j])
    return _scaled(out, scale, embeddings[0].shape[-1])


def paired_divergence_matrix(log_probs: list[torch.Tensor], scale: str = "median") -> torch.Tensor:
    """[N, N] R̂ between the clients' log-probabilities log p_n(y | probe j) [Q, C] on the same Q probes (module
    docstring): R(n, n') = mean_j Σ_y (p_n − p_n')(log p_n − log p_n'), then scaled as `divergence_matrix`
    does (per_dim: R / C). 0 on the diagonal. The log-probabilities must be finite (every p > 0, as a softmax
    of finite logits gives): a class one client rules out (log p = −inf) makes the symmetric KL infinite."""
    _check_scale(scale)
    shapes = {tuple(t.shape) for t in log_probs}
    if len(shapes) != 1:
        raise ValueError(f"paired divergence: the clients' predictions must cover the same probes; shapes {sorted(shapes)}")
    logp = torch.stack([t.double() for t in log_probs])                       # [N, Q, C]
    if not torch.isfinite(logp).all():
        raise ValueError("paired divergence: the log-probabilities must be finite (a probability of 0 makes the "
                         "symmetric KL infinite)")
    p = logp.exp()
    out = ((p[:, None] - p[None]) * (logp[:, None] - logp[None])).sum(-1).mean(-1)
    return _scaled(out, scale, logp.shape[-1])


def _check_scale(scale: str) -> None:
    if scale not in ("per_dim", "raw", "median"):
        raise ValueError(f"divergence scale: {scale!r} is not allowed; allowed: median, per_dim, raw")


def _scaled(r: torch.Tensor, scale: str, d: int) -> torch.Tensor:
    """R/D (per_dim), R (raw) or R / median_{n≠n'} R (median: a typical pair at 1, whatever the spread)."""
    n = r.shape[0]
    if scale == "per_dim":
        return r / d
    if scale == "median" and n > 1:
        off = r[~torch.eye(n, dtype=torch.bool)]
        return r / off.median().clamp_min(1e-12)
    return r


def log_trust(embeddings: list[torch.Tensor], divergence: torch.Tensor, confidence: str = "inverse_norm") -> torch.Tensor:
    """[N] log w_n = −c_n − mean_{n'≠n} R̂(n, n') (module docstring; the two terms: `trust_terms`)."""
    conf, others = trust_terms(embeddings, divergence, confidence)
    return -conf - others


def trust_terms(embeddings: list[torch.Tensor], divergence: torch.Tensor,
                confidence: str = "inverse_norm") -> tuple[torch.Tensor, torch.Tensor]:
    """([N] c_n, [N] mean_{n'≠n} R̂(n, n')): the two terms log w_n subtracts. The confidence term is
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
    return conf, others


def relative_trust(log_w: torch.Tensor) -> torch.Tensor:
    """w_n / max_m w_m, computed from logarithms (no underflow)."""
    return torch.exp(log_w - log_w.max())
