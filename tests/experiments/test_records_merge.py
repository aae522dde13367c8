"""`make_tables.py --merge-from`: another clone's records of a table join this one's only when this table would
accept them as its own, and a (row, seed) both hold is compared rather than overwritten."""
from __future__ import annotations

import dataclasses
import datetime
import hashlib
import json

import pytest

from conftest import PICO
from fedlab.evidence.runner import Planned, Results, run_table

ROWS = [Planned("t/fedavg", None, (*PICO, "method.name=fedavg"), "FedAvg", "t"),
        Planned("t/median", None, (*PICO, "method.name=fedavg", "method.aggregator=median"), "median", "t")]


def _head() -> str:
    from fedlab.evidence.provenance import git_state

    commit = git_state()["commit"]
    if commit is None:
        pytest.skip("not a git checkout: records cannot name a commit")
    return commit


def _record(row: Planned, seed: int, acc: float, run_id: str, extra: tuple[str, ...] = (), **change) -> dict:
    """A record as `execute` makes it, current for the row's config (with the trailing overrides `extra`) on
    this machine (no run needed)."""
    from fedlab.numerics import current_fingerprint
    from fedlab.runtime.federation import run_key

    cfg = row.resolve(seed, extra)
    rec = {"key": row.key, "label": row.label, "seed": seed, "config_hash": run_key(cfg),
           "method_config": json.loads(json.dumps(dataclasses.asdict(cfg.method), default=str)),
           "final": {"acc/mean": acc}, "zero": {"acc/mean": 0.25}, "rounds": [{"round": 1, "acc/mean": acc}],
           "models": {}, "run_id": run_id, "git": _head(),
           "environment": {"numerics_fingerprint": current_fingerprint()}}
    rec.update(change)
    return rec


def _only_skip(report) -> str:
    """The one skip reason of a merge of one record."""
    (reason,) = report.skipped
    assert not report.added and not report.replaced
    return reason


def _write(path, records: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"_meta": {"parent_run_id": "theirs"}, **records}))


def test_merge_takes_what_this_table_would_accept_and_compares_what_both_hold(tmp_path):
    from fedlab.evidence.merge import merge_records

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
              "t/median@seed5": _record(fm, 5, 0.4, "p5", git=None),                          # no git
              "t/median@seed6": _record(fm, 6, 0.4, "p6", models={"pico-llama": {"weights_sha256": "0" * 64}}),
              "t/median@seed7": _record(fm, 8, 0.4, "p7"),                                   # name ≠ seed field
              "t/median@seed9": _record(fm, 9, 0.4, "p9", extra=("federation.lr=0.5",)),     # other overrides
              "t/median@seed10": "not a record",
              "t/median@seed11": _record(fm, 11, 0.4, "p11", git="HEAD"),                    # not a commit name
              "t/gone@seed0": {**_record(fa, 0, 0.4, "g0"), "key": "t/gone"}}                # no such row
    _write(there, theirs)
    results = Results(here)
    report = merge_records(results, there.parent, ROWS)
    assert report.added == ["t/median@seed0"] and report.replaced == ["t/fedavg@seed3"]
    assert report.same == ["t/fedavg@seed0"] and report.agree == ["t/fedavg@seed1"]
    assert report.differ == {"t/fedavg@seed2": ["final acc/mean", "round 0 acc/mean"]}
    reasons = {k: r for r, keys in report.skipped.items() for k in keys}
    assert set(reasons) == {f"t/median@seed{i}" for i in (1, 2, 3, 4, 5, 6, 7, 9, 10, 11)} | {"t/gone@seed0"}
    assert "does not hold" in reasons["t/median@seed1"] and "uncommitted" in reasons["t/median@seed2"]
    assert "another config" in reasons["t/median@seed3"] and "other numerics" in reasons["t/median@seed4"]
    assert "outside a git checkout" in reasons["t/median@seed5"] and "zoo weights" in reasons["t/median@seed6"]
    assert "disagree" in reasons["t/median@seed7"] and "another config" in reasons["t/median@seed9"]
    assert "not a table record" in reasons["t/median@seed10"] and "no row" in reasons["t/gone@seed0"]
    assert "does not hold" in reasons["t/median@seed11"]
    saved = json.loads(here.read_text())
    assert saved["t/median@seed0"]["run_id"] == "p0" and saved["t/fedavg@seed3"]["run_id"] == "their3"
    assert saved["t/fedavg@seed2"]["run_id"] == "mine2" and saved["t/fedavg@seed1"]["run_id"] == "mine1"
    assert "t/median@seed1" not in saved and "t/gone@seed0" not in saved
    text = "\n".join(report.lines())
    assert "1 added, 1 replaced a stale record, 1 already here, 1 held here too with the same numbers, " \
           "0 replaced by a record with the same numbers and more metrics, 0 replaced by one with the same numbers " \
           "so that its row is at one commit, 1 held here with OTHER numbers, " \
           "11 skipped" in text
    assert "REPRODUCIBILITY FAILURE t/fedavg@seed2: the same config and numerics gave other numbers " \
           "(final acc/mean, round 0 acc/mean); this file's record is kept" in text
    # the trailing overrides of the command line are part of the row's config
    assert merge_records(Results(here), there, ROWS, extra=("federation.lr=0.5",)).added == ["t/median@seed9"]
    # --only narrows the rows a merge may fill
    (tmp_path / "fresh").mkdir()
    fresh = Results(tmp_path / "fresh" / "results.json")
    only = merge_records(fresh, there, ROWS[:1])
    assert only.added == ["t/fedavg@seed0", "t/fedavg@seed1", "t/fedavg@seed2", "t/fedavg@seed3"]
    assert len(only.skipped["no row of this table by that key (or outside --only)"]) == 11


