"""Where a run's time went — client fits, server, evaluation, bookkeeping — summed over its
rounds, logged to MLflow and printed under the closing table."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
RUN = PICO + ["method.name=fedavg", "data.partition=iid", "data.num_clients=3", "data.tasks=[recall,sentiment]"]


@pytest.mark.federation
def test_the_time_split_covers_the_run_and_reaches_mlflow(pico_zoo, tmp_path):
    import mlflow

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + [f"tracking.uri=sqlite:///{tmp_path}/m.db",
                                                                 f"tracking.artifact_root={tmp_path}/a",
                                                                 f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    parts = {k: v for k, v in h.final.items() if k.startswith("time/total_")}
    assert set(parts) == {"time/total_clients", "time/total_server", "time/total_eval", "time/total_bookkeeping"}
    assert all(v >= 0 for v in parts.values())
    # the clients' fits are most of a FedAvg round; the parts add up to the run's time but for what falls between
    # the timers
    assert parts["time/total_clients"] > parts["time/total_server"]
    assert 0.8 * h.final["time/total"] <= sum(parts.values()) <= h.final["time/total"]
    per_round = lambda k: sum(r.get(f"time/{k}", 0.0) for r in h.rounds)        # noqa: E731
    assert {"time/clients", "time/server"} <= set(h.rounds[0])     # the method's start, beside the zero-shot scores
    assert per_round("clients") == parts["time/total_clients"] and per_round("server") == parts["time/total_server"]
    # the rounds' logging (MLflow on SQLite here) is bookkeeping; the end-of-run models are evaluation
    assert parts["time/total_bookkeeping"] > per_round("bookkeeping")
    assert parts["time/total_eval"] > per_round("eval")
    # every multiple-choice task's answer share (the constant-answer check) reaches the run's record
    assert 0 < h.final["top/task_recall"] <= 1 and 0.5 <= h.final["top/task_sentiment"] <= 1
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    logged = mlflow.MlflowClient().get_run(h.run_id).data.metrics
    assert logged["time/total_clients"] == parts["time/total_clients"]


@pytest.mark.federation
def test_fedlab_run_prints_the_time_split(pico_zoo, tmp_path, capsys):
    from fedlab.cli import main

    code = main(["run", str(ROOT / "experiments/defaults.yaml"), *RUN, "tracking.enabled=false",
                 f"output_dir={tmp_path}/runs"])
    out = capsys.readouterr().out
    assert code == 0
    line = next(ln for ln in out.splitlines() if ln.startswith("time: "))
    assert "client fits" in line and "evaluation" in line and "checkpoints and logging" in line
