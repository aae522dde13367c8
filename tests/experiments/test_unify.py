"""`make_tables.py --mixed`: the rows whose seeds were made at several commits, where to re-make which seeds,
and the commands (fedlab.evidence.unify)."""
from __future__ import annotations

import json
import sys

import pytest

from fedlab.evidence.records import ROOT
from fedlab.evidence.runner import Planned, run_table, script_name
from fedlab.evidence.unify import EXACT_ONLY_SINCE, commands, mixed_rows, report, takes_exact_only

A, B, C = "a" * 40, "b" * 40, "c" * 40


@pytest.fixture(autouse=True)
def _worktrees_record_this_kind(monkeypatch):
    """Every commit's code records this machine's kind, as on the reference kind (`unify.records_kind_at`); the
    tests of another kind say otherwise."""
    from fedlab.evidence import unify

    monkeypatch.setattr(unify, "records_kind_at", lambda commit: True)


def _recs(row: str, made: dict[int, tuple[str | None, float]], **metrics) -> dict:
    """Records of `row`: seed → (commit, recorded seconds); `metrics` become every record's final metrics."""
    return {f"{row}@seed{s}": {"key": row, "seed": s, "git": g, "seconds": sec, "final": dict(metrics)}
            for s, (g, sec) in made.items()}


def test_the_seeds_made_elsewhere_are_re_made_at_the_commit_of_most_seeds():
    records = {**_recs("t/x", {0: (A, 10), 1: (A, 10), 2: (A, 10), 3: (B, 30), 4: (B, 40)}),
               **_recs("t/one", {0: (A, 5), 1: (A, 5)})}
    (m,) = mixed_rows(records, ["t/x", "t/one"])
    assert (m.row, m.commit, m.seeds, m.seconds) == ("t/x", A, (3, 4), 70)
    assert m.commits == {A: 3, B: 2}
    assert mixed_rows(records, ["t/one"]) == []              # only the rows asked for (the plan, --only)


def test_a_tie_goes_to_the_commit_whose_missing_seeds_cost_least_and_dirty_commits_are_never_targets():
    records = {**_recs("t/tie", {0: (A, 10), 1: (A, 10), 2: (B, 100), 3: (B, 100)}),
               **_recs("t/dirty", {0: (A + "+dirty", 1), 1: (A + "+dirty", 1), 2: (A + "+dirty", 1), 3: (C, 50)}),
               **_recs("t/none", {0: (None, 1), 1: (A + "+dirty", 1)})}
    got = {m.row: m for m in mixed_rows(records, ["t/tie", "t/dirty", "t/none"])}
    # B's seeds took 200 s, A's 20 s: re-making A's at B is the cheaper (B also sorts after A)
    assert (got["t/tie"].commit, got["t/tie"].seeds, got["t/tie"].seconds) == (B, (0, 1), 20)
    assert (got["t/dirty"].commit, got["t/dirty"].seeds) == (C, (0, 1, 2))
    assert got["t/none"].commit is None and got["t/none"].seeds == (0, 1)
    order = [m.row for m in mixed_rows(records, ["t/tie", "t/dirty", "t/none"])]
    assert order == ["t/dirty", "t/tie", "t/none"]           # cheapest first (3 s, 20 s), no target last


def test_a_target_holds_only_current_records_that_log_every_kind_of_metric_the_others_log():
    records = {**_recs("t/old", {0: (A, 1), 1: (A, 1), 2: (B, 1)}),
               **_recs("t/less", {0: (A, 1), 1: (A, 1), 2: (B, 1)})}
    for s in (0, 1):                       # A's records of t/less log no answer share; B's does
        records[f"t/less@seed{s}"]["final"] = {"acc/client_3": 0.5}
    records["t/less@seed2"]["final"] = {"acc/client_7": 0.5, "share/top": 0.9}
    stale_at_a = lambda rec: not (rec["key"] == "t/old" and rec["git"] == A)
    got = {m.row: m for m in mixed_rows(records, ["t/old", "t/less"], current=stale_at_a)}
    assert (got["t/old"].commit, got["t/old"].seeds) == (B, (0, 1))      # A's records are not current here
    assert (got["t/less"].commit, got["t/less"].seeds) == (B, (0, 1))    # A does not log share/top
    # another client's index is the seed's draw, not another kind of metric
    records["t/less@seed2"]["final"] = {"acc/client_7": 0.5}
    assert {m.row: m.commit for m in mixed_rows(records, ["t/less"])} == {"t/less": A}
    # no commit qualifies: the whole row is re-run at HEAD
    (m,) = mixed_rows(records, ["t/old"], current=lambda rec: False)
    assert m.commit is None and m.seeds == (0, 1, 2)


