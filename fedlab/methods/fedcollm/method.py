"""FedCoLLM (the Co-PLMs paper's baseline; fedlab/methods/fedcollm/README.md), read top to bottom:

round t      down: each device's SLM LoRA as the server last returned it; the device tunes it on its private
             data (CE) and uploads it;
server       one SLM architecture on every device: FedAvg of the SLM LoRAs, then mutual distillation between
             the LLM and the averaged SLM on the server's data (FedCoLLM as published); several architectures:
             mutual distillation between the LLM and each device's SLM in turn (fedlab's reading for
             heterogeneous devices), each device getting its own distilled LoRA back. Both sides train their
             LoRA on w·KL(other → self) + (1 − w)·CE (README (CL-1), (CL-2)) with the positions paired across
             tokenizers (fedlab/methods/coplms/README.md (CP-9)).
Deviation: FedCoLLM's KL over the full vocabulary needs one vocabulary; across tokenizers the KL is the
aligned top-K pooled KL that Co-PLMs uses (`mapped_pooled_kl`), so the two methods differ in their protocol,
not in their distillation loss.
"""
from __future__ import annotations

import time

import torch

from fedlab.aggregators import fedavg
from fedlab.align import cached_vocab_map
from fedlab.comm.messages import EvalIns, FitIns
from fedlab.eval.summary import summarize_eval
from fedlab.eval.tasks import evaluate_server_model
from fedlab.knowledge.mutual import MutualModule, named_losses, paired_items, train_mutual
from fedlab.methods.base import FedMethod
from fedlab.objectives.training import optimizer_args
from fedlab.runtime.resident import get_resident
from fedlab.seeding import derive_seed
from fedlab.transforms.lora import flatten_state, get_state, set_state, unflatten_like


class FedCoLLM(FedMethod):
    table_columns = (("final", "llm/", "LLM final (round {round})"),)
    progress_metrics = {"rougeL": "rougeL/mean", "acc": "acc/mean", "llm-rougeL": "llm/rougeL/mean"}

    def setup(self) -> None:
        n = self.data.num_clients
        self.names = [self.cfg.model.client_model(c) for c in range(n)]
        self.shared = len(set(self.names)) == 1
        self.states = {c: {k: v.clone() for k, v in get_resident(self.cfg, self.names[c]).init_state.items()}
                       for c in range(n)}
        self.llm_state = {k: v.clone() for k, v in self.llm.init_state.items()}
        self._items: dict[str, list] = {}
        self._llm_eval: dict | None = None

    @property
    def llm(self):
        return get_resident(self.cfg, self.cfg.model.name)

    def run_round(self, rnd, ctx):
        ups = ctx.fit({cid: FitIns(rnd, self.states[cid], {}) for cid in ctx.sample()})
        if not ups:
            return
        t0 = time.perf_counter()
        stats: dict = {}
        if self.shared:
            cids = sorted(ups)
            keys = list(self.states[cids[0]])
            counts = torch.tensor([float(ups[c].num_examples) for c in cids])
            avg = unflatten_like(fedavg(torch.stack([flatten_state(ups[c].state, keys) for c in cids]), counts),
                                 self.states[cids[0]])
            out = self.distill(rnd, self.names[cids[0]], avg, 0)
            for c in range(self.data.num_clients):
                self.states[c] = out["slm_state"]
            stats.update(out["stats"])
        else:
            for c in sorted(ups):
                out = self.distill(rnd, self.names[c], ups[c].state, c)
                self.states[c] = out["slm_state"]
                stats.update({f"{k}_client_{c}": v for k, v in out["stats"].items()})
        stats["time_server"] = time.perf_counter() - t0
        self._llm_eval = None
        ctx.log(stats, prefix="server/")

    def distill(self, rnd: int, name: str, slm_state: dict, which: int) -> dict:
        """Mutual distillation between the LLM (a) and one SLM (b) on the server's data."""
        m = self.cfg.method
        llm, slm = self.llm, get_resident(self.cfg, name)
        set_state(llm.model, self.llm_state)
        set_state(slm.model, slm_state)
        if name not in self._items:
            self._items[name] = paired_items(list(self.data.public), llm.tokenizer, slm.tokenizer,
                                             self.cfg.model.max_length, same_tokenizer=name == self.cfg.model.name)
        lr = m.server_lr or self.cfg.federation.lr
        opt = optimizer_args(self.cfg, lr)
        module = MutualModule(llm.model, llm.spec.trainable, slm.model, slm.spec.trainable, w_a=m.beta, w_b=m.alpha,
                              k=m.topk, vmap_ba=cached_vocab_map(slm.tokenizer, llm.tokenizer),
                              vmap_ab=cached_vocab_map(llm.tokenizer, slm.tokenizer), pool_index=m.pool_index,
                              kt_reduction=m.kt_reduction,
                              lr_a=lr, lr_b=lr, weight_decay=opt["weight_decay"], betas=opt["betas"])
        out = train_mutual(self.cfg, module, self._items[name], (llm.tokenizer.pad_token_id, slm.tokenizer.pad_token_id),
                           m.server_epochs, derive_seed(self.cfg.seed, "fedcollm-server", rnd, which), server=True)
        self.llm_state = get_state(llm.model, llm.spec.communicated)
        stats = named_losses(out, "llm", "slm", "kd_")
        return {"slm_state": get_state(slm.model, slm.spec.communicated), "stats": stats}

    def check_upload(self, res) -> str | None:
        ref = self.states[res.cid]
        if res.state is None or set(res.state) != set(ref):
            return "the upload is not the device's SLM LoRA"
        return None

    def configure_evaluate(self, rnd, cids):
        return {cid: EvalIns(rnd, self.states[cid], {}) for cid in cids}   # each device's distilled LoRA

    def evaluate(self, rnd, ctx) -> dict:
        out = summarize_eval(ctx.evaluate(self.configure_evaluate(rnd, ctx.clients)))
        if self._llm_eval is None:
            llm = self.llm
            set_state(llm.model, self.llm_state)
            self._llm_eval = evaluate_server_model(llm.model, llm.tokenizer, self.data, self.cfg, "llm/")
        return {**out, **self._llm_eval}

    def state_dict(self):
        return {"states": self.states, "llm_state": self.llm_state}

    def load_state_dict(self, state):
        self.states = {int(k): v for k, v in state["states"].items()}
        self.llm_state = state["llm_state"]
        self._llm_eval = None

    def final_adapters(self):
        return self.llm_state
