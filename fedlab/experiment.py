"""One experiment end to end: validate, build data, track, run the federation, log artifacts."""
from __future__ import annotations

from pathlib import Path

from fedlab.config import ExperimentConfig, to_yaml


def preflight(cfg: ExperimentConfig) -> None:
    """Checks that need more than the config's own fields, before any model loads."""
    from fedlab.config import ConfigError
    from fedlab.models.inspect import looks_local

    named = [("model.name", cfg.model.name)] + [(f"model.clients[{i}]", n) for i, n in enumerate(cfg.model.clients or [])]
    for key, name in named:
        if looks_local(name) and not Path(name).expanduser().is_dir():
            raise ConfigError(f"{key}: {name!r} is neither a zoo model (see `fedlab zoo list`), a Hugging Face "
                              "id, nor an existing folder")
        if not looks_local(name) and _is_hub_id(name):
            _check_hub_model(key, name)
    from fedlab import numerics

    if cfg.numerics != numerics.mode():
        raise ConfigError(f"numerics: {cfg.numerics!r} is not this process's mode ({numerics.mode()!r}: it is fixed "
                          f"before torch loads); start Python with {numerics.ENV}={cfg.numerics} (`fedlab run` "
                          "does this itself)")
    from fedlab import compiled

    compiled.mode()          # FEDLAB_FUSED_KERNELS: a bad value is one line here, not a traceback mid-run
    from fedlab.runtime.capabilities import capable

    if capable(cfg, "cluster"):
        from fedlab.runtime.cluster import check_address

        check_address(cfg.backend.address)
    # the data view is cheap to build and catches what only the data can tell (e.g. too few rows in a
    # local Hugging Face file for the requested clients)
    from fedlab.data.federated import build_federated_data

    try:
        data = build_federated_data(cfg.data, cfg.seed)
    except ValueError as e:
        raise ConfigError(str(e).splitlines()[0]) from None
    empty = [cid for cid, n in enumerate(data.sizes()) if n == 0]
    if empty:
        raise ConfigError(f"data.num_clients: clients {empty} get no training data with partition="
                          f"{cfg.data.partition}; use fewer clients or more data.train_per_task")
    from fedlab import registry

    if cfg.backend.server_devices > 1:
        from fedlab.objectives.server_devices import check_server_devices, check_server_method

        check_server_method(cfg)
        check_server_devices(cfg)
    check = getattr(registry.get(cfg.method.name).method_cls, "preflight", None)
    if check is not None:     # what a method needs of the model and the data (a ConfigError, one line)
        check(cfg, data)


def _is_hub_id(name: str) -> bool:
    from fedlab.models import real, zoo

    return name not in zoo.ZOO and name not in real.REAL_MODELS


