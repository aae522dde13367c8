"""Floe's tables at embedded scale (paper 003): Table III (methods), the ablations (Fig. 12), participation
with and without rank selection (Fig. 11), the mean fusion weight (Fig. 13), the number of experts (Fig. 14),
latency (Fig. 16), model heterogeneity (Table V) and the synchronous/asynchronous comparison — each cell the
mean over seeds ± its 95 % interval; Fig. 12 and Fig. 14 as plots next to RESULTS.md.

    python experiments/floe/make_tables.py                  # every row, seeds 0-4 (resumable)
    python experiments/floe/make_tables.py --render-only    # RESULTS.md from results.json

Scores are on the same test items for every row of a seed (300 per task, drawn anew for each seed:
`data.test_draw: per_seed` in base.yaml; every fused row scores all of them): multiple-choice accuracy (recall,
sentiment) and Rouge-L (describe, food, friend). Baselines score each device's model on its own task; Floe
rows give the fused model (router + fusion, every prompt routed over the expert pool), the routed SLM alone,
and each device's own expert (Floe^-R)."""
from __future__ import annotations

import sys

from fedlab.evidence import (
    TABLE_SEEDS,
    Results,
    System,
    page,
    run_table,
)

# the table's parts, re-exported here: `fedlab.evidence.summary.load_table("floe")` gives every name in one module
from floe_claims import *
from floe_figures import *
from floe_rows import *
from floe_rows import _mean_over_rounds
from floe_sections import *

INTRO = ("Accuracy on recall and sentiment, Rouge-L on describe, food and friend, {items} test items per task drawn "
         "per seed (the real-LLM rows: {real_items}). † marks a row made by another config than the script now "
         "runs. \"wall s\" is "
         "each run's elapsed time as recorded, beside whatever else the machine ran then: not a benchmark. The paper's "
         "numbers are BBH accuracy (Gemma-2B SLM, Gemma-7B LLM; Table III's printed averages); it reports no Rouge-L, "
         "so the Rouge-L claims carry its sign only.")


def intro() -> str:
    """The page's opening paragraph, with the tasks left out of the claims and why."""
    from fedlab.evidence.budget import choices_said

    gone = "".join(f" **{t}** is scored and shown but left out of every claim, its control and the claims' "
                   f"means: {why} (`budget/RESULTS.md`)." for t, why in left_out().items())
    said = choices_said(HERE, chain="tables_chain")
    budget = (f" Every row's devices train at {said}, chosen on validation data by the tables' references, the "
              "pooled-data SLM and each device's expert, for every row alike (`budget/RESULTS.md`)." if said else "")
    return (INTRO.format(items=items_per_task("floe/slm_base"), real_items=items_per_task("floe/real/floe"))
            + budget + gone)


def render(r: Results) -> str:
    stale, outdated = r.stale_and_outdated(plan())   # † on rows another config, other weights or numerics made
    return page(r, SYSTEM, intro(), body(r, stale), outdated=outdated, stale=stale)


def body(r: Results, stale: set[str]) -> list[str]:
    lines = [
             "## Table III analogue", "",
             "| method | accuracy (MC) | Rouge-L | routed SLM acc | routed SLM Rouge-L | own expert acc | own expert Rouge-L | wall s |",
             "|---|---|---|---|---|---|---|---|"]
    for key, label, _ in BASELINES + FLOE:
        k = f"floe/{key}"
        if not r.runs(k):
            continue
        mark = " †" if k in stale else ""
        if key.startswith("floe"):
            cells = [r.final(k, "fused/acc/mean"), r.final(k, "fused/rougeL/mean"), r.final(k, "routed/acc/mean"),
                     r.final(k, "routed/rougeL/mean"), r.final(k, "acc/mean"), r.final(k, "rougeL/mean")]
        elif key == "llm_fedavg":
            cells = [r.final(k, "llm/acc/mean"), r.final(k, "llm/rougeL/mean"), "n/a", "n/a", "n/a", "n/a"]
        elif key == "llm_fedmoe":
            cells = [r.final(k, "proxy/acc/mean"), r.final(k, "proxy/rougeL/mean"), r.final(k, "routed/acc/mean"),
                     r.final(k, "routed/rougeL/mean"), r.final(k, "acc/mean"), r.final(k, "rougeL/mean")]
        else:
            cells = [r.final(k, "acc/mean"), r.final(k, "rougeL/mean"), "n/a", "n/a", "n/a", "n/a"]
        cells.append(r.cell(k, lambda rec: rec.get("seconds"), 0))
        lines.append(f"| {label}{mark} | " + " | ".join(cells) + " |")
    lines += ["", "## Devices, fusion and time", "",
              "Latency per token = max(edge, network + cloud capped at τ_wait): the edge time is **measured** (the routed "
              "SLM's forward on this CPU); the network round trip and the cloud's compute are **simulated** from the "
              "config (`fusion_rtt` ± `fusion_rtt_jitter`, `fusion_cloud_ms`), so the latency column is mostly the "
              "simulation's, not a measurement of this machine.", "",
              "| method | devices trained per round (of 15) | mean rank | clusters (last round) | mean w | "
              "LLM fallback share | edge ms/token (measured) | network + cloud ms/token (simulated) | "
              "latency ms/token | flagged test prompts | detector precision / recall / F1 (held-out templates) | "
              "simulated s |",
              "|---" * 12 + "|"]
    for key, label, _ in FLOE:
        k = f"floe/{key}"
        if not r.runs(k):
            continue
        lines.append(f"| {label} | " + " | ".join([
            r.cell(k, lambda rec: _mean_over_rounds(rec, "trained_per_round"), 1),
            r.cell(k, lambda rec: _mean_over_rounds(rec, "rank_mean"), 1),
            r.final(k, "server/clusters/num", 1), r.final(k, "fused/w_mean"), r.final(k, "fused/fallback_share"),
            r.final(k, "fused/latency_edge_ms_per_token", 2), r.final(k, "fused/latency_network_ms_per_token", 1),
            r.final(k, "fused/latency_ms_per_token", 1), r.final(k, "fused/flagged_prompts", 0),
            " / ".join(r.final(k, f"fused/detector_{m}") for m in ("precision", "recall", "f1")),
            r.cell(k, lambda rec: _mean_over_rounds(rec, "simulated_s"), 2)]) + " |")
    lines += (gate_table(r, stale) + per_task_table(r) + alignment_table(r) + experts_table(r) + hetero_table(r)
              + real_table(r, stale) + differences(r))
    figures(r)
    return lines


SYSTEM = System("Floe", "devices tune LoRA at the rank they can afford; clustered experts, a router, and fusion with a cloud LLM behind a privacy detector", "experiments/floe/make_tables.py", lambda: plan(),
                lambda _r: claims(), run="fedlab run experiments/floe/hetero.yaml")


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="Floe tables", argv=sys.argv[1:], summarize=summarize,
                       default_seeds=TABLE_SEEDS))