def test_a_record_both_hold_from_two_measured_kinds_is_kept_here_and_not_compared(tmp_path):
    from fedlab import numerics
    from fedlab.evidence.merge import merge_records

    fa, _ = ROWS
    other = next(f for f in numerics.measured_fingerprints() if f != numerics.current_fingerprint())
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    _write(here, {"t/fedavg@seed0": _record(fa, 0, 0.5, "mine0"), "t/fedavg@seed1": _record(fa, 1, 0.6, "mine1")})
    theirs = {"t/fedavg@seed0": _record(fa, 0, 0.55, "their0", environment={"numerics_fingerprint": other}),
              "t/fedavg@seed1": _record(fa, 1, 0.65, "their1"),           # this kind, other numbers: a failure
              "t/fedavg@seed2": _record(fa, 2, 0.7, "their2", environment={"numerics_fingerprint": other})}
    _write(there, theirs)
    report = merge_records(Results(here), there, ROWS)
    assert report.other_kind == ["t/fedavg@seed0"] and list(report.differ) == ["t/fedavg@seed1"]
    assert report.added == ["t/fedavg@seed2"]                    # another measured kind's record is current here
    saved = json.loads(here.read_text())
    assert saved["t/fedavg@seed0"]["run_id"] == "mine0" and saved["t/fedavg@seed2"]["run_id"] == "their2"
    assert "1 held here by a record of another machine kind (kept: two kinds' digits are not compared)" in \
        "\n".join(report.lines())


def test_another_kinds_records_re_made_at_one_commit_unify_a_row_made_at_several(tmp_path):
    """Seeds re-made on another machine kind at the commit that made the rest of a row replace the ones made
    elsewhere, numbers not compared, when that leaves the row at one commit; where it would not, this file's
    stay."""
    import subprocess

    from fedlab import numerics
    from fedlab.evidence.merge import merge_records

    fa, _ = ROWS
    head = _head()
    parent = subprocess.run(["git", "rev-parse", f"{head}~1"], capture_output=True, text=True)
    if parent.returncode:
        pytest.skip("the checkout holds one commit: records of two commits cannot be made")
    old = parent.stdout.strip()
    other = {"numerics_fingerprint": next(f for f in numerics.measured_fingerprints()
                                          if f != numerics.current_fingerprint())}
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    mine = {"t/fedavg@seed0": {**_record(fa, 0, 0.5, "m0"), "git": old}, "t/fedavg@seed1": _record(fa, 1, 0.6, "m1"),
            "t/fedavg@seed2": _record(fa, 2, 0.7, "m2")}
    _write(here, mine)
    _write(there, {"t/fedavg@seed0": _record(fa, 0, 0.55, "k0", environment=other)})
    report = merge_records(Results(here), there, ROWS)
    assert report.unified_kind == ["t/fedavg@seed0"] and not report.differ and not report.other_kind
    assert json.loads(here.read_text())["t/fedavg@seed0"]["run_id"] == "k0"
    assert "1 replaced by another machine kind's record so that its row is at one commit (numbers not compared)" in \
        "\n".join(report.lines())
    _write(here, mine)      # re-made at the other commit: the row would still mix commits
    _write(there, {"t/fedavg@seed1": {**_record(fa, 1, 0.65, "k1", environment=other), "git": old}})
    report = merge_records(Results(here), there, ROWS)
    assert report.unified_kind == [] and report.other_kind == ["t/fedavg@seed1"]
    assert json.loads(here.read_text())["t/fedavg@seed1"]["run_id"] == "m1"


