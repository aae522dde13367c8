"""Independent runs side by side: a pool of worker processes, each running whole experiments (seeds of one
config, rows of a table) with the config's own thread count, so runs that would wait for each other fill
the machine instead. A run in a worker gives the numbers it gives alone (every random choice derives from
the config's seed, every run starts from fresh residents, MKL sums are conditionally reproducible)."""
from __future__ import annotations

import os
from collections.abc import Iterator


def default_jobs(cfgs) -> int:
    """As many runs at once as the machine has cores for their threads (at least one)."""
    threads = max(c.backend.threads for c in cfgs) if cfgs else 1
    ray = any(c.backend.name == "ray" for c in cfgs)
    return 1 if ray else max(1, min(len(cfgs), (os.cpu_count() or 1) // threads))


def _run_one(tree: dict, tags: dict | None, progress: bool = False):
    """One experiment (in a worker process: the config rebuilt from its mapping, plugins imported first)."""
    from fedlab.config import build_config
    from fedlab.experiment import run_experiment
    from fedlab.tracking import make_tracker

    cfg = build_config(tree)
    tracker = make_tracker(cfg, tags=tags) if cfg.tracking.enabled else None
    try:
        history = run_experiment(cfg, tracker=tracker, progress=progress)
    except BaseException:
        if tracker is not None:
            tracker.finish("FAILED")
        raise
    if tracker is not None:
        tracker.finish()
    return history


def run_many(cfgs: list, tags: list[dict | None], jobs: int, progress: bool = False) -> Iterator[tuple[int, object]]:
    """Run every config (with its MLflow tags); yield (index, history) as runs finish — (index, the exception)
    for a run that failed, so that the others still finish and are recorded. jobs = 1 runs them in this
    process, one after another (with per-round progress if asked); more starts that many worker processes."""
    from fedlab.experiment import model_provenance

    for c in cfgs:   # zoo models are built here, once, before workers would wait on each other's builds
        model_provenance(c)
    if jobs <= 1:
        for i, (c, t) in enumerate(zip(cfgs, tags)):
            try:
                yield i, _run_one(c.to_dict(), t, progress)
            except Exception as e:
                yield i, e
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = {pool.submit(_run_one, c.to_dict(), t): i for i, (c, t) in enumerate(zip(cfgs, tags))}
        for f in as_completed(futures):
            try:
                yield futures[f], f.result()
            except Exception as e:   # one failed run must not lose the others: hand it back, keep going
                yield futures[f], e
