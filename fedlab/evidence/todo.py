"""What each system's claims still lack, from the records (`fedlab results --todo`).

For every row a system's claims read (their own rows and their controls' rows), in the table's plan:

- the seeds of 0 .. CLAIM_SEEDS − 1 it holds no record of (*missing*);
- the seeds whose record is not current here (`records.stale_reason`: another config, other numerics or other
  zoo weights made it), with the reason;
- whether its current seeds were made at several commits (`unify.mixed_rows`; `make_tables.py --mixed` gives
  the commands that bring them to one), and the seeds made from uncommitted changes or outside git;

with the run time the runs to make would take, estimated as the median recorded run time of the row's seeds
(unknown for a row with no record), and the table command that makes them. The claims whose control fails are
listed with the tasks and seeds it fails: more seeds do not mend them, another budget or task set does.

The scripts that write a page of their own (budgets chosen on validation data, model families, tuning, server
steps: a script that declares `OUT`, `scripts.page_scripts`) follow, each with its rows never run and its rows whose records are not
current; their claims are the choices the tables rest on, so they have no seed target here: each script runs
its own default seeds.

Nothing is run or written. Records are judged as this machine would judge them; `FEDLAB_JUDGE_NUMERICS=reference`
judges them as the reference machine kind does (`fedlab.numerics.judge_as`).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from fedlab.evidence.records import OTHER_NUMERICS, stale_reason
from fedlab.evidence.unify import Mixed, mixed_rows
from fedlab.evidence.verdicts import CLAIM_SEEDS


@dataclass
class Lack:
    """One row a system's claims read, with what it lacks."""
    row: str
    missing: tuple[int, ...] = ()                       # target seeds without a record
    stale: dict[int, str] = field(default_factory=dict)  # seed → why its record is not current
    mixed: Mixed | None = None                          # its current seeds come from several commits
    unclean: tuple[int, ...] = ()                       # seeds made from uncommitted changes or outside git
    per_seed: float | None = None                       # median recorded run time of one seed (None: no record)
    planned: bool = True                                # the row is in the table's plan

    @property
    def to_run(self) -> tuple[int, ...]:
        """The seeds a table run would make: the missing ones and those whose record is not current."""
        return tuple(sorted({*self.missing, *self.stale}))

    @property
    def seconds(self) -> float | None:
        """The estimated run time of `to_run` (None when the row has no recorded run time to go by)."""
        return None if self.per_seed is None else self.per_seed * len(self.to_run)

    def empty(self) -> bool:
        return not self.to_run and self.mixed is None and not self.unclean and self.planned


@dataclass
class SystemTodo:
    """One system's lacks, its claims whose control fails, and its table script."""
    name: str
    script: str
    lacks: list[Lack]
    no_control: list[tuple[str, str]]                   # (claim, "control: task in seeds …; …")

    @property
    def seconds(self) -> float:
        return sum(x.seconds or 0.0 for x in self.lacks)

    @property
    def unknown(self) -> int:
        """Rows with runs to make and no recorded run time to estimate them by."""
        return sum(1 for x in self.lacks if x.to_run and x.seconds is None)


def _seconds(rec: dict) -> float | None:
    try:
        s = float(rec.get("seconds"))
    except (TypeError, ValueError):
        return None
    return s if s > 0 and s == s and s != float("inf") else None


def claim_rows(claims) -> list[str]:
    """Every row the claims read, their controls' rows included, in order of first use."""
    from fedlab.evidence.claims import claim_keys

    return list(dict.fromkeys(k for c in claims for k in (*claim_keys(c), *(r for ctl in c.controls()
                                                                           for r in ctl.rows))))