def test_another_kinds_re_made_row_that_logs_more_takes_the_whole_rows_place(tmp_path):
    """A row re-made on another machine kind, every seed here at one commit, each record logging metrics this
    file's lack (what later code logs), replaces the row; a re-make that misses a seed, or logs nothing more,
    leaves this file's records."""
    from fedlab import numerics
    from fedlab.evidence.merge import merge_records

    fa, _ = ROWS
    other = {"numerics_fingerprint": next(f for f in numerics.measured_fingerprints()
                                          if f != numerics.current_fingerprint())}
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    mine = {f"t/fedavg@seed{s}": _record(fa, s, 0.5, f"m{s}") for s in (0, 1)}

    def theirs(seeds, more=True):
        return {f"t/fedavg@seed{s}": _record(fa, s, 0.55, f"k{s}", environment=other,
                                             final={"acc/mean": 0.55, **({"share/a": 1.0} if more else {})})
                for s in seeds}

    _write(here, mine)
    _write(there, theirs((0, 1)))
    report = merge_records(Results(here), there, ROWS)
    assert sorted(report.extended_kind) == ["t/fedavg@seed0", "t/fedavg@seed1"] and not report.other_kind
    assert {r["run_id"] for r in json.loads(here.read_text()).values() if isinstance(r, dict) and "run_id" in r} \
        == {"k0", "k1"}
    assert "2 replaced by another machine kind's re-made row that logs more metrics" in "\n".join(report.lines())
    for seeds, more in (((0,), True), ((0, 1), False)):
        _write(here, mine)
        _write(there, theirs(seeds, more))
        report = merge_records(Results(here), there, ROWS)
        assert not report.extended_kind and sorted(report.other_kind) == sorted(theirs(seeds))
        assert json.loads(here.read_text())["t/fedavg@seed0"]["run_id"] == "m0"


def test_merge_keeps_this_files_meta_and_brings_a_dirty_records_patch_when_allowed(tmp_path):
    from fedlab.evidence.merge import merge_records

    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    here.parent.mkdir()
    here.write_text(json.dumps({"_meta": {"parent_run_id": "mine"}}))
    patch = "--- a\n+++ b\n"
    dirty = _record(ROWS[0], 0, 0.5, "d0", git=_head() + "+dirty", diff="diffs/abc.patch")
    dirty["environment"]["diff_sha256"] = hashlib.sha256(patch.encode()).hexdigest()
    _write(there, {"t/fedavg@seed0": dirty})
    assert "missing" in _only_skip(merge_records(Results(here), there, ROWS, allow_dirty=True))
    (there.parent / "diffs").mkdir()
    (there.parent / "diffs" / "abc.patch").write_text(patch + "altered\n")
    assert "does not match" in _only_skip(merge_records(Results(here), there, ROWS, allow_dirty=True))
    (there.parent / "diffs" / "abc.patch").write_text(patch)
    assert "uncommitted" in _only_skip(merge_records(Results(here), there, ROWS))
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
    assert (here / "RESULTS.md").read_text() == "fedavg 0.600 ± 1.271 ◌"     # ◌: records without answer shares
    assert "[fedlab] merge from" in capsys.readouterr().err
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(tmp_path / "nowhere"), "--render-only"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file" in err and "nowhere" in err     # one line, no traceback
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(here), "--render-only"]) == 2
    assert "this table's own results.json" in capsys.readouterr().err
    # a source that does not exist stops the merge before any other source is merged
    other = tmp_path / "other" / "results.json"
    _write(other, {"t/median@seed0": _record(ROWS[1], 0, 0.3, "m0"), "t/fedavg@seed1": _record(ROWS[0], 1, 0.9, "b1")})
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(other), "--merge-from", "nowhere"]) == 2
    assert "t/median@seed0" not in json.loads((here / "results.json").read_text())
    # --only narrows the rows; a (row, seed) held here with other numbers renders, then exits 1
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(other), "--only", "t/median$",
                                                  "--render-only"]) == 0
    saved = json.loads((here / "results.json").read_text())
    assert "t/median@seed0" in saved and saved["t/fedavg@seed1"]["run_id"] == "a1"
    assert run_table(here, lambda: ROWS, render, ["--merge-from", str(other), "--render-only"]) == 1
    err = capsys.readouterr().err
    assert "REPRODUCIBILITY FAILURE t/fedavg@seed1" in err and "disagree" in err
    assert (here / "RESULTS.md").read_text() == "fedavg 0.600 ± 1.271 ◌"     # ◌: records without answer shares


