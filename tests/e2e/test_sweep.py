"""The sweep: trials as MLflow children of one parent, a failing trial does not stop the others, an
interrupted (here: partly failed) sweep resumes with its finished trials kept, ranked CSV and heatmap."""
import csv
from pathlib import Path

import pytest

from conftest import PICO

pytest.importorskip("ray")


@pytest.mark.federation
@pytest.mark.slow   # 60 s: two Ray Tune sweeps; the seed summary, identity and script tests stay in the default tier (default tier ≤ 10 min on 2 cores)
def test_sweep_children_failure_resume_and_outputs(pico_zoo, tmp_path):
    import mlflow
    import ray

    from fedlab.sweep import parse_axis, run_sweep

    overrides = [*PICO, "federation.rounds=1", "data.public_size=16", "method.bi_samples=16",
                 "data.num_clients=2", "data.tasks=[recall,sentiment]", f"tracking.uri=sqlite:///{tmp_path}/m.db",
                 f"tracking.artifact_root={tmp_path}/art", f"output_dir={tmp_path}/runs"]
    grid = dict([parse_axis("method.rho=1.0,1.5"), parse_axis("method.delta=0.0,0.5")])
    base = "experiments/fedproxy/hetero.yaml"
    try:
        rows = run_sweep(base, grid, overrides, "t", storage=str(tmp_path / "sw"), num_cpus=2, max_failures=0,
                         heatmap_axes=("method.rho", "method.delta"), fail_on={"method.rho": 1.5, "method.delta": 0.5})
        status = {(r["method.rho"], r["method.delta"]): r["status"] for r in rows}
        assert status.pop((1.5, 0.5)) == "ERROR" and set(status.values()) == {"OK"}
        done = {r["mlflow_run_id"] for r in rows if r["status"] == "OK"}
        # run again: the errored trial resumes, the three finished ones are kept (not re-run)
        rows2 = run_sweep(base, grid, overrides, "t", storage=str(tmp_path / "sw"), num_cpus=2, max_failures=0,
                          heatmap_axes=("method.rho", "method.delta"))
    finally:
        ray.shutdown()
    assert [r["status"] for r in rows2] == ["OK"] * 4
    assert done <= {r["mlflow_run_id"] for r in rows2}
    with open(tmp_path / "sw" / "t" / "ranked.csv") as fh:
        ranked = list(csv.DictReader(fh))
    assert len(ranked) == 4
    values = [float(r["score"]) for r in ranked]
    assert values == sorted(values, reverse=True)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
    parents = [r for r in runs if r.info.run_name == "sweep-t"]
    assert len(parents) == 1
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    assert len([c for c in children if c.info.status == "FINISHED"]) == 4
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(parents[0].info.run_id, "plots")}
    assert "plots/heatmap.png" in arts


def test_sweep_command_rejects_bad_axes_before_starting(capsys):
    from fedlab.cli import main

    assert main(["sweep", "experiments/fedproxy/hetero.yaml"]) == 2
    assert main(["sweep", "experiments/fedproxy/hetero.yaml", "--set", "method.rho=0.5,1.0"]) == 2
    err = capsys.readouterr().err
    assert "give at least one axis" in err and "method.rho: 0.5 is not allowed" in err


def test_htiess_grid_script_rejects_bad_heatmap_axes(capsys, monkeypatch):
    import runpy
    import sys

    monkeypatch.setattr(sys, "argv", ["htiess_grid.py", "--heatmap", "method.rho,model.lora.r"])
    with pytest.raises(SystemExit) as e:
        runpy.run_path("sweeps/htiess_grid.py", run_name="__main__")
    assert e.value.code == 2
    assert "--heatmap" in capsys.readouterr().err


