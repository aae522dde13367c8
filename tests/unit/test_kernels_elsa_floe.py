"""ELSA's and Floe's kernels against tensors computed by hand."""
import math

import pytest
import torch
from sklearn.covariance import ledoit_wolf

from fedlab.clustering import gaussian_fingerprint, symmetric_kl
from fedlab.comm import CountSketch, client_seed, sketch_for_ratio, ssop_matrix
from fedlab.hetero import aggregate_lora_states, hetero_rank_mean, pad_rank, select_rank, take_rank

# ---- count sketch (Eq. 12–13) -------------------------------------------------------------------------

def _dense(cs: CountSketch) -> torch.Tensor:
    """M[y, z, i] = s_y(i) if h_y(i) = z: compress is x ↦ M x, built entry by entry."""
    m = torch.zeros(cs.rows, cs.cols, cs.dim)
    for y in range(cs.rows):
        for i in range(cs.dim):
            m[y, cs.buckets[y, i], i] = cs.signs[y, i]
    return m


def test_count_sketch_matches_its_dense_matrix_and_median():
    cs = CountSketch(dim=12, rows=3, cols=5, seed=7)
    x = torch.randn(4, 2, 12)
    before = x.clone()
    s = cs.compress(x)
    m = _dense(cs)
    assert s.shape == (4, 2, 3, 5)
    assert torch.allclose(s, torch.einsum("yzi,abi->abyz", m, x), atol=1e-6)
    est = torch.einsum("yzi,abyz->abyi", m, s)           # s_y(i)·S[y, h_y(i)] per row
    assert torch.allclose(cs.decompress(s), est.median(dim=2).values, atol=1e-6)
    assert torch.equal(x, before)


def test_count_sketch_recovers_the_coordinate_of_a_one_sparse_vector_exactly_and_is_seeded():
    # x = v·e_i: every row's bucket h_y(i) holds s_y(i)·v alone, so x̂_i = v (other coordinates may collide)
    cs = CountSketch(dim=50, rows=3, cols=7, seed=1)
    x = torch.zeros(50, 50)
    x[torch.arange(50), torch.arange(50)] = torch.linspace(-3, 3, 50)
    assert torch.allclose(torch.diagonal(cs.decompress(cs.compress(x))), torch.linspace(-3, 3, 50))
    again, other = CountSketch(50, 3, 7, seed=1), CountSketch(50, 3, 7, seed=2)
    assert torch.equal(again.buckets, cs.buckets) and torch.equal(again.signs, cs.signs)
    assert not torch.equal(other.buckets, cs.buckets)
    assert cs.ratio == pytest.approx(50 / 21)


def test_count_sketch_even_rows_take_the_middle_mean_and_errors_name_the_shape():
    cs = CountSketch(dim=6, rows=2, cols=3, seed=0)
    x = torch.randn(6)
    est = torch.einsum("yzi,yz->yi", _dense(cs), cs.compress(x))
    assert torch.allclose(cs.decompress(cs.compress(x)), est.mean(0), atol=1e-6)
    with pytest.raises(ValueError, match="dim 6"):
        cs.compress(torch.randn(5))
    with pytest.raises(ValueError, match="rows"):
        CountSketch(6, 0, 3, 0)


def test_sketch_for_ratio_uses_three_rows():
    cs = sketch_for_ratio(384, 4.2, seed=0)
    assert (cs.rows, cs.cols) == (3, round(384 / (3 * 4.2)))
    assert cs.ratio == pytest.approx(384 / (3 * 30))


# ---- SS-OP (Eq. 10–11) ----------------------------------------------------------------------------------

