"""Kind check: how far another machine kind's records lie from the same (row, seed) re-made here
(`make_tables.py --kind-check K`).

The tables read the records of every measured machine kind alike (docs/reproducibility.md), on the assumption that
a kind changes a run's last bits and not what a method does. This check measures that assumption: it draws K
current records made on another measured kind (`spotcheck.draw`), re-runs each (row, seed) here at HEAD, and
compares every final metric (wall-clock ones left out) with the record, in units of the row's between-seed
standard deviation of that metric over its current records. A gap far below one standard deviation is what
rounding carried through training gives; gaps near one would mean a seed's outcome depends on the kind that ran
it. The outcome (commit, date, both kinds, each pair's gaps) is kept in results.json's `_meta.kind_check` and
shown in the page's header; the re-runs' records are not written.
"""
from __future__ import annotations

import math
import re
import statistics

from fedlab.evidence.spotcheck import SpotCheckError, measured

HEADLINE = re.compile(r"(^|/)acc/mean$")      # the mean accuracies a table's claims read (`acc/mean`, `llm/acc/mean`)


def gaps(record: dict, final: dict, row_records: list[dict]) -> dict:
    """The re-run's `final` metrics against `record`'s: how many numeric final metrics both hold (`metrics`), how
    many are equal bit for bit (`equal`), and for the others the gap |now − recorded| over the standard deviation
    of the metric across `row_records` (the row's current records; a metric with fewer than two finite values
    there, or none that differ, gives no ratio): each (`z`), their median and largest (`z_median`, `z_max`, None
    without any) and the metric with the largest (`worst`); and the mean accuracies (`HEADLINE`) recorded and now
    (`headline`: metric → [recorded, now])."""
    from fedlab.evidence.records import _numbers

    now, then = _numbers(final), _numbers(record.get("final") or {})
    shared = [k for k in sorted(then) if k in now and not measured(k)
              and all(isinstance(v, (int, float)) and math.isfinite(v) for v in (then[k], now[k]))]
    z = {}
    for k in shared:
        if now[k] == then[k]:
            continue
        values = [v for r in row_records if isinstance(v := (r.get("final") or {}).get(k), (int, float))
                  and math.isfinite(v)]
        sd = statistics.stdev(values) if len(values) >= 2 else 0.0
        if sd > 0:
            z[k] = abs(now[k] - then[k]) / sd
    worst = max(z, key=z.get) if z else None
    return {"metrics": len(shared), "equal": sum(now[k] == then[k] for k in shared),
            "z_median": statistics.median(z.values()) if z else None, "z_max": z[worst] if worst else None,
            "worst": worst, "z": {k: round(v, 4) for k, v in sorted(z.items())},
            "headline": {k: [then[k], now[k]] for k in shared if HEADLINE.search(k)}}


def kind_check(results, plan, k: int, seed: int | None = None, max_seconds: float | None = None, jobs: int = 1,
               tags_for=None, progress: bool = True) -> dict:
    """Re-run K drawn records of another measured kind here at HEAD (`spotcheck.rerun_drawn`), measure their
    `gaps`, keep the outcome in `results.meta["kind_check"]` (saved) and return it. The caller checks the tree is
    clean first."""
    from fedlab import numerics
    from fedlab.evidence.spotcheck import rerun_drawn

    if numerics.judge_as() != "reference" and numerics.this_kind() is None:
        raise SpotCheckError(f"--kind-check: this machine computes as no measured kind ({numerics.here_words()}, "
                             "`fedlab doctor`): its numbers say nothing of a measured kind")

    def measure(p, rec, h):
        made_on = numerics.kind_of(rec.get("environment"))
        if isinstance(h, BaseException):
            pair = {"made_on": made_on, "failed": f"{type(h).__name__}: {h}"}
        else:
            row = [r for r in results.runs(p.key) if results.why_stale(p, r) is None]
            pair = {"made_on": made_on, **gaps(rec, h.final, row)}
        return pair, pair_words(pair)

    outcome = rerun_drawn(results, plan, k, seed, max_seconds, jobs, tags_for, progress, "--kind-check",
                          "kind check", "made on another measured kind", measure, other_kinds=True)
    results.meta["kind_check"] = outcome
    results.save()
    return outcome


def pair_words(pair: dict) -> str:
    """One re-made pair in words: its failure, or how many metrics are equal and the gaps of the others."""
    if pair.get("failed"):
        return f"the re-run failed: {pair['failed']}"
    out = f"{pair['equal']} of {pair['metrics']} final metrics equal bit for bit"
    if pair["z_max"] is not None:
        out += (f"; the others {pair['z_median']:.2f} of their row's between-seed SD at the median, "
                f"{pair['z_max']:.2f} at most (`{pair['worst']}`)")
    return out


def line(results) -> str:
    """The page header's line on the last `--kind-check` of these records (`words`); "" where none was made (the
    page says "none yet" itself where two kinds made its records)."""
    s = results.meta.get("kind_check")
    return words(s) if s else ""


def words(s: dict) -> str:
    """A kind check's outcome (`kind_check`'s) as one line: the pairs, the kinds, where and when, and the gaps."""
    done = [p for p in s["pairs"] if not p.get("failed")]
    z = [p["z_max"] for p in done if p["z_max"] is not None]
    kinds = sorted({str(p["made_on"]) for p in s["pairs"]})
    head = [max(p.get("z", {}).get(k, 0.0) for k in p["headline"]) for p in done if p.get("headline")]
    return (f"Kind check: {len(s['pairs'])} (row, seed) pairs made on {' and '.join(kinds)} re-made on {s['kind']} "
            f"at {s['commit'][:7]} on {s['date']}: {sum(p['equal'] for p in done)} of "
            f"{sum(p['metrics'] for p in done)} final metrics equal bit for bit"
            + (f"; each pair's largest gap, over its row's between-seed SD: median {statistics.median(z):.2f}, "
               f"largest {max(z):.2f}" if z else "")
            + (f"; each pair's largest mean-accuracy gap over its row's between-seed SD: median "
               f"{statistics.median(head):.2f}, largest {max(head):.2f} (0 where equal or the row's seeds agree)"
               if head else "")
            + (f"; {len(s['pairs']) - len(done)} re-run(s) failed" if len(done) < len(s["pairs"]) else "") + ".")
