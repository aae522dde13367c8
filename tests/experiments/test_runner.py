"""The table runner: records per (row, seed), resumable, re-run when the resolved config changes,
rendered with mean ± interval; the statistics it uses."""
from __future__ import annotations

import json
import math
import re

import pytest

from conftest import PICO
from fedlab.evidence.records import stale_models
from fedlab.evidence.runner import Planned, Results, execute, run_table
from fedlab.evidence.stats import fmt_ci, mean_ci, paired_difference


def test_mean_ci_by_hand():
    mean, half = mean_ci([0.5, 0.6, 0.7])
    # sd = 0.1, t(0.975, 2) = 4.302653, half = 4.302653 · 0.1 / √3
    assert mean == pytest.approx(0.6) and half == pytest.approx(4.302653 * 0.1 / math.sqrt(3), rel=1e-6)
    assert math.isnan(mean_ci([0.4])[1]) and fmt_ci([0.4]) == "0.400" and fmt_ci([]) == "-"
    assert fmt_ci([0.5, 0.6, 0.7]) == "0.600 ± 0.248"
    assert fmt_ci([0.5, 0.6, 0.7], 1, signed=True) == "+0.6 ± 0.2" and fmt_ci([-0.4], signed=True) == "-0.400"


def test_paired_difference():
    d = paired_difference([0.61, 0.72, 0.55], [0.51, 0.60, 0.47])
    assert d["mean"] == pytest.approx(0.1) and d["significant"] and d["p"] < 0.05
    same = paired_difference([0.5, 0.6], [0.5, 0.6])
    assert same["mean"] == 0 and not same["significant"] and same["p"] == 1.0


def _plan(tmp_path, lr="0.01"):
    common = (*PICO, "data.num_clients=2", "data.tasks=[recall,sentiment]", f"output_dir={tmp_path}/runs",
              f"tracking.uri=sqlite:///{tmp_path}/mlflow.db", f"tracking.artifact_root={tmp_path}/art")
    return [Planned("t/fedavg", None, (*common, "method.name=fedavg", f"federation.lr={lr}"), "FedAvg", "t"),
            Planned("t/zeroshot", None, (*common, "method.name=zeroshot"), "zero-shot", "t")]


