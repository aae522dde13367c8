"""The merging kernels as they were before their element-wise steps were blocked, frozen as the
oracle the current kernels must match bit for bit (tests/unit/test_kernels_blocked.py). Not used by fedlab."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab.aggregators.basic import _keeps
from fedlab.aggregators.merging import _check_tau, server_analysis


def _kth_largest(mag: Tensor, counts: list[int], sample: int | None = None) -> tuple[Tensor, list[int]]:
    """Per row i, the counts[i]-th largest value x_i of mag[i] (exact; +inf where the count is 0) and how
    many entries of the row are ≥ x_i (more than counts[i] when values tie at x_i).

    A full selection per row (kthvalue) reads every row several times; instead a shared random sample of
    positions brackets each row's answer between two sampled values lo ≤ x ≤ hi (with a wide margin), one
    pass counts the entries above hi, the few entries in [lo, hi] are gathered, and the exact answer is
    selected among those. A row whose answer falls outside its bracket (rare) falls back to kthvalue."""
    k_rows, p = mag.shape
    sample = sample or int(min(65536, max(8192, p // 64)))
    out = mag.new_full((k_rows,), float("inf"))
    n_ge = [0] * k_rows
    live = []
    for i in range(k_rows):
        if counts[i] >= p:     # keep everything: the threshold is the row's minimum
            out[i], n_ge[i] = mag[i].min(), p
        elif counts[i] > 0:
            live.append(i)
    if not live:
        return out, n_ge

    def exact(i):
        x = torch.kthvalue(mag[i], p - counts[i] + 1).values
        return x, int(torch.count_nonzero(torch.ge(mag[i], x)))

    if p <= 4 * sample:   # small rows: direct selection is cheapest
        for i in live:
            out[i], n_ge[i] = exact(i)
        return out, n_ge
    g = torch.Generator(device="cpu").manual_seed(0)
    pos = torch.randint(p, (sample,), generator=g).to(mag.device)
    srt = mag[:, pos].sort(dim=1, descending=True).values                   # [K, S], largest first
    frac = torch.tensor([c / p for c in counts], dtype=torch.float64)
    margin = 6.0 * torch.sqrt(sample * frac * (1 - frac)) + 64
    hi_idx = (frac * sample - margin).floor().clamp(min=0).long().to(mag.device)
    lo_idx = (frac * sample + margin).ceil().clamp(max=sample - 1).long().to(mag.device)
    rows = torch.arange(k_rows, device=mag.device)
    # an open end where the margin runs past the sample: hi = +inf at the top, lo = −inf at the bottom
    hi = torch.where(hi_idx > 0, srt[rows, hi_idx], torch.full_like(srt[:, 0], float("inf")))
    lo = torch.where(lo_idx < sample - 1, srt[rows, lo_idx], torch.full_like(srt[:, 0], float("-inf")))
    # per row: entries strictly above hi (count_nonzero of a 1-D mask: a bool sum is many times slower) and the
    # entries inside [lo, hi]; row-sized scratch buffers are reused (fresh large buffers cost page faults)
    b1 = torch.empty(p, dtype=torch.bool, device=mag.device)
    b2 = torch.empty_like(b1)
    for i in live:
        row, c = mag[i], counts[i]
        torch.gt(row, hi[i], out=b1)
        n_hi = int(torch.count_nonzero(b1))
        torch.ge(row, lo[i], out=b1)
        torch.le(row, hi[i], out=b2)
        band = row[b1.logical_and_(b2)]
        need = c - n_hi                    # the answer is the need-th largest inside the bracket …
        if 1 <= need <= band.numel():
            x = torch.kthvalue(band, band.numel() - need + 1).values
            out[i], n_ge[i] = x, n_hi + int(torch.ge(band, x).sum())
        else:                              # … unless the sample misjudged the row
            out[i], n_ge[i] = exact(i)
    return out, n_ge


def magnitude_trim(tau: Tensor, keep: float | Tensor) -> Tensor:
    """Per row keep the ceil(keep·P) entries of largest |value| (ties at the threshold: lower index first),
    zero the rest. `keep` is one fraction or one per row. Exact selection without a full sort; one [K, P]
    buffer is allocated (the magnitudes), and each row's result is written over its magnitudes in one pass
    (hardshrink just below the row's threshold)."""
    counts = _keeps(tau, keep)
    k_rows, p = tau.shape
    if p == 0 or k_rows == 0:
        return tau.clone()
    floating = tau.is_floating_point()
    buf = tau.abs()
    mag = buf if floating else buf.float()
    thr, n_ge = _kth_largest(mag, counts)
    crowded = {}
    for i in range(k_rows):
        if n_ge[i] > counts[i]:
            # more entries at the threshold than places left: the lowest indices among them are kept (a
            # cumulative count on this row only — ties are rare)
            above, equal = mag[i] > thr[i], mag[i] == thr[i]
            need = counts[i] - int(above.sum())
            crowded[i] = above | (equal & (torch.cumsum(equal, dim=0, dtype=torch.int32) <= need))
        elif thr[i] <= 0 or not floating:
            crowded[i] = mag[i] >= thr[i]
    for i in range(k_rows):       # the magnitudes of row i are not needed once its result is written
        if i in crowded:
            buf[i] = torch.where(crowded[i], tau[i], torch.zeros_like(tau[i]))
        elif counts[i] == 0:
            buf[i].zero_()
        else:   # |x| ≥ t  ⇔  |x| > the largest float below t
            below = torch.nextafter(thr[i].to(tau.dtype), torch.zeros((), dtype=tau.dtype, device=tau.device))
            torch.ops.aten.hardshrink.out(tau[i], float(below), out=buf[i])
    return buf


def h_ties(tau: Tensor, *, r0: float = 1.0, delta: float = 0.2, rho: float = 1.1, eps: float = 1e-8,
           diagnostics: bool = False, denominator: str = "agreeing"):
    """FedProxy Eqs. 5, 6, 10–13 — the global delta Δφ:
    r_k = clip(r0 − δ·h_norm_k, 0, 1); τ̃_k = magnitude_trim(τ_k, r_k); τ̂_k = w_k τ̃_k;
    P_d = Σ_{τ̂>0} |τ̂_k[d]|, N_d = Σ_{τ̂<0} |τ̂_k[d]|;
    Δ[d] = Σ_{τ̂>0} τ̂_k[d] / Σ_{τ̂>0} w_k if P_d/(N_d+ε) ≥ ρ, elif N_d/(P_d+ε) ≥ ρ the same over τ̂ < 0, else 0.
    `denominator="all"` (an ablation) divides the winning sign's mass by Σ_k w_k over every client
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
    n_mass = (p_mass - that.sum(dim=0)).clamp(min=0)
    pos_wins = p_mass / (n_mass + eps) >= rho
    neg_wins = ~pos_wins & (n_mass / (p_mass + eps) >= rho)
    sgn = that.sign_()
    w_diff = w @ sgn
    w_abs = w @ sgn.abs_()
    w_pos, w_neg = (w_abs + w_diff) / 2, (w_abs - w_diff) / 2
    if denominator == "all":       # the same total weight under both signs
        w_pos = w_neg = torch.full_like(p_mass, float(w.sum()))
    one = torch.ones_like(p_mass)
    out = torch.where(pos_wins & (w_pos > 0), p_mass / torch.where(w_pos > 0, w_pos, one),
                      torch.where(neg_wins & (w_neg > 0), -n_mass / torch.where(w_neg > 0, w_neg, one),
                                  torch.zeros_like(p_mass)))
    return (out, info) if diagnostics else out


def ties(tau: Tensor, *, density: float = 0.2, weights: Tensor | None = None) -> Tensor:
    """TIES-merging: trim each client to `density`; elect the sign per entry as the sign of
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
    return torch.where(den != 0, num / torch.where(den != 0, den, torch.ones_like(den)), torch.zeros_like(num))
