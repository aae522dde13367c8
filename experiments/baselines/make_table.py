"""The baselines table: zero-shot, standalone, FedAvg, FedProx and centralized training on the embedded
benchmark (tiny-llama; homogeneous and heterogeneous settings) and on SmolLM2-135M-Instruct (heterogeneous,
small CPU budget).

    python experiments/baselines/make_table.py                      # every row, seeds 0,1,2 (resumable)
    python experiments/baselines/make_table.py --only tiny/         # the tiny-llama rows only
    python experiments/baselines/make_table.py --render-only        # RESULTS.md from results.json

Each run's record (command, resolved method config, MLflow run id, metrics) is in results.json;
RESULTS.md is rendered from it alone (`fedlab.runner`)."""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.runner import Planned, Results, run_table

HERE = Path(__file__).resolve().parent
METHODS = ["zeroshot", "standalone", "fedavg", "fedprox", "centralized"]
TASKS = ["recall", "two_hop", "arithmetic", "category", "sentiment", "paraphrase", "entailment", "topic"]


def plan() -> list[Planned]:
    rows = [Planned(f"tiny/{s}/{m}", HERE / f"{m}_{s}.yaml", label=m, setting=s)
            for s in ("homo", "hetero") for m in METHODS]
    rows += [Planned(f"smollm2/hetero/{m}", HERE / "fedavg_hetero_smollm2.yaml", (f"method.name={m}",), label=m,
                     setting="hetero-smollm2") for m in METHODS]
    return rows


def render(r: Results) -> str:
    seeds = sorted({rec["seed"] for rec in r.records.values()})
    lines = ["# Baseline results", "",
             f"Produced by `python experiments/baselines/make_table.py` (seeds {', '.join(map(str, seeds))}; "
             "2 CPU cores); every cell is the mean over seeds ± the half-width of its 95 % t-interval. "
             "`results.json` holds each run's command, resolved config, wall time and MLflow run id.", "",
             "| method | homo mean acc | hetero mean acc |", "|---|---|---|"]
    for m in METHODS:
        lines.append(f"| {m} | {r.final(f'tiny/homo/{m}', 'acc/mean')} | {r.final(f'tiny/hetero/{m}', 'acc/mean')} |")
    for prefix, title in (("tiny/hetero", "Heterogeneous setting, tiny-llama, accuracy per task (8 clients, one "
                                          "task each):"),
                          ("smollm2/hetero", "SmolLM2-135M-Instruct, heterogeneous setting (small CPU budget, see "
                                             "`fedavg_hetero_smollm2.yaml`):")):
        rows = [m for m in METHODS if r.runs(f"{prefix}/{m}")]
        if not rows:
            continue
        lines += ["", title, "", "| method | " + " | ".join(TASKS) + " | mean | wall s |", "|---" * (len(TASKS) + 3) + "|"]
        for m in rows:
            key = f"{prefix}/{m}"
            secs = r.values(key, lambda rec: rec["seconds"])
            lines.append(f"| {m} | " + " | ".join(r.final(key, f"acc/task_{t}", 2) for t in TASKS)
                         + f" | {r.final(key, 'acc/mean')} | {sum(secs) / len(secs):.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(run_table(HERE, plan, render, title="baselines"))
