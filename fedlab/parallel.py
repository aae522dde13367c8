"""Independent runs side by side: a pool of worker processes, each running whole experiments (seeds of one
config, rows of a table) with the config's own thread count, so runs that would wait for each other fill
the machine instead. A run in a worker gives the numbers it gives alone (every random choice derives from
the config's seed, every run starts from fresh residents, MKL sums are conditionally reproducible)."""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator


def default_jobs(cfgs) -> int:
    """As many runs at once as the machine has cores for their threads (at least one)."""
    threads = max(c.backend.threads for c in cfgs) if cfgs else 1
    from fedlab.runtime.capabilities import capable

    owned = any(capable(c, "owns_cores") for c in cfgs)     # a backend that spreads its workers over the cores
    return 1 if owned else max(1, min(len(cfgs), (os.cpu_count() or 1) // threads))


def _run_one(tree: dict, tags: dict | None, progress: bool = False, worker: bool = False):
    """One experiment (in a worker process: the config rebuilt from its mapping, plugins imported first). A
    worker ignores the terminal's SIGINT and stops at its next round's end on the SIGUSR1 its parent forwards
    (`run_many`); in the caller's process the caller's handlers stay."""
    import signal

    from fedlab import interrupt
    from fedlab.config import build_config
    from fedlab.experiment import run_experiment
    from fedlab.tracking import make_tracker

    cfg = build_config(tree)
    tracker = make_tracker(cfg, tags=tags) if cfg.tracking.enabled else None
    try:
        with (interrupt.handlers((signal.SIGUSR1,), ignore=(signal.SIGINT,)) if worker
              else contextlib.nullcontext()):
            history = run_experiment(cfg, tracker=tracker, progress=progress)
    except BaseException as e:
        if tracker is not None:
            from fedlab.tracking import close_on_error

            close_on_error(tracker, e)
        raise
    if tracker is not None:
        tracker.finish()
    return history


def run_many(cfgs: list, tags: list[dict | None], jobs: int, progress: bool = False) -> Iterator[tuple[int, object]]:
    """Run every config (with its MLflow tags); yield (index, history) as runs finish — (index, the exception)
    for a run that failed, so that the others still finish and are recorded. jobs = 1 runs them in this
    process, one after another (with per-round progress if asked); more starts that many worker processes."""
    from fedlab import interrupt
    from fedlab.experiment import model_provenance

    for c in cfgs:   # zoo models are built here, once, before workers would wait on each other's builds
        model_provenance(c)
    if jobs <= 1:    # SIGINT / SIGTERM: the run in progress stops at its round's end, the rest are not started
        with interrupt.handlers():
            for i, (c, t) in enumerate(zip(cfgs, tags)):
                interrupt.check("(the runs that finished are kept; the others were not started)")
                try:
                    h = _run_one(c.to_dict(), t, progress)
                except interrupt.Interrupted:
                    raise
                except Exception as e:
                    yield i, e
                    continue
                yield i, h
        return
    import multiprocessing
    import signal
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    with interrupt.handlers(), ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_run_one, c.to_dict(), t, False, True): i for i, (c, t) in enumerate(zip(cfgs, tags))}
        forwarded, left = False, set(futures)
        while left:
            try:
                done, left = wait(left, timeout=1.0, return_when=FIRST_COMPLETED)
            except interrupt.Interrupted:       # a second signal: stop the workers now
                _signal_workers(pool, signal.SIGTERM)
                pool.shutdown(wait=False, cancel_futures=True)
                raise
            if interrupt.requested() and not forwarded:     # a stop asked for: runs not started are dropped,
                forwarded = True                             # running ones stop at their next round's end
                for f in left:
                    f.cancel()
                _signal_workers(pool, signal.SIGUSR1)
            for f in done:
                if f.cancelled():
                    continue
                try:
                    h = f.result()
                except interrupt.Interrupted:     # a worker stopped at a round's end: not a failed run
                    continue
                except Exception as e:   # one failed run must not lose the others: hand it back, keep going
                    yield futures[f], e
                    continue
                yield futures[f], h
        if forwarded:
            raise interrupt.Interrupted(interrupt.requested() or signal.SIGINT,
                                        where="(the runs that finished are kept; the others stopped or never started)")


def _signal_workers(pool, signum: int) -> None:
    for proc in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError):
            os.kill(proc.pid, signum)
