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


def _keeps(tau: Tensor, keep: float | Tensor) -> list[int]:
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
    return [_keep_count(kp, p, eps) for kp in keeps]


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