def test_a_record_with_the_same_numbers_and_more_metrics_is_not_a_reproducibility_failure(tmp_path):
    """Code that has learnt to log more (a new metric, a later commit) re-runs a row: the same numbers plus the
    new metric. The fuller record takes this file's place; a poorer incoming one leaves this file's as it is;
    neither is a failure. A metric both hold with other values still is, and so is a metric only one holds when
    both records come from one commit."""
    import subprocess

    from fedlab.evidence.merge import merge_records

    fa, _ = ROWS
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    head = _head()
    parent = subprocess.run(["git", "rev-parse", f"{head}~1"], capture_output=True, text=True)
    if parent.returncode:
        pytest.skip("the checkout holds one commit: records of two commits cannot be made")
    later = lambda rec: {**rec, "final": {**rec["final"], "new/metric": 1.0}}     # the later commit's record
    earlier = lambda rec: {**rec, "git": parent.stdout.strip()}
    richer = later
    _write(here, {"t/fedavg@seed0": earlier(_record(fa, 0, 0.5, "m0")),
                  "t/fedavg@seed1": richer(_record(fa, 1, 0.6, "m1")),
                  "t/fedavg@seed2": earlier(_record(fa, 2, 0.7, "m2"))})
    theirs = {"t/fedavg@seed0": richer(_record(fa, 0, 0.5, "t0")),                    # more: replaces
              "t/fedavg@seed1": earlier(_record(fa, 1, 0.6, "t1")),                   # less: this file's stays
              "t/fedavg@seed2": richer(_record(fa, 2, 0.75, "t2"))}                   # other numbers: a failure
    _write(there, theirs)
    report = merge_records(Results(here), there, ROWS)
    assert report.extended == ["t/fedavg@seed0"] and report.agree == ["t/fedavg@seed1"]
    assert report.differ == {"t/fedavg@seed2": ["final acc/mean", "round 0 acc/mean"]}
    saved = json.loads(here.read_text())
    assert saved["t/fedavg@seed0"]["run_id"] == "t0" and saved["t/fedavg@seed0"]["final"]["new/metric"] == 1.0
    assert saved["t/fedavg@seed1"]["run_id"] == "m1" and saved["t/fedavg@seed2"]["run_id"] == "m2"
    assert "1 replaced by a record with the same numbers and more metrics" in "\n".join(report.lines())
    # from one commit, a metric only one record holds is a failure (the same code logs the same metrics)
    _write(here, {"t/fedavg@seed3": _record(fa, 3, 0.4, "m3")})
    _write(there, {"t/fedavg@seed3": richer(_record(fa, 3, 0.4, "t3"))})
    report = merge_records(Results(here), there, ROWS)
    assert report.differ == {"t/fedavg@seed3": ["final new/metric (only one record holds it)"]}


