"""ELSA's learning rate for entailment and paraphrase chosen on validation data, for every column of those tasks'
tables alike: the task's reference — the uncompressed split pipeline with FedAvg's grouping and size weights
(`elsa_rows.REFERENCE`) under the paper's skew, α̂ = 0.1 and 0.2, the calibration rows every Table 1 claim of the
task rests on — at each rate of the grid, scored on validation rows (`VALIDATION`); the rate under which it learns
the most (skew, seed) cells by the table's control rule (chance + 25 points, `elsa_claims.reference`) is chosen.
Each task's grid lists the rate its rows ran at before any was chosen first, so a tie keeps it.

Why these two tasks: they are the two-class tasks whose references end near the bar (the calibration section of
RESULTS.md), and each task trains on its own (one task per run), so each has a rate of its own (topic and sentiment
keep base.yaml's). Paraphrase keeps its logit-adjusted loss (τ = 1, `elsa_rows.TASK_SETTINGS`) at every rate.

Validation rows: fresh rows about the people each task's test set asks about, none asking what a test item asks,
in the test set's answer shares (`fedlab.evidence.budget.held_validation`). Entailment: 200 a task, as many as its
test set. Paraphrase: 46 — that population holds 23 same-meaning prompts its test set does not ask (its test set
asks 100), so 23 of each answer is the largest validation set in the test set's shares; on rows held out of the
training data it would be about four fifths "no", where answering one class clears the bar.

    python experiments/elsa/budget.py                    # both grids, seeds 0,1,2 (resumable)
    python experiments/elsa/budget.py --only lr0.003/    # one rate
    python experiments/elsa/budget.py --only lr0.002/cal/entailment/ --seeds 3,4   # more seeds at a chosen rate
    python experiments/elsa/budget.py --render-only      # budget/RESULTS.md from budget/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "budget"
TABLES = load_table("elsa")
SKEWS = ("a0.1", "a0.2")           # the calibration settings Table 1's claims rest on
# (rates, the preferred first: the rate the task's rows ran at before any was chosen; validation rows a task)
RATES = {"entailment": (("0.002", "0.001", "0.003"), 200),
         "paraphrase": (("0.005", "0.003", "0.002"), 46)}
VALIDATION = {task: budget.held_validation(n, 32, keeps_shares=True) for task, (_, n) in RATES.items()}


def grid(task: str) -> budget.Grid:
    """`task`'s rate: its reference under each skew of SKEWS, as the table plans it, at each of its RATES."""
    rows = {p.key: p for p in TABLES.plan()}
    return budget.Grid("federation.lr", RATES[task][0],
                       tuple(rows[f"cal/{task}/{s}/reference"] for s in SKEWS),
                       lambda prefix: [TABLES.reference(task, s, prefix) for s in SKEWS],
                       validation=VALIDATION[task])


def grids(r: Results | None = None) -> list[budget.Grid]:
    """Every task's grid, in RATES' order."""
    return [grid(task) for task in RATES]


GRID = grid("entailment")


def chosen(r: Results) -> dict[str, str]:
    """{task: the rate its grid chose} for each task whose grid has chosen."""
    return {task: v for task, g in zip(RATES, grids(r)) if (v := budget.chosen(r, g)) is not None}


def plan() -> list[Planned]:
    return [p for g in grids() for p in budget.plan(g)]


def render(r: Results) -> str:
    first, *rest = zip(RATES, grids(r))
    text = budget.page(r, first[1], "ELSA: the learning rates of entailment and paraphrase chosen on validation data",
                       "experiments/elsa/budget.py", __doc__, f"The {first[0]} reference", every_seed=True,
                       claims=None)
    return budget.with_sections(r, text, [(g, f"The {task} reference", {"every_seed": True, "claims": None})
                                          for task, g in rest])


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="elsa budget", summarize=TABLES.summarize))
