"""Floe's fine-tuning phase: ranks chosen by Algorithm 1 from a pinned profile and
checked by hand, uploads of different ranks counted in bytes, the Floe^-M ablation, clustering, both
backends, and bad input in one line."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from conftest import PICO
from fedlab.config import ConfigError, load_config

PROFILE = {"ranks": [2, 4, 8], "memory_mb": {"2": 10.0, "4": 20.0, "8": 40.0},
           "step_s": {"2": 0.01, "4": 0.02, "8": 0.04}, "meta": {"note": "pinned by the test"}}
# big: budget 10 + 1.2·30 = 46 MB (every rank fits), speed 1; small: 10 + 0.3·30 = 19 MB (only r = 2), speed 0.4
DEVICES = "method.devices=[{name: big, share: 1, memory: 1.2, speed: 1.0}, {name: small, share: 1, memory: 0.3, speed: 0.4}]"
BASE = PICO + ["data.num_clients=4", "data.partition=by_task", "data.tasks=[recall,sentiment]",
               "data.public_source=holdout", "data.public_fraction=0.25", "tracking.enabled=false",
               "method.ranks=[2,4,8]", "method.background_load=0", "method.deadline=0.1", DEVICES,
               "federation.rounds=1", "method.router_encoder=pico-bert"]


@pytest.fixture()
def profile_file(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    return path


def _cfg(tmp_path, profile_file, *extra, method="floe"):
    return load_config(None, BASE + [f"method.name={method}", f"method.profile={profile_file}",
                                     f"output_dir={tmp_path}/runs", *extra])


def _lora_bytes(cfg, r: int) -> int:
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import transform

    res = get_resident(cfg, chain=(transform("lora", r=r, alpha=2.0 * r),))
    return sum(v.numel() * v.element_size() for v in res.init_state.values())


def _classes(cfg):
    from fedlab.methods.floe.devices import assign_classes

    return [c.name for c in assign_classes(4, cfg.method.devices, cfg.seed)]


@pytest.mark.federation
def test_floe_ranks_follow_algorithm_1_on_a_pinned_profile(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file)
    h = run_experiment(cfg, progress=False)
    r1 = h.rounds[1]
    classes = _classes(cfg)
    assert sorted(classes) == ["big", "big", "small", "small"]
    # steps = ceil(9 / 8) = 2: big at r = 8 takes 2·0.04 = 0.08 s ≤ 0.1; small fits only r = 2 in 19 MB,
    # 2·0.01 / 0.4 = 0.05 s ≤ 0.1
    want = {c: 8 if classes[c] == "big" else 2 for c in range(4)}
    assert {c: r1[f"rank_client_{c}"] for c in range(4)} == want
    assert r1["clients/sat_out"] == 0 and r1["rank/mean"] == pytest.approx(5.0)
    assert r1["time/simulated_round"] == pytest.approx(0.08)
    up = sum(_lora_bytes(cfg, r) for r in want.values())
    assert up <= r1["bytes/up"] < up + 4 * 1500          # the four LoRA states at their own ranks (+ metrics)
    assert r1["server/clusters/num"] >= 1 and "acc/mean" in r1


@pytest.mark.federation
def test_floe_without_rank_selection_drops_the_devices_that_cannot_fit_r_max(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file, method="floe_no_rank")
    r1 = run_experiment(cfg, progress=False).rounds[1]
    classes = _classes(cfg)
    assert {c: r1[f"rank_client_{c}"] for c in range(4)} == {c: 8 if classes[c] == "big" else 0 for c in range(4)}
    assert r1["clients/sat_out"] == 2
    with pytest.raises(ConfigError, match="method.rank_selection"):
        _cfg(tmp_path, profile_file, "method.rank_selection=true", method="floe_no_rank")


@pytest.mark.federation
@pytest.mark.parametrize("extra", [
    ("method.llm=pico-llama", "method.fusion_eval_per_task=2", "method.fusion_positions=16", "method.dp=dpsgd"),
    pytest.param(("method.mode=async", "method.llm=null"), marks=pytest.mark.slow)],   # default tier ≤ 10 min
    ids=["sync-fusion-dpsgd", "async"])
def test_floe_same_numbers_on_both_backends(pico_zoo, tmp_path, profile_file, extra):
    """Every number of a run — rounds, the routed and fused scores at the end, ε — is the same in-process and
    on Ray (timings aside); in asynchronous mode too, so arrivals follow the simulated clock, not the machine."""
    from fedlab.experiment import run_experiment

    a = run_experiment(_cfg(tmp_path / "a", profile_file, *extra), progress=False)
    b = run_experiment(_cfg(tmp_path / "b", profile_file, "backend.name=ray", "backend.num_cpus=2", *extra),
                       progress=False)
    timing = lambda k: k.startswith("time/") or "latency" in k or k.startswith("system/")
    numbers = lambda d: {k: v for k, v in d.items() if isinstance(v, (int, float)) and not timing(k)}
    assert numbers(a.final) == numbers(b.final)
    assert [numbers(r) for r in a.rounds] == [numbers(r) for r in b.rounds]
    if "method.dp=dpsgd" in extra:
        assert any(k.startswith("fused/") for k in a.final) and any("epsilon" in k for k in a.final)


def test_floe_bad_config_names_the_key(tmp_path, profile_file):
    with pytest.raises(ConfigError, match=r"method.ranks"):
        _cfg(tmp_path, profile_file, "method.ranks=[0,4]")
    with pytest.raises(ConfigError, match=r"method.devices\[0\].speed"):
        _cfg(tmp_path, profile_file, "method.devices=[{name: x, share: 1, memory: 1, speed: 0}]")
    with pytest.raises(ConfigError, match=r"method.background_load"):
        _cfg(tmp_path, profile_file, "method.background_load=1.5")


def test_choose_clusters_finds_two_groups_and_falls_back_to_one():
    from fedlab.clustering import choose_clusters

    rng = np.random.default_rng(0)
    a = rng.normal(size=(4, 6)) * 0.05 + np.eye(6)[0]
    b = rng.normal(size=(4, 6)) * 0.05 + np.eye(6)[1]
    out = choose_clusters(np.vstack([a, b]), seed=0)
    assert out.num_clusters == 2 and out.labels == (0, 0, 0, 0, 1, 1, 1, 1)
    assert out.silhouette > 0.9
    assert choose_clusters(np.vstack([a, b])[:2]).num_clusters == 1            # N < 3
    assert choose_clusters(np.vstack([a, b]), min_silhouette=0.999).num_clusters == 1


def test_device_classes_by_largest_remainder_and_seeded_load():
    from fedlab.methods.floe.config import ORIN_CLASSES
    from fedlab.methods.floe.devices import assign_classes, round_conditions

    got = assign_classes(15, ORIN_CLASSES, seed=0)
    assert sum(c.name == "orin-nano" for c in got) == 10 and sum(c.name == "orin-nx" for c in got) == 5
    assert [c.name for c in got] == [c.name for c in assign_classes(15, ORIN_CLASSES, seed=0)]
    nano = ORIN_CLASSES[0]
    idle = round_conditions(nano, 10.0, 40.0, 0.0, 0, 1, 0)
    assert idle.free_memory == pytest.approx(19.0) and idle.speed == pytest.approx(0.4)
    busy = round_conditions(nano, 10.0, 40.0, 0.3, 0, 1, 0)
    assert 0 <= busy.load <= 0.3
    assert busy.free_memory == pytest.approx(10.0 + (0.3 - busy.load) * 30.0)
    assert busy.speed == pytest.approx(0.4 * (1 - busy.load / 2))
    assert busy == round_conditions(nano, 10.0, 40.0, 0.3, 0, 1, 0)


# ---- local DP ------------------------------------------------------------------------------------------

def test_clip_and_noise_by_hand():
    import torch

    from fedlab.privacy import clip_and_noise

    # two examples, one parameter of two entries: norms 5 and 0.5; C = 1 scales the first by 1/5
    g = torch.tensor([[3.0, 4.0], [0.3, 0.4]])
    out, norms = clip_and_noise([g], clip=1.0, noise=0.0)
    assert torch.allclose(norms, torch.tensor([5.0, 0.5]))
    assert torch.allclose(out[0], (torch.tensor([0.6, 0.8]) + torch.tensor([0.3, 0.4])) / 2, atol=1e-5)
    noisy, _ = clip_and_noise([g], clip=1.0, noise=2.0, generator=torch.Generator().manual_seed(0))
    z = torch.randn(2, generator=torch.Generator().manual_seed(0))
    assert torch.allclose(noisy[0], (torch.tensor([0.9, 1.2]) + 2.0 * z) / 2, atol=1e-5)


def test_opacus_per_example_gradients_average_to_the_batch_gradient(pico_zoo):
    import torch

    from fedlab.models.zoo import load_model
    from fedlab.privacy import DPSGDModule
    from fedlab.transforms.lora import apply_lora

    model, _ = load_model("pico-llama")
    pm, spec = apply_lora(model, 4, 8, 0.0, None)
    with torch.no_grad():                 # B ≠ 0 so that A has a gradient too
        for p in pm.parameters():
            if p.requires_grad:
                p.normal_(0, 0.1)
    module = DPSGDModule(pm, spec.trainable, [], clip=1.0, noise=0.0)
    module.attach()
    try:
        ids = torch.randint(3, 60, (3, 9), generator=torch.Generator().manual_seed(0))
        labels = ids.clone()
        labels[0, :4] = -100                 # examples with different numbers of target tokens
        batch = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "labels": labels}
        loss, _ = module.compute_loss(batch)
        loss.backward()
        for k in spec.trainable:
            p = module.param_index[k]
            assert p.grad_sample.shape == (3, *p.shape)
            assert torch.allclose(p.grad_sample.mean(0), p.grad, atol=1e-6)
    finally:
        module.detach()
    assert not any(hasattr(p, "grad_sample") for p in pm.parameters())


@pytest.mark.federation
def test_floe_with_dpsgd_reports_epsilon_like_the_accountant(pico_zoo, tmp_path, profile_file):
    from opacus.accountants import RDPAccountant

    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file, "method.dp=dpsgd", "method.dp_noise=1.1", "method.dp_clip=0.5")
    h = run_experiment(cfg, progress=False)
    r1 = h.rounds[1]
    n0 = len(__import__("fedlab.data.federated", fromlist=["x"]).build_federated_data(cfg.data, cfg.seed).train[0])
    acc = RDPAccountant()
    acc.history = [(1.1, 8 / n0, -(-n0 // 8))]
    assert r1["dp/epsilon_client_0"] == pytest.approx(acc.get_epsilon(1e-5), rel=1e-9)
    assert r1["dp/epsilon_max"] >= r1["dp/epsilon_client_0"] > 0
    assert "dp/clipped" in r1 and r1["dp/grad_norm"] > 0
    plain = run_experiment(_cfg(tmp_path / "plain", profile_file), progress=False).rounds[1]
    assert plain["loss/task"] != pytest.approx(r1["loss/task"], rel=1e-6)    # the noise changed training


# ---- router (Eq. 9–11) -----------------------------------------------------------------------------------

def test_gate_is_a_softmax_of_cosines_by_hand():
    import math

    import torch

    from fedlab.methods.floe.router import gate

    experts = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    prompt = torch.tensor([[3.0, 3.0], [1.0, 0.0]])
    w = gate(prompt, experts)
    assert torch.allclose(w[0], torch.tensor([0.5, 0.5]))
    e = math.exp(1.0)
    assert torch.allclose(w[1], torch.tensor([e / (e + 1), 1 / (e + 1)]))
    sharp = gate(prompt, experts, temperature=0.1)
    assert sharp[1, 0] > w[1, 0]


def test_mixture_state_is_the_gated_sum_of_expert_products():
    import torch

    from fedlab.methods.floe.router import mixture_state

    torch.manual_seed(0)
    centres = [{"A": torch.randn(4, 6), "B": torch.randn(5, 4)} for _ in range(3)]
    w = torch.tensor([0.2, 0.5, 0.3])
    mix = mixture_state(centres, w, {"A": 0, "B": 1})
    assert mix["A"].shape == (12, 6) and mix["B"].shape == (5, 12)
    want = sum(wj * c["B"] @ c["A"] for wj, c in zip(w, centres))
    assert torch.allclose(mix["B"] @ mix["A"], want, atol=1e-5)
    with pytest.raises(ValueError, match="3 experts, 2 weights"):
        mixture_state(centres, [0.5, 0.5], {"A": 0, "B": 1})


@pytest.mark.federation
def test_floe_routes_each_test_prompt_over_the_expert_pool(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file, "data.num_clients=6", "data.tasks=[recall,sentiment,friend]")
    h = run_experiment(cfg, progress=False)
    f = h.final
    m = f["server/clusters/num"]
    domains = [f[f"routed/expert_domain_{j}"] for j in range(m)]
    assert set(domains) <= {"recall", "sentiment", "friend"}
    for task in ("recall", "sentiment"):
        assert f"routed/acc/{task}" in f and f"routed/top1_share/{task}" in f
        assert 0 < f[f"routed/top/{task}"] <= 1        # the routed SLM's most frequent answer's share
    assert "routed/rougeL/friend" in f and "routed/acc/mean" in f
    # routed weights: the mixture of M experts at rank M·r_max reproduces each expert alone for a one-hot gate
    import torch

    from fedlab.methods.floe.router import mixture_state

    centres = [{"A": torch.randn(2, 3), "B": torch.randn(4, 2)} for _ in range(m)]
    one_hot = torch.eye(m)[0]
    mix = mixture_state(centres, one_hot, {"A": 0, "B": 1})
    assert torch.allclose(mix["B"] @ mix["A"], centres[0]["B"] @ centres[0]["A"], atol=1e-6)


# ---- asynchronous mode (Eq. 5) ---------------------------------------------------------------------------

ASYNC = ["method.mode=async", "method.deadline=0.06", "method.cluster=false", "federation.rounds=2"]


@pytest.mark.federation
def test_async_windows_and_staleness_weights_by_hand(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file, *ASYNC)
    h = run_experiment(cfg, progress=False)
    r1, r2 = h.rounds[1], h.rounds[2]
    classes = _classes(cfg)
    small = [c for c in range(4) if classes[c] == "small"]
    big = [c for c in range(4) if classes[c] == "big"]
    # window 1 = [0, 0.06): small at r = 2 takes 2·0.01/0.4 = 0.05 s and arrives; big at r = 8 (0.08 s, within
    # the 3T bound) arrives in window 2, where the small ones, restarted at 0.06, arrive at 0.11
    assert (r1["async/arrived"], r1["async/pending"]) == (2, 2)
    assert (r2["async/arrived"], r2["async/pending"]) == (4, 0)
    assert r2["time/simulated_clock"] == pytest.approx(0.12)
    assert {c: r1[f"rank_client_{c}"] for c in range(4)} == {c: 8 if c in big else 2 for c in range(4)}
    # one cluster in window 2 (now = 0.12): τ = 0.06 for the small ones (started at 0.06), 0.12 for the big
    # ones (started at 0); β = ln 2 / 0.06 ⇒ raw weights ½ and ¼, normalised over the four: 1/3 and 1/6
    for c in small:
        assert r2[f"server/async_weight_client_{c}"] == pytest.approx(1 / 3)
    for c in big:
        assert r2[f"server/async_weight_client_{c}"] == pytest.approx(1 / 6)


@pytest.mark.federation
def test_async_resumes_with_its_pending_updates(pico_zoo, tmp_path, profile_file, monkeypatch):
    from fedlab.experiment import run_experiment
    from fedlab.methods.floe.method import Floe

    clean = run_experiment(_cfg(tmp_path / "clean", profile_file, *ASYNC), progress=False)
    original = Floe.run_round

    def dies_in_round_2(self, rnd, ctx):
        if rnd == 2:
            raise RuntimeError("killed")
        return original(self, rnd, ctx)

    monkeypatch.setattr(Floe, "run_round", dies_in_round_2)
    with pytest.raises(RuntimeError, match="killed"):
        run_experiment(_cfg(tmp_path / "crash", profile_file, *ASYNC), progress=False)
    monkeypatch.setattr(Floe, "run_round", original)
    resumed = run_experiment(_cfg(tmp_path / "crash", profile_file, *ASYNC, "resume=true"), progress=False)
    for key in ("acc/mean", "async/arrived", "time/simulated_clock", "loss/task", "async/mean_staleness_s"):
        assert resumed.rounds[-1][key] == pytest.approx(clean.rounds[-1][key], rel=1e-6), key


# ---- logit fusion (Eq. 12–15) -----------------------------------------------------------------------------

def test_map_probs_sums_into_the_mapped_bins_by_hand():
    import torch

    from fedlab.methods.floe.fusion import map_probs

    p = torch.tensor([[0.1, 0.2, 0.3, 0.4]])
    out = map_probs(p, torch.tensor([2, 2, 0, 1]), 3)           # LLM ids 0, 1 → SLM bin 2
    assert torch.allclose(out, torch.tensor([[0.3, 0.4, 0.3]]))


def _fusion(pico_zoo, **kw):
    import torch

    from fedlab.align.vocab import cached_vocab_map
    from fedlab.methods.floe.fusion import Fusion, FusionGate
    from fedlab.models.zoo import load_model

    slm, slm_tok = load_model("pico-llama")
    llm, llm_tok = load_model("pico-gpt2")
    calls = []
    original = llm.forward

    def counted(*a, **k):
        calls.append(1)
        return original(*a, **k)

    llm.forward = counted
    vmap = torch.as_tensor(cached_vocab_map(llm_tok, slm_tok))
    gate = FusionGate(len(slm_tok), "compact")
    flagged = kw.pop("flagged", lambda p: False)
    return Fusion(lambda p: (slm, slm_tok), (llm, llm_tok), gate, vmap, flagged, 64, **kw), calls, (slm, slm_tok)


def test_fused_step_mixes_by_the_gate_and_falls_back_when_late(pico_zoo):
    import torch

    from fedlab.methods.floe.fusion import llm_ids, map_probs, next_probs_ids

    fusion, calls, (slm, tok) = _fusion(pico_zoo)
    text = "question: where does kumix live? answer:"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    p_slm = next_probs_ids(slm, ids, 64)[None]
    p_llm = map_probs(next_probs_ids(fusion.llm, llm_ids(tok, fusion.llm_tok, ids, False), 64)[None], fusion.vmap,
                      p_slm.shape[-1])
    w = fusion.gate(p_slm, p_llm).detach()
    out = fusion.fused_step(text, ids)
    assert torch.allclose(out, (w[:, None] * p_slm + (1 - w[:, None]) * p_llm)[0], atol=1e-6)
    assert abs(float(out.sum()) - 1) < 1e-5 and calls
    late, _, _ = _fusion(pico_zoo, rtt=0.5, rtt_jitter=0.0, tau_wait=0.2)        # every answer misses τ_wait
    assert torch.allclose(late.fused_step(text, ids), p_slm[0], atol=1e-6)
    assert late.stats["fallback"] == 1 and late.stats["w_sum"] == 1.0
    assert late.stats["latency_sum"] == pytest.approx(0.2, abs=0.05)             # min(RTT + t_cloud, τ_wait)


def test_the_fallback_follows_the_simulated_cloud_time_not_this_machines(pico_zoo, monkeypatch):
    """With a simulated cloud time the fallback decision is RTT + jitter + cloud_s > τ_wait whatever the LLM's
    forward takes here (a stalled machine must not change a score); cloud_s = None measures it."""
    import time as _time

    fusion, _, (slm, tok) = _fusion(pico_zoo, rtt=0.15, rtt_jitter=0.0, tau_wait=0.2, cloud_s=0.04)
    text = "question: where does kumix live? answer:"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    clock = iter(range(0, 10_000, 7))                                      # every timed span takes 7 s here
    monkeypatch.setattr(_time, "perf_counter", lambda: float(next(clock)))
    fusion.fused_step(text, ids)
    assert fusion.stats["fallback"] == 0 and fusion.trace[-1][1] == 0.04     # 0.15 + 0.04 ≤ 0.2: the LLM counts
    slow, _, _ = _fusion(pico_zoo, rtt=0.15, rtt_jitter=0.0, tau_wait=0.2, cloud_s=0.06)
    slow.fused_step(text, ids)
    assert slow.stats["fallback"] == 1                                     # 0.15 + 0.06 > 0.2
    measured, _, _ = _fusion(pico_zoo, rtt=0.15, rtt_jitter=0.0, tau_wait=0.2)
    measured.fused_step(text, ids)
    assert measured.stats["fallback"] == 1 and measured.trace[-1][1] == 7.0   # measured: 7 s > τ_wait


def test_fused_decoding_keeps_the_slm_token_ids_with_a_shared_vocabulary(pico_zoo):
    """With a shared tokenizer and w = 1 everywhere (every LLM answer late), fused greedy decoding is the
    SLM's own greedy decoding — the ids are never re-tokenised (a SentencePiece decode drops word spaces)."""
    import torch

    from fedlab.eval.generation import greedy_generate
    from fedlab.methods.floe.fusion import Fusion, FusionGate
    from fedlab.models import zoo
    from fedlab.models.zoo import load_model

    zoo.build("pico-llama-s", progress=False)
    slm, tok = load_model("pico-llama-s")
    llm, _ = load_model("pico-llama")
    slm.eval()
    fusion = Fusion(lambda p: (slm, tok), (llm, tok), FusionGate(len(tok), "compact"),
                    torch.arange(len(tok)), lambda p: False, 64, rtt=1.0, rtt_jitter=0.0, tau_wait=0.2)
    prompts = ["question: where does kumix live? answer:", "describe tafan in one sentence:"]
    assert [fusion.generate(p, 8) for p in prompts] == greedy_generate(slm, tok, prompts, 8, batch_size=1)