def lacks(results, plan, rows: list[str], target: int = CLAIM_SEEDS) -> list[Lack]:
    """What each of `rows` lacks in `results` (a `records.Results`) for `plan` (the table's `Planned` rows):
    every row, empty ones included, in the order given."""
    by_key = {p.key: p for p in plan}
    current: dict[tuple[str, int], bool] = {}
    out = []
    for k in rows:
        recs = results.runs(k)
        times = [s for s in map(_seconds, recs) if s is not None]
        lack = Lack(k, per_seed=statistics.median(times) if times else None, planned=k in by_key)
        lack.missing = tuple(s for s in range(target) if s not in {r["seed"] for r in recs})
        lack.unclean = tuple(sorted(r["seed"] for r in recs if str(r.get("git")).endswith("+dirty")
                                    or ("git" in r and r["git"] is None)))
        if lack.planned:
            for rec in recs:
                why = stale_reason(rec, by_key[k].resolve(rec["seed"]))
                current[(k, rec["seed"])] = why is None
                if why is not None:
                    lack.stale[rec["seed"]] = why
        out.append(lack)
    planned = [x.row for x in out if x.planned]
    mixed = {m.row: m for m in mixed_rows(results.records, planned,
                                           lambda rec: current.get((rec["key"], rec["seed"]), False))}
    for x in out:
        m = mixed.get(x.row)
        # a row whose seeds to re-make at HEAD are all re-run anyway needs nothing more to reach one commit
        x.mixed = None if m is None or (m.commit is None and set(m.seeds) <= set(x.to_run)) else m
    return out


def of_system(system) -> SystemTodo:
    """`system`'s (a `page.System`) lacks and its claims whose control fails."""
    from fedlab.evidence.page import assess_all
    from fedlab.evidence.records import Results
    from fedlab.evidence.verdicts import NO_CONTROL

    results = Results(system.folder / "results.json")
    claims = system.claims(results)
    no_control = []
    for a in assess_all(results, system):
        if a.verdict.word == NO_CONTROL:
            fails = "; ".join(f"{st.control.name}: {st.failing()}" for st in a.control or () if not st.holds)
            no_control.append((a.claim.claim, fails))
    return SystemTodo(system.name, system.script, lacks(results, system.plan(), claim_rows(claims)), no_control)


def _seeds(seeds) -> str:
    return ",".join(map(str, seeds))


def hours(seconds: float) -> str:
    """A run time in words: minutes below 0.1 h, else hours to one decimal."""
    return f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds / 60:.0f} min" if seconds >= 60 else "< 1 min"


def commands(todo: SystemTodo) -> list[str]:
    """The table commands that make every row's runs to make: rows with the same seeds to run share one, and
    `--replace-other-numerics` is given where a record it replaces was made with other numerics."""
    groups: dict[tuple[tuple[int, ...], bool], list[str]] = {}
    for x in todo.lacks:
        if x.to_run and x.planned:
            other = any(why == OTHER_NUMERICS for why in x.stale.values())
            groups.setdefault((x.to_run, other), []).append(x.row)
    return [f"python {todo.script} --only '{','.join(r + '$' for r in rows)}' --seeds {_seeds(seeds)}"
            + (" --replace-other-numerics" if other else "") for (seeds, other), rows in groups.items()]


def report(todo: SystemTodo, target: int = CLAIM_SEEDS) -> list[str]:
    """One system's todo as Markdown lines."""
    open_rows = [x for x in todo.lacks if not x.empty()]
    head = f"## {todo.name} (`{todo.script}`)"
    if not open_rows and not todo.no_control:
        return [head, "", f"Every row its claims read holds seeds 0–{target - 1}, current, each row at one "
                          "commit; every control holds.", ""]
    lines = [head, ""]
    if open_rows:
        estimate = hours(todo.seconds) + (f", and {todo.unknown} row(s) never run" if todo.unknown else "")
        lines += [f"{len(open_rows)} of the {len(todo.lacks)} rows its claims read lack something; the runs to make "
                  f"take about {estimate} (the rows' median recorded run time per seed).", "",
                  "| row | seeds missing | seeds not current | seeds at several commits or not clean | estimate |",
                  "|---|---|---|---|---|"]
        for x in open_rows:
            why = sorted(set(x.stale.values()))
            stale = (f"{_seeds(sorted(x.stale))} ({'; '.join(why)})" if x.stale else "")
            mixed = "; ".join(w for w in (
                x.mixed and f"{len(x.mixed.commits)} commits; re-make {_seeds(x.mixed.seeds)} at "
                            f"{(x.mixed.commit or 'HEAD')[:7]} (`--mixed`)",
                x.unclean and f"{_seeds(x.unclean)} made from uncommitted changes or outside git") if w)
            row = f"`{x.row}`" + ("" if x.planned else " (not in the table's plan)")
            est = "" if not x.to_run else "never run" if x.seconds is None else hours(x.seconds)
            lines.append(f"| {row} | {_seeds(x.missing)} | {stale} | {mixed} | {est} |")
        cmds = commands(todo)
        if cmds:
            lines += ["", "```bash", *cmds, "```"]
        if any(x.mixed for x in open_rows):
            lines += ["", f"`python {todo.script} --mixed` prints the commands that bring each row's seeds to one "
                          "commit (worktrees at that commit, merged back)."]
        lines.append("")
    if todo.no_control:
        lines += [f"Claims whose control fails ({len(todo.no_control)}; more seeds do not mend these):", ""]
        lines += [f"- {claim} — {fails}" for claim, fails in todo.no_control]
        lines.append("")
    return lines


