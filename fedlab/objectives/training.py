"""The Lightning Trainer every fit uses (client or server side) and the optimiser settings it reads from
the config."""
from __future__ import annotations

import functools
import importlib.metadata
import itertools

import lightning as L
import torch
from lightning.pytorch.strategies import SingleDeviceStrategy

from fedlab.device import resolve_device


@functools.cache
def _callback_factories(group: str):
    """The entry points of `group`, read once per process. Every Trainer Lightning builds looks up the external
    callback factories (`lightning.pytorch.callbacks_factory`) by scanning every installed distribution's
    metadata — about 25 ms on an environment of a few hundred packages, more than a client's whole training step
    on a pico model. The installed packages do not change during a run, so the scan is made once; each factory
    is still called for every Trainer, as Lightning does."""
    return tuple(importlib.metadata.entry_points(group=group))


def _read_callback_factories_once() -> None:
    """Point Lightning's lookup of external callbacks at `_callback_factories` (its own function is kept)."""
    from lightning.fabric.utilities import registry

    if getattr(registry.entry_points, "__wrapped__", None) is None:
        registry.entry_points = _callback_factories


_read_callback_factories_once()


class ResidentStrategy(SingleDeviceStrategy):
    """Lightning's single-device strategy, except that the end of a fit leaves the model on its device:
    a resident model lives on the GPU between fits (Lightning's teardown would move it to the CPU after
    every fit, and whatever the server or the next evaluation does with it would then run on the CPU)."""

    def model_to_device(self) -> None:
        """Lightning moves the model to the root device at the start of every fit, a walk over every submodule;
        a resident model on the CPU is there already (and a LightningModule's `device` is the CPU until moved),
        so the walk is skipped there."""
        if self.root_device.type == "cpu" and all(
                t.device.type == "cpu" for t in itertools.chain(self.model.parameters(), self.model.buffers())):
            return
        super().model_to_device()

    def teardown(self) -> None:
        self.precision_plugin.teardown()
        self.accelerator.teardown()
        self.checkpoint_io.teardown()


def make_trainer(cfg, max_epochs: int | None = None, max_steps: int | None = None,
                 manual_optimization: bool = False, clip_gradients: bool = True, devices: int = 1,
                 callbacks: list | None = None) -> L.Trainer:
    """The Trainer of one fit: on the config's device, gradients clipped at norm 1 (a module with manual
    optimisation clips its own: Lightning's automatic clipping is not available to it; DP-SGD clips per
    example and asks for no clipping of the noisy gradient: `clip_gradients=False`). `devices` > 1: DDP over that
    many spawned processes (GPUs, or gloo processes on the CPU), the loader's sampler kept as given
    (`fedlab.objectives.server_fit`)."""
    device = resolve_device(cfg.backend.device)
    steps = max_steps if max_steps is not None else cfg.federation.local_steps
    epochs = max_epochs if max_epochs is not None else cfg.federation.local_epochs
    if device.startswith("cuda"):
        where = torch.device(device if ":" in device else f"cuda:{torch.cuda.current_device()}")
    else:
        where = torch.device("cpu")
    if devices > 1:
        from lightning.fabric.plugins.environments import LightningEnvironment
        from lightning.pytorch.strategies import DDPStrategy

        # the local environment whatever started the run: under SLURM or torchrun Lightning would otherwise take
        # ranks, world size and port from the scheduler's allocation
        placement = dict(accelerator="gpu" if where.type == "cuda" else "cpu", devices=devices,
                         strategy=DDPStrategy(start_method="spawn", find_unused_parameters=True,
                                              process_group_backend="nccl" if where.type == "cuda" else "gloo",
                                              cluster_environment=LightningEnvironment()),
                         use_distributed_sampler=False)
    else:
        placement = dict(accelerator="gpu" if where.type == "cuda" else "cpu", strategy=ResidentStrategy(where))
    trainer = L.Trainer(
        **placement, callbacks=callbacks,
        max_epochs=-1 if steps else epochs, max_steps=steps or -1,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, gradient_clip_val=None if manual_optimization or not clip_gradients else 1.0, deterministic=False)
    # fedlab owns SIGINT and SIGTERM (`fedlab.interrupt`: the round finishes, its checkpoint is written, the run
    # stops with a non-zero exit). Lightning's own SIGTERM handling would end the fit with a SystemExit that
    # exits 0 mid-round, so its signal connector registers nothing.
    connector = getattr(trainer, "_signal_connector", None)
    if connector is not None:
        connector.register_signal_handlers = _signals_are_fedlabs
    return trainer


def _signals_are_fedlabs() -> None:
    """Lightning's signal registration, replaced on fedlab's Trainers (a module-level function: a Trainer sent to
    another process is pickled with it)."""


def sgd_factory(cfg):
    """Plain SGD at federation.lr with federation.weight_decay, no momentum (no state), as an optimiser factory
    `(params, names) -> optimizer` (ELSA's `client_opt: sgd`, for the client's module and the edge's θ₂)."""
    f = cfg.federation

    def make(params, names):
        return torch.optim.SGD(params, lr=f.lr, weight_decay=f.weight_decay)
    return make


def optimizer_args(cfg, lr: float | None = None) -> dict:
    f = cfg.federation
    return dict(lr=lr if lr is not None else f.lr, weight_decay=f.weight_decay, betas=tuple(f.betas),
                warmup_ratio=f.warmup_ratio)
