"""What a new user trips over: unreachable clusters, impossible settings, damaged checkpoints,
argument order, where outputs land, a machine that knows another Ray cluster, malformed local data,
runs that fail, and progress lines."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
SMALL = [*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]"]


def _cli(args, cwd, timeout=120, env=None):
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", *args], cwd=cwd, capture_output=True, text=True,
                       timeout=timeout, env={**os.environ, **(env or {})})
    return p, time.monotonic() - t0


def test_an_unreachable_cluster_fails_in_one_line_within_seconds(tmp_path):
    p, took = _cli(["run", str(ROOT / "experiments/defaults.yaml"), "backend.name=ray",
                    "backend.address=127.0.0.1:1"], tmp_path, timeout=60)
    assert p.returncode == 2 and took < 30
    assert p.stderr.strip().splitlines() == [
        "fedlab: error: backend.address: no Ray cluster answers at 127.0.0.1:1 (Connection refused); start one "
        "with `ray start --head`, or leave it unset for a Ray of fedlab's own"]
    assert list(tmp_path.iterdir()) == []
    from fedlab.config import ConfigError
    from fedlab.runtime.cluster import check_address

    with pytest.raises(ConfigError, match="'auto' found no Ray cluster running"):
        os.environ.pop("RAY_ADDRESS", None)
        import ray._private.utils as ru

        old, ru.read_ray_address = ru.read_ray_address, lambda *a, **k: None
        try:
            check_address("auto")
        finally:
            ru.read_ray_address = old


def test_min_clients_above_the_number_of_clients_is_refused():
    from fedlab.config import ConfigError, load_config

    with pytest.raises(ConfigError, match=r"federation.min_clients: 17 is not allowed; expected at most "
                                          r"data.num_clients \(16\)"):
        load_config(ROOT / "experiments/baselines/fedavg_hetero.yaml", ["federation.min_clients=17"])


@pytest.mark.federation
def test_a_damaged_checkpoint_falls_back_to_the_previous_round_or_fails_in_one_line(pico_zoo, tmp_path):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    args = [*SMALL, "method.name=fedavg", "tracking.enabled=false", f"output_dir={tmp_path}/runs"]
    done = run_experiment(load_config(ROOT / "experiments/defaults.yaml", args), progress=False)
    ckpt = Path(done.out_dir) / "checkpoint.pt"
    prev = Path(done.out_dir) / "checkpoint.prev.pt"
    assert ckpt.exists() and prev.exists()
    ckpt.write_bytes(ckpt.read_bytes()[:100])                         # truncated mid-write, say
    p, _ = _cli(["run", str(ROOT / "experiments/defaults.yaml"), *args, "resume=true"], tmp_path)
    assert p.returncode == 0, p.stderr[-1500:]
    assert f"{ckpt} is unreadable" in p.stderr and f"resuming from the previous round's checkpoint {prev}" in p.stderr
    final = [ln for ln in p.stdout.splitlines() if ln.startswith("| mean (over clients)")][0]
    assert f"{done.final['acc/mean']:.4f}" in final                  # round 2 re-run: the same numbers
    for f in (ckpt, prev):
        f.write_bytes(b"not a checkpoint")
    p, _ = _cli(["run", str(ROOT / "experiments/defaults.yaml"), *args, "resume=true"], tmp_path)
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"fedlab: error: resume: {ckpt} is unreadable")


def test_overrides_after_options_are_accepted():
    from fedlab.cli import parse_args

    a = parse_args(["sweep", "c.yaml", "--set", "method.rho=1,2", "federation.rounds=2", "--name", "x", "seed=3"])
    assert a.set == ["method.rho=1,2"] and a.overrides == ["federation.rounds=2", "seed=3"] and a.name == "x"
    with pytest.raises(SystemExit):
        parse_args(["sweep", "c.yaml", "--nope"])


def test_sweep_results_land_under_the_working_directory(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "sweeps"))
    import htiess_grid

    seen = {}
    monkeypatch.setattr("fedlab.sweep.run_sweep", lambda *a, **k: seen.update(k) or [])
    monkeypatch.setattr("fedlab.sweep.format_ranked", lambda *a, **k: "")
    monkeypatch.chdir(tmp_path)
    assert htiess_grid.main([]) == 0
    assert (Path(seen["storage"]).resolve()) == tmp_path / "sweeps" / "results"
    from fedlab.cli import parse_args

    assert Path(parse_args(["sweep", "c.yaml"]).storage).resolve() == tmp_path / "sweeps" / "results"


@pytest.mark.federation
@pytest.mark.slow   # 18 s: starts a Ray cluster with `ray start` (default tier ≤ 10 min on 2 cores)
def test_a_known_ray_cluster_is_not_joined_and_failed_runs_end_failed(pico_zoo, tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    import mlflow

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment
    from fedlab.runtime.federation import FederationError

    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")   # what a stopped `ray start` would point at
    track = [f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifact_root={tmp_path}/art",
             f"output_dir={tmp_path}/runs"]
    try:
        h = run_experiment(load_config(None, [*SMALL, "backend.name=ray", "backend.num_cpus=2", *track]),
                           progress=False)
        assert h.rounds[-1]["clients/ok"] == 2
        bad = [*SMALL, *track, "federation.min_clients=2", "faults=[{kind: raise, client: 1}]", "seed=1"]
        with pytest.raises(FederationError):
            run_experiment(load_config(None, bad), progress=False)
    finally:
        ray.shutdown()
    assert mlflow.active_run() is None
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
    assert sorted(r.info.status for r in runs) == ["FAILED", "FINISHED"]
    exp = mlflow.get_experiment_by_name("fedlab")
    assert exp.tags["mlflow.experimentKind"] == "custom_model_development"


def test_malformed_local_rows_say_file_and_line(tmp_path):
    from fedlab.config import ConfigError
    from fedlab.data.hf import hf_examples

    folder = tmp_path / "sst2"
    folder.mkdir()
    good = json.dumps({"sentence": "fine", "label": 1})
    (folder / "train.jsonl").write_text("\n".join([good, good, "{not json", good]) + "\n")
    with pytest.raises(ConfigError, match=r"data.hf_dir: .*sst2/train.jsonl:3: not valid JSON"):
        hf_examples("sst2", "train", hf_dir=str(tmp_path))
    (folder / "train.jsonl").write_text("\n".join([good, json.dumps({"text": "no sentence", "label": 0})]) + "\n")
    with pytest.raises(ConfigError, match=r"sst2/train.jsonl: row 2 lacks the field 'sentence' that sst2 needs"):
        hf_examples("sst2", "train", hf_dir=str(tmp_path))
    p, _ = _cli(["run", str(ROOT / "experiments/defaults.yaml"), "data.source=hf:sst2", f"data.hf_dir={tmp_path}",
                 "data.num_clients=1"], tmp_path)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    assert "lacks the field 'sentence'" in p.stderr


@pytest.mark.slow   # 14 s (default tier ≤ 10 min on 2 cores)
def test_rounds_without_evaluation_print_no_accuracy(pico_zoo, tmp_path):
    p, _ = _cli(["run", str(ROOT / "experiments/defaults.yaml"), *SMALL, "federation.rounds=3", "eval.every=2",
                 "tracking.enabled=false", f"output_dir={tmp_path}/runs"], tmp_path,
                env={"FEDLAB_HOME": os.environ["FEDLAB_HOME"]})
    assert p.returncode == 0, p.stderr[-1000:]
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("[fedlab] round ")]
    assert len(lines) == 4 and "None" not in p.stderr
    assert "acc " not in lines[1] and "acc " in lines[2] and "task-loss" in lines[1]


def test_zoo_build_shows_progress_lines_without_a_terminal(tmp_path):
    p = subprocess.run([sys.executable, "-m", "fedlab.cli", "zoo", "build", "pico-gpt2", "--force"],
                       capture_output=True, text=True, timeout=300, env={**os.environ, "FEDLAB_HOME": str(tmp_path)})
    assert p.returncode == 0, p.stderr[-1000:]
    steps = [ln for ln in p.stderr.splitlines() if "pico-gpt2 step" in ln]
    assert len(steps) >= 5 and all("s left" in ln for ln in steps)
