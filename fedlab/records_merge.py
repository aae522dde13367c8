"""A table's records made elsewhere — another clone, worktree or machine — merged into this one's results.json
(`make_tables.py --merge-from OTHER`), so a table can be run in parts on several machines and rendered as one.

An incoming record joins only when this table would accept it as its own: its row is in the table's plan (and
in `--only`), it was made from a committed tree this checkout holds (or `--allow-dirty`, whose patch comes
along), and it is current — the config the row resolves to now, this machine's numerics and the zoo weights a
run here would load (`outdated`, `stale_numerics`, `stale_models`). Where both files hold a current record of
the same (row, seed), this file's stays, and the two are compared: with pinned numerics they hold the same
numbers, so a difference is a reproducibility failure, reported.
"""
from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fedlab.runner import ROOT, Planned, Results, outdated, record_key, stale_models, stale_numerics


class MergeError(ValueError):
    """A `--merge-from` source that is not a table's records."""


@dataclass
class MergeReport:
    """What a merge did, by record key (`row@seedN`)."""
    source: Path
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)      # this file's record was stale, the incoming one current
    same: list[str] = field(default_factory=list)          # the same run (run id) is already here
    agree: list[str] = field(default_factory=list)         # both current, two runs, the same final numbers
    differ: dict[str, list[str]] = field(default_factory=dict)   # both current, final metrics that differ
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason → keys

    def skip(self, reason: str, key: str) -> None:
        self.skipped.setdefault(reason, []).append(key)

    def lines(self) -> list[str]:
        """The report as the table script prints it (one line, then one per skip reason and disagreement)."""
        head = (f"[fedlab] merge from {self.source}: {len(self.added)} added, {len(self.replaced)} replaced a stale "
                f"record, {len(self.same)} already here, {len(self.agree)} held here too with the same numbers, "
                f"{len(self.differ)} held here with OTHER numbers, {sum(map(len, self.skipped.values()))} skipped")
        out = [head]
        for key, metrics in self.differ.items():
            out.append(f"[fedlab]   {key}: this file's record kept; the incoming run's {', '.join(metrics[:4])} "
                       "differ — the same config and numerics gave other numbers (a reproducibility failure)")
        for reason, keys in self.skipped.items():
            shown = ", ".join(keys[:3]) + (f", … ({len(keys)} in all)" if len(keys) > 3 else "")
            out.append(f"[fedlab]   skipped, {reason}: {shown}")
        if self.added or self.replaced:
            out.append("[fedlab]   merged records name their MLflow runs in the other machine's store (`run_id`)")
        return out


def results_path(source: str | Path) -> Path:
    """The results.json a `--merge-from` argument names: the file, or a table folder holding one."""
    p = Path(source)
    p = p / "results.json" if p.is_dir() else p
    if not p.is_file():
        raise MergeError(f"--merge-from {source}: no such file (give another clone's results.json, or its table "
                         "folder)")
    return p


def _commit_known(commit: str, cache: dict[str, bool]) -> bool:
    """Whether this checkout's git holds `commit` (a record from a commit it lacks cannot be traced here)."""
    if commit not in cache:
        try:
            r = subprocess.run(["git", "-C", str(ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
                               capture_output=True, timeout=30)
            cache[commit] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            cache[commit] = False
    return cache[commit]


def _differing(a: dict, b: dict) -> list[str]:
    """The final metrics two records both hold with different values."""
    fa, fb = a.get("final") or {}, b.get("final") or {}
    return sorted(k for k in fa.keys() & fb.keys() if fa[k] != fb[k])


def _stale_reason(rec: dict, cfg) -> str | None:
    if outdated(rec, cfg):
        return "made by another config than the row resolves to now"
    if stale_numerics(rec):
        return "made with other numerics (another CPU kind, numerics mode or library versions)"
    if stale_models(rec):
        return "made with other zoo weights than a run here would load"
    return None


def merge_records(results: Results, source: str | Path, plan: list[Planned], extra: tuple[str, ...] = (),
                  allow_dirty: bool = False) -> MergeReport:
    """Add to `results` the records of `source` that this table would accept as its own (module docstring),
    then save; `extra` are the trailing overrides the rows run with."""
    from fedlab.config import load_config

    path = results_path(source)
    if path.resolve() == results.path.resolve():
        raise MergeError(f"--merge-from {source}: that is this table's own results.json")
    incoming = Results(path)
    rows = {p.key: p for p in plan}
    report, known = MergeReport(path), {}
    for k, rec in incoming.records.items():
        row = rows.get(rec.get("key"))
        if row is None or k != record_key(row.key, rec.get("seed", 0)):
            report.skip("no row of this table by that key (or outside --only)", k)
            continue
        git = str(rec.get("git") or "")
        commit = git.removesuffix("+dirty")
        if not commit:
            report.skip("made outside a git checkout (no commit to trace it to)", k)
            continue
        if git.endswith("+dirty") and not allow_dirty:
            report.skip("made from uncommitted changes (--allow-dirty takes it, with its patch)", k)
            continue
        if not _commit_known(commit, known):
            report.skip("made at a commit this checkout does not hold (fetch it first)", k)
            continue
        cfg = load_config(row.config, [*row.overrides, *extra, f"seed={rec.get('seed', 0)}"])
        reason = _stale_reason(rec, cfg)
        if reason:
            report.skip(reason, k)
            continue
        mine = results.records.get(k)
        if mine is not None and mine.get("run_id") == rec.get("run_id"):
            report.same.append(k)
            continue
        if mine is not None and _stale_reason(mine, cfg) is None:
            diff = _differing(mine, rec)
            if diff:
                report.differ[k] = diff
            else:
                report.agree.append(k)
            continue
        if rec.get("diff"):            # a dirty tree's patch, kept beside the records it made
            src, dst = path.parent / rec["diff"], results.path.parent / rec["diff"]
            if src.is_file() and not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, dst)
        (report.added if mine is None else report.replaced).append(k)
        results.records[k] = rec
    if report.added or report.replaced:
        results.save()
    return report
