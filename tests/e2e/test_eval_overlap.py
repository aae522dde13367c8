"""`eval.overlap` scores round t in a second process while round t + 1 trains — the same scores
as in line, in the same rounds' records and in MLflow; methods whose evaluation reads more than its instructions
evaluate in line and say so; a run killed while an evaluation was beside resumes with that evaluation redone."""
from __future__ import annotations

from pathlib import Path

import pytest

from conftest import PICO

ROOT = Path(__file__).resolve().parents[2]
# four tasks (one generative): the last round's split puts recall and topic in the second process
RUN = PICO + ["method.name=fedavg", "data.partition=iid", "data.num_clients=2",
              "data.tasks=[recall,sentiment,topic,food]", "data.test_per_task=8",
              "federation.rounds=4", "eval.every=2", "eval.cache=false"]


def _run(tmp_path, name, *extra):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + [f"tracking.uri=sqlite:///{tmp_path}/m.db",
                                                                 f"tracking.artifact_root={tmp_path}/a",
                                                                 f"output_dir={tmp_path}/{name}", *extra])
    return run_experiment(cfg, progress=True)


def _scores(h) -> dict:
    """Every score of every round, in the order it was recorded (insertion order: summed in that order)."""
    return {r["round"]: [(k, v) for k, v in r.items() if k.startswith(("acc/", "top/", "n/", "rougeL/", "em/"))
                         or k == "eval/pending"] for r in h.rounds}


@pytest.mark.federation
def test_overlap_gives_the_in_line_scores_in_the_same_rounds(pico_zoo, tmp_path, capsys):
    import mlflow

    inline = _run(tmp_path, "inline")
    beside = _run(tmp_path, "beside", "eval.overlap=true")
    err = capsys.readouterr().err
    scored = _scores(beside)
    # bit for bit and in the same order, rougeL and em included; no record keeps the pending flag
    assert scored == _scores(inline) and all(scored[r] for r in (0, 2, 4)) and not scored[1] and not scored[3]
    # rounds 0 and 2 scored by the second process, the last round split between the two
    assert [r["round"] for r in beside.rounds if "time/eval_beside" in r] == [0, 2, 4]
    assert "round 2/4 scored beside training" in err
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path}/m.db")
    client = mlflow.MlflowClient()
    hist = client.get_metric_history(beside.run_id, "acc/mean")
    assert sorted((m.step, m.value) for m in hist) == [(r, dict(scored[r])["acc/mean"]) for r in (0, 2, 4)]
    assert "eval/pending" not in client.get_run(beside.run_id).data.metrics
    # the run's identity does not depend on when it was scored
    from fedlab.config import load_config
    from fedlab.runtime.federation import run_key

    same = [ROOT / "experiments/defaults.yaml", RUN]
    assert run_key(load_config(same[0], same[1])) == run_key(load_config(same[0], [*same[1], "eval.overlap=true"]))


def test_a_method_that_evaluates_its_own_way_evaluates_in_line(pico_zoo, tmp_path, monkeypatch):
    from fedlab.config import load_config
    from fedlab.registry import get
    from fedlab.runtime import overlap

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN + ["eval.overlap=true"])
    method = get("fedavg").method_cls.__new__(get("fedavg").method_cls)
    assert overlap.why_not(cfg, method) is None
    ray = load_config(ROOT / "experiments/defaults.yaml", RUN + ["eval.overlap=true", "backend.name=ray"])
    assert "backend.name" in overlap.why_not(ray, method)
    for name in ("elsa", "standalone", "fedbiot", "coplms"):   # own evaluation, no state sent, writes into residents
        other = get(name).method_cls.__new__(get(name).method_cls)
        assert "evaluates what its instructions do not carry" in overlap.why_not(cfg, other), name
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {0})
    assert "one core" in overlap.why_not(cfg, method)


@pytest.mark.federation
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
    assert ck["round"] == 2 and ck["history"][-1].get("eval/pending") and 2 in ck["pending_eval"]
    resumed = _run(tmp_path, "killed", "eval.overlap=true", "resume=true")
    assert _scores(resumed) == _scores(full)


def _cfg_of_dir(out: Path):
    from fedlab.config import load_config

    return load_config(next(out.glob("*/config.yaml")), [])


def test_the_last_round_is_split_by_task_and_joined_in_the_clients_task_order(pico_zoo):
    from fedlab.comm.messages import EvalIns
    from fedlab.config import load_config
    from fedlab.runtime import overlap
    from fedlab.runtime.host import ClientHost

    cfg = load_config(ROOT / "experiments/defaults.yaml", RUN)
    host = ClientHost(cfg, [0, 1])
    state = host.resident_for(0).init_state
    asked = {cid: EvalIns(4, state, {"tag": None}) for cid in (0, 1)}
    tasks = {c: host.data.client_tasks(c) for c in (0, 1)}
    there, here = overlap.split_tasks(tasks)
    assert sorted(there + here) == sorted(tasks[0]) and not set(there) & set(here) and there and here
    per_task = {t: {c: host.evaluate(c, i) for c, i in overlap.asking(asked, [t]).items()} for t in there + here}
    for t, got in per_task.items():         # each call scores its one task only
        assert all(any(t in k for k in r.metrics) and not any(o in k for k in r.metrics for o in tasks[0] if o != t)
                   for r in got.values())
    whole = {c: host.evaluate(c, asked[c]) for c in (0, 1)}
    glued = overlap.joined(per_task, tasks, 4)
    assert all(list(glued[c].metrics.items()) == list(whole[c].metrics.items()) for c in (0, 1))
    failed = overlap.joined({**per_task, there[0]: {0: "RuntimeError: x", 1: per_task[there[0]][1]}}, tasks, 4)
    assert failed[0] == "RuntimeError: x" and failed[1].metrics == whole[1].metrics
    assert overlap.split_tasks({0: ["recall"], 1: ["recall"]}) == ([], ["recall"])


@pytest.mark.federation
def test_a_lost_evaluation_process_is_replaced_by_scoring_in_line(pico_zoo, tmp_path, monkeypatch, capsys):
    """The second process dies after its first answer: what it had not answered is scored in line, from the
    kept instructions, and the run ends with the in-line scores."""
    from fedlab.runtime import overlap

    inline = _run(tmp_path, "inline")
    real_receive = overlap.BesideEvaluator.receive

    def die_after_first_answer(self, wait_until):
        real_receive(self, wait_until)
        if self.inbox and not getattr(self, "_killed", False):
            self._killed = True
            self.proc.kill()
            self.proc.join()

    monkeypatch.setattr(overlap.BesideEvaluator, "receive", die_after_first_answer)
    beside = _run(tmp_path, "beside", "eval.overlap=true")
    err = capsys.readouterr().err
    assert _scores(beside) == _scores(inline)
    assert "the evaluation process is gone" in err
