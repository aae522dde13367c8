"""The zoo: own tokenizers in different styles, cached builds, and any HF folder through load_model."""
import json

import pytest
import torch

from fedlab.models import zoo
from fedlab.models.tokenizers import train_tokenizer

LINES = ["we utilize the dynamic programming approach to align tokens .", "paris lives in 12 plus 7 ."] * 20


@pytest.mark.parametrize("style, marker", [("sentencepiece", "▁"), ("byte_bpe", "Ġ"),
                                           ("byte_bpe_digits", "Ġ"), ("wordpiece", "##")])
def test_tokenizer_styles(style, marker):
    tok = train_tokenizer(LINES, style, 120)
    pieces = tok.tokenize("we utilize the dynamic approach 127")
    assert any(marker in p for p in pieces) or (style == "wordpiece" and pieces)
    if style == "byte_bpe_digits":
        assert {"1", "2", "7"} <= set(pieces)
    assert tok.pad_token_id is not None


def test_pico_zoo_builds_cached_with_distinct_tokenizers(pico_zoo):
    a, ta = zoo.load_model("pico-llama")
    b, tb = zoo.load_model("pico-gpt2")
    assert a.config.model_type == "llama" and b.config.model_type == "gpt2"
    assert len(ta) != len(tb) and ta.tokenize("tell me")[0].startswith("▁")
    meta = zoo.read_meta("pico-llama")
    assert meta["steps"] == zoo.ZOO["pico-llama"].steps and meta["final_loss"] > 0


def test_a_model_built_here_is_cached_and_not_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    zoo.build("pico-llama", force=True, progress=False)
    mtime = (zoo.zoo_dir("pico-llama") / "meta.json").stat().st_mtime
    monkeypatch.setattr(zoo, "shipped_current", lambda name, world_seed=0: False)     # as for an unshipped recipe
    assert zoo.build("pico-llama") == zoo.zoo_dir("pico-llama")  # cached: not rebuilt
    assert (zoo.zoo_dir("pico-llama") / "meta.json").stat().st_mtime == mtime


def test_any_local_hf_folder_loads_through_the_same_interface(tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = train_tokenizer(LINES, "sentencepiece", 100)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, pad_token_id=tok.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "m")
    tok.save_pretrained(tmp_path / "m")
    model, t = zoo.load_model(str(tmp_path / "m"))
    assert model.config.num_hidden_layers == 2 and len(t) == len(tok)
    with pytest.raises(FileNotFoundError, match="model.name"):
        zoo.load_model(str(tmp_path / "missing"))


def test_zoo_list_command(pico_zoo, capsys):
    from fedlab.cli import main

    assert main(["zoo", "list"]) == 0
    out = capsys.readouterr().out
    for name in ("tiny-llama", "tiny-llama-s", "tiny-gpt2", "tiny-opt", "tiny-bloom", "tiny-qwen2"):
        assert name in out


def test_mask_tokens_targets_a_share_of_the_plain_tokens():
    tok = train_tokenizer(LINES, "wordpiece", 120)
    ids = torch.tensor(tok(LINES[:8], padding=True)["input_ids"])
    inputs, labels = zoo.mask_tokens(ids, tok, torch.Generator().manual_seed(0), rate=0.5)
    special = torch.isin(ids, torch.tensor(tok.all_special_ids))
    assert (labels[special] == -100).all()                          # [CLS], [SEP], [PAD] are never targets
    picked = labels != -100
    assert 0.3 < picked.sum() / (~special).sum() < 0.7 and torch.equal(labels[picked], ids[picked])
    assert (inputs[picked] == tok.mask_token_id).float().mean() > 0.6 and torch.equal(inputs[~picked], ids[~picked])


def test_pico_bert_is_a_masked_lm_pretrained_encoder(pico_zoo):
    path = zoo.build("pico-bert", progress=False)
    meta = json.loads((path / "meta.json").read_text())
    assert meta == zoo.read_meta("pico-bert")
    assert meta["family"] == "bert" and meta["recipe"]["objective"] == "masked_lm" and meta["final_loss"] > 0
    enc, tok = zoo.load_encoder("pico-bert")
    out = enc(**tok(["where does tom live ?"], return_tensors="pt")).last_hidden_state
    assert enc.config.model_type == "bert" and enc.config.num_hidden_layers == 3 and out.shape[-1] == 32
    assert tok.tokenize("utilization")[0] and tok.cls_token == "[CLS]"
    with pytest.raises(ValueError, match="is an encoder"):
        zoo.load_model("pico-bert")
    assert zoo.fingerprint("pico-llama") == zoo.fingerprint("pico-llama")   # decoder recipes unchanged in shape
    assert "objective" not in zoo.recipe("pico-llama")


def test_a_build_runs_on_one_thread_and_gives_the_caller_its_threads_back(tmp_path, monkeypatch):
    """A zoo model's weights must not depend on the caller's thread count (tiny-gpt2 built on 2 threads
    differed from its 1-thread build): the build pins one thread and restores the caller's."""
    seen = []
    real = zoo._pretrain
    monkeypatch.setattr(zoo, "_pretrain", lambda *a: (seen.append(torch.get_num_threads()), real(*a))[1])
    monkeypatch.setenv("FEDLAB_HOME", str(tmp_path))
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        zoo.build("pico-gpt2", force=True, progress=False)
        assert seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
