"""FedMKT's S2 SLM family chosen on validation data: the SLM references of Tables 3 and 4's S2 settings — the
Standalone SLMs of the homogeneous setting (four copies of one family) and of the one-to-one setting (one) — for
each candidate family, scored on validation rows (`fedmkt_rows.VALIDATION`); the family under which they learn the
most (row, task, seed) cells by FedMKT's control rule (zero-shot + 2 points, `make_tables.learns`) is chosen, the
paper's OPT on a tie. S2 is the setting whose SLMs tokenize unlike the LLM, so every candidate has a vocabulary of
its own (tiny-llama-s, which shares the LLM's tokenizer, is S1). Each row runs at the learning rate and batch size
`budget.py` chose for the multi-task tables, once it has. The tasks each S2 claim reads — those its reference
learns in every seed at the budget chosen for it — are named on the results page (`fedmkt_rows.claim_tasks`).

    python experiments/fedmkt/family.py                # every candidate, seeds 0,1,2 (resumable)
    python experiments/fedmkt/family.py --render-only  # family/RESULTS.md from family/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "family"
TABLES = load_table("fedmkt")
CANDIDATES = ("tiny-opt", "tiny-bloom", "tiny-gpt2", "tiny-qwen2")     # the paper's first: a tie keeps it
# each row's config and clients (a copy of the family each)
ROWS = {"homo/standalone": ("homo_standalone.yaml", 4), "o2o/standalone": ("one_to_one_standalone.yaml", 1)}


def _budget() -> tuple[str, ...]:
    """The learning rate and batch size `budget.py` chose for the multi-task tables, as overrides (those it has
    chosen so far)."""
    return tuple(f"{key}={value}" for key, value in sorted(TABLES.chosen_budget().items()))


def _row(key: str) -> Planned:
    yaml, _ = ROWS[key]
    return Planned(key, HERE / yaml, _budget(),
                   f"Standalone SLMs ({key.split('/')[0]})")


def _family(row: Planned, family: str) -> tuple[str, ...]:
    """Every client of `row` a copy of `family`."""
    return (f"model.clients=[{','.join([family] * ROWS[row.key][1])}]",)


GRID = budget.Grid(
    "model.clients", CANDIDATES, tuple(_row(k) for k in ROWS),
    lambda prefix: [TABLES.learns(f"Standalone SLMs ({k.split('/')[0]}, S2)", [f"{prefix}{k}"]) for k in ROWS],
    validation=TABLES.VALIDATION, setting=_family)


def plan() -> list[Planned]:
    return budget.plan(GRID)


def render(r: Results) -> str:
    return budget.page(r, GRID, "FedMKT: the S2 SLM family chosen on validation data", "experiments/fedmkt/family.py",
                       __doc__, "The S2 SLM references", records="family/results.json", claims=None)


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="fedmkt family", summarize=TABLES.summarize))