@pytest.mark.federation
@pytest.mark.slow   # 35 s: three table runs; rendering from records stays in the default tier (default tier ≤ 10 min on 2 cores)
def test_runner_records_resumes_and_reruns_what_changed(pico_zoo, tmp_path):
    results = Results(tmp_path / "results.json")
    assert execute(_plan(tmp_path), results, [0, 1], progress=False, allow_dirty=True) == 4
    data = json.loads((tmp_path / "results.json").read_text())
    rec = data["t/fedavg@seed1"]
    assert rec["seed"] == 1 and rec["method"] == "fedavg" and rec["method_config"]["aggregator"] == "mean"
    assert rec["command"].startswith("fedlab run model.name=pico-llama") and rec["command"].endswith("seed=1")
    assert rec["run_id"] and rec["final"]["acc/mean"] == rec["rounds"][-1]["acc/mean"]
    assert "parent_run_id" in data["_meta"]
    again = Results(tmp_path / "results.json")
    assert execute(_plan(tmp_path), again, [0, 1], progress=False, allow_dirty=True) == 0            # resumed: nothing to do
    assert execute(_plan(tmp_path, lr="0.02"), again, [0, 1], progress=False, allow_dirty=True) == 2   # changed config: re-run
    assert len(again.runs("t/fedavg")) == 2 and again.cell("t/zeroshot", lambda r: r["final"]["acc/mean"]) != "-"
    # a record made with a zoo model whose recipe has changed since is stale when the weights differ too
    made_with = again.records["t/zeroshot@seed0"]["models"]["pico-llama"]
    made_with["fingerprint"] = "0" * 16                 # another recipe, the same weights: still current
    assert stale_models(again.records["t/zeroshot@seed0"]) == []
    made_with["weights_sha256"] = "0" * 64              # other weights: stale
    assert stale_models(again.records["t/zeroshot@seed0"]) == ["pico-llama"]
    assert execute(_plan(tmp_path, lr="0.02"), again, [0, 1], progress=False, allow_dirty=True) == 1
    # the same recipe built into other weights (another machine): stale too
    again.records["t/zeroshot@seed1"]["models"]["pico-llama"]["weights_sha256"] = "1" * 64
    assert stale_models(again.records["t/zeroshot@seed1"]) == ["pico-llama"]
    # a record whose resolved method config differs from today's (a changed default keeps the run key) is stale
    from fedlab.config import load_config
    from fedlab.evidence.records import method_drift

    fed = again.records["t/fedavg@seed0"]
    cfg = load_config(None, [*_plan(tmp_path, lr="0.02")[0].overrides, "seed=0"])
    assert method_drift(fed, cfg) == []
    fed["method_config"]["aggregator"] = "median"          # what an old default would have recorded
    fed["method_config"]["retired_field"] = 1               # a field the config no longer has: not compared
    assert method_drift(fed, cfg) == ["aggregator"] and "t/fedavg" in again.stale(_plan(tmp_path, lr="0.02"))
    assert execute(_plan(tmp_path, lr="0.02"), again, [0], progress=False, allow_dirty=True) == 1
    # both seeds in one MLflow parent
    import mlflow

    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/mlflow.db")
    children = mlflow.search_runs(experiment_names=["fedlab"], output_format="list",
                                  filter_string=f"tags.mlflow.parentRunId = '{data['_meta']['parent_run_id']}'")
    assert len(children) == 8


def test_a_table_run_without_seeds_brings_every_seed_its_rows_hold_up_to_date(tmp_path, monkeypatch):
    """Run as named (no --seeds), a table script also re-runs a row's seeds beyond its defaults whose records
    another config made (a budget page chooses nothing while such a record stands); records of other numerics
    stay for --replace-other-numerics; an explicit --seeds runs those seeds alone."""
    from fedlab.evidence import runner
    from fedlab.evidence.records import OTHER_NUMERICS

    row = _plan(tmp_path)[:1]
    results = Results(tmp_path / "results.json")
    why = {0: None, 1: None, 2: None, 3: "another config", 4: OTHER_NUMERICS, 5: None}
    results.records = {f"t/fedavg@seed{s}": {"key": "t/fedavg", "seed": s} for s in why}
    monkeypatch.setattr(runner, "stale_reason", lambda rec, cfg: why[rec["seed"]])
    assert runner._stale_beyond(results, row[0], [0, 1, 2], ()) == [3]
    monkeypatch.setenv("FEDLAB_JUDGE_NUMERICS", "reference")     # execute then counts its runs and makes none
    for held, runs in ((True, 1), (False, 0)):
        if runs == 0:
            assert execute(row, results, [0, 1, 2], progress=False, held_stale=held) == 0
        else:
            with pytest.raises(Exception, match=r"\(1 run\(s\) to make here\)"):
                execute(row, results, [0, 1, 2], progress=False, held_stale=held)
    seen = []
    monkeypatch.setattr(runner, "execute", lambda rows, r, seeds, *a, held_stale=False, **k: seen.append(
        (seeds, held_stale)))
    monkeypatch.setattr(runner, "check_tree", lambda *a: None)
    monkeypatch.delenv("FEDLAB_JUDGE_NUMERICS")
    render = lambda r: ""
    assert run_table(tmp_path, lambda: row, render, []) == 0
    assert run_table(tmp_path, lambda: row, render, ["--seeds", "0,1,2"]) == 0
    assert seen == [([0, 1, 2], True), ([0, 1, 2], False)]


