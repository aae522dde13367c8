"""The evidence engine around the claims: the page's shape, the forest plot, the summary across systems, the
spot-check's comparison and draw, and the check that prose cannot drift from the generated blocks."""
import dataclasses
import json
from pathlib import Path

import pytest

from fedlab.evidence import Claim, Control, Planned, Results, System, page
from fedlab.evidence.page import GENERATED

ROOT = Path(__file__).resolve().parents[2]
ACC = lambda rec: rec["final"]["acc/mean"]
REF = Control("ref learns", ("ref",), ("t",), lambda rec, t: rec["final"]["acc/mean"], lambda rec, t: 0.5, "0.5")


def records(tmp_path, rows: dict[str, list[float]]) -> Results:
    r = Results(tmp_path / "results.json")
    for key, accs in rows.items():
        for seed, a in enumerate(accs):
            r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": {"acc/mean": a}}
    return r


def system(claims) -> System:
    return System("Toy", "a toy system", "experiments/toy/make_tables.py", lambda: [], lambda _r: claims)


def test_a_page_puts_controls_then_claims_then_tables_then_the_forest_plot(tmp_path):
    r = records(tmp_path, {"a": [0.6, 0.62, 0.61], "b": [0.5, 0.53, 0.51], "ref": [0.9, 0.9, 0.9]})
    r.meta["spot_check"] = {"commit": "abcdef0123", "date": "2026-11-28", "max_seconds": 60.0,
                            "pairs": [{"key": "a", "seed": 1, "differ": []}, {"key": "b", "seed": 0,
                                                                             "differ": ["acc/mean: 0.5 recorded, 0.6 now"]}]}
    c = Claim("a above b", "T1", "61 vs 51 (+10.0)", "a", "b", ACC, control=REF)
    text = page(r, system([c]), "The toy's intro.", ["## Table 1", "", "| x |"], outdated=set())
    assert text.startswith(GENERATED + "\n# Toy results (embedded scale)\n")
    order = [text.index(s) for s in ("The toy's intro.", "## Controls", "## Claims", "## Table 1", "## Forest plot")]
    assert order == sorted(order)
    assert "**Claims**: 1 reproduced. **Controls**: 1 of 1 hold." in text
    assert "| ref learns | `ref` | 0.5 | t 3/3 | holds |" in text
    assert ("re-run at abcdef0 on 2026-11-28: 1 reproducibility failure(s) (`b` seed 0)" in text
            and "among records of ≤ 60 s" in text)
    assert (tmp_path / "forest.png").read_bytes()[:4] == b"\x89PNG"
    # a page without a difference to draw has no forest plot
    empty = Results(tmp_path / "none" / "results.json")
    (tmp_path / "none").mkdir()
    assert "## Forest plot" not in page(empty, system([c]), "", [], outdated=set())
    assert not (tmp_path / "none" / "forest.png").exists()


def test_a_page_names_the_rows_whose_records_are_not_current(tmp_path):
    """A row whose records another config made is named in the page's header, and its claim has no verdict;
    a page whose rows are all current has no such line."""
    from fedlab import numerics
    from fedlab.runtime.federation import run_key

    r = records(tmp_path, {"a": [0.6, 0.62, 0.61], "b": [0.5, 0.53, 0.51], "ref": [0.9, 0.9, 0.9]})
    plan = [Planned(k, None, (), k) for k in ("a", "b", "ref")]
    for p in plan:
        for rec in r.runs(p.key):
            rec["config_hash"] = run_key(p.resolve(rec["seed"]))
            rec["environment"] = {"numerics_fingerprint": numerics.current_fingerprint()}
    c = Claim("a above b", "T1", "61 vs 51 (+10.0)", "a", "b", ACC, control=REF)
    toy = System("Toy", "a toy system", "experiments/toy/make_tables.py", lambda: plan, lambda _r: [c])
    text = page(r, toy, "", [])
    assert "Not current" not in text and "**Claims**: 1 reproduced." in text
    r.records["b@seed1"]["config_hash"] = "0000000000"                 # made by another config
    text = page(r, toy, "", [])
    assert ("**Not current**: 1 row holds records made by another config, other numerics or other zoo weights than "
            "the script runs now: `b` (seed 1)." in text
            and "`python experiments/toy/make_tables.py --only 'b$' --seeds 1` re-runs them." in text)
    assert "**Claims**: 1 stale." in text
    r.records["a@seed0"]["environment"] = {}                            # other numerics: stale, its verdict kept
    text = page(r, toy, "", [])
    assert "**Not current**: 2 rows hold records" in text and "`a` (seed 0), `b` (seed 1)." in text


