"""Ray Tune grids over dotted config keys: each trial a full fedlab run, logged to MLflow as a child of
one parent run; a failing trial is retried (`max_failures`) and never stops the others; an interrupted
sweep resumes with its finished trials kept; the end prints a ranked table, writes it as CSV and logs a
heatmap of the metric over two chosen axes to the parent run."""
from __future__ import annotations

import csv
import itertools
import json
import math
import os
import signal
import sys
import threading
from pathlib import Path

import yaml


def parse_axis(item: str) -> tuple[str, list]:
    """`key=v1,v2,…` → (key, [values parsed as YAML])."""
    from fedlab.config import ConfigError

    if "=" not in item:
        raise ConfigError(f"--set {item!r}: expected key=v1,v2,... (e.g. method.rho=1.0,1.5)")
    key, raw = item.split("=", 1)
    values = [yaml.safe_load(v) for v in raw.split(",") if v != ""]
    if not values:
        raise ConfigError(f"--set {item!r}: no values")
    return key.strip(), values


def validate_grid(base: str, grid: dict[str, list], overrides: list[str]) -> list:
    """Every grid point's config, validated before any trial starts (bad keys and values fail fast)."""
    from fedlab.config import load_config

    return [load_config(base, [*overrides, *(f"{k}={json.dumps(v)}" for k, v in zip(grid, point))])
            for point in itertools.product(*grid.values())]


def _trial(config: dict, fixed: dict) -> None:
    """One Tune trial: a full fedlab run with the trial's grid point (`config`) applied on top of the
    sweep's fixed settings (`fixed`, shipped once with tune.with_parameters)."""
    from ray import tune

    from fedlab.config import load_config
    from fedlab.experiment import run_experiment
    from fedlab.tracking import make_tracker

    point = {k: config[k] for k in fixed["keys"]}
    cfg = load_config(fixed["base"], [*fixed["overrides"], *(f"{k}={json.dumps(v)}" for k, v in point.items())])
    marker = Path(fixed["folder"]) / "fail_once"
    if fixed.get("fail_on") and all(point.get(k) == v for k, v in fixed["fail_on"].items()) and not marker.exists():
        marker.write_text(json.dumps(point))
        raise RuntimeError(f"injected failure for {point}")  # fault injection (tests): fails the first time only
    name = ", ".join(f"{k.split('.')[-1]}={v}" for k, v in point.items())
    tracker = make_tracker(cfg, tags={"mlflow.parentRunId": fixed["parent"], "fedlab.sweep": fixed["name"],
                                      "mlflow.runName": name})
    try:
        h = run_experiment(cfg, tracker=tracker, progress=False)
    except BaseException:
        tracker.finish("FAILED")
        raise
    tracker.finish()
    f = h.final
    # score: the method's headline metric (its server model's accuracy where it has one, e.g. FedProxy's
    # fused LLM; otherwise the clients' mean accuracy)
    to_target = f.get("cost/bytes_to_target")      # eval.target: the cost of reaching it (nan: not reached)
    tune.report({"acc_mean": f.get("acc/mean", float("nan")), "score": f.get(h.headline, float("nan")),
                 "score_metric": h.headline, "mlflow_run_id": tracker.run_id or "",
                 "rounds_to_target": f.get("cost/rounds_to_target", float("nan")),
                 "mb_to_target": float("nan") if to_target is None else to_target / 1e6})


def _absolute_tracking(overrides: list[str], base: str) -> list[str]:
    """Trials run in other processes and folders: pin the MLflow store, artifacts and outputs absolutely."""
    from fedlab.config import load_config

    cfg = load_config(base, overrides)
    uri = cfg.tracking.uri
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        uri = "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    return [*overrides, f"tracking.uri={uri}", f"tracking.artifact_root={Path(cfg.tracking.artifact_root).resolve()}",
            f"output_dir={Path(cfg.output_dir).resolve()}"]


