"""An Alpaca-shaped public set from rows on disk (`data.public_path`), on rows the test writes."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from fedlab.config import ConfigError, load_config
from fedlab.data.federated import build_federated_data

ROWS = [{"instruction": "Give three tips for staying healthy.", "input": "", "output": "Eat well, sleep, move."},
        {"instruction": "Translate to French.", "input": "good morning", "output": "bonjour"},
        {"instruction": "Name a prime number.", "output": "7"},            # no input key at all
        {"instruction": "Sum the numbers.", "input": "2 and 3", "output": "5"}]


def _cfg(*extra):
    return load_config(None, ["data.tasks=[recall,topic]", "data.num_clients=2", "data.train_per_task=8",
                              "data.test_per_task=4", *extra])


@pytest.mark.parametrize("shape", ["jsonl", "json"])
def test_public_rows_from_a_file_become_the_public_set(tmp_path, shape):
    path = tmp_path / f"alpaca.{shape}"
    path.write_text("\n".join(json.dumps(r) for r in ROWS) if shape == "jsonl" else json.dumps(ROWS))
    data = build_federated_data(_cfg(f"data.public_path={path}", "data.public_size=4").data, 0)
    assert [(e.prompt, e.target) for e in data.public] == [
        ("instruction: Give three tips for staying healthy. response:", "Eat well, sleep, move."),
        ("instruction: Translate to French. input: good morning response:", "bonjour"),
        ("instruction: Name a prime number. response:", "7"),
        ("instruction: Sum the numbers. input: 2 and 3 response:", "5")]
    assert all(e.task == "public" and not e.is_choice for e in data.public)
    two = [e.target for e in build_federated_data(_cfg(f"data.public_path={path}", "data.public_size=2").data, 0).public]
    again = [e.target for e in build_federated_data(_cfg(f"data.public_path={path}", "data.public_size=2").data, 0).public]
    assert len(two) == 2 and two == again                                   # seeded draw


def test_bad_public_files_are_one_clear_line(tmp_path):
    from fedlab.experiment import preflight

    path = tmp_path / "alpaca.jsonl"
    path.write_text(json.dumps(ROWS[0]) + "\n" + json.dumps({"instruction": "no answer"}) + "\n")
    with pytest.raises(ConfigError, match=r"row 1 of .* lacks the text field\(s\) \['output'\]"):
        preflight(_cfg(f"data.public_path={path}", "data.public_size=1"))
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    with pytest.raises(ConfigError, match="data.public_size: 5 is more than the 4 rows"):
        preflight(_cfg(f"data.public_path={path}", "data.public_size=5"))
    with pytest.raises(ConfigError, match="data.public_path: .* is not a file"):
        preflight(_cfg(f"data.public_path={tmp_path}/missing.jsonl"))
    with pytest.raises(ConfigError, match="data.public_path"):
        _cfg(f"data.public_path={path}", "data.public_source=holdout")


def test_the_paper_scale_heterogeneous_setting_builds_on_rows_the_test_writes(tmp_path):
    """experiments/fedproxy/paper_hetero_llama2_7b.yaml: eight clients, one Hugging Face data set each, and the
    Alpaca-shaped public file (rows the test writes, sizes scaled down)."""
    from pathlib import Path

    from test_hf_adapters import ROWS as HF_ROWS

    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments/fedproxy/paper_hetero_llama2_7b.yaml")
    names = cfg.data.hf_tasks()
    assert len(names) == 8 and cfg.data.partition == "by_task" and cfg.data.public_path
    for n in names:
        (tmp_path / "hf" / n).mkdir(parents=True)
        for split in ("train", "test"):
            (tmp_path / "hf" / n / f"{split}.jsonl").write_text("\n".join(json.dumps(HF_ROWS[n]) for _ in range(6)))
    (tmp_path / "alpaca.json").write_text(json.dumps(ROWS))
    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments/fedproxy/paper_hetero_llama2_7b.yaml",
                      [f"data.hf_dir={tmp_path}/hf", f"data.public_path={tmp_path}/alpaca.json", "data.public_size=3", "method.bi_samples=3",
                       "data.train_per_task=6", "data.test_per_task=4"])
    data = build_federated_data(cfg.data, 0)
    assert [data.client_tasks(c) for c in range(8)] == [[n] for n in names]
    assert len(data.public) == 3 and all(e.prompt.startswith("instruction: ") for e in data.public)


def test_evaluate_on_validation_holds_training_rows_out_and_never_reads_the_test_set(monkeypatch):
    """data.evaluate_on=validation (tune on a validation split): per task, validation_per_task
    training rows replace the test set and leave the training pool; the test rows are not built."""
    import fedlab.data.federated as fed

    base = ["data.partition=iid", "data.train_per_task=8", "data.test_per_task=4"]
    test_run = build_federated_data(_cfg(*base).data, 0)
    calls = []
    real = fed.task_examples
    monkeypatch.setattr(fed, "task_examples", lambda t, split, *a: calls.append(split) or real(t, split, *a))
    val_run = build_federated_data(_cfg(*base, "data.evaluate_on=validation", "data.validation_per_task=3").data, 0)
    assert "test" not in calls
    assert {t: len(v) for t, v in val_run.test.items()} == {"recall": 3, "topic": 3}
    pooled_test_run = {e.prompt for e in test_run.pooled_train()}
    held = {e.prompt for v in val_run.test.values() for e in v}
    assert held <= pooled_test_run and not held & {e.prompt for e in val_run.pooled_train()}
    assert len(val_run.pooled_train()) <= len(test_run.pooled_train()) - 6
    assert not held & {e.prompt for v in test_run.test.values() for e in v}
    with pytest.raises(ConfigError, match="data.validation_per_task"):
        _cfg(*base, "data.evaluate_on=validation", "data.validation_per_task=8")


def test_validation_from_held_draws_each_task_from_its_test_population_apart_from_the_test_items():
    """data.validation_from=held: a task whose held-out population has room (two_hop, topic) is validated on
    fresh rows about that population — none asks what a test item asks, none is a training prompt — and keeps
    its training rows whole; a task whose test set asks about nearly all of its people (recall) falls back to
    rows held out of its training data."""
    from fedlab.data.federated import validation_fallbacks, validation_sources

    base = ["data.partition=iid", "data.tasks=[recall,two_hop,topic]", "data.train_per_task=40",
            "data.test_per_task=300", "data.evaluate_on=validation", "data.validation_per_task=20"]
    test_run = build_federated_data(_cfg(*base[:-2]).data, 0)
    held_cfg = _cfg(*base, "data.validation_from=held").data
    held_run, train_run = build_federated_data(held_cfg, 0), build_federated_data(_cfg(*base).data, 0)
    assert validation_sources(held_cfg) == {"recall": "train", "two_hop": "held", "topic": "held"}
    assert validation_fallbacks(held_cfg) == {"recall": "crowded"}
    assert {t: len(v) for t, v in held_run.test.items()} == {"recall": 20, "two_hop": 20, "topic": 20}
    asked = {e.prompt for v in test_run.test.values() for e in v}
    trained = {e.prompt for e in test_run.pooled_train()}
    for t in ("two_hop", "topic"):
        prompts = [e.prompt for e in held_run.test[t]]
        assert len(set(prompts)) == 20 and not set(prompts) & (asked | trained), t
        rows = [sorted(e.prompt for e in run.pooled_train() if e.task == t) for run in (held_run, test_run)]
        assert rows[0] == rows[1], t                                    # the same rows (the partition may differ)
    assert held_run.test["recall"] == train_run.test["recall"]          # the fallback is the "train" split's
    assert len([e for e in held_run.pooled_train() if e.task == "recall"]) < 40
    assert build_federated_data(held_cfg, 1).test["two_hop"] != held_run.test["two_hop"]   # a draw per seed
    assert validation_sources(_cfg(*base[:-2]).data) == {}


def test_validation_from_held_is_refused_where_there_is_no_held_out_population():
    with pytest.raises(ConfigError, match="data.validation_from"):
        _cfg("data.source=hf:rte", "data.evaluate_on=validation", "data.validation_from=held")


def test_held_tasks_validate_on_as_many_rows_as_asked_while_the_fallback_holds_out_its_own_few():
    """validation_holdout_per_task sets the training hold-out of the fallback tasks apart from the held tasks'
    size: topic is validated on 120 fresh rows, recall on 5 of its 40 training rows; without it, 120 would have to
    come out of recall's 40 and the config says so, naming the key that sets it apart."""
    base = ["data.partition=iid", "data.tasks=[recall,topic]", "data.train_per_task=40", "data.test_per_task=300",
            "data.evaluate_on=validation", "data.validation_per_task=120", "data.validation_from=held"]
    run = build_federated_data(_cfg(*base, "data.validation_holdout_per_task=5").data, 0)
    assert {t: len(v) for t, v in run.test.items()} == {"recall": 5, "topic": 120}
    assert len([e for e in run.pooled_train() if e.task == "topic"]) == 40
    with pytest.raises(ConfigError, match="validation_holdout_per_task sets the hold-out apart"):
        _cfg(*base)


