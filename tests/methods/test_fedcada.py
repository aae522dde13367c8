"""FedCAda's optimiser (fedlab/methods/elsa/fedcada.py) against Adam and by hand, its moments carried across
rounds, and ELSA's FedCAda baseline end to end on a pico model."""
from __future__ import annotations

import pytest
import torch

from fedlab.methods.elsa.fedcada import FedCAda, average_moments


def _grads(steps):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(3, 2, generator=g) for _ in range(steps)]


def _run(opt_fn, grads, start):
    p = torch.nn.Parameter(start.clone())
    opt = opt_fn([p])
    for g in grads:
        p.grad = g.clone()
        opt.step()
    return p.detach(), opt


def test_gamma_zero_with_fresh_moments_is_adamw():
    start, grads = torch.ones(3, 2), _grads(5)
    a, _ = _run(lambda ps: torch.optim.AdamW(ps, lr=0.1, betas=(0.9, 0.99), eps=1e-8, weight_decay=0.01), grads, start)
    b, _ = _run(lambda ps: FedCAda(ps, ["w"], lr=0.1, round=3, gamma=0.0, betas=(0.9, 0.99), weight_decay=0.01),
                grads, start)
    assert torch.allclose(a, b, atol=1e-6)


def test_one_step_by_hand_with_the_round_correction():
    # g = 2 on a scalar, fresh moments, round r = 2, γ = 1: m = 0.2, v = 0.04 (β 0.9 / 0.99),
    # m̂ = 0.2 / (0.1 + 0.5), v̂ = 0.04 / (0.01 + 0.5); θ = 1 − lr·m̂/(√v̂ + ε)
    p, _ = _run(lambda ps: FedCAda(ps, ["w"], lr=0.1, round=2, gamma=1.0, betas=(0.9, 0.99), eps=0.0),
                [torch.tensor(2.0)], torch.tensor(1.0))
    expected = 1 - 0.1 * (0.2 / 0.6) / (0.04 / 0.51) ** 0.5
    assert float(p) == pytest.approx(expected, rel=1e-6)
    # later rounds correct less: the same step at r = 100 moves θ further (the adjustment fades)
    q, _ = _run(lambda ps: FedCAda(ps, ["w"], lr=0.1, round=100, gamma=1.0, betas=(0.9, 0.99), eps=0.0),
                [torch.tensor(2.0)], torch.tensor(1.0))
    assert float(q) < float(p)


def test_moments_carried_across_rounds_continue_where_they_stopped():
    start, grads = torch.ones(3, 2), _grads(6)
    whole, _ = _run(lambda ps: FedCAda(ps, ["w"], lr=0.05, round=1, gamma=0.0), grads, start)
    half, opt = _run(lambda ps: FedCAda(ps, ["w"], lr=0.05, round=1, gamma=0.0), grads[:3], start)
    sent = opt.export()
    assert sent["k"] == 3 and set(sent["m"]) == {"w"}
    rest, _ = _run(lambda ps: FedCAda(ps, ["w"], lr=0.05, round=1, gamma=0.0, moments=sent), grads[3:], half)
    assert torch.allclose(whole, rest, atol=1e-6)


def test_average_moments_by_weight():
    a = {"m": {"w": torch.tensor([1.0])}, "v": {"w": torch.tensor([4.0])}, "k": 2}
    b = {"m": {"w": torch.tensor([3.0])}, "v": {"w": torch.tensor([0.0])}, "k": 6}
    out = average_moments([a, b], [1.0, 3.0])
    assert float(out["m"]["w"]) == 2.5 and float(out["v"]["w"]) == 1.0 and out["k"] == 5
    with pytest.raises(ValueError):
        FedCAda([torch.nn.Parameter(torch.ones(1))], ["w"], lr=0.1, round=0)
