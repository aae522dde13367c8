"""Hugging Face data set adapters on rows the test writes as JSON, shaped like the Hub's."""
import json

import pytest

from fedlab.config import load_config
from fedlab.data.federated import build_federated_data
from fedlab.data.hf import HF_TASKS, hf_examples

ROWS = {
    "arc_easy": {"question": "Which is a gas?", "choices": {"text": ["rock", "steam", "wood", "iron"],
                                                            "label": ["A", "B", "C", "D"]}, "answerKey": "B"},
    "arc_challenge": {"question": "Which is a gas?", "choices": {"text": ["rock", "steam", "wood", "iron"],
                                                                 "label": ["1", "2", "3", "4"]}, "answerKey": "2"},
    "openbookqa": {"question_stem": "The sun is a", "choices": {"text": ["star", "moon", "rock", "tree"],
                                                                "label": ["A", "B", "C", "D"]}, "answerKey": "A"},
    "commonsense_qa": {"question": "Where do fish live?", "choices": {"label": list("ABCDE"),
                       "text": ["sky", "water", "desk", "car", "tree"]}, "answerKey": "B"},
    "sst2": {"sentence": "a fine film ", "label": 1},
    "mrpc": {"sentence1": "He left.", "sentence2": "He went away.", "label": 1},
    "rte": {"sentence1": "A cat sleeps.", "sentence2": "An animal sleeps.", "label": 0},
    "mnli": {"premise": "A man runs.", "hypothesis": "Nobody runs.", "label": 2},
    "boolq": {"question": "is the sky blue", "passage": "The sky is blue.", "answer": True},
    "wic": {"word": "bank", "sentence1": "river bank", "sentence2": "bank loan", "label": 0},
    "mmlu": {"question": "What is 2 + 2?", "subject": "elementary_mathematics", "choices": ["3", "4", "5", "22"],
             "answer": 1},
    "sni": {"task_name": "task001_quoref_question_generation", "definition": "Write a question about the passage.",
            "inputs": "Tom met Ann in Rome.", "targets": "Where did Tom meet Ann?"},
    # BIG-Bench Hard (lukaemon/bbh): input and the answer as written
    "bbh_boolean_expressions": {"input": "not ( True ) and ( True ) is", "target": "False"},
    "bbh_causal_judgement": {"input": "Did the spark cause the fire? Options: - Yes - No", "target": "Yes"},
    "bbh_formal_fallacies": {"input": "Is the argument deductively valid? Options: - valid - invalid",
                             "target": "invalid"},
    "bbh_navigate": {"input": "Take 1 step. Take 1 step back. Do you return to the start? Options: - Yes - No",
                     "target": "Yes"},
    "bbh_sports_understanding": {"input": "Is the following sentence plausible? \"Messi scored a touchdown.\"",
                                 "target": "no"},
    "bbh_web_of_lies": {"input": "Ka lies. Does Ka tell the truth?", "target": "No"},
    # ELSA's data sets (paper 002)
    "ag_news": {"text": "Stocks rallied as the central bank held rates.", "label": 2},
    "banking77": {"text": "I still have not received my new card.", "label": 11},
    "emotion": {"text": "i feel so happy today", "label": 1},
    "trec": {"text": "How far is it from Denver to Aspen ?", "coarse_label": 5, "fine_label": 40},
    "cb": {"premise": "It was raining.", "hypothesis": "It was dry.", "label": 1, "idx": 0},
    "multirc": {"paragraph": "Ann went to Rome in May.", "question": "Where did Ann go?", "answer": "Rome",
                "idx": {"paragraph": 0, "question": 0, "answer": 0}, "label": 1},
    "squad": {"id": "5733be284776f41900661182", "title": "Rome", "context": "Ann went to Rome in May.",
              "question": "When did Ann go to Rome?", "answers": {"text": ["in May", "May"], "answer_start": [17, 20]}},
}
EXPECTED = {"arc_easy": "steam", "arc_challenge": "steam", "openbookqa": "star", "commonsense_qa": "water",
            "sst2": "positive", "mrpc": "yes", "rte": "yes", "mnli": "no", "boolq": "yes", "wic": "no",
            "bbh_boolean_expressions": "False", "bbh_causal_judgement": "Yes", "bbh_formal_fallacies": "invalid",
            "mmlu": "4", "sni": "Where did Tom meet Ann?", "bbh_navigate": "Yes", "bbh_sports_understanding": "no", "bbh_web_of_lies": "No",
            "ag_news": "business", "banking77": "card arrival", "emotion": "joy", "trec": "number", "cb": "no",
            "multirc": "yes", "squad": "in May"}


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    for name, row in ROWS.items():
        (root / name).mkdir()
        for split in ("train", "test"):
            (root / name / f"{split}.jsonl").write_text("\n".join(json.dumps(row) for _ in range(6)) + "\n")
    return root


