"""Co-PLMs' device SLM families checked on validation data: each candidate family LoRA-tuned centrally on the
heterogeneous setting's pooled data (the positive control of Table 1, `coplms_claims.learns`: exact match 10
points above chance on every task, in every seed), scored on rows held out of the training data (the test sets are
not read). The heterogeneous setting needs device families whose tokenizers differ from the LLM's; tiny-llama-s,
the one candidate whose control passes every task, shares the LLM's, so no family can take the place of one that
fails. The tables keep tiny-gpt2, tiny-opt and tiny-bloom, and the device claims leave out each (family, task)
cell whose control fails (`coplms_claims.kept`; listed on the results page under "Device cells the claims read").

    python experiments/coplms/family.py                # every candidate, seeds 0,1,2 (resumable)
    python experiments/coplms/family.py --render-only  # family/RESULTS.md from family/results.json
"""
from __future__ import annotations

import sys
from pathlib import Path

from fedlab.evidence import budget
from fedlab.evidence.runner import Planned, Results, run_table
from fedlab.evidence.summary import load_table

HERE = Path(__file__).resolve().parent
OUT = HERE / "family"
TABLES = load_table("coplms")
CANDIDATES = ("tiny-gpt2", "tiny-opt", "tiny-bloom", "tiny-qwen2", "tiny-llama-s")
GRID = budget.Grid(
    "model.name", CANDIDATES,
    (Planned("control/slm/centralized", HERE / "hetero.yaml",
             ("method.name=centralized", "model.clients=null", "method.include_public=true"), "centralized SLM"),),
    lambda prefix: [TABLES.learns(prefix.removeprefix("name").rstrip("/"), f"{prefix}control/slm/centralized")],
    # 24 of the 120 training rows a task held out (a fifth, as FedMKT's budget holds out): 64 left the families 56
    # rows a task to train on, and every one of them answered sentiment with one class
    validation=("data.evaluate_on=validation", "data.validation_per_task=24"))


def plan() -> list[Planned]:
    return budget.plan(GRID)


def render(r: Results) -> str:
    return budget.page(r, GRID, "Co-PLMs: the device SLM families on validation data", "experiments/coplms/family.py", __doc__, "Each family's control", choose=False,
                       records="family/results.json")


if __name__ == "__main__":
    sys.exit(run_table(OUT, plan, render, title="coplms families"))
