"""ELSA's rates chosen on validation data (`experiments/elsa/budget.py`): each grid runs the calibration rows its
claims rest on (a task's reference; Simple SL's own control), changed only in the rate and in what they are scored
on; the validation rows carry the test set's answer shares; and every row runs at the rate its grid chose (before a
choice: the rate the grid lists first)."""
from __future__ import annotations

import dataclasses
from collections import Counter

import pytest

from fedlab.evidence import budget
from fedlab.evidence.records import ROOT
from fedlab.evidence.runner import Results
from fedlab.evidence.summary import load_table

TABLES = load_table("elsa")
BUDGET = load_table("elsa", script="budget")


def _without(cfg, *fields):
    """The resolved config as a dict, less the dotted `fields`."""
    out = dataclasses.asdict(cfg)
    for f in fields:
        section, key = f.split(".")
        out[section].pop(key)
    return out


VALIDATION_FIELDS = ("data.evaluate_on", "data.validation_per_task", "data.validation_from",
                     "data.validation_holdout_per_task", "data.validation_refills_train", "data.validation_keeps_shares")


GRIDS = {name: (lambda name=name: BUDGET.grids()[name][1]) for name in (*BUDGET.RATES, "simple_sl")}


@pytest.mark.parametrize("name", list(GRIDS))
def test_each_grid_row_is_its_calibration_row_but_for_its_rate_and_validation(name):
    """Each grid runs the calibration rows it names (a task's reference under each skew; Simple SL's own control on
    each of its settings) with nothing changed but the rate and what they are scored on (the task's validation
    rows), and reads them by the table's own control on those rows."""
    table = {p.key: p for p in TABLES.plan()}
    g = GRIDS[name]()
    rows = budget.plan(g)
    named = ({f"cal/{t}/{s}/simple_sl" for t, settings in TABLES.SIMPLE_SL_SETTINGS.items() for s in settings}
             if name == "simple_sl" else {f"cal/{name}/{s}/reference" for s in BUDGET.SKEWS})
    assert {p.key for p in g.rows} == named
    assert len(rows) == len(g.rows) * len(g.values)
    for p in rows:
        value, key = p.key.split("/", 1)
        ref = table[key].resolve(0)
        cfg = p.resolve(0)
        task = key.split("/")[1]
        assert cfg.federation.lr == float(value.removeprefix("lr"))
        assert cfg.data.evaluate_on == "validation" and ref.data.evaluate_on == "test"
        assert cfg.data.validation_per_task == BUDGET.VALIDATION_ROWS[task] and cfg.data.validation_keeps_shares
        assert _without(cfg, "federation.lr", *VALIDATION_FIELDS) == _without(ref, "federation.lr", *VALIDATION_FIELDS)
    # the controls read each row at the grid's value, at the table's bar
    prefix = g.prefix(g.values[1])
    controls = g.controls(prefix)
    assert [r for c in controls for r in c.rows] == [prefix + p.key for p in g.rows]
    assert {c.rule for c in controls} == {"chance + 25 points"}


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("task", list(BUDGET.VALIDATION_ROWS))
def test_the_validation_rows_are_fresh_and_carry_the_test_sets_answer_shares(task, seed):
    """Drawn from the population the test set asks about (no fallback to training rows, which for paraphrase are
    about four fifths "no"), in the test set's answer shares, none asking what a test item or a training row asks."""
    from fedlab.data.federated import answer_quotas, build_federated_data, validation_fallbacks

    (p, *_) = [p for p in BUDGET.plan() if f"/cal/{task}/a0.1/" in p.key]
    data = p.resolve(seed).data
    assert validation_fallbacks(data, seed) == {}
    val = build_federated_data(data, seed)
    test = build_federated_data(dataclasses.replace(data, evaluate_on="test"), seed)
    rows = val.test[task]
    assert len(rows) == BUDGET.VALIDATION_ROWS[task]
    assert Counter(e.target for e in rows) == answer_quotas([e.target for e in test.test[task]], len(rows))
    asked = {e.prompt for e in test.test[task]} | {e.prompt for part in val.train for e in part}
    assert not asked & {e.prompt for e in rows}
    assert val.train == test.train          # trains on the table's rows
    # as many as a test set, but for paraphrase (the next test)
    assert len(rows) == data.test_per_task or task == "paraphrase"


