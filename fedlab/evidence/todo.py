"""What each system's claims still lack, from the records (`fedlab results --todo`).

For every row a system's claims read (their own rows and their controls' rows), in the table's plan:

- the seeds of 0 .. CLAIM_SEEDS − 1 it holds no record of (*missing*; a row made at seeds of its own,
  `records.Planned.seeds`, those);
- the seeds whose record is not current here (`records.stale_reason`: another config, other numerics or other
  zoo weights made it), with the reason;
- whether its current seeds were made at several commits (`unify.mixed_rows`; `make_tables.py --mixed` gives
  the commands that bring them to one), and the seeds made from uncommitted changes or outside git;

with the run time the runs to make would take, estimated as the median recorded run time of the row's seeds
(for a row with no record, of the planned rows with its config and overrides, else unknown; marked where every
timed record was made by another config), plus the recorded run time of the seeds a re-make at one commit takes,
and the table command that makes them. The claims
whose control fails are listed with the tasks and seeds it fails: more seeds do not mend them, another budget or
task set does.

Each system's rows that no claim reads (shown on its page with their cells marked) follow its claims' rows
where their records are not current, with their run time and commands; no seed target applies to them.

The scripts that write a page of their own (budgets chosen on validation data, model families, tuning, server
steps: a script that declares `OUT`, `scripts.page_scripts`) follow, each with its rows never run and its rows
whose records are not current; their claims are the choices the tables rest on, so they have no seed target
here: each script runs its own default seeds.

Nothing is run or written. Records are judged as this machine would judge them; `FEDLAB_JUDGE_NUMERICS=reference`
judges them as the reference machine kind does (`fedlab.numerics.judge_as`).
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path

from fedlab.evidence import unify
from fedlab.evidence.provenance import git_state, made_dirty, made_outside_git
from fedlab.evidence.records import OTHER_NUMERICS, OUTDATED
from fedlab.evidence.unify import Mixed, _clean, _commit, _seconds, mixed_rows
from fedlab.evidence.verdicts import CLAIM_SEEDS


@dataclass
class Lack:
    """One row a system's claims read, with what it lacks and where its runs are to be made so that the row ends
    at one commit: at HEAD, or (`at`) at the one clean commit that made all of its current seeds, in a worktree
    merged back, for a row that only misses seeds."""
    row: str
    missing: tuple[int, ...] = ()                       # target seeds without a record
    stale: dict[int, str] = field(default_factory=dict)  # seed → why its record is not current
    rerun: tuple[int, ...] = ()                         # current seeds re-made at HEAD so the row ends at one commit
    at: str | None = None                               # the commit to make `missing` at (None: HEAD)
    mixed: Mixed | None = None                          # nothing to run, but its seeds come from several commits
    unclean: tuple[int, ...] = ()                       # seeds made from uncommitted changes or outside git
    per_seed: float | None = None                       # median recorded run time of one seed (None: no record)
    timed_elsewhere: bool = False                       # every record `per_seed` comes from another config made
    planned: bool = True                                # the row is in the table's plan

    @property
    def to_run(self) -> tuple[int, ...]:
        """The seeds to make: the missing ones, those whose record is not current, and `rerun`."""
        return tuple(sorted({*self.missing, *self.stale, *self.rerun}))

    @property
    def remake(self) -> tuple[int, ...]:
        """The seeds `--mixed` re-makes so that the row's seeds come from one commit (at the commit that made most
        of them, or the whole row at HEAD where no commit qualifies)."""
        return () if self.mixed is None else self.mixed.seeds

    @property
    def seconds(self) -> float | None:
        """The estimated run time of `to_run` and of the `remake` (None when the row has runs to make and no
        recorded run time to go by)."""
        again = self.mixed.seconds if self.mixed is not None else 0.0
        if not self.to_run:
            return again
        return None if self.per_seed is None else self.per_seed * len(self.to_run) + again

    def empty(self) -> bool:
        """Nothing to make, one clean commit, and in the plan."""
        return not self.to_run and self.mixed is None and not self.unclean and self.planned


@dataclass
class SystemTodo:
    """One system's lacks, its claims whose control fails, and its table script."""
    name: str
    script: str
    lacks: list[Lack]
    no_control: list[tuple[str, str]]                   # (claim, "control: task in seeds …; …")
    folder: str = ""                                    # the table's folder, relative to the repository root
    plan_keys: tuple[str, ...] = ()                     # every row of the table's plan
    shown: list[Lack] = field(default_factory=list)     # rows no claim reads, with records not current

    @property
    def making(self) -> list[Lack]:
        """The planned rows with runs to make: seeds to run, or seeds to re-make at one commit."""
        return [x for x in self.lacks if x.planned and (x.to_run or x.remake)]

    @property
    def runs(self) -> int:
        """How many runs `making` takes, re-makes included."""
        return sum(len(x.to_run) + len(x.remake) for x in self.making)

    @property
    def seconds(self) -> float:
        """The estimated run time of every planned row's runs."""
        return sum(x.seconds or 0.0 for x in self.lacks if x.planned)

    @property
    def timed_elsewhere(self) -> int:
        """Rows of `making` whose estimate comes from runs another config made."""
        return sum(x.timed_elsewhere for x in self.making)

    @property
    def unknown(self) -> int:
        """Planned rows with runs to make and no recorded run time to estimate them by."""
        return sum(1 for x in self.lacks if x.planned and x.to_run and x.seconds is None)


