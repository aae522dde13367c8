"""lm-evaluation-harness on a run's exported model: `fedlab eval RUN --lm-eval embedded` scores the embedded
tasks offline from the test items fedlab writes, and agrees with fedlab's own multiple-choice scorer — item by
item on the log-likelihoods, and on the accuracy a run logged, zero-shot and after training."""
from __future__ import annotations

import pytest

from conftest import PICO

lm_eval = pytest.importorskip("lm_eval")

TASKS = ["recall", "sentiment", "topic"]


@pytest.fixture(scope="module")
def trained_run(pico_zoo, tmp_path_factory):
    from fedlab.config import load_config
    from fedlab.experiment import run_experiment

    out = tmp_path_factory.mktemp("lmeval")
    cfg = load_config(None, PICO + ["data.partition=iid", "data.num_clients=2", f"data.tasks=[{','.join(TASKS)}]",
                                    "tracking.enabled=false", "method.name=fedavg", "federation.lr=0.01",
                                    f"output_dir={out}/runs"])
    return cfg, run_experiment(cfg, progress=False), out


@pytest.mark.federation
def test_lm_eval_agrees_with_fedlab_zero_shot_and_after_training(trained_run, capsys):
    from fedlab.cli import main

    cfg, history, out = trained_run
    assert main(["eval", history.out_dir, "--lm-eval", "embedded", "--base"]) == 0
    printed = dict(line.split("\t") for line in capsys.readouterr().out.splitlines() if line.startswith("lmeval"))
    trained = {t: history.final[f"acc/task_{t}"] for t in TASKS}
    assert trained != {t: history.rounds[0][f"acc/task_{t}"] for t in TASKS}      # training moved something
    for t in TASKS:
        assert float(printed[f"lmeval/{t}/acc"]) == pytest.approx(trained[t], abs=1e-9)
        assert float(printed[f"lmeval_base/{t}/acc"]) == pytest.approx(history.rounds[0][f"acc/task_{t}"], abs=1e-9)


def test_lm_eval_log_likelihoods_are_fedlabs_item_by_item(trained_run, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from fedlab.data.federated import build_federated_data
    from fedlab.eval.harness import evaluate_folder, write_tasks
    from fedlab.eval.multiple_choice import choice_loglikelihoods
    from fedlab.models.zoo import resolve

    cfg, _, _ = trained_run
    names = write_tasks(cfg, tmp_path / "tasks")
    assert names == [f"fedlab_{t}" for t in TASKS]
    samples: dict = {}
    base = resolve(cfg.model.name)
    evaluate_folder(base, cfg, ["fedlab_recall"], tmp_path / "tasks", samples=samples)
    theirs = [[float(r[0][0]) for r in s["resps"]] for s in sorted(samples["fedlab_recall"], key=lambda s: s["doc_id"])]
    model, tok = AutoModelForCausalLM.from_pretrained(base), AutoTokenizer.from_pretrained(base)
    ours = choice_loglikelihoods(model, tok, build_federated_data(cfg.data, cfg.seed).test_examples("recall"),
                                 cfg.model.max_length)
    assert len(theirs) == len(ours) == cfg.data.test_per_task
    for a, b in zip(theirs, ours):
        assert a == pytest.approx(b, abs=1e-4)


def test_an_unknown_task_is_one_line(trained_run, tmp_path):
    from fedlab.config import ConfigError
    from fedlab.eval.harness import evaluate_run

    _, history, _ = trained_run
    with pytest.raises(ConfigError, match=r"unknown task\(s\) fedlab_no_such_task; the run's embedded tasks: embedded, "
                                          r"fedlab_recall"):
        evaluate_run(history.out_dir, ["fedlab_no_such_task"], tmp_path)


@pytest.mark.federation
def test_every_party_of_a_multi_party_run_is_scored(pico_zoo, tmp_path):
    """FedProxy exports the proxy (an adapter over its own blocks) and the fused LLM (whole weights): each is
    scored under its role, and the fused LLM's accuracy is the one the run logged for it."""
    from fedlab.config import load_config
    from fedlab.eval.harness import evaluate_run
    from fedlab.experiment import run_experiment

    cfg = load_config(None, PICO + ["federation.rounds=1", "method.name=fedproxy", "method.bi_samples=8",
                                    "data.num_clients=2", "data.partition=iid", "data.tasks=[recall]",
                                    "tracking.enabled=false", f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    got = evaluate_run(h.out_dir, ["embedded"], tmp_path / "work")
    assert {"lmeval/proxy/recall/acc", "lmeval/llm/recall/acc"} <= set(got)
    assert got["lmeval/llm/recall/acc"] == pytest.approx(h.final["llm/acc/task_recall"], abs=1e-9)
    assert got["lmeval/proxy/recall/acc"] == pytest.approx(h.final["acc/task_recall"], abs=1e-9)


@pytest.mark.federation
@pytest.mark.slow   # 20 s; the default tier loads such a folder in tests/cli/test_export.py (default tier ≤ 10 min on 2 cores)
def test_a_model_with_adapters_inside_its_blocks_is_scored_through_its_own_code(pico_zoo, tmp_path):
    """FedAP's export brings its adapters' code; lm-eval loads it (trust_remote_code) and scores what the run
    logged."""
    from fedlab.config import load_config
    from fedlab.eval.harness import evaluate_run
    from fedlab.experiment import run_experiment

    cfg = load_config(None, PICO + ["federation.rounds=1", "method.name=fedap", "data.num_clients=2",
                                    "data.partition=iid", "data.tasks=[recall]", "tracking.enabled=false",
                                    f"output_dir={tmp_path}/runs"])
    h = run_experiment(cfg, progress=False)
    got = evaluate_run(h.out_dir, ["embedded"], tmp_path / "work")
    assert got["lmeval/recall/acc"] == pytest.approx(h.final["acc/task_recall"], abs=1e-9)
