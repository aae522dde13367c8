"""ELSA's trust, topology and grouping against hand-built cases."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from fedlab.methods.elsa.grouping import affinity, group_clients
from fedlab.methods.elsa.topology import place
from fedlab.methods.elsa.trust import (
    divergence_matrix,
    log_trust,
    paired_divergence_matrix,
    relative_trust,
    trust_terms,
)

# six clients, two edges: clients 0–2 close to edge 0, 3–5 close to edge 1; two behaviour blocks
LAT = np.array([[50, 300], [60, 250], [400, 400], [250, 40], [260, 50], [300, 60]], float)
R = np.array([[0, .1, 5, 5, 5, 5], [.1, 0, 5, 5, 5, 5], [5, 5, 0, 5, 5, 5],
              [5, 5, 5, 0, .1, .1], [5, 5, 5, .1, 0, .1], [5, 5, 5, .1, .1, 0]], float)


def test_grouping_excludes_matches_and_every_client_is_in_one_group():
    trust = np.array([1, 1, 1, 1, 1, 0.05])
    g = group_clients(trust, R, LAT, LAT <= 200, w_excl=0.1, w_min=0.3)
    assert g.excluded == {2: "no feasible edge", 5: "low trust"}
    assert g.groups == {0: [0, 1], 1: [3, 4]}
    members = [c for m in g.groups.values() for c in m]
    assert sorted(members) == [0, 1, 3, 4] and len(members) == len(set(members))


def test_a_member_its_groups_edge_cannot_reach_moves_to_its_nearest_feasible_edge():
    # client 1 behaves like clients 3–5 but only edge 0 reaches it
    lat = LAT.copy()
    lat[1] = [60, 250]
    r = R.copy()
    r[1, :] = r[:, 1] = [5, 0, 5, .1, .1, .1]
    r[1, 1] = 0
    g = group_clients(np.ones(6), r, lat, lat <= 200, w_excl=0.1, w_min=0.3)
    assert 1 in g.groups[0] and (1, 1, 0) in g.moved


def test_a_low_trust_group_merges_into_the_nearest_trusted_group():
    trust = np.array([0.2, 0.2, 0.2, 1, 1, 1])        # the group at edge 0 has mean trust 0.2 < w_min
    lat = LAT.copy()
    lat[:, :] = np.minimum(lat, 190)                    # every edge reaches everyone (client 2 included)
    g = group_clients(trust, R, lat, lat <= 200, w_excl=0.1, w_min=0.3)
    assert g.merged and all(trust[m].mean() >= 0.3 for m in g.groups.values())
    assert sorted(c for m in g.groups.values() for c in m) == list(range(6))


def test_affinity_and_trust_by_hand():
    a = affinity(np.array([1.0, 0.5]), np.array([[0, 2.0], [2.0, 0]]), gamma=0.5)
    assert np.allclose(a, [[1, 0.5 * np.exp(-1)], [0.5 * np.exp(-1), 0.25]])
    t = [torch.tensor([[3.0, 4.0], [0.0, 2.0]]), torch.tensor([[1.0, 0.0], [0.0, 1.0]])]
    div = torch.tensor([[0.0, 0.6], [0.6, 0.0]], dtype=torch.float64)
    # mean 1/‖T‖: (1/5 + 1/2)/2 = 0.35 and 1; minus the mean divergence to the other client, 0.6
    assert torch.allclose(log_trust(t, div), torch.tensor([-0.95, -1.6], dtype=torch.float64))
    assert torch.allclose(relative_trust(torch.tensor([-0.95, -1.6])), torch.tensor([1.0, float(np.exp(-0.65))]))


def test_trust_is_lowest_for_the_client_whose_embeddings_drift():
    g = torch.Generator().manual_seed(0)
    emb = [torch.randn(40, 8, generator=g) + 3.0 for _ in range(5)]
    emb.append(torch.randn(40, 8, generator=g) * 2 + torch.tensor([6.0, 0, 0, 0, 0, 0, 0, -2.0]))
    div = divergence_matrix(emb)
    w = relative_trust(log_trust(emb, div))
    assert int(w.argmin()) == 5 and float(w[5]) < 0.5 * float(w[:5].min())
    assert torch.allclose(divergence_matrix(emb, scale="raw"), div * 8)
    med = divergence_matrix(emb, scale="median")
    off = div[~torch.eye(6, dtype=torch.bool)]
    assert torch.allclose(med, div / off.median()) and float(med[~torch.eye(6, dtype=torch.bool)].median()) == 1.0
    with pytest.raises(ValueError, match="median, per_dim, raw"):
        divergence_matrix(emb, scale="log")


def test_entropy_confidence_by_hand_and_the_diffuse_predictor_is_least_trusted():
    """fingerprint=predictions: c_n is the mean prediction entropy of the log-probabilities; a client whose
    predictions on the probes are spread over the classes (trained on flipped labels) gets the lowest trust."""
    half = torch.log(torch.tensor([[0.5, 0.5], [1.0, 1e-30]], dtype=torch.float64))
    div = torch.zeros(2, 2, dtype=torch.float64)
    # entropies: ln 2 and 0 → mean ln(2)/2; the second client a single confident row: 0
    got = log_trust([half, torch.log(torch.tensor([[1.0, 1e-30]], dtype=torch.float64))], div, "entropy")
    assert torch.allclose(got, torch.tensor([-np.log(2) / 2, 0.0], dtype=torch.float64), atol=1e-12)
    g = torch.Generator().manual_seed(0)
    labels = torch.randint(0, 4, (64,), generator=g)

    def client(sharp: float) -> torch.Tensor:     # log-probabilities peaked on the probe's class by `sharp`
        logits = torch.randn(64, 4, generator=g) * 0.3 + sharp * torch.nn.functional.one_hot(labels, 4)
        return torch.log_softmax(logits, -1)

    preds = [client(4.0) for _ in range(6)] + [client(1.0), client(0.8)]
    w = relative_trust(log_trust(preds, divergence_matrix(preds, scale="median"), "entropy"))
    assert set(torch.argsort(w)[:2].tolist()) == {6, 7}
    with pytest.raises(ValueError, match="entropy, inverse_norm"):
        log_trust(preds, divergence_matrix(preds), "norm")


def test_paired_divergence_by_hand():
    """R(n, n') = mean_j Σ_y (p_n − p_n')(log p_n − log p_n'): the symmetric KL of each shared probe, averaged."""
    a = torch.log(torch.tensor([[0.5, 0.5], [0.5, 0.5]], dtype=torch.float64))
    b = torch.log(torch.tensor([[0.9, 0.1], [0.5, 0.5]], dtype=torch.float64))
    # probe 0: (0.5 − 0.9)(ln 0.5 − ln 0.9) + (0.5 − 0.1)(ln 0.5 − ln 0.1) = 0.4 ln(9/5) + 0.4 ln 5; probe 1: 0
    r = 0.5 * (0.4 * np.log(9 / 5) + 0.4 * np.log(5))
    raw = paired_divergence_matrix([a, b, a], scale="raw")
    assert torch.allclose(raw, torch.tensor([[0, r, 0], [r, 0, r], [0, r, 0]], dtype=torch.float64))
    assert torch.allclose(paired_divergence_matrix([a, b, a], scale="per_dim"), raw / 2)     # C = 2 classes
    assert torch.allclose(paired_divergence_matrix([a, b, a, b], scale="median"),
                          paired_divergence_matrix([a, b, a, b], scale="raw") / r)
    with pytest.raises(ValueError, match="same probes"):
        paired_divergence_matrix([a, b[:1]])
    ruled_out = torch.log(torch.tensor([[1.0, 0.0], [0.5, 0.5]], dtype=torch.float64))       # log 0 = −inf
    with pytest.raises(ValueError, match="must be finite"):
        paired_divergence_matrix([a, ruled_out])
    with pytest.raises(ValueError, match="median, per_dim, raw"):
        paired_divergence_matrix([a, b], scale="log")


def test_the_gaussian_fingerprint_cannot_tell_which_probe_got_which_answer_the_paired_divergence_can():
    """Client 1 gives client 0's answers to other probes (the same answers, shuffled): their Gaussians over the
    probes are the same, so the Gaussian R is 0 while the paired R is the largest of the three pairs."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 4, generator=g, dtype=torch.float64) * 3
    p0 = torch.log_softmax(logits, -1)
    p1 = p0[torch.randperm(64, generator=g)]
    p2 = torch.log_softmax(logits + 0.3 * torch.randn(64, 4, generator=g, dtype=torch.float64), -1)
    gauss = divergence_matrix([p0, p1, p2], scale="raw", shrinkage=0.1)
    paired = paired_divergence_matrix([p0, p1, p2], scale="raw")
    assert float(gauss[0, 1]) < 1e-9 < float(gauss[0, 2])
    assert float(paired[0, 1]) > float(paired[0, 2]) > 0


def test_trust_terms_are_what_log_trust_subtracts():
    preds = [torch.log(torch.tensor([[0.5, 0.5], [0.9, 0.1]], dtype=torch.float64)),
             torch.log(torch.tensor([[0.8, 0.2], [0.9, 0.1]], dtype=torch.float64))]
    div = paired_divergence_matrix(preds, scale="raw")
    conf, others = trust_terms(preds, div, "entropy")
    h = lambda *p: -sum(x * np.log(x) for x in p)
    assert torch.allclose(conf, torch.tensor([(h(.5, .5) + h(.9, .1)) / 2, (h(.8, .2) + h(.9, .1)) / 2],
                                             dtype=torch.float64))
    assert torch.allclose(others, torch.tensor([div[0, 1], div[0, 1]]))
    assert torch.allclose(log_trust(preds, div, "entropy"), -conf - others)


def test_rank_metrics_by_hand():
    from fedlab.methods.elsa.method import rank_metrics

    score = [0.9, 0.1, 0.5, 0.3, 0.8]        # clients 1 and 3 mislabeled
    assert rank_metrics(score, {1, 3}) == {"trust/recall_at_m": 1.0, "trust/auc_low": 1.0}
    # mislabeled {1, 4}: the two lowest are 1 and 3 → recall 1/2; of the 6 (mislabeled, clean) pairs, 0.1 is
    # below all three clean scores and 0.8 below 0.9 only → AUC 4/6
    assert rank_metrics(score, {1, 4}) == {"trust/recall_at_m": 0.5, "trust/auc_low": pytest.approx(4 / 6)}
    assert rank_metrics([0.2, 0.4], {0, 1}) == {"trust/recall_at_m": 1.0}     # no clean client: no AUC


def test_topology_is_seeded_and_feasibility_follows_tau_max():
    a, b = place(20, 4, seed=3), place(20, 4, seed=3)
    assert np.array_equal(a.latency_ms, b.latency_ms) and a.clients.shape == (20, 2)
    assert (a.clients >= 0).all() and (a.clients <= 8).all()
    assert np.array_equal(a.feasible, a.latency_ms <= 200)
    dist = np.linalg.norm(a.clients[:, None] - a.edges[None], axis=-1)
    assert ((a.latency_ms - 20 - 25 * dist >= 0) & (a.latency_ms - 20 - 25 * dist <= 20)).all()


def test_communication_model_eq_14_15_by_hand():
    from fedlab.methods.elsa.comm_model import client_seconds, round_bytes, total_seconds

    # ϱ = 2, ζ = 4, μ = 16, D = 8, ρ = 4: per unit of batch 2·2·4·16·8/4 = 512 bytes; batches 2 and 3 → 2560;
    # two edges with 100 LoRA parameters: + 200 (as printed) or + 800 bytes
    assert round_bytes([2, 3], 2, 16, 8, 4.0, 100, 2) == 2560 + 200
    assert round_bytes([2, 3], 2, 16, 8, 4.0, 100, 2, lora_bytes=True) == 2560 + 800
    t = client_seconds(3, 2, 16, 8, 4.0, bandwidth_bytes_s=1536)       # 1536 bytes at 1536 B/s
    assert t == pytest.approx(1.0) and total_seconds(5, [0.5, t]) == pytest.approx(5.0)


def test_a_rounds_link_time_is_the_slowest_client_or_their_sum_when_they_take_turns():
    from fedlab.methods.elsa.comm_model import round_seconds

    assert round_seconds([0.5, 2.0, 1.0]) == 2.0                     # clients side by side under their edges
    assert round_seconds([0.5, 2.0, 1.0], sequential=True) == 3.5    # Simple SL: one at a time on the cloud
    assert round_seconds([], sequential=True) == 0.0


def test_privacy_metrics_by_hand_and_the_protections_order():
    from fedlab.comm import CountSketch, ssop_matrix
    from fedlab.methods.elsa.privacy_eval import protect, reconstruction, token_accuracy

    h = torch.tensor([[[1.0, 0.0], [0.0, 2.0]]])
    v = torch.tensor([[[1.0, 1.0], [0.0, -2.0]]])
    got = reconstruction(h, v)
    assert got["cos"] == pytest.approx((2 ** -0.5 - 1) / 2) and got["mse"] == pytest.approx((0.5 + 8) / 2)
    table = torch.eye(4)
    ids = torch.tensor([[0, 3]])
    assert token_accuracy(torch.tensor([[[0.9, 0.1, 0, 0], [0, 1, 0, 0.2]]]), ids, table) == 0.5
    # a model whose layer-p states are its input embeddings: direct recovers every token; SS-OP + sketch hides them
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(50, 32, generator=g)
    ids = torch.randint(0, 50, (4, 16), generator=g)
    hs = emb[ids]
    sk = CountSketch(32, 3, 4, seed=1)
    rot = ssop_matrix(hs.reshape(-1, 32), 8, seed=7)
    acc = {k: token_accuracy(protect(hs, k, sk, rot), ids, emb) for k in ("direct", "noise", "sketch", "ssop_sketch")}
    assert acc["direct"] == 1.0 and acc["direct"] >= acc["noise"] > acc["sketch"] >= acc["ssop_sketch"]
    assert reconstruction(hs, protect(hs, "ssop_sketch", sk, rot))["cos"] < reconstruction(hs, protect(hs, "sketch", sk))["cos"]
    with pytest.raises(ValueError, match="direct, noise, sketch, ssop_sketch"):
        protect(hs, "dp")


def test_hierarchical_aggregation_by_hand():
    from fedlab.methods.elsa.aggregate import cloud_weights, edge_average, state_distance, weighted_average

    s1, s2 = {"a": torch.tensor([1.0, 0.0])}, {"a": torch.tensor([0.0, 4.0])}
    assert torch.allclose(edge_average([s1, s2], [1, 3])["a"], torch.tensor([0.25, 3.0]))
    trust = np.array([1.0, 0.5, 0.8, 0.6])
    div = np.array([[0, 2.0, 0, 0], [2.0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0]])
    # edge 0: clients 0, 1 → w̄ = 0.75, R̄ = 2 → α = 0.25; edge 1: client 2 alone → α = 0.8 / 1
    got = cloud_weights({0: [0, 1], 1: [2]}, trust, div)
    assert got[0] == pytest.approx(0.25 / 1.05) and got[1] == pytest.approx(0.8 / 1.05)
    g = weighted_average([s1, s2], [got[0], got[1]])
    assert torch.allclose(g["a"], torch.tensor([got[0], 4 * got[1]]))
    assert state_distance(s1, s2) == pytest.approx(17 ** 0.5)
    with pytest.raises(ValueError, match="2 states, 1 weights"):
        weighted_average([s1, s2], [1.0])
