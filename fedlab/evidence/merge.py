"""Records made elsewhere, merged into a table's results.json (`make_tables.py --merge-from OTHER`): another
clone, worktree or machine runs part of a table, and the table is rendered as one.

An incoming record joins only when it is one this table would not run again and can trace: its row is in the
table's plan (and in `--only`; every seed it holds, not only `--seeds`), it was made from a committed tree at a
commit this checkout holds (`--allow-dirty` also takes a dirty tree's record, with its patch, checked against
the record's sha256, and one made outside git), and it is current (`fedlab.evidence.records.stale_reason`: the config
the row resolves to now, this machine's numerics or a measured kind's, the zoo weights a run here would load).
Where both files hold a current record of the same (row, seed) from two runs, this file's stays; made with the
same numerics, the two are compared — final, zero-shot and per-round numbers: with pinned numerics they are
equal, so a difference is a reproducibility failure, and the table script exits 1 after rendering (made by two
machine kinds, they differ in their last digits or more, and are not compared). Final metrics only one of the
two logs are a failure too when both records come from one commit; from two commits they are what the later code
logs besides, not numbers the two disagree on: where the incoming record holds every metric of this file's with
the same values and more besides, it takes the place of this file's (`extended`, its patch copied as an added record's is).
A row whose records here were made at several commits takes the incoming ones with the same numbers when that
leaves the row at one commit (`unified`): every record of the row here is then replaced by, or already made at
the commit of, the incoming one. Incoming records of another measured machine kind count there too
(`unified_kind`): their numbers cannot be compared, and where they do not unify a row, this file's stay, unless
they re-make the whole row: one incoming record of one commit for every record of the row here, each logging
every metric this file's does and more besides (a row re-run on another kind for what later code logs), take
the row's place (`extended_kind`), so that the row stays at one commit and one kind.
The incoming file's kind check (`_meta.kind_check`, `fedlab.evidence.kindcheck`) takes the place of this file's
when it was made at a commit this checkout holds and is later than this file's — on a later day, or on the same
day at a commit that descends from this one's — or this file has none, so that a kind check run in another
worktree reaches the page as its records do. One the page cannot read is not taken.
"""
from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from fedlab.evidence.provenance import made_dirty, run_git
from fedlab.evidence.records import ROOT, Planned, Results, numerics_fingerprint, record_key, stale_reason

NOT_A_ROW = "no row of this table by that key (or outside --only)"


class MergeError(ValueError):
    """A `--merge-from` source that is not another table's records (one line for the user)."""


@dataclass
class MergeReport:
    """What a merge did, by record key (`row@seedN`)."""
    source: Path
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)      # this file's record was stale, the incoming one current
    same: list[str] = field(default_factory=list)          # the same run (run id) is already here
    agree: list[str] = field(default_factory=list)         # both current, two runs, the same numbers
    extended: list[str] = field(default_factory=list)      # the same numbers, the incoming one logs more: it is kept
    unified: list[str] = field(default_factory=list)       # the same numbers, taken so that the row is at one commit
    other_kind: list[str] = field(default_factory=list)    # both current, made by two machine kinds: this one stays
    unified_kind: list[str] = field(default_factory=list)  # another kind's, taken so that the row is at one commit
    extended_kind: list[str] = field(default_factory=list)  # another kind's whole row, logging more: it is kept
    differ: dict[str, list[str]] = field(default_factory=dict)   # both current: what differs between them
    skipped: dict[str, list[str]] = field(default_factory=dict)  # reason → keys
    kind_check: str | None = None    # the incoming kind check, in words, when it took this file's place

    def took(self) -> bool:
        """Whether the merge took any incoming record into this file."""
        return any((self.added, self.replaced, self.extended, self.unified, self.unified_kind, self.extended_kind))

    def skip(self, reason: str, key: str) -> None:
        self.skipped.setdefault(reason, []).append(key)

    def lines(self) -> list[str]:
        """The report as the table script prints it (one line, then one per disagreement and skip reason)."""
        out = [f"[fedlab] merge from {self.source}: {len(self.added)} added, {len(self.replaced)} replaced a stale "
               f"record, {len(self.same)} already here, {len(self.agree)} held here too with the same numbers, "
               f"{len(self.extended)} replaced by a record with the same numbers and more metrics, "
               f"{len(self.unified)} replaced by one with the same numbers so that its row is at one commit, "
               + (f"{len(self.other_kind)} held here by a record of another machine kind (kept: two kinds' digits "
                  "are not compared), " if self.other_kind else "")
               + (f"{len(self.unified_kind)} replaced by another machine kind's record so that its row is at one "
                  "commit (numbers not compared), " if self.unified_kind else "")
               + (f"{len(self.extended_kind)} replaced by another machine kind's re-made row that logs more metrics "
                  "(numbers not compared), " if self.extended_kind else "")
               + f"{len(self.differ)} held here with OTHER numbers, {sum(map(len, self.skipped.values()))} skipped"]
        for key, what in self.differ.items():
            out.append(f"[fedlab]   REPRODUCIBILITY FAILURE {key}: the same config and numerics gave other numbers "
                       f"({', '.join(what[:4])}{', …' if len(what) > 4 else ''}); this file's record is kept")
        for reason, keys in self.skipped.items():
            shown = ", ".join(keys[:3]) + (f", … ({len(keys)} in all)" if len(keys) > 3 else "")
            out.append(f"[fedlab]   skipped, {reason}: {shown}")
        if self.kind_check:
            out.append(f"[fedlab]   the incoming kind check ({self.kind_check}) takes the place of this file's")
        if self.took():
            out.append("[fedlab]   the merged records name their MLflow runs in the other machine's store (`run_id`)")
        return out


