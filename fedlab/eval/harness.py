"""A run's exported model scored with lm-evaluation-harness (`fedlab eval RUN --lm-eval TASKS`), the evaluator
the field reports with, through its Python API; the results go to the run's MLflow run as `lmeval/<task>/<metric>`.

The embedded benchmark's tasks run offline: `write_tasks` writes the test items fedlab scores a run on (the
run's own config and seed, `eval.max_per_task` applied) to JSON-lines files and one lm-eval task file per task
(`fedlab_<task>`), from the templates shipped beside this module (`harness_tasks/`). A multiple-choice task is
lm-eval's `multiple_choice` with the prompt as context and " " + choice as continuation, scored by summed
log-likelihood (`acc`) — what `fedlab.eval.multiple_choice` computes, so the two accuracies agree (tested); a
generative task is `generate_until` with exact match. Other task names go to lm-eval unchanged (Hugging Face
tasks, where their data can be reached).

lm-eval is an optional extra (`pip install -e ".[lmeval]"`, in `dev` too); nothing else imports it."""
from __future__ import annotations

import json
import math
from pathlib import Path

from fedlab.validation import ConfigError

TEMPLATES = Path(__file__).with_name("harness_tasks")
EMBEDDED = "embedded"          # every task of the run's benchmark


def _lm_eval():
    try:
        import lm_eval
    except ImportError as e:
        raise ConfigError("eval --lm-eval: lm-evaluation-harness is not installed: pip install -e \".[lmeval]\" "
                          "(or pip install lm-eval)") from e
    return lm_eval


def write_tasks(cfg, folder: Path) -> list[str]:
    """The run's test items and a task file per task under `folder`; returns the task names (`fedlab_<task>`)."""
    from fedlab.data.federated import build_federated_data

    data = build_federated_data(cfg.data, cfg.seed)
    folder.mkdir(parents=True, exist_ok=True)
    names = []
    for task in data.test:
        examples = data.test_examples(task)[: cfg.eval.max_per_task or None]
        if not examples:
            continue
        rows = folder / f"{task}.jsonl"
        with rows.open("w") as fh:
            for ex in examples:
                row = ({"prompt": ex.prompt, "choices": list(ex.choices), "label": ex.label} if ex.is_choice
                       else {"prompt": ex.prompt, "target": ex.target})
                fh.write(json.dumps(row) + "\n")
        kind = "multiple_choice" if examples[0].is_choice else "generation"
        text = (TEMPLATES / f"{kind}.yaml").read_text()
        name = f"fedlab_{task}"
        (folder / f"{name}.yaml").write_text(text.replace("TASK_NAME", name).replace("ROWS_FILE", str(rows.resolve())))
        names.append(name)
    return names


def task_names(requested: list[str], embedded: list[str]) -> list[str]:
    """`embedded` expands to every task of the run; an embedded task may be named with or without `fedlab_`."""
    out = []
    for name in requested:
        if name == EMBEDDED:
            out += embedded
        elif f"fedlab_{name}" in embedded:
            out.append(f"fedlab_{name}")
        else:
            out.append(name)
    return list(dict.fromkeys(out))


def flatten(results: dict) -> dict[str, float]:
    """lm-eval's {"results": {task: {"acc,none": v, "acc_stderr,none": s, ...}}} as lmeval/<task>/<metric>."""
    out = {}
    for task, metrics in results.get("results", {}).items():
        for key, value in metrics.items():
            metric, _, flt = key.partition(",")
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not math.isnan(value):
                out[f"lmeval/{task.removeprefix('fedlab_')}/{metric}" + ("" if flt in ("", "none") else f"_{flt}")] = value
    return out


