"""Floe's figures beside RESULTS.md: Fig. 12 (per task) and Fig. 14 (the number of experts)."""
from __future__ import annotations

from fedlab.evidence import (
    Results,
)

from floe_rows import HERE, TASKS, task_kind


def figures(r: Results) -> None:
    """fig14_experts.png (accuracy against M) and fig12_tasks.png (per-task scores of Floe, its ablations and
    SLM-Local), means over seeds with 95 % intervals."""
    from fedlab.evidence.stats import mean_ci
    from fedlab.plots import bars_with_intervals, line_with_intervals

    pts = []
    for m in (1, 2, 3, 5, 8):
        for metric, name in (("routed/acc/mean", "accuracy (MC)"), ("routed/rougeL/mean", "Rouge-L")):
            v = r.values(f"floe/experts_{m}", lambda rec, metric=metric: rec["final"].get(metric))
            if v:
                mean, half = mean_ci(v)
                pts.append((name, m, mean, half))
    if pts:
        line_with_intervals(pts, HERE / "fig14_experts.png", "experts M", "routed SLM score",
                            "Floe, Fig. 14 analogue: number of experts")
    # the SLM-side rows first (no LLM): own expert (Floe^-R), routed, one cluster routed; then the fused Floe
    rows = [("SLM-Local", "floe/slm_local", "{kind}/task_{task}"),
            ("Floe^-P (one cluster, routed SLM)", "floe/floe_no_cluster", "routed/{kind}/{task}"),
            ("Floe^-R (own expert)", "floe/floe", "{kind}/task_{task}"),
            ("Floe routed SLM", "floe/floe", "routed/{kind}/{task}"),
            ("Floe (fused with the LLM)", "floe/floe", "fused/{kind}/{task}")]
    bars = []
    for name, key, pattern in rows:
        for t in TASKS:
            metric = pattern.format(kind=task_kind(t), task=t)
            v = r.values(key, lambda rec, m=metric: rec["final"].get(m))
            if v:
                mean, half = mean_ci(v)
                bars.append((name, t, mean, half))
    if bars:
        bars_with_intervals(bars, HERE / "fig12_tasks.png", "accuracy (recall, sentiment) / Rouge-L (others)",
                            "Floe, Fig. 12 analogue: per task")