def test_validation_refills_train_keeps_each_held_out_task_at_the_test_runs_training_size():
    """validation_refills_train: a task validated on rows held out of its training data trains on
    train_per_task rows again — the rows it kept first, in order, then further rows of its training draw, none
    asking a held-out prompt — while a task validated on held rows is left as it is."""
    base = ["data.partition=iid", "data.tasks=[recall,topic]", "data.train_per_task=40", "data.test_per_task=300",
            "data.evaluate_on=validation", "data.validation_per_task=60", "data.validation_from=held",
            "data.validation_holdout_per_task=12"]
    shrunk = build_federated_data(_cfg(*base).data, 0)
    refilled = build_federated_data(_cfg(*base, "data.validation_refills_train=true").data, 0)
    kept, rows = (Counter(repr(e) for e in run.pooled_train() if e.task == "recall") for run in (shrunk, refilled))
    assert kept.total() < 40 and rows.total() == 40
    assert kept <= rows                                                 # the rows it kept, and more of the draw
    trained = {e.prompt for e in refilled.pooled_train() if e.task == "recall"}
    assert not trained & {e.prompt for e in refilled.test["recall"]}
    assert refilled.test == shrunk.test
    topic = [sorted(e.prompt for e in run.pooled_train() if e.task == "topic") for run in (shrunk, refilled)]
    assert topic[0] == topic[1] and len(topic[0]) == 40