def test_the_summary_has_one_row_per_system_from_its_records(tmp_path, monkeypatch):
    from fedlab.evidence import summary

    folder = tmp_path / "experiments" / "toy"
    folder.mkdir(parents=True)
    (folder / "make_tables.py").write_text(
        "from pathlib import Path\n"
        "from fedlab.evidence import Claim, Control, System\n"
        "REF = Control('ref learns', ('ref',), ('t',), lambda rec, t: rec['final']['acc/mean'], lambda rec, t: 0.5, '0.5')\n"
        "ACC = lambda rec: rec['final']['acc/mean']\n"
        "CLAIMS = [Claim('a above b', 'T1', '61 vs 51 (+10.0)', 'a', 'b', ACC, control=REF),\n"
        "          Claim('b above a', 'T1', '51 vs 61 (+3.0)', 'b', 'a', ACC, control=REF)]\n"
        f"SYSTEM = System('Toy', 'a toy', {str(folder / 'make_tables.py')!r}, lambda: [], lambda _r: CLAIMS,\n"
        "                run='fedlab run toy.yaml')\n")
    (folder / "notasystem").mkdir()
    r = records(folder, {"a": [0.6, 0.62, 0.61], "b": [0.5, 0.53, 0.51], "ref": [0.9, 0.2, 0.9]})
    r.save()
    mods = summary.systems(tmp_path / "experiments")
    assert [m.SYSTEM.name for m in mods] == ["Toy"]
    # hand-made records: another config made them (the plan is empty, so none is outdated) and ref fails seed 1
    rows = summary.table(mods, tmp_path)
    assert rows[2] == ("| **Toy**: a toy | `fedlab run toy.yaml`<br>`python " + str(folder / "make_tables.py")
                       + "` | 2 no control | 0 of 1 | 3 | 2 of 2 | none | [experiments/toy/RESULTS.md](experiments/toy/RESULTS.md) |")
    # both claims read row a: its seeds made at two commits leave neither at one clean commit per row
    r.records = {k: {**rec, "git": "c2" if k == "a@seed2" else "c1"} for k, rec in r.records.items()}
    r.save()
    assert "| 3 | 0 of 2 | none | [experiments/toy/" in summary.table(mods, tmp_path)[2]
    r.records = {k: {**rec, "git": "c1"} for k, rec in r.records.items()}
    r.save()
    # with row a in the plan: its hand-made records are another config's (no run key), and seeds 3, 4 are missing
    import types

    r.records = {k: {**rec, "seconds": 720.0} for k, rec in r.records.items()}
    r.save()
    planned = types.SimpleNamespace(SYSTEM=dataclasses.replace(mods[0].SYSTEM, plan=lambda: [Planned("a", None)]))
    assert "| 2 of 2 | 5 in 1 row (about 1.0 h; 1 timed by another config's runs) | [experiments/toy/" in \
        summary.table([planned], tmp_path)[2]
    planned.SYSTEM = dataclasses.replace(planned.SYSTEM, plan=lambda: [Planned("a", None), Planned("new", None)])
    mods[0].SYSTEM.claims(None).append(Claim("new above a", "T2", "1 vs 0 (+1.0)", "new", "a", lambda rec: 0.0))
    try:
        assert "| 10 in 2 rows (about 1.0 h; 1 with no recorded run time; 1 timed by another config's runs) |" in \
            summary.table([planned], tmp_path)[2]
    finally:
        mods[0].SYSTEM.claims(None).pop()
    # the overview is written into RESULTS.md and between the README's markers, and nothing else changes
    (tmp_path / "README.md").write_text("# Toy\n\n<!-- summary: written by fedlab.evidence -->\n<!-- /summary -->\nend\n")
    assert set(summary.stale(tmp_path)) == {tmp_path / "RESULTS.md", tmp_path / "README.md"}
    assert set(summary.write(tmp_path)) == {tmp_path / "RESULTS.md", tmp_path / "README.md"}
    assert summary.stale(tmp_path) == [] and summary.write(tmp_path) == []
    readme = (tmp_path / "README.md").read_text()
    assert rows[2] in readme and readme.startswith("# Toy\n\n<!-- summary") and readme.endswith("/summary -->\nend\n")
    r.records["ref@seed1"] = {**r.records["ref@seed1"], "final": {"acc/mean": 0.9}}   # the control holds now
    r.save()
    assert set(summary.stale(tmp_path)) == {tmp_path / "RESULTS.md", tmp_path / "README.md"}


def test_the_spot_check_compares_every_final_metric_but_the_measured_ones():
    from fedlab.evidence.spotcheck import compare

    rec = {"final": {"acc/mean": 0.5, "loss": float("nan"), "fused/latency_ms_per_token": 3.0, "gone": 1.0}}
    assert compare(rec, {"acc/mean": 0.5, "loss": float("nan"), "fused/latency_ms_per_token": 9.0, "gone": 1.0,
                         "new/metric": 2.0}) == []
    assert compare(rec, {"acc/mean": 0.51, "loss": float("nan")}) == [
        "acc/mean: 0.5 recorded, 0.51 now", "gone (not logged now)"]


def test_the_spot_check_draws_current_records_of_this_kind_at_random_within_the_time_asked(tmp_path, monkeypatch):
    from fedlab import numerics
    from fedlab.evidence import records as R
    from fedlab.evidence import spotcheck

    here = numerics.current_fingerprint()
    other = next(f for f in numerics.measured_fingerprints() if f != here)     # another measured kind's
    r = Results(tmp_path / "results.json")
    plan = [Planned(f"row{i}", None) for i in range(5)]
    for i in range(5):
        for s in range(3):
            r.records[f"row{i}@seed{s}"] = {"key": f"row{i}", "seed": s, "seconds": (10.0, 20.0, 30.0, 40.0, 10.0)[i],
                                            "final": {}, "environment": {"numerics_fingerprint": here}}
    for s in range(3):      # current, but made on another kind: its digits reproduce there, not here
        r.records[f"row4@seed{s}"]["environment"]["numerics_fingerprint"] = other
    monkeypatch.setattr(Planned, "resolve", lambda self, seed, extra=(): None)
    monkeypatch.setattr(R, "stale_reason", lambda rec, cfg: None if rec["key"] != "row0" else "stale")
    picks = spotcheck.draw(r, plan, 3, seed=7, max_seconds=30.0)
    assert len(picks) == 3 and {p.key for p, _ in picks} <= {"row1", "row2"}    # row0 stale, row3 too long
    assert picks == spotcheck.draw(r, plan, 3, seed=7, max_seconds=30.0)           # the seed fixes the draw
    assert len(spotcheck.draw(r, plan, 50, seed=7)) == 9                           # no more than there are