def test_ssop_by_hand_rank_one():
    # J's top right singular vector is e1, so 𝒬 = U V Uᵀ + I − U Uᵀ = diag(v, 1, 1) with V = [v], v = ±1
    J = torch.tensor([[3.0, 0.0, 0.0], [0.0, 2.0, 0.0]])
    q = ssop_matrix(J, 1, seed=3)
    g = torch.randn(1, 1, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    v = float(torch.sign(g))
    assert torch.allclose(q, torch.diag(torch.tensor([v, 1.0, 1.0])))


def test_ssop_is_orthogonal_rotates_only_the_subspace_and_is_sign_invariant():
    torch.manual_seed(0)
    J = torch.randn(6, 4) @ torch.randn(4, 10)          # rank 4 in R^10
    before = J.clone()
    q = ssop_matrix(J, 3, seed=11).double()
    assert torch.allclose(q.T @ q, torch.eye(10, dtype=torch.float64), atol=1e-5)
    assert torch.equal(J, before)
    _, _, vh = torch.linalg.svd(J.double())
    u = vh[:3].T
    outside = torch.eye(10, dtype=torch.float64) - u @ u.T
    z = outside @ torch.randn(10, dtype=torch.float64)
    assert torch.allclose(q @ z, z, atol=1e-5)                       # complement untouched
    assert torch.allclose(outside @ (q @ u), torch.zeros(10, 3, dtype=torch.float64), atol=1e-5)  # span(U) kept
    assert torch.allclose(ssop_matrix(-J, 3, seed=11), ssop_matrix(J, 3, seed=11), atol=1e-6)
    assert not torch.allclose(ssop_matrix(J, 3, seed=12), ssop_matrix(J, 3, seed=11))
    with pytest.raises(ValueError, match="rank"):
        ssop_matrix(J, 5, seed=0)


def test_client_seed_is_stable():
    assert client_seed("salt", 3) == client_seed("salt", 3) != client_seed("salt", 4)
    assert 0 <= client_seed("x", 0) < 2 ** 63


# ---- fingerprints (Eq. 4–5) -----------------------------------------------------------------------------

def test_fingerprint_by_hand_with_fixed_shrinkage():
    T = torch.tensor([[1.0, 0.0], [3.0, 2.0]], dtype=torch.float64)
    mu, sigma = gaussian_fingerprint(T, shrinkage=0.5)
    # μ = (2, 1); S = ½ Σ (x−μ)(x−μ)ᵀ = [[1, 1], [1, 1]]; Σ = ½ S + ½ diag(S) (+ 1e-6 jitter)
    assert torch.allclose(mu, torch.tensor([2.0, 1.0], dtype=torch.float64))
    assert torch.allclose(sigma, torch.tensor([[1.0, 0.5], [0.5, 1.0]], dtype=torch.float64), atol=1e-5)


def test_fingerprint_ledoit_wolf_matches_scikit_learn_and_is_positive_definite():
    torch.manual_seed(0)
    T = torch.randn(8, 20, dtype=torch.float64) * torch.linspace(0.5, 2, 20, dtype=torch.float64)
    _, sigma = gaussian_fingerprint(T)
    ref, _ = ledoit_wolf(T.numpy())
    assert torch.allclose(sigma, torch.from_numpy(ref), atol=1e-4)
    assert bool((torch.linalg.eigvalsh(sigma) > 0).all())
    T[:, 3] = 1.0                                          # a constant dimension stays positive definite
    assert bool((torch.linalg.eigvalsh(gaussian_fingerprint(T, shrinkage=0.2)[1]) > 0).all())


def test_symmetric_kl_by_hand_and_against_torch_distributions():
    mu1, s1 = torch.zeros(2), torch.eye(2)
    mu2, s2 = torch.tensor([1.0, 0.0]), 2 * torch.eye(2)
    # ½[tr(½I) + tr(2I) − 4 + Δμᵀ(I + ½I)Δμ] = ½[1 + 4 − 4 + 1.5] = 1.25
    assert float(symmetric_kl(mu1, s1, mu2, s2)) == pytest.approx(1.25, abs=1e-6)
    torch.manual_seed(1)
    a, b = torch.randn(5, 5, dtype=torch.float64), torch.randn(5, 5, dtype=torch.float64)
    sa, sb = a @ a.T + torch.eye(5, dtype=torch.float64), b @ b.T + torch.eye(5, dtype=torch.float64)
    ma, mb = torch.randn(5, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    na = torch.distributions.MultivariateNormal(ma, sa)
    nb = torch.distributions.MultivariateNormal(mb, sb)
    ref = torch.distributions.kl_divergence(na, nb) + torch.distributions.kl_divergence(nb, na)
    assert float(symmetric_kl(ma, sa, mb, sb)) == pytest.approx(float(ref), rel=1e-9)
    assert float(symmetric_kl(ma, sa, ma, sa)) == pytest.approx(0.0, abs=1e-9)


# ---- Floe: rank selection (Algorithm 1) ----------------------------------------------------------------

def test_select_rank_largest_that_fits_both_tests_inclusive():
    memory = {4: 1.0, 8: 2.0, 16: 4.0, 32: 8.0, 64: 16.0}
    latency = {4: 1.0, 8: 1.5, 16: 2.0, 32: 3.0, 64: 5.0}
    assert select_rank([4, 8, 16, 32, 64], 8.0, memory, latency, deadline=3.0) == 32   # both ≤, equality fits
    assert select_rank([4, 8, 16, 32, 64], 8.0, memory, latency, deadline=2.9) == 16
    assert select_rank([4, 8, 16, 32, 64], 0.5, memory, latency, deadline=10) is None
    assert select_rank([4, 8, 16, 32, 64], 100, memory, latency, deadline=0.5) is None


def test_select_rank_reads_memory_once_predicts_latency_only_where_memory_fits():
    calls, reads = [], []
    ranks = [8, 4, 64, 8, 16]
    before = list(ranks)

    def free():
        reads.append(1)
        return 4.0

    def lat(r):
        calls.append(r)
        return 10.0 if r == 16 else 1.0

    out = select_rank(ranks, free, lambda r: r / 4, lat, deadline=2.0)
    assert out == 8 and type(out) is int
    assert calls == [16, 8] and len(reads) == 1 and ranks == before


# ---- Floe: heterogeneous ranks ----------------------------------------------------------------------------

def test_hetero_rank_mean_by_hand():
    a1, a2 = torch.tensor([[1.0, 1.0]]), torch.tensor([[3.0, 3.0], [4.0, 4.0]])
    assert torch.allclose(hetero_rank_mean([a1, a2], axis=0), torch.tensor([[2.0, 2.0], [4.0, 4.0]]))
    b1, b2 = torch.tensor([[1.0], [2.0]]), torch.tensor([[3.0, 5.0], [7.0, 9.0]])
    assert torch.allclose(hetero_rank_mean([b1, b2], axis=1), torch.tensor([[2.0, 5.0], [4.5, 9.0]]))
    # weights 1:3 — component 0 mixes, component 1 belongs to client 2 alone
    assert torch.allclose(hetero_rank_mean([a1, a2], axis=0, weights=[1, 3]), torch.tensor([[2.5, 2.5], [4.0, 4.0]]))


def test_pad_and_take_back_preserve_a_clients_delta_w():
    torch.manual_seed(0)
    a, b = torch.randn(4, 10), torch.randn(6, 4)
    ap, bp = pad_rank(a, 0, 16), pad_rank(b, 1, 16)
    assert ap.shape == (16, 10) and bp.shape == (6, 16)
    assert torch.allclose(bp @ ap, b @ a, atol=1e-6)
    back = take_rank({"A": ap, "B": bp, "head": torch.ones(3)}, {"A": 0, "B": 1}, 4)
    assert torch.equal(back["A"], a) and torch.equal(back["B"], b) and torch.equal(back["head"], torch.ones(3))


def test_aggregate_lora_states_mixes_factors_by_rank_and_the_rest_by_mean():
    s1 = {"A": torch.ones(2, 3), "B": torch.ones(4, 2), "bias": torch.zeros(4)}
    s2 = {"A": 3 * torch.ones(4, 3), "B": 3 * torch.ones(4, 4), "bias": 2 * torch.ones(4)}
    out = aggregate_lora_states([s1, s2], {"A": 0, "B": 1})
    assert torch.allclose(out["A"], torch.tensor([[2.0] * 3, [2.0] * 3, [3.0] * 3, [3.0] * 3]))
    assert torch.allclose(out["B"][:, :2], 2 * torch.ones(4, 2)) and torch.allclose(out["B"][:, 2:], 3 * torch.ones(4, 2))
    assert torch.allclose(out["bias"], torch.ones(4))
    assert math.isclose(float(out["A"].sum()), 2 * 3 * 2 + 3 * 3 * 2)
