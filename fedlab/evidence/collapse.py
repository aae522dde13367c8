"""Answer collapse: a seed whose model gives one answer to nearly every item of a task.

Every multiple-choice score is logged beside the share of the model's most frequent answer on that task
(`top/…` beside `acc/…`; the mean over the clients scored when several are). A seed collapses on a task when
that share is at least COLLAPSE_SHARE: it answers one class, and its accuracy there is the class's frequency,
not what it learnt. A record made before the shares were logged cannot tell ("unknown").
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

COLLAPSE_SHARE = 0.95

Shares = Callable[[dict], "dict[str, float | None] | None"]   # record → {task: share}; None: not a choice score


def share_metrics(metric: str, final: dict) -> list[str] | None:
    """The answer-share metrics that belong to an accuracy metric of `final`: `…acc/task_<t>` → `…top/task_<t>`,
    `…acc/<t>` → `…top/<t>`, one client's `acc_client_<c>/<t>` → `top_client_<c>/<t>`, and for a mean
    (`…acc/mean`, one client's `acc/client_<c>`) every share of the same prefix or client (`top1_share` is a
    routing share, not an answer's). None for a metric that is not a task's accuracy or a mean of them
    (Rouge-L, bytes)."""
    if metric.startswith("acc_client_"):
        return [metric.replace("acc_client_", "top_client_", 1)]
    if "acc/" not in metric:
        return None
    prefix, rest = metric.split("acc/", 1)
    if rest.startswith("client_"):         # the client's shares, or one that is absent (unknown) before they were logged
        own = f"top_client_{rest[len('client_'):]}/"
        return [k for k in final if k.startswith(own)] or [f"{own}?"]
    if "/" in rest and not rest.startswith("task_"):
        return None
    if rest == "mean":
        accs = [k[len(prefix) + 4:] for k in final if k.startswith(f"{prefix}acc/")]
        return [f"{prefix}top/{t}" for t in accs if t != "mean" and not t.startswith("client_")]
    return [f"{prefix}top/{rest}"]


def metric_shares(metric: str, which: str = "final") -> Shares:
    """A record → {task: answer share} of the model `metric` scores (`share_metrics`), from the record's
    `which` metrics ("final" or "zero"); None when the metric has no answer shares."""
    def fn(rec: dict):
        got = rec.get(which) or {}
        names = share_metrics(metric, got)
        if names is None:
            return None
        return {n.rsplit("/", 1)[1].removeprefix("task_"): got.get(n) for n in names}
    return fn


@dataclass
class Collapse:
    """Per seed, the tasks on which it collapses; `unknown` the seeds whose records hold no share."""
    seeds: int = 0
    collapsed: dict[int, list[str]] = field(default_factory=dict)
    unknown: list[int] = field(default_factory=list)

    def merge(self, other: Collapse) -> Collapse:
        seeds = sorted(set(self.collapsed) | set(other.collapsed))
        return Collapse(max(self.seeds, other.seeds),
                        {s: sorted(set(self.collapsed.get(s, [])) | set(other.collapsed.get(s, []))) for s in seeds},
                        sorted(set(self.unknown) | set(other.unknown)))

    def marker(self) -> str:
        """A table cell's suffix: " ⚠k/n" when k of its n seeds collapse on some task, " ◌" when some seed's
        records cannot tell, "" otherwise."""
        if self.collapsed:
            return f" ⚠{len(self.collapsed)}/{self.seeds}"
        return " ◌" if self.unknown else ""

    def words(self) -> str:
        """The same in words, for a claim ("collapse: seeds 1, 3 (sentiment)"; "" when none)."""
        if self.collapsed:
            tasks = sorted({t for ts in self.collapsed.values() for t in ts})
            return (f"collapse in seed{'s' if len(self.collapsed) > 1 else ''} "
                    f"{', '.join(map(str, sorted(self.collapsed)))} ({', '.join(tasks)})")
        return "collapse unknown" if self.unknown else ""


def of_records(records: list[dict], shares: Shares) -> Collapse:
    """Which seeds of `records` collapse, by `shares` (a record → {task: share}, None for a score that is not a
    choice among classes)."""
    out = Collapse(seeds=len(records))
    for rec in records:
        got = shares(rec)
        if got is None:
            continue
        if not got or any(v is None for v in got.values()):
            out.unknown.append(rec["seed"])
            continue
        tasks = sorted(t for t, v in got.items() if v >= COLLAPSE_SHARE)
        if tasks:
            out.collapsed[rec["seed"]] = tasks
    return out


LEGEND = (f"⚠k/n after a cell: in k of its n seeds the model answers one class on ≥ {COLLAPSE_SHARE:.0%} of some "
          "task's items (collapse); ◌: collapse unknown (records made before fedlab logged answer shares).")
