"""The cost of a run: rounds, bytes and seconds to a target, and a communication budget that ends a run cleanly."""
from __future__ import annotations

import pytest

from conftest import PICO
from fedlab.config import ConfigError, load_config
from fedlab.runtime.cost import Budget, cost_to_target

BASE = PICO + ["data.partition=iid", "data.num_clients=4", "data.tasks=[recall,sentiment]",
               "tracking.enabled=false", "method.name=fedavg", "federation.rounds=4"]
ROUNDS = [{"round": 0, "acc/mean": 0.40, "time/round": 1.0},
          {"round": 1, "acc/mean": 0.50, "bytes/up": 100, "bytes/down": 300, "time/round": 2.0,
           "time/bookkeeping": 0.5},
          {"round": 2, "bytes/up": 100, "bytes/down": 300, "time/round": 2.0},          # not evaluated
          {"round": 3, "acc/mean": 0.71, "bytes/up": 120, "bytes/down": 300, "time/round": 3.0},
          {"round": 4, "acc/mean": 0.90, "bytes/up": 100, "bytes/down": 300, "time/round": 2.0}]


def _run(tmp_path, *extra):
    from fedlab.experiment import run_experiment

    return run_experiment(load_config(None, BASE + [f"output_dir={tmp_path}/runs", *extra]), progress=False)


def test_cost_to_target_by_hand():
    got = cost_to_target(ROUNDS, "acc/mean", 0.7)
    assert got == {"cost/target": 0.7, "cost/reached": 1, "cost/rounds_to_target": 3,
                   "cost/bytes_to_target": 400 + 400 + 420, "cost/seconds_to_target": 1.0 + 2.5 + 2.0 + 3.0}
    assert cost_to_target(ROUNDS, "acc/mean", 0.4)["cost/rounds_to_target"] == 0       # ≥: zero-shot reaches it
    assert cost_to_target(ROUNDS, "acc/mean", 0.95) == {"cost/target": 0.95, "cost/reached": 0}


class _History:
    def __init__(self, rounds):
        self.rounds = rounds


def test_the_budget_stops_before_a_round_that_would_pass_it():
    cfg = load_config(None, BASE + ["federation.comm_budget_mb=0.00125"])           # 1,250 bytes
    history = _History(ROUNDS[:2])
    budget = Budget(cfg, history)
    assert budget.stop_after(ROUNDS[1]) is None                     # 400 spent + 400 next = 800 ≤ 1,250
    history.rounds = ROUNDS[:3]
    why = budget.stop_after(ROUNDS[2])                              # 800 + 400 = 1,200 ≤ 1,250
    assert why is None
    history.rounds = ROUNDS[:4]
    why = budget.stop_after(ROUNDS[3])                              # 1,220 + 420 > 1,250
    assert why.startswith("federation.comm_budget_mb=0.00125: 0.001 MB spent")
    assert Budget(load_config(None, BASE), history).stop_after(ROUNDS[3]) is None     # no budget


@pytest.mark.federation
def test_a_run_ends_cleanly_at_its_budget_and_logs_its_cost_to_target(pico_zoo, tmp_path, capfd):
    full = _run(tmp_path / "full")
    per_round = full.rounds[1]["bytes/up"] + full.rounds[1]["bytes/down"]
    target = full.rounds[2]["acc/mean"]
    h = _run(tmp_path / "b", f"federation.comm_budget_mb={2.5 * per_round / 1e6}", f"eval.target={target}")
    assert [r["round"] for r in h.rounds] == [0, 1, 2]              # a third round would pass 2.5 rounds' bytes
    assert "stopped after round 2 of 4: federation.comm_budget_mb=" in capfd.readouterr().err
    assert h.rounds[-1]["acc/mean"] == full.rounds[2]["acc/mean"]    # the last round was evaluated
    assert h.final["cost/bytes_total"] == 2 * per_round
    first = next(r["round"] for r in full.rounds if r["acc/mean"] >= target)
    assert h.final["cost/reached"] == 1 and h.final["cost/rounds_to_target"] == first
    assert h.final["cost/bytes_to_target"] == first * per_round
    assert "cost/target" not in full.final                          # no target, no budget: no cost figures
    # a fraction of a reference run's final value
    ref = _run(tmp_path / "c", "eval.target=0.5", f"eval.target_reference={full.out_dir}")
    assert ref.final["cost/target"] == pytest.approx(0.5 * full.rounds[-1]["acc/mean"])


def test_target_keys_are_checked():
    with pytest.raises(ConfigError, match="eval.target_reference"):
        load_config(None, BASE + ["eval.target_reference=runs/x"])
    with pytest.raises(ConfigError, match="federation.comm_budget_mb"):
        load_config(None, BASE + ["federation.comm_budget_mb=0"])


def test_an_unreadable_reference_run_is_one_line(pico_zoo, tmp_path):
    (tmp_path / "ref").mkdir()
    (tmp_path / "ref" / "config.yaml").write_text("{}")
    (tmp_path / "ref" / "checkpoint.pt").write_text("not a checkpoint")
    with pytest.raises(ConfigError, match="eval.target_reference: cannot read the run"):
        _run(tmp_path, "eval.target=0.5", f"eval.target_reference={tmp_path / 'ref'}")
