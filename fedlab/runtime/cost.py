"""What a run costs: the rounds, bytes (up + down, every client) and wall-clock seconds until it first reaches a
target (`eval.target` on `eval.target_metric`, or a fraction of a reference run's final value), and a
communication budget (`federation.comm_budget_mb`) that ends a run cleanly before a round that would take it
past the budget, as FlowerTune's rules do.

Everything is computed from the run's round records (`bytes/up`, `bytes/down`, `time/round`,
`time/bookkeeping`), so a resumed run counts the rounds before its checkpoint too, and scores that arrive late
(evaluation beside training) count at their own round. The next round's bytes are estimated by the largest
round so far: the first round always runs, and a budget smaller than one round ends the run after it."""
from __future__ import annotations

import math


def round_bytes(record: dict) -> float:
    return float(record.get("bytes/up", 0) or 0) + float(record.get("bytes/down", 0) or 0)


def round_seconds(record: dict) -> float:
    return float(record.get("time/round", 0) or 0) + float(record.get("time/bookkeeping", 0) or 0)


class Budget:
    """`federation.comm_budget_mb` over the run's records so far."""

    def __init__(self, cfg, history):
        mb = cfg.federation.comm_budget_mb
        self.limit = None if mb is None else float(mb) * 1e6
        self.history = history          # its rounds: those of a resumed run's checkpoint too

    def stop_after(self, record: dict) -> str | None:
        """Why no round may follow the one whose record this is (None: one may)."""
        if self.limit is None:
            return None
        done = [r for r in self.history.rounds if r["round"] != record["round"]] + [record]
        spent = sum(round_bytes(r) for r in done)
        largest = max((round_bytes(r) for r in done if r["round"] > 0), default=0.0)
        if spent + largest <= self.limit:
            return None
        return (f"federation.comm_budget_mb={self.limit / 1e6:g}: {spent / 1e6:.3f} MB spent, and the next round would "
                f"take about {largest / 1e6:.3f} MB more")


def target_metric(cfg, headline: str) -> str:
    return cfg.eval.target_metric or headline


def target_of(cfg, headline: str, reference: float | None = None) -> tuple[str, float] | None:
    """(metric, value) the run is measured against, or None without `eval.target`; `reference` is the final value
    of the metric in `eval.target_reference`'s run (`fedlab.export.final_value`), read before the run starts."""
    if cfg.eval.target is None:
        return None
    value = float(cfg.eval.target) * (reference if cfg.eval.target_reference else 1.0)
    return target_metric(cfg, headline), value


def cost_to_target(rounds: list[dict], metric: str, target: float) -> dict:
    """cost/target, cost/reached (1 or 0) and, when reached, cost/rounds_to_target, cost/bytes_to_target and
    cost/seconds_to_target: the first evaluated round whose `metric` is ≥ `target`, with the bytes and
    seconds of every round up to and including it."""
    out = {"cost/target": target, "cost/reached": 0}
    spent = seconds = 0.0
    for r in sorted(rounds, key=lambda r: r["round"]):
        spent += round_bytes(r)
        seconds += round_seconds(r)
        value = r.get(metric)
        if isinstance(value, (int, float)) and not math.isnan(value) and value >= target:
            out.update({"cost/reached": 1, "cost/rounds_to_target": r["round"], "cost/bytes_to_target": spent,
                        "cost/seconds_to_target": seconds})
            break
    return out


def run_costs(cfg, rounds: list[dict], headline: str, reference: float | None = None) -> dict:
    """The cost figures of a finished run (empty when it has neither a target nor a budget)."""
    out = {}
    if cfg.federation.comm_budget_mb is not None or cfg.eval.target is not None:
        out["cost/bytes_total"] = sum(round_bytes(r) for r in rounds)
        out["cost/seconds_total"] = sum(round_seconds(r) for r in rounds)
    target = target_of(cfg, headline, reference)
    if target is not None:
        out.update(cost_to_target(rounds, *target))
    return out
