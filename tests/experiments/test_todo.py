"""`fedlab results --todo`: what the rows a system's claims read still lack, the run time it takes and the
commands that make it (fedlab.evidence.todo)."""
from __future__ import annotations

import shlex

import pytest

from fedlab.evidence import records as R
from fedlab.evidence import todo as T
from fedlab.evidence.records import OTHER_NUMERICS, OUTDATED, Planned, Results

A, B = "a" * 40, "b" * 40


@pytest.fixture(autouse=True)
def _worktrees_record_this_kind(monkeypatch):
    """Every commit's code records this machine's kind, as on the reference kind (`unify.records_kind_at`); the
    tests of another kind say otherwise."""
    from fedlab.evidence import unify

    monkeypatch.setattr(unify, "records_kind_at", lambda commit: True)


class _Results(Results):
    """Records held in memory, not read from a file."""

    def __init__(self, records: dict):
        self.records = records
        self._why = {}


def _recs(row: str, made: dict[int, tuple[str, float]]) -> dict:
    return {f"{row}@seed{s}": {"key": row, "seed": s, "git": g, "seconds": sec, "final": {"acc/mean": 0.5}}
            for s, (g, sec) in made.items()}


@pytest.fixture()
def stale_at(monkeypatch):
    """`stale_reason` as a table: {(row, seed): reason}; every other record is current."""
    table: dict[tuple[str, int], str] = {}
    monkeypatch.setattr(R, "stale_reason", lambda rec, cfg: table.get((rec["key"], rec["seed"])))
    monkeypatch.setattr(Planned, "resolve", lambda self, seed, extra=(): None)
    return table


def test_missing_and_not_current_seeds_are_the_runs_to_make_estimated_from_the_rows_median_run_time(stale_at):
    records = {**_recs("t/a", {0: (A, 10), 1: (A, 30), 2: (A, 20)}),
               **_recs("t/b", {s: (A, 100) for s in range(5)}),
               **_recs("t/done", {s: (A, 1) for s in range(5)})}
    stale_at[("t/b", 1)] = OUTDATED
    stale_at[("t/b", 3)] = OTHER_NUMERICS
    plan = [Planned(k, None) for k in ("t/a", "t/b", "t/done", "t/new")]
    got = {x.row: x for x in T.lacks(_Results(records), plan, ["t/a", "t/b", "t/done", "t/new", "t/gone"], head=A)}
    assert (got["t/a"].missing, got["t/a"].to_run, got["t/a"].seconds) == ((3, 4), (3, 4), 40)   # median 20 s
    assert got["t/a"].at is None                         # its seeds were made at HEAD: made there
    assert got["t/b"].stale == {1: OUTDATED, 3: OTHER_NUMERICS} and got["t/b"].to_run == (1, 3)
    assert got["t/b"].seconds == 200 and got["t/b"].rerun == ()
    assert not got["t/a"].timed_elsewhere and not got["t/b"].timed_elsewhere     # timed by a current record too
    assert got["t/done"].empty() and not got["t/done"].to_run
    assert got["t/new"].missing == (0, 1, 2, 3, 4) and got["t/new"].seconds is None     # never run: unknown
    assert not got["t/gone"].planned and not got["t/gone"].empty()
    assert [x.row for x in T.lacks(_Results(records), plan, ["t/done", "t/a"], target=3, head=A)] == ["t/done", "t/a"]
    assert T.lacks(_Results(records), plan, ["t/a"], target=3, head=A)[0].empty()
    records["t/done@seed2"]["git"] = A + "+dirty"
    records["t/done@seed4"]["git"] = None
    (done,) = T.lacks(_Results(records), plan, ["t/done"], head=A)
    assert done.unclean == (2, 4) and not done.empty() and not done.to_run


