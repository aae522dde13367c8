"""Fitting a student on sparse distillation items."""
from __future__ import annotations

from fedlab.knowledge.public import DistillCollator
from fedlab.objectives.modules import ClientModule, Weighted
from fedlab.objectives.server_fit import fit_shuffled
from fedlab.objectives.terms import SparseDistillTerm
from fedlab.objectives.training import optimizer_args
from fedlab.seeding import seed_everything


def train_distill(cfg, resident, items: list[dict], epochs: int, lr: float, seed: int, lam: float,
                  module_cls=ClientModule, server: bool = False) -> dict:
    """Fits the resident's LoRA on L = λ·CE(labels) + (1 − λ)·CE(student, sparse teacher) (FedMKT's L2 / L3);
    returns the logged losses. `server`: the fit may run data-parallel over backend.server_devices."""
    seed_everything(seed)
    collate = DistillCollator(resident.tokenizer.pad_token_id)
    module = module_cls(resident.model, resident.spec.trainable, [Weighted(1.0 - lam, SparseDistillTerm())],
                        task_weight=lam, **optimizer_args(cfg, lr))
    resident.model.train()
    out = fit_shuffled(cfg, module, items, collate, epochs=epochs, seed=seed,
                       devices=cfg.backend.server_devices if server else 1)
    resident.model.eval()
    return out
