"""Resident models: one copy of each (base model, transform chain) per process. Clients that share a frozen
base share this copy and swap only their adapter state in and out (DESIGN.md: one copy, per-client
adapters). The chain names registered transforms (`fedlab.transforms.registry`); the cache builds them
without knowing which method asked."""
from __future__ import annotations

from dataclasses import dataclass, field

import torch

from fedlab.device import resolve_device
from fedlab.quiet import quiet_libraries
from fedlab.seeding import derive_seed
from fedlab.transforms import AdapterSpec, get_state  # the package: registers the built-in transforms
from fedlab.transforms.registry import Build, Chain, apply_chain, declared_keys, seed_part

_RESIDENTS: dict[tuple, Resident] = {}


@dataclass
class Resident:
    name: str
    model: torch.nn.Module            # the transformed, LoRA-wrapped model
    tokenizer: object
    spec: AdapterSpec                 # trainable and communicated keys (LoRA)
    init_state: dict                  # the seeded LoRA initialisation (B = 0: the base model's function)
    device: str
    keys: dict[str, tuple[str, ...]] = field(default_factory=dict)   # parameter groups the transforms declared
    initial: dict[str, dict] = field(default_factory=dict)   # group -> its initial state (groups that ask for it)
    chain: tuple = ()                 # the model transforms applied to the base (empty: the base model as it is)


def base_payload(name: str):
    """(config, tokenizer, numpy state dict) of a base model: what a Ray worker needs to rebuild it
    without touching a disk or the network (shipped through the object store once)."""
    from fedlab.models.zoo import is_encoder, load_encoder, load_model

    quiet_libraries()
    model, tok = (load_encoder if is_encoder(name) else load_model)(name)
    state = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    return model.config, tok, state


def _base_model(name: str, payload):
    from fedlab.models.zoo import ENCODER_FAMILIES, is_encoder, load_encoder, load_model

    if payload is not None:
        from transformers import AutoModel, AutoModelForCausalLM

        config, tok, state = payload
        auto = AutoModel if getattr(config, "model_type", "") in ENCODER_FAMILIES else AutoModelForCausalLM
        model = auto.from_config(config)
        model.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in state.items()}, strict=False)
        model.eval()
        return model, tok
    return (load_encoder if is_encoder(name) else load_model)(name)


def get_resident(cfg, name: str | None = None, payload=None, chain: Chain = ()) -> Resident:
    """The process's resident model for (base name, transform chain, LoRA settings, seed, device), created
    on first use."""
    name = name or cfg.model.name
    chain = tuple(chain or ())
    lc = cfg.model.lora
    device = resolve_device(cfg.backend.device)
    key = (name, chain, lc.r, lc.alpha, lc.dropout, tuple(lc.target_modules or ()), cfg.seed, device)
    if key in _RESIDENTS:
        return _RESIDENTS[key]
    quiet_libraries()
    model, tok = _base_model(name, payload)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    for p in model.parameters():
        p.requires_grad_(False)
    build = Build(lora=lc, seed=derive_seed(cfg.seed, "lora-init", name, seed_part(chain)))
    pm = apply_chain(model, chain, build)
    pm.to(device)
    keys = declared_keys(pm, build.groups)
    initial = {g: get_state(pm, keys[g]) for g in sorted(build.kept_initial)}
    res = Resident(name, pm, tok, build.spec, get_state(pm, build.spec.communicated), device, keys, initial, chain)
    _RESIDENTS[key] = res
    return res


def clear_residents() -> None:
    _RESIDENTS.clear()
