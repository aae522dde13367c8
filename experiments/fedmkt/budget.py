"""FedMKT's learning rate chosen on validation data, for every row of its tables alike: the references of the
multi-task tables — the centralized LLM (LoRA on the pooled data) and the Standalone SLMs — at each rate of the
grid, scored on validation rows (`fedmkt_rows.VALIDATION`: 300 a task about the population its test set asks about,
apart from the test items, in the test set's answer shares; for recall, arithmetic, category and paraphrase, whose
populations cannot fill that, 32 held out of the training rows in the test set's answer shares and refilled from
them, so every row trains on the table's rows a task); the rate
under which they learn the most (row, task, seed) cells by FedMKT's control rule (zero-shot + 2 points,
`make_tables.learns`) is chosen. At that rate, the batch size (the paper's is 4, Appendix D.1; a smaller batch
takes more steps an epoch, while the paper fixes the epochs, R = E = 1, and keeps within 10 rounds): for the
multi-task tables (2 and 3) on the same references, and for the one-to-one table (4) on its own — the centralized
LLM on the one client's and the public data, and the Standalone SLM of S2 (the family `family.py` chose) and of S1
— whose single client holds a fifth of the data, so fewer steps an epoch (its grid goes on to 2). And SmolLM2's
rate, for the real-model rows' LLM (`real`): on centralized SmolLM2, its reference, at the real-model rows' own
data and batch size.

    python experiments/fedmkt/budget.py                # the grids, seeds 0,1,2 (resumable; SmolLM2's needs the
                                                       # real-model packages: README.md)
    python experiments/fedmkt/budget.py --only 'lr0.0005/centralized,lr0.0005/hetero/' --seeds 3,4   # two more seeds
    python experiments/fedmkt/budget.py --only 'lr0.0005/real/,lr0.001/real/,lr0.002/real/,lr0.00025/real/'
                                                       # SmolLM2's grid alone
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
S1 = TABLES.S1
VALIDATION = TABLES.VALIDATION
BATCHES = ("16", "8", "4")          # the batch size the rate grid runs at first: a tie keeps it
# every rate at BATCHES[0], held here rather than read from base.yaml, whose batch size is the one chosen after
# the rate: the grid's rows stay the runs they were once the tables take the chosen batch size
AT_FIRST_BATCH = (f"federation.batch_size={BATCHES[0]}",)
# the one-to-one table's references learnt the most cells at 4, the smallest of BATCHES, so its grid goes on to 2
O2O_BATCHES = (*BATCHES, "2")
GRID = budget.Grid(
    # FedMKT's rate before any was chosen first (a tie keeps it); the references learnt more cells the smaller the
    # rate down to 1e-3, so the grid goes on below it, to 2.5e-4
    "federation.lr", ("0.005", "0.002", "0.001", "0.0005", "0.00025"),
    (Planned("centralized", HERE / "centralized.yaml", AT_FIRST_BATCH, "Centralized LLM"),
     Planned("hetero/standalone", HERE / "hetero_standalone.yaml", AT_FIRST_BATCH, "Standalone SLMs")),
    lambda prefix: [TABLES.learns("centralized LLM", [f"{prefix}centralized"]),
                    TABLES.learns("Standalone SLMs (hetero)", [f"{prefix}hetero/standalone"])],
    validation=VALIDATION)


def _records(r: Results | None) -> Results | None:
    path = OUT / "results.json"
    return r if r is not None else Results(path) if path.is_file() else None


def _at_rate(r: Results | None) -> str | None:
    """`federation.lr=<the rate GRID chose>`; None before it has chosen."""
    lr = chosen(r)
    return None if lr is None else f"federation.lr={lr}"


def refined(r: Results | None = None) -> list[budget.Grid]:
    """The batch size of the multi-task tables (2 and 3) at the rate GRID chose, on GRID's references; [] before
    GRID has chosen."""
    at = _at_rate(r)
    if at is None:
        return []
    rows = tuple(Planned(p.key, p.config, (*(o for o in p.overrides if o not in AT_FIRST_BATCH), at), p.label)
                 for p in GRID.rows)      # each row's own overrides, less the batch pin the grid replaces
    return [budget.Grid("federation.batch_size", BATCHES, rows, GRID.controls, validation=VALIDATION)]


def one_to_one(r: Results | None = None) -> list[budget.Grid]:
    """The batch size of the one-to-one table (4) at the rate GRID chose, on its own references: the centralized
    LLM, and the Standalone SLM of S2 (the family `family.py` chose) and of S1. [] before both have chosen."""
    at, family = _at_rate(r), TABLES.chosen_budget("family").get("model.clients")
    if at is None or family is None:
        return []
    rows = (Planned("o2o/centralized", HERE / "one_to_one_centralized.yaml", (at,), "Centralized LLM (one-to-one)"),
            Planned("o2o/standalone", HERE / "one_to_one_standalone.yaml", (at, f"model.clients=[{family}]"),
                    f"Standalone SLM (one-to-one, S2: {family})"),
            Planned("o2o_s1/standalone", HERE / "one_to_one_standalone.yaml", (at, f"model.clients=[{S1}]"),
                    f"Standalone SLM (one-to-one, S1: {S1})"))
    return [budget.Grid("federation.batch_size", O2O_BATCHES, rows,
                        lambda prefix: [TABLES.learns("centralized LLM (one-to-one)", [f"{prefix}o2o/centralized"]),
                                        TABLES.learns("Standalone SLMs (o2o, S2)", [f"{prefix}o2o/standalone"]),
                                        TABLES.learns("Standalone SLMs (o2o, S1)", [f"{prefix}o2o_s1/standalone"])],
                        validation=VALIDATION)]


# SmolLM2's rate, for the real-model rows' LLM alike (FedMKT's server LoRA, `method.server_lr`, and the centralized
# reference's `federation.lr`): its reference, centralized SmolLM2 (`centralized_smollm2.yaml`), at each rate,
# scored on the tables' validation rows; the rate those rows ran at before any was chosen first (the baselines'
# SmolLM2 rows' rate), so a tie keeps it; it led the grid as its smallest value, so the grid goes on to 2.5e-4
REAL_RATES = ("0.0005", "0.001", "0.002", "0.00025")
REAL_REFERENCE = "centralized SmolLM2"


def real(r: Results | None = None) -> list[budget.Grid]:
    """SmolLM2's rate, chosen on its reference alone: the real-model rows keep their own data and batch size."""
    return [budget.Grid("federation.lr", REAL_RATES,
                        (Planned("real/centralized", HERE / "centralized_smollm2.yaml", (), "Centralized SmolLM2"),),
                        lambda prefix: [TABLES.learns(REAL_REFERENCE, [f"{prefix}real/centralized"])],
                        validation=VALIDATION)]


