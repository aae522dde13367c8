"""Floe's table rows: the baselines, Floe and its ablations, the expert counts, the edge SLMs and the real cloud LLM, with the metric each task is scored by."""
from __future__ import annotations

from pathlib import Path

from fedlab.evidence import (
    Planned,
)

HERE = Path(__file__).resolve().parent
CFG = HERE / "base.yaml"
LLM = "method.llm=tiny-llama"
PROFILE = "method.profile=experiments/floe/profile_tiny-llama-s.json"
# every Floe-family row embeds prompts with the zoo's encoder: `auto` would take MiniLM where it is installed,
# and a row's numbers must not depend on what else is installed (a method.name override starts the method
# section from its defaults, so base.yaml's router_encoder does not reach the other methods' rows)
ROUTER = "method.router_encoder=tiny-bert"
# the privacy detector's stage 2 in every fused row: the zoo's tiny-bert, static pooling, fitted on the
# validation templates; on the held-out test templates it scores F1 0.90 against stage 1's 0.42 (logged per run as
# fused/detector_*)
DETECTOR = ("method.detector_encoder=tiny-bert", "method.detector_pooling=static")
BASELINES = [("slm_base", "SLM-base", ("method.name=zeroshot",)),
             # the positive control: the same SLM LoRA-tuned on every device's data pooled
             ("slm_pooled", "SLM pooled (every device's data, centralized)", ("method.name=centralized",)),
             ("slm_local", "SLM-Local", ("method.name=standalone",)),
             ("slm_fedavg", "SLM-FedAvg", ("method.name=fedavg",)),
             ("llm_base", "LLM-base", ("method.name=zeroshot", "model.name=tiny-llama")),
             ("llm_fedavg", "LLM-FedAvg (proxy tuning)", ("method.name=llm_fedavg", LLM)),
             ("llm_fedmoe", "LLM-FedMoE (dense top-3 router, proxy tuning)",
              ("method.name=llm_fedmoe", LLM, PROFILE, ROUTER))]
# the ablations are other method names, so base.yaml's method section (fusion over every test item) does not reach
# them: they name it, so that their fused scores are on the same items as Floe's
ALL_ITEMS = "method.fusion_eval_per_task=null"
FLOE = [("floe", "Floe", ("method.name=floe", LLM, PROFILE, ROUTER, *DETECTOR)),
        ("floe_no_rank", "Floe^-M (no rank selection)",
         ("method.name=floe_no_rank", LLM, PROFILE, ROUTER, *DETECTOR, ALL_ITEMS)),
        ("floe_no_cluster", "Floe^-P (one cluster)",
         ("method.name=floe_no_cluster", LLM, PROFILE, ROUTER, *DETECTOR, ALL_ITEMS)),
        ("floe_compact", "Floe, compact fusion features",
         ("method.name=floe", LLM, PROFILE, ROUTER, *DETECTOR, "method.fusion_features=compact")),
        ("floe_async", "Floe, asynchronous (Eq. 5)", ("method.name=floe", LLM, PROFILE, ROUTER, *DETECTOR, "method.mode=async")),
        # the fallback row: an RTT of 200 ± 100 ms crosses τ_wait = 200 ms for about half the LLM's
        # answers, so accuracy can be read against the fallback share (the default 80 ± 40 ms never falls back)
        ("floe_rtt200", "Floe, RTT 200 ± 100 ms (crosses τ_wait)",
         ("method.name=floe", LLM, PROFILE, ROUTER, *DETECTOR, "method.fusion_rtt=0.2", "method.fusion_rtt_jitter=0.1"))]


# Fig. 14: the number of experts M fixed, the routed SLM alone (the expert count acts in the router; no LLM)
EXPERTS = [(f"experts_{m}", f"M = {m}", ("method.name=floe", PROFILE, ROUTER, "method.llm=null", f"method.experts={m}"))
           for m in (1, 2, 3, 5, 8)]
