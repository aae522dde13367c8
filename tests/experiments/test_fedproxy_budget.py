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


def test_the_smollm2_claims_leave_out_what_their_own_reference_misses_and_only_they(monkeypatch):
    """A task the SmolLM2 grid leaves out (`left_out("smollm2")`) leaves the SmolLM2 claims and their control, and
    no tiny-llama claim; the tiny-llama grid's (`left_out()`) leave the heterogeneous claims, and no SmolLM2 one."""
    monkeypatch.setattr(TABLES, "left_out", lambda chain=None: {"two_hop" if chain == "smollm2" else "topic":
                                                                "not learnt on validation"})
    TABLES.claims.cache_clear()
    try:
        claims = TABLES.claims()
    finally:
        TABLES.claims.cache_clear()
    real = [c for c in claims if c.a.startswith("real/")]
    hetero = [c for c in claims if c.a.startswith("hetero/")]
    assert real and hetero
    for c in real:
        assert "two_hop" not in c.control.tasks and "topic" in c.control.tasks, c.claim
    for c in hetero:
        assert "topic" not in c.control.tasks and "two_hop" in c.control.tasks, c.claim
    # and the score a SmolLM2 claim reads averages without it, also where it is not narrowed (against zero-shot)
    tasks = TABLES.QA + TABLES.CLS
    record = {"final": {"llm/acc/mean": 0.5, **{f"llm/acc/task_{t}": 1.0 if t == "two_hop" else 0.5 for t in tasks}}}
    (zero,) = [c for c in real if c.b == "real/hetero/zeroshot"]
    assert zero.fn(record) == 0.5


def test_the_readme_states_the_rates_the_budget_page_chose(written):
    """The README's set-up prose names the heterogeneous table's rate and the SmolLM2 rows' rate: a choice that
    moves while the prose stays fails here."""
    results = Results(BUDGET.OUT / "results.json")
    tiny, real = budget.chosen(results, BUDGET.GRID), budget.chosen(results, BUDGET.smollm2()[0])
    assert tiny is not None and real is not None
    text = " ".join((BUDGET.HERE / "README.md").read_text().split())
    for phrase in (f"AdamW lr {written(tiny)} in both settings", f"one local epoch at lr {written(real)}, batch 8"):
        assert phrase in text, phrase


def test_the_results_page_names_each_task_a_settings_claims_leave_out(monkeypatch):
    """A task a setting's grid leaves out is named on the page's opening paragraph beside that setting, with the
    reason, and the shipped page carries the paragraph its records give."""
    gone = {None: "topic", "smollm2": "two_hop", "deep_hetero": "category"}
    monkeypatch.setattr(TABLES, "left_out", lambda chain=None: {gone[chain]: "not learnt on validation"})
    text = TABLES.intro()
    assert ("In the heterogeneous claims, **topic** is scored and shown but left out of every claim, its control and "
            "the claims' QA, CLS and ALL means (the tables' columns average it): not learnt on validation") in text
    assert "In the SmolLM2 claims, **two_hop** is scored" in text and text.count("is scored and shown") == 3
    assert "In the deep LLM's heterogeneous claims, **category** is scored" in text
    monkeypatch.undo()
    assert TABLES.intro() in (BUDGET.HERE / "RESULTS.md").read_text()


def test_every_row_of_a_table_with_a_grid_of_its_own_runs_at_the_rate_that_grid_holds():
    """The homogeneous table's rows and the deep LLM's homogeneous and heterogeneous rows train at their grid's
    choice once it has made one; before, at the rate the grid lists first while it has no records, and at one of
    its rates while it runs (zero-shot trains nothing)."""
    results = Results(BUDGET.OUT / "results.json")
    plan = TABLES.plan()
    for chain, prefix in (("homo", "homo/"), ("deep_homo", "deep/homo/"), ("deep_hetero", "deep/hetero/")):
        (grid,) = getattr(BUDGET, chain)()
        choice = budget.chosen(results, grid)
        ran = any(results.runs(p.key) for p in budget.plan(grid))
        rows = [p for p in plan if p.key.startswith(prefix) and not p.key.endswith("/zeroshot")]
        assert len(rows) > 10, chain
        rates = {p.resolve(0).federation.lr for p in rows}
        if choice is not None:
            assert rates == {float(choice)}, chain
        elif not ran:
            assert rates == {float(grid.values[0])}, chain
        else:
            assert len(rates) == 1 and rates <= {float(v) for v in grid.values}, chain