def test_run_table_renders_from_records(pico_zoo, tmp_path, capsys):
    def render(r: Results) -> str:
        return f"fedavg {r.final('t/fedavg', 'acc/mean')} zero {r.final('t/zeroshot', 'acc/mean')}"

    assert run_table(tmp_path, lambda: _plan(tmp_path), render, ["--seeds", "0,1", "--only", "t/zero", "--allow-dirty"]) == 0
    text = (tmp_path / "RESULTS.md").read_text()
    # zero-shot: the same for every seed (the cell may end with the collapse marker of the seeds' answer shares)
    assert text.startswith("fedavg - zero ") and re.search(r"± 0\.000( ⚠2/2)?$", text)
    assert run_table(tmp_path, lambda: _plan(tmp_path), render, ["--render-only"]) == 0
    assert run_table(tmp_path, lambda: _plan(tmp_path), render, ["--seeds", "0", "method.name=nope"]) == 2
    assert "method.name: 'nope' is not allowed" in capsys.readouterr().err


def test_only_takes_several_prefixes_and_exact_keys(tmp_path, capsys):
    from fedlab.evidence.runner import select_rows

    plan = _plan(tmp_path) + [Planned("deep/x", None, (), "x", "d")]
    assert [p.key for p in select_rows(plan, None)] == ["t/fedavg", "t/zeroshot", "deep/x"]
    assert [p.key for p in select_rows(plan, "t/zero,deep/")] == ["t/zeroshot", "deep/x"]
    assert [p.key for p in select_rows(plan, "t/")] == ["t/fedavg", "t/zeroshot"]
    # a pattern ending with $ is the whole key: t/fedavg$ is not t/fedavg_x (a prefix would take both)
    plan.append(Planned("t/fedavg_x", plan[0].config))
    assert [p.key for p in select_rows(plan, "t/fedavg")] == ["t/fedavg", "t/fedavg_x"]
    assert [p.key for p in select_rows(plan, "t/fedavg$,deep/")] == ["t/fedavg", "deep/x"]
    capsys.readouterr()
    assert select_rows(plan, "t/fed$") == [] and "--only t/fed$ matches no row" in capsys.readouterr().err


def test_an_empty_only_is_refused_rather_than_running_every_row(tmp_path, capsys):
    ran = []
    for only in (",", " ", "$", " $,"):
        with pytest.raises(SystemExit) as e:
            run_table(tmp_path, lambda: ran.append(1) or _plan(tmp_path), lambda r: "", ["--only", only])
        assert e.value.code == 2 and "names no row pattern" in capsys.readouterr().err
    assert not ran and not (tmp_path / "results.json").exists()


def test_bad_seeds_are_refused_in_one_line_before_any_row(tmp_path, capsys):
    ran = []
    for seeds in ("x", "0,0", ","):
        with pytest.raises(SystemExit) as e:
            run_table(tmp_path, lambda: ran.append(1) or _plan(tmp_path), lambda r: "", ["--seeds", seeds])
        err = capsys.readouterr().err
        assert e.value.code == 2 and f"--seeds: {seeds!r} is not allowed; expected distinct integers" in err
        assert "Traceback" not in err
    assert not ran and not (tmp_path / "results.json").exists()


def test_a_failed_run_is_handed_back_and_the_others_still_finish(monkeypatch):
    from fedlab import parallel

    calls = []

    def fake_run(cfg_dict, tags, progress=False, allow_dirty=True):
        calls.append(cfg_dict["seed"])
        if cfg_dict["seed"] == 1:
            raise ValueError("boom")
        return cfg_dict["seed"]

    class Cfg:
        def __init__(self, seed):
            self.seed = seed

        def to_dict(self):
            return {"seed": self.seed}

    monkeypatch.setattr(parallel, "_run_one", fake_run)
    monkeypatch.setattr("fedlab.experiment.model_provenance", lambda c: {})
    out = dict(parallel.run_many([Cfg(0), Cfg(1), Cfg(2)], [None] * 3, jobs=1))
    assert calls == [0, 1, 2] and out[0] == 0 and out[2] == 2
    assert isinstance(out[1], ValueError) and str(out[1]) == "boom"


