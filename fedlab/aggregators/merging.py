"""FedProxy's server analysis and merging kernels: conflict scores, heterogeneity, consensus weights, H-TIES
and TIES (fedlab/methods/fedproxy/README.md (FP-3) – (FP-16); "README" below is that page). Pure, vectorised
over P, inputs never modified."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab import compiled
from fedlab.aggregators import fused, vectorised
from fedlab.aggregators.basic import _keeps, _trim_block, pairwise_cosine, trimmed_blocks

_BLOCK = 1 << 15   # columns per block of conflict_scores


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
    # hot instead of streaming a [K, P] sign matrix through memory (on a GPU: blocks of _trim_block columns,
    # a few launches instead of thousands)
    step = _BLOCK if not vectorised.wanted(tau) else _trim_block(tau)
    for start in range(0, p, step):
        blk = torch.sign(tau[:, start:start + step]).to(dtype).sum(dim=0)
        out[start:start + step] = 1.0 - blk.abs_() / k
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
    `denominator="all"` (an ablation, README (FP-12)) divides the winning sign's mass by Σ_k w_k over every
    client instead of the agreeing ones. With diagnostics=True returns (Δ, `server_analysis(τ)`) so a caller
    need not recompute S, h, w, r."""
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
    eager = lambda: _h_ties_blocks(tau, info, w, rho, eps, denominator)
    if fused.wanted(tau):   # the trimming and merge passes as one compiled loop (fused.py)
        out = compiled.run_or_fall_back(
            "h_ties", lambda: fused.h_ties_merge(tau, _keeps(tau, info["retention"]), w, rho, eps,
                                                 float(w.sum()) if denominator == "all" else None), eager)
    else:
        out = eager()
    return (out, info) if diagnostics else out


def _h_ties_blocks(tau: Tensor, info: dict, w: Tensor, rho: float, eps: float, denominator: str) -> Tensor:
    """h_ties' eager block loop (the reference the fused path is checked against)."""
    k, p = tau.shape
    w_col, w_total = w[:, None], float(w.sum())
    out = torch.empty(p, dtype=tau.dtype, device=tau.device)
    # one pass over column blocks of the trimmed updates (`trimmed_blocks`: no [K, P] copy is made), each
    # block finished while it is in cache: τ̂ = w_k · trimmed τ_k; the positive mass P_d (row by row into a
    # reused buffer) and the signed sum give N_d = P_d − Σ_k τ̂_k[d]; the sign-gated means' numerators are the
    # masses themselves and their denominators Σ_k w_k [τ̂_k ≷ 0] come from [K]·[K, B] products with sign(τ̂)
    # and |sign(τ̂)|; then the per-coordinate decision
    block = _trim_block(tau)
    width = min(p, block)
    p_buf, t_buf, scratch = (torch.empty(width, dtype=tau.dtype, device=tau.device) for _ in range(3))
    whole = vectorised.wanted(tau)
    for a, b, that in trimmed_blocks(tau, _keeps(tau, info["retention"]), block):
        n = b - a
        that.mul_(w_col)
        pm = p_buf[:n].zero_()
        if whole:          # one reduction over clients (an accelerator: no per-row launches)
            torch.sum(that.clamp(min=0), dim=0, out=pm)
        else:              # row by row: the CPU's sums, bit for bit as they always were
            for row in that:
                pm.add_(torch.clamp(row, min=0, out=scratch[:n]))
        total = torch.sum(that, dim=0, out=t_buf[:n])
        sgn = that.sign_()
        w_diff = w @ sgn
        w_abs = w @ sgn.abs_()
        nm = (pm - total).clamp(min=0)
        pos_wins = pm / (nm + eps) >= rho
        neg_wins = ~pos_wins & (nm / (pm + eps) >= rho)
        if denominator == "all":       # the same total weight under both signs
            w_pos = w_neg = torch.full_like(pm, w_total)
        else:
            w_pos, w_neg = (w_abs + w_diff) / 2, (w_abs - w_diff) / 2
        one = torch.ones_like(pm)
        torch.where(pos_wins & (w_pos > 0), pm / torch.where(w_pos > 0, w_pos, one),
                    torch.where(neg_wins & (w_neg > 0), -nm / torch.where(w_neg > 0, w_neg, one), torch.zeros_like(pm)),
                    out=out[a:b])
    return out


def ties(tau: Tensor, *, density: float = 0.2, weights: Tensor | None = None) -> Tensor:
    """TIES-merging (fedlab/methods/fedproxy/README.md (FP-16)): trim each client to `density`; elect the sign
    per entry as the sign of Σ_k w_k τ̃_k (0 counts as +); average the agreeing non-zero entries with their
    weights."""
    _check_tau(tau)
    k, p = tau.shape
    if k == 0:
        return tau.new_zeros(p)
    w = (torch.ones(k, dtype=tau.dtype, device=tau.device) if weights is None
         else torch.as_tensor(weights, dtype=tau.dtype, device=tau.device).reshape(-1))
    if w.numel() != k:
        raise ValueError(f"weights has {w.numel()} entries for {k} clients")
    eager = lambda: _ties_blocks(tau, density, w)
    if fused.wanted(tau):   # the trimming and merge passes as one compiled loop (fused.py)
        return compiled.run_or_fall_back("ties", lambda: fused.ties_merge(tau, _keeps(tau, density), w), eager)
    return eager()


def _ties_blocks(tau: Tensor, density: float, w: Tensor) -> Tensor:
    """ties' eager block loop (the reference the fused path is checked against)."""
    k, p = tau.shape
    out = torch.empty(p, dtype=tau.dtype, device=tau.device)
    block = _trim_block(tau)
    width = min(p, block)
    num, den, agree = (torch.empty(width, dtype=tau.dtype, device=tau.device) for _ in range(3))
    weights_list, whole = w.tolist(), vectorised.wanted(tau)
    # one pass over column blocks of the trimmed updates (`trimmed_blocks`, see h_ties): elect the sign of
    # Σ_k w_k τ̃_k (0 → +); per client agree_k = [τ̃_k ≠ 0 and sign(τ̃_k) = elected] = max(sign(τ̃_k)·elected, 0),
    # accumulated into the numerator Σ w_k agree_k τ̃_k and the denominator Σ w_k agree_k
    for a, b, trimmed in trimmed_blocks(tau, _keeps(tau, density), block):
        n = b - a
        elected = torch.where((w @ trimmed) >= 0, 1.0, -1.0).to(tau.dtype)
        nb, db, ab = num[:n].zero_(), den[:n].zero_(), agree[:n]
        if whole:          # all clients at once: agree [K, B], then two [K]·[K, B] products
            agree_all = torch.sign(trimmed).mul_(elected).clamp_(min=0)
            db.copy_(w @ agree_all)
            nb.copy_(w @ agree_all.mul_(trimmed))
        else:              # client by client: the CPU's sums, bit for bit as they always were
            for wk, row in zip(weights_list, trimmed):
                torch.sign(row, out=ab).mul_(elected).clamp_(min=0)
                db.add_(ab, alpha=wk)
                nb.add_(ab.mul_(row), alpha=wk)
        torch.where(db != 0, nb / torch.where(db != 0, db, torch.ones_like(db)), torch.zeros_like(db), out=out[a:b])
    return out
