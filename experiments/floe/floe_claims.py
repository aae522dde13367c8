"""Floe's positive control (the pooled-data SLM learns each task) and the paper's claims resting on it."""
from __future__ import annotations

from fedlab.evidence import (
    Claim,
    above_chance,
    above_zero_shot,
    metric_shares,
)

from floe_rows import MC_TASKS, TASKS, per_task_metric, task_kind

# The positive control: the SLM LoRA-tuned on every device's data pooled (`floe/slm_pooled`) learns each task —
# MARGIN_MC points above chance on the multiple-choice tasks, MARGIN_GEN points of Rouge-L above its own zero-shot
# on the generative ones — in every seed. Every claim compares models built from the devices' SLM experts.
MARGIN_MC, MARGIN_GEN = 10.0, 2.0


def _pooled_score(rec, t, which="final"):
    return (rec.get(which) or {}).get(f"{task_kind(t)}/task_{t}")


def learns(name: str, row: str) -> list:
    """The control on one row: MARGIN_MC points above chance on each multiple-choice task, MARGIN_GEN points of
    Rouge-L above its own zero-shot on each generative one, in every seed."""
    from fedlab.data.tasks import TASKS as SPECS

    return [above_chance(f"{name}, multiple-choice tasks", [row], MC_TASKS, _pooled_score,
                         lambda t: SPECS[t].chance, MARGIN_MC),
            above_zero_shot(f"{name}, generative tasks", [row], [t for t in TASKS if t not in MC_TASKS],
                            _pooled_score, lambda rec, t: _pooled_score(rec, t, "zero"), MARGIN_GEN)]


POOLED_MC, POOLED_GEN = learns("pooled-data SLM", "floe/slm_pooled")


def _claim(text, source, paper, a, ma, b, mb):
    """A paper claim "a above b" on the metrics `ma` of row a and `mb` of row b; resting on the pooled SLM's
    control for the tasks the metrics read."""
    def tasks_of(m):
        if m.endswith("/mean"):
            return MC_TASKS if "acc/" in m else [t for t in TASKS if t not in MC_TASKS]
        return [m.rsplit("/", 1)[1].removeprefix("task_")]
    need = set(tasks_of(ma)) | set(tasks_of(mb))
    control = tuple(c.on(need) for c in (POOLED_MC, POOLED_GEN) if set(c.tasks) & need)
    shares = lambda m: metric_shares(m) if "acc/" in m else None
    return Claim(text, source, paper, a, b, lambda rec: rec["final"].get(ma), fn_b=lambda rec: rec["final"].get(mb),
                 control=control, shares=shares(ma), shares_b=shares(mb))


NO_ROUGE = "no number (the paper reports no Rouge-L; Table IV: the hybrid above either model alone)"
CLAIMS = [
    _claim("Floe above LLM-base (acc)", "Table III", "46.39 vs 42.79 (+3.60)", "floe/floe", "fused/acc/mean",
           "floe/llm_base", "acc/mean"),
    _claim("Floe above LLM-base (Rouge-L)", "Table IV", NO_ROUGE, "floe/floe", "fused/rougeL/mean", "floe/llm_base",
           "rougeL/mean"),
    _claim("Floe above LLM-FedMoE (acc)", "Table III", "46.39 vs 45.12 (+1.27)", "floe/floe", "fused/acc/mean",
           "floe/llm_fedmoe", "proxy/acc/mean"),
    _claim("LLM-FedMoE above LLM-FedAvg (acc)", "Table III", "45.12 vs 43.81 (+1.31)", "floe/llm_fedmoe",
           "proxy/acc/mean", "floe/llm_fedavg", "llm/acc/mean"),
    _claim("Floe above LLM-FedAvg (acc)", "Table III", "46.39 vs 43.81 (+2.58)", "floe/floe", "fused/acc/mean",
           "floe/llm_fedavg", "llm/acc/mean"),
    _claim("LLM-FedAvg above LLM-base (acc)", "Table III", "43.81 vs 42.79 (+1.02)", "floe/llm_fedavg", "llm/acc/mean",
           "floe/llm_base", "acc/mean"),
    _claim("Floe above SLM-FedAvg (acc)", "Table III", "46.39 vs 31.96 (+14.43)", "floe/floe", "fused/acc/mean",
           "floe/slm_fedavg", "acc/mean"),
    _claim("Floe above SLM-base (acc)", "Table III", "46.39 vs 32.21 (+14.18)", "floe/floe", "fused/acc/mean",
           "floe/slm_base", "acc/mean"),
    _claim("Floe above SLM-FedAvg (Rouge-L)", "Table III caption", NO_ROUGE, "floe/floe", "fused/rougeL/mean",
           "floe/slm_fedavg", "rougeL/mean"),
    _claim("Floe fused above its routed SLM alone (acc)", "Table V (SLM-Only)", "60.4 vs 38.3 (+22.1)", "floe/floe",
           "fused/acc/mean", "floe/floe", "routed/acc/mean"),
    _claim("Floe fused above its routed SLM alone (Rouge-L)", "Table IV", NO_ROUGE, "floe/floe", "fused/rougeL/mean",
           "floe/floe", "routed/rougeL/mean"),
    _claim("Floe fused above its routed SLM alone, food (Rouge-L)", "Table IV", NO_ROUGE, "floe/floe",
           "fused/rougeL/food", "floe/floe", "routed/rougeL/food"),
    _claim("Floe routed above each device's own expert, Floe^-R (acc)", "Fig. 12", "no number (bars only)",
           "floe/floe", "routed/acc/mean", "floe/floe", "acc/mean"),
    _claim("Floe above Floe^-M, no rank selection (acc)", "Fig. 11", "no number (participation only)", "floe/floe",
           "fused/acc/mean", "floe/floe_no_rank", "fused/acc/mean"),
    _claim("Floe above Floe^-P, one cluster (acc)", "Fig. 12", "no number (bars only)", "floe/floe", "fused/acc/mean",
           "floe/floe_no_cluster", "fused/acc/mean"),
    _claim("SmolLM2 cloud: Floe above LLM-base (acc)", "Table V", "58.2 vs 54.3 (+3.8)", "floe/real/floe",
           "fused/acc/mean", "floe/real/llm_base", "acc/mean"),
    _claim("SmolLM2 cloud: Floe above LLM-base (Rouge-L)", "Table IV", NO_ROUGE, "floe/real/floe",
           "fused/rougeL/mean", "floe/real/llm_base", "rougeL/mean"),
    _claim("SmolLM2 cloud: Floe fused above its routed SLM alone (acc)", "Table V (SLM-Only)", "60.4 vs 38.3 (+22.1)",
           "floe/real/floe", "fused/acc/mean", "floe/real/floe", "routed/acc/mean"),
    # per task: where the headline difference comes from (accuracy on the multiple-choice tasks, Rouge-L on the
    # generative ones); the paper's tasks are BBH's, none of them these
    *[_claim(f"Floe above LLM-base, {t} ({task_kind(t)})", "Table III", "no number (no such task; Floe above "
             "LLM-base in 23 of its 27 BBH tasks)", "floe/floe", per_task_metric("floe", t), "floe/llm_base",
             per_task_metric("llm_base", t)) for t in TASKS],
]
