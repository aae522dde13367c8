"""Pure aggregation kernels over stacked client updates tau[K, P] (no Lightning, no Ray, no model)."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from fedlab import compiled
from fedlab.aggregators import counting, vectorised


def pairwise_cosine(tau: Tensor) -> Tensor:
    """S[k, j] = <τ_k, τ_j> / (‖τ_k‖ ‖τ_j‖); a zero row has similarity 0 with everyone (itself included),
    a non-zero row similarity exactly 1 with itself. On the CPU the product is float32, as every recorded table
    was computed (its error grows with P: 3e-4 at P = 10M, enough to move H-TIES's retained counts by one or
    two); on an accelerator the Gram matrix is summed in float64 (1e-9), so the two paths can differ there."""
    if tau.dim() != 2:
        raise ValueError(f"tau must be [K, P], got shape {tuple(tau.shape)}")
    t = tau.float() if not tau.is_floating_point() else tau
    if vectorised.wanted(t):
        # on an accelerator the [K, K] Gram matrix in float64, over column blocks: a float32 product there may run
        # in TF32 (10-bit mantissa; an image can force it for every product) and move S, hence w and r, by 1e-3
        gram = torch.zeros(t.shape[0], t.shape[0], dtype=torch.float64, device=t.device)
        for a in range(0, t.shape[1], 1 << 22):
            blk = t[:, a:a + (1 << 22)].double()
            gram += blk @ blk.T
        norms64 = gram.diagonal().clamp(min=0).sqrt()
        nz = norms64 > 0
        safe64 = torch.where(nz, norms64, torch.ones_like(norms64))
        s = (gram / (safe64[:, None] * safe64[None, :])).to(t.dtype)
    else:
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


_TRIM_BLOCK = 1 << 17   # columns per block of the trimming passes (a few MB of [K, B] scratch: cache-resident)


def _column_blocks(p: int, block: int) -> list[tuple[int, int]]:
    return [(a, min(p, a + block)) for a in range(0, p, block)]


def _trim_block(tau: Tensor) -> int:
    """Columns per block: cache-sized on the CPU; on a GPU 2^24 (a handful of launches per step at P = 76M, not
    hundreds; the scratch buffers are 4·K·2^24 bytes each)."""
    return _TRIM_BLOCK if not vectorised.wanted(tau) else 1 << 24


def _settled(tau: Tensor, counts: list[int]):
    """The rows whose threshold needs no selection, and the others: (thr, n_ge, n_gt, live) with thr = +inf
    where counts[i] = 0, −inf (every entry kept, no pass over the row) where counts[i] ≥ P, and `live` the rows
    in between, whose thr, n_ge and n_gt the selection fills in."""
    k_rows, p = tau.shape
    thr = torch.full((k_rows,), float("inf"), dtype=tau.dtype if tau.is_floating_point() else torch.float32,
                     device=tau.device)
    n_ge, n_gt, live = [0] * k_rows, [0] * k_rows, []
    for i in range(k_rows):
        if counts[i] >= p:
            thr[i] = float("-inf")
            n_ge[i] = n_gt[i] = p
        elif counts[i] > 0:
            live.append(i)
    return thr, n_ge, n_gt, live


def _exact_row(tau: Tensor, i: int, count: int):
    """Row i's count-th largest |value| x by kthvalue, and how many entries are ≥ x and > x."""
    row = tau[i].abs() if tau.is_floating_point() else tau[i].abs().float()
    x = torch.kthvalue(row, tau.shape[1] - count + 1).values
    return x, int(torch.count_nonzero(torch.ge(row, x))), int(torch.count_nonzero(torch.gt(row, x)))