def claim_rows(claims) -> list[str]:
    """Every row the claims read, their controls' rows included, in order of first use."""
    from fedlab.evidence.claims import claim_keys

    return list(dict.fromkeys(k for c in claims for k in (*claim_keys(c), *(r for ctl in c.controls()
                                                                           for r in ctl.rows))))


def _same_config_runs(results, plan, row) -> list[dict]:
    """The timed records of the planned rows with `row`'s config and overrides (a control made again at seeds of
    its own times its runs by the row it repeats)."""
    if row.config is None:
        return []
    return [r for p in plan if p.key != row.key and (p.config, p.overrides) == (row.config, row.overrides)
            for r in results.runs(p.key) if _seconds(r) > 0]


def lacks(results, plan, rows: list[str], target: int = CLAIM_SEEDS, head: str | None = None) -> list[Lack]:
    """What each of `rows` lacks in `results` (a `records.Results`) for `plan` (the table's `Planned` rows), and
    where to make it so that each row ends at one clean commit: a row with a record not current, or with current
    seeds at several commits or not clean, is made whole at HEAD (`head`: HEAD's commit, asked of git when None);
    a row that only misses seeds makes them at the clean commit of its current seeds where the code there records
    this machine's kind (`unify.records_kind_at`; else the row is made whole at HEAD); a row with nothing to run
    whose seeds mix commits is `mixed` (`unify.mixed_rows`: `make_tables.py --mixed` re-makes them). Every row,
    empty ones included, in the order given."""
    head = git_state()["commit"] if head is None else head
    by_key = {p.key: p for p in plan}
    current: dict[tuple[str, int], bool] = {}
    out = []
    for k in rows:
        recs = results.runs(k)
        timed = [r for r in recs if _seconds(r) > 0] or (_same_config_runs(results, plan, by_key[k])
                                                          if k in by_key else [])
        lack = Lack(k, per_seed=statistics.median(map(_seconds, timed)) if timed else None, planned=k in by_key)
        own = by_key[k].seeds if lack.planned else None       # a row made at seeds of its own: those
        held = {r["seed"] for r in recs}
        lack.missing = tuple(s for s in (range(target) if own is None else own) if s not in held)
        lack.unclean = tuple(sorted(r["seed"] for r in recs if made_dirty(r) or made_outside_git(r)))
        made: dict[int, str | None] = {}
        if lack.planned:
            for rec in recs:
                why = results.why_stale(by_key[k], rec)
                current[(k, rec["seed"])] = why is None
                if why is not None:
                    lack.stale[rec["seed"]] = why
                else:
                    made[rec["seed"]] = _commit(rec)
        lack.timed_elsewhere = bool(timed) and all(lack.stale.get(r["seed"]) == OUTDATED for r in timed)
        commits = set(made.values())
        one = next(iter(commits)) if len(commits) == 1 and _clean(next(iter(commits))) else None
        elsewhere = one is not None and one != head
        if lack.stale or (lack.missing and commits and (one is None or elsewhere and not unify.records_kind_at(one))):
            lack.rerun = tuple(s for s, c in sorted(made.items()) if c != head)
            lack.unclean = tuple(s for s in lack.unclean if s not in lack.rerun)
        elif lack.missing and elsewhere:
            lack.at = one
        out.append(lack)
    planned = [x.row for x in out if x.planned and not x.to_run]
    mixed = {m.row: m for m in mixed_rows(results.records, planned,
                                           lambda rec: current.get((rec["key"], rec["seed"]), False))}
    for x in out:
        x.mixed = mixed.get(x.row)
    return out