def test_prose_may_quote_a_generated_number_but_not_type_its_own(tmp_path):
    from fedlab.evidence import prose

    (tmp_path / "RESULTS.md").write_text(GENERATED + "\n| a | 0.560 ± 0.047 | reproduced |\n")
    (tmp_path / "README.md").write_text(
        "Quoted from the page: 0.560 ± 0.047.\n"
        "Typed by hand: +10.2 ± 3.1 points.\n"
        "<!-- summary: written by fedlab.evidence -->\n| x | 0.7 ± 0.1 | underpowered |\n<!-- /summary -->\n"
        "A stale zoo model is rebuilt; the numbers were reproduced on a fresh clone.\n"
        "The claim is underpowered.\n"
        "That claim was reproduced.\n")
    found = [(f.path, f.line, f.what.split(" ")[0]) for f in prose.check(tmp_path)]
    assert found == [("README.md", 2, "'+10.2"), ("README.md", 7, "verdict"), ("README.md", 8, "verdict")]
    # the block's own numbers back a quote elsewhere
    (tmp_path / "docs.md").write_text("The block says 0.7 ± 0.1.\n")
    assert [f.path for f in prose.check(tmp_path)] == ["README.md", "README.md", "README.md"]


@pytest.mark.parametrize("script", ["floe_inference.py", "numerics_pin.py"])
def test_benchmark_reports_are_generated_pages(script, tmp_path, monkeypatch):
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from _common import Report

    rep = Report(f"benchmarks/{script}")
    rep.emit("| path | × |\n|---|---|\n| x | 1.37 ± 0.12 |")
    rep.write(tmp_path / "out.md")
    text = (tmp_path / "out.md").read_text()
    assert text.startswith(f"<!-- generated by benchmarks/{script}") and text.endswith("| x | 1.37 ± 0.12 |\n")
    from fedlab.evidence.prose import generated_and_prose

    assert generated_and_prose(text) == (text, "")


def test_the_repository_prose_quotes_only_generated_numbers():
    """Every Markdown file of the repository: a mean ± interval outside a generated block is one some generated
    block shows, and no verdict word stands outside one."""
    from fedlab.evidence import prose

    findings = prose.check(ROOT)
    assert not findings, "\n".join(map(str, findings[:20]))


def test_every_system_page_is_the_engines_output():
    """Each system's RESULTS.md starts with the engine's mark, and the summary's systems are the five."""
    from fedlab.evidence.summary import systems

    mods = systems()
    assert sorted(m.SYSTEM.name for m in mods) == ["Co-PLMs", "ELSA", "FedMKT", "FedProxy", "Floe"]
    for m in mods:
        assert (m.SYSTEM.folder / "RESULTS.md").read_text().startswith(GENERATED), m.SYSTEM.name
        assert (m.SYSTEM.folder / "forest.png").exists(), m.SYSTEM.name
    assert (ROOT / "RESULTS.md").read_text().startswith("<!-- generated by fedlab.evidence.summary")
    assert json.loads((ROOT / "experiments/fedmkt/results.json").read_text())["_meta"]


VALIDATION_PAGES = ["coplms/budget", "coplms/family", "coplms/tune", "elsa/budget", "fedmkt/budget", "fedmkt/family",
                    "fedproxy/budget", "fedproxy/server_step", "floe/budget"]


def test_every_validation_page_script_is_checked():
    """Every table script that writes a page of its own (it declares OUT; `fedlab results --todo` lists them too)
    is in VALIDATION_PAGES."""
    from fedlab.evidence.scripts import page_scripts

    assert page_scripts() == sorted(VALIDATION_PAGES)


@pytest.mark.slow   # the configs of each page's rows resolved to tell outdated records
@pytest.mark.parametrize("name", VALIDATION_PAGES)
def test_each_validation_page_re_renders_byte_for_byte(name, tmp_path, reference_kind):
    """A budget, family or tuning page (`experiments/<system>/<script>/RESULTS.md`) is exactly what its records
    give now: a page left as its records were before a config changed under them would hide the change."""
    import shutil

    from fedlab.evidence.summary import load_table

    system, script = name.split("/")
    mod = load_table(system, script=script)
    if (mod.OUT / "results.json").is_file():      # a page whose grid has no run yet renders from no records
        shutil.copy(mod.OUT / "results.json", tmp_path / "results.json")
    assert mod.render(Results(tmp_path / "results.json")) == (mod.OUT / "RESULTS.md").read_text()


@pytest.mark.slow   # about 100 s: each system's configs resolved once per record to tell stale rows
@pytest.mark.parametrize("name", ["coplms", "elsa", "fedmkt", "fedproxy", "floe"])
def test_each_results_page_re_renders_byte_for_byte(name, tmp_path, reference_kind, monkeypatch):
    """A system's RESULTS.md and forest plot are exactly what its records give now (rendered from a copy of its
    results.json, so the repository is left as it is), and so is the overview, from any working directory."""
    import shutil

    from fedlab.evidence.summary import load_table, stale

    monkeypatch.chdir(tmp_path)
    mod = load_table(name)
    shutil.copy(mod.SYSTEM.folder / "results.json", tmp_path / "results.json")
    text = mod.render(Results(tmp_path / "results.json"))
    assert text == (mod.SYSTEM.folder / "RESULTS.md").read_text()
    assert (tmp_path / "forest.png").read_bytes() == (mod.SYSTEM.folder / "forest.png").read_bytes()
    if name == "floe":
        assert stale() == []


def _as_run(r, grid):
    """Give each toy record the run key its grid row resolves to now, as the run would have written it."""
    from fedlab.evidence import budget
    from fedlab.runtime.federation import run_key

    for p in budget.plan(grid):
        for rec in r.runs(p.key):
            rec["config_hash"] = run_key(p.resolve(rec["seed"]))
    return r


