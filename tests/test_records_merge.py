"""`make_tables.py --merge-from`: another clone's records of a table join this one's only when this table would
accept them as its own, and a (row, seed) both hold is compared rather than overwritten."""
from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import PICO
from fedlab.runner import Planned, Results, run_table

ROWS = [Planned("t/fedavg", None, (*PICO, "method.name=fedavg"), "FedAvg", "t"),
        Planned("t/median", None, (*PICO, "method.name=fedavg", "method.aggregator=median"), "median", "t")]


def _head() -> str:
    from fedlab.provenance import git_state

    commit = git_state()["commit"]
    if commit is None:
        pytest.skip("not a git checkout: records cannot name a commit")
    return commit


def _record(row: Planned, seed: int, acc: float, run_id: str, **change) -> dict:
    """A record as `execute` makes it, current for the row's config on this machine (no run needed)."""
    from fedlab.config import load_config
    from fedlab.numerics import current_fingerprint
    from fedlab.runtime.federation import run_key

    cfg = load_config(row.config, [*row.overrides, f"seed={seed}"])
    rec = {"key": row.key, "label": row.label, "seed": seed, "config_hash": run_key(cfg),
           "method_config": json.loads(json.dumps(dataclasses.asdict(cfg.method), default=str)),
           "final": {"acc/mean": acc}, "models": {}, "run_id": run_id, "git": _head(),
           "environment": {"numerics_fingerprint": current_fingerprint()}}
    rec.update(change)
    return rec


def _write(path, records: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"_meta": {"parent_run_id": "theirs"}, **records}))


def test_merge_takes_what_this_table_would_accept_and_compares_what_both_hold(tmp_path):
    from fedlab.records_merge import merge_records

    fa, fm = ROWS
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    mine = {"t/fedavg@seed0": _record(fa, 0, 0.5, "a0"),                         # the same run as theirs
            "t/fedavg@seed1": _record(fa, 1, 0.6, "mine1"),                      # current, same numbers
            "t/fedavg@seed2": _record(fa, 2, 0.7, "mine2"),                      # current, other numbers
            "t/fedavg@seed3": _record(fa, 3, 0.1, "old3", config_hash="0" * 16)}  # stale here: replaced
    _write(here, mine)
    stale_numerics = {"numerics_fingerprint": "another-machine"}
    theirs = {"t/fedavg@seed0": _record(fa, 0, 0.5, "a0"),
              "t/fedavg@seed1": _record(fa, 1, 0.6, "their1"),
              "t/fedavg@seed2": _record(fa, 2, 0.75, "their2"),
              "t/fedavg@seed3": _record(fa, 3, 0.8, "their3"),
              "t/median@seed0": _record(fm, 0, 0.4, "p0"),                                   # new: added
              "t/median@seed1": _record(fm, 1, 0.4, "p1", git="f" * 40),                     # unknown commit
              "t/median@seed2": _record(fm, 2, 0.4, "p2", git=_head() + "+dirty"),           # uncommitted
              "t/median@seed3": _record(fm, 3, 0.4, "p3", config_hash="1" * 16),            # another config
              "t/median@seed4": _record(fm, 4, 0.4, "p4", environment=stale_numerics),      # other numerics
              "t/gone@seed0": {**_record(fa, 0, 0.4, "g0"), "key": "t/gone"}}                # no such row
    _write(there, theirs)
    results = Results(here)
    report = merge_records(results, there.parent, ROWS)
    assert report.added == ["t/median@seed0"] and report.replaced == ["t/fedavg@seed3"]
    assert report.same == ["t/fedavg@seed0"] and report.agree == ["t/fedavg@seed1"]
    assert report.differ == {"t/fedavg@seed2": ["acc/mean"]}
    reasons = {k: r for r, keys in report.skipped.items() for k in keys}
    assert set(reasons) == {"t/median@seed1", "t/median@seed2", "t/median@seed3", "t/median@seed4", "t/gone@seed0"}
    assert "does not hold" in reasons["t/median@seed1"] and "uncommitted" in reasons["t/median@seed2"]
    assert "another config" in reasons["t/median@seed3"] and "other numerics" in reasons["t/median@seed4"]
    saved = json.loads(here.read_text())
    assert saved["t/median@seed0"]["run_id"] == "p0" and saved["t/fedavg@seed3"]["run_id"] == "their3"
    assert saved["t/fedavg@seed2"]["run_id"] == "mine2" and saved["t/fedavg@seed1"]["run_id"] == "mine1"
    assert "t/median@seed1" not in saved and "t/gone@seed0" not in saved
    text = "\n".join(report.lines())
    assert "1 added, 1 replaced a stale record, 1 already here, 1 held here too with the same numbers, " \
           "1 held here with OTHER numbers, 5 skipped" in text
    assert "t/fedavg@seed2: this file's record kept; the incoming run's acc/mean differ" in text
    # --only narrows the rows a merge may fill
    (tmp_path / "fresh").mkdir()
    fresh = Results(tmp_path / "fresh" / "results.json")
    only = merge_records(fresh, there, ROWS[:1])
    assert only.added == ["t/fedavg@seed0", "t/fedavg@seed1", "t/fedavg@seed2", "t/fedavg@seed3"]
    assert len(only.skipped["no row of this table by that key (or outside --only)"]) == 6


def test_merge_keeps_this_files_meta_and_brings_a_dirty_records_patch_when_allowed(tmp_path):
    from fedlab.records_merge import merge_records

    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    here.parent.mkdir()
    here.write_text(json.dumps({"_meta": {"parent_run_id": "mine"}}))
    dirty = _record(ROWS[0], 0, 0.5, "d0", git=_head() + "+dirty", diff="diffs/abc.patch")
    _write(there, {"t/fedavg@seed0": dirty})
    (there.parent / "diffs").mkdir()
    (there.parent / "diffs" / "abc.patch").write_text("--- a\n+++ b\n")
    assert merge_records(Results(here), there, ROWS).added == []
    results = Results(here)
    assert merge_records(results, there, ROWS, allow_dirty=True).added == ["t/fedavg@seed0"]
    assert (here.parent / "diffs" / "abc.patch").read_text() == "--- a\n+++ b\n"
    assert json.loads(here.read_text())["_meta"] == {"parent_run_id": "mine"}   # this store's parent run stays


def test_merge_from_on_the_command_line(tmp_path, capsys):
    there = tmp_path / "there" / "results.json"
    _write(there, {"t/fedavg@seed0": _record(ROWS[0], 0, 0.5, "a0"), "t/fedavg@seed1": _record(ROWS[0], 1, 0.7, "a1")})
    render = lambda r: f"fedavg {r.final('t/fedavg', 'acc/mean')}"
    here = tmp_path / "here"
    here.mkdir()
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(there.parent), "--render-only"]) == 0
    assert (here / "RESULTS.md").read_text() == "fedavg 0.600 ± 1.271"
    assert "[fedlab] merge from" in capsys.readouterr().err
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(tmp_path / "nowhere"), "--render-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err and "nowhere" in err     # one line, no traceback
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(here), "--render-only"]) == 2
    assert "this table's own results.json" in capsys.readouterr().err
