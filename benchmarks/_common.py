"""Shared helpers of the benchmark scripts: timing and a table printer."""
from __future__ import annotations

import time


def best_time(fn, repeat: int = 3, warmup: int = 1, sync=None) -> float:
    """Best wall time of `repeat` calls after `warmup` calls (seconds); `sync` (e.g. torch.cuda.synchronize)
    is called before the clock starts and before it stops, so asynchronous device work is counted."""
    sync = sync or (lambda: None)
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeat):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        best = min(best, time.perf_counter() - t0)
    return best


def table(rows: list[list], head: list[str]) -> str:
    cells = [head] + [[c if isinstance(c, str) else f"{c:.4g}" for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(head))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|"] + [line(r) for r in cells[1:]])