def results_path(source: str | Path, own: Path) -> Path:
    """The results.json a `--merge-from` argument names (the file, or a table folder holding one); a missing
    one, or this table's own file, is a MergeError."""
    p = Path(source)
    p = p / "results.json" if p.is_dir() else p
    if not p.is_file():
        raise MergeError(f"--merge-from {source}: no such file (give another clone's results.json, or its table "
                         "folder)")
    if own.exists() and p.samefile(own):
        raise MergeError(f"--merge-from {source}: that is this table's own results.json")
    return p


def _read(path: Path) -> Results:
    from fedlab.files import FileProblem

    try:
        return Results(path)
    except FileProblem as e:
        raise MergeError(f"--merge-from {path}: not a table's records ({str(e).split(': ', 1)[-1].split(';')[0]}); "
                         "copy it again from the machine that made it") from None


def commit_known(commit: str, cache: dict[str, bool]) -> bool:
    """Whether this checkout's git holds `commit` (a hex object name: a record from a commit it lacks cannot be
    traced here)."""
    if not re.fullmatch(r"[0-9a-f]{7,40}", commit):
        return False
    if commit not in cache:
        try:
            r = run_git(ROOT, "cat-file", "-e", f"{commit}^{{commit}}")
            cache[commit] = r.returncode == 0
        except (OSError, subprocess.SubprocessError):
            cache[commit] = False
    return cache[commit]


def _common(a: dict, b: dict, where: str) -> list[str]:
    """"<where> <metric>" for each metric both dicts hold with other values (`spotcheck.agree`: as written to
    JSON, or within rounding for a metric computed outside the pin), leaving out those that measure the machine's
    clock (`spotcheck.measured`)."""
    from fedlab.evidence.spotcheck import agree, measured

    return [f"{where} {k}" for k in sorted(a.keys() & b.keys()) if not measured(k) and not agree(k, a[k], b[k])]


def differing(a: dict, b: dict) -> list[str]:
    """The numbers two records of one (row, seed) disagree on: final and round-0 (`zero`) metrics both hold with
    other values, and per round the metrics both rounds hold (a different number of rounds is a difference).
    Metrics that measure the machine's clock are left out, as the spot-check leaves them out. Metrics only one
    holds are `one_sided`'s."""
    out = _common(a.get("final") or {}, b.get("final") or {}, "final")
    out += _common(a.get("zero") or {}, b.get("zero") or {}, "zero")
    ra, rb = a.get("rounds") or [], b.get("rounds") or []
    if len(ra) != len(rb):
        return out + ["rounds (how many)"]
    return out + [w for i, (x, y) in enumerate(zip(ra, rb)) for w in _common(x, y, f"round {i}")]


