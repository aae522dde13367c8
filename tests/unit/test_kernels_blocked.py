"""A speed change must not move a number: h_ties and ties equal, bit for bit, the kernels as they were before
their element-wise steps were blocked (tests/unit/kernels_before_blocking.py), on shapes that end mid-block, with
ties at the trimming threshold, several retentions, both denominators and client weights."""
import kernels_before_blocking as before
import pytest
import torch

from fedlab.aggregators import h_ties, ties


@pytest.mark.parametrize("k,p", [(1, 7), (3, 10), (4, 1000), (8, 70_001), (5, 300_000)])
def test_blocked_kernels_equal_the_frozen_ones_bit_for_bit(k, p):
    g = torch.Generator().manual_seed(k * 1000 + p)
    tau = torch.randn(k, p, generator=g) * torch.rand(k, 1, generator=g)
    if k > 1:
        tau[1] = tau[0] * 0.5 + tau[1] * 0.1          # two agreeing clients: retention below 1 for the others
    tau[0, :40] = 0.5                                  # ties at the trimming threshold
    for kw in ({}, {"r0": 0.7, "delta": 0.3}, {"rho": 1.0}, {"denominator": "all"}):
        assert torch.equal(h_ties(tau, **kw), before.h_ties(tau, **kw)), kw
    for density in (0.2, 1.0):
        for w in (None, torch.rand(k, generator=g)):
            assert torch.equal(ties(tau, density=density, weights=w), before.ties(tau, density=density, weights=w))


@pytest.mark.parametrize("block", [3, 64, None])
def test_trimming_block_by_block_equals_the_frozen_magnitude_trim(block):
    """The trimmed updates as h_ties and ties consume them (column blocks, no [K, P] buffer) are the frozen
    magnitude_trim bit for bit, with ties at the threshold spread over several blocks (the running count of
    equal entries carries across blocks), rows kept whole, emptied, and an integer τ."""
    from fedlab.aggregators import magnitude_trim
    from fedlab.aggregators.basic import _keeps, trimmed_blocks

    g = torch.Generator().manual_seed(3)
    tau = torch.randn(4, 1000, generator=g)
    tau[0, ::7] = 0.25                        # 143 entries tie, across many blocks
    tau[2] = torch.where(tau[2].abs() < 1, torch.zeros_like(tau[2]), tau[2])      # mostly zeros
    for keep in (0.2, torch.tensor([0.9, 0.0, 1.0, 0.5]), torch.tensor([0.05, 0.3, 0.7, 1.0])):
        counts = _keeps(tau, keep)
        got = torch.cat([blk.clone() for _, _, blk in trimmed_blocks(tau, counts, block)], dim=1)
        want = before.magnitude_trim(tau, keep)
        assert torch.equal(got, want) and torch.equal(magnitude_trim(tau, keep), want), keep
    ints = torch.randint(-50, 50, (3, 500), generator=g)
    assert torch.equal(magnitude_trim(ints, 0.3), before.magnitude_trim(ints, 0.3))


def test_the_kernels_allocate_no_k_by_p_buffer():
    """h_ties and ties stream the trimmed updates block by block: a fresh process's peak resident memory grows
    by a small share of τ's size during either kernel, where the earlier kernels' [K, P] buffers of magnitudes
    and trimmed updates added about 2× τ."""
    import subprocess
    import sys

    code = """
import resource, torch
from fedlab.aggregators import h_ties, ties
torch.set_num_threads(1)
tau = torch.randn(8, 8_000_000)
h_ties(tau[:, :1000]); ties(tau[:, :1000])          # warm-up: libraries' own buffers
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
h_ties(tau); ties(tau)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) * 1024 / (tau.numel() * 4))
"""
    grew = float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert grew < 0.5, f"peak memory grew by {grew:.2f}× τ's size"


def test_sampled_selection_with_ties_at_the_threshold_across_blocks_and_a_grown_bracket():
    """Rows long enough for the sampled bracket (P > 4 × the sample), ties exactly at the threshold spread over
    many blocks (the bracket then holds far more values than the sample promised: its buffer grows), a row
    kept whole, an emptied one holding +inf: the frozen kernels' values, block by block and whole."""
    from fedlab.aggregators import magnitude_trim
    from fedlab.aggregators.basic import _keeps, trimmed_blocks

    g = torch.Generator().manual_seed(5)
    p = 100_000
    tau = torch.randn(4, p, generator=g) * 0.1
    big = torch.randperm(p, generator=g)
    tau[0, big[:10_000]] = 2.0 + torch.rand(10_000, generator=g)      # 10 % large
    tau[0, big[10_000:40_000]] = -0.5                                 # 30 % tie at |0.5|: the 20 % threshold
    tau[3, 7] = float("inf")
    keep = torch.tensor([0.2, 0.6, 1.0, 0.0])
    counts = _keeps(tau, keep)
    want = before.magnitude_trim(tau, keep)
    got = torch.cat([blk.clone() for _, _, blk in trimmed_blocks(tau, counts, 1000)], dim=1)
    assert torch.equal(got, want) and torch.equal(magnitude_trim(tau, keep), want)
    kept0 = torch.nonzero(got[0]).squeeze(1)
    assert len(kept0) == 20_000 and (got[0][got[0] == -0.5]).numel() == 10_000      # the lowest-index ties
    assert torch.equal(h_ties(tau[:3]), before.h_ties(tau[:3])) and torch.equal(ties(tau[:3]), before.ties(tau[:3]))


def test_empty_updates():
    """K clients with P = 0 parameters, and K = 0: empty results, no error (the frozen kernels' behaviour)."""
    for shape in ((3, 0), (0, 5)):
        tau = torch.zeros(shape)
        assert h_ties(tau).shape == (shape[1],) and ties(tau).shape == (shape[1],)
