"""A task on which every compared model gives one constant answer is flagged (guidelines: 'flag any task on
which every model gives one constant answer'): the scorer logs the most frequent answer's share per task, the
table helpers flag tasks where it is 1.0 in every run of every row."""
from __future__ import annotations

import json

from fedlab.comm.messages import EvalRes
from fedlab.data.tasks import Example
from fedlab.eval.multiple_choice import top_answer_share
from fedlab.eval.summary import summarize_eval
from fedlab.evidence.runner import Results, constant_answer_note


def _ex(label: int) -> Example:
    return Example("q", ["yes", "no"][label], "sentiment", "d", choices=("yes", "no"), label=label)


def test_top_answer_share_by_hand():
    exs = [_ex(0), _ex(1), _ex(0), _ex(1)]
    assert top_answer_share(exs, [0, 0, 0, 0]) == 1.0          # "yes" throughout
    assert top_answer_share(exs, [0, 1, 0, 0]) == 0.75
    assert top_answer_share(exs, [0, 1, 1, 0]) == 0.5


def test_the_share_reaches_the_round_summary():
    res = {0: EvalRes(0, 1, {"acc/sentiment": 0.5, "top/sentiment": 1.0, "n/sentiment": 4}),
           1: EvalRes(1, 1, {"acc/sentiment": 0.5, "top/sentiment": 0.5, "n/sentiment": 4})}
    assert summarize_eval(res)["top/task_sentiment"] == 0.75


def _results(tmp_path, shares: dict[str, list]) -> Results:
    recs = {}
    for key, vals in shares.items():
        for seed, v in enumerate(vals):
            final = {"acc/task_sentiment": 0.54, "acc/task_topic": 0.9, "top/task_topic": 0.3}
            if v is not None:
                final["top/task_sentiment"] = v
            recs[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": final}
    (tmp_path / "results.json").write_text(json.dumps(recs))
    return Results(tmp_path / "results.json")


def test_a_task_every_row_answers_constantly_is_flagged(tmp_path):
    r = _results(tmp_path, {"a": [1.0, 1.0], "b": [1.0, 1.0]})
    assert r.constant_answers(["a", "b"]) == {"sentiment": "constant"}
    assert "**Constant answers**: on sentiment" in "\n".join(constant_answer_note(r, ["a", "b"]))
    r = _results(tmp_path, {"a": [1.0, 1.0], "b": [1.0, 0.9]})      # one run answers variously: not flagged
    assert r.constant_answers(["a", "b"]) == {} and constant_answer_note(r, ["a", "b"]) == []
    r = _results(tmp_path, {"a": [1.0, None], "b": [1.0, 1.0]})     # an old record: cannot tell
    assert r.constant_answers(["a", "b"]) == {"sentiment": "unknown"}
