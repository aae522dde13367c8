"""Rows whose seeds were made at several commits, and the commands that bring each to one
(`make_tables.py --mixed`).

A row's seeds can come from several commits when a table grew over time. With pinned numerics, re-making a
seed at another commit whose records of the row are current gives the same numbers, so the cheapest way to put
a row at one commit is to re-make only the seeds made elsewhere at the commit that made most of them, in a
worktree at that commit, and to merge them back: `fedlab.evidence.merge` takes them only when every number
equals the record they replace (`unified`), so each merge made on the kind of the replaced records is also a
reproduction check across two commits; another measured kind's re-made records unify the row without one
(`unified_kind`).

A commit is a target only where the merge can take what it makes: a clean commit (not `+dirty`, not outside
git) whose code records this machine's kind (`records_kind_at`), whose records of the row are all current here
(`records.stale_reason`) and log every kind of metric the records to be replaced log (names compared with their
trailing client or edge index dropped, since which clients a seed draws is the seed's). Among those, the one that
made most seeds wins; a tie goes to the one whose missing seeds took the least recorded run time. A row with no such commit is re-run whole at HEAD.
"""
from __future__ import annotations

import functools
import math
import re
import subprocess
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from fedlab.evidence.merge import commit_known
from fedlab.evidence.provenance import run_git
from fedlab.evidence.records import ROOT

# the first commit whose table runner takes `--only KEY$` as one row exactly; older runners read every
# pattern as a key prefix
EXACT_ONLY_SINCE = "48fb910"
INDEX = re.compile(r"_\d+$")            # a metric name's trailing client or edge index
# the first commit whose runs name their machine kind in the numerics fingerprint and read the records of every
# measured kind as current; older code wrote the reference kind's fingerprint on every kind
KINDS_SINCE = "5bb6e04"


@dataclass(frozen=True)
class Mixed:
    """One row whose seeds were made at several commits."""
    row: str
    commit: str | None              # where to re-make `seeds` (None: no commit qualifies; re-run at HEAD)
    seeds: tuple[int, ...]          # the seeds to re-make
    seconds: float                  # their recorded run time
    commits: dict[str | None, int]  # commit (None: outside git) → how many of the row's seeds it made


def _commit(rec: dict) -> str | None:
    """The commit that made a record (None for one made outside git)."""
    return rec.get("git") or None


def _clean(commit: str | None) -> bool:
    """Whether a worktree can stand at `commit`: a commit, without uncommitted changes."""
    return bool(commit) and not commit.endswith("+dirty")


def _short(commit: str | None) -> str:
    """A commit as the listing names it: 7 hex digits, `+dirty` kept; 'outside git' for none."""
    if not commit:
        return "outside git"
    return commit[:7] + ("+dirty" if commit.endswith("+dirty") else "")


def _seconds(rec: dict) -> float:
    """A record's recorded run time (0 where it holds none or NaN)."""
    try:
        s = float(rec.get("seconds") or 0)
    except (TypeError, ValueError):
        return 0.0
    return s if math.isfinite(s) else 0.0


def _cost(recs: dict, target: str | None) -> float:
    """The recorded run time of the seeds `target` did not make (every seed's when `target` is None)."""
    return sum(_seconds(r) for r in recs.values() if target is None or _commit(r) != target)


def metric_kinds(rec: dict) -> set[str]:
    """The final and round-0 metric names of a record with a trailing index dropped (`acc/client_3` →
    `acc/client_#`): what one version of the code logs, whichever clients or edges a seed drew."""
    return {f"{part}:{INDEX.sub('_#', k)}" for part in ("final", "zero") for k in (rec.get(part) or {})}


def mixed_rows(records: dict, keys, current: Callable[[dict], bool] = lambda rec: True) -> list[Mixed]:
    """The rows of `keys` whose records (`results.records`) name more than one commit, cheapest to unify first;
    `current(record)` says whether a record is current here (a target's records must all be)."""
    by_row: dict[str, dict[int, dict]] = {}
    keys = set(keys)
    for rec in records.values():
        if isinstance(rec, dict) and rec.get("key") in keys and isinstance(rec.get("seed"), int):
            by_row.setdefault(rec["key"], {})[rec["seed"]] = rec
    out = []
    for row, recs in by_row.items():
        made = Counter(_commit(r) for r in recs.values())
        if len(made) < 2:
            continue

        def qualifies(c: str | None, recs=recs) -> bool:
            mine = [r for r in recs.values() if _commit(r) == c]
            if not _clean(c) or not records_kind_at(c) or not all(current(r) for r in mine):
                return False
            logged = set().union(*(metric_kinds(r) for r in mine))
            return all(metric_kinds(r) <= logged for r in recs.values() if _commit(r) != c)

        targets = [c for c in made if qualifies(c)]
        target = min(targets, key=lambda c: (-made[c], _cost(recs, c), c)) if targets else None
        seeds = tuple(sorted(s for s, r in recs.items() if target is None or _commit(r) != target))
        out.append(Mixed(row, target, seeds, _cost(recs, target), dict(made)))
    return sorted(out, key=lambda m: (m.commit is None, m.seconds, m.row))


