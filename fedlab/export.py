"""A run's trained models in the ecosystem's formats (`fedlab export RUN --to DIR`).

Every trained party of the run becomes a folder named by its role: a PEFT adapter folder
(`adapter_config.json` + `adapter_model.safetensors`) that `PeftModel.from_pretrained(base, folder)` loads, and with
`--merged` a `save_pretrained` folder with its tokenizer that `AutoModelForCausalLM.from_pretrained(folder)` loads.
The base model an adapter needs is written once under `base/<name>/` (a zoo model is a Hugging Face folder
already), and `manifest.json` says, per party, its adapter folder, its merged folder, the base model's name and
the sha256 of the base's weights.

A method says which parties it trained with `FedMethod.export_parties()` (default: its global model, the
`final_adapters` on `model.name`); the run's state comes from its last checkpoint, so every party the method
checkpoints can be exported.
"""
from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from fedlab.validation import ConfigError


@dataclass
class Party:
    """One trained model of a run: its role (the folder's name), the resident model it lives on (base model,
    transforms and LoRA) and its trained adapter state (parameter names as the resident model has them); or,
    with `model`, a whole model whose weights changed (a fused LLM), written as a `save_pretrained` folder with
    the resident's tokenizer."""
    role: str
    resident: object                  # fedlab.runtime.resident.Resident
    state: dict
    model: object = None              # a whole model to write instead of an adapter


def run_folder(run: str | Path) -> Path:
    """The run folder of RUN: a folder holding config.yaml and checkpoint.pt, or an MLflow run id of this
    folder's store (its config.yaml artifact names the folder)."""
    p = Path(run)
    if p.is_dir():
        if not (p / "config.yaml").is_file():
            raise ConfigError(f"export: {p} is not a finished run's folder (it needs config.yaml and checkpoint.pt)")
        if not (p / "checkpoint.pt").is_file():
            raise ConfigError(f"export: {p} holds no checkpoint: the run trained no model to export (no round ran, "
                              "or the method only evaluates) or was stopped before its first round ended")
        return p
    if len(str(run)) == 32 and all(c in "0123456789abcdef" for c in str(run)):
        return _folder_of_mlflow_run(str(run))
    raise ConfigError(f"export: {run!r} is neither a run folder nor an MLflow run id")


def _folder_of_mlflow_run(run_id: str) -> Path:
    import mlflow

    from fedlab.config import load_config
    from fedlab.runtime.federation import run_dir
    from fedlab.tracking import setup_mlflow

    t = load_config(None, []).tracking
    setup_mlflow(t.uri, t.artifact_root, t.experiment)
    try:
        local = mlflow.artifacts.download_artifacts(run_id=run_id, artifact_path="config.yaml")
    except Exception as e:           # an id the store does not hold, an artifact store out of reach
        raise ConfigError(f"export: MLflow run {run_id} has no config.yaml in {t.uri} ({str(e)[:120]})") from None
    return run_folder(run_dir(load_config(local, [])))


def method_of_run(folder: Path):
    """The run's method with its last checkpointed state, built from the run's own config."""
    import torch

    from fedlab import registry
    from fedlab.config import load_config
    from fedlab.data.federated import build_federated_data

    folder = Path(folder)
    cfg = load_config(folder / "config.yaml", [])
    method = registry.get(cfg.method.name).method_cls(cfg, build_federated_data(cfg.data, cfg.seed))
    method.setup()
    ck = torch.load(folder / "checkpoint.pt", map_location="cpu", weights_only=False)
    method.load_state_dict(ck["method"])
    method.client_states = ck.get("client_states") or {}
    return method


def _sha256_of(folder: Path) -> str:
    """The sha256 of a model folder's weights files, in name order."""
    h = hashlib.sha256()
    for f in sorted(folder.glob("*.safetensors")) + sorted(folder.glob("*.bin")):
        h.update(f.read_bytes())
    return h.hexdigest()


def _write_base(name: str, out: Path) -> tuple[Path, str]:
    """The base model as a Hugging Face folder under out/base/<name> (once); (its folder, its weights' sha256)."""
    from fedlab.models.zoo import resolve

    folder = out / "base" / name.replace("/", "--")
    if not folder.exists():
        src = Path(resolve(name))
        if not src.is_dir():
            raise ConfigError(f"export: the base model {name!r} is not a local folder fedlab can copy")
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("meta.json", "*.lock"))
    return folder, _sha256_of(folder)


def reshaped(resident) -> bool:
    """Whether the resident's transforms change its base model (a proxy keeping some blocks), beyond LoRA."""
    return any(t.name != "lora" for t in getattr(resident, "chain", ()))


def _write_transformed_base(party: Party, out: Path) -> tuple[Path, str]:
    """The base a transformed resident's adapter sits on (its transforms applied, no LoRA) as a Hugging Face
    folder under out/base/<role>; (its folder, its weights' sha256)."""
    import copy

    folder = out / "base" / party.role
    copy.deepcopy(party.resident.model).unload().save_pretrained(folder)
    party.resident.tokenizer.save_pretrained(folder)
    return folder, _sha256_of(folder)


