"""Preflight of `backend.server_devices` (objectives/server_fit.py runs the fits): which methods' servers train a
model, and what W server devices need of the config and the machine. Config checks only — no Lightning — so that
`fedlab plan` and the run's preflight refuse the same configs without importing the trainer."""
from __future__ import annotations

import torch

from fedlab.config import ConfigError


def server_fits(method: str) -> bool:
    """Whether a registered method trains a model on its server (the fits `backend.server_devices` spreads): its
    config class says so with `server_fits = True` (FedMKT's does, LLM2SLM's, whose LLM is frozen, does not)."""
    from fedlab import registry

    return bool(getattr(registry.get(method).config_cls, "server_fits", False))


def check_server_method(cfg) -> None:
    """Preflight: W > 1 server devices need a method whose server trains a model."""
    w = cfg.backend.server_devices
    if w > 1 and not server_fits(cfg.method.name):
        from fedlab import registry

        fits = ", ".join(n for n in registry.method_names() if server_fits(n))
        raise ConfigError(f"backend.server_devices={w}: {cfg.method.name}'s server trains no model (server fits: "
                          f"{fits}); leave it at 1")


def check_server_devices(cfg, gpus: bool = True) -> None:
    """Preflight: W server devices need a batch that splits into W equal parts and, on CUDA, W GPUs (`gpus`:
    whether this machine's GPUs count; `fedlab plan` plans for another machine)."""
    w, b = cfg.backend.server_devices, cfg.federation.batch_size
    if w > 1 and b % w:
        raise ConfigError(f"backend.server_devices={w}: federation.batch_size={b} does not split into {w} equal "
                          f"parts (use a multiple of {w})")
    from fedlab.device import resolve_device

    if gpus and w > 1 and resolve_device(cfg.backend.device).startswith("cuda") and torch.cuda.device_count() < w:
        raise ConfigError(f"backend.server_devices={w}: this machine has {torch.cuda.device_count()} CUDA device(s)")
