"""FedProxy's learning rate chosen on validation data, for every row of its heterogeneous table alike: its
reference — CentSFT, the LLM LoRA-tuned on the pooled data of the eight tasks — at each rate of the grid, scored on
validation rows (`VALIDATION`); the rate under which it learns the most (task, seed) cells by FedProxy's
control rule (its own zero-shot + 2 points, `make_tables.centsft`) is chosen. A task CentSFT does not learn in
every seed there leaves the heterogeneous claims (`make_tables.left_out`). The SmolLM2 rows (`make_tables.real_plan`)
have a grid of their own (`smollm2`): their CentSFT on SmolLM2 at rates around theirs, scored on validation rows at
their test sets' size; a task it does not learn in every seed at the rate chosen there leaves the SmolLM2 claims
(`make_tables.left_out("smollm2")`). The homogeneous table (entailment, 4 IID clients) and the deep LLM's
(tiny-llama-deep) homogeneous and heterogeneous tables have grids of their own (`homo`, `deep_homo`,
`deep_hetero`) over the same rates: their CentSFT rows as the tables plan them, scored on validation rows the same
way.

    python experiments/fedproxy/budget.py                # the grids, seeds 0,1,2 (resumable)
    python experiments/fedproxy/budget.py --only lr0.002/hetero/   # the tiny-llama grid alone
    python experiments/fedproxy/budget.py --only lr0.002/homo/,lr0.005/homo/,lr0.001/homo/   # the homogeneous grid
    python experiments/fedproxy/budget.py --only lr0.002/hetero/ --seeds 3,4   # two more seeds at the chosen rate
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
# 300 validation rows a task, as many as a test set, about the population its test set asks about and in its
# answer shares; CentSFT trains on the table's 160 rows a task (`fedlab.evidence.budget.held_validation`)
VALIDATION = budget.held_validation(300, 32, keeps_shares=True)
GRID = budget.Grid(
    "federation.lr", ("0.002", "0.005", "0.001"),       # the tables' rate first: a tie keeps it
    (Planned("hetero/centsft", HERE / "hetero_centsft.yaml", TABLES.EVAL, "CentSFT (hetero)"),),
    lambda prefix: [TABLES.centsft("hetero", prefix)],
    validation=VALIDATION)


# the SmolLM2 rows train on 32 rows a task and are scored on 50: 50 validation rows a task in their test set's answer
# shares, and 16 prompts held out of the training rows (and refilled) where a test set leaves no room for them
REAL_VALIDATION = budget.held_validation(50, 16, keeps_shares=True)
# the SmolLM2 rows' rate before any was chosen first; 5e-4 learnt the most cells, the grid's smallest value then, so
# the grid goes on below it, to 2.5e-4
REAL_RATES = ("0.0005", "0.001", "0.002", "0.00025")


def smollm2(r: Results | None = None) -> list[budget.Grid]:
    """The SmolLM2 rows' rate: their reference, CentSFT on SmolLM2 (`centsft_smollm2.yaml`), at each of
    `REAL_RATES`, by the same control rule as the tiny-llama table's."""
    return [budget.Grid("federation.lr", REAL_RATES,
                        (Planned("real/hetero/centsft", HERE / "centsft_smollm2.yaml", (), "CentSFT (SmolLM2)"),),
                        lambda prefix: [TABLES.centsft("real/hetero", prefix)], validation=REAL_VALIDATION)]


def _own_grid(key: str, values: tuple[str, ...] = GRID.values) -> list[budget.Grid]:
    """A table's rate on a grid of its own: its CentSFT row `key`/centsft, as the table plans it, at each rate of
    `values` (GRID's unless given)."""
    (row,) = [p for p in TABLES.plan() if p.key == f"{key}/centsft"]
    return [budget.Grid("federation.lr", values, (row,), lambda prefix: [TABLES.centsft(key, prefix)],
                        validation=VALIDATION)]


def homo(r: Results | None = None) -> list[budget.Grid]:
    """The homogeneous table's rate: CentSFT (homo) at each rate of GRID, by the same control rule."""
    return _own_grid("homo")


def deep_homo(r: Results | None = None) -> list[budget.Grid]:
    """The deep LLM's homogeneous table's rate: CentSFT (deep/homo) on tiny-llama-deep at each rate of GRID."""
    return _own_grid("deep/homo")


def deep_hetero(r: Results | None = None) -> list[budget.Grid]:
    """The deep LLM's heterogeneous table's rate: CentSFT (deep/hetero) on tiny-llama-deep at each rate of GRID,
    and at 5e-4: 1e-3, GRID's smallest value, learnt the most cells, so the grid goes on below it."""
    return _own_grid("deep/hetero", (*GRID.values, "0.0005"))


CHAINS = {"smollm2": ("The SmolLM2 reference", "the SmolLM2 claims"),
          "homo": ("The homogeneous reference", "the homogeneous claims"),
          "deep_homo": ("The deep LLM's homogeneous reference", "the deep LLM's homogeneous claims"),
          "deep_hetero": ("The deep LLM's heterogeneous reference", "the deep LLM's heterogeneous claims")}


def plan() -> list[Planned]:
    return budget.plan(GRID) + [p for chain in CHAINS for g in globals()[chain]() for p in budget.plan(g)]


def render(r: Results) -> str:
    text = budget.page(r, GRID, "FedProxy: the learning rate chosen on validation data",
                       "experiments/fedproxy/budget.py", __doc__, "The heterogeneous reference",
                       every_seed=True)
    return budget.with_sections(r, text, [(g, what, {"every_seed": True, "claims": claims})
                                          for chain, (what, claims) in CHAINS.items() for g in globals()[chain](r)])


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="fedproxy budget"))
