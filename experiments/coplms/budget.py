"""Co-PLMs' learning rate chosen on validation data, for every row of its tables alike: the references of Table 1
— the server LLM and each device SLM family LoRA-tuned centrally on the heterogeneous setting's pooled data (the
positive control, `coplms_claims.learns`: exact match 10 points above chance on every task) — at each rate of the
grid, scored on rows held out of the training data; the rate under which they learn the most (row, task, seed)
cells is chosen.

    python experiments/coplms/budget.py                # the grid, seeds 0,1,2 (resumable)
    python experiments/coplms/budget.py --render-only  # budget/RESULTS.md from budget/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "budget"
TABLES = load_table("coplms")
GRID = budget.Grid(
    "federation.lr", ("0.005", "0.002", "0.01"),       # the tables' rate first: a tie keeps it
    tuple(p for p in TABLES.plan() if p.key in {f"control/{m}/centralized" for m in TABLES.CONTROL_MODELS}),
    lambda prefix: [TABLES.learns(m, f"{prefix}control/{m}/centralized") for m in TABLES.CONTROL_MODELS],
    # 24 of the 120 training rows a task held out (a fifth, as family.py and FedMKT's budget hold out)
    validation=("data.evaluate_on=validation", "data.validation_per_task=24"))


def plan() -> list[Planned]:
    return budget.plan(GRID)


def render(r: Results) -> str:
    return budget.page(r, GRID, "Co-PLMs: the learning rate chosen on validation data",
                       "experiments/coplms/budget.py", __doc__, "The Table 1 references")


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="coplms budget"))