def test_each_row_is_made_where_it_ends_at_one_clean_commit(stale_at):
    """Missing seeds of a row made at one older commit are made there; a row with a record not current, or with
    current seeds at several commits, is made whole at HEAD (its current seeds made elsewhere re-made)."""
    H = "h" * 40
    records = {**_recs("t/old", {0: (A, 10), 1: (A, 10), 2: (A, 10)}),
               **_recs("t/stale", {0: (A, 10), 1: (B, 10), 2: (H, 10)}),
               **_recs("t/two", {0: (A, 10), 1: (B, 10)})}
    stale_at[("t/stale", 1)] = OUTDATED
    plan = [Planned(k, None) for k in ("t/old", "t/stale", "t/two")]
    got = {x.row: x for x in T.lacks(_Results(records), plan, ["t/old", "t/stale", "t/two"], head=H)}
    assert (got["t/old"].at, got["t/old"].to_run, got["t/old"].rerun) == (A, (3, 4), ())
    assert (got["t/stale"].at, got["t/stale"].rerun, got["t/stale"].to_run) == (None, (0,), (0, 1, 3, 4))
    assert (got["t/two"].at, got["t/two"].rerun, got["t/two"].to_run) == (None, (0, 1), (0, 1, 2, 3, 4))
    assert got["t/old"].seconds == 20 and got["t/two"].seconds == 50
    todo = T.SystemTodo("S", "experiments/s/make_tables.py", list(got.values()), [], "experiments/s",
                        ("t/old", "t/stale", "t/two"))
    lines = T.commands(todo)
    assert lines[:2] == ["python experiments/s/make_tables.py --only 't/stale$' --seeds 0,1,3,4 --rerun",
                         "python experiments/s/make_tables.py --only 't/two$' --seeds 0,1,2,3,4 --rerun"]
    assert lines[2:] == [f"[ -d ../wt-aaaaaaa ] || git worktree add --detach ../wt-aaaaaaa {A}",
                         "(cd ../wt-aaaaaaa && PYTHONPATH=$PWD python experiments/s/make_tables.py --only 't/old' "
                         "--seeds 3,4 --rerun)",
                         "python experiments/s/make_tables.py --merge-from ../wt-aaaaaaa/experiments/s --only "
                         "'t/old$' --render-only"]                # 'aaa…' is no commit git knows: a prefix


def test_rows_that_miss_the_same_seeds_at_one_commit_share_one_worktree_run_and_merge(stale_at):
    """Two rows made at commit A that miss seeds 3 and 4 are made by one run there and one merge; a third row at A
    that misses other seeds, and one at B, get their own."""
    records = {**_recs("t/x", {s: (A, 10) for s in range(3)}), **_recs("t/y", {s: (A, 10) for s in range(3)}),
               **_recs("t/z", {s: (A, 10) for s in range(4)}), **_recs("t/w", {s: (B, 10) for s in range(3)}),
               **_recs("t/xl", {s: (A, 10) for s in range(5)})}
    keys = ("t/x", "t/y", "t/z", "t/w", "t/xl")
    got = T.lacks(_Results(records), [Planned(k, None) for k in keys], list(keys[:4]), head="h" * 40)
    lines = T.commands(T.SystemTodo("S", "experiments/s/make_tables.py", got, [], "experiments/s", keys))
    runs = [line for line in lines if "--rerun" in line]
    assert runs == ["(cd ../wt-aaaaaaa && PYTHONPATH=$PWD python experiments/s/make_tables.py --only 't/x,t/y' "
                    "--seeds 3,4 --rerun)",
                    "(cd ../wt-aaaaaaa && PYTHONPATH=$PWD python experiments/s/make_tables.py --only 't/z' --seeds 4 "
                    "--rerun)",
                    "(cd ../wt-bbbbbbb && PYTHONPATH=$PWD python experiments/s/make_tables.py --only 't/w' --seeds 3,4 "
                    "--rerun)"]
    assert "python experiments/s/make_tables.py --merge-from ../wt-aaaaaaa/experiments/s --only 't/x$,t/y$' " \
           "--render-only" in lines
    # 'aaa…' is no commit git knows, so its runner reads --only as prefixes: t/x also runs t/xl, and says so
    assert "# aaaaaaa reads --only as a prefix: it also runs t/xl at seeds 3,4" in lines
    assert sum(line.startswith("[ -d ../wt-aaaaaaa ]") for line in lines) == 2

def test_a_row_at_several_commits_with_nothing_to_run_names_where_to_re_make_which_seeds(stale_at):
    records = {**_recs("t/mix", {0: (A, 1), 1: (A, 1), 2: (A, 1), 3: (B, 1), 4: (B, 1)}),
               **_recs("t/old", {0: (A, 1), 1: (A, 1), 2: (B, 1), 3: (B, 1), 4: (B, 1)})}
    for s in range(5):
        stale_at[("t/old", s)] = OUTDATED            # every seed re-run at HEAD: one commit after it
    plan = [Planned("t/mix", None), Planned("t/old", None)]
    got = {x.row: x for x in T.lacks(_Results(records), plan, ["t/mix", "t/old"], head=A)}
    assert (got["t/mix"].mixed.commit, got["t/mix"].mixed.seeds, got["t/mix"].to_run) == (A, (3, 4), ())
    assert not got["t/mix"].empty() and got["t/mix"].seconds == 2     # the re-makes' recorded time
    assert got["t/old"].mixed is None and got["t/old"].to_run == (0, 1, 2, 3, 4)
    stale_at[("t/mix", 0)] = OTHER_NUMERICS          # a record not current: the whole row at HEAD instead
    (mix,) = T.lacks(_Results(records), plan, ["t/mix"], head=A)
    assert mix.mixed is None and (mix.rerun, mix.to_run) == ((3, 4), (0, 3, 4))