@pytest.mark.federation
@pytest.mark.slow   # ~25 s; the default tier keeps the sweep failure/resume test
def test_a_failing_trial_is_retried_within_the_sweep(pico_zoo, tmp_path):
    import ray

    from fedlab.sweep import parse_axis, run_sweep

    overrides = [*PICO, "federation.rounds=1", "data.public_size=16", "method.bi_samples=16",
                 "data.num_clients=2", "data.tasks=[recall,sentiment]", f"tracking.uri=sqlite:///{tmp_path}/m.db",
                 f"tracking.artifact_root={tmp_path}/art", f"output_dir={tmp_path}/runs"]
    grid = dict([parse_axis("method.rho=1.0,1.5")])
    try:
        rows = run_sweep("experiments/fedproxy/hetero.yaml", grid, overrides, "retry", storage=str(tmp_path / "sw"),
                         num_cpus=2, max_failures=1, fail_on={"method.rho": 1.5})
    finally:
        ray.shutdown()
    # the injected failure hits the rho=1.5 trial once; Tune retries it and the sweep ends complete
    assert (tmp_path / "sw" / "retry" / "fail_once").exists()
    assert [r["status"] for r in rows] == ["OK", "OK"]


def test_a_seed_axis_summarises_each_point_over_its_seeds():
    from fedlab.sweep import format_over_seeds, over_seeds

    rows = [{"method.alpha": a, "seed": s, "score": v, "status": "OK"}
            for a, vals in ((0.2, [0.5, 0.7, 0.6]), (0.8, [0.4, 0.4, 0.4])) for s, v in enumerate(vals)]
    rows.append({"method.alpha": 0.8, "seed": 3, "score": None, "status": "ERROR"})
    got = over_seeds(rows, ["method.alpha", "seed"], "score")
    assert [g["method.alpha"] for g in got] == [0.2, 0.8] and got[0]["seeds"] == 3 and got[1]["seeds"] == 3
    assert got[0]["mean"] == pytest.approx(0.6) and got[1]["half"] == pytest.approx(0.0)
    assert got[0]["half"] == pytest.approx(4.303 * 0.1 / 3 ** 0.5, rel=1e-3)      # t(0.975, 2) · s / √n
    assert "0.6000 ± " in format_over_seeds(rows, ["method.alpha", "seed"], "score")


def test_a_sweep_resumes_only_trials_made_from_the_same_config_and_zoo_weights(tmp_path, capsys):
    from fedlab.sweep import _same_identity

    a = {"base": "k1", "grid": "{}", "overrides": [], "zoo": {"tiny-bloom": "2922a2c5"}}
    assert not _same_identity(tmp_path, a)            # nothing recorded yet: a fresh sweep, identity written
    (tmp_path / "tune").mkdir()
    assert _same_identity(tmp_path, a)                # same identity: its trials are resumed
    b = {**a, "zoo": {"tiny-bloom": "dc8ff4c5"}}      # a rebuilt zoo model: other weights
    assert not _same_identity(tmp_path, b)
    assert (tmp_path / "tune.stale-1").is_dir() and not (tmp_path / "tune").exists()
    assert "other zoo weights" in capsys.readouterr().err
    assert _same_identity(tmp_path, b)


def test_htiess_grid_runs_every_point_over_three_seeds_and_prints_their_interval(monkeypatch, capsys, tmp_path):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "sweeps"))
    import htiess_grid

    seen = {}
    rows = [{"method.rho": 1.0, "method.delta": 0.0, "method.pcr_lambda": 0.0, "seed": s, "status": "OK",
             "score": v, "acc_mean": v, "score_metric": "acc"} for s, v in enumerate([0.5, 0.6, 0.7])]
    monkeypatch.setattr("fedlab.sweep.run_sweep", lambda config, grid, *a, **k: seen.update(grid=grid) or rows)
    monkeypatch.chdir(tmp_path)
    assert htiess_grid.main([]) == 0
    assert seen["grid"]["seed"] == [0, 1, 2]
    out = capsys.readouterr().out
    assert "0.6000 ± 0.2484" in out          # mean of 0.5, 0.6, 0.7 ± t(0.975, 2) · 0.1 / √3
    assert htiess_grid.main(["--seeds", "1"]) == 0 and "seed" not in seen["grid"]
    assert htiess_grid.main(["--seeds", "0"]) == 2


