"""Spot-check reproduction: re-run K recorded (row, seed) pairs, drawn at random, at HEAD and compare every final
metric with the record (`make_tables.py --spot-check K`).

With pinned numerics a run of the same config on the same weights gives the same numbers on a machine of the
kind that made the record, so any difference is a reproducibility failure; only records of this machine's kind are
drawn. Metrics that measure this machine's wall clock (MEASURED) are left out, and those
computed outside the pin (OUTSIDE_PIN) are compared to a relative tolerance; a metric the
record holds and the re-run does not is a failure, one only the re-run logs (newer code logs more) is not. The
outcome (commit, date, the pairs and what differed) is kept in results.json's `_meta.spot_check` and shown in the
page's header; the re-runs' records are not written.
"""
from __future__ import annotations

import datetime
import json
import random
import sys

# final metrics that measure the machine's clock, not the model: they differ between two runs of one config
MEASURED = ("fused/latency_edge_ms_per_token", "fused/latency_ms_per_token", "server/time_")
# metrics computed outside the numerics pin — scikit-learn's silhouette of Floe's client clusters, on numpy's own
# BLAS, whose kernels follow the CPU — agree across machine kinds to within rounding only: compared to this
# relative tolerance rather than bit for bit
OUTSIDE_PIN = ("clusters/silhouette",)
OUTSIDE_PIN_RTOL = 1e-9


class SpotCheckError(ValueError):
    """A spot-check that cannot be made (one line for the user)."""


def measured(metric: str) -> bool:
    return metric.startswith(MEASURED)


def agree(metric: str, a, b) -> bool:
    """Whether two recorded values of `metric` are the same number: equal as written to JSON (NaN equals NaN),
    or, for a metric computed outside the pin (`OUTSIDE_PIN`), within `OUTSIDE_PIN_RTOL` of each other."""
    if json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True):
        return True
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
    return (numbers and metric.endswith(OUTSIDE_PIN)
            and abs(a - b) <= OUTSIDE_PIN_RTOL * max(abs(a), abs(b)))


def compare(record: dict, final: dict) -> list[str]:
    """The final metrics of `record` that the re-run's `final` gives otherwise (`agree`) or not at all, measured
    ones left out."""
    from fedlab.evidence.records import _numbers

    now = _numbers(final)
    out = []
    for k, v in sorted((record.get("final") or {}).items()):
        if measured(k):
            continue
        if k not in now:
            out.append(f"{k} (not logged now)")
        elif not agree(k, v, now[k]):
            out.append(f"{k}: {v!r} recorded, {now[k]!r} now")
    return out


def draw(results, plan, k: int, seed: int, max_seconds: float | None = None, other_kinds: bool = False) -> list[tuple]:
    """K (Planned, record) pairs drawn with `random.Random(seed)` from the current records of `plan` (those this
    table would not run again: `records.stale_reason` is None) that this machine's numerics made (a record of
    another measured kind is current, but its digits reproduce on its own kind: `numerics.kind_of`), only those
    whose recorded wall time is at most `max_seconds` when given; `other_kinds`: those another measured kind made
    instead (`fedlab.evidence.kindcheck`)."""
    from fedlab import numerics
    from fedlab.evidence.records import numerics_fingerprint

    here = numerics.current_fingerprint()
    pool = []
    for p in plan:
        for rec in results.runs(p.key):
            if max_seconds is not None and not (rec.get("seconds") or 0) <= max_seconds:
                continue
            mine = numerics_fingerprint(rec) == here
            if mine if other_kinds else not mine:
                continue
            if other_kinds and numerics.kind_of(rec.get("environment")) is None:
                continue
            if results.why_stale(p, rec) is None:
                pool.append((p, rec))
    return random.Random(seed).sample(pool, min(k, len(pool)))


def rerun_drawn(results, plan, k: int, seed: int | None, max_seconds: float | None, jobs: int, tags_for,
                progress: bool, flag: str, label: str, what: str, measure, other_kinds: bool = False) -> dict:
    """Draw K current records (`draw`; of another measured kind when `other_kinds`), re-run each (row, seed) here
    at HEAD `jobs` at a time, and return the outcome: HEAD's commit, the date, the draw seed, `max_seconds`, this
    machine's kind and `pairs`, one per drawn record in draw order. `measure(planned, record, history or the
    exception the re-run raised)` gives a pair's fields besides its key and seed, and the words printed for it.
    `flag` names the command line option in errors, `label` the check in messages, `what` the records drawn. Nothing runs while records are
    judged as the reference kind (`FEDLAB_JUDGE_NUMERICS=reference`)."""
    from fedlab import numerics
    from fedlab.evidence import provenance
    from fedlab.parallel import run_many

    if numerics.judge_as() == "reference":
        raise SpotCheckError(f"{flag}: {numerics.JUDGE_ENV}=reference judges records as the reference machine kind "
                             f"would; a {label} re-runs them here: unset it")
    seed = random.SystemRandom().randrange(2 ** 31) if seed is None else seed
    picks = draw(results, plan, k, seed, max_seconds, other_kinds=other_kinds)
    if not picks:
        raise SpotCheckError(f"{flag}: no current record {what} to re-run"
                             + (f" of at most {max_seconds:g} s" if max_seconds is not None else ""))
    cfgs = [p.resolve(rec["seed"]) for p, rec in picks]
    tags = tags_for(cfgs[0]) if tags_for is not None else None
    if progress:
        print(f"[fedlab] {label}: re-running {len(picks)} records {what} (draw seed {seed}): "
              + ", ".join(f"{p.key} seed {rec['seed']}" for p, rec in picks), file=sys.stderr, flush=True)
    pairs = [None] * len(picks)
    for i, h in run_many(cfgs, [tags] * len(cfgs), jobs):
        p, rec = picks[i]
        fields, words = measure(p, rec, h)
        pairs[i] = {"key": p.key, "seed": rec["seed"], **fields}
        if progress:
            print(f"[fedlab] {label} {p.key} seed {rec['seed']}: {words}", file=sys.stderr, flush=True)
    return {"commit": provenance.git_state()["commit"], "date": datetime.date.today().isoformat(),
            "draw_seed": seed, "max_seconds": max_seconds, "kind": numerics.this_kind(), "pairs": pairs}


def spot_check(results, plan, k: int, seed: int | None = None, max_seconds: float | None = None,
               jobs: int = 1, tags_for=None, progress: bool = True) -> dict:
    """Re-run K drawn pairs at HEAD (`rerun_drawn`), compare them, keep the outcome in
    `results.meta["spot_check"]` (saved) and return it; `tags_for(first config)` gives the MLflow tags of the
    re-runs (the table's parent run). The caller checks the tree is clean first (`runner.check_tree`): the outcome
    names HEAD's commit."""
    def measure(p, rec, h):
        differ = ([f"the re-run failed: {type(h).__name__}: {h}"] if isinstance(h, BaseException)
                  else compare(rec, h.final))
        return ({"record_git": rec.get("git"), "differ": differ},
                "equal to its record" if not differ else "REPRODUCIBILITY FAILURE: " + "; ".join(differ[:5]))

    outcome = rerun_drawn(results, plan, k, seed, max_seconds, jobs, tags_for, progress, "--spot-check",
                          "spot-check", "made with this machine's numerics", measure)
    outcome["failures"] = sum(bool(p["differ"]) for p in outcome["pairs"])
    results.meta["spot_check"] = outcome
    results.save()
    return outcome
