"""Claims: a paper's "row a scores above row b" tested on the seeds both rows of a table hold.

For each claim the paired difference d_s = 100·(f(a, s) − f(b, s)) over the common seeds s gives a mean, its
95 % t-interval, the paired t-test and the minimum detectable effect (`stats.paired_difference`). The verdict
comes from `verdicts` (the one vocabulary), behind the claim's control (`controls`: the reference that must
learn every task the claim reads; a claim without one, or whose control fails, gets "no control"), and beside
it stands whether any seed of either side answers one class (`collapse`). The paper's effect is the signed
number in parentheses of `paper` ("61.2 vs 58.9 (+2.3)"), or `effect`.

A claim "a is comparable to b" (`at_least=True`) is judged against `tolerance` points (`verdicts.tolerance`).

A claim whose score averages several tasks (`tasks`, with `over` to score it on fewer) and whose control fails
on some of them, in some seed, is judged on the tasks its controls learn in every seed (`narrow`): the tasks it
leaves out, and why, stand beside its verdict. The choice must not read the rows compared: a claim whose
control rows are among its own rows is not narrowed (nor, by the systems, a claim against a zero-shot score,
which sets its control's bar). A claim on one task, or whose controls learn none of its tasks, or one of whose
controls would be left with no task, stays "no control".
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from fedlab.evidence import verdicts as V
from fedlab.evidence.collapse import Collapse, Shares, of_records
from fedlab.evidence.controls import Control, Status, check
from fedlab.evidence.provenance import made_dirty, made_outside_git
from fedlab.evidence.verdicts import MIN_SEEDS, Verdict

BEGIN, END = "<!-- claims: written by fedlab.evidence -->", "<!-- /claims -->"


@dataclass(frozen=True)
class Claim:
    claim: str                                  # what the paper says, in words
    source: str                                 # "Table 3"
    paper: str                                  # the paper's numbers, e.g. "61.2 vs 58.9 (+2.3)"
    a: str | tuple[str, ...]                    # row key claimed higher (several: their mean per seed)
    b: str | tuple[str, ...]                    # row key claimed lower
    fn: Callable[[dict], float | None]          # record → accuracy in [0, 1]
    fn_b: Callable[[dict], float | None] | None = None   # for b when it differs (e.g. round 0 of the same run)
    at_least: bool = False                      # a comparable to b: not more than `tolerance` points below
    tolerance: float = 2.0
    effect: float | None = None                 # the paper's a − b in points (default: read from `paper`)
    control: Control | tuple[Control, ...] | None = None   # the reference(s) that must learn what it reads
    shares: Shares | None = None                # record → {task: answer share} of the model `fn` scores
    shares_b: Shares | None = None              # the same for b (default: `shares`)
    tasks: tuple[str, ...] = ()                 # the tasks `fn` averages over, when `over` can score fewer
    over: Callable[[tuple[str, ...]], tuple[Callable, Callable | None]] | None = None  # tasks → (fn, fn_b) on them

    def controls(self) -> tuple[Control, ...]:
        return () if self.control is None else (self.control,) if isinstance(self.control, Control) else self.control

    def paper_effect(self) -> float | None:
        if self.effect is not None:
            return self.effect
        m = re.search(r"\(([+\-−]?\d+(?:\.\d+)?)\)", self.paper)
        return float(m.group(1).replace("−", "-")) if m else None


def per_seed(results, keys: str | tuple[str, ...], fn) -> dict[int, float]:
    """{seed: fn(record)} of one row, or the mean over several rows of the seeds every one of them holds."""
    keys = (keys,) if isinstance(keys, str) else tuple(keys)
    by_key = [{rec["seed"]: fn(rec) for rec in results.runs(k)} for k in keys]
    seeds = set.intersection(*(set(s for s, v in d.items() if v is not None) for d in by_key))
    return {s: sum(d[s] for d in by_key) / len(by_key) for s in seeds}


def claim_keys(c: Claim) -> list[str]:
    """Every row key a claim reads (both sides)."""
    return [k for side in (c.a, c.b) for k in ((side,) if isinstance(side, str) else side)]


@dataclass
class Assessment:
    """A claim on the records: the paired difference (None when it cannot be computed), its seeds, the verdict,
    the control's status (None when the claim names none) and the collapse of either side's seeds."""
    claim: Claim
    diff: dict | None
    seeds: int
    verdict: Verdict
    control: list[Status] | None = None
    collapse: dict[str, Collapse] | None = None
    left_out: dict[str, dict[str, str]] | None = None   # control → {task it fails, left out: "in seed 2"} (`narrow`)
    judged_on: tuple[str, ...] = ()             # the tasks a narrowed claim is judged on
    commits: str = ""                           # rows it reads whose seeds mix commits or are uncommitted (`commit_words`)
    kinds: str = ""                             # its compared rows' machine kinds where they are several (`kind_words`)

    @property
    def narrowed(self) -> bool:
        return bool(self.left_out)

    def scope_words(self) -> str:
        """"judged on 6 of 7 tasks (…), left out as CentSFT fails them: two_hop in seed 2", "" for a claim judged
        on all its tasks."""
        if not self.left_out:
            return ""
        why = "; ".join(f"{name} fails them: {', '.join(f'{t} {w}' for t, w in fails.items())}"
                        for name, fails in self.left_out.items())
        return (f"judged on {len(self.judged_on)} of {len(self.claim.tasks)} tasks ({', '.join(self.judged_on)}), "
                f"left out as {why}")

    @property
    def ours(self) -> str:
        d = self.diff
        return "-" if d is None else f"{d['mean']:+.1f} ± {d['half']:.1f} pts ({self.seeds} seeds)"

    @property
    def mde(self) -> str:
        return "-" if self.diff is None else f"{self.diff['mde']:.1f} pts"

    def control_cell(self) -> str:
        if not self.control:
            return "none declared"
        if self.left_out:
            return "; ".join(f"{st.control.name}: holds" if st.holds else
                             f"{st.control.name}: fails {', '.join(st.failing_tasks())} (left out)"
                             for st in self.control)
        return "; ".join(f"{st.control.name}: {st.word()}" + ("" if st.holds or not st.run else f" ({st.failing()})")
                         for st in self.control)

    def collapse_words(self) -> str:
        """Which side collapses in which seeds ("a: collapse in seeds 1, 3 (sentiment)"), "" when neither does,
        "collapse not checked" for a claim without share readers."""
        if self.collapse is None:
            return "collapse not checked"
        return "; ".join(f"{side}: {w}" for side, col in self.collapse.items() if (w := col.words()))

    def verdict_cell(self) -> str:
        notes = [w for w in (self.scope_words(), self.collapse_words(), self.commits, self.kinds) if w]
        return "; ".join([str(self.verdict), *notes])


def _keys(side) -> tuple[str, ...]:
    return (side,) if isinstance(side, str) else tuple(side)


def _collapse(results, c: Claim, seeds: list[int]) -> dict[str, Collapse] | None:
    """{"a": …, "b": …}: the collapse of each side's records over the claim's common seeds, on the tasks it
    averages where it names them (`tasks`) (None without share readers)."""
    if c.shares is None and c.shares_b is None:
        return None
    out = {}
    for name, side, shares in (("a", c.a, c.shares), ("b", c.b, c.shares_b or c.shares)):
        if shares is None:
            continue
        shares = _only(shares, c.tasks) if c.tasks else shares
        col = Collapse(seeds=len(seeds))
        for k in _keys(side):
            col = col.merge(of_records([rec for rec in results.runs(k) if rec["seed"] in set(seeds)], shares))
        out[name] = col
    return out


def _only(shares: Shares | None, tasks: tuple[str, ...]) -> Shares | None:
    """`shares` read on `tasks` only."""
    if shares is None:
        return None
    keep = set(tasks)

    def fn(rec):
        got = shares(rec)
        return None if got is None else {t: v for t, v in got.items() if t in keep}
    return fn


def reads_compared_runs(results, c: Claim) -> bool:
    """Whether a control of `c` reads one of the runs `c` compares: a control row is one of its rows, or holds a
    record made by the same config (`config_hash`) at the same seed as a record of one of its rows (a control
    made again at seeds of its own, `records.Planned.seeds`, that was run at a compared seed too)."""
    keys = claim_keys(c)
    rows = {row for ctl in c.controls() for row in ctl.rows}
    if set(keys) & rows:
        return True
    compared = {(rec["seed"], rec["config_hash"]) for k in keys for rec in results.runs(k) if rec.get("config_hash")}
    return any((rec["seed"], rec.get("config_hash")) in compared for row in rows for rec in results.runs(row))


def narrow(results, c: Claim, status: list[Status]) -> tuple[Claim, dict[str, dict[str, str]]] | None:
    """(the claim on the tasks its controls learn in every seed, {control: {task it fails: in which seeds}});
    None when it cannot be narrowed: it names no `tasks` or `over`; a control reads a run the claim compares
    (`reads_compared_runs`: the choice would read one side); a control has no records or a task without a score;
    a failing task is not one the claim averages; no task is left, or a control is left with none."""
    if c.over is None or not c.tasks or any(not st.run or st.missing for st in status):
        return None
    if reads_compared_runs(results, c):
        return None
    fails: dict[str, dict[str, str]] = {}
    for st in status:
        if not st.holds:
            fails.setdefault(st.control.name, {}).update(st.failing_tasks())
    gone = {t for f in fails.values() for t in f}
    kept = tuple(t for t in c.tasks if t not in gone)
    controls = tuple(ctl.on(kept) for ctl in c.controls())
    if not gone or not kept or not gone <= set(c.tasks) or any(not ctl.tasks for ctl in controls):
        return None
    fn, fn_b = c.over(kept)
    narrowed = replace(c, fn=fn, fn_b=fn_b, tasks=kept, control=controls, shares=_only(c.shares, kept),
                       shares_b=_only(c.shares_b, kept))
    return narrowed, fails


def commit_words(results, keys, seeds, controls=()) -> str:
    """Where the records a claim reads (its rows at `seeds`, its controls' rows `controls`) do not all come from one
    clean commit per row: "seeds made at several commits: `row` (2 commits); seeds from uncommitted changes: `row`;
    seeds made outside git: `row`" (a record without a `git` field, made before fedlab recorded it, is not named);
    "" when every row's seeds were made at one commit without uncommitted changes. The rows of `controls` are read
    at every seed they hold, as their check reads them (`controls.check`)."""
    mixed, dirty, outside = [], [], []
    for k in dict.fromkeys([*keys, *controls]):
        recs = [rec for rec in results.runs(k) if k in controls or rec["seed"] in seeds]
        commits = {rec.get("git") for rec in recs}
        if len(commits) > 1:
            mixed.append(f"`{k}` ({len(commits)} commits)")
        if any(map(made_dirty, recs)):
            dirty.append(f"`{k}`")
        if any(map(made_outside_git, recs)):
            outside.append(f"`{k}`")
    return "; ".join(w for w in (mixed and "seeds made at several commits: " + ", ".join(mixed),
                                 dirty and "seeds from uncommitted changes: " + ", ".join(dirty),
                                 outside and "seeds made outside git: " + ", ".join(outside)) if w)


def kind_words(results, keys, seeds) -> str:
    """Where the records a claim compares (its rows, at `seeds`) were made on more than one machine kind
    (`numerics.kind_of`): "made on several machine kinds: `a` (Intel Xeon (AVX-512)), `b` (AMD EPYC (the
    reference))", each row with the kinds of its seeds; "" when one kind made them all. The claims read every
    measured kind's records alike; the note shows where kind and arm could be confounded."""
    from fedlab import numerics

    made = {k: sorted({str(numerics.kind_of(rec.get("environment")) or "unmeasured numerics")
                       for rec in results.runs(k) if rec["seed"] in seeds}) for k in dict.fromkeys(keys)}
    if len({kind for kinds in made.values() for kind in kinds}) < 2:
        return ""
    return "made on several machine kinds: " + ", ".join(f"`{k}` ({' + '.join(v)})" for k, v in made.items() if v)


