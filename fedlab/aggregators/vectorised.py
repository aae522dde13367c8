"""The trimming threshold without per-row Python loops or per-block host syncs, for accelerators.

On the CPU `basic._thresholds` walks cache-sized column blocks and handles each row's bracket on its own
(cheap there, and bit for bit stable). On a GPU every per-row step and every `.tolist()` inside the block loop
is a kernel launch or a host sync, which made h_ties 69× a device copy on an H100. This path computes the same
numbers — per row i of |τ| the counts[i]-th largest value x_i and how many entries are ≥ x_i and > x_i — with
a constant number of operations over the whole [K, P] matrix:

1. a shared random sample of positions brackets each row's answer between two sampled values lo_i ≤ x_i ≤ hi_i
   (the same bracket rule as the CPU path, with a larger sample: a narrower band);
2. one pass counts n_hi,i = #{|τ_i| > hi_i} and compacts the entries inside [lo_i, hi_i] (one host sync for
   the band's size);
3. the bands are laid out as a padded [K, L] matrix, sorted per row in one segmented sort, and x_i is the
   (counts[i] − n_hi,i)-th entry of row i; n_ge and n_gt are counts over the sorted rows;
4. a row whose answer fell outside its bracket (rare) is selected exactly with kthvalue.

Host syncs per call: the band's size and the final [K] counts — two, whatever K and P are.
"""
from __future__ import annotations

import torch
from torch import Tensor

# None: this path off the CPU only; True: everywhere (tests run it on the CPU); False: nowhere (benchmarks
# time the CPU path's block loop on a GPU against it)
FORCE: bool | None = None


def wanted(tau: Tensor) -> bool:
    """The vectorised path runs on every device but the CPU, unless FORCE says otherwise."""
    return tau.device.type != "cpu" if FORCE is None else FORCE


def thresholds(tau: Tensor, counts: list[int], sample: int | None = None):
    """Same contract as `basic._thresholds`: (x [K] tensor, n_ge list, n_gt list). x_i = +inf where
    counts[i] = 0, −inf where counts[i] ≥ P."""
    k_rows, p = tau.shape
    floating = tau.is_floating_point()
    dtype, dev = (tau.dtype if floating else torch.float32), tau.device
    thr = torch.full((k_rows,), float("inf"), dtype=dtype, device=dev)
    if p == 0 or k_rows == 0:
        return thr, [0] * k_rows, [0] * k_rows
    c = torch.tensor(counts, dtype=torch.long)
    full, live = c >= p, (c > 0) & (c < p)
    thr[full.to(dev)] = float("-inf")
    n_ge = torch.where(full, p, 0)
    n_gt = n_ge.clone()
    if not bool(live.any()):
        return thr, n_ge.tolist(), n_gt.tolist()
    mag = tau.abs() if floating else tau.abs().float()                                   # [K, P]

    sample = sample or int(min(1 << 20, max(8192, p // 16)))
    if p <= 4 * sample:   # small rows: one sort per row is cheapest
        srt = mag.sort(dim=1, descending=True).values
        at = (c.clamp(min=1, max=p) - 1).to(dev)
        x = srt.gather(1, at[:, None])[:, 0]
        ge = (srt >= x[:, None]).sum(dim=1).cpu()
        gt = (srt > x[:, None]).sum(dim=1).cpu()
        live_d = live.to(dev)
        thr = torch.where(live_d, x, thr)
        return thr, torch.where(live, ge, n_ge).tolist(), torch.where(live, gt, n_gt).tolist()

    # the positions drawn where τ lives (a CPU draw of 2^20 positions and its copy cost more than the pass)
    g = torch.Generator(device=dev).manual_seed(0)
    pos = torch.randint(p, (sample,), generator=g, device=dev)
    srt = mag[:, pos].sort(dim=1, descending=True).values                              # [K, S]
    frac = c.double() / p
    margin = 6.0 * torch.sqrt(sample * frac * (1 - frac)) + 64
    hi_idx = (frac * sample - margin).floor().clamp(min=0).long().to(dev)
    lo_idx = (frac * sample + margin).ceil().clamp(max=sample - 1).long().to(dev)
    rows = torch.arange(k_rows, device=dev)
    inf = torch.full((k_rows,), float("inf"), dtype=dtype, device=dev)
    hi = torch.where(hi_idx > 0, srt[rows, hi_idx], inf)
    lo = torch.where(lo_idx < sample - 1, srt[rows, lo_idx], -inf)
    off = (~live).to(dev)        # rows not selected here: an empty bracket
    hi, lo = hi.masked_fill(off, float("-inf"))[:, None], lo.masked_fill(off, float("inf"))[:, None]

    n_hi = (mag > hi).sum(dim=1)                                                          # [K]
    inside = (mag >= lo) & (mag <= hi)
    n_in = inside.sum(dim=1)                                                              # [K]
    band = mag[inside]                     # row-major: row 0's band, then row 1's, … (host sync: its size)
    width = max(1, int(n_in.max()))
    start = torch.cumsum(n_in, 0) - n_in
    row_of = torch.repeat_interleave(rows, n_in, output_size=band.numel())
    col = torch.arange(band.numel(), device=dev) - start[row_of]
    padded = torch.full((k_rows, width), float("-inf"), dtype=dtype, device=dev)
    padded[row_of, col] = band
    ordered = padded.sort(dim=1, descending=True).values                                 # [K, L]
    need = c.to(dev) - n_hi                    # the answer is the need-th largest inside the bracket …
    ok = (need >= 1) & (need <= n_in) & live.to(dev)
    x = ordered.gather(1, (need.clamp(min=1, max=width) - 1)[:, None])[:, 0]
    ge = n_hi + (ordered >= x[:, None]).sum(dim=1)
    gt = n_hi + (ordered > x[:, None]).sum(dim=1)
    thr = torch.where(ok, x, thr)
    ok_h, ge_h, gt_h = ok.cpu(), ge.cpu(), gt.cpu()                                        # host sync
    n_ge = torch.where(ok_h, ge_h, n_ge)
    n_gt = torch.where(ok_h, gt_h, n_gt)
    for i in torch.nonzero(live & ~ok_h).flatten().tolist():   # … unless the sample misjudged the row
        row = mag[i]
        xi = torch.kthvalue(row.cpu() if row.device.type == "mps" else row, p - counts[i] + 1).values.to(dev)
        thr[i] = xi
        n_ge[i] = int(torch.count_nonzero(row >= xi))
        n_gt[i] = int(torch.count_nonzero(row > xi))
    return thr, n_ge.tolist(), n_gt.tolist()
