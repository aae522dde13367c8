"""Each results page without a README of its own names, in its opening paragraph, the rate its rows run at and
the grid it was chosen from on validation data (`fedlab.evidence.budget.choices_said`), so a reader sees the
budget beside the numbers it produced."""
from __future__ import annotations

from fedlab.evidence import budget
from fedlab.evidence.runner import Results
from fedlab.evidence.summary import load_table


def _tried(values) -> str:
    return budget._listed(list(values))


def test_floe_names_the_rate_and_the_local_epochs_its_rows_run_at_and_the_grids_tried():
    tables, grids = load_table("floe"), load_table("floe", script="budget")
    results = Results(grids.OUT / "results.json")
    row = tables.plan()[0].resolve(0).federation
    epochs = grids.epochs_grid(results)
    text = tables.intro()
    assert f"`federation.lr` = {budget.chosen(results, grids.GRID)} (tried {_tried(grids.GRID.values)})" in text
    assert float(budget.chosen(results, grids.GRID)) == row.lr
    assert f"`federation.local_epochs` = {row.local_epochs} (tried {_tried(epochs.values)})" in text


def test_coplms_names_each_tables_rate_and_the_grid_it_was_chosen_from():
    tables, grids = load_table("coplms"), load_table("coplms", script="budget")
    results = Results(grids.OUT / "results.json")
    embedded = budget.chosen(results, grids.GRID)
    hetero = next(p for p in tables.plan() if p.key.startswith("hetero/"))
    assert float(embedded) == hetero.resolve(0).federation.lr
    text = tables.intro()
    assert f"the embedded tables train at `federation.lr` = {embedded} (tried {_tried(grids.GRID.values)})" in text
    rates = tables.real_rates()
    assert f"the SmolLM2 table's devices at `federation.lr` = {rates['devices']} " \
           f"(tried {_tried(grids.REAL_DEVICE_RATES)})" in text
    assert f"SmolLM2 (and the server step of FedCoLLM and Co-PLMs) at `federation.lr` = {rates['server']} " \
           f"(tried {_tried(grids.REAL_SERVER_RATES)})" in text


def test_elsa_names_each_tasks_rate_and_the_grid_it_was_chosen_from():
    tables, grids = load_table("elsa"), load_table("elsa", script="budget")
    text = tables.rates()
    for task, rate in tables.TASK_RATES.items():
        assert f"{task} at lr {rate}, chosen on validation data (tried {', '.join(grids.RATES[task])})" in text