def test_paraphrases_validation_set_is_the_largest_in_the_test_sets_shares_every_seed_fills():
    """Its held-out people give few same-meaning prompts beyond its test set's: at the size chosen no seed's draw
    falls back to training rows; two rows more (one of each answer) and some seed's does."""
    from fedlab.data.federated import validation_fallbacks

    (p, *_) = [p for p in BUDGET.plan() if "/cal/paraphrase/a0.1/" in p.key]
    n = BUDGET.VALIDATION_ROWS["paraphrase"]
    data = p.resolve(0).data
    at = lambda size, seed: validation_fallbacks(dataclasses.replace(data, validation_per_task=size), seed)
    assert all(at(n, seed) == {} for seed in range(40))
    assert any(at(n + 2, seed) == {"paraphrase": "shares"} for seed in range(40))


def _rate_held(name: str, grid: budget.Grid, held: str) -> None:
    """The rate the table holds for a grid is its choice; before one, the rate the grid lists first while it has
    no records, and one of its rates while it runs."""
    path = BUDGET.OUT / "results.json"
    r = Results(path) if path.is_file() else None
    choice = BUDGET.chosen(r).get(name) if r is not None else None
    if choice is not None:
        assert held == choice, name
    elif r is None or not any(r.runs(p.key) for p in budget.plan(grid)):
        assert held == grid.values[0], name
    else:
        assert held in grid.values, name


def test_every_row_runs_at_the_rate_its_grid_chose():
    """Every Table 1 and calibration row of every task trains at the rate the table holds for the task, and every Simple SL row at Simple SL's, each tied to its grid (`_rate_held`) — but for the rows with a
    rate of their own (the centralized rows; Simple SL's in a task's rows)."""
    plan = TABLES.plan()
    grids = BUDGET.grids()
    for task in BUDGET.RATES:
        rate = TABLES.TASK_RATES[task]
        _rate_held(task, grids[task][1], rate)
        rows = [p for p in plan if f"/{task}/" in p.key and "/central/" not in p.key and not p.key.endswith("/simple_sl")]
        assert len(rows) > 15
        for p in rows:
            assert p.resolve(0).federation.lr == float(rate), p.key
    _rate_held("simple_sl", grids["simple_sl"][1], TABLES.SIMPLE_SL_RATE)
    rows = [p for p in plan if p.key.endswith("/simple_sl")]
    assert len(rows) > 10
    for p in rows:
        assert p.resolve(0).federation.lr == float(TABLES.SIMPLE_SL_RATE), p.key


def test_the_page_chooses_each_grids_rate_and_shows_a_section_once_its_rows_hold_records(tmp_path):
    """Toy records for the entailment grid, where only 1e-3 learns under both skews in every seed: that rate is
    chosen and the page says so; the other grids, without records, choose nothing and add no section until theirs
    hold some."""
    from fedlab.runtime.federation import run_key

    r = Results(tmp_path / "results.json")
    grids = BUDGET.grids()

    def put(grid, rates):
        for p in budget.plan(grid):
            for seed in range(3):
                acc = rates.get(p.key.split("/", 1)[0], 0.5)
                r.records[f"{p.key}@seed{seed}"] = {"key": p.key, "seed": seed, "final": {"acc/mean": acc},
                                                    "config_hash": run_key(p.resolve(seed))}
    put(grids["entailment"][1], {"lr0.001": 0.9})
    assert BUDGET.chosen(r) == {"entailment": "0.001"}
    text = BUDGET.render(r)
    assert "**Chosen: `federation.lr=0.001`**" in text
    assert "The paraphrase reference" not in text and "Simple SL's own control" not in text
    put(grids["simple_sl"][1], {"lr0.002": 0.9})
    assert BUDGET.chosen(r) == {"entailment": "0.001", "simple_sl": "0.002"}
    text = BUDGET.render(r)
    assert "## Simple SL's own control: `federation.lr` chosen on validation" in text
    assert text.count("**Chosen: `federation.lr=0.002`**") == 1 and "The paraphrase reference" not in text


def test_the_method_readme_states_the_rates_the_rows_run_at(written):
    """The method page's set-up prose names each task's rate as `TASK_RATES` holds it, and Simple SL's as
    `SIMPLE_SL_RATE` does (which the test above ties to the grids' choices): a rate that moves while the prose stays
    fails here."""
    text = " ".join((ROOT / "fedlab/methods/elsa/README.md").read_text().split())
    for task, rate in TABLES.TASK_RATES.items():
        assert f"{task} at {written(rate)}" in text, task
    assert f"Simple SL runs at its own learning rate, {written(TABLES.SIMPLE_SL_RATE)}" in text


