"""The trimming threshold by counting, for large floating updates on the CPU: no per-block gathers, no sort of
a band, only generated counting passes that read τ.

Same numbers as `basic._thresholds` — per row i of |τ| the counts[i]-th largest value x_i and how many
entries are ≥ x_i and > x_i — found as a radix select over the bit patterns of the magnitudes. For a
non-negative float, the order of the values is the order of their bit patterns read as integers, so x_i is
the largest pattern b with #{|τ_i| ≥ float(b)} ≥ counts[i]. Each row keeps a bracket of patterns [L_i, H_i)
with #{≥ L_i} ≥ counts[i] > #{≥ H_i}; one pass counts, for E edges spread evenly over every row's bracket,
the entries at or above each edge (`torch.compile` turns the E counts into one generated loop over τ, the
rows' counts summed in int32), and the bracket shrinks to the two edges around the answer: E + 1 times
narrower a pass. When H_i = L_i + 1, x_i = float(L_i), n_ge = #{≥ L_i} and n_gt = #{≥ H_i}.

The first bracket is the shared random sample's (`basic._thresholds`' rule): about 2^17 patterns wide at
P = 10M, found in 6 passes of E = 8 edges, each about a fifth of a copy of τ; a row whose sample misjudged
it opens its bracket to every pattern and takes a few passes more. Where the selection runs
(`basic.row_thresholds`): float32 or float64 τ on the CPU from `MIN_P` entries a row, when compiling works
(`fedlab.compiled`). NaN counts as smaller than every number, as in `basic._thresholds`' bracket; a row with
fewer numbers than it keeps is selected with kthvalue (`basic._thresholds`' fallback).
"""
from __future__ import annotations

import torch
from torch import Tensor

from fedlab import compiled

MIN_P = 1 << 23                 # as the fused merge kernels: below it the one-off compile does not pay
SAMPLE = 8192                   # positions sampled for the first bracket: a few ms to gather and sort
EDGES = 8                       # edges a pass: each pass costs about 0.1 + 0.01·E of a copy of τ at P = 10M
MAX_PASSES = 100                # evenly spaced passes alone end a float64 search within 23
_INT = {torch.float32: torch.int32, torch.float64: torch.int64}
_INF_BITS = {torch.float32: 0x7F800000, torch.float64: 0x7FF0000000000000}
_FNS: dict = {}


def wanted(tau: Tensor) -> bool:
    """Whether `basic.row_thresholds` counts for this τ (`fedlab.compiled`: FEDLAB_FUSED_KERNELS)."""
    return tau.dim() == 2 and tau.numel() > 0 and compiled.wanted(tau, tau.shape[1], MIN_P)


def _at_least_body(tau: Tensor, edges: Tensor, low: Tensor, high: Tensor):
    """Per row k: [K, E] #{d : |τ_k[d]| ≥ edges[k, j]} for each edge j, in int32 (a row has fewer than 2^31
    entries); the smallest |τ_k[d]| ≥ low_k (+inf if none) and the largest |τ_k[d]| < high_k (−1 if none).
    E + 2 reductions over the same rows, which the compiler fuses into one loop over τ."""
    a = tau.abs()
    counts = torch.stack([(a >= edges[:, j:j + 1]).sum(1, dtype=torch.int32) for j in range(edges.shape[1])], 1)
    smallest = torch.where(a >= low[:, None], a, torch.full_like(a, float("inf"))).amin(1)
    largest = torch.where(a < high[:, None], a, torch.full_like(a, -1.0)).amax(1)
    return counts, smallest, largest


def _at_least(tau: Tensor, edges: Tensor, low: Tensor, high: Tensor):
    if "at_least" not in _FNS:
        _FNS["at_least"] = torch.compile(_at_least_body, dynamic=True)
    counts, smallest, largest = _FNS["at_least"](tau, edges, low, high)
    return counts.long(), smallest, largest


def _floats(bits: Tensor, dtype: torch.dtype) -> Tensor:
    """The floats whose bit patterns are `bits` (int64, each a valid pattern of `dtype`'s width)."""
    return bits.to(_INT[dtype]).view(dtype)


def _bits(x: Tensor) -> Tensor:
    return x.contiguous().view(_INT[x.dtype]).long()


def _edges(lo: Tensor, hi: Tensor, n: int) -> Tensor:
    """[K, n] patterns lo + ⌊(hi − lo)·j / (n + 1)⌋ for j = 1 … n, without overflowing int64 for float64's
    63-bit spans."""
    span, j = hi - lo, torch.arange(1, n + 1)
    q, r = span // (n + 1), span % (n + 1)
    return lo[:, None] + q[:, None] * j + (r[:, None] * j) // (n + 1)


