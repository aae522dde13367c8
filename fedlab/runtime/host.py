"""`ClientHost` hosts one or more clients in a process (the driver for the in-process backend, an actor
for Ray): it rebuilds the federated data from the config (deterministic), keeps one resident model per
base, and dispatches fit/evaluate to the client class the method registered."""
from __future__ import annotations

import torch

from fedlab.comm.messages import EvalIns, EvalRes, FitIns, FitRes
from fedlab.data.federated import build_federated_data
from fedlab.eval.tasks import evaluate_task
from fedlab.quiet import quiet_libraries
from fedlab.runtime.faults import FaultInjector
from fedlab.runtime.resident import get_resident


class ClientHost:
    def __init__(self, cfg, cids: list[int], payloads: dict | None = None):
        from fedlab import registry

        quiet_libraries()
        torch.set_num_threads(cfg.backend.threads)
        self.cfg = cfg
        self.data = build_federated_data(cfg.data, cfg.seed)
        self.payloads = payloads or {}
        self.eval_cache: dict = {}
        self.shared: dict = {}   # per-process state a method's clients share (e.g. public-set views)
        registry.load_plugins(cfg.plugins)   # a worker process imports the config's plugin methods too
        client_cls = registry.get(cfg.method.name).client_cls
        self.clients = {cid: client_cls(self, cid) for cid in cids}
        self.faults = FaultInjector(cfg.faults, cfg.data.num_clients)

    def model_name_for(self, cid: int) -> str:
        return self.cfg.model.client_model(cid)

    def resident_for(self, cid: int, chain: tuple = ()):
        name = self.model_name_for(cid)
        return get_resident(self.cfg, name, self.payloads.get(name), chain)

    def fit(self, cid: int, ins: FitIns, cancel=None) -> FitRes:
        self.faults.before_fit(cid, ins.round, cancel)
        return self.faults.after_fit(cid, ins, self.clients[cid].fit(ins))

    def evaluate(self, cid: int, ins: EvalIns) -> EvalRes:
        return self.clients[cid].evaluate(ins)

    def evaluate_task(self, res, task: str, cid: int | None = None, model_hash: str | None = None) -> dict:
        return evaluate_task(res.model, res.tokenizer, self.data, task, self.cfg, cid, model_hash)

    def client_state(self, cid: int):
        return self.clients[cid].own_state

    def set_client_state(self, cid: int, state) -> None:
        self.clients[cid].own_state = state
