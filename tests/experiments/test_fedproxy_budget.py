"""FedProxy's heterogeneous table runs at the learning rate its validation page chose (`budget.py`): a YAML edited
by hand away from the choice, or a choice that changed while the YAMLs stayed, fails here."""
from __future__ import annotations

from fedlab.evidence import budget
from fedlab.evidence.runner import Results
from fedlab.evidence.summary import load_table

TABLES = load_table("fedproxy")
BUDGET = load_table("fedproxy", script="budget")


def test_every_heterogeneous_row_that_trains_runs_at_the_rate_its_budget_page_chose():
    chosen = budget.chosen(Results(BUDGET.OUT / "results.json"), BUDGET.GRID)
    assert chosen is not None
    rows = [p for p in TABLES.plan() if p.key.startswith("hetero/") and p.key != "hetero/zeroshot"]  # trains nothing
    assert len(rows) > 10
    for p in rows:
        assert p.resolve(0).federation.lr == float(chosen), p.key
