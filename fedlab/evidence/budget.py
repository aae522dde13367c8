"""A table's budget chosen on validation data: the table's reference rows run over a grid of one setting (a
learning rate, local steps), each scored on rows held out of the training data (`data.evaluate_on=validation`,
so the test sets are never read), and the setting chosen is the one under which the references learn the most
(row, task, seed) cells by the table's own control rule — the rule its claims rest on. Ties go to the setting
listed first. The values are compared on the seeds every row holds at every value, so that seeds added at one
value (to confirm the choice there) do not weigh for it; what the claims read at the chosen value (`learnt`,
`unlearnt`) rests on every seed held there. A table script (`experiments/<system>/budget.py`) declares its `Grid` and runs it with
`runner.run_table(plan=…, render=…)`; its table then runs every row at `chosen(…)`. Records another config made
than a grid row resolves to now (older YAML or code, `outdated`) are set aside: no choice rests on them, and the
page names them until the grid is run again.
"""
from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from fedlab.evidence.controls import Control, check
from fedlab.evidence.records import Planned


def held_validation(per_task: int = 300, holdout: int = 32, keeps_shares: bool = False,
                    holdout_keeps_shares: bool = False) -> tuple[str, ...]:
    """The overrides that score a grid's rows on validation rows at a test set's resolution without changing what
    they train on: `per_task` fresh rows a task about the population its test set asks about, none asking what a
    test item asks (`data.validation_from=held`); for a task whose test set leaves that population no room,
    `holdout` prompts held out of its training rows, the rows that asked them refilled from the same training
    population (`data.validation_refills_train`), so every task trains on as many rows as the table's runs do.
    `keeps_shares`: the fresh rows carry each answer's share of the test set, and a task whose population cannot
    fill them is held out of its training rows instead (`data.validation_keeps_shares`); `holdout_keeps_shares`
    (with `keeps_shares`): the rows held out of the training rows carry the test set's answer shares too
    (`data.validation_holdout_keeps_shares`)."""
    return ("data.evaluate_on=validation", f"data.validation_per_task={per_task}", "data.validation_from=held",
            f"data.validation_holdout_per_task={holdout}", "data.validation_refills_train=true",
            *(("data.validation_keeps_shares=true",) if keeps_shares else ()),
            *(("data.validation_holdout_keeps_shares=true",) if holdout_keeps_shares else ()))


@dataclass(frozen=True)
class Grid:
    key: str                                    # the dotted config key chosen, e.g. "federation.lr"
    values: tuple[str, ...]                     # its candidate values, the preferred one first
    rows: tuple[Planned, ...]                   # the table's reference rows, as the table plans them
    controls: Callable[[str], list[Control]]    # a grid key prefix ("lr0.002/") → the controls on those rows
    validation: tuple[str, ...] = ("data.evaluate_on=validation",)
    seeds: int = 3                              # the seeds every cell needs before a choice is made
    # (row, value) → the overrides that set the value on that row, where one `key=value` does not (a model
    # family that fills a list of clients as long as the row's); None: `key=value` on every row
    setting: Callable[[Planned, str], tuple[str, ...]] | None = None

    def prefix(self, value: str) -> str:
        return f"{self.key.rsplit('.', 1)[-1]}{value}/"

    def overrides(self, row: Planned, value: str) -> tuple[str, ...]:
        """The overrides that run `row` at `value`."""
        return self.setting(row, value) if self.setting else (f"{self.key}={value}",)


def plan(grid: Grid) -> list[Planned]:
    """Every reference row at every value, scored on validation."""
    return [Planned(grid.prefix(v) + p.key, p.config, (*p.overrides, *grid.validation, *grid.overrides(p, v)),
                    f"{p.label} ({grid.key} = {v})", "validation") for v in grid.values for p in grid.rows]


def outdated(results, grid: Grid) -> set[str]:
    """Keys of the grid's rows (`plan`) holding a record another config made than the row resolves to now
    (`Results.outdated`): its numbers answer another question. Resolved once per set of records."""
    stamp = (grid.key, grid.values, tuple(p.key for p in grid.rows),
             tuple(sorted((k, r.get("config_hash")) for k, r in results.records.items())))
    cache = results.__dict__.setdefault("_budget_outdated", {})
    if stamp not in cache:
        cache[stamp] = results.outdated(plan(grid))
    return cache[stamp]