def _check_hub_model(key: str, name: str) -> None:
    """A Hugging Face id must resolve now (its config from the cache or the Hub), not after the run has
    started writing: offline and uncached, the run fails here in one line."""
    from fedlab.config import ConfigError
    from fedlab.quiet import quiet_libraries

    quiet_libraries()
    import huggingface_hub
    from transformers import AutoConfig

    huggingface_hub.utils.logging.set_verbosity_error()   # its retry warnings would add lines to the error
    try:
        try:
            AutoConfig.from_pretrained(name, local_files_only=True)   # cached: no network needed
        except OSError:
            AutoConfig.from_pretrained(name)
    except (OSError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise ConfigError(f"{key}: {name!r} is not a zoo model (see `fedlab zoo list`) or an existing folder, "
                          f"and as a Hugging Face id it cannot be loaded here: {first}") from None


def model_provenance(cfg: ExperimentConfig) -> dict:
    """For every model the run uses (model.name and each model.clients entry): its zoo recipe fingerprint
    and weights' sha256 (building a zoo model first if needed), so a result names the weights it came from."""
    from fedlab.models.zoo import provenance, resolve

    out = {}
    for name in dict.fromkeys([cfg.model.name, *(cfg.model.clients or [])]):
        resolve(name)
        out[name] = provenance(name)
    return out


def run_experiment(cfg: ExperimentConfig, tracker=None, progress: bool = True):
    """Run one experiment, holding its run folder (`fedlab.files.run_lock`): a second run of the same config and
    seed, or a resume of it, is refused while this one runs."""
    from fedlab.files import run_lock
    from fedlab.runtime.federation import run_dir

    preflight(cfg)                  # a config that cannot run fails here, before any lock or file
    with run_lock(run_dir(cfg)):
        return _run_experiment(cfg, tracker, progress)


def _run_experiment(cfg: ExperimentConfig, tracker=None, progress: bool = True):
    from fedlab import registry
    from fedlab.data.federated import build_federated_data
    from fedlab.runtime.backends import make_backend
    from fedlab.runtime.federation import run_dir, run_federation
    from fedlab.tracking import make_tracker

    data = build_federated_data(cfg.data, cfg.seed)
    method = registry.get(cfg.method.name).method_cls(cfg, data)
    reference = None
    if cfg.eval.target_reference:       # read before training: a reference that cannot be read is one line now
        from fedlab.export import final_value
        from fedlab.runtime.cost import target_metric

        reference = final_value(cfg.eval.target_reference, target_metric(cfg, method.headline))
    backend = make_backend(cfg)
    # the MLflow run id is written next to the checkpoint when the run starts, so a run killed at any
    # moment — even before its first checkpoint — is continued, not duplicated
    id_file = run_dir(cfg) / "mlflow_run_id"
    resume_id = _resume_run_id(id_file) if cfg.resume and id_file.exists() else None
    own_tracker = tracker is None
    tracker = tracker or make_tracker(cfg, run_id=resume_id)
    try:
        models = model_provenance(cfg)
        tracker.set_tags({f"fedlab.model.{name}.{k}": v for name, d in models.items() for k, v in d.items()})
        env, diff = _record_environment(cfg, tracker)
        history = run_federation(method, backend, cfg, tracker, progress, target_reference=reference)
        history.models, history.environment, history.diff = models, env, diff
        _log_artifacts(cfg, method, history, tracker)
    except BaseException as e:
        backend.shutdown()
        if own_tracker:        # a run stopped by a signal was killed, not failed (`fedlab.interrupt`)
            from fedlab.tracking import close_on_error

            close_on_error(tracker, e)
        raise
    if own_tracker:
        tracker.finish()
    return history


def _resume_run_id(id_file: Path) -> str | None:
    """The MLflow run id a resumed run continues (32 hex digits in the run folder's `mlflow_run_id`); a
    damaged file is said on stderr and the rest is logged to a new MLflow run."""
    import re
    import sys

    try:
        text = id_file.read_text().strip()
    except (OSError, UnicodeDecodeError):
        text = None
    if text is not None and re.fullmatch(r"[0-9a-f]{32}", text):
        return text
    if text:
        print(f"[fedlab] {id_file} does not hold an MLflow run id: the resumed run is logged to a new MLflow run",
              file=sys.stderr)
    return None


def _record_environment(cfg, tracker) -> tuple[dict, str]:
    """The run's environment fingerprint as MLflow tags (and how OpenMP's idle threads wait, which decides speed,
    not numbers: `fedlab.omp_wait`), and a dirty tree's diff as the artifact `provenance/source.diff`; returns
    (environment, diff)."""
    import sys

    from fedlab import idle_threads, numerics
    from fedlab.evidence.provenance import git_state, mlflow_tags, run_environment
    from fedlab.runtime.federation import run_dir

    state = git_state()
    env = run_environment(cfg, state)
    tracker.set_tags({**mlflow_tags(env), "fedlab.omp_wait": idle_threads.decision})
    if not numerics.in_force():
        print(f"[fedlab] warning: numerics are pinned but ATen dispatches to {env['capability']} (torch ran a kernel "
              "before fedlab was imported): this run's numbers may differ from other machines'", file=sys.stderr)
    if state["diff"]:
        path = run_dir(cfg) / "source.diff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(state["diff"])
        tracker.log_artifact(path, "provenance")
    return env, state["diff"]


def _log_plan(cfg, out: Path, tracker) -> None:
    """`fedlab plan` of this run's config beside its results (plan/plan.txt, plan/plan.json): what each role
    holds, sends and needs, at the run's batch and sequence length. A model the planner cannot size is said so
    in plan.txt; the run is not affected."""
    import json

    from fedlab import plan as planning

    try:
        plans = planning.plan(cfg)
        (out / "plan.txt").write_text(planning.render(cfg, plans, dtype="fp32", checkpointing=False, device_gib=80))
        (out / "plan.json").write_text(json.dumps(planning.as_dicts(plans), indent=1))
        tracker.log_artifact(out / "plan.json", "plan")
    except Exception as e:  # noqa: BLE001 — the plan is a description; a run never fails for it
        (out / "plan.txt").write_text(f"no plan: {type(e).__name__}: {e}\n")
    tracker.log_artifact(out / "plan.txt", "plan")


def _log_export(method, out: Path, tracker) -> None:
    """The run's trained models as PEFT adapter folders (`fedlab.export`, without the base model, which the
    manifest names) beside the run and in MLflow (`model/`), so a run compared in the UI leads to a loadable
    model; `fedlab export` writes the base and merged folders too. A party this method cannot write so is said,
    never a failure of the run."""
    import sys

    from fedlab.export import export_method, writes_anything
    from fedlab.validation import ConfigError

    checkpoint = out / "checkpoint.pt"
    if checkpoint.exists():        # the clients' own models, as a resumed run or `fedlab export` would see them
        import torch

        method.client_states = torch.load(checkpoint, map_location="cpu", weights_only=False).get("client_states") or {}
    if not writes_anything(method):
        return
    try:
        manifest = export_method(method, out / "model", base=False, run=str(out))
    except ConfigError as e:
        print(f"[fedlab] {e}", file=sys.stderr)
        return
    tracker.log_artifact(manifest.parent, "model")


def _log_artifacts(cfg, method, history, tracker) -> None:
    from safetensors.torch import save_file

    from fedlab.plots import accuracy_per_round

    out = Path(history.out_dir)
    (out / "config.yaml").write_text(to_yaml(cfg))
    tracker.log_artifact(out / "config.yaml")
    if getattr(tracker, "mlflow", None) is not None:
        _log_plan(cfg, out, tracker)
    adapters = method.final_adapters()
    if adapters:
        save_file({k: v.contiguous() for k, v in adapters.items()}, str(out / "adapters.safetensors"))
        tracker.log_artifact(out / "adapters.safetensors")
    _log_export(method, out, tracker)
    labels = {cid: ", ".join(method.data.client_tasks(cid)) for cid in range(method.data.num_clients)}
    labels = {cid: (t if len(t) <= 24 else t[:21] + "...") for cid, t in labels.items()}
    png = accuracy_per_round(history.rounds, out / "accuracy_per_round.png",
                             f"{cfg.method.name} · {cfg.model.name} · {cfg.data.partition}", labels)
    tracker.log_artifact(png, "plots")