def test_a_budget_is_the_grid_value_whose_references_learn_the_most_cells(tmp_path):
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    row = Planned("ref", None, ("federation.rounds=1",), "reference")
    learns = lambda prefix: [above_chance("ref", [f"{prefix}ref"], ["a", "b"],
                                          lambda rec, t: rec["final"][f"acc/task_{t}"], lambda t: 0.5, 10)]
    grid = budget.Grid("federation.lr", ("0.005", "0.002"), (row,), learns)
    plan = budget.plan(grid)
    assert [p.key for p in plan] == ["lr0.005/ref", "lr0.002/ref"]
    assert plan[1].overrides == ("federation.rounds=1", "data.evaluate_on=validation", "federation.lr=0.002")
    r = Results(tmp_path / "results.json")

    def put(key, seed, a, b):
        r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": {"acc/task_a": a, "acc/task_b": b}}
    for s in range(3):
        put("lr0.005/ref", s, 0.9, 0.5)          # learns a, not b: 3 of 6 cells
        put("lr0.002/ref", s, 0.9, 0.7 if s else 0.5)   # 5 of 6
    _as_run(r, grid)
    assert budget.cells(r, grid) == {"0.005": (3, 6, 3), "0.002": (5, 6, 3)}
    assert budget.chosen(r, grid) == "0.002"
    put("lr0.005/ref", 0, 0.9, 0.9)
    put("lr0.005/ref", 1, 0.9, 0.9)              # now 5 of 6 too: the tie keeps the value listed first
    _as_run(r, grid)
    assert budget.chosen(r, grid) == "0.005"
    del r.records["lr0.002/ref@seed2"]            # a row short of three seeds: no choice yet
    assert budget.chosen(r, grid) is None
    assert "No choice yet" in "\n".join(budget.section(r, grid, "Toy"))


def test_a_grid_whose_value_one_override_cannot_set_gives_each_row_its_own_overrides():
    """A model family over rows of 4 and 1 clients: the grid's `setting` writes each row's list of clients."""
    from fedlab.evidence import budget

    rows = (Planned("homo", None, ("a=1",), "H"), Planned("o2o", None, (), "O"))
    n = {"homo": 4, "o2o": 1}
    grid = budget.Grid("model.clients", ("x", "y"), rows, lambda prefix: [],
                       setting=lambda row, v: (f"model.clients=[{','.join([v] * n[row.key])}]",))
    got = {p.key: p.overrides for p in budget.plan(grid)}
    assert got["clientsy/homo"] == ("a=1", "data.evaluate_on=validation", "model.clients=[y,y,y,y]")
    assert got["clientsx/o2o"] == ("data.evaluate_on=validation", "model.clients=[x]")
    assert budget.Grid("federation.lr", ("0.1",), rows, lambda p: []).overrides(rows[1], "0.1") == ("federation.lr=0.1",)


def test_a_task_no_reference_learns_in_any_seed_at_the_chosen_budget_leaves_the_claims(tmp_path):
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    score = lambda rec, t: rec["final"][f"acc/task_{t}"]
    learns = lambda prefix: [above_chance(name, [f"{prefix}{name}"], ["a", "b", "c"], score, lambda t: 0.5, 10)
                             for name in ("llm", "slm")]
    grid = budget.Grid("federation.lr", ("0.002",), (Planned("llm", None, (), "L"), Planned("slm", None, (), "S")),
                       learns)
    r = Results(tmp_path / "results.json")
    for s in range(3):
        for name, b in (("llm", 0.5), ("slm", 0.9 if s == 2 else 0.5)):
            r.records[f"lr0.002/{name}@seed{s}"] = {"key": f"lr0.002/{name}", "seed": s,
                                                     "final": {"acc/task_a": 0.9, "acc/task_b": b, "acc/task_c": 0.5}}
    out = budget.unlearnt(_as_run(r, grid), grid)
    assert list(out) == ["b", "c"]           # a: learnt; b: the slm learns it in seed 2, the llm in none; c: nobody
    assert out["b"].startswith("the llm (chance + 10 points) clears the bar in no seed")
    assert out["c"].startswith("the llm (chance + 10 points) and the slm (chance + 10 points) clear the bar")
    assert "- **c**:" in "\n".join(budget.section(r, grid, "Toy"))
    assert "Left out of the toy's claims" in "\n".join(budget.section(r, grid, "Toy", claims="the toy's claims"))
    assert "- **c**:" not in "\n".join(budget.section(r, grid, "Toy", claims=None))   # another page says
    compared = "\n".join(budget.section(r, grid, "Toy", choose=False))     # candidates side by side, no choice
    assert "Chosen" not in compared and "- **c**:" not in compared and "chance + 10 points" in compared
    del r.records["lr0.002/slm@seed2"]       # before a choice nothing is left out
    assert budget.unlearnt(r, grid) == {}


def test_a_task_a_reference_learns_in_some_seeds_only_is_unreliable_and_says_in_how_many(tmp_path):
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    learns = lambda prefix: [above_chance("ref", [f"{prefix}ref"], ["a", "b"],
                                          lambda rec, t: rec["final"][f"acc/task_{t}"], lambda t: 0.5, 10)]
    grid = budget.Grid("federation.lr", ("0.002",), (Planned("ref", None, (), "reference"),), learns)
    r = Results(tmp_path / "results.json")
    for s in range(3):
        r.records[f"lr0.002/ref@seed{s}"] = {"key": "lr0.002/ref", "seed": s,
                                              "final": {"acc/task_a": 0.9, "acc/task_b": 0.5 if s == 1 else 0.9}}
    r = _as_run(r, grid)
    assert budget.unlearnt(r, grid) == {}
    assert budget.unreliable(r, grid) == {"b": "the ref (chance + 10 points) clears the bar in 2 of 3 seeds on "
                                                "validation data at `federation.lr=0.002`, not in every seed"}


