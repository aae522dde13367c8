"""Floe's smaller pieces against hand-computed values: update-level DP, the behaviour embedding, each expert's
domain, and the measured profile (cached, made monotone in the rank)."""
from __future__ import annotations

import math

import pytest
import torch

from conftest import PICO
from fedlab.config import load_config


def test_privatize_update_clips_then_adds_seeded_noise_by_hand():
    from fedlab.privacy.dpsgd import privatize_update

    start = {"a": torch.tensor([1.0, 1.0]), "b": torch.tensor([[0.0]])}
    new = {"a": torch.tensor([4.0, 1.0]), "b": torch.tensor([[4.0]])}        # Δ = (3, 0, 4): ‖Δ‖ = 5
    out, norm = privatize_update(new, start, clip=1.0, noise=0.0, seed=0)
    assert norm == pytest.approx(5.0)
    assert torch.allclose(out["a"], torch.tensor([1.6, 1.0])) and torch.allclose(out["b"], torch.tensor([[0.8]]))
    small, _ = privatize_update(new, start, clip=10.0, noise=0.0, seed=0)      # within C: unchanged
    assert torch.allclose(small["a"], new["a"]) and torch.allclose(small["b"], new["b"])
    noisy, _ = privatize_update(new, start, clip=1.0, noise=0.5, seed=3)
    z = torch.randn(3, generator=torch.Generator().manual_seed(3))              # N(0, σ²C²), σ = 0.5, C = 1
    expect = torch.tensor([0.6, 0.0, 0.8]) + 0.5 * z
    got = torch.cat([noisy["a"] - start["a"], (noisy["b"] - start["b"]).reshape(-1)])
    assert torch.allclose(got, expect, atol=1e-6)
    again, _ = privatize_update(new, start, clip=1.0, noise=0.5, seed=3)
    assert all(torch.equal(again[k], noisy[k]) for k in noisy)


def test_behaviour_embedding_is_the_unit_hidden_shift_then_the_unit_update(pico_zoo):
    from fedlab.data.tasks import task_examples
    from fedlab.methods.floe.behaviour import behaviour_embedding, mean_hidden, probe_sets
    from fedlab.models.modes import eval_mode
    from fedlab.models.zoo import load_model
    from fedlab.transforms import set_state
    from fedlab.transforms.lora import apply_lora, get_state, lora_rank_axes

    model, tok = load_model("pico-llama")
    model, _ = apply_lora(model, r=2, alpha=4.0, dropout=0.0)
    keys = list(lora_rank_axes(model))
    start = {k: v.clone() for k, v in get_state(model, keys).items()}
    g = torch.Generator().manual_seed(1)
    state = {k: v + 0.5 * torch.randn(v.shape, generator=g) for k, v in start.items()}
    probes = probe_sets([*task_examples("recall", "train", 3), *task_examples("sentiment", "train", 3)], 2)
    with eval_mode(model):
        set_state(model, start)
        base = mean_hidden(model, tok, probes, 64)
        emb = behaviour_embedding(model, tok, probes, 64, state, start, base)
        set_state(model, state)
        shift = (mean_hidden(model, tok, probes, 64) - base).reshape(-1)
    update = torch.cat([(state[k] - start[k]).reshape(-1) for k in state])
    assert base.shape[0] == 2                                                # one row per task
    assert torch.allclose(emb, torch.cat([shift / shift.norm(), update / update.norm()]), atol=1e-6)
    assert emb[: shift.numel()].norm() == pytest.approx(1.0) and emb[shift.numel():].norm() == pytest.approx(1.0)


def test_mean_hidden_averages_over_tokens_not_over_probes(pico_zoo):
    """Two probes of different lengths: the task's row is Σ_tokens h / #tokens, padding excluded."""
    from fedlab.data.collate import TokenizedExamples
    from fedlab.data.tasks import task_examples
    from fedlab.methods.floe.behaviour import mean_hidden
    from fedlab.models.zoo import load_model

    model, tok = load_model("pico-llama")
    model.eval()
    probes = {"recall": task_examples("recall", "train", 2)}
    got = mean_hidden(model, tok, probes, 64)[0]
    ds = TokenizedExamples(tok, probes["recall"], 64)
    total, n = 0, 0
    for i in range(len(ds)):
        ids = torch.as_tensor(ds[i]["input_ids"])[None]
        with torch.no_grad():
            h = model(input_ids=ids, attention_mask=torch.ones_like(ids), output_hidden_states=True).hidden_states[-1]
        total, n = total + h[0].sum(0), n + ids.shape[1]
    assert torch.allclose(got, total / n, atol=1e-5)


