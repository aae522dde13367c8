"""FedMKT's client (Algorithm 1's ClientUpdate1 and ClientUpdate2, fedlab/methods/fedmkt/README.md): LoRA on
the private data (FM-1), knowledge on the public set (FM-2), then selective distillation from the LLM's
knowledge (L3, FM-10). The SLM's adapter never leaves the client."""
from __future__ import annotations

import time

import torch

from fedlab.comm.messages import FitRes
from fedlab.knowledge import distill_items, kept_by_task, public_knowledge, student_view, train_distill
from fedlab.methods.client import LoraClient
from fedlab.objectives.distill import dual_min_ce
from fedlab.seeding import derive_seed
from fedlab.transforms.lora import get_state, set_state

LLM = "llm"   # the teacher key of the server's knowledge


class FedMKTClient(LoraClient):
    def learning_rate(self) -> float:
        lrs = self.cfg.method.client_lr
        return lrs[self.cid] if lrs else self.cfg.federation.lr

    def fit(self, ins):
        if ins.config.get("phase") == "distill":
            return self.distill(ins)
        res = super().fit(ins)            # step 1: LoRA on the private data (task loss), kept locally
        knowledge = None
        if ins.config.get("upload", True):  # step 2: (l_k^i, top-K_k^i) on the public set
            m = self.cfg.method
            knowledge = public_knowledge(self.resident.model, student_view(self.host, self.resident).public,
                                         m.topk, m.public_batch_size, getattr(torch, m.logit_dtype))
        return FitRes(self.cid, ins.round, None, res.num_examples, res.metrics, aux=knowledge)

    def distill(self, ins) -> FitRes:
        """Step 5: keep public sample i iff l_0^i < l_local^i, align LLM → SLM, train on L3."""
        m = self.cfg.method
        t0 = time.perf_counter()
        res = self.resident
        set_state(res.model, self.start_state(ins))
        view = student_view(self.host, res)
        public = view.public
        knowledge = ins.aux
        local = public_knowledge(res.model, public, 0, m.public_batch_size)["loss"]
        if m.selection == "dualmince":
            keep, _ = dual_min_ce(knowledge["loss"][None], local)
        else:
            keep = torch.ones_like(local, dtype=torch.bool)
        indices = keep.nonzero().flatten().tolist()
        metrics = {"distill/kept": len(indices) / max(1, len(public))}
        metrics.update({f"distill/kept/{t}": v for t, v in kept_by_task(public, keep).items()})
        if len(public):      # L_FT on every public sample, KD on the selected ones (README (FM-10))
            teacher, vmap = view.teacher_view(self.cfg.model.name)
            items = distill_items(view.aligner, {i: (LLM, teacher, knowledge) for i in indices}, {LLM: vmap},
                                  m.temperature, m.kd_positions, knowledge["ids"].shape[1])
            seed = derive_seed(self.cfg.seed, "distill", ins.round, self.cid)
            out = train_distill(self.cfg, res, items, m.distill_epochs, self.learning_rate(), seed, m.lam)
            metrics.update({f"distill/{k.split('/', 1)[1]}": v for k, v in out.items() if k.startswith("loss/")})
            metrics["distill/aligned"] = view.aligner.matched_fraction(LLM)
            self.own_state = get_state(res.model, res.spec.communicated)
        metrics["time/distill"] = time.perf_counter() - t0
        return FitRes(self.cid, ins.round, None, len(indices), metrics)
