"""FedProxy server kernels against examples computed by hand."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlab.aggregators import (
    conflict_scores,
    consensus_weights,
    h_ties,
    heterogeneity,
    pairwise_cosine,
    ties,
)


def test_conflict_scores_by_hand():
    tau = torch.tensor([[1.0, -2.0, 0.0, 3.0], [2.0, -1.0, 0.0, -3.0], [-1.0, -1.0, 0.0, 3.0]])
    assert torch.allclose(conflict_scores(tau), torch.tensor([2 / 3, 0.0, 1.0, 2 / 3]))
    # K = 1: 0 where the entry moved, 1 where it did not (sign(0) = 0)
    assert torch.equal(conflict_scores(torch.tensor([[0.5, 0.0, -2.0]])), torch.tensor([0.0, 1.0, 0.0]))


def test_heterogeneity_and_consensus_by_hand():
    sim = torch.tensor([[1.0, 0.5, -0.2], [0.5, 1.0, 0.1], [-0.2, 0.1, 1.0]])
    h, hn = heterogeneity(sim)
    assert torch.allclose(h, torch.tensor([0.75, 0.7, 0.95]))
    assert torch.allclose(hn, torch.tensor([0.2, 0.0, 1.0]))
    s = torch.tensor([0.7, 0.6, 0.3])
    assert torch.allclose(consensus_weights(sim), torch.exp(s) / torch.exp(s).sum())


def test_k_equals_one_and_all_equal():
    h, hn = heterogeneity(torch.tensor([[1.0]]))
    assert torch.equal(h, torch.zeros(1)) and torch.equal(hn, torch.zeros(1))
    assert torch.equal(consensus_weights(torch.tensor([[1.0]])), torch.ones(1))
    _, hn = heterogeneity(torch.ones(3, 3))
    assert torch.equal(hn, torch.zeros(3))
    tau = torch.tensor([[0.5, -1.0, 0.0]])
    assert torch.allclose(h_ties(tau), tau[0])  # one client: its own update (r = 1, w = 1)


def test_h_ties_by_hand_no_trim():
    tau = torch.tensor([[2.0, -1.0, 1.0], [2.0, 1.0, -1.0]])
    # S = 1/3 both ways, w = [.5, .5]; column 0 is all positive, columns 1–2 balance out (ratio 1 < ρ)
    assert torch.allclose(h_ties(tau, delta=0.0), torch.tensor([2.0, 0.0, 0.0]))


def test_h_ties_by_hand_with_heterogeneity_trim_and_tie():
    tau = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 1.0]])
    # h = [.5, .5, 1] → h_norm = [0, 0, 1]; δ = .5 trims client 2 to one entry; |−1| = |1| tie → index 0 kept
    assert torch.allclose(h_ties(tau, r0=1.0, delta=0.5), torch.tensor([1.0, 0.0]))
    # without the trim, client 2 alone moves entry 1: its weighted value over its weight
    assert torch.allclose(h_ties(tau, r0=1.0, delta=0.0), torch.tensor([1.0, 1.0]))


def test_h_ties_denominator_all_divides_by_every_clients_weight_by_hand():
    tau = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 1.0]])
    c = 2 ** -0.5
    w = torch.softmax(torch.tensor([1 + c, 1 + c, 2 * c]), 0)       # Σ_j≠k |S_kj| with S_02 = S_12 = −1/√2
    # entry 0: the positive side (clients 0, 1) wins; entry 1: client 2 alone moves it
    assert torch.allclose(h_ties(tau, delta=0.0, denominator="all"), torch.tensor([w[0] + w[1], w[2]]))
    assert torch.allclose(h_ties(tau, delta=0.0), torch.tensor([1.0, 1.0]))       # agreeing: the paper's
    with pytest.raises(ValueError, match="agreeing, all"):
        h_ties(tau, denominator="mean")


def test_h_ties_all_zero_updates_and_bad_rho():
    assert torch.equal(h_ties(torch.zeros(3, 5)), torch.zeros(5))
    with pytest.raises(ValueError, match="rho"):
        h_ties(torch.ones(2, 2), rho=0.9)


def test_ties_by_hand():
    tau = torch.tensor([[3.0, -1.0, 0.5], [-2.0, -2.0, 0.1], [1.0, 4.0, -0.2]])
    assert torch.allclose(ties(tau, density=2 / 3), torch.tensor([2.0, 4.0, 0.0]))
    assert torch.allclose(ties(tau, density=2 / 3, weights=torch.tensor([1.0, 3.0, 1.0])),
                          torch.tensor([-2.0, -1.75, 0.0]))


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 40), st.integers(0, 10_000))
def test_kernels_leave_inputs_untouched_and_agreeing_updates_pass(k, p, seed):
    g = torch.Generator().manual_seed(seed)
    tau = torch.randn(k, p, generator=g)
    before = tau.clone()
    for fn in (conflict_scores, pairwise_cosine, h_ties, ties):
        fn(tau)
        assert torch.equal(tau, before)
    # identical clients: H-TIES returns their common update, density-1 TIES too
    same = tau[:1].repeat(k, 1)
    assert torch.allclose(h_ties(same), same[0], atol=1e-6)
    assert torch.allclose(ties(same, density=1.0), same[0], atol=1e-6)
    c = conflict_scores(tau)
    assert ((c >= 0) & (c <= 1)).all()
    assert math.isclose(float(consensus_weights(pairwise_cosine(tau)).sum()), 1.0, rel_tol=1e-5)


@pytest.mark.parametrize("kind", ["normal", "ties", "sparse"])
def test_magnitude_trim_fast_selection_is_exact_on_large_rows(kind):
    from fedlab.aggregators import magnitude_trim

    g = torch.Generator().manual_seed(1)
    p = 300_000                       # above the direct-selection size: the sampled bracket is used
    if kind == "normal":
        tau = torch.randn(5, p, generator=g)
    elif kind == "ties":
        tau = torch.randint(-4, 5, (5, p), generator=g).float()
    else:
        tau = torch.randn(5, p, generator=g) * (torch.rand(5, p, generator=g) < 0.01)
    for keep in (1e-5, 0.013, 0.2, 0.5, 0.999, 1.0):
        got = magnitude_trim(tau, keep)
        c = math.ceil(keep * p - 1e-9)
        # reference: a stable full sort by (−|value|, index)
        order = torch.sort(-tau.abs(), dim=1, stable=True).indices[:, :c]
        want = torch.zeros_like(tau).scatter(1, order, tau.gather(1, order))
        assert torch.equal(got, want), (kind, keep)
