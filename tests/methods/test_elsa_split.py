"""ELSA's split step: the edge as its own party, exact gradients without compression and with
SS-OP (a constant rotation), straight-through sketches, and the bytes that cross counted by hand."""
from __future__ import annotations

import pytest
import torch

from fedlab.comm import CountSketch, ssop_matrix
from fedlab.methods.elsa.split_step import Edge, Link, split_step

B, S, D = 2, 5, 12


def _parts(seed=0):
    torch.manual_seed(seed)
    emb = torch.nn.Embedding(30, D)
    f1, f2, f3 = torch.nn.Linear(D, D), torch.nn.Linear(D, D), torch.nn.Linear(D, 3)
    front = lambda mask, ids: torch.tanh(emb(ids)) * mask[..., None]
    middle = lambda mask, h: torch.tanh(f1(h)) * mask[..., None]
    back = lambda mask, h: f3(torch.tanh(f2(h))[:, 0])          # the [CLS] position → 3 classes
    return (emb, f1, f2, f3), front, middle, back


def _batch():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30, (B, S), generator=g)
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    y = torch.tensor([0, 2])
    return ids, mask, lambda logits: torch.nn.functional.cross_entropy(logits, y)


@pytest.mark.parametrize("rotate", [False, True])
def test_split_step_gradients_equal_the_composed_model(rotate):
    ids, mask, loss_fn = _batch()
    (emb, f1, f2, f3), front, middle, back = _parts()
    q = ssop_matrix(torch.randn(20, D, generator=torch.Generator().manual_seed(2)), 4, seed=9) if rotate else None
    # the reference: one graph, the edge's part running on the rotated activations
    h = front(mask, ids)
    ref = loss_fn(back(mask, middle(mask, h if q is None else h @ q.T)))
    ref.backward()
    want = {n: p.grad.clone() for n, p in zip(("emb", "f1", "f2", "f3"), (emb.weight, f1.weight, f2.weight, f3.weight))}
    for m in (emb, f1, f2, f3):
        m.zero_grad()
    edge = Edge(middle, f1.parameters(), lr=0)          # lr 0: no step, keep the gradients to compare
    loss, sent = split_step(front, back, edge, Link(rotation=q), ids, mask, loss_fn)
    assert float(loss) == pytest.approx(float(ref.detach()), abs=1e-6)
    for n, p in zip(("emb", "f1", "f2", "f3"), (emb.weight, f1.weight, f2.weight, f3.weight)):
        assert torch.allclose(p.grad, want[n], atol=1e-6), n
    # raw floats: up = activations + int8 mask + the downlink's gradient, down = activations + the uplink's gradient
    assert sent.up == 2 * B * S * D * 4 + B * S and sent.down == 2 * B * S * D * 4


def test_sketched_step_sends_the_sketch_and_passes_gradients_straight_through():
    ids, mask, loss_fn = _batch()
    (emb, f1, f2, f3), front, middle, back = _parts()
    sk = CountSketch(D, 3, 2, seed=5)                  # ρ = 12 / 6 = 2
    seen = []
    edge = Edge(lambda m, h: (seen.append(h.detach().clone()), middle(m, h))[1], f1.parameters(), sk, lr=0)
    loss, sent = split_step(front, back, edge, Link(sk), ids, mask, loss_fn)
    assert sent.up == 2 * B * S * 3 * 2 * 4 + B * S and sent.down == 2 * B * S * 3 * 2 * 4
    # what the edge computed on is the decompressed sketch of the client's activations, nothing else
    assert torch.allclose(seen[0], sk.decompress(sk.compress(front(mask, ids).detach())))
    assert emb.weight.grad is not None and float(emb.weight.grad.abs().sum()) > 0
    assert torch.isfinite(loss)


@pytest.mark.parametrize("rotate", [False, True])
def test_sketched_backward_is_straight_through_by_hand(rotate):
    """Every gradient of a sketched step equals the composition written out by hand, with each sketch
    round trip R = decompress ∘ compress applied to the value forward and to the gradient backward (its
    Jacobian taken as the identity), and the SS-OP rotation 𝒬 exact:
        Ĥ = R(H𝒬ᵀ), H₂ = middle(Ĥ), Ĥ₂ = R(H₂), loss = L(back(Ĥ₂));
        g₂ = R(∂L/∂Ĥ₂) into the edge, g₁ = R(J_middle(Ĥ)ᵀ g₂) back to the client, ∂L/∂H = g₁ 𝒬."""
    ids, mask, loss_fn = _batch()
    (emb, f1, f2, f3), front, middle, back = _parts()
    sk = CountSketch(D, 3, 2, seed=5)
    R = lambda x: sk.decompress(sk.compress(x))
    q = ssop_matrix(torch.randn(20, D, generator=torch.Generator().manual_seed(2)), 4, seed=9) if rotate else None
    h = front(mask, ids)
    h_hat = R((h if q is None else h @ q.T).detach()).requires_grad_(True)
    h2 = middle(mask, h_hat)
    h2_hat = R(h2.detach()).requires_grad_(True)
    loss_ref = loss_fn(back(mask, h2_hat))
    loss_ref.backward()                                      # f2, f3 and ∂L/∂Ĥ₂
    h2.backward(R(h2_hat.grad))                              # f1 and ∂L/∂Ĥ
    g1 = R(h_hat.grad)
    h.backward(g1 if q is None else g1 @ q)                  # emb
    want = {n: m.weight.grad.clone() for n, m in zip(("emb", "f1", "f2", "f3"), (emb, f1, f2, f3))}
    assert all(float(w.abs().sum()) > 0 for w in want.values())
    for m in (emb, f1, f2, f3):
        m.zero_grad()
    loss, _ = split_step(front, back, Edge(middle, f1.parameters(), sk, lr=0), Link(sk, rotation=q), ids, mask,
                         loss_fn)
    assert float(loss) == pytest.approx(float(loss_ref), abs=1e-6)
    for n, m in zip(("emb", "f1", "f2", "f3"), (emb, f1, f2, f3)):
        assert torch.allclose(m.weight.grad, want[n], atol=1e-6), n
    # and the sketch is not the identity here, so the straight-through gradient is not the exact one
    (emb2, *_), front2, middle2, back2 = _parts()
    exact = loss_fn(back2(mask, middle2(mask, front2(mask, ids) if q is None else front2(mask, ids) @ q.T)))
    exact.backward()
    assert not torch.allclose(emb2.weight.grad, want["emb"], atol=1e-4)


def test_the_edge_steps_its_own_parameters_only():
    ids, mask, loss_fn = _batch()
    (emb, f1, f2, f3), front, middle, back = _parts()
    before = {n: p.detach().clone() for n, p in (("emb", emb.weight), ("f1", f1.weight))}
    split_step(front, back, Edge(middle, f1.parameters(), lr=0.1), Link(), ids, mask, loss_fn)
    assert not torch.equal(f1.weight, before["f1"]) and torch.equal(emb.weight, before["emb"])