def test_no_budget_is_chosen_from_records_another_config_made(tmp_path):
    """A grid row whose record an older config made (its run key is not the one the row resolves to now) gives
    no choice, and so leaves nothing out of the claims, until it is run again; the page marks the row."""
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    learns = lambda prefix: [above_chance("ref", [f"{prefix}ref"], ["a", "b"],
                                          lambda rec, t: rec["final"][f"acc/task_{t}"], lambda t: 0.5, 10)]
    grid = budget.Grid("federation.lr", ("0.005", "0.002"), (Planned("ref", None, (), "reference"),), learns)
    r = Results(tmp_path / "results.json")
    for v in grid.values:
        for s in range(3):
            r.records[f"lr{v}/ref@seed{s}"] = {"key": f"lr{v}/ref", "seed": s,
                                               "final": {"acc/task_a": 0.9, "acc/task_b": 0.5}}
    _as_run(r, grid)
    assert budget.chosen(r, grid) == "0.005" and list(budget.unlearnt(r, grid)) == ["b"]
    r.records["lr0.002/ref@seed1"]["config_hash"] = "0000000000"      # made by another config
    assert budget.outdated(r, grid) == {"lr0.002/ref"}
    assert budget.chosen(r, grid) is None and budget.unlearnt(r, grid) == {} and budget.learnt(r, grid) == {}
    text = "\n".join(budget.section(r, grid, "Toy"))
    assert "No choice: 1 row (marked †)" in text and "| 0.002 † |" in text and "| 0.005 |" in text
    assert "`lr0.002/ref`" in text
    _as_run(r, grid)                                                    # run again: current
    assert budget.chosen(r, grid) == "0.005" and "†" not in "\n".join(budget.section(r, grid, "Toy"))


def test_records_saved_into_a_folder_not_made_yet_make_it(tmp_path):
    r = Results(tmp_path / "budget" / "results.json")       # a new budget grid's folder, before its first run
    r.records["ref@seed0"] = {"key": "ref", "seed": 0, "final": {"acc/mean": 0.5}}
    r.save()
    assert Results(tmp_path / "budget" / "results.json").by_seed("ref", "acc/mean") == {0: 0.5}


def test_the_cells_a_claim_may_read_are_the_tasks_learnt_in_every_seed_at_the_chosen_budget(tmp_path):
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    row = Planned("ref", None, (), "reference")
    learns = lambda prefix: [above_chance("ref learns", [f"{prefix}ref"], ["a", "b", "c"],
                                          lambda rec, t: rec["final"][f"acc/task_{t}"], lambda t: 0.5, 10)]
    grid = budget.Grid("federation.lr", ("0.005",), (row,), learns)
    r = Results(tmp_path / "results.json")
    for s in range(3):     # a: every seed; b: two of three; c: none
        r.records[f"lr0.005/ref@seed{s}"] = {"key": "lr0.005/ref", "seed": s,
                                             "final": {"acc/task_a": 0.9, "acc/task_b": 0.9 if s else 0.5,
                                                       "acc/task_c": 0.5}}
    assert budget.learnt(_as_run(r, grid), grid) == {"ref learns": ("a",)}
    assert list(budget.unlearnt(r, grid)) == ["c"]          # only c is learnt in no seed
    shaky = budget.unreliable(r, grid)                      # b and c: not learnt in every seed
    assert sorted(shaky) == ["b", "c"] and "in 2 of 3 seeds" in shaky["b"] and "in no seed" in shaky["c"]
    del r.records["lr0.005/ref@seed2"]
    assert budget.learnt(r, grid) == {}                     # no choice before every row has its seeds


# the opening of a budget script written into tmp_path: its records folder and a score read off `acc/task_<t>`
BUDGET_SCRIPT_HEAD = ("from pathlib import Path\n"
                      "from fedlab.evidence import budget\n"
                      "from fedlab.evidence.controls import above_chance\n"
                      "from fedlab.evidence.records import Planned\n"
                      "OUT = Path(__file__).parent / 'budget'\n"
                      "score = lambda rec, t: rec['final'][f'acc/task_{t}']\n")


def test_a_refined_budget_decides_what_the_claims_read_once_it_has_chosen(tmp_path):
    """A budget script's `refined` grids choose a further setting at GRID's value: once one has chosen, the tasks
    left out and the tasks a control learns are read at its choice, not GRID's."""
    from fedlab.evidence import budget

    (tmp_path / "budget.py").write_text(
        BUDGET_SCRIPT_HEAD +
        "learns = lambda prefix: [above_chance('ref', [f'{prefix}ref'], ['a', 'b'], score, lambda t: 0.5, 10)]\n"
        "GRID = budget.Grid('federation.lr', ('0.002',), (Planned('ref', None, (), 'R'),), learns)\n"
        "def refined(r):\n"
        "    return [budget.Grid('federation.batch_size', ('16', '4'), GRID.rows, learns)]\n")
    r = Results(tmp_path / "budget" / "results.json")

    def put(key, a, b):
        for s in range(3):
            r.records[f"{key}@seed{s}"] = {"key": key, "seed": s, "final": {"acc/task_a": a, "acc/task_b": b}}
    script = budget._script(tmp_path)

    def save():
        for grid in (script.GRID, *script.refined(r)):
            _as_run(r, grid)
        r.save()
    put("lr0.002/ref", 0.9, 0.5)                     # at the rate alone: a learnt, b in no seed
    save()
    assert list(budget.left_out(tmp_path)) == ["b"] and budget.learnt_in(tmp_path) == {"ref": ("a",)}
    put("batch_size16/ref", 0.5, 0.5)
    put("batch_size4/ref", 0.9, 0.9)                 # the smaller batch learns both: chosen
    save()
    got = budget.chain_of(tmp_path)
    assert budget.final(*got).key == "federation.batch_size" and budget.chosen(got[0], budget.final(*got)) == "4"
    assert budget.left_out(tmp_path) == {} and budget.learnt_in(tmp_path) == {"ref": ("a", "b")}


