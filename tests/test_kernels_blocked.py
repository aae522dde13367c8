"""A speed change must not move a number: h_ties and ties equal, bit for bit, the kernels as they were before
their element-wise steps were blocked (tests/kernels_before_blocking.py), on shapes that end mid-block, with
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
