"""RoundContext, the method's door to its clients: screening, counting, min_clients, answers as they
arrive — against a scripted backend."""
from __future__ import annotations

import pytest
import torch

from fedlab.comm.messages import ClientFailure, EvalIns, EvalRes, FitIns, FitRes
from fedlab.config import load_config
from fedlab.runtime.context import FederationError, RoundContext


class ScriptedBackend:
    """Answers in a fixed order: `answers[cid]` is a FitRes, a ClientFailure, or a callable of the
    instruction."""

    def __init__(self, answers: dict, order: list[int] | None = None):
        self.answers, self.order, self.sent = answers, order, []

    def stream(self, kind, instructions):
        self.sent.append((kind, sorted(instructions)))
        for cid in self.order or list(instructions):
            if cid in instructions:
                a = self.answers[cid]
                yield cid, a(instructions[cid]) if callable(a) else a


class Method:
    per_client_metrics = ("loss/task",)

    def check_upload(self, res):
        return "wrong keys" if "bad" in (res.state or {}) else None


def ctx_with(backend, *overrides, rnd=1, clients=3):
    cfg = load_config(None, ["tracking.enabled=false", *overrides])
    return RoundContext(rnd, backend, cfg, clients, Method(), tracker=None, out_dir=".")


def ok(cid, rnd=1, loss=1.0, n=10):
    return FitRes(cid, rnd, {"w": torch.ones(2)}, n, {"loss/task": loss, "other": 2.0})


def test_fit_screens_counts_and_averages():
    answers = {0: ok(0, loss=1.0), 1: ok(1, rnd=0), 2: ClientFailure(2, 1, "boom"), 3: ok(3, loss=3.0),
               4: FitRes(4, 1, {"bad": torch.ones(1)}, 1, {}), 5: ok(0)}   # 5 claims to be client 0
    ctx = ctx_with(ScriptedBackend(answers), clients=6)
    ins = {c: FitIns(1, {"w": torch.zeros(2)}, {"k": 1}) for c in range(6)}
    got = ctx.fit(ins)
    assert sorted(got) == [0, 3]
    m = ctx.round_metrics()
    assert m["rejected"] == 3 and m["clients/failed"] == 1 and m["clients/ok"] == 2
    assert m["bytes/down"] == 6 * (8 + 1 + 8)                       # 2 floats + key "k" + one number
    assert m["bytes/up"] == sum(a.nbytes() for c, a in answers.items() if c != 2)
    assert m["loss/task"] == 2.0 and m["loss/task_client_0"] == 1.0 and m["loss/task_client_3"] == 3.0
    assert "other_client_0" not in m and m["other"] == 2.0


def test_min_clients_fails_the_round():
    answers = {0: ok(0), 1: ClientFailure(1, 1, "x"), 2: ClientFailure(2, 1, "y")}
    ctx = ctx_with(ScriptedBackend(answers), "federation.min_clients=2")
    with pytest.raises(FederationError, match=r"only 1 of 3 clients gave a usable answer \(2 failed, 0 rejected\)"):
        ctx.fit({c: FitIns(1) for c in range(3)})
    # fewer asked than min_clients: all of them must answer, no more
    ctx = ctx_with(ScriptedBackend(answers), "federation.min_clients=2")
    assert sorted(ctx.fit({0: FitIns(1)})) == [0]


def test_answers_as_they_arrive():
    backend = ScriptedBackend({c: ok(c) for c in range(3)}, order=[2, 0, 1])
    ctx = ctx_with(backend)
    pending = ctx.submit({c: FitIns(1) for c in range(3)})
    assert sorted(pending.wait(1)) == [2] and not pending.done
    assert sorted(pending.wait(1)) == [0]
    assert sorted(pending.wait()) == [1] and pending.done
    assert sorted(pending.results) == [0, 1, 2] and pending.wait() == {}
    assert ctx.round_metrics()["clients/ok"] == 3


def test_two_exchanges_add_up():
    backend = ScriptedBackend({c: (lambda ins, c=c: ok(c, loss=float(ins.config["p"]))) for c in range(2)})
    ctx = ctx_with(backend, clients=2)
    ctx.fit({c: FitIns(1, None, {"p": 1}) for c in range(2)})
    ctx.fit({0: FitIns(1, None, {"p": 3})})
    m = ctx.round_metrics()
    assert m["loss/task"] == (1 + 1 + 3) / 3 and m["clients/ok"] == 2 and m["rejected"] == 0
    assert m["bytes/down"] == 3 * (1 + 8)


def test_sample_and_evaluate():
    ctx = ctx_with(ScriptedBackend({c: EvalRes(c, 1, {"acc/t": 0.5}) for c in range(4)} | {4: ClientFailure(4, 1, "e")}),
                   "federation.client_fraction=0.5", "seed=3", clients=5)
    s = ctx.sample()
    assert len(s) == 2 and s == sorted(s) and s == ctx_with(None, "federation.client_fraction=0.5", "seed=3",
                                                              clients=5).sample()
    assert sorted(ctx.evaluate({c: EvalIns(1) for c in range(5)})) == [0, 1, 2, 3]