def export_party(party: Party, out: Path, merged: bool, base: bool = True) -> dict:
    """One party's adapter folder (and merged folder, and the base model's folder when `base`); its manifest
    entry."""
    import copy
    import os

    from peft import PeftModelForCausalLM

    from fedlab.transforms.lora import has_fedlab_adapters, set_state

    res = party.resident
    if party.model is not None:       # a whole model: its weights, no adapter
        folder = out / party.role
        party.model.save_pretrained(folder)
        res.tokenizer.save_pretrained(folder)
        return {"merged": party.role, "base_model": res.name, "sha256": _sha256_of(folder)}
    if has_fedlab_adapters(res.model):     # adapters inside the blocks: a folder that brings their code
        return _export_adapted(party, out)
    if not isinstance(res.model, PeftModelForCausalLM):
        raise ConfigError(f"export: the party {party.role!r} is not a causal LM with LoRA over its base (its "
                          "transforms change the architecture, or it is an encoder); this method does not export it yet")
    set_state(res.model, party.state)
    folder = out / party.role
    res.model.save_pretrained(folder)
    res.tokenizer.save_pretrained(folder)
    entry = {"adapter": party.role, "base_model": res.name}
    if reshaped(res):    # the adapter sits on the transformed base (a proxy with fewer blocks): written beside it
        from fedlab.transforms.registry import chain_to_wire

        entry["transforms"] = chain_to_wire(res.chain)
    if base:
        base_dir, entry["base_sha256"] = (_write_transformed_base(party, out) if reshaped(res)
                                          else _write_base(res.name, out))
        entry["base"] = os.path.relpath(base_dir, out)
        config = json.loads((folder / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = os.path.relpath(base_dir, folder)
        (folder / "adapter_config.json").write_text(json.dumps(config, indent=2))
    if merged:
        full = copy.deepcopy(res.model).merge_and_unload()
        target = out / f"{party.role}-merged"
        full.save_pretrained(target)
        res.tokenizer.save_pretrained(target)
        entry["merged"] = target.name
    return entry


def _export_adapted(party: Party, out: Path) -> dict:
    """A party whose model carries fedlab's bottleneck adapters inside its blocks: LoRA (if any) merged, written
    with the adapters' own code (`fedlab.export_adapted`); its manifest entry."""
    import copy

    from peft import PeftModel

    from fedlab.export_adapted import save_adapted
    from fedlab.transforms.lora import set_state

    res = party.resident
    set_state(res.model, party.state)
    model = copy.deepcopy(res.model)
    if isinstance(model, PeftModel):
        model = model.merge_and_unload()
    folder = out / party.role
    save_adapted(model, res.tokenizer, folder)
    return {"adapted": party.role, "base_model": res.name, "sha256": _sha256_of(folder),
            "load": "AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True)"}


def export_run(run: str | Path, to: str | Path, merged: bool = False) -> Path:
    """Write every party the run trained into `to` (module docstring); returns the manifest's path."""
    folder = run_folder(run)
    to = Path(to)
    if to.exists() and not to.is_dir():
        raise ConfigError(f"export: --to {to} is a file; expected a folder")
    to.mkdir(parents=True, exist_ok=True)
    method = method_of_run(folder)
    if not writes_anything(method):
        raise ConfigError(f"export: {method.cfg.method.name}'s trained model is not one PEFT or transformers loads (its "
                          "transforms put modules of fedlab's own into the architecture), so it is not exported")
    return export_method(method, to, merged, run=str(folder))


def writes_anything(method) -> bool:
    """Whether `fedlab export` has something to write for the method: parties, or files of its own."""
    return bool(method.export_parties()) or getattr(method, "export_extras", None) is not None


def export_method(method, to: Path, merged: bool = False, base: bool = True, run: str = "") -> Path:
    """Write the parties of a method in memory into `to`; returns the manifest's path."""
    to = Path(to)
    manifest = {"run": run, "method": method.cfg.method.name,
                "parties": {p.role: export_party(p, to, merged, base) for p in method.export_parties()}}
    extras = getattr(method, "export_extras", None)
    if extras is not None:          # a method's other files (a router, a gate) and how the parts combine
        manifest["files"] = extras(to, run)
    path = to / "manifest.json"
    path.write_text(json.dumps(manifest, indent=1))
    return path


def final_value(run: str, metric: str) -> float:
    """The final value of `metric` in a finished run (its folder or MLflow run id): `eval.target_reference`."""
    from fedlab.runtime.federation import load_checkpoint

    folder = run_folder(run)
    try:
        rounds = load_checkpoint(folder / "checkpoint.pt")["history"]
    except Exception as e:     # a damaged or missing checkpoint: one line naming the key
        raise ConfigError(f"eval.target_reference: cannot read the run in {folder} ({type(e).__name__}: {e})") from e
    values = [r[metric] for r in rounds if isinstance(r.get(metric), (int, float))]
    if not values:
        raise ConfigError(f"eval.target_reference: the run in {folder} has no {metric!r} (eval.target_metric)")
    return float(values[-1])