def test_the_results_page_names_each_rate_and_whether_its_grid_chose_it():
    path = BUDGET.OUT / "results.json"
    chosen = BUDGET.chosen(Results(path)) if path.is_file() else {}
    text = TABLES.rates()
    for task in BUDGET.RATES:
        assert f"{task} at lr {TABLES.TASK_RATES[task]}, " in text
    assert f"Simple SL, on every task, at lr {TABLES.SIMPLE_SL_RATE}, " in text
    assert text.count("chosen on validation data") == len(chosen)
    assert text.count("has not chosen yet") == len(BUDGET.RATES) + 1 - len(chosen)
    assert text in (BUDGET.HERE / "RESULTS.md").read_text()


def _grid_records(tmp_path, grid, acc, seeds=range(3)) -> Results:
    """Toy records of every row of `grid` at `seeds`, `acc(rate prefix, row key, seed)` their accuracy."""
    from fedlab.runtime.federation import run_key

    r = Results(tmp_path / "results.json")
    for p in budget.plan(grid):
        prefix, key = p.key.split("/", 1)
        for seed in seeds:
            r.records[f"{p.key}@seed{seed}"] = {"key": p.key, "seed": seed, "final": {"acc/mean": acc(prefix, key, seed)},
                                                "config_hash": run_key(p.resolve(seed))}
    return r


def test_a_task_no_rate_teaches_in_every_seed_leaves_the_claims_with_its_reason(tmp_path):
    """Paraphrase's grid where the best rate's reference misses one (skew, seed) cell and every other rate more:
    the task is left out, the reason naming each rate's misses; once some rate learns every cell, nothing is."""
    g = BUDGET.grids()["paraphrase"][1]
    best = g.values[-1]
    missing = lambda prefix, key, seed: 0.9 if prefix == f"lr{best}" and (seed, "/a0.1/" in key) != (1, True) else 0.5
    gone = TABLES.left_out(_grid_records(tmp_path, g, missing))
    assert list(gone) == ["paraphrase"]
    assert f"`federation.lr={best}`: reference, paraphrase a0.1: paraphrase in seed 1" in gone["paraphrase"]
    assert all(f"`federation.lr={v}`: " in gone["paraphrase"] for v in g.values)
    every = lambda prefix, key, seed: 0.9 if prefix == f"lr{best}" else 0.5
    assert TABLES.left_out(_grid_records(tmp_path / "b", g, every)) == {}


def test_a_rate_that_learns_every_seed_it_holds_keeps_the_task_though_the_chosen_one_misses_a_later_seed(tmp_path):
    """The first rate and the last learn every cell of seeds 0–2 (a tie: the first is chosen); the first misses
    seed 3, which the last never ran: some rate tried still teaches the task in every seed it holds."""
    g = BUDGET.grids()["paraphrase"][1]
    first, last = g.values[0], g.values[-1]
    acc = lambda prefix, key, seed: (0.5 if seed == 3 else 0.9) if prefix == f"lr{first}" else \
        0.9 if prefix == f"lr{last}" else 0.5
    r = _grid_records(tmp_path, g, acc)
    held = _grid_records(tmp_path / "b", g, acc, seeds=[3])
    r.records.update({k: v for k, v in held.records.items() if k.startswith(f"lr{first}/")})
    assert budget.chosen(r, g) == first and budget.unreliable(r, g)
    assert TABLES.left_out(r) == {}


def test_the_claims_and_the_page_leave_out_a_task_left_out(monkeypatch):
    """One reading of the budget records (`tasks_left_out`) serves the claims and the page's rates sentence."""
    monkeypatch.setitem(TABLES.tasks_left_out.__wrapped__.__globals__, "left_out", lambda *a: {"paraphrase": "WHY"})
    TABLES.tasks_left_out.cache_clear()
    try:
        texts = [c.claim for c in TABLES.claims()]
        assert not [t for t in texts if "paraphrase" in t]
        assert [t for t in texts if "entailment" in t] and [t for t in texts if "sentiment" in t]
        assert "**paraphrase** is scored and shown but left out of every claim: WHY" in TABLES.rates()
    finally:
        TABLES.tasks_left_out.cache_clear()