def plan() -> list[Planned]:
    return budget.plan(GRID) + [p for g in (*refined(), *one_to_one(), *real()) for p in budget.plan(g)]


def chosen(r: Results | None = None) -> str | None:
    """The rate GRID chose; None before it has (or before there are records)."""
    r = _records(r)
    return None if r is None else budget.chosen(r, GRID)


def render(r: Results) -> str:
    refined_chose = any(budget.chosen(r, g) for g in refined(r))     # then it, not the rate, says what is left out
    text = budget.page(r, GRID, "FedMKT: the learning rate and batch size chosen on validation data",
                       "experiments/fedmkt/budget.py", __doc__, "The multi-task references",
                       claims=None if refined_chose else "the table's claims")
    # the multi-task refinement's choice decides what those tables leave out; each one-to-one claim reads the tasks
    # its own reference learns, named on the results page
    parts = [(g, "At the chosen rate, the multi-task references", {"claims": "the table's claims"}) for g in refined(r)]
    parts += [(g, "At the chosen rate, the one-to-one references", {"claims": None}) for g in one_to_one(r)]
    parts += [(g, "SmolLM2, the real-model rows' LLM", {"claims": None}) for g in real(r)]
    return budget.with_sections(r, text, parts)


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="fedmkt budget", summarize=TABLES.summarize))