def test_the_commands_name_the_row_exactly_where_that_commits_runner_can():
    records = _recs("t/fedavg", {0: (A, 1), 1: (A, 1), 2: (B, 1)})
    (m,) = mixed_rows(records, ["t/fedavg"])
    keys = ["t/fedavg", "t/fedavg_random", "t/median"]
    exact = commands(m, "experiments/t/budget.py", "experiments/t/budget", keys, exact=True)
    assert exact == [f"[ -d ../wt-aaaaaaa ] || git worktree add --detach ../wt-aaaaaaa {A}",
                     "(cd ../wt-aaaaaaa && PYTHONPATH=$PWD python experiments/t/budget.py --only 't/fedavg$' "
                     "--seeds 2 --rerun)",
                     "python experiments/t/budget.py --merge-from ../wt-aaaaaaa/experiments/t/budget "
                     "--only 't/fedavg$' --render-only"]
    prefix = commands(m, "experiments/t/budget.py", "experiments/t/budget", keys, exact=False)
    assert "--only 't/fedavg' --seeds 2" in prefix[2]
    assert prefix[1] == "# aaaaaaa reads --only as a prefix: it also runs t/fedavg_random at seeds 2"
    assert prefix[3].endswith("--only 't/fedavg$' --render-only")     # the merge runs at HEAD: exact


def test_whether_a_commits_runner_takes_exact_rows_is_read_from_git():
    from fedlab.evidence.provenance import run_git

    if run_git(ROOT, "cat-file", "-e", f"{EXACT_ONLY_SINCE}^{{commit}}").returncode != 0:
        pytest.skip("this checkout does not hold the project's history")
    # the constant names the commit whose runner began to read a trailing $ as one whole key
    exact = 'key == pattern[:-1] if pattern.endswith("$")'
    assert exact in run_git(ROOT, "show", f"{EXACT_ONLY_SINCE}:fedlab/runner.py").stdout
    assert exact not in run_git(ROOT, "show", f"{EXACT_ONLY_SINCE}~1:fedlab/runner.py").stdout
    assert takes_exact_only(EXACT_ONLY_SINCE) and takes_exact_only("HEAD")
    assert not takes_exact_only(f"{EXACT_ONLY_SINCE}~1")
    assert not takes_exact_only("0" * 40)                      # a commit git does not know


def test_mixed_on_the_command_line_lists_and_writes_nothing(tmp_path, capsys):
    rows = [Planned("t/x", None, (), "x", "t"), Planned("t/y", None, (), "y", "t")]
    records = {**_recs("t/x", {0: (A, 600), 1: (A, 600), 2: (B, 1200)}), **_recs("t/y", {0: (A, 6)})}
    (tmp_path / "results.json").write_text(json.dumps(records))
    before = (tmp_path / "results.json").read_text()
    # records another config made: the runner's currency check sees them as such and no commit qualifies
    assert run_table(tmp_path, lambda: rows, lambda r: "page", ["--mixed"]) == 0
    out = capsys.readouterr().out
    assert "t/x: seeds made at aaaaaaa × 2, bbbbbbb × 1; no commit made them cleanly" in out
    assert f"python {script_name(tmp_path)} --only 't/x$' --seeds 0,1,2 --rerun" in out and "t/y" not in out
    # no seed is re-made at its commit; the whole row's 2400 s are re-run at HEAD
    assert out.rstrip().endswith("1 of 2 rows mix commits; re-making the seeds listed at their commits takes "
                                 "about 0.0 h of recorded run time, and re-running the row no commit can take "
                                 "whole at HEAD about 0.7 h")
    assert not (tmp_path / "RESULTS.md").exists() and (tmp_path / "results.json").read_text() == before
    assert run_table(tmp_path, lambda: rows, lambda r: "page", ["--mixed", "--only", "t/y"]) == 0
    assert capsys.readouterr().out.strip() == "every row was made at one commit"