def test_commands_group_rows_by_their_seeds_and_replace_other_numerics_only_where_a_record_needs_it():
    todo = T.SystemTodo("S", "experiments/s/make_tables.py", [
        T.Lack("r/a", missing=(3, 4)), T.Lack("r/b", missing=(3, 4)),
        T.Lack("r/c", stale={0: OTHER_NUMERICS, 1: OUTDATED}), T.Lack("r/d", stale={0: OUTDATED, 1: OUTDATED}),
        T.Lack("r/e"), T.Lack("r/f", missing=(0,), planned=False)], [])
    assert T.commands(todo) == [
        "python experiments/s/make_tables.py --only 'r/a$,r/b$' --seeds 3,4",
        "python experiments/s/make_tables.py --only 'r/c$' --seeds 0,1 --replace-other-numerics",
        "python experiments/s/make_tables.py --only 'r/d$' --seeds 0,1"]
    # on a machine of no measured kind the commands leave the flag out (the report says why)
    assert T.commands(todo, replace_other=False)[1] == "python experiments/s/make_tables.py --only 'r/c$,r/d$' --seeds 0,1"


def test_the_report_lists_only_rows_that_lack_something_and_the_claims_whose_control_fails():
    done = T.SystemTodo("Done", "x.py", [T.Lack("r/a")], [])
    assert "Every row its claims read holds seeds 0–4" in "\n".join(T.report(done))
    todo = T.SystemTodo("S", "x.py", [T.Lack("r/a"), T.Lack("r/b", missing=(4,), per_seed=7200.0)],
                        [("X > Y", "reference: sentiment in seed 3")])
    text = "\n".join(T.report(todo))
    assert "`r/a`" not in text and "| `r/b` | 4 |  |  | HEAD | 2.0 h |" in text
    dirty = "\n".join(T.report(T.SystemTodo("S", "x.py", [T.Lack("r/c", unclean=(1,))], [])))
    assert "| `r/c` |  |  | 1 made from uncommitted changes or outside git |  |  |" in dirty
    assert "1 of the 2 rows" in text and "about 2.0 h" in text
    assert "- X > Y — reference: sentiment in seed 3" in text


def test_every_printed_command_runs_rows_of_its_tables_plan(capsys, reference_kind, monkeypatch):
    """On the shipped records less every seed-4 record (so every system has runs to make whatever the records
    hold), judged as the reference kind does: each system has its section and commands, and every command it
    prints selects, through the table runner's own row filter, exactly the rows it lists."""
    from fedlab.evidence.runner import select_rows, table_parser
    from fedlab.evidence.scripts import systems

    read = Results._read
    monkeypatch.setattr(Results, "_read", lambda self: {k: v for k, v in read(self).items()
                                                        if k == "_meta" or v.get("seed") != 4})
    assert T.main() == 0
    out = capsys.readouterr().out
    mods = {m.SYSTEM.script: m.SYSTEM for m in systems()}
    assert all(f"## {s.name} (`{script}`)" in out for script, s in mods.items())
    lines = [ln for ln in out.splitlines() if ln.startswith("python experiments/")]
    assert {shlex.split(ln)[1] for ln in lines} == set(mods)
    for line in lines:
        script, *argv = shlex.split(line)[1:]
        args = table_parser().parse_args(argv)
        wanted = [p[:-1] for p in args.only.split(",")]
        assert sorted(p.key for p in select_rows(mods[script].plan(), args.only)) == sorted(wanted)


@pytest.mark.parametrize("name", ["coplms/tune", "fedproxy/server_step"])
def test_a_choice_page_names_the_rows_whose_records_another_config_made(name, tmp_path, reference_kind):
    """The α/β and η_g pages say which rows their choice rests on records another config made (a record whose
    config hash is not the row's), and say nothing where every record is current."""
    import json

    from fedlab.evidence.records import Results, record_key
    from fedlab.evidence.scripts import load_table
    from fedlab.runtime.federation import run_key

    system, script = name.split("/")
    mod = load_table(system, script=script)
    records = json.loads((mod.OUT / "results.json").read_text())
    p = mod.plan()[0]
    rec = dict(records[record_key(p.key, 0)])
    rec["method_config"] = {}                           # only the run key tells
    current = {**rec, "config_hash": run_key(p.resolve(0))}
    rec["config_hash"] = "0" * 10
    for made, named in ((rec, True), (current, False)):
        (tmp_path / "results.json").write_text(json.dumps({record_key(p.key, 0): made}))
        text = mod.render(Results(tmp_path / "results.json"))
        assert ("**Not current**: 1 row holds" in text and f"`{p.key}` (seed 0)" in text) == named
        if named:
            assert "claim" not in text.split("**Not current**")[1].split("\n")[0]     # the page judges no claims


