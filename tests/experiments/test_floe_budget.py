"""Floe's tables run at the learning rate and local epochs their validation page chose (`budget.py`): a YAML
edited by hand away from a choice, or a choice that changed while the YAMLs stayed, fails here."""
from __future__ import annotations

from fedlab.evidence import budget
from fedlab.evidence.runner import Results
from fedlab.evidence.summary import load_table

TABLES = load_table("floe")
BUDGET = load_table("floe", script="budget")


def test_every_row_runs_at_the_rate_and_the_local_epochs_the_budget_page_holds():
    """The rate GRID chose; the local epochs `epochs_grid` chose once it has, before that the value it lists first
    while it has no records, and one of its values while it runs."""
    results = Results(BUDGET.OUT / "results.json")
    lr = budget.chosen(results, BUDGET.GRID)
    assert lr is not None
    rows = TABLES.plan()
    assert len(rows) > 10
    assert {p.resolve(0).federation.lr for p in rows} == {float(lr)}
    grid = BUDGET.epochs_grid(results)
    epochs = {p.resolve(0).federation.local_epochs for p in rows}
    choice = budget.chosen(results, grid)
    if choice is not None:
        assert epochs == {int(choice)}
    elif not any(results.runs(p.key) for p in budget.plan(grid)):
        assert epochs == {int(grid.values[0])}
    else:
        assert len(epochs) == 1 and epochs <= {int(v) for v in grid.values}


def test_the_epochs_grid_holds_the_chosen_rate_and_lists_the_tables_epochs_first():
    """Each of its rows is a reference row of GRID at the rate GRID chose, so the epochs are chosen for the
    rate the tables run at; a tie keeps the tables' epochs."""
    results = Results(BUDGET.OUT / "results.json")
    lr = budget.chosen(results, BUDGET.GRID)
    grid = BUDGET.epochs_grid(results)
    assert [p.key for p in grid.rows] == [p.key for p in BUDGET.GRID.rows]
    assert all(p.resolve(0).federation.lr == float(lr) for p in grid.rows)
    assert grid.values[0] == str(TABLES.plan()[0].resolve(0).federation.local_epochs)