def test_validation_refills_train_is_refused_where_no_population_can_refill():
    with pytest.raises(ConfigError, match="data.validation_refills_train"):
        _cfg("data.source=hf:rte", "data.evaluate_on=validation", "data.validation_per_task=4",
             "data.validation_refills_train=true")


def test_answer_quotas_give_each_answer_its_share_with_the_leftover_rows_to_the_largest_remainders():
    from fedlab.data.federated import answer_quotas

    assert answer_quotas(["yes", "yes", "no"], 4) == {"yes": 3, "no": 1}          # 2.67 → 3, 1.33 → 1
    assert answer_quotas(["a", "b", "c"], 4) == {"a": 2, "b": 1, "c": 1}          # a tie: the answer seen first
    assert answer_quotas(["no"] * 3 + ["yes"] * 7, 20) == {"no": 6, "yes": 14}


def test_held_validation_keeping_shares_matches_the_test_sets_answers_or_falls_back_to_train():
    """validation_keeps_shares: each held task's fresh rows carry its test set's answer shares (sentiment's
    yes/no as its test set has them); paraphrase, whose fresh prompts are nearly all "no", cannot fill its "yes"
    share and is validated on rows held out of its training data instead. Without it the draw is what it was:
    paraphrase's fresh rows nearly all "no", where answering "no" alone scores over 90."""
    from fedlab.data.federated import answer_quotas, validation_fallbacks, validation_sources

    base = ["data.partition=iid", "data.tasks=[sentiment,paraphrase]", "data.train_per_task=40",
            "data.test_per_task=300", "data.evaluate_on=validation", "data.validation_per_task=300",
            "data.validation_from=held", "data.validation_holdout_per_task=8"]
    test = build_federated_data(_cfg(*base[:-4]).data, 0).test
    drawn_cfg, kept_cfg = _cfg(*base).data, _cfg(*base, "data.validation_keeps_shares=true").data
    drawn, kept = build_federated_data(drawn_cfg, 0).test, build_federated_data(kept_cfg, 0).test
    assert Counter(e.target for e in drawn["paraphrase"])["no"] > 270 and len(drawn["paraphrase"]) == 300
    assert validation_sources(kept_cfg) == {"sentiment": "held", "paraphrase": "train"}
    assert validation_fallbacks(kept_cfg) == {"paraphrase": "shares"} and validation_fallbacks(drawn_cfg) == {}
    assert len(kept["paraphrase"]) == 8
    want = answer_quotas([e.target for e in test["sentiment"]], 300)
    assert dict(Counter(e.target for e in kept["sentiment"])) == want != dict(Counter(e.target for e in drawn["sentiment"]))
    assert not {e.prompt for e in kept["sentiment"]} & {e.prompt for e in test["sentiment"]}