def test_every_adapter_is_covered_here():
    assert set(ROWS) == set(HF_TASKS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_adapter_maps_rows_to_prompt_choices_label(hf_dir, name):
    (ex,) = hf_examples(name, "train", 1, str(hf_dir))
    assert ex.target == EXPECTED[name] and ex.prompt.endswith(":")
    if HF_TASKS[name].n_choices:
        assert ex.choices[ex.label] == ex.target and len(ex.choices) == HF_TASKS[name].n_choices
    else:                                         # generative: scored by Rouge-L / EM
        assert ex.choices is None and HF_TASKS[name].chance == 0.0


def test_data_source_hf_builds_federated_data(hf_dir):
    cfg = load_config(None, ["data.source=hf:sst2", f"data.hf_dir={hf_dir}", "data.num_clients=3",
                             "data.partition=iid", "data.train_per_task=6", "data.test_per_task=4"])
    data = build_federated_data(cfg.data, 0)
    assert data.sizes() == [2, 2, 2] and list(data.test) == ["sst2"] and data.chance["sst2"] == 0.5


def test_several_hf_tasks_in_one_run_are_tasks_like_the_embedded_ones(hf_dir):
    cfg = load_config(None, ["data.source=hf:bbh_navigate+bbh_web_of_lies+sst2", f"data.hf_dir={hf_dir}",
                             "data.num_clients=3", "data.partition=by_task", "data.train_per_task=6",
                             "data.test_per_task=4"])
    data = build_federated_data(cfg.data, 0)
    assert list(data.test) == ["bbh_navigate", "bbh_web_of_lies", "sst2"] and data.sizes() == [6, 6, 6]
    assert [data.client_tasks(c) for c in range(3)] == [["bbh_navigate"], ["bbh_web_of_lies"], ["sst2"]]
    from fedlab.config import ConfigError

    with pytest.raises(ConfigError, match="data.num_clients"):
        load_config(None, ["data.source=hf:bbh_navigate+sst2", "data.num_clients=1", "data.partition=by_task"])
    with pytest.raises(ConfigError, match="data.source: 'hf:bbh_navgate' is not allowed"):
        load_config(None, ["data.source=hf:bbh_navgate+sst2"])
    assert HF_TASKS["bbh_navigate"].splits == {"train": "test[:60%]", "test": "test[60%:]"}


def test_mmlu_and_sni_carry_their_domains_for_dirichlet_domain_skew(hf_dir):
    (m,) = hf_examples("mmlu", "train", 1, str(hf_dir))
    (g,) = hf_examples("sni", "train", 1, str(hf_dir))
    assert (m.task, m.domain, m.label) == ("mmlu", "elementary_mathematics", 1) and "B. 4" in m.prompt
    assert (g.task, g.domain) == ("sni", "task001_quoref_question_generation")


def test_missing_local_rows_say_where(tmp_path):
    with pytest.raises(FileNotFoundError, match="data.hf_dir"):
        hf_examples("sst2", "train", 1, str(tmp_path))


def test_hub_failure_is_one_clear_line(monkeypatch):
    import datasets

    from fedlab.config import ConfigError

    def offline(*a, **k):
        raise ConnectionError("Couldn't reach 'nyu-mll/glue' on the Hub (LocalEntryNotFoundError)")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(ConfigError, match="data.source: could not load nyu-mll/glue/sst2.*data.hf_dir"):
        hf_examples("sst2", "train", 1)


def test_elsa_data_sets_label_spaces():
    from fedlab.data.hf import BANKING77_CHOICES

    assert len(set(BANKING77_CHOICES)) == 77 and BANKING77_CHOICES[51] == "refund not showing up"
    assert {n: HF_TASKS[n].n_choices for n in ("ag_news", "emotion", "trec", "cb", "multirc", "squad")} == {
        "ag_news": 4, "emotion": 6, "trec": 6, "cb": 3, "multirc": 2, "squad": 0}
    with pytest.raises(ValueError, match="squad: a row without an answer"):
        from fedlab.data.hf import squad

        squad({"context": "c", "question": "q", "answers": {"text": [], "answer_start": []}})