def test_a_flagged_prompt_makes_no_llm_call_in_fusion(pico_zoo):
    from fedlab.privacy.detector import PrivacyDetector

    det = PrivacyDetector()
    fusion, calls, _ = _fusion(pico_zoo, flagged=lambda p: det.detect(p).flagged)
    fusion.generate("call my wife at +44 207 946 0958 and say", max_new_tokens=3)
    fusion.choice_score("my card 4111 1111 1111 1111 is", "blocked")
    assert calls == [] and fusion.stats["llm_calls"] == 0 and fusion.stats["tokens"] > 0
    fusion.generate("what is 3 plus 4?", max_new_tokens=2)
    assert len(calls) == fusion.stats["llm_calls"] > 0


@pytest.mark.federation
def test_floe_end_to_end_with_fusion(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    cfg = _cfg(tmp_path, profile_file, "method.llm=pico-gpt2", "method.fusion_eval_per_task=4",
               "method.fusion_positions=32", "method.fusion_epochs=1")
    f = run_experiment(cfg, progress=False).final
    assert "fused/acc/mean" in f and "fused/w_mean" in f
    assert f["fused/llm_calls"] > 0 and f["fused/flagged_prompts"] == 0 and f["fused/gate_positions"] > 0
    # one position in five held out for the NLL check; the gate's mean w per task there and on the tests
    total = f["fused/gate_positions"] + f["fused/heldout_positions"]
    assert 0 < total <= 32 and f["fused/heldout_positions"] == total // 5 > 0
    best_single = min(f["fused/heldout_nll_slm"], f["fused/heldout_nll_llm"])
    assert f["fused/gate_check"] == float(f["fused/heldout_nll"] <= best_single) and f["fused/heldout_nll"] > 0
    # fusion mixes the two models: its held-out NLL is neither the SLM's alone nor the LLM's alone
    assert f["fused/heldout_nll"] not in (f["fused/heldout_nll_slm"], f["fused/heldout_nll_llm"])
    assert {k for k in f if k.startswith("fused/gate_w/")} and {k for k in f if k.startswith("fused/w/")}
    # latency = max(measured edge, simulated network + cloud ≤ τ_wait), each part logged: the simulated part is the
    # config's 80 ± 40 ms RTT + 5 ms cloud on every LLM call (no prompt flagged here)
    assert 0 < f["fused/latency_edge_ms_per_token"] <= f["fused/latency_ms_per_token"]
    # the detector scored on the held-out templates (stage 1 only here: no stage-2 encoder configured)
    assert f["fused/detector_n"] > 50 and 0 < f["fused/detector_recall"] <= 1 and f["fused/detector_flagged_stage2"] == 0
    assert 45 - 1e-6 <= f["fused/latency_network_ms_per_token"] <= 125 + 1e-6


# ---- baselines -------------------------------------------------------------------------------------------

def test_same_tokenizer_zoo_models_share_their_vocabulary(pico_zoo):
    from fedlab.models import zoo
    from fedlab.models.zoo import load_tokenizer

    zoo.build("pico-llama-s", progress=False)
    assert load_tokenizer("pico-llama-s").get_vocab() == load_tokenizer("pico-llama").get_vocab()
    assert load_tokenizer("pico-gpt2").get_vocab() != load_tokenizer("pico-llama").get_vocab()


@pytest.mark.federation
def test_llm_fedavg_proxy_tunes_the_llm_with_the_averaged_slm(pico_zoo, tmp_path):
    import torch

    from fedlab.experiment import run_experiment
    from fedlab.methods.llm_fedavg.method import WithoutAdapter
    from fedlab.models import zoo
    from fedlab.models.zoo import load_model
    from fedlab.runtime.resident import get_resident
    from fedlab.transforms import set_state
    from fedlab.transforms.fusion import ProxyTuned

    zoo.build("pico-llama-s", progress=False)
    over = PICO + ["model.name=pico-llama-s", "method.name=llm_fedavg", "method.llm=pico-llama", "federation.rounds=1",
                   "data.num_clients=2", "data.partition=by_task", "data.tasks=[recall,describe]", "data.test_per_task=4",
                   "tracking.enabled=false", f"output_dir={tmp_path}/runs"]
    cfg = load_config(None, over)
    h = run_experiment(cfg, progress=False)
    f = h.final
    assert "llm/acc/mean" in f and "llm_zeroshot/acc/mean" in f
    assert "llm/rougeL/mean" in f                  # generation through the logits-only proxy-tuned model
    # the proxy-tuned logits are LLM + tuned − untuned, position by position
    res = get_resident(cfg)
    set_state(res.model, {k: v + 0.05 for k, v in res.init_state.items()})
    llm, _ = load_model("pico-llama")
    res.model.eval()
    llm.eval()
    ids = torch.randint(3, 50, (2, 7))
    got = ProxyTuned(llm, res.model, WithoutAdapter(res.model))(input_ids=ids).logits
    with res.model.disable_adapter():
        base = res.model(input_ids=ids).logits
    want = llm(input_ids=ids).logits + res.model(input_ids=ids).logits - base
    assert torch.allclose(got, want, atol=1e-5)
    assert not torch.allclose(res.model(input_ids=ids).logits, base)       # the adapter does change the SLM
    with pytest.raises(ConfigError, match="method.llm"):       # refused before anything is written
        run_experiment(load_config(None, [*over[:-1], f"output_dir={tmp_path}/bad", "method.llm=pico-gpt2"]),
                       progress=False)
    assert not (tmp_path / "bad").exists()


def test_cluster_average_uses_true_ranks_and_keeps_components_no_member_has():
    import torch

    from fedlab.hetero import aggregate_lora_states, pad_rank

    # ranks 2 and 4: component j < 2 averages both, j ∈ {2, 3} comes from the rank-4 client alone
    a2, a4 = torch.ones(2, 3), 3 * torch.ones(4, 3)
    out = aggregate_lora_states([{"A": a2}, {"A": a4}], {"A": 0})
    assert torch.allclose(out["A"][:, 0], torch.tensor([2.0, 2.0, 3.0, 3.0]))
    padded = aggregate_lora_states([{"A": pad_rank(a2, 0, 4)}, {"A": a4}], {"A": 0})     # what padding first gives
    assert torch.allclose(padded["A"][:, 0], torch.tensor([2.0, 2.0, 1.5, 1.5]))
    # two rank-2 members, an expert of rank 4: components 2 and 3 are kept from the expert, not zeroed
    expert = {"A": torch.arange(12.0).reshape(4, 3)}
    kept = aggregate_lora_states([{"A": a2}, {"A": 2 * a2}], {"A": 0}, fill=expert)
    assert torch.allclose(kept["A"][:2], 1.5 * torch.ones(2, 3)) and torch.equal(kept["A"][2:], expert["A"][2:])


@pytest.mark.federation
def test_floe_plots_the_rank_of_every_client_per_round(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    h = run_experiment(_cfg(tmp_path, profile_file, "method.router=false"), progress=False)
    png = next((tmp_path / "runs").rglob("floe_ranks.png"))
    assert png.stat().st_size > 1000 and h.rounds[1]["rank/mean"] > 0


def test_the_sync_pool_keeps_the_experts_of_clusters_that_sat_a_round_out(pico_zoo, tmp_path, profile_file):
    """In sync mode an expert whose devices all sat the round out stays in the pool,
    and its devices stay assigned to it; the clusters that trained are replaced by their new centres."""
    from fedlab.data.federated import build_federated_data
    from fedlab.methods.floe.method import Floe, Update

    cfg = _cfg(tmp_path, profile_file)
    floe = Floe(cfg, build_federated_data(cfg.data, cfg.seed))
    floe.setup()
    base = floe.centres[0]
    shifted = lambda d: {k: v + d for k, v in base.items()}      # noqa: E731
    a, b = shifted(0.1), shifted(-0.2)
    floe.centres, floe.assignment = [a, b], [0, 0, 1, 1]
    ups = [Update(c, floe.r_max, shifted(0.3 + c), shifted(0.3 + c), a, a, 0.0, 0.0) for c in (0, 1)]
    floe.cluster = lambda cids, padded, starts: ([0] * len(cids), {})     # clients 0, 1 form one cluster

    class Ctx:
        def log(self, metrics, prefix=""):
            pass

    floe.aggregate(ups, Ctx(), weighted=False)
    assert len(floe.centres) == 2 and floe.assignment == [0, 0, 1, 1]
    assert all(torch.equal(floe.centres[1][k], b[k]) for k in b)           # the absent cluster's expert, kept
    assert all(torch.allclose(floe.centres[0][k], base[k] + 0.8) for k in base)   # mean of 0.3 and 1.3


@pytest.mark.federation
def test_floe_exports_its_experts_router_and_fusion_gate(pico_zoo, tmp_path, profile_file):
    """`fedlab export`: every expert of the pool as a PEFT adapter with fedlab's logits, the router's Γ_j (one row
    per expert) and settings, the trained fusion gate that loads into FusionGate with the run's w, and a README."""
    from cli.test_export import _parties_load_with_fedlabs_logits
    from safetensors.torch import load_file

    from fedlab.experiment import run_experiment
    from fedlab.methods.floe.fusion import FusionGate

    cfg = _cfg(tmp_path, profile_file, "method.llm=pico-llama", "method.fusion_eval_per_task=2",
               "method.fusion_positions=16")
    h = run_experiment(cfg, progress=False)
    out = tmp_path / "out"
    manifest = _parties_load_with_fedlabs_logits(h.out_dir, out)
    experts = sorted(r for r in manifest["parties"] if r.startswith("expert_"))
    assert experts and manifest["files"] == ["router", "fusion_gate", "README.md"]
    gammas = load_file(str(out / "router" / "router.safetensors"))["experts"]
    assert gammas.shape[0] == len(experts)
    assert json.loads((out / "router" / "router.json").read_text())["encoder"] == "pico-bert"
    state = load_file(str(out / "fusion_gate" / "gate.safetensors"))
    vocab = state[next(k for k in state if k.endswith("weight"))].shape[1] // 2
    gate = FusionGate(vocab, "full")
    gate.load_state_dict(state)
    p = torch.softmax(torch.randn(3, vocab), -1)
    assert gate(p, p).shape == (3,) and "w = sigmoid(MLP" in (out / "README.md").read_text()