def compared_seeds(results, grid: Grid) -> list[int]:
    """The seeds every row holds at every value: the values are compared on these alone."""
    held = [{r.get("seed") for r in results.runs(grid.prefix(v) + p.key)} for v in grid.values for p in grid.rows]
    return sorted(set.intersection(*held)) if held else []


def _on_seeds(results, seeds):
    """`results` with the records of `seeds` only (a view for counting; never saved)."""
    import copy

    view = copy.copy(results)
    keep = set(seeds)
    view.records = {k: r for k, r in results.records.items() if r.get("seed") in keep}
    return view


def cells(results, grid: Grid) -> dict[str, tuple[int, int, int]]:
    """{value: (cells that clear the bar, cells scored — both on `compared_seeds` —, fewest seeds of a row)} over
    the value's controls."""
    out = {}
    compared = _on_seeds(results, compared_seeds(results, grid))
    for v in grid.values:
        ok = total = 0
        for c in grid.controls(grid.prefix(v)):
            st = check(compared, c)
            ok += sum(len(s) for s in st.passed.values())
            total += sum(len(s) for s in st.passed.values()) + sum(len(s) for s in st.failed.values())
        seeds = min((len(results.runs(grid.prefix(v) + p.key)) for p in grid.rows), default=0)
        out[v] = (ok, total, seeds)
    return out


def chosen(results, grid: Grid) -> str | None:
    """The value whose references learn the most cells on `compared_seeds` (the first listed on a tie), once those
    are `grid.seeds` or more (seeds every row holds at every value) and no row holds a record another config made
    (`outdated`); None before."""
    got = cells(results, grid)
    if len(compared_seeds(results, grid)) < grid.seeds or outdated(results, grid):
        return None
    return max(grid.values, key=lambda v: (got[v][0], -grid.values.index(v)))


def _checked(results, grid: Grid):
    """(the chosen value, [(control, its `check`)] at that value) in one pass over the controls; (None, [])
    before a choice."""
    value = chosen(results, grid)
    if value is None:
        return None, []
    return value, [(c, check(results, c)) for c in grid.controls(grid.prefix(value))]


def _never(grid: Grid, value: str, checked) -> dict[str, str]:
    never: dict[str, list[str]] = {}
    for c, st in checked:
        for t in c.tasks:
            scored = [st.passed.get((row, t)) is not None for row in c.rows]
            if all(scored) and not any(st.passed.get((row, t)) for row in c.rows):
                never.setdefault(t, []).append(f"the {c.name} ({c.rule})")
    return {t: f"{' and '.join(who)} clear{'s' if len(who) == 1 else ''} the bar in no seed on validation data "
               f"at `{grid.key}={value}`" for t, who in never.items()}


def unlearnt(results, grid: Grid) -> dict[str, str]:
    """{task: why} for the tasks some reference learns in no seed at the chosen value: no budget of the grid
    taught it there, so the table's claims leave it out rather than average over it. {} before a choice."""
    value, checked = _checked(results, grid)
    return {} if value is None else _never(grid, value, checked)


def unreliable(results, grid: Grid) -> dict[str, str]:
    """{task: why} for the tasks some reference does not learn in every seed at the chosen value (`unlearnt`'s
    among them, with their reason): a claim reading them would rest on a reference that learns them in some
    seeds only. {} before a choice."""
    value, checked = _checked(results, grid)
    if value is None:
        return {}
    out = _never(grid, value, checked)
    some: dict[str, list[str]] = {}
    for c, st in checked:
        for t in c.tasks:
            for row in c.rows:
                ok, bad = st.passed.get((row, t)) or [], st.failed.get((row, t)) or []
                if t not in out and bad:
                    some.setdefault(t, []).append(f"the {c.name} ({c.rule}) clears the bar in {len(ok)} of "
                                                  f"{len(ok) + len(bad)} seeds")
    out.update({t: f"{' and '.join(who)} on validation data at `{grid.key}={value}`, not in every seed"
                for t, who in some.items()})
    return out


