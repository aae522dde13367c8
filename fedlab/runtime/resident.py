"""Resident models: one LoRA-wrapped copy of each base model per process. Clients that share a frozen
base share this copy and swap only their adapter state in and out (DESIGN.md: one copy, per-client
adapters)."""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import torch

from fedlab.seeding import derive_seed
from fedlab.transforms.lora import AdapterSpec, apply_lora, get_state

_RESIDENTS: dict[tuple, Resident] = {}


def quiet_libraries() -> None:
    import warnings

    import transformers

    # library deprecation chatter that says nothing about the experiment
    warnings.filterwarnings("ignore", message=".*treespec.*")
    warnings.filterwarnings("ignore", category=FutureWarning, module="transformers")
    warnings.filterwarnings("ignore", message=".*does not have many workers.*")
    warnings.filterwarnings("ignore", message=".*fan_in_fan_out is set to False.*")  # peft on GPT-2's Conv1D
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    for name in ("lightning.pytorch", "lightning.fabric", "lightning", "pytorch_lightning"):
        logging.getLogger(name).setLevel(logging.ERROR)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def resolve_device(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return device


@dataclass
class Resident:
    name: str
    model: torch.nn.Module            # the peft-wrapped model
    tokenizer: object
    spec: AdapterSpec
    init_state: dict                  # the seeded LoRA initialisation (B = 0: the base model's function)
    device: str


def base_payload(name: str):
    """(config, tokenizer, numpy state dict) of a base model: what a Ray worker needs to rebuild it
    without touching a disk or the network (shipped through the object store once)."""
    from fedlab.models.zoo import load_model

    quiet_libraries()
    model, tok = load_model(name)
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return model.config, tok, state


def apply_model_transform(model, transform: tuple | None):
    """Model → model transforms a resident may be built with, named by a hashable spec:
    ("proxy", kept_layers[, lora_layers]) — FedProxy's compressed proxy (SPEC.md §1.1), or an
    Offsite-Tuning adapter+emulator model; lora_layers (proxy positions) limits where LoRA goes."""
    if not transform:
        return model
    kind, *args = transform
    if kind == "proxy":
        from fedlab.transforms.compress import make_proxy

        return make_proxy(model, list(args[0]), copy=False)
    raise ValueError(f"unknown model transform {kind!r}")


def as_transform(spec) -> tuple | None:
    """A transform spec from a message config (JSON lists) as a hashable tuple."""
    if not spec:
        return None
    return tuple(tuple(x) if isinstance(x, list) else x for x in spec)


def get_resident(cfg, name: str | None = None, payload=None, transform: tuple | None = None) -> Resident:
    """The process's resident model for (base name, transform, LoRA settings, seed, device), created on
    first use."""
    name = name or cfg.model.name
    lc = cfg.model.lora
    device = resolve_device(cfg.backend.device)
    key = (name, transform, lc.r, lc.alpha, lc.dropout, tuple(lc.target_modules or ()), cfg.seed, device)
    if key in _RESIDENTS:
        return _RESIDENTS[key]
    quiet_libraries()
    if payload is not None:
        from transformers import AutoModelForCausalLM

        config, tok, state = payload
        model = AutoModelForCausalLM.from_config(config)
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=False)
        model.eval()
    else:
        from fedlab.models.zoo import load_model

        model, tok = load_model(name)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    model = apply_model_transform(model, transform)
    for p in model.parameters():
        p.requires_grad_(False)
    lora_layers = transform[2] if transform and len(transform) > 2 else None
    pm, spec = apply_lora(model, lc.r, lc.alpha, lc.dropout, lc.target_modules,
                          seed=derive_seed(cfg.seed, "lora-init", name, transform), layers=lora_layers)
    pm.to(device)
    res = Resident(name, pm, tok, spec, get_state(pm, spec.communicated), device)
    _RESIDENTS[key] = res
    return res


def clear_residents() -> None:
    _RESIDENTS.clear()
