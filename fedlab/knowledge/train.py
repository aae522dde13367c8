"""Fitting a student on sparse distillation items."""
from __future__ import annotations

import torch
from torch.utils.data import DataLoader

from fedlab.knowledge.public import DistillCollator
from fedlab.objectives.modules import ClientModule, Weighted
from fedlab.objectives.terms import SparseDistillTerm
from fedlab.objectives.training import make_trainer, optimizer_args
from fedlab.seeding import seed_everything


def train_distill(cfg, resident, items: list[dict], epochs: int, lr: float, seed: int, lam: float,
                  module_cls=ClientModule) -> dict:
    """Fits the resident's LoRA on L = λ·CE(labels) + (1 − λ)·CE(student, sparse teacher) (FedMKT's L2 / L3);
    returns the logged losses."""
    seed_everything(seed)
    loader = DataLoader(items, batch_size=cfg.federation.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed),
                        collate_fn=DistillCollator(resident.tokenizer.pad_token_id))
    module = module_cls(resident.model, resident.spec.trainable, [Weighted(1.0 - lam, SparseDistillTerm())],
                        task_weight=lam, **optimizer_args(cfg, lr))
    resident.model.train()
    make_trainer(cfg, max_epochs=epochs).fit(module, loader)
    resident.model.eval()
    return {k: float(v) for k, v in module.trainer.callback_metrics.items()}