def _spread(a: Tensor, b: Tensor, n: int, dtype: torch.dtype) -> Tensor:
    """[K, n] patterns between a and b: evenly spaced in value where both ends are finite numbers (a bracket
    that spans many binades, as one reaching down to 0 does, is then not spent on the smallest ones), evenly
    spaced in pattern otherwise; clamped to [a, b], sorted as the patterns are."""
    va, vb = _floats(a, dtype).double(), _floats(torch.minimum(b, torch.full_like(b, _INF_BITS[dtype])), dtype).double()
    finite = torch.isfinite(vb)[:, None]
    j = torch.arange(1, n + 1, dtype=torch.float64) / (n + 1)
    by_value = _bits((va[:, None] + (vb - va).nan_to_num(0.0)[:, None] * j).to(dtype))
    by_value = torch.minimum(torch.maximum(by_value, a[:, None]), b[:, None])
    return torch.where(finite, by_value, _edges(a, b, n))


def _window(low: Tensor, high: Tensor, n_low: Tensor, n_high: Tensor, need: Tensor, dtype: torch.dtype):
    """Per row the window [a, b) of patterns where the answer most likely lies: around the value at which the
    count falls to `need` if the m = n_low − n_high entries inside [low, high) were spread evenly in value (a
    fraction f = (n_low − need)/m of the way up), with a half-width of (4·√(m·f·(1 − f)) + 2)/m of the bracket
    (4 standard deviations of the binomial count below the guess under such a spread, and 2 entries), within it.
    The whole bracket where its high end is not a finite number."""
    lv = _floats(low, dtype).double()
    hv = _floats(torch.minimum(high, torch.full_like(high, _INF_BITS[dtype])), dtype).double()
    m = (n_low - n_high).clamp(min=1).double()
    f = (n_low - need).double() / m
    guess = lv + f * (hv - lv)
    half = ((4 * (m * f * (1 - f)).sqrt() + 2) / m).clamp(max=1.0) * (hv - lv)
    a = _bits((guess - half).clamp(min=0).nan_to_num(0.0).to(dtype))
    b = _bits((guess + half).nan_to_num(0.0).to(dtype))
    open_end = ~torch.isfinite(hv)
    a = torch.where(open_end, low, torch.minimum(torch.maximum(a, low), high))
    b = torch.where(open_end, high, torch.maximum(torch.minimum(b, high), a))
    return a, b