# Table V: other edge SLMs with the same cloud LLM; their tokenizers differ from the LLM's, so fusion maps the
# LLM's distribution into the SLM's vocabulary. Each with its own pinned profile.
EDGES = ("tiny-gpt2", "tiny-opt")
HETERO = [row for m in EDGES for row in (
    (f"edge_{m}_base", f"{m} zero-shot", ("method.name=zeroshot", f"model.name={m}")),
    (f"edge_{m}_floe", f"Floe, edge {m}", ("method.name=floe", f"model.name={m}", LLM, ROUTER, *DETECTOR,
                                          f"method.profile=experiments/floe/profile_{m}.json")))]


# A real cloud LLM: SmolLM2-135M-Instruct in the cloud, fused with the devices' routed tiny-llama-s
# experts through the vocabulary map (its tokenizer differs); 60 test items per task (drawn per seed) so that the
# real LLM's generation fits a 2-core budget; LLM-only and SLM-only zero-shot on the same items; `--only floe/real/`
REAL_LLM = "smollm2-135m"
REAL_ITEMS = "data.test_per_task=60"
REAL = [("real/llm_base", "LLM-base (SmolLM2)", ("method.name=zeroshot", f"model.name={REAL_LLM}", REAL_ITEMS)),
        ("real/slm_base", "SLM-base (tiny-llama-s)", ("method.name=zeroshot", REAL_ITEMS)),
        ("real/floe", "Floe, cloud LLM SmolLM2", ("method.name=floe", f"method.llm={REAL_LLM}", PROFILE, ROUTER,
                                                 *DETECTOR, REAL_ITEMS))]


def plan() -> list[Planned]:
    return [Planned(f"floe/{key}", CFG, over, label=label, setting="real" if key.startswith("real/") else "embedded")
            for key, label, over in BASELINES + FLOE + EXPERTS + HETERO + REAL]


def items_per_task(key: str) -> int:
    """The test items per task the row `key` of the plan is scored on (its resolved `data.test_per_task`)."""
    return next(p for p in plan() if p.key == key).resolve(0).data.test_per_task


def summarize(cfg, h) -> dict:
    """Per run, over its training rounds: devices trained per round, their mean rank, the simulated clock."""
    rounds = [r for r in h.rounds if r.get("round", 0) >= 1]
    mean = lambda k: (sum(r[k] for r in rounds if k in r) / max(1, sum(k in r for r in rounds))) if rounds else None
    return {"trained_per_round": mean("clients/trained"), "rank_mean": mean("rank/mean"),
            "simulated_s": rounds[-1].get("time/simulated_clock") if rounds else None}


def _mean_over_rounds(rec: dict, metric: str) -> float | None:
    return (rec.get("summary") or {}).get(metric)


TASKS = ["recall", "sentiment", "describe", "food", "friend"]


def task_kind(task: str) -> str:
    """The metric a task is scored by: multiple-choice accuracy for recall and sentiment, Rouge-L otherwise."""
    return "acc" if task in ("recall", "sentiment") else "rougeL"


MC_TASKS = [t for t in TASKS if task_kind(t) == "acc"]


def per_task_metric(key: str, task: str) -> str:
    """The final-metric name of a row's headline score on one task (multiple-choice accuracy for recall and
    sentiment, Rouge-L for the generative tasks), for the keys of BASELINES and FLOE (without `floe/`): the fused
    model for the Floe rows (keys starting with `floe`), the proxy-tuned LLM for LLM-FedAvg / LLM-FedMoE, each
    device's own model for the baselines."""
    kind = task_kind(task)
    if key.startswith("floe"):
        return f"fused/{kind}/{task}"
    if key == "llm_fedmoe":
        return f"proxy/{kind}/{task}"
    if key == "llm_fedavg":
        return f"llm/{kind}/task_{task}"
    return f"{kind}/task_{task}"


def share_metric(row: str, task: str) -> str:
    """The final-metric name of the share of the most frequent answer of the model a row's per-task score reads
    (`per_task_metric` with acc → top: the fused model for Floe rows, the proxy-tuned LLM for the LLM baselines,
    each device's own model otherwise); `row` is the full key (`floe/…`)."""
    return per_task_metric(row.removeprefix("floe/"), task).replace("acc/", "top/", 1)
