"""FedProxy's server analysis and merging kernels (SPEC.md §1.2, §1.4, §1.6): conflict scores,
heterogeneity, consensus weights, H-TIES and TIES. Pure, vectorised over P, inputs never modified."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab.aggregators.basic import magnitude_trim, pairwise_cosine

_BLOCK = 1 << 15   # columns per block for the cache-blocked kernels and the blocked element-wise steps


def _check_tau(tau: Tensor) -> None:
    if tau.dim() != 2:
        raise ValueError(f"tau must be [K, P], got shape {tuple(tau.shape)}")


def conflict_scores(tau: Tensor) -> Tensor:
    """FedProxy Eq. 7: C_d = 1 − |Σ_k sign(τ_k[d])| / K, with sign(0) = 0."""
    _check_tau(tau)
    k = tau.shape[0]
    if k == 0:
        return tau.new_zeros(tau.shape[1])
    dtype = tau.dtype if tau.is_floating_point() else torch.float32
    p = tau.shape[1]
    out = torch.empty(p, dtype=dtype, device=tau.device)
    # column blocks small enough to stay in cache: sign, sum over clients and |·| happen while the block is
    # hot instead of streaming a [K, P] sign matrix through memory
    for start in range(0, p, _BLOCK):
        blk = torch.sign(tau[:, start:start + _BLOCK]).to(dtype).sum(dim=0)
        out[start:start + _BLOCK] = 1.0 - blk.abs_() / k
    return out


def heterogeneity(sim: Tensor) -> tuple[Tensor, Tensor]:
    """FedProxy Eq. 5: h_k = 1 − (1/(K−1)) Σ_{j≠k} max(0, S_kj), and its min-max normalisation over clients
    (0 where max == min). K = 1 gives h = 0 (no division by K − 1 = 0)."""
    k = sim.shape[0]
    if sim.shape != (k, k):
        raise ValueError(f"sim must be [K, K], got shape {tuple(sim.shape)}")
    if k <= 1:
        z = sim.new_zeros(k)
        return z, z.clone()
    off = ~torch.eye(k, dtype=torch.bool, device=sim.device)
    h = 1.0 - (sim.clamp(min=0) * off).sum(dim=1) / (k - 1)
    lo, hi = h.min(), h.max()
    span = hi - lo
    h_norm = torch.where(span > 0, (h - lo) / torch.where(span > 0, span, torch.ones_like(span)),
                         torch.zeros_like(h))
    return h, h_norm


def consensus_weights(sim: Tensor) -> Tensor:
    """FedProxy Eq. 6: w_k = softmax_k(Σ_{j≠k} |S_kj|)."""
    k = sim.shape[0]
    if sim.shape != (k, k):
        raise ValueError(f"sim must be [K, K], got shape {tuple(sim.shape)}")
    off = ~torch.eye(k, dtype=torch.bool, device=sim.device)
    return torch.softmax((sim.abs() * off).sum(dim=1), dim=0)


def server_analysis(tau: Tensor, *, r0: float = 1.0, delta: float = 0.2) -> dict[str, Tensor]:
    """FedProxy Eqs. 5, 6, 10 on the raw updates: S = pairwise_cosine(τ), (h, h_norm) = heterogeneity(S),
    w = consensus_weights(S), retention r_k = clip(r0 − δ·h_norm_k, 0, 1)."""
    sim = pairwise_cosine(tau)
    h, h_norm = heterogeneity(sim)
    return {"sim": sim, "h": h, "h_norm": h_norm, "w": consensus_weights(sim),
            "retention": (r0 - delta * h_norm).clamp(0.0, 1.0)}


def h_ties(tau: Tensor, *, r0: float = 1.0, delta: float = 0.2, rho: float = 1.1, eps: float = 1e-8,
           diagnostics: bool = False, denominator: str = "agreeing"):
    """FedProxy Eqs. 5, 6, 10–13 — the global delta Δφ:
    r_k = clip(r0 − δ·h_norm_k, 0, 1); τ̃_k = magnitude_trim(τ_k, r_k); τ̂_k = w_k τ̃_k;
    P_d = Σ_{τ̂>0} |τ̂_k[d]|, N_d = Σ_{τ̂<0} |τ̂_k[d]|;
    Δ[d] = Σ_{τ̂>0} τ̂_k[d] / Σ_{τ̂>0} w_k if P_d/(N_d+ε) ≥ ρ, elif N_d/(P_d+ε) ≥ ρ the same over τ̂ < 0, else 0.
    `denominator="all"` (SPEC §1.4's ablation) divides the winning sign's mass by Σ_k w_k over every client
    instead of the agreeing ones. With diagnostics=True returns (Δ, `server_analysis(τ)`) so a caller need
    not recompute S, h, w, r."""
    _check_tau(tau)
    if rho < 1:
        raise ValueError(f"rho: {rho!r} is not allowed; expected a number >= 1 (sign-dominance ratio)")
    if denominator not in ("agreeing", "all"):
        raise ValueError(f"denominator: {denominator!r} is not allowed; allowed: agreeing, all")
    k, p = tau.shape
    if k == 0:
        return (tau.new_zeros(p), server_analysis(tau, r0=r0, delta=delta)) if diagnostics else tau.new_zeros(p)
    info = server_analysis(tau, r0=r0, delta=delta)
    w = info["w"].to(tau.dtype)
    r = info["retention"]
    # τ̂ = w_k · trimmed τ_k; per coordinate the positive mass P_d and the signed sum give
    # N_d = P_d − Σ_k τ̂_k[d]; the sign-gated means' numerators are the masses themselves and their
    # denominators Σ_k w_k [τ̂_k ≷ 0] come from two [K]·[K, P] products with sign(τ̂) and |sign(τ̂)|
    that = magnitude_trim(tau, r).mul_(w[:, None])
    # Σ_k max(τ̂_k, 0) row by row into one reused [P] buffer (a clamped [K, P] copy would be a fresh buffer)
    p_mass = torch.zeros(p, dtype=tau.dtype, device=tau.device)
    scratch = torch.empty_like(p_mass)
    for row in that:
        p_mass.add_(torch.clamp(row, min=0, out=scratch))
    total = torch.sum(that, dim=0, out=scratch)
    sgn = that.sign_()
    w_diff = w @ sgn
    w_abs = w @ sgn.abs_()
    w_total = float(w.sum())
    out = torch.empty_like(p_mass)
    # the per-coordinate decision, one column block at a time: a dozen element-wise steps on [P] vectors would
    # each allocate a fresh [P] buffer (page faults cost more than the arithmetic); on a block they reuse memory
    for a in range(0, p, _BLOCK):
        b = a + _BLOCK
        pm = p_mass[a:b]
        nm = (pm - total[a:b]).clamp(min=0)
        pos_wins = pm / (nm + eps) >= rho
        neg_wins = ~pos_wins & (nm / (pm + eps) >= rho)
        if denominator == "all":       # the same total weight under both signs
            w_pos = w_neg = torch.full_like(pm, w_total)
        else:
            w_pos, w_neg = (w_abs[a:b] + w_diff[a:b]) / 2, (w_abs[a:b] - w_diff[a:b]) / 2
        one = torch.ones_like(pm)
        torch.where(pos_wins & (w_pos > 0), pm / torch.where(w_pos > 0, w_pos, one),
                    torch.where(neg_wins & (w_neg > 0), -nm / torch.where(w_neg > 0, w_neg, one), torch.zeros_like(pm)),
                    out=out[a:b])
    return (out, info) if diagnostics else out


def ties(tau: Tensor, *, density: float = 0.2, weights: Tensor | None = None) -> Tensor:
    """TIES-merging (SPEC.md §1.6): trim each client to `density`; elect the sign per entry as the sign of
    Σ_k w_k τ̃_k (0 counts as +); average the agreeing non-zero entries with their weights."""
    _check_tau(tau)
    k, p = tau.shape
    if k == 0:
        return tau.new_zeros(p)
    w = (torch.ones(k, dtype=tau.dtype, device=tau.device) if weights is None
         else torch.as_tensor(weights, dtype=tau.dtype, device=tau.device).reshape(-1))
    if w.numel() != k:
        raise ValueError(f"weights has {w.numel()} entries for {k} clients")
    trimmed = magnitude_trim(tau, density)
    elected = torch.where((w @ trimmed) >= 0, 1.0, -1.0).to(tau.dtype)   # sign of Σ_k w_k τ̃_k (0 → +)
    # per client: agree_k = [τ̃_k ≠ 0 and sign(τ̃_k) = elected] = max(sign(τ̃_k)·elected, 0), accumulated
    # into the numerator Σ w_k agree_k τ̃_k and denominator Σ w_k agree_k in [P] buffers
    num = torch.zeros_like(elected)
    den = torch.zeros_like(elected)
    agree = torch.empty_like(elected)
    for wk, row in zip(w.tolist(), trimmed):
        torch.sign(row, out=agree).mul_(elected).clamp_(min=0)
        den.add_(agree, alpha=wk)
        num.add_(agree.mul_(row), alpha=wk)
    out = torch.empty_like(num)
    for a in range(0, p, _BLOCK):     # block by block: no fresh [P] buffers (see h_ties)
        d = den[a:a + _BLOCK]
        torch.where(d != 0, num[a:a + _BLOCK] / torch.where(d != 0, d, torch.ones_like(d)), torch.zeros_like(d),
                    out=out[a:a + _BLOCK])
    return out
