"""Rows whose seeds were made at several commits, and the commands that bring each to one
(`make_tables.py --mixed`).

A row's seeds can come from several commits when a table grew over time. With pinned numerics, re-making a
seed at another commit whose records of the row are current gives the same numbers, so the cheapest way to put
a row at one commit is to re-make only the seeds made elsewhere at the commit that made most of them (a tie
goes to the commit whose missing seeds cost the least recorded run time), in a worktree at that commit, and to
merge them back: `fedlab.evidence.merge` takes them only when every number equals the record they replace
(`unified`), so each merge is also a reproduction check across two commits. A commit with uncommitted changes
(`+dirty`) or none (a record made outside git) is never a target: no worktree can stand there.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from fedlab.evidence.provenance import run_git
from fedlab.evidence.records import ROOT

# the first commit whose table runner takes `--only KEY$` as one row exactly; older runners read every
# pattern as a key prefix
EXACT_ONLY_SINCE = "48fb910"


@dataclass(frozen=True)
class Mixed:
    """One row whose seeds were made at several commits."""
    row: str
    commit: str | None              # where to re-make `seeds` (None: no clean commit made any of the row's seeds)
    seeds: tuple[int, ...]          # the seeds made elsewhere
    seconds: float                  # their recorded run time
    commits: dict                   # commit → how many of the row's seeds it made


def _clean(commit) -> bool:
    return isinstance(commit, str) and bool(commit) and not commit.endswith("+dirty")


def _short(commit) -> str:
    """A commit as the listing names it: 7 hex digits, `+dirty` kept; 'outside git' for none."""
    if not commit:
        return "outside git"
    return str(commit)[:7] + ("+dirty" if str(commit).endswith("+dirty") else "")


def _cost(recs: dict, target) -> float:
    """The recorded run time of the seeds `target` did not make (every seed's when `target` is None)."""
    return sum(float(r.get("seconds") or 0) for r in recs.values() if target is None or r.get("git") != target)


def mixed_rows(records: dict, keys) -> list[Mixed]:
    """The rows of `keys` whose records (`results.records`) name more than one commit, cheapest to unify first."""
    by_row: dict[str, dict[int, dict]] = {}
    keys = set(keys)
    for rec in records.values():
        if rec.get("key") in keys:
            by_row.setdefault(rec["key"], {})[rec.get("seed")] = rec
    out = []
    for row, recs in by_row.items():
        made = Counter(r.get("git") for r in recs.values())
        if len(made) < 2:
            continue
        targets = [c for c in made if _clean(c)]
        target = min(targets, key=lambda c: (-made[c], _cost(recs, c), c)) if targets else None
        seeds = tuple(sorted(s for s, r in recs.items() if target is None or r.get("git") != target))
        out.append(Mixed(row, target, seeds, _cost(recs, target), dict(made)))
    return sorted(out, key=lambda m: (m.commit is None, m.seconds, m.row))


def takes_exact_only(commit: str, root: Path = ROOT) -> bool:
    """Whether the runner at `commit` reads `--only KEY$` as exactly that row (`EXACT_ONLY_SINCE` is an ancestor
    of it, or the commit itself); False where git cannot tell."""
    try:
        return run_git(root, "merge-base", "--is-ancestor", EXACT_ONLY_SINCE, commit).returncode == 0
    except OSError:
        return False


def commands(m: Mixed, script: str, all_keys, exact: bool) -> list[str]:
    """The shell lines that re-make `m.seeds` at `m.commit` in a worktree beside this checkout and merge them
    back. `exact`: the runner at that commit takes `KEY$`; where it does not, the row is given as a prefix and
    the other rows it would also run are named."""
    short = m.commit[:7]
    others = sorted(k for k in all_keys if k != m.row and k.startswith(m.row))
    pattern = f"{m.row}$" if exact else m.row
    seeds = ",".join(map(str, m.seeds))
    lines = [f"git worktree add --detach ../wt-{short} {m.commit}",
             f"(cd ../wt-{short} && PYTHONPATH=$PWD python {script} --only '{pattern}' --seeds {seeds} --rerun)",
             f"python {script} --merge-from ../wt-{short}/{Path(script).parent} --only '{m.row}$' --render-only"]
    if not exact and others:
        lines.insert(1, f"# {short} reads --only as a prefix: it also runs {', '.join(others)} at seeds {seeds}")
    return lines


def report(records: dict, keys, script: str, root: Path = ROOT) -> list[str]:
    """What `--mixed` prints: one block per mixed row (its commits, the seeds to re-make and where, the
    commands), cheapest first, then a total; one line when every row is at one commit."""
    mixed = mixed_rows(records, keys)
    if not mixed:
        return ["every row was made at one commit"]
    out = []
    for m in mixed:
        made = ", ".join(f"{_short(c)} × {n}" for c, n in
                         sorted(m.commits.items(), key=lambda x: -x[1]))
        if m.commit is None:
            out += [f"{m.row}: seeds made at {made}; no clean commit made any of them: re-run the row at HEAD "
                    f"(python {script} --only '{m.row}$' --seeds {','.join(map(str, m.seeds))} --rerun)", ""]
            continue
        out += [f"{m.row}: seeds made at {made}; re-make seeds {', '.join(map(str, m.seeds))} at {m.commit[:7]} "
                f"(recorded {m.seconds / 60:.1f} min)",
                *("  " + line for line in commands(m, script, keys, takes_exact_only(m.commit, root))), ""]
    total = sum(m.seconds for m in mixed if m.commit)
    out.append(f"{len(mixed)} of {len(set(r.get('key') for r in records.values()) & set(keys))} rows mix commits; "
               f"re-making their seeds made elsewhere takes about {total / 3600:.1f} h of recorded run time")
    return out
