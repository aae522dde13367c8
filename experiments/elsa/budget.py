"""ELSA's learning rates chosen on validation data: each task's, for every column of that task's rows alike, and
Simple SL's own. A task's rate is chosen by its reference — the uncompressed split pipeline with
FedAvg's grouping and size weights (`elsa_rows.REFERENCE`) under the paper's skew, α̂ = 0.1 and 0.2, the
calibration rows every Table 1 claim of the task rests on — and Simple SL's by its own uncompressed control on every
(task, setting) the calibration plans it for (`elsa_rows.SIMPLE_SL_SETTINGS`), each row at every rate of its grid,
scored on validation rows (`VALIDATION`); the rate under which the rows learn the most (row, seed) cells by the
table's control rule (chance + 25 points, `elsa_claims.reference`, `elsa_claims.simple_sl_control`) is chosen. Each
grid lists first the rate its rows ran at before any was chosen, so a tie keeps it. A grid's section appears once
its rows hold records.

Why these rates: every ELSA task trains on its own (one task per run), so each task has a rate of its own chosen
here. Entailment and paraphrase, the two-class tasks whose references end near the bar (the calibration section
of RESULTS.md), have the wider grids; topic's and sentiment's try base.yaml's 5e-3, their rows' rate, and 3e-3. Paraphrase keeps its logit-adjusted loss (τ = 1,
`elsa_rows.TASK_SETTINGS`) at every rate. Simple SL's one cloud θ₂ takes every client's steps in turn, so it runs
at a rate of its own on every task (`elsa_rows.SIMPLE_SL_BUDGET`); a claim against it rests on its control too. The
centralized rows keep rates of their own (`elsa_rows.CENTRAL_BUDGET`). These rates decide the claims through the
test sets' controls (RESULTS.md): a claim whose reference fails there in some seed has no verdict.

Validation rows: fresh rows about the people each task's test set asks about, none asking what a test item asks,
in the test set's answer shares (`fedlab.evidence.budget.held_validation`), as many as a test set
(`VALIDATION_ROWS`) but for paraphrase: its held-out people give few same-meaning prompts beyond those its test set
asks, so its validation set is the largest in the test set's shares that every seed's draw fills (a test checks
it); rows held out of the training data instead would be mostly "no", where answering one class clears the bar.

    python experiments/elsa/budget.py                    # every grid, seeds 0,1,2 (resumable)
    python experiments/elsa/budget.py --only lr0.003/    # one rate
    python experiments/elsa/budget.py --only 'lr0.002/cal/entailment/a0.1/reference$,lr0.002/cal/entailment/a0.2/reference$' --seeds 3,4
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
SKEWS = tuple(f"a{alpha}" for alpha in TABLES.ALPHAS)     # the calibration settings Table 1's claims rest on
# each task's rates, the preferred first: the rate the task's rows ran at before any was chosen; paraphrase's
# references learn in more seeds the larger the rate over 0.002–0.005, so its grid goes on to 0.01 above them
RATES = {"entailment": ("0.002", "0.001", "0.003"), "paraphrase": ("0.005", "0.003", "0.002", "0.01"),
         "topic": ("0.005", "0.003"), "sentiment": ("0.005", "0.003")}
SIMPLE_SL_RATES = ("0.001", "0.0005", "0.002")
VALIDATION_ROWS = {"topic": 200, "sentiment": 200, "entailment": 200, "paraphrase": 44}
VALIDATION = {task: budget.held_validation(n, 32, keeps_shares=True) for task, n in VALIDATION_ROWS.items()}


def _table_rows() -> dict[str, Planned]:
    """The table's planned rows by key."""
    return {p.key: p for p in TABLES.plan()}


def _task_of(row: Planned) -> str:
    """The task of a calibration row (`cal/<task>/<setting>/<row>`)."""
    return row.key.split("/")[1]


def grid(task: str) -> budget.Grid:
    """`task`'s rate: its reference under each skew of SKEWS, as the table plans it, at each of its RATES."""
    rows = _table_rows()
    return budget.Grid("federation.lr", RATES[task], tuple(rows[f"cal/{task}/{s}/reference"] for s in SKEWS),
                       lambda prefix: [TABLES.reference(task, s, prefix) for s in SKEWS],
                       validation=VALIDATION[task])


def simple_sl_grid() -> budget.Grid:
    """Simple SL's rate: its own control on every (task, setting) of SIMPLE_SL_SETTINGS, as the table plans it, at
    each of SIMPLE_SL_RATES, each row scored on its task's validation rows."""
    settings = [(task, s) for task, names in TABLES.SIMPLE_SL_SETTINGS.items() for s in names]
    rows = _table_rows()
    return budget.Grid("federation.lr", SIMPLE_SL_RATES, tuple(rows[f"cal/{t}/{s}/simple_sl"] for t, s in settings),
                       lambda prefix: [TABLES.simple_sl_control(t, s, prefix) for t, s in settings],
                       validation=(), setting=lambda row, v: (*VALIDATION[_task_of(row)], f"federation.lr={v}"))


def grids() -> dict[str, tuple[str, budget.Grid]]:
    """{what the rate is for — a task, or "simple_sl": (its section's title, its grid)}, the tasks in RATES' order."""
    return {**{task: (f"The {task} reference", grid(task)) for task in RATES},
            "simple_sl": ("Simple SL's own control", simple_sl_grid())}


def chosen(r: Results) -> dict[str, str]:
    """{task, or "simple_sl": the rate its grid chose} for each grid that has chosen."""
    return {name: v for name, (_, g) in grids().items() if (v := budget.chosen(r, g)) is not None}


def plan() -> list[Planned]:
    """Every grid's rows at every rate, scored on validation."""
    return [p for _, g in grids().values() for p in budget.plan(g)]


def render(r: Results) -> str:
    """budget/RESULTS.md: the first grid's page, then a section for each other grid whose rows hold records."""
    (title, first), *rest = grids().values()
    text = budget.page(r, first, "ELSA: learning rates chosen on validation data", "experiments/elsa/budget.py",
                       __doc__, title, every_seed=True, claims=None)
    return budget.with_sections(r, text, [(g, name, {"every_seed": True, "claims": None}) for name, g in rest])


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="elsa budget", summarize=TABLES.summarize))
