"""FedMKT's tables run at the budget their validation pages chose: the rate and batch size of the multi-task
tables (`budget.py`), the one-to-one table's batch size (its own grid there) and the S2 SLM family (`family.py`).
A YAML edited by hand away from a page's choice, or a choice that changed while the YAMLs stayed, fails here."""
from __future__ import annotations

from fedlab.evidence.summary import load_table

MOD = load_table("fedmkt")


def _value(cfg, key: str):
    section, name = key.split(".")
    return getattr(getattr(cfg, section), name)


def test_every_row_of_the_tables_runs_at_the_values_its_pages_chose():
    multi, o2o = MOD.chosen_budget(), MOD.chosen_budget(chain="one_to_one")
    family = MOD.chosen_budget("family")["model.clients"]
    assert {"federation.lr", "federation.batch_size"} <= set(multi) and set(o2o) == {"federation.batch_size"}
    rows = [p for p in MOD.plan() if not p.key.startswith("real/")]   # SmolLM2 runs at its own budget
    assert {p.key.split("/")[0] for p in rows} == {"hetero", "centralized", "homo", "o2o", "homo_s1", "o2o_s1", "task"}
    for p in rows:
        cfg = p.resolve(0)
        one_to_one = p.key.startswith(("o2o/", "o2o_s1/"))
        assert str(_value(cfg, "federation.lr")) == multi["federation.lr"], p.key
        want = o2o if one_to_one else multi
        assert str(_value(cfg, "federation.batch_size")) == want["federation.batch_size"], p.key
        if p.key.startswith(("homo/", "o2o/")) and cfg.method.name != "centralized":   # the S2 settings' SLMs
            models = {cfg.model.client_model(c) for c in range(cfg.data.num_clients)}
            assert models == {family}, (p.key, models)


def test_the_family_grid_runs_at_the_rate_and_batch_size_the_budget_chose():
    multi = MOD.chosen_budget()
    assert {"federation.lr", "federation.batch_size"} <= set(multi)
    family = load_table("fedmkt", script="family")
    for p in family.plan():
        cfg = p.resolve(0)
        for key, value in multi.items():
            assert str(_value(cfg, key)) == value, (p.key, key)
            assert f"{key}={value}" in p.overrides, (p.key, key)     # held there, not by a YAML that agrees today


def test_the_validation_pages_records_stay_current_once_the_tables_take_their_choices():
    """A grid row resolves the settings chosen after it from the rows' own overrides, not from the YAMLs that take
    the choices: otherwise writing a choice into base.yaml would turn the grid that made it into stale records."""
    from fedlab.evidence import budget

    for script, chain in (("budget", None), ("budget", "one_to_one"), ("family", None)):
        records, grids = budget.chain_of(MOD.HERE, script, chain)
        for grid in grids:
            assert budget.chosen(records, grid) is not None, (script, chain, grid.key)
            assert not budget.outdated(records, grid), (script, chain, grid.key)


def test_the_batch_grid_keeps_each_reference_rows_own_overrides_but_the_batch_pin(monkeypatch):
    import dataclasses

    script = load_table("fedmkt", script="budget")
    first = dataclasses.replace(script.GRID.rows[0], overrides=(*script.GRID.rows[0].overrides, "model.max_length=64"))
    monkeypatch.setattr(script, "GRID", dataclasses.replace(script.GRID, rows=(first, *script.GRID.rows[1:])))
    monkeypatch.setattr(script, "_at_rate", lambda r: "federation.lr=0.001")   # the changed row has no records
    (grid,) = script.refined()
    row = next(p for p in grid.rows if p.key == first.key)
    assert "model.max_length=64" in row.overrides
    assert not set(script.AT_FIRST_BATCH) & set(row.overrides)
    assert "federation.lr=0.001" in row.overrides


def test_written_puts_rates_the_way_the_readmes_do(written):
    assert [written(v) for v in ("0.001", "0.0005", "0.002", "16")] == ["1e-3", "5e-4", "2e-3", "16"]


def test_the_readme_states_the_values_the_pages_chose(written):
    """The README's set-up prose names the rate, the batch sizes and the S2 family: a page's choice that moves
    while the prose stays fails here."""
    multi, o2o = MOD.chosen_budget(), MOD.chosen_budget(chain="one_to_one")
    family = MOD.chosen_budget("family")["model.clients"]
    text = " ".join((MOD.HERE / "README.md").read_text().split())
    lr, batch = written(multi["federation.lr"]), multi["federation.batch_size"]
    for phrase in (f"AdamW lr {lr} and batch {batch} for every model",
                   f"the one-to-one table's batch chosen on its own: {o2o['federation.batch_size']}",
                   f"Table 3: four {family} SLMs", f"Table 4: the LLM and one {family})",
                   f"the SLMs' at {lr};"):
        assert phrase in text, phrase


def test_smollm2s_grid_runs_its_centralized_reference_at_every_rate_on_validation():
    script = load_table("fedmkt", script="budget")
    rows = {p.key: p.resolve(0) for p in script.plan() if "/real/" in p.key}
    assert sorted(rows) == sorted(f"lr{v}/real/centralized" for v in script.REAL_RATES)
    for v in script.REAL_RATES:
        cfg = rows[f"lr{v}/real/centralized"]
        assert (cfg.model.name, cfg.method.name, cfg.federation.lr) == ("smollm2-135m", "centralized", float(v))
        assert cfg.data.evaluate_on == "validation"
        assert cfg.data.train_per_task == 40            # the real-model rows' own data, not the tables'


