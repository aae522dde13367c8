"""Fused merge passes of `h_ties` and `ties`: the trimming mask, the client weights, the reductions over
clients and the per-coordinate decision (fedlab/methods/fedproxy/README.md (FP-12), (FP-16)) written as one
function of the whole [K, P] update matrix and handed to `torch.compile`, which generates one C++/OpenMP loop
over the coordinates with the K clients reduced inside it (CPU float32/float64 only: `fedlab.compiled`). τ is
read once after the thresholds are known, where the eager block loop (`merging.h_ties`) runs about a dozen
torch operations per block, each one more pass.

What is fused: given the per-row trimming threshold (`basic.row_thresholds`: at these sizes found by generated
counting passes, `fedlab.aggregators.counting`), the rest of the kernel. A row with more entries at its
threshold than it may keep keeps the lowest-indexed of them (`basic.trimmed_blocks`); that is element-wise once
the column of its last kept tied entry is known (`keep_rule`: one generated pass that counts the tied entries
per column block, `counting.tie_cutoffs`; at P = 10M float32 entries some row has such ties in about one call in
three).

Numbers: the reductions over clients run in client order in both paths, but the eager kernel takes
Σ_k w_k sign(τ̂_k) (and TIES' elected sign) from a BLAS product whose summation order is its own, and the
generated code may contract a multiply and an add into one rounding. The fused result equals the eager one
within a relative 1e-6 of each coordinate's magnitude (`tests/unit/test_kernels_fused.py`), and a coordinate's
decision (which sign wins, or zero) is the same wherever the sign-dominance ratio is not within float32
rounding of ρ.

When it is used (`fedlab.compiled`, chosen once per process and logged on stderr): `FEDLAB_FUSED_KERNELS=auto`
(the default) — floating τ with at least `MIN_P` (2^23) coordinates, when compiling works on this machine (the
first call compiles: 4–10 s, once per process and dtype; the number of coordinates is a
symbolic size, so another model's P does not recompile); `off` — never; `on` — every size (tests)."""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab import compiled

# below this the compile (4–10 s once per process) does not pay for itself within a run: at P = 1.2M (FedProxy's
# SmolLM2 proxy) the eager h_ties takes about 0.07 s a round; from 2^23 on (paper-scale updates) it saves
# tenths of a second to seconds every round
MIN_P = 1 << 23
_FNS: dict = {}


def wanted(tau: Tensor) -> bool:
    """Whether `h_ties` / `ties` take the fused path for this τ (`fedlab.compiled`: FEDLAB_FUSED_KERNELS)."""
    if tau.dim() != 2 or tau.numel() == 0:
        return False
    return compiled.wanted(tau, tau.shape[1], MIN_P)


def _compiled(name: str):
    if name not in _FNS:
        _FNS[name] = torch.compile(_h_ties_body if name == "h_ties" else _ties_body, dynamic=True)
    return _FNS[name]


def _kept(tau: Tensor, thr: Tensor, cutoff: Tensor) -> Tensor:
    """τ where kept, else 0: |τ_k[d]| > thr_k, or |τ_k[d]| = thr_k at a column d < cutoff_k (`keep_rule`)."""
    a = tau.abs()
    col = torch.arange(tau.shape[1], device=tau.device)
    return torch.where((a > thr) | ((a == thr) & (col < cutoff)), tau, torch.zeros_like(tau))


