"""Floe's learning rate chosen on validation data, for every row of its tables alike: the tables' references —
the SLM LoRA-tuned on every device's data pooled (the positive control) and SLM-Local (each device's own
expert) — at each rate of the grid, scored on rows held out of the training data; the rate under which they
learn the most (row, task, seed) cells by Floe's control rule (`make_tables.learns`: chance + 10 points on the
multiple-choice tasks, zero-shot + 2 points of Rouge-L on the generative ones) is chosen. At that rate a second
grid chooses the local epochs the same way (`epochs_grid`), the tables' 2 listed first.

    python experiments/floe/budget.py                # the grid, seeds 0,1,2 (resumable)
    python experiments/floe/budget.py --render-only  # budget/RESULTS.md from budget/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "budget"
TABLES = load_table("floe")
VALIDATION = ("data.evaluate_on=validation", "data.validation_per_task=64")
GRID = budget.Grid(
    # the tables' rate first (a tie keeps it); its references learnt more cells the smaller the rate down to 2e-3,
    # the grid's smallest value then, so the grid goes on below it, to 2.5e-4
    "federation.lr", ("0.002", "0.005", "0.01", "0.001", "0.0005", "0.00025"),
    (Planned("floe/slm_pooled", TABLES.CFG, ("method.name=centralized",), "SLM pooled"),
     Planned("floe/slm_local", TABLES.CFG, ("method.name=standalone",), "SLM-Local")),
    lambda prefix: [*TABLES.learns("pooled-data SLM", f"{prefix}floe/slm_pooled"),
                    *TABLES.learns("SLM-Local (each device's expert)", f"{prefix}floe/slm_local")],
    validation=VALIDATION)


# the tables' local epochs first (a tie keeps them), then more, for a task the references learn in some seeds only
EPOCHS = ("2", "4")


def epochs_grid(r: Results | None = None) -> budget.Grid | None:
    """The local epochs at the rate GRID chose: its reference rows at that rate at each of EPOCHS, by the same
    control rule. None before GRID has chosen."""
    if r is None:
        path = OUT / "results.json"
        if not path.is_file():
            return None
        r = Results(path)
    lr = budget.chosen(r, GRID)
    if lr is None:
        return None
    rows = tuple(Planned(p.key, p.config, (*p.overrides, f"federation.lr={lr}"), p.label) for p in GRID.rows)
    return budget.Grid("federation.local_epochs", EPOCHS, rows, GRID.controls, validation=VALIDATION)


def tables_chain(r: Results) -> list[budget.Grid]:
    """The grids the tables' settings come from, in the order they were chosen: GRID's rate, then the local
    epochs at it (`epochs_grid`, once GRID has chosen)."""
    second = epochs_grid(r)
    return [GRID] + ([second] if second else [])


def plan() -> list[Planned]:
    second = epochs_grid()
    return budget.plan(GRID) + (budget.plan(second) if second else [])


def render(r: Results) -> str:
    text = budget.page(r, GRID, "Floe: the learning rate chosen on validation data",
                       "experiments/floe/budget.py", __doc__, "The references", every_seed=True)
    second = epochs_grid(r)
    return budget.with_sections(r, text, [(second, "At the chosen rate, the local epochs",
                                           {"every_seed": True})] if second else [])


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="floe budget", summarize=TABLES.summarize))