def test_two_records_differ_by_the_numbers_both_hold_and_one_sided_metrics_are_told_apart():
    from fedlab.evidence.merge import differing, one_sided

    nan = float("nan")
    a = {"final": {"acc/mean": nan, "loss": 1.0}, "zero": {"acc/mean": 0.2}, "rounds": [{"round": 1}]}
    assert differing(a, json.loads(json.dumps(a))) == []                  # NaN equals NaN, as written to JSON
    assert differing(a, {**a, "final": {"acc/mean": nan}}) == []          # one record lacks it: not a disagreement,
    assert one_sided(a, {**a, "final": {"acc/mean": nan}}) == (["loss"], [])           # but one-sided
    assert one_sided(a, {**a, "final": {**a["final"], "new": 2.0}}) == ([], ["new"])
    assert differing(a, {**a, "final": {"acc/mean": 0.5, "loss": 1.0}}) == ["final acc/mean"]
    assert differing(a, {**a, "zero": {"acc/mean": 0.3}, "rounds": []}) == ["zero acc/mean", "rounds (how many)"]
    assert differing(a, {**a, "rounds": [{"round": 1, "acc/mean": 0.4}]}) == []        # a metric one round lacks
    assert differing(a, {**a, "rounds": [{"round": 2}]}) == ["round 0 round"]
    # newer code logs round-0 answer shares besides: one-sided, not a disagreement
    fuller = {**a, "zero": {"acc/mean": 0.2, "top/task_t": 0.5}}
    assert differing(a, fuller) == [] and one_sided(a, fuller) == ([], ["zero/top/task_t"])
    timed = {**a, "final": {**a["final"], "server/time_server": 1.5}}     # a wall-clock metric: not the model's
    assert differing(timed, {**timed, "final": {**timed["final"], "server/time_server": 2.5}}) == []


def test_a_row_made_at_several_commits_takes_a_re_made_row_with_the_same_numbers_at_one_commit(tmp_path):
    """A row whose seeds here come from two commits, re-made elsewhere at one commit with the same numbers, is
    replaced whole; where the incoming records would leave it mixed (a seed missing, or two commits among
    them), or the row here is at one commit already, this file's stay."""
    import subprocess

    from fedlab.evidence.merge import merge_records

    fa, fm = ROWS
    head = _head()
    parent = subprocess.run(["git", "rev-parse", f"{head}~1"], capture_output=True, text=True)
    if parent.returncode:
        pytest.skip("the checkout holds one commit: records of two commits cannot be made")
    at = lambda rec, commit: {**rec, "git": commit}
    old = parent.stdout.strip()
    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    _write(here, {"t/fedavg@seed0": at(_record(fa, 0, 0.5, "m0"), old), "t/fedavg@seed1": _record(fa, 1, 0.6, "m1"),
                  "t/median@seed0": at(_record(fm, 0, 0.4, "n0"), old), "t/median@seed1": _record(fm, 1, 0.3, "n1"),
                  "t/median@seed2": at(_record(fm, 2, 0.2, "n2"), old)})
    _write(there, {"t/fedavg@seed0": _record(fa, 0, 0.5, "t0"), "t/fedavg@seed1": _record(fa, 1, 0.6, "t1"),
                   "t/median@seed0": _record(fm, 0, 0.4, "u0")})               # median's seed 2 not re-made
    report = merge_records(Results(here), there, ROWS)
    assert sorted(report.unified) == ["t/fedavg@seed0", "t/fedavg@seed1"] and report.agree == ["t/median@seed0"]
    saved = json.loads(here.read_text())
    assert [saved[f"t/fedavg@seed{i}"]["run_id"] for i in (0, 1)] == ["t0", "t1"]
    assert saved["t/median@seed0"]["run_id"] == "n0"
    assert "2 replaced by one with the same numbers so that its row is at one commit" in "\n".join(report.lines())
    # at one commit here already: nothing to unify
    _write(there, {"t/fedavg@seed0": at(_record(fa, 0, 0.5, "v0"), old), "t/fedavg@seed1": at(_record(fa, 1, 0.6, "v1"), old)})
    report = merge_records(Results(here), there, ROWS)
    assert report.unified == [] and sorted(report.agree) == ["t/fedavg@seed0", "t/fedavg@seed1"]
    # incoming records of two commits do not unify a row
    _write(here, {"t/fedavg@seed0": at(_record(fa, 0, 0.5, "m0"), old), "t/fedavg@seed1": _record(fa, 1, 0.6, "m1")})
    _write(there, {"t/fedavg@seed0": _record(fa, 0, 0.5, "w0"), "t/fedavg@seed1": at(_record(fa, 1, 0.6, "w1"), old)})
    report = merge_records(Results(here), there, ROWS)
    assert report.unified == [] and json.loads(here.read_text())["t/fedavg@seed0"]["run_id"] == "m0"
    # a record here that holds a metric the incoming one lacks is not given up to unify its row
    richer = _record(fa, 1, 0.6, "m1")
    richer["final"]["new/metric"] = 1.0
    _write(here, {"t/fedavg@seed0": at(_record(fa, 0, 0.5, "m0"), old), "t/fedavg@seed1": richer})
    _write(there, {"t/fedavg@seed0": at(_record(fa, 0, 0.5, "x0"), old), "t/fedavg@seed1": at(_record(fa, 1, 0.6, "x1"), old)})
    report = merge_records(Results(here), there, ROWS)
    assert report.unified == [] and sorted(report.agree) == ["t/fedavg@seed0", "t/fedavg@seed1"]
    assert json.loads(here.read_text())["t/fedavg@seed1"]["final"]["new/metric"] == 1.0


