"""FedProxy's learning rate chosen on validation data, for every row of its heterogeneous table alike: its
reference — CentSFT, the LLM LoRA-tuned on the pooled data of the eight tasks — at each rate of the grid, scored on
validation rows (`VALIDATION`); the rate under which it learns the most (task, seed) cells by FedProxy's
control rule (its own zero-shot + 2 points, `make_tables.centsft`) is chosen. A task CentSFT does not learn in
every seed there leaves the heterogeneous claims (`make_tables.left_out`).

    python experiments/fedproxy/budget.py                # the grid, seeds 0,1,2 (resumable)
    python experiments/fedproxy/budget.py --render-only  # budget/RESULTS.md from budget/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "budget"
TABLES = load_table("fedproxy")
# 300 validation rows a task, as many as a test set, about the population its test set asks about; CentSFT
# trains on the table's 160 rows a task (`fedlab.evidence.budget.held_validation`)
VALIDATION = budget.held_validation(300, 32)
GRID = budget.Grid(
    "federation.lr", ("0.002", "0.005", "0.001"),       # the tables' rate first: a tie keeps it
    (Planned("hetero/centsft", HERE / "hetero_centsft.yaml", TABLES.EVAL, "CentSFT (hetero)"),),
    lambda prefix: [TABLES.centsft("hetero", prefix)],
    validation=VALIDATION)


def plan() -> list[Planned]:
    return budget.plan(GRID)


def render(r: Results) -> str:
    return budget.page(r, GRID, "FedProxy: the learning rate chosen on validation data",
                       "experiments/fedproxy/budget.py", __doc__, "The heterogeneous reference",
                       every_seed=True)


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="fedproxy budget"))