def evaluate_folder(model_dir: Path, cfg, tasks: list[str], include: Path, limit: int | None = None,
                    peft: Path | None = None, samples: dict | None = None, own_code: bool = False) -> dict[str, float]:
    """lm-eval on a Hugging Face folder (with `peft`: a PEFT adapter folder over it; `own_code`: a folder that
    brings its architecture's code, `fedlab.export_adapted`), the run's task files included;
    lmeval/<task>/<metric>. `samples`, when given, receives lm-eval's per-item records by task."""
    lm_eval = _lm_eval()
    import torch
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    lm = HFLM(pretrained=str(model_dir), peft=str(peft) if peft else None, tokenizer=str(peft or model_dir),
              device="cuda" if torch.cuda.is_available() and cfg.backend.device != "cpu" else "cpu",
              dtype="float32", batch_size=cfg.eval.batch_size, max_length=cfg.model.max_length,
              trust_remote_code=own_code)
    # lm-eval's own catalogue (thousands of task files, seconds to index) only when a task outside the run's is asked
    own = all(t.startswith("fedlab_") for t in tasks)
    manager = TaskManager(include_path=str(include), include_defaults=not own)
    unknown = [t for t in tasks if t not in manager.all_tasks]
    if unknown:
        raise ConfigError(f"eval --lm-eval: unknown task(s) {', '.join(unknown)}; the run's embedded tasks: "
                          f"{EMBEDDED}, " + ", ".join(t for t in manager.all_tasks if t.startswith("fedlab_")))
    results = lm_eval.simple_evaluate(model=lm, tasks=tasks, task_manager=manager, limit=limit,
                                      bootstrap_iters=0, log_samples=samples is not None, random_seed=cfg.seed,
                                      numpy_random_seed=cfg.seed, torch_random_seed=cfg.seed)
    if samples is not None:
        samples.update((results or {}).get("samples", {}))
    return flatten(results or {})


def evaluate_run(run: str, requested: list[str], work: Path, limit: int | None = None,
                 base: bool = False) -> dict[str, float]:
    """Export the run (`fedlab.export`), write its task files, score every exported party (and with `base` the
    base model: `lmeval_base/…`) and log the numbers to the run's MLflow run; returns them. With several
    parties the keys carry the party's role: lmeval/<role>/<task>/<metric>."""
    from fedlab.config import load_config
    from fedlab.export import export_run, run_folder

    folder = run_folder(run)
    cfg = load_config(folder / "config.yaml", [])
    manifest = json.loads(export_run(folder, work / "export").read_text())
    tasks = task_names(requested, write_tasks(cfg, work / "tasks"))
    parties = manifest["parties"]
    out = {}
    if not parties:
        raise ConfigError(f"eval --lm-eval: the run in {folder} exports no causal language model to score "
                          f"({manifest['method']}: {', '.join(manifest.get('files', [])) or 'nothing'})")
    for role, entry in parties.items():
        if "adapter" in entry:
            scores = evaluate_folder(work / "export" / entry["base"], cfg, tasks, work / "tasks", limit,
                                     peft=work / "export" / role)
        elif "adapted" in entry:    # adapters inside the blocks: the folder brings their code
            scores = evaluate_folder(work / "export" / entry["adapted"], cfg, tasks, work / "tasks", limit,
                                     own_code=True)
        else:                       # a whole model (a fused LLM)
            scores = evaluate_folder(work / "export" / entry["merged"], cfg, tasks, work / "tasks", limit)
        prefix = "" if len(parties) == 1 else f"{role}/"
        out.update({k.replace("lmeval/", f"lmeval/{prefix}", 1): v for k, v in scores.items()})
    if base:
        first = next((e for e in parties.values() if "base" in e), None)
        if first is None:
            raise ConfigError("eval --base: no exported party of this run names a base model")
        scores = evaluate_folder(work / "export" / first["base"], cfg, tasks, work / "tasks", limit)
        out.update({k.replace("lmeval/", "lmeval_base/", 1): v for k, v in scores.items()})
    _log(folder, cfg, out)
    return out


def _log(folder: Path, cfg, metrics: dict) -> None:
    """Into the run's own MLflow run (its id is in the run folder), when the run was tracked."""
    id_file = folder / "mlflow_run_id"
    if not cfg.tracking.enabled or not id_file.exists() or not metrics:
        return
    import mlflow

    from fedlab.tracking import setup_mlflow

    setup_mlflow(cfg.tracking.uri, cfg.tracking.artifact_root, cfg.tracking.experiment)
    client = mlflow.MlflowClient()
    run_id = id_file.read_text().strip()
    for k, v in metrics.items():
        client.log_metric(run_id, k, float(v))
