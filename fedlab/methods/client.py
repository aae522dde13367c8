"""`LoraClient`, the client of every LoRA method: a Lightning Trainer per round over the resident model
(the base, transformed as the instruction's `transform` names), with the method's loss terms; and
`PooledClient`, which trains one model on every client's data (centralized baselines)."""
from __future__ import annotations

import time

import torch
from torch.utils.data import DataLoader

from fedlab.comm.messages import EvalIns, EvalRes, FitIns, FitRes
from fedlab.data.collate import PadCollator, TokenizedExamples
from fedlab.eval import cache
from fedlab.objectives.modules import ClientModule, Weighted, fit_metrics
from fedlab.objectives.training import make_trainer, optimizer_args
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms import chain_from_wire, get_state, set_state


class LoraClient:
    """Fits the resident model's LoRA on the client's data from the received (or its own) state and
    returns the communicated parameters. Subclasses add loss terms with `terms()` and choose their
    training data with `train_examples()`."""

    def __init__(self, host, cid: int):
        self.host, self.cid = host, cid
        self.own_state: dict | None = None     # the client's latest local state (standalone, resume)
        self.chain: tuple = ()                 # the model transforms of the latest instruction
        self._datasets: dict = {}

    @property
    def cfg(self):
        return self.host.cfg

    @property
    def resident(self):
        return self.host.resident_for(self.cid, self.chain)

    def use_model(self, ins) -> None:
        """Switch to the model the instruction names (its `transform` chain; none: the base)."""
        self.chain = chain_from_wire(ins.config.get("transform"))

    def train_examples(self, ins: FitIns):
        return self.host.data.train[self.cid]

    def data_key(self, ins: FitIns) -> str:
        """Names the examples `train_examples` returns (their tokenisation is cached under it)."""
        return "own"

    def dataset(self, key: str, examples) -> TokenizedExamples:
        if key not in self._datasets:
            self._datasets[key] = TokenizedExamples(self.resident.tokenizer, list(examples),
                                                    self.cfg.model.max_length)
        return self._datasets[key]

    def terms(self, ins: FitIns, start: dict) -> list[Weighted]:
        return []

    def learning_rate(self) -> float:
        return self.cfg.federation.lr

    def start_state(self, ins) -> dict:
        if ins.state is not None:
            return ins.state
        return self.own_state if self.own_state is not None else self.resident.init_state

    def fit(self, ins: FitIns) -> FitRes:
        self.use_model(ins)
        res = self.resident
        start = self.start_state(ins)
        set_state(res.model, start)
        seed = derive_seed(self.cfg.seed, "fit", ins.round, self.cid)
        seed_everything(seed)
        ds = self.dataset(self.data_key(ins), self.train_examples(ins))
        loader = DataLoader(ds, batch_size=self.cfg.federation.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(seed),
                            collate_fn=PadCollator(res.tokenizer.pad_token_id))
        module = self.module(res, ins, start)
        t0 = time.perf_counter()
        res.model.train()
        self.train_module(module, loader)
        res.model.eval()
        metrics = fit_metrics(module)
        metrics["time/fit"] = time.perf_counter() - t0
        new = get_state(res.model, res.spec.communicated)
        self.own_state = new
        return FitRes(self.cid, ins.round, new, len(ds), metrics)

    def module(self, res, ins: FitIns, start: dict) -> ClientModule:
        """The LightningModule of this fit: the task loss plus the method's `terms`."""
        return ClientModule(res.model, res.spec.trainable, self.terms(ins, start),
                            **optimizer_args(self.cfg, self.learning_rate()))

    def train_module(self, module, loader) -> None:
        make_trainer(self.cfg).fit(module, loader)

    def evaluate(self, ins: EvalIns) -> EvalRes:
        self.use_model(ins)
        res = self.resident
        state = self.start_state(ins)
        tag = ins.config.get("tag")
        metrics = {}
        loaded = False
        model_hash = None      # the loaded model's digest for the cross-run score cache, computed once
        asked = ins.config.get("tasks")     # a subset of the client's tasks (eval.overlap splits the last round)
        for task in self.host.data.client_tasks(self.cid):
            if asked is not None and task not in asked:
                continue
            own = self.host.data.client_test is not None   # per-client test splits: scores are per client
            key = (res.name, self.chain, tag, task, self.cid if own else None)
            if tag is not None and key in self.host.eval_cache:
                metrics.update(self.host.eval_cache[key])
                continue
            if not loaded:
                set_state(res.model, state)
                loaded = True
                if self.cfg.eval.cache and cache.cacheable(res.model):
                    model_hash = cache.model_digest(res.model)
            out = self.host.evaluate_task(res, task, self.cid, model_hash)
            if tag is not None:
                self.host.eval_cache[key] = out
            metrics.update(out)
        return EvalRes(self.cid, ins.round, metrics)


class PooledClient(LoraClient):
    """With `pooled` in the instruction, trains on the union of every client's partition (plus the public
    set with `include_public`): one trainer for centralized baselines, hosted by the client asked."""

    def train_examples(self, ins):
        if not ins.config.get("pooled"):
            return super().train_examples(ins)
        data = self.host.data
        return data.pooled_train() + (tuple(data.public) if ins.config.get("include_public") else ())

    def data_key(self, ins):
        return "pooled" if ins.config.get("pooled") else "own"