def sweep_identity(base: str, grid: dict, overrides: list[str], points) -> dict:
    """What a sweep's trials are made from: the base config (its run key), the grid, the overrides and the
    zoo recipe fingerprint of every model a point uses. Finished trials are resumed only under the same."""
    from fedlab.config import load_config
    from fedlab.models.zoo import ZOO, fingerprint
    from fedlab.runtime.federation import run_key

    names = sorted({n for c in points for n in (c.model.name, *(c.model.clients or []))})
    return {"base": run_key(load_config(base, overrides)), "grid": json.dumps(grid, sort_keys=True, default=str),
            "overrides": list(overrides), "zoo": {n: fingerprint(n) for n in names if n in ZOO}}


def _same_identity(folder: Path, identity: dict) -> bool:
    """True when the folder's finished trials were made from `identity` (then they are resumed); otherwise the
    old trials move aside (tune.stale-<n>) and the identity is recorded for the fresh sweep."""
    path = folder / "identity.json"
    old = None
    if path.exists():
        from fedlab.files import read_json

        old = read_json(path, None, "delete it (the sweep's finished trials then move aside and it starts "
                                    "afresh), or run with --fresh", dict, "a sweep identity")
    if old == identity:
        return True
    tune_dir = folder / "tune"
    if tune_dir.exists():
        n = 1
        while (folder / f"tune.stale-{n}").exists():
            n += 1
        tune_dir.rename(folder / f"tune.stale-{n}")
        why = "other zoo weights" if old and old.get("zoo") != identity["zoo"] else "another config"
        print(f"[fedlab] sweep {folder.name}: its finished trials were made with {why}; starting afresh (old "
              f"trials kept in {folder / f'tune.stale-{n}'})", file=sys.stderr)
    path.write_text(json.dumps(identity, indent=1))
    return False


def run_sweep(base: str, grid: dict[str, list], overrides: list[str], name: str, storage: str = "sweeps/results",
              address: str | None = None, num_cpus: int | None = None, cpus_per_trial: float = 1.0,
              gpus_per_trial: float = 0.0, max_failures: int = 1, metric: str = "score",
              heatmap_axes: tuple[str, str] | None = None, resume: bool = True, fail_on: dict | None = None) -> list[dict]:
    import mlflow
    from ray import tune

    from fedlab.config import load_config
    from fedlab.runtime.cluster import check_address, connect
    from fedlab.tracking import setup_mlflow

    points = validate_grid(base, grid, overrides)
    check_address(address, "--address")   # an unreachable cluster fails here, before anything is written
    overrides = _absolute_tracking(overrides, base)
    cfg = load_config(base, overrides)
    from fedlab.models.zoo import resolve

    for model in sorted({c.model.name for c in points}):
        resolve(model)  # build zoo models once here, before trials start in parallel
    folder = Path(storage).resolve() / name
    folder.mkdir(parents=True, exist_ok=True)
    resume = resume and _same_identity(folder, sweep_identity(base, grid, overrides, points))

    os.environ["RAY_CHDIR_TO_TRIAL_DIR"] = "0"
    connect(address, num_cpus, "--address")
    # Tune stops a sweep gracefully on SIGINT (trials stopped, its state saved); SIGTERM is turned into that
    # (set after Ray's start, whose own handler would abort the process)
    main = threading.current_thread() is threading.main_thread()
    old_term = signal.signal(signal.SIGTERM, lambda s, f: os.kill(os.getpid(), signal.SIGINT)) if main else None
    # the parent MLflow run (continued, not duplicated, when the sweep resumes); it ends FAILED if the sweep
    # fails, never left active
    setup_mlflow(cfg.tracking.uri, cfg.tracking.artifact_root, cfg.tracking.experiment)
    parent_file = folder / "parent_run_id"
    parent_id = parent_file.read_text(errors="replace").strip() if parent_file.exists() and resume else None
    try:
        parent = mlflow.start_run(run_id=parent_id, run_name=None if parent_id else f"sweep-{name}",
                                  tags={"fedlab.sweep": name})
    except mlflow.exceptions.MlflowException:
        if not parent_id:
            raise
        print(f"[fedlab] {parent_file} names MLflow run {parent_id[:40]!r}, which {cfg.tracking.uri} does not hold: "
              "the resumed sweep gets a new parent run", file=sys.stderr, flush=True)
        parent = mlflow.start_run(run_name=f"sweep-{name}", tags={"fedlab.sweep": name})
    parent_file.write_text(parent.info.run_id)
    try:
        if not parent_id:
            mlflow.log_params({"sweep.base": base, "sweep.grid": json.dumps(grid)[:5000],
                               "sweep.overrides": " ".join(overrides)[:5000]})
        rows = _tune(tune, mlflow, parent, grid, base, overrides, name, fail_on, folder, cpus_per_trial,
                     gpus_per_trial, metric, max_failures, resume, heatmap_axes)
    except BaseException as e:
        from fedlab.interrupt import end_status

        mlflow.end_run(end_status(e))
        raise
    finally:
        if main:
            signal.signal(signal.SIGTERM, old_term if old_term is not None else signal.SIG_DFL)
    mlflow.end_run()
    return rows