def test_a_named_chain_leaves_out_the_tasks_its_own_reference_misses_not_the_grids(tmp_path):
    """`left_out(folder, chain=…)` reads the grid a budget script's function of that name declares (a table's
    rows with a reference of their own, e.g. FedProxy's SmolLM2 rows), at that grid's choice."""
    from fedlab.evidence import budget

    (tmp_path / "budget.py").write_text(
        BUDGET_SCRIPT_HEAD +
        "learns = lambda name: lambda prefix: [above_chance(name, [f'{prefix}{name}'], ['a', 'b'], score, "
        "lambda t: 0.5, 10)]\n"
        "GRID = budget.Grid('federation.lr', ('0.002',), (Planned('ref', None, (), 'R'),), learns('ref'))\n"
        "def real(r=None):\n"
        "    return [budget.Grid('federation.lr', ('0.001', '0.004'), (Planned('big', None, (), 'B'),), learns('big'))]\n")
    r = Results(tmp_path / "budget" / "results.json")
    script = budget._script(tmp_path)
    for key, a, b in (("lr0.002/ref", 0.9, 0.5), ("lr0.001/big", 0.5, 0.5), ("lr0.004/big", 0.5, 0.9)):
        for s in range(3):
            r.records[f"{key}@seed{s}"] = {"key": key, "seed": s, "final": {"acc/task_a": a, "acc/task_b": b}}
    for grid in (script.GRID, *script.real()):
        _as_run(r, grid)
    r.save()
    assert list(budget.left_out(tmp_path, every_seed=True)) == ["b"]
    assert list(budget.left_out(tmp_path, every_seed=True, chain="real")) == ["a"]     # at 0.004, its choice


def test_fedmkt_claims_read_the_tasks_their_own_reference_learns_in_every_validation_seed():
    """A claim on the SLMs reads (means, controls) the tasks the heterogeneous Standalone SLMs learn in every
    validation seed at the chosen rate, a claim on the LLM those of the centralized LLM; the tables' means read
    every task not left out."""
    from fedlab.evidence import budget
    from fedlab.evidence.summary import load_table

    mod = load_table("fedmkt")
    folder = mod.SYSTEM.folder
    learnt = {**budget.learnt_in(folder), **budget.learnt_in(folder, "family"),
              **budget.learnt_in(folder, chain="one_to_one"), **budget.learnt_in(folder, chain="real")}
    for kind, reference in mod.REFERENCES.items():
        source = reference if reference in learnt else mod.REFERENCES[mod.FALLBACK[kind]]
        assert mod.claim_tasks(kind) == [t for t in mod.scored() if t in learnt[source]], kind
    assert mod.claim_tasks("slm") != mod.scored()           # the records leave some tasks to the LLM's claims only
    # a run whose models score 1 on the tasks a kind of claim reads and 0 elsewhere: that claim's mean is 1
    run = lambda kind: {"summary": {which: {m: {"tasks": {t: float(t in mod.claim_tasks(kind)) for t in mod.TASKS}}
                                            for m in ("client_0", "client_1", "llm")} for which in ("zero", "final")}}
    claims = mod.claims()
    assert set(mod.KINDS) == {c.claim for c in claims}
    assert mod.KINDS["SLMs: FedMKT above Standalone (homogeneous, S2)"] == "homo_s2"
    assert mod.KINDS["LLM: FedMKT comparable to Centralized, within 2 points (one-to-one, S1)"] == "o2o_llm"
    for c in claims:
        kind = mod.KINDS[c.claim]
        read = {t for ctl in c.controls() for t in ctl.tasks}
        assert read <= set(mod.claim_tasks(kind)), (c.claim, read)
        assert c.fn(run(kind)) == 1.0 and (c.fn_b or c.fn)(run(kind)) == 1.0, c.claim
    mixed = run("slm")["summary"]["final"]["client_0"]
    assert mod.scored_mean(mixed) == len(mod.claim_tasks("slm")) / len(mod.scored())    # the tables' mean


def test_seeds_added_at_one_budget_value_do_not_weigh_for_it_but_the_claims_read_them(tmp_path):
    """The values are compared on the seeds every value holds; seeds added at the chosen value to confirm it
    count toward what its claims read (a task a new seed fails leaves them), not toward the choice."""
    from fedlab.evidence import budget
    from fedlab.evidence.controls import above_chance

    row = Planned("ref", None, ("federation.rounds=1",), "reference")
    learns = lambda prefix: [above_chance("ref", [f"{prefix}ref"], ["a", "b"],
                                          lambda rec, t: rec["final"][f"acc/task_{t}"], lambda t: 0.5, 10)]
    grid = budget.Grid("federation.lr", ("0.005", "0.002"), (row,), learns)
    r = Results(tmp_path / "results.json")

    def put(key, seed, a, b):
        r.records[f"{key}@seed{seed}"] = {"key": key, "seed": seed, "final": {"acc/task_a": a, "acc/task_b": b}}
    for s in range(3):
        put("lr0.005/ref", s, 0.9, 0.9)                  # 6 of 6
        put("lr0.002/ref", s, 0.9, 0.5)                  # 3 of 6
    for s in (4, 5, 6, 7, 8):
        put("lr0.002/ref", s, 0.9, 0.9)                  # five more seeds, all learnt: 13 of 16 over every seed
    put("lr0.005/ref", 3, 0.9, 0.5)                      # one more seed at the chosen value, b not learnt
    _as_run(r, grid)
    assert budget.compared_seeds(r, grid) == [0, 1, 2]
    assert budget.cells(r, grid) == {"0.005": (6, 6, 4), "0.002": (3, 6, 8)}
    assert budget.chosen(r, grid) == "0.005"
    assert budget.learnt(r, grid) == {"ref": ("a",)}     # seed 3 fails b: the claims leave it
    text = "\n".join(budget.section(r, grid, "Toy"))
    assert "cells that clear the bar (seeds 0, 1, 2)" in text and "compared on the seeds every row holds" in text


