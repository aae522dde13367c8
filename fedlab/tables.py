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
    metric prefix, header; `{round}` in a header is the final round)."""
    zero, last = history.rounds[0], history.final
    extra = [(zero if which == "first" else last, prefix, label.format(round=last.get("round")))
             for which, prefix, label in history.columns]
    extra = [(src, p, label) for src, p, label in extra if f"{p}acc/mean" in src]
    tasks = sorted({k.split("_", 1)[1] for k in list(zero) + list(last) if k.startswith("acc/task_")})
    rows = [[t, zero.get(f"acc/task_{t}"), last.get(f"acc/task_{t}")] + [src.get(f"{p}acc/task_{t}")
                                                                           for src, p, _ in extra]
            for t in tasks]
    rows.append(["mean (over clients)", zero.get("acc/mean"), last.get("acc/mean")]
                + [src.get(f"{p}acc/mean") for src, p, _ in extra])
    return format_table(rows, ["task", "zero-shot", f"final (round {last.get('round')})"] + [n for *_, n in extra])
