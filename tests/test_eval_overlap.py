"""Issue 33, item 3: `eval.overlap` scores round t in a second process while round t + 1 trains — the same scores
as in line, in the same rounds' records and in MLflow; methods whose evaluation reads more than its instructions
evaluate in line and say so; a run killed while an evaluation was beside resumes with that evaluation redone."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[1]
RUN = PICO + ["method.name=fedavg", "data.partition=iid", "data.num_clients=2", "data.tasks=[recall,sentiment]",
              "federation.rounds=4", "eval.every=2", "eval.cache=false"]


def _run(tmp_path, name, *extra):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + [f"tracking.uri=sqlite:///{tmp_path}/m.db",
                                                                 f"tracking.artifact_root={tmp_path}/a",
                                                                 f"output_dir={tmp_path}/{name}", *extra])
    return run_experiment(cfg, progress=True)


def _scores(h) -> dict:
    return {r["round"]: {k: v for k, v in r.items() if k.startswith(("acc/", "top/", "n/"))} for r in h.rounds}


def test_overlap_gives_the_in_line_scores_in_the_same_rounds(pico_zoo, tmp_path, capsys):
    import mlflow

    inline = _run(tmp_path, "inline")
    beside = _run(tmp_path, "beside", "eval.overlap=true")
    err = capsys.readouterr().err
    scored = _scores(beside)
    assert scored == _scores(inline) and all(scored[r] for r in (0, 2, 4)) and not scored[1] and not scored[3]
    # rounds 0 and 2 were scored by the second process, the last round in line
    assert [r["round"] for r in beside.rounds if "time/eval_beside" in r] == [0, 2]
    assert not any("eval/pending" in r for r in beside.rounds)
    assert "round 2/4 scored beside training" in err
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    hist = mlflow.MlflowClient().get_metric_history(beside.run_id, "acc/mean")
    assert {m.step: m.value for m in hist} == {r: scored[r]["acc/mean"] for r in (0, 2, 4)}
    # the run's identity does not depend on when it was scored
    from fedlab.config import load_config
    from fedlab.runtime.federation import run_key

    same = [ROOT / "experiments/defaults.yaml", RUN]
    assert run_key(load_config(same[0], same[1])) == run_key(load_config(same[0], [*same[1], "eval.overlap=true"]))


def test_a_method_that_evaluates_its_own_way_evaluates_in_line(pico_zoo, tmp_path, capsys):
    from fedlab.config import load_config
    from fedlab.registry import get
    from fedlab.runtime import overlap

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + ["eval.overlap=true"])
    method = get("fedavg").method_cls.__new__(get("fedavg").method_cls)
    assert overlap.why_not(cfg, method) is None
    ray = load_config(ROOT / "experiments/defaults.yaml", RUN + ["eval.overlap=true", "backend.name=ray"])
    assert "backend.name" in overlap.why_not(ray, method)
    elsa = get("elsa").method_cls.__new__(get("elsa").method_cls)
    assert "evaluates in its own way" in overlap.why_not(cfg, elsa)


def test_a_run_killed_with_an_evaluation_beside_redoes_it_on_resume(pico_zoo, tmp_path, monkeypatch):
    """The checkpoint of round 2 was written while round 2 was being scored beside: resuming from it scores
    round 2 again (in line) and ends with the uninterrupted run's scores."""
    from fedlab import interrupt

    full = _run(tmp_path, "full", "eval.overlap=true")
    real = interrupt.stop_point

    def stop_after_round_2(rnd):
        if rnd == 2:
            raise KeyboardInterrupt
        return real(rnd)

    monkeypatch.setattr(interrupt, "stop_point", stop_after_round_2)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, "killed", "eval.overlap=true")
    monkeypatch.setattr(interrupt, "stop_point", real)
    from fedlab.runtime.federation import load_checkpoint, run_dir

    cfg = _cfg_of_dir(tmp_path / "killed")
    ck = load_checkpoint(run_dir(cfg) / "checkpoint.pt")
    assert ck["round"] == 2 and ck["history"][-1].get("eval/pending")
    resumed = _run(tmp_path, "killed", "eval.overlap=true", "resume=true")
    assert _scores(resumed) == _scores(full)


def _cfg_of_dir(out: Path):
    from fedlab.config import load_config

    return load_config(next(out.glob("*/config.yaml")), [])


def test_the_last_round_is_split_by_task_and_each_half_scores_only_its_tasks(pico_zoo):
    from fedlab.comm.messages import EvalIns
    from fedlab.config import load_config
    from fedlab.runtime import overlap
    from fedlab.runtime.host import ClientHost

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN)
    host = ClientHost(cfg, [0, 1])
    state = host.resident_for(0).init_state
    asked = {cid: EvalIns(4, state, {"tag": "global/4"}) for cid in (0, 1)}
    there, here = overlap.halves(asked, {0: ["recall", "sentiment"], 1: ["recall", "sentiment"]})
    assert [i.config["tasks"] for i in there.values()] == [["recall"]] * 2
    assert [i.config["tasks"] for i in here.values()] == [["sentiment"]] * 2
    a, b = host.evaluate(0, there[0]), host.evaluate(0, here[0])
    assert any("recall" in k for k in a.metrics) and all("sentiment" not in k for k in a.metrics)
    assert any("sentiment" in k for k in b.metrics) and all("recall" not in k for k in b.metrics)
    whole = host.evaluate(0, EvalIns(4, state, {"tag": None}))
    assert overlap.joined({0: a}, {0: b})[0].metrics == whole.metrics
    assert overlap.halves(asked, {0: ["recall"], 1: ["recall"]}) == ({}, asked)
