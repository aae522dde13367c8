"""Evidence tooling: seeds under one MLflow parent with mean and interval, `fedlab report`
grouping runs that differ only in the seed, a zoo cache keyed by its recipe and runs naming their weights."""
from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from conftest import PICO
from fedlab.cli import main

ROOT = Path(__file__).resolve().parents[2]
SMALL = [*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]", "method.name=fedavg", "federation.lr=0.01"]


@pytest.mark.federation
@pytest.mark.slow   # 22 s; seeds in workers stay in the default tier (test_seeds_in_parallel_give_the_sequential_numbers) (default tier ≤ 10 min on 2 cores)
def test_seeds_run_under_one_parent_and_report_groups_them(pico_zoo, tmp_path):
    import mlflow

    from fedlab.evidence.stats import mean_ci

    out = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(out):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *SMALL, "--seeds", "0,1,2"]) == 0
    text = out.getvalue()
    assert "3 seeds (0,1,2)" in text and "±" in text
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlruns/mlflow.db")
    runs = mlflow.search_runs(experiment_names=["fedlab"], output_format="list")
    parent = [r for r in runs if "method.name" not in r.data.params]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent[0].info.run_id]
    assert len(parent) == 1 and sorted(r.data.params["seed"] for r in children) == ["0", "1", "2"]
    accs = [r.data.metrics["acc/mean"] for r in children]
    mean, half = mean_ci(accs)
    assert parent[0].data.metrics["acc/mean"] == pytest.approx(mean)
    assert parent[0].data.metrics["acc/mean.ci95"] == pytest.approx(half)
    assert len({r.data.metrics["loss/task"] for r in children}) > 1   # the seeds really differ
    for r in children:                                           # each run names the weights it used
        assert len(r.data.tags["fedlab.model.pico-llama.weights_sha256"]) == 64
    # one more run with another config: two rows, the seeds grouped
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(io.StringIO()):
        assert main(["run", str(ROOT / "experiments/defaults.yaml"), *SMALL, "federation.lr=0.03"]) == 0
    rep = io.StringIO()
    with contextlib.chdir(tmp_path), contextlib.redirect_stdout(rep):
        assert main(["report"]) == 0
    rows = [ln for ln in rep.getvalue().splitlines() if "| fedavg" in ln]
    assert len(rows) == 2 and any("| 0,1,2 " in ln and "±" in ln for ln in rows)


def test_bad_seed_lists_fail_in_one_line(capsys):
    assert main(["run", str(ROOT / "experiments/defaults.yaml"), "--seeds", "0,0"]) == 2
    assert "--seeds: '0,0' is not allowed; expected distinct integers" in capsys.readouterr().err


def test_the_zoo_rebuilds_the_same_and_never_reuses_a_stale_entry(tmp_path, monkeypatch):
    from fedlab.models import zoo

    digests = []
    for home in ("a", "b"):
        monkeypatch.setenv("FEDLAB_HOME", str(tmp_path / home))
        zoo.build("pico-gpt2", force=True, progress=False)        # from the recipe, whatever is shipped
        meta = zoo.cache_meta("pico-gpt2")
        digests.append((meta["fingerprint"], meta["weights_sha256"]))
        assert meta["recipe"]["steps"] == zoo.ZOO["pico-gpt2"].steps
    assert digests[0] == digests[1]                              # two builds, identical weights
    assert zoo.is_built("pico-gpt2")
    monkeypatch.setattr(zoo, "ZOO_VERSION", zoo.ZOO_VERSION + 1)   # the build recipe changed
    zoo.fingerprint.cache_clear()
    try:
        assert not zoo.is_built("pico-gpt2")
        assert [r["built"] for r in zoo.describe_zoo() if r["name"] == "pico-gpt2"] == ["stale"]
        assert not zoo.shipped_current("pico-gpt2")                 # the shipped weights are of the old recipe
        zoo.build("pico-gpt2", progress=False)                     # rebuilt, not reused
        assert zoo.read_meta("pico-gpt2")["fingerprint"] == zoo.fingerprint("pico-gpt2") != digests[0][0]
    finally:
        zoo.fingerprint.cache_clear()


@pytest.mark.federation
def test_runner_records_name_the_weights(pico_zoo, tmp_path):
    from fedlab.evidence.runner import Planned, Results, execute

    results = Results(tmp_path / "results.json")
    execute([Planned("r", None, (*SMALL, "tracking.enabled=false", f"output_dir={tmp_path}/runs"))], results, [0],
            progress=False, allow_dirty=True)
    rec = json.loads((tmp_path / "results.json").read_text())["r@seed0"]
    assert set(rec["models"]["pico-llama"]) == {"fingerprint", "weights_sha256"}
    assert rec["git"] is None or len(rec["git"].split("+")[0]) == 40
    env = rec["environment"]            # the environment fingerprint (fedlab.evidence.provenance.run_environment)
    assert {"cpu", "capability", "numerics", "threads", "torch", "transformers", "tokenizers", "commit",
            "clean", "numerics_fingerprint", "digest"} <= set(env)
    from fedlab import numerics

    assert env["digest"] == numerics.machine_digest() and env["numerics_fingerprint"] == numerics.fingerprint(env)
    assert env["threads"] == 1 and env["numerics"] == "pinned" and env["capability"] == "AVX2"
    assert (rec["git"] or "").endswith("+dirty") == (env["clean"] is False)
    assert ("diff" in rec) == (env["clean"] is False)      # a dirty tree's record names its kept diff


@pytest.mark.federation
def test_seeds_in_parallel_give_the_sequential_numbers(pico_zoo, tmp_path):
    from fedlab.config import load_config
    from fedlab.seeds import run_seeds

    cfg = load_config(ROOT / "experiments/defaults.yaml", [*SMALL, "tracking.enabled=false",
                                                           f"output_dir={tmp_path}/runs"])
    one, _ = run_seeds(cfg, [0, 1], progress=False, jobs=1)
    two, _ = run_seeds(cfg, [0, 1], progress=False, jobs=2)
    keys = lambda h: {k: v for k, v in h.final.items() if k.startswith(("acc/", "loss/", "bytes/"))}  # noqa: E731
    assert [keys(h) for h in one] == [keys(h) for h in two]
    assert keys(one[0]) != keys(one[1])


def test_a_rows_input_path_resolves_alike_from_every_working_directory(tmp_path, monkeypatch):
    """A table row's own input paths are relative to the repository root, so its resolved config (and with it
    whether its records are current) does not depend on where `fedlab results` runs; a path among the command
    line's trailing overrides stays relative to the working directory."""
    from fedlab.evidence.records import Planned

    profile = "experiments/floe/profile_tiny-llama-s.json"
    row = Planned("floe/x", None, ("method.name=floe", f"method.profile={profile}"))
    monkeypatch.chdir(tmp_path)
    assert row.resolve(0).method.profile == profile
    assert row.resolve(0, ("method.profile=mine.json",)).method.profile == str(tmp_path.resolve() / "mine.json")
