"""Core kernels against tensors computed by hand."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlab.aggregators import fedavg, magnitude_trim, pairwise_cosine
from fedlab.objectives import proximal_penalty


def test_pairwise_cosine_by_hand():
    tau = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [-2.0, 0.0]])
    s = pairwise_cosine(tau)
    r = 1 / math.sqrt(2)
    expected = torch.tensor([[1, r, 0, -1], [r, 1, 0, -r], [0, 0, 0, 0], [-1, -r, 0, 1]])
    assert torch.allclose(s, expected, atol=1e-6)


def test_pairwise_cosine_k1_and_input_untouched():
    tau = torch.tensor([[3.0, -4.0]])
    before = tau.clone()
    assert torch.equal(pairwise_cosine(tau), torch.tensor([[1.0]]))
    assert torch.equal(tau, before)


def test_fedavg_weights_normalised():
    tau = torch.tensor([[1.0, 2.0], [3.0, 6.0]])
    assert torch.allclose(fedavg(tau), torch.tensor([2.0, 4.0]))
    assert torch.allclose(fedavg(tau, torch.tensor([1.0, 3.0])), torch.tensor([2.5, 5.0]))
    assert torch.allclose(fedavg(tau, [2, 6]), torch.tensor([2.5, 5.0]))
    with pytest.raises(ValueError):
        fedavg(tau, torch.tensor([1.0]))


def test_magnitude_trim_by_hand_with_ties():
    tau = torch.tensor([[0.5, -3.0, 2.0, -2.0, 1.0],
                        [1.0, 1.0, 1.0, 1.0, 1.0]])
    # keep ceil(0.6*5) = 3 per row; row 1 is all ties: the lower indices win
    out = magnitude_trim(tau, 0.6)
    assert torch.equal(out, torch.tensor([[0.0, -3.0, 2.0, -2.0, 0.0], [1.0, 1.0, 1.0, 0.0, 0.0]]))
    # tie at the threshold inside a row: |2| twice, only one slot left -> index 2 before index 3
    out = magnitude_trim(tau[:1], 0.4)
    assert torch.equal(out, torch.tensor([[0.0, -3.0, 2.0, 0.0, 0.0]]))


def test_magnitude_trim_per_row_keep_and_edges():
    tau = torch.tensor([[4.0, -1.0, 2.0], [1.0, 5.0, -6.0]])
    out = magnitude_trim(tau, torch.tensor([1 / 3, 0.0]))
    assert torch.equal(out, torch.tensor([[4.0, 0.0, 0.0], [0.0, 0.0, 0.0]]))
    assert torch.equal(magnitude_trim(tau, 1.0), tau)
    # 0.3·10 must keep 3 entries, not 4 (binary rounding of keep·P)
    row = torch.arange(1.0, 11.0)[None]
    assert int((magnitude_trim(row, 0.3) != 0).sum()) == 3
    assert torch.equal(magnitude_trim(torch.zeros(2, 4), 0.5), torch.zeros(2, 4))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 30), st.floats(0.0, 1.0), st.integers(0, 10_000))
def test_magnitude_trim_properties(k, p, keep, seed):
    g = torch.Generator().manual_seed(seed)
    tau = torch.randn(k, p, generator=g).round(decimals=1)  # rounding makes ties common
    before = tau.clone()
    out = magnitude_trim(tau, keep)
    assert torch.equal(tau, before)
    expected = min(p, math.ceil(keep * p - 4 * p * 2.3e-16))
    kept = (out != 0) | ((tau == 0) & (out == 0))
    assert ((out == tau) | (out == 0)).all()
    for i in range(k):
        n = int(kept[i].sum()) if expected == p else int((out[i] != 0).sum())
        assert n <= expected
        if expected:
            assert out[i].abs().max() == tau[i].abs().max()
    assert torch.equal(magnitude_trim(tau, 1.0), tau)


def test_proximal_penalty_value_and_grad():
    params = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    anchor = torch.tensor([0.0, 2.0, 5.0])
    v = proximal_penalty(params, anchor, mu=0.5)
    assert torch.isclose(v, torch.tensor(0.25 * (1 + 0 + 4)))
    v.backward()
    assert torch.allclose(params.grad, 0.5 * (params.detach() - anchor))


def test_topk_pool_and_pooled_kl_by_hand():
    from fedlab.objectives import pooled_kl, topk_pool

    p = torch.tensor([0.1, 0.5, 0.15, 0.25])
    pooled, idx = topk_pool(p, 2)
    assert idx.tolist() == [1, 3]
    assert torch.allclose(pooled, torch.tensor([0.5, 0.25, 0.25]))
    q = torch.tensor([0.4, 0.2, 0.3, 0.1])
    pooled_q, _ = topk_pool(q, 2, idx)
    assert torch.allclose(pooled_q, torch.tensor([0.2, 0.1, 0.7]))
    t, s = torch.log(p), torch.log(q)
    want = 0.5 * math.log(0.5 / 0.2) + 0.25 * math.log(0.25 / 0.1) + 0.25 * math.log(0.25 / 0.7)
    assert abs(float(pooled_kl(t, s, 2)) - want) < 1e-5
    # [B=2, S=3, V]: summed over positions, averaged over the batch
    tb = t.expand(2, 3, 4).clone()
    sb = s.expand(2, 3, 4).clone()
    assert abs(float(pooled_kl(tb, sb, 2)) - 3 * want) < 1e-4
    assert float(pooled_kl(tb, tb, 2)) == pytest.approx(0.0, abs=1e-6)