def _h_ties_body(tau: Tensor, thr: Tensor, cutoff: Tensor, w: Tensor, rho: Tensor, eps: Tensor,
                 w_total: Tensor | None) -> Tensor:
    """H-TIES (merging.h_ties) after the thresholds: τ̂_k = w_k · kept(τ_k); P = Σ max(τ̂, 0), N = P − Σ τ̂ (≥ 0);
    W± = Σ_k w_k [τ̂_k ≷ 0] (or w_total for both: the 'all' denominator);
    Δ = P/W+ if P/(N+ε) ≥ ρ, else −N/W− if N/(P+ε) ≥ ρ, else 0."""
    that = _kept(tau, thr, cutoff) * w[:, None]
    pm = that.clamp(min=0).sum(0)
    nm = (pm - that.sum(0)).clamp(min=0)
    sgn = that.sign()
    w_diff = (w[:, None] * sgn).sum(0)
    w_abs = (w[:, None] * sgn.abs()).sum(0)
    pos_wins = pm / (nm + eps) >= rho
    neg_wins = ~pos_wins & (nm / (pm + eps) >= rho)
    if w_total is None:
        w_pos, w_neg = (w_abs + w_diff) / 2, (w_abs - w_diff) / 2
    else:
        w_pos = w_neg = w_total.expand_as(pm)
    one, zero = torch.ones_like(pm), torch.zeros_like(pm)
    return torch.where(pos_wins & (w_pos > 0), pm / torch.where(w_pos > 0, w_pos, one),
                       torch.where(neg_wins & (w_neg > 0), -nm / torch.where(w_neg > 0, w_neg, one), zero))


def _ties_body(tau: Tensor, thr: Tensor, cutoff: Tensor, w: Tensor) -> Tensor:
    """TIES after the thresholds: τ̃_k = kept(τ_k); elected = sign(Σ_k w_k τ̃_k) (0 → +);
    agree_k = max(sign(τ̃_k)·elected, 0); Δ = Σ w_k agree_k τ̃_k / Σ w_k agree_k (0 where no client agrees)."""
    trimmed = _kept(tau, thr, cutoff)
    elected = torch.where((w[:, None] * trimmed).sum(0) >= 0, 1.0, -1.0).to(tau.dtype)
    agree = (trimmed.sign() * elected).clamp(min=0)
    den = (w[:, None] * agree).sum(0)
    num = (w[:, None] * (agree * trimmed)).sum(0)
    return torch.where(den != 0, num / torch.where(den != 0, den, torch.ones_like(den)), torch.zeros_like(den))


def keep_rule(tau: Tensor, counts: list[int]) -> tuple[Tensor, Tensor]:
    """Per row k the threshold thr_k [K, 1] and a column cutoff_k [K, 1] such that row k keeps exactly its
    counts[k] entries of largest |value|, ties at the threshold to the lower indices (as `basic.trimmed_blocks`):
    |τ_k[d]| > thr_k, or = thr_k at d < cutoff_k. cutoff_k = P where every tied entry fits, the column after
    the last one kept where more tie than fit, 0 for a row that keeps nothing."""
    from fedlab.aggregators import counting
    from fedlab.aggregators.basic import row_thresholds

    k_rows, p = tau.shape
    thr, n_ge, n_gt = row_thresholds(tau, counts)
    cutoff = torch.full((k_rows,), p, dtype=torch.long)
    for i, c in enumerate(counts):
        if c <= 0:
            cutoff[i] = 0
    # where more entries tie at the threshold than fit, the (c − n_gt)-th tied entry is the last kept
    crowded = {i: c - n_gt[i] for i, c in enumerate(counts) if c > 0 and n_ge[i] > c}
    for i, col in (counting.tie_cutoffs(tau, thr, crowded) if crowded else {}).items():
        cutoff[i] = col
    return thr.to(tau.dtype)[:, None], cutoff.to(tau.device)[:, None]


def h_ties_merge(tau: Tensor, counts: list[int], w: Tensor, rho: float, eps: float, w_total: float | None) -> Tensor:
    """`_h_ties_body` with each row's kept count; ρ, ε and the total weight go in as 0-dim tensors of τ's dtype
    (what the eager kernel's Python floats become against a float tensor), so a new value does not recompile."""
    thr, cutoff = keep_rule(tau, counts)
    scalar = lambda v: torch.tensor(v, dtype=tau.dtype, device=tau.device)
    return _compiled("h_ties")(tau, thr, cutoff, w, scalar(rho), scalar(eps),
                               None if w_total is None else scalar(w_total))


def ties_merge(tau: Tensor, counts: list[int], w: Tensor) -> Tensor:
    thr, cutoff = keep_rule(tau, counts)
    return _compiled("ties")(tau, thr, cutoff, w)
