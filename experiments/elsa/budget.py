"""ELSA's learning rates chosen on validation data: entailment's and paraphrase's, for every column of those tasks'
rows alike, and Simple SL's own. A task's rate is chosen by its reference — the uncompressed split pipeline with
FedAvg's grouping and size weights (`elsa_rows.REFERENCE`) under the paper's skew, α̂ = 0.1 and 0.2, the
calibration rows every Table 1 claim of the task rests on — and Simple SL's by its own uncompressed control on every
task and skew the calibration plans it (`elsa_rows.SIMPLE_SL_SETTINGS`), each row at every rate of its grid, scored on
validation rows (`VALIDATION`); the rate under which the rows learn the most (row, seed) cells by the table's control
rule (chance + 25 points, `elsa_claims.reference`, `elsa_claims.simple_sl_control`) is chosen. Each grid lists the
rate its rows ran at before any was chosen first, so a tie keeps it.

Why these rates: entailment and paraphrase are the two-class tasks whose references end near the bar (the
calibration section of RESULTS.md); each task trains on its own (one task per run), so each has a rate of its own
(topic and sentiment keep base.yaml's). Paraphrase keeps its logit-adjusted loss (τ = 1, `elsa_rows.TASK_SETTINGS`)
at every rate. Simple SL's one cloud θ₂ takes every client's steps in turn, so it runs at a rate of its own on every
task (`elsa_rows.SIMPLE_SL_BUDGET`); a claim against it rests on its control too.

Validation rows: fresh rows about the people each task's test set asks about, none asking what a test item asks,
in the test set's answer shares (`fedlab.evidence.budget.held_validation`): 200 a task, as many as a test set, but
paraphrase's 46 — that population holds 23 same-meaning prompts its test set does not ask (its test set asks 100),
so 23 of each answer is the largest validation set in the test set's shares; rows held out of the training data
would be about four fifths "no", where answering one class clears the bar.

    python experiments/elsa/budget.py                    # every grid, seeds 0,1,2 (resumable)
    python experiments/elsa/budget.py --only lr0.003/    # one rate
    python experiments/elsa/budget.py --only lr0.002/cal/entailment/ --seeds 3,4   # more seeds at a chosen rate
    python experiments/elsa/budget.py --only lr0.0005/   # a rate of Simple SL's grid alone
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
# each task's rates, the preferred first: the rate the task's rows ran at before any was chosen
RATES = {"entailment": ("0.002", "0.001", "0.003"), "paraphrase": ("0.005", "0.003", "0.002")}
SIMPLE_SL_RATES = ("0.001", "0.0005", "0.002")
ROWS = {"topic": 200, "sentiment": 200, "entailment": 200, "paraphrase": 46}   # validation rows a task
VALIDATION = {task: budget.held_validation(n, 32, keeps_shares=True) for task, n in ROWS.items()}


def _rows() -> dict[str, Planned]:
    return {p.key: p for p in TABLES.plan()}


def grid(task: str) -> budget.Grid:
    """`task`'s rate: its reference under each skew of SKEWS, as the table plans it, at each of its RATES."""
    rows = _rows()
    return budget.Grid("federation.lr", RATES[task], tuple(rows[f"cal/{task}/{s}/reference"] for s in SKEWS),
                       lambda prefix: [TABLES.reference(task, s, prefix) for s in SKEWS],
                       validation=VALIDATION[task])


def simple_sl_grid() -> budget.Grid:
    """Simple SL's rate: its own control on every (task, setting) of SIMPLE_SL_SETTINGS, as the table plans it, at
    each of SIMPLE_SL_RATES, each row scored on its task's validation rows."""
    cells = [(task, s) for task, settings in TABLES.SIMPLE_SL_SETTINGS.items() for s in settings]
    rows = _rows()
    task_of = lambda row: row.key.split("/")[1]        # cal/<task>/<setting>/simple_sl
    return budget.Grid("federation.lr", SIMPLE_SL_RATES, tuple(rows[f"cal/{t}/{s}/simple_sl"] for t, s in cells),
                       lambda prefix: [TABLES.simple_sl_control(t, s, prefix) for t, s in cells],
                       validation=(), setting=lambda row, v: (*VALIDATION[task_of(row)], f"federation.lr={v}"))


def grids(r: Results | None = None) -> list[budget.Grid]:
    """Every task's grid, in RATES' order, then Simple SL's."""
    return [*(grid(task) for task in RATES), simple_sl_grid()]


GRID = grid("entailment")
NAMES = (*(f"The {task} reference" for task in RATES), "Simple SL's own control")


def chosen(r: Results) -> dict[str, str]:
    """{task, or "simple_sl": the rate its grid chose} for each grid that has chosen."""
    return {name: v for name, g in zip((*RATES, "simple_sl"), grids(r)) if (v := budget.chosen(r, g)) is not None}


def plan() -> list[Planned]:
    return [p for g in grids() for p in budget.plan(g)]


def render(r: Results) -> str:
    first, *rest = zip(NAMES, grids(r))
    text = budget.page(r, first[1], "ELSA: learning rates chosen on validation data", "experiments/elsa/budget.py",
                       __doc__, first[0], every_seed=True, claims=None)
    return budget.with_sections(r, text, [(g, name, {"every_seed": True, "claims": None}) for name, g in rest])


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="elsa budget", summarize=TABLES.summarize))
