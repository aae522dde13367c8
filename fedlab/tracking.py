"""MLflow tracking: one run per experiment (nested runs for sweep trials), params = flattened config,
metrics per round, artifacts (config YAML, final adapters, plots). Default store: sqlite:///mlruns/mlflow.db
with artifacts under mlruns/."""
from __future__ import annotations

import contextlib
import math
import os
from pathlib import Path

from fedlab.config import flatten

# fedlab's experiments are model training: MLflow 3's UI reads this tag to choose an experiment's view
# where its global GenAI / Model-training toggle does not decide (in 3.17 the toggle decides, and defaults
# to GenAI: `runs_view` gives the address that opens the runs table)
EXPERIMENT_KIND = "mlflow.experimentKind"
MODEL_TRAINING = "custom_model_development"


def _artifact_location(root: str, experiment: str) -> str:
    return (Path(root).resolve() / experiment).as_uri()


def absolute_uri(uri: str) -> str:
    """A relative SQLite store (`sqlite:///mlruns/mlflow.db`) as the absolute path it names from the current
    folder: MLflow caches stores by URI string, so a process that runs in one folder and then another would
    otherwise keep writing to the first folder's database."""
    if uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        return "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    return uri


def setup_mlflow(uri: str, artifact_root: str, experiment: str):
    import logging

    import mlflow

    for name in ("mlflow", "alembic"):  # schema-migration chatter on a new store
        logging.getLogger(name).setLevel(logging.WARNING)
    from fedlab.files import file_lock

    uri = absolute_uri(uri)
    lock = contextlib.nullcontext()
    if uri.startswith("sqlite:///"):
        db = Path(uri[len("sqlite:///"):])
        db.parent.mkdir(parents=True, exist_ok=True)
        # one process at a time creates or migrates the store and its experiment: two table runs starting together
        # on a fresh clone otherwise both run the schema migration ("duplicate column name") or both create the
        # experiment
        lock = file_lock(db.with_name(db.name + ".lock"), optional=True)
    mlflow.set_tracking_uri(uri)
    with lock:
        return _open_experiment(mlflow, uri, artifact_root, experiment)


def _open_experiment(mlflow, uri: str, artifact_root: str, experiment: str):
    """The experiment's id in the store at `uri`, the experiment created (tagged as model training) if new."""
    try:
        client = mlflow.MlflowClient()
        exp = client.get_experiment_by_name(experiment)
    except Exception as e:      # a damaged or foreign database file, a store that cannot be reached
        from fedlab.files import problem

        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise problem("tracking.uri", uri, f"is not an MLflow store that can be opened ({first})",
                      "move the file aside (a new store is made in its place), or point tracking.uri "
                      "elsewhere, or run with tracking.enabled=false") from None
    if exp is None:
        exp_id = client.create_experiment(experiment, artifact_location=_artifact_location(artifact_root, experiment),
                                          tags={EXPERIMENT_KIND: MODEL_TRAINING})
    else:
        exp_id = exp.experiment_id
        if exp.tags.get(EXPERIMENT_KIND) != MODEL_TRAINING:
            client.set_experiment_tag(exp_id, EXPERIMENT_KIND, MODEL_TRAINING)
    mlflow.set_experiment(experiment_id=exp_id)
    return exp_id


class Tracker:
    """Thin wrapper over MLflow; non-finite metrics are logged under `<name>.nonfinite` = 1 instead of
    reaching MLflow unmarked."""

    def __init__(self, cfg, run_id: str | None = None, nested: bool = False, tags: dict | None = None):
        import mlflow

        self.mlflow = mlflow
        tc = cfg.tracking
        os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
        setup_mlflow(tc.uri, tc.artifact_root, tc.experiment)
        name = tc.run_name or f"{cfg.method.name}-{Path(cfg.model.name).name}-s{cfg.seed}"
        try:
            self.run = mlflow.start_run(run_id=run_id, run_name=None if run_id else name, nested=nested,
                                        tags=tags)
        except mlflow.exceptions.MlflowException as e:
            if run_id is None:
                raise
            from fedlab.config import ConfigError

            raise ConfigError(f"resume: the run's folder names MLflow run {run_id}, which the store {tc.uri} "
                              f"does not hold ({str(e).splitlines()[0][:120]}); resume with the tracking.uri it "
                              "was logged to, or delete the folder's mlflow_run_id file to log the rest to a "
                              "new MLflow run") from None
        self.run_id = self.run.info.run_id
        self.experiment_id = self.run.info.experiment_id
        try:
            if run_id is None:
                mlflow.log_params({k: str(v)[:5000] for k, v in flatten(cfg.to_dict()).items()})
        except BaseException:   # a run that cannot start is ended, never left active
            mlflow.end_run("FAILED")
            raise

    def log_metrics(self, metrics: dict, step: int) -> None:
        clean = {}
        for k, v in metrics.items():
            if not isinstance(v, (int, float)):
                continue
            if math.isfinite(v):
                clean[k] = float(v)
            else:
                clean[f"{k}.nonfinite"] = 1.0
        if clean:
            self.mlflow.log_metrics(clean, step=step)

    def log_artifact(self, path: str | Path, artifact_path: str | None = None) -> None:
        """A file, or a folder's files under `artifact_path`."""
        if Path(path).is_dir():
            self.mlflow.log_artifacts(str(path), artifact_path=artifact_path)
        else:
            self.mlflow.log_artifact(str(path), artifact_path=artifact_path)

    def set_tags(self, tags: dict) -> None:
        self.mlflow.set_tags(tags)

    def finish(self, status: str = "FINISHED") -> None:
        self.mlflow.end_run(status=status)


class NullTracker:
    run_id = None
    experiment_id = None

    def log_metrics(self, metrics, step):
        pass

    def log_artifact(self, path, artifact_path=None):
        pass

    def set_tags(self, tags):
        pass

    def finish(self, status="FINISHED"):
        pass


def close_on_error(tracker, error: BaseException) -> None:
    """End a run that stopped on `error`: KILLED for a signal, FAILED otherwise; a federation that could not go
    on (it diverged, too few clients answered) says why in the tag `fedlab.failure`."""
    from fedlab.interrupt import end_status
    from fedlab.runtime.context import FederationError

    if isinstance(error, FederationError):
        tracker.set_tags({"fedlab.failure": str(error)[:5000]})
    tracker.finish(end_status(error))


def runs_view(experiment_id: str, run_id: str | None = None, host: str = "http://127.0.0.1:5000") -> str:
    """The MLflow UI address of an experiment's runs table (or one run's metric charts). MLflow 3.17 opens an
    experiment on the view its global GenAI / Model-training toggle names (GenAI by default, whatever the
    experiment's kind tag says); `workflowType=machine_learning` asks for the model-training view."""
    page = f"runs/{run_id}/model-metrics" if run_id else "runs"
    return f"{host}/#/experiments/{experiment_id}/{page}?workflowType=machine_learning"


def make_tracker(cfg, run_id: str | None = None, nested: bool = False, tags: dict | None = None):
    return Tracker(cfg, run_id, nested, tags) if cfg.tracking.enabled else NullTracker()