def of_system(system) -> SystemTodo:
    """`system`'s (a `page.System`) lacks and its claims whose control fails."""
    from fedlab.evidence.page import assess_all
    from fedlab.evidence.records import Results

    results = Results(system.folder / "results.json")
    return of_assessed(system, results, assess_all(results, system))


def of_assessed(system, results, assessed) -> SystemTodo:
    """`of_system` from `system`'s records (`results`) and its claims as `page.assess_all` assessed them."""
    from fedlab.evidence.verdicts import NO_CONTROL
    from fedlab.files import canonical

    no_control = [(a.claim.claim, "; ".join(f"{st.control.name}: {st.failing()}" for st in a.control or ()
                                            if not st.holds))
                  for a in assessed if a.verdict.word == NO_CONTROL]
    plan = system.plan()
    read = claim_rows([a.claim for a in assessed])
    head = git_state()["commit"]
    return SystemTodo(system.name, system.script, lacks(results, plan, read, head=head), no_control,
                      canonical(system.folder), tuple(p.key for p in plan), shown_rows(results, plan, read, head))


def shown_rows(results, plan, read: list[str], head: str | None = None) -> list[Lack]:
    """The planned rows no claim reads (`read`: the rows the claims read) whose records are not current, or that
    miss seeds of their own (`records.Planned.seeds`): the page shows their cells marked, and no seed target
    applies to them, so a row's seeds not yet made are not counted (`head`: as `lacks` takes it)."""
    skip = set(read)
    return [x for x in lacks(results, plan, [p.key for p in plan if p.key not in skip], target=0, head=head)
            if x.to_run]


def _seeds(seeds) -> str:
    return ",".join(map(str, seeds))


def hours(seconds: float) -> str:
    """A run time in words: minutes below 0.1 h, else hours to one decimal."""
    return f"{seconds / 3600:.1f} h" if seconds >= 360 else f"{seconds / 60:.0f} min" if seconds >= 60 else "< 1 min"


def replaces_other_numerics() -> bool:
    """Whether the commands may replace records made with other numerics (a kind not measured, another mode or
    other libraries): on a measured kind (`numerics.is_measured_kind`), whose records are current everywhere, or
    when judging as the reference kind; not on an unmeasured kind, whose numbers are current only there."""
    from fedlab import numerics

    return numerics.judge_as() == "reference" or numerics.is_measured_kind()


