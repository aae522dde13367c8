"""FedMKT's client (SPEC.md §2.1 steps 1, 2 and 5): LoRA on the private data, knowledge on the public set,
then selective distillation from the LLM's knowledge (L3). The SLM's adapter never leaves the client."""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader

from fedlab.align import cached_vocab_map
from fedlab.comm.messages import FitRes
from fedlab.methods.fedmkt.public import Aligner, DistillCollator, PublicSet, distill_items, public_knowledge
from fedlab.objectives.distill import dual_min_ce
from fedlab.objectives.modules import ClientModule, Weighted
from fedlab.objectives.terms import SparseDistillTerm
from fedlab.runtime.client import LoraClient, make_trainer, optimizer_args
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms.lora import get_state, set_state

LLM = "llm"   # the teacher key of the server's knowledge


def train_distill(cfg, resident, items: list[dict], epochs: int, lr: float, seed: int,
                  module_cls=ClientModule) -> dict:
    """Fits the resident's LoRA on L = λ·CE(labels) + (1 − λ)·CE(student, sparse teacher) (L2 / L3)."""
    m = cfg.method
    seed_everything(seed)
    loader = DataLoader(items, batch_size=cfg.federation.batch_size, shuffle=True,
                        generator=torch.Generator().manual_seed(seed),
                        collate_fn=DistillCollator(resident.tokenizer.pad_token_id))
    module = module_cls(resident.model, resident.spec.trainable, [Weighted(1.0 - m.lam, SparseDistillTerm())],
                        task_weight=m.lam, **optimizer_args(cfg, lr))
    resident.model.train()
    make_trainer(cfg, max_epochs=epochs).fit(module, loader)
    resident.model.eval()
    return {k: float(v) for k, v in module.trainer.callback_metrics.items()}


class _StudentView:
    """What every client of one SLM in a process shares: the public set in the SLM's tokens, the memo of
    its alignments with the LLM's, and (on first use) the LLM's tokens and vocabulary map into the SLM's."""

    def __init__(self, host, tokenizer):
        self.host, self.tokenizer = host, tokenizer
        self.public = PublicSet(tokenizer, host.data.public, host.cfg.model.max_length)
        self.aligner = Aligner(self.public)
        self._llm = None

    def llm_view(self):
        """The LLM's token strings of the public set and its vocabulary map into this SLM's vocabulary:
        the LLM's tokenizer is public, its weights are not needed."""
        from fedlab.models.zoo import load_tokenizer

        if self._llm is None:
            llm_tok = load_tokenizer(self.host.cfg.model.name)
            tokens = PublicSet(llm_tok, self.host.data.public, self.host.cfg.model.max_length).tokens
            self._llm = (tokens, cached_vocab_map(llm_tok, self.tokenizer))
        return self._llm


class FedMKTClient(LoraClient):
    def learning_rate(self) -> float:
        lrs = self.cfg.method.client_lr
        return lrs[self.cid] if lrs else self.cfg.federation.lr

    def view(self) -> _StudentView:
        key = ("fedmkt", self.resident.name)
        if key not in self.host.shared:
            self.host.shared[key] = _StudentView(self.host, self.resident.tokenizer)
        return self.host.shared[key]

    def fit(self, ins):
        if ins.config.get("phase") == "distill":
            return self.distill(ins)
        res = super().fit(ins)            # step 1: LoRA on the private data (task loss), kept locally
        knowledge = None
        if ins.config.get("upload", True):  # step 2: (l_k^i, top-K_k^i) on the public set
            m = self.cfg.method
            knowledge = public_knowledge(self.resident.model, self.view().public, m.topk, m.public_batch_size,
                                         getattr(torch, m.logit_dtype))
        return FitRes(self.cid, ins.round, None, res.num_examples, res.metrics, aux=knowledge)

    def distill(self, ins) -> FitRes:
        """Step 5: keep public sample i iff l_0^i < l_local^i, align LLM → SLM, train on L3."""
        m = self.cfg.method
        t0 = time.perf_counter()
        res = self.resident
        set_state(res.model, self.start_state(ins))
        view = self.view()
        public = view.public
        knowledge = ins.aux
        local = public_knowledge(res.model, public, 0, m.public_batch_size)["loss"]
        if m.selection == "dualmince":
            keep, _ = dual_min_ce(knowledge["loss"][None], local)
        else:
            keep = torch.ones_like(local, dtype=torch.bool)
        indices = keep.nonzero().flatten().tolist()
        metrics = {"distill/kept": len(indices) / max(1, len(public))}
        if indices:
            tokens, vmap = view.llm_view()
            items = distill_items(view.aligner, indices, [(LLM, tokens, knowledge)] * len(indices), {LLM: vmap},
                                  m.temperature, m.kd_positions)
            seed = derive_seed(self.cfg.seed, "distill", ins.round, self.cid)
            out = train_distill(self.cfg, res, items, m.distill_epochs, self.learning_rate(), seed)
            metrics.update({f"distill/{k.split('/', 1)[1]}": v for k, v in out.items() if k.startswith("loss/")})
            metrics["distill/aligned"] = view.aligner.matched_fraction(LLM)
            self.own_state = get_state(res.model, res.spec.communicated)
        metrics["time/distill"] = time.perf_counter() - t0
        return FitRes(self.cid, ins.round, None, len(indices), metrics)