def _tune(tune, mlflow, parent, grid, base, overrides, name, fail_on, folder, cpus_per_trial, gpus_per_trial,
          metric, max_failures, resume, heatmap_axes) -> list[dict]:
    """The Tune grid under the parent run: trials, ranked CSV, heatmap, summary metrics."""
    fixed = {"keys": list(grid), "base": str(Path(base).resolve()), "overrides": overrides,
             "parent": parent.info.run_id, "name": name, "fail_on": fail_on or {}, "folder": str(folder)}
    trainable = tune.with_resources(tune.with_parameters(_trial, fixed=fixed),
                                    {"cpu": cpus_per_trial, "gpu": gpus_per_trial})
    space = {k: tune.grid_search(v) for k, v in grid.items()}
    exp_path = folder / "tune"
    if resume and tune.Tuner.can_restore(str(exp_path)):
        print(f"[fedlab] resuming sweep {exp_path} (finished trials are kept)", file=sys.stderr)
        tuner = tune.Tuner.restore(str(exp_path), trainable=trainable, resume_errored=True, param_space=space)
    else:
        tuner = tune.Tuner(trainable, param_space=space,
                           tune_config=tune.TuneConfig(metric=metric, mode="min" if metric in COSTS else "max"),
                           run_config=tune.RunConfig(name="tune", storage_path=str(folder), verbose=1,
                                                     failure_config=tune.FailureConfig(max_failures=max_failures)))
    results = tuner.fit()
    stopped = [r for r in results if r.error is None and "score" not in (r.metrics or {})]
    if stopped:         # Ctrl-C: Tune stopped the running trials and saved its state
        _end_open_trials(mlflow, parent.info.run_id)
        from fedlab.interrupt import Interrupted

        raise Interrupted(signal.SIGINT, where=f"{len(results) - len(stopped)} of {len(results)} trials finished")

    rows = []
    for r in results:
        row = {k: r.config.get(k) for k in grid}
        m = r.metrics or {}
        row.update({"acc_mean": m.get("acc_mean"), "score": m.get("score"), "score_metric": m.get("score_metric"),
                    "rounds_to_target": _number(m.get("rounds_to_target")),
                    "mb_to_target": _number(m.get("mb_to_target")),
                    "mlflow_run_id": m.get("mlflow_run_id"), "status": "ERROR" if r.error else "OK"})
        rows.append(row)
    rank_rows(rows, metric)
    csv_path = folder / "ranked.csv"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    mlflow.log_artifact(str(csv_path))
    if heatmap_axes and all(a in grid for a in heatmap_axes):
        png = sweep_heatmap(rows, heatmap_axes, metric, folder / "heatmap.png")
        mlflow.log_artifact(str(png), "plots")
    ok = [r for r in rows if r["status"] == "OK" and r[metric] is not None]
    if ok:
        mlflow.log_metrics({f"best_{metric}": ok[0][metric], "trials_ok": len(ok), "trials_failed": len(rows) - len(ok)})
    return rows


def _end_open_trials(mlflow, parent_id: str) -> None:
    """The trial runs of this sweep still RUNNING in MLflow (their processes stopped by Tune) end KILLED."""
    client = mlflow.MlflowClient()
    parent = client.get_run(parent_id)
    for run in client.search_runs([parent.info.experiment_id],
                                  f"tags.mlflow.parentRunId = '{parent_id}' and attributes.status = 'RUNNING'"):
        client.set_terminated(run.info.run_id, "KILLED")


