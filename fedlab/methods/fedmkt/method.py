"""FedMKT (paper 001; its equations: fedlab/methods/fedmkt/README.md), read top to bottom:

round t, phase 0   each client trains its SLM's LoRA on its private data, then uploads (l_k^i, top-K_k^i)
                   for every public sample (knowledge, not weights);
server             DualMinCE picks, per sample, the client with the lowest loss and keeps the sample if it
                   beats the LLM's own loss; the chosen SLM's top-K is aligned into the LLM's vocabulary and
                   the LLM's LoRA trains on L2 = λ·CE(labels) + (1 − λ)·CE(LLM, teacher) for R epochs;
                   the LLM then computes its own knowledge on the public set;
round t, phase 1   the LLM's knowledge is broadcast; each client keeps the samples where the LLM beats it,
                   aligns LLM → SLM and trains on L3 for E epochs.
The LLM runs on the server (a Lightning `ServerModule` over its LoRA); each SLM's adapter stays on its
client. `llm2slm` is the same protocol with the LLM frozen: it only teaches.
"""
from __future__ import annotations

import time

import torch

from fedlab.align import cached_vocab_map
from fedlab.comm.knowledge import num_positions, paper_estimate
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.eval.summary import summarize_eval
from fedlab.eval.tasks import evaluate_server_model
from fedlab.knowledge import Aligner, PublicSet, distill_items, kept_by_task, public_knowledge, train_distill
from fedlab.methods.base import FedMethod
from fedlab.objectives.distill import dual_min_ce
from fedlab.objectives.modules import ServerModule
from fedlab.runtime.resident import get_resident
from fedlab.seeding import derive_seed
from fedlab.transforms.lora import get_state, set_state