def test_a_metric_computed_outside_the_pin_agrees_within_rounding_and_every_other_bit_for_bit():
    """Floe's cluster silhouette (scikit-learn on numpy's BLAS, which follows the CPU) differs in its last digits
    between machine kinds: a spot-check and a merge take it as the same number within 1e-9, relative; a metric
    torch computes under the pin must still be equal to the bit."""
    from fedlab.evidence.merge import differing
    from fedlab.evidence.spotcheck import agree, compare

    s, s_other_kind = 0.23638520980230493, 0.23638520980230485
    assert agree("server/clusters/silhouette", s, s_other_kind)
    assert not agree("server/clusters/silhouette", s, s + 1e-6)
    assert not agree("acc/mean", 0.6133333333333334, 0.6133333333333335)
    assert not agree("server/clusters/silhouette", None, 0.0) and agree("server/clusters/silhouette", None, None)
    rec = {"final": {"server/clusters/silhouette": s, "acc/mean": 0.5}}
    assert compare(rec, {"server/clusters/silhouette": s_other_kind, "acc/mean": 0.5}) == []
    assert differing(rec, {"final": {"server/clusters/silhouette": s_other_kind, "acc/mean": 0.5}}) == []
    assert differing(rec, {"final": {"server/clusters/silhouette": 0.3, "acc/mean": 0.5}}) == [
        "final server/clusters/silhouette"]


@pytest.mark.parametrize("system", ["fedmkt", "fedproxy"])
def test_a_budget_on_held_validation_trains_each_reference_on_the_tables_rows(system):
    """budget.held_validation: every reference row of the first grid trains on the same number of rows a task as
    the row scored on its test sets, and is validated on 300 rows of every task the held-out population has room
    for (32 held out of the training rows of the others)."""
    from collections import Counter

    from fedlab.data.federated import build_federated_data, validation_sources
    from fedlab.evidence.summary import load_table

    grid = load_table(system, script="budget").GRID
    for row in grid.rows:
        val = row.resolve(0, (*grid.overrides(row, grid.values[0]), *grid.validation)).data
        test = row.resolve(0, grid.overrides(row, grid.values[0])).data
        trained = [Counter(e.task for e in build_federated_data(c, 0).pooled_train()) for c in (val, test)]
        assert trained[0] == trained[1], row.key
        sizes = {t: len(v) for t, v in build_federated_data(val, 0).test.items()}
        assert sizes == {t: 300 if w == "held" else 32 for t, w in validation_sources(val).items()}, row.key
        assert Counter(validation_sources(val).values())["held"] >= 4, row.key


def test_a_budget_page_names_the_tasks_whose_validation_answers_are_not_in_their_test_sets_shares(tmp_path):
    """`answer_skew`: paraphrase's held rows drawn in order are nearly all "no" against half of its test set, and
    the page's section says so; sentiment's held rows are near its test set's shares and are not named; rows
    scored on their test sets name nothing."""
    from fedlab.evidence import budget

    data = ("data.tasks=[sentiment,paraphrase]", "data.train_per_task=40", "data.test_per_task=300")
    held = budget.held_validation(300, 8)
    grid = budget.Grid("federation.lr", ("0.002",), (Planned("ref", None, data, "R"),), lambda prefix: [],
                       validation=held)
    skew = budget.answer_skew(grid)
    assert list(skew) == ["paraphrase"] and skew["paraphrase"][0] == "no"
    assert skew["paraphrase"][1] > 0.9 and abs(skew["paraphrase"][2] - 0.5) < 0.05
    text = "\n".join(budget.section(Results(tmp_path / "results.json"), grid, "R"))
    assert '**paraphrase**: 96 % "no" (its test set: 50 %)' in text
    assert budget.answer_skew(dataclasses.replace(grid, validation=())) == {}


def test_a_budget_page_says_when_the_chosen_value_is_an_end_of_its_grid():
    """A number chosen at either end of a grid of three or more numbers is told as such (the best may lie beyond
    it); one inside the grid, a grid of two, values that are not numbers (a model family), or a choice whose every
    cell clears the bar say nothing."""
    from fedlab.evidence import budget

    grid = lambda *values: budget.Grid("federation.lr", values, (), lambda prefix: [])
    assert "largest value: a larger one was not tried" in budget._at_edge(grid("0.005", "0.002", "0.01"), "0.01")
    assert "smallest value: a smaller one was not tried" in budget._at_edge(grid("0.005", "0.002", "0.01"), "0.002")
    assert budget._at_edge(grid("0.005", "0.002", "0.01"), "0.005") == ""
    assert budget._at_edge(grid("0.005", "0.002"), "0.002") == ""
    assert budget._at_edge(grid("tiny-opt", "tiny-bloom", "tiny-gpt2"), "tiny-opt") == ""
    assert budget._at_edge(grid("0.005", "0.002", "0.01"), "0.01", (5, 6)) != ""
    assert budget._at_edge(grid("0.005", "0.002", "0.01"), "0.01", (6, 6)) == ""    # nothing beyond can do better


def test_a_budget_page_says_why_each_task_is_validated_on_training_rows(tmp_path):
    """A grid drawn in the test sets' answer shares names paraphrase apart, as the task whose fresh rows cannot
    fill those shares; a task whose population leaves no room at all (recall) keeps that reason in both draws."""
    from fedlab.evidence import budget

    data = ("data.tasks=[recall,sentiment,paraphrase]", "data.train_per_task=40", "data.test_per_task=300")
    grid = lambda kept: budget.Grid("federation.lr", ("0.002",), (Planned("ref", None, data, "R"),),
                                    lambda prefix: [], validation=budget.held_validation(300, 8, keeps_shares=kept))
    kept = "\n".join(budget.section(Results(tmp_path / "results.json"), grid(True), "R"))
    assert ("none asking what a test item asks, in its answer shares; on rows held out of the training data for "
            "recall, whose test sets ask about nearly all of those people, and for paraphrase, whose fresh rows "
            "cannot fill the test set's answer shares;") in kept
    drawn = "\n".join(budget.section(Results(tmp_path / "results.json"), grid(False), "R"))
    assert ("none asking what a test item asks; on rows held out of the training data for recall, whose test sets "
            "ask about nearly all of those people;") in drawn


