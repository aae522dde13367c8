"""Stopping a run at a safe point on SIGINT (Ctrl-C) or SIGTERM.

`fedlab run` installs `handlers()`: the first signal only asks for a stop and says so on stderr; the round loop
calls `stop_point(round)` after each round's checkpoint is written and logged, and the long steps outside the
loop (a zoo model's pretraining) call `check()` — either raises `Interrupted`, which the CLI turns into one
line with the resume command, while `run_experiment` marks the MLflow run KILLED. A second signal raises
`Interrupted` at once, wherever the main thread is (the last checkpoint stays intact: it is replaced
atomically). `Interrupted` is an `Exception`, not a `KeyboardInterrupt`, so Lightning's fit does not swallow
it into `exit(1)`. Outside `handlers()` the signals keep Python's default behaviour. A leaf module."""
from __future__ import annotations

import contextlib
import signal
import sys
import threading

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}
_requested: list[int] = []        # the signals received since `handlers()` was entered


class Interrupted(Exception):
    """The run stopped on a signal; `after_round` is the last round whose checkpoint is complete (None: no
    round of this process completed)."""

    def __init__(self, signum: int, after_round: int | None = None, where: str = ""):
        self.signum, self.after_round, self.where = signum, after_round, where
        super().__init__(f"{signal.Signals(signum).name}{' ' + where if where else ''}")

    def __reduce__(self):       # pickled from a worker process back to the caller
        return (Interrupted, (self.signum, self.after_round, self.where))

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.signum, 1)


def end_status(e: BaseException) -> str:
    """The MLflow status of a run that ended on `e`: KILLED for a stop by a signal, FAILED otherwise."""
    return "KILLED" if isinstance(e, (Interrupted, KeyboardInterrupt)) else "FAILED"


def requested() -> int | None:
    """The first signal received under `handlers()`, or None."""
    return _requested[0] if _requested else None


def _handle(signum, frame) -> None:
    _requested.append(signum)
    name = signal.Signals(signum).name
    if len(_requested) == 1:
        if signum == signal.SIGUSR1:      # a worker process: its parent forwards the user's stop
            print("[fedlab] worker: stopping at the end of this round (asked by the parent process)", file=sys.stderr,
                  flush=True)
        else:
            print(f"\n[fedlab] {name}: stopping at the next safe point (the end of this round); send it again to "
                  "stop now", file=sys.stderr, flush=True)
        return
    raise Interrupted(signum, where="(second signal: stopped at once)")


@contextlib.contextmanager
def handlers(signals=(signal.SIGINT, signal.SIGTERM), ignore=()):
    """`signals` ask for a stop at the next safe point while the block runs, `ignore` are ignored (a worker
    process: the terminal's SIGINT is its parent's to handle); main thread only — elsewhere, e.g. a Ray Tune
    trial thread, a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _requested.clear()
    old = {s: signal.signal(s, _handle) for s in signals}
    old.update({s: signal.signal(s, signal.SIG_IGN) for s in ignore})
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _requested.clear()


def check(where: str = "") -> None:
    """Raise `Interrupted` when a stop was asked for (a safe point outside the round loop)."""
    if _requested:
        raise Interrupted(_requested[0], where=where)


def stop_point(after_round: int) -> None:
    """The end of a round, its checkpoint written: raise `Interrupted` when a stop was asked for."""
    if _requested:
        raise Interrupted(_requested[0], after_round=after_round)