def commands(todo: SystemTodo, replace_other: bool = True) -> list[str]:
    """The commands that make every planned row's runs: rows made at HEAD with the same seeds share one table
    command (`--rerun` where current seeds are re-made so the row ends at one commit; `--replace-other-numerics`
    where a replaced record was made with other numerics and `replace_other`); a row made at an older commit gets
    a worktree there, the run, and the merge back, one of each for the rows that share a commit and seeds
    (`unify.rows_commands`)."""
    from fedlab.evidence.unify import rows_commands, takes_exact_only

    groups: dict[tuple[tuple[int, ...], bool, bool], list[str]] = {}
    elsewhere: dict[tuple[str, tuple[int, ...]], list[str]] = {}
    for x in todo.lacks:
        if not (x.to_run and x.planned):
            continue
        if x.at is not None:
            elsewhere.setdefault((x.at, x.missing), []).append(x.row)
            continue
        other = replace_other and any(why == OTHER_NUMERICS for why in x.stale.values())
        groups.setdefault((x.to_run, bool(x.rerun), other), []).append(x.row)
    return [f"python {todo.script} --only '{','.join(r + '$' for r in rows)}' --seeds {_seeds(seeds)}"
            + (" --rerun" if rerun else "") + (" --replace-other-numerics" if other else "")
            for (seeds, rerun, other), rows in groups.items()] + [
        line for (commit, seeds), rows in elsewhere.items()
        for line in rows_commands(rows, commit, seeds, todo.script, todo.folder, todo.plan_keys,
                                  takes_exact_only(commit))]


def report(todo: SystemTodo, target: int = CLAIM_SEEDS, replace_other: bool = True) -> list[str]:
    """One system's todo as Markdown lines (`replace_other`: `commands`)."""
    open_rows = [x for x in todo.lacks if not x.empty()]
    head = f"## {todo.name} (`{todo.script}`)"
    if not open_rows and not todo.no_control:
        return [head, "", f"Every row its claims read holds seeds 0–{target - 1} (a control made at seeds of "
                          "its own, those), current, each row at one commit; every claim's control holds on "
                          "the tasks it is judged on.", "", *shown_report(todo)]
    lines = [head, ""]
    if open_rows:
        estimate = hours(todo.seconds) + (f", and {todo.unknown} row(s) with no recorded run time" if todo.unknown
                                          else "")
        lines += [f"{len(open_rows)} of the {len(todo.lacks)} rows its claims read lack something; the runs to make "
                  f"take about {estimate} (the rows' median recorded run time per seed, and the recorded run time "
                  "of the seeds a re-make at one commit takes).", "",
                  "| row | seeds missing | seeds not current | seeds at several commits or not clean | made at | estimate |",
                  "|---|---|---|---|---|---|"]
        for x in open_rows:
            why = sorted(set(x.stale.values()))
            stale = (f"{_seeds(sorted(x.stale))} ({'; '.join(why)})" if x.stale else "")
            mixed = "; ".join(w for w in (
                x.mixed and f"{len(x.mixed.commits)} commits; re-make {_seeds(x.mixed.seeds)} at "
                            f"{(x.mixed.commit or 'HEAD')[:7]} (`--mixed`)",
                x.unclean and f"{_seeds(x.unclean)} made from uncommitted changes or outside git") if w)
            row = f"`{x.row}`" + ("" if x.planned else " (not in the table's plan)")
            est = ("" if not x.to_run and x.mixed is None else "no recorded run time" if x.seconds is None
                   else hours(x.seconds) + (" (another config's run time)" if x.timed_elsewhere else ""))
            where = ("" if not x.to_run else f"{x.at[:7]} (a worktree)" if x.at else
                     f"HEAD (re-makes {_seeds(x.rerun)} too)" if x.rerun else "HEAD")
            lines.append(f"| {row} | {_seeds(x.missing)} | {stale} | {mixed} | {where} | {est} |")
        cmds = commands(todo, replace_other)
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
    return lines + shown_report(todo)


def shown_report(todo: SystemTodo) -> list[str]:
    """The rows no claim reads whose records are not current (`SystemTodo.shown`), as Markdown lines with their
    run time and the commands that re-make them; nothing when there are none."""
    if not todo.shown:
        return []
    shown = replace(todo, lacks=todo.shown)
    rows = ", ".join(f"`{x.row}` ({_seeds(x.to_run)})" for x in shown.lacks)
    return [f"Rows no claim reads, shown on the page with their cells marked, whose records are not current "
            f"({len(shown.lacks)}; about {hours(shown.seconds)}"
            + (f", and {shown.unknown} with no recorded run time" if shown.unknown else "")
            + f"; not counted above): {rows}.", "",
            "```bash", *commands(shown), "```", ""]


