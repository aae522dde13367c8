"""Plain-text tables for the terminal: `format_table` and the per-task table a run ends with."""
from __future__ import annotations


def format_table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[("-" if c is None else (f"{c:.4f}" if isinstance(c, float) else str(c))) for c in r]
                        for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def final_table(history) -> str:
    """Per task and mean: zero-shot (round 0) against the final round, then the columns the method
    declared for its own server-side models (`FedMethod.table_columns`: which round, "first" or "final",
    metric prefix, header; `{round}` in a header is the final round). Given several histories (one per
    seed), each cell is the mean ± the half-width of its 95 % interval."""
    from fedlab.evidence.stats import fmt_ci

    histories = history if isinstance(history, (list, tuple)) else [history]
    first = histories[0]
    last_round = first.final.get("round")
    sources = [("first", "", "zero-shot"), ("final", "", f"final (round {last_round})")]
    sources += [(which, prefix, label.format(round=last_round)) for which, prefix, label in first.columns]
    pick = lambda h, which: h.rounds[0] if which == "first" else h.final  # noqa: E731
    sources = [(w, p, label) for w, p, label in sources
               if f"{p}acc/mean" in pick(first, w) or f"{p}rougeL/mean" in pick(first, w)]
    tasks = sorted({k.split("_", 1)[1] for w in ("first", "final") for k in pick(first, w) if k.startswith("acc/task_")})
    generative = sorted({k.split("_", 1)[1] for w in ("first", "final") for k in pick(first, w)
                         if k.startswith("rougeL/task_")})

    def value(h, which, prefix, metric):
        """`{prefix}acc/task_<t>`, or `{prefix}acc/<t>` where a method names its per-task scores so (Floe)."""
        got = pick(h, which)
        v = got.get(f"{prefix}{metric}")
        return got.get(f"{prefix}{metric.replace('task_', '', 1)}") if v is None and "/task_" in metric else v

    def cell(which, prefix, metric):
        vals = [value(h, which, prefix, metric) for h in histories]
        vals = [v for v in vals if v is not None]
        if not vals:
            return None
        return vals[0] if len(histories) == 1 else fmt_ci(vals)

    rows = [[t, *[cell(w, p, f"acc/task_{t}") for w, p, _ in sources]] for t in tasks]
    if tasks:
        rows.append(["mean (over clients)", *[cell(w, p, "acc/mean") for w, p, _ in sources]])
    for metric, label in (("rougeL", "Rouge-L"), ("em", "EM")):   # generative tasks
        rows += [[f"{t} ({label})", *[cell(w, p, f"{metric}/task_{t}") for w, p, _ in sources]] for t in generative]
        if generative:
            rows.append([f"{label} mean (over clients)", *[cell(w, p, f"{metric}/mean") for w, p, _ in sources]])
    return format_table(rows, ["task", *[label for *_, label in sources]])
