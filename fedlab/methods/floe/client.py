"""Floe's device: a LoRA client at the rank its instruction names, optionally with local DP — DP-SGD
(per-example clipping and Gaussian noise, `fedlab.privacy.DPSGDModule`) or update-level noise."""
from __future__ import annotations

from fedlab.methods.client import LoraClient
from fedlab.objectives.training import make_trainer, optimizer_args
from fedlab.privacy import DPSGDModule, privatize_update
from fedlab.seeding import derive_seed


class FloeClient(LoraClient):
    def module(self, res, ins, start):
        m = self.cfg.method
        if m.dp != "dpsgd":
            return super().module(res, ins, start)
        return DPSGDModule(res.model, res.spec.trainable, [], clip=m.dp_clip, noise=m.dp_noise,
                           seed=derive_seed(self.cfg.seed, "dp-noise", ins.round, self.cid),
                           **optimizer_args(self.cfg, self.learning_rate()))

    def train_module(self, module, loader) -> None:
        if not isinstance(module, DPSGDModule):
            return super().train_module(module, loader)
        module.attach()
        try:
            make_trainer(self.cfg, clip_gradients=False).fit(module, loader)
        finally:
            module.detach()

    def fit(self, ins):
        res = super().fit(ins)
        m = self.cfg.method
        if m.dp == "update":
            start = self.start_state(ins)
            state, norm = privatize_update(res.state, start, m.dp_clip, m.dp_noise,
                                           derive_seed(self.cfg.seed, "dp-update", ins.round, self.cid))
            res.state = state
            self.own_state = state
            res.metrics["dp/update_norm"] = norm
        return res
