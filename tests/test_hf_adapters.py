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
}
EXPECTED = {"arc_easy": "steam", "arc_challenge": "steam", "openbookqa": "star", "commonsense_qa": "water",
            "sst2": "positive", "mrpc": "yes", "rte": "yes", "mnli": "no", "boolq": "yes", "wic": "no"}


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("hf")
    for name, row in ROWS.items():
        (root / name).mkdir()
        for split in ("train", "test"):
            (root / name / f"{split}.jsonl").write_text("\n".join(json.dumps(row) for _ in range(6)) + "\n")
    return root


def test_all_ten_adapters_cover_the_registry():
    assert set(ROWS) == set(HF_TASKS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_adapter_maps_rows_to_prompt_choices_label(hf_dir, name):
    (ex,) = hf_examples(name, "train", 1, str(hf_dir))
    assert ex.target == EXPECTED[name] and ex.choices[ex.label] == ex.target
    assert ex.prompt.endswith(":") and len(ex.choices) == HF_TASKS[name].n_choices


def test_data_source_hf_builds_federated_data(hf_dir):
    cfg = load_config(None, ["data.source=hf:sst2", f"data.hf_dir={hf_dir}", "data.num_clients=3",
                             "data.partition=iid", "data.train_per_task=6", "data.test_per_task=4"])
    data = build_federated_data(cfg.data, 0)
    assert data.sizes() == [2, 2, 2] and list(data.test) == ["sst2"] and data.chance["sst2"] == 0.5


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
