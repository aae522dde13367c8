"""Positive controls: the reference rows a claim rests on must learn every task the claim reads.

A `Control` names its rows, its tasks, how a record scores a task and the bar that score must reach — chance
plus a margin (`above_chance`) or the row's own zero-shot plus a margin (`above_zero_shot`), the system's rule
written once in its table module. `check` evaluates it per row, task and seed from the records: the control
holds when every seed of every row clears the bar on every task. A claim resting on a control that does not
hold gets the verdict "no control" (`fedlab.evidence.claims`), with the failing tasks and seeds named.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

Score = Callable[[dict, str], "float | None"]        # (record, task) → a score in [0, 1], None when absent


@dataclass(frozen=True)
class Control:
    name: str                                   # what must learn, in words ("centralized LLM")
    rows: tuple[str, ...]                       # the reference rows' keys
    tasks: tuple[str, ...]                      # the tasks it must learn
    score: Score                                # (record, task) → score
    bar: Score                                  # (record, task) → the score to clear
    rule: str                                   # the bar in words ("zero-shot + 2 points")

    def on(self, tasks) -> Control:
        """The same control on a subset of its tasks (a claim that reads only those)."""
        tasks = tuple(t for t in self.tasks if t in set(tasks))
        return Control(self.name, self.rows, tasks, self.score, self.bar, self.rule)


def above_chance(name: str, rows, tasks, score: Score, chance: Callable[[str], float],
                 margin: float) -> Control:
    """A control whose rows must end `margin` points above each task's chance accuracy."""
    return Control(name, tuple(rows), tuple(tasks), score, lambda _rec, t: chance(t) + margin / 100,
                   f"chance + {margin:g} points")


def above_zero_shot(name: str, rows, tasks, score: Score, zero: Score, margin: float) -> Control:
    """A control whose rows must end `margin` points above their own zero-shot score (`zero(record, task)`, the
    same run's round 0 or another row's record of the same seed)."""
    def bar(rec, t):
        z = zero(rec, t)
        return None if z is None else z + margin / 100
    return Control(name, tuple(rows), tuple(tasks), score, bar, f"zero-shot + {margin:g} points")


def task_accuracy(prefix: str = "", which: str = "final") -> Score:
    """(record, task) → the record's `{prefix}acc/task_<task>` at the end ("final") or round 0 ("zero")."""
    return lambda rec, t: (rec.get(which) or {}).get(f"{prefix}acc/task_{t}")


@dataclass
class Status:
    """A control checked on the records: per (row, task), the seeds whose score clears the bar and those that
    do not; `missing` names (row, task) pairs without a score or a bar."""
    control: Control
    passed: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    failed: dict[tuple[str, str], list[int]] = field(default_factory=dict)
    missing: list[tuple[str, str]] = field(default_factory=list)
    seeds: int = 0                              # the most seeds any of its rows holds

    @property
    def run(self) -> bool:
        return self.seeds > 0

    @property
    def holds(self) -> bool:
        """Every row learns every task in every seed it holds (and every row and task has a score)."""
        return self.run and not self.missing and not any(self.failed.values())

    def failing_tasks(self) -> dict[str, str]:
        """{task: "in seeds 0, 2" | "in every seed"} of the tasks some row fails in some seed."""
        by_task: dict[str, set[int]] = {}
        every: dict[str, bool] = {}
        for (row, task), seeds in self.failed.items():
            if seeds:
                by_task.setdefault(task, set()).update(seeds)
                every[task] = every.get(task, True) and not self.passed.get((row, task))
        return {t: "in every seed" if every[t] else f"in seed{'s' if len(s) > 1 else ''} "
                f"{', '.join(map(str, sorted(s)))}" for t, s in by_task.items()}

    def failing(self) -> str:
        """The tasks and seeds that fail, in words ("sentiment in seeds 0, 2; entailment in every seed")."""
        if not self.run:
            return "no records"
        parts = [f"{t} {words}" for t, words in self.failing_tasks().items()]
        parts += [f"{t} not scored ({row})" for row, t in self.missing]
        return "; ".join(parts)

    def word(self) -> str:
        return "holds" if self.holds else "not run" if not self.run else "fails"


def check(results, control: Control) -> Status:
    """The control on `results` (a `fedlab.evidence.records.Results`)."""
    st = Status(control)
    for row in control.rows:
        recs = results.runs(row)
        st.seeds = max(st.seeds, len(recs))
        if not recs:
            continue
        for t in control.tasks:
            ok, bad = [], []
            for rec in recs:
                s, b = control.score(rec, t), control.bar(rec, t)
                if s is None or b is None:
                    st.missing.append((row, t))
                    break
                (ok if s >= b else bad).append(rec["seed"])
            st.passed[(row, t)], st.failed[(row, t)] = ok, bad
    if st.seeds and not all(results.runs(row) for row in control.rows):
        st.missing += [(row, "every task") for row in control.rows if not results.runs(row)]
    return st


def controls_table(results, controls: list[Control]) -> list[str]:
    """Markdown lines: one row per control — the rows it checks, its rule, per task the seeds that clear the
    bar (✗ where some do not), and whether it holds."""
    if not controls:
        return []
    out = ["| control | rows | bar | per task: seeds that clear it | status |", "|---|---|---|---|---|"]
    for c in controls:
        st = check(results, c)
        cells = []
        for t in c.tasks:
            ok = sum(len(st.passed.get((row, t), [])) for row in c.rows)
            bad = sum(len(st.failed.get((row, t), [])) for row in c.rows)
            if ok + bad:
                cells.append(f"{t} {ok}/{ok + bad}" + (" ✗" if bad else ""))
        status = st.word() + ("" if st.holds or not st.run else f": {st.failing()}")
        rows = ", ".join(f"`{r}`" for r in c.rows)
        out.append(f"| {c.name} | {rows} | {c.rule} | {'; '.join(cells) or '-'} | {status} |")
    return out
