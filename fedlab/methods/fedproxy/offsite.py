"""The Offsite-Tuning family (fedlab/methods/fedproxy/README.md (FP-18), (FP-19)), as FedProxy variants: the
client model is the LLM's adapter blocks around a uniformly sub-sampled, frozen emulator of the middle; only
the adapters' LoRA is plugged back into the full LLM. OT pools the data at one owner, FedOT averages the
adapters, FedBiOT also re-aligns the emulator on the server each round, FedOT-ET trains the emulator too."""
from __future__ import annotations

import itertools
import math

import torch
import torch.nn.functional as F

from fedlab.methods.fedproxy.method import FedProxy
from fedlab.seeding import derive_seed
from fedlab.transforms.compress import decoder_blocks, n_dropped
from fedlab.transforms.lora import get_state, set_state


def emulator_indices(n: int, kept: int) -> list[int]:
    """idx_i = round(i·(n−1)/(m−1)), i = 0..m−1 (round half up): m of n middle blocks, evenly spread."""
    if kept <= 1:
        return [0][:kept]
    return [int(math.floor(i * (n - 1) / (kept - 1) + 0.5)) for i in range(kept)]


def offsite_layout(blocks: int, front: int, back: int, kappa: float,
                   size: str = "paper") -> tuple[list[int], list[int], list[int]]:
    """Offsite-Tuning's model of an LLM with `blocks` blocks: the first `front` and last `back` blocks kept as
    adapters, the middle compressed to max(1, M − n_dropped(M, κ)) evenly spread blocks (M = blocks − front −
    back) — the paper's layout (`size="paper"`). With `size="proxy"` the model keeps as many blocks as FedProxy's
    proxy at the same κ, blocks − n_dropped(blocks, κ): the emulator takes what the adapters leave, and adapters
    that would leave it no block shrink (in their front : back proportion) to leave it one. Returns (the LLM block
    indices kept, in order; the adapters' positions in that list; the emulator's positions)."""
    if size == "proxy":
        total = blocks - n_dropped(blocks, kappa)
        if front + back > total - 1:
            adapters = max(1, total - 1)
            front = int(math.floor(adapters * front / (front + back) + 0.5))
            back = adapters - front
        keep = max(1, total - front - back)
    else:
        keep = None
    middle = list(range(front, blocks - back))
    if keep is None:
        keep = max(1, len(middle) - n_dropped(len(middle), kappa))
    emulator = [middle[i] for i in emulator_indices(len(middle), keep)]
    kept = list(range(front)) + emulator + list(range(blocks - back, blocks))
    adapters = list(range(front)) + list(range(front + len(emulator), len(kept)))
    return kept, adapters, list(range(front, front + len(emulator)))


class OffsiteTuning(FedProxy):
    def choose_layers(self):
        m = self.cfg.method
        blocks = len(decoder_blocks(self.llm))
        kept, self.adapter_positions, self.emulator_positions = offsite_layout(blocks, m.adapter_front,
                                                                              m.adapter_back, m.kappa, m.size)
        self.block_influence = torch.zeros(blocks)
        self.emulator_state = None
        return kept, (None if m.train_emulator else self.adapter_positions)

    def plugin_positions(self):
        return self.adapter_positions

    def configure_fit(self, rnd, cids):
        ins = super().configure_fit(rnd, cids)
        if self.emulator_state is not None:   # keyed by the emulator blocks' declared parameter names
            for i in ins.values():
                i.aux = {**(i.aux or {}), **self.emulator_state}
        return ins

    def aggregate_fit(self, rnd, results):
        stats = super().aggregate_fit(rnd, results)
        if self.cfg.method.realign and results:
            stats["realign_kl"] = self._realign(rnd)
        return stats

    def _emulator_names(self, resident) -> list[str]:
        """The emulator blocks' base weights (the `proxy` transform declares each block's parameters)."""
        return [k for pos in self.emulator_positions for k in resident.keys[f"block/{pos}"]]

    def _realign(self, rnd: int) -> float:
        """FedBiOT's server step: distil the full LLM *with the current adapters plugged in* into the
        adapter+emulator model on public data, training the emulator's base weights only (KL on next-token
        distributions; see README). Teacher and student carry the same adapters, so the emulator learns to
        stand in for the middle blocks it replaces, not to cancel the adapters."""
        m = self.cfg.method
        res = self.resident
        teacher_model = self.fused_llm()          # the LLM with the global adapters plugged in (a copy)
        teacher_model.eval()
        set_state(res.model, self.global_state)
        names = self._emulator_names(res)
        before = get_state(res.model, names)  # clients may share this resident: they get the result via aux only
        if self.emulator_state is not None:   # continue from the server's own latest emulator
            set_state(res.model, self.emulator_state)
        params = dict(res.model.named_parameters())
        trainable = [params[n] for n in names]
        for p in trainable:
            p.requires_grad_(True)
        opt = torch.optim.AdamW(trainable, lr=m.realign_lr)
        batches = itertools.cycle(list(self._public_batches(m.bi_samples)))
        res.model.train()
        loss_v = float("nan")
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(self.cfg.seed, "realign", rnd))  # LoRA dropout: by round, not history
            for _ in range(m.realign_steps):
                batch = next(batches)
                with torch.no_grad():
                    teacher = F.log_softmax(teacher_model(input_ids=batch["input_ids"],
                                                          attention_mask=batch["attention_mask"]).logits.float(), -1)
                student = F.log_softmax(res.model(input_ids=batch["input_ids"],
                                                  attention_mask=batch["attention_mask"]).logits.float(), -1)
                kl = (teacher.exp() * (teacher - student)).sum(-1)
                mask = batch["attention_mask"].float()
                loss = (kl * mask).sum() / mask.sum()
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                loss_v = float(loss.detach())
        res.model.eval()
        for p in trainable:
            p.requires_grad_(False)
        self.emulator_state = get_state(res.model, names)
        set_state(res.model, before)
        return loss_v

    def state_dict(self):
        return {**super().state_dict(), "emulator_state": self.emulator_state}

    def load_state_dict(self, state):
        super().load_state_dict(state)
        self.emulator_state = state.get("emulator_state")