@pytest.mark.federation
@pytest.mark.slow
def test_a_sweep_stopped_by_a_signal_ends_in_one_line_with_its_runs_killed(pico_zoo, tmp_path):
    """Ctrl-C (or SIGTERM, turned into Tune's graceful stop) during trials: one line with the resume
    command, exit 130, the parent and the stopped trials' MLflow runs KILLED, none left RUNNING."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import mlflow

    args = ["sweep", "experiments/fedproxy/hetero.yaml", "--set", "method.rho=1.0,1.5", "--name", "t",
            "--storage", str(tmp_path / "sw"), "--num-cpus", "2", *PICO, "federation.rounds=40",
            "data.public_size=16", "method.bi_samples=16", "data.num_clients=2", "data.tasks=[recall,sentiment]",
            f"tracking.uri=sqlite:///{tmp_path}/m.db", f"tracking.artifact_root={tmp_path}/art",
            f"output_dir={tmp_path}/runs"]
    root = Path(__file__).resolve().parents[2]
    proc = subprocess.Popen([sys.executable, "-m", "fedlab.cli", *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    t0 = time.monotonic()
    while True:      # until a trial's MLflow run is open
        assert proc.poll() is None and time.monotonic() - t0 < 300, "the sweep ended or never started a trial"
        if (tmp_path / "m.db").exists():
            try:
                runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
            except Exception:
                runs = []
            if any(r.data.tags.get("fedlab.sweep") == "t" and r.info.run_name != "sweep-t" for r in runs):
                break
        time.sleep(0.5)
    time.sleep(2)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    last = err.strip().splitlines()[-1]
    assert proc.returncode == 130, err[-3000:]
    assert last.startswith("fedlab: error: sweep 't' interrupted") and "resume with: fedlab sweep" in last, last
    runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
    status = {r.info.run_name: r.info.status for r in runs}
    assert status.pop("sweep-t") == "KILLED" and "RUNNING" not in status.values(), status
    assert "KILLED" in status.values()
    os.environ.pop("RAY_ADDRESS", None)
    # the resume (the same command, as the line says) finishes every trial once: one FINISHED run per trial
    done = subprocess.run([sys.executable, "-m", "fedlab.cli", *args], cwd=root, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
    trials = [r for r in runs if r.data.tags.get("fedlab.sweep") == "t" and r.info.run_name != "sweep-t"]
    finished: dict[float, int] = {}
    for r in trials:                       # a trial is its grid point: the run's method.rho
        if r.info.status == "FINISHED":
            rho = float(r.data.params["method.rho"])
            finished[rho] = finished.get(rho, 0) + 1
    assert finished == {1.0: 1, 1.5: 1}, finished
    assert "RUNNING" not in {r.info.status for r in trials}
    # and each trial ends on the numbers of an uninterrupted run of its point
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    overrides = [a for a in args[7:] if "=" in a and not a.startswith(("tracking.", "output_dir="))]
    for r in (r for r in trials if r.info.status == "FINISHED"):
        rho = r.data.params["method.rho"]
        fresh = run_experiment(load_config(root / "experiments/fedproxy/hetero.yaml", [
            *overrides, f"method.rho={rho}", "tracking.enabled=false", f"output_dir={tmp_path}/fresh"]), progress=False)
        assert r.data.metrics["acc/mean"] == pytest.approx(fresh.final["acc/mean"], abs=1e-12), rho


def test_ranking_by_cost_to_target_puts_the_cheapest_first_and_the_unreached_last():
    from fedlab.sweep import format_ranked, rank_rows

    rows = [{"lr": lr, "acc_mean": 0.5, "score": 0.5, "score_metric": "acc/mean", "status": "OK",
             "rounds_to_target": r, "mb_to_target": mb} for lr, r, mb in
            [(1e-3, None, None), (2e-3, 4, 8.0), (5e-3, 2, 4.0)]]
    assert [r["lr"] for r in rank_rows(rows, "mb_to_target")] == [5e-3, 2e-3, 1e-3]
    assert [r["lr"] for r in rank_rows(rows, "rounds_to_target")] == [5e-3, 2e-3, 1e-3]
    text = format_ranked(rows, ["lr"], "mb_to_target")
    assert "to eval.target" in text and "2 rounds, 4.00 MB" in text and "not reached" in text