def learnt(results, grid: Grid) -> dict[str, tuple[str, ...]]:
    """{control name: the tasks every row of that control learns in every seed at the chosen value}: the cells a
    table's claims can read with a reference that learnt them on validation. {} before a choice."""
    _, checked = _checked(results, grid)
    return {c.name: tuple(t for t in c.tasks if all(st.passed.get((row, t)) and not st.failed.get((row, t))
                                                   for row in c.rows))
            for c, st in checked}


def _script(folder, script: str = "budget"):
    """`experiments/<system>/<script>.py` as a module (it declares `GRID` and `OUT`), by the table scripts' one
    loader; None when there is none."""
    from pathlib import Path

    from fedlab.evidence.summary import load_table

    folder = Path(folder)
    return load_table(folder.name, folder.parent, script) if (folder / f"{script}.py").is_file() else None


def chain_of(folder, script: str = "budget", chain: str | None = None):
    """(records, [Grid, …]) of the table in `folder`: its script's `GRID` followed by the grids its `refined(records)`
    declares — each a further setting chosen at the values chosen before it — or, with `chain`, the grids the
    script's function of that name gives (a table of the system with references of its own, chosen at GRID's
    value). None when the table has no such script or no records yet."""
    from fedlab.evidence.records import Results

    mod = _script(folder, script)
    if mod is None or not (mod.OUT / "results.json").is_file():
        return None
    r = Results(mod.OUT / "results.json")
    if chain:
        return r, list(getattr(mod, chain)(r))
    return r, [mod.GRID, *(mod.refined(r) if hasattr(mod, "refined") else ())]


def final(results, grids) -> Grid | None:
    """The last grid of a chain that has made its choice: the setting every other value of the chain rests on."""
    done = [g for g in grids if chosen(results, g) is not None]
    return done[-1] if done else None


def left_out(folder, every_seed: bool = False, chain: str | None = None) -> dict[str, str]:
    """`unlearnt` of the table in `folder` at its chain's `final` choice (`unreliable` with `every_seed`: a task
    must be learnt in every seed to stay in the claims); `chain` names a chain of the script other than its
    GRID's (`chain_of`); {} when the table has no budget or no choice yet."""
    got = chain_of(folder, chain=chain)
    grid = final(*got) if got else None
    return (unreliable if every_seed else unlearnt)(got[0], grid) if grid else {}


def choices_in(folder, script: str = "budget", chain: str | None = None) -> dict[str, str]:
    """{config key: the value chosen} along the chain of `chain_of` (its grids that have chosen); {} when the table
    has no budget or no records yet."""
    return {grid.key: value for grid, value in _choices(folder, script, chain)}


def _choices(folder, script: str = "budget", chain: str | None = None) -> list[tuple[Grid, str]]:
    """(grid, the value it chose) along the chain of `chain_of`, for its grids that have chosen."""
    got = chain_of(folder, script, chain)
    made = [(grid, chosen(got[0], grid)) for grid in (got[1] if got else ())]
    return [(grid, value) for grid, value in made if value is not None]


def choices_said(folder, script: str = "budget", chain: str | None = None) -> str:
    """The choices of `choices_in`, each beside the grid it was chosen from, for a results page's opening
    paragraph: "`federation.lr` = 0.005 (tried 0.005, 0.002 and 0.01)"; "" before any grid has chosen."""
    return "; ".join(f"`{grid.key}` = {value} (tried {_listed(list(grid.values))})"
                     for grid, value in _choices(folder, script, chain))


def learnt_in(folder, script: str = "budget", chain: str | None = None) -> dict[str, tuple[str, ...]]:
    """`learnt` over the chain of `chain_of` (a later choice's controls replace an earlier one's of the same
    name); {} when the table has no budget or no records yet."""
    got = chain_of(folder, script, chain)
    out: dict[str, tuple[str, ...]] = {}
    for grid in got[1] if got else ():
        out.update(learnt(got[0], grid))
    return out


