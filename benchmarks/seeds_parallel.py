"""Seeds side by side: the same seeds of one config run one after another (jobs = 1, the
baseline) and then concurrently in worker processes (`fedlab run --seeds … --jobs N`, what the table
scripts do), in the same invocation. Prints both wall times, their ratio, and whether every run's final
metrics are identical between the two.

    python benchmarks/seeds_parallel.py                          # FedAvg on tiny-llama, seeds 0,1,2, 2 workers
    python benchmarks/seeds_parallel.py --config experiments/fedproxy/hetero.yaml federation.rounds=2

Each run uses `backend.threads` torch threads (1 by default), so on 2 cores two runs fill the machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import table  # noqa: E402

DEFAULT = ["method.name=fedavg", "model.name=tiny-llama", "federation.rounds=3", "backend.name=inprocess"]


def timed_runs(cfgs, jobs: int):
    """Wall seconds of running every config `jobs` at a time, and their histories in config order."""
    from fedlab.parallel import run_many

    out = [None] * len(cfgs)
    t0 = time.perf_counter()
    for i, h in run_many(cfgs, [None] * len(cfgs), jobs):
        if isinstance(h, BaseException):
            raise h
        out[i] = h
    return time.perf_counter() - t0, out


def finals(history) -> dict:
    """The run's final numbers, timings left out (they differ between any two runs)."""
    return {k: v for k, v in history.final.items()
            if isinstance(v, (int, float)) and not k.startswith("time/")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="key=value for every run (after the defaults)")
    ap.add_argument("--config", default=None, help="a YAML config (default: fedlab's defaults + FedAvg)")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--jobs", type=int, default=None, help="workers (default: cores / backend.threads)")
    args = ap.parse_args(argv)

    import dataclasses

    from fedlab.config import load_config
    from fedlab.experiment import model_provenance
    from fedlab.parallel import default_jobs

    base = [] if args.config else DEFAULT
    cfg = load_config(args.config, base + ["tracking.enabled=false"] + args.overrides)
    seeds = [int(s) for s in args.seeds.split(",")]
    cfgs = [dataclasses.replace(cfg, seed=s) for s in seeds]
    jobs = args.jobs or default_jobs(cfgs)
    model_provenance(cfg)      # zoo models built before either timing starts
    t_seq, h_seq = timed_runs(cfgs, 1)
    t_par, h_par = timed_runs(cfgs, jobs)
    same = all(finals(a) == finals(b) for a, b in zip(h_seq, h_par))
    head = cfg.method.name, h_seq[0].headline
    rows = [["one after another (jobs = 1)", f"{t_seq:.1f}", "1"],
            [f"{jobs} at a time (worker processes)", f"{t_par:.1f}", f"{t_seq / t_par:.2f}"]]
    print(f"{head[0]} on {cfg.model.name}, seeds {args.seeds}, {cfg.backend.threads} torch thread(s) per run, "
          f"{os.cpu_count()} cores")
    print(table(rows, ["how", "wall s", "speed-up"]))
    print(f"\nfinal metrics identical in every seed: {'yes' if same else 'NO'}  "
          f"({head[1]}: {', '.join(f'{h.final[head[1]]:.4f}' for h in h_seq)})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
