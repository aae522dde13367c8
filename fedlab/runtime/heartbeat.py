"""A line now and then while a round runs, so that a long round (a real LLM's evaluation on hundreds of items per
task takes minutes) is not silence: every `EVERY` seconds, the round, what it is doing and the time so far.

It only prints: a daemon thread that waits on an event, with no part in what the round computes."""
from __future__ import annotations

import contextlib
import threading
import time

from fedlab.runtime.context import log_line

EVERY = 60.0        # seconds between two lines of one round


class Heartbeat:
    """`with beat.round(rnd, "training"):` runs the block under it; `beat.phase("evaluating")` names what the
    round does now. Off (`on` False: a run without progress lines) it does nothing."""

    def __init__(self, rounds: int, on: bool, every: float | None = None):
        self.rounds, self.on, self.every = rounds, on, EVERY if every is None else every
        self.what = ""

    def phase(self, what: str) -> None:
        self.what = what

    @contextlib.contextmanager
    def round(self, rnd: int, what: str):
        self.what = what
        if not self.on:
            yield self
            return
        done = threading.Event()
        t0 = time.perf_counter()

        def beat():
            while not done.wait(self.every):
                log_line(f"[fedlab] round {rnd}/{self.rounds}: {self.what} ({time.perf_counter() - t0:.0f}s so far)")

        thread = threading.Thread(target=beat, name=f"fedlab-heartbeat-{rnd}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            done.set()
            thread.join()