@dataclass
class PageTodo:
    """A script that writes a page of its own: its rows never run, and its rows' seeds not current."""
    script: str
    never_run: list[str]
    stale: dict[str, tuple[int, ...]]
    per_seed: float | None                              # median recorded run time of one seed over the script


def of_page(name: str) -> PageTodo:
    """`name` ("elsa/budget") checked as its table would run it: rows without records, seeds not current."""
    from fedlab.evidence.records import Results
    from fedlab.evidence.scripts import load_table

    system, script = name.split("/")
    mod = load_table(system, script=script)
    results = Results(mod.OUT / "results.json")
    never, stale, times = [], {}, []
    for p in mod.plan():
        recs = results.runs(p.key)
        times += [s for s in map(_seconds, recs) if s is not None]
        if not recs:
            never.append(p.key)
        bad = tuple(sorted(r["seed"] for r in recs if stale_reason(r, p.resolve(r["seed"])) is not None))
        if bad:
            stale[p.key] = bad
    return PageTodo(f"experiments/{name}.py", never, stale, statistics.median(times) if times else None)


def page_report(pages: list[PageTodo]) -> list[str]:
    """The pages' todo as Markdown lines: one table row per script that lacks something."""
    open_pages = [p for p in pages if p.never_run or p.stale]
    lines = ["## Pages of their own (budgets, families, tuning)", ""]
    if not open_pages:
        return lines + ["Every row of every such script has records, all current.", ""]
    lines += ["| script | rows never run | rows with seeds not current | one seed takes (median) |", "|---|---|---|---|"]
    for p in open_pages:
        never = (f"{len(p.never_run)}: " + ", ".join(f"`{k}`" for k in p.never_run[:6])
                 + (", …" if len(p.never_run) > 6 else "")) if p.never_run else ""
        stale = (f"{len(p.stale)} ({sum(map(len, p.stale.values()))} seeds)" if p.stale else "")
        per = "" if p.per_seed is None else hours(p.per_seed)
        lines.append(f"| `python {p.script}` | {never} | {stale} | {per} |")
    return lines + ["", "Each script, run as named, makes its rows at its own default seeds and re-runs the seeds "
                        "not current (`--replace-other-numerics` where other numerics made them).", ""]


def main() -> int:
    """Print every system's todo (`fedlab results --todo`)."""
    from fedlab import numerics
    from fedlab.evidence.scripts import page_scripts, systems

    todos = [of_system(mod.SYSTEM) for mod in systems()]
    view = ("as the reference machine kind judges them" if numerics.judge_as() == "reference" else
            "as this machine judges them" + ("" if numerics.is_reference_kind() else
                                             f" (numerics digest {numerics.machine_digest()}, not the reference "
                                             f"kind's: {numerics.JUDGE_ENV}=reference judges as the reference)"))
    total = sum(t.seconds for t in todos)
    print("\n".join([f"# What the claims still lack, {view}", "",
                     f"Target: seeds 0–{CLAIM_SEEDS - 1} of every row a claim reads, current, at one commit per row. "
                     f"Runs to make: about {hours(total)} in all, one run at a time.", "",
                     *(line for t in todos for line in report(t)),
                     *page_report([of_page(n) for n in page_scripts()])]))
    return 0