def one_sided(a: dict, b: dict) -> tuple[list[str], list[str]]:
    """(metrics only `a` holds, metrics only `b` holds), final and round-0 ("zero/<metric>"): what one version of
    the code logs and the other does not."""
    sides = ([], [])
    for part, prefix in (("final", ""), ("zero", "zero/")):
        fa, fb = a.get(part) or {}, b.get(part) or {}
        sides[0].extend(prefix + k for k in sorted(fa.keys() - fb.keys()))
        sides[1].extend(prefix + k for k in sorted(fb.keys() - fa.keys()))
    return sides


def _patch_problem(rec: dict, src_folder: Path) -> str | None:
    """Why a dirty record's patch cannot come along (None when it can, or when the record names none)."""
    if not rec.get("diff"):
        return None
    src = (src_folder / rec["diff"]).resolve()
    if not src.is_relative_to(src_folder.resolve()) or not src.is_file():
        return "its patch (diffs/) is missing beside the other results.json"
    from fedlab.evidence.provenance import diff_sha256

    if diff_sha256(src.read_text()) != (rec.get("environment") or {}).get("diff_sha256"):
        return "its patch does not match the sha256 the record holds"
    return None


def _untraceable(rec: dict, allow_dirty: bool, known: dict[str, bool]) -> str | None:
    """Why a record's source cannot be traced here (None when it can)."""
    git = rec.get("git")
    if not git:
        return None if allow_dirty else "made outside a git checkout (--allow-dirty takes it)"
    if made_dirty(rec) and not allow_dirty:
        return "made from uncommitted changes (--allow-dirty takes it, with its patch)"
    if not commit_known(str(git).removesuffix("+dirty"), known):
        return "made at a commit this checkout does not hold (git fetch it first)"
    return None


def merge_records(results: Results, source: str | Path, plan: list[Planned], extra: tuple[str, ...] = (),
                  allow_dirty: bool = False) -> MergeReport:
    """Add to `results` the records of `source` (a results.json or its folder) that this table can take (the
    module docstring), then save; `extra` are the trailing overrides the rows run with."""
    path = results_path(source, results.path)
    incoming = _read(path)
    rows = {p.key: p for p in plan}
    report, known = MergeReport(path), {}
    agreeing: dict[str, dict] = {}      # row → its incoming records with the same numbers as the ones here
    crossing: dict[str, dict] = {}      # row → its incoming records of another machine kind than the ones here
    fuller: set[str] = set()            # those of them that log metrics the one here lacks
    for k, rec in incoming.records.items():
        if not isinstance(rec, dict) or not isinstance(rec.get("key"), str) or not isinstance(rec.get("seed"), int):
            report.skip("not a table record (no key and seed)", k)
            continue
        row = rows.get(rec["key"])
        if row is None:
            report.skip(NOT_A_ROW, k)
            continue
        if k != record_key(row.key, rec["seed"]):
            report.skip("its name and its key and seed fields disagree", k)
            continue
        cfg = row.resolve(rec["seed"], extra)
        reason = _untraceable(rec, allow_dirty, known) or stale_reason(rec, cfg) or _patch_problem(rec, path.parent)
        if reason:
            report.skip(reason, k)
            continue
        mine = results.records.get(k)
        if mine is not None and mine.get("run_id") == rec.get("run_id"):
            report.same.append(k)
            continue
        mine_current = mine is not None and stale_reason(mine, cfg) is None
        if mine_current and numerics_fingerprint(mine) != numerics_fingerprint(rec):
            # two kinds' digits are equal only by chance, so not compared; taken only to unify a row's commits,
            # unless this file's record holds a metric the incoming one lacks
            only_mine, only_theirs = one_sided(mine, rec)
            if only_mine:
                report.other_kind.append(k)
            else:
                crossing.setdefault(rec["key"], {})[k] = rec
                if only_theirs:
                    fuller.add(k)
            continue
        if mine_current:
            what = differing(mine, rec)
            only_mine, only_theirs = one_sided(mine, rec)
            if mine.get("git") == rec.get("git"):   # one commit's code logs the same metrics: a gap is a failure
                what += [f"final {m} (only one record holds it)" for m in only_mine + only_theirs]
            if what:
                report.differ[k] = what
                continue
            if only_mine:                   # this file's holds metrics the incoming one lacks: it stays
                report.agree.append(k)
                continue
            if not only_theirs:             # the same numbers and metrics: taken below only to unify its row
                agreeing.setdefault(rec["key"], {})[k] = rec
                continue
        _bring_patch(rec, path.parent, results)
        if mine is None:
            report.added.append(k)
        elif mine_current:      # the same numbers and more metrics (newer code): the fuller one
            report.extended.append(k)
        else:
            report.replaced.append(k)
        results.records[k] = rec
    for row in dict.fromkeys([*agreeing, *crossing]):
        same, other = agreeing.get(row, {}), crossing.get(row, {})
        if _unifies(results, row, {**same, **other}):
            report.unified.extend(same)
            report.unified_kind.extend(other)
            take = {**same, **other}
        elif other and not same and _remakes(results, row, other, fuller):
            report.extended_kind.extend(other)
            take = other
        else:
            report.agree.extend(same)
            report.other_kind.extend(other)
            continue
        for rec in take.values():
            _bring_patch(rec, path.parent, results)
        results.records.update(take)
    report.kind_check = _take_kind_check(results, incoming.meta.get("kind_check"), known)
    if report.took() or report.kind_check:
        results.save()
    return report


