"""The accelerator path of the trimming kernels (fedlab/aggregators/vectorised.py: no per-row loops, two host
syncs per call) keeps exactly the entries the CPU path keeps — ties at the threshold, rows kept whole or
emptied, rows long enough for the sampled bracket, an integer τ — and h_ties / ties equal the CPU kernels up to
the order of the sum over clients. Run on the CPU by forcing the path."""
import kernels_before_blocking as before
import pytest
import torch

from fedlab.aggregators import conflict_scores, h_ties, magnitude_trim, ties, vectorised
from fedlab.aggregators.basic import _keeps, _thresholds


@pytest.fixture
def forced(monkeypatch):
    monkeypatch.setattr(vectorised, "FORCE", True)


def _taus():
    g = torch.Generator().manual_seed(11)
    small = torch.randn(4, 1000, generator=g)
    small[0, ::7] = 0.25                                  # 143 ties, some at the threshold
    small[2] = torch.where(small[2].abs() < 1, torch.zeros_like(small[2]), small[2])
    p = 300_000                                           # > 4 × the sample: the bracketed path
    big = torch.randn(5, p, generator=g) * torch.rand(5, 1, generator=g)
    perm = torch.randperm(p, generator=g)
    big[0, perm[:30_000]] = 2.0 + torch.rand(30_000, generator=g)
    big[0, perm[30_000:120_000]] = -0.5                  # 30 % tie at |0.5|, where the 20 % threshold falls
    big[3, 7] = float("inf")
    return [small, big]


@pytest.mark.parametrize("which", [0, 1])
def test_thresholds_equal_the_cpu_selection(which):
    tau = _taus()[which]
    k = tau.shape[0]
    for keep in (0.2, torch.linspace(0.0, 1.0, k), torch.full((k,), 0.05)):
        counts = _keeps(tau, keep)
        want = _thresholds(tau, counts, 1 << 17)
        got = vectorised.thresholds(tau, counts)
        assert torch.equal(got[0], want[0]) and got[1:] == want[1:], keep


def test_a_misjudged_bracket_falls_back_to_exact_selection():
    """A sample too small to bracket the answer (here: 16 positions for a row whose values all tie but a few)
    still gives the exact threshold and counts."""
    tau = torch.zeros(2, 5000)
    tau[0, :30] = torch.arange(30.0) + 1
    tau[1] = torch.randn(5000, generator=torch.Generator().manual_seed(0))
    counts = [20, 1000]
    want = _thresholds(tau, counts, 1 << 17)
    got = vectorised.thresholds(tau, counts, sample=16)
    assert torch.equal(got[0], want[0]) and got[1:] == want[1:]


def test_trim_and_merges_on_the_forced_path_equal_the_frozen_kernels(forced):
    for tau in _taus():
        k = tau.shape[0]
        tau = tau.clone()
        tau[3 % k, 7] = 1.0                               # h_ties needs finite updates
        for keep in (0.2, torch.linspace(0.0, 1.0, k)):
            assert torch.equal(magnitude_trim(tau, keep), before.magnitude_trim(tau, keep))
        for kw in ({}, {"r0": 0.7, "delta": 0.3}, {"denominator": "all"}):
            torch.testing.assert_close(h_ties(tau, **kw), before.h_ties(tau, **kw), rtol=1e-5, atol=1e-7)
        for w in (None, torch.rand(k, generator=torch.Generator().manual_seed(1))):
            torch.testing.assert_close(ties(tau, weights=w), before.ties(tau, weights=w), rtol=1e-5, atol=1e-7)
        torch.testing.assert_close(conflict_scores(tau), before.conflict_scores(tau) if hasattr(
            before, "conflict_scores") else 1 - torch.sign(tau).sum(0).abs() / k)
    ints = torch.randint(-50, 50, (3, 500), generator=torch.Generator().manual_seed(2))
    assert torch.equal(magnitude_trim(ints, 0.3), before.magnitude_trim(ints, 0.3))


def test_the_path_is_taken_off_the_cpu_only():
    assert not vectorised.wanted(torch.zeros(2, 3))
    assert vectorised.wanted(torch.zeros(2, 3, device="meta"))


def test_force_false_keeps_the_block_loop_everywhere(monkeypatch):
    monkeypatch.setattr(vectorised, "FORCE", False)
    assert not vectorised.wanted(torch.zeros(2, 3, device="meta"))


def test_cosine_on_the_accelerator_path_is_accumulated_in_float64(forced):
    """The forced path's similarities equal a float64 reference to float32 rounding (the blocked float64 Gram
    matrix), zero rows included."""
    from fedlab.aggregators import pairwise_cosine

    g = torch.Generator().manual_seed(4)
    tau = torch.randn(5, (1 << 22) + 77, generator=g)
    tau[1] = tau[0] * 0.3 + tau[1] * 0.01
    tau[4] = 0
    got = pairwise_cosine(tau)
    t = tau.double()
    n = t.norm(dim=1).clamp(min=1e-300)
    want = ((t @ t.T) / (n[:, None] * n[None, :])).float()
    want[4], want[:, 4] = 0, 0
    want.fill_diagonal_(1.0)
    want[4, 4] = 0
    assert (got - want).abs().max() < 2e-7