def sweep_heatmap(rows: list[dict], axes: tuple[str, str], metric: str, path: Path) -> Path:
    """Mean of `metric` over every other axis, on the grid of the two chosen axes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    xs = sorted({r[axes[0]] for r in rows}, key=str)
    ys = sorted({r[axes[1]] for r in rows}, key=str)
    grid = np.full((len(ys), len(xs)), np.nan)
    for i, y in enumerate(ys):
        for j, x in enumerate(xs):
            vals = [r[metric] for r in rows if r[axes[0]] == x and r[axes[1]] == y and r[metric] is not None]
            if vals:
                grid[i, j] = float(np.mean(vals))
    fig, ax = plt.subplots(figsize=(1.3 * len(xs) + 2.5, 1.0 * len(ys) + 2))
    im = ax.imshow(grid, cmap="viridis", origin="lower")
    ax.set_xticks(range(len(xs)), [str(x) for x in xs])
    ax.set_yticks(range(len(ys)), [str(y) for y in ys])
    ax.set_xlabel(axes[0])
    ax.set_ylabel(axes[1])
    for i in range(len(ys)):
        for j in range(len(xs)):
            if not np.isnan(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.3f}", ha="center", va="center", color="white", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.046, label=metric)
    ax.set_title(f"{metric} (mean over other axes)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


COSTS = ("rounds_to_target", "mb_to_target")     # lower is better; a trial that never reached the target ranks last


def _number(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def rank_rows(rows: list[dict], metric: str) -> list[dict]:
    """Best first: the highest score or accuracy, or the lowest cost to the target; trials without the metric
    last."""
    sign = 1 if metric in COSTS else -1
    rows.sort(key=lambda x: (x.get(metric) is None, sign * (x.get(metric) or 0.0)))
    return rows


def format_ranked(rows: list[dict], keys: list[str], metric: str, limit: int = 20) -> str:
    from fedlab.evidence.tables import format_table

    costs = any(r.get("rounds_to_target") is not None for r in rows)
    to_target = lambda r: ("not reached" if r.get("rounds_to_target") is None          # noqa: E731
                           else f"{r['rounds_to_target']} rounds, {r['mb_to_target']:.2f} MB")
    table = [[i + 1, *[str(r[k]) for k in keys], r["acc_mean"], r["score"], *([to_target(r)] if costs else []),
              r["status"]] for i, r in enumerate(rows[:limit])]
    scored = sorted({r["score_metric"] for r in rows if r.get("score_metric")})
    return format_table(table, ["rank", *keys, "clients acc/mean", f"score ({', '.join(scored) or '-'})",
                                *(["to eval.target"] if costs else []), "status"])


def over_seeds(rows: list[dict], keys: list[str], metric: str) -> list[dict]:
    """With `seed` among the grid's axes: one row per point of the other axes, the metric's mean over the
    seeds that finished, the half-width of its 95 % t-interval and the number of seeds; best mean first."""
    from fedlab.evidence.stats import mean_ci

    others = [k for k in keys if k != "seed"]
    points: dict[tuple, list[float]] = {}
    for r in rows:
        if r["status"] == "OK" and r[metric] is not None:
            points.setdefault(tuple(r[k] for k in others), []).append(float(r[metric]))
    out = []
    for point, values in points.items():
        mean, half = mean_ci(values)
        out.append({**dict(zip(others, point)), "mean": mean, "half": half, "seeds": len(values)})
    return sorted(out, key=lambda x: -x["mean"])


def format_over_seeds(rows: list[dict], keys: list[str], metric: str) -> str:
    from fedlab.evidence.tables import format_table

    summary = over_seeds(rows, keys, metric)
    others = [k for k in keys if k != "seed"]
    return format_table([[*[str(s[k]) for k in others], f"{s['mean']:.4f} ± {s['half']:.4f}", s["seeds"]]
                         for s in summary], [*others, f"{metric} (mean ± 95 %)", "seeds"])