def test_a_kind_check_made_in_another_worktree_reaches_this_file_when_it_is_later_and_traceable(tmp_path):
    """The incoming `_meta.kind_check` takes this file's place when its commit is held here and it is later: a
    later day, or the same day at a descendant commit (or none is held here); an older one, one of the same day
    and commit, one from a commit this checkout lacks, or one the page cannot read leaves this file's as it is."""
    from fedlab.evidence.merge import merge_records
    from fedlab.evidence.provenance import run_git
    from fedlab.evidence.records import ROOT

    parent = run_git(ROOT, "rev-parse", f"{_head()}~1").stdout.strip()
    if not parent:
        pytest.skip("HEAD has no parent commit here")

    here, there = tmp_path / "here" / "results.json", tmp_path / "there" / "results.json"
    here.parent.mkdir()
    there.parent.mkdir()
    # four days in order, as `date.isoformat` writes them
    DAY = {n: datetime.date(2000, 1, n).isoformat() for n in range(1, 5)}
    check = lambda day, commit=None: {"commit": commit or _head(), "date": day, "kind": "K", "pairs": []}
    here.write_text(json.dumps({"_meta": {"parent_run_id": "mine", "kind_check": check(DAY[2])}}))
    unreadable = {k: v for k, v in check(DAY[4]).items() if k != "kind"}
    same_day_again = {**check(DAY[2]), "pairs": [{"made_on": "K2", "failed": "OSError: x"}]}
    same_day_older = check(DAY[2], parent)
    for incoming in (check(DAY[1]), check(DAY[3], "0" * 40), unreadable, same_day_again, same_day_older):
        there.write_text(json.dumps({"_meta": {"kind_check": incoming}}))
        report = merge_records(Results(here), there, ROWS)
        assert report.kind_check is None and not any("kind check" in line for line in report.lines()), incoming
        assert json.loads(here.read_text())["_meta"]["kind_check"] == check(DAY[2])
    here.write_text(json.dumps({"_meta": {"kind_check": check(DAY[2], parent)}}))
    there.write_text(json.dumps({"_meta": {"kind_check": check(DAY[2])}}))    # the same day, a later commit
    assert merge_records(Results(here), there, ROWS).kind_check is not None
    here.write_text(json.dumps({"_meta": {"parent_run_id": "mine", "kind_check": check(DAY[2])}}))
    there.write_text(json.dumps({"_meta": {"parent_run_id": "theirs", "kind_check": check(DAY[3])}}))
    report = merge_records(Results(here), there, ROWS)
    assert report.kind_check == f"made at {_head()[:7]} on {DAY[3]}"
    assert any("incoming kind check" in line for line in report.lines())
    meta = json.loads(here.read_text())["_meta"]
    assert meta == {"parent_run_id": "mine", "kind_check": check(DAY[3])}
    here.write_text(json.dumps({"_meta": {"parent_run_id": "mine"}}))       # none held here: taken
    assert merge_records(Results(here), there, ROWS).kind_check is not None
