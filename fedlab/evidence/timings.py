"""How long the shipped runs and the zoo's builds took, as their records say, written into
docs/getting-started.md between markers by `fedlab results` (`--check` fails where the page differs), so that
no run time in the documents is typed by hand.

A shipped YAML's runs are the table records its config made: a record whose `config_hash` equals `run_key` of
the YAML loaded with the record's seed, that is, what `fedlab run YAML seed=S` runs now. Their times are the
recorded `seconds`, each run's elapsed time beside whatever else its machine ran then (table scripts run one
or two jobs on two cores): a guide to a run's size, not a benchmark (`benchmarks/` measures speed). The zoo's
build times are the shipped manifest's `build_seconds`, one build on one thread, with the CPU it ran on.
"""
from __future__ import annotations

import re
import statistics
from pathlib import Path

from fedlab.evidence.claims import block_markers
from fedlab.evidence.records import ROOT
from fedlab.evidence.runner import TABLE_SEEDS

PAGE = Path("docs") / "getting-started.md"
RUNS, ZOO = "run-times", "zoo-build-times"


def shipped_yamls(root: Path = ROOT) -> list[Path]:
    """The run configs shipped under experiments/ (one folder down: each system's own YAMLs)."""
    return sorted((Path(root) / "experiments").glob("*/*.yaml"))


def table_records(root: Path = ROOT) -> list[dict]:
    """Every record of every table script's `results.json` under experiments/ (pages of their own included)."""
    from fedlab.evidence.records import Results

    out = []
    for path in sorted((Path(root) / "experiments").rglob("results.json")):
        out.extend(Results(path).records.values())
    return out


def runs_of(yaml: Path, records: list[dict], seeds=TABLE_SEEDS) -> list[dict]:
    """The records `yaml` made: those whose config hash is the YAML's at their seed, over `seeds`."""
    from fedlab.config import load_config, replace
    from fedlab.runtime.federation import run_key

    cfg = load_config(yaml)
    keys = {(s, run_key(replace(cfg, seed=s))) for s in seeds}
    return [r for r in records if (r.get("seed"), r.get("config_hash")) in keys and r.get("seconds") is not None]


def _kinds(runs: list[dict]) -> str:
    from collections import Counter

    from fedlab import numerics

    made = Counter(numerics.kind_of(r.get("environment")) or "numerics of no measured kind" for r in runs)
    return "; ".join(f"{kind} × {n}" for kind, n in sorted(made.items()))


def _seconds(x: float) -> str:
    return f"{x:,.0f}" if x >= 10 else f"{x:.1f}"


def run_lines(root: Path = ROOT) -> list[str]:
    """The table of every shipped YAML a table row runs as it is: its records' count, median and range of
    recorded seconds, the machine kinds that made them and the rows they belong to; then the YAMLs no record
    was made by."""
    records = table_records(root)
    rows, none = [], []
    for y in shipped_yamls(root):
        rel = y.relative_to(root).as_posix()
        runs = runs_of(y, records)
        if not runs:
            none.append(f"`{rel}`")
            continue
        secs = sorted(r["seconds"] for r in runs)
        keys = sorted({r["key"] for r in runs})
        rows.append(f"| `fedlab run {rel}` | {len(runs)} | {_seconds(statistics.median(secs))} "
                    f"({_seconds(secs[0])}–{_seconds(secs[-1])}) | {_kinds(runs)} | "
                    + ", ".join(f"`{k}`" for k in keys) + " |")
    return ["| run | runs recorded | wall s: median (fastest–slowest) | made on | table rows |",
            "|---|---|---|---|---|", *rows, "",
            f"No table row runs these as they are (seeds {TABLE_SEEDS[0]}–{TABLE_SEEDS[-1]}), so no run time is recorded for "
            f"them: {', '.join(none) if none else 'none'}."]


def zoo_lines(root: Path = ROOT) -> list[str]:
    """The shipped zoo's build times from its manifest: model, parameters, seconds, the CPU it was built on."""
    from fedlab.models import shipped

    manifest = shipped.manifest(Path(root) / "fedlab" / "models" / "shipped")
    out = ["| model | parameters | build s | built on |", "|---|---|---|---|"]
    for name, entry in sorted(manifest.items(), key=lambda kv: (-(kv[1].get("build_seconds") or 0), kv[0])):
        on = entry.get("built_on") or {}
        where = (f"{on.get('cpu', '?')}, {on.get('numerics', '?')} numerics, {on.get('threads', '?')} thread(s)"
                 if on else "not recorded")
        secs = entry.get("build_seconds")
        out.append(f"| {name} | {entry.get('params', 0):,} | {'-' if secs is None else _seconds(secs)} | {where} |")
    return out


def _fill(text: str, name: str, lines: list[str]) -> str:
    begin, end = block_markers(name)
    if begin not in text or end not in text:
        return text
    block = "\n".join([begin, *lines, end])
    return re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)


def pages(root: Path = ROOT) -> dict[Path, str]:
    """{docs/getting-started.md: its text with the `run-times` and `zoo-build-times` blocks filled} ({} when the
    page does not exist)."""
    page = Path(root) / PAGE
    if not page.exists():
        return {}
    text = page.read_text()
    text = _fill(text, RUNS, run_lines(root)) if block_markers(RUNS)[0] in text else text
    text = _fill(text, ZOO, zoo_lines(root)) if block_markers(ZOO)[0] in text else text
    return {page: text}