@functools.cache
def takes_exact_only(commit: str) -> bool:
    """Whether the runner at `commit` reads `--only KEY$` as exactly that row (`EXACT_ONLY_SINCE` is an ancestor
    of it, or the commit itself); False where git cannot tell. Asked of git once per commit."""
    try:
        return run_git(ROOT, "merge-base", "--is-ancestor", EXACT_ONLY_SINCE, commit).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def records_kind_at(commit: str | None) -> bool:
    """Whether a run made here at `commit` (in a worktree) records this machine's kind: always on the reference
    kind (and when judging as it: the commands are then the reference kind's to run); on another kind, only at a
    commit that holds `KINDS_SINCE`."""
    from fedlab import numerics

    if numerics.judge_as() == "reference" or numerics.is_reference_kind():
        return True
    return bool(commit) and _holds_kinds(commit)


@functools.cache
def _holds_kinds(commit: str) -> bool:
    """Whether `KINDS_SINCE` is an ancestor of `commit` or the commit itself (False where git cannot tell)."""
    try:
        return run_git(ROOT, "merge-base", "--is-ancestor", KINDS_SINCE, commit).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def worktree(commit: str) -> str:
    """The worktree beside this checkout that the commands use for `commit`."""
    return f"../wt-{commit[:7]}"


def commands(m: Mixed, script: str, folder: str, plan_keys, exact: bool) -> list[str]:
    """The shell lines, run from the repository root, that re-make `m.seeds` at `m.commit` in a worktree beside
    this checkout (made when missing) and merge them back into the table in `folder` (relative to the root).
    `exact`: the runner at that commit takes `KEY$`; where it does not, the row is given as a prefix and the
    other rows of today's plan (`plan_keys`) it would also run are named."""
    return rows_commands([m.row], m.commit, m.seeds, script, folder, plan_keys, exact)


def rows_commands(rows: list[str], commit: str, seeds, script: str, folder: str, plan_keys,
                  exact: bool) -> list[str]:
    """`commands` for several rows made at one commit with the same seeds: one worktree, one table run of
    every row (`--only` takes comma-separated patterns at every commit a record names) and one merge."""
    wt = worktree(commit)
    others = sorted(k for k in plan_keys if k not in rows and any(k.startswith(r) for r in rows))
    pattern = ",".join(f"{r}$" if exact else r for r in rows)
    seeds = ",".join(map(str, seeds))
    lines = [f"[ -d {wt} ] || git worktree add --detach {wt} {commit}",
             f"(cd {wt} && PYTHONPATH=$PWD python {script} --only '{pattern}' --seeds {seeds} --rerun)",
             f"python {script} --merge-from {wt}/{folder} --only '{','.join(r + '$' for r in rows)}' --render-only"]
    if not exact and others:
        lines.insert(1, f"# {commit[:7]} reads --only as a prefix: it also runs {', '.join(others)} at seeds {seeds}")
    return lines


def report(records: dict, keys, script: str, folder: str, plan_keys=None,
           current: Callable[[dict], bool] = lambda rec: True) -> list[str]:
    """What `--mixed` prints: one block per mixed row of `keys` (its commits, the seeds to re-make and where,
    the commands), cheapest first, then the run time of both kinds of re-make (the seeds re-made at their commits,
    the rows re-run whole at HEAD); one line when every row is at one commit. `plan_keys`: every
    row of the table's plan (default `keys`), for the rows a prefix also runs."""
    plan_keys = list(keys if plan_keys is None else plan_keys)
    mixed = mixed_rows(records, keys, current)
    known: dict[str, bool] = {}                 # commit → held here, asked of git once per commit
    if not mixed:
        return ["every row was made at one commit"]
    out = []
    for m in mixed:
        made = ", ".join(f"{_short(c)} × {n}" for c, n in sorted(m.commits.items(), key=lambda x: -x[1]))
        seeds = ", ".join(map(str, m.seeds))
        if m.commit is None:
            out += [f"{m.row}: seeds made at {made}; no commit made them cleanly, current here and logging what the "
                    f"others log: re-run the row at HEAD (python {script} --only '{m.row}$' --seeds "
                    f"{','.join(map(str, m.seeds))} --rerun)", ""]
            continue
        out.append(f"{m.row}: seeds made at {made}; re-make seeds {seeds} at {m.commit[:7]} (recorded "
                   f"{m.seconds / 60:.1f} min)")
        if not commit_known(m.commit, known):
            out += [f"  {m.commit[:7]} is not in this checkout: git fetch it first", ""]
            continue
        out += ["  " + line for line in commands(m, script, folder, plan_keys, takes_exact_only(m.commit))]
        out.append("")
    total = sum(m.seconds for m in mixed if m.commit)
    rows = {r.get("key") for r in records.values() if isinstance(r, dict)} & set(keys)
    line = (f"{len(mixed)} of {len(rows)} rows mix commits; re-making the seeds listed at their commits takes about "
            f"{total / 3600:.1f} h of recorded run time")
    whole = [m for m in mixed if not m.commit]
    if whole:
        rows_named = "the row" if len(whole) == 1 else f"the {len(whole)} rows"
        line += (f", and re-running {rows_named} no commit can take whole at HEAD about "
                 f"{sum(m.seconds for m in whole) / 3600:.1f} h")
    out.append(line)
    return out