def thresholds(tau: Tensor, counts: list[int], live: list[int], bracket) -> dict[int, tuple | None]:
    """{row i in `live` (0 < counts[i] < P): (x_i, #{|τ_i| ≥ x_i}, #{|τ_i| > x_i})}, or None for a row with
    fewer numbers than counts[i] (NaN takes the rest), which the caller selects with kthvalue, as
    `basic._thresholds` does. `bracket(live)` gives each live row's sampled (lo, hi) magnitudes or None (too few
    entries to sample)."""
    k_rows, p = tau.shape
    dtype = tau.dtype
    need = torch.tensor([counts[i] if i in live else 1 for i in range(k_rows)], dtype=torch.long)
    top = _INF_BITS[dtype] + 1                          # one pattern past +inf: no entry reaches it
    low, high = torch.zeros(k_rows, dtype=torch.long), torch.full((k_rows,), top, dtype=torch.long)
    n_low, n_high = torch.full((k_rows,), p, dtype=torch.long), torch.zeros(k_rows, dtype=torch.long)
    rows = torch.arange(k_rows)
    # the first pass: the pattern 0 (every entry but NaN is at or above +0), the sampled bracket's ends and edges
    # spread between them; where the sample misjudged a row its bracket opens to 0 or to `top` on that side
    sampled = bracket(live)
    if sampled is None:
        lo, hi = low.clone(), high - 1
    else:
        off = torch.ones(k_rows, dtype=torch.bool)
        off[live] = False
        lo = _bits(sampled[0].to(dtype)).clamp(min=0).masked_fill(off, 0)     # −inf (an open end): pattern 0
        hi = _bits(sampled[1].to(dtype)).clamp(min=0, max=top - 1).masked_fill(off, top - 1)
    a, b = lo, hi + 1
    edges = torch.cat([low[:, None], a[:, None], _spread(a, b, EDGES - 3, dtype), b[:, None]], 1)
    nan_rows, span = None, high - low
    for _ in range(MAX_PASSES):
        below = torch.minimum(high, torch.full_like(high, _INF_BITS[dtype]))
        got, smallest, largest = _at_least(tau, _floats(edges, dtype), _floats(low, dtype), _floats(below, dtype))
        if nan_rows is None:       # NaN is at or above no edge: a row with fewer others than it keeps
            nan_rows = {i for i in live if int(got[i, 0]) < counts[i]}
        # counts fall as the edges rise (a row's edges are sorted): the last edge still counting `need` entries
        # is the new low end, the next one the new high end
        enough = got >= need[:, None]
        n_ok = enough.sum(1)
        has_low, has_high = n_ok > 0, n_ok < edges.shape[1]
        at_low, at_high = (n_ok - 1).clamp(min=0), n_ok.clamp(max=edges.shape[1] - 1)
        new_low = torch.where(has_low, edges[rows, at_low], low)
        new_n_low = torch.where(has_low, got[rows, at_low], n_low)
        new_high = torch.where(has_high, edges[rows, at_high], high)
        new_n_high = torch.where(has_high, got[rows, at_high], n_high)
        # the bracket's own entries bound it too: no entry lies between the old low and the smallest entry at or
        # above it, nor between the largest entry below the old high and that high (where high is past +inf,
        # entries at +inf would), so moving an end there leaves its count as it is
        snap_low, snap_high = _bits(smallest), _bits(largest) + 1
        has_entries = torch.isfinite(smallest) & (largest >= 0)
        up = has_entries & (snap_low > new_low)
        down = has_entries & (snap_high < new_high) & (high <= _INF_BITS[dtype])
        low, high = torch.where(up, snap_low, new_low), torch.where(down, snap_high, new_high)
        n_low, n_high = new_n_low, new_n_high
        if all(i in nan_rows or int(high[i] - low[i]) <= 1 for i in live):
            break
        # the next edges: over the window around the interpolated answer where the last window held it and the
        # bracket shrank; where it missed or stalled, evenly spaced patterns over the whole bracket (E − 1 times
        # narrower, whatever the values: the search ends)
        missed = (low < a) | (high > b) | ((high - low) == span)
        span = high - low
        a, b = _window(low, high, n_low, n_high, need, dtype)
        wide = torch.cat([low[:, None], _edges(low, high, EDGES - 2), high[:, None]], 1)
        edges = torch.where(missed[:, None], wide,
                            torch.cat([a[:, None], _spread(a, b, EDGES - 2, dtype), b[:, None]], 1))
        a, b = torch.where(missed, low, a), torch.where(missed, high, b)
    x = _floats(low, dtype)
    n_low, n_high = n_low.tolist(), n_high.tolist()
    # (an open bracket after MAX_PASSES: never, with passes to spare; kthvalue then answers)
    return {i: None if i in nan_rows or int(high[i] - low[i]) > 1 else (x[i], n_low[i], n_high[i]) for i in live}


TIE_BLOCK = 1 << 16             # columns a block when looking for the last tied entry a row keeps


def _equal_per_block_body(blocks: Tensor, thr: Tensor) -> Tensor:
    """[K, nb]: per row k and column block j of `blocks` [K, nb, B], #{d : |τ_k[j, d]| = thr_k} in int32."""
    return (blocks.abs() == thr[:, None, None]).sum(2, dtype=torch.int32)


def tie_cutoffs(tau: Tensor, thr: Tensor, nth: dict[int, int]) -> dict[int, int]:
    """{row i: the column after its nth[i]-th entry (in column order) with |τ_i| = thr_i}: where a row keeps only
    the first nth[i] of the entries tied at its threshold, the columns it keeps them below. One generated pass
    counts each row's tied entries per block of `TIE_BLOCK` columns; the block holding the nth[i]-th is then
    searched alone."""
    k_rows, p = tau.shape
    nb = p // TIE_BLOCK
    if "equal" not in _FNS:
        _FNS["equal"] = torch.compile(_equal_per_block_body, dynamic=True)
    per_block = (_FNS["equal"](tau[:, :nb * TIE_BLOCK].view(k_rows, nb, TIE_BLOCK), thr).long() if nb else
                 torch.zeros(k_rows, 0, dtype=torch.long))
    out = {}
    for i, n in nth.items():
        seen = per_block[i].cumsum(0)
        j = int(torch.searchsorted(seen, n))              # the first block whose running count reaches n
        before = int(seen[j - 1]) if j > 0 else 0
        a = j * TIE_BLOCK
        b = a + TIE_BLOCK if j < nb else p
        at = torch.nonzero(tau[i, a:b].abs() == thr[i]).flatten()
        out[i] = a + int(at[n - before - 1]) + 1
    return out
