"""Where a run's numbers come from besides its config and weights: the machine's numerics and fedlab's source.

`run_environment(cfg)` is recorded with every run (MLflow tags `fedlab.env.*`, and `environment` in a table
record): CPU model, the instruction set in force, numerics mode, the machine's numerics digest, threads, torch / transformers / tokenizers
versions, fedlab's git commit and whether the tree was clean. A tree is clean when no file that can change a
number differs from the commit: documentation (`*.md`), figures and the table records themselves
(`results.json`) are left out, so a table script writing its own records does not make the next run dirty.
A dirty tree's diff (tracked changes and untracked files) travels with the run: its sha256 in the record, the
patch as an MLflow artifact and beside the table's records (`fedlab.evidence.runner`, `fedlab.evidence.records`).
"""
from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# files whose changes cannot change a number: documentation, figures, and the records tables are made of
NOT_CODE_SUFFIXES = (".md", ".png", ".svg", ".pdf", ".csv", ".txt")
NOT_CODE_NAMES = ("results.json", "RESULTS.md", ".gitignore")


def affects_numbers(path: str) -> bool:
    p = Path(path)
    return not (p.name in NOT_CODE_NAMES or p.suffix in NOT_CODE_SUFFIXES or p.parts[:1] == ("mlruns",))


def made_dirty(record: dict) -> bool:
    """A table record made from uncommitted changes: its `git` is `<commit>+dirty`."""
    return str(record.get("git")).endswith("+dirty")


def made_outside_git(record: dict) -> bool:
    """A table record made outside a git checkout: its `git` is recorded, as null (a record without the field
    was made before fedlab recorded it, and is not counted)."""
    return "git" in record and record["git"] is None


def run_git(where: Path, *args: str) -> subprocess.CompletedProcess:
    """`git -C where args…`, its output as text (raises OSError without git, TimeoutExpired after 30 s)."""
    return subprocess.run(["git", "-C", str(where), *args], capture_output=True, text=True, timeout=30)


def git_state(root: Path = ROOT) -> dict:
    """{"commit": HEAD or None (not a git checkout), "clean": bool or None, "changed": [paths that affect
    numbers and differ from HEAD, untracked ones included], "diff": the patch of those paths ('' when clean)}."""
    unknown = {"commit": None, "clean": None, "changed": [], "diff": ""}
    try:
        head = run_git(root, "rev-parse", "HEAD")
        if head.returncode != 0:
            return unknown
        status = run_git(root, "status", "--porcelain", "--untracked-files=all").stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return unknown
    tracked, untracked = [], []
    for line in status:
        path = line[3:].split(" -> ")[-1].strip('"')
        if affects_numbers(path):
            (untracked if line.startswith("??") else tracked).append(path)
    diff = run_git(root, "diff", "HEAD", "--", *tracked).stdout if tracked else ""
    for path in untracked:     # a new file as a patch from nothing (exit status 1 means "they differ")
        diff += run_git(root, "diff", "--no-index", "--", "/dev/null", path).stdout
    return {"commit": head.stdout.strip(), "clean": not (tracked or untracked),
            "changed": sorted(tracked + untracked), "diff": diff}


def foreign_checkout(folder: Path, root: Path = ROOT) -> Path | None:
    """The git checkout holding `folder` (or its nearest existing parent) when it is another fedlab checkout than
    `root`, the one fedlab is imported from (it holds `fedlab/__init__.py`); else None, also when git cannot
    tell. A table script run from there would record `root`'s commit while its plan and YAMLs come from the
    other checkout."""
    folder = Path(folder).resolve()
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        top = run_git(folder, "rev-parse", "--show-toplevel")
    except (OSError, subprocess.SubprocessError):
        return None
    if top.returncode != 0 or not top.stdout.strip():
        return None
    other = Path(top.stdout.strip()).resolve()
    if not (other / "fedlab" / "__init__.py").is_file():
        return None
    try:
        same = os.path.samefile(other, root)        # one folder, however its path is spelled (case, links)
    except OSError:
        same = other == Path(root).resolve()
    return None if same else other


def diff_sha256(diff: str) -> str:
    return hashlib.sha256(diff.encode()).hexdigest()


def source_environment(threads: int, state: dict) -> dict:
    """This process's numerics at `threads` (its machine digest and numerics fingerprint included) with the
    commit and cleanliness of `state` (a `git_state()`): what every record of a number carries."""
    from fedlab import numerics

    env = numerics.with_digest(numerics.environment(threads=threads))
    env.update(numerics_fingerprint=numerics.fingerprint(env), commit=state["commit"], clean=state["clean"])
    return env


def run_environment(cfg, state: dict | None = None) -> dict:
    """The environment fingerprint of a run of `cfg` in this process (numerics, libraries, source), with the
    dirty tree's diff hash; `state` is a `git_state()` already taken."""
    state = git_state() if state is None else state
    env = source_environment(cfg.backend.threads, state)
    if state["clean"] is False:
        env["diff_sha256"] = diff_sha256(state["diff"])
        env["changed"] = state["changed"]
    return env


def mlflow_tags(env: dict) -> dict:
    """The environment as MLflow tags (`fedlab.env.<key>`), nested values flattened."""
    out = {}
    for k, v in env.items():
        if isinstance(v, dict):
            out.update({f"fedlab.env.{k}.{kk}": str(vv) for kk, vv in v.items()})
        elif isinstance(v, list):
            out[f"fedlab.env.{k}"] = ", ".join(map(str, v))[:5000]
        else:
            out[f"fedlab.env.{k}"] = str(v)
    return out
