"""The H-TIES / PCR grid: a Ray Tune sweep of full FedProxy runs, every trial a child of one MLflow run.

    python sweeps/htiess_grid.py                          # default grid, embedded benchmark (≤ 15 min, 2 cores)
    python sweeps/htiess_grid.py --full                   # the paper-sized grid
    python sweeps/htiess_grid.py --set method.mu=0,0.01   # add any dotted config key as an axis
    python sweeps/htiess_grid.py --address auto --gpus-per-trial 0.25   # on a running Ray cluster
    python sweeps/htiess_grid.py federation.rounds=4      # plain key=value overrides for every trial
    python sweeps/htiess_grid.py --seeds 1                # one seed per grid point (default 3: seeds 0, 1, 2)

An interrupted sweep resumes when run again with the same --name (finished trials are kept; --fresh
starts over). At the end: a ranked table, sweeps/results/<name>/ranked.csv under the working directory (or
--storage), the grid points' mean ± 95 % interval over the seeds (the axis `seed`), and a heatmap (mean metric
over --heatmap X,Y) logged to the parent MLflow run."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_GRID = {"method.rho": [1.0, 1.5], "method.delta": [0.0, 0.5], "method.pcr_lambda": [0.0, 0.001]}
FULL_GRID = {"method.rho": [1.0, 1.1, 1.2, 1.5], "method.delta": [0.0, 0.1, 0.2, 0.4],
             "method.pcr_lambda": [0.0, 1e-5, 1e-4, 1e-3], "method.kappa": [0.3, 0.5, 0.7],
             "model.lora.r": [8, 16, 32]}
# the default grid's budget per trial (the --full grid uses the YAML's own budget); the trials report the
# final accuracy only, so they evaluate at round 0 and after the last round
QUICK = ["federation.rounds=4", "federation.local_epochs=2", "eval.every=4"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("overrides", nargs="*", help="key=value applied to every trial")
    ap.add_argument("--config", default=str(ROOT / "experiments/fedproxy/hetero.yaml"))
    ap.add_argument("--full", action="store_true", help="the paper-sized grid")
    ap.add_argument("--seeds", type=int, default=3, help="seeds per grid point (an axis `seed`: 0 … N−1)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=V1,V2", help="add or replace an axis")
    ap.add_argument("--name", default=None, help="sweep name (resume key); default: htiess-default / htiess-full")
    ap.add_argument("--fresh", action="store_true", help="do not resume an earlier sweep of this name")
    ap.add_argument("--address", default=None, help="Ray cluster address ('auto' joins a running cluster)")
    ap.add_argument("--num-cpus", type=int, default=None, help="CPUs for a local Ray start")
    ap.add_argument("--cpus-per-trial", type=float, default=1.0)
    ap.add_argument("--gpus-per-trial", type=float, default=0.0)
    ap.add_argument("--max-failures", type=int, default=1, help="retries of a failing trial")
    ap.add_argument("--metric", default="score", choices=["score", "acc_mean"],
                    help="rank by the method's headline metric (score) or the clients' mean accuracy")
    ap.add_argument("--heatmap", default="method.rho,method.delta", help="two axes for the heatmap")
    ap.add_argument("--storage", default="sweeps/results",
                    help="where the sweep's results go, relative to the working directory")
    args = ap.parse_args(argv)

    from fedlab.config import ConfigError
    from fedlab.sweep import format_over_seeds, format_ranked, parse_axis, run_sweep

    try:
        if args.seeds < 1:
            raise ConfigError(f"--seeds: {args.seeds} must be an integer >= 1")
        grid = dict(FULL_GRID if args.full else DEFAULT_GRID)
        if args.seeds > 1:
            grid["seed"] = list(range(args.seeds))
        for item in args.set:
            key, values = parse_axis(item)
            grid[key] = values
        axes = tuple(a.strip() for a in args.heatmap.split(","))
        if len(axes) != 2 or any(a not in grid for a in axes):
            raise ConfigError(f"--heatmap: {args.heatmap!r} must name two grid axes; axes: {', '.join(grid)}")
        overrides = ([] if args.full else QUICK) + args.overrides
        name = args.name or ("htiess-full" if args.full else "htiess-default")
        rows = run_sweep(args.config, grid, overrides, name, storage=args.storage, address=args.address,
                         num_cpus=args.num_cpus, cpus_per_trial=args.cpus_per_trial,
                         gpus_per_trial=args.gpus_per_trial, max_failures=args.max_failures, metric=args.metric,
                         heatmap_axes=axes, resume=not args.fresh)
    except ConfigError as e:
        print(f"htiess_grid: error: {e}", file=sys.stderr)
        return 2
    print(format_ranked(rows, list(grid), args.metric))
    if "seed" in grid:
        print(f"\nover seeds ({len(grid['seed'])} per point):\n")
        print(format_over_seeds(rows, list(grid), args.metric))
    print(f"\nranked table: {Path(args.storage) / name / 'ranked.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