def _take_kind_check(results: Results, check, known: dict[str, bool]) -> str | None:
    """Put the incoming kind check `check` in `results`' meta when the page can read it, it is traceable here (a
    commit this checkout holds) and it is later than the one held here (a later day; the same day at a commit
    descending from the held one's; none held counts as earlier): its commit and day in words, else None."""
    from fedlab.evidence.kindcheck import words

    if not isinstance(check, dict):
        return None
    try:
        words(check)
    except (TypeError, KeyError, ValueError, AttributeError):
        return None
    commit, day = str(check["commit"]), str(check["date"])
    held = results.meta.get("kind_check")
    if held == check or not commit_known(commit, known):
        return None
    if isinstance(held, dict):
        held_day, held_commit = str(held.get("date", "")), str(held.get("commit", ""))
        if held_day > day or (held_day == day and not _descends(commit, held_commit)):
            return None
    results.meta["kind_check"] = check
    return f"made at {commit[:7]} on {day}"


def _descends(commit: str, older: str) -> bool:
    """Whether `commit` is another commit than `older` and has it among its ancestors."""
    if commit == older:
        return False
    try:
        return run_git(ROOT, "merge-base", "--is-ancestor", older, commit).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _bring_patch(rec: dict, source: Path, results: Results) -> None:
    """A dirty tree's record keeps its patch beside it: copy the patch from `source` when it is not here yet."""
    if rec.get("diff"):
        dst = results.path.parent / rec["diff"]
        if not dst.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source / rec["diff"], dst)


def _unifies(results: Results, row: str, agreeing: dict) -> bool:
    """Whether taking `agreeing` (incoming records of `row`, one commit, each with the same numbers as the one
    here or made by another machine kind) leaves a row here that mixed commits at one commit."""
    commits = {r.get("git") for r in agreeing.values()}
    here = {k: r.get("git") for k, r in results.records.items() if r.get("key") == row}
    after = {agreeing[k].get("git") if k in agreeing else g for k, g in here.items()}
    return len(commits) == 1 and len(set(here.values())) > 1 and len(after) == 1


def _remakes(results: Results, row: str, incoming: dict, fuller: set[str]) -> bool:
    """Whether `incoming` (another machine kind's records of `row`) re-make the whole row here: made at one
    commit, one for every record of the row here, each logging metrics the one here lacks (`fuller`: incoming
    records that cross one here, so every key of it is held here)."""
    here = {k for k, r in results.records.items() if r.get("key") == row}
    return len({r.get("git") for r in incoming.values()}) == 1 and here <= fuller


def merge_all(results: Results, sources: list[str], plan: list[Planned], extra: tuple[str, ...] = (),
              allow_dirty: bool = False) -> list[MergeReport]:
    """`merge_records` from each source in turn, after checking that every source exists (a typo in the last
    one merges nothing)."""
    for s in sources:
        results_path(s, results.path)
    return [merge_records(results, s, plan, extra, allow_dirty) for s in sources]