def test_table_figures_go_to_the_tables_parent_run(tmp_path, monkeypatch):
    import mlflow

    from fedlab.config import load_config
    from fedlab.evidence.runner import Results, _parent_run, log_to_parent

    monkeypatch.chdir(tmp_path)                       # the default store: sqlite:///mlruns/mlflow.db here
    results = Results(tmp_path / "results.json")
    png = tmp_path / "fig.png"
    png.write_bytes(b"\x89PNG not really")
    assert log_to_parent(results, [png]) == 0         # no parent run yet: nothing to log to
    parent = _parent_run(results, load_config(None, []), "a table")
    assert log_to_parent(results, [png, tmp_path / "missing.png"]) == 1
    names = [a.path for a in mlflow.MlflowClient().list_artifacts(parent, "figures")]
    assert names == ["figures/fig.png"]


def test_two_table_processes_on_one_results_file_keep_each_others_records(tmp_path):
    """Two `--only` invocations of one table script write the same results.json: each save merges with the
    file as it is then, so neither loses the other's records, and a record one of them re-made wins."""
    path = tmp_path / "results.json"
    Results(path).save()
    a, b = Results(path), Results(path)
    a.records["x@seed0"] = {"key": "x", "seed": 0, "v": 1}
    a.save()
    b.records["y@seed0"] = {"key": "y", "seed": 0, "v": 2}
    b.save()
    assert set(Results(path).records) == {"x@seed0", "y@seed0"} and set(b.records) == {"x@seed0", "y@seed0"}
    a.records["y@seed0"] = {"key": "y", "seed": 0, "v": 3}    # a re-made y: its record replaces b's
    a.save()
    b.save()                                                   # b did not touch y again: a's record stays
    assert Results(path).records["y@seed0"]["v"] == 3 and Results(path).records["x@seed0"]["v"] == 1


@pytest.mark.federation
@pytest.mark.slow   # 40 s: two table runs and an interrupted one (default tier ≤ 10 min on 2 cores)
def test_a_table_stopped_by_a_signal_and_run_again_ends_on_the_uninterrupted_records(pico_zoo, tmp_path,
                                                                                    monkeypatch):
    """A table script interrupted mid-row (SIGTERM at a round's end) says so, keeps the rows it finished, and
    run again (the same command) ends with the records an uninterrupted table makes, number for number."""
    import os
    import signal

    from fedlab import interrupt
    from fedlab.runtime import federation

    checkpoint = federation._checkpoint

    def signal_after_round_1(path, rnd, *args):
        checkpoint(path, rnd, *args)
        if rnd == 1:                             # the first row's round 1 of 2, checkpointed
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(federation, "_checkpoint", signal_after_round_1)
    stopped = Results(tmp_path / "a" / "results.json")
    with pytest.raises(interrupt.Interrupted):
        with interrupt.handlers():
            execute(_plan(tmp_path / "a"), stopped, [0], progress=True, allow_dirty=True, jobs=1)
    assert list(Results(tmp_path / "a" / "results.json").records) == []        # the row cut short is not recorded
    monkeypatch.setattr(federation, "_checkpoint", checkpoint)
    resumed = Results(tmp_path / "a" / "results.json")
    execute(_plan(tmp_path / "a"), resumed, [0], progress=False, allow_dirty=True)
    fresh = Results(tmp_path / "b" / "results.json")
    execute(_plan(tmp_path / "b"), fresh, [0], progress=False, allow_dirty=True)
    numbers = lambda rec: {k: v for k, v in rec["final"].items() if k.startswith(("acc/", "loss/", "bytes/"))}  # noqa: E731
    assert sorted(resumed.records) == sorted(fresh.records) == ["t/fedavg@seed0", "t/zeroshot@seed0"]
    assert all(numbers(resumed.records[k]) == numbers(fresh.records[k]) for k in fresh.records)


