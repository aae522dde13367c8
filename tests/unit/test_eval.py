"""Evaluation: log-likelihood scoring against a hand computation, Rouge-L and exact match."""
import pytest
import torch
import torch.nn.functional as F

from fedlab.data.tasks import Example
from fedlab.eval import choice_loglikelihoods, mc_accuracy, rouge_l_and_em


def test_choice_loglikelihood_matches_hand_computation(pico_zoo):
    from fedlab.models.zoo import load_model

    model, tok = load_model("pico-llama")
    ex = Example("question: where does bob live? answer:", "paris", "t", "d", ("paris", "rome"), 0)
    scores = choice_loglikelihoods(model, tok, [ex])[0]
    for choice, got in zip(ex.choices, scores):
        ctx = tok(ex.prompt, add_special_tokens=False)["input_ids"]
        full = tok(ex.prompt + " " + choice, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            logp = F.log_softmax(model(torch.tensor([full])).logits[0], -1)
        want = sum(logp[i - 1, full[i]].item() for i in range(len(ctx), len(full)))
        assert abs(got - want) < 1e-4
    best = max(range(2), key=lambda j: scores[j])
    assert mc_accuracy(model, tok, [ex]) == float(best == 0)


def test_encodings_are_remembered_per_tokenizer_and_equal_fresh_ones(pico_zoo):
    """The second evaluation of the same prompts reuses their encodings; they are the ones a fresh encoding
    gives, and another tokenizer (another vocabulary) gets its own."""
    from fedlab.data.collate import continuation_ids
    from fedlab.data.tasks import task_examples
    from fedlab.eval import multiple_choice as mc
    from fedlab.models.zoo import load_model

    ex = task_examples("category", "test", 6)
    model, tok = load_model("pico-llama")
    first = mc._encode(tok, ex)
    assert mc._encode(tok, ex)[0] is first[0]                      # remembered, not encoded again
    for e, (ctx, conts) in zip(ex, first):
        fresh = [continuation_ids(tok, e.prompt, " " + c) for c in e.choices]
        assert ctx == fresh[0][0] and conts == [c for _, c in fresh]
    _, other = load_model("pico-gpt2")
    assert mc._encode(other, ex)[0] is not first[0]
    assert mc._encode(other, ex)[0][0] == other(ex[0].prompt, add_special_tokens=False)["input_ids"]
    before = mc_accuracy(model, tok, ex)
    mc._ENCODED.clear()
    assert mc_accuracy(model, tok, ex) == before


def test_rouge_l_and_exact_match():
    rl, em = rouge_l_and_em(["bob lives in paris.", "alice"], ["Bob lives in Paris", "carol likes soup"])
    assert em == 0.5
    assert 0.49 < rl < 0.51  # 1.0 for the first pair, 0.0 for the second


@pytest.mark.parametrize("name", ["pico-llama", "pico-gpt2", "pico-opt", "pico-bloom", "pico-qwen2"])
def test_shared_prefix_scoring_equals_scoring_each_pair(fedlab_home, name):
    """Each prompt once with its choices on the key/value cache gives the per-pair sums (to float rounding)
    and the same accuracy on every multiple-choice task, on every zoo architecture."""
    from fedlab.data.tasks import TASKS, task_examples
    from fedlab.eval import mc_accuracy
    from fedlab.eval.multiple_choice import choice_loglikelihoods
    from fedlab.models.zoo import load_model

    model, tok = load_model(name)
    tok.pad_token = tok.pad_token or tok.eos_token
    for task in [t for t, spec in TASKS.items() if spec.n_choices]:
        ex = task_examples(task, "test", 24)
        shared = choice_loglikelihoods(model, tok, ex, 96, 16, shared=True)
        pairs = choice_loglikelihoods(model, tok, ex, 96, 16, shared=False)
        assert torch.allclose(torch.tensor(shared), torch.tensor(pairs), atol=1e-4), task
        assert mc_accuracy(model, tok, ex, shared=True) == mc_accuracy(model, tok, ex, shared=False), task
    # a prompt too long to keep whole falls back to per-pair scoring with the reference's truncation
    long = task_examples("recall", "test", 4)
    fallback = choice_loglikelihoods(model, tok, long, 12, 16, shared=True)
    reference = choice_loglikelihoods(model, tok, long, 12, 16, shared=False)
    assert torch.allclose(torch.tensor(fallback), torch.tensor(reference), atol=1e-5)


@pytest.mark.parametrize("name", ["pico-llama", "pico-gpt2"])
def test_one_token_choices_are_scored_from_the_prompt_pass_bit_for_bit(fedlab_home, name):
    """A batch whose choices are all one token skips the second (cache) pass: its scores are exactly — not
    to rounding — those of the two-pass scorer, so no recorded accuracy moves; batches with longer choices
    still take both passes."""
    from fedlab.data.tasks import TASKS, task_examples
    from fedlab.eval.multiple_choice import _encode, _score_shared
    from fedlab.models.zoo import load_model

    model, tok = load_model(name)
    model.eval()
    tok.pad_token = tok.pad_token or tok.eos_token
    seen = set()
    for task in [t for t, spec in TASKS.items() if spec.n_choices]:
        enc = _encode(tok, task_examples(task, "test", 24))
        seen.add(max(len(c) for _, cs in enc for c in cs) == 1)
        fast = _score_shared(model, tok.pad_token_id, enc, 4, "cpu")
        slow = _score_shared(model, tok.pad_token_id, enc, 4, "cpu", one_pass=False)
        assert fast == slow, task
    assert True in seen


@pytest.mark.parametrize("name", ["pico-llama", "pico-gpt2", "pico-opt", "pico-bloom", "pico-qwen2"])
def test_batched_greedy_generation_equals_one_prompt_at_a_time(fedlab_home, name):
    """Left-padded batches decode what each prompt decodes alone, on every zoo architecture."""
    from fedlab.data.tasks import task_examples
    from fedlab.eval.generation import greedy_generate
    from fedlab.models.zoo import load_model

    model, tok = load_model(name)
    prompts = [e.prompt for e in task_examples("friend", "test", 3) + task_examples("sum", "test", 3)]
    assert greedy_generate(model, tok, prompts, 8, batch_size=6) == greedy_generate(model, tok, prompts, 8, batch_size=1)


def test_mc_generate_adds_rouge_and_em_of_the_generated_answer(pico_zoo):
    """eval.mc_generate: a multiple-choice task keeps its accuracy and also gets Rouge-L / EM of the generated
    answer against the right choice's text; off (the default), the task's scores are as before."""
    from fedlab.config import load_config
    from fedlab.data.federated import build_federated_data
    from fedlab.eval.generation import generation_scores
    from fedlab.eval.tasks import evaluate_task
    from fedlab.models.zoo import load_model

    over = ["model.name=pico-llama", "data.tasks=[recall]", "data.test_per_task=6", "eval.cache=false"]
    model, tok = load_model("pico-llama")
    off = load_config(None, over)
    data = build_federated_data(off.data, off.seed)
    plain = evaluate_task(model, tok, data, "recall", off)
    on = evaluate_task(model, tok, data, "recall", load_config(None, over + ["eval.mc_generate=true"]))
    assert set(plain) == {"acc/recall", "top/recall", "n/recall"}
    assert {k: on[k] for k in plain} == plain
    want = generation_scores(model, tok, data.test_examples("recall"))
    assert on["rougeL/recall"] == want["rougeL"] and on["em/recall"] == want["em"]


def test_exact_match_is_sni_normalised():
    """EM after SNI's normalisation (lower case, punctuation removed, whitespace collapsed): the
    comma of a `describe` target does not make a right answer wrong; a different word still does; Rouge-L is
    what it was (torchmetrics splits on punctuation itself)."""
    rl, em = rouge_l_and_em(["tibik lives in delhi likes rice", "tibik lives in delhi"],
                            ["Tibik lives in Delhi, likes rice.", "Tibik lives in Mumbai."])
    assert em == 0.5
    assert rl == pytest.approx((1.0 + 0.75) / 2)
