"""Gaussian fingerprints of a client's embeddings and their symmetric KL divergence (ELSA Eq. 4–5).

A client embeds Q probe samples, T ∈ R^{Q×D}; its fingerprint is N(μ, Σ) with μ = mean_q T_q and
S = (1/Q) Σ_q (T_q − μ)(T_q − μ)ᵀ. With Q < D, S is singular, so Σ is shrunk (our declared deviation):

    shrinkage=None  Ledoit–Wolf:  Σ = (1 − δ*) S + δ* · (tr S / D) · I, δ* estimated from T
                    (the estimator of scikit-learn's `ledoit_wolf`, here in torch so it runs on the GPU)
    shrinkage=s     Σ = (1 − s) S + s · diag(S)   (fixed shrinkage toward the diagonal)

and a jitter of 1e-6·(tr S / D + 1e-12) keeps Σ positive definite when a dimension is constant — raised
tenfold (a few times at most) when Σ is not positive definite in T's own dtype (float32 with no shrinkage).
Both functions are differentiable in their inputs and never modify them."""
from __future__ import annotations

import torch
from torch import Tensor


def _ledoit_wolf_delta(x: Tensor, cov: Tensor) -> Tensor:
    """δ* = min(1, β̂ / δ̂) with δ̂ = ‖S − m I‖²_F / D and β̂ = (1/Q²) Σ_q ‖x_q x_qᵀ − S‖²_F / D
    (Ledoit & Wolf 2004, as scikit-learn computes it on centred data)."""
    q, d = x.shape
    mu = torch.trace(cov) / d
    delta = ((cov - mu * torch.eye(d, dtype=cov.dtype, device=cov.device)) ** 2).sum() / d
    x2 = x ** 2
    beta_ = ((x2.T @ x2).sum() / q - (cov ** 2).sum()) / (q * d)
    beta = torch.clamp(torch.minimum(beta_, delta), min=0.0)
    return torch.where(delta > 0, beta / torch.clamp(delta, min=torch.finfo(cov.dtype).tiny), torch.zeros_like(delta))


def gaussian_fingerprint(T: Tensor, shrinkage: float | None = None) -> tuple[Tensor, Tensor]:
    """(μ[D], Σ[D, D]) of the embeddings T[Q, D]; Σ symmetric positive definite (see the module docstring)."""
    if T.dim() != 2 or T.shape[0] < 1:
        raise ValueError(f"gaussian_fingerprint: T must be [Q ≥ 1, D], got shape {tuple(T.shape)}")
    if shrinkage is not None and not 0.0 <= float(shrinkage) <= 1.0:
        raise ValueError(f"gaussian_fingerprint: shrinkage must be None (Ledoit–Wolf) or in [0, 1], got {shrinkage}")
    work = T.to(torch.float64)
    q, d = work.shape
    mu = work.mean(dim=0)
    xc = work - mu
    cov = xc.T @ xc / q
    if shrinkage is None:
        delta = _ledoit_wolf_delta(xc, cov)
        target = torch.trace(cov) / d * torch.eye(d, dtype=cov.dtype, device=cov.device)
    else:
        delta = torch.tensor(float(shrinkage), dtype=cov.dtype, device=cov.device)
        target = torch.diag(torch.diagonal(cov))
    sigma = (1 - delta) * cov + delta * target
    sigma = 0.5 * (sigma + sigma.T)
    eye = torch.eye(d, dtype=cov.dtype, device=cov.device)
    jitter = 1e-6 * (torch.trace(cov).detach() / d + 1e-12)
    for _ in range(6):
        out = (sigma + jitter * eye).to(T.dtype)
        if bool(torch.linalg.eigvalsh(out.detach().to(torch.float64) if out.dtype != torch.float64 else out.detach()).min() > 0) \
                and bool(torch.linalg.eigvalsh(out.detach()).min() > 0):
            break
        jitter = jitter * 10
    return mu.to(T.dtype), out


def symmetric_kl(mu1: Tensor, S1: Tensor, mu2: Tensor, S2: Tensor) -> Tensor:
    """R = KL(N1‖N2) + KL(N2‖N1) = ½[tr(Σ₂⁻¹Σ₁) + tr(Σ₁⁻¹Σ₂) − 2D + Δμᵀ(Σ₁⁻¹ + Σ₂⁻¹)Δμ]
    (the log-determinants cancel), with Σ⁻¹ applied through Cholesky solves in float64. A 0-dim tensor in
    mu1's dtype. Divide by D for the per-dimension temperature R/D."""
    d = mu1.shape[-1]
    m1, m2 = mu1.to(torch.float64), mu2.to(torch.float64)
    a, b = S1.to(torch.float64), S2.to(torch.float64)
    la, lb = torch.linalg.cholesky(a), torch.linalg.cholesky(b)
    tr_b_inv_a = torch.cholesky_solve(a, lb).diagonal(dim1=-2, dim2=-1).sum(-1)
    tr_a_inv_b = torch.cholesky_solve(b, la).diagonal(dim1=-2, dim2=-1).sum(-1)
    dm = (m2 - m1).unsqueeze(-1)
    quad = (dm * torch.cholesky_solve(dm, la)).sum((-2, -1)) + (dm * torch.cholesky_solve(dm, lb)).sum((-2, -1))
    # ≥ 0 in exact arithmetic; rounding can leave −1e-9 for identical inputs
    return (0.5 * (tr_b_inv_a + tr_a_inv_b - 2 * d + quad)).clamp_min(0).to(mu1.dtype)