class FedMKT(FedMethod):
    table_columns = (("first", "llm/", "LLM zero-shot"), ("final", "llm/", "LLM final (round {round})"))
    headline = "llm/acc/mean"

    def setup(self) -> None:
        from fedlab.models.zoo import load_tokenizer

        cfg = self.cfg
        llm = get_resident(cfg, cfg.model.name)
        self.global_state = {k: v.clone() for k, v in llm.init_state.items()}   # the LLM's LoRA ω
        self.public = PublicSet(llm.tokenizer, self.data.public, cfg.model.max_length)
        self.aligner = Aligner(self.public)
        self.client_tokens: dict[str, PublicSet] = {}     # the public set as each client model's tokenizer cuts it
        self.vmaps: dict[str, object] = {}
        if cfg.method.mutual:
            for name in sorted({cfg.model.client_model(c) for c in range(self.data.num_clients)}):
                tok = load_tokenizer(name)
                self.client_tokens[name] = PublicSet(tok, self.data.public, cfg.model.max_length)
                self.vmaps[name] = cached_vocab_map(tok, llm.tokenizer)
        self.server_knowledge = None
        self._llm_eval: dict | None = None

    @property
    def llm(self):
        return get_resident(self.cfg, self.cfg.model.name)

    # ------------------------------------------------------------------ the round
    def run_round(self, rnd, ctx):
        # phase 0: local training, then (l_k^i, top-K_k^i) on the public set up to the server
        ups = ctx.fit({cid: FitIns(rnd, None, {"phase": "local", "upload": self.cfg.method.mutual})
                       for cid in ctx.sample()})
        ctx.log(self.learn_from_clients(rnd, ups), prefix="server/")
        if not ups:
            return
        # phase 1: the LLM's knowledge down; each client distils where the LLM beats it
        knowledge = self.llm_knowledge()
        downs = ctx.fit({cid: FitIns(rnd, None, {"phase": "distill"}, aux=knowledge) for cid in sorted(ups)})
        kept = {f"client_kept_client_{cid}": r.metrics.get("distill/kept", 0.0) for cid, r in sorted(downs.items())}
        if kept:
            kept["client_kept"] = sum(kept.values()) / len(kept)
        ctx.log(kept, prefix="server/")

    # ------------------------------------------------------------------ the server's distillation
    def learn_from_clients(self, rnd, results):
        m = self.cfg.method
        stats: dict = {}
        llm = self.llm
        if m.mutual and results:
            t0 = time.perf_counter()
            set_state(llm.model, self.global_state)
            cids = sorted(results)
            local = public_knowledge(llm.model, self.public, 0, m.public_batch_size)["loss"]
            losses = torch.stack([results[c].aux["loss"] for c in cids])
            if m.selection == "dualmince":
                keep, which = dual_min_ce(losses, local)
            else:
                keep, which = torch.ones_like(local, dtype=torch.bool), losses.argmin(0)
            indices = keep.nonzero().flatten().tolist()
            stats["server_kept"] = len(indices) / max(1, len(local))
            stats.update({f"server_kept/{t}": v for t, v in kept_by_task(self.public, keep).items()})
            for n, c in enumerate(cids):
                stats[f"chosen_client_{c}"] = sum(1 for i in indices if int(which[i]) == n) / max(1, len(local))
                stats[f"public_loss_client_{c}"] = float(losses[n].mean())
            stats["public_loss_llm"] = float(local.mean())
            if len(local):        # L_FT on every public sample, KD on the selected ones (README (FM-9))
                teachers = {}
                for i in indices:
                    c = cids[int(which[i])]
                    name = self.cfg.model.client_model(c)
                    teachers[i] = (name, self.client_tokens[name], results[c].aux)
                items = distill_items(self.aligner, teachers, self.vmaps, m.temperature, m.kd_positions, m.topk)
                out = train_distill(self.cfg, llm, items, m.server_epochs, m.server_lr or self.cfg.federation.lr,
                                    derive_seed(self.cfg.seed, "server-distill", rnd), m.lam, module_cls=ServerModule,
                                    server=True)
                stats.update({f"llm_{k.split('/', 1)[1]}_loss": v for k, v in out.items() if k.startswith("loss/")})
                for name in self.client_tokens:     # the share of the LLM's positions that pair (FM-5)
                    stats[f"aligned_{name}"] = self.aligner.matched_fraction(name)
                self.global_state = get_state(llm.model, llm.spec.communicated)
                self._llm_eval = None
            stats["time_llm_distill"] = time.perf_counter() - t0
            # uplink knowledge: positions summed over clients (each tokenizes the public set its own way),
            # beside Appendix C's per-client estimate N·S·K with S = model.max_length
            stats["knowledge_positions"] = sum(num_positions(results[c].aux) for c in cids)
            stats["paper_estimate_floats"] = paper_estimate(len(local), self.cfg.model.max_length, m.topk)
        return stats

    def check_upload(self, res) -> str | None:
        k = res.aux
        if k is None:
            return None
        if set(k) != {"loss", "offsets", "ids", "logits"}:
            return f"wrong keys {sorted(k)} (expected loss, offsets, ids, logits)"
        n, topk = len(self.public), self.cfg.method.topk
        if k["loss"].shape != (n,) or k["offsets"].shape != (n + 1,):
            return f"knowledge for {k['loss'].numel()} samples, expected {n}"
        if k["ids"].shape != k["logits"].shape or k["ids"].dim() != 2 or k["ids"].shape[1] != topk:
            return f"wrong shape: ids {tuple(k['ids'].shape)}, logits {tuple(k['logits'].shape)}, expected [T, {topk}]"
        if int(k["offsets"][-1]) != k["ids"].shape[0] or bool((k["offsets"].diff() < 0).any()):
            return "inconsistent offsets"
        return None

    def llm_knowledge(self) -> dict:
        m = self.cfg.method
        if self.server_knowledge is None or m.mutual:   # a frozen LLM's knowledge is computed once
            llm = self.llm
            set_state(llm.model, self.global_state)
            self.server_knowledge = public_knowledge(llm.model, self.public, m.topk, m.public_batch_size,
                                                     getattr(torch, m.logit_dtype))
        return self.server_knowledge

    # ------------------------------------------------------------------ evaluation: every SLM and the LLM
    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, None, {}) for cid in cids}   # each client's own adapter

    def evaluate(self, rnd, ctx) -> dict:
        """Every SLM on its client's tasks, and the LLM (server side) on every task (re-scored only after
        it changed)."""
        out = summarize_eval(ctx.evaluate(self.configure_evaluate(rnd, ctx.clients)))
        if self._llm_eval is None:
            llm = self.llm
            set_state(llm.model, self.global_state)
            self._llm_eval = evaluate_server_model(llm.model, llm.tokenizer, self.data, self.cfg, "llm/")
        return {**out, **self._llm_eval}

    def export_parties(self) -> list:
        """The server's LLM (its LoRA ω) and each client's SLM (its own LoRA), each on its own base model."""
        from fedlab.export import Party

        return [Party("llm", self.llm, self.global_state), *self.client_parties("slm_")]

    def state_dict(self):
        return {"global_state": self.global_state}

    def load_state_dict(self, state):
        self.global_state = state["global_state"]
        self._llm_eval = None
