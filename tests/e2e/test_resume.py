"""Resume after SIGKILL: a real `fedlab run` process is killed mid-round; `resume=true`
continues the same MLflow run and ends with the same metrics as an uninterrupted run."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
# rounds long enough (~1 s) that a kill 0.4 s after a round was logged lands inside the next one
RUN = PICO + ["federation.rounds=4", "method.name=standalone", "data.partition=iid", "data.num_clients=3",
              "data.tasks=[recall,sentiment]", "data.train_per_task=64", "federation.local_epochs=3"]


def _tracking(tmp: Path) -> list[str]:
    return [f"tracking.uri=sqlite:///{tmp}/mlflow.db", f"tracking.artifact_root={tmp}/artifacts",
            f"output_dir={tmp}/runs", "tracking.run_name=killed"]


def _wait_for(pred, timeout: float, proc) -> None:
    t0 = time.monotonic()
    while not pred():
        if proc.poll() is not None:
            raise AssertionError(f"the run ended before it could be killed:\n{proc.stderr.read().decode()[-2000:]}")
        if time.monotonic() - t0 > timeout:
            raise AssertionError("timed out waiting for the run")
        time.sleep(0.05)


# slow tier (40 s a case); a crash-and-resume stays in the default tier for Co-PLMs and ELSA, and a damaged
# checkpoint in tests/cli/test_rough_edges.py (default tier ≤ 10 min on 2 cores)
# Floe's asynchronous mode: updates computed but not yet arrived are part of the checkpoint
FLOE_ASYNC = PICO + ["federation.rounds=4", "method.name=floe", "method.mode=async", "method.llm=null",
                     "method.router=false", "method.cluster=false", "data.partition=by_task", "data.num_clients=4",
                     "data.tasks=[recall,sentiment]", "data.train_per_task=64", "federation.local_epochs=3",
                     "data.public_source=holdout", "data.public_fraction=0.25", "method.ranks=[2,4,8]",
                     "method.background_load=0", "method.deadline=0.1",
                     "method.devices=[{name: big, share: 1, memory: 1.2, speed: 1.0}, "
                     "{name: small, share: 1, memory: 0.3, speed: 0.4}]"]
FLOE_PROFILE = ('{"ranks": [2, 4, 8], "memory_mb": {"2": 10.0, "4": 20.0, "8": 40.0}, '
                '"step_s": {"2": 0.01, "4": 0.02, "8": 0.04}, "meta": {}}')


@pytest.mark.federation
@pytest.mark.slow
@pytest.mark.parametrize("kill_after_round, method", [(0, "standalone"), (2, "standalone"), (1, "floe-async")])
def test_sigkill_mid_round_then_resume_matches_an_uninterrupted_run(pico_zoo, tmp_path, kill_after_round, method):
    from mlflow import MlflowClient

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    run = RUN
    if method == "floe-async":
        (tmp_path / "profile.json").write_text(FLOE_PROFILE)
        run = [*FLOE_ASYNC, f"method.profile={tmp_path / 'profile.json'}"]
    killed = tmp_path / "killed"
    args = [*run, *_tracking(killed)]
    proc = subprocess.Popen([sys.executable, "-m", "fedlab.cli", "run", str(ROOT / "experiments/defaults.yaml"), *args],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=os.environ.copy())

    def logged() -> int:
        files = list((killed / "runs").glob("*/logged_round"))
        try:
            return int(files[0].read_text()) if files else -1
        except ValueError:   # caught between truncation and write
            return -1

    _wait_for(lambda: logged() >= kill_after_round, 300, proc)
    time.sleep(0.4)                      # into the next round's training
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert logged() < 4                  # it really died before the end

    resumed = run_experiment(load_config(ROOT / "experiments/defaults.yaml", [*args, "resume=true"]), progress=False)
    clean = run_experiment(load_config(ROOT / "experiments/defaults.yaml", [*run, *_tracking(tmp_path / "clean")]),
                           progress=False)
    assert [r["round"] for r in resumed.rounds] == [0, 1, 2, 3, 4]
    if method == "floe-async":           # updates were in flight across windows, so the kill could cut one
        assert any(r.get("async/pending", 0) > 0 for r in clean.rounds)
    for a, b in zip(resumed.rounds, clean.rounds):
        for key in ("acc/mean", "loss/task", "bytes/up", "async/arrived", "async/pending", "time/simulated_clock"):
            if key in b:
                assert a[key] == pytest.approx(b[key], rel=1e-6, abs=1e-9), (a["round"], key)

    client = MlflowClient(f"sqlite:///{killed}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert len(runs) == 1, "the killed run was duplicated instead of continued"
    assert runs[0].info.status == "FINISHED"
    steps = [m.step for m in client.get_metric_history(runs[0].info.run_id, "acc/mean")]
    assert sorted(steps) == [0, 1, 2, 3, 4]   # every round logged exactly once