def test_a_grid_whose_held_out_rows_keep_the_shares_scores_recall_in_its_test_sets_shares(tmp_path):
    """`held_validation(holdout_keeps_shares=True)`: recall, validated on rows held out of its training data, is
    drawn in its test set's answer shares, so the page names no skew on it and says how those rows were drawn;
    without it the held-out rows lean to the training population's answers and the page names recall."""
    from fedlab.evidence import budget

    data = ("data.tasks=[recall,sentiment]", "data.train_per_task=120", "data.test_per_task=300")
    grid = lambda kept: budget.Grid("federation.lr", ("0.002",), (Planned("ref", None, data, "R"),), lambda prefix: [],
                                    validation=budget.held_validation(300, 32, keeps_shares=True,
                                                                      holdout_keeps_shares=kept))
    assert "data.validation_holdout_keeps_shares=true" in grid(True).validation
    assert "data.validation_holdout_keeps_shares=true" not in grid(False).validation
    assert "recall" in budget.answer_skew(grid(False), points=5.0)
    assert "recall" not in budget.answer_skew(grid(True), points=5.0)
    text = "\n".join(budget.section(Results(tmp_path / "results.json"), grid(True), "R"))
    assert ("on rows held out of the training data, in the test set's answer shares, for recall, whose test sets "
            "ask about nearly all of those people") in text


def test_a_records_staleness_is_resolved_once_until_the_record_is_replaced(tmp_path, monkeypatch):
    """`Results.why_stale` resolves a row's config once per seed however often a page asks (marks, verdicts,
    what the claims lack), and asks again of a record that a run replaced."""
    from fedlab.evidence import records as R
    from fedlab.evidence.page import stale_seeds

    r = records(tmp_path, {"row": [0.5, 0.6]})
    p = Planned("row", None)
    resolved = []
    monkeypatch.setattr(Planned, "resolve", lambda self, seed, extra=(): resolved.append(seed) or seed)
    monkeypatch.setattr(R, "stale_reason", lambda rec, cfg: "stale" if rec["final"]["acc/mean"] < 0.55 else None)
    assert r.stale_and_outdated([p]) == ({"row"}, set()) and r.stale([p]) == {"row"} and r.outdated([p]) == set()
    assert stale_seeds(r, [p], {"row"}) == {"row": [0]}
    assert sorted(resolved) == [0, 1]
    r.records["row@seed0"] = {"key": "row", "seed": 0, "final": {"acc/mean": 0.7}}       # seed 0 run again
    assert r.stale([p]) == set() and sorted(resolved) == [0, 0, 1]
    r.records["row@seed1"]["final"]["acc/mean"] = 0.5                                  # changed in place
    assert r.stale([p]) == {"row"} and sorted(resolved) == [0, 0, 1, 1]


def test_the_machines_line_counts_each_kinds_records_of_the_plans_rows(tmp_path):
    from fedlab import numerics
    from fedlab.evidence.page import kinds_line

    by_kind = {kind: f for f, kind in numerics.measured_fingerprints().items()}
    intel = by_kind["Intel Xeon (AVX-512)"]
    r = Results(tmp_path / "results.json")
    assert kinds_line(r) == ""
    for i, fp in enumerate([by_kind[numerics.REFERENCE_KIND]] * 3 + [intel, "unmeasured"]):
        r.records[f"a@seed{i}"] = {"key": "a", "seed": i, "environment": {"numerics_fingerprint": fp}}
    r.records["gone@seed0"] = {**r.records["a@seed3"], "key": "gone"}
    line = kinds_line(r, {"a"})
    assert line.startswith(f"**Machines**: 3 records made on {numerics.REFERENCE_KIND}, 1 on Intel Xeon (AVX-512), "
                           "1 with numerics no measured kind computes. ")
    assert kinds_line(r).startswith(f"**Machines**: 3 records made on {numerics.REFERENCE_KIND}, 2 on Intel")


def test_the_spot_check_line_names_the_kind_whose_records_it_drew_from(tmp_path):
    from fedlab.evidence.page import spot_check_line

    r = Results(tmp_path / "results.json")
    r.meta["spot_check"] = {"commit": "a" * 40, "date": "DAY", "max_seconds": 60, "kind": "Intel Xeon (AVX-512)",
                            "pairs": [{"key": "t/x", "seed": 0, "differ": []}]}
    assert spot_check_line(r).startswith("Spot-check: 1 recorded (row, seed) pairs drawn at random among the records "
                                         "made on Intel Xeon (AVX-512) of ≤ 60 s and re-run at aaaaaaa on DAY")
    del r.meta["spot_check"]["kind"]        # an outcome from before kinds were recorded
    assert "drawn at random among records of ≤ 60 s and" in spot_check_line(r)


def test_a_claim_whose_rows_two_kinds_made_says_so(tmp_path):
    from fedlab import numerics
    from fedlab.evidence.claims import kind_words

    by_kind = {kind: f for f, kind in numerics.measured_fingerprints().items()}
    ref, intel = by_kind[numerics.REFERENCE_KIND], by_kind["Intel Xeon (AVX-512)"]
    r = Results(tmp_path / "results.json")
    for row, fps in (("a", [ref, ref, ref]), ("b", [ref, ref, intel]), ("c", [intel] * 3)):
        for s, fp in enumerate(fps):
            r.records[f"{row}@seed{s}"] = {"key": row, "seed": s, "environment": {"numerics_fingerprint": fp}}
    assert kind_words(r, ["a", "b"], {0, 1}) == ""                      # seed 2 is not read
    assert kind_words(r, ["a", "b"], {0, 1, 2}) == (f"made on several machine kinds: `a` ({numerics.REFERENCE_KIND}), "
                                                    f"`b` ({numerics.REFERENCE_KIND} + Intel Xeon (AVX-512))")
    assert kind_words(r, ["c", "c"], {0, 1, 2}) == ""
    assert kind_words(r, ["a", "c"], {0}).endswith("`c` (Intel Xeon (AVX-512))")
