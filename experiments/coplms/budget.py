"""Co-PLMs' learning rates chosen on validation data, for every method of a table alike: the references of Table 1
— the server LLM and each device SLM family LoRA-tuned centrally on the heterogeneous setting's pooled data (the
positive control, `coplms_claims.learns`: exact match 10 points above chance on every task) — at each rate of the
grid, scored on rows held out of the training data; the rate under which they learn the most (row, task, seed)
cells is chosen. And the rates of the real-model table (hetero_smollm2.yaml: SmolLM2 in the cloud, the same three
device families, two rounds on 60 training rows a task), each on that table's own references at its budget: the
devices' (`real_devices`: each device family LoRA-tuned centrally on the pooled data) and SmolLM2's (`real_server`:
SmolLM2 likewise), since one rate does not suit a 135M-parameter LLM and the tiny SLMs alike. SmolLM2's rate is
that of the server step of FedCoLLM and Co-PLMs (`method.server_lr`), whose both sides it trains: SmolLM2 and, on
the server, FedCoLLM's SLMs or Co-PLMs' distilled proxy. They are scored on 100 fresh validation rows a task in
its test set's answer shares (`fedlab.evidence.budget.held_validation`), paraphrase, whose fresh rows cannot
fill those shares, on 40 held out of its training rows in those shares and refilled, so that every row trains
on its 60 rows a task.

    python experiments/coplms/budget.py                # the grids, seeds 0,1,2 (resumable; SmolLM2's needs the
                                                       # real-model packages: README.md)
    python experiments/coplms/budget.py --only 'lr0.0005/real/control/tiny,lr0.002/real/control/tiny,\
lr0.005/real/control/tiny,lr0.01/real/control/tiny'       # the real table's devices' grid alone
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
    tuple(TABLES.control_row(m, "centralized") for m in TABLES.CONTROL_MODELS),
    lambda prefix: [TABLES.learns(m, f"{prefix}control/{m}/centralized") for m in TABLES.CONTROL_MODELS],
    # 24 of the 120 training rows a task held out (a fifth, as family.py and FedMKT's budget hold out)
    validation=("data.evaluate_on=validation", "data.validation_per_task=24"))

# the real table's grids: the rate its rows ran at before any was chosen first (a tie keeps it), then higher; the
# devices' past Table 1's rate, 5e-3, which led the three below it
REAL_DEVICE_RATES = ("0.0005", "0.002", "0.005", "0.01")
# SmolLM2's: 5e-4 tied 1e-3 for the most cells as the grid's smallest value, so the grid goes on below it, to 2.5e-4
REAL_SERVER_RATES = ("0.0005", "0.001", "0.002", "0.00025")
REAL_VALIDATION = budget.held_validation(100, 40, keeps_shares=True, holdout_keeps_shares=True)


# the grids' rows are built here (`control_row`, `real_control_row`), never from `TABLES.plan()`: that plans the
# real rows at the rates these grids choose, which loads this script again


def real_devices(r: Results | None = None) -> list[budget.Grid]:
    """The real table's devices' rate (`federation.lr` of its rows), on each device family's centralized control
    at that table's budget."""
    families = TABLES.hetero_devices()
    return [budget.Grid("federation.lr", REAL_DEVICE_RATES, tuple(TABLES.real_control_row(f) for f in families),
                        lambda prefix: [TABLES.learns(f, f"{prefix}real/control/{f}/centralized", at=TABLES.REAL_TABLE)
                                        for f in families],
                        validation=REAL_VALIDATION)]


def real_server(r: Results | None = None) -> list[budget.Grid]:
    """SmolLM2's rate (the real table's `method.server_lr`, and its control's `federation.lr`), on that control."""
    llm = TABLES.REAL_LLM
    return [budget.Grid("federation.lr", REAL_SERVER_RATES, (TABLES.real_control_row(llm),),
                        lambda prefix: [TABLES.learns(llm, f"{prefix}real/control/{llm}/centralized")],
                        validation=REAL_VALIDATION)]


def plan() -> list[Planned]:
    return budget.plan(GRID) + [p for g in (*real_devices(), *real_server()) for p in budget.plan(g)]


def render(r: Results) -> str:
    text = budget.page(r, GRID, "Co-PLMs: the learning rates chosen on validation data",
                       "experiments/coplms/budget.py", __doc__, "The Table 1 references")
    parts = [(g, "The SmolLM2 table's devices", {"claims": None}) for g in real_devices(r)]
    parts += [(g, "The SmolLM2 table's LLM", {"claims": None}) for g in real_server(r)]
    return budget.with_sections(r, text, parts)


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="coplms budget"))
