"""Floe's positive control (the pooled-data SLM learns each task) and the paper's claims resting on it."""
from __future__ import annotations

import functools

from fedlab.evidence import (
    Claim,
    above_chance,
    above_zero_shot,
    metric_shares,
)

from floe_rows import HERE, MC_TASKS, TASKS, per_task_metric, task_kind

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


@functools.cache
def left_out() -> dict[str, str]:
    """{task: why}: the tasks a reference does not learn in every seed on validation data at the chosen rate
    (`python experiments/floe/budget.py`). They are scored and shown, and left out of every claim and its control:
    a claim on a mean reads the mean over the other tasks of its kind."""
    from fedlab.evidence.budget import left_out as of_table

    return of_table(HERE, every_seed=True)


def scored() -> list[str]:
    """The tasks the claims read: every task but those `left_out`."""
    return [t for t in TASKS if t not in left_out()]


def task_metric(mean: str, task: str) -> str:
    """The per-task metric behind a row's mean ("fused/rougeL/mean" → "fused/rougeL/food", "rougeL/mean" →
    "rougeL/task_food"), as `per_task_metric` names them."""
    prefix = mean.removesuffix("/mean")
    return f"{prefix}/{task}" if prefix.split("/")[0] in ("fused", "routed", "proxy") else f"{prefix}/task_{task}"


def value(metric: str):
    """A record → its final `metric`; a mean over a kind of task with a task left out is the mean of the kind's
    scored tasks (the recorded mean where none of them is left out)."""
    if not metric.endswith("/mean"):
        return lambda rec: rec["final"].get(metric)
    kind = metric.split("/")[-2]
    tasks = [t for t in scored() if task_kind(t) == kind]
    if len(tasks) == sum(task_kind(t) == kind for t in TASKS):
        return lambda rec: rec["final"].get(metric)

    def mean(rec):
        vals = [rec["final"].get(task_metric(metric, t)) for t in tasks]
        return None if not vals or None in vals else sum(vals) / len(vals)
    return mean


def _claim(text, source, paper, a, ma, b, mb):
    """A paper claim "a above b" on the metrics `ma` of row a and `mb` of row b; resting on the pooled SLM's
    control for the scored tasks the metrics read."""
    def tasks_of(m):
        if m.endswith("/mean"):
            kind = "acc" if "acc/" in m else "rougeL"
            return [t for t in scored() if task_kind(t) == kind]
        return [m.rsplit("/", 1)[1].removeprefix("task_")]
    need = set(tasks_of(ma)) | set(tasks_of(mb))
    control = tuple(c.on(need) for c in (POOLED_MC, POOLED_GEN) if set(c.tasks) & need)
    shares = lambda m: metric_shares(m) if "acc/" in m else None
    return Claim(text, source, paper, a, b, value(ma), fn_b=value(mb), control=control, shares=shares(ma),
                 shares_b=shares(mb))


NO_ROUGE = "no number (the paper reports no Rouge-L; Table IV: the hybrid above either model alone)"


@functools.cache
def claims() -> list[Claim]:
    """The paper's claims on the scored tasks, each with the part of the pooled SLM's control it reads."""
    return [
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
                 per_task_metric("llm_base", t)) for t in scored()],
    ]