def _sample_size(p: int, sample: int | None = None) -> int:
    return sample or int(min(65536, max(8192, p // 64)))


def _sample_bracket(tau: Tensor, counts: list[int], live: list[int], sample: int, dtype: torch.dtype):
    """Per row i the bracket lo_i ≤ x_i ≤ hi_i of its counts[i]-th largest |value| x_i, read off a shared random
    sample of `sample` positions with a wide margin (6 standard deviations of the sampled count, plus 64), and
    the sample ranks it was read at: (lo, hi, lo_idx, hi_idx). An open end where the margin runs past the
    sample: hi = +inf at the top, lo = −inf at the bottom; rows not in `live` get an empty bracket
    (lo = +inf > hi = −inf), whatever values they hold."""
    k_rows, p = tau.shape
    dev = tau.device
    g = torch.Generator(device="cpu").manual_seed(0)
    pos = torch.randint(p, (sample,), generator=g).to(dev)
    srt = tau[:, pos].abs().to(dtype).sort(dim=1, descending=True).values                 # [K, S], largest first
    frac = torch.tensor([c / p for c in counts], dtype=torch.float64)
    margin = 6.0 * torch.sqrt(sample * frac * (1 - frac)) + 64
    hi_idx = (frac * sample - margin).floor().clamp(min=0).long().to(dev)
    lo_idx = (frac * sample + margin).ceil().clamp(max=sample - 1).long().to(dev)
    rows = torch.arange(k_rows, device=dev)
    hi = torch.where(hi_idx > 0, srt[rows, hi_idx], torch.full_like(srt[:, 0], float("inf")))
    lo = torch.where(lo_idx < sample - 1, srt[rows, lo_idx], torch.full_like(srt[:, 0], float("-inf")))
    off = torch.ones(k_rows, dtype=torch.bool, device=dev)
    off[live] = False
    return lo.masked_fill(off, float("inf")), hi.masked_fill(off, float("-inf")), lo_idx, hi_idx


def _thresholds(tau: Tensor, counts: list[int], block: int, sample: int | None = None):
    """Per row i of |τ|: the counts[i]-th largest value x_i (exact; +inf where the count is 0, −inf where it is P) and how many
    entries are ≥ x_i and > x_i (more than counts[i] are ≥ x_i when values tie at x_i). Returns (x, n_ge, n_gt).

    A full selection per row (kthvalue) reads every row several times; instead a shared random sample of
    positions brackets each row's answer between two sampled values lo ≤ x ≤ hi (with a wide margin), one pass
    over column blocks of τ counts the entries above hi and gathers the few inside [lo, hi], and the exact
    answer is selected among those (no [K, P] buffer of magnitudes). A row whose answer falls outside its
    bracket (rare) falls back to kthvalue on that row."""
    k_rows, p = tau.shape
    floating = tau.is_floating_point()
    dtype, dev = (tau.dtype if floating else torch.float32), tau.device
    thr, n_ge, n_gt, live = _settled(tau, counts)
    if p == 0:
        return torch.full_like(thr, float("inf")), [0] * k_rows, [0] * k_rows
    if not live:
        return thr, n_ge, n_gt

    exact = lambda i: _exact_row(tau, i, counts[i])
    sample = _sample_size(p, sample)
    if p <= 4 * sample:   # small rows: direct selection is cheapest
        for i in live:
            thr[i], n_ge[i], n_gt[i] = exact(i)
        return thr, n_ge, n_gt
    lo, hi, lo_idx, hi_idx = _sample_bracket(tau, counts, live, sample, dtype)
    hi, lo = hi[:, None], lo[:, None]
    n_hi = torch.zeros(k_rows, dtype=torch.long, device=dev)
    # each row's bracket values go into one buffer sized from the sample (grown if a row overflows it): small
    # tensors kept between the blocks' large temporaries would fragment the heap and raise the peak memory
    expect = ((lo_idx - hi_idx + 1).clamp(min=0).double() / sample * p * 1.5).ceil().long().tolist()
    bands = [torch.empty(expect[i] + 1024, dtype=dtype, device=dev) if i in live else None for i in range(k_rows)]
    filled = [0] * k_rows
    width = min(block, p)
    mag = torch.empty((k_rows, width), dtype=dtype, device=dev)
    m1 = torch.empty((k_rows, width), dtype=torch.bool, device=dev)
    m2 = torch.empty_like(m1)
    for a, b in _column_blocks(p, block):
        n = b - a
        blk = tau[:, a:b]
        m = torch.abs(blk, out=mag[:, :n]) if floating else mag[:, :n].copy_(blk.abs())
        n_hi += torch.count_nonzero(torch.gt(m, hi, out=m1[:, :n]), dim=1)
        inside = torch.ge(m, lo, out=m1[:, :n]).logical_and_(torch.le(m, hi, out=m2[:, :n]))
        values, at = m[inside], 0
        for i, c in enumerate(inside.sum(dim=1).tolist()):
            if c:
                if filled[i] + c > bands[i].numel():
                    grown = torch.empty(2 * (filled[i] + c), dtype=dtype, device=dev)
                    bands[i] = torch.cat([bands[i][:filled[i]], grown])
                bands[i][filled[i]:filled[i] + c] = values[at:at + c]
                filled[i] += c
                at += c
    n_hi = n_hi.tolist()
    for i in live:
        band = bands[i][:filled[i]]
        need = counts[i] - n_hi[i]        # the answer is the need-th largest inside the bracket …
        if 1 <= need <= band.numel():
            x = torch.kthvalue(band, band.numel() - need + 1).values
            thr[i] = x
            n_ge[i] = n_hi[i] + int(torch.count_nonzero(torch.ge(band, x)))
            n_gt[i] = n_hi[i] + int(torch.count_nonzero(torch.gt(band, x)))
        else:                              # … unless the sample misjudged the row
            thr[i], n_ge[i], n_gt[i] = exact(i)
    return thr, n_ge, n_gt


def row_thresholds(tau: Tensor, counts: list[int], block: int | None = None):
    """Per row the counts[i]-th largest |value| and how many entries are ≥ and > it: `vectorised.thresholds`
    where that path is wanted (accelerators), `counting.thresholds` for large float32/float64 updates on the
    CPU where compiling works, `_thresholds` over column blocks of `block` otherwise. All three are exact: the
    same numbers."""
    if vectorised.wanted(tau):
        return vectorised.thresholds(tau, counts)
    blocked = lambda: _thresholds(tau, counts, block or _trim_block(tau))
    if counting.wanted(tau):
        return compiled.run_or_fall_back("threshold selection", lambda: _counted(tau, counts), blocked)
    return blocked()


def _counted(tau: Tensor, counts: list[int]):
    """`row_thresholds` by `counting.thresholds`, the rows it leaves (NaN-crowded) selected with kthvalue."""
    thr, n_ge, n_gt, live = _settled(tau, counts)
    if not live:
        return thr, n_ge, n_gt
    p = tau.shape[1]
    sample = _sample_size(p, counting.SAMPLE)
    bracket = lambda rows: None if p <= 4 * sample else _sample_bracket(tau, counts, rows, sample, tau.dtype)[:2]
    for i, got in counting.thresholds(tau, counts, live, bracket).items():
        thr[i], n_ge[i], n_gt[i] = got if got is not None else _exact_row(tau, i, counts[i])
    return thr, n_ge, n_gt


def trimmed_blocks(tau: Tensor, counts: list[int], block: int | None = None):
    """Yield (a, b, trimmed τ[:, a:b]) over column blocks: per row the counts[i] entries of largest |value|
    kept (ties at the threshold: lower index first), the rest zero — `magnitude_trim` a block at a time,
    for kernels that consume the trimmed updates as they go (h_ties, ties) and never hold a [K, P] copy. The
    yielded block is a reused buffer: read or modify it before asking for the next."""
    k_rows, p = tau.shape
    block = block or _trim_block(tau)
    thr, n_ge, n_gt = row_thresholds(tau, counts, block)
    floating = tau.is_floating_point()
    if floating:       # |x| ≥ t  ⇔  |x| > the largest float below t
        below = torch.nextafter(thr, torch.zeros_like(thr))[:, None]
    # rows with more entries at the threshold than places left keep the lowest indices among them: a running
    # count of the equal entries seen so far (ties are rare)
    crowded = {i: [counts[i] - n_gt[i], 0] for i in range(k_rows) if 0 < counts[i] and n_ge[i] > counts[i]}
    empty = [i for i in range(k_rows) if counts[i] == 0]
    width = min(block, p)
    out = torch.empty((k_rows, width), dtype=tau.dtype, device=tau.device)
    mag = torch.empty((k_rows, width), dtype=thr.dtype, device=tau.device)
    keep = torch.empty((k_rows, width), dtype=torch.bool, device=tau.device)
    zero = torch.zeros((), dtype=tau.dtype, device=tau.device)
    for a, b in _column_blocks(p, block):
        n = b - a
        blk = tau[:, a:b]
        m = torch.abs(blk, out=mag[:, :n]) if floating else mag[:, :n].copy_(blk.abs())
        kp = torch.gt(m, below, out=keep[:, :n]) if floating else torch.ge(m, thr[:, None], out=keep[:, :n])
        o = torch.where(kp, blk, zero, out=out[:, :n])
        for i, (need, seen) in crowded.items():
            equal = m[i] == thr[i]
            kept = torch.gt(m[i], thr[i]) | (equal & (torch.cumsum(equal, dim=0, dtype=torch.int32) + seen <= need))
            crowded[i][1] = seen + int(torch.count_nonzero(equal))
            torch.where(kept, blk[i], zero, out=o[i])
        for i in empty:
            o[i].zero_()
        yield a, b, o


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
    zero the rest. `keep` is one fraction or one per row. Exact selection without a full sort
    (`_thresholds`), written block by block (`trimmed_blocks`) into the one [K, P] result."""
    counts = _keeps(tau, keep)
    out = torch.empty_like(tau)
    if out.numel():
        for a, b, blk in trimmed_blocks(tau, counts):
            out[:, a:b] = blk
    return out