@dataclass
class PageTodo:
    """A script that writes a page of its own: its rows never run, and its rows' seeds not current."""
    script: str
    never_run: list[str]
    stale: dict[str, tuple[int, ...]]
    per_seed: float | None                              # median recorded run time of one seed of its rows to make


def _row_seconds(results, table, key: str) -> list[float]:
    """The recorded run times of a page's row `key`: its own records', or where it has none, those of the table's
    row it varies (its key less the page's first segment: `lr0.001/real/x` → `real/x`; `table` None: none)."""
    own = [s for s in map(_seconds, results.runs(key)) if s > 0]
    if own or table is None or "/" not in key:
        return own
    return [s for s in map(_seconds, table.runs(key.split("/", 1)[1])) if s > 0]


def of_page(name: str) -> PageTodo:
    """`name` ("elsa/budget") checked as its table would run it: rows without records, seeds not current."""
    from fedlab.evidence.page import stale_seeds
    from fedlab.evidence.records import Results
    from fedlab.evidence.scripts import load_table

    system, script = name.split("/")
    mod = load_table(system, script=script)
    results = Results(mod.OUT / "results.json")
    table_file = Path(mod.OUT).parent / "results.json"
    table = Results(table_file) if table_file.is_file() else None
    never, times = [], []
    plan = mod.plan()
    for p in plan:
        recs = results.runs(p.key)
        times += [s for s in map(_seconds, recs) if s > 0]
        if not recs:
            never.append(p.key)
    stale = {k: tuple(v) for k, v in stale_seeds(results, plan, results.stale(plan)).items()}
    # the rows to make, timed by their own records or their table twins'; the script's runs where none is timed
    lacking = [s for k in (*never, *stale) for s in _row_seconds(results, table, k)]
    times = lacking or times
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
                        "not current (rows with fewer seeds than its default are not counted here; its page says "
                        "which seeds each row holds).", ""]


def main() -> int:
    """Print every system's todo (`fedlab results --todo`)."""
    from fedlab import numerics
    from fedlab.evidence.scripts import page_scripts, systems

    todos = [of_system(mod.SYSTEM) for mod in systems()]
    view = ("as the reference machine kind judges them" if numerics.judge_as() == "reference" else
            "as this machine judges them" + ("" if numerics.is_measured_kind() else
                                             f" ({numerics.here_words()}: {numerics.JUDGE_ENV}=reference judges as "
                                             "the reference)"))
    total = sum(t.seconds for t in todos)
    replace = replaces_other_numerics()
    warn = [] if replace else [
        f"This machine computes as no measured kind ({numerics.here_words()}): its records are current only here, "
        "and the table scripts refuse to "
        "replace records of unmeasured numerics with them without `--replace-other-numerics`, which the commands "
        "below leave out.", ""]
    if numerics.judge_as() != "reference" and numerics.is_measured_kind() and not numerics.is_reference_kind():
        warn += [f"This machine is the measured kind {numerics.this_kind()}, not the reference: code older than "
                 f"{unify.KINDS_SINCE} wrote the reference's numerics fingerprint on every kind, so a row made by such "
                 "code that misses seeds is re-made whole at HEAD here (a worktree at its commit would label its "
                 "runs the reference's).", ""]
    print("\n".join([f"# What the claims still lack, {view}", "",
                     f"Target: seeds 0–{CLAIM_SEEDS - 1} of every row a claim reads (a control made at seeds of its "
                     f"own, `Planned.seeds`, those), current, at one clean commit per row. The claims' runs take "
                     f"about {hours(total)} in all, one run at a time (the rows no claim reads and the pages of "
                     "their own, below, come on top, the pages first: a row that takes its setting from a page — a "
                     "budget's rate, Co-PLMs' α and β — is re-configured when the page's choice moves, and its "
                     "records are then not current).", "", *warn,
                     *(line for t in todos for line in report(t, replace_other=replace)),
                     *page_report([of_page(n) for n in page_scripts()])]))
    return 0