def test_the_listing_totals_the_time_and_says_when_a_commit_is_missing_here():
    records = {**_recs("t/x", {0: (A, 3600), 1: (A, 3600), 2: (B, 5400)})}
    lines = report(records, ["t/x"], "experiments/t/make_tables.py", "experiments/t")
    assert lines[0] == "t/x: seeds made at aaaaaaa × 2, bbbbbbb × 1; re-make seeds 2 at aaaaaaa (recorded 90.0 min)"
    assert lines[1] == "  aaaaaaa is not in this checkout: git fetch it first"
    assert lines[-1] == ("1 of 1 rows mix commits; re-making the seeds listed at their commits takes about 1.5 h "
                         "of recorded run time")


def test_the_script_named_is_the_running_one_beside_its_table_folder(monkeypatch):
    budget = ROOT / "experiments" / "fedmkt" / "budget.py"
    monkeypatch.setattr(sys, "argv", [str(budget)])
    assert script_name(budget.parent / "budget") == "experiments/fedmkt/budget.py"
    assert script_name(budget.parent) == "experiments/fedmkt/budget.py"
    # a runner elsewhere (pytest, a wrapper) does not name itself: the table's own script is named
    monkeypatch.setattr(sys, "argv", [str(ROOT / ".venv" / "lib" / "pytest" / "__main__.py")])
    assert script_name(ROOT / "experiments" / "elsa") == "experiments/elsa/make_tables.py"


def test_a_row_with_no_clean_commit_is_told_to_re_run_at_head():
    records = _recs("t/z", {0: (None, 1), 1: (A + "+dirty", 1)})
    lines = report(records, ["t/z"], "experiments/t/make_tables.py", "experiments/t")
    assert lines[0] == ("t/z: seeds made at outside git × 1, aaaaaaa+dirty × 1; no commit made them cleanly, current "
                        "here and logging what the others log: re-run the row at HEAD (python "
                        "experiments/t/make_tables.py --only 't/z$' --seeds 0,1 --rerun)")


def test_the_total_counts_the_rows_re_run_whole_at_head_apart_from_the_seeds_re_made_at_their_commits():
    records = {**_recs("t/x", {0: (A, 3600), 1: (A, 3600), 2: (B, 1800)}),
               **_recs("t/z", {0: (None, 3600), 1: (A + "+dirty", 1800)}),
               **_recs("t/w", {0: (None, 900), 1: (C + "+dirty", 900)})}
    lines = report(records, ["t/x", "t/z", "t/w"], "experiments/t/make_tables.py", "experiments/t")
    assert lines[-1] == ("3 of 3 rows mix commits; re-making the seeds listed at their commits takes about 0.5 h "
                         "of recorded run time, and re-running the 2 rows no commit can take whole at HEAD about "
                         "2.0 h")


def test_on_another_kind_no_commit_whose_code_mislabels_its_kind_is_a_target(monkeypatch):
    from fedlab.evidence import unify

    records = _recs("t/x", {0: (A, 10), 1: (A, 10), 2: (A, 10), 3: (B, 30), 4: (B, 40)})
    monkeypatch.setattr(unify, "records_kind_at", lambda commit: commit == B)
    (m,) = mixed_rows(records, ["t/x"])
    assert (m.commit, m.seeds) == (B, (0, 1, 2))
    monkeypatch.setattr(unify, "records_kind_at", lambda commit: False)
    (m,) = mixed_rows(records, ["t/x"])
    assert (m.commit, m.seeds) == (None, (0, 1, 2, 3, 4))     # no target: the whole row at HEAD


def test_code_records_this_kind_from_kinds_since_on_another_kind(monkeypatch):
    """On the reference kind every commit's code labels its runs right; on another, only commits holding
    `KINDS_SINCE`."""
    import subprocess

    from fedlab import numerics
    from fedlab.evidence import unify

    monkeypatch.undo()      # the real `records_kind_at`, not the autouse fixture's
    older = subprocess.run(["git", "rev-parse", f"{unify.KINDS_SINCE}~1"], cwd=ROOT, capture_output=True, text=True)
    if older.returncode:
        pytest.skip("the checkout does not hold the history around KINDS_SINCE")
    monkeypatch.delenv(numerics.JUDGE_ENV, raising=False)
    for reference in (True, False):
        monkeypatch.setattr(numerics, "is_reference_kind", lambda reference=reference: reference)
        assert unify.records_kind_at(unify.KINDS_SINCE) and unify.records_kind_at(older.stdout.strip()) is reference
        assert unify.records_kind_at(None) is reference
