"""Several seeds of one config: one MLflow parent run with a child per seed, and the mean and 95 % interval of
every final metric over the seeds (`fedlab run CONFIG --seeds 0,1,2`)."""
from __future__ import annotations

from pathlib import Path

from fedlab.config import ExperimentConfig
from fedlab.experiment import preflight
from fedlab.parallel import default_jobs, run_many


def seed_summary(histories: list) -> dict:
    """Mean and 95 % half-width over seeds of every final metric the runs share (time and per-round
    bookkeeping left out): {metric: (mean, half-width)}."""
    from fedlab.evidence.stats import mean_ci

    keys = set.intersection(*[{k for k, v in h.final.items() if isinstance(v, (int, float))} for h in histories])
    keys = {k for k in keys if k.startswith(("acc", "llm", "rouge", "em/", "loss/", "bytes/"))}
    return {k: mean_ci([h.final[k] for h in histories]) for k in sorted(keys)}


def run_seeds(cfg: ExperimentConfig, seeds: list[int], progress: bool = True, jobs: int | None = None):
    """The config once per seed, each run an MLflow child of one parent run that gets every final metric's
    mean and 95 % interval over the seeds (`<metric>` and `<metric>.ci95`); `jobs` runs at once (default:
    as many as the cores allow for the config's threads). Returns (histories by seed, parent run id or None)."""
    import dataclasses
    import sys

    from fedlab.tracking import setup_mlflow

    runs = [dataclasses.replace(cfg, seed=s) for s in seeds]
    for c in runs:
        preflight(c)
    jobs = default_jobs(runs) if jobs is None else jobs
    parent_id = None
    if cfg.tracking.enabled:
        import mlflow

        tc = cfg.tracking
        exp_id = setup_mlflow(tc.uri, tc.artifact_root, tc.experiment)
        name = tc.run_name or f"{cfg.method.name}-{Path(cfg.model.name).name}-seeds{','.join(map(str, seeds))}"
        parent_id = mlflow.MlflowClient().create_run(exp_id, run_name=name, tags={
            "fedlab.seeds": ",".join(map(str, seeds))}).info.run_id
    tags = {"mlflow.parentRunId": parent_id} if parent_id else None
    histories: list = [None] * len(runs)
    if progress:
        print(f"[fedlab] {len(runs)} seeds, {jobs} at a time", file=sys.stderr, flush=True)
    try:
        for i, h in run_many(runs, [tags] * len(runs), jobs, progress=progress and jobs == 1):
            if isinstance(h, BaseException):
                raise h
            histories[i] = h
            if progress:
                print(f"[fedlab] seed {runs[i].seed} done: {h.headline} {h.final.get(h.headline, float('nan')):.4f}",
                      file=sys.stderr, flush=True)
    except BaseException as e:
        if parent_id:
            from fedlab.interrupt import end_status

            mlflow.MlflowClient().set_terminated(parent_id, end_status(e))
        raise
    if parent_id:
        client = mlflow.MlflowClient()
        for k, (mean, half) in seed_summary(histories).items():
            client.log_metric(parent_id, k, mean)
            if half == half:   # not nan
                client.log_metric(parent_id, f"{k}.ci95", half)
        client.log_param(parent_id, "seeds", ",".join(map(str, seeds)))
        client.set_terminated(parent_id)
    return histories, parent_id