def assess(results, c: Claim, outdated: frozenset[str] | set[str] = frozenset()) -> Assessment:
    """The claim on `results` (a `fedlab.evidence.records.Results`); a claim reading a row in `outdated` (keys
    whose records another config made, `Results.outdated`) shows its difference with the verdict "stale". A claim
    whose control fails on some of the tasks it averages is judged on the others (`narrow`)."""
    from fedlab.evidence.stats import paired_difference

    keys = claim_keys(c)
    status = [check(results, ctl) for ctl in c.controls()] or None
    if not all(results.runs(k) for k in keys):
        return Assessment(c, None, 0, Verdict(V.NOT_RUN), status)
    if status and not all(st.holds for st in status) and (cut := narrow(results, c, status)) is not None:
        out = assess(results, cut[0], outdated)
        out.claim, out.control, out.left_out, out.judged_on = c, status, cut[1], cut[0].tasks
        return out
    xa, xb = per_seed(results, c.a, c.fn), per_seed(results, c.b, c.fn_b or c.fn)
    seeds = sorted(set(xa) & set(xb))
    collapse = _collapse(results, c, seeds)
    few = Verdict(V.TOO_FEW_SEEDS, f"{len(seeds)}; a verdict needs {MIN_SEEDS}")
    if len(seeds) < 2:
        return Assessment(c, None, len(seeds), few, status, collapse)
    d = paired_difference([100 * xa[s] for s in seeds], [100 * xb[s] for s in seeds])
    controls = [k for ctl in c.controls() for k in ctl.rows]
    out = Assessment(c, d, len(seeds), few, status, collapse,
                     commits=commit_words(results, keys, set(seeds), controls),
                     kinds=kind_words(results, keys, set(seeds)))
    if any(k in outdated for k in keys):
        out.verdict = Verdict(V.STALE, "records made by another config than the script's: re-run the row")
    elif len(seeds) < MIN_SEEDS:
        pass
    elif status is None:
        out.verdict = Verdict(V.NO_CONTROL, "none declared")
    elif not all(st.holds for st in status):
        out.verdict = Verdict(V.NO_CONTROL, ", ".join(st.control.name + ("" if st.run else " not run")
                                                       for st in status if not st.holds))
    elif c.at_least:
        out.verdict = V.tolerance(d["mean"], d["half"], c.tolerance)
    else:
        out.verdict = V.directional(d["mean"], d["half"], d["mde"], c.paper_effect())
    return out