def test_expert_domains_picks_the_task_whose_nll_falls_most(monkeypatch):
    from fedlab.methods.floe import router

    # NLL by (state, task): the base, expert 0 helps recall most, expert 1 helps sentiment most
    nll = {("base", "recall"): 2.0, ("base", "sentiment"): 1.0, ("e0", "recall"): 1.2, ("e0", "sentiment"): 0.9,
           ("e1", "recall"): 1.9, ("e1", "sentiment"): 0.3}
    loaded = {}
    monkeypatch.setattr("fedlab.transforms.set_state", lambda model, state: loaded.update(now=state["name"]))
    monkeypatch.setattr(router, "task_nll", lambda model, tok, ex, ml: nll[(loaded["now"], ex[0])])
    domains, gains = router.expert_domains(None, None, [{"name": "e0"}, {"name": "e1"}], {"name": "base"},
                                           {"recall": ["recall"], "sentiment": ["sentiment"]}, 64)
    assert domains == ["recall", "sentiment"]
    assert gains[0] == pytest.approx({"recall": 0.8, "sentiment": 0.1})
    assert gains[1] == pytest.approx({"recall": 0.1, "sentiment": 0.7})


def test_profile_is_cached_and_made_monotone_in_the_rank(pico_zoo, monkeypatch):
    from fedlab.methods.floe import profile as prof

    # the measurement of each rank, as a busy machine might report it: rank 4 slower than rank 8
    fake = {2: (10.0, 0.010), 4: (20.0, 0.030), 8: (40.0, 0.020)}
    calls = []

    def measure(model, trainable, batch, steps, warmup):
        calls.append(model.fedlab_rank)
        return fake[model.fedlab_rank]

    from fedlab.runtime import resident

    real_get = resident.get_resident

    def get(cfg, name=None, chain=()):
        res = real_get(cfg, name, chain=chain)
        res.model.fedlab_rank = chain[0].kwargs()["r"]
        return res

    monkeypatch.setattr(resident, "get_resident", get)
    monkeypatch.setattr(prof, "measure_rank", measure)
    cfg = load_config(None, [*PICO, "method.name=floe"])
    # measured afresh (a kept test home may hold this profile from an earlier run), then cached
    p = prof.measured_profile(cfg, "pico-llama", [8, 2, 4], 2.0, refresh=True)
    assert calls == [2, 4, 8]
    assert p.memory(2) == 10.0 and p.memory(8) == 40.0
    # isotonic regression pools the inverted pair (0.030, 0.020) into their mean
    assert [p.step(r) for r in (2, 4, 8)] == pytest.approx([0.010, 0.025, 0.025])
    assert p.meta["raw"]["step_s"] == {"2": 0.010, "4": 0.030, "8": 0.020}
    again = prof.measured_profile(cfg, "pico-llama", [2, 4, 8], 2.0)           # the cache: nothing measured
    assert calls == [2, 4, 8] and again.step(4) == pytest.approx(0.025)
    prof.measured_profile(cfg, "pico-llama", [2, 4, 8], 2.0, refresh=True)
    assert calls == [2, 4, 8] * 2
    assert not math.isnan(again.memory(4))


def test_detector_pooling_needs_a_stage2_encoder():
    from fedlab.config import ConfigError

    with pytest.raises(ConfigError, match=r"method\.detector_pooling"):
        load_config(None, ["method.name=floe", "method.detector_pooling=static"])
    load_config(None, ["method.name=floe", "method.detector_pooling=static", "method.detector_encoder=tiny-bert"])


def test_eval_mode_restores_each_submodules_own_mode():
    from fedlab.models.modes import eval_mode

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Dropout(0.5))
    model.train()
    model[1].eval()                          # a part deliberately frozen in eval mode
    with eval_mode(model):
        assert not model.training and not model[0].training
    assert model.training and model[0].training and not model[1].training


def test_a_floe_runs_closing_table_shows_the_fused_and_routed_models():
    """Floe names its per-task scores `fused/acc/<task>`; the closing table reads them beside the devices'
    `acc/task_<task>` and leaves out the columns a run does not have (no proxy/ without LLM-FedMoE)."""
    from types import SimpleNamespace

    from fedlab.evidence.tables import final_table
    from fedlab.methods.floe.method import Floe

    zero = {"round": 0, "acc/task_recall": 0.28, "acc/mean": 0.28}
    final = {"round": 6, "acc/task_recall": 0.38, "acc/mean": 0.38, "routed/acc/recall": 0.36,
             "routed/acc/mean": 0.36, "fused/acc/recall": 0.64, "fused/acc/mean": 0.64}
    text = final_table(SimpleNamespace(final=final, rounds=[zero], columns=Floe.table_columns))
    header, _, recall, mean = text.splitlines()
    assert [c.strip() for c in header.strip("|").split("|")] == ["task", "zero-shot", "final (round 6)",
                                                                  "routed SLM", "Floe (SLM + LLM fused)"]
    assert [c.strip() for c in recall.strip("|").split("|")] == ["recall", "0.2800", "0.3800", "0.3600", "0.6400"]
    assert "0.6400" in mean and "proxy-tuned" not in text