def test_a_page_row_never_run_is_timed_by_the_table_row_it_varies(tmp_path):
    """A budget row with no record of its own (`lr0.001/real/x`) takes the run times of the table's row it varies
    (`real/x`), so the todo does not time a page's slow new rows by its fast old ones; a row with records of its
    own keeps them."""
    page, table = Results(tmp_path / "page.json"), Results(tmp_path / "table.json")
    page.records = {"lr0.002/real/x@seed0": {"key": "lr0.002/real/x", "seed": 0, "seconds": 20.0}}
    table.records = {f"real/x@seed{s}": {"key": "real/x", "seed": s, "seconds": 900.0 + s} for s in range(3)}
    assert T._row_seconds(page, table, "lr0.001/real/x") == [900.0, 901.0, 902.0]
    assert T._row_seconds(page, table, "lr0.002/real/x") == [20.0]
    assert T._row_seconds(page, None, "lr0.001/real/x") == []


def test_the_pages_section_lists_scripts_with_rows_never_run_or_not_current_only():
    pages = [T.PageTodo("experiments/s/budget.py", [f"lr{i}/r" for i in range(8)], {"lr0/x": (0, 2)}, 90.0),
             T.PageTodo("experiments/s/tune.py", [], {}, 60.0)]
    text = "\n".join(T.page_report(pages))
    assert "| `python experiments/s/budget.py` | 8: `lr0/r`, `lr1/r`, `lr2/r`, `lr3/r`, `lr4/r`, `lr5/r`, … " \
           "| 1 (2 seeds) | 2 min |" in text
    assert "tune.py" not in text
    assert "Every row of every such script has records" in "\n".join(T.page_report(pages[1:]))


def test_the_overviews_column_counts_the_runs_and_re_makes_that_todo_totals(stale_at, monkeypatch):
    """The overview's "runs its claims lack" and `--todo` give one figure: missing seeds and the seeds a row's
    re-make at one commit takes, at the rows' recorded run times."""
    import types

    from fedlab.evidence import Claim, Control, System, summary

    records = {**_recs("t/a", {0: (A, 10), 1: (A, 10), 2: (A, 10), 3: (B, 30), 4: (B, 30)}),
               **_recs("t/b", {0: (A, 10), 1: (A, 10), 2: (A, 10)}),
               **_recs("t/ref", {s: (A, 10) for s in range(5)})}
    ref = Control("ref learns", ("t/ref",), ("t",), lambda rec, t: 1.0, lambda rec, t: 0.5, "0.5")
    claim = Claim("a above b", "T1", "61 vs 51 (+10.0)", "t/a", "t/b", lambda rec: rec["final"]["acc/mean"],
                  control=ref)
    plan = [Planned(k, None) for k in ("t/a", "t/b", "t/ref")]
    system = System("Toy", "a toy system", "experiments/toy/make_tables.py", lambda: plan, lambda _r: [claim])
    monkeypatch.setattr(R, "Results", lambda path: _Results(records))
    todo = T.of_system(system)
    assert [(x.row, x.to_run, x.remake) for x in todo.making] == [("t/a", (), (3, 4)), ("t/b", (3, 4), ())]
    assert (todo.runs, todo.seconds) == (4, 80.0)          # t/a's re-make: its recorded 60 s; t/b: 2 × 10 s
    assert summary.row(types.SimpleNamespace(SYSTEM=system))[6] == "4 in 2 rows (about 1 min)"
    for seed in range(3):
        stale_at[("t/b", seed)] = OUTDATED                  # t/b's YAML changed: its runs are another config's
    assert summary.row(types.SimpleNamespace(SYSTEM=system))[6] == \
        "7 in 2 rows (about 2 min; 1 timed by another config's runs)"


