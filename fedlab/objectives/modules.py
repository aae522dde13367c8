"""ClientModule / ServerModule: LightningModules whose loss is the task loss plus a weighted list of loss
terms, each logged under its own name."""
from __future__ import annotations

from dataclasses import dataclass

import lightning as L
import torch
from torch import nn

from fedlab.objectives.terms import TaskLoss


@dataclass
class Weighted:
    weight: float
    term: nn.Module


class ClientModule(L.LightningModule):
    """Trains the trainable parameters of a resident (e.g. LoRA-wrapped) model on
    L = task_weight·L_task + Σ_i w_i·term_i."""

    def __init__(self, model: nn.Module, trainable: tuple[str, ...], terms: list[Weighted] | None = None,
                 lr: float = 1e-3, weight_decay: float = 0.0, task_weight: float = 1.0,
                 betas: tuple[float, float] = (0.9, 0.999), warmup_ratio: float = 0.0):
        super().__init__()
        self.model = model
        self.trainable = tuple(trainable)
        self.task = TaskLoss()
        self.task_weight = task_weight
        self.terms = nn.ModuleList([w.term for w in terms or []])
        self.term_weights = [w.weight for w in terms or []]
        self.lr, self.weight_decay, self.betas, self.warmup_ratio = lr, weight_decay, tuple(betas), warmup_ratio
        self.param_index = dict(model.named_parameters())
        # (params, names) -> optimiser, replacing AdamW (e.g. ELSA's FedCAda baseline); the one built is kept
        self.optimizer_factory = None
        self.built_optimizer = None

    def forward(self, batch):
        return self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])

    def compute_loss(self, batch):
        out = self(batch)
        parts = {"task": self.task(self, batch, out)}
        total = self.task_weight * parts["task"]
        for w, term in zip(self.term_weights, self.terms):
            value = term(self, batch, out)
            parts[getattr(term, "name", type(term).__name__)] = value
            total = total + w * value
        parts["total"] = total
        return total, parts

    def training_step(self, batch, batch_idx):
        total, parts = self.compute_loss(batch)
        self.log_losses(parts, batch["input_ids"].shape[0])
        return total

    def on_train_epoch_start(self) -> None:
        self._epoch_sums: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

    def log_losses(self, parts: dict, batch_size: int) -> None:
        """Each part's mean over the epoch, weighted by batch size — what `self.log(..., on_epoch=True)` gives,
        in the same arithmetic (Σ value·b in float32 or wider, divided by Σ b as an integer tensor), read back
        with `epoch_metrics`. On one device the sums are kept here: Lightning's logging machinery (a metric
        object per key, moved to the CPU at teardown) costs more than a pico client's training step. A
        data-parallel server fit (server_fit.py) logs through Lightning, whose `sync_dist` takes the mean over
        the processes."""
        if self.trainer.world_size > 1:
            for name, value in parts.items():
                self.log(f"loss/{name}", value.detach(), on_step=False, on_epoch=True, batch_size=batch_size,
                         sync_dist=True)
            return
        dtype = torch.get_default_dtype()
        dtype = dtype if dtype in (torch.float32, torch.float64) else torch.float32
        for name, value in parts.items():
            v = value.detach()
            if v.dtype not in (torch.float32, torch.float64):
                v = v.to(dtype)
            total, count = self._epoch_sums.get(name) or (torch.tensor(0.0, dtype=dtype, device=v.device),
                                                          torch.tensor(0, device=v.device))
            self._epoch_sums[name] = (total + v * batch_size, count + batch_size)

    def epoch_metrics(self) -> dict[str, float]:
        """{loss/<part>: its mean over the last epoch trained} (`log_losses`)."""
        return {f"loss/{k}": float(total / count) for k, (total, count) in getattr(self, "_epoch_sums", {}).items()}

    def configure_optimizers(self):
        params = [self.param_index[k] for k in self.trainable]
        if self.optimizer_factory is not None:
            opt = self.built_optimizer = self.optimizer_factory(params, list(self.trainable))
        else:
            opt = torch.optim.AdamW(params, lr=self.lr, weight_decay=self.weight_decay, betas=self.betas)
        if self.warmup_ratio <= 0:
            return opt
        warmup = max(1, int(self.warmup_ratio * self.trainer.estimated_stepping_batches))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda step: min(1.0, (step + 1) / warmup))
        return {"optimizer": opt, "lr_scheduler": {"scheduler": sched, "interval": "step"}}


def fit_metrics(module, trainer=None) -> dict[str, float]:
    """A finished fit's metrics as floats: the losses a `ClientModule` kept (`epoch_metrics`), then whatever was
    logged through Lightning (`trainer.callback_metrics`; the module's own trainer when none is given)."""
    trainer = trainer if trainer is not None else module.trainer
    own = module.epoch_metrics() if hasattr(module, "epoch_metrics") else {}
    return {**own, **{k: float(v) for k, v in trainer.callback_metrics.items()}}


class ServerModule(ClientModule):
    """The server-side model (e.g. FedMKT's LLM, Co-PLMs' DPM): the same objective machinery, trained on
    server-held or public data."""