def test_holdout_keeping_shares_holds_the_fallback_tasks_prompts_out_in_the_test_sets_answer_shares():
    """validation_holdout_keeps_shares: recall, which falls back to rows held out of its training data (its test
    set asks about nearly all of its population), is validated on 32 prompts in its test set's answer shares
    wherever its training prompts hold enough of an answer, the rest made up from the others; without it the
    held-out prompts are the plain draw, whose shares follow the training population's (dakar over-represented).
    Neither reads a test item as a validation row, and the held-out prompts leave the training data."""
    from fedlab.data.federated import answer_quotas

    base = ["data.partition=iid", "data.tasks=[recall,topic]", "data.train_per_task=80", "data.test_per_task=300",
            "data.evaluate_on=validation", "data.validation_per_task=120", "data.validation_from=held",
            "data.validation_holdout_per_task=32", "data.validation_keeps_shares=true"]
    test = build_federated_data(_cfg(*base[:4]).data, 0).test["recall"]
    want = answer_quotas([e.target for e in test], 32)
    drawn = build_federated_data(_cfg(*base).data, 0)
    kept = build_federated_data(_cfg(*base, "data.validation_holdout_keeps_shares=true").data, 0)
    shares = [Counter(e.target for e in run.test["recall"]) for run in (drawn, kept)]
    assert shares[0].total() == shares[1].total() == 32
    prompts = {e.prompt: e.target for e in [*kept.pooled_train(), *kept.test["recall"]] if e.task == "recall"}
    there = Counter(prompts.values())                 # the training prompts each answer has
    short = sum(max(0, k - there[a]) for a, k in want.items())
    assert 0 < short < 8
    off = [sum(abs(c[a] - want.get(a, 0)) for a in set(c) | set(want)) for c in shares]
    assert off[1] == 2 * short < off[0]     # off only by the rows the training prompts cannot give, moved elsewhere
    assert all(shares[1][a] >= min(k, there[a]) for a, k in want.items())
    assert shares[0]["dakar"] > shares[1]["dakar"]
    assert not {e.prompt for e in kept.test["recall"]} & {e.prompt for e in kept.pooled_train() if e.task == "recall"}
    assert kept.test["topic"] == drawn.test["topic"]          # a held task is drawn as before


def test_holdout_keeping_shares_is_refused_without_keeping_shares():
    with pytest.raises(ConfigError, match="data.validation_holdout_keeps_shares"):
        _cfg("data.train_per_task=40", "data.evaluate_on=validation", "data.validation_from=held",
             "data.validation_holdout_per_task=4", "data.validation_holdout_keeps_shares=true")