def test_smollm2s_grid_row_is_the_tables_centralized_row_but_for_its_rate_and_validation():
    import dataclasses

    script = load_table("fedmkt", script="budget")
    table = next(p for p in MOD.plan() if p.key == "real/centralized").resolve(0)
    for p in script.plan():
        if "/real/" in p.key:
            cfg = p.resolve(0)
            for section, fields in (("federation", ("lr",)), ("data", [f for f in dataclasses.asdict(cfg.data)
                                                                        if f.startswith(("evaluate_on", "validation_"))])):
                mine, theirs = dataclasses.asdict(getattr(cfg, section)), dataclasses.asdict(getattr(table, section))
                for f in fields:
                    mine.pop(f), theirs.pop(f)
                assert mine == theirs, (p.key, section)
            for section in ("model", "method", "eval", "seed"):
                assert getattr(cfg, section) == getattr(table, section), (p.key, section)


def test_the_real_model_rows_llm_takes_the_rate_smollm2s_grid_chose(monkeypatch):
    """FedMKT's server LoRA and the centralized reference at the chosen rate; the SLMs' Standalone row untouched;
    before a choice, the YAMLs' rate."""
    real = lambda: {p.key: p.resolve(0) for p in MOD.plan() if p.key.startswith("real/")}
    monkeypatch.setitem(MOD.real_rate.__globals__, "chosen_budget", lambda *a, chain=None: {})
    before = real()
    assert before["real/hetero/fedmkt"].method.server_lr == before["real/centralized"].federation.lr == 0.0005
    monkeypatch.setitem(MOD.real_rate.__globals__, "chosen_budget",
                        lambda *a, chain=None: {"federation.lr": "0.002"} if chain == "real" else {})
    after = real()
    assert after["real/hetero/fedmkt"].method.server_lr == 0.002
    assert after["real/centralized"].federation.lr == 0.002
    assert after["real/hetero/standalone"] == before["real/hetero/standalone"]
    assert after["real/hetero/fedmkt"].federation.lr == before["real/hetero/fedmkt"].federation.lr   # the SLMs' rate


def test_the_smollm2_claims_read_the_tasks_its_own_reference_learns(monkeypatch):
    """Once SmolLM2's grid has chosen, its claims and their control read the tasks centralized SmolLM2 learns in
    every seed there, not those of the tiny LLM's reference."""
    g = MOD.claim_tasks.__wrapped__.__globals__
    monkeypatch.setitem(g, "_learnt", lambda: {"centralized LLM": ("recall", "sentiment", "topic"),
                                               "centralized SmolLM2": ("sentiment", "topic", "category")})
    monkeypatch.setitem(g, "left_out", lambda: {})
    for f in (MOD.claim_tasks, MOD.claims):
        f.cache_clear()
    try:
        assert MOD.claim_tasks("real_llm") == ["category", "sentiment", "topic"]
        monkeypatch.setitem(g, "_learnt", lambda: {"centralized LLM": ("recall", "sentiment", "topic")})
        MOD.claim_tasks.cache_clear()
        assert MOD.claim_tasks("real_llm") == ["recall", "sentiment", "topic"]    # before SmolLM2's grid chose
        monkeypatch.setitem(g, "_learnt", lambda: {"centralized LLM": ("recall", "sentiment", "topic"),
                                                   "centralized SmolLM2": ("sentiment", "topic", "category")})
        MOD.claim_tasks.cache_clear()
        smol = [c for c in MOD.claims() if c.claim.startswith("SmolLM2-135M: LLM")]
        assert len(smol) == 2
        for c in smol:
            assert (c.control.name, c.control.tasks) == ("centralized SmolLM2", ("category", "sentiment", "topic"))
            assert MOD.KINDS[c.claim] == "real_llm"
    finally:
        for f in (MOD.claim_tasks, MOD.claims):
            f.cache_clear()


def test_the_one_to_one_llm_claims_rest_on_their_centralized_row_made_at_seeds_no_claim_compares():
    """The one-to-one centralized LLM is a compared row of the claims it controls: their control is the same row
    (the same config) made at seeds of its own, so a task it fails can leave the claims."""
    from fedlab.evidence.claims import claim_keys
    from fedlab.evidence.verdicts import CLAIM_SEEDS

    by_key = {p.key: p for p in MOD.plan()}
    twin, compared = by_key[MOD.O2O_CONTROL], by_key["o2o/centralized"]
    assert twin.seeds and not set(twin.seeds) & set(range(CLAIM_SEEDS)) and compared.seeds is None
    assert (twin.config, twin.overrides) == (compared.config, compared.overrides)
    o2o_llm = [c for c in MOD.claims() if MOD.KINDS[c.claim] == "o2o_llm"]
    assert len(o2o_llm) == 2
    for c in o2o_llm:
        rows = {r for ctl in c.controls() for r in ctl.rows}
        assert rows == {MOD.O2O_CONTROL} and "o2o/centralized" in claim_keys(c) and c.over is not None
    # the page still shows the compared row against the same bar, at the seeds the claims compare
    (shown,) = MOD.SYSTEM.controls(None)
    assert shown.rows == ("o2o/centralized",) and shown.tasks == o2o_llm[0].control.tasks
