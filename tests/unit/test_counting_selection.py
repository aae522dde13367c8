"""The trimming threshold found by generated counting passes (fedlab/aggregators/counting.py): the same
threshold and counts as the block loop's selection (`basic._thresholds`), bit for bit, on updates with ties,
zeros, infinities, NaN and rows that keep one entry, all but one or none; the column cutoff of a row's tied
entries by hand across blocks."""
from __future__ import annotations

import pytest
import torch

from fedlab import compiled
from fedlab.aggregators import basic, counting


@pytest.fixture
def counting_on():
    compiled.set_mode("on")
    if not counting.wanted(torch.ones(2, 3)):
        compiled.set_mode(None)
        pytest.skip("torch.compile cannot build kernels on this machine (the block loop selects instead)")
    yield
    compiled.set_mode(None)


def _cases() -> dict[str, tuple[torch.Tensor, list[int]]]:
    g = torch.Generator().manual_seed(0)
    p = 40_003                       # above 4 × counting.SAMPLE: the sampled bracket is used
    dense = torch.randn(6, p, generator=g) * torch.rand(6, 1, generator=g)
    grid = (torch.randn(5, p, generator=g) * 4).round() / 4           # thousands tie at every threshold
    sparse = torch.where(torch.rand(4, p, generator=g) < 0.9, 0.0, torch.randn(4, p, generator=g))
    odd = torch.randn(4, p, generator=g)
    odd[0, :3] = float("inf")
    odd[1, 10] = float("nan")
    odd[2, :100] = 1e-40                                               # subnormal magnitudes
    odd[3, ::2] = float("nan")                         # half NaN: it keeps more than the row's numbers
    return {
        "dense, a fifth kept": (dense, [p // 5] * 6),
        "dense, the extremes": (dense, [1, p - 1, p, 0, 2, p - 4]),
        "ties at the threshold": (grid, [p // 5, p // 3, p // 2, 7, p - 9]),
        "mostly zeros": (sparse, [p // 20, p // 5, p // 2, p - 1]),
        "inf, NaN, subnormals": (odd, [2, 1000, p - 50, p // 2 + 100]),
        "float64": (torch.randn(3, p, generator=g, dtype=torch.float64), [p // 5, 1, p - 1]),
        "a short row": (torch.randn(3, 1_001, generator=g), [100, 1, 1_000]),
    }


@pytest.mark.parametrize("name", list(_cases()))
def test_counting_finds_the_block_loops_threshold_and_counts(name, counting_on):
    tau, counts = _cases()[name]
    want = basic._thresholds(tau, counts, 1 << 17)
    got = basic.row_thresholds(tau, counts)
    assert torch.equal(got[0], want[0]), (got[0], want[0])
    assert got[1] == want[1] and got[2] == want[2]


def test_the_search_ends_within_a_few_passes(counting_on, monkeypatch):
    """Each pass narrows every row's bracket around its interpolated answer (or, where that missed or stalled,
    E − 1 times over evenly spaced patterns): the dense and tied rows above end within 8 passes."""
    passes = []
    at_least = counting._at_least
    monkeypatch.setattr(counting, "_at_least", lambda *a: passes.append(1) or at_least(*a))
    for name in ("dense, a fifth kept", "dense, the extremes", "ties at the threshold", "mostly zeros"):
        passes.clear()
        tau, counts = _cases()[name]
        basic.row_thresholds(tau, counts)
        assert 1 <= len(passes) <= 8, (name, len(passes))


def test_the_cutoff_is_the_column_after_the_nth_tied_entry_across_blocks(counting_on):
    p = 3 * counting.TIE_BLOCK + 17
    tau = torch.zeros(3, p)
    ties = {0: [5, counting.TIE_BLOCK + 1, 2 * counting.TIE_BLOCK + 3, p - 1],   # one per block and the tail
            1: [p - 3, p - 2], 2: list(range(0, p, 1000))}
    for i, cols in ties.items():
        tau[i, cols] = torch.tensor([(-1) ** c * 0.5 for c in cols])
    thr = torch.full((3,), 0.5)
    got = counting.tie_cutoffs(tau, thr, {0: 3, 1: 2, 2: 40})
    assert got == {0: 2 * counting.TIE_BLOCK + 4, 1: p - 1, 2: 39_001}


def test_selection_counts_only_where_compiling_is_on(monkeypatch):
    compiled.set_mode("off")
    try:
        assert not counting.wanted(torch.ones(2, 3))
        compiled.set_mode("auto")
        assert not counting.wanted(torch.ones(2, 3))               # small: the block loop
        assert not counting.wanted(torch.ones(2, 3, dtype=torch.float16))
    finally:
        compiled.set_mode(None)