def test_a_row_made_at_seeds_of_its_own_runs_at_those_or_at_those_of_the_seeds_named(tmp_path, monkeypatch, capsys):
    from fedlab.evidence import runner

    plain, own = Planned("t/a", None), Planned("t/ctl", None, seeds=(5, 6))
    assert plain.run_seeds([0, 1], explicit=False) == [0, 1] and own.run_seeds([0, 1], explicit=False) == [5, 6]
    assert own.run_seeds([0, 6, 7], explicit=True) == [6] and plain.run_seeds([0, 6], explicit=True) == [0, 6]
    made = []
    monkeypatch.setattr(Planned, "resolve", lambda self, seed, extra=(): (self.key, seed))
    monkeypatch.setattr(runner, "check_tree", lambda *a: None)
    monkeypatch.setattr(runner, "_parent_run", lambda *a: None)
    monkeypatch.setattr("fedlab.parallel.default_jobs", lambda cfgs: 1)
    monkeypatch.setattr("fedlab.parallel.run_many", lambda cfgs, tags, jobs: made.extend(cfgs) or iter(()))
    results = Results(tmp_path / "results.json")
    execute([plain, own], results, [0, 1], progress=False, seeds_given=False)
    assert made == [("t/a", 0), ("t/a", 1), ("t/ctl", 5), ("t/ctl", 6)]
    made.clear()
    execute([plain, own], results, [1, 6], seeds_given=True)
    assert made == [("t/a", 1), ("t/a", 6), ("t/ctl", 6)]
    made.clear()
    execute([own], results, [0], seeds_given=True)
    assert made == [] and "t/ctl is made at seeds 5,6 only, none of which --seeds names" in capsys.readouterr().err
    # a table script run as named (no --seeds) makes the row's own seeds, and brings none beyond them up to date
    made.clear()
    results.records = {"t/ctl@seed5": {"key": "t/ctl", "seed": 5}}
    results.save()
    monkeypatch.setattr(runner, "stale_reason", lambda rec, cfg: None)
    assert run_table(tmp_path, lambda: [own], lambda r: "", []) == 0
    assert made == [("t/ctl", 6)]
    made.clear()
    assert run_table(tmp_path, lambda: [own], lambda r: "", ["--seeds", "0,6"]) == 0
    assert made == [("t/ctl", 6)]


MAIN_TABLE_SCRIPTS = ("experiments/fedproxy/make_tables.py", "experiments/fedmkt/make_tables.py",
                      "experiments/coplms/make_tables.py", "experiments/floe/make_tables.py",
                      "experiments/elsa/make_tables.py", "experiments/baselines/make_table.py")


@pytest.mark.parametrize("script", MAIN_TABLE_SCRIPTS)
def test_a_main_table_script_makes_every_seed_a_claim_reads_by_default(script, monkeypatch):
    """Run without --seeds, each system's table script makes seeds 0 .. CLAIM_SEEDS − 1 of a row, the seeds its
    claims read (`fedlab results --todo` counts a row short of them as lacking)."""
    import runpy
    import sys
    from pathlib import Path

    from fedlab.evidence import runner
    from fedlab.evidence.verdicts import CLAIM_SEEDS

    class Made(Exception):
        pass

    def execute_seeds(rows, results, seeds, *a, **k):
        raise Made(tuple(seeds))

    monkeypatch.setattr(runner, "execute", execute_seeds)
    path = Path(__file__).resolve().parents[2] / script
    monkeypatch.setattr(sys, "argv", [str(path), "--only", "no-such-row$"])
    monkeypatch.syspath_prepend(str(path.parent))
    with pytest.raises(Made) as made:
        runpy.run_path(str(path), run_name="__main__")
    assert made.value.args[0] == tuple(range(CLAIM_SEEDS))