def check_claim(results, c: Claim) -> tuple[str, str]:
    """(ours, verdict) of one claim on `results`."""
    a = assess(results, c)
    return a.ours, str(a.verdict)


def claims_table(results, claims: list[Claim], outdated: frozenset[str] | set[str] = frozenset(),
                 assessed: list[Assessment] | None = None) -> list[str]:
    """Markdown lines: claim · paper's table · paper's numbers · ours (a − b, mean ± 95 %) · MDE · control · verdict
    (with the seeds that collapse); `assessed` reuses assessments already made of the same claims."""
    out = ["| claim | paper | paper's numbers | ours (a − b) | MDE (80 % power) | control | verdict |",
           "|---|---|---|---|---|---|---|"]
    for a in assessed or [assess(results, c, outdated) for c in claims]:
        c = a.claim
        out.append(f"| {c.claim} | {c.source} | {c.paper} | {a.ours} | {a.mde} | {a.control_cell()} | "
                   f"{a.verdict_cell()} |")
    return out


def differences_table(results, pairs, digits: int = 3, scale: float = 1.0,
                      outdated: frozenset[str] | set[str] = frozenset()) -> list[str]:
    """Markdown lines of fedlab's own paired differences over seeds (not a paper's claims: no verdict), one row
    per (name, row a, metric a, row b, metric b) that has two or more common seeds: mean ± 95 % half-width,
    seeds, the MDE (80 % power, paired t-test, two-sided α = 0.05), the p-value and whether the interval
    excludes 0 (below MIN_SEEDS common seeds: "too few seeds"; a row in `outdated`: "stale"); [] when no pair
    has records."""
    out = []
    for name, a, ma, b, mb in pairs:
        d = results.paired(a, ma, b, mb, scale=scale)
        if d is None:
            continue
        significant = (V.STALE if a in outdated or b in outdated else V.TOO_FEW_SEEDS if d["seeds"] < MIN_SEEDS
                       else "yes" if d["significant"] else "no")
        out.append(f"| {name} | {d['mean']:+.{digits}f} ± {d['half']:.{digits}f} | {d['seeds']} | "
                   f"{d['mde']:.{digits}f} | {d['p']:.3g} | {significant} |")
    if not out:
        return []
    return ["| difference | mean ± 95 % | seeds | MDE (80 % power) | p (paired t) | interval excludes 0 |",
            "|---|---|---|---|---|---|", *out]


def block_markers(name: str) -> tuple[str, str]:
    """The comment lines around a generated block named `name` in a hand-written Markdown file."""
    return f"<!-- {name}: written by fedlab.evidence -->", f"<!-- /{name} -->"


def write_block(readme: Path, lines: list[str], name: str = "claims") -> None:
    """Replace the file's generated block `name` with `lines`; append the block when the file has none."""
    begin, end = block_markers(name)
    readme = Path(readme)
    text = readme.read_text() if readme.exists() else ""
    block = "\n".join([begin, *lines, end])
    if begin in text and end in text:
        text = re.sub(re.escape(begin) + r".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    readme.write_text(text)
