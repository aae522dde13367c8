"""FedMKT's learning rate chosen on validation data, for every row of its tables alike: the references of the
multi-task tables — the centralized LLM (LoRA on the pooled data) and the Standalone SLMs — at each rate of the
grid, scored on 32 rows per task held out of the training data; the rate under which they learn the most
(row, task, seed) cells by FedMKT's control rule (zero-shot + 2 points, `make_tables.learns`) is chosen.

    python experiments/fedmkt/budget.py                # the grid, seeds 0,1,2 (resumable)
    python experiments/fedmkt/budget.py --only lr0.002/ --seeds 3,4   # two more seeds at the chosen rate
    python experiments/fedmkt/budget.py --render-only  # budget/RESULTS.md from budget/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "budget"
TABLES = load_table("fedmkt")
VALIDATION = ("data.evaluate_on=validation", "data.validation_per_task=32")
GRID = budget.Grid(
    "federation.lr", ("0.005", "0.002", "0.001"),       # the tables' rate first: a tie keeps it
    (Planned("centralized", HERE / "centralized.yaml", (), "Centralized LLM"),
     Planned("hetero/standalone", HERE / "hetero_standalone.yaml", (), "Standalone SLMs")),
    lambda prefix: [TABLES.learns("centralized LLM", [f"{prefix}centralized"]),
                    TABLES.learns("Standalone SLMs (hetero)", [f"{prefix}hetero/standalone"])],
    validation=VALIDATION)


def plan() -> list[Planned]:
    return budget.plan(GRID)


def chosen(r: Results | None = None) -> str | None:
    path = OUT / "results.json"
    if r is None and not path.is_file():
        return None
    return budget.chosen(r or Results(path), GRID)


def render(r: Results) -> str:
    return budget.page(r, GRID, "FedMKT: the learning rate chosen on validation data",
                       "experiments/fedmkt/budget.py", __doc__, "The multi-task references")


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="fedmkt budget", summarize=TABLES.summarize))