def _listed(names: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return " and ".join(names) if len(names) < 3 else f"{', '.join(names[:-1])} and {names[-1]}"


def _scored_on(grid: Grid) -> str:
    """Where the grid's validation rows come from, in words, as its first row resolves them
    (`data.validation_from`, `data.validation_refills_train`)."""
    rows = plan(grid)
    data = rows[0].resolve(0).data if rows else None
    if data is None or data.validation_from != "held":
        return "scored on rows held out of the training data"
    from fedlab.data.federated import validation_fallbacks

    refilled, kept = data.validation_refills_train, data.validation_keeps_shares
    fallbacks = validation_fallbacks(data)
    crowded = [t for t, w in fallbacks.items() if w == "crowded"]
    short = [t for t, w in fallbacks.items() if w == "shares"]
    why = [f"for {_listed(crowded)}, whose test sets ask about nearly all of those people"] if crowded else []
    why += [f"for {_listed(short)}, whose fresh rows cannot fill the test set's answer shares"] if short else []
    held_kept = ", in the test set's answer shares," if why and data.validation_holdout_keeps_shares else ""
    return ("scored on fresh rows about the people (or number pairs) each task's test set asks about, none asking "
            "what a test item asks" + (", in its answer shares" if kept else "")
            + (f"; on rows held out of the training data{held_kept} {', and '.join(why)}" if why else "")
            + ("; every task trains on as many rows as the table's runs" if refilled else ""))


def answer_skew(grid: Grid, seed: int = 0, points: float = 10.0) -> dict[str, tuple[str, float, float]]:
    """{task: (answer, its share of the validation rows, its share of the test set)} for each task of the grid's
    rows (their first value's, at `seed`'s draw) where some answer's share of the validation rows differs from its
    share of the test set by more than `points`: the answer whose share differs most. There a model that gives
    that answer alone scores what it would not on the test set. Embedded tasks only; {} for rows scored on
    their test sets."""
    from fedlab.data.federated import build_federated_data

    out: dict[str, tuple[str, float, float]] = {}
    for p in plan(grid)[:len(grid.rows)]:      # rows sharing a data config share its (cached) build
        data = p.resolve(seed).data
        if data.evaluate_on != "validation" or data.source != "embedded":
            continue
        val = build_federated_data(data, seed).test
        test = build_federated_data(dataclasses.replace(data, evaluate_on="test"), seed).test
        for t, rows in val.items():
            shares = [Counter(e.target for e in xs) for xs in (rows, test.get(t, ()))]
            totals = [sum(c.values()) or 1 for c in shares]
            gaps = {a: (shares[0][a] / totals[0], shares[1][a] / totals[1]) for a in set(shares[0]) | set(shares[1])}
            answer = max(gaps, key=lambda a: (abs(gaps[a][0] - gaps[a][1]), a), default=None)
            if answer is not None and 100 * abs(gaps[answer][0] - gaps[answer][1]) > points:
                out.setdefault(t, (answer, *gaps[answer]))
    return out


def _skew_line(grid: Grid) -> str:
    skew = answer_skew(grid)
    if not skew:
        return ""
    told = "; ".join(f"**{t}**: {100 * v:.0f} % \"{a}\" (its test set: {100 * w:.0f} %)" for t, (a, v, w) in skew.items())
    return (f" The validation rows do not carry their test set's answer shares on {_listed(list(skew))} (seed 0's "
            f"draw): {told}; where a model leans to one answer its score there is not the one the test set would "
            "give, so those cells say less than the others (`data.validation_keeps_shares` draws fresh rows in the "
            "test set's shares, `data.validation_holdout_keeps_shares` the rows held out of the training data).")


def _at_edge(grid: Grid, choice: str, cleared: tuple[int, int] = (0, 1)) -> str:
    """" It is the grid's largest value: a larger one was not tried." (or smallest, smaller) where the values are
    numbers, three or more, the choice is one of the two ends and some of its cells miss the bar (`cleared`: the
    cells that clear it, of how many): the best value may lie beyond it. "" else (where every cell clears the bar,
    no value beyond can do better by the grid's rule: a tie keeps the choice)."""
    if cleared[0] >= cleared[1]:
        return ""
    try:
        values = sorted(float(v) for v in grid.values)
        at = float(choice)
    except ValueError:
        return ""
    if len(values) < 3 or values[0] < at < values[-1]:
        return ""
    end, beyond = ("largest", "larger") if at == values[-1] else ("smallest", "smaller")
    return f" It is the grid's {end} value: a {beyond} one was not tried, and may do better."


def section(results, grid: Grid, what: str, choose: bool = True, every_seed: bool = False,
            claims: str | None = "the table's claims") -> list[str]:
    """Markdown: per value, the cells its references learn, each control's status, and the choice (with
    `choose=False`, each value's controls side by side and no choice: candidates compared, not a budget); the
    tasks the choice leaves out of `claims` (None: not listed here, where another page says what each claim
    reads)."""
    from fedlab.evidence.controls import controls_table

    got = cells(results, grid)
    choice = chosen(results, grid)
    old = sorted(outdated(results, grid))
    compared = compared_seeds(results, grid)
    seed_list = ", ".join(map(str, compared)) or "none yet"
    more = any(len(results.runs(grid.prefix(v) + p.key)) > len(compared) for v in grid.values for p in grid.rows)
    edge = _at_edge(grid, choice, got[choice][:2]) if choice else ""
    verdict = ("" if not choose else f"**Chosen: `{grid.key}={choice}`**.{edge}" if choice else
               f"No choice: {len(old)} row{'s' if len(old) != 1 else ''} (marked †) hold records another config "
               "made than the row runs now; they are run again before a choice rests on them." if old else
               f"No choice yet: every row needs the same {grid.seeds} seeds at every value.")
    lines = [f"## {what}: `{grid.key}` {'chosen ' if choose else ''}on validation", "",
             f"Each reference row of the table at each value, {_scored_on(grid)} (the test sets are not read). A "
             "cell is a (row, task, seed); it clears the bar of the table's control." + _skew_line(grid)
             + (" The values are compared on the seeds every row holds at every value; the seeds a value holds "
                "beyond them are shown in its table below, and what the claims read rests on all of them."
                if more else "")
             + (f" {verdict}" if verdict else ""), "",
             f"| `{grid.key}` | cells that clear the bar (seeds {seed_list}) | seeds (fewest of a row) |", "|---|---|---|"]
    mark = lambda v: " †" if any(k.startswith(grid.prefix(v)) for k in old) else ""
    lines += [f"| {v}{mark(v)} | {ok} of {total} | {seeds} |" for v, (ok, total, seeds) in got.items()]
    if old:
        lines += ["", "† Rows whose records another config made (older YAML or code than the grid runs now): "
                  + ", ".join(f"`{k}`" for k in old) + "."]
    for v in grid.values:
        table = controls_table(results, grid.controls(grid.prefix(v)))
        if table:
            lines += ["", f"At `{grid.key}={v}`:", "", *table]
    left_out = (unreliable if every_seed else unlearnt)(results, grid) if choose and claims else {}
    if left_out:
        why = "some reference does not learn them in every seed" if every_seed else "no reference learns them"
        lines += ["", f"Left out of {claims} ({why} at the chosen value):", "",
                  *(f"- **{t}**: {why}." for t, why in left_out.items())]
    return lines


def with_sections(results, text: str, parts) -> str:
    """A budget page `text` followed by a `section` for each (grid, what, section's keyword arguments) of `parts`
    whose rows hold records (a grid not run yet adds nothing)."""
    extra = [line for grid, what, kw in parts if any(results.runs(p.key) for p in plan(grid))
             for line in ("", *section(results, grid, what, **kw))]
    return text + "\n".join(extra) + ("\n" if extra else "")


def page(results, grid: Grid, title: str, script: str, doc: str | None, what: str, choose: bool = True,
         records: str = "budget/results.json", every_seed: bool = False, claims: str | None = "the table's claims") -> str:
    """A budget script's RESULTS.md: its title, where it comes from (`script`, e.g. experiments/floe/budget.py,
    and its `records`), the first paragraph of its docstring `doc`, and `section`."""
    from fedlab.evidence.page import GENERATED, kinds_line

    machines = kinds_line(results)
    lines = [GENERATED, f"# {title}", "",
             f"Written by `python {script}` from `{records}`. " + (doc or "").split("\n\n")[0].replace("\n", " "),
             "", *([machines, ""] if machines else []), *section(results, grid, what, choose, every_seed, claims)]
    return "\n".join(lines) + "\n"