def test_an_estimate_from_records_another_config_made_says_so(stale_at):
    """A row whose every timed record another config made (its YAML changed, e.g. more test items) is estimated
    from those runs, and its estimate says whose run time it is."""
    records = _recs("t/c", {s: (A, 600) for s in range(3)})
    for s in range(3):
        stale_at[("t/c", s)] = OUTDATED
    (c,) = T.lacks(_Results(records), [Planned("t/c", None)], ["t/c"], head=A)
    assert c.timed_elsewhere and c.to_run == (0, 1, 2, 3, 4) and c.seconds == 3000
    lines = T.report(T.SystemTodo("S", "experiments/s/make_tables.py", [c], [], "experiments/s", ("t/c",)))
    assert any(line.startswith("| `t/c` |") and line.endswith("| HEAD | 0.8 h (another config's run time) |")
               for line in lines), lines


def test_on_another_kind_a_row_made_by_code_that_mislabels_its_kind_is_made_whole_at_head(stale_at, monkeypatch):
    """Where a worktree at a row's commit would record runs under the reference's fingerprint (code older than
    `unify.KINDS_SINCE` on another kind), the seeds a row misses are not made there: the row is made whole at HEAD."""
    from fedlab.evidence import unify

    H = "h" * 40
    monkeypatch.setattr(unify, "records_kind_at", lambda commit: commit == B)
    records = {**_recs("t/old", {0: (A, 10), 1: (A, 10), 2: (A, 10)}), **_recs("t/new", {0: (B, 10), 1: (B, 10)})}
    plan = [Planned(k, None) for k in ("t/old", "t/new")]
    got = {x.row: x for x in T.lacks(_Results(records), plan, ["t/old", "t/new"], head=H)}
    assert (got["t/old"].at, got["t/old"].rerun, got["t/old"].to_run) == (None, (0, 1, 2), (0, 1, 2, 3, 4))
    assert (got["t/new"].at, got["t/new"].rerun, got["t/new"].to_run) == (B, (), (2, 3, 4))


def test_a_row_made_at_seeds_of_its_own_lacks_those_and_its_command_names_them(stale_at):
    records = {**_recs("t/ctl", {5: (A, 10), 6: (A, 10)}), **_recs("t/a", {s: (A, 10) for s in range(5)})}
    plan = [Planned("t/ctl", None, seeds=(5, 6, 7)), Planned("t/a", None)]
    todo = T.SystemTodo("S", "s.py", T.lacks(_Results(records), plan, ["t/a", "t/ctl"], head=A), [], "s",
                        ("t/ctl", "t/a"))
    got = {x.row: x for x in todo.lacks}
    assert got["t/ctl"].missing == (7,) and got["t/a"].empty()
    assert T.commands(todo) == ["python s.py --only 't/ctl$' --seeds 7"]
    # a copy never run is timed by the row with its config and overrides
    plan = [Planned("t/ctl", "c.yaml", ("x=1",), seeds=(5, 6)), Planned("t/a", "c.yaml", ("x=1",)),
            Planned("t/b", "c.yaml", ("x=2",))]
    records = {**_recs("t/a", {s: (A, 10) for s in range(5)}), **_recs("t/b", {s: (A, 99) for s in range(5)})}
    (ctl,) = T.lacks(_Results(records), plan, ["t/ctl"], head=A)
    assert ctl.missing == (5, 6) and ctl.seconds == 20


def test_rows_no_claim_reads_are_listed_where_not_current_with_no_seed_target_and_their_command(stale_at):
    """A shown-only row with a record not current is re-made; one that merely holds fewer than five seeds, or a
    row a claim reads, is not listed among them."""
    records = {**_recs("t/claim", {s: (A, 10) for s in range(5)}), **_recs("t/old", {0: (A, 60), 1: (A, 60)}),
               **_recs("t/few", {0: (A, 10), 1: (A, 10)})}
    stale_at[("t/old", 1)] = OUTDATED
    stale_at[("t/claim", 2)] = OUTDATED
    plan = [Planned(k, None) for k in ("t/claim", "t/old", "t/few")]
    shown = T.shown_rows(_Results(records), plan, ["t/claim"])
    assert [(x.row, x.to_run) for x in shown] == [("t/old", (0, 1))]
    todo = T.SystemTodo("S", "s.py", [T.Lack("t/claim")], [], "s", tuple(p.key for p in plan), shown)
    text = "\n".join(T.report(todo))
    assert "whose records are not current (1; about 2 min; not counted above): `t/old` (0,1)." in text
    assert "python s.py --only 't/old$' --seeds 0,1 --rerun" in text
    assert "Rows no claim reads" not in "\n".join(T.report(T.SystemTodo("S", "s.py", [T.Lack("t/claim")], [])))
    # and after the rows a claim reads, where those lack something
    todo.lacks = [T.Lack("t/claim", missing=(4,), per_seed=10.0)]
    assert "`t/old` (0,1)." in "\n".join(T.report(todo))
