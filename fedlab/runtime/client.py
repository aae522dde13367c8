"""The client side: `ClientHost` hosts one or more clients in a process (the driver for the in-process
backend, an actor for Ray); `LoraClient` is the client of every LoRA method — a Lightning Trainer per
round over the resident model, with the method's loss terms."""
from __future__ import annotations

import time

import lightning as L
import torch
from torch.utils.data import DataLoader

from fedlab.comm.messages import EvalIns, EvalRes, FitIns, FitRes
from fedlab.data.collate import PadCollator, TokenizedExamples
from fedlab.data.federated import build_federated_data
from fedlab.eval.tasks import evaluate_task
from fedlab.objectives.modules import ClientModule, Weighted
from fedlab.runtime.resident import as_transform, get_resident, quiet_libraries, resolve_device
from fedlab.seeding import derive_seed, seed_everything
from fedlab.transforms.lora import get_state, set_state


def make_trainer(cfg, max_epochs: int | None = None, max_steps: int | None = None) -> L.Trainer:
    device = resolve_device(cfg.backend.device)
    steps = max_steps if max_steps is not None else cfg.federation.local_steps
    epochs = max_epochs if max_epochs is not None else cfg.federation.local_epochs
    return L.Trainer(
        accelerator="gpu" if device == "cuda" else "cpu", devices=1,
        max_epochs=-1 if steps else epochs, max_steps=steps or -1,
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
        num_sanity_val_steps=0, gradient_clip_val=1.0, deterministic=False)


def optimizer_args(cfg, lr: float | None = None) -> dict:
    f = cfg.federation
    return dict(lr=lr if lr is not None else f.lr, weight_decay=f.weight_decay, betas=tuple(f.betas),
                warmup_ratio=f.warmup_ratio)


class LoraClient:
    """Fits the resident model's LoRA on the client's data from the received (or its own) state and
    returns the communicated parameters. Subclasses add loss terms with `terms()`."""

    def __init__(self, host: ClientHost, cid: int):
        self.host, self.cid = host, cid
        self.own_state: dict | None = None     # the client's latest local state (standalone, resume)
        self._datasets: dict = {}

    @property
    def cfg(self):
        return self.host.cfg

    transform: tuple | None = None   # the model transform of the latest instruction (e.g. FedProxy's proxy)

    @property
    def resident(self):
        return self.host.resident_for(self.cid, self.transform)

    def train_examples(self, ins: FitIns):
        data = self.host.data
        if ins.config.get("pooled"):
            extra = data.public if ins.config.get("include_public") else ()
            return data.pooled_train() + tuple(extra)
        return data.train[self.cid]

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
        self.transform = as_transform(ins.config.get("transform"))
        res = self.resident
        start = self.start_state(ins)
        set_state(res.model, start)
        seed = derive_seed(self.cfg.seed, "fit", ins.round, self.cid)
        seed_everything(seed)
        ds = self.dataset("pooled" if ins.config.get("pooled") else "own", self.train_examples(ins))
        loader = DataLoader(ds, batch_size=self.cfg.federation.batch_size, shuffle=True,
                            generator=torch.Generator().manual_seed(seed),
                            collate_fn=PadCollator(res.tokenizer.pad_token_id))
        module = ClientModule(res.model, res.spec.trainable, self.terms(ins, start),
                              **optimizer_args(self.cfg, self.learning_rate()))
        t0 = time.perf_counter()
        res.model.train()
        make_trainer(self.cfg).fit(module, loader)
        res.model.eval()
        metrics = {k: float(v) for k, v in module.trainer.callback_metrics.items()}
        metrics["time/fit"] = time.perf_counter() - t0
        new = get_state(res.model, res.spec.communicated)
        self.own_state = new
        return FitRes(self.cid, ins.round, new, len(ds), metrics)

    def evaluate(self, ins: EvalIns) -> EvalRes:
        self.transform = as_transform(ins.config.get("transform"))
        res = self.resident
        state = self.start_state(ins)
        tag = ins.config.get("tag")
        metrics = {}
        loaded = False
        for task in self.host.data.client_tasks(self.cid):
            key = (res.name, self.transform, tag, task)
            if tag is not None and key in self.host.eval_cache:
                metrics.update(self.host.eval_cache[key])
                continue
            if not loaded:
                set_state(res.model, state)
                loaded = True
            out = self.host.evaluate_task(res, task)
            if tag is not None:
                self.host.eval_cache[key] = out
            metrics.update(out)
        return EvalRes(self.cid, ins.round, metrics)


class ClientHost:
    """Hosts clients in one process: rebuilds the federated data from the config (deterministic),
    keeps one resident model per base, dispatches fit/evaluate to the method's client class."""

    def __init__(self, cfg, cids: list[int], payloads: dict | None = None):
        from fedlab import registry

        quiet_libraries()
        torch.set_num_threads(cfg.backend.threads)
        self.cfg = cfg
        self.data = build_federated_data(cfg.data, cfg.seed)
        self.payloads = payloads or {}
        self.eval_cache: dict = {}
        self.shared: dict = {}   # per-process state a method's clients share (e.g. FedMKT's public-set views)
        client_cls = registry.get(cfg.method.name).method_cls.client_cls
        self.clients = {cid: client_cls(self, cid) for cid in cids}
        from fedlab.runtime.faults import FaultInjector

        self.faults = FaultInjector(cfg.faults, cfg.data.num_clients)

    def model_name_for(self, cid: int) -> str:
        return self.cfg.model.client_model(cid)

    def resident_for(self, cid: int, transform: tuple | None = None):
        name = self.model_name_for(cid)
        return get_resident(self.cfg, name, self.payloads.get(name), transform)

    def fit(self, cid: int, ins: FitIns, cancel=None) -> FitRes:
        self.faults.before_fit(cid, ins.round, cancel)
        return self.faults.after_fit(cid, ins, self.clients[cid].fit(ins))

    def evaluate(self, cid: int, ins: EvalIns) -> EvalRes:
        return self.clients[cid].evaluate(ins)

    def evaluate_task(self, res, task: str) -> dict:
        return evaluate_task(res.model, res.tokenizer, self.data, task, self.cfg)

    def client_state(self, cid: int):
        return self.clients[cid].own_state

    def set_client_state(self, cid: int, state) -> None:
        self.clients[cid].own_state = state
