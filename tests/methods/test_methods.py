"""The method matrix: every registered method end to end on a pico model, 2 clients × 2 rounds, and the
same numbers from the in-process and the Ray backends."""
import dataclasses

import pytest

from conftest import PICO
from fedlab import registry
from fedlab.config import load_config
from fedlab.experiment import run_experiment

SMALL = PICO + ["data.partition=by_task", "data.num_clients=2", "data.tasks=[recall,sentiment]",
                "tracking.enabled=false"]


# per-method settings that fit the 4-block pico model (Offsite-Tuning needs a middle for its emulator)
FIT_PICO = {m: ["method.adapter_front=1", "method.adapter_back=1"] for m in ("ot", "fedot", "fedbiot", "fedot_et")}
# LLM-FedAvg proxy-tunes an LLM that shares the SLM's tokenizer
FIT_PICO["llm_fedavg"] = ["model.name=pico-llama-s", "method.llm=pico-llama"]
FIT_PICO["llm_fedmoe"] = ["model.name=pico-llama-s", "method.llm=pico-llama"]
# Floe's router embeds prompts with a sentence encoder: the test-scale one
for _m in ("floe", "floe_no_rank", "floe_no_cluster", "llm_fedmoe"):
    FIT_PICO[_m] = FIT_PICO.get(_m, []) + ["method.router_encoder=pico-bert"]
# ELSA fine-tunes an encoder (LoRA on attention, one edge for the two clients)
FIT_PICO["elsa"] = ["model.name=pico-bert", "model.lora.target_modules=[query,value]", "method.num_edges=1",
                    "method.warmup_steps=2", "method.probe_size=8"]
PROXY = ["data.public_size=16", "method.bi_samples=16"]


def _run(tmp_path, *extra):
    cfg = load_config(None, SMALL + [f"output_dir={tmp_path}/runs", *extra])
    return run_experiment(cfg, progress=False)


@pytest.mark.federation
@pytest.mark.parametrize("method", registry.method_names())
def test_every_method_runs_end_to_end(pico_zoo, tmp_path, method):
    proxy_based = "bi_samples" in {f.name for f in dataclasses.fields(registry.get(method).config_cls)}
    h = _run(tmp_path, f"method.name={method}", *FIT_PICO.get(method, []), *(PROXY if proxy_based else []))
    rounds = [r["round"] for r in h.rounds]
    assert rounds == ([0] if method == "zeroshot" else [0, 1, 2])
    for r in h.rounds:
        assert {"acc/client_0", "acc/client_1", "acc/task_recall", "acc/task_sentiment"} <= set(r)
    if method != "zeroshot":
        last = h.rounds[-1]
        assert last["loss/task"] > 0 and last["clients/failed"] == 0
        assert last["bytes/down"] > 0 or method == "standalone"
        assert last["bytes/up"] > 0


@pytest.mark.federation
def test_training_moves_the_model(pico_zoo, tmp_path):
    h = _run(tmp_path, "method.name=fedavg", "federation.lr=0.01")
    assert h.rounds[-1]["server/update_norm"] > 0
    # the task loss falls over the rounds on the training data
    assert h.rounds[-1]["loss/task"] < h.rounds[1]["loss/task"] + 1e-6


@pytest.mark.federation
def test_fedprox_logs_its_term(pico_zoo, tmp_path):
    h = _run(tmp_path, "method.name=fedprox", "method.mu=1.0")
    assert h.rounds[-1]["loss/proximal"] > 0
    h0 = _run(tmp_path / "b", "method.name=fedprox", "method.mu=0.0")
    assert h0.rounds[-1]["loss/proximal"] == 0


@pytest.mark.federation
@pytest.mark.slow   # 28 s; every method keeps its own both-backends test in the default tier (default tier ≤ 10 min on 2 cores)
def test_same_seed_same_numbers_inprocess_and_ray(pico_zoo, tmp_path):
    ray = pytest.importorskip("ray")
    a = _run(tmp_path / "a", "method.name=fedavg", "backend.name=inprocess")
    try:
        b = _run(tmp_path / "b", "method.name=fedavg", "backend.name=ray", "backend.num_workers=2",
                 "backend.num_cpus=2")
        s = _run(tmp_path / "c", "method.name=standalone", "backend.name=ray", "backend.num_workers=2",
                 "backend.num_cpus=2")
    finally:
        ray.shutdown()
    s_in = _run(tmp_path / "d", "method.name=standalone", "backend.name=inprocess")
    keys = [k for k in a.rounds[-1] if k.startswith(("acc/", "loss/task", "bytes/"))]
    for ra, rb in zip(a.rounds, b.rounds):
        assert {k: ra.get(k) for k in keys} == {k: rb.get(k) for k in keys}
    assert [r["acc/mean"] for r in s.rounds] == [r["acc/mean"] for r in s_in.rounds]


@pytest.mark.federation
def test_fedproxy_same_numbers_on_both_backends(pico_zoo, tmp_path):
    """Clients on Ray actors rebuild the proxy from the shipped LLM and receive C beside φ."""
    ray = pytest.importorskip("ray")
    extra = ["method.name=fedproxy", "method.pcr_lambda=0.5", *PROXY]
    a = _run(tmp_path / "a", *extra)
    try:
        b = _run(tmp_path / "b", *extra, "backend.name=ray", "backend.num_workers=2", "backend.num_cpus=2")
    finally:
        ray.shutdown()
    keys = [k for k in a.final if k.startswith(("acc/", "llm/", "loss/", "bytes/"))]
    assert {k: a.final[k] for k in keys} == {k: b.final.get(k) for k in keys}


@pytest.mark.federation
def test_offsite_family_same_numbers_on_both_backends_and_after_fedbiot(pico_zoo, tmp_path):
    """FedBiOT writes its re-aligned emulator into the clients' resident model: a later run in the same
    process must not inherit it (runs start from fresh residents), and Ray must agree with in-process."""
    ray = pytest.importorskip("ray")
    offsite = [*FIT_PICO["fedot"], *PROXY]
    alone = _run(tmp_path / "alone", "method.name=fedot", *offsite)
    biot = _run(tmp_path / "biot", "method.name=fedbiot", *offsite)
    after = _run(tmp_path / "after", "method.name=fedot", *offsite)
    try:
        biot_ray = _run(tmp_path / "biot_ray", "method.name=fedbiot", *offsite, "backend.name=ray",
                        "backend.num_workers=2", "backend.num_cpus=2")
    finally:
        ray.shutdown()
    keys = lambda h: [{k: v for k, v in r.items() if k.startswith(("acc/", "loss/", "llm/"))} for r in h.rounds]  # noqa: E731
    assert keys(alone) == keys(after)
    assert biot.rounds[1]["server/realign_kl"] == biot_ray.rounds[1]["server/realign_kl"]
    assert keys(biot) == keys(biot_ray)


@pytest.mark.federation
def test_zeroshot_scores_each_clients_own_model(pico_zoo, tmp_path):
    """With model.clients every client scores its own base model (no LLM state is sent to it)."""
    h = _run(tmp_path, "method.name=zeroshot", "model.clients=[pico-llama,pico-gpt2]")
    llama = _run(tmp_path / "llama", "method.name=zeroshot")
    gpt2 = _run(tmp_path / "gpt2", "method.name=zeroshot", "model.name=pico-gpt2")
    assert h.rounds[0]["acc/client_0"] == llama.rounds[0]["acc/client_0"]
    assert h.rounds[0]["acc/client_1"] == gpt2.rounds[0]["acc/client_1"]
