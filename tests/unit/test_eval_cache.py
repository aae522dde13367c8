"""The cross-run score cache (`fedlab.eval.cache`): a hit returns what scoring returned, and anything that
changes a score — a weight, a LoRA scaling, the questions, a scorer setting — changes the key."""
import copy

import pytest
import torch

from fedlab.config import load_config
from fedlab.data.federated import build_federated_data
from fedlab.eval import cache
from fedlab.eval.tasks import evaluate_on_clients, evaluate_task
from fedlab.runtime.federation import run_key

PICO = ["model.name=pico-llama", "data.tasks=[category,sentiment]", "data.num_clients=2", "data.train_per_task=8",
        "data.test_per_task=24", "model.max_length=64"]


@pytest.fixture()
def empty_cache(tmp_path, monkeypatch):
    """An empty cache folder (the zoo stays in the session's fedlab home) and zeroed counters."""
    monkeypatch.setattr(cache, "cache_dir", lambda: tmp_path / "eval_cache")
    cache.stats.update(hits=0, misses=0)
    return tmp_path / "eval_cache"


def _setup(overrides=()):
    from fedlab.models.zoo import load_model

    cfg = load_config(None, PICO + list(overrides))
    data = build_federated_data(cfg.data, cfg.seed)
    model, tok = load_model("pico-llama")
    return cfg, data, model, tok


def test_a_second_evaluation_reads_the_stored_scores(pico_zoo, empty_cache):
    cfg, data, model, tok = _setup()
    first = evaluate_on_clients(model, tok, data, cfg)
    assert cache.stats == {"hits": 0, "misses": 2} and len(list(empty_cache.rglob("*.json"))) == 2
    second = evaluate_on_clients(model, tok, data, cfg)
    assert cache.stats == {"hits": 2, "misses": 2}
    assert {c: r.metrics for c, r in first.items()} == {c: r.metrics for c, r in second.items()}
    # what a hit returns is what scoring returns: the same numbers with the cache off
    off = load_config(None, PICO + ["eval.cache=false"])
    fresh = evaluate_on_clients(model, tok, data, off)
    assert {c: r.metrics for c, r in fresh.items()} == {c: r.metrics for c, r in first.items()}
    assert cache.stats["hits"] == 2 and len(list(empty_cache.rglob("*.json"))) == 2


def test_the_key_changes_with_weights_scaling_questions_and_settings(pico_zoo, empty_cache):
    cfg, data, model, tok = _setup()
    base = cache.model_digest(model)
    assert cache.model_digest(model) == base                       # deterministic
    other = copy.deepcopy(model)
    with torch.no_grad():
        next(other.parameters()).view(-1)[0] += 1e-6
    assert cache.model_digest(other) != base                       # one weight moves by 1e-6

    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj"]))
    scaled = get_peft_model(copy.deepcopy(model), LoraConfig(r=4, lora_alpha=16, target_modules=["q_proj"]))
    scaled.load_state_dict(lora.state_dict())                       # same bytes, other LoRA scaling
    assert cache.model_digest(lora) != cache.model_digest(scaled)

    ex = data.test_examples("category")
    settings = {"kind": "choice", "length_normalized": False}
    key = cache.score_key(base, tok, ex, settings, "cpu")
    assert cache.score_key(base, tok, ex[:-1], settings, "cpu") != key
    assert cache.score_key(base, tok, ex, {**settings, "length_normalized": True}, "cpu") != key
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(threads + 1)
        assert cache.score_key(base, tok, ex, settings, "cpu") != key
    finally:
        torch.set_num_threads(threads)
    norm = load_config(None, PICO + ["eval.length_normalized=true"])
    evaluate_task(model, tok, data, "category", cfg)
    evaluate_task(model, tok, data, "category", norm)
    assert cache.stats == {"hits": 0, "misses": 2}


def test_wrappers_it_cannot_see_into_are_scored_every_time(pico_zoo, empty_cache):
    cfg, data, model, tok = _setup()

    class Wrapper(torch.nn.Module):          # a fusion-like module: its outputs depend on more than its state
        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.temperature = lambda x: x

        def forward(self, **kw):
            return self.inner(**kw)

    assert not cache.cacheable(Wrapper(model)) and cache.cacheable(model)
    evaluate_task(Wrapper(model), tok, data, "category", cfg)
    assert cache.stats == {"hits": 0, "misses": 0} and not empty_cache.exists()


def test_the_cache_setting_is_not_part_of_a_runs_identity():
    assert run_key(load_config(None, PICO)) == run_key(load_config(None, PICO + ["eval.cache=false"]))
    assert run_key(load_config(None, PICO)) != run_key(load_config(None, PICO + ["eval.batch_size=8"]))


def test_a_lora_configs_module_sets_enter_the_digest_sorted():
    import types

    from peft import LoraConfig

    model = types.SimpleNamespace(peft_config={"default": LoraConfig(r=4, target_modules=["v_proj", "q_proj", "k_proj"])})
    assert cache._configs(model)[0]["default"]["target_modules"] == ["k_proj", "q_proj", "v_proj"]


@pytest.mark.slow   # 18 s: two Python processes importing PEFT (the default tier checks the sorting above)
def test_a_lora_models_digest_is_the_same_in_another_process():
    """String sets (PEFT's target_modules) iterate in another order in each process: the digest sorts them,
    so a score stored by one run is found by the next (the config part of `model_digest`, in two processes)."""
    import os
    import subprocess
    import sys

    code = ("import json, types; from peft import LoraConfig; from fedlab.eval.cache import _configs; "
            "m = types.SimpleNamespace(peft_config={'default': LoraConfig(r=4, target_modules="
            "['q_proj', 'v_proj', 'k_proj', 'o_proj', 'up_proj', 'down_proj'])}); "
            "print(json.dumps(_configs(m), sort_keys=True, default=str))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(outs) == 1 and "q_proj" in outs.pop()


def test_an_entry_that_cannot_be_written_is_said_once_and_leaves_no_file(empty_cache, monkeypatch, capsys):
    """A full disk (here: every write fails) costs a re-score: one line on stderr for the first failure, no
    half-written or temporary file in the cache, and nothing read back."""
    from pathlib import Path

    def full(path, text, *a, **k):
        Path.open(path, "w").close()            # the file is made, then the write fails
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "_SAID", [])
    with monkeypatch.context() as m:
        m.setattr(Path, "write_text", full)
        cache.store("ab" + "0" * 62, {"acc/category": 0.5})
        cache.store("ab" + "1" * 62, {"acc/category": 0.5})
    err = capsys.readouterr().err
    assert err.count("eval.cache: cannot write") == 1 and "No space left on device" in err
    assert list(empty_cache.rglob("*")) == [empty_cache / "ab"]
    assert cache.load("ab" + "0" * 62) is None and cache.stats["hits"] == 0
